//! A router process: one `vr::Replica<ecast::RouterState>` (diskless: the router log is
//! durable on a majority), and, while it is the primary of a normal view, the `ecast::Forwarder`
//! beside it and a failure detector for storage processes. One task owns all three; frames and
//! ticks reach it on one channel. It does what the simulator's world does for a router
//! (`crates/sim/src/ecast/world.rs`): step, route effects to TCP links, follow primaryship.

use super::checkpoint::{self, Checkpoints};
use super::config::{ClusterConfig, ClusterDurability, PartitionMode};
use super::durable::WalExecutor;
use super::fault::SlowPartition;
use super::link::{self, Frame, Links};
use super::stats;
use super::storage_of;
use crate::log;
use crate::os::random_u64;
use ecast::{
    Forwarder, ForwarderEffect, ForwarderInput, ForwarderSettings, OperationResult, RouterSettings,
    RouterState, Sender, SenderSettings, WatermarkInput, WatermarkReporter, WatermarkSettings,
};
use placement::ecast::Message as Routing;
use placement::supervisor::{GatewayWatch, LinkEvidence, Proposal, Supervisor, SupervisorSettings};
use placement::{ConfigChange, MembershipChange, ProcessId};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use vr::{
    ClientId, Effect, Input, Message, Nonce, Replica, ReplicaIndex, Request, RequestKind,
    RequestNumber, StatusName, View,
};

/// The failure detector looks this often (in ticks).
const DETECT_EVERY_TICKS: u64 = 20;
/// A storage process the lead router's link never reached is suspected only after this long
/// at least (it may still be starting on a loaded machine), whatever `suspect_after_ms`.
const SUSPECT_UNREACHED_MS_MIN: u64 = 1_500;
/// Clients whose reply address is remembered at most.
const CLIENTS_MAX: usize = 1 << 16;

enum Event {
    Tick,
    Frame(Frame),
    /// Disk durability: the log holds everything up to this sequence.
    Persisted(u64),
    /// A checkpoint serialised off the loop (`checkpoint`).
    Checkpointed(vr::Checkpoint),
}

/// Where a VR client's replies go: a gateway lives in a storage process; `tessera admin` (or
/// a storage process declaring itself failed) listens on an address of its own and gets each
/// reply over a one-shot connection.
#[derive(Clone, Copy, Debug)]
enum ReplyTo {
    Storage(ProcessId),
    Address(SocketAddr),
    /// A sender outside the cluster that listens for frames (`Frame::SenderRequest`).
    Link(SocketAddr),
}

