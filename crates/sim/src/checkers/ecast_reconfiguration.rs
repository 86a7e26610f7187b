//! Rubberband reconfiguration (Crescando/RB §6.4–6.5, §7.6–7.7): partial live migration loses
//! no acknowledged write while fewer than f processes of any group fail, and never blocks
//! operations on ranges it does not move.
//!
//! - At the end: every key has at least one live replica in the final configuration; every
//!   account is present at every live replica (a copy that lost it, or a delete that ran too
//!   early, leaves it missing); every register with an acknowledged put is present at every
//!   live replica; every live storage process holds exactly its ranges of the final
//!   configuration. (That replicas agree is `ecast_stability`'s; that values are right is
//!   `ecast_serializability`'s.) The nemesis keeps the precondition: it skips any crash that,
//!   flooded through the copies in flight (§6.5), could fail f processes on the ring.
//! - During the faults: a client operation none of whose keys was in a range being copied
//!   while it ran completes within `UNRELATED_LATENCY_MAX_TICKS` (reconfiguration never
//!   blocks unrelated ranges). The bound is coarse: router fail-overs, lost messages and read
//!   retries delay unrelated operations too (seeds 1..2000 without the reconfiguration
//!   nemesis reach 4,554 ticks), so it catches an operation stuck behind a migration for
//!   good, not a slow one. The precise rule (a receiver holds only what touches an incoming
//!   range, or an item held before it) is a unit test of `placement::migration`.

use super::Violation;
use placement::ProcessId;
use std::collections::{BTreeMap, BTreeSet};

/// Longest an operation on an unrelated range may take, in ticks, while faults run.
pub const UNRELATED_LATENCY_MAX_TICKS: u64 = 6_000;

fn violation(report: String) -> Violation {
    Violation {
        checker: "ecast_reconfiguration",
        report,
    }
}

/// `values`: per key, each live replica in the final configuration and its value.
pub fn check_end(
    values: &BTreeMap<u64, Vec<(ProcessId, Option<i64>)>>,
    accounts: u64,
    acknowledged_puts: &BTreeSet<u64>,
    holdings_match: bool,
) -> Result<(), Violation> {
    if !holdings_match {
        return Err(violation(
            "a live storage process does not hold exactly its ranges of the final configuration"
                .to_string(),
        ));
    }
    for (key, holders) in values {
        if holders.is_empty() {
            return Err(violation(format!("key {key} has no live replica")));
        }
        let must_exist = *key < accounts || acknowledged_puts.contains(key);
        if let Some((process, _)) = holders.iter().find(|(_, value)| value.is_none()) {
            if must_exist {
                return Err(violation(format!(
                    "key {key} is missing at live replica {} (acknowledged data lost): {holders:?}",
                    process.0
                )));
            }
        }
    }
    Ok(())
}

/// The latency rule for operations on ranges no migration touched.
#[derive(Clone, Debug, Default)]
pub struct UnrelatedLatency {
    failure: Option<Violation>,
}

impl UnrelatedLatency {
    pub fn on_complete(
        &mut self,
        latency_ticks: u64,
        related: bool,
        faults_on: bool,
        describe: impl FnOnce() -> String,
    ) {
        if !related && faults_on && latency_ticks > UNRELATED_LATENCY_MAX_TICKS {
            self.failure.get_or_insert_with(|| {
                violation(format!(
                    "{} on ranges no migration touched took {latency_ticks} ticks (bound {})",
                    describe(),
                    UNRELATED_LATENCY_MAX_TICKS
                ))
            });
        }
    }

    pub fn result(&self) -> Result<(), Violation> {
        match &self.failure {
            Some(failure) => Err(failure.clone()),
            None => Ok(()),
        }
    }
}
