//! Joins of tables whose rows lie on different partitions (issue 20), with real processes and
//! psql (ports 30000–30999 only), on the cluster `tessera dev` starts (3 routers, 3 storage
//! processes, `vr` groups of 3: three partitions):
//!
//! (a) two tables spread over the three partitions (EXPLAIN of point reads names different
//! partitions); inner, comma, outer, USING and three-way joins, with aggregates, GROUP BY,
//! ORDER BY and LIMIT over them, answer what PostgreSQL answers on the same rows (computed
//! here); EXPLAIN of a join shows every partition reached and each table's pushed predicate;
//! PostgreSQL's errors for ambiguous and mistyped join columns; INSERT … RETURNING over
//! several partitions; TRUNCATE of two tables empties every partition;
//! (b) a self-join reads both sides at one point of the order: while one-shot UPDATEs change
//! every row of a table across all partitions at once, a join comparing neighbouring rows never
//! sees two versions;
//! (c) a semi-join (ports 37700–37752): TPC-C's Stock-Level inside a block answers what it
//! answers outside (one batch) and what is computed here, EXPLAIN shows the semi-join, and
//! the open block holds shared locks on the stock rows it read and no others (another block's
//! `FOR UPDATE NOWAIT` of a row read fails with 55P03, of a row not read succeeds; the
//! one-batch read locked the whole table).

mod support;

use runtime::ecast::config::PartitionMode;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::partitioned::PartitionedCluster;
use support::psql;

fn psql_ok(port: u16, commands: &[&str]) -> String {
    let output = psql(port, commands);
    assert!(!output.contains("ERROR"), "{commands:?}: {output}");
    output
}

/// The partitions EXPLAIN says a statement reaches.
fn partitions_reached(port: u16, statement: &str) -> BTreeSet<String> {
    psql_ok(port, &[&format!("EXPLAIN {statement}")])
        .lines()
        .filter_map(|line| line.trim().strip_prefix("Partition "))
        .map(|rest| rest.split(": ").next().unwrap_or_default().to_string())
        .collect()
}

/// Employees: (id, name, dept or none, salary); departments 1..=6 with a boss each.
fn employees() -> Vec<(i64, String, Option<i64>, i64)> {
    (1..=60)
        .map(|id| {
            let dept = if id % 11 == 0 { None } else { Some(id % 8) };
            (id, format!("e{id}"), dept, 1_000 + (id * 37) % 500)
        })
        .collect()
}

fn departments() -> Vec<(i64, String)> {
    (1..=6).map(|id| (id, format!("d{id}"))).collect()
}

