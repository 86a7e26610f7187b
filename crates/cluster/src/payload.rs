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
    /// DEL over several keys: one count per distinct key (`Outcome::Integers`).
    MultiDelete,
    /// EXISTS over several keys: the sum of the per-key counts (a key named twice is asked
    /// twice).
    Sum,
    /// The steps of a multi-key command (`Reserve`, `Commit`, `Release` of each key): every
    /// sub-command's outcome, errors included, as `Outcome::Pipeline` in index order.
    Each,
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
    /// Whether the reply needs the storage processes' outcomes: always, now that a plain SET
    /// can be refused too (a key held by a multi-key command, `KvError::Locked`).
    pub fn needs_answers(&self) -> bool {
        true
    }

    /// The steps of a multi-key command: one single-key step per command, each outcome kept.
    pub fn each(commands: Vec<Command>) -> Split {
        assert!(
            commands.iter().all(|command| command.keys().len() == 1),
            "every step names one key"
        );
        Split {
            commands,
            merge: Merge::Each,
            is_read: false,
        }
    }

    pub fn positions(&self, placement: &KeyPlacement) -> Vec<Position> {
        self.commands
            .iter()
            .map(|command| placement.position(key_of(command)))
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
        if self.merge == Merge::Each {
            return Outcome::Pipeline(outcomes.to_vec());
        }
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
                        Outcome::Values(values) => values.first().cloned().flatten(),
                        Outcome::Value(value) => value.clone(),
                        _ => None,
                    })
                    .collect(),
            ),
            Merge::Each => unreachable!("merged above"),
            // One count per distinct key, in order: the reply sums them (`resp::finish`), and
            // keyspace notifications name the keys that existed (`resp::notify`).
            Merge::MultiDelete => Outcome::Integers(
                outcomes
                    .iter()
                    .map(|outcome| match outcome {
                        Outcome::Integer(count) => *count,
                        _ => 0,
                    })
                    .collect(),
            ),
            Merge::Sum => Outcome::Integer(
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

/// Splits a planned command. A command stamped with its planning time (`Command::At`) is split
/// as the command inside, each sub-command stamped with the same time.
pub fn split(command: &Command) -> Result<Split, SplitError> {
    if let Command::At { now_ms, command } = command {
        if matches!(**command, Command::At { .. }) {
            return Err(SplitError::NotPartitionable);
        }
        let mut split = split(command)?;
        split.commands = split
            .commands
            .into_iter()
            .map(|command| command.stamped(*now_ms))
            .collect();
        return Ok(split);
    }
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
        | Command::Set { .. }
        | Command::Hash { .. }
        | Command::List { .. }
        | Command::Members { .. }
        | Command::Sorted { .. }
        | Command::Type { .. }
        | Command::Expire { .. }
        | Command::TimeToLive { .. }
        | Command::Persist { .. }
        | Command::GetExpire { .. }
        | Command::GetDelete { .. }
        | Command::SetExpiring { .. }
        | Command::Encoding { .. }
        | Command::MemoryUsage { .. }
        | Command::Dump { .. }
        | Command::Restore { .. }
        | Command::Reclaim { .. }
        | Command::IncrementFloat { .. }
        | Command::Text { .. }
        | Command::Stream { .. }
        | Command::Reserve { .. }
        | Command::Commit { .. }
        | Command::Release { .. } => Ok(single(command)),
        Command::Exists { keys } => Ok(Split {
            commands: keys
                .iter()
                .map(|key| Command::Exists {
                    keys: vec![key.clone()],
                })
                .collect(),
            merge: Merge::Sum,
            is_read: true,
        }),
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
        // Each key is its own one-key MGET, not a GET: MGET reads a key of another type as
        // nil, where GET answers WRONGTYPE (which failed the whole MGET before).
        Command::MultiGet { keys } => Ok(Split {
            commands: keys
                .iter()
                .map(|key| Command::MultiGet {
                    keys: vec![key.clone()],
                })
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
        // A multi-key operation runs on the records of its keys, reserved first
        // (`ecast::transaction`); DBSIZE is a survey.
        Command::Count | Command::Pipeline { .. } | Command::At { .. } | Command::Keys(_) => {
            Err(SplitError::NotPartitionable)
        }
    }
}

/// A payload carrying a command without a key (`Survey`).
const SURVEY_FORMAT: u8 = 2;

/// A payload carrying a SQL statement: one operation of the store's SQL half
/// (`store::sql_operation` or `store::catalog_operation`) and where it goes (`SqlPayload`).
/// (Format 3 carried the operation alone, for the partition that held every table.)
const SQL_FORMAT: u8 = 4;

/// The key standing for "the SQL tables" in a partition's ordering (`ecast::KeySet`): every SQL
/// statement names it, so statements are ordered among themselves (and never with RESP
/// commands) by the hold rules; and the catalog read goes to the partition holding its
/// position (any partition would do: every partition holds the catalog). A RESP client cannot
/// name it: it is not a key of the RESP namespace, only a position.
pub const SQL_ANCHOR: &[u8] = b"\0tessera:sql-tables";

/// Where a SQL statement goes, and its answer parts. Wire enum: variants never renumber.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SqlTarget {
    /// 0. The partitions holding these placement keys (`store::rows`, distinct): a statement
    ///    whose predicate pins the partition key, or an insert (its rows' keys). Part i is key
    ///    i; each partition executes its share (an insert keeps the rows it holds) and answers
    ///    the parts of the keys it holds: its result at the first, `Outcome::Ok` ("in another
    ///    part") at the others.
    Keys(Vec<Vec<u8>>),
    /// 1. Every partition, as it was at one configuration version (the message is sequenced at
    ///    that version only, `GatewayInput::SubmitPinned`), by its arc: part i is arc i; each
    ///    destination executes the statement over the rows it holds and answers the arcs that
    ///    lie wholly in its holdings, its result at the first, `Outcome::Ok` at the others.
    Arcs(Vec<PositionSet>),
    /// 2. Any one partition: the catalog read (every partition holds the catalog). Part 0.
    Any,
}

impl SqlTarget {
    /// How many answer parts complete a statement sent so: 0, 1, … .
    pub fn part_count(&self) -> u64 {
        let count = match self {
            SqlTarget::Keys(keys) => keys.len(),
            SqlTarget::Arcs(arcs) => arcs.len(),
            SqlTarget::Any => 1,
        };
        count as u64
    }
}

/// A SQL statement's payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SqlPayload {
    /// A store operation (`store::sql_operation`, `store::catalog_operation`).
    #[serde(with = "wire::bytes")]
    pub operation: Vec<u8>,
    pub target: SqlTarget,
}

