//! The shared scan against the reference executor: for thousands of seeded random batches of
//! mixed selects, updates, deletes, inserts (and a little DDL), `execute_batch` must return
//! exactly the results of `execute_sequentially` and leave exactly the same tables and indexes.
//! The canaries (deliberately broken shared scans) must be caught.

use crate::engine::{Canary, Engine};
use crate::error::EngineError;
use crate::operation::{
    Aggregate, AggregateFunction, Assignment, OnConflict, Operation, OperationResult,
};
use crate::predicate::{CompareOp, Predicate};
use crate::schema::{ColumnDef, TableSchema};
use crate::value::{DataType, Value};

/// xorshift64*: a tiny seeded PRNG, so the crate needs no `rand`.
/// `key_range` sets how many distinct primary key values the generator draws from (small:
/// many conflicts; large: larger tables).
struct Prng {
    state: u64,
    key_range: u64,
    /// Longest batch drawn.
    batch_max: u64,
}

impl Prng {
    fn new(seed: u64) -> Prng {
        Prng::with_key_range(seed, 12)
    }

    fn with_key_range(seed: u64, key_range: u64) -> Prng {
        Prng {
            state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            key_range,
            batch_max: 40,
        }
    }

    fn next(&mut self) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

const TEXTS: [&str; 6] = ["a", "ab", "b", "ba", "abc", "bb"];
const PATTERNS: [&str; 7] = ["a%", "%b", "_b", "%", "a_", "ab%", "%a%"];

fn tables() -> Vec<TableSchema> {
    vec![
        TableSchema::new(
            "t",
            vec![
                ColumnDef::new("id", DataType::Int),
                ColumnDef::new("a", DataType::Int),
                ColumnDef::new("b", DataType::BigInt).not_null(),
                ColumnDef::new(
                    "s",
                    DataType::Text {
                        length_max: Some(3),
                    },
                ),
                ColumnDef::new("d", DataType::Double),
            ],
            &["id"],
        )
        .expect("valid"),
        TableSchema::new(
            "u",
            vec![
                ColumnDef::new("k1", DataType::Int),
                ColumnDef::new("k2", DataType::Text { length_max: None }),
                ColumnDef::new("v", DataType::Int),
            ],
            &["k1", "k2"],
        )
        .expect("valid"),
    ]
}

fn value_for(prng: &mut Prng, column: &str) -> Value {
    if prng.chance(8) {
        return Value::Null;
    }
    match column {
        "id" | "k1" => Value::Int(prng.below(prng.key_range) as i32),
        "a" | "v" => Value::Int(prng.below(6) as i32),
        "b" => Value::BigInt(prng.below(6) as i64),
        "d" => Value::Double(prng.below(4) as f64 - 1.5),
        _ => Value::Text(prng.pick(&TEXTS).to_string()),
    }
}

fn leaf(prng: &mut Prng, columns: &[&str]) -> Predicate {
    let column = *prng.pick(columns);
    let text_column = matches!(column, "s" | "k2");
    match prng.below(10) {
        0..=3 => {
            let op = *prng.pick(&[
                CompareOp::Equal,
                CompareOp::Equal,
                CompareOp::NotEqual,
                CompareOp::Less,
                CompareOp::LessOrEqual,
                CompareOp::Greater,
                CompareOp::GreaterOrEqual,
            ]);
            Predicate::compare(column, op, value_for(prng, column))
        }
        4 => Predicate::In {
            column: column.to_string(),
            values: (0..prng.below(4))
                .map(|_| value_for(prng, column))
                .collect(),
        },
        5 => Predicate::Between {
            column: column.to_string(),
            low: value_for(prng, column),
            high: value_for(prng, column),
        },
        6 if text_column => Predicate::Like {
            column: column.to_string(),
            pattern: prng.pick(&PATTERNS).to_string(),
        },
        6 | 7 => Predicate::IsNull {
            column: column.to_string(),
            negated: prng.chance(50),
        },
        _ => Predicate::equal(column, value_for(prng, column)),
    }
}

fn predicate(prng: &mut Prng, columns: &[&str], depth: u32) -> Predicate {
    if depth == 0 || prng.chance(45) {
        return leaf(prng, columns);
    }
    match prng.below(5) {
        0 | 1 => Predicate::And(
            (0..1 + prng.below(3))
                .map(|_| predicate(prng, columns, depth - 1))
                .collect(),
        ),
        2 | 3 => Predicate::Or(
            (0..1 + prng.below(3))
                .map(|_| predicate(prng, columns, depth - 1))
                .collect(),
        ),
        _ => Predicate::Not(Box::new(predicate(prng, columns, depth - 1))),
    }
}

fn columns_of(table: &str) -> &'static [&'static str] {
    match table {
        "t" => &["id", "a", "b", "s", "d"],
        _ => &["k1", "k2", "v"],
    }
}

