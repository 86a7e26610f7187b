//! Statements prepared across partitions: a partitioned cluster's two-phase SQL writes.
//!
//! Every write outside transactions that reaches several partitions, DDL included, goes in two
//! E-Cast messages to every partition (Sprint §4.2's termination, with the gateway collecting
//! the votes), for two reasons:
//!
//! - a write that can fail on the data (`fallible`: an insert meeting a duplicate key, an
//!   `UPDATE … SET` expression dividing by zero) must fail everywhere or nowhere, as in
//!   PostgreSQL, yet each partition only sees its own rows;
//! - a partition refuses a write where an open transaction holds its table
//!   (`transactions::Transactions::blocker`), and a transaction's intention locks are held
//!   only where its rows are (`transactions` module doc): a write sent in one message could be
//!   refused at one partition and applied at the others, and sent again it would run there
//!   twice.
//!
//! The two messages:
//!
//! 1. *prepare*: each partition votes and records the statement, which from then on *holds*
//!    the tables it writes. The vote of a fallible write is a dry run of its share
//!    (`Engine::dry_run`: what it would answer, nothing written); of any other write, whether
//!    an open transaction's lock refuses it here (and its catalog guard). A fallible
//!    statement's hold is *exclusive*: every other write to its tables, on any partition, is
//!    refused (`EngineError::Busy`) and retried by its gateway, since its commit must meet the
//!    rows its vote saw. Any other statement's hold is *shared*: writes outside transactions
//!    to its tables go on (its commit writes the same whatever ran before it), and so do other
//!    shared holds; a fallible prepare is refused by it. Either way reads outside transactions
//!    go on, and see the tables as they were; a transaction's new locks on held tables, row and
//!    read locks included, wait (`Busy`) until the decision, since the commit writes under
//!    whatever locks are held (`transactions::Transactions::admit_as`; the vote made sure no
//!    transaction holds the rows the statement pins, `Transactions::pinned_blocker`). A prepare meeting a hold it may not
//!    share votes `Busy` and records nothing (it aborts for certain; recorded, it would hold
//!    the tables against the next writer's prepare, and under steady contention a chain of
//!    refused prepares would keep them held for ever);
//! 2. *decide*: commit if every vote succeeded, else abort. A commit runs each partition's
//!    share for real; a fallible one over the same rows the votes saw (no write reached them
//!    in between), so it succeeds; either way the statement stops holding its tables.
//!
//! Every partition records the statement at the same point of the global order and forgets it
//! at the same later point (both messages go to every partition), so the tables held are the
//! same on every partition at every point of the order: a write or prepare refused for a hold
//! by one destination is refused by all. A gateway that dies between the two leaves the tables
//! held; another gateway whose writes keep being refused decides the statement (abort) after a
//! while. Decisions are ordered: the first one delivered wins everywhere, and a later one finds
//! nothing to decide. The statements held travel with Rubberband copies (a group started by a
//! keyspace change learns them from its install).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One prepared statement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Statement {
    /// The tables it writes (held until it is decided).
    pub tables: Vec<String>,
    /// The engine command (`engine::Command::encode`), run at the commit.
    #[serde(with = "wire::bytes")]
    pub command: Vec<u8>,
    /// A hold that other writes outside transactions share (the command is not `fallible`).
    pub shared: bool,
}

/// The statements prepared here and not decided yet, by the id their gateway gave them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prepared {
    statements: BTreeMap<u64, Statement>,
}

