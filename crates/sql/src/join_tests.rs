//! Joins of user tables through parse, plan, K engines and the gateway's join: inner, cross,
//! outer (with NULL padding), USING/NATURAL, multi-way, NULL and duplicate keys, empty sides,
//! type mixes, and the same answers for any number of partitions.

use crate::merge_tests::Prng;
use crate::tests::Cluster;
use crate::{SqlError, StatementResult};
use engine::Value;

fn int(value: i32) -> Value {
    Value::Int(value)
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

/// Departments and employees with a NULL key on each side, a duplicate key, and an
/// employee of a department that does not exist.
fn company(partitions: usize) -> Cluster {
    let mut cluster = Cluster::new(partitions);
    cluster.tag("CREATE TABLE dept (id INT PRIMARY KEY, name TEXT, boss INT)");
    cluster.tag("CREATE TABLE emp (id INT PRIMARY KEY, name TEXT, dept INT, salary BIGINT)");
    cluster.tag(
        "INSERT INTO dept VALUES (1, 'eng', 10), (2, 'ops', 20), (3, 'empty', NULL), \
         (4, 'art', 10)",
    );
    cluster.tag(
        "INSERT INTO emp VALUES (10, 'ada', 1, 100), (11, 'bob', 1, 90), (20, 'cy', 2, 80), \
         (30, 'dee', NULL, 70), (40, 'eve', 9, 60)",
    );
    cluster
}

#[test]
fn inner_and_comma_joins_match_equal_keys_only_and_null_keys_never() {
    for partitions in [1, 3] {
        let mut cluster = company(partitions);
        let expected = vec![
            vec![text("ada"), text("eng")],
            vec![text("bob"), text("eng")],
            vec![text("cy"), text("ops")],
        ];
        for sql in [
            "SELECT emp.name, dept.name FROM emp JOIN dept ON emp.dept = dept.id ORDER BY 1",
            "SELECT e.name, d.name FROM emp e INNER JOIN dept d ON d.id = e.dept ORDER BY 1",
            "SELECT e.name, d.name FROM dept d, emp e WHERE e.dept = d.id ORDER BY e.name",
            "SELECT e.name, d.name FROM emp AS e CROSS JOIN dept AS d WHERE e.dept = d.id \
             ORDER BY 1",
            // No equality: a nested loop, same answer.
            "SELECT e.name, d.name FROM emp e, dept d WHERE (e.dept = d.id) IS TRUE ORDER BY 1",
        ] {
            assert_eq!(rows(&mut cluster, sql), expected, "{partitions}: {sql}");
        }
        // Duplicate keys: every pair. dept 1 and 4 both have boss 10.
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT d.name, e.name FROM dept d JOIN emp e ON d.boss = e.id ORDER BY 1"
            ),
            vec![
                vec![text("art"), text("ada")],
                vec![text("eng"), text("ada")],
                vec![text("ops"), text("cy")],
            ]
        );
        // A cross product counts every pair; an empty side empties an inner join.
        assert_eq!(
            rows(&mut cluster, "SELECT count(*) FROM emp, dept"),
            vec![vec![Value::BigInt(20)]]
        );
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT count(*) FROM emp, dept WHERE dept.id > 100"
            ),
            vec![vec![Value::BigInt(0)]]
        );
    }
}

#[test]
fn outer_joins_pad_the_unmatched_side_with_nulls() {
    for partitions in [1, 4] {
        let mut cluster = company(partitions);
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT e.name, d.name FROM emp e LEFT JOIN dept d ON e.dept = d.id ORDER BY 1"
            ),
            vec![
                vec![text("ada"), text("eng")],
                vec![text("bob"), text("eng")],
                vec![text("cy"), text("ops")],
                vec![text("dee"), Value::Null],
                vec![text("eve"), Value::Null],
            ]
        );
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT e.name, d.name FROM emp e RIGHT OUTER JOIN dept d ON e.dept = d.id \
                 ORDER BY 2, 1"
            ),
            vec![
                vec![Value::Null, text("art")],
                vec![Value::Null, text("empty")],
                vec![text("ada"), text("eng")],
                vec![text("bob"), text("eng")],
                vec![text("cy"), text("ops")],
            ]
        );
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT e.name, d.name FROM emp e FULL JOIN dept d ON e.dept = d.id \
                 ORDER BY 1 NULLS FIRST, 2"
            ),
            vec![
                vec![Value::Null, text("art")],
                vec![Value::Null, text("empty")],
                vec![text("ada"), text("eng")],
                vec![text("bob"), text("eng")],
                vec![text("cy"), text("ops")],
                vec![text("dee"), Value::Null],
                vec![text("eve"), Value::Null],
            ]
        );
        // The ON condition decides matches; WHERE filters afterwards (IS NULL keeps the
        // padded rows: anti-join).
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT e.name FROM emp e LEFT JOIN dept d ON e.dept = d.id AND d.name = 'ops' \
                 WHERE d.id IS NULL ORDER BY 1"
            ),
            vec![
                vec![text("ada")],
                vec![text("bob")],
                vec![text("dee")],
                vec![text("eve")],
            ]
        );
        // An empty preserved side gives nothing; an empty other side pads every row.
        cluster.tag("CREATE TABLE none_here (id INT PRIMARY KEY)");
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT n.id FROM none_here n LEFT JOIN emp e ON n.id = e.id"
            ),
            Vec::<Vec<Value>>::new()
        );
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT d.id, n.id FROM dept d LEFT JOIN none_here n ON n.id = d.id ORDER BY 1"
            ),
            (1..=4)
                .map(|id| vec![int(id), Value::Null])
                .collect::<Vec<_>>()
        );
    }
}