fn random_row(prng: &mut Prng, table: &str) -> Vec<Value> {
    columns_of(table)
        .iter()
        .map(|column| value_for(prng, column))
        .collect()
}

fn assignments(prng: &mut Prng, table: &str) -> Vec<Assignment> {
    let columns = columns_of(table);
    let count = 1 + prng.below(2);
    let mut chosen: Vec<Assignment> = Vec::new();
    for _ in 0..count {
        // Mostly non-key columns; key columns and NULL into NOT NULL exercise the errors.
        let column = if prng.chance(95) {
            *prng.pick(&columns[if table == "t" { 1 } else { 2 }..])
        } else {
            *prng.pick(columns)
        };
        if chosen.iter().all(|assignment| assignment.column != column) {
            chosen.push(Assignment::new(column, value_for(prng, column)));
        }
    }
    chosen
}

fn operation(prng: &mut Prng) -> Operation {
    let table = if prng.chance(80) { "t" } else { "u" };
    let columns = columns_of(table);
    let maybe_predicate = |prng: &mut Prng| {
        if prng.chance(90) {
            Some(predicate(prng, columns, 3))
        } else {
            None
        }
    };
    match prng.below(100) {
        0..=39 => Operation::Select {
            table: table.into(),
            columns: if prng.chance(50) {
                Vec::new()
            } else {
                vec![
                    prng.pick(columns).to_string(),
                    prng.pick(columns).to_string(),
                ]
            },
            predicate: maybe_predicate(prng),
            limit: if prng.chance(20) {
                Some(prng.below(4))
            } else {
                None
            },
        },
        40..=64 => Operation::Update {
            table: table.into(),
            assignments: assignments(prng, table),
            predicate: maybe_predicate(prng),
        },
        65..=79 => Operation::Delete {
            table: table.into(),
            predicate: maybe_predicate(prng),
        },
        80..=87 => Operation::Aggregate {
            table: table.into(),
            group_by: (0..prng.below(3))
                .map(|_| prng.pick(columns).to_string())
                .collect(),
            aggregates: (0..1 + prng.below(3))
                .map(|_| aggregate(prng, columns))
                .collect(),
            predicate: maybe_predicate(prng),
        },
        88..=97 => Operation::Insert {
            table: table.into(),
            columns: Vec::new(),
            rows: (0..1 + prng.below(3))
                .map(|_| random_row(prng, table))
                .collect(),
            on_conflict: match prng.below(3) {
                0 => OnConflict::Error,
                1 => OnConflict::DoNothing,
                _ => OnConflict::DoUpdate(assignments(prng, table)),
            },
        },
        _ => Operation::Select {
            table: "missing".into(),
            columns: Vec::new(),
            predicate: None,
            limit: None,
        },
    }
}

fn aggregate(prng: &mut Prng, columns: &[&str]) -> Aggregate {
    let function = *prng.pick(&[
        AggregateFunction::CountRows,
        AggregateFunction::Count,
        AggregateFunction::Sum,
        AggregateFunction::Min,
        AggregateFunction::Max,
        AggregateFunction::Avg,
    ]);
    let column = match function {
        AggregateFunction::CountRows => None,
        // Mostly numeric columns; text columns exercise the 42804 refusal of SUM and AVG.
        _ if prng.chance(80) => Some(prng.pick(&["a", "b", "d", "id", "k1", "v"]).to_string()),
        _ => Some(prng.pick(columns).to_string()),
    };
    Aggregate { function, column }
}

