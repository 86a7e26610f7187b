//! Measures one shared scan cycle over 1,000,000 rows of about 350 bytes (the paper's Ticket
//! record size) with 1, 10, 100 and 1,000 concurrent non-key equality queries.
//!
//! Run: `cargo run -p engine --release --example scan_speed [rows]`
//!
//! rows/s is table rows visited per second by the one cycle; payload GB/s is the rows' payload
//! bytes (`Value::payload_bytes`, the data a row scan must look at) per second, also given as a
//! share of the machine's streaming read bandwidth (measured here: a sum over 512 MiB on one
//! core). A shared read cycle streams the column image (`engine::rows`) and reads only the
//! probed column and the returned rows' read columns, so "touched" gives the bytes it actually
//! reads per row (an estimate from the layout: see the printed formula) and their rate: payload
//! GB/s above the bandwidth means skipping, not bandwidth. Timing lives here, in a binary,
//! never in the engine or its tests.

use engine::{
    ColumnDef, DataType, Engine, OnConflict, Operation, Output, Predicate, TableSchema, Value,
};
use std::time::Instant;

const FLIGHTS: u64 = 10_000;
const REPETITIONS: usize = 5;
const AIRPORTS: [&str; 8] = ["LHR", "LAX", "SFO", "ZRH", "JFK", "CDG", "FRA", "NRT"];

fn schema() -> TableSchema {
    TableSchema::new(
        "ticket",
        vec![
            ColumnDef::new("id", DataType::BigInt),
            ColumnDef::new("flight", DataType::Int).not_null(),
            ColumnDef::new(
                "airport",
                DataType::Text {
                    length_max: Some(3),
                },
            ),
            ColumnDef::new("class", DataType::Int),
            ColumnDef::new("departure", DataType::Date),
            ColumnDef::new("booked_at", DataType::Timestamp),
            ColumnDef::new("price", DataType::Double),
            ColumnDef::new("wheelchair", DataType::Boolean),
            ColumnDef::new(
                "passenger",
                DataType::Text {
                    length_max: Some(64),
                },
            ),
            ColumnDef::new("remarks", DataType::Text { length_max: None }),
        ],
        &["id"],
    )
    .expect("valid schema")
}

/// A deterministic pseudo-random row of about 350 payload bytes.
fn row(id: u64) -> Vec<Value> {
    let mix = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 17;
    vec![
        Value::BigInt(id as i64),
        Value::Int((mix % FLIGHTS) as i32),
        Value::Text(AIRPORTS[(mix % 8) as usize].to_string()),
        Value::Int((mix % 3) as i32),
        Value::Date(19_000 + (mix % 365) as i32),
        Value::Timestamp(1_600_000_000_000_000 + (mix % 1_000_000) as i64),
        Value::Double((mix % 100_000) as f64 / 100.0),
        Value::Boolean(mix.is_multiple_of(50)),
        Value::Text(format!("PASSENGER {id:>12} {:>16}", mix % 1_000_003)),
        Value::Text(format!("{:0>270}", mix)),
    ]
}

