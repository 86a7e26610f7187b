//! A regular-register checker (Crescando/RB §6.7's basic reads): per key, a read returns the
//! value of the last write completed before it was invoked, or of a write concurrent with it.
//! Used over RESP keys (`resp_read_isolation.rs`) and SQL rows (`sql_read_isolation.rs`).

use std::time::Duration;

use super::partitioned::{info_counter, PartitionedCluster};

/// Basic reads answered by a member from its executed state, and basic reads that went
/// through a group's log, summed over every storage process's gateway (INFO over RESP).
pub fn basic_counters(cluster: &PartitionedCluster) -> (u64, u64) {
    let sum = |name| {
        cluster
            .client_ports
            .iter()
            .map(|port| info_counter(*port, name))
            .sum::<u64>()
    };
    (
        sum("tessera_bypass_basic_answered"),
        sum("tessera_bypass_basic_ordered"),
    )
}

/// One operation of the history: when it was invoked and completed (from the run's start),
/// its key and the value written or read (0 for a missing key).
#[derive(Clone, Copy, Debug)]
pub struct Event {
    pub key: usize,
    pub value: u64,
    pub invoked: Duration,
    /// `None`: a write whose outcome is unknown (an error or a lost connection).
    pub completed: Option<Duration>,
}

/// The reads that break a regular register (per key: a read returns the value of the last
/// write completed before it was invoked, or of a write concurrent with it). Each key has one
/// writer writing 1, 2, 3, … in turn, so write i was invoked after write i − 1 completed, and
/// a read of value v is allowed iff `lo ≤ v ≤ hi`: lo the largest value whose write completed
/// before the read was invoked (0 if none), hi the largest whose write was invoked before the
/// read completed.
pub fn regular_register_violations(writes: &[Event], reads: &[Event]) -> Vec<String> {
    let mut violations = Vec::new();
    for read in reads {
        let completed = read.completed.expect("reads are recorded once answered");
        let of_key = writes.iter().filter(|write| write.key == read.key);
        let lo = of_key
            .clone()
            .filter(|write| write.completed.is_some_and(|at| at < read.invoked))
            .map(|write| write.value)
            .max()
            .unwrap_or(0);
        let hi = of_key
            .filter(|write| write.invoked < completed)
            .map(|write| write.value)
            .max()
            .unwrap_or(0);
        if read.value < lo || read.value > hi {
            violations.push(format!(
                "key {} read {} in [{:?}, {:?}]: allowed {lo}..={hi}",
                read.key, read.value, read.invoked, completed
            ));
        }
    }
    violations
}
