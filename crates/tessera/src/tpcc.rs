//! `tessera bench tpcc`: TPC-C over the PostgreSQL wire protocol, against Tessera or against
//! PostgreSQL itself, with the same driver, schema and statements.
//!
//! - **Load** (`--load`): drops and creates the nine tables of clause 1.3 (the specification's
//!   types; nothing Tessera-specific), and loads the population of clause 4.3.3.1 for
//!   `--warehouses` with COPY over `--load-connections` connections, with a progress bar.
//!   `--items` and `--customers` reduce the population for tests and quick runs (a reduced
//!   population is not a TPC-C result; reports say which was used).
//! - **Run**: `--terminals` closed-loop terminals with no keying or think time, each with one
//!   connection (spread over `--hosts`) and a home warehouse (terminal `i` serves warehouse
//!   `i mod W + 1`), draw the standard mix (45 % New-Order, 43 % Payment, 4 % each of
//!   Order-Status, Delivery and Stock-Level) for `--duration` seconds, after `--warmup`.
//!   A transaction refused for a conflict (SQLSTATE 40001, 40P01 or 55P03) is rolled back
//!   and run again with the same inputs: each refusal is an abort. The 1 % of New-Orders that
//!   name an unused item roll back by design and count as completed (clause 2.4.2.3).
//!   A progress line shows New-Orders per minute (tpmC), aborts and errors as the run goes.
//! - **Report**: tpmC, transactions per second, per type count, aborts and latency
//!   percentiles; as JSON lines to `--json`.
//! - **Check** (`--check`): clause 3.3.2's consistency conditions 1–4 over the whole database
//!   after the run (a TPC-C database whose transactions were atomic and isolated meets them).

mod load;
mod random;
mod transactions;

use anyhow::{bail, Context};
use clap::Args;
use hdrhistogram::Histogram;
use random::Constants;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use stdx::Prng;
use tokio_postgres::Client;
use transactions::{Ended, Failure, Kind};

#[derive(Args, Clone)]
pub struct TpccArguments {
    /// PostgreSQL-protocol servers, `host:port`; connections are spread over them round-robin.
    #[arg(long, value_delimiter = ',', default_value = "127.0.0.1:5433")]
    hosts: Vec<String>,
    /// User name sent at startup.
    #[arg(long, default_value = "postgres")]
    user: String,
    /// Password, if the server asks for one (or PGPASSWORD).
    #[arg(long, env = "PGPASSWORD")]
    password: Option<String>,
    /// Database name sent at startup.
    #[arg(long, default_value = "postgres")]
    dbname: String,
    /// Warehouses (W).
    #[arg(long, default_value_t = 1)]
    warehouses: u64,
    /// Drop, create and load the tables before running.
    #[arg(long)]
    load: bool,
    /// Items (100,000 in TPC-C; fewer reduces the population: not a TPC-C result).
    #[arg(long, default_value_t = 100_000)]
    items: u64,
    /// Customers and initial orders per district (3,000 in TPC-C; fewer reduces the population).
    #[arg(long, default_value_t = 3_000)]
    customers: u64,
    /// Connections loading at once.
    #[arg(long, default_value_t = 4)]
    load_connections: usize,
    /// Rows per COPY statement while loading.
    #[arg(long, default_value_t = 2_000)]
    chunk: u64,
    /// Terminals (connections) running transactions; 0 skips the run.
    #[arg(long, default_value_t = 10)]
    terminals: usize,
    /// Seconds measured.
    #[arg(long, default_value_t = 30.0)]
    duration: f64,
    /// Seconds run before measuring.
    #[arg(long, default_value_t = 0.0)]
    warmup: f64,
    /// The isolation level each transaction begins with.
    #[arg(long, default_value = "SERIALIZABLE")]
    isolation: String,
    /// After the run, check the consistency conditions of clause 3.3.2 (1–4); exit 1 if one fails.
    #[arg(long)]
    check: bool,
    /// The seed of the population and of the terminals' inputs.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// With --load on Tessera: create the tables with the specification's DDL alone, without
    /// the placement of `load::PLACEMENT` (warehouse-keyed tables co-located, ITEM everywhere),
    /// to measure what the placement changes.
    #[arg(long)]
    no_placement: bool,
    /// The system's name in reports.
    #[arg(long, default_value = "tessera")]
    label: String,
    /// Append one JSON object for the load and one for the run to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

/// The population's size (clause 4.3.3.1, or reduced).
#[derive(Clone, Copy, Debug)]
pub struct Scale {
    pub items: u64,
    pub customers: u64,
}

impl Scale {
    /// Last names in use: numbers 0..=999, or fewer for a reduced population.
    pub fn last_names(&self) -> u64 {
        self.customers.min(1000)
    }

