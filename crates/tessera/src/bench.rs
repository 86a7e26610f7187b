//! `tessera bench kv`: closed-loop load over RESP against Tessera or any Redis-compatible server.
//!
//! Each client owns one connection and keeps exactly `pipeline` requests in flight; latency is
//! measured per request from send to reply into an HDR histogram. A progress line shows while it
//! runs; the result prints as a table and, with `--json`, as a JSON file (with reads and writes
//! also apart, and the completions of every measured second).
//!
//! Workloads: `mix` (GET/SET by `--read-percent`; `--non-nilext-percent` of the writes become
//! INCR or APPEND; `--read-latest-percent` of the reads read the key this client wrote last), and
//! YCSB's core workloads A, B, C and F (read-modify-write: GET, then SET of the same key when the
//! GET's reply arrives, timed as one operation). `--multi-keys N` turns GETs and SETs into MGETs
//! and MSETs of N keys.

use crate::bench_history;
use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use hdrhistogram::Histogram;
use lincheck::{MapInput, MapOutput};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use stdx::Prng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Args, Clone)]
pub struct KvArguments {
    /// RESP addresses; clients are spread over them round-robin.
    #[arg(long, value_delimiter = ',', default_value = "127.0.0.1:7001")]
    nodes: Vec<String>,
    /// Concurrent clients (connections).
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Requests each client keeps in flight.
    #[arg(long, default_value_t = 1)]
    pipeline: usize,
    /// Distinct keys.
    #[arg(long, default_value_t = 100_000)]
    keys: u64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Percentage of GETs; the rest are SETs (the `mix` workload only).
    #[arg(long, default_value_t = 50)]
    read_percent: u64,
    /// `mix`: GET/SET by `--read-percent`; `ycsb-a`: 50% GET, 50% SET; `ycsb-b`: 95/5; `ycsb-c`:
    /// GET only; `ycsb-f`: 50% GET, 50% read-modify-write (GET then SET of the same key, one
    /// operation). Pass `--distribution zipfian` for YCSB's key choice.
    #[arg(long, value_enum, default_value_t = Workload::Mix)]
    workload: Workload,
    /// Percentage of the writes sent as `--non-nilext-command` instead of SET (`mix` only).
    #[arg(long, default_value_t = 0)]
    non_nilext_percent: u64,
    /// The non-nil-externalizing write: INCR (of `ctr:<key>`, so the value stays an integer) or
    /// APPEND (of 8 bytes to the key).
    #[arg(long, value_enum, default_value_t = NonNilext::Incr)]
    non_nilext_command: NonNilext,
    /// Percentage of the GETs that read the key this client wrote last (once it has written one)
    /// instead of a key from `--distribution` (`mix` only).
    #[arg(long, default_value_t = 0)]
    read_latest_percent: u64,
    #[arg(long, value_enum, default_value_t = Distribution::Uniform)]
    distribution: Distribution,
    /// Keys per command: above 1, GETs become MGETs and SETs become MSETs of this many keys
    /// (the first chosen by `--distribution`, the others uniformly), e.g. multi-partition
    /// messages against a partitioned cluster (`tessera dev --protocol sequenced`).
    #[arg(long, default_value_t = 1)]
    multi_keys: usize,
    /// Read isolation of every connection against a partitioned cluster: each sends
    /// `READMODE <mode>` first (`sequential`, `snapshot` or `basic`); none by default.
    #[arg(long)]
    readmode: Option<String>,
    /// Measured duration in seconds (after warm-up).
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Stop after this many measured operations instead (whichever comes first).
    #[arg(long)]
    operations: Option<u64>,
    /// Warm-up seconds, not measured.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Write the result as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// A label for the result (e.g. "tessera-vr-3" or "redis").
    #[arg(long, default_value = "tessera")]
    label: String,
    /// PRNG seed for keys and operations.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Keys are `<prefix><12-digit index>`.
    #[arg(long, default_value = "key:")]
    key_prefix: String,
    /// Record every operation (SETs write values naming their write) and check the whole
    /// history for linearisability at the end; the run fails if it is not. Single-key GET/SET
    /// workloads only (`mix` without non-nilext writes, `ycsb-a|b|c`).
    #[arg(long)]
    check: bool,
    /// Width in milliseconds of the timeline's buckets (completions, errors and the slowest
    /// read and write of each), written to the JSON result; the timeline includes the warm-up.
    #[arg(long, default_value_t = 1000)]
    bucket_ms: u64,
}

