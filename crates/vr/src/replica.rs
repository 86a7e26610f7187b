//! The VR replica: one state machine per group member, driven by `step`.
//!
//! Handlers are named `on_<message>`; transitions `become_<status>`; `maybe_<action>` acts only
//! when its preconditions hold. Section numbers refer to VR Revisited (Liskov & Cowling, 2012).

use crate::client_table::ClientTable;
use crate::config::{Canary, Config, Durability};
use crate::durable::{DurableState, Record};
use crate::extension::{Context, Extension, NoExtension, Persister, PrimaryView, ViewChangeVote};
use crate::journal::Journal;
use crate::parts::{self, Assembler, Received};
use crate::quorum::majority_value;
use crate::skyros::Skyros;
use crate::state_machine::{RestoreError, SnapshotSource, StateMachine};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use stdx::Timeout;
use wire::RecoveryState;
use wire::{
    Checkpoint, ClientId, Entry, Message, Nonce, Op, ReplicaIndex, Reply, Request, RequestKind,
    RequestNumber, View,
};

/// A hook's [`Context`], built from disjoint borrows of the replica's fields (a `&mut self`
/// would alias the extension's own field, which the hook borrows mutably).
macro_rules! context {
    ($replica:ident, $effects:expr) => {
        Context {
            config: &$replica.config,
            index: $replica.index,
            view: $replica.view,
            log_view: $replica.log_view,
            commit_min: $replica.commit_min,
            journal: &$replica.journal,
            state_machine: &$replica.state_machine,
            client_table: &$replica.client_table,
            primary: $replica.primary.as_ref().map(|primary| PrimaryView {
                in_flight: &primary.in_flight,
                view_start_op: primary.view_start_op,
            }),
            persister: Persister {
                durable: $replica.config.durability == Durability::Disk,
                sequence_next: &mut $replica.persist_sequence_next,
                pending: &mut $replica.persist_pending,
                view_persisted: $replica.view_persisted,
            },
            effects: $effects,
        }
    };
}

/// What a replica reacts to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// One unit of logical time passed.
    Tick,
    /// A message arrived, from a peer or a client.
    Message(Message),
    /// Every record up to and including the one with this sequence number is durable.
    Persisted { sequence: u64 },
    /// The checkpoint an `Effect::Checkpoint` asked for, its `state` now serialised.
    Checkpointed(Checkpoint),
}

/// What a replica asks its driver to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Send a protocol message to a peer. May be executed in any order, or lost.
    Send { to: ReplicaIndex, message: Message },
    /// Send a message (`Reply` or `NotPrimary`) to a client.
    Reply { client: ClientId, message: Message },
    /// Persist a record (disk durability only). Records are written in sequence order; the
    /// driver reports completion with `Input::Persisted`.
    Persist { sequence: u64, record: Record },
    /// Take a checkpoint: serialise `source` into `checkpoint.state` (empty here), off the
    /// loop that steps the replica, and report it with `Input::Checkpointed`. Until then the
    /// replica treats its previous checkpoint as its latest; a checkpoint that never comes
    /// back (a crash) costs only the journal it would have compacted. One is in flight at a
    /// time.
    Checkpoint {
        checkpoint: Checkpoint,
        source: SnapshotSource,
    },
}

/// Counters for observers (INFO, benchmarks). The `skyros_*` ones are kept by the Skyros
/// extension and filled in by `Replica::stats` (zero in VR).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplicaStats {
    /// Skyros, at the primary: reads served without ordering anything first.
    pub skyros_reads_immediate: u64,
    /// Skyros, at the primary: reads that touched unfinalised updates and waited for them.
    pub skyros_reads_ordered: u64,
    /// Skyros, at the primary: nilext writes not acknowledged before ordering because the
    /// state machine's gate (`StateMachine::nilext_gate`) refused them.
    pub skyros_nilext_refused: u64,
    /// Skyros: nilext requests ignored because this replica's log is not its view's yet.
    pub skyros_nilext_ignored_lagging: u64,
    /// Skyros: nilext requests that had already executed here, at a gated state machine
    /// (acknowledged with the recorded result, which the client reads as a reply).
    pub skyros_nilext_executed_gated: u64,
    /// Skyros: nilext requests ignored because the durability log was full.
    pub skyros_nilext_ignored_full: u64,
    /// Requests ignored because the primary's batch was full.
    pub requests_ignored_full: u64,
    /// Messages over `Config::message_bytes_max` sent in parts, and the parts sent.
    pub messages_split: u64,
    pub parts_sent: u64,
    /// Messages reassembled from parts and stepped.
    pub messages_reassembled: u64,
    /// Messages over `Config::message_bytes_max` that arrived whole: refused.
    pub messages_refused_oversized: u64,
    /// Parts refused: malformed, contradicting their message's other parts, over
    /// `Config::message_parts_bytes_max`, or reassembling to something that is not one message
    /// from their sender.
    pub parts_refused: u64,
}

/// The replica's status, for observers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StatusName {
    Normal,
    ViewChange,
    Recovering,
}

#[derive(Debug)]
enum Status {
    Normal,
    ViewChange(ViewChangeState),
    Recovering(RecoveringState),
}

/// A DoViewChange as the new primary keeps it.
#[derive(Clone, Debug)]
struct DoViewChange {
    log_view: View,
    op: Op,
    commit: Op,
    checkpoint_op: Op,
    log: Vec<Entry>,
    /// What the sender's extension gave it to carry (`Extension::view_change_payload`; the
    /// wire field is Skyros's `durability_log`).
    payload: Vec<Request>,
}

/// A NewState message's fields, as `on_new_state` takes them.
struct NewState {
    view: View,
    commit: Op,
    checkpoint: Option<Checkpoint>,
    log: Vec<Entry>,
    replica: ReplicaIndex,
    durability: Option<wire::DurabilityLogState>,
}

#[derive(Debug, Default)]
struct ViewChangeState {
    /// Replicas (other than this one) whose StartViewChange for this view arrived; a bitset.
    start_view_change_from: u64,
    do_view_change_sent: bool,
    /// At the new primary: DoViewChange messages by sender.
    do_view_change_from: BTreeMap<ReplicaIndex, DoViewChange>,
    /// At the new primary: the chosen log starts past our state; waiting for its checkpoint.
    awaiting_checkpoint_from: Option<ReplicaIndex>,
}

#[derive(Debug)]
struct RecoveringState {
    nonce: Nonce,
    /// Responses by sender: the sender's view and, from a primary, its state.
    responses: BTreeMap<ReplicaIndex, (View, Option<RecoveryState>)>,
}

#[derive(Debug)]
struct PendingRead {
    request: Request,
    /// The read may be served once this op is executed: every write that completed before the
    /// read arrived is at or below it.
    read_index: Op,
    /// The read may be served once a probe of this round is confirmed: that probe was sent
    /// after the read arrived.
    round: u64,
}

#[derive(Debug)]
struct Probe {
    round: u64,
    acknowledged_by: u64,
}

/// State only the primary of the current view has.
#[derive(Debug)]
struct PrimaryState {
    /// The highest op each replica acknowledged in this view (this replica included).
    acknowledged_op: Vec<Op>,
    /// The op number when the view started: ops up to it may have committed in older views.
    view_start_op: Op,
    batch: Vec<Request>,
    batch_age_ticks: u64,
    /// Write requests queued or prepared but not executed, by client.
    in_flight: BTreeMap<ClientId, RequestNumber>,
    reads: VecDeque<PendingRead>,
    /// The (client, request) of every read in `reads`: a client resending a read that waits
    /// (behind a long scan, say) must not queue it twice.
    reads_queued: BTreeSet<(ClientId, RequestNumber)>,
    probe: Option<Probe>,
    probe_round_next: u64,
    probe_round_confirmed: u64,
}

/// State only a backup in normal status has.
#[derive(Debug, Default)]
struct BackupState {
    /// Prepares that arrived ahead of a gap, by op.
    reorder: BTreeMap<Op, Entry>,
    /// A GetState is outstanding (or about to be sent when the lag timeout fires).
    lagging: bool,
}

#[derive(Debug)]
struct Timeouts {
    /// Backup: no word from the primary for this long starts a view change.
    primary: Timeout,
    /// Primary: send a heartbeat.
    heartbeat: Timeout,
    /// Resend what is unanswered (Prepare, probe, StartViewChange, DoViewChange, Recovery).
    resend: Timeout,
    /// View change that does not finish moves on.
    view_change: Timeout,
    /// Backup: a gap that lasts this long triggers state transfer.
    lag: Timeout,
}

/// A record written but not yet reported durable, and what its completion proves.
#[derive(Debug)]
pub(crate) struct PendingRecord {
    sequence: u64,
    /// The view the record promises.
    view: View,
    log: LogMark,
}

/// What a record's completion says about the log.
#[derive(Debug)]
pub(crate) enum LogMark {
    /// Nothing about the log.
    Unchanged,
    /// The log now ends with the entry at this op of this view (if it still does).
    EndsAt { op: Op, view: View },
    /// The log was cut back to this op.
    TruncatedAt(Op),
    /// The state up to this op is durable as a checkpoint.
    CheckpointAt(Op),
}

