//! Property: the gateway's merge of K partitions answers what one partition holding every row
//! answers. Seeded random tables are split by primary key hash over 2–5 engines; seeded random
//! SELECTs (pushed and residual WHERE conditions, projections with expressions, GROUP BY with
//! aggregates and HAVING, ORDER BY with directions and NULLS placement, LIMIT/OFFSET) must give
//! the same rows, or the same SQLSTATE, on both.

use crate::tests::Cluster;

/// xorshift64*: a small seeded generator, enough for test data.
pub(crate) struct Prng(u64);

impl Prng {
    pub(crate) fn new(seed: u64) -> Prng {
        Prng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub(crate) fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }

    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

const COLUMNS: &[&str] = &["id", "g", "h", "v", "w"];

fn random_value(prng: &mut Prng, column: &str) -> String {
    if column != "id" && prng.chance(15) {
        return "NULL".into();
    }
    match column {
        "g" => prng.below(4).to_string(),
        "h" => format!("'{}'", prng.pick(&["a", "b", "c", "ab", "ba"])),
        "v" => (prng.below(101) as i64 - 50).to_string(),
        _ => (prng.below(2_000_000) as i64 - 1_000_000).to_string(),
    }
}

fn random_condition(prng: &mut Prng) -> String {
    let column = *prng.pick(&["id", "g", "v", "w"]);
    let constant = (prng.below(61) as i64 - 20).to_string();
    match prng.below(12) {
        0 => format!(
            "{column} {} {constant}",
            prng.pick(&["=", "<>", "<", "<=", ">", ">="])
        ),
        1 => format!(
            "{column} IN ({constant}, {}, {})",
            prng.below(10),
            prng.below(40)
        ),
        2 => format!("{column} BETWEEN {constant} AND {}", prng.below(60)),
        3 => format!("h LIKE '{}'", prng.pick(&["a%", "%b", "_", "%", "a_"])),
        4 => format!(
            "{column} IS {}NULL",
            if prng.chance(50) { "NOT " } else { "" }
        ),
        5 => format!("NOT ({})", random_condition(prng)),
        6 => format!("({} OR {})", random_condition(prng), random_condition(prng)),
        // Residuals: the gateway evaluates these.
        7 => format!("{column} > {}", prng.pick(&["id", "g", "v"])),
        8 => format!("{column} + 3 < {constant}"),
        9 => format!("h || 'x' = '{}x'", prng.pick(&["a", "b", "ab"])),
        10 => format!("v < {}.5", prng.below(30)),
        _ => format!(
            "({} AND {})",
            random_condition(prng),
            random_condition(prng)
        ),
    }
}

fn random_order(prng: &mut Prng, items: usize) -> String {
    let keys = 1 + prng.below(3);
    let mut order = Vec::new();
    for _ in 0..keys {
        let key = if prng.chance(50) {
            (1 + prng.below(items as u64)).to_string()
        } else {
            prng.pick(COLUMNS).to_string()
        };
        let direction = prng.pick(&["", " ASC", " DESC"]);
        let nulls = prng.pick(&["", " NULLS FIRST", " NULLS LAST"]);
        order.push(format!("{key}{direction}{nulls}"));
    }
    format!(" ORDER BY {}", order.join(", "))
}

fn random_limit(prng: &mut Prng) -> String {
    let mut text = String::new();
    if prng.chance(40) {
        text.push_str(&format!(" LIMIT {}", prng.below(8)));
    }
    if prng.chance(25) {
        text.push_str(&format!(" OFFSET {}", prng.below(5)));
    }
    text
}

fn random_select(prng: &mut Prng) -> String {
    let mut sql = String::from("SELECT ");
    let grouped = prng.chance(40);
    let where_clause = if prng.chance(70) {
        format!(" WHERE {}", random_condition(prng))
    } else {
        String::new()
    };
    if grouped {
        let group_by: Vec<&str> = match prng.below(3) {
            0 => vec![],
            1 => vec![*prng.pick(&["g", "h"])],
            _ => vec!["g", "h"],
        };
        let mut items: Vec<String> = group_by.iter().map(|column| column.to_string()).collect();
        for _ in 0..1 + prng.below(3) {
            items.push(match prng.below(7) {
                0 => "count(*)".into(),
                1 => format!("count({})", prng.pick(&["v", "h", "w"])),
                2 => format!("sum({})", prng.pick(&["v", "w", "id"])),
                3 => format!("min({})", prng.pick(COLUMNS)),
                4 => format!("max({})", prng.pick(COLUMNS)),
                5 => format!("avg({})", prng.pick(&["v", "g"])),
                _ => "sum(v * 2 + g)".into(),
            });
        }
        sql.push_str(&items.join(", "));
        sql.push_str(" FROM t");
        sql.push_str(&where_clause);
        if !group_by.is_empty() {
            sql.push_str(&format!(" GROUP BY {}", group_by.join(", ")));
        }
        if prng.chance(30) {
            sql.push_str(&format!(" HAVING count(*) > {}", prng.below(4)));
        }
        if prng.chance(60) {
            let order: Vec<String> = (1..=items.len())
                .map(|at| format!("{at}{}", prng.pick(&["", " DESC"])))
                .collect();
            sql.push_str(&format!(" ORDER BY {}", order.join(", ")));
        }
    } else {
        let items: Vec<String> = if prng.chance(30) {
            vec!["*".into()]
        } else {
            (0..1 + prng.below(4))
                .map(|_| match prng.below(5) {
                    0 => "v + w".into(),
                    1 => "h || '-' || g".into(),
                    2 => "CASE WHEN v > 0 THEN 'pos' ELSE 'neg' END".into(),
                    _ => prng.pick(COLUMNS).to_string(),
                })
                .collect()
        };
        let count = if items[0] == "*" {
            COLUMNS.len()
        } else {
            items.len()
        };
        sql.push_str(&items.join(", "));
        sql.push_str(" FROM t");
        sql.push_str(&where_clause);
        if prng.chance(60) {
            sql.push_str(&random_order(prng, count));
        }
    }
    sql.push_str(&random_limit(prng));
    sql
}

/// Adds `id + 0 = id` (true for every row, and not expressible in the engine) to a grouped
/// query's WHERE.
fn force_gateway_fold(sql: &str) -> String {
    if !sql.contains(" GROUP BY ")
        && !sql.contains("count(")
        && !sql.contains("sum(")
        && !sql.contains("min(")
        && !sql.contains("max(")
        && !sql.contains("avg(")
    {
        return sql.to_string();
    }
    match sql.find(" WHERE ") {
        Some(at) => format!(
            "{} WHERE id + 0 = id AND ({}",
            &sql[..at],
            rest_with_parenthesis(&sql[at + 7..])
        ),
        None => sql.replacen(" FROM t", " FROM t WHERE id + 0 = id", 1),
    }
}

/// Closes the parenthesis opened around the original WHERE before its first trailing clause.
fn rest_with_parenthesis(rest: &str) -> String {
    let end = [
        " GROUP BY ",
        " HAVING ",
        " ORDER BY ",
        " LIMIT ",
        " OFFSET ",
    ]
    .iter()
    .filter_map(|clause| rest.find(clause))
    .min()
    .unwrap_or(rest.len());
    format!("{}){}", &rest[..end], &rest[end..])
}

#[test]
fn merging_k_partitions_answers_what_one_partition_answers() {
    let mut compared = 0;
    let mut rows_seen = 0usize;
    for seed in 0..160u64 {
        let mut prng = Prng::new(seed);
        let partitions = 2 + prng.below(4) as usize;
        let mut single = Cluster::new(1);
        let mut split = Cluster::new(partitions);
        let create = "CREATE TABLE t (id INT PRIMARY KEY, g INT, h TEXT, v INT, w BIGINT)";
        single.tag(create);
        split.tag(create);
        if prng.chance(30) {
            single.tag("CREATE INDEX t_g ON t (g)");
            split.tag("CREATE INDEX t_g ON t (g)");
        }
        let rows = prng.below(60);
        let mut ids: Vec<i64> = (0..rows as i64 * 2).collect();
        for at in (1..ids.len()).rev() {
            ids.swap(at, prng.below(at as u64 + 1) as usize);
        }
        let values: Vec<String> = ids
            .iter()
            .take(rows as usize)
            .map(|id| {
                let rest: Vec<String> = COLUMNS[1..]
                    .iter()
                    .map(|column| random_value(&mut prng, column))
                    .collect();
                format!("({}, {})", id - 10, rest.join(", "))
            })
            .collect();
        if !values.is_empty() {
            let insert = format!("INSERT INTO t VALUES {}", values.join(", "));
            single.tag(&insert);
            split.tag(&insert);
        }
        for _ in 0..40 {
            let sql = random_select(&mut prng);
            let expected = single.run(&sql);
            let actual = split.run(&sql);
            // The same query with an always-true residual conjunct makes the gateway fold
            // aggregates from rows instead of merging the engine's partials: same answer.
            let folded = force_gateway_fold(&sql);
            if folded != sql {
                let refolded = split.run(&folded);
                match (&expected, &refolded) {
                    (Ok(expected), Ok(refolded)) => {
                        assert_eq!(expected, refolded, "seed {seed}: {folded}")
                    }
                    (Err(expected), Err(refolded)) => {
                        assert_eq!(expected.code, refolded.code, "seed {seed}: {folded}")
                    }
                    _ => panic!("seed {seed}: {sql}\n{expected:?}\n{folded}\n{refolded:?}"),
                }
            }
            match (&expected, &actual) {
                (Ok(expected), Ok(actual)) => {
                    assert_eq!(expected, actual, "seed {seed}, {partitions} partitions: {sql}");
                    if let crate::StatementResult::Rows { rows, .. } = expected {
                        rows_seen += rows.len();
                    }
                    compared += 1;
                }
                (Err(expected), Err(actual)) => assert_eq!(expected.code, actual.code, "seed {seed}: {sql}"),
                _ => panic!("seed {seed}, {partitions} partitions: {sql}\n one: {expected:?}\n  {partitions}: {actual:?}"),
            }
        }
    }
    // The generator must mostly produce valid queries with rows, or the test proves little.
    assert!(compared > 5_000, "only {compared} queries answered");
    assert!(rows_seen > 20_000, "only {rows_seen} rows compared");
}

#[test]
fn merged_answers_match_a_naive_reference_for_aggregates() {
    // Beyond agreement between splits: spot-check the numbers against a fold over the data.
    let mut prng = Prng::new(7);
    let mut cluster = Cluster::new(3);
    cluster.tag("CREATE TABLE t (id INT PRIMARY KEY, g INT, v INT)");
    let mut data = Vec::new();
    for id in 0..200 {
        let g = prng.below(5) as i64;
        let v = prng.below(1000) as i64 - 500;
        data.push((id, g, v));
    }
    let values: Vec<String> = data
        .iter()
        .map(|(id, g, v)| format!("({id}, {g}, {v})"))
        .collect();
    cluster.tag(&format!("INSERT INTO t VALUES {}", values.join(", ")));
    let crate::StatementResult::Rows { rows, .. } = cluster.run("SELECT g, count(*), sum(v), min(v), max(v) FROM t WHERE v > -100 GROUP BY g ORDER BY g").unwrap() else { panic!() };
    for row in rows {
        let engine::Value::Int(g) = row[0] else {
            panic!()
        };
        let members: Vec<i64> = data
            .iter()
            .filter(|(_, group, v)| *group == i64::from(g) && *v > -100)
            .map(|(_, _, v)| *v)
            .collect();
        assert_eq!(row[1], engine::Value::BigInt(members.len() as i64));
        assert_eq!(row[2], engine::Value::BigInt(members.iter().sum()));
        assert_eq!(
            row[3],
            engine::Value::Int(*members.iter().min().unwrap() as i32)
        );
        assert_eq!(
            row[4],
            engine::Value::Int(*members.iter().max().unwrap() as i32)
        );
    }
}

/// The gateway's merged result is bounded as one partition's is: three partitions each answer
/// about 12 MiB of rows (under their own bound), the merged `SELECT *` would be about 36 MiB
/// and fails with 54000 naming the gateway's bound; the same rows cut by LIMIT, narrowed by
/// WHERE or counted answer. Gateway expressions that grow the rows are bounded too.
#[test]
fn the_merged_result_of_several_partitions_is_bounded_with_54000() {
    use crate::merge::MERGED_RESULT_BYTES_MAX;
    use crate::StatementResult;
    let mut cluster = Cluster::new(3);
    cluster
        .run("CREATE TABLE blobs (id INT PRIMARY KEY, body TEXT)")
        .unwrap();
    // 36 rows of 1 MiB: about 12 per partition, each partition far under its 32 MiB.
    for id in 0..36 {
        cluster
            .run(&format!(
                "INSERT INTO blobs VALUES ({id}, repeat('x', {}))",
                1 << 20
            ))
            .unwrap();
    }
    const _: () = assert!(36 << 20 > MERGED_RESULT_BYTES_MAX);
    let error = cluster.run("SELECT * FROM blobs").unwrap_err();
    assert_eq!(error.code, "54000", "{error:?}");
    assert!(error.message.contains("the gateway"), "{}", error.message);
    // ORDER BY takes the sorted path; the final check catches it too.
    let error = cluster
        .run("SELECT id, body FROM blobs ORDER BY id DESC")
        .unwrap_err();
    assert_eq!(error.code, "54000", "{error:?}");
    // What fits is answered.
    let StatementResult::Rows { rows, .. } = cluster
        .run("SELECT id, body FROM blobs ORDER BY id LIMIT 20")
        .unwrap()
    else {
        panic!("rows expected")
    };
    assert_eq!(rows.len(), 20);
    let StatementResult::Rows { rows, .. } =
        cluster.run("SELECT * FROM blobs WHERE id < 10").unwrap()
    else {
        panic!("rows expected")
    };
    assert_eq!(rows.len(), 10);
    let StatementResult::Rows { rows, .. } = cluster
        .run("SELECT count(*), sum(length(body)) FROM blobs")
        .unwrap()
    else {
        panic!("rows expected")
    };
    let texts: Vec<String> = rows[0].iter().map(ToString::to_string).collect();
    assert_eq!(texts, vec!["36".to_string(), (36u64 << 20).to_string()]);
    // The gateway evaluates the select list: rows that are small at the partitions but grow
    // there are bounded as well.
    let error = cluster
        .run("SELECT repeat(body, 4) FROM blobs WHERE id < 10")
        .unwrap_err();
    assert_eq!(error.code, "54000", "{error:?}");
}