/// A random read of `table`: a predicate with `predicate_percent` chance, then an aggregate
/// (25 %) or a SELECT, with a LIMIT below `limit_below` 20 % of the time.
fn random_read(
    prng: &mut Prng,
    table: &str,
    columns: &[&str],
    predicate_percent: u64,
    limit_below: u64,
) -> Operation {
    let predicate = prng
        .chance(predicate_percent)
        .then(|| predicate(prng, columns, 2));
    if prng.chance(25) {
        Operation::Aggregate {
            table: table.into(),
            group_by: Vec::new(),
            aggregates: vec![aggregate(prng, columns)],
            predicate,
        }
    } else {
        Operation::Select {
            table: table.into(),
            columns: Vec::new(),
            predicate,
            limit: prng.chance(20).then(|| prng.below(limit_below)),
        }
    }
}

/// A fresh engine with both tables, some rows, and (depending on the seed) secondary indexes,
/// so that some operations take index paths and split the batch into several cycles.
fn populated_engine(prng: &mut Prng) -> Engine {
    let mut engine = Engine::new();
    // One seed in three gives u a CHECK (v <> 5), which a sixth of its writes fail; decided
    // from the state without drawing, so every seed draws the operations it drew before.
    let checked = (prng.state >> 7).is_multiple_of(3);
    for mut schema in tables() {
        if checked && schema.name == "u" {
            use crate::expression::{Expression, Operator};
            schema.checks.push(crate::schema::CheckConstraint {
                name: "u_v_check".into(),
                expression: Expression::Binary(
                    Operator::Compare(CompareOp::NotEqual),
                    Box::new(Expression::Column("v".into())),
                    Box::new(Expression::Constant(Value::Int(5))),
                ),
            });
        }
        engine
            .execute(&Operation::CreateTable { schema })
            .expect("creates");
    }
    for (name, table, column) in [("t_b", "t", "b"), ("t_s", "t", "s"), ("u_v", "u", "v")] {
        if prng.chance(40) {
            let index = Operation::CreateIndex {
                name: name.into(),
                table: table.into(),
                column: column.into(),
            };
            engine.execute(&index).expect("indexes");
        }
    }
    // Indexes on several columns (entries keyed on all of them), leading with an indexed
    // column, a key column and a non-key one.
    for (name, table, columns) in [
        ("t_ab", "t", &["a", "b"][..]),
        ("t_bsa", "t", &["b", "s", "a"][..]),
        ("u_vk2", "u", &["v", "k2"][..]),
        ("u_k1v", "u", &["k1", "v"][..]),
    ] {
        if prng.chance(40) {
            let index = Operation::CreateIndexOn {
                name: name.into(),
                table: table.into(),
                columns: columns.iter().map(|column| column.to_string()).collect(),
            };
            engine.execute(&index).expect("indexes");
        }
    }
    for table in ["t", "u"] {
        let rows = (0..prng.below(16))
            .map(|_| random_row(prng, table))
            .collect();
        let insert = Operation::Insert {
            table: table.into(),
            columns: Vec::new(),
            rows,
            on_conflict: OnConflict::DoNothing,
        };
        let _ = engine.execute(&insert);
    }
    engine
}

/// Runs one seed; returns a description of the first difference, if any.
fn check_seed(seed: u64, canary: Canary) -> Result<(), String> {
    check_seed_with(Prng::new(seed), seed, canary)
}

