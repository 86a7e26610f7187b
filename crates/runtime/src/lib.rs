//! Tessera's runtime: the thin driver that runs the pure protocols in real processes.
//!
//! A cluster is a router group and storage processes (`ecast`): each process reads sockets and
//! the clock, steps its pure state machines (`vr::Replica`s of the router group and of the
//! partition groups it hosts, `ecast::Gateway`), and executes their effects: frames to peers
//! (`ecast::link`), write-ahead logs (`ecast::durable`, on a writer thread), replies to RESP and
//! PostgreSQL clients (`ecast::gateway`, `pg`). It adds no protocol logic of its own.

pub mod ecast;
pub mod log;
pub mod os;
pub mod pg;
pub mod resp_codec;
pub mod security;
pub mod sql_backend;
pub use store;