impl SqlPayload {
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = vec![SQL_FORMAT];
        bytes.extend(postcard::to_allocvec(self).expect("payloads serialise"));
        bytes
    }

    /// The answer parts that complete it.
    pub fn parts(&self) -> Vec<u64> {
        (0..self.target.part_count()).collect()
    }

    /// The parts a partition holding `holds` answers: the keys it holds, the arcs wholly
    /// inside its holdings, or part 0 of a catalog read.
    pub fn parts_held(&self, holds: &PositionSet, placement: &KeyPlacement) -> Vec<u32> {
        let held: Vec<bool> = match &self.target {
            SqlTarget::Keys(keys) => keys
                .iter()
                .map(|key| holds.contains(placement.position(key)))
                .collect(),
            SqlTarget::Arcs(arcs) => arcs
                .iter()
                .map(|arc| !arc.is_empty() && arc.is_subset(holds))
                .collect(),
            SqlTarget::Any => vec![true],
        };
        (0..held.len() as u32)
            .filter(|part| held[*part as usize])
            .collect()
    }
}

/// The SQL statement a payload carries; None for other payloads (and Some(Err) for a SQL
/// payload that does not decode).
pub fn decode_sql(payload: &[u8]) -> Option<Result<SqlPayload, KvError>> {
    let (&SQL_FORMAT, rest) = payload.split_first()? else {
        return None;
    };
    Some(postcard::from_bytes(rest).map_err(|_| KvError::Malformed))
}