fn check_seed_with(mut prng: Prng, seed: u64, canary: Canary) -> Result<(), String> {
    let mut shared = populated_engine(&mut prng);
    shared.canary = canary;
    let mut reference = shared.clone();
    reference.canary = Canary::None;
    let batch: Vec<Operation> = (0..1 + prng.below(prng.batch_max))
        .map(|_| operation(&mut prng))
        .collect();
    let shared_results = shared.execute_batch(&batch);
    let reference_results = reference.execute_sequentially(&batch);
    assert_eq!(shared_results.len(), batch.len());
    for (at, (got, expected)) in shared_results.iter().zip(&reference_results).enumerate() {
        if got != expected {
            return Err(format!(
                "seed {seed}: operation {at} {:?}\n shared scan: {got:?}\n reference:   {expected:?}",
                batch[at]
            ));
        }
    }
    shared.check_invariants()?;
    reference.check_invariants()?;
    if shared != reference {
        return Err(format!("seed {seed}: the final tables differ"));
    }
    Ok(())
}

fn successes(results: &[OperationResult]) -> usize {
    results.iter().filter(|result| result.is_ok()).count()
}

#[test]
fn shared_scan_equals_sequential_execution_over_random_batches() {
    for seed in 0..4_000 {
        if let Err(difference) = check_seed(seed, Canary::None) {
            panic!("{difference}");
        }
    }
}

#[test]
fn shared_scan_equals_sequential_execution_over_larger_tables() {
    for seed in 0..500 {
        let prng = Prng::with_key_range(seed, 150);
        if let Err(difference) = check_seed_with(prng, seed, Canary::None) {
            panic!("{difference}");
        }
    }
}

#[test]
fn shared_scan_equals_sequential_execution_for_long_batches() {
    // Long batches build query indexes with many constants and interval endpoints per column.
    for seed in 0..100 {
        let mut prng = Prng::with_key_range(seed, 200);
        prng.batch_max = 600;
        if let Err(difference) = check_seed_with(prng, seed, Canary::None) {
            panic!("{difference}");
        }
    }
}

#[test]
fn random_batches_exercise_successes_errors_and_multi_operation_cycles() {
    // Guards the generator: a property test over batches that all fail, or that never share a
    // cycle, would prove nothing.
    let (mut ok, mut failed, mut scan_pairs, mut riding_inserts) = (0, 0, 0, 0);
    for seed in 0..300 {
        let mut prng = Prng::new(seed);
        let mut engine = populated_engine(&mut prng);
        let batch: Vec<Operation> = (0..1 + prng.below(40))
            .map(|_| operation(&mut prng))
            .collect();
        let plans: Vec<String> = batch
            .iter()
            .map(|operation| engine.explain(operation).unwrap_or_default())
            .collect();
        let results = engine.execute_batch(&batch);
        ok += successes(&results);
        failed += results.len() - successes(&results);
        for pair in plans.windows(2) {
            let scans = pair
                .iter()
                .filter(|plan| plan.starts_with("Shared Scan"))
                .count();
            if scans == 2 {
                scan_pairs += 1;
            }
            if scans == 1
                && pair
                    .iter()
                    .any(|plan| plan.ends_with("joins a shared scan cycle)"))
            {
                riding_inserts += 1;
            }
        }
    }
    assert!(ok > 2_000, "{ok} successes");
    assert!(failed > 100, "{failed} failures");
    assert!(
        scan_pairs > 1_000,
        "{scan_pairs} adjacent shared-scan pairs"
    );
    assert!(
        riding_inserts > 200,
        "{riding_inserts} inserts next to a shared scan operation"
    );
}

fn canary_is_caught(canary: Canary) -> bool {
    (0..4_000).any(|seed| check_seed(seed, canary).is_err())
}

#[test]
fn canary_that_skips_the_residual_list_is_caught() {
    assert!(canary_is_caught(Canary::SkipResidual));
}

#[test]
fn canary_that_does_not_reprobe_after_an_update_is_caught() {
    assert!(canary_is_caught(Canary::SkipReprobe));
}

#[test]
fn canary_that_applies_riding_inserts_out_of_batch_order_is_caught() {
    assert!(canary_is_caught(Canary::InsertsFirst));
}

