//! Checkers sit outside the replicas: they observe replicas after every step and the client
//! history at the end, one file per property.

pub mod commit_monotonic;
pub mod committed_prefix;
pub mod ecast_basic_reads;
pub mod ecast_order;
pub mod ecast_reconfiguration;
pub mod ecast_serializability;
pub mod ecast_stability;
pub mod linearizability;
pub mod liveness;
pub mod one_primary_per_view;
pub mod strict_serializability;

/// A property that did not hold, with the checker's explanation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub checker: &'static str,
    pub report: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "violation of {}: {}", self.checker, self.report)
    }
}
