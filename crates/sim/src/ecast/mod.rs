//! The E-Cast mode of the simulator (`--ecast`): a router group, the forwarder, storage
//! processes in `sequenced` mode on a placement ring, gateways, a nemesis and the E-Cast
//! checkers. Separate from the single-group mode, whose runs it leaves unchanged.

pub mod history;
pub mod network;
pub mod options;
pub mod world;

pub use options::{EcastCanary, EcastOptions};
pub use world::{EcastReport, EcastSimulation, EcastStats};

/// Runs one E-Cast seed. `trace_lines` > 0 keeps that many transcript lines for the report.
pub fn run(options: EcastOptions, trace_lines: usize) -> EcastReport {
    EcastSimulation::new(options, trace_lines).run()
}

/// Runs one seed; if it fails, runs it again with the transcript on.
pub fn run_with_trace_on_failure(options: EcastOptions, trace_lines: usize) -> EcastReport {
    let report = run(options.clone(), 0);
    if report.result.is_ok() || trace_lines == 0 {
        return report;
    }
    run(options, trace_lines)
}
