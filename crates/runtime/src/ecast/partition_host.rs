//! A storage process of a `vr` partitioned cluster (`tessera dev --protocol vr --nodes N`):
//! it hosts one replica of each partition whose arc it holds — a replica (`vr::Replication`;
//! today a `vr::Replica`) of `ecast::PartitionMachine<PartitionStore>` in the group of the
//! arc's `f` storage processes (diskless, like the routers) — and the RESP gateway.
//!
//! The routers see partitions, not processes, as E-Cast destinations
//! (`ClusterConfig::router_configuration`): a delivery to partition p reaches every member of
//! p (`Frame::PartitionDeliver`); the member whose replica is the primary of a normal view logs
//! it through VR as `PartitionOperation::Deliveries` (as a VR client of its own replica, one
//! request in flight), and confirms the admitted prefix from the committed result
//! (`PartitionResult::Logged`) to the router that delivered. Admitted shares' answers come out
//! of the machine's released queue, which the primary's driver drains after every step
//! (`released_after`), and go to the message's gateway as `Frame::Answer`, as in `sequenced`
//! mode. Backups drop deliveries; VR messages between replicas travel as `Frame::PartitionVr`
//! on the storage processes' E-Cast ports.
//!
//! The driver adds no protocol logic: gap-free admission, per-key order and the hold rules are
//! `ecast::Partition`'s, replication is `vr`'s. A crashed storage process is handled by VR view
//! change in each of its groups (no Suspect: the routers' failure detector is off in `vr`
//! mode); a restarted one starts every replica `Replica::recovering` with a fresh nonce and is
//! brought up to date by its group (VRR §4.3), so it rejoins under the same id.

use super::checkpoint::{self, Checkpoints};
use super::config::{ClusterConfig, ClusterDurability, PartitionGroup};
use super::durable::WalExecutor;
use super::gateway::GatewayStatus;
use super::link::{self, CopyReport, Frame, Links, ProgressReport, StreamReport};
use super::payload::KeyPlacement;
use super::read_jobs::{self, ReadJobs};
use super::stats;
use super::SenderId;
use crate::log;
use crate::os::random_u64;
use ecast::group_lifecycle::{self, Fate, GroupLifecycle, ReplicaState, Tombstone};
use ecast::partition_duty::{self, CutPlanning, DutyReply, PrimaryDuty};
use ecast::{
    Delivery, PartitionMachine, PartitionMachineSettings, PartitionResult, Released, Timestamp,
};
use placement::migration::StreamId;
use placement::{ConfigVersion, Group, Groups, PositionSet, ProcessId};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use vr::{
    ClientId, Effect, Input, Message, Nonce, Replica, ReplicaIndex, Replication, Reply, Request,
    StatusName,
};

/// A keyspace cut's copy travels in frames of at most this many bytes (`Frame::PartitionCopy`);
/// the receiving primary logs the reassembled copy as one `Install`.
pub const COPY_PART_BYTES: usize = 1 << 20;
/// A copy's parts at most (a peer announcing more is ignored): 4 GiB.
const COPY_PARTS_MAX: u32 = 4_096;
/// A copy not acknowledged is sent again after this long.
const COPY_RESEND_MS: u64 = 1_000;
/// Above replication 1: a retired group's replica stops this long after its machine is
/// `finished` (its last `Installed` committed), so that the primary's commit reaches the
/// backups first (they stop on their own once they execute it).
const STOP_AFTER_FINISHED_MS: u64 = 2_000;

use cluster::partition_store::record_count;
pub use cluster::partition_store::{decode_outcomes, encode_outcomes, PartitionStore};

type Machine = PartitionMachine<PartitionStore>;

/// One replica of one partition, hosted here: `R` is its replication protocol.
struct Hosted<R> {
    group: PartitionGroup,
    index: ReplicaIndex,
    replica: R,
    /// Set while the replica is the primary of a normal view (`ecast::partition_duty`).
    duty: Option<PrimaryDuty>,
    /// The ticket of this replica's checkpoint being serialised (`checkpoint`): a completion
    /// with another ticket belongs to a replica this one replaced, and is dropped.
    checkpoint_ticket: Option<u64>,
    /// The machine's read jobs started (`read_jobs`), by job number, with their tickets: a
    /// completion is given to the replica only if it started that job.
    jobs: BTreeMap<u64, u64>,
}

/// A copy being received, part by part (volatile: the sender resends what is not installed).
struct Incoming {
    parts: u32,
    received: BTreeMap<u32, Vec<u8>>,
}

/// Hidden, test-only (debug builds): `TESSERA_CANARY_BASIC_ANY_MEMBER` is set (the gateway
/// sends basic reads to any member, which answers from its executed state).
pub(super) fn canary_basic_any_member() -> bool {
    cfg!(debug_assertions) && std::env::var_os("TESSERA_CANARY_BASIC_ANY_MEMBER").is_some()
}

/// Starts storage process `id` of a `vr` cluster and its gateway; returns once both listen.
/// Its partition replicas are `vr::Replica<Machine>` (VR) or `vr::Replica<Machine, vr::Skyros>`
/// (VR composed with Skyros), picked by the partition groups' `vr::Config::protocol`
/// (`ClusterConfig::partition_protocol`, `skyros` partitions).
pub async fn start(config: ClusterConfig, id: ProcessId) -> Result<(), String> {
    match config.partition_protocol(1).protocol {
        vr::Protocol::Vr => host::<Replica<Machine>>(config, id).await,
        vr::Protocol::Skyros => host::<Replica<Machine, vr::Skyros>>(config, id).await,
    }
}

