//! Moved to the pure `cluster` crate (`cluster::payload`); re-exported here so that the
//! runtime's paths stay as they were.

pub use cluster::payload::*;