#[test]
fn joins_of_tables_spread_over_partitions_answer_what_postgresql_answers() {
    let cluster = PartitionedCluster::dev("sqljoins", PartitionMode::Vr, 30000, 30050);
    let pg: Vec<u16> = (0..3).map(|index| 30050 + index).collect();
    psql_ok(
        pg[0],
        &[
            "CREATE TABLE dept (id BIGINT PRIMARY KEY, name TEXT)",
            "CREATE TABLE emp (id BIGINT PRIMARY KEY, name TEXT, dept BIGINT, salary BIGINT)",
            "CREATE TABLE site (dept BIGINT PRIMARY KEY, city TEXT)",
        ],
    );
    let values: Vec<String> = employees()
        .iter()
        .map(|(id, name, dept, salary)| {
            let dept = dept.map_or("NULL".to_string(), |dept| dept.to_string());
            format!("({id}, '{name}', {dept}, {salary})")
        })
        .collect();
    psql_ok(
        pg[1],
        &[&format!("INSERT INTO emp VALUES {}", values.join(", "))],
    );
    let values: Vec<String> = departments()
        .iter()
        .map(|(id, name)| format!("({id}, '{name}')"))
        .collect();
    psql_ok(
        pg[2],
        &[
            &format!("INSERT INTO dept VALUES {}", values.join(", ")),
            "INSERT INTO site VALUES (1, 'london'), (2, 'paris'), (3, 'london'), (7, 'rome')",
        ],
    );

    // The rows of both tables lie on different partitions.
    for table in ["emp", "dept"] {
        let homes: BTreeSet<String> = (1..=6)
            .flat_map(|id| {
                partitions_reached(pg[0], &format!("SELECT * FROM {table} WHERE id = {id}"))
            })
            .collect();
        assert!(homes.len() >= 2, "{table}: {homes:?}");
    }
    // A join reads every partition, each table filtered there by its own conjuncts.
    let explained = psql_ok(
        pg[1],
        &[
            "EXPLAIN SELECT e.name, d.name FROM emp e JOIN dept d ON e.dept = d.id \
           WHERE e.salary > 1200",
        ],
    );
    assert!(explained.contains("join 2 tables (e, d)"), "{explained}");
    assert!(explained.contains("Partitions reached: 3"), "{explained}");
    assert!(explained.contains("salary"), "{explained}");

    // Inner join, computed here as PostgreSQL would.
    let emp = employees();
    let dept = departments();
    let mut pairs: Vec<(&str, &str)> = emp
        .iter()
        .filter(|row| row.3 > 1200)
        .filter_map(|(_, name, dept_id, _)| {
            let dept_name = &dept.iter().find(|(id, _)| Some(*id) == *dept_id)?.1;
            Some((name.as_str(), dept_name.as_str()))
        })
        .collect();
    pairs.sort();
    let expected: Vec<String> = pairs
        .iter()
        .map(|(name, dept_name)| format!("{name}|{dept_name}"))
        .collect();
    for (port, sql) in [
        (
            pg[0],
            "SELECT e.name, d.name FROM emp e JOIN dept d ON e.dept = d.id \
             WHERE e.salary > 1200 ORDER BY 1, 2",
        ),
        (
            pg[2],
            "SELECT e.name, d.name FROM dept d, emp e WHERE d.id = e.dept \
             AND e.salary > 1200 ORDER BY e.name, d.name",
        ),
    ] {
        assert_eq!(psql_ok(port, &[sql]), expected.join("\n"), "{sql}");
    }

    // LEFT JOIN: employees without a known department are padded (counted by IS NULL).
    let unmatched = emp
        .iter()
        .filter(|(_, _, dept_id, _)| !dept.iter().any(|(id, _)| Some(*id) == *dept_id))
        .count();
    assert_eq!(
        psql_ok(
            pg[1],
            &["SELECT count(*) FROM emp e LEFT JOIN dept d ON e.dept = d.id WHERE d.id IS NULL"]
        ),
        unmatched.to_string()
    );

    // GROUP BY over a three-way join with ORDER BY and LIMIT.
    let mut by_city: std::collections::BTreeMap<&str, (i64, i64)> = Default::default();
    for (_, _, dept_id, salary) in &emp {
        let city = match dept_id {
            Some(1 | 3) => "london",
            Some(2) => "paris",
            _ => continue,
        };
        let entry = by_city.entry(city).or_default();
        entry.0 += 1;
        entry.1 += salary;
    }
    let expected: Vec<String> = by_city
        .iter()
        .map(|(city, (count, sum))| format!("{city}|{count}|{sum}"))
        .collect();
    assert_eq!(
        psql_ok(
            pg[2],
            &["SELECT s.city, count(*), sum(e.salary) FROM emp e \
               JOIN dept d ON e.dept = d.id JOIN site s USING (dept) \
               GROUP BY s.city ORDER BY s.city LIMIT 5"]
        ),
        expected.join("\n")
    );
    // FULL JOIN pads both sides: site 7 has no department, departments 4–6 no site.
    assert_eq!(
        psql_ok(
            pg[0],
            &[
                "SELECT d.id, s.city FROM dept d FULL JOIN site s ON s.dept = d.id \
               ORDER BY d.id NULLS LAST"
            ]
        ),
        "1|london\n2|paris\n3|london\n4|\n5|\n6|\n|rome"
    );

    // DISTINCT over the join: the cities that employ someone (departments 1, 2, 3 and 7
    // have employees and sites).
    assert_eq!(
        psql_ok(
            pg[1],
            &["SELECT DISTINCT s.city FROM emp e JOIN site s ON s.dept = e.dept ORDER BY 1"]
        ),
        "london\nparis\nrome"
    );

    // PostgreSQL's errors.
    let ambiguous = psql(pg[0], &["SELECT id FROM emp, dept"]);
    assert!(
        ambiguous.contains("column reference \"id\" is ambiguous"),
        "{ambiguous}"
    );
    let mistyped = psql(pg[0], &["SELECT 1 FROM emp e JOIN dept d ON e.name = d.id"]);
    assert!(
        mistyped.contains("operator does not exist: text = bigint"),
        "{mistyped}"
    );

    // INSERT … RETURNING answers the rows once every partition inserted its share.
    assert_eq!(
        psql_ok(
            pg[2],
            &["INSERT INTO dept VALUES (7, 'd7'), (8, 'd8'), (9, 'd9') RETURNING id, upper(name)"]
        ),
        "7|D7\n8|D8\n9|D9"
    );
    assert_eq!(
        psql_ok(pg[0], &["SELECT count(*) FROM dept WHERE id >= 7"]),
        "3"
    );
    // Through the extended protocol (Parse, Describe, Bind, Execute), with parameters.
    let returned: Vec<(i64, String)> = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let (client, connection) = tokio_postgres::connect(
                &format!("host=127.0.0.1 port={} user=tessera dbname=tessera", pg[1]),
                tokio_postgres::NoTls,
            )
            .await
            .unwrap();
            tokio::spawn(connection);
            let rows = client
                .query(
                    "INSERT INTO dept (id, name) VALUES ($1, $2), ($3, $4) RETURNING id, name",
                    &[&10i64, &"d10", &11i64, &"d11"],
                )
                .await
                .unwrap();
            rows.iter().map(|row| (row.get(0), row.get(1))).collect()
        });
    assert_eq!(
        returned,
        vec![(10, "d10".to_string()), (11, "d11".to_string())]
    );

    // TRUNCATE empties both tables on every partition; the join then finds nothing.
    assert_eq!(
        psql_ok(pg[1], &["TRUNCATE TABLE emp, dept"]),
        "",
        "psql -q prints nothing for TRUNCATE TABLE"
    );
    assert_eq!(
        psql_ok(
            pg[2],
            &[
                "SELECT (SELECT count(*) FROM emp), (SELECT count(*) FROM dept), \
               (SELECT count(*) FROM site)"
            ]
        ),
        "0|0|4"
    );
    assert_eq!(
        psql_ok(
            pg[0],
            &["SELECT count(*) FROM emp e JOIN dept d ON e.dept = d.id"]
        ),
        "0"
    );
    drop(cluster);
}

