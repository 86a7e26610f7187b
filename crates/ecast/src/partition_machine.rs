//! `PartitionMachine`: the `vr::StateMachine` of a partition with its own log (`vr` partition
//! mode), wrapping `Partition`'s rules around the application's data, with deferred replies
//! for held operations (`docs/internals/ecast.md`, "The bypass as built").
//!
//! `vr::StateMachine::apply` must answer every log entry at once, but a held single-partition
//! operation executes later, when a watermark or an admission releases it. So:
//!
//! - its entry is answered `PartitionResult::Held`, and VR's client table remembers that;
//! - when it executes, its result goes to the machine's per-client result table (one slot per
//!   client: its last request number and result, as VR's client table) and to the *released
//!   queue*, numbered from 1; admitted multi-partition shares' answers go there too;
//! - the primary's driver reads the queue through `released_after(n)` (VR gives drivers read
//!   access to the state machine only) after every step and sends each reply, remembering the
//!   last number it sent; a new primary's driver starts from the oldest retained entry
//!   (duplicates are harmless: clients match replies by request number). Backups ignore it;
//! - a client whose reply was lost retries, gets `Held` again from VR's client table, and then
//!   asks `Query::Result { client, number }` on VR's read path.
//!
//! Everything here is replicated state: every replica builds the same tables and queue.

use crate::partition::{
    KeySet, OperationId, Partition, PartitionEntry, PartitionEvent, PartitionSettings,
};
use crate::partition_keyspace::PartitionCut;
use crate::types::{ReadRefusal, Sequence, Timestamp};
use placement::{ConfigVersion, Position, PositionSet, ProcessId};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use wire::{ClientId, RequestNumber};

/// The encoding's version: the first byte of every operation and result.
pub const PARTITION_FORMAT_VERSION: u8 = 1;

/// The application's data in a partition.
/// `Clone` and thread-safe so that a checkpoint can copy the data on the replica's loop and
/// serialise the copy on another thread (`vr::StateMachine::snapshot_source`); a clone should
/// share what it can (copy-on-write).
pub trait PartitionData: Clone + Send + Sync + 'static {
    /// The keys an operation (single-partition, or a multi-partition share) touches;
    /// `KeySet::Unknown` when it cannot tell (e.g. the bytes do not decode).
    fn keys(&self, operation: &[u8]) -> KeySet;
    /// Executes an operation and returns its result. Must not panic on any bytes.
    fn execute(&mut self, operation: &[u8]) -> Vec<u8>;
    /// The ring position of a key (a keyspace cut's holdings check).
    fn position(&self, key: &[u8]) -> Position;
    /// The records of every key whose position lies in `range`, encoded for `import` (the copy
    /// a keyspace cut sends).
    fn export(&self, range: &PositionSet) -> Vec<u8>;
    /// Inserts or overwrites the records `export` encoded. Must not panic on any bytes.
    fn import(&mut self, records: &[u8]);
    /// Drops every key whose position lies outside `holds`.
    fn retain(&mut self, holds: &PositionSet);
    /// Skyros-Comm: what `execute(operation)` would return now, without changing anything;
    /// `None` when it cannot tell (the write then takes two round trips). Must not panic on
    /// any bytes.
    fn preview(&self, operation: &[u8]) -> Option<Vec<u8>> {
        let _ = operation;
        None
    }

    /// §6.7 basic reads (`PartitionMachine::basic_read`): the result `execute(operation)`
    /// would return now if `operation` only reads, without changing anything; `None` when it
    /// is not such a read or may not be answered from the state as it is (a write, a survey of
    /// every key, bytes that do not decode; for `cluster::PartitionStore`, SQL not pinned to
    /// keys held here, under a stale catalog guard, or of a table an open transaction writes
    /// in place): the read is then refused and goes through the log. By default, never. Must not panic on any
    /// bytes.
    fn read(&self, operation: &[u8]) -> Option<Vec<u8>> {
        let _ = operation;
        None
    }

    /// Whether the data would execute a single-partition operation as it is, whatever runs
    /// before it: the nilext gate acknowledges a write early only then. `false` when the data
    /// would refuse it now (a key held by a multi-key command in progress); by default, always.
    fn executes_as_is(&self, _operation: &[u8]) -> bool {
        true
    }

    /// Whether the machine may put off executing `operation` to run it with the batchable
    /// operations next to it as one `execute_batch` (`PartitionMachine`'s `apply_batch`). Such
    /// an operation's execution must change nothing `keys` and `position` answer, and its
    /// result must depend only on the data: the machine then runs a log entry's batchable
    /// executions at the first other use of the data (another operation's execution, a cut's
    /// copy, an install) or at the entry's end, in their order. By default, none.
    fn batchable(&self, operation: &[u8]) -> bool {
        let _ = operation;
        false
    }

    /// Whether `operation` is batchable (`batchable`) and its execution changes nothing (the
    /// data's snapshot and every later result are the same whether it ran), so that the
    /// machine may run it on a copy of the data taken at its place in the log, off the
    /// replica's loop (`PartitionMachineSettings::read_jobs`; `docs/internals/scans.md`,
    /// "Built: read-only log ops off the loop"). Must depend only on the operation's bytes.
    /// By default, none.
    fn reads_only(&self, operation: &[u8]) -> bool {
        let _ = operation;
        false
    }

    /// Grants at the partition (`docs/internals/sprint.md`, "Grants at the partition"): after
    /// `execute(operation)`, `Some(ticket)` if the execution *parked* the operation: the
    /// result it returned (a refusal) is not final, and the data answers it later, under the
    /// ticket, through `answered` (run when its turn came, or let go with a refusal). The
    /// machine then defers the reply of a single-partition operation (`Held`, then a
    /// release); a share's answer cannot wait (the message's other partitions answer at
    /// admission), so the machine lets it go (`let_go`) and its refusal stands. By default,
    /// never.
    fn parked(&mut self) -> Option<u64> {
        None
    }

    /// Lets go of the operation parked under `ticket` without an answer (its refusal was
    /// answered at once).
    fn let_go(&mut self, ticket: u64) {
        let _ = ticket;
    }

    /// Parked operations answered since last asked (by any execution, cut, install or
    /// retain), in order: (ticket, result). Tickets are the data's replicated state, given in
    /// log order, so every replica answers the same ones at the same op. By default, none.
    fn answered(&mut self) -> Vec<(u64, Vec<u8>)> {
        Vec::new()
    }

    /// Executes operations one after another, as `execute` on each in order would (the same
    /// results, the same state after), sharing work between them (a SQL partition runs
    /// consecutive statements as one shared scan cycle). The default executes each. Must not
    /// panic on any bytes.
    fn execute_batch(&mut self, operations: &[Vec<u8>]) -> Vec<Vec<u8>> {
        operations
            .iter()
            .map(|operation| self.execute(operation))
            .collect()
    }
}

/// One share of a router delivery, as the primary appends it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Share {
    pub timestamp: Timestamp,
    pub previous: Timestamp,
    /// Who to answer (the message's sender and its sequence number).
    pub sender: ProcessId,
    pub sequence: Sequence,
    /// This partition's part of the message.
    #[serde(with = "wire::bytes")]
    pub operation: Vec<u8>,
}

/// A partition op: the bytes of a VR request. Wire enum: variants never renumber.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PartitionOperation {
    /// 0. A single-partition operation from the bypass. `client` and `number` are the VR
    ///    client's id and request number.
    Single {
        client: ClientId,
        number: RequestNumber,
        #[serde(with = "wire::bytes")]
        operation: Vec<u8>,
    },
    /// 1. Router deliveries the primary received (in any order; the chain is checked here).
    Deliveries(Vec<Share>),
    /// 2. The router group's stable watermark.
    Watermark(Timestamp),
    /// 3. A read-only question (VR's read path).
    Query(PartitionQuery),
    /// 4. Test-only (the `PerMessageHold` canary): one message is stable. Ignored otherwise.
    #[doc(hidden)]
    MessageStable(Timestamp),
    /// 5. An accepted keyspace message K's delivery (its share carries no operation) and this
    ///    group's cut (`partition_keyspace`): logged in the chain like a share touching every
    ///    key.
    Cut { share: Share, cut: PartitionCut },
    /// 6. The copy group `from` captured at its cut of `version` (`export`'s records).
    Install {
        version: ConfigVersion,
        from: ProcessId,
        #[serde(with = "wire::bytes")]
        records: Vec<u8>,
    },
    /// 7. Group `to` installed this group's copy of `version`: it need not be kept.
    Installed {
        version: ConfigVersion,
        to: ProcessId,
    },
    /// 8. The bytes at `offset` of the copy group `from` captured at its cut of `version`,
    ///    `total` bytes in all: a copy is logged in parts of bounded size (every VR operation,
    ///    hence every `Prepare` frame, stays far below the link's frame limit), in order, and
    ///    installed (imported at once) with its last part (`docs/internals/rubberband.md`,
    ///    "Copies in bounded parts"). The primary's duty splits a copy at fixed offsets
    ///    (`install_parts`), so the parts a new primary logs again are the same bytes.
    InstallPart {
        version: ConfigVersion,
        from: ProcessId,
        offset: u64,
        total: u64,
        #[serde(with = "wire::bytes")]
        bytes: Vec<u8>,
    },
    /// 9. A snapshot read at `at` from the bypass (`client`, `number` as for `Single`):
    ///    executed at this partition's point for `at` (`Partition`'s `Snapshot` entry: after
    ///    every multi-partition message up to `at`, before any later one), answered
    ///    `Executed` or `Held` as a single-partition operation is, or `SnapshotPassed`.
    ///    `operation` must only read (`docs/internals/ecast.md`, "Snapshot reads of partition
    ///    groups").
    Snapshot {
        client: ClientId,
        number: RequestNumber,
        at: Timestamp,
        #[serde(with = "wire::bytes")]
        operation: Vec<u8>,
    },
}

/// A copy's parts, split at every `part_bytes` bytes (at least one part, the last possibly
/// shorter; an empty copy is one empty part): what the primary's duty logs as `InstallPart`s.
pub fn install_parts(
    version: ConfigVersion,
    from: ProcessId,
    records: &[u8],
    part_bytes: usize,
) -> Vec<PartitionOperation> {
    assert!(part_bytes > 0, "a part holds bytes");
    let total = records.len() as u64;
    let mut parts: Vec<PartitionOperation> = records
        .chunks(part_bytes)
        .enumerate()
        .map(|(index, bytes)| PartitionOperation::InstallPart {
            version,
            from,
            offset: (index * part_bytes) as u64,
            total,
            bytes: bytes.to_vec(),
        })
        .collect();
    if parts.is_empty() {
        parts.push(PartitionOperation::InstallPart {
            version,
            from,
            offset: 0,
            total: 0,
            bytes: Vec::new(),
        });
    }
    debug_assert_eq!(parts.len(), records.len().div_ceil(part_bytes).max(1));
    parts
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PartitionQuery {
    /// 0. The result of a client's single-partition operation, if it is the client's last.
    Result {
        client: ClientId,
        number: RequestNumber,
    },
    /// 1. The answer of an admitted share (while retained).
    Answer { timestamp: Timestamp },
    /// 2. The admitted prefix and the logged watermark.
    Progress,
}

/// A partition op's result. Wire enum: variants never renumber.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PartitionResult {
    /// 0. The operation executed: its result.
    Executed(#[serde(with = "wire::bytes")] Vec<u8>),
    /// 1. The operation is held; its result will be released (and then answered by a
    ///    `Result` query).
    Held,
    /// 2. Deliveries or a watermark were logged; every message up to `admitted` is admitted.
    Logged { admitted: Timestamp },
    /// 3. `Progress`.
    Progress {
        admitted: Timestamp,
        watermark: Timestamp,
    },
    /// 4. A query about something not (or no longer) remembered, or too many entries wait.
    Unknown,
    /// 5. The op was not understood; nothing changed.
    Error(String),
    /// 6. The single-partition operation touches keys this group no longer holds (a keyspace
    ///    cut moved them): it did not execute; the client re-plans.
    Moved,
    /// 7. The `Install` is installed (now or before): acknowledge it to its sender.
    Installed,
    /// 8. The `InstallPart` is logged (now or before): `received` bytes of the copy are, the
    ///    copy is not installed yet.
    PartLogged { received: u64 },
    /// 9. The `Snapshot` read did not execute: a multi-partition message later than its
    ///    timestamp (`executed`, the latest) had already executed here. Nothing changed; the
    ///    gateway asks the router for a fresh timestamp and sends the read again.
    SnapshotPassed { executed: Timestamp },
}

/// A reply to send (by the primary's driver).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Released {
    /// A held single-partition operation executed.
    Single {
        client: ClientId,
        number: RequestNumber,
        #[serde(with = "wire::bytes")]
        result: Vec<u8>,
    },
    /// A share was admitted: its answer to the message's sender.
    Answer {
        sender: ProcessId,
        sequence: Sequence,
        timestamp: Timestamp,
        #[serde(with = "wire::bytes")]
        result: Vec<u8>,
    },
    /// A held single-partition operation reached its turn after a keyspace cut moved its keys:
    /// it did not execute (`PartitionResult::Moved`).
    Moved {
        client: ClientId,
        number: RequestNumber,
    },
}

/// Bounds on the replicated tables.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionMachineSettings {
    pub rules: PartitionSettings,
    /// Released replies retained (older ones are dropped; clients ask `Result`).
    pub released_retained: usize,
    /// Share answers retained for `Answer` queries.
    pub answers_retained: usize,
    /// Test-only canary: a group that receives copies at a keyspace cut executes what follows
    /// at once instead of waiting for its installs.
    #[doc(hidden)]
    pub act_before_install: bool,
    /// Test-only canary: a group executes single-partition operations on keys a keyspace cut
    /// moved away (no `Moved`).
    #[doc(hidden)]
    pub ignore_holdings: bool,
    /// Test-only canary: a `skyros` group's nilext gate ignores keyspace cuts (G3 of
    /// `docs/internals/ecast.md`, "Skyros partitions"): a nilext write to a key the group gave
    /// away, or one arriving while copies install, is acknowledged before it is ordered.
    #[doc(hidden)]
    pub gate_ignores_cuts: bool,
    /// Read-only statements (`PartitionData::reads_only`) that `apply_batch` would execute
    /// are handed out as read jobs instead (`PartitionMachine::jobs`): the host runs them off
    /// its loop and hands back the results (`vr::StateMachine::job_done`). A host setting,
    /// the same on every replica of a group: not in snapshots (`restore` keeps this replica's).
    #[serde(skip)]
    pub read_jobs: bool,
    /// Test-only canary: a read job's results are computed again from the data as it is when
    /// they come back (the live state, not the copy at the job's place in the log).
    #[doc(hidden)]
    #[serde(skip)]
    pub job_reads_live: bool,
}