/// `start`, with partition groups replicated by `R`.
async fn host<R>(config: ClusterConfig, id: ProcessId) -> Result<(), String>
where
    R: Replication<Machine = Machine> + Send + 'static,
{
    // Diskless: a restarted process has forgotten everything; its replicas recover from
    // their groups.
    let super::storage::Opened {
        own,
        placement,
        restarted,
        listener,
        client_listener,
        pg_listener,
        security,
    } = super::storage::open(&config, id).await?;
    let super::storage::Serving {
        links,
        status,
        gateway: gateway_frames,
        frames: mut receiver,
    } = super::storage::serve(
        &config,
        id,
        listener,
        client_listener,
        pg_listener,
        security,
    );
    let mut partitions = BTreeMap::new();
    let (completions_sender, mut completions) = mpsc::unbounded_channel();
    let durable = config.durability == ClusterDurability::Disk;
    let wal = if durable {
        Some(WalExecutor::start(completions_sender)?)
    } else {
        None
    };
    if let Some(wal) = &wal {
        // Every replica this process hosted and did not drop has a log: it reopens each one,
        // and (the first time only) creates those of the cluster file's groups it is in.
        for file in GroupFile::all(&config, id)? {
            let hosted = open_durable(&config, id, &placement, &file, wal)?;
            partitions.insert(file.group.partition, hosted);
        }
        if !restarted {
            for group in config.partition_groups() {
                let Some(place) = group.members.iter().position(|member| *member == id) else {
                    continue;
                };
                let file = GroupFile {
                    group,
                    index: place as u8,
                    started: false,
                };
                file.write(&config, id)?;
                let hosted = open_durable(&config, id, &placement, &file, wal)?;
                partitions.insert(file.group.partition, hosted);
            }
        }
    }
    // Above replication 1 a restarted process starts no replica up front: the cluster file's
    // groups may have retired and stopped everywhere since (a replica of one would recover
    // forever, starting view changes nobody answers). It starts each group it is a member of,
    // recovering, on the first frame of it — a router's delivery, or a VR message of a
    // member: a running group's primary sends its backups commits within a heartbeat.
    let lazy = config.regrouped() && restarted && !durable;
    for group in config.partition_groups() {
        if lazy || durable {
            break;
        }
        let Some(place) = group.members.iter().position(|member| *member == id) else {
            continue;
        };
        let index = ReplicaIndex(place as u8);
        let protocol = config.partition_protocol(group.members.len());
        let machine = initial_machine(&config, &placement, &group.arc);
        let replica = if restarted {
            R::recovering(protocol, index, machine, Nonce(random_u64()))
        } else {
            R::create(protocol, index, machine)
        };
        partitions.insert(
            group.partition,
            Hosted {
                group,
                index,
                replica,
                duty: None,
                checkpoint_ticket: None,
                jobs: BTreeMap::new(),
            },
        );
    }
    log::info(format_args!(
        "storage process {} on {} (RESP on {}), {} partition replicas ({}): {:?}",
        id.0,
        own.address,
        own.client,
        partitions.len(),
        if restarted { "recovering" } else { "fresh" },
        partitions
            .values()
            .map(|hosted| (hosted.group.partition.0, hosted.index.0))
            .collect::<Vec<_>>()
    ));
    let tick_ms = config.tick_ms;
    let (checkpoints, mut checkpointed) = Checkpoints::new();
    let (read_jobs, mut jobs_done) = ReadJobs::new();
    let mut host = Host {
        checkpoints,
        read_jobs,
        id,
        config,
        links,
        gateway: gateway_frames,
        status,
        partitions,
        ticks: 0,
        canary_early: cfg!(debug_assertions)
            && std::env::var_os("TESSERA_CANARY_CONFIRM_BEFORE_COMMIT").is_some(),
        submitting: false,
        canary_basic_any_member: canary_basic_any_member(),
        canary_no_resend: cfg!(debug_assertions)
            && std::env::var_os("TESSERA_CANARY_NO_COPY_AFTER_VIEW_CHANGE").is_some(),
        observed: BTreeMap::new(),
        incoming: BTreeMap::new(),
        copy_delay_ticks: test_copy_delay_ms() / tick_ms.max(1),
        cut_at: BTreeMap::new(),
        placement,
        restarted,
        lifecycle: GroupLifecycle::new((STOP_AFTER_FINISHED_MS / tick_ms).max(1)),
        stopped: BTreeMap::new(),
        keyspace_at: BTreeMap::new(),
        copy_accounts: BTreeMap::new(),
        wal,
    };
    if lazy {
        // The version-0 groups, started lazily (above) from these descriptions.
        for group in Groups::initial(&host.config.initial_configuration()).groups() {
            if group.members.contains(&id) {
                host.lifecycle.learn(group);
            }
        }
    }
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(Duration::from_millis(tick_ms));
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        stats::start();
        loop {
            tokio::select! {
                _ = interval.tick() => {
                    let started = Instant::now();
                    host.on_tick();
                    stats::TURN_MAX_US.max(started.elapsed().as_micros() as u64);
                }
                frame = receiver.recv() => match frame {
                    Some(frame) => {
                        let started = Instant::now();
                        host.on_frame(frame);
                        stats::TURN_MAX_US.max(started.elapsed().as_micros() as u64);
                    }
                    None => return,
                },
                Some((log, sequence)) = completions.recv() => {
                    host.step(ProcessId(log), Input::Persisted { sequence });
                }
                Some(done) = checkpointed.recv() => host.on_checkpointed(done),
                Some(done) = jobs_done.recv() => {
                    let started = Instant::now();
                    host.on_job_done(done);
                    stats::TURN_MAX_US.max(started.elapsed().as_micros() as u64);
                }
            }
            stats::TURNS.add(1);
            host.publish();
        }
    });
    Ok(())
}

/// Hidden, test-only (debug builds, `TESSERA_TEST_COPY_DELAY_MS`): a sending group's primary
/// sends a cut's copies only this long after it saw the cut, which widens the window in which
/// the receiving group must defer (the real-process test runs with it).
fn test_copy_delay_ms() -> u64 {
    if !cfg!(debug_assertions) {
        return 0;
    }
    std::env::var("TESSERA_TEST_COPY_DELAY_MS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(0)
}

fn machine_settings() -> PartitionMachineSettings {
    let mut settings = PartitionMachineSettings {
        // Read-only SQL statements of the log run off the loop (`read_jobs`), unless
        // `TESSERA_READ_JOBS=0` (the before/after measurement of `docs/internals/scans.md`).
        read_jobs: std::env::var("TESSERA_READ_JOBS").map_or(true, |value| value != "0"),
        ..PartitionMachineSettings::default()
    };
    // Hidden, test-only (debug builds): a read job's results are computed from the live
    // state when they come back (the canary of `docs/internals/scans.md`).
    if cfg!(debug_assertions) && std::env::var_os("TESSERA_CANARY_JOB_READS_LIVE").is_some() {
        settings.job_reads_live = true;
    }
    // Hidden, test-only (debug builds): a group that receives copies at a keyspace cut acts
    // before they are installed (the real-process Rubberband test's canary).
    if cfg!(debug_assertions) && std::env::var_os("TESSERA_CANARY_ACT_BEFORE_INSTALL").is_some() {
        settings.act_before_install = true;
    }
    // Hidden, test-only (debug builds): a `skyros` group's nilext gate ignores keyspace cuts
    // (G3): it acknowledges nilext writes to keys the group gave away (the real-process
    // Rubberband test's canary for `skyros` partitions).
    if cfg!(debug_assertions) && std::env::var_os("TESSERA_CANARY_GATE_IGNORES_CUTS").is_some() {
        settings.gate_ignores_cuts = true;
    }
    // Hidden, test-only (debug builds): no rule H, the first counterexample of `ecast.md`
    // (the real-process test's canary for the bypass).
    if cfg!(debug_assertions) && std::env::var_os("TESSERA_CANARY_NO_HOLD").is_some() {
        settings.rules.canary = Some(ecast::PartitionCanary::NoHold);
    }
    // Hidden, test-only (debug builds): a snapshot read executes where it is logged, whatever
    // its timestamp (`resp_snapshot_cut.rs`'s canary: an MSET over several partitions is seen
    // half).
    if cfg!(debug_assertions) && std::env::var_os("TESSERA_CANARY_SNAPSHOT_ON_ARRIVAL").is_some() {
        settings.rules.canary = Some(ecast::PartitionCanary::SnapshotOnArrival);
    }
    settings
}

/// The machine of a group of the cluster file, holding `arc`.
fn initial_machine(config: &ClusterConfig, placement: &KeyPlacement, arc: &PositionSet) -> Machine {
    let store = PartitionStore::new(arc.clone(), placement.clone());
    if config.elastic_groups() || config.regrouped() {
        // Single-partition operations on keys a cut moved away are answered `Moved`.
        PartitionMachine::new(store.elastic(), machine_settings()).with_holdings(arc.clone())
    } else {
        PartitionMachine::new(store, machine_settings())
    }
}

/// The machine of a group a keyspace change started: it holds nothing until its install.
fn started_machine(placement: &KeyPlacement) -> Machine {
    let store = PartitionStore::new(PositionSet::empty(), placement.clone()).elastic();
    PartitionMachine::new(store, machine_settings()).with_holdings(PositionSet::empty())
}

/// Disk durability: what a storage process writes beside a partition replica's log, to
/// rebuild the replica when it starts again (its machine as it was before the log's first
/// record: a checkpoint in the log replaces it).
#[derive(Debug, Serialize, Deserialize)]
struct GroupFile {
    group: PartitionGroup,
    /// This replica's index in the group.
    index: u8,
    /// Started by a keyspace change (its machine held nothing), not one of the cluster file's.
    started: bool,
}

impl GroupFile {
    const NAME: &'static str = "group";

    fn groups(config: &ClusterConfig, id: ProcessId) -> std::path::PathBuf {
        config
            .data_dir
            .join(format!("storage-{}", id.0))
            .join("groups")
    }

    fn directory(
        config: &ClusterConfig,
        id: ProcessId,
        partition: ProcessId,
    ) -> std::path::PathBuf {
        GroupFile::groups(config, id).join(format!("{:016x}", partition.0))
    }

    /// Writes the file (and creates the log's directory), synced, before the log is opened.
    fn write(&self, config: &ClusterConfig, id: ProcessId) -> Result<(), String> {
        let directory = GroupFile::directory(config, id, self.group.partition);
        std::fs::create_dir_all(&directory)
            .map_err(|error| format!("{}: {error}", directory.display()))?;
        let path = directory.join(GroupFile::NAME);
        let bytes = postcard::to_allocvec(self).expect("group files serialise");
        let written = std::fs::File::create(&path).and_then(|mut file| {
            use std::io::Write;
            file.write_all(&bytes)?;
            file.sync_all()
        });
        written.map_err(|error| format!("{}: {error}", path.display()))
    }

    /// Every group file this process wrote and did not delete.
    fn all(config: &ClusterConfig, id: ProcessId) -> Result<Vec<GroupFile>, String> {
        let groups = GroupFile::groups(config, id);
        let entries = match std::fs::read_dir(&groups) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(format!("{}: {error}", groups.display())),
        };
        let mut files = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|error| format!("{}: {error}", groups.display()))?;
            let path = entry.path().join(GroupFile::NAME);
            let bytes = match std::fs::read(&path) {
                Ok(bytes) => bytes,
                // A directory whose file was never written completely: its log was never
                // opened, so the replica never ran here.
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
                Err(error) => return Err(format!("{}: {error}", path.display())),
            };
            let file: GroupFile = postcard::from_bytes(&bytes)
                .map_err(|error| format!("{}: {error}", path.display()))?;
            if file.group.members.get(usize::from(file.index)) != Some(&id) {
                return Err(format!("{}: not a group of this process", path.display()));
            }
            files.push(file);
        }
        files.sort_by_key(|file| file.group.partition);
        Ok(files)
    }
}

