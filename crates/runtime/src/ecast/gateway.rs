//! The gateway inside every storage process: RESP connections (so `redis-cli -p <port>` works
//! on any storage process) and one gateway task that owns an `ecast::Sender`. A command is
//! planned by the pure `resp` crate, split into single-key sub-commands (`payload`), and sent
//! as one E-Cast message to the partitions of its keys, planned against the gateway's
//! configuration version; the task is a VR client of the router group (one request at a time,
//! retried, following the primary) exactly like a gateway of the simulator's `--ecast` world.
//!
//! Completion: a read when every sub-command has an answer (one replica per key); a write when
//! its message is stable (every live replica delivered it) and, if its reply carries data (DEL,
//! INCR, …), every sub-command has an answer. A message refused for a stale configuration
//! version is re-planned after a configuration query and resubmitted, transparently.
//!
//! Read isolation per connection (`READMODE sequential|snapshot|basic`, §6.7): `sequential`
//! reads are E-Cast messages; `snapshot` reads ask the router log's last timestamp
//! (`Query::Now`) and are then timestamped by the lead router and injected into the
//! destinations' streams; `basic` reads go straight to one live replica per key, which checks
//! only the configuration version. Writes are always sequential.

use super::config::ClusterConfig;
use super::link::{Frame, Links};
use super::payload::{self, Split};
use crate::log;
use crate::node::random_u64;
use crate::resp_codec::{encode_reply, parse_request, Limits};
use ecast::{
    Isolation, Operation, OperationResult, Query, Sender, SenderEvent, SenderSettings, Sequence,
    SnapshotRead, Timestamp,
};
use kv::Outcome;
use placement::ecast::{Message as Routing, Target};
use placement::{Configuration, ProcessId};
use resp::{Plan, ServerInfo, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use vr::{ClientId, Message, Request, RequestKind, RequestNumber};

/// An unanswered router request is resent this often (to the next router every second time).
const ROUTER_RETRY: Duration = Duration::from_millis(200);
/// A message that is stable but not fully answered (an answer lost with its storage process)
/// is, for a read, sent again as a new message; for a write, answered with an error.
const ANSWER_WAIT: Duration = Duration::from_millis(1_000);
const SNAPSHOT_WAIT: Duration = Duration::from_millis(1_000);
const BASIC_WAIT: Duration = Duration::from_millis(500);
const ATTEMPTS_MAX: u32 = 5;
/// A command gives up after this long (its write may still take effect).
const GIVE_UP_AFTER: Duration = Duration::from_secs(10);
/// The sender's window: messages sequenced but not yet stable, at most (the routers allow 64).
const WINDOW_MAX: u64 = 48;

/// What the storage process and the gateway share for INFO.
#[derive(Debug, Default)]
pub struct GatewayStatus {
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
}

/// One command for the gateway task.
struct Job {
    split: Split,
    isolation: Isolation,
    reply: oneshot::Sender<Outcome>,
}

/// Starts the gateway task and the RESP listener; returns where frames for the gateway go.
pub fn start(
    config: ClusterConfig,
    storage: ProcessId,
    links: Links,
    listener: TcpListener,
    status: Arc<GatewayStatus>,
) -> mpsc::UnboundedSender<Frame> {
    let (frames, frame_receiver) = mpsc::unbounded_channel();
    let (jobs, job_receiver) = mpsc::channel::<Job>(65_536);
    let id = super::gateway_sender(storage, random_u64());
    let initial = config.initial_configuration();
    let tick_ms = config.tick_ms;
    let gateway = Gateway {
        id,
        storage,
        client: ClientId(random_u64()),
        sender: Sender::new(
            id,
            SenderSettings {
                window_max: WINDOW_MAX,
                // Ticks: a sequenced message not reported stable within about 1 s is
                // resubmitted to learn its outcome.
                resubmit_ticks: (1_000 / tick_ms).max(1),
            },
        ),
        config: initial,
        // Ask the routers first: it shows they are reachable, and the ring may have moved on.
        need_config: true,
        request_next: RequestNumber(1),
        request: None,
        target: (storage.0 % config.routers.len() as u64) as u8,
        ops: BTreeMap::new(),
        op_next: 0,
        by_sequence: BTreeMap::new(),
        read_next: 1,
        cluster: config.clone(),
        links,
        status: status.clone(),
    };
    tokio::spawn(gateway.run(frame_receiver, job_receiver, tick_ms));
    tokio::spawn(serve(listener, jobs, config, storage, status));
    frames
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
    sent_at: Instant,
    attempts: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Queued,
    Submitted(Sequence),
    BasicQueued,
    BasicSent { read_id: u64 },
    SnapshotNeedsNow,
    SnapshotSent { read_id: u64 },
}

struct Op {
    split: Split,
    phase: Phase,
    since: Instant,
    started: Instant,
    answers: BTreeMap<u32, Outcome>,
    stable: bool,
    /// A snapshot read's point, fixed by its first answer.
    snapshot_at: Option<Timestamp>,
    attempts: u32,
    reply: Option<oneshot::Sender<Outcome>>,
}

struct Gateway {
    id: ProcessId,
    storage: ProcessId,
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
    cluster: ClusterConfig,
    links: Links,
    status: Arc<GatewayStatus>,
}

impl Gateway {
    async fn run(
        mut self,
        mut frames: mpsc::UnboundedReceiver<Frame>,
        mut jobs: mpsc::Receiver<Job>,
        tick_ms: u64,
    ) {
        let mut interval = tokio::time::interval(Duration::from_millis(tick_ms));
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = interval.tick() => {
                    self.sender.tick();
                    self.expire();
                }
                Some(frame) = frames.recv() => self.on_frame(frame),
                Some(job) = jobs.recv() => self.on_job(job),
                else => return,
            }
            self.drive();
        }
    }

    fn on_job(&mut self, job: Job) {
        let phase = match (job.split.is_read, job.isolation) {
            (true, Isolation::Snapshot) => Phase::SnapshotNeedsNow,
            (true, Isolation::Basic) => Phase::BasicQueued,
            _ => Phase::Queued,
        };
        let now = Instant::now();
        self.ops.insert(
            self.op_next,
            Op {
                split: job.split,
                phase,
                since: now,
                started: now,
                answers: BTreeMap::new(),
                stable: false,
                snapshot_at: None,
                attempts: 0,
                reply: Some(job.reply),
            },
        );
        self.op_next += 1;
    }

    /// Everything that may move after an input: basic reads out, the window filled, the next
    /// router request sent.
    fn drive(&mut self) {
        self.send_basic_reads();
        self.fill_window();
        self.maybe_request();
    }

    fn finish(&mut self, id: u64, outcome: Outcome) {
        if let Some(mut op) = self.ops.remove(&id) {
            if let Phase::Submitted(sequence) = op.phase {
                self.by_sequence.remove(&sequence);
            }
            if let Some(reply) = op.reply.take() {
                let _ = reply.send(outcome);
            }
            self.status.completed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Retries what waited too long; gives up on what waited far too long.
    fn expire(&mut self) {
        let now = Instant::now();
        let mut failed = Vec::new();
        for (id, op) in self.ops.iter_mut() {
            if now >= op.started + GIVE_UP_AFTER {
                failed.push((
                    *id,
                    "TRYAGAIN the router group or the partition is unavailable",
                ));
                continue;
            }
            let waited = now - op.since;
            let retry = match op.phase {
                Phase::Submitted(sequence) if op.stable && waited >= ANSWER_WAIT => {
                    if !op.split.is_read {
                        failed.push((*id, "ERR the write is done but its result was lost"));
                        continue;
                    }
                    self.by_sequence.remove(&sequence);
                    Some(Phase::Queued)
                }
                Phase::SnapshotSent { .. } if waited >= SNAPSHOT_WAIT => {
                    Some(Phase::SnapshotNeedsNow)
                }
                Phase::BasicSent { .. } if waited >= BASIC_WAIT => Some(Phase::BasicQueued),
                _ => None,
            };
            if let Some(phase) = retry {
                self.status.retried.fetch_add(1, Ordering::Relaxed);
                op.attempts += 1;
                if op.attempts >= ATTEMPTS_MAX {
                    failed.push((*id, "TRYAGAIN the read found no answer"));
                } else {
                    op.phase = phase;
                    op.since = now;
                    op.answers.clear();
                    op.stable = false;
                    op.snapshot_at = None;
                }
            }
        }
        for (id, error) in failed {
            self.finish(id, Outcome::Error(kv::KvError::Unavailable));
            log::warn(format_args!("command {id} failed: {error}"));
        }
        if let Some(request) = &mut self.request {
            if now >= request.sent_at + ROUTER_RETRY {
                request.attempts += 1;
                request.sent_at = now;
                if request.attempts.is_multiple_of(2) {
                    self.target = (self.target + 1) % self.cluster.routers.len() as u8;
                }
                let request = request.request.clone();
                self.send_router(request);
            }
        }
    }

    fn routing(&self, split: &Split) -> Routing {
        let target = Target::Points(split.positions());
        if split.is_read {
            Routing::Read {
                sender: self.id,
                target,
                replica_offset: random_u64(),
            }
        } else {
            Routing::Write {
                sender: self.id,
                target,
            }
        }
    }

    /// Queued commands enter the sender's window, planned against the current configuration.
    fn fill_window(&mut self) {
        if self.need_config {
            return;
        }
        let queued: Vec<u64> = self
            .ops
            .iter()
            .filter(|(_, op)| op.phase == Phase::Queued)
            .map(|(id, _)| *id)
            .collect();
        for id in queued {
            let split = &self.ops[&id].split;
            let routing = self.routing(split);
            let payload = split.encode();
            let Ok(sequence) = self.sender.submit(self.config.version(), routing, payload) else {
                break; // The window is full.
            };
            let op = self.ops.get_mut(&id).expect("listed above");
            op.phase = Phase::Submitted(sequence);
            op.since = Instant::now();
            self.by_sequence.insert(sequence, id);
        }
    }

    /// One router request at a time: a configuration query when the plan is stale, a `Now`
    /// query for snapshot reads, else the sender's next Submit.
    fn maybe_request(&mut self) {
        if self.request.is_some() {
            return;
        }
        let (purpose, kind, operation) = if self.need_config {
            let query = Operation::Query(Query::Configuration);
            (Purpose::Configuration, RequestKind::Read, query)
        } else if self
            .ops
            .values()
            .any(|op| op.phase == Phase::SnapshotNeedsNow)
        {
            (
                Purpose::Now,
                RequestKind::Read,
                Operation::Query(Query::Now),
            )
        } else if let Some(batch) = self.sender.batch() {
            (Purpose::Submit, RequestKind::Write, batch)
        } else {
            return;
        };
        let request = Request {
            client: self.client,
            request: self.request_next,
            kind,
            operation: operation.encode(),
        };
        self.request_next = RequestNumber(self.request_next.0 + 1);
        self.request = Some(RouterRequest {
            request: request.clone(),
            purpose,
            sent_at: Instant::now(),
            attempts: 0,
        });
        self.send_router(request);
    }

    fn send_router(&self, request: Request) {
        let router = &self.cluster.routers[self.target as usize];
        self.status
            .router_target
            .store(u64::from(self.target), Ordering::Relaxed);
        let reply_to = self.storage;
        self.links
            .send(router.address, Frame::Request { reply_to, request });
    }

    fn on_frame(&mut self, frame: Frame) {
        match frame {
            Frame::Reply { message } => self.on_router_message(message),
            Frame::Stable {
                sender,
                sequence,
                timestamp,
            } if sender == self.id => {
                let mut events = Vec::new();
                self.sender.on_stable(sequence, timestamp, &mut events);
                self.on_sender_events(events);
            }
            Frame::Answer {
                sender,
                sequence,
                outcomes,
            } if sender == self.id => {
                if let Some(id) = self.by_sequence.get(&sequence).copied() {
                    if let Some(op) = self.ops.get_mut(&id) {
                        op.answers.extend(outcomes);
                    }
                    self.maybe_complete(id);
                }
            }
            Frame::SnapshotAnswer {
                sender,
                read_id,
                at,
                outcomes,
            } if sender == self.id => {
                if let Some(id) = self.find(|phase| phase == Phase::SnapshotSent { read_id }) {
                    let op = self.ops.get_mut(&id).expect("found");
                    if *op.snapshot_at.get_or_insert(at) != at {
                        return; // A second stamping of a resent read.
                    }
                    op.answers.extend(outcomes);
                    self.maybe_complete(id);
                }
            }
            Frame::BasicAnswer {
                sender,
                read_id,
                outcomes,
            } if sender == self.id => {
                if let Some(id) = self.find(|phase| phase == Phase::BasicSent { read_id }) {
                    let op = self.ops.get_mut(&id).expect("found");
                    op.answers.extend(outcomes);
                    self.maybe_complete(id);
                }
            }
            Frame::SnapshotRefused {
                sender, read_id, ..
            } if sender == self.id => {
                if let Some(id) = self.find(|phase| phase == Phase::SnapshotSent { read_id }) {
                    let op = self.ops.get_mut(&id).expect("found");
                    op.phase = Phase::SnapshotNeedsNow;
                    op.answers.clear();
                    op.snapshot_at = None;
                }
            }
            Frame::BasicRefused {
                sender, read_id, ..
            } if sender == self.id => {
                // Planned against another version: re-read the configuration and re-plan.
                if let Some(id) = self.find(|phase| phase == Phase::BasicSent { read_id }) {
                    self.status.refused.fetch_add(1, Ordering::Relaxed);
                    let op = self.ops.get_mut(&id).expect("found");
                    op.phase = Phase::BasicQueued;
                    op.answers.clear();
                    self.need_config = true;
                }
            }
            _ => {}
        }
    }

    fn find(&self, matches: impl Fn(Phase) -> bool) -> Option<u64> {
        self.ops
            .iter()
            .find(|(_, op)| matches(op.phase))
            .map(|(id, _)| *id)
    }

    fn on_router_message(&mut self, message: Message) {
        match message {
            Message::Reply(reply) => {
                let ours = self
                    .request
                    .as_ref()
                    .is_some_and(|request| request.request.request == reply.request);
                if !ours {
                    return;
                }
                let purpose = self.request.take().expect("checked above").purpose;
                self.status.router_answers.fetch_add(1, Ordering::Relaxed);
                let result = OperationResult::decode(&reply.result);
                self.on_router_result(purpose, result);
            }
            Message::NotPrimary { view, request, .. } => {
                let routers = self.cluster.routers.len() as u64;
                if let Some(outstanding) = &mut self.request {
                    if outstanding.request.request == request {
                        self.target = (view.0 % routers) as u8;
                        // Resend soon, to the primary named.
                        outstanding.sent_at = Instant::now() - ROUTER_RETRY / 2;
                    }
                }
            }
            _ => {}
        }
    }

    fn on_router_result(&mut self, purpose: Purpose, result: OperationResult) {
        match (purpose, result) {
            (Purpose::Submit, result) => {
                let mut events = Vec::new();
                self.sender.on_result(&result, &mut events);
                self.on_sender_events(events);
            }
            (Purpose::Configuration, OperationResult::Configuration(configuration)) => {
                self.status
                    .gateway_version
                    .store(configuration.version().0, Ordering::Relaxed);
                self.config = configuration;
                self.need_config = false;
            }
            (Purpose::Now, OperationResult::Now { timestamp, .. }) => {
                self.send_snapshot_reads(timestamp)
            }
            (purpose, result) => {
                log::warn(format_args!("unexpected answer to {purpose:?}: {result:?}"))
            }
        }
    }

    fn on_sender_events(&mut self, events: Vec<SenderEvent>) {
        for event in events {
            match event {
                SenderEvent::Sequenced { .. } => {}
                SenderEvent::Stable { sequence, .. } => {
                    if let Some(id) = self.by_sequence.get(&sequence).copied() {
                        if let Some(op) = self.ops.get_mut(&id) {
                            op.stable = true;
                            op.since = Instant::now();
                        }
                        self.maybe_complete(id);
                    }
                }
                SenderEvent::Refused { sequence, refusal } => {
                    // Not routed (planned against a stale configuration): re-plan, resubmit.
                    self.status.refused.fetch_add(1, Ordering::Relaxed);
                    log::info(format_args!("message refused ({refusal:?}): re-planning"));
                    if let Some(id) = self.by_sequence.remove(&sequence) {
                        if let Some(op) = self.ops.get_mut(&id) {
                            op.phase = Phase::Queued;
                            op.answers.clear();
                        }
                    }
                    self.need_config = true;
                }
                SenderEvent::Lost { sequence, reason } => {
                    log::warn(format_args!("message {} lost: {reason}", sequence.0));
                    if let Some(id) = self.by_sequence.get(&sequence).copied() {
                        self.finish(id, Outcome::Error(kv::KvError::Unavailable));
                    }
                }
            }
        }
    }

    fn maybe_complete(&mut self, id: u64) {
        let Some(op) = self.ops.get(&id) else {
            return;
        };
        let count = op.split.commands.len() as u32;
        let answered = (0..count).all(|index| op.answers.contains_key(&index));
        let done = if op.split.is_read {
            answered
        } else {
            op.stable && (answered || !op.split.needs_answers())
        };
        if !done {
            return;
        }
        let outcome = if answered {
            let outcomes: Vec<Outcome> = op.answers.values().cloned().collect();
            op.split.merge(&outcomes)
        } else {
            // A plain SET or MSET: stable is all it needs.
            Outcome::Ok
        };
        self.finish(id, outcome);
    }

    /// §6.7 basic reads: each key to one live replica under the gateway's configuration, with
    /// that configuration's version.
    fn send_basic_reads(&mut self) {
        if self.need_config {
            return;
        }
        let queued: Vec<u64> = self
            .ops
            .iter()
            .filter(|(_, op)| op.phase == Phase::BasicQueued)
            .map(|(id, _)| *id)
            .collect();
        for id in queued {
            let read_id = self.read_next;
            self.read_next += 1;
            let op = self.ops.get_mut(&id).expect("listed above");
            let mut chosen = Vec::new();
            for position in op.split.positions() {
                let live = self.config.live_replicas(position);
                if live.is_empty() {
                    continue; // Every replica is gone: the retry reports the failure.
                }
                let process = live[(random_u64() % live.len() as u64) as usize];
                if !chosen.contains(&process) {
                    chosen.push(process);
                }
            }
            op.phase = Phase::BasicSent { read_id };
            op.since = Instant::now();
            let payload = op.split.encode();
            for process in chosen {
                if let Some(storage) = self.cluster.storage(process) {
                    let frame = Frame::BasicRead {
                        sender: self.id,
                        read_id,
                        planned_at: self.config.version(),
                        payload: payload.clone(),
                    };
                    self.links.send(storage.address, frame);
                }
            }
        }
    }

    fn send_snapshot_reads(&mut self, not_before: Timestamp) {
        let waiting: Vec<u64> = self
            .ops
            .iter()
            .filter(|(_, op)| op.phase == Phase::SnapshotNeedsNow)
            .map(|(id, _)| *id)
            .collect();
        for id in waiting {
            let read_id = self.read_next;
            self.read_next += 1;
            let routing = self.routing(&self.ops[&id].split);
            let op = self.ops.get_mut(&id).expect("listed above");
            op.phase = Phase::SnapshotSent { read_id };
            op.since = Instant::now();
            op.answers.clear();
            op.snapshot_at = None;
            let read = SnapshotRead {
                sender: self.id,
                read_id,
                not_before,
                routing,
                payload: op.split.encode(),
            };
            let router = &self.cluster.routers[self.target as usize];
            self.links
                .send(router.address, Frame::SnapshotRead { read });
        }
    }
}

// ----- RESP connections. -----

async fn serve(
    listener: TcpListener,
    jobs: mpsc::Sender<Job>,
    config: ClusterConfig,
    storage: ProcessId,
    status: Arc<GatewayStatus>,
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
        let mut connection = Connection {
            jobs: jobs.clone(),
            isolation: Isolation::Sequential,
            protocol: 2,
            name: None,
            config: config.clone(),
            storage,
            status: status.clone(),
        };
        tokio::spawn(async move { connection.run(stream).await });
    }
}

