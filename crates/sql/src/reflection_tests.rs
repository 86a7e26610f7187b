//! The catalog queries of SQLAlchemy 1.4's PostgreSQL dialect (reflection: `get_table_oid`,
//! `get_columns`, `get_pk_constraint`, `get_indexes`, `get_foreign_keys`,
//! `get_unique_constraints`, `get_check_constraints`) and what psycopg2 sends on connect,
//! verbatim, against a table with a primary key, a DEFAULT and a secondary index.

use crate::tests::Cluster;
use crate::StatementResult;
use engine::Value;

fn authors() -> Cluster {
    let mut cluster = Cluster::new(1);
    cluster.tag(
        "CREATE TABLE authors (id INTEGER NOT NULL, name TEXT NOT NULL, \
         country VARCHAR(40) DEFAULT 'unknown', rank BIGINT, PRIMARY KEY (id))",
    );
    cluster.tag("CREATE INDEX authors_rank_name ON authors (rank, name)");
    cluster
}

fn rows(cluster: &mut Cluster, sql: &str) -> Vec<Vec<Value>> {
    match cluster.run(sql) {
        Ok(StatementResult::Rows { rows, .. }) => rows,
        other => panic!("{sql}: {other:?}"),
    }
}

fn text(value: &str) -> Value {
    Value::Text(value.to_string())
}

/// The table's oid as SQLAlchemy's `get_table_oid` finds it.
fn table_oid(cluster: &mut Cluster, name: &str) -> Value {
    let query = format!(
        "SELECT c.oid FROM pg_catalog.pg_class c \
         LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
         WHERE (pg_catalog.pg_table_is_visible(c.oid)) \
         AND c.relname = '{name}' AND c.relkind in ('r', 'v', 'm', 'f', 'p')"
    );
    let found = rows(cluster, &query);
    assert_eq!(found.len(), 1, "{found:?}");
    found[0][0].clone()
}

fn oid_text(oid: &Value) -> String {
    crate::types::encode_text(oid).unwrap()
}

#[test]
fn psycopg2_connect_queries_answer() {
    let mut cluster = authors();
    // psycopg2's HstoreAdapter.get_oids: no hstore type, so no rows.
    let hstore = rows(
        &mut cluster,
        "SELECT t.oid, typarray FROM pg_type t JOIN pg_namespace ns ON typnamespace = ns.oid \
         WHERE typname = 'hstore'",
    );
    assert!(hstore.is_empty(), "{hstore:?}");
    let int4 = rows(
        &mut cluster,
        "SELECT t.oid, typarray FROM pg_type t JOIN pg_namespace ns ON typnamespace = ns.oid \
         WHERE typname = 'int4'",
    );
    assert_eq!(int4, vec![vec![Value::BigInt(23), Value::BigInt(1007)]]);
    assert_eq!(
        rows(&mut cluster, "show transaction isolation level"),
        vec![vec![text("serializable")]]
    );
}

