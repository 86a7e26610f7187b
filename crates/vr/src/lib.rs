//! Viewstamped Replication as a pure state machine.
//!
//! The protocol is Liskov & Cowling, "Viewstamped Replication Revisited" (2012), with batching,
//! a read-index round for linearisable reads, checkpoints and two durability modes. A
//! [`Replica`] takes an [`Input`] (a message, a tick, a storage completion) and appends
//! [`Effect`]s (messages to send, records to persist, replies) to a caller-owned buffer. It
//! never touches a socket, a clock, a thread, a file or the OS random source, so the runtime and
//! the simulator drive the very same code. `docs/internals/vr.md` is the protocol's manual.
#![forbid(unsafe_code)]

mod adapt;
mod client_table;
mod config;
mod durability_log;
mod durable;
mod extension;
mod journal;
mod nilext_quorum;
mod parts;
mod quorum;
mod replica;
mod replication;
mod skyros;
mod state_machine;

pub use adapt::{Adapt, AdaptMode};
pub use client_table::ClientTable;
pub use config::{
    Canary, Config, ConfigError, Durability, Protocol, MESSAGE_BYTES_MAX_DEFAULT, MESSAGE_BYTES_MIN,
};
pub use durability_log::{
    recover, recovery_threshold, request_digest, supermajority, DurabilityLog,
};
pub use durable::{DurableState, Record};
pub use extension::{Context, Extension, NoExtension, ViewChangeVote};
pub use journal::Journal;
pub use nilext_quorum::NilextQuorum;
pub use parts::{message_bytes, PART_OVERHEAD_BYTES};
#[doc(hidden)]
pub use parts::{reassemble_for_bench, split_for_bench};
pub use quorum::{majority, replicas_tolerated};
pub use replica::{Effect, Input, Replica, ReplicaStats, StatusName};
pub use replication::Replication;
pub use skyros::Skyros;
pub use state_machine::{NilextGate, RestoreError, SnapshotSource, StateMachine};
pub use wire::{
    Checkpoint, ClientId, ClientTableEntry, DurabilityLogState, DurableRequest, Entry, Message,
    Nonce, Op, ReplicaIndex, Reply, Request, RequestKind, RequestNumber, View,
};
