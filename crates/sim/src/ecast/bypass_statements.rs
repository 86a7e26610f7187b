//! One-shot SQL statements across partitions in the bypass mode (`--sql-statements`, issue 19
//! item 6): the partition groups host the runtime's partition data
//! (`cluster::partition_store::PartitionStore`), and every slot of every gateway sends one-shot
//! SQL statements as the runtime's PostgreSQL front end and gateway task do:
//!
//! - **planned from SQL text** by the SQL front end's planner (`sql::plan_statement`) against the
//!   gateway's *cached* catalog (read once with `store::catalog_operation` from the partition
//!   holding `payload::SQL_ANCHOR`, and again only when a plan fails or a partition refuses a
//!   statement), sent as `engine::Command::Guarded` with that catalog's digest;
//! - **routed** by the runtime's rules (`cluster::sql_route::route_of`): a statement pinning
//!   partition keys to their partitions (one: the router bypass, as a `Read` or `Write` of those
//!   positions), anything else to every partition as one E-Cast message (`RangeRead`,
//!   `RangeWrite` pinned to the configuration its arcs came from); a write that can fail on the
//!   data (`store::prepared::fallible`, here `SET n = n + 1`) over several partitions in two
//!   phases (prepare, decision), as the runtime's gateway task (`submit_sql`, `complete_sql`);
//! - **re-planned**: refused for a configuration that moved on (nothing ran), sent again with
//!   the new configuration's arcs; refused for a stale catalog (`EngineError::StaleCatalog`:
//!   nothing ran), the catalog read again and the statement planned again from its text (at
//!   most 8 times, as `pg::connection::run_planned`); a table held by an undecided two-phase
//!   statement (`EngineError::Busy`), sent again after a pause, the holder aborted when it holds
//!   the table for long (its gateway may be gone), as `ClusterBackend::execute_routed`.
//!
//! The workload, over tables `t0` and `t1` (`k BIGINT PRIMARY KEY, grp BIGINT NOT NULL, n BIGINT
//! NOT NULL DEFAULT 0`) spread over the partitions by `k`: inserts of new rows, point updates
//! (`SET n = n + 1 WHERE k = c`), non-key updates over every partition (`… WHERE grp = g`), point
//! reads, non-key and range reads (every partition), and DDL mid-run from gateway 0 (CREATE
//! INDEX, ADD COLUMN … DEFAULT, ALTER COLUMN n SET DEFAULT) while the other gateways hold an
//! older catalog.
//!
//! The checker (`statements`): every statement is one transaction; the history is checked
//! linearisable (with real time: strictly serialisable) against a model of the tables (rows by
//! key with their values, the counter's default, the added columns' defaults; a non-key update
//! increments every matching row at one point; a read sees every matching row as of one point)
//! by `lincheck`. Each statement touches one table, so the history splits per table (locality:
//! the whole history is strictly serialisable across tables iff each table's is). A statement
//! whose outcome the gateway did not learn may have taken effect or not. At the end each
//! table's rows are read from the groups holding them in the final configuration and appended as
//! a read after everything: each counter must equal the increments acknowledged, within those
//! whose fate is unknown. A statement of the workload that fails (other than by the refusals
//! above) is a finding too.

use super::{Answer, BypassCanary, BypassSimulation};
use cluster::payload::{self, KeyPlacement, SqlPayload, SqlTarget};
use cluster::sql_route::{route_of, SqlRoute};
use ecast::{Completion, GatewayCommand, GatewayInput, Isolation};
use engine::{Command, EngineError, Outcome, Value};
use lincheck::{Budget, CheckResult, Model, Operation as Op};
use placement::{PositionSet, ProcessId};
use std::collections::BTreeMap;

/// Message ids of this mode (inside the SQL modes' id range, `sql::SQL_ID_BASE..1 << 62`).
pub(super) const STATEMENT_ID_BASE: u64 = 1 << 50;
const TABLES: usize = 2;
/// Values of `grp`: rows `k` start in group `k % GROUPS`.
const GROUPS: i64 = 4;
/// A message refused for a configuration change is sent again at most this often, and a
/// statement refused for a stale catalog planned again at most this often.
const PLANS_MAX: u32 = 8;
/// A table held this long by the same undecided two-phase statement: the holder is aborted.
const BUSY_ABORT_TICKS: u64 = 400;
/// Search budget of the checker per run.
const CHECK_STEPS_MAX: u64 = 20_000_000;

fn table(index: usize) -> String {
    format!("t{index}")
}

/// What a statement does, as the model sees it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Input {
    Insert {
        table: usize,
        k: i64,
        grp: i64,
    },
    IncrementKey {
        table: usize,
        k: i64,
    },
    IncrementGroup {
        table: usize,
        grp: i64,
    },
    ReadKey {
        table: usize,
        k: i64,
    },
    ReadGroup {
        table: usize,
        grp: i64,
    },
    ReadRange {
        table: usize,
        low: i64,
        high: i64,
    },
    CreateIndex {
        table: usize,
    },
    AddColumn {
        table: usize,
        column: usize,
        default: i64,
    },
    SetDefault {
        table: usize,
        default: i64,
    },
    /// The final state, read from the groups after the run.
    Final {
        table: usize,
    },
}

