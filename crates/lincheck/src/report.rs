//! Human-readable failure reports.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::{Model, Operation};

fn format_return(op_return: Option<u64>) -> String {
    match op_return {
        Some(t) => t.to_string(),
        None => "pending".to_string(),
    }
}

/// Builds the report for a non-linearizable partition: its operations sorted
/// by call time, then the longest linearizable prefix found and the state it
/// leads to. `partition` and `prefix` are indices into `history`.
pub(crate) fn build<M: Model>(
    model: &M,
    history: &[Operation<M::Input, M::Output>],
    partition: &[usize],
    prefix: &[usize],
) -> String {
    let mut out = String::new();
    let positions: HashMap<usize, usize> =
        prefix.iter().enumerate().map(|(k, &i)| (i, k)).collect();
    let mut by_call = partition.to_vec();
    by_call.sort_by_key(|&i| (history[i].call, i));
    let _ = writeln!(
        out,
        "history is not linearizable: no valid order for this partition of {} operation(s)",
        partition.len()
    );
    let _ = writeln!(
        out,
        "operations (sorted by call time; lin = position in longest prefix):"
    );
    for &i in &by_call {
        let op = &history[i];
        let position = match positions.get(&i) {
            Some(k) => (k + 1).to_string(),
            None => "-".to_string(),
        };
        let _ = writeln!(
            out,
            "  #{i:<6} client={:<4} call={:<8} return={:<8} lin={position:<4} {}",
            op.client,
            op.call,
            format_return(op.return_time),
            model.describe(&op.input, op.output.as_ref()),
        );
    }
    write_prefix(&mut out, model, history, prefix);
    let stuck: Vec<String> = by_call
        .iter()
        .filter(|i| !positions.contains_key(i))
        .map(|i| format!("#{i}"))
        .collect();
    let _ = writeln!(out, "not linearized after the prefix: {}", stuck.join(", "));
    out
}

fn write_prefix<M: Model>(
    out: &mut String,
    model: &M,
    history: &[Operation<M::Input, M::Output>],
    prefix: &[usize],
) {
    let _ = writeln!(
        out,
        "longest linearizable prefix found ({} operation(s)):",
        prefix.len()
    );
    let mut state = Some(model.init());
    for (k, &i) in prefix.iter().enumerate() {
        let op = &history[i];
        state = state.and_then(|s| model.step(&s, &op.input, op.output.as_ref()));
        let _ = writeln!(
            out,
            "  {:>4}. #{i:<6} client={:<4} {}",
            k + 1,
            op.client,
            model.describe(&op.input, op.output.as_ref()),
        );
    }
    if let Some(state) = state {
        let _ = writeln!(out, "model state after the prefix: {state:?}");
    }
}
