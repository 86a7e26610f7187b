//! End-to-end tests: SQL text through parse, plan, K engines and the gateway merge.

use crate::plan::{Plan, Routing};
use crate::{
    parse, plan_statement, prepare, split_insert, with_row_ids, Catalog, MemoryCatalog, Placement,
    Session, SqlError, StatementResult, TableEntry, TableOptions,
};
use engine::{DataType, Engine, Operation, OperationResult, Value};

/// A gateway over K partitions, each an engine, with the directory as a `MemoryCatalog`.
pub(crate) struct Cluster {
    engines: Vec<Engine>,
    pub(crate) catalog: MemoryCatalog,
    session: Session,
    /// The gateway's next hidden row id (`with_row_ids`).
    row_id_next: i64,
    /// Statements stamped so far by `run_sequenced`: each gets its own entropy, as the
    /// gateway's random source gives.
    stamps_given: u128,
    /// Whether a join with a probed relation runs as a semi-join in two steps (as the gateway
    /// runs it inside a block; nothing runs between the steps here), else in one batch.
    pub(crate) semi_joins: bool,
    /// How many semi-joins ran (with a probe step or without one).
    pub(crate) semi_joins_run: usize,
}

fn partition_of(value: &Value, partitions: usize) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in value.to_string().bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    (hash % partitions as u64) as usize
}

impl Cluster {
    pub(crate) fn new(partitions: usize) -> Cluster {
        Cluster {
            engines: vec![Engine::new(); partitions],
            catalog: MemoryCatalog::new(),
            session: Session::new(),
            row_id_next: 1_000,
            stamps_given: 0,
            semi_joins: true,
            semi_joins_run: 0,
        }
    }

    /// Runs every statement of a query string; the last statement's result.
    pub(crate) fn run(&mut self, sql: &str) -> Result<StatementResult, SqlError> {
        let mut last = StatementResult::Command {
            tag: "EMPTY".into(),
        };
        for statement in parse(sql)? {
            let plan = plan_statement(&statement, &self.catalog)?;
            last = self.execute(plan)?;
        }
        Ok(last)
    }

