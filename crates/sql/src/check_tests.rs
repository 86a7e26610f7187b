//! CHECK constraints through parse, plan, K engines and the gateway merge: names, definitions
//! and errors as PostgreSQL 15 gives them for the same statements (compared by hand with a
//! PostgreSQL 15 server; `crates/tessera/tests/sql_check.rs` compares psql's output live).

use crate::plan::Plan;
use crate::tests::Cluster;
use crate::{parse, plan_statement, SqlError, StatementResult};
use engine::Value;

fn rows(cluster: &mut Cluster, sql: &str) -> Vec<Vec<Value>> {
    match cluster.run(sql) {
        Ok(StatementResult::Rows { rows, .. }) => rows,
        other => panic!("{sql}: {other:?}"),
    }
}

fn error(cluster: &mut Cluster, sql: &str) -> SqlError {
    match cluster.run(sql) {
        Err(error) => error,
        Ok(result) => panic!("{sql}: expected an error, got {result:?}"),
    }
}

fn tag(cluster: &mut Cluster, sql: &str) -> String {
    match cluster.run(sql) {
        Ok(StatementResult::Command { tag }) | Ok(StatementResult::Rows { tag, .. }) => tag,
        Err(error) => panic!("{sql}: {error:?}"),
    }
}

fn text(value: &str) -> Value {
    Value::Text(value.to_string())
}

/// The table's CHECK constraints as psql's `\d` reads them (name, pretty definition).
fn described(cluster: &mut Cluster, table: &str) -> Vec<(String, String)> {
    let oid = match rows(
        cluster,
        &format!("SELECT oid FROM pg_catalog.pg_class WHERE relname = '{table}'"),
    )
    .as_slice()
    {
        [row] => row[0].clone(),
        other => panic!("no single oid: {other:?}"),
    };
    let oid = engine::value::text_output(&oid).unwrap();
    rows(
        cluster,
        &format!(
            "SELECT r.conname, pg_catalog.pg_get_constraintdef(r.oid, true)\n\
             FROM pg_catalog.pg_constraint r\n\
             WHERE r.conrelid = '{oid}' AND r.contype = 'c'\nORDER BY 1;"
        ),
    )
    .into_iter()
    .map(|row| match row.as_slice() {
        [Value::Text(name), Value::Text(definition)] => (name.clone(), definition.clone()),
        other => panic!("{other:?}"),
    })
    .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(name, definition)| (name.to_string(), definition.to_string()))
        .collect()
}

/// The CREATE TABLE of the PostgreSQL 15 comparison.
const CREATE: &str = "CREATE TABLE t (id INT PRIMARY KEY, n INT CHECK (n > 0), s TEXT, \
    b BIGINT, x NUMERIC(5,2), CHECK (n < b), CONSTRAINT named CHECK (s <> ''), \
    CHECK (n IN (1, 2, 3)), CHECK (n BETWEEN 1 AND 10), CHECK ((n + b) * 2 > 0 OR s IS NULL), \
    CHECK (lower(s) = s), CHECK (x > -1.5 AND n > -5), CHECK (NOT (n = 7)), \
    CHECK (coalesce(n, 0) >= 0))";

