//! The gateway inside every storage process: RESP connections (so `redis-cli -p <port>` works
//! on any storage process) and one gateway task that drives an `ecast::Gateway`. A command is
//! planned by the pure `resp` crate, split into single-key sub-commands (`payload`), and handed
//! to the gateway as one E-Cast command over its keys' positions; everything E-Cast does with
//! it (planning against the configuration version, being a VR client of the router group,
//! re-planning after a version refusal, snapshot and basic reads, retries and timeouts) is the
//! pure `ecast::Gateway`, the same type the simulator's `--ecast` world drives. This task only
//! moves frames, turns milliseconds into ticks and merges the sub-commands' outcomes.
//!
//! Completion: a read when every sub-command has an answer (one replica per key); a write when
//! its message is stable (every live replica delivered it) and, if its reply carries data (DEL,
//! INCR, …), every sub-command has an answer.
//!
//! Read isolation per connection (`READMODE sequential|snapshot|basic`, §6.7): `sequential`
//! reads are E-Cast messages; `snapshot` reads ask the router log's last timestamp
//! (`Query::Now`) and are then timestamped by the lead router and injected into the
//! destinations' streams; `basic` reads go straight to one live replica per key, which checks
//! only the configuration version (in `vr`/`skyros` partition modes: a basic read goes to the
//! primary of each partition group it reads, `ecast::serve_basic_read`, and a snapshot read of
//! several groups is one `PartitionOperation::Snapshot` per group at the `Query::Now`
//! timestamp). Writes are always sequential.

use super::config::ClusterConfig;
use super::config::PartitionMode;
use super::link::{Frame, Links};
use super::payload::{self, KeyPlacement, Split, Survey, SurveyPlan};
use crate::log;
use crate::os::random_u64;
use crate::resp_codec::{encode_reply, parse_request};
use ecast::{
    BypassSettings, Completion, Failure, Gateway, GatewayCommand, GatewayEffect, GatewayInput,
    GatewaySettings, Isolation, SenderSettings,
};
use kv::Outcome;
use placement::{Position, PositionSet, ProcessId};
use resp::{Plan, ServerInfo, Value};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use vr::ClientId;

/// An unanswered router request is resent this often (to the next router every second time).
const ROUTER_RETRY_MS: u64 = 200;
/// A message that is stable but not fully answered (an answer lost with its storage process)
/// is, for a read, sent again as a new message; for a write, answered with an error.
const ANSWER_WAIT_MS: u64 = 1_000;
const SNAPSHOT_WAIT_MS: u64 = 1_000;
const BASIC_WAIT_MS: u64 = 500;
const READ_ATTEMPTS_MAX: u32 = 5;
const BASIC_ATTEMPTS_MAX: u32 = 5;
/// Snapshot reads count refusals (`SnapshotPassed` under concurrent writes) as attempts too;
/// `GIVE_UP_AFTER_MS` bounds them in time as well.
const SNAPSHOT_ATTEMPTS_MAX: u32 = 20;
/// A command gives up after this long (its write may still take effect).
const GIVE_UP_AFTER_MS: u64 = 10_000;
/// Skyros-Adapt re-decides each group's mode this often (the paper: every 10 s; a gateway
/// sees thousands of acknowledgements a second, so 200 ms of them are plenty of evidence).
const ADAPT_DECIDE_MS: u64 = 200;
/// After a configuration change, point reads avoid each process for what it gains until it
/// announces what it receives, or this long (`GatewaySettings::foresee_busy_ticks`).
const FORESEE_BUSY_MS: u64 = 1_000;
/// A sequenced message not reported stable within this long is resubmitted to learn its
/// outcome.
const RESUBMIT_MS: u64 = 1_000;
/// The sender's window: messages sequenced but not yet stable, at most (the routers allow 64).
const WINDOW_MAX: u64 = 48;
/// `vr` partitions: single-partition requests in flight per partition (VR client ids).
const BYPASS_LANES: u32 = 16;
/// Client ids the bypass's lanes may take (`client_base`'s low 16 bits): every group's lanes
/// at once, 4,096 groups of 16 lanes.
const BYPASS_CLIENT_IDS: u64 = 0x1_0000;

/// What the storage process and the gateway share for INFO.
#[derive(Debug, Default)]
pub struct GatewayStatus {
    /// The process's metrics endpoint's sources (`metrics`).
    pub metrics: Arc<super::metrics::ProcessMetrics>,
    /// The gateway's incarnation (random at the process's start, never 0): its transactions
    /// are owned by (process, incarnation), and a new one is taken when the partitions refuse
    /// this one as dead (`super::sql::ClusterBackend::with_owner`).
    pub incarnation: Arc<super::sql::GatewayIncarnation>,
    /// The inbox's last delivered timestamp.
    pub delivered: AtomicU64,
    /// The inbox's configuration version.
    pub version: AtomicU64,
    pub keys: AtomicU64,
    /// The gateway's configuration version (0 until a router answered).
    pub gateway_version: AtomicU64,
    /// The router the gateway talks to.
    pub router_target: AtomicU64,
    pub completed: AtomicU64,
    /// Answers from the router group (readiness: the gateway reached it).
    pub router_answers: AtomicU64,
    pub refused: AtomicU64,
    pub retried: AtomicU64,
    /// `skyros` partitions: SETs completed before they were ordered.
    pub nilext_fast: AtomicU64,
    /// `skyros` partitions, the gateway's: slow paths taken at once (a hopeless quorum),
    /// after two rounds, nilext writes completed by the primary's reply, and resends.
    pub nilext_slow_hopeless: AtomicU64,
    pub nilext_slow_rounds: AtomicU64,
    pub nilext_replied: AtomicU64,
    /// Skyros-Adapt: nilext writes sent both ways because their group was in 2-RTT mode,
    /// groups in that mode now, and mode changes so far.
    pub nilext_slow_adapt: AtomicU64,
    /// Skyros-Comm: other writes completed in one round trip with a previewed result.
    pub comm_fast: AtomicU64,
    pub adapt_two_rtt_groups: AtomicU64,
    pub adapt_switches: AtomicU64,
    pub bypass_resends: AtomicU64,
    /// Partition groups, §6.7: basic reads a member answered from its executed state, and
    /// basic reads that went through the group's log instead (refused or unanswered).
    pub basic_answered: AtomicU64,
    pub basic_ordered: AtomicU64,
    /// Snapshot reads of several partition groups answered at one timestamp, refused shares
    /// (`SnapshotPassed`), and reads that fell back to `sequential`.
    pub snapshot_group_answered: AtomicU64,
    pub snapshot_refusals: AtomicU64,
    pub snapshot_group_fallbacks: AtomicU64,
    pub nilext_executed_acks: AtomicU64,
    /// Regrouping (`vr` above replication 1): the groups the bypass sends to now, the groups
    /// that joined it after the start, and commands sent to those.
    pub bypass_groups: AtomicU64,
    pub bypass_groups_added: AtomicU64,
    pub bypass_sent_to_added: AtomicU64,
    /// Over this process's partition replicas (`vr::ReplicaStats`): nilext requests the
    /// gate refused, and requests ignored (lagging log, full queues), and nilext retries that found them executed.
    pub skyros_nilext_refused: AtomicU64,
    pub skyros_ignored_lagging: AtomicU64,
    pub skyros_executed_gated: AtomicU64,
    pub skyros_ignored_full: AtomicU64,
    pub requests_ignored_full: AtomicU64,
    /// Over this process's partition replicas: messages over `vr::Config::message_bytes_max`
    /// sent in parts, messages reassembled from parts, and oversized whole messages or bad
    /// parts refused (`docs/internals/vr.md`, "Messages larger than a frame").
    pub vr_messages_split: AtomicU64,
    pub vr_messages_reassembled: AtomicU64,
    pub vr_messages_refused: AtomicU64,
    /// `vr` partitions: the partition replicas this process runs (stepped; a retired group's
    /// stopped replica is not counted).
    pub partition_replicas: AtomicU64,
    /// Of those, the primaries of a normal view, and the replicas not in a normal view (a
    /// view change or a recovery under way).
    pub partition_primaries: AtomicU64,
    pub partition_replicas_not_normal: AtomicU64,
    /// Over this process's partition replicas (`store::Cycles`): the engine batches of SQL
    /// statements they ran (a log entry's statements share one, one scan cycle per table)
    /// and the statements in them. A replica's count starts again at a state transfer.
    pub sql_batches: AtomicU64,
    pub sql_batched_statements: AtomicU64,
}

/// One command for the gateway task.
pub(crate) struct Job {
    pub(super) work: Work,
    pub(super) isolation: Isolation,
    pub(super) reply: oneshot::Sender<Outcome>,
}

/// What a job asks for.
pub(super) enum Work {
    /// A command over keys, split into single-key sub-commands.
    Keyed(Split),
    /// A command without a key, planned by the gateway task against its configuration.
    Survey(Survey),
    /// An operation of the store's SQL half, to the partitions `route` names; answered with
    /// `Outcome::Foreign` of `super::sql::encode_answers` (one engine outcome per partition).
    Sql {
        operation: Vec<u8>,
        read: bool,
        route: super::sql::SqlRoute,
        /// A write outside transactions: in two phases if it reaches several partitions
        /// (`store::prepared`).
        two_phase: bool,
    },
}

/// A job as the gateway task holds it.
enum Planned {
    Keyed(Split),
    /// With how many times it was planned (a survey read whose arcs went stale is planned
    /// again against the newer configuration).
    Survey(SurveyPlan, u32),
    /// With its target as planned (the parts' keys or arcs).
    Sql(SqlJob, payload::SqlTarget),
}

/// A SQL statement in the gateway task.
struct SqlJob {
    /// The store operation (`store::sql_operation`, `store::catalog_operation`).
    operation: Vec<u8>,
    read: bool,
    route: super::sql::SqlRoute,
    /// How many times its current message was planned (a read that found no answer, or a
    /// message to every partition whose configuration moved on before it was sequenced, is
    /// planned again).
    plans: u32,
    phase: SqlPhase,
    /// `Basic` for an autocommit SELECT at `tessera.read_isolation = basic` pinned to one
    /// partition key (`ClusterBackend::execute_read`): sent as a §6.7 basic read to its
    /// group's primary while it is one message to one position (`submit_sql`). `Snapshot` for
    /// an autocommit SELECT at `snapshot`: while it is one message (`SqlPhase::Once`), a
    /// snapshot `Read` or `RangeRead` (one `PartitionOperation::Snapshot` per group it
    /// reaches, at one router timestamp). Anything else is `Sequential`.
    isolation: Isolation,
}