/// One member of a VR group, composed with extension `X` (`crate::Extension`): plain VR by
/// default, `Replica<S, Skyros>` for Skyros.
pub struct Replica<S: StateMachine, X: Extension<S> = NoExtension> {
    config: Config,
    index: ReplicaIndex,
    state_machine: S,
    client_table: ClientTable,
    status: Status,
    /// The current view. Never decreases while the replica runs.
    view: View,
    /// The latest view in which this replica's log was normal (VRR's "last normal view").
    log_view: View,
    journal: Journal,
    /// Every op up to commit_min is executed. commit_min <= journal.op().
    commit_min: Op,
    /// Every op up to commit_max is known to be committed. commit_min <= commit_max.
    commit_max: Op,
    /// The latest checkpoint. checkpoint.op <= commit_min.
    checkpoint: Checkpoint,
    primary: Option<PrimaryState>,
    backup: BackupState,
    timeouts: Timeouts,
    // Disk durability bookkeeping.
    persist_sequence_next: u64,
    /// Records written but not yet reported durable: (sequence, the op and its view, if the
    /// record ends the log at that entry; the view the record promises).
    persist_pending: VecDeque<PendingRecord>,
    /// Every entry up to op_persisted (of the current journal) is durable.
    op_persisted: Op,
    /// The highest view this replica has durably promised.
    view_persisted: View,
    /// Messages held until the view they speak for is durable.
    deferred: Vec<Effect>,
    /// Effects to emit at the next step (set up by a constructor, which cannot emit).
    startup: Vec<Effect>,
    /// The protocol composed with VR (Skyros), or nothing.
    extension: X,
    stats: ReplicaStats,
    /// View changes in a row that timed out since this replica was last normal. Each doubles
    /// the view change timeout and the resend interval (up to 2^VIEW_CHANGE_BACKOFF_MAX), so
    /// that a view change whose messages are large (a log of big SQL batches) finishes
    /// instead of being overtaken by the next one forever.
    view_change_attempts: u32,
    /// Operation bytes executed since the latest checkpoint (`Config::checkpoint_interval_bytes`).
    bytes_since_checkpoint: u64,
    /// The op of the checkpoint being serialised off the loop (`Effect::Checkpoint`), if any.
    checkpoint_in_flight: Option<Op>,
    /// Parts of messages from peers being reassembled (`Message::Part`).
    assembler: Assembler,
}

/// The view change timeout grows to at most 2^this (4) times its configured length: enough
/// for large view change messages, short enough that fail-over after faults stays prompt.
const VIEW_CHANGE_BACKOFF_MAX: u32 = 2;

impl<S: StateMachine, X: Extension<S>> Replica<S, X> {
    /// A replica of a new group: normal in view 0 with an empty log.
    pub fn new(config: Config, index: ReplicaIndex, state_machine: S) -> Replica<S, X> {
        Replica::build(config, index, state_machine, Status::Normal)
    }

    /// A `memory`-durability replica that restarted and lost its state: it runs VRR's
    /// recovery protocol (§4.3) with `nonce` before taking part again.
    pub fn recovering(
        config: Config,
        index: ReplicaIndex,
        state_machine: S,
        nonce: Nonce,
    ) -> Replica<S, X> {
        assert_eq!(config.durability, Durability::Memory);
        let recovering = RecoveringState {
            nonce,
            responses: BTreeMap::new(),
        };
        let mut replica =
            Replica::build(config, index, state_machine, Status::Recovering(recovering));
        replica.timeouts.resend.start();
        let message = Message::Recovery {
            replica: index,
            nonce,
        };
        replica.startup = replica
            .others()
            .map(|to| Effect::Send {
                to,
                message: message.clone(),
            })
            .collect();
        replica
    }

    /// A `disk`-durability replica restarted from its records.
    pub fn open(
        config: Config,
        index: ReplicaIndex,
        mut state_machine: S,
        durable: DurableState,
    ) -> Result<Replica<S, X>, RestoreError> {
        assert_eq!(config.durability, Durability::Disk);
        let mut client_table = ClientTable::default();
        if let Some(checkpoint) = &durable.checkpoint {
            state_machine.restore(&checkpoint.state)?;
            client_table = ClientTable::from_entries(&checkpoint.client_table);
        }
        let executed_digest = durable
            .checkpoint
            .as_ref()
            .map_or(0, |checkpoint| checkpoint.executed_digest);
        let mut replica = Replica::<S, X>::build(config, index, state_machine, Status::Normal);
        replica.client_table = client_table;
        replica.checkpoint = durable.checkpoint.clone().unwrap_or_else(empty_checkpoint);
        replica.commit_min = replica.checkpoint.op;
        replica.commit_max = replica.checkpoint.op;
        replica.journal = durable.journal;
        replica.view = durable.view;
        replica.log_view = durable.log_view;
        replica.view_persisted = durable.view;
        replica.op_persisted = replica.journal.op();
        replica.extension.on_open(
            &replica.state_machine,
            &replica.client_table,
            executed_digest,
            durable.durability_log,
        );
        // The journal may hold entries from before the checkpoint (retained ones): drop the
        // part the checkpoint covers only if it does not reach past it.
        if replica.journal.op() < replica.commit_min {
            replica.journal = Journal::new(replica.commit_min);
            replica.op_persisted = replica.commit_min;
        }
        if replica.view > replica.log_view || replica.is_primary_of(replica.view) {
            // Mid-view-change, or the primary of its view, which lost its volatile state (its
            // pipeline and op assignments): in both cases move to a new view.
            let next = replica.view.next();
            let mut effects = Vec::new();
            replica.become_view_change(next, &mut effects);
            replica.startup = effects;
        } else {
            replica.become_backup();
        }
        Ok(replica)
    }

    fn build(
        config: Config,
        index: ReplicaIndex,
        state_machine: S,
        status: Status,
    ) -> Replica<S, X> {
        config
            .validate()
            .expect("a replica needs a valid configuration");
        assert_eq!(
            config.protocol,
            X::PROTOCOL,
            "the configuration's protocol is the replica's composition"
        );
        assert!(index.0 < config.replica_count);
        assert!(
            config.replica_count <= 64,
            "acknowledgement bitsets are u64"
        );
        let timeouts = Timeouts {
            primary: Timeout::new("primary", config.primary_timeout_ticks),
            heartbeat: Timeout::new("heartbeat", config.heartbeat_ticks),
            resend: Timeout::new("resend", config.resend_ticks),
            view_change: Timeout::new("view_change", config.view_change_timeout_ticks),
            lag: Timeout::new("lag", config.resend_ticks),
        };
        let mut replica = Replica {
            config,
            index,
            state_machine,
            client_table: ClientTable::default(),
            status,
            view: View(0),
            log_view: View(0),
            journal: Journal::new(Op(0)),
            commit_min: Op(0),
            commit_max: Op(0),
            checkpoint: empty_checkpoint(),
            primary: None,
            backup: BackupState::default(),
            timeouts,
            persist_sequence_next: 1,
            persist_pending: VecDeque::new(),
            op_persisted: Op(0),
            view_persisted: View(0),
            deferred: Vec::new(),
            startup: Vec::new(),
            extension: X::default(),
            stats: ReplicaStats::default(),
            view_change_attempts: 0,
            bytes_since_checkpoint: 0,
            checkpoint_in_flight: None,
            assembler: Assembler::default(),
        };
        if matches!(replica.status, Status::Normal) {
            if replica.is_primary_of(View(0)) {
                replica.become_primary(Op(0));
            } else {
                replica.become_backup();
            }
        }
        replica.checkpoint.state = replica.state_machine.snapshot();
        replica
    }

    // ----- Observers (for the simulator's checkers and for status reporting). -----

    pub fn index(&self) -> ReplicaIndex {
        self.index
    }
    pub fn config(&self) -> &Config {
        &self.config
    }
    pub fn view(&self) -> View {
        self.view
    }
    pub fn log_view(&self) -> View {
        self.log_view
    }
    pub fn status(&self) -> StatusName {
        match self.status {
            Status::Normal => StatusName::Normal,
            Status::ViewChange(_) => StatusName::ViewChange,
            Status::Recovering(_) => StatusName::Recovering,
        }
    }
    /// Whether this replica is the primary of its view and in normal status.
    pub fn is_primary(&self) -> bool {
        self.primary.is_some()
    }

    /// Whether a read of `operation`'s keys answered now from this replica's executed state,
    /// without a round (no log entry, no probe), reflects every write to those keys that may
    /// have completed as far as this replica knows: it is the primary of its view in normal
    /// status; it executed every op its view inherited (ops up to `view_start_op` may have
    /// completed in an older view); and its extension knows no completed, unexecuted update
    /// that may touch those keys (`Extension::read_conflicts`: in Skyros, a pending nilext write
    /// in its durability log, or, while that log is not empty, an ordered unexecuted write).
    /// Every other write that completed executed here first: a primary replies after it
    /// executes. What it cannot know: that a newer view elected another primary (there are no
    /// leases), so such a read is not linearisable; §6.7's basic reads promise less.
    pub fn serves_unordered_read(&self, operation: &[u8]) -> bool {
        let Some(primary) = self.primary.as_ref() else {
            return false;
        };
        if self.commit_min < primary.view_start_op {
            return false;
        }
        !self
            .extension
            .read_conflicts(&self.state_machine, operation)
    }
    pub fn op(&self) -> Op {
        self.journal.op()
    }
    pub fn commit_min(&self) -> Op {
        self.commit_min
    }
    pub fn commit_max(&self) -> Op {
        self.commit_max
    }
    pub fn checkpoint_op(&self) -> Op {
        self.checkpoint.op
    }
    /// The op of the checkpoint its driver is serialising (`Effect::Checkpoint`), if any.
    pub fn checkpoint_in_flight(&self) -> Option<Op> {
        self.checkpoint_in_flight
    }
    /// While recovering (VRR §4.3): each responder's view and whether it sent the primary's
    /// state. For logging why a recovery is waiting.
    pub fn recovery_responses(&self) -> Option<Vec<(ReplicaIndex, View, bool)>> {
        let Status::Recovering(state) = &self.status else {
            return None;
        };
        let responses = state
            .responses
            .iter()
            .map(|(replica, (view, primary))| (*replica, *view, primary.is_some()));
        Some(responses.collect())
    }