#[test]
fn sqlalchemy_reflects_columns_primary_key_and_indexes() {
    let mut cluster = authors();
    let oid = oid_text(&table_oid(&mut cluster, "authors"));
    let columns = format!(
        "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), \
         (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid) FROM pg_catalog.pg_attrdef d \
          WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef) AS DEFAULT, \
         a.attnotnull, a.attrelid as table_oid, pgd.description as comment, \
         a.attgenerated as generated, \
         (SELECT json_build_object('always', a.attidentity = 'a', 'start', s.seqstart, \
            'increment', s.seqincrement, 'minvalue', s.seqmin, 'maxvalue', s.seqmax, \
            'cache', s.seqcache, 'cycle', s.seqcycle) \
          FROM pg_catalog.pg_sequence s JOIN pg_catalog.pg_class c on s.seqrelid = c.\"oid\" \
          WHERE c.relkind = 'S' AND a.attidentity != '' \
          AND s.seqrelid = pg_catalog.pg_get_serial_sequence(a.attrelid::regclass::text, \
            a.attname)::regclass::oid) as identity_options \
         FROM pg_catalog.pg_attribute a \
         LEFT JOIN pg_catalog.pg_description pgd ON (pgd.objoid = a.attrelid AND pgd.objsubid = a.attnum) \
         WHERE a.attrelid = {oid} AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"
    );
    let found = rows(&mut cluster, &columns);
    let described: Vec<Vec<Value>> = found.iter().map(|row| row[..4].to_vec()).collect();
    assert_eq!(
        described,
        vec![
            vec![
                text("id"),
                text("integer"),
                Value::Null,
                Value::Boolean(true)
            ],
            vec![
                text("name"),
                text("text"),
                Value::Null,
                Value::Boolean(true)
            ],
            vec![
                text("country"),
                text("character varying(40)"),
                text("'unknown'::character varying"),
                Value::Boolean(false)
            ],
            vec![
                text("rank"),
                text("bigint"),
                Value::Null,
                Value::Boolean(false)
            ],
        ]
    );
    assert!(found
        .iter()
        .all(|row| row[5] == Value::Null && row[7] == Value::Null));
    let primary_key = format!(
        "SELECT a.attname FROM pg_attribute a JOIN ( \
           SELECT unnest(ix.indkey) attnum, generate_subscripts(ix.indkey, 1) ord \
           FROM pg_index ix WHERE ix.indrelid = {oid} AND ix.indisprimary) k \
         ON a.attnum=k.attnum WHERE a.attrelid = {oid} ORDER BY k.ord"
    );
    assert_eq!(rows(&mut cluster, &primary_key), vec![vec![text("id")]]);
    let constraint = format!(
        "SELECT conname FROM pg_catalog.pg_constraint r \
         WHERE r.conrelid = {oid} AND r.contype = 'p' ORDER BY 1"
    );
    assert_eq!(
        rows(&mut cluster, &constraint),
        vec![vec![text("authors_pkey")]]
    );
    let indexes = format!(
        "SELECT i.relname as relname, ix.indisunique, ix.indexprs, a.attname, a.attnum, \
           c.conrelid, ix.indkey::varchar, ix.indoption::varchar, i.reloptions, am.amname, \
           pg_get_expr(ix.indpred, ix.indrelid), ix.indnkeyatts as indnkeyatts \
         FROM pg_class t join pg_index ix on t.oid = ix.indrelid \
           join pg_class i on i.oid = ix.indexrelid \
           left outer join pg_attribute a on t.oid = a.attrelid and a.attnum = ANY(ix.indkey) \
           left outer join pg_constraint c on (ix.indrelid = c.conrelid and \
             ix.indexrelid = c.conindid and c.contype in ('p', 'u', 'x')) \
           left outer join pg_am am on i.relam = am.oid \
         WHERE t.relkind IN ('r', 'v', 'f', 'm', 'p') and t.oid = {oid} \
           and ix.indisprimary = 'f' ORDER BY t.relname, i.relname"
    );
    let found = rows(&mut cluster, &indexes);
    assert_eq!(found.len(), 2, "{found:?}");
    for (row, (column, number)) in found.iter().zip([("name", 2), ("rank", 4)]) {
        assert_eq!(row[0], text("authors_rank_name"));
        assert_eq!(row[1], Value::Boolean(false));
        assert_eq!(row[2], Value::Null);
        assert_eq!(row[3], text(column));
        assert_eq!(row[4], Value::Int(number));
        assert_eq!(row[5], Value::Null);
        assert_eq!(row[6], text("4 2"));
        assert_eq!(row[7], text("0 0"));
        assert_eq!(row[9], text("btree"));
        assert_eq!(row[10], Value::Null);
        assert_eq!(row[11], Value::Int(2));
    }
}

