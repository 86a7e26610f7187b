//! E-Cast's stability and durability (Crescando/RB §5.4–5.5, the appendix's uniform
//! agreement), checked from outside the processes:
//!
//! - **stable means delivered**: when a router drops a message from its unstable sequence, every
//!   destination has delivered it, unless that router's configuration suspects the destination
//!   (checked after every router step);
//! - **nothing acknowledged is lost across router fail-overs**: every outcome `Sequenced { t }`
//!   a gateway received names the message the routers sequenced at t, and at the end of the run
//!   every message ever sequenced is stable at every router and delivered by every destination
//!   that is still alive;
//! - **write-all convergence**: at the end, all live replicas of a key hold the same value.

use super::ecast_order::EcastOrder;
use super::Violation;
use ecast::{RouterState, Timestamp};
use placement::ProcessId;
use std::collections::{BTreeMap, BTreeSet};

fn violation(report: String) -> Violation {
    Violation {
        checker: "ecast_stability",
        report,
    }
}

#[derive(Default)]
pub struct EcastStability {
    /// Observed timestamps not yet seen stable (and checked).
    watching: BTreeSet<Timestamp>,
    /// Every observed timestamp up to here is or was in `watching`.
    watched_up_to: Timestamp,
    /// (sender, sequence) → (timestamp, digest) as gateways were told.
    pub acknowledged: BTreeMap<(ProcessId, u64), (Timestamp, u64)>,
}

impl EcastStability {
    /// After a router step: every observed message this router no longer holds as unstable must
    /// be delivered by each destination its configuration does not suspect.
    pub fn observe_router(
        &mut self,
        state: &RouterState,
        order: &EcastOrder,
    ) -> Result<(), Violation> {
        let newest = self.watched_up_to;
        self.watching.extend(
            order
                .routed
                .range(newest.next()..)
                .map(|(timestamp, _)| *timestamp),
        );
        if let Some((last, _)) = order.routed.last_key_value() {
            self.watched_up_to = self.watched_up_to.max(*last);
        }
        if !state.routes() {
            // A follower router keeps no unstable sequence (it does not route): only the
            // primary's says what is stable.
            return Ok(());
        }
        let last = state.timestamp_last();
        let configuration = state.configuration();
        let candidates: Vec<Timestamp> = self
            .watching
            .range(..=last)
            .filter(|timestamp| !state.unstable().contains_key(timestamp))
            .copied()
            .collect();
        for timestamp in candidates {
            let record = &order.routed[&timestamp];
            for process in record.destinations.keys() {
                let delivered = order.delivered.get(process).copied().unwrap_or_default();
                if delivered < timestamp && configuration.is_live(*process) {
                    return Err(violation(format!(
                        "{timestamp} is stable but its live destination {} delivered only up to {delivered}",
                        process.0
                    )));
                }
            }
            self.watching.remove(&timestamp);
        }
        Ok(())
    }

    /// A gateway was told its message is sequenced at `timestamp`.
    pub fn on_acknowledged(
        &mut self,
        sender: ProcessId,
        sequence: u64,
        timestamp: Timestamp,
        digest: u64,
        order: &EcastOrder,
    ) -> Result<(), Violation> {
        if let Some(known) = self
            .acknowledged
            .insert((sender, sequence), (timestamp, digest))
        {
            if known != (timestamp, digest) {
                return Err(violation(format!(
                    "sender {} message {sequence} was acknowledged as {:?} and as {:?}",
                    sender.0,
                    known,
                    (timestamp, digest)
                )));
            }
        }
        match order.routed.get(&timestamp) {
            Some(record) if record.digest != digest => Err(violation(format!(
                "sender {} message {sequence} acknowledged at {timestamp}, where the routers hold another message",
                sender.0
            ))),
            _ => Ok(()),
        }
    }

    /// End of the run, everything quiet: nothing acknowledged or sequenced is lost.
    pub fn check_end(
        &self,
        routers: &[&RouterState],
        order: &EcastOrder,
        live_storage: &BTreeSet<ProcessId>,
    ) -> Result<(), Violation> {
        for ((sender, sequence), (timestamp, digest)) in &self.acknowledged {
            if let Some(record) = order.routed.get(timestamp) {
                if record.digest != *digest {
                    return Err(violation(format!(
                        "sender {} message {sequence} at {timestamp} was replaced",
                        sender.0
                    )));
                }
            }
            for state in routers {
                if state.timestamp_last() < *timestamp {
                    return Err(violation(format!(
                        "a router ends at {} but sender {} message {sequence} was acknowledged at {timestamp}: lost",
                        state.timestamp_last(),
                        sender.0
                    )));
                }
            }
        }
        for state in routers {
            if state.settled() < state.timestamp_last() && !state.routes() {
                return Err(violation(format!(
                    "a follower router ends settled only up to {} of {}",
                    state.settled(),
                    state.timestamp_last()
                )));
            }
            if let Some(timestamp) = state.unstable().keys().next() {
                return Err(violation(format!(
                    "{timestamp} is still unstable at the end"
                )));
            }
        }
        for (timestamp, record) in &order.routed {
            for process in record.destinations.keys() {
                let delivered = order.delivered.get(process).copied().unwrap_or_default();
                if live_storage.contains(process) && delivered < *timestamp {
                    return Err(violation(format!(
                        "live process {} never delivered {timestamp}",
                        process.0
                    )));
                }
            }
        }
        Ok(())
    }

    /// End of the run: every live holder of a key holds the same value.
    pub fn check_replicas_agree(
        values: &BTreeMap<u64, Vec<(ProcessId, Option<i64>)>>,
    ) -> Result<(), Violation> {
        for (key, holders) in values {
            if holders.windows(2).any(|pair| pair[0].1 != pair[1].1) {
                return Err(violation(format!(
                    "replicas of key {key} differ: {holders:?}"
                )));
            }
        }
        Ok(())
    }
}
