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
