//! One Tessera process: the protocol loop that owns the replica, and the tasks around it.
//!
//! The protocol loop is the only owner of the `vr::Replica`. Everything reaches it as an
//! [`Event`] on one channel (peer messages, client requests, ticks, WAL completions, status
//! queries); it steps the replica and executes the effects: messages go to per-peer outboxes,
//! records to the WAL thread, replies to local client connections or, for requests forwarded by
//! another node's gateway, back to that node.

use crate::config::{DurabilityName, NodeConfig};
use crate::log;
use crate::peer::{self, Links, Outbox};
use crate::store::Store;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, Mutex};
use vr::{Durability, DurableState, Effect, Input, Record, Replica, StatusName};
use wire::{ClientId, Message, Nonce, ReplicaIndex, Request};

/// Records for the write-ahead log thread, with their sequence numbers.
type WalSender = std::sync::mpsc::Sender<(u64, Record)>;

/// What the protocol loop reacts to.
pub enum Event {
    Tick,
    Peer {
        from: ReplicaIndex,
        message: Message,
    },
    /// A local connection's request (the gateway is the VR client).
    Submit {
        request: Request,
    },
    ClientOpened {
        client: ClientId,
        replies: mpsc::UnboundedSender<Message>,
    },
    ClientClosed {
        client: ClientId,
    },
    Persisted {
        sequence: u64,
    },
    Status {
        reply: oneshot::Sender<NodeStatus>,
    },
    /// The SQL tables as this replica's state knows them.
    Catalog {
        reply: oneshot::Sender<sql::MemoryCatalog>,
    },
}

/// A snapshot of the replica for INFO and `tessera status`.
#[derive(Clone, Debug)]
pub struct NodeStatus {
    pub replica: u8,
    pub replicas: u8,
    pub view: u64,
    pub status: &'static str,
    pub is_primary: bool,
    pub primary: u8,
    pub op: u64,
    pub commit: u64,
    pub checkpoint: u64,
    pub durability: &'static str,
    pub keys: u64,
    pub stats: vr::ReplicaStats,
}

/// Skyros: how this node's gateway completed nilext writes.
#[derive(Debug, Default)]
pub struct NilextCounters {
    /// In one round trip, on a supermajority of matching acknowledgements.
    pub fast: std::sync::atomic::AtomicU64,
    /// On the slow path, ordered by the primary first.
    pub slow: std::sync::atomic::AtomicU64,
}

/// Handles the gateway uses to talk to the protocol loop.
#[derive(Clone)]
pub struct NodeHandle {
    pub events: mpsc::Sender<Event>,
    pub replica_count: u8,
    pub local: ReplicaIndex,
    /// Skyros: the gateway sends nilext writes to every replica.
    pub skyros: bool,
    /// Skyros-Comm: and other writes too (`NodeConfig::skyros_comm`).
    pub skyros_comm: bool,
    pub nilext: std::sync::Arc<NilextCounters>,
    /// Skyros-Adapt: replica latencies as this node's gateway sees them, and when the mode was
    /// last decided.
    pub adapt: std::sync::Arc<std::sync::Mutex<(vr::Adapt, std::time::Instant)>>,
    /// `DEBUG PEER-DELAY`: microseconds every peer write waits.
    pub peer_delay_micros: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl NodeHandle {
    pub async fn status(&self) -> Option<NodeStatus> {
        let (reply, receive) = oneshot::channel();
        self.events.send(Event::Status { reply }).await.ok()?;
        receive.await.ok()
    }
}

/// Why a node could not start.
#[derive(Debug)]
pub enum NodeError {
    /// A listening socket could not be bound.
    Bind {
        address: std::net::SocketAddr,
        reason: String,
    },
    /// The data directory or the write-ahead log could not be opened.
    Storage { reason: String },
    /// The configuration is invalid.
    Config { reason: String },
}

impl std::fmt::Display for NodeError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NodeError::Bind { address, reason } => {
                write!(formatter, "cannot listen on {address}: {reason}")
            }
            NodeError::Storage { reason } => write!(formatter, "storage: {reason}"),
            NodeError::Config { reason } => write!(formatter, "{reason}"),
        }
    }
}

impl std::error::Error for NodeError {}

