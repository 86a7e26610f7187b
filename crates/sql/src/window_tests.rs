//! Window functions through parse, plan, K engines and the gateway: the answers PostgreSQL 15
//! gives for the same statements over the same rows (each expected answer below was printed by
//! `psql -At` against a real PostgreSQL 15), on one and several partitions, and PostgreSQL's
//! error codes for misuse.

use crate::tests::Cluster;
use crate::{SqlError, StatementResult};

/// Six employees (two paid alike, one without a department) and three departments.
fn staff(partitions: usize) -> Cluster {
    let mut cluster = Cluster::new(partitions);
    cluster.tag("CREATE TABLE emp (id INT PRIMARY KEY, name TEXT, dept INT, salary BIGINT)");
    cluster.tag(
        "INSERT INTO emp VALUES (10, 'ada', 1, 100), (11, 'bob', 1, 90), (20, 'cy', 2, 80), \
         (30, 'dee', NULL, 70), (40, 'eve', 9, 60), (50, 'fay', 1, 90)",
    );
    cluster.tag("CREATE TABLE depts (id INT PRIMARY KEY, title TEXT)");
    cluster.tag("INSERT INTO depts VALUES (1, 'eng'), (2, 'ops'), (9, 'law')");
    cluster
}

/// The rows as `psql -At` prints them: values joined by `|`, NULL empty.
fn lines(cluster: &mut Cluster, sql: &str) -> Vec<String> {
    match cluster.run(sql) {
        Ok(StatementResult::Rows { rows, .. }) => rows
            .iter()
            .map(|row| {
                row.iter()
                    .map(|value| crate::types::encode_text(value).unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join("|")
            })
            .collect(),
        other => panic!("{sql}: {other:?}"),
    }
}

fn error(cluster: &mut Cluster, sql: &str) -> SqlError {
    match cluster.run(sql) {
        Err(error) => error,
        Ok(result) => panic!("{sql} should fail, answered {result:?}"),
    }
}

const CASES: &[(&str, &[&str])] = &[
        (
            "SELECT id, row_number() OVER (ORDER BY salary DESC, id), rank() OVER (ORDER BY salary DESC), dense_rank() OVER (ORDER BY salary DESC) FROM emp ORDER BY id",
            &["10|1|1|1", "11|2|2|2", "20|4|4|3", "30|5|5|4", "40|6|6|5", "50|3|2|2"],
        ),
        (
            "SELECT id, dept, sum(salary) OVER (PARTITION BY dept ORDER BY salary), count(*) OVER (PARTITION BY dept), avg(salary::double precision) OVER (PARTITION BY dept) FROM emp ORDER BY id",
            &["10|1|280|3|93.33333333333333", "11|1|180|3|93.33333333333333", "20|2|80|1|80", "30||70|1|70", "40|9|60|1|60", "50|1|180|3|93.33333333333333"],
        ),
        (
            "SELECT id, lag(salary) OVER (ORDER BY id), lead(salary, 2, 0) OVER (ORDER BY id), lag(name, 1, 'none') OVER w FROM emp WINDOW w AS (ORDER BY id) ORDER BY id",
            &["10||80|none", "11|100|70|ada", "20|90|60|bob", "30|80|90|cy", "40|70|0|dee", "50|60|0|eve"],
        ),
        (
            "SELECT id, first_value(name) OVER w, last_value(name) OVER w, nth_value(name, 2) OVER w FROM emp WINDOW w AS (PARTITION BY dept ORDER BY salary ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) ORDER BY id",
            &["10|bob|ada|fay", "11|bob|ada|fay", "20|cy|cy|", "30|dee|dee|", "40|eve|eve|", "50|bob|ada|fay"],
        ),
        (
            "SELECT id, first_value(name) OVER w, last_value(name) OVER w FROM emp WINDOW w AS (ORDER BY salary) ORDER BY id",
            &["10|eve|ada", "11|eve|fay", "20|eve|cy", "30|eve|dee", "40|eve|eve", "50|eve|fay"],
        ),
        (
            "SELECT id, sum(salary) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING), min(salary) OVER (ORDER BY id ROWS 2 PRECEDING), max(salary) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING), count(dept) OVER (ORDER BY id ROWS BETWEEN 2 FOLLOWING AND 3 FOLLOWING) FROM emp ORDER BY id",
            &["10|190|100|100|1", "11|270|90|90|1", "20|240|80|90|2", "30|210|70|90|1", "40|220|60|90|0", "50|150|60|90|0"],
        ),
        (
            "SELECT dept, count(*), sum(count(*)) OVER (), rank() OVER (ORDER BY count(*) DESC) FROM emp GROUP BY dept ORDER BY dept",
            &["1|3|6|1", "2|1|6|2", "9|1|6|2", "|1|6|2"],
        ),
        (
            "SELECT name, salary FROM emp ORDER BY row_number() OVER (ORDER BY salary DESC, id) LIMIT 3",
            &["ada|100", "bob|90", "fay|90"],
        ),
        (
            "SELECT name, rank() OVER (ORDER BY salary) AS r FROM emp ORDER BY r DESC, name",
            &["ada|6", "bob|4", "fay|4", "cy|3", "dee|2", "eve|1"],
        ),
        (
            "SELECT id, ntile(4) OVER (ORDER BY id), percent_rank() OVER (ORDER BY salary), cume_dist() OVER (ORDER BY salary) FROM emp ORDER BY id",
            &["10|1|1|1", "11|1|0.6|0.8333333333333334", "20|2|0.4|0.5", "30|2|0.2|0.3333333333333333", "40|3|0|0.16666666666666666", "50|4|0.6|0.8333333333333334"],
        ),
        (
            "WITH d AS (SELECT dept, count(*) AS n FROM emp GROUP BY dept) SELECT dept, n, row_number() OVER (ORDER BY n DESC, dept) FROM d ORDER BY dept",
            &["1|3|1", "2|1|2", "9|1|3", "|1|4"],
        ),
        (
            "SELECT e.name, d.title, rank() OVER (PARTITION BY d.title ORDER BY e.salary DESC) FROM emp e JOIN depts d ON e.dept = d.id ORDER BY 1",
            &["ada|eng|1", "bob|eng|2", "cy|ops|1", "eve|law|1", "fay|eng|2"],
        ),
        (
            "SELECT DISTINCT dept, count(*) OVER (PARTITION BY dept) FROM emp ORDER BY 1",
            &["1|3", "2|1", "9|1", "|1"],
        ),
        (
            "SELECT *, row_number() OVER (ORDER BY id DESC) FROM emp ORDER BY id",
            &["10|ada|1|100|6", "11|bob|1|90|5", "20|cy|2|80|4", "30|dee||70|3", "40|eve|9|60|2", "50|fay|1|90|1"],
        ),
        (
            "SELECT id, row_number() OVER (ORDER BY id) FROM emp WHERE dept = 1 ORDER BY id",
            &["10|1", "11|2", "50|3"],
        ),
        (
            "SELECT id, sum(salary) OVER w2, rank() OVER w2 FROM emp WINDOW w1 AS (PARTITION BY dept), w2 AS (w1 ORDER BY salary) ORDER BY id",
            &["10|280|3", "11|180|1", "20|80|1", "30|70|1", "40|60|1", "50|180|1"],
        ),
        (
            "SELECT id, sum(salary) OVER (ORDER BY salary RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) FROM emp ORDER BY id",
            &["10|100", "11|280", "20|360", "30|430", "40|490", "50|280"],
        ),
        (
            "SELECT row_number() OVER ()",
            &["1"],
        ),
        (
            "SELECT id, salary - min(salary) OVER (PARTITION BY dept) AS over_min, CASE WHEN rank() OVER (ORDER BY salary DESC) <= 2 THEN 'top' ELSE 'rest' END AS band FROM emp ORDER BY id",
            &["10|10|top", "11|0|top", "20|0|rest", "30|0|rest", "40|0|rest", "50|0|top"],
        ),
        (
            "SELECT id, row_number() OVER (ORDER BY dept NULLS FIRST, id) FROM emp ORDER BY id",
            &["10|2", "11|3", "20|5", "30|1", "40|6", "50|4"],
        ),
        (
            "SELECT id, ntile(4) OVER (PARTITION BY dept ORDER BY id), lead(id, -1) OVER (PARTITION BY dept ORDER BY id) FROM emp ORDER BY id",
            &["10|1|", "11|2|10", "20|1|", "30|1|", "40|1|", "50|3|11"],
        ),
        (
            "SELECT count(*) OVER (), id FROM emp WHERE id > 100",
            &[],
        ),
        (
            "SELECT dept, sum(salary), sum(sum(salary)) OVER (ORDER BY dept) AS running FROM emp WHERE dept IS NOT NULL GROUP BY dept HAVING count(*) >= 1 ORDER BY running DESC",
            &["9|60|420", "2|80|360", "1|280|280"],
        ),
];

#[test]
fn window_functions_answer_as_postgresql() {
    for partitions in [1, 2, 5] {
        let mut cluster = staff(partitions);
        for (sql, expected) in CASES {
            assert_eq!(
                lines(&mut cluster, sql),
                *expected,
                "{sql} on {partitions} partitions"
            );
        }
    }
}

#[test]
fn window_result_columns_are_named_as_postgresql_names_them() {
    let mut cluster = staff(2);
    let columns = |cluster: &mut Cluster, sql: &str| match cluster.run(sql) {
        Ok(StatementResult::Rows { columns, .. }) => columns
            .into_iter()
            .map(|column| (column.name, column.data_type))
            .collect::<Vec<_>>(),
        other => panic!("{sql}: {other:?}"),
    };
    use engine::DataType;
    assert_eq!(
        columns(
            &mut cluster,
            "SELECT *, row_number() OVER (), rank() OVER () AS r, ntile(2) OVER (), \
             percent_rank() OVER (), id + 1 FROM emp"
        ),
        vec![
            ("id".to_string(), DataType::Int),
            ("name".to_string(), DataType::Text { length_max: None }),
            ("dept".to_string(), DataType::Int),
            ("salary".to_string(), DataType::BigInt),
            ("row_number".to_string(), DataType::BigInt),
            ("r".to_string(), DataType::BigInt),
            ("ntile".to_string(), DataType::Int),
            ("percent_rank".to_string(), DataType::Double),
            ("?column?".to_string(), DataType::Int),
        ]
    );
}

#[test]
fn window_misuse_fails_as_in_postgresql() {
    let mut cluster = staff(3);
    for (sql, code, message) in [
        (
            "SELECT id FROM emp WHERE row_number() OVER () > 1",
            "42P20",
            "window functions are not allowed in WHERE",
        ),
        (
            "SELECT id FROM emp GROUP BY id, row_number() OVER ()",
            "42P20",
            "window functions are not allowed in GROUP BY",
        ),
        (
            "SELECT dept FROM emp GROUP BY dept HAVING row_number() OVER () > 1",
            "42P20",
            "window functions are not allowed in HAVING",
        ),
        (
            "SELECT id, row_number(id) OVER () FROM emp",
            "42883",
            "function row_number(integer) does not exist",
        ),
        (
            "SELECT id, lower(name) OVER () FROM emp",
            "42809",
            "OVER specified, but lower is not a window function nor an aggregate function",
        ),
        (
            "SELECT sum(row_number() OVER ()) FROM emp",
            "42803",
            "aggregate function calls cannot contain window function calls",
        ),
        (
            "SELECT row_number() OVER (ORDER BY row_number() OVER ()) FROM emp",
            "42P20",
            "window functions are not allowed in window definitions",
        ),
        (
            "SELECT lag(row_number() OVER ()) OVER () FROM emp",
            "42P20",
            "window function calls cannot be nested",
        ),
        (
            "SELECT id, ntile(0) OVER () FROM emp",
            "22014",
            "argument of ntile must be greater than zero",
        ),
        (
            "SELECT id, nth_value(id, 0) OVER () FROM emp",
            "22016",
            "argument of nth_value must be greater than zero",
        ),
        (
            "SELECT id, count(DISTINCT id) OVER () FROM emp",
            "0A000",
            "DISTINCT is not implemented for window functions",
        ),
        (
            "SELECT id, rank() OVER w FROM emp",
            "42704",
            "window \"w\" does not exist",
        ),
        (
            "SELECT id, rank() OVER (w ORDER BY id) FROM emp WINDOW w AS (PARTITION BY dept ORDER BY id)",
            "42P20",
            "cannot override ORDER BY clause of window \"w\"",
        ),
        (
            "SELECT id, rank() OVER (w PARTITION BY id) FROM emp WINDOW w AS (PARTITION BY dept)",
            "42P20",
            "cannot override PARTITION BY clause of window \"w\"",
        ),
        (
            "SELECT id, rank() OVER (w) FROM emp WINDOW w AS (PARTITION BY dept ROWS UNBOUNDED PRECEDING)",
            "42P20",
            "cannot copy window \"w\" because it has a frame clause",
        ),
        (
            "SELECT id, rank() OVER w FROM emp WINDOW w AS (PARTITION BY dept), w AS (ORDER BY id)",
            "42P20",
            "window \"w\" is already defined",
        ),
        (
            "SELECT id, lag(name, 1, 0) OVER () FROM emp",
            "42883",
            "function lag(text, integer, integer) does not exist",
        ),
        (
            "SELECT id, sum(salary) OVER (ROWS BETWEEN CURRENT ROW AND 1 PRECEDING) FROM emp",
            "42P20",
            "frame starting from current row cannot have preceding rows",
        ),
        (
            "SELECT id, sum(salary) OVER (ROWS BETWEEN 1 FOLLOWING AND CURRENT ROW) FROM emp",
            "42P20",
            "frame starting from following row cannot have preceding rows",
        ),
        (
            "SELECT id, sum(salary) OVER (ROWS UNBOUNDED FOLLOWING) FROM emp",
            "42P20",
            "frame start cannot be UNBOUNDED FOLLOWING",
        ),
        (
            "SELECT id, sum(salary) OVER (ROWS BETWEEN CURRENT ROW AND UNBOUNDED PRECEDING) FROM emp",
            "42P20",
            "frame end cannot be UNBOUNDED PRECEDING",
        ),
        (
            "SELECT id, sum(salary) OVER (ROWS BETWEEN -1 PRECEDING AND CURRENT ROW) FROM emp",
            "22013",
            "frame starting offset must not be negative",
        ),
        (
            "SELECT id, sum(salary) OVER (ROWS BETWEEN CURRENT ROW AND -1 FOLLOWING) FROM emp",
            "22013",
            "frame ending offset must not be negative",
        ),
        (
            "SELECT id, sum(salary) OVER (ROWS BETWEEN NULL PRECEDING AND CURRENT ROW) FROM emp",
            "22004",
            "frame starting offset must not be null",
        ),
        (
            "SELECT id, sum(salary) OVER (ROWS BETWEEN id PRECEDING AND CURRENT ROW) FROM emp",
            "42P10",
            "argument of ROWS must not contain variables",
        ),
        (
            "SELECT id, sum(salary) OVER (ORDER BY id RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) FROM emp",
            "0A000",
            "RANGE with offset PRECEDING/FOLLOWING is not supported",
        ),
        (
            "SELECT id, sum(salary) OVER (ORDER BY id GROUPS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM emp",
            "0A000",
            "GROUPS frames in window functions is not supported",
        ),
        (
            "SELECT id, sum(name) OVER () FROM emp",
            "42883",
            "function sum(text) does not exist",
        ),
        (
            "SELECT id, row_number() OVER () FROM emp GROUP BY dept",
            "42803",
            "column \"id\" must appear in the GROUP BY clause or be used in an aggregate function",
        ),
    ] {
        let got = error(&mut cluster, sql);
        assert_eq!((got.code, got.message.as_str()), (code, message), "{sql}");
    }
}

#[test]
fn window_functions_in_prepared_statements_describe_their_columns() {
    let cluster = staff(2);
    let prepared = crate::prepare(
        "SELECT name, rank() OVER (PARTITION BY dept ORDER BY salary DESC) FROM emp WHERE id > $1",
        &cluster.catalog,
        &[],
    )
    .unwrap();
    assert_eq!(prepared.parameter_types, vec![engine::DataType::Int]);
    let names: Vec<&str> = prepared
        .columns
        .iter()
        .map(|column| column.name.as_str())
        .collect();
    assert_eq!(names, vec!["name", "rank"]);
}
