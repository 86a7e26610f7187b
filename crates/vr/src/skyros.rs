//! Skyros (Ganesan et al., SOSP '21) as an extension of VR: `Replica<S, Skyros>`.
//!
//! VR orders and executes every request; Skyros adds the durability log (nilext and
//! commutative writes held, acknowledged and completed before they are ordered, §4.2–4.3),
//! the read check (§4.4), the durability log's recovery at a view change (§4.6) and its
//! transfer in NewState and RecoveryResponse. `docs/internals/skyros.md` is the manual; the
//! hooks are `crate::Extension`'s.

use crate::client_table::ClientTable;
use crate::config::{Canary, Protocol};
use crate::durability_log::{self, DurabilityLog};
use crate::extension::{Context, Extension, ViewChangeVote};
use crate::replica::{Effect, ReplicaStats};
use crate::state_machine::{NilextGate, StateMachine};
use std::collections::{BTreeSet, VecDeque};
use wire::{
    Checkpoint, ClientId, DurabilityLogState, DurableRequest, Message, Request, RequestKind,
    RequestNumber, View,
};

/// The Skyros extension's state on one replica.
#[derive(Debug, Default)]
pub struct Skyros {
    /// Nilext (and commutative) requests held but not executed, in arrival order.
    durability_log: DurabilityLog,
    /// Disk durability: acknowledgements waiting for their record's sequence.
    acks_pending: VecDeque<(u64, Effect)>,
    /// The digest of every nilext or commutative request executed so far
    /// (`Checkpoint::executed_digest`).
    executed_digest: u64,
    /// Only at the primary of the current view (in normal status).
    primary: Option<SkyrosPrimary>,
    stats: SkyrosStats,
}

/// Skyros state only the primary of the current view has.
#[derive(Debug, Default)]
struct SkyrosPrimary {
    /// Nilext requests whose client asked again on the slow path; they get a Reply when they
    /// execute.
    slow_waiters: BTreeSet<(ClientId, RequestNumber)>,
    /// The keys of queued or prepared non-nilext writes not yet executed (only the key index
    /// is used; see `on_read`).
    ordered_writes: DurabilityLog,
    /// Nilext requests the state machine's gate refused (`NilextGate`): never acknowledged
    /// before they execute, retries included.
    nilext_refused: BTreeSet<(ClientId, RequestNumber)>,
    /// With a gate (`NilextGate::Clear`): the keys of the refused requests above, not yet
    /// executed (only the key index is used).
    refused_writes: DurabilityLog,
    /// With a gate: the unexecuted durability-log entries this primary appended in this view
    /// after asking the gate (acknowledged or refused). When every entry of the durability
    /// log is one of them, G2 need not count the acknowledged ones: each runs at once when
    /// logged (`docs/internals/ecast.md`, "Skyros partitions").
    gated: BTreeSet<(ClientId, RequestNumber)>,
}

#[derive(Clone, Copy, Debug, Default)]
struct SkyrosStats {
    reads_immediate: u64,
    reads_ordered: u64,
    nilext_refused: u64,
    nilext_ignored_lagging: u64,
    nilext_executed_gated: u64,
    nilext_ignored_full: u64,
}

impl Skyros {
    /// The nilext requests this replica holds but has not executed.
    pub fn durability_log(&self) -> &DurabilityLog {
        &self.durability_log
    }

    fn primary(&self) -> &SkyrosPrimary {
        self.primary.as_ref().expect("at the primary")
    }

    /// Takes the primary's durability log as ours (state transfer, recovery).
    fn adopt_durability_log<S: StateMachine>(
        &mut self,
        cx: &mut Context<'_, S>,
        durability: &DurabilityLogState,
    ) {
        let state_machine = cx.state_machine();
        let mut log =
            DurabilityLog::from_state(durability, |request| state_machine.keys(&request.operation));
        for entry in &durability.entries {
            let (client, request) = (entry.request.client, entry.request.request);
            if cx.client_table().executed(client, request) {
                log.remove_executed(client, request);
            }
        }
        self.durability_log = log;
        if cx.durable() {
            let entries: Vec<_> = self.durability_log.iter().cloned().collect();
            for entry in entries {
                cx.persist(cx.view(), entry);
            }
        }
    }
}