/// Starts the router process `index` of `config`; returns once it listens.
pub async fn start(config: ClusterConfig, index: u8) -> Result<(), String> {
    let own = config
        .routers
        .get(index as usize)
        .ok_or_else(|| format!("there is no router {index}"))?
        .address;
    log::init(format!("router{index}"));
    crate::security::authenticate_peers(&config.security, &config.data_dir)?;
    let directory = config.data_dir.join(format!("router-{index}"));
    std::fs::create_dir_all(&directory)
        .map_err(|error| format!("{}: {error}", directory.display()))?;
    let listener = TcpListener::bind(own)
        .await
        .map_err(|error| format!("cannot listen on {own}: {error}"))?;
    // Diskless: a restarted router has forgotten everything and recovers from its peers
    // (VRR §4.3), as a `memory` node does; with disk durability it reopens its log.
    let marker = directory.join("router-started");
    let restarted = marker.exists();
    std::fs::write(
        &marker,
        b"this router has run before; it recovers on restart\n",
    )
    .map_err(|error| format!("{}: {error}", marker.display()))?;
    let protocol = config.router_protocol();
    let state = if config.regrouped() {
        RouterState::grouped(config.initial_configuration(), RouterSettings::default())
    } else {
        // Storage processes with inboxes learn every configuration change at once (each
        // basic read must match their version exactly); partition groups need not.
        // Test canary (debug builds only): `TESSERA_CANARY_NO_ANNOUNCEMENTS` routes a
        // configuration message only to the processes it concerns, as before deviation 12.
        let canary =
            cfg!(debug_assertions) && std::env::var_os("TESSERA_CANARY_NO_ANNOUNCEMENTS").is_some();
        let settings = RouterSettings {
            announce_configurations: config.partitions == PartitionMode::Sequenced && !canary,
            ..RouterSettings::default()
        };
        RouterState::new(config.router_configuration(), settings)
    };
    let (completions_sender, completions) = mpsc::unbounded_channel();
    let (replica, wal) = if config.durability == ClusterDurability::Disk {
        // Disk: the router's promises are in its log; it reopens them rather than recover.
        let wal = WalExecutor::start(completions_sender)?;
        let log = directory.join("wal");
        let (durable, committer) = super::durable::open(&log, super::durable::RECORD_BYTES_MAX)?;
        let replica = Replica::open(protocol, ReplicaIndex(index), state, durable)
            .map_err(|error| format!("{}: {error:?}", log.display()))?;
        wal.register(0, committer);
        (replica, Some(wal))
    } else if restarted {
        let nonce = Nonce(random_u64());
        (
            Replica::recovering(protocol, ReplicaIndex(index), state, nonce),
            None,
        )
    } else {
        (Replica::new(protocol, ReplicaIndex(index), state), None)
    };
    log::info(format_args!(
        "router {index} of {} starting ({}) on {own}",
        config.routers.len(),
        match (&wal, restarted) {
            (Some(_), true) => "from its write-ahead log",
            (Some(_), false) => "fresh, with a write-ahead log",
            (None, true) => "recovering",
            (None, false) => "fresh",
        }
    ));
    // Frames come straight from the connections' reader tasks to the router's task (no
    // forwarding task in between: one wakeup per burst, not two per frame).
    let (frames, receiver) = mpsc::channel::<Frame>(65_536);
    tokio::spawn(link::accept(listener, frames));
    let tick_ms = config.tick_ms;
    let links = Links::new();
    let metrics = match config.routers[index as usize].metrics {
        Some(address) => match super::metrics::bind(address) {
            Ok(listener) => {
                let metrics = Arc::new(super::metrics::ProcessMetrics::default());
                let registry = Arc::new(metrics.registry("router"));
                tokio::spawn(super::metrics::serve(listener, registry));
                Some(metrics)
            }
            // Not fatal: the router serves without (as a storage process does).
            Err(reason) => {
                log::warn(format_args!("no metrics: {reason}"));
                None
            }
        },
        None => None,
    };
    let (checkpoints, checkpointed) = Checkpoints::new();
    let router = RouterLoop {
        checkpoints,
        index: ReplicaIndex(index),
        config,
        replica,
        slow: SlowPartition::from_environment(&links),
        links,
        clients: HashMap::new(),
        outside_senders: HashMap::new(),
        lead: None,
        ticks: 0,
        observed: (u64::MAX, StatusName::Normal, false),
        wal,
        metrics,
    };
    tokio::spawn(router.run(receiver, completions, checkpointed, tick_ms));
    Ok(())
}

/// What runs beside the replica while it is the primary of `view`.
struct Lead {
    view: View,
    forwarder: Forwarder,
    detector: Detector,
    /// `vr` partitions: the stable watermark's reporter (rules H and A).
    watermark: Option<WatermarkReporter>,
}

/// The super process at the lead router: the pure policy (`placement::supervisor`) decides
/// what to suspect and whom to replace from the links' connection state; this submits its
/// configuration messages as an E-Cast sender of its own, into its own replica.
struct Detector {
    client: ClientId,
    sender: Sender,
    request_next: RequestNumber,
    /// The policy (`placement::supervisor`, pure): what to suspect and whom to replace.
    supervisor: Supervisor,
    /// Grouped partitions (`vr`, `skyros`): whose gateways to take for dead
    /// (`placement::supervisor::GatewayWatch`, pure).
    gateways: GatewayWatch,
    /// Each suspicion's sequence number: a refused or lost one is submitted again.
    suspicions: BTreeMap<ecast::Sequence, ProcessId>,
}