impl Input {
    fn table(&self) -> usize {
        match self {
            Input::Insert { table, .. }
            | Input::IncrementKey { table, .. }
            | Input::IncrementGroup { table, .. }
            | Input::ReadKey { table, .. }
            | Input::ReadGroup { table, .. }
            | Input::ReadRange { table, .. }
            | Input::CreateIndex { table }
            | Input::AddColumn { table, .. }
            | Input::SetDefault { table, .. }
            | Input::Final { table } => *table,
        }
    }

    fn is_read(&self) -> bool {
        matches!(
            self,
            Input::ReadKey { .. }
                | Input::ReadGroup { .. }
                | Input::ReadRange { .. }
                | Input::Final { .. }
        )
    }

    fn sql(&self) -> String {
        match self {
            Input::Insert { table: t, k, grp } => {
                format!("INSERT INTO {} (k, grp) VALUES ({k}, {grp})", table(*t))
            }
            Input::IncrementKey { table: t, k } => {
                format!("UPDATE {} SET n = n + 1 WHERE k = {k}", table(*t))
            }
            Input::IncrementGroup { table: t, grp } => {
                format!("UPDATE {} SET n = n + 1 WHERE grp = {grp}", table(*t))
            }
            Input::ReadKey { table: t, k } => format!("SELECT * FROM {} WHERE k = {k}", table(*t)),
            Input::ReadGroup { table: t, grp } => {
                format!("SELECT * FROM {} WHERE grp = {grp}", table(*t))
            }
            Input::ReadRange {
                table: t,
                low,
                high,
            } => format!(
                "SELECT * FROM {} WHERE k >= {low} AND k < {high}",
                table(*t)
            ),
            Input::CreateIndex { table: t } => {
                format!("CREATE INDEX {0}_grp ON {0} (grp)", table(*t))
            }
            Input::AddColumn {
                table: t,
                column,
                default,
            } => format!(
                "ALTER TABLE {} ADD COLUMN c{column} BIGINT DEFAULT {default}",
                table(*t)
            ),
            Input::SetDefault { table: t, default } => format!(
                "ALTER TABLE {} ALTER COLUMN n SET DEFAULT {default}",
                table(*t)
            ),
            Input::Final { table: t } => format!("SELECT * FROM {}", table(*t)),
        }
    }
}

/// What a statement answered: rows changed, rows read (each row's values in column order,
/// NULL as `i64::MIN`, sorted by key), or done (DDL).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Output {
    Count(u64),
    Rows(Vec<Vec<i64>>),
    Done,
}

/// One table as the model holds it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct TableState {
    /// Rows by key: k, grp, n, then the added columns.
    rows: BTreeMap<i64, Vec<i64>>,
    default_n: i64,
    /// The added columns' defaults, in order.
    added: Vec<i64>,
}

impl TableState {
    fn initial(rows: i64) -> TableState {
        TableState {
            rows: (0..rows).map(|k| (k, vec![k, k % GROUPS, 0])).collect(),
            default_n: 0,
            added: Vec::new(),
        }
    }

    fn matching(&self, input: &Input) -> Vec<Vec<i64>> {
        self.rows
            .iter()
            .filter(|(k, row)| match input {
                Input::ReadKey { k: key, .. } => *k == key,
                Input::ReadGroup { grp, .. } => row[1] == *grp,
                Input::ReadRange { low, high, .. } => (*low..*high).contains(*k),
                _ => true,
            })
            .map(|(_, row)| row.clone())
            .collect()
    }
}

/// The sequential specification: one table's rows (the history is split per table).
pub(super) struct TablesModel {
    pub(super) initial_rows: i64,
}

impl Model for TablesModel {
    type State = TableState;
    type Input = Input;
    type Output = Output;

    fn init(&self) -> TableState {
        TableState::initial(self.initial_rows)
    }

    fn step(
        &self,
        state: &TableState,
        input: &Input,
        output: Option<&Output>,
    ) -> Option<TableState> {
        let mut next = state.clone();
        let expected = match input {
            Input::Insert { k, grp, .. } => {
                if next.rows.contains_key(k) {
                    return None; // Keys are unique: a second insert would fail.
                }
                let mut row = vec![*k, *grp, next.default_n];
                row.extend(next.added.iter().copied());
                next.rows.insert(*k, row);
                Output::Count(1)
            }
            Input::IncrementKey { k, .. } => match next.rows.get_mut(k) {
                Some(row) => {
                    row[2] += 1;
                    Output::Count(1)
                }
                None => Output::Count(0),
            },
            Input::IncrementGroup { grp, .. } => {
                let mut count = 0;
                for row in next.rows.values_mut().filter(|row| row[1] == *grp) {
                    row[2] += 1;
                    count += 1;
                }
                Output::Count(count)
            }
            Input::ReadKey { .. }
            | Input::ReadGroup { .. }
            | Input::ReadRange { .. }
            | Input::Final { .. } => Output::Rows(next.matching(input)),
            Input::CreateIndex { .. } => Output::Done,
            Input::AddColumn { default, .. } => {
                next.added.push(*default);
                for row in next.rows.values_mut() {
                    row.push(*default);
                }
                Output::Done
            }
            Input::SetDefault { default, .. } => {
                next.default_n = *default;
                Output::Done
            }
        };
        match output {
            Some(output) if *output != expected => None,
            _ => Some(next),
        }
    }