    /// The highest view this replica durably promised (disk durability; else its view).
    pub fn view_persisted(&self) -> View {
        if self.durable() {
            self.view_persisted
        } else {
            self.view
        }
    }
    pub fn journal(&self) -> &Journal {
        &self.journal
    }
    pub fn state_machine(&self) -> &S {
        &self.state_machine
    }
    /// `StateMachine::job_done`: results of work the state machine handed its host.
    pub fn job_done(&mut self, job: u64, results: Vec<Vec<u8>>) {
        self.state_machine.job_done(job, results);
    }
    pub fn stats(&self) -> ReplicaStats {
        let mut stats = self.stats;
        self.extension.stats(&mut stats);
        stats
    }
    /// The protocol composed with VR.
    pub fn extension(&self) -> &X {
        &self.extension
    }
    /// Bytes of parts held for messages not yet reassembled (`Message::Part`).
    pub fn parts_pending_bytes(&self) -> u64 {
        self.assembler.bytes()
    }

    pub fn client_table(&self) -> &ClientTable {
        &self.client_table
    }
    /// The primary of `view`: derived, never stored.
    pub fn primary_of(&self, view: View) -> ReplicaIndex {
        ReplicaIndex((view.0 % u64::from(self.config.replica_count)) as u8)
    }

    // ----- The single entry point. -----

    /// Reacts to one input, appending effects. Never performs I/O.
    pub fn step(&mut self, input: Input, effects: &mut Vec<Effect>) {
        effects.append(&mut self.startup);
        match input {
            Input::Tick => self.on_tick(effects),
            Input::Message(message) => self.on_message(message, effects),
            Input::Persisted { sequence } => self.on_persisted(sequence, effects),
            Input::Checkpointed(checkpoint) => self.on_checkpointed(checkpoint, effects),
        }
        self.invariants();
    }

    fn on_message(&mut self, message: Message, effects: &mut Vec<Effect>) {
        if let Some(sender) = sender_of(&message) {
            if sender.0 >= self.config.replica_count || sender == self.index {
                return; // Foreign or looped-back message: drop.
            }
        }
        if let Message::Part {
            replica,
            digest,
            index,
            count,
            bytes,
        } = message
        {
            let bytes_max = self.config.message_parts_bytes_max;
            match self
                .assembler
                .receive(replica, digest, index, count, bytes, bytes_max)
            {
                Received::Pending => {}
                Received::Refused => self.stats.parts_refused += 1,
                Received::Complete(message) => {
                    self.stats.messages_reassembled += 1;
                    self.on_message_whole(message, effects);
                }
            }
            return;
        }
        let from_peer = sender_of(&message).is_some();
        if from_peer && parts::message_bytes(&message) > self.config.message_bytes_max {
            // Its sender should have sent it in parts; the transport might not carry it. (A
            // client's request is bounded by its gateway, not here: one that arrived is
            // logged, and the Prepare that carries it goes in parts if it must.)
            self.stats.messages_refused_oversized += 1;
            return;
        }
        self.on_message_whole(message, effects);
    }

    /// A message that arrived whole or was reassembled from parts.
    fn on_message_whole(&mut self, message: Message, effects: &mut Vec<Effect>) {
        if let Status::Recovering(_) = self.status {
            if let Message::RecoveryResponse {
                view,
                nonce,
                replica,
                primary,
            } = message
            {
                self.on_recovery_response(view, nonce, replica, primary, effects);
            }
            return; // A recovering replica takes part in nothing else (VRR §4.3).
        }
        match message {
            Message::Request(request) => self.on_request(request, effects),
            Message::Prepare {
                view,
                commit,
                entry,
            } => self.on_prepare(view, commit, entry, effects),
            Message::PrepareOk { view, op, replica } => {
                self.on_prepare_ok(view, op, replica, effects)
            }
            Message::Commit { view, commit } => self.on_commit(view, commit, effects),
            Message::StartViewChange { view, replica } => {
                self.on_start_view_change(view, replica, effects)
            }
            Message::DoViewChange {
                view,
                log_view,
                op,
                commit,
                checkpoint_op,
                replica,
                log,
                durability_log,
            } => {
                let message = DoViewChange {
                    log_view,
                    op,
                    commit,
                    checkpoint_op,
                    log,
                    payload: durability_log,
                };
                self.on_do_view_change(view, replica, message, effects);
            }
            Message::StartView {
                view,
                op,
                commit,
                checkpoint_op,
                log,
            } => self.on_start_view(view, op, commit, checkpoint_op, log, effects),
            Message::GetState { view, op, replica } => {
                self.on_get_state(view, op, replica, effects)
            }
            Message::NewState {
                view,
                op: _,
                commit,
                checkpoint,
                log,
                replica,
                durability,
            } => {
                let state = NewState {
                    view,
                    commit,
                    checkpoint,
                    log,
                    replica,
                    durability,
                };
                self.on_new_state(state, effects);
            }
            Message::Recovery { replica, nonce } => self.on_recovery(replica, nonce, effects),
            Message::ReadProbe { view, round } => self.on_read_probe(view, round, effects),
            Message::ReadProbeOk {
                view,
                round,
                replica,
            } => self.on_read_probe_ok(view, round, replica, effects),
            // Client-bound or stale: nothing to do. (A part was taken by `on_message`, and
            // the assembler refuses a part of parts.)
            Message::Reply(_)
            | Message::NotPrimary { .. }
            | Message::RecoveryResponse { .. }
            | Message::NilextAck { .. }
            | Message::Part { .. } => {}
        }
    }

    // ----- Time. -----

    fn on_tick(&mut self, effects: &mut Vec<Effect>) {
        // Compaction is lazy (once a tick, not when the checkpoint is taken) so that observers
        // see every entry a step executed before it goes.
        let keep_from = self
            .checkpoint
            .op
            .0
            .saturating_sub(self.config.log_retained_ops);
        self.journal.compact_through(Op(keep_from));
        let timeouts = &mut self.timeouts;
        for timeout in [
            &mut timeouts.primary,
            &mut timeouts.heartbeat,
            &mut timeouts.resend,
            &mut timeouts.view_change,
            &mut timeouts.lag,
        ] {
            timeout.tick();
        }
        match self.status {
            Status::Normal if self.primary.is_some() => self.on_tick_primary(effects),
            Status::Normal => self.on_tick_backup(effects),
            Status::ViewChange(_) => self.on_tick_view_change(effects),
            Status::Recovering(_) => self.on_tick_recovering(effects),
        }
    }

    fn on_tick_primary(&mut self, effects: &mut Vec<Effect>) {
        if self.timeouts.heartbeat.fired() {
            self.timeouts.heartbeat.start();
            let message = Message::Commit {
                view: self.view,
                commit: self.commit_max,
            };
            self.broadcast(message, effects);
        }
        if self.timeouts.resend.fired() {
            self.timeouts.resend.start();
            self.resend_prepares(effects);
            let probe = self
                .primary
                .as_ref()
                .and_then(|primary| primary.probe.as_ref().map(|probe| probe.round));
            if let Some(round) = probe {
                self.broadcast(
                    Message::ReadProbe {
                        view: self.view,
                        round,
                    },
                    effects,
                );
            }
        }
        if let Some(primary) = &mut self.primary {
            if !primary.batch.is_empty() {
                primary.batch_age_ticks += 1;
            }
        }
        // Ready reads beyond `read_batch_max` were left for a later step.
        self.maybe_serve_reads(effects);
        self.maybe_prepare(effects);
    }

    fn on_tick_backup(&mut self, effects: &mut Vec<Effect>) {
        if self.timeouts.primary.fired() {
            self.become_view_change(self.view.next(), effects);
            return;
        }
        if self.timeouts.lag.fired() {
            if self.backup.lagging {
                self.send_get_state(effects);
                self.timeouts.lag.start();
            } else {
                self.timeouts.lag.stop();
            }
        }
    }

    fn on_tick_view_change(&mut self, effects: &mut Vec<Effect>) {
        if self.timeouts.view_change.fired() {
            self.view_change_attempts =
                (self.view_change_attempts + 1).min(VIEW_CHANGE_BACKOFF_MAX);
            self.become_view_change(self.view.next(), effects);
            return;
        }
        if self.timeouts.resend.fired() {
            self.timeouts.resend.start();
            self.broadcast(
                Message::StartViewChange {
                    view: self.view,
                    replica: self.index,
                },
                effects,
            );
            let Status::ViewChange(state) = &self.status else {
                unreachable!()
            };
            let (resend_do_view_change, awaiting) =
                (state.do_view_change_sent, state.awaiting_checkpoint_from);
            if resend_do_view_change {
                self.send_do_view_change(effects);
            }
            if let Some(from) = awaiting {
                let message = Message::GetState {
                    view: self.view,
                    op: self.commit_min,
                    replica: self.index,
                };
                self.send(from, message, effects);
            }
        }
    }

    fn on_tick_recovering(&mut self, effects: &mut Vec<Effect>) {
        if self.timeouts.resend.fired() {
            self.timeouts.resend.start();
            let Status::Recovering(state) = &self.status else {
                unreachable!()
            };
            let message = Message::Recovery {
                replica: self.index,
                nonce: state.nonce,
            };
            self.broadcast(message, effects);
        }
    }

    // ----- Normal operation (§4.1). -----

    fn on_request(&mut self, request: Request, effects: &mut Vec<Effect>) {
        if !matches!(self.status, Status::Normal) {
            return; // Mid view change: the client retries.
        }
        if matches!(request.kind, RequestKind::Nilext | RequestKind::Commutative) {
            self.on_unordered_request(request, effects);
            return;
        }
        if self.primary.is_none() {
            let message = Message::NotPrimary {
                view: self.view,
                client: request.client,
                request: request.request,
            };
            effects.push(Effect::Reply {
                client: request.client,
                message,
            });
            return;
        }
        match request.kind {
            RequestKind::Read => self.on_read_request(request, effects),
            RequestKind::Write => self.on_write_request(request, effects),
            RequestKind::Nilext | RequestKind::Commutative => unreachable!("handled above"),
        }
    }