struct RouterLoop {
    /// Serialises the replica's checkpoints off this loop.
    checkpoints: Checkpoints,
    index: ReplicaIndex,
    config: ClusterConfig,
    replica: Replica<RouterState>,
    links: Links,
    /// A test's fault: deliveries to one partition leave late (`fault`).
    slow: Option<SlowPartition>,
    /// VR clients: where each one's replies go.
    clients: HashMap<ClientId, ReplyTo>,
    /// Senders outside the storage processes: where their `Stable` notifications go.
    outside_senders: HashMap<ProcessId, SocketAddr>,
    lead: Option<Lead>,
    ticks: u64,
    observed: (u64, StatusName, bool),
    /// Disk durability: the writer of the replica's log (log id 0).
    wal: Option<WalExecutor>,
    /// The metrics endpoint's sources, when the cluster file gives this router one.
    metrics: Option<Arc<super::metrics::ProcessMetrics>>,
}

impl RouterLoop {
    async fn run(
        mut self,
        mut frames: mpsc::Receiver<Frame>,
        mut completions: mpsc::UnboundedReceiver<(u64, u64)>,
        mut checkpointed: mpsc::UnboundedReceiver<checkpoint::Done>,
        tick_ms: u64,
    ) {
        let mut interval = tokio::time::interval(Duration::from_millis(tick_ms));
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        stats::start();
        let mut last_tick = Instant::now();
        loop {
            let event = tokio::select! {
                biased;
                _ = interval.tick() => Event::Tick,
                frame = frames.recv() => match frame {
                    Some(frame) => Event::Frame(frame),
                    None => return,
                },
                Some((_, sequence)) = completions.recv() => Event::Persisted(sequence),
                Some(done) = checkpointed.recv() => Event::Checkpointed(done.checkpoint),
            };
            let started = Instant::now();
            let mut handled = 0;
            match event {
                Event::Tick => {
                    stats::TICK_GAP_MAX_MS
                        .max(started.duration_since(last_tick).as_millis() as u64);
                    last_tick = started;
                    self.on_tick();
                }
                Event::Persisted(sequence) => self.step(Input::Persisted { sequence }),
                Event::Checkpointed(checkpoint) => self.step(Input::Checkpointed(checkpoint)),
                Event::Frame(frame) => {
                    self.on_frame(frame);
                    handled += 1;
                    // Everything already queued, before waiting again.
                    while let Ok(frame) = frames.try_recv() {
                        self.on_frame(frame);
                        handled += 1;
                    }
                }
            }
            stats::TURNS.add(1);
            stats::TURN_FRAMES_MAX.max(handled);
            stats::TURN_MAX_US.max(started.elapsed().as_micros() as u64);
        }
    }

    fn on_tick(&mut self) {
        self.ticks += 1;
        if let Some(metrics) = &self.metrics {
            let replica = &self.replica;
            metrics.publish_replicas(vec![super::metrics::ReplicaReport {
                group: "router".to_string(),
                replica: self.index.0,
                view: replica.view().0,
                op: replica.op().0,
                commit: replica.commit_max().0,
                primary: replica.is_primary(),
                normal: replica.status() == StatusName::Normal,
                cycles: None,
            }]);
        }
        self.step(Input::Tick);
        if let Some(lead) = &mut self.lead {
            lead.detector.sender.tick();
        }
        let before = self.lead.as_ref().map(|lead| lead.forwarder.stats());
        self.forwarder_input(ForwarderInput::Tick);
        if let (Some(before), Some(lead)) = (before, &self.lead) {
            let after = lead.forwarder.stats();
            stats::FORWARDER_RESENDS.add(after.resent.saturating_sub(before.resent));
            stats::CONFIRM_RESENDS
                .add(after.confirms_resent.saturating_sub(before.confirms_resent));
        }
        self.report_watermark(WatermarkInput::Tick);
        if self.ticks.is_multiple_of(DETECT_EVERY_TICKS) {
            self.detect();
        }
    }