#[test]
fn sqlalchemy_finds_no_foreign_unique_or_check_constraints() {
    let mut cluster = authors();
    let oid = oid_text(&table_oid(&mut cluster, "authors"));
    let queries = [
        format!(
            "SELECT r.conname, pg_catalog.pg_get_constraintdef(r.oid, true) as condef, \
             n.nspname as conschema FROM pg_catalog.pg_constraint r, pg_namespace n, pg_class c \
             WHERE r.conrelid = {oid} AND r.contype = 'f' AND c.oid = confrelid \
             AND n.oid = c.relnamespace ORDER BY 1"
        ),
        format!(
            "SELECT cons.conname as name, cons.conkey as key, a.attnum as col_num, \
             a.attname as col_name FROM pg_catalog.pg_constraint cons join pg_attribute a \
             on cons.conrelid = a.attrelid AND a.attnum = ANY(cons.conkey) \
             WHERE cons.conrelid = {oid} AND cons.contype = 'u'"
        ),
        format!(
            "SELECT cons.conname as name, pg_get_constraintdef(cons.oid) as src \
             FROM pg_catalog.pg_constraint cons WHERE cons.conrelid = {oid} AND cons.contype = 'c'"
        ),
        format!(
            "SELECT pgd.description as table_comment FROM pg_catalog.pg_description pgd \
             WHERE pgd.objsubid = 0 AND pgd.objoid = {oid}"
        ),
    ];
    for query in &queries {
        assert_eq!(
            rows(&mut cluster, query),
            Vec::<Vec<Value>>::new(),
            "{query}"
        );
    }
    // The primary key's conkey lists its column, which ANY finds.
    let key = format!(
        "SELECT a.attname FROM pg_catalog.pg_constraint cons join pg_attribute a \
         on cons.conrelid = a.attrelid AND a.attnum = ANY(cons.conkey) \
         WHERE cons.conrelid = {oid} AND cons.contype = 'p'"
    );
    assert_eq!(rows(&mut cluster, &key), vec![vec![text("id")]]);
    // _load_enums and _load_domains: no enum or domain types.
    let enums = "SELECT t.typname as \"name\", pg_catalog.pg_type_is_visible(t.oid) as \"visible\", \
                 n.nspname as \"schema\", e.enumlabel as \"label\" FROM pg_catalog.pg_type t \
                 LEFT JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace \
                 LEFT JOIN pg_catalog.pg_enum e ON t.oid = e.enumtypid \
                 WHERE t.typtype = 'e' AND n.nspname = 'public' ORDER BY \"schema\", \"name\", e.oid";
    assert_eq!(rows(&mut cluster, enums), Vec::<Vec<Value>>::new());
    let domains = "SELECT t.typname as \"name\", \
                   pg_catalog.format_type(t.typbasetype, t.typtypmod) as \"attype\", \
                   not t.typnotnull as \"nullable\", t.typdefault as \"default\", \
                   pg_catalog.pg_type_is_visible(t.oid) as \"visible\", n.nspname as \"schema\" \
                   FROM pg_catalog.pg_type t \
                   LEFT JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace \
                   WHERE t.typtype = 'd'";
    assert_eq!(rows(&mut cluster, domains), Vec::<Vec<Value>>::new());
    let has_table = "select relname from pg_class c join pg_namespace n on \
                     n.oid=c.relnamespace where pg_catalog.pg_table_is_visible(c.oid) \
                     and relname='authors'";
    assert_eq!(rows(&mut cluster, has_table), vec![vec![text("authors")]]);
}

