//! `tessera bench ecast`: ordered multi-partition messages per second through the router group
//! of a partitioned (`sequenced`) cluster, without the RESP path.
//!
//! The load generator is `--senders` E-Cast senders in one process, each an `ecast::Gateway`
//! (the type every storage process's gateway drives) talking to the routers over
//! `Frame::SenderRequest`, with `--window` messages in flight each (closed loop). A message is
//! one MSET of `--keys` uniformly chosen keys (out of `--keyspace`) with `--value-size`-byte
//! values, split into single-key PUTs exactly as a RESP MSET is (`payload::split`): the router
//! group sequences it (one VR commit), the lead router's forwarder delivers it to every live
//! replica of every key, each storage process applies its share to its store and confirms, and
//! the message counts as done only when the routers report it stable (every destination
//! confirmed it) — what a RESP MSET waits for. Latency is from submission to the stable
//! notification.

use anyhow::Context;
use clap::Args;
use ecast::{
    Completion, Gateway, GatewayCommand, GatewayEffect, GatewayInput, GatewaySettings,
    SenderSettings,
};
use hdrhistogram::Histogram;
use kv::{Command, Outcome};
use placement::ProcessId;
use runtime::ecast::config::ClusterConfig;
use runtime::ecast::link::{self, Frame, Links};
use runtime::ecast::{gateway_sender, payload};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use vr::ClientId;

#[derive(Args, Debug)]
pub struct EcastArguments {
    /// The cluster file of a running `tessera dev --protocol sequenced` (`<data-dir>/cluster.toml`).
    #[arg(long)]
    cluster: PathBuf,
    /// E-Cast senders (each an `ecast::Gateway` with its own sequence numbers).
    #[arg(long, default_value_t = 6)]
    senders: usize,
    /// Messages each sender keeps in flight (at most the routers' window, 64).
    #[arg(long, default_value_t = 48)]
    window: u64,
    /// Keys per message (each a PUT; the keys fall in several partitions).
    #[arg(long, default_value_t = 4)]
    keys: usize,
    #[arg(long, default_value_t = 100_000)]
    keyspace: u64,
    #[arg(long, default_value_t = 8)]
    value_size: usize,
    /// Send an empty application payload (routed by the same keys' positions): storage
    /// processes deliver, confirm and stabilise each message but apply nothing to their store.
    /// Separates the cost of E-Cast from the cost of executing MSETs.
    #[arg(long)]
    no_apply: bool,
    /// Seconds measured, after the warm-up.
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Milliseconds per gateway tick (retries, resubmissions).
    #[arg(long, default_value_t = 5)]
    tick_ms: u64,
    #[arg(long)]
    json: Option<PathBuf>,
    #[arg(long, default_value = "")]
    label: String,
}

fn settings(tick_ms: u64, window: u64) -> GatewaySettings {
    let ticks = |ms: u64| (ms / tick_ms).max(1);
    GatewaySettings {
        sender: SenderSettings {
            window_max: window,
            resubmit_ticks: ticks(1_000),
        },
        router_retry_ticks: ticks(200).max(2),
        answer_wait_ticks: ticks(1_000),
        read_attempts_max: 5,
        snapshot_wait_ticks: ticks(1_000),
        snapshot_attempts_max: 5,
        basic_wait_ticks: ticks(500),
        basic_attempts_max: 5,
        give_up_ticks: Some(ticks(10_000)),
        report_envelopes: false,
        foresee_busy_ticks: 0,
    }
}

struct Load {
    arguments: EcastArguments,
    config: ClusterConfig,
    links: Links,
    own: std::net::SocketAddr,
    gateways: Vec<Gateway<Outcome>>,
    by_sender: HashMap<ProcessId, usize>,
    by_client: HashMap<ClientId, usize>,
    /// Per gateway: command id → submitted at.
    pending: Vec<BTreeMap<u64, Instant>>,
    next_id: u64,
    prng: stdx::Prng,
    value: Vec<u8>,
    measuring_from: Instant,
    histogram: Histogram<u64>,
    completed: u64,
    failed: u64,
    /// Requests sent to the routers, how many of them repeated the previous request number of
    /// their sender (a resend after `router_retry_ticks` of silence), and replies received.
    requests: u64,
    resent: u64,
    replies: u64,
    not_primary: u64,
    /// Per gateway: the last request number sent, and whether a NotPrimary came since.
    last_request: Vec<u64>,
    redirected: Vec<bool>,
}