#[derive(Clone, Copy, ValueEnum, Debug)]
pub enum Distribution {
    Uniform,
    /// YCSB's zipfian with constant 0.99 (popular keys scattered over the key space).
    Zipfian,
}

#[derive(Clone, Copy, ValueEnum, Debug, PartialEq, Eq)]
pub enum Workload {
    Mix,
    YcsbA,
    YcsbB,
    YcsbC,
    YcsbF,
    /// SET every key once (client c writes keys c, c + clients, …), then stop: loads data,
    /// with a progress bar. `--duration` and `--warmup` do not apply.
    Load,
}

#[derive(Clone, Copy, ValueEnum, Debug, PartialEq, Eq)]
pub enum NonNilext {
    Incr,
    Append,
}

/// What one run measured.
pub struct Outcome {
    pub operations: u64,
    pub errors: u64,
    pub seconds: f64,
    pub histogram: Histogram<u64>,
    /// GETs only (a read-modify-write counts as a write).
    pub reads: Histogram<u64>,
    /// Everything else.
    pub writes: Histogram<u64>,
    /// Operations completed in each whole measured second.
    pub timeline: Vec<u64>,
    /// Every `--bucket-ms` from the start of the run (warm-up included).
    pub buckets: Vec<Bucket>,
    /// The run's start (the buckets' origin), in milliseconds since the Unix epoch.
    pub started_unix_ms: u128,
    /// With `--check`: the linearisability verdict on the whole history.
    pub verdict: Option<bench_history::Verdict>,
}

/// One bucket of the timeline: what completed in it.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Bucket {
    pub reads: u64,
    pub writes: u64,
    /// Error replies, and requests lost with a broken connection.
    pub errors: u64,
    pub read_max_us: u64,
    pub write_max_us: u64,
}

impl Bucket {
    fn merge(&mut self, other: &Bucket) {
        self.reads += other.reads;
        self.writes += other.writes;
        self.errors += other.errors;
        self.read_max_us = self.read_max_us.max(other.read_max_us);
        self.write_max_us = self.write_max_us.max(other.write_max_us);
    }
}

/// What one client measured.
struct ClientOutcome {
    reads: Histogram<u64>,
    writes: Histogram<u64>,
    errors: u64,
    buckets: Vec<Bucket>,
    history: bench_history::ClientHistory,
}

/// What the driver shares with every client.
struct Shared {
    measuring: AtomicBool,
    stop: AtomicBool,
    /// Measured completions.
    completed: AtomicU64,
    /// Clients that have left their loop (a load ends when every client has).
    finished: AtomicU64,
    /// The start of the run: the timeline's origin and the history's clock.
    epoch: Instant,
}

