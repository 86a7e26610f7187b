//! Derived tables, views, WITH queries and `generate_series` inside joins (issue 20): through
//! parse, plan, K engines and the gateway, each statement answers what PostgreSQL 15 answered
//! for it (recorded with psql -At against a real server: rows as psql prints them, errors as
//! their SQLSTATE), for one and three partitions.

use crate::tests::Cluster;
use crate::StatementResult;

/// A statement's answer as `psql -At` prints it (values joined by `|`, NULL empty, one row a
/// line), or `ERROR:  <sqlstate>`.
pub(crate) fn psql_text(cluster: &mut Cluster, sql: &str) -> String {
    match cluster.run_sequenced(sql) {
        Ok(StatementResult::Rows { rows, .. }) => rows
            .iter()
            .map(|row| {
                row.iter()
                    .map(|value| crate::types::encode_text(value).unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join("|")
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Ok(StatementResult::Command { tag }) => tag,
        Err(error) => format!("ERROR:  {}", error.code),
    }
}

/// Runs the setup, then compares every case with PostgreSQL's answer.
pub(crate) fn compare(partitions: usize, setup: &[&str], cases: &[(&str, &str)]) {
    let mut cluster = Cluster::new(partitions);
    for sql in setup {
        cluster.tag(sql);
    }
    for (sql, expected) in cases {
        assert_eq!(
            psql_text(&mut cluster, sql),
            *expected,
            "{sql} on {partitions} partitions"
        );
    }
}

const SETUP: &[&str] = &[
    "CREATE TABLE dept (id INT PRIMARY KEY, name TEXT, boss INT)",
    "CREATE TABLE emp (id INT PRIMARY KEY, name TEXT, dept INT, salary BIGINT)",
    "INSERT INTO dept VALUES (1, 'eng', 10), (2, 'ops', 20), (3, 'empty', NULL), (4, 'art', 10)",
    "INSERT INTO emp VALUES (10, 'ada', 1, 100), (11, 'bob', 1, 90), (20, 'cy', 2, 80), (30, 'dee', NULL, 70), (40, 'eve', 9, 60)",
    "CREATE VIEW rich AS SELECT id, name, dept FROM emp WHERE salary >= 80",
];

/// Recorded from PostgreSQL 15.18.
const POSTGRESQL_15: &[(&str, &str)] = &[
    ("SELECT d.name, s.total FROM dept d JOIN (SELECT dept, sum(salary) AS total FROM emp GROUP BY dept) AS s ON s.dept = d.id ORDER BY d.name", "eng|190
ops|80"),
    ("SELECT d.name, s.total FROM dept d LEFT JOIN (SELECT dept, sum(salary) AS total FROM emp GROUP BY dept) s ON s.dept = d.id ORDER BY d.id", "eng|190
ops|80
empty|
art|"),
    ("SELECT d.name, s.n FROM (SELECT dept, count(*) AS n FROM emp GROUP BY dept) s RIGHT JOIN dept d ON d.id = s.dept ORDER BY d.id", "eng|2
ops|1
empty|
art|"),
    ("SELECT a.x, b.y FROM (SELECT id AS x FROM dept WHERE id < 3) a, (SELECT id AS y FROM emp WHERE salary > 85) b WHERE b.y > a.x ORDER BY 1, 2", "1|10
1|11
2|10
2|11"),
    ("SELECT r.name, d.name FROM rich r JOIN dept d ON d.id = r.dept ORDER BY r.id", "ada|eng
bob|eng
cy|ops"),
    ("SELECT d.name, count(r.id) FROM dept d LEFT JOIN rich r ON r.dept = d.id GROUP BY d.name ORDER BY d.name", "art|0
empty|0
eng|2
ops|1"),
    ("SELECT * FROM rich JOIN dept USING (name) ORDER BY 1", ""),
    ("SELECT e.name, top.m FROM emp e JOIN (SELECT max(salary) AS m FROM emp) top ON e.salary = top.m", "ada|100"),
    ("SELECT e.name FROM emp e, (SELECT avg(salary) AS a FROM emp) s WHERE e.salary > s.a ORDER BY e.name", "ada
bob"),
    ("SELECT s.k, s.v, d.name FROM (VALUES (1, 'one'), (2, 'two')) AS s (k, v) JOIN dept d ON d.id = s.k ORDER BY 1", "1|one|eng
2|two|ops"),
    ("SELECT c.n, d.name FROM (SELECT 2 AS n) c JOIN dept d ON d.id = c.n", "2|ops"),
    ("SELECT * FROM (SELECT id FROM dept) x JOIN (SELECT id FROM emp) x ON true", "ERROR:  42712"),
    ("SELECT * FROM dept d JOIN (SELECT id FROM emp) ON true", "ERROR:  42601"),
    ("SELECT u.id, d.name FROM (SELECT id FROM emp WHERE id < 15 UNION SELECT boss FROM dept) u LEFT JOIN dept d ON d.boss = u.id ORDER BY 1, 2", "10|art
10|eng
11|
20|ops
|"),
    ("WITH big AS (SELECT dept, sum(salary) AS total FROM emp GROUP BY dept) SELECT d.name, big.total FROM big JOIN dept d ON d.id = big.dept WHERE big.total > 50 ORDER BY 2 DESC", "eng|190
ops|80"),
    ("WITH a AS (SELECT id FROM dept), b AS (SELECT dept FROM emp) SELECT a.id, count(b.dept) FROM a LEFT JOIN b ON b.dept = a.id GROUP BY a.id ORDER BY a.id", "1|2
2|1
3|0
4|0"),
    ("SELECT d.name, w.rk FROM dept d JOIN (SELECT dept, rank() OVER (ORDER BY salary DESC) AS rk FROM emp) w ON w.dept = d.id ORDER BY 2", "eng|1
eng|2
ops|3"),
    ("SELECT x.id, x.dept FROM (SELECT id, dept FROM emp ORDER BY salary LIMIT 2) x JOIN dept ON dept.id = x.dept", ""),
    ("SELECT * FROM dept AS d (i, n) JOIN emp ON emp.dept = d.i WHERE n = 'ops'", "2|ops|20|20|cy|2|80"),
    ("SELECT * FROM dept AS d (i, n, b, z) JOIN emp ON true", "ERROR:  42P10"),
    ("SELECT g, d.name FROM generate_series(1, 5) g LEFT JOIN dept d ON d.id = g ORDER BY g", "1|eng
2|ops
3|empty
4|art
5|"),
    ("SELECT g.n FROM generate_series(10, 1, -3) AS g (n)", "10
7
4
1"),
    ("SELECT * FROM generate_series(1, 3) a CROSS JOIN generate_series(1, 2) b ORDER BY 1, 2", "1|1
1|2
2|1
2|2
3|1
3|2"),
    ("SELECT count(*) FROM generate_series(1, 100000)", "100000"),
    ("SELECT * FROM generate_series(1, 3, 0)", "ERROR:  22023"),
    ("SELECT * FROM generate_series('2024-01-30'::timestamp, '2024-04-01', '1 month')", "2024-01-30 00:00:00
2024-02-29 00:00:00
2024-03-29 00:00:00"),
    ("SELECT * FROM generate_series('2024-01-01'::date, '2024-01-03'::date, '1 day')", "2024-01-01 00:00:00+00
2024-01-02 00:00:00+00
2024-01-03 00:00:00+00"),
    ("SELECT * FROM generate_series(1.5, 3)", "1.5
2.5"),
    ("SELECT * FROM generate_series(NULL::int, 3)", ""),
    ("SELECT * FROM generate_series(3000000000, 3000000002)", "3000000000
3000000001
3000000002"),
];

#[test]
fn derived_tables_views_and_with_queries_join_as_in_postgresql() {
    for partitions in [1, 3] {
        compare(partitions, SETUP, POSTGRESQL_15);
    }
}

#[test]
fn lateral_stays_refused_by_name() {
    let mut cluster = Cluster::new(2);
    for sql in SETUP {
        cluster.tag(sql);
    }
    let answer = cluster
        .run("SELECT d.name, e.name FROM dept d JOIN LATERAL (SELECT name FROM emp WHERE emp.dept = d.id LIMIT 1) e ON true")
        .unwrap_err();
    assert_eq!(answer.code, "0A000");
    assert!(answer.message.contains("LATERAL"), "{answer}");
}
