//! Sequences through parse, plan, the gateway's draw (`sequence::advance`) and K engines:
//! CREATE/DROP SEQUENCE, nextval/currval/setval/lastval, SERIAL and IDENTITY columns.

use crate::tests::Cluster;
use crate::{SqlError, StatementResult};
use engine::Value;

fn rows(cluster: &mut Cluster, sql: &str) -> Vec<Vec<Value>> {
    match cluster.run_sequenced(sql) {
        Ok(StatementResult::Rows { rows, .. }) => rows,
        other => panic!("{sql}: {other:?}"),
    }
}

fn values(cluster: &mut Cluster, sql: &str) -> Vec<i64> {
    rows(cluster, sql)
        .into_iter()
        .flatten()
        .map(|value| match value {
            Value::BigInt(number) => number,
            Value::Int(number) => i64::from(number),
            other => panic!("{sql}: {other:?}"),
        })
        .collect()
}

fn error(cluster: &mut Cluster, sql: &str) -> SqlError {
    match cluster.run_sequenced(sql) {
        Err(error) => error,
        Ok(result) => panic!("{sql}: expected an error, got {result:?}"),
    }
}

fn tag(cluster: &mut Cluster, sql: &str) -> String {
    match cluster.run_sequenced(sql) {
        Ok(StatementResult::Command { tag }) | Ok(StatementResult::Rows { tag, .. }) => tag,
        Err(error) => panic!("{sql}: {error:?}"),
    }
}

#[test]
fn nextval_counts_from_start_by_increment_and_currval_lastval_follow_the_session() {
    for partitions in [1, 3] {
        let mut cluster = Cluster::new(partitions);
        assert_eq!(tag(&mut cluster, "CREATE SEQUENCE s"), "CREATE SEQUENCE");
        let undefined = error(&mut cluster, "SELECT currval('s')");
        assert_eq!(undefined.code, "55000");
        assert_eq!(
            undefined.message,
            "currval of sequence \"s\" is not yet defined in this session"
        );
        assert_eq!(error(&mut cluster, "SELECT lastval()").code, "55000");
        assert_eq!(values(&mut cluster, "SELECT nextval('s')"), vec![1]);
        assert_eq!(values(&mut cluster, "SELECT nextval('s')"), vec![2]);
        assert_eq!(
            values(
                &mut cluster,
                "SELECT nextval('s'), nextval('s'), currval('s')"
            ),
            vec![3, 4, 4]
        );
        assert_eq!(
            values(&mut cluster, "SELECT currval('s'), lastval()"),
            vec![4, 4]
        );
        // The relation itself, as PostgreSQL shows it.
        assert_eq!(
            rows(&mut cluster, "SELECT * FROM s"),
            vec![vec![
                Value::BigInt(4),
                Value::BigInt(0),
                Value::Boolean(true)
            ]]
        );
        assert_eq!(values(&mut cluster, "SELECT setval('s', 100)"), vec![100]);
        assert_eq!(values(&mut cluster, "SELECT nextval('s')"), vec![101]);
        assert_eq!(
            values(&mut cluster, "SELECT setval('s', 7, false)"),
            vec![7]
        );
        assert_eq!(values(&mut cluster, "SELECT nextval('s')"), vec![7]);
        // Several sequences, with options; names as PostgreSQL reads them.
        tag(
            &mut cluster,
            "CREATE SEQUENCE IF NOT EXISTS \"Down\" INCREMENT BY -5 MINVALUE -12 MAXVALUE 0 START WITH -2",
        );
        assert_eq!(
            values(
                &mut cluster,
                "SELECT nextval('\"Down\"'), nextval('public.\"Down\"'), nextval('s')"
            ),
            vec![-2, -7, 8]
        );
        assert_eq!(
            values(&mut cluster, "SELECT nextval('\"Down\"')"),
            vec![-12]
        );
        let reached = error(&mut cluster, "SELECT nextval('\"Down\"')");
        assert_eq!(reached.code, "2200H");
        assert_eq!(
            reached.message,
            "nextval: reached minimum value of sequence \"Down\" (-12)"
        );
        assert_eq!(
            values(&mut cluster, "SELECT currval('\"Down\"')"),
            vec![-12]
        );
        // IF NOT EXISTS on an existing name changes nothing; without it, 42P07.
        tag(&mut cluster, "CREATE SEQUENCE IF NOT EXISTS s START 50");
        assert_eq!(values(&mut cluster, "SELECT nextval('s')"), vec![9]);
        assert_eq!(error(&mut cluster, "CREATE SEQUENCE s").code, "42P07");
    }
}

