//! Liveness: once the faults stop and every replica is up, the group converges (one view, every
//! replica normal, every replica executed every committed op, equal states) and every
//! outstanding request completes, within a bounded number of ticks.

use super::Violation;

pub fn outstanding_completed(outstanding: usize, ticks: u64) -> Result<(), Violation> {
    if outstanding == 0 {
        return Ok(());
    }
    Err(Violation {
        checker: "liveness",
        report: format!(
            "{outstanding} requests still outstanding {ticks} ticks after the faults stopped"
        ),
    })
}

pub fn converged(description: Option<String>, ticks: u64) -> Result<(), Violation> {
    match description {
        None => Ok(()),
        Some(state) => Err(Violation {
            checker: "liveness",
            report: format!(
                "replicas did not converge {ticks} ticks after the faults stopped: {state}"
            ),
        }),
    }
}
