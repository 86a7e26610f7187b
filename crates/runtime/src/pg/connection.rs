//! One client connection: the startup phase, then the simple and extended query protocols and
//! COPY FROM STDIN, over a backend.

use super::protocol::{
    protocol_violation, read_frame, read_startup, Body, Fail, Out, CANCEL_REQUEST, GSSENC_REQUEST,
    PROTOCOL_3_0, SSL_REQUEST,
};
use super::PgLimits;
use crate::sql_backend::BackendError;
use engine::{Command, DataType, Outcome, Value};
use sql::error::sqlstate;
use sql::{OutputColumn, Plan, Prepared, SessionCommand, SqlError, StatementResult};
use std::collections::{HashMap, VecDeque};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

mod authentication;
mod sequences;

/// Output is written to the socket once this much is buffered, and at every ReadyForQuery,
/// Flush and CopyInResponse.
const FLUSH_BYTES: usize = 64 * 1024;

/// A bound statement (extended protocol).
struct Portal {
    state: PortalState,
    /// The catalog digest the pending plan was bound against.
    planned_against: u64,
    /// The statement, parameters and statement time, to bind again if the catalog changed
    /// before Execute.
    rebind: (
        Prepared,
        Vec<Option<Value>>,
        sql::StatementStamp,
        sql::sequence::SequenceUse,
    ),
    columns: Vec<OutputColumn>,
    /// One format code per result column (0 text, 1 binary).
    formats: Vec<i16>,
}

// One per portal, replaced in place: boxing the plan buys nothing.
#[allow(clippy::large_enum_variant)]
enum PortalState {
    /// Bound, not yet executed.
    Pending(Plan),
    /// Executed with a row limit that left rows over.
    Suspended {
        rows: VecDeque<Vec<Value>>,
        tag: String,
    },
    /// Ran to completion: its tag (`None`: an empty query).
    Done(Option<String>),
}

pub(crate) struct Connection<B, R, W> {
    backend: B,
    limits: PgLimits,
    reader: BufReader<R>,
    writer: W,
    out: Out,
    session: sql::Session,
    /// Prepared statements, with the parameter type OIDs their Parse declared (0: none).
    statements: HashMap<String, (Prepared, Vec<u32>)>,
    portals: HashMap<String, Portal>,
    /// After an error in an extended-protocol message: discard messages until Sync.
    ignore_till_sync: bool,
    /// Who may connect (`serve`: anyone).
    security: std::sync::Arc<crate::security::Security>,
    /// The user named in the StartupMessage.
    user_name: String,
    /// The authenticated user's role (after startup).
    role: Option<crate::security::roles::Role>,
    /// The connection runs over TLS.
    encrypted: bool,
    /// Counts this connection against its role's CONNECTION LIMIT while it lives.
    connection_slot: Option<crate::security::ConnectionSlot>,
    /// Prepared statements (by name) that are role statements or GRANT/REVOKE, with their
    /// text: `statements` holds an empty placeholder for them (`authentication.rs`).
    utility_statements: HashMap<String, String>,
    /// Portals bound from `utility_statements`, with the statement's text.
    utility_portals: HashMap<String, String>,
    /// The open transaction block, if any (`docs/internals/sprint.md`).
    transaction: Option<Block>,
    /// The locking clause of the statement being run (`SELECT … FOR UPDATE`).
    locking: Option<sql::RowLocking>,
}

/// Rows of a COPY per statement: a larger COPY runs as several statements of this many rows
/// inside one transaction (the block's, or an implicit one), so that it stays atomic while no
/// statement is large (`cluster::limits`) and no partition's step is long.
const COPY_ROWS_PER_STATEMENT: usize = 10_000;

/// Work a statement outside a block runs inside an implicit transaction.
enum Implicit<'a> {
    /// UPDATE … FROM / DELETE … USING: the join's SELECT, then the write.
    WriteFrom(&'a sql::WriteFrom),
    /// A COPY cut into bounded statements (`CopyIn::executions`); `copy` and `data` give it
    /// whole for a backend without transactions.
    Copy {
        copy: &'a sql::CopyIn,
        data: &'a [u8],
        executions: Vec<sql::Execution>,
    },
}

/// A transaction block between BEGIN and COMMIT or ROLLBACK.
struct Block {
    context: super::TransactionContext,
    /// READ ONLY: writes are refused (25006).
    read_only: bool,
    /// A statement failed: every statement but COMMIT, ROLLBACK and ROLLBACK TO is refused
    /// (25P02) until one ends the block or returns it to a savepoint.
    failed: bool,
    /// The transaction was aborted at the cluster (its locks released): only COMMIT or
    /// ROLLBACK can follow (both answer ROLLBACK), and nothing more is sent.
    aborted: bool,
    /// Open savepoints, oldest first: name and id. Ids grow within the block from 1 and are
    /// never reused, so "every savepoint taken after s" is "every id above s's".
    savepoints: Vec<(String, u32)>,
    /// The last savepoint id given.
    savepoint_ids: u32,
}

impl Block {
    fn new(context: super::TransactionContext, read_only: bool) -> Block {
        assert_eq!(context.savepoint, 0, "a new block has no savepoint");
        Block {
            context,
            read_only,
            failed: false,
            aborted: false,
            savepoints: Vec::new(),
            savepoint_ids: 0,
        }
    }

    /// The savepoint named `name` (the latest of that name, as PostgreSQL finds it): its
    /// index in `savepoints`; 3B001 if there is none.
    fn savepoint(&self, name: &str) -> Result<usize, Fail> {
        self.savepoints
            .iter()
            .rposition(|(known, _)| known == name)
            .ok_or_else(|| {
                Fail::Error(SqlError::new(
                    "3B001",
                    format!("savepoint \"{name}\" does not exist"),
                ))
            })
    }

    /// Keeps the first `open` savepoints; statements then run under the last of them.
    fn keep_savepoints(&mut self, open: usize) {
        self.savepoints.truncate(open);
        self.context.savepoint = self.savepoints.last().map_or(0, |(_, id)| *id);
        debug_assert!(self.savepoints.windows(2).all(|pair| pair[0].1 < pair[1].1));
    }
}

/// Hidden, test-only (debug builds, `TESSERA_CANARY_WRITE_FROM_OUTSIDE_TRANSACTIONS`): an
/// UPDATE … FROM outside a block runs its read and its write as two statements, without the
/// implicit transaction, so a write of another client can fall between them (a lost update) —
/// `tests/sql_pgquery.rs`'s canary proves its check catches that.
fn canary_write_from_outside_transactions() -> bool {
    static CANARY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *CANARY.get_or_init(|| {
        cfg!(debug_assertions)
            && std::env::var_os("TESSERA_CANARY_WRITE_FROM_OUTSIDE_TRANSACTIONS").is_some()
    })
}

