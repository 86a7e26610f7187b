//! SQL on a partitioned cluster: the PostgreSQL front end (`crate::pg`) of every storage
//! process runs its statements through the process's gateway task. A table's rows are spread
//! over every partition by their placement keys (`store::rows`: the table and the row's
//! partition key value, hashed onto the ring the RESP namespace uses); every partition holds
//! the whole catalog. A statement goes where its plan's `sql::Routing` says (Sprint §6.1):
//!
//! - pinned to partition keys (`Keys`: `WHERE key = c`, `key IN (…)`; `RowsByKey`: an insert's
//!   rows; `NewRowIds`: an insert into a table without a primary key, whose rows first get
//!   hidden row ids here, `RowIds`), to the partitions holding those keys: one partition is the
//!   router bypass straight to its group, several are one E-Cast message;
//! - anything else (`Every`: non-key predicates, DDL, subqueries), to every partition as one
//!   E-Cast message at one point of the global order, so DDL changes every partition's catalog
//!   at the same point and a scan reads a consistent cut; a write (DDL included) reaching
//!   several partitions goes as two such messages, a prepare and a decision
//!   (`store::prepared`);
//! - the catalog read, to one partition (the one holding `payload::SQL_ANCHOR`).
//!
//! Each partition answers one engine outcome over its rows; the front end merges them
//! (`sql::Execution::finish`: key-ordered union, merge sort, limit, aggregate partials).
//! Statements are ordered in each partition's log, reads included, so every statement is
//! strictly serialisable with every other (the hold rules order single- and multi-partition
//! work, `docs/internals/ecast.md`).
//!
//! The RESP namespace's SQL table `kv` spans every partition, so a statement on it is refused
//! (0A000) here rather than answered from one partition's keys.

use super::gateway::{Job, Work};
use super::stats;
use crate::pg::{RoutedBackend, TransactionBackend, TransactionContext};
use crate::sql_backend::{BackendError, SqlBackend};
use ecast::Isolation;
use kv::Outcome;
use placement::{Configuration, Position};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
// The routing rules are pure: they live in `cluster::sql_route`, shared with the simulator.
pub(crate) use cluster::sql_route::{operations_of, route_of, SqlRoute};
// So are the rules of waits, retries and transactions (`cluster::transaction_driver`).
use cluster::transaction_driver::{
    self, Action, Autocommit, DriverSettings, Hint, Kind, Send, StatementOptions, Transaction,
};

/// The statement's answer the gateway task hands back in `Outcome::Foreign`: each answering
/// partition's name and engine outcome bytes.
pub(crate) fn encode_answers(answers: &[(String, Vec<u8>)]) -> Vec<u8> {
    postcard::to_allocvec(answers).expect("answers serialise")
}

fn decode_answers(bytes: &[u8]) -> Option<Vec<(String, Vec<u8>)>> {
    postcard::from_bytes(bytes).ok()
}

/// How EXPLAIN names the partition of `configuration` holding `position`: its destination
/// (partition group) and its arc.
pub(crate) fn partition_name(configuration: &Configuration, position: Position) -> String {
    match configuration
        .partitions()
        .into_iter()
        .find(|partition| partition.span.contains(position))
    {
        Some(partition) => {
            let group = partition
                .replicas
                .first()
                .copied()
                .unwrap_or(partition.owner);
            format!(
                "group {} [{:016x}, {:016x})",
                group.0, partition.span.start.0, partition.span.end.0
            )
        }
        None => format!("position {:016x}", position.0),
    }
}

/// How many partitions of `configuration` hold `positions`.
pub(crate) fn partitions_of(configuration: &Configuration, positions: &[Position]) -> usize {
    let partitions = configuration.partitions();
    let mut holding: Vec<usize> = positions
        .iter()
        .filter_map(|position| {
            partitions
                .iter()
                .position(|partition| partition.span.contains(*position))
        })
        .collect();
    holding.sort_unstable();
    holding.dedup();
    holding.len()
}

/// Whether a two-phase statement's vote (a partition's engine outcome bytes) fails it.
pub(crate) fn vote_failed(vote: &[u8]) -> bool {
    match engine::Outcome::decode(vote) {
        Ok(engine::Outcome::Executed(result)) => result.is_err(),
        Ok(engine::Outcome::Batch(results)) => results.iter().any(Result::is_err),
        Ok(engine::Outcome::Explained(result)) => result.is_err(),
        Ok(engine::Outcome::Error(_)) | Err(_) => true,
    }
}

/// The hidden row ids this process gives (`sql::with_row_ids`): a random 31-bit prefix drawn
/// at start, then a counter, `prefix << 32 | counter`. Unique in the cluster unless two
/// gateways (over all restarts) draw the same prefix: about n² / 2^32 for n processes started,
/// and then only ids of the same counter value collide, as a duplicate key error (23505) on
/// insert. A prefix is drawn again once its counter is spent.
struct RowIds {
    prefix: u64,
    counter: u64,
}

impl RowIds {
    fn new() -> RowIds {
        RowIds {
            prefix: RowIds::draw(),
            counter: 0,
        }
    }

    fn draw() -> u64 {
        (crate::os::random_u64() & 0x7fff_ffff).max(1)
    }

    /// A new transaction id: the process's prefix and the shared counter.
    fn transaction_id(&mut self) -> u64 {
        self.next() as u64
    }

    fn next(&mut self) -> i64 {
        if self.counter == u64::from(u32::MAX) {
            *self = RowIds::new();
        }
        self.counter += 1;
        i64::try_from(self.prefix << 32 | self.counter).expect("31 bits of prefix")
    }
}

/// Hidden, test-only (debug builds, `TESSERA_TEST_ABANDONED_AFTER_MS`): how long a waited-for
/// holder may show no new statement before a waiter aborts it as abandoned, instead of the
/// drivers' 20 s (real-process tests that wait out an abandonment on purpose run with less).
fn test_abandoned_after_ms() -> Option<u64> {
    if !cfg!(debug_assertions) {
        return None;
    }
    static VALUE: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *VALUE.get_or_init(|| {
        std::env::var("TESSERA_TEST_ABANDONED_AFTER_MS")
            .ok()
            .and_then(|value| value.parse().ok())
    })
}

