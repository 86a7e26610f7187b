//! The E-Cast routing function of Rubberband (§5.3, §6.3): `destset`, `apply`, `suspects`.

use crate::configuration::{ConfigVersion, Configuration, Member, ProcessId};
use crate::message::{
    self, ConfigChange, ConfigMessage, MembershipChange, Refusal, Transformation,
};
use crate::plan::Instruction;
use crate::position::{Position, PositionSet};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// What a data message touches, as ring positions (the namespace's `KeyMapping` has already
/// turned keys into positions).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Target {
    /// Point keys.
    Points(Vec<Position>),
    /// A key range (one arc for range placement, the whole ring for hash placement).
    Range(PositionSet),
}

/// A message routed by E-Cast.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Message {
    /// Served by one live replica per key (read-one); `replica_offset` is the client's random
    /// tag choosing which replica of each group (§6.3), for load balance.
    Read {
        sender: ProcessId,
        target: Target,
        replica_offset: u64,
    },
    /// Served by every live replica of every key (write-all).
    Write { sender: ProcessId, target: Target },
    Config {
        sender: ProcessId,
        message: ConfigMessage,
    },
}

/// The destination set of `message` under `configuration` (the configuration at the message's
/// point of the global sequence). Suspected processes are never destinations: they deliver
/// nothing, and E-Cast counts them as done when deciding stability.
pub fn destset(configuration: &Configuration, message: &Message) -> BTreeSet<ProcessId> {
    match message {
        Message::Read {
            target: Target::Points(points),
            replica_offset,
            ..
        } => {
            let mut chosen = BTreeSet::new();
            configuration.each_live_replicas(points, |live| {
                let index = usize::try_from(*replica_offset % live.len().max(1) as u64).ok();
                chosen.extend(index.and_then(|index| live.get(index)).copied());
            });
            chosen
        }
        Message::Read {
            target: Target::Range(range),
            ..
        } => {
            // A range with a partition that has no live replica is served partially: the
            // reachable partitions still answer.
            configuration
                .read_cover(range)
                .unwrap_or_else(|| partial_cover(configuration, range))
        }
        Message::Write {
            target: Target::Points(points),
            ..
        } => {
            let mut destinations = BTreeSet::new();
            configuration.each_live_replicas(points, |live| destinations.extend(live));
            destinations
        }
        Message::Write {
            target: Target::Range(range),
            ..
        } => configuration
            .covering(range)
            .into_iter()
            .flat_map(|partition| partition.replicas)
            .filter(|process| configuration.is_live(*process))
            .collect(),
        Message::Config { message, .. } => affected(configuration, message),
    }
}

/// `destset` for a stream of messages routed under few configurations (the router state's
/// per-message routing): point writes — nearly every data message — are routed through the
/// ring and each member's live replica group computed once per configuration version instead
/// of once per message. Every other message goes to `destset` itself. The cache is keyed by
/// version alone, so one cache must only ever see configurations of one history (where a
/// version names one configuration), as one router state's are.
#[derive(Clone, Debug, Default)]
pub struct RingCache {
    version: Option<ConfigVersion>,
    /// The ring, sorted by identifier.
    ring: Vec<Member>,
    /// Per ring index: the live processes among that member and its successors replicating
    /// its primary range (`Configuration::live_replicas` of a position in its range).
    groups: Vec<Vec<ProcessId>>,
}

/// A cache is not state: any two compare equal (a router state holding one compares by its
/// replicated fields only).
impl PartialEq for RingCache {
    fn eq(&self, _: &RingCache) -> bool {
        true
    }
}

impl Eq for RingCache {}

impl RingCache {
    /// Exactly `destset(configuration, message)`, as a sorted vector without duplicates (a
    /// handful of processes: cheaper to build than a set).
    pub fn destinations(
        &mut self,
        configuration: &Configuration,
        message: &Message,
    ) -> Vec<ProcessId> {
        let Message::Write {
            target: Target::Points(points),
            ..
        } = message
        else {
            return destset(configuration, message).into_iter().collect();
        };
        self.refresh(configuration);
        let mut destinations = Vec::new();
        if self.ring.is_empty() {
            return destinations;
        }
        for position in points {
            let after = self
                .ring
                .partition_point(|member| member.identifier <= *position);
            // Below the smallest identifier the arc of the largest one wraps around.
            let owner = if after == 0 {
                self.ring.len() - 1
            } else {
                after - 1
            };
            destinations.extend_from_slice(&self.groups[owner]);
        }
        destinations.sort_unstable();
        destinations.dedup();
        destinations
    }