/// Starts every task of the node and returns once it is serving. The node runs until the
/// process exits.
pub async fn start(config: NodeConfig) -> Result<NodeHandle, NodeError> {
    let protocol = config
        .protocol_config()
        .map_err(|error| NodeError::Config {
            reason: error.to_string(),
        })?;
    let local = ReplicaIndex(config.replica);
    log::init(format!("r{}", config.replica));
    std::fs::create_dir_all(&config.data_dir).map_err(|error| NodeError::Storage {
        reason: format!("{}: {error}", config.data_dir.display()),
    })?;
    let own = &config.replicas[config.replica as usize];
    let peer_listener = TcpListener::bind(own.peer)
        .await
        .map_err(|error| NodeError::Bind {
            address: own.peer,
            reason: error.to_string(),
        })?;
    let client_listener = TcpListener::bind(own.client)
        .await
        .map_err(|error| NodeError::Bind {
            address: own.client,
            reason: error.to_string(),
        })?;
    let pg_listener = match own.pg {
        None => None,
        Some(address) => {
            Some(
                TcpListener::bind(address)
                    .await
                    .map_err(|error| NodeError::Bind {
                        address,
                        reason: error.to_string(),
                    })?,
            )
        }
    };

    let (events, receiver) = mpsc::channel::<Event>(65_536);
    let (replica, wal) = match config.durability {
        DurabilityName::Memory => (open_memory(&config, protocol)?, None),
        DurabilityName::Disk => {
            let (replica, wal) = open_disk(&config, protocol, events.clone())?;
            (replica, Some(wal))
        }
    };
    log::info(format_args!(
        "replica {local} of {} starting: {:?} in {}, durability {:?}, peers on {}, clients on {}",
        config.replicas.len(),
        replica.status(),
        replica.view(),
        config.durability,
        own.peer,
        own.client
    ));

    // Peer links.
    let peer_delay_micros: std::sync::Arc<std::sync::atomic::AtomicU64> = Default::default();
    let links = Links {
        cluster: config.cluster,
        local,
        frame_bytes_max: config.limits.peer_frame_bytes_max,
        send_delay_micros: peer_delay_micros.clone(),
    };
    let (peer_inbound, mut peer_messages) = mpsc::channel::<(ReplicaIndex, Message)>(65_536);
    let mut outboxes: Vec<Option<Outbox>> = Vec::new();
    let mut senders: Vec<Option<mpsc::Sender<peer::Outgoing>>> = Vec::new();
    for (index, address) in config.replicas.iter().enumerate() {
        if index == config.replica as usize {
            outboxes.push(None);
            senders.push(None);
            continue;
        }
        let (sender, receiver) = mpsc::channel(peer::OUTBOX_MESSAGES_MAX);
        let outbox: Outbox = Arc::new(Mutex::new(receiver));
        if index > config.replica as usize {
            let peer = ReplicaIndex(index as u8);
            tokio::spawn(peer::dial(
                links.clone(),
                peer,
                address.peer,
                outbox.clone(),
                peer_inbound.clone(),
            ));
        }
        outboxes.push(Some(outbox));
        senders.push(Some(sender));
    }
    tokio::spawn(peer::accept(links, peer_listener, outboxes, peer_inbound));
    let forward = events.clone();
    tokio::spawn(async move {
        while let Some((from, message)) = peer_messages.recv().await {
            if forward.send(Event::Peer { from, message }).await.is_err() {
                return;
            }
        }
    });

    // Ticks. Missed ticks are skipped, not bursted: a paused process must not fire every
    // timeout at once when it resumes.
    let ticks = events.clone();
    let tick_ms = config.tick_ms;
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(Duration::from_millis(tick_ms));
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            interval.tick().await;
            if ticks.send(Event::Tick).await.is_err() {
                return;
            }
        }
    });

    let handle = NodeHandle {
        events: events.clone(),
        replica_count: config.replicas.len() as u8,
        local,
        skyros: config.replication == crate::config::ReplicationName::Skyros,
        skyros_comm: config.skyros_comm,
        nilext: Default::default(),
        peer_delay_micros,
        adapt: std::sync::Arc::new(std::sync::Mutex::new((
            vr::Adapt::new(config.replicas.len() as u8),
            std::time::Instant::now(),
        ))),
    };
    let protocol_loop = ProtocolLoop {
        replica,
        senders,
        wal,
        local_clients: HashMap::new(),
        remote_clients: HashMap::new(),
        effects: Vec::new(),
        observed: (u64::MAX, StatusName::Normal, false),
        ticks: 0,
    };
    tokio::spawn(protocol_loop.run(receiver));
    tokio::spawn(crate::gateway::serve(
        client_listener,
        handle.clone(),
        config.resp_limits(),
        config.limits.connection_buffer_bytes_max,
    ));
    if let Some(listener) = pg_listener {
        let backend = crate::sql_backend::NodeBackend::new(handle.clone());
        tokio::spawn(crate::pg::serve(
            listener,
            backend,
            crate::pg::PgLimits::default(),
        ));
    }
    Ok(handle)
}