#[test]
fn a_replica_restored_from_a_snapshot_continues_exactly_like_the_original() {
    use vr::StateMachine;
    for seed in 0..300 {
        let mut prng = Prng::with_key_range(seed, 30);
        let mut original = populated_engine(&mut prng);
        let first: Vec<Operation> = (0..20).map(|_| operation(&mut prng)).collect();
        original.execute_batch(&first);
        let mut restored = Engine::new();
        restored.restore(&original.snapshot()).expect("restores");
        assert_eq!(restored, original, "seed {seed}");
        let second: Vec<Operation> = (0..20).map(|_| operation(&mut prng)).collect();
        let command = crate::state_machine::Command::Batch(second).encode();
        assert_eq!(
            original.apply(&command),
            restored.apply(&command),
            "seed {seed}"
        );
        assert_eq!(original.snapshot(), restored.snapshot(), "seed {seed}");
    }
}

#[test]
fn read_path_with_index_access_equals_a_naive_scan() {
    let mut index_paths = 0;
    for seed in 0..1_000 {
        let mut prng = Prng::with_key_range(seed, 40);
        let engine = populated_engine(&mut prng);
        for round in 0..10 {
            let table = if round % 3 == 0 { "u" } else { "t" };
            let select = Operation::Select {
                table: table.into(),
                columns: Vec::new(),
                predicate: Some(predicate(&mut prng, columns_of(table), 2)),
                limit: None,
            };
            let read = engine.read(&select);
            let expected = engine
                .clone()
                .execute_sequentially(std::slice::from_ref(&select));
            assert_eq!(vec![read], expected, "seed {seed}: {select:?}");
            if engine
                .explain(&select)
                .is_ok_and(|text| text.starts_with("Index"))
            {
                index_paths += 1;
            }
        }
    }
    assert!(
        index_paths > 1_000,
        "{index_paths} selects took an index path"
    );
}

#[test]
fn read_batches_equal_reading_each_operation_alone() {
    let mut shared_cycles = 0;
    for seed in 0..1_000 {
        let mut prng = Prng::with_key_range(seed, 40);
        let engine = populated_engine(&mut prng);
        // Reads of both tables, some with limits, some aggregates, and a write or an unknown
        // table now and then (refused per operation, the rest still answered).
        let batch: Vec<Operation> = (0..1 + prng.below(12))
            .map(|_| {
                let table = *prng.pick(&["t", "u", "t", "missing"]);
                if prng.chance(8) {
                    return operation(&mut prng);
                }
                let columns = if table == "missing" {
                    columns_of("t")
                } else {
                    columns_of(table)
                };
                random_read(&mut prng, table, columns, 80, 4)
            })
            .collect();
        let together = engine.read_batch(&batch);
        let alone: Vec<OperationResult> = batch
            .iter()
            .map(|operation| {
                if operation.is_read() {
                    engine.read(operation)
                } else {
                    Err(EngineError::ReadOnly)
                }
            })
            .collect();
        assert_eq!(together, alone, "seed {seed}: {batch:?}");
        if batch.iter().filter(|operation| operation.is_read()).count() > 1 {
            shared_cycles += 1;
        }
    }
    assert!(
        shared_cycles > 500,
        "{shared_cycles} batches shared a cycle"
    );
}

/// `dry_run` answers what `execute_batch` answers, and changes nothing: random batches (inserts
/// of every conflict kind, updates, deletes, selects, aggregates, a missing table) over random
/// tables, with and without indexes.
#[test]
fn a_dry_run_answers_what_the_batch_answers_and_changes_nothing() {
    for seed in 0..1_500 {
        let mut prng = Prng::new(seed);
        let engine = populated_engine(&mut prng);
        let batch: Vec<Operation> = (0..1 + prng.below(6))
            .map(|_| operation(&mut prng))
            .collect();
        let mut executed = engine.clone();
        let before = engine.clone();
        assert_eq!(
            engine.dry_run(&batch),
            executed.execute_batch(&batch),
            "seed {seed}: {batch:?}"
        );
        assert_eq!(
            engine, before,
            "seed {seed}: the dry run changed the engine"
        );
    }
}

