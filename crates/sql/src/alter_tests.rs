//! ALTER TABLE, DROP INDEX, views and IF [NOT] EXISTS notices through parse, plan, K engines
//! and the gateway merge (the answers PostgreSQL 15 gives for the same statements).

use crate::plan::Plan;
use crate::tests::Cluster;
use crate::{parse, plan_statement, SqlError, StatementResult};
use engine::Value;

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
        Ok(result) => panic!("{sql}: expected an error, got {result:?}"),
    }
}

fn tag(cluster: &mut Cluster, sql: &str) -> String {
    match cluster.run(sql) {
        Ok(StatementResult::Command { tag }) | Ok(StatementResult::Rows { tag, .. }) => tag,
        Err(error) => panic!("{sql}: {error:?}"),
    }
}

/// The NOTICEs a statement's plan carries (the gateway sends them if it succeeds).
fn notices(cluster: &Cluster, sql: &str) -> Vec<String> {
    let statement = parse(sql).unwrap().pop().unwrap();
    match plan_statement(&statement, &cluster.catalog).unwrap() {
        Plan::Execute(execution) => execution
            .notices
            .iter()
            .map(|notice| notice.message.clone())
            .collect(),
        other => panic!("{sql}: {other:?}"),
    }
}

fn int(value: i32) -> Value {
    Value::Int(value)
}

fn text(value: &str) -> Value {
    Value::Text(value.to_string())
}

/// `t (id INT PRIMARY KEY, n INT)` with ids 1..=6 over three partitions.
fn table() -> Cluster {
    let mut cluster = Cluster::new(3);
    tag(&mut cluster, "CREATE TABLE t (id INT PRIMARY KEY, n INT)");
    tag(
        &mut cluster,
        "INSERT INTO t VALUES (1, 10), (2, 20), (3, NULL), (4, 40), (5, 50), (6, 60)",
    );
    cluster
}

#[test]
fn add_column_fills_every_partitions_rows_with_the_default_and_keeps_it_for_inserts() {
    let mut cluster = table();
    assert_eq!(
        tag(
            &mut cluster,
            "ALTER TABLE t ADD COLUMN note TEXT DEFAULT 'x' NOT NULL"
        ),
        "ALTER TABLE"
    );
    assert_eq!(
        rows(&mut cluster, "SELECT id, note FROM t ORDER BY id"),
        (1..=6)
            .map(|id| vec![int(id), text("x")])
            .collect::<Vec<_>>()
    );
    tag(&mut cluster, "INSERT INTO t (id, n) VALUES (7, 70)");
    assert_eq!(
        rows(&mut cluster, "SELECT * FROM t WHERE id = 7"),
        vec![vec![int(7), int(70), text("x")]]
    );
    tag(&mut cluster, "ALTER TABLE t ADD extra INT");
    assert_eq!(
        rows(&mut cluster, "SELECT extra FROM t WHERE id = 2"),
        vec![vec![Value::Null]]
    );
    // NOT NULL without a default: fine on an empty table, 23502 on one with rows.
    let refused = error(&mut cluster, "ALTER TABLE t ADD strict INT NOT NULL");
    assert_eq!(refused.code, "23502");
    assert_eq!(
        refused.message,
        "column \"strict\" of relation \"t\" contains null values"
    );
    assert_eq!(
        columns(&mut cluster, "SELECT * FROM t"),
        ["id", "n", "note", "extra"]
    );
    tag(&mut cluster, "CREATE TABLE e (id INT PRIMARY KEY)");
    tag(&mut cluster, "ALTER TABLE e ADD strict INT NOT NULL");
    assert_eq!(
        error(&mut cluster, "INSERT INTO e VALUES (1)").code,
        "23502"
    );
    let duplicate = error(&mut cluster, "ALTER TABLE t ADD n INT");
    assert_eq!(duplicate.code, "42701");
    assert_eq!(
        duplicate.message,
        "column \"n\" of relation \"t\" already exists"
    );
    assert_eq!(
        notices(&cluster, "ALTER TABLE t ADD COLUMN IF NOT EXISTS n INT"),
        ["column \"n\" of relation \"t\" already exists, skipping"]
    );
    assert_eq!(
        error(&mut cluster, "ALTER TABLE t ADD s SERIAL").code,
        "0A000"
    );
}

