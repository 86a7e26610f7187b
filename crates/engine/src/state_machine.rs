//! The engine as a `vr::StateMachine`: commands and outcomes as postcard bytes.
//!
//! Execution never panics on any input: malformed bytes become `Outcome::Error`. Snapshots
//! hold every table's schema, index definitions and rows; `restore` checks everything and
//! rebuilds the indexes, leaving the engine unchanged on error.

use crate::engine::Engine;
use crate::error::EngineError;
use crate::operation::{Operation, OperationResult};
use crate::schema::TableSchema;
use crate::table::{Row, Table};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use vr::{RestoreError, StateMachine};

/// A command on the engine. Slots are fixed: append new variants at the end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Command {
    /// Slot 0. One operation.
    Execute(Operation),
    /// Slot 1. A batch, executed as if one operation after another (shared scan cycles).
    Batch(Vec<Operation>),
    /// Slot 2. The planner's choice for an operation, as text.
    Explain(Operation),
    /// Slot 3. `command`, if the catalog (every table's schema and indexes) still has the
    /// digest it was planned against (`Engine::catalog_digest`); otherwise
    /// `Outcome::Error(StaleCatalog)` and nothing runs. Lets a gateway plan against a cached
    /// catalog and still run every statement against the tables it was planned for.
    Guarded { catalog: u64, command: Box<Command> },
}

impl Command {
    /// Whether the command only reads, so that `query` may serve it.
    pub fn is_read(&self) -> bool {
        match self {
            Command::Execute(operation) => operation.is_read(),
            Command::Batch(operations) => operations.iter().all(Operation::is_read),
            Command::Explain(_) => true,
            Command::Guarded { command, .. } => command.is_read(),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("commands serialise")
    }

    /// Decodes a command; refuses malformed bytes and trailing bytes.
    pub fn decode(bytes: &[u8]) -> Result<Command, EngineError> {
        match postcard::take_from_bytes(bytes) {
            Ok((command, [])) => Ok(command),
            _ => Err(EngineError::Malformed),
        }
    }
}

/// What a command returned. Slots are fixed: append new variants at the end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Outcome {
    /// Slot 0. The result of `Command::Execute`.
    Executed(OperationResult),
    /// Slot 1. The results of `Command::Batch`, in order.
    Batch(Vec<OperationResult>),
    /// Slot 2. The answer to `Command::Explain`.
    Explained(Result<String, EngineError>),
    /// Slot 3. The command could not be executed at all (malformed, or a write given to
    /// `query`).
    Error(EngineError),
}

impl Outcome {
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("outcomes serialise")
    }

    pub fn decode(bytes: &[u8]) -> Result<Outcome, EngineError> {
        postcard::from_bytes(bytes).map_err(|_| EngineError::Malformed)
    }
}

/// The snapshot format. `version` is checked first.
#[derive(Serialize, Deserialize)]
struct Snapshot {
    version: u32,
    tables: Vec<TableSnapshot>,
}

/// `Snapshot` written from the tables in place: serialises exactly as a `Snapshot` of the
/// same tables (test `a_snapshot_written_in_place_is_the_owned_snapshots_bytes`).
#[derive(Serialize)]
struct SnapshotOf<'a> {
    version: u32,
    tables: Vec<TableSnapshotOf<'a>>,
}

#[derive(Serialize)]
struct TableSnapshotOf<'a> {
    schema: &'a TableSchema,
    indexes: Vec<(String, Vec<String>)>,
    rows: RowsInKeyOrder<'a>,
    row_id_next: i64,
}

/// A table's rows as the sequence `TableSnapshot::rows` is, in primary key order.
struct RowsInKeyOrder<'a>(&'a crate::rows::Rows);

impl Serialize for RowsInKeyOrder<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut rows = serializer.serialize_seq(Some(self.0.len()))?;
        for row in self.0.values() {
            rows.serialize_element(row)?;
        }
        rows.end()
    }
}

#[derive(Serialize, Deserialize)]
struct TableSnapshot {
    schema: TableSchema,
    /// (index name, its column names, the leading one first), by index name.
    indexes: Vec<(String, Vec<String>)>,
    /// In primary key order.
    rows: Vec<Row>,
    /// `Table::row_id_next`.
    row_id_next: i64,
}

/// 2: schemas carry their table options. 3: tables carry their next hidden row id. 4: an
/// index carries every column of its definition. 5: columns carry their DEFAULT. 6: schemas
/// carry their CHECK constraints.
const SNAPSHOT_VERSION: u32 = 6;