    fn partition(&self, history: &[Op<Input, Output>]) -> Vec<Vec<usize>> {
        (0..TABLES)
            .map(|table| {
                (0..history.len())
                    .filter(|index| history[*index].input.table() == table)
                    .collect()
            })
            .collect()
    }

    fn is_read_only(&self, input: &Input) -> bool {
        input.is_read() || matches!(input, Input::CreateIndex { .. })
    }
}

#[derive(Clone, Debug, Default)]
pub struct StatementStats {
    pub started: u64,
    /// Statements answered, by kind.
    pub inserts: u64,
    pub point_updates: u64,
    pub group_updates: u64,
    pub point_reads: u64,
    pub scans: u64,
    pub ddl: u64,
    /// Messages sent through the bypass (one partition) and to several partitions.
    pub single_partition: u64,
    pub multi_partition: u64,
    /// Writes sent in two phases.
    pub two_phase: u64,
    /// Refused for a stale catalog (then re-planned), and catalog reads.
    pub stale_refusals: u64,
    pub catalog_reads: u64,
    /// Messages refused for a configuration change (then sent again).
    pub refused: u64,
    /// Sent again for an undecided two-phase statement holding the table, and holders aborted.
    pub busy: u64,
    pub holders_aborted: u64,
    /// Writes whose outcome the gateway did not learn.
    pub unknown: u64,
    /// Whether the checker's search finished (false: its budget ran out).
    pub checked: bool,
}

/// Where a slot's statement is.
#[derive(Clone, Debug)]
enum Phase {
    /// Reading the catalog (message id).
    Catalog,
    /// Sent once (one message).
    Once,
    Prepare {
        statement: u64,
    },
    Decide {
        statement: u64,
        commit: bool,
        /// The failing vote (its engine outcome bytes) of an abort.
        vote: Option<Vec<u8>>,
    },
}

#[derive(Clone, Debug)]
enum Waiting {
    Message(u64),
    Pause(u64),
}

#[derive(Clone, Debug)]
struct Run {
    input: Input,
    call: u64,
    /// Planned against the cached catalog of this digest.
    digest: u64,
    execution: Option<sql::Execution>,
    phase: Phase,
    waiting: Waiting,
    /// Stale-catalog re-plans so far.
    plans: u32,
    /// The two-phase statement in the way, and since when.
    busy: Option<(u64, u64)>,
}

#[derive(Clone, Debug)]
struct Pending {
    gateway: usize,
    /// `None`: nobody waits for it (an abort of another's statement).
    slot: Option<usize>,
    operation: Vec<u8>,
    read: bool,
    route: SqlRoute,
    target: SqlTarget,
    plans: u32,
    sequenced: Option<(ecast::Sequence, ecast::Timestamp, u64)>,
}

pub(super) struct StatementState {
    runs: Vec<Vec<Option<Run>>>,
    idle_until: Vec<Vec<u64>>,
    catalogs: Vec<Option<(u64, sql::MemoryCatalog)>>,
    pending: BTreeMap<u64, Pending>,
    next_message: u64,
    next_key: [i64; TABLES],
    initial_rows: i64,
    /// Gateway 0's slot 0 runs the DDL: the next one, and when.
    ddl: Vec<Input>,
    ddl_at: u64,
    ddl_every: u64,
    history: Vec<Op<Input, Output>>,
    /// Two-phase statements' decisions: when first sent.
    decided: BTreeMap<u64, u64>,
    findings: Vec<String>,
    pub(super) stats: StatementStats,
}

/// The tables and their first rows, as store operations executed at a partition's start
/// (every partition holds the catalog and keeps the rows it holds).
pub(super) fn initial_operations(rows: u64) -> Vec<Vec<u8>> {
    let mut catalog = sql::MemoryCatalog::new();
    let mut operations = Vec::new();
    let plan = |text: &str, catalog: &mut sql::MemoryCatalog| -> sql::Execution {
        let statement = sql::parse(text).expect("the setup parses").remove(0);
        match sql::plan_statement(&statement, catalog).expect("the setup plans") {
            sql::Plan::Execute(execution) => {
                if let Some(entry) = execution.created_table.clone() {
                    catalog.insert(entry);
                }
                execution
            }
            other => panic!("the setup plans to an execution: {other:?}"),
        }
    };
    for index in 0..TABLES {
        let name = table(index);
        let create = plan(
            &format!(
                "CREATE TABLE {name} (k BIGINT PRIMARY KEY, grp BIGINT NOT NULL, n BIGINT NOT NULL DEFAULT 0)"
            ),
            &mut catalog,
        );
        operations.push(
            SqlPayload {
                operation: store::sql_operation(&Command::Batch(create.operations)),
                target: SqlTarget::Arcs(vec![PositionSet::whole()]),
            }
            .encode(),
        );
        let values: Vec<String> = (0..rows as i64)
            .map(|k| format!("({k}, {})", k % GROUPS))
            .collect();
        let insert = plan(
            &format!("INSERT INTO {name} (k, grp) VALUES {}", values.join(", ")),
            &mut catalog,
        );
        let keys = (0..rows as i64)
            .map(|k| store::rows::placement_key(&name, &Value::BigInt(k)))
            .collect();
        operations.push(
            SqlPayload {
                operation: store::sql_operation(&Command::Batch(insert.operations)),
                target: SqlTarget::Keys(keys),
            }
            .encode(),
        );
    }
    operations
}

