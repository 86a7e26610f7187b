//! A checker in the style of Elle's list-append (Kingsbury and Alvaro, 2020) for a history of
//! committed transactions (the transactions model test in `crates/store`, the psycopg2
//! list-append workload in `crates/tessera/tests/sql_transactions.rs`): every value is appended once, by one transaction, so the final lists
//! give each key's version order; reads give write-read edges (the last value seen) and
//! read-write anti-dependencies (the value appended next), consecutive values write-write edges,
//! and a transaction that ended before another began a real-time edge. A cycle is an anomaly:
//! G0 (write-write edges only), G1c (with write-read), G-single or G2 (with anti-dependencies),
//! each possibly through real time (strict serialisability). Also reported: a value in a list
//! that no committed transaction appended (G1a, an aborted write visible), a read of a value
//! its writer appended over in the same transaction (G1b), a read that is not a prefix of the
//! final list, and a committed append that is lost.

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A list-append micro-operation as a transaction saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Micro {
    /// A read of `key`'s list: what it held.
    Read(i64, Vec<u64>),
    /// An append of a unique value to `key`'s list.
    Append(i64, u64),
}

/// A committed transaction: its id, when it began and ended (any clock shared by every
/// transaction of the history: real-time edges), and its micro-operations in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    /// Names the transaction in findings.
    pub id: u64,
    /// When it began (before its first operation was sent).
    pub began: u64,
    /// When it ended (its commit acknowledged).
    pub ended: u64,
    /// Its micro-operations, in order.
    pub history: Vec<Micro>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Edge {
    WriteWrite,
    WriteRead,
    ReadWrite,
    RealTime,
}

/// The anomalies of `history` (committed transactions) given each key's final list; empty
/// when there is none.
pub fn check(history: &[Committed], finals: &BTreeMap<i64, Vec<u64>>) -> Vec<String> {
    let mut findings = Vec::new();
    let mut writer: HashMap<(i64, u64), usize> = HashMap::new();
    for (index, transaction) in history.iter().enumerate() {
        for micro in &transaction.history {
            if let Micro::Append(key, value) = micro {
                writer.insert((*key, *value), index);
            }
        }
    }
    let mut present = BTreeSet::new();
    for (key, list) in finals {
        for value in list {
            if !present.insert((*key, *value)) {
                findings.push(format!("key {key}: value {value} twice in {list:?}"));
            }
            if !writer.contains_key(&(*key, *value)) {
                findings.push(format!(
                    "G1a: key {key} holds {value}, which no committed transaction appended"
                ));
            }
        }
    }
    for (key, value) in writer.keys() {
        if !present.contains(&(*key, *value)) {
            findings.push(format!("lost: key {key}'s committed append of {value}"));
        }
    }
    let mut edges: BTreeMap<(usize, usize), BTreeSet<Edge>> = BTreeMap::new();
    let mut add = |from: usize, to: usize, edge: Edge| {
        if from != to {
            edges.entry((from, to)).or_default().insert(edge);
        }
    };
    for list in finals.values() {
        for pair in list.windows(2) {
            let key = finals
                .iter()
                .find(|(_, l)| *l == list)
                .map(|(k, _)| *k)
                .unwrap();
            if let (Some(&a), Some(&b)) = (writer.get(&(key, pair[0])), writer.get(&(key, pair[1])))
            {
                add(a, b, Edge::WriteWrite);
            }
        }
    }
    for (index, transaction) in history.iter().enumerate() {
        for micro in &transaction.history {
            let Micro::Read(key, seen) = micro else {
                continue;
            };
            let full = finals.get(key).cloned().unwrap_or_default();
            if !full.starts_with(seen) {
                findings.push(format!(
                    "transaction {}: read {seen:?} of key {key}, not a prefix of {full:?}",
                    transaction.id
                ));
                continue;
            }
            if let Some(&last) = seen.last() {
                if let Some(&from) = writer.get(&(*key, last)) {
                    add(from, index, Edge::WriteRead);
                    let overwritten = history[from].history.iter().skip_while(
                        |m| !matches!(m, Micro::Append(k, v) if k == key && *v == last),
                    );
                    if from != index
                        && overwritten
                            .skip(1)
                            .any(|m| matches!(m, Micro::Append(k, _) if k == key))
                    {
                        findings.push(format!(
                            "G1b: transaction {} read {last} of key {key}, which its writer appended over",
                            transaction.id
                        ));
                    }
                }
            }
            if let Some(next) = full.get(seen.len()) {
                if let Some(&to) = writer.get(&(*key, *next)) {
                    add(index, to, Edge::ReadWrite);
                }
            }
        }
    }
    for (i, first) in history.iter().enumerate() {
        for (j, second) in history.iter().enumerate() {
            if first.ended < second.began {
                add(i, j, Edge::RealTime);
            }
        }
    }
    for component in strongly_connected(history.len(), &edges) {
        let kinds: BTreeSet<Edge> = edges
            .iter()
            .filter(|((a, b), _)| component.contains(a) && component.contains(b))
            .flat_map(|(_, kinds)| kinds.iter().copied())
            .collect();
        let name = if kinds.contains(&Edge::ReadWrite) {
            "G-single or G2"
        } else if kinds.contains(&Edge::WriteRead) {
            "G1c"
        } else {
            "G0"
        };
        let ids: Vec<u64> = component.iter().map(|&i| history[i].id).collect();
        findings.push(format!(
            "{name}: a cycle through transactions {ids:?} ({kinds:?})"
        ));
    }
    findings
}

