//! `INSERT … ON CONFLICT … DO UPDATE SET col = expression [WHERE …]` over the stored row and
//! EXCLUDED, through parse, plan, K engines and the gateway: the rows and error codes
//! PostgreSQL 15 gives for the same statements (compared with a real server).

use crate::tests::Cluster;
use crate::StatementResult;
use engine::Value;

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

fn stock(partitions: usize) -> Cluster {
    let mut cluster = Cluster::new(partitions);
    cluster.tag("CREATE TABLE stock (id INT PRIMARY KEY, n INT NOT NULL, note TEXT)");
    cluster.tag("INSERT INTO stock VALUES (1, 10, 'a'), (2, 20, 'b')");
    cluster
}

#[test]
fn do_update_computes_over_the_stored_row_and_excluded() {
    for partitions in [1, 3] {
        let mut cluster = stock(partitions);
        assert_eq!(
            cluster.tag(
                "INSERT INTO stock VALUES (1, 5, 'x'), (3, 7, 'c') ON CONFLICT (id) DO UPDATE \
                 SET n = stock.n + excluded.n, note = stock.note || excluded.note"
            ),
            "INSERT 0 2"
        );
        assert_eq!(
            lines(&mut cluster, "SELECT * FROM stock ORDER BY id"),
            ["1|15|ax", "2|20|b", "3|7|c"]
        );
        // An alias, CASE and a function.
        assert_eq!(
            cluster.tag(
                "INSERT INTO stock AS s VALUES (2, 1, 'y') ON CONFLICT (id) DO UPDATE \
                 SET n = CASE WHEN s.n > 15 THEN s.n - excluded.n ELSE 0 END, \
                 note = upper(excluded.note)"
            ),
            "INSERT 0 1"
        );
        // DO UPDATE … WHERE: rows whose condition is not true stay and are not counted.
        assert_eq!(
            cluster.tag(
                "INSERT INTO stock VALUES (1, 100, 'z'), (2, 100, 'z') ON CONFLICT ON CONSTRAINT \
                 stock_pkey DO UPDATE SET n = excluded.n WHERE stock.n < 15"
            ),
            "INSERT 0 0"
        );
        assert_eq!(
            cluster.tag(
                "INSERT INTO stock VALUES (1, 100, 'z'), (4, 4, 'd') ON CONFLICT (id) DO UPDATE \
                 SET n = excluded.n + stock.n WHERE stock.note = 'ax'"
            ),
            "INSERT 0 2"
        );
        assert_eq!(
            lines(&mut cluster, "SELECT * FROM stock ORDER BY id"),
            ["1|115|ax", "2|19|Y", "3|7|c", "4|4|d"]
        );
    }
}

#[test]
fn do_update_errors_are_postgresql_s_and_change_nothing() {
    let mut cluster = stock(1);
    for (sql, code) in [
        // Evaluated at the partition: the whole insert fails, the new row 5 too.
        (
            "INSERT INTO stock VALUES (5, 1, 'e'), (1, 1, 'q') ON CONFLICT (id) DO UPDATE \
             SET n = stock.n / 0",
            "22012",
        ),
        (
            "INSERT INTO stock VALUES (1, 1, 'q') ON CONFLICT (id) DO UPDATE SET n = NULL + stock.n",
            "23502",
        ),
        (
            "INSERT INTO stock VALUES (1, 1, 'q'), (1, 2, 'r') ON CONFLICT (id) DO UPDATE \
             SET n = stock.n + 1",
            "21000",
        ),
        // At planning.
        (
            "INSERT INTO stock VALUES (1, 1, 'q') ON CONFLICT (id) DO UPDATE SET n = stock.note",
            "42804",
        ),
        (
            "INSERT INTO stock VALUES (1, 1, 'q') ON CONFLICT (id) DO UPDATE SET n = n + 1",
            "42702",
        ),
        (
            "INSERT INTO stock VALUES (1, 1, 'q') ON CONFLICT (id) DO UPDATE \
             SET n = stock.n + 1 WHERE stock.note",
            "42804",
        ),
        (
            "INSERT INTO stock VALUES (1, 1, 'q') ON CONFLICT ON CONSTRAINT nope DO UPDATE \
             SET n = stock.n",
            "42704",
        ),
        (
            "INSERT INTO stock VALUES (1, 1, 'q') ON CONFLICT (id) DO UPDATE \
             SET n = stock.n + 1 RETURNING nope",
            "42703",
        ),
    ] {
        let error = cluster.run(sql).expect_err(sql);
        assert_eq!(error.code, code, "{sql}: {error}");
    }
    assert_eq!(
        lines(&mut cluster, "SELECT * FROM stock ORDER BY id"),
        ["1|10|a", "2|20|b"]
    );
    assert_eq!(
        cluster
            .run("SELECT count(*) FROM stock WHERE id = 5")
            .unwrap(),
        StatementResult::Rows {
            columns: vec![crate::OutputColumn::new("count", engine::DataType::BigInt)],
            rows: vec![vec![Value::BigInt(0)]],
            tag: "SELECT 1".into(),
        }
    );
}
