//! Drivers and ORMs reading the catalog (issue 20, items 6 and 7), with real processes and
//! real clients (ports 35000–35999 only), on the cluster `tessera dev` starts (3 routers, 3
//! storage processes, `vr` groups of 3: three partitions):
//!
//! (a) SQLAlchemy Core 1.4 over psycopg2 (`tests/python/sqlalchemy_core.py`):
//! `metadata.create_all` of two tables (integer and bigint primary keys, TEXT, VARCHAR(40),
//! TIMESTAMP, DEFAULT 'unknown' and DEFAULT now(), a secondary index), inserts that leave
//! defaulted columns out, a select with a join, then reflection (`inspect(engine)`:
//! `get_table_names`, `get_columns` with types, nullability and defaults, `get_pk_constraint`,
//! `get_indexes`, `get_foreign_keys`, `get_unique_constraints`, `get_check_constraints`;
//! `MetaData.reflect()`), and `drop_all`;
//! (b) pgjdbc 42.7's `DatabaseMetaData` (`tests/java/MetadataCheck.java`): `getTables`,
//! `getColumns` (types, sizes, nullability, defaults), `getPrimaryKeys` of a two-column key,
//! `getIndexInfo` (all and unique only, a two-column secondary index), `getImportedKeys` and
//! `getExportedKeys` (none: REFERENCES is refused);
//! (c) psql 15's `\d+ table` prints exactly what PostgreSQL 15 prints for the same table
//! (captured from a real PostgreSQL 15 server), also for a table without a primary key and
//! with every other column type, `\di` lists its indexes as PostgreSQL does,
//! and `\dt+` likewise except the Size column, which is empty (sizes are not tracked).

mod support;

use runtime::ecast::config::PartitionMode;
use std::path::Path;
use std::process::Command;
use support::partitioned::PartitionedCluster;