struct Connection {
    jobs: mpsc::Sender<Job>,
    isolation: Isolation,
    protocol: u8,
    name: Option<Vec<u8>>,
    config: ClusterConfig,
    storage: ProcessId,
    status: Arc<GatewayStatus>,
}

/// A reply in a pipeline: known at once, or waiting for the gateway.
enum Answer {
    Ready(Value),
    Waiting(resp::Pending, oneshot::Receiver<Outcome>),
    Close,
}

/// Awaits every waiting answer, in order.
async fn resolve(answers: &mut [Answer]) {
    for answer in answers.iter_mut() {
        if let Answer::Waiting(pending, receiver) = answer {
            let outcome = receiver
                .await
                .unwrap_or(Outcome::Error(kv::KvError::Unavailable));
            *answer = Answer::Ready(resp::finish(pending, &outcome));
        }
    }
}

impl Connection {
    async fn run(&mut self, mut stream: TcpStream) {
        let limits = Limits::default();
        let mut input: Vec<u8> = Vec::with_capacity(16 * 1024);
        let mut output: Vec<u8> = Vec::with_capacity(16 * 1024);
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            let read = match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(read) => read,
            };
            input.extend_from_slice(&chunk[..read]);
            let mut consumed_total = 0;
            let mut answers = Vec::new();
            let mut close = false;
            loop {
                match parse_request(&input[consumed_total..], &limits) {
                    Ok(None) => break,
                    Ok(Some((arguments, consumed))) => {
                        consumed_total += consumed;
                        if !arguments.is_empty() {
                            // Every command of the pipeline is submitted before any is
                            // awaited: the sender sequences them in this order. Snapshot and
                            // basic reads bypass the sequence, so they wait for the commands
                            // before them (a read sees the pipeline's earlier writes).
                            if self.isolation != Isolation::Sequential {
                                resolve(&mut answers).await;
                            }
                            answers.push(self.on_command(&arguments).await);
                        }
                    }
                    Err(error) => {
                        answers.push(Answer::Ready(Value::Error(format!("ERR {}", error.0))));
                        close = true;
                        break;
                    }
                }
            }
            input.drain(..consumed_total);
            for answer in answers {
                let value = match answer {
                    Answer::Ready(value) => value,
                    Answer::Waiting(pending, receiver) => {
                        let outcome = receiver
                            .await
                            .unwrap_or(Outcome::Error(kv::KvError::Unavailable));
                        resp::finish(&pending, &outcome)
                    }
                    Answer::Close => {
                        close = true;
                        Value::Simple("OK".to_string())
                    }
                };
                encode_reply(&value, self.protocol, &mut output);
                if close {
                    break;
                }
            }
            if stream.write_all(&output).await.is_err() || close {
                return;
            }
            output.clear();
        }
    }

    async fn on_command(&mut self, arguments: &[Vec<u8>]) -> Answer {
        if arguments[0].eq_ignore_ascii_case(b"READMODE") {
            return Answer::Ready(self.read_mode(arguments));
        }
        let value = match resp::plan(arguments) {
            Plan::Reply(value) => value,
            Plan::Execute(pending) => {
                let split = match payload::split(&pending.command) {
                    Ok(split) => split,
                    Err(_) => {
                        return Answer::Ready(Value::Error(
                            "ERR not supported by a partitioned (sequenced) cluster yet".into(),
                        ))
                    }
                };
                let (reply, receiver) = oneshot::channel();
                let job = Job {
                    split,
                    isolation: self.isolation,
                    reply,
                };
                if self.jobs.send(job).await.is_err() {
                    return Answer::Ready(Value::Error("ERR the gateway stopped".into()));
                }
                return Answer::Waiting(pending, receiver);
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
            Plan::PeerDelay { .. } => {
                Value::Error("ERR DEBUG PEER-DELAY is not built for partitioned clusters".into())
            }
            Plan::Quit => return Answer::Close,
        };
        Answer::Ready(value)
    }

    /// `READMODE [sequential|snapshot|basic]`: sets (or, without an argument, reports) how
    /// this connection's reads are isolated.
    fn read_mode(&mut self, arguments: &[Vec<u8>]) -> Value {
        let name = |isolation| match isolation {
            Isolation::Sequential => "sequential",
            Isolation::Snapshot => "snapshot",
            Isolation::Basic => "basic",
        };
        match arguments {
            [_] => Value::Simple(name(self.isolation).to_string()),
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
            protocol: "sequenced".to_string(),
            durability: "memory".to_string(),
            keys: Some(load(&status.keys)),
            version: env!("CARGO_PKG_VERSION").to_string(),
            counters: vec![
                ("ecast_process".to_string(), self.storage.0),
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
                ("ecast_retried".to_string(), load(&status.retried)),
            ],
        }
    }
}