/// A batch of one plain insert (a COPY chunk's share) takes `dry_run`'s short path, which
/// answers from the insert's binding and plan without a scratch engine: its answers are the
/// batch's for rows that succeed, meet stored keys, repeat a key inside the statement, break
/// NOT NULL or a CHECK, and it changes nothing; a yes vote's binding, written at the commit
/// (`execute_bound`), writes what executing the insert writes.
#[test]
fn a_dry_run_of_one_plain_insert_answers_what_the_insert_answers() {
    let mut answers: std::collections::BTreeMap<String, usize> = Default::default();
    for seed in 0..2_000 {
        let mut prng = Prng::new(seed);
        let engine = populated_engine(&mut prng);
        let table = if prng.chance(2) { "t" } else { "u" };
        let insert = Operation::Insert {
            table: table.into(),
            columns: Vec::new(),
            rows: (0..1 + prng.below(8))
                .map(|_| random_row(&mut prng, table))
                .collect(),
            on_conflict: OnConflict::Error,
        };
        let batch = [insert];
        let mut executed = engine.clone();
        let before = engine.clone();
        let answer = engine.dry_run(&batch);
        assert_eq!(
            answer,
            executed.execute_batch(&batch),
            "seed {seed}: {batch:?}"
        );
        assert_eq!(
            engine, before,
            "seed {seed}: the dry run changed the engine"
        );
        // The commit of a successful vote writes the vote's binding: the same answer and
        // the same table as executing the statement.
        let (vote, bound) = engine.dry_run_bound(&batch[0]);
        assert_eq!(vote, answer[0], "seed {seed}");
        assert_eq!(
            bound.is_some(),
            vote.is_ok(),
            "seed {seed}: a binding iff the vote is yes"
        );
        if let Some(bound) = bound {
            let mut committed = engine.clone();
            assert_eq!(
                committed.execute_bound(&batch[0], &bound),
                Some(answer[0].clone()),
                "seed {seed}"
            );
            assert_eq!(
                committed, executed,
                "seed {seed}: the commit wrote what execute writes"
            );
        }
        let kind = match &answer[0] {
            Ok(output) => format!("{output:?}"),
            Err(error) => format!("{error:?}")
                .chars()
                .take_while(|c| c.is_alphanumeric())
                .collect(),
        };
        *answers.entry(kind).or_default() += 1;
    }
    for kind in ["UniqueViolation", "NotNullViolation", "CheckViolation"] {
        assert!(
            answers.get(kind).is_some_and(|n| *n >= 20),
            "{kind}: {answers:?}"
        );
    }
    assert!(
        answers
            .keys()
            .filter(|kind| kind.starts_with("Inserted"))
            .count()
            >= 3,
        "{answers:?}"
    );
}

/// `Engine::snapshot_copy` (copy-on-write tables, `docs/internals/scans.md`): a copy taken
/// before a random batch still holds exactly the state of that point after the batch ran on
/// the original (its serialised bytes and its read answers), and keeps its invariants.
#[test]
fn a_snapshot_copy_keeps_the_state_at_its_point_over_random_batches() {
    let mut changed = 0;
    for seed in 0..1_000 {
        let mut prng = Prng::with_key_range(seed, 40);
        let mut engine = populated_engine(&mut prng);
        let before = vr::StateMachine::snapshot(&engine);
        let copy = engine.snapshot_copy();
        assert!(
            copy.shares_table(&engine, "t") && copy.shares_table(&engine, "u"),
            "seed {seed}: a copy shares every table"
        );
        let reads: Vec<Operation> = ["t", "u"]
            .iter()
            .map(|table| Operation::Select {
                table: (*table).into(),
                columns: Vec::new(),
                predicate: None,
                limit: None,
            })
            .collect();
        let answers_before = engine.read_batch(&reads);
        let batch: Vec<Operation> = (0..1 + prng.below(prng.batch_max))
            .map(|_| operation(&mut prng))
            .collect();
        engine.execute_batch(&batch);
        let after = vr::StateMachine::snapshot(&engine);
        // The canary's side of the check: a copy that saw the batch's writes (the original
        // read now) is caught on every seed where the answers moved.
        if after != before && engine.read_batch(&reads) != answers_before {
            changed += 1;
        }
        assert_eq!(
            vr::StateMachine::snapshot(&copy),
            before,
            "seed {seed}: the copy still holds the state of its point"
        );
        assert_eq!(
            copy.read_batch(&reads),
            answers_before,
            "seed {seed}: the copy answers as the state of its point"
        );
        copy.check_invariants()
            .unwrap_or_else(|error| panic!("seed {seed}: {error}"));
        engine
            .check_invariants()
            .unwrap_or_else(|error| panic!("seed {seed}: {error}"));
    }
    // Guards the check: batches that never write would prove nothing.
    assert!(
        changed > 300,
        "only {changed} of 1,000 batches changed what the reads answer"
    );
}