    /// A request VR does not order on arrival (nilext, commutative): the extension's. If it
    /// hands the request back, the primary queues it on its batch (Skyros §4.3: the batch is
    /// the durability log's arrival order, and later non-nilext writes queue behind it).
    fn on_unordered_request(&mut self, request: Request, effects: &mut Vec<Effect>) {
        let mut cx = context!(self, effects);
        let Some(request) = self.extension.on_unordered_request(&mut cx, request) else {
            return;
        };
        let primary = self
            .primary
            .as_mut()
            .expect("only a primary orders an unordered request");
        assert!(
            primary
                .in_flight
                .get(&request.client)
                .is_none_or(|in_flight| *in_flight < request.request),
            "an unordered request handed back is not in flight yet"
        );
        primary.in_flight.insert(request.client, request.request);
        primary.batch.push(request);
        self.maybe_prepare(effects);
    }

    fn on_write_request(&mut self, request: Request, effects: &mut Vec<Effect>) {
        if let Some((latest, result)) = self.client_table.get(request.client) {
            if request.request < latest {
                return; // Stale: the client has moved on.
            }
            if request.request == latest {
                let reply = Reply {
                    view: self.view,
                    client: request.client,
                    request: latest,
                    result: self.state_machine.reply_again(&request.operation, result),
                };
                effects.push(Effect::Reply {
                    client: request.client,
                    message: Message::Reply(reply),
                });
                return;
            }
        }
        assert!(
            self.primary.is_some(),
            "on_write_request runs at the primary"
        );
        if self.extension.holds_write(&request) {
            // Skyros slow path for a nilext request the primary already holds: it is queued
            // or prepared; the reply comes when it executes.
            return;
        }
        let primary = self
            .primary
            .as_mut()
            .expect("on_write_request runs at the primary");
        if primary
            .in_flight
            .get(&request.client)
            .is_some_and(|in_flight| request.request <= *in_flight)
        {
            return; // Already queued or prepared: its reply will come.
        }
        if primary.batch.len() >= self.config.request_queue_max {
            self.stats.requests_ignored_full += 1;
            return; // Overloaded: the client retries.
        }
        primary.in_flight.insert(request.client, request.request);
        self.extension
            .on_write_queued(&self.state_machine, &request);
        primary.batch.push(request);
        self.maybe_prepare(effects);
    }

    /// Closes the batch into a new entry when it is full, or when the pipeline has room and
    /// either nothing is in flight or the batch has lingered long enough.
    fn maybe_prepare(&mut self, effects: &mut Vec<Effect>) {
        loop {
            let Some(primary) = self.primary.as_mut() else {
                return;
            };
            if primary.batch.is_empty() {
                return;
            }
            let in_flight_ops = self.journal.op().0 - self.commit_max.0;
            if in_flight_ops >= self.config.pipeline_ops_max {
                return;
            }
            let full = primary.batch.len() >= self.config.batch_requests_max;
            let lingered = primary.batch_age_ticks >= self.config.batch_linger_ticks;
            if !(full || lingered || in_flight_ops == 0) {
                return;
            }
            let take = primary.batch.len().min(self.config.batch_requests_max);
            let requests: Vec<Request> = primary.batch.drain(..take).collect();
            primary.batch_age_ticks = 0;
            self.prepare(requests, effects);
        }
    }

    fn prepare(&mut self, requests: Vec<Request>, effects: &mut Vec<Effect>) {
        assert!(self.primary.is_some());
        assert!(!requests.is_empty());
        let entry = Entry {
            view: self.view,
            op: self.journal.op().next(),
            requests,
        };
        self.journal.append(entry.clone());
        if self.durable() {
            self.persist(Record::Entry(entry.clone()), effects);
        }
        let message = Message::Prepare {
            view: self.view,
            commit: self.commit_max,
            entry,
        };
        self.broadcast(message, effects);
        self.timeouts.heartbeat.start();
        self.maybe_commit(effects);
    }

    /// Prepares the whole batch now, past the pipeline limit (a Skyros read waits for it).
    fn prepare_everything(&mut self, effects: &mut Vec<Effect>) {
        loop {
            let primary = self.primary.as_mut().expect("at the primary");
            if primary.batch.is_empty() {
                return;
            }
            let take = primary.batch.len().min(self.config.batch_requests_max);
            let requests: Vec<Request> = primary.batch.drain(..take).collect();
            primary.batch_age_ticks = 0;
            self.prepare(requests, effects);
        }
    }

    fn resend_prepares(&mut self, effects: &mut Vec<Effect>) {
        let Some(primary) = &self.primary else { return };
        let mut sends = Vec::new();
        for to in self.others() {
            let acknowledged = primary.acknowledged_op[to.0 as usize];
            let from = acknowledged.max(self.commit_max).next();
            for op in from.0..=self.journal.op().0 {
                if let Some(entry) = self.journal.get(Op(op)) {
                    let message = Message::Prepare {
                        view: self.view,
                        commit: self.commit_max,
                        entry: entry.clone(),
                    };
                    sends.push((to, message));
                }
            }
        }
        for (to, message) in sends {
            self.send(to, message, effects);
        }
    }

    fn on_prepare(&mut self, view: View, commit: Op, entry: Entry, effects: &mut Vec<Effect>) {
        if !self.accept_from_primary(view, effects) {
            return;
        }
        if self.log_view != self.view {
            // Our log past commit_min may be from an older view: wait for this view's log.
            if entry.op > self.commit_min
                && entry.op.0 <= self.commit_min.0 + 2 * self.config.pipeline_ops_max
            {
                self.backup.reorder.insert(entry.op, entry);
            }
            self.mark_lagging();
        } else if entry.op <= self.journal.op() {
            self.send_prepare_ok(effects); // A duplicate: acknowledge again.
        } else if entry.op == self.journal.op().next() {
            self.append_as_backup(entry, effects);
            self.drain_reorder(effects);
            self.send_prepare_ok(effects);
        } else if entry.op.0 <= self.journal.op().0 + 2 * self.config.pipeline_ops_max {
            self.backup.reorder.insert(entry.op, entry);
            self.mark_lagging();
        } else {
            self.mark_lagging();
        }
        self.advance_commit_max(commit, effects);
    }

    fn on_commit(&mut self, view: View, commit: Op, effects: &mut Vec<Effect>) {
        if !self.accept_from_primary(view, effects) {
            return;
        }
        self.advance_commit_max(commit, effects);
    }

    /// Filters a message from the primary of `view` to a backup, adopting a newer view first.
    /// Returns whether the message is for this replica's current view and status.
    fn accept_from_primary(&mut self, view: View, effects: &mut Vec<Effect>) -> bool {
        if view < self.view {
            return false;
        }
        let behind = view > self.view || !matches!(self.status, Status::Normal);
        if behind {
            if self.is_primary_of(view) {
                return false; // Our own view, which we have not started: a stale or foreign message.
            }
            self.become_lagging_backup(view, effects);
        }
        if self.primary.is_some() {
            return false; // Only one primary per view: this cannot be from a peer primary.
        }
        self.timeouts.primary.start();
        true
    }

    fn advance_commit_max(&mut self, commit: Op, effects: &mut Vec<Effect>) {
        self.commit_max = self.commit_max.max(commit);
        if self.commit_max > self.journal.op() {
            self.mark_lagging();
        }
        self.execute_committed(effects);
    }

    fn append_as_backup(&mut self, entry: Entry, effects: &mut Vec<Effect>) {
        assert!(self.primary.is_none());
        assert_eq!(entry.op, self.journal.op().next());
        assert_eq!(
            self.log_view, self.view,
            "a backup appends only to its view's log"
        );
        if self.durable() {
            self.persist(Record::Entry(entry.clone()), effects);
        }
        self.journal.append(entry);
    }

    fn drain_reorder(&mut self, effects: &mut Vec<Effect>) {
        if self.log_view != self.view {
            return;
        }
        while let Some(entry) = self.backup.reorder.remove(&self.journal.op().next()) {
            self.append_as_backup(entry, effects);
        }
        let op = self.journal.op();
        self.backup.reorder.retain(|pending, _| *pending > op);
        if self.backup.reorder.is_empty() && self.commit_max <= self.journal.op() {
            self.backup.lagging = false;
        }
    }

    fn mark_lagging(&mut self) {
        self.backup.lagging = true;
        if !self.timeouts.lag.running() {
            self.timeouts.lag.start();
        }
    }

    fn send_prepare_ok(&mut self, effects: &mut Vec<Effect>) {
        let op = if self.durable() {
            self.op_persisted
        } else {
            self.journal.op()
        };
        if op == Op(0) || self.log_view != self.view {
            return;
        }
        let message = Message::PrepareOk {
            view: self.view,
            op,
            replica: self.index,
        };
        self.send(self.primary_of(self.view), message, effects);
    }

    fn on_prepare_ok(
        &mut self,
        view: View,
        op: Op,
        replica: ReplicaIndex,
        effects: &mut Vec<Effect>,
    ) {
        if view != self.view || self.primary.is_none() {
            return;
        }
        let op = op.min(self.journal.op());
        let primary = self.primary.as_mut().expect("checked above");
        let acknowledged = &mut primary.acknowledged_op[replica.0 as usize];
        *acknowledged = (*acknowledged).max(op);
        self.maybe_commit(effects);
    }

    fn maybe_commit(&mut self, effects: &mut Vec<Effect>) {
        let own = if self.durable() {
            self.op_persisted
        } else {
            self.journal.op()
        };
        let Some(primary) = self.primary.as_mut() else {
            return;
        };
        primary.acknowledged_op[self.index.0 as usize] = own;
        let acknowledged: Vec<u64> = primary.acknowledged_op.iter().map(|op| op.0).collect();
        let mut commit = Op(majority_value(&acknowledged));
        if self.config.canary == Some(crate::config::Canary::CommitWithoutQuorum) {
            commit = own;
        }
        if commit <= self.commit_max {
            return;
        }
        assert!(commit <= self.journal.op());
        self.commit_max = commit;
        self.execute_committed(effects);
        self.maybe_prepare(effects);
        self.maybe_serve_reads(effects);
    }