impl Load {
    fn command(&mut self) -> GatewayCommand {
        let pairs = (0..self.arguments.keys)
            .map(|_| {
                let key = format!("key:{}", self.prng.below(self.arguments.keyspace));
                (key.into_bytes(), self.value.clone())
            })
            .collect();
        let mut split = payload::split(&Command::MultiPut { pairs }).expect("an MSET splits");
        let placement = self
            .config
            .key_placement()
            .expect("the cluster file was checked when loaded");
        let positions = split.positions(&placement);
        let parts = (0..split.commands.len() as u64).collect();
        if self.arguments.no_apply {
            split.commands.clear(); // Still a well-formed payload: an empty share everywhere.
        }
        GatewayCommand::Write {
            needs_answers: false,
            positions,
            payload: split.encode(),
            parts,
        }
    }

    fn submit(&mut self, gateway: usize) {
        let id = self.next_id;
        self.next_id += 1;
        let command = self.command();
        self.pending[gateway].insert(id, Instant::now());
        self.step(gateway, GatewayInput::Submit { id, command });
    }

    fn step(&mut self, gateway: usize, input: GatewayInput<Outcome>) {
        let mut effects = Vec::new();
        self.gateways[gateway].step(input, &mut effects);
        let sender = self.gateways[gateway].id();
        let mut refill = 0;
        for effect in effects {
            match effect {
                GatewayEffect::Request { router, request } => {
                    self.requests += 1;
                    // The same number again: a resend, unless a NotPrimary just redirected it.
                    let redirected = std::mem::take(&mut self.redirected[gateway]);
                    if self.last_request[gateway] == request.request.0 && !redirected {
                        self.resent += 1;
                    }
                    self.last_request[gateway] = request.request.0;
                    if let Some(address) = self.config.routers.get(router as usize) {
                        let frame = Frame::SenderRequest {
                            reply_to: self.own,
                            sender,
                            request,
                        };
                        self.links.send(address.address, frame);
                    }
                }
                GatewayEffect::Complete { id, completion } => {
                    let Some(started) = self.pending[gateway].remove(&id) else {
                        continue;
                    };
                    let now = Instant::now();
                    if started >= self.measuring_from {
                        match completion {
                            Completion::Done(_) => {
                                self.completed += 1;
                                let micros = now.duration_since(started).as_micros() as u64;
                                let _ = self.histogram.record(micros.max(1));
                            }
                            Completion::Failed(_) => self.failed += 1,
                        }
                    }
                    refill += 1;
                }
                _ => {}
            }
        }
        for _ in 0..refill {
            self.submit(gateway);
        }
    }

    fn on_frame(&mut self, frame: Frame) {
        match frame {
            Frame::Reply { message } => {
                let client = match &message {
                    vr::Message::Reply(reply) => reply.client,
                    vr::Message::NotPrimary { client, .. } => {
                        self.not_primary += 1;
                        if let Some(&gateway) = self.by_client.get(client) {
                            self.redirected[gateway] = true;
                        }
                        *client
                    }
                    _ => return,
                };
                self.replies += 1;
                if let Some(&gateway) = self.by_client.get(&client) {
                    self.step(gateway, GatewayInput::Router(message));
                }
            }
            Frame::Stable {
                sender,
                sequence,
                timestamp,
            } => {
                if let Some(&gateway) = self.by_sender.get(&sender) {
                    self.step(
                        gateway,
                        GatewayInput::Stable {
                            sequence,
                            timestamp,
                        },
                    );
                }
            }
            Frame::Stables { sender, stable } => {
                if let Some(&gateway) = self.by_sender.get(&sender) {
                    for (sequence, timestamp) in stable {
                        self.step(
                            gateway,
                            GatewayInput::Stable {
                                sequence,
                                timestamp,
                            },
                        );
                    }
                }
            }
            _ => {} // Answers: a plain MSET does not wait for them.
        }
    }
}

pub fn run(arguments: EcastArguments) -> anyhow::Result<()> {
    let config = ClusterConfig::load(&arguments.cluster).map_err(anyhow::Error::msg)?;
    anyhow::ensure!(arguments.senders >= 1, "--senders must be at least 1");
    anyhow::ensure!(
        (1..=64).contains(&arguments.window),
        "--window must be 1..=64 (the routers' window)"
    );
    anyhow::ensure!(arguments.keys >= 1, "--keys must be at least 1");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(drive(arguments, config))
}

