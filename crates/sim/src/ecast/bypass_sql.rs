//! SQL transactions in the bypass mode (`--sql-transactions`, issue 21 item 8): the partition
//! groups host the runtime's partition data (`cluster::partition_store::PartitionStore` over
//! `store::Store`, SQL shares, `store::transactions`' locks, undo and ends) and every slot of
//! every gateway runs interactive transactions through the pure transaction driver
//! (`cluster::transaction_driver`): table locks at every partition first (one E-Cast message),
//! each statement where its row lives (the bypass: one group's log) or everywhere (an audit,
//! pinned to the configuration its arcs came from), waits and deaths (local deadlocks, the
//! execution-order rule over global transactions) as the partitions answer, `Globalize` when a
//! transaction reaches a second row's partition, and COMMIT or ROLLBACK as one message to
//! every partition. The faults are
//! the mode's: message loss and duplication, router and member crashes and pauses (false
//! suspicions), Rubberband moves of rows and their open transactions between groups.
//!
//! The workload, over one table `lists(k BIGINT PRIMARY KEY, bal BIGINT, v TEXT)` of
//! `accounts` rows (balance 100, empty list):
//!
//! - list-append: reads of rows' lists and appends of unique values (read, then write the
//!   list with the value added), judged by `lincheck::elle` (G0, G1a, G1b, G1c, G-single, G2,
//!   real-time edges, lost appends) over the committed transactions and the final lists;
//! - transfers: read two balances, write both (the amount moves between rows usually on
//!   different partitions);
//! - audits: read every row (every partition, one message), whose balances must sum to the
//!   total, and whose lists are Elle reads;
//! - with `--sql-autocommit`, statements outside transactions over several partitions, sent
//!   as the runtime's gateway task sends every such write, in two phases (`store::prepared`:
//!   a prepare whose refusal by any partition aborts it everywhere, then the decision), and
//!   sent again by `transaction_driver::Autocommit`'s rules: transfers (one statement moving
//!   an amount between two rows, `bal = bal - a` and `bal = bal + a`: a hold exclusive of
//!   other writes) and non-key updates matching no row (`SET bal = 0 WHERE bal < 0`: a shared
//!   hold), beside transactions whose intention locks lie only where their rows are, and
//!   appends to one row's list (`v = v || ',x'`, one partition, one phase: kept out only by
//!   transactions holding that row's list, `store::transactions::Transactions::pinned_blocker`),
//!   each a committed transaction of one append in Elle's history. A transfer run twice at one
//!   partition, or at one partition only, moves the total; an append written under a
//!   transaction's lock is lost at that transaction's end.
//!
//! A cycle of transactions each waiting for the next (the holder each one's last refusal
//! named, unchanged, and each wait confirmed by a refusal of a message sent `DEADLOCK_TICKS`
//! after the cycle formed) is a deadlock no partition detected: a finding.
//!
//! A transaction whose COMMIT's fate is unknown (its message failed in transit) counts as
//! committed if any value it appended is in the final lists, else as aborted; an append seen
//! in part only is a lost committed append. At the end the final state is read from each
//! row's group in the final configuration, with transactions still open (their gateway never
//! learnt their end) rolled back on a copy, as the next waiter's abort would.

use super::{Answer, BypassCanary, BypassSimulation};
use cluster::payload::{self, SqlPayload, SqlTarget};
use cluster::transaction_driver::{
    self, Action, Autocommit, DriverSettings, Hint, Kind, Route, Send, StatementOptions,
    Transaction,
};
use ecast::{Completion, GatewayCommand, GatewayInput};
use engine::{
    Assignment, ColumnDef, Command, DataType, Operation, Outcome, Output, Predicate, TableSchema,
    Value,
};
use lincheck::elle::{Committed, Micro};
use placement::{KeyMapping, PositionSet};
use std::collections::BTreeMap;
use stdx::Prng;
use store::transactions::Owner;

pub(super) const TABLE: &str = "lists";
pub(super) const BALANCE: i64 = 100;
/// The SQL mode's gateway command ids (above the bypass workload's history indexes).
pub(super) const SQL_ID_BASE: u64 = 1 << 48;
/// Per tick and running transaction while faults are on: its session dies.
const SESSION_CRASH_PER_10000: u64 = 3;
/// Per tick and gateway while faults are on: its process crashes (every session of it dies at
/// once) and comes back as a new incarnation, a new owner of the transactions it starts.
/// Drawn from a stream of its own (`SqlState::crashes`), so runs without a crash keep their
/// traces.
const GATEWAY_CRASH_PER: u64 = 6_000;
/// The failure detector suspects a crashed gateway's process this many ticks after the
/// crash: one message to every partition (`store::abort_owned_operation`) aborts every
/// transaction the process owned, at that message's point of the order.
const SUSPECT_AFTER_TICKS: u64 = 20;
/// Of crashed gateway processes, the percentage that restart before the failure detector
/// would suspect them (the runtime's link reconnects within `suspect_after_ms`): no suspicion
/// follows, and the new incarnation's first table lock aborts the old one's transactions
/// (`store::transactions::Incarnations`). The others stay down for `SUSPECT_AFTER_TICKS`
/// plus up to `RESTART_AFTER_TICKS_MAX` and are suspected `SUSPECT_AFTER_TICKS` after the
/// crash, so their new incarnation may begin transactions before the suspicion is answered
/// everywhere (a suspicion of a live incarnation: its next table lock is refused, and it takes
/// another).
const QUICK_RESTART_PERCENT: u64 = 50;
const RESTART_AFTER_TICKS_MAX: u64 = 600;
/// Of the suspected ones, the percentage back at once all the same (the suspicion, already
/// decided, meets a live new incarnation: its transactions are aborted and its next table
/// lock is refused, and it takes another incarnation).
const BACK_BEFORE_SUSPICION_PERCENT: u64 = 25;
/// A message refused for a configuration change is planned again at most this often.
const PLANS_MAX: u32 = 8;
/// A cycle of waits that lasts this long is a deadlock: local cycles die at once and the
/// execution-order rule forbids the others, while a holder idle this long is not yet judged
/// abandoned (`abandoned_after_ms`, 300).
const DEADLOCK_TICKS: u64 = 150;

/// The driver's timing in ticks: patience and abandonment far below the runtime's seconds, so
/// that runs of a few thousand ticks meet them.
fn driver_settings(owner: Owner) -> DriverSettings {
    DriverSettings {
        // The gateway's process and incarnation: its table locks are owned, so that a
        // suspicion of the process, or the process's next incarnation, aborts its
        // transactions.
        owner: owner.process,
        incarnation: owner.incarnation,
        patience_ms: 1_500,
        abandoned_after_ms: 300,
        pause_first_ms: 2,
        pause_max_ms: 50,
        // Hints (`sql_hint`): the end of a transaction wakes the statements waiting for it.
        hints: true,
        woken_pause_max_ms: 100,
        // Statements await their grants at the partition; one unanswered this long is sent
        // again without (`Transaction::overdue`).
        grant_wait_ms: 50,
        // Statements outside transactions: held out by a two-phase statement for 300 ticks,
        // they abort it (its gateway may have crashed between its phases), and so do
        // transactions' statements.
        autocommit_busy_for_ms: 1_500,
        autocommit_pause_first_ms: 2,
        autocommit_pause_max_ms: 50,
        autocommit_decide_after_ms: 300,
        ..DriverSettings::default()
    }
}

/// Of the slots' starts with `--sql-autocommit`, the percentage that run a statement outside
/// transactions instead of a transaction; of those, the percentages that are transfers and
/// appends (the others are non-key updates matching no row).
const AUTOCOMMIT_PERCENT: u64 = 15;
const AUTOCOMMIT_TRANSFER_PERCENT: u64 = 40;
const AUTOCOMMIT_APPEND_PERCENT: u64 = 40;

/// A hint of a transaction's end reaches the other gateways within this many ticks, or is
/// lost (one in `HINT_LOST_PER`): a lost one costs a waiter one pause.
const HINT_DELAY_MAX: u64 = 20;
const HINT_LOST_PER: u64 = 10;

pub(super) fn schema() -> TableSchema {
    TableSchema::new(
        TABLE,
        vec![
            ColumnDef::new("k", DataType::BigInt).not_null(),
            ColumnDef::new("bal", DataType::BigInt).not_null(),
            ColumnDef::new("v", DataType::Text { length_max: None }).not_null(),
        ],
        &["k"],
    )
    .expect("the schema is valid")
}

pub(super) fn row_key(k: i64) -> Vec<u8> {
    store::rows::placement_key(TABLE, &Value::BigInt(k))
}

/// The table, created at a partition's start (every partition holds the catalog), and the
/// rows it holds: store operations for `PartitionData::execute`.
pub(super) fn initial_operations(accounts: u64) -> Vec<Vec<u8>> {
    let create = SqlPayload {
        operation: store::sql_operation(&Command::Execute(Operation::CreateTable {
            schema: schema(),
        })),
        target: SqlTarget::Arcs(vec![PositionSet::whole()]),
    };
    let keys: Vec<Vec<u8>> = (0..accounts as i64).map(row_key).collect();
    let insert = SqlPayload {
        operation: store::sql_operation(&Command::Execute(Operation::Insert {
            table: TABLE.into(),
            columns: vec![],
            rows: (0..accounts as i64)
                .map(|k| {
                    vec![
                        Value::BigInt(k),
                        Value::BigInt(BALANCE),
                        Value::Text(String::new()),
                    ]
                })
                .collect(),
            on_conflict: engine::OnConflict::Error,
        })),
        target: SqlTarget::Keys(keys),
    };
    vec![create.encode(), insert.encode()]
}

