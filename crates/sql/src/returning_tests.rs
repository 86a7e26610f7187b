//! UPDATE … RETURNING and DELETE … RETURNING over K partitions: the rows the statement
//! changed, read by the statement's own batch, with the SET clauses applied as the engine
//! applies them.

use crate::tests::Cluster;
use crate::{parse, prepare, types, StatementResult};
use engine::Value;

fn accounts(partitions: usize) -> Cluster {
    let mut cluster = Cluster::new(partitions);
    cluster.tag("CREATE TABLE acct (id INT PRIMARY KEY, owner TEXT, n INT, city VARCHAR(8))");
    cluster.tag(
        "INSERT INTO acct VALUES (1, 'ann', 10, 'LHR'), (2, 'bob', 20, 'CDG'), \
         (3, 'cy', NULL, 'LHR'), (4, 'dee', 40, 'LHR'), (5, 'eve', 5, 'JFK'), (6, 'fay', 60, 'CDG')",
    );
    cluster
}

fn answer(cluster: &mut Cluster, sql: &str) -> (Vec<String>, Vec<Vec<Value>>, String) {
    match cluster.run(sql) {
        Ok(StatementResult::Rows { columns, rows, tag }) => (
            columns.into_iter().map(|column| column.name).collect(),
            rows,
            tag,
        ),
        other => panic!("{sql}: {other:?}"),
    }
}

fn int(value: i32) -> Value {
    Value::Int(value)
}

fn text(value: &str) -> Value {
    Value::Text(value.to_string())
}

#[test]
fn update_returning_answers_the_new_rows_in_key_order_on_every_split() {
    for partitions in [1, 2, 3] {
        let mut cluster = accounts(partitions);
        let (columns, rows, tag) = answer(
            &mut cluster,
            "UPDATE acct SET n = n + 10, city = lower(city) WHERE city = 'LHR' \
             RETURNING id, n, n - 10 AS old_n, city, owner || '!'",
        );
        assert_eq!(tag, "UPDATE 3");
        assert_eq!(columns, ["id", "n", "old_n", "city", "?column?"]);
        assert_eq!(
            rows,
            vec![
                vec![int(1), int(20), int(10), text("lhr"), text("ann!")],
                vec![int(3), Value::Null, Value::Null, text("lhr"), text("cy!")],
                vec![int(4), int(50), int(40), text("lhr"), text("dee!")],
            ],
            "{partitions} partitions"
        );
        // The table holds what was returned.
        assert_eq!(
            answer(
                &mut cluster,
                "SELECT id, n, city FROM acct WHERE id IN (1, 4) ORDER BY id"
            )
            .1,
            vec![
                vec![int(1), int(20), text("lhr")],
                vec![int(4), int(50), text("lhr")]
            ]
        );
        // Constant SET clauses (the shared-scan update), RETURNING *; a swap reads the old row.
        let (columns, rows, tag) = answer(
            &mut cluster,
            "UPDATE acct AS a SET n = 0, owner = a.city, city = owner WHERE id >= 5 RETURNING *",
        );
        assert_eq!(tag, "UPDATE 2");
        assert_eq!(columns, ["id", "owner", "n", "city"]);
        assert_eq!(
            rows,
            vec![
                vec![int(5), text("JFK"), int(0), text("eve")],
                vec![int(6), text("CDG"), int(0), text("fay")],
            ]
        );
        let (_, rows, tag) = answer(
            &mut cluster,
            "UPDATE acct SET n = 1 WHERE id = 99 RETURNING id",
        );
        assert_eq!((rows.len(), tag.as_str()), (0, "UPDATE 0"));
    }
}

#[test]
fn delete_returning_answers_the_deleted_rows() {
    for partitions in [1, 3] {
        let mut cluster = accounts(partitions);
        let (columns, rows, tag) = answer(
            &mut cluster,
            "DELETE FROM acct WHERE n < 25 OR n IS NULL RETURNING *, n * 2 AS twice",
        );
        assert_eq!(tag, "DELETE 4");
        assert_eq!(columns, ["id", "owner", "n", "city", "twice"]);
        let ids: Vec<Value> = rows.iter().map(|row| row[0].clone()).collect();
        assert_eq!(ids, vec![int(1), int(2), int(3), int(5)]);
        assert_eq!(
            rows[1],
            vec![int(2), text("bob"), int(20), text("CDG"), int(40)]
        );
        assert_eq!(
            answer(&mut cluster, "SELECT id FROM acct ORDER BY id").1,
            vec![vec![int(4)], vec![int(6)]]
        );
    }
}