pub fn run(arguments: KvArguments) -> anyhow::Result<()> {
    if arguments.clients == 0 || arguments.pipeline == 0 || arguments.keys == 0 {
        bail!("--clients, --pipeline and --keys must be positive");
    }
    if arguments.bucket_ms == 0 {
        bail!("--bucket-ms must be positive");
    }
    if [
        arguments.read_percent,
        arguments.non_nilext_percent,
        arguments.read_latest_percent,
    ]
    .iter()
    .any(|percent| *percent > 100)
    {
        bail!("percentages must be at most 100");
    }
    if arguments.check {
        let checkable = match arguments.workload {
            Workload::Mix => arguments.non_nilext_percent == 0,
            Workload::YcsbA | Workload::YcsbB | Workload::YcsbC | Workload::Load => true,
            Workload::YcsbF => false,
        };
        if !checkable || arguments.multi_keys > 1 {
            bail!(
                "--check records single-key GETs and SETs only: use `mix` without \
                 --non-nilext-percent, `ycsb-a|b|c` or `load`, and --multi-keys 1"
            );
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(drive(arguments.clone()))?;
    report(&arguments, &outcome)?;
    match &outcome.verdict {
        Some(verdict) if !verdict.result.is_ok() => bail!("{}", verdict.describe()),
        _ => Ok(()),
    }
}

/// Connects to `nodes[index]` and sets the connection's read mode.
async fn connect(arguments: &KvArguments, index: usize) -> anyhow::Result<TcpStream> {
    let address = &arguments.nodes[index % arguments.nodes.len()];
    let mut stream = TcpStream::connect(address)
        .await
        .with_context(|| format!("cannot connect to {address}"))?;
    stream.set_nodelay(true)?;
    if let Some(mode) = &arguments.readmode {
        set_readmode(&mut stream, mode)
            .await
            .with_context(|| format!("READMODE {mode} on {address}"))?;
    }
    Ok(stream)
}

async fn drive(mut arguments: KvArguments) -> anyhow::Result<Outcome> {
    let loading = arguments.workload == Workload::Load;
    if loading {
        arguments.warmup = 0.0;
        arguments.operations = Some(arguments.keys);
    }
    let shared = Arc::new(Shared {
        // A load has no warm-up: every write counts.
        measuring: AtomicBool::new(loading),
        stop: AtomicBool::new(false),
        completed: AtomicU64::new(0),
        finished: AtomicU64::new(0),
        epoch: Instant::now(),
    });
    let started_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis());
    let mut tasks = Vec::new();
    for client in 0..arguments.clients {
        let stream = connect(&arguments, client).await?;
        let (arguments, shared) = (arguments.clone(), shared.clone());
        tasks.push(tokio::spawn(async move {
            let outcome = client_loop(stream, client, &arguments, &shared).await;
            shared.finished.fetch_add(1, Ordering::SeqCst);
            outcome
        }));
    }
    // Ctrl-C (SIGINT) ends the run early but normally: results, timeline and check included.
    let interrupted = Arc::new(AtomicBool::new(false));
    let flag = interrupted.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            flag.store(true, Ordering::SeqCst);
        }
    });
    tokio::time::sleep(Duration::from_secs_f64(arguments.warmup)).await;
    if !loading {
        shared.completed.store(0, Ordering::SeqCst);
    }
    shared.measuring.store(true, Ordering::SeqCst);
    let started = Instant::now();
    let interactive = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut last_print = Instant::now();
    let mut last_completed = 0;
    let mut timeline = Vec::new();
    let mut completed_at_second = 0;
    loop {
        let next_second = started + Duration::from_secs(timeline.len() as u64 + 1);
        let wake = (Instant::now() + Duration::from_millis(100)).min(next_second);
        tokio::time::sleep_until(wake.into()).await;
        let elapsed = started.elapsed().as_secs_f64();
        let done = shared.completed.load(Ordering::Relaxed);
        if Instant::now() >= next_second && (loading || elapsed <= arguments.duration + 0.05) {
            timeline.push(done - completed_at_second);
            completed_at_second = done;
        }
        let finished = interrupted.load(Ordering::SeqCst)
            || if loading {
                shared.finished.load(Ordering::SeqCst) == arguments.clients as u64
            } else {
                elapsed >= arguments.duration
                    || arguments
                        .operations
                        .is_some_and(|operations| done >= operations)
            };
        if last_print.elapsed() >= Duration::from_millis(500) || finished {
            let rate = (done - last_completed) as f64 / last_print.elapsed().as_secs_f64();
            let fraction = match arguments.operations {
                Some(operations) if loading => done as f64 / operations as f64,
                Some(operations) => (done as f64 / operations as f64)
                    .min(elapsed / arguments.duration)
                    .max(done as f64 / operations as f64),
                None => elapsed / arguments.duration,
            }
            .min(1.0);
            progress(interactive, fraction, done, rate, elapsed);
            last_print = Instant::now();
            last_completed = done;
        }
        if finished {
            break;
        }
    }
    shared.stop.store(true, Ordering::SeqCst);
    let seconds = started.elapsed().as_secs_f64();
    eprintln!();
    let mut histogram = new_histogram();
    let mut reads = new_histogram();
    let mut writes = new_histogram();
    let mut errors = 0;
    let mut buckets: Vec<Bucket> = Vec::new();
    let mut histories = Vec::new();
    for task in tasks {
        let client = task.await.context("a client task failed")??;
        errors += client.errors;
        for (total, part) in [(&mut reads, &client.reads), (&mut writes, &client.writes)] {
            total.add(part).context("merging histograms")?;
            histogram.add(part).context("merging histograms")?;
        }
        if buckets.len() < client.buckets.len() {
            buckets.resize(client.buckets.len(), Bucket::default());
        }
        for (total, part) in buckets.iter_mut().zip(&client.buckets) {
            total.merge(part);
        }
        histories.push(client.history);
    }
    let verdict = if arguments.check {
        eprintln!("checking the history for linearisability…");
        Some(bench_history::check(histories).map_err(anyhow::Error::msg)?)
    } else {
        None
    };
    Ok(Outcome {
        operations: histogram.len(),
        errors,
        seconds,
        histogram,
        reads,
        writes,
        timeline,
        buckets,
        started_unix_ms,
        verdict,
    })
}

