//! One simulated E-Cast run: a VR group of routers replicating `ecast::RouterState` (with the
//! forwarder beside whichever router is primary), storage processes in `sequenced` mode on a
//! placement ring (each an `ecast::Inbox` applying its share of the stream to a key-value map),
//! gateways submitting through `ecast::Sender`, a failure detector that reports crashed storage
//! processes with Suspect messages, and a nemesis; all driven by one seeded PRNG on one thread.

use super::history::{EcastCommand, EcastHistory, EcastOutput, StoragePayload, BALANCE_INITIAL};
use super::network::{Endpoint, Network, Packet, Payload};
use super::options::{EcastCanary, EcastOptions};
use crate::checkers::ecast_order::{digest, EcastOrder};
use crate::checkers::ecast_stability::EcastStability;
use crate::checkers::{ecast_basic_reads, ecast_serializability, Violation};
use crate::trace::Trace;
use ecast::{
    Envelope, Forwarder, ForwarderEffect, ForwarderInput, ForwarderSettings, Inbox, InboxEffect,
    InboxInput, InboxSettings, Isolation, Operation, OperationResult, Query, RouterSettings,
    RouterState, Sender, SenderEvent, SenderSettings, Sequence, SnapshotRead,
};
use placement::ecast::{Message as Routing, Target};
use placement::{
    ConfigChange, ConfigMessage, Configuration, KeyMapping, MembershipChange, Position, ProcessId,
    Refusal,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use stdx::Prng;
use vr::{
    ClientId, Effect, Input, Message, Nonce, Replica, ReplicaIndex, Request, RequestKind,
    RequestNumber, StatusName, View,
};

/// Gateways are application processes too: their ids sit far above storage processes'.
pub const GATEWAY_BASE: u64 = 1_000_000;
const FORWARDER_CLIENT_BASE: u64 = 0xf0f0_0000_0000_0000;
const REGISTER_BASE: u64 = 1_000;
/// A gateway resends an unanswered router request this often (to the next router every
/// second time).
const RETRY_TICKS: u64 = 30;
/// A sequential read whose message is stable but not fully answered is abandoned after this.
const READ_WAIT_TICKS: u64 = 300;
const SNAPSHOT_WAIT_TICKS: u64 = 200;
const SNAPSHOT_ATTEMPTS_MAX: u32 = 6;
const READ_ATTEMPTS_MAX: u32 = 4;
const BASIC_WAIT_TICKS: u64 = 60;
const BASIC_ATTEMPTS_MAX: u32 = 5;

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
    data: BTreeMap<u64, i64>,
    crashed_at: Option<u64>,
    suspect_submitted: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Purpose {
    Submit,
    Configuration,
    Now,
}

struct RouterRequest {
    request: Request,
    purpose: Purpose,
    sent_at: u64,
    attempts: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Queued,
    Submitted(Sequence),
    /// A read whose message is stable, waiting for answers.
    Stable {
        since: u64,
        sequence: Sequence,
    },
    /// A basic read waiting to be sent (or sent again) to one storage process.
    BasicQueued,
    BasicSent {
        read_id: u64,
        sent_at: u64,
    },
    SnapshotNeedsNow,
    SnapshotSent {
        read_id: u64,
        sent_at: u64,
    },
}

#[derive(Clone, Debug)]
enum OpCommand {
    Client(EcastCommand),
    /// The failure detector's report of a crashed storage process.
    Suspect(ProcessId),
}

struct Op {
    history: Option<usize>,
    command: OpCommand,
    keys: Vec<u64>,
    phase: Phase,
    answers: BTreeMap<u64, Option<i64>>,
    /// A snapshot read's point, fixed by its first answer.
    snapshot_at: Option<ecast::Timestamp>,
    attempts: u32,
    digest: u64,
}

struct Gateway {
    id: ProcessId,
    client: ClientId,
    sender: Sender,
    config: Configuration,
    need_config: bool,
    request_next: RequestNumber,
    request: Option<RouterRequest>,
    target: u8,
    ops: BTreeMap<u64, Op>,
    op_next: u64,
    by_sequence: BTreeMap<Sequence, u64>,
    read_next: u64,
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
    gateways: Vec<Gateway>,
    gateway_by_client: BTreeMap<ClientId, usize>,
    /// The failure detector's gateway.
    admin: usize,
    network: Network,
    history: EcastHistory,
    trace: Trace,
    order: EcastOrder,
    stability: EcastStability,
    issuing: bool,
    faults_on: bool,
    stats: EcastStats,
    value_next: u64,
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
        let inbox_settings = InboxSettings {
            canary: (options.canary == Some(EcastCanary::InboxSkipsGapCheck))
                .then_some(ecast::Canary::InboxSkipsGapCheck),
            ..InboxSettings::default()
        };
        let storage = members
            .iter()
            .map(|(id, _)| StorageNode {
                id: *id,
                inbox: Inbox::new(*id, initial.version(), inbox_settings.clone()),
                data: (0..options.accounts)
                    .map(|account| (account, BALANCE_INITIAL))
                    .collect(),
                crashed_at: None,
                suspect_submitted: false,
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
            network,
            history: EcastHistory::default(),
            trace: Trace::new(trace_lines),
            order: EcastOrder::default(),
            stability: EcastStability::default(),
            issuing: true,
            faults_on: true,
            stats: EcastStats::default(),
            value_next: 1,
            options,
        };
        for _ in 0..simulation.options.gateways {
            simulation.add_gateway(simulation.options.slots);
        }
        simulation.admin = simulation.add_gateway(0);
        simulation
    }

    fn add_gateway(&mut self, slots: usize) -> usize {
        let index = self.gateways.len();
        let client = ClientId(self.prng.next_u64() >> 1);
        let id = ProcessId(GATEWAY_BASE + index as u64);
        let sender = Sender::new(
            id,
            SenderSettings {
                window_max: self.options.window_max,
                resubmit_ticks: 60,
            },
        );
        self.gateways.push(Gateway {
            id,
            client,
            sender,
            config: self.initial.clone(),
            need_config: false,
            request_next: RequestNumber(1),
            request: None,
            target: 0,
            ops: BTreeMap::new(),
            op_next: 0,
            by_sequence: BTreeMap::new(),
            read_next: 1,
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
        for (index, gateway) in self.gateways.iter().enumerate() {
            if let Some((_, op)) = gateway.ops.iter().next() {
                return Some(format!(
                    "gateway {index} has {} operations, the first {:?} in {:?}",
                    gateway.ops.len(),
                    op.command,
                    op.phase
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
        let mut values: BTreeMap<u64, Vec<(ProcessId, Option<i64>)>> = BTreeMap::new();
        let keys = (0..self.options.accounts)
            .chain((0..self.options.registers).map(|register| REGISTER_BASE + register));
        for key in keys {
            for holder in self.initial.replicas(position(key)) {
                let node = &self.storage[(holder.0 - 1) as usize];
                if node.crashed_at.is_none() {
                    values
                        .entry(key)
                        .or_default()
                        .push((holder, node.data.get(&key).copied()));
                }
            }
        }
        EcastStability::check_replicas_agree(&values)?;
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
        self.failure_detector();
        for index in 0..self.gateways.len() {
            self.drive_gateway(index)?;
        }
        Ok(())
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
        if self.prng.chance(options.router_crash_per_10000, 10_000) {
            let index = self.prng.below(self.routers.len() as u64) as usize;
            if self.router_may_crash(index) {
                self.crash_router(index);
            }
        }
        let crashed = self
            .storage
            .iter()
            .filter(|node| node.crashed_at.is_some())
            .count() as u64;
        if crashed < options.storage_crashes_max
            && self.prng.chance(options.storage_crash_per_10000, 10_000)
        {
            let index = self.prng.below(self.storage.len() as u64) as usize;
            if self.storage[index].crashed_at.is_none() {
                self.storage[index].crashed_at = Some(self.now);
                self.stats.storage_crashes += 1;
                let id = self.storage[index].id;
                self.network.drop_to(Endpoint::Storage(id));
                self.trace.line(|| format!("crash storage {}", id.0));
            }
        }
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

    /// A perfect failure detector with a delay: a crashed storage process is reported with a
    /// Suspect message `suspect_delay_ticks` after it crashed.
    fn failure_detector(&mut self) {
        for index in 0..self.storage.len() {
            let node = &self.storage[index];
            let due = node
                .crashed_at
                .is_some_and(|at| at + self.options.suspect_delay_ticks <= self.now);
            if due && !node.suspect_submitted {
                let id = node.id;
                self.storage[index].suspect_submitted = true;
                let admin = self.admin;
                self.push_op(
                    admin,
                    None,
                    OpCommand::Suspect(id),
                    Vec::new(),
                    Phase::Queued,
                );
                self.trace.line(|| format!("suspect storage {}", id.0));
            }
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
            match effect {
                InboxEffect::Deliver(delivery) => {
                    self.order.on_delivery(id, &delivery)?;
                    let envelope = delivery.envelope;
                    if let Some(values) = self.apply(index, &envelope.payload) {
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
                InboxEffect::ExecuteSnapshot(snapshot) => {
                    if let Some(values) = self.apply(index, &snapshot.read.payload) {
                        if let Some(gateway) =
                            gateway_index(snapshot.read.sender, self.gateways.len())
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
            Ok(()) if self.initial.replicas(position(key)).contains(&id) => Payload::BasicAnswer {
                read_id,
                value: node.data.get(&key).copied(),
            },
            Ok(()) => return, // Not ours: a gateway bug; it retries elsewhere.
            Err(refusal) => Payload::BasicRefused { read_id, refusal },
        };
        self.send(Endpoint::Storage(id), from, payload);
    }

    /// Applies this process's share of a payload: writes to the keys it holds; a read answers
    /// the keys it holds.
    fn apply(&mut self, index: usize, payload: &[u8]) -> Option<Vec<(u64, Option<i64>)>> {
        let payload: StoragePayload = postcard::from_bytes(payload).ok()?;
        let id = self.storage[index].id;
        let holds = |key: u64| self.initial.replicas(position(key)).contains(&id);
        match payload {
            StoragePayload::Transfer { from, to, amount } => {
                let (holds_from, holds_to) = (holds(from), holds(to));
                let data = &mut self.storage[index].data;
                if holds_from {
                    *data.entry(from).or_insert(BALANCE_INITIAL) -= amount;
                }
                if holds_to {
                    *data.entry(to).or_insert(BALANCE_INITIAL) += amount;
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
        let keys = match &command {
            EcastCommand::Transfer { from, to, .. } => vec![*from, *to],
            EcastCommand::Audit { .. } => (0..self.options.accounts).collect(),
            EcastCommand::Put { key, .. } | EcastCommand::Get { key, .. } => vec![*key],
        };
        let phase = match command {
            EcastCommand::Audit {
                isolation: Isolation::Snapshot,
            }
            | EcastCommand::Get {
                isolation: Isolation::Snapshot,
                ..
            } => Phase::SnapshotNeedsNow,
            EcastCommand::Get {
                isolation: Isolation::Basic,
                ..
            } => Phase::BasicQueued,
            _ => Phase::Queued,
        };
        self.push_op(
            gateway,
            Some(history),
            OpCommand::Client(command),
            keys,
            phase,
        );
    }

    fn push_op(
        &mut self,
        gateway: usize,
        history: Option<usize>,
        command: OpCommand,
        keys: Vec<u64>,
        phase: Phase,
    ) {
        let gateway = &mut self.gateways[gateway];
        let id = gateway.op_next;
        gateway.op_next += 1;
        gateway.ops.insert(
            id,
            Op {
                history,
                command,
                keys,
                phase,
                answers: BTreeMap::new(),
                snapshot_at: None,
                attempts: 0,
                digest: 0,
            },
        );
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

    fn drive_gateway(&mut self, index: usize) -> Result<(), Violation> {
        self.gateways[index].sender.tick();
        self.expire_reads(index);
        self.send_basic_reads(index);
        self.fill_window(index);
        self.maybe_request(index);
        let gateway = &self.gateways[index];
        let busy = gateway
            .ops
            .values()
            .filter(|op| op.history.is_some())
            .count();
        if self.issuing && busy < gateway.slots && self.now >= gateway.idle_until {
            self.issue(index);
        }
        Ok(())
    }

    /// A read whose message is stable but not fully answered (an answer was lost, or its
    /// destination crashed) is sent again as a new message, a few times, then abandoned (it
    /// stays unanswered in the history and the checker drops it); a snapshot read likewise.
    /// A new message for the same read is sound: its point is inside the read's interval.
    fn expire_reads(&mut self, index: usize) {
        let now = self.now;
        let gateway = &mut self.gateways[index];
        let mut abandoned = Vec::new();
        for (id, op) in gateway.ops.iter_mut() {
            match op.phase {
                Phase::Stable { since, sequence } if now >= since + READ_WAIT_TICKS => {
                    gateway.by_sequence.remove(&sequence);
                    op.attempts += 1;
                    if op.attempts >= READ_ATTEMPTS_MAX {
                        abandoned.push(*id);
                    } else {
                        op.phase = Phase::Queued;
                        op.answers.clear();
                    }
                }
                Phase::SnapshotSent { sent_at, .. } if now >= sent_at + SNAPSHOT_WAIT_TICKS => {
                    retry_snapshot(op, &mut abandoned, *id);
                }
                Phase::BasicSent { sent_at, .. } if now >= sent_at + BASIC_WAIT_TICKS => {
                    retry_basic(op, &mut abandoned, *id);
                }
                _ => {}
            }
        }
        for id in abandoned {
            gateway.ops.remove(&id);
            self.stats.abandoned += 1;
        }
    }

    /// §6.7 basic reads: straight to one live replica of the key under the gateway's
    /// configuration, carrying that configuration's version.
    fn send_basic_reads(&mut self, index: usize) {
        if self.gateways[index].need_config {
            return;
        }
        let waiting: Vec<u64> = self.gateways[index]
            .ops
            .iter()
            .filter(|(_, op)| op.phase == Phase::BasicQueued)
            .map(|(id, _)| *id)
            .collect();
        for id in waiting {
            let offset = self.prng.next_u64();
            let now = self.now;
            let gateway = &mut self.gateways[index];
            let read_id = gateway.read_next;
            gateway.read_next += 1;
            let op = gateway.ops.get_mut(&id).expect("listed above");
            let key = op.keys[0];
            let live = gateway.config.live_replicas(position(key));
            let Some(process) = live
                .get((offset % live.len().max(1) as u64) as usize)
                .copied()
            else {
                continue; // No live replica: the key is lost; try again later.
            };
            op.phase = Phase::BasicSent {
                read_id,
                sent_at: now,
            };
            let planned_at = gateway.config.version();
            self.send(
                Endpoint::Gateway(index),
                Endpoint::Storage(process),
                Payload::BasicRead {
                    read_id,
                    planned_at,
                    key,
                },
            );
        }
    }

    /// Queued operations enter the sender's window, planned against the gateway's configuration.
    fn fill_window(&mut self, index: usize) {
        if self.gateways[index].need_config {
            return;
        }
        let queued: Vec<u64> = self.gateways[index]
            .ops
            .iter()
            .filter(|(_, op)| op.phase == Phase::Queued)
            .map(|(id, _)| *id)
            .collect();
        for id in queued {
            let offset = self.prng.next_u64();
            let gateway = &mut self.gateways[index];
            let op = &gateway.ops[&id];
            let (routing, payload) =
                plan(gateway.id, &gateway.config, &op.command, &op.keys, offset);
            let payload = postcard::to_allocvec(&payload).expect("payloads serialise");
            let planned_at = gateway.config.version();
            let Ok(sequence) = gateway
                .sender
                .submit(planned_at, routing.clone(), payload.clone())
            else {
                break; // The window is full.
            };
            let envelope = Envelope {
                sender: gateway.id,
                sequence,
                planned_at,
                routing,
                payload,
            };
            let op = gateway.ops.get_mut(&id).expect("listed above");
            op.digest = digest(&envelope);
            op.phase = Phase::Submitted(sequence);
            gateway.by_sequence.insert(sequence, id);
        }
    }

    /// One router request at a time: retry it, or send the next one needed.
    fn maybe_request(&mut self, index: usize) {
        let router_count = self.routers.len() as u8;
        let now = self.now;
        let gateway = &mut self.gateways[index];
        if let Some(request) = &mut gateway.request {
            if now >= request.sent_at + RETRY_TICKS {
                request.attempts += 1;
                request.sent_at = now;
                if request.attempts % 2 == 0 {
                    gateway.target = (gateway.target + 1) % router_count;
                }
                let (target, message) = (gateway.target, Message::Request(request.request.clone()));
                self.send(
                    Endpoint::Gateway(index),
                    Endpoint::Router(target),
                    Payload::Vr(message),
                );
            }
            return;
        }
        let (purpose, kind, operation) = if gateway.need_config {
            (
                Purpose::Configuration,
                RequestKind::Read,
                Operation::Query(Query::Configuration),
            )
        } else if gateway
            .ops
            .values()
            .any(|op| op.phase == Phase::SnapshotNeedsNow)
        {
            (
                Purpose::Now,
                RequestKind::Read,
                Operation::Query(Query::Now),
            )
        } else if let Some(batch) = gateway.sender.batch() {
            (Purpose::Submit, RequestKind::Write, batch)
        } else {
            return;
        };
        let request = Request {
            client: gateway.client,
            request: gateway.request_next,
            kind,
            operation: operation.encode(),
        };
        gateway.request_next = RequestNumber(gateway.request_next.0 + 1);
        gateway.request = Some(RouterRequest {
            request: request.clone(),
            purpose,
            sent_at: now,
            attempts: 0,
        });
        let target = gateway.target;
        self.send(
            Endpoint::Gateway(index),
            Endpoint::Router(target),
            Payload::Vr(Message::Request(request)),
        );
    }

    fn gateway_receive(&mut self, index: usize, payload: Payload) -> Result<(), Violation> {
        let router_count = self.routers.len() as u64;
        match payload {
            Payload::Vr(Message::Reply(reply)) => {
                let gateway = &mut self.gateways[index];
                let ours = gateway
                    .request
                    .as_ref()
                    .is_some_and(|request| request.request.request == reply.request);
                if !ours {
                    return Ok(());
                }
                let purpose = gateway.request.take().expect("checked above").purpose;
                let result = OperationResult::decode(&reply.result);
                self.on_router_result(index, purpose, result)
            }
            Payload::Vr(Message::NotPrimary { view, request, .. }) => {
                let now = self.now;
                let gateway = &mut self.gateways[index];
                if let Some(outstanding) = &mut gateway.request {
                    if outstanding.request.request == request {
                        gateway.target = (view.0 % router_count) as u8;
                        outstanding.sent_at = now.saturating_sub(RETRY_TICKS / 2);
                    }
                }
                Ok(())
            }
            Payload::Stable {
                sequence,
                timestamp,
            } => {
                let mut events = Vec::new();
                self.gateways[index]
                    .sender
                    .on_stable(sequence, timestamp, &mut events);
                self.on_sender_events(index, events)
            }
            Payload::Answer { sequence, values } => {
                let gateway = &mut self.gateways[index];
                if let Some(id) = gateway.by_sequence.get(&sequence).copied() {
                    if let Some(op) = gateway.ops.get_mut(&id) {
                        op.answers.extend(values);
                        self.maybe_complete_read(index, id);
                    }
                }
                Ok(())
            }
            Payload::BasicAnswer { read_id, value } => {
                let gateway = &mut self.gateways[index];
                let found = gateway.ops.iter().find(|(_, op)| {
                    matches!(op.phase, Phase::BasicSent { read_id: sent, .. } if sent == read_id)
                });
                if let Some((id, op)) = found {
                    let (id, history) = (*id, op.history);
                    gateway.ops.remove(&id);
                    self.stats.basic_reads += 1;
                    if let Some(history) = history {
                        let output = EcastOutput::Value(value.map(|value| value as u64));
                        self.finish(index, history, output);
                    }
                }
                Ok(())
            }
            Payload::BasicRefused { read_id, .. } => {
                self.stats.basic_refusals += 1;
                let gateway = &mut self.gateways[index];
                let mut abandoned = Vec::new();
                for (id, op) in gateway.ops.iter_mut() {
                    if matches!(op.phase, Phase::BasicSent { read_id: sent, .. } if sent == read_id)
                    {
                        // Planned against another version: re-plan with the current one.
                        retry_basic(op, &mut abandoned, *id);
                        gateway.need_config = true;
                    }
                }
                for id in abandoned {
                    gateway.ops.remove(&id);
                    self.stats.abandoned += 1;
                }
                Ok(())
            }
            Payload::SnapshotRefused { read_id, .. } => {
                let gateway = &mut self.gateways[index];
                let mut abandoned = Vec::new();
                for (id, op) in gateway.ops.iter_mut() {
                    if matches!(op.phase, Phase::SnapshotSent { read_id: sent, .. } if sent == read_id)
                    {
                        retry_snapshot(op, &mut abandoned, *id);
                    }
                }
                for id in abandoned {
                    gateway.ops.remove(&id);
                    self.stats.abandoned += 1;
                }
                Ok(())
            }
            Payload::SnapshotAnswer {
                read_id,
                at,
                values,
            } => {
                let gateway = &mut self.gateways[index];
                let found = gateway.ops.iter_mut().find(|(_, op)| {
                    matches!(op.phase, Phase::SnapshotSent { read_id: sent, .. } if sent == read_id)
                });
                if let Some((id, op)) = found {
                    if *op.snapshot_at.get_or_insert(at) != at {
                        return Ok(()); // A second stamping of a duplicated read.
                    }
                    op.answers.extend(values);
                    let id = *id;
                    self.maybe_complete_read(index, id);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn on_router_result(
        &mut self,
        index: usize,
        purpose: Purpose,
        result: OperationResult,
    ) -> Result<(), Violation> {
        match (purpose, result) {
            (Purpose::Submit, result) => {
                let mut events = Vec::new();
                self.gateways[index].sender.on_result(&result, &mut events);
                self.on_sender_events(index, events)
            }
            (Purpose::Configuration, OperationResult::Configuration(configuration)) => {
                let gateway = &mut self.gateways[index];
                gateway.config = configuration;
                gateway.need_config = false;
                Ok(())
            }
            (Purpose::Now, OperationResult::Now { timestamp, .. }) => {
                self.send_snapshot_reads(index, timestamp);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn send_snapshot_reads(&mut self, index: usize, not_before: ecast::Timestamp) {
        let waiting: Vec<u64> = self.gateways[index]
            .ops
            .iter()
            .filter(|(_, op)| op.phase == Phase::SnapshotNeedsNow)
            .map(|(id, _)| *id)
            .collect();
        for id in waiting {
            let offset = self.prng.next_u64();
            let now = self.now;
            let gateway = &mut self.gateways[index];
            let read_id = gateway.read_next;
            gateway.read_next += 1;
            let op = gateway.ops.get_mut(&id).expect("listed above");
            op.phase = Phase::SnapshotSent {
                read_id,
                sent_at: now,
            };
            op.answers.clear();
            op.snapshot_at = None;
            let read = SnapshotRead {
                sender: gateway.id,
                read_id,
                not_before,
                routing: Routing::Read {
                    sender: gateway.id,
                    target: Target::Points(op.keys.iter().map(|key| position(*key)).collect()),
                    replica_offset: offset,
                },
                payload: postcard::to_allocvec(&StoragePayload::Read {
                    keys: op.keys.clone(),
                })
                .expect("payloads serialise"),
            };
            let target = gateway.target;
            self.stats.snapshot_reads += 1;
            self.send(
                Endpoint::Gateway(index),
                Endpoint::Router(target),
                Payload::SnapshotRead(read),
            );
        }
    }

    fn on_sender_events(
        &mut self,
        index: usize,
        events: Vec<SenderEvent>,
    ) -> Result<(), Violation> {
        for event in events {
            match event {
                SenderEvent::Sequenced {
                    sequence,
                    timestamp,
                    ..
                } => {
                    let gateway = &self.gateways[index];
                    if let Some(op) = gateway
                        .by_sequence
                        .get(&sequence)
                        .and_then(|id| gateway.ops.get(id))
                    {
                        let (id, digest) = (gateway.id, op.digest);
                        self.stability.on_acknowledged(
                            id,
                            sequence.0,
                            timestamp,
                            digest,
                            &self.order,
                        )?;
                    }
                }
                SenderEvent::Stable { sequence, .. } => self.on_stable(index, sequence),
                SenderEvent::Refused { sequence, refusal } => {
                    self.stats.refusals += 1;
                    let gateway = &mut self.gateways[index];
                    let Some(id) = gateway.by_sequence.remove(&sequence) else {
                        continue;
                    };
                    let Some(op) = gateway.ops.get_mut(&id) else {
                        continue;
                    };
                    let settled = matches!(op.command, OpCommand::Suspect(_))
                        && matches!(
                            refusal,
                            Refusal::NotActive { .. } | Refusal::UnknownProcess { .. }
                        );
                    if settled {
                        gateway.ops.remove(&id);
                    } else {
                        // Not routed: re-plan against the current configuration and resubmit.
                        op.phase = Phase::Queued;
                        gateway.need_config = true;
                    }
                }
                SenderEvent::Lost { sequence, .. } => {
                    let gateway = &mut self.gateways[index];
                    if let Some(id) = gateway.by_sequence.remove(&sequence) {
                        gateway.ops.remove(&id);
                        self.stats.abandoned += 1;
                    }
                }
            }
        }
        Ok(())
    }

    fn on_stable(&mut self, index: usize, sequence: Sequence) {
        let now = self.now;
        let gateway = &mut self.gateways[index];
        let Some(id) = gateway.by_sequence.get(&sequence).copied() else {
            return;
        };
        let Some(op) = gateway.ops.get_mut(&id) else {
            return;
        };
        let is_read = matches!(&op.command, OpCommand::Client(command) if command.is_read());
        if is_read {
            op.phase = Phase::Stable {
                since: now,
                sequence,
            };
            self.maybe_complete_read(index, id);
            return;
        }
        gateway.by_sequence.remove(&sequence);
        let op = gateway.ops.remove(&id).expect("found above");
        if let Some(history) = op.history {
            self.finish(index, history, EcastOutput::Ok);
        }
    }

    fn maybe_complete_read(&mut self, index: usize, id: u64) {
        let gateway = &mut self.gateways[index];
        let Some(op) = gateway.ops.get(&id) else {
            return;
        };
        if !op.keys.iter().all(|key| op.answers.contains_key(key)) {
            return;
        }
        let op = gateway.ops.remove(&id).expect("found above");
        if let Phase::Submitted(sequence) | Phase::Stable { sequence, .. } = op.phase {
            gateway.by_sequence.remove(&sequence);
        }
        let output = match &op.command {
            OpCommand::Client(EcastCommand::Audit { .. }) => EcastOutput::Balances(
                op.keys
                    .iter()
                    .map(|key| op.answers[key].unwrap_or(i64::MIN))
                    .collect(),
            ),
            OpCommand::Client(EcastCommand::Get { key, .. }) => {
                EcastOutput::Value(op.answers[key].map(|value| value as u64))
            }
            _ => return,
        };
        if let Some(history) = op.history {
            self.finish(index, history, output);
        }
    }

    fn finish(&mut self, index: usize, history: usize, output: EcastOutput) {
        self.history.complete(history, self.event, output);
        self.event += 1;
        let think = self.prng.range_inclusive(0, self.options.think_ticks_max);
        self.gateways[index].idle_until = self.now + think;
    }
}

fn retry_basic(op: &mut Op, abandoned: &mut Vec<u64>, id: u64) {
    op.attempts += 1;
    if op.attempts >= BASIC_ATTEMPTS_MAX {
        abandoned.push(id);
    } else {
        op.phase = Phase::BasicQueued;
    }
}

fn retry_snapshot(op: &mut Op, abandoned: &mut Vec<u64>, id: u64) {
    op.attempts += 1;
    if op.attempts >= SNAPSHOT_ATTEMPTS_MAX {
        abandoned.push(id);
    } else {
        op.phase = Phase::SnapshotNeedsNow;
        op.answers.clear();
        op.snapshot_at = None;
    }
}

fn router_state(options: &EcastOptions, initial: &Configuration) -> RouterState {
    let canary = (options.canary == Some(EcastCanary::StableOnFirstConfirm))
        .then_some(ecast::Canary::StableOnFirstConfirm);
    RouterState::new(
        initial.clone(),
        RouterSettings {
            window_max: options.window_max,
            outcomes_retained: options.window_max * 4,
            canary,
        },
    )
}

fn gateway_index(id: ProcessId, count: usize) -> Option<usize> {
    let index = id.0.checked_sub(GATEWAY_BASE)? as usize;
    (index < count).then_some(index)
}

/// The routing part and payload of an operation (the gateway's plan).
fn plan(
    sender: ProcessId,
    configuration: &Configuration,
    command: &OpCommand,
    keys: &[u64],
    offset: u64,
) -> (Routing, StoragePayload) {
    let points = Target::Points(keys.iter().map(|key| position(*key)).collect());
    match command {
        OpCommand::Client(EcastCommand::Transfer { from, to, amount }) => (
            Routing::Write {
                sender,
                target: points,
            },
            StoragePayload::Transfer {
                from: *from,
                to: *to,
                amount: *amount,
            },
        ),
        OpCommand::Client(EcastCommand::Put { key, value }) => (
            Routing::Write {
                sender,
                target: points,
            },
            StoragePayload::Put {
                key: *key,
                value: *value,
            },
        ),
        OpCommand::Client(EcastCommand::Audit { .. } | EcastCommand::Get { .. }) => (
            Routing::Read {
                sender,
                target: points,
                replica_offset: offset,
            },
            StoragePayload::Read {
                keys: keys.to_vec(),
            },
        ),
        OpCommand::Suspect(process) => (
            Routing::Config {
                sender,
                message: ConfigMessage {
                    based_on: configuration.version(),
                    change: ConfigChange::Membership(MembershipChange::Suspect {
                        process: *process,
                    }),
                },
            },
            StoragePayload::Nothing,
        ),
    }
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
        Payload::BasicAnswer { read_id, value } => format!("basic_answer {read_id} {value:?}"),
        Payload::BasicRefused { read_id, refusal } => {
            format!("basic_refused {read_id}: {refusal}")
        }
    }
}