fn nilext_ack<S>(
    cx: &Context<'_, S>,
    client: ClientId,
    request: RequestNumber,
    prefix_digest: u64,
    executed: bool,
    result: Option<Vec<u8>>,
) -> Effect {
    Effect::Reply {
        client,
        message: Message::NilextAck {
            view: cx.view(),
            replica: cx.index(),
            client,
            request,
            prefix_digest,
            executed,
            result,
        },
    }
}

impl<S: StateMachine> Extension<S> for Skyros {
    const PROTOCOL: Protocol = Protocol::Skyros;

    fn on_role(&mut self, primary: bool) {
        self.primary = primary.then(SkyrosPrimary::default);
    }

    /// Any replica of the view: hold the request in the durability log and acknowledge it
    /// (§4.2). A commutative write (Skyros-Comm) is held the same way; the primary also
    /// previews its result when it commutes with every pending update, else it will reply
    /// after ordering it. The primary then orders it (returns it).
    fn on_unordered_request(
        &mut self,
        cx: &mut Context<'_, S>,
        request: Request,
    ) -> Option<Request> {
        if cx.log_view() != cx.view() {
            self.stats.nilext_ignored_lagging += 1;
            return None; // Our log is not yet this view's: the client retries.
        }
        let commutative = request.kind == RequestKind::Commutative;
        let (client, number) = (request.client, request.request);
        if let Some((latest, result)) = cx.client_table().get(client) {
            if number < latest {
                return None; // Stale: the client has moved on.
            }
            if number == latest {
                let gated = cx.state_machine().nilext_gate(&request.operation) != NilextGate::Open;
                // A gated machine's recorded result may be "held, answered later": the
                // acknowledgement carries it, and only a client that knows the machine may
                // read it as the request's reply (`NilextQuorum` never completes on it). Left
                // unanswered, the client waited a retry interval and then took the slow path
                // (a backup executes before the client's own copy arrives under load).
                if gated {
                    self.stats.nilext_executed_gated += 1;
                }
                let result = (commutative || gated).then(|| result.to_vec());
                let ack = nilext_ack(cx, client, number, 0, true, result);
                cx.push(ack);
                return None;
            }
        }
        if let Some(entry) = self.durability_log.get(client, number) {
            if self
                .primary
                .as_ref()
                .is_some_and(|primary| primary.nilext_refused.contains(&(client, number)))
            {
                return None; // Refused by the gate: the reply comes when it executes.
            }
            let prefix_digest = entry.prefix_digest;
            let persisting = self.acks_pending.iter().any(|(_, effect)| {
                matches!(effect, Effect::Reply { message: Message::NilextAck { client: c, request: r, .. }, .. } if *c == client && *r == number)
            });
            if let (true, Some(primary)) = (commutative, self.primary.as_mut()) {
                // A retry: the reply comes when it executes.
                primary.slow_waiters.insert((client, number));
            }
            if !persisting {
                let ack = nilext_ack(cx, client, number, prefix_digest, false, None);
                cx.push(ack);
            }
            return None;
        }
        if cx.in_flight(client, number) {
            return None; // Already ordered on the slow path: its reply will come.
        }
        if self.durability_log.len() >= cx.config().request_queue_max {
            self.stats.nilext_ignored_full += 1;
            return None; // Overloaded: the client retries.
        }
        let keys = cx.state_machine().keys(&request.operation);
        let mut result = None;
        let inherited_pending = cx
            .view_start_op()
            .is_some_and(|view_start_op| cx.commit_min() < view_start_op);
        // Every unexecuted update ordered before this one is in the durability log or among
        // the ordered writes (once the view's inherited entries executed).
        let pending_conflict = |skyros: &Skyros, primary: &SkyrosPrimary| {
            inherited_pending
                || skyros.durability_log.conflicts(keys.as_deref())
                || primary.ordered_writes.conflicts(keys.as_deref())
        };
        // G2 of the gate: as above, except that a pending nilext write the gate acknowledged
        // does not count when every durability-log entry went through this primary's gate:
        // such a write runs at once when it is logged (G1 held when it was acknowledged, and
        // whatever could hold it since arrived after it, so is ordered after it), so a later
        // write of its key runs at once after it (rule O). Refused writes, ordered writes and
        // deliveries, and the view's inherited entries still count.
        let gate_conflict = |skyros: &Skyros, primary: &SkyrosPrimary| {
            if skyros.durability_log.len() != primary.gated.len() {
                return pending_conflict(skyros, primary);
            }
            debug_assert!(primary
                .gated
                .iter()
                .all(|(client, number)| skyros.durability_log.get(*client, *number).is_some()));
            inherited_pending
                || primary.refused_writes.conflicts(keys.as_deref())
                || primary.ordered_writes.conflicts(keys.as_deref())
        };
        // The gate (`NilextGate`): in a plain Skyros group always open. Evaluated at the
        // primary only: a client completes only with the primary's acknowledgement.
        let mut refused = false;
        if let Some(primary) = &self.primary {
            refused = match cx.state_machine().nilext_gate(&request.operation) {
                NilextGate::Open => false,
                NilextGate::Clear => gate_conflict(self, primary),
                NilextGate::Closed => true,
            };
            if refused && cx.config().canary == Some(Canary::NilextGateIgnored) {
                refused = false;
            }
        }
        if let (true, false, Some(primary)) = (commutative, refused, &self.primary) {
            // Skyros-Comm: if no pending update touches its keys, executing it now gives the
            // same result as at its position in the order.
            let unchecked = cx.config().canary == Some(Canary::CommPreviewUnchecked);
            if unchecked || !pending_conflict(self, primary) {
                result = cx.state_machine().preview(&request.operation);
            }
        }
        if let (true, None, Some(primary)) = (commutative, &result, self.primary.as_mut()) {
            primary.slow_waiters.insert((client, number));
        }
        if let (true, Some(primary)) = (refused, self.primary.as_mut()) {
            // Not acknowledged: ordered like the others, answered with a Reply on execution.
            primary.slow_waiters.insert((client, number));
            primary.nilext_refused.insert((client, number));
            primary
                .refused_writes
                .append(request.clone(), keys.clone(), 0);
            self.stats.nilext_refused += 1;
        }
        if let Some(primary) = self.primary.as_mut() {
            if primary.gated.len() == self.durability_log.len() {
                // Still every entry through the gate (the new one joins below).
                primary.gated.insert((client, number));
            }
        }
        let prefix_digest = self
            .durability_log
            .append(request.clone(), keys, self.executed_digest);
        if cx.durable() {
            let entry = self
                .durability_log
                .get(client, number)
                .expect("just appended")
                .clone();
            let sequence = cx.persist(cx.view(), entry);
            if !refused {
                let ack = nilext_ack(cx, client, number, prefix_digest, false, result);
                self.acks_pending.push_back((sequence, ack));
            }
        } else if !refused {
            let ack = nilext_ack(cx, client, number, prefix_digest, false, result);
            cx.push(ack);
        }
        // The primary orders its durability log in arrival order (§4.3): the batch is that
        // order, and non-nilext writes queue behind every earlier nilext one (§4.5).
        self.primary.is_some().then_some(request)
    }