/// A `memory` replica: fresh on the first start of its data directory, recovering (VRR §4.3)
/// on any later start, since whatever it knew is gone.
fn open_memory(config: &NodeConfig, protocol: vr::Config) -> Result<Replica<Store>, NodeError> {
    let marker = config.data_dir.join("memory-replica-started");
    let restarted = marker.exists();
    std::fs::write(
        &marker,
        b"this replica has run before; on restart it recovers its state from its peers\n",
    )
    .map_err(|error| NodeError::Storage {
        reason: format!("{}: {error}", marker.display()),
    })?;
    let index = ReplicaIndex(config.replica);
    Ok(if restarted {
        let nonce = Nonce(random_u64());
        log::info(format_args!(
            "restarted without durable state: recovering from peers ({nonce})"
        ));
        Replica::recovering(protocol, index, Store::new(), nonce)
    } else {
        Replica::new(protocol, index, Store::new())
    })
}

/// A `disk` replica: replays its write-ahead log, and gets the WAL writer thread.
fn open_disk(
    config: &NodeConfig,
    protocol: vr::Config,
    events: mpsc::Sender<Event>,
) -> Result<(Replica<Store>, WalSender), NodeError> {
    let wal_config = wal::WalConfig {
        directory: config.data_dir.join("wal"),
        segment_bytes_max: 64 << 20,
        record_bytes_max: config.limits.peer_frame_bytes_max,
    };
    let (wal, recovered) = wal::Wal::open(wal_config).map_err(|error| NodeError::Storage {
        reason: error.to_string(),
    })?;
    if recovered.torn_bytes_cut > 0 {
        log::warn(format_args!(
            "cut a torn write-ahead log tail of {} bytes",
            recovered.torn_bytes_cut
        ));
    }
    let durable = DurableState::replay(&recovered.records);
    log::info(format_args!(
        "replayed {} records: view {}, log view {}, checkpoint {}, log up to {}",
        recovered.records.len(),
        durable.view,
        durable.log_view,
        durable.checkpoint_op(),
        durable.journal.op()
    ));
    let replica = Replica::open(
        protocol,
        ReplicaIndex(config.replica),
        Store::new(),
        durable,
    )
    .map_err(|error| NodeError::Storage {
        reason: format!("checkpoint in the write-ahead log: {error}"),
    })?;
    let mut committer = wal::GroupCommitter::new(wal, &recovered.records);
    let (sender, receiver) = std::sync::mpsc::channel::<(u64, Record)>();
    std::thread::Builder::new()
        .name("wal".to_string())
        .spawn(move || {
            while let Ok(first) = receiver.recv() {
                let mut batch = vec![first];
                while let Ok(more) = receiver.try_recv() {
                    batch.push(more);
                }
                match committer.write_batch(&batch) {
                    Ok(sequence) => {
                        if events.blocking_send(Event::Persisted { sequence }).is_err() {
                            return;
                        }
                    }
                    Err(error) => {
                        // Acknowledging without durability would break the protocol's promise.
                        log::error(format_args!("write-ahead log failed, stopping: {error}"));
                        std::process::exit(70);
                    }
                }
            }
        })
        .map_err(|error| NodeError::Storage {
            reason: format!("cannot start the WAL thread: {error}"),
        })?;
    Ok((replica, sender))
}

/// 64 bits from the OS (client ids and recovery nonces must differ across restarts).
pub fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos()),
    );
    hasher.write_u32(std::process::id());
    hasher.finish()
}

struct ProtocolLoop {
    replica: Replica<Store>,
    senders: Vec<Option<mpsc::Sender<peer::Outgoing>>>,
    wal: Option<WalSender>,
    local_clients: HashMap<ClientId, mpsc::UnboundedSender<Message>>,
    /// Clients whose requests another node forwarded here: where their replies go.
    remote_clients: HashMap<ClientId, ReplicaIndex>,
    effects: Vec<Effect>,
    ticks: u64,
    /// (view, status, primary) after the last step: a change is logged.
    observed: (u64, StatusName, bool),
}

const REMOTE_CLIENTS_MAX: usize = 1 << 20;

impl ProtocolLoop {
    async fn run(mut self, mut events: mpsc::Receiver<Event>) {
        while let Some(event) = events.recv().await {
            self.on_event(event);
        }
    }

    fn on_event(&mut self, event: Event) {
        match event {
            Event::Tick => {
                self.step(Input::Tick);
                self.ticks += 1;
                if self.ticks.is_multiple_of(200) {
                    if let Some(responses) = self.replica.recovery_responses() {
                        log::info(format_args!("still recovering; responses so far (replica, view, primary state): {responses:?}"));
                    }
                }
            }
            Event::Persisted { sequence } => self.step(Input::Persisted { sequence }),
            Event::Peer { from, message } => self.on_peer_message(from, message),
            Event::Submit { request } => self.on_submit(request),
            Event::ClientOpened { client, replies } => {
                self.local_clients.insert(client, replies);
            }
            Event::ClientClosed { client } => {
                self.local_clients.remove(&client);
            }
            Event::Status { reply } => {
                let _ = reply.send(self.status());
            }
            Event::Catalog { reply } => {
                let engine = &self.replica.state_machine().engine;
                let _ = reply.send(crate::sql_backend::catalog_of(engine));
            }
        }
    }

