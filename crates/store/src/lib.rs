//! The state machine a node replicates: the RESP front end's key-value namespace and the SQL
//! front end's table engine, in one group, one log and one order.
//!
//! An operation is a tag byte and the front end's own encoding: `0` and a `kv::Command`, `1` and
//! an `engine::Command`. Results are the front end's own outcome bytes. Both halves are
//! deterministic, so the pair is; a snapshot is both halves' snapshots.
//!
//! The crate is pure (`crates/cluster/tests/purity.rs`): the runtime replicates it over TCP and the simulator
//! (`crates/sim`) replicates the same type, so a seed exercises exactly what a node runs.
//!
//! The RESP namespace's strings are also a SQL table: `kv (key BYTEA PRIMARY KEY, value BYTEA
//! NOT NULL)`, built in (it cannot be created, dropped or indexed); keys holding hashes, lists,
//! sets or sorted sets are not rows of it and a SQL write leaves them alone (a row written
//! over such a key replaces it with a string, as SET does). A statement on it runs against a table
//! materialised from the key-value map at the statement's place in the log, and a write replaces
//! the map with the table's rows afterwards: O(keys) per statement, like a scan, and exact,
//! since the statement runs alone at its position. SQL on `kv` conflicts with every key for
//! Skyros's read check (`keys` answers `None`).

pub mod prepared;
pub mod rows;
pub mod transactions;

use kv::KvStore;
use serde::{Deserialize, Serialize};
use vr::{RestoreError, SnapshotSource, StateMachine};

const TAG_KV: u8 = 0;
const TAG_SQL: u8 = 1;
/// A read of the SQL catalog (every table's schema and indexes), answered by `query`.
const TAG_CATALOG: u8 = 2;
/// A partitioned cluster's two-phase statements (`prepared`): prepare, and decide.
const TAG_PREPARE: u8 = 3;
const TAG_DECIDE: u8 = 4;
/// An interactive transaction's statement, and its end (`transactions`).
const TAG_TRANSACTION: u8 = 5;
const TAG_END: u8 = 6;
/// A transaction's table locks, taken at every partition at once (`transactions`).
const TAG_LOCK: u8 = 7;
/// ROLLBACK TO SAVEPOINT of a transaction, at every partition at once (`transactions`).
const TAG_ROLLBACK_TO: u8 = 8;
/// A transaction becomes global (Sprint §4.1), at every partition at once (`transactions`).
const TAG_GLOBALIZE: u8 = 9;
/// A transaction's table locks with its owner (`owned_lock_operation`), and the abort of
/// every transaction a suspected storage process owns (`abort_owned_operation`).
const TAG_LOCK_OWNED: u8 = 10;
const TAG_ABORT_OWNED: u8 = 11;
/// A transaction's table locks with its owner and the owner gateway's incarnation
/// (`incarnation_lock_operation`). `TAG_LOCK_OWNED` still decodes, as incarnation 0.
const TAG_LOCK_INCARNATION: u8 = 12;
/// A suspicion with a bound on the incarnations it kills (`abort_owned_through_operation`).
/// `TAG_ABORT_OWNED` still decodes, without a bound.
const TAG_ABORT_OWNED_THROUGH: u8 = 13;

/// Transaction `transaction` becomes global (it reached a second partition): sent once to
/// every partition in one E-Cast message, before its first message to the second partition;
/// each partition numbers it on delivery (`Transactions::globalize`). Answered with an empty
/// `Outcome::Batch`, or a refusal where the transaction had already ended or was aborted by
/// another gateway (it must be aborted everywhere). A global transaction already waiting for it
/// does not refuse it: that waiter dies at its next request (`Transactions::globalize`).
pub fn globalize_operation(transaction: u64) -> Vec<u8> {
    tagged(
        TAG_GLOBALIZE,
        postcard::to_allocvec(&transaction).expect("serialises"),
    )
}

/// Takes table locks for a transaction (`transactions::LockRequest`), answered with an empty
/// `Outcome::Batch`, or the refusal (`TransactionLocked`, `Busy`: wait; `SerializationFailure`:
/// the transaction dies). Sent to every partition in one message, so every partition holds
/// the same locks and refuses alike.
pub fn lock_operation(request: &transactions::LockRequest) -> Vec<u8> {
    tagged(
        TAG_LOCK,
        postcard::to_allocvec(request).expect("serialises"),
    )
}

/// `lock_operation` from the gateway of storage process `owner` (not 0): each partition
/// records the owner with the transaction when this is its first owned message there
/// (`Transactions::own`), so that a suspicion of `owner` aborts it (`abort_owned_operation`,
/// `docs/internals/sprint.md`, "A gateway whose storage process dies"). The message of
/// gateways from before incarnations, still decoded: its owner has incarnation 0, which is
/// never judged (`incarnation_lock_operation` is what gateways send now).
pub fn owned_lock_operation(request: &transactions::LockRequest, owner: u64) -> Vec<u8> {
    assert_ne!(owner, 0, "0 names no storage process");
    tagged(
        TAG_LOCK_OWNED,
        postcard::to_allocvec(&(request, owner)).expect("serialises"),
    )
}

/// A row an increment statement changed: its image before the statement, the columns the
/// statement only incremented, and every column it assigned.
type Incremented = (engine::undo::BeforeImage, Vec<usize>, Vec<usize>);

/// Whether a column holding `current` (every pending increment applied) stays within its type
/// whichever of the `pending` sums end up aborted: the lowest outcome (only the negative sums
/// commit) and the highest (only the positive ones) both fit the column (`engine::value::coerce`).
fn escrow_within(
    current: &engine::Value,
    pending: &[engine::Value],
    data_type: engine::DataType,
    column: &str,
) -> bool {
    let Some(mut committed) = transactions::amount_of(current) else {
        return true; // NULL: increments leave it NULL.
    };
    let mut amounts = Vec::with_capacity(pending.len());
    for sum in pending {
        let Some(amount) = transactions::amount_of(sum) else {
            return false;
        };
        let Some(less) = committed.checked_sub(amount) else {
            return false;
        };
        committed = less;
        amounts.push(amount);
    }
    let (mut lowest, mut highest) = (committed, committed);
    for amount in amounts {
        let bound = if amount.is_sign_negative() {
            &mut lowest
        } else {
            &mut highest
        };
        let Some(moved) = bound.checked_add(amount) else {
            return false;
        };
        *bound = moved;
    }
    [lowest, committed, highest].into_iter().all(|amount| {
        engine::value::coerce(&engine::Value::Numeric(amount), data_type, column)
            .is_ok_and(|fitted| transactions::amount_of(&fitted) == Some(amount))
    })
}

/// `lock_operation` from the gateway of `owner` (its process not 0, with the gateway's
/// incarnation): each partition records the owner with the transaction when this is its first
/// owned message there (`Transactions::own`), so that a suspicion of the process aborts it
/// (`abort_owned_operation`). At the message's place in the order, every partition also judges
/// the incarnation (`Transactions::take_incarnation`): a dead one is refused
/// (`EngineError::IncarnationDead`, nothing else done), and one newer than the process's
/// current incarnation first aborts every transaction of that one, which is dead from then on
/// (`docs/internals/sprint.md`, "A gateway restarted before it is suspected").
pub fn incarnation_lock_operation(
    request: &transactions::LockRequest,
    owner: transactions::Owner,
) -> Vec<u8> {
    assert_ne!(owner.process, 0, "0 names no storage process");
    assert_ne!(owner.incarnation, 0, "0 is the old message's incarnation");
    tagged(
        TAG_LOCK_INCARNATION,
        postcard::to_allocvec(&(request, owner)).expect("serialises"),
    )
}

/// Storage process `owner` is suspected (its gateway, Sprint's edge server, is taken for
/// dead): every transaction it owns here (`Transactions::owned_by`) is aborted as another
/// gateway's abort would (before-images written back, locks released, a tombstone so that its
/// later messages are refused with 40001), and its current incarnation is dead from then on (a
/// table lock of it still in flight is refused). Sent to every partition at one point of the
/// global order, so every partition aborts the same transactions there. Answered with
/// `Outcome::Batch` holding one `Updated { count }`: the transactions aborted here.
pub fn abort_owned_operation(owner: u64) -> Vec<u8> {
    tagged(
        TAG_ABORT_OWNED,
        postcard::to_allocvec(&owner).expect("serialises"),
    )
}

/// `abort_owned_operation`, and every incarnation of `owner` up to `through` is dead from then
/// on (`transactions::Incarnations`): the suspicion's bound on the incarnations that started
/// before the process was taken for dead (the runtime: the time its link went down, in µs, as
/// its gateway's incarnations are its start times; 0: no bound). A crashed incarnation's table
/// lock ordered after the suspicion is then refused, even if no partition had adopted it.
pub fn abort_owned_through_operation(owner: u64, through: u64) -> Vec<u8> {
    tagged(
        TAG_ABORT_OWNED_THROUGH,
        postcard::to_allocvec(&(owner, through)).expect("serialises"),
    )
}

/// A statement of an interactive transaction (`transactions`), answered with its engine
/// outcome at this partition's share.
pub fn transaction_operation(statement: &transactions::TransactionStatement) -> Vec<u8> {
    tagged(
        TAG_TRANSACTION,
        postcard::to_allocvec(statement).expect("serialises"),
    )
}

/// The end of transaction `transaction` (commit or abort), answered with `Outcome::Batch`
/// holding one `Updated { count }`: the rows whose before-images it dropped (commit) or wrote
/// back (abort) here; an empty batch where it was not open; `SerializationFailure` for a
/// commit of a transaction another gateway aborted.
/// `by_owner`: sent by the transaction's own gateway (COMMIT, ROLLBACK, a failed block);
/// otherwise another gateway aborts it, and its later statements are refused.
pub fn end_operation(transaction: u64, commit: bool, by_owner: bool) -> Vec<u8> {
    assert!(
        by_owner || !commit,
        "only its own gateway commits a transaction"
    );
    tagged(
        TAG_END,
        postcard::to_allocvec(&(transaction, commit, by_owner)).expect("serialises"),
    )
}

/// ROLLBACK TO savepoint `savepoint` (its id, from 1) of transaction `transaction`: each
/// partition writes back what the transaction's statements under that savepoint and later
/// ones changed there (`Transactions::rollback_to`); the transaction stays open with every
/// lock. Answered with `Outcome::Batch` holding one `Updated { count }` (the rows written
/// back), an empty batch where the transaction is not open, `SerializationFailure` if another
/// gateway aborted it.
pub fn rollback_to_operation(transaction: u64, savepoint: u32) -> Vec<u8> {
    assert!(savepoint > 0, "savepoint ids start at 1");
    tagged(
        TAG_ROLLBACK_TO,
        postcard::to_allocvec(&(transaction, savepoint)).expect("serialises"),
    )
}