/// pgjdbc 42.7's getIndexInfo (server 9.6 and later), with the table's schema and name.
#[test]
fn pgjdbc_index_info_lists_every_index_column() {
    let mut cluster = authors();
    let query = "SELECT     tmp.TABLE_CAT AS \"TABLE_CAT\",     tmp.TABLE_SCHEM AS \"TABLE_SCHEM\",     tmp.TABLE_NAME AS \"TABLE_NAME\",     tmp.NON_UNIQUE AS \"NON_UNIQUE\",     tmp.INDEX_QUALIFIER AS \"INDEX_QUALIFIER\",     tmp.INDEX_NAME AS \"INDEX_NAME\",     tmp.TYPE AS \"TYPE\",     tmp.ORDINAL_POSITION AS \"ORDINAL_POSITION\",     trim(both '\"' from pg_catalog.pg_get_indexdef(tmp.CI_OID, tmp.ORDINAL_POSITION, false)) AS \"COLUMN_NAME\",   CASE tmp.AM_NAME     WHEN 'btree' THEN CASE tmp.I_INDOPTION[tmp.ORDINAL_POSITION - 1] & 1::smallint       WHEN 1 THEN 'D'       ELSE 'A'     END     ELSE NULL   END AS \"ASC_OR_DESC\",     tmp.CARDINALITY AS \"CARDINALITY\",     tmp.PAGES AS \"PAGES\",     tmp.FILTER_CONDITION AS \"FILTER_CONDITION\",     tmp.REMARKS AS \"REMARKS\"FROM (SELECT current_database() AS TABLE_CAT,  n.nspname AS TABLE_SCHEM,   ct.relname AS TABLE_NAME, NOT i.indisunique AS NON_UNIQUE,   NULL AS INDEX_QUALIFIER, ci.relname AS INDEX_NAME,   CASE i.indisclustered     WHEN true THEN 1    ELSE CASE am.amname       WHEN 'hash' THEN 2      ELSE 3    END   END AS TYPE,   (information_schema._pg_expandarray(i.indkey)).n AS ORDINAL_POSITION,   ci.reltuples AS CARDINALITY,   ci.relpages AS PAGES,   pg_catalog.pg_get_expr(i.indpred, i.indrelid) AS FILTER_CONDITION,   ci.oid AS CI_OID,   i.indoption AS I_INDOPTION,   am.amname AS AM_NAME,   d.description AS REMARKS FROM pg_catalog.pg_class ct   JOIN pg_catalog.pg_namespace n ON (ct.relnamespace = n.oid)   JOIN pg_catalog.pg_index i ON (ct.oid = i.indrelid)   JOIN pg_catalog.pg_class ci ON (ci.oid = i.indexrelid)   JOIN pg_catalog.pg_am am ON (ci.relam = am.oid)   LEFT JOIN pg_catalog.pg_description d ON (ci.oid = d.objoid) WHERE true  AND n.nspname = 'public' AND ct.relname = 'authors' ) AS tmp ORDER BY \"NON_UNIQUE\", \"TYPE\", \"INDEX_NAME\", \"ORDINAL_POSITION\" ";
    let found: Vec<Vec<Value>> = rows(&mut cluster, query)
        .into_iter()
        .map(|row| {
            vec![
                row[3].clone(),
                row[5].clone(),
                row[7].clone(),
                row[8].clone(),
                row[9].clone(),
            ]
        })
        .collect();
    let row = |unique: bool, index: &str, at: i32, column: &str| {
        vec![
            Value::Boolean(!unique),
            text(index),
            Value::Int(at),
            text(column),
            text("A"),
        ]
    };
    assert_eq!(
        found,
        vec![
            row(true, "authors_pkey", 1, "id"),
            row(false, "authors_rank_name", 1, "rank"),
            row(false, "authors_rank_name", 2, "name"),
        ]
    );
}

/// pgjdbc's getImportedKeys and getExportedKeys read max_index_keys first, then join
/// pg_constraint's foreign keys (none here: REFERENCES is refused).
#[test]
fn pgjdbc_foreign_key_queries_answer_no_rows() {
    let mut cluster = authors();
    assert_eq!(
        rows(
            &mut cluster,
            "SELECT setting FROM pg_catalog.pg_settings WHERE name='max_index_keys'"
        ),
        vec![vec![text("32")]]
    );
    let imported = "SELECT current_database() AS \"PKTABLE_CAT\", pkn.nspname AS \"PKTABLE_SCHEM\", pkc.relname AS \"PKTABLE_NAME\", pka.attname AS \"PKCOLUMN_NAME\", current_database() AS \"FKTABLE_CAT\", fkn.nspname AS \"FKTABLE_SCHEM\", fkc.relname AS \"FKTABLE_NAME\", fka.attname AS \"FKCOLUMN_NAME\", pos.n AS \"KEY_SEQ\", CASE con.confupdtype  WHEN 'c' THEN 0 WHEN 'n' THEN 2 WHEN 'd' THEN 4 WHEN 'r' THEN 1 WHEN 'p' THEN 1 WHEN 'a' THEN 3 ELSE NULL END AS \"UPDATE_RULE\", CASE con.confdeltype  WHEN 'c' THEN 0 WHEN 'n' THEN 2 WHEN 'd' THEN 4 WHEN 'r' THEN 1 WHEN 'p' THEN 1 WHEN 'a' THEN 3 ELSE NULL END AS \"DELETE_RULE\", con.conname AS \"FK_NAME\", pkic.relname AS \"PK_NAME\", CASE  WHEN con.condeferrable AND con.condeferred THEN 5 WHEN con.condeferrable THEN 6 ELSE 7 END AS \"DEFERRABILITY\"  FROM  pg_catalog.pg_namespace pkn, pg_catalog.pg_class pkc, pg_catalog.pg_attribute pka,  pg_catalog.pg_namespace fkn, pg_catalog.pg_class fkc, pg_catalog.pg_attribute fka,  pg_catalog.pg_constraint con,  pg_catalog.generate_series(1, 32) pos(n),  pg_catalog.pg_class pkic WHERE pkn.oid = pkc.relnamespace AND pkc.oid = pka.attrelid AND pka.attnum = con.confkey[pos.n] AND con.confrelid = pkc.oid  AND fkn.oid = fkc.relnamespace AND fkc.oid = fka.attrelid AND fka.attnum = con.conkey[pos.n] AND con.conrelid = fkc.oid  AND con.contype = 'f' AND pkic.oid = con.conindid AND fkn.nspname = 'public' AND fkc.relname = 'authors' ORDER BY pkn.nspname,pkc.relname, con.conname,pos.n";
    assert_eq!(rows(&mut cluster, imported), Vec::<Vec<Value>>::new());
}