/// Where a SQL statement is (`store::prepared`: two-phase statements).
#[derive(Clone, Debug)]
enum SqlPhase {
    /// Not planned yet; in two phases if `two_phase` and it reaches several partitions.
    New { two_phase: bool },
    /// One message (or the bypass).
    Once,
    /// A two-phase statement's first message: every partition votes and holds its tables.
    Prepare { statement: u64 },
    /// Its second: commit or abort. `vote`: the failing vote that aborted it (a partition's
    /// name and engine outcome), the statement's answer; `None` with `commit` false: its
    /// outcome is unknown (the prepare's answers were lost).
    Decide {
        statement: u64,
        commit: bool,
        vote: Option<(String, Vec<u8>)>,
    },
    /// The canary `TESSERA_CANARY_SQL_READS_PER_PARTITION` only (`sql::canary_reads_per_partition`):
    /// a read over every partition sent as one message per partition, `arc` (of the
    /// configuration's arcs, in ring order) the one now sent, `answers` those gathered before.
    PerPartition {
        arc: usize,
        answers: Vec<(String, Vec<u8>)>,
    },
}

/// A two-phase statement's decision is planned again this many times at most (until then its
/// tables stay held; other gateways abort it once their writes wait too long).
const DECIDE_PLANS_MAX: u32 = 20;

/// A survey read that found no answer (its arcs no longer match the ring) is planned again
/// this many times at most.
const SURVEY_PLANS_MAX: u32 = 3;

/// The gateway's policy in this process's ticks.
fn settings(tick_ms: u64) -> GatewaySettings {
    let ticks = |ms: u64| (ms / tick_ms).max(1);
    GatewaySettings {
        sender: SenderSettings {
            window_max: WINDOW_MAX,
            resubmit_ticks: ticks(RESUBMIT_MS),
        },
        router_retry_ticks: ticks(ROUTER_RETRY_MS).max(2),
        answer_wait_ticks: ticks(ANSWER_WAIT_MS),
        read_attempts_max: READ_ATTEMPTS_MAX,
        snapshot_wait_ticks: ticks(SNAPSHOT_WAIT_MS),
        snapshot_attempts_max: SNAPSHOT_ATTEMPTS_MAX,
        basic_wait_ticks: ticks(BASIC_WAIT_MS),
        basic_attempts_max: BASIC_ATTEMPTS_MAX,
        give_up_ticks: Some(ticks(GIVE_UP_AFTER_MS)),
        report_envelopes: false,
        foresee_busy_ticks: ticks(FORESEE_BUSY_MS),
    }
}

/// Starts the gateway task and the RESP listener; returns where frames for the gateway go and
/// where other front ends (SQL) hand it jobs.
pub(crate) fn start(
    config: ClusterConfig,
    storage: ProcessId,
    links: Links,
    listener: TcpListener,
    status: Arc<GatewayStatus>,
    security: Arc<crate::security::Security>,
) -> (
    mpsc::UnboundedSender<Frame>,
    mpsc::Sender<Job>,
    Arc<super::pubsub::Hub>,
) {
    let (frames, frame_receiver) = mpsc::unbounded_channel();
    let (jobs, job_receiver) = mpsc::channel::<Job>(65_536);
    let id = super::gateway_sender(storage, random_u64()).process_id();
    let tick_ms = config.tick_ms;
    let router_count = config.routers.len() as u8;
    let mut gateway = Gateway::new(
        id,
        ClientId(random_u64()),
        config.router_configuration(),
        router_count,
        (storage.0 % u64::from(router_count)) as u8,
        random_u64(),
        settings(tick_ms),
    );
    let mut groups = BTreeMap::new();
    if config.partitions.grouped() {
        // The router bypass: single-partition commands go straight to their partition's
        // group; multi-partition ones complete under the stable watermark (rule A).
        for group in config.partition_groups() {
            groups.insert(group.partition, group.members);
        }
        status
            .bypass_groups
            .store(groups.len() as u64, Ordering::Relaxed);
        let settings = BypassSettings {
            groups: groups
                .iter()
                .map(|(partition, members)| (*partition, members.len() as u8))
                .collect(),
            lanes: BYPASS_LANES,
            // The lanes' client ids name this storage process (`SenderId::from_client_id`), so that
            // any member can route a reply or a released result back.
            client_base: super::gateway_sender(storage, random_u64() & 0xffff_0000)
                .client_id()
                .0,
            retry_ticks: (ROUTER_RETRY_MS / tick_ms).max(2),
        };
        let decode: ecast::BypassDecode<Outcome> = |bytes| {
            let outcomes = super::partition_host::decode_outcomes(bytes);
            Some(
                outcomes
                    .into_iter()
                    .map(|(index, outcome)| (u64::from(index), outcome))
                    .collect(),
            )
        };
        gateway = gateway.with_bypass(settings, decode);
        if config.regrouped() {
            // Groups started by keyspace changes join the bypass as the gateway learns them
            // (`GatewayEffect::BypassGroups`); lane client ids stay in the low 16 bits.
            gateway = gateway.with_regrouping(BYPASS_CLIENT_IDS);
        }
        if config.partitions == PartitionMode::Skyros {
            let nilext: ecast::BypassNilext = |payload| {
                let outcomes = super::payload::nilext_outcomes(payload)?;
                Some(super::partition_host::encode_outcomes(&outcomes))
            };
            gateway = gateway
                .with_skyros(nilext)
                .with_adapt((ADAPT_DECIDE_MS / tick_ms).max(1));
            // Off unless the cluster file says `skyros_comm = true`: once, `cluster_chaos.rs`
            // (skyros, memory) found INCRs whose increments no client saw with it, a cause
            // never found (`docs/internals/skyros.md`, "Skyros-Comm").
            if config.skyros_comm {
                gateway = gateway.with_skyros_comm();
            }
        }
        // Hidden, test-only (debug builds): no rule A, the real-process test's canary.
        let no_rule_a =
            cfg!(debug_assertions) && std::env::var_os("TESSERA_CANARY_NO_RULE_A").is_some();
        if !no_rule_a {
            gateway = gateway.with_watermark_gate();
        }
        if super::partition_host::canary_basic_any_member() {
            gateway = gateway.with_basic_any_member_canary();
        }
    }
    let hub = Arc::new(super::pubsub::Hub::new(&config, storage, links.clone()));
    let task = GatewayTask {
        id,
        storage,
        gateway,
        groups,
        jobs: BTreeMap::new(),
        job_next: 0,
        busy: BTreeMap::new(),
        placement: config
            .key_placement()
            .expect("the storage process checked the cluster file's placement"),
        cluster: config.clone(),
        links,
        status: status.clone(),
        hub: hub.clone(),
    };
    tokio::spawn(task.run(frame_receiver, job_receiver, tick_ms));
    tokio::spawn(serve(
        listener,
        jobs.clone(),
        config,
        storage,
        status,
        security,
        hub.clone(),
    ));
    (frames, jobs, hub)
}

/// The tokio driver of one `ecast::Gateway`: frames and jobs in, frames and replies out.
struct GatewayTask {
    id: ProcessId,
    storage: ProcessId,
    gateway: Gateway<Outcome>,
    /// `vr` partitions: each partition's members (replica index = place); groups started by
    /// keyspace changes join as the gateway learns them.
    groups: BTreeMap<ProcessId, Vec<ProcessId>>,
    /// Commands the gateway holds, by the id given to it.
    jobs: BTreeMap<u64, (Planned, oneshot::Sender<Outcome>)>,
    job_next: u64,
    /// Storage processes that said they are receiving copies (`Frame::Receiving`, or
    /// `Frame::Busy`: the whole ring), when, and of which ranges.
    busy: BTreeMap<ProcessId, (Instant, PositionSet)>,
    /// Where keys lie on the ring (`ClusterConfig::range_prefixes`).
    placement: KeyPlacement,
    cluster: ClusterConfig,
    links: Links,
    status: Arc<GatewayStatus>,
    /// Pub/sub: this gateway's subscribers (`pubsub`).
    hub: Arc<super::pubsub::Hub>,
}

impl GatewayTask {
    /// The address of a partition group's member by its index in the group, if this gateway
    /// knows the group and the member's storage process.
    fn member_address(&self, partition: ProcessId, replica: u8) -> Option<std::net::SocketAddr> {
        let member = self.groups.get(&partition)?.get(replica as usize)?;
        Some(self.cluster.storage(*member)?.address)
    }