    fn on_frame(&mut self, frame: Frame) {
        match frame {
            Frame::Vr { from, message } => {
                if from == self.index || from.0 as usize >= self.config.routers.len() {
                    log::warn(format_args!(
                        "dropped a VR frame from unknown router {from}"
                    ));
                    return;
                }
                self.step(Input::Message(message));
            }
            Frame::Request { reply_to, request } => {
                if self.clients.len() >= CLIENTS_MAX {
                    self.clients.clear();
                }
                self.clients
                    .insert(request.client, ReplyTo::Storage(reply_to));
                self.step(Input::Message(Message::Request(request)));
            }
            Frame::AdminRequest { reply_to, request } => {
                if self.clients.len() >= CLIENTS_MAX {
                    self.clients.clear();
                }
                self.clients
                    .insert(request.client, ReplyTo::Address(reply_to));
                self.step(Input::Message(Message::Request(request)));
            }
            Frame::SenderRequest {
                reply_to,
                sender,
                request,
            } => {
                if self.clients.len() >= CLIENTS_MAX {
                    self.clients.clear();
                }
                if self.outside_senders.len() >= CLIENTS_MAX {
                    self.outside_senders.clear();
                }
                self.clients.insert(request.client, ReplyTo::Link(reply_to));
                self.outside_senders.insert(sender, reply_to);
                self.step(Input::Message(Message::Request(request)));
            }
            Frame::Confirm { process, delivered } => {
                self.forwarder_input(ForwarderInput::Confirmed { process, delivered })
            }
            Frame::SnapshotRead { read } => {
                self.forwarder_input(ForwarderInput::SnapshotRead(read))
            }
            _ => log::warn(format_args!(
                "a router dropped a frame meant for another role"
            )),
        }
    }

    /// Steps the replica with `input` and then with every request the forwarder or the
    /// failure detector submits in consequence.
    fn step(&mut self, input: Input) {
        let mut queue = VecDeque::from([input]);
        while let Some(input) = queue.pop_front() {
            let mut effects = Vec::new();
            self.replica.step(input, &mut effects);
            let mut forwarder_effects = Vec::new();
            for effect in effects {
                match effect {
                    Effect::Send { to, message } => self.send_router(to, message),
                    Effect::Reply { client, message } => {
                        self.on_reply(client, message, &mut forwarder_effects, &mut queue)
                    }
                    Effect::Persist { sequence, record } => match &self.wal {
                        Some(wal) => wal.persist(0, sequence, record),
                        None => log::warn(format_args!("a diskless router asked to persist")),
                    },
                    Effect::Checkpoint { checkpoint, source } => {
                        self.checkpoints.start(0, checkpoint, source);
                    }
                }
            }
            self.follow_primaryship(&mut forwarder_effects);
            for request in self.execute_forwarder_effects(forwarder_effects) {
                queue.push_back(Input::Message(Message::Request(request)));
            }
        }
        self.report_watermark(WatermarkInput::Sync);
        self.log_changes();
        stats::REQUESTS_IGNORED_FULL.set(self.replica.stats().requests_ignored_full);
    }

    /// `vr` partitions: the lead router tells every storage process the stable watermark
    /// when it advances and every `resend_ticks` (each process passes it to the primaries it
    /// hosts and to its gateway).
    fn report_watermark(&mut self, input: WatermarkInput) {
        let Some(lead) = &mut self.lead else {
            return;
        };
        let Some(reporter) = &mut lead.watermark else {
            return;
        };
        let Some(watermark) = reporter.step(input, self.replica.state_machine()) else {
            return;
        };
        for storage in &self.config.storage {
            self.links
                .send(storage.address, Frame::Watermark { watermark });
        }
    }

    fn on_reply(
        &mut self,
        client: ClientId,
        message: Message,
        forwarder_effects: &mut Vec<ForwarderEffect>,
        queue: &mut VecDeque<Input>,
    ) {
        if let Some(lead) = &mut self.lead {
            let state = self.replica.state_machine();
            if lead.forwarder.client() == client {
                if let Message::Reply(reply) = message {
                    lead.forwarder.step(
                        ForwarderInput::Reply {
                            request: reply.request,
                            result: reply.result,
                        },
                        state,
                        forwarder_effects,
                    );
                }
                return;
            }
            if lead.detector.client == client {
                if let Message::Reply(reply) = message {
                    let result = OperationResult::decode(&reply.result);
                    let mut events = Vec::new();
                    lead.detector.sender.on_result(&result, &mut events);
                    for event in events {
                        log::info(format_args!("failure detector: {event:?}"));
                        lead.detector.on_event(&event);
                    }
                    if let Some(request) = lead.detector.next_request() {
                        queue.push_back(Input::Message(Message::Request(request)));
                    }
                }
                return;
            }
        }
        match self.clients.get(&client).copied() {
            Some(ReplyTo::Storage(process)) => self.send_storage(process, Frame::Reply { message }),
            Some(ReplyTo::Address(address)) => link::send_once(address, Frame::Reply { message }),
            Some(ReplyTo::Link(address)) => self.links.send(address, Frame::Reply { message }),
            None => {}
        }
    }

