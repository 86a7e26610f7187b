//! What a protocol composed with VR adds to it: the [`Extension`] hook set.
//!
//! A [`Replica<S, X>`](crate::Replica) runs Viewstamped Replication and calls its extension
//! `X` at a fixed set of points: when a request VR does not order itself arrives, when VR
//! queues a write or serves a read, when it executes a request, when it takes a checkpoint,
//! at a view change, in state transfer and recovery, and when a record is durable. VR is
//! `Replica<S>` (= `Replica<S, NoExtension>`, every hook a no-op); Skyros is
//! `Replica<S, Skyros>` (`crate::Skyros`, `docs/internals/skyros.md`).
//!
//! The hooks get what they need and no more: the state machine and client table to read,
//! or a [`Context`] — a handle on the replica's view, roles and progress (read-only), its
//! primary's in-flight table (read-only), the persist sequence (to write a record of its own)
//! and the effect buffer. An extension cannot reach the journal's tail, the batch or the
//! pipeline directly: it asks VR to order a request by returning it (`on_unordered_request`),
//! or to order everything pending before a read (`on_read`), and to append recovered
//! requests at a view start (`on_view_start`). VR does those itself after the hook returns,
//! so no hook runs while another is in progress (ordering can execute entries, which calls
//! `on_executing`/`on_executed`).

use crate::client_table::ClientTable;
use crate::config::{Config, Protocol};
use crate::durable::Record;
use crate::journal::Journal;
use crate::replica::{Effect, PendingRecord, ReplicaStats};
use crate::state_machine::StateMachine;
use std::collections::{BTreeMap, VecDeque};
use wire::{
    Checkpoint, ClientId, DurabilityLogState, DurableRequest, Op, ReplicaIndex, Request,
    RequestNumber, View,
};

/// One participant's DoViewChange, as the new primary hands it to `Extension::on_view_start`.
#[derive(Clone, Copy, Debug)]
pub struct ViewChangeVote<'a> {
    pub replica: ReplicaIndex,
    /// The view its log is from.
    pub log_view: View,
    /// What `Extension::view_change_payload` gave it to carry.
    pub payload: &'a [Request],
}

/// The hook set a protocol composed with VR implements. Every hook has a fixed call site in
/// `replica.rs`; the comments say where, and what VR guarantees (asserted) around it.
pub trait Extension<S: StateMachine>: Default {
    /// The `Config::protocol` this composition runs; a replica refuses a configuration that
    /// names another (the host picks the type by that field).
    const PROTOCOL: Protocol;

    /// The replica became the primary of its view in normal status (`primary` true), or
    /// stopped being one. Called in `become_primary`, `become_backup` and
    /// `become_view_change`.
    fn on_role(&mut self, primary: bool);

    /// A request of a kind VR does not order on arrival (`RequestKind::Nilext`,
    /// `RequestKind::Commutative`) reached a replica in normal status. Returns the request
    /// if the primary must now queue it on its batch (VR then records it in flight, batches
    /// it and may prepare); only a primary may return one.
    fn on_unordered_request(
        &mut self,
        cx: &mut Context<'_, S>,
        request: Request,
    ) -> Option<Request>;

    /// At the primary, a write that is not a duplicate of an executed one: whether the
    /// extension already holds it and answers it itself (VR then neither queues nor
    /// answers it).
    fn holds_write(&mut self, request: &Request) -> bool;

    /// At the primary: VR queued this write on its batch.
    fn on_write_queued(&mut self, state_machine: &S, request: &Request);

    /// At the primary: whether a read of `operation` may touch an update the extension
    /// completed but VR has not executed (then it may not be answered without a round).
    fn read_conflicts(&self, state_machine: &S, operation: &[u8]) -> bool;

    /// At the primary, a read that is not a resend: whether it must wait for every pending
    /// update to be ordered and executed (VR prepares its whole batch, past the pipeline
    /// limit, and serves the read once everything logged has executed).
    fn on_read(&mut self, state_machine: &S, operation: &[u8]) -> bool;

    /// Each request of an entry about to execute (duplicates included), before any runs.
    fn on_executing(&mut self, request: &Request);