/// The payload of the failure detector's `Suspect` of storage process `process`, which grouped
/// routers route to every partition group (`ecast::RouterSettings::suspicions_to_groups`):
/// each group executes it at its point of the order, aborting the interactive transactions
/// whose gateway lived in `process`, and killing its gateway's incarnations up to `through`
/// (`store::abort_owned_through_operation`). A statement over every partition with no part: it
/// runs wherever it is delivered and its answers are not awaited.
pub fn suspicion_payload(process: ProcessId, through: u64) -> Vec<u8> {
    SqlPayload {
        operation: store::abort_owned_through_operation(process.0, through),
        target: SqlTarget::Arcs(Vec::new()),
    }
    .encode()
}

/// One arc per partition of `configuration` that overlaps `range`, cut to it, with a position
/// inside it (the partition's first if it lies in `range`), in ring order: the parts of a
/// message to every partition of that range.
pub fn partition_arcs(
    configuration: &Configuration,
    range: &PositionSet,
) -> Vec<(PositionSet, Position)> {
    configuration
        .partitions()
        .into_iter()
        .filter_map(|partition| {
            let arc = partition.span.to_set().intersection(range);
            let inside = Position(arc.intervals().first()?.0);
            let point = if arc.contains(partition.span.start) {
                partition.span.start
            } else {
                inside
            };
            Some((arc, point))
        })
        .collect()
}

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
    /// The keys matching `pattern` whose value is of the type TYPE names `type_name`
    /// (`string`, `hash`, `list`, `set`, `zset`), sorted: SCAN … TYPE.
    KeysOfType {
        pattern: Option<Vec<u8>>,
        type_name: String,
    },
    /// CONFIG SET of the encoding thresholds: every replica of every arc sets them (canonical
    /// parameter name, value; `resp::config::set_limit`) at the message's place in the order,
    /// as a flush deletes.
    Configure { changes: Vec<(String, u64)> },
    /// CONFIG GET: each arc answers its store's thresholds (one postcard-encoded
    /// `kv::EncodingLimits`); every store set them in the same order, so any arc's answer is
    /// the cluster's.
    ReadConfig,
    /// The reclaimer's survey (`reclaim`): the keys expired at `now_ms` (unix milliseconds),
    /// at most `limit` per arc, sorted.
    Expired { now_ms: u64, limit: u64 },
}

impl Survey {
    /// Whether it changes every arc (FLUSHALL, CONFIG SET) rather than reads.
    pub fn is_write(&self) -> bool {
        matches!(self, Survey::Flush | Survey::Configure { .. })
    }
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
    /// Plans `survey` against `configuration`, over the positions of `range` only (the whole
    /// ring, or the arc of a range-placed key prefix): one arc per partition that overlaps
    /// `range`, cut to it. An empty ring gives no arcs (and a read then completes at once
    /// with nothing).
    pub fn new(survey: Survey, configuration: &Configuration, range: &PositionSet) -> SurveyPlan {
        let (arcs, points) = partition_arcs(configuration, range).into_iter().unzip();
        SurveyPlan {
            survey,
            arcs,
            points,
        }
    }