    async fn run(
        mut self,
        mut frames: mpsc::UnboundedReceiver<Frame>,
        mut jobs: mpsc::Receiver<Job>,
        tick_ms: u64,
    ) {
        // Ask the routers first: it shows they are reachable, and the ring may have moved on.
        let mut effects = Vec::new();
        self.gateway.refresh_configuration(&mut effects);
        self.execute(effects);
        let mut interval = tokio::time::interval(Duration::from_millis(tick_ms));
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            let input = tokio::select! {
                _ = interval.tick() => Some(GatewayInput::Tick),
                Some(frame) = frames.recv() => match frame {
                    // A batch of stable notifications: one input each, in order.
                    Frame::Stables { sender, stable } if sender == self.id => {
                        for (sequence, timestamp) in stable {
                            self.step(GatewayInput::Stable { sequence, timestamp });
                        }
                        None
                    }
                    frame => self.on_frame(frame),
                },
                Some(job) = jobs.recv() => Some(self.on_job(job)),
                else => return,
            };
            if let Some(input) = input {
                self.step(input);
            }
        }
    }

    fn step(&mut self, input: GatewayInput<Outcome>) {
        let mut effects = Vec::new();
        self.gateway.step(input, &mut effects);
        self.execute(effects);
    }

    fn on_job(&mut self, job: Job) -> GatewayInput<Outcome> {
        match job.work {
            Work::Keyed(split) => self.submit_keyed(split, job.isolation, job.reply),
            Work::Survey(survey) => self.submit_survey(survey, 1, job.reply),
            Work::Sql {
                operation,
                read,
                route,
                two_phase,
            } => {
                // Only a read of one partition key may be served basic, and only reads
                // snapshot (`SqlJob::isolation`).
                let basic = job.isolation == Isolation::Basic
                    && read
                    && matches!(&route, super::sql::SqlRoute::Keys(keys) if keys.len() == 1);
                let isolation = match job.isolation {
                    Isolation::Basic if basic => Isolation::Basic,
                    Isolation::Snapshot if read => Isolation::Snapshot,
                    _ => Isolation::Sequential,
                };
                let job_sql = SqlJob {
                    operation,
                    read,
                    route,
                    plans: 1,
                    phase: SqlPhase::New { two_phase },
                    isolation,
                };
                self.submit_sql(job_sql, job.reply)
            }
        }
    }

    /// A SQL statement goes where its route says (Sprint §6.1): pinned to partition keys, a
    /// command over their placement keys' positions (one partition: the router bypass, ordered
    /// in that group's log, reads too; several: one E-Cast message); over every partition, one
    /// E-Cast message to the whole ring (`RangeRead`, `RangeWrite`: every partition at the
    /// message's place) whose parts are the partitions' arcs, pinned to the configuration
    /// version they were taken from; over a range-placed table's key range, the same message
    /// to the positions of that range only (`SqlRoute::Range`: the arcs covering it are the
    /// parts); the catalog read, to the partition holding the tables'
    /// anchor (every partition holds the catalog). A write (DDL included) that reaches
    /// several partitions goes in two phases (`store::prepared`): a prepare and a decision,
    /// each to every partition.
    fn submit_sql(
        &mut self,
        mut job: SqlJob,
        reply: oneshot::Sender<Outcome>,
    ) -> GatewayInput<Outcome> {
        use super::sql::SqlRoute;
        let id = self.job_next;
        self.job_next += 1;
        let configuration = self.gateway.configuration();
        let version = configuration.version();
        let arcs_of = |range: &PositionSet| {
            let arcs = payload::partition_arcs(configuration, range);
            payload::SqlTarget::Arcs(arcs.into_iter().map(|(arc, _)| arc).collect())
        };
        let every = || arcs_of(&PositionSet::whole());
        // The positions a message without keys reaches: the whole ring, or a range-placed
        // table's key range (only the partitions covering it take part).
        let mut range = match &job.route {
            SqlRoute::Range(range) => range.clone(),
            _ => PositionSet::whole(),
        };
        let (mut target, mut positions) = match &job.route {
            SqlRoute::Any => (
                payload::SqlTarget::Any,
                Some(vec![self.placement.position(payload::SQL_ANCHOR)]),
            ),
            SqlRoute::Keys(keys) => (
                payload::SqlTarget::Keys(keys.clone()),
                Some(
                    keys.iter()
                        .map(|key| self.placement.position(key))
                        .collect(),
                ),
            ),
            SqlRoute::Every => (every(), None),
            SqlRoute::Range(range) => (arcs_of(range), None),
        };
        if let SqlPhase::New { two_phase } = job.phase {
            let partitions = match (&target, &positions) {
                (payload::SqlTarget::Arcs(arcs), _) => arcs.len(),
                (_, Some(positions)) => super::sql::partitions_of(configuration, positions),
                _ => 1,
            };
            job.phase = if two_phase && partitions > 1 {
                SqlPhase::Prepare {
                    statement: random_u64(),
                }
            } else if job.read
                && matches!(job.route, SqlRoute::Every)
                && super::sql::canary_reads_per_partition()
            {
                SqlPhase::PerPartition {
                    arc: 0,
                    answers: Vec::new(),
                }
            } else {
                SqlPhase::Once
            };
        }
        if let (SqlPhase::PerPartition { arc, .. }, payload::SqlTarget::Arcs(arcs)) =
            (&job.phase, &target)
        {
            if let Some(one) = arcs.get(*arc).cloned() {
                range = one.clone();
                target = payload::SqlTarget::Arcs(vec![one]);
            }
        }
        let operation = match &job.phase {
            SqlPhase::New { .. } | SqlPhase::Once | SqlPhase::PerPartition { .. } => {
                job.operation.clone()
            }
            SqlPhase::Prepare { statement } => store::prepare_operation(*statement, &job.operation),
            SqlPhase::Decide {
                statement, commit, ..
            } => store::decide_operation(*statement, *commit),
        };
        if !matches!(job.phase, SqlPhase::Once | SqlPhase::PerPartition { .. }) {
            // Both phases go to every partition, so that every partition holds the tables.
            (target, positions) = (every(), None);
            range = PositionSet::whole();
        }
        let payload = payload::SqlPayload {
            operation,
            target: target.clone(),
        };
        let parts = payload.parts();
        let bytes = payload.encode();
        let read = job.read;
        // A basic read of one partition key goes to its group's primary (`ecast::Gateway`:
        // answered from its executed state, or refused and read through the group's log). A
        // snapshot read of several groups (keys in several partitions, or every partition)
        // is one `PartitionOperation::Snapshot` per group at the `Query::Now` timestamp; of
        // one group, an op of its log.
        let isolation = match (&job.phase, &positions, job.isolation) {
            (SqlPhase::Once, Some(positions), Isolation::Basic) if positions.len() == 1 => {
                Isolation::Basic
            }
            (SqlPhase::Once, _, Isolation::Snapshot) => Isolation::Snapshot,
            _ => Isolation::Sequential,
        };
        let command = match positions {
            Some(positions) if read => GatewayCommand::Read {
                isolation,
                positions,
                payload: bytes,
                parts,
            },
            Some(positions) => GatewayCommand::Write {
                needs_answers: true,
                positions,
                payload: bytes,
                parts,
            },
            None if read => GatewayCommand::RangeRead {
                isolation,
                range,
                payload: bytes,
                parts,
            },
            None => GatewayCommand::RangeWrite {
                range,
                payload: bytes,
                parts,
            },
        };
        let pinned = matches!(target, payload::SqlTarget::Arcs(_));
        self.jobs.insert(id, (Planned::Sql(job, target), reply));
        if pinned {
            GatewayInput::SubmitPinned {
                id,
                command,
                version,
            }
        } else {
            GatewayInput::Submit { id, command }
        }
    }

    /// A SQL statement's completion: its answers as one engine outcome per partition, named
    /// (`sql::encode_answers`); a read that found no answer, or a message to every partition
    /// whose configuration moved on first (nothing ran), planned again; a two-phase
    /// statement's prepare followed by its decision.
    fn complete_sql(
        &mut self,
        id: u64,
        mut job: SqlJob,
        target: payload::SqlTarget,
        reply: oneshot::Sender<Outcome>,
        completion: Completion<Outcome>,
    ) {
        let plans_max = match job.phase {
            SqlPhase::Decide { .. } => DECIDE_PLANS_MAX,
            _ => SURVEY_PLANS_MAX,
        };
        let again = match &completion {
            Completion::Failed(Failure::NoAnswer) => job.read,
            Completion::Failed(Failure::Refused(_)) => true,
            _ => false,
        };
        if again && job.plans < plans_max {
            job.plans += 1;
            let input = self.submit_sql(job, reply);
            self.step(input);
            return;
        }
        let outcome = match (job.phase.clone(), completion) {
            (SqlPhase::Prepare { statement }, Completion::Done(answers)) => {
                let vote = match self.sql_answers(&target, answers) {
                    Ok(votes) => votes
                        .into_iter()
                        .find(|(_, vote)| super::sql::vote_failed(vote)),
                    // A vote lost: abort, and answer that the outcome is unknown.
                    Err(_) => None,
                };
                let commit = vote.is_none();
                // DDL is decided even then (the tests create their tables first).
                if super::fault::no_decisions() && !store::is_ddl_operation(&job.operation) {
                    log::info(format_args!(
                        "test fault: statement {statement:016x} not decided"
                    ));
                    let _ = reply.send(Outcome::Error(kv::KvError::Unavailable));
                    return;
                }
                return self.decide_sql(job, statement, commit, vote, reply);
            }
            (SqlPhase::Prepare { statement }, Completion::Failed(failure)) => {
                // Perhaps prepared somewhere: abort it, then answer that it failed.
                log::warn(format_args!(
                    "statement {id} failed to prepare: {failure:?}"
                ));
                return self.decide_sql(job, statement, false, None, reply);
            }
            (
                SqlPhase::Decide {
                    commit: false,
                    vote,
                    ..
                },
                Completion::Done(_),
            ) => match vote {
                Some(vote) => Outcome::Foreign(super::sql::encode_answers(&[vote])),
                None => Outcome::Error(kv::KvError::Unavailable),
            },
            (SqlPhase::PerPartition { arc, mut answers }, Completion::Done(parts)) => {
                match self.sql_answers(&target, parts) {
                    Ok(outcomes) => {
                        answers.extend(outcomes);
                        let arcs = payload::partition_arcs(
                            self.gateway.configuration(),
                            &PositionSet::whole(),
                        );
                        if arc + 1 < arcs.len() {
                            job.plans = 1;
                            job.phase = SqlPhase::PerPartition {
                                arc: arc + 1,
                                answers,
                            };
                            let input = self.submit_sql(job, reply);
                            self.step(input);
                            return;
                        }
                        Outcome::Foreign(super::sql::encode_answers(&answers))
                    }
                    Err(error) => Outcome::Error(error),
                }
            }
            (_, Completion::Done(answers)) => match self.sql_answers(&target, answers) {
                Ok(outcomes) => Outcome::Foreign(super::sql::encode_answers(&outcomes)),
                Err(error) => Outcome::Error(error),
            },
            (_, Completion::Failed(failure)) => {
                log::warn(format_args!("statement {id} failed: {failure:?}"));
                Outcome::Error(kv::KvError::Unavailable)
            }
        };
        let _ = reply.send(outcome);
        self.status.completed.fetch_add(1, Ordering::Relaxed);
    }

    /// Sends a two-phase statement's decision.
    fn decide_sql(
        &mut self,
        mut job: SqlJob,
        statement: u64,
        commit: bool,
        vote: Option<(String, Vec<u8>)>,
        reply: oneshot::Sender<Outcome>,
    ) {
        job.plans = 1;
        job.phase = SqlPhase::Decide {
            statement,
            commit,
            vote,
        };
        let input = self.submit_sql(job, reply);
        self.step(input);
    }

    /// The engine outcome per partition that answered, in part order, each named by the
    /// partition of the gateway's configuration holding its part; `Outcome::Ok` answers are
    /// parts another part's outcome covers. A missing part or a partition's error fails it.
    fn sql_answers(
        &self,
        target: &payload::SqlTarget,
        answers: BTreeMap<u64, Outcome>,
    ) -> Result<Vec<(String, Vec<u8>)>, kv::KvError> {
        let mut outcomes = Vec::new();
        for part in 0..target.part_count() {
            match answers.get(&part) {
                Some(Outcome::Foreign(bytes)) => {
                    let position = match target {
                        payload::SqlTarget::Keys(keys) => {
                            self.placement.position(&keys[part as usize])
                        }
                        payload::SqlTarget::Arcs(arcs) => Position(
                            arcs[part as usize]
                                .intervals()
                                .first()
                                .map_or(0, |interval| interval.0),
                        ),
                        payload::SqlTarget::Any => self.placement.position(payload::SQL_ANCHOR),
                    };
                    let name = super::sql::partition_name(self.gateway.configuration(), position);
                    outcomes.push((name, bytes.clone()));
                }
                Some(Outcome::Ok) => {}
                Some(Outcome::Error(error)) => return Err(error.clone()),
                // A write's answer lost with its partition's primary: it may have run.
                _ => return Err(kv::KvError::Unavailable),
            }
        }
        Ok(outcomes)
    }

    /// A survey is always a sequential E-Cast message (a consistent cut at its place in the
    /// global order), whatever the connection's read mode.
    fn submit_survey(
        &mut self,
        survey: Survey,
        plans: u32,
        reply: oneshot::Sender<Outcome>,
    ) -> GatewayInput<Outcome> {
        let id = self.job_next;
        self.job_next += 1;
        // A KEYS or SCAN pattern inside a range-placed namespace reads only its arc.
        let range = match &survey {
            Survey::Keys { pattern } | Survey::KeysOfType { pattern, .. } => {
                self.placement.positions_of_pattern(pattern.as_deref())
            }
            Survey::Count
            | Survey::Flush
            | Survey::Configure { .. }
            | Survey::ReadConfig
            | Survey::Expired { .. } => PositionSet::whole(),
        };
        let plan = SurveyPlan::new(survey, self.gateway.configuration(), &range);
        let positions = plan.points.clone();
        let payload = plan.encode();
        let parts = plan.parts();
        let command = if plan.is_read() {
            // One message to a minimal cover of live replicas (§6.2 range read).
            GatewayCommand::RangeRead {
                isolation: Isolation::Sequential,
                range: plan.range(),
                payload,
                parts,
            }
        } else {
            GatewayCommand::Write {
                needs_answers: false,
                positions,
                payload,
                parts,
            }
        };
        self.jobs.insert(id, (Planned::Survey(plan, plans), reply));
        GatewayInput::Submit { id, command }
    }

    fn submit_keyed(
        &mut self,
        split: Split,
        isolation: Isolation,
        reply: oneshot::Sender<Outcome>,
    ) -> GatewayInput<Outcome> {
        let id = self.job_next;
        self.job_next += 1;
        let positions = split.positions(&self.placement);
        let payload = split.encode();
        let parts = (0..split.commands.len() as u64).collect();
        let command = if split.is_read {
            GatewayCommand::Read {
                isolation,
                positions,
                payload,
                parts,
            }
        } else {
            GatewayCommand::Write {
                needs_answers: split.needs_answers(),
                positions,
                payload,
                parts,
            }
        };
        self.jobs.insert(id, (Planned::Keyed(split), reply));
        GatewayInput::Submit { id, command }
    }

    /// The gateway's input a frame stands for; frames about another sender (a previous
    /// incarnation of this gateway) are dropped.
    fn on_frame(&mut self, frame: Frame) -> Option<GatewayInput<Outcome>> {
        let parts = |outcomes: Vec<(u32, Outcome)>| {
            outcomes
                .into_iter()
                .map(|(index, outcome)| (u64::from(index), outcome))
                .collect()
        };
        let input = match frame {
            Frame::Reply { message } => GatewayInput::Router(message),
            Frame::Stable {
                sender,
                sequence,
                timestamp,
            } if sender == self.id => GatewayInput::Stable {
                sequence,
                timestamp,
            },
            Frame::Answer {
                sender,
                sequence,
                outcomes,
            } if sender == self.id => GatewayInput::Answer {
                sequence,
                answers: parts(outcomes),
            },
            Frame::SnapshotAnswer {
                sender,
                read_id,
                at,
                outcomes,
            } if sender == self.id => GatewayInput::SnapshotAnswer {
                read_id,
                at,
                answers: parts(outcomes),
            },
            Frame::SnapshotRefused {
                sender,
                read_id,
                refusal,
            } if sender == self.id => GatewayInput::SnapshotRefused { read_id, refusal },
            Frame::BasicAnswer {
                sender,
                read_id,
                outcomes,
            } if sender == self.id => GatewayInput::BasicAnswer {
                read_id,
                answers: parts(outcomes),
            },
            Frame::BasicRefused {
                sender,
                read_id,
                refusal,
            } if sender == self.id => GatewayInput::BasicRefused { read_id, refusal },
            Frame::PartitionReply { partition, message } => {
                GatewayInput::Partition { partition, message }
            }
            Frame::PartitionReleased {
                partition,
                client,
                number,
                result,
            } => GatewayInput::Released {
                partition,
                client,
                number,
                result,
            },
            Frame::Watermark { watermark } => GatewayInput::Watermark(watermark),
            Frame::Publish {
                from,
                id,
                channel,
                message,
            } => {
                self.hub
                    .on_publish(&self.cluster, from, id, &channel, &message);
                return None;
            }
            Frame::Published { id, receivers, .. } => {
                self.hub.on_published(id, receivers);
                return None;
            }
            Frame::TransactionsEnded { ids } => {
                self.hub.on_transactions_ended(&ids);
                return None;
            }
            Frame::NotifyFlags { flags } => {
                self.hub.set_notify_flags(flags);
                return None;
            }
            // §6.4: reads avoid processes receiving copies, for what they receive; an
            // announcement lasts 2 s.
            Frame::Busy { process, receiving } => {
                let incoming = if receiving {
                    PositionSet::whole()
                } else {
                    PositionSet::empty()
                };
                self.busy_input(process, incoming)
            }
            Frame::Receiving { process, incoming } => self.busy_input(process, incoming),
            _ => return None,
        };
        Some(input)
    }

    /// Records what `process` says it is receiving (nothing: it is not busy), forgets
    /// announcements older than 2 s, and hands the gateway what its reads avoid.
    fn busy_input(&mut self, process: ProcessId, incoming: PositionSet) -> GatewayInput<Outcome> {
        if incoming.is_empty() {
            self.busy.remove(&process);
        } else {
            self.busy.insert(process, (Instant::now(), incoming));
        }
        self.busy
            .retain(|_, (at, _)| at.elapsed() < Duration::from_secs(2));
        GatewayInput::Busy(
            self.busy
                .iter()
                .map(|(process, (_, incoming))| (*process, incoming.clone()))
                .collect(),
        )
    }

    /// Executes the gateway's effects (and what they lead to), then publishes its counters.
    fn execute(&mut self, effects: Vec<GatewayEffect<Outcome>>) {
        let mut queue = VecDeque::from(effects);
        while let Some(effect) = queue.pop_front() {
            match effect {
                GatewayEffect::Request { router, request } => {
                    self.status
                        .router_target
                        .store(u64::from(router), Ordering::Relaxed);
                    let address = self.cluster.routers[router as usize].address;
                    let reply_to = self.storage;
                    self.links
                        .send(address, Frame::Request { reply_to, request });
                }
                GatewayEffect::SnapshotRead { router, read, .. } => {
                    let address = self.cluster.routers[router as usize].address;
                    self.links.send(address, Frame::SnapshotRead { read });
                }
                GatewayEffect::BasicRead {
                    to,
                    read_id,
                    planned_at,
                    payload,
                    ..
                } => {
                    if let Some(storage) = self.cluster.storage(to) {
                        let frame = Frame::BasicRead {
                            sender: self.id,
                            read_id,
                            planned_at,
                            payload,
                        };
                        self.links.send(storage.address, frame);
                    }
                }
                GatewayEffect::Plan { id } => {
                    // This gateway submits no configuration commands.
                    let mut more = Vec::new();
                    let input = GatewayInput::Planned { id, message: None };
                    self.gateway.step(input, &mut more);
                    queue.extend(more);
                }
                GatewayEffect::Refused { refusal, .. } => {
                    log::info(format_args!("message refused ({refusal:?}): re-planning"));
                }
                GatewayEffect::ConfigurationRefreshed { version } => {
                    self.status
                        .gateway_version
                        .store(version.0, Ordering::Relaxed);
                }
                GatewayEffect::Complete { id, completion } => self.complete(id, completion),
                GatewayEffect::BypassGroups { added, dropped } => {
                    for partition in dropped {
                        self.groups.remove(&partition);
                    }
                    for group in added {
                        self.groups.insert(group.destination(), group.members);
                    }
                    self.status
                        .bypass_groups
                        .store(self.groups.len() as u64, Ordering::Relaxed);
                }
                GatewayEffect::PartitionRequest {
                    partition,
                    replica,
                    request,
                    ..
                } => {
                    if let Some(address) = self.member_address(partition, replica) {
                        let frame = Frame::PartitionRequest { partition, request };
                        self.links.send(address, frame);
                    }
                }
                GatewayEffect::PartitionBasicRead {
                    partition,
                    replica,
                    read_id,
                    planned_at,
                    payload,
                    ..
                } => {
                    if let Some(address) = self.member_address(partition, replica) {
                        let frame = Frame::PartitionBasicRead {
                            partition,
                            sender: self.id,
                            read_id,
                            planned_at,
                            payload,
                        };
                        self.links.send(address, frame);
                    }
                }
                GatewayEffect::Submitted { .. } | GatewayEffect::Sequenced { .. } => {}
            }
        }
        let stats = self.gateway.stats();
        let status = &self.status;
        status
            .router_answers
            .store(stats.router_answers, Ordering::Relaxed);
        status
            .refused
            .store(stats.refusals + stats.basic_refusals, Ordering::Relaxed);
        status.retried.store(stats.retries, Ordering::Relaxed);
        status
            .nilext_fast
            .store(stats.nilext_fast, Ordering::Relaxed);
        status
            .nilext_slow_hopeless
            .store(stats.nilext_slow_hopeless, Ordering::Relaxed);
        status
            .nilext_slow_rounds
            .store(stats.nilext_slow_rounds, Ordering::Relaxed);
        status
            .nilext_replied
            .store(stats.nilext_replied, Ordering::Relaxed);
        self.status
            .nilext_slow_adapt
            .store(stats.nilext_slow_adapt, Ordering::Relaxed);
        self.status
            .comm_fast
            .store(stats.comm_fast, Ordering::Relaxed);
        self.status
            .adapt_two_rtt_groups
            .store(stats.adapt_two_rtt_groups, Ordering::Relaxed);
        self.status
            .adapt_switches
            .store(stats.adapt_switches, Ordering::Relaxed);
        status
            .bypass_resends
            .store(stats.bypass_resends, Ordering::Relaxed);
        self.status
            .basic_answered
            .store(stats.basic_bypass_answered, Ordering::Relaxed);
        self.status
            .basic_ordered
            .store(stats.basic_bypass_ordered, Ordering::Relaxed);
        self.status
            .snapshot_group_answered
            .store(stats.snapshot_group_answered, Ordering::Relaxed);
        self.status
            .snapshot_refusals
            .store(stats.snapshot_refusals, Ordering::Relaxed);
        self.status
            .snapshot_group_fallbacks
            .store(stats.snapshot_group_fallbacks, Ordering::Relaxed);
        status
            .bypass_groups_added
            .store(stats.bypass_groups_added, Ordering::Relaxed);
        status
            .bypass_sent_to_added
            .store(stats.bypass_sent_to_added, Ordering::Relaxed);
        status
            .nilext_executed_acks
            .store(stats.nilext_executed_acks, Ordering::Relaxed);
    }

    fn complete(&mut self, id: u64, completion: Completion<Outcome>) {
        let Some((planned, reply)) = self.jobs.remove(&id) else {
            return;
        };
        let split = match planned {
            Planned::Keyed(split) => split,
            Planned::Sql(job, target) => {
                self.complete_sql(id, job, target, reply, completion);
                return;
            }
            Planned::Survey(plan, plans) => {
                let outcome = match completion {
                    Completion::Done(answers) => plan.merge(&answers),
                    Completion::Failed(Failure::NoAnswer) if plans < SURVEY_PLANS_MAX => {
                        // The arcs were planned against an older ring (a keyspace change
                        // came between): plan again against the gateway's configuration.
                        let input = self.submit_survey(plan.survey, plans + 1, reply);
                        self.step(input);
                        return;
                    }
                    Completion::Failed(failure) => {
                        log::warn(format_args!("command {id} failed: {failure:?}"));
                        Outcome::Error(kv::KvError::Unavailable)
                    }
                };
                let _ = reply.send(outcome);
                self.status.completed.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        let outcome = match completion {
            Completion::Done(answers) if answers.len() == split.commands.len() => {
                let outcomes: Vec<Outcome> = answers.into_values().collect();
                split.merge(&outcomes)
            }
            // The steps of a multi-key command need every outcome.
            Completion::Done(_) if split.merge == payload::Merge::Each => {
                Outcome::Error(kv::KvError::Unavailable)
            }
            // A plain SET or MSET: stable is all it needs.
            Completion::Done(_) => Outcome::Ok,
            Completion::Failed(failure) => {
                let reason = match failure {
                    Failure::TimedOut => {
                        "TRYAGAIN the router group or the partition is unavailable".to_string()
                    }
                    Failure::NoAnswer => "TRYAGAIN the read found no answer".to_string(),
                    Failure::AnswersLost => "the write is done but its result was lost".to_string(),
                    Failure::Lost(reason) => format!("the message was lost: {reason}"),
                    Failure::Refused(refusal) => format!("refused: {refusal:?}"),
                    Failure::NotPlanned => "not planned".to_string(),
                };
                log::warn(format_args!("command {id} failed: {reason}"));
                Outcome::Error(kv::KvError::Unavailable)
            }
        };
        let _ = reply.send(outcome);
        self.status.completed.fetch_add(1, Ordering::Relaxed);
    }
}

// ----- RESP connections. -----

async fn serve(
    listener: TcpListener,
    jobs: mpsc::Sender<Job>,
    config: ClusterConfig,
    storage: ProcessId,
    status: Arc<GatewayStatus>,
    security: Arc<crate::security::Security>,
    hub: Arc<super::pubsub::Hub>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(security.config.max_connections));
    let scripts = Arc::new(super::scripting::Scripts::default());
    let clients = Arc::new(super::clients::Clients::default());
    let notifier = super::pubsub::Notifier {
        hub: hub.clone(),
        jobs: jobs.clone(),
    };
    tokio::spawn(super::reclaim::run(jobs.clone(), notifier));
    loop {
        let (stream, address) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                log::warn(format_args!("accepting a client failed: {error}"));
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let security_timeout = security.auth_timeout();
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            tokio::spawn(crate::security::resp::refuse_connection(stream));
            continue;
        };
        let local = stream.local_addr().unwrap_or(address);
        let mut connection = Connection {
            client: clients.register(address, local),
            clients: clients.clone(),
            session: crate::security::resp::Session::new(
                security.clone(),
                super::sql::ClusterBackend::new(jobs.clone())
                    .with_owner(storage, status.incarnation.clone()),
            ),
            jobs: jobs.clone(),
            isolation: Isolation::Sequential,
            requested: Isolation::Sequential,
            protocol: 2,
            name: None,
            config: config.clone(),
            storage,
            status: status.clone(),
            transaction: super::transaction::Session::default(),
            scripts: scripts.clone(),
            hub: hub.clone(),
            subscriptions: super::pubsub::Subscriptions::new(),
            reply_mode: ReplyMode::On,
        };
        let tls = security.tls().cloned();
        tokio::spawn(async move {
            match tls {
                None => connection.run(stream).await,
                Some(acceptor) => {
                    if let Some(encrypted) =
                        crate::security::resp::handshake(&acceptor, stream, &security_timeout).await
                    {
                        connection.run(encrypted).await;
                    }
                }
            }
            connection.subscriptions.leave(&connection.hub);
            drop(permit);
        });
    }
}