/// A storage process's `SqlBackend`: its gateway task, the last catalog read, its hidden
/// row ids, and its pub/sub hub (transactions' ends wake waiters: the drivers' hints).
#[derive(Clone)]
pub struct ClusterBackend {
    jobs: mpsc::Sender<Job>,
    catalog: Arc<Mutex<Option<crate::sql_backend::SharedCatalog>>>,
    row_ids: Arc<Mutex<RowIds>>,
    hub: Option<Arc<super::pubsub::Hub>>,
    /// The storage process this gateway lives in (0: not said): every partition records it
    /// as the owner of this gateway's transactions, so that a suspicion of the process aborts
    /// them (`DriverSettings::owner`).
    owner: u64,
    /// The gateway's incarnation, shared by every session of the process (0: none): with the
    /// owner, what the partitions judge (`DriverSettings::incarnation`).
    incarnation: Arc<GatewayIncarnation>,
}

/// A gateway's incarnation, shared by every session of its process.
#[derive(Debug, Default)]
pub struct GatewayIncarnation {
    /// The incarnation (0: none yet).
    pub current: AtomicU64,
    /// The incarnation an owned table lock made current at every partition
    /// (`transaction_driver::Transaction::announced`): while it is `current`, statements take
    /// their intention locks where their rows are (`DriverSettings::announced`).
    pub announced: AtomicU64,
}

/// Hidden, test-only (debug builds, `TESSERA_CANARY_NO_GATEWAY_INCARNATION`): the gateway
/// sends its table locks with the old owned message, which names the process only, the same
/// after a restart, so a restarted gateway's first transaction does not abort its old
/// incarnation's (`sql_transactions.rs` catches it).
fn canary_no_gateway_incarnation() -> bool {
    static CANARY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *CANARY.get_or_init(|| {
        cfg!(debug_assertions)
            && std::env::var_os("TESSERA_CANARY_NO_GATEWAY_INCARNATION").is_some()
    })
}

/// A new gateway incarnation: the time now in µs since the epoch (never 0), so that a
/// process's incarnations are ordered by their start and a suspicion can bound the ones it
/// kills by the time the process's link went down (`store::abort_owned_through_operation`).
pub(crate) fn fresh_incarnation() -> u64 {
    (crate::os::unix_now_us().max(1) as u64).max(1)
}

impl ClusterBackend {
    pub(crate) fn new(jobs: mpsc::Sender<Job>) -> ClusterBackend {
        ClusterBackend {
            jobs,
            catalog: Arc::new(Mutex::new(None)),
            row_ids: Arc::new(Mutex::new(RowIds::new())),
            hub: None,
            owner: 0,
            incarnation: Arc::new(GatewayIncarnation::default()),
        }
    }

    /// The gateway lives in storage process `storage`, in its incarnation `incarnation` (the
    /// process's, shared by every session): its transactions are owned by them.
    pub(crate) fn with_owner(
        mut self,
        storage: placement::ProcessId,
        incarnation: Arc<GatewayIncarnation>,
    ) -> ClusterBackend {
        self.owner = storage.0;
        self.incarnation = incarnation;
        self
    }