    pub fn is_read(&self) -> bool {
        !self.survey.is_write()
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
            Survey::Keys { .. } | Survey::KeysOfType { .. } | Survey::Expired { .. } => {
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
            Survey::ReadConfig => answers
                .values()
                .next()
                .cloned()
                .unwrap_or(Outcome::Error(KvError::Unavailable)),
            Survey::Flush | Survey::Configure { .. } => Outcome::Ok,
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

/// CONFIG SET and CONFIG GET at a store, at the message's place in its stream: `None` for any
/// other survey. CONFIG SET sets the store's encoding thresholds (every replica of every arc
/// does, whatever it holds: the thresholds are the same everywhere) and answers nothing;
/// CONFIG GET answers each arc that lies wholly inside `holds` with the store's thresholds.
pub fn config_survey(
    survey: &Survey,
    arcs: &[PositionSet],
    holds: &PositionSet,
    kv: &mut kv::KvStore,
) -> Option<Vec<(u32, Outcome)>> {
    match survey {
        Survey::Configure { changes } => {
            let mut limits = kv.limits();
            for (name, value) in changes {
                if name == resp::config::NOTIFY {
                    kv.set_notify_flags(i64::try_from(*value).unwrap_or(0));
                } else {
                    // An unknown limit is ignored (this crate is pure and does not log; the
                    // gateway refuses unknown names before they get here).
                    let _known = resp::config::set_limit(&mut limits, name, *value);
                }
            }
            kv.set_limits(limits);
            Some(Vec::new())
        }
        Survey::ReadConfig => {
            let limits = postcard::to_allocvec(&(kv.limits(), kv.notify_flags()))
                .expect("the configuration serialises");
            Some(
                (0..arcs.len())
                    .filter(|index| !arcs[*index].is_empty() && arcs[*index].is_subset(holds))
                    .map(|index| (index as u32, Outcome::Values(vec![Some(limits.clone())])))
                    .collect(),
            )
        }
        _ => None,
    }
}

/// The thresholds and the keyspace notification flags in a CONFIG GET survey's merged outcome
/// (`None`: not such an outcome).
pub fn decode_config(outcome: &Outcome) -> Option<(kv::EncodingLimits, i64)> {
    match outcome {
        Outcome::Values(values) => postcard::from_bytes(values.first()?.as_ref()?).ok(),
        _ => None,
    }
}

/// A storage process's answers to a survey read over `keys` (its store's keys): one answer per
/// arc that lies wholly inside `holds` (what it holds at the message's place in its stream,
/// copies installed), none for any other arc. Each key is counted in the one arc holding its
/// position, so an arc's answer is exactly that arc's keys, whichever replica gives it.
pub fn survey_answers<'a, 'b>(
    survey: &Survey,
    arcs: &[PositionSet],
    holds: &PositionSet,
    keys: impl Iterator<Item = &'a kv::Bytes>,
    placement: &KeyPlacement,
    entry_of: &dyn Fn(&[u8]) -> Option<&'b kv::Entry>,
) -> Vec<(u32, Outcome)> {
    let type_of = |key: &[u8]| entry_of(key).map(|entry| entry.value.type_name());
    let answered: Vec<usize> = (0..arcs.len())
        .filter(|index| !arcs[*index].is_empty() && arcs[*index].is_subset(holds))
        .collect();
    if answered.is_empty() {
        return Vec::new();
    }
    let mut counts = vec![0i64; answered.len()];
    let mut matching: Vec<Vec<Option<kv::Bytes>>> = vec![Vec::new(); answered.len()];
    for key in keys {
        let at = placement.position(key);
        let Some(slot) = answered.iter().position(|index| arcs[*index].contains(at)) else {
            continue;
        };
        counts[slot] += 1;
        let (pattern, type_name) = match survey {
            Survey::Keys { pattern } => (pattern, None),
            Survey::KeysOfType { pattern, type_name } => (pattern, Some(type_name)),
            Survey::Expired { now_ms, limit } => {
                let expired = entry_of(key).is_some_and(|entry| entry.expired(*now_ms));
                if expired && (matching[slot].len() as u64) < *limit {
                    matching[slot].push(Some(key.clone()));
                }
                continue;
            }
            Survey::Count | Survey::Flush | Survey::Configure { .. } | Survey::ReadConfig => {
                continue
            }
        };
        let matches = pattern
            .as_ref()
            .is_none_or(|pattern| resp::glob_match(pattern, key))
            && type_name.is_none_or(|type_name| type_of(key) == Some(type_name.as_str()));
        if matches {
            matching[slot].push(Some(key.clone()));
        }
    }
    answered
        .into_iter()
        .zip(counts.into_iter().zip(matching))
        .map(|(index, (count, keys))| {
            let outcome = match survey {
                Survey::Keys { .. } | Survey::KeysOfType { .. } | Survey::Expired { .. } => {
                    Outcome::Values(keys)
                }
                Survey::Count | Survey::Flush | Survey::Configure { .. } | Survey::ReadConfig => {
                    Outcome::Integer(count)
                }
            };
            (index as u32, outcome)
        })
        .collect()
}

#[derive(Serialize, Deserialize)]
struct Payload {
    commands: Vec<Command>,
}

/// How a partitioned cluster maps keys to ring positions (Rubberband §6.2: by hash or by range,
/// per namespace). A key under one of the cluster's range-placed prefixes (the cluster file's
/// `range_prefixes`, e.g. `user:`) maps by `KeyMapping::Range` of the rest of the key, so the
/// namespace's keys lie on the ring in key order and a key range is one arc; every other key
/// maps by `KeyMapping::Hash` of the whole key. Fixed for the life of a cluster: every process
/// must compute the same positions (changing it would be a data migration).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyPlacement {
    /// No prefix is a prefix of another (checked by `new`), so a key has at most one.
    range_prefixes: Vec<Vec<u8>>,
}

impl KeyPlacement {
    /// Refuses an empty prefix (that would be the whole keyspace in range order, which the
    /// hash-placed commands could not share) and prefixes of one another (a key's namespace
    /// would be ambiguous).
    pub fn new(range_prefixes: Vec<Vec<u8>>) -> Result<KeyPlacement, String> {
        for (index, prefix) in range_prefixes.iter().enumerate() {
            if prefix.is_empty() {
                return Err("a range-placed prefix is empty".to_string());
            }
            for (other_index, other) in range_prefixes.iter().enumerate() {
                if index != other_index && other.starts_with(prefix) {
                    return Err(format!(
                        "range-placed prefixes {:?} and {:?} overlap (one is a prefix of the other)",
                        String::from_utf8_lossy(prefix),
                        String::from_utf8_lossy(other)
                    ));
                }
            }
        }
        Ok(KeyPlacement { range_prefixes })
    }

    /// The range-placed prefixes.
    pub fn range_prefixes(&self) -> &[Vec<u8>] {
        &self.range_prefixes
    }

    /// Hash placement for every key.
    pub fn hash() -> KeyPlacement {
        KeyPlacement::default()
    }

    /// A key's ring position. A SQL row's placement key (`store::rows`) is placed by hash,
    /// whatever the range-placed prefixes, unless it is a range-placed table's: that key
    /// carries its position (`store::rows::range_placement_key`, order-preserving in the
    /// table's partition key), so no catalog is needed here.
    pub fn position(&self, key: &[u8]) -> Position {
        if key.starts_with(store::rows::ROW_KEY_PREFIX) {
            return match store::rows::range_position_of_key(key) {
                Some(position) => Position(position),
                None => KeyMapping::Hash.position(key),
            };
        }
        match self.range_prefix(key) {
            Some(prefix) => KeyMapping::Range.position(&key[prefix..]),
            None => KeyMapping::Hash.position(key),
        }
    }

    /// The length of the range-placed prefix `key` starts with, if any.
    fn range_prefix(&self, key: &[u8]) -> Option<usize> {
        self.range_prefixes
            .iter()
            .find(|prefix| key.starts_with(prefix))
            .map(Vec::len)
    }

    /// The positions of every key a glob `pattern` can match (`None` matches every key): the
    /// arc of the pattern's literal prefix when that lies in a range-placed namespace (every
    /// matching key starts with it, so it is in that namespace), else the whole ring.
    pub fn positions_of_pattern(&self, pattern: Option<&[u8]>) -> PositionSet {
        let Some(pattern) = pattern else {
            return PositionSet::whole();
        };
        let literal = literal_prefix(pattern);
        let Some(prefix) = self.range_prefix(&literal) else {
            return PositionSet::whole();
        };
        let start = &literal[prefix..];
        let end = successor(start);
        KeyMapping::Range.positions_of_range(start, end.as_deref())
    }
}

/// The bytes every match of a glob pattern starts with: up to its first `*`, `?` or `[`, with
/// `\x` read as `x`.
fn literal_prefix(pattern: &[u8]) -> Vec<u8> {
    let mut literal = Vec::new();
    let mut bytes = pattern.iter();
    while let Some(&byte) = bytes.next() {
        match byte {
            b'*' | b'?' | b'[' => break,
            b'\\' => match bytes.next() {
                Some(&escaped) => literal.push(escaped),
                None => break,
            },
            _ => literal.push(byte),
        }
    }
    literal
}

/// The least byte string above every string that starts with `prefix` (`None`: there is none,
/// the range is unbounded above).
fn successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
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
    placement: &KeyPlacement,
) -> Result<Vec<(u32, Command)>, KvError> {
    share_where(payload, placement, |position| {
        configuration.replicas(position).contains(&process)
    })
}

/// The sub-commands (with their indexes) whose key lies in `holds`: a storage process's share
/// under the holdings its migrator passes with each item (the ring at the item's place in the
/// stream, which changes with keyspace messages).
pub fn share_in(
    payload: &[u8],
    holds: &PositionSet,
    placement: &KeyPlacement,
) -> Result<Vec<(u32, Command)>, KvError> {
    share_where(payload, placement, |position| holds.contains(position))
}

/// `skyros` partitions: if every sub-command of a payload is a nilext write (plain SET, MSET),
/// the outcomes its execution gives whatever the state, by index; else None.
pub fn nilext_outcomes(payload: &[u8]) -> Option<Vec<(u32, kv::Outcome)>> {
    let (&PAYLOAD_FORMAT, rest) = payload.split_first()? else {
        return None;
    };
    let payload: Payload = postcard::from_bytes(rest).ok()?;
    if payload.commands.is_empty() {
        return None;
    }
    payload
        .commands
        .iter()
        .enumerate()
        .map(|(index, command)| Some((index as u32, command.nilext_outcome()?)))
        .collect()
}

/// The single-key sub-commands of a payload whose key's position `held` accepts, with their
/// indexes, in payload order.
fn share_where(
    payload: &[u8],
    placement: &KeyPlacement,
    held: impl Fn(Position) -> bool,
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
            command.keys().len() == 1 && held(placement.position(key_of(command)))
        })
        .map(|(index, command)| (index as u32, command))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the test stores hold at every key (a survey reads only its type and expiry).
    static STRING_ENTRY: kv::Entry = kv::Entry {
        value: kv::Value::String(Vec::new()),
        expires_at_ms: None,
    };

    #[test]
    fn a_multi_key_delete_counts_each_distinct_key_once() {
        let split = split(&Command::MultiDelete {
            keys: vec![b"a".to_vec(), b"b".to_vec(), b"a".to_vec()],
        })
        .unwrap();
        assert_eq!(split.commands.len(), 2);
        let merged = split.merge(&[Outcome::Integer(1), Outcome::Integer(0)]);
        assert_eq!(merged, Outcome::Integers(vec![1, 0]));
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
                    .filter(|key| holds.contains(KeyPlacement::hash().position(key)))
                    .collect();
                survey_answers(
                    &plan.survey,
                    &plan.arcs,
                    &holds,
                    held.into_iter(),
                    &KeyPlacement::hash(),
                    &|_| Some(&STRING_ENTRY),
                )
            })
            .collect()
    }

    #[test]
    fn a_count_over_replicated_arcs_counts_each_key_once() {
        let (members, configuration) = six_processes();
        let plan = SurveyPlan::new(Survey::Count, &configuration, &PositionSet::whole());
        assert_eq!(plan.arcs.len(), 6);
        assert_eq!(plan.parts(), (0..6).collect::<Vec<u64>>());
        // The arcs partition the ring: every position in exactly one.
        for key in keys(50) {
            let at = KeyPlacement::hash().position(&key);
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
        let plan = SurveyPlan::new(
            Survey::Keys { pattern },
            &configuration,
            &PositionSet::whole(),
        );
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
        let plan = SurveyPlan::new(Survey::Count, &configuration, &PositionSet::whole());
        // Holding all of arc 1 and half of arc 2 (the other half still being received).
        let arc = &plan.arcs[2];
        let (first, last) = arc.intervals()[0];
        let half =
            PositionSet::from_inclusive(Position(first), Position(first + (last - first) / 2));
        let holds = plan.arcs[1].union(&half);
        let keys = keys(200);
        let answers = survey_answers(
            &plan.survey,
            &plan.arcs,
            &holds,
            keys.iter(),
            &KeyPlacement::hash(),
            &|_| Some(&STRING_ENTRY),
        );
        let parts: Vec<u32> = answers.iter().map(|(part, _)| *part).collect();
        assert_eq!(parts, vec![1]);
        let in_arc = keys
            .iter()
            .filter(|key| plan.arcs[1].contains(KeyPlacement::hash().position(key)))
            .count() as i64;
        assert_eq!(answers[0].1, Outcome::Integer(in_arc));
    }

    #[test]
    fn a_flush_is_a_write_to_every_arc_that_waits_for_no_answer() {
        let (_, configuration) = six_processes();
        let plan = SurveyPlan::new(Survey::Flush, &configuration, &PositionSet::whole());
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
    fn mget_is_split_into_one_key_mgets_so_another_type_reads_as_nil() {
        let split = split(&Command::MultiGet {
            keys: vec![b"a".to_vec(), b"set".to_vec()],
        })
        .unwrap();
        assert_eq!(
            split.commands,
            vec![
                Command::MultiGet {
                    keys: vec![b"a".to_vec()]
                },
                Command::MultiGet {
                    keys: vec![b"set".to_vec()]
                },
            ]
        );
        let mut store = kv::KvStore::new();
        store.execute(&Command::Put {
            key: b"a".to_vec(),
            value: b"1".to_vec(),
        });
        store.execute(&Command::Members {
            key: b"set".to_vec(),
            operation: kv::SetOperation::Add {
                members: vec![b"m".to_vec()],
            },
        });
        let outcomes: Vec<Outcome> = split.commands.iter().map(|c| store.read(c)).collect();
        assert_eq!(
            split.merge(&outcomes),
            Outcome::Values(vec![Some(b"1".to_vec()), None])
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
            for (index, _) in
                share(&payload, &configuration, *process, &KeyPlacement::hash()).unwrap()
            {
                holders[index as usize] += 1;
            }
        }
        assert!(holders.iter().all(|count| *count == 3));
    }

    fn users() -> KeyPlacement {
        KeyPlacement::new(vec![b"user:".to_vec(), b"order:".to_vec()]).unwrap()
    }

    #[test]
    fn keys_under_a_range_prefix_lie_on_the_ring_in_key_order() {
        let placement = users();
        let mut keys: Vec<Vec<u8>> = (0..500u32)
            .map(|index| format!("user:{:06}", index * 7919 % 100_000).into_bytes())
            .collect();
        keys.sort();
        let positions: Vec<Position> = keys.iter().map(|key| placement.position(key)).collect();
        assert!(positions.windows(2).all(|pair| pair[0] <= pair[1]));
        // Other keys are hashed, as without any range prefix.
        for key in [&b"session:1"[..], b"user", b"users:1", b"k"] {
            assert_eq!(placement.position(key), KeyPlacement::hash().position(key));
        }
    }

    #[test]
    fn empty_or_overlapping_range_prefixes_are_refused() {
        assert!(KeyPlacement::new(vec![Vec::new()]).is_err());
        let overlap = KeyPlacement::new(vec![b"user:".to_vec(), b"user:eu:".to_vec()]);
        assert!(overlap.unwrap_err().contains("overlap"));
        assert!(KeyPlacement::new(vec![b"a:".to_vec(), b"b:".to_vec()]).is_ok());
    }

    #[test]
    fn a_pattern_inside_a_range_namespace_covers_only_its_keys() {
        let placement = users();
        let narrow = placement.positions_of_pattern(Some(b"user:ab*"));
        assert!(!narrow.is_whole());
        for key in [
            &b"user:ab"[..],
            b"user:ab0",
            b"user:abzzzzzzzzzz",
            b"user:ab\xff",
        ] {
            assert!(narrow.contains(placement.position(key)), "{key:?}");
        }
        // (The arc is conservative at its top: `user:ac` itself shares the end's position.)
        for key in [&b"user:aa"[..], b"user:ad", b"user:b"] {
            assert!(!narrow.contains(placement.position(key)), "{key:?}");
        }
        // An escaped glob character is literal.
        let escaped = placement.positions_of_pattern(Some(b"user:a\\*b*"));
        assert!(escaped.contains(placement.position(b"user:a*bc")));
        assert!(!escaped.contains(placement.position(b"user:ab")));
        // Not inside a range namespace (or the whole namespace): the whole ring.
        for pattern in [&b"us*"[..], b"user:*", b"*", b"session:1*", b"?ser:ab*"] {
            assert!(placement.positions_of_pattern(Some(pattern)).is_whole());
        }
        assert!(placement.positions_of_pattern(None).is_whole());
        assert_eq!(successor(b"a\xff\xff"), Some(b"b".to_vec()));
        assert_eq!(successor(b"\xff"), None);
    }

    #[test]
    fn a_range_survey_reads_one_partition_and_finds_exactly_the_matching_keys() {
        let placement = users();
        // Six processes whose identifiers split the range namespace's first byte evenly.
        let members: Vec<(ProcessId, Position)> = (0..6u64)
            .map(|index| (ProcessId(index + 1), Position(index * (u64::MAX / 6))))
            .collect();
        let configuration = Configuration::with_ring(3, &members);
        let keys: Vec<kv::Bytes> = (0..2_000u32)
            .map(|index| format!("user:{index:05}").into_bytes())
            .chain((0..500u32).map(|index| format!("k{index}").into_bytes()))
            .collect();
        let pattern = b"user:01*".to_vec();
        let range = placement.positions_of_pattern(Some(&pattern));
        let plan = SurveyPlan::new(
            Survey::Keys {
                pattern: Some(pattern),
            },
            &configuration,
            &range,
        );
        assert_eq!(plan.arcs.len(), 1, "{:?}", plan.arcs);
        assert!(plan.range().is_subset(&range));
        let cover = configuration.read_cover(&plan.range()).unwrap();
        assert_eq!(cover.len(), 1);
        // Every replica of the arc answers it from what it holds; the answer is exact.
        let mut answered = 0;
        for (process, _) in &members {
            let holds = configuration.ranges_of(*process);
            let held = keys
                .iter()
                .filter(|key| holds.contains(placement.position(key)));
            let answers =
                survey_answers(&plan.survey, &plan.arcs, &holds, held, &placement, &|_| {
                    Some(&STRING_ENTRY)
                });
            if answers.is_empty() {
                continue;
            }
            answered += 1;
            let expected: Vec<Option<kv::Bytes>> = (1_000..2_000u32)
                .map(|index| Some(format!("user:{index:05}").into_bytes()))
                .collect();
            let merged = plan.merge(
                &answers
                    .into_iter()
                    .map(|(part, outcome)| (u64::from(part), outcome))
                    .collect(),
            );
            assert_eq!(merged, Outcome::Values(expected));
        }
        assert_eq!(answered, 3, "the arc's three replicas answer it");
    }
}