impl Default for PartitionMachineSettings {
    fn default() -> PartitionMachineSettings {
        PartitionMachineSettings {
            rules: PartitionSettings::default(),
            released_retained: 4096,
            answers_retained: 4096,
            act_before_install: false,
            ignore_holdings: false,
            gate_ignores_cuts: false,
            read_jobs: false,
            job_reads_live: false,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionMachine<D> {
    settings: PartitionMachineSettings,
    rules: Partition,
    data: D,
    /// Per client: its last single-partition request number and, once executed, the result.
    results: BTreeMap<ClientId, (RequestNumber, Option<Vec<u8>>)>,
    /// Snapshot reads logged and not executed yet. A snapshot read carries the whole payload of
    /// a read over several groups (each executes its own share, as for basic reads), so it is
    /// answered `Moved` only if the group holds none of its keys; a part the group no longer
    /// holds is missing from its answer and the gateway serves the read sequentially instead.
    /// Not replicated state (a replica restored while one is held answers it `Moved`: the
    /// same safe fallback).
    #[serde(skip)]
    snapshot_reads: BTreeSet<OperationId>,
    /// Share answers by timestamp (the newest `answers_retained`).
    answers: BTreeMap<Timestamp, Vec<u8>>,
    /// Shares' reply addresses until admitted.
    reply_to: BTreeMap<Timestamp, (ProcessId, Sequence)>,
    /// The released queue: (number, reply), consecutive numbers, the newest
    /// `released_retained`.
    released: VecDeque<(u64, Released)>,
    released_next: u64,
    /// Keyspace (`partition_keyspace`): the positions this group holds (`None`: every key,
    /// until its first cut or `with_holdings`).
    holds: Option<PositionSet>,
    /// The version of the last cut executed.
    version: ConfigVersion,
    /// Logged cuts not executed yet, by their message's timestamp.
    cuts: BTreeMap<Timestamp, PartitionCut>,
    /// The groups whose copy of the last cut is not installed yet.
    installing: BTreeSet<ProcessId>,
    /// Executions waiting for `installing` to empty, in log order.
    deferred: VecDeque<Deferred>,
    /// Captured copies until acknowledged: (version, receiver) → records.
    outgoing: BTreeMap<(ConfigVersion, ProcessId), Vec<u8>>,
    /// Copies being logged in parts (`InstallPart`), by (version, sender): the copy's total
    /// length and the bytes of its parts so far, in order. Only for the last cut's version and
    /// a sender in `installing`; removed when the last part installs the copy.
    receiving: BTreeMap<(ConfigVersion, ProcessId), Receiving>,
    /// Per client: its last request number if that operation was answered `Moved`.
    moved: BTreeMap<ClientId, RequestNumber>,
    /// Single-partition operations the data parked (`PartitionData::parked`), by ticket: each
    /// was answered `Held` (or not released), and its result is released when the data
    /// answers the ticket (`collect_answered`).
    parked: BTreeMap<u64, OperationId>,
    /// While `apply_batch` runs: the executions put off to run as one batch. `None` outside
    /// it, so never in a snapshot or a comparison.
    #[serde(skip)]
    batching: Option<Batching>,
    /// Read jobs handed out and not done, by number (`PartitionMachineSettings::read_jobs`).
    /// Not replicated state: a snapshot runs those still open itself (`snapshot`), so that
    /// every replica's snapshot at an op is complete whatever its jobs' progress.
    #[serde(skip, default = "BTreeMap::new")]
    jobs: BTreeMap<u64, ReadJob<D>>,
    /// The next job's number (kept by `restore`: a job of the state replaced never matches a
    /// later one).
    #[serde(skip, default = "first_job")]
    job_next: u64,
    /// Counts the changes made to `data` on this replica (every call that may change it;
    /// kept and advanced by `restore`): two read jobs of this replica with the same generation
    /// read the same data, so a host may run them as one batch (`ReadJob::run_together`). Not
    /// replicated state.
    #[serde(skip)]
    generation: u64,
    /// Since the last read job was handed out: the batched writes that changed the data
    /// (`flush`'s write runs), unless something else changed it too (`None`: a chain cannot
    /// pass over it). The next job carries them (`ReadJob::preceding`). Not replicated state.
    #[serde(skip)]
    writes_since_job: Option<WritesSince>,
    /// Released numbers whose result an open job still computes: `released_after` stops
    /// before the first (a reply is sent only once its job is done).
    #[serde(skip)]
    pending_released: BTreeSet<u64>,
    /// Share answers an open job still computes: a `PartitionQuery::Answer` read of one is
    /// answered `Held`.
    #[serde(skip)]
    pending_answers: BTreeSet<Timestamp>,
}

fn first_job() -> u64 {
    1
}

/// Read-only executions put off past their log entry (`PartitionMachineSettings::read_jobs`):
/// a copy of the data at their place in the log (the state after every op before them; a
/// clone shares the tables, copy-on-write), the operations, and where each result goes (as
/// `Batching`'s sinks; a single-partition operation's own reply became a release).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadJob<D> {
    data: D,
    /// The machine's `generation` when the job was handed out.
    generation: u64,
    /// When the data changed since the replica's previous job only by batched writes: that
    /// job's generation and those writes, in order (`run_together` passes over them).
    preceding: Option<WritesSince>,
    operations: Vec<Vec<u8>>,
    sinks: Vec<Sink>,
}

/// The batched writes between two read jobs of one replica (`ReadJob::preceding`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct WritesSince {
    /// The earlier job's generation.
    pub generation: u64,
    pub writes: Vec<Vec<u8>>,
    /// Their encoded size: past `WRITES_SINCE_BYTES_MAX` the chain is cut instead.
    pub bytes: usize,
}

/// The most bytes of batched writes a read job carries for a chain (`ReadJob::preceding`):
/// past it, the writes are forgotten and the job starts a new chain.
pub const WRITES_SINCE_BYTES_MAX: usize = 1 << 20;

impl<D: PartitionData> ReadJob<D> {
    /// Runs the job's reads, on any thread: their results in order, as executing them on the
    /// data at their place in the log would have returned.
    pub fn run(&self) -> Vec<Vec<u8>> {
        let mut data = self.data.clone();
        let results = data.execute_batch(&self.operations);
        assert_eq!(results.len(), self.operations.len(), "one result each");
        results
    }

    /// Whether `next`, a later job of the same replica, reads what this job reads after
    /// nothing or only batched writes (`chains_to`'s writes), so the two can share one batch.
    pub fn chains_to(&self, next: &ReadJob<D>) -> bool {
        next.generation == self.generation
            || next
                .preceding
                .as_ref()
                .is_some_and(|preceding| preceding.generation == self.generation)
    }

    /// Runs a chain of one replica's jobs (each `chains_to` the next) as one batch: one
    /// engine cycle for all their reads and the batched writes between them, on the first
    /// job's copy, each read at its place among the writes (as Crescando's scan answers each
    /// query after the updates that arrived before it). Each job's results come back as its
    /// own `run` would have returned them; the writes' results are dropped (the loop ran them).
    pub fn run_together(jobs: &[&ReadJob<D>]) -> Vec<Vec<Vec<u8>>> {
        let Some(first) = jobs.first() else {
            return Vec::new();
        };
        if jobs.len() == 1 {
            return vec![first.run()];
        }
        // (operation, the job whose result it is, if a read).
        let mut operations: Vec<Vec<u8>> = Vec::new();
        let mut owners: Vec<Option<usize>> = Vec::new();
        for (at, job) in jobs.iter().enumerate() {
            if at > 0 {
                let before = jobs[at - 1];
                assert!(before.chains_to(job), "jobs run together form a chain");
                if job.generation != before.generation {
                    let preceding = job.preceding.as_ref().expect("a link over writes");
                    operations.extend(preceding.writes.iter().cloned());
                    owners.extend(preceding.writes.iter().map(|_| None));
                }
            }
            operations.extend(job.operations.iter().cloned());
            owners.extend(job.operations.iter().map(|_| Some(at)));
        }
        let results = first.data.clone().execute_batch(&operations);
        assert_eq!(results.len(), operations.len(), "one result each");
        let mut split: Vec<Vec<Vec<u8>>> = jobs
            .iter()
            .map(|job| Vec::with_capacity(job.len()))
            .collect();
        for (owner, result) in owners.into_iter().zip(results) {
            if let Some(owner) = owner {
                split[owner].push(result);
            }
        }
        debug_assert!(split
            .iter()
            .zip(jobs)
            .all(|(results, job)| results.len() == job.operations.len()));
        split
    }

    /// The machine's data generation the job reads (`chains_to`): equal generations of one
    /// replica's jobs mean equal data.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// How many operations the job reads.
    pub fn len(&self) -> usize {
        self.operations.len()
    }

    pub fn is_empty(&self) -> bool {
        self.operations.is_empty()
    }
}

/// The executions of a log entry put off by `apply_batch` (`PartitionData::batchable`), in
/// order, and where each one's result goes once it has run: every place `execute_single` and
/// `execute_multi` put a result gets a placeholder now and the result at the flush, unless
/// something after it replaced or dropped that place (as it would have replaced or dropped
/// the result itself).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Batching {
    /// The entry's request being applied (its index in the entry).
    request: usize,
    operations: Vec<Vec<u8>>,
    sinks: Vec<Sink>,
    /// Results of the entry's requests that are put-off executions, by request index.
    own: BTreeMap<usize, Vec<u8>>,
    /// The entry's requests whose execution became a read job: answered `Held`, their
    /// result released when the job is done.
    held: BTreeSet<usize>,
}

/// Where a put-off execution's result goes.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Sink {
    /// A single-partition operation's. `record`: it goes to `results` (the client's last
    /// request when it executed); `own`: it is the reply of the entry's request `request`;
    /// otherwise it went to the released queue at number `released`.
    Single {
        id: OperationId,
        record: bool,
        own: Option<usize>,
        released: Option<u64>,
    },
    /// A share's answer (`answers`), released at number `released` if it had a reply address.
    Multi {
        timestamp: Timestamp,
        released: Option<u64>,
    },
}

/// A copy being received in parts (`PartitionMachine::receiving`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Receiving {
    total: u64,
    #[serde(with = "wire::bytes")]
    bytes: Vec<u8>,
}

/// An execution the rules decided while the group waits for installs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Deferred {
    Single {
        id: OperationId,
        #[serde(with = "wire::bytes")]
        operation: Vec<u8>,
    },
    Multi {
        timestamp: Timestamp,
        #[serde(with = "wire::bytes")]
        operation: Vec<u8>,
    },
}

/// What became of the single-partition operation of the entry being fed.
enum Own {
    Executed(Vec<u8>),
    Moved,
    /// A snapshot read refused at once (`PartitionResult::SnapshotPassed`).
    Passed(Timestamp),
    /// Executes later (waits for installs); its reply goes through the released queue.
    Deferred,
    /// Executed and parked by the data (`PartitionData::parked`): answered `Held`, its
    /// result released when its grant comes.
    Parked,
}

fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let mut bytes = vec![PARTITION_FORMAT_VERSION];
    bytes.extend(postcard::to_allocvec(value).expect("partition types serialise"));
    bytes
}

fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    match bytes.split_first() {
        None => Err("empty".to_string()),
        Some((&PARTITION_FORMAT_VERSION, rest)) => {
            postcard::from_bytes(rest).map_err(|error| error.to_string())
        }
        Some((version, _)) => Err(format!("unknown format {version}")),
    }
}

impl PartitionOperation {
    pub fn encode(&self) -> Vec<u8> {
        encode(self)
    }

    pub fn decode(bytes: &[u8]) -> Result<PartitionOperation, String> {
        decode(bytes)
    }
}

impl PartitionResult {
    pub fn encode(&self) -> Vec<u8> {
        encode(self)
    }

    /// Bytes that are not a result decode to `Error`.
    pub fn decode(bytes: &[u8]) -> PartitionResult {
        decode(bytes).unwrap_or_else(PartitionResult::Error)
    }
}

impl<D: PartitionData> PartitionMachine<D> {
    pub fn new(data: D, settings: PartitionMachineSettings) -> PartitionMachine<D> {
        assert!(settings.released_retained > 0);
        PartitionMachine {
            rules: Partition::new(settings.rules.clone()),
            settings,
            data,
            results: BTreeMap::new(),
            snapshot_reads: BTreeSet::new(),
            answers: BTreeMap::new(),
            reply_to: BTreeMap::new(),
            released: VecDeque::new(),
            released_next: 1,
            holds: None,
            version: ConfigVersion(0),
            cuts: BTreeMap::new(),
            installing: BTreeSet::new(),
            deferred: VecDeque::new(),
            outgoing: BTreeMap::new(),
            receiving: BTreeMap::new(),
            moved: BTreeMap::new(),
            parked: BTreeMap::new(),
            batching: None,
            jobs: BTreeMap::new(),
            job_next: 1,
            generation: 0,
            writes_since_job: None,
            pending_released: BTreeSet::new(),
            pending_answers: BTreeSet::new(),
        }
    }

    /// How many bytes of the copy of `version` from group `from` its logged parts hold, while
    /// it is being received in parts (`None` before its first part and once it is installed).
    pub fn install_received(&self, version: ConfigVersion, from: ProcessId) -> Option<u64> {
        self.receiving
            .get(&(version, from))
            .map(|receiving| receiving.bytes.len() as u64)
    }

    /// The copies being received in parts are those of the last cut's version from groups it
    /// still waits for, each shorter than its total (`Err` names the broken one).
    fn check_receiving(&self) -> Result<(), String> {
        for ((version, from), receiving) in &self.receiving {
            if *version != self.version || !self.installing.contains(from) {
                return Err(format!(
                    "a copy of version {} from {} received in parts is not awaited",
                    version.0, from.0
                ));
            }
            if receiving.bytes.len() as u64 >= receiving.total {
                return Err(format!(
                    "a copy of version {} from {} holds {} of {} bytes and is not installed",
                    version.0,
                    from.0,
                    receiving.bytes.len(),
                    receiving.total
                ));
            }
        }
        Ok(())
    }

    /// Logs one part of a copy (`PartitionOperation::InstallPart`).
    fn install_part(
        &mut self,
        version: ConfigVersion,
        from: ProcessId,
        offset: u64,
        total: u64,
        bytes: Vec<u8>,
    ) -> PartitionResult {
        if version > self.version {
            return PartitionResult::Unknown; // Early: this group has not cut there yet.
        }
        if version < self.version || !self.installing.contains(&from) {
            return PartitionResult::Installed; // Installed before (or never expected).
        }
        let key = (version, from);
        let receiving = self.receiving.entry(key).or_insert(Receiving {
            total,
            bytes: Vec::new(),
        });
        if receiving.total != total {
            if offset != 0 {
                // Parts of another split of the copy (its sender's copy cannot change, but a
                // peer's bytes may be anything): refused, the copy restarts from its first part.
                return PartitionResult::Unknown;
            }
            *receiving = Receiving {
                total,
                bytes: Vec::new(),
            };
        }
        let received = receiving.bytes.len() as u64;
        let end = offset.checked_add(bytes.len() as u64);
        let fits = end.is_some_and(|end| end <= total);
        if offset > received || !fits || (bytes.is_empty() && total > 0) {
            // Out of order (a part before it is missing), or not a part of this copy: refused,
            // and the primary's duty drops the copy's other parts (the sender resends it).
            if receiving.bytes.is_empty() {
                self.receiving.remove(&key);
            }
            return PartitionResult::Unknown;
        }
        // A part logged before (a new primary logs a resent copy's parts again) adds nothing;
        // one overlapping the bytes received (split at other offsets, by a primary with
        // another part size) adds its tail: the bytes at an offset of a copy never differ.
        let skip = usize::try_from(received - offset).expect("at most a part's length");
        if skip < bytes.len() {
            receiving.bytes.extend_from_slice(&bytes[skip..]);
        }
        let received = receiving.bytes.len() as u64;
        if received < total {
            return PartitionResult::PartLogged { received };
        }
        // The last part: the copy installs once, as a whole `Install` would.
        let receiving = self.receiving.remove(&key).expect("received above");
        assert_eq!(receiving.bytes.len() as u64, total, "a copy installs whole");
        let removed = self.installing.remove(&from);
        assert!(removed, "an awaited copy installs once");
        self.flush();
        self.data_mut().import(&receiving.bytes);
        self.collect_answered();
        self.drain();
        PartitionResult::Installed
    }

    /// The machine of a group that holds `holds` (single-partition operations on other keys
    /// are answered `Moved`).
    pub fn with_holdings(mut self, holds: PositionSet) -> PartitionMachine<D> {
        self.holds = Some(holds);
        self
    }

    /// The positions the group holds (`None`: every key).
    pub fn holds(&self) -> Option<&PositionSet> {
        self.holds.as_ref()
    }

    /// The holdings after every keyspace cut logged so far, executed or not (a cut waits in
    /// the log for earlier entries): what the next cut's driver starts from.
    pub fn holds_logged(&self) -> Option<&PositionSet> {
        match self.cuts.last_key_value() {
            Some((_, cut)) => Some(&cut.holds),
            None => self.holds.as_ref(),
        }
    }

