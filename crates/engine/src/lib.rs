//! # engine — the table engine a partition replicates
//!
//! A deterministic, pure, main-memory relational table engine: typed tables with a primary key
//! and non-unique secondary indexes, predicates with SQL three-valued logic, and Crescando-style
//! **shared scans** (Unterbrunner et al., Crescando/RB, §3.1, §4.2–4.3) that execute a whole
//! batch of queued selects, updates and deletes in one pass over a table. A VR group replicates
//! it through `vr::StateMachine` (`state_machine.rs`): `Command`s and `Outcome`s as postcard.
//!
//! ## Code map
//!
//! | module | what it is |
//! |---|---|
//! | `value` | `DataType`, `Value` (a total order for indexing), coercion of constants, text parsing (22P02) |
//! | `schema` | `ColumnDef`, `TableSchema`, NOT NULL / VARCHAR checks |
//! | `error` | `EngineError`, one SQLSTATE code per variant |
//! | `predicate` | `Predicate` (by name, postfix on the wire), `BoundPredicate` (by position), `Truth`, LIKE |
//! | `expression` | `Expression` for computed SET clauses (postfix on the wire), and the value semantics (arithmetic, comparison, casts, functions) the SQL gateway shares |
//! | `operation` | `Operation`, `Output`, binding to `ScanOperation` |
//! | `table` | `Table`, `SecondaryIndex`, inserts, the row-level step all executors share |
//! | `query_index` | the per-cycle index over predicates: equality hash, interval regions, residual list |
//! | `planner` | `AccessPath`: primary key / secondary index lookup or range, else shared scan; EXPLAIN text |
//! | `shared_scan` | one scan cycle: the pass over a table, per-row candidates in batch order, inserts riding along |
//! | `engine` | `Engine`: `execute_batch` (runs cut into cycles), `execute_sequentially` (the reference), `read`, `explain` |
//! | `state_machine` | `Command`, `Outcome`, snapshots, `impl vr::StateMachine for Engine` |
//!
//! ## Invariants
//!
//! - **Pure and deterministic.** No I/O, clock, thread or OS randomness; the only hash maps are
//!   the query index's lookup tables (fixed-key hasher, never iterated). Tables are a
//!   `BTreeMap`; rows and index entries are persistent B-trees (`imbl::OrdMap`/`OrdSet`);
//!   scans and results are in primary key order.
//! - **A clone is a snapshot.** Tables are `Arc<Table>`, copied on the first write while shared
//!   (`Engine::snapshot_copy`): a clone costs O(tables) and keeps the state of its moment;
//!   the copy of a table is O(1) (its rows and entries are persistent maps) and a write after
//!   it copies O(log n); reads never copy (`docs/internals/scans.md`).
//! - **A batch is its operations executed one after another.** `execute_batch(ops)` returns the
//!   same results and leaves the same tables and indexes as `execute_sequentially(ops)`, the naive
//!   reference. `property_tests.rs` checks this on 4,600 seeded random batches (up to 600
//!   operations; a third of the seeds give a table a CHECK constraint) of mixed selects,
//!   aggregates, updates, deletes, inserts and errors, and checks
//!   that three deliberately broken scans (the canaries: skip the residual list; do not re-probe
//!   after an update; apply riding inserts before the scan operations) are caught (by 2,879, 67
//!   and 237 of 4,000 seeds).
//! - **Statements are atomic.** Every check that can fail (types, NOT NULL, VARCHAR length,
//!   key columns, unique keys, CHECK constraints) happens before the first write of a
//!   statement: bind time for updates (their values are constants; on a table with CHECK
//!   constraints a pass over the rows they change, and they never share a cycle), a planning
//!   pass for inserts.
//! - **Every row satisfies its schema and every index has exactly one entry per row**
//!   (`Engine::check_invariants`, asserted by the tests after every batch).
//! - **Untrusted bytes never panic.** Commands, predicates and snapshots are decoded into errors;
//!   predicates travel as postcard postfix node lists rebuilt without recursion and refused beyond
//!   `PREDICATE_DEPTH_MAX` nesting, so decoding cannot overflow the stack. Explicit limits:
//!   `INSERT_ROWS_MAX`, `BATCH_OPERATIONS_MAX`, `PREDICATE_NODES_MAX`, `PREDICATE_CONSTANTS_MAX`,
//!   `LIKE_PATTERN_BYTES_MAX`, `AGGREGATES_MAX`,
//!   `VALUE_BYTES_MAX`, `COLUMNS_MAX`, `NAME_BYTES_MAX`, `LOOKUP_KEYS_MAX`, `RANGE_ENTRIES_MAX`.
//! - **Wire enums never renumber.** `Command`, `Outcome`, `Operation`, `Output`, `Value`,
//!   `DataType`, `EngineError`, … : append new variants at the end.
//!
//! ## Mapping to Crescando
//!
//! | Crescando | here |
//! |---|---|
//! | operations queued at a scan thread | the slice given to `Engine::execute_batch` (delivery order = slice order) |
//! | one scan cycle, shared cursor | `shared_scan::shared_scan`: one pass over `Table::rows` per table per run |
//! | predicate index over the queued queries and updates (§3.1) | `query_index::QueryIndex`, rebuilt every cycle |
//! | hash index over equality constants of a common attribute | per-column map constant → operations; an operation is filed under its equality column that the most operations of the cycle share |
//! | range predicates | per column, sorted distinct endpoints cutting the domain into regions, each listing the covering operations |
//! | unindexed predicates | the residual list, a candidate for every row |
//! | index join of table and query "table" | per row: probe, then evaluate each candidate's full predicate |
//! | updates and deletes share the cursor, executed in delivery order | per row, candidates run in batch order; after an update the row is probed again for the later operations |
//! | inserts queued with the scan | inserts with ON CONFLICT DO NOTHING / DO UPDATE: their rows are merged into the pass by key and applied at their batch position |
//!
//! ## Deviations from the paper, and why
//!
//! - **Single-threaded, one cursor per table.** Crescando partitions a table across scan threads
//!   (one per core) with a "clock scan" of read and write cursors. A replicated state machine must
//!   be deterministic and the runtime gives a partition one thread; parallelism belongs across
//!   partitions. The results are the same as Crescando's for a batch.
//! - **Batches are cut by what cannot share the cursor.** DDL, plain inserts and operations the
//!   planner sends to an index run alone at their batch position; each maximal run of the rest
//!   becomes one cycle per table (operations on different tables commute). A plain INSERT fails
//!   as a whole when any one of its keys conflicts, which a single pass in key order cannot know
//!   before it has already applied the statement's smaller keys; inserts that cannot fail on a
//!   conflict (DO NOTHING, DO UPDATE; 21000 is checked before the cycle) have per-key effects
//!   and do ride the cycle. A run holding only inserts for a table executes them alone rather
//!   than scanning every row for them.
//! - **Scan-only is not enforced.** Crescando deliberately has no data indexes. Tessera also wants
//!   key lookups to be cheap, so a planner sends statements with a key or indexed-column conjunct
//!   to a primary key or secondary index path (`planner.rs`), and only the rest to the shared scan.
//! - **Results are materialised, not pushed.** Each operation's rows are collected in key order
//!   and returned with the batch's results, because a state machine returns one result per
//!   command; streaming is the runtime's business.
//! - **Index choice per cycle, not adaptive across cycles.** The query index is rebuilt from
//!   scratch every cycle, as in the paper; the choice of attribute is a count over the cycle.
//! - **Primary key columns cannot be updated** (0A000): a row never moves during a cycle.
//!
//! ## Measured
//!
//! `cargo run -p engine --release --example scan_speed`: the current numbers and their history
//! are in `docs/bench/crescando.md` ("Scan speed per core"). Read cycles stream the column image
//! (`rows`), probing one column per row and materialising only matching rows; write cycles
//! pass over the row map.
#![forbid(unsafe_code)]

pub mod engine;
#[cfg(test)]
mod engine_tests;
pub mod error;
pub mod expression;
pub mod interval;
pub mod jsonb;
pub mod numeric;
pub mod operation;
pub mod planner;
pub mod predicate;
#[cfg(test)]
mod property_tests;
pub mod query_index;
pub mod rows;
pub mod schema;
pub mod shared_scan;
pub mod state_machine;
pub mod table;
pub mod undo;
pub mod value;

pub use engine::{BoundWrite, Engine};
pub use error::{Condition, EngineError};
pub use expression::Expression;
pub use operation::{
    Aggregate, AggregateFunction, Assignment, ComputedAssignment, Group, OnConflict, Operation,
    OperationResult, Output, Partial, TableChange, BATCH_OPERATIONS_MAX, INSERT_ROWS_MAX,
    RESULT_BYTES_MAX,
};
pub use predicate::{CompareOp, Predicate};
pub use schema::{ColumnDef, ColumnDefault, TableSchema};
pub use state_machine::{Command, Outcome};
pub use value::{DataType, Value};