#[test]
fn checks_are_named_and_printed_as_postgresql_names_and_prints_them() {
    let mut cluster = Cluster::new(3);
    tag(&mut cluster, CREATE);
    // PostgreSQL 15's `\d t` lists exactly these (by name).
    assert_eq!(
        described(&mut cluster, "t"),
        pairs(&[
            ("named", "CHECK (s <> ''::text)"),
            ("t_check", "CHECK (n < b)"),
            ("t_check1", "CHECK (((n + b) * 2) > 0 OR s IS NULL)"),
            (
                "t_check2",
                "CHECK (x > '-1.5'::numeric AND n > '-5'::integer)"
            ),
            ("t_n_check", "CHECK (n > 0)"),
            ("t_n_check1", "CHECK (n = ANY (ARRAY[1, 2, 3]))"),
            ("t_n_check2", "CHECK (n >= 1 AND n <= 10)"),
            ("t_n_check3", "CHECK (NOT n = 7)"),
            ("t_n_check4", "CHECK (COALESCE(n, 0) >= 0)"),
            ("t_s_check", "CHECK (lower(s) = s)"),
        ])
    );
    // Without `pretty`, as SQLAlchemy reads them, and information_schema.
    let plain = rows(
        &mut cluster,
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint \
         WHERE contype = 'c' AND conname IN ('t_check1', 't_n_check2', 't_n_check3') ORDER BY 1",
    );
    assert_eq!(
        plain,
        vec![
            vec![
                text("t_check1"),
                text("CHECK (((((n + b) * 2) > 0) OR (s IS NULL)))")
            ],
            vec![text("t_n_check2"), text("CHECK (((n >= 1) AND (n <= 10)))")],
            vec![text("t_n_check3"), text("CHECK ((NOT (n = 7)))")],
        ]
    );
    let clause = rows(
        &mut cluster,
        "SELECT check_clause FROM information_schema.check_constraints \
         WHERE constraint_name = 't_n_check'",
    );
    assert_eq!(clause, vec![vec![text("((n > 0))")]]);
    let kinds = rows(
        &mut cluster,
        "SELECT constraint_type, count(*) FROM information_schema.table_constraints \
         WHERE table_name = 't' GROUP BY constraint_type ORDER BY 1",
    );
    assert_eq!(
        kinds,
        vec![
            vec![text("CHECK"), Value::BigInt(10)],
            vec![text("PRIMARY KEY"), Value::BigInt(1)]
        ]
    );
    // psql's `\d` shows "Check constraints:" only when pg_class.relchecks is above 0.
    assert_eq!(
        rows(
            &mut cluster,
            "SELECT relchecks FROM pg_class WHERE relname = 't'"
        ),
        vec![vec![Value::Int(10)]]
    );
}

#[test]
fn a_row_failing_a_check_is_refused_with_postgresqls_error_and_null_passes() {
    let mut cluster = Cluster::new(3);
    tag(&mut cluster, CREATE);
    let failed = error(
        &mut cluster,
        "INSERT INTO t VALUES (1, -5, 'a', 1, 1), (2, 1, 'b', 5, 1)",
    );
    assert_eq!(failed.code, "23514");
    // Checked in name order: "named" and t_check (n < b) hold, t_check1 does not (so do
    // t_check2 and t_n_check, later in the order).
    assert_eq!(
        failed.message,
        "new row for relation \"t\" violates check constraint \"t_check1\""
    );
    assert_eq!(
        failed.detail.as_deref(),
        Some("Failing row contains (1, -5, a, 1, 1.00).")
    );
    assert_eq!(
        tag(
            &mut cluster,
            "INSERT INTO t (id, n, b) VALUES (3, NULL, NULL)"
        ),
        "INSERT 0 1"
    );
    assert!(rows(&mut cluster, "SELECT id FROM t WHERE id <> 3").is_empty());
}