    /// The version of the last keyspace cut the group executed.
    pub fn version(&self) -> ConfigVersion {
        self.version
    }

    /// §6.7 basic read of `operation` (a payload as the bypass sends it; for a read of several
    /// groups, every group gets it and answers its share), answered from the executed state
    /// without ordering anything: the result `PartitionData::read` gives, or why not. Refused
    /// when the gateway planned it at a configuration older than the last keyspace cut this
    /// group executed (`VersionMismatch`: Crescando/RB's check, against the version that
    /// matters to this group), when no key of it is held here or the group is installing or
    /// deferring for a cut (`KeysElsewhere`), or when it is not a read (`NotARead`). Whether *this member* may answer at all is the
    /// replica's question (`serve_basic_read`).
    pub fn basic_read(
        &self,
        planned_at: ConfigVersion,
        operation: &[u8],
    ) -> Result<Vec<u8>, ReadRefusal> {
        if planned_at < self.version {
            return Err(ReadRefusal::VersionMismatch {
                process: self.version,
                request: planned_at,
            });
        }
        let keys = self.data.keys(operation);
        if matches!(keys, KeySet::Unknown) {
            return Err(ReadRefusal::NotARead);
        }
        if !self.installing.is_empty() || !self.deferred.is_empty() || !self.holds_any_key(&keys) {
            return Err(ReadRefusal::KeysElsewhere);
        }
        self.data.read(operation).ok_or(ReadRefusal::NotARead)
    }

    /// The groups whose copy of the last cut is not installed yet (executions wait meanwhile).
    pub fn installing(&self) -> &BTreeSet<ProcessId> {
        &self.installing
    }

    /// Whether the group has cut to holding nothing, sends nothing and waits for nothing: a
    /// retired group above replication 1 (`placement::groups`) whose copies were all
    /// acknowledged and whose held operations were all released (answered `Moved`), whose
    /// replicas may stop. (A group at replication 1 that a contract emptied is finished too;
    /// it stays hosted for a later expand.) Held operations count: a replica that stopped
    /// with one held would answer its gateway's `Result` queries `Held` forever. So does the
    /// stability of what it logged (the routers' watermark covers it): a replica that stopped
    /// before its confirmation of a message reached the routers never confirms the forwarder's
    /// resends, and the message never becomes stable (both found by the simulator driving the
    /// lifecycle, stop 26).
    pub fn finished(&self) -> bool {
        self.rules.waiting() == 0
            && self.rules.watermark() >= self.rules.logged()
            && self.version > ConfigVersion(0)
            && self.holds.as_ref().is_some_and(PositionSet::is_empty)
            && self.cuts.is_empty()
            && self.outgoing.is_empty()
            && self.installing.is_empty()
            && self.deferred.is_empty()
            && self.jobs.is_empty()
            && self.parked.is_empty()
    }

    /// Executions waiting for installs.
    pub fn deferred(&self) -> usize {
        self.deferred.len()
    }

    /// Captured copies not acknowledged yet: (version, receiver, records). The primary's
    /// driver sends each as an `Install` to the receiver's group until it is acknowledged.
    pub fn outgoing(&self) -> impl Iterator<Item = (ConfigVersion, ProcessId, &Vec<u8>)> {
        self.outgoing
            .iter()
            .map(|((version, to), records)| (*version, *to, records))
    }

    /// The admitted prefix to confirm to the routers: the rules' (`Partition::admitted`), but
    /// never past a share whose execution waits for installs, so that the stable watermark
    /// covers a message only once every destination executed it.
    pub fn admitted(&self) -> Timestamp {
        let admitted = self.rules.admitted();
        // The rules admit in per-key order, not timestamp order: the earliest one waiting.
        let waiting = self
            .deferred
            .iter()
            .filter_map(|deferred| match deferred {
                Deferred::Multi { timestamp, .. } => Some(*timestamp),
                Deferred::Single { .. } => None,
            })
            .min();
        match waiting {
            Some(timestamp) if timestamp <= admitted => Timestamp(timestamp.0 - 1),
            _ => admitted,
        }
    }

    fn waits_for_install(&self) -> bool {
        !self.installing.is_empty() && !self.settings.act_before_install
    }

    /// Whether the group holds every key of `keys` (an unknown set: the data filters).
    fn holds_keys(&self, keys: &KeySet) -> bool {
        if self.settings.ignore_holdings {
            return true;
        }
        match (&self.holds, keys) {
            (None, _) | (_, KeySet::Unknown) => true,
            (Some(holds), KeySet::Keys(keys)) => keys
                .iter()
                .all(|key| holds.contains(self.data.position(key))),
        }
    }

    /// Basic reads: whether the group holds some key of `keys` (a read of several groups
    /// reaches each with every key; `PartitionData::read` answers the share it holds, and a
    /// part no group answers sends the read through the routers).
    fn holds_any_key(&self, keys: &KeySet) -> bool {
        match keys {
            KeySet::Keys(keys) if !keys.is_empty() => keys
                .iter()
                .any(|key| self.holds_keys(&KeySet::of([key.clone()]))),
            _ => self.holds_keys(keys),
        }
    }

    pub fn data(&self) -> &D {
        &self.data
    }

    pub fn rules(&self) -> &Partition {
        &self.rules
    }

    /// Released replies numbered above `after`, oldest first (the primary's driver sends them
    /// and remembers the last number).
    /// Never past a release whose result a read job still computes.
    pub fn released_after(&self, after: u64) -> impl Iterator<Item = &(u64, Released)> {
        self.released
            .iter()
            .filter(move |(number, _)| *number > after)
            .take_while(|(number, _)| !self.pending_released.contains(number))
    }

    /// Every retained release numbered above `after`, those whose result a read job still
    /// computes included (their result is not final): for observers of what was admitted
    /// when (the simulator's order checker), never for sending.
    pub fn released_or_open_after(&self, after: u64) -> impl Iterator<Item = &(u64, Released)> {
        self.released
            .iter()
            .filter(move |(number, _)| *number > after)
    }

    /// The read jobs handed out and not done, numbered above `after`, by number (the host
    /// runs each once, off its loop, and hands back `ReadJob::run`'s results through
    /// `vr::StateMachine::job_done`).
    pub fn jobs_after(&self, after: u64) -> impl Iterator<Item = (u64, &ReadJob<D>)> {
        self.jobs
            .range(after.saturating_add(1)..)
            .map(|(number, job)| (*number, job))
    }

    /// How many read jobs are open.
    pub fn jobs_open(&self) -> usize {
        self.jobs.len()
    }

    /// Releases the results of parked operations the data answered (granted and run, or let
    /// go): each to its client, as a held operation's result.
    fn collect_answered(&mut self) {
        for (ticket, result) in self.data.answered() {
            let Some(id) = self.parked.remove(&ticket) else {
                // A share's, let go when it was parked (`execute_multi`), cannot be answered
                // again; nothing else is unknown.
                debug_assert!(false, "an answer of ticket {ticket} nobody waits for");
                continue;
            };
            if self
                .results
                .get(&id.client)
                .is_some_and(|(number, _)| *number == id.number)
            {
                self.results
                    .insert(id.client, (id.number, Some(result.clone())));
            }
            self.release(Released::Single {
                client: id.client,
                number: id.number,
                result,
            });
        }
    }

    fn release(&mut self, released: Released) {
        self.released.push_back((self.released_next, released));
        self.released_next += 1;
        while self.released.len() > self.settings.released_retained {
            self.released.pop_front();
        }
    }

    /// Feeds one entry to the rules and executes what they say (or defers it while installs
    /// are missing). Returns what became of the single-partition operation `own` if the rules
    /// decided it during this entry, and whether the rules ignored the entry.
    fn feed(&mut self, entry: PartitionEntry, own: Option<OperationId>) -> (Option<Own>, bool) {
        let mut events = Vec::new();
        self.rules.apply(entry, &mut events);
        let mut own_outcome = None;
        let mut ignored = false;
        for event in events {
            match event {
                PartitionEvent::ExecuteSingle {
                    id,
                    keys,
                    operation,
                    deferred,
                } => {
                    if self.waits_for_install() {
                        self.deferred.push_back(Deferred::Single { id, operation });
                        if Some(id) == own {
                            own_outcome = Some(Own::Deferred);
                        }
                        continue;
                    }
                    let released = deferred || Some(id) != own;
                    if let Some(outcome) = self.execute_single(id, keys, operation, released) {
                        own_outcome = Some(outcome);
                    }
                }
                PartitionEvent::ExecuteMulti {
                    timestamp,
                    operation,
                } => {
                    if self.waits_for_install() {
                        self.deferred.push_back(Deferred::Multi {
                            timestamp,
                            operation,
                        });
                        continue;
                    }
                    self.execute_multi(timestamp, operation);
                }
                PartitionEvent::SnapshotPassed { id, executed, .. } => {
                    assert_eq!(
                        Some(id),
                        own,
                        "a snapshot read is refused with its own entry"
                    );
                    self.snapshot_reads.remove(&id);
                    own_outcome = Some(Own::Passed(executed));
                }
                PartitionEvent::Ignored { .. } => ignored = true,
                PartitionEvent::Held { .. } | PartitionEvent::Admitted { .. } => {}
            }
        }
        (own_outcome, ignored)
    }

    /// Executes a single-partition operation, or answers it `Moved` if the group does not hold
    /// its keys. `released`: its reply goes through the released queue (returns `None`).
    fn execute_single(
        &mut self,
        id: OperationId,
        keys: KeySet,
        operation: Vec<u8>,
        released: bool,
    ) -> Option<Own> {
        debug_assert_eq!(
            keys,
            self.data.keys(&operation),
            "the entry's keys are its own"
        );
        let holds = if self.snapshot_reads.remove(&id) {
            self.holds_any_key(&keys)
        } else {
            self.holds_keys(&keys)
        };
        if !holds {
            if self
                .results
                .get(&id.client)
                .is_some_and(|(number, _)| *number == id.number)
            {
                self.results.remove(&id.client);
                self.moved.insert(id.client, id.number);
            }
            if released {
                self.release(Released::Moved {
                    client: id.client,
                    number: id.number,
                });
                return None;
            }
            return Some(Own::Moved);
        }
        if self.puts_off(&operation) {
            let record = self
                .results
                .get(&id.client)
                .is_some_and(|(number, _)| *number == id.number);
            let (own, released, outcome) = if released {
                self.release(Released::Single {
                    client: id.client,
                    number: id.number,
                    result: Vec::new(),
                });
                (None, Some(self.released_next - 1), None)
            } else {
                let request = self.batching.as_ref().expect("putting off").request;
                (Some(request), None, Some(Own::Executed(Vec::new())))
            };
            let batching = self.batching.as_mut().expect("putting off");
            batching.operations.push(operation);
            batching.sinks.push(Sink::Single {
                id,
                record,
                own,
                released,
            });
            return outcome;
        }
        self.flush();
        let result = self.data_mut().execute(&operation);
        if let Some(ticket) = self.data.parked() {
            // Its reply waits for its grant: `Held` (the client's result slot stays empty),
            // released when the data answers the ticket.
            let earlier = self.parked.insert(ticket, id);
            assert!(earlier.is_none(), "a ticket parks one operation");
            self.collect_answered();
            return (!released).then_some(Own::Parked);
        }
        self.collect_answered();
        if self
            .results
            .get(&id.client)
            .is_some_and(|(number, _)| *number == id.number)
        {
            self.results
                .insert(id.client, (id.number, Some(result.clone())));
        }
        if released {
            self.release(Released::Single {
                client: id.client,
                number: id.number,
                result,
            });
            None
        } else {
            Some(Own::Executed(result))
        }
    }

    /// Admits a multi-partition share (or executes a keyspace cut) and releases its answer.
    fn execute_multi(&mut self, timestamp: Timestamp, operation: Vec<u8>) {
        let result = match self.cuts.remove(&timestamp) {
            Some(cut) => {
                self.execute_cut(cut);
                Vec::new()
            }
            None if self.puts_off(&operation) => {
                self.answers.insert(timestamp, Vec::new());
                while self.answers.len() > self.settings.answers_retained {
                    self.answers.pop_first();
                }
                let mut released = None;
                if let Some((sender, sequence)) = self.reply_to.remove(&timestamp) {
                    self.release(Released::Answer {
                        sender,
                        sequence,
                        timestamp,
                        result: Vec::new(),
                    });
                    released = Some(self.released_next - 1);
                }
                let batching = self.batching.as_mut().expect("putting off");
                batching.operations.push(operation);
                batching.sinks.push(Sink::Multi {
                    timestamp,
                    released,
                });
                return;
            }
            None => {
                self.flush();
                let result = self.data_mut().execute(&operation);
                if let Some(ticket) = self.data.parked() {
                    // A share's answer does not wait: its refusal stands.
                    self.data.let_go(ticket);
                }
                self.collect_answered();
                result
            }
        };
        self.answers.insert(timestamp, result.clone());
        while self.answers.len() > self.settings.answers_retained {
            self.answers.pop_first();
        }
        if let Some((sender, sequence)) = self.reply_to.remove(&timestamp) {
            self.release(Released::Answer {
                sender,
                sequence,
                timestamp,
                result,
            });
        }
    }

    /// The cut (`partition_keyspace`): capture the copies, drop what moved away, take the new
    /// holdings, and wait for the copies this group receives.
    fn execute_cut(&mut self, cut: PartitionCut) {
        self.flush();
        for (to, range) in &cut.sends {
            let records = self.data.export(range);
            self.outgoing.insert((cut.version, *to), records);
        }
        self.data_mut().retain(&cut.holds);
        self.collect_answered();
        self.holds = Some(cut.holds);
        self.version = cut.version;
        self.installing = cut.receives.into_iter().collect();
        // A cut executes only once every copy of the one before is installed (executions
        // wait for them), so no copy is still being received in parts.
        debug_assert!(self.receiving.is_empty() || self.settings.act_before_install);
        self.receiving.clear();
    }

    /// Runs the deferred executions, in order, while no install is missing.
    fn drain(&mut self) {
        while !self.waits_for_install() {
            let Some(next) = self.deferred.pop_front() else {
                return;
            };
            match next {
                Deferred::Single { id, operation } => {
                    let keys = self.data.keys(&operation);
                    self.execute_single(id, keys, operation, true);
                }
                Deferred::Multi {
                    timestamp,
                    operation,
                } => self.execute_multi(timestamp, operation),
            }
        }
    }

    /// Whether `apply_batch` puts off executing `operation` (`Batching`).
    fn puts_off(&self, operation: &[u8]) -> bool {
        self.batching.is_some() && self.data.batchable(operation)
    }

    /// Runs the executions put off so far as one `execute_batch` and puts each result where
    /// its placeholder is (unless something after it replaced or dropped that place). With
    /// `read_jobs`, each maximal run of read-only operations (`PartitionData::reads_only`)
    /// becomes a read job on a copy of the data as it is at the run's place instead, and only
    /// the runs that write execute here, in order.
    fn flush(&mut self) {
        let Some(batching) = &mut self.batching else {
            return;
        };
        if batching.operations.is_empty() {
            return;
        }
        let operations = std::mem::take(&mut batching.operations);
        let sinks = std::mem::take(&mut batching.sinks);
        assert_eq!(
            operations.len(),
            sinks.len(),
            "a sink per put-off execution"
        );
        if !self.settings.read_jobs {
            let results = self.data_mut().execute_batch(&operations);
            self.place_all(sinks, results);
            return;
        }
        let reads: Vec<bool> = operations
            .iter()
            .map(|operation| self.data.reads_only(operation))
            .collect();
        let mut operations = operations.into_iter();
        let mut sinks = sinks.into_iter();
        let mut at = 0;
        while at < reads.len() {
            let end = (at..reads.len())
                .find(|next| reads[*next] != reads[at])
                .unwrap_or(reads.len());
            let run: Vec<Vec<u8>> = operations.by_ref().take(end - at).collect();
            let run_sinks: Vec<Sink> = sinks.by_ref().take(end - at).collect();
            if reads[at] {
                self.start_job(run, run_sinks);
            } else {
                let results = self.execute_writes(&run);
                self.place_all(run_sinks, results);
            }
            at = end;
        }
    }

