//! The router-bypass mode's workload, history and checkers (`bypass.rs`):
//!
//! - `bypass_serializability`: strict serialisability of the whole mixed history — bypass
//!   (single-partition) and routed (multi-partition) transactions over one key space, with
//!   their real-time order — as linearisability of one object whose state is every key
//!   (`lincheck`; a transaction is one atomic step). First, every completed audit must sum to
//!   the bank's initial total, for a readable report of the commonest bug.
//! - `bypass_order` (`BypassOrder`): E-Cast's order at each partition, as the bypass needs it —
//!   a partition admits exactly the messages routed to it, each once, and a message only after
//!   every earlier message routed to it that shares a key there (per-key timestamp order, gap
//!   free); and a watermark a partition logs is true: every message at or below it was admitted
//!   by all its destinations.

use super::history::BALANCE_INITIAL;
use crate::checkers::Violation;
use ecast::{RouterState, Timestamp};
use lincheck::{Budget, CheckResult, Model, Operation};
use placement::ProcessId;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// A transaction over the simulator's keys (accounts 0..accounts, then registers): it reads
/// `reads` (the values before its own writes), then sets `writes` and adds `adds`. Keys of
/// the three lists are disjoint.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Txn {
    pub reads: Vec<u64>,
    pub writes: Vec<(u64, i64)>,
    pub adds: Vec<(u64, i64)>,
}

impl Txn {
    pub fn keys(&self) -> BTreeSet<u64> {
        let mut keys: BTreeSet<u64> = self.reads.iter().copied().collect();
        keys.extend(self.writes.iter().map(|(key, _)| *key));
        keys.extend(self.adds.iter().map(|(key, _)| *key));
        keys
    }

    pub fn writes_anything(&self) -> bool {
        !self.writes.is_empty() || !self.adds.is_empty()
    }

    /// The part of the transaction on the keys `holds` accepts.
    pub fn share(&self, holds: impl Fn(u64) -> bool) -> Txn {
        Txn {
            reads: self
                .reads
                .iter()
                .copied()
                .filter(|key| holds(*key))
                .collect(),
            writes: self
                .writes
                .iter()
                .copied()
                .filter(|(key, _)| holds(*key))
                .collect(),
            adds: self
                .adds
                .iter()
                .copied()
                .filter(|(key, _)| holds(*key))
                .collect(),
        }
    }

    /// Executes on `data` (missing keys hold `initial(key)`); returns the values read.
    pub fn execute(
        &self,
        data: &mut BTreeMap<u64, i64>,
        initial: impl Fn(u64) -> i64,
    ) -> Vec<(u64, i64)> {
        let values = self
            .reads
            .iter()
            .map(|key| {
                (
                    *key,
                    data.get(key).copied().unwrap_or_else(|| initial(*key)),
                )
            })
            .collect();
        for (key, value) in &self.writes {
            data.insert(*key, *value);
        }
        for (key, amount) in &self.adds {
            let value = data.get(key).copied().unwrap_or_else(|| initial(*key));
            data.insert(*key, value.wrapping_add(*amount));
        }
        values
    }
}