/// A deliberately broken index path, for the canaries of
/// `index_paths_find_what_a_naive_scan_finds`.
#[derive(Clone, Copy, PartialEq)]
enum PathCanary {
    None,
    /// Forgets the last of several prefixes (an IN-list value lost).
    LoseLastPrefix,
    /// Puts a prefix's values in the reverse of the index's column order.
    ReversePrefix,
}

/// A conjunction of 1-4 leaves, mostly equalities and IN lists, so that index prefixes of
/// several columns (and a range after them) are pinned often.
fn conjunction(prng: &mut Prng, columns: &[&str]) -> Predicate {
    let leaves = (0..1 + prng.below(4))
        .map(|_| {
            let column = *prng.pick(columns);
            match prng.below(10) {
                0..=4 => Predicate::equal(column, value_for(prng, column)),
                5 | 6 => Predicate::In {
                    column: column.to_string(),
                    values: (0..1 + prng.below(3))
                        .map(|_| value_for(prng, column))
                        .collect(),
                },
                _ => leaf(prng, columns),
            }
        })
        .collect();
    Predicate::And(leaves)
}

/// Checks the access path of random conjunctions over random tables and indexes: the rows it
/// yields that satisfy the predicate are exactly those a whole scan finds (as the engine's
/// reads, before-images and `matching_rows` use it). Returns the first difference, and counts
/// the paths that used more than one index column.
fn check_index_paths(seed: u64, canary: PathCanary, multi: &mut usize) -> Result<(), String> {
    use crate::planner::{candidate_keys, choose_access_path, AccessPath};
    let mut prng = Prng::with_key_range(seed, 40);
    let engine = populated_engine(&mut prng);
    for round in 0..12 {
        let name = if round % 3 == 0 { "u" } else { "t" };
        let table = engine.table(name).expect("populated");
        let predicate = conjunction(&mut prng, columns_of(name));
        let bound = crate::predicate::bind(&predicate, &table.schema)
            .map_err(|error| format!("seed {seed}: {predicate:?} does not bind: {error}"))?;
        let scanned: Vec<_> = table
            .rows
            .iter()
            .filter(|(_, row)| bound.matches(row))
            .map(|(key, _)| key.clone())
            .collect();
        let mut path = choose_access_path(table, Some(&bound));
        if let AccessPath::Index {
            index,
            pinned,
            prefixes,
            ..
        } = &mut path
        {
            *multi += usize::from(*pinned >= 2);
            assert!(
                prefixes.iter().all(|prefix| prefix.len() == *pinned),
                "seed {seed}: prefixes of one length"
            );
            assert!(*pinned <= table.indexes[index.as_str()].columns.len());
            match canary {
                PathCanary::None => {}
                PathCanary::LoseLastPrefix if prefixes.len() > 1 => {
                    prefixes.pop();
                }
                PathCanary::LoseLastPrefix => {}
                PathCanary::ReversePrefix => {
                    prefixes.iter_mut().for_each(|prefix| prefix.reverse())
                }
            }
        }
        let Some(candidates) = candidate_keys(table, &path) else {
            continue;
        };
        let found: Vec<_> = candidates
            .into_iter()
            .filter(|key| table.rows.get(key).is_some_and(|row| bound.matches(row)))
            .collect();
        if found != scanned {
            return Err(format!(
                "seed {seed}: {predicate:?} through {path:?}\n found   {found:?}\n scanned {scanned:?}"
            ));
        }
        if canary == PathCanary::None {
            let matched: Vec<_> = engine
                .matching_rows(name, Some(&predicate))
                .map(|(key, _)| key.clone())
                .collect();
            assert_eq!(
                matched, scanned,
                "seed {seed}: matching_rows of {predicate:?}"
            );
            let select = Operation::Select {
                table: name.into(),
                columns: Vec::new(),
                predicate: Some(predicate),
                limit: None,
            };
            let read = engine.read(&select);
            let expected = engine
                .clone()
                .execute_sequentially(std::slice::from_ref(&select));
            assert_eq!(vec![read], expected, "seed {seed}: {select:?}");
        }
    }
    Ok(())
}