async fn drive(arguments: EcastArguments, config: ClusterConfig) -> anyhow::Result<()> {
    runtime::security::authenticate_peers(&config.security, &config.data_dir)
        .map_err(anyhow::Error::msg)?;
    let listen_on = std::net::SocketAddr::new(config.routers[0].address.ip(), 0);
    let listener = TcpListener::bind(listen_on)
        .await
        .with_context(|| format!("cannot listen on {listen_on}"))?;
    let own = listener.local_addr()?;
    let (frames, mut inbound) = mpsc::channel::<Frame>(65_536);
    tokio::spawn(link::accept(listener, frames));
    let router_count = config.routers.len() as u8;
    let mut gateways = Vec::new();
    let mut by_sender = HashMap::new();
    let mut by_client = HashMap::new();
    for index in 0..arguments.senders {
        let sender = gateway_sender(ProcessId(0), runtime::os::random_u64()).process_id();
        let client = ClientId(runtime::os::random_u64());
        by_sender.insert(sender, index);
        by_client.insert(client, index);
        gateways.push(Gateway::new(
            sender,
            client,
            config.initial_configuration(),
            router_count,
            (index % router_count as usize) as u8,
            runtime::os::random_u64(),
            settings(arguments.tick_ms, arguments.window),
        ));
    }
    let started = Instant::now();
    let arguments_senders = arguments.senders;
    let warmup = Duration::from_secs_f64(arguments.warmup);
    let duration = Duration::from_secs_f64(arguments.duration);
    let mut load = Load {
        value: vec![b'v'; arguments.value_size],
        prng: stdx::Prng::new(runtime::os::random_u64()),
        pending: vec![BTreeMap::new(); arguments.senders],
        arguments,
        config,
        links: Links::new(),
        own,
        gateways,
        by_sender,
        by_client,
        next_id: 0,
        measuring_from: started + warmup,
        histogram: Histogram::new(3).expect("a histogram"),
        completed: 0,
        failed: 0,
        requests: 0,
        resent: 0,
        replies: 0,
        not_primary: 0,
        last_request: vec![0; arguments_senders],
        redirected: vec![false; arguments_senders],
    };
    for gateway in 0..load.gateways.len() {
        for _ in 0..load.arguments.window {
            load.submit(gateway);
        }
    }
    let mut tick = tokio::time::interval(Duration::from_millis(load.arguments.tick_ms));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let end = tokio::time::Instant::from_std(started + warmup + duration);
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(end) => break,
            _ = tick.tick() => {
                for gateway in 0..load.gateways.len() {
                    load.step(gateway, GatewayInput::Tick);
                }
            }
            frame = inbound.recv() => {
                let Some(frame) = frame else { break };
                load.on_frame(frame);
                // Drain what is already queued before the next tick or sleep.
                while let Ok(frame) = inbound.try_recv() {
                    load.on_frame(frame);
                }
            }
        }
    }
    let seconds = duration.as_secs_f64();
    let throughput = load.completed as f64 / seconds;
    let histogram = &load.histogram;
    let quantile = |q: f64| histogram.value_at_quantile(q);
    let arguments = &load.arguments;
    println!(
        "tessera bench ecast: {} senders x {} in flight, MSET of {} keys ({} B values{}) as one E-Cast message each\n  \
         {:.0} messages/s stable over {:.1}s ({} messages, {} failed); latency us: p50 {} p90 {} p99 {} max {} mean {:.0}\n  \
         requests to the routers {} ({} resent after a timeout), replies {} ({} not primary)",
        arguments.senders,
        arguments.window,
        arguments.keys,
        arguments.value_size,
        if arguments.no_apply { ", not applied" } else { "" },
        throughput,
        seconds,
        load.completed,
        load.failed,
        quantile(0.5),
        quantile(0.9),
        quantile(0.99),
        histogram.max(),
        histogram.mean(),
        load.requests,
        load.resent,
        load.replies,
        load.not_primary
    );
    if let Some(path) = &arguments.json {
        let json = format!(
            "{{\"label\":\"{}\",\"mode\":\"ecast\",\"senders\":{},\"window\":{},\"keys_per_message\":{},\"value_size\":{},\"applied\":{},\
             \"seconds\":{:.3},\"operations\":{},\"errors\":{},\"throughput_ops_per_s\":{:.1},\
             \"latency_us\":{{\"p50\":{},\"p90\":{},\"p99\":{},\"max\":{},\"mean\":{:.1}}}}}\n",
            arguments.label.replace('"', "'"),
            arguments.senders,
            arguments.window,
            arguments.keys,
            arguments.value_size,
            !arguments.no_apply,
            seconds,
            load.completed,
            load.failed,
            throughput,
            quantile(0.5),
            quantile(0.9),
            quantile(0.99),
            histogram.max(),
            histogram.mean()
        );
        std::fs::write(path, json).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