#[derive(Clone, Debug)]
enum Step {
    /// Read one row's list (`v`, an append's read) or balance (`bal`, a transfer's): each
    /// names only its column, so that an append and a transfer of one row hold different
    /// column locks and run side by side (an abort must then undo only its own column).
    Read(i64, Column),
    Append(i64, u64),
    /// Write the balance read, plus the delta.
    Write(i64, i64),
    /// Add the delta to the balance without reading it (`bal = bal + delta`): a blind
    /// increment, under an increment lock (`store::transactions::Mode::Increment`) that other
    /// increments of the row share, except under a savepoint.
    Add(i64, i64),
    ReadAll,
    /// ROLLBACK after the writes: every write undone, no one else's.
    Rollback,
    /// DELETE the row (whole-row lock), then `Insert` puts it back as the transaction knows
    /// it (its balance after its writes, its list as read): nothing changes if all goes well,
    /// and an abort must restore the whole row, other transactions' committed columns
    /// included.
    Delete(i64),
    Insert(i64),
    /// SAVEPOINT (id 1): nothing is sent; the statements after it carry it.
    Savepoint,
    /// ROLLBACK TO the savepoint: one message to every partition, each writing back what the
    /// transaction changed there since (its column only, under column locks); the
    /// transaction goes on as it was at the savepoint.
    RollbackTo,
    /// The slot's statement outside transactions (`Run::auto`), its only step.
    Auto,
}

/// The column a `Step::Read` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Column {
    List,
    Balance,
    /// Both (a row about to be rewritten).
    Both,
}

/// Where a running transaction is.
#[derive(Clone, Debug)]
enum Waiting {
    /// For the answer of message `id`.
    Message(u64),
    /// Until this tick, then the driver's message again (a lock wait).
    Pause(u64),
}

#[derive(Clone, Debug)]
struct Run {
    txn: Transaction,
    script: Vec<Step>,
    at: usize,
    waiting: Waiting,
    /// Sending COMMIT.
    committing: bool,
    began: u64,
    micro: Vec<Micro>,
    lists: BTreeMap<i64, Vec<u64>>,
    balances: BTreeMap<i64, i64>,
    /// Each audit's balance total.
    audits: Vec<(i64, usize)>,
    /// Unlocked-reads canary: the plain read being sent.
    plain: Option<Send>,
    /// The holder its last refusal named, since when it waits for that one, and when a
    /// refusal last named it (the wait confirmed by the partitions, not only in flight): the
    /// ticks at which the refused messages were first sent, since a partition judged each at
    /// or after that tick, and its answer may arrive long after (lost, recalled).
    blocked: Option<(u64, u64, u64)>,
    /// Its table locks were granted at every partition (a lock request answered without a
    /// refusal): every partition has recorded its owner.
    locked: bool,
    /// The gateway incarnation that owns it.
    incarnation: u64,
    /// The open savepoint (0: none) and what the transaction knew there: its history's
    /// length, its lists and balances (restored by ROLLBACK TO).
    savepoint: u32,
    saved: Option<Saved>,
    /// A statement outside transactions (`Step::Auto`) instead of a transaction (whose
    /// `txn` then sends nothing).
    auto: Option<Auto>,
}

/// A statement outside transactions over several partitions, as the runtime's gateway task
/// runs one (`submit_sql`, `complete_sql`) under `ClusterBackend::execute_at`'s driver.
#[derive(Clone, Debug)]
struct Auto {
    command: Command,
    /// Its rows' placement keys (the one-phase canary's route); empty: every partition.
    keys: Vec<Vec<u8>>,
    driver: Autocommit,
    phase: AutoPhase,
}

#[derive(Clone, Debug)]
enum AutoPhase {
    /// Not sent yet, or to be sent again after a pause.
    New,
    /// Its prepare (every partition votes and holds the table).
    Prepare { statement: u64 },
    /// Its decision; `vote` the failing vote that aborted it.
    Decide {
        statement: u64,
        commit: bool,
        vote: Option<Outcome>,
    },
    /// The `SqlOnePhaseAutocommit` canary: one message to its rows' partitions.
    Once,
}

/// What a transaction knew at its savepoint: its history's length, its lists, its balances.
type Saved = (usize, BTreeMap<i64, Vec<u64>>, BTreeMap<i64, i64>);

impl Run {
    /// After its ROLLBACK TO: the transaction knows again what it knew at the savepoint, which
    /// it leaves, and goes on with the next step.
    fn back_to_savepoint(&mut self) {
        let (length, lists, balances) = self.saved.take().expect("a savepoint was taken");
        self.micro.truncate(length);
        self.lists = lists;
        self.balances = balances;
        self.savepoint = 0;
        self.at += 1;
    }
}

/// What a message is for.
#[derive(Clone, Debug)]
enum Purpose {
    /// A statement (or its lock request) of the slot's transaction.
    Statement,
    /// The slot's COMMIT.
    Commit,
    /// An abort nobody waits for (a ROLLBACK, an abandoned holder's, the canary's).
    Forget,
    /// The failure detector's suspicion of the crashed gateway process `owner.process` (whose
    /// incarnation `owner.incarnation` crashed): the abort of every transaction it owns, at
    /// every partition (sent again until answered).
    Suspicion { owner: Owner },
    /// The slot's ROLLBACK TO its savepoint.
    RollbackTo,
    /// A message of the slot's statement outside transactions.
    Auto,
}

#[derive(Clone, Debug)]
pub(super) struct Pending {
    gateway: usize,
    slot: usize,
    send: Send,
    target: SqlTarget,
    purpose: Purpose,
    plans: u32,
    /// The tick it was first sent.
    sent: u64,
    /// Its message once sequenced, and when to recall its answers from the partitions (a
    /// lost answer, as the key-value workload's `Recall`).
    pub(super) sequenced: Option<(ecast::Sequence, ecast::Timestamp, u64)>,
    /// The gateway incarnation of the slot's transaction when it was sent (0: none).
    incarnation: u64,
}

#[derive(Clone, Debug, Default)]
pub struct SqlStats {
    pub started: u64,
    pub committed: u64,
    pub aborted: u64,
    /// Deaths (local deadlocks, the execution-order rule) and aborts by other gateways (40001).
    pub serialization_failures: u64,
    /// Transactions that became global (their `Globalize` granted everywhere).
    pub globalized: u64,
    /// Lock waits (a message sent again after a pause).
    pub waits: u64,
    /// Abandoned holders aborted by a waiter.
    pub abandoned: u64,
    /// Lock waits whose pause a hint of the holder's end cut short.
    pub woken: u64,
    /// Transactions whose COMMIT's fate their gateway did not learn.
    pub indeterminate: u64,
    /// Statements whose message failed in transit (their transaction aborted).
    pub lost_statements: u64,
    pub audits: u64,
    pub appends: u64,
    pub transfers: u64,
    /// Writers that rolled back on purpose after their writes (`Step::Rollback`).
    pub rollbacks: u64,
    /// ROLLBACK TO a savepoint answered (`Step::RollbackTo`).
    pub rollbacks_to: u64,
    /// Rows deleted and inserted again by committed transactions (`Step::Delete`).
    pub rewrites: u64,
    /// Blind increments committed (`Step::Add`).
    pub increments: u64,
    /// Sessions that died mid-transaction (their transaction left open).
    pub session_crashes: u64,
    /// Statements that awaited their grant at the partition too long and were sent again
    /// without (`Transaction::overdue`).
    pub grants_overdue: u64,
    /// Deaths answered to an attempt `overdue` superseded, taken as the statement's answer
    /// (`Transaction::takes_superseded`).
    pub superseded_deaths: u64,
    /// Gateway processes that crashed (every session at once) and came back as a new owner.
    pub gateway_crashes: u64,
    /// Suspicions of crashed gateway processes answered by every partition.
    pub suspicions: u64,
    /// Transactions aborted by a suspicion, summed over the partitions that held them.
    pub suspicion_aborts: u64,
    /// Crashed gateway processes that restarted before their suspicion (none was sent).
    pub quick_restarts: u64,
    /// Transactions whose table locks the partitions refused as a dead incarnation's (the
    /// gateway then took a new incarnation).
    pub incarnation_refusals: u64,
    /// Statements outside transactions (`--sql-autocommit`) committed: transfers, and
    /// non-key updates matching no row.
    pub autocommits: u64,
    pub autocommit_noops: u64,
    /// Appends to one row's list outside transactions, committed.
    pub autocommit_appends: u64,
    /// Their prepares refused by a partition (a transaction's lock, a two-phase hold): aborted
    /// everywhere and sent again.
    pub autocommit_refused: u64,
    /// Two-phase statements aborted by a waiter they held out too long.
    pub autocommit_holders_aborted: u64,
}

pub(super) struct SqlState {
    /// Per gateway, per slot: the transaction running, and until when the slot thinks.
    runs: Vec<Vec<Option<Run>>>,
    idle_until: Vec<Vec<u64>>,
    pending: BTreeMap<u64, Pending>,
    next_message: u64,
    next_transaction: u64,
    next_value: u64,
    committed: Vec<Committed>,
    /// Transactions whose COMMIT's fate is unknown.
    unknown: Vec<Committed>,
    /// Committed transfers' deltas are not needed: the final total is checked.
    findings: Vec<String>,
    /// Hints of transactions' ends on their way to every gateway: (due tick, transaction).
    hints: Vec<(u64, u64)>,
    /// Per gateway: its process's current incarnation: the owner of the transactions it
    /// starts is `owner_of(gateway, incarnation)`. A new one at each crash and after a
    /// refusal as a dead incarnation (`IncarnationDead`).
    incarnations: Vec<u64>,
    /// Per gateway: the incarnation an owned table lock made current at every partition
    /// (`Transaction::announced`); while it is the current one, its transactions take their
    /// intention locks where their rows are (`DriverSettings::announced`).
    announced: Vec<u64>,
    /// The last incarnation given (incarnations grow, over every gateway).
    incarnation_last: u64,
    /// Gateway process crashes: a stream of its own.
    crashes: Prng,
    /// Suspicions due: (tick, owner, the gateway that sends it).
    suspicions: Vec<(u64, Owner, usize)>,
    /// Transactions of crashed gateways that had sent a table-lock request (granted
    /// everywhere, so that every partition recorded their owner, or on its way), by id: their
    /// owner (the incarnation that crashed).
    dead: BTreeMap<u64, Owner>,
    /// Crashed incarnations whose suspicion every partition answered, and when.
    suspected: BTreeMap<Owner, u64>,
    /// Incarnations whose table lock every partition answered without refusing the
    /// incarnation (so every partition had taken it for its process's current one by then),
    /// and when first.
    adopted: BTreeMap<Owner, u64>,
    pub(super) stats: SqlStats,
}