struct Connection {
    jobs: mpsc::Sender<Job>,
    /// The isolation this connection's reads run with.
    isolation: Isolation,
    /// The isolation `READMODE` asked for (INFO's `tessera_readmode_requested`): `isolation`
    /// itself today (every level is served as asked; `read_mode`). `READMODE` alone reports
    /// `isolation`, the level served.
    requested: Isolation,
    protocol: u8,
    name: Option<Vec<u8>>,
    config: ClusterConfig,
    storage: ProcessId,
    status: Arc<GatewayStatus>,
    /// Who the client is, and what it may send and run (`crate::security::resp`).
    session: crate::security::resp::Session<super::sql::ClusterBackend>,
    /// MULTI and WATCH (`transaction::Session`).
    transaction: super::transaction::Session,
    /// This gateway's script cache and running scripts (`scripting`), shared by its
    /// connections.
    scripts: Arc<super::scripting::Scripts>,
    /// This gateway's pub/sub hub, and this connection's subscriptions (`pubsub`).
    hub: Arc<super::pubsub::Hub>,
    subscriptions: super::pubsub::Subscriptions,
    /// This connection's entry in its gateway's client table (CLIENT LIST, KILL…).
    client: super::clients::Registration,
    clients: Arc<super::clients::Clients>,
    /// CLIENT REPLY: whether this connection's replies are sent.
    reply_mode: ReplyMode,
}

