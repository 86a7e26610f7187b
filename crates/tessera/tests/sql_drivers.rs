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
//! `getExportedKeys` (none: REFERENCES is refused).

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