    /// The first undelivered order of a district: orders 2,101..=3,000 of 3,000 are new orders
    /// (the last 30 %).
    pub fn first_new_order(&self) -> u64 {
        self.customers - self.new_orders() + 1
    }

    pub fn new_orders(&self) -> u64 {
        self.customers * 900 / 3000
    }

    pub fn is_standard(&self) -> bool {
        self.items == 100_000 && self.customers == 3_000
    }
}

/// A server error as `SQLSTATE: message`, or the client's error.
pub fn describe(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => error.to_string(),
    }
}

/// Whether a server error is a conflict the transaction is retried for.
fn is_conflict(error: &tokio_postgres::Error) -> bool {
    error
        .as_db_error()
        .is_some_and(|db| matches!(db.code().code(), "40001" | "40P01" | "55P03"))
}

/// Why a conflict aborted a transaction, from its SQLSTATE and Tessera's message
/// (`engine::EngineError`'s texts); PostgreSQL's own conflicts fall in the last three.
fn abort_cause(error: &tokio_postgres::Error) -> &'static str {
    let Some(db) = error.as_db_error() else {
        return "other";
    };
    let message = db.message();
    match db.code().code() {
        "40001" if message.contains("deadlock detected") => "deadlock",
        "40001" if message.contains("execution-order rule") => "execution-order",
        "40001" if message.contains("held locks another statement waited for") => "abandoned",
        "40001" => "serialization (other)",
        "40P01" => "deadlock (40P01)",
        "55P03" if message.contains("is not decided yet") => "busy two-phase statement",
        "55P03" => "lock wait patience",
        _ => "other",
    }
}