/// The first phase of a two-phase statement (`prepared`) of the SQL operation `operation`
/// (`sql_operation`): answered with the partition's vote, the engine outcome a dry run of its
/// share gives (or `Busy`).
pub fn prepare_operation(statement: u64, operation: &[u8]) -> Vec<u8> {
    let command = match operation.split_first() {
        Some((&TAG_SQL, command)) => command,
        _ => &[],
    };
    let body = postcard::to_allocvec(&(statement, command)).expect("serialises");
    tagged(TAG_PREPARE, body)
}

/// The second phase: commit (the engine outcome of the share) or abort (an empty batch). A
/// statement decided before (or never prepared here) answers `Busy` with no table.
pub fn decide_operation(statement: u64, commit: bool) -> Vec<u8> {
    let body = postcard::to_allocvec(&(statement, commit)).expect("serialises");
    tagged(TAG_DECIDE, body)
}

/// The catalog read, as an operation of the store.
pub fn catalog_operation() -> Vec<u8> {
    vec![TAG_CATALOG]
}

/// Every table's schema and secondary indexes ((name, columns) pairs, the leading column
/// first), as `catalog_operation` returns them.
pub type CatalogTables = Vec<(engine::TableSchema, Vec<(String, Vec<String>)>)>;

/// Decodes the answer to `catalog_operation`: the catalog's digest (for `Command::Guarded`)
/// and the catalog.
pub fn decode_catalog(bytes: &[u8]) -> Option<(u64, sql::MemoryCatalog)> {
    let (digest, tables): (u64, CatalogTables) = postcard::from_bytes(bytes).ok()?;
    let mut catalog = sql::MemoryCatalog::new();
    for (schema, indexes) in tables {
        // The bytes come from a replica: a schema the engine would not have created (no
        // primary key, a key position past the columns) is refused, not planned against.
        schema.validate().ok()?;
        let options = sql::TableOptions::of(&schema);
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
    let mut tables: CatalogTables = Catalog::table_names(engine)
        .into_iter()
        .filter_map(|name| Catalog::table(engine, &name))
        .map(|entry| (entry.schema, entry.indexes))
        .collect();
    tables.push((kv_table_schema(), Vec::new()));
    tables.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    postcard::to_allocvec(&(engine.catalog_digest(), tables)).expect("schemas serialise")
}

/// The RESP key-value namespace's name as a SQL table.
pub const KV_TABLE: &str = "kv";

/// The built-in table `kv`: every RESP key and its value.
pub fn kv_table_schema() -> engine::TableSchema {
    engine::TableSchema::new(
        KV_TABLE,
        vec![
            engine::ColumnDef::new("key", engine::DataType::Bytea).not_null(),
            engine::ColumnDef::new("value", engine::DataType::Bytea).not_null(),
        ],
        &["key"],
    )
    .expect("the kv table's schema is valid")
}

/// Whether an operation of the store only reads (a SQL read, the catalog read, or a
/// key-value read); false for bytes that do not decode.
pub fn is_read_operation(operation: &[u8]) -> bool {
    match operation.split_first() {
        Some((&TAG_KV, rest)) => kv::Command::decode(rest).is_ok_and(|command| command.is_read()),
        Some((&TAG_SQL, rest)) => {
            engine::Command::decode(rest).is_ok_and(|command| command.is_read())
        }
        Some((&TAG_CATALOG, [])) => true,
        _ => false,
    }
}

/// Whether an engine command names the built-in table `kv` (the RESP namespace, which a
/// partitioned cluster spreads over every partition).
pub fn touches_kv_table(command: &engine::Command) -> bool {
    touches_kv(command)
}

/// Whether an engine command names the built-in table `kv`.
fn touches_kv(command: &engine::Command) -> bool {
    match command {
        engine::Command::Execute(operation) | engine::Command::Explain(operation) => {
            operation.table_name() == KV_TABLE
        }
        engine::Command::Batch(operations) => operations
            .iter()
            .any(|operation| operation.table_name() == KV_TABLE),
        engine::Command::Guarded { command, .. } => touches_kv(command),
    }
}

/// A RESP command as an operation of the store.
pub fn kv_operation(command: &kv::Command) -> Vec<u8> {
    tagged(TAG_KV, command.encode())
}

/// An engine command as an operation of the store.
pub fn sql_operation(command: &engine::Command) -> Vec<u8> {
    tagged(TAG_SQL, command.encode())
}

/// `command` with its one operation replaced by `operation`, in the same shape (guard, batch).
fn with_operation(command: engine::Command, operation: engine::Operation) -> engine::Command {
    match command {
        engine::Command::Guarded { catalog, command } => engine::Command::Guarded {
            catalog,
            command: Box::new(with_operation(*command, operation)),
        },
        engine::Command::Batch(_) => engine::Command::Batch(vec![operation]),
        engine::Command::Execute(_) => engine::Command::Execute(operation),
        engine::Command::Explain(_) => engine::Command::Explain(operation),
    }
}

fn tagged(tag: u8, bytes: Vec<u8>) -> Vec<u8> {
    let mut operation = Vec::with_capacity(bytes.len() + 1);
    operation.push(tag);
    operation.extend_from_slice(&bytes);
    operation
}

/// Cloning shares the key-value map's nodes (copy-on-write, `kv::KvStore`); the tables are
/// copied whole.
#[derive(Clone, Default)]
pub struct Store {
    pub kv: KvStore,
    pub engine: engine::Engine,
    /// Two-phase statements prepared and not decided (a partitioned cluster's; empty
    /// elsewhere).
    pub prepared: prepared::Prepared,
    /// Interactive transactions open here (a partitioned cluster's; empty elsewhere).
    pub transactions: transactions::Transactions,
    /// Counters of the shared engine batches this replica ran: not replicated state (not in
    /// snapshots, kept by `restore`), for metrics.
    pub cycles: Cycles,
    /// Parked statements answered since the host last asked (`take_answered`): run when
    /// their turn came, or let go with their refusal; (ticket, reply bytes, outcome). The
    /// host takes them in the step that made them: never in a snapshot.
    answered: Vec<(u64, Vec<u8>, Vec<u8>)>,
    /// The ticket of the statement the last operation parked (`take_parked`).
    parked_now: Option<u64>,
    /// The simulator's canary `sql-whole-row-undo` (never set elsewhere, not in snapshots):
    /// an abort writes back whole-row images, as before stop 42, over other transactions'
    /// committed columns (`Transaction::written`).
    pub canary_whole_row_undo: bool,
    /// Canary (simulator only): blind increments are undone by their rows' images, like any
    /// other write, though they hold increment locks: an abort erases the increments other
    /// holders committed meanwhile (the simulator's `sql-increment-image`).
    pub canary_increment_image: bool,
    /// Canary (simulator only): a statement outside transactions pinned to its rows is never
    /// kept out by a transaction (`Transactions::pinned_blocker` judges nothing), so it reads
    /// and writes rows a transaction holds (the simulator's `sql-pinned-ignores-rows`).
    pub canary_pinned_unjudged: bool,
    /// The share each prepared statement's vote ran (`prepare`), decoded and cut to this
    /// partition's holdings, with the catalog digest then: its commit runs it as is instead
    /// of decoding the whole statement and cutting it again (a COPY chunk's command holds every
    /// partition's rows). Not replicated state, not in snapshots: a replica without it (one
    /// restored, or after a cut, `forget_prepared_shares`) decodes, with the same result.
    /// With it, a plain insert's binding from the vote (`engine::BoundWrite`): the commit
    /// writes the rows without binding them again.
    prepared_shares: std::collections::BTreeMap<u64, PreparedShare>,
}

/// Counters of the engine batches `Store::apply_batch` and `Store::execute_shares` ran (one
/// `Engine::execute_batch` each: one scan cycle per table its scans touch) and of the
/// statements in them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cycles {
    /// Engine batches run.
    pub batches: u64,
    /// Statements (store operations) in them.
    pub statements: u64,
    /// The most statements one batch held.
    pub largest: u64,
}

impl Cycles {
    fn count(&mut self, statements: usize) {
        let statements = statements as u64;
        self.batches += 1;
        self.statements += statements;
        self.largest = self.largest.max(statements);
    }
}

#[derive(Serialize, Deserialize)]
struct Snapshot {
    #[serde(with = "wire::bytes")]
    kv: Vec<u8>,
    #[serde(with = "wire::bytes")]
    engine: Vec<u8>,
    prepared: prepared::Prepared,
    transactions: transactions::Transactions,
}

impl Store {
    pub fn new() -> Store {
        Store::default()
    }

    /// Executes a partitioned cluster's share of a store operation: a SQL command as
    /// `rows::share_of` cuts it (each insert keeps the rows whose placement key `held`
    /// accepts, the rest runs over this store's rows), reads without changing anything;
    /// anything else (the catalog read, RESP commands, SQL on the table `kv`) as `apply` or
    /// `query` would.
    ///
    /// A write to a table a two-phase statement holds is refused (`Busy`); the two phases
    /// themselves (`prepare_operation`, `decide_operation`) vote with a dry run of the share
    /// and run it, as `prepared` describes.
    pub fn execute_share(&mut self, operation: &[u8], held: impl Fn(&[u8]) -> bool) -> Vec<u8> {
        match operation.split_first() {
            Some((&TAG_SQL, rest)) => {
                if let Ok(command) = engine::Command::decode(rest) {
                    if !touches_kv(&command) {
                        return self.run_share(command, &held, Share::Run).encode();
                    }
                }
            }
            Some((&TAG_PREPARE, rest)) => return self.prepare(rest, &held).encode(),
            Some((&TAG_DECIDE, rest)) => return self.decide(rest, &held).encode(),
            Some((&TAG_TRANSACTION, rest)) => {
                return self.transaction_statement(rest, &held).encode()
            }
            Some((&TAG_END, rest)) => {
                self.let_go(postcard::from_bytes::<(u64, bool, bool)>(rest).map(|end| end.0));
                let outcome = self.end_transaction(rest);
                self.grant_parked(&held, false);
                return outcome.encode();
            }
            Some((&TAG_LOCK, rest)) => {
                let request = postcard::from_bytes::<transactions::LockRequest>(rest);
                self.let_go(request.as_ref().map(|request| request.transaction));
                let outcome = self.lock(request.ok(), None);
                self.grant_parked(&held, false);
                return outcome.encode();
            }
            Some((&TAG_LOCK_OWNED, rest)) => {
                // An older gateway's owned lock: its incarnation is unknown (0).
                let request = postcard::from_bytes::<(transactions::LockRequest, u64)>(rest).map(
                    |(request, process)| {
                        let owner = transactions::Owner {
                            process,
                            incarnation: 0,
                        };
                        (request, owner)
                    },
                );
                return self.owned_lock(request, &held).encode();
            }
            Some((&TAG_LOCK_INCARNATION, rest)) => {
                let request =
                    postcard::from_bytes::<(transactions::LockRequest, transactions::Owner)>(rest)
                        .map_err(|_| ())
                        .and_then(|(request, owner)| {
                            // Incarnation 0 is the old message's: never sent with this tag.
                            if owner.incarnation == 0 {
                                Err(())
                            } else {
                                Ok((request, owner))
                            }
                        });
                return self.owned_lock(request, &held).encode();
            }
            Some((&TAG_ABORT_OWNED, rest)) => {
                let outcome = match postcard::from_bytes::<u64>(rest) {
                    Ok(process) => self.abort_owned(process, 0),
                    Err(_) => engine::Outcome::Error(engine::EngineError::Malformed),
                };
                self.grant_parked(&held, false);
                return outcome.encode();
            }
            Some((&TAG_ABORT_OWNED_THROUGH, rest)) => {
                let outcome = match postcard::from_bytes::<(u64, u64)>(rest) {
                    Ok((process, through)) => self.abort_owned(process, through),
                    Err(_) => engine::Outcome::Error(engine::EngineError::Malformed),
                };
                self.grant_parked(&held, false);
                return outcome.encode();
            }
            Some((&TAG_ROLLBACK_TO, rest)) => {
                self.let_go(postcard::from_bytes::<(u64, u32)>(rest).map(|rollback| rollback.0));
                let outcome = self.rollback_to(rest);
                self.grant_parked(&held, false);
                return outcome.encode();
            }
            Some((&TAG_GLOBALIZE, rest)) => {
                self.let_go(postcard::from_bytes::<u64>(rest));
                let outcome = self.globalize(rest);
                self.grant_parked(&held, true);
                return outcome.encode();
            }
            _ => {}
        }
        if is_read_operation(operation) {
            self.query(operation)
        } else {
            self.apply(operation)
        }
    }