impl Prepared {
    /// The first statement (by id) holding one of `tables`, with the table: what refuses a
    /// transaction's lock on them and a fallible statement's prepare.
    pub fn holder<'a>(
        &self,
        tables: impl IntoIterator<Item = &'a str> + Clone,
    ) -> Option<(String, u64)> {
        self.holder_where(tables, |_| true)
    }

    /// The first statement (by id) holding one of `tables` exclusively, with the table: what
    /// refuses a write outside transactions and a shared statement's prepare.
    pub fn exclusive_holder<'a>(
        &self,
        tables: impl IntoIterator<Item = &'a str> + Clone,
    ) -> Option<(String, u64)> {
        self.holder_where(tables, |statement| !statement.shared)
    }

    fn holder_where<'a>(
        &self,
        tables: impl IntoIterator<Item = &'a str> + Clone,
        counts: impl Fn(&Statement) -> bool,
    ) -> Option<(String, u64)> {
        self.statements
            .iter()
            .filter(|(_, statement)| counts(statement))
            .find_map(|(id, statement)| {
                tables
                    .clone()
                    .into_iter()
                    .find(|table| statement.tables.iter().any(|held| held == table))
                    .map(|table| (table.to_string(), *id))
            })
    }

    pub fn record(&mut self, id: u64, statement: Statement) {
        self.statements.insert(id, statement);
    }

    /// Statement `id`, if it is prepared here.
    pub fn get(&self, id: u64) -> Option<&Statement> {
        self.statements.get(&id)
    }

    /// Forgets statement `id` (its decision), if it is here.
    pub fn take(&mut self, id: u64) -> Option<Statement> {
        self.statements.remove(&id)
    }

    /// Takes in the statements another partition holds (a Rubberband copy).
    pub fn absorb(&mut self, other: Prepared) {
        self.statements.extend(other.statements);
    }

    pub fn is_empty(&self) -> bool {
        self.statements.is_empty()
    }

    pub fn len(&self) -> usize {
        self.statements.len()
    }
}

/// The tables an engine command writes (DDL included); none for reads.
pub fn written_tables(command: &engine::Command) -> Vec<String> {
    let operations: &[engine::Operation] = match command {
        engine::Command::Guarded { command, .. } => return written_tables(command),
        engine::Command::Execute(operation) => std::slice::from_ref(operation),
        engine::Command::Batch(operations) => operations,
        engine::Command::Explain(_) => &[],
    };
    let mut tables: Vec<String> = operations
        .iter()
        .filter(|operation| !operation.is_read())
        .map(|operation| operation.table_name().to_string())
        .collect();
    tables.sort();
    tables.dedup();
    tables
}

/// Whether a write can fail on the data rather than on its plan: a plain insert (a duplicate
/// key), an update computing its values or an insert whose DO UPDATE computes them (division
/// by zero, overflow, NOT NULL, lengths, CHECK constraints: the planner sends every write to a
/// table with CHECK constraints in one of these forms, `sql::plan`). Such a write votes with a
/// dry run and holds its tables exclusively; any other (constant updates, deletes, inserts
/// with ON CONFLICT, DDL: the same outcome on every partition) votes without one and holds
/// them shared, except ALTER TABLE … SET NOT NULL, ADD COLUMN … NOT NULL without a default,
/// ADD CONSTRAINT … CHECK and RENAME TO, which fail where a partition holds a NULL (a row
/// failing the check, any row).
pub fn fallible(command: &engine::Command) -> bool {
    let operations: &[engine::Operation] = match command {
        engine::Command::Guarded { command, .. } => return fallible(command),
        engine::Command::Execute(operation) => std::slice::from_ref(operation),
        engine::Command::Batch(operations) => operations,
        engine::Command::Explain(_) => &[],
    };
    operations.iter().any(|operation| {
        matches!(
            operation,
            engine::Operation::Insert {
                on_conflict: engine::OnConflict::Error
                    | engine::OnConflict::DoUpdateComputed { .. },
                ..
            } | engine::Operation::UpdateComputed { .. }
        ) || matches!(operation, engine::Operation::AlterTable { changes, .. }
        if changes.iter().any(|change| match change {
            engine::TableChange::SetNotNull { not_null, .. } => *not_null,
            engine::TableChange::AddCheck { .. } => true,
            engine::TableChange::AddColumn { column, fill } => !column.nullable && fill.is_null(),
            engine::TableChange::RenameTable { .. } => true,
            _ => false,
        }))
    })
}

#[cfg(test)]
mod tests {
    use crate::{decide_operation, prepare_operation, rows, sql_operation, Store};
    use engine::expression::Operator;
    use engine::{
        ColumnDef, Command, ComputedAssignment, DataType, EngineError, Expression, OnConflict,
        Operation, Outcome, TableSchema, Value,
    };

