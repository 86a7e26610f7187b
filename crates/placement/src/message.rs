//! Configuration messages (Rubberband §6.4) and `apply`.

use crate::configuration::{ConfigVersion, Configuration, ProcessId, ProcessState};
use crate::plan::{self, Instruction, Migration};
use crate::position::{Position, PositionSet};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A configuration message as submitted to E-Cast.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigMessage {
    /// The version the sender computed the message against (paper footnote 4).
    pub based_on: ConfigVersion,
    pub change: ConfigChange,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConfigChange {
    Membership(MembershipChange),
    Keyspace(KeyspaceMessage),
}

/// Membership messages change the set of storage processes, not the placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MembershipChange {
    /// A new storage process joins as a standby.
    Join { process: ProcessId },
    /// A standby leaves the system (a ring member must be contracted or replaced first).
    Leave { process: ProcessId },
    /// A process is declared failed: a standby is forgotten, a ring member stays on the ring
    /// as suspected until it is contracted or replaced.
    Suspect { process: ProcessId },
}

/// The four keyspace transformations of §6.4.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Transformation {
    /// A standby gets `identifier` and becomes active.
    Expand {
        process: ProcessId,
        identifier: Position,
    },
    /// A ring member leaves the ring: an active one becomes a standby, a suspected one is
    /// forgotten.
    Contract { process: ProcessId },
    /// `standby` takes over the identifier of the ring member `replaced`, which becomes a
    /// standby if it was active and is forgotten if it was suspected.
    Replace {
        replaced: ProcessId,
        standby: ProcessId,
    },
    /// An active process moves to `identifier`.
    Rebalance {
        process: ProcessId,
        identifier: Position,
    },
}

/// A keyspace message: the transformation and the instruction list that carries it out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyspaceMessage {
    pub transformation: Transformation,
    pub instructions: Vec<Instruction>,
}

