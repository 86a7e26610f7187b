//! string_agg with ORDER BY and the string, math and date functions of `crate::functions`
//! (issue 20): each statement answers what PostgreSQL 15 answered for it (recorded with psql
//! -At against a real server; errors as their SQLSTATE), for one and three partitions.

use crate::derived_join_tests::compare;
use crate::tests::Cluster;

const SETUP: &[&str] = &[
    "CREATE TABLE people (id INT PRIMARY KEY, name TEXT, city TEXT, born DATE, seen TIMESTAMP, score NUMERIC(6,2))",
    "INSERT INTO people VALUES (1, 'ada lovelace', 'LHR', '1815-12-10', '2024-02-15 10:30:45.5', 12.5), (2, 'bob', 'CDG', '1990-01-31', '2024-03-31 23:59:59', -3), (3, 'cy', 'LHR', '2000-02-29', '2023-12-31 00:00:00', 0), (4, NULL, NULL, NULL, NULL, NULL)",
];

/// Recorded from PostgreSQL 15.18.
const POSTGRESQL_15: &[(&str, &str)] = &[
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
fn functions_and_string_agg_answer_as_postgresql() {
    for partitions in [1, 3] {
        compare(partitions, SETUP, POSTGRESQL_15);
    }
}

#[test]
fn array_agg_and_aggregate_filters_are_refused_by_name() {
    let mut cluster = Cluster::new(2);
    for sql in SETUP {
        cluster.tag(sql);
    }
    let error = cluster.run("SELECT array_agg(id) FROM people").unwrap_err();
    assert_eq!(error.code, "0A000");
    assert!(error.message.contains("array_agg"), "{error}");
    let error = cluster
        .run("SELECT string_agg(name, ',') FILTER (WHERE id > 1) FROM people")
        .unwrap_err();
    assert_eq!(error.code, "0A000");
}