    /// Executes every committed op this replica holds, in order; the primary replies.
    fn execute_committed(&mut self, effects: &mut Vec<Effect>) {
        // Entries past commit_min are this view's only when the log is this view's log.
        let executable = if self.log_view == self.view {
            self.journal.op()
        } else {
            self.commit_min
        };
        let target = self.commit_max.min(executable);
        while self.commit_min < target {
            let op = self.commit_min.next();
            let entry = self
                .journal
                .get(op)
                .expect("ops above commit_min are retained")
                .clone();
            self.bytes_since_checkpoint += entry
                .requests
                .iter()
                .map(|request| request.operation.len() as u64)
                .sum::<u64>();
            self.execute_entry(&entry.requests, effects);
            self.commit_min = op;
        }
        self.maybe_checkpoint(effects);
    }

    /// Executes a log entry's requests in order, as one `apply_batch` of the requests not
    /// executed before (a request logged twice, retried across a view change, runs once).
    fn execute_entry(&mut self, requests: &[Request], effects: &mut Vec<Effect>) {
        let mut fresh: Vec<&Request> = Vec::with_capacity(requests.len());
        for request in requests {
            self.forget_pending(request);
            let again = self.client_table.executed(request.client, request.request)
                || fresh.iter().any(|earlier| {
                    earlier.client == request.client && earlier.request >= request.request
                });
            if !again {
                fresh.push(request);
            }
        }
        let operations: Vec<&[u8]> = fresh
            .iter()
            .map(|request| request.operation.as_slice())
            .collect();
        let results = self.state_machine.apply_batch(&operations);
        assert_eq!(
            results.len(),
            fresh.len(),
            "apply_batch returns one result each"
        );
        for (request, result) in fresh.into_iter().zip(results) {
            self.executed(request, result, effects);
        }
    }

    /// Drops an executing request from the primary's and the extension's bookkeeping.
    fn forget_pending(&mut self, request: &Request) {
        if let Some(primary) = &mut self.primary {
            if primary
                .in_flight
                .get(&request.client)
                .is_some_and(|in_flight| *in_flight <= request.request)
            {
                primary.in_flight.remove(&request.client);
            }
        }
        self.extension.on_executing(request);
    }

    /// Records an executed request's result; the primary replies.
    fn executed(&mut self, request: &Request, result: Vec<u8>, effects: &mut Vec<Effect>) {
        self.client_table
            .record(request.client, request.request, result.clone());
        // The primary replies to every write it ordered itself; to a request that reached it
        // through the extension (nilext, commutative), only if the extension says so.
        let at_primary = self.primary.is_some();
        let extension_wants_reply = self.extension.on_executed(request, at_primary);
        let unordered = matches!(request.kind, RequestKind::Nilext | RequestKind::Commutative);
        assert!(
            !extension_wants_reply || (at_primary && unordered),
            "the extension asks for replies only to its own requests, at the primary"
        );
        let reply_wanted = at_primary && (!unordered || extension_wants_reply);
        if reply_wanted {
            let reply = Reply {
                view: self.view,
                client: request.client,
                request: request.request,
                result,
            };
            effects.push(Effect::Reply {
                client: request.client,
                message: Message::Reply(reply),
            });
        }
    }

    fn maybe_checkpoint(&mut self, effects: &mut Vec<Effect>) {
        let state_bytes = self.checkpoint.state.len() as u64;
        let due_by_ops = self.commit_min.0 - self.checkpoint.op.0
            >= self.config.checkpoint_interval_ops
            && self.bytes_since_checkpoint.saturating_mul(100)
                >= state_bytes.saturating_mul(self.config.checkpoint_state_percent);
        let due_by_bytes = self.commit_min > self.checkpoint.op
            && self.bytes_since_checkpoint >= self.config.checkpoint_interval_bytes;
        let busy = self.checkpoint_in_flight.is_some() || self.commit_min == self.checkpoint.op;
        if !due_by_ops && !due_by_bytes || busy {
            return;
        }
        self.bytes_since_checkpoint = 0;
        self.checkpoint_in_flight = Some(self.commit_min);
        // The state machine's copy costs (next to) nothing here; its driver serialises it.
        effects.push(Effect::Checkpoint {
            checkpoint: Checkpoint {
                op: self.commit_min,
                state: Vec::new(),
                client_table: self.client_table.to_entries(),
                executed_digest: self.extension.executed_digest(),
            },
            source: self.state_machine.snapshot_source(),
        });
    }

    /// A checkpoint came back serialised: it becomes the latest (persisted with disk
    /// durability; the journal behind it is compacted at the next tick), unless it is not the
    /// one in flight (a previous life's, or one a state transfer overtook).
    fn on_checkpointed(&mut self, checkpoint: Checkpoint, effects: &mut Vec<Effect>) {
        if self.checkpoint_in_flight != Some(checkpoint.op) {
            return;
        }
        self.checkpoint_in_flight = None;
        assert!(
            checkpoint.op <= self.commit_min,
            "a checkpoint completes for an executed op"
        );
        if checkpoint.op <= self.checkpoint.op {
            return;
        }
        self.checkpoint = checkpoint;
        if self.durable() {
            self.persist(Record::Checkpoint(self.checkpoint.clone()), effects);
        }
    }

    // ----- Linearisable reads: a read-index round (see docs/internals/vr.md). -----

    fn on_read_request(&mut self, request: Request, effects: &mut Vec<Effect>) {
        if self.primary.as_ref().is_some_and(|primary| {
            primary
                .reads_queued
                .contains(&(request.client, request.request))
        }) {
            return; // A resend of a read that is queued: it will be answered once.
        }
        // The extension (Skyros §4.4) may make the read wait for every pending update: then
        // the whole batch is prepared now, past the pipeline limit, and the read is served once
        // everything logged has executed.
        let waits = self
            .extension
            .on_read(&self.state_machine, &request.operation);
        let read_index = if waits {
            self.prepare_everything(effects);
            self.journal.op()
        } else {
            let primary = self
                .primary
                .as_ref()
                .expect("reads are handled at the primary");
            self.commit_max.max(primary.view_start_op)
        };
        let primary = self.primary.as_mut().expect("checked above");
        if primary.reads.len() >= self.config.read_queue_max {
            return; // Overloaded: the client retries.
        }
        let mut round = primary.probe_round_next;
        if self.config.canary == Some(crate::config::Canary::ReadWithoutProbe) {
            round = primary.probe_round_confirmed;
        }
        primary
            .reads_queued
            .insert((request.client, request.request));
        primary.reads.push_back(PendingRead {
            request,
            read_index,
            round,
        });
        self.maybe_send_probe(effects);
        self.maybe_serve_reads(effects);
    }

    fn maybe_send_probe(&mut self, effects: &mut Vec<Effect>) {
        let majority = self.config.majority();
        let Some(primary) = self.primary.as_mut() else {
            return;
        };
        let waiting = primary
            .reads
            .back()
            .is_some_and(|read| read.round > primary.probe_round_confirmed);
        if primary.probe.is_some() || !waiting {
            return;
        }
        let round = primary.probe_round_next;
        primary.probe_round_next += 1;
        primary.probe = Some(Probe {
            round,
            acknowledged_by: 0,
        });
        if majority == 1 {
            primary.probe = None;
            primary.probe_round_confirmed = round;
            return;
        }
        self.broadcast(
            Message::ReadProbe {
                view: self.view,
                round,
            },
            effects,
        );
    }

    fn on_read_probe(&mut self, view: View, round: u64, effects: &mut Vec<Effect>) {
        if view != self.view || !matches!(self.status, Status::Normal) || self.primary.is_some() {
            return;
        }
        self.timeouts.primary.start();
        let message = Message::ReadProbeOk {
            view,
            round,
            replica: self.index,
        };
        self.send(self.primary_of(view), message, effects);
    }

    fn on_read_probe_ok(
        &mut self,
        view: View,
        round: u64,
        replica: ReplicaIndex,
        effects: &mut Vec<Effect>,
    ) {
        let majority = self.config.majority();
        if view != self.view {
            return;
        }
        let Some(primary) = self.primary.as_mut() else {
            return;
        };
        let Some(probe) = primary.probe.as_mut() else {
            return;
        };
        if probe.round != round {
            return;
        }
        probe.acknowledged_by |= 1 << replica.0;
        if probe.acknowledged_by.count_ones() as usize + 1 < majority {
            return;
        }
        primary.probe_round_confirmed = round;
        primary.probe = None;
        self.maybe_serve_reads(effects);
        self.maybe_send_probe(effects);
    }

    fn maybe_serve_reads(&mut self, effects: &mut Vec<Effect>) {
        let Some(primary) = self.primary.as_mut() else {
            return;
        };
        let mut ready = Vec::new();
        while let Some(read) = primary.reads.front() {
            if read.round > primary.probe_round_confirmed
                || read.read_index > self.commit_min
                || ready.len() >= self.config.read_batch_max
            {
                break;
            }
            let read = primary.reads.pop_front().expect("front exists");
            primary
                .reads_queued
                .remove(&(read.request.client, read.request.request));
            ready.push(read);
        }
        if ready.is_empty() {
            return;
        }
        let operations: Vec<&[u8]> = ready
            .iter()
            .map(|read| read.request.operation.as_slice())
            .collect();
        let results = self.state_machine.query_batch(&operations);
        assert_eq!(
            results.len(),
            ready.len(),
            "query_batch returns one result each"
        );
        for (read, result) in ready.into_iter().zip(results) {
            let reply = Reply {
                view: self.view,
                client: read.request.client,
                request: read.request.request,
                result,
            };
            effects.push(Effect::Reply {
                client: read.request.client,
                message: Message::Reply(reply),
            });
        }
    }

