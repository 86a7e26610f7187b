//! `now()`, `current_timestamp`, `localtimestamp`, `current_date`: the statement's time given
//! by the gateway, one constant per statement, and the TIMESTAMPTZ type they return.

use crate::tests::Cluster;
use crate::{parse, plan_statement, plan_statement_at, prepare, types, SqlError, StatementResult};
use engine::{DataType, Value};

/// 2026-11-26 20:44:38.123456 UTC.
const NOW_US: i64 = 1_795_725_878_123_456;

fn run_at(cluster: &mut Cluster, sql: &str, now_us: i64) -> Result<StatementResult, SqlError> {
    let mut last = Err(SqlError::syntax("empty"));
    for statement in parse(sql)? {
        let plan = plan_statement_at(&statement, &cluster.catalog, now_us)?;
        last = cluster.execute(plan);
    }
    last
}

fn rows_at(cluster: &mut Cluster, sql: &str, now_us: i64) -> Vec<Vec<Value>> {
    match run_at(cluster, sql, now_us) {
        Ok(StatementResult::Rows { rows, .. }) => rows,
        other => panic!("{sql}: {other:?}"),
    }
}

fn texts(rows: &[Vec<Value>]) -> Vec<Vec<String>> {
    rows.iter()
        .map(|row| {
            row.iter()
                .map(|value| types::encode_text(value).unwrap_or_else(|| "NULL".into()))
                .collect()
        })
        .collect()
}

#[test]
fn statement_time_functions_print_as_postgresql_does_in_utc() {
    let mut cluster = Cluster::new(1);
    let rows = rows_at(
        &mut cluster,
        "SELECT now(), current_timestamp, localtimestamp, current_date, \
         transaction_timestamp(), statement_timestamp()",
        NOW_US,
    );
    assert_eq!(
        texts(&rows),
        vec![vec![
            "2026-11-26 20:44:38.123456+00".to_string(),
            "2026-11-26 20:44:38.123456+00".to_string(),
            "2026-11-26 20:44:38.123456".to_string(),
            "2026-11-26".to_string(),
            "2026-11-26 20:44:38.123456+00".to_string(),
            "2026-11-26 20:44:38.123456+00".to_string(),
        ]]
    );
    // Trailing zeros of the fraction are dropped, as PostgreSQL prints them.
    let rows = rows_at(&mut cluster, "SELECT now()", 1_795_725_878_000_000);
    assert_eq!(
        texts(&rows),
        vec![vec!["2026-11-26 20:44:38+00".to_string()]]
    );
}

#[test]
fn the_result_columns_have_postgresql_types() {
    let cluster = Cluster::new(1);
    let prepared = prepare(
        "SELECT now(), current_date, localtimestamp",
        &cluster.catalog,
        &[],
    )
    .unwrap();
    let oids: Vec<u32> = prepared
        .columns
        .iter()
        .map(|column| types::pg_type(column.data_type).oid)
        .collect();
    assert_eq!(oids, vec![1184, 1082, 1114]);
}

#[test]
fn one_value_per_statement_written_to_every_partition_and_compared_in_where() {
    let mut cluster = Cluster::new(3);
    cluster
        .tag("CREATE TABLE events (id INT PRIMARY KEY, at TIMESTAMPTZ, day DATE, local TIMESTAMP)");
    run_at(
        &mut cluster,
        "INSERT INTO events VALUES (1, now(), current_date, localtimestamp), \
         (2, now(), current_date, now()), (3, current_timestamp, now(), now())",
        NOW_US,
    )
    .unwrap();
    let rows = rows_at(
        &mut cluster,
        "SELECT id, at, day, local FROM events ORDER BY id",
        0,
    );
    for row in &rows {
        assert_eq!(row[1], Value::TimestampTz(NOW_US));
        assert_eq!(row[2], Value::Date(20_783));
        assert_eq!(row[3], Value::Timestamp(NOW_US));
    }
    assert_eq!(rows.len(), 3);
    // A later statement sees a later time; comparisons with TIMESTAMPTZ columns work.
    let later = NOW_US + 1_000_000;
    run_at(
        &mut cluster,
        "UPDATE events SET at = now() WHERE id = 2",
        later,
    )
    .unwrap();
    let rows = rows_at(
        &mut cluster,
        "SELECT id FROM events WHERE at < now() ORDER BY id",
        later,
    );
    assert_eq!(rows, vec![vec![Value::Int(1)], vec![Value::Int(3)]]);
    let rows = rows_at(
        &mut cluster,
        "SELECT count(*) FROM events WHERE at >= '2026-11-26 21:44:38.123456+01' AND day = current_date",
        later,
    );
    assert_eq!(rows, vec![vec![Value::BigInt(3)]]);
}

