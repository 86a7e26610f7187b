//! INSERT … SELECT through parse, plan, K engines and the gateway's two steps (the SELECT's
//! execution, then one insert of its rows): answers, tags, RETURNING, defaults and the errors
//! PostgreSQL 15 gives for the same statements (compared with a real server).

use crate::tests::Cluster;
use crate::{SqlError, StatementResult};
use engine::Value;

fn int(value: i32) -> Value {
    Value::Int(value)
}

fn big(value: i64) -> Value {
    Value::BigInt(value)
}

fn text(value: &str) -> Value {
    Value::Text(value.to_string())
}

fn rows(cluster: &mut Cluster, sql: &str) -> Vec<Vec<Value>> {
    match cluster.run(sql) {
        Ok(StatementResult::Rows { rows, .. }) => rows,
        other => panic!("{sql}: {other:?}"),
    }
}

fn error(cluster: &mut Cluster, sql: &str) -> SqlError {
    match cluster.run(sql) {
        Err(error) => error,
        Ok(result) => panic!("{sql} should fail, answered {result:?}"),
    }
}

fn staff(partitions: usize) -> Cluster {
    let mut cluster = Cluster::new(partitions);
    cluster.tag("CREATE TABLE emp (id INT PRIMARY KEY, name TEXT, dept INT, salary BIGINT)");
    cluster.tag(
        "INSERT INTO emp VALUES (10, 'ada', 1, 100), (11, 'bob', 1, 90), (20, 'cy', 2, 80), \
         (30, 'dee', NULL, 70), (40, 'eve', 9, 60)",
    );
    cluster.tag("CREATE TABLE copy (id INT PRIMARY KEY, name TEXT, pay BIGINT DEFAULT 5)");
    cluster
}

#[test]
fn insert_select_inserts_the_rows_the_select_answers() {
    for partitions in [1, 3] {
        let mut cluster = staff(partitions);
        // RETURNING, a left-out column's DEFAULT, a function in the SELECT list.
        assert_eq!(
            rows(
                &mut cluster,
                "INSERT INTO copy (id, name) SELECT id, upper(name) FROM emp \
                 WHERE salary >= 80 RETURNING *"
            ),
            vec![
                vec![int(10), text("ADA"), big(5)],
                vec![int(11), text("BOB"), big(5)],
                vec![int(20), text("CY"), big(5)],
            ]
        );
        // A set operation with a constant query; the tag counts every partition's rows.
        assert_eq!(
            cluster.tag(
                "INSERT INTO copy SELECT id + 100, name, salary * 2 FROM emp WHERE dept = 1 \
                 UNION ALL SELECT 500, 'const', 7"
            ),
            "INSERT 0 3"
        );
        assert_eq!(
            rows(&mut cluster, "SELECT * FROM copy ORDER BY id"),
            vec![
                vec![int(10), text("ADA"), big(5)],
                vec![int(11), text("BOB"), big(5)],
                vec![int(20), text("CY"), big(5)],
                vec![int(110), text("ada"), big(200)],
                vec![int(111), text("bob"), big(180)],
                vec![int(500), text("const"), big(7)],
            ]
        );
        // No rows selected: INSERT 0 0, RETURNING nothing.
        assert_eq!(
            cluster.tag("INSERT INTO copy SELECT id FROM emp WHERE id > 1000"),
            "INSERT 0 0"
        );
        assert_eq!(
            rows(
                &mut cluster,
                "INSERT INTO copy SELECT id, name, 1 FROM emp WHERE false RETURNING id"
            ),
            Vec::<Vec<Value>>::new()
        );
        // Without a column list, fewer columns fill the first ones (the rest: defaults).
        assert_eq!(
            rows(
                &mut cluster,
                "INSERT INTO copy SELECT 7 RETURNING id, name, pay + 1"
            ),
            vec![vec![int(7), Value::Null, big(6)]]
        );
        // From a WITH query and a derived table.
        assert_eq!(
            cluster.tag(
                "INSERT INTO copy (id, pay) WITH d AS (SELECT dept, sum(salary) AS s FROM emp \
                 WHERE dept IS NOT NULL GROUP BY dept) SELECT dept + 1000, s FROM d"
            ),
            "INSERT 0 3"
        );
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT id, pay FROM copy WHERE id > 1000 ORDER BY id"
            ),
            vec![
                vec![int(1001), big(190)],
                vec![int(1002), big(80)],
                vec![int(1009), big(60)],
            ]
        );
    }
}

#[test]
fn insert_select_is_all_or_nothing_and_refuses_as_postgresql() {
    let mut cluster = staff(3);
    cluster.tag("INSERT INTO copy VALUES (10, 'old', 1)");
    // A duplicate key: 23505. (This test cluster runs partitions one by one; that nothing is
    // inserted on any partition is shown on a real cluster, `tests/sql_features.rs`.)
    let duplicate = error(
        &mut cluster,
        "INSERT INTO copy SELECT id, name, salary FROM emp WHERE id = 10",
    );
    assert_eq!(duplicate.code, "23505", "{duplicate}");
    let more = error(
        &mut cluster,
        "INSERT INTO copy (id) SELECT id, name FROM emp",
    );
    assert_eq!(
        (more.code, more.message.as_str()),
        ("42601", "INSERT has more expressions than target columns")
    );
    let fewer = error(
        &mut cluster,
        "INSERT INTO copy (id, name) SELECT id FROM emp",
    );
    assert_eq!(
        (fewer.code, fewer.message.as_str()),
        ("42601", "INSERT has more target columns than expressions")
    );
    assert_eq!(
        error(&mut cluster, "INSERT INTO nosuch SELECT 1").code,
        "42P01"
    );
    // A primary key given NULL by the SELECT: the engine's error.
    let null = error(
        &mut cluster,
        "INSERT INTO copy SELECT dept, name FROM emp WHERE dept IS NULL",
    );
    assert_eq!(null.code, "23502", "{null}");
    assert_eq!(
        rows(&mut cluster, "SELECT count(*) FROM copy"),
        vec![vec![big(1)]]
    );
}

#[test]
fn values_without_a_column_list_fill_the_first_columns() {
    for partitions in [1, 3] {
        let mut cluster = staff(partitions);
        assert_eq!(
            cluster.tag("INSERT INTO copy VALUES (1), (2)"),
            "INSERT 0 2"
        );
        assert_eq!(
            cluster.tag("INSERT INTO copy VALUES (3, 'c')"),
            "INSERT 0 1"
        );
        assert_eq!(
            rows(&mut cluster, "SELECT id, name, pay FROM copy ORDER BY id"),
            vec![
                vec![int(1), Value::Null, big(5)],
                vec![int(2), Value::Null, big(5)],
                vec![int(3), text("c"), big(5)],
            ]
        );
        // Left-out columns take their DEFAULT. As PostgreSQL: rows of different lengths, and too many values.
        let ragged = error(&mut cluster, "INSERT INTO copy VALUES (4), (5, 'e')");
        assert_eq!(
            (ragged.code, ragged.message.as_str()),
            ("42601", "VALUES lists must all be the same length")
        );
        let more = error(&mut cluster, "INSERT INTO copy VALUES (6, 'f', 1, 2)");
        assert_eq!(
            (more.code, more.message.as_str()),
            ("42601", "INSERT has more expressions than target columns")
        );
        let fewer = error(&mut cluster, "INSERT INTO copy (id, name) VALUES (7)");
        assert_eq!(
            (fewer.code, fewer.message.as_str()),
            ("42601", "INSERT has more target columns than expressions")
        );
    }
}
