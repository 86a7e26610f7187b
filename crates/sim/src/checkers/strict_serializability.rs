//! Strict serialisability of the history's SQL commands.
//!
//! Every engine command (one operation, or a batch) is a transaction on one table, and the
//! store executes each command atomically at one point of the log. So strict serialisability
//! of the SQL history is linearisability with each table as one object whose state is the
//! whole table: each command must take effect at one instant between its invocation and its
//! reply, in an order in which executing the commands one after another on a single engine
//! gives every recorded outcome (rows, counts, aggregates, errors). The history is split per
//! table (P-compositionality, as the KV checker splits per key family; a command touching
//! several tables would join their parts) and searched with `lincheck`.
//!
//! The model executes on its own `engine::Engine`, and batches with
//! `Engine::execute_sequentially` (the naive reference), while replicas run the shared-scan
//! `execute_batch` and serve reads with `Engine::read`: the check also compares those paths.

use super::Violation;
use crate::history::{self, History};
use engine::{Command, Engine, Outcome};
use lincheck::{Budget, CheckResult, Model, Operation};

/// The model's state: an engine, compared and hashed by its snapshot bytes (exact: rows in key
/// order, schemas and indexes).
#[derive(Clone, Debug)]
pub struct TableState {
    pub engine: Engine,
    bytes: Vec<u8>,
}

impl TableState {
    pub fn new(engine: Engine) -> TableState {
        let bytes = engine.snapshot_bytes();
        TableState { engine, bytes }
    }
}

impl PartialEq for TableState {
    fn eq(&self, other: &TableState) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for TableState {}

impl std::hash::Hash for TableState {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.bytes.hash(state);
    }
}

/// The sequential specification: the engine executing one command after another, starting
/// from the run's initial tables.
pub struct SqlModel {
    pub initial: Engine,
}

/// Executes a command the reference way: operations one after another.
pub fn execute_sequentially(engine: &mut Engine, command: &Command) -> Outcome {
    match command {
        Command::Execute(operation) => Outcome::Executed(engine.execute(operation)),
        Command::Batch(operations) => Outcome::Batch(engine.execute_sequentially(operations)),
        Command::Explain(operation) => Outcome::Explained(engine.explain(operation)),
        Command::Guarded { catalog, command } => {
            if *catalog != engine.catalog_digest() {
                return Outcome::Error(engine::EngineError::StaleCatalog);
            }
            execute_sequentially(engine, command)
        }
    }
}

/// The tables a command touches.
pub fn tables_of(command: &Command) -> Vec<String> {
    let mut tables: Vec<String> = match command {
        Command::Execute(operation) | Command::Explain(operation) => {
            vec![operation.table_name().to_string()]
        }
        Command::Batch(operations) => operations
            .iter()
            .map(|operation| operation.table_name().to_string())
            .collect(),
        // The guard reads the whole catalog; the workload runs no DDL, so the catalog never
        // changes and the guard's outcome depends on no table's history.
        Command::Guarded { command, .. } => tables_of(command),
    };
    tables.sort();
    tables.dedup();
    tables
}

impl Model for SqlModel {
    type State = TableState;
    type Input = Command;
    type Output = Outcome;

    fn init(&self) -> TableState {
        TableState::new(self.initial.clone())
    }

    fn step(
        &self,
        state: &TableState,
        input: &Command,
        output: Option<&Outcome>,
    ) -> Option<TableState> {
        let mut next = state.engine.clone();
        let outcome = execute_sequentially(&mut next, input);
        match output {
            Some(observed) if *observed != outcome => None,
            _ if input.is_read() => Some(state.clone()),
            _ => Some(TableState::new(next)),
        }
    }

    fn is_read_only(&self, input: &Command) -> bool {
        input.is_read()
    }

    fn partition(&self, history: &[Operation<Command, Outcome>]) -> Vec<Vec<usize>> {
        let tables: Vec<Vec<String>> = history
            .iter()
            .map(|operation| tables_of(&operation.input))
            .collect();
        super::linearizability::partition_by_keys(
            tables
                .iter()
                .map(|names| names.iter().map(|name| name.as_bytes()).collect()),
        )
    }