/// Opens a partition replica's log and the replica on it, and hands the log to the writer.
fn open_durable<R: Replication<Machine = Machine>>(
    config: &ClusterConfig,
    id: ProcessId,
    placement: &KeyPlacement,
    file: &GroupFile,
    wal: &WalExecutor,
) -> Result<Hosted<R>, String> {
    let directory = GroupFile::directory(config, id, file.group.partition).join("wal");
    let (state, committer) = super::durable::open(&directory, super::durable::RECORD_BYTES_MAX)?;
    let machine = if file.started {
        started_machine(placement)
    } else {
        initial_machine(config, placement, &file.group.arc)
    };
    let protocol = config.partition_protocol(file.group.members.len());
    let index = ReplicaIndex(file.index);
    let replica = R::open(protocol, index, machine, state)
        .map_err(|error| format!("{}: {error:?}", directory.display()))?;
    wal.register(file.group.partition.0, committer);
    Ok(Hosted {
        group: file.group.clone(),
        index,
        replica,
        duty: None,
        checkpoint_ticket: None,
        jobs: BTreeMap::new(),
    })
}

struct Host<R> {
    /// Serialises the hosted replicas' checkpoints off this loop.
    checkpoints: Checkpoints,
    /// Runs the hosted machines' read jobs off this loop.
    read_jobs: ReadJobs,
    id: ProcessId,
    config: ClusterConfig,
    links: Links,
    gateway: mpsc::UnboundedSender<Frame>,
    status: Arc<GatewayStatus>,
    partitions: BTreeMap<ProcessId, Hosted<R>>,
    ticks: u64,
    /// Hidden, test-only (debug builds, `TESSERA_CANARY_CONFIRM_BEFORE_COMMIT`): the primary
    /// confirms deliveries on arrival and logs them only every 200 ms — "acknowledges before
    /// VR commit", the real-process test's canary.
    canary_early: bool,
    /// Set while `on_tick` submits (the canary submits only then).
    submitting: bool,
    /// Hidden, test-only (debug builds, `TESSERA_CANARY_BASIC_ANY_MEMBER`): every member
    /// answers basic reads from its executed state, backups included
    /// (`ecast::serve_basic_read`'s `any_member`; `resp_read_isolation.rs`'s canary).
    canary_basic_any_member: bool,
    /// Hidden, test-only (debug builds, `TESSERA_CANARY_NO_COPY_AFTER_VIEW_CHANGE`): a primary
    /// of a view after 0 never sends its group's copies — a retired group whose sending
    /// primary failed never delivers them (`vr_regrouping_faults.rs`'s canary).
    canary_no_resend: bool,
    /// Per partition: the (view, status, primary) last logged.
    observed: BTreeMap<ProcessId, (u64, StatusName, bool)>,
    /// Copies being received: (receiving group, sending group, version) → parts so far.
    incoming: BTreeMap<(ProcessId, ProcessId, ConfigVersion), Incoming>,
    /// `TESSERA_TEST_COPY_DELAY_MS` in ticks (0: none).
    copy_delay_ticks: u64,
    /// Per (group, version): the tick at which this process first saw the group's outgoing
    /// copy of that version (the test-only copy delay counts from there).
    cut_at: BTreeMap<(ProcessId, ConfigVersion), u64>,
    /// Where keys lie on the ring (a started group's store).
    placement: KeyPlacement,
    /// This process restarted (diskless: it forgot everything): every replica it starts
    /// recovers (VRR §4.3), including a started group's — it may have been a member before.
    restarted: bool,
    /// Above replication 1: the groups' lives (`ecast::group_lifecycle`): the groups named in
    /// the routers' deliveries (`Frame::GroupDeliver`: the delivered group and both versions'
    /// groups around a keyspace message; where copies and acknowledgements for groups not
    /// hosted here go, and which groups this process is a member of), their retirements, and
    /// which replicas to stop and drop.
    lifecycle: GroupLifecycle,
    /// Above replication 1: the tombstones of retired groups whose replica here stopped (never
    /// started again), answering late bypass requests from what the replica executed
    /// (`ecast::group_lifecycle::Tombstone`; the oldest group ids forgotten past
    /// `KNOWN_GROUPS_MAX`).
    stopped: BTreeMap<ProcessId, Tombstone>,
    /// Per (group, version): when this process's primary of the group first had the keyspace
    /// message of that version to log (a copy into the group is timed from there).
    keyspace_at: BTreeMap<(ProcessId, ConfigVersion), Instant>,
    /// Copies this process's primaries reassembled, by (receiving group, sending group,
    /// version): `tessera admin`'s account of each copy (`ProgressReport::copies`), by this
    /// process's clock. The last `COPY_ACCOUNTS_KEPT`.
    copy_accounts: BTreeMap<(ProcessId, ProcessId, ConfigVersion), CopyAccount>,
    /// Disk durability: the writer of every hosted replica's log.
    wal: Option<WalExecutor>,
}