    /// §6.7 basic read of a partitioned cluster's share of a SQL read (`execute_share`'s
    /// answer to it, nothing changed), or `None` when this store must not answer it from its
    /// state as it is: the operation is not a SQL read (or names the table `kv`); its
    /// catalog guard does not match the catalog here (the gateway planned against another
    /// one: the read goes through the log, which answers `StaleCatalog` at its place, and
    /// the gateway re-plans — never an answer over other tables); or an open transaction
    /// holds a table it reads in a mode that writes (`Transactions::blocker`: such a
    /// transaction's rows hold values written in place and not committed, which a read
    /// outside it must not see; through the log the read waits for it as any statement
    /// does). A two-phase statement's prepare changes nothing (a dry run), so it does not
    /// stop a read. Must not panic on any bytes.
    pub fn read_share(&self, operation: &[u8], held: impl Fn(&[u8]) -> bool) -> Option<Vec<u8>> {
        let (&TAG_SQL, rest) = operation.split_first()? else {
            return None;
        };
        let command = engine::Command::decode(rest).ok()?;
        if touches_kv(&command) || !command.is_read() {
            return None;
        }
        let mut unguarded = &command;
        while let engine::Command::Guarded { catalog, command } = unguarded {
            if *catalog != self.engine.catalog_digest() {
                return None;
            }
            unguarded = command;
        }
        if self.transaction_blocker(&command).is_some() {
            return None;
        }
        let engine = &self.engine;
        let schema_of = |name: &str| engine.table(name).map(|table| table.schema.clone());
        let command = rows::share_of(command, &schema_of, &held);
        Some(self.engine.read_command(&command).encode())
    }

    /// Runs a command's share (or, `Share::DryRun`, its dry run), unless it writes a table a
    /// two-phase statement holds. A statement's commit (`Share::Commit`) runs whatever holds
    /// are recorded: its own hold is gone, and no other statement holding its tables was
    /// recorded since (a prepare meeting this one's hold was refused and recorded nothing).
    fn run_share(
        &mut self,
        command: engine::Command,
        held: &impl Fn(&[u8]) -> bool,
        share: Share,
    ) -> engine::Outcome {
        if let Some(refused) = self.share_refused(&command, share) {
            return refused;
        }
        let engine = &self.engine;
        let schema_of = |name: &str| engine.table(name).map(|table| table.schema.clone());
        let command = rows::share_of(command, &schema_of, held);
        if share == Share::DryRun {
            return dry_run(&self.engine, &command);
        }
        if command.is_read() {
            self.engine.read_command(&command)
        } else {
            self.engine.execute_command(&command)
        }
    }

    /// Why `run_share` refuses a command before it runs anything: a two-phase statement holds
    /// a table it writes exclusively (`Busy`, unless this is that statement's commit), or an
    /// open transaction holds a table it reads or writes (`Transactions::blocker`).
    fn share_refused(&self, command: &engine::Command, share: Share) -> Option<engine::Outcome> {
        let written = prepared::written_tables(command);
        let holder = self
            .prepared
            .exclusive_holder(written.iter().map(String::as_str));
        if let (Some((table, statement)), false) = (holder, share == Share::Commit) {
            return Some(engine::Outcome::Error(engine::EngineError::Busy {
                table,
                statement,
            }));
        }
        if share != Share::Commit {
            if let Some(locked) = self.transaction_blocker(command) {
                return Some(engine::Outcome::Error(locked));
            }
        }
        None
    }

    /// The open transaction that keeps a statement outside transactions out: judged on the
    /// rows it pins when it pins partition keys of one table (`Transactions::pinned_blocker`),
    /// else on the tables it reads and writes (`Transactions::blocker`).
    fn transaction_blocker(&self, command: &engine::Command) -> Option<engine::EngineError> {
        if self.transactions.is_idle() {
            return None; // Nothing to judge (the autocommit statements' common case).
        }
        let mut unguarded = command;
        while let engine::Command::Guarded { command, .. } = unguarded {
            unguarded = command;
        }
        let operations: &[engine::Operation] = match unguarded {
            engine::Command::Execute(operation) => std::slice::from_ref(operation),
            engine::Command::Batch(operations) => operations,
            _ => &[],
        };
        let schema = operations
            .first()
            .and_then(|operation| self.engine.table(operation.table_name()))
            .map(|table| &table.schema);
        if let Some(judged) =
            schema.and_then(|schema| self.transactions.pinned_blocker(operations, schema))
        {
            return judged.filter(|_| !self.canary_pinned_unjudged);
        }
        let read = transactions::tables_read(command);
        let written = prepared::written_tables(command);
        self.transactions.blocker(&read, &written)
    }

    /// Executes a partitioned cluster's shares of store operations in order, with the results
    /// `execute_share` on each in turn would return (same bytes, same final state), but the
    /// engine commands that may share a scan cycle (`shares_a_cycle`: autocommit statements,
    /// queries and updates alike, no DDL, not on the table `kv`) run, each maximal run of
    /// consecutive ones, as one `Engine::execute_batch`: Crescando's shared cycle for the
    /// statements of one log entry, as `apply_batch` gives the one-group path. So does the
    /// commit of a two-phase statement whose hold is shared (`shared_commit`: a write that
    /// cannot fail on the data, such as Crescando's non-key UPDATEs, which go in two phases
    /// over several partitions). Everything else (RESP commands, transaction statements and
    /// locks, prepares and the other decisions, DDL, the catalog read) ends the run and runs
    /// alone at its place.
    ///
    /// Exact because nothing a run's member checks before it runs changes inside the run: the
    /// open transactions change only by operations that end runs; the two-phase holds only by
    /// operations that end runs, except the shared holds a commit in the run ends, which no
    /// member checks (a write outside transactions is refused by exclusive holds only, and a
    /// commit by none); and the catalog (guards, the schemas `rows::share_of` cuts inserts
    /// by) only by DDL, which is never in a run.
    pub fn execute_shares(
        &mut self,
        operations: &[&[u8]],
        held: impl Fn(&[u8]) -> bool,
    ) -> Vec<Vec<u8>> {
        let mut results: Vec<Option<Vec<u8>>> = vec![None; operations.len()];
        let mut run: Vec<(usize, engine::Command)> = Vec::new();
        let mut run_operations = 0;
        for (at, operation) in operations.iter().enumerate() {
            if Store::is_shared_prepare(operation) {
                // Its vote and hold depend on the transactions, the holds and the catalog,
                // none of which the run changes, and on no row: it runs in place.
                results[at] = Some(self.execute_share(operation, &held));
                continue;
            }
            let command = if let Some((statement, command)) = self.shared_commit(operation) {
                // `decide`'s commit of it (no refusal, the share cut now), in the run.
                let taken = self.prepared.take(statement);
                debug_assert!(taken.is_some_and(|taken| taken.shared));
                command
            } else {
                let Some(command) = command_of(operation).filter(shares_cycle) else {
                    self.flush_share_run(&mut run, &mut results);
                    run_operations = 0;
                    results[at] = Some(self.execute_share(operation, &held));
                    continue;
                };
                if let Some(refused) = self.share_refused(&command, Share::Run) {
                    results[at] = Some(refused.encode());
                    continue;
                }
                let digest = self.engine.catalog_digest();
                let Some(command) = unguarded(command, digest) else {
                    results[at] =
                        Some(engine::Outcome::Error(engine::EngineError::StaleCatalog).encode());
                    continue;
                };
                command
            };
            let engine = &self.engine;
            let schema_of = |name: &str| engine.table(name).map(|table| table.schema.clone());
            let command = rows::share_of(command, &schema_of, &held);
            if run_operations + batch_len(&command) > engine::BATCH_OPERATIONS_MAX {
                self.flush_share_run(&mut run, &mut results);
                run_operations = 0;
            }
            run_operations += batch_len(&command);
            run.push((at, command));
        }
        self.flush_share_run(&mut run, &mut results);
        results
            .into_iter()
            .map(|result| result.expect("every share executed"))
            .collect()
    }

    /// Whether `operation` commits a two-phase statement prepared here with a shared hold, whose
    /// commit `execute_shares` runs in a shared engine batch (`shared_commit`): the host may
    /// batch it with its neighbours as it batches `shares_a_cycle` operations.
    pub fn is_shared_commit(&self, operation: &[u8]) -> bool {
        self.shared_commit(operation).is_some()
    }

    /// Whether `operation` prepares a two-phase statement that cannot fail on the data (a
    /// shared hold, `prepared`): its vote reads no row (no dry run), so `execute_shares` runs
    /// it in place without ending the run around it, and the host may batch it too.
    pub fn is_shared_prepare(operation: &[u8]) -> bool {
        let Some((&TAG_PREPARE, rest)) = operation.split_first() else {
            return false;
        };
        let Ok((_, bytes)) = postcard::from_bytes::<(u64, Vec<u8>)>(rest) else {
            return false;
        };
        engine::Command::decode(&bytes).is_ok_and(|command| !prepared::fallible(&command))
    }