    /// A request executed (recorded in the client table). Returns, for a request of an
    /// unordered kind at the primary, whether VR must reply to it (VR always replies to its
    /// own writes there).
    fn on_executed(&mut self, request: &Request, at_primary: bool) -> bool;

    /// What a checkpoint of the executed state carries for the extension
    /// (`Checkpoint::executed_digest`).
    fn executed_digest(&self) -> u64;

    /// The replica's state became this checkpoint's (state transfer, recovery).
    fn on_checkpoint_installed(&mut self, checkpoint: &Checkpoint);

    /// A `disk` replica opened: its checkpoint's digest and the extension's own records
    /// (`Record::Durable`) of its log view, after the checkpoint was restored.
    fn on_open(
        &mut self,
        state_machine: &S,
        client_table: &ClientTable,
        executed_digest: u64,
        records: Vec<DurableRequest>,
    );

    /// The replica's log became a newer view's log (`install_log`).
    fn on_log_view_changed(&mut self);

    /// What this replica's DoViewChange carries besides its log.
    fn view_change_payload(&self) -> Vec<Request>;

    /// At the new primary, once it installed the chosen log (whose view is
    /// `chosen_log_view`): merge the participants' payloads. Returns requests VR appends to
    /// the log as entries of the new view (so StartView carries them) and records in flight.
    fn on_view_start(
        &mut self,
        cx: &mut Context<'_, S>,
        votes: &[ViewChangeVote<'_>],
        chosen_log_view: View,
    ) -> Vec<Request>;

    /// What a NewState from this replica carries (`primary`: it is the view's primary).
    fn new_state_payload(&self, primary: bool) -> Option<DurabilityLogState>;

    /// A lagging backup installed its view's log from the primary's NewState, which carried
    /// this.
    fn on_new_state(&mut self, cx: &mut Context<'_, S>, payload: &DurabilityLogState);

    /// What a primary's RecoveryResponse carries.
    fn recovery_payload(&self) -> DurabilityLogState;

    /// A recovering replica took the primary's state, which carried this.
    fn on_recovered(&mut self, cx: &mut Context<'_, S>, payload: &DurabilityLogState);

    /// Every record up to `sequence` is durable (after VR's own bookkeeping).
    fn on_persisted(&mut self, sequence: u64, effects: &mut Vec<Effect>);

    /// Adds the extension's counters.
    fn stats(&self, stats: &mut ReplicaStats);

    /// Checked after every step (`primary`: the replica is its view's primary).
    fn invariants(&self, primary: bool);
}

/// Plain VR: no extension. Requests VR does not order are ignored (a VR client never sends
/// them), and every payload is empty.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoExtension;

impl<S: StateMachine> Extension<S> for NoExtension {
    const PROTOCOL: Protocol = Protocol::Vr;

    fn on_role(&mut self, _primary: bool) {}
    fn on_unordered_request(&mut self, _: &mut Context<'_, S>, _: Request) -> Option<Request> {
        None
    }
    fn holds_write(&mut self, _request: &Request) -> bool {
        false
    }
    fn on_write_queued(&mut self, _: &S, _: &Request) {}
    fn read_conflicts(&self, _: &S, _: &[u8]) -> bool {
        false
    }
    fn on_read(&mut self, _: &S, _: &[u8]) -> bool {
        false
    }
    fn on_executing(&mut self, _request: &Request) {}
    fn on_executed(&mut self, _request: &Request, _at_primary: bool) -> bool {
        false
    }
    fn executed_digest(&self) -> u64 {
        0
    }
    fn on_checkpoint_installed(&mut self, _checkpoint: &Checkpoint) {}
    fn on_open(&mut self, _: &S, _: &ClientTable, _: u64, _records: Vec<DurableRequest>) {}
    fn on_log_view_changed(&mut self) {}
    fn view_change_payload(&self) -> Vec<Request> {
        Vec::new()
    }
    fn on_view_start(
        &mut self,
        _: &mut Context<'_, S>,
        _: &[ViewChangeVote<'_>],
        _: View,
    ) -> Vec<Request> {
        Vec::new()
    }
    fn new_state_payload(&self, _primary: bool) -> Option<DurabilityLogState> {
        None
    }
    fn on_new_state(&mut self, _: &mut Context<'_, S>, _: &DurabilityLogState) {}
    fn recovery_payload(&self) -> DurabilityLogState {
        DurabilityLogState {
            entries: Vec::new(),
        }
    }
    fn on_recovered(&mut self, _: &mut Context<'_, S>, _: &DurabilityLogState) {}
    fn on_persisted(&mut self, _sequence: u64, _effects: &mut Vec<Effect>) {}
    fn stats(&self, _stats: &mut ReplicaStats) {}
    fn invariants(&self, _primary: bool) {}
}

/// The primary's state an extension may read.
pub(crate) struct PrimaryView<'a> {
    pub(crate) in_flight: &'a BTreeMap<ClientId, RequestNumber>,
    pub(crate) view_start_op: Op,
}

/// The replica's persist sequence, for an extension's own records.
pub(crate) struct Persister<'a> {
    pub(crate) durable: bool,
    pub(crate) sequence_next: &'a mut u64,
    pub(crate) pending: &'a mut VecDeque<PendingRecord>,
    pub(crate) view_persisted: View,
}

/// A hook's handle on its replica: read access to the view, role and progress, the primary's
/// in-flight table, the journal, the state machine and client table; a record of the
/// extension's own to persist; the effect buffer. Built by `replica.rs` from disjoint
/// borrows of the replica's fields, so the extension never holds `&mut Replica`.
pub struct Context<'a, S> {
    pub(crate) config: &'a Config,
    pub(crate) index: ReplicaIndex,
    pub(crate) view: View,
    pub(crate) log_view: View,
    pub(crate) commit_min: Op,
    pub(crate) journal: &'a Journal,
    pub(crate) state_machine: &'a S,
    pub(crate) client_table: &'a ClientTable,
    pub(crate) primary: Option<PrimaryView<'a>>,
    pub(crate) persister: Persister<'a>,
    pub(crate) effects: &'a mut Vec<Effect>,
}

impl<S> Context<'_, S> {
    pub fn config(&self) -> &Config {
        self.config
    }
    pub fn index(&self) -> ReplicaIndex {
        self.index
    }
    pub fn view(&self) -> View {
        self.view
    }
    /// The view of the replica's log (VRR's last normal view).
    pub fn log_view(&self) -> View {
        self.log_view
    }
    /// Every op up to this one is executed.
    pub fn commit_min(&self) -> Op {
        self.commit_min
    }
    pub fn journal(&self) -> &Journal {
        self.journal
    }
    pub fn state_machine(&self) -> &S {
        self.state_machine
    }
    pub fn client_table(&self) -> &ClientTable {
        self.client_table
    }
    /// Whether the replica is its view's primary in normal status.
    pub fn is_primary(&self) -> bool {
        self.primary.is_some()
    }
    /// At the primary: the op its view started at (ops up to it may have committed in an
    /// older view).
    pub fn view_start_op(&self) -> Option<Op> {
        self.primary.as_ref().map(|primary| primary.view_start_op)
    }
    /// At the primary: whether `client`'s request `request` (or a later one) is queued or
    /// prepared but not executed.
    pub fn in_flight(&self, client: ClientId, request: RequestNumber) -> bool {
        self.primary.as_ref().is_some_and(|primary| {
            primary
                .in_flight
                .get(&client)
                .is_some_and(|in_flight| request <= *in_flight)
        })
    }
    /// Whether the replica persists records (`disk` durability).
    pub fn durable(&self) -> bool {
        self.persister.durable
    }
    /// The sequence number the next persisted record gets.
    pub fn persist_sequence_next(&self) -> u64 {
        *self.persister.sequence_next
    }
    /// Persists one of the extension's records (`disk` durability only); returns its
    /// sequence number (`on_persisted` reports it durable).
    pub fn persist(&mut self, view: View, entry: DurableRequest) -> u64 {
        assert!(self.persister.durable, "only a disk replica persists");
        let record = Record::Durable { view, entry };
        crate::replica::persist_record(
            self.persister.sequence_next,
            self.persister.pending,
            self.view,
            self.persister.view_persisted,
            record,
            self.effects,
        )
    }
    /// Emits an effect (a message to a client).
    pub fn push(&mut self, effect: Effect) {
        self.effects.push(effect);
    }
}
