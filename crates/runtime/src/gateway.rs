//! The RESP front end: every connection is a VR client (its own client id and request numbers).
//! Commands are planned by the pure `resp` crate; store operations are submitted to the local
//! protocol loop, which hands them to the primary (forwarding from a backup), and retried with
//! the same request number until a reply comes, so a retry never executes twice.

use crate::log;
use crate::node::{random_u64, Event, NodeHandle, NodeStatus};
use crate::resp_codec::{encode_reply, parse_request, Limits};
use kv::{Command, Outcome};
use resp::{Plan, ServerInfo, Value};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use wire::{ClientId, Message, Request, RequestKind, RequestNumber};

/// A request is resent this often while unanswered.
const RETRY_AFTER: Duration = Duration::from_millis(100);
/// After a NotPrimary, wait this long before resending (a view change is under way).
const NOT_PRIMARY_BACKOFF: Duration = Duration::from_millis(20);
/// Consecutive pipelined store commands sent as one operation at most.
const PIPELINE_COMMANDS_MAX: usize = 1024;
/// Skyros: unanswered rounds of a nilext write before it takes the slow path.
const NILEXT_ROUNDS_MAX: u32 = 2;
/// Skyros-Adapt re-decides its mode at most this often (the paper: every 10 s).
const ADAPT_DECIDE_EVERY: Duration = Duration::from_millis(200);
/// A command gives up after this long without any primary answering.
const GIVE_UP_AFTER: Duration = Duration::from_secs(10);

pub async fn serve(
    listener: TcpListener,
    node: NodeHandle,
    limits: Limits,
    buffer_bytes_max: usize,
) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                log::warn(format_args!("accepting a client failed: {error}"));
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (node, limits) = (node.clone(), limits.clone());
        tokio::spawn(async move {
            let client = ClientId(random_u64());
            let (replies, receiver) = mpsc::unbounded_channel();
            if node
                .events
                .send(Event::ClientOpened { client, replies })
                .await
                .is_err()
            {
                return;
            }
            let mut connection = Connection {
                node: node.clone(),
                client,
                request_next: RequestNumber(1),
                protocol: 2,
                name: None,
                replies: receiver,
            };
            connection.run(stream, &limits, buffer_bytes_max).await;
            let _ = node.events.send(Event::ClientClosed { client }).await;
        });
    }
}

struct Connection {
    node: NodeHandle,
    client: ClientId,
    request_next: RequestNumber,
    /// RESP protocol version, 2 or 3 (HELLO switches it).
    protocol: u8,
    name: Option<Vec<u8>>,
    replies: mpsc::UnboundedReceiver<Message>,
}

enum Next {
    Continue,
    Close,
}