/// One copy into a group, as its primary here saw it.
struct CopyAccount {
    since: Instant,
    keys: u64,
    bytes: u64,
    /// Microseconds from `since` to the `Install`'s commit, once committed.
    installed_after: Option<u64>,
}

/// Copy accounts kept per process (the oldest versions are dropped first).
const COPY_ACCOUNTS_KEPT: usize = 64;

impl<R: Replication<Machine = Machine>> Host<R> {
    fn on_tick(&mut self) {
        self.ticks += 1;
        // The canary (`on_deliver`) submits what it confirmed early every 200 ms; otherwise
        // a step submits whatever is pending anyway.
        let submit = self
            .ticks
            .is_multiple_of((200 / self.config.tick_ms).max(1));
        let partitions: Vec<ProcessId> = self.partitions.keys().copied().collect();
        for partition in partitions {
            if submit {
                self.submitting = true;
                if let Some(request) = self.next_request(partition) {
                    self.step(partition, Input::Message(Message::Request(request)));
                }
                self.submitting = false;
            }
            self.step(partition, Input::Tick);
            self.send_copies(partition);
            self.follow_lifecycle(partition);
        }
    }

    /// Above replication 1: what the lifecycle decides for a running replica — stop a retired
    /// group's replica once its machine is `finished` (`STOP_AFTER_FINISHED_MS` later; its
    /// tombstone stays in `Host::stopped` to answer late bypass requests), or drop one that
    /// cannot finish (out of a normal view for long, two versions past its group's
    /// retirement: a member that lagged behind its peers' stop, or one recovering a group that
    /// stopped everywhere).
    fn follow_lifecycle(&mut self, partition: ProcessId) {
        if !self.config.regrouped() {
            return;
        }
        let Some(hosted) = self.partitions.get(&partition) else {
            return;
        };
        let state = ReplicaState::of(&hosted.replica);
        let status = hosted.replica.status();
        match self.lifecycle.running(partition, state, self.ticks) {
            Fate::Keep => {}
            Fate::Stop => {
                let hosted = self.partitions.remove(&partition).expect("present above");
                self.observed.remove(&partition);
                self.incoming.retain(|(to, _, _), _| *to != partition);
                if self.stopped.len() >= group_lifecycle::KNOWN_GROUPS_MAX {
                    self.stopped.pop_first();
                }
                self.stopped
                    .insert(partition, Tombstone::of(&hosted.replica));
                self.forget(partition);
                log::info(format_args!(
                    "group {:#x}: retired, its copies acknowledged: replica stopped",
                    partition.0
                ));
            }
            Fate::Drop { retired } => {
                self.partitions.remove(&partition);
                self.observed.remove(&partition);
                self.incoming.retain(|(to, _, _), _| *to != partition);
                self.forget(partition);
                log::info(format_args!(
                    "group {:#x}: retired at version {}, the grouping is at version {}: running replica ({status:?}) dropped",
                    partition.0, retired.0, self.lifecycle.newest().0
                ));
            }
        }
    }

    /// Remembers that `partition`'s replica stopped or was dropped here (never started again),
    /// and deletes its log (disk durability): a later start of this process must not reopen
    /// it. (A tombstone lives in memory only: after a restart, late bypass requests to the
    /// group are answered by its other members' tombstones, or by no one.)
    fn forget(&mut self, partition: ProcessId) {
        if let Some(wal) = &self.wal {
            wal.remove(
                partition.0,
                GroupFile::directory(&self.config, self.id, partition),
            );
        }
        self.lifecycle.dropped(partition);
    }

    /// Above replication 1: starts this process's replica of `group` if it is a member and
    /// does not host it (and never hosted it and stopped): VR's ordinary start (view 0, the
    /// owner primary, an empty log), holding nothing — sound because the group never ran
    /// anywhere before its first delivery, K, whose cut is its first chain entry.
    fn start_group(&mut self, group: &Group) {
        let destination = group.destination();
        if self.partitions.contains_key(&destination)
            || self.stopped.contains_key(&destination)
            || !self.lifecycle.may_start(destination)
        {
            return;
        }
        let Some(place) = group.members.iter().position(|member| *member == self.id) else {
            return;
        };
        if group.members.len() > usize::from(u8::MAX)
            || group
                .members
                .iter()
                .any(|member| self.config.storage(*member).is_none())
        {
            log::warn(format_args!(
                "group {:#x} names members this cluster does not have: not started",
                destination.0
            ));
            return;
        }
        let index = ReplicaIndex(place as u8);
        if let Some(wal) = &self.wal {
            // Disk: a replica this process ever ran has a log (reopened at its start), so one
            // without a log never ran here and starts as VR starts, on a new log.
            let file = GroupFile {
                group: PartitionGroup {
                    partition: destination,
                    members: group.members.clone(),
                    arc: group.arc(),
                },
                index: index.0,
                started: true,
            };
            let opened = file
                .write(&self.config, self.id)
                .and_then(|()| open_durable(&self.config, self.id, &self.placement, &file, wal));
            match opened {
                Ok(hosted) => {
                    log::info(format_args!(
                        "group {:#x}: replica {} started on a new log",
                        destination.0, index.0
                    ));
                    self.partitions.insert(destination, hosted);
                    self.follow_primaryship(destination);
                    self.log_changes(destination);
                }
                Err(error) => {
                    log::error(format_args!("group {:#x}: {error}", destination.0));
                    std::process::exit(70);
                }
            }
            return;
        }
        let protocol = self.config.partition_protocol(group.members.len());
        let machine = started_machine(&self.placement);
        // A process that never restarted never ran this group (a stopped one is never started
        // again): VR's ordinary start. A restarted one may have, and forgot what it promised:
        // it recovers from the group (its first delivery waits for the recovery).
        let replica = if self.restarted {
            R::recovering(protocol, index, machine, Nonce(random_u64()))
        } else {
            R::create(protocol, index, machine)
        };
        log::info(format_args!(
            "group {:#x} (owner {}, born at version {}): replica {} of {:?} started",
            destination.0,
            group.name.owner.0,
            group.name.born.0,
            index.0,
            group
                .members
                .iter()
                .map(|member| member.0)
                .collect::<Vec<_>>()
        ));
        self.partitions.insert(
            destination,
            Hosted {
                group: PartitionGroup {
                    partition: destination,
                    members: group.members.clone(),
                    arc: group.arc(),
                },
                index,
                replica,
                duty: None,
                checkpoint_ticket: None,
                jobs: BTreeMap::new(),
            },
        );
        self.follow_primaryship(destination);
        self.log_changes(destination);
    }