    /// Slow path for a nilext request the primary already holds: it is queued or prepared;
    /// reply when it executes.
    fn holds_write(&mut self, request: &Request) -> bool {
        if self
            .durability_log
            .get(request.client, request.request)
            .is_none()
        {
            return false;
        }
        let primary = self.primary.as_mut().expect("at the primary");
        primary
            .slow_waiters
            .insert((request.client, request.request));
        true
    }

    fn on_write_queued(&mut self, state_machine: &S, request: &Request) {
        let keys = state_machine.keys(&request.operation);
        let primary = self.primary.as_mut().expect("at the primary");
        primary.ordered_writes.append(request.clone(), keys, 0);
    }

    /// No write to the read's keys is pending in the durability log (a nilext write completes
    /// before it executes) nor, while that log is not empty, ordered and unexecuted: a pending
    /// non-nilext write ordered before a pending nilext one may have to be seen too (the
    /// nilext one may have completed, and a multi-key write can make that order observable;
    /// deviation 3).
    fn read_conflicts(&self, state_machine: &S, operation: &[u8]) -> bool {
        let keys = state_machine.keys(operation);
        self.durability_log.conflicts(keys.as_deref())
            || (!self.durability_log.is_empty()
                && self.primary().ordered_writes.conflicts(keys.as_deref()))
    }