#[test]
fn bounds_cycle_and_setval_are_checked_as_postgresql_checks_them() {
    for partitions in [1, 4] {
        let mut cluster = Cluster::new(partitions);
        tag(&mut cluster, "CREATE SEQUENCE small AS smallint MAXVALUE 3");
        assert_eq!(
            values(
                &mut cluster,
                "SELECT nextval('small'), nextval('small'), nextval('small')"
            ),
            vec![1, 2, 3]
        );
        let reached = error(&mut cluster, "SELECT nextval('small')");
        assert_eq!(
            (reached.code, reached.message.as_str()),
            (
                "2200H",
                "nextval: reached maximum value of sequence \"small\" (3)"
            )
        );
        tag(
            &mut cluster,
            "CREATE SEQUENCE ring INCREMENT 2 MINVALUE 1 MAXVALUE 5 CYCLE",
        );
        assert_eq!(
            values(
                &mut cluster,
                "SELECT nextval('ring'), nextval('ring'), nextval('ring'), nextval('ring')"
            ),
            vec![1, 3, 5, 1]
        );
        let bounds = error(&mut cluster, "SELECT setval('ring', 9)");
        assert_eq!(
            (bounds.code, bounds.message.as_str()),
            (
                "22003",
                "setval: value 9 is out of bounds for sequence \"ring\" (1..5)"
            )
        );
        let refusals = [
            (
                "CREATE SEQUENCE z INCREMENT 0",
                "22023",
                "INCREMENT must not be zero",
            ),
            (
                "CREATE SEQUENCE z MINVALUE 5 MAXVALUE 5",
                "22023",
                "MINVALUE (5) must be less than MAXVALUE (5)",
            ),
            (
                "CREATE SEQUENCE z START 0",
                "22023",
                "START value (0) cannot be less than MINVALUE (1)",
            ),
            (
                "CREATE SEQUENCE z AS smallint MAXVALUE 100000",
                "22023",
                "MAXVALUE (100000) is out of range for sequence data type smallint",
            ),
            (
                "CREATE SEQUENCE z AS text",
                "22023",
                "sequence type must be smallint, integer, or bigint",
            ),
            (
                "CREATE SEQUENCE z CACHE 20",
                "0A000",
                "sequence CACHE 20 is not supported",
            ),
            (
                "SELECT nextval('missing')",
                "42P01",
                "relation \"missing\" does not exist",
            ),
        ];
        for (sql, code, message) in refusals {
            let refused = error(&mut cluster, sql);
            assert_eq!(
                (refused.code, refused.message.as_str()),
                (code, message),
                "{sql}"
            );
        }
    }
}

#[test]
fn sequences_and_tables_refuse_each_others_statements() {
    let mut cluster = Cluster::new(3);
    tag(
        &mut cluster,
        "CREATE SEQUENCE s; CREATE TABLE t (a INT PRIMARY KEY)",
    );
    for (sql, code, message) in [
        ("SELECT nextval('t')", "42809", "\"t\" is not a sequence"),
        ("DROP SEQUENCE t", "42809", "\"t\" is not a sequence"),
        ("DROP TABLE s", "42809", "\"s\" is not a table"),
        (
            "INSERT INTO s VALUES (1, 0, true)",
            "42809",
            "cannot change sequence \"s\"",
        ),
        (
            "UPDATE s SET last_value = 5",
            "42809",
            "cannot change sequence \"s\"",
        ),
        ("DELETE FROM s", "42809", "cannot change sequence \"s\""),
        ("TRUNCATE s", "42809", "\"s\" is not a table"),
        (
            "DROP SEQUENCE nope",
            "42P01",
            "sequence \"nope\" does not exist",
        ),
        (
            "SELECT nextval('s') FROM t",
            "0A000",
            "nextval() over the rows of a table is not supported",
        ),
    ] {
        let refused = error(&mut cluster, sql);
        assert_eq!(
            (refused.code, refused.message.as_str()),
            (code, message),
            "{sql}"
        );
    }
    assert_eq!(
        tag(&mut cluster, "DROP SEQUENCE IF EXISTS nope, s"),
        "DROP SEQUENCE"
    );
    assert_eq!(error(&mut cluster, "SELECT nextval('s')").code, "42P01");
}