#[test]
fn add_column_to_a_table_without_a_primary_key_keeps_the_hidden_row_id_last() {
    let mut cluster = Cluster::new(3);
    tag(&mut cluster, "CREATE TABLE h (a INT)");
    tag(&mut cluster, "INSERT INTO h VALUES (1), (2), (3)");
    tag(&mut cluster, "ALTER TABLE h ADD b TEXT DEFAULT 'y'");
    assert_eq!(columns(&mut cluster, "SELECT * FROM h"), ["a", "b"]);
    tag(&mut cluster, "INSERT INTO h VALUES (4, 'z')");
    assert_eq!(
        rows(&mut cluster, "SELECT a, b FROM h ORDER BY a"),
        vec![
            vec![int(1), text("y")],
            vec![int(2), text("y")],
            vec![int(3), text("y")],
            vec![int(4), text("z")],
        ]
    );
}

#[test]
fn drop_column_rewrites_rows_drops_its_indexes_and_refuses_key_columns() {
    let mut cluster = table();
    tag(&mut cluster, "ALTER TABLE t ADD note TEXT DEFAULT 'x'");
    tag(&mut cluster, "CREATE INDEX t_n ON t (n)");
    assert_eq!(
        tag(&mut cluster, "ALTER TABLE t DROP COLUMN n"),
        "ALTER TABLE"
    );
    assert_eq!(columns(&mut cluster, "SELECT * FROM t"), ["id", "note"]);
    assert_eq!(
        rows(&mut cluster, "SELECT * FROM t WHERE id = 4"),
        vec![vec![int(4), text("x")]]
    );
    assert!(cluster.catalog.tables["t"].indexes.is_empty());
    let key = error(&mut cluster, "ALTER TABLE t DROP COLUMN id");
    assert_eq!(key.code, "0A000");
    assert!(key.message.contains("partition key"), "{}", key.message);
    let missing = error(&mut cluster, "ALTER TABLE t DROP COLUMN nope");
    assert_eq!(missing.code, "42703");
    assert_eq!(
        missing.message,
        "column \"nope\" of relation \"t\" does not exist"
    );
    assert_eq!(
        notices(&cluster, "ALTER TABLE t DROP COLUMN IF EXISTS nope"),
        ["column \"nope\" of relation \"t\" does not exist, skipping"]
    );
    assert_eq!(
        notices(&cluster, "ALTER TABLE IF EXISTS nothing ADD a INT"),
        ["relation \"nothing\" does not exist, skipping"]
    );
}

#[test]
fn rename_column_and_table_keep_rows_placement_and_routing() {
    let mut cluster = table();
    tag(&mut cluster, "ALTER TABLE t RENAME COLUMN id TO key");
    assert_eq!(cluster.catalog.tables["t"].options.partition_key, "key");
    assert_eq!(
        rows(&mut cluster, "SELECT key, n FROM t WHERE key = 5"),
        vec![vec![int(5), int(50)]]
    );
    // Rows are placed under the table's placement name, which a rename keeps: a table holding
    // rows is renamed and its rows are found by key where they were.
    tag(&mut cluster, "ALTER TABLE t RENAME TO u");
    assert_eq!(error(&mut cluster, "SELECT * FROM t").code, "42P01");
    assert_eq!(cluster.catalog.tables["u"].options.placement_name, "t");
    for (key, n) in [(1, Value::Int(10)), (3, Value::Null), (6, Value::Int(60))] {
        assert_eq!(
            rows(&mut cluster, &format!("SELECT n FROM u WHERE key = {key}")),
            vec![vec![n]]
        );
    }
    assert_eq!(
        rows(&mut cluster, "SELECT count(*) FROM u"),
        vec![vec![Value::BigInt(6)]]
    );
    tag(&mut cluster, "INSERT INTO u VALUES (8, 80)");
    assert_eq!(
        rows(&mut cluster, "SELECT n FROM u WHERE key = 8"),
        vec![vec![int(80)]]
    );
    tag(&mut cluster, "CREATE TABLE other (id INT PRIMARY KEY)");
    assert_eq!(
        error(&mut cluster, "ALTER TABLE u RENAME TO other").code,
        "42P07"
    );
    assert_eq!(
        error(&mut cluster, "ALTER TABLE u RENAME n TO key").code,
        "42701"
    );
}

#[test]
fn rename_of_a_serial_table_keeps_its_sequence_owned() {
    let mut cluster = Cluster::new(2);
    tag(
        &mut cluster,
        "CREATE TABLE s (id SERIAL PRIMARY KEY, v INT)",
    );
    tag(&mut cluster, "ALTER TABLE s RENAME TO s2");
    tag(&mut cluster, "DROP TABLE s2");
    // The sequence went with the table: its name is free again.
    tag(&mut cluster, "CREATE SEQUENCE s_id_seq");
}

