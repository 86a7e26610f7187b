//! A storage process in `sequenced` mode (read-one-write-all, Crescando/RB §6): an
//! `ecast::Inbox` that delivers the router group's stream in timestamp order, gap free, and a
//! `store::Store` to which each delivered message's share is applied (the sub-commands whose
//! key this process holds), then answered to the message's gateway; confirmations go back to
//! the router that delivered. The process also hosts a gateway (RESP); frames for it are passed
//! on. It keeps nothing on disk: a restarted storage process would need a state transfer from
//! its partition's other replicas, which is not built, so it refuses to start twice.

use super::config::ClusterConfig;
use super::gateway::{self, GatewayStatus};
use super::link::{self, Frame, Links};
use super::payload;
use super::storage_of_sender;
use crate::log;
use crate::store::Store;
use ecast::{Delivery, Inbox, InboxEffect, InboxInput, InboxSettings, SnapshotDelivery};
use kv::{Command, Outcome};
use placement::{Configuration, ProcessId};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use vr::StateMachine;

/// Starts storage process `id` of `config` and its gateway; returns once both listen.
pub async fn start(config: ClusterConfig, id: ProcessId) -> Result<(), String> {
    let own = config
        .storage(id)
        .ok_or_else(|| format!("there is no storage process {}", id.0))?
        .clone();
    log::init(format!("storage{}", id.0));
    let directory = config.data_dir.join(format!("storage-{}", id.0));
    std::fs::create_dir_all(&directory)
        .map_err(|error| format!("{}: {error}", directory.display()))?;
    let marker = directory.join("storage-started");
    if marker.exists() {
        return Err(format!(
            "storage process {} ran before and its memory is gone; rejoining needs a state \
             transfer from its partitions' replicas, which is not built yet",
            id.0
        ));
    }
    std::fs::write(&marker, b"this storage process has run before\n")
        .map_err(|error| format!("{}: {error}", marker.display()))?;
    let listener = TcpListener::bind(own.address)
        .await
        .map_err(|error| format!("cannot listen on {}: {error}", own.address))?;
    let client_listener = TcpListener::bind(own.client)
        .await
        .map_err(|error| format!("cannot listen on {}: {error}", own.client))?;
    let initial = config.initial_configuration();
    let links = Links::new();
    let status = Arc::new(GatewayStatus::default());
    let gateway_frames = gateway::start(
        config.clone(),
        id,
        links.clone(),
        client_listener,
        status.clone(),
    );
    let (frames, mut receiver) = mpsc::channel::<Frame>(65_536);
    tokio::spawn(link::accept(listener, frames));
    let mut process = StorageProcess {
        id,
        config,
        inbox: Inbox::new(id, initial.version(), InboxSettings::default()),
        initial,
        store: Store::new(),
        links,
        gateway: gateway_frames,
        status,
    };
    log::info(format_args!(
        "storage process {} on {} (RESP on {})",
        id.0, own.address, own.client
    ));
    tokio::spawn(async move {
        while let Some(frame) = receiver.recv().await {
            process.on_frame(frame);
        }
    });
    Ok(())
}

struct StorageProcess {
    id: ProcessId,
    config: ClusterConfig,
    inbox: Inbox,
    /// Which keys this process holds: the initial ring (reconfiguration is not built, and a
    /// Suspect message changes who is live, not who holds what).
    initial: Configuration,
    store: Store,
    links: Links,
    /// Frames for this process's gateway.
    gateway: mpsc::UnboundedSender<Frame>,
    status: Arc<GatewayStatus>,
}

impl StorageProcess {
    fn on_frame(&mut self, frame: Frame) {
        match frame {
            Frame::Deliver { router, deliveries } => {
                self.step(InboxInput::Deliver { router, deliveries })
            }
            Frame::SnapshotDeliver { delivery } => self.step(InboxInput::Snapshot(delivery)),
            Frame::BasicRead {
                sender,
                read_id,
                planned_at,
                payload,
            } => {
                let frame = match self.inbox.check_basic(planned_at) {
                    Err(refusal) => Frame::BasicRefused {
                        sender,
                        read_id,
                        refusal,
                    },
                    Ok(()) => Frame::BasicAnswer {
                        sender,
                        read_id,
                        outcomes: self.read(&payload),
                    },
                };
                self.to_gateway(sender, frame);
            }
            // Everything else is for the gateway.
            frame => {
                let _ = self.gateway.send(frame);
            }
        }
    }

