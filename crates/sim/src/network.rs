//! The simulated network: delay, loss, duplication, reordering and partitions.

use std::collections::BTreeMap;
use stdx::Prng;
use wire::{ClientId, Message, ReplicaIndex};

/// An address on the simulated network.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Endpoint {
    Replica(ReplicaIndex),
    Client(ClientId),
}

#[derive(Clone, Debug)]
pub struct Packet {
    pub from: Endpoint,
    pub to: Endpoint,
    pub message: Message,
}

/// Messages in flight, keyed by (delivery tick, sequence) so that delivery order is
/// deterministic.
#[derive(Default)]
pub struct Network {
    in_flight: BTreeMap<(u64, u64), Packet>,
    sequence: u64,
    /// `blocked[from][to]`: replica-to-replica links that drop everything (partitions).
    blocked: Vec<Vec<bool>>,
    pub loss_percent: u64,
    pub duplicate_percent: u64,
    pub delay_ticks_max: u64,
    pub sent: u64,
    pub dropped: u64,
    /// Like the runtime's link (`FRAME_BYTES_MAX`), a replica-to-replica message whose frame
    /// is larger than this is dropped (`--frame-bytes`; none by default).
    pub frame_bytes_max: Option<u64>,
    /// Replica-to-replica messages dropped for their size.
    pub dropped_oversized: u64,
    /// `Message::Part`s sent (parts of messages over the replicas' `message_bytes_max`).
    pub parts_sent: u64,
}

impl Network {
    pub fn new(
        replica_count: usize,
        loss_percent: u64,
        duplicate_percent: u64,
        delay_ticks_max: u64,
    ) -> Network {
        Network {
            blocked: vec![vec![false; replica_count]; replica_count],
            loss_percent,
            duplicate_percent,
            delay_ticks_max,
            ..Network::default()
        }
    }

    pub fn send(&mut self, prng: &mut Prng, now: u64, packet: Packet) {
        self.sent += 1;
        if matches!(packet.message, Message::Part { .. }) {
            self.parts_sent += 1;
        }
        if let (Some(limit), Endpoint::Replica(_), Endpoint::Replica(_)) =
            (self.frame_bytes_max, packet.from, packet.to)
        {
            // The bound first: encoding every message would slow every run down.
            if vr::message_bytes(&packet.message) > limit
                && wire::encode(&packet.message).len() as u64 > limit
            {
                self.dropped += 1;
                self.dropped_oversized += 1;
                return;
            }
        }
        if self.is_blocked(packet.from, packet.to) || prng.percent(self.loss_percent) {
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

    /// Removes and returns the packets due at or before `now`, in delivery order.
    pub fn due(&mut self, now: u64) -> Vec<Packet> {
        let later = self.in_flight.split_off(&(now + 1, 0));
        let due = std::mem::replace(&mut self.in_flight, later);
        due.into_values().collect()
    }

    /// Puts a packet back for a later tick (its receiver is paused).
    pub fn hold(&mut self, now: u64, packet: Packet) {
        self.sequence += 1;
        self.in_flight.insert((now + 1, self.sequence), packet);
    }

    /// Drops everything addressed to `to` (its process died: TCP connections reset).
    pub fn drop_to(&mut self, to: Endpoint) {
        let before = self.in_flight.len();
        self.in_flight.retain(|_, packet| packet.to != to);
        self.dropped += (before - self.in_flight.len()) as u64;
    }

    fn is_blocked(&self, from: Endpoint, to: Endpoint) -> bool {
        match (from, to) {
            (Endpoint::Replica(from), Endpoint::Replica(to)) => {
                self.blocked[from.0 as usize][to.0 as usize]
            }
            _ => false,
        }
    }

    /// A random partition: symmetric (two sides) or one-way (one side cannot reach the other).
    /// Returns a description for the trace.
    pub fn partition(&mut self, prng: &mut Prng) -> String {
        let replica_count = self.blocked.len();
        let mut side: Vec<bool> = (0..replica_count).map(|_| prng.percent(50)).collect();
        if side.iter().all(|left| *left) || side.iter().all(|left| !*left) {
            side[prng.below(replica_count as u64) as usize] ^= true;
        }
        let one_way = prng.percent(30);
        for from in 0..replica_count {
            for to in 0..replica_count {
                let across = side[from] != side[to];
                self.blocked[from][to] = across && (!one_way || side[from]);
            }
        }
        let left: Vec<usize> = (0..replica_count).filter(|index| side[*index]).collect();
        let right: Vec<usize> = (0..replica_count).filter(|index| !side[*index]).collect();
        format!(
            "partition {:?} {} {:?}",
            left,
            if one_way { "-/->" } else { "<-/->" },
            right
        )
    }

    pub fn heal(&mut self) {
        for row in &mut self.blocked {
            row.iter_mut().for_each(|blocked| *blocked = false);
        }
    }
}