#[test]
fn a_self_join_sees_every_partition_at_one_point_while_updates_run() {
    let cluster = PartitionedCluster::dev("sqljoinsnap", PartitionMode::Vr, 30300, 30350);
    let pg: Vec<u16> = (0..3).map(|index| 30350 + index).collect();
    let values: Vec<String> = (1..=40).map(|id| format!("({id}, 0)")).collect();
    psql_ok(
        pg[0],
        &[
            "CREATE TABLE pair (id BIGINT PRIMARY KEY, v BIGINT)",
            &format!("INSERT INTO pair VALUES {}", values.join(", ")),
        ],
    );
    let homes: BTreeSet<String> = (1..=6)
        .flat_map(|id| partitions_reached(pg[1], &format!("SELECT * FROM pair WHERE id = {id}")))
        .collect();
    assert!(homes.len() >= 2, "{homes:?}");

    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let port = pg[1];
        std::thread::spawn(move || {
            let mut updates = 0;
            while !stop.load(Ordering::Relaxed) {
                if !psql(port, &["UPDATE pair SET v = v + 1 WHERE v >= 0"]).contains("ERROR") {
                    updates += 1;
                }
            }
            updates
        })
    };
    let started = Instant::now();
    let (mut reads, mut differing) = (0, Vec::new());
    while started.elapsed() < Duration::from_secs(8) {
        let output = psql(
            pg[2],
            &[
                "SELECT count(*), min(a.v), max(b.v) FROM pair a JOIN pair b \
               ON a.id + 1 = b.id WHERE a.v <> b.v",
            ],
        );
        if output.contains("ERROR") {
            continue;
        }
        reads += 1;
        if !output.starts_with("0|") {
            differing.push(output);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let updates = writer.join().unwrap();
    assert!(
        updates >= 3 && reads >= 3,
        "updates {updates}, reads {reads}"
    );
    assert!(
        differing.is_empty(),
        "a join saw two versions of the table: {differing:?}"
    );
    // Every row took every update (an update answered with an error may still have applied).
    let final_values = psql_ok(pg[0], &["SELECT min(v), max(v), count(*) FROM pair"]);
    let fields: Vec<i64> = final_values
        .split('|')
        .map(|field| field.parse().unwrap())
        .collect();
    assert!(
        fields[0] == fields[1] && fields[0] >= updates && fields[2] == 40,
        "{final_values} after {updates} updates"
    );
    drop(cluster);
}

#[test]
fn a_semi_join_in_a_block_answers_as_one_batch_and_locks_only_the_rows_it_read() {
    let cluster = PartitionedCluster::dev("sqlsemijoin", PartitionMode::Vr, 37700, 37750);
    let pg: Vec<u16> = (0..3).map(|index| 37750 + index).collect();
    psql_ok(
        pg[0],
        &[
            "CREATE TABLE stock (s_w_id BIGINT, s_i_id BIGINT, s_quantity BIGINT, \
             PRIMARY KEY (s_w_id, s_i_id))",
            "CREATE TABLE order_line (ol_w_id BIGINT, ol_d_id BIGINT, ol_o_id BIGINT, \
             ol_number BIGINT, ol_i_id BIGINT, PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number))",
        ],
    );
    let quantity = |w: i64, i: i64| (i * 7 + w) % 20;
    let stock: Vec<String> = (1..=2)
        .flat_map(|w| (1..=50).map(move |i| (w, i)))
        .map(|(w, i)| format!("({w}, {i}, {})", quantity(w, i)))
        .collect();
    // Items 1..=40 only: 41..=50 are never read by a Stock-Level.
    let item = |w: i64, d: i64, o: i64, n: i64| (w * 13 + d * 7 + o * 5 + n * 3) % 40 + 1;
    let mut lines = Vec::new();
    for w in 1..=2 {
        for d in 1..=2 {
            for o in 1..=8 {
                for n in 1..=5 {
                    lines.push((w, d, o, n, item(w, d, o, n)));
                }
            }
        }
    }
    let values: Vec<String> = lines
        .iter()
        .map(|(w, d, o, n, i)| format!("({w}, {d}, {o}, {n}, {i})"))
        .collect();
    psql_ok(
        pg[1],
        &[
            &format!("INSERT INTO stock VALUES {}", stock.join(", ")),
            &format!("INSERT INTO order_line VALUES {}", values.join(", ")),
        ],
    );
    let (w, d, low, next, threshold) = (1, 1, 1, 6, 10);
    let query = format!(
        "SELECT COUNT(DISTINCT s_i_id) FROM order_line, stock \
         WHERE ol_w_id = {w} AND ol_d_id = {d} AND ol_o_id < {next} AND ol_o_id >= {low} \
         AND s_w_id = {w} AND s_i_id = ol_i_id AND s_quantity < {threshold}"
    );
    let read: BTreeSet<i64> = lines
        .iter()
        .filter(|(lw, ld, o, _, _)| *lw == w && *ld == d && *o >= low && *o < next)
        .map(|line| line.4)
        .collect();
    let low_stock = read.iter().filter(|i| quantity(w, **i) < threshold).count();
    assert!(low_stock > 0 && low_stock < read.len(), "{read:?}");
    assert_eq!(psql_ok(pg[0], &[&query]), low_stock.to_string());
    assert_eq!(
        psql_ok(pg[1], &["BEGIN READ ONLY", &query, "COMMIT"]),
        low_stock.to_string()
    );
    let explained = psql_ok(pg[2], &[&format!("EXPLAIN {query}")]);
    assert!(
        explained.contains(
            "semi-join inside a transaction block: read the other tables first, then stock \
             only for their distinct values of (s_i_id = order_line.ol_i_id)"
        ),
        "{explained}"
    );

    // An open block that ran the semi-join holds its rows' locks, and only those.
    let mut holder = std::process::Command::new("psql")
        .args(["-X", "-h", "127.0.0.1", "-p", &pg[1].to_string()])
        .args(["-U", "tessera", "-d", "tessera"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = holder.stdin.take().unwrap();
    use std::io::Write;
    stdin
        .write_all(format!("BEGIN;\n{query};\n").as_bytes())
        .unwrap();
    stdin.flush().unwrap();
    let some_read = *read.iter().next().unwrap();
    let nowait = |i: i64| {
        psql(
            pg[2],
            &[
                "BEGIN",
                &format!(
                    "SELECT s_quantity FROM stock WHERE s_w_id = {w} AND s_i_id = {i} \
                     FOR UPDATE NOWAIT"
                ),
                "ROLLBACK",
            ],
        )
    };
    // Wait (bounded) until the holder's read has run: its row is then locked.
    let started = Instant::now();
    let mut locked = nowait(some_read);
    while !locked.contains("could not obtain lock") && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(200));
        locked = nowait(some_read);
    }
    assert!(locked.contains("could not obtain lock"), "{locked}");
    let every_read = read
        .iter()
        .all(|i| nowait(*i).contains("could not obtain lock"));
    assert!(every_read, "every stock row the semi-join read is locked");
    let free = nowait(45);
    assert!(
        !free.contains("ERROR"),
        "a stock row not read is free: {free}"
    );
    assert_eq!(free, quantity(w, 45).to_string());
    stdin.write_all(b"COMMIT;\n").unwrap();
    drop(stdin);
    let _ = holder.wait();
    drop(cluster);
}