    fn refresh(&mut self, configuration: &Configuration) {
        if self.version == Some(configuration.version()) {
            return;
        }
        self.version = Some(configuration.version());
        self.ring = configuration.ring();
        let group_size = usize::from(configuration.replication()).min(self.ring.len());
        self.groups = (0..self.ring.len())
            .map(|index| {
                (0..group_size)
                    .map(|offset| &self.ring[(index + offset) % self.ring.len()])
                    .filter(|member| member.live)
                    .map(|member| member.process)
                    .collect()
            })
            .collect();
    }
}

fn partial_cover(configuration: &Configuration, range: &PositionSet) -> BTreeSet<ProcessId> {
    let mut cover = BTreeSet::new();
    for partition in configuration.covering(range) {
        let served = partition
            .replicas
            .iter()
            .any(|process| cover.contains(process));
        if !served {
            cover.extend(
                partition
                    .replicas
                    .iter()
                    .copied()
                    .find(|p| configuration.is_live(*p)),
            );
        }
    }
    cover
}

/// The processes a configuration message concerns: the processes it names and every process
/// with an instruction, if live.
fn affected(configuration: &Configuration, message: &ConfigMessage) -> BTreeSet<ProcessId> {
    let mut processes = BTreeSet::new();
    match &message.change {
        ConfigChange::Membership(
            MembershipChange::Join { process }
            | MembershipChange::Leave { process }
            | MembershipChange::Suspect { process },
        ) => {
            processes.insert(*process);
        }
        ConfigChange::Keyspace(keyspace) => {
            match keyspace.transformation {
                Transformation::Expand { process, .. }
                | Transformation::Contract { process }
                | Transformation::Rebalance { process, .. } => {
                    processes.insert(process);
                }
                Transformation::Replace { replaced, standby } => {
                    processes.extend([replaced, standby]);
                }
            }
            for instruction in &keyspace.instructions {
                match instruction {
                    Instruction::Copy { from, to, .. } => processes.extend([*from, *to]),
                    Instruction::Delete { at, .. } => {
                        processes.insert(*at);
                    }
                }
            }
        }
    }
    // A join names a process the configuration does not know yet: it is the destination.
    let joining = matches!(
        message.change,
        ConfigChange::Membership(MembershipChange::Join { .. })
    );
    processes.retain(|process| joining || configuration.is_live(*process));
    processes
}

/// E-Cast's `apply`: the configuration after `message`. Data messages and refused
/// configuration messages leave it unchanged; the refusal is returned for the submitter.
pub fn apply(configuration: &Configuration, message: &Message) -> (Configuration, Option<Refusal>) {
    match message {
        Message::Config {
            sender,
            message: config_message,
        } => {
            if !configuration.is_live(*sender) && configuration.state(*sender).is_some() {
                // Messages from suspected processes have no effect (§6.3).
                return (configuration.clone(), None);
            }
            match message::apply(configuration, config_message) {
                Ok(next) => (next, None),
                Err(refusal) => (configuration.clone(), Some(refusal)),
            }
        }
        Message::Read { .. } | Message::Write { .. } => (configuration.clone(), None),
    }
}

/// E-Cast's `suspects`: the processes a message declares failed.
pub fn suspects(message: &Message) -> BTreeSet<ProcessId> {
    match message {
        Message::Config {
            message:
                ConfigMessage {
                    change: ConfigChange::Membership(MembershipChange::Suspect { process }),
                    ..
                },
            ..
        } => BTreeSet::from([*process]),
        _ => BTreeSet::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::configuration::{ProcessState, REPLICATION_MAX};

    fn configuration(members: u64, replication: u8) -> Configuration {
        let members: Vec<(ProcessId, Position)> = (0..members)
            .map(|index| (ProcessId(index + 1), Position(index * 1000 + 17)))
            .collect();
        Configuration::with_ring(replication, &members)
    }

    #[test]
    fn the_ring_cache_routes_every_point_write_as_destset_does() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut cache = RingCache::default();
        let mut checked = 0;
        for replication in 1..=REPLICATION_MAX.min(4) {
            for members in [1, 2, 3, 6] {
                let mut configuration = configuration(members, replication);
                for round in 0..3 {
                    if round > 0 {
                        // A suspicion under a new version (the cache must notice).
                        let process = ProcessId(1 + next() % members);
                        let identifier = configuration.state(process).and_then(|s| s.identifier());
                        if let Some(identifier) = identifier {
                            configuration.set(process, ProcessState::Suspected { identifier });
                        }
                        configuration.advance_version();
                    }
                    for _ in 0..200 {
                        let points: Vec<Position> = (0..1 + next() % 5)
                            .map(|_| Position(next() % (members * 1000 + 50)))
                            .collect();
                        let message = Message::Write {
                            sender: ProcessId(99),
                            target: Target::Points(points),
                        };
                        assert_eq!(
                            cache.destinations(&configuration, &message),
                            Vec::from_iter(destset(&configuration, &message)),
                            "{configuration:?} {message:?}"
                        );
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 1000);
    }
}