    // ----- View change (§4.2). -----

    fn reset_view_change_backoff(&mut self) {
        self.view_change_attempts = 0;
        self.timeouts
            .view_change
            .set_after_ticks(self.config.view_change_timeout_ticks);
        self.timeouts
            .resend
            .set_after_ticks(self.config.resend_ticks);
    }

    fn become_view_change(&mut self, view: View, effects: &mut Vec<Effect>) {
        assert!(view > self.view || (view == self.view && matches!(self.status, Status::Normal)));
        self.view = view;
        self.status = Status::ViewChange(ViewChangeState::default());
        self.primary = None;
        self.extension.on_role(false);
        self.state_machine.lead(false);
        self.backup = BackupState::default();
        self.timeouts.primary.stop();
        self.timeouts.heartbeat.stop();
        self.timeouts.lag.stop();
        let backoff = 1u64 << self.view_change_attempts;
        self.timeouts
            .view_change
            .set_after_ticks(self.config.view_change_timeout_ticks * backoff);
        self.timeouts
            .resend
            .set_after_ticks(self.config.resend_ticks * backoff);
        self.timeouts.view_change.start();
        self.timeouts.resend.start();
        if self.durable() {
            self.persist(Record::View { view }, effects);
        }
        self.broadcast(
            Message::StartViewChange {
                view,
                replica: self.index,
            },
            effects,
        );
        self.maybe_send_do_view_change(effects);
    }

    fn on_start_view_change(
        &mut self,
        view: View,
        replica: ReplicaIndex,
        effects: &mut Vec<Effect>,
    ) {
        if view < self.view || (view == self.view && matches!(self.status, Status::Normal)) {
            return;
        }
        if view > self.view {
            self.become_view_change(view, effects);
        }
        let Status::ViewChange(state) = &mut self.status else {
            unreachable!("in view change for this view")
        };
        state.start_view_change_from |= 1 << replica.0;
        self.maybe_send_do_view_change(effects);
    }

    fn maybe_send_do_view_change(&mut self, effects: &mut Vec<Effect>) {
        let tolerated = self.config.replicas_tolerated() as u32;
        let Status::ViewChange(state) = &mut self.status else {
            return;
        };
        if state.do_view_change_sent || state.start_view_change_from.count_ones() < tolerated {
            return;
        }
        state.do_view_change_sent = true;
        self.send_do_view_change(effects);
    }

    fn send_do_view_change(&mut self, effects: &mut Vec<Effect>) {
        let message = DoViewChange {
            log_view: self.log_view,
            op: self.journal.op(),
            commit: self.commit_max,
            checkpoint_op: self.checkpoint.op,
            log: self.journal.entries_after(self.checkpoint.op),
            payload: self.extension.view_change_payload(),
        };
        let primary = self.primary_of(self.view);
        if primary == self.index {
            self.on_do_view_change(self.view, self.index, message, effects);
        } else {
            let DoViewChange {
                log_view,
                op,
                commit,
                checkpoint_op,
                log,
                payload,
            } = message;
            let message = Message::DoViewChange {
                view: self.view,
                log_view,
                op,
                commit,
                checkpoint_op,
                replica: self.index,
                log,
                durability_log: payload,
            };
            self.send(primary, message, effects);
        }
    }

    fn on_do_view_change(
        &mut self,
        view: View,
        replica: ReplicaIndex,
        message: DoViewChange,
        effects: &mut Vec<Effect>,
    ) {
        if view < self.view || !self.is_primary_of(view) {
            return;
        }
        if view == self.view && matches!(self.status, Status::Normal) {
            return; // The view has started; a late DoViewChange.
        }
        if message.log_view > view
            || message.op < message.checkpoint_op
            || !log_is_contiguous(&message)
        {
            return; // Malformed: the log must run from checkpoint_op + 1 to op without a gap.
        }
        if view > self.view {
            self.become_view_change(view, effects);
        }
        let Status::ViewChange(state) = &mut self.status else {
            unreachable!("in view change for this view")
        };
        state.do_view_change_from.insert(replica, message);
        self.maybe_start_view(effects);
    }

    /// The new primary starts the view once f + 1 DoViewChange messages (its own included)
    /// arrived: it takes the log with the latest (log_view, op) and the highest commit.
    fn maybe_start_view(&mut self, effects: &mut Vec<Effect>) {
        let majority = self.config.majority();
        let Status::ViewChange(state) = &mut self.status else {
            return;
        };
        if state.awaiting_checkpoint_from.is_some()
            || state.do_view_change_from.len() < majority
            || !state.do_view_change_from.contains_key(&self.index)
        {
            return;
        }
        let (best_replica, best) = state
            .do_view_change_from
            .iter()
            .max_by_key(|(replica, message)| {
                (message.log_view, message.op, std::cmp::Reverse(**replica))
            })
            .expect("a majority is not empty");
        let best_replica = *best_replica;
        let commit = state
            .do_view_change_from
            .values()
            .map(|message| message.commit)
            .max()
            .expect("not empty");
        assert!(
            best.op >= self.commit_min,
            "the chosen log holds every committed op"
        );
        if best.checkpoint_op > self.commit_min {
            // The chosen log starts after our state ends: fetch its checkpoint first.
            state.awaiting_checkpoint_from = Some(best_replica);
            let message = Message::GetState {
                view: self.view,
                op: self.commit_min,
                replica: self.index,
            };
            self.send(best_replica, message, effects);
            return;
        }
        let entries: Vec<Entry> = best
            .log
            .iter()
            .filter(|entry| entry.op > self.commit_min)
            .cloned()
            .collect();
        let chosen_log_view = best.log_view;
        let votes_from = std::mem::take(&mut state.do_view_change_from);
        self.install_log(entries, effects);
        self.commit_max = self.commit_max.max(commit.min(self.journal.op()));
        // The extension merges what the participants carried (Skyros §4.6: their durability
        // logs); what it returns joins the log as entries of the new view, so StartView
        // carries it.
        let votes: Vec<ViewChangeVote<'_>> = votes_from
            .iter()
            .map(|(replica, message)| ViewChangeVote {
                replica: *replica,
                log_view: message.log_view,
                payload: &message.payload,
            })
            .collect();
        let mut cx = context!(self, effects);
        let recovered = self
            .extension
            .on_view_start(&mut cx, &votes, chosen_log_view);
        for chunk in recovered.chunks(self.config.batch_requests_max) {
            let entry = Entry {
                view: self.view,
                op: self.journal.op().next(),
                requests: chunk.to_vec(),
            };
            self.journal.append(entry.clone());
            if self.durable() {
                self.persist(Record::Entry(entry), effects);
            }
        }
        self.status = Status::Normal;
        self.reset_view_change_backoff();
        self.become_primary(self.journal.op());
        if let Some(primary) = &mut self.primary {
            for request in &recovered {
                let slot = primary
                    .in_flight
                    .entry(request.client)
                    .or_insert(request.request);
                *slot = (*slot).max(request.request);
            }
        }
        self.timeouts.view_change.stop();
        let message = Message::StartView {
            view: self.view,
            op: self.journal.op(),
            commit: self.commit_max,
            checkpoint_op: self.checkpoint.op,
            log: self.journal.entries_after(self.checkpoint.op),
        };
        self.broadcast(message, effects);
        self.execute_committed(effects);
        self.maybe_commit(effects);
    }

    /// Replaces everything after commit_min with `entries` (which start at commit_min + 1) and
    /// makes this view the log's view.
    fn install_log(&mut self, entries: Vec<Entry>, effects: &mut Vec<Effect>) {
        if self.log_view != self.view {
            self.extension.on_log_view_changed();
        }
        self.journal.truncate_after(self.commit_min);
        for entry in &entries {
            assert_eq!(
                entry.op,
                self.journal.op().next(),
                "an installed log is contiguous"
            );
            self.journal.append(entry.clone());
        }
        self.log_view = self.view;
        if self.durable() {
            self.op_persisted = self.op_persisted.min(self.commit_min);
            let record = Record::Log {
                view: self.view,
                log_view: self.view,
                truncate_after: self.commit_min,
                entries,
            };
            self.persist(record, effects);
        }
    }

    fn on_start_view(
        &mut self,
        view: View,
        op: Op,
        commit: Op,
        checkpoint_op: Op,
        log: Vec<Entry>,
        effects: &mut Vec<Effect>,
    ) {
        if view < self.view || (view == self.view && matches!(self.status, Status::Normal)) {
            return;
        }
        if self.is_primary_of(view) {
            return;
        }
        let connects = checkpoint_op <= self.commit_min
            && log
                .first()
                .is_none_or(|first| first.op <= self.commit_min.next())
            && log.last().map_or(checkpoint_op, |last| last.op) == op
            && log.windows(2).all(|pair| pair[1].op == pair[0].op.next());
        if !connects {
            // The new primary's log starts past our state: catch up by state transfer.
            self.become_lagging_backup(view, effects);
            self.commit_max = self.commit_max.max(commit);
            self.mark_lagging();
            self.send_get_state(effects);
            return;
        }
        self.view = view;
        let entries: Vec<Entry> = log
            .into_iter()
            .filter(|entry| entry.op > self.commit_min)
            .collect();
        self.install_log(entries, effects);
        self.status = Status::Normal;
        self.reset_view_change_backoff();
        self.become_backup();
        self.timeouts.view_change.stop();
        self.commit_max = self.commit_max.max(commit);
        self.execute_committed(effects);
        self.send_prepare_ok(effects);
    }