fn progress(interactive: bool, fraction: f64, done: u64, rate: f64, elapsed: f64) {
    let width = 30;
    let filled = (fraction * width as f64) as usize;
    let bar: String = (0..width)
        .map(|index| {
            if index < filled {
                '='
            } else if index == filled {
                '>'
            } else {
                ' '
            }
        })
        .collect();
    let line = format!(
        "[{bar}] {:>3.0}% {done} ops, {rate:.0} ops/s, {elapsed:.1}s",
        fraction * 100.0
    );
    if interactive {
        eprint!("\r{line}\x1b[K");
    } else {
        eprintln!("{line}");
    }
    let _ = std::io::stderr().flush();
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds")
}

/// A request on the wire, oldest first: when its operation started (also in microseconds since
/// the run's start, for the history), whether it is a read, for the GET of a read-modify-write
/// the key to SET when its reply comes, and with `--check` the operation as the history
/// records it.
struct Pending {
    started: Instant,
    call: u64,
    read: bool,
    then_set: Option<String>,
    input: Option<MapInput>,
}

/// How long a connection may stay silent with requests in flight before the client gives up on
/// it and reconnects (servers answer TRYAGAIN after 10 s), and once the run is stopping.
const SILENT_MAX: Duration = Duration::from_secs(15);
const SILENT_MAX_STOPPING: Duration = Duration::from_secs(2);