    /// `run` as the gateway runs statements that use sequences: plan, draw the values each
    /// request asks for (`sequence::advance`, one batch at the sequence's partition), plan
    /// again with them, keep currval/lastval in the session.
    pub(crate) fn run_sequenced(&mut self, sql: &str) -> Result<StatementResult, SqlError> {
        let mut last = StatementResult::Command {
            tag: "EMPTY".into(),
        };
        for statement in parse(sql)? {
            self.stamps_given += 1;
            let stamp = crate::StatementStamp {
                now_us: 0,
                entropy: self
                    .stamps_given
                    .wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835),
            };
            let (mut plan, used) = crate::plan_statement_sequenced(
                &statement,
                &self.catalog,
                stamp,
                self.session.sequences(),
            )?;
            if !used.is_final() {
                let mut drawn = Vec::new();
                for request in &used.requests {
                    let advance = crate::sequence::advance(&self.catalog, request)?;
                    let result = self.execute(Plan::Execute(advance))?;
                    drawn.push((request.clone(), crate::sequence::drawn_values(&result)));
                }
                let (again, used) = crate::plan_statement_sequenced(
                    &statement,
                    &self.catalog,
                    stamp,
                    used.supplied(&drawn),
                )?;
                assert!(
                    used.requests.is_empty(),
                    "the final plan asks for nothing more"
                );
                self.session.set_sequences(&used);
                plan = again;
            } else {
                self.session.set_sequences(&used);
            }
            last = self.execute(plan)?;
        }
        Ok(last)
    }

    pub(crate) fn execute(&mut self, plan: Plan) -> Result<StatementResult, SqlError> {
        match plan {
            Plan::Empty => Ok(StatementResult::Command {
                tag: "EMPTY".into(),
            }),
            Plan::Session(command) => self.session.apply(&command),
            Plan::Explain(explain) => {
                let partitions = self.targets(&explain.routing);
                let texts = partitions
                    .iter()
                    .map(|partition| {
                        explain
                            .operations
                            .iter()
                            .map(|operation| self.engines[*partition].explain(operation))
                            .collect::<Result<Vec<_>, _>>()
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(explain.finish(&texts))
            }
            Plan::CopyIn(_) => panic!("use copy()"),
            Plan::InsertSelect(insert) => {
                let StatementResult::Rows { rows, .. } =
                    self.execute(Plan::Execute(insert.select.clone()))?
                else {
                    panic!("a SELECT answered no rows")
                };
                self.execute(Plan::Execute(insert.execution(rows)?))
            }
            // One engine set executes the two steps back to back: nothing runs between them.
            Plan::WriteFrom(write) => {
                let StatementResult::Rows { rows, .. } =
                    self.execute(Plan::Execute(write.select.clone()))?
                else {
                    panic!("a SELECT answered no rows")
                };
                self.execute(Plan::Execute(write.execution(rows)?))
            }
            Plan::Execute(execution) if self.semi_joins && execution.semi_join().is_some() => {
                let semi_join = execution.semi_join().expect("checked");
                let first = self.read(&semi_join.first());
                let probe = match semi_join.probe(&first)? {
                    Some(probe) => self.read(&probe),
                    None => Vec::new(),
                };
                self.semi_joins_run += 1;
                semi_join.finish(first, probe)
            }
            Plan::Execute(mut execution) => {
                if execution.routing == Routing::NewRowIds {
                    let next = &mut self.row_id_next;
                    execution.routing = with_row_ids(&mut execution.operations, || {
                        *next += 1;
                        *next
                    });
                }
                let count = self.engines.len();
                // ALTER TABLE and writes that depend on the rows go in two phases on a cluster
                // (`store::prepared::fallible`): every partition votes with a dry run first.
                if execution.operations.iter().any(|operation| {
                    matches!(
                        operation,
                        Operation::AlterTable { .. }
                            | Operation::UpdateComputed { .. }
                            | Operation::Insert {
                                on_conflict: engine::OnConflict::Error
                                    | engine::OnConflict::DoUpdateComputed { .. },
                                ..
                            }
                    )
                }) {
                    let votes: Vec<Vec<OperationResult>> = self
                        .targets(&execution.routing)
                        .into_iter()
                        .map(|partition| self.engines[partition].dry_run(&execution.operations))
                        .collect();
                    if votes.iter().flatten().any(Result::is_err) {
                        return execution.finish(votes);
                    }
                }
                let mut results: Vec<Vec<OperationResult>> = Vec::new();
                for partition in self.targets(&execution.routing) {
                    let operations: Vec<Operation> = match &execution.routing {
                        Routing::RowsByKey { position } => execution
                            .operations
                            .iter()
                            .filter_map(|operation| {
                                split_insert(operation, *position, count, |value| {
                                    partition_of(value, count)
                                })
                                .swap_remove(partition)
                            })
                            .collect(),
                        _ => execution.operations.clone(),
                    };
                    if operations.is_empty() {
                        continue;
                    }
                    results.push(self.engines[partition].execute_batch(&operations));
                }
                let answer = execution.finish(results)?;
                for operation in &execution.operations {
                    match operation {
                        // Relations created beside the statement's table (a SERIAL column's
                        // sequence): as every partition's engine now holds them.
                        Operation::CreateTable { schema }
                            if !self.catalog.tables.contains_key(&schema.name) =>
                        {
                            if let Some(entry) = Catalog::table(&self.engines[0], &schema.name) {
                                self.catalog.insert(entry);
                            }
                        }
                        Operation::DropTable { name, .. } => {
                            self.catalog.tables.remove(name);
                        }
                        Operation::AlterTable { table, changes } => {
                            self.catalog.tables.remove(table);
                            let name = changes
                                .iter()
                                .find_map(|change| match change {
                                    engine::TableChange::RenameTable { to } => Some(to.clone()),
                                    _ => None,
                                })
                                .unwrap_or(table.clone());
                            if let Some(entry) = Catalog::table(&self.engines[0], &name) {
                                self.catalog.insert(entry);
                            }
                        }
                        Operation::DropIndex { name, table } => {
                            if let Some(entry) = self.catalog.tables.get_mut(table) {
                                entry.indexes.retain(|(index, _)| index != name);
                            }
                        }
                        Operation::CreateIndex {
                            name,
                            table,
                            column,
                        } => {
                            if let Some(entry) = self.catalog.tables.get_mut(table) {
                                entry.indexes.push((name.clone(), vec![column.clone()]));
                            }
                        }
                        Operation::CreateIndexOn {
                            name,
                            table,
                            columns,
                        } => {
                            if let Some(entry) = self.catalog.tables.get_mut(table) {
                                entry.indexes.push((name.clone(), columns.clone()));
                            }
                        }
                        _ => {}
                    }
                }
                if let Some(entry) = execution.created_table.clone() {
                    self.catalog.insert(entry);
                }
                for engine in &self.engines {
                    engine.check_invariants().expect("engine invariants");
                }
                Ok(answer)
            }
        }
    }

    /// A read's results from the partitions its routing reaches.
    pub(crate) fn read(&mut self, execution: &crate::Execution) -> Vec<Vec<OperationResult>> {
        assert!(execution.operations.iter().all(Operation::is_read));
        self.targets(&execution.routing)
            .into_iter()
            .map(|partition| self.engines[partition].execute_batch(&execution.operations))
            .collect()
    }

    fn targets(&self, routing: &Routing) -> Vec<usize> {
        let count = self.engines.len();
        match routing {
            Routing::Keys { values, .. } => {
                let mut partitions: Vec<usize> = values
                    .iter()
                    .map(|value| partition_of(value, count))
                    .collect();
                partitions.sort_unstable();
                partitions.dedup();
                partitions
            }
            Routing::None => Vec::new(),
            // The test cluster places by hash: a key range may live anywhere.
            _ => (0..count).collect(),
        }
    }

    pub(crate) fn copy(&mut self, sql: &str, data: &str) -> Result<StatementResult, SqlError> {
        let statement = parse(sql)?.pop().expect("one statement");
        let Plan::CopyIn(copy) = plan_statement(&statement, &self.catalog)? else {
            panic!("not a COPY")
        };
        let execution = copy.execution(data.as_bytes())?;
        self.execute(Plan::Execute(execution))
    }

    fn rows(&mut self, sql: &str) -> Vec<Vec<Value>> {
        match self.run(sql) {
            Ok(StatementResult::Rows { rows, .. }) => rows,
            other => panic!("{sql}: {other:?}"),
        }
    }

    pub(crate) fn tag(&mut self, sql: &str) -> String {
        match self.run(sql) {
            Ok(StatementResult::Command { tag }) | Ok(StatementResult::Rows { tag, .. }) => tag,
            Err(error) => panic!("{sql}: {error}"),
        }
    }

    fn error(&mut self, sql: &str) -> SqlError {
        match self.run(sql) {
            Err(error) => error,
            Ok(result) => panic!("{sql} should fail, answered {result:?}"),
        }
    }
}

fn int(value: i32) -> Value {
    Value::Int(value)
}

fn text(value: &str) -> Value {
    Value::Text(value.to_string())
}

fn big(value: i64) -> Value {
    Value::BigInt(value)
}

fn people(partitions: usize) -> Cluster {
    let mut cluster = Cluster::new(partitions);
    cluster.tag("CREATE TABLE people (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL, age INT, city TEXT, score DOUBLE PRECISION)");
    cluster.tag(
        "INSERT INTO people VALUES (1, 'ada', 36, 'london', 1.5), (2, 'bob', 25, 'paris', NULL), \
         (3, 'cy', NULL, 'london', 3.0), (4, 'dee', 41, NULL, 2.5), (5, 'eve', 25, 'paris', 0.5)",
    );
    cluster
}

#[test]
fn create_insert_and_select_round_trip() {
    let mut cluster = people(1);
    assert_eq!(
        cluster.rows("SELECT name FROM people WHERE id = 2"),
        vec![vec![text("bob")]]
    );
    assert_eq!(
        cluster.rows("SELECT id FROM people WHERE age > 30 ORDER BY id"),
        vec![vec![int(1)], vec![int(4)]]
    );
    assert_eq!(cluster.tag("SELECT * FROM people"), "SELECT 5");
}

#[test]
fn where_supports_and_or_not_in_between_like_and_is_null() {
    let mut cluster = people(3);
    let ids = |cluster: &mut Cluster, condition: &str| -> Vec<i32> {
        cluster
            .rows(&format!(
                "SELECT id FROM people WHERE {condition} ORDER BY id"
            ))
            .into_iter()
            .map(|row| match row[0] {
                Value::Int(id) => id,
                _ => panic!(),
            })
            .collect()
    };
    assert_eq!(ids(&mut cluster, "age = 25 AND city = 'paris'"), vec![2, 5]);
    assert_eq!(ids(&mut cluster, "age = 36 OR city IS NULL"), vec![1, 4]);
    // NOT of unknown is unknown: the NULL city does not qualify.
    assert_eq!(ids(&mut cluster, "NOT (city = 'london')"), vec![2, 5]);
    assert_eq!(ids(&mut cluster, "id IN (1, 3, 9)"), vec![1, 3]);
    assert_eq!(ids(&mut cluster, "id NOT IN (1, 3)"), vec![2, 4, 5]);
    assert_eq!(ids(&mut cluster, "age BETWEEN 25 AND 36"), vec![1, 2, 5]);
    assert_eq!(ids(&mut cluster, "name LIKE '_e%'"), vec![4]);
    assert_eq!(ids(&mut cluster, "name NOT LIKE '%e%'"), vec![1, 2, 3]);
    assert_eq!(ids(&mut cluster, "age IS NULL"), vec![3]);
    assert_eq!(
        ids(&mut cluster, "age IS NOT NULL AND score IS NULL"),
        vec![2]
    );
    assert_eq!(ids(&mut cluster, "30 < age"), vec![1, 4]);
    // Residuals: column-to-column, arithmetic, a number that is not an INT, ILIKE.
    assert_eq!(ids(&mut cluster, "age > id * 10"), vec![1, 2, 4]);
    assert_eq!(ids(&mut cluster, "age + 1 = 26"), vec![2, 5]);
    assert_eq!(ids(&mut cluster, "age < 25.5"), vec![2, 5]);
    assert_eq!(ids(&mut cluster, "name ILIKE 'A%' OR id = 5"), vec![1, 5]);
    assert_eq!(
        ids(&mut cluster, "city = 'paris' AND score > age / 100"),
        vec![5]
    );
}

#[test]
fn projection_evaluates_expressions_case_casts_and_concatenation() {
    let mut cluster = people(2);
    let rows = cluster.rows(
        "SELECT id * 2 AS double_id, name || '@' || city, CASE WHEN age >= 30 THEN 'old' ELSE 'young' END, \
         CAST(score AS INT), upper(name), age::text FROM people WHERE id = 1",
    );
    assert_eq!(
        rows,
        vec![vec![
            int(2),
            text("ada@london"),
            text("old"),
            int(2),
            text("ADA"),
            text("36")
        ]]
    );
    assert_eq!(
        cluster.rows("SELECT 1 + 2, 'a' || 'b', 7 / 2, 7.0 / 2"),
        // 7.0 is NUMERIC, as in PostgreSQL, which answers 3.5000000000000000.
        vec![vec![
            int(3),
            text("ab"),
            int(3),
            Value::Numeric(engine::numeric::parse("3.5000000000000000").unwrap())
        ]]
    );
}

#[test]
fn order_by_sorts_by_several_keys_with_nulls_first_or_last() {
    let mut cluster = people(3);
    let ids = |rows: Vec<Vec<Value>>| {
        rows.into_iter()
            .map(|row| row[0].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(cluster.rows("SELECT id FROM people ORDER BY age, id DESC")),
        vec![int(5), int(2), int(1), int(4), int(3)]
    );
    assert_eq!(
        ids(cluster.rows("SELECT id FROM people ORDER BY age DESC")),
        vec![int(3), int(4), int(1), int(2), int(5)]
    );
    assert_eq!(
        ids(cluster.rows("SELECT id FROM people ORDER BY age DESC NULLS LAST")),
        vec![int(4), int(1), int(2), int(5), int(3)]
    );
    assert_eq!(
        ids(cluster.rows("SELECT id, city FROM people ORDER BY 2 NULLS FIRST, 1")),
        vec![int(4), int(1), int(3), int(2), int(5)]
    );
    assert_eq!(
        ids(cluster.rows("SELECT id, -age AS neg FROM people WHERE age IS NOT NULL ORDER BY neg")),
        vec![int(4), int(1), int(2), int(5)]
    );
    assert_eq!(
        ids(cluster.rows("SELECT id FROM people ORDER BY id LIMIT 2 OFFSET 1")),
        vec![int(2), int(3)]
    );
    assert_eq!(
        ids(cluster.rows("SELECT id FROM people LIMIT 2")),
        vec![int(1), int(2)]
    );
}

#[test]
fn aggregates_group_by_and_having_merge_across_partitions() {
    let mut cluster = people(4);
    assert_eq!(
        cluster.rows(
            "SELECT count(*), count(age), sum(age), min(name), max(score), avg(age) FROM people"
        ),
        vec![vec![
            big(5),
            big(4),
            big(127),
            text("ada"),
            Value::Double(3.0),
            Value::Double(31.75)
        ]]
    );
    assert_eq!(
        cluster.rows(
            "SELECT city, count(*) AS n, sum(age) FROM people GROUP BY city ORDER BY n DESC, city"
        ),
        vec![
            vec![text("london"), big(2), big(36)],
            vec![text("paris"), big(2), big(50)],
            vec![Value::Null, big(1), big(41)],
        ]
    );
    assert_eq!(
        cluster.rows("SELECT city FROM people GROUP BY city HAVING count(*) > 1 AND min(age) < 30"),
        vec![vec![text("paris")]]
    );
    // Aggregates over expressions, or with a residual WHERE, fold rows at the gateway.
    assert_eq!(
        cluster.rows("SELECT sum(age * 2), max(length(name)) FROM people WHERE age > id"),
        vec![vec![big(254), int(3)]]
    );
    assert_eq!(
        cluster.rows("SELECT count(*), sum(age) FROM people WHERE id > 100"),
        vec![vec![big(0), Value::Null]]
    );
    assert_eq!(
        cluster.rows("SELECT count(*) FROM people WHERE id > 100 AND age > id"),
        vec![vec![big(0)]]
    );
    assert_eq!(cluster.rows("SELECT age, count(*) * 10 FROM people WHERE age IS NOT NULL GROUP BY age ORDER BY 1 LIMIT 1"), vec![vec![int(25), big(20)]]);
    assert_eq!(
        cluster.error("SELECT name, count(*) FROM people").code,
        "42803"
    );
    assert_eq!(
        cluster
            .error("SELECT count(*) FROM people WHERE count(*) > 1")
            .code,
        "42803"
    );
}

#[test]
fn update_and_delete_report_counts_and_refuse_residual_predicates() {
    let mut cluster = people(3);
    assert_eq!(
        cluster.tag("UPDATE people SET city = 'rome', score = 9 WHERE age = 25"),
        "UPDATE 2"
    );
    assert_eq!(
        cluster.rows("SELECT id, score FROM people WHERE city = 'rome' ORDER BY id"),
        vec![
            vec![int(2), Value::Double(9.0)],
            vec![int(5), Value::Double(9.0)]
        ]
    );
    assert_eq!(
        cluster.tag("DELETE FROM people WHERE id IN (1, 2) OR age IS NULL"),
        "DELETE 3"
    );
    assert_eq!(cluster.tag("SELECT * FROM people"), "SELECT 2");
    let error = cluster.error("DELETE FROM people WHERE age > id");
    assert_eq!(error.code, "0A000");
    assert!(error.message.contains("WHERE"), "{error}");
    assert_eq!(
        cluster.error("UPDATE people SET id = 7 WHERE id = 4").code,
        "0A000"
    );
    assert_eq!(cluster.error("UPDATE people SET nope = 1").code, "42703");
    assert_eq!(
        cluster.error("DELETE FROM people WHERE nope = 1").code,
        "42703"
    );
    assert_eq!(cluster.tag("DELETE FROM people"), "DELETE 2");
}

/// TPC-C's increments (`SET w_ytd = w_ytd + 12.34`, `s_quantity = s_quantity - $1`) plan as
/// the column plus a literal, the shape `store::transactions::blind_increments` locks with
/// increment locks: no cast or other node around the sum, the literal maybe cast.
#[test]
fn increments_plan_as_the_column_plus_a_literal() {
    let mut cluster = Cluster::new(1);
    cluster.tag("CREATE TABLE acct (id INT PRIMARY KEY, n NUMERIC(12, 2), i BIGINT, s INT)");
    let shape = |plan: &Plan| -> Vec<String> {
        let Plan::Execute(execution) = plan else {
            panic!("{plan:?}")
        };
        let Operation::UpdateComputed { assignments, .. } = &execution.operations[0] else {
            panic!("{:?}", execution.operations)
        };
        assignments
            .iter()
            .map(|assignment| {
                let literal = |expression: &engine::Expression| {
                    let mut expression = expression;
                    while let engine::Expression::Cast(operand, _)
                    | engine::Expression::Negate(operand) = expression
                    {
                        expression = operand;
                    }
                    matches!(expression, engine::Expression::Constant(value) if !value.is_null())
                };
                match &assignment.expression {
                    engine::Expression::Binary(operator, left, right)
                        if matches!(left.as_ref(), engine::Expression::Column(name) if *name == assignment.column)
                            && literal(right) =>
                    {
                        format!("{} {operator:?}", assignment.column)
                    }
                    other => format!("{} other {other:?}", assignment.column),
                }
            })
            .collect()
    };
    let statement = parse("UPDATE acct SET n = n + 12.34, i = i - 3, s = s + 1 WHERE id = 1")
        .unwrap()
        .pop()
        .unwrap();
    let plan = plan_statement(&statement, &cluster.catalog).unwrap();
    assert_eq!(shape(&plan), vec!["n Add", "i Subtract", "s Add"]);
    let prepared = prepare(
        "UPDATE acct SET n = n + $1, s = s - $2 WHERE id = $3",
        &cluster.catalog,
        &[],
    )
    .unwrap();
    let plan = prepared
        .bind(
            &cluster.catalog,
            &[
                Some(Value::Numeric("5.5".parse().unwrap())),
                Some(int(2)),
                Some(int(1)),
            ],
        )
        .unwrap();
    assert_eq!(shape(&plan), vec!["n Add", "s Subtract"]);
}

#[test]
fn update_set_expressions_over_columns_use_the_old_row_and_are_atomic() {
    // One partition: a data-dependent error (22012 on one row) is atomic within a partition;
    // across partitions it is not yet (each partition decides alone; see docs/internals/sql.md).
    let mut cluster = people(1);
    let all = "SELECT id, name, age, city, score FROM people ORDER BY id";
    assert_eq!(
        cluster.tag("UPDATE people SET age = age + 10 WHERE city = 'london'"),
        "UPDATE 2"
    );
    assert_eq!(
        cluster.rows("SELECT id, age FROM people WHERE city = 'london' ORDER BY id"),
        vec![vec![int(1), int(46)], vec![int(3), Value::Null]]
    );
    assert_eq!(
        cluster.tag("UPDATE people SET city = CASE WHEN age > 40 THEN 'old' ELSE upper(city) END"),
        "UPDATE 5"
    );
    assert_eq!(
        cluster.rows("SELECT city FROM people ORDER BY id"),
        ["old", "PARIS", "LONDON", "old", "PARIS"]
            .iter()
            .map(|city| vec![text(city)])
            .collect::<Vec<_>>()
    );
    // Every SET reads the row as it was before the statement: a swap.
    assert_eq!(
        cluster.tag("UPDATE people SET name = city, city = name WHERE id = 2"),
        "UPDATE 1"
    );
    assert_eq!(
        cluster.rows("SELECT name, city FROM people WHERE id = 2"),
        vec![vec![text("PARIS"), text("bob")]]
    );
    assert_eq!(
        cluster.tag("UPDATE people SET score = coalesce(score, 0) * 2, age = -age"),
        "UPDATE 5"
    );
    assert_eq!(
        cluster.rows("SELECT score, age FROM people ORDER BY id"),
        vec![
            vec![Value::Double(3.0), int(-46)],
            vec![Value::Double(0.0), int(-25)],
            vec![Value::Double(6.0), Value::Null],
            vec![Value::Double(5.0), int(-41)],
            vec![Value::Double(1.0), int(-25)],
        ]
    );
    // An integer column takes a double expression rounded, a text column any type's text.
    assert_eq!(
        cluster.tag("UPDATE people SET age = score * 1.25, city = score WHERE id = 4"),
        "UPDATE 1"
    );
    assert_eq!(
        cluster.rows("SELECT age, city FROM people WHERE id = 4"),
        vec![vec![int(6), text("5")]]
    );
    let before = cluster.rows(all);
    // Refused at planning, as PostgreSQL does, whether or not a row qualifies.
    for (sql, code) in [
        ("UPDATE people SET age = city + 1", "42883"),
        ("UPDATE people SET age = city + 1 WHERE id = 99", "42883"),
        ("UPDATE people SET age = -city", "42883"),
        ("UPDATE people SET age = name", "42804"),
        ("UPDATE people SET age = nope + 1", "42703"),
        ("UPDATE people SET id = id + 1", "0A000"),
        ("UPDATE people SET age = age + 1, age = 2", "42601"),
        ("UPDATE people SET city = name LIKE 'a%'", "0A000"),
    ] {
        assert_eq!(cluster.error(sql).code, code, "{sql}");
        assert_eq!(cluster.rows(all), before, "{sql}");
    }
    // Failing on a later row changes none of the earlier ones: 22012 on id 2 and 5 (age
    // -25), after id 1 was computed; 22003 and 23502 likewise.
    for (sql, code) in [
        ("UPDATE people SET age = 100 / (age + 25)", "22012"),
        ("UPDATE people SET age = age * 100000000", "22003"),
        (
            "UPDATE people SET name = CASE WHEN id = 5 THEN NULL ELSE name || '!' END",
            "23502",
        ),
        (
            "UPDATE people SET name = name || name || name || name || name",
            "22001",
        ),
    ] {
        assert_eq!(cluster.error(sql).code, code, "{sql}");
        assert_eq!(cluster.rows(all), before, "{sql}");
    }
    // Prepared, with parameters inside the expression.
    let prepared = prepare(
        "UPDATE people SET age = age + $1 WHERE id = $2",
        &cluster.catalog,
        &[],
    )
    .unwrap();
    assert_eq!(prepared.parameter_types, vec![DataType::Int, DataType::Int]);
    let plan = prepared
        .bind(&cluster.catalog, &[Some(int(100)), Some(int(1))])
        .unwrap();
    assert!(matches!(
        &plan,
        Plan::Execute(execution)
            if matches!(execution.operations[0], Operation::UpdateComputed { .. })
    ));
    cluster.execute(plan).unwrap();
    assert_eq!(
        cluster.rows("SELECT age FROM people WHERE id = 1"),
        vec![vec![int(54)]]
    );
    // Constant SET clauses keep the plain update, which shares scans.
    let statement = parse("UPDATE people SET age = 1 + 1 WHERE id = 1")
        .unwrap()
        .pop()
        .unwrap();
    let plan = plan_statement(&statement, &cluster.catalog).unwrap();
    assert!(matches!(
        &plan,
        Plan::Execute(execution)
            if matches!(execution.operations[0], Operation::Update { .. })
    ));
    let explained = cluster.rows("EXPLAIN UPDATE people SET age = age + 1 WHERE id = 3");
    assert!(
        explained
            .iter()
            .any(|row| row[0].to_string().contains("computed SET")),
        "{explained:?}"
    );
}

#[test]
fn insert_on_conflict_does_nothing_or_updates_with_constants_and_excluded() {
    let mut cluster = people(3);
    assert_eq!(
        cluster
            .error("INSERT INTO people VALUES (1, 'dup', 1, 'x', 1)")
            .code,
        "23505"
    );
    assert_eq!(
        cluster.tag(
            "INSERT INTO people (id, name) VALUES (1, 'dup'), (6, 'fay') ON CONFLICT DO NOTHING"
        ),
        "INSERT 0 1"
    );
    assert_eq!(cluster.tag("INSERT INTO people (id, name) VALUES (1, 'x') ON CONFLICT (id) DO UPDATE SET city = 'oslo'"), "INSERT 0 1");
    assert_eq!(
        cluster.rows("SELECT name, city FROM people WHERE id = 1"),
        vec![vec![text("ada"), text("oslo")]]
    );
    assert_eq!(
        cluster.tag("INSERT INTO people (id, name, age) VALUES (2, 'bo', 26), (7, 'gus', 70) ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, age = excluded.age"),
        "INSERT 0 2"
    );
    assert_eq!(
        cluster.rows("SELECT id, name, age FROM people WHERE id IN (2, 7) ORDER BY id"),
        vec![
            vec![int(2), text("bo"), int(26)],
            vec![int(7), text("gus"), int(70)]
        ]
    );
    assert_eq!(cluster.error("INSERT INTO people (id, name) VALUES (8, 'a'), (8, 'b') ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name").code, "21000");
    assert_eq!(
        cluster
            .error("INSERT INTO people (id, name) VALUES (9, 'a') ON CONFLICT (name) DO NOTHING")
            .code,
        "42P10"
    );
    // RETURNING with ON CONFLICT: the inserted row (id 9 is new, its age NULL).
    assert_eq!(cluster.rows("INSERT INTO people (id, name) VALUES (9, 'a') ON CONFLICT (id) DO UPDATE SET age = people.age + 1 RETURNING id, age"), vec![vec![Value::Int(9), Value::Null]]);
    assert_eq!(
        cluster.error("INSERT INTO people (id) VALUES (10)").code,
        "23502"
    );
    assert_eq!(
        cluster
            .error("INSERT INTO people (id, name) VALUES (10, 'much too long for twenty')")
            .code,
        "22001"
    );
    assert_eq!(
        cluster
            .error("INSERT INTO people (id, name) VALUES (10)")
            .code,
        "42601"
    );
    assert_eq!(
        cluster
            .error("INSERT INTO people (id, name) VALUES ('x', 'a')")
            .code,
        "22P02"
    );
    assert_eq!(
        cluster
            .error("INSERT INTO people (id, name) SELECT id, name FROM people")
            .code,
        "23505"
    );
    assert_eq!(
        cluster.tag("INSERT INTO people (id, name, age) VALUES (11, 'k', 2.6)"),
        "INSERT 0 1"
    );
    assert_eq!(
        cluster.rows("SELECT age FROM people WHERE id = 11"),
        vec![vec![int(3)]]
    );
}

#[test]
fn a_table_is_placed_under_its_creation_name_or_the_table_it_is_colocated_with() {
    let mut cluster = Cluster::new(2);
    cluster.tag("CREATE TABLE w (w_id INT PRIMARY KEY, name TEXT)");
    assert_eq!(
        cluster.catalog.table("w").unwrap().options.placement_name,
        "w"
    );
    cluster.tag(
        "CREATE TABLE d (d_w_id BIGINT, d_id INT, PRIMARY KEY (d_w_id, d_id)) \
         WITH (partition_by = d_w_id, colocate_with = 'w')",
    );
    let d = cluster.catalog.table("d").unwrap();
    assert_eq!(d.options.placement_name, "w", "INT and BIGINT place alike");
    assert_eq!(d.options.colocate_with, None, "resolved, not stored");
    // A third table co-located with d lands with w too.
    cluster.tag(
        "CREATE TABLE c (c_w_id INT, c_id INT, PRIMARY KEY (c_w_id, c_id)) \
         WITH (partition_by = c_w_id, colocate_with = d)",
    );
    assert_eq!(
        cluster.catalog.table("c").unwrap().options.placement_name,
        "w"
    );
    // Renamed, a table keeps its placement name; a new table of the old name is placed alike.
    cluster.tag("ALTER TABLE w RENAME TO warehouse");
    assert_eq!(
        cluster
            .catalog
            .table("warehouse")
            .unwrap()
            .options
            .placement_name,
        "w"
    );
    let mismatched =
        cluster.error("CREATE TABLE x (x_id TEXT PRIMARY KEY) WITH (colocate_with = 'warehouse')");
    assert_eq!(mismatched.code, "42P16", "{mismatched}");
    assert!(mismatched.message.contains("text"), "{mismatched}");
    assert_eq!(
        cluster
            .error("CREATE TABLE x (x_id INT PRIMARY KEY) WITH (colocate_with = 'nowhere')")
            .code,
        "42P01"
    );
    assert_eq!(
        cluster
            .error("CREATE TABLE x (x_id INT PRIMARY KEY) WITH (colocate_with = '')")
            .code,
        "22023"
    );
    cluster.tag("CREATE TABLE item (i_id INT PRIMARY KEY) WITH (placement = everywhere)");
    assert_eq!(
        cluster.catalog.table("item").unwrap().options.placement,
        Placement::Everywhere
    );
    for refused in [
        "CREATE TABLE x (x_id INT PRIMARY KEY) WITH (colocate_with = item)",
        "CREATE TABLE x (x_id INT PRIMARY KEY) WITH (placement = everywhere, colocate_with = warehouse)",
    ] {
        assert_eq!(cluster.error(refused).code, "42P16", "{refused}");
    }
    // A schema stored before placement names were is placed under its (current) name.
    let mut old = cluster.catalog.table("c").unwrap().schema;
    old.options.retain(|(key, _)| key != "placement_name");
    assert_eq!(TableOptions::of(&old).placement_name, "c");
}

#[test]
fn create_table_parses_types_constraints_and_placement_options() {
    let mut cluster = Cluster::new(2);
    cluster.tag(
        "CREATE TABLE t (a BIGINT, b BOOLEAN NOT NULL, c REAL, d BYTEA, e DATE, f TIMEstamp, g VARCHAR(5), h INTEGER, \
         PRIMARY KEY (h, a)) WITH (partition_by = a, placement = hash)",
    );
    let entry = cluster.catalog.table("t").expect("created");
    assert_eq!(entry.schema.primary_key, vec![7, 0]);
    assert_eq!(entry.options.partition_key, "a");
    assert_eq!(entry.options.placement, Placement::Hash);
    // The options are stored with the schema: every partition's engine reports them.
    for engine in &cluster.engines {
        let stored = Catalog::table(engine, "t").expect("created everywhere");
        assert_eq!(stored.options, entry.options);
    }
    let types: Vec<DataType> = entry
        .schema
        .columns
        .iter()
        .map(|column| column.data_type)
        .collect();
    assert_eq!(
        types,
        vec![
            DataType::BigInt,
            DataType::Boolean,
            DataType::Real,
            DataType::Bytea,
            DataType::Date,
            DataType::Timestamp,
            DataType::Text {
                length_max: Some(5)
            },
            DataType::Int,
        ]
    );
    assert!(!entry.schema.columns[1].nullable);
    cluster.tag("INSERT INTO t (a, b, d, e, f, h) VALUES (1, true, '\\x0102', '2024-02-29', '2024-02-29 12:00:00', 1)");
    assert_eq!(
        cluster.rows("SELECT d, e FROM t WHERE e = DATE '2024-02-29' AND f > '2024-01-01'"),
        vec![vec![Value::Bytea(vec![1, 2]), Value::Date(19_782)]]
    );
    assert_eq!(
        cluster.error("CREATE TABLE t (a INT PRIMARY KEY)").code,
        "42P07"
    );
    assert_eq!(
        cluster.tag("CREATE TABLE IF NOT EXISTS t (a INT PRIMARY KEY)"),
        "CREATE TABLE"
    );
    assert_eq!(
        cluster
            .error("CREATE TABLE u (a INT PRIMARY KEY) WITH (colour = red)")
            .code,
        "42601"
    );
    assert_eq!(
        cluster
            .error("CREATE TABLE u (a INT PRIMARY KEY) WITH (placement = round_robin)")
            .code,
        "22023"
    );
    // Options that would have no effect are refused, naming them (0A000).
    for (option, named) in [
        ("replication_factor = 3", "replication_factor"),
        ("replication = skyros", "replication"),
    ] {
        let error = cluster.error(&format!(
            "CREATE TABLE u (a INT PRIMARY KEY) WITH ({option})"
        ));
        assert_eq!(error.code, "0A000", "{option}: {error}");
        assert!(error.message.contains(named), "{option}: {error}");
    }
    assert_eq!(
        cluster
            .error("CREATE TABLE u (a INT PRIMARY KEY) WITH (partition_key = a, partition_by = a)")
            .code,
        "42601",
        "one option under two names"
    );
    assert_eq!(
        cluster.tag("CREATE TABLE u1 (a INT, b INT, PRIMARY KEY (a, b)) WITH (partition_key = b)"),
        "CREATE TABLE"
    );
    assert_eq!(
        cluster.catalog.table("u1").unwrap().options.partition_key,
        "b"
    );
    assert_eq!(
        cluster
            .error("CREATE TABLE u (a INT PRIMARY KEY, b INT) WITH (partition_key = b)")
            .code,
        "42P16"
    );
    // Without a primary key: a hidden row id (`tables_without_a_primary_key_get_a_hidden_row_id`).
    assert_eq!(cluster.tag("CREATE TABLE u0 (a INT)"), "CREATE TABLE");
    assert_eq!(
        cluster
            .error("CREATE TABLE u (a INT PRIMARY KEY, b INT UNIQUE)")
            .code,
        "0A000"
    );
    assert_eq!(
        cluster
            .error("CREATE TABLE u (a INT PRIMARY KEY, b TIME)")
            .code,
        "0A000"
    );
    let defaults = TableEntry {
        ..cluster.catalog.table("t").unwrap()
    };
    assert_eq!(defaults.indexes.len(), 0);
}

#[test]
fn truncate_empties_every_partition_of_each_table_named() {
    let mut cluster = people(3);
    cluster.tag("CREATE TABLE other (id INT PRIMARY KEY)");
    cluster.tag("INSERT INTO other VALUES (1), (2), (3)");
    assert_eq!(
        cluster.tag("TRUNCATE TABLE people, ONLY other RESTART IDENTITY CASCADE"),
        "TRUNCATE TABLE"
    );
    assert_eq!(
        cluster.rows("SELECT count(*) FROM people, other"),
        vec![vec![big(0)]]
    );
    assert_eq!(cluster.error("TRUNCATE nope").code, "42P01");
    assert_eq!(cluster.tag("INSERT INTO other VALUES (4)"), "INSERT 0 1");
    assert_eq!(cluster.tag("TRUNCATE other"), "TRUNCATE TABLE");
    assert_eq!(
        cluster.rows("SELECT count(*) FROM other"),
        vec![vec![big(0)]]
    );
}

#[test]
fn insert_returning_answers_the_inserted_rows_once_every_partition_inserted() {
    let mut cluster = people(3);
    match cluster.run(
        "INSERT INTO people (id, name, age) VALUES (7, 'fay', 30), (8, 'gus', NULL) \
         RETURNING id, upper(name) AS shout, age + 1, city",
    ) {
        Ok(StatementResult::Rows { columns, rows, tag }) => {
            assert_eq!(tag, "INSERT 0 2");
            let names: Vec<&str> = columns.iter().map(|column| column.name.as_str()).collect();
            assert_eq!(names, ["id", "shout", "?column?", "city"]);
            assert_eq!(
                rows,
                vec![
                    vec![int(7), text("FAY"), int(31), Value::Null],
                    vec![int(8), text("GUS"), Value::Null, Value::Null],
                ]
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        cluster.rows("INSERT INTO people AS p VALUES (9, 'hal', 1, 'oslo', 0.5) RETURNING *"),
        vec![vec![
            int(9),
            text("hal"),
            int(1),
            text("oslo"),
            Value::Double(0.5)
        ]]
    );
    // A conflict fails the whole INSERT: nothing is returned and nothing inserted.
    assert_eq!(
        cluster
            .error("INSERT INTO people VALUES (10, 'ida', 1, NULL, NULL), (1, 'x', 1, NULL, NULL) RETURNING id")
            .code,
        "23505"
    );
    assert_eq!(
        cluster.rows("SELECT count(*) FROM people WHERE id = 10"),
        vec![vec![big(0)]]
    );
    assert_eq!(
        cluster.rows(
            "INSERT INTO people (id, name) VALUES (11, 'x') ON CONFLICT DO NOTHING RETURNING id"
        ),
        vec![vec![Value::Int(11)]]
    );
    assert!(cluster
        .rows("INSERT INTO people (id, name) VALUES (11, 'y') ON CONFLICT DO NOTHING RETURNING id")
        .is_empty());
    assert_eq!(
        cluster
            .error("INSERT INTO people (id, name) VALUES (12, 'x') RETURNING nope")
            .code,
        "42703"
    );
    cluster.tag("CREATE TABLE bag (v INT)");
    assert_eq!(
        cluster.error("INSERT INTO bag VALUES (1) RETURNING v").code,
        "0A000"
    );
    // Describe (extended protocol) knows the columns.
    let prepared = prepare(
        "INSERT INTO people (id, name) VALUES ($1, $2) RETURNING id, name",
        &cluster.catalog,
        &[],
    )
    .unwrap();
    assert_eq!(prepared.columns.len(), 2);
}

#[test]
fn create_index_and_drop_table() {
    let mut cluster = people(2);
    assert_eq!(
        cluster.tag("CREATE INDEX people_city ON people (city)"),
        "CREATE INDEX"
    );
    assert_eq!(
        cluster.rows("SELECT id FROM people WHERE city = 'paris' ORDER BY id"),
        vec![vec![int(2)], vec![int(5)]]
    );
    assert_eq!(
        cluster.error("CREATE UNIQUE INDEX u ON people (city)").code,
        "0A000"
    );
    // An index on several columns keys its entries on all of them: it serves predicates on a
    // prefix of them (the EXPLAIN names the index path), and the catalog shows its whole
    // definition.
    assert_eq!(
        cluster.tag("CREATE INDEX ON people (city, age)"),
        "CREATE INDEX"
    );
    assert_eq!(
        cluster.catalog.table("people").unwrap().indexes[1],
        (
            "people_city_age_idx".to_string(),
            vec!["city".to_string(), "age".to_string()]
        )
    );
    cluster.tag("UPDATE people SET city = 'rome' WHERE id = 5");
    assert_eq!(
        cluster.rows("SELECT id FROM people WHERE city = 'rome' AND age = 25"),
        vec![vec![int(5)]]
    );
    let definitions: Vec<Vec<Value>> = cluster.rows(
        "SELECT pg_get_indexdef(i.indexrelid), i.indnatts, i.indkey FROM pg_index i \
         JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = 'people_city_age_idx'",
    );
    assert_eq!(
        definitions,
        vec![vec![
            text("CREATE INDEX people_city_age_idx ON public.people USING btree (city, age)"),
            int(2),
            text("4 3"),
        ]]
    );
    assert_eq!(
        cluster.error("CREATE INDEX i2 ON people (city, nope)").code,
        "42703"
    );
    cluster.tag("CREATE TABLE pairs (id INT PRIMARY KEY, a INT, b INT)");
    cluster.tag("INSERT INTO pairs VALUES (1, 1, 1), (2, 1, 2), (3, 2, 1)");
    cluster.tag("CREATE INDEX pairs_ab ON pairs (a, b)");
    let explained: Vec<String> = cluster
        .rows("EXPLAIN SELECT id FROM pairs WHERE a = 1 AND b = 2")
        .into_iter()
        .map(|row| row[0].to_string())
        .collect();
    assert!(
        explained.iter().any(|line| line.contains(
            "Index Lookup on pairs using pairs_ab (a = 1 AND b = 2; 2 of 2 index columns)"
        )),
        "{explained:?}"
    );
    assert_eq!(
        cluster.rows("SELECT id FROM pairs WHERE a = 1 AND b = 2"),
        vec![vec![int(2)]]
    );
    assert_eq!(
        cluster.error("CREATE INDEX i3 ON people (nope)").code,
        "42703"
    );
    assert_eq!(cluster.tag("DROP TABLE people"), "DROP TABLE");
    assert_eq!(cluster.error("SELECT * FROM people").code, "42P01");
    assert_eq!(cluster.error("DROP TABLE people").code, "42P01");
    assert_eq!(cluster.tag("DROP TABLE IF EXISTS people"), "DROP TABLE");
}

#[test]
fn key_predicates_route_to_the_key_partitions_only() {
    let catalog = people(1).catalog;
    let plan_of = |sql: &str| match plan_statement(&parse(sql).unwrap()[0], &catalog).unwrap() {
        Plan::Execute(execution) => execution.routing,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        plan_of("SELECT * FROM people WHERE id = 3 AND age > 1"),
        Routing::Keys {
            column: "id".into(),
            values: vec![int(3)]
        }
    );
    assert_eq!(
        plan_of("DELETE FROM people WHERE id IN (1, 2)"),
        Routing::Keys {
            column: "id".into(),
            values: vec![int(1), int(2)]
        }
    );
    assert_eq!(
        plan_of("SELECT * FROM people WHERE id = 3 OR age > 1"),
        Routing::Every
    );
    assert_eq!(
        plan_of("INSERT INTO people (name, id) VALUES ('a', 1)"),
        Routing::RowsByKey { position: 1 }
    );
    assert_eq!(plan_of("SELECT 1"), Routing::None);
    // Hash placement cannot narrow a range; range placement can.
    assert_eq!(plan_of("SELECT * FROM people WHERE id > 3"), Routing::Every);
    let mut ranged = Cluster::new(1);
    ranged.tag("CREATE TABLE events (at BIGINT PRIMARY KEY, what TEXT) WITH (placement = range)");
    assert_eq!(
        ranged.catalog.table("events").unwrap().options.placement,
        Placement::Range
    );
    let routing = match plan_statement(
        &parse("DELETE FROM events WHERE at >= 10 AND at < 20 AND at BETWEEN 5 AND 15").unwrap()[0],
        &ranged.catalog,
    )
    .unwrap()
    {
        Plan::Execute(execution) => execution.routing,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        routing,
        Routing::KeyRange {
            column: "at".into(),
            low: std::ops::Bound::Included(big(10)),
            high: std::ops::Bound::Included(big(15))
        }
    );
}

/// `placement = range` with split points: stored and read back as values of the key's type;
/// bad split points are 22023, key types without an order-preserving position 0A000, and
/// co-location with a range table needs range placement and equal split points (42P16).
#[test]
fn range_placement_options_are_checked_and_stored() {
    let mut cluster = Cluster::new(2);
    cluster.tag(
        "CREATE TABLE r (k BIGINT PRIMARY KEY, v TEXT) \
         WITH (placement = 'range', partition_by = k, range_bounds = '0, 100000,200000')",
    );
    let entry = cluster.catalog.table("r").unwrap();
    assert_eq!(entry.options.placement, Placement::Range);
    assert_eq!(
        entry.options.range_bounds,
        vec![big(0), big(100_000), big(200_000)]
    );
    assert!(entry.options.range_map().is_some());
    // Every partition's engine reads the same options back from the stored schema.
    for engine in &cluster.engines {
        assert_eq!(Catalog::table(engine, "r").unwrap().options, entry.options);
    }
    cluster.tag(
        "CREATE TABLE days (d DATE PRIMARY KEY) WITH (placement = range, range_bounds = '2024-01-01,2025-01-01')",
    );
    assert_eq!(
        cluster
            .catalog
            .table("days")
            .unwrap()
            .options
            .range_bounds
            .len(),
        2
    );
    for (options, code) in [
        ("placement = range, range_bounds = '5'", "22023"),
        ("placement = range, range_bounds = '5,5'", "22023"),
        ("placement = range, range_bounds = '9,5'", "22023"),
        ("placement = range, range_bounds = '1,x'", "22023"),
        ("range_bounds = '1,2'", "22023"),
        ("placement = everywhere, range_bounds = '1,2'", "22023"),
    ] {
        let error = cluster.error(&format!(
            "CREATE TABLE u (a INT PRIMARY KEY) WITH ({options})"
        ));
        assert_eq!(error.code, code, "{options}: {error}");
        assert!(error.message.contains("range_bounds"), "{options}: {error}");
    }
    let refused = cluster.error("CREATE TABLE u (a NUMERIC PRIMARY KEY) WITH (placement = range)");
    assert_eq!(refused.code, "0A000", "{refused}");
    assert!(refused.message.contains("placement = range"), "{refused}");
    // Co-location: both by range, same split points (taken when omitted).
    cluster.tag("CREATE TABLE r2 (k INT PRIMARY KEY) WITH (placement = range, colocate_with = r)");
    let r2 = cluster.catalog.table("r2").unwrap();
    assert_eq!(r2.options.placement_name, "r");
    assert_eq!(r2.options.range_bounds, entry.options.range_bounds);
    for refused in [
        "CREATE TABLE x (k INT PRIMARY KEY) WITH (colocate_with = r)",
        "CREATE TABLE x (k INT PRIMARY KEY) WITH (placement = range, range_bounds = '0,5', colocate_with = r)",
        "CREATE TABLE x (k TEXT PRIMARY KEY) WITH (placement = range, colocate_with = r)",
    ] {
        assert_eq!(cluster.error(refused).code, "42P16", "{refused}");
    }
    // Renamed, the table keeps its placement and split points.
    cluster.tag("ALTER TABLE r RENAME TO r_renamed");
    let renamed = cluster.catalog.table("r_renamed").unwrap();
    assert_eq!(renamed.options.range_bounds, entry.options.range_bounds);
    assert_eq!(renamed.options.placement, Placement::Range);
}

/// LIMIT reaches the partitions when their key order is the query's: no ORDER BY, or ORDER BY
/// an integer primary key ascending (a queue's `ORDER BY id LIMIT 1 … SKIP LOCKED`); never
/// for another order, a descending one, or one over a residual filter. Results agree on
/// several partitions either way.
#[test]
fn limit_is_pushed_to_the_partitions_only_in_key_order() {
    let mut cluster = people(3);
    let limit_of = |cluster: &Cluster, sql: &str| match plan_statement(
        &parse(sql).unwrap()[0],
        &cluster.catalog,
    )
    .unwrap()
    {
        Plan::Execute(execution) => match &execution.operations[0] {
            Operation::Select { limit, .. } => *limit,
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    };
    for (sql, pushed, rows) in [
        (
            "SELECT id FROM people ORDER BY id LIMIT 2",
            Some(2),
            vec![1, 2],
        ),
        (
            "SELECT id FROM people WHERE age = 25 ORDER BY id LIMIT 1",
            Some(1),
            vec![2],
        ),
        (
            "SELECT id FROM people ORDER BY id LIMIT 2 OFFSET 1",
            Some(3),
            vec![2, 3],
        ),
        (
            "SELECT id FROM people ORDER BY id DESC LIMIT 2",
            None,
            vec![5, 4],
        ),
        (
            "SELECT id FROM people ORDER BY age, id LIMIT 2",
            None,
            vec![2, 5],
        ),
        (
            "SELECT id FROM people WHERE age > id ORDER BY id LIMIT 1",
            None,
            vec![1],
        ),
    ] {
        assert_eq!(limit_of(&cluster, sql), pushed, "{sql}");
        let got = cluster.rows(sql);
        let want: Vec<Vec<Value>> = rows.into_iter().map(|id| vec![int(id)]).collect();
        assert_eq!(got, want, "{sql}");
    }
}

#[test]
fn selects_fetch_only_the_columns_the_gateway_uses() {
    let catalog = people(1).catalog;
    let columns_of = |sql: &str| match plan_statement(&parse(sql).unwrap()[0], &catalog).unwrap() {
        Plan::Execute(execution) => match &execution.operations[0] {
            Operation::Select { columns, .. } => columns.clone(),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    };
    assert_eq!(
        columns_of("SELECT name FROM people WHERE age > id ORDER BY city"),
        vec!["id", "name", "age", "city"]
    );
    assert_eq!(
        columns_of("SELECT upper(city) FROM people"),
        vec!["id", "city"]
    );
    assert_eq!(
        columns_of("SELECT sum(score * 2) FROM people GROUP BY city"),
        vec!["id", "city", "score"]
    );
    assert_eq!(columns_of("SELECT * FROM people").len(), 5);
}

#[test]
fn explain_shows_gateway_steps_and_each_partitions_engine_plan() {
    let mut cluster = people(2);
    let rows = cluster
        .rows("EXPLAIN SELECT city, count(*) FROM people WHERE id = 1 GROUP BY city ORDER BY 2");
    let lines: Vec<String> = rows
        .into_iter()
        .map(|row| match &row[0] {
            Value::Text(line) => line.clone(),
            _ => panic!(),
        })
        .collect();
    assert!(
        lines.iter().any(|line| line.contains("aggregate partials")),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|line| line.starts_with("  Partition")),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|line| line.contains("sort by 1 keys")),
        "{lines:?}"
    );
    assert_eq!(cluster.error("EXPLAIN ANALYZE SELECT 1").code, "0A000");
}

#[test]
fn session_statements_set_show_reset_and_transactions_are_accepted() {
    let mut cluster = Cluster::new(1);
    assert_eq!(
        cluster.rows("SHOW server_version"),
        vec![vec![text("15.0")]]
    );
    assert_eq!(cluster.rows("SHOW TimeZone"), vec![vec![text("UTC")]]);
    // The session time zone is always UTC (TIMESTAMPTZ prints in it): other zones are
    // refused rather than accepted without effect.
    assert_eq!(cluster.error("SET TIME ZONE 'Europe/Paris'").code, "0A000");
    assert_eq!(cluster.tag("SET TIME ZONE 'UTC'"), "SET");
    assert_eq!(cluster.rows("SHOW timezone"), vec![vec![text("UTC")]]);
    assert_eq!(cluster.tag("SET DateStyle = 'ISO, DMY'"), "SET");
    assert_eq!(cluster.tag("SET extra_float_digits = 3"), "SET");
    assert_eq!(cluster.tag("SET application_name TO 'psql'"), "SET");
    assert_eq!(cluster.tag("SET client_encoding TO 'UTF8'"), "SET");
    assert_eq!(
        cluster.error("SET client_encoding TO 'LATIN1'").code,
        "22023"
    );
    // Every level is accepted; SHOW answers the level served, which is the level asked:
    // `basic` (served to autocommit SELECTs pinned to one partition key, others get a NOTICE
    // per statement) and `snapshot` (every autocommit read); no SET gets a NOTICE.
    assert_eq!(
        cluster.tag("SET tessera.read_isolation = sequential"),
        "SET"
    );
    for (level, asked, served) in [
        (
            "snapshot",
            crate::ReadIsolation::Snapshot,
            crate::ReadIsolation::Snapshot,
        ),
        (
            "BASIC",
            crate::ReadIsolation::Basic,
            crate::ReadIsolation::Basic,
        ),
        (
            "'snapshot'",
            crate::ReadIsolation::Snapshot,
            crate::ReadIsolation::Snapshot,
        ),
    ] {
        assert_eq!(
            cluster.tag(&format!("SET tessera.read_isolation = {level}")),
            "SET"
        );
        assert_eq!(cluster.session.read_isolation(), asked);
        assert_eq!(cluster.session.read_isolation_served(), served);
        assert_eq!(
            cluster.rows("SHOW tessera.read_isolation"),
            vec![vec![text(served.name())]]
        );
        let command = crate::SessionCommand::Set {
            name: "tessera.read_isolation".into(),
            value: Some(level.trim_matches('\'').into()),
        };
        assert_eq!(served, asked);
        assert!(command.notice().is_none(), "{level}");
    }
    let stronger = crate::ReadIsolation::served_stronger(
        crate::ReadIsolation::Basic,
        crate::ReadIsolation::Sequential,
    );
    assert_eq!(stronger.code, "00000");
    assert_eq!(
        stronger.message,
        "this read was served as sequential, stronger than tessera.read_isolation = basic"
    );
    // A backend of one group serves snapshot reads sequentially, and says so per statement.
    let stronger = crate::ReadIsolation::served_stronger(
        crate::ReadIsolation::Snapshot,
        crate::ReadIsolation::Sequential,
    );
    assert_eq!(
        stronger.message,
        "this read was served as sequential, stronger than tessera.read_isolation = snapshot"
    );
    let sequential = crate::SessionCommand::Set {
        name: "tessera.read_isolation".into(),
        value: Some("sequential".into()),
    };
    assert!(sequential.notice().is_none());
    // The last level set was snapshot, served as itself.
    assert!(cluster
        .rows("SHOW ALL")
        .contains(&vec![text("tessera.read_isolation"), text("snapshot")]));
    cluster.tag("RESET tessera.read_isolation");
    assert_eq!(
        cluster.session.read_isolation(),
        crate::ReadIsolation::Sequential
    );
    assert_eq!(
        cluster.error("SET tessera.read_isolation = eventual").code,
        "22023"
    );
    assert_eq!(cluster.error("SET server_version = '9'").code, "55P02");
    assert_eq!(cluster.error("SET no_such_setting = 1").code, "42704");
    assert_eq!(cluster.error("SHOW no_such_setting").code, "42704");
    for setting in [
        "standard_conforming_strings",
        "transaction_isolation",
        "integer_datetimes",
        "client_encoding",
        "server_encoding",
    ] {
        assert_eq!(
            cluster.rows(&format!("SHOW {setting}")).len(),
            1,
            "{setting}"
        );
    }
    assert_eq!(cluster.tag("DISCARD ALL"), "DISCARD ALL");
    assert_eq!(cluster.rows("SHOW TimeZone"), vec![vec![text("UTC")]]);
    assert_eq!(
        cluster.session.read_isolation(),
        crate::ReadIsolation::Sequential
    );
    assert_eq!(cluster.tag("RESET ALL"), "RESET");
}

#[test]
fn a_front_end_without_transactions_refuses_begin_and_nothing_after_it_runs() {
    let mut cluster = people(1);
    let before = cluster.rows("SELECT id, age FROM people ORDER BY id");
    for sql in [
        "BEGIN",
        "BEGIN WORK",
        "BEGIN TRANSACTION ISOLATION LEVEL SERIALIZABLE",
        "START TRANSACTION",
        "START TRANSACTION READ ONLY",
    ] {
        let error = cluster.error(sql);
        assert_eq!(error.code, "0A000", "{sql}");
        assert!(
            error.message.contains("interactive transactions"),
            "{sql}: {}",
            error.message
        );
        assert!(error.detail.unwrap().contains("commits on its own"));
    }
    // As a simple query: the error stops the string, so the UPDATE never runs.
    let error = cluster
        .run("BEGIN; UPDATE people SET age = 0; ROLLBACK")
        .unwrap_err();
    assert_eq!(error.code, "0A000");
    assert_eq!(
        cluster.rows("SELECT id, age FROM people ORDER BY id"),
        before
    );
    assert!(before.iter().all(|row| row[1] != Value::Int(0)));
}

#[test]
fn transaction_statements_outside_a_block_answer_as_postgresql_does() {
    use crate::SessionCommand;
    let mut cluster = people(1);
    for (sql, tag, command) in [
        ("COMMIT", "COMMIT", SessionCommand::Commit),
        ("COMMIT WORK", "COMMIT", SessionCommand::Commit),
        ("END", "COMMIT", SessionCommand::Commit),
        ("ROLLBACK", "ROLLBACK", SessionCommand::Rollback),
        ("ROLLBACK TRANSACTION", "ROLLBACK", SessionCommand::Rollback),
        ("ABORT", "ROLLBACK", SessionCommand::Rollback),
        ("COMMIT AND NO CHAIN", "COMMIT", SessionCommand::Commit),
    ] {
        assert_eq!(cluster.tag(sql), tag, "{sql}");
        let statement = parse(sql).unwrap().pop().unwrap();
        let plan = plan_statement(&statement, &cluster.catalog).unwrap();
        assert_eq!(plan, Plan::Session(command.clone()), "{sql}");
        let warning = command.warning().expect("COMMIT and ROLLBACK warn");
        assert_eq!(warning.code, "25P01");
        assert_eq!(warning.message, "there is no transaction in progress");
    }
    for (sql, statement) in [
        ("SAVEPOINT a", "SAVEPOINT"),
        ("RELEASE SAVEPOINT a", "RELEASE SAVEPOINT"),
        ("ROLLBACK TO SAVEPOINT a", "ROLLBACK TO SAVEPOINT"),
        ("ROLLBACK TO a", "ROLLBACK TO SAVEPOINT"),
        ("COMMIT AND CHAIN", "COMMIT AND CHAIN"),
        ("ROLLBACK AND CHAIN", "ROLLBACK AND CHAIN"),
    ] {
        let error = cluster.error(sql);
        assert_eq!(error.code, "25P01", "{sql}");
        assert_eq!(
            error.message,
            format!("{statement} can only be used in transaction blocks")
        );
    }
    let set = SessionCommand::Set {
        name: "TimeZone".into(),
        value: None,
    };
    assert_eq!(set.warning(), None);
}

#[test]
fn prepared_statements_infer_parameter_types_and_bind_values() {
    let cluster = people(1);
    let prepared = prepare(
        "SELECT name, age + 1 AS next FROM people WHERE id = $1 AND city = $2 LIMIT $3",
        &cluster.catalog,
        &[],
    )
    .unwrap();
    assert_eq!(
        prepared.parameter_types,
        vec![
            DataType::Int,
            DataType::Text { length_max: None },
            DataType::BigInt
        ]
    );
    assert_eq!(
        prepared
            .columns
            .iter()
            .map(|column| column.name.as_str())
            .collect::<Vec<_>>(),
        vec!["name", "next"]
    );
    assert_eq!(prepared.columns[1].data_type, DataType::Int);
    let plan = prepared
        .bind(
            &cluster.catalog,
            &[Some(int(1)), Some(text("london")), Some(big(5))],
        )
        .unwrap();
    let Plan::Execute(execution) = plan else {
        panic!()
    };
    let engine = &cluster.engines[0];
    let results = vec![execution
        .operations
        .iter()
        .map(|operation| engine.read(operation))
        .collect()];
    let StatementResult::Rows { rows, .. } = execution.finish(results).unwrap() else {
        panic!()
    };
    assert_eq!(rows, vec![vec![text("ada"), int(37)]]);
    // Text parameters are read as the inferred type; a wrong count is a protocol error.
    assert!(prepared
        .bind(&cluster.catalog, &[Some(text("2")), None, None])
        .is_ok());
    assert_eq!(
        prepared
            .bind(&cluster.catalog, &[Some(int(1))])
            .unwrap_err()
            .code,
        "08P01"
    );
    let insert = prepare(
        "INSERT INTO people (id, name, score) VALUES ($1, $2, $3)",
        &cluster.catalog,
        &[],
    )
    .unwrap();
    assert_eq!(
        insert.parameter_types,
        vec![
            DataType::Int,
            DataType::Text {
                length_max: Some(20)
            },
            DataType::Double
        ]
    );
    let update = prepare(
        "UPDATE people SET age = $2 WHERE $1 = id",
        &cluster.catalog,
        &[],
    )
    .unwrap();
    assert_eq!(update.parameter_types, vec![DataType::Int, DataType::Int]);
    let declared = prepare("SELECT $1", &cluster.catalog, &[Some(DataType::BigInt)]).unwrap();
    assert_eq!(declared.parameter_types, vec![DataType::BigInt]);
    assert!(prepare("", &cluster.catalog, &[]).unwrap().is_empty());
    assert_eq!(
        prepare("SELECT 1; SELECT 2", &cluster.catalog, &[])
            .unwrap_err()
            .code,
        "42601"
    );
    assert_eq!(
        prepare("SELECT * FROM nope WHERE a = $1", &cluster.catalog, &[])
            .unwrap_err()
            .code,
        "42P01"
    );
}

#[test]
fn copy_from_stdin_loads_text_format_rows() {
    let mut cluster = people(3);
    let data = "10\tkim\t30\tberlin\t1.25\n11\tlee\t\\N\tto\\tkyo\t\\N\n\\.\n";
    assert_eq!(
        cluster.copy("COPY people FROM STDIN", data).unwrap(),
        StatementResult::Command {
            tag: "COPY 2".into()
        }
    );
    assert_eq!(
        cluster.rows("SELECT city, age FROM people WHERE id >= 10 ORDER BY id"),
        vec![
            vec![text("berlin"), int(30)],
            vec![text("to\tkyo"), Value::Null]
        ]
    );
    assert_eq!(
        cluster
            .copy("COPY people (id, name) FROM STDIN", "12\tx\n13\n")
            .unwrap_err()
            .code,
        "22P04"
    );
    assert_eq!(
        cluster
            .copy("COPY people (id, name) FROM STDIN", "x\ty\n")
            .unwrap_err()
            .code,
        "22P02"
    );
    assert_eq!(
        cluster
            .copy("COPY people (id, name) FROM STDIN", "1\ty\tz\n")
            .unwrap_err()
            .code,
        "22P04"
    );
    assert_eq!(
        cluster
            .copy("COPY people (id, name) FROM STDIN WITH (FORMAT csv)", "")
            .unwrap_err()
            .code,
        "0A000"
    );
    assert_eq!(cluster.error("COPY people TO STDOUT").code, "0A000");
}

#[test]
fn a_large_copy_is_cut_into_bounded_statements_and_bad_data_fails_before_any() {
    let mut cluster = people(3);
    let statement = parse("COPY people (id, name) FROM STDIN")
        .unwrap()
        .pop()
        .unwrap();
    let Plan::CopyIn(copy) = plan_statement(&statement, &cluster.catalog).unwrap() else {
        panic!("not a COPY")
    };
    let data: String = (100..105).map(|id| format!("{id}\tp{id}\n")).collect();
    let executions = copy.executions(data.as_bytes(), 2).unwrap();
    let sizes: Vec<usize> = executions
        .iter()
        .map(|execution| match &execution.operations[..] {
            [Operation::Insert { rows, .. }] => rows.len(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(sizes, vec![2, 2, 1]);
    let tags: Vec<StatementResult> = executions
        .into_iter()
        .map(|execution| cluster.execute(Plan::Execute(execution)).unwrap())
        .collect();
    assert_eq!(
        tags,
        ["COPY 2", "COPY 2", "COPY 1"]
            .map(|tag| StatementResult::Command { tag: tag.into() })
            .to_vec()
    );
    assert_eq!(
        cluster.rows("SELECT count(*) FROM people WHERE id >= 100"),
        vec![vec![Value::BigInt(5)]]
    );
    // Bad data in the last statement's rows fails the whole COPY before one is planned.
    let bad = "200\tq\n201\tq\nnot-a-number\tq\n";
    assert_eq!(
        copy.executions(bad.as_bytes(), 2).unwrap_err().code,
        "22P02"
    );
    // No rows: one empty statement (COPY 0).
    let empty = copy.executions(b"", 2).unwrap();
    assert_eq!(empty.len(), 1);
    assert!(empty[0].operations.is_empty());
}

#[test]
fn copy_into_a_table_without_a_primary_key_gives_rows_hidden_ids() {
    let mut cluster = people(3);
    cluster.tag("CREATE TABLE log (who TEXT, amount INT)");
    let data: String = (0..40)
        .map(|index| format!("u{index}\t{index}\n"))
        .collect();
    assert_eq!(
        cluster.copy("COPY log FROM STDIN", &data).unwrap(),
        StatementResult::Command {
            tag: "COPY 40".into()
        }
    );
    assert_eq!(
        cluster
            .copy("COPY log (amount) FROM STDIN", "7\n7\n")
            .unwrap(),
        StatementResult::Command {
            tag: "COPY 2".into()
        }
    );
    assert_eq!(
        cluster.rows("SELECT count(*), sum(amount) FROM log"),
        vec![vec![Value::BigInt(42), Value::BigInt(794)]]
    );
    assert_eq!(
        cluster.rows("SELECT who FROM log WHERE amount = 39"),
        vec![vec![text("u39")]]
    );
    assert_eq!(
        cluster
            .copy("COPY log (tessera_row_id, who) FROM STDIN", "1\tx\n")
            .unwrap_err()
            .code,
        "428C9"
    );
}

#[test]
fn unsupported_features_are_refused_with_0a000_and_parse_errors_with_42601() {
    let mut cluster = people(1);
    cluster.tag("CREATE TABLE other (id INT PRIMARY KEY)");
    for sql in [
        "SELECT * FROM people JOIN LATERAL (SELECT 1) AS x ON true",
        "SELECT * FROM people NATURAL JOIN pg_class",
        "SELECT * FROM people WHERE id IN (SELECT DISTINCT id FROM other)",
        "SELECT id FROM people UNION SELECT id FROM other ORDER BY id + 1",
        "WITH RECURSIVE x AS (SELECT 1) SELECT * FROM x",
        "SELECT DISTINCT ON (city) city, rank() OVER () FROM people",
        "SELECT count(*) OVER (ORDER BY id GROUPS 1 PRECEDING) FROM people",
        "SELECT age + 1, count(*) FROM people GROUP BY age + 1",
        "DELETE FROM people WHERE id = 1 RETURNING id LIMIT 1",
        "ALTER TABLE people ALTER COLUMN age TYPE BIGINT",
        "CREATE MATERIALIZED VIEW m AS SELECT 1",
        "PREPARE p AS SELECT 1",
    ] {
        assert_eq!(cluster.error(sql).code, "0A000", "{sql}");
    }
    for sql in [
        "SELEC 1",
        "SELECT * FROM people WHERE",
        "INSERT INTO people VALUES (",
        "CREATE TABLE (a INT)",
    ] {
        assert_eq!(cluster.error(sql).code, "42601", "{sql}");
    }
    assert_eq!(cluster.error("SELECT nope FROM people").code, "42703");
    assert_eq!(cluster.error("SELECT * FROM nope").code, "42P01");
    assert_eq!(cluster.error("SELECT 1 / 0").code, "22012");
    assert_eq!(cluster.error("SELECT 2147483647 + 1").code, "22003");
    assert_eq!(
        cluster.error("SELECT * FROM people WHERE id = 'abc'").code,
        "22P02"
    );
    assert_eq!(cluster.error("SELECT nosuchfunction(1)").code, "42883");
    assert_eq!(cluster.error("SELECT * FROM people LIMIT -1").code, "2201W");
}

#[test]
fn queries_without_from_answer_client_probes() {
    let mut cluster = Cluster::new(1);
    assert_eq!(cluster.rows("SELECT 1"), vec![vec![int(1)]]);
    let rows = cluster.rows("SELECT version(), current_schema(), current_database(), current_user");
    assert_eq!(rows[0][1], text("public"));
    assert_eq!(cluster.tag(""), "EMPTY");
    assert_eq!(cluster.tag(";;"), "EMPTY");
}

#[test]
fn psql_dt_query_lists_tables_through_the_virtual_catalog() {
    let mut cluster = people(1);
    cluster.tag("CREATE TABLE other (k BIGINT PRIMARY KEY, v TEXT)");
    cluster.tag("CREATE INDEX other_v ON other (v)");
    // psql 15's \dt, as describe.c builds it.
    let dt = "SELECT n.nspname as \"Schema\",\n  c.relname as \"Name\",\n  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as \"Type\",\n  pg_catalog.pg_get_userbyid(c.relowner) as \"Owner\"\nFROM pg_catalog.pg_class c\n     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace\n     LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam\nWHERE c.relkind IN ('r','p','')\n      AND n.nspname <> 'pg_catalog'\n      AND n.nspname !~ '^pg_toast'\n      AND n.nspname <> 'information_schema'\n  AND pg_catalog.pg_table_is_visible(c.oid)\nORDER BY 1,2;";
    assert_eq!(
        cluster.rows(dt),
        vec![
            vec![
                text("public"),
                text("other"),
                text("table"),
                text("tessera")
            ],
            vec![
                text("public"),
                text("people"),
                text("table"),
                text("tessera")
            ],
        ]
    );
    // The first query of \d people: find the table's oid by a regex on its name.
    let find = "SELECT c.oid,\n  n.nspname,\n  c.relname\nFROM pg_catalog.pg_class c\n     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace\nWHERE c.relname OPERATOR(pg_catalog.~) '^(people)$' COLLATE pg_catalog.default\n  AND pg_catalog.pg_table_is_visible(c.oid)\nORDER BY 2, 3;";
    let rows = cluster.rows(find);
    assert_eq!(rows.len(), 1);
    let oid = rows[0][0].to_string();
    // The column query of \d people.
    let columns = format!("SELECT a.attname,\n  pg_catalog.format_type(a.atttypid, a.atttypmod),\n  a.attnotnull\nFROM pg_catalog.pg_attribute a\nWHERE a.attrelid = '{oid}' AND a.attnum > 0 AND NOT a.attisdropped\nORDER BY a.attnum;");
    let rows = cluster.rows(&columns);
    assert_eq!(
        rows[0],
        vec![text("id"), text("integer"), Value::Boolean(true)]
    );
    assert_eq!(
        rows[1],
        vec![
            text("name"),
            text("character varying(20)"),
            Value::Boolean(true)
        ]
    );
    assert_eq!(
        rows[4],
        vec![
            text("score"),
            text("double precision"),
            Value::Boolean(false)
        ]
    );
    // Indexes of a table.
    let indexes = cluster.rows("SELECT c2.relname, i.indisprimary FROM pg_catalog.pg_class c, pg_catalog.pg_class c2, pg_catalog.pg_index i WHERE c.relname = 'other' AND c.oid = i.indrelid AND i.indexrelid = c2.oid ORDER BY i.indisprimary DESC, c2.relname");
    assert_eq!(
        indexes,
        vec![
            vec![text("other_pkey"), Value::Boolean(true)],
            vec![text("other_v"), Value::Boolean(false)]
        ]
    );
}

#[test]
fn information_schema_answers_driver_metadata_queries() {
    let mut cluster = people(1);
    let tables = cluster.rows("SELECT table_schema, table_name, table_type FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name");
    assert_eq!(
        tables,
        vec![vec![text("public"), text("people"), text("BASE TABLE")]]
    );
    let columns = cluster.rows("SELECT column_name, data_type, is_nullable, character_maximum_length FROM information_schema.columns WHERE table_name = 'people' ORDER BY ordinal_position");
    assert_eq!(columns.len(), 5);
    assert_eq!(
        columns[1],
        vec![
            text("name"),
            text("character varying(20)"),
            text("NO"),
            int(20)
        ]
    );
    let keys = cluster.rows("SELECT k.column_name FROM information_schema.table_constraints t JOIN information_schema.key_column_usage k ON k.constraint_name = t.constraint_name WHERE t.constraint_type = 'PRIMARY KEY' AND t.table_name = 'people'");
    assert_eq!(keys, vec![vec![text("id")]]);
    // Catalog tables this emulation does not know read as empty.
    assert_eq!(
        cluster.rows("SELECT pid FROM pg_catalog.pg_stat_activity"),
        Vec::<Vec<Value>>::new()
    );
    assert_eq!(
        cluster
            .rows("SELECT count(*) FROM pg_catalog.pg_type")
            .len(),
        1
    );
}

/// psql 15's `\d people`, query by query (src/bin/psql/describe.c, describeOneTableDetails and
/// its footers), with the table's oid as psql substitutes it.
#[test]
fn psql_describe_table_queries_all_answer() {
    let mut cluster = people(1);
    cluster.tag("CREATE INDEX people_city ON people (city)");
    // Enough tables that an unfiltered comma join of pg_class × pg_class × pg_index would
    // pass the join limit.
    for table in 0..70 {
        cluster.tag(&format!(
            "CREATE TABLE filler{table} (k INT PRIMARY KEY, v TEXT)"
        ));
        cluster.tag(&format!(
            "CREATE INDEX filler{table}_v ON filler{table} (v)"
        ));
    }
    let find = "SELECT c.oid,\n  n.nspname,\n  c.relname\nFROM pg_catalog.pg_class c\n     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace\nWHERE c.relname OPERATOR(pg_catalog.~) '^(people)$' COLLATE pg_catalog.default\n  AND pg_catalog.pg_table_is_visible(c.oid)\nORDER BY 2, 3;";
    let oid = cluster.rows(find)[0][0].to_string();
    let table = format!("SELECT c.relchecks, c.relkind, c.relhasindex, c.relhasrules, c.relhastriggers, c.relrowsecurity, c.relforcerowsecurity, false AS relhasoids, c.relispartition, '', c.reltablespace, CASE WHEN c.reloftype = 0 THEN '' ELSE c.reloftype::pg_catalog.regtype::pg_catalog.text END, c.relpersistence, c.relreplident, am.amname\nFROM pg_catalog.pg_class c\n LEFT JOIN pg_catalog.pg_class tc ON (c.reltoastrelid = tc.oid)\nLEFT JOIN pg_catalog.pg_am am ON (c.relam = am.oid)\nWHERE c.oid = '{oid}';");
    let rows = cluster.rows(&table);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0][1], text("r"));
    assert_eq!(rows[0][14], text("heap"));
    let columns = format!("SELECT a.attname,\n  pg_catalog.format_type(a.atttypid, a.atttypmod),\n  (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true)\n   FROM pg_catalog.pg_attrdef d\n   WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef),\n  a.attnotnull,\n  (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t\n   WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation) AS attcollation,\n  a.attidentity,\n  a.attgenerated\nFROM pg_catalog.pg_attribute a\nWHERE a.attrelid = '{oid}' AND a.attnum > 0 AND NOT a.attisdropped\nORDER BY a.attnum;");
    let rows = cluster.rows(&columns);
    assert_eq!(rows.len(), 5);
    assert_eq!(
        rows[1],
        vec![
            text("name"),
            text("character varying(20)"),
            Value::Null,
            Value::Boolean(true),
            Value::Null,
            text(""),
            text("")
        ]
    );
    let indexes = format!("SELECT c2.relname, i.indisprimary, i.indisunique, i.indisclustered, i.indisvalid, pg_catalog.pg_get_indexdef(i.indexrelid, 0, true),\n  pg_catalog.pg_get_constraintdef(con.oid, true), contype, condeferrable, condeferred, i.indisreplident, c2.reltablespace\nFROM pg_catalog.pg_class c, pg_catalog.pg_class c2, pg_catalog.pg_index i\n  LEFT JOIN pg_catalog.pg_constraint con ON (conrelid = i.indrelid AND conindid = i.indexrelid AND contype IN ('p','u','x'))\nWHERE c.oid = '{oid}' AND c.oid = i.indrelid AND i.indexrelid = c2.oid\nORDER BY i.indisprimary DESC, c2.relname;");
    let rows = cluster.rows(&indexes);
    assert_eq!(rows.len(), 2);
    assert_eq!(
        rows[0][5],
        text("CREATE UNIQUE INDEX people_pkey ON public.people USING btree (id)")
    );
    assert_eq!(rows[0][6], text("PRIMARY KEY (id)"));
    assert_eq!(
        rows[1][5],
        text("CREATE INDEX people_city ON public.people USING btree (city)")
    );
    assert_eq!(rows[1][6], Value::Null);
    let empty_footers = [
        format!("SELECT r.conname, pg_catalog.pg_get_constraintdef(r.oid, true)\nFROM pg_catalog.pg_constraint r\nWHERE r.conrelid = '{oid}' AND r.contype = 'c'\nORDER BY 1;"),
        format!("SELECT conrelid = '{oid}'::pg_catalog.regclass AS sametable,\n       conname,\n       pg_catalog.pg_get_constraintdef(oid, true) AS condef,\n       conrelid::pg_catalog.regclass AS ontable\n  FROM pg_catalog.pg_constraint,\n       pg_catalog.pg_partition_ancestors('{oid}')\n WHERE conrelid = relid AND contype = 'f' AND conparentid = 0\nORDER BY sametable DESC, conname;"),
        format!("SELECT conname, conrelid::pg_catalog.regclass AS ontable,\n       pg_catalog.pg_get_constraintdef(oid, true) AS condef\n  FROM pg_catalog.pg_constraint c\n WHERE confrelid IN (SELECT pg_catalog.pg_partition_ancestors('{oid}')\n                     UNION ALL VALUES ('{oid}'::pg_catalog.regclass))\n       AND contype = 'f' AND conparentid = 0\nORDER BY conname;"),
        format!("SELECT pol.polname, pol.polpermissive,\n  CASE WHEN pol.polroles = '{{0}}' THEN NULL ELSE pg_catalog.array_to_string(array(select rolname from pg_catalog.pg_roles where oid = any (pol.polroles) order by 1),',') END,\n  pg_catalog.pg_get_expr(pol.polqual, pol.polrelid),\n  pg_catalog.pg_get_expr(pol.polwithcheck, pol.polrelid),\n  CASE pol.polcmd\n    WHEN 'r' THEN 'SELECT'\n    WHEN 'a' THEN 'INSERT'\n    WHEN 'w' THEN 'UPDATE'\n    WHEN 'd' THEN 'DELETE'\n    END AS cmd\nFROM pg_catalog.pg_policy pol\nWHERE pol.polrelid = '{oid}' ORDER BY 1;"),
        format!("SELECT oid, stxrelid::pg_catalog.regclass, stxnamespace::pg_catalog.regnamespace::pg_catalog.text AS nsp, stxname,\npg_catalog.pg_get_statisticsobjdef_columns(oid) AS columns,\n  'd' = any(stxkind) AS ndist_enabled,\n  'f' = any(stxkind) AS deps_enabled,\n  'm' = any(stxkind) AS mcv_enabled,\nstxstattarget\nFROM pg_catalog.pg_statistic_ext\nWHERE stxrelid = '{oid}'\nORDER BY nsp, stxname;"),
        format!("SELECT pubname\n     , NULL\n     , NULL\nFROM pg_catalog.pg_publication p\n     JOIN pg_catalog.pg_publication_namespace pn ON p.oid = pn.pnpubid\n     JOIN pg_catalog.pg_class pc ON pc.relnamespace = pn.pnnspid\nWHERE pc.oid ='{oid}' and pg_catalog.pg_relation_is_publishable('{oid}')\nUNION\nSELECT pubname\n     , pg_get_expr(pr.prqual, c.oid)\n     , (CASE WHEN pr.prattrs IS NOT NULL THEN\n         (SELECT string_agg(attname, ', ')\n           FROM pg_catalog.generate_series(0, pg_catalog.array_upper(pr.prattrs::pg_catalog.int2[], 1)) s,\n                pg_catalog.pg_attribute\n          WHERE attrelid = pr.prrelid AND attnum = prattrs[s])\n        ELSE NULL END) FROM pg_catalog.pg_publication p\n     JOIN pg_catalog.pg_publication_rel pr ON p.oid = pr.prpubid\n     JOIN pg_catalog.pg_class c ON c.oid = pr.prrelid\nWHERE pr.prrelid = '{oid}'\nUNION\nSELECT pubname\n     , NULL\n     , NULL\nFROM pg_catalog.pg_publication p\nWHERE p.puballtables AND pg_catalog.pg_relation_is_publishable('{oid}')\nORDER BY 1;"),
        format!("SELECT c.oid::pg_catalog.regclass\nFROM pg_catalog.pg_class c, pg_catalog.pg_inherits i\nWHERE c.oid = i.inhparent AND i.inhrelid = '{oid}'\n  AND c.relkind != 'p' AND c.relkind != 'I'\nORDER BY inhseqno;"),
        format!("SELECT c.oid::pg_catalog.regclass, c.relkind, inhdetachpending, pg_catalog.pg_get_expr(c.relpartbound, c.oid)\nFROM pg_catalog.pg_class c, pg_catalog.pg_inherits i\nWHERE c.oid = i.inhrelid AND i.inhparent = '{oid}'\nORDER BY pg_catalog.pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT', c.oid::pg_catalog.regclass::pg_catalog.text;"),
    ];
    for sql in &empty_footers {
        match cluster.run(sql) {
            Ok(StatementResult::Rows { rows, .. }) => assert!(rows.is_empty(), "{sql}: {rows:?}"),
            other => panic!("{sql}: {other:?}"),
        }
    }
}

/// pgjdbc 42's DatabaseMetaData queries (PgDatabaseMetaData: getTables, getColumns,
/// getPrimaryKeys), with the patterns it substitutes.
#[test]
fn pgjdbc_metadata_queries_answer() {
    let mut cluster = people(1);
    let get_tables = "SELECT NULL AS TABLE_CAT, n.nspname AS TABLE_SCHEM, c.relname AS TABLE_NAME,  CASE n.nspname ~ '^pg_' OR n.nspname = 'information_schema'  WHEN true THEN CASE  WHEN n.nspname = 'pg_catalog' OR n.nspname = 'information_schema' THEN CASE c.relkind   WHEN 'r' THEN 'SYSTEM TABLE'   WHEN 'v' THEN 'SYSTEM VIEW'   WHEN 'i' THEN 'SYSTEM INDEX'   ELSE NULL   END  WHEN n.nspname = 'pg_toast' THEN CASE c.relkind   WHEN 'r' THEN 'SYSTEM TOAST TABLE'   WHEN 'i' THEN 'SYSTEM TOAST INDEX'   ELSE NULL   END  ELSE CASE c.relkind   WHEN 'r' THEN 'TEMPORARY TABLE'   WHEN 'p' THEN 'TEMPORARY TABLE'   WHEN 'i' THEN 'TEMPORARY INDEX'   WHEN 'S' THEN 'TEMPORARY SEQUENCE'   WHEN 'v' THEN 'TEMPORARY VIEW'   ELSE NULL   END  END  WHEN false THEN CASE c.relkind  WHEN 'r' THEN 'TABLE'  WHEN 'p' THEN 'PARTITIONED TABLE'  WHEN 'i' THEN 'INDEX'  WHEN 'P' then 'PARTITIONED INDEX'  WHEN 'S' THEN 'SEQUENCE'  WHEN 'v' THEN 'VIEW'  WHEN 'c' THEN 'TYPE'  WHEN 'f' THEN 'FOREIGN TABLE'  WHEN 'm' THEN 'MATERIALIZED VIEW'  ELSE NULL  END  ELSE NULL  END  AS TABLE_TYPE, d.description AS REMARKS,  '' as TYPE_CAT, '' as TYPE_SCHEM, '' as TYPE_NAME, '' AS SELF_REFERENCING_COL_NAME, '' AS REF_GENERATION  FROM pg_catalog.pg_namespace n, pg_catalog.pg_class c  LEFT JOIN pg_catalog.pg_description d ON (c.oid = d.objoid AND d.objsubid = 0  and d.classoid = 'pg_class'::regclass)  WHERE c.relnamespace = n.oid  AND c.relname LIKE E'peo%' AND (false  OR ( c.relkind = 'r' AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema' ) ) ORDER BY TABLE_TYPE,TABLE_SCHEM,TABLE_NAME";
    let rows = cluster.rows(get_tables);
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0][..4],
        [Value::Null, text("public"), text("people"), text("TABLE")]
    );
    let get_columns = "SELECT * FROM (SELECT n.nspname,c.relname,a.attname,a.atttypid,a.attnotnull OR (t.typtype = 'd' AND t.typnotnull) AS attnotnull,a.atttypmod,a.attlen,t.typtypmod,row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum) AS attnum, nullif(a.attidentity, '') as attidentity,nullif(a.attgenerated, '') as attgenerated,pg_catalog.pg_get_expr(def.adbin, def.adrelid) AS adsrc,dsc.description,t.typbasetype,t.typtype  FROM pg_catalog.pg_namespace n  JOIN pg_catalog.pg_class c ON (c.relnamespace = n.oid)  JOIN pg_catalog.pg_attribute a ON (a.attrelid=c.oid)  JOIN pg_catalog.pg_type t ON (a.atttypid = t.oid)  LEFT JOIN pg_catalog.pg_attrdef def ON (a.attrelid=def.adrelid AND a.attnum = def.adnum)  LEFT JOIN pg_catalog.pg_description dsc ON (c.oid=dsc.objoid AND a.attnum = dsc.objsubid)  LEFT JOIN pg_catalog.pg_class dc ON (dc.oid=dsc.classoid AND dc.relname='pg_class')  LEFT JOIN pg_catalog.pg_namespace dn ON (dc.relnamespace=dn.oid AND dn.nspname='pg_catalog')  WHERE c.relkind in ('r','p','v','f','m') and a.attnum > 0 AND NOT a.attisdropped  AND n.nspname LIKE E'public' AND c.relname LIKE E'people') c WHERE true  ORDER BY nspname,c.relname,attnum";
    let rows = cluster.rows(get_columns);
    assert_eq!(rows.len(), 5);
    assert_eq!(
        rows[0][..5],
        [
            text("public"),
            text("people"),
            text("id"),
            big(23),
            Value::Boolean(true)
        ]
    );
    assert_eq!(
        rows[1][2..6],
        [text("name"), big(1043), Value::Boolean(true), int(24)]
    );
    assert_eq!(rows[4][8], big(5));
    let get_primary_keys = "SELECT        result.TABLE_CAT,        result.TABLE_SCHEM,        result.TABLE_NAME,        result.COLUMN_NAME,        result.KEY_SEQ,        result.PK_NAME FROM      (SELECT NULL AS TABLE_CAT, n.nspname AS TABLE_SCHEM,   ct.relname AS TABLE_NAME, a.attname AS COLUMN_NAME,   (information_schema._pg_expandarray(i.indkey)).n AS KEY_SEQ, ci.relname AS PK_NAME,   information_schema._pg_expandarray(i.indkey) AS KEYS, a.attnum AS A_ATTNUM FROM pg_catalog.pg_class ct   JOIN pg_catalog.pg_attribute a ON (ct.oid = a.attrelid)   JOIN pg_catalog.pg_namespace n ON (ct.relnamespace = n.oid)   JOIN pg_catalog.pg_index i ON ( a.attrelid = i.indrelid)   JOIN pg_catalog.pg_class ci ON (ci.oid = i.indexrelid) WHERE true  AND n.nspname = E'public' AND ct.relname = E'people' AND i.indisprimary  ) result where  result.A_ATTNUM = (result.KEYS).x  ORDER BY result.table_name, result.pk_name, result.key_seq";
    assert_eq!(
        cluster.rows(get_primary_keys),
        vec![vec![
            Value::Null,
            text("public"),
            text("people"),
            text("id"),
            int(1),
            text("people_pkey")
        ]]
    );
    cluster.tag("CREATE TABLE pair (a INT, b TEXT, c INT, PRIMARY KEY (b, a))");
    let pair_keys = get_primary_keys.replace("E'people'", "E'pair'");
    let rows = cluster.rows(&pair_keys);
    assert_eq!(
        rows.iter()
            .map(|row| (row[3].clone(), row[4].clone()))
            .collect::<Vec<_>>(),
        vec![(text("b"), int(1)), (text("a"), int(2))]
    );
}

#[test]
fn aggregates_without_group_by_answer_one_row_even_from_no_partition() {
    let catalog = people(1).catalog;
    let Plan::Execute(execution) = plan_statement(
        &parse("SELECT count(*), sum(age), max(name) FROM people").unwrap()[0],
        &catalog,
    )
    .unwrap() else {
        panic!()
    };
    let StatementResult::Rows { rows, .. } = execution.finish(Vec::new()).unwrap() else {
        panic!()
    };
    assert_eq!(rows, vec![vec![big(0), Value::Null, Value::Null]]);
}

#[test]
fn a_query_string_runs_statements_in_order_each_seeing_the_last() {
    let mut cluster = Cluster::new(2);
    let answer = cluster.run("CREATE TABLE kv (k TEXT PRIMARY KEY, v BIGINT); INSERT INTO kv VALUES ('a', 1), ('b', 2); UPDATE kv SET v = 5 WHERE k = 'b'; SELECT sum(v) FROM kv").unwrap();
    assert_eq!(
        answer,
        StatementResult::Rows {
            columns: vec![crate::OutputColumn::new("sum", DataType::BigInt)],
            rows: vec![vec![big(6)]],
            tag: "SELECT 1".into()
        }
    );
    // An error stops the string; what ran before it stays (autocommit).
    assert_eq!(cluster.run("INSERT INTO kv VALUES ('c', 3); INSERT INTO kv VALUES ('a', 9); INSERT INTO kv VALUES ('d', 4)").unwrap_err().code, "23505");
    assert_eq!(
        cluster.rows("SELECT k FROM kv ORDER BY k"),
        vec![vec![text("a")], vec![text("b")], vec![text("c")]]
    );
}

#[test]
fn parameters_take_their_types_from_in_between_like_limit_and_set() {
    let catalog = people(1).catalog;
    let types = |sql: &str| prepare(sql, &catalog, &[]).unwrap().parameter_types;
    let text = DataType::Text { length_max: None };
    assert_eq!(
        types("SELECT id FROM people WHERE age IN ($1, $2) AND score BETWEEN $3 AND $4"),
        vec![
            DataType::Int,
            DataType::Int,
            DataType::Double,
            DataType::Double
        ]
    );
    assert_eq!(
        types("SELECT id FROM people WHERE city LIKE $1 OFFSET $2"),
        vec![text, DataType::BigInt]
    );
    assert_eq!(
        types("UPDATE people SET score = $1, city = $2 WHERE id = $3"),
        vec![DataType::Double, text, DataType::Int]
    );
    assert_eq!(
        types("DELETE FROM people WHERE $1 < age"),
        vec![DataType::Int]
    );
    assert_eq!(types("SELECT $1 || name FROM people"), vec![text]);
    assert_eq!(
        types(
            "INSERT INTO people (id, name) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET age = $3"
        ),
        vec![
            DataType::Int,
            DataType::Text {
                length_max: Some(20)
            },
            DataType::Int
        ]
    );
}

#[test]
fn tables_without_a_primary_key_get_a_hidden_row_id() {
    let mut cluster = Cluster::new(3);
    assert_eq!(
        cluster.tag("CREATE TABLE t1 (a INTEGER, b INTEGER, c TEXT)"),
        "CREATE TABLE"
    );
    assert_eq!(
        cluster.tag("INSERT INTO t1 (c, a) VALUES ('x', 1), ('y', 1)"),
        "INSERT 0 2"
    );
    assert_eq!(
        cluster.tag("INSERT INTO t1 VALUES (2, 20, 'z'), (1, NULL, 'x')"),
        "INSERT 0 2"
    );
    // Duplicates are rows like any other; `*` shows the declared columns only, in insertion
    // order when nothing else orders them (the row id breaks ties).
    match cluster.run("SELECT * FROM t1").unwrap() {
        StatementResult::Rows { columns, rows, .. } => {
            let names: Vec<&str> = columns.iter().map(|column| column.name.as_str()).collect();
            assert_eq!(names, ["a", "b", "c"]);
            assert_eq!(
                rows,
                vec![
                    vec![int(1), Value::Null, text("x")],
                    vec![int(1), Value::Null, text("y")],
                    vec![int(2), int(20), text("z")],
                    vec![int(1), Value::Null, text("x")],
                ]
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        cluster.rows("SELECT a, count(*) FROM t1 GROUP BY a ORDER BY a"),
        vec![vec![int(1), big(3)], vec![int(2), big(1)]]
    );
    assert_eq!(
        cluster.tag("UPDATE t1 SET b = a * 10 WHERE c = 'x'"),
        "UPDATE 2"
    );
    assert_eq!(cluster.tag("DELETE FROM t1 WHERE c = 'y'"), "DELETE 1");
    // The hidden id (the gateway's, `with_row_ids`: the rows are spread over the partitions
    // by it) can be read by name, never written, and is never reused.
    assert_eq!(
        cluster.rows("SELECT tessera_row_id, b FROM t1 ORDER BY tessera_row_id"),
        vec![
            vec![big(1001), int(10)],
            vec![big(1003), int(20)],
            vec![big(1004), int(10)]
        ]
    );
    let holding: Vec<usize> = cluster
        .engines
        .iter()
        .map(|engine| engine.table("t1").unwrap().rows.len())
        .collect();
    assert_eq!(holding.iter().sum::<usize>(), 3);
    assert!(
        holding.iter().filter(|rows| **rows > 0).count() > 1,
        "spread: {holding:?}"
    );
    assert_eq!(
        cluster
            .error("INSERT INTO t1 (tessera_row_id, a) VALUES (9, 9)")
            .code,
        "428C9"
    );
    assert_eq!(
        cluster.error("UPDATE t1 SET tessera_row_id = 9").code,
        "0A000"
    );
    assert_eq!(cluster.tag("DELETE FROM t1 WHERE a = 2"), "DELETE 1");
    cluster.tag("INSERT INTO t1 (a) VALUES (5)");
    assert_eq!(
        cluster.rows("SELECT tessera_row_id FROM t1 WHERE a = 5"),
        vec![vec![big(1005)]]
    );
    assert_eq!(
        cluster
            .error("CREATE TABLE t2 (a INT, tessera_row_id BIGINT)")
            .code,
        "42701"
    );
    // COPY gives its rows hidden row ids too.
    assert_eq!(
        cluster.copy("COPY t1 (a) FROM STDIN", "7\n").unwrap(),
        StatementResult::Command {
            tag: "COPY 1".into()
        }
    );
    assert_eq!(
        cluster.rows("SELECT count(*) FROM t1 WHERE a = 7"),
        vec![vec![big(1)]]
    );
    // The catalog shows the declared columns and no primary key.
    let described = cluster.rows(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 't1' \
         ORDER BY ordinal_position",
    );
    assert_eq!(
        described,
        vec![vec![text("a")], vec![text("b")], vec![text("c")]]
    );
    assert_eq!(
        cluster.rows(
            "SELECT count(*) FROM information_schema.table_constraints WHERE table_name = 't1'"
        ),
        vec![vec![big(0)]]
    );
}

#[test]
fn aggregates_inside_a_subquery_do_not_make_the_outer_query_grouped() {
    let mut cluster = people(3);
    // Scalar subqueries over a user table, uncorrelated and correlated, with aggregates; the
    // table's rows come from every partition.
    assert_eq!(
        cluster.rows(
            "SELECT id, CASE WHEN age > (SELECT avg(age) FROM people) THEN 1 ELSE 0 END \
             FROM people ORDER BY id"
        ),
        vec![
            vec![int(1), int(1)],
            vec![int(2), int(0)],
            vec![int(3), int(0)],
            vec![int(4), int(1)],
            vec![int(5), int(0)],
        ]
    );
    assert_eq!(
        cluster.rows(
            "SELECT name, (SELECT count(*) FROM people AS x WHERE x.age < people.age) \
             FROM people WHERE id <= 4 ORDER BY 2, 1"
        ),
        vec![
            vec![text("bob"), big(0)],
            vec![text("cy"), big(0)],
            vec![text("ada"), big(2)],
            vec![text("dee"), big(3)],
        ]
    );
    assert_eq!(
        cluster.rows("SELECT name FROM people WHERE age >= (SELECT max(age) FROM people)"),
        vec![vec![text("dee")]]
    );
    assert_eq!(
        cluster.rows("SELECT (SELECT min(name) FROM people WHERE city = 'paris'), 1 + 1"),
        vec![vec![text("bob"), int(2)]]
    );
    assert_eq!(
        cluster.rows(
            "SELECT id FROM people WHERE id IN (SELECT id FROM people WHERE age = 25) ORDER BY id"
        ),
        vec![vec![int(2)], vec![int(5)]]
    );
    assert_eq!(
        cluster
            .error("SELECT (SELECT name FROM people) FROM people")
            .code,
        "21000"
    );
    assert_eq!(
        cluster.error("SELECT (SELECT count(*) FROM nope)").code,
        "42P01"
    );
    assert_eq!(
        cluster
            .error("SELECT (SELECT age FROM people ORDER BY age LIMIT 1)")
            .code,
        "0A000"
    );
    // Aggregates of the query itself still group it, next to a subquery too.
    assert_eq!(
        cluster.error("SELECT name, count(*) FROM people").code,
        "42803"
    );
    assert_eq!(
        cluster.rows("SELECT count(*), max(name) FROM people WHERE name <> '(select count(*)'"),
        vec![vec![big(5), text("eve")]]
    );
    assert_eq!(
        super::plan::without_subqueries_for_tests(
            "a, (select count(*) from t where x = ')'), sum(b)"
        ),
        "a, (subquery), sum(b)"
    );
}

#[test]
fn union_intersect_and_except_combine_queries_of_one_table_each() {
    let mut cluster = people(3);
    cluster.tag("CREATE TABLE other (id INT PRIMARY KEY, age BIGINT)");
    cluster.tag("INSERT INTO other VALUES (1, 25), (2, 25), (3, 50), (4, NULL)");
    let ages = |cluster: &mut Cluster, sql: &str| -> Vec<Value> {
        cluster
            .rows(sql)
            .into_iter()
            .map(|row| row[0].clone())
            .collect()
    };
    // people.age: 36, 25, NULL, 41, 25; other.age: 25, 25, 50, NULL (BIGINT: INT widens).
    assert_eq!(
        ages(
            &mut cluster,
            "SELECT age FROM people UNION SELECT age FROM other"
        ),
        vec![Value::Null, big(25), big(36), big(41), big(50)]
    );
    assert_eq!(
        ages(
            &mut cluster,
            "SELECT age FROM people UNION ALL SELECT age FROM other"
        )
        .len(),
        9
    );
    assert_eq!(
        ages(
            &mut cluster,
            "SELECT age FROM people INTERSECT SELECT age FROM other"
        ),
        vec![Value::Null, big(25)]
    );
    assert_eq!(
        ages(
            &mut cluster,
            "SELECT age FROM people INTERSECT ALL SELECT age FROM other"
        ),
        vec![Value::Null, big(25), big(25)]
    );
    assert_eq!(
        ages(
            &mut cluster,
            "SELECT age FROM people EXCEPT SELECT age FROM other"
        ),
        vec![big(36), big(41)]
    );
    assert_eq!(
        ages(
            &mut cluster,
            "SELECT age FROM people WHERE id < 3 EXCEPT ALL SELECT age FROM people WHERE id = 5"
        ),
        vec![int(36)]
    );
    // INTERSECT binds tighter than UNION.
    assert_eq!(
        ages(
            &mut cluster,
            "SELECT 1 UNION SELECT age FROM people WHERE id = 1 INTERSECT SELECT 36"
        ),
        vec![int(1), int(36)]
    );
    match cluster
        .run("SELECT name AS who FROM people WHERE id = 1 UNION SELECT 'zed'")
        .unwrap()
    {
        StatementResult::Rows { columns, rows, .. } => {
            assert_eq!(columns[0].name, "who");
            assert_eq!(rows, vec![vec![text("ada")], vec![text("zed")]]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        cluster
            .error("SELECT age FROM people UNION SELECT name FROM people")
            .code,
        "42804"
    );
    assert_eq!(
        cluster
            .error("SELECT age, id FROM people UNION SELECT age FROM other")
            .code,
        "42601"
    );
    // ORDER BY and LIMIT apply to the whole set operation (NULLs first when descending).
    assert_eq!(
        ages(
            &mut cluster,
            "SELECT age FROM people UNION SELECT age FROM other ORDER BY 1 DESC LIMIT 2"
        ),
        vec![Value::Null, big(50)]
    );
}

/// Every isolation level is served as serializable, and SHOW says what is served (issue 21).
#[test]
fn every_isolation_level_is_served_and_shown_as_serializable() {
    let mut cluster = people(1);
    for sql in [
        "SET default_transaction_isolation = 'read committed'",
        "SET default_transaction_isolation TO 'READ UNCOMMITTED'",
        "SET transaction_isolation = 'repeatable read'",
        "SET TRANSACTION ISOLATION LEVEL READ COMMITTED",
    ] {
        assert_eq!(cluster.tag(sql), "SET", "{sql}");
        for setting in ["transaction_isolation", "default_transaction_isolation"] {
            assert_eq!(
                cluster.rows(&format!("SHOW {setting}")),
                vec![vec![text("serializable")]],
                "{sql}: {setting}"
            );
        }
    }
    assert_eq!(
        cluster
            .error("SET default_transaction_isolation = 'snapshot'")
            .code,
        "22023"
    );
}

#[test]
fn char_columns_are_blank_padded_and_length_checked_as_in_postgresql() {
    for partitions in [1, 3] {
        let mut cluster = people(partitions);
        cluster.tag(
            "CREATE TABLE codes (id INT PRIMARY KEY, state CHAR(2), zip CHARACTER(5), flag CHAR)",
        );
        cluster.tag("INSERT INTO codes VALUES (1, 'CA', '9', 'y'), (2, 'N', '123  ', NULL)");
        assert_eq!(
            cluster.rows("SELECT state, zip, flag FROM codes ORDER BY id"),
            vec![
                vec![text("CA"), text("9    "), text("y")],
                vec![text("N "), text("123  "), Value::Null],
            ]
        );
        // Beyond n: refused unless the excess is blanks (then cut), as PostgreSQL does.
        let error = cluster.error("INSERT INTO codes VALUES (3, 'CAL', '1', 'n')");
        assert_eq!(error.code, "22001");
        assert!(error.message.contains("character(2)"), "{}", error.message);
        cluster.tag("INSERT INTO codes VALUES (4, 'TX   ', '1', 'n')");
        assert_eq!(
            cluster.rows("SELECT state FROM codes WHERE id = 4"),
            vec![vec![text("TX")]]
        );
        cluster.tag("UPDATE codes SET state = 'W' WHERE id = 1");
        assert_eq!(
            cluster.rows("SELECT state FROM codes WHERE id = 1"),
            vec![vec![text("W ")]]
        );
        // The catalog reports bpchar with its length.
        assert_eq!(
            cluster.rows(
                "SELECT data_type, character_maximum_length FROM information_schema.columns \
                 WHERE table_name = 'codes' AND column_name = 'state'"
            ),
            vec![vec![text("character"), Value::Int(2)]]
        );
    }
}

/// DISTINCT ON keeps the first row of each value in the query's order (PostgreSQL's rule that
/// the leading ORDER BY keys be the DISTINCT ON keys, 42P10 otherwise); FETCH FIRST is LIMIT;
/// substring/substr cut characters as PostgreSQL does. Answers checked against PostgreSQL 15.
#[test]
fn distinct_on_fetch_first_and_substring() {
    let mut cluster = people(3);
    assert_eq!(
        cluster.rows("SELECT DISTINCT ON (age) age, name FROM people ORDER BY age, name DESC"),
        vec![
            vec![int(25), text("eve")],
            vec![int(36), text("ada")],
            vec![int(41), text("dee")],
            vec![Value::Null, text("cy")],
        ]
    );
    assert_eq!(
        cluster
            .rows("SELECT DISTINCT ON (city) city, id FROM people ORDER BY city, id DESC LIMIT 2"),
        vec![vec![text("london"), int(3)], vec![text("paris"), int(5)]]
    );
    assert_eq!(
        cluster.rows("SELECT DISTINCT ON (2) name, city FROM people ORDER BY city NULLS FIRST, id"),
        vec![
            vec![text("dee"), Value::Null],
            vec![text("ada"), text("london")],
            vec![text("bob"), text("paris")],
        ]
    );
    let error = cluster.error("SELECT DISTINCT ON (age) name FROM people ORDER BY name");
    assert_eq!(error.code, "42P10");
    assert_eq!(
        error.message,
        "SELECT DISTINCT ON expressions must match initial ORDER BY expressions"
    );
    assert_eq!(
        cluster.rows("SELECT id FROM people ORDER BY id FETCH FIRST 2 ROWS ONLY"),
        vec![vec![int(1)], vec![int(2)]]
    );
    assert_eq!(
        cluster.rows("SELECT id FROM people ORDER BY id OFFSET 3 ROWS FETCH NEXT ROW ONLY"),
        vec![vec![int(4)]]
    );
    assert_eq!(
        cluster
            .error("SELECT id FROM people ORDER BY id FETCH FIRST 2 ROWS WITH TIES")
            .code,
        "0A000"
    );
    assert_eq!(
        cluster.rows(
            "SELECT substring(name FROM 2 FOR 1), substring(name, 2), substr(name, 0, 2), \
             substring('hello' FROM -1 FOR 3), substr('héllo', 2, 2) FROM people WHERE id = 1"
        ),
        vec![vec![
            text("d"),
            text("da"),
            text("a"),
            text("h"),
            text("él")
        ]]
    );
    assert_eq!(
        cluster.rows("SELECT substring(NULL::text, 1, 2), substr('abc', NULL)"),
        vec![vec![Value::Null, Value::Null]]
    );
    assert_eq!(cluster.error("SELECT substr('abc', 1, -1)").code, "22011");
    assert_eq!(
        cluster.error("SELECT substring('abc' FROM 'b.')").code,
        "0A000"
    );
}

#[test]
fn distinct_on_is_refused_where_it_is_not_planned() {
    let mut cluster = people(1);
    let error = cluster
        .error("SELECT DISTINCT ON (age) age, row_number() OVER () FROM people ORDER BY age");
    assert_eq!(error.code, "0A000", "{error:?}");
}

#[test]
fn substring_in_update_set_is_refused_by_name() {
    let mut cluster = people(1);
    let error = cluster.error("UPDATE people SET name = substr(name, 1, 2) WHERE id = 1");
    assert_eq!(error.code, "0A000", "{error:?}");
}