    /// Two partitions of one table `t (id, n)`: even ids on the first, odd on the second.
    fn partitions() -> (Store, Store) {
        let schema = TableSchema::new(
            "t",
            vec![
                ColumnDef::new("id", DataType::BigInt).not_null(),
                ColumnDef::new("n", DataType::BigInt),
            ],
            &["id"],
        )
        .unwrap();
        let mut stores = (Store::new(), Store::new());
        for (store, parity) in [(&mut stores.0, 0), (&mut stores.1, 1)] {
            let create = Command::Execute(Operation::CreateTable {
                schema: schema.clone(),
            });
            store.execute_share(&sql_operation(&create), |_| true);
            let insert = Command::Execute(insert(&[(parity, 7 + parity), (parity + 2, 10)]));
            store.execute_share(&sql_operation(&insert), |_| true);
        }
        stores
    }

    fn insert(rows: &[(i64, i64)]) -> Operation {
        Operation::Insert {
            table: "t".into(),
            columns: Vec::new(),
            rows: rows
                .iter()
                .map(|(id, n)| vec![Value::BigInt(*id), Value::BigInt(*n)])
                .collect(),
            on_conflict: OnConflict::Error,
        }
    }

    /// `UPDATE t SET n = 100 / (n - 8)`: divides by zero on the odd partition's row 1 (n = 8).
    fn divide() -> Command {
        Command::Execute(Operation::UpdateComputed {
            table: "t".into(),
            assignments: vec![ComputedAssignment::new(
                "n",
                Expression::Binary(
                    Operator::Divide,
                    Box::new(Expression::Constant(Value::BigInt(100))),
                    Box::new(Expression::Binary(
                        Operator::Subtract,
                        Box::new(Expression::Column("n".into())),
                        Box::new(Expression::Constant(Value::BigInt(8))),
                    )),
                ),
            )],
            predicate: None,
        })
    }

    fn outcome(bytes: Vec<u8>) -> Outcome {
        Outcome::decode(&bytes).unwrap()
    }

    fn rows_of(store: &Store) -> Vec<Vec<Value>> {
        store
            .engine
            .table("t")
            .unwrap()
            .rows
            .values()
            .cloned()
            .collect()
    }

    #[test]
    fn a_statement_that_fails_on_one_partition_changes_none_and_holds_its_table_until_decided() {
        let (mut even, mut odd) = partitions();
        let (even_rows, odd_rows) = (rows_of(&even), rows_of(&odd));
        let prepare = prepare_operation(41, &sql_operation(&divide()));
        let even_vote = outcome(even.execute_share(&prepare, |_| true));
        let odd_vote = outcome(odd.execute_share(&prepare, |_| true));
        assert!(
            matches!(even_vote, Outcome::Executed(Ok(_))),
            "{even_vote:?}"
        );
        assert!(
            matches!(&odd_vote, Outcome::Executed(Err(error)) if error.code() == "22012"),
            "{odd_vote:?}"
        );
        // Voting wrote nothing; until the decision every write to t is refused everywhere,
        // reads are served.
        assert_eq!(
            (rows_of(&even), rows_of(&odd)),
            (even_rows.clone(), odd_rows.clone())
        );
        for store in [&mut even, &mut odd] {
            let write = sql_operation(&Command::Execute(insert(&[(9, 9)])));
            assert_eq!(
                outcome(store.execute_share(&write, |_| true)),
                Outcome::Error(EngineError::Busy {
                    table: "t".into(),
                    statement: 41
                })
            );
            let read = sql_operation(&Command::Execute(Operation::Select {
                table: "t".into(),
                columns: Vec::new(),
                predicate: None,
                limit: None,
            }));
            assert!(matches!(
                outcome(store.execute_share(&read, |_| true)),
                Outcome::Executed(Ok(_))
            ));
            // A second statement's prepare votes Busy, and holds nothing.
            let other =
                prepare_operation(42, &sql_operation(&Command::Execute(insert(&[(20, 1)]))));
            assert!(matches!(
                outcome(store.execute_share(&other, |_| true)),
                Outcome::Error(EngineError::Busy { statement: 41, .. })
            ));
            assert_eq!(store.prepared.len(), 1);
        }
        // Both are aborted: nothing changed, t is free, a second decision finds nothing.
        for store in [&mut even, &mut odd] {
            let abort = decide_operation(41, false);
            assert_eq!(
                outcome(store.execute_share(&abort, |_| true)),
                Outcome::Batch(Vec::new())
            );
            // The refused statement was never recorded: its abort finds nothing to decide.
            assert!(matches!(
                outcome(store.execute_share(&decide_operation(42, false), |_| true)),
                Outcome::Error(EngineError::Busy { statement: 42, ref table }) if table.is_empty()
            ));
            assert!(matches!(
                outcome(store.execute_share(&decide_operation(41, true), |_| true)),
                Outcome::Error(EngineError::Busy { statement: 41, .. })
            ));
            assert!(store.prepared.is_empty());
        }
        assert_eq!((rows_of(&even), rows_of(&odd)), (even_rows, odd_rows));
    }