/// Runs `tests/python/<script>` with the node's address and credentials; its stdout lines.
fn python(script: &str, port: u16) -> Vec<String> {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new("/usr/bin/python3")
        .arg(manifest.join("tests/python").join(script))
        .args(["127.0.0.1", &port.to_string(), "tessera", ""])
        .output()
        .expect("python3 runs (scripts/test installs python3-sqlalchemy and python3-psycopg2)");
    assert!(
        output.status.success(),
        "{script}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn sqlalchemy_core_creates_joins_and_reflects_the_schema() {
    let _cluster = PartitionedCluster::dev("sqlalchemy", PartitionMode::Vr, 35010, 35060);
    let lines = python("sqlalchemy_core.py", 35060);
    // The script asserts every step; these lines show what reflection answered.
    assert_eq!(
        lines.first().map(String::as_str),
        Some("create_all: ok"),
        "{lines:?}"
    );
    assert!(
        lines.contains(&"indexes books: [('books_author', ['author_id'])]".to_string()),
        "{lines:?}"
    );
    assert!(
        lines.contains(&"pk books: ['id'] books_pkey".to_string()),
        "{lines:?}"
    );
    assert_eq!(
        lines.last().map(String::as_str),
        Some("drop_all: ok"),
        "{lines:?}"
    );
}

/// The pgjdbc jar `scripts/fetch-pgjdbc` puts in `target/java/` (its version from the script).
fn pgjdbc_jar() -> std::path::PathBuf {
    let repository = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = std::fs::read_to_string(repository.join("scripts/fetch-pgjdbc"))
        .expect("scripts/fetch-pgjdbc exists");
    let version = script
        .lines()
        .find_map(|line| line.strip_prefix("version=\""))
        .and_then(|rest| rest.strip_suffix('"'))
        .expect("scripts/fetch-pgjdbc sets version=\"...\"");
    let jar = repository.join(format!("target/java/postgresql-{version}.jar"));
    assert!(
        jar.is_file(),
        "{} is missing: run scripts/fetch-pgjdbc (scripts/test runs it)",
        jar.display()
    );
    jar
}

#[test]
fn pgjdbc_database_metadata_describes_tables_keys_and_indexes() {
    let _cluster = PartitionedCluster::dev("jdbcmeta", PartitionMode::Vr, 35020, 35070);
    let output = Command::new("java")
        .arg("-cp")
        .arg(pgjdbc_jar())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/MetadataCheck.java"))
        .args(["127.0.0.1", "35071"])
        .output()
        .expect("java (17 or later) is installed");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // MetadataCheck asserts each answer; the lines say what was checked.
    for call in [
        "getTables:",
        "getColumns:",
        "getPrimaryKeys: [region #1 orders_pkey, id #2 orders_pkey]",
        "getIndexInfo:",
        "getIndexInfo unique: [orders_pkey region, orders_pkey id]",
        "getImportedKeys: 0",
        "getExportedKeys: 0",
        "done",
    ] {
        assert!(
            stdout.lines().any(|line| line.starts_with(call)),
            "{call}: {stdout}"
        );
    }
}

/// psql's aligned output (what a user sees) of `commands`, as the user tessera.
fn psql_aligned(port: u16, commands: &[&str]) -> String {
    let mut command = Command::new("psql");
    command.args(["-X", "-h", "127.0.0.1", "-p", &port.to_string()]);
    command.args(["-U", "tessera", "-d", "tessera"]);
    for sql in commands {
        command.args(["-c", sql]);
    }
    let output = command
        .output()
        .expect("psql is installed (scripts/test installs postgresql-client)");
    let mut text = String::from_utf8_lossy(&output.stdout).to_string();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    text
}

/// `\d+ authors` as PostgreSQL 15 prints it for the table `psql_describes_like_postgres`
/// creates (psql 15 against PostgreSQL 15.x, captured).
const POSTGRES_DESCRIBE_VERBOSE: &str = r#"                                                              Table "public.authors"
 Column  |            Type             | Collation | Nullable |           Default            | Storage  | Compression | Stats target | Description 
---------+-----------------------------+-----------+----------+------------------------------+----------+-------------+--------------+-------------
 id      | integer                     |           | not null |                              | plain    |             |              | 
 name    | text                        |           | not null |                              | extended |             |              | 
 country | character varying(40)       |           |          | 'unknown'::character varying | extended |             |              | 
 joined  | timestamp without time zone |           |          | now()                        | plain    |             |              | 
Indexes:
    "authors_pkey" PRIMARY KEY, btree (id)
    "authors_name" btree (name)
Access method: heap

"#;

/// `\d+ t1` as PostgreSQL 15 prints it for a table without a primary key, with every other
/// column type and a two-column index (captured likewise).
const POSTGRES_DESCRIBE_NO_KEY: &str = r#"                                                    Table "public.t1"
 Column |           Type           | Collation | Nullable | Default | Storage  | Compression | Stats target | Description 
--------+--------------------------+-----------+----------+---------+----------+-------------+--------------+-------------
 a      | integer                  |           |          |         | plain    |             |              | 
 b      | bigint                   |           | not null |         | plain    |             |              | 
 c      | date                     |           |          |         | plain    |             |              | 
 d      | timestamp with time zone |           |          | now()   | plain    |             |              | 
 e      | bytea                    |           |          |         | extended |             |              | 
 f      | double precision         |           |          |         | plain    |             |              | 
 g      | boolean                  |           |          |         | plain    |             |              | 
Indexes:
    "t1_b_c" btree (b, c)
Access method: heap

"#;

#[test]
fn psql_describes_like_postgres() {
    let _cluster = PartitionedCluster::dev("psqldescribe", PartitionMode::Vr, 35030, 35080);
    let created = psql_aligned(
        35080,
        &[
            "CREATE TABLE authors (id INTEGER PRIMARY KEY, name TEXT NOT NULL, \
             country VARCHAR(40) DEFAULT 'unknown', joined TIMESTAMP DEFAULT now())",
            "CREATE INDEX authors_name ON authors (name)",
        ],
    );
    assert_eq!(created, "CREATE TABLE\nCREATE INDEX\n");
    // Through another node: the catalog is read through the primary.
    assert_eq!(
        psql_aligned(35081, &["\\d+ authors"]),
        POSTGRES_DESCRIBE_VERBOSE
    );
    assert_eq!(
        psql_aligned(35082, &["\\di authors*"]),
        "                 List of relations
 Schema |     Name     | Type  |  Owner  |  Table  
--------+--------------+-------+---------+---------
 public | authors_name | index | tessera | authors
 public | authors_pkey | index | tessera | authors
(2 rows)

"
    );
    psql_aligned(
        35080,
        &[
            "CREATE TABLE t1 (a INTEGER, b BIGINT NOT NULL, c DATE, d TIMESTAMPTZ DEFAULT now(), \
             e BYTEA, f DOUBLE PRECISION, g BOOLEAN)",
            "CREATE INDEX t1_b_c ON t1 (b, c)",
        ],
    );
    assert_eq!(psql_aligned(35081, &["\\d+ t1"]), POSTGRES_DESCRIBE_NO_KEY);
    // PostgreSQL prints the size ("8192 bytes"); here it is unknown, so empty.
    assert_eq!(
        psql_aligned(35080, &["\\dt+ authors"]),
        "                                   List of relations
 Schema |  Name   | Type  |  Owner  | Persistence | Access method | Size | Description 
--------+---------+-------+---------+-------------+---------------+------+-------------
 public | authors | table | tessera | permanent   | heap          |      | 
(1 row)

"
    );
}