#[test]
fn serial_columns_own_a_sequence_that_fills_every_inserted_row() {
    for partitions in [1, 3] {
        let mut cluster = Cluster::new(partitions);
        tag(
            &mut cluster,
            "CREATE TABLE t (id SERIAL PRIMARY KEY, big BIGSERIAL, name TEXT)",
        );
        let returned = values(
            &mut cluster,
            "INSERT INTO t (name) VALUES ('a'), ('b'), ('c') RETURNING id, big",
        );
        assert_eq!(returned, vec![1, 1, 2, 2, 3, 3]);
        assert_eq!(
            values(
                &mut cluster,
                "INSERT INTO t VALUES (DEFAULT, 10, 'd') RETURNING id"
            ),
            vec![4]
        );
        assert_eq!(values(&mut cluster, "SELECT currval('t_id_seq')"), vec![4]);
        assert_eq!(
            values(&mut cluster, "SELECT id FROM t ORDER BY id"),
            vec![1, 2, 3, 4]
        );
        // The catalog: psql's \d shows the default, pg_class the sequence.
        let defaults = rows(
            &mut cluster,
            "SELECT a.attname, pg_catalog.pg_get_expr(d.adbin, d.adrelid, true) FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum WHERE a.attrelid = (SELECT oid FROM pg_catalog.pg_class WHERE relname = 't') ORDER BY a.attnum",
        );
        assert_eq!(
            defaults,
            vec![
                vec![
                    Value::Text("id".into()),
                    Value::Text("nextval('t_id_seq'::regclass)".into())
                ],
                vec![
                    Value::Text("big".into()),
                    Value::Text("nextval('t_big_seq'::regclass)".into())
                ],
            ]
        );
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT relname, relkind FROM pg_catalog.pg_class WHERE relkind = 'S' ORDER BY relname"
            ),
            vec![
                vec![Value::Text("t_big_seq".into()), Value::Text("S".into())],
                vec![Value::Text("t_id_seq".into()), Value::Text("S".into())],
            ]
        );
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT sequencename, data_type, max_value FROM pg_sequences ORDER BY 1"
            ),
            vec![
                vec![
                    Value::Text("t_big_seq".into()),
                    Value::Text("bigint".into()),
                    Value::BigInt(i64::MAX)
                ],
                vec![
                    Value::Text("t_id_seq".into()),
                    Value::Text("integer".into()),
                    Value::BigInt(i64::from(i32::MAX))
                ],
            ]
        );
        assert_eq!(
            rows(
                &mut cluster,
                "SELECT table_name FROM information_schema.tables"
            ),
            vec![vec![Value::Text("t".into())]]
        );
        // DROP TABLE drops the sequences its columns own.
        tag(&mut cluster, "DROP TABLE t");
        assert_eq!(
            rows(&mut cluster, "SELECT relname FROM pg_catalog.pg_class"),
            Vec::<Vec<Value>>::new()
        );
    }
}

#[test]
fn identity_columns_refuse_explicit_values_when_generated_always() {
    let mut cluster = Cluster::new(3);
    tag(
        &mut cluster,
        "CREATE TABLE a (id INT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v TEXT); \
         CREATE TABLE b (id BIGINT GENERATED BY DEFAULT AS IDENTITY (INCREMENT BY 10 START WITH 10) PRIMARY KEY, v TEXT)",
    );
    let refused = error(&mut cluster, "INSERT INTO a VALUES (5, 'x')");
    assert_eq!(refused.code, "428C9");
    assert_eq!(
        refused.message,
        "cannot insert a non-DEFAULT value into column \"id\""
    );
    assert_eq!(
        refused.detail.as_deref(),
        Some("Column \"id\" is an identity column defined as GENERATED ALWAYS.")
    );
    assert_eq!(
        values(
            &mut cluster,
            "INSERT INTO a (v) VALUES ('x'), ('y') RETURNING id"
        ),
        vec![1, 2]
    );
    assert_eq!(
        values(
            &mut cluster,
            "INSERT INTO a VALUES (DEFAULT, 'z') RETURNING id"
        ),
        vec![3]
    );
    assert_eq!(
        values(&mut cluster, "INSERT INTO b (v) VALUES ('x') RETURNING id"),
        vec![10]
    );
    assert_eq!(
        values(&mut cluster, "INSERT INTO b VALUES (5, 'y') RETURNING id"),
        vec![5]
    );
    assert_eq!(
        values(&mut cluster, "INSERT INTO b (v) VALUES ('z') RETURNING id"),
        vec![20]
    );
    // Identity columns show in attidentity, not as a pg_attrdef default (as in PostgreSQL).
    assert_eq!(
        rows(
            &mut cluster,
            "SELECT c.relname, a.attidentity, a.atthasdef FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid WHERE a.attname = 'id' ORDER BY 1"
        ),
        vec![
            vec![Value::Text("a".into()), Value::Text("a".into()), Value::Boolean(false)],
            vec![Value::Text("b".into()), Value::Text("d".into()), Value::Boolean(false)],
        ]
    );
}