/// CLIENT REPLY's modes. Pushes (pub/sub confirmations and messages) are sent in every mode,
/// as Redis 7.0 sends them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReplyMode {
    On,
    /// No reply is sent until CLIENT REPLY ON.
    Off,
    /// The next command's reply is not sent.
    SkipNext,
}

/// `CLIENT REPLY ON|OFF|SKIP`: the new mode and the reply (sent only for ON), or the error;
/// `None` for any other command.
fn client_reply(arguments: &[Vec<u8>]) -> Option<Result<ReplyMode, Value>> {
    let [command, subcommand, rest @ ..] = arguments else {
        return None;
    };
    if !command.eq_ignore_ascii_case(b"client") || !subcommand.eq_ignore_ascii_case(b"reply") {
        return None;
    }
    Some(match rest {
        [mode] if mode.eq_ignore_ascii_case(b"on") => Ok(ReplyMode::On),
        [mode] if mode.eq_ignore_ascii_case(b"off") => Ok(ReplyMode::Off),
        [mode] if mode.eq_ignore_ascii_case(b"skip") => Ok(ReplyMode::SkipNext),
        [_] => Err(Value::Error("ERR syntax error".into())),
        _ => Err(Value::Error(
            "ERR wrong number of arguments for 'client|reply' command".into(),
        )),
    })
}

/// TIME: this gateway's clock, `[unix seconds, microseconds]` as Redis replies it.
fn time_reply() -> Value {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Value::Array(vec![
        Value::Bulk(now.as_secs().to_string().into_bytes()),
        Value::Bulk(now.subsec_micros().to_string().into_bytes()),
    ])
}

/// Hidden, test-only (debug builds, `TESSERA_TEST_BREAK_COMMAND=name`): every command of that
/// name answers an error, so that the Valkey ratchet's canary (`tests/valkey/ratchet.sh
/// --canary`) can show that a broken command fails the ratchet.
fn broken_on_purpose(arguments: &[Vec<u8>]) -> bool {
    if !cfg!(debug_assertions) {
        return false;
    }
    static BROKEN: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let broken = BROKEN.get_or_init(|| std::env::var("TESSERA_TEST_BREAK_COMMAND").ok());
    broken
        .as_deref()
        .is_some_and(|name| arguments[0].eq_ignore_ascii_case(name.as_bytes()))
}

/// Whether a command may block its connection (a blocking pop outside MULTI).
fn may_block(arguments: &[Vec<u8>]) -> bool {
    const BLOCKING: &[&[u8]] = &[
        b"blpop",
        b"brpop",
        b"brpoplpush",
        b"blmove",
        b"blmpop",
        b"bzpopmin",
        b"bzpopmax",
        b"bzmpop",
    ];
    arguments.first().is_some_and(|name| {
        BLOCKING
            .iter()
            .any(|blocking| name.eq_ignore_ascii_case(blocking))
    })
}

/// A reply in a pipeline: known at once, or waiting for the gateway.
enum Answer {
    Ready(Value),
    Waiting(resp::Pending, oneshot::Receiver<Outcome>),
    /// A command without a key (planned here, not by `resp`): its reply's shape.
    Formatted(oneshot::Receiver<Outcome>, KeylessReply),
    /// SUBSCRIBE and its kin: one push per channel or pattern.
    Pushes(Vec<super::pubsub::Push>),
    Close,
}

/// How a keyless command's merged outcome becomes its reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KeylessReply {
    /// KEYS: an array of the keys.
    Keys,
    /// SCAN: cursor 0 and every matching key (of the type asked, if any) in one page.
    Scan,
    /// FLUSHALL, FLUSHDB: `+OK`.
    Ok,
    /// RANDOMKEY: one of the keys, drawn here, or nil if there is none.
    Random,
}

fn keyless_reply(shape: KeylessReply, outcome: &Outcome) -> Value {
    let keys = |values: &[Option<Vec<u8>>]| {
        Value::Array(values.iter().flatten().cloned().map(Value::Bulk).collect())
    };
    match (shape, outcome) {
        (_, Outcome::Error(error)) => {
            let code = if *error == kv::KvError::Unavailable {
                "TRYAGAIN"
            } else {
                "ERR"
            };
            Value::Error(format!("{code} {error}"))
        }
        (KeylessReply::Keys, Outcome::Values(values)) => keys(values),
        (KeylessReply::Scan, Outcome::Values(values)) => {
            Value::Array(vec![Value::Bulk(b"0".to_vec()), keys(values)])
        }
        (KeylessReply::Ok, Outcome::Ok) => Value::ok(),
        (KeylessReply::Random, Outcome::Values(values)) => {
            let keys: Vec<&Vec<u8>> = values.iter().flatten().collect();
            if keys.is_empty() {
                Value::Null
            } else {
                let drawn = random_u64() % keys.len() as u64;
                Value::Bulk(keys[drawn as usize].clone())
            }
        }
        _ => Value::Error("ERR internal error: the store returned an unexpected outcome".into()),
    }
}