/// The strongly connected components of more than one node (Tarjan, iteratively).
fn strongly_connected(
    nodes: usize,
    edges: &BTreeMap<(usize, usize), BTreeSet<Edge>>,
) -> Vec<BTreeSet<usize>> {
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); nodes];
    for (from, to) in edges.keys() {
        next[*from].push(*to);
    }
    let (mut index, mut low, mut on_stack) =
        (vec![None; nodes], vec![0; nodes], vec![false; nodes]);
    let (mut stack, mut counter, mut found) = (Vec::new(), 0, Vec::new());
    for root in 0..nodes {
        if index[root].is_some() {
            continue;
        }
        let mut work = vec![(root, 0usize)];
        while let Some((node, child)) = work.pop() {
            if child == 0 {
                index[node] = Some(counter);
                low[node] = counter;
                counter += 1;
                stack.push(node);
                on_stack[node] = true;
            }
            if let Some(&to) = next[node].get(child) {
                work.push((node, child + 1));
                match index[to] {
                    None => work.push((to, 0)),
                    Some(seen) if on_stack[to] => low[node] = low[node].min(seen),
                    Some(_) => {}
                }
                continue;
            }
            if Some(low[node]) == index[node] {
                let mut component = BTreeSet::new();
                while let Some(member) = stack.pop() {
                    on_stack[member] = false;
                    component.insert(member);
                    if member == node {
                        break;
                    }
                }
                if component.len() > 1 {
                    found.push(component);
                }
            }
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[node]);
            }
        }
    }
    found
}

#[cfg(test)]
#[test]
fn the_checker_finds_a_write_skew_cycle_and_passes_a_serial_history() {
    let t = |id, began, ended, history| Committed {
        id,
        began,
        ended,
        history,
    };
    // Serial: 1 appends 10 to key 0, then 2 reads [10] and appends 20.
    let serial = vec![
        t(1, 0, 1, vec![Micro::Read(0, vec![]), Micro::Append(0, 10)]),
        t(
            2,
            2,
            3,
            vec![Micro::Read(0, vec![10]), Micro::Append(0, 20)],
        ),
    ];
    let finals = BTreeMap::from([(0, vec![10, 20]), (1, vec![])]);
    assert!(
        check(&serial, &finals).is_empty(),
        "{:?}",
        check(&serial, &finals)
    );
    // Write skew: each reads the other's key empty, then appends to its own.
    let skew = vec![
        t(1, 0, 5, vec![Micro::Read(1, vec![]), Micro::Append(0, 10)]),
        t(2, 0, 5, vec![Micro::Read(0, vec![]), Micro::Append(1, 20)]),
    ];
    let finals = BTreeMap::from([(0, vec![10]), (1, vec![20])]);
    let found = check(&skew, &finals);
    assert!(
        found.iter().any(|f| f.starts_with("G-single or G2")),
        "{found:?}"
    );
    // A value nobody committed, and a real-time violation.
    let finals = BTreeMap::from([(0, vec![10, 99, 20]), (1, vec![])]);
    let found = check(&serial, &finals);
    assert!(found.iter().any(|f| f.starts_with("G1a")), "{found:?}");
    let stale = vec![
        t(1, 0, 1, vec![Micro::Append(0, 10)]),
        t(2, 2, 3, vec![Micro::Read(0, vec![])]),
    ];
    let finals = BTreeMap::from([(0, vec![10])]);
    let found = check(&stale, &finals);
    assert!(found.iter().any(|f| f.contains("RealTime")), "{found:?}");
}