impl Connection {
    async fn run(&mut self, mut stream: TcpStream, limits: &Limits, buffer_bytes_max: usize) {
        let mut input: Vec<u8> = Vec::with_capacity(16 * 1024);
        let mut output: Vec<u8> = Vec::with_capacity(16 * 1024);
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            let read = match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(read) => read,
            };
            input.extend_from_slice(&chunk[..read]);
            if input.len() > buffer_bytes_max {
                output.extend_from_slice(
                    b"-ERR Protocol error: request buffer over the connection limit\r\n",
                );
                let _ = stream.write_all(&output).await;
                return;
            }
            // Every complete command in the buffer is one pipeline, answered in order.
            let mut consumed_total = 0;
            let mut commands = Vec::new();
            let mut malformed = None;
            loop {
                match parse_request(&input[consumed_total..], limits) {
                    Ok(None) => break,
                    Ok(Some((arguments, consumed))) => {
                        consumed_total += consumed;
                        if !arguments.is_empty() {
                            commands.push(arguments);
                        }
                    }
                    Err(error) => {
                        malformed = Some(error);
                        break;
                    }
                }
            }
            input.drain(..consumed_total);
            let mut close = matches!(self.on_commands(commands, &mut output).await, Next::Close);
            if let Some(error) = malformed {
                if !close {
                    let reply = Value::Error(format!("ERR {}", error.0));
                    encode_reply(&reply, self.protocol, &mut output);
                }
                close = true;
            }
            if stream.write_all(&output).await.is_err() || close {
                return;
            }
            output.clear();
        }
    }

    /// Answers a pipeline of commands in order. Consecutive store commands travel as one
    /// operation (`kv::Command::Pipeline`): one round through the log instead of one each. They
    /// then also execute atomically, which Redis does not promise but no client can mind.
    async fn on_commands(&mut self, commands: Vec<Vec<Vec<u8>>>, output: &mut Vec<u8>) -> Next {
        let mut run: Vec<resp::Pending> = Vec::new();
        for arguments in commands {
            match resp::plan(&arguments) {
                Plan::Execute(mut pending) => {
                    pending.stamp(unix_now_ms());
                    run.push(pending);
                    if run.len() == PIPELINE_COMMANDS_MAX {
                        self.execute_run(std::mem::take(&mut run), output).await;
                    }
                }
                plan => {
                    self.execute_run(std::mem::take(&mut run), output).await;
                    if let Next::Close = self.on_plan(plan, output).await {
                        return Next::Close;
                    }
                }
            }
        }
        self.execute_run(run, output).await;
        Next::Continue
    }

    async fn execute_run(&mut self, mut run: Vec<resp::Pending>, output: &mut Vec<u8>) {
        if run.len() <= 1 {
            if let Some(pending) = run.pop() {
                let outcome = self.execute(&pending.command).await;
                encode_reply(&resp::finish(&pending, &outcome), self.protocol, output);
            }
            return;
        }
        let commands = run.iter().map(|pending| pending.command.clone()).collect();
        let outcomes = match self.execute(&Command::Pipeline { commands }).await {
            Outcome::Pipeline(outcomes) if outcomes.len() == run.len() => outcomes,
            // One answer for all (unavailable): every command gets it.
            other => vec![other; run.len()],
        };
        for (pending, outcome) in run.iter().zip(&outcomes) {
            encode_reply(&resp::finish(pending, outcome), self.protocol, output);
        }
    }

    async fn on_plan(&mut self, plan: Plan, output: &mut Vec<u8>) -> Next {
        let value = match plan {
            Plan::Reply(value) => value,
            Plan::Execute(mut pending) => {
                pending.stamp(unix_now_ms());
                let outcome = self.execute(&pending.command).await;
                resp::finish(&pending, &outcome)
            }
            Plan::Hello {
                protocol,
                client_name,
            } => {
                // HELLO without a version keeps the connection's protocol.
                if protocol != 0 {
                    self.protocol = protocol;
                }
                if let Some(name) = client_name {
                    self.set_name(name);
                }
                let info = self.server_info().await;
                resp::hello_reply(self.protocol, &info)
            }
            Plan::Info { section } => {
                let info = self.server_info().await;
                resp::info_reply(&info, section.as_deref())
            }
            Plan::SetName(name) => {
                self.set_name(name);
                Value::Simple("OK".to_string())
            }
            Plan::GetName => self.name.clone().map_or(Value::Null, Value::Bulk),
            Plan::PeerDelay { micros } => {
                self.node.peer_delay_micros.store(micros, Ordering::Relaxed);
                log::info(format_args!(
                    "DEBUG PEER-DELAY: peer writes wait {micros} us"
                ));
                Value::Simple("OK".to_string())
            }
            Plan::Quit => {
                encode_reply(&Value::Simple("OK".to_string()), self.protocol, output);
                return Next::Close;
            }
        };
        encode_reply(&value, self.protocol, output);
        Next::Continue
    }

    /// Runs one store operation through the replicated log (writes) or the primary's read path
    /// (reads), resending the same request until a reply comes.
    async fn execute(&mut self, command: &Command) -> Outcome {
        // Skyros: a nilext write's reply is known in advance; it completes on a supermajority
        // of matching acknowledgements (one round trip). In Skyros-Adapt's 2-RTT mode, and after
        // two unanswered rounds, the same request also goes to the primary as an ordinary write
        // (the slow path), and the first of the two answers wins.
        // Skyros-Comm: another write goes the same way; it completes in one round trip when
        // the primary's acknowledgement carries its result (it commuted with everything
        // pending), else on the primary's reply after ordering.
        let skyros = self.node.skyros;
        let (kind, nilext, mut quorum) = if command.is_read() {
            (RequestKind::Read, None, vr::NilextQuorum::new())
        } else if let (true, Some(outcome)) = (skyros, command.nilext_outcome()) {
            (
                RequestKind::Nilext,
                Some(Some(outcome)),
                vr::NilextQuorum::new(),
            )
        } else if skyros && self.node.skyros_comm {
            (
                RequestKind::Commutative,
                Some(None),
                vr::NilextQuorum::commutative(),
            )
        } else {
            (RequestKind::Write, None, vr::NilextQuorum::new())
        };
        let number = self.request_next;
        self.request_next = RequestNumber(number.0 + 1);
        let request = Request {
            client: self.client,
            request: number,
            kind,
            operation: crate::store::kv_operation(command),
        };
        let mut slow_path = nilext.is_some() && self.adapt_mode() == vr::AdaptMode::TwoRtt;
        let hedge = Request {
            kind: RequestKind::Write,
            ..request.clone()
        };
        let mut rounds = 0;
        let started = Instant::now();
        while started.elapsed() < GIVE_UP_AFTER {
            if nilext.is_some() && rounds >= NILEXT_ROUNDS_MAX {
                slow_path = true;
            }
            rounds += 1;
            let round_started = Instant::now();
            let mut acknowledged: u64 = 0;
            let mut submissions = vec![request.clone()];
            if nilext.is_some() && slow_path {
                submissions.push(Request {
                    kind: RequestKind::Write,
                    ..request.clone()
                });
            }
            for submission in submissions {
                let event = Event::Submit {
                    request: submission,
                };
                if self.node.events.send(event).await.is_err() {
                    return unavailable();
                }
            }
            let deadline = tokio::time::sleep(RETRY_AFTER);
            tokio::pin!(deadline);
            loop {
                tokio::select! {
                    message = self.replies.recv() => match message {
                        Some(Message::Reply(reply)) if reply.request == number => {
                            if nilext.is_some() {
                                self.node.nilext.slow.fetch_add(1, Ordering::Relaxed);
                            }
                            return Outcome::decode(&reply.result).unwrap_or(Outcome::Error(kv::KvError::Malformed));
                        }
                        Some(Message::NilextAck { view, replica, request, prefix_digest, executed, result, .. })
                            if request == number =>
                        {
                            if replica.0 < 64 && acknowledged & (1 << replica.0) == 0 {
                                acknowledged |= 1 << replica.0;
                                self.adapt_record(replica.0, round_started.elapsed());
                            }
                            let replicas = self.node.replica_count;
                            let done = quorum.on_ack(replicas, view, replica, prefix_digest, executed, result);
                            if !done && !slow_path && quorum.hopeless(replicas) {
                                // The acknowledgements disagree too much to complete: take the
                                // slow path now instead of waiting out the round. A
                                // commutative write without a preview needs nothing more:
                                // the primary replies once it is ordered.
                                slow_path = true;
                                if kind == RequestKind::Nilext {
                                    let hedge = hedge.clone();
                                    if self.node.events.send(Event::Submit { request: hedge }).await.is_err() {
                                        return unavailable();
                                    }
                                }
                            }
                            if done {
                                if let Some(known) = &nilext {
                                    self.node.nilext.fast.fetch_add(1, Ordering::Relaxed);
                                    return match (known, quorum.result()) {
                                        (Some(outcome), _) => outcome.clone(),
                                        (None, result) => result
                                            .and_then(|result| Outcome::decode(result).ok())
                                            .unwrap_or(Outcome::Error(kv::KvError::Malformed)),
                                    };
                                }
                            }
                        }
                        Some(Message::NotPrimary { request, .. }) if request == number => {
                            tokio::time::sleep(NOT_PRIMARY_BACKOFF).await;
                            break;
                        }
                        Some(_) => continue, // A late answer to an earlier attempt.
                        None => return unavailable(),
                    },
                    () = &mut deadline => {
                        if nilext.is_some() {
                            // A replica that did not answer within the round counts the round.
                            for replica in 0..self.node.replica_count.min(64) {
                                if acknowledged & (1 << replica) == 0 {
                                    self.adapt_record(replica, RETRY_AFTER);
                                }
                            }
                        }
                        break;
                    }
                }
            }
        }
        unavailable()
    }

    /// Skyros-Adapt's current mode for this node's gateway.
    fn adapt_mode(&self) -> vr::AdaptMode {
        let adapt = self
            .node
            .adapt
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        adapt.0.mode()
    }

    /// Feeds one acknowledgement latency to Skyros-Adapt, re-deciding the mode now and then.
    fn adapt_record(&self, replica: u8, latency: Duration) {
        let mut adapt = self
            .node
            .adapt
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        adapt.0.record(replica, latency.as_micros() as u64);
        if adapt.1.elapsed() >= ADAPT_DECIDE_EVERY {
            adapt.1 = Instant::now();
            let before = adapt.0.mode();
            let after = adapt.0.decide();
            if before != after {
                log::info(format_args!(
                    "skyros-adapt: {before:?} -> {after:?} (replica latency averages, us: {:?})",
                    adapt.0.averages()
                ));
            }
        }
    }

    /// An empty name clears the name, as in Redis.
    fn set_name(&mut self, name: Vec<u8>) {
        self.name = (!name.is_empty()).then_some(name);
    }

    async fn server_info(&self) -> ServerInfo {
        let status = self.node.status().await;
        let mut info = server_info(
            status.clone(),
            self.node.replica_count,
            self.node.local.0,
            self.node.skyros,
        );
        if self.node.skyros {
            let stats = status.map(|status| status.stats).unwrap_or_default();
            let nilext = &self.node.nilext;
            info.counters = vec![
                (
                    "skyros_nilext_fast".into(),
                    nilext.fast.load(Ordering::Relaxed),
                ),
                (
                    "skyros_nilext_slow".into(),
                    nilext.slow.load(Ordering::Relaxed),
                ),
                (
                    "skyros_reads_immediate".into(),
                    stats.skyros_reads_immediate,
                ),
                ("skyros_reads_ordered".into(), stats.skyros_reads_ordered),
                (
                    "skyros_adapt_two_rtt".into(),
                    u64::from(self.adapt_mode() == vr::AdaptMode::TwoRtt),
                ),
            ];
        }
        info
    }
}

