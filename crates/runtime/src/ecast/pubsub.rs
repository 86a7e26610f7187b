//! Pub/sub across storage processes (`docs/internals/redis.md`, "Pub/sub").
//!
//! Every storage process's gateway keeps a `Hub` of the channels and patterns its own clients
//! subscribed to. PUBLISH at any gateway delivers to its own subscribers and sends one
//! `Frame::Publish` to every other storage process over the E-Cast peer links (authenticated
//! like every peer frame); each delivers to its subscribers and answers `Frame::Published`
//! with how many received it. PUBLISH replies the sum once every process answered, or after
//! `PUBLISH_WAIT_MS` with the answers it has. Messages are not replicated or ordered through
//! the log: as in Redis, a message reaches the subscribers connected when it arrives, at most
//! once, and is lost for a process that is down.

use super::config::ClusterConfig;
use super::link::{Frame, Links};
use placement::ProcessId;
use resp::Value;
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How long PUBLISH waits for the other processes' receiver counts.
const PUBLISH_WAIT_MS: u64 = 200;

/// The PUBLISH id keyspace notifications are sent under: never a waiting PUBLISH's (those
/// count from 1).
const NOTIFICATION_ID: u64 = 0;

/// Sends the keyspace notifications of the writes a gateway coordinates
/// (`docs/internals/redis.md`, "Keyspace notifications"): derived from each write's planned
/// command and outcome (`resp::notify`), filtered by the cluster's `notify-keyspace-events` as
/// the hub knows it, published through the hub to every storage process's subscribers.
#[derive(Clone)]
pub(super) struct Notifier {
    pub(super) hub: Arc<Hub>,
    /// The gateway's job queue, for the one read of the cluster's flags (below).
    pub(super) jobs: tokio::sync::mpsc::Sender<super::gateway::Job>,
}

impl Notifier {
    /// Publishes the events `command` sent with `outcome` (nothing for a read or an error),
    /// and remembers the expiry it set, if any, for the reclaimer.
    pub(super) fn notify(&self, command: &kv::Command, outcome: &kv::Outcome) {
        if !command.is_read() && !self.hub.configured.swap(true, Ordering::Relaxed) {
            // The first write this gateway coordinates: read the cluster's flags once (a
            // process started after a CONFIG SET missed its `Frame::NotifyFlags`); this write
            // notifies by what the hub has now, and a failed read is tried at the next write.
            let (jobs, hub) = (self.jobs.clone(), self.hub.clone());
            tokio::spawn(async move {
                if !super::reclaim::read_notify_flags(&jobs, &hub).await {
                    hub.configured.store(false, Ordering::Relaxed);
                }
            });
        }
        if !matches!(outcome, kv::Outcome::Error(_)) {
            if let Some(at_ms) = expiry_set(command) {
                self.hub.note_expiry(at_ms);
            }
        }
        let flags = self.hub.notify_flags();
        if flags == 0 {
            return;
        }
        for event in resp::notify::events(command, outcome) {
            self.publish(flags, &event);
        }
    }

    /// Publishes one event (the reclaimer's `expired`) if its class is on.
    pub(super) fn notify_event(&self, event: &resp::notify::Event) {
        let flags = self.hub.notify_flags();
        if flags != 0 {
            self.publish(flags, event);
        }
    }

    fn publish(&self, flags: i64, event: &resp::notify::Event) {
        for (channel, message) in resp::notify::messages(flags, event) {
            self.hub.publish_event(&channel, &message);
        }
    }
}

/// The absolute expiry time (unix milliseconds) a write gives its key, if it gives one.
fn expiry_set(command: &kv::Command) -> Option<u64> {
    use kv::{Command, ExpireTime, TtlChange};
    let (now_ms, command) = match command {
        Command::At { now_ms, command } => (*now_ms, command.as_ref()),
        command => (0, command),
    };
    let at = match command {
        Command::SetExpiring {
            ttl: TtlChange::Set(at),
            ..
        }
        | Command::GetExpire {
            change: TtlChange::Set(at),
            ..
        }
        | Command::Expire { at, .. }
        | Command::Restore { ttl: Some(at), .. } => *at,
        _ => return None,
    };
    Some(match at {
        ExpireTime::AtMs(ms) => u64::try_from(ms).unwrap_or(0),
        ExpireTime::AfterMs(ms) => now_ms.saturating_add(u64::try_from(ms).unwrap_or(0)),
    })
}