    /// The forwarder and the detector follow the replica: created when it becomes primary of a
    /// normal view (with fresh client ids), dropped when it stops being one; synced after
    /// every step.
    fn follow_primaryship(&mut self, forwarder_effects: &mut Vec<ForwarderEffect>) {
        let replica = &self.replica;
        let primary = replica.status() == StatusName::Normal && replica.is_primary();
        if !primary {
            if self.lead.take().is_some() {
                log::info(format_args!("stopped forwarding"));
            }
            return;
        }
        let view = replica.view();
        let state = replica.state_machine();
        if self.lead.as_ref().is_none_or(|lead| lead.view != view) {
            let settings = ForwarderSettings {
                resend_ticks: 40,
                deliveries_per_message_max: 64,
            };
            let detector_id = super::gateway_sender(ProcessId(0), random_u64());
            self.lead = Some(Lead {
                view,
                forwarder: Forwarder::new(ClientId(random_u64()), settings, state),
                detector: Detector {
                    client: ClientId(random_u64()),
                    sender: Sender::new(detector_id.process_id(), SenderSettings::default()),
                    request_next: RequestNumber(1),
                    supervisor: Supervisor::new(self.supervisor_settings()),
                    gateways: GatewayWatch::default(),
                    suspicions: BTreeMap::new(),
                },
                watermark: self.config.partitions.grouped().then(|| {
                    // Every 100 ms again (reports are lost on the way).
                    let resend_ticks = (100 / self.config.tick_ms).max(1);
                    WatermarkReporter::new(WatermarkSettings { resend_ticks })
                }),
            });
            log::info(format_args!(
                "forwarding in view {} from timestamp {}",
                view.0,
                state.timestamp_last()
            ));
        }
        let lead = self.lead.as_mut().expect("set above");
        lead.forwarder
            .step(ForwarderInput::Sync, state, forwarder_effects);
    }

    fn forwarder_input(&mut self, input: ForwarderInput) {
        let Some(lead) = &mut self.lead else {
            return; // Not the primary: the gateway or storage process tries again.
        };
        let mut effects = Vec::new();
        lead.forwarder
            .step(input, self.replica.state_machine(), &mut effects);
        for request in self.execute_forwarder_effects(effects) {
            self.step(Input::Message(Message::Request(request)));
        }
    }

    /// Sends the forwarder's messages; returns its requests for this replica.
    fn execute_forwarder_effects(&mut self, effects: Vec<ForwarderEffect>) -> Vec<Request> {
        let mut requests = Vec::new();
        // Stable notifications go out batched per sender (one `Stables` frame each), after
        // the rest, in the order the forwarder reported them.
        let mut stable: BTreeMap<ProcessId, Vec<(ecast::Sequence, ecast::Timestamp)>> =
            BTreeMap::new();
        for effect in effects {
            match effect {
                ForwarderEffect::Deliver { to, deliveries } => self.deliver(to, deliveries),
                ForwarderEffect::Stable {
                    to,
                    sequence,
                    timestamp,
                } => stable.entry(to).or_default().push((sequence, timestamp)),
                ForwarderEffect::Submit(request) => requests.push(request),
                ForwarderEffect::DeliverSnapshot { to, delivery } => {
                    self.send_storage(to, Frame::SnapshotDeliver { delivery })
                }
                ForwarderEffect::SnapshotStamped { .. } => {}
                ForwarderEffect::SnapshotRefused {
                    to,
                    read_id,
                    refusal,
                } => {
                    if let Some(process) = storage_of(to) {
                        let frame = Frame::SnapshotRefused {
                            sender: to,
                            read_id,
                            refusal,
                        };
                        self.send_storage(process, frame);
                    }
                }
            }
        }
        for (sender, stable) in stable {
            let frame = Frame::Stables { sender, stable };
            if let Some(process) = storage_of(sender) {
                self.send_storage(process, frame);
            } else if let Some(address) = self.outside_senders.get(&sender) {
                self.links.send(*address, frame);
            }
        }
        requests
    }

