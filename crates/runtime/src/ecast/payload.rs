//! What a RESP command becomes on its way through E-Cast, and back: the gateway splits the
//! planned `kv::Command` into single-key sub-commands (the message's payload); each storage
//! process executes the sub-commands whose key it holds (its share), in payload order, as one
//! `kv::Command::Pipeline` on its `store::Store`, and answers their outcomes by index; the
//! gateway merges one outcome per index into the outcome the whole command would have had.

use kv::{Command, KvError, Outcome};
use placement::{Configuration, KeyMapping, Position, PositionSet, ProcessId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

/// A payload carrying a command without a key (`Survey`).
const SURVEY_FORMAT: u8 = 2;

/// A command without a key, over the whole ring: DBSIZE, KEYS and SCAN (reads), FLUSHALL and
/// FLUSHDB (a write).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Survey {
    /// How many keys: the sum of the arcs' counts.
    Count,
    /// The keys matching `pattern` (every key without one), sorted.
    Keys { pattern: Option<Vec<u8>> },
    /// Delete every key (every replica of every arc).
    Flush,
}

/// A survey planned against a configuration: the message's parts are its arcs (the primary
/// ranges, one part each). A read is routed as a range read of all of them (a minimal cover of
/// live replicas); a flush as a point write to one position of each arc (every live replica of
/// every arc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SurveyPlan {
    pub survey: Survey,
    pub arcs: Vec<PositionSet>,
    /// One position inside each arc (its first), in arc order.
    pub points: Vec<Position>,
}

#[derive(Serialize, Deserialize)]
struct SurveyPayload {
    survey: Survey,
    arcs: Vec<PositionSet>,
}

impl SurveyPlan {
    /// Plans `survey` against `configuration`: one arc per partition. An empty ring gives
    /// no arcs (and a read then completes at once with nothing).
    pub fn new(survey: Survey, configuration: &Configuration) -> SurveyPlan {
        let (arcs, points) = configuration
            .partitions()
            .into_iter()
            .map(|partition| (partition.span.to_set(), partition.span.start))
            .unzip();
        SurveyPlan {
            survey,
            arcs,
            points,
        }
    }

    pub fn is_read(&self) -> bool {
        self.survey != Survey::Flush
    }

    /// Every position of its arcs (the whole ring unless the ring is empty).
    pub fn range(&self) -> PositionSet {
        union_of(&self.arcs)
    }