    /// A decision to commit a two-phase statement prepared here with a shared hold, which has
    /// no kept share (`prepared`: it cannot fail on the data, so its vote ran no dry run), as
    /// the statement id and the command its commit runs, unguarded, when that command may
    /// share a scan cycle and its catalog guards match (a stale one is decided alone, as
    /// `decide` answers it). `None` for anything else.
    fn shared_commit(&self, operation: &[u8]) -> Option<(u64, engine::Command)> {
        let (&TAG_DECIDE, rest) = operation.split_first()? else {
            return None;
        };
        let (statement, commit) = postcard::from_bytes::<(u64, bool)>(rest).ok()?;
        let prepared = self.prepared.get(statement)?;
        if !commit || !prepared.shared || self.prepared_shares.contains_key(&statement) {
            return None;
        }
        let command = engine::Command::decode(&prepared.command).ok()?;
        if !shares_cycle(&command) {
            return None;
        }
        unguarded(command, self.engine.catalog_digest()).map(|command| (statement, command))
    }

    /// Executes a run of `execute_shares` as one engine batch and places its outcomes.
    fn flush_share_run(
        &mut self,
        run: &mut Vec<(usize, engine::Command)>,
        results: &mut [Option<Vec<u8>>],
    ) {
        if run.is_empty() {
            return;
        }
        let catalog = self.engine.catalog_digest();
        let all: Vec<engine::Operation> = run
            .iter()
            .flat_map(|(_, command)| operations_of(command).iter().cloned())
            .collect();
        self.cycles.count(run.len());
        let mut outputs = self.engine.execute_batch(&all).into_iter();
        for (at, command) in run.drain(..) {
            assert!(results[at].is_none(), "one result per share");
            results[at] = Some(outcome_of(&command, &mut outputs).encode());
        }
        assert!(outputs.next().is_none(), "one result per operation");
        assert_eq!(
            catalog,
            self.engine.catalog_digest(),
            "a run holds no DDL: the catalog is the same after it"
        );
    }

    /// The first phase: the vote (a fallible statement's dry run of the share, any other's
    /// refusal by an open transaction or a stale catalog guard; or `Busy` if another statement
    /// holds one of its tables in a way it may not share, `prepared`). Unless the vote is
    /// that `Busy`, the statement is recorded whatever the vote, so that every partition holds
    /// its tables until the decision.
    ///
    /// A statement refused because another holds its tables holds nothing: the holds are the
    /// same on every partition at every point of the order, so it is refused by every
    /// partition and its decision is an abort. Were it recorded, each such statement would
    /// hold the tables until its own abort, refusing the next writer's prepare, which would
    /// hold them in turn: under steady contention the tables would never be free, and no
    /// write to them would ever run (the livelock of seeds 797 and 835, `docs/TESTING.md`).
    fn prepare(&mut self, body: &[u8], held: &impl Fn(&[u8]) -> bool) -> engine::Outcome {
        let Ok((statement, bytes)) = postcard::from_bytes::<(u64, Vec<u8>)>(body) else {
            return engine::Outcome::Error(engine::EngineError::Malformed);
        };
        let Ok(command) = engine::Command::decode(&bytes) else {
            return engine::Outcome::Error(engine::EngineError::Malformed);
        };
        let tables = prepared::written_tables(&command);
        let shared = !prepared::fallible(&command);
        let holder = if shared {
            self.prepared
                .exclusive_holder(tables.iter().map(String::as_str))
        } else {
            self.prepared.holder(tables.iter().map(String::as_str))
        };
        if let Some((table, holder)) = holder {
            return engine::Outcome::Error(engine::EngineError::Busy {
                table,
                statement: holder,
            });
        }
        // `run_share` with `Share::DryRun`, keeping the share for the commit; a statement that
        // cannot fail on the data needs no dry run (its commit runs it whole, `decide`).
        let vote = match self.share_refused(&command, Share::DryRun) {
            Some(refused) => refused,
            None if shared => {
                if guards_match(&command, self.engine.catalog_digest()) {
                    engine::Outcome::Batch(Vec::new())
                } else {
                    engine::Outcome::Error(engine::EngineError::StaleCatalog)
                }
            }
            None => {
                let engine = &self.engine;
                let schema_of = |name: &str| engine.table(name).map(|table| table.schema.clone());
                let share = rows::share_of(command, &schema_of, held);
                let (vote, bound) = dry_run_bound(&self.engine, &share);
                self.prepared_shares.insert(
                    statement,
                    PreparedShare {
                        digest: self.engine.catalog_digest(),
                        share,
                        bound,
                    },
                );
                vote
            }
        };
        assert!(
            !matches!(
                vote,
                engine::Outcome::Error(engine::EngineError::Busy { .. })
            ),
            "no statement holds its tables: the vote is not Busy"
        );
        self.prepared.record(
            statement,
            prepared::Statement {
                tables,
                command: bytes,
                shared,
            },
        );
        vote
    }

    /// The second phase: the share run for real (commit) or nothing (abort: an empty batch);
    /// `Busy` with no table if the statement is not (or no longer) prepared here.
    fn decide(&mut self, body: &[u8], held: &impl Fn(&[u8]) -> bool) -> engine::Outcome {
        let Ok((statement, commit)) = postcard::from_bytes::<(u64, bool)>(body) else {
            return engine::Outcome::Error(engine::EngineError::Malformed);
        };
        let share = self.prepared_shares.remove(&statement);
        let Some(prepared) = self.prepared.take(statement) else {
            return engine::Outcome::Error(engine::EngineError::Busy {
                table: String::new(),
                statement,
            });
        };
        if !commit {
            return engine::Outcome::Batch(Vec::new());
        }
        if let Some(PreparedShare { share, bound, .. }) =
            share.filter(|kept| kept.digest == self.engine.catalog_digest())
        {
            // What `run_share(.., Share::Commit)` does with the whole command: a commit is
            // never refused, and the share is the same cut (same holdings, same catalog).
            if share.is_read() {
                return self.engine.read_command(&share);
            }
            if let Some(outcome) = bound
                .as_ref()
                .and_then(|bound| execute_bound(&mut self.engine, &share, bound))
            {
                return outcome;
            }
            return self.engine.execute_command(&share);
        }
        match engine::Command::decode(&prepared.command) {
            Ok(command) => self.run_share(command, held, Share::Commit),
            Err(error) => engine::Outcome::Error(error),
        }
    }

    /// The open transactions as a copy of the rows `keep` accepts would carry them
    /// (Rubberband's export: every lock, the before-images of those rows).
    pub fn transactions_where(
        &self,
        keep: impl Fn(&engine::TableSchema, &[engine::Value]) -> bool,
    ) -> transactions::Transactions {
        let engine = &self.engine;
        self.transactions.copy_where(
            keep,
            |name| engine.table(name).map(|table| table.schema.clone()),
            |name, key| engine.table(name)?.rows.get(key).cloned(),
        )
    }

    /// Keeps only the table rows `keep` accepts, and the open transactions' before-images of
    /// them (the rest moved away).
    pub fn retain_rows_where(
        &mut self,
        keep: impl Fn(&engine::TableSchema, &[engine::Value]) -> bool,
    ) {
        self.let_go_all();
        self.transactions = self.transactions_where(&keep);
        self.engine.retain_rows(keep);
    }

    /// A statement of an interactive transaction as it arrives (`run_transaction`): a
    /// statement of its transaction parked here is let go first (its gateway moved on), and a
    /// statement refused to wait in the row-lock queue whose gateway waits for its grant
    /// (`TransactionStatement::await_grant`) is parked (`take_parked`); then the parked
    /// statements whose turn came run (`grant_parked`).
    fn transaction_statement(
        &mut self,
        body: &[u8],
        held: &impl Fn(&[u8]) -> bool,
    ) -> engine::Outcome {
        let statement = postcard::from_bytes::<transactions::TransactionStatement>(body);
        self.let_go(
            statement
                .as_ref()
                .map(|statement| statement.transaction)
                .map_err(|_| ()),
        );
        let outcome = self.run_transaction(body, held);
        if let Ok(statement) = statement {
            let waits = matches!(
                outcome,
                engine::Outcome::Error(engine::EngineError::TransactionLocked { .. })
            );
            if waits
                && statement.await_grant
                && !statement.nowait
                && self.transactions.queued(statement.transaction)
            {
                let ticket =
                    self.transactions
                        .park(statement.transaction, body.to_vec(), outcome.encode());
                self.parked_now = Some(ticket);
            }
        }
        self.grant_parked(held, false);
        outcome
    }

    /// Lets go of transaction `id`'s parked statement, if any: answered with its refusal (its
    /// gateway has moved on: a message of its transaction arrived).
    fn let_go<E>(&mut self, id: Result<u64, E>) {
        let Ok(id) = id else {
            return;
        };
        if let Some(parked) = self.transactions.unpark(id) {
            self.answered
                .push((parked.ticket, parked.reply, parked.refusal));
        }
    }

    /// Lets go of every parked statement (a keyspace cut: their answers must go out through
    /// this group, which may no longer hold their rows; their gateways send them again).
    pub fn let_go_all(&mut self) {
        for parked in self.transactions.unpark_all() {
            self.answered
                .push((parked.ticket, parked.reply, parked.refusal));
        }
    }

    /// Judges every parked statement afresh, in the order of their places in the queue, as if
    /// its gateway sent it again now: one granted runs now and is answered (its outcome, with
    /// the catalog guard, statement-number and tombstone checks of any statement), one
    /// refused for another reason is answered with that refusal (a death: a deadlock or the
    /// execution-order rule, judged on the graph as it is now), one that still waits in the
    /// queue stays parked under its ticket.
    ///
    /// Unless `all`, a parked statement whose row lock another transaction still holds is
    /// left parked without being judged again (it would be refused for that holder; only
    /// the execution-order rule could make it die instead, and a `Globalize`, the one message
    /// that breaks the rule on edges already there, judges them all).
    fn grant_parked(&mut self, held: &impl Fn(&[u8]) -> bool, all: bool) {
        for id in self.transactions.parked_in_order() {
            if !all && self.transactions.held_against(id) {
                continue;
            }
            let parked = self.transactions.unpark(id).expect("listed above");
            let outcome = self.run_transaction(&parked.statement, held);
            let waits = matches!(
                outcome,
                engine::Outcome::Error(engine::EngineError::TransactionLocked { .. })
            );
            if waits && self.transactions.queued(id) {
                self.transactions.repark(id, parked);
            } else {
                self.answered
                    .push((parked.ticket, parked.reply, outcome.encode()));
            }
        }
    }

    /// The ticket of the statement the last operation parked, if it parked one: its answer
    /// so far (the refusal) is not final; it comes through `take_answered` under the ticket.
    /// A host that cannot defer the reply lets it go (`let_go_ticket`).
    pub fn take_parked(&mut self) -> Option<u64> {
        self.parked_now.take()
    }