    fn place_all(&mut self, sinks: Vec<Sink>, results: Vec<Vec<u8>>) {
        assert_eq!(
            results.len(),
            sinks.len(),
            "execute_batch returns one result each"
        );
        for (sink, result) in sinks.into_iter().zip(results) {
            self.place(sink, result);
        }
    }

    /// Puts a put-off execution's result where its placeholder is, unless something after it
    /// replaced or dropped that place.
    fn place(&mut self, sink: Sink, result: Vec<u8>) {
        let released = match sink {
            Sink::Single {
                id,
                record,
                own,
                released,
            } => {
                if record {
                    if let Some((number, slot)) = self.results.get_mut(&id.client) {
                        if *number == id.number {
                            *slot = Some(result.clone());
                        }
                    }
                }
                if let Some(request) = own {
                    let batching = self.batching.as_mut().expect("an own result in its entry");
                    let earlier = batching.own.insert(request, result.clone());
                    assert!(earlier.is_none(), "a request executes once");
                }
                released
            }
            Sink::Multi {
                timestamp,
                released,
            } => {
                if let Some(answer) = self.answers.get_mut(&timestamp) {
                    *answer = result.clone();
                }
                released
            }
        };
        let Some(released) = released else {
            return;
        };
        // Still retained unless newer releases pushed it out.
        if let Some((_, reply)) = self
            .released
            .iter_mut()
            .find(|(number, _)| *number == released)
        {
            match reply {
                Released::Single { result: slot, .. } | Released::Answer { result: slot, .. } => {
                    *slot = result
                }
                Released::Moved { .. } => unreachable!("a put-off execution's release"),
            }
        }
    }

    /// The data, for a call that may change it: advances `generation`, so that no read job
    /// handed out before is taken for one reading the data after.
    fn data_mut(&mut self) -> &mut D {
        self.generation += 1;
        self.writes_since_job = None;
        &mut self.data
    }

    /// Executes a run of batched writes (`flush`), remembering them for the next read job's
    /// chain (`writes_since_job`) unless the chain is cut already or they are too many bytes.
    fn execute_writes(&mut self, run: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut since = self.writes_since_job.take();
        self.generation += 1;
        if let Some(since) = &mut since {
            since.bytes += run.iter().map(Vec::len).sum::<usize>();
            since.writes.extend(run.iter().cloned());
        }
        self.writes_since_job = since.filter(|since| since.bytes <= WRITES_SINCE_BYTES_MAX);
        self.data.execute_batch(run)
    }

    /// Hands out a run of read-only executions as a read job on a copy of the data as it is
    /// now. The entry's own single-partition operations among them are answered `Held` and
    /// released instead (VR's reply is the entry's; the job finishes later).
    fn start_job(&mut self, operations: Vec<Vec<u8>>, sinks: Vec<Sink>) {
        debug_assert!(operations
            .iter()
            .all(|operation| self.data.reads_only(operation)));
        let mut job_sinks = Vec::with_capacity(sinks.len());
        for sink in sinks {
            let sink = match sink {
                Sink::Single {
                    id,
                    record,
                    own: Some(request),
                    released,
                } => {
                    assert!(released.is_none(), "an own reply is not released");
                    self.release(Released::Single {
                        client: id.client,
                        number: id.number,
                        result: Vec::new(),
                    });
                    let batching = self.batching.as_mut().expect("flushing");
                    let new = batching.held.insert(request);
                    assert!(new, "a request executes once");
                    Sink::Single {
                        id,
                        record,
                        own: None,
                        released: Some(self.released_next - 1),
                    }
                }
                sink => sink,
            };
            match &sink {
                Sink::Single { released, .. } => {
                    self.pending_released.extend(*released);
                }
                Sink::Multi {
                    timestamp,
                    released,
                } => {
                    self.pending_answers.insert(*timestamp);
                    self.pending_released.extend(*released);
                }
            }
            job_sinks.push(sink);
        }
        let number = self.job_next;
        self.job_next += 1;
        // The writes since the previous job, if only batched writes changed the data since
        // (none at all: the same generation, no link needed); the next job's chain starts here.
        let preceding = self
            .writes_since_job
            .replace(WritesSince {
                generation: self.generation,
                ..WritesSince::default()
            })
            .filter(|since| since.generation != self.generation);
        debug_assert!(preceding
            .as_ref()
            .is_none_or(|since| !since.writes.is_empty()));
        self.jobs.insert(
            number,
            ReadJob {
                data: self.data.clone(),
                generation: self.generation,
                preceding,
                operations,
                sinks: job_sinks,
            },
        );
    }

    /// A read job's results came back: each goes where its placeholder is, and the replies
    /// waiting for it may go. A job not open (done, or of a state `restore` replaced) is
    /// ignored.
    fn finish_job(&mut self, number: u64, results: Vec<Vec<u8>>) {
        let Some(job) = self.jobs.remove(&number) else {
            return;
        };
        let results = if self.settings.job_reads_live {
            self.data.clone().execute_batch(&job.operations)
        } else {
            results
        };
        assert_eq!(
            results.len(),
            job.sinks.len(),
            "a read job's results, one per operation"
        );
        for (sink, result) in job.sinks.into_iter().zip(results) {
            match &sink {
                Sink::Single { released, .. } => {
                    if let Some(released) = released {
                        self.pending_released.remove(released);
                    }
                }
                Sink::Multi {
                    timestamp,
                    released,
                } => {
                    self.pending_answers.remove(timestamp);
                    if let Some(released) = released {
                        self.pending_released.remove(released);
                    }
                }
            }
            self.place(sink, result);
        }
        if self.jobs.is_empty() {
            assert!(
                self.pending_released.is_empty() && self.pending_answers.is_empty(),
                "nothing waits for a job once every job is done"
            );
        }
    }

    /// Runs every open read job here, on the loop (what a log `Query` reads, and a snapshot's
    /// copy, must not depend on how far this replica's jobs got).
    fn finish_jobs_here(&mut self) {
        while let Some((&number, job)) = self.jobs.first_key_value() {
            let results = job.run();
            self.finish_job(number, results);
        }
    }

    /// The answer to a single-partition operation's or a snapshot read's own entry, from
    /// what the rules decided for it (`waiting`: the rules' waiting entries before it).
    fn own_result(
        &mut self,
        client: ClientId,
        result: Option<Own>,
        ignored: bool,
        waiting: usize,
    ) -> PartitionResult {
        match result {
            Some(Own::Executed(result)) => PartitionResult::Executed(result),
            Some(Own::Moved) => PartitionResult::Moved,
            Some(Own::Deferred) | Some(Own::Parked) => PartitionResult::Held,
            Some(Own::Passed(executed)) => {
                self.results.remove(&client);
                PartitionResult::SnapshotPassed { executed }
            }
            None if !ignored && self.rules.waiting() > waiting => PartitionResult::Held,
            None => {
                // Refused by the rules (too many waiting): nothing happened.
                self.results.remove(&client);
                PartitionResult::Unknown
            }
        }
    }

    /// A single-partition operation of the bypass (`Single`), or a snapshot read at `at`
    /// (`Snapshot`): fed to the rules as the client's own entry, answered by its result.
    fn execute_own(
        &mut self,
        client: ClientId,
        number: RequestNumber,
        at: Option<Timestamp>,
        operation: Vec<u8>,
    ) -> PartitionResult {
        let id = OperationId { client, number };
        let waiting = self.rules.waiting();
        self.results.insert(client, (number, None));
        self.moved.remove(&client);
        if at.is_some() {
            self.snapshot_reads.insert(id);
        }
        let keys = self.data.keys(&operation);
        let entry = match at {
            None => PartitionEntry::Single {
                id,
                keys,
                operation,
            },
            Some(at) => PartitionEntry::Snapshot {
                id,
                at,
                keys,
                operation,
            },
        };
        let (result, ignored) = self.feed(entry, Some(id));
        self.own_result(client, result, ignored, waiting)
    }

    fn execute_operation(&mut self, operation: PartitionOperation) -> PartitionResult {
        match operation {
            PartitionOperation::Single {
                client,
                number,
                operation,
            } => self.execute_own(client, number, None, operation),
            PartitionOperation::Snapshot {
                client,
                number,
                at,
                operation,
            } => self.execute_own(client, number, Some(at), operation),
            PartitionOperation::Deliveries(shares) => {
                for share in shares {
                    let new = share.timestamp > self.rules.logged()
                        && !self.reply_to.contains_key(&share.timestamp);
                    if new {
                        self.reply_to
                            .insert(share.timestamp, (share.sender, share.sequence));
                    }
                    let keys = self.data.keys(&share.operation);
                    let timestamp = share.timestamp;
                    let (_, ignored) = self.feed(
                        PartitionEntry::Multi {
                            timestamp,
                            previous: share.previous,
                            keys,
                            operation: share.operation,
                        },
                        None,
                    );
                    if ignored && new {
                        self.reply_to.remove(&timestamp); // Dropped by the rules: resent later.
                    }
                }
                PartitionResult::Logged {
                    admitted: self.admitted(),
                }
            }
            PartitionOperation::Watermark(watermark) => {
                self.feed(PartitionEntry::Watermark(watermark), None);
                PartitionResult::Logged {
                    admitted: self.admitted(),
                }
            }
            PartitionOperation::Query(query) => {
                // Logged, so answered alike on every replica: from the state with every
                // read job before it done.
                self.finish_jobs_here();
                self.answer(&query)
            }
            PartitionOperation::MessageStable(timestamp) => {
                self.feed(PartitionEntry::MessageStable(timestamp), None);
                PartitionResult::Logged {
                    admitted: self.admitted(),
                }
            }
            PartitionOperation::Cut { share, cut } => {
                let timestamp = share.timestamp;
                let new = timestamp > self.rules.logged() && !self.cuts.contains_key(&timestamp);
                if new {
                    self.reply_to
                        .insert(timestamp, (share.sender, share.sequence));
                    self.cuts.insert(timestamp, cut);
                }
                let (_, ignored) = self.feed(
                    PartitionEntry::Multi {
                        timestamp,
                        previous: share.previous,
                        keys: KeySet::Unknown,
                        operation: Vec::new(),
                    },
                    None,
                );
                if ignored && new {
                    self.reply_to.remove(&timestamp);
                    self.cuts.remove(&timestamp);
                }
                PartitionResult::Logged {
                    admitted: self.admitted(),
                }
            }
            PartitionOperation::Install {
                version,
                from,
                records,
            } => {
                if version == self.version && self.installing.remove(&from) {
                    self.receiving.remove(&(version, from));
                    self.flush();
                    self.data_mut().import(&records);
                    self.collect_answered();
                    self.drain();
                    PartitionResult::Installed
                } else if version <= self.version {
                    PartitionResult::Installed // Installed before (or never expected).
                } else {
                    PartitionResult::Unknown // Early: this group has not cut there yet.
                }
            }
            PartitionOperation::Installed { version, to } => {
                self.outgoing.remove(&(version, to));
                PartitionResult::Logged {
                    admitted: self.admitted(),
                }
            }
            PartitionOperation::InstallPart {
                version,
                from,
                offset,
                total,
                bytes,
            } => self.install_part(version, from, offset, total, bytes),
        }
    }

    /// What a `Result` query learns here, copied out (a stopped replica's tombstone keeps it:
    /// `group_lifecycle::Tombstone`).
    pub fn result_answers(&self) -> ResultAnswers {
        ResultAnswers {
            results: self.results.clone(),
            moved: self.moved.clone(),
        }
    }

    fn answer(&self, query: &PartitionQuery) -> PartitionResult {
        match query {
            PartitionQuery::Result { client, number } => {
                answer_result(&self.results, &self.moved, *client, *number)
            }
            PartitionQuery::Answer { timestamp } => match self.answers.get(timestamp) {
                // Its read job is not done (only the read path, `query`, sees one open).
                Some(_) if self.pending_answers.contains(timestamp) => PartitionResult::Held,
                Some(result) => PartitionResult::Executed(result.clone()),
                None => PartitionResult::Unknown,
            },
            PartitionQuery::Progress => PartitionResult::Progress {
                admitted: self.admitted(),
                watermark: self.rules.watermark(),
            },
        }
    }
}

/// The answers to `PartitionQuery::Result` a machine holds: per client, its last
/// single-partition request number with its result once executed, and its last request
/// answered `Moved`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResultAnswers {
    results: BTreeMap<ClientId, (RequestNumber, Option<Vec<u8>>)>,
    moved: BTreeMap<ClientId, RequestNumber>,
}

impl ResultAnswers {
    /// The answer to `PartitionQuery::Result { client, number }`.
    pub fn answer(&self, client: ClientId, number: RequestNumber) -> PartitionResult {
        answer_result(&self.results, &self.moved, client, number)
    }
}

fn answer_result(
    results: &BTreeMap<ClientId, (RequestNumber, Option<Vec<u8>>)>,
    moved: &BTreeMap<ClientId, RequestNumber>,
    client: ClientId,
    number: RequestNumber,
) -> PartitionResult {
    if moved.get(&client) == Some(&number) {
        return PartitionResult::Moved;
    }
    match results.get(&client) {
        Some((last, Some(result))) if *last == number => PartitionResult::Executed(result.clone()),
        Some((last, None)) if *last == number => PartitionResult::Held,
        _ => PartitionResult::Unknown,
    }
}