    #[test]
    fn a_committed_statement_runs_each_partitions_share_and_survives_snapshots() {
        let (mut even, mut odd) = partitions();
        // An insert whose rows lie in both partitions: each keeps its share.
        let command = Command::Execute(insert(&[(4, 1), (5, 1), (6, 1)]));
        let prepare = prepare_operation(7, &sql_operation(&command));
        let held_even = |key: &[u8]| {
            [4i64, 6]
                .iter()
                .any(|id| key == rows::placement_key("t", &Value::BigInt(*id)))
        };
        let held_odd = |key: &[u8]| key == rows::placement_key("t", &Value::BigInt(5));
        let vote = outcome(even.execute_share(&prepare, held_even));
        assert!(
            matches!(
                vote,
                Outcome::Executed(Ok(engine::Output::Inserted { count: 2 }))
            ),
            "{vote:?}"
        );
        odd.execute_share(&prepare, held_odd);
        let mut restored = Store::new();
        vr::StateMachine::restore(&mut restored, &vr::StateMachine::snapshot(&odd)).unwrap();
        assert_eq!(restored.prepared, odd.prepared);
        // A statement prepared meanwhile votes Busy (and will abort): the commit runs anyway.
        let meanwhile = prepare_operation(9, &sql_operation(&Command::Execute(insert(&[(20, 1)]))));
        assert!(matches!(
            outcome(even.execute_share(&meanwhile, held_even)),
            Outcome::Error(EngineError::Busy { statement: 7, .. })
        ));
        let commit = decide_operation(7, true);
        assert!(matches!(
            outcome(even.execute_share(&commit, held_even)),
            Outcome::Executed(Ok(engine::Output::Inserted { count: 2 }))
        ));
        assert!(matches!(
            outcome(restored.execute_share(&commit, held_odd)),
            Outcome::Executed(Ok(engine::Output::Inserted { count: 1 }))
        ));
        assert_eq!(rows_of(&even).len(), 4);
        // The refused statement recorded nothing: its abort finds nothing to decide.
        assert!(matches!(
            outcome(even.execute_share(&decide_operation(9, false), held_even)),
            Outcome::Error(EngineError::Busy { statement: 9, .. })
        ));
        assert!(even.prepared.is_empty());
        assert_eq!(rows_of(&restored).len(), 3);
        // A duplicate key in one partition fails the vote there.
        let duplicate = prepare_operation(
            8,
            &sql_operation(&Command::Execute(insert(&[(5, 2), (8, 2)]))),
        );
        assert!(matches!(
            outcome(restored.execute_share(&duplicate, held_odd)),
            Outcome::Executed(Err(EngineError::UniqueViolation { .. }))
        ));
        assert!(super::fallible(&command) && super::fallible(&divide()));
        assert!(!super::fallible(&Command::Execute(Operation::Delete {
            table: "t".into(),
            predicate: None
        })));
    }
    /// The commit runs the share the vote cut (kept beside the statement, not decoded again),
    /// unless the holdings changed in between (`Store::forget_prepared_shares`, at a cut or an
    /// install): then it cuts the statement again to the new holdings.
    #[test]
    fn a_commit_runs_the_votes_share_unless_the_holdings_changed() {
        let held = |ids: &'static [i64]| {
            move |key: &[u8]| {
                ids.iter()
                    .any(|id| key == rows::placement_key("t", &Value::BigInt(*id)))
            }
        };
        let rows = || insert(&[(4, 1), (5, 1), (6, 1)]);
        for batch in [false, true] {
            let command = match batch {
                false => Command::Execute(rows()),
                true => Command::Batch(vec![rows()]),
            };
            let prepare = prepare_operation(7, &sql_operation(&command));
            for forget in [false, true] {
                let (mut even, _) = partitions();
                even.execute_share(&prepare, held(&[4, 6]));
                // The vote bound its plain insert for the commit (`engine::BoundWrite`).
                assert!(even.prepared_shares[&7].bound.is_some(), "batch {batch}");
                if forget {
                    // A cut moved 6 away before the decision.
                    even.forget_prepared_shares();
                }
                let commit = outcome(even.execute_share(&decide_operation(7, true), held(&[4])));
                let count = if forget { 1 } else { 2 };
                let answer = match commit {
                    Outcome::Executed(answer) if !batch => answer,
                    Outcome::Batch(mut answers) if batch && answers.len() == 1 => answers.remove(0),
                    commit => panic!("batch {batch}: {commit:?}"),
                };
                assert_eq!(
                    answer,
                    Ok(engine::Output::Inserted { count }),
                    "batch {batch}"
                );
                assert!(even.prepared.is_empty() && even.prepared_shares_len() == 0);
                assert_eq!(
                    rows_of(&even).len(),
                    2 + count as usize,
                    "batch {batch}: the committed rows are stored beside rows 0 and 2"
                );
            }
        }
    }

    /// `DELETE FROM t WHERE n = 10`: a non-key write that cannot fail on the data.
    fn delete_tens() -> Command {
        Command::Execute(Operation::Delete {
            table: "t".into(),
            predicate: Some(engine::Predicate::Compare {
                column: "n".into(),
                op: engine::CompareOp::Equal,
                value: Value::BigInt(10),
            }),
        })
    }

    /// A transaction's intention lock on `t`, taken at one partition only, as a statement
    /// pinned to one of its rows takes it (`transactions` module doc).
    fn intention_here(store: &mut Store, transaction: u64) {
        let request = crate::transactions::LockRequest {
            transaction,
            begin_ms: 1,
            now_ms: 1,
            locks: vec![(
                ("t".into(), None),
                crate::transactions::Mode::IntentExclusive,
            )],
            nowait: true,
        };
        let granted = outcome(store.execute_share(&crate::lock_operation(&request), |_| true));
        assert_eq!(granted, Outcome::Batch(Vec::new()));
    }

    /// Why every write over several partitions goes in two phases: a transaction's intention
    /// lock is held at one partition only, which refuses the write; the others would run it.
    /// In two phases the refusal is a vote, the statement is aborted everywhere, and sent
    /// again it runs once at every partition.
    #[test]
    fn a_write_refused_by_a_transaction_at_one_partition_runs_nowhere() {
        let (mut even, mut odd) = partitions();
        intention_here(&mut even, 5);
        let prepare = prepare_operation(8, &sql_operation(&delete_tens()));
        let even_vote = outcome(even.execute_share(&prepare, |_| true));
        let odd_vote = outcome(odd.execute_share(&prepare, |_| true));
        assert!(
            matches!(&even_vote, Outcome::Error(error) if error.code() == "55P03"
                || error.code() == "40001"),
            "the transaction's partition refuses: {even_vote:?}"
        );
        // No dry run: the vote of a write that cannot fail on the data.
        assert_eq!(odd_vote, Outcome::Batch(Vec::new()));
        let (even_rows, odd_rows) = (rows_of(&even), rows_of(&odd));
        for store in [&mut even, &mut odd] {
            store.execute_share(&decide_operation(8, false), |_| true);
            assert!(store.prepared.is_empty());
        }
        assert_eq!((rows_of(&even), rows_of(&odd)), (even_rows, odd_rows));
        // The transaction ends; sent again, the statement runs once everywhere.
        even.execute_share(&crate::end_operation(5, true, true), |_| true);
        let prepare = prepare_operation(9, &sql_operation(&delete_tens()));
        for store in [&mut even, &mut odd] {
            let vote = outcome(store.execute_share(&prepare, |_| true));
            assert_eq!(vote, Outcome::Batch(Vec::new()));
        }
        for store in [&mut even, &mut odd] {
            let deleted = outcome(store.execute_share(&decide_operation(9, true), |_| true));
            assert!(matches!(deleted, Outcome::Executed(Ok(_))), "{deleted:?}");
            assert_eq!(rows_of(store).len(), 1, "the row with n = 10 is gone");
        }
    }

    /// A hold of a write that cannot fail on the data is shared: writes outside transactions
    /// and other shared prepares go on; a fallible prepare and a transaction's lock wait.
    #[test]
    fn a_shared_hold_lets_writes_through_and_keeps_transactions_and_fallible_prepares_out() {
        let (mut even, _) = partitions();
        let shared = prepare_operation(20, &sql_operation(&delete_tens()));
        assert_eq!(
            outcome(even.execute_share(&shared, |_| true)),
            Outcome::Batch(Vec::new())
        );
        let write = sql_operation(&Command::Execute(insert(&[(30, 10)])));
        assert!(matches!(
            outcome(even.execute_share(&write, |_| true)),
            Outcome::Executed(Ok(_))
        ));
        let another = prepare_operation(21, &sql_operation(&delete_tens()));
        assert_eq!(
            outcome(even.execute_share(&another, |_| true)),
            Outcome::Batch(Vec::new())
        );
        assert_eq!(even.prepared.len(), 2);
        let fallible = prepare_operation(22, &sql_operation(&divide()));
        assert!(matches!(
            outcome(even.execute_share(&fallible, |_| true)),
            Outcome::Error(EngineError::Busy { statement: 20, .. })
        ));
        let request = crate::transactions::LockRequest {
            transaction: 6,
            begin_ms: 1,
            now_ms: 1,
            locks: vec![(
                ("t".into(), None),
                crate::transactions::Mode::IntentExclusive,
            )],
            nowait: true,
        };
        assert!(matches!(
            outcome(even.execute_share(&crate::lock_operation(&request), |_| true)),
            Outcome::Error(EngineError::Busy { .. })
        ));
        // The commit deletes the rows with n = 10 as they are then, the insert's included.
        let deleted = outcome(even.execute_share(&decide_operation(20, true), |_| true));
        assert!(
            matches!(
                deleted,
                Outcome::Executed(Ok(engine::Output::Deleted { count: 2 }))
            ),
            "{deleted:?}"
        );
        even.execute_share(&decide_operation(21, true), |_| true);
        assert!(even.prepared.is_empty());
        // An exclusive hold refuses a shared prepare.
        let fallible = prepare_operation(23, &sql_operation(&divide()));
        even.execute_share(&fallible, |_| true);
        assert!(matches!(
            outcome(even.execute_share(&shared, |_| true)),
            Outcome::Error(EngineError::Busy { statement: 23, .. })
        ));
    }

    /// The commits of shared statements (Crescando's non-key UPDATEs, two-phase over several
    /// partitions) share one engine batch with the one-phase statements of their log entry, as
    /// one-phase non-key UPDATEs did: one scan cycle, not one per statement. The outcomes and
    /// the state are those of executing each in turn.
    #[test]
    fn shared_commits_share_a_scan_cycle_with_the_log_entrys_statements() {
        let (mut batched, _) = partitions();
        let mut one_by_one = batched.clone();
        let tens = |n: i64| {
            Command::Execute(Operation::Update {
                table: "t".into(),
                assignments: vec![engine::Assignment::new("n", Value::BigInt(n))],
                predicate: Some(engine::Predicate::Compare {
                    column: "n".into(),
                    op: engine::CompareOp::Equal,
                    value: Value::BigInt(10),
                }),
            })
        };
        for store in [&mut batched, &mut one_by_one] {
            for (id, n) in [(1, 10), (2, 11)] {
                let prepare = prepare_operation(id, &sql_operation(&tens(n)));
                assert_eq!(
                    outcome(store.execute_share(&prepare, |_| true)),
                    Outcome::Batch(Vec::new())
                );
            }
        }
        let entry = [
            decide_operation(1, true),
            sql_operation(&Command::Execute(insert(&[(8, 10)]))),
            prepare_operation(3, &sql_operation(&tens(13))),
            sql_operation(&tens(12)),
            decide_operation(2, true),
            decide_operation(3, true),
            decide_operation(2, true),
        ];
        let operations: Vec<&[u8]> = entry.iter().map(Vec::as_slice).collect();
        let before = batched.cycles;
        let results = batched.execute_shares(&operations, |_| true);
        let expected: Vec<Vec<u8>> = entry
            .iter()
            .map(|operation| one_by_one.execute_share(operation, |_| true))
            .collect();
        assert_eq!(results, expected);
        assert_eq!(rows_of(&batched), rows_of(&one_by_one));
        assert!(batched.prepared.is_empty());
        // The three commits, the insert and the update in one batch, the prepare of 3 voting
        // in place; the second decision of 2 finds nothing to decide and is answered alone.
        assert_eq!(
            (
                batched.cycles.batches - before.batches,
                batched.cycles.statements - before.statements
            ),
            (1, 5),
            "{:?}",
            batched.cycles
        );
        assert_eq!(outcome(results[2].clone()), Outcome::Batch(Vec::new()));
        assert!(matches!(
            outcome(results[6].clone()),
            Outcome::Error(EngineError::Busy { statement: 2, .. })
        ));
    }

    /// Seeds 797 and 835 of `sim --ecast --partitions vr --sql-statements`: writers contending
    /// for one table in two phases. When a refused prepare held the table until its own abort,
    /// the next writer's prepare, ordered between the holder's decision and that abort, was
    /// refused in turn and held the table in turn, and so on for as long as writers came: no
    /// write to the table ever ran again. A refused prepare holds nothing, so the first prepare
    /// after the holder's decision finds the table free, whatever refused prepares are
    /// still to be aborted.
    #[test]
    fn a_prepare_after_the_holders_decision_runs_while_refused_prepares_await_their_aborts() {
        let (mut even, mut odd) = partitions();
        let prepare = |statement: u64, id: i64| {
            prepare_operation(
                statement,
                &sql_operation(&Command::Execute(insert(&[(id, 1)]))),
            )
        };
        for store in [&mut even, &mut odd] {
            // The global order at every partition: P1, P2, D1 (commit), P3, D2 (abort), P4,
            // D3 (commit), D4 (abort).
            let first = outcome(store.execute_share(&prepare(1, 100), |_| true));
            assert!(matches!(first, Outcome::Executed(Ok(_))), "{first:?}");
            assert!(matches!(
                outcome(store.execute_share(&prepare(2, 102), |_| true)),
                Outcome::Error(EngineError::Busy { statement: 1, .. })
            ));
            assert_eq!(store.prepared.len(), 1, "the refused prepare holds nothing");
            let committed = outcome(store.execute_share(&decide_operation(1, true), |_| true));
            assert!(
                matches!(committed, Outcome::Executed(Ok(_))),
                "{committed:?}"
            );
            assert!(store.prepared.is_empty());
            // Statement 2 is not aborted yet, and the table is free: statement 3 votes yes.
            let third = outcome(store.execute_share(&prepare(3, 104), |_| true));
            assert!(matches!(third, Outcome::Executed(Ok(_))), "{third:?}");
            assert!(matches!(
                outcome(store.execute_share(&decide_operation(2, false), |_| true)),
                Outcome::Error(EngineError::Busy { statement: 2, .. })
            ));
            // Statement 3 holds the table against statement 4 until its own decision.
            assert!(matches!(
                outcome(store.execute_share(&prepare(4, 106), |_| true)),
                Outcome::Error(EngineError::Busy { statement: 3, .. })
            ));
            let committed = outcome(store.execute_share(&decide_operation(3, true), |_| true));
            assert!(
                matches!(committed, Outcome::Executed(Ok(_))),
                "{committed:?}"
            );
            store.execute_share(&decide_operation(4, false), |_| true);
            assert!(store.prepared.is_empty());
            let ids: Vec<i64> = rows_of(store)
                .iter()
                .filter_map(|row| match row[0] {
                    Value::BigInt(id) if id >= 100 => Some(id),
                    _ => None,
                })
                .collect();
            assert_eq!(
                ids,
                vec![100, 104],
                "the committed statements ran, the refused not"
            );
        }
    }
}
