//! PostgreSQL's query forms that issue 20 still lacked, with real processes and psql, on a
//! `tessera dev`-shaped cluster (3 routers, 3 storage processes, `vr` groups of 3: three
//! partitions). Ports 33700–33899 only: the cluster serves RESP on 33700–33702 (E-Cast
//! 33800–33802), routers on 33710–33712, PostgreSQL on 33720–33722; the canary's cluster
//! RESP 33750–33752 (E-Cast 33850–33852), routers 33760–33762, PostgreSQL 33770–33772.
//!
//! (a) Scripts of derived tables, views, WITH queries, VALUES and `generate_series` inside
//! joins, of UPDATE … FROM and DELETE … USING, and of functions and ordered aggregates answer,
//! statement by statement through psql, exactly what PostgreSQL 15 answered for the same
//! scripts (recorded against a throwaway `initdb` instance with the same psql invocation:
//! rows, command tags, errors as their SQLSTATE);
//! (b) UPDATE … FROM is atomic: 3 clients through the 3 gateways each add 1 to one row 20
//! times with `UPDATE hot SET n = hot.n + inc.d FROM inc …`, and the row ends at exactly 60
//! (the read and the write run in one implicit transaction); its canary
//! (`TESSERA_CANARY_WRITE_FROM_OUTSIDE_TRANSACTIONS`, the two steps as separate statements)
//! loses updates under the same load; inside BEGIN … ROLLBACK it changes nothing.

mod support;

use runtime::ecast::config::{ClusterConfig, PartitionMode};
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;
use support::partitioned::PartitionedCluster;

/// A `tessera dev`-shaped cluster with its routers on `port + 10` and PostgreSQL on
/// `port + 20`, so everything lies in this file's port range.
fn cluster(name: &str, port: u16, env: &[(&str, &str)]) -> PartitionedCluster {
    let mut cluster =
        PartitionedCluster::prepare(name, port, (3, 3, 3), |config: &mut ClusterConfig| {
            config.partitions = PartitionMode::Vr;
            for (index, router) in config.routers.iter_mut().enumerate() {
                router.address = SocketAddr::from(([127, 0, 0, 1], port + 10 + index as u16));
            }
            *config = config.clone().with_pg_ports(port + 20).unwrap();
        });
    for (name, value) in env {
        cluster
            .storage_env
            .push((name.to_string(), value.to_string()));
    }
    cluster.launch();
    assert!(cluster.wait_until_ready(Duration::from_secs(60)));
    cluster
}