#[test]
fn timestamptz_text_input_applies_the_offset_and_casts_to_timestamp_and_date() {
    let mut cluster = Cluster::new(1);
    let rows = rows_at(
        &mut cluster,
        "SELECT '2026-01-02 03:04:05-02:30'::timestamptz, \
         CAST('2026-01-02 03:04:05Z' AS timestamp with time zone)::date, \
         '2026-01-02 03:04:05'::timestamptz::timestamp",
        0,
    );
    assert_eq!(
        texts(&rows),
        vec![vec![
            "2026-01-02 05:34:05+00".to_string(),
            "2026-01-02".to_string(),
            "2026-01-02 03:04:05".to_string(),
        ]]
    );
    assert_eq!(
        types::decode_binary(
            &types::encode_binary(&Value::TimestampTz(NOW_US)).unwrap(),
            DataType::TimestampTz
        )
        .unwrap(),
        Value::TimestampTz(NOW_US)
    );
}

#[test]
fn clock_functions_are_refused_and_a_missing_statement_time_is_an_error() {
    let mut cluster = Cluster::new(1);
    for sql in [
        "SELECT clock_timestamp()",
        "SELECT timeofday()",
        "SELECT current_time",
        "SELECT current_timestamp(3)",
    ] {
        let error = run_at(&mut cluster, sql, NOW_US).unwrap_err();
        assert_eq!(error.code, "0A000", "{sql}: {error}");
    }
    let error = run_at(&mut cluster, "SELECT now(1)", NOW_US).unwrap_err();
    assert_eq!(error.code, "42883");
    let statement = parse("SELECT now()").unwrap().remove(0);
    let error = plan_statement(&statement, &cluster.catalog).unwrap_err();
    assert_eq!(error.code, "XX000");
}

#[test]
fn a_plan_without_the_sequence_draw_refuses_rather_than_inventing_values() {
    let mut cluster = Cluster::new(1);
    cluster.tag("CREATE TABLE t (id INT PRIMARY KEY, n INT)");
    cluster.tag("CREATE SEQUENCE x");
    cluster.tag("CREATE TABLE s1 (id SERIAL PRIMARY KEY, n INT)");
    // `run_at` plans without drawing (`plan_statement_at`): nothing may run on placeholders.
    for sql in [
        "SELECT nextval('x')",
        "SELECT setval('x', 3)",
        "INSERT INTO t VALUES (nextval('x'), 1)",
        "INSERT INTO s1 (n) VALUES (1)",
    ] {
        let error = run_at(&mut cluster, sql, NOW_US).unwrap_err();
        assert_eq!(error.code, "XX000", "{sql}: {error}");
    }
    let error = run_at(&mut cluster, "UPDATE t SET n = nextval('x')", NOW_US).unwrap_err();
    assert_eq!(error.code, "0A000", "{error}");
    assert_eq!(
        cluster.run_sequenced("SELECT * FROM s1").unwrap(),
        crate::StatementResult::Rows {
            columns: vec![
                crate::OutputColumn::new("id", engine::DataType::Int),
                crate::OutputColumn::new("n", engine::DataType::Int)
            ],
            rows: Vec::new(),
            tag: "SELECT 0".into()
        }
    );
}

#[test]
fn the_session_time_zone_is_utc_and_other_zones_are_refused() {
    let mut cluster = Cluster::new(1);
    for sql in [
        "SET TimeZone = 'UTC'",
        "SET TIME ZONE 'Etc/UTC'",
        "SET timezone TO 'GMT'",
        "RESET TimeZone",
    ] {
        assert!(run_at(&mut cluster, sql, NOW_US).is_ok(), "{sql}");
    }
    for sql in [
        "SET TimeZone = 'Europe/Paris'",
        "SET TIME ZONE 'America/New_York'",
        "SET timezone TO '+02'",
    ] {
        let error = run_at(&mut cluster, sql, NOW_US).unwrap_err();
        assert_eq!(error.code, "0A000", "{sql}: {error}");
        assert!(error.message.contains("always UTC"), "{sql}: {error}");
    }
    let rows = rows_at(&mut cluster, "SHOW TimeZone", NOW_US);
    assert_eq!(rows, vec![vec![Value::Text("UTC".into())]]);
}