fn unavailable() -> Outcome {
    Outcome::Error(kv::KvError::Unavailable)
}

fn server_info(
    status: Option<NodeStatus>,
    replicas: u8,
    replica_index: u8,
    skyros: bool,
) -> ServerInfo {
    let status = status.unwrap_or(NodeStatus {
        replica: replica_index,
        replicas,
        view: 0,
        status: "unavailable",
        is_primary: false,
        primary: 0,
        op: 0,
        commit: 0,
        checkpoint: 0,
        durability: "memory",
        keys: 0,
        stats: vr::ReplicaStats::default(),
    });
    let role = match (status.status, status.is_primary) {
        ("normal", true) => "primary",
        ("normal", false) => "backup",
        (other, _) => other,
    };
    ServerInfo {
        role: role.to_string(),
        view: status.view,
        commit_number: status.commit,
        replica_index: status.replica,
        replicas: status.replicas,
        protocol: if skyros { "skyros" } else { "vr" }.to_string(),
        durability: status.durability.to_string(),
        keys: Some(status.keys),
        version: env!("CARGO_PKG_VERSION").to_string(),
        counters: Vec::new(),
    }
}

/// The gateway's clock in unix milliseconds: the timestamp a planned command carries
/// (`resp::Pending::stamp`), the only time the replicated store sees. Gateways stamp rather
/// than the log's orderer (a deviation from the design: `docs/internals/redis.md`).
pub(crate) fn unix_now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}