#[test]
fn defaults_and_not_null_change_and_are_validated_against_every_partition() {
    let mut cluster = table();
    tag(&mut cluster, "ALTER TABLE t ALTER COLUMN n SET DEFAULT 7");
    tag(&mut cluster, "INSERT INTO t (id) VALUES (9)");
    assert_eq!(
        rows(&mut cluster, "SELECT n FROM t WHERE id = 9"),
        vec![vec![int(7)]]
    );
    tag(&mut cluster, "ALTER TABLE t ALTER n DROP DEFAULT");
    tag(&mut cluster, "INSERT INTO t (id) VALUES (10)");
    assert_eq!(
        rows(&mut cluster, "SELECT n FROM t WHERE id = 10"),
        vec![vec![Value::Null]]
    );
    let nulls = error(&mut cluster, "ALTER TABLE t ALTER COLUMN n SET NOT NULL");
    assert_eq!(nulls.code, "23502");
    assert_eq!(
        nulls.message,
        "column \"n\" of relation \"t\" contains null values"
    );
    tag(&mut cluster, "DELETE FROM t WHERE n IS NULL");
    tag(&mut cluster, "ALTER TABLE t ALTER COLUMN n SET NOT NULL");
    assert_eq!(
        error(&mut cluster, "INSERT INTO t VALUES (11, NULL)").code,
        "23502"
    );
    tag(&mut cluster, "ALTER TABLE t ALTER COLUMN n DROP NOT NULL");
    tag(&mut cluster, "INSERT INTO t VALUES (11, NULL)");
    let key = error(&mut cluster, "ALTER TABLE t ALTER COLUMN id DROP NOT NULL");
    assert_eq!(key.code, "42P16");
    assert_eq!(key.message, "column \"id\" is in a primary key");
}

#[test]
fn alter_table_refuses_what_it_does_not_build_by_name() {
    let mut cluster = table();
    for (sql, words) in [
        ("ALTER TABLE t ALTER COLUMN n TYPE BIGINT", "TYPE"),
        (
            "ALTER TABLE t ADD CONSTRAINT c CHECK (n > 0) NOT VALID",
            "NOT VALID",
        ),
        ("ALTER TABLE t ADD CONSTRAINT u UNIQUE (n)", "UNIQUE"),
        ("ALTER TABLE t ADD PRIMARY KEY (n)", "primary key"),
        (
            "ALTER TABLE t ADD CONSTRAINT f FOREIGN KEY (n) REFERENCES t (id)",
            "FOREIGN KEY",
        ),
        (
            "ALTER TABLE t ENABLE ROW LEVEL SECURITY",
            "ROW LEVEL SECURITY",
        ),
    ] {
        let refused = error(&mut cluster, sql);
        assert_eq!(refused.code, "0A000", "{sql}");
        assert!(
            refused.message.contains(words),
            "{sql}: {}",
            refused.message
        );
    }
    // Nothing changed.
    assert_eq!(columns(&mut cluster, "SELECT * FROM t"), ["id", "n"]);
}

#[test]
fn drop_index_removes_it_and_if_exists_notices_a_missing_one() {
    let mut cluster = table();
    tag(&mut cluster, "CREATE INDEX t_n ON t (n)");
    assert_eq!(
        notices(&cluster, "CREATE INDEX IF NOT EXISTS t_n ON t (n)"),
        ["relation \"t_n\" already exists, skipping"]
    );
    assert_eq!(tag(&mut cluster, "DROP INDEX t_n"), "DROP INDEX");
    assert!(cluster.catalog.tables["t"].indexes.is_empty());
    let missing = error(&mut cluster, "DROP INDEX t_n");
    assert_eq!(missing.code, "42704");
    assert_eq!(missing.message, "index \"t_n\" does not exist");
    assert_eq!(
        notices(&cluster, "DROP INDEX IF EXISTS t_n"),
        ["index \"t_n\" does not exist, skipping"]
    );
    assert_eq!(error(&mut cluster, "DROP INDEX t_pkey").code, "2BP01");
    assert_eq!(error(&mut cluster, "DROP INDEX t").code, "42809");
    assert_eq!(
        rows(&mut cluster, "SELECT n FROM t WHERE n = 40"),
        vec![vec![int(40)]]
    );
}