    fn step(&mut self, input: InboxInput) {
        let mut effects = Vec::new();
        self.inbox.step(input, &mut effects);
        for effect in effects {
            match effect {
                InboxEffect::Deliver(delivery) => self.on_deliver(delivery),
                InboxEffect::ExecuteSnapshot(snapshot) => self.on_snapshot(snapshot),
                InboxEffect::RefuseSnapshot { delivery, refusal } => {
                    let sender = delivery.read.sender;
                    let read_id = delivery.read.read_id;
                    let frame = Frame::SnapshotRefused {
                        sender,
                        read_id,
                        refusal,
                    };
                    self.to_gateway(sender, frame);
                }
                InboxEffect::Confirm {
                    to,
                    process,
                    delivered,
                } => {
                    if let Some(router) = self.config.routers.get(to.0 as usize) {
                        let frame = Frame::Confirm { process, delivered };
                        self.links.send(router.address, frame);
                    }
                }
            }
        }
        self.status
            .delivered
            .store(self.inbox.delivered().0, Ordering::Relaxed);
        self.status
            .version
            .store(self.inbox.version().0, Ordering::Relaxed);
        self.status
            .keys
            .store(self.store.kv.len() as u64, Ordering::Relaxed);
    }

    /// Applies this process's share of a delivered message, in delivery order, and answers
    /// the gateway that sent it.
    fn on_deliver(&mut self, delivery: Delivery) {
        let envelope = delivery.envelope;
        if envelope.is_config() {
            log::info(format_args!(
                "configuration message at {}: now at version {}",
                delivery.timestamp, delivery.version.0
            ));
            return;
        }
        let share = match payload::share(&envelope.payload, &self.initial, self.id) {
            Ok(share) => share,
            Err(error) => {
                log::warn(format_args!(
                    "message {} has a malformed payload: {error}",
                    delivery.timestamp
                ));
                return;
            }
        };
        if share.is_empty() {
            return;
        }
        let (indexes, commands): (Vec<u32>, Vec<Command>) = share.into_iter().unzip();
        let operation = store::kv_operation(&Command::Pipeline { commands });
        let outcomes = pipeline_outcomes(&self.store.apply(&operation), indexes);
        let frame = Frame::Answer {
            sender: envelope.sender,
            sequence: envelope.sequence,
            outcomes,
        };
        self.to_gateway(envelope.sender, frame);
    }

    /// A snapshot read at its point of the stream (§6.7).
    fn on_snapshot(&mut self, snapshot: SnapshotDelivery) {
        let sender = snapshot.read.sender;
        let frame = Frame::SnapshotAnswer {
            sender,
            read_id: snapshot.read.read_id,
            at: snapshot.at,
            outcomes: self.read(&snapshot.read.payload),
        };
        self.to_gateway(sender, frame);
    }

    /// Executes the held read sub-commands of a payload on the current state.
    fn read(&self, payload: &[u8]) -> Vec<(u32, Outcome)> {
        let Ok(share) = payload::share(payload, &self.initial, self.id) else {
            return Vec::new();
        };
        share
            .into_iter()
            .filter(|(_, command)| command.is_read())
            .map(|(index, command)| {
                let bytes = self.store.query(&store::kv_operation(&command));
                let outcome =
                    Outcome::decode(&bytes).unwrap_or(Outcome::Error(kv::KvError::Malformed));
                (index, outcome)
            })
            .collect()
    }

    fn to_gateway(&self, sender: ProcessId, frame: Frame) {
        let Some(process) = storage_of_sender(sender) else {
            return;
        };
        if process == self.id {
            let _ = self.gateway.send(frame);
        } else if let Some(storage) = self.config.storage(process) {
            self.links.send(storage.address, frame);
        }
    }
}

fn pipeline_outcomes(bytes: &[u8], indexes: Vec<u32>) -> Vec<(u32, Outcome)> {
    match Outcome::decode(bytes) {
        Ok(Outcome::Pipeline(outcomes)) if outcomes.len() == indexes.len() => {
            indexes.into_iter().zip(outcomes).collect()
        }
        Ok(other) => indexes
            .into_iter()
            .map(|index| (index, other.clone()))
            .collect(),
        Err(error) => indexes
            .into_iter()
            .map(|index| (index, Outcome::Error(error.clone())))
            .collect(),
    }
}