impl StatementState {
    pub(super) fn new(
        seed: u64,
        gateways: usize,
        slots: usize,
        rows: u64,
        fault_ticks: u64,
    ) -> Self {
        let mut prng = stdx::Prng::new(seed ^ 0x5747_e3e7_5747_e3e7);
        // Per table: an index, then added columns and new defaults of `n`, in turns.
        let mut ddl = Vec::new();
        for table in 0..TABLES {
            ddl.push(Input::CreateIndex { table });
        }
        for round in 0..4 {
            for table in 0..TABLES {
                ddl.push(Input::AddColumn {
                    table,
                    column: round,
                    default: 100 * (round as i64 + 1) + table as i64,
                });
                ddl.push(Input::SetDefault {
                    table,
                    default: 1_000 * (round as i64 + 1),
                });
            }
        }
        let ddl_every = fault_ticks / prng.range_inclusive(6, 14);
        ddl.reverse();
        StatementState {
            runs: vec![vec![None; slots]; gateways],
            idle_until: vec![vec![0; slots]; gateways],
            catalogs: vec![None; gateways],
            pending: BTreeMap::new(),
            next_message: STATEMENT_ID_BASE,
            next_key: [rows as i64; TABLES],
            initial_rows: rows as i64,
            ddl,
            ddl_at: prng.range_inclusive(50, ddl_every.max(51)),
            ddl_every: ddl_every.max(1),
            history: Vec::new(),
            decided: BTreeMap::new(),
            findings: Vec::new(),
            stats: StatementStats::default(),
        }
    }

    pub(super) fn settled(&self) -> bool {
        self.pending.is_empty() && self.runs.iter().flatten().all(Option::is_none)
    }
}

/// The engine outcomes of a completion's answer parts, in part order (parts another part's
/// outcome covers left out); `None` if a part is missing or does not decode.
fn outcomes_of(target: &SqlTarget, answers: &BTreeMap<u64, Answer>) -> Option<Vec<Outcome>> {
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

/// Whether a two-phase statement's vote fails it (the runtime's `sql::vote_failed`).
fn vote_failed(outcome: &Outcome) -> bool {
    match outcome {
        Outcome::Executed(result) => result.is_err(),
        Outcome::Batch(results) => results.iter().any(Result::is_err),
        Outcome::Explained(result) => result.is_err(),
        Outcome::Error(_) => true,
    }
}

/// A result's rows as the model sees them, sorted by key; `None` if a value is not a BIGINT
/// or NULL.
fn model_rows(rows: &[Vec<Value>]) -> Option<Vec<Vec<i64>>> {
    let mut converted: Vec<Vec<i64>> = rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|value| match value {
                    Value::BigInt(number) => Some(*number),
                    Value::Null => Some(i64::MIN),
                    _ => None,
                })
                .collect()
        })
        .collect::<Option<_>>()?;
    converted.sort();
    Some(converted)
}

impl BypassSimulation {
    fn statements(&mut self) -> &mut StatementState {
        self.statements.as_mut().expect("the statements mode")
    }

    pub(super) fn statement_pending(
        &mut self,
        id: u64,
    ) -> Option<&mut Option<(ecast::Sequence, ecast::Timestamp, u64)>> {
        Some(&mut self.statements.as_mut()?.pending.get_mut(&id)?.sequenced)
    }

    fn statement_message_id(&mut self) -> u64 {
        let state = self.statements();
        state.next_message += 1;
        state.next_message
    }

    pub(super) fn statements_tick(&mut self, gateway: usize) {
        // Answers of sequenced messages not complete after a while are asked for again.
        let now = self.now;
        let due = super::due_recalls(
            self.statements()
                .pending
                .values_mut()
                .filter(|pending| pending.gateway == gateway)
                .map(|pending| &mut pending.sequenced),
            now,
        );
        self.send_recalls(gateway, due);
        for slot in 0..self.options.slots {
            let run = self.statements().runs[gateway][slot].clone();
            match run {
                None => {
                    if self.faults_on() && self.now >= self.statements().idle_until[gateway][slot] {
                        self.statement_start(gateway, slot);
                    }
                }
                Some(Run {
                    waiting: Waiting::Pause(until),
                    ..
                }) if self.now >= until => self.statement_send(gateway, slot),
                Some(_) => {}
            }
        }
    }

    fn statement_start(&mut self, gateway: usize, slot: usize) {
        let now = self.now;
        let ddl_due = gateway == 0 && slot == 0 && now >= self.statements().ddl_at;
        let input = match ddl_due.then(|| self.statements().ddl.pop()).flatten() {
            Some(ddl) => {
                let every = self.statements().ddl_every;
                self.statements().ddl_at = now + every;
                ddl
            }
            None => self.statement_draw(),
        };
        let state = self.statements();
        state.stats.started += 1;
        state.runs[gateway][slot] = Some(Run {
            input,
            call: now,
            digest: 0,
            execution: None,
            phase: Phase::Once,
            waiting: Waiting::Pause(now),
            plans: 0,
            busy: None,
        });
        self.statement_plan(gateway, slot);
    }

