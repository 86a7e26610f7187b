//! Semi-joins (`plan::semi_join`): the same answers as the one-batch plan, which tables are
//! probed and how, and EXPLAIN.

use crate::merge_tests::Prng;
use crate::plan::{Plan, Routing};
use crate::tests::Cluster;
use crate::{parse, plan_statement, StatementResult};
use engine::{Operation, Predicate, Value};

fn answer(cluster: &mut Cluster, sql: &str) -> Result<Vec<Vec<Value>>, String> {
    match cluster.run(sql) {
        Ok(StatementResult::Rows { rows, .. }) => Ok(rows),
        Ok(other) => Err(format!("{other:?}")),
        Err(error) => Err(format!("{} {}", error.code, error.message)),
    }
}

type Answer = Result<Vec<Vec<Value>>, String>;

/// Both plans' answers: (semi-join, one batch), and whether the semi-join ran.
fn both(cluster: &mut Cluster, sql: &str) -> (Answer, Answer, bool) {
    cluster.semi_joins = true;
    let before = cluster.semi_joins_run;
    let semi = answer(cluster, sql);
    let ran = cluster.semi_joins_run > before;
    cluster.semi_joins = false;
    let batch = answer(cluster, sql);
    cluster.semi_joins = true;
    (semi, batch, ran)
}

/// TPC-C's stock and order lines, a few warehouses and districts.
fn tpcc(partitions: usize) -> Cluster {
    let mut cluster = Cluster::new(partitions);
    cluster.tag(
        "CREATE TABLE stock (s_w_id INT, s_i_id INT, s_quantity INT, s_data TEXT, \
         PRIMARY KEY (s_w_id, s_i_id))",
    );
    cluster.tag(
        "CREATE TABLE order_line (ol_w_id INT, ol_d_id INT, ol_o_id INT, ol_number INT, \
         ol_i_id INT, ol_amount BIGINT, PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number))",
    );
    let mut stock = Vec::new();
    for w in 1..=2 {
        for i in 1..=60 {
            stock.push(format!("({w}, {i}, {}, 'x{i}')", (i * 7 + w) % 25));
        }
    }
    cluster.tag(&format!("INSERT INTO stock VALUES {}", stock.join(", ")));
    let mut prng = Prng::new(21);
    let mut lines = Vec::new();
    for w in 1..=2 {
        for d in 1..=3 {
            for o in 1..=12 {
                for n in 1..=(5 + prng.below(6)) {
                    // Some items beyond the stock (no match), some NULL.
                    let item = match prng.below(20) {
                        0 => "NULL".to_string(),
                        1 => "99".to_string(),
                        _ => (1 + prng.below(60)).to_string(),
                    };
                    lines.push(format!("({w}, {d}, {o}, {n}, {item}, {})", prng.below(100)));
                }
            }
        }
    }
    cluster.tag(&format!(
        "INSERT INTO order_line VALUES {}",
        lines.join(", ")
    ));
    cluster
}

#[test]
fn stock_level_is_a_semi_join_with_the_one_batch_answer() {
    for partitions in [1, 3] {
        let mut cluster = tpcc(partitions);
        for (w, d, next, threshold) in [(1, 1, 13, 10), (2, 3, 9, 15), (1, 2, 5, 30), (2, 2, 1, 10)]
        {
            let low = next - 20;
            let sql = format!(
                "SELECT COUNT(DISTINCT s_i_id) FROM order_line, stock \
                 WHERE ol_w_id = {w} AND ol_d_id = {d} AND ol_o_id < {next} AND ol_o_id >= {low} \
                 AND s_w_id = {w} AND s_i_id = ol_i_id AND s_quantity < {threshold}"
            );
            let (semi, batch, ran) = both(&mut cluster, &sql);
            assert!(ran, "{sql}");
            assert_eq!(semi, batch, "{partitions}: {sql}");
            // Not a trivial answer: some rows match in the first cases.
            if next > 5 {
                assert_ne!(semi, Ok(vec![vec![Value::BigInt(0)]]), "{sql}");
            }
        }
    }
}

