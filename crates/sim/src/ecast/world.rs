//! One simulated E-Cast run: a VR group of routers replicating `ecast::RouterState` (with the
//! forwarder beside whichever router is primary), storage processes in `sequenced` mode on a
//! placement ring (each an `ecast::Inbox` applying its share of the stream to a key-value map),
//! gateways (each an `ecast::Gateway`, the same type the runtime drives), a failure detector that
//! reports crashed storage processes with Suspect messages, and a nemesis; all driven by one
//! seeded PRNG on one thread.

use super::history::{EcastCommand, EcastHistory, EcastOutput, StoragePayload, BALANCE_INITIAL};
use super::network::{Endpoint, Network, Packet, Payload};
use super::options::{EcastCanary, EcastOptions};
use crate::checkers::ecast_order::{digest, EcastOrder};
use crate::checkers::ecast_reconfiguration;
use crate::checkers::ecast_stability::EcastStability;
use crate::checkers::{ecast_basic_reads, ecast_serializability, Violation};
use crate::trace::Trace;
use ecast::{
    Completion, Failure, Forwarder, ForwarderEffect, ForwarderInput, ForwarderSettings, Gateway,
    GatewayCommand, GatewayEffect, GatewayInput, GatewaySettings, Inbox, InboxEffect, InboxInput,
    InboxSettings, Isolation, RouterSettings, RouterState, SenderSettings,
};
use placement::ecast::{Message as Routing, Target};
use placement::migration::{MigrationEffect, MigrationInput, Migrator, Record, ScanMode, StreamId};
use placement::supervisor::{LinkEvidence, Proposal, Supervisor, SupervisorSettings};
use placement::{
    ConfigChange, ConfigMessage, Configuration, Instruction, KeyMapping, MembershipChange, Planner,
    Position, PositionSet, ProcessId, ProcessState, Refusal, Transformation,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use stdx::Prng;
use vr::{
    ClientId, Effect, Input, Message, Nonce, Replica, ReplicaIndex, Request, StatusName, View,
};

/// Gateways are application processes too: their ids sit far above storage processes'.
pub const GATEWAY_BASE: u64 = 1_000_000;
const FORWARDER_CLIENT_BASE: u64 = 0xf0f0_0000_0000_0000;
const REGISTER_BASE: u64 = 1_000;
/// A keyspace message refused this many times is given up.
const RECONFIGURE_ATTEMPTS_MAX: u32 = 3;

pub fn position(key: u64) -> Position {
    KeyMapping::Hash.position(&key.to_be_bytes())
}

#[derive(Clone, Debug, Default)]
pub struct EcastStats {
    pub ticks: u64,
    pub operations: usize,
    pub completed: usize,
    pub abandoned: u64,
    pub refusals: u64,
    pub snapshot_reads: u64,
    pub basic_reads: u64,
    pub basic_refusals: u64,
    pub messages_sent: u64,
    pub messages_dropped: u64,
    pub router_crashes: u64,
    pub storage_crashes: u64,
    pub partitions: u64,
    pub view_max: u64,
    pub timestamp_max: u64,
    pub forwarders: u64,
    /// Configuration messages the reconfiguration nemesis submitted (joins and keyspace
    /// messages), and the keyspace messages among them that storage processes delivered.
    pub reconfigurations: u64,
    pub keyspace_delivered: u64,
    /// Reconfigurations the planner or the routers refused (stale version, no live source…).
    pub reconfigurations_refused: u64,
    pub streams_installed: u64,
    pub chunks_sent: u64,
    pub chunks_resent: u64,
    pub items_held: u64,
    pub deletes_run: u64,
    /// Receivers that declared themselves failed (§6.5).
    pub self_failures: u64,
    /// Crashes the nemesis skipped because they could have cost f replicas of a group.
    pub crashes_vetoed: u64,
    /// The fewest processes on the ring the reconfiguration nemesis saw (an elastic ring may go
    /// below the replication factor).
    pub ring_min: Option<u64>,
    /// The longest client operation, in ticks, among those whose keys were never in a range
    /// being copied while they ran, and among the others.
    pub unrelated_latency_max: u64,
    pub related_latency_max: u64,
}

pub struct EcastReport {
    pub seed: u64,
    pub trace_hash: u64,
    pub stats: EcastStats,
    pub result: Result<(), Violation>,
    pub trace: Vec<String>,
}

struct RouterNode {
    replica: Option<Replica<RouterState>>,
    crashed_until: Option<u64>,
    forwarder: Option<(View, Forwarder)>,
}

struct StorageNode {
    id: ProcessId,
    inbox: Inbox,
    /// Between the inbox and the data: holds deliveries while a copy is incoming, streams
    /// copies, runs deletes (`placement::migration`).
    migrator: Migrator<Item>,
    data: BTreeMap<u64, i64>,
    /// Crashed, or declared itself failed (then `self_failed`): crash-stop either way.
    crashed_at: Option<u64>,
    self_failed: bool,
}

/// What a storage process's migrator holds back and hands to the engine in order.
#[derive(Clone, Debug)]
enum Item {
    Message(ecast::Delivery),
    Snapshot(ecast::SnapshotDelivery),
}

#[derive(Clone, Debug)]
enum OpCommand {
    Client(EcastCommand),
    /// The failure detector's report of a crashed storage process.
    Suspect(ProcessId),
    /// The reconfiguration nemesis: a new standby joins.
    Join(ProcessId),
    /// The reconfiguration nemesis: a keyspace transformation drawn from this number against
    /// the super process's configuration when planned; `attempts` refusals so far.
    Reconfigure {
        draw: u64,
    },
}

/// What the world knows of one command its gateway holds (the gateway has the rest).
struct Op {
    history: Option<usize>,
    command: OpCommand,
    keys: Vec<u64>,
    /// Refusals of a keyspace message so far.
    attempts: u32,
    /// The submitted message's digest, for the stability checker.
    digest: u64,
    /// A keyspace message's copies (sender, receiver), once planned.
    copies: Vec<(ProcessId, ProcessId)>,
}

/// A gateway process: an `ecast::Gateway` (answer parts are keys, values balances or register
/// values) and the workload's view of its commands.
struct GatewayNode {
    gateway: Gateway<Option<i64>>,
    /// The gateway's pending commands and those in `submissions`, by id.
    ops: BTreeMap<u64, Op>,
    /// Commands for the gateway at its next tick.
    submissions: Vec<(u64, GatewayCommand)>,
    /// Ask the routers for the configuration at the next tick.
    refresh: bool,
    op_next: u64,
    idle_until: u64,
    /// Workload operations in flight at most (0: the failure detector or the final reader).
    slots: usize,
}

pub struct EcastSimulation {
    options: EcastOptions,
    prng: Prng,
    now: u64,
    event: u64,
    initial: Configuration,
    routers: Vec<RouterNode>,
    storage: Vec<StorageNode>,
    gateways: Vec<GatewayNode>,
    gateway_by_client: BTreeMap<ClientId, usize>,
    /// The failure detector's gateway.
    admin: usize,
    /// The failure detector and replacement policy the lead router runs in real processes
    /// (`placement::supervisor`), with crashes as its evidence.
    supervisor: Supervisor,
    /// The reconfiguration nemesis's gateway (the super process): separate from the failure
    /// detector's, so that a Suspect never waits in a send window behind a keyspace message
    /// that cannot become stable until that very Suspect is applied.
    reconfigurer: usize,
    network: Network,
    history: EcastHistory,
    trace: Trace,
    order: EcastOrder,
    stability: EcastStability,
    issuing: bool,
    faults_on: bool,
    stats: EcastStats,
    value_next: u64,
    /// Storage processes receiving copies and what they receive (the admin's progress
    /// board): gateways route point reads of those ranges away from them.
    busy: BTreeMap<ProcessId, PositionSet>,
    /// Every range being copied right now.
    moving: PositionSet,
    planner: Planner,
    /// Per client operation (by history index): the tick it was invoked, and whether any of
    /// its keys was in a range being copied while it ran.
    op_times: BTreeMap<usize, (u64, bool)>,
    /// Copies planned and not yet installed (sender, receiver) → how many: the nemesis floods
    /// a crash through them.
    copy_edges: BTreeMap<(ProcessId, ProcessId), u32>,
    unrelated_latency: ecast_reconfiguration::UnrelatedLatency,
    /// A crash of a sender the nemesis aims into a migration it just started.
    scheduled_crash: Option<(u64, ProcessId)>,
}

impl EcastSimulation {
    pub fn new(options: EcastOptions, trace_lines: usize) -> EcastSimulation {
        let mut prng = Prng::new(options.seed ^ 0x5eed_eca5_7000_0001);
        let count = options.storage_processes;
        let spacing = u64::MAX / count;
        let members: Vec<(ProcessId, Position)> = (0..count)
            .map(|index| {
                let jitter = prng.below(spacing / 4);
                (ProcessId(index + 1), Position(index * spacing + jitter))
            })
            .collect();
        let initial = Configuration::with_ring(options.replication, &members);
        let initial = if options.elastic {
            initial.elastic()
        } else {
            initial
        };
        let routers = (0..options.router_config.replica_count)
            .map(|index| RouterNode {
                replica: Some(Replica::new(
                    options.router_config.clone(),
                    ReplicaIndex(index),
                    router_state(&options, &initial),
                )),
                crashed_until: None,
                forwarder: None,
            })
            .collect();
        let inbox_settings = inbox_settings(&options);
        let storage = members
            .iter()
            .map(|(id, _)| StorageNode {
                id: *id,
                inbox: Inbox::new(*id, initial.version(), inbox_settings.clone()),
                migrator: Migrator::new(*id, initial.ranges_of(*id), options.migration.clone()),
                // Accounts exist only where they are held: a lost copy shows as a missing
                // account, never as a fresh initial balance.
                data: (0..options.accounts)
                    .filter(|account| initial.replicas(position(*account)).contains(id))
                    .map(|account| (account, BALANCE_INITIAL))
                    .collect(),
                crashed_at: None,
                self_failed: false,
            })
            .collect();
        let network = Network::new(
            options.router_config.replica_count as usize,
            options.loss_percent,
            options.duplicate_percent,
            options.delay_ticks_max,
        );
        let mut simulation = EcastSimulation {
            prng,
            now: 0,
            event: 0,
            initial,
            routers,
            storage,
            gateways: Vec::new(),
            gateway_by_client: BTreeMap::new(),
            admin: 0,
            supervisor: Supervisor::new(SupervisorSettings {
                suspect_after_ticks: options.suspect_delay_ticks.max(1),
                unreached_after_ticks: options.suspect_delay_ticks.max(1),
            }),
            reconfigurer: 0,
            network,
            history: EcastHistory::default(),
            trace: Trace::new(trace_lines),
            order: EcastOrder::default(),
            stability: EcastStability::default(),
            issuing: true,
            faults_on: true,
            stats: EcastStats::default(),
            value_next: 1,
            busy: BTreeMap::new(),
            moving: PositionSet::empty(),
            planner: Planner::default(),
            op_times: BTreeMap::new(),
            copy_edges: BTreeMap::new(),
            unrelated_latency: ecast_reconfiguration::UnrelatedLatency::default(),
            scheduled_crash: None,
            options,
        };
        for _ in 0..simulation.options.gateways {
            simulation.add_gateway(simulation.options.slots);
        }
        simulation.admin = simulation.add_gateway(0);
        simulation.reconfigurer = simulation.admin;
        if simulation.options.reconfigure_per_10000 > 0 {
            simulation.reconfigurer = simulation.add_gateway(0);
        }
        let keys: Vec<(u64, u64)> = (0..simulation.options.accounts)
            .chain((0..simulation.options.registers).map(|register| REGISTER_BASE + register))
            .map(|key| (key, position(key).0))
            .collect();
        simulation.trace.line(|| format!("key positions {keys:?}"));
        simulation
    }

    fn add_gateway(&mut self, slots: usize) -> usize {
        let index = self.gateways.len();
        let client = ClientId(self.prng.next_u64() >> 1);
        let id = ProcessId(GATEWAY_BASE + index as u64);
        let settings = GatewaySettings {
            sender: SenderSettings {
                window_max: self.options.window_max,
                resubmit_ticks: 60,
            },
            router_retry_ticks: 30,
            // A sequential read whose message is stable but not fully answered is sent again.
            answer_wait_ticks: 300,
            read_attempts_max: 4,
            snapshot_wait_ticks: 200,
            snapshot_attempts_max: 6,
            basic_wait_ticks: 60,
            basic_attempts_max: 5,
            // No deadline: an operation that never completes is a liveness failure.
            give_up_ticks: None,
            report_envelopes: true,
            // The busy set is fed from the migrators every tick, exact and at once: nothing
            // to foresee.
            foresee_busy_ticks: 0,
        };
        let router_count = self.routers.len() as u8;
        let seed = self.prng.next_u64();
        let gateway = Gateway::new(
            id,
            client,
            self.initial.clone(),
            router_count,
            0,
            seed,
            settings,
        );
        self.gateways.push(GatewayNode {
            gateway,
            ops: BTreeMap::new(),
            submissions: Vec::new(),
            refresh: false,
            op_next: 0,
            idle_until: 0,
            slots,
        });
        self.gateway_by_client.insert(client, index);
        index
    }

    pub fn run(mut self) -> EcastReport {
        let result = self.run_phases();
        self.stats.ticks = self.now;
        self.stats.operations = self.history.invocations.len();
        self.stats.completed = self.history.completed();
        self.stats.messages_sent = self.network.sent;
        self.stats.messages_dropped = self.network.dropped;
        self.stats.timestamp_max = self.order.routed.keys().next_back().map_or(0, |t| t.0);
        EcastReport {
            seed: self.options.seed,
            trace_hash: self.trace.digest(),
            stats: self.stats.clone(),
            result,
            trace: self.trace.lines(),
        }
    }

    fn run_phases(&mut self) -> Result<(), Violation> {
        for _ in 0..self.options.fault_ticks {
            self.tick()?;
        }
        self.heal();
        self.settle("after the faults stopped")?;
        self.final_reads();
        self.settle("during the final reads")?;
        self.check_end()
    }

    /// Runs until every operation is done and the routers agree and hold nothing unstable.
    fn settle(&mut self, when: &str) -> Result<(), Violation> {
        let started = self.now;
        while self.now - started < self.options.liveness_ticks_max && self.unsettled().is_some() {
            self.tick()?;
        }
        match self.unsettled() {
            None => Ok(()),
            Some(description) => Err(Violation {
                checker: "liveness",
                report: format!(
                    "not settled {} ticks {when}: {description}",
                    self.now - started
                ),
            }),
        }
    }

    fn unsettled(&self) -> Option<String> {
        let busy: Vec<String> = self
            .gateways
            .iter()
            .enumerate()
            .filter_map(|(index, gateway)| {
                let (id, op) = gateway.ops.iter().next()?;
                Some(format!(
                    "gateway {index} has {} operations, the first {:?} in {:?}",
                    gateway.ops.len(),
                    op.command,
                    gateway.gateway.describe(*id)
                ))
            })
            .collect();
        if !busy.is_empty() {
            return Some(busy.join("; "));
        }
        for node in &self.storage {
            let progress = node.migrator.progress();
            if node.crashed_at.is_none() && (!progress.incoming.is_empty() || progress.held > 0) {
                return Some(format!(
                    "storage {} is migrating: {} incoming, {} held",
                    node.id.0,
                    progress.incoming.len(),
                    progress.held
                ));
            }
        }
        let mut seen = None;
        for (index, router) in self.routers.iter().enumerate() {
            let Some(replica) = &router.replica else {
                return Some(format!("router {index} is down"));
            };
            if replica.status() != StatusName::Normal {
                return Some(format!("router {index} is {:?}", replica.status()));
            }
            let state = replica.state_machine();
            if let Some(timestamp) = state.unstable().keys().next() {
                return Some(format!("router {index} still has {timestamp} unstable"));
            }
            if state.settled() < state.timestamp_last() {
                return Some(format!(
                    "router {index} settled only up to {}",
                    state.settled()
                ));
            }
            let mine = (
                replica.view(),
                state.timestamp_last(),
                state.configuration().version(),
            );
            if seen.is_some_and(|seen| seen != mine) {
                return Some(format!(
                    "routers differ: {seen:?} vs {mine:?} at router {index}"
                ));
            }
            seen = Some(mine);
        }
        None
    }

    fn heal(&mut self) {
        self.faults_on = false;
        self.issuing = false;
        self.network.heal();
        self.network.loss_percent = 0;
        self.network.duplicate_percent = 0;
        for index in 0..self.routers.len() {
            if self.routers[index].crashed_until.is_some() {
                self.restart_router(index);
            }
        }
        self.trace.line(|| "heal: faults stop".to_string());
    }

    /// One more gateway reads every account and every register, sequentially.
    fn final_reads(&mut self) {
        let gateway = self.add_gateway(0);
        self.add_op(
            gateway,
            EcastCommand::Audit {
                isolation: Isolation::Sequential,
            },
        );
        for register in 0..self.options.registers {
            self.add_op(
                gateway,
                EcastCommand::Get {
                    key: REGISTER_BASE + register,
                    isolation: Isolation::Sequential,
                },
            );
        }
    }

    fn check_end(&mut self) -> Result<(), Violation> {
        let states: Vec<&RouterState> = self
            .routers
            .iter()
            .filter_map(|router| router.replica.as_ref())
            .map(|replica| replica.state_machine())
            .collect();
        let live: BTreeSet<ProcessId> = self
            .storage
            .iter()
            .filter(|node| node.crashed_at.is_none())
            .map(|node| node.id)
            .collect();
        self.stability.check_end(&states, &self.order, &live)?;
        let configuration = self.current_configuration();
        let mut values: BTreeMap<u64, Vec<(ProcessId, Option<i64>)>> = BTreeMap::new();
        let keys = (0..self.options.accounts)
            .chain((0..self.options.registers).map(|register| REGISTER_BASE + register));
        for key in keys {
            let entry = values.entry(key).or_default();
            for holder in configuration.replicas(position(key)) {
                let node = &self.storage[(holder.0 - 1) as usize];
                if node.crashed_at.is_none() {
                    entry.push((holder, node.data.get(&key).copied()));
                }
            }
        }
        EcastStability::check_replicas_agree(&values)?;
        let acknowledged_puts: BTreeSet<u64> = self
            .history
            .invocations
            .iter()
            .filter(|invocation| invocation.output.is_some())
            .filter_map(|invocation| match invocation.command {
                EcastCommand::Put { key, .. } => Some(key),
                _ => None,
            })
            .collect();
        let holders_hold = self.storage.iter().all(|node| {
            node.crashed_at.is_some()
                || configuration.ranges_of(node.id) == *node.migrator.holdings()
        });
        ecast_reconfiguration::check_end(
            &values,
            self.options.accounts,
            &acknowledged_puts,
            holders_hold,
        )?;
        ecast_serializability::check(&self.history, self.options.accounts as usize)?;
        ecast_basic_reads::check(&self.history)
    }

    // ----- One tick of the world. -----

    fn tick(&mut self) -> Result<(), Violation> {
        self.now += 1;
        if self.faults_on {
            self.nemesis();
        }
        for index in 0..self.routers.len() {
            if self.routers[index]
                .crashed_until
                .is_some_and(|until| until <= self.now)
            {
                self.restart_router(index);
            }
        }
        for packet in self.network.due(self.now) {
            self.deliver(packet)?;
        }
        for index in 0..self.routers.len() {
            if self.routers[index].replica.is_some() {
                self.step_router(index, Input::Tick)?;
                self.forwarder_input(index, ForwarderInput::Tick)?;
            }
        }
        for index in 0..self.storage.len() {
            if self.storage[index].crashed_at.is_none() {
                self.migrate(index, MigrationInput::Tick)?;
                // One bounded piece of engine work every few ticks: passes span ticks,
                // deliveries run between their slices.
                let due = self.now.is_multiple_of(self.options.work_every_ticks);
                if due && self.storage[index].migrator.has_work() {
                    self.migrate(index, MigrationInput::Work)?;
                }
            }
        }
        self.observe_migrations();
        self.failure_detector();
        for index in 0..self.gateways.len() {
            self.drive_gateway(index)?;
        }
        self.unrelated_latency.result()
    }

    /// The admin's progress board: who is receiving, what is moving; marks operations whose
    /// keys are in a moving range.
    fn observe_migrations(&mut self) {
        self.busy.clear();
        let mut moving = PositionSet::empty();
        for node in &self.storage {
            if node.crashed_at.is_none() && node.migrator.is_receiving() {
                let incoming = node.migrator.incoming_range();
                moving = moving.union(&incoming);
                self.busy.insert(node.id, incoming);
            }
        }
        let stats = self.storage.iter().map(|node| node.migrator.stats()).fold(
            (0, 0, 0, 0),
            |sum, stats| {
                (
                    sum.0 + stats.chunks_sent,
                    sum.1 + stats.chunks_resent,
                    sum.2 + stats.items_held,
                    sum.3 + stats.deletes_run,
                )
            },
        );
        (
            self.stats.chunks_sent,
            self.stats.chunks_resent,
            self.stats.items_held,
            self.stats.deletes_run,
        ) = stats;
        if !moving.is_empty() {
            for gateway in &self.gateways {
                for op in gateway.ops.values() {
                    let Some(history) = op.history else { continue };
                    if op.keys.iter().any(|key| moving.contains(position(*key))) {
                        if let Some((_, related)) = self.op_times.get_mut(&history) {
                            *related = true;
                        }
                    }
                }
            }
        }
        self.moving = moving;
    }

    fn nemesis(&mut self) {
        let options = self.options.clone();
        if self.prng.chance(options.partition_per_10000, 10_000) {
            self.stats.partitions += 1;
            if self.prng.percent(40) {
                self.network.heal();
                self.trace.line(|| "router partition healed".to_string());
            } else {
                let description = self.network.partition(&mut self.prng);
                self.trace.line(|| description);
            }
        }
        if options.reconfigure_per_10000 > 0
            && self.prng.chance(options.reconfigure_per_10000, 10_000)
        {
            self.maybe_reconfigure();
        }
        if self.prng.chance(options.router_crash_per_10000, 10_000) {
            let index = self.prng.below(self.routers.len() as u64) as usize;
            if self.router_may_crash(index) {
                self.crash_router(index);
            }
        }
        if self.prng.chance(options.storage_crash_per_10000, 10_000) {
            let index = self.prng.below(self.storage.len() as u64) as usize;
            self.maybe_crash_storage(index);
        }
        if let Some((at, process)) = self.scheduled_crash {
            if at <= self.now {
                self.scheduled_crash = None;
                self.maybe_crash_storage((process.0 - 1) as usize);
            }
        }
    }

    /// Crashes a storage process for good, unless the fault budget is spent or the crash
    /// could fail f processes on the ring (then it counts a veto).
    fn maybe_crash_storage(&mut self, index: usize) {
        let crashed = self
            .storage
            .iter()
            .filter(|node| node.crashed_at.is_some())
            .count() as u64;
        if crashed >= self.options.storage_crashes_max || self.storage[index].crashed_at.is_some() {
            return;
        }
        let id = self.storage[index].id;
        if self.current_configuration().state(id).is_none() {
            return; // Joining: a Suspect before its Join is applied would be refused.
        }
        if self.crash_may_lose_data(id) {
            self.stats.crashes_vetoed += 1;
            self.trace
                .line(|| format!("crash of storage {} vetoed", id.0));
            return;
        }
        let edges = format!("{:?}", self.copy_edges);
        self.trace
            .line(|| format!("crash storage {} with copies in flight {edges}", id.0));
        self.storage[index].crashed_at = Some(self.now);
        self.stats.storage_crashes += 1;
        self.network.drop_to(Endpoint::Storage(id));
    }

    /// The precondition of "no acknowledged write is lost": fewer than f processes of any group
    /// fail. A crash of `candidate` also fails, transitively, every receiver of a copy it or
    /// a failed receiver sends (§6.5); the nemesis skips the crash if that could make f
    /// failures among the processes on the ring. (On an elastic ring shorter than f, every
    /// member holds every range: the group is the ring, so the bound is its size.)
    fn crash_may_lose_data(&self, candidate: ProcessId) -> bool {
        let configuration = self.current_configuration();
        let on_ring: BTreeSet<ProcessId> = configuration
            .ring()
            .iter()
            .map(|member| member.process)
            .collect();
        let mut failed: BTreeSet<ProcessId> = self
            .storage
            .iter()
            .filter(|node| node.crashed_at.is_some())
            .map(|node| node.id)
            .collect();
        failed.insert(candidate);
        let mut edges: BTreeSet<(ProcessId, ProcessId)> = self.copy_edges.keys().copied().collect();
        for node in &self.storage {
            for stream in node.migrator.progress().incoming {
                edges.insert((stream.stream.from, node.id));
            }
        }
        loop {
            let reached: Vec<ProcessId> = edges
                .iter()
                .filter(|(from, to)| failed.contains(from) && !failed.contains(to))
                .map(|(_, to)| *to)
                .collect();
            if reached.is_empty() {
                break;
            }
            failed.extend(reached);
        }
        let receivers: BTreeSet<ProcessId> = edges.iter().map(|(_, to)| *to).collect();
        let counted = failed
            .iter()
            .filter(|process| on_ring.contains(process) || receivers.contains(process))
            .count();
        counted >= usize::from(self.options.replication).min(on_ring.len())
    }

    /// The routers' configuration (any router up), else the super process's copy.
    fn current_configuration(&self) -> Configuration {
        self.routers
            .iter()
            .filter_map(|router| router.replica.as_ref())
            .map(|replica| replica.state_machine().configuration())
            .max_by_key(|configuration| configuration.version())
            .cloned()
            .unwrap_or_else(|| self.gateways[self.admin].gateway.configuration().clone())
    }

    /// The reconfiguration nemesis (a super process): one configuration message at a time, a
    /// join of a new standby or a keyspace transformation planned against a fresh
    /// configuration.
    fn maybe_reconfigure(&mut self) {
        let admin = self.reconfigurer;
        let busy = self.gateways[admin].ops.values().any(|op| {
            matches!(
                op.command,
                OpCommand::Join(_) | OpCommand::Reconfigure { .. }
            )
        });
        if busy {
            return;
        }
        let joined = self.storage.len() as u64 - self.options.storage_processes;
        let command = if joined < self.options.joins_max && self.prng.percent(30) {
            let id = ProcessId(self.storage.len() as u64 + 1);
            self.storage.push(StorageNode {
                id,
                inbox: Inbox::new(id, self.initial.version(), inbox_settings(&self.options)),
                migrator: Migrator::new(id, PositionSet::empty(), self.options.migration.clone()),
                data: BTreeMap::new(),
                crashed_at: None,
                self_failed: false,
            });
            self.trace.line(|| format!("join storage {}", id.0));
            OpCommand::Join(id)
        } else {
            OpCommand::Reconfigure {
                draw: self.prng.next_u64(),
            }
        };
        self.stats.reconfigurations += 1;
        let ring = self.current_configuration().ring().len() as u64;
        self.stats.ring_min = Some(self.stats.ring_min.map_or(ring, |least| least.min(ring)));
        // Planned against a fresh configuration.
        self.gateways[admin].refresh = true;
        self.push_op(admin, None, command, Vec::new(), GatewayCommand::Config);
    }

    /// The keyspace message a `Reconfigure { draw }` stands for against `configuration`, or
    /// `None` if the draw fits nothing or the planner refuses. The super process does not
    /// reconfigure while a process it knows to be down is not yet suspected.
    fn plan_reconfiguration(
        &self,
        configuration: &Configuration,
        draw: u64,
    ) -> Option<ConfigMessage> {
        let down: BTreeSet<ProcessId> = self
            .storage
            .iter()
            .filter(|node| node.crashed_at.is_some())
            .map(|node| node.id)
            .collect();
        if down.iter().any(|process| configuration.is_live(*process)) {
            return None;
        }
        // A receiver whose sender is down is doomed (§6.5): wait until it declared itself
        // failed and is suspected, rather than plan copies from or to it.
        if self.copy_edges.keys().any(|(from, _)| down.contains(from)) {
            return None;
        }
        let transformation = choose_transformation(configuration, draw)?;
        self.planner.propose(configuration, transformation).ok()
    }

    /// At most f routers down or recovering at once: more would lose the log by definition.
    fn router_may_crash(&self, index: usize) -> bool {
        if self.routers[index].crashed_until.is_some() {
            return false;
        }
        let down = self
            .routers
            .iter()
            .filter(|router| {
                router.crashed_until.is_some()
                    || router
                        .replica
                        .as_ref()
                        .is_some_and(|replica| replica.status() == StatusName::Recovering)
            })
            .count();
        down < self.options.router_config.replicas_tolerated() as usize
    }

    fn crash_router(&mut self, index: usize) {
        self.stats.router_crashes += 1;
        let router = &mut self.routers[index];
        router.replica = None;
        router.forwarder = None;
        router.crashed_until = Some(self.now + self.prng.range_inclusive(20, 400));
        self.network.drop_to(Endpoint::Router(index as u8));
        self.trace.line(|| format!("crash router {index}"));
    }

    fn restart_router(&mut self, index: usize) {
        let replica = Replica::recovering(
            self.options.router_config.clone(),
            ReplicaIndex(index as u8),
            router_state(&self.options, &self.initial),
            Nonce(self.prng.next_u64()),
        );
        let router = &mut self.routers[index];
        router.replica = Some(replica);
        router.crashed_until = None;
        self.order.restart(index);
        self.trace.line(|| format!("restart router {index}"));
    }

    /// The real processes' failure detector (`placement::supervisor`) with perfect evidence:
    /// a crashed storage process's link is down from its crash, so it is suspected
    /// `suspect_delay_ticks` after it (while the routers' configuration has it live); one
    /// that declared itself failed submits its own Suspect at once (§6.5), the admin gateway
    /// standing in for it. Its replacement proposals are not taken: the reconfiguration
    /// nemesis plans keyspace changes itself (`reconfigure`).
    fn failure_detector(&mut self) {
        let configuration = self.current_configuration();
        let now = self.now;
        let storage = &self.storage;
        let evidence = |process: ProcessId| match storage.iter().find(|node| node.id == process) {
            Some(node) => LinkEvidence {
                ever_connected: true,
                down_ticks: node
                    .crashed_at
                    .map(|at| if node.self_failed { u64::MAX } else { now - at }),
            },
            None => LinkEvidence::default(),
        };
        for proposal in self.supervisor.decide(&configuration, &evidence) {
            let Proposal::Suspect { process, .. } = proposal else {
                continue;
            };
            self.supervisor.submitted(process, configuration.version());
            let admin = self.admin;
            self.push_op(
                admin,
                None,
                OpCommand::Suspect(process),
                Vec::new(),
                GatewayCommand::Config,
            );
            self.trace.line(|| format!("suspect storage {}", process.0));
        }
    }

    fn send(&mut self, from: Endpoint, to: Endpoint, payload: Payload) {
        self.network
            .send(&mut self.prng, self.now, Packet { from, to, payload });
    }

    fn deliver(&mut self, packet: Packet) -> Result<(), Violation> {
        self.event += 1;
        let to_code = match packet.to {
            Endpoint::Router(index) => u64::from(index),
            Endpoint::Storage(id) => 100 + id.0,
            Endpoint::Gateway(index) => 1000 + index as u64,
        };
        self.trace.hash(&[self.now, to_code, packet.payload.kind()]);
        self.trace.line(|| {
            format!(
                "t={} {:?} -> {:?}: {}",
                self.now,
                packet.from,
                packet.to,
                summarize(&packet.payload)
            )
        });
        match packet.to {
            Endpoint::Router(index) => {
                let index = index as usize;
                if self.routers[index].replica.is_none() {
                    return Ok(());
                }
                match packet.payload {
                    Payload::Vr(message) => self.step_router(index, Input::Message(message)),
                    Payload::Confirm { process, delivered } => self
                        .forwarder_input(index, ForwarderInput::Confirmed { process, delivered }),
                    Payload::SnapshotRead(read) => {
                        self.forwarder_input(index, ForwarderInput::SnapshotRead(read))
                    }
                    _ => Ok(()),
                }
            }
            Endpoint::Storage(id) => {
                let input = match packet.payload {
                    Payload::BasicRead {
                        read_id,
                        planned_at,
                        key,
                    } => {
                        self.basic_read(id, packet.from, read_id, planned_at, key);
                        return Ok(());
                    }
                    Payload::Deliver { router, deliveries } => {
                        InboxInput::Deliver { router, deliveries }
                    }
                    Payload::SnapshotDeliver(delivery) => InboxInput::Snapshot(delivery),
                    Payload::Migration(message) => {
                        let Endpoint::Storage(from) = packet.from else {
                            return Ok(());
                        };
                        let index = (id.0 - 1) as usize;
                        return self.migrate(index, MigrationInput::Receive { from, message });
                    }
                    _ => return Ok(()),
                };
                self.step_storage(id, input)
            }
            Endpoint::Gateway(index) => self.gateway_receive(index, packet.payload),
        }
    }

    // ----- Routers and their forwarder. -----

    fn step_router(&mut self, index: usize, input: Input) -> Result<(), Violation> {
        let mut queue = VecDeque::from([input]);
        while let Some(input) = queue.pop_front() {
            let mut effects = Vec::new();
            let Some(replica) = self.routers[index].replica.as_mut() else {
                return Ok(());
            };
            replica.step(input, &mut effects);
            let mut forwarder_effects = Vec::new();
            for effect in effects {
                match effect {
                    Effect::Send { to, message } => self.send(
                        Endpoint::Router(index as u8),
                        Endpoint::Router(to.0),
                        Payload::Vr(message),
                    ),
                    Effect::Reply { client, message } => {
                        let router = &mut self.routers[index];
                        let ours = router
                            .forwarder
                            .as_ref()
                            .is_some_and(|(_, forwarder)| forwarder.client() == client);
                        if ours {
                            if let (Message::Reply(reply), Some(replica), Some((_, forwarder))) =
                                (message, router.replica.as_ref(), router.forwarder.as_mut())
                            {
                                forwarder.step(
                                    ForwarderInput::Reply {
                                        request: reply.request,
                                        result: reply.result,
                                    },
                                    replica.state_machine(),
                                    &mut forwarder_effects,
                                );
                            }
                        } else if let Some(gateway) = self.gateway_by_client.get(&client) {
                            self.send(
                                Endpoint::Router(index as u8),
                                Endpoint::Gateway(*gateway),
                                Payload::Vr(message),
                            );
                        }
                    }
                    Effect::Persist { .. } => {
                        unreachable!("routers are diskless in the simulation")
                    }
                    // Serialised inline, completed right after this step (the vr-only
                    // simulation delays completions; `docs/internals/vr.md`).
                    Effect::Checkpoint {
                        mut checkpoint,
                        source,
                    } => {
                        checkpoint.state = source.serialise();
                        queue.push_back(Input::Checkpointed(checkpoint));
                    }
                }
            }
            self.after_router_step(index, &mut forwarder_effects)?;
            for request in self.execute_forwarder_effects(index, forwarder_effects) {
                queue.push_back(Input::Message(Message::Request(request)));
            }
        }
        Ok(())
    }

    /// Checkers observe the router; the forwarder follows the replica's primaryship and syncs.
    fn after_router_step(
        &mut self,
        index: usize,
        forwarder_effects: &mut Vec<ForwarderEffect>,
    ) -> Result<(), Violation> {
        let router = &mut self.routers[index];
        let replica = router.replica.as_ref().expect("stepped above");
        let state = replica.state_machine();
        self.order.observe_router(index, state)?;
        self.stability.observe_router(state, &self.order)?;
        self.stats.view_max = self.stats.view_max.max(replica.view().0);
        let primary = replica.status() == StatusName::Normal && replica.is_primary();
        if !primary {
            router.forwarder = None;
            return Ok(());
        }
        let view = replica.view();
        if router
            .forwarder
            .as_ref()
            .is_none_or(|(known, _)| *known != view)
        {
            self.stats.forwarders += 1;
            let client = ClientId(FORWARDER_CLIENT_BASE + self.stats.forwarders);
            let settings = ForwarderSettings {
                resend_ticks: self.options.router_config.resend_ticks,
                deliveries_per_message_max: 32,
            };
            router.forwarder = Some((view, Forwarder::new(client, settings, state)));
            let description = format!("router {index} forwards in view {}", view.0);
            self.trace.line(|| description);
        }
        let (_, forwarder) = router.forwarder.as_mut().expect("set above");
        forwarder.step(ForwarderInput::Sync, state, forwarder_effects);
        Ok(())
    }

    fn forwarder_input(&mut self, index: usize, input: ForwarderInput) -> Result<(), Violation> {
        let router = &mut self.routers[index];
        let (Some(replica), Some((_, forwarder))) =
            (router.replica.as_ref(), router.forwarder.as_mut())
        else {
            return Ok(()); // Not the primary (as far as it knows): the sender retries.
        };
        let mut effects = Vec::new();
        forwarder.step(input, replica.state_machine(), &mut effects);
        for request in self.execute_forwarder_effects(index, effects) {
            self.step_router(index, Input::Message(Message::Request(request)))?;
        }
        Ok(())
    }

    /// Sends the forwarder's messages; returns its requests for its own replica.
    fn execute_forwarder_effects(
        &mut self,
        index: usize,
        effects: Vec<ForwarderEffect>,
    ) -> Vec<Request> {
        let from = Endpoint::Router(index as u8);
        let mut requests = Vec::new();
        for effect in effects {
            match effect {
                ForwarderEffect::Deliver { to, deliveries } => self.send(
                    from,
                    Endpoint::Storage(to),
                    Payload::Deliver {
                        router: ReplicaIndex(index as u8),
                        deliveries,
                    },
                ),
                ForwarderEffect::Stable {
                    to,
                    sequence,
                    timestamp,
                } => {
                    if let Some(gateway) = gateway_index(to, self.gateways.len()) {
                        self.send(
                            from,
                            Endpoint::Gateway(gateway),
                            Payload::Stable {
                                sequence,
                                timestamp,
                            },
                        );
                    }
                }
                ForwarderEffect::Submit(request) => requests.push(request),
                ForwarderEffect::DeliverSnapshot { to, delivery } => self.send(
                    from,
                    Endpoint::Storage(to),
                    Payload::SnapshotDeliver(delivery),
                ),
                ForwarderEffect::SnapshotStamped { .. } => {}
                ForwarderEffect::SnapshotRefused {
                    to,
                    read_id,
                    refusal,
                } => {
                    if let Some(gateway) = gateway_index(to, self.gateways.len()) {
                        self.send(
                            from,
                            Endpoint::Gateway(gateway),
                            Payload::SnapshotRefused { read_id, refusal },
                        );
                    }
                }
            }
        }
        requests
    }

    // ----- Storage processes (`sequenced` mode). -----

    fn step_storage(&mut self, id: ProcessId, input: InboxInput) -> Result<(), Violation> {
        let index = (id.0 - 1) as usize;
        if self.storage[index].crashed_at.is_some() {
            return Ok(());
        }
        let mut effects = Vec::new();
        self.storage[index].inbox.step(input, &mut effects);
        let from = Endpoint::Storage(id);
        for effect in effects {
            if self.storage[index].crashed_at.is_some() {
                return Ok(()); // It declared itself failed: crash-stop.
            }
            match effect {
                InboxEffect::Deliver(delivery) => {
                    self.order.on_delivery(id, &delivery)?;
                    let keyspace = match &delivery.envelope.routing {
                        Routing::Config {
                            message:
                                ConfigMessage {
                                    change: ConfigChange::Keyspace(keyspace),
                                    ..
                                },
                            ..
                        } => Some(keyspace.instructions.clone()),
                        _ => None,
                    };
                    let input = match keyspace {
                        Some(instructions) => {
                            self.stats.keyspace_delivered += 1;
                            let version = delivery.version;
                            self.trace.line(|| {
                                format!(
                                    "storage {} delivers keyspace v{}: {instructions:?}",
                                    id.0, version.0
                                )
                            });
                            MigrationInput::Keyspace {
                                version,
                                instructions,
                            }
                        }
                        // A read-routed message only reads: a capture of its positions does
                        // not hold it.
                        None => match delivery.envelope.routing {
                            Routing::Read { .. } => MigrationInput::Read {
                                touches: touches(&delivery.envelope.routing),
                                item: Item::Message(delivery),
                            },
                            _ => MigrationInput::Deliver {
                                touches: touches(&delivery.envelope.routing),
                                item: Item::Message(delivery),
                            },
                        },
                    };
                    self.migrate(index, input)?;
                }
                InboxEffect::ExecuteSnapshot(snapshot) => {
                    let touches = touches(&snapshot.read.routing);
                    let item = Item::Snapshot(snapshot);
                    self.migrate(index, MigrationInput::Read { touches, item })?;
                }
                InboxEffect::RefuseSnapshot { delivery, refusal } => {
                    if let Some(gateway) = gateway_index(delivery.read.sender, self.gateways.len())
                    {
                        let read_id = delivery.read.read_id;
                        self.send(
                            from,
                            Endpoint::Gateway(gateway),
                            Payload::SnapshotRefused { read_id, refusal },
                        );
                    }
                }
                InboxEffect::Confirm {
                    to,
                    process,
                    delivered,
                } => self.send(
                    from,
                    Endpoint::Router(to.0),
                    Payload::Confirm { process, delivered },
                ),
            }
        }
        Ok(())
    }

    /// Steps a storage process's migrator and executes its effects in order (a slice of a
    /// pass reads or removes the data at its place among them, and is answered next).
    fn migrate(&mut self, index: usize, input: MigrationInput<Item>) -> Result<(), Violation> {
        let id = self.storage[index].id;
        let mut inputs = VecDeque::from([input]);
        while let Some(input) = inputs.pop_front() {
            if self.storage[index].crashed_at.is_some() {
                return Ok(());
            }
            let mut effects = Vec::new();
            self.storage[index].migrator.step(input, &mut effects);
            for effect in effects {
                match effect {
                    MigrationEffect::Apply { item, holds } => self.apply_item(index, item, &holds),
                    MigrationEffect::Scan {
                        pass,
                        mode,
                        range,
                        after,
                        keys_max,
                    } => {
                        let data = &mut self.storage[index].data;
                        let (records, next) = scan(data, mode, &range, after.as_deref(), keys_max);
                        if mode == ScanMode::Remove {
                            self.trace
                                .line(|| format!("storage {} removes a slice of {range}", id.0));
                        }
                        inputs.push_back(MigrationInput::Scanned {
                            pass,
                            records,
                            next,
                        });
                    }
                    MigrationEffect::Install { records, .. } => {
                        self.install(index, records);
                    }
                    MigrationEffect::CopyComplete { stream, range, .. } => {
                        self.copy_complete(index, stream, &range);
                    }
                    MigrationEffect::Send { to, message } => {
                        if to.0 >= 1 && to.0 <= self.storage.len() as u64 {
                            self.send(
                                Endpoint::Storage(id),
                                Endpoint::Storage(to),
                                Payload::Migration(message),
                            );
                        }
                    }
                    MigrationEffect::DeclareFailed { reason } => {
                        self.stats.self_failures += 1;
                        let node = &mut self.storage[index];
                        node.crashed_at = Some(self.now);
                        node.self_failed = true;
                        self.network.drop_to(Endpoint::Storage(id));
                        self.trace.line(|| {
                            format!("storage {} declares itself failed: {reason:?}", id.0)
                        });
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }

    /// One chunk of a copy: the migrator cleared the range of stale records before.
    fn install(&mut self, index: usize, records: Vec<Record>) {
        let data = &mut self.storage[index].data;
        for record in records {
            let (Ok(key), Ok(value)) = (
                <[u8; 8]>::try_from(record.key.as_slice()),
                <[u8; 8]>::try_from(record.value.as_slice()),
            ) else {
                continue; // Not one of ours; the checksum passed, so a sender bug.
            };
            data.insert(u64::from_be_bytes(key), i64::from_be_bytes(value));
        }
    }

    fn copy_complete(&mut self, index: usize, stream: StreamId, range: &PositionSet) {
        self.stats.streams_installed += 1;
        let id = self.storage[index].id;
        self.release_copy((stream.from, id));
        let keys: Vec<u64> = self.storage[index]
            .data
            .keys()
            .copied()
            .filter(|key| range.contains(position(*key)))
            .collect();
        self.trace.line(|| {
            format!(
                "storage {} installs v{} from {}: {range} keys {keys:?}",
                id.0, stream.version.0, stream.from.0
            )
        });
    }

    /// The engine runs one item the migrator released, in stream order.
    fn apply_item(&mut self, index: usize, item: Item, holds: &PositionSet) {
        let from = Endpoint::Storage(self.storage[index].id);
        match item {
            Item::Message(delivery) => {
                let envelope = delivery.envelope;
                if let Some(values) = self.apply(index, &envelope.payload, holds) {
                    if let Some(gateway) = gateway_index(envelope.sender, self.gateways.len()) {
                        let sequence = envelope.sequence;
                        self.send(
                            from,
                            Endpoint::Gateway(gateway),
                            Payload::Answer { sequence, values },
                        );
                    }
                }
            }
            Item::Snapshot(snapshot) => {
                if let Some(values) = self.apply(index, &snapshot.read.payload, holds) {
                    if let Some(gateway) = gateway_index(snapshot.read.sender, self.gateways.len())
                    {
                        let (read_id, at) = (snapshot.read.read_id, snapshot.at);
                        self.send(
                            from,
                            Endpoint::Gateway(gateway),
                            Payload::SnapshotAnswer {
                                read_id,
                                at,
                                values,
                            },
                        );
                    }
                }
            }
        }
    }

    /// §6.7: a basic read is served only if planned against this process's version.
    fn basic_read(
        &mut self,
        id: ProcessId,
        from: Endpoint,
        read_id: u64,
        planned_at: placement::ConfigVersion,
        key: u64,
    ) {
        let node = &self.storage[(id.0 - 1) as usize];
        if node.crashed_at.is_some() {
            return;
        }
        let payload = match node.inbox.check_basic(planned_at) {
            // Not while a copy of the key is incoming or a delivery touching it is held.
            Ok(()) if node.migrator.serves(position(key)) => Payload::BasicAnswer {
                read_id,
                key,
                value: node.data.get(&key).copied(),
            },
            Ok(()) => return, // Not ours, or busy: the gateway retries.
            Err(refusal) => Payload::BasicRefused { read_id, refusal },
        };
        self.send(Endpoint::Storage(id), from, payload);
    }

    /// Applies this process's share of a payload: writes to the keys it holds; a read answers
    /// the keys it holds.
    fn apply(
        &mut self,
        index: usize,
        payload: &[u8],
        holds: &PositionSet,
    ) -> Option<Vec<(u64, Option<i64>)>> {
        let payload: StoragePayload = postcard::from_bytes(payload).ok()?;
        let holds = |key: u64| holds.contains(position(key));
        match payload {
            StoragePayload::Transfer { from, to, amount } => {
                let (holds_from, holds_to) = (holds(from), holds(to));
                let data = &mut self.storage[index].data;
                // A held account that is missing stays missing: lost data must show.
                if holds_from {
                    if let Some(balance) = data.get_mut(&from) {
                        *balance -= amount;
                    }
                }
                if holds_to {
                    if let Some(balance) = data.get_mut(&to) {
                        *balance += amount;
                    }
                }
                None
            }
            StoragePayload::Put { key, value } => {
                if holds(key) {
                    self.storage[index].data.insert(key, value as i64);
                }
                None
            }
            StoragePayload::Read { keys } => {
                let held: Vec<u64> = keys.into_iter().filter(|key| holds(*key)).collect();
                let data = &self.storage[index].data;
                Some(
                    held.into_iter()
                        .map(|key| (key, data.get(&key).copied()))
                        .collect(),
                )
            }
            StoragePayload::Nothing => None,
        }
    }

    // ----- Gateways. -----

    fn add_op(&mut self, gateway: usize, command: EcastCommand) {
        let history = self
            .history
            .invoke(gateway as u64, self.event, command.clone());
        self.event += 1;
        self.op_times.insert(history, (self.now, false));
        let keys = match &command {
            EcastCommand::Transfer { from, to, .. } => vec![*from, *to],
            EcastCommand::Audit { .. } => (0..self.options.accounts).collect(),
            EcastCommand::Put { key, .. } | EcastCommand::Get { key, .. } => vec![*key],
        };
        let positions: Vec<Position> = keys.iter().map(|key| position(*key)).collect();
        let encode = |payload: &StoragePayload| postcard::to_allocvec(payload).expect("serialises");
        let write = |payload: StoragePayload| GatewayCommand::Write {
            positions: positions.clone(),
            payload: encode(&payload),
            parts: Vec::new(),
            needs_answers: false,
        };
        let gateway_command = match &command {
            EcastCommand::Transfer { from, to, amount } => write(StoragePayload::Transfer {
                from: *from,
                to: *to,
                amount: *amount,
            }),
            EcastCommand::Put { key, value } => write(StoragePayload::Put {
                key: *key,
                value: *value,
            }),
            EcastCommand::Audit { isolation } | EcastCommand::Get { isolation, .. } => {
                GatewayCommand::Read {
                    isolation: *isolation,
                    positions: positions.clone(),
                    payload: encode(&StoragePayload::Read { keys: keys.clone() }),
                    // A read's answer parts are its keys.
                    parts: keys.clone(),
                }
            }
        };
        self.push_op(
            gateway,
            Some(history),
            OpCommand::Client(command),
            keys,
            gateway_command,
        );
    }

    /// Hands a command to gateway `gateway` at its next tick.
    fn push_op(
        &mut self,
        gateway: usize,
        history: Option<usize>,
        command: OpCommand,
        keys: Vec<u64>,
        gateway_command: GatewayCommand,
    ) {
        let node = &mut self.gateways[gateway];
        let id = node.op_next;
        node.op_next += 1;
        node.ops.insert(
            id,
            Op {
                history,
                command,
                keys,
                attempts: 0,
                digest: 0,
                copies: Vec::new(),
            },
        );
        node.submissions.push((id, gateway_command));
    }

    fn issue(&mut self, gateway: usize) {
        let options = &self.options;
        let command = if self.prng.percent(options.bank_percent) {
            if self.prng.percent(60) {
                let from = self.prng.below(options.accounts);
                let to = (from + 1 + self.prng.below(options.accounts - 1)) % options.accounts;
                EcastCommand::Transfer {
                    from,
                    to,
                    amount: self.prng.range_inclusive(1, 20) as i64,
                }
            } else {
                EcastCommand::Audit {
                    isolation: self.read_isolation(),
                }
            }
        } else {
            let key = REGISTER_BASE + self.prng.below(options.registers);
            if self.prng.percent(50) {
                self.value_next += 1;
                EcastCommand::Put {
                    key,
                    value: self.value_next,
                }
            } else {
                EcastCommand::Get {
                    key,
                    isolation: self.get_isolation(),
                }
            }
        };
        self.add_op(gateway, command);
    }

    fn get_isolation(&mut self) -> Isolation {
        if self.prng.percent(self.options.basic_percent) {
            Isolation::Basic
        } else {
            self.read_isolation()
        }
    }

    fn read_isolation(&mut self) -> Isolation {
        if self.prng.percent(self.options.snapshot_percent) {
            Isolation::Snapshot
        } else {
            Isolation::Sequential
        }
    }

    /// One gateway tick: what reads avoid, new commands, the tick itself; then the workload
    /// issues more.
    fn drive_gateway(&mut self, index: usize) -> Result<(), Violation> {
        let node = &mut self.gateways[index];
        let mut effects = Vec::new();
        if node.gateway.busy() != &self.busy {
            let busy = GatewayInput::Busy(self.busy.clone());
            node.gateway.step(busy, &mut effects);
        }
        if std::mem::take(&mut node.refresh) {
            node.gateway.refresh_configuration(&mut effects);
        }
        for (id, command) in std::mem::take(&mut node.submissions) {
            node.gateway
                .step(GatewayInput::Submit { id, command }, &mut effects);
        }
        node.gateway.step(GatewayInput::Tick, &mut effects);
        self.execute_gateway_effects(index, effects)?;
        let node = &self.gateways[index];
        let busy = node.ops.values().filter(|op| op.history.is_some()).count();
        if self.issuing && busy < node.slots && self.now >= node.idle_until {
            self.issue(index);
        }
        Ok(())
    }

    fn gateway_receive(&mut self, index: usize, payload: Payload) -> Result<(), Violation> {
        let input = match payload {
            Payload::Vr(message) => GatewayInput::Router(message),
            Payload::Stable {
                sequence,
                timestamp,
            } => GatewayInput::Stable {
                sequence,
                timestamp,
            },
            Payload::Answer { sequence, values } => GatewayInput::Answer {
                sequence,
                answers: values,
            },
            Payload::BasicAnswer {
                read_id,
                key,
                value,
            } => GatewayInput::BasicAnswer {
                read_id,
                answers: vec![(key, value)],
            },
            Payload::BasicRefused { read_id, refusal } => {
                self.stats.basic_refusals += 1;
                GatewayInput::BasicRefused { read_id, refusal }
            }
            Payload::SnapshotRefused { read_id, refusal } => {
                GatewayInput::SnapshotRefused { read_id, refusal }
            }
            Payload::SnapshotAnswer {
                read_id,
                at,
                values,
            } => GatewayInput::SnapshotAnswer {
                read_id,
                at,
                answers: values,
            },
            _ => return Ok(()),
        };
        let mut effects = Vec::new();
        self.gateways[index].gateway.step(input, &mut effects);
        self.execute_gateway_effects(index, effects)
    }

    fn execute_gateway_effects(
        &mut self,
        index: usize,
        effects: Vec<GatewayEffect<Option<i64>>>,
    ) -> Result<(), Violation> {
        let from = Endpoint::Gateway(index);
        let mut queue = VecDeque::from(effects);
        while let Some(effect) = queue.pop_front() {
            let mut more = Vec::new();
            match effect {
                // Never emitted: this world's gateways have no router bypass.
                GatewayEffect::PartitionBasicRead { .. } => {}
                GatewayEffect::Request { router, request } => self.send(
                    from,
                    Endpoint::Router(router),
                    Payload::Vr(Message::Request(request)),
                ),
                GatewayEffect::SnapshotRead { router, read, .. } => {
                    self.stats.snapshot_reads += 1;
                    self.send(from, Endpoint::Router(router), Payload::SnapshotRead(read));
                }
                GatewayEffect::BasicRead {
                    id,
                    to,
                    read_id,
                    planned_at,
                    ..
                } => {
                    // The storage process is asked for the keys it holds of the read.
                    let node = &self.gateways[index];
                    let configuration = node.gateway.configuration();
                    let keys: Vec<u64> = node.ops.get(&id).map_or(Vec::new(), |op| {
                        op.keys
                            .iter()
                            .copied()
                            .filter(|key| configuration.live_replicas(position(*key)).contains(&to))
                            .collect()
                    });
                    for key in keys {
                        let read = Payload::BasicRead {
                            read_id,
                            planned_at,
                            key,
                        };
                        self.send(from, Endpoint::Storage(to), read);
                    }
                }
                GatewayEffect::Plan { id } => {
                    let message = self.plan_config(index, id);
                    let planned = GatewayInput::Planned { id, message };
                    self.gateways[index].gateway.step(planned, &mut more);
                }
                GatewayEffect::Submitted { id, envelope } => {
                    self.on_submitted(index, id, &envelope)
                }
                GatewayEffect::Sequenced {
                    id,
                    sequence,
                    timestamp,
                } => {
                    let node = &self.gateways[index];
                    if let Some(op) = node.ops.get(&id) {
                        let (sender, digest) = (node.gateway.id(), op.digest);
                        self.stability.on_acknowledged(
                            sender,
                            sequence.0,
                            timestamp,
                            digest,
                            &self.order,
                        )?;
                    }
                }
                GatewayEffect::Refused { id, .. } => {
                    // Not routed: its copies never happen (a data message is re-planned).
                    self.stats.refusals += 1;
                    let copies = self.gateways[index]
                        .ops
                        .get_mut(&id)
                        .map(|op| std::mem::take(&mut op.copies))
                        .unwrap_or_default();
                    for copy in copies {
                        self.release_copy(copy);
                    }
                }
                GatewayEffect::ConfigurationRefreshed { .. } => {}
                // `sequenced` partitions: no router bypass.
                GatewayEffect::PartitionRequest { .. } | GatewayEffect::BypassGroups { .. } => {}
                GatewayEffect::Complete { id, completion } => {
                    if self.on_complete(index, id, completion) {
                        let command = GatewayCommand::Config;
                        let submit = GatewayInput::Submit { id, command };
                        self.gateways[index].gateway.step(submit, &mut more);
                    }
                }
            }
            queue.extend(more);
        }
        Ok(())
    }

    /// The configuration message command `id` stands for against the gateway's configuration.
    fn plan_config(&mut self, index: usize, id: u64) -> Option<ConfigMessage> {
        let node = &self.gateways[index];
        let command = node.ops.get(&id)?.command.clone();
        let configuration = node.gateway.configuration().clone();
        let membership = |change| ConfigMessage {
            based_on: configuration.version(),
            change: ConfigChange::Membership(change),
        };
        match command {
            OpCommand::Suspect(process) => Some(membership(MembershipChange::Suspect { process })),
            OpCommand::Join(process) => Some(membership(MembershipChange::Join { process })),
            OpCommand::Reconfigure { draw } => {
                let message = self.plan_reconfiguration(&configuration, draw);
                if message.is_none() {
                    self.stats.reconfigurations_refused += 1;
                }
                message
            }
            OpCommand::Client(_) => None,
        }
    }

    /// A message entered a gateway's window: the stability checker's digest, a keyspace
    /// message's copies.
    fn on_submitted(&mut self, index: usize, id: u64, envelope: &ecast::Envelope) {
        let copies = copies_of(&envelope.routing);
        let Some(op) = self.gateways[index].ops.get_mut(&id) else {
            return;
        };
        op.digest = digest(envelope);
        op.copies = copies.clone();
        for copy in &copies {
            *self.copy_edges.entry(*copy).or_default() += 1;
        }
        // §6.5's hard case, on purpose: a sender crashes while it streams.
        if !copies.is_empty() && self.faults_on && self.prng.percent(30) {
            let (sender, _) = copies[self.prng.below(copies.len() as u64) as usize];
            let at = self.now + self.prng.range_inclusive(1, 60);
            self.scheduled_crash = Some((at, sender));
        }
    }

    /// A gateway completed command `id`. Returns whether to submit it again (a refused
    /// configuration message that is not settled).
    fn on_complete(&mut self, index: usize, id: u64, completion: Completion<Option<i64>>) -> bool {
        let Some(mut op) = self.gateways[index].ops.remove(&id) else {
            return false;
        };
        match completion {
            Completion::Done(answers) => {
                let value = |key: &u64| answers.get(key).copied().flatten();
                let output = match &op.command {
                    OpCommand::Client(EcastCommand::Audit { .. }) => EcastOutput::Balances(
                        op.keys
                            .iter()
                            .map(|key| value(key).unwrap_or(i64::MIN))
                            .collect(),
                    ),
                    OpCommand::Client(EcastCommand::Get { key, isolation }) => {
                        if *isolation == Isolation::Basic {
                            self.stats.basic_reads += 1;
                        }
                        EcastOutput::Value(value(key).map(|value| value as u64))
                    }
                    OpCommand::Client(_) => EcastOutput::Ok,
                    _ => return false,
                };
                if let Some(history) = op.history {
                    self.finish(index, history, output);
                }
                false
            }
            Completion::Failed(Failure::Refused(refusal)) => {
                let settled = match op.command {
                    OpCommand::Suspect(_) => matches!(
                        refusal,
                        Refusal::NotActive { .. } | Refusal::UnknownProcess { .. }
                    ),
                    OpCommand::Join(_) | OpCommand::Client(_) => true,
                    OpCommand::Reconfigure { .. } => {
                        op.attempts += 1;
                        let settled = op.attempts >= RECONFIGURE_ATTEMPTS_MAX;
                        if settled {
                            self.stats.reconfigurations_refused += 1;
                        }
                        settled
                    }
                };
                if settled {
                    return false;
                }
                // Re-planned against the configuration the refusal makes the gateway fetch.
                self.gateways[index].ops.insert(id, op);
                true
            }
            // Counted when the plan was declined.
            Completion::Failed(Failure::NotPlanned) => false,
            // A read out of attempts, a message the router forgot: it stays unanswered in the
            // history, and the checkers drop it.
            Completion::Failed(_) => {
                for copy in op.copies {
                    self.release_copy(copy);
                }
                self.stats.abandoned += 1;
                false
            }
        }
    }

    /// A copy is no longer in flight: installed, or its message refused or lost.
    fn release_copy(&mut self, copy: (ProcessId, ProcessId)) {
        if let Some(count) = self.copy_edges.get_mut(&copy) {
            *count -= 1;
            if *count == 0 {
                self.copy_edges.remove(&copy);
            }
        }
    }

    fn finish(&mut self, index: usize, history: usize, output: EcastOutput) {
        if let Some((invoked_at, related)) = self.op_times.remove(&history) {
            let latency = self.now - invoked_at;
            if related {
                self.stats.related_latency_max = self.stats.related_latency_max.max(latency);
            } else {
                self.stats.unrelated_latency_max = self.stats.unrelated_latency_max.max(latency);
            }
            let description = || format!("{:?}", self.history.invocations[history].command);
            self.unrelated_latency
                .on_complete(latency, related, self.faults_on, description);
        }
        self.history.complete(history, self.event, output);
        self.event += 1;
        let think = self.prng.range_inclusive(0, self.options.think_ticks_max);
        self.gateways[index].idle_until = self.now + think;
    }
}

fn router_state(options: &EcastOptions, initial: &Configuration) -> RouterState {
    let canary = match options.canary {
        Some(EcastCanary::StableOnFirstConfirm) => Some(ecast::Canary::StableOnFirstConfirm),
        Some(EcastCanary::RebuildForgetsSettledRoutes) => {
            Some(ecast::Canary::RebuildForgetsSettledRoutes)
        }
        Some(EcastCanary::SettleUnstable) => Some(ecast::Canary::SettleUnstable),
        _ => None,
    };
    RouterState::new(
        initial.clone(),
        RouterSettings {
            window_max: options.window_max,
            outcomes_retained: options.window_max * 4,
            announce_configurations: true,
            suspicions_to_groups: false,
            canary,
        },
    )
}

fn gateway_index(id: ProcessId, count: usize) -> Option<usize> {
    let index = id.0.checked_sub(GATEWAY_BASE)? as usize;
    (index < count).then_some(index)
}

fn summarize(payload: &Payload) -> String {
    match payload {
        Payload::Vr(message) => crate::trace::summarize(message),
        Payload::Deliver { deliveries, .. } => format!(
            "deliver {:?}",
            deliveries
                .iter()
                .map(|delivery| (delivery.timestamp.0, delivery.previous.0))
                .collect::<Vec<_>>()
        ),
        Payload::Confirm { process, delivered } => format!("confirm {} {delivered}", process.0),
        Payload::Stable {
            sequence,
            timestamp,
        } => format!("stable #{} {timestamp}", sequence.0),
        Payload::Answer { sequence, values } => format!("answer #{} {values:?}", sequence.0),
        Payload::SnapshotRead(read) => {
            format!(
                "snapshot_read {} not_before {}",
                read.read_id, read.not_before
            )
        }
        Payload::SnapshotDeliver(delivery) => format!(
            "snapshot {} at {} after {}",
            delivery.read.read_id, delivery.at, delivery.after
        ),
        Payload::SnapshotRefused { read_id, refusal } => {
            format!("snapshot_refused {read_id}: {refusal}")
        }
        Payload::SnapshotAnswer {
            read_id,
            at,
            values,
        } => format!("snapshot_answer {read_id} at {at} {values:?}"),
        Payload::BasicRead {
            read_id,
            planned_at,
            key,
        } => format!("basic_read {read_id} key {key} at version {}", planned_at.0),
        Payload::BasicAnswer {
            read_id,
            key,
            value,
        } => format!("basic_answer {read_id} key {key} {value:?}"),
        Payload::BasicRefused { read_id, refusal } => {
            format!("basic_refused {read_id}: {refusal}")
        }
        Payload::Migration(message) => summarize_migration(message),
    }
}

/// The ring positions a routed message touches.
fn touches(routing: &Routing) -> PositionSet {
    match routing {
        Routing::Read { target, .. } | Routing::Write { target, .. } => match target {
            Target::Points(points) => points.iter().fold(PositionSet::empty(), |all, point| {
                all.union(&PositionSet::point(*point))
            }),
            Target::Range(range) => range.clone(),
        },
        Routing::Config { .. } => PositionSet::empty(),
    }
}

/// A storage process's records in `range`, as migration carries them.
/// One slice of a migration pass over a storage process's data, in key order (the driver's
/// half of `MigrationEffect::Scan`).
fn scan(
    data: &mut BTreeMap<u64, i64>,
    mode: ScanMode,
    range: &PositionSet,
    after: Option<&[u8]>,
    keys_max: usize,
) -> (Vec<Record>, Option<Vec<u8>>) {
    use std::ops::Bound;
    let from = match after.map(<[u8; 8]>::try_from) {
        None => Bound::Unbounded,
        Some(Ok(key)) => Bound::Excluded(u64::from_be_bytes(key)),
        Some(Err(_)) => unreachable!("cursors are keys this function returned"),
    };
    let visited: Vec<(u64, i64)> = data
        .range((from, Bound::Unbounded))
        .take(keys_max)
        .map(|(key, value)| (*key, *value))
        .collect();
    let next = (visited.len() == keys_max)
        .then(|| visited.last().map(|(key, _)| key.to_be_bytes().to_vec()))
        .flatten();
    let mut records = Vec::new();
    for (key, value) in visited {
        if !range.contains(position(key)) {
            continue;
        }
        match mode {
            ScanMode::Copy => records.push(Record {
                position: position(key),
                key: key.to_be_bytes().to_vec(),
                value: value.to_be_bytes().to_vec(),
            }),
            ScanMode::Remove => {
                data.remove(&key);
            }
        }
    }
    (records, next)
}

/// The copies (sender, receiver) of a keyspace message.
fn copies_of(routing: &Routing) -> Vec<(ProcessId, ProcessId)> {
    match routing {
        Routing::Config {
            message:
                ConfigMessage {
                    change: ConfigChange::Keyspace(keyspace),
                    ..
                },
            ..
        } => keyspace
            .instructions
            .iter()
            .filter_map(|instruction| match instruction {
                Instruction::Copy { from, to, .. } => Some((*from, *to)),
                Instruction::Delete { .. } => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A keyspace transformation drawn from `draw` that fits `configuration`: expand a live
/// standby, contract a ring member, replace one (a suspected one first) by a standby, or
/// rebalance an active one to a random identifier.
pub(crate) fn choose_transformation(
    configuration: &Configuration,
    draw: u64,
) -> Option<Transformation> {
    let mut prng = Prng::new(draw);
    let of_state = |wanted: fn(ProcessState) -> bool| -> Vec<ProcessId> {
        configuration
            .processes()
            .iter()
            .filter(|(_, info)| wanted(info.state))
            .map(|(process, _)| *process)
            .collect()
    };
    let standbys = of_state(|state| matches!(state, ProcessState::Standby));
    let active = of_state(|state| matches!(state, ProcessState::Active { .. }));
    let suspected = of_state(|state| matches!(state, ProcessState::Suspected { .. }));
    let pick = |prng: &mut Prng, from: &[ProcessId]| -> Option<ProcessId> {
        (!from.is_empty()).then(|| *prng.pick(from))
    };
    let choice = prng.below(4);
    match choice {
        0 => Some(Transformation::Expand {
            process: pick(&mut prng, &standbys)?,
            identifier: Position(prng.next_u64()),
        }),
        1 => {
            let members: Vec<ProcessId> = if !suspected.is_empty() && prng.percent(50) {
                suspected
            } else {
                active
            };
            Some(Transformation::Contract {
                process: pick(&mut prng, &members)?,
            })
        }
        2 => {
            let replaced = if suspected.is_empty() {
                pick(&mut prng, &active)?
            } else {
                pick(&mut prng, &suspected)?
            };
            Some(Transformation::Replace {
                replaced,
                standby: pick(&mut prng, &standbys)?,
            })
        }
        _ => Some(Transformation::Rebalance {
            process: pick(&mut prng, &active)?,
            identifier: Position(prng.next_u64()),
        }),
    }
}

fn inbox_settings(options: &EcastOptions) -> InboxSettings {
    InboxSettings {
        canary: (options.canary == Some(EcastCanary::InboxSkipsGapCheck))
            .then_some(ecast::Canary::InboxSkipsGapCheck),
        ..InboxSettings::default()
    }
}

fn summarize_migration(message: &placement::migration::MigrationMessage) -> String {
    use placement::migration::MigrationMessage;
    let name =
        |stream: &StreamId| format!("v{} {}->{}", stream.version.0, stream.from.0, stream.to.0);
    match message {
        MigrationMessage::Chunk(chunk) => format!(
            "chunk {} {}/{} ({} records)",
            name(&chunk.stream),
            chunk.index,
            chunk.count,
            chunk.records.len()
        ),
        MigrationMessage::ChunkAck { stream, index } => {
            format!("chunk_ack {} {index}", name(stream))
        }
        MigrationMessage::Waiting { stream } => format!("waiting {}", name(stream)),
        MigrationMessage::Installed { version, receiver } => {
            format!("installed v{} by {}", version.0, receiver.0)
        }
        MigrationMessage::InstalledAck { version, receiver } => {
            format!("installed_ack v{} by {}", version.0, receiver.0)
        }
        MigrationMessage::Behind { stream } => format!("behind {}", name(stream)),
        MigrationMessage::Probe { stream } => format!("probe {}", name(stream)),
    }
}
