//! Tessera's runtime: the thin driver that runs the pure protocol in real processes.
//!
//! It reads sockets and the clock, calls `Replica::step`, and executes the effects: TCP to peers
//! (`peer`), the write-ahead log (`wal` crate, on its own thread), replies to RESP clients
//! (`gateway`). It adds no protocol logic of its own.

pub mod config;
pub mod ecast;
pub mod gateway;
pub mod log;
pub mod node;
pub mod peer;
pub mod pg;
pub mod resp_codec;
pub mod security;
pub mod sql_backend;
pub use store;