#[test]
fn using_and_natural_merge_the_common_columns() {
    let mut cluster = Cluster::new(2);
    cluster.tag("CREATE TABLE a (k INT PRIMARY KEY, x TEXT)");
    cluster.tag("CREATE TABLE b (k INT PRIMARY KEY, y TEXT)");
    cluster.tag("INSERT INTO a VALUES (1, 'a1'), (2, 'a2')");
    cluster.tag("INSERT INTO b VALUES (2, 'b2'), (3, 'b3')");
    assert_eq!(
        columns(&mut cluster, "SELECT * FROM a JOIN b USING (k)"),
        ["k", "x", "y"]
    );
    assert_eq!(
        rows(&mut cluster, "SELECT * FROM a NATURAL JOIN b"),
        vec![vec![int(2), text("a2"), text("b2")]]
    );
    // The unqualified name is the merged column; the qualified ones stay reachable.
    assert_eq!(
        rows(
            &mut cluster,
            "SELECT k, a.k, b.k FROM a FULL JOIN b USING (k) ORDER BY 1"
        ),
        vec![
            vec![int(1), int(1), Value::Null],
            vec![int(2), int(2), int(2)],
            vec![int(3), Value::Null, int(3)],
        ]
    );
    assert_eq!(
        rows(
            &mut cluster,
            "SELECT * FROM a RIGHT JOIN b USING (k) ORDER BY k"
        ),
        vec![
            vec![int(2), text("a2"), text("b2")],
            vec![int(3), Value::Null, text("b3")],
        ]
    );
    assert_eq!(
        columns(&mut cluster, "SELECT b.* FROM a JOIN b USING (k)"),
        ["k", "y"]
    );
    assert_eq!(
        error(&mut cluster, "SELECT * FROM a JOIN b USING (z)").code,
        "42703"
    );
    assert_eq!(
        error(&mut cluster, "SELECT * FROM a JOIN b USING (x)").code,
        "42703"
    );
    // Without USING, the shared name is ambiguous, as in PostgreSQL.
    assert_eq!(error(&mut cluster, "SELECT k FROM a, b").code, "42702");
}

#[test]
fn multi_way_joins_with_aggregates_grouping_order_and_limit() {
    for partitions in [1, 3] {
        let mut cluster = company(partitions);
        cluster.tag("CREATE TABLE site (dept INT PRIMARY KEY, city TEXT)");
        cluster.tag("INSERT INTO site VALUES (1, 'london'), (2, 'paris'), (4, 'london')");
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT s.city, count(*), sum(e.salary) FROM emp e, dept d, site s \
                 WHERE e.dept = d.id AND s.dept = d.id GROUP BY s.city ORDER BY s.city"
            ),
            vec![
                vec![text("london"), Value::BigInt(2), Value::BigInt(190)],
                vec![text("paris"), Value::BigInt(1), Value::BigInt(80)],
            ]
        );
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT e.name FROM emp e JOIN dept d ON e.dept = d.id JOIN site s \
                 ON s.dept = d.id WHERE s.city = 'london' ORDER BY e.salary DESC LIMIT 1 \
                 OFFSET 1"
            ),
            vec![vec![text("bob")]]
        );
        // A LEFT JOIN inside an inner join, parenthesised.
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT d.name, s.city FROM site s JOIN (dept d LEFT JOIN emp e \
                 ON e.dept = d.id) ON s.dept = d.id WHERE e.id IS NULL"
            ),
            vec![vec![text("art"), text("london")]]
        );
        // Subqueries beside a join read their table in the same batch.
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT e.name FROM emp e, dept d WHERE e.dept = d.id \
                 AND e.salary > (SELECT avg(salary) FROM emp) ORDER BY 1"
            ),
            vec![vec![text("ada")], vec![text("bob")]]
        );
    }
}