    /// The partitions refused a transaction's table locks as incarnation `refused`'s (taken
    /// for dead: the process was suspected, falsely since this gateway lives): the gateway's
    /// next transactions are owned by a new incarnation, unless another session already took
    /// one (`transaction_driver::next_incarnation`).
    fn incarnation_refused(&self, refused: u64) {
        // Above the refused one even if the clock went back.
        let fresh = fresh_incarnation().max(refused + 1);
        let before = self
            .incarnation
            .current
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |current| {
                Some(transaction_driver::next_incarnation(
                    current, refused, fresh,
                ))
            })
            .unwrap_or_else(|current| current);
        if before == refused {
            crate::log::warn(format_args!(
                "the partitions took this gateway's incarnation {refused:016x} for dead (its process was suspected): taking a new one"
            ));
        }
    }

    /// Tells the storage processes' gateways through `hub` when this gateway's transactions
    /// end, and wakes its waiting statements when any transaction they wait for ends.
    pub(crate) fn with_hub(mut self, hub: Arc<super::pubsub::Hub>) -> ClusterBackend {
        self.hub = Some(hub);
        self
    }

    /// The drivers' timing (`cluster::transaction_driver`): wake-up hints arrive if there is
    /// a hub (and `TESSERA_SQL_WAITS_POLL`, a measurement switch, does not ask for polling
    /// alone); statements await their grants at the partition unless
    /// `TESSERA_SQL_NO_GRANTS` (a measurement switch) is set.
    fn settings(&self) -> DriverSettings {
        let defaults = DriverSettings::default();
        let incarnation = if canary_no_gateway_incarnation() {
            0
        } else {
            self.incarnation.current.load(Ordering::SeqCst)
        };
        static NO_GRANTS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let no_grants =
            *NO_GRANTS.get_or_init(|| std::env::var_os("TESSERA_SQL_NO_GRANTS").is_some());
        DriverSettings {
            hints: self.hints().is_some(),
            grant_wait_ms: if no_grants { 0 } else { defaults.grant_wait_ms },
            abandoned_after_ms: test_abandoned_after_ms().unwrap_or(defaults.abandoned_after_ms),
            owner: self.owner,
            incarnation,
            announced: incarnation != 0
                && self.incarnation.announced.load(Ordering::SeqCst) == incarnation,
            ..defaults
        }
    }

    /// The ends of transactions, from now on (subscribed before a statement's first message,
    /// so that an end between a refusal and its pause is not missed): the drivers' hints.
    fn hints(&self) -> Option<tokio::sync::broadcast::Receiver<u64>> {
        static POLL_ONLY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let poll_only =
            *POLL_ONLY.get_or_init(|| std::env::var_os("TESSERA_SQL_WAITS_POLL").is_some());
        match (&self.hub, poll_only) {
            (Some(hub), false) => Some(hub.ended_receiver()),
            _ => None,
        }
    }

    /// Wakes the statements, here and at every other gateway, that wait for `transaction`.
    fn ended(&self, transaction: u64) {
        if let Some(hub) = &self.hub {
            hub.transaction_ended(transaction);
        }
    }

    /// Runs one store operation of the SQL half through the gateway; each answering
    /// partition's name and result bytes. `two_phase`: a write, sent in two phases if it
    /// reaches several partitions (`store::prepared`).
    async fn run(
        &self,
        operation: Vec<u8>,
        read: bool,
        route: SqlRoute,
        two_phase: bool,
    ) -> Result<Vec<(String, Vec<u8>)>, BackendError> {
        self.run_at(operation, read, route, two_phase, Isolation::Sequential)
            .await
    }

    /// `run` at a read isolation: `Basic` serves a read of one partition key as a §6.7 basic
    /// read, `Snapshot` a read as a snapshot read (the gateway task's `SqlJob::isolation`);
    /// anything else is sequential.
    async fn run_at(
        &self,
        operation: Vec<u8>,
        read: bool,
        route: SqlRoute,
        two_phase: bool,
        isolation: Isolation,
    ) -> Result<Vec<(String, Vec<u8>)>, BackendError> {
        let (reply, receiver) = oneshot::channel();
        let job = Job {
            work: Work::Sql {
                operation,
                read,
                route,
                two_phase,
            },
            isolation,
            reply,
        };
        self.jobs
            .send(job)
            .await
            .map_err(|_| BackendError::Unavailable)?;
        match receiver.await {
            Ok(Outcome::Foreign(bytes)) => decode_answers(&bytes).ok_or(BackendError::Unavailable),
            _ => Err(BackendError::Unavailable),
        }
    }

    /// `run` for a transaction's message, counted in `stats` under its class (messages sent
    /// and the time their answers took).
    async fn run_counted(
        &self,
        class: (&stats::Counter, &stats::Counter),
        operation: Vec<u8>,
        route: SqlRoute,
    ) -> Result<Vec<(String, Vec<u8>)>, BackendError> {
        let started = Instant::now();
        let answers = self.run(operation, false, route, false).await;
        class.0.add(1);
        class.1.add(started.elapsed().as_micros() as u64);
        answers
    }

    /// Gives the rows of an insert routed `NewRowIds` their hidden row ids; the routing that
    /// then places them.
    fn with_row_ids(&self, command: &mut engine::Command) -> sql::Routing {
        let operations = match command {
            engine::Command::Guarded { command, .. } => match command.as_mut() {
                engine::Command::Batch(operations) => operations.as_mut_slice(),
                engine::Command::Execute(operation) => std::slice::from_mut(operation),
                _ => &mut [],
            },
            engine::Command::Batch(operations) => operations.as_mut_slice(),
            engine::Command::Execute(operation) => std::slice::from_mut(operation),
            engine::Command::Explain(_) => &mut [],
        };
        let routing = {
            let mut row_ids = self
                .row_ids
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            sql::with_row_ids(operations, || row_ids.next())
        };
        store::rows::row_id_routing(operations, routing, &|table| self.schema(table))
    }
}

impl SqlBackend for ClusterBackend {
    async fn catalog(&self, fresh: bool) -> Result<(u64, Arc<sql::MemoryCatalog>), BackendError> {
        if !fresh {
            let cached = self
                .catalog
                .lock()
                .unwrap_or_else(|poison| poison.into_inner())
                .clone();
            if let Some(cached) = cached {
                return Ok(cached);
            }
        }
        let answers = self
            .run(store::catalog_operation(), true, SqlRoute::Any, false)
            .await?;
        let [(_, bytes)] = answers.as_slice() else {
            return Err(BackendError::Unavailable);
        };
        let (digest, mut catalog) =
            store::decode_catalog(bytes).ok_or(BackendError::Unavailable)?;
        crate::security::roles::hide(&mut catalog);
        // Shared by every session of this process until the next fresh read: a statement
        // plans against it without copying it.
        let read = (digest, Arc::new(catalog));
        *self
            .catalog
            .lock()
            .unwrap_or_else(|poison| poison.into_inner()) = Some(read.clone());
        Ok(read)
    }

    /// A command without its plan's routing runs on every partition; it answers what one
    /// partition answers (the front end sends planned statements through `execute_routed`).
    async fn execute(&self, command: engine::Command) -> Result<engine::Outcome, BackendError> {
        let mut answers = self.execute_routed(&sql::Routing::Every, command).await?;
        match answers.len() {
            1 => Ok(answers.remove(0).1),
            _ => Ok(engine::Outcome::Error(
                engine::EngineError::FeatureNotSupported {
                    feature: "an unplanned command over several partitions".into(),
                },
            )),
        }
    }
}

impl RoutedBackend for ClusterBackend {
    async fn execute_routed(
        &self,
        routing: &sql::Routing,
        command: engine::Command,
    ) -> Result<Vec<(String, engine::Outcome)>, BackendError> {
        let (answers, _) = self
            .execute_at(routing, command, sql::ReadIsolation::Sequential)
            .await?;
        Ok(answers)
    }

    async fn execute_read(
        &self,
        routing: &sql::Routing,
        command: engine::Command,
        isolation: sql::ReadIsolation,
    ) -> Result<(Vec<(String, engine::Outcome)>, sql::ReadIsolation), BackendError> {
        self.execute_at(routing, command, isolation).await
    }
}

