//! `tessera bench ticket`: the Amadeus Ticket workload of Crescando/RB (§2, §7.2) over the
//! PostgreSQL wire protocol, against Tessera or against PostgreSQL itself.
//!
//! - **The table.** `ticket` has 47 columns and rows of about 350 bytes as PostgreSQL's text
//!   format writes them: one row per passenger on a plane (booking locator `rloc`, flight, dates,
//!   airports, seat class, many high-selectivity flags such as wheelchair or kosher meal). The
//!   primary key `id` is never used by the workload: every query and update is non-key.
//! - **The generator** (`--load N`) derives row `i` from the seed and `i` alone, so two systems
//!   loaded with the same seed and N hold the same rows. It drops and recreates the table, loads it
//!   with `COPY ticket FROM STDIN` in chunks, and shows a progress bar. `--indexes` then creates
//!   secondary indexes on the queried columns (for the "PostgreSQL with indexes" baseline).
//! - **The mix** (`--mixes`) is drawn from seven statements in the paper's style ("first-class
//!   passengers in a wheelchair leaving SFO next week", "cancel all tickets from LHR to the US
//!   tonight"); see [`Kind`]. Each concurrency level of `--concurrency` runs `C` closed-loop
//!   clients (one connection each, spread over `--hosts`) for `--duration` seconds; statements in
//!   flight at the end are waited for (up to `--drain` seconds), and throughput is completed
//!   statements over the time to the last completion. Results go to stdout and, as JSON lines,
//!   to `--json`.

use anyhow::{bail, Context};
use clap::Args;
use futures_util::SinkExt;
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};
use stdx::Prng;
use tokio_postgres::{Client, SimpleQueryMessage};