/// Why `apply` refused a configuration message; a refused message has no effect.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Refusal {
    /// A keyspace message computed against an older configuration (footnote 4's conflict).
    StaleVersion {
        based_on: ConfigVersion,
        current: ConfigVersion,
    },
    /// A message computed against a version that does not exist yet.
    FutureVersion {
        based_on: ConfigVersion,
        current: ConfigVersion,
    },
    /// A membership message whose process changed after the message's version.
    Conflict {
        process: ProcessId,
        changed_at: ConfigVersion,
    },
    /// The process is not part of the configuration.
    UnknownProcess { process: ProcessId },
    /// A join for a process that is already part of the configuration.
    AlreadyMember { process: ProcessId },
    /// The transformation needs a standby.
    NotStandby { process: ProcessId },
    /// The transformation needs a ring member (active or suspected).
    NotOnRing { process: ProcessId },
    /// The transformation needs an active, unsuspected process.
    NotActive { process: ProcessId },
    /// A ring member cannot leave or be forgotten without a keyspace message first.
    OnRing { process: ProcessId },
    /// Another ring member already holds the identifier.
    IdentifierTaken {
        identifier: Position,
        holder: ProcessId,
    },
    /// A rebalance to the identifier the process already has.
    NoChange { process: ProcessId },
    /// The ring would have fewer members than the replication factor (a replica lost).
    BelowReplication { ring_size: usize, replication: u8 },
    /// No live process holds this data: it is already lost and cannot be copied.
    NoLiveSource { range: PositionSet },
    /// After the change this data would have no live replica.
    NoLiveReplica { range: PositionSet },
    /// The instruction list does not carry out the transformation safely.
    InvalidInstructions { reason: String },
    /// The planner met more minimal solutions than it may enumerate.
    TooManySolutions { count: usize },
    /// `vr` partitions above replication 1: the change would start a group whose name does not
    /// fit a destination id (`placement::groups`: an owner id from 2^30, or version 2^31).
    UnnameableGroup {
        owner: ProcessId,
        version: ConfigVersion,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::StaleVersion { based_on, current } => write!(
                formatter,
                "computed against version {} but the configuration is at {}",
                based_on.0, current.0
            ),
            Refusal::FutureVersion { based_on, current } => write!(
                formatter,
                "computed against version {} which is after the current {}",
                based_on.0, current.0
            ),
            Refusal::Conflict { process, changed_at } => {
                write!(formatter, "process {} changed at version {}", process.0, changed_at.0)
            }
            Refusal::UnknownProcess { process } => write!(formatter, "unknown process {}", process.0),
            Refusal::AlreadyMember { process } => {
                write!(formatter, "process {} is already a member", process.0)
            }
            Refusal::NotStandby { process } => write!(formatter, "process {} is not a standby", process.0),
            Refusal::NotOnRing { process } => write!(formatter, "process {} is not on the ring", process.0),
            Refusal::NotActive { process } => write!(formatter, "process {} is not active", process.0),
            Refusal::OnRing { process } => write!(
                formatter,
                "process {} is on the ring: contract or replace it first",
                process.0
            ),
            Refusal::IdentifierTaken { identifier, holder } => write!(
                formatter,
                "identifier {} is held by process {}",
                identifier.0, holder.0
            ),
            Refusal::NoChange { process } => {
                write!(formatter, "process {} already has that identifier", process.0)
            }
            Refusal::BelowReplication { ring_size: 0, .. } => write!(
                formatter,
                "the ring would be empty: its data would have no replica"
            ),
            Refusal::BelowReplication { ring_size, replication } => write!(
                formatter,
                "the ring would have {ring_size} members, fewer than the replication factor {replication}"
            ),
            Refusal::NoLiveSource { range } => write!(formatter, "no live process holds {range}"),
            Refusal::NoLiveReplica { range } => write!(formatter, "{range} would have no live replica"),
            Refusal::InvalidInstructions { reason } => write!(formatter, "invalid instructions: {reason}"),
            Refusal::TooManySolutions { count } => {
                write!(formatter, "{count} minimal solutions exceed the planner's limit")
            }
            Refusal::UnnameableGroup { owner, version } => write!(
                formatter,
                "a group owned by process {} born at version {} cannot be named (owner ids stay \
                 below 2^30)",
                owner.0, version.0
            ),
        }
    }
}

/// Applies a configuration message: the next configuration (version + 1), or why the message
/// has no effect. Keyspace messages must be computed against exactly the current version and
/// carry a correct instruction list; membership messages may be computed against an older
/// version as long as their process has not changed since.
pub fn apply(
    configuration: &Configuration,
    message: &ConfigMessage,
) -> Result<Configuration, Refusal> {
    let current = configuration.version();
    if message.based_on > current {
        return Err(Refusal::FutureVersion {
            based_on: message.based_on,
            current,
        });
    }
    let next = match &message.change {
        ConfigChange::Membership(change) => {
            apply_membership(configuration, message.based_on, *change)?
        }
        ConfigChange::Keyspace(keyspace) => {
            if message.based_on != current {
                return Err(Refusal::StaleVersion {
                    based_on: message.based_on,
                    current,
                });
            }
            let next = target(configuration, keyspace.transformation)?;
            let migration = Migration::between(configuration, &next)?;
            plan::check(configuration, &migration, &keyspace.instructions)?;
            next
        }
    };
    next.invariants();
    assert_eq!(next.version().0, current.0 + 1);
    Ok(next)
}