    /// Attaches the host's reply bytes to the statement parked under `ticket`.
    pub fn set_parked_reply(&mut self, ticket: u64, reply: Vec<u8>) {
        if let Some(answered) = self
            .answered
            .iter_mut()
            .find(|(answered, _, _)| *answered == ticket)
        {
            // Answered in the step that parked it (never, as judged now: its grant pass
            // refuses it again for the same reason): the reply goes with the answer.
            answered.1 = reply;
            return;
        }
        self.transactions.set_parked_reply(ticket, reply);
    }

    /// Lets go of the statement parked under `ticket` without an answer: its refusal was
    /// answered at once (its host could not defer the reply).
    pub fn let_go_ticket(&mut self, ticket: u64) {
        let owner = self.transactions.parked_in_order().into_iter().find(|id| {
            self.transactions
                .parked(*id)
                .is_some_and(|parked| parked.ticket == ticket)
        });
        if let Some(id) = owner {
            self.transactions.unpark(id);
        }
    }

    /// Forgets the shares kept for prepared statements' commits (`prepared_shares`): the
    /// partition's holdings changed (a keyspace cut, an install), so a commit cuts the
    /// statement again.
    pub fn forget_prepared_shares(&mut self) {
        self.prepared_shares.clear();
    }

    /// How many prepared statements' shares are kept (`prepared_shares`).
    pub fn prepared_shares_len(&self) -> usize {
        self.prepared_shares.len()
    }

    /// Takes in another partition's copy of the open transactions (`Transactions::absorb`),
    /// letting go first of a statement parked here whose transaction the copy says another
    /// gateway aborted (it leaves the queue).
    pub fn absorb_transactions(&mut self, other: transactions::Transactions) {
        for id in self.transactions.parked_in_order() {
            if other.was_aborted(id) {
                self.let_go::<()>(Ok(id));
            }
        }
        self.transactions.absorb(other);
    }

    /// Parked statements answered since last asked, in order: (ticket, reply bytes, outcome).
    pub fn take_answered(&mut self) -> Vec<(u64, Vec<u8>, Vec<u8>)> {
        std::mem::take(&mut self.answered)
    }

    /// A statement of an interactive transaction: its locks (or the refusal), its rows'
    /// before-images, then its share run in place (`transactions`). A statement run here
    /// before answers the outcome it answered then, whether it wrote; a read runs again.
    fn run_transaction(&mut self, body: &[u8], held: &impl Fn(&[u8]) -> bool) -> engine::Outcome {
        let Ok(statement) = postcard::from_bytes::<transactions::TransactionStatement>(body) else {
            return engine::Outcome::Error(engine::EngineError::Malformed);
        };
        let Ok(command) = engine::Command::decode(&statement.command) else {
            return engine::Outcome::Error(engine::EngineError::Malformed);
        };
        if touches_kv(&command) {
            return engine::Outcome::Error(engine::EngineError::FeatureNotSupported {
                feature: "the built-in table kv inside a transaction block".into(),
            });
        }
        let id = statement.transaction;
        if let Some((number, outcome)) = self
            .transactions
            .get(id)
            .and_then(|open| open.last_write.as_ref())
        {
            if *number == statement.statement {
                return engine::Outcome::decode(outcome)
                    .unwrap_or(engine::Outcome::Error(engine::EngineError::Malformed));
            }
        }
        if self
            .transactions
            .get(id)
            .is_some_and(|open| open.statement > statement.statement)
        {
            return engine::Outcome::Error(transactions::superseded_refusal());
        }
        let mut inner = &command;
        if let engine::Command::Guarded { catalog, command } = &command {
            if *catalog != self.engine.catalog_digest() {
                return engine::Outcome::Error(engine::EngineError::StaleCatalog);
            }
            inner = command;
        }
        if matches!(inner, engine::Command::Explain(_)) {
            return self.engine.read_command(&command);
        }
        let operations = transactions::operations_of(inner);
        if let Err(error) = transactions::locks_needed(operations, None) {
            return engine::Outcome::Error(error); // DDL.
        }
        if !transactions::covers_tables(operations, &statement.locks, self.transactions.get(id)) {
            return engine::Outcome::Error(engine::EngineError::Malformed);
        }
        if let Some(owner) = statement.owner {
            // A statement's owner is judged, never adopted: only a table lock to every
            // partition changes a process's incarnation (`TransactionStatement::owner`).
            if owner.process == 0
                || (owner.incarnation != 0
                    && self.transactions.incarnations().current(owner.process)
                        != Some(owner.incarnation))
            {
                return engine::Outcome::Error(engine::EngineError::IncarnationDead {
                    process: owner.process,
                    incarnation: owner.incarnation,
                });
            }
            // Before the locks are judged: a transaction whose first statement here waits is
            // owned too.
            self.transactions.own(id, owner);
        }
        let prepared = &self.prepared;
        let admission = self.transactions.admit_as(
            id,
            (statement.begin_ms, statement.now_ms),
            &statement.locks,
            |table| prepared.holder([table]).map(|(_, statement)| statement),
            statement.nowait,
        );
        if let transactions::Admission::Refused(error) = admission {
            return engine::Outcome::Error(error);
        }
        let open = self.transactions.get_mut(id).expect("admitted: open here");
        open.statement = open.statement.max(statement.statement);
        let engine = &self.engine;
        let schema_of = |name: &str| engine.table(name).map(|table| table.schema.clone());
        let share = rows::share_of(command, &schema_of, held);
        if statement.skip_locked {
            return self.skip_locked_read(id, &statement.locks, share);
        }
        if share.is_read() {
            return self.engine.read_command(&share);
        }
        // Each image with the columns its statement assigns (an UPDATE of non-key columns;
        // `None`, the whole row, for anything else): under column locks an abort must write
        // back only those (`Transaction::written`). Columns the statement only increments
        // (outside savepoints) are undone by subtraction instead (`Mode::Increment`):
        // they are left out of the image's columns and their amounts recorded below.
        let mut images: Vec<transactions::Undo> = Vec::new();
        let mut incremented: Vec<Incremented> = Vec::new();
        for operation in transactions::operations_of(&share) {
            let schema = self
                .engine
                .table(operation.table_name())
                .map(|table| &table.schema);
            let mut columns = schema
                .and_then(|schema| transactions::columns_assigned(operation, schema))
                .filter(|_| !self.canary_whole_row_undo);
            // (the columns incremented, every column assigned)
            let (increments, assigned) = match (&mut columns, schema) {
                (Some(columns), Some(schema))
                    if statement.savepoint == 0 && !self.canary_increment_image =>
                {
                    let assigned = columns.clone();
                    let increments = transactions::blind_increments(operation, schema);
                    columns.retain(|column| !increments.contains(column));
                    (increments, assigned)
                }
                _ => (Vec::new(), Vec::new()),
            };
            for image in self.engine.before_images(operation) {
                if !increments.is_empty() && image.2.is_some() {
                    incremented.push((image.clone(), increments.clone(), assigned.clone()));
                }
                images.push((image, columns.clone()));
            }
        }
        self.transactions.remember(id, images, statement.savepoint);
        let outcome = self.engine.execute_command(&share);
        if !incremented.is_empty() && !matches!(outcome, engine::Outcome::Error(_)) {
            if let Err(refusal) = self.record_increments(id, &incremented) {
                return refusal;
            }
        }
        let open = self
            .transactions
            .get_mut(id)
            .expect("admitted above, not ended since");
        open.last_write = Some((statement.statement, outcome.encode()));
        outcome
    }

    /// SKIP LOCKED: of the rows the select's predicate matches here, in primary-key order,
    /// those whose placement key no other transaction holds in a conflicting mode, up to its
    /// limit; each gets the row lock (X for FOR UPDATE, S for FOR SHARE, from the table
    /// intention the statement carries), then the select runs over exactly those rows.
    fn skip_locked_read(
        &mut self,
        id: u64,
        locks: &[(transactions::Resource, transactions::Mode)],
        share: engine::Command,
    ) -> engine::Outcome {
        let refuse = || {
            engine::Outcome::Error(engine::EngineError::FeatureNotSupported {
                feature: "SKIP LOCKED on a query that is not a plain SELECT of one table".into(),
            })
        };
        let operations = transactions::operations_of(&share);
        let [engine::Operation::Select {
            table,
            columns,
            predicate,
            limit,
        }] = operations
        else {
            return refuse();
        };
        let Some(schema) = self.engine.table(table).map(|table| table.schema.clone()) else {
            return self.engine.read_command(&share); // Answers the missing table's error.
        };
        let mode = match locks
            .iter()
            .find(|((name, row), _)| name == table && row.is_none())
        {
            Some((_, transactions::Mode::IntentExclusive)) => transactions::Mode::Exclusive,
            Some((_, transactions::Mode::IntentShared)) => transactions::Mode::Shared,
            _ => return engine::Outcome::Error(engine::EngineError::Malformed),
        };
        let mut chosen = Vec::new();
        for (_, row) in self.engine.matching_rows(table, predicate.as_ref()) {
            if limit.is_some_and(|limit| chosen.len() as u64 >= limit) {
                break;
            }
            let resource = (table.clone(), Some(rows::row_key(&schema, row)));
            if !self.transactions.held_by_other(id, &resource, mode) {
                chosen.push((resource, row.clone()));
            }
        }
        let needed: Vec<_> = chosen
            .iter()
            .map(|(resource, _)| (resource.clone(), mode))
            .collect();
        // Rows no one holds are granted, whatever waits for them (a waiter waits for a
        // holder): skipping is not waiting.
        let admission = self.transactions.admit_unqueued(id, &needed);
        assert_eq!(
            admission,
            transactions::Admission::Run,
            "rows no other transaction holds are granted"
        );
        // The same select over exactly the chosen rows (by primary key), in the command's
        // shape.
        let key_columns: Vec<&str> = schema
            .primary_key
            .iter()
            .map(|position| schema.columns[*position].name.as_str())
            .collect();
        let by_key = engine::Predicate::Or(
            chosen
                .iter()
                .map(|(_, row)| {
                    engine::Predicate::And(
                        key_columns
                            .iter()
                            .zip(&schema.primary_key)
                            .map(|(column, position)| {
                                engine::Predicate::equal(column, row[*position].clone())
                            })
                            .collect(),
                    )
                })
                .collect(),
        );
        let select = engine::Operation::Select {
            table: table.clone(),
            columns: columns.clone(),
            predicate: Some(by_key),
            limit: None,
        };
        self.engine.read_command(&with_operation(share, select))
    }

