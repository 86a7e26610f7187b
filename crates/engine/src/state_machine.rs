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
}

impl Command {
    /// Whether the command only reads, so that `query` may serve it.
    pub fn is_read(&self) -> bool {
        match self {
            Command::Execute(operation) => operation.is_read(),
            Command::Batch(operations) => operations.iter().all(Operation::is_read),
            Command::Explain(_) => true,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("commands serialise")
    }

    pub fn decode(bytes: &[u8]) -> Result<Command, EngineError> {
        postcard::from_bytes(bytes).map_err(|_| EngineError::Malformed)
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

#[derive(Serialize, Deserialize)]
struct TableSnapshot {
    schema: TableSchema,
    /// (index name, column name), by index name.
    indexes: Vec<(String, String)>,
    /// In primary key order.
    rows: Vec<Row>,
}

const SNAPSHOT_VERSION: u32 = 1;

impl Engine {
    /// Executes a command (reads included).
    pub fn execute_command(&mut self, command: &Command) -> Outcome {
        match command {
            Command::Execute(operation) => Outcome::Executed(self.execute(operation)),
            Command::Batch(operations) => Outcome::Batch(self.execute_batch(operations)),
            Command::Explain(operation) => Outcome::Explained(self.explain(operation)),
        }
    }

    /// Executes a read-only command without changing anything.
    pub fn read_command(&self, command: &Command) -> Outcome {
        if !command.is_read() {
            return Outcome::Error(EngineError::ReadOnly);
        }
        match command {
            Command::Execute(operation) => Outcome::Executed(self.read(operation)),
            Command::Batch(operations) => Outcome::Batch(
                operations
                    .iter()
                    .map(|operation| self.read(operation))
                    .collect(),
            ),
            Command::Explain(operation) => Outcome::Explained(self.explain(operation)),
        }
    }

    /// The snapshot bytes of every table.
    pub fn snapshot_bytes(&self) -> Vec<u8> {
        let tables = self
            .tables()
            .map(|table| TableSnapshot {
                schema: table.schema.clone(),
                indexes: table
                    .indexes
                    .values()
                    .map(|index| {
                        let column = table.schema.columns[index.column].name.clone();
                        (index.name.clone(), column)
                    })
                    .collect(),
                rows: table.rows.values().cloned().collect(),
            })
            .collect();
        let snapshot = Snapshot {
            version: SNAPSHOT_VERSION,
            tables,
        };
        postcard::to_allocvec(&snapshot).expect("snapshots serialise")
    }

    /// Rebuilds an engine from snapshot bytes, checking every schema, row, key and name.
    pub fn from_snapshot(bytes: &[u8]) -> Result<Engine, String> {
        let snapshot: Snapshot = postcard::from_bytes(bytes).map_err(|error| error.to_string())?;
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
            for (index, column) in table.indexes {
                let created = engine.execute(&Operation::CreateIndex {
                    name: index.clone(),
                    table: name.clone(),
                    column,
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