    /// Above replication 1: deliveries to `group`, with its description and the groups
    /// around every keyspace message among them.
    fn on_group_deliver(
        &mut self,
        group: Group,
        router: ReplicaIndex,
        deliveries: Vec<Delivery>,
        groupings: Vec<Groups>,
    ) {
        if !self.config.regrouped() {
            log::warn(format_args!(
                "dropped a group delivery: this cluster's routers do not regroup"
            ));
            return;
        }
        // Peers are trusted, but a malformed frame must not take the process down: every
        // group it names must have a destination id and members of this cluster.
        let sane = |group: &Group| {
            group.name.try_destination().is_some()
                && !group.members.is_empty()
                && group.members.len() <= usize::from(u8::MAX)
                && group
                    .members
                    .iter()
                    .all(|member| self.config.storage(*member).is_some())
        };
        if !sane(&group) || !groupings.iter().flat_map(Groups::groups).all(sane) {
            log::warn(format_args!(
                "dropped a group delivery naming a group this cluster cannot have"
            ));
            return;
        }
        for groups in &groupings {
            // Hosted or stopped groups these groups show retired (a lagging or recovering
            // replica may never execute the cut that says so).
            let here = self.partitions.keys().chain(self.stopped.keys()).copied();
            self.lifecycle.see_groupings(groups, here);
        }
        self.lifecycle.learn(&group);
        let destination = group.destination();
        self.start_group(&group);
        self.on_deliver(destination, router, deliveries, &groupings);
    }

    fn on_frame(&mut self, frame: Frame) {
        match frame {
            Frame::PartitionVr {
                partition,
                from,
                message,
            } => {
                if !self.partitions.contains_key(&partition) && self.config.regrouped() {
                    // A member that missed the group's first delivery starts it from the
                    // description it learned (a replica that never ran: VR's state transfer
                    // brings it up to date).
                    if let Some(group) = self.lifecycle.known(partition).cloned() {
                        self.start_group(&group);
                    }
                }
                let Some(hosted) = self.partitions.get(&partition) else {
                    return; // Not a partition of this process.
                };
                if from == hosted.index || from.0 as usize >= hosted.group.members.len() {
                    log::warn(format_args!(
                        "dropped a VR frame of partition {} from unknown replica {from}",
                        partition.0
                    ));
                    return;
                }
                self.step(partition, Input::Message(message));
            }
            Frame::PartitionDeliver {
                partition,
                router,
                deliveries,
            } => {
                if (router.0 as usize) < self.config.routers.len() {
                    self.on_deliver(partition, router, deliveries, &[]);
                }
            }
            Frame::GroupDeliver {
                group,
                router,
                deliveries,
                groupings,
            } => {
                if (router.0 as usize) < self.config.routers.len() {
                    self.on_group_deliver(group, router, deliveries, groupings);
                }
            }
            Frame::PartitionRequest { partition, request } => {
                if self.partitions.contains_key(&partition) {
                    self.step(partition, Input::Message(Message::Request(request)));
                } else if let Some(tombstone) = self.stopped.get(&partition) {
                    // A stale gateway's request to a group that retired and stopped here.
                    let reply = tombstone.answer(&request);
                    let frame = Frame::PartitionReply {
                        partition,
                        message: Message::Reply(reply),
                    };
                    self.to_gateway(SenderId::from_client_id(request.client), frame);
                }
            }
            Frame::PartitionBasicRead {
                partition,
                sender,
                read_id,
                planned_at,
                payload,
            } => {
                let served = match self.partitions.get(&partition) {
                    Some(hosted) => ecast::serve_basic_read(
                        &hosted.replica,
                        planned_at,
                        &payload,
                        self.canary_basic_any_member,
                    ),
                    None => Err(ecast::ReadRefusal::NotServable),
                };
                let frame = match served {
                    Ok(result) => Frame::BasicAnswer {
                        sender,
                        read_id,
                        outcomes: decode_outcomes(&result),
                    },
                    Err(refusal) => Frame::BasicRefused {
                        sender,
                        read_id,
                        refusal,
                    },
                };
                self.to_gateway(SenderId::from_process_id(sender), frame);
            }
            Frame::Watermark { watermark } => {
                let _ = self.gateway.send(Frame::Watermark { watermark });
                let partitions: Vec<ProcessId> = self.partitions.keys().copied().collect();
                for partition in partitions {
                    let Some(duty) = self
                        .partitions
                        .get_mut(&partition)
                        .and_then(|hosted| hosted.duty.as_mut())
                    else {
                        continue;
                    };
                    duty.raise_watermark(watermark);
                    if let Some(request) = self.next_request(partition) {
                        self.step(partition, Input::Message(Message::Request(request)));
                    }
                }
            }
            Frame::PartitionCopy {
                version,
                from,
                to,
                part,
                parts,
                records,
            } => self.on_copy(version, from, to, part, parts, records),
            Frame::PartitionInstalled { version, from, to } => {
                let Some(duty) = self
                    .partitions
                    .get_mut(&from)
                    .and_then(|hosted| hosted.duty.as_mut())
                else {
                    return; // Not a primary of the sending group.
                };
                duty.copy_acknowledged(version, to);
                if let Some(request) = self.next_request(from) {
                    self.step(from, Input::Message(Message::Request(request)));
                }
            }
            Frame::ProgressQuery { reply_to, nonce } => {
                let report = self.report();
                link::send_once(
                    reply_to,
                    Frame::Progress {
                        nonce,
                        report: Box::new(report),
                    },
                );
            }
            Frame::Deliver { .. }
            | Frame::SnapshotDeliver { .. }
            | Frame::BasicRead { .. }
            | Frame::Migration { .. } => {
                log::warn(format_args!(
                    "dropped a frame that vr partitions do not use"
                ));
            }
            // Everything else is for the gateway.
            frame => {
                let _ = self.gateway.send(frame);
            }
        }
    }

    /// Router deliveries for `partition`: its primary queues them for its replica.
    /// `groupings`: above replication 1, the groups around each keyspace message delivered.
    fn on_deliver(
        &mut self,
        partition: ProcessId,
        router: ReplicaIndex,
        deliveries: Vec<Delivery>,
        groupings: &[Groups],
    ) {
        let elastic = self.config.elastic_groups();
        let regrouped = self.config.regrouped();
        if regrouped {
            let version = deliveries.iter().map(|delivery| delivery.version).max();
            self.lifecycle
                .see_version(version.unwrap_or(ConfigVersion(0)));
        }
        let Some(hosted) = self.partitions.get_mut(&partition) else {
            return;
        };
        let Some(duty) = &mut hosted.duty else {
            return; // A backup: the primary got the same frame.
        };
        let early = self.canary_early;
        let arrived = deliveries.iter().map(|delivery| delivery.timestamp).max();
        let planning = if elastic {
            CutPlanning::Elastic
        } else if regrouped {
            CutPlanning::Regrouped
        } else {
            CutPlanning::Fixed
        };
        let delivered = duty.deliver(router, deliveries, planning, groupings, partition);
        for version in &delivered.without_groups {
            log::warn(format_args!(
                "group {:#x}: a keyspace delivery of version {} without its groups: dropped",
                partition.0, version.0
            ));
        }
        let now = Instant::now();
        for version in delivered.keyspace_versions {
            self.keyspace_at.entry((partition, version)).or_insert(now);
        }
        if let (true, Some(arrived)) = (early, arrived) {
            self.confirm(partition, router, arrived);
            return; // …and logs it only at the next 200 ms tick (`on_tick`): a wide window.
        }
        if let Some(request) = self.next_request(partition) {
            self.step(partition, Input::Message(Message::Request(request)));
        }
    }

