//! What a RESP command becomes on its way through E-Cast, and back: the gateway splits the
//! planned `kv::Command` into single-key sub-commands (the message's payload); each storage
//! process executes the sub-commands whose key it holds (its share), in payload order, as one
//! `kv::Command::Pipeline` on its `store::Store`, and answers their outcomes by index; the
//! gateway merges one outcome per index into the outcome the whole command would have had.

use kv::{Command, KvError, Outcome};
use placement::{Configuration, KeyMapping, Position, PositionSet, ProcessId};
use serde::{Deserialize, Serialize};

const PAYLOAD_FORMAT: u8 = 1;

/// How per-key outcomes become the command's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Merge {
    /// One sub-command: its outcome.
    Single,
    /// MSET: `Ok`.
    MultiPut,
    /// MGET: the values in order.
    MultiGet,
    /// DEL over several keys: the sum of the per-key counts.
    MultiDelete,
}

/// A command split for E-Cast.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    /// Each touches exactly one key.
    pub commands: Vec<Command>,
    pub merge: Merge,
    pub is_read: bool,
}

impl Split {
    /// Whether the reply needs the storage processes' outcomes (a plain SET or MSET replies
    /// `OK` once its message is stable; everything else carries data).
    pub fn needs_answers(&self) -> bool {
        match self.merge {
            Merge::MultiPut => false,
            Merge::Single => !matches!(self.commands[0], Command::Put { .. }),
            Merge::MultiGet | Merge::MultiDelete => true,
        }
    }

    pub fn positions(&self) -> Vec<Position> {
        self.commands
            .iter()
            .map(|command| position(key_of(command)))
            .collect()
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = vec![PAYLOAD_FORMAT];
        bytes.extend(
            postcard::to_allocvec(&Payload {
                commands: self.commands.clone(),
            })
            .expect("payloads serialise"),
        );
        bytes
    }

    /// Merges one outcome per sub-command (index order).
    pub fn merge(&self, outcomes: &[Outcome]) -> Outcome {
        assert_eq!(outcomes.len(), self.commands.len());
        if let Some(error) = outcomes
            .iter()
            .find(|outcome| matches!(outcome, Outcome::Error(_)))
        {
            return error.clone();
        }
        match self.merge {
            Merge::Single => outcomes[0].clone(),
            Merge::MultiPut => Outcome::Ok,
            Merge::MultiGet => Outcome::Values(
                outcomes
                    .iter()
                    .map(|outcome| match outcome {
                        Outcome::Value(value) => value.clone(),
                        _ => None,
                    })
                    .collect(),
            ),
            Merge::MultiDelete => Outcome::Integer(
                outcomes
                    .iter()
                    .map(|outcome| match outcome {
                        Outcome::Integer(count) => *count,
                        _ => 0,
                    })
                    .sum(),
            ),
        }
    }
}

/// Why a command cannot go through E-Cast yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SplitError {
    /// DBSIZE and the like need every partition's count; not built.
    NotPartitionable,
}

/// Splits a planned command.
pub fn split(command: &Command) -> Result<Split, SplitError> {
    let single = |command: &Command| Split {
        commands: vec![command.clone()],
        merge: Merge::Single,
        is_read: command.is_read(),
    };
    match command {
        Command::Get { .. }
        | Command::Put { .. }
        | Command::Delete { .. }
        | Command::Increment { .. }
        | Command::Append { .. }
        | Command::GetSet { .. }
        | Command::Set { .. } => Ok(single(command)),
        Command::MultiPut { pairs } => Ok(Split {
            commands: pairs
                .iter()
                .map(|(key, value)| Command::Put {
                    key: key.clone(),
                    value: value.clone(),
                })
                .collect(),
            merge: Merge::MultiPut,
            is_read: false,
        }),
        Command::MultiGet { keys } => Ok(Split {
            commands: keys
                .iter()
                .map(|key| Command::Get { key: key.clone() })
                .collect(),
            merge: Merge::MultiGet,
            is_read: true,
        }),
        Command::MultiDelete { keys } => {
            // Each distinct key is deleted once (DEL k k counts k once, as Redis does).
            let mut distinct: Vec<&kv::Bytes> = Vec::new();
            for key in keys {
                if !distinct.contains(&key) {
                    distinct.push(key);
                }
            }
            Ok(Split {
                commands: distinct
                    .into_iter()
                    .map(|key| Command::Delete { key: key.clone() })
                    .collect(),
                merge: Merge::MultiDelete,
                is_read: false,
            })
        }
        Command::Count | Command::Pipeline { .. } => Err(SplitError::NotPartitionable),
    }
}