#[derive(Args, Clone)]
pub struct TicketArguments {
    /// PostgreSQL-protocol servers, `host:port`; connections are spread over them round-robin.
    #[arg(long, value_delimiter = ',', default_value = "127.0.0.1:5433")]
    hosts: Vec<String>,
    /// User name sent at startup.
    #[arg(long, default_value = "postgres")]
    user: String,
    /// Database name sent at startup.
    #[arg(long, default_value = "postgres")]
    dbname: String,
    /// Drop, create and load the table with this many rows before running (0: use the table as is).
    #[arg(long, default_value_t = 0)]
    load: u64,
    /// Rows per COPY statement while loading.
    #[arg(long, default_value_t = 2_000)]
    chunk: u64,
    /// After loading, create secondary indexes on the queried columns.
    #[arg(long)]
    indexes: bool,
    /// Concurrent clients (connections) per level.
    #[arg(long, value_delimiter = ',', default_value = "1,10,100,1000")]
    concurrency: Vec<usize>,
    /// Mixes to run at every level: default, reads, or one statement kind (wheelchair, manifest,
    /// rloc, ffn, meals, cancel, checkin).
    #[arg(long, value_delimiter = ',', default_value = "default")]
    mixes: Vec<String>,
    /// Seconds each (mix, level) issues new statements.
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    /// Seconds to wait for statements still in flight after `--duration`; the rest are abandoned.
    #[arg(long, default_value_t = 120.0)]
    drain: f64,
    /// The data and workload seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// The system's name in the JSON lines.
    #[arg(long, default_value = "tessera")]
    label: String,
    /// Append one JSON object per (mix, level) and one for the load to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

/// The 47 columns, in order, with their PostgreSQL (and Tessera) types.
pub const COLUMNS: [(&str, &str); 47] = [
    ("id", "BIGINT NOT NULL PRIMARY KEY"),
    ("rloc", "VARCHAR(6) NOT NULL"),
    ("pax_seq", "INT"),
    ("last_name", "VARCHAR(40)"),
    ("first_name", "VARCHAR(20)"),
    ("title", "VARCHAR(4)"),
    ("ticket_number", "VARCHAR(14)"),
    ("airline", "VARCHAR(2)"),
    ("flight_number", "INT"),
    ("dep_airport", "VARCHAR(3)"),
    ("arr_airport", "VARCHAR(3)"),
    ("arr_country", "VARCHAR(2)"),
    ("dep_date", "DATE"),
    ("dep_time", "TIMESTAMP"),
    ("arr_time", "TIMESTAMP"),
    ("booking_date", "DATE"),
    ("seat_class", "VARCHAR(1)"),
    ("booking_class", "VARCHAR(1)"),
    ("seat", "VARCHAR(4)"),
    ("fare", "DOUBLE PRECISION"),
    ("currency", "VARCHAR(3)"),
    ("status", "VARCHAR(2)"),
    ("wheelchair", "BOOLEAN"),
    ("meal", "VARCHAR(4)"),
    ("vegetarian", "BOOLEAN"),
    ("kosher", "BOOLEAN"),
    ("infant", "BOOLEAN"),
    ("unaccompanied_minor", "BOOLEAN"),
    ("ff_tier", "VARCHAR(8)"),
    ("ff_number", "VARCHAR(12)"),
    ("checked_in", "BOOLEAN"),
    ("boarded", "BOOLEAN"),
    ("bags", "INT"),
    ("pet", "BOOLEAN"),
    ("extra_legroom", "BOOLEAN"),
    ("group_booking", "BOOLEAN"),
    ("corporate", "BOOLEAN"),
    ("agency_id", "INT"),
    ("office_id", "VARCHAR(9)"),
    ("pos_country", "VARCHAR(2)"),
    ("email", "VARCHAR(80)"),
    ("phone", "VARCHAR(16)"),
    ("nationality", "VARCHAR(2)"),
    ("birth_date", "DATE"),
    ("gender", "VARCHAR(1)"),
    ("codeshare", "BOOLEAN"),
    ("last_modified", "TIMESTAMP"),
];

/// The indexes of the "with indexes" baseline: one per predicate the mix leads with.
pub const INDEXES: [(&str, &str); 5] = [
    ("ticket_dep", "dep_airport, dep_date"),
    ("ticket_flight", "airline, flight_number, dep_date"),
    ("ticket_rloc", "rloc"),
    ("ticket_ff", "ff_number"),
    ("ticket_dep_time", "dep_airport, dep_time"),
];

const AIRPORTS: [(&str, &str); 40] = [
    ("SFO", "US"),
    ("LAX", "US"),
    ("JFK", "US"),
    ("ORD", "US"),
    ("ATL", "US"),
    ("DFW", "US"),
    ("SEA", "US"),
    ("BOS", "US"),
    ("MIA", "US"),
    ("IAD", "US"),
    ("LHR", "GB"),
    ("LGW", "GB"),
    ("MAN", "GB"),
    ("CDG", "FR"),
    ("ORY", "FR"),
    ("NCE", "FR"),
    ("FRA", "DE"),
    ("MUC", "DE"),
    ("BER", "DE"),
    ("ZRH", "CH"),
    ("GVA", "CH"),
    ("AMS", "NL"),
    ("MAD", "ES"),
    ("BCN", "ES"),
    ("FCO", "IT"),
    ("MXP", "IT"),
    ("VIE", "AT"),
    ("CPH", "DK"),
    ("ARN", "SE"),
    ("OSL", "NO"),
    ("HEL", "FI"),
    ("DUB", "IE"),
    ("LIS", "PT"),
    ("IST", "TR"),
    ("DXB", "AE"),
    ("SIN", "SG"),
    ("HKG", "HK"),
    ("NRT", "JP"),
    ("SYD", "AU"),
    ("YYZ", "CA"),
];
const AIRLINES: [&str; 16] = [
    "LX", "LH", "BA", "AF", "KL", "IB", "AZ", "OS", "SK", "AY", "EI", "TP", "UA", "AA", "DL", "EK",
];
const LAST_NAMES: [&str; 32] = [
    "MUELLER",
    "SMITH",
    "MARTIN",
    "GARCIA",
    "ROSSI",
    "JOHNSON",
    "BERNARD",
    "SCHMIDT",
    "DUBOIS",
    "FERNANDEZ",
    "BIANCHI",
    "WILLIAMS",
    "BROWN",
    "JONES",
    "MILLER",
    "DAVIS",
    "WAGNER",
    "BECKER",
    "MOREAU",
    "LOPEZ",
    "ROMANO",
    "TAYLOR",
    "ANDERSON",
    "THOMAS",
    "HOFFMANN",
    "LAURENT",
    "SANCHEZ",
    "COLOMBO",
    "WILSON",
    "MOORE",
    "KELLER",
    "FISCHER",
];
const FIRST_NAMES: [&str; 16] = [
    "ANNA", "PETER", "MARIA", "JOHN", "LUCA", "SOPHIE", "DAVID", "EMMA", "THOMAS", "LAURA",
    "MICHAEL", "JULIA", "PAUL", "CLARA", "JAMES", "ELENA",
];
const MAIL_HOSTS: [&str; 4] = [
    "corporate-travel.example.com",
    "mail.frequent-flyers.example.org",
    "inbox.passengers.example.net",
    "travel-agency-booking.example.com",
];
const MEALS: [&str; 8] = [
    "NONE", "NONE", "NONE", "NONE", "VGML", "KSML", "MOML", "DBML",
];
const TIERS: [&str; 5] = ["NONE", "NONE", "SILVER", "GOLD", "PLATINUM"];
/// Departure dates: 60 days from 2025-06-01 (day 20240 since 1970-01-01).
const FIRST_DAY: i64 = 20_240;
const DAYS: u64 = 60;
/// Flight numbers per airline.
const FLIGHTS: u64 = 200;

/// 2025-06-01 + `offset` days as `YYYY-MM-DD`.
fn date(days_since_epoch: i64) -> String {
    // Howard Hinnant's civil_from_days.
    let z = days_since_epoch + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

fn timestamp(days_since_epoch: i64, minute_of_day: u64) -> String {
    let extra_days = (minute_of_day / 1440) as i64;
    let minute = minute_of_day % 1440;
    format!(
        "{} {:02}:{:02}:00",
        date(days_since_epoch + extra_days),
        minute / 60,
        minute % 60
    )
}

const ALPHANUMERIC: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";

/// The booking locator of booking `booking`: 6 characters, a bijection of the low 30 bits.
fn rloc(seed: u64, booking: u64) -> String {
    let mut value = booking.wrapping_mul(0x9E37_79B9).wrapping_add(seed) & ((1 << 30) - 1);
    let mut text = String::with_capacity(6);
    for _ in 0..6 {
        text.push(ALPHANUMERIC[(value % 32) as usize] as char);
        value /= 32;
    }
    text
}

fn ff_number(airline: &str, number: u64) -> String {
    format!("{airline}{number:010}")
}

fn flag(prng: &mut Prng, percent: u64) -> &'static str {
    if prng.percent(percent) {
        "t"
    } else {
        "f"
    }
}

/// Row `id` in PostgreSQL's COPY text format, newline-terminated. Passengers of one booking (up
/// to three consecutive ids) share the locator and flight.
#[allow(clippy::format_in_format_args)] // one named argument per column reads best
pub fn row(seed: u64, id: u64, out: &mut String) {
    use std::fmt::Write as _;
    let booking = id / 3;
    let mut shared = Prng::new(seed ^ booking.wrapping_mul(0xA24B_AED4_963E_E407));
    let mut prng = Prng::new(seed ^ id.wrapping_mul(0x9FB2_1C65_1E98_DF25) ^ 0x5555);
    let airline = *shared.pick(&AIRLINES);
    let flight_number = shared.range_inclusive(1, FLIGHTS);
    // A flight leaves from one airport at one time of day; its destination depends on both.
    let flight_key = airline.as_bytes()[0] as u64 * 7919
        + airline.as_bytes()[1] as u64 * 104_729
        + flight_number;
    let dep_index = (flight_key % AIRPORTS.len() as u64) as usize;
    let mut arr_index = ((flight_key / 7) % AIRPORTS.len() as u64) as usize;
    if arr_index == dep_index {
        arr_index = (arr_index + 1) % AIRPORTS.len();
    }
    let (dep_airport, _) = AIRPORTS[dep_index];
    let (arr_airport, arr_country) = AIRPORTS[arr_index];
    let day_offset = shared.below(DAYS) as i64;
    let dep_day = FIRST_DAY + day_offset;
    let dep_minute = (flight_key * 37) % 1440;
    let arr_minute = dep_minute + 60 + (flight_key * 13) % 600;
    let booking_day = dep_day - 1 - shared.below(90) as i64;
    let seat_class = match prng.below(100) {
        0..=4 => "F",
        5..=19 => "C",
        _ => "Y",
    };
    let booking_class = (b'A' + prng.below(26) as u8) as char;
    let seat = format!(
        "{}{}",
        prng.range_inclusive(1, 45),
        (b'A' + prng.below(6) as u8) as char
    );
    let fare = match seat_class {
        "F" => 2_000.0 + prng.below(800_000) as f64 / 100.0,
        "C" => 800.0 + prng.below(300_000) as f64 / 100.0,
        _ => 50.0 + prng.below(120_000) as f64 / 100.0,
    };
    let tier = *prng.pick(&TIERS);
    let ff = if tier == "NONE" {
        "\\N".to_string()
    } else {
        ff_number(airline, prng.below(1_000_000))
    };
    let last_name = if shared.percent(70) {
        format!("{}-{}", shared.pick(&LAST_NAMES), shared.pick(&LAST_NAMES))
    } else {
        shared.pick(&LAST_NAMES).to_string()
    };
    let first_name = if prng.percent(80) {
        format!("{} {}", prng.pick(&FIRST_NAMES), prng.pick(&FIRST_NAMES))
    } else {
        prng.pick(&FIRST_NAMES).to_string()
    };
    let gender = if prng.percent(50) { "F" } else { "M" };
    let title = if gender == "F" { "MRS" } else { "MR" };
    let meal = *prng.pick(&MEALS);
    let _ = writeln!(
        out,
        "{id}\t{rloc}\t{pax}\t{last_name}\t{first_name}\t{title}\t{ticket}\t{airline}\t{flight_number}\t\
         {dep_airport}\t{arr_airport}\t{arr_country}\t{dep_date}\t{dep_time}\t{arr_time}\t{booking_date}\t\
         {seat_class}\t{booking_class}\t{seat}\t{fare:.2}\t{currency}\t{status}\t{wheelchair}\t{meal}\t\
         {vegetarian}\t{kosher}\t{infant}\t{um}\t{tier}\t{ff}\t{checked_in}\t{boarded}\t{bags}\t{pet}\t\
         {legroom}\t{group}\t{corporate}\t{agency}\t{office}\t{pos}\t{email}\t{phone}\t{nationality}\t\
         {birth}\t{gender}\t{codeshare}\t{modified}",
        rloc = rloc(seed, booking),
        pax = id % 3 + 1,
        ticket = format!("{:03}{:011}", 100 + flight_key % 900, id),
        dep_date = date(dep_day),
        dep_time = timestamp(dep_day, dep_minute),
        arr_time = timestamp(dep_day, arr_minute),
        booking_date = date(booking_day),
        currency = if arr_country == "US" { "USD" } else { "EUR" },
        status = if prng.percent(97) { "HK" } else { "XX" },
        wheelchair = flag(&mut prng, 2),
        vegetarian = flag(&mut prng, 8),
        kosher = flag(&mut prng, 1),
        infant = flag(&mut prng, 2),
        um = flag(&mut prng, 1),
        checked_in = flag(&mut prng, 30),
        boarded = flag(&mut prng, 10),
        bags = prng.below(4),
        pet = flag(&mut prng, 1),
        legroom = flag(&mut prng, 5),
        group = flag(&mut prng, 3),
        corporate = flag(&mut prng, 20),
        agency = prng.below(100_000),
        office = format!("{dep_airport}{airline}{:04}", prng.below(10_000)),
        pos = AIRPORTS[prng.below(AIRPORTS.len() as u64) as usize].1,
        email = format!(
            "{}.{}{}@{}",
            first_name.to_lowercase().replace(' ', "."),
            last_name.to_lowercase(),
            prng.below(1000),
            prng.pick(&MAIL_HOSTS)
        ),
        phone = format!(
            "+41 {:02} {:03} {:02} {:02}",
            prng.below(100),
            prng.below(1000),
            prng.below(100),
            prng.below(100)
        ),
        nationality = AIRPORTS[prng.below(AIRPORTS.len() as u64) as usize].1,
        birth = date(-7_000 + prng.below(25_000) as i64),
        codeshare = flag(&mut prng, 15),
        modified = timestamp(booking_day, prng.below(1440)),
    );
}

/// The statements of the workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// First-class passengers in a wheelchair leaving airport A within the 7 days from day D.
    Wheelchair,
    /// The passenger list of one flight on one day.
    Manifest,
    /// All passengers of one booking (non-key equality on `rloc`).
    Rloc,
    /// All tickets of one frequent-flyer number.
    Ffn,
    /// How many special meals (kosher) leave airport A on day D (an aggregate).
    Meals,
    /// Cancel all tickets from airport A to the US tonight (D 18:00 to D+1 06:00).
    Cancel,
    /// Check in every passenger of one booking.
    Checkin,
}