/// The owner (a storage process id in the runtime, never 0, and the gateway's incarnation)
/// of gateway `gateway`'s incarnation `incarnation`.
fn owner_of(gateway: usize, incarnation: u64) -> Owner {
    Owner {
        process: gateway as u64 + 1,
        incarnation,
    }
}

impl SqlState {
    pub(super) fn new(gateways: usize, slots: usize, seed: u64) -> SqlState {
        SqlState {
            incarnations: (1..=gateways as u64).collect(),
            announced: vec![0; gateways],
            incarnation_last: gateways as u64,
            crashes: Prng::new(seed ^ 0x6a7e_dead),
            suspicions: Vec::new(),
            dead: BTreeMap::new(),
            suspected: BTreeMap::new(),
            adopted: BTreeMap::new(),
            runs: vec![vec![None; slots]; gateways],
            idle_until: vec![vec![0; slots]; gateways],
            pending: BTreeMap::new(),
            next_message: SQL_ID_BASE,
            next_transaction: 1,
            next_value: 0,
            committed: Vec::new(),
            unknown: Vec::new(),
            findings: Vec::new(),
            hints: Vec::new(),
            stats: SqlStats::default(),
        }
    }

    pub(super) fn settled(&self) -> bool {
        self.pending.is_empty()
            && self.suspicions.is_empty()
            && self.runs.iter().flatten().all(Option::is_none)
    }

    /// For the liveness report: the running transactions and the messages not complete.
    pub(super) fn report(&self) -> String {
        let mut report = String::new();
        for (gateway, slots) in self.runs.iter().enumerate() {
            for (slot, run) in slots.iter().enumerate() {
                if let Some(run) = run {
                    report.push_str(&format!(
                        "sql gateway {gateway} slot {slot}: transaction {:x} began {} step {}/{} \
                         committing {} waiting {:?}; ",
                        run.txn.id,
                        run.began,
                        run.at,
                        run.script.len(),
                        run.committing,
                        run.waiting
                    ));
                }
            }
        }
        for (id, pending) in &self.pending {
            report.push_str(&format!(
                "sql message {id:x} (gateway {} slot {} {:?}, plans {}, sequenced {:?}); ",
                pending.gateway, pending.slot, pending.purpose, pending.plans, pending.sequenced
            ));
        }
        report
    }
}

/// A read of the named columns (the row's layout, `row_fields`): a read of one row takes
/// column locks (`store::transactions::column_paths`) on `bal` and `v`.
fn select(predicate: Option<Predicate>) -> Command {
    Command::Batch(vec![Operation::Select {
        table: TABLE.into(),
        columns: vec!["k".into(), "bal".into(), "v".into()],
        predicate,
        limit: None,
    }])
}

fn select_one(k: i64, column: Column) -> Command {
    let names: &[&str] = match column {
        Column::List => &["k", "v"],
        Column::Balance => &["k", "bal"],
        Column::Both => &["k", "bal", "v"],
    };
    Command::Batch(vec![Operation::Select {
        table: TABLE.into(),
        columns: names.iter().map(|name| name.to_string()).collect(),
        predicate: Some(Predicate::equal("k", Value::BigInt(k))),
        limit: None,
    }])
}

fn update(k: i64, column: &str, value: Value) -> Command {
    Command::Batch(vec![Operation::Update {
        table: TABLE.into(),
        assignments: vec![Assignment::new(column, value)],
        predicate: Some(Predicate::equal("k", Value::BigInt(k))),
    }])
}

/// `bal = bal + delta` for row `k`.
fn add(k: i64, delta: i64) -> Operation {
    Operation::UpdateComputed {
        table: TABLE.into(),
        assignments: vec![engine::ComputedAssignment::new(
            "bal",
            engine::Expression::Binary(
                engine::expression::Operator::Add,
                Box::new(engine::Expression::Column("bal".into())),
                Box::new(engine::Expression::Constant(Value::BigInt(delta))),
            ),
        )],
        predicate: Some(Predicate::equal("k", Value::BigInt(k))),
    }
}

/// Whether a partition's vote on a two-phase statement fails it (the runtime's
/// `sql::vote_failed`).
fn vote_failed(vote: &Outcome) -> bool {
    match vote {
        Outcome::Executed(result) => result.is_err(),
        Outcome::Batch(results) => results.iter().any(Result::is_err),
        Outcome::Explained(result) => result.is_err(),
        Outcome::Error(_) => true,
    }
}

fn rows_of(outcomes: &[Outcome]) -> Vec<Vec<Value>> {
    outcomes
        .iter()
        .flat_map(|outcome| match outcome {
            Outcome::Batch(results) => results
                .iter()
                .flat_map(|result| match result {
                    Ok(Output::Rows { rows, .. }) => rows.clone(),
                    _ => Vec::new(),
                })
                .collect(),
            _ => Vec::new(),
        })
        .collect()
}

fn parse_list(text: &str) -> Vec<u64> {
    text.split(',')
        .filter_map(|item| item.parse().ok())
        .collect()
}

