//! NUMERIC / DECIMAL(p,s) through parse, plan, three engines and the gateway merge. The
//! expected answers are PostgreSQL 15's for the same statements.

use crate::tests::Cluster;
use crate::{prepare, types, SqlError, StatementResult};
use engine::DataType;

fn texts(cluster: &mut Cluster, sql: &str) -> Vec<String> {
    match cluster.run(sql) {
        Ok(StatementResult::Rows { rows, .. }) => rows
            .iter()
            .map(|row| {
                row.iter()
                    .map(|value| types::encode_text(value).unwrap_or_default())
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

fn accounts() -> Cluster {
    let mut cluster = Cluster::new(3);
    cluster.tag(
        "CREATE TABLE acct (id NUMERIC(10,0) PRIMARY KEY, balance NUMERIC(12,2), \
         rate DECIMAL(4,4), n INT, f DOUBLE PRECISION, free NUMERIC)",
    );
    cluster.tag(
        "INSERT INTO acct VALUES (1, 100.005, 0.125, 3, 0.5, 1.10), \
         (2, -20.5, 0.0001, 4, 1.25, 2), (3, 1234567890.12, 0.9999, 5, 2.5, '3.000'), \
         (4, NULL, NULL, 6, NULL, NULL)",
    );
    cluster
}

#[test]
fn stored_values_are_rounded_to_the_column_scale() {
    let mut cluster = accounts();
    assert_eq!(
        texts(
            &mut cluster,
            "SELECT id, balance, rate, free FROM acct ORDER BY id"
        ),
        [
            "1|100.01|0.1250|1.10",
            "2|-20.50|0.0001|2",
            "3|1234567890.12|0.9999|3.000",
            "4|||"
        ]
    );
}

#[test]
fn arithmetic_promotes_as_postgresql_does() {
    let mut cluster = accounts();
    assert_eq!(
        texts(
            &mut cluster,
            "SELECT balance + n, balance * 2, balance / 3, balance % 7, -balance, balance * f, \
             balance + 0.005 FROM acct WHERE id = 1"
        ),
        ["103.01|200.02|33.3366666666666667|2.01|-100.01|50.005|100.015"]
    );
    assert_eq!(
        texts(
            &mut cluster,
            "SELECT CAST(balance AS INT), CAST(balance AS BIGINT), \
             CAST(balance AS DOUBLE PRECISION), CAST(balance AS TEXT), '12.345'::numeric(5,2), \
             7::numeric / 2, 1.0 / 3, 0.1 + 0.2, 2.5::numeric::int, (-2.5)::numeric::int \
             FROM acct WHERE id = 1"
        ),
        ["100|100|100.01|100.01|12.35|3.5000000000000000|0.33333333333333333333|0.3|3|-3"]
    );
    assert_eq!(
        texts(
            &mut cluster,
            "SELECT balance::text || 'x' FROM acct WHERE id = 2"
        ),
        ["-20.50x"]
    );
    assert_eq!(
        texts(&mut cluster, "SELECT 1e3, 1.5e-3, 100000000000000000000"),
        ["1000|0.0015|100000000000000000000"]
    );
}

#[test]
fn aggregates_over_partitions_are_exact() {
    let mut cluster = accounts();
    assert_eq!(
        texts(
            &mut cluster,
            "SELECT sum(balance), avg(balance), min(balance), max(balance), count(balance), \
             sum(free), avg(free) FROM acct"
        ),
        ["1234567969.63|411522656.54333333|-20.50|1234567890.12|3|6.100|2.0333333333333333"]
    );
}

#[test]
fn rounding_functions_answer_numeric() {
    let mut cluster = accounts();
    assert_eq!(
        texts(
            &mut cluster,
            "SELECT round(balance), round(balance, 1), trunc(balance, 1), ceil(balance), \
             floor(balance), abs(balance), round(balance, -2) FROM acct WHERE id = 2"
        ),
        ["-21|-20.5|-20.5|-20|-21|20.50|0"]
    );
    // round(double precision) rounds half to even, as PostgreSQL's rint does.
    assert_eq!(
        texts(&mut cluster, "SELECT round(2.5::float8), round(5)"),
        ["2|5"]
    );
}

#[test]
fn comparisons_filter_and_order_exactly() {
    let mut cluster = accounts();
    assert_eq!(
        texts(
            &mut cluster,
            "SELECT id FROM acct WHERE balance > 50 ORDER BY id"
        ),
        ["1", "3"]
    );
    assert_eq!(
        texts(&mut cluster, "SELECT id FROM acct WHERE balance = 100.01"),
        ["1"]
    );
    assert_eq!(
        texts(&mut cluster, "SELECT id FROM acct WHERE n = 3.0"),
        ["1"]
    );
    // 3.5 is not rounded into the integer column's type: nothing equals it.
    assert!(texts(&mut cluster, "SELECT id FROM acct WHERE n = 3.5").is_empty());
    assert!(texts(&mut cluster, "SELECT id FROM acct WHERE balance = 100.005").is_empty());
    assert_eq!(
        texts(
            &mut cluster,
            "SELECT id, balance FROM acct ORDER BY balance DESC NULLS LAST"
        ),
        ["3|1234567890.12", "1|100.01", "2|-20.50", "4|"]
    );
    // The primary key finds its row whatever the scale of the constant.
    assert_eq!(
        texts(&mut cluster, "SELECT balance FROM acct WHERE id = 2.0"),
        ["-20.50"]
    );
}

#[test]
fn updates_round_to_the_column_and_overflow_is_refused() {
    let mut cluster = accounts();
    cluster.tag("UPDATE acct SET balance = balance * 1.1 WHERE id = 1");
    assert_eq!(
        texts(&mut cluster, "SELECT balance FROM acct WHERE id = 1"),
        ["110.01"]
    );
    let overflow = error(
        &mut cluster,
        "INSERT INTO acct (id, balance) VALUES (5, 12345678901.00)",
    );
    assert_eq!(
        (overflow.code, overflow.message.as_str()),
        ("22003", "numeric field overflow")
    );
    assert_eq!(
        error(&mut cluster, "INSERT INTO acct (id, rate) VALUES (6, 1)").code,
        "22003"
    );
    let invalid = error(
        &mut cluster,
        "INSERT INTO acct (id, balance) VALUES (7, 'abc')",
    );
    assert_eq!(invalid.code, "22P02");
    assert_eq!(error(&mut cluster, "SELECT 1::numeric / 0").code, "22012");
    assert_eq!(
        error(
            &mut cluster,
            "UPDATE acct SET balance = balance * 100 WHERE id = 3"
        )
        .code,
        "22003"
    );
    // The failed statements changed nothing.
    assert_eq!(texts(&mut cluster, "SELECT count(*) FROM acct"), ["4"]);
}

#[test]
fn declarations_beyond_this_numeric_are_refused_by_name() {
    let mut cluster = Cluster::new(1);
    let wide = error(&mut cluster, "CREATE TABLE big (x NUMERIC(30,2))");
    assert_eq!(wide.code, "0A000");
    assert!(
        wide.message.contains("NUMERIC precision 30"),
        "{}",
        wide.message
    );
    let zero = error(&mut cluster, "CREATE TABLE sc (x NUMERIC(0))");
    assert_eq!(
        (zero.code, zero.message.as_str()),
        ("22023", "NUMERIC precision 0 must be between 1 and 1000")
    );
    assert_eq!(error(&mut cluster, "SELECT 'NaN'::numeric").code, "0A000");
    assert_eq!(
        error(&mut cluster, "SELECT 1e40::numeric(5,2)").code,
        "22003"
    );
}

#[test]
fn described_columns_carry_oid_1700_and_the_typmod() {
    let cluster = accounts();
    let prepared = prepare(
        "SELECT balance, free, balance + 1 FROM acct",
        &cluster.catalog,
        &[],
    )
    .unwrap();
    let described: Vec<(u32, i32)> = prepared
        .columns
        .iter()
        .map(|column| {
            (
                types::pg_type(column.data_type).oid,
                types::type_modifier(column.data_type),
            )
        })
        .collect();
    assert_eq!(described, [(1700, 786_438), (1700, -1), (1700, -1)]);
    let prepared = prepare(
        "SELECT id FROM acct WHERE balance = $1",
        &cluster.catalog,
        &[],
    )
    .unwrap();
    assert!(matches!(
        prepared.parameter_types[0],
        DataType::Numeric { .. }
    ));
}

#[test]
fn the_catalog_shows_numeric_with_its_precision_and_scale() {
    let mut cluster = accounts();
    assert_eq!(
        texts(
            &mut cluster,
            "SELECT format_type(a.atttypid, a.atttypmod), a.atttypmod FROM pg_attribute a \
             JOIN pg_class c ON a.attrelid = c.oid WHERE c.relname = 'acct' AND a.attnum > 0 \
             ORDER BY a.attnum"
        ),
        [
            "numeric(10,0)|655364",
            "numeric(12,2)|786438",
            "numeric(4,4)|262152",
            "integer|-1",
            "double precision|-1",
            "numeric|-1"
        ]
    );
    assert_eq!(
        texts(
            &mut cluster,
            "SELECT data_type FROM information_schema.columns WHERE table_name = 'acct' \
             ORDER BY ordinal_position"
        ),
        [
            "numeric",
            "numeric",
            "numeric",
            "integer",
            "double precision",
            "numeric"
        ]
    );
}