    /// A checkpoint serialised off the loop: to the replica that asked for it, if it is still
    /// hosted (not replaced since).
    fn on_checkpointed(&mut self, done: checkpoint::Done) {
        let partition = ProcessId(done.log);
        let Some(hosted) = self.partitions.get_mut(&partition) else {
            return;
        };
        if hosted.checkpoint_ticket != Some(done.ticket) {
            return;
        }
        hosted.checkpoint_ticket = None;
        self.step(partition, Input::Checkpointed(done.checkpoint));
    }

    /// A read job finished: its results go to the replica that started it (a replica that
    /// replaced it never started that ticket), and the replies it released are sent.
    fn on_job_done(&mut self, done: read_jobs::Done) {
        let partition = ProcessId(done.log);
        let Some(hosted) = self.partitions.get_mut(&partition) else {
            return;
        };
        if hosted.jobs.get(&done.job) != Some(&done.ticket) {
            return;
        }
        hosted.jobs.remove(&done.job);
        hosted.replica.job_done(done.job, done.results);
        self.start_jobs(partition);
        self.send_released(partition);
        self.log_changes(partition);
    }

    /// Starts the read jobs the replica's machine handed out since the last started; forgets
    /// those no longer open (run on the loop by a logged query, or dropped by a restore).
    fn start_jobs(&mut self, partition: ProcessId) {
        let Some(hosted) = self.partitions.get_mut(&partition) else {
            return;
        };
        let machine = hosted.replica.state_machine();
        if machine.jobs_open() == 0 && hosted.jobs.is_empty() {
            return;
        }
        hosted.jobs.retain(|number, _| {
            machine
                .jobs_after(number - 1)
                .next()
                .is_some_and(|(open, _)| open == *number)
        });
        let after = hosted
            .jobs
            .last_key_value()
            .map_or(0, |(number, _)| *number);
        for (number, job) in machine.jobs_after(after) {
            let ticket = self.read_jobs.start(partition.0, number, job.clone());
            hosted.jobs.insert(number, ticket);
        }
    }

    /// Steps partition `partition`'s replica with `input`, executes its effects, follows its
    /// primaryship, sends released replies, and submits pending deliveries.
    fn step(&mut self, partition: ProcessId, input: Input) {
        let mut queue = VecDeque::from([input]);
        while let Some(input) = queue.pop_front() {
            let Some(hosted) = self.partitions.get_mut(&partition) else {
                return;
            };
            let mut effects = Vec::new();
            hosted.replica.step(input, &mut effects);
            for effect in effects {
                match effect {
                    Effect::Send { to, message } => self.send_replica(partition, to, message),
                    Effect::Reply { client, message } => self.on_reply(partition, client, message),
                    Effect::Persist { sequence, record } => match &self.wal {
                        Some(wal) => wal.persist(partition.0, sequence, record),
                        None => log::warn(format_args!(
                            "a diskless partition replica asked to persist"
                        )),
                    },
                    Effect::Checkpoint { checkpoint, source } => {
                        let ticket = self.checkpoints.start(partition.0, checkpoint, source);
                        if let Some(hosted) = self.partitions.get_mut(&partition) {
                            hosted.checkpoint_ticket = Some(ticket);
                        }
                    }
                }
            }
            self.start_jobs(partition);
            self.follow_primaryship(partition);
            self.send_released(partition);
            if let Some(request) = self.next_request(partition) {
                queue.push_back(Input::Message(Message::Request(request)));
            }
        }
        self.log_changes(partition);
    }

    fn on_reply(&mut self, partition: ProcessId, client: ClientId, message: Message) {
        let Some(hosted) = self.partitions.get_mut(&partition) else {
            return;
        };
        let own = hosted
            .duty
            .as_ref()
            .is_some_and(|duty| duty.client() == client);
        if !own {
            // A gateway's bypass lane (its client id names its storage process).
            let cuts = self.config.elastic_groups() || self.config.regrouped();
            if let (true, Message::Reply(reply)) = (cuts, &message) {
                if PartitionResult::decode(&reply.result) == PartitionResult::Moved {
                    log::info(format_args!(
                        "partition {}: request {} of client {:#x} answered Moved (its keys moved away)",
                        partition.0, reply.request.0, reply.client.0
                    ));
                }
            }
            let frame = Frame::PartitionReply { partition, message };
            self.to_gateway(SenderId::from_client_id(client), frame);
            return;
        }
        let duty = hosted.duty.as_mut().expect("checked above");
        let Message::Reply(reply) = message else {
            return;
        };
        match duty.on_reply(&reply) {
            DutyReply::Stale | DutyReply::Quiet => {}
            DutyReply::Confirm { router, admitted } => self.confirm(partition, router, admitted),
            DutyReply::Installed { version, from } => {
                let part_bytes = self.config.install_part_bytes.max(1);
                let account = self.copy_accounts.get_mut(&(partition, from, version));
                // The parts this process's primary logged (another primary, after a view
                // change, may have logged the first ones).
                let parts = account
                    .as_ref()
                    .map_or(0, |account| account.bytes.div_ceil(part_bytes).max(1));
                log::info(format_args!(
                    "partition {}: installed the copy of version {} from partition {} ({parts} parts of at most {part_bytes} bytes)",
                    partition.0, version.0, from.0
                ));
                if let Some(account) = account {
                    let micros = account.since.elapsed().as_micros();
                    account.installed_after = Some(u64::try_from(micros).unwrap_or(u64::MAX));
                }
                self.send_group(
                    from,
                    Frame::PartitionInstalled {
                        version,
                        from,
                        to: partition,
                    },
                );
            }
            DutyReply::Unexpected(other) => log::warn(format_args!(
                "partition {}: deliveries answered {other:?}",
                partition.0
            )),
        }
    }

    fn confirm(&self, partition: ProcessId, router: ReplicaIndex, admitted: Timestamp) {
        if admitted == Timestamp::ZERO {
            return;
        }
        if let Some(address) = self.config.routers.get(router.0 as usize) {
            let frame = Frame::Confirm {
                process: partition,
                delivered: admitted,
            };
            self.links.send(address.address, frame);
        }
    }

    /// The duty follows the replica: created when it becomes primary of a normal view (with a
    /// fresh client id), dropped when it stops being one.
    fn follow_primaryship(&mut self, partition: ProcessId) {
        let Some(hosted) = self.partitions.get_mut(&partition) else {
            return;
        };
        let replica = &hosted.replica;
        let primary = replica.status() == StatusName::Normal && replica.is_primary();
        let view = replica.view();
        partition_duty::follow(&mut hosted.duty, primary, view, || ClientId(random_u64()));
    }

