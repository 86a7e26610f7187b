//! Measures the work a partition replica does *on its protocol loop* for SQL scans and
//! checkpoints (issue 19 item 4, "scans leave the protocol loop"): the time one loop turn is
//! busy, which is how long heartbeats, prepares and view-change messages wait behind it.
//!
//! Run: `cargo run -p engine --release --example loop_turn [rows] [queries]`
//! (defaults 200,000 rows of about 350 payload bytes, the Ticket size, and 1,000 queries).
//!
//! What each line is, on the loop of every replica of a partition group (`tessera dev`):
//!
//! - `one statement`: a non-key SELECT is an op of the partition's log (reads included,
//!   `runtime::ecast::sql`), executed alone at its position by `apply` on every replica.
//! - `read cycle of N`: N ready reads answered by one `read_batch` (the single-group primary
//!   path, `vr::Replica::maybe_serve_reads` → `query_batch`).
//! - `checkpoint copy`: `Engine::clone`, what `store::Store::snapshot_source` (and
//!   `ecast::PartitionMachine`'s) does on the loop before serialising off it; with
//!   copy-on-write tables it shares them. `deep copy`: what it did before (every table cloned).
//! - `write after copy`: one UPDATE of one row while that copy is still held: the first write
//!   to a shared table copies it (copy-on-write), on the loop.
//!
//! Timing lives here, in a binary, never in the engine or its tests. The machine is shared:
//! each line is the median of 5.

use engine::{
    Assignment, ColumnDef, DataType, Engine, OnConflict, Operation, Predicate, TableSchema, Value,
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

fn row(id: u64) -> Vec<Value> {
    let mix = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 17;
    vec![
        Value::BigInt(id as i64),
        Value::Int((mix % FLIGHTS) as i32),
        Value::Text(AIRPORTS[(mix % 8) as usize].to_string()),
        Value::Boolean(mix.is_multiple_of(50)),
        Value::Text(format!("PASSENGER {id:>12} {:>16}", mix % 1_000_003)),
        Value::Text(format!("{:0>280}", mix)),
    ]
}

fn query(flight: u64) -> Operation {
    Operation::Select {
        table: "ticket".into(),
        columns: vec!["id".into(), "passenger".into()],
        predicate: Some(Predicate::equal("flight", Value::Int(flight as i32))),
        limit: None,
    }
}

fn update(id: u64) -> Operation {
    Operation::Update {
        table: "ticket".into(),
        assignments: vec![Assignment::new("wheelchair", Value::Boolean(true))],
        predicate: Some(Predicate::equal("id", Value::BigInt(id as i64))),
    }
}

/// The median of `REPETITIONS` runs of `work`, in milliseconds.
fn median_ms(mut work: impl FnMut()) -> f64 {
    let mut timings: Vec<f64> = (0..REPETITIONS)
        .map(|_| {
            let started = Instant::now();
            work();
            started.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    timings.sort_by(f64::total_cmp);
    timings[REPETITIONS / 2]
}

/// The allocator `tessera` runs with (`crates/tessera/src/main.rs`), so that building result
/// rows costs here what it costs there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let mut arguments = std::env::args().skip(1);
    let rows: u64 = arguments
        .next()
        .and_then(|text| text.parse().ok())
        .unwrap_or(200_000);
    let queries: u64 = arguments
        .next()
        .and_then(|text| text.parse().ok())
        .unwrap_or(1_000);
    let mut engine = Engine::new();
    engine
        .execute(&Operation::CreateTable { schema: schema() })
        .expect("creates");
    for chunk_start in (0..rows).step_by(50_000) {
        let insert = Operation::Insert {
            table: "ticket".into(),
            columns: Vec::new(),
            rows: (chunk_start..(chunk_start + 50_000).min(rows))
                .map(row)
                .collect(),
            on_conflict: OnConflict::Error,
        };
        engine.execute(&insert).expect("loads");
    }
    println!("{rows} rows, {queries} queries in the read cycle; median of {REPETITIONS}, ms");
    println!("| on the loop | ms |");
    println!("|---|--:|");
    let one = query(17);
    let ms = median_ms(|| {
        std::hint::black_box(engine.read(&one).expect("reads"));
    });
    println!("| one statement (non-key SELECT, alone) | {ms:.1} |");
    let batch: Vec<Operation> = (0..queries)
        .map(|at| query((at * 7_919) % FLIGHTS))
        .collect();
    let ms = median_ms(|| {
        std::hint::black_box(engine.read_batch(&batch));
    });
    println!("| read cycle of {queries} (read_batch) | {ms:.1} |");
    let ms = median_ms(|| {
        std::hint::black_box(engine.clone());
    });
    println!("| checkpoint copy (Engine::clone, copy-on-write tables) | {ms:.3} |");
    // The copies are dropped outside the timing, as the serialising thread drops them.
    let mut timings = Vec::new();
    for _ in 0..REPETITIONS {
        let started = Instant::now();
        let copies: Vec<_> = engine.tables().cloned().collect();
        timings.push(started.elapsed().as_secs_f64() * 1e3);
        std::hint::black_box(copies);
    }
    timings.sort_by(f64::total_cmp);
    let ms = timings[REPETITIONS / 2];
    println!("| deep copy of every table (the checkpoint copy before copy-on-write) | {ms:.1} |");
    let mut id = 0;
    let mut timings = Vec::new();
    for _ in 0..REPETITIONS {
        let copy = engine.clone();
        let started = Instant::now();
        engine.execute(&update(id)).expect("updates");
        timings.push(started.elapsed().as_secs_f64() * 1e3);
        id += 1;
        std::hint::black_box(copy);
    }
    timings.sort_by(f64::total_cmp);
    println!(
        "| write after copy (1-row UPDATE while the copy is held) | {:.2} |",
        timings[REPETITIONS / 2]
    );
    let mut timings = Vec::new();
    for _ in 0..REPETITIONS {
        let started = Instant::now();
        engine.execute(&update(id)).expect("updates");
        timings.push(started.elapsed().as_secs_f64() * 1e3);
        id += 1;
    }
    timings.sort_by(f64::total_cmp);
    println!(
        "| write, no copy held (1-row UPDATE) | {:.2} |",
        timings[REPETITIONS / 2]
    );
}
