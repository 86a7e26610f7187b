//! UPDATE … FROM and DELETE … USING (issue 20): through parse, plan, K engines and the
//! gateway, each statement answers what PostgreSQL 15 answered for it (recorded with psql -At
//! against a real server: rows and command tags as psql prints them, errors as their
//! SQLSTATE), for one and three partitions; and a target row matched twice is updated once,
//! with the match whose new values come first.

use crate::derived_join_tests::{compare, psql_text};
use crate::tests::Cluster;

const SETUP: &[&str] = &[
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
const POSTGRESQL_15: &[(&str, &str)] = &[
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

#[test]
fn update_from_and_delete_using_answer_as_postgresql() {
    for partitions in [1, 3] {
        compare(partitions, SETUP, POSTGRESQL_15);
    }
}

#[test]
fn a_row_matched_twice_is_updated_once_with_the_smallest_new_values() {
    for partitions in [1, 3] {
        let mut cluster = Cluster::new(partitions);
        for sql in SETUP {
            cluster.tag(sql);
        }
        // acct 1 matches logs 'x' and 'y'; acct 3 matches 'z'.
        assert_eq!(
            psql_text(
                &mut cluster,
                "UPDATE acct SET note = logs.msg FROM logs WHERE logs.id = acct.id"
            ),
            "UPDATE 2"
        );
        assert_eq!(
            psql_text(
                &mut cluster,
                "SELECT id, note FROM acct WHERE note IS NOT NULL ORDER BY id"
            ),
            "1|x\n3|z"
        );
        assert_eq!(
            psql_text(
                &mut cluster,
                "UPDATE acct SET note = logs.msg FROM logs WHERE logs.id = acct.id AND logs.msg > 'x'"
            ),
            "UPDATE 2"
        );
        assert_eq!(
            psql_text(&mut cluster, "SELECT note FROM acct WHERE id = 1"),
            "y"
        );
        // DELETE deletes a row matched twice once.
        assert_eq!(
            psql_text(
                &mut cluster,
                "DELETE FROM acct USING logs WHERE logs.id = acct.id"
            ),
            "DELETE 2"
        );
    }
}

#[test]
fn refused_forms_name_themselves() {
    let mut cluster = Cluster::new(2);
    for sql in SETUP {
        cluster.tag(sql);
    }
    for sql in [
        "UPDATE acct SET id = price.rate FROM price",
        "UPDATE acct SET n = 1 FROM price RETURNING acct.id",
        "DELETE FROM acct USING price RETURNING acct.id",
    ] {
        let error = cluster.run(sql).unwrap_err();
        assert_eq!(error.code, "0A000", "{sql}: {error}");
    }
}