    /// The parts that complete it: one per arc for a read; none for a flush (stable is all
    /// it needs).
    pub fn parts(&self) -> Vec<u64> {
        if self.is_read() {
            (0..self.arcs.len() as u64).collect()
        } else {
            Vec::new()
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = vec![SURVEY_FORMAT];
        bytes.extend(
            postcard::to_allocvec(&SurveyPayload {
                survey: self.survey.clone(),
                arcs: self.arcs.clone(),
            })
            .expect("payloads serialise"),
        );
        bytes
    }

    /// Merges one answer per arc (by part number; several replicas may have answered the same
    /// arc, the gateway keeps one): the counts summed, the keys united and sorted.
    pub fn merge(&self, answers: &BTreeMap<u64, Outcome>) -> Outcome {
        if !self.is_read() {
            return Outcome::Ok;
        }
        if let Some(error) = answers
            .values()
            .find(|outcome| matches!(outcome, Outcome::Error(_)))
        {
            return error.clone();
        }
        if answers.len() != self.arcs.len() {
            return Outcome::Error(KvError::Unavailable);
        }
        match self.survey {
            Survey::Count => Outcome::Integer(
                answers
                    .values()
                    .map(|outcome| match outcome {
                        Outcome::Integer(count) => *count,
                        _ => 0,
                    })
                    .sum(),
            ),
            Survey::Keys { .. } => {
                let mut keys: Vec<Option<kv::Bytes>> = answers
                    .values()
                    .flat_map(|outcome| match outcome {
                        Outcome::Values(keys) => keys.clone(),
                        _ => Vec::new(),
                    })
                    .collect();
                keys.sort();
                Outcome::Values(keys)
            }
            Survey::Flush => Outcome::Ok,
        }
    }
}

/// The survey a payload carries, if it is one (`None`: a keyed payload).
pub fn decode_survey(payload: &[u8]) -> Option<Result<(Survey, Vec<PositionSet>), KvError>> {
    let (&SURVEY_FORMAT, rest) = payload.split_first()? else {
        return None;
    };
    Some(
        postcard::from_bytes::<SurveyPayload>(rest)
            .map(|decoded| (decoded.survey, decoded.arcs))
            .map_err(|_| KvError::Malformed),
    )
}

/// The positions a survey touches, for the migrator: every arc it names (the whole ring), not
/// just the points it is routed by, so that a process receiving a copy of any part of the ring
/// holds the survey until the copy is installed (a read must not answer from half a copy; a
/// flush must not be undone by a copy installed after it). `None` for a keyed payload or a
/// malformed one.
pub fn survey_touches(payload: &[u8]) -> Option<PositionSet> {
    let (_, arcs) = decode_survey(payload)?.ok()?;
    Some(union_of(&arcs))
}

fn union_of(arcs: &[PositionSet]) -> PositionSet {
    arcs.iter()
        .fold(PositionSet::empty(), |all, arc| all.union(arc))
}

/// A storage process's answers to a survey read over `keys` (its store's keys): one answer per
/// arc that lies wholly inside `holds` (what it holds at the message's place in its stream,
/// copies installed), none for any other arc. Each key is counted in the one arc holding its
/// position, so an arc's answer is exactly that arc's keys, whichever replica gives it.
pub fn survey_answers<'a>(
    survey: &Survey,
    arcs: &[PositionSet],
    holds: &PositionSet,
    keys: impl Iterator<Item = &'a kv::Bytes>,
) -> Vec<(u32, Outcome)> {
    let answered: Vec<usize> = (0..arcs.len())
        .filter(|index| !arcs[*index].is_empty() && arcs[*index].is_subset(holds))
        .collect();
    if answered.is_empty() {
        return Vec::new();
    }
    let mut counts = vec![0i64; answered.len()];
    let mut matching: Vec<Vec<Option<kv::Bytes>>> = vec![Vec::new(); answered.len()];
    for key in keys {
        let at = position(key);
        let Some(slot) = answered.iter().position(|index| arcs[*index].contains(at)) else {
            continue;
        };
        counts[slot] += 1;
        if let Survey::Keys { pattern } = survey {
            if pattern
                .as_ref()
                .is_none_or(|pattern| resp::glob_match(pattern, key))
            {
                matching[slot].push(Some(key.clone()));
            }
        }
    }
    answered
        .into_iter()
        .zip(counts.into_iter().zip(matching))
        .map(|(index, (count, keys))| {
            let outcome = match survey {
                Survey::Keys { .. } => Outcome::Values(keys),
                _ => Outcome::Integer(count),
            };
            (index as u32, outcome)
        })
        .collect()
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

    fn six_processes() -> (Vec<(ProcessId, Position)>, Configuration) {
        let members: Vec<(ProcessId, Position)> = (0..6u64)
            .map(|index| (ProcessId(index + 1), Position(index * (u64::MAX / 6))))
            .collect();
        let configuration = Configuration::with_ring(3, &members);
        (members, configuration)
    }

    fn keys(count: u32) -> Vec<kv::Bytes> {
        (0..count)
            .map(|key| format!("key:{key}").into_bytes())
            .collect()
    }

    /// Every process answers the arcs it holds from the keys it holds (its replicas' keys).
    fn answers_of_all(
        plan: &SurveyPlan,
        configuration: &Configuration,
        members: &[(ProcessId, Position)],
        keys: &[kv::Bytes],
    ) -> Vec<Vec<(u32, Outcome)>> {
        let decoded = decode_survey(&plan.encode()).unwrap().unwrap();
        assert_eq!(decoded, (plan.survey.clone(), plan.arcs.clone()));
        members
            .iter()
            .map(|(process, _)| {
                let holds = configuration.ranges_of(*process);
                let held: Vec<&kv::Bytes> = keys
                    .iter()
                    .filter(|key| holds.contains(position(key)))
                    .collect();
                survey_answers(&plan.survey, &plan.arcs, &holds, held.into_iter())
            })
            .collect()
    }

    #[test]
    fn a_count_over_replicated_arcs_counts_each_key_once() {
        let (members, configuration) = six_processes();
        let plan = SurveyPlan::new(Survey::Count, &configuration);
        assert_eq!(plan.arcs.len(), 6);
        assert_eq!(plan.parts(), (0..6).collect::<Vec<u64>>());
        // The arcs partition the ring: every position in exactly one.
        for key in keys(50) {
            let at = position(&key);
            assert_eq!(plan.arcs.iter().filter(|arc| arc.contains(at)).count(), 1);
        }
        assert_eq!(survey_touches(&plan.encode()), Some(PositionSet::whole()));
        let all = answers_of_all(&plan, &configuration, &members, &keys(300));
        // Each process answers the 3 arcs it replicates; summing every answer (what a gateway
        // without per-arc merging would do) counts each key 3 times: the canary.
        let naive: i64 = all
            .iter()
            .flatten()
            .map(|(_, outcome)| match outcome {
                Outcome::Integer(count) => *count,
                other => panic!("{other:?}"),
            })
            .sum();
        assert_eq!(naive, 900);
        let mut merged = BTreeMap::new();
        for (part, outcome) in all.into_iter().flatten() {
            merged.insert(u64::from(part), outcome);
        }
        assert_eq!(plan.merge(&merged), Outcome::Integer(300));
        // An arc without an answer is no count at all.
        merged.remove(&0);
        assert_eq!(plan.merge(&merged), Outcome::Error(KvError::Unavailable));
    }

    #[test]
    fn keys_are_matched_by_glob_and_united_across_arcs() {
        let (members, configuration) = six_processes();
        let pattern = Some(b"key:1?".to_vec());
        let plan = SurveyPlan::new(Survey::Keys { pattern }, &configuration);
        let mut merged = BTreeMap::new();
        for (part, outcome) in answers_of_all(&plan, &configuration, &members, &keys(100))
            .into_iter()
            .flatten()
        {
            merged.insert(u64::from(part), outcome);
        }
        let mut expected: Vec<Option<kv::Bytes>> = (10..20)
            .map(|key| Some(format!("key:{key}").into_bytes()))
            .collect();
        expected.sort();
        assert_eq!(plan.merge(&merged), Outcome::Values(expected));
    }

    #[test]
    fn an_arc_not_wholly_held_is_not_answered() {
        let (_, configuration) = six_processes();
        let plan = SurveyPlan::new(Survey::Count, &configuration);
        // Holding all of arc 1 and half of arc 2 (the other half still being received).
        let arc = &plan.arcs[2];
        let (first, last) = arc.intervals()[0];
        let half =
            PositionSet::from_inclusive(Position(first), Position(first + (last - first) / 2));
        let holds = plan.arcs[1].union(&half);
        let keys = keys(200);
        let answers = survey_answers(&plan.survey, &plan.arcs, &holds, keys.iter());
        let parts: Vec<u32> = answers.iter().map(|(part, _)| *part).collect();
        assert_eq!(parts, vec![1]);
        let in_arc = keys
            .iter()
            .filter(|key| plan.arcs[1].contains(position(key)))
            .count() as i64;
        assert_eq!(answers[0].1, Outcome::Integer(in_arc));
    }

    #[test]
    fn a_flush_is_a_write_to_every_arc_that_waits_for_no_answer() {
        let (_, configuration) = six_processes();
        let plan = SurveyPlan::new(Survey::Flush, &configuration);
        assert!(!plan.is_read());
        assert!(plan.parts().is_empty());
        assert_eq!(plan.points.len(), 6);
        assert_eq!(plan.merge(&BTreeMap::new()), Outcome::Ok);
        // A keyed payload is no survey; garbage after the survey format is malformed.
        let keyed = split(&Command::Get { key: b"k".to_vec() }).unwrap();
        assert!(decode_survey(&keyed.encode()).is_none());
        assert_eq!(
            decode_survey(&[SURVEY_FORMAT, 9, 9, 9]),
            Some(Err(KvError::Malformed))
        );
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