/// Secondary index paths on one or several columns (equalities on a prefix, IN lists, a range
/// on the next column, NULLs, absent values) find exactly a whole scan's matches.
#[test]
fn index_paths_find_what_a_naive_scan_finds() {
    let mut multi = 0;
    for seed in 0..2_000 {
        if let Err(difference) = check_index_paths(seed, PathCanary::None, &mut multi) {
            panic!("{difference}");
        }
    }
    assert!(multi > 1_000, "{multi} paths used several index columns");
}

fn path_canary_is_caught(canary: PathCanary) -> bool {
    (0..2_000).any(|seed| check_index_paths(seed, canary, &mut 0).is_err())
}

#[test]
fn canary_that_loses_an_in_list_prefix_is_caught() {
    assert!(path_canary_is_caught(PathCanary::LoseLastPrefix));
}

#[test]
fn canary_that_reverses_an_index_prefix_is_caught() {
    assert!(path_canary_is_caught(PathCanary::ReversePrefix));
}

/// The shared read cycle streams the column image (`crate::rows`); the reference executor
/// reads the row map. Over tables of several column chunks, changed by random write batches
/// (chunks split, merge, and are copied while a snapshot holds them), every read batch
/// answers as the reference, and the snapshot keeps answering as at its point.
#[test]
fn reads_over_the_column_image_equal_the_row_map_reference_on_larger_tables() {
    let mut multi_chunk = 0;
    for seed in 0..40 {
        let mut prng = Prng::with_key_range(seed, 4_000);
        let mut engine = populated_engine(&mut prng);
        for table in ["t", "u"] {
            // One row per statement: a row the schema refuses fails only its own.
            for _ in 0..2_000 + prng.below(2_000) {
                let insert = Operation::Insert {
                    table: table.into(),
                    columns: Vec::new(),
                    rows: vec![random_row(&mut prng, table)],
                    on_conflict: OnConflict::DoNothing,
                };
                let _ = engine.execute(&insert);
            }
        }
        let mut snapshot: Option<(Engine, Vec<Operation>, Vec<OperationResult>)> = None;
        for round in 0..4 {
            let reads: Vec<Operation> = (0..1 + prng.below(20))
                .map(|_| {
                    let table = *prng.pick(&["t", "u"]);
                    let columns = columns_of(table);
                    random_read(&mut prng, table, columns, 85, 40)
                })
                .collect();
            let imaged = engine.read_batch(&reads);
            let reference = engine.clone().execute_sequentially(&reads);
            assert_eq!(imaged, reference, "seed {seed} round {round}: {reads:?}");
            engine.check_invariants().unwrap();
            if engine
                .table("t")
                .is_some_and(|table| table.rows.chunks().count() > 1)
            {
                multi_chunk += 1;
            }
            if round == 1 {
                snapshot = Some((engine.snapshot_copy(), reads.clone(), imaged));
            }
            let writes: Vec<Operation> = (0..1 + prng.below(30))
                .map(|_| operation(&mut prng))
                .collect();
            let _ = engine.execute_batch(&writes);
        }
        let (copy, reads, then) = snapshot.expect("taken");
        assert_eq!(copy.read_batch(&reads), then, "seed {seed}: the snapshot");
        copy.check_invariants().unwrap();
    }
    // 83 of 160 when written (deletes with broad predicates empty many tables).
    assert!(
        multi_chunk > 60,
        "{multi_chunk} rounds over tables of several chunks"
    );
}