fn render_list(list: &[u64]) -> String {
    list.iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// A row's (k, bal, list), if it has that shape.
fn row_fields(row: &[Value]) -> Option<(i64, i64, Vec<u64>)> {
    match row {
        [Value::BigInt(k), Value::BigInt(balance), Value::Text(text)] => {
            Some((*k, *balance, parse_list(text)))
        }
        _ => None,
    }
}

impl BypassSimulation {
    fn sql(&mut self) -> &mut SqlState {
        self.sql.as_mut().expect("the SQL mode")
    }

    /// Every tick, for each slot of `gateway`: a new transaction while faults are on, and the
    /// message of a transaction whose lock wait is over.
    pub(super) fn sql_pending(&mut self, id: u64) -> Option<&mut Pending> {
        self.sql.as_mut()?.pending.get_mut(&id)
    }

    pub(super) fn sql_tick(&mut self, gateway: usize) {
        if gateway == 0 {
            self.sql_find_deadlocks();
            self.sql_deliver_hints();
            self.sql_send_suspicions();
        }
        if self.options.sql_gateway_crashes
            && self.faults_on()
            && self.sql().crashes.chance(1, GATEWAY_CRASH_PER)
        {
            self.sql_gateway_crash(gateway);
        }
        // Answers of sequenced messages not complete after a while are asked for again from
        // every partition (one that has none does not answer).
        let now = self.now;
        let due = super::due_recalls(
            self.sql()
                .pending
                .values_mut()
                .filter(|pending| pending.gateway == gateway)
                .map(|pending| &mut pending.sequenced),
            now,
        );
        self.send_recalls(gateway, due);
        for slot in 0..self.options.slots {
            let run = self.sql().runs[gateway][slot].clone();
            match run {
                None => {
                    if self.faults_on() && self.now >= self.sql().idle_until[gateway][slot] {
                        self.sql_start(gateway, slot);
                    }
                }
                Some(Run {
                    waiting: Waiting::Pause(until),
                    ..
                }) if self.now >= until => {
                    let now = self.now;
                    let run = self.sql().runs[gateway][slot].as_mut().expect("running");
                    if let Some(auto) = run.auto.as_mut() {
                        auto.driver.resume();
                        auto.phase = AutoPhase::New;
                        self.sql_auto_send(gateway, slot);
                    } else {
                        let send = match &run.plain {
                            Some(plain) => plain.clone(),
                            None => run.txn.resume(now),
                        };
                        self.sql_send(gateway, slot, send, Purpose::Statement);
                    }
                }
                Some(Run {
                    waiting: Waiting::Message(_),
                    ..
                }) => {
                    // A statement awaiting its grant for too long: sent again without (the
                    // partition lets the kept one go; its answer is then not waited for).
                    let now = self.now;
                    let run = self.sql().runs[gateway][slot].as_mut().expect("running");
                    // A statement outside transactions never awaits a grant.
                    let overdue = match run.auto {
                        Some(_) => None,
                        None => run.txn.overdue(now),
                    };
                    if let Some(send) = overdue {
                        self.sql().stats.grants_overdue += 1;
                        self.sql_send(gateway, slot, send, Purpose::Statement);
                    }
                }
                Some(_) => {}
            }
            // A gateway's session dies mid-transaction (Sprint §5.1): its transaction is left
            // open with its locks until a waiter judges it abandoned; a COMMIT in flight may
            // or may not take effect.
            if self.faults_on()
                && self.sql().runs[gateway][slot].is_some()
                && self.prng.chance(SESSION_CRASH_PER_10000, 10_000)
            {
                self.sql_session_crash(gateway, slot);
            }
        }
    }

    /// Sends the hint that `transaction` ended to every gateway: due within `HINT_DELAY_MAX`
    /// ticks, or lost.
    fn sql_hint(&mut self, transaction: u64) {
        if self.prng.chance(1, HINT_LOST_PER) {
            return;
        }
        let due = self.now + self.prng.range_inclusive(0, HINT_DELAY_MAX);
        self.sql().hints.push((due, transaction));
    }

    /// Hands the hints due to every running transaction's driver; a pause the driver says a
    /// hint ends is over now (the message goes again at its gateway's next tick).
    fn sql_deliver_hints(&mut self) {
        let now = self.now;
        let sql = self.sql();
        let (due, later): (Vec<_>, Vec<_>) = sql.hints.drain(..).partition(|(at, _)| *at <= now);
        sql.hints = later;
        for (_, ended) in due {
            for run in sql.runs.iter_mut().flatten().flatten() {
                // Every running transaction's driver hears it (one whose message is in flight
                // keeps it for its next pause, as the runtime's channel does).
                if run.plain.is_none() && run.txn.woken(Hint::Ended(ended)) {
                    if let Waiting::Pause(until) = run.waiting {
                        run.waiting = Waiting::Pause(until.min(now));
                        sql.stats.woken += 1;
                    }
                }
            }
        }
    }

    /// A cycle of running transactions each blocked by the next for `DEADLOCK_TICKS`: a
    /// deadlock no partition detected (a finding, once per cycle).
    fn sql_find_deadlocks(&mut self) {
        let now = self.now;
        let blocked: BTreeMap<u64, (u64, u64, u64)> = self
            .sql()
            .runs
            .iter()
            .flatten()
            .flatten()
            .filter_map(|run| Some((run.txn.id, run.blocked?)))
            .collect();
        for start in blocked.keys() {
            let mut cycle = vec![*start];
            let mut at = *start;
            while let Some((holder, since, confirmed)) = blocked.get(&at) {
                debug_assert!(since <= confirmed && *confirmed <= now);
                if *holder == *start {
                    // Reported once, from its smallest member.
                    if cycle.iter().min() == Some(start)
                        && self.sql_cycle_confirmed(&cycle, &blocked)
                    {
                        let ids: Vec<String> = cycle.iter().map(|id| format!("{id:x}")).collect();
                        let finding = format!(
                            "a deadlock: transactions {} each wait for the next for {DEADLOCK_TICKS}+ ticks",
                            ids.join(" → ")
                        );
                        if !self.sql().findings.contains(&finding) {
                            self.sql().findings.push(finding);
                        }
                    }
                    break;
                }
                if cycle.contains(holder) || cycle.len() > blocked.len() {
                    break;
                }
                cycle.push(*holder);
                at = *holder;
            }
        }
    }

    /// Whether every wait of `cycle` was confirmed by a refusal `DEADLOCK_TICKS` after the
    /// cycle formed (its last wait began). A cycle whose members' next messages are only slow
    /// in transit (seed 2494: both in flight for ~180 ticks while the ring went from five
    /// partitions to four, after which the younger one, made global, was granted and the
    /// cycle ended) is not yet a deadlock; a real one is refused again at every retry (pauses
    /// of at most 100 ticks with hints) and confirms itself. The ticks are sends (a partition
    /// judged the message at or after it), since an answer that arrives late tells of the
    /// wait as it was when judged; and the count starts when the cycle formed, not when each
    /// wait began: a wait for a local transaction, refused for long, is no cycle until that
    /// transaction, made global, waits in turn, and the execution-order rule then kills the
    /// first waiter at its next request (seeds 3379 and 11992: that request, or the answer
    /// to it, in flight for 226 and 281 ticks under loss).
    fn sql_cycle_confirmed(&self, cycle: &[u64], blocked: &BTreeMap<u64, (u64, u64, u64)>) -> bool {
        let waits: Vec<(u64, u64)> = cycle
            .iter()
            .filter_map(|member| {
                blocked
                    .get(member)
                    .map(|(_, since, confirmed)| (*since, *confirmed))
            })
            .collect();
        let formed = waits.iter().map(|(since, _)| *since).max().unwrap_or(0);
        waits.len() == cycle.len()
            && waits
                .iter()
                .all(|(_, confirmed)| confirmed.saturating_sub(formed) >= DEADLOCK_TICKS)
    }

    /// Gateway `gateway`'s process crashes: every session of it dies mid-transaction, and
    /// it comes back at once as a new incarnation (a new owner), whose sessions begin
    /// transactions at once. Unless it counts as restarted before it could be suspected
    /// (`QUICK_RESTART_PERCENT`), its failure detector's suspicion follows
    /// `SUSPECT_AFTER_TICKS` later.
    fn sql_gateway_crash(&mut self, gateway: usize) {
        let now = self.now;
        let gateways = self.options.gateways;
        let sql = self.sql();
        sql.stats.gateway_crashes += 1;
        let owner = owner_of(gateway, sql.incarnations[gateway]);
        sql.incarnation_last += 1;
        sql.incarnations[gateway] = sql.incarnation_last;
        for run in sql.runs[gateway].iter().flatten() {
            // Its table locks granted everywhere, or a table-lock request of it on its way
            // (ordered before the suspicion or the new incarnation's lock, it is aborted
            // there; after, it is refused as a dead incarnation's and opens nothing).
            if run.locked || run.txn.statements > 0 {
                sql.dead.insert(run.txn.id, owner);
            }
        }
        // Each canary meets the restarts its mechanism handles: the suspicion's abort only
        // slow ones, the new incarnation's abort only quick ones.
        let (quick_percent, back_percent) = match self.options.canary {
            Some(BypassCanary::SqlSkipSuspicionAbort) => (0, 0),
            Some(BypassCanary::SqlIgnoreGatewayIncarnations) => (100, 0),
            _ => (QUICK_RESTART_PERCENT, BACK_BEFORE_SUSPICION_PERCENT),
        };
        let sql = self.sql();
        let back = if sql.crashes.percent(quick_percent) {
            sql.stats.quick_restarts += 1;
            now
        } else {
            sql.suspicions
                .push((now + SUSPECT_AFTER_TICKS, owner, (gateway + 1) % gateways));
            if sql.crashes.percent(back_percent) {
                now
            } else {
                now + SUSPECT_AFTER_TICKS + sql.crashes.range_inclusive(0, RESTART_AFTER_TICKS_MAX)
            }
        };
        for slot in 0..self.options.slots {
            if self.sql().runs[gateway][slot].is_some() {
                self.sql_session_crash(gateway, slot);
            }
            let idle_until = &mut self.sql().idle_until[gateway][slot];
            *idle_until = (*idle_until).max(back);
        }
    }

    /// Sends the suspicions due: one message to every partition each, from a live gateway
    /// (the runtime's failure detector sends it from the lead router).
    fn sql_send_suspicions(&mut self) {
        let now = self.now;
        let skip = self.options.canary == Some(BypassCanary::SqlSkipSuspicionAbort);
        let sql = self.sql();
        let (due, later): (Vec<_>, Vec<_>) =
            sql.suspicions.drain(..).partition(|(at, _, _)| *at <= now);
        sql.suspicions = later;
        for (_, owner, gateway) in due {
            // The canary: the suspicion names a process nobody is.
            let named = if skip {
                owner.process | 1 << 62
            } else {
                owner.process
            };
            // Its incarnations up to the crashed one are dead (they are a counter, as the
            // runtime's are start times): the crashed one's table lock still on its way is
            // refused even where no partition had adopted it (seed 9327).
            let send = Send {
                operation: store::abort_owned_through_operation(named, owner.incarnation),
                route: Route::Every,
                kind: Kind::Statement,
            };
            self.sql_send(gateway, 0, send, Purpose::Suspicion { owner });
        }
    }

    fn sql_session_crash(&mut self, gateway: usize, slot: usize) {
        self.sql().stats.session_crashes += 1;
        let committing = self.sql().runs[gateway][slot]
            .as_ref()
            .is_some_and(|run| run.committing);
        self.sql().pending.retain(|_, pending| {
            (pending.gateway, pending.slot) != (gateway, slot)
                || matches!(pending.purpose, Purpose::Forget | Purpose::Suspicion { .. })
        });
        let ended = if committing {
            Ended::Unknown
        } else {
            Ended::Crashed
        };
        self.sql_finish(gateway, slot, ended);
    }

    /// A list value never appended before.
    fn sql_next_value(&mut self) -> u64 {
        let sql = self.sql();
        sql.next_value += 1;
        sql.next_value
    }

    fn sql_start(&mut self, gateway: usize, slot: usize) {
        if self.options.sql_autocommit && self.prng.percent(AUTOCOMMIT_PERCENT) {
            return self.sql_start_auto(gateway, slot);
        }
        let accounts = self.options.accounts as i64;
        let roll = self.prng.below(100);
        let mut script = Vec::new();
        if roll < 55 {
            let mut saved = false;
            for _ in 0..self.prng.range_inclusive(1, 3) {
                let k = self.prng.below(accounts as u64) as i64;
                script.push(Step::Read(k, Column::List));
                if self.prng.percent(60) {
                    // Sometimes under a savepoint rolled back to, then appended again: the
                    // undone append must never be seen.
                    let undone = !saved && self.prng.percent(20);
                    if undone {
                        saved = true;
                        let value = self.sql_next_value();
                        script.extend([Step::Savepoint, Step::Append(k, value), Step::RollbackTo]);
                    }
                    let value = self.sql_next_value();
                    script.push(Step::Append(k, value));
                }
            }
        } else if roll < 85 {
            // A transfer: read both balances and write them, or (blind, 30 %) two increments
            // that read nothing. Sometimes a first transfer undone by ROLLBACK TO (blind: its
            // increments take exclusive locks), then another amount.
            let blind = self.prng.percent(30);
            let from = self.prng.below(accounts as u64) as i64;
            let to = (from + 1 + self.prng.below(accounts as u64 - 1) as i64) % accounts;
            let amount = self.prng.range_inclusive(1, 20) as i64;
            let write = |k: i64, delta: i64| {
                if blind {
                    Step::Add(k, delta)
                } else {
                    Step::Write(k, delta)
                }
            };
            let rewrite = !blind && self.prng.percent(25);
            if !blind {
                let first = if rewrite {
                    Column::Both
                } else {
                    Column::Balance
                };
                script = vec![Step::Read(from, first), Step::Read(to, Column::Balance)];
            }
            if self.prng.percent(15) {
                script.extend([
                    Step::Savepoint,
                    write(from, -amount - 7),
                    write(to, amount + 7),
                    Step::RollbackTo,
                ]);
            }
            script.extend([write(from, -amount), write(to, amount)]);
            if rewrite {
                script.extend([Step::Delete(from), Step::Insert(from)]);
            }
        } else {
            script = vec![Step::ReadAll];
            if self.prng.percent(50) {
                script.push(Step::ReadAll);
            }
        }
        // Some writers roll back at the end, after their writes.
        if roll < 85 && self.prng.percent(10) {
            script.push(Step::Rollback);
        }
        // Ids: the gateway in the high bits, so that gateways never share one.
        let id = {
            let sql = self.sql();
            sql.next_transaction += 1;
            sql.stats.started += 1;
            ((gateway as u64 + 1) << 40) | sql.next_transaction
        };
        let incarnation = self.sql().incarnations[gateway];
        let mut settings = driver_settings(owner_of(gateway, incarnation));
        settings.announced = self.sql().announced[gateway] == incarnation;
        if self.options.canary == Some(BypassCanary::SqlIgnoreGatewayIncarnations) {
            // The canary: the old owned message, which names the process only (what every
            // incarnation of it sent before incarnations): nothing is judged.
            settings.incarnation = 0;
        }
        let run = Run {
            txn: Transaction::new(id, self.now, settings),
            script,
            at: 0,
            waiting: Waiting::Pause(u64::MAX),
            committing: false,
            began: self.now,
            micro: Vec::new(),
            lists: BTreeMap::new(),
            balances: BTreeMap::new(),
            audits: Vec::new(),
            plain: None,
            blocked: None,
            locked: false,
            incarnation,
            savepoint: 0,
            saved: None,
            auto: None,
        };
        self.sql().runs[gateway][slot] = Some(run);
        self.sql_next_step(gateway, slot);
    }

    /// Starts a statement outside transactions in the slot: a transfer between two rows
    /// (their partitions, usually two) or a non-key update matching no row (every
    /// partition).
    fn sql_start_auto(&mut self, gateway: usize, slot: usize) {
        let accounts = self.options.accounts as i64;
        let roll = self.prng.below(100);
        let mut micro = Vec::new();
        let appends =
            AUTOCOMMIT_TRANSFER_PERCENT..AUTOCOMMIT_TRANSFER_PERCENT + AUTOCOMMIT_APPEND_PERCENT;
        let (command, keys) = if appends.contains(&roll) {
            let k = self.prng.below(accounts as u64) as i64;
            let value = self.sql_next_value();
            micro.push(Micro::Append(k, value));
            let append = Operation::UpdateComputed {
                table: TABLE.into(),
                assignments: vec![engine::ComputedAssignment::new(
                    "v",
                    engine::Expression::Binary(
                        engine::expression::Operator::Concat,
                        Box::new(engine::Expression::Column("v".into())),
                        Box::new(engine::Expression::Constant(Value::Text(format!(
                            ",{value}"
                        )))),
                    ),
                )],
                predicate: Some(Predicate::equal("k", Value::BigInt(k))),
            };
            (Command::Batch(vec![append]), vec![row_key(k)])
        } else if roll < AUTOCOMMIT_TRANSFER_PERCENT {
            let from = self.prng.below(accounts as u64) as i64;
            let to = (from + 1 + self.prng.below(accounts as u64 - 1) as i64) % accounts;
            let amount = self.prng.range_inclusive(1, 20) as i64;
            (
                Command::Batch(vec![add(from, -amount), add(to, amount)]),
                vec![row_key(from), row_key(to)],
            )
        } else {
            let none = Operation::Update {
                table: TABLE.into(),
                assignments: vec![Assignment::new("bal", Value::BigInt(0))],
                predicate: Some(Predicate::Compare {
                    column: "bal".into(),
                    op: engine::CompareOp::Less,
                    value: Value::BigInt(0),
                }),
            };
            (Command::Batch(vec![none]), Vec::new())
        };
        let id = {
            let sql = self.sql();
            sql.next_transaction += 1;
            sql.stats.started += 1;
            ((gateway as u64 + 1) << 40) | sql.next_transaction
        };
        let incarnation = self.sql().incarnations[gateway];
        let settings = driver_settings(owner_of(gateway, incarnation));
        let now = self.now;
        let run = Run {
            txn: Transaction::new(id, now, settings),
            script: vec![Step::Auto],
            at: 0,
            waiting: Waiting::Pause(u64::MAX),
            committing: false,
            began: now,
            micro,
            lists: BTreeMap::new(),
            balances: BTreeMap::new(),
            audits: Vec::new(),
            plain: None,
            blocked: None,
            locked: false,
            incarnation,
            savepoint: 0,
            saved: None,
            auto: Some(Auto {
                command,
                keys,
                driver: Autocommit::new(now, settings),
                phase: AutoPhase::New,
            }),
        };
        self.sql().runs[gateway][slot] = Some(run);
        self.sql_next_step(gateway, slot);
    }

    /// Sends the slot's statement outside transactions in its phase: its prepare (a new
    /// statement id each time it is sent again), its decision, or (the one-phase canary) the
    /// statement itself to its rows' partitions.
    fn sql_auto_send(&mut self, gateway: usize, slot: usize) {
        let one_phase = self.options.canary == Some(BypassCanary::SqlOnePhaseAutocommit);
        let statement = self.prng.next_u64();
        let run = self.sql().runs[gateway][slot].as_mut().expect("running");
        let auto = run.auto.as_mut().expect("a statement outside transactions");
        let operation = store::sql_operation(&auto.command);
        let (operation, route) = match auto.phase.clone() {
            AutoPhase::New if one_phase || auto.keys.len() == 1 => {
                // One row: one partition, one message (the runtime's rule). The canary: any
                // statement in one message, refused where a transaction holds the table and
                // run elsewhere.
                auto.phase = AutoPhase::Once;
                let route = match auto.keys.is_empty() {
                    true => Route::Every,
                    false => Route::Keys(auto.keys.clone()),
                };
                (operation, route)
            }
            AutoPhase::New => {
                auto.phase = AutoPhase::Prepare { statement };
                (
                    store::prepare_operation(statement, &operation),
                    Route::Every,
                )
            }
            AutoPhase::Decide {
                statement, commit, ..
            } => (store::decide_operation(statement, commit), Route::Every),
            phase @ (AutoPhase::Prepare { .. } | AutoPhase::Once) => {
                unreachable!("{phase:?} is sent once, from New")
            }
        };
        let send = Send {
            operation,
            route,
            kind: Kind::Statement,
        };
        self.sql_send(gateway, slot, send, Purpose::Auto);
    }

    /// The answers (`None`: unconfirmed) of the slot's statement outside transactions in its
    /// phase: a prepare is followed by its decision (commit if no vote failed; abort if one
    /// did or the votes were lost); a decision's outcome, or the failing vote of an abort,
    /// goes to the driver, which answers or pauses before the statement is sent again.
    fn sql_auto_answered(&mut self, gateway: usize, slot: usize, outcomes: Option<Vec<Outcome>>) {
        let now = self.now;
        let run = self.sql().runs[gateway][slot].as_mut().expect("running");
        let auto = run.auto.as_mut().expect("a statement outside transactions");
        let answers = match (auto.phase.clone(), outcomes) {
            (AutoPhase::Prepare { statement }, votes) => {
                // Lost votes: perhaps prepared somewhere, so aborted, with nothing to answer.
                let vote = votes
                    .as_ref()
                    .and_then(|votes| votes.iter().find(|vote| vote_failed(vote)).cloned());
                let commit = votes.is_some() && vote.is_none();
                auto.phase = AutoPhase::Decide {
                    statement,
                    commit,
                    vote,
                };
                return self.sql_auto_send(gateway, slot);
            }
            (
                AutoPhase::Decide {
                    commit: false,
                    vote: Some(vote),
                    ..
                },
                Some(_),
            ) => {
                self.sql().stats.autocommit_refused += 1;
                vec![vote]
            }
            // Aborted for lost votes: it ran nowhere (the runtime answers 08006).
            (AutoPhase::Decide { commit: false, .. }, Some(_)) => {
                return self.sql_finish(gateway, slot, Ended::Aborted);
            }
            (AutoPhase::Decide { commit: true, .. } | AutoPhase::Once, Some(outcomes)) => outcomes,
            // Unconfirmed: a transfer ran whole or not at all (two phases), which the final
            // total does not tell apart.
            (AutoPhase::Decide { .. } | AutoPhase::Once, None) => {
                return self.sql_finish(gateway, slot, Ended::Unknown);
            }
            (AutoPhase::New, _) => unreachable!("answered before it was sent"),
        };
        let run = self.sql().runs[gateway][slot].as_mut().expect("running");
        let auto = run.auto.as_mut().expect("a statement outside transactions");
        match auto.driver.outcomes(answers, now) {
            Action::Pause {
                until_ms, abort, ..
            } => {
                run.waiting = Waiting::Pause(until_ms);
                if let Some(abort) = abort {
                    self.sql().stats.autocommit_holders_aborted += 1;
                    self.sql_send(gateway, slot, abort, Purpose::Forget);
                }
            }
            Action::Answered { outcomes, .. } => {
                let ended = match transaction_driver::first_error(&outcomes) {
                    None => Ended::Committed,
                    Some(_) => Ended::Aborted,
                };
                self.sql_finish(gateway, slot, ended);
            }
            Action::Send(_) => unreachable!("a statement outside transactions sends itself"),
        }
    }

    /// Sends the transaction's next step, or its COMMIT after the last.
    fn sql_next_step(&mut self, gateway: usize, slot: usize) {
        let now = self.now;
        let canary = self.options.canary;
        let run = self.sql().runs[gateway][slot].as_mut().expect("running");
        let Some(step) = run.script.get(run.at).cloned() else {
            run.committing = true;
            let Some(end) = run.txn.end(true) else {
                return self.sql_finish(gateway, slot, Ended::Committed);
            };
            if canary == Some(BypassCanary::SqlCommitAtOneParticipant) {
                // The canary: the commit reaches only the partition of the first row the
                // transaction touched, which decides alone; the others are told to abort.
                let first = run
                    .script
                    .iter()
                    .find_map(|step| match step {
                        Step::Read(k, _)
                        | Step::Append(k, _)
                        | Step::Write(k, _)
                        | Step::Add(k, _)
                        | Step::Delete(k)
                        | Step::Insert(k) => Some(*k),
                        Step::ReadAll
                        | Step::Rollback
                        | Step::Savepoint
                        | Step::RollbackTo
                        | Step::Auto => None,
                    })
                    .unwrap_or(0);
                let id = run.txn.id;
                let one = Send {
                    operation: end.operation,
                    route: Route::Keys(vec![row_key(first)]),
                    kind: end.kind,
                };
                self.sql_send(gateway, slot, one, Purpose::Commit);
                let others = Send {
                    operation: store::end_operation(id, false, false),
                    route: Route::Every,
                    kind: Kind::End { transaction: id },
                };
                self.sql_send(gateway, slot, others, Purpose::Forget);
                return;
            }
            self.sql_send(gateway, slot, end, Purpose::Commit);
            return;
        };
        let (command, keys) = match &step {
            Step::Auto => return self.sql_auto_send(gateway, slot),
            Step::Read(k, column) => (select_one(*k, *column), Some(vec![row_key(*k)])),
            Step::Rollback => {
                self.sql().stats.rollbacks += 1;
                return self.sql_rollback(gateway, slot);
            }
            Step::Savepoint => {
                run.savepoint = 1;
                run.saved = Some((run.micro.len(), run.lists.clone(), run.balances.clone()));
                run.at += 1;
                return self.sql_next_step(gateway, slot);
            }
            Step::RollbackTo => {
                let savepoint = run.savepoint;
                assert_eq!(savepoint, 1, "a savepoint is open");
                match run.txn.rollback_to(savepoint) {
                    Some(send) => self.sql_send(gateway, slot, send, Purpose::RollbackTo),
                    None => {
                        run.back_to_savepoint();
                        self.sql_next_step(gateway, slot);
                    }
                }
                return;
            }
            Step::Append(k, value) => {
                let mut list = run.lists.get(k).cloned().unwrap_or_default();
                list.push(*value);
                (
                    update(*k, "v", Value::Text(render_list(&list))),
                    Some(vec![row_key(*k)]),
                )
            }
            Step::Write(k, delta) => {
                let balance = run.balances.get(k).copied().unwrap_or(0) + delta;
                (
                    update(*k, "bal", Value::BigInt(balance)),
                    Some(vec![row_key(*k)]),
                )
            }
            Step::Add(k, delta) => (
                Command::Batch(vec![add(*k, *delta)]),
                Some(vec![row_key(*k)]),
            ),
            Step::ReadAll => (select(None), None),
            Step::Delete(k) => (
                Command::Batch(vec![Operation::Delete {
                    table: TABLE.into(),
                    predicate: Some(Predicate::equal("k", Value::BigInt(*k))),
                }]),
                Some(vec![row_key(*k)]),
            ),
            Step::Insert(k) => {
                let balance = run.balances.get(k).copied().unwrap_or(0);
                let list = run.lists.get(k).cloned().unwrap_or_default();
                (
                    Command::Batch(vec![Operation::Insert {
                        table: TABLE.into(),
                        columns: Vec::new(),
                        rows: vec![vec![
                            Value::BigInt(*k),
                            Value::BigInt(balance),
                            Value::Text(render_list(&list)),
                        ]],
                        on_conflict: engine::OnConflict::Error,
                    }]),
                    Some(vec![row_key(*k)]),
                )
            }
        };
        if canary == Some(BypassCanary::SqlUnlockedReads) && command.is_read() {
            // The canary: a read in a transaction takes no row lock and no table S lock, so the
            // partition admits it whatever others hold (nothing orders it against conflicting
            // writers).
            let send = Send {
                operation: store::transaction_operation(
                    &store::transactions::TransactionStatement {
                        transaction: run.txn.id,
                        // The number the driver's next statement takes: a partition
                        // refuses a number below one it admitted (a late attempt).
                        statement: run.txn.statements + 1,
                        begin_ms: run.txn.begin_ms,
                        now_ms: now,
                        // Only the table's intention (the partition requires its tables covered):
                        // no row or table S lock, so no writer's X is in its way.
                        locks: vec![(
                            (TABLE.to_string(), None),
                            store::transactions::Mode::IntentShared,
                        )],
                        nowait: false,
                        command: command.encode(),
                        savepoint: 0,
                        skip_locked: false,
                        await_grant: false,
                        owner: None,
                    },
                ),
                route: keys.map_or(Route::Every, Route::Keys),
                kind: Kind::Statement,
            };
            run.plain = Some(send.clone());
            self.sql_send(gateway, slot, send, Purpose::Statement);
            return;
        }
        run.plain = None;
        // Locks as fine as the runtime's: a statement on one row locks the columns it reads
        // or writes (so a transfer's write of `bal` and an append's of `v` to one row do not
        // conflict; Elle judges the lists, the audits the balances).
        let paths = keys.as_ref().and_then(|keys| {
            store::transactions::column_paths(
                store::transactions::operations_of(&command),
                &schema(),
                0,
                keys,
            )
        });
        let options = StatementOptions {
            paths,
            savepoint: run.savepoint,
            ..StatementOptions::default()
        };
        let route = keys.map_or(Route::Every, Route::Keys);
        match run.txn.statement(&command, route, options, now) {
            Ok(action) => self.sql_act(gateway, slot, action),
            Err(error) => panic!("the workload's statements plan: {error:?}"),
        }
    }

    fn sql_act(&mut self, gateway: usize, slot: usize, action: Action) {
        match action {
            Action::Send(send) => self.sql_send(gateway, slot, send, Purpose::Statement),
            Action::Pause {
                until_ms, abort, ..
            } => {
                self.sql().stats.waits += 1;
                if let Some(abort) = abort {
                    self.sql().stats.abandoned += 1;
                    self.sql_send(gateway, slot, abort, Purpose::Forget);
                }
                let run = self.sql().runs[gateway][slot].as_mut().expect("running");
                run.waiting = Waiting::Pause(until_ms);
            }
            Action::Answered { outcomes, .. } => self.sql_answered(gateway, slot, outcomes),
        }
    }

    /// Submits a message to the gateway: pinned to the partition arcs of its configuration
    /// when it goes to every partition, else to the keys' positions (the bypass when one
    /// group holds them).
    fn sql_send(&mut self, gateway: usize, slot: usize, send: Send, purpose: Purpose) {
        if self.options.canary == Some(BypassCanary::SqlSkipExecutionOrder) {
            let now = self.now;
            if let Some(run) = self.sql().runs[gateway][slot].as_mut() {
                if send.operation == store::globalize_operation(run.txn.id) {
                    // The canary: the transaction is never numbered anywhere, as if granted.
                    let action = run.txn.outcomes(vec![Outcome::Batch(Vec::new())], now);
                    return self.sql_act(gateway, slot, action);
                }
            }
        }
        let id = {
            let sql = self.sql();
            sql.next_message += 1;
            sql.next_message
        };
        if let Purpose::Statement | Purpose::Commit | Purpose::RollbackTo | Purpose::Auto = purpose
        {
            if let Some(run) = self.sql().runs[gateway][slot].as_mut() {
                run.waiting = Waiting::Message(id);
            }
        }
        let incarnation = self.sql().runs[gateway][slot]
            .as_ref()
            .map_or(0, |run| run.incarnation);
        let pending = Pending {
            gateway,
            slot,
            target: SqlTarget::Any,
            send,
            purpose,
            plans: 1,
            sent: self.now,
            sequenced: None,
            incarnation,
        };
        self.sql_submit(id, pending);
    }

    fn sql_submit(&mut self, id: u64, mut pending: Pending) {
        let configuration = self.gateways[pending.gateway].gateway.configuration();
        let version = configuration.version();
        let (target, positions) = match &pending.send.route {
            Route::Keys(keys) => (
                SqlTarget::Keys(keys.clone()),
                Some(
                    keys.iter()
                        .map(|key| KeyMapping::Hash.position(key))
                        .collect::<Vec<_>>(),
                ),
            ),
            Route::Range(_) | Route::Any => {
                unreachable!("the workload's statements go to keys or to every partition")
            }
            Route::Every => {
                let arcs = payload::partition_arcs(configuration, &PositionSet::whole());
                (
                    SqlTarget::Arcs(arcs.into_iter().map(|(arc, _)| arc).collect()),
                    None,
                )
            }
        };
        pending.sequenced = None;
        let sql_payload = SqlPayload {
            operation: pending.send.operation.clone(),
            target: target.clone(),
        };
        let parts = sql_payload.parts();
        let bytes = sql_payload.encode();
        let gateway = pending.gateway;
        pending.target = target;
        let input = match positions {
            Some(positions) => GatewayInput::Submit {
                id,
                command: GatewayCommand::Write {
                    needs_answers: true,
                    positions,
                    payload: bytes,
                    parts,
                },
            },
            None => GatewayInput::SubmitPinned {
                id,
                command: GatewayCommand::RangeWrite {
                    range: PositionSet::whole(),
                    payload: bytes,
                    parts,
                },
                version,
            },
        };
        self.sql().pending.insert(id, pending);
        self.gateway_step(gateway, input);
    }

    /// A SQL message's completion (`GatewayEffect::Complete` of an id at or above
    /// `SQL_ID_BASE`).
    pub(super) fn sql_complete(&mut self, id: u64, completion: Completion<Answer>) {
        let Some(mut pending) = self.sql().pending.remove(&id) else {
            return;
        };
        // A statement sent again after awaiting its grant too long (`Transaction::overdue`):
        // the slot waits for the newer message; this one is not planned again.
        let superseded = matches!(pending.purpose, Purpose::Statement)
            && matches!(
                self.sql().runs[pending.gateway][pending.slot].as_ref().map(|run| &run.waiting),
                Some(Waiting::Message(own)) if *own != id
            );
        if matches!(completion, Completion::Failed(ecast::Failure::Refused(_)))
            && pending.plans < PLANS_MAX
            && !superseded
        {
            // Planned against a configuration that moved on: nothing ran; plan it again.
            pending.plans += 1;
            let next = {
                let sql = self.sql();
                sql.next_message += 1;
                sql.next_message
            };
            if let Purpose::Statement | Purpose::Commit | Purpose::RollbackTo | Purpose::Auto =
                pending.purpose
            {
                if let Some(run) = self.sql().runs[pending.gateway][pending.slot].as_mut() {
                    run.waiting = Waiting::Message(next);
                }
            }
            return self.sql_submit(next, pending);
        }
        let outcomes = match completion {
            Completion::Done(answers) => sql_outcomes(&pending.target, &answers),
            Completion::Failed(_) => None,
        };
        if let (Some(_), Kind::End { transaction } | Kind::Abort { transaction, .. }) =
            (&outcomes, &pending.send.kind)
        {
            // Its end is known: its gateway tells every gateway (the runtime's
            // `Hub::transaction_ended`).
            self.sql_hint(*transaction);
        }
        let (gateway, slot) = (pending.gateway, pending.slot);
        if let Purpose::Suspicion { owner } = pending.purpose {
            match outcomes {
                Some(outcomes) => {
                    let aborted: u64 = outcomes
                        .iter()
                        .map(|outcome| match outcome {
                            Outcome::Batch(results) => results
                                .iter()
                                .map(|result| match result {
                                    Ok(Output::Updated { count }) => *count,
                                    _ => 0,
                                })
                                .sum(),
                            _ => 0,
                        })
                        .sum();
                    let now = self.now;
                    let sql = self.sql();
                    sql.stats.suspicions += 1;
                    sql.stats.suspicion_aborts += aborted;
                    sql.suspected.insert(owner, now);
                }
                // Unconfirmed: the detector sends it again (aborting twice changes nothing).
                None => {
                    let now = self.now;
                    self.sql().suspicions.push((now, owner, gateway));
                }
            }
            return;
        }
        if let (Some(outcomes), Kind::Lock, Purpose::Statement) =
            (&outcomes, &pending.send.kind, &pending.purpose)
        {
            // Every partition answered a table lock of this incarnation without refusing it:
            // each had taken it for its process's current one by then.
            if !outcomes
                .iter()
                .any(|outcome| transaction_driver::incarnation_dead(outcome).is_some())
            {
                let now = self.now;
                let owner = owner_of(gateway, pending.incarnation);
                self.sql().adopted.entry(owner).or_insert(now);
            }
        }
        if superseded {
            // The late answer of an attempt `overdue` superseded: a death is the statement's
            // answer now (`Transaction::takes_superseded`), and the later attempt's is not
            // waited for; anything else is left to the later attempt.
            if let (Some(outcomes), Some(run)) =
                (&outcomes, self.sql().runs[gateway][slot].as_mut())
            {
                if run.plain.is_none() && run.txn.takes_superseded(outcomes) {
                    run.waiting = Waiting::Message(id);
                    self.sql().stats.superseded_deaths += 1;
                }
            }
        }
        let waited = matches!(
            self.sql().runs[gateway][slot].as_ref().map(|run| &run.waiting),
            Some(Waiting::Message(own)) if *own == id
        );
        match pending.purpose {
            Purpose::Forget | Purpose::Suspicion { .. } => {}
            Purpose::RollbackTo => match outcomes {
                Some(outcomes) if transaction_driver::first_error(&outcomes).is_none() => {
                    self.sql().stats.rollbacks_to += 1;
                    let run = self.sql().runs[gateway][slot].as_mut().expect("running");
                    run.back_to_savepoint();
                    self.sql_next_step(gateway, slot);
                }
                // Refused (another gateway aborted it) or unconfirmed: the transaction aborts.
                _ => self.sql_rollback(gateway, slot),
            },
            _ if !waited => {}
            Purpose::Auto => self.sql_auto_answered(gateway, slot, outcomes),
            Purpose::Commit => match outcomes {
                Some(outcomes) if transaction_driver::first_error(&outcomes).is_none() => {
                    self.sql_finish(gateway, slot, Ended::Committed)
                }
                Some(_) => {
                    // Refused: another gateway aborted it while it idled (40001).
                    self.sql().stats.serialization_failures += 1;
                    self.sql_finish(gateway, slot, Ended::Aborted)
                }
                None => self.sql_finish(gateway, slot, Ended::Unknown),
            },
            Purpose::Statement => match outcomes {
                Some(outcomes) => {
                    let now = self.now;
                    self.sql_check_suspected_holder(&pending, &outcomes);
                    let run = self.sql().runs[gateway][slot].as_mut().expect("running");
                    if run.plain.is_some() {
                        // The unlocked-reads canary's plain read: sent again while a lock
                        // is in the way.
                        if outcomes
                            .iter()
                            .any(|o| transaction_driver::transaction_locked(o).is_some())
                        {
                            run.waiting = Waiting::Pause(now + 5);
                            return;
                        }
                        return self.sql_answered(gateway, slot, outcomes);
                    }
                    if pending.send.kind == Kind::Lock
                        && transaction_driver::first_error(&outcomes).is_none()
                    {
                        run.locked = true;
                    }
                    run.blocked = match outcomes
                        .iter()
                        .find_map(transaction_driver::transaction_locked)
                    {
                        Some((holder, _)) => match run.blocked {
                            Some((same, since, _)) if same == holder => {
                                Some((holder, since, pending.sent.max(since)))
                            }
                            _ => Some((holder, pending.sent, pending.sent)),
                        },
                        None => None,
                    };
                    let globalizing = run.txn.global;
                    let action = run.txn.outcomes(outcomes, now);
                    let refused = run.txn.incarnation_refused();
                    let announced = run.txn.announced();
                    if !globalizing && run.txn.global {
                        self.sql().stats.globalized += 1;
                    }
                    if let Some(announced) = announced {
                        self.sql().announced[gateway] = announced;
                    }
                    if let Some(refused) = refused {
                        self.sql_incarnation_refused(gateway, refused);
                    }
                    self.sql_act(gateway, slot, action);
                }
                None => {
                    // Unconfirmed (08007): the statement may have run; the transaction aborts.
                    self.sql().stats.lost_statements += 1;
                    let run = self.sql().runs[gateway][slot].as_mut().expect("running");
                    run.txn.abandon_statement();
                    self.sql_rollback(gateway, slot);
                }
            },
        }
    }

    /// The partitions refused a transaction of `gateway` as incarnation `refused`'s (taken
    /// for dead: its process was suspected): the gateway takes a new incarnation for its next
    /// transactions, unless another of its sessions already did.
    fn sql_incarnation_refused(&mut self, gateway: usize, refused: u64) {
        let sql = self.sql();
        sql.stats.incarnation_refusals += 1;
        let current = sql.incarnations[gateway];
        let fresh = sql.incarnation_last + 1;
        let next = transaction_driver::next_incarnation(current, refused, fresh);
        if next == fresh {
            sql.incarnation_last = fresh;
        }
        sql.incarnations[gateway] = next;
    }

    /// A refusal that names a transaction of a crashed gateway, which every partition
    /// recorded as its owner's, for a message sent after every partition answered either that
    /// incarnation's suspicion or a table lock of a later incarnation of its process: either,
    /// ordered before the message everywhere, should have aborted the holder and released its
    /// locks there (a finding; the latency it costs is the abandonment time,
    /// `abandoned_after_ms`, instead of the suspicion's or the restart's).
    fn sql_check_suspected_holder(&mut self, pending: &Pending, outcomes: &[Outcome]) {
        let Some((holder, _)) = outcomes
            .iter()
            .find_map(transaction_driver::transaction_locked)
        else {
            return;
        };
        let sql = self.sql();
        let Some(owner) = sql.dead.get(&holder).copied() else {
            return;
        };
        let suspected = sql.suspected.get(&owner).copied();
        let later = Owner {
            incarnation: owner.incarnation + 1,
            ..owner
        };
        let last = Owner {
            incarnation: u64::MAX,
            ..owner
        };
        let superseded = sql
            .adopted
            .range(later..=last)
            .map(|(incarnation, at)| (*at, incarnation.incarnation))
            .min();
        let (by, why) = match (suspected, superseded) {
            (Some(at), Some((other, _))) if at <= other => (at, "suspected".to_string()),
            (_, Some((at, next))) => (at, format!("seen a later incarnation {next:x} of")),
            (Some(at), None) => (at, "suspected".to_string()),
            (None, None) => return,
        };
        if pending.sent > by {
            // Once per holder.
            sql.dead.remove(&holder);
            let finding = format!(
                "a message sent at tick {} was refused for transaction {holder:x}, whose \
                 gateway process {:x} (incarnation {:x}) every partition had {why} by tick \
                 {by} (its locks outlived the {})",
                pending.sent,
                owner.process,
                owner.incarnation,
                if why == "suspected" {
                    "suspicion"
                } else {
                    "restart"
                },
            );
            sql.findings.push(finding);
        }
    }

    /// A statement's outcomes: its step's effect on what the transaction knows, or its abort.
    fn sql_answered(&mut self, gateway: usize, slot: usize, outcomes: Vec<Outcome>) {
        if let Some(error) = transaction_driver::first_error(&outcomes) {
            if matches!(error, engine::EngineError::SerializationFailure { .. }) {
                self.sql().stats.serialization_failures += 1;
            }
            return self.sql_rollback(gateway, slot);
        }
        let run = self.sql().runs[gateway][slot].as_mut().expect("running");
        let step = run.script[run.at].clone();
        let rows = rows_of(&outcomes);
        let mut finding = None;
        match step {
            Step::Read(k, column) => {
                let row = match rows.as_slice() {
                    [row] => Some(row.as_slice()),
                    _ => None,
                };
                match (row, column) {
                    (Some([Value::BigInt(read), Value::Text(text)]), Column::List)
                        if *read == k =>
                    {
                        let list = parse_list(text);
                        run.lists.insert(k, list.clone());
                        run.micro.push(Micro::Read(k, list));
                    }
                    (Some([Value::BigInt(read), Value::BigInt(balance)]), Column::Balance)
                        if *read == k =>
                    {
                        run.balances.insert(k, *balance);
                    }
                    (
                        Some([Value::BigInt(read), Value::BigInt(balance), Value::Text(text)]),
                        Column::Both,
                    ) if *read == k => {
                        let list = parse_list(text);
                        run.balances.insert(k, *balance);
                        run.lists.insert(k, list.clone());
                        run.micro.push(Micro::Read(k, list));
                    }
                    _ => finding = Some(format!("row {k} read as {rows:?}")),
                }
            }
            Step::Rollback | Step::Savepoint | Step::RollbackTo | Step::Auto => {
                unreachable!("not answered as a statement")
            }
            Step::Append(k, value) => {
                run.lists.entry(k).or_default().push(value);
                run.micro.push(Micro::Append(k, value));
            }
            // The balance as written (a rewrite puts it back; a second write of the same row
            // follows a ROLLBACK TO, which restores the balances read).
            Step::Write(k, delta) => {
                let balance = run.balances.get(&k).copied().unwrap_or(0) + delta;
                run.balances.insert(k, balance);
            }
            Step::Delete(_) | Step::Insert(_) | Step::Add(..) => {}
            Step::ReadAll => {
                let mut fields: Vec<(i64, i64, Vec<u64>)> =
                    rows.iter().filter_map(|row| row_fields(row)).collect();
                fields.sort_by_key(|(k, _, _)| *k);
                let total: i64 = fields.iter().map(|(_, balance, _)| balance).sum();
                run.audits.push((total, fields.len()));
                for (k, _, list) in fields {
                    run.micro.push(Micro::Read(k, list));
                }
            }
        }
        run.at += 1;
        if let Some(finding) = finding {
            self.sql().findings.push(finding);
        }
        self.sql_next_step(gateway, slot);
    }

    fn sql_rollback(&mut self, gateway: usize, slot: usize) {
        let run = self.sql().runs[gateway][slot].as_ref().expect("running");
        if let Some(end) = run.txn.end(false) {
            self.sql_send(gateway, slot, end, Purpose::Forget);
        }
        self.sql_finish(gateway, slot, Ended::Aborted);
    }

    fn sql_finish(&mut self, gateway: usize, slot: usize, ended: Ended) {
        let now = self.now;
        let accounts = self.options.accounts as usize;
        let think = self.prng.range_inclusive(0, self.options.think_ticks_max);
        let sql = self.sql();
        let run = sql.runs[gateway][slot].take().expect("running");
        sql.idle_until[gateway][slot] = now + think;
        if let Some(auto) = &run.auto {
            // An append is a transaction of one append in Elle's history.
            let appended = Committed {
                id: run.txn.id,
                began: run.began,
                ended: now,
                history: run.micro.clone(),
            };
            match ended {
                Ended::Committed if auto.keys.is_empty() => sql.stats.autocommit_noops += 1,
                Ended::Committed if !appended.history.is_empty() => {
                    sql.stats.autocommit_appends += 1;
                    sql.committed.push(appended);
                }
                Ended::Committed => sql.stats.autocommits += 1,
                Ended::Aborted => sql.stats.aborted += 1,
                // A crashed session's statement may still run (it has no transaction to
                // abort): its fate is unknown too.
                Ended::Unknown | Ended::Crashed => {
                    sql.stats.indeterminate += u64::from(matches!(ended, Ended::Unknown));
                    if !appended.history.is_empty() {
                        sql.unknown.push(Committed {
                            ended: u64::MAX,
                            ..appended
                        });
                    }
                }
            }
            return;
        }
        let committed = Committed {
            id: run.txn.id,
            began: run.began,
            ended: now,
            history: run.micro,
        };
        match ended {
            Ended::Aborted => sql.stats.aborted += 1,
            Ended::Crashed => {}
            Ended::Unknown => {
                sql.stats.indeterminate += 1;
                sql.unknown.push(Committed {
                    ended: u64::MAX,
                    ..committed
                });
            }
            Ended::Committed => {
                sql.stats.committed += 1;
                // Appends as committed (one undone by ROLLBACK TO left the history).
                sql.stats.appends += committed
                    .history
                    .iter()
                    .filter(|micro| matches!(micro, Micro::Append(..)))
                    .count() as u64;
                for step in &run.script {
                    match step {
                        Step::ReadAll => sql.stats.audits += 1,
                        Step::Write(..) => sql.stats.transfers += 1,
                        Step::Delete(_) => sql.stats.rewrites += 1,
                        Step::Add(..) => sql.stats.increments += 1,
                        Step::Read(..) | Step::Append(..) | Step::Insert(_) => {}
                        Step::Rollback => unreachable!("a rolled back transaction is aborted"),
                        Step::Savepoint | Step::RollbackTo | Step::Auto => {}
                    }
                }
                for (total, rows) in &run.audits {
                    let expected = BALANCE * accounts as i64;
                    if *total != expected || *rows != accounts {
                        sql.findings.push(format!(
                            "transaction {:x}: an audit read {rows} rows summing to {total}, not \
                             {accounts} summing to {expected}",
                            committed.id
                        ));
                    }
                }
                if run.audits.len() == 2 && run.audits[0] != run.audits[1] {
                    sql.findings.push(format!(
                        "transaction {:x}: two audits differ: {:?}",
                        committed.id, run.audits
                    ));
                }
                sql.committed.push(committed);
            }
        }
    }

    /// The checks at the end: the audits', the final total, and Elle's over the committed
    /// transactions (and those whose commit's fate is unknown, by what the final lists hold).
    pub(super) fn check_sql(&self) -> Result<(), crate::checkers::Violation> {
        let sql = self.sql.as_ref().expect("the SQL mode");
        let fail = |report: String| {
            Err(crate::checkers::Violation {
                checker: "sql_transactions",
                report,
            })
        };
        if let Some(finding) = sql.findings.first() {
            return fail(format!("{finding} ({} findings)", sql.findings.len()));
        }
        let configuration = self.current();
        let mut finals: BTreeMap<i64, Vec<u64>> = BTreeMap::new();
        let mut total = 0;
        for k in 0..self.options.accounts as i64 {
            let key = row_key(k);
            let holder = super::partition_holding(configuration, KeyMapping::Hash.position(&key));
            let machine = self.machine(self.index_of(holder));
            let Some(store) = machine.data().sql_store() else {
                return fail("a partition without SQL data".into());
            };
            // Transactions still open (their end never reached the partitions) are rolled back
            // on a copy, as the next waiter's abort would; an abort grants the statements parked
            // behind it (a crashed session's, waiting in the queue), which open their
            // transactions: those are rolled back in turn, until none is open.
            let mut store = store.clone();
            loop {
                let open: Vec<u64> = store.transactions.open_ids();
                if open.is_empty() {
                    break;
                }
                for id in open {
                    store.execute_share(&store::end_operation(id, false, false), |_| true);
                }
            }
            let rows: Vec<(i64, i64, Vec<u64>)> = store
                .engine
                .table(TABLE)
                .map(|table| {
                    table
                        .rows
                        .values()
                        .filter_map(|row| row_fields(row))
                        .collect()
                })
                .unwrap_or_default();
            match rows.iter().find(|(key, _, _)| *key == k) {
                Some((_, balance, list)) => {
                    total += balance;
                    finals.insert(k, list.clone());
                }
                None => {
                    return fail(format!(
                        "row {k} is missing from group {} which holds it",
                        holder.0
                    ))
                }
            }
        }
        let expected = BALANCE * self.options.accounts as i64;
        if total != expected {
            return fail(format!("the final balances sum to {total}, not {expected}"));
        }
        let mut history = sql.committed.clone();
        let present: std::collections::BTreeSet<u64> = finals.values().flatten().copied().collect();
        for unknown in &sql.unknown {
            let appended = unknown
                .history
                .iter()
                .any(|micro| matches!(micro, Micro::Append(_, value) if present.contains(value)));
            if appended {
                history.push(unknown.clone());
            }
        }
        let findings = lincheck::elle::check(&history, &finals);
        if let Some(first) = findings.first() {
            return fail(format!(
                "elle: {first} ({} findings over {} transactions)",
                findings.len(),
                history.len()
            ));
        }
        Ok(())
    }
}

/// How a transaction ended, as its gateway knows.
enum Ended {
    Committed,
    Aborted,
    Unknown,
    /// Its session died before COMMIT: it never commits (only its owner commits).
    Crashed,
}

/// The engine outcome per answering partition, in part order (`Outcome::Ok` parts, covered by
/// another part's outcome, left out); `None` if a part is missing or does not decode (the
/// runtime's `sql_answers`).
fn sql_outcomes(target: &SqlTarget, answers: &BTreeMap<u64, Answer>) -> Option<Vec<Outcome>> {
    let mut outcomes = Vec::new();
    for part in 0..target.part_count() {
        match answers.get(&part)? {
            Answer::Sql(Some(bytes)) => outcomes.push(Outcome::decode(bytes).ok()?),
            Answer::Sql(None) => {}
            Answer::Int(_) => return None,
        }
    }
    Some(outcomes)
}