impl ClusterBackend {
    /// A planned command where its routing sends it, at read isolation `isolation` (an
    /// autocommit read's session level; `Sequential` for everything else), and the level it
    /// was served at: `basic` only for a read pinned to one partition key (`SqlRoute::Keys`
    /// of one key: one partition, whose primary answers from its executed state, or refuses
    /// and the read goes through the group's log, stronger); `snapshot` for every read
    /// (several partitions: one `PartitionOperation::Snapshot` per group at one router
    /// timestamp, `docs/internals/sql.md` "Snapshot SELECTs"; one partition: an op of its
    /// log, one point of one partition, which is a consistent cut); every other read is
    /// served `sequential`. A snapshot read whose groups refused it `snapshot_attempts_max`
    /// times is served as one E-Cast message (stronger; no NOTICE: the refusals are the state
    /// of the moment, not the statement's kind, as for a refused basic read). A snapshot
    /// read refused at its point for a stale catalog guard or an open transaction's lock
    /// (`store::Store::execute_share`, at every partition alike) is planned again or paused
    /// and sent again below, at a fresh timestamp.
    async fn execute_at(
        &self,
        routing: &sql::Routing,
        mut command: engine::Command,
        isolation: sql::ReadIsolation,
    ) -> Result<(Vec<(String, engine::Outcome)>, sql::ReadIsolation), BackendError> {
        if store::touches_kv_table(&command) {
            let refusal = engine::EngineError::FeatureNotSupported {
                feature: format!(
                    "SQL over the Redis namespace (table {}) on a partitioned cluster: its keys lie in every partition",
                    store::KV_TABLE
                ),
            };
            return Ok((
                vec![(String::new(), engine::Outcome::Error(refusal))],
                sql::ReadIsolation::Sequential,
            ));
        }
        let routing = match routing {
            sql::Routing::NewRowIds => self.with_row_ids(&mut command),
            other => other.clone(),
        };
        let route = route_of(&routing, &command, &|table| self.schema(table), None);
        let read = command.is_read();
        // The level served (the gateway task applies the same rule, `SqlJob::isolation`).
        let basic = isolation == sql::ReadIsolation::Basic
            && read
            && matches!(&route, SqlRoute::Keys(keys) if keys.len() == 1);
        let (served, isolation) = match isolation {
            sql::ReadIsolation::Basic if basic => (sql::ReadIsolation::Basic, Isolation::Basic),
            sql::ReadIsolation::Snapshot if read => {
                (sql::ReadIsolation::Snapshot, Isolation::Snapshot)
            }
            _ => (sql::ReadIsolation::Sequential, Isolation::Sequential),
        };
        if route == SqlRoute::Keys(Vec::new()) {
            return Ok((Vec::new(), served)); // No key, no partition: nothing to run.
        }
        // Every write over several partitions goes in two phases: a partition refusing it (a
        // transaction's lock there, which other partitions need not share) aborts it
        // everywhere, so that sending it again never runs a part twice (`store::prepared`).
        let two_phase = !read && !canary_one_phase();
        let operation = store::sql_operation(&command);
        if let Err(refusal) = cluster::limits::check_statement_size(&operation) {
            return Ok((
                vec![(String::new(), engine::Outcome::Error(refusal))],
                served,
            ));
        }
        // Refused for a transaction's lock or a two-phase statement (nothing ran): sent again
        // after the driver's pause (`transaction_driver::Autocommit`).
        let mut statement = Autocommit::new(now_ms(), self.settings());
        let mut hints = self.hints();
        loop {
            let answers = self
                .run_at(operation.clone(), read, route.clone(), two_phase, isolation)
                .await?;
            match statement.outcomes(decode_outcomes(answers), now_ms()) {
                Action::Answered { outcomes, .. } => {
                    count_answered(&outcomes);
                    return Ok((self.answered_once(&command, outcomes), served));
                }
                Action::Pause {
                    until_ms,
                    abort,
                    holder,
                } => {
                    self.pause(until_ms, abort, holder, false, &mut hints, |hint| {
                        statement.woken(hint)
                    })
                    .await;
                    statement.resume();
                }
                Action::Send(_) => unreachable!("a statement outside transactions sends itself"),
            }
        }
    }
}

impl ClusterBackend {
    /// A table's schema in the cached catalog.
    fn schema(&self, table: &str) -> Option<engine::TableSchema> {
        let cached = self
            .catalog
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        Some(cached.as_ref()?.1.tables.get(table)?.schema.clone())
    }

    /// The partitions' outcomes with each operation on an everywhere table answered once
    /// (`store::rows::answer_once`).
    fn answered_once(
        &self,
        command: &engine::Command,
        mut outcomes: Vec<(String, engine::Outcome)>,
    ) -> Vec<(String, engine::Outcome)> {
        if outcomes.len() > 1 {
            let mut answers: Vec<engine::Outcome> = outcomes
                .iter()
                .map(|(_, outcome)| outcome.clone())
                .collect();
            store::rows::answer_once(
                operations_of(command),
                &|table| self.schema(table),
                &mut answers,
            );
            for ((_, outcome), answer) in outcomes.iter_mut().zip(answers) {
                *outcome = answer;
            }
        }
        outcomes
    }

    /// Row locks finer than the partition key value (`store::transactions::row_paths`, or
    /// with `by_column` `column_paths`: a row's columns), from the cached catalog's schema of
    /// the statement's table; `None` without one.
    fn row_paths(
        &self,
        operations: &[engine::Operation],
        keys: &[Vec<u8>],
        by_column: bool,
    ) -> Option<Vec<store::transactions::RowPath>> {
        let table = operations.first()?.table_name();
        let schema = {
            let cached = self
                .catalog
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            cached.as_ref()?.1.tables.get(table)?.schema.clone()
        };
        let partition_column = store::rows::partition_column(&schema);
        if by_column {
            store::transactions::column_paths(operations, &schema, partition_column, keys)
        } else {
            store::transactions::row_paths(operations, &schema, partition_column, keys)
        }
    }
}