#[test]
fn distinct_over_a_join_and_a_table_removes_duplicate_rows_before_order_and_limit() {
    for partitions in [1, 3] {
        let mut cluster = company(partitions);
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT DISTINCT d.name FROM emp e JOIN dept d ON e.dept = d.id ORDER BY 1 DESC"
            ),
            vec![vec![text("ops")], vec![text("eng")]]
        );
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT DISTINCT dept FROM emp ORDER BY dept NULLS FIRST LIMIT 3"
            ),
            vec![vec![Value::Null], vec![int(1)], vec![int(2)]]
        );
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT count(*) FROM emp e, dept d WHERE e.dept = d.id"
            ),
            vec![vec![Value::BigInt(3)]]
        );
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT DISTINCT boss IS NULL, count(*) FROM dept GROUP BY boss ORDER BY 1, 2"
            ),
            vec![
                vec![Value::Boolean(false), Value::BigInt(1)],
                vec![Value::Boolean(false), Value::BigInt(2)],
                vec![Value::Boolean(true), Value::BigInt(1)],
            ]
        );
        assert_eq!(
            error(
                &mut cluster,
                "SELECT DISTINCT name FROM emp ORDER BY salary"
            )
            .code,
            "42P10"
        );
    }
}

#[test]
fn a_join_inside_a_set_operation_reads_its_tables_in_the_same_batch() {
    let mut cluster = company(3);
    assert_eq!(
        rows(
            &mut cluster,
            "SELECT e.id FROM emp e JOIN dept d ON e.dept = d.id WHERE d.name = 'eng' \
             UNION SELECT boss FROM dept EXCEPT SELECT 20"
        ),
        vec![vec![Value::Null], vec![int(10)], vec![int(11)]]
    );
}

#[test]
fn join_errors_are_postgresqls() {
    let mut cluster = company(2);
    // Numbers of different types match by value; text and integers do not compare.
    cluster.tag("CREATE TABLE ratio (id BIGINT PRIMARY KEY, value DOUBLE PRECISION)");
    cluster.tag("INSERT INTO ratio VALUES (1, 1.0), (2, 2.5)");
    assert_eq!(
        rows(
            &mut cluster,
            "SELECT d.name FROM dept d JOIN ratio r ON d.id = r.value"
        ),
        vec![vec![text("eng")]]
    );
    assert_eq!(
        rows(
            &mut cluster,
            "SELECT d.name FROM dept d JOIN ratio r ON d.id = r.id ORDER BY 1"
        ),
        vec![vec![text("eng")], vec![text("ops")]]
    );
    assert_eq!(
        error(
            &mut cluster,
            "SELECT 1 FROM dept d JOIN emp e ON d.name = e.id"
        )
        .code,
        "42883"
    );
    assert_eq!(
        error(&mut cluster, "SELECT id FROM dept, emp").code,
        "42702"
    );
    assert_eq!(
        error(&mut cluster, "SELECT 1 FROM dept, dept").code,
        "42712"
    );
    assert_eq!(
        error(&mut cluster, "SELECT 1 FROM dept, nope").code,
        "42P01"
    );
    assert_eq!(
        error(
            &mut cluster,
            "SELECT 1 FROM dept d LEFT JOIN emp e ON e.dept = x.id, dept x"
        )
        .code,
        "42P01"
    );
    assert_eq!(
        error(
            &mut cluster,
            "SELECT 1 FROM dept d JOIN emp e ON e.salary / 0 = 1"
        )
        .code,
        "22012"
    );
    assert_eq!(
        error(
            &mut cluster,
            "SELECT 1 FROM dept d JOIN emp e ON e.name = 1"
        )
        .code,
        "22P02"
    );
}

#[test]
fn a_cross_product_beyond_the_row_limit_is_refused_not_materialised() {
    let mut cluster = Cluster::new(1);
    cluster.tag("CREATE TABLE n (id INT PRIMARY KEY)");
    let values: Vec<String> = (0..1_000).map(|id| format!("({id})")).collect();
    cluster.tag(&format!("INSERT INTO n VALUES {}", values.join(", ")));
    assert_eq!(
        rows(
            &mut cluster,
            "SELECT count(*) FROM n a, n b WHERE a.id = b.id"
        ),
        vec![vec![Value::BigInt(1_000)]]
    );
    let error = error(&mut cluster, "SELECT count(*) FROM n a, n b, n c");
    assert_eq!(error.code, "54000", "{error:?}");
}