impl<D> vr::StateMachine for PartitionMachine<D>
where
    D: PartitionData + Serialize + DeserializeOwned,
{
    fn apply(&mut self, operation: &[u8]) -> Vec<u8> {
        let result = match PartitionOperation::decode(operation) {
            Ok(operation) => self.execute_operation(operation),
            Err(reason) => PartitionResult::Error(reason),
        };
        if let Err(reason) = self.check_receiving() {
            panic!("partition machine invariant: {reason}");
        }
        result.encode()
    }

    /// The entry's operations in order, as `apply` on each would answer them and leave the
    /// state, but the data executions of those the data calls batchable (SQL statements that
    /// may share a scan cycle) are put off and run together (`PartitionData::execute_batch`)
    /// up to the next other use of the data, or the end of the entry: the statements one
    /// log entry carries, single-partition ones and shares alike, share Crescando's scan cycle
    /// on every replica. The batches depend only on the entry, so every replica runs the
    /// same ones. Queries, cuts and installs run after everything put off before them.
    fn apply_batch(&mut self, operations: &[&[u8]]) -> Vec<Vec<u8>> {
        assert!(self.batching.is_none(), "apply_batch does not nest");
        self.batching = Some(Batching::default());
        let mut results: Vec<PartitionResult> = Vec::with_capacity(operations.len());
        for (request, operation) in operations.iter().enumerate() {
            self.batching.as_mut().expect("batching").request = request;
            let result = match PartitionOperation::decode(operation) {
                Ok(operation) => {
                    let may_put_off = matches!(
                        operation,
                        PartitionOperation::Single { .. }
                            | PartitionOperation::Snapshot { .. }
                            | PartitionOperation::Deliveries(_)
                            | PartitionOperation::Watermark(_)
                            | PartitionOperation::MessageStable(_)
                    );
                    if !may_put_off {
                        // A query reads the results put off; the rest touch the data whole.
                        self.flush();
                    }
                    self.execute_operation(operation)
                }
                Err(reason) => PartitionResult::Error(reason),
            };
            if let Err(reason) = self.check_receiving() {
                panic!("partition machine invariant: {reason}");
            }
            results.push(result);
        }
        self.flush();
        let batching = self.batching.take().expect("batching");
        assert!(batching.operations.is_empty() && batching.sinks.is_empty());
        let mut own = batching.own;
        let held = batching.held;
        results
            .into_iter()
            .enumerate()
            .map(|(request, result)| match own.remove(&request) {
                None if held.contains(&request) => {
                    assert_eq!(
                        result,
                        PartitionResult::Executed(Vec::new()),
                        "a put-off request's placeholder"
                    );
                    PartitionResult::Held.encode()
                }
                Some(executed) => {
                    assert_eq!(
                        result,
                        PartitionResult::Executed(Vec::new()),
                        "a put-off request's placeholder"
                    );
                    PartitionResult::Executed(executed).encode()
                }
                None => result.encode(),
            })
            .collect()
    }

    fn query(&self, operation: &[u8]) -> Vec<u8> {
        let result = match PartitionOperation::decode(operation) {
            Ok(PartitionOperation::Query(query)) => self.answer(&query),
            Ok(_) => PartitionResult::Error("only queries may be read".to_string()),
            Err(reason) => PartitionResult::Error(reason),
        };
        result.encode()
    }

    /// With read jobs open, the state with them done (run here, on a copy): what every
    /// replica's snapshot at this op is, whatever its jobs' progress.
    fn snapshot(&self) -> Vec<u8> {
        // Not `wire::bytes::to_vec_sized`: a sizing pass would have the data build its own
        // snapshot (`PartitionData`'s `Serialize`) twice.
        if self.jobs.is_empty() {
            return postcard::to_allocvec(self).expect("the partition machine serialises");
        }
        let mut copy = self.clone();
        copy.finish_jobs_here();
        postcard::to_allocvec(&copy).expect("the partition machine serialises")
    }

    fn job_done(&mut self, job: u64, results: Vec<Vec<u8>>) {
        self.finish_job(job, results);
    }

    /// A copy serialised off the replica's loop: the data's clone shares what it can (a
    /// `store::Store`'s key-value map); the machine's own bookkeeping (retained answers and
    /// releases, bounded) is copied.
    fn snapshot_source(&self) -> vr::SnapshotSource {
        let copy = self.clone();
        vr::SnapshotSource::new(move || copy.snapshot())
    }

    /// Skyros's per-key checks (its reads, Skyros-Comm, the nilext gate): a single-partition
    /// operation's keys, every share's keys for deliveries; watermarks and queries touch none.
    fn keys(&self, operation: &[u8]) -> Option<Vec<Vec<u8>>> {
        let keys = |operation: &[u8]| match self.data.keys(operation) {
            KeySet::Keys(keys) => Some(keys.into_iter().collect::<Vec<_>>()),
            KeySet::Unknown => None,
        };
        match PartitionOperation::decode(operation).ok()? {
            PartitionOperation::Single { operation, .. }
            | PartitionOperation::Snapshot { operation, .. } => keys(&operation),
            PartitionOperation::Deliveries(shares) => {
                let mut all = Vec::new();
                for share in &shares {
                    all.extend(keys(&share.operation)?);
                }
                Some(all)
            }
            PartitionOperation::Watermark(_)
            | PartitionOperation::Query(_)
            | PartitionOperation::MessageStable(_) => Some(Vec::new()),
            // A keyspace cut and the copies it moves change what the group holds: they
            // conflict with everything (no nilext write is acknowledged early past them).
            PartitionOperation::Cut { .. }
            | PartitionOperation::Install { .. }
            | PartitionOperation::InstallPart { .. }
            | PartitionOperation::Installed { .. } => None,
        }
    }

    /// A `skyros` partition: a nilext write may be acknowledged before it is ordered only if,
    /// logged now, it would run at once (`Partition::would_wait`): a held write must not be
    /// acknowledged before the watermark covers what holds it (`docs/internals/ecast.md`,
    /// "Skyros partitions"). Anything but a single-partition operation is never acknowledged
    /// early.
    ///
    /// After a keyspace cut (Rubberband over partitions, simulated only for `vr`): a write to a
    /// key the group no longer holds would be answered `Moved` when it executes, and one
    /// logged while copies are being installed waits for them, so neither is acknowledged
    /// early either.
    fn nilext_gate(&self, operation: &[u8]) -> vr::NilextGate {
        match PartitionOperation::decode(operation) {
            Ok(PartitionOperation::Single { operation, .. }) => {
                let keys = self.data.keys(&operation);
                // G3: every key still held, no copy installing, no execution deferred.
                let cuts_allow = self.settings.gate_ignores_cuts
                    || (self.holds_keys(&keys)
                        && self.installing.is_empty()
                        && self.deferred.is_empty());
                // The data itself must not refuse it (e.g. a key locked by a multi-key
                // command): a refused write must not have been acknowledged.
                let runs_at_once = !self.rules.would_wait(&keys)
                    && cuts_allow
                    && self.data.executes_as_is(&operation);
                if runs_at_once {
                    vr::NilextGate::Clear
                } else {
                    vr::NilextGate::Closed
                }
            }
            _ => vr::NilextGate::Closed,
        }
    }

    /// Skyros-Comm in a `skyros` partition: a single-partition write that the gate clears
    /// (logged now, it would run at once: every key held, nothing installing or deferred, no
    /// hold rule in its way) executes with the result the data previews; anything else is not
    /// previewed. The replica previews only when, besides, no pending update touches its keys
    /// (`docs/internals/skyros.md`, "Skyros-Comm").
    fn preview(&self, operation: &[u8]) -> Option<Vec<u8>> {
        if vr::StateMachine::nilext_gate(self, operation) != vr::NilextGate::Clear {
            return None;
        }
        let Ok(PartitionOperation::Single { operation, .. }) =
            PartitionOperation::decode(operation)
        else {
            return None;
        };
        let result = self.data.preview(&operation)?;
        Some(PartitionResult::Executed(result).encode())
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), vr::RestoreError> {
        let state: PartitionMachine<D> =
            postcard::from_bytes(snapshot).map_err(|error| vr::RestoreError::Malformed {
                reason: error.to_string(),
            })?;
        // A snapshot comes from a peer: hold rules that break their invariants are refused
        // here instead of failing an assertion on the next operation.
        state
            .rules
            .check()
            .map_err(|reason| vr::RestoreError::Malformed { reason })?;
        // A deferred multi-partition share was logged, so its timestamp is above 0 (found by
        // fuzzing: one at 0 overflowed `admitted` on the next operation).
        let deferred_at_zero = state.deferred.iter().any(|deferred| {
            matches!(deferred, Deferred::Multi { timestamp, .. } if *timestamp == Timestamp::ZERO)
        });
        if deferred_at_zero {
            return Err(vr::RestoreError::Malformed {
                reason: "a deferred multi-partition share at timestamp 0".into(),
            });
        }
        state
            .check_receiving()
            .map_err(|reason| vr::RestoreError::Malformed { reason })?;
        // This replica's host settings and job numbering stay; its open jobs belong to the
        // state replaced (the snapshot is complete: `snapshot` ran its own).
        let (read_jobs, job_reads_live) = (self.settings.read_jobs, self.settings.job_reads_live);
        let (job_next, generation) = (self.job_next, self.generation);
        *self = state;
        self.settings.read_jobs = read_jobs;
        self.settings.job_reads_live = job_reads_live;
        self.job_next = job_next;
        self.generation = generation + 1;
        self.writes_since_job = None;
        Ok(())
    }
}

