//! Tessera's deterministic simulator.
//!
//! One seed draws the cluster (3 or 5 replicas, durability mode, protocol knobs), the fault mix
//! (delay, loss, duplication, reordering, partitions, crashes with torn disk tails, pauses,
//! clock skew) and the workload (concurrent clients on key families, and on half the seeds SQL
//! commands on small tables; the replicas run `store::Store`). The run has a safety
//! phase with faults and a liveness phase without; checkers outside the replicas judge it. The
//! same seed replays the same run bit for bit: the trace hash proves it.
#![forbid(unsafe_code)]

pub mod checkers;
pub mod client;
pub mod disk;
pub mod ecast;
pub mod history;
pub mod network;
pub mod options;
pub mod replicas;
pub mod simulation;
pub mod trace;
pub mod workload;

pub use options::Options;
pub use simulation::{RunReport, Simulation, Stats};

/// Runs one seed. `trace_lines` > 0 keeps that many transcript lines for the report.
pub fn run(options: Options, trace_lines: usize) -> RunReport {
    Simulation::new(options, trace_lines).run()
}

/// Runs one seed; if it fails, runs it again with the transcript on (the run is deterministic,
/// so the second run fails the same way) and returns that report.
pub fn run_with_trace_on_failure(options: Options, trace_lines: usize) -> RunReport {
    let report = run(options.clone(), 0);
    if report.result.is_ok() || trace_lines == 0 {
        return report;
    }
    run(options, trace_lines)
}