    /// An owned table-lock request (`incarnation_lock_operation`, `owned_lock_operation`):
    /// its incarnation judged first (refused if dead; a newer one aborts the transactions of
    /// the one it supersedes), then the locks as `lock` takes them. The old message names no
    /// incarnation (0) and keeps its old meaning: owned, never judged (a gateway that cannot
    /// take a new incarnation must not be refused for ever after a suspicion).
    fn owned_lock<E>(
        &mut self,
        request: Result<(transactions::LockRequest, transactions::Owner), E>,
        held: &impl Fn(&[u8]) -> bool,
    ) -> engine::Outcome {
        let Ok((request, owner)) = request else {
            return self.lock(None, None);
        };
        self.let_go::<()>(Ok(request.transaction));
        if owner.process == 0 || owner.incarnation == 0 {
            // Process 0 names nobody (never sent): unowned, as before.
            let owner = (owner.process != 0).then_some(owner);
            let outcome = self.lock(Some(request), owner);
            self.grant_parked(held, false);
            return outcome;
        }
        let Ok(superseded) = self.transactions.take_incarnation(owner) else {
            self.transactions.check_incarnations();
            return engine::Outcome::Error(engine::EngineError::IncarnationDead {
                process: owner.process,
                incarnation: owner.incarnation,
            });
        };
        self.abort_transactions(superseded);
        let outcome = self.lock(Some(request), Some(owner));
        self.transactions.check_incarnations();
        // Transactions the superseded incarnation held are gone: statements parked behind
        // them may run now.
        self.grant_parked(held, false);
        outcome
    }

    /// A transaction's table locks, all or none.
    /// `owner`: the gateway that sent it (`incarnation_lock_operation`), its incarnation
    /// already the current one.
    fn lock(
        &mut self,
        request: Option<transactions::LockRequest>,
        owner: Option<transactions::Owner>,
    ) -> engine::Outcome {
        let Some(request) = request else {
            return engine::Outcome::Error(engine::EngineError::Malformed);
        };
        if let Some(owner) = owner {
            self.transactions.own(request.transaction, owner);
        }
        let prepared = &self.prepared;
        match self.transactions.admit_as(
            request.transaction,
            (request.begin_ms, request.now_ms),
            &request.locks,
            |table| prepared.holder([table]).map(|(_, statement)| statement),
            request.nowait,
        ) {
            transactions::Admission::Run => engine::Outcome::Batch(Vec::new()),
            transactions::Admission::Refused(error) => engine::Outcome::Error(error),
        }
    }

    /// A transaction becomes global (`globalize_operation`).
    fn globalize(&mut self, body: &[u8]) -> engine::Outcome {
        let Ok(id) = postcard::from_bytes::<u64>(body) else {
            return engine::Outcome::Error(engine::EngineError::Malformed);
        };
        match self.transactions.globalize(id) {
            Ok(_) => engine::Outcome::Batch(Vec::new()),
            Err(error) => engine::Outcome::Error(error),
        }
    }

    /// Records what a statement of transaction `id` added to the columns it only incremented
    /// (`incremented`: each row's image before it, and those columns), after checking the
    /// escrow bound: whichever of the increments pending on a column (this transaction's and
    /// other holders') commit or abort, the value must stay within its column's type, as it
    /// would in some serial order (O'Neil's escrow method). A statement that could leave a
    /// column out of range is undone (its rows' assigned columns written back) and refused
    /// with 40001: it runs once the other increments have ended.
    fn record_increments(
        &mut self,
        id: u64,
        incremented: &[Incremented],
    ) -> Result<(), engine::Outcome> {
        let mut amounts: Vec<((String, engine::table::Key), usize, engine::Value)> = Vec::new();
        for ((table, key, before), columns, _) in incremented {
            let before = before
                .as_ref()
                .expect("only rows that existed are incremented");
            let Some(after) = self
                .engine
                .table(table)
                .and_then(|table| table.rows.map().get(key).cloned())
            else {
                continue; // The statement deleted it: nothing to undo by increments.
            };
            let schema = &self.engine.table(table).expect("the row's table").schema;
            for &column in columns {
                if before[column].is_null() || after[column].is_null() {
                    continue; // NULL plus anything is NULL: nothing to undo.
                }
                let (Some(now), Some(was)) = (
                    transactions::amount_of(&after[column]),
                    transactions::amount_of(&before[column]),
                ) else {
                    unreachable!("blind increments are of INT, BIGINT or NUMERIC columns");
                };
                let amount = engine::Value::Numeric(
                    now.checked_sub(was)
                        .expect("the difference of two values of one column"),
                );
                let place = (table.clone(), key.clone());
                // A column the transaction already holds by image (it wrote it otherwise
                // before, or the whole row: an exclusive lock is held) is undone by the image.
                let open = self.transactions.get(id).expect("admitted, not ended");
                let by_image = match open.written.get(&place) {
                    Some(owned) => owned.contains(&column),
                    None => open.undo.contains_key(&place),
                };
                if by_image {
                    continue;
                }
                let mine = self
                    .transactions
                    .get(id)
                    .and_then(|open| open.increments.get(&place))
                    .and_then(|sums| sums.iter().find(|(held, _)| *held == column))
                    .map(|(_, sum)| sum.clone());
                let mut pending = self.transactions.others_increments(id, &place, column);
                let sum = match mine {
                    Some(sum) => transactions::add_amount(&sum, &amount, false),
                    None => Some(amount.clone()),
                };
                pending.extend(sum.clone());
                let within = sum.is_some()
                    && escrow_within(
                        &after[column],
                        &pending,
                        schema.columns[column].data_type,
                        &schema.columns[column].name,
                    );
                if !within {
                    let name = schema.columns[column].name.clone();
                    return Err(self.undo_statement(incremented, &name));
                }
                amounts.push((place, column, amount));
            }
        }
        for (place, column, amount) in amounts {
            self.transactions
                .record_increment(id, place, column, &amount);
        }
        Ok(())
    }

    /// Undoes an aborted transaction here: subtracts its increments (`Mode::Increment`: the
    /// other holders' stay), then writes back its before-images.
    fn undo(&mut self, mut ended: transactions::Transaction) {
        for ((table, key), sums) in std::mem::take(&mut ended.increments) {
            let Some(row) = self
                .engine
                .table(&table)
                .and_then(|table| table.rows.map().get(&key).cloned())
            else {
                continue;
            };
            let values = sums
                .into_iter()
                .map(|(column, sum)| {
                    let value = transactions::add_amount(&row[column], &sum, true)
                        .expect("the escrow bound keeps a value less its increments in range");
                    (column, value)
                })
                .collect();
            self.engine.set_columns(&table, &key, values);
        }
        self.engine.write_back_columns(ended.into_undo());
    }

    /// Writes back the columns a refused increment statement assigned and answers its refusal.
    fn undo_statement(&mut self, incremented: &[Incremented], column: &str) -> engine::Outcome {
        for ((table, key, before), _, assigned) in incremented {
            let Some(before) = before else { continue };
            let values = assigned
                .iter()
                .map(|&column| (column, before[column].clone()))
                .collect();
            self.engine.set_columns(table, key, values);
        }
        engine::Outcome::Error(engine::EngineError::SerializationFailure {
            reason: format!(
                "increments of column {column} pending in other transactions could take it out of its type's range; retry the transaction"
            ),
        })
    }

    /// ROLLBACK TO SAVEPOINT: the savepoint undo of the transaction's statements since then is
    /// written back, newest first; locks and the transaction's own undo stay.
    fn rollback_to(&mut self, body: &[u8]) -> engine::Outcome {
        let Ok((id, savepoint)) = postcard::from_bytes::<(u64, u32)>(body) else {
            return engine::Outcome::Error(engine::EngineError::Malformed);
        };
        if savepoint == 0 {
            return engine::Outcome::Error(engine::EngineError::Malformed);
        }
        // Its gateway moved on from whatever statement waited here.
        self.transactions.stop_waiting(id);
        if self.transactions.was_aborted(id) {
            return engine::Outcome::Error(engine::EngineError::SerializationFailure {
                reason: "the transaction's abort: it held locks another statement waited for while it was idle, or its gateway's storage process was suspected".into(),
            });
        }
        let Some(images) = self.transactions.rollback_to(id, savepoint) else {
            return engine::Outcome::Batch(Vec::new());
        };
        let count = images.len() as u64;
        self.engine.write_back_columns(images);
        engine::Outcome::Batch(vec![Ok(engine::Output::Updated { count })])
    }

    /// A suspicion of the storage process `owner` (`abort_owned_operation`): each transaction
    /// it owns here is aborted as by another gateway (its parked statement let go, its
    /// before-images written back, its locks released, a tombstone left).
    fn abort_owned(&mut self, process: u64, through: u64) -> engine::Outcome {
        let owned = self.transactions.owned_by(process);
        let count = owned.len() as u64;
        self.abort_transactions(owned);
        self.transactions.suspect(process, through);
        self.transactions.check_incarnations();
        engine::Outcome::Batch(vec![Ok(engine::Output::Updated { count })])
    }

    /// Aborts each of `ids` as by another gateway (its parked statement let go, its
    /// before-images written back, its locks released, a tombstone left): a suspicion's or a
    /// superseded incarnation's transactions.
    fn abort_transactions(&mut self, ids: Vec<u64>) {
        for id in ids {
            self.let_go::<()>(Ok(id));
            if let Some(ended) = self.transactions.end(id, false) {
                self.undo(ended);
            }
            debug_assert!(self.transactions.was_aborted(id), "a tombstone is left");
            debug_assert_eq!(self.transactions.owner(id), None);
        }
    }

    /// The end of an interactive transaction: commit drops its before-images, abort writes
    /// them back; either releases its locks.
    fn end_transaction(&mut self, body: &[u8]) -> engine::Outcome {
        let Ok((id, commit, by_owner)) = postcard::from_bytes::<(u64, bool, bool)>(body) else {
            return engine::Outcome::Error(engine::EngineError::Malformed);
        };
        // Only its own gateway commits; a commit that says otherwise aborts.
        let commit = commit && by_owner;
        if commit && self.transactions.was_aborted(id) {
            self.transactions.end(id, true);
            return engine::Outcome::Error(engine::EngineError::SerializationFailure {
                reason: "the transaction's abort: it held locks another statement waited for while it was idle, or its gateway's storage process was suspected".into(),
            });
        }
        let Some(ended) = self.transactions.end(id, by_owner) else {
            return engine::Outcome::Batch(Vec::new());
        };
        let count = ended.undo.len() as u64;
        if !commit {
            self.undo(ended);
        }
        engine::Outcome::Batch(vec![Ok(engine::Output::Updated { count })])
    }