impl Kind {
    const ALL: [Kind; 7] = [
        Kind::Wheelchair,
        Kind::Manifest,
        Kind::Rloc,
        Kind::Ffn,
        Kind::Meals,
        Kind::Cancel,
        Kind::Checkin,
    ];

    fn name(self) -> &'static str {
        match self {
            Kind::Wheelchair => "wheelchair",
            Kind::Manifest => "manifest",
            Kind::Rloc => "rloc",
            Kind::Ffn => "ffn",
            Kind::Meals => "meals",
            Kind::Cancel => "cancel",
            Kind::Checkin => "checkin",
        }
    }

    fn is_update(self) -> bool {
        matches!(self, Kind::Cancel | Kind::Checkin)
    }
}

/// A mix: statement kinds with integer weights.
fn mix(name: &str) -> anyhow::Result<Vec<(Kind, u64)>> {
    Ok(match name {
        "default" => vec![
            (Kind::Wheelchair, 30),
            (Kind::Manifest, 20),
            (Kind::Rloc, 15),
            (Kind::Ffn, 15),
            (Kind::Meals, 10),
            (Kind::Cancel, 5),
            (Kind::Checkin, 5),
        ],
        "reads" => vec![
            (Kind::Wheelchair, 1),
            (Kind::Manifest, 1),
            (Kind::Rloc, 1),
            (Kind::Ffn, 1),
            (Kind::Meals, 1),
        ],
        single => match Kind::ALL.iter().find(|kind| kind.name() == single) {
            Some(kind) => vec![(*kind, 1)],
            None => bail!("unknown mix {single:?}"),
        },
    })
}