impl Engine {
    /// Executes a command (reads included).
    pub fn execute_command(&mut self, command: &Command) -> Outcome {
        match command {
            Command::Execute(operation) => Outcome::Executed(self.execute(operation)),
            Command::Batch(operations) => Outcome::Batch(self.execute_batch(operations)),
            Command::Explain(operation) => Outcome::Explained(self.explain(operation)),
            Command::Guarded { catalog, command } => {
                if *catalog != self.catalog_digest() {
                    return Outcome::Error(EngineError::StaleCatalog);
                }
                self.execute_command(command)
            }
        }
    }

    /// Executes a read-only command without changing anything.
    pub fn read_command(&self, command: &Command) -> Outcome {
        if !command.is_read() {
            return Outcome::Error(EngineError::ReadOnly);
        }
        match command {
            Command::Execute(operation) => Outcome::Executed(self.read(operation)),
            Command::Batch(operations) => Outcome::Batch(self.read_batch(operations)),
            Command::Explain(operation) => Outcome::Explained(self.explain(operation)),
            Command::Guarded { catalog, command } => {
                if *catalog != self.catalog_digest() {
                    return Outcome::Error(EngineError::StaleCatalog);
                }
                self.read_command(command)
            }
        }
    }

    /// The snapshot bytes of every table: written from the tables as they are (no row is
    /// copied), into a buffer of the exact size (one pass to size it, so a large snapshot's
    /// bytes are allocated and touched once, not regrown).
    pub fn snapshot_bytes(&self) -> Vec<u8> {
        let tables = self
            .tables()
            .map(|table| TableSnapshotOf {
                schema: &table.schema,
                indexes: table
                    .indexes
                    .values()
                    .map(|index| {
                        let columns = index
                            .columns
                            .iter()
                            .map(|column| table.schema.columns[*column].name.clone())
                            .collect();
                        (index.name.clone(), columns)
                    })
                    .collect(),
                rows: RowsInKeyOrder(&table.rows),
                row_id_next: table.row_id_next,
            })
            .collect();
        let snapshot = SnapshotOf {
            version: SNAPSHOT_VERSION,
            tables,
        };
        wire::bytes::to_vec_sized(&snapshot)
    }

    /// Rebuilds an engine from snapshot bytes, checking every schema, row, key and name.
    pub fn from_snapshot(bytes: &[u8]) -> Result<Engine, String> {
        let (snapshot, rest): (Snapshot, &[u8]) =
            postcard::take_from_bytes(bytes).map_err(|error| error.to_string())?;
        if !rest.is_empty() {
            return Err("trailing bytes after the snapshot".into());
        }
        if snapshot.version != SNAPSHOT_VERSION {
            return Err(format!("unknown snapshot version {}", snapshot.version));
        }
        let mut engine = Engine::new();
        for table in snapshot.tables {
            let name = table.schema.name.clone();
            let created = engine.execute(&Operation::CreateTable {
                schema: table.schema,
            });
            created.map_err(|error| format!("table {name}: {error}"))?;
            let mut rebuilt: BTreeMap<String, Table> = BTreeMap::new();
            let mut loaded = engine.table(&name).expect("just created").clone();
            loaded.row_id_next = table.row_id_next;
            for row in table.rows {
                loaded
                    .schema
                    .check_row(&row)
                    .map_err(|error| error.to_string())?;
                let key = loaded.schema.key_of(&row);
                if loaded.rows.insert(key, row).is_some() {
                    return Err(format!("table {name}: duplicate primary key"));
                }
            }
            rebuilt.insert(name.clone(), loaded);
            engine.insert_tables(rebuilt);
            for (index, columns) in table.indexes {
                let created = engine.execute(&Operation::CreateIndexOn {
                    name: index.clone(),
                    table: name.clone(),
                    columns,
                });
                created.map_err(|error| format!("index {index}: {error}"))?;
            }
        }
        engine.check_invariants()?;
        Ok(engine)
    }
}

impl StateMachine for Engine {
    fn apply(&mut self, operation: &[u8]) -> Vec<u8> {
        match Command::decode(operation) {
            Ok(command) => self.execute_command(&command).encode(),
            Err(error) => Outcome::Error(error).encode(),
        }
    }

    fn query(&self, operation: &[u8]) -> Vec<u8> {
        match Command::decode(operation) {
            Ok(command) => self.read_command(&command).encode(),
            Err(error) => Outcome::Error(error).encode(),
        }
    }