async fn client_loop(
    mut stream: TcpStream,
    client: usize,
    arguments: &KvArguments,
    shared: &Shared,
) -> anyhow::Result<ClientOutcome> {
    let client_id = client as u64;
    let mut prng = Prng::new(
        arguments
            .seed
            .wrapping_mul(1_000_003)
            .wrapping_add(client_id),
    );
    let zipfian = Zipfian::new(arguments.keys);
    let value = vec![b'x'; arguments.value_size];
    let mut outcome = ClientOutcome {
        reads: new_histogram(),
        writes: new_histogram(),
        errors: 0,
        buckets: Vec::new(),
        history: bench_history::ClientHistory::default(),
    };
    let mut node = client;
    let mut writes_issued = 0u64;
    let mut next_load = client_id;
    let mut last_written: Option<u64> = None;
    let mut in_flight: std::collections::VecDeque<Pending> = std::collections::VecDeque::new();
    let mut output = Vec::with_capacity(64 * 1024);
    let mut input: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut chunk = vec![0u8; 64 * 1024];
    let micros_since_start = || shared.epoch.elapsed().as_micros() as u64;
    loop {
        let stopping = shared.stop.load(Ordering::Relaxed);
        let loaded = arguments.workload == Workload::Load && next_load >= arguments.keys;
        if in_flight.is_empty() && (stopping || loaded) {
            break;
        }
        while in_flight.len() < arguments.pipeline && !shared.stop.load(Ordering::Relaxed) {
            let (mut key_index, operation) = if arguments.workload == Workload::Load {
                if next_load >= arguments.keys {
                    break;
                }
                next_load += arguments.clients as u64;
                (next_load - arguments.clients as u64, Operation::Set)
            } else {
                let key_index = match arguments.distribution {
                    Distribution::Uniform => prng.below(arguments.keys),
                    Distribution::Zipfian => zipfian.next(&mut prng),
                };
                (key_index, next_operation(arguments, &mut prng))
            };
            if operation == Operation::Get && arguments.read_latest_percent > 0 {
                if let Some(latest) = last_written {
                    if prng.percent(arguments.read_latest_percent) {
                        key_index = latest;
                    }
                }
            }
            let prefix = &arguments.key_prefix;
            let key = format!("{prefix}{key_index:012}");
            let mut pending = Pending {
                started: Instant::now(),
                call: micros_since_start(),
                read: false,
                then_set: None,
                input: None,
            };
            let multi = arguments.multi_keys > 1;
            let mut keys = vec![key.clone()];
            if multi {
                keys.extend(
                    (1..arguments.multi_keys)
                        .map(|_| format!("{prefix}{:012}", prng.below(arguments.keys))),
                );
            }
            match operation {
                Operation::Get if multi => {
                    let mut words: Vec<&[u8]> = vec![b"MGET"];
                    words.extend(keys.iter().map(|key| key.as_bytes()));
                    encode_command(&words, &mut output);
                    pending.read = true;
                }
                Operation::Set if multi => {
                    let mut words: Vec<&[u8]> = vec![b"MSET"];
                    for key in &keys {
                        words.push(key.as_bytes());
                        words.push(&value);
                    }
                    encode_command(&words, &mut output);
                    last_written = Some(key_index);
                }
                Operation::Get => {
                    encode_command(&[b"GET", key.as_bytes()], &mut output);
                    pending.read = true;
                    pending.input = Some(MapInput::Get { key: key_index });
                }
                Operation::Set if arguments.check => {
                    let id = client_id << 40 | writes_issued;
                    writes_issued += 1;
                    let tagged = bench_history::tagged_value(id, arguments.value_size);
                    encode_command(&[b"SET", key.as_bytes(), &tagged], &mut output);
                    pending.input = Some(MapInput::Put {
                        key: key_index,
                        value: id,
                    });
                    last_written = Some(key_index);
                }
                Operation::Set => {
                    encode_command(&[b"SET", key.as_bytes(), &value], &mut output);
                    last_written = Some(key_index);
                }
                Operation::NonNilext => {
                    match arguments.non_nilext_command {
                        NonNilext::Incr => {
                            let counter = format!("ctr:{key_index:012}");
                            encode_command(&[b"INCR", counter.as_bytes()], &mut output);
                        }
                        NonNilext::Append => {
                            encode_command(&[b"APPEND", key.as_bytes(), b"appended"], &mut output)
                        }
                    }
                    last_written = Some(key_index);
                }
                Operation::ReadModifyWrite => {
                    encode_command(&[b"GET", key.as_bytes()], &mut output);
                    pending.then_set = Some(key);
                    last_written = Some(key_index);
                }
            }
            in_flight.push_back(pending);
        }
        let silent_max = if shared.stop.load(Ordering::Relaxed) {
            SILENT_MAX_STOPPING
        } else {
            SILENT_MAX
        };
        let read = match exchange(&mut stream, &mut output, &mut chunk, silent_max).await {
            Ok(read) => read,
            Err(_) => {
                // The connection broke (its node died, or went silent): every request on it has
                // an unknown outcome. Carry on through the next node.
                let now = micros_since_start();
                for pending in in_flight.drain(..) {
                    outcome.errors += 1;
                    bucket(&mut outcome.buckets, now, arguments.bucket_ms).errors += 1;
                    if let Some(operation) = pending.input {
                        outcome.history.unknown(client_id, pending.call, operation);
                    }
                }
                input.clear();
                output.clear();
                match reconnect(arguments, &mut node, shared).await {
                    Some(fresh) => {
                        stream = fresh;
                        continue;
                    }
                    None => break,
                }
            }
        };
        input.extend_from_slice(&chunk[..read]);
        let mut consumed_total = 0;
        while let Some((is_error, consumed)) = parse_reply(&input[consumed_total..]) {
            let reply = &input[consumed_total..consumed_total + consumed];
            consumed_total += consumed;
            let Some(pending) = in_flight.pop_front() else {
                bail!("a reply to no request")
            };
            if let (Some(key), false) = (&pending.then_set, is_error) {
                // The modify-write half of a read-modify-write: the same operation, still open.
                encode_command(&[b"SET", key.as_bytes(), &value], &mut output);
                in_flight.push_back(Pending {
                    started: pending.started,
                    call: pending.call,
                    read: false,
                    then_set: None,
                    input: None,
                });
                continue;
            }
            let now = micros_since_start();
            let micros = pending.started.elapsed().as_micros().clamp(1, 60_000_000) as u64;
            let slot = bucket(&mut outcome.buckets, now, arguments.bucket_ms);
            if is_error {
                slot.errors += 1;
            } else if pending.read {
                slot.reads += 1;
                slot.read_max_us = slot.read_max_us.max(micros);
            } else {
                slot.writes += 1;
                slot.write_max_us = slot.write_max_us.max(micros);
            }
            if let Some(operation) = pending.input {
                record(
                    &mut outcome.history,
                    client_id,
                    &pending,
                    operation,
                    is_error,
                    reply,
                    now,
                );
            }
            outcome.errors += u64::from(is_error);
            if shared.measuring.load(Ordering::Relaxed) {
                let histogram = if pending.read {
                    &mut outcome.reads
                } else {
                    &mut outcome.writes
                };
                histogram.record(micros).context("recording a latency")?;
                shared.completed.fetch_add(1, Ordering::Relaxed);
            }
        }
        input.drain(..consumed_total);
    }
    Ok(outcome)
}

