//! Linearisability of the whole client history (Herlihy & Wing), checked with the `lincheck`
//! crate: the history is split into independent parts by the keys the operations touch
//! (P-compositionality; multi-key operations join their keys' parts), and each part is searched
//! against a sequential model of the key-value store. (The history's SQL operations are
//! checked by `strict_serializability`.)

use super::Violation;
use crate::history::{self, History};
use crate::workload::keys_of;
use kv::{Command, KvStore, Outcome};
use lincheck::{Budget, CheckResult, Model, Operation};
use std::collections::BTreeMap;

/// The sequential specification: the store's own deterministic semantics on a fresh map.
pub struct KvModel;

impl Model for KvModel {
    type State = KvStore;
    type Input = Command;
    type Output = Outcome;

    fn init(&self) -> KvStore {
        KvStore::new()
    }

    fn step(&self, state: &KvStore, input: &Command, output: Option<&Outcome>) -> Option<KvStore> {
        let mut next = state.clone();
        let outcome = next.execute(input);
        match output {
            Some(observed) if *observed != outcome => None,
            _ => Some(next),
        }
    }

    fn is_read_only(&self, input: &Command) -> bool {
        input.is_read()
    }

    fn partition(&self, history: &[Operation<Command, Outcome>]) -> Vec<Vec<usize>> {
        partition_by_keys(history.iter().map(|operation| keys_of(&operation.input)))
    }

    fn describe(&self, input: &Command, output: Option<&Outcome>) -> String {
        format!(
            "{} -> {}",
            describe_command(input),
            output.map_or("(no reply)".to_string(), describe_outcome)
        )
    }
}

/// Groups operations whose key sets connect (union-find over keys).
pub fn partition_by_keys<'a>(key_sets: impl Iterator<Item = Vec<&'a [u8]>>) -> Vec<Vec<usize>> {
    let key_sets: Vec<Vec<&[u8]>> = key_sets.collect();
    let mut key_ids: BTreeMap<&[u8], usize> = BTreeMap::new();
    let mut parent: Vec<usize> = Vec::new();
    fn find(parent: &mut [usize], mut node: usize) -> usize {
        while parent[node] != node {
            parent[node] = parent[parent[node]];
            node = parent[node];
        }
        node
    }
    for keys in &key_sets {
        let mut first = None;
        for key in keys {
            let id = *key_ids.entry(key).or_insert_with(|| {
                parent.push(parent.len());
                parent.len() - 1
            });
            match first {
                None => first = Some(id),
                Some(root) => {
                    let (a, b) = (find(&mut parent, root), find(&mut parent, id));
                    parent[b] = a;
                }
            }
        }
    }
    let mut parts: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut keyless = Vec::new();
    for (index, keys) in key_sets.iter().enumerate() {
        match keys.first() {
            Some(key) => {
                let root = find(&mut parent, key_ids[key]);
                parts.entry(root).or_default().push(index);
            }
            None => keyless.push(index),
        }
    }
    let mut parts: Vec<Vec<usize>> = parts.into_values().collect();
    if !keyless.is_empty() {
        // A keyless operation (a count) sees every key: check everything together.
        return vec![(0..key_sets.len()).collect()];
    }
    parts.sort();
    parts
}

fn describe_command(command: &Command) -> String {
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    match command {
        Command::Get { key } => format!("get {}", text(key)),
        Command::Put { key, value } => format!("put {} {}", text(key), text(value)),
        Command::Delete { key } => format!("delete {}", text(key)),
        Command::Increment { key, by } => format!("incr {} {by}", text(key)),
        Command::Append { key, value } => format!("append {} {}", text(key), text(value)),
        Command::GetSet { key, value } => format!("getset {} {}", text(key), text(value)),
        Command::MultiPut { pairs } => {
            let pairs: Vec<String> = pairs
                .iter()
                .map(|(key, value)| format!("{}={}", text(key), text(value)))
                .collect();
            format!("mput {}", pairs.join(" "))
        }
        Command::MultiGet { keys } => format!(
            "mget {}",
            keys.iter()
                .map(|key| text(key))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        Command::MultiDelete { keys } => {
            format!(
                "mdel {}",
                keys.iter()
                    .map(|key| text(key))
                    .collect::<Vec<_>>()
                    .join(" ")
            )
        }
        Command::Count => "count".to_string(),
        Command::Pipeline { commands } => {
            format!(
                "pipeline [{}]",
                commands
                    .iter()
                    .map(describe_command)
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        }
        Command::Set {
            key,
            value,
            condition,
            return_previous,
        } => {
            format!(
                "set {} {} {condition:?}{}",
                text(key),
                text(value),
                if *return_previous { " get" } else { "" }
            )
        }
        Command::At { now_ms, command } => format!("at {now_ms} {}", describe_command(command)),
        // The simulator's workloads issue none of these; described by their debug form.
        other => format!("{other:?}"),
    }
}

fn describe_outcome(outcome: &Outcome) -> String {
    let value = |value: &Option<Vec<u8>>| {
        value.as_ref().map_or("nil".to_string(), |bytes| {
            String::from_utf8_lossy(bytes).into_owned()
        })
    };
    match outcome {
        Outcome::Ok => "ok".to_string(),
        Outcome::Value(found) => value(found),
        Outcome::Values(found) => format!(
            "[{}]",
            found.iter().map(value).collect::<Vec<_>>().join(" ")
        ),
        Outcome::Integer(number) => number.to_string(),
        Outcome::Integers(numbers) => format!("{numbers:?}"),
        Outcome::Error(error) => format!("error: {error}"),
        Outcome::Pipeline(outcomes) => format!(
            "[{}]",
            outcomes
                .iter()
                .map(describe_outcome)
                .collect::<Vec<_>>()
                .join("; ")
        ),
        Outcome::Foreign(bytes) => format!("foreign outcome of {} bytes", bytes.len()),
        Outcome::Reserved { record, version } => {
            format!("reserved {} at version {version}", value(record))
        }
    }
}

/// The search budget: generous for the simulator's histories (a few thousand operations split
/// into small parts), but bounded so a pathological history reports "unknown" instead of hanging.
pub const SEARCH_STEPS_MAX: u64 = 50_000_000;

/// Checks the history. Reads that never got a reply had no effect and are left out; writes
/// that never got one may or may not have taken effect, and are kept as pending.
pub fn check(history: &History) -> Result<(), Violation> {
    let operations: Vec<Operation<Command, Outcome>> = history.operations(
        |command| match command {
            history::Command::Kv(command) => Some(command),
            history::Command::Sql(_) => None,
        },
        |outcome| match outcome {
            history::Outcome::Kv(outcome) => Some(outcome),
            history::Outcome::Sql(_) => None,
        },
    );
    match lincheck::check(&KvModel, &operations, Budget::steps(SEARCH_STEPS_MAX)) {
        CheckResult::Ok => Ok(()),
        CheckResult::Illegal(violation) => Err(Violation {
            checker: "linearizability",
            report: violation.report,
        }),
        CheckResult::Unknown => Err(Violation {
            checker: "linearizability",
            report: format!(
                "search gave up after {SEARCH_STEPS_MAX} steps: neither proven nor refuted"
            ),
        }),
    }
}