#[test]
fn generate_series_is_a_table_function() {
    let mut cluster = authors();
    assert_eq!(
        rows(
            &mut cluster,
            "SELECT pos.n * 2 FROM generate_series(1, 3) pos(n) ORDER BY 1 DESC"
        ),
        vec![
            vec![Value::Int(6)],
            vec![Value::Int(4)],
            vec![Value::Int(2)]
        ]
    );
    assert_eq!(
        rows(
            &mut cluster,
            "SELECT s FROM generate_series(2, 5) s WHERE s > 3"
        ),
        vec![vec![Value::Int(4)], vec![Value::Int(5)]]
    );
    assert_eq!(
        cluster
            .run("SELECT * FROM generate_series(1, 100000000)")
            .unwrap_err()
            .code,
        "54000"
    );
}

/// What psql 15's `\d+` and `\dt+` call beyond `\d`: `array(subquery)`, `array_to_string`,
/// `pg_size_pretty` (sizes themselves are not tracked: NULL).
#[test]
fn psql_verbose_describe_functions_answer() {
    let mut cluster = authors();
    assert_eq!(
        rows(
            &mut cluster,
            "SELECT pg_catalog.array_to_string(array(select relname from pg_catalog.pg_class \
             where relkind = 'i'), ', ') FROM pg_catalog.pg_namespace WHERE nspname = 'public'"
        ),
        vec![vec![text("authors_pkey, authors_rank_name")]]
    );
    assert_eq!(
        rows(
            &mut cluster,
            "SELECT pg_catalog.pg_size_pretty(n), pg_catalog.pg_size_pretty(pg_catalog.pg_table_size(c.oid)) \
             FROM pg_catalog.pg_class c, (SELECT 8192 AS n) s WHERE c.relname = 'authors'"
        ),
        vec![vec![text("8192 bytes"), Value::Null]]
    );
    let verbose = "SELECT c.relchecks, pg_catalog.array_to_string(c.reloptions || array(select 'toast.' || x from pg_catalog.unnest(tc.reloptions) x), ', ') \
                   FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_class tc ON (c.reltoastrelid = tc.oid) \
                   WHERE c.relname = 'authors'";
    assert_eq!(
        rows(&mut cluster, verbose),
        vec![vec![Value::Int(0), Value::Null]]
    );
}

/// A table without a primary key shows its secondary indexes (and no primary key index), as
/// psql's `\d` reads them.
#[test]
fn secondary_indexes_of_a_table_without_a_primary_key_are_listed() {
    let mut cluster = Cluster::new(1);
    cluster.tag("CREATE TABLE t1 (a INTEGER, b BIGINT NOT NULL)");
    cluster.tag("CREATE INDEX t1_b ON t1 (b)");
    let oid = oid_text(&table_oid(&mut cluster, "t1"));
    let indexes = format!(
        "SELECT c2.relname, i.indisprimary, pg_catalog.pg_get_indexdef(i.indexrelid, 0, true) \
         FROM pg_catalog.pg_class c, pg_catalog.pg_class c2, pg_catalog.pg_index i \
         WHERE c.oid = '{oid}' AND c.oid = i.indrelid AND i.indexrelid = c2.oid \
         ORDER BY i.indisprimary DESC, c2.relname"
    );
    assert_eq!(
        rows(&mut cluster, &indexes),
        vec![vec![
            text("t1_b"),
            Value::Boolean(false),
            text("CREATE INDEX t1_b ON public.t1 USING btree (b)")
        ]]
    );
}