/// Writes what is queued, then reads what arrives; an error if the connection closed, failed or
/// stayed silent for `silent_max`.
async fn exchange(
    stream: &mut TcpStream,
    output: &mut Vec<u8>,
    chunk: &mut [u8],
    silent_max: Duration,
) -> anyhow::Result<usize> {
    if !output.is_empty() {
        stream.write_all(output).await?;
        output.clear();
    }
    let read = tokio::time::timeout(silent_max, stream.read(chunk))
        .await
        .context("the server stayed silent")??;
    if read == 0 {
        bail!("the server closed the connection");
    }
    Ok(read)
}

/// Connects to the next node that answers; `None` once the run stops first.
async fn reconnect(
    arguments: &KvArguments,
    node: &mut usize,
    shared: &Shared,
) -> Option<TcpStream> {
    while !shared.stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        *node += 1;
        if let Ok(stream) = connect(arguments, *node).await {
            return Some(stream);
        }
    }
    None
}

/// The timeline bucket a completion at `micros` (since the run's start) falls in.
fn bucket(buckets: &mut Vec<Bucket>, micros: u64, bucket_ms: u64) -> &mut Bucket {
    let index = (micros / 1_000 / bucket_ms) as usize;
    if buckets.len() <= index {
        buckets.resize(index + 1, Bucket::default());
    }
    &mut buckets[index]
}