/// What `Command::Guarded` answers when the catalog changed since planning: nothing ran, and
/// the statement is planned again. (A serialisation failure shares its SQLSTATE, 40001, and
/// is never retried here: its transaction is over.)
fn is_stale_catalog(error: &SqlError) -> bool {
    error.code == "40001" && error.message == engine::EngineError::StaleCatalog.to_string()
}

/// Whether a plan is answered at the gateway from the catalog alone (no engine operation).
fn answered_here(plan: &Plan) -> bool {
    matches!(plan, Plan::Execute(execution) if execution.operations.is_empty())
}

/// A COMMIT or ROLLBACK whose message no partition confirmed.
fn end_error(error: BackendError, commit: bool) -> SqlError {
    let what = if commit { "COMMIT" } else { "ROLLBACK" };
    SqlError::new("08007", format!("{what} was not confirmed: {error}")).with_hint(
        "the transaction may or may not have committed; it ended either way (a later statement waiting for it aborts it if it did not)",
    )
}

fn backend_error(error: BackendError) -> SqlError {
    match error {
        BackendError::Unavailable => SqlError::new("08007", error.to_string()).with_hint(
            "the statement may or may not have taken effect (reads never change anything)",
        ),
    }
}

impl<B, R, W> Connection<B, R, W>
where
    B: super::TransactionBackend,
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send,
{
    pub(crate) fn new(backend: B, limits: PgLimits, reader: R, writer: W) -> Self {
        Connection {
            backend,
            limits,
            reader: BufReader::with_capacity(16 * 1024, reader),
            writer,
            out: Out::default(),
            session: sql::Session::new(),
            statements: HashMap::new(),
            portals: HashMap::new(),
            ignore_till_sync: false,
            security: crate::security::Security::open(),
            user_name: String::new(),
            role: None,
            encrypted: false,
            connection_slot: None,
            utility_statements: HashMap::new(),
            utility_portals: HashMap::new(),
            transaction: None,
            locking: None,
        }
    }

    /// Role and privilege statements commit on their own: inside a transaction block they
    /// are refused, rather than run outside it.
    fn refuse_utility_in_block(&self) -> Result<(), Fail> {
        if self.transaction.is_some() {
            return Err(Fail::Error(SqlError::unsupported(
                "role and privilege statements (CREATE/ALTER/DROP ROLE, GRANT, REVOKE) inside a transaction block",
            )));
        }
        Ok(())
    }

    /// ReadyForQuery's transaction status.
    fn transaction_status(&self) -> u8 {
        match &self.transaction {
            None => b'I',
            Some(block) if block.failed => b'E',
            Some(_) => b'T',
        }
    }

    /// After an error inside a transaction block (`None`: the client is gone): the block
    /// fails. With a savepoint open, an error a statement met leaves the transaction open for
    /// ROLLBACK TO; otherwise, and whatever the savepoints after a serialisation failure
    /// (class 40: the transaction must be retried whole) or an unknown outcome (class 08), the
    /// transaction is aborted at once (its locks released; a later ROLLBACK has nothing left
    /// to do).
    async fn fail_block(&mut self, error: Option<&SqlError>) {
        let Some(block) = self.transaction.as_mut().filter(|block| !block.aborted) else {
            return;
        };
        block.failed = true;
        let recoverable = !block.savepoints.is_empty()
            && error.is_some_and(|error| {
                !error.code.starts_with("40") && !error.code.starts_with("08")
            });
        if recoverable {
            return;
        }
        block.aborted = true;
        let context = block.context.clone();
        if let Err(error) = self.backend.end(&context, false).await {
            crate::log::warn(format_args!(
                "transaction {:016x}: its abort was not confirmed ({error}); it is aborted when a statement waits for it",
                context.id()
            ));
        }
    }

    /// BEGIN, COMMIT and ROLLBACK, when they open or end a block (`None`: the session
    /// answers, as outside a block).
    async fn block_command(
        &mut self,
        command: &SessionCommand,
    ) -> Result<Option<StatementResult>, Fail> {
        let tag = |tag: &str| Ok(Some(StatementResult::Command { tag: tag.into() }));
        match (command, &self.transaction) {
            (SessionCommand::Begin { .. }, Some(_)) => {
                self.out.notice_response(
                    "WARNING",
                    &SqlError::new("25001", "there is already a transaction in progress"),
                );
                tag("BEGIN")
            }
            (SessionCommand::Begin { read_only }, None) => {
                let Some(context) = self.backend.begin() else {
                    return Err(Fail::Error(sql::parse::transactions_refused()));
                };
                self.transaction = Some(Block::new(context, *read_only));
                tag("BEGIN")
            }
            (SessionCommand::Commit | SessionCommand::Rollback, Some(block)) => {
                let commit = matches!(command, SessionCommand::Commit) && !block.failed;
                let aborted = block.aborted;
                let context = block.context.clone();
                self.transaction = None;
                // The block's portals end with it.
                self.portals.clear();
                if !aborted {
                    let refused = self
                        .backend
                        .end(&context, commit)
                        .await
                        .map_err(|error| Fail::Error(end_error(error, commit)))?;
                    if let Some(error) = refused {
                        return Err(Fail::Error(error.into()));
                    }
                }
                tag(if commit { "COMMIT" } else { "ROLLBACK" })
            }
            (SessionCommand::Savepoint { name }, Some(_)) => {
                let block = self.transaction.as_mut().expect("matched above");
                assert!(!block.failed, "a failed block refuses SAVEPOINT (run_plan)");
                block.savepoint_ids += 1;
                let id = block.savepoint_ids;
                block.savepoints.push((name.clone(), id));
                block.keep_savepoints(block.savepoints.len());
                tag("SAVEPOINT")
            }
            (SessionCommand::Release { name }, Some(block)) => {
                let index = block.savepoint(name)?;
                let block = self.transaction.as_mut().expect("matched above");
                block.keep_savepoints(index);
                tag("RELEASE")
            }
            (SessionCommand::RollbackTo { name }, Some(block)) => {
                if block.aborted {
                    return Err(Fail::Error(
                        SqlError::new(
                            "25P02",
                            "current transaction is aborted, commands ignored until end of transaction block",
                        )
                        .with_detail("the transaction itself was aborted (a serialization failure or an unconfirmed statement), so no savepoint can restore it")
                        .with_hint("ROLLBACK, then run the transaction again"),
                    ));
                }
                let index = block.savepoint(name)?;
                let block = self.transaction.as_mut().expect("matched above");
                block.keep_savepoints(index + 1);
                let (context, savepoint) = (block.context.clone(), block.context.savepoint);
                let refused = self
                    .backend
                    .rollback_to(&context, savepoint)
                    .await
                    .map_err(|error| {
                        Fail::Error(
                            SqlError::new(
                                "08007",
                                format!("ROLLBACK TO SAVEPOINT was not confirmed: {error}"),
                            )
                            .with_hint("the transaction is aborted; run it again"),
                        )
                    })?;
                if let Some(error) = refused {
                    return Err(Fail::Error(error.into()));
                }
                let block = self.transaction.as_mut().expect("still open");
                block.failed = false;
                tag("ROLLBACK")
            }
            _ => Ok(None),
        }
    }

    /// Marks the connection as running over TLS (a server with TLS refuses others).
    pub(crate) fn with_encryption(mut self, encrypted: bool) -> Self {
        self.encrypted = encrypted;
        self
    }

    /// Authenticates clients as `security` says.
    pub(crate) fn with_security(
        mut self,
        security: std::sync::Arc<crate::security::Security>,
    ) -> Self {
        self.security = security;
        self
    }

    async fn flush(&mut self) -> Result<(), Fail> {
        if !self.out.bytes.is_empty() {
            self.writer
                .write_all(&self.out.bytes)
                .await
                .map_err(|_| Fail::Io)?;
            self.out.bytes.clear();
        }
        self.writer.flush().await.map_err(|_| Fail::Io)
    }

    async fn flush_if_full(&mut self) -> Result<(), Fail> {
        if self.out.bytes.len() >= FLUSH_BYTES {
            self.flush().await?;
        }
        Ok(())
    }

    /// Refuses the connection (too many clients) with a FATAL error.
    pub(crate) async fn refuse(mut self, error: SqlError) {
        self.out.error_response("FATAL", &error);
        let _ = self.flush().await;
    }

    /// Runs the connection to its end. Never panics on client input.
    pub(crate) async fn run(mut self, process_id: i32, secret: i32) {
        let startup_timeout = self.limits.startup_timeout;
        let started = async {
            match self.startup().await {
                Ok(true) => self.authenticate().await.map(|()| true),
                other => other,
            }
        };
        let result = match tokio::time::timeout(startup_timeout, started).await {
            Ok(result) => result,
            Err(_) => Err(protocol_violation("startup timed out")),
        };
        let result = match result {
            Ok(true) => {
                self.out.authentication_ok();
                for (name, value) in self.session.reported() {
                    self.out.parameter_status(&name, &value);
                }
                self.out.backend_key_data(process_id, secret);
                self.out.ready_for_query(self.transaction_status());
                match self.flush().await {
                    Ok(()) => self.serve().await,
                    Err(fail) => Err(fail),
                }
            }
            Ok(false) => Ok(()),
            Err(fail) => Err(fail),
        };
        if let Err(Fail::Fatal(error) | Fail::Error(error)) = result {
            self.out.error_response("FATAL", &error);
        }
        // A client gone inside a transaction block: its transaction is aborted.
        self.fail_block(None).await;
        let _ = self.flush().await;
        let _ = self.writer.shutdown().await;
    }

    /// The startup phase: `Ok(true)` when a StartupMessage was accepted, `Ok(false)` when the
    /// client left (or sent a CancelRequest, which is ignored).
    async fn startup(&mut self) -> Result<bool, Fail> {
        loop {
            let Some(body) = read_startup(&mut self.reader, self.limits.startup_bytes_max).await?
            else {
                return Ok(false);
            };
            let mut body = Body::new(&body);
            let code = body.i32()?;
            match code {
                SSL_REQUEST | GSSENC_REQUEST => {
                    // Refused: the client goes on unencrypted (or gives up).
                    self.out.bytes.push(b'N');
                    self.flush().await?;
                }
                CANCEL_REQUEST => return Ok(false),
                _ if code >> 16 == 3 => {
                    let mut user = None;
                    let mut unrecognized = Vec::new();
                    loop {
                        let name = body.cstr().map_err(fatal)?;
                        if name.is_empty() {
                            break;
                        }
                        let value = body.cstr().map_err(fatal)?;
                        match name {
                            "user" => {
                                self.user_name = value.to_string();
                                user = Some(value.to_string());
                            }
                            "database" | "options" | "replication" => {}
                            _ if name.starts_with("_pq_.") => unrecognized.push(name.to_string()),
                            _ => {
                                // Settings from the startup packet (client_encoding,
                                // DateStyle, application_name, …): applied when valid,
                                // ignored otherwise.
                                let _ = self.session.apply(&SessionCommand::Set {
                                    name: name.to_string(),
                                    value: Some(value.to_string()),
                                });
                            }
                        }
                    }
                    body.end()?;
                    if user.is_none() {
                        return Err(Fail::Fatal(SqlError::new(
                            "28000",
                            "no PostgreSQL user name specified in startup packet",
                        )));
                    }
                    if code != PROTOCOL_3_0 || !unrecognized.is_empty() {
                        self.out.negotiate_protocol_version(0, &unrecognized);
                    }
                    return Ok(true);
                }
                _ => {
                    return Err(Fail::Fatal(SqlError::new(
                        sqlstate::FEATURE_NOT_SUPPORTED,
                        format!(
                            "unsupported frontend protocol {}.{}: server supports 3.0",
                            code >> 16,
                            code & 0xffff
                        ),
                    )))
                }
            }
        }
    }

    /// The message loop after startup.
    async fn serve(&mut self) -> Result<(), Fail> {
        loop {
            self.flush_if_full().await?;
            let Some((tag, body)) = self.read_frame_or_idle().await? else {
                return Ok(());
            };
            if self.ignore_till_sync && tag != b'S' && tag != b'X' {
                continue;
            }
            let result = match tag {
                b'Q' => self.simple_query(&body).await,
                b'P' => self.parse(&body).await,
                b'B' => self.bind(&body).await,
                b'D' => self.describe(&body),
                b'E' => self.execute(&body).await,
                b'C' => self.close(&body),
                b'H' => self.flush().await,
                b'S' => {
                    self.ignore_till_sync = false;
                    // Sync ends the implicit transaction, and with it every portal; inside a
                    // transaction block portals live to the block's end (a driver fetching a
                    // cursor in chunks across Syncs), as in PostgreSQL.
                    if self.transaction.is_none() {
                        self.portals.clear();
                    }
                    self.out.ready_for_query(self.transaction_status());
                    self.flush().await
                }
                b'X' => return Ok(()),
                // CopyData, CopyDone, CopyFail outside COPY: dropped, as PostgreSQL does
                // (they follow a COPY that failed).
                b'd' | b'c' | b'f' => Ok(()),
                b'F' => Err(Fail::Error(SqlError::unsupported(
                    "the function call protocol",
                ))),
                other => Err(protocol_violation(format!(
                    "invalid frontend message type {other}"
                ))),
            };
            match result {
                Ok(()) => {}
                Err(Fail::Error(error)) => {
                    self.out.error_response("ERROR", &error);
                    if tag != b'Q' {
                        self.ignore_till_sync = true;
                        self.fail_block(Some(&error)).await;
                    }
                }
                Err(fail) => return Err(fail),
            }
        }
    }

    /// The next frame, or FATAL 57P05 when none starts within the idle timeout.
    async fn read_frame_or_idle(&mut self) -> Result<Option<(u8, Vec<u8>)>, Fail> {
        let bytes_max = self.limits.message_bytes_max;
        let Some(idle) = self.limits.idle_timeout else {
            return read_frame(&mut self.reader, bytes_max).await;
        };
        match tokio::time::timeout(idle, read_frame(&mut self.reader, bytes_max)).await {
            Ok(result) => result,
            Err(_) => Err(Fail::Fatal(SqlError::new(
                "57P05",
                "terminating connection due to idle-session timeout",
            ))),
        }
    }

    async fn catalog(
        &self,
        fresh: bool,
    ) -> Result<(u64, std::sync::Arc<sql::MemoryCatalog>), Fail> {
        Ok(self.backend.catalog(fresh).await.map_err(backend_error)?)
    }

    /// Plans against the cached catalog, and again against one read through the primary when
    /// that fails (a table created through another node is not cached yet) or when the plan
    /// would be answered here from the catalog alone (`pg_catalog` and friends must be
    /// linearisable too). Returns the plan with the digest it was planned against.
    async fn planned<T>(
        &self,
        plan: impl Fn(&sql::MemoryCatalog) -> Result<T, SqlError>,
        answered_here: impl Fn(&T) -> bool,
    ) -> Result<(u64, T), Fail> {
        let (digest, catalog) = self.catalog(false).await?;
        if let Ok(planned) = plan(&catalog) {
            if !answered_here(&planned) {
                return Ok((digest, planned));
            }
        }
        let (digest, catalog) = self.catalog(true).await?;
        Ok((digest, plan(&catalog)?))
    }

    /// Runs a plan; if the tables changed between planning and running (the guard refused
    /// it, nothing ran), plans again with `replan` against a fresh catalog and retries.
    async fn run_planned(
        &mut self,
        mut digest: u64,
        mut plan: Plan,
        replan: impl Fn(&sql::MemoryCatalog) -> Result<Plan, SqlError>,
    ) -> Result<Option<StatementResult>, Fail> {
        let mut attempts = 0;
        // The client sends COPY data once: a statement planned again runs over the same data
        // and never asks for it again (a second CopyInResponse would be a protocol error for
        // the client). A failed block refuses the COPY before reading (25P02).
        let copy_data = match &plan {
            Plan::CopyIn(copy) if !self.transaction.as_ref().is_some_and(|block| block.failed) => {
                Some(self.copy_in(copy.columns.len()).await?)
            }
            _ => None,
        };
        loop {
            match self.run_plan(plan, digest, copy_data.as_deref()).await {
                Err(Fail::Error(error)) if is_stale_catalog(&error) && attempts < 8 => {
                    attempts += 1;
                    let (fresh, catalog) = self.catalog(true).await?;
                    digest = fresh;
                    plan = replan(&catalog)?;
                }
                result => return result,
            }
        }
    }

    /// Runs a plan. `None`: an empty query.
    async fn run_plan(
        &mut self,
        plan: Plan,
        digest: u64,
        copy_data: Option<&[u8]>,
    ) -> Result<Option<StatementResult>, Fail> {
        let ends_block = matches!(
            &plan,
            Plan::Session(
                SessionCommand::Commit
                    | SessionCommand::Rollback
                    | SessionCommand::RollbackTo { .. }
            )
        );
        if self.transaction.as_ref().is_some_and(|block| block.failed) && !ends_block {
            return Err(Fail::Error(SqlError::new(
                "25P02",
                "current transaction is aborted, commands ignored until end of transaction block",
            )));
        }
        match plan {
            Plan::Empty => Ok(None),
            Plan::Session(command) => {
                if let Some(result) = self.block_command(&command).await? {
                    return Ok(Some(result));
                }
                if let Some(result) = self.show_server_setting(&command) {
                    return Ok(Some(result));
                }
                let before = self.session.reported();
                let result = self.session.apply(&command)?;
                for (name, value) in self.session.reported() {
                    if !before.contains(&(name.clone(), value.clone())) {
                        self.out.parameter_status(&name, &value);
                    }
                }
                if let Some(warning) = command.warning() {
                    self.out.notice_response("WARNING", &warning);
                }
                if let Some(notice) = command.notice() {
                    self.out.notice_response("NOTICE", &notice);
                }
                Ok(Some(result))
            }
            Plan::Execute(execution) => Ok(Some(self.run_execution(execution, digest).await?)),
            Plan::Explain(explain) => Ok(Some(self.run_explain(explain, digest).await?)),
            Plan::CopyIn(copy) => {
                let read;
                let data = match copy_data {
                    Some(data) => data,
                    None => {
                        read = self.copy_in(copy.columns.len()).await?;
                        &read
                    }
                };
                let executions = copy.executions(data, COPY_ROWS_PER_STATEMENT)?;
                if executions.len() == 1 {
                    let execution = executions.into_iter().next().expect("one");
                    return Ok(Some(self.run_execution(execution, digest).await?));
                }
                Ok(Some(
                    self.run_implicit(
                        Implicit::Copy {
                            copy: &copy,
                            data,
                            executions,
                        },
                        digest,
                    )
                    .await?,
                ))
            }
            Plan::InsertSelect(insert) => Ok(Some(self.run_insert_select(insert, digest).await?)),
            Plan::WriteFrom(write) => Ok(Some(self.run_write_from(write, digest).await?)),
        }
    }

    /// INSERT … SELECT: the SELECT's execution, then one insert of its rows (both under the
    /// catalog guard of `digest`).
    async fn run_insert_select(
        &mut self,
        insert: sql::InsertSelect,
        digest: u64,
    ) -> Result<StatementResult, Fail> {
        let StatementResult::Rows { rows, .. } =
            self.run_execution(insert.select.clone(), digest).await?
        else {
            return Err(Fail::Error(SqlError::new(
                sqlstate::INTERNAL_ERROR,
                "the SELECT of an INSERT … SELECT answered no rows",
            )));
        };
        let execution = insert.execution(rows)?;
        self.run_execution(execution, digest).await
    }

    /// UPDATE … FROM / DELETE … USING: the join's SELECT, then the write by primary key of
    /// its rows, inside one transaction so that no write falls between the read and the
    /// write (`sql::plan::write_from`): the block's, or else an implicit one around the
    /// statement, committed when both steps succeed and aborted otherwise. An implicit
    /// transaction that dies (40001: a deadlock, the execution-order rule) is run again, as a
    /// client's retry would be; a statement outside a block is never a 40001 for the client
    /// while retries last.
    async fn run_write_from(
        &mut self,
        write: sql::WriteFrom,
        digest: u64,
    ) -> Result<StatementResult, Fail> {
        if canary_write_from_outside_transactions() {
            return self.write_from_steps(&write, digest).await;
        }
        self.run_implicit(Implicit::WriteFrom(&write), digest).await
    }

    /// Runs `work` in the open block, or else in an implicit transaction around it, committed
    /// when every step succeeds and aborted otherwise (see `run_write_from`).
    async fn run_implicit(
        &mut self,
        work: Implicit<'_>,
        digest: u64,
    ) -> Result<StatementResult, Fail> {
        if self.transaction.is_some() {
            return self.implicit_steps(&work, digest).await;
        }
        let Some(first) = self.backend.begin() else {
            return match work {
                Implicit::WriteFrom(_) => Err(Fail::Error(sql::SqlError::unsupported(
                    "UPDATE … FROM and DELETE … USING on a server without transactions",
                ))),
                // No transactions: the COPY as one statement, as before it was cut.
                Implicit::Copy { copy, data, .. } => {
                    let execution = copy.execution(data)?;
                    self.run_execution(execution, digest).await
                }
            };
        };
        let started = std::time::Instant::now();
        let mut context = first;
        for attempt in 0u32.. {
            self.transaction = Some(Block::new(context, false));
            let result = self.implicit_steps(&work, digest).await;
            let block = self.transaction.take().expect("the implicit block is open");
            let result = match result {
                Ok(answer) => match self.backend.end(&block.context, true).await {
                    Ok(None) => return Ok(answer),
                    Ok(Some(error)) => Err(Fail::Error(error.into())),
                    Err(error) => return Err(Fail::Error(end_error(error, true))),
                },
                Err(failure) => {
                    if let Err(error) = self.backend.end(&block.context, false).await {
                        crate::log::warn(format_args!(
                            "transaction {:016x}: the abort of an implicit transaction was not confirmed ({error})",
                            block.context.id()
                        ));
                    }
                    Err(failure)
                }
            };
            let retry = matches!(&result, Err(Fail::Error(error))
                if error.code == "40001" && !is_stale_catalog(error));
            if !retry || started.elapsed() > std::time::Duration::from_secs(60) {
                return result;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5 << attempt.min(6))).await;
            let Some(next) = self.backend.begin() else {
                return result;
            };
            context = next;
        }
        unreachable!("the loop returns")
    }

    /// The steps of implicit work, in the open block.
    async fn implicit_steps(
        &mut self,
        work: &Implicit<'_>,
        digest: u64,
    ) -> Result<StatementResult, Fail> {
        match work {
            Implicit::WriteFrom(write) => self.write_from_steps(write, digest).await,
            Implicit::Copy { executions, .. } => {
                assert!(
                    self.transaction.is_some(),
                    "a cut COPY runs in a transaction"
                );
                let mut copied = 0u64;
                for execution in executions.iter() {
                    let tag = match self.run_execution(execution.clone(), digest).await? {
                        StatementResult::Command { tag } | StatementResult::Rows { tag, .. } => tag,
                    };
                    copied += tag
                        .strip_prefix("COPY ")
                        .and_then(|count| count.parse::<u64>().ok())
                        .unwrap_or_else(|| panic!("a COPY statement's tag is COPY n: {tag}"));
                }
                Ok(StatementResult::Command {
                    tag: format!("COPY {copied}"),
                })
            }
        }
    }

    /// The two steps of a write with FROM, in the open block.
    async fn write_from_steps(
        &mut self,
        write: &sql::WriteFrom,
        digest: u64,
    ) -> Result<StatementResult, Fail> {
        assert!(
            self.transaction.is_some() || canary_write_from_outside_transactions(),
            "a write with FROM runs in a transaction"
        );
        let StatementResult::Rows { rows, .. } =
            self.run_execution(write.select.clone(), digest).await?
        else {
            return Err(Fail::Error(SqlError::new(
                sqlstate::INTERNAL_ERROR,
                "the SELECT of an UPDATE … FROM answered no rows",
            )));
        };
        let execution = write.execution(rows)?;
        self.run_execution(execution, digest).await
    }

    /// Sends an execution's operations where its routing says and merges the partitions'
    /// results.
    async fn run_execution(
        &mut self,
        execution: sql::Execution,
        digest: u64,
    ) -> Result<StatementResult, Fail> {
        if execution.operations.is_empty() {
            let result = execution.finish(Vec::new())?;
            for notice in &execution.notices {
                self.out.notice_response("NOTICE", notice);
            }
            return Ok(result);
        }
        self.check_privileges(&execution.operations).await?;
        let result = match execution.semi_join().filter(|_| self.transaction.is_some()) {
            // A semi-join reads at two points of the order: only inside a block, whose locks
            // make the two reads one (`sql::plan::semi_join`).
            Some(semi_join) => {
                let first = self.run_batch(&semi_join.first(), digest).await?;
                let probe = match semi_join.probe(&first)? {
                    Some(probe) => self.run_batch(&probe, digest).await?,
                    None => Vec::new(),
                };
                semi_join.finish(first, probe)?
            }
            None => {
                let results = self.run_batch(&execution, digest).await?;
                execution.finish(results)?
            }
        };
        self.after_privileged(&execution.operations).await?;
        for notice in &execution.notices {
            self.out.notice_response("NOTICE", notice);
        }
        Ok(result)
    }

    /// Sends an execution's operations where its routing says: each partition's results.
    async fn run_batch(
        &mut self,
        execution: &sql::Execution,
        digest: u64,
    ) -> Result<Vec<Vec<engine::OperationResult>>, Fail> {
        let command = Command::Guarded {
            catalog: digest,
            command: Box::new(Command::Batch(execution.operations.clone())),
        };
        if self.transaction.is_none() && self.locking.is_some_and(|locking| locking.skip_locked) {
            // PostgreSQL would skip the rows open transactions hold; a statement outside a
            // block here waits for them instead, so the clause is refused rather than ignored.
            return Err(Fail::Error(
                SqlError::unsupported("FOR UPDATE/SHARE SKIP LOCKED outside a transaction block")
                    .with_hint("run it inside BEGIN … COMMIT, as a queue's worker does"),
            ));
        }
        let asked = self.session.read_isolation();
        let outcomes = match self.transaction.as_mut() {
            // An autocommit read at the session's read isolation: the NOTICE says when it was
            // served stronger than SHOW says the level is served (a SELECT not pinned to one
            // partition key at `basic`; any read of a backend of one group at `basic` or
            // `snapshot`).
            None if command.is_read()
                && self.locking.is_none()
                && asked != sql::ReadIsolation::Sequential =>
            {
                let (outcomes, served) = self
                    .backend
                    .execute_read(&execution.routing, command, asked)
                    .await
                    .map_err(backend_error)?;
                if served != asked.served() {
                    self.out.notice_response(
                        "NOTICE",
                        &sql::ReadIsolation::served_stronger(asked, served),
                    );
                }
                outcomes
            }
            None => self
                .backend
                .execute_routed(&execution.routing, command)
                .await
                .map_err(backend_error)?,
            Some(block) => {
                if block.read_only && !command.is_read() {
                    let verb = execution
                        .operations
                        .iter()
                        .find_map(|operation| match operation {
                            engine::Operation::Insert { .. } => Some("INSERT"),
                            engine::Operation::Update { .. }
                            | engine::Operation::UpdateComputed { .. } => Some("UPDATE"),
                            engine::Operation::Delete { .. } => Some("DELETE"),
                            _ => None,
                        })
                        .unwrap_or("a write");
                    return Err(Fail::Error(SqlError::new(
                        "25006",
                        format!("cannot execute {verb} in a read-only transaction"),
                    )));
                }
                block.context.locking = self.locking;
                self.backend
                    .execute_in(&mut block.context, &execution.routing, command)
                    .await
                    .map_err(backend_error)?
            }
        };
        let mut results = Vec::with_capacity(outcomes.len());
        for (_, outcome) in outcomes {
            match outcome {
                Outcome::Batch(partition) => results.push(partition),
                Outcome::Error(error) => return Err(Fail::Error(error.into())),
                _ => {
                    return Err(Fail::Error(SqlError::new(
                        sqlstate::INTERNAL_ERROR,
                        "the engine answered a batch with another kind of outcome",
                    )))
                }
            }
        }
        Ok(results)
    }

    /// EXPLAIN: each operation's plan from every partition its routing reaches, named.
    async fn run_explain(
        &mut self,
        explain: sql::Explain,
        digest: u64,
    ) -> Result<StatementResult, Fail> {
        self.check_privileges(&explain.operations).await?;
        let mut texts: Vec<(String, Vec<String>)> = Vec::new();
        for operation in &explain.operations {
            let command = Command::Guarded {
                catalog: digest,
                command: Box::new(Command::Explain(operation.clone())),
            };
            let outcomes = self
                .backend
                .execute_routed(&explain.routing, command)
                .await
                .map_err(backend_error)?;
            for (partition, outcome) in outcomes {
                let text = match outcome {
                    Outcome::Explained(Ok(text)) => text,
                    Outcome::Explained(Err(error)) | Outcome::Error(error) => {
                        return Err(Fail::Error(error.into()))
                    }
                    _ => {
                        return Err(Fail::Error(SqlError::new(
                            sqlstate::INTERNAL_ERROR,
                            "the engine answered EXPLAIN with another kind of outcome",
                        )))
                    }
                };
                match texts.iter_mut().find(|(name, _)| *name == partition) {
                    Some((_, partition_texts)) => partition_texts.push(text),
                    None => texts.push((partition, vec![text])),
                }
            }
        }
        Ok(explain.finish_labelled(&texts))
    }

    /// COPY FROM STDIN: CopyInResponse, then CopyData until CopyDone. Errors leave copy mode
    /// at once; the client's remaining copy messages are dropped by the main loop.
    async fn copy_in(&mut self, columns: usize) -> Result<Vec<u8>, Fail> {
        self.out.copy_in_response(columns);
        self.flush().await?;
        let mut data = Vec::new();
        loop {
            let Some((tag, body)) =
                read_frame(&mut self.reader, self.limits.message_bytes_max).await?
            else {
                return Err(Fail::Io);
            };
            match tag {
                b'd' => {
                    if data.len().saturating_add(body.len()) > self.limits.copy_bytes_max {
                        return Err(Fail::Error(SqlError::new(
                            sqlstate::PROGRAM_LIMIT_EXCEEDED,
                            format!(
                                "COPY data exceeds the limit of {} bytes",
                                self.limits.copy_bytes_max
                            ),
                        )));
                    }
                    data.extend_from_slice(&body);
                }
                b'c' => return Ok(data),
                b'f' => {
                    let mut body = Body::new(&body);
                    let reason = body.cstr().unwrap_or("").to_string();
                    return Err(Fail::Error(SqlError::new(
                        "57014",
                        format!("COPY from stdin failed: {reason}"),
                    )));
                }
                // Flush and Sync are ignored in copy-in mode (libraries send them after every
                // Execute without checking for COPY).
                b'H' | b'S' => {}
                b'X' => return Err(Fail::Io),
                other => {
                    return Err(Fail::Error(SqlError::new(
                        sqlstate::PROTOCOL_VIOLATION,
                        format!("unexpected message type 0x{other:02x} during COPY from stdin"),
                    )))
                }
            }
        }
    }

    /// Simple query: every statement in turn, each planned after the previous one ran; stops
    /// at the first error; ReadyForQuery at the end.
    async fn simple_query(&mut self, body: &[u8]) -> Result<(), Fail> {
        // A simple query destroys the unnamed statement and portal.
        self.statements.remove("");
        self.portals.remove("");
        let result = self.simple_query_statements(body).await;
        match result {
            Ok(()) => {}
            Err(Fail::Error(error)) => {
                self.out.error_response("ERROR", &error);
                self.fail_block(Some(&error)).await;
            }
            Err(fail) => return Err(fail),
        }
        self.out.ready_for_query(self.transaction_status());
        self.flush().await
    }

    async fn simple_query_statements(&mut self, body: &[u8]) -> Result<(), Fail> {
        let mut body = Body::new(body);
        let query = body.cstr()?;
        body.end()?;
        if crate::security::roles::is_role_statement(query)
            || crate::security::grants::is_grant_statement(query)
        {
            self.refuse_utility_in_block()?;
        }
        if crate::security::roles::is_role_statement(query) {
            let tag = self.role_statement(query).await?;
            self.out.command_complete(&tag);
            return Ok(());
        }
        if crate::security::grants::is_grant_statement(query) {
            let tag = self.grant_statement(query).await?;
            self.out.command_complete(&tag);
            return Ok(());
        }
        let statements = sql::parse(query)?;
        if statements.is_empty() {
            self.out.empty_query_response();
            return Ok(());
        }
        // One statement time per query message: its statements form one implicit transaction
        // in PostgreSQL, whose now() is the same for all of them.
        let stamp = crate::os::statement_stamp();
        for statement in &statements {
            self.locking = sql::row_locking(statement)?;
            let (digest, plan, sequences) = self
                .planned_sequenced(|catalog, sequences| {
                    sql::plan_statement_sequenced(statement, catalog, stamp, sequences)
                })
                .await?;
            let replan = |catalog: &sql::MemoryCatalog| {
                sequences::final_plan(sql::plan_statement_sequenced(
                    statement,
                    catalog,
                    stamp,
                    sequences.clone(),
                ))
            };
            match self.run_planned(digest, plan, replan).await? {
                None => self.out.empty_query_response(),
                Some(StatementResult::Command { tag }) => self.out.command_complete(&tag),
                Some(StatementResult::Rows { columns, rows, tag }) => {
                    self.out.row_description(&columns, &[]);
                    let types: Vec<DataType> =
                        columns.iter().map(|column| column.data_type).collect();
                    for row in &rows {
                        self.out.data_row(row, &[], &types);
                        self.flush_if_full().await?;
                    }
                    self.out.command_complete(&tag);
                }
            }
            self.flush_if_full().await?;
        }
        Ok(())
    }

    /// Parse: name, query, declared parameter type OIDs.
    async fn parse(&mut self, body: &[u8]) -> Result<(), Fail> {
        let mut body = Body::new(body);
        let name = body.cstr().map_err(fatal)?.to_string();
        let query = body.cstr()?.to_string();
        let count = body.count()?;
        let mut declared = Vec::with_capacity(count);
        let mut declared_oids = Vec::with_capacity(count);
        for _ in 0..count {
            let oid = body.i32()? as u32;
            declared.push(sql::types::data_type_for_oid(oid));
            declared_oids.push(oid);
        }
        body.end()?;
        if !name.is_empty() {
            if self.statements.contains_key(&name) {
                return Err(Fail::Error(SqlError::new(
                    "42P05",
                    format!("prepared statement \"{name}\" already exists"),
                )));
            }
            if self.statements.len() >= self.limits.statements_max {
                return Err(Fail::Error(SqlError::new(
                    sqlstate::PROGRAM_LIMIT_EXCEEDED,
                    format!(
                        "too many prepared statements (at most {})",
                        self.limits.statements_max
                    ),
                )));
            }
        }
        if self.parse_utility(&name, &query)? {
            return Ok(());
        }
        let (_, prepared) = self
            .planned(
                |catalog| sql::prepare(&query, catalog, &declared),
                |_| false,
            )
            .await?;
        self.statements.insert(name, (prepared, declared_oids));
        self.out.parse_complete();
        Ok(())
    }

    /// Bind: portal, statement, parameter formats and values, result formats. Plans the
    /// statement against the current catalog; it runs at Execute.
    async fn bind(&mut self, body: &[u8]) -> Result<(), Fail> {
        let mut body = Body::new(body);
        let portal_name = body.cstr().map_err(fatal)?.to_string();
        let statement_name = body.cstr().map_err(fatal)?.to_string();
        let format_count = body.count()?;
        let mut parameter_formats = Vec::with_capacity(format_count);
        for _ in 0..format_count {
            parameter_formats.push(body.i16()?);
        }
        let parameter_count = body.count()?;
        let mut raw: Vec<Option<&[u8]>> = Vec::with_capacity(parameter_count);
        for _ in 0..parameter_count {
            let length = body.i32()?;
            if length == -1 {
                raw.push(None);
            } else {
                let length = usize::try_from(length)
                    .map_err(|_| protocol_violation("invalid parameter length in Bind"))?;
                raw.push(Some(body.take(length)?));
            }
        }
        let result_format_count = body.count()?;
        let mut result_formats = Vec::with_capacity(result_format_count);
        for _ in 0..result_format_count {
            result_formats.push(body.i16()?);
        }
        body.end()?;

        let Some((prepared, declared)) = self.statements.get(&statement_name) else {
            return Err(Fail::Error(SqlError::new(
                "26000",
                format!("prepared statement \"{statement_name}\" does not exist"),
            )));
        };
        if !portal_name.is_empty() && self.portals.contains_key(&portal_name) {
            return Err(Fail::Error(SqlError::new(
                "42P03",
                format!("cursor \"{portal_name}\" already exists"),
            )));
        }
        if !self.portals.contains_key(&portal_name) && self.portals.len() >= self.limits.portals_max
        {
            return Err(Fail::Error(SqlError::new(
                sqlstate::PROGRAM_LIMIT_EXCEEDED,
                format!("too many portals (at most {})", self.limits.portals_max),
            )));
        }
        if parameter_formats.len() > 1 && parameter_formats.len() != raw.len() {
            return Err(Fail::Error(SqlError::new(
                sqlstate::PROTOCOL_VIOLATION,
                format!(
                    "bind message has {} parameter formats but {} parameters",
                    parameter_formats.len(),
                    raw.len()
                ),
            )));
        }
        if raw.len() != prepared.parameter_types.len() {
            return Err(Fail::Error(SqlError::new(
                sqlstate::PROTOCOL_VIOLATION,
                format!(
                    "bind message supplies {} parameters, but prepared statement \"{}\" \
                     requires {}",
                    raw.len(),
                    statement_name,
                    prepared.parameter_types.len()
                ),
            )));
        }
        let mut values = Vec::with_capacity(raw.len());
        for (index, (bytes, data_type)) in raw.iter().zip(&prepared.parameter_types).enumerate() {
            let format = match parameter_formats.len() {
                0 => 0,
                1 => parameter_formats[0],
                _ => parameter_formats[index],
            };
            let Some(bytes) = bytes else {
                values.push(None);
                continue;
            };
            let value = match format {
                0 => {
                    let text = std::str::from_utf8(bytes).map_err(|_| {
                        SqlError::new("22021", "invalid byte sequence for encoding \"UTF8\"")
                    })?;
                    sql::types::decode_text(text, *data_type)?
                }
                // A parameter the client declared int2 (psycopg does, for small Python ints)
                // arrives in 2 bytes and widens to INT; an inferred one must have INT's 4.
                1 if declared.get(index) == Some(&sql::types::INT2_OID) => {
                    sql::types::decode_binary_int2(bytes)?
                }
                1 => sql::types::decode_binary(bytes, *data_type)?,
                other => {
                    return Err(Fail::Error(SqlError::new(
                        sqlstate::PROTOCOL_VIOLATION,
                        format!("unsupported format code: {other}"),
                    )))
                }
            };
            values.push(Some(value));
        }
        let prepared = prepared.clone();
        let stamp = crate::os::statement_stamp();
        let (digest, plan, sequences) = self
            .planned_sequenced(|catalog, sequences| {
                prepared.bind_sequenced(catalog, &values, stamp, sequences)
            })
            .await?;
        let columns = sql::result_columns(&plan);
        let formats = match result_formats.len() {
            0 => vec![0; columns.len()],
            1 => vec![result_formats[0]; columns.len()],
            count if count == columns.len() => result_formats,
            count => {
                return Err(Fail::Error(SqlError::new(
                    sqlstate::PROTOCOL_VIOLATION,
                    format!(
                        "bind message has {count} result formats but query has {} columns",
                        columns.len()
                    ),
                )))
            }
        };
        if let Some(other) = formats.iter().find(|format| !matches!(format, 0 | 1)) {
            return Err(Fail::Error(SqlError::new(
                sqlstate::PROTOCOL_VIOLATION,
                format!("unsupported format code: {other}"),
            )));
        }
        self.bind_utility(&statement_name, &portal_name);
        self.portals.insert(
            portal_name,
            Portal {
                state: PortalState::Pending(plan),
                planned_against: digest,
                rebind: (prepared, values, stamp, sequences),
                columns,
                formats,
            },
        );
        self.out.bind_complete();
        Ok(())
    }

    /// Describe a statement (ParameterDescription, then RowDescription or NoData) or a portal
    /// (RowDescription or NoData).
    fn describe(&mut self, body: &[u8]) -> Result<(), Fail> {
        let mut body = Body::new(body);
        let kind = body.u8()?;
        let name = body.cstr().map_err(fatal)?;
        body.end()?;
        match kind {
            b'S' => {
                let Some((prepared, declared)) = self.statements.get(name) else {
                    return Err(Fail::Error(SqlError::new(
                        "26000",
                        format!("prepared statement \"{name}\" does not exist"),
                    )));
                };
                // A type the client declared is reported back as declared (PostgreSQL does;
                // pgjdbc refuses to see a declared varchar come back as text).
                let oids: Vec<u32> = prepared
                    .parameter_types
                    .iter()
                    .enumerate()
                    .map(|(index, data_type)| match declared.get(index) {
                        Some(&oid) if oid != 0 => oid,
                        _ => sql::types::pg_type(*data_type).oid,
                    })
                    .collect();
                self.out.parameter_description(&oids);
                if prepared.columns.is_empty() {
                    self.out.no_data();
                } else {
                    self.out.row_description(&prepared.columns, &[]);
                }
            }
            b'P' => {
                let Some(portal) = self.portals.get(name) else {
                    return Err(Fail::Error(SqlError::new(
                        "34000",
                        format!("portal \"{name}\" does not exist"),
                    )));
                };
                if portal.columns.is_empty() {
                    self.out.no_data();
                } else {
                    self.out.row_description(&portal.columns, &portal.formats);
                }
            }
            other => {
                return Err(protocol_violation(format!(
                    "invalid DESCRIBE message subtype {other}"
                )))
            }
        }
        Ok(())
    }

    /// Execute: runs a pending portal, then sends up to `max_rows` rows (0: all);
    /// PortalSuspended when rows remain.
    async fn execute(&mut self, body: &[u8]) -> Result<(), Fail> {
        let mut body = Body::new(body);
        let name = body.cstr().map_err(fatal)?.to_string();
        let max_rows = body.i32()?;
        body.end()?;
        if self.execute_utility(&name).await? {
            return Ok(());
        }
        let Some(portal) = self.portals.get_mut(&name) else {
            return Err(Fail::Error(SqlError::new(
                "34000",
                format!("portal \"{name}\" does not exist"),
            )));
        };
        let state = std::mem::replace(&mut portal.state, PortalState::Done(None));
        let (mut rows, tag, resumed) = match state {
            PortalState::Done(None) => {
                self.out.empty_query_response();
                return Ok(());
            }
            PortalState::Done(Some(tag)) => {
                portal.state = PortalState::Done(Some(tag.clone()));
                let tag = if tag.starts_with("SELECT ") {
                    "SELECT 0".to_string()
                } else {
                    tag
                };
                self.out.command_complete(&tag);
                return Ok(());
            }
            PortalState::Suspended { rows, tag } => (rows, tag, true),
            PortalState::Pending(plan) => {
                let digest = portal.planned_against;
                let (prepared, values, stamp, sequences) = portal.rebind.clone();
                self.locking = prepared.row_locking()?;
                let rebind = move |catalog: &sql::MemoryCatalog| {
                    sequences::final_plan(prepared.bind_sequenced(
                        catalog,
                        &values,
                        stamp,
                        sequences.clone(),
                    ))
                };
                let result = self.run_planned(digest, plan, rebind).await?;
                match result {
                    None => {
                        self.out.empty_query_response();
                        return Ok(());
                    }
                    Some(StatementResult::Command { tag }) => {
                        if let Some(portal) = self.portals.get_mut(&name) {
                            portal.state = PortalState::Done(Some(tag.clone()));
                        }
                        self.out.command_complete(&tag);
                        return Ok(());
                    }
                    Some(StatementResult::Rows { rows, tag, .. }) => {
                        (VecDeque::from(rows), tag, false)
                    }
                }
            }
        };
        let (formats, types) = match self.portals.get(&name) {
            Some(portal) => (
                portal.formats.clone(),
                portal
                    .columns
                    .iter()
                    .map(|column| column.data_type)
                    .collect::<Vec<DataType>>(),
            ),
            None => (Vec::new(), Vec::new()),
        };
        let limit = usize::try_from(max_rows)
            .ok()
            .filter(|limit| *limit > 0)
            .unwrap_or(usize::MAX);
        let mut sent = 0usize;
        while sent < limit {
            let Some(row) = rows.pop_front() else { break };
            self.out.data_row(&row, &formats, &types);
            sent += 1;
            self.flush_if_full().await?;
        }
        let state = if rows.is_empty() {
            // After a suspension, PostgreSQL counts the rows of the last Execute.
            let tag = if resumed && tag.starts_with("SELECT ") {
                format!("SELECT {sent}")
            } else {
                tag
            };
            self.out.command_complete(&tag);
            PortalState::Done(Some(tag))
        } else {
            self.out.portal_suspended();
            PortalState::Suspended { rows, tag }
        };
        if let Some(portal) = self.portals.get_mut(&name) {
            portal.state = state;
        }
        Ok(())
    }

    /// Close a statement or portal; closing one that does not exist is not an error.
    fn close(&mut self, body: &[u8]) -> Result<(), Fail> {
        let mut body = Body::new(body);
        let kind = body.u8()?;
        let name = body.cstr().map_err(fatal)?;
        body.end()?;
        match kind {
            b'S' => {
                self.statements.remove(name);
            }
            b'P' => {
                self.portals.remove(name);
            }
            other => {
                return Err(protocol_violation(format!(
                    "invalid CLOSE message subtype {other}"
                )))
            }
        }
        self.out.close_complete();
        Ok(())
    }
}

/// Statement and portal names that are not UTF-8 are a protocol violation, not a statement
/// error.
fn fatal(fail: Fail) -> Fail {
    match fail {
        Fail::Error(error) => Fail::Fatal(error),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::Body;

    #[test]
    fn body_reads_fail_instead_of_panicking() {
        let mut body = Body::new(&[0, 1, b'a']);
        assert!(body.i32().is_err());
        let mut body = Body::new(b"abc");
        assert!(body.cstr().is_err());
        let mut body = Body::new(&[0xff, 0]);
        assert!(body.cstr().is_err());
        let mut body = Body::new(&[0, 5]);
        assert_eq!(body.count().ok(), Some(5));
        assert!(body.end().is_ok());
    }
}
