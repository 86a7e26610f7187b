//! The replication interface: what a host (the runtime's partition host, the simulator) needs
//! of a replica of one group, whatever protocol replicates it.
//!
//! [`Replica`] implements it for every composition: VR (`Replica<S>`) and Skyros (`Replica<S,
//! Skyros>`, VR with the Skyros extension, `crate::Extension`); the runtime's partition
//! host and the simulator's partition groups are written against it, so that another protocol
//! (chain replication for Replex, PBFT for Callinicos) arrives as another implementation rather
//! than as flags inside `Replica`. The vocabulary is VR's for now: a replica takes an [`Input`]
//! (`Message` is VR's wire message) and emits [`Effect`]s, and is built from a [`Config`]; a
//! protocol with other messages extends `Message` (its variants are opaque to the host, which
//! only routes `Effect::Send` to a member and `Effect::Reply` to a client).

use crate::client_table::ClientTable;
use crate::config::Config;
use crate::durable::DurableState;
use crate::extension::Extension;
use crate::replica::{Effect, Input, Replica, ReplicaStats, StatusName};
use crate::state_machine::{RestoreError, StateMachine};
use wire::{Entry, Nonce, Op, ReplicaIndex, View};

/// One member of a replicated group, driven by `step`: pure (no I/O, no clock, no
/// randomness), so the runtime and the simulator drive the same code.
pub trait Replication {
    /// The state machine the group replicates.
    type Machine: StateMachine;

    /// A replica of a new group, taking part from the start.
    fn create(config: Config, index: ReplicaIndex, machine: Self::Machine) -> Self
    where
        Self: Sized;
    /// A `memory`-durability replica that restarted and lost its state: it recovers from its
    /// group (with `nonce`, fresh at every start) before taking part again.
    fn recovering(
        config: Config,
        index: ReplicaIndex,
        machine: Self::Machine,
        nonce: Nonce,
    ) -> Self
    where
        Self: Sized;
    /// A `disk`-durability replica restarted from its records.
    fn open(
        config: Config,
        index: ReplicaIndex,
        machine: Self::Machine,
        durable: DurableState,
    ) -> Result<Self, RestoreError>
    where
        Self: Sized;

    /// Reacts to one input, appending effects. Never performs I/O.
    fn step(&mut self, input: Input, effects: &mut Vec<Effect>);

    /// Its index in the group.
    fn index(&self) -> ReplicaIndex;
    /// Its current view (epoch of leadership).
    fn view(&self) -> View;
    /// The highest view it durably promised (its view, without disk durability).
    fn view_persisted(&self) -> View;
    fn status(&self) -> StatusName;
    /// Whether it is the primary (leader, head) of its view in normal status: the member a
    /// host feeds requests to.
    fn is_primary(&self) -> bool;
    /// The last op in its log.
    fn op(&self) -> Op;
    /// Every op up to this one is executed here.
    fn commit_min(&self) -> Op;
    /// Every op up to this one is known to be committed.
    fn commit_max(&self) -> Op;
    /// The entry at `op`, if its log still holds it (for the simulator's checkers).
    fn entry(&self, op: Op) -> Option<&Entry>;
    /// Its state machine, as of `commit_min`.
    fn state_machine(&self) -> &Self::Machine;
    /// The latest request executed per client and its result.
    fn client_table(&self) -> &ClientTable;
    /// Counters for observers.
    fn stats(&self) -> ReplicaStats;
    /// Hands the state machine the results of work it gave its host to run off the loop
    /// (`StateMachine::job_done`). Emits nothing: the host sends what the machine released.
    fn job_done(&mut self, job: u64, results: Vec<Vec<u8>>);
    /// Whether a read of `operation`'s keys may be answered now from its executed state with
    /// no round (`Replica::serves_unordered_read`).
    fn serves_unordered_read(&self, operation: &[u8]) -> bool;
}

impl<S: StateMachine, X: Extension<S>> Replication for Replica<S, X> {
    type Machine = S;

    fn create(config: Config, index: ReplicaIndex, machine: S) -> Self {
        Replica::new(config, index, machine)
    }
    fn recovering(config: Config, index: ReplicaIndex, machine: S, nonce: Nonce) -> Self {
        Replica::recovering(config, index, machine, nonce)
    }
    fn open(
        config: Config,
        index: ReplicaIndex,
        machine: S,
        durable: DurableState,
    ) -> Result<Self, RestoreError> {
        Replica::open(config, index, machine, durable)
    }
    fn step(&mut self, input: Input, effects: &mut Vec<Effect>) {
        Replica::step(self, input, effects)
    }
    fn index(&self) -> ReplicaIndex {
        Replica::index(self)
    }
    fn view(&self) -> View {
        Replica::view(self)
    }
    fn view_persisted(&self) -> View {
        Replica::view_persisted(self)
    }
    fn status(&self) -> StatusName {
        Replica::status(self)
    }
    fn is_primary(&self) -> bool {
        Replica::is_primary(self)
    }
    fn op(&self) -> Op {
        Replica::op(self)
    }
    fn commit_min(&self) -> Op {
        Replica::commit_min(self)
    }
    fn commit_max(&self) -> Op {
        Replica::commit_max(self)
    }
    fn entry(&self, op: Op) -> Option<&Entry> {
        self.journal().get(op)
    }
    fn state_machine(&self) -> &S {
        Replica::state_machine(self)
    }
    fn client_table(&self) -> &ClientTable {
        Replica::client_table(self)
    }
    fn stats(&self) -> ReplicaStats {
        Replica::stats(self)
    }
    fn job_done(&mut self, job: u64, results: Vec<Vec<u8>>) {
        Replica::job_done(self, job, results)
    }
    fn serves_unordered_read(&self, operation: &[u8]) -> bool {
        Replica::serves_unordered_read(self, operation)
    }
}