#[derive(Serialize, Deserialize)]
struct Payload {
    commands: Vec<Command>,
}

/// A key's ring position (`KeyMapping::Hash`).
pub fn position(key: &[u8]) -> Position {
    KeyMapping::Hash.position(key)
}

fn key_of(command: &Command) -> &[u8] {
    command.keys().first().copied().unwrap_or_default()
}

/// A storage process's share of a payload: the sub-commands whose key it holds under
/// `configuration`, with their indexes, in payload order. Malformed bytes give no share.
pub fn share(
    payload: &[u8],
    configuration: &Configuration,
    process: ProcessId,
) -> Result<Vec<(u32, Command)>, KvError> {
    let Some((&PAYLOAD_FORMAT, rest)) = payload.split_first() else {
        return Err(KvError::Malformed);
    };
    let payload: Payload = postcard::from_bytes(rest).map_err(|_| KvError::Malformed)?;
    Ok(payload
        .commands
        .into_iter()
        .enumerate()
        .filter(|(_, command)| {
            command.keys().len() == 1
                && configuration
                    .replicas(position(key_of(command)))
                    .contains(&process)
        })
        .map(|(index, command)| (index as u32, command))
        .collect())
}

/// The sub-commands (with their indexes) whose key lies in `holds`: a storage process's share
/// under the holdings its migrator passes with each item (the ring at the item's place in the
/// stream, which changes with keyspace messages).
pub fn share_in(payload: &[u8], holds: &PositionSet) -> Result<Vec<(u32, Command)>, KvError> {
    let Some((&PAYLOAD_FORMAT, rest)) = payload.split_first() else {
        return Err(KvError::Malformed);
    };
    let payload: Payload = postcard::from_bytes(rest).map_err(|_| KvError::Malformed)?;
    Ok(payload
        .commands
        .into_iter()
        .enumerate()
        .filter(|(_, command)| {
            command.keys().len() == 1 && holds.contains(position(key_of(command)))
        })
        .map(|(index, command)| (index as u32, command))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multi_key_delete_counts_each_distinct_key_once() {
        let split = split(&Command::MultiDelete {
            keys: vec![b"a".to_vec(), b"b".to_vec(), b"a".to_vec()],
        })
        .unwrap();
        assert_eq!(split.commands.len(), 2);
        let merged = split.merge(&[Outcome::Integer(1), Outcome::Integer(0)]);
        assert_eq!(merged, Outcome::Integer(1));
    }

    #[test]
    fn every_key_of_a_payload_is_in_exactly_the_shares_of_its_replicas() {
        let members: Vec<(ProcessId, Position)> = (0..6u64)
            .map(|index| (ProcessId(index + 1), Position(index * (u64::MAX / 6))))
            .collect();
        let configuration = Configuration::with_ring(3, &members);
        let split = split(&Command::MultiPut {
            pairs: (0..20u8).map(|key| (vec![key], vec![key])).collect(),
        })
        .unwrap();
        let payload = split.encode();
        let mut holders = [0; 20];
        for (process, _) in &members {
            for (index, _) in share(&payload, &configuration, *process).unwrap() {
                holders[index as usize] += 1;
            }
        }
        assert!(holders.iter().all(|count| *count == 3));
    }
}