    /// The failure detector and replacement policy's settings, in this process's ticks.
    fn supervisor_settings(&self) -> SupervisorSettings {
        let ticks = |ms: u64| (ms / self.config.tick_ms).max(1);
        let suspect_after_ticks = ticks(self.config.suspect_after_ms);
        SupervisorSettings {
            suspect_after_ticks,
            unreached_after_ticks: ticks(SUSPECT_UNREACHED_MS_MIN).max(suspect_after_ticks),
        }
    }

    /// The lead router runs the super process's policy (`placement::supervisor`): it suspects
    /// every live storage process its link has not reached for `suspect_after_ms` (Crescando/RB
    /// §5.3: a suspected process stops being a destination, so messages routed to it can
    /// become stable), then replaces a suspected ring member by a standby (§6.1, §7.8). The
    /// evidence is the links' connection state: on loopback a dead process refuses
    /// connections at once, and a live one, however loaded, is accepted by its kernel.
    fn detect(&mut self) {
        let Some(lead) = &mut self.lead else {
            return;
        };
        if self.config.partitions.grouped() {
            // A `vr` partition is a group: VR's view change handles a crashed member, and the
            // routers' destinations (partitions) are never suspected. A storage process's
            // gateway is: its transactions are aborted at every group.
            self.detect_gateways();
            return;
        }
        let configuration = self.replica.state_machine().configuration();
        let (links, config, tick_ms) = (&self.links, &self.config, self.config.tick_ms);
        let evidence = |process: ProcessId| match config.storage(process) {
            Some(storage) => LinkEvidence {
                ever_connected: links.ever_connected(storage.address),
                down_ticks: links
                    .down_for(storage.address)
                    .map(|down| down.as_millis() as u64 / tick_ms),
            },
            None => LinkEvidence::default(),
        };
        for proposal in lead.detector.supervisor.decide(configuration, &evidence) {
            let detector = &mut lead.detector;
            let (message, what) = match proposal {
                Proposal::Suspect {
                    process,
                    message,
                    down_ticks,
                } => (
                    message,
                    format!(
                        "storage process {} unreachable for {} ms: suspecting it",
                        process.0,
                        down_ticks * tick_ms
                    ),
                ),
                Proposal::Replace {
                    replaced,
                    standby,
                    message,
                } => (
                    message,
                    format!(
                        "replacing suspected storage process {} by standby {} (configuration {})",
                        replaced.0,
                        standby.0,
                        configuration.version().0
                    ),
                ),
                Proposal::ReplaceRefused {
                    replaced,
                    standby,
                    refusal,
                } => {
                    log::warn(format_args!(
                        "cannot replace suspected storage process {} by {}: {refusal}",
                        replaced.0, standby.0
                    ));
                    continue;
                }
            };
            let suspected = match &message.change {
                ConfigChange::Membership(MembershipChange::Suspect { process }) => Some(*process),
                _ => None,
            };
            let routing = Routing::Config {
                sender: detector.sender.id(),
                message,
            };
            match detector
                .sender
                .submit(configuration.version(), routing, Vec::new())
            {
                Ok(_) => {
                    log::warn(format_args!("{what}"));
                    if let Some(process) = suspected {
                        detector
                            .supervisor
                            .submitted(process, configuration.version());
                    }
                }
                Err(error) => log::warn(format_args!("cannot submit ({what}): {error:?}")),
            }
        }
        if let Some(request) = self
            .lead
            .as_mut()
            .and_then(|lead| lead.detector.next_request())
        {
            self.step(Input::Message(Message::Request(request)));
        }
    }