#[test]
fn updates_upserts_and_insert_select_are_checked_and_fail_whole_across_partitions() {
    let mut cluster = Cluster::new(3);
    tag(
        &mut cluster,
        "CREATE TABLE t (id INT PRIMARY KEY, n INT CONSTRAINT positive CHECK (n > 0))",
    );
    tag(
        &mut cluster,
        "INSERT INTO t SELECT 1, 1 UNION ALL SELECT 2, 2 UNION ALL SELECT 3, 3 \
         UNION ALL SELECT 4, 4 UNION ALL SELECT 5, 5 UNION ALL SELECT 6, 6",
    );
    let before = rows(&mut cluster, "SELECT id, n FROM t ORDER BY id");
    assert_eq!(before.len(), 6);
    // A constant SET that one partition's row fails (n = 3 - 3).
    let failed = error(&mut cluster, "UPDATE t SET n = n - 3");
    assert_eq!(
        (failed.code, failed.message.as_str()),
        (
            "23514",
            "new row for relation \"t\" violates check constraint \"positive\""
        )
    );
    let failed = error(&mut cluster, "UPDATE t SET n = 0 WHERE id = 4");
    assert_eq!(
        failed.detail.as_deref(),
        Some("Failing row contains (4, 0).")
    );
    let failed = error(&mut cluster, "UPDATE t SET n = -1");
    assert_eq!(failed.code, "23514");
    assert_eq!(
        rows(&mut cluster, "SELECT id, n FROM t ORDER BY id"),
        before
    );
    // ON CONFLICT DO UPDATE: the updated row; DO NOTHING: the proposed row (PostgreSQL
    // checks it before looking for a conflict).
    let failed = error(
        &mut cluster,
        "INSERT INTO t VALUES (7, 7), (2, 9) ON CONFLICT (id) DO UPDATE SET n = -3",
    );
    assert_eq!(
        failed.detail.as_deref(),
        Some("Failing row contains (2, -3).")
    );
    let failed = error(
        &mut cluster,
        "INSERT INTO t VALUES (7, 7), (2, -9) ON CONFLICT (id) DO NOTHING",
    );
    assert_eq!(
        failed.detail.as_deref(),
        Some("Failing row contains (2, -9).")
    );
    let failed = error(
        &mut cluster,
        "INSERT INTO t VALUES (1, 8), (2, 9) ON CONFLICT (id) DO UPDATE SET n = excluded.n - 10",
    );
    assert_eq!(failed.code, "23514");
    let failed = error(&mut cluster, "INSERT INTO t SELECT id + 10, n - 3 FROM t");
    assert_eq!(failed.code, "23514");
    assert_eq!(
        rows(&mut cluster, "SELECT id, n FROM t ORDER BY id"),
        before
    );
    assert_eq!(
        tag(
            &mut cluster,
            "INSERT INTO t VALUES (2, 1) ON CONFLICT (id) DO UPDATE SET n = excluded.n + 20"
        ),
        "INSERT 0 1"
    );
    assert_eq!(tag(&mut cluster, "UPDATE t SET n = n + 1"), "UPDATE 6");
}

#[test]
fn checks_that_replicas_could_disagree_on_or_that_are_not_boolean_are_refused() {
    let mut cluster = Cluster::new(1);
    tag(&mut cluster, "CREATE SEQUENCE s");
    for (sql, code) in [
        ("CREATE TABLE w (a TIMESTAMPTZ CHECK (a < now()))", "0A000"),
        ("CREATE TABLE w (a DATE CHECK (a < current_date))", "0A000"),
        ("CREATE TABLE w (a INT CHECK (a < nextval('s')))", "0A000"),
        (
            "CREATE TABLE w (a UUID CHECK (a <> gen_random_uuid()))",
            "0A000",
        ),
        ("CREATE TABLE w (a INT CHECK (a + 1))", "42804"),
        ("CREATE TABLE w (a INT CHECK (b > 0))", "42703"),
        (
            "CREATE TABLE w (a INT, CONSTRAINT c CHECK (a > 0), CONSTRAINT c CHECK (a > 1))",
            "42710",
        ),
    ] {
        assert_eq!(error(&mut cluster, sql).code, code, "{sql}");
    }
    assert_eq!(
        error(&mut cluster, "CREATE TABLE w (a INT CHECK (a + 1))").message,
        "argument of CHECK must be type boolean, not type integer"
    );
    assert!(rows(
        &mut cluster,
        "SELECT relname FROM pg_class WHERE relname = 'w'"
    )
    .is_empty());
}

