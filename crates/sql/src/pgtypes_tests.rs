//! UUID (and the other types of issue 20's second list) through parse, plan, three engines and
//! the gateway merge. The expected answers are PostgreSQL 15's for the same statements.

use crate::tests::Cluster;
use crate::{types, SqlError, StatementResult};
use engine::{DataType, Value};

/// Every statement runs as the gateway runs it: stamped with a time and fresh entropy.
fn texts(cluster: &mut Cluster, sql: &str) -> Vec<String> {
    match cluster.run_sequenced(sql) {
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

fn run(cluster: &mut Cluster, sql: &str) -> String {
    match cluster.run_sequenced(sql) {
        Ok(StatementResult::Command { tag }) | Ok(StatementResult::Rows { tag, .. }) => tag,
        Err(error) => panic!("{sql}: {error}"),
    }
}

fn error(cluster: &mut Cluster, sql: &str) -> SqlError {
    match cluster.run_sequenced(sql) {
        Err(error) => error,
        Ok(result) => panic!("{sql} should fail, answered {result:?}"),
    }
}

const A0: &str = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11";

#[test]
fn uuid_keys_take_every_input_form_and_sort_bytewise() {
    let mut cluster = Cluster::new(3);
    run(&mut cluster, "CREATE TABLE u (id UUID PRIMARY KEY, n INT)");
    run(
        &mut cluster,
        "INSERT INTO u VALUES ('{A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11}', 1), \
         ('00000000000000000000000000000001', 2), ('ffffffff-ffff-ffff-ffff-ffffffffffff', 3)",
    );
    assert_eq!(
        texts(&mut cluster, "SELECT id, n FROM u ORDER BY id"),
        [
            "00000000-0000-0000-0000-000000000001|2",
            &format!("{A0}|1"),
            "ffffffff-ffff-ffff-ffff-ffffffffffff|3"
        ]
    );
    // Any spelling of the key finds the row and collides with it.
    assert_eq!(
        texts(
            &mut cluster,
            "SELECT n FROM u WHERE id = 'a0eebc999c0b4ef8bb6d6bb9bd380a11'"
        ),
        ["1"]
    );
    assert_eq!(
        texts(
            &mut cluster,
            "SELECT n FROM u WHERE id > 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'"
        ),
        ["3"]
    );
    let duplicate = error(
        &mut cluster,
        &format!("INSERT INTO u VALUES ('{}', 9)", A0.to_uppercase()),
    );
    assert_eq!(duplicate.code, "23505");
    let bad = error(&mut cluster, "INSERT INTO u VALUES ('a0eebc99-9c0b', 9)");
    assert_eq!(bad.code, "22P02");
    assert_eq!(
        bad.message,
        "invalid input syntax for type uuid: \"a0eebc99-9c0b\""
    );
    assert_eq!(
        texts(
            &mut cluster,
            "SELECT '{A0EEBC99-9C0B4EF8-BB6D6BB9-BD380A11}'::uuid, \
             CAST('A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11' AS uuid)::text, format_type(2950, -1)"
        ),
        [format!("{A0}|{A0}|uuid")]
    );
    let mismatch = error(&mut cluster, "SELECT n FROM u WHERE id = 1");
    assert_eq!(mismatch.code, "42883", "{mismatch}");
}

#[test]
fn gen_random_uuid_draws_distinct_version_4_values_once_per_row() {
    let mut cluster = Cluster::new(3);
    run(
        &mut cluster,
        "CREATE TABLE g (id UUID PRIMARY KEY DEFAULT gen_random_uuid(), n INT)",
    );
    assert_eq!(
        run(&mut cluster, "INSERT INTO g (n) VALUES (1), (2), (3)"),
        "INSERT 0 3"
    );
    run(&mut cluster, "INSERT INTO g (n) VALUES (4), (5)");
    run(
        &mut cluster,
        "INSERT INTO g VALUES (gen_random_uuid(), 6), (gen_random_uuid(), 7)",
    );
    let ids = texts(&mut cluster, "SELECT id FROM g");
    assert_eq!(ids.len(), 7);
    let distinct: std::collections::BTreeSet<_> = ids.iter().collect();
    assert_eq!(distinct.len(), 7, "{ids:?}");
    for id in &ids {
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4", "version 4: {id}");
        assert!("89ab".contains(&id[19..20]), "RFC 4122 variant: {id}");
    }
    assert_eq!(
        texts(
            &mut cluster,
            "SELECT column_default FROM information_schema.columns WHERE table_name = 'g' AND column_name = 'id'"
        ),
        ["gen_random_uuid()"]
    );
    // One value per occurrence at planning: over a table's rows it is refused, not repeated.
    for sql in [
        "SELECT gen_random_uuid() FROM g",
        "UPDATE g SET id = gen_random_uuid() WHERE n = 1",
    ] {
        let refused = error(&mut cluster, sql);
        assert_eq!(refused.code, "0A000", "{sql}: {refused}");
    }
    let frozen = error(
        &mut cluster,
        "CREATE TABLE h (id TEXT DEFAULT gen_random_uuid()::text)",
    );
    assert_eq!(frozen.code, "0A000", "{frozen}");
    let wrong = error(
        &mut cluster,
        "CREATE TABLE h (id INT DEFAULT gen_random_uuid())",
    );
    assert_eq!(wrong.code, "42804", "{wrong}");
}

#[test]
fn the_same_stamp_draws_the_same_uuids() {
    let first = crate::expr::uuid_from_entropy(7, 0);
    assert_eq!(first, crate::expr::uuid_from_entropy(7, 0));
    assert_ne!(first, crate::expr::uuid_from_entropy(7, 1));
    assert_ne!(first, crate::expr::uuid_from_entropy(8, 0));
    assert_eq!(
        types::decode_binary(
            &types::encode_binary(&Value::Uuid(first)).unwrap(),
            DataType::Uuid
        )
        .unwrap(),
        Value::Uuid(first)
    );
    assert_eq!(types::pg_type(DataType::Uuid).oid, 2950);
    assert_eq!(
        types::decode_binary(&[1, 2, 3], DataType::Uuid)
            .unwrap_err()
            .code,
        "22P03"
    );
}

fn events(cluster: &mut Cluster) {
    run(
        cluster,
        "CREATE TABLE ev (id INT PRIMARY KEY, at TIMESTAMPTZ NOT NULL, took INTERVAL)",
    );
    run(
        cluster,
        "INSERT INTO ev VALUES (1, '2024-01-31 10:00:00+00', '1 day 02:03:04'), \
         (2, '2024-02-29 00:00:00+00', '-1 days +01:00:00'), \
         (3, '2023-12-31 23:59:59.5+00', '1 year 2 mons'), (4, '2024-03-01 12:00:00+00', 'P1DT12H')",
    );
}

/// The answers are PostgreSQL 15's for the same table and statements.
#[test]
fn intervals_print_order_and_compute_as_postgresql_15() {
    let mut cluster = Cluster::new(3);
    events(&mut cluster);
    assert_eq!(
        texts(
            &mut cluster,
            "SELECT id, took, at + took, at - interval '1 hour', extract(epoch from took) \
             FROM ev ORDER BY took, id"
        ),
        [
            "2|-1 days +01:00:00|2024-02-28 01:00:00+00|2024-02-28 23:00:00+00|-82800.000000",
            "1|1 day 02:03:04|2024-02-01 12:03:04+00|2024-01-31 09:00:00+00|93784.000000",
            "4|1 day 12:00:00|2024-03-03 00:00:00+00|2024-03-01 11:00:00+00|129600.000000",
            "3|1 year 2 mons|2025-02-28 23:59:59.5+00|2023-12-31 22:59:59.5+00|36741600.000000",
        ]
    );
    assert_eq!(
        texts(&mut cluster, "SELECT max(at) - min(at) FROM ev"),
        ["60 days 12:00:00.5"]
    );
    assert_eq!(
        texts(
            &mut cluster,
            "SELECT id FROM ev WHERE took > '1 day' ORDER BY id"
        ),
        ["1", "3", "4"]
    );
    assert_eq!(
        texts(
            &mut cluster,
            "SELECT interval '1 mon' = interval '30 days', interval '1 day' * 1.5, \
             interval '1 mon' / 3, -interval '1 day', date '2024-01-01' + 1, \
             date '2024-02-01' - date '2024-01-01', date '2024-01-01' + interval '1 day', \
             2 * '1 hour'::interval, extract(year from timestamp '2024-03-05 01:02:03.5'), \
             extract(second from timestamp '2024-03-05 01:02:03.5'), now() - interval '1 hour'"
        ),
        [
            "t|1 day 12:00:00|10 days|-1 days|2024-01-02|31|2024-01-02 00:00:00|02:00:00|2024|3.500000|1969-12-31 23:00:00+00"
        ]
    );
    // Computed by every replica (UPDATE SET with an expression).
    run(
        &mut cluster,
        "UPDATE ev SET took = took * 2, at = at + interval '1 mon' WHERE id = 1",
    );
    assert_eq!(
        texts(&mut cluster, "SELECT took, at FROM ev WHERE id = 1"),
        ["2 days 04:06:08|2024-02-29 10:00:00+00"]
    );
    for (sql, code, message) in [
        (
            "SELECT interval 'abc'",
            "22P02",
            "invalid input syntax for type interval: \"abc\"",
        ),
        ("SELECT interval '1 day' / 0", "22012", "division by zero"),
        (
            "SELECT at + 1 FROM ev",
            "42883",
            "operator does not exist: timestamp with time zone + integer",
        ),
        (
            "SELECT extract(foo from took) FROM ev",
            "0A000",
            "unit \"foo\" not supported for type interval",
        ),
        (
            "SELECT interval '1' day",
            "0A000",
            "an INTERVAL literal with fields or a precision (INTERVAL '1' DAY) is not supported",
        ),
    ] {
        let failure = error(&mut cluster, sql);
        assert_eq!(
            (failure.code, failure.message.as_str()),
            (code, message),
            "{sql}"
        );
    }
    assert_eq!(
        texts(&mut cluster, "SELECT format_type(1186, -1)"),
        ["interval"]
    );
}

/// The answers are PostgreSQL 15's for the same table and statements.
#[test]
fn jsonb_is_stored_canonically_and_its_operators_answer_as_postgresql_15() {
    let mut cluster = Cluster::new(3);
    run(
        &mut cluster,
        "CREATE TABLE docs (id INT PRIMARY KEY, doc JSONB, raw JSON)",
    );
    run(
        &mut cluster,
        r#"INSERT INTO docs VALUES (1, '{"b": [1, 2.50], "a": {"k": "x"}, "a": {"k": "z"}}', '{"z":1}'),
           (2, '[1, "two", null]', NULL), (3, '{"a": {"k": "y"}, "tags": ["t1", "t2"]}', NULL),
           (4, '"text"', NULL)"#,
    );
    assert_eq!(
        texts(
            &mut cluster,
            r#"SELECT id, doc, doc -> 'a', doc ->> 'tags', doc #>> '{a,k}', doc @> '{"a": {"k": "y"}}', doc ? 'tags', jsonb_typeof(doc) FROM docs ORDER BY id"#
        ),
        [
            r#"1|{"a": {"k": "z"}, "b": [1, 2.50]}|{"k": "z"}||z|f|f|object"#,
            r#"2|[1, "two", null]||||f|f|array"#,
            r#"3|{"a": {"k": "y"}, "tags": ["t1", "t2"]}|{"k": "y"}|["t1", "t2"]|y|t|t|object"#,
            r#"4|"text"||||f|f|string"#,
        ]
    );
    assert_eq!(
        texts(
            &mut cluster,
            r#"SELECT '[1,2,3]'::jsonb -> 1, '[1,2,3]'::jsonb -> -1, '{"a":{"b":[5,6]}}'::jsonb #> '{a,b,1}', '{"a":1}'::jsonb <@ '{"a":1,"b":2}', '{"a":1}'::jsonb ?| array['x','a'], '{"a":1}'::jsonb ?& array['x','a'], jsonb_array_length('[1,2]'), jsonb_build_object('a', 1, 'b', 'x', 'c', null), to_jsonb('x'::text), to_jsonb(1.50), '{"a":1}'::jsonb = '{ "a" : 1 }'"#
        ),
        [r#"2|3|6|t|t|f|2|{"a": 1, "b": "x", "c": null}|"x"|1.50|t"#]
    );
    assert_eq!(
        texts(
            &mut cluster,
            "SELECT id FROM docs WHERE doc ->> 'tags' IS NOT NULL"
        ),
        ["3"]
    );
    assert_eq!(
        texts(&mut cluster, "SELECT raw FROM docs WHERE id = 1"),
        [r#"{"z": 1}"#]
    );
    run(
        &mut cluster,
        "UPDATE docs SET doc = jsonb_build_object('n', id, 'old', doc -> 'a') WHERE id = 3",
    );
    assert_eq!(
        texts(&mut cluster, "SELECT doc FROM docs WHERE id = 3"),
        [r#"{"n": 3, "old": {"k": "y"}}"#]
    );
    let bad = error(
        &mut cluster,
        r#"INSERT INTO docs VALUES (5, '{"a" 1}', NULL)"#,
    );
    assert_eq!(
        (bad.code, bad.message.as_str()),
        ("22P02", "invalid input syntax for type json")
    );
    let scalar = error(&mut cluster, "SELECT jsonb_array_length('1')");
    assert_eq!(scalar.code, "22023");
    assert_eq!(
        texts(
            &mut cluster,
            "SELECT format_type(3802, -1), format_type(114, -1)"
        ),
        ["jsonb|json"]
    );
    let value = Value::Jsonb(r#"{"a": [1]}"#.into());
    let bytes = types::encode_binary(&value).unwrap();
    assert_eq!(bytes[0], 1, "jsonb_send's version byte");
    assert_eq!(
        types::decode_binary(&bytes, DataType::Jsonb).unwrap(),
        value
    );
    assert_eq!(
        types::decode_binary(b"\x02{}", DataType::Jsonb)
            .unwrap_err()
            .code,
        "22P03"
    );
}

/// The answers are PostgreSQL 15's for the same table and statements.
#[test]
fn smallint_and_real_are_their_own_types_with_postgresql_ranges_and_digits() {
    let mut cluster = Cluster::new(3);
    run(
        &mut cluster,
        "CREATE TABLE m (id INT PRIMARY KEY, s SMALLINT, r REAL, f FLOAT4, i INT2)",
    );
    run(
        &mut cluster,
        "INSERT INTO m VALUES (1, 1, 0.1, 1, 1), (2, -32768, 1234567, 2, 2), \
         (3, 32767, 3.4e38, 3, 3), (4, NULL, 1e-5, 4, 4)",
    );
    let columns = match cluster.run_sequenced("SELECT s, r, s + 1, r * 2, min(s) OVER () FROM m") {
        Ok(StatementResult::Rows { columns, .. }) => columns,
        other => panic!("{other:?}"),
    };
    let oids: Vec<u32> = columns
        .iter()
        .map(|column| types::pg_type(column.data_type).oid)
        .collect();
    assert_eq!(oids, [21, 700, 23, 701, 21]);
    let shown = match cluster.run_sequenced("SELECT id, s, r, r * 2, s + 1 FROM m ORDER BY id") {
        Ok(StatementResult::Rows { columns, rows, .. }) => rows
            .iter()
            .map(|row| {
                row.iter()
                    .zip(&columns)
                    .map(|(value, column)| {
                        types::encode_text_as(value, column.data_type).unwrap_or_default()
                    })
                    .collect::<Vec<_>>()
                    .join("|")
            })
            .collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        shown,
        [
            "1|1|0.1|0.20000000298023224|2",
            "2|-32768|1.234567e+06|2469134|-32767",
            "3|32767|3.4e+38|6.7999999042887285e+38|32768",
            "4||1e-05|1.9999999494757503e-05|",
        ]
    );
    for (sql, message) in [
        (
            "INSERT INTO m (id, s) VALUES (9, 99999)",
            "smallint out of range",
        ),
        (
            "INSERT INTO m (id, s) VALUES (9, '99999')",
            "value \"99999\" is out of range for type smallint",
        ),
        (
            "UPDATE m SET s = s + 1 WHERE id = 3",
            "smallint out of range",
        ),
        (
            "INSERT INTO m (id, r) VALUES (9, 1e39)",
            "value out of range: overflow",
        ),
        (
            "INSERT INTO m (id) VALUES (3000000000)",
            "integer out of range",
        ),
    ] {
        let failure = error(&mut cluster, sql);
        assert_eq!(
            (failure.code, failure.message.as_str()),
            ("22003", message),
            "{sql}"
        );
    }
    assert_eq!(
        texts(
            &mut cluster,
            "SELECT data_type FROM information_schema.columns WHERE table_name = 'm' ORDER BY ordinal_position"
        ),
        ["integer", "smallint", "real", "real", "smallint"]
    );
    assert_eq!(
        texts(
            &mut cluster,
            "SELECT format_type(21, -1), format_type(700, -1)"
        ),
        ["smallint|real"]
    );
    assert_eq!(
        types::encode_binary_as(&Value::Int(-2), DataType::SmallInt).unwrap(),
        [0xff, 0xfe]
    );
    assert_eq!(
        types::encode_binary_as(&Value::Double(f64::from(0.1f32)), DataType::Real).unwrap(),
        0.1f32.to_bits().to_be_bytes()
    );
    assert_eq!(
        types::decode_binary(&0.1f32.to_bits().to_be_bytes(), DataType::Real).unwrap(),
        Value::Double(f64::from(0.1f32))
    );
}