    /// Grouped partitions: a storage process unreachable for the supervisor's suspicion time
    /// (`suspect_after_ticks`; only one the link reached before: one never reached ran no
    /// gateway this router knows of) is taken for dead with its gateway, Sprint's edge server:
    /// one E-Cast message to every partition group (`cluster::payload::suspicion_payload`)
    /// aborts, at its point of the order, every interactive transaction the process owns
    /// (`docs/internals/sprint.md`, "A gateway whose storage process dies"). Once per
    /// process until its link connects again (a restarted process's gateway is new); a refused
    /// or lost message is submitted again. A false suspicion (a live process the link cannot reach) aborts its
    /// transactions, which is safe: their later statements meet tombstones (40001).
    fn detect_gateways(&mut self) {
        if canary_no_gateway_suspicion() {
            return;
        }
        let settings = self.supervisor_settings();
        let version = self.replica.state_machine().configuration().version();
        let Some(lead) = &mut self.lead else {
            return;
        };
        let (links, tick_ms) = (&self.links, self.config.tick_ms);
        let evidence = self.config.storage.iter().map(|storage| {
            let link = LinkEvidence {
                ever_connected: links.ever_connected(storage.address),
                down_ticks: links
                    .down_for(storage.address)
                    .map(|down| down.as_millis() as u64 / tick_ms),
            };
            (ProcessId(storage.id), link)
        });
        let proposals = lead.detector.gateways.decide(&settings, evidence);
        for (process, down_ticks) in proposals {
            let detector = &mut lead.detector;
            let routing = Routing::Write {
                sender: detector.sender.id(),
                target: placement::ecast::Target::Range(placement::PositionSet::whole()),
            };
            // Its gateway's incarnations up to the time its link went down are dead: they are
            // start times (`sql::fresh_incarnation`), and one that crashed before any
            // partition adopted it may still have a table lock on its way.
            let down_us = down_ticks * tick_ms * 1_000;
            let through = (crate::os::unix_now_us().max(0) as u64).saturating_sub(down_us);
            let payload = cluster::payload::suspicion_payload(process, through);
            match detector.sender.submit(version, routing, payload) {
                Ok(sequence) => {
                    log::warn(format_args!(
                        "storage process {} unreachable for {} ms: aborting the transactions of \
                         its gateway",
                        process.0,
                        down_ticks * tick_ms
                    ));
                    detector.gateways.submitted(process);
                    detector.suspicions.insert(sequence, process);
                }
                Err(error) => log::warn(format_args!(
                    "cannot submit the suspicion of storage process {}'s gateway: {error:?}",
                    process.0
                )),
            }
        }
        let request = lead.detector.next_request();
        if let Some(request) = request {
            self.step(Input::Message(Message::Request(request)));
        }
    }

    /// A delivery to destination `to`: a storage process (`sequenced`), or a partition whose
    /// primary logs it through VR (`vr`: sent to every member, the primary is not known here).
    fn deliver(&self, to: ProcessId, deliveries: Vec<ecast::Delivery>) {
        let router = self.index;
        if self.config.partitions == PartitionMode::Sequenced {
            self.send_storage(to, Frame::Deliver { router, deliveries });
            return;
        }
        if self.replica.state_machine().grouping().is_some() {
            self.deliver_to_group(to, deliveries);
            return;
        }
        let Some(group) = self.config.partition_group(to) else {
            return;
        };
        for member in group.members {
            let frame = Frame::PartitionDeliver {
                partition: to,
                router,
                deliveries: deliveries.clone(),
            };
            match (&self.slow, self.storage_address(member)) {
                (Some(slow), Some(address)) => {
                    if let Some(frame) = slow.delay(to, address, frame) {
                        self.links.send(address, frame);
                    }
                }
                _ => self.send_storage(member, frame),
            }
        }
    }

    /// Grouped routers (`vr` above replication 1): a delivery to group `to` goes to the
    /// members the router state names for it (a retired group's while messages to it are
    /// unstable, a started group's from the version its first message makes), with the
    /// group's description and, for each accepted keyspace message delivered, the groups
    /// before and after it (`Frame::GroupDeliver`).
    fn deliver_to_group(&self, to: ProcessId, deliveries: Vec<ecast::Delivery>) {
        let router = self.index;
        let state = self.replica.state_machine();
        let Some(group) = state.group(to).cloned() else {
            log::warn(format_args!(
                "no group {:#x} in the kept configurations: its deliveries are dropped",
                to.0
            ));
            return;
        };
        let groupings = keyspace_groupings(state, &deliveries);
        for member in group.members.clone() {
            let frame = Frame::GroupDeliver {
                group: group.clone(),
                router,
                deliveries: deliveries.clone(),
                groupings: groupings.clone(),
            };
            match (&self.slow, self.storage_address(member)) {
                (Some(slow), Some(address)) => {
                    if let Some(frame) = slow.delay(to, address, frame) {
                        self.links.send(address, frame);
                    }
                }
                _ => self.send_storage(member, frame),
            }
        }
    }