impl ClusterBackend {
    /// Executes a transaction driver's actions until its statement is answered: sends its
    /// messages, sends an abandoned holder's abort and sleeps its pauses (woken early by
    /// hints). Every decision is the driver's (`cluster::transaction_driver`). The answer and
    /// whether it is the statement's own (`Action::Answered`).
    async fn drive(
        &self,
        transaction: &mut Transaction,
        mut action: Action<(String, engine::Outcome)>,
        hints: &mut Option<tokio::sync::broadcast::Receiver<u64>>,
    ) -> Result<(Vec<(String, engine::Outcome)>, bool), BackendError> {
        loop {
            action = match action {
                Action::Send(send) => {
                    let overdue_at = transaction.overdue_at();
                    let message = async {
                        match counters(&send.kind) {
                            Some(class) => {
                                self.run_counted(class, send.operation, send.route).await
                            }
                            None => self.run(send.operation, false, send.route, false).await,
                        }
                    };
                    let answers = match overdue_at {
                        None => message.await.map(decode_outcomes),
                        // A statement awaiting its grant at the partition: after the driver's
                        // `grant_wait_ms` without an answer, it is sent again without (the
                        // partition lets the kept one go). The kept one's late answer is the
                        // statement's if it is a death (`Transaction::takes_superseded`: the
                        // transaction must abort, and it holds its locks until it does);
                        // anything else is left to the attempt sent since.
                        Some(at) => {
                            let started = Instant::now();
                            let deadline = tokio::time::Instant::now()
                                + Duration::from_millis(at.saturating_sub(now_ms()));
                            stats::SQL_AWAITING.add(1);
                            let mut message = std::pin::pin!(message);
                            let answers = match tokio::time::timeout_at(deadline, message.as_mut())
                                .await
                            {
                                Ok(answers) => answers.map(decode_outcomes),
                                Err(_) => {
                                    stats::SQL_GRANT_OVERDUE.add(1);
                                    let again = transaction
                                        .overdue(now_ms().max(at))
                                        .expect("overdue: awaiting since before `at`");
                                    let class = (&stats::SQL_STATEMENTS, &stats::SQL_STATEMENT_US);
                                    let again =
                                        self.run_counted(class, again.operation, again.route);
                                    let mut again = std::pin::pin!(again);
                                    let mut late_open = true;
                                    loop {
                                        tokio::select! {
                                            late = message.as_mut(), if late_open => {
                                                late_open = false;
                                                if let Ok(late) = late {
                                                    let late = decode_outcomes(late);
                                                    if transaction.takes_superseded(&late) {
                                                        stats::SQL_SUPERSEDED_DEATHS.add(1);
                                                        break Ok(late);
                                                    }
                                                }
                                            }
                                            answers = again.as_mut() => {
                                                break answers.map(decode_outcomes);
                                            }
                                        }
                                    }
                                }
                            };
                            stats::SQL_AWAITING_US.add(started.elapsed().as_micros() as u64);
                            answers
                        }
                    };
                    match answers {
                        Ok(answers) => transaction.outcomes(answers, now_ms()),
                        Err(error) => {
                            transaction.abandon_statement();
                            return Err(error);
                        }
                    }
                }
                Action::Pause {
                    until_ms,
                    abort,
                    holder,
                } => {
                    self.pause(until_ms, abort, holder, true, hints, |hint| {
                        transaction.woken(hint)
                    })
                    .await;
                    Action::Send(transaction.resume(now_ms()))
                }
                Action::Answered { outcomes, ran } => {
                    if let Some(refused) = transaction.incarnation_refused() {
                        self.incarnation_refused(refused);
                    }
                    if let Some(announced) = transaction.announced() {
                        self.incarnation
                            .announced
                            .store(announced, Ordering::SeqCst);
                    }
                    count_answered(&outcomes);
                    return Ok((outcomes, ran));
                }
            }
        }
    }

    /// A driver's pause: its abort first (then the hint of that transaction's end), then
    /// until `until_ms`, or, for a lock wait with hints, until the driver says a hint ends it.
    /// `transactional`: counted as a transaction's wait.
    async fn pause(
        &self,
        until_ms: u64,
        abort: Option<Send>,
        holder: Option<u64>,
        transactional: bool,
        hints: &mut Option<tokio::sync::broadcast::Receiver<u64>>,
        mut woken: impl FnMut(Hint) -> bool,
    ) {
        if let Some(abort) = abort {
            match abort.kind {
                Kind::Abort {
                    transaction,
                    idle_ms,
                } => {
                    crate::log::warn(format_args!(
                        "aborting transaction {transaction:016x}: idle for {idle_ms} ms while holding a lock others wait for"
                    ));
                    let _ = self.run(abort.operation, false, abort.route, false).await;
                    self.ended(transaction);
                    stats::SQL_ABANDONED_ABORTS.add(1);
                }
                Kind::Decide { statement, held_ms } => {
                    crate::log::warn(format_args!(
                        "aborting statement {statement:016x}: it has held its tables for {held_ms} ms"
                    ));
                    let _ = self.run(abort.operation, false, abort.route, false).await;
                }
                _ => {
                    let _ = self.run(abort.operation, false, abort.route, false).await;
                }
            }
        }
        let deadline =
            tokio::time::Instant::now() + Duration::from_millis(until_ms.saturating_sub(now_ms()));
        if holder.is_none() {
            if transactional {
                stats::SQL_BUSY_WAITS.add(1);
            }
            tokio::time::sleep_until(deadline).await;
            return;
        }
        stats::SQL_LOCK_WAITS.add(1);
        let started = Instant::now();
        let woke = match hints {
            None => {
                tokio::time::sleep_until(deadline).await;
                false
            }
            Some(ended) => loop {
                tokio::select! {
                    () = tokio::time::sleep_until(deadline) => break false,
                    received = ended.recv() => match received {
                        Ok(id) if woken(Hint::Ended(id)) => break true,
                        Ok(_) => continue,
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                            if woken(Hint::Missed) {
                                break true;
                            }
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                            tokio::time::sleep_until(deadline).await;
                            break false;
                        }
                    },
                }
            },
        };
        stats::SQL_LOCK_PAUSE_US.add(started.elapsed().as_micros() as u64);
        if woke {
            stats::SQL_WAITS_WOKEN.add(1);
        }
    }
}