#[test]
fn column_defaults_fill_left_out_columns_with_constants_or_the_statement_time() {
    let mut cluster = Cluster::new(3);
    cluster.tag(
        "CREATE TABLE log (id INT PRIMARY KEY, at TIMESTAMPTZ DEFAULT now(), \
         day DATE DEFAULT current_date, local TIMESTAMP DEFAULT localtimestamp, \
         stamp TIMESTAMPTZ DEFAULT current_timestamp NOT NULL, \
         state TEXT DEFAULT 'new', n INT DEFAULT 2 * 21, note TEXT)",
    );
    run_at(
        &mut cluster,
        "INSERT INTO log (id, note) VALUES (1, 'a'), (2, 'b')",
        NOW_US,
    )
    .unwrap();
    run_at(
        &mut cluster,
        "INSERT INTO log (id, state, at) VALUES (3, 'old', '2020-01-01 00:00:00+00')",
        NOW_US + 5,
    )
    .unwrap();
    let rows = rows_at(&mut cluster, "SELECT * FROM log ORDER BY id", 0);
    assert_eq!(
        texts(&rows),
        vec![
            vec![
                "1",
                "2026-11-26 20:44:38.123456+00",
                "2026-11-26",
                "2026-11-26 20:44:38.123456",
                "2026-11-26 20:44:38.123456+00",
                "new",
                "42",
                "a"
            ],
            vec![
                "2",
                "2026-11-26 20:44:38.123456+00",
                "2026-11-26",
                "2026-11-26 20:44:38.123456",
                "2026-11-26 20:44:38.123456+00",
                "new",
                "42",
                "b"
            ],
            vec![
                "3",
                "2020-01-01 00:00:00+00",
                "2026-11-26",
                "2026-11-26 20:44:38.123461",
                "2026-11-26 20:44:38.123461+00",
                "old",
                "42",
                "NULL"
            ],
        ]
        .into_iter()
        .map(|row| row.into_iter().map(String::from).collect::<Vec<_>>())
        .collect::<Vec<_>>()
    );
    // RETURNING sees the defaults.
    let rows = rows_at(
        &mut cluster,
        "INSERT INTO log (id) VALUES (4) RETURNING state, n, at",
        NOW_US,
    );
    assert_eq!(
        texts(&rows),
        vec![vec![
            "new".to_string(),
            "42".into(),
            "2026-11-26 20:44:38.123456+00".into()
        ]]
    );
    // Refused: a default computed from the time (it would be frozen), a mistyped default,
    // COPY leaving a defaulted column out.
    let error = run_at(
        &mut cluster,
        "CREATE TABLE bad (id INT PRIMARY KEY, d DATE DEFAULT now()::date)",
        NOW_US,
    )
    .unwrap_err();
    assert_eq!(error.code, "0A000", "{error}");
    let error = run_at(
        &mut cluster,
        "CREATE TABLE bad (id INT PRIMARY KEY, n INT DEFAULT 'x')",
        NOW_US,
    )
    .unwrap_err();
    assert_eq!(error.code, "22P02", "{error}");
    let error = run_at(&mut cluster, "COPY log (id, note) FROM STDIN", NOW_US).unwrap_err();
    assert_eq!(error.code, "0A000", "{error}");
}

#[test]
fn defaults_show_in_information_schema_and_pg_attribute() {
    let mut cluster = Cluster::new(1);
    cluster.tag(
        "CREATE TABLE d (id INT PRIMARY KEY, at TIMESTAMPTZ DEFAULT now(), n INT DEFAULT 7, \
         s VARCHAR(5) DEFAULT 'it''s', plain TEXT)",
    );
    let rows = rows_at(
        &mut cluster,
        "SELECT column_name, column_default FROM information_schema.columns \
         WHERE table_name = 'd' ORDER BY ordinal_position",
        NOW_US,
    );
    assert_eq!(
        texts(&rows),
        [
            ["id", "NULL"],
            ["at", "now()"],
            ["n", "7"],
            ["s", "'it''s'::character varying"],
            ["plain", "NULL"]
        ]
        .iter()
        .map(|row| row.iter().map(|cell| cell.to_string()).collect::<Vec<_>>())
        .collect::<Vec<_>>()
    );
    let rows = rows_at(
        &mut cluster,
        "SELECT attname, atthasdef FROM pg_attribute a JOIN pg_class c ON a.attrelid = c.oid \
         WHERE c.relname = 'd' AND atthasdef",
        NOW_US,
    );
    assert_eq!(rows.len(), 3, "{rows:?}");
}

#[test]
fn the_default_keyword_in_values_takes_the_columns_default() {
    let mut cluster = Cluster::new(2);
    cluster.tag(
        "CREATE TABLE k (id INT PRIMARY KEY, at DATE DEFAULT current_date, n INT DEFAULT 5, m INT)",
    );
    run_at(
        &mut cluster,
        "INSERT INTO k VALUES (1, DEFAULT, DEFAULT, DEFAULT), (2, '2020-02-02', 6, 7)",
        NOW_US,
    )
    .unwrap();
    let rows = rows_at(&mut cluster, "SELECT * FROM k ORDER BY id", 0);
    assert_eq!(
        rows,
        vec![
            vec![
                Value::Int(1),
                Value::Date(20_783),
                Value::Int(5),
                Value::Null
            ],
            vec![
                Value::Int(2),
                Value::Date(18_294),
                Value::Int(6),
                Value::Int(7)
            ],
        ]
    );
    // Outside VALUES the keyword is not a column reference.
    assert!(run_at(&mut cluster, "SELECT default FROM k", 0).is_err());
}

#[test]
fn int2_binary_parameters_widen_to_integer() {
    // A parameter the client declared int2 (psycopg) widens; an INT parameter still needs 4
    // bytes, as in PostgreSQL.
    assert_eq!(
        types::decode_binary_int2(&[0xff, 0xfe]).unwrap(),
        Value::Int(-2)
    );
    assert_eq!(
        types::decode_binary_int2(&[0, 0, 1]).unwrap_err().code,
        "22P03"
    );
    assert_eq!(
        types::decode_binary(&[0xff, 0xfe], DataType::Int)
            .unwrap_err()
            .code,
        "22P03"
    );
}