    fn snapshot(&self) -> Vec<u8> {
        self.snapshot_bytes()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), RestoreError> {
        let engine =
            Engine::from_snapshot(snapshot).map_err(|reason| RestoreError::Malformed { reason })?;
        *self = engine;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::ColumnDef;
    use crate::value::{DataType, Value};

    fn table(rows: Vec<Row>, indexes: Vec<(String, Vec<String>)>) -> TableSnapshot {
        TableSnapshot {
            schema: TableSchema::new(
                "t",
                vec![
                    ColumnDef::new("id", DataType::Int),
                    ColumnDef::new("v", DataType::Int).not_null(),
                ],
                &["id"],
            )
            .unwrap(),
            indexes,
            rows,
            row_id_next: 1,
        }
    }

    fn restore(version: u32, tables: Vec<TableSnapshot>) -> Result<Engine, String> {
        Engine::from_snapshot(&postcard::to_allocvec(&Snapshot { version, tables }).unwrap())
    }

    fn row(id: i32, v: Value) -> Row {
        vec![Value::Int(id), v]
    }

    #[test]
    fn restore_checks_versions_keys_rows_and_index_definitions() {
        let good = || vec![row(1, Value::Int(1)), row(2, Value::Int(1))];
        let index = || vec![("t_v".to_string(), vec!["v".to_string(), "id".to_string()])];
        let engine = restore(SNAPSHOT_VERSION, vec![table(good(), index())]).unwrap();
        let restored = &engine.table("t").unwrap().indexes["t_v"];
        assert_eq!(restored.entries.len(), 2);
        assert_eq!(restored.columns, vec![1, 0]);
        // Entries are rebuilt from the rows on all the index's columns.
        restored.entries.iter().for_each(|(values, key)| {
            assert_eq!((values.len(), &values[1]), (2, &key[0]));
        });
        // The snapshot keeps every column of a multi-column index.
        let again = Engine::from_snapshot(&engine.snapshot_bytes()).unwrap();
        assert_eq!(again.table("t").unwrap().indexes["t_v"].columns, vec![1, 0]);
        assert!(restore(SNAPSHOT_VERSION + 1, vec![table(good(), index())]).is_err());
        let duplicate = vec![row(1, Value::Int(1)), row(1, Value::Int(2))];
        assert!(restore(SNAPSHOT_VERSION, vec![table(duplicate, index())]).is_err());
        let null = vec![row(1, Value::Null)];
        assert!(restore(SNAPSHOT_VERSION, vec![table(null, index())]).is_err());
        let mistyped = vec![row(1, Value::BigInt(1))];
        assert!(restore(SNAPSHOT_VERSION, vec![table(mistyped, index())]).is_err());
        let short = vec![vec![Value::Int(1)]];
        assert!(restore(SNAPSHOT_VERSION, vec![table(short, index())]).is_err());
        let bad_index = vec![("t_w".to_string(), vec!["v".to_string(), "w".to_string()])];
        assert!(restore(SNAPSHOT_VERSION, vec![table(good(), bad_index)]).is_err());
        let twice = vec![table(good(), index()), table(good(), Vec::new())];
        assert!(restore(SNAPSHOT_VERSION, twice).is_err());
    }

    /// `snapshot_bytes` writes the tables in place (no row copied, `SnapshotOf`): its bytes
    /// must be exactly those of the owned `Snapshot` that `from_snapshot` reads.
    #[test]
    fn a_snapshot_written_in_place_is_the_owned_snapshots_bytes() {
        let rows = (1..=300)
            .map(|id| row(id, Value::Int(id * 7 % 13)))
            .collect::<Vec<_>>();
        let index = vec![("t_v".to_string(), vec!["v".to_string(), "id".to_string()])];
        let engine = restore(SNAPSHOT_VERSION, vec![table(rows.clone(), index.clone())]).unwrap();
        let mut owned = table(rows, index);
        owned.row_id_next = engine.table("t").unwrap().row_id_next;
        let expected = postcard::to_allocvec(&Snapshot {
            version: SNAPSHOT_VERSION,
            tables: vec![owned],
        })
        .unwrap();
        assert_eq!(engine.snapshot_bytes(), expected);
        let empty = postcard::to_allocvec(&Snapshot {
            version: SNAPSHOT_VERSION,
            tables: Vec::new(),
        })
        .unwrap();
        assert_eq!(Engine::new().snapshot_bytes(), empty);
    }

    #[test]
    fn commands_with_trailing_bytes_are_malformed() {
        let mut bytes = Command::Batch(Vec::new()).encode();
        assert_eq!(Command::decode(&bytes), Ok(Command::Batch(Vec::new())));
        bytes.push(0);
        assert_eq!(Command::decode(&bytes), Err(EngineError::Malformed));
    }
}