fn apply_membership(
    configuration: &Configuration,
    based_on: ConfigVersion,
    change: MembershipChange,
) -> Result<Configuration, Refusal> {
    let (MembershipChange::Join { process }
    | MembershipChange::Leave { process }
    | MembershipChange::Suspect { process }) = change;
    if let Some(info) = configuration.processes().get(&process) {
        if info.changed_at > based_on {
            return Err(Refusal::Conflict {
                process,
                changed_at: info.changed_at,
            });
        }
    }
    let mut next = configuration.clone();
    next.advance_version();
    match (change, configuration.state(process)) {
        (MembershipChange::Join { .. }, Some(_)) => return Err(Refusal::AlreadyMember { process }),
        (MembershipChange::Join { .. }, None) => next.set(process, ProcessState::Standby),
        (_, None) => return Err(Refusal::UnknownProcess { process }),
        (MembershipChange::Leave { .. }, Some(ProcessState::Standby))
        | (MembershipChange::Suspect { .. }, Some(ProcessState::Standby)) => next.remove(process),
        (MembershipChange::Leave { .. }, Some(_)) => return Err(Refusal::OnRing { process }),
        (MembershipChange::Suspect { .. }, Some(ProcessState::Active { identifier })) => {
            next.set(process, ProcessState::Suspected { identifier });
        }
        (MembershipChange::Suspect { .. }, Some(ProcessState::Suspected { .. })) => {
            return Err(Refusal::NotActive { process });
        }
    }
    Ok(next)
}

/// The configuration a transformation leads to (version + 1), checking only its membership
/// preconditions; data safety is checked by `Migration::between`.
pub fn target(
    configuration: &Configuration,
    transformation: Transformation,
) -> Result<Configuration, Refusal> {
    let mut next = configuration.clone();
    next.advance_version();
    let ring_size = configuration.ring().len();
    let replication = configuration.replication();
    match transformation {
        Transformation::Expand {
            process,
            identifier,
        } => {
            require_standby(configuration, process)?;
            require_free(configuration, identifier)?;
            next.set(process, ProcessState::Active { identifier });
        }
        Transformation::Contract { process } => {
            let state = require_on_ring(configuration, process)?;
            // An elastic configuration may run below `f` members, never with none.
            let ring_min = if configuration.is_elastic() {
                1
            } else {
                usize::from(replication)
            };
            if ring_size - 1 < ring_min {
                return Err(Refusal::BelowReplication {
                    ring_size: ring_size - 1,
                    replication,
                });
            }
            leave_ring(&mut next, process, state);
        }
        Transformation::Replace { replaced, standby } => {
            let state = require_on_ring(configuration, replaced)?;
            require_standby(configuration, standby)?;
            let identifier = state.identifier().expect("a ring member has an identifier");
            leave_ring(&mut next, replaced, state);
            next.set(standby, ProcessState::Active { identifier });
        }
        Transformation::Rebalance {
            process,
            identifier,
        } => {
            match configuration.state(process) {
                None => return Err(Refusal::UnknownProcess { process }),
                Some(ProcessState::Active {
                    identifier: current,
                }) if current == identifier => {
                    return Err(Refusal::NoChange { process });
                }
                Some(ProcessState::Active { .. }) => {}
                Some(_) => return Err(Refusal::NotActive { process }),
            }
            require_free(configuration, identifier)?;
            next.set(process, ProcessState::Active { identifier });
        }
    }
    Ok(next)
}

fn leave_ring(next: &mut Configuration, process: ProcessId, state: ProcessState) {
    if state.is_live() {
        next.set(process, ProcessState::Standby);
    } else {
        next.remove(process);
    }
}

fn require_standby(configuration: &Configuration, process: ProcessId) -> Result<(), Refusal> {
    match configuration.state(process) {
        None => Err(Refusal::UnknownProcess { process }),
        Some(ProcessState::Standby) => Ok(()),
        Some(_) => Err(Refusal::NotStandby { process }),
    }
}

fn require_on_ring(
    configuration: &Configuration,
    process: ProcessId,
) -> Result<ProcessState, Refusal> {
    match configuration.state(process) {
        None => Err(Refusal::UnknownProcess { process }),
        Some(ProcessState::Standby) => Err(Refusal::NotOnRing { process }),
        Some(state) => Ok(state),
    }
}

fn require_free(configuration: &Configuration, identifier: Position) -> Result<(), Refusal> {
    match configuration.holder_of(identifier) {
        Some(holder) => Err(Refusal::IdentifierTaken { identifier, holder }),
        None => Ok(()),
    }
}
