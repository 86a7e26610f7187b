//! The E-Cast routing function of Rubberband (§5.3, §6.3): `destset`, `apply`, `suspects`.

use crate::configuration::{Configuration, ProcessId};
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