/// A push message to one connection (`message`, `pmessage`…: its elements).
pub(super) type Push = Vec<Value>;

/// One gateway's subscribers and its PUBLISHes waiting for counts.
pub(crate) struct Hub {
    storage: ProcessId,
    /// Every other storage process's peer address.
    peers: Vec<SocketAddr>,
    links: Links,
    state: Mutex<HubState>,
    next_id: AtomicU64,
    /// The cluster's `notify-keyspace-events` as this gateway knows it: set by its own CONFIG
    /// SET and GET, by `Frame::NotifyFlags` from another gateway's CONFIG SET, and read once
    /// at start by the reclaimer; read by every write.
    notify_flags: std::sync::atomic::AtomicI64,
    /// The latest expiry time (unix milliseconds) of a write this gateway coordinated: its
    /// reclaimer runs until then (`reclaim`).
    expiries_until_ms: AtomicU64,
    /// Whether `notify_flags` was read from the cluster (or is being read) since the process
    /// started: done once, at the first write this gateway coordinates (`Notifier::notify`).
    configured: std::sync::atomic::AtomicBool,
    /// Interactive SQL transactions that ended, here or at another storage process's gateway
    /// (`Frame::TransactionsEnded`): wakes this process's statements that wait for their
    /// locks (`cluster::transaction_driver::Hint`). A hint, not a decision: the partitions' replicated state decides
    /// every lock, and a waiter that misses a wake-up polls as before.
    ended: tokio::sync::broadcast::Sender<u64>,
}

/// How many ended transactions a waiter may fall behind before it is woken to look again.
const ENDED_BUFFER: usize = 1024;

#[derive(Default)]
struct HubState {
    /// Channel → connection id → its push sender.
    channels: BTreeMap<Vec<u8>, BTreeMap<u64, mpsc::UnboundedSender<Push>>>,
    /// Pattern → connection id → its push sender.
    patterns: BTreeMap<Vec<u8>, BTreeMap<u64, mpsc::UnboundedSender<Push>>>,
    /// PUBLISHes of this gateway waiting for other processes' counts, by id.
    waiting: HashMap<u64, Waiting>,
}

struct Waiting {
    /// Processes that have not answered.
    remaining: usize,
    receivers: u64,
    done: Option<oneshot::Sender<u64>>,
}

fn bulk(bytes: &[u8]) -> Value {
    Value::Bulk(bytes.to_vec())
}

impl Hub {
    pub(crate) fn new(config: &ClusterConfig, storage: ProcessId, links: Links) -> Hub {
        Hub {
            storage,
            peers: config
                .storage
                .iter()
                .filter(|other| other.id != storage.0)
                .map(|other| other.address)
                .collect(),
            links,
            state: Mutex::default(),
            next_id: AtomicU64::new(1),
            notify_flags: std::sync::atomic::AtomicI64::new(0),
            expiries_until_ms: AtomicU64::new(0),
            configured: std::sync::atomic::AtomicBool::new(false),
            ended: tokio::sync::broadcast::channel(ENDED_BUFFER).0,
        }
    }

    /// A transaction this gateway ended (its end message was answered): wakes the waiters
    /// here and at every other storage process.
    pub(crate) fn transaction_ended(&self, id: u64) {
        let _ = self.ended.send(id);
        for peer in &self.peers {
            let frame = Frame::TransactionsEnded { ids: vec![id] };
            self.links.send(*peer, frame);
        }
    }

    /// `Frame::TransactionsEnded` from another process's gateway.
    pub(crate) fn on_transactions_ended(&self, ids: &[u64]) {
        for id in ids {
            let _ = self.ended.send(*id);
        }
    }