pub fn run(arguments: TpccArguments) -> anyhow::Result<()> {
    if arguments.hosts.is_empty() || arguments.warehouses == 0 || arguments.chunk == 0 {
        bail!("--hosts, --warehouses and --chunk must be non-empty and positive");
    }
    if arguments.items < 100 || arguments.customers < 30 {
        bail!("--items must be at least 100 and --customers at least 30");
    }
    if !arguments
        .isolation
        .chars()
        .all(|character| character.is_ascii_alphabetic() || character == ' ')
    {
        bail!("--isolation must be an isolation level, such as SERIALIZABLE");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(drive(arguments))
}

async fn connect(arguments: &TpccArguments, index: usize) -> anyhow::Result<Client> {
    crate::pg_client::connect(
        &arguments.hosts,
        index,
        &arguments.user,
        &arguments.dbname,
        arguments.password.as_deref(),
    )
    .await
}

fn emit(arguments: &TpccArguments, json: String) -> anyhow::Result<()> {
    crate::pg_client::append_json(arguments.json.as_deref(), &json)
}

fn scale_of(arguments: &TpccArguments) -> Scale {
    Scale {
        items: arguments.items,
        customers: arguments.customers,
    }
}

/// The load's NURand constants: drawn from the seed, so a run knows them without asking the
/// database.
fn load_constants(seed: u64) -> Constants {
    Constants::for_load(&mut Prng::new(seed ^ 0x7bcc_0001))
}

async fn load(arguments: &TpccArguments) -> anyhow::Result<()> {
    let scale = scale_of(arguments);
    let first = connect(arguments, 0).await?;
    let placed = load::create_schema(&first, !arguments.no_placement)
        .await
        .context("creating the schema")?;
    let parts = load::parts(arguments.warehouses);
    let total: u64 = parts.iter().map(|part| load::rows_of(*part, &scale)).sum();
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let constants = load_constants(arguments.seed);
    let queue = Arc::new(std::sync::Mutex::new(parts));
    let mut loaders = Vec::new();
    for index in 0..arguments.load_connections.max(1) {
        let client = connect(arguments, index).await?;
        let queue = queue.clone();
        let done = done.clone();
        let (seed, chunk) = (arguments.seed, arguments.chunk);
        loaders.push(tokio::spawn(async move {
            loop {
                let part = queue.lock().expect("not poisoned").pop();
                let Some(part) = part else {
                    return Ok::<(), anyhow::Error>(());
                };
                load::load_part(&client, part, &scale, constants, seed, chunk, done.clone())
                    .await
                    .with_context(|| format!("loading {part:?}"))?;
            }
        }));
    }
    let finished = Arc::new(AtomicBool::new(false));
    let ticker = {
        let (done, finished) = (done.clone(), finished.clone());
        tokio::spawn(async move {
            while !finished.load(Ordering::Relaxed) {
                progress_bar(done.load(Ordering::Relaxed), total, started.elapsed());
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };
    let mut outcome = Ok(());
    for loader in loaders {
        if let Err(error) = loader.await? {
            outcome = Err(error);
        }
    }
    finished.store(true, Ordering::Relaxed);
    ticker.await?;
    outcome?;
    let rows = done.load(Ordering::Relaxed);
    progress_bar(rows, rows, started.elapsed());
    eprintln!();
    if arguments.label.starts_with("postgres") {
        first.simple_query("VACUUM ANALYZE").await?;
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{}: loaded {} warehouse(s), {rows} rows in {seconds:.1}s ({:.0} rows/s){}{}",
        arguments.label,
        arguments.warehouses,
        rows as f64 / seconds,
        if placed {
            ", tables placed by warehouse (load::PLACEMENT)"
        } else {
            ""
        },
        if scale.is_standard() {
            String::new()
        } else {
            format!(
                " (reduced population: {} items, {} customers per district)",
                scale.items, scale.customers
            )
        }
    );
    emit(
        arguments,
        format!(
            "{{\"event\":\"load\",\"system\":\"{}\",\"warehouses\":{},\"items\":{},\
             \"customers\":{},\"rows\":{rows},\"seconds\":{seconds:.3},\"placed\":{placed}}}",
            arguments.label, arguments.warehouses, scale.items, scale.customers
        ),
    )
}

fn progress_bar(done: u64, total: u64, elapsed: Duration) {
    let width = 30;
    let fraction = (done as f64 / total.max(1) as f64).min(1.0);
    let filled = (fraction * width as f64) as usize;
    let bar: String = (0..width)
        .map(|index| if index < filled { '=' } else { ' ' })
        .collect();
    let seconds = elapsed.as_secs_f64();
    eprint!(
        "\rloading [{bar}] {:>3.0}% {done}/~{total} rows, {:.0} rows/s, {seconds:.1}s\x1b[K",
        fraction * 100.0,
        done as f64 / seconds.max(1e-9)
    );
    let _ = std::io::stderr().flush();
}

/// What every terminal counts, shared so the progress line can read it.
#[derive(Default)]
struct Counters {
    new_orders: AtomicU64,
    completed: AtomicU64,
    aborts: AtomicU64,
    errors: AtomicU64,
}

/// One terminal's measurements.
struct Tally {
    latency: BTreeMap<Kind, Histogram<u64>>,
    aborts: BTreeMap<Kind, u64>,
    /// Aborts by cause (`abort_cause`).
    causes: BTreeMap<&'static str, u64>,
    /// Time spent in attempts that aborted, and in the pauses before their retries (µs).
    aborted_us: u64,
    rolled_back: u64,
    errors: u64,
    error_sample: Option<String>,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

impl Tally {
    fn new() -> Tally {
        Tally {
            latency: Kind::ALL.iter().map(|kind| (*kind, histogram())).collect(),
            aborts: Kind::ALL.iter().map(|kind| (*kind, 0)).collect(),
            causes: BTreeMap::new(),
            aborted_us: 0,
            rolled_back: 0,
            errors: 0,
            error_sample: None,
        }
    }

    fn merge(&mut self, other: Tally) {
        for (kind, histogram) in other.latency {
            self.latency
                .get_mut(&kind)
                .expect("every kind")
                .add(&histogram)
                .expect("same bounds");
        }
        for (kind, aborts) in other.aborts {
            *self.aborts.get_mut(&kind).expect("every kind") += aborts;
        }
        for (cause, aborts) in other.causes {
            *self.causes.entry(cause).or_default() += aborts;
        }
        self.aborted_us += other.aborted_us;
        self.rolled_back += other.rolled_back;
        self.errors += other.errors;
        if self.error_sample.is_none() {
            self.error_sample = other.error_sample;
        }
    }
}

/// Aborts in a row after which a transaction is given up as an error.
const ATTEMPTS_MAX: u32 = 1_000;

#[allow(clippy::too_many_arguments)]
async fn terminal(
    client: Client,
    w: u64,
    arguments: Arc<TpccArguments>,
    constants: Constants,
    seed: u64,
    measure_from: Instant,
    deadline: Instant,
    counters: Arc<Counters>,
) -> Tally {
    let scale = scale_of(&arguments);
    let mut prng = Prng::new(seed);
    let mut tally = Tally::new();
    while Instant::now() < deadline {
        let kind = Kind::draw(&mut prng);
        let input =
            transactions::draw(kind, w, arguments.warehouses, &scale, &constants, &mut prng);
        assert_eq!(input.kind(), kind, "drawn inputs are of the drawn kind");
        let started = Instant::now();
        let mut attempts = 0;
        // This transaction's aborts: counted with it, only if it is measured (begun after the
        // warm-up, ended before the deadline), so that the abort rate's numerator and
        // denominator count the same transactions.
        let mut causes: Vec<&'static str> = Vec::new();
        let mut aborted_us = 0u64;
        let outcome = loop {
            attempts += 1;
            let attempt_started = Instant::now();
            match transactions::execute(&client, &input, &arguments.isolation).await {
                Ok(ended) => break Ok(ended),
                Err(failure) => {
                    let _ = client.simple_query("ROLLBACK").await;
                    let conflict = match &failure {
                        Failure::Server(error) if is_conflict(error) => Some(abort_cause(error)),
                        _ => None,
                    };
                    if let (Some(cause), true, false) =
                        (conflict, attempts < ATTEMPTS_MAX, client.is_closed())
                    {
                        // A short pause lets the older transaction that won finish.
                        let pause = prng.range_inclusive(0, 2 * u64::from(attempts.min(10)));
                        tokio::time::sleep(Duration::from_millis(pause)).await;
                        causes.push(cause);
                        aborted_us += attempt_started.elapsed().as_micros() as u64;
                        if attempt_started >= measure_from {
                            // The progress line's count, as it happens.
                            counters.aborts.fetch_add(1, Ordering::Relaxed);
                        }
                        continue;
                    }
                    break Err(failure);
                }
            }
        };
        let finished = Instant::now();
        if started < measure_from || finished > deadline {
            // Warm-up, or past the end: not measured.
            if client.is_closed() {
                break;
            }
            continue;
        }
        *tally.aborts.get_mut(&kind).expect("every kind") += causes.len() as u64;
        for cause in causes {
            *tally.causes.entry(cause).or_default() += 1;
        }
        tally.aborted_us += aborted_us;
        match outcome {
            Ok(ended) => {
                let micros = finished.duration_since(started).as_micros().max(1) as u64;
                tally
                    .latency
                    .get_mut(&kind)
                    .expect("every kind")
                    .saturating_record(micros);
                counters.completed.fetch_add(1, Ordering::Relaxed);
                if kind == Kind::NewOrder {
                    counters.new_orders.fetch_add(1, Ordering::Relaxed);
                }
                if ended == Ended::RolledBack {
                    tally.rolled_back += 1;
                }
            }
            Err(failure) => {
                tally.errors += 1;
                counters.errors.fetch_add(1, Ordering::Relaxed);
                if tally.error_sample.is_none() {
                    let text = match &failure {
                        Failure::Server(error) => describe(error),
                        Failure::Invariant(text) => text.clone(),
                    };
                    tally.error_sample = Some(format!("{}: {text}", kind.name()));
                }
                if client.is_closed() {
                    break;
                }
            }
        }
    }
    tally
}

async fn run_terminals(arguments: &TpccArguments) -> anyhow::Result<()> {
    let arguments = Arc::new(arguments.clone());
    let mut clients = Vec::new();
    for index in 0..arguments.terminals {
        clients.push(connect(&arguments, index).await?);
    }
    let constants = Constants::for_run(
        load_constants(arguments.seed),
        &mut Prng::new(arguments.seed ^ 0x7bcc_0002),
    );
    let counters = Arc::new(Counters::default());
    let started = Instant::now();
    let measure_from = started + Duration::from_secs_f64(arguments.warmup);
    let deadline = measure_from + Duration::from_secs_f64(arguments.duration);
    let mut tasks = Vec::new();
    for (index, client) in clients.into_iter().enumerate() {
        let w = index as u64 % arguments.warehouses + 1;
        let seed = arguments
            .seed
            .wrapping_mul(1_000_003)
            .wrapping_add(index as u64 + 1);
        tasks.push(tokio::spawn(terminal(
            client,
            w,
            arguments.clone(),
            constants,
            seed,
            measure_from,
            deadline,
            counters.clone(),
        )));
    }
    let finished = Arc::new(AtomicBool::new(false));
    let ticker =
        {
            let (counters, finished) = (counters.clone(), finished.clone());
            let total = arguments.warmup + arguments.duration;
            tokio::spawn(async move {
                while !finished.load(Ordering::Relaxed) {
                    let now = Instant::now();
                    let measured = now.saturating_duration_since(measure_from).as_secs_f64();
                    let new_orders = counters.new_orders.load(Ordering::Relaxed);
                    let completed = counters.completed.load(Ordering::Relaxed);
                    let aborts = counters.aborts.load(Ordering::Relaxed);
                    eprint!(
                    "\r{:>5.1}/{total:.0}s {}: {new_orders} New-Orders ({:.0} tpmC), {completed} \
                     transactions, {aborts} aborts, {} errors\x1b[K",
                    now.duration_since(started).as_secs_f64(),
                    if now < measure_from { "warm-up" } else { "measuring" },
                    new_orders as f64 * 60.0 / measured.max(1e-9),
                    counters.errors.load(Ordering::Relaxed)
                );
                    let _ = std::io::stderr().flush();
                    tokio::time::sleep(Duration::from_millis(1000)).await;
                }
            })
        };
    let mut tally = Tally::new();
    for task in tasks {
        tally.merge(task.await?);
    }
    finished.store(true, Ordering::Relaxed);
    ticker.await?;
    eprintln!();
    report(&arguments, &tally)
}

fn report(arguments: &TpccArguments, tally: &Tally) -> anyhow::Result<()> {
    let seconds = arguments.duration;
    let completed: u64 = tally.latency.values().map(Histogram::len).sum();
    let aborts: u64 = tally.aborts.values().sum();
    let new_orders = tally.latency[&Kind::NewOrder].len();
    let tpmc = new_orders as f64 * 60.0 / seconds;
    let abort_rate = aborts as f64 / (completed + aborts).max(1) as f64;
    println!(
        "{}: W={} terminals={} {:.0}s{}: {tpmc:.0} tpmC, {:.1} transactions/s, abort rate \
         {:.2}% ({aborts} aborts), {} New-Order rollbacks, {} errors{}",
        arguments.label,
        arguments.warehouses,
        arguments.terminals,
        seconds,
        if scale_of(arguments).is_standard() {
            ""
        } else {
            " (reduced population)"
        },
        completed as f64 / seconds,
        abort_rate * 100.0,
        tally.rolled_back,
        tally.errors,
        match &tally.error_sample {
            Some(sample) => format!(" (first: {sample})"),
            None => String::new(),
        }
    );
    let causes: Vec<String> = tally
        .causes
        .iter()
        .map(|(cause, aborts)| format!("{cause} {aborts}"))
        .collect();
    let busy_us: u64 = tally
        .latency
        .values()
        .map(|histogram| {
            histogram
                .iter_recorded()
                .map(|v| v.value_iterated_to() * v.count_at_value())
                .sum::<u64>()
        })
        .sum();
    println!(
        "  aborts by cause: {}; time in aborted attempts and their pauses {:.1} s of {:.1} s \
         spent in measured transactions",
        if causes.is_empty() {
            "none".to_string()
        } else {
            causes.join(", ")
        },
        tally.aborted_us as f64 / 1e6,
        busy_us as f64 / 1e6,
    );
    let mut kinds = Vec::new();
    for kind in Kind::ALL {
        let histogram = &tally.latency[&kind];
        let aborts = tally.aborts[&kind];
        let ms = |quantile: f64| histogram.value_at_quantile(quantile) as f64 / 1000.0;
        println!(
            "  {:<12} {:>8} done {:>6} aborts  latency ms p50 {:>8.2} p90 {:>8.2} p99 {:>8.2} \
             max {:>8.2}",
            kind.name(),
            histogram.len(),
            aborts,
            ms(0.5),
            ms(0.9),
            ms(0.99),
            histogram.max() as f64 / 1000.0
        );
        kinds.push(format!(
            "\"{}\":{{\"count\":{},\"aborts\":{aborts},\"p50_ms\":{:.3},\"p90_ms\":{:.3},\
             \"p99_ms\":{:.3},\"max_ms\":{:.3}}}",
            kind.name(),
            histogram.len(),
            ms(0.5),
            ms(0.9),
            ms(0.99),
            histogram.max() as f64 / 1000.0
        ));
    }
    emit(
        arguments,
        format!(
            "{{\"event\":\"run\",\"system\":\"{}\",\"warehouses\":{},\"terminals\":{},\
             \"items\":{},\"customers\":{},\"isolation\":\"{}\",\"seconds\":{seconds},\
             \"tpmc\":{tpmc:.1},\"transactions_per_second\":{:.3},\"completed\":{completed},\
             \"aborts\":{aborts},\"abort_rate\":{abort_rate:.5},\"rolled_back\":{},\
             \"errors\":{},\"error_sample\":{},\"abort_causes\":{{{}}},\"kinds\":{{{}}}}}",
            arguments.label,
            arguments.warehouses,
            arguments.terminals,
            arguments.items,
            arguments.customers,
            arguments.isolation,
            completed as f64 / seconds,
            tally.rolled_back,
            tally.errors,
            match &tally.error_sample {
                Some(sample) => format!("{sample:?}"),
                None => "null".to_string(),
            },
            tally
                .causes
                .iter()
                .map(|(cause, aborts)| format!("{cause:?}:{aborts}"))
                .collect::<Vec<_>>()
                .join(","),
            kinds.join(",")
        ),
    )
}

/// Rows of a query as text, NULL as "NULL".
async fn text_rows(client: &Client, sql: &str) -> anyhow::Result<Vec<Vec<String>>> {
    let rows = transactions::run_sql(client, sql)
        .await
        .map_err(|error| anyhow::anyhow!("{sql}: {}", describe(&error)))?;
    Ok(rows
        .into_iter()
        .map(|row| {
            row.into_iter()
                .map(|value| value.unwrap_or_else(|| "NULL".to_string()))
                .collect()
        })
        .collect())
}

/// A query's rows keyed by their first `key` columns, the rest parsed as decimals in units of
/// `10^-places`.
async fn keyed(
    client: &Client,
    sql: &str,
    key: usize,
    places: u32,
) -> anyhow::Result<BTreeMap<Vec<String>, Vec<i64>>> {
    let mut keyed = BTreeMap::new();
    for row in text_rows(client, sql).await? {
        let values = row[key..]
            .iter()
            .map(|text| {
                random::parse_fixed(text, places)
                    .with_context(|| format!("{sql}: {text:?} is not a number"))
            })
            .collect::<anyhow::Result<Vec<i64>>>()?;
        keyed.insert(row[..key].to_vec(), values);
    }
    Ok(keyed)
}

/// Clause 3.3.2's consistency conditions 1–4, from per-table aggregates compared here (so
/// that only single-table GROUP BY queries are needed); `Err` names every condition that fails.
async fn check(arguments: &TpccArguments) -> anyhow::Result<()> {
    let client = connect(arguments, 0).await?;
    let warehouse_ytd = keyed(&client, "SELECT w_id, w_ytd FROM warehouse", 1, 2).await?;
    let district_ytd = keyed(
        &client,
        "SELECT d_w_id, SUM(d_ytd) FROM district GROUP BY d_w_id",
        1,
        2,
    )
    .await?;
    let next_order = keyed(
        &client,
        "SELECT d_w_id, d_id, d_next_o_id FROM district",
        2,
        0,
    )
    .await?;
    let orders = keyed(
        &client,
        "SELECT o_w_id, o_d_id, MAX(o_id), SUM(o_ol_cnt) FROM orders GROUP BY o_w_id, o_d_id",
        2,
        0,
    )
    .await?;
    let new_orders = keyed(
        &client,
        "SELECT no_w_id, no_d_id, MAX(no_o_id), MIN(no_o_id), COUNT(*) FROM new_order \
         GROUP BY no_w_id, no_d_id",
        2,
        0,
    )
    .await?;
    let lines = keyed(
        &client,
        "SELECT ol_w_id, ol_d_id, COUNT(*) FROM order_line GROUP BY ol_w_id, ol_d_id",
        2,
        0,
    )
    .await?;
    let mut violations: Vec<(&str, String)> = Vec::new();
    let condition_1 = "1: W_YTD = sum(D_YTD)";
    for (w, ytd) in &warehouse_ytd {
        if district_ytd.get(w).map(|sum| sum[0]) != Some(ytd[0]) {
            violations.push((
                condition_1,
                format!("warehouse {w:?}: {ytd:?} vs {:?}", district_ytd.get(w)),
            ));
        }
    }
    let condition_2 = "2: D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)";
    let condition_3 = "3: max(NO_O_ID) - min(NO_O_ID) + 1 = rows in NEW-ORDER";
    let condition_4 = "4: sum(O_OL_CNT) = rows in ORDER-LINE";
    for (district, next) in &next_order {
        let max_order = orders.get(district).map(|order| order[0]);
        if max_order != Some(next[0] - 1) {
            violations.push((
                condition_2,
                format!(
                    "district {district:?}: next {} vs max order {max_order:?}",
                    next[0]
                ),
            ));
        }
        if let Some(new_order) = new_orders.get(district) {
            if Some(new_order[0]) != max_order {
                violations.push((
                    condition_2,
                    format!(
                        "district {district:?}: max new order {} vs max order {max_order:?}",
                        new_order[0]
                    ),
                ));
            }
            if new_order[0] - new_order[1] + 1 != new_order[2] {
                violations.push((condition_3, format!("district {district:?}: {new_order:?}")));
            }
        }
        let ordered_lines = orders.get(district).map(|order| order[1]);
        let line_rows = lines.get(district).map(|count| count[0]);
        if ordered_lines != line_rows {
            violations.push((
                condition_4,
                format!("district {district:?}: {ordered_lines:?} vs {line_rows:?}"),
            ));
        }
    }
    if next_order.is_empty() || warehouse_ytd.is_empty() {
        bail!("the database holds no warehouse or district");
    }
    let mut failed = Vec::new();
    for name in [condition_1, condition_2, condition_3, condition_4] {
        let found: Vec<&String> = violations
            .iter()
            .filter(|(condition, _)| *condition == name)
            .map(|(_, detail)| detail)
            .collect();
        if found.is_empty() {
            println!("{}: consistency condition {name}: holds", arguments.label);
        } else {
            println!(
                "{}: consistency condition {name}: VIOLATED in {} place(s), first {}",
                arguments.label,
                found.len(),
                found[0]
            );
            failed.push(name);
        }
    }
    if !failed.is_empty() {
        bail!("consistency conditions violated: {failed:?}");
    }
    Ok(())
}

async fn drive(arguments: TpccArguments) -> anyhow::Result<()> {
    if arguments.load {
        load(&arguments).await?;
    }
    if arguments.terminals > 0 {
        run_terminals(&arguments).await?;
    }
    if arguments.check {
        check(&arguments).await?;
    }
    Ok(())
}