fn pick_kind(mix: &[(Kind, u64)], prng: &mut Prng) -> Kind {
    let total: u64 = mix.iter().map(|(_, weight)| weight).sum();
    let mut draw = prng.below(total);
    for (kind, weight) in mix {
        if draw < *weight {
            return *kind;
        }
        draw -= weight;
    }
    mix[0].0
}

/// One statement of `kind` with constants drawn from the data's domains. `rows` bounds the
/// booking locators drawn.
pub fn statement(kind: Kind, seed: u64, rows: u64, prng: &mut Prng) -> String {
    let airport = AIRPORTS[prng.below(AIRPORTS.len() as u64) as usize].0;
    let day = FIRST_DAY + prng.below(DAYS) as i64;
    match kind {
        Kind::Wheelchair => format!(
            "SELECT id, rloc, last_name, first_name, seat, dep_time FROM ticket \
             WHERE dep_airport = '{airport}' AND seat_class = 'F' AND wheelchair = true \
             AND dep_date >= '{}' AND dep_date < '{}'",
            date(day),
            date(day + 7)
        ),
        Kind::Manifest => format!(
            "SELECT id, last_name, first_name, seat, seat_class, meal, wheelchair FROM ticket \
             WHERE airline = '{}' AND flight_number = {} AND dep_date = '{}'",
            prng.pick(&AIRLINES),
            prng.range_inclusive(1, FLIGHTS),
            date(day)
        ),
        Kind::Rloc => format!(
            "SELECT id, last_name, first_name, airline, flight_number, dep_time, status \
             FROM ticket WHERE rloc = '{}'",
            rloc(seed, prng.below(rows.max(3) / 3))
        ),
        Kind::Ffn => format!(
            "SELECT id, rloc, airline, flight_number, dep_date, fare FROM ticket \
             WHERE ff_number = '{}'",
            ff_number(
                AIRLINES[prng.below(AIRLINES.len() as u64) as usize],
                prng.below(1_000_000)
            )
        ),
        Kind::Meals => format!(
            "SELECT count(*) FROM ticket WHERE dep_airport = '{airport}' \
             AND dep_date = '{}' AND meal = 'KSML'",
            date(day)
        ),
        Kind::Cancel => format!(
            "UPDATE ticket SET status = 'XX' WHERE dep_airport = '{airport}' \
             AND arr_country = 'US' AND dep_time >= '{}' AND dep_time < '{}'",
            timestamp(day, 18 * 60),
            timestamp(day, 30 * 60)
        ),
        Kind::Checkin => format!(
            "UPDATE ticket SET checked_in = true, boarded = false WHERE rloc = '{}'",
            rloc(seed, prng.below(rows.max(3) / 3))
        ),
    }
}