/// §6.7 basic read at one member of a partition group (`docs/internals/ecast.md`, "Basic
/// reads of partition groups"): answered from the member's executed state with no log entry
/// and no round, if the member may (`vr::Replica::serves_unordered_read`: the primary of its
/// view, done with what the view inherited, no Skyros write to the keys pending) and the group
/// may (`PartitionMachine::basic_read`: the version check, holdings, a read). A backup is
/// refused (`NotServable`): it learns commits a Prepare or a heartbeat after the primary, so
/// its executed state may lack a write that completed, and per key a basic read must never be
/// older than the last write completed before it began (a regular register).
///
/// `any_member` is a canary (`TESSERA_CANARY_BASIC_ANY_MEMBER`): it skips the member's check,
/// so backups answer too; `tests/resp_read_isolation.rs` shows the regular-register checker
/// catches the stale reads that follows.
pub fn serve_basic_read<D: PartitionData + Serialize + DeserializeOwned>(
    replica: &(impl vr::Replication<Machine = PartitionMachine<D>> + ?Sized),
    planned_at: ConfigVersion,
    operation: &[u8],
    any_member: bool,
) -> Result<Vec<u8>, ReadRefusal> {
    let single = PartitionOperation::Single {
        client: ClientId(0),
        number: RequestNumber(0),
        operation: operation.to_vec(),
    }
    .encode();
    if !any_member && !replica.serves_unordered_read(&single) {
        return Err(ReadRefusal::NotServable);
    }
    replica.state_machine().basic_read(planned_at, operation)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use vr::StateMachine;

    /// A map of one-byte keys to one-byte values; `[b'g', key]` reads, `[b'p', key, value]`
    /// writes (and answers the old value). Anything else touches unknown keys and does nothing.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub(crate) struct Bytes(pub(crate) BTreeMap<u8, u8>);

    impl PartitionData for Bytes {
        fn keys(&self, operation: &[u8]) -> KeySet {
            match operation {
                [b'g', key] | [b'p', key, _] => KeySet::of([vec![*key]]),
                _ => KeySet::Unknown,
            }
        }

        fn execute(&mut self, operation: &[u8]) -> Vec<u8> {
            match operation {
                [b'g', key] => self.0.get(key).copied().into_iter().collect(),
                [b'p', key, value] => self.0.insert(*key, *value).into_iter().collect(),
                _ => Vec::new(),
            }
        }

        /// Key byte k lies at position k.
        fn position(&self, key: &[u8]) -> Position {
            Position(key.first().copied().unwrap_or(0) as u64)
        }

        fn export(&self, range: &PositionSet) -> Vec<u8> {
            let records: Vec<(u8, u8)> = self
                .0
                .iter()
                .filter(|(key, _)| range.contains(Position(**key as u64)))
                .map(|(key, value)| (*key, *value))
                .collect();
            postcard::to_allocvec(&records).expect("records serialise")
        }

        fn import(&mut self, records: &[u8]) {
            let records: Vec<(u8, u8)> = postcard::from_bytes(records).unwrap_or_default();
            self.0.extend(records);
        }

        fn retain(&mut self, holds: &PositionSet) {
            self.0
                .retain(|key, _| holds.contains(Position(*key as u64)));
        }

        /// Reads and writes may share a batch (only `apply_batch` batches).
        fn batchable(&self, operation: &[u8]) -> bool {
            matches!(operation, [b'g', _] | [b'p', _, _])
        }

        /// Reads (only machines with `read_jobs` hand them out).
        fn reads_only(&self, operation: &[u8]) -> bool {
            matches!(operation, [b'g', _])
        }
    }

    /// Found by the fuzz target `partition_apply` (docs/bench/fuzz.md): a snapshot whose hold
    /// rules break their invariants (an early message not ahead of the log) was restored, and
    /// the next operation failed an assertion ("early messages are ahead").
    #[test]
    fn a_snapshot_breaking_the_hold_rules_invariants_is_refused_not_a_panic() {
        let snapshot: Vec<u8> = [&[1_u8, 0x85, 0, 1, 0, 0, 0, 0][..], &[1; 93]].concat();
        assert_refused_changing_nothing(&snapshot);
    }

    /// A fresh machine refuses `snapshot` as malformed, stays as it was, and still restores
    /// its own snapshot.
    fn assert_refused_changing_nothing(snapshot: &[u8]) {
        let mut restored = machine();
        let before = restored.snapshot();
        assert!(matches!(
            restored.restore(snapshot),
            Err(vr::RestoreError::Malformed { .. })
        ));
        assert_eq!(
            restored.snapshot(),
            before,
            "a refused snapshot changes nothing"
        );
        assert!(restored.restore(&before).is_ok());
    }

    /// Found by the `partition_apply` fuzz target (`docs/bench/fuzz.md`): a foreign snapshot
    /// holding a deferred multi-partition share at timestamp 0 overflowed `admitted` on the
    /// next operation; it is refused instead.
    #[test]
    fn a_snapshot_with_a_deferred_share_at_timestamp_zero_is_refused_not_a_panic() {
        let mut forged = machine();
        forged.deferred.push_back(Deferred::Multi {
            timestamp: Timestamp::ZERO,
            operation: vec![b'p', 1, 2],
        });
        assert_refused_changing_nothing(&forged.snapshot());
        // What the check prevents: the forged state's next question overflows.
        let overflowed = std::panic::catch_unwind(move || forged.admitted());
        assert!(overflowed.is_err() || !cfg!(debug_assertions));
    }

    fn machine() -> PartitionMachine<Bytes> {
        PartitionMachine::new(Bytes::default(), PartitionMachineSettings::default())
    }

    fn apply<D: PartitionData + Serialize + DeserializeOwned>(
        machine: &mut PartitionMachine<D>,
        operation: PartitionOperation,
    ) -> PartitionResult {
        PartitionResult::decode(&machine.apply(&operation.encode()))
    }

    /// `ClientId` and `RequestNumber` are newtypes over `u64`: postcard encodes them as the
    /// `u64` it encoded before they were typed (varints), so the wire format is unchanged.
    #[test]
    fn typed_client_and_request_numbers_encode_as_the_plain_integers_did() {
        let single = PartitionOperation::Single {
            client: ClientId(300),
            number: RequestNumber(7),
            operation: vec![9],
        };
        assert_eq!(
            single.encode(),
            [PARTITION_FORMAT_VERSION, 0, 0xac, 0x02, 7, 1, 9]
        );
        let query = PartitionOperation::Query(PartitionQuery::Result {
            client: ClientId(1),
            number: RequestNumber(2),
        });
        assert_eq!(query.encode(), [PARTITION_FORMAT_VERSION, 3, 0, 1, 2]);
        let moved = Released::Moved {
            client: ClientId(u64::MAX),
            number: RequestNumber(0),
        };
        let plain: (u32, u64, u64) = (2, u64::MAX, 0);
        assert_eq!(
            postcard::to_allocvec(&moved).unwrap(),
            postcard::to_allocvec(&plain).unwrap()
        );
    }

    fn single(client: u64, operation: &[u8]) -> PartitionOperation {
        PartitionOperation::Single {
            client: ClientId(client),
            number: RequestNumber(1),
            operation: operation.to_vec(),
        }
    }

    fn share(timestamp: u64, previous: u64, operation: &[u8]) -> PartitionOperation {
        PartitionOperation::Deliveries(vec![Share {
            timestamp: Timestamp(timestamp),
            previous: Timestamp(previous),
            sender: ProcessId(50),
            sequence: Sequence(timestamp),
            operation: operation.to_vec(),
        }])
    }

    fn batch(
        machine: &mut PartitionMachine<Bytes>,
        operations: &[PartitionOperation],
    ) -> Vec<PartitionResult> {
        let encoded: Vec<Vec<u8>> = operations.iter().map(PartitionOperation::encode).collect();
        let borrowed: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
        machine
            .apply_batch(&borrowed)
            .iter()
            .map(|result| PartitionResult::decode(result))
            .collect()
    }

    /// A lock table for grants at the partition: `[b'l', key, owner]` takes key's lock
    /// for owner, or parks (answers `b"refused"`, its ticket in `parked`) while another
    /// holds it; `[b'u', key]` releases it, and the first parked request for it (in ticket
    /// order) takes it and is answered `b"granted"`; `[b'x', key, owner]` lets go of owner's
    /// parked request (its transaction moved on), answered `b"refused"`.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
    struct Locks {
        held: BTreeMap<u8, u8>,
        /// Parked requests by ticket: (key, owner).
        waiting: BTreeMap<u64, (u8, u8)>,
        ticket_next: u64,
        #[serde(skip)]
        parked_now: Option<u64>,
        #[serde(skip)]
        answered: Vec<(u64, Vec<u8>)>,
    }

    impl PartitionData for Locks {
        fn keys(&self, operation: &[u8]) -> KeySet {
            match operation {
                [b'l', key, _] | [b'u', key] | [b'x', key, _] => KeySet::of([vec![*key]]),
                _ => KeySet::Unknown,
            }
        }

        fn execute(&mut self, operation: &[u8]) -> Vec<u8> {
            match *operation {
                [b'l', key, owner] => match self.held.get(&key) {
                    Some(holder) if *holder != owner => {
                        let ticket = self.ticket_next;
                        self.ticket_next += 1;
                        self.waiting.insert(ticket, (key, owner));
                        self.parked_now = Some(ticket);
                        b"refused".to_vec()
                    }
                    _ => {
                        self.held.insert(key, owner);
                        b"granted".to_vec()
                    }
                },
                [b'u', key] => {
                    self.held.remove(&key);
                    let next = self
                        .waiting
                        .iter()
                        .find(|(_, (waited, _))| *waited == key)
                        .map(|(ticket, (_, owner))| (*ticket, *owner));
                    if let Some((ticket, owner)) = next {
                        self.waiting.remove(&ticket);
                        self.held.insert(key, owner);
                        self.answered.push((ticket, b"granted".to_vec()));
                    }
                    b"released".to_vec()
                }
                [b'x', _, owner] => {
                    let mine: Vec<u64> = self
                        .waiting
                        .iter()
                        .filter(|(_, (_, waiter))| *waiter == owner)
                        .map(|(ticket, _)| *ticket)
                        .collect();
                    for ticket in mine {
                        self.waiting.remove(&ticket);
                        self.answered.push((ticket, b"refused".to_vec()));
                    }
                    Vec::new()
                }
                _ => Vec::new(),
            }
        }

        fn parked(&mut self) -> Option<u64> {
            self.parked_now.take()
        }

        fn let_go(&mut self, ticket: u64) {
            self.waiting.remove(&ticket);
        }

        fn answered(&mut self) -> Vec<(u64, Vec<u8>)> {
            std::mem::take(&mut self.answered)
        }

        fn position(&self, key: &[u8]) -> Position {
            Position(key.first().copied().unwrap_or(0) as u64)
        }

        fn export(&self, _: &PositionSet) -> Vec<u8> {
            Vec::new()
        }

        fn import(&mut self, _: &[u8]) {}

        fn retain(&mut self, _: &PositionSet) {
            for (ticket, _) in std::mem::take(&mut self.waiting) {
                self.answered.push((ticket, b"refused".to_vec()));
            }
        }
    }

    /// Grants at the partition: a single-partition operation the data parks is answered
    /// `Held`, and its result is released (and answers `Result`) when a later operation of
    /// any kind (here a share) grants it, without being sent again; two parked on one key
    /// are granted in order, each at the release before it; every replica (a restored copy)
    /// releases the same; one let go is released with its refusal; a share's parked
    /// operation is let go at once (its refusal is its answer). A machine with parked
    /// operations is not finished.
    #[test]
    fn a_parked_operation_is_answered_when_a_later_operation_grants_it() {
        let mut machine =
            PartitionMachine::new(Locks::default(), PartitionMachineSettings::default());
        assert_eq!(
            apply(&mut machine, single(1, b"l\x05\x01")),
            PartitionResult::Executed(b"granted".to_vec())
        );
        assert_eq!(
            apply(&mut machine, single(2, b"l\x05\x02")),
            PartitionResult::Held
        );
        assert_eq!(
            apply(&mut machine, single(3, b"l\x05\x03")),
            PartitionResult::Held
        );
        assert_eq!(result_of(&machine, 2), PartitionResult::Held);
        let released_before = machine.released_after(0).count();
        assert!(!machine.finished());
        // A backup restored from this state goes on alike.
        let mut backup: PartitionMachine<Locks> =
            PartitionMachine::new(Locks::default(), PartitionMachineSettings::default());
        backup.restore(&machine.snapshot()).unwrap();
        for replica in [&mut machine, &mut backup] {
            apply(replica, share(1, 0, b"u\x05"));
            let released: Vec<Released> = replica
                .released_after(0)
                .skip(released_before)
                .map(|(_, released)| released.clone())
                .collect();
            assert!(released.contains(&Released::Single {
                client: ClientId(2),
                number: RequestNumber(1),
                result: b"granted".to_vec(),
            }));
            assert!(!released.iter().any(|released| matches!(
                released,
                Released::Single {
                    client: ClientId(3),
                    ..
                }
            )));
            assert_eq!(
                result_of(replica, 2),
                PartitionResult::Executed(b"granted".to_vec())
            );
            assert_eq!(result_of(replica, 3), PartitionResult::Held);
            // 3's transaction moves on: let go, released with its refusal (once the
            // watermark covers the share, which the operation on its key waits for).
            apply(replica, PartitionOperation::Watermark(Timestamp(1)));
            apply(replica, single(4, b"x\x05\x03"));
            assert_eq!(
                result_of(replica, 3),
                PartitionResult::Executed(b"refused".to_vec())
            );
            assert!(replica.parked.is_empty());
        }
        assert_eq!(machine.snapshot(), backup.snapshot());
        // A share's parked operation: its refusal is its answer, nothing stays parked.
        apply(&mut machine, share(2, 1, b"l\x05\x06"));
        assert_eq!(
            machine.answers.get(&Timestamp(2)),
            Some(&b"refused".to_vec())
        );
        assert!(machine.data.waiting.is_empty() && machine.parked.is_empty());
    }

    fn jobs_machine(live: bool) -> PartitionMachine<Bytes> {
        let settings = PartitionMachineSettings {
            read_jobs: true,
            job_reads_live: live,
            ..PartitionMachineSettings::default()
        };
        PartitionMachine::new(Bytes::default(), settings)
    }

    fn result_of<D: PartitionData + Serialize + DeserializeOwned>(
        machine: &PartitionMachine<D>,
        client: u64,
    ) -> PartitionResult {
        let query = PartitionOperation::Query(PartitionQuery::Result {
            client: ClientId(client),
            number: RequestNumber(1),
        });
        PartitionResult::decode(&machine.query(&query.encode()))
    }

    /// Jobs of consecutive entries with no change to the data between them carry one
    /// generation; a batched write between two jobs links them (`preceding`); any other change
    /// (an unbatched write, a restore) cuts the chain. A chain runs together as its jobs run
    /// alone, each read at its place among the writes.
    #[test]
    fn read_jobs_chained_over_batched_writes_run_together_as_they_run_alone() {
        let mut machine = jobs_machine(false);
        apply(&mut machine, single(1, b"pa\x01"));
        assert_eq!(
            batch(&mut machine, &[single(2, b"ga")]),
            vec![PartitionResult::Held]
        );
        assert_eq!(
            batch(&mut machine, &[single(3, b"ga"), single(4, b"gb")]),
            vec![PartitionResult::Held, PartitionResult::Held]
        );
        // A batched write, then a read in the same entry and one in the next.
        assert_eq!(
            batch(&mut machine, &[single(5, b"pa\x02"), single(6, b"ga")]),
            vec![PartitionResult::Executed(vec![1]), PartitionResult::Held]
        );
        assert_eq!(
            batch(&mut machine, &[single(7, b"pb\x03"), single(8, b"pa\x04")]),
            vec![
                PartitionResult::Executed(vec![]),
                PartitionResult::Executed(vec![2])
            ]
        );
        assert_eq!(
            batch(&mut machine, &[single(9, b"ga"), single(10, b"gb")]),
            vec![PartitionResult::Held; 2]
        );
        // An unbatched write cuts the chain.
        apply(&mut machine, single(11, b"pa\x05"));
        assert_eq!(
            batch(&mut machine, &[single(12, b"ga")]),
            vec![PartitionResult::Held]
        );
        let jobs: Vec<ReadJob<Bytes>> = machine.jobs_after(0).map(|(_, job)| job.clone()).collect();
        assert_eq!(jobs.len(), 5);
        assert_eq!(
            jobs[0].generation(),
            jobs[1].generation(),
            "no change between them"
        );
        assert!(jobs[0].chains_to(&jobs[1]) && jobs[1].chains_to(&jobs[2]));
        assert!(
            jobs[2].chains_to(&jobs[3]),
            "two entries of batched writes between them"
        );
        assert_ne!(jobs[2].generation(), jobs[3].generation());
        assert!(
            !jobs[3].chains_to(&jobs[4]),
            "an unbatched write between them"
        );
        assert!(
            jobs[0].chains_to(&jobs[2]),
            "jobs 0 and 1 read the same data, so both link to 2"
        );
        assert!(!jobs[3].chains_to(&jobs[2]), "a link goes forward only");
        let chain: Vec<&ReadJob<Bytes>> = jobs[..4].iter().collect();
        let alone: Vec<Vec<Vec<u8>>> = chain.iter().map(|job| job.run()).collect();
        assert_eq!(ReadJob::run_together(&chain), alone);
        // Each read saw the writes before it: a = 1, 1, 2, 4; b = none, 3.
        assert_ne!(alone[0], alone[2]);
        assert_ne!(alone[2], alone[3]);
        assert_eq!(ReadJob::run_together(&[&jobs[4]]), vec![jobs[4].run()]);
        assert!(ReadJob::<Bytes>::run_together(&[]).is_empty());
        let generation = jobs[4].generation();
        let snapshot = machine.snapshot();
        machine.restore(&snapshot).expect("its own snapshot");
        assert_eq!(
            batch(&mut machine, &[single(13, b"ga")]),
            vec![PartitionResult::Held]
        );
        let after: Vec<&ReadJob<Bytes>> = machine.jobs_after(0).map(|(_, job)| job).collect();
        assert_eq!(after.len(), 1);
        assert!(
            after[0].generation() > generation,
            "a restore starts a new generation"
        );
        assert!(!jobs[4].chains_to(after[0]));
    }

    /// Read jobs (`PartitionMachineSettings::read_jobs`): reads of an entry are answered
    /// `Held` and handed out with a copy of the data at their place; the write between them
    /// executes at once; replies are released only once their job is done, in release order;
    /// results are those of the copies, whatever was written since and in whatever order the
    /// jobs finish; a snapshot taken with jobs open is the snapshot with them done.
    #[test]
    fn a_read_job_answers_at_its_place_in_the_log_and_releases_only_when_done() {
        for live in [false, true] {
            let mut machine = jobs_machine(live);
            apply(&mut machine, single(1, b"pa\x01"));
            let results = batch(
                &mut machine,
                &[single(4, b"ga"), single(5, b"pa\x02"), single(6, b"ga")],
            );
            assert_eq!(
                results,
                vec![
                    PartitionResult::Held,
                    PartitionResult::Executed(vec![1]),
                    PartitionResult::Held
                ]
            );
            let jobs: Vec<(u64, ReadJob<Bytes>)> = machine
                .jobs_after(0)
                .map(|(number, job)| (number, job.clone()))
                .collect();
            assert_eq!(jobs.len(), 2, "two runs of reads, split by the write");
            assert_eq!(
                machine.released_after(0).count(),
                0,
                "nothing before its job"
            );
            assert_eq!(result_of(&machine, 4), PartitionResult::Held);
            // A later write does not change what the jobs read.
            assert_eq!(
                batch(&mut machine, &[single(7, b"pa\x09")]),
                vec![PartitionResult::Executed(vec![2])]
            );
            let complete = machine.snapshot();
            let mut finished = machine.clone();
            finished.finish_jobs_here();
            if !live {
                assert_eq!(complete, finished.snapshot(), "a snapshot runs open jobs");
            }
            // The second job finishes first: its reply waits for the first's.
            let (second, second_job) = &jobs[1];
            machine.job_done(*second, second_job.run());
            assert_eq!(
                machine.released_after(0).count(),
                0,
                "release order is kept"
            );
            let (first, first_job) = &jobs[0];
            machine.job_done(*first, first_job.run());
            machine.job_done(*first, vec![vec![7]]); // Done already: ignored.
            let released: Vec<Released> = machine
                .released_after(0)
                .map(|(_, released)| released.clone())
                .collect();
            let expected = |value_4: u8, value_6: u8| {
                vec![
                    Released::Single {
                        client: ClientId(4),
                        number: RequestNumber(1),
                        result: vec![value_4],
                    },
                    Released::Single {
                        client: ClientId(6),
                        number: RequestNumber(1),
                        result: vec![value_6],
                    },
                ]
            };
            if live {
                // The canary reads the state when the job comes back: caught.
                assert_eq!(released, expected(9, 9));
                continue;
            }
            assert_eq!(released, expected(1, 2));
            assert_eq!(result_of(&machine, 4), PartitionResult::Executed(vec![1]));
            assert_eq!(machine.jobs_open(), 0);
            assert_eq!(machine.snapshot(), complete);
        }
    }

    /// A logged `Query` is answered alike on every replica: open jobs before it run first. A
    /// share's answer read on the read path while its job is open is `Held`. `restore` drops
    /// open jobs (the snapshot is complete) and keeps the numbering.
    #[test]
    fn a_logged_query_runs_open_jobs_and_restore_forgets_them() {
        let mut machine = jobs_machine(false);
        apply(&mut machine, single(1, b"pb\x05"));
        assert_eq!(
            batch(&mut machine, &[share(1, 0, b"gb")]),
            vec![PartitionResult::Logged {
                admitted: Timestamp(1)
            }]
        );
        assert_eq!(machine.jobs_open(), 1);
        let answer = PartitionOperation::Query(PartitionQuery::Answer {
            timestamp: Timestamp(1),
        });
        assert_eq!(
            PartitionResult::decode(&machine.query(&answer.encode())),
            PartitionResult::Held
        );
        let mut other = machine.clone();
        assert_eq!(
            batch(&mut machine, std::slice::from_ref(&answer)),
            vec![PartitionResult::Executed(vec![5])]
        );
        assert_eq!(machine.jobs_open(), 0);
        assert_eq!(machine.released_after(0).count(), 1);
        // A replica restored from that state forgets its open job; its late result is ignored.
        let (number, _) = other
            .jobs_after(0)
            .next()
            .map(|(n, j)| (n, j.clone()))
            .unwrap();
        other.restore(&machine.snapshot()).unwrap();
        assert_eq!(other.jobs_open(), 0);
        other.job_done(number, vec![vec![0]]);
        assert_eq!(other.snapshot(), machine.snapshot());
        assert_eq!(
            batch(&mut other, &[share(2, 1, b"gb")]),
            vec![PartitionResult::Logged {
                admitted: Timestamp(2)
            }]
        );
        assert!(
            other.jobs_after(0).all(|(later, _)| later > number),
            "numbering continues"
        );
    }

    #[test]
    fn an_unheld_operation_is_answered_by_its_own_entry() {
        let mut machine = machine();
        assert_eq!(
            apply(&mut machine, single(1, b"pa\x07")),
            PartitionResult::Executed(Vec::new())
        );
        assert_eq!(
            apply(&mut machine, single(2, b"ga")),
            PartitionResult::Executed(vec![7])
        );
        assert_eq!(machine.released_after(0).count(), 0);
    }

    #[test]
    fn a_held_operation_is_answered_held_and_its_result_is_released_later() {
        let mut machine = machine();
        assert_eq!(
            apply(&mut machine, share(1, 0, b"pa\x09")),
            PartitionResult::Logged {
                admitted: Timestamp(1)
            }
        );
        // The share's answer is released to the message's sender.
        let released: Vec<Released> = machine
            .released_after(0)
            .map(|(_, released)| released.clone())
            .collect();
        assert_eq!(
            released,
            vec![Released::Answer {
                sender: ProcessId(50),
                sequence: Sequence(1),
                timestamp: Timestamp(1),
                result: Vec::new(),
            }]
        );
        assert_eq!(apply(&mut machine, single(4, b"ga")), PartitionResult::Held);
        let query = PartitionOperation::Query(PartitionQuery::Result {
            client: ClientId(4),
            number: RequestNumber(1),
        });
        assert_eq!(
            PartitionResult::decode(&machine.query(&query.encode())),
            PartitionResult::Held
        );
        apply(&mut machine, PartitionOperation::Watermark(Timestamp(1)));
        let released: Vec<(u64, Released)> = machine.released_after(1).cloned().collect();
        assert_eq!(
            released,
            vec![(
                2,
                Released::Single {
                    client: ClientId(4),
                    number: RequestNumber(1),
                    result: vec![9],
                }
            )]
        );
        assert_eq!(
            PartitionResult::decode(&machine.query(&query.encode())),
            PartitionResult::Executed(vec![9])
        );
        let answer = PartitionOperation::Query(PartitionQuery::Answer {
            timestamp: Timestamp(1),
        });
        assert_eq!(
            PartitionResult::decode(&machine.query(&answer.encode())),
            PartitionResult::Executed(Vec::new())
        );
    }

    fn snapshot_read(client: u64, at: u64, operation: &[u8]) -> PartitionOperation {
        PartitionOperation::Snapshot {
            client: ClientId(client),
            number: RequestNumber(1),
            at: Timestamp(at),
            operation: operation.to_vec(),
        }
    }

    /// A snapshot read at 2 logged while the chain is at 1 is held, sees the share at 2
    /// (logged after it) and is released with that value when the chain reaches 2; a read at
    /// 2 after the share at 3 executed is refused; one at 3 answers at once.
    #[test]
    fn a_snapshot_read_answers_the_state_at_its_timestamp_or_is_refused() {
        let mut machine = machine();
        apply(&mut machine, share(1, 0, b"pa\x05"));
        assert_eq!(
            apply(&mut machine, snapshot_read(7, 2, b"ga")),
            PartitionResult::Held
        );
        let query = PartitionOperation::Query(PartitionQuery::Result {
            client: ClientId(7),
            number: RequestNumber(1),
        });
        assert_eq!(
            PartitionResult::decode(&machine.query(&query.encode())),
            PartitionResult::Held
        );
        let sent = machine.released_after(0).last().map(|(number, _)| *number);
        // The share at 2 completes the chain up to the read's timestamp: it executes, then the
        // read, released with the value at 2.
        apply(&mut machine, share(2, 1, b"pa\x06"));
        let released: Vec<Released> = machine
            .released_after(sent.unwrap())
            .map(|(_, released)| released.clone())
            .collect();
        assert_eq!(
            released,
            vec![
                Released::Answer {
                    sender: ProcessId(50),
                    sequence: Sequence(2),
                    timestamp: Timestamp(2),
                    result: vec![5],
                },
                Released::Single {
                    client: ClientId(7),
                    number: RequestNumber(1),
                    result: vec![6],
                },
            ]
        );
        apply(&mut machine, share(3, 2, b"pa\x08"));
        assert_eq!(
            PartitionResult::decode(&machine.query(&query.encode())),
            PartitionResult::Executed(vec![6])
        );
        assert_eq!(
            apply(&mut machine, snapshot_read(8, 2, b"ga")),
            PartitionResult::SnapshotPassed {
                executed: Timestamp(3)
            }
        );
        assert_eq!(
            apply(&mut machine, snapshot_read(9, 3, b"ga")),
            PartitionResult::Executed(vec![8])
        );
    }

    #[test]
    fn garbage_is_an_error_result_and_changes_nothing() {
        let mut machine = machine();
        apply(&mut machine, share(1, 0, b"pa\x09"));
        let before = machine.snapshot();
        for bytes in [
            &[][..],
            &[9, 1, 2][..],
            &[PARTITION_FORMAT_VERSION, 0xff, 0xff, 0xff][..],
        ] {
            assert!(matches!(
                PartitionResult::decode(&machine.apply(bytes)),
                PartitionResult::Error(_)
            ));
            assert!(matches!(
                PartitionResult::decode(&machine.query(bytes)),
                PartitionResult::Error(_)
            ));
        }
        assert_eq!(machine.snapshot(), before);
        assert!(matches!(
            PartitionResult::decode(&machine.query(&single(1, b"ga").encode())),
            PartitionResult::Error(_)
        ));
        // Unknown operation bytes inside a valid op: unknown keys, held like anything else.
        assert_eq!(apply(&mut machine, single(3, b"??")), PartitionResult::Held);
    }

    #[test]
    fn the_nilext_gate_closes_for_an_uncovered_conflicting_delivery_until_the_watermark() {
        let mut machine = machine();
        let gate = |machine: &PartitionMachine<Bytes>, operation: &[u8]| {
            machine.nilext_gate(&single(9, operation).encode())
        };
        assert_eq!(gate(&machine, b"pa\x01"), vr::NilextGate::Clear);
        // m1 writes a: admitted, not covered.
        apply(&mut machine, share(1, 0, b"pa\x09"));
        assert_eq!(gate(&machine, b"pa\x01"), vr::NilextGate::Closed);
        assert_eq!(gate(&machine, b"pb\x01"), vr::NilextGate::Clear);
        assert_eq!(apply(&mut machine, single(4, b"ga")), PartitionResult::Held);
        assert_eq!(gate(&machine, b"pb\x01"), vr::NilextGate::Clear);
        // An op of unknown keys waits (it conflicts with m1): everything after it would wait
        // behind it (rule O), so b is closed too.
        assert_eq!(apply(&mut machine, single(5, b"??")), PartitionResult::Held);
        assert_eq!(gate(&machine, b"pb\x01"), vr::NilextGate::Closed);
        // Non-single ops are never acknowledged early.
        assert_eq!(
            machine.nilext_gate(&PartitionOperation::Watermark(Timestamp(1)).encode()),
            vr::NilextGate::Closed
        );
        assert_eq!(machine.nilext_gate(b"garbage"), vr::NilextGate::Closed);
        // The watermark covers m1: everything runs, a and b are clear.
        apply(&mut machine, PartitionOperation::Watermark(Timestamp(1)));
        assert_eq!(gate(&machine, b"pa\x01"), vr::NilextGate::Clear);
        assert_eq!(gate(&machine, b"pb\x01"), vr::NilextGate::Clear);
    }

    /// Found by the simulator (`--ecast --partitions skyros`, seed 1000330): m2 waits in the
    /// chain's buffer for m1; a delivery of m1 ordered before the write (pending at the
    /// primary, keys disjoint from it) logs m2 first, and rule H then holds the write. So a
    /// buffered message's keys close the gate too.
    #[test]
    fn the_nilext_gate_closes_for_a_message_buffered_ahead_of_a_gap() {
        let mut machine = machine();
        apply(&mut machine, share(2, 1, b"pa\x09"));
        assert_eq!(machine.rules().logged(), Timestamp(0), "m2 is buffered");
        assert_eq!(
            machine.nilext_gate(&single(9, b"pa\x01").encode()),
            vr::NilextGate::Closed
        );
        assert_eq!(
            machine.nilext_gate(&single(9, b"pb\x01").encode()),
            vr::NilextGate::Clear
        );
        // m1 arrives and logs m2 behind it: a write of a logged now is held.
        apply(&mut machine, share(1, 0, b"pc\x01"));
        assert_eq!(
            apply(&mut machine, single(9, b"pa\x01")),
            PartitionResult::Held
        );
    }

    #[test]
    fn keys_cover_singles_and_deliveries_and_nothing_else() {
        let machine = machine();
        assert_eq!(
            machine.keys(&single(1, b"pa\x01").encode()),
            Some(vec![b"a".to_vec()])
        );
        assert_eq!(machine.keys(&single(1, b"??").encode()), None);
        let two = PartitionOperation::Deliveries(vec![
            Share {
                timestamp: Timestamp(1),
                previous: Timestamp(0),
                sender: ProcessId(50),
                sequence: Sequence(1),
                operation: b"pa\x01".to_vec(),
            },
            Share {
                timestamp: Timestamp(2),
                previous: Timestamp(1),
                sender: ProcessId(50),
                sequence: Sequence(2),
                operation: b"gb".to_vec(),
            },
        ]);
        assert_eq!(
            machine.keys(&two.encode()),
            Some(vec![b"a".to_vec(), b"b".to_vec()])
        );
        let watermark = PartitionOperation::Watermark(Timestamp(3));
        assert_eq!(machine.keys(&watermark.encode()), Some(Vec::new()));
        assert_eq!(machine.keys(b"garbage"), None);
    }

    #[test]
    fn an_operation_that_runs_at_once_is_not_refused_for_the_waiting_bound() {
        let mut machine = PartitionMachine::new(
            Bytes::default(),
            PartitionMachineSettings {
                rules: PartitionSettings {
                    waiting_max: 1,
                    ..PartitionSettings::default()
                },
                ..PartitionMachineSettings::default()
            },
        );
        apply(&mut machine, share(1, 0, b"pa\x09"));
        assert_eq!(apply(&mut machine, single(4, b"ga")), PartitionResult::Held);
        // Full: another conflicting op is refused, but a clear one (which a Skyros primary may
        // have acknowledged) runs.
        assert_eq!(
            apply(&mut machine, single(5, b"pa\x02")),
            PartitionResult::Unknown
        );
        assert_eq!(
            apply(&mut machine, single(6, b"pb\x02")),
            PartitionResult::Executed(Vec::new())
        );
    }

    #[test]
    fn a_snapshot_restores_the_rules_the_tables_and_the_queue() {
        let mut machine = machine();
        apply(&mut machine, share(1, 0, b"pa\x09"));
        apply(&mut machine, single(4, b"ga"));
        let mut other = self::machine();
        other.restore(&machine.snapshot()).expect("restores");
        assert_eq!(other, machine);
        assert!(other.restore(b"garbage").is_err());
        assert_eq!(other, machine, "a failed restore changes nothing");
    }

    fn low() -> PositionSet {
        PositionSet::from_inclusive(Position(0), Position(100))
    }

    fn high() -> PositionSet {
        PositionSet::from_inclusive(Position(101), Position(255))
    }

    fn cut(timestamp: u64, previous: u64, cut: PartitionCut) -> PartitionOperation {
        PartitionOperation::Cut {
            share: Share {
                timestamp: Timestamp(timestamp),
                previous: Timestamp(previous),
                sender: ProcessId(60),
                sequence: Sequence(timestamp),
                operation: Vec::new(),
            },
            cut,
        }
    }

    fn released(machine: &PartitionMachine<Bytes>, after: u64) -> Vec<Released> {
        machine
            .released_after(after)
            .map(|(_, released)| released.clone())
            .filter(|released| !matches!(released, Released::Answer { .. }))
            .collect()
    }

    /// Skyros over a reconfigured group (found at the merge of Skyros partitions and Rubberband
    /// over partitions: 385 of 20,000 `--partitions skyros` seeds failed without it): a nilext
    /// write to a key the group gave away would be answered `Moved` when it executes, so it must
    /// not be acknowledged before it is ordered; one to a key the group still holds may be.
    #[test]
    fn the_nilext_gate_is_closed_for_keys_a_cut_moved_away() {
        use vr::{NilextGate, StateMachine};
        let mut machine = machine().with_holdings(PositionSet::whole());
        let gate = |machine: &PartitionMachine<Bytes>, operation: &[u8]| {
            machine.nilext_gate(&single(9, operation).encode())
        };
        assert_eq!(gate(&machine, b"pz\x01"), NilextGate::Clear);
        let k = PartitionCut {
            version: ConfigVersion(1),
            holds: low(),
            sends: vec![(ProcessId(2), high())],
            receives: Vec::new(),
        };
        apply(&mut machine, cut(1, 0, k));
        apply(&mut machine, PartitionOperation::Watermark(Timestamp(1)));
        assert_eq!(machine.version(), ConfigVersion(1));
        assert_eq!(gate(&machine, b"pz\x01"), NilextGate::Closed, "moved away");
        assert_eq!(gate(&machine, b"pa\x01"), NilextGate::Clear, "still held");
    }

    #[test]
    fn a_retired_group_is_finished_only_once_its_copy_is_acknowledged() {
        // Above replication 1 a retired group cuts to holding nothing and sends its whole arc.
        let mut retired = machine().with_holdings(PositionSet::whole());
        assert!(!retired.finished(), "a group that never cut");
        apply(&mut retired, share(1, 0, b"pz\x05"));
        let retire = PartitionCut {
            version: ConfigVersion(1),
            holds: PositionSet::empty(),
            sends: vec![(ProcessId(9), PositionSet::whole())],
            receives: Vec::new(),
        };
        apply(&mut retired, cut(2, 1, retire));
        assert!(!retired.finished(), "the cut is logged, not executed");
        apply(&mut retired, PartitionOperation::Watermark(Timestamp(2)));
        assert_eq!(retired.version(), ConfigVersion(1));
        assert_eq!(retired.outgoing().count(), 1);
        assert!(!retired.finished(), "its copy is not acknowledged");
        assert_eq!(
            apply(&mut retired, single(7, b"pz\x06")),
            PartitionResult::Moved
        );
        apply(
            &mut retired,
            PartitionOperation::Installed {
                version: ConfigVersion(1),
                to: ProcessId(9),
            },
        );
        assert!(retired.finished());
        // A started group waiting for its copy is not finished either.
        let mut started = machine().with_holdings(PositionSet::empty());
        let start = PartitionCut {
            version: ConfigVersion(1),
            holds: PositionSet::whole(),
            sends: Vec::new(),
            receives: vec![ProcessId(3)],
        };
        apply(&mut started, cut(1, 0, start));
        apply(&mut started, PartitionOperation::Watermark(Timestamp(1)));
        assert_eq!(started.installing().len(), 1);
        assert!(!started.finished());
    }

    /// Sim seed 2172: a started group installed a copy and answered `Installed` once; the
    /// answer reached no primary of the sender (a view change), the group then retired,
    /// finished and stopped, and the sender's new primary resent the copy to stopped replicas
    /// for ever. A stopped replica's tombstone now acknowledges it, as the running one did.
    #[test]
    fn a_stopped_receiver_acknowledges_a_resent_copy_as_its_running_replica_did() {
        let v1 = ConfigVersion(1);
        // Group 3 retires at version 1 and sends its whole arc to group 4.
        let mut sender = machine().with_holdings(PositionSet::whole());
        apply(&mut sender, share(1, 0, b"pz\x05"));
        let retire = PartitionCut {
            version: v1,
            holds: PositionSet::empty(),
            sends: vec![(ProcessId(4), PositionSet::whole())],
            receives: Vec::new(),
        };
        apply(&mut sender, cut(2, 1, retire));
        apply(&mut sender, PartitionOperation::Watermark(Timestamp(2)));
        let (_, _, records) = sender.outgoing().next().expect("the copy is owed");
        let records = records.clone();
        // Group 4 starts at version 1, installs the copy, retires at version 2 (its copy to
        // group 5 acknowledged) and finishes.
        let mut receiver = machine().with_holdings(PositionSet::empty());
        let start = PartitionCut {
            version: v1,
            holds: PositionSet::whole(),
            sends: Vec::new(),
            receives: vec![ProcessId(3)],
        };
        apply(&mut receiver, cut(2, 0, start));
        let install = PartitionOperation::Install {
            version: v1,
            from: ProcessId(3),
            records,
        };
        assert_eq!(
            apply(&mut receiver, install.clone()),
            PartitionResult::Installed
        );
        let retire = PartitionCut {
            version: ConfigVersion(2),
            holds: PositionSet::empty(),
            sends: vec![(ProcessId(5), PositionSet::whole())],
            receives: Vec::new(),
        };
        apply(&mut receiver, cut(3, 2, retire));
        apply(&mut receiver, PartitionOperation::Watermark(Timestamp(3)));
        apply(
            &mut receiver,
            PartitionOperation::Installed {
                version: ConfigVersion(2),
                to: ProcessId(5),
            },
        );
        assert!(receiver.finished(), "group 4 owes nothing");
        // The running replica answers the resent copy `Installed` (its sender logs that)...
        assert_eq!(
            apply(&mut receiver.clone(), install),
            PartitionResult::Installed
        );
        // ...and so does its tombstone, once the lifecycle stopped it.
        let replica: vr::Replica<PartitionMachine<Bytes>> = vr::Replica::new(
            vr::Config::new(3, vr::Durability::Memory),
            vr::ReplicaIndex(0),
            receiver,
        );
        let state = crate::group_lifecycle::ReplicaState::of(&replica);
        let mut lifecycle = crate::group_lifecycle::GroupLifecycle::new(10);
        let group = ProcessId(4);
        assert_eq!(
            lifecycle.running(group, state, 100),
            crate::group_lifecycle::Fate::Keep
        );
        assert_eq!(
            lifecycle.running(group, state, 110),
            crate::group_lifecycle::Fate::Stop
        );
        let tombstone = crate::group_lifecycle::Tombstone::of(&replica);
        assert!(tombstone.acknowledges_copy(v1));
        assert!(
            !tombstone.acknowledges_copy(ConfigVersion(3)),
            "no copy of a version past its last cut was ever installed"
        );
        // The acknowledgement frees the sender.
        apply(
            &mut sender,
            PartitionOperation::Installed {
                version: v1,
                to: ProcessId(4),
            },
        );
        assert!(sender.finished());
    }

    #[test]
    fn a_cut_sends_the_state_at_k_and_moves_later_singles_away() {
        // Group 1 holds everything and gives the high half (key b'z' = 122) to group 2 at K.
        let mut machine = machine().with_holdings(PositionSet::whole());
        apply(&mut machine, share(1, 0, b"pz\x05"));
        // Logged before K, held by rule H until W >= 1: it executes before the cut.
        assert_eq!(
            apply(&mut machine, single(7, b"pz\x06")),
            PartitionResult::Held
        );
        let k = PartitionCut {
            version: ConfigVersion(1),
            holds: low(),
            sends: vec![(ProcessId(2), high())],
            receives: Vec::new(),
        };
        apply(&mut machine, cut(2, 1, k));
        // Logged after K: waits behind it, then finds its key moved.
        assert_eq!(
            apply(&mut machine, single(8, b"pz\x08")),
            PartitionResult::Held
        );
        assert!(
            machine.outgoing().next().is_none(),
            "K has not executed yet"
        );
        apply(&mut machine, PartitionOperation::Watermark(Timestamp(1)));
        assert_eq!(machine.version(), ConfigVersion(1));
        // W >= t(K) releases the single held behind K (rule H): its key has moved.
        apply(&mut machine, PartitionOperation::Watermark(Timestamp(2)));
        let copies: Vec<(ConfigVersion, ProcessId, Vec<u8>)> = machine
            .outgoing()
            .map(|(version, to, records)| (version, to, records.clone()))
            .collect();
        let records: Vec<(u8, u8)> = postcard::to_allocvec(&vec![(b'z', 6u8)])
            .map(|bytes| postcard::from_bytes(&bytes).expect("decodes"))
            .expect("encodes");
        assert_eq!(
            copies,
            vec![(
                ConfigVersion(1),
                ProcessId(2),
                postcard::to_allocvec(&records).expect("encodes")
            )]
        );
        assert!(machine.data().0.is_empty(), "the moved key is dropped");
        assert_eq!(
            released(&machine, 0),
            vec![
                Released::Single {
                    client: ClientId(7),
                    number: RequestNumber(1),
                    result: vec![5],
                },
                Released::Moved {
                    client: ClientId(8),
                    number: RequestNumber(1)
                },
            ]
        );
        let query = PartitionOperation::Query(PartitionQuery::Result {
            client: ClientId(8),
            number: RequestNumber(1),
        });
        assert_eq!(
            PartitionResult::decode(&machine.query(&query.encode())),
            PartitionResult::Moved
        );
        // Later singles: moved keys are refused at once, held keys execute.
        assert_eq!(
            apply(&mut machine, single(9, b"gz")),
            PartitionResult::Moved
        );
        assert_eq!(
            apply(&mut machine, single(10, b"pa\x01")),
            PartitionResult::Executed(Vec::new())
        );
        // The receiver's acknowledgement drops the copy.
        apply(
            &mut machine,
            PartitionOperation::Installed {
                version: ConfigVersion(1),
                to: ProcessId(2),
            },
        );
        assert!(machine.outgoing().next().is_none());
    }

    pub(crate) fn receiving_group(settings: PartitionMachineSettings) -> PartitionMachine<Bytes> {
        let mut machine =
            PartitionMachine::new(Bytes::default(), settings).with_holdings(PositionSet::empty());
        let k = PartitionCut {
            version: ConfigVersion(1),
            holds: high(),
            sends: Vec::new(),
            receives: vec![ProcessId(1)],
        };
        apply(&mut machine, cut(2, 0, k));
        apply(&mut machine, PartitionOperation::Watermark(Timestamp(2)));
        machine
    }

    fn install(records: &[(u8, u8)]) -> PartitionOperation {
        PartitionOperation::Install {
            version: ConfigVersion(1),
            from: ProcessId(1),
            records: postcard::to_allocvec(&records.to_vec()).expect("encodes"),
        }
    }

    #[test]
    fn a_receiving_group_executes_nothing_until_its_copies_are_installed() {
        let mut machine = receiving_group(PartitionMachineSettings::default());
        assert_eq!(machine.installing().len(), 1);
        assert_eq!(apply(&mut machine, single(7, b"gz")), PartitionResult::Held);
        apply(&mut machine, share(3, 2, b"pz\x09"));
        assert_eq!(machine.deferred(), 2);
        assert!(machine.data().0.is_empty());
        // An install of a version the group has not cut yet is early.
        let early = PartitionOperation::Install {
            version: ConfigVersion(2),
            from: ProcessId(1),
            records: Vec::new(),
        };
        assert_eq!(apply(&mut machine, early), PartitionResult::Unknown);
        assert_eq!(
            apply(&mut machine, install(&[(b'z', 6)])),
            PartitionResult::Installed
        );
        assert_eq!(machine.deferred(), 0);
        assert_eq!(
            released(&machine, 0),
            vec![Released::Single {
                client: ClientId(7),
                number: RequestNumber(1),
                result: vec![6],
            }]
        );
        assert_eq!(machine.data().0.get(&b'z'), Some(&9));
        // A resent install is acknowledged again and changes nothing.
        assert_eq!(
            apply(&mut machine, install(&[(b'z', 6)])),
            PartitionResult::Installed
        );
        assert_eq!(machine.data().0.get(&b'z'), Some(&9));
    }

    #[test]
    fn the_act_before_install_canary_reads_a_state_the_group_does_not_have() {
        let settings = PartitionMachineSettings {
            act_before_install: true,
            ..PartitionMachineSettings::default()
        };
        let mut machine = receiving_group(settings);
        assert_eq!(
            apply(&mut machine, single(7, b"gz")),
            PartitionResult::Executed(Vec::new()),
            "the canary reads before the copy: the value 6 is missed"
        );
    }

    #[test]
    fn a_snapshot_restores_the_keyspace_state() {
        let mut machine = receiving_group(PartitionMachineSettings::default());
        apply(&mut machine, single(7, b"gz"));
        let mut other = self::machine();
        other.restore(&machine.snapshot()).expect("restores");
        assert_eq!(other, machine);
    }

    /// A copy of 26 records (`Bytes::export`'s encoding) for the receiving group.
    fn big_copy() -> Vec<u8> {
        let records: Vec<(u8, u8)> = (b'a'..=b'z').map(|key| (key, key / 2)).collect();
        postcard::to_allocvec(&records).expect("encodes")
    }

    /// The receiving group after the whole copy installed as one `Install` (with a held read
    /// of `z` and a share writing it, deferred until then).
    fn installed_whole(records: &[u8]) -> PartitionMachine<Bytes> {
        let mut machine = receiving_group(PartitionMachineSettings::default());
        apply(&mut machine, single(7, b"gz"));
        apply(&mut machine, share(3, 2, b"pz\x09"));
        let whole = PartitionOperation::Install {
            version: ConfigVersion(1),
            from: ProcessId(1),
            records: records.to_vec(),
        };
        assert_eq!(apply(&mut machine, whole), PartitionResult::Installed);
        machine
    }

    fn parts(records: &[u8], part_bytes: usize) -> Vec<PartitionOperation> {
        install_parts(ConfigVersion(1), ProcessId(1), records, part_bytes)
    }

    #[test]
    fn a_copy_splits_at_fixed_offsets_into_bounded_parts() {
        let records = big_copy();
        for part_bytes in [1, 5, 7, records.len() - 1, records.len(), records.len() + 3] {
            let split = parts(&records, part_bytes);
            assert_eq!(split.len(), records.len().div_ceil(part_bytes));
            assert_eq!(split, parts(&records, part_bytes), "deterministic");
            let mut joined = Vec::new();
            for operation in &split {
                let PartitionOperation::InstallPart {
                    offset,
                    total,
                    bytes,
                    ..
                } = operation
                else {
                    panic!("a part");
                };
                assert_eq!(*offset, joined.len() as u64, "in order");
                assert_eq!(*total, records.len() as u64);
                assert!(!bytes.is_empty() && bytes.len() <= part_bytes, "bounded");
                joined.extend_from_slice(bytes);
            }
            assert_eq!(joined, records);
        }
        assert_eq!(parts(&[], 4).len(), 1, "an empty copy is one empty part");
    }

    #[test]
    fn a_copy_in_parts_installs_at_its_last_part_as_a_whole_install_would() {
        let records = big_copy();
        let whole = installed_whole(&records);
        let mut machine = receiving_group(PartitionMachineSettings::default());
        apply(&mut machine, single(7, b"gz"));
        apply(&mut machine, share(3, 2, b"pz\x09"));
        let split = parts(&records, 5);
        assert!(split.len() > 2);
        let last = split.len() - 1;
        for (index, part) in split.into_iter().enumerate() {
            let result = apply(&mut machine, part);
            if index < last {
                let received = (5 * (index + 1)) as u64;
                assert_eq!(result, PartitionResult::PartLogged { received });
                assert_eq!(
                    machine.install_received(ConfigVersion(1), ProcessId(1)),
                    Some(received)
                );
                assert!(
                    machine.data().0.is_empty(),
                    "nothing imported before the last part"
                );
                assert_eq!(machine.deferred(), 2, "executions still wait");
                assert_eq!(machine.installing().len(), 1);
            } else {
                assert_eq!(result, PartitionResult::Installed);
            }
        }
        assert_eq!(
            machine.install_received(ConfigVersion(1), ProcessId(1)),
            None
        );
        assert_eq!(machine, whole, "the same state as one whole install");
        assert_eq!(machine.data().0.get(&b'z'), Some(&9));
        assert_eq!(machine.data().0.get(&b'a'), Some(&(b'a' / 2)));
    }

    #[test]
    fn a_duplicate_part_changes_nothing_and_a_part_after_the_install_is_acknowledged() {
        let records = big_copy();
        let mut machine = receiving_group(PartitionMachineSettings::default());
        let split = parts(&records, 4);
        apply(&mut machine, split[0].clone());
        apply(&mut machine, split[1].clone());
        let before = machine.clone();
        assert_eq!(
            apply(&mut machine, split[0].clone()),
            PartitionResult::PartLogged { received: 8 }
        );
        assert_eq!(
            apply(&mut machine, split[1].clone()),
            PartitionResult::PartLogged { received: 8 }
        );
        assert_eq!(machine, before, "a duplicate part changes nothing");
        for part in &split[2..] {
            apply(&mut machine, part.clone());
        }
        assert!(machine.installing().is_empty());
        let installed = machine.clone();
        for part in &split {
            assert_eq!(
                apply(&mut machine, part.clone()),
                PartitionResult::Installed
            );
        }
        assert_eq!(
            machine, installed,
            "parts of an installed copy change nothing"
        );
    }

    #[test]
    fn an_out_of_order_or_foreign_part_is_refused_and_changes_nothing() {
        let records = big_copy();
        let mut machine = receiving_group(PartitionMachineSettings::default());
        let split = parts(&records, 4);
        let fresh = machine.clone();
        // A part before which one is missing.
        assert_eq!(
            apply(&mut machine, split[1].clone()),
            PartitionResult::Unknown
        );
        assert_eq!(machine, fresh, "refused: nothing remembered");
        apply(&mut machine, split[0].clone());
        let one = machine.clone();
        assert_eq!(
            apply(&mut machine, split[2].clone()),
            PartitionResult::Unknown
        );
        // A part running past the copy's total, an empty part of a non-empty copy, a part of
        // another total past the first.
        let forged = |offset: u64, total: u64, bytes: &[u8]| PartitionOperation::InstallPart {
            version: ConfigVersion(1),
            from: ProcessId(1),
            offset,
            total,
            bytes: bytes.to_vec(),
        };
        let total = records.len() as u64;
        assert_eq!(
            apply(&mut machine, forged(4, total, &vec![0; records.len()])),
            PartitionResult::Unknown
        );
        assert_eq!(
            apply(&mut machine, forged(4, total, &[])),
            PartitionResult::Unknown
        );
        assert_eq!(
            apply(&mut machine, forged(4, total + 1, &[1])),
            PartitionResult::Unknown
        );
        assert_eq!(
            apply(&mut machine, forged(u64::MAX, total, &[1])),
            PartitionResult::Unknown
        );
        assert_eq!(machine, one, "refused parts change nothing");
        // A part of a version the group has not cut to is early; an older one was installed.
        let early = PartitionOperation::InstallPart {
            version: ConfigVersion(2),
            from: ProcessId(1),
            offset: 0,
            total: 1,
            bytes: vec![0],
        };
        assert_eq!(apply(&mut machine, early), PartitionResult::Unknown);
        // The parts of another split (a primary with another part size) continue the copy.
        let other = parts(&records, 7);
        for part in &other[..other.len() - 1] {
            assert!(matches!(
                apply(&mut machine, part.clone()),
                PartitionResult::PartLogged { .. }
            ));
        }
        assert_eq!(
            apply(&mut machine, other[other.len() - 1].clone()),
            PartitionResult::Installed
        );
        assert_eq!(machine.data().0.len(), 26);
    }

    #[test]
    fn a_snapshot_mid_install_restores_the_parts_received() {
        let records = big_copy();
        let mut machine = receiving_group(PartitionMachineSettings::default());
        apply(&mut machine, single(7, b"gz"));
        apply(&mut machine, share(3, 2, b"pz\x09"));
        let split = parts(&records, 6);
        for part in &split[..2] {
            apply(&mut machine, part.clone());
        }
        let mut restored = self::machine();
        restored.restore(&machine.snapshot()).expect("restores");
        assert_eq!(restored, machine);
        assert_eq!(
            restored.install_received(ConfigVersion(1), ProcessId(1)),
            Some(12)
        );
        for part in &split[2..] {
            apply(&mut restored, part.clone());
        }
        assert_eq!(restored, installed_whole(&records));
    }

    /// A forged snapshot holding a copy received in parts that the group does not await (or a
    /// complete one not installed) is refused, not an assertion failure later.
    #[test]
    fn a_snapshot_with_a_copy_in_parts_not_awaited_is_refused() {
        let mut forged = machine();
        forged.receiving.insert(
            (ConfigVersion(0), ProcessId(3)),
            Receiving {
                total: 4,
                bytes: vec![1],
            },
        );
        assert_refused_changing_nothing(&forged.snapshot());
        let mut forged = receiving_group(PartitionMachineSettings::default());
        forged.receiving.insert(
            (ConfigVersion(1), ProcessId(1)),
            Receiving {
                total: 1,
                bytes: vec![1],
            },
        );
        assert_refused_changing_nothing(&forged.snapshot());
    }
}