    /// The primary sends the replies its machine released since the last ones it sent.
    fn send_released(&mut self, partition: ProcessId) {
        let Some(hosted) = self.partitions.get_mut(&partition) else {
            return;
        };
        let Some(duty) = &mut hosted.duty else {
            return;
        };
        let mut frames = Vec::new();
        let view = duty.view();
        for (_, released) in duty.released(hosted.replica.state_machine()) {
            match released {
                Released::Answer {
                    sender,
                    sequence,
                    result,
                    ..
                } => {
                    let outcomes = decode_outcomes(result);
                    if outcomes.is_empty() {
                        continue;
                    }
                    let frame = Frame::Answer {
                        sender: *sender,
                        sequence: *sequence,
                        outcomes,
                    };
                    frames.push((SenderId::from_process_id(*sender), frame));
                }
                Released::Single {
                    client,
                    number,
                    result,
                } => {
                    let frame = Frame::PartitionReleased {
                        partition,
                        client: *client,
                        number: *number,
                        result: result.clone(),
                    };
                    frames.push((SenderId::from_client_id(*client), frame));
                }
                // A held single-partition operation whose keys a cut moved away: answered as
                // its lane's VR reply would be, so that the gateway re-plans it.
                Released::Moved { client, number } => {
                    log::info(format_args!(
                        "partition {}: request {} of client {:#x} answered Moved (held, then its keys moved away)",
                        partition.0, number.0, client.0
                    ));
                    let reply = Reply {
                        view,
                        client: *client,
                        request: *number,
                        result: PartitionResult::Moved.encode(),
                    };
                    let frame = Frame::PartitionReply {
                        partition,
                        message: Message::Reply(reply),
                    };
                    frames.push((SenderId::from_client_id(*client), frame));
                }
            }
        }
        for (sender, frame) in frames {
            self.to_gateway(sender, frame);
        }
    }

    /// The primary's next Deliveries request to its own replica (one in flight).
    fn next_request(&mut self, partition: ProcessId) -> Option<Request> {
        if self.canary_early && !self.submitting {
            return None;
        }
        let hosted = self.partitions.get_mut(&partition)?;
        let duty = hosted.duty.as_mut()?;
        duty.next_request(hosted.replica.state_machine(), &hosted.group.arc, partition)
    }

    /// The primary of a sending group sends each copy its machine keeps (`outgoing`, in the
    /// replicated state until acknowledged) to the receiving group, in parts, and again every
    /// `COPY_RESEND_MS` until the receiver's `PartitionInstalled` is logged.
    fn send_copies(&mut self, partition: ProcessId) {
        let now = self.ticks;
        let resend_ticks = (COPY_RESEND_MS / self.config.tick_ms).max(1);
        let delay = self.copy_delay_ticks;
        let Some(hosted) = self.partitions.get_mut(&partition) else {
            return;
        };
        let Some(duty) = &mut hosted.duty else {
            return;
        };
        if self.canary_no_resend && duty.view().0 > 0 {
            return;
        }
        let outgoing: Vec<(ConfigVersion, ProcessId)> = hosted
            .replica
            .state_machine()
            .outgoing()
            .map(|(version, to, _)| (version, to))
            .collect();
        duty.retain_copies(&outgoing);
        self.cut_at.retain(|(group, version), _| {
            *group != partition || outgoing.iter().any(|(other, _)| other == version)
        });
        let mut due = Vec::new();
        for (version, to) in outgoing {
            let seen = *self.cut_at.entry((partition, version)).or_insert_with(|| {
                // The first sight here of this cut's copies (after the cut, or after a view
                // change made this replica the primary): the real-process fault test kills
                // the sending primary on this line.
                log::info(format_args!(
                    "partition {}: primary in view {}, owes copies of version {}",
                    partition.0,
                    duty.view().0,
                    version.0
                ));
                now
            });
            if now < seen + delay {
                continue;
            }
            if duty.copy_due(version, to, now, resend_ticks) {
                due.push((version, to));
            }
        }
        for (version, to) in due {
            let Some(records) = self.partitions.get(&partition).and_then(|hosted| {
                hosted
                    .replica
                    .state_machine()
                    .outgoing()
                    .find(|(v, t, _)| (*v, *t) == (version, to))
                    .map(|(_, _, records)| records.clone())
            }) else {
                continue;
            };
            let parts = records.len().div_ceil(COPY_PART_BYTES).max(1) as u32;
            log::info(format_args!(
                "partition {}: sending its copy of version {} to partition {} ({} bytes, {parts} parts)",
                partition.0,
                version.0,
                to.0,
                records.len()
            ));
            for part in 0..parts {
                let start = part as usize * COPY_PART_BYTES;
                let end = (start + COPY_PART_BYTES).min(records.len());
                let frame = Frame::PartitionCopy {
                    version,
                    from: partition,
                    to,
                    part,
                    parts,
                    records: records[start..end].to_vec(),
                };
                self.send_group(to, frame);
            }
        }
    }

    /// A part of a copy for group `to`: its primary reassembles the copy and logs it in parts
    /// of `install_part_bytes` (`InstallPart`s; the last answered `Installed`, then
    /// acknowledged to the sender in `on_reply`).
    fn on_copy(
        &mut self,
        version: ConfigVersion,
        from: ProcessId,
        to: ProcessId,
        part: u32,
        parts: u32,
        records: Vec<u8>,
    ) {
        let Some(hosted) = self.partitions.get_mut(&to) else {
            if self
                .stopped
                .get(&to)
                .is_some_and(|tombstone| tombstone.acknowledges_copy(version))
            {
                // A copy resent to a group whose replica stopped here: its sender missed the
                // running replica's acknowledgement (sim seed 2172).
                self.send_group(from, Frame::PartitionInstalled { version, from, to });
            }
            return;
        };
        let Some(duty) = &mut hosted.duty else {
            return; // A backup: its primary got the same parts.
        };
        if parts == 0 || parts > COPY_PARTS_MAX || part >= parts || records.len() > COPY_PART_BYTES
        {
            log::warn(format_args!(
                "dropped a malformed copy part {part}/{parts} of partition {} for {}",
                from.0, to.0
            ));
            return;
        }
        if duty.installing(version, from) {
            return;
        }
        let key = (to, from, version);
        let incoming = self.incoming.entry(key).or_insert_with(|| Incoming {
            parts,
            received: BTreeMap::new(),
        });
        if incoming.parts != parts {
            *incoming = Incoming {
                parts,
                received: BTreeMap::new(),
            };
        }
        incoming.received.insert(part, records);
        if incoming.received.len() < parts as usize {
            return;
        }
        let incoming = self.incoming.remove(&key).expect("present above");
        let records: Vec<u8> = incoming.received.into_values().flatten().collect();
        let since = self
            .keyspace_at
            .get(&(to, version))
            .copied()
            .unwrap_or_else(Instant::now);
        self.copy_accounts.insert(
            (to, from, version),
            CopyAccount {
                since,
                keys: record_count(&records),
                bytes: records.len() as u64,
                installed_after: None,
            },
        );
        while self.copy_accounts.len() > COPY_ACCOUNTS_KEPT {
            let oldest = self
                .copy_accounts
                .keys()
                .min_by_key(|(_, _, version)| *version)
                .copied()
                .expect("not empty");
            self.copy_accounts.remove(&oldest);
        }
        let part_bytes = usize::try_from(self.config.install_part_bytes).unwrap_or(usize::MAX);
        duty.install(version, from, &records, part_bytes);
        if let Some(request) = self.next_request(to) {
            self.step(to, Input::Message(Message::Request(request)));
        }
    }