pub fn run(arguments: TicketArguments) -> anyhow::Result<()> {
    if arguments.hosts.is_empty() || arguments.concurrency.contains(&0) || arguments.chunk == 0 {
        bail!("--hosts, --concurrency and --chunk must be non-empty and positive");
    }
    for name in &arguments.mixes {
        mix(name)?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(drive(arguments))
}

async fn connect(arguments: &TicketArguments, index: usize) -> anyhow::Result<Client> {
    crate::pg_client::connect(
        &arguments.hosts,
        index,
        &arguments.user,
        &arguments.dbname,
        None,
    )
    .await
}

fn emit(arguments: &TicketArguments, json: String) -> anyhow::Result<()> {
    crate::pg_client::append_json(arguments.json.as_deref(), &json)
}

fn progress_bar(done: u64, total: u64, elapsed: f64) {
    let width = 30;
    let fraction = done as f64 / total.max(1) as f64;
    let filled = (fraction * width as f64) as usize;
    let bar: String = (0..width)
        .map(|index| if index < filled { '=' } else { ' ' })
        .collect();
    eprint!(
        "\r[{bar}] {:>3.0}% {done}/{total} rows, {:.0} rows/s, {elapsed:.1}s\x1b[K",
        fraction * 100.0,
        done as f64 / elapsed.max(1e-9)
    );
    let _ = std::io::stderr().flush();
}

async fn load(arguments: &TicketArguments, client: &Client) -> anyhow::Result<()> {
    let rows = arguments.load;
    client.simple_query("DROP TABLE IF EXISTS ticket").await?;
    let columns: Vec<String> = COLUMNS
        .iter()
        .map(|(name, sql_type)| format!("{name} {sql_type}"))
        .collect();
    client
        .simple_query(&format!("CREATE TABLE ticket ({})", columns.join(", ")))
        .await
        .context("CREATE TABLE ticket")?;
    let names: Vec<&str> = COLUMNS.iter().map(|(name, _)| *name).collect();
    let copy = format!("COPY ticket ({}) FROM STDIN", names.join(", "));
    let started = Instant::now();
    let mut bytes_total = 0u64;
    let mut done = 0u64;
    let mut text = String::new();
    while done < rows {
        let end = (done + arguments.chunk).min(rows);
        text.clear();
        for id in done..end {
            row(arguments.seed, id, &mut text);
        }
        bytes_total += text.len() as u64;
        let sink = client.copy_in::<_, bytes::Bytes>(copy.as_str()).await?;
        futures_util::pin_mut!(sink);
        sink.send(bytes::Bytes::from(std::mem::take(&mut text).into_bytes()))
            .await?;
        let copied = sink
            .finish()
            .await
            .with_context(|| format!("COPY of rows {done}..{end}"))?;
        if copied != end - done {
            bail!("COPY of rows {done}..{end} reported {copied} rows");
        }
        done = end;
        progress_bar(done, rows, started.elapsed().as_secs_f64());
    }
    let load_seconds = started.elapsed().as_secs_f64();
    eprintln!();
    let index_started = Instant::now();
    if arguments.indexes {
        for (name, columns) in INDEXES {
            client
                .simple_query(&format!("CREATE INDEX {name} ON ticket ({columns})"))
                .await
                .with_context(|| format!("CREATE INDEX {name}"))?;
        }
    }
    let index_seconds = index_started.elapsed().as_secs_f64();
    // PostgreSQL plans better with statistics; Tessera ignores what it does not know.
    if arguments.label.starts_with("postgres") {
        client.simple_query("VACUUM ANALYZE ticket").await?;
    }
    let row_bytes = bytes_total as f64 / rows.max(1) as f64;
    println!(
        "{}: loaded {rows} rows ({:.0} bytes/row as COPY text, {:.1} MB) in {load_seconds:.1}s \
         ({:.0} rows/s){}",
        arguments.label,
        row_bytes,
        bytes_total as f64 / 1e6,
        rows as f64 / load_seconds,
        if arguments.indexes {
            format!(", {} indexes in {index_seconds:.1}s", INDEXES.len())
        } else {
            String::new()
        }
    );
    emit(
        arguments,
        format!(
            "{{\"event\":\"load\",\"system\":\"{}\",\"rows\":{rows},\"copy_bytes\":{bytes_total},\
             \"row_bytes\":{row_bytes:.1},\"load_seconds\":{load_seconds:.3},\"indexes\":{},\
             \"index_seconds\":{index_seconds:.3}}}",
            arguments.label, arguments.indexes
        ),
    )
}

#[derive(Default)]
struct ClientOutcome {
    per_kind: BTreeMap<Kind, Histogram<u64>>,
    errors: u64,
    error_sample: Option<String>,
    rows_returned: u64,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

async fn client_loop(
    client: Client,
    mix: Vec<(Kind, u64)>,
    seed: u64,
    rows: u64,
    client_seed: u64,
    deadline: Instant,
) -> (Client, ClientOutcome) {
    let mut prng = Prng::new(client_seed);
    let mut outcome = ClientOutcome::default();
    while Instant::now() < deadline {
        let kind = pick_kind(&mix, &mut prng);
        let sql = statement(kind, seed, rows, &mut prng);
        let started = Instant::now();
        match client.simple_query(&sql).await {
            Ok(messages) => {
                let micros = started.elapsed().as_micros().max(1) as u64;
                outcome
                    .per_kind
                    .entry(kind)
                    .or_insert_with(histogram)
                    .saturating_record(micros);
                outcome.rows_returned += messages
                    .iter()
                    .filter(|message| matches!(message, SimpleQueryMessage::Row(_)))
                    .count() as u64;
            }
            Err(error) => {
                outcome.errors += 1;
                if outcome.error_sample.is_none() {
                    let text = match error.as_db_error() {
                        Some(db) => format!("{}: {}", db.code().code(), db.message()),
                        None => error.to_string(),
                    };
                    outcome.error_sample = Some(format!("{} -> {text}", kind.name()));
                }
                if client.is_closed() {
                    break;
                }
            }
        }
    }
    (client, outcome)
}

fn percentile_ms(histogram: &Histogram<u64>, quantile: f64) -> f64 {
    histogram.value_at_quantile(quantile) as f64 / 1000.0
}

async fn drive(arguments: TicketArguments) -> anyhow::Result<()> {
    let first = connect(&arguments, 0).await?;
    if arguments.load > 0 {
        load(&arguments, &first).await?;
    }
    let rows: u64 = first
        .simple_query("SELECT count(*) FROM ticket")
        .await?
        .iter()
        .find_map(|message| match message {
            SimpleQueryMessage::Row(row) => row.get(0).and_then(|text| text.parse().ok()),
            _ => None,
        })
        .unwrap_or(0);
    println!("{}: ticket holds {rows} rows", arguments.label);
    let mut pool: Vec<Client> = vec![first];
    for mix_name in &arguments.mixes {
        let weights = mix(mix_name)?;
        for &concurrency in &arguments.concurrency {
            // Grow the pool to `concurrency` connections, 50 handshakes at a time.
            while pool.len() < concurrency {
                let want = (concurrency - pool.len()).min(50);
                let base = pool.len();
                let mut handshakes = Vec::new();
                for offset in 0..want {
                    let arguments = arguments.clone();
                    handshakes.push(tokio::spawn(async move {
                        connect(&arguments, base + offset).await
                    }));
                }
                for handshake in handshakes {
                    pool.push(handshake.await??);
                }
            }
            let started = Instant::now();
            let deadline = started + Duration::from_secs_f64(arguments.duration);
            let mut tasks = Vec::new();
            for (index, client) in pool.drain(..concurrency).enumerate() {
                let client_seed = arguments
                    .seed
                    .wrapping_mul(1_000_003)
                    .wrapping_add(concurrency as u64 * 10_007 + index as u64);
                tasks.push(tokio::spawn(client_loop(
                    client,
                    weights.clone(),
                    arguments.seed,
                    rows,
                    client_seed,
                    deadline,
                )));
            }
            let give_up = deadline + Duration::from_secs_f64(arguments.drain);
            let mut merged: BTreeMap<Kind, Histogram<u64>> = BTreeMap::new();
            let mut all = histogram();
            let (mut errors, mut unfinished, mut rows_returned) = (0u64, 0u64, 0u64);
            let mut error_sample: Option<String> = None;
            let mut last_completion = started;
            for task in tasks {
                let now = Instant::now();
                let wait = give_up.saturating_duration_since(now);
                let abort = task.abort_handle();
                match tokio::time::timeout(wait, task).await {
                    Ok(Ok((client, outcome))) => {
                        last_completion = last_completion.max(Instant::now());
                        if !client.is_closed() {
                            pool.push(client);
                        }
                        errors += outcome.errors;
                        rows_returned += outcome.rows_returned;
                        if error_sample.is_none() {
                            error_sample = outcome.error_sample;
                        }
                        for (kind, histogram) in outcome.per_kind {
                            all.add(&histogram).expect("same bounds");
                            merged
                                .entry(kind)
                                .or_insert_with(self::histogram)
                                .add(&histogram)
                                .expect("same bounds");
                        }
                    }
                    Ok(Err(join)) => bail!("a client task failed: {join}"),
                    Err(_) => {
                        abort.abort();
                        unfinished += 1;
                    }
                }
            }
            if unfinished > 0 {
                last_completion = Instant::now();
            }
            let elapsed = last_completion.duration_since(started).as_secs_f64();
            let completed = all.len();
            let throughput = completed as f64 / elapsed.max(1e-9);
            let updates: u64 = merged
                .iter()
                .filter(|(kind, _)| kind.is_update())
                .map(|(_, histogram)| histogram.len())
                .sum();
            let (p50, p90, p99, max, mean) = if completed > 0 {
                (
                    percentile_ms(&all, 0.5),
                    percentile_ms(&all, 0.9),
                    percentile_ms(&all, 0.99),
                    all.max() as f64 / 1000.0,
                    all.mean() / 1000.0,
                )
            } else {
                (0.0, 0.0, 0.0, 0.0, 0.0)
            };
            println!(
                "{} mix={mix_name} clients={concurrency}: {completed} statements ({updates} \
                 updates) in {elapsed:.1}s = {throughput:.1}/s; latency ms p50 {p50:.1} p90 \
                 {p90:.1} p99 {p99:.1} max {max:.1}; {errors} errors, {unfinished} unfinished{}",
                arguments.label,
                match &error_sample {
                    Some(sample) => format!(" (first: {sample})"),
                    None => String::new(),
                }
            );
            let kinds: Vec<String> = merged
                .iter()
                .map(|(kind, histogram)| {
                    format!(
                        "\"{}\":{{\"count\":{},\"p50_ms\":{:.3},\"p99_ms\":{:.3},\"mean_ms\":{:.3}}}",
                        kind.name(),
                        histogram.len(),
                        percentile_ms(histogram, 0.5),
                        percentile_ms(histogram, 0.99),
                        histogram.mean() / 1000.0
                    )
                })
                .collect();
            emit(
                &arguments,
                format!(
                    "{{\"event\":\"run\",\"system\":\"{}\",\"rows\":{rows},\"mix\":\"{mix_name}\",\
                     \"concurrency\":{concurrency},\"duration_s\":{},\"elapsed_s\":{elapsed:.3},\
                     \"completed\":{completed},\"updates\":{updates},\"rows_returned\":{rows_returned},\
                     \"errors\":{errors},\"unfinished\":{unfinished},\"throughput\":{throughput:.3},\
                     \"p50_ms\":{p50:.3},\"p90_ms\":{p90:.3},\"p99_ms\":{p99:.3},\"max_ms\":{max:.3},\
                     \"mean_ms\":{mean:.3},\"error_sample\":{},\"kinds\":{{{}}}}}",
                    arguments.label,
                    arguments.duration,
                    match &error_sample {
                        Some(sample) => format!("{:?}", sample),
                        None => "null".to_string(),
                    },
                    kinds.join(",")
                ),
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_have_47_fields_of_about_350_bytes_and_are_deterministic() {
        let mut text = String::new();
        for id in 0..1000 {
            row(7, id, &mut text);
        }
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1000);
        assert!(lines.iter().all(|line| line.split('\t').count() == 47));
        let average = text.len() / 1000;
        assert!((320..=400).contains(&average), "{average} bytes per row");
        let mut again = String::new();
        row(7, 123, &mut again);
        assert_eq!(lines[123], again.trim_end());
    }

    #[test]
    fn dates_are_civil() {
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(FIRST_DAY), "2025-06-01");
        assert_eq!(timestamp(FIRST_DAY, 30 * 60), "2025-06-02 06:00:00");
    }
}
