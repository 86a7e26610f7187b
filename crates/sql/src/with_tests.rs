//! Non-recursive WITH, derived tables (`FROM (SELECT …) AS s`) and ORDER BY / OFFSET / LIMIT
//! on UNION / INTERSECT / EXCEPT, through parse, plan, K engines and the gateway: the answers
//! and error codes PostgreSQL 15 gives (compared with a real server), for any number of
//! partitions.

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

fn columns(cluster: &mut Cluster, sql: &str) -> Vec<String> {
    match cluster.run(sql) {
        Ok(StatementResult::Rows { columns, .. }) => {
            columns.into_iter().map(|column| column.name).collect()
        }
        other => panic!("{sql}: {other:?}"),
    }
}

fn error(cluster: &mut Cluster, sql: &str) -> SqlError {
    match cluster.run(sql) {
        Err(error) => error,
        Ok(result) => panic!("{sql} should fail, answered {result:?}"),
    }
}

/// Five employees, one with a NULL department.
fn staff(partitions: usize) -> Cluster {
    let mut cluster = Cluster::new(partitions);
    cluster.tag("CREATE TABLE emp (id INT PRIMARY KEY, name TEXT, dept INT, salary BIGINT)");
    cluster.tag(
        "INSERT INTO emp VALUES (10, 'ada', 1, 100), (11, 'bob', 1, 90), (20, 'cy', 2, 80), \
         (30, 'dee', NULL, 70), (40, 'eve', 9, 60)",
    );
    cluster
}

#[test]
fn with_queries_answer_as_postgresql() {
    for partitions in [1, 3] {
        let mut cluster = staff(partitions);
        // Sorted by a column the main query does not project.
        assert_eq!(
            rows(
                &mut cluster,
                "WITH rich AS (SELECT name, salary FROM emp WHERE salary >= 80) \
                 SELECT name FROM rich ORDER BY salary"
            ),
            vec![vec![text("cy")], vec![text("bob")], vec![text("ada")]]
        );
        // Column names from the WITH list; WHERE and aggregates over the WITH query.
        assert_eq!(
            rows(
                &mut cluster,
                "WITH r(n, s) AS (SELECT name, salary FROM emp) \
                 SELECT count(*), sum(s) FROM r WHERE s > 65"
            ),
            vec![vec![big(4), big(340)]]
        );
        // Referenced twice, and one WITH query reading an earlier one.
        assert_eq!(
            rows(
                &mut cluster,
                "WITH a AS (SELECT id FROM emp WHERE id < 20), b AS (SELECT id FROM a WHERE id > 10) \
                 SELECT * FROM a UNION ALL SELECT * FROM b ORDER BY 1"
            ),
            vec![vec![int(10)], vec![int(11)], vec![int(11)]]
        );
        // A WITH query hides a table of the same name.
        assert_eq!(
            rows(
                &mut cluster,
                "WITH emp AS (SELECT 7 AS id) SELECT * FROM emp"
            ),
            vec![vec![int(7)]]
        );
        // A point read keeps its routing; grouping inside, filter outside.
        assert_eq!(
            rows(
                &mut cluster,
                "WITH d AS (SELECT dept, count(*) AS c FROM emp GROUP BY dept) \
                 SELECT dept, c FROM d WHERE c > 1"
            ),
            vec![vec![int(1), big(2)]]
        );
        assert_eq!(
            rows(
                &mut cluster,
                "WITH one AS (SELECT name FROM emp WHERE id = 20) SELECT upper(name) FROM one"
            ),
            vec![vec![text("CY")]]
        );
    }
}

