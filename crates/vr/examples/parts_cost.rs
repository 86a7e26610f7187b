//! What sending a message over `Config::message_bytes_max` in parts costs on the protocol
//! loop: `cargo run -p vr --release --example parts_cost [MiB]`. Builds a DoViewChange whose log
//! holds MiB of operations (entries of 64 requests of 4 KiB), and times the size bound (paid by
//! every message), cutting it into parts at the default bound, and reassembling and decoding
//! them at the receiver (`docs/bench/vr-parts.md`).

use std::time::Instant;
use vr::{ClientId, Entry, Message, Op, ReplicaIndex, Request, RequestKind, RequestNumber, View};

fn main() {
    let mebibytes: u64 = std::env::args()
        .nth(1)
        .and_then(|text| text.parse().ok())
        .unwrap_or(200);
    let request_bytes = 4096;
    let entries = (mebibytes << 20) / (64 * request_bytes as u64);
    let log: Vec<Entry> = (1..=entries)
        .map(|op| Entry {
            view: View(3),
            op: Op(op),
            requests: (0..64)
                .map(|client| Request {
                    client: ClientId(client),
                    request: RequestNumber(op),
                    kind: RequestKind::Write,
                    operation: vec![(op % 251) as u8; request_bytes],
                })
                .collect(),
        })
        .collect();
    let message = Message::DoViewChange {
        view: View(4),
        log_view: View(3),
        op: Op(entries),
        commit: Op(entries),
        checkpoint_op: Op(0),
        replica: ReplicaIndex(1),
        log,
        durability_log: Vec::new(),
    };
    let started = Instant::now();
    let bound = vr::message_bytes(&message);
    let bound_took = started.elapsed();
    let started = Instant::now();
    let parts = vr::split_for_bench(&message, ReplicaIndex(1), vr::MESSAGE_BYTES_MAX_DEFAULT);
    let split_took = started.elapsed();
    let started = Instant::now();
    let whole = vr::reassemble_for_bench(parts.clone());
    let join_took = started.elapsed();
    assert_eq!(whole.as_ref(), Some(&message));
    println!(
        "DoViewChange of {entries} entries, bound {:.1} MiB: bound {:.2} ms, split into {} parts {:.1} ms, reassembled and decoded {:.1} ms",
        bound as f64 / f64::from(1 << 20),
        bound_took.as_secs_f64() * 1e3,
        parts.len(),
        split_took.as_secs_f64() * 1e3,
        join_took.as_secs_f64() * 1e3,
    );
}