#[test]
fn if_not_exists_and_if_exists_notice_as_postgresql() {
    let mut cluster = table();
    assert_eq!(
        notices(
            &cluster,
            "CREATE TABLE IF NOT EXISTS t (id INT PRIMARY KEY)"
        ),
        ["relation \"t\" already exists, skipping"]
    );
    assert_eq!(
        notices(&cluster, "DROP TABLE IF EXISTS nothing"),
        ["table \"nothing\" does not exist, skipping"]
    );
    assert_eq!(
        notices(&cluster, "DROP VIEW IF EXISTS nothing"),
        ["view \"nothing\" does not exist, skipping"]
    );
    assert_eq!(
        notices(&cluster, "DROP SEQUENCE IF EXISTS nothing"),
        ["sequence \"nothing\" does not exist, skipping"]
    );
    tag(&mut cluster, "CREATE SEQUENCE q");
    assert_eq!(
        notices(&cluster, "CREATE SEQUENCE IF NOT EXISTS q"),
        ["relation \"q\" already exists, skipping"]
    );
    // One name missing, one present: the present one is dropped.
    tag(&mut cluster, "DROP TABLE IF EXISTS nothing, t");
    assert_eq!(error(&mut cluster, "SELECT * FROM t").code, "42P01");
}

#[test]
fn views_expand_as_derived_tables_and_follow_their_tables() {
    let mut cluster = table();
    assert_eq!(
        tag(
            &mut cluster,
            "CREATE VIEW big AS SELECT id, n * 2 AS twice FROM t WHERE n > 15"
        ),
        "CREATE VIEW"
    );
    assert_eq!(
        rows(&mut cluster, "SELECT * FROM big ORDER BY id"),
        vec![
            vec![int(2), int(40)],
            vec![int(4), int(80)],
            vec![int(5), int(100)],
            vec![int(6), int(120)],
        ]
    );
    tag(&mut cluster, "INSERT INTO t VALUES (7, 70)");
    assert_eq!(
        rows(&mut cluster, "SELECT twice FROM big AS b WHERE b.id = 7"),
        vec![vec![int(140)]]
    );
    assert_eq!(
        rows(&mut cluster, "SELECT count(*), max(x) FROM big AS b (i, x)"),
        vec![vec![Value::BigInt(5), int(140)]]
    );
    // A view of a view.
    tag(
        &mut cluster,
        "CREATE VIEW top AS SELECT id FROM big WHERE twice > 100",
    );
    assert_eq!(
        rows(&mut cluster, "SELECT id FROM top ORDER BY id"),
        vec![vec![int(6)], vec![int(7)]]
    );
    // Columns named in CREATE VIEW; OR REPLACE may add columns at the end only.
    tag(
        &mut cluster,
        "CREATE VIEW named (a, b) AS SELECT id, n FROM t",
    );
    assert_eq!(columns(&mut cluster, "SELECT * FROM named"), ["a", "b"]);
    tag(
        &mut cluster,
        "CREATE OR REPLACE VIEW named AS SELECT id AS a, n AS b, 1 AS c FROM t",
    );
    assert_eq!(
        columns(&mut cluster, "SELECT * FROM named"),
        ["a", "b", "c"]
    );
    assert_eq!(
        error(
            &mut cluster,
            "CREATE OR REPLACE VIEW named AS SELECT id AS z FROM t"
        )
        .code,
        "42P16"
    );
    assert_eq!(
        error(&mut cluster, "CREATE VIEW named AS SELECT 1").code,
        "42P07"
    );
    assert_eq!(
        notices(&cluster, "CREATE VIEW IF NOT EXISTS named AS SELECT 1"),
        ["relation \"named\" already exists, skipping"]
    );
    // A column added to the table does not appear in a `*` view.
    tag(&mut cluster, "CREATE VIEW everything AS SELECT * FROM t");
    tag(&mut cluster, "ALTER TABLE t ADD z INT DEFAULT 0");
    assert_eq!(
        columns(&mut cluster, "SELECT * FROM everything"),
        ["id", "n"]
    );
}