/// Adds a checked operation's outcome to its client's history.
fn record(
    history: &mut bench_history::ClientHistory,
    client: u64,
    pending: &Pending,
    operation: MapInput,
    is_error: bool,
    reply: &[u8],
    now: u64,
) {
    if is_error {
        history.unknown(client, pending.call, operation);
        return;
    }
    match operation {
        MapInput::Get { .. } => match bench_history::bulk(reply) {
            Some(None) => {
                history.completed(client, pending.call, now, operation, MapOutput::Value(None))
            }
            Some(Some(value)) => match bench_history::write_id(value) {
                Some(id) => history.completed(
                    client,
                    pending.call,
                    now,
                    operation,
                    MapOutput::Value(Some(id)),
                ),
                None => history.foreign_reads += 1,
            },
            // Not a value: an unexpected reply, which the check treats as a failed read.
            None => history.unknown(client, pending.call, operation),
        },
        MapInput::Put { .. } | MapInput::Delete { .. } => {
            history.completed(client, pending.call, now, operation, MapOutput::Ok)
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Operation {
    Get,
    Set,
    NonNilext,
    ReadModifyWrite,
}

fn next_operation(arguments: &KvArguments, prng: &mut Prng) -> Operation {
    match arguments.workload {
        Workload::Mix => {
            if prng.percent(arguments.read_percent) {
                Operation::Get
            } else if arguments.non_nilext_percent > 0 && prng.percent(arguments.non_nilext_percent)
            {
                Operation::NonNilext
            } else {
                Operation::Set
            }
        }
        Workload::YcsbA | Workload::YcsbB => {
            let reads = if arguments.workload == Workload::YcsbA {
                50
            } else {
                95
            };
            if prng.percent(reads) {
                Operation::Get
            } else {
                Operation::Set
            }
        }
        Workload::YcsbC => Operation::Get,
        Workload::Load => Operation::Set,
        Workload::YcsbF => {
            if prng.percent(50) {
                Operation::Get
            } else {
                Operation::ReadModifyWrite
            }
        }
    }
}

/// Sends `READMODE <mode>` and waits for `+OK`.
async fn set_readmode(stream: &mut TcpStream, mode: &str) -> anyhow::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut out = Vec::new();
    encode_command(&[b"READMODE", mode.as_bytes()], &mut out);
    stream.write_all(&out).await?;
    let mut reply = Vec::new();
    let mut chunk = [0u8; 256];
    while !reply.ends_with(b"\r\n") {
        let read = stream.read(&mut chunk).await?;
        anyhow::ensure!(read > 0, "the server closed the connection");
        reply.extend_from_slice(&chunk[..read]);
    }
    anyhow::ensure!(
        reply.starts_with(b"+OK"),
        "the server answered {}",
        String::from_utf8_lossy(&reply).trim()
    );
    Ok(())
}

fn encode_command(arguments: &[&[u8]], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("*{}\r\n", arguments.len()).as_bytes());
    for argument in arguments {
        out.extend_from_slice(format!("${}\r\n", argument.len()).as_bytes());
        out.extend_from_slice(argument);
        out.extend_from_slice(b"\r\n");
    }
}

/// Parses one reply; returns (whether it is an error, bytes consumed), or None if incomplete.
fn parse_reply(buffer: &[u8]) -> Option<(bool, usize)> {
    let line_end = buffer.windows(2).position(|pair| pair == b"\r\n")?;
    let header = &buffer[..line_end];
    let after = line_end + 2;
    match header.first()? {
        b'+' | b':' | b'_' | b',' | b'#' => Some((false, after)),
        b'-' => Some((true, after)),
        b'$' => {
            let length: i64 = std::str::from_utf8(&header[1..]).ok()?.parse().ok()?;
            if length < 0 {
                return Some((false, after));
            }
            let end = after + length as usize + 2;
            (buffer.len() >= end).then_some((false, end))
        }
        b'*' => {
            let count: i64 = std::str::from_utf8(&header[1..]).ok()?.parse().ok()?;
            let mut position = after;
            for _ in 0..count.max(0) {
                let (_, consumed) = parse_reply(&buffer[position..])?;
                position += consumed;
            }
            Some((false, position))
        }
        _ => Some((true, after)),
    }
}

/// YCSB's scrambled zipfian generator (Gray et al., "Quickly generating billion-record synthetic
/// databases"), constant 0.99.
struct Zipfian {
    items: u64,
    theta: f64,
    alpha: f64,
    zeta_n: f64,
    eta: f64,
}

impl Zipfian {
    fn new(items: u64) -> Zipfian {
        let theta = 0.99;
        let zeta = |count: u64| {
            (1..=count)
                .map(|index| 1.0 / (index as f64).powf(theta))
                .sum::<f64>()
        };
        let zeta_n = zeta(items);
        let zeta_2 = zeta(2.min(items));
        let alpha = 1.0 / (1.0 - theta);
        let eta = (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta_2 / zeta_n);
        Zipfian {
            items,
            theta,
            alpha,
            zeta_n,
            eta,
        }
    }

    fn next(&self, prng: &mut Prng) -> u64 {
        let u = prng.below(1 << 53) as f64 / (1u64 << 53) as f64;
        let uz = u * self.zeta_n;
        let rank = if uz < 1.0 {
            0
        } else if uz < 1.0 + 0.5f64.powf(self.theta) {
            1
        } else {
            ((self.items as f64) * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
        };
        // Scramble so that popular keys are not neighbours.
        stdx::Fnv64::digest(&rank.min(self.items - 1).to_le_bytes()) % self.items
    }
}

fn report(arguments: &KvArguments, outcome: &Outcome) -> anyhow::Result<()> {
    let histogram = &outcome.histogram;
    let throughput = outcome.operations as f64 / outcome.seconds;
    let quantile = |q: f64| histogram.value_at_quantile(q);
    println!(
        "{}: {} clients x {} in flight, {} keys, {} B values, {}, {:?}",
        arguments.label,
        arguments.clients,
        arguments.pipeline,
        arguments.keys,
        arguments.value_size,
        describe_workload(arguments),
        arguments.distribution
    );
    println!(
        "  {:.0} ops/s over {:.1}s ({} ops, {} errors); latency us: p50 {} p90 {} p99 {} p99.9 {} max {} mean {:.0}",
        throughput,
        outcome.seconds,
        outcome.operations,
        outcome.errors,
        quantile(0.5),
        quantile(0.9),
        quantile(0.99),
        quantile(0.999),
        histogram.max(),
        histogram.mean()
    );
    if let Some(verdict) = &outcome.verdict {
        println!("  {}", verdict.describe());
    }
    for (name, part) in [("reads", &outcome.reads), ("writes", &outcome.writes)] {
        if !part.is_empty() && part.len() != histogram.len() {
            println!(
                "  {name}: {} ops; latency us: p50 {} p99 {} mean {:.0}",
                part.len(),
                part.value_at_quantile(0.5),
                part.value_at_quantile(0.99),
                part.mean()
            );
        }
    }
    if let Some(path) = &arguments.json {
        let part_json = |part: &Histogram<u64>| {
            if part.is_empty() {
                "null".to_string()
            } else {
                format!(
                    "{{\"operations\":{},\"p50\":{},\"p90\":{},\"p99\":{},\"p999\":{},\"max\":{},\"mean\":{:.1}}}",
                    part.len(),
                    part.value_at_quantile(0.5),
                    part.value_at_quantile(0.9),
                    part.value_at_quantile(0.99),
                    part.value_at_quantile(0.999),
                    part.max(),
                    part.mean()
                )
            }
        };
        let timeline: Vec<String> = outcome.timeline.iter().map(u64::to_string).collect();
        let buckets: Vec<String> = outcome
            .buckets
            .iter()
            .map(|bucket| {
                format!(
                    "[{},{},{},{},{}]",
                    bucket.reads,
                    bucket.writes,
                    bucket.errors,
                    bucket.read_max_us,
                    bucket.write_max_us
                )
            })
            .collect();
        let verdict = match &outcome.verdict {
            None => "null".to_string(),
            Some(verdict) => format!(
                "{{\"operations\":{},\"pending\":{},\"linearizable\":{},\"unknown\":{},\"seconds\":{:.1}}}",
                verdict.operations,
                verdict.pending,
                verdict.result.is_ok(),
                verdict.result.is_unknown(),
                verdict.seconds
            ),
        };
        let json = format!(
            "{{\"label\":\"{}\",\"nodes\":\"{}\",\"clients\":{},\"pipeline\":{},\"keys\":{},\"value_size\":{},\"read_percent\":{},\
             \"distribution\":\"{:?}\",\"seconds\":{:.3},\"operations\":{},\"errors\":{},\"throughput_ops_per_s\":{:.1},\
             \"latency_us\":{{\"p50\":{},\"p90\":{},\"p99\":{},\"p999\":{},\"max\":{},\"mean\":{:.1}}},\
             \"workload\":\"{}\",\"non_nilext_percent\":{},\"non_nilext_command\":\"{:?}\",\"read_latest_percent\":{},\
             \"read_latency_us\":{},\"write_latency_us\":{},\"timeline_ops_per_s\":[{}],\
             \"started_unix_ms\":{},\"bucket_ms\":{},\"buckets\":[{}],\"check\":{}}}\n",
            arguments.label.replace('"', "'"),
            arguments.nodes.join(","),
            arguments.clients,
            arguments.pipeline,
            arguments.keys,
            arguments.value_size,
            arguments.read_percent,
            arguments.distribution,
            outcome.seconds,
            outcome.operations,
            outcome.errors,
            throughput,
            quantile(0.5),
            quantile(0.9),
            quantile(0.99),
            quantile(0.999),
            histogram.max(),
            histogram.mean(),
            arguments.workload.to_possible_value().map_or_else(String::new, |value| value.get_name().to_string()),
            arguments.non_nilext_percent,
            arguments.non_nilext_command,
            arguments.read_latest_percent,
            part_json(&outcome.reads),
            part_json(&outcome.writes),
            timeline.join(","),
            outcome.started_unix_ms,
            arguments.bucket_ms,
            buckets.join(","),
            verdict
        );
        std::fs::write(path, json).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

fn describe_workload(arguments: &KvArguments) -> String {
    let text = describe_operations(arguments);
    if arguments.multi_keys > 1 {
        format!("{text}, MGET/MSET of {} keys", arguments.multi_keys)
    } else {
        text
    }
}

fn describe_operations(arguments: &KvArguments) -> String {
    match arguments.workload {
        Workload::Mix => {
            let mut text = format!("{}% reads", arguments.read_percent);
            if arguments.non_nilext_percent > 0 {
                text += &format!(
                    ", {}% of writes {:?}",
                    arguments.non_nilext_percent, arguments.non_nilext_command
                );
            }
            if arguments.read_latest_percent > 0 {
                text += &format!(", {}% of reads latest", arguments.read_latest_percent);
            }
            text
        }
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_parse_only_when_complete() {
        let replies = b"+OK\r\n$5\r\nhello\r\n$-1\r\n-ERR x\r\n*2\r\n:1\r\n$1\r\na\r\n";
        let mut position = 0;
        let mut kinds = Vec::new();
        while let Some((is_error, consumed)) = parse_reply(&replies[position..]) {
            kinds.push(is_error);
            position += consumed;
        }
        assert_eq!(kinds, vec![false, false, false, true, false]);
        assert_eq!(position, replies.len());
        assert_eq!(parse_reply(b"$5\r\nhel"), None);
    }

    #[test]
    fn zipfian_keys_stay_in_range_and_favour_a_few() {
        let zipfian = Zipfian::new(1000);
        let mut prng = Prng::new(3);
        let mut counts = vec![0u32; 1000];
        for _ in 0..100_000 {
            counts[zipfian.next(&mut prng) as usize] += 1;
        }
        let top = counts.iter().max().copied().unwrap();
        assert!(
            top > 5_000,
            "the most popular key gets a large share, got {top}"
        );
    }
}