/// The counters of a transaction's message (sent, and the time their answers took).
fn counters(kind: &Kind) -> Option<(&'static stats::Counter, &'static stats::Counter)> {
    match kind {
        Kind::Globalize => Some((&stats::SQL_GLOBALIZES, &stats::SQL_GLOBALIZE_US)),
        Kind::Lock => Some((&stats::SQL_TABLE_LOCKS, &stats::SQL_TABLE_LOCK_US)),
        Kind::Statement => Some((&stats::SQL_STATEMENTS, &stats::SQL_STATEMENT_US)),
        Kind::End { .. } => Some((&stats::SQL_ENDS, &stats::SQL_END_US)),
        Kind::RollbackTo | Kind::Abort { .. } | Kind::Decide { .. } => None,
    }
}

/// Counts a driver's answer: a death (40001), or a lock wait that ran out of patience.
fn count_answered(outcomes: &[(String, engine::Outcome)]) {
    if outcomes
        .iter()
        .any(|(_, outcome)| transaction_driver::dies(outcome))
    {
        stats::SQL_DEATHS.add(1);
    } else if outcomes
        .iter()
        .any(|(_, outcome)| transaction_driver::transaction_locked(outcome).is_some())
    {
        stats::SQL_PATIENCE_SPENT.add(1);
    }
}

impl TransactionBackend for ClusterBackend {
    fn begin(&self) -> Option<TransactionContext> {
        let id = self
            .row_ids
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .transaction_id();
        Some(TransactionContext {
            driver: Transaction::new(id, now_ms(), self.settings()),
            locking: None,
            savepoint: 0,
        })
    }

    /// Runs the statement through the transaction's driver (`cluster::transaction_driver`):
    /// the table locks it lacks at every partition first (one message, sent again while
    /// another transaction's lock or a two-phase statement is in the way), then the statement,
    /// numbered, where its routing says; `Globalize` first when it reaches beyond the
    /// partition of its first key or its table locks wait. Where partitions answer
    /// differently, a death (40001) anywhere wins over a wait. Here only the route (the
    /// cached catalog's schemas and row paths) is computed and the driver's actions executed.
    async fn execute_in(
        &self,
        transaction: &mut TransactionContext,
        routing: &sql::Routing,
        mut command: engine::Command,
    ) -> Result<Vec<(String, engine::Outcome)>, BackendError> {
        if command.is_read() && canary_unlocked_reads() && !store::touches_kv_table(&command) {
            return self.execute_routed(routing, command).await;
        }
        let routing = match routing {
            sql::Routing::NewRowIds => self.with_row_ids(&mut command),
            other => other.clone(),
        };
        let route = route_of(
            &routing,
            &command,
            &|table| self.schema(table),
            transaction.driver.local_key(),
        );
        let paths = match &route {
            // Column-level locks unless a locking clause asks for whole rows.
            SqlRoute::Keys(keys) => {
                self.row_paths(operations_of(&command), keys, transaction.locking.is_none())
            }
            _ => None,
        };
        let options = StatementOptions {
            locking: transaction.locking,
            savepoint: transaction.savepoint,
            paths,
        };
        let mut hints = self.hints();
        let driver = &mut transaction.driver;
        let action = match driver.statement(&command, route, options, now_ms()) {
            Ok(action) => action,
            Err(error) => return Ok(vec![(String::new(), engine::Outcome::Error(error))]),
        };
        let (outcomes, ran) = self.drive(driver, action, &mut hints).await?;
        Ok(if ran {
            self.answered_once(&command, outcomes)
        } else {
            outcomes
        })
    }

    async fn end(
        &self,
        transaction: &TransactionContext,
        commit: bool,
    ) -> Result<Option<engine::EngineError>, BackendError> {
        let Some(end) = transaction.driver.end(commit) else {
            return Ok(None); // Nothing was sent: no partition knows it.
        };
        let class = (&stats::SQL_ENDS, &stats::SQL_END_US);
        let outcomes = decode_outcomes(self.run_counted(class, end.operation, end.route).await?);
        self.ended(transaction.driver.id);
        Ok(first_refusal(outcomes))
    }

    /// One ordered message to every partition (as the end): each writes back what the
    /// transaction changed there since the savepoint.
    async fn rollback_to(
        &self,
        transaction: &TransactionContext,
        savepoint: u32,
    ) -> Result<Option<engine::EngineError>, BackendError> {
        let Some(rollback) = transaction.driver.rollback_to(savepoint) else {
            return Ok(None); // Nothing was sent: nothing to undo.
        };
        let operation = rollback.operation;
        let outcomes = decode_outcomes(self.run(operation, false, rollback.route, false).await?);
        Ok(first_refusal(outcomes))
    }
}

/// The error an end or a ROLLBACK TO was refused with (another gateway aborted the
/// transaction), if any.
fn first_refusal(outcomes: Vec<(String, engine::Outcome)>) -> Option<engine::EngineError> {
    outcomes.into_iter().find_map(|(_, outcome)| match outcome {
        engine::Outcome::Error(error) => Some(error),
        _ => None,
    })
}

/// The engine outcomes of a gateway answer.
fn decode_outcomes(answers: Vec<(String, Vec<u8>)>) -> Vec<(String, engine::Outcome)> {
    answers
        .into_iter()
        .map(|(name, bytes)| {
            let outcome = engine::Outcome::decode(&bytes)
                .unwrap_or(engine::Outcome::Error(engine::EngineError::Malformed));
            (name, outcome)
        })
        .collect()
}