    fn become_primary(&mut self, view_start_op: Op) {
        assert!(matches!(self.status, Status::Normal));
        assert!(self.is_primary_of(self.view));
        self.backup = BackupState::default();
        self.state_machine.lead(true);
        self.primary = Some(PrimaryState {
            acknowledged_op: vec![Op(0); self.config.replica_count as usize],
            view_start_op,
            batch: Vec::new(),
            batch_age_ticks: 0,
            in_flight: BTreeMap::new(),
            reads: VecDeque::new(),
            reads_queued: BTreeSet::new(),
            probe: None,
            probe_round_next: 1,
            probe_round_confirmed: 0,
        });
        self.extension.on_role(true);
        self.timeouts.primary.stop();
        self.timeouts.lag.stop();
        self.timeouts.heartbeat.start();
        // Always running at a primary: resending finds nothing to do when nothing is pending.
        self.timeouts.resend.start();
    }

    fn become_backup(&mut self) {
        assert!(matches!(self.status, Status::Normal));
        assert!(!self.is_primary_of(self.view));
        self.primary = None;
        self.extension.on_role(false);
        self.state_machine.lead(false);
        self.backup = BackupState::default();
        self.timeouts.heartbeat.stop();
        self.timeouts.resend.stop();
        self.timeouts.primary.start();
    }

    /// Learned of `view` (newer, or one whose start we missed) from its primary: become its
    /// backup and fetch that view's log (§4.2, §5.2).
    ///
    /// Deviation from VRR, which truncates the log to the commit number here: our log is kept,
    /// with its old log view, until this view's log arrives. The entries past commit_min may be
    /// committed ops that this replica acknowledged (its commit number can lag, e.g. after a
    /// restart), and if the new primary fails before anyone else holds its log, a later view
    /// change needs them. Until then nothing past commit_min is executed or acknowledged.
    fn become_lagging_backup(&mut self, view: View, effects: &mut Vec<Effect>) {
        assert!(view >= self.view);
        self.view = view;
        self.status = Status::Normal;
        self.reset_view_change_backoff();
        if self.durable() {
            self.persist(Record::View { view }, effects);
        }
        self.become_backup();
        self.timeouts.view_change.stop();
        self.mark_lagging();
    }

    // ----- State transfer (§5.2). -----

    fn send_get_state(&mut self, effects: &mut Vec<Effect>) {
        let after = if self.log_view == self.view {
            self.journal.op()
        } else {
            self.commit_min
        };
        let message = Message::GetState {
            view: self.view,
            op: after,
            replica: self.index,
        };
        self.send(self.primary_of(self.view), message, effects);
    }

    fn on_get_state(
        &mut self,
        view: View,
        op: Op,
        replica: ReplicaIndex,
        effects: &mut Vec<Effect>,
    ) {
        if view != self.view {
            return;
        }
        // A replica in view change answers only the new primary, which needs a checkpoint to
        // take its log; its own log is frozen then.
        let answers = match &self.status {
            Status::Normal => self.log_view == view,
            Status::ViewChange(_) => replica == self.primary_of(view),
            Status::Recovering(_) => false,
        };
        if !answers {
            return;
        }
        let needs_checkpoint = op < self.checkpoint.op
            || (op < self.journal.op() && !self.journal.contains(op.next()));
        let (checkpoint, log) = if needs_checkpoint {
            (
                Some(self.checkpoint.clone()),
                self.journal.entries_after(self.checkpoint.op),
            )
        } else {
            (None, self.journal.entries_after(op))
        };
        let durability = self.extension.new_state_payload(self.primary.is_some());
        let message = Message::NewState {
            view,
            op: self.journal.op(),
            commit: self.commit_max,
            checkpoint,
            log,
            replica: self.index,
            durability,
        };
        self.send(replica, message, effects);
    }

    fn on_new_state(&mut self, state: NewState, effects: &mut Vec<Effect>) {
        let NewState {
            view,
            commit,
            checkpoint,
            log,
            replica,
            durability,
        } = state;
        if view != self.view {
            return;
        }
        if let Status::ViewChange(state) = &mut self.status {
            if state.awaiting_checkpoint_from != Some(replica) {
                return;
            }
            let Some(checkpoint) = checkpoint else { return };
            if checkpoint.op > self.commit_min
                && self.install_checkpoint(checkpoint, effects).is_err()
            {
                return;
            }
            let Status::ViewChange(state) = &mut self.status else {
                unreachable!()
            };
            state.awaiting_checkpoint_from = None;
            self.maybe_start_view(effects);
            return;
        }
        if !matches!(self.status, Status::Normal) || self.primary.is_some() {
            return;
        }
        if let Some(checkpoint) = checkpoint {
            if checkpoint.op > self.commit_min
                && self.install_checkpoint(checkpoint, effects).is_err()
            {
                return;
            }
        }
        if self.log_view != self.view {
            // The sender's log is this view's log: it replaces everything past commit_min.
            let entries: Vec<Entry> = log
                .into_iter()
                .filter(|entry| entry.op > self.commit_min)
                .collect();
            let connects = entries
                .first()
                .is_none_or(|first| first.op == self.commit_min.next())
                && entries
                    .windows(2)
                    .all(|pair| pair[1].op == pair[0].op.next());
            if !connects {
                return; // Not the state we asked for (a stale answer): the lag timer asks again.
            }
            self.install_log(entries, effects);
            if let (Some(durability), true) = (durability, replica == self.primary_of(view)) {
                let mut cx = context!(self, effects);
                self.extension.on_new_state(&mut cx, &durability);
            }
        } else {
            for entry in log {
                if entry.op == self.journal.op().next() {
                    self.append_as_backup(entry, effects);
                }
            }
        }
        self.drain_reorder(effects);
        self.advance_commit_max(commit, effects);
        self.send_prepare_ok(effects);
    }

    /// Replaces the state with a checkpoint from a peer. Our log is dropped: what follows the
    /// checkpoint comes from the same message.
    fn install_checkpoint(
        &mut self,
        checkpoint: Checkpoint,
        effects: &mut Vec<Effect>,
    ) -> Result<(), RestoreError> {
        assert!(checkpoint.op > self.commit_min);
        self.state_machine.restore(&checkpoint.state)?;
        self.client_table = ClientTable::from_entries(&checkpoint.client_table);
        self.extension.on_checkpoint_installed(&checkpoint);
        self.commit_min = checkpoint.op;
        self.commit_max = self.commit_max.max(checkpoint.op);
        if self.journal.contains(checkpoint.op.next()) {
            // Keep what follows (as a replay of the records would): it may hold acknowledged ops.
            self.journal.compact_through(checkpoint.op);
        } else {
            self.journal = Journal::new(checkpoint.op);
            self.op_persisted = self.op_persisted.min(checkpoint.op);
        }
        self.checkpoint = checkpoint;
        self.bytes_since_checkpoint = 0;
        // A checkpoint being serialised is behind this one: its completion will be ignored.
        self.checkpoint_in_flight = None;
        if self.durable() {
            self.persist(Record::Checkpoint(self.checkpoint.clone()), effects);
        }
        Ok(())
    }

    // ----- Recovery of a diskless replica (§4.3). -----

    fn on_recovery(&mut self, replica: ReplicaIndex, nonce: Nonce, effects: &mut Vec<Effect>) {
        if !matches!(self.status, Status::Normal) {
            return;
        }
        let primary = self.primary.is_some().then(|| RecoveryState {
            op: self.journal.op(),
            commit: self.commit_max,
            checkpoint: self.checkpoint.clone(),
            log: self.journal.entries_after(self.checkpoint.op),
            durability: self.extension.recovery_payload(),
        });
        let message = Message::RecoveryResponse {
            view: self.view,
            nonce,
            replica: self.index,
            primary,
        };
        self.send(replica, message, effects);
    }

    fn on_recovery_response(
        &mut self,
        view: View,
        nonce: Nonce,
        replica: ReplicaIndex,
        primary: Option<RecoveryState>,
        effects: &mut Vec<Effect>,
    ) {
        let majority = self.config.majority();
        let replica_count = u64::from(self.config.replica_count);
        let Status::Recovering(state) = &mut self.status else {
            return;
        };
        if nonce != state.nonce {
            return;
        }
        let newer = state
            .responses
            .get(&replica)
            .is_none_or(|(known, _)| *known <= view);
        if newer {
            state.responses.insert(replica, (view, primary));
        }
        // Need f + 1 responses, one of them from the primary of the latest view among them.
        if state.responses.len() < majority {
            return;
        }
        let latest = state
            .responses
            .values()
            .map(|(view, _)| *view)
            .max()
            .expect("not empty");
        let latest_primary = ReplicaIndex((latest.0 % replica_count) as u8);
        let Some((_, Some(recovered))) = state.responses.get(&latest_primary) else {
            return;
        };
        if state.responses.get(&latest_primary).map(|(view, _)| *view) != Some(latest) {
            return;
        }
        let recovered = recovered.clone();
        self.recover_from(latest, recovered, effects);
    }

    fn recover_from(&mut self, view: View, recovered: RecoveryState, effects: &mut Vec<Effect>) {
        let RecoveryState {
            op,
            commit,
            checkpoint,
            log,
            durability,
        } = recovered;
        let contiguous = log
            .first()
            .is_none_or(|first| first.op == checkpoint.op.next())
            && log.windows(2).all(|pair| pair[1].op == pair[0].op.next())
            && log.last().map_or(checkpoint.op, |last| last.op) == op;
        if !contiguous || self.state_machine.restore(&checkpoint.state).is_err() {
            return; // Malformed response: wait for another.
        }
        self.client_table = ClientTable::from_entries(&checkpoint.client_table);
        self.extension.on_checkpoint_installed(&checkpoint);
        self.journal = Journal::new(checkpoint.op);
        self.commit_min = checkpoint.op;
        self.commit_max = commit.max(checkpoint.op);
        self.checkpoint = checkpoint;
        self.bytes_since_checkpoint = 0;
        // A checkpoint being serialised is behind this one: its completion will be ignored.
        self.checkpoint_in_flight = None;
        for entry in log {
            self.journal.append(entry);
        }
        self.view = view;
        self.log_view = view;
        self.status = Status::Normal;
        self.reset_view_change_backoff();
        self.become_backup();
        let mut cx = context!(self, effects);
        self.extension.on_recovered(&mut cx, &durability);
        self.execute_committed(effects);
        self.send_prepare_ok(effects);
    }