    /// Runs an engine command on the built-in table `kv`, against a table materialised from
    /// the key-value map. For a write (`write`: the command is being applied, not queried),
    /// also returns the map's new entries: the table's rows afterwards.
    #[allow(clippy::type_complexity)]
    fn run_on_kv(
        &self,
        command: &engine::Command,
        write: bool,
    ) -> (
        engine::Outcome,
        Option<std::collections::BTreeMap<Vec<u8>, Vec<u8>>>,
    ) {
        if let engine::Command::Guarded { catalog, command } = command {
            if *catalog != self.engine.catalog_digest() {
                return (
                    engine::Outcome::Error(engine::EngineError::StaleCatalog),
                    None,
                );
            }
            return self.run_on_kv(command, write);
        }
        let operations: &[engine::Operation] = match command {
            engine::Command::Execute(operation) | engine::Command::Explain(operation) => {
                std::slice::from_ref(operation)
            }
            engine::Command::Batch(operations) => operations,
            engine::Command::Guarded { .. } => unreachable!("unwrapped above"),
        };
        for operation in operations {
            let refusal = match operation {
                engine::Operation::CreateTable { .. } => {
                    Some(engine::EngineError::DuplicateTable {
                        name: KV_TABLE.to_string(),
                    })
                }
                engine::Operation::DropTable { .. }
                | engine::Operation::CreateIndex { .. }
                | engine::Operation::CreateIndexOn { .. }
                | engine::Operation::AlterTable { .. }
                | engine::Operation::DropIndex { .. } => {
                    Some(engine::EngineError::FeatureNotSupported {
                        feature: "changing the built-in table kv (the RESP namespace)".into(),
                    })
                }
                _ => None,
            };
            if let Some(error) = refusal {
                return (engine::Outcome::Error(error), None);
            }
        }
        let mut table = engine::Engine::new();
        let created = table.execute(&engine::Operation::CreateTable {
            schema: kv_table_schema(),
        });
        assert!(created.is_ok(), "{created:?}");
        let rows: Vec<Vec<engine::Value>> = self
            .kv
            .strings()
            .map(|(key, value)| {
                vec![
                    engine::Value::Bytea(key.clone()),
                    engine::Value::Bytea(value.clone()),
                ]
            })
            .collect();
        for chunk in rows.chunks(engine::INSERT_ROWS_MAX) {
            let inserted = table.execute(&engine::Operation::Insert {
                table: KV_TABLE.to_string(),
                columns: Vec::new(),
                rows: chunk.to_vec(),
                on_conflict: engine::OnConflict::Error,
            });
            assert!(inserted.is_ok(), "distinct keys insert: {inserted:?}");
        }
        if !write {
            return (table.read_command(command), None);
        }
        let outcome = table.execute_command(command);
        if command.is_read() {
            return (outcome, None);
        }
        let entries = table
            .table(KV_TABLE)
            .expect("the kv table is never dropped")
            .rows
            .values()
            .map(|row| match row.as_slice() {
                [engine::Value::Bytea(key), engine::Value::Bytea(value)] => {
                    (key.clone(), value.clone())
                }
                other => unreachable!("kv rows are two non-null byteas: {other:?}"),
            })
            .collect();
        (outcome, Some(entries))
    }

    fn apply_sql(&mut self, bytes: &[u8]) -> Vec<u8> {
        match engine::Command::decode(bytes) {
            Ok(command) if touches_kv(&command) => {
                let (outcome, entries) = self.run_on_kv(&command, true);
                if let Some(entries) = entries {
                    self.kv.replace_strings(entries);
                }
                outcome.encode()
            }
            Ok(command) => self.engine.execute_command(&command).encode(),
            Err(error) => engine::Outcome::Error(error).encode(),
        }
    }

    fn query_sql(&self, bytes: &[u8]) -> Vec<u8> {
        match engine::Command::decode(bytes) {
            Ok(command) if touches_kv(&command) => {
                if !command.is_read() {
                    return engine::Outcome::Error(engine::EngineError::ReadOnly).encode();
                }
                self.run_on_kv(&command, false).0.encode()
            }
            Ok(command) => self.engine.read_command(&command).encode(),
            Err(error) => engine::Outcome::Error(error).encode(),
        }
    }
}

/// How `Store::run_share` runs a share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Share {
    Run,
    DryRun,
    /// A two-phase statement's commit.
    Commit,
}

/// A prepared statement's share, kept for its commit (`Store::prepared_shares`).
#[derive(Clone)]
struct PreparedShare {
    /// The catalog digest at the vote.
    digest: u64,
    share: engine::Command,
    /// A plain insert's binding (`engine::Engine::dry_run_bound`).
    bound: Option<engine::BoundWrite>,
}

/// `dry_run`, keeping a plain insert's binding for the commit (`engine::BoundWrite`).
fn dry_run_bound(
    engine: &engine::Engine,
    command: &engine::Command,
) -> (engine::Outcome, Option<engine::BoundWrite>) {
    match command {
        engine::Command::Guarded { catalog, command } if *catalog == engine.catalog_digest() => {
            dry_run_bound(engine, command)
        }
        engine::Command::Execute(operation) => {
            let (answer, bound) = engine.dry_run_bound(operation);
            (engine::Outcome::Executed(answer), bound)
        }
        engine::Command::Batch(operations) if operations.len() == 1 => {
            let (answer, bound) = engine.dry_run_bound(&operations[0]);
            (engine::Outcome::Batch(vec![answer]), bound)
        }
        command => (dry_run(engine, command), None),
    }
}

/// What `engine.execute_command(command)` does, for the command whose vote bound `bound`
/// (`dry_run_bound`), without binding again; None if the binding no longer applies (the
/// caller executes the command).
fn execute_bound(
    engine: &mut engine::Engine,
    command: &engine::Command,
    bound: &engine::BoundWrite,
) -> Option<engine::Outcome> {
    match command {
        engine::Command::Guarded { catalog, command } if *catalog == engine.catalog_digest() => {
            execute_bound(engine, command, bound)
        }
        engine::Command::Execute(operation) => engine
            .execute_bound(operation, bound)
            .map(engine::Outcome::Executed),
        engine::Command::Batch(operations) if operations.len() == 1 => engine
            .execute_bound(&operations[0], bound)
            .map(|answer| engine::Outcome::Batch(vec![answer])),
        _ => None,
    }
}

