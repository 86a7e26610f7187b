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

/// Decodes the answer to `catalog_operation`: the catalog's digest (for `Command::Guarded`)
/// and the catalog.
pub fn decode_catalog(bytes: &[u8]) -> Option<(u64, sql::MemoryCatalog)> {
    let (digest, tables): (u64, CatalogTables) = postcard::from_bytes(bytes).ok()?;
    let mut catalog = sql::MemoryCatalog::new();
    for (schema, indexes) in tables {
        let options = sql::TableOptions::defaults(&schema);
        catalog.insert(sql::TableEntry {
            schema,
            indexes,
            options,
        });
    }
    Some((digest, catalog))
}

fn encode_catalog(engine: &engine::Engine) -> Vec<u8> {
    use sql::Catalog;
    let tables: CatalogTables = Catalog::table_names(engine)
        .into_iter()
        .filter_map(|name| Catalog::table(engine, &name))
        .map(|entry| (entry.schema, entry.indexes))
        .collect();
    postcard::to_allocvec(&(engine.catalog_digest(), tables)).expect("schemas serialise")
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

impl Store {
    /// Executes a run of engine commands as one engine batch and appends their outcomes.
    fn flush_engine_run(&mut self, run: &mut Vec<engine::Command>, results: &mut Vec<Vec<u8>>) {
        if run.is_empty() {
            return;
        }
        let all: Vec<engine::Operation> = run
            .iter()
            .flat_map(|command| operations_of(command).iter().cloned())
            .collect();
        let mut outputs = self.engine.execute_batch(&all).into_iter();
        for command in run.drain(..) {
            results.push(outcome_of(&command, &mut outputs).encode());
        }
        assert!(outputs.next().is_none(), "one result per operation");
    }
}

fn command_of(operation: &[u8]) -> Option<engine::Command> {
    match operation.split_first() {
        Some((&TAG_SQL, rest)) => engine::Command::decode(rest).ok(),
        _ => None,
    }
}

/// The engine operations of an `Execute` or `Batch` command.
fn operations_of(command: &engine::Command) -> &[engine::Operation] {
    match command {
        engine::Command::Execute(operation) => std::slice::from_ref(operation),
        engine::Command::Batch(operations) => operations,
        engine::Command::Explain(_) | engine::Command::Guarded { .. } => {
            unreachable!("explains and guards are never batched")
        }
    }
}

fn has_ddl(command: &engine::Command) -> bool {
    operations_of(command).iter().any(|operation| {
        matches!(
            operation,
            engine::Operation::CreateTable { .. }
                | engine::Operation::DropTable { .. }
                | engine::Operation::CreateIndex { .. }
        )
    })
}

fn batch_len(command: &engine::Command) -> usize {
    operations_of(command).len()
}

/// Takes a command's results from a batch's outputs, as the command alone would have
/// returned them.
fn outcome_of(
    command: &engine::Command,
    outputs: &mut impl Iterator<Item = engine::OperationResult>,
) -> engine::Outcome {
    match command {
        engine::Command::Execute(_) => {
            engine::Outcome::Executed(outputs.next().expect("one result per operation"))
        }
        engine::Command::Batch(operations) => {
            engine::Outcome::Batch(outputs.by_ref().take(operations.len()).collect())
        }
        engine::Command::Explain(_) | engine::Command::Guarded { .. } => {
            unreachable!("explains and guards are never batched")
        }
    }
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

    /// Consecutive engine commands run as one engine batch, so that the scans of statements
    /// logged in one entry share one cycle (Crescando); everything else runs alone, in order.
    fn apply_batch(&mut self, operations: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut results = Vec::with_capacity(operations.len());
        let mut run: Vec<engine::Command> = Vec::new();
        let mut run_operations = 0;
        for operation in operations {
            let mut command = command_of(operation);
            if let Some(engine::Command::Guarded {
                catalog,
                command: inner,
            }) = command
            {
                // The guard is checked at the command's place in the batch: after the DDL
                // before it has run.
                if run.iter().any(has_ddl) {
                    self.flush_engine_run(&mut run, &mut results);
                    run_operations = 0;
                }
                if catalog != self.engine.catalog_digest() {
                    self.flush_engine_run(&mut run, &mut results);
                    run_operations = 0;
                    results
                        .push(engine::Outcome::Error(engine::EngineError::StaleCatalog).encode());
                    continue;
                }
                command = Some(*inner);
            }
            let batchable = command.filter(|command| {
                matches!(
                    command,
                    engine::Command::Execute(_) | engine::Command::Batch(_)
                ) && batch_len(command) <= engine::BATCH_OPERATIONS_MAX
            });
            match batchable {
                Some(command) => {
                    if run_operations + batch_len(&command) > engine::BATCH_OPERATIONS_MAX {
                        self.flush_engine_run(&mut run, &mut results);
                        run_operations = 0;
                    }
                    run_operations += batch_len(&command);
                    run.push(command);
                }
                None => {
                    self.flush_engine_run(&mut run, &mut results);
                    run_operations = 0;
                    results.push(self.apply(operation));
                }
            }
        }
        self.flush_engine_run(&mut run, &mut results);
        results
    }

    /// Reads commute: every engine read of the batch is answered by one `read_batch` (one
    /// shared pass per table), the catalog is encoded once, the rest are answered alone.
    fn query_batch(&self, operations: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut results: Vec<Option<Vec<u8>>> = vec![None; operations.len()];
        let mut reads: Vec<(usize, engine::Command)> = Vec::new();
        let mut catalog: Option<Vec<u8>> = None;
        let mut digest: Option<u64> = None;
        for (at, operation) in operations.iter().enumerate() {
            match operation.split_first() {
                Some((&TAG_CATALOG, [])) => {
                    let bytes = catalog.get_or_insert_with(|| encode_catalog(&self.engine));
                    results[at] = Some(bytes.clone());
                }
                Some((&TAG_SQL, rest)) => {
                    let command = match engine::Command::decode(rest) {
                        Ok(engine::Command::Guarded { catalog, command })
                            if catalog
                                == *digest.get_or_insert_with(|| self.engine.catalog_digest()) =>
                        {
                            Ok(*command)
                        }
                        other => other,
                    };
                    match command {
                        Ok(command @ (engine::Command::Execute(_) | engine::Command::Batch(_)))
                            if command.is_read() =>
                        {
                            reads.push((at, command));
                        }
                        _ => results[at] = Some(self.query(operation)),
                    }
                }
                _ => results[at] = Some(self.query(operation)),
            }
        }
        let all: Vec<engine::Operation> = reads
            .iter()
            .flat_map(|(_, command)| operations_of(command).iter().cloned())
            .collect();
        let mut outputs = self.engine.read_batch(&all).into_iter();
        for (at, command) in reads {
            results[at] = Some(outcome_of(&command, &mut outputs).encode());
        }
        results
            .into_iter()
            .map(|result| result.expect("every read answered"))
            .collect()
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
        let (digest, catalog) = decode_catalog(&copy.query(&catalog_operation())).unwrap();
        assert_eq!(digest, copy.engine.catalog_digest());
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

#[cfg(test)]
mod batch_tests {
    use super::*;
    use engine::{Assignment, Command, CompareOp, OnConflict, Operation, Predicate, Value};

    fn sql(operation: Operation) -> Vec<u8> {
        sql_operation(&Command::Execute(operation))
    }

    fn select(predicate: Predicate) -> Vec<u8> {
        sql(Operation::Select {
            table: "t".into(),
            columns: Vec::new(),
            predicate: Some(predicate),
            limit: None,
        })
    }

    /// A log entry's worth of mixed operations: DDL, inserts, predicate updates and deletes,
    /// selects between them, KV commands, an explain, a multi-operation batch, garbage.
    fn entry() -> Vec<Vec<u8>> {
        let schema = engine::TableSchema::new(
            "t",
            vec![
                engine::ColumnDef::new("id", engine::DataType::BigInt).not_null(),
                engine::ColumnDef::new("v", engine::DataType::BigInt),
            ],
            &["id"],
        )
        .unwrap();
        let rows = |from: i64| {
            (from..from + 20)
                .map(|id| vec![Value::BigInt(id), Value::BigInt(id % 7)])
                .collect()
        };
        let insert = |from: i64, on_conflict: OnConflict| {
            sql(Operation::Insert {
                table: "t".into(),
                columns: Vec::new(),
                rows: rows(from),
                on_conflict,
            })
        };
        let bump = |v: i64, to: i64| {
            sql(Operation::Update {
                table: "t".into(),
                assignments: vec![Assignment {
                    column: "v".into(),
                    value: Value::BigInt(to),
                }],
                predicate: Some(Predicate::equal("v", Value::BigInt(v))),
            })
        };
        let mut scratch = engine::Engine::new();
        scratch
            .execute(&Operation::CreateTable {
                schema: schema.clone(),
            })
            .expect("creates");
        let created = scratch.catalog_digest();
        let guarded = |catalog: u64, predicate: Predicate| {
            sql_operation(&Command::Guarded {
                catalog,
                command: Box::new(Command::Batch(vec![Operation::Select {
                    table: "t".into(),
                    columns: Vec::new(),
                    predicate: Some(predicate),
                    limit: None,
                }])),
            })
        };
        vec![
            guarded(created, Predicate::equal("v", Value::BigInt(1))),
            sql(Operation::CreateTable { schema }),
            guarded(created, Predicate::equal("v", Value::BigInt(1))),
            insert(0, OnConflict::Error),
            select(Predicate::equal("v", Value::BigInt(3))),
            bump(3, 100),
            insert(10, OnConflict::DoNothing),
            insert(15, OnConflict::Error),
            kv_operation(&kv::Command::Put {
                key: b"k".to_vec(),
                value: b"v".to_vec(),
            }),
            select(Predicate::equal("v", Value::BigInt(100))),
            sql_operation(&Command::Batch(vec![
                Operation::Delete {
                    table: "t".into(),
                    predicate: Some(Predicate::compare("id", CompareOp::Less, Value::BigInt(5))),
                },
                Operation::Select {
                    table: "t".into(),
                    columns: Vec::new(),
                    predicate: None,
                    limit: Some(3),
                },
            ])),
            sql_operation(&Command::Explain(Operation::Select {
                table: "t".into(),
                columns: Vec::new(),
                predicate: None,
                limit: None,
            })),
            bump(100, 4),
            vec![TAG_SQL, 0xff, 0xff],
            catalog_operation(),
            select(Predicate::compare(
                "v",
                CompareOp::GreaterOrEqual,
                Value::BigInt(4),
            )),
            sql(Operation::DropTable {
                name: "missing".into(),
                if_exists: false,
            }),
            select(Predicate::equal("v", Value::BigInt(4))),
            guarded(created, Predicate::equal("v", Value::BigInt(2))),
            sql(Operation::CreateIndex {
                name: "t_v".into(),
                table: "t".into(),
                column: "v".into(),
            }),
            guarded(created, Predicate::equal("v", Value::BigInt(2))),
        ]
    }

    #[test]
    fn an_entry_applied_as_a_batch_equals_applying_each_operation_in_order() {
        let operations = entry();
        let borrowed: Vec<&[u8]> = operations.iter().map(Vec::as_slice).collect();
        let mut batched = Store::new();
        let together = batched.apply_batch(&borrowed);
        let mut alone = Store::new();
        let each: Vec<Vec<u8>> = borrowed
            .iter()
            .map(|operation| alone.apply(operation))
            .collect();
        assert_eq!(together.len(), each.len());
        for (at, (got, expected)) in together.iter().zip(&each).enumerate() {
            assert_eq!(
                engine::Outcome::decode(got).ok(),
                engine::Outcome::decode(expected).ok(),
                "operation {at}"
            );
            assert_eq!(got, expected, "operation {at}");
        }
        assert_eq!(batched.snapshot(), alone.snapshot());
        // And the selects actually found rows (the comparison is not between two empties).
        let rows = |bytes: &[u8]| match engine::Outcome::decode(bytes).unwrap() {
            engine::Outcome::Executed(Ok(engine::Output::Rows { rows, .. })) => rows.len(),
            other => panic!("{other:?}"),
        };
        assert_eq!(rows(&each[4]), 3);
        assert_eq!(rows(&each[9]), 3);
        // Guards: stale before the CREATE TABLE and after the CREATE INDEX, run in between.
        let stale = engine::Outcome::Error(engine::EngineError::StaleCatalog).encode();
        assert_eq!(each[0], stale);
        assert!(matches!(
            engine::Outcome::decode(&each[2]).unwrap(),
            engine::Outcome::Batch(results) if results.len() == 1 && results[0].is_ok()
        ));
        let last = each.len() - 1;
        assert!(matches!(
            engine::Outcome::decode(&each[last - 2]).unwrap(),
            engine::Outcome::Batch(results) if results.len() == 1 && results[0].is_ok()
        ));
        assert_eq!(each[last], stale);
    }

    #[test]
    fn reads_answered_together_equal_reads_answered_alone() {
        let mut store = Store::new();
        for operation in entry() {
            store.apply(&operation);
        }
        let reads: Vec<Vec<u8>> = vec![
            select(Predicate::equal("v", Value::BigInt(4))),
            catalog_operation(),
            kv_operation(&kv::Command::Get { key: b"k".to_vec() }),
            select(Predicate::compare(
                "id",
                CompareOp::Greater,
                Value::BigInt(30),
            )),
            sql_operation(&Command::Batch(vec![Operation::Select {
                table: "t".into(),
                columns: Vec::new(),
                predicate: Some(Predicate::equal("v", Value::BigInt(2))),
                limit: None,
            }])),
            select(Predicate::equal("v", Value::BigInt(4))),
            catalog_operation(),
            vec![TAG_SQL, 0xff],
            sql(Operation::Delete {
                table: "t".into(),
                predicate: None,
            }),
            sql_operation(&Command::Guarded {
                catalog: store.engine.catalog_digest(),
                command: Box::new(Command::Execute(Operation::Select {
                    table: "t".into(),
                    columns: Vec::new(),
                    predicate: Some(Predicate::equal("v", Value::BigInt(4))),
                    limit: None,
                })),
            }),
            sql_operation(&Command::Guarded {
                catalog: store.engine.catalog_digest() ^ 1,
                command: Box::new(Command::Execute(Operation::Select {
                    table: "t".into(),
                    columns: Vec::new(),
                    predicate: None,
                    limit: None,
                })),
            }),
        ];
        let borrowed: Vec<&[u8]> = reads.iter().map(Vec::as_slice).collect();
        let together = store.query_batch(&borrowed);
        let alone: Vec<Vec<u8>> = borrowed.iter().map(|read| store.query(read)).collect();
        assert_eq!(together, alone);
        assert_eq!(
            alone[9], alone[0],
            "a guard with the current digest runs its command"
        );
        assert_eq!(
            alone[10],
            engine::Outcome::Error(engine::EngineError::StaleCatalog).encode()
        );
        assert!(matches!(
            engine::Outcome::decode(&alone[0]).unwrap(),
            engine::Outcome::Executed(Ok(engine::Output::Rows { rows, .. })) if rows.len() > 1
        ));
    }
}