    /// Sends `frame` to every member of group `partition`.
    fn send_group(&self, partition: ProcessId, frame: Frame) {
        let Some(members) = self.members_of(partition) else {
            return;
        };
        for member in members {
            if let Some(storage) = self.config.storage(member) {
                self.links.send(storage.address, frame.clone());
            }
        }
    }

    /// A group's members: a hosted one's, one a router delivery described (above replication
    /// 1), or a fixed group of the cluster file.
    fn members_of(&self, partition: ProcessId) -> Option<Vec<ProcessId>> {
        if let Some(hosted) = self.partitions.get(&partition) {
            return Some(hosted.group.members.clone());
        }
        if let Some(group) = self.lifecycle.known(partition) {
            return Some(group.members.clone());
        }
        self.config
            .partition_group(partition)
            .map(|group| group.members)
    }

    /// `tessera admin`'s progress report: per hosted group, the copies it sends (outgoing) and
    /// waits for (installing), against the version of its last cut.
    fn report(&self) -> ProgressReport {
        let mut report = ProgressReport::idle(self.id);
        for (partition, hosted) in &self.partitions {
            let machine = hosted.replica.state_machine();
            report.version = report.version.max(machine.version());
            report.delivered = report.delivered.max(machine.rules().admitted());
            report.keys += machine.data().len() as u64;
            report.bytes += machine.data().kv_bytes();
            report.rows += machine.data().rows();
            if let Some(holds) = machine.holds() {
                report.holds = report.holds.union(holds);
            }
            report.held += machine.deferred() as u64;
            for (version, to, records) in machine.outgoing() {
                report.outgoing.push(StreamReport {
                    stream: StreamId {
                        version,
                        from: *partition,
                        to,
                    },
                    bytes_total: Some(records.len() as u64),
                    keys_total: None,
                    bytes_done: 0,
                    keys_done: 0,
                });
            }
            for from in machine.installing() {
                report.incoming.push(StreamReport {
                    stream: StreamId {
                        version: machine.version(),
                        from: *from,
                        to: *partition,
                    },
                    bytes_total: None,
                    keys_total: None,
                    bytes_done: 0,
                    keys_done: 0,
                });
            }
        }
        for ((to, from, version), account) in &self.copy_accounts {
            let micros = account.installed_after.unwrap_or_else(|| {
                u64::try_from(account.since.elapsed().as_micros()).unwrap_or(u64::MAX)
            });
            report.copies.push(CopyReport {
                stream: StreamId {
                    version: *version,
                    from: *from,
                    to: *to,
                },
                keys: account.keys,
                bytes: account.bytes,
                micros,
                installed: account.installed_after.is_some(),
            });
        }
        report
    }

    fn send_replica(&self, partition: ProcessId, to: ReplicaIndex, message: Message) {
        let Some(hosted) = self.partitions.get(&partition) else {
            return;
        };
        let Some(member) = hosted.group.members.get(to.0 as usize) else {
            return;
        };
        if let Some(storage) = self.config.storage(*member) {
            let frame = Frame::PartitionVr {
                partition,
                from: hosted.index,
                message,
            };
            self.links.send(storage.address, frame);
        }
    }

    /// Sends `frame` to the gateway of the storage process `sender` lives in (nothing for an id
    /// that is not a sender's).
    fn to_gateway(&self, sender: Option<SenderId>, frame: Frame) {
        let Some(process) = sender.and_then(SenderId::storage) else {
            return;
        };
        if process == self.id {
            let _ = self.gateway.send(frame);
        } else if let Some(storage) = self.config.storage(process) {
            self.links.send(storage.address, frame);
        }
    }

    fn log_changes(&mut self, partition: ProcessId) {
        let Some(hosted) = self.partitions.get(&partition) else {
            return;
        };
        let replica = &hosted.replica;
        let now = (replica.view().0, replica.status(), replica.is_primary());
        if self.observed.get(&partition) != Some(&now) {
            self.observed.insert(partition, now);
            let rules = replica.state_machine().rules();
            log::info(format_args!(
                "partition {} replica {}: view {} {:?}{}, admitted {}, watermark {}",
                partition.0,
                hosted.index.0,
                now.0,
                now.1,
                if now.2 { " (primary)" } else { "" },
                rules.admitted(),
                rules.watermark()
            ));
        }
    }

    /// Counters for INFO: keys over this process's replicas, the largest admitted prefix.
    fn publish(&self) {
        let keys: usize = self
            .partitions
            .values()
            .map(|hosted| hosted.replica.state_machine().data().len())
            .sum();
        let admitted = self
            .partitions
            .values()
            .map(|hosted| hosted.replica.state_machine().rules().admitted().0)
            .max()
            .unwrap_or(0);
        self.status.keys.store(keys as u64, Ordering::Relaxed);
        self.status
            .partition_replicas
            .store(self.partitions.len() as u64, Ordering::Relaxed);
        let primaries = self
            .partitions
            .values()
            .filter(|hosted| {
                hosted.replica.is_primary() && hosted.replica.status() == vr::StatusName::Normal
            })
            .count();
        let not_normal = self
            .partitions
            .values()
            .filter(|hosted| hosted.replica.status() != vr::StatusName::Normal)
            .count();
        self.status
            .partition_primaries
            .store(primaries as u64, Ordering::Relaxed);
        let reports = self
            .partitions
            .iter()
            .map(|(partition, hosted)| super::metrics::ReplicaReport {
                group: partition.0.to_string(),
                replica: hosted.index.0,
                view: hosted.replica.view().0,
                op: hosted.replica.op().0,
                commit: hosted.replica.commit_max().0,
                primary: hosted.replica.is_primary(),
                normal: hosted.replica.status() == vr::StatusName::Normal,
                cycles: Some(hosted.replica.state_machine().data().cycles()),
            })
            .collect();
        self.status.metrics.publish_replicas(reports);
        self.status
            .partition_replicas_not_normal
            .store(not_normal as u64, Ordering::Relaxed);
        self.status.delivered.store(admitted, Ordering::Relaxed);
        let mut sums = [0u64; 10];
        for hosted in self.partitions.values() {
            let cycles = hosted.replica.state_machine().data().cycles();
            sums[8] += cycles.batches;
            sums[9] += cycles.statements;
            let stats = hosted.replica.stats();
            sums[0] += stats.skyros_nilext_refused;
            sums[1] += stats.skyros_nilext_ignored_lagging;
            sums[2] += stats.skyros_nilext_executed_gated;
            sums[3] += stats.skyros_nilext_ignored_full;
            sums[4] += stats.requests_ignored_full;
            sums[5] += stats.messages_split;
            sums[6] += stats.messages_reassembled;
            sums[7] += stats.messages_refused_oversized + stats.parts_refused;
        }
        let status = &self.status;
        let counters = [
            &status.skyros_nilext_refused,
            &status.skyros_ignored_lagging,
            &status.skyros_executed_gated,
            &status.skyros_ignored_full,
            &status.requests_ignored_full,
            &status.vr_messages_split,
            &status.vr_messages_reassembled,
            &status.vr_messages_refused,
            &status.sql_batches,
            &status.sql_batched_statements,
        ];
        for (counter, sum) in counters.into_iter().zip(sums) {
            counter.store(sum, Ordering::Relaxed);
        }
    }
}
