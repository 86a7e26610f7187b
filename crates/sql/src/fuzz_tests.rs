//! Nothing a client sends crashes the front end: random bytes, token soup and mutations of
//! valid statements go through parse, prepare, bind, plan, execution on engines and merge, and
//! must come back as results or `SqlError`s with five-character SQLSTATEs.

use crate::merge_tests::Prng;
use crate::tests::Cluster;
use crate::{parse, plan_statement, prepare, SqlError};
use engine::Value;

const SEEDS: &[&str] = &[
    "SELECT id, name FROM people WHERE id = 1 AND age > 2 ORDER BY name DESC LIMIT 3",
    "SELECT city, count(*), sum(age), avg(score) FROM people GROUP BY city HAVING count(*) > 1",
    "INSERT INTO people (id, name, age) VALUES (7, 'x', 3), (8, 'y', NULL) ON CONFLICT (id) DO UPDATE SET age = EXCLUDED.age",
    "UPDATE people SET age = 4 WHERE id IN (1, 2) OR name LIKE 'a%'",
    "DELETE FROM people WHERE age BETWEEN 1 AND 30 AND city IS NOT NULL",
    "CREATE TABLE z (a INT PRIMARY KEY, b TEXT NOT NULL) WITH (placement = hash, partition_by = a)",
    "SELECT CASE WHEN age > 1 THEN 'a' ELSE 'b' END, age::text || '!', -age, abs(age) FROM people",
    "SELECT n.nspname, c.relname FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.relname ~ '^p'",
    "EXPLAIN SELECT * FROM people WHERE id = $1",
    "SET tessera.read_isolation = snapshot; SHOW TimeZone; COMMIT; ROLLBACK",
    "CREATE INDEX people_age ON people (age); DROP TABLE IF EXISTS z",
    "SELECT p.name, q.age FROM people p JOIN people q ON p.id = q.age LEFT JOIN people r USING (city) WHERE p.age > 1 ORDER BY 1 LIMIT 2",
    "SELECT count(*), q.city FROM people p, people q FULL OUTER JOIN people r ON r.id = q.id WHERE p.id = q.id + 1 GROUP BY q.city",
    "SELECT * FROM people a NATURAL RIGHT JOIN people b CROSS JOIN (people c INNER JOIN people d ON c.score = d.age)",
    "INSERT INTO people (id, name) VALUES (9, 'z') RETURNING id * 2, *; TRUNCATE people; CREATE INDEX ON people (city, age)",
];

const TOKENS: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "JOIN",
    "LEFT",
    "FULL",
    "ON",
    "USING",
    "NATURAL",
    "p.id",
    "q",
    "people",
    "id",
    "age",
    "name",
    "(",
    ")",
    ",",
    "=",
    "<",
    ">",
    "+",
    "-",
    "*",
    "/",
    "%",
    "||",
    "AND",
    "OR",
    "NOT",
    "NULL",
    "IS",
    "IN",
    "BETWEEN",
    "LIKE",
    "'a'",
    "1",
    "2147483647",
    "-9223372036854775808",
    "1e308",
    "$1",
    "$2",
    "GROUP",
    "BY",
    "ORDER",
    "HAVING",
    "LIMIT",
    "OFFSET",
    "count(*)",
    "sum(",
    "INSERT",
    "INTO",
    "VALUES",
    "UPDATE",
    "SET",
    "DELETE",
    "CREATE",
    "TABLE",
    "PRIMARY",
    "KEY",
    "INT",
    "::",
    "CASE",
    "WHEN",
    "THEN",
    "END",
    ";",
    "\"",
    "'",
    "E'\\x'",
    "ON",
    "CONFLICT",
    "DO",
    "NOTHING",
    "EXCLUDED.age",
    "pg_class",
    "DATE",
    "'2024-13-45'",
];

fn execute_everything(cluster: &mut Cluster, sql: &str) {
    let check = |error: &SqlError| assert_eq!(error.code.len(), 5, "{sql}: {error:?}");
    match parse(sql) {
        Err(error) => check(&error),
        Ok(statements) => {
            for statement in statements {
                match plan_statement(&statement, &cluster.catalog) {
                    Err(error) => check(&error),
                    Ok(crate::Plan::CopyIn(copy)) => {
                        if let Err(error) = copy.execution(b"1\t2\n\\N\n") {
                            check(&error);
                        }
                    }
                    Ok(plan) => {
                        if let Err(error) = cluster.execute(plan) {
                            check(&error);
                        }
                    }
                }
            }
        }
    }
    match prepare(sql, &cluster.catalog, &[]) {
        Err(error) => check(&error),
        Ok(prepared) => {
            let values: Vec<Option<Value>> = prepared
                .parameter_types
                .iter()
                .map(|_| Some(Value::Text("1".into())))
                .collect();
            match prepared.bind(&cluster.catalog, &values) {
                Err(error) => check(&error),
                Ok(plan) => {
                    if !matches!(plan, crate::Plan::CopyIn(_)) {
                        if let Err(error) = cluster.execute(plan) {
                            check(&error);
                        }
                    }
                }
            }
        }
    }
}

