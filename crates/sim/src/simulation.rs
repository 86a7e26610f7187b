//! One simulated run: a VR group of `store::Store` replicas (the RESP key-value namespace and the
//! SQL engine, as a node runs them), a simulated network and disks, a nemesis, and
//! simulated clients, all driven by one seeded PRNG on one thread.

use crate::checkers::{
    commit_monotonic::CommitMonotonic, committed_prefix::CommittedPrefix, linearizability,
    liveness, one_primary_per_view::OnePrimaryPerView, strict_serializability, Violation,
};
use crate::client::{Client, ClientAction, Outstanding};
use crate::disk::Disk;
use crate::history::{Command, History, Outcome};
use crate::network::{Endpoint, Network, Packet};
use crate::options::Options;
use crate::replicas;
use crate::trace::{summarize, Trace};
use crate::workload;
use stdx::{Fnv64, Prng};
use store::Store;
use vr::{Durability, DurableState, Effect, Input, StateMachine, StatusName};
use wire::{ClientId, Message, Nonce, ReplicaIndex, Request, RequestKind};

/// One simulated process.
struct Node {
    replica: Option<replicas::Member<Store>>,
    disk: Disk,
    paused_until: Option<u64>,
    crashed_until: Option<u64>,
    clock_credit: u64,
    /// The checkpoint being serialised "off the loop" (`Effect::Checkpoint`): due at this
    /// tick; lost if the replica crashes first.
    checkpoint: Option<(u64, vr::Checkpoint, vr::SnapshotSource)>,
}

/// What a run did, for the report line.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub ticks: u64,
    pub operations: usize,
    pub completed: usize,
    pub messages_sent: u64,
    pub messages_dropped: u64,
    pub crashes: u64,
    pub pauses: u64,
    pub partitions: u64,
    pub view_max: u64,
    pub op_max: u64,
    /// Skyros: writes completed in one round trip (nilext, and commutative with a result).
    pub one_round_trip: u64,
    /// SQL commands among `operations` (and among `completed`).
    pub sql_operations: usize,
    pub sql_completed: usize,
    /// SQL commands refused by their catalog guard (`Command::Guarded` with a wrong digest).
    pub sql_stale: usize,
    /// `Message::Part`s sent, and replica messages dropped over the frame limit
    /// (`Options::frame_bytes_max`).
    pub parts_sent: u64,
    pub frames_dropped_oversized: u64,
}

pub struct RunReport {
    pub seed: u64,
    pub trace_hash: u64,
    pub stats: Stats,
    pub result: Result<(), Violation>,
    /// The transcript's last lines (only when tracing was on).
    pub trace: Vec<String>,
}

pub struct Simulation {
    options: Options,
    prng: Prng,
    /// The SQL tables' catalog digest (the workload runs no DDL), for guarded commands.
    catalog_digest: u64,
    now: u64,
    /// Logical event counter: the history's clock.
    event: u64,
    nodes: Vec<Node>,
    network: Network,
    clients: Vec<Client>,
    history: History,
    trace: Trace,
    one_primary: OnePrimaryPerView,
    monotonic: CommitMonotonic,
    committed: CommittedPrefix,
    issuing: bool,
    faults_on: bool,
    stats: Stats,
    effects: Vec<Effect>,
}

impl Simulation {
    pub fn new(options: Options, trace_lines: usize) -> Simulation {
        let replica_count = options.config.replica_count as usize;
        let mut prng = Prng::new(options.seed ^ 0x5eed_5eed_5eed_5eed);
        let nodes = (0..replica_count)
            .map(|index| Node {
                replica: Some(replicas::create(
                    options.config.clone(),
                    ReplicaIndex(index as u8),
                    initial_store(&options),
                )),
                disk: Disk::default(),
                paused_until: None,
                crashed_until: None,
                clock_credit: 0,
                checkpoint: None,
            })
            .collect();
        let clients = (0..options.workload.clients)
            .map(|_| Client::new(ClientId(prng.next_u64())))
            .collect();
        let faults = &options.faults;
        let mut network = Network::new(
            replica_count,
            faults.loss_percent,
            faults.duplicate_percent,
            faults.delay_ticks_max,
        );
        network.frame_bytes_max = options.frame_bytes_max;
        Simulation {
            catalog_digest: initial_store(&options).engine.catalog_digest(),
            prng,
            now: 0,
            event: 0,
            nodes,
            network,
            clients,
            history: History::default(),
            trace: Trace::new(trace_lines),
            one_primary: OnePrimaryPerView::default(),
            monotonic: CommitMonotonic::new(replica_count),
            committed: CommittedPrefix::new(replica_count),
            issuing: true,
            faults_on: true,
            stats: Stats::default(),
            effects: Vec::new(),
            options,
        }
    }

