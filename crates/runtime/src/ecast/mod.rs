//! The partitioned cluster's processes (`sequenced` mode, Crescando/RB §5–6): routers, storage
//! processes and the gateway inside each storage process, driving the pure `ecast` crate over
//! TCP exactly as the simulator's `--ecast` world drives it in memory.
//! `docs/internals/ecast-runtime.md` describes the processes, ports, message flow and failure
//! handling; `docs/internals/ecast.md` the protocol.
//!
//! | module | what |
//! |---|---|
//! | `admin` | a super process's client: VR requests to the routers (configuration, config messages), progress queries to storage processes |
//! | `checkpoint` | replicas' checkpoints serialised on the blocking pool, off the loop that owns them |
//! | `clients` | each gateway's RESP connections: CLIENT LIST/INFO/ID/KILL/NO-EVICT |
//! | `config` | the cluster file: routers, storage processes with ring positions, knobs |
//! | `durable` | disk durability: one write-ahead log per hosted replica, one writer thread per process (group commit) |
//! | `fault` | faults a real-process test injects (debug builds): a partition whose deliveries lag |
//! | `link` | the `Frame` every E-Cast message travels in, and one-way TCP links |
//! | `router` | a router process: VR replica of `RouterState`, forwarder, failure detector |
//! | `stats` | process-wide counters, logged per period under `TESSERA_ECAST_STATS_MS` (measurement only) |
//! | `storage` | a storage process: `Inbox` + `store::Store`, applying its share in order |
//! | `gateway` | RESP on every storage process, an `ecast::Sender` submitting to the routers |
//! | `partition_host` | a storage process of a `vr` cluster: one `vr::Replica<ecast::PartitionMachine<…>>` per partition it holds |
//! | `payload` | a command split into single-key sub-commands, shares, and the merge back; SQL payloads |
//! | `sql` | the PostgreSQL front end's backend on a storage process: statements through the gateway to the partition holding the tables |
//! | `pubsub` | SUBSCRIBE/PUBLISH/PUBSUB: each gateway's subscribers; PUBLISH reaches every storage process over the peer links |
//! | `scripting` | EVAL/EVALSHA/SCRIPT/FUNCTION: a script runs as a multi-key command over its declared keys (`script` crate), the per-gateway script cache |
//! | `transaction` | multi-key commands and MULTI/EXEC/WATCH across partitions: reserve every key, run on a scratch store, commit |

pub mod admin;
pub mod checkpoint;
pub mod clients;
pub mod config;
pub mod durable;
pub mod fault;
pub mod gateway;
pub mod link;
pub mod metrics;
pub mod partition_host;
pub mod payload;
pub mod pubsub;
pub mod read_jobs;
pub mod reclaim;
pub mod router;
pub mod scripting;
pub mod sql;
pub mod stats;
pub mod storage;
pub mod transaction;

use placement::ProcessId;

/// Storage process ids stay below this.
pub const STORAGE_ID_LIMIT: u64 = 1 << 30;
/// Set in every gateway's (and failure detector's) sender id, so that sender ids never collide
/// with storage process ids.
const GATEWAY_FLAG: u64 = 1 << 62;

/// A sender id for a gateway living in storage process `storage` (0: a router's failure
/// detector). `incarnation` differs on every start: a restarted gateway must not reuse its
/// predecessor's sequence numbers, which the routers remember.
pub fn gateway_sender(storage: ProcessId, incarnation: u64) -> ProcessId {
    assert!(storage.0 < STORAGE_ID_LIMIT);
    ProcessId(GATEWAY_FLAG | (storage.0 << 32) | (incarnation & 0xffff_ffff))
}

/// The storage process a gateway sender lives in (None for a failure detector or a foreign
/// id).
pub fn storage_of_sender(sender: ProcessId) -> Option<ProcessId> {
    if sender.0 & GATEWAY_FLAG == 0 {
        return None;
    }
    let storage = (sender.0 & !GATEWAY_FLAG) >> 32;
    (storage != 0).then_some(ProcessId(storage))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gateway_sender_names_its_storage_process_and_never_a_storage_id() {
        let sender = gateway_sender(ProcessId(5), u64::MAX);
        assert_eq!(storage_of_sender(sender), Some(ProcessId(5)));
        assert!(sender.0 >= STORAGE_ID_LIMIT);
        assert_eq!(storage_of_sender(gateway_sender(ProcessId(0), 7)), None);
        assert_eq!(storage_of_sender(ProcessId(5)), None);
    }
}
