//! The state machine a node replicates: the RESP front end's key-value namespace and the SQL
//! front end's table engine, in one group, one log and one order.
//!
//! An operation is a tag byte and the front end's own encoding: `0` and a `kv::Command`, `1` and
//! an `engine::Command`. Results are the front end's own outcome bytes. Both halves are
//! deterministic, so the pair is; a snapshot is both halves' snapshots.
//!
//! The crate is pure (`tests/purity.rs`): the runtime replicates it over TCP and the simulator
//! (`crates/sim`) replicates the same type, so a seed exercises exactly what a node runs.
//!
//! Today the two namespaces are separate: a SQL statement cannot read a RESP key. (Issue 7 asks
//! for the KV namespace as a built-in table; that is not built yet.)

use kv::KvStore;
use serde::{Deserialize, Serialize};
use vr::{RestoreError, StateMachine};

const TAG_KV: u8 = 0;
const TAG_SQL: u8 = 1;
/// A read of the SQL catalog (every table's schema and indexes), answered by `query`.
const TAG_CATALOG: u8 = 2;

/// The catalog read, as an operation of the store.
pub fn catalog_operation() -> Vec<u8> {
    vec![TAG_CATALOG]
}

/// Every table's schema and secondary indexes ((name, column) pairs), as `catalog_operation`
/// returns them.
pub type CatalogTables = Vec<(engine::TableSchema, Vec<(String, String)>)>;

/// Decodes the answer to `catalog_operation` into a catalog.
pub fn decode_catalog(bytes: &[u8]) -> Option<sql::MemoryCatalog> {
    let tables: CatalogTables = postcard::from_bytes(bytes).ok()?;
    let mut catalog = sql::MemoryCatalog::new();
    for (schema, indexes) in tables {
        let options = sql::TableOptions::defaults(&schema);
        catalog.insert(sql::TableEntry {
            schema,
            indexes,
            options,
        });
    }
    Some(catalog)
}

fn encode_catalog(engine: &engine::Engine) -> Vec<u8> {
    use sql::Catalog;
    let tables: CatalogTables = Catalog::table_names(engine)
        .into_iter()
        .filter_map(|name| Catalog::table(engine, &name))
        .map(|entry| (entry.schema, entry.indexes))
        .collect();
    postcard::to_allocvec(&tables).expect("schemas serialise")
}

/// A RESP command as an operation of the store.
pub fn kv_operation(command: &kv::Command) -> Vec<u8> {
    tagged(TAG_KV, command.encode())
}

/// An engine command as an operation of the store.
pub fn sql_operation(command: &engine::Command) -> Vec<u8> {
    tagged(TAG_SQL, command.encode())
}

fn tagged(tag: u8, bytes: Vec<u8>) -> Vec<u8> {
    let mut operation = Vec::with_capacity(bytes.len() + 1);
    operation.push(tag);
    operation.extend_from_slice(&bytes);
    operation
}

#[derive(Default)]
pub struct Store {
    pub kv: KvStore,
    pub engine: engine::Engine,
}

#[derive(Serialize, Deserialize)]
struct Snapshot {
    kv: Vec<u8>,
    engine: Vec<u8>,
}

impl Store {
    pub fn new() -> Store {
        Store::default()
    }
}

/// The answer to an operation whose tag is unknown, in the KV front end's terms.
fn malformed() -> Vec<u8> {
    kv::Outcome::Error(kv::KvError::Malformed).encode()
}

impl StateMachine for Store {
    fn apply(&mut self, operation: &[u8]) -> Vec<u8> {
        match operation.split_first() {
            Some((&TAG_KV, rest)) => self.kv.apply(rest),
            Some((&TAG_SQL, rest)) => self.engine.apply(rest),
            Some((&TAG_CATALOG, [])) => encode_catalog(&self.engine),
            _ => malformed(),
        }
    }

    fn query(&self, operation: &[u8]) -> Vec<u8> {
        match operation.split_first() {
            Some((&TAG_KV, rest)) => self.kv.query(rest),
            Some((&TAG_SQL, rest)) => self.engine.query(rest),
            Some((&TAG_CATALOG, [])) => encode_catalog(&self.engine),
            _ => malformed(),
        }
    }

    fn snapshot(&self) -> Vec<u8> {
        let snapshot = Snapshot {
            kv: self.kv.snapshot(),
            engine: self.engine.snapshot(),
        };
        postcard::to_allocvec(&snapshot).expect("snapshots serialise")
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), RestoreError> {
        let snapshot: Snapshot =
            postcard::from_bytes(snapshot).map_err(|error| RestoreError::Malformed {
                reason: error.to_string(),
            })?;
        let mut kv = KvStore::new();
        kv.restore(&snapshot.kv)?;
        let mut engine = engine::Engine::default();
        engine.restore(&snapshot.engine)?;
        self.kv = kv;
        self.engine = engine;
        Ok(())
    }

    fn keys(&self, operation: &[u8]) -> Option<Vec<Vec<u8>>> {
        // Key sets of the two namespaces must not collide: SQL operations conflict with
        // everything of their own kind (no key knowledge), never with a RESP key.
        match operation.split_first() {
            Some((&TAG_KV, rest)) => self
                .kv
                .keys(rest)
                .map(|keys| keys.into_iter().map(|key| tagged(TAG_KV, key)).collect()),
            Some((&TAG_SQL, _)) => Some(vec![vec![TAG_SQL]]),
            _ => None,
        }
    }

    fn preview(&self, operation: &[u8]) -> Option<Vec<u8>> {
        match operation.split_first() {
            Some((&TAG_KV, rest)) => self.kv.preview(rest),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_front_ends_share_one_store_and_its_snapshots() {
        let mut store = Store::new();
        let put = kv::Command::Put {
            key: b"k".to_vec(),
            value: b"v".to_vec(),
        };
        assert_eq!(
            kv::Outcome::decode(&store.apply(&kv_operation(&put))).unwrap(),
            kv::Outcome::Ok
        );
        let schema = engine::TableSchema::new(
            "t",
            vec![engine::ColumnDef::new("id", engine::DataType::BigInt).not_null()],
            &["id"],
        )
        .unwrap();
        let create = engine::Command::Execute(engine::Operation::CreateTable { schema });
        let outcome = engine::Outcome::decode(&store.apply(&sql_operation(&create))).unwrap();
        assert!(!matches!(outcome, engine::Outcome::Error(_)), "{outcome:?}");
        let mut copy = Store::new();
        copy.restore(&store.snapshot()).unwrap();
        assert_eq!(copy.kv.get(b"k"), Some(&b"v".to_vec()));
        assert!(sql::Catalog::table(&copy.engine, "t").is_some());
        let catalog = decode_catalog(&copy.query(&catalog_operation())).unwrap();
        assert_eq!(catalog.tables.keys().collect::<Vec<_>>(), vec!["t"]);
        assert!(copy.restore(b"garbage").is_err());
        assert_eq!(
            copy.kv.get(b"k"),
            Some(&b"v".to_vec()),
            "a failed restore changes nothing"
        );
    }

    #[test]
    fn an_unknown_tag_is_an_error_result_not_a_panic() {
        let mut store = Store::new();
        for operation in [vec![], vec![9], vec![9, 1, 2]] {
            assert_eq!(
                kv::Outcome::decode(&store.apply(&operation)).unwrap(),
                kv::Outcome::Error(kv::KvError::Malformed)
            );
            assert_eq!(store.keys(&operation), None);
        }
    }
}
