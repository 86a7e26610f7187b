//! E-Cast's order properties (Crescando/RB §5.4 and the appendix's uniform total order,
//! integrity and agreement), checked at every step from outside the processes:
//!
//! - **agreement**: every router that sequenced timestamp t sequenced the same message with the
//!   same destinations (observed from each router's unstable sequence after every step);
//! - **gap-free total order**: every destination delivers in increasing timestamp order, each
//!   message once, and the message it delivers at t is the one the routers sequenced at t, it
//!   is among t's destinations, and the previous message it delivered is exactly the one the
//!   routers routed to it before t (so it skipped nothing).
//!
//! A message is only forwarded after a router state holding it was observed (the forwarder
//! reads the state after the step that sequenced it), so every delivery can be matched.

use super::Violation;
use ecast::{Delivery, Envelope, RouterState, Timestamp};
use placement::ProcessId;
use std::collections::BTreeMap;
use stdx::Fnv64;

pub fn digest(envelope: &Envelope) -> u64 {
    Fnv64::digest(&postcard::to_allocvec(envelope).expect("envelopes serialise"))
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutedRecord {
    pub digest: u64,
    pub destinations: BTreeMap<ProcessId, Timestamp>,
    pub sender: ProcessId,
}

#[derive(Default)]
pub struct EcastOrder {
    /// Every sequenced message observed at some router.
    pub routed: BTreeMap<Timestamp, RoutedRecord>,
    /// Per router: the highest unstable timestamp already compared.
    checked_up_to: BTreeMap<usize, Timestamp>,
    /// Per destination: the last timestamp it delivered.
    pub delivered: BTreeMap<ProcessId, Timestamp>,
}

fn violation(report: String) -> Violation {
    Violation {
        checker: "ecast_order",
        report,
    }
}

impl EcastOrder {
    /// A router (re)started from nothing: compare its whole state again.
    pub fn restart(&mut self, router: usize) {
        self.checked_up_to.remove(&router);
    }

    pub fn observe_router(&mut self, router: usize, state: &RouterState) -> Result<(), Violation> {
        let from = self.checked_up_to.get(&router).copied().unwrap_or_default();
        for (timestamp, routed) in state.unstable().range(from.next()..) {
            let record = RoutedRecord {
                digest: digest(&routed.envelope),
                destinations: routed.destinations.clone(),
                sender: routed.envelope.sender,
            };
            match self.routed.get(timestamp) {
                None => {
                    self.routed.insert(*timestamp, record);
                }
                Some(known) if *known == record => {}
                Some(known) => {
                    return Err(violation(format!(
                        "router {router} sequenced {timestamp} as {record:?}, another router as {known:?}"
                    )))
                }
            }
            self.checked_up_to.insert(router, *timestamp);
        }
        Ok(())
    }

    pub fn on_delivery(
        &mut self,
        process: ProcessId,
        delivery: &Delivery,
    ) -> Result<(), Violation> {
        let last = self.delivered.get(&process).copied().unwrap_or_default();
        let timestamp = delivery.timestamp;
        if timestamp <= last {
            return Err(violation(format!(
                "process {} delivered {timestamp} after {last}",
                process.0
            )));
        }
        let Some(record) = self.routed.get(&timestamp) else {
            return Err(violation(format!(
                "process {} delivered {timestamp}, which no router was seen to sequence",
                process.0
            )));
        };
        if record.digest != digest(&delivery.envelope) {
            return Err(violation(format!(
                "process {} delivered another message at {timestamp} than the routers sequenced",
                process.0
            )));
        }
        let Some(previous) = record.destinations.get(&process) else {
            return Err(violation(format!(
                "process {} delivered {timestamp}, which was not routed to it",
                process.0
            )));
        };
        if *previous != last {
            return Err(violation(format!(
                "process {} delivered {timestamp} right after {last}, but {previous} was routed to it in between: a gap",
                process.0
            )));
        }
        self.delivered.insert(process, timestamp);
        Ok(())
    }
}