fn fresh_cluster() -> Cluster {
    let mut cluster = Cluster::new(2);
    cluster.tag("CREATE TABLE people (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL, age INT, city TEXT, score DOUBLE PRECISION)");
    cluster
        .tag("INSERT INTO people VALUES (1, 'ada', 36, 'london', 1.5), (2, 'bob', 25, NULL, NULL)");
    cluster
}

#[test]
fn random_and_mutated_sql_never_panics() {
    let mut prng = Prng::new(42);
    let mut cluster = fresh_cluster();
    for round in 0..4_000 {
        if round % 500 == 0 {
            cluster = fresh_cluster();
        }
        let sql = match prng.below(3) {
            0 => {
                let length = prng.below(60);
                (0..length)
                    .map(|_| char::from(32 + prng.below(95) as u8))
                    .collect::<String>()
            }
            1 => (0..1 + prng.below(25))
                .map(|_| *prng.pick(TOKENS))
                .collect::<Vec<_>>()
                .join(" "),
            _ => {
                let mut bytes: Vec<char> = prng.pick(SEEDS).chars().collect();
                for _ in 0..1 + prng.below(4) {
                    let at = prng.below(bytes.len() as u64 + 1) as usize;
                    match prng.below(3) {
                        0 if at < bytes.len() => {
                            bytes.remove(at);
                        }
                        1 => bytes.insert(
                            at,
                            *prng.pick(&['(', ')', '\'', ',', '1', ' ', ';', '$', '-', '*']),
                        ),
                        _ => {
                            let token = prng.pick(TOKENS);
                            for (offset, character) in format!(" {token} ").chars().enumerate() {
                                bytes.insert(at + offset, character);
                            }
                        }
                    }
                }
                bytes.into_iter().collect()
            }
        };
        execute_everything(&mut cluster, &sql);
    }
}

#[test]
fn deep_nesting_is_refused_not_a_stack_overflow() {
    let mut cluster = fresh_cluster();
    for depth in [100, 10_000] {
        let parentheses = format!("SELECT {}1{}", "(".repeat(depth), ")".repeat(depth));
        assert_eq!(cluster.run(&parentheses).unwrap_err().code, "54000");
        let nots = format!("SELECT * FROM people WHERE {} id = 1", "NOT ".repeat(depth));
        assert!(cluster.run(&nots).is_err());
        let sums = format!("SELECT {}1", "1 + ".repeat(depth));
        if depth > crate::parse::OPERATORS_MAX {
            assert_eq!(cluster.run(&sums).unwrap_err().code, "54001");
        }
        let unary = format!("SELECT {}1", "- ".repeat(depth));
        assert!(cluster.run(&unary).is_err());
    }
}

#[test]
fn operator_chains_at_the_limit_run_on_a_small_stack() {
    // Chains of OPERATORS_MAX operators, every way they can reach the planner and the
    // evaluator, on a thread with a 1 MiB stack (half a test thread's, a quarter of tokio's).
    let handle = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(|| {
            let mut cluster = fresh_cluster();
            let chain = |operator: &str, term: &str| {
                vec![term; crate::parse::OPERATORS_MAX / 2].join(operator)
            };
            let ors = format!("SELECT id FROM people WHERE {}", chain(" OR ", "id = 2"));
            assert_eq!(
                cluster.run(&ors).unwrap(),
                cluster.run("SELECT id FROM people WHERE id = 2").unwrap()
            );
            let residual = format!("SELECT id FROM people WHERE {}", chain(" OR ", "age > id"));
            assert!(cluster.run(&residual).is_ok());
            let sums = format!("SELECT {} FROM people", chain(" + ", "age"));
            assert!(cluster.run(&sums).is_ok());
            let concat = format!(
                "SELECT count(*) FROM people WHERE name || {} = ''",
                chain(" || ", "'x'")
            );
            assert!(cluster.run(&concat).is_ok());
            let write = format!("DELETE FROM people WHERE {}", chain(" OR ", "age > id"));
            assert_eq!(cluster.run(&write).unwrap_err().code, "0A000");
            let too_many = format!(
                "SELECT {}",
                vec!["1"; crate::parse::OPERATORS_MAX + 2].join(" + ")
            );
            assert_eq!(cluster.run(&too_many).unwrap_err().code, "54001");
        })
        .expect("spawn");
    handle.join().expect("no stack overflow");
}

#[test]
fn oversized_query_strings_are_refused() {
    let huge = "x".repeat(crate::parse::QUERY_BYTES_MAX + 1);
    assert_eq!(parse(&huge).unwrap_err().code, "54000");
}