    // ----- Durability. -----

    fn durable(&self) -> bool {
        self.config.durability == Durability::Disk
    }

    fn persist(&mut self, record: Record, effects: &mut Vec<Effect>) {
        assert!(self.durable());
        persist_record(
            &mut self.persist_sequence_next,
            &mut self.persist_pending,
            self.view,
            self.view_persisted,
            record,
            effects,
        );
    }

    fn on_persisted(&mut self, sequence: u64, effects: &mut Vec<Effect>) {
        if !self.durable() {
            return;
        }
        while self
            .persist_pending
            .front()
            .is_some_and(|pending| pending.sequence <= sequence)
        {
            let pending = self.persist_pending.pop_front().expect("front exists");
            self.view_persisted = self.view_persisted.max(pending.view);
            match pending.log {
                LogMark::Unchanged => {}
                LogMark::TruncatedAt(op) => self.op_persisted = self.op_persisted.min(op),
                // Records complete in order: every earlier entry is durable too. A later record
                // may have replaced this entry since; then this completion proves nothing.
                LogMark::EndsAt { op, view } => {
                    if self.journal.get(op).is_some_and(|entry| entry.view == view) {
                        self.op_persisted = op;
                    }
                }
                // Committed state is the same on every replica: the op is durable here.
                LogMark::CheckpointAt(op) => self.op_persisted = self.op_persisted.max(op),
            }
        }
        self.op_persisted = self.op_persisted.min(self.journal.op());
        self.extension.on_persisted(sequence, effects);
        self.flush_deferred(effects);
        if matches!(self.status, Status::Normal) {
            if self.primary.is_some() {
                self.maybe_commit(effects);
            } else {
                self.send_prepare_ok(effects);
            }
        }
    }

    fn flush_deferred(&mut self, effects: &mut Vec<Effect>) {
        let view_persisted = self.view_persisted;
        let (ready, waiting): (Vec<Effect>, Vec<Effect>) = std::mem::take(&mut self.deferred)
            .into_iter()
            .partition(|effect| match effect {
                Effect::Send { message, .. } => {
                    message.view().is_none_or(|view| view <= view_persisted)
                }
                _ => true,
            });
        self.deferred = waiting;
        for effect in ready {
            match effect {
                Effect::Send { to, message } => self.emit(&[to], message, effects),
                other => effects.push(other),
            }
        }
    }

    // ----- Sending. -----

    /// Sends to one peer. With disk durability a message that speaks for a view this replica
    /// has not yet durably promised waits until it has (a view promise must survive a crash).
    fn send(&mut self, to: ReplicaIndex, message: Message, effects: &mut Vec<Effect>) {
        assert_ne!(to, self.index);
        if self.held_for_view(&message) {
            self.deferred.push(Effect::Send { to, message });
        } else {
            self.emit(&[to], message, effects);
        }
    }

    fn broadcast(&mut self, message: Message, effects: &mut Vec<Effect>) {
        let others: Vec<ReplicaIndex> = self.others().collect();
        if self.held_for_view(&message) {
            for to in others {
                self.deferred.push(Effect::Send {
                    to,
                    message: message.clone(),
                });
            }
        } else {
            self.emit(&others, message, effects);
        }
    }

    /// With disk durability, a message that speaks for a view not yet durably promised waits.
    fn held_for_view(&self, message: &Message) -> bool {
        self.durable()
            && message
                .view()
                .is_some_and(|view| view > self.view_persisted)
    }

    /// Sends `message` to each of `to`: whole if its frame is within
    /// `Config::message_bytes_max`, else encoded once and cut into parts within it
    /// (`Message::Part`), which the receiver reassembles (`docs/internals/vr.md`, "Messages
    /// larger than a frame").
    fn emit(&mut self, to: &[ReplicaIndex], message: Message, effects: &mut Vec<Effect>) {
        let limit = self.config.message_bytes_max;
        let unsplit = self.config.canary == Some(Canary::UnsplitMessages);
        if to.is_empty() {
            return;
        }
        if unsplit || parts::message_bytes(&message) <= limit {
            for to in to {
                effects.push(Effect::Send {
                    to: *to,
                    message: message.clone(),
                });
            }
            return;
        }
        let pieces = parts::split(&message, self.index, limit);
        self.stats.messages_split += 1;
        for to in to {
            for piece in &pieces {
                debug_assert!(
                    parts::message_bytes(piece) <= limit,
                    "a part is within the configured message limit"
                );
                self.stats.parts_sent += 1;
                effects.push(Effect::Send {
                    to: *to,
                    message: piece.clone(),
                });
            }
        }
    }

    fn others(&self) -> impl Iterator<Item = ReplicaIndex> + '_ {
        (0..self.config.replica_count)
            .map(ReplicaIndex)
            .filter(move |replica| *replica != self.index)
    }

    fn is_primary_of(&self, view: View) -> bool {
        self.primary_of(view) == self.index
    }

    // ----- Invariants, checked after every step. -----

    fn invariants(&self) {
        assert!(
            self.commit_min <= self.commit_max,
            "commit_min <= commit_max"
        );
        if let Some(primary) = &self.primary {
            assert_eq!(
                primary.reads_queued.len(),
                primary.reads.len(),
                "every queued read is indexed once"
            );
        }
        assert!(
            self.commit_min <= self.journal.op(),
            "executed ops are in the log"
        );
        assert!(
            self.checkpoint.op <= self.commit_min,
            "checkpoints cover executed ops only"
        );
        assert!(
            self.journal.first_op() <= self.checkpoint.op.next(),
            "the journal is compacted only through a completed checkpoint"
        );
        if let Some(op) = self.checkpoint_in_flight {
            assert!(
                self.checkpoint.op < op && op <= self.commit_min,
                "a checkpoint in flight is of an executed op past the latest checkpoint"
            );
        }
        assert!(
            self.journal.first_op() <= self.commit_min.next(),
            "unexecuted ops are retained"
        );
        assert!(
            self.log_view <= self.view,
            "the log's view is not ahead of the view"
        );
        match &self.status {
            Status::Normal => {
                assert_eq!(
                    self.primary.is_some(),
                    self.is_primary_of(self.view),
                    "one role per view"
                );
                if self.primary.is_some() {
                    assert_eq!(
                        self.log_view, self.view,
                        "a primary's log is its view's log"
                    );
                    assert!(
                        self.commit_max <= self.journal.op(),
                        "a primary commits only what it holds"
                    );
                }
            }
            Status::ViewChange(_) | Status::Recovering(_) => {
                assert!(self.primary.is_none(), "no primary outside normal status");
            }
        }
        if self.durable() {
            assert!(self.op_persisted <= self.journal.op());
        }
        self.extension.invariants(self.primary.is_some());
    }
}

impl<S: StateMachine> Replica<S, Skyros> {
    /// Skyros: the nilext requests this replica holds but has not executed.
    pub fn durability_log(&self) -> &crate::DurabilityLog {
        self.extension.durability_log()
    }
}

/// Writes `record` as the next in sequence: its completion (`Input::Persisted`) proves what
/// the pending record says. Shared by the replica and its extension (`Context::persist`).
pub(crate) fn persist_record(
    sequence_next: &mut u64,
    pending: &mut VecDeque<PendingRecord>,
    current_view: View,
    view_persisted: View,
    record: Record,
    effects: &mut Vec<Effect>,
) -> u64 {
    let sequence = *sequence_next;
    *sequence_next += 1;
    let (log, view) = match &record {
        Record::Entry(entry) => (
            LogMark::EndsAt {
                op: entry.op,
                view: entry.view,
            },
            current_view,
        ),
        Record::View { view } => (LogMark::Unchanged, *view),
        Record::Log {
            view,
            entries,
            truncate_after,
            ..
        } => match entries.last() {
            Some(last) => (
                LogMark::EndsAt {
                    op: last.op,
                    view: last.view,
                },
                *view,
            ),
            None => (LogMark::TruncatedAt(*truncate_after), *view),
        },
        Record::Checkpoint(checkpoint) => (LogMark::CheckpointAt(checkpoint.op), view_persisted),
        Record::Durable { .. } => (LogMark::Unchanged, view_persisted),
    };
    pending.push_back(PendingRecord {
        sequence,
        view,
        log,
    });
    effects.push(Effect::Persist { sequence, record });
    sequence
}

/// Whether a DoViewChange's entries run from its checkpoint to its op, in order, without a gap.
fn log_is_contiguous(message: &DoViewChange) -> bool {
    let first = message
        .log
        .first()
        .map_or(message.op.next(), |entry| entry.op);
    let last = message
        .log
        .last()
        .map_or(message.checkpoint_op, |entry| entry.op);
    first == message.checkpoint_op.next()
        && last == message.op
        && message
            .log
            .windows(2)
            .all(|pair| pair[1].op == pair[0].op.next())
}

fn empty_checkpoint() -> Checkpoint {
    Checkpoint {
        op: Op(0),
        state: Vec::new(),
        client_table: Vec::new(),
        executed_digest: 0,
    }
}

/// The replica a peer message claims to come from.
pub(crate) fn sender_of(message: &Message) -> Option<ReplicaIndex> {
    match message {
        Message::PrepareOk { replica, .. }
        | Message::StartViewChange { replica, .. }
        | Message::DoViewChange { replica, .. }
        | Message::GetState { replica, .. }
        | Message::NewState { replica, .. }
        | Message::Recovery { replica, .. }
        | Message::RecoveryResponse { replica, .. }
        | Message::ReadProbeOk { replica, .. }
        | Message::Part { replica, .. } => Some(*replica),
        _ => None,
    }
}