#[test]
fn writes_joins_and_subqueries_on_views_are_refused_and_dependencies_kept() {
    let mut cluster = table();
    tag(&mut cluster, "CREATE VIEW v AS SELECT id, n FROM t");
    tag(&mut cluster, "CREATE VIEW w AS SELECT id FROM v");
    for sql in [
        "INSERT INTO v VALUES (9, 9)",
        "UPDATE v SET n = 1",
        "DELETE FROM v",
        "TRUNCATE v",
        "CREATE INDEX v_n ON v (n)",
        "SELECT * FROM t WHERE id IN (SELECT id FROM v)",
    ] {
        assert_eq!(error(&mut cluster, sql).code, "0A000", "{sql}");
    }
    // A view in a join is expanded as a derived table (the view of a view too).
    match cluster.run("SELECT w.id, t.n FROM w JOIN t ON w.id = t.id WHERE t.n > 30 ORDER BY 1") {
        Ok(crate::StatementResult::Rows { rows, .. }) => assert_eq!(
            rows,
            [4, 5, 6].map(|id| vec![engine::Value::Int(id), engine::Value::Int(id * 10)])
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(error(&mut cluster, "ALTER TABLE v ADD c INT").code, "42809");
    let not_a_table = error(&mut cluster, "DROP TABLE v");
    assert_eq!(not_a_table.code, "42809");
    assert_eq!(not_a_table.message, "\"v\" is not a table");
    assert_eq!(error(&mut cluster, "DROP VIEW t").code, "42809");
    let depends = error(&mut cluster, "DROP TABLE t");
    assert_eq!(depends.code, "2BP01");
    assert_eq!(
        depends.message,
        "cannot drop table t because other objects depend on it"
    );
    assert_eq!(error(&mut cluster, "DROP VIEW v").code, "2BP01");
    let column = error(&mut cluster, "ALTER TABLE t DROP COLUMN n");
    assert_eq!(column.code, "2BP01");
    assert_eq!(
        column.message,
        "cannot drop column n of table t because other objects depend on it"
    );
    assert_eq!(
        error(&mut cluster, "ALTER TABLE t RENAME COLUMN n TO m").code,
        "0A000"
    );
    assert_eq!(
        notices(&cluster, "DROP TABLE t CASCADE"),
        ["drop cascades to 2 other objects"]
    );
    tag(&mut cluster, "DROP TABLE t CASCADE");
    assert_eq!(error(&mut cluster, "SELECT * FROM v").code, "42P01");
    assert_eq!(error(&mut cluster, "SELECT * FROM w").code, "42P01");
}

#[test]
fn drop_column_cascade_drops_the_views_that_read_it() {
    let mut cluster = table();
    tag(&mut cluster, "CREATE VIEW v AS SELECT id, n FROM t");
    tag(&mut cluster, "CREATE VIEW ids AS SELECT id FROM t");
    assert_eq!(
        notices(&cluster, "ALTER TABLE t DROP COLUMN n CASCADE"),
        ["drop cascades to view v"]
    );
    tag(&mut cluster, "ALTER TABLE t DROP COLUMN n CASCADE");
    assert_eq!(error(&mut cluster, "SELECT * FROM v").code, "42P01");
    assert_eq!(
        rows(&mut cluster, "SELECT count(*) FROM ids"),
        vec![vec![Value::BigInt(6)]]
    );
}

#[test]
fn catalog_shows_views_as_postgresql_does() {
    let mut cluster = table();
    tag(&mut cluster, "CREATE VIEW v AS SELECT id, n FROM t");
    assert_eq!(
        rows(
            &mut cluster,
            "SELECT relname, relkind FROM pg_class WHERE relname IN ('t', 'v') ORDER BY relname"
        ),
        vec![vec![text("t"), text("r")], vec![text("v"), text("v")]]
    );
    assert_eq!(
        rows(
            &mut cluster,
            "SELECT table_name, table_type FROM information_schema.tables ORDER BY table_name"
        ),
        vec![
            vec![text("t"), text("BASE TABLE")],
            vec![text("v"), text("VIEW")]
        ]
    );
    assert_eq!(
        rows(&mut cluster, "SELECT tablename FROM pg_tables"),
        vec![vec![text("t")]]
    );
    assert_eq!(
        rows(&mut cluster, "SELECT viewname, definition FROM pg_views"),
        vec![vec![text("v"), text(" SELECT id, n FROM t;")]]
    );
    assert_eq!(
        rows(
            &mut cluster,
            "SELECT table_name, view_definition FROM information_schema.views"
        ),
        vec![vec![text("v"), text(" SELECT id, n FROM t;")]]
    );
    assert_eq!(
        rows(&mut cluster, "SELECT column_name FROM information_schema.columns WHERE table_name = 'v' ORDER BY ordinal_position"),
        vec![vec![text("id")], vec![text("n")]]
    );
}

#[test]
fn a_view_cannot_read_itself() {
    let mut cluster = table();
    tag(&mut cluster, "CREATE VIEW v AS SELECT id FROM t");
    let recursive = error(&mut cluster, "CREATE OR REPLACE VIEW v AS SELECT id FROM v");
    assert_eq!(recursive.code, "42P17");
    assert_eq!(
        rows(&mut cluster, "SELECT count(*) FROM v"),
        vec![vec![Value::BigInt(6)]]
    );
}
