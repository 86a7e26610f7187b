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
use vr::ClientId;

/// Storage process ids stay below this.
pub const STORAGE_ID_LIMIT: u64 = 1 << 30;
/// Set in every gateway's (and failure detector's) sender id, so that sender ids never collide
/// with storage process ids.
const GATEWAY_FLAG: u64 = 1 << 62;

/// An E-Cast sender of this runtime: a gateway (its `ecast::Sender`, and the client ids of its
/// bypass lanes), a router's failure detector or a super process. Its own type, so that the
/// compiler keeps a sender from being used as a storage process (issue 18 item 7): E-Cast and
/// the wire name senders with placement's `ProcessId` (the paper's application processes), and
/// the bypass lanes with VR's `ClientId`; `SenderId` converts to them where they are sent
/// (`process_id`, `client_id`) and is read back only through `from_process_id` /
/// `from_client_id`, which accept exactly the ids that carry the sender flag. The bits, and so
/// the wire format, are what `gateway_sender` always made: the flag (bit 62), the storage
/// process (bits 32–61; 0 for a failure detector or super process) and an incarnation (bits
/// 0–31).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SenderId(u64);

impl SenderId {
    /// A sender id for a gateway living in storage process `storage` (0: a router's failure
    /// detector or a super process). `incarnation` differs on every start: a restarted gateway
    /// must not reuse its predecessor's sequence numbers, which the routers remember.
    pub fn gateway(storage: ProcessId, incarnation: u64) -> SenderId {
        assert!(storage.0 < STORAGE_ID_LIMIT);
        SenderId(GATEWAY_FLAG | (storage.0 << 32) | (incarnation & 0xffff_ffff))
    }

    /// A sender id read from a message (E-Cast's sender field, a frame's): `None` unless it
    /// carries the sender flag (a storage process id never does).
    pub fn from_process_id(id: ProcessId) -> Option<SenderId> {
        SenderId::from_bits(id.0)
    }

    /// A bypass lane's client id read from a VR request: `None` unless it carries the flag.
    pub fn from_client_id(id: ClientId) -> Option<SenderId> {
        SenderId::from_bits(id.0)
    }

    fn from_bits(bits: u64) -> Option<SenderId> {
        (bits & GATEWAY_FLAG != 0).then_some(SenderId(bits))
    }

    /// The id as E-Cast (envelopes, the router state's senders) and the frames carry it.
    pub fn process_id(self) -> ProcessId {
        ProcessId(self.0)
    }

    /// The id as a VR client id (a bypass lane's, `client_base` and the lanes after it).
    pub fn client_id(self) -> ClientId {
        ClientId(self.0)
    }

    /// The storage process this sender lives in (`None` for a failure detector or a super
    /// process).
    pub fn storage(self) -> Option<ProcessId> {
        let storage = (self.0 & !GATEWAY_FLAG) >> 32;
        (storage != 0).then_some(ProcessId(storage))
    }
}

/// `SenderId::gateway`.
pub fn gateway_sender(storage: ProcessId, incarnation: u64) -> SenderId {
    SenderId::gateway(storage, incarnation)
}

/// The storage process a gateway sender lives in (None for a failure detector or a super
/// process).
pub fn storage_of_sender(sender: SenderId) -> Option<ProcessId> {
    sender.storage()
}

/// The storage process a sender named in a message lives in: `None` for an id that is not a
/// sender's (a storage process id, a foreign id) and for a failure detector or super process.
pub fn storage_of(sender: ProcessId) -> Option<ProcessId> {
    SenderId::from_process_id(sender).and_then(SenderId::storage)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gateway_sender_names_its_storage_process_and_never_a_storage_id() {
        let sender = gateway_sender(ProcessId(5), u64::MAX);
        assert_eq!(storage_of_sender(sender), Some(ProcessId(5)));
        assert!(sender.process_id().0 >= STORAGE_ID_LIMIT);
        assert_eq!(storage_of_sender(gateway_sender(ProcessId(0), 7)), None);
        // A storage process id read as a sender is none.
        assert_eq!(SenderId::from_process_id(ProcessId(5)), None);
        assert_eq!(storage_of(ProcessId(5)), None);
        assert_eq!(storage_of(sender.process_id()), Some(ProcessId(5)));
    }

    #[test]
    fn a_sender_id_round_trips_through_the_types_the_wire_carries() {
        for storage in [0, 1, 7, STORAGE_ID_LIMIT - 1] {
            for incarnation in [0, 1, 0xffff_0000, u64::MAX] {
                let sender = SenderId::gateway(ProcessId(storage), incarnation);
                assert_eq!(SenderId::from_process_id(sender.process_id()), Some(sender));
                assert_eq!(SenderId::from_client_id(sender.client_id()), Some(sender));
                let expected = (storage != 0).then_some(ProcessId(storage));
                assert_eq!(sender.storage(), expected);
                // The bits are those the wire always carried.
                let bits = (1 << 62) | (storage << 32) | (incarnation & 0xffff_ffff);
                assert_eq!(sender.process_id(), ProcessId(bits));
            }
        }
        // A lane's client id above the base (base + lane) names the same storage process.
        let base = SenderId::gateway(ProcessId(3), 0xabcd_0000).client_id();
        let lane = SenderId::from_client_id(ClientId(base.0 + 5)).unwrap();
        assert_eq!(lane.storage(), Some(ProcessId(3)));
        assert_eq!(SenderId::from_client_id(ClientId(12)), None);
    }
}