    fn send_router(&self, to: ReplicaIndex, message: Message) {
        if let Some(router) = self.config.routers.get(to.0 as usize) {
            let from = self.index;
            self.links.send(router.address, Frame::Vr { from, message });
        }
    }

    fn send_storage(&self, process: ProcessId, frame: Frame) {
        if let Some(address) = self.storage_address(process) {
            self.links.send(address, frame);
        }
    }

    fn storage_address(&self, process: ProcessId) -> Option<SocketAddr> {
        self.config.storage(process).map(|storage| storage.address)
    }

    fn log_changes(&mut self) {
        let now = (
            self.replica.view().0,
            self.replica.status(),
            self.replica.is_primary(),
        );
        if now != self.observed {
            self.observed = now;
            let state = self.replica.state_machine();
            log::info(format_args!(
                "view {} {:?}{}: timestamp {}, configuration {}, {} unstable",
                now.0,
                now.1,
                if now.2 { " (primary)" } else { "" },
                state.timestamp_last(),
                state.configuration().version().0,
                state.unstable().len()
            ));
        }
    }
}

/// The groups of the versions around every accepted keyspace message in `deliveries`: the
/// version it makes (`Delivery::version`) and the one before it (the newest kept below it:
/// the message's own `routed_under`, kept while the message is unstable). Each version once,
/// in version order.
fn keyspace_groupings(
    state: &RouterState,
    deliveries: &[ecast::Delivery],
) -> Vec<placement::Groups> {
    let configurations = state.configurations();
    let mut versions = BTreeSet::new();
    for delivery in deliveries {
        let keyspace = matches!(
            &delivery.envelope.routing,
            Routing::Config { message, .. } if matches!(message.change, ConfigChange::Keyspace(_))
        );
        if !keyspace {
            continue;
        }
        versions.insert(delivery.version);
        if let Some((before, _)) = configurations.range(..delivery.version).next_back() {
            versions.insert(*before);
        }
    }
    versions
        .into_iter()
        .filter_map(|version| configurations.get(&version))
        .filter_map(|entry| entry.grouping.as_ref())
        .map(|grouping| grouping.groups.clone())
        .collect()
}

/// Hidden, test-only (debug builds, `TESSERA_CANARY_NO_GATEWAY_SUSPICION`): grouped routers
/// never suspect a storage process's gateway, so a dead gateway's transactions keep their locks
/// until a waiter judges them abandoned (`sql_transactions.rs` catches it).
fn canary_no_gateway_suspicion() -> bool {
    static CANARY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *CANARY.get_or_init(|| {
        cfg!(debug_assertions) && std::env::var_os("TESSERA_CANARY_NO_GATEWAY_SUSPICION").is_some()
    })
}

impl Detector {
    /// A gateway's suspicion that was refused (planned against a configuration that moved
    /// on) or lost is submitted again at the next detection.
    fn on_event(&mut self, event: &ecast::SenderEvent) {
        match event {
            ecast::SenderEvent::Refused { sequence, .. }
            | ecast::SenderEvent::Lost { sequence, .. } => {
                if let Some(process) = self.suspicions.remove(sequence) {
                    self.gateways.failed(process);
                }
            }
            ecast::SenderEvent::Stable { sequence, .. } => {
                self.suspicions.remove(sequence);
            }
            ecast::SenderEvent::Sequenced { .. } => {}
        }
    }

    /// The next Submit for the detector's window, as a request to this replica.
    fn next_request(&mut self) -> Option<Request> {
        let operation = self.sender.batch()?;
        let request = Request {
            client: self.client,
            request: self.request_next,
            kind: RequestKind::Write,
            operation: operation.encode(),
        };
        self.request_next = RequestNumber(self.request_next.0 + 1);
        Some(request)
    }
}