#[test]
fn the_probe_looks_up_the_driving_keys_and_routes_by_the_pinned_partition_key() {
    let mut cluster = tpcc(3);
    let sql = "SELECT s_i_id, s_quantity FROM order_line JOIN stock ON s_i_id = ol_i_id \
               WHERE ol_w_id = 2 AND ol_d_id = 1 AND ol_o_id = 3 AND s_w_id = 2";
    let statement = parse(sql).unwrap().pop().unwrap();
    let Plan::Execute(execution) = plan_statement(&statement, &cluster.catalog).unwrap() else {
        panic!("a query")
    };
    let semi_join = execution.semi_join().expect("stock is probed");
    // The first step reads the order lines alone, routed by their warehouse.
    let first = semi_join.first();
    assert_eq!(first.operations.len(), 1);
    assert!(
        matches!(&first.operations[0], Operation::Select { table, .. } if table == "order_line")
    );
    assert_eq!(
        first.routing,
        Routing::Keys {
            column: "ol_w_id".into(),
            values: vec![Value::Int(2)]
        }
    );
    let results = cluster.read(&first);
    let Ok(StatementResult::Rows { rows: lines, .. }) =
        cluster.run("SELECT DISTINCT ol_i_id FROM order_line WHERE ol_w_id = 2 AND ol_d_id = 1 AND ol_o_id = 3 AND ol_i_id IS NOT NULL ORDER BY 1")
    else {
        panic!()
    };
    let items: Vec<Value> = lines.into_iter().map(|mut row| row.remove(0)).collect();
    assert!(!items.is_empty());
    let probe = semi_join
        .probe(&results)
        .unwrap()
        .expect("there are driving rows");
    assert_eq!(
        probe.routing,
        Routing::Keys {
            column: "s_w_id".into(),
            values: vec![Value::Int(2)]
        }
    );
    let Operation::Select {
        table,
        predicate: Some(Predicate::And(conjuncts)),
        ..
    } = &probe.operations[0]
    else {
        panic!("{:?}", probe.operations)
    };
    assert_eq!(table, "stock");
    assert!(
        conjuncts.contains(&Predicate::In {
            column: "s_i_id".into(),
            values: items.clone()
        }),
        "{conjuncts:?} should look up {items:?}"
    );
    // The engine serves it by primary-key lookups.
    let statement = parse(&format!("EXPLAIN {sql}")).unwrap().pop().unwrap();
    let plan = plan_statement(&statement, &cluster.catalog).unwrap();
    let Ok(StatementResult::Rows { rows, .. }) = cluster.execute(plan) else {
        panic!()
    };
    let text: Vec<String> = rows
        .into_iter()
        .map(|row| match &row[0] {
            Value::Text(line) => line.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(
        text.iter().any(|line| line.starts_with(
            "Gateway: semi-join inside a transaction block: read the other tables first, then stock only for their distinct values of (s_i_id = order_line.ol_i_id)"
        )),
        "{text:?}"
    );
}

#[test]
fn a_probe_with_no_driving_value_reads_nothing_and_answers_the_empty_join() {
    let mut cluster = tpcc(3);
    let sql = "SELECT count(*), max(s_quantity) FROM order_line JOIN stock ON s_i_id = ol_i_id \
               WHERE ol_w_id = 7 AND s_w_id = 7";
    let (semi, batch, ran) = both(&mut cluster, sql);
    assert!(ran);
    assert_eq!(semi, batch);
    assert_eq!(semi, Ok(vec![vec![Value::BigInt(0), Value::Null]]));
}

#[test]
fn tables_whose_key_the_join_does_not_pin_are_not_probed() {
    let cluster = tpcc(1);
    for sql in [
        // The key's first column is neither joined nor pinned.
        "SELECT * FROM order_line JOIN stock ON s_i_id = ol_i_id WHERE ol_w_id = 1",
        // Nothing filters the other side.
        "SELECT * FROM order_line JOIN stock ON s_i_id = ol_i_id AND s_w_id = ol_w_id",
        // The probed side of an outer join supplies NULLs.
        "SELECT * FROM order_line LEFT JOIN stock ON s_i_id = ol_i_id AND s_w_id = ol_w_id \
         WHERE ol_w_id = 1",
        // Order lines are joined on no key column of theirs: stock is the probed one.
        "SELECT * FROM stock JOIN order_line ON ol_i_id = s_i_id WHERE s_w_id = 1 \
         AND s_quantity < 5 AND ol_w_id = 1 AND ol_d_id = 1 AND ol_o_id = 1",
    ] {
        let statement = parse(sql).unwrap().pop().unwrap();
        let Plan::Execute(execution) = plan_statement(&statement, &cluster.catalog).unwrap() else {
            panic!()
        };
        // The first step reads the driving tables: the probed one is the table left out.
        let driving = execution.semi_join().map(|semi_join| {
            let Operation::Select { table, .. } = &semi_join.first().operations[0] else {
                panic!()
            };
            table.clone()
        });
        if sql.starts_with("SELECT * FROM stock") {
            assert_eq!(driving.as_deref(), Some("order_line"), "{sql}");
        } else {
            assert!(driving.is_none(), "{sql}: {driving:?}");
        }
    }
}

/// Random tables (NULL and duplicate join values, INT/BIGINT/TEXT keys, composite keys) and
/// random joins over them: the semi-join answers what the one-batch plan answers, for 1 and
/// 3 partitions, and most queries do run as semi-joins.
#[test]
fn random_joins_answer_the_same_as_semi_joins_and_in_one_batch() {
    let mut ran = 0;
    let mut total = 0;
    for seed in 0..6u64 {
        for partitions in [1, 3] {
            let mut prng = Prng::new(seed * 31 + partitions as u64);
            let mut cluster = Cluster::new(partitions);
            cluster.tag("CREATE TABLE a (id INT PRIMARY KEY, k BIGINT, t TEXT, v INT)");
            cluster.tag("CREATE TABLE b (g INT, id BIGINT, w INT, PRIMARY KEY (g, id))");
            cluster.tag("CREATE TABLE c (name TEXT PRIMARY KEY, v INT)");
            let value = |prng: &mut Prng, null: u64, range: u64| -> String {
                if prng.chance(null) {
                    "NULL".into()
                } else {
                    prng.below(range).to_string()
                }
            };
            let mut rows = Vec::new();
            for id in 0..40 {
                rows.push(format!(
                    "({id}, {}, {}, {})",
                    value(&mut prng, 10, 30),
                    if prng.chance(10) {
                        "NULL".into()
                    } else {
                        format!("'n{}'", prng.below(15))
                    },
                    value(&mut prng, 10, 10)
                ));
            }
            cluster.tag(&format!("INSERT INTO a VALUES {}", rows.join(", ")));
            let mut rows = Vec::new();
            for g in 0..3 {
                for id in 0..25 {
                    if prng.chance(80) {
                        rows.push(format!("({g}, {id}, {})", value(&mut prng, 10, 10)));
                    }
                }
            }
            cluster.tag(&format!("INSERT INTO b VALUES {}", rows.join(", ")));
            let mut rows = Vec::new();
            for n in 0..12 {
                rows.push(format!("('n{n}', {})", value(&mut prng, 10, 10)));
            }
            cluster.tag(&format!("INSERT INTO c VALUES {}", rows.join(", ")));
            for _ in 0..25 {
                let v = prng.below(10);
                let g = prng.below(4);
                let sql = match prng.below(9) {
                    0 => format!("SELECT a.id, b.w FROM a JOIN b ON b.id = a.k WHERE b.g = {g} AND a.v < {v} ORDER BY 1, 2"),
                    1 => format!("SELECT a.id, b.w FROM a, b WHERE b.g = {g} AND b.id = a.id AND a.v >= {v} ORDER BY 1, 2"),
                    2 => format!("SELECT count(*), sum(b.w) FROM a JOIN b ON b.id = a.k AND b.g = a.v WHERE a.id < {}", v * 4),
                    3 => format!("SELECT a.id, c.v FROM a JOIN c ON c.name = a.t WHERE a.v = {v} ORDER BY 1"),
                    4 => format!("SELECT DISTINCT c.name FROM a, c, b WHERE c.name = a.t AND b.g = {g} AND b.id = a.k AND a.v > {v} ORDER BY 1"),
                    5 => format!("SELECT a.id, b.w, c.v FROM a LEFT JOIN c ON c.name = a.t JOIN b ON b.id = a.id WHERE b.g = {g} AND a.v <> {v} ORDER BY 1"),
                    6 => format!("SELECT a.v, count(*) FROM a JOIN b ON b.id = a.k WHERE b.g = {g} AND a.id % 3 = {} GROUP BY a.v ORDER BY 1", v % 3),
                    7 => format!("SELECT a.id FROM a JOIN b ON b.id = a.k WHERE b.g = {g} AND a.v < {v} AND b.w > (SELECT min(v) FROM c) ORDER BY 1"),
                    _ => format!("SELECT a.id, b.id FROM b JOIN a ON a.id = b.id WHERE b.g = {g} AND b.w < {v} ORDER BY 1"),
                };
                let (semi, batch, used) = both(&mut cluster, &sql);
                assert_eq!(semi, batch, "seed {seed}, {partitions} partitions: {sql}");
                assert!(semi.is_ok(), "{sql}: {semi:?}");
                total += 1;
                ran += usize::from(used);
            }
        }
    }
    assert!(
        ran * 2 > total,
        "only {ran} of {total} queries ran as semi-joins"
    );
}