#[test]
fn a_written_out_nextval_default_draws_from_an_existing_sequence() {
    let mut cluster = Cluster::new(2);
    tag(
        &mut cluster,
        "CREATE SEQUENCE ids START 100; CREATE TABLE t (id BIGINT PRIMARY KEY DEFAULT nextval('ids'::regclass), v INT)",
    );
    assert_eq!(
        values(
            &mut cluster,
            "INSERT INTO t (v) VALUES (1), (2) RETURNING id"
        ),
        vec![100, 101]
    );
    assert_eq!(values(&mut cluster, "SELECT nextval('ids')"), vec![102]);
    assert_eq!(
        error(
            &mut cluster,
            "CREATE TABLE u (id BIGINT DEFAULT nextval('ids') + 1)"
        )
        .code,
        "0A000"
    );
    assert_eq!(
        error(
            &mut cluster,
            "CREATE TABLE u (id BIGINT DEFAULT nextval('nope'))"
        )
        .code,
        "42P01"
    );
}

#[test]
fn truncate_restart_identity_restarts_the_sequences_the_table_owns() {
    let mut cluster = Cluster::new(3);
    tag(
        &mut cluster,
        "CREATE TABLE t (id SERIAL PRIMARY KEY, v INT)",
    );
    values(
        &mut cluster,
        "INSERT INTO t (v) VALUES (1), (2) RETURNING id",
    );
    tag(&mut cluster, "TRUNCATE t");
    assert_eq!(
        values(&mut cluster, "INSERT INTO t (v) VALUES (3) RETURNING id"),
        vec![3]
    );
    tag(&mut cluster, "TRUNCATE t RESTART IDENTITY");
    assert_eq!(
        values(&mut cluster, "INSERT INTO t (v) VALUES (4) RETURNING id"),
        vec![1]
    );
}

#[test]
fn unique_and_foreign_key_constraints_are_refused_naming_why() {
    let mut cluster = Cluster::new(2);
    tag(&mut cluster, "CREATE TABLE p (id INT PRIMARY KEY)");
    for (sql, message) in [
        (
            "CREATE TABLE a (id INT PRIMARY KEY, e TEXT UNIQUE)",
            "UNIQUE constraints is not supported",
        ),
        (
            "CREATE TABLE a (id INT PRIMARY KEY, e TEXT, UNIQUE (e))",
            "UNIQUE constraints is not supported",
        ),
        (
            "CREATE TABLE a (id INT PRIMARY KEY, p INT REFERENCES p (id))",
            "FOREIGN KEY constraints (REFERENCES) is not supported",
        ),
        (
            "CREATE TABLE a (id INT PRIMARY KEY, p INT, FOREIGN KEY (p) REFERENCES p (id))",
            "FOREIGN KEY constraints is not supported",
        ),
        (
            "CREATE UNIQUE INDEX pi ON p (id)",
            "UNIQUE indexes is not supported",
        ),
    ] {
        let refused = error(&mut cluster, sql);
        assert_eq!(
            (refused.code, refused.message.as_str()),
            ("0A000", message),
            "{sql}"
        );
        assert!(
            refused
                .detail
                .is_some_and(|detail| detail.contains("not enforced")),
            "{sql}"
        );
    }
    // Nothing was created, and pg_constraint holds only the primary key.
    assert_eq!(
        rows(
            &mut cluster,
            "SELECT conname, contype FROM pg_catalog.pg_constraint"
        ),
        vec![vec![Value::Text("p_pkey".into()), Value::Text("p".into())]]
    );
}