/// What running `command` would answer, nothing written (`Engine::dry_run`).
fn dry_run(engine: &engine::Engine, command: &engine::Command) -> engine::Outcome {
    match command {
        engine::Command::Guarded { catalog, command } => {
            if *catalog != engine.catalog_digest() {
                return engine::Outcome::Error(engine::EngineError::StaleCatalog);
            }
            dry_run(engine, command)
        }
        engine::Command::Execute(operation) => {
            let mut results = engine.dry_run(std::slice::from_ref(operation));
            engine::Outcome::Executed(results.remove(0))
        }
        engine::Command::Batch(operations) => engine::Outcome::Batch(engine.dry_run(operations)),
        engine::Command::Explain(operation) => {
            engine::Outcome::Explained(engine.explain(operation))
        }
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
        self.cycles.count(run.len());
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

/// Whether a store operation is an engine command `Store::execute_shares` runs in a shared
/// engine batch with its neighbours: an autocommit statement (one operation or a batch of
/// them, under any catalog guards) with no DDL, not on the table `kv`, within the engine's
/// batch bound. Bytes that do not decode are not.
pub fn shares_a_cycle(operation: &[u8]) -> bool {
    command_of(operation).is_some_and(|command| shares_cycle(&command))
}

fn shares_cycle(command: &engine::Command) -> bool {
    match command {
        engine::Command::Guarded { command, .. } => shares_cycle(command),
        engine::Command::Execute(_) | engine::Command::Batch(_) => {
            !touches_kv(command)
                && !has_ddl(command)
                && batch_len(command) <= engine::BATCH_OPERATIONS_MAX
        }
        engine::Command::Explain(_) => false,
    }
}

/// The command under its catalog guards if every guard matches `digest` (as
/// `Engine::execute_command` checks them, outermost first), `None` if one does not.
fn unguarded(command: engine::Command, digest: u64) -> Option<engine::Command> {
    match command {
        engine::Command::Guarded { catalog, command } if catalog == digest => {
            unguarded(*command, digest)
        }
        engine::Command::Guarded { .. } => None,
        command => Some(command),
    }
}

/// Whether a store operation is a SQL command with DDL in it.
pub fn is_ddl_operation(operation: &[u8]) -> bool {
    let mut command = command_of(operation);
    while let Some(engine::Command::Guarded { command: inner, .. }) = command {
        command = Some(*inner);
    }
    match command {
        Some(engine::Command::Execute(operation)) => operation.is_ddl(),
        Some(engine::Command::Batch(operations)) => {
            operations.iter().any(engine::Operation::is_ddl)
        }
        _ => false,
    }
}

/// Whether every catalog guard around `command` names the catalog `digest`.
fn guards_match(command: &engine::Command, digest: u64) -> bool {
    match command {
        engine::Command::Guarded { catalog, command } => {
            *catalog == digest && guards_match(command, digest)
        }
        _ => true,
    }
}

fn has_ddl(command: &engine::Command) -> bool {
    operations_of(command).iter().any(engine::Operation::is_ddl)
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
            Some((&TAG_SQL, rest)) => self.apply_sql(rest),
            Some((&TAG_CATALOG, [])) => encode_catalog(&self.engine),
            // One partition: every key is held here.
            Some((&TAG_PREPARE | &TAG_DECIDE, _)) => self.execute_share(operation, |_| true),
            _ => malformed(),
        }
    }

    fn query(&self, operation: &[u8]) -> Vec<u8> {
        match operation.split_first() {
            Some((&TAG_KV, rest)) => self.kv.query(rest),
            Some((&TAG_SQL, rest)) => self.query_sql(rest),
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
                ) && !touches_kv(command)
                    && batch_len(command) <= engine::BATCH_OPERATIONS_MAX
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
                            if command.is_read() && !touches_kv(&command) =>
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
            prepared: self.prepared.clone(),
            transactions: self.transactions.clone(),
        };
        wire::bytes::to_vec_sized(&snapshot)
    }

    /// A copy serialised later, off the replica's loop: the key-value map is shared
    /// (copy-on-write), the tables are copied now (`docs/internals/vr.md`, "Checkpoints off
    /// the loop").
    fn snapshot_source(&self) -> SnapshotSource {
        let copy = self.clone();
        SnapshotSource::new(move || copy.snapshot())
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
        self.prepared = snapshot.prepared;
        self.transactions = snapshot.transactions;
        self.answered.clear();
        self.parked_now = None;
        self.prepared_shares.clear();
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
            // SQL on the built-in table `kv` may touch any RESP key.
            Some((&TAG_SQL, rest)) => match engine::Command::decode(rest) {
                Ok(command) if !touches_kv(&command) => Some(vec![vec![TAG_SQL]]),
                _ => None,
            },
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

    /// Found by the fuzz target `store_apply` (docs/bench/fuzz.md): a catalog answer holding a
    /// schema with no column and no primary key panicked the gateway decoding it (an index out
    /// of bounds in `sql::TableOptions::defaults`) instead of being refused.
    #[test]
    fn a_catalog_answer_with_an_invalid_schema_is_refused_not_a_panic() {
        let answer: &[u8] = &[1, 1, 1, 0, 0, 0, 0, 0, 0, 0];
        assert!(decode_catalog(answer).is_none());
        let mut store = Store::new();
        let valid = store.apply(&catalog_operation());
        let (_, catalog) = decode_catalog(&valid).expect("a replica's catalog decodes");
        assert!(sql::Catalog::table(&catalog, KV_TABLE).is_some());
    }

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
        assert_eq!(
            catalog.tables.keys().collect::<Vec<_>>(),
            vec![KV_TABLE, "t"],
            "the built-in table kv and the created one"
        );
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

#[cfg(test)]
mod kv_table_tests {
    use super::*;
    use engine::{Assignment, Command, Operation, Outcome, Output, Predicate, Value};

    fn put(store: &mut Store, key: &str, value: &str) {
        let command = kv::Command::Put {
            key: key.as_bytes().to_vec(),
            value: value.as_bytes().to_vec(),
        };
        store.apply(&kv_operation(&command));
    }

    fn rows(bytes: &[u8]) -> Vec<Vec<Value>> {
        match Outcome::decode(bytes).unwrap() {
            Outcome::Executed(Ok(Output::Rows { rows, .. })) => rows,
            other => panic!("{other:?}"),
        }
    }

    fn bytea(text: &str) -> Value {
        Value::Bytea(text.as_bytes().to_vec())
    }

    fn select_all() -> Vec<u8> {
        sql_operation(&Command::Execute(Operation::Select {
            table: KV_TABLE.into(),
            columns: Vec::new(),
            predicate: None,
            limit: None,
        }))
    }

    #[test]
    fn sql_reads_and_writes_the_resp_namespace_as_the_table_kv() {
        let mut store = Store::new();
        put(&mut store, "a", "1");
        put(&mut store, "b", "2");
        let expected = vec![vec![bytea("a"), bytea("1")], vec![bytea("b"), bytea("2")]];
        assert_eq!(rows(&store.query(&select_all())), expected);
        assert_eq!(rows(&store.apply(&select_all())), expected);

        // An UPDATE with a non-key predicate, an INSERT and a DELETE through SQL…
        let update = sql_operation(&Command::Execute(Operation::Update {
            table: KV_TABLE.into(),
            assignments: vec![Assignment {
                column: "value".into(),
                value: bytea("20"),
            }],
            predicate: Some(Predicate::equal("value", bytea("2"))),
        }));
        store.apply(&update);
        let insert = sql_operation(&Command::Execute(Operation::Insert {
            table: KV_TABLE.into(),
            columns: Vec::new(),
            rows: vec![vec![bytea("c"), bytea("3")]],
            on_conflict: engine::OnConflict::Error,
        }));
        store.apply(&insert);
        let delete = sql_operation(&Command::Execute(Operation::Delete {
            table: KV_TABLE.into(),
            predicate: Some(Predicate::equal("key", bytea("a"))),
        }));
        store.apply(&delete);
        // … are what RESP reads.
        assert_eq!(store.kv.get(b"a"), None);
        assert_eq!(store.kv.get(b"b"), Some(&b"20".to_vec()));
        assert_eq!(store.kv.get(b"c"), Some(&b"3".to_vec()));
        // Constraints hold: a NULL value or a duplicate key changes nothing.
        let duplicate = sql_operation(&Command::Execute(Operation::Insert {
            table: KV_TABLE.into(),
            columns: Vec::new(),
            rows: vec![vec![bytea("c"), Value::Null]],
            on_conflict: engine::OnConflict::Error,
        }));
        assert!(matches!(
            Outcome::decode(&store.apply(&duplicate)).unwrap(),
            Outcome::Executed(Err(_))
        ));
        assert_eq!(store.kv.len(), 2);

        // In a log entry's batch the kv statement runs alone at its place.
        let entry = [
            kv_operation(&kv::Command::Put {
                key: b"d".to_vec(),
                value: b"4".to_vec(),
            }),
            select_all(),
            delete,
        ];
        let borrowed: Vec<&[u8]> = entry.iter().map(Vec::as_slice).collect();
        let results = store.apply_batch(&borrowed);
        assert_eq!(rows(&results[1]).len(), 3);
        let reads = store.query_batch(&[select_all().as_slice(), catalog_operation().as_slice()]);
        assert_eq!(rows(&reads[0]).len(), 3);
        let (_, catalog) = decode_catalog(&reads[1]).unwrap();
        assert!(catalog.tables.contains_key(KV_TABLE));

        // Skyros's read check: SQL on kv may touch any key.
        assert_eq!(store.keys(&select_all()), None);
    }

    /// The table shows the strings; a SQL write leaves hashes (and the other types) alone and
    /// keeps the expiry of a string whose value it did not change.
    #[test]
    fn sql_on_the_kv_table_sees_strings_and_leaves_other_types_alone() {
        let mut store = Store::new();
        put(&mut store, "a", "1");
        put(&mut store, "b", "2");
        let hset = kv::Command::Hash {
            key: b"h".to_vec(),
            operation: kv::HashOperation::Set {
                pairs: vec![(b"f".to_vec(), b"v".to_vec())],
            },
        };
        store.apply(&kv_operation(&hset));
        let expire = kv::Command::Expire {
            key: b"b".to_vec(),
            at: kv::ExpireTime::AtMs(5_000),
            condition: kv::ExpireCondition::Always,
            command: "pexpireat".into(),
        }
        .stamped(1_000);
        store.apply(&kv_operation(&expire));
        assert_eq!(
            rows(&store.query(&select_all())),
            vec![vec![bytea("a"), bytea("1")], vec![bytea("b"), bytea("2")]]
        );
        let update = sql_operation(&Command::Execute(Operation::Update {
            table: KV_TABLE.into(),
            assignments: vec![Assignment {
                column: "value".into(),
                value: bytea("10"),
            }],
            predicate: Some(Predicate::equal("key", bytea("a"))),
        }));
        store.apply(&update);
        assert_eq!(store.kv.get(b"a"), Some(&b"10".to_vec()));
        assert_eq!(store.kv.entry(b"b").unwrap().expires_at_ms, Some(5_000));
        let hash = store.kv.entry(b"h").expect("the hash is still there");
        assert_eq!(hash.value.type_name(), "hash");
        assert_eq!(store.kv.len(), 3);
    }

    #[test]
    fn the_kv_table_cannot_be_created_dropped_indexed_or_written_by_a_query() {
        let mut store = Store::new();
        put(&mut store, "k", "v");
        for operation in [
            Operation::CreateTable {
                schema: kv_table_schema(),
            },
            Operation::DropTable {
                name: KV_TABLE.into(),
                if_exists: false,
            },
            Operation::CreateIndex {
                name: "kv_value".into(),
                table: KV_TABLE.into(),
                column: "value".into(),
            },
        ] {
            let outcome =
                Outcome::decode(&store.apply(&sql_operation(&Command::Execute(operation.clone()))))
                    .unwrap();
            assert!(
                matches!(outcome, Outcome::Error(_)),
                "{operation:?}: {outcome:?}"
            );
        }
        let delete = sql_operation(&Command::Execute(Operation::Delete {
            table: KV_TABLE.into(),
            predicate: None,
        }));
        assert_eq!(
            Outcome::decode(&store.query(&delete)).unwrap(),
            Outcome::Error(engine::EngineError::ReadOnly)
        );
        assert_eq!(store.kv.get(b"k"), Some(&b"v".to_vec()));
        assert!(store.engine.table(KV_TABLE).is_none());
    }
}

#[cfg(test)]
mod read_share_tests {
    use super::*;
    use engine::{Assignment, Command, Operation, Predicate, Value};

    fn store_with_a_row() -> Store {
        let schema = engine::TableSchema::new(
            "t",
            vec![
                engine::ColumnDef::new("id", engine::DataType::BigInt).not_null(),
                engine::ColumnDef::new("v", engine::DataType::BigInt),
            ],
            &["id"],
        )
        .unwrap();
        let mut store = Store::new();
        let every = |_: &[u8]| true;
        store.execute_share(
            &sql_operation(&Command::Execute(Operation::CreateTable { schema })),
            every,
        );
        store.execute_share(
            &sql_operation(&Command::Execute(Operation::Insert {
                table: "t".into(),
                columns: Vec::new(),
                rows: vec![vec![Value::BigInt(1), Value::BigInt(10)]],
                on_conflict: engine::OnConflict::Error,
            })),
            every,
        );
        store
    }

    fn guarded(catalog: u64, operation: Operation) -> Vec<u8> {
        sql_operation(&Command::Guarded {
            catalog,
            command: Box::new(Command::Batch(vec![operation])),
        })
    }

    fn select() -> Operation {
        Operation::Select {
            table: "t".into(),
            columns: Vec::new(),
            predicate: Some(Predicate::equal("id", Value::BigInt(1))),
            limit: None,
        }
    }

    /// A basic read answers what the read would answer through the log, changes nothing, and
    /// refuses writes, stale catalog guards and tables an open transaction writes in place.
    #[test]
    fn a_basic_read_answers_as_the_log_would_and_refuses_stale_plans_writes_and_open_writers() {
        let mut store = store_with_a_row();
        let every = |_: &[u8]| true;
        let digest = store.engine.catalog_digest();
        let read = guarded(digest, select());
        let answered = store
            .read_share(&read, every)
            .expect("a plain read is served");
        assert_eq!(answered, store.clone().execute_share(&read, every));
        assert!(store
            .read_share(&guarded(digest ^ 1, select()), every)
            .is_none());
        let update = guarded(
            digest,
            Operation::Update {
                table: "t".into(),
                assignments: vec![Assignment {
                    column: "v".into(),
                    value: Value::BigInt(11),
                }],
                predicate: Some(Predicate::equal("id", Value::BigInt(1))),
            },
        );
        assert!(store.read_share(&update, every).is_none());
        assert!(store
            .read_share(
                &kv_operation(&kv::Command::Get { key: b"k".to_vec() }),
                every
            )
            .is_none());
        assert!(store.read_share(b"\xff garbage", every).is_none());
        // A transaction with an intention to write the table but no row of it: the read of
        // row 1 is served (`Transactions::pinned_blocker`: nothing it reads is held).
        let lock = |locks: Vec<(transactions::Resource, transactions::Mode)>| {
            lock_operation(&transactions::LockRequest {
                transaction: 7,
                begin_ms: 0,
                now_ms: 0,
                locks,
                nowait: false,
            })
        };
        let intention = (("t".to_string(), None), transactions::Mode::IntentExclusive);
        store.execute_share(&lock(vec![intention.clone()]), every);
        assert_eq!(store.read_share(&read, every), Some(answered.clone()));
        // Holding row 1 in a writing mode (its values may be written in place): refused; once
        // it ends, served again.
        let schema = store.engine.table("t").unwrap().schema.clone();
        let row = rows::key_of(&schema, &Value::BigInt(1));
        store.execute_share(
            &lock(vec![
                intention,
                (("t".to_string(), Some(row)), transactions::Mode::Exclusive),
            ]),
            every,
        );
        assert!(store.read_share(&read, every).is_none());
        store.execute_share(&end_operation(7, false, true), every);
        assert_eq!(store.read_share(&read, every), Some(answered));
    }
}