    fn statement_draw(&mut self) -> Input {
        let table = self.prng.below(TABLES as u64) as usize;
        let known = self.statements().next_key[table];
        let k = self.prng.below(known as u64 + 1) as i64;
        let grp = self.prng.below(GROUPS as u64) as i64;
        match self.prng.below(100) {
            0..=14 => {
                let state = self.statements();
                let k = state.next_key[table];
                state.next_key[table] += 1;
                Input::Insert { table, k, grp }
            }
            15..=39 => Input::IncrementKey { table, k },
            40..=54 => Input::IncrementGroup { table, grp },
            55..=74 => Input::ReadKey { table, k },
            75..=87 => Input::ReadGroup { table, grp },
            _ => {
                let low = self.prng.below(known as u64) as i64;
                let high = low + 1 + self.prng.below(4) as i64;
                Input::ReadRange { table, low, high }
            }
        }
    }

    /// Plans the slot's statement against the gateway's cached catalog, or reads the catalog
    /// first (none cached, or the plan failed against it: a table or column it lacks).
    fn statement_plan(&mut self, gateway: usize, slot: usize) {
        let run = self.statements().runs[gateway][slot]
            .clone()
            .expect("running");
        let Some((digest, catalog)) = self.statements().catalogs[gateway].clone() else {
            return self.statement_read_catalog(gateway, slot);
        };
        let text = run.input.sql();
        let statement = sql::parse(&text).expect("the workload parses").remove(0);
        let execution = match sql::plan_statement(&statement, &catalog) {
            Ok(sql::Plan::Execute(execution)) => execution,
            Ok(other) => panic!("{text} plans to an execution, not {other:?}"),
            Err(error) => {
                if run.plans < PLANS_MAX {
                    let run = self.statements().runs[gateway][slot]
                        .as_mut()
                        .expect("running");
                    run.plans += 1;
                    return self.statement_read_catalog(gateway, slot);
                }
                let finding = format!("{text}: does not plan: {error:?}");
                return self.statement_finish(gateway, slot, Err(finding));
            }
        };
        let state = self.statements();
        let run = state.runs[gateway][slot].as_mut().expect("running");
        run.digest = digest;
        run.execution = Some(execution);
        run.phase = Phase::Once;
        run.busy = None;
        self.statement_send(gateway, slot);
    }

    fn statement_read_catalog(&mut self, gateway: usize, slot: usize) {
        self.statements().stats.catalog_reads += 1;
        let run = self.statements().runs[gateway][slot]
            .as_mut()
            .expect("running");
        run.phase = Phase::Catalog;
        self.statement_send(gateway, slot);
    }

    /// Sends (again) the slot's message for its phase.
    fn statement_send(&mut self, gateway: usize, slot: usize) {
        let run = self.statements().runs[gateway][slot]
            .clone()
            .expect("running");
        let guard_ignored = self.options.canary == Some(BypassCanary::SqlStaleCatalog);
        let (operation, read, route) = match &run.phase {
            Phase::Catalog => (store::catalog_operation(), true, SqlRoute::Any),
            phase => {
                let execution = run.execution.as_ref().expect("planned");
                let batch = Command::Batch(execution.operations.clone());
                // The canary: the catalog guard is not applied (what a partition ignoring it
                // executes), so a statement planned against an older catalog runs.
                let command = if guard_ignored {
                    batch
                } else {
                    Command::Guarded {
                        catalog: run.digest,
                        command: Box::new(batch),
                    }
                };
                let catalog = self.statements().catalogs[gateway].clone();
                let schema_of =
                    |name: &str| Some(catalog.as_ref()?.1.tables.get(name)?.schema.clone());
                let route = route_of(&execution.routing, &command, &schema_of, None);
                let read = command.is_read();
                let operation = store::sql_operation(&command);
                match phase {
                    Phase::Once => {
                        let partitions = match &route {
                            SqlRoute::Every => 2,
                            SqlRoute::Keys(keys) => {
                                let configuration = self.gateways[gateway].gateway.configuration();
                                let holders: std::collections::BTreeSet<ProcessId> = keys
                                    .iter()
                                    .map(|key| {
                                        super::partition_holding(
                                            configuration,
                                            KeyPlacement::hash().position(key),
                                        )
                                    })
                                    .collect();
                                holders.len()
                            }
                            SqlRoute::Any => 1,
                            // A range-placed table's key range (none in this workload, whose
                            // tables are placed by hash): the arcs covering it, as the runtime.
                            SqlRoute::Range(range) => payload::partition_arcs(
                                self.gateways[gateway].gateway.configuration(),
                                range,
                            )
                            .len(),
                        };
                        let several = partitions > 1
                            || (route == SqlRoute::Every
                                && payload::partition_arcs(
                                    self.gateways[gateway].gateway.configuration(),
                                    &PositionSet::whole(),
                                )
                                .len()
                                    > 1);
                        if !read && several {
                            let statement = self.prng.next_u64();
                            self.statements().stats.two_phase += 1;
                            let run = self.statements().runs[gateway][slot]
                                .as_mut()
                                .expect("running");
                            run.phase = Phase::Prepare { statement };
                            return self.statement_send(gateway, slot);
                        }
                        (operation, read, route)
                    }
                    Phase::Prepare { statement } => (
                        store::prepare_operation(*statement, &operation),
                        false,
                        SqlRoute::Every,
                    ),
                    Phase::Decide {
                        statement, commit, ..
                    } => (
                        store::decide_operation(*statement, *commit),
                        false,
                        SqlRoute::Every,
                    ),
                    Phase::Catalog => unreachable!("matched above"),
                }
            }
        };
        if route == SqlRoute::Keys(Vec::new()) {
            // No key, no partition: nothing to run.
            return self.statement_answered(gateway, slot, Some(Vec::new()));
        }
        let id = self.statement_message_id();
        let run = self.statements().runs[gateway][slot]
            .as_mut()
            .expect("running");
        run.waiting = Waiting::Message(id);
        let pending = Pending {
            gateway,
            slot: Some(slot),
            operation,
            read,
            route,
            target: SqlTarget::Any,
            plans: 1,
            sequenced: None,
        };
        self.statement_submit(id, pending);
    }