/// The allocator `tessera` runs with (`crates/tessera/src/main.rs`), so that building result
/// rows costs here what it costs there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let rows: u64 = std::env::args()
        .nth(1)
        .and_then(|text| text.parse().ok())
        .unwrap_or(1_000_000);
    let mut engine = Engine::new();
    engine
        .execute(&Operation::CreateTable { schema: schema() })
        .expect("creates");
    let load_started = Instant::now();
    let mut payload_bytes = 0usize;
    for chunk_start in (0..rows).step_by(50_000) {
        let chunk: Vec<Vec<Value>> = (chunk_start..(chunk_start + 50_000).min(rows))
            .map(row)
            .collect();
        payload_bytes += chunk
            .iter()
            .flatten()
            .map(Value::payload_bytes)
            .sum::<usize>();
        let insert = Operation::Insert {
            table: "ticket".into(),
            columns: Vec::new(),
            rows: chunk,
            on_conflict: OnConflict::Error,
        };
        engine.execute(&insert).expect("loads");
    }
    println!(
        "loaded {rows} rows, {:.1} payload bytes/row, {:.2} GB payload, in {:.1} s",
        payload_bytes as f64 / rows as f64,
        payload_bytes as f64 / 1e9,
        load_started.elapsed().as_secs_f64()
    );
    // The floor: one pass over the same rows reading the queried column, with no engine logic.
    let table = engine.table("ticket").expect("loaded");
    let started = Instant::now();
    let matching = table
        .rows
        .values()
        .filter(|row| std::hint::black_box(&row[1]) == &Value::Int(0))
        .count();
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "baseline: plain iteration comparing one column: {:.1} ms ({:.2e} rows/s, {matching} rows)",
        seconds * 1e3,
        rows as f64 / seconds
    );
    // The machine's streaming read bandwidth, one core: a sum over 512 MiB (median of 3).
    let words: Vec<u64> = (0..(512u64 << 20) / 8).collect();
    let mut streams = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        let sum = words.iter().fold(0u64, |sum, word| sum.wrapping_add(*word));
        std::hint::black_box(sum);
        streams.push(started.elapsed().as_secs_f64());
    }
    streams.sort_by(f64::total_cmp);
    let bandwidth = (words.len() * 8) as f64 / streams[1] / 1e9;
    drop(words);
    println!("memory: streaming read of 512 MiB on one core: {bandwidth:.1} GB/s");
    let value_bytes = std::mem::size_of::<Value>();
    println!(
        "bytes the scan touches: {value_bytes} per row (the probed column's `Value` in its \
         column chunk) plus, per returned row, the read columns (id, flight, passenger: \
         3 x {value_bytes}) and the passenger string (~30)"
    );
    let example = query(0);
    println!("plan: {}", engine.explain(&example).expect("explains"));
    println!();
    println!("median of {REPETITIONS} cycles per row");
    println!(
        "| queries | cycle ms | rows/s | payload GB/s | % of bandwidth | touched B/row | touched GB/s | queries/s | rows returned |"
    );
    println!(
        "|--------:|---------:|-------:|-------------:|---------------:|--------------:|-------------:|----------:|--------------:|"
    );
    // The last line: 1,000 queries for flights no row has (the probe alone, no result rows).
    for (queries, none_match) in [
        (1u64, false),
        (10, false),
        (100, false),
        (1_000, false),
        (1_000, true),
    ] {
        let batch: Vec<Operation> = (0..queries)
            .map(|at| match none_match {
                false => query((at * 7_919) % FLIGHTS),
                true => query(FLIGHTS + at),
            })
            .collect();
        // Five cycles; the median is reported (the machine is shared, single runs are noisy).
        let mut timings = Vec::new();
        let mut returned = 0;
        for _ in 0..REPETITIONS {
            let started = Instant::now();
            let results = engine.execute_batch(&batch);
            timings.push(started.elapsed().as_secs_f64());
            returned = results
                .iter()
                .map(|result| match result {
                    Ok(Output::Rows { rows, .. }) => rows.len(),
                    other => panic!("query failed: {other:?}"),
                })
                .sum::<usize>();
        }
        timings.sort_by(f64::total_cmp);
        let seconds = timings[REPETITIONS / 2];
        let touched =
            rows as f64 * value_bytes as f64 + returned as f64 * (3 * value_bytes + 30) as f64;
        let payload_rate = payload_bytes as f64 / seconds / 1e9;
        println!(
            "| {queries}{} | {:.1} | {:.2e} | {:.2} | {:.0} % | {:.1} | {:.2} | {:.0} | {returned} |",
            if none_match { " (none match)" } else { "" },
            seconds * 1e3,
            rows as f64 / seconds,
            payload_rate,
            payload_rate / bandwidth * 100.0,
            touched / rows as f64,
            touched / seconds / 1e9,
            queries as f64 / seconds,
        );
    }
    // The first write after a snapshot (a checkpoint's copy of the engine holds every table):
    // one UPDATE by primary key, then a second one (no snapshot held any more), median of five.
    let mut first = Vec::new();
    let mut second = Vec::new();
    for repetition in 0..REPETITIONS as u64 {
        let snapshot = engine.clone();
        let update = |id: u64| Operation::Update {
            table: "ticket".into(),
            assignments: vec![engine::Assignment::new("class", Value::Int(7))],
            predicate: Some(Predicate::equal("id", Value::BigInt(id as i64))),
        };
        let started = Instant::now();
        engine.execute(&update(repetition)).expect("updates");
        first.push(started.elapsed().as_secs_f64());
        let started = Instant::now();
        engine.execute(&update(repetition + 1)).expect("updates");
        second.push(started.elapsed().as_secs_f64());
        drop(snapshot);
    }
    first.sort_by(f64::total_cmp);
    second.sort_by(f64::total_cmp);
    println!();
    println!(
        "first write after a snapshot: {:.3} ms; the next write: {:.3} ms (UPDATE by key, median of {REPETITIONS})",
        first[REPETITIONS / 2] * 1e3,
        second[REPETITIONS / 2] * 1e3
    );
    // The same for a one-row INSERT (a new key inside the table's key range is not possible
    // with dense ids, so past the last key) and a one-row DELETE.
    let (mut inserts, mut deletes) = (Vec::new(), Vec::new());
    for repetition in 0..REPETITIONS as u64 {
        let snapshot = engine.clone();
        let insert = Operation::Insert {
            table: "ticket".into(),
            columns: Vec::new(),
            rows: vec![row(rows + repetition)],
            on_conflict: OnConflict::Error,
        };
        let started = Instant::now();
        engine.execute(&insert).expect("inserts");
        inserts.push(started.elapsed().as_secs_f64());
        drop(snapshot);
        let snapshot = engine.clone();
        let delete = Operation::Delete {
            table: "ticket".into(),
            predicate: Some(Predicate::equal(
                "id",
                Value::BigInt((rows / 2 + repetition) as i64),
            )),
        };
        let started = Instant::now();
        engine.execute(&delete).expect("deletes");
        deletes.push(started.elapsed().as_secs_f64());
        drop(snapshot);
    }
    inserts.sort_by(f64::total_cmp);
    deletes.sort_by(f64::total_cmp);
    println!(
        "first INSERT after a snapshot: {:.3} ms; first DELETE by key after a snapshot: {:.3} ms (median of {REPETITIONS})",
        inserts[REPETITIONS / 2] * 1e3,
        deletes[REPETITIONS / 2] * 1e3
    );
    // A write cycle over every row (a non-key predicate matching ~1/10,000 of them).
    println!(
        "write cycle (UPDATE by a non-key column, no snapshot held): {:.1} ms",
        write_cycle_ms(&mut engine, Predicate::equal("flight", Value::Int(3)))
    );
    // Equalities on a TEXT column (the Ticket statements' airports, booking locators and
    // frequent-flyer numbers): a probe that hashes each row's string reads its heap bytes.
    let passenger = Value::Text(format!("PASSENGER {:>12} {:>16}", 17, 17));
    println!(
        "write cycle (UPDATE by a non-key TEXT column): {:.1} ms",
        write_cycle_ms(&mut engine, Predicate::equal("passenger", passenger))
    );
    let batch: Vec<Operation> = (0..1_000u64)
        .map(|at| Operation::Select {
            table: "ticket".into(),
            columns: vec!["id".into(), "passenger".into()],
            predicate: Some(Predicate::equal(
                "passenger",
                Value::Text(format!("PASSENGER {at:>12} none")),
            )),
            limit: None,
        })
        .collect();
    let mut timings = Vec::new();
    for _ in 0..REPETITIONS {
        let started = Instant::now();
        std::hint::black_box(engine.execute_batch(&batch));
        timings.push(started.elapsed().as_secs_f64());
    }
    timings.sort_by(f64::total_cmp);
    println!(
        "read cycle of 1,000 equalities on a TEXT column, none match: {:.1} ms",
        timings[REPETITIONS / 2] * 1e3
    );
}

/// The median time, in ms, of `REPETITIONS` write cycles `UPDATE ticket SET class = … WHERE
/// predicate` (no snapshot held).
fn write_cycle_ms(engine: &mut Engine, predicate: Predicate) -> f64 {
    let mut timings = Vec::new();
    for repetition in 0..REPETITIONS {
        let update = Operation::Update {
            table: "ticket".into(),
            assignments: vec![engine::Assignment::new(
                "class",
                Value::Int(repetition as i32),
            )],
            predicate: Some(predicate.clone()),
        };
        let started = Instant::now();
        engine.execute(&update).expect("updates");
        timings.push(started.elapsed().as_secs_f64());
    }
    timings.sort_by(f64::total_cmp);
    timings[REPETITIONS / 2] * 1e3
}

/// `SELECT id, passenger FROM ticket WHERE flight = …`: a non-key equality (no index on flight).
fn query(flight: u64) -> Operation {
    Operation::Select {
        table: "ticket".into(),
        columns: vec!["id".into(), "passenger".into()],
        predicate: Some(Predicate::equal("flight", Value::Int(flight as i32))),
        limit: None,
    }
}