/// The gateway's clock, in ms since the epoch: transactions' stamps (their age, and how long
/// they have been idle).
fn now_ms() -> u64 {
    crate::os::unix_now_us().max(0) as u64 / 1_000
}

/// Hidden, test-only (debug builds, `TESSERA_CANARY_UNLOCKED_READS`): a transaction's reads
/// take no lock and run as statements outside it, so a concurrent transaction may change what
/// it read before it commits — `sql_transactions.rs`'s canary proves the bank checker catches
/// that (lost updates, non-repeatable reads).
fn canary_unlocked_reads() -> bool {
    static CANARY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *CANARY.get_or_init(|| {
        cfg!(debug_assertions) && std::env::var_os("TESSERA_CANARY_UNLOCKED_READS").is_some()
    })
}

/// Hidden, test-only (debug builds, `TESSERA_CANARY_SQL_READS_PER_PARTITION`): a read over
/// every partition is sent as one message per partition, one after the other, so each
/// partition answers at its own point of the global order instead of all at one — a broken
/// snapshot. `sql_read_isolation.rs`'s canary proves its consistent-cut check catches that.
pub(crate) fn canary_reads_per_partition() -> bool {
    static CANARY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *CANARY.get_or_init(|| {
        cfg!(debug_assertions)
            && std::env::var_os("TESSERA_CANARY_SQL_READS_PER_PARTITION").is_some()
    })
}