    /// The runtime gateway's `submit_sql`: pinned to the partition arcs of its configuration
    /// when it goes to every partition, else to the keys' positions (the bypass when one
    /// group holds them).
    fn statement_submit(&mut self, id: u64, mut pending: Pending) {
        let configuration = self.gateways[pending.gateway].gateway.configuration();
        let version = configuration.version();
        let placement = KeyPlacement::hash();
        let (target, positions) = match &pending.route {
            SqlRoute::Any => (
                SqlTarget::Any,
                Some(vec![placement.position(payload::SQL_ANCHOR)]),
            ),
            SqlRoute::Keys(keys) => (
                SqlTarget::Keys(keys.clone()),
                Some(keys.iter().map(|key| placement.position(key)).collect()),
            ),
            SqlRoute::Every => {
                let arcs = payload::partition_arcs(configuration, &PositionSet::whole());
                (
                    SqlTarget::Arcs(arcs.into_iter().map(|(arc, _)| arc).collect()),
                    None,
                )
            }
            SqlRoute::Range(range) => {
                let arcs = payload::partition_arcs(configuration, range);
                (
                    SqlTarget::Arcs(arcs.into_iter().map(|(arc, _)| arc).collect()),
                    None,
                )
            }
        };
        pending.sequenced = None;
        let sql_payload = SqlPayload {
            operation: pending.operation.clone(),
            target: target.clone(),
        };
        let parts = sql_payload.parts();
        let bytes = sql_payload.encode();
        let read = pending.read;
        let range = match &pending.route {
            SqlRoute::Range(range) => range.clone(),
            _ => PositionSet::whole(),
        };
        let stats = &mut self.statements.as_mut().expect("the statements mode").stats;
        match &positions {
            Some(positions) if positions.len() == 1 => stats.single_partition += 1,
            _ => stats.multi_partition += 1,
        }
        let command = match positions {
            Some(positions) if read => GatewayCommand::Read {
                isolation: Isolation::Sequential,
                positions,
                payload: bytes,
                parts,
            },
            Some(positions) => GatewayCommand::Write {
                needs_answers: true,
                positions,
                payload: bytes,
                parts,
            },
            None if read => GatewayCommand::RangeRead {
                isolation: Isolation::Sequential,
                range,
                payload: bytes,
                parts,
            },
            None => GatewayCommand::RangeWrite {
                range,
                payload: bytes,
                parts,
            },
        };
        let input = match target {
            SqlTarget::Arcs(_) => GatewayInput::SubmitPinned {
                id,
                command,
                version,
            },
            _ => GatewayInput::Submit { id, command },
        };
        let gateway = pending.gateway;
        pending.target = target;
        self.statements().pending.insert(id, pending);
        self.gateway_step(gateway, input);
    }

