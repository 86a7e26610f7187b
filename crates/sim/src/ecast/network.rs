//! The E-Cast run's network: routers, storage processes and gateways exchange `Payload`s with
//! delay (so reordering), loss and duplication on every link; partitions cut router links.

use ecast::{Delivery, ReadRefusal, Sequence, SnapshotDelivery, SnapshotRead, Timestamp};
use placement::{ConfigVersion, ProcessId};
use std::collections::BTreeMap;
use stdx::Prng;
use vr::ReplicaIndex;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Endpoint {
    Router(u8),
    Storage(ProcessId),
    Gateway(usize),
}

#[derive(Clone, Debug)]
pub enum Payload {
    /// VR traffic: between routers, and gateways' requests and the replies.
    Vr(vr::Message),
    /// Forwarder → storage process.
    Deliver {
        router: ReplicaIndex,
        deliveries: Vec<Delivery>,
    },
    /// Storage process → router (its forwarder).
    Confirm {
        process: ProcessId,
        delivered: Timestamp,
    },
    /// Forwarder → gateway.
    Stable {
        sequence: Sequence,
        timestamp: Timestamp,
    },
    /// Storage process → gateway: the values of a delivered read (keys this process holds).
    Answer {
        sequence: Sequence,
        values: Vec<(u64, Option<i64>)>,
    },
    /// Gateway → router.
    SnapshotRead(SnapshotRead),
    /// Forwarder → storage process.
    SnapshotDeliver(SnapshotDelivery),
    /// Router or storage process → gateway.
    SnapshotRefused { read_id: u64, refusal: ReadRefusal },
    /// Gateway → storage process: a basic read (§6.7) planned at `planned_at`.
    BasicRead {
        read_id: u64,
        planned_at: ConfigVersion,
        key: u64,
    },
    /// Storage process → gateway.
    BasicAnswer {
        read_id: u64,
        key: u64,
        value: Option<i64>,
    },
    /// Storage process → gateway: the process's configuration version differs.
    BasicRefused { read_id: u64, refusal: ReadRefusal },
    /// Storage process → gateway: the values at the read's point `at`. A duplicated read may
    /// be stamped twice at different points: only answers for one point may be combined.
    SnapshotAnswer {
        read_id: u64,
        at: Timestamp,
        values: Vec<(u64, Option<i64>)>,
    },
    /// Storage process → storage process: partial live migration (direct, not E-Cast).
    Migration(placement::migration::MigrationMessage),
}

impl Payload {
    pub fn kind(&self) -> u64 {
        match self {
            Payload::Vr(message) => 1 + message.name().len() as u64,
            Payload::Deliver { deliveries, .. } => 100 + deliveries.len() as u64,
            Payload::Confirm { delivered, .. } => 200 + delivered.0 % 50,
            Payload::Stable { .. } => 300,
            Payload::Answer { .. } => 400,
            Payload::SnapshotRead(_) => 500,
            Payload::SnapshotDeliver(_) => 600,
            Payload::SnapshotRefused { .. } => 700,
            Payload::SnapshotAnswer { at, .. } => 800 + at.0 % 50,
            Payload::BasicRead { .. } => 900,
            Payload::BasicAnswer { .. } => 1000,
            Payload::BasicRefused { .. } => 1100,
            Payload::Migration(message) => {
                use placement::migration::MigrationMessage;
                match message {
                    MigrationMessage::Chunk(chunk) => 1200 + u64::from(chunk.index % 50),
                    MigrationMessage::ChunkAck { index, .. } => 1300 + u64::from(index % 50),
                    MigrationMessage::Waiting { .. } => 1400,
                    MigrationMessage::Installed { .. } => 1500,
                    MigrationMessage::InstalledAck { .. } => 1600,
                    MigrationMessage::Behind { .. } => 1700,
                    MigrationMessage::Probe { .. } => 1800,
                }
            }
        }
    }
}

#[derive(Clone, Debug)]
pub struct Packet {
    pub from: Endpoint,
    pub to: Endpoint,
    pub payload: Payload,
}

pub struct Network {
    in_flight: BTreeMap<(u64, u64), Packet>,
    sequence: u64,
    /// `blocked[from][to]` between routers.
    blocked: Vec<Vec<bool>>,
    pub loss_percent: u64,
    pub duplicate_percent: u64,
    pub delay_ticks_max: u64,
    pub sent: u64,
    pub dropped: u64,
}

impl Network {
    pub fn new(
        routers: usize,
        loss_percent: u64,
        duplicate_percent: u64,
        delay_ticks_max: u64,
    ) -> Network {
        Network {
            in_flight: BTreeMap::new(),
            sequence: 0,
            blocked: vec![vec![false; routers]; routers],
            loss_percent,
            duplicate_percent,
            delay_ticks_max,
            sent: 0,
            dropped: 0,
        }
    }

    pub fn send(&mut self, prng: &mut Prng, now: u64, packet: Packet) {
        self.sent += 1;
        let blocked = match (packet.from, packet.to) {
            (Endpoint::Router(from), Endpoint::Router(to)) => {
                self.blocked[from as usize][to as usize]
            }
            _ => false,
        };
        if blocked || prng.percent(self.loss_percent) {
            self.dropped += 1;
            return;
        }
        let copies = if prng.percent(self.duplicate_percent) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay = prng.range_inclusive(1, self.delay_ticks_max.max(1));
            self.sequence += 1;
            self.in_flight
                .insert((now + delay, self.sequence), packet.clone());
        }
    }

    pub fn due(&mut self, now: u64) -> Vec<Packet> {
        let later = self.in_flight.split_off(&(now + 1, 0));
        std::mem::replace(&mut self.in_flight, later)
            .into_values()
            .collect()
    }

    pub fn drop_to(&mut self, to: Endpoint) {
        let before = self.in_flight.len();
        self.in_flight.retain(|_, packet| packet.to != to);
        self.dropped += (before - self.in_flight.len()) as u64;
    }

    /// A random router partition, symmetric or one-way; returns a description.
    pub fn partition(&mut self, prng: &mut Prng) -> String {
        let routers = self.blocked.len();
        let mut side: Vec<bool> = (0..routers).map(|_| prng.percent(50)).collect();
        if side.iter().all(|left| *left) || side.iter().all(|left| !*left) {
            side[prng.below(routers as u64) as usize] ^= true;
        }
        let one_way = prng.percent(30);
        for from in 0..routers {
            for to in 0..routers {
                self.blocked[from][to] = side[from] != side[to] && (!one_way || side[from]);
            }
        }
        format!("router partition {side:?} one_way={one_way}")
    }

    pub fn heal(&mut self) {
        for row in &mut self.blocked {
            row.iter_mut().for_each(|blocked| *blocked = false);
        }
    }
}
