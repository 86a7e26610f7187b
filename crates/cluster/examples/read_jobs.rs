//! Measures how long a partition replica's protocol loop is busy applying one log entry of
//! non-key SELECTs, with read jobs off (they execute in `apply_batch`, on the loop: before) and
//! on (`PartitionMachineSettings::read_jobs`: `apply_batch` hands them out as a read job, which
//! the runtime runs on a worker thread: after), issue 19 item 4, `docs/internals/scans.md`.
//!
//! Run: `cargo run -p cluster --release --example read_jobs [rows] [selects per entry]`
//! (defaults 200,000 rows of about 350 payload bytes, as `engine`'s `loop_turn`, and 1, 10
//! and 50 SELECTs per entry). Each line is the median of 5 entries; the machine is shared.
//!
//! Lines: `loop, jobs off` is `apply_batch` of the entry (the scan on the loop); `loop, jobs
//! on` is `apply_batch` with read jobs (a copy of the data and the job handed out); `job run`
//! is `ReadJob::run` (off the loop); `write while held` is a 1-row UPDATE applied while the
//! job's copy is held (copy-on-write: the path to the row, on the loop).

use cluster::partition_store::PartitionStore;
use cluster::payload::{KeyPlacement, SqlPayload, SqlTarget};
use ecast::{PartitionData, PartitionMachine, PartitionMachineSettings, PartitionOperation};
use engine::{Assignment, ColumnDef, Command, DataType, OnConflict, Operation, Predicate};
use engine::{TableSchema, Value};
use placement::PositionSet;
use std::time::Instant;
use vr::{ClientId, RequestNumber, StateMachine};

const FLIGHTS: u64 = 10_000;
const REPETITIONS: usize = 5;

fn schema() -> TableSchema {
    TableSchema::new(
        "ticket",
        vec![
            ColumnDef::new("id", DataType::BigInt),
            ColumnDef::new("flight", DataType::Int).not_null(),
            ColumnDef::new("passenger", DataType::Text { length_max: None }),
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
        Value::Text(format!("PASSENGER {id:>12} {:>16}", mix % 1_000_003)),
        Value::Text(format!("{:0>300}", mix)),
    ]
}

fn payload(operation: Operation) -> Vec<u8> {
    SqlPayload {
        operation: store::sql_operation(&Command::Execute(operation)),
        target: SqlTarget::Arcs(vec![PositionSet::whole()]),
    }
    .encode()
}

fn machine(rows: u64, read_jobs: bool) -> PartitionMachine<PartitionStore> {
    let mut data = PartitionStore::new(PositionSet::whole(), KeyPlacement::hash());
    data.execute(&payload(Operation::CreateTable { schema: schema() }));
    for start in (0..rows).step_by(1_000) {
        let rows = (start..(start + 1_000).min(rows)).map(row).collect();
        data.execute(&payload(Operation::Insert {
            table: "ticket".into(),
            columns: Vec::new(),
            rows,
            on_conflict: OnConflict::Error,
        }));
    }
    let settings = PartitionMachineSettings {
        read_jobs,
        ..PartitionMachineSettings::default()
    };
    PartitionMachine::new(data, settings)
}

fn entry(selects: usize, round: usize) -> Vec<Vec<u8>> {
    (0..selects)
        .map(|index| {
            let select = Operation::Select {
                table: "ticket".into(),
                columns: vec!["id".into(), "passenger".into()],
                predicate: Some(Predicate::equal(
                    "flight",
                    Value::Int(((index * 7 + round) as u64 % FLIGHTS) as i32),
                )),
                limit: None,
            };
            PartitionOperation::Single {
                client: ClientId(1_000 + index as u64),
                number: RequestNumber(1 + round as u64),
                operation: payload(select),
            }
            .encode()
        })
        .collect()
}

fn update(round: usize) -> Vec<u8> {
    let update = Operation::Update {
        table: "ticket".into(),
        assignments: vec![Assignment::new("passenger", Value::Text("moved".into()))],
        predicate: Some(Predicate::equal("id", Value::BigInt(round as i64))),
    };
    PartitionOperation::Single {
        client: ClientId(1),
        number: RequestNumber(1 + round as u64),
        operation: payload(update),
    }
    .encode()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

fn millis(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1_000.0
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rows: u64 = args
        .next()
        .map_or(200_000, |value| value.parse().expect("rows"));
    let sizes: Vec<usize> = match args.next() {
        Some(value) => vec![value.parse().expect("selects")],
        None => vec![1, 10, 50],
    };
    let mut off = machine(rows, false);
    let mut on = machine(rows, true);
    println!("rows {rows}; median of {REPETITIONS} entries, ms");
    println!("| selects per entry | loop, jobs off | loop, jobs on | job run (off the loop) | write while held |");
    println!("|--:|--:|--:|--:|--:|");
    let mut round = 0;
    for selects in sizes {
        let (mut loop_off, mut loop_on, mut run, mut write) = (vec![], vec![], vec![], vec![]);
        for _ in 0..REPETITIONS {
            round += 1;
            let operations = entry(selects, round);
            let borrowed: Vec<&[u8]> = operations.iter().map(Vec::as_slice).collect();
            let started = Instant::now();
            let results = off.apply_batch(&borrowed);
            loop_off.push(millis(started));
            assert_eq!(results.len(), selects);
            let started = Instant::now();
            on.apply_batch(&borrowed);
            loop_on.push(millis(started));
            let jobs: Vec<(u64, ecast::ReadJob<PartitionStore>)> = on
                .jobs_after(0)
                .map(|(number, job)| (number, job.clone()))
                .collect();
            assert_eq!(jobs.len(), 1, "one job per entry of reads");
            let write_entry = update(round);
            let started = Instant::now();
            on.apply_batch(&[write_entry.as_slice()]);
            write.push(millis(started));
            for (number, job) in jobs {
                let started = Instant::now();
                let results = job.run();
                run.push(millis(started));
                on.job_done(number, results);
            }
            off.apply_batch(&[write_entry.as_slice()]);
        }
        assert_eq!(
            postcard::to_allocvec(on.data()).expect("serialises"),
            postcard::to_allocvec(off.data()).expect("serialises"),
            "both machines hold the same rows"
        );
        println!(
            "| {selects} | {:.2} | {:.3} | {:.2} | {:.3} |",
            median(loop_off),
            median(loop_on),
            median(run),
            median(write)
        );
    }
}