    /// §4.4: a read that touches unfinalised updates waits for every pending one.
    fn on_read(&mut self, state_machine: &S, operation: &[u8]) -> bool {
        let conflicts = <Skyros as Extension<S>>::read_conflicts(self, state_machine, operation);
        if conflicts {
            self.stats.reads_ordered += 1;
        } else {
            self.stats.reads_immediate += 1;
        }
        conflicts
    }

    fn on_executing(&mut self, request: &Request) {
        let (client, number) = (request.client, request.request);
        self.durability_log.remove_executed(client, number);
        if let Some(primary) = &mut self.primary {
            primary.ordered_writes.remove_executed(client, number);
            primary.nilext_refused.remove(&(client, number));
            primary.refused_writes.remove_executed(client, number);
            primary.gated.remove(&(client, number));
        }
    }

    fn on_executed(&mut self, request: &Request, at_primary: bool) -> bool {
        let unordered = matches!(request.kind, RequestKind::Nilext | RequestKind::Commutative);
        // Only requests that travel through durability logs (nilext, commutative) count: an
        // ordered write executes at the primary a commit message before the backups, and
        // counting it made every nilext request that arrived in between mismatch (the slow
        // path). Recovery orders only uncommitted durability-log requests, so leaving committed
        // ordered writes out of the set loses nothing (`docs/internals/skyros.md`, deviation 1).
        if unordered {
            self.executed_digest =
                self.executed_digest
                    .wrapping_add(durability_log::request_digest(
                        request.client,
                        request.request,
                    ));
        }
        assert_eq!(at_primary, self.primary.is_some(), "the roles agree");
        unordered
            && self.primary.as_mut().is_some_and(|primary| {
                primary
                    .slow_waiters
                    .remove(&(request.client, request.request))
            })
    }

    fn executed_digest(&self) -> u64 {
        self.executed_digest
    }

    fn on_checkpoint_installed(&mut self, checkpoint: &Checkpoint) {
        self.executed_digest = checkpoint.executed_digest;
    }

    fn on_open(
        &mut self,
        state_machine: &S,
        client_table: &ClientTable,
        executed_digest: u64,
        records: Vec<DurableRequest>,
    ) {
        self.executed_digest = executed_digest;
        for entry in records {
            let keys = state_machine.keys(&entry.request.operation);
            self.durability_log.restore_entry(entry.clone(), keys);
            let (client, request) = (entry.request.client, entry.request.request);
            if client_table.executed(client, request) {
                self.durability_log.remove_executed(client, request);
            }
        }
    }

    /// What the old view's durability log held that completed is in this view's log now
    /// (§4.6); the rest never completed.
    fn on_log_view_changed(&mut self) {
        self.durability_log.clear();
    }

    fn view_change_payload(&self) -> Vec<Request> {
        self.durability_log.requests()
    }