/// KEYS, SCAN, RANDOMKEY, FLUSHALL and FLUSHDB, which the `resp` planner does not know: `None` for any
/// other command, else the survey and the reply's shape, or the error reply.
fn plan_keyless(arguments: &[Vec<u8>]) -> Option<Result<(Survey, KeylessReply), String>> {
    let name = arguments[0].to_ascii_lowercase();
    let wrong_arity = |name: &str| format!("ERR wrong number of arguments for '{name}' command");
    let planned = match name.as_slice() {
        b"keys" => match arguments {
            [_, pattern] => Ok((
                Survey::Keys {
                    pattern: Some(pattern.clone()),
                },
                KeylessReply::Keys,
            )),
            _ => Err(wrong_arity("keys")),
        },
        b"scan" => plan_scan(arguments),
        // Every key is listed and one drawn at the gateway: O(keys), but any key is as
        // likely as any other (Redis draws from its hash table).
        b"randomkey" => match arguments {
            [_] => Ok((Survey::Keys { pattern: None }, KeylessReply::Random)),
            _ => Err(wrong_arity("randomkey")),
        },
        b"flushall" | b"flushdb" => {
            let name = String::from_utf8_lossy(&name).into_owned();
            match arguments {
                [_] => Ok((Survey::Flush, KeylessReply::Ok)),
                [_, mode]
                    if mode.eq_ignore_ascii_case(b"sync")
                        || mode.eq_ignore_ascii_case(b"async") =>
                {
                    Ok((Survey::Flush, KeylessReply::Ok))
                }
                [_, _] => Err("ERR syntax error".to_string()),
                _ => Err(wrong_arity(&name)),
            }
        }
        _ => return None,
    };
    Some(planned)
}

/// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`: the whole keyspace is one page, so
/// the only cursor is 0 and the reply's cursor is 0; COUNT is checked and ignored.
fn plan_scan(arguments: &[Vec<u8>]) -> Result<(Survey, KeylessReply), String> {
    let Some(cursor) = arguments.get(1) else {
        return Err("ERR wrong number of arguments for 'scan' command".to_string());
    };
    if cursor.as_slice() != b"0" {
        return Err("ERR invalid cursor".to_string());
    }
    let mut pattern = None;
    let mut type_name = None;
    let mut options = arguments[2..].chunks(2);
    for option in options.by_ref() {
        let [name, value] = option else {
            return Err("ERR syntax error".to_string());
        };
        if name.eq_ignore_ascii_case(b"match") {
            pattern = Some(value.clone());
        } else if name.eq_ignore_ascii_case(b"count") {
            let count = std::str::from_utf8(value)
                .ok()
                .and_then(|text| text.parse::<i64>().ok());
            match count {
                Some(count) if count >= 1 => {}
                Some(_) => return Err("ERR syntax error".to_string()),
                None => return Err("ERR value is not an integer or out of range".to_string()),
            }
        } else if name.eq_ignore_ascii_case(b"type") {
            // Matched against TYPE's names, case-insensitively as Redis 7.0 does; a name no
            // type has matches nothing.
            type_name = Some(String::from_utf8_lossy(value).to_ascii_lowercase());
        } else {
            return Err("ERR syntax error".to_string());
        }
    }
    let survey = match type_name {
        Some(type_name) => Survey::KeysOfType { pattern, type_name },
        None => Survey::Keys { pattern },
    };
    Ok((survey, KeylessReply::Scan))
}

/// Awaits every waiting answer, in order (sending each write's keyspace notifications).
async fn resolve(
    answers: &mut [Answer],
    jobs: &mpsc::Sender<Job>,
    notifier: &super::pubsub::Notifier,
) {
    for answer in answers.iter_mut() {
        match answer {
            Answer::Waiting(pending, receiver) => {
                let outcome = receiver
                    .await
                    .unwrap_or(Outcome::Error(kv::KvError::Unavailable));
                let outcome = super::transaction::settle(jobs, pending, outcome).await;
                notifier.notify(&pending.command, &outcome);
                *answer = Answer::Ready(resp::finish(pending, &outcome));
            }
            Answer::Formatted(receiver, shape) => {
                let outcome = receiver
                    .await
                    .unwrap_or(Outcome::Error(kv::KvError::Unavailable));
                *answer = Answer::Ready(keyless_reply(*shape, &outcome));
            }
            Answer::Ready(_) | Answer::Pushes(_) | Answer::Close => {}
        }
    }
}

/// What a connection waits for: bytes from its client, or a message for it to push.
enum ConnectionEvent {
    /// How many bytes were read; `None`: the client left, or was idle past `timeout`.
    Read(Option<usize>),
    Push(super::pubsub::Push),
}

/// One read from the client (`None` on end of file, an error, or `timeout` passing: an idle
/// or unauthenticated client is closed without a reply, as Redis closes idle clients).
async fn read_some<S>(stream: &mut S, chunk: &mut [u8], timeout: Option<Duration>) -> Option<usize>
where
    S: tokio::io::AsyncRead + Unpin,
{
    let read = match timeout {
        None => stream.read(chunk).await,
        Some(timeout) => tokio::time::timeout(timeout, stream.read(chunk))
            .await
            .ok()?,
    };
    match read {
        Ok(0) | Err(_) => None,
        Ok(read) => Some(read),
    }
}

/// A client's connection, plain or TLS: its TCP socket, which a blocking command watches for
/// the client leaving.
trait ClientSocket {
    fn socket(&self) -> &TcpStream;
}

impl ClientSocket for TcpStream {
    fn socket(&self) -> &TcpStream {
        self
    }
}

impl ClientSocket for tokio_rustls::server::TlsStream<TcpStream> {
    fn socket(&self) -> &TcpStream {
        self.get_ref().0
    }
}

impl Connection {
    async fn run<S>(&mut self, mut stream: S)
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + ClientSocket,
    {
        let mut input: Vec<u8> = Vec::with_capacity(16 * 1024);
        let mut output: Vec<u8> = Vec::with_capacity(16 * 1024);
        let mut chunk = vec![0u8; 64 * 1024];
        let kill = self.client.kill.clone();
        // Set when a blocking command waits in the input behind answers not yet written.
        let mut resume = false;
        loop {
            let timeout = self.session.read_timeout();
            let event = if std::mem::take(&mut resume) {
                ConnectionEvent::Read(Some(0))
            } else {
                tokio::select! {
                read = read_some(&mut stream, &mut chunk, timeout) => ConnectionEvent::Read(read),
                Some(push) = self.subscriptions.receiver.recv() => ConnectionEvent::Push(push),
                // CLIENT KILL: closed at once, as Redis closes a killed client.
                _ = kill.notified() => ConnectionEvent::Read(None),
                }
            };
            let read = match event {
                ConnectionEvent::Read(Some(read)) => read,
                ConnectionEvent::Read(None) => return,
                ConnectionEvent::Push(push) => {
                    if !self.write_pushes(&mut stream, push).await {
                        return;
                    }
                    continue;
                }
            };
            input.extend_from_slice(&chunk[..read]);
            let arrived = std::time::Instant::now();
            let mut consumed_total = 0;
            let mut answers = Vec::new();
            // Each answer's command and when it started (INFO commandstats, SLOWLOG).
            let mut calls = Vec::new();
            let mut close = false;
            loop {
                let limits = self.session.limits();
                match parse_request(&input[consumed_total..], &limits) {
                    Ok(None) => break,
                    Ok(Some((arguments, _)))
                        if !answers.is_empty()
                            && may_block(&arguments)
                            && self.transaction.queued().is_none() =>
                    {
                        // The replies before a blocking command are written before it waits
                        // (its client may be waiting for them to unblock it); it runs next.
                        resume = true;
                        break;
                    }
                    Ok(Some((arguments, consumed))) => {
                        consumed_total += consumed;
                        if !arguments.is_empty() {
                            // Every command of the pipeline is submitted before any is
                            // awaited: the sender sequences them in this order. Snapshot and
                            // basic reads bypass the sequence, so they wait for the commands
                            // before them (a read sees the pipeline's earlier writes).
                            if self.isolation != Isolation::Sequential {
                                resolve(&mut answers, &self.jobs, &self.notifier()).await;
                            }
                            // Before (`cmd` is the current command, as in Redis) and after
                            // (the subscriptions, name and MULTI it left).
                            self.record_activity(&arguments);
                            let started = Instant::now();
                            let silenced = self.silences(&arguments);
                            answers.push(self.on_command(&arguments, stream.socket()).await);
                            self.record_activity(&arguments);
                            calls.push((arguments, started, silenced));
                        }
                    }
                    Err(error) => {
                        answers.push(Answer::Ready(self.session.parse_error(&error)));
                        close = true;
                        break;
                    }
                }
            }
            input.drain(..consumed_total);
            let mut calls = calls.into_iter();
            for answer in answers {
                // A parse error's answer, always the last, has no command.
                let call = calls.next();
                let value = match answer {
                    Answer::Ready(value) => value,
                    Answer::Waiting(pending, receiver) => {
                        let outcome = receiver
                            .await
                            .unwrap_or(Outcome::Error(kv::KvError::Unavailable));
                        let outcome =
                            super::transaction::settle(&self.jobs, &pending, outcome).await;
                        self.notifier().notify(&pending.command, &outcome);
                        resp::finish(&pending, &outcome)
                    }
                    Answer::Formatted(receiver, shape) => {
                        let outcome = receiver
                            .await
                            .unwrap_or(Outcome::Error(kv::KvError::Unavailable));
                        keyless_reply(shape, &outcome)
                    }
                    Answer::Pushes(pushes) => {
                        for push in &pushes {
                            super::pubsub::encode_push(push, self.protocol, &mut output);
                        }
                        continue;
                    }
                    Answer::Close => {
                        close = true;
                        Value::Simple("OK".to_string())
                    }
                };
                self.status
                    .metrics
                    .resp_latency
                    .observe(arrived.elapsed().as_secs_f64());
                let mut silenced = false;
                if let Some((arguments, started, silent)) = call {
                    self.clients
                        .record(self.client.id, &arguments, &value, started.elapsed());
                    silenced = silent;
                }
                if !silenced {
                    encode_reply(&value, self.protocol, &mut output);
                }
                if close {
                    break;
                }
            }
            // Flushed: a TLS stream holds its last record until then.
            let written = stream.write_all(&output).await.is_ok() && stream.flush().await.is_ok();
            if !written || close {
                return;
            }
            output.clear();
        }
    }

