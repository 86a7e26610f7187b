//! The partitioned cluster's pure data path, shared by the runtime (`runtime::ecast`, which
//! moves the bytes over TCP) and the simulator (which moves them over its simulated network):
//!
//! | module | what |
//! |---|---|
//! | `payload` | a command split into single-key sub-commands, shares, surveys and the merge back; SQL payloads |
//! | `partition_store` | a partition's data: `PartitionStore`, `ecast::PartitionData` over `store::Store` |
//! | `limits` | the most bytes one statement may send (below the frame limit) |
//! | `sql_route` | where a planned SQL statement goes: its partition keys, every partition, or one |
//! | `transaction_driver` | the gateway's rules for one interactive transaction (Sprint's edge server) as a pure state machine |
//!
//! Moved out of `runtime::ecast` (issue 18 item 4) so that the simulator hosts the same
//! partition state the storage processes host.

pub mod limits;
pub mod partition_store;
pub mod payload;
pub mod sql_route;
pub mod transaction_driver;