    fn describe(&self, input: &Command, output: Option<&Outcome>) -> String {
        format!(
            "{input:?} -> {}",
            output.map_or("(no reply)".to_string(), |output| format!("{output:?}"))
        )
    }
}

/// The search budget per history (shared by its tables' parts).
pub const SEARCH_STEPS_MAX: u64 = super::linearizability::SEARCH_STEPS_MAX;

/// The SQL operations of a history, as `lincheck` operations: reads that never got a reply
/// had no effect and are left out; writes without one are pending (they may have taken effect).
pub fn operations(history: &History) -> Vec<Operation<Command, Outcome>> {
    history.operations(
        |command| match command {
            history::Command::Sql(command) => Some(command),
            history::Command::Kv(_) => None,
        },
        |outcome| match outcome {
            history::Outcome::Sql(outcome) => Some(outcome),
            history::Outcome::Kv(_) => None,
        },
    )
}

/// Checks the SQL part of a history against tables starting as `initial`.
pub fn check(history: &History, initial: &Engine) -> Result<(), Violation> {
    check_operations(&operations(history), initial)
}

/// Checks SQL operations against tables starting as `initial`.
pub fn check_operations(
    operations: &[Operation<Command, Outcome>],
    initial: &Engine,
) -> Result<(), Violation> {
    if operations.is_empty() {
        return Ok(());
    }
    let model = SqlModel {
        initial: initial.clone(),
    };
    match lincheck::check(&model, operations, Budget::steps(SEARCH_STEPS_MAX)) {
        CheckResult::Ok => Ok(()),
        CheckResult::Illegal(violation) => Err(Violation {
            checker: "strict_serializability",
            report: violation.report,
        }),
        CheckResult::Unknown => Err(Violation {
            checker: "strict_serializability",
            report: format!(
                "search gave up after {SEARCH_STEPS_MAX} steps: neither proven nor refuted"
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{initial_store, table_name};
    use engine::{Assignment, CompareOp, OnConflict, Operation as Op, Output, Predicate, Value};

    fn initial() -> Engine {
        initial_store(&[None, Some("owner")]).engine
    }

    fn upsert(table: usize, id: i64, owner: &str, balance: i64) -> Command {
        Command::Execute(Op::Insert {
            table: table_name(table),
            columns: vec![],
            rows: vec![vec![
                Value::BigInt(id),
                Value::Text(owner.into()),
                Value::BigInt(balance),
                Value::Boolean(false),
            ]],
            on_conflict: OnConflict::DoUpdate(vec![
                Assignment::new("owner", Value::Text(owner.into())),
                Assignment::new("balance", Value::BigInt(balance)),
            ]),
        })
    }

    /// UPDATE SET flag = true WHERE balance > 10 AND owner = 'ann'.
    fn flag_rich_ann(table: usize) -> Command {
        Command::Execute(Op::Update {
            table: table_name(table),
            assignments: vec![Assignment::new("flag", Value::Boolean(true))],
            predicate: Some(Predicate::And(vec![
                Predicate::compare("balance", CompareOp::Greater, Value::BigInt(10)),
                Predicate::equal("owner", Value::Text("ann".into())),
            ])),
        })
    }

    /// SELECT id, balance WHERE flag = true.
    fn flagged(table: usize) -> Command {
        Command::Execute(Op::Select {
            table: table_name(table),
            columns: vec!["id".into(), "balance".into()],
            predicate: Some(Predicate::equal("flag", Value::Boolean(true))),
            limit: None,
        })
    }

    fn executed(output: Output) -> Outcome {
        Outcome::Executed(Ok(output))
    }

    fn rows(rows: Vec<(i64, i64)>) -> Outcome {
        executed(Output::Rows {
            columns: vec!["id".into(), "balance".into()],
            rows: rows
                .into_iter()
                .map(|(id, balance)| vec![Value::BigInt(id), Value::BigInt(balance)])
                .collect(),
        })
    }

    fn op(
        client: u64,
        call: u64,
        ret: u64,
        input: Command,
        output: Outcome,
    ) -> Operation<Command, Outcome> {
        Operation::completed(client, call, ret, input, output)
    }

    #[test]
    fn a_sequential_history_passes_and_concurrent_ones_may_reorder() {
        let history = vec![
            op(
                1,
                1,
                2,
                upsert(0, 1, "ann", 50),
                executed(Output::Inserted { count: 1 }),
            ),
            op(
                1,
                3,
                4,
                flag_rich_ann(0),
                executed(Output::Updated { count: 1 }),
            ),
            // Concurrent with the update: may see it or not; here it did not.
            op(2, 3, 6, flagged(0), rows(vec![])),
            op(2, 7, 8, flagged(0), rows(vec![(1, 50)])),
        ];
        assert_eq!(check_operations(&history, &initial()), Ok(()));
    }

    #[test]
    fn a_stale_predicate_read_is_rejected() {
        // The update completed before the select started, but the select misses its effect.
        let history = vec![
            op(
                1,
                1,
                2,
                upsert(0, 1, "ann", 50),
                executed(Output::Inserted { count: 1 }),
            ),
            op(
                1,
                3,
                4,
                flag_rich_ann(0),
                executed(Output::Updated { count: 1 }),
            ),
            op(2, 5, 6, flagged(0), rows(vec![])),
        ];
        let violation = check_operations(&history, &initial()).unwrap_err();
        assert_eq!(violation.checker, "strict_serializability");
    }

    #[test]
    fn a_lost_update_is_rejected() {
        // Client 1 changes row 3's owner from ann to bob; after that completed, client 2's
        // predicate update (owner = 'ann') claims to have matched a row: it acted on a state
        // that had lost client 1's write.
        let history = vec![
            op(
                1,
                1,
                2,
                upsert(1, 3, "ann", 40),
                executed(Output::Inserted { count: 1 }),
            ),
            op(
                1,
                3,
                4,
                upsert(1, 3, "bob", 40),
                executed(Output::Inserted { count: 1 }),
            ),
            // Starts after the owner became bob, yet flags an 'ann' row.
            op(
                2,
                5,
                6,
                flag_rich_ann(1),
                executed(Output::Updated { count: 1 }),
            ),
        ];
        assert!(check_operations(&history, &initial()).is_err());
        // And a final read that misses a completed delete-by-predicate.
        let delete = Command::Execute(Op::Delete {
            table: table_name(1),
            predicate: Some(Predicate::And(vec![
                Predicate::equal("flag", Value::Boolean(false)),
                Predicate::compare("balance", CompareOp::Less, Value::BigInt(100)),
            ])),
        });
        let history = vec![
            op(
                1,
                1,
                2,
                upsert(1, 3, "ann", 40),
                executed(Output::Inserted { count: 1 }),
            ),
            op(1, 3, 4, delete, executed(Output::Deleted { count: 1 })),
            op(
                2,
                5,
                6,
                Command::Execute(Op::Select {
                    table: table_name(1),
                    columns: vec!["id".into(), "balance".into()],
                    predicate: None,
                    limit: None,
                }),
                rows(vec![(3, 40)]),
            ),
        ];
        assert!(check_operations(&history, &initial()).is_err());
    }

    #[test]
    fn tables_are_checked_apart_and_a_pending_write_may_or_may_not_apply() {
        let history = vec![
            Operation::pending(1, 1, upsert(0, 1, "ann", 50)),
            op(
                2,
                2,
                3,
                upsert(1, 1, "ann", 50),
                executed(Output::Inserted { count: 1 }),
            ),
            op(3, 4, 5, flagged(0), rows(vec![])),
            op(
                3,
                6,
                7,
                flag_rich_ann(0),
                executed(Output::Updated { count: 1 }),
            ),
            op(3, 8, 9, flagged(1), rows(vec![])),
        ];
        assert_eq!(check_operations(&history, &initial()), Ok(()));
        let model = SqlModel { initial: initial() };
        assert_eq!(model.partition(&history).len(), 2);
    }
}