    /// A message's completion (`GatewayEffect::Complete` of an id of this mode).
    pub(super) fn statements_complete(&mut self, id: u64, completion: Completion<Answer>) {
        let Some(mut pending) = self.statements().pending.remove(&id) else {
            return;
        };
        let again = match &completion {
            Completion::Failed(ecast::Failure::NoAnswer) => pending.read,
            Completion::Failed(ecast::Failure::Refused(_)) => true,
            _ => false,
        };
        if again && pending.plans < PLANS_MAX {
            // Planned against a configuration that moved on (nothing ran), or a read that
            // found no answer: sent again.
            self.statements().stats.refused += 1;
            pending.plans += 1;
            let next = self.statement_message_id();
            if let Some(slot) = pending.slot {
                let gateway = pending.gateway;
                if let Some(run) = self.statements().runs[gateway][slot].as_mut() {
                    run.waiting = Waiting::Message(next);
                }
            }
            return self.statement_submit(next, pending);
        }
        let Some(slot) = pending.slot else {
            return;
        };
        let gateway = pending.gateway;
        let waited = matches!(
            self.statements().runs[gateway][slot].as_ref().map(|run| &run.waiting),
            Some(Waiting::Message(own)) if *own == id
        );
        if !waited {
            return;
        }
        let answers = match completion {
            Completion::Done(answers) => Some(answers),
            Completion::Failed(_) => None,
        };
        let run = self.statements().runs[gateway][slot]
            .clone()
            .expect("running");
        if let Phase::Catalog = run.phase {
            let read = answers.and_then(|answers| match answers.get(&0) {
                Some(Answer::Sql(Some(bytes))) => store::decode_catalog(bytes),
                _ => None,
            });
            return match read {
                Some(read) => {
                    self.statements().catalogs[gateway] = Some(read);
                    self.statement_plan(gateway, slot)
                }
                None => {
                    let now = self.now;
                    let run = self.statements().runs[gateway][slot]
                        .as_mut()
                        .expect("running");
                    run.waiting = Waiting::Pause(now + 20);
                }
            };
        }
        let outcomes = answers.and_then(|answers| outcomes_of(&pending.target, &answers));
        match run.phase {
            Phase::Prepare { statement } => {
                let vote = outcomes.as_ref().map(|outcomes| {
                    outcomes
                        .iter()
                        .find(|outcome| vote_failed(outcome))
                        .map(Outcome::encode)
                });
                // A lost vote: abort, and the outcome is unknown (as the runtime answers).
                let (commit, vote) = match vote {
                    Some(None) => (true, None),
                    Some(Some(failed)) => (false, Some(failed)),
                    None => (false, None),
                };
                let now = self.now;
                self.statements().decided.entry(statement).or_insert(now);
                let run = self.statements().runs[gateway][slot]
                    .as_mut()
                    .expect("running");
                run.phase = Phase::Decide {
                    statement,
                    commit,
                    vote,
                };
                self.statement_send(gateway, slot)
            }
            Phase::Decide {
                commit: false,
                vote,
                ..
            } => {
                let outcomes = vote
                    .and_then(|vote| Outcome::decode(&vote).ok())
                    .map(|o| vec![o]);
                self.statement_answered(gateway, slot, outcomes)
            }
            _ => self.statement_answered(gateway, slot, outcomes),
        }
    }

    /// The statement's partition outcomes (`None`: its fate is unknown): waits for a holder,
    /// re-plans after a stale catalog, else merges and records the answer.
    fn statement_answered(&mut self, gateway: usize, slot: usize, outcomes: Option<Vec<Outcome>>) {
        let now = self.now;
        let run = self.statements().runs[gateway][slot]
            .clone()
            .expect("running");
        let Some(outcomes) = outcomes else {
            let result = if run.input.is_read() {
                Ok(None) // A read that found no answer changed nothing.
            } else {
                self.statements().stats.unknown += 1;
                Ok(Some(None))
            };
            return self.statement_finish(gateway, slot, result);
        };
        let error = outcomes.iter().find_map(|outcome| match outcome {
            Outcome::Error(error) => Some(error.clone()),
            Outcome::Batch(results) => results.iter().find_map(|result| result.clone().err()),
            Outcome::Executed(Err(error)) | Outcome::Explained(Err(error)) => Some(error.clone()),
            _ => None,
        });
        let refused = matches!(
            error,
            Some(EngineError::Busy { .. } | EngineError::StaleCatalog)
        );
        if refused && !run.input.is_read() && outcomes.iter().any(|outcome| !vote_failed(outcome)) {
            // Refused at one partition and run at another: half applied.
            let decided = match &error {
                Some(EngineError::Busy { statement, .. }) => {
                    self.statements().decided.get(statement).copied()
                }
                _ => None,
            };
            let finding = format!(
                "{}: refused by some partitions and run by others (the holder's decision sent at \
                 tick {decided:?}, now {now}): {outcomes:?}",
                run.input.sql()
            );
            return self.statement_finish(gateway, slot, Err(finding));
        }
        match error {
            Some(EngineError::Busy { statement, .. }) => {
                // Nothing ran: sent again after a pause; a holder that keeps the table is
                // aborted with an ordered decision to every partition.
                let pause = 5 + self.prng.below(20);
                let state = self.statements();
                state.stats.busy += 1;
                let run = state.runs[gateway][slot].as_mut().expect("running");
                let abort = match run.busy {
                    Some((holder, since)) if holder == statement => {
                        if now - since > BUSY_ABORT_TICKS {
                            run.busy = None;
                            true
                        } else {
                            false
                        }
                    }
                    _ => {
                        run.busy = Some((statement, now));
                        false
                    }
                };
                run.waiting = Waiting::Pause(now + pause);
                // A refused prepare was decided (aborted) already: send it afresh.
                if let Phase::Decide { .. } = run.phase {
                    run.phase = Phase::Once;
                }
                if abort {
                    self.statements().stats.holders_aborted += 1;
                    let id = self.statement_message_id();
                    let pending = Pending {
                        gateway,
                        slot: None,
                        operation: store::decide_operation(statement, false),
                        read: false,
                        route: SqlRoute::Every,
                        target: SqlTarget::Any,
                        plans: 1,
                        sequenced: None,
                    };
                    self.statement_submit(id, pending);
                }
            }
            Some(EngineError::StaleCatalog) => {
                // Nothing ran: read the catalog and plan the statement again.
                self.statements().stats.stale_refusals += 1;
                let run = self.statements().runs[gateway][slot]
                    .as_mut()
                    .expect("running");
                run.plans += 1;
                if run.plans > PLANS_MAX {
                    let finding = format!("{}: stale catalog {} times", run.input.sql(), run.plans);
                    return self.statement_finish(gateway, slot, Err(finding));
                }
                self.statement_read_catalog(gateway, slot);
            }
            Some(error) => {
                let finding = format!("{}: failed: {error:?}", run.input.sql());
                self.statement_finish(gateway, slot, Err(finding));
            }
            None => {
                let execution = run.execution.as_ref().expect("planned");
                let results: Vec<Vec<engine::OperationResult>> = outcomes
                    .into_iter()
                    .filter_map(|outcome| match outcome {
                        Outcome::Batch(results) => Some(results),
                        _ => None,
                    })
                    .collect();
                let text = run.input.sql();
                let result = match execution.finish(results) {
                    Err(error) => Err(format!("{text}: the merge failed: {error:?}")),
                    Ok(sql::StatementResult::Rows { rows, .. }) if run.input.is_read() => {
                        match model_rows(&rows) {
                            Some(rows) => Ok(Some(Some(Output::Rows(rows)))),
                            None => Err(format!("{text}: read {rows:?}")),
                        }
                    }
                    Ok(sql::StatementResult::Command { tag }) => match run.input {
                        Input::Insert { .. }
                        | Input::IncrementKey { .. }
                        | Input::IncrementGroup { .. } => {
                            match tag.rsplit(' ').next().and_then(|count| count.parse().ok()) {
                                Some(count) => Ok(Some(Some(Output::Count(count)))),
                                None => Err(format!("{text}: answered {tag}")),
                            }
                        }
                        _ => Ok(Some(Some(Output::Done))),
                    },
                    Ok(other) => Err(format!("{text}: answered {other:?}")),
                };
                self.statement_finish(gateway, slot, result);
            }
        }
    }