    /// The transactions that end from now on (`transaction_ended`), for one waiter.
    pub(crate) fn ended_receiver(&self) -> tokio::sync::broadcast::Receiver<u64> {
        self.ended.subscribe()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HubState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Delivers to this gateway's subscribers; how many received it (a connection subscribed
    /// to the channel and to matching patterns receives it once per subscription, as in
    /// Redis).
    pub(crate) fn deliver(&self, channel: &[u8], message: &[u8]) -> u64 {
        let state = self.lock();
        let mut receivers = 0;
        if let Some(subscribers) = state.channels.get(channel) {
            for sender in subscribers.values() {
                let push = vec![bulk(b"message"), bulk(channel), bulk(message)];
                receivers += u64::from(sender.send(push).is_ok());
            }
        }
        for (pattern, subscribers) in &state.patterns {
            if !resp::glob_match(pattern, channel) {
                continue;
            }
            for sender in subscribers.values() {
                let push = vec![
                    bulk(b"pmessage"),
                    bulk(pattern),
                    bulk(channel),
                    bulk(message),
                ];
                receivers += u64::from(sender.send(push).is_ok());
            }
        }
        receivers
    }

    /// PUBLISH: every process's subscribers; how many received it (the processes that
    /// answered within `PUBLISH_WAIT_MS`).
    pub(super) async fn publish(&self, channel: &[u8], message: &[u8]) -> u64 {
        let local = self.deliver(channel, message);
        if self.peers.is_empty() {
            return local;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (done, receiver) = oneshot::channel();
        self.lock().waiting.insert(
            id,
            Waiting {
                remaining: self.peers.len(),
                receivers: local,
                done: Some(done),
            },
        );
        for peer in &self.peers {
            let frame = Frame::Publish {
                from: self.storage,
                id,
                channel: channel.to_vec(),
                message: message.to_vec(),
            };
            self.links.send(*peer, frame);
        }
        let waited = tokio::time::timeout(Duration::from_millis(PUBLISH_WAIT_MS), receiver).await;
        let waiting = self.lock().waiting.remove(&id);
        match waited {
            Ok(Ok(receivers)) => receivers,
            _ => waiting.map_or(local, |waiting| waiting.receivers),
        }
    }

    /// `notify-keyspace-events`'s classes (`resp::notify` flags).
    pub(super) fn notify_flags(&self) -> i64 {
        self.notify_flags.load(Ordering::Relaxed)
    }

    pub(super) fn set_notify_flags(&self, flags: i64) {
        self.notify_flags.store(flags, Ordering::Relaxed);
    }

    /// After this gateway's CONFIG SET of `notify-keyspace-events`: the flags here and at every
    /// other storage process's gateway (a process that is down learns them when it starts).
    pub(super) fn broadcast_notify_flags(&self, flags: i64) {
        self.set_notify_flags(flags);
        for peer in &self.peers {
            self.links.send(*peer, Frame::NotifyFlags { flags });
        }
    }

    /// Remembers that a write coordinated here gave a key an expiry at `at_ms`.
    pub(super) fn note_expiry(&self, at_ms: u64) {
        self.expiries_until_ms.fetch_max(at_ms, Ordering::Relaxed);
    }

    /// The latest expiry time of a write coordinated here (0: none).
    pub(super) fn expiries_until_ms(&self) -> u64 {
        self.expiries_until_ms.load(Ordering::Relaxed)
    }

    /// A keyspace notification: delivered here and sent to every other process, without
    /// waiting for their counts (nobody asked for them). Its id, 0, is never a waiting
    /// PUBLISH's, so the counts that come back are dropped (`on_published`).
    pub(super) fn publish_event(&self, channel: &[u8], message: &[u8]) {
        self.deliver(channel, message);
        for peer in &self.peers {
            let frame = Frame::Publish {
                from: self.storage,
                id: NOTIFICATION_ID,
                channel: channel.to_vec(),
                message: message.to_vec(),
            };
            self.links.send(*peer, frame);
        }
    }

    /// `Frame::Publish` from another process: delivered here, and counted back to it.
    pub(super) fn on_publish(
        &self,
        config: &ClusterConfig,
        from: ProcessId,
        id: u64,
        channel: &[u8],
        message: &[u8],
    ) {
        let receivers = self.deliver(channel, message);
        if let Some(publisher) = config.storage(from) {
            let frame = Frame::Published {
                from: self.storage,
                id,
                receivers,
            };
            self.links.send(publisher.address, frame);
        }
    }

    /// `Frame::Published`: one process's count for one of this gateway's PUBLISHes.
    pub(super) fn on_published(&self, id: u64, receivers: u64) {
        let mut state = self.lock();
        if id == NOTIFICATION_ID {
            return; // A keyspace notification's count: nobody waits for it.
        }
        let Some(waiting) = state.waiting.get_mut(&id) else {
            return; // Answered after the wait: PUBLISH already replied.
        };
        waiting.receivers += receivers;
        waiting.remaining = waiting.remaining.saturating_sub(1);
        if waiting.remaining == 0 {
            if let Some(done) = waiting.done.take() {
                let _ = done.send(waiting.receivers);
            }
        }
    }

    fn subscribe(
        &self,
        pattern: bool,
        name: &[u8],
        connection: u64,
        sender: &mpsc::UnboundedSender<Push>,
    ) {
        let mut state = self.lock();
        let table = if pattern {
            &mut state.patterns
        } else {
            &mut state.channels
        };
        table
            .entry(name.to_vec())
            .or_default()
            .insert(connection, sender.clone());
    }

    fn unsubscribe(&self, pattern: bool, name: &[u8], connection: u64) {
        let mut state = self.lock();
        let table = if pattern {
            &mut state.patterns
        } else {
            &mut state.channels
        };
        if let Some(subscribers) = table.get_mut(name) {
            subscribers.remove(&connection);
            if subscribers.is_empty() {
                table.remove(name);
            }
        }
    }

    /// PUBSUB CHANNELS, NUMSUB, NUMPAT, HELP (this process's subscribers, as a Redis Cluster
    /// node answers for its own).
    pub(super) fn pubsub(&self, arguments: &[Vec<u8>]) -> Value {
        let Some(subcommand) = arguments.get(1) else {
            return Value::Error("ERR wrong number of arguments for 'pubsub' command".into());
        };
        let state = self.lock();
        match (subcommand.to_ascii_lowercase().as_slice(), arguments.len()) {
            (b"channels", 2 | 3) => Value::Array(
                state
                    .channels
                    .keys()
                    .filter(|channel| {
                        arguments
                            .get(2)
                            .is_none_or(|pattern| resp::glob_match(pattern, channel))
                    })
                    .map(|channel| bulk(channel))
                    .collect(),
            ),
            (b"numsub", _) => Value::Array(
                arguments[2..]
                    .iter()
                    .flat_map(|channel| {
                        let count = state.channels.get(channel).map_or(0, BTreeMap::len);
                        [bulk(channel), Value::Integer(count as i64)]
                    })
                    .collect(),
            ),
            // Distinct patterns, however many connections subscribed to each (as Redis).
            (b"numpat", 2) => Value::Integer(state.patterns.len() as i64),
            (b"channels" | b"numpat", _) => Value::Error(format!(
                "ERR wrong number of arguments for 'pubsub|{}' command",
                String::from_utf8_lossy(subcommand).to_ascii_lowercase()
            )),
            _ => Value::Error(format!(
                "ERR unknown subcommand '{}'. Try PUBSUB HELP.",
                String::from_utf8_lossy(subcommand)
            )),
        }
    }
}

/// One connection's subscriptions.
pub(super) struct Subscriptions {
    connection: u64,
    channels: Vec<Vec<u8>>,
    patterns: Vec<Vec<u8>>,
    sender: mpsc::UnboundedSender<Push>,
    /// Messages for this connection, written between its replies.
    pub(super) receiver: mpsc::UnboundedReceiver<Push>,
}

/// What a pub/sub command answers: pushes (one per channel or pattern) or one reply.
pub(super) enum PubSubAnswer {
    Pushes(Vec<Push>),
    Reply(Value),
}

const SUBSCRIBED_ONLY: &str =
    "only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context";

impl Subscriptions {
    pub(super) fn new() -> Subscriptions {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let (sender, receiver) = mpsc::unbounded_channel();
        Subscriptions {
            connection: NEXT.fetch_add(1, Ordering::Relaxed),
            channels: Vec::new(),
            patterns: Vec::new(),
            sender,
            receiver,
        }
    }

    /// Whether the connection subscribed to anything (RESP2: subscribed mode).
    pub(super) fn active(&self) -> bool {
        !self.channels.is_empty() || !self.patterns.is_empty()
    }

    /// How many channels and patterns the connection subscribed to.
    pub(super) fn counts(&self) -> (usize, usize) {
        (self.channels.len(), self.patterns.len())
    }

    fn count(&self) -> i64 {
        (self.channels.len() + self.patterns.len()) as i64
    }

    /// The pub/sub commands, and the subscribed mode's refusals (RESP2); `None` for any other
    /// command, which runs as usual.
    pub(super) async fn on_command(
        &mut self,
        hub: &Hub,
        arguments: &[Vec<u8>],
        protocol: u8,
    ) -> Option<PubSubAnswer> {
        let name = arguments[0].to_ascii_lowercase();
        let wrong_arity = || {
            PubSubAnswer::Reply(Value::Error(format!(
                "ERR wrong number of arguments for '{}' command",
                String::from_utf8_lossy(&name)
            )))
        };
        match name.as_slice() {
            b"subscribe" | b"psubscribe" => {
                if arguments.len() < 2 {
                    return Some(wrong_arity());
                }
                Some(self.subscribe(hub, name == b"psubscribe", &arguments[1..]))
            }
            b"unsubscribe" | b"punsubscribe" => {
                Some(self.unsubscribe(hub, name == b"punsubscribe", &arguments[1..]))
            }
            b"publish" if protocol == 2 && self.active() => Some(refuse(&name)),
            b"publish" => Some(match arguments {
                [_, channel, message] => {
                    PubSubAnswer::Reply(Value::Integer(hub.publish(channel, message).await as i64))
                }
                _ => wrong_arity(),
            }),
            b"pubsub" if protocol == 2 && self.active() => Some(refuse(&name)),
            b"pubsub" => Some(PubSubAnswer::Reply(hub.pubsub(arguments))),
            b"ping" if protocol == 2 && self.active() => Some(match arguments {
                [_] => PubSubAnswer::Reply(Value::Array(vec![bulk(b"pong"), bulk(b"")])),
                [_, message] => {
                    PubSubAnswer::Reply(Value::Array(vec![bulk(b"pong"), bulk(message)]))
                }
                _ => wrong_arity(),
            }),
            b"quit" | b"reset" => None,
            _ if protocol == 2 && self.active() => Some(refuse(&name)),
            _ => None,
        }
    }

    fn subscribe(&mut self, hub: &Hub, pattern: bool, names: &[Vec<u8>]) -> PubSubAnswer {
        let kind: &[u8] = if pattern { b"psubscribe" } else { b"subscribe" };
        let mut pushes = Vec::with_capacity(names.len());
        for name in names {
            let list = if pattern {
                &mut self.patterns
            } else {
                &mut self.channels
            };
            if !list.contains(name) {
                list.push(name.clone());
                hub.subscribe(pattern, name, self.connection, &self.sender);
            }
            pushes.push(vec![bulk(kind), bulk(name), Value::Integer(self.count())]);
        }
        PubSubAnswer::Pushes(pushes)
    }

    fn unsubscribe(&mut self, hub: &Hub, pattern: bool, names: &[Vec<u8>]) -> PubSubAnswer {
        let kind: &[u8] = if pattern {
            b"punsubscribe"
        } else {
            b"unsubscribe"
        };
        let names: Vec<Vec<u8>> = if names.is_empty() {
            if pattern {
                self.patterns.clone()
            } else {
                self.channels.clone()
            }
        } else {
            names.to_vec()
        };
        if names.is_empty() {
            return PubSubAnswer::Pushes(vec![vec![
                bulk(kind),
                Value::Null,
                Value::Integer(self.count()),
            ]]);
        }
        let mut pushes = Vec::with_capacity(names.len());
        for name in names {
            let list = if pattern {
                &mut self.patterns
            } else {
                &mut self.channels
            };
            if let Some(position) = list.iter().position(|known| *known == name) {
                list.remove(position);
                hub.unsubscribe(pattern, &name, self.connection);
            }
            pushes.push(vec![bulk(kind), bulk(&name), Value::Integer(self.count())]);
        }
        PubSubAnswer::Pushes(pushes)
    }

    /// Leaves every channel and pattern (the connection closed).
    pub(super) fn leave(&mut self, hub: &Hub) {
        for channel in std::mem::take(&mut self.channels) {
            hub.unsubscribe(false, &channel, self.connection);
        }
        for pattern in std::mem::take(&mut self.patterns) {
            hub.unsubscribe(true, &pattern, self.connection);
        }
    }
}

fn refuse(name: &[u8]) -> PubSubAnswer {
    PubSubAnswer::Reply(Value::Error(format!(
        "ERR Can't execute '{}': {SUBSCRIBED_ONLY}",
        String::from_utf8_lossy(name)
    )))
}

/// A push as RESP: `>n` in RESP3, an array in RESP2.
pub(super) fn encode_push(items: &[Value], protocol: u8, out: &mut Vec<u8>) {
    let marker = if protocol == 3 { '>' } else { '*' };
    out.extend_from_slice(format!("{marker}{}\r\n", items.len()).as_bytes());
    for item in items {
        crate::resp_codec::encode_reply(item, protocol, out);
    }
}