#[test]
fn add_constraint_is_validated_on_every_partition_and_drop_constraint_removes_it() {
    let mut cluster = Cluster::new(3);
    tag(&mut cluster, "CREATE TABLE t (id INT PRIMARY KEY, n INT)");
    tag(
        &mut cluster,
        "INSERT INTO t VALUES (1, 10), (2, 20), (3, NULL), (4, 40), (5, 50), (6, -60)",
    );
    let violated = error(&mut cluster, "ALTER TABLE t ADD CONSTRAINT c CHECK (n > 0)");
    assert_eq!(
        (violated.code, violated.message.as_str()),
        (
            "23514",
            "check constraint \"c\" of relation \"t\" is violated by some row"
        )
    );
    assert!(
        described(&mut cluster, "t").is_empty(),
        "no partition kept it"
    );
    tag(&mut cluster, "DELETE FROM t WHERE id = 6");
    assert_eq!(
        tag(&mut cluster, "ALTER TABLE t ADD CONSTRAINT c CHECK (n > 0)"),
        "ALTER TABLE"
    );
    assert_eq!(
        tag(&mut cluster, "ALTER TABLE t ADD CHECK (n < 100)"),
        "ALTER TABLE"
    );
    assert_eq!(
        tag(&mut cluster, "ALTER TABLE t ADD CHECK (n < 100)"),
        "ALTER TABLE"
    );
    assert_eq!(
        described(&mut cluster, "t"),
        pairs(&[
            ("c", "CHECK (n > 0)"),
            ("t_n_check", "CHECK (n < 100)"),
            ("t_n_check1", "CHECK (n < 100)"),
        ])
    );
    let taken = error(&mut cluster, "ALTER TABLE t ADD CONSTRAINT c CHECK (n > 1)");
    assert_eq!(
        (taken.code, taken.message.as_str()),
        (
            "42710",
            "constraint \"c\" for relation \"t\" already exists"
        )
    );
    let failed = error(&mut cluster, "INSERT INTO t VALUES (7, 0)");
    assert_eq!(
        failed.message,
        "new row for relation \"t\" violates check constraint \"c\""
    );
    let missing = error(&mut cluster, "ALTER TABLE t DROP CONSTRAINT nope");
    assert_eq!(
        (missing.code, missing.message.as_str()),
        (
            "42704",
            "constraint \"nope\" of relation \"t\" does not exist"
        )
    );
    let statement = parse("ALTER TABLE t DROP CONSTRAINT IF EXISTS nope")
        .unwrap()
        .pop()
        .unwrap();
    let Plan::Execute(execution) = plan_statement(&statement, &cluster.catalog).unwrap() else {
        panic!("not an execution");
    };
    assert_eq!(
        execution.notices[0].message,
        "constraint \"nope\" of relation \"t\" does not exist, skipping"
    );
    assert!(execution.operations.is_empty());
    tag(&mut cluster, "ALTER TABLE t DROP CONSTRAINT c");
    assert_eq!(
        tag(&mut cluster, "INSERT INTO t VALUES (7, 0)"),
        "INSERT 0 1"
    );
    // RENAME COLUMN follows into the checks; DROP COLUMN drops them, as in PostgreSQL.
    tag(&mut cluster, "ALTER TABLE t RENAME COLUMN n TO m");
    assert_eq!(
        described(&mut cluster, "t"),
        pairs(&[
            ("t_n_check", "CHECK (m < 100)"),
            ("t_n_check1", "CHECK (m < 100)"),
        ])
    );
    assert_eq!(error(&mut cluster, "UPDATE t SET m = 100").code, "23514");
    tag(&mut cluster, "ALTER TABLE t DROP COLUMN m");
    assert!(described(&mut cluster, "t").is_empty());
    // Consistent refusals: UNIQUE, FOREIGN KEY and NOT VALID are 0A000, as at CREATE TABLE.
    for sql in [
        "ALTER TABLE t ADD CONSTRAINT u UNIQUE (id)",
        "ALTER TABLE t ADD CONSTRAINT f FOREIGN KEY (id) REFERENCES t (id)",
        "ALTER TABLE t ADD CONSTRAINT v CHECK (id > 0) NOT VALID",
        "ALTER TABLE t DROP CONSTRAINT t_pkey",
    ] {
        assert_eq!(error(&mut cluster, sql).code, "0A000", "{sql}");
    }
}

#[test]
fn copy_checks_every_row_and_writes_none_when_one_fails() {
    let mut cluster = Cluster::new(3);
    tag(
        &mut cluster,
        "CREATE TABLE t (id INT PRIMARY KEY, n INT CHECK (n > 0))",
    );
    let failed = cluster
        .copy("COPY t FROM STDIN", "1\t1\n2\t2\n3\t-3\n4\t4\n")
        .unwrap_err();
    assert_eq!(failed.code, "23514");
    assert_eq!(
        failed.detail.as_deref(),
        Some("Failing row contains (3, -3).")
    );
    assert!(rows(&mut cluster, "SELECT id FROM t").is_empty());
    cluster.copy("COPY t FROM STDIN", "1\t1\n2\t\\N\n").unwrap();
    assert_eq!(
        rows(&mut cluster, "SELECT count(*) FROM t"),
        vec![vec![Value::BigInt(2)]]
    );
}