    /// Ends the slot's statement: `Ok(Some(output))` recorded (`None`: its fate unknown),
    /// `Ok(None)` not recorded (a read without an answer), `Err` a finding.
    fn statement_finish(
        &mut self,
        gateway: usize,
        slot: usize,
        result: Result<Option<Option<Output>>, String>,
    ) {
        let now = self.now;
        let think = self.prng.range_inclusive(0, self.options.think_ticks_max);
        let client = (gateway * self.options.slots + slot) as u64;
        let state = self.statements();
        let run = state.runs[gateway][slot].take().expect("running");
        state.idle_until[gateway][slot] = now + think;
        match result {
            Err(finding) => state.findings.push(finding),
            Ok(None) => {}
            Ok(Some(output)) => {
                let stats = &mut state.stats;
                if output.is_some() {
                    match run.input {
                        Input::Insert { .. } => stats.inserts += 1,
                        Input::IncrementKey { .. } => stats.point_updates += 1,
                        Input::IncrementGroup { .. } => stats.group_updates += 1,
                        Input::ReadKey { .. } => stats.point_reads += 1,
                        Input::ReadGroup { .. } | Input::ReadRange { .. } => stats.scans += 1,
                        _ => stats.ddl += 1,
                    }
                }
                state.history.push(Op {
                    client,
                    call: run.call,
                    return_time: output.as_ref().map(|_| now),
                    input: run.input,
                    output,
                });
            }
        }
    }

    /// The checks at the end: no statement failed, and the history with the final state read
    /// from the groups is linearisable against the tables' model.
    pub(super) fn check_statements(&mut self) -> Result<(), crate::checkers::Violation> {
        let fail = |report: String| {
            Err(crate::checkers::Violation {
                checker: "sql_statements",
                report,
            })
        };
        let state = self.statements.as_ref().expect("the statements mode");
        if let Some(finding) = state.findings.first() {
            return fail(format!("{finding} ({} findings)", state.findings.len()));
        }
        let configuration = self.current();
        let end = self.now + 1;
        let mut history = state.history.clone();
        for index in 0..TABLES {
            let name = table(index);
            let mut rows = Vec::new();
            for k in 0..state.next_key[index] {
                let key = store::rows::placement_key(&name, &Value::BigInt(k));
                let holder =
                    super::partition_holding(configuration, KeyPlacement::hash().position(&key));
                let machine = self.machine(self.index_of(holder));
                let Some(store) = machine.data().sql_store() else {
                    return fail("a partition without SQL data".into());
                };
                let Some(table) = store.engine.table(&name) else {
                    return fail(format!("group {} has no table {name}", holder.0));
                };
                if let Some(row) = table
                    .rows
                    .values()
                    .find(|row| row.first() == Some(&Value::BigInt(k)))
                {
                    rows.push(row.clone());
                }
            }
            let Some(rows) = model_rows(&rows) else {
                return fail(format!("table {name} holds a value that is not a BIGINT"));
            };
            history.push(Op::completed(
                u64::MAX,
                end,
                end,
                Input::Final { table: index },
                Output::Rows(rows),
            ));
        }
        let model = TablesModel {
            initial_rows: state.initial_rows,
        };
        let result = lincheck::check(&model, &history, Budget::steps(CHECK_STEPS_MAX));
        self.statements().stats.checked = !result.is_unknown();
        match result {
            CheckResult::Illegal(violation) => fail(format!(
                "not strictly serialisable ({} statements): {violation}",
                history.len()
            )),
            CheckResult::Ok | CheckResult::Unknown => Ok(()),
        }
    }
}