#[test]
fn a_failing_update_returns_nothing_and_changes_nothing() {
    let mut cluster = accounts(1);
    let error = cluster
        .run("UPDATE acct SET n = 100 / (n - 5) RETURNING id, n")
        .unwrap_err();
    assert_eq!(error.code, "22012");
    assert_eq!(
        answer(&mut cluster, "SELECT n FROM acct WHERE id = 5").1,
        vec![vec![int(5)]]
    );
    let error = cluster
        .run("UPDATE acct SET n = 1 RETURNING nope")
        .unwrap_err();
    assert_eq!(error.code, "42703");
    let error = cluster
        .run("DELETE FROM acct RETURNING count(*)")
        .unwrap_err();
    assert_eq!(error.code, "42803");
}

#[test]
fn prepared_returning_describes_its_columns_and_binds_parameters() {
    let mut cluster = accounts(2);
    let prepared = prepare(
        "UPDATE acct SET n = n + $1 WHERE id = $2 RETURNING n, city",
        &cluster.catalog,
        &[],
    )
    .unwrap();
    let oids: Vec<u32> = prepared
        .columns
        .iter()
        .map(|column| types::pg_type(column.data_type).oid)
        .collect();
    assert_eq!(oids, vec![23, 1043]);
    let plan = prepared
        .bind(&cluster.catalog, &[Some(int(7)), Some(int(2))])
        .unwrap();
    match cluster.execute(plan).unwrap() {
        StatementResult::Rows { rows, tag, .. } => {
            assert_eq!(tag, "UPDATE 1");
            assert_eq!(rows, vec![vec![int(27), text("CDG")]]);
        }
        other => panic!("{other:?}"),
    }
    assert!(parse("DELETE FROM acct RETURNING id").is_ok());
}

/// INSERT … ON CONFLICT … RETURNING answers the rows inserted or updated, in statement order,
/// not the ones DO NOTHING skips or a DO UPDATE … WHERE leaves (PostgreSQL 15's answers).
#[test]
fn insert_on_conflict_returning_answers_inserted_and_updated_rows_as_postgresql() {
    for partitions in [1, 3] {
        let mut cluster = Cluster::new(partitions);
        cluster.tag("CREATE TABLE r (id INT PRIMARY KEY, n INT, note TEXT DEFAULT 'd')");
        cluster.tag("INSERT INTO r VALUES (1, 10, 'a'), (2, 20, 'b'), (3, 30, 'c')");
        let (columns, rows, tag) = answer(
            &mut cluster,
            "INSERT INTO r VALUES (2, 0), (4, 40), (1, 0) ON CONFLICT (id) DO NOTHING RETURNING *",
        );
        assert_eq!(columns, ["id", "n", "note"]);
        assert_eq!(rows, vec![vec![int(4), int(40), text("d")]]);
        assert_eq!(tag, "INSERT 0 1");
        let (columns, rows, tag) = answer(
            &mut cluster,
            "INSERT INTO r AS x VALUES (3, 5), (5, 50), (1, 7) ON CONFLICT (id) \
             DO UPDATE SET n = x.n + excluded.n WHERE x.n < 20 RETURNING id, n * 2 AS twice, note",
        );
        assert_eq!(columns, ["id", "twice", "note"]);
        assert_eq!(
            rows,
            vec![
                vec![int(5), int(100), text("d")],
                vec![int(1), int(34), text("a")]
            ]
        );
        assert_eq!(tag, "INSERT 0 2");
        let (_, rows, _) = answer(
            &mut cluster,
            "INSERT INTO r VALUES (2, 1) ON CONFLICT (id) DO UPDATE SET note = 'u' RETURNING note, id",
        );
        assert_eq!(rows, vec![vec![text("u"), int(2)]]);
        let (_, rows, tag) = answer(
            &mut cluster,
            "INSERT INTO r VALUES (2, 1) ON CONFLICT (id) DO NOTHING RETURNING id",
        );
        assert!(rows.is_empty());
        assert_eq!(tag, "INSERT 0 0");
        let (_, rows, _) = answer(&mut cluster, "SELECT * FROM r ORDER BY id");
        assert_eq!(
            rows,
            vec![
                vec![int(1), int(17), text("a")],
                vec![int(2), int(20), text("u")],
                vec![int(3), int(30), text("c")],
                vec![int(4), int(40), text("d")],
                vec![int(5), int(50), text("d")],
            ]
        );
    }
}