/// Initial value of a key: accounts start with the bank's balance, registers with 0.
pub fn initial_value(accounts: u64, key: u64) -> i64 {
    if key < accounts {
        BALANCE_INITIAL
    } else {
        0
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Get,
    Put,
    Txn,
    Transfer,
    /// Read one register and add 1 to it (INCR): a second execution shows in later reads.
    Incr,
    Audit,
    /// An audit at `Isolation::Snapshot` (`--snapshot-audits`): one
    /// `PartitionOperation::Snapshot` per partition group at the routers' `Query::Now`
    /// timestamp. Serialisable and one cut of the multi-partition order, but not strictly
    /// serialisable against concurrent single-partition writes to different groups
    /// (`docs/internals/ecast.md`, "Snapshot reads of partition groups"), so it is judged by
    /// the cut alone — every account read, summing to the bank's total (transfers across
    /// partitions are multi-partition messages: seen whole or not at all) — and left out of
    /// the strict-serialisability check (it writes nothing, so leaving it out is sound).
    SnapshotAudit,
}

#[derive(Clone, Debug)]
pub struct BypassInvocation {
    pub client: u64,
    pub call: u64,
    pub return_time: Option<u64>,
    pub kind: Kind,
    /// Whether it took the bypass (one partition).
    pub single: bool,
    pub txn: Txn,
    /// The values read, sorted by key.
    pub output: Option<Vec<(u64, i64)>>,
}

#[derive(Clone, Debug)]
pub struct BypassHistory {
    pub accounts: u64,
    pub registers: u64,
    pub invocations: Vec<BypassInvocation>,
}

impl BypassHistory {
    pub fn new(accounts: u64, registers: u64) -> BypassHistory {
        BypassHistory {
            accounts,
            registers,
            invocations: Vec::new(),
        }
    }

    pub fn invoke(&mut self, client: u64, call: u64, kind: Kind, single: bool, txn: Txn) -> usize {
        self.invocations.push(BypassInvocation {
            client,
            call,
            return_time: None,
            kind,
            single,
            txn,
            output: None,
        });
        self.invocations.len() - 1
    }

    pub fn complete(&mut self, index: usize, time: u64, mut output: Vec<(u64, i64)>) {
        let invocation = &mut self.invocations[index];
        assert!(invocation.return_time.is_none(), "completes once");
        output.sort();
        invocation.return_time = Some(time);
        invocation.output = Some(output);
    }

    pub fn completed(&self) -> usize {
        self.invocations
            .iter()
            .filter(|invocation| invocation.return_time.is_some())
            .count()
    }
}

/// Every key as one sequential object.
pub struct KeysModel {
    pub accounts: u64,
    pub registers: u64,
}

impl Model for KeysModel {
    type State = Vec<i64>;
    type Input = Txn;
    type Output = Vec<(u64, i64)>;

    fn init(&self) -> Vec<i64> {
        (0..self.accounts + self.registers)
            .map(|key| initial_value(self.accounts, key))
            .collect()
    }

    fn step(
        &self,
        state: &Vec<i64>,
        input: &Txn,
        output: Option<&Vec<(u64, i64)>>,
    ) -> Option<Vec<i64>> {
        if let Some(output) = output {
            let mut expected: Vec<(u64, i64)> = input
                .reads
                .iter()
                .map(|key| Some((*key, *state.get(*key as usize)?)))
                .collect::<Option<_>>()?;
            expected.sort();
            if expected != *output {
                return None;
            }
        }
        let mut next = state.clone();
        for (key, value) in &input.writes {
            *next.get_mut(*key as usize)? = *value;
        }
        for (key, amount) in &input.adds {
            let slot = next.get_mut(*key as usize)?;
            *slot = slot.wrapping_add(*amount);
        }
        Some(next)
    }

    fn is_read_only(&self, input: &Txn) -> bool {
        !input.writes_anything()
    }
}

const BUDGET_STEPS: u64 = 20_000_000;

/// Strict serialisability of the whole history (both paths, one object).
pub fn check_serializability(history: &BypassHistory) -> Result<(), Violation> {
    let total = BALANCE_INITIAL * history.accounts as i64;
    for (index, invocation) in history.invocations.iter().enumerate() {
        if !matches!(invocation.kind, Kind::Audit | Kind::SnapshotAudit) {
            continue;
        }
        if let Some(values) = &invocation.output {
            let sum: i128 = values.iter().map(|(_, value)| i128::from(*value)).sum();
            if sum != i128::from(total) || values.len() as u64 != history.accounts {
                return Err(Violation {
                    checker: "bypass_serializability",
                    report: format!(
                        "{} #{index} (client {}, call {}) saw {values:?}, total {sum}, not {total}",
                        match invocation.kind {
                            Kind::SnapshotAudit => "snapshot audit",
                            _ => "audit",
                        },
                        invocation.client,
                        invocation.call
                    ),
                });
            }
        }
    }
    let operations: Vec<Operation<Txn, Vec<(u64, i64)>>> = history
        .invocations
        .iter()
        .filter(|invocation| invocation.kind != Kind::SnapshotAudit)
        .filter(|invocation| invocation.output.is_some() || invocation.txn.writes_anything())
        .map(|invocation| Operation {
            client: invocation.client,
            call: invocation.call,
            return_time: invocation.return_time,
            input: invocation.txn.clone(),
            output: invocation.output.clone(),
        })
        .collect();
    let model = KeysModel {
        accounts: history.accounts,
        registers: history.registers,
    };
    match lincheck::check(&model, &operations, Budget::steps(BUDGET_STEPS)) {
        CheckResult::Ok => Ok(()),
        CheckResult::Illegal(violation) => Err(Violation {
            checker: "bypass_serializability",
            report: format!("the mixed history is not strictly serialisable:\n{violation}"),
        }),
        CheckResult::Unknown => Err(Violation {
            checker: "bypass_serializability",
            report: "the check ran out of budget".to_string(),
        }),
    }
}

/// E-Cast's order at each partition, and the truth of logged watermarks.
#[derive(Debug, Default)]
pub struct BypassOrder {
    /// Messages observed in the router state up to here.
    observed_up_to: Timestamp,
    /// Per message: its destinations with their share's keys.
    routed: BTreeMap<Timestamp, BTreeMap<ProcessId, BTreeSet<u64>>>,
    /// Per partition: the messages it admitted.
    admitted: BTreeMap<ProcessId, BTreeSet<Timestamp>>,
    /// Every message up to here was admitted by all its destinations.
    admitted_everywhere: Timestamp,
}

impl BypassOrder {
    /// Records newly sequenced messages (call after every router op); `shares` gives a
    /// message's destinations with the keys of their shares.
    pub fn observe_router(
        &mut self,
        state: &RouterState,
        shares: impl Fn(&ecast::Routed) -> BTreeMap<ProcessId, BTreeSet<u64>>,
    ) {
        for (timestamp, routed) in state.unstable().range(self.observed_up_to.next()..) {
            self.routed.insert(*timestamp, shares(routed));
        }
        self.observed_up_to = self.observed_up_to.max(state.timestamp_last());
    }

    pub fn on_admit(
        &mut self,
        partition: ProcessId,
        timestamp: Timestamp,
    ) -> Result<(), Violation> {
        let fail = |report: String| {
            Err(Violation {
                checker: "bypass_order",
                report,
            })
        };
        let Some(keys) = self
            .routed
            .get(&timestamp)
            .and_then(|destinations| destinations.get(&partition))
        else {
            return fail(format!(
                "{partition:?} admitted {timestamp}, which was not routed to it"
            ));
        };
        let admitted = self.admitted.entry(partition).or_default();
        for (earlier, destinations) in self.routed.range(..timestamp) {
            let Some(earlier_keys) = destinations.get(&partition) else {
                continue;
            };
            if !admitted.contains(earlier) && !earlier_keys.is_disjoint(keys) {
                return fail(format!(
                    "{partition:?} admitted {timestamp} before {earlier}, which was routed to it \
                     earlier and shares a key"
                ));
            }
        }
        if !admitted.insert(timestamp) {
            return fail(format!("{partition:?} admitted {timestamp} twice"));
        }
        while let Some(destinations) = self.routed.get(&self.admitted_everywhere.next()) {
            let everywhere = destinations.keys().all(|process| {
                self.admitted
                    .get(process)
                    .is_some_and(|admitted| admitted.contains(&self.admitted_everywhere.next()))
            });
            if !everywhere {
                break;
            }
            self.admitted_everywhere = self.admitted_everywhere.next();
        }
        Ok(())
    }

    /// A partition logs watermark `watermark`: every message up to it must be admitted by all
    /// its destinations.
    pub fn on_watermark(
        &self,
        partition: ProcessId,
        watermark: Timestamp,
    ) -> Result<(), Violation> {
        if watermark > self.admitted_everywhere {
            return Err(Violation {
                checker: "bypass_order",
                report: format!(
                    "{partition:?} logged watermark {watermark}, but only messages up to {} \
                     were admitted by all their destinations",
                    self.admitted_everywhere
                ),
            });
        }
        Ok(())
    }

    /// At the end: every message was admitted by every destination.
    pub fn at_end(&self) -> Result<(), Violation> {
        for (timestamp, destinations) in &self.routed {
            for partition in destinations.keys() {
                let admitted = self
                    .admitted
                    .get(partition)
                    .is_some_and(|admitted| admitted.contains(timestamp));
                if !admitted {
                    return Err(Violation {
                        checker: "bypass_order",
                        report: format!(
                            "{timestamp} was routed to {partition:?} but never admitted there"
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    pub fn routed(&self) -> usize {
        self.routed.len()
    }
}