    /// §4.6: the new primary recovers the durability logs of at most f + 1 participants from
    /// the latest normal view, its own first (never more: the recovery's thresholds are
    /// majorities of f + 1), and returns them in a real-time-safe order, for VR to append to
    /// its log as entries of the new view so that StartView carries them.
    fn on_view_start(
        &mut self,
        cx: &mut Context<'_, S>,
        votes: &[ViewChangeVote<'_>],
        chosen_log_view: View,
    ) -> Vec<Request> {
        let majority = cx.config().majority();
        let own = cx.index();
        let logs: Vec<Vec<Request>> = votes
            .iter()
            .filter(|vote| vote.replica == own)
            .chain(votes.iter().filter(|vote| vote.replica != own))
            .filter(|vote| vote.log_view == chosen_log_view)
            .take(majority)
            .map(|vote| vote.payload.to_vec())
            .collect();
        let tolerated = cx.config().replicas_tolerated() as usize;
        let mut threshold = durability_log::recovery_threshold(tolerated);
        if cx.config().canary == Some(Canary::RecoveryThresholdTooHigh) {
            threshold += 1;
        }
        let mut logged: BTreeSet<(ClientId, RequestNumber)> = BTreeSet::new();
        for entry in cx.journal().iter() {
            if entry.op > cx.commit_min() {
                for request in &entry.requests {
                    logged.insert((request.client, request.request));
                }
            }
        }
        let client_table = cx.client_table();
        let recovered = durability_log::recover(&logs, threshold, |request| {
            client_table.executed(request.client, request.request)
                || logged.contains(&(request.client, request.request))
        });
        self.durability_log.clear();
        recovered
    }

    fn new_state_payload(&self, primary: bool) -> Option<DurabilityLogState> {
        primary.then(|| self.durability_log.to_state())
    }

    /// Adopt the primary's durability log (its order is the real-time one) and running digest,
    /// so that our acknowledgements match the primary's again.
    fn on_new_state(&mut self, cx: &mut Context<'_, S>, payload: &DurabilityLogState) {
        self.adopt_durability_log(cx, payload);
    }

    fn recovery_payload(&self) -> DurabilityLogState {
        self.durability_log.to_state()
    }

    fn on_recovered(&mut self, cx: &mut Context<'_, S>, payload: &DurabilityLogState) {
        self.adopt_durability_log(cx, payload);
    }

    fn on_persisted(&mut self, sequence: u64, effects: &mut Vec<Effect>) {
        while self
            .acks_pending
            .front()
            .is_some_and(|(pending, _)| *pending <= sequence)
        {
            let (_, ack) = self.acks_pending.pop_front().expect("front exists");
            effects.push(ack);
        }
    }

    fn stats(&self, stats: &mut ReplicaStats) {
        let own = self.stats;
        stats.skyros_reads_immediate = own.reads_immediate;
        stats.skyros_reads_ordered = own.reads_ordered;
        stats.skyros_nilext_refused = own.nilext_refused;
        stats.skyros_nilext_ignored_lagging = own.nilext_ignored_lagging;
        stats.skyros_nilext_executed_gated = own.nilext_executed_gated;
        stats.skyros_nilext_ignored_full = own.nilext_ignored_full;
    }

    fn invariants(&self, primary: bool) {
        assert_eq!(
            self.primary.is_some(),
            primary,
            "Skyros's primary state exists exactly at the primary"
        );
        if let Some(primary) = &self.primary {
            assert!(
                primary.gated.len() <= self.durability_log.len(),
                "gated entries are durability-log entries"
            );
            assert!(
                primary.nilext_refused.iter().all(|(client, number)| primary
                    .slow_waiters
                    .contains(&(*client, *number))
                    || self.durability_log.get(*client, *number).is_none()),
                "a refused request that is still held is answered when it executes"
            );
        }
        assert!(
            self.acks_pending
                .iter()
                .zip(self.acks_pending.iter().skip(1))
                .all(|((a, _), (b, _))| a < b),
            "acknowledgements wait in persist order"
        );
    }
}