    fn on_peer_message(&mut self, from: ReplicaIndex, message: Message) {
        match message {
            // Client traffic forwarded between gateways and primaries.
            Message::Request(request) => {
                if self.remote_clients.len() >= REMOTE_CLIENTS_MAX {
                    self.remote_clients.clear();
                }
                self.remote_clients.insert(request.client, from);
                self.step(Input::Message(Message::Request(request)));
            }
            Message::Reply(reply) => {
                self.deliver_to_local_client(reply.client, Message::Reply(reply))
            }
            Message::NilextAck { client, .. } => self.deliver_to_local_client(client, message),
            Message::NotPrimary {
                view,
                client,
                request,
            } => self.deliver_to_local_client(
                client,
                Message::NotPrimary {
                    view,
                    client,
                    request,
                },
            ),
            protocol => self.step(Input::Message(protocol)),
        }
    }

    /// A local gateway's request: the primary takes it; a backup forwards it to the primary of
    /// its view (the reply comes back through `remote_clients` there).
    fn on_submit(&mut self, request: Request) {
        if matches!(
            request.kind,
            wire::RequestKind::Nilext | wire::RequestKind::Commutative
        ) {
            // Skyros: a nilext write goes to every replica; each acknowledges to the origin.
            for peer in 0..self.replica.config().replica_count {
                if ReplicaIndex(peer) != self.replica.index() {
                    self.send(ReplicaIndex(peer), Message::Request(request.clone()));
                }
            }
            self.step(Input::Message(Message::Request(request)));
            return;
        }
        let backup = self.replica.status() == StatusName::Normal && !self.replica.is_primary();
        if backup {
            let primary = self.replica.primary_of(self.replica.view());
            self.send(primary, Message::Request(request));
        } else {
            self.step(Input::Message(Message::Request(request)));
        }
    }

    fn step(&mut self, input: Input) {
        let mut effects = std::mem::take(&mut self.effects);
        self.replica.step(input, &mut effects);
        for effect in effects.drain(..) {
            match effect {
                Effect::Send { to, message } => self.send(to, message),
                Effect::Reply { client, message } => self.reply(client, message),
                Effect::Persist { sequence, record } => {
                    let wal = self.wal.as_ref().expect("only disk replicas persist");
                    if wal.send((sequence, record)).is_err() {
                        log::error(format_args!("the write-ahead log thread is gone, stopping"));
                        std::process::exit(70);
                    }
                }
            }
        }
        self.effects = effects;
        let now = (
            self.replica.view().0,
            self.replica.status(),
            self.replica.is_primary(),
        );
        if now != self.observed {
            self.observed = now;
            log::info(format_args!(
                "view {} {:?}{}: op {}, commit {}",
                now.0,
                now.1,
                if now.2 { " (primary)" } else { "" },
                self.replica.op(),
                self.replica.commit_min()
            ));
        }
    }

    fn send(&self, to: ReplicaIndex, message: Message) {
        if let Some(Some(sender)) = self.senders.get(to.0 as usize) {
            // A full outbox (peer down or slow) drops the message: the protocol resends.
            let _ = sender.try_send((tokio::time::Instant::now(), message));
        }
    }

    fn reply(&mut self, client: ClientId, message: Message) {
        if self.local_clients.contains_key(&client) {
            self.deliver_to_local_client(client, message);
        } else if let Some(origin) = self.remote_clients.get(&client).copied() {
            self.send(origin, message);
        }
    }

    fn deliver_to_local_client(&mut self, client: ClientId, message: Message) {
        if let Some(replies) = self.local_clients.get(&client) {
            if replies.send(message).is_err() {
                self.local_clients.remove(&client);
            }
        }
    }

    fn status(&self) -> NodeStatus {
        let replica = &self.replica;
        NodeStatus {
            replica: replica.index().0,
            replicas: replica.config().replica_count,
            view: replica.view().0,
            status: match replica.status() {
                StatusName::Normal => "normal",
                StatusName::ViewChange => "view_change",
                StatusName::Recovering => "recovering",
            },
            is_primary: replica.is_primary(),
            primary: replica.primary_of(replica.view()).0,
            op: replica.op().0,
            commit: replica.commit_min().0,
            checkpoint: replica.checkpoint_op().0,
            durability: match replica.config().durability {
                Durability::Memory => "memory",
                Durability::Disk => "disk",
            },
            keys: replica.state_machine().kv.len() as u64,
            stats: replica.stats(),
        }
    }
}