    /// `stream`: the client's, which a blocking command watches for the client leaving.
    async fn on_command(&mut self, arguments: &[Vec<u8>], stream: &TcpStream) -> Answer {
        use crate::security::resp::Intercept;
        let rewritten;
        let arguments = match self.session.intercept(arguments).await {
            Intercept::Reply(value) => return Answer::Ready(value),
            Intercept::Pass => arguments,
            Intercept::Rewritten(arguments) => {
                rewritten = arguments;
                &rewritten[..]
            }
        };
        if broken_on_purpose(arguments) {
            return Answer::Ready(Value::Error(
                "ERR broken on purpose (TESSERA_TEST_BREAK_COMMAND)".into(),
            ));
        }
        if let Some(busy) = self.scripts.refuse_busy(arguments) {
            // Inside MULTI, as Redis: a command refused for BUSY makes EXEC abort, and an EXEC
            // refused for it discards the transaction.
            let Value::Error(text) = &busy else {
                unreachable!("BUSY is an error reply")
            };
            if arguments[0].eq_ignore_ascii_case(b"exec") {
                if let Some(aborted) = self.transaction.abort_exec(text) {
                    return Answer::Ready(aborted);
                }
            } else if let Some(refused) = self.transaction.refuse_queued(text) {
                return Answer::Ready(refused);
            }
            return Answer::Ready(busy);
        }
        if let Some(answer) = self.on_pubsub_command(arguments).await {
            return answer;
        }
        if let Some(mode) = client_reply(arguments) {
            return Answer::Ready(match mode {
                Ok(mode) => {
                    self.reply_mode = mode;
                    Value::ok()
                }
                Err(error) => error,
            });
        }
        if arguments[0].eq_ignore_ascii_case(b"client") {
            if let Some(value) = self.clients.on_command(self.client.id, arguments) {
                return Answer::Ready(value);
            }
        }
        if let Some(value) = self.on_script_command(arguments).await {
            return Answer::Ready(value);
        }
        if let Some(value) = self.on_stats_command(arguments) {
            return Answer::Ready(value);
        }
        if let Some(value) = self.on_config_command(arguments).await {
            return Answer::Ready(value);
        }
        let keyless = plan_keyless(arguments).is_some();
        let exec = arguments.len() == 1 && arguments[0].eq_ignore_ascii_case(b"exec");
        let deferred = if exec {
            self.transaction.take_deferred()
        } else {
            Vec::new()
        };
        if let Some(value) = self
            .transaction
            .on_command(&self.jobs, arguments, keyless, &self.notifier())
            .await
        {
            return Answer::Ready(self.run_deferred(value, deferred).await);
        }
        if let [name] = arguments {
            if name.eq_ignore_ascii_case(b"time") {
                return Answer::Ready(time_reply());
            }
        }
        if arguments[0].eq_ignore_ascii_case(b"READMODE") {
            return Answer::Ready(self.read_mode(arguments));
        }
        if let Some(keyless) = plan_keyless(arguments) {
            return match keyless {
                Err(error) => Answer::Ready(Value::Error(error)),
                Ok((survey, reply)) => match self.submit(Work::Survey(survey)).await {
                    Ok(receiver) => Answer::Formatted(receiver, reply),
                    Err(value) => Answer::Ready(value),
                },
            };
        }
        let value = match resp::plan(arguments) {
            Plan::Reply(value) => value,
            Plan::Execute(mut pending) => {
                // The only time the storage processes see: stamped here, where it is planned.
                pending.stamp(super::fault::stamp_now_ms());
                if super::transaction::needs_reservation(&pending.command) {
                    // Every earlier command of the pipeline was submitted already, and the
                    // next ones wait for this one: the pipeline's order is kept.
                    return Answer::Ready(
                        super::transaction::execute_one(
                            &self.jobs,
                            &pending,
                            stream,
                            (&self.clients, self.client.id),
                            &self.notifier(),
                        )
                        .await,
                    );
                }
                let work = match payload::split(&pending.command) {
                    Ok(split) => Work::Keyed(split),
                    Err(_) if pending.command == kv::Command::Count => Work::Survey(Survey::Count),
                    Err(_) => {
                        return Answer::Ready(Value::Error(
                            "ERR not supported by a partitioned (sequenced) cluster yet".into(),
                        ))
                    }
                };
                return match self.submit(work).await {
                    Ok(receiver) => Answer::Waiting(pending, receiver),
                    Err(value) => Answer::Ready(value),
                };
            }
            Plan::Hello {
                protocol,
                client_name,
            } => {
                if protocol != 0 {
                    self.protocol = protocol;
                }
                if let Some(name) = client_name {
                    self.name = (!name.is_empty()).then_some(name);
                }
                resp::hello_reply(self.protocol, &self.server_info())
            }
            Plan::Info { section } => resp::info_reply(&self.server_info(), section.as_deref()),
            Plan::SetName(name) => {
                self.name = (!name.is_empty()).then_some(name);
                Value::ok()
            }
            Plan::GetName => self.name.clone().map_or(Value::Null, Value::Bulk),
            Plan::PeerDelay { micros } => {
                super::link::set_send_delay(Duration::from_micros(micros));
                log::info(format_args!(
                    "DEBUG PEER-DELAY: every frame this process sends waits {micros} us"
                ));
                Value::ok()
            }
            Plan::Quit => return Answer::Close,
        };
        Answer::Ready(value)
    }

    /// EXEC's reply with the deferred commands (CONFIG inside MULTI) run in queue order after
    /// the transaction's other commands, each reply in its place; nothing runs if EXEC did not
    /// (aborted, or nil because a watched key changed).
    async fn run_deferred(&mut self, reply: Value, deferred: Vec<(usize, Vec<Vec<u8>>)>) -> Value {
        let Value::Array(mut replies) = reply else {
            return reply;
        };
        for (place, arguments) in deferred {
            assert!(
                place < replies.len(),
                "a deferred command has its place in EXEC's reply"
            );
            let value = self.on_config_command(&arguments).await;
            replies[place] = value.unwrap_or_else(|| Value::Error("ERR internal error".into()));
        }
        Value::Array(replies)
    }

    /// This connection's keyspace notifier (its gateway's hub and parameters).
    fn notifier(&self) -> super::pubsub::Notifier {
        super::pubsub::Notifier {
            hub: self.hub.clone(),
            jobs: self.jobs.clone(),
        }
    }

    /// Whether the reply to the command about to run is dropped (CLIENT REPLY OFF, or SKIP
    /// before it). CLIENT REPLY itself: ON is answered, OFF and SKIP are not.
    fn silences(&mut self, arguments: &[Vec<u8>]) -> bool {
        if let Some(Ok(mode)) = client_reply(arguments) {
            return mode != ReplyMode::On;
        }
        match self.reply_mode {
            ReplyMode::On => false,
            ReplyMode::Off => true,
            ReplyMode::SkipNext => {
                self.reply_mode = ReplyMode::On;
                true
            }
        }
    }

    /// Tells the client table the command this connection is about to run (CLIENT LIST's
    /// `cmd`, as Redis shows the current command).
    fn record_activity(&self, arguments: &[Vec<u8>]) {
        let (channels, patterns) = self.subscriptions.counts();
        let activity = super::clients::Activity {
            name: self.name.as_deref(),
            arguments,
            protocol: self.protocol,
            channels,
            patterns,
            queued: self.transaction.queued(),
        };
        self.clients.on_activity(self.client.id, activity);
    }

    /// SUBSCRIBE, PUBLISH, PUBSUB… and the subscribed mode's refusals (`pubsub`); `None` for
    /// any other command. Inside MULTI the pub/sub commands are refused (and EXEC aborts).
    async fn on_pubsub_command(&mut self, arguments: &[Vec<u8>]) -> Option<Answer> {
        let name = arguments[0].to_ascii_lowercase();
        let pubsub_name = matches!(
            name.as_slice(),
            b"subscribe"
                | b"psubscribe"
                | b"unsubscribe"
                | b"punsubscribe"
                | b"publish"
                | b"pubsub"
        );
        if pubsub_name {
            if let Some(refused) = self.transaction.refuse_queued(
                "ERR SUBSCRIBE, UNSUBSCRIBE, PUBLISH and PUBSUB are not supported inside MULTI yet",
            ) {
                return Some(Answer::Ready(refused));
            }
        }
        let answer = self
            .subscriptions
            .on_command(&self.hub, arguments, self.protocol)
            .await?;
        Some(match answer {
            super::pubsub::PubSubAnswer::Pushes(pushes) => Answer::Pushes(pushes),
            super::pubsub::PubSubAnswer::Reply(value) => Answer::Ready(value),
        })
    }

    /// Writes `first` and every other message waiting for this connection; false if the
    /// client is gone.
    async fn write_pushes<S>(&mut self, stream: &mut S, first: super::pubsub::Push) -> bool
    where
        S: tokio::io::AsyncWrite + Unpin,
    {
        let mut output = Vec::new();
        super::pubsub::encode_push(&first, self.protocol, &mut output);
        while let Ok(push) = self.subscriptions.receiver.try_recv() {
            super::pubsub::encode_push(&push, self.protocol, &mut output);
        }
        stream.write_all(&output).await.is_ok() && stream.flush().await.is_ok()
    }

    /// CONFIG GET and CONFIG SET (`resp::config`); `None` for any other command. The encoding
    /// thresholds are cluster state: SET sends them to every arc as one ordered message (as
    /// FLUSHALL), GET reads them back through one (so a GET after a SET, from any gateway,
    /// sees it). Inside MULTI they are refused (and EXEC aborts).
    async fn on_config_command(&mut self, arguments: &[Vec<u8>]) -> Option<Value> {
        let [command, subcommand, rest @ ..] = arguments else {
            return None;
        };
        let set = subcommand.eq_ignore_ascii_case(b"set");
        if !command.eq_ignore_ascii_case(b"config")
            || !(set || subcommand.eq_ignore_ascii_case(b"get"))
        {
            return None;
        }
        // Inside MULTI: queued (an arity error refuses it at once and aborts EXEC, as in
        // Redis), and run by `exec_with_deferred` once EXEC has run the other commands.
        if self.transaction.queued().is_some() {
            let arity = if set {
                rest.len() >= 2
            } else {
                !rest.is_empty()
            };
            if !arity {
                let name = if set { "config|set" } else { "config|get" };
                let text = format!("ERR wrong number of arguments for '{name}' command");
                return self.transaction.refuse_queued(&text);
            }
            return self.transaction.defer(arguments);
        }
        if set {
            let changes = match resp::config::parse_set(rest) {
                Ok(changes) => changes,
                Err(error) => return Some(error),
            };
            let cluster = resp::config::cluster_changes(&changes);
            let outcome = if cluster.is_empty() {
                Outcome::Ok
            } else {
                self.survey_now(Survey::Configure { changes: cluster })
                    .await
            };
            return Some(match outcome {
                Outcome::Ok => {
                    // The scripts' threshold is the script module's; the rest the clients'.
                    let (scripts, others): (Vec<_>, Vec<_>) = changes
                        .into_iter()
                        .partition(|change| change.name == "busy-reply-threshold");
                    for change in scripts {
                        assert!(change.value >= 0, "CONFIG SET checked the value");
                        self.scripts
                            .set_busy_reply_threshold_ms(change.value as u64);
                    }
                    self.clients.set_parameters(&others);
                    for change in &others {
                        if change.name == resp::config::NOTIFY {
                            self.hub.broadcast_notify_flags(change.value);
                        }
                    }
                    Value::ok()
                }
                other => keyless_reply(KeylessReply::Ok, &other),
            });
        }
        if rest.is_empty() {
            return Some(Value::Error(
                "ERR wrong number of arguments for 'config|get' command".into(),
            ));
        }
        let outcome = self.survey_now(Survey::ReadConfig).await;
        let Some((limits, notify_flags)) = payload::decode_config(&outcome) else {
            return Some(keyless_reply(KeylessReply::Ok, &outcome));
        };
        self.hub.set_notify_flags(notify_flags);
        let process = |name: &str| match name {
            "busy-reply-threshold" => {
                Some(i64::try_from(self.scripts.busy_reply_threshold_ms()).unwrap_or(i64::MAX))
            }
            _ => self.clients.parameter(name),
        };
        let current = resp::config::Current {
            limits: &limits,
            notify_flags,
            process: &process,
        };
        Some(resp::config::get_reply(rest, &current))
    }