    /// Runs the whole scenario: a safety phase with faults, a liveness phase without, final
    /// reads of every key, then the history check.
    pub fn run(mut self) -> RunReport {
        let result = self.run_phases();
        self.stats.ticks = self.now;
        self.stats.operations = self.history.invocations.len();
        self.stats.completed = self.history.completed();
        let sql = || {
            self.history
                .invocations
                .iter()
                .filter(|invocation| matches!(invocation.command, Command::Sql(_)))
        };
        self.stats.sql_operations = sql().count();
        self.stats.sql_completed = sql()
            .filter(|invocation| invocation.return_time.is_some())
            .count();
        self.stats.sql_stale = sql()
            .filter(|invocation| {
                matches!(
                    &invocation.outcome,
                    Some(Outcome::Sql(engine::Outcome::Error(
                        engine::EngineError::StaleCatalog
                    )))
                )
            })
            .count();
        self.stats.messages_sent = self.network.sent;
        self.stats.messages_dropped = self.network.dropped;
        self.stats.parts_sent = self.network.parts_sent;
        self.stats.frames_dropped_oversized = self.network.dropped_oversized;
        self.stats.op_max = self.committed.op_max().0;
        RunReport {
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
        let healed_at = self.now;
        let bound = self.options.liveness_ticks_max;
        while self.now - healed_at < bound && self.outstanding() > 0 {
            self.tick()?;
        }
        liveness::outstanding_completed(self.outstanding(), self.now - healed_at)?;
        while self.now - healed_at < bound && self.divergence().is_some() {
            self.tick()?;
        }
        liveness::converged(self.divergence(), self.now - healed_at)?;
        self.final_reads()?;
        linearizability::check(&self.history)?;
        strict_serializability::check(&self.history, &initial_store(&self.options).engine)
    }

    fn outstanding(&self) -> usize {
        self.clients
            .iter()
            .filter(|client| client.outstanding.is_some())
            .count()
    }

    /// Stops every fault: heals partitions, stops loss and duplication, resumes paused replicas,
    /// restarts crashed ones, and stops clients from starting new requests.
    fn heal(&mut self) {
        self.faults_on = false;
        self.issuing = false;
        self.network.heal();
        self.network.loss_percent = 0;
        self.network.duplicate_percent = 0;
        for index in 0..self.nodes.len() {
            if self.nodes[index].crashed_until.is_some() {
                self.restart(index);
            }
            self.nodes[index].paused_until = None;
        }
        self.trace.line(|| "heal: faults stop".to_string());
    }

    /// Every key's final value, read through the protocol by one more client per family, so
    /// that a lost write shows up in the history.
    fn final_reads(&mut self) -> Result<(), Violation> {
        let workload = self.options.workload.clone();
        let keys_by_family: Vec<Vec<Vec<u8>>> = (0..workload.families)
            .map(|family| {
                (0..workload.family_size)
                    .map(|member| workload::key(family, member))
                    .collect()
            })
            .collect();
        for keys in keys_by_family {
            let mut client = Client::new(ClientId(self.prng.next_u64()));
            client.view_guess = self
                .nodes
                .iter()
                .filter_map(|node| node.replica.as_ref())
                .map(|replica| replica.view())
                .max()
                .unwrap_or_default();
            client.target = ReplicaIndex((client.view_guess.0 % self.nodes.len() as u64) as u8);
            self.clients.push(client);
            let index = self.clients.len() - 1;
            self.issue(index, Command::Kv(kv::Command::MultiGet { keys }));
        }
        // And every SQL table's final rows.
        let tables = workload.sql.as_ref().map_or(0, |sql| sql.indexes.len());
        for table in 0..tables {
            let mut client = Client::new(ClientId(self.prng.next_u64()));
            client.view_guess = self
                .nodes
                .iter()
                .filter_map(|node| node.replica.as_ref())
                .map(|replica| replica.view())
                .max()
                .unwrap_or_default();
            client.target = ReplicaIndex((client.view_guess.0 % self.nodes.len() as u64) as u8);
            self.clients.push(client);
            let index = self.clients.len() - 1;
            let select = engine::Operation::Select {
                table: workload::table_name(table),
                columns: vec![],
                predicate: None,
                limit: None,
            };
            self.issue(index, Command::Sql(engine::Command::Execute(select)));
        }
        let started = self.now;
        while self.outstanding() > 0 && self.now - started < self.options.liveness_ticks_max {
            self.tick()?;
        }
        liveness::outstanding_completed(self.outstanding(), self.now - started)
    }

    /// None when every replica is up, normal, in one view, has executed every committed op, and
    /// holds the same state; else what differs.
    fn divergence(&self) -> Option<String> {
        let op_max = self.committed.op_max();
        let mut views = Vec::new();
        let mut digests = Vec::new();
        for (index, node) in self.nodes.iter().enumerate() {
            let Some(replica) = &node.replica else {
                return Some(format!("replica {index} is down"));
            };
            if replica.status() != StatusName::Normal {
                return Some(format!(
                    "replica {index} is {:?} in {}",
                    replica.status(),
                    replica.view()
                ));
            }
            if replica.commit_min() < op_max {
                return Some(format!(
                    "replica {index} executed {} of {}",
                    replica.commit_min(),
                    op_max
                ));
            }
            views.push(replica.view());
            digests.push((
                replica.commit_min(),
                Fnv64::digest(&replica.state_machine().snapshot()),
            ));
        }
        if views.windows(2).any(|pair| pair[0] != pair[1]) {
            return Some(format!("views differ: {views:?}"));
        }
        if digests.windows(2).any(|pair| pair[0] != pair[1]) {
            return Some(format!(
                "states differ at equal commit numbers: {digests:?}"
            ));
        }
        None
    }

    // ----- One tick of the world. -----

    fn tick(&mut self) -> Result<(), Violation> {
        self.now += 1;
        if self.faults_on {
            self.nemesis();
        }
        self.wake_up();
        for packet in self.network.due(self.now) {
            self.deliver(packet)?;
        }
        for index in 0..self.nodes.len() {
            self.complete_disk_writes(index)?;
            self.complete_checkpoint(index)?;
            self.deliver_ticks(index)?;
        }
        for index in 0..self.clients.len() {
            self.drive_client(index);
        }
        Ok(())
    }

    fn nemesis(&mut self) {
        let faults = self.options.faults.clone();
        if self.prng.chance(faults.partition_per_10000, 10_000) {
            self.stats.partitions += 1;
            if self.prng.percent(40) {
                self.network.heal();
                self.trace.line(|| "partition healed".to_string());
            } else {
                let description = self.network.partition(&mut self.prng);
                self.trace.line(|| description);
            }
        }
        if self.prng.chance(faults.crash_per_10000, 10_000) {
            let index = self.prng.below(self.nodes.len() as u64) as usize;
            if self.may_crash(index) {
                self.crash(index);
            }
        }
        if self.prng.chance(faults.pause_per_10000, 10_000) {
            let index = self.prng.below(self.nodes.len() as u64) as usize;
            let node = &mut self.nodes[index];
            if node.crashed_until.is_none() && node.paused_until.is_none() {
                node.paused_until = Some(self.now + self.prng.range_inclusive(10, 300));
                self.stats.pauses += 1;
                self.trace.line(|| format!("pause r{index}"));
            }
        }
    }

    /// With memory durability at most f replicas may be down or recovering at once: more
    /// would lose data by definition. With disk durability any number may crash.
    fn may_crash(&self, index: usize) -> bool {
        if self.nodes[index].crashed_until.is_some() {
            return false;
        }
        if self.options.config.durability == Durability::Disk {
            return true;
        }
        let down = self
            .nodes
            .iter()
            .filter(|node| {
                node.crashed_until.is_some()
                    || node
                        .replica
                        .as_ref()
                        .is_some_and(|replica| replica.status() == StatusName::Recovering)
            })
            .count();
        down < self.options.config.replicas_tolerated() as usize
    }

    fn crash(&mut self, index: usize) {
        self.stats.crashes += 1;
        let node = &mut self.nodes[index];
        node.replica = None;
        node.paused_until = None;
        node.checkpoint = None;
        node.crashed_until = Some(self.now + self.prng.range_inclusive(20, 400));
        let torn = node.disk.crash(&mut self.prng);
        self.network
            .drop_to(Endpoint::Replica(ReplicaIndex(index as u8)));
        self.trace
            .line(|| format!("crash r{index} (torn tail: {torn} records)"));
    }

    fn restart(&mut self, index: usize) {
        let config = self.options.config.clone();
        let replica_index = ReplicaIndex(index as u8);
        let replica = match config.durability {
            Durability::Memory => {
                self.monotonic.restart(index, false);
                replicas::recovering(
                    config,
                    replica_index,
                    initial_store(&self.options),
                    Nonce(self.prng.next_u64()),
                )
            }
            Durability::Disk => {
                self.monotonic.restart(index, true);
                let durable = DurableState::replay(&self.nodes[index].disk.durable);
                if std::env::var("SIM_DEBUG_DISK").is_ok() {
                    for record in &self.nodes[index].disk.durable {
                        let text = match record {
                            vr::Record::Entry(entry) => {
                                format!("entry {} {}", entry.op, entry.view)
                            }
                            vr::Record::Checkpoint(checkpoint) => {
                                format!("checkpoint {}", checkpoint.op)
                            }
                            other => format!("{other:?}").chars().take(120).collect(),
                        };
                        println!("  disk r{index}: {text}");
                    }
                }
                replicas::open(config, replica_index, initial_store(&self.options), durable)
                    .expect("the simulated disk holds only snapshots this store wrote")
            }
        };
        self.committed.restart(index);
        let node = &mut self.nodes[index];
        node.replica = Some(replica);
        node.crashed_until = None;
        node.clock_credit = 0;
        self.trace.line(|| format!("restart r{index}"));
    }

    fn wake_up(&mut self) {
        for index in 0..self.nodes.len() {
            if self.nodes[index]
                .crashed_until
                .is_some_and(|until| until <= self.now)
            {
                self.restart(index);
            }
            if self.nodes[index]
                .paused_until
                .is_some_and(|until| until <= self.now)
            {
                self.nodes[index].paused_until = None;
                self.trace.line(|| format!("resume r{index}"));
            }
        }
    }

    fn deliver(&mut self, packet: Packet) -> Result<(), Violation> {
        match packet.to {
            Endpoint::Replica(replica) => {
                let node = &self.nodes[replica.0 as usize];
                if node.replica.is_none() {
                    return Ok(()); // Dead process: the message is lost.
                }
                if node.paused_until.is_some() {
                    self.network.hold(self.now, packet);
                    return Ok(());
                }
                self.trace.line(|| {
                    format!(
                        "t={} {:?} -> r{}: {}",
                        self.now,
                        packet.from,
                        replica.0,
                        summarize(&packet.message)
                    )
                });
                self.step(replica.0 as usize, Input::Message(packet.message))
            }
            Endpoint::Client(client) => self.deliver_to_client(client, packet.message),
        }
    }

    fn complete_disk_writes(&mut self, index: usize) -> Result<(), Violation> {
        let node = &mut self.nodes[index];
        if node.replica.is_none() || node.paused_until.is_some() {
            return Ok(());
        }
        match node.disk.complete(self.now) {
            Some(sequence) => self.step(index, Input::Persisted { sequence }),
            None => Ok(()),
        }
    }

    /// Serialises a due checkpoint (from the copy taken when it was asked for, as the
    /// runtime's other thread does) and reports it; a paused replica waits for it.
    fn complete_checkpoint(&mut self, index: usize) -> Result<(), Violation> {
        let node = &mut self.nodes[index];
        if node.replica.is_none() || node.paused_until.is_some() {
            return Ok(());
        }
        if !matches!(&node.checkpoint, Some((due, _, _)) if *due <= self.now) {
            return Ok(());
        }
        let (_, mut checkpoint, source) = node.checkpoint.take().expect("due");
        checkpoint.state = source.serialise();
        self.step(index, Input::Checkpointed(checkpoint))
    }

    /// Clock skew: a replica with rate r% gets r ticks per 100 global ticks.
    fn deliver_ticks(&mut self, index: usize) -> Result<(), Violation> {
        let rate = self.options.faults.clock_rate_percent[index];
        let node = &mut self.nodes[index];
        if node.replica.is_none() || node.paused_until.is_some() {
            return Ok(());
        }
        node.clock_credit += rate;
        while self.nodes[index].clock_credit >= 100 {
            self.nodes[index].clock_credit -= 100;
            self.step(index, Input::Tick)?;
        }
        Ok(())
    }

    /// Steps one replica, executes its effects, and runs the per-step checkers.
    fn step(&mut self, index: usize, input: Input) -> Result<(), Violation> {
        let input_kind = match &input {
            Input::Tick => 0,
            Input::Message(message) => 1 + message.name().len() as u64,
            Input::Persisted { sequence } => 100 + sequence,
            Input::Checkpointed(checkpoint) => 200 + checkpoint.op.0,
        };
        self.trace.hash(&[self.now, index as u64, input_kind]);
        let mut effects = std::mem::take(&mut self.effects);
        let node = &mut self.nodes[index];
        let replica = node
            .replica
            .as_mut()
            .expect("only live replicas are stepped");
        replica.step(input, &mut effects);
        let from = Endpoint::Replica(ReplicaIndex(index as u8));
        for effect in effects.drain(..) {
            match effect {
                Effect::Send { to, message } => {
                    self.network.send(
                        &mut self.prng,
                        self.now,
                        Packet {
                            from,
                            to: Endpoint::Replica(to),
                            message,
                        },
                    );
                }
                Effect::Reply { client, message } => {
                    self.network.send(
                        &mut self.prng,
                        self.now,
                        Packet {
                            from,
                            to: Endpoint::Client(client),
                            message,
                        },
                    );
                }
                Effect::Persist { sequence, record } => {
                    let latency = self
                        .prng
                        .range_inclusive(1, self.options.faults.disk_ticks_max);
                    self.nodes[index]
                        .disk
                        .write(self.now, latency, sequence, record);
                }
                Effect::Checkpoint { checkpoint, source } => {
                    // Serialised later (a few disk latencies): ops keep committing meanwhile.
                    let delay = self
                        .prng
                        .range_inclusive(1, 4 * self.options.faults.disk_ticks_max);
                    let due = self.now + delay;
                    self.nodes[index].checkpoint = Some((due, checkpoint, source));
                }
            }
        }
        self.effects = effects;
        self.observe(index)
    }

    fn observe(&mut self, index: usize) -> Result<(), Violation> {
        let replica = self.nodes[index]
            .replica
            .as_ref()
            .expect("observed after a step");
        self.stats.view_max = self.stats.view_max.max(replica.view().0);
        self.one_primary
            .observe(replica.index(), replica.view(), replica.is_primary())?;
        self.monotonic.observe(
            index,
            replica.commit_min(),
            replica.commit_max(),
            replica.view(),
            replica.view_persisted(),
        )?;
        self.committed
            .observe(index, replica.commit_min(), |op| replica.entry(op))
    }

    // ----- Clients. -----

    fn drive_client(&mut self, index: usize) {
        let replica_count = self.options.config.replica_count;
        let retry_ticks = self.options.workload.retry_ticks;
        let client = &mut self.clients[index];
        match &client.outstanding {
            Some(outstanding) if self.now - outstanding.sent_at >= retry_ticks => {
                client.rotate_target(replica_count);
                self.send_outstanding(index);
            }
            Some(_) => {}
            None if self.issuing && self.now >= client.idle_until => {
                client.writes += 1;
                let unique = format!("{}-{}", client.id.0 % 100_000, client.writes);
                let workload = &self.options.workload;
                // (A KV-only seed draws exactly what it drew before SQL existed.)
                let sql = match &workload.sql {
                    Some(sql) => self.prng.percent(sql.percent).then_some(sql.indexes.len()),
                    None => None,
                };
                let command = match sql {
                    Some(tables) => {
                        let command = workload::next_sql_command(&mut self.prng, tables);
                        Command::Sql(workload::maybe_guard(
                            &mut self.prng,
                            command,
                            self.catalog_digest,
                        ))
                    }
                    None => Command::Kv(workload::next_command(
                        &mut self.prng,
                        workload.families,
                        workload.family_size,
                        unique,
                    )),
                };
                self.issue(index, command);
            }
            None => {}
        }
    }

    fn issue(&mut self, index: usize, command: Command) {
        self.event += 1;
        let client = &mut self.clients[index];
        let skyros = self.options.config.protocol == vr::Protocol::Skyros;
        let comm = skyros && self.options.workload.skyros_comm;
        let nilext_outcome = match &command {
            Command::Kv(command) => command.nilext_outcome(),
            Command::Sql(_) => None,
        };
        let (kind, nilext) = if command.is_read() {
            (RequestKind::Read, None)
        } else if matches!(command, Command::Sql(_)) {
            // Engine writes are ordinary writes under either protocol: Skyros's nilext and
            // commutative paths are RESP-only (the store gives SQL no preview and one key).
            (RequestKind::Write, None)
        } else if let (true, Some(outcome)) = (skyros, nilext_outcome) {
            let quorum = vr::NilextQuorum::new();
            (RequestKind::Nilext, Some((Some(outcome.encode()), quorum)))
        } else if comm {
            let quorum = vr::NilextQuorum::commutative();
            (RequestKind::Commutative, Some((None, quorum)))
        } else {
            (RequestKind::Write, None)
        };
        let request = Request {
            client: client.id,
            request: client.request_next,
            kind,
            operation: command.operation(),
        };
        client.request_next = wire::RequestNumber(client.request_next.0 + 1);
        let history_index = self
            .history
            .begin(client.id, request.request, command, self.event);
        client.outstanding = Some(Outstanding {
            request,
            history_index,
            sent_at: self.now,
            nilext,
            rounds: 0,
        });
        self.send_outstanding(index);
    }

    fn send_outstanding(&mut self, index: usize) {
        let client = &mut self.clients[index];
        let outstanding = client.outstanding.as_mut().expect("a request to send");
        outstanding.sent_at = self.now;
        let to_all = matches!(
            outstanding.request.kind,
            RequestKind::Nilext | RequestKind::Commutative
        );
        let targets: Vec<ReplicaIndex> = if to_all {
            (0..self.options.config.replica_count)
                .map(ReplicaIndex)
                .collect()
        } else {
            vec![client.target]
        };
        for target in targets {
            let packet = Packet {
                from: Endpoint::Client(client.id),
                to: Endpoint::Replica(target),
                message: Message::Request(outstanding.request.clone()),
            };
            self.network.send(&mut self.prng, self.now, packet);
        }
    }

    fn deliver_to_client(
        &mut self,
        client_id: ClientId,
        message: Message,
    ) -> Result<(), Violation> {
        let Some(index) = self
            .clients
            .iter()
            .position(|client| client.id == client_id)
        else {
            return Ok(());
        };
        let replica_count = self.options.config.replica_count;
        match self.clients[index].on_message(message, replica_count) {
            ClientAction::Nothing => {}
            ClientAction::Resend => self.send_outstanding(index),
            ClientAction::Completed {
                history_index,
                request,
                result,
                executed,
            } => {
                self.event += 1;
                let outcome = self.history.invocations[history_index]
                    .command
                    .decode_outcome(&result);
                self.trace.hash(&[self.event, history_index as u64]);
                self.trace.hash_bytes(&result);
                self.trace.line(|| {
                    format!(
                        "t={} client {} got {:?} for {}",
                        self.now, client_id, outcome, request.request
                    )
                });
                self.history.end(history_index, outcome, self.event);
                if !executed {
                    self.stats.one_round_trip += 1;
                }
                let think = self
                    .prng
                    .range_inclusive(0, self.options.workload.think_ticks_max);
                self.clients[index].idle_until = self.now + think;
                if request.kind == RequestKind::Write && executed {
                    // Checked when the client learns of it: the write must be committed. (A
                    // nilext write completes before it is ordered: only the history and the
                    // final reads judge it.)
                    self.committed
                        .acknowledged(request.client, request.request)?;
                }
            }
        }
        Ok(())
    }
}

/// The store a replica starts from (and restarts from): empty, or on a SQL seed holding the
/// seed's tables, created identically on every replica before any operation.
fn initial_store(options: &Options) -> Store {
    match &options.workload.sql {
        Some(sql) => workload::initial_store(&sql.indexes),
        None => Store::new(),
    }
}