#[test]
fn with_query_errors_are_postgresql_s() {
    let mut cluster = staff(2);
    let recursive = error(
        &mut cluster,
        "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 3) \
         SELECT * FROM t",
    );
    assert_eq!(recursive.code, "0A000");
    assert!(recursive.message.contains("WITH RECURSIVE"), "{recursive}");
    let twice = error(
        &mut cluster,
        "WITH a AS (SELECT 1), a AS (SELECT 2) SELECT 1",
    );
    assert_eq!(
        (twice.code, twice.message.as_str()),
        ("42712", "WITH query name \"a\" specified more than once")
    );
    let wide = error(&mut cluster, "WITH a(x, y) AS (SELECT 1) SELECT 1");
    assert_eq!(
        (wide.code, wide.message.as_str()),
        (
            "42P10",
            "WITH query \"a\" has 1 columns available but 2 columns specified"
        )
    );
    // Planned even when not referenced.
    assert_eq!(
        error(&mut cluster, "WITH a AS (SELECT * FROM nosuch) SELECT 1").code,
        "42P01"
    );
    // Not itself: a non-recursive WITH query cannot name itself.
    assert_eq!(
        error(&mut cluster, "WITH t AS (SELECT * FROM t) SELECT * FROM t").code,
        "42P01"
    );
    // A WITH query in a join is a derived table, read once per reference.
    assert_eq!(
        rows(
            &mut cluster,
            "WITH t AS (SELECT 1 AS x) SELECT * FROM t a, t b"
        ),
        [vec![int(1), int(1)]]
    );
    // Not built: WITH queries seen from subqueries in expressions, data-modifying WITH.
    assert_eq!(
        error(
            &mut cluster,
            "WITH a AS (SELECT id FROM emp) SELECT 1 WHERE 10 IN (SELECT id FROM a)"
        )
        .code,
        "42P01"
    );
    assert_eq!(
        error(
            &mut cluster,
            "WITH x AS (INSERT INTO emp VALUES (1) RETURNING id) SELECT * FROM x"
        )
        .code,
        "0A000"
    );
    // MATERIALIZED changes nothing observable: every reference reads in the same batch.
    assert_eq!(
        rows(
            &mut cluster,
            "WITH m AS MATERIALIZED (SELECT count(*) AS c FROM emp) SELECT c FROM m"
        ),
        vec![vec![big(5)]]
    );
}

#[test]
fn derived_tables_answer_as_postgresql() {
    for partitions in [1, 4] {
        let mut cluster = staff(partitions);
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT * FROM (SELECT dept, count(*) AS c FROM emp GROUP BY dept) s WHERE c > 1"
            ),
            vec![vec![int(1), big(2)]]
        );
        assert_eq!(
            columns(
                &mut cluster,
                "SELECT * FROM (SELECT id, name FROM emp) AS s(x) LIMIT 1"
            ),
            vec!["x", "name"]
        );
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT s.x FROM (SELECT id, name FROM emp) AS s(x) ORDER BY x DESC LIMIT 2"
            ),
            vec![vec![int(40)], vec![int(30)]]
        );
        // Nested, with LIMIT inside and an aggregate outside.
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT max(n) FROM (SELECT name AS n FROM (SELECT * FROM emp ORDER BY salary \
                 LIMIT 3) t) u"
            ),
            vec![vec![text("eve")]]
        );
        assert_eq!(
            rows(&mut cluster, "SELECT * FROM (SELECT id FROM emp) s LIMIT 0"),
            Vec::<Vec<Value>>::new()
        );
        // A derived set operation.
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT count(*) FROM (SELECT dept FROM emp UNION SELECT 1) AS u"
            ),
            vec![vec![big(4)]]
        );
        // A scalar subquery in the outer query still reads its table.
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT name FROM (SELECT name, salary FROM emp) s \
                 WHERE salary = (SELECT max(salary) FROM emp)"
            ),
            vec![vec![text("ada")]]
        );
    }
    let mut cluster = staff(2);
    let wide = error(&mut cluster, "SELECT * FROM (SELECT 1) AS s(a, b)");
    assert_eq!(
        (wide.code, wide.message.as_str()),
        (
            "42P10",
            "table \"s\" has 1 columns available but 2 columns specified"
        )
    );
    let bare = error(&mut cluster, "SELECT * FROM (SELECT 1)");
    assert_eq!(
        (bare.code, bare.message.as_str()),
        ("42601", "subquery in FROM must have an alias")
    );
    assert_eq!(
        error(&mut cluster, "SELECT * FROM emp, LATERAL (SELECT emp.id) s").code,
        "0A000"
    );
}