    /// SLOWLOG and CONFIG RESETSTAT (the gateway's statistics, `clients`); `None` for any
    /// other command. Inside MULTI they are refused (and EXEC aborts).
    fn on_stats_command(&mut self, arguments: &[Vec<u8>]) -> Option<Value> {
        if !super::clients::is_stats_command(arguments) {
            return None;
        }
        if let Some(refused) = self
            .transaction
            .refuse_queued("ERR SLOWLOG and CONFIG RESETSTAT inside MULTI are not supported yet")
        {
            return Some(refused);
        }
        self.clients.on_stats_command(arguments)
    }

    /// Runs a survey and waits for its merged outcome.
    async fn survey_now(&mut self, survey: Survey) -> Outcome {
        match self.submit(Work::Survey(survey)).await {
            Ok(receiver) => receiver
                .await
                .unwrap_or(Outcome::Error(kv::KvError::Unavailable)),
            Err(_) => Outcome::Error(kv::KvError::Unavailable),
        }
    }

    /// EVAL, EVALSHA, SCRIPT, FUNCTION… (`scripting`); `None` for any other command. Inside
    /// MULTI they are refused (and EXEC aborts).
    async fn on_script_command(&mut self, arguments: &[Vec<u8>]) -> Option<Value> {
        if !super::scripting::is_script_command(&arguments[0]) {
            return None;
        }
        if let Some(refused) = self
            .transaction
            .refuse_queued(super::scripting::NOT_IN_MULTI)
        {
            return Some(refused);
        }
        let permission = self.session.key_permission();
        Some(
            self.scripts
                .on_command(&self.jobs, arguments, &permission)
                .await,
        )
    }

    /// Hands `work` to the gateway task; the receiver gets its outcome.
    async fn submit(&mut self, work: Work) -> Result<oneshot::Receiver<Outcome>, Value> {
        let (reply, receiver) = oneshot::channel();
        let job = Job {
            work,
            isolation: self.isolation,
            reply,
        };
        if self.jobs.send(job).await.is_err() {
            return Err(Value::Error("ERR the gateway stopped".into()));
        }
        Ok(receiver)
    }

    /// `READMODE [sequential|snapshot|basic]`: sets (or, without an argument, reports) how
    /// this connection's reads are isolated.
    ///
    /// In `vr`/`skyros` partition modes `basic` reads are answered by the primaries of the
    /// partition groups they read from their executed states (`ecast::serve_basic_read`);
    /// `snapshot` reads of several groups send one `PartitionOperation::Snapshot` per group at
    /// the router log's last timestamp (one cut of the multi-partition order; a read of one
    /// group goes through its log, which is stronger), falling back to `sequential` after
    /// `SNAPSHOT_ATTEMPTS_MAX` refusals (`docs/internals/ecast.md`, "Snapshot reads of
    /// partition groups"). Setting answers
    /// `+OK` in every mode (RESP has no NOTICE; clients check for `OK`); `READMODE` alone
    /// reports the level *served*, as SQL's `SHOW tessera.read_isolation` does, and INFO's
    /// `# Clients` section reports both (`tessera_readmode_requested`,
    /// `tessera_readmode_served`).
    fn read_mode(&mut self, arguments: &[Vec<u8>]) -> Value {
        match arguments {
            [_] => Value::Simple(isolation_name(self.isolation).to_string()),
            [_, mode] => {
                let isolation = match mode.to_ascii_lowercase().as_slice() {
                    b"sequential" => Isolation::Sequential,
                    b"snapshot" => Isolation::Snapshot,
                    b"basic" => Isolation::Basic,
                    _ => {
                        return Value::Error(
                            "ERR READMODE takes sequential, snapshot or basic".into(),
                        )
                    }
                };
                // Every level is served as asked: on partition groups basic reads by each
                // group's primary (`ecast::serve_basic_read`), snapshot reads by one
                // `PartitionOperation::Snapshot` per group at the router log's last timestamp.
                self.requested = isolation;
                self.isolation = isolation;
                Value::ok()
            }
            _ => Value::Error("ERR wrong number of arguments for 'readmode' command".into()),
        }
    }

    fn server_info(&self) -> ServerInfo {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let status = &self.status;
        ServerInfo {
            role: "storage".to_string(),
            view: 0,
            commit_number: load(&status.delivered),
            replica_index: self.storage.0 as u8,
            replicas: self.config.storage.len() as u8,
            protocol: match self.config.partitions {
                super::config::PartitionMode::Sequenced => "sequenced".to_string(),
                super::config::PartitionMode::Vr => "vr-partitions".to_string(),
                super::config::PartitionMode::Skyros => "skyros-partitions".to_string(),
            },
            durability: match self.config.durability {
                super::config::ClusterDurability::Memory => "memory".to_string(),
                super::config::ClusterDurability::Disk => "disk".to_string(),
            },
            keys: Some(load(&status.keys)),
            version: env!("CARGO_PKG_VERSION").to_string(),
            counters: counters(status, self.storage),
            sections: {
                let mut sections = self.clients.info_sections();
                if let Some(clients) = sections
                    .iter_mut()
                    .find(|section| section.name == "clients")
                {
                    clients.lines.push((
                        "tessera_readmode_requested".into(),
                        isolation_name(self.requested).into(),
                    ));
                    clients.lines.push((
                        "tessera_readmode_served".into(),
                        isolation_name(self.isolation).into(),
                    ));
                }
                sections.push(self.scripts.info_section());
                sections
            },
        }
    }
}

/// `READMODE`'s name of a read isolation level.
fn isolation_name(isolation: Isolation) -> &'static str {
    match isolation {
        Isolation::Sequential => "sequential",
        Isolation::Snapshot => "snapshot",
        Isolation::Basic => "basic",
    }
}

/// The gateway's and its process's counters, as `INFO tessera` shows them (without the
/// `tessera_` prefix) and the metrics endpoint exports them.
pub(crate) fn counters(status: &GatewayStatus, storage: ProcessId) -> Vec<(String, u64)> {
    let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    vec![
        ("ecast_process".to_string(), storage.0),
        ("ecast_delivered".to_string(), load(&status.delivered)),
        ("ecast_version".to_string(), load(&status.version)),
        (
            "ecast_gateway_version".to_string(),
            load(&status.gateway_version),
        ),
        (
            "ecast_router_target".to_string(),
            load(&status.router_target),
        ),
        ("ecast_completed".to_string(), load(&status.completed)),
        (
            "ecast_router_answers".to_string(),
            load(&status.router_answers),
        ),
        ("ecast_refused".to_string(), load(&status.refused)),
        (
            "ecast_frames_unauthenticated".to_string(),
            super::link::frames_unauthenticated(),
        ),
        ("ecast_retried".to_string(), load(&status.retried)),
        ("bypass_nilext_fast".to_string(), load(&status.nilext_fast)),
        (
            "bypass_nilext_slow_hopeless".to_string(),
            load(&status.nilext_slow_hopeless),
        ),
        (
            "bypass_nilext_slow_rounds".to_string(),
            load(&status.nilext_slow_rounds),
        ),
        (
            "bypass_nilext_replied".to_string(),
            load(&status.nilext_replied),
        ),
        ("bypass_comm_fast".to_string(), load(&status.comm_fast)),
        (
            "bypass_nilext_slow_adapt".to_string(),
            load(&status.nilext_slow_adapt),
        ),
        (
            "skyros_adapt_two_rtt".to_string(),
            load(&status.adapt_two_rtt_groups),
        ),
        (
            "skyros_adapt_switches".to_string(),
            load(&status.adapt_switches),
        ),
        ("bypass_resends".to_string(), load(&status.bypass_resends)),
        (
            "bypass_basic_answered".to_string(),
            load(&status.basic_answered),
        ),
        (
            "bypass_basic_ordered".to_string(),
            load(&status.basic_ordered),
        ),
        (
            "bypass_snapshot_answered".to_string(),
            load(&status.snapshot_group_answered),
        ),
        (
            "snapshot_refusals".to_string(),
            load(&status.snapshot_refusals),
        ),
        (
            "bypass_snapshot_fallbacks".to_string(),
            load(&status.snapshot_group_fallbacks),
        ),
        ("bypass_groups".to_string(), load(&status.bypass_groups)),
        (
            "bypass_groups_added".to_string(),
            load(&status.bypass_groups_added),
        ),
        (
            "bypass_sent_to_added".to_string(),
            load(&status.bypass_sent_to_added),
        ),
        (
            "bypass_nilext_executed_acks".to_string(),
            load(&status.nilext_executed_acks),
        ),
        (
            "skyros_nilext_refused".to_string(),
            load(&status.skyros_nilext_refused),
        ),
        (
            "skyros_ignored_lagging".to_string(),
            load(&status.skyros_ignored_lagging),
        ),
        (
            "skyros_executed_gated".to_string(),
            load(&status.skyros_executed_gated),
        ),
        (
            "skyros_ignored_full".to_string(),
            load(&status.skyros_ignored_full),
        ),
        (
            "requests_ignored_full".to_string(),
            load(&status.requests_ignored_full),
        ),
        (
            "vr_messages_split".to_string(),
            load(&status.vr_messages_split),
        ),
        (
            "vr_messages_reassembled".to_string(),
            load(&status.vr_messages_reassembled),
        ),
        (
            "vr_messages_refused".to_string(),
            load(&status.vr_messages_refused),
        ),
        (
            "partition_replicas".to_string(),
            load(&status.partition_replicas),
        ),
        (
            "partition_primaries".to_string(),
            load(&status.partition_primaries),
        ),
        (
            "partition_replicas_not_normal".to_string(),
            load(&status.partition_replicas_not_normal),
        ),
        ("sql_batches".to_string(), load(&status.sql_batches)),
        (
            "sql_batched_statements".to_string(),
            load(&status.sql_batched_statements),
        ),
    ]
}