/// Hidden, test-only (debug builds, `TESSERA_CANARY_ONE_PHASE_WRITES`): writes go in one
/// phase even across partitions, so a failure on one partition leaves the others' part
/// applied — `sql_partitions.rs`'s and `sql_check.rs`'s canaries prove their checks catch that.
fn canary_one_phase() -> bool {
    static CANARY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *CANARY.get_or_init(|| {
        cfg!(debug_assertions) && std::env::var_os("TESSERA_CANARY_ONE_PHASE_WRITES").is_some()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::{Command, OnConflict, Operation, Predicate, Value};

    fn insert(rows: Vec<Vec<Value>>) -> Operation {
        Operation::Insert {
            table: "t".into(),
            columns: vec!["id".into(), "v".into()],
            rows,
            on_conflict: OnConflict::Error,
        }
    }

    #[test]
    fn a_plan_pinned_to_keys_goes_to_their_placement_keys_and_anything_else_everywhere() {
        let key = |value: i64| store::rows::placement_key("t", &Value::BigInt(value));
        let select = Command::Guarded {
            catalog: 1,
            command: Box::new(Command::Batch(vec![Operation::Select {
                table: "t".into(),
                columns: Vec::new(),
                predicate: Some(Predicate::equal("id", Value::BigInt(3))),
                limit: None,
            }])),
        };
        let keys = sql::Routing::Keys {
            column: "id".into(),
            values: vec![Value::BigInt(3), Value::BigInt(1), Value::BigInt(3)],
        };
        let mut expected = vec![key(1), key(3)];
        expected.sort();
        assert_eq!(
            route_of(&keys, &select, &|_| None, None),
            SqlRoute::Keys(expected)
        );
        assert_eq!(
            route_of(&sql::Routing::Every, &select, &|_| None, None),
            SqlRoute::Every
        );
        let rows = |ids: &[i64]| {
            ids.iter()
                .map(|id| vec![Value::BigInt(*id), Value::Null])
                .collect()
        };
        let inserts = Command::Batch(vec![insert(rows(&[5, 6])), insert(rows(&[6, 7]))]);
        let SqlRoute::Keys(routed) = route_of(
            &sql::Routing::RowsByKey { position: 0 },
            &inserts,
            &|_| None,
            None,
        ) else {
            panic!("an insert goes by its rows' keys")
        };
        assert_eq!(routed.len(), 3, "distinct keys");
        assert!([5, 6, 7].iter().all(|id| routed.contains(&key(*id))));
    }

    #[test]
    fn colocated_tables_share_placement_keys_and_everywhere_tables_read_one_partition() {
        let schema = |name: &str, options: &[(&str, &str)]| {
            let mut schema = engine::TableSchema::new(
                name,
                vec![
                    engine::ColumnDef::new("id", engine::DataType::BigInt).not_null(),
                    engine::ColumnDef::new("v", engine::DataType::Int),
                ],
                &["id"],
            )
            .unwrap();
            schema.options = options
                .iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect();
            schema
        };
        let catalog = |name: &str| match name {
            "w" => Some(schema("w", &[("placement_name", "w")])),
            "d" => Some(schema("d", &[("placement_name", "w")])),
            "item" => Some(schema("item", &[("placement", "everywhere")])),
            _ => None,
        };
        let select = |table: &str| Command::Guarded {
            catalog: 1,
            command: Box::new(Command::Batch(vec![Operation::Select {
                table: table.into(),
                columns: Vec::new(),
                predicate: Some(Predicate::equal("id", Value::BigInt(3))),
                limit: None,
            }])),
        };
        let keys = sql::Routing::Keys {
            column: "id".into(),
            values: vec![Value::BigInt(3)],
        };
        let at_w = SqlRoute::Keys(vec![store::rows::placement_key("w", &Value::BigInt(3))]);
        assert_eq!(route_of(&keys, &select("w"), &catalog, None), at_w);
        assert_eq!(route_of(&keys, &select("d"), &catalog, None), at_w);
        // A table the catalog lacks is placed under its name.
        assert_eq!(
            route_of(&keys, &select("t"), &catalog, None),
            SqlRoute::Keys(vec![store::rows::placement_key("t", &Value::BigInt(3))])
        );
        // An everywhere table: a read to the transaction's partition, else a fixed one.
        let touched = store::rows::placement_key("w", &Value::BigInt(9));
        assert_eq!(
            route_of(&keys, &select("item"), &catalog, Some(&touched)),
            SqlRoute::Keys(vec![touched.clone()])
        );
        assert_eq!(
            route_of(&keys, &select("item"), &catalog, None),
            SqlRoute::Keys(vec![store::rows::placement_key("item", &Value::Null)])
        );
        // A write to every partition, whatever its routing.
        let write = Command::Execute(Operation::Insert {
            table: "item".into(),
            columns: vec!["id".into(), "v".into()],
            rows: vec![vec![Value::BigInt(1), Value::Null]],
            on_conflict: OnConflict::Error,
        });
        assert_eq!(
            route_of(
                &sql::Routing::RowsByKey { position: 0 },
                &write,
                &catalog,
                Some(&touched)
            ),
            SqlRoute::Every
        );
    }

    /// A range-placed table (`placement = range`, split points 0, 1000, 2000, 3000, 4000 on a
    /// ring of four equal arcs): a key range goes to exactly the arcs covering it, a point or
    /// an insert to its key's range position, a range over another table everywhere.
    #[test]
    fn a_range_on_a_range_placed_key_reaches_exactly_the_covering_partitions() {
        use std::ops::Bound;
        let mut schema = engine::TableSchema::new(
            "r",
            vec![
                engine::ColumnDef::new("k", engine::DataType::BigInt).not_null(),
                engine::ColumnDef::new("v", engine::DataType::Int),
            ],
            &["k"],
        )
        .unwrap();
        schema.options = vec![
            ("partition_key".into(), "k".into()),
            ("placement".into(), "range".into()),
            ("placement_name".into(), "r".into()),
            ("range_bounds".into(), "0,1000,2000,3000,4000".into()),
        ];
        let catalog = |name: &str| (name == "r").then(|| schema.clone());
        let quarter = u64::MAX / 4 + 1;
        let members: Vec<(placement::ProcessId, Position)> = (0..4u64)
            .map(|index| (placement::ProcessId(index + 1), Position(index * quarter)))
            .collect();
        let configuration = Configuration::with_ring(1, &members);
        let select = |table: &str| {
            Command::Execute(Operation::Select {
                table: table.into(),
                columns: Vec::new(),
                predicate: None,
                limit: None,
            })
        };
        let between = |low: i64, high: i64| sql::Routing::KeyRange {
            column: "k".into(),
            low: Bound::Included(Value::BigInt(low)),
            high: Bound::Excluded(Value::BigInt(high)),
        };
        let covering = |route: SqlRoute| -> Vec<u64> {
            let SqlRoute::Range(range) = route else {
                panic!("a range route: {route:?}")
            };
            cluster::payload::partition_arcs(&configuration, &range)
                .into_iter()
                .map(|(arc, _)| arc.intervals()[0].0 / quarter)
                .collect()
        };
        let route = |routing: &sql::Routing| route_of(routing, &select("r"), &catalog, None);
        assert_eq!(covering(route(&between(1200, 1800))), vec![1]);
        assert_eq!(covering(route(&between(900, 1100))), vec![0, 1]);
        assert_eq!(covering(route(&between(500, 3500))), vec![0, 1, 2, 3]);
        assert_eq!(covering(route(&between(3100, 9999))), vec![3]);
        // Unbounded above: from the low key's arc to the end of the ring.
        let above = sql::Routing::KeyRange {
            column: "k".into(),
            low: Bound::Excluded(Value::BigInt(2500)),
            high: Bound::Unbounded,
        };
        assert_eq!(covering(route(&above)), vec![2, 3]);
        // An empty range still reaches one partition (its low key's), to answer nothing.
        assert_eq!(covering(route(&between(2500, 100))), vec![2]);
        // A bound of another kind than the key cannot be placed: every partition.
        let odd = sql::Routing::KeyRange {
            column: "k".into(),
            low: Bound::Included(Value::Double(1.5)),
            high: Bound::Unbounded,
        };
        assert_eq!(route(&odd), SqlRoute::Every);
        // A range over a table placed by hash: every partition.
        assert_eq!(
            route_of(&between(1, 2), &select("t"), &catalog, None),
            SqlRoute::Every
        );
        // Points and inserts use the range positions.
        let SqlRoute::Keys(keys) = route(&sql::Routing::Keys {
            column: "k".into(),
            values: vec![Value::BigInt(2999)],
        }) else {
            panic!("a point route")
        };
        let placement = cluster::payload::KeyPlacement::hash();
        assert_eq!(placement.position(&keys[0]).0 / quarter, 2);
        let inserts = Command::Execute(Operation::Insert {
            table: "r".into(),
            columns: vec!["k".into(), "v".into()],
            rows: vec![
                vec![Value::BigInt(10), Value::Null],
                vec![Value::BigInt(3990), Value::Null],
            ],
            on_conflict: OnConflict::Error,
        });
        let SqlRoute::Keys(keys) = route_of(
            &sql::Routing::RowsByKey { position: 0 },
            &inserts,
            &catalog,
            None,
        ) else {
            panic!("an insert route")
        };
        let mut arcs: Vec<u64> = keys
            .iter()
            .map(|key| placement.position(key).0 / quarter)
            .collect();
        arcs.sort();
        assert_eq!(arcs, vec![0, 3]);
        // A partition decides which rows it holds with the same positions.
        for (row, arc) in [
            (vec![Value::BigInt(10), Value::Null], 0),
            (vec![Value::BigInt(2999), Value::Null], 2),
        ] {
            let key = store::rows::row_key(&schema, &row);
            assert_eq!(placement.position(&key).0 / quarter, arc);
            assert_eq!(keys.contains(&key), arc == 0);
        }
    }

    #[test]
    fn row_ids_carry_a_prefix_and_count_up() {
        let mut ids = RowIds::new();
        let (first, second) = (ids.next(), ids.next());
        assert!(first > 0);
        assert_eq!(second, first + 1);
        assert_eq!(first >> 32, ids.prefix as i64);
        ids.counter = u64::from(u32::MAX);
        let drawn = ids.next();
        assert!(drawn > 0);
        assert_eq!(drawn & 0xffff_ffff, 1, "a spent counter draws a new prefix");
    }
}