#[test]
fn set_operations_take_order_by_offset_and_limit() {
    for partitions in [1, 3] {
        let mut cluster = staff(partitions);
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT id FROM emp WHERE id < 20 UNION SELECT dept FROM emp \
                 ORDER BY id DESC LIMIT 3 OFFSET 1"
            ),
            vec![vec![int(11)], vec![int(10)], vec![int(9)]]
        );
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT id FROM emp UNION SELECT dept FROM emp ORDER BY 1 NULLS FIRST LIMIT 2"
            ),
            vec![vec![Value::Null], vec![int(1)]]
        );
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT id AS k FROM emp INTERSECT ALL SELECT 10 ORDER BY k"
            ),
            vec![vec![int(10)]]
        );
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT name FROM emp EXCEPT SELECT 'bob' ORDER BY name DESC OFFSET 2"
            ),
            vec![vec![text("cy")], vec![text("ada")]]
        );
        // Parenthesised queries keep their own ORDER BY and LIMIT.
        assert_eq!(
            rows(
                &mut cluster,
                "(SELECT name FROM emp ORDER BY salary DESC LIMIT 1) UNION ALL \
                 (SELECT name FROM emp ORDER BY salary LIMIT 1)"
            ),
            vec![vec![text("ada")], vec![text("eve")]]
        );
    }
    let mut cluster = staff(2);
    let expression = error(
        &mut cluster,
        "SELECT id FROM emp UNION SELECT dept FROM emp ORDER BY id + 1",
    );
    assert_eq!(
        (expression.code, expression.message.as_str()),
        ("0A000", "invalid UNION/INTERSECT/EXCEPT ORDER BY clause")
    );
    assert_eq!(
        error(
            &mut cluster,
            "SELECT id FROM emp UNION SELECT dept FROM emp ORDER BY nosuch"
        )
        .code,
        "42703"
    );
    assert_eq!(
        error(
            &mut cluster,
            "SELECT id FROM emp UNION SELECT dept FROM emp ORDER BY 5"
        )
        .code,
        "42P10"
    );
}

#[test]
fn a_null_literal_in_a_set_operation_takes_the_other_query_s_type() {
    for partitions in [1, 3] {
        let mut cluster = staff(partitions);
        // PostgreSQL's `unknown` NULL: it used to be TEXT and fail with 42804.
        assert_eq!(
            rows(&mut cluster, "SELECT 1 UNION SELECT NULL ORDER BY 1"),
            vec![vec![int(1)], vec![Value::Null]]
        );
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT id, NULL FROM emp WHERE id = 10 UNION ALL SELECT NULL, salary FROM emp \
                 WHERE id = 11 ORDER BY 1"
            ),
            vec![vec![int(10), Value::Null], vec![Value::Null, big(90)]]
        );
        let StatementResult::Rows { columns, .. } = cluster
            .run("SELECT NULL AS x UNION SELECT salary FROM emp")
            .unwrap()
        else {
            panic!("rows")
        };
        assert_eq!(columns[0].name, "x");
        assert_eq!(columns[0].data_type, engine::DataType::BigInt);
        assert_eq!(
            rows(&mut cluster, "SELECT NULL UNION SELECT NULL"),
            vec![vec![Value::Null]]
        );
        // Two typed queries still have to match.
        assert_eq!(
            error(&mut cluster, "SELECT 1 UNION SELECT 'a'::text").code,
            "42804"
        );
    }
}