/// psql running `commands` in one session (stdout and stderr as a terminal shows them),
/// errors printed as their SQLSTATE, as the recording was made.
fn psql(port: u16, commands: &[&str]) -> String {
    let mut command = Command::new("sh");
    command.args([
        "-c",
        "psql \"$@\" 2>&1",
        "psql",
        "-X",
        "-A",
        "-t",
        "-v",
        "VERBOSITY=sqlstate",
        "-h",
        "127.0.0.1",
    ]);
    command.args(["-p", &port.to_string(), "-U", "tessera", "-d", "tessera"]);
    for sql in commands {
        command.args(["-c", sql]);
    }
    let output = command
        .output()
        .expect("psql is installed (scripts/test installs postgresql-client)");
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

fn run_script(port: u16, setup: &[&str], cases: &[(&str, &str)]) {
    for sql in setup {
        let output = psql(port, &[sql]);
        assert!(!output.contains("ERROR"), "{sql}: {output}");
    }
    for (sql, expected) in cases {
        assert_eq!(psql(port, &[sql]), *expected, "{sql}");
    }
}

const DERIVED_SETUP: &[&str] = &[
    "CREATE TABLE dept (id INT PRIMARY KEY, name TEXT, boss INT)",
    "CREATE TABLE emp (id INT PRIMARY KEY, name TEXT, dept INT, salary BIGINT)",
    "INSERT INTO dept VALUES (1, 'eng', 10), (2, 'ops', 20), (3, 'empty', NULL), (4, 'art', 10)",
    "INSERT INTO emp VALUES (10, 'ada', 1, 100), (11, 'bob', 1, 90), (20, 'cy', 2, 80), (30, 'dee', NULL, 70), (40, 'eve', 9, 60)",
    "CREATE VIEW rich AS SELECT id, name, dept FROM emp WHERE salary >= 80",
];

/// Recorded from PostgreSQL 15.18.
const DERIVED_POSTGRESQL_15: &[(&str, &str)] = &[
    ("SELECT d.name, s.total FROM dept d JOIN (SELECT dept, sum(salary) AS total FROM emp GROUP BY dept) AS s ON s.dept = d.id ORDER BY d.name", "eng|190
ops|80"),
    ("SELECT d.name, s.total FROM dept d LEFT JOIN (SELECT dept, sum(salary) AS total FROM emp GROUP BY dept) s ON s.dept = d.id ORDER BY d.id", "eng|190
ops|80
empty|
art|"),
    ("SELECT d.name, s.n FROM (SELECT dept, count(*) AS n FROM emp GROUP BY dept) s RIGHT JOIN dept d ON d.id = s.dept ORDER BY d.id", "eng|2
ops|1
empty|
art|"),
    ("SELECT a.x, b.y FROM (SELECT id AS x FROM dept WHERE id < 3) a, (SELECT id AS y FROM emp WHERE salary > 85) b WHERE b.y > a.x ORDER BY 1, 2", "1|10
1|11
2|10
2|11"),
    ("SELECT r.name, d.name FROM rich r JOIN dept d ON d.id = r.dept ORDER BY r.id", "ada|eng
bob|eng
cy|ops"),
    ("SELECT d.name, count(r.id) FROM dept d LEFT JOIN rich r ON r.dept = d.id GROUP BY d.name ORDER BY d.name", "art|0
empty|0
eng|2
ops|1"),
    ("SELECT * FROM rich JOIN dept USING (name) ORDER BY 1", ""),
    ("SELECT e.name, top.m FROM emp e JOIN (SELECT max(salary) AS m FROM emp) top ON e.salary = top.m", "ada|100"),
    ("SELECT e.name FROM emp e, (SELECT avg(salary) AS a FROM emp) s WHERE e.salary > s.a ORDER BY e.name", "ada
bob"),
    ("SELECT s.k, s.v, d.name FROM (VALUES (1, 'one'), (2, 'two')) AS s (k, v) JOIN dept d ON d.id = s.k ORDER BY 1", "1|one|eng
2|two|ops"),
    ("SELECT c.n, d.name FROM (SELECT 2 AS n) c JOIN dept d ON d.id = c.n", "2|ops"),
    ("SELECT * FROM (SELECT id FROM dept) x JOIN (SELECT id FROM emp) x ON true", "ERROR:  42712"),
    ("SELECT * FROM dept d JOIN (SELECT id FROM emp) ON true", "ERROR:  42601"),
    ("SELECT u.id, d.name FROM (SELECT id FROM emp WHERE id < 15 UNION SELECT boss FROM dept) u LEFT JOIN dept d ON d.boss = u.id ORDER BY 1, 2", "10|art
10|eng
11|
20|ops
|"),
    ("WITH big AS (SELECT dept, sum(salary) AS total FROM emp GROUP BY dept) SELECT d.name, big.total FROM big JOIN dept d ON d.id = big.dept WHERE big.total > 50 ORDER BY 2 DESC", "eng|190
ops|80"),
    ("WITH a AS (SELECT id FROM dept), b AS (SELECT dept FROM emp) SELECT a.id, count(b.dept) FROM a LEFT JOIN b ON b.dept = a.id GROUP BY a.id ORDER BY a.id", "1|2
2|1
3|0
4|0"),
    ("SELECT d.name, w.rk FROM dept d JOIN (SELECT dept, rank() OVER (ORDER BY salary DESC) AS rk FROM emp) w ON w.dept = d.id ORDER BY 2", "eng|1
eng|2
ops|3"),
    ("SELECT x.id, x.dept FROM (SELECT id, dept FROM emp ORDER BY salary LIMIT 2) x JOIN dept ON dept.id = x.dept", ""),
    ("SELECT * FROM dept AS d (i, n) JOIN emp ON emp.dept = d.i WHERE n = 'ops'", "2|ops|20|20|cy|2|80"),
    ("SELECT * FROM dept AS d (i, n, b, z) JOIN emp ON true", "ERROR:  42P10"),
    ("SELECT g, d.name FROM generate_series(1, 5) g LEFT JOIN dept d ON d.id = g ORDER BY g", "1|eng
2|ops
3|empty
4|art
5|"),
    ("SELECT g.n FROM generate_series(10, 1, -3) AS g (n)", "10
7
4
1"),
    ("SELECT * FROM generate_series(1, 3) a CROSS JOIN generate_series(1, 2) b ORDER BY 1, 2", "1|1
1|2
2|1
2|2
3|1
3|2"),
    ("SELECT count(*) FROM generate_series(1, 100000)", "100000"),
    ("SELECT * FROM generate_series(1, 3, 0)", "ERROR:  22023"),
    ("SELECT * FROM generate_series('2024-01-30'::timestamp, '2024-04-01', '1 month')", "2024-01-30 00:00:00
2024-02-29 00:00:00
2024-03-29 00:00:00"),
    ("SELECT * FROM generate_series('2024-01-01'::date, '2024-01-03'::date, '1 day')", "2024-01-01 00:00:00+00
2024-01-02 00:00:00+00
2024-01-03 00:00:00+00"),
    ("SELECT * FROM generate_series(1.5, 3)", "1.5
2.5"),
    ("SELECT * FROM generate_series(NULL::int, 3)", ""),
    ("SELECT * FROM generate_series(3000000000, 3000000002)", "3000000000
3000000001
3000000002"),
];

const WRITE_SETUP: &[&str] = &[
    "CREATE TABLE acct (id INT PRIMARY KEY, city TEXT, n BIGINT, note TEXT)",
    "CREATE TABLE price (city TEXT PRIMARY KEY, rate BIGINT)",
    "CREATE TABLE pair (a INT, b INT, v TEXT, PRIMARY KEY (a, b))",
    "CREATE TABLE logs (id INT, msg TEXT)",
    "INSERT INTO acct VALUES (1, 'LHR', 10, NULL), (2, 'CDG', 20, NULL), (3, 'JFK', 30, NULL), (4, 'LHR', 40, NULL), (5, NULL, 50, NULL), (6, 'ZRH', 60, NULL)",
    "INSERT INTO price VALUES ('LHR', 2), ('CDG', 3), ('JFK', 4)",
    "INSERT INTO pair VALUES (1, 1, 'a'), (1, 2, 'b'), (2, 1, 'c'), (2, 2, 'd')",
    "INSERT INTO logs VALUES (1, 'x'), (1, 'y'), (3, 'z'), (9, 'w')",
];

/// Recorded from PostgreSQL 15.18.
const WRITE_POSTGRESQL_15: &[(&str, &str)] = &[
    ("UPDATE acct SET n = acct.n * p.rate, note = 'priced ' || p.city FROM price p WHERE p.city = acct.city", "UPDATE 4"),
    ("SELECT * FROM acct ORDER BY id", "1|LHR|20|priced LHR
2|CDG|60|priced CDG
3|JFK|120|priced JFK
4|LHR|80|priced LHR
5||50|
6|ZRH|60|"),
    ("UPDATE acct a SET note = d.m FROM (SELECT id, max(msg) AS m FROM logs GROUP BY id) d WHERE d.id = a.id", "UPDATE 2"),
    ("SELECT id, note FROM acct ORDER BY id", "1|y
2|priced CDG
3|z
4|priced LHR
5|
6|"),
    ("UPDATE acct SET n = 0 FROM price WHERE price.rate > 100", "UPDATE 0"),
    ("UPDATE acct SET n = n + 1 FROM price WHERE price.city = acct.city AND price.rate = 3 AND acct.id IN (SELECT id FROM logs)", "UPDATE 0"),
    ("SELECT id, n FROM acct ORDER BY id", "1|20
2|60
3|120
4|80
5|50
6|60"),
    ("UPDATE pair SET v = v || '!' FROM acct WHERE acct.id = pair.a AND pair.b = 2", "UPDATE 2"),
    ("SELECT * FROM pair ORDER BY a, b", "1|1|a
1|2|b!
2|1|c
2|2|d!"),
    ("UPDATE acct SET n = logs.id FROM logs WHERE logs.msg = 'w' AND acct.id = 6", "UPDATE 1"),
    ("SELECT n FROM acct WHERE id = 6", "9"),
    ("UPDATE acct SET nope = 1 FROM price", "ERROR:  42703"),
    ("UPDATE acct SET n = price.nope FROM price", "ERROR:  42703"),
    ("UPDATE acct SET n = 1 FROM acct", "ERROR:  42712"),
    ("UPDATE acct SET n = 'x' FROM price WHERE price.city = acct.city", "ERROR:  22P02"),
    ("DELETE FROM acct USING price WHERE price.city = acct.city AND price.rate >= 3", "DELETE 2"),
    ("SELECT id FROM acct ORDER BY id", "1
4
5
6"),
    ("DELETE FROM logs USING acct a WHERE a.id = logs.id", "DELETE 2"),
    ("SELECT * FROM logs ORDER BY id, msg", "3|z
9|w"),
    ("DELETE FROM pair p USING (SELECT 2 AS a) x WHERE p.a = x.a", "DELETE 2"),
    ("SELECT * FROM pair ORDER BY a, b", "1|1|a
1|2|b!"),
    ("DELETE FROM acct USING price WHERE false", "DELETE 0"),
];

const FUNCTION_SETUP: &[&str] = &[
    "CREATE TABLE people (id INT PRIMARY KEY, name TEXT, city TEXT, born DATE, seen TIMESTAMP, score NUMERIC(6,2))",
    "INSERT INTO people VALUES (1, 'ada lovelace', 'LHR', '1815-12-10', '2024-02-15 10:30:45.5', 12.5), (2, 'bob', 'CDG', '1990-01-31', '2024-03-31 23:59:59', -3), (3, 'cy', 'LHR', '2000-02-29', '2023-12-31 00:00:00', 0), (4, NULL, NULL, NULL, NULL, NULL)",
];

/// Recorded from PostgreSQL 15.18.
const FUNCTION_POSTGRESQL_15: &[(&str, &str)] = &[
    ("SELECT city, string_agg(name, ', ' ORDER BY name DESC) FROM people GROUP BY city ORDER BY city", "CDG|bob
LHR|cy, ada lovelace
|"),
    ("SELECT string_agg(name, '-') FROM people WHERE id < 3", "ada lovelace-bob"),
    ("SELECT string_agg(DISTINCT city, ',' ORDER BY city) FROM people", "CDG,LHR"),
    ("SELECT string_agg(name, ',') FROM people WHERE id > 10", ""),
    ("SELECT count(*), string_agg(name, '|' ORDER BY born NULLS FIRST) FROM people", "4|ada lovelace|bob|cy"),
    ("SELECT string_agg(id, ',') FROM people", "ERROR:  42883"),
    ("SELECT left(name, 3), right(name, -2), lpad(city, 5, '*'), rpad(city, 2), strpos(name, 'a'), position('o' IN name) FROM people ORDER BY id", "ada|a lovelace|**LHR|LH|1|6
bob|b|**CDG|CD|0|2
cy||**LHR|LH|0|0
|||||"),
    ("SELECT split_part(name, ' ', 2), split_part('a,b,c', ',', -2), replace(name, 'a', 'A'), initcap(name), reverse(city), repeat(city, 2) FROM people ORDER BY id", "lovelace|b|AdA lovelAce|Ada Lovelace|RHL|LHRLHR
|b|bob|Bob|GDC|CDGCDG
|b|cy|Cy|RHL|LHRLHR
|b||||"),
    ("SELECT concat(name, '/', city, id), concat_ws('-', city, NULL, id), starts_with(name, 'b') FROM people ORDER BY id", "ada lovelace/LHR1|LHR-1|f
bob/CDG2|CDG-2|t
cy/LHR3|LHR-3|f
/4|4|"),
    ("SELECT split_part('a,b', ',', 0)", "ERROR:  22023"),
    ("SELECT greatest(1, 5, 3), least(2.5, 1, NULL), greatest(NULL::int, NULL), least('b', 'a', 'c')", "5|1||a"),
    ("SELECT mod(17, 5), mod(-17, 5), mod(17.5, 5)", "2|-2|2.5"),
    ("SELECT mod(10, 0)", "ERROR:  22012"),
    ("SELECT power(2, 10), sqrt(16), exp(0), ln(1), log(1000), pi(), sign(-4.5), sign(0)", "1024|4|1|0|3|3.141592653589793|-1|0"),
    ("SELECT sqrt(-1)", "ERROR:  2201F"),
    ("SELECT ln(0)", "ERROR:  2201E"),
    ("SELECT id, date_trunc('month', seen), date_trunc('year', born), date_trunc('week', seen), date_trunc('hour', seen) FROM people ORDER BY id", "1|2024-02-01 00:00:00|1815-01-01 00:00:00+00|2024-02-12 00:00:00|2024-02-15 10:00:00
2|2024-03-01 00:00:00|1990-01-01 00:00:00+00|2024-03-25 00:00:00|2024-03-31 23:00:00
3|2023-12-01 00:00:00|2000-01-01 00:00:00+00|2023-12-25 00:00:00|2023-12-31 00:00:00
4||||"),
    ("SELECT date_part('year', born), date_part('second', seen), date_part('dow', seen) FROM people ORDER BY id", "1815|45.5|4
1990|59|0
2000|0|0
||"),
    ("SELECT date_trunc('fortnight', seen) FROM people", "ERROR:  22023"),
    ("SELECT name FROM people WHERE strpos(name, 'b') > 0 OR left(city, 1) = 'L' ORDER BY id", "ada lovelace
bob
cy"),
];

#[test]
fn scripts_answer_as_postgresql_15_and_update_from_is_atomic() {
    let cluster = cluster("pgquery", 33700, &[]);
    let pg: Vec<u16> = (0..3).map(|index| 33720 + index).collect();
    run_script(pg[0], DERIVED_SETUP, DERIVED_POSTGRESQL_15);
    run_script(pg[1], WRITE_SETUP, WRITE_POSTGRESQL_15);
    run_script(pg[2], FUNCTION_SETUP, FUNCTION_POSTGRESQL_15);
    // Inside a block the statement is the block's: ROLLBACK undoes it, COMMIT keeps it.
    assert_eq!(
        psql(
            pg[2],
            &[
                "BEGIN",
                "UPDATE pair SET v = 'rolled back' FROM acct WHERE acct.id = pair.a",
                "ROLLBACK",
                "SELECT v FROM pair ORDER BY a, b",
            ]
        ),
        "BEGIN\nUPDATE 2\nROLLBACK\na\nb!"
    );
    assert_eq!(
        psql(
            pg[2],
            &[
                "BEGIN",
                "DELETE FROM pair USING acct WHERE acct.id = pair.a AND pair.b = 1",
                "COMMIT",
                "SELECT v FROM pair ORDER BY a, b",
            ]
        ),
        "BEGIN\nDELETE 1\nCOMMIT\nb!"
    );
    assert_eq!(concurrent_increments(&pg), 60);
    drop(cluster);
}

/// 3 clients, one per gateway, each running 20 increments of one row by UPDATE … FROM; the
/// row's final value.
fn concurrent_increments(pg: &[u16]) -> i64 {
    let setup = psql(
        pg[0],
        &[
            "CREATE TABLE hot (id INT PRIMARY KEY, n BIGINT)",
            "CREATE TABLE inc (id INT PRIMARY KEY, d BIGINT)",
            "INSERT INTO hot VALUES (1, 0)",
            "INSERT INTO inc VALUES (1, 1)",
        ],
    );
    assert!(!setup.contains("ERROR"), "{setup}");
    let statement = "UPDATE hot SET n = hot.n + inc.d FROM inc WHERE inc.id = hot.id";
    let clients: Vec<_> = pg
        .iter()
        .map(|port| {
            let port = *port;
            std::thread::spawn(move || psql(port, &[statement; 20]))
        })
        .collect();
    for client in clients {
        let output = client.join().unwrap();
        assert_eq!(output, ["UPDATE 1"; 20].join("\n"), "{output}");
    }
    psql(pg[0], &["SELECT n FROM hot"]).parse().unwrap()
}

#[test]
fn canary_update_from_without_its_transaction_loses_updates() {
    let cluster = cluster(
        "pgquerycanary",
        33750,
        &[("TESSERA_CANARY_WRITE_FROM_OUTSIDE_TRANSACTIONS", "1")],
    );
    let pg: Vec<u16> = (0..3).map(|index| 33770 + index).collect();
    let n = concurrent_increments(&pg);
    assert!(n < 60, "the canary lost no update: {n}");
    drop(cluster);
}