/// Seeded random tables with small keys (NULLs included): a hash join, a nested loop over
/// the same condition, and any split over partitions all answer the same rows.
#[test]
fn hash_join_nested_loop_and_any_split_agree() {
    for seed in 0..20u64 {
        let mut prng = Prng::new(seed);
        let mut clusters = [Cluster::new(1), Cluster::new(3), Cluster::new(5)];
        let mut inserts = Vec::new();
        for table in ["p", "q", "r"] {
            let count = prng.below(12);
            let mut values = Vec::new();
            for id in 0..count {
                let key = if prng.chance(20) {
                    "NULL".to_string()
                } else {
                    prng.below(5).to_string()
                };
                values.push(format!("({id}, {key}, {})", prng.below(3)));
            }
            inserts.push(format!(
                "CREATE TABLE {table} (id INT PRIMARY KEY, k INT, v BIGINT)"
            ));
            if !values.is_empty() {
                inserts.push(format!("INSERT INTO {table} VALUES {}", values.join(", ")));
            }
        }
        for cluster in &mut clusters {
            for sql in &inserts {
                cluster.tag(sql);
            }
        }
        let pairs = [
            (
                "SELECT p.id, q.id, r.id FROM p, q, r WHERE p.k = q.k AND q.v = r.v",
                "SELECT p.id, q.id, r.id FROM p, q, r WHERE (p.k = q.k) IS TRUE \
                 AND (q.v = r.v) IS TRUE",
            ),
            (
                "SELECT p.id, q.id FROM p LEFT JOIN q ON p.k = q.k AND q.v > 0",
                "SELECT p.id, q.id FROM p LEFT JOIN q ON (p.k = q.k) IS TRUE AND q.v > 0",
            ),
            (
                "SELECT p.id, q.id FROM p FULL JOIN q ON p.k = q.k",
                "SELECT p.id, q.id FROM p FULL JOIN q ON (p.k = q.k) IS TRUE",
            ),
            (
                "SELECT q.id, r.id FROM q RIGHT JOIN r ON r.k = q.v",
                "SELECT q.id, r.id FROM q RIGHT JOIN r ON (r.k = q.v) IS TRUE",
            ),
        ];
        for (hashed, looped) in pairs {
            let sorted = |mut rows: Vec<Vec<Value>>| {
                rows.sort();
                rows
            };
            let expected = sorted(rows(&mut clusters[0], looped));
            for cluster in &mut clusters {
                assert_eq!(
                    sorted(rows(cluster, hashed)),
                    expected,
                    "seed {seed}: {hashed}"
                );
                assert_eq!(
                    sorted(rows(cluster, looped)),
                    expected,
                    "seed {seed}: {looped}"
                );
            }
        }
    }
}

#[test]
fn distinct_aggregates_count_each_value_once_over_tables_and_joins() {
    for partitions in [1, 3] {
        let mut cluster = company(partitions);
        cluster.tag("CREATE TABLE site (dept INT PRIMARY KEY, city TEXT)");
        cluster.tag("INSERT INTO site VALUES (1, 'london'), (2, 'paris'), (4, 'london')");
        // One table: the partitions send rows, the gateway counts distinct values.
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT count(DISTINCT city), count(city), count(ALL city) FROM site"
            ),
            vec![vec![Value::BigInt(2), Value::BigInt(3), Value::BigInt(3)]]
        );
        // A join (TPC-C's Stock-Level shape), grouped and not: ada and bob in london's
        // department 1, cy in paris's 2.
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT count(DISTINCT s.city), count(*) FROM emp e, site s WHERE s.dept = e.dept"
            ),
            vec![vec![Value::BigInt(2), Value::BigInt(3)]]
        );
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT s.city, sum(DISTINCT e.dept), count(DISTINCT e.id) FROM emp e, site s \
                 WHERE s.dept = e.dept GROUP BY s.city ORDER BY s.city"
            ),
            vec![
                vec![text("london"), Value::BigInt(1), Value::BigInt(2)],
                vec![text("paris"), Value::BigInt(2), Value::BigInt(1)],
            ]
        );
        assert_eq!(
            error(&mut cluster, "SELECT lower(DISTINCT city) FROM site").code,
            "42809"
        );
    }
}
