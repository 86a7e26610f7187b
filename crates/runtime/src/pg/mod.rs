//! # pg — the PostgreSQL wire-protocol front end
//!
//! Speaks protocol 3.0 to PostgreSQL clients (psql, libpq, tokio-postgres, …) over TCP, with a
//! hand-written codec on tokio (`protocol`), and runs their SQL through the pure `sql` crate and
//! a `SqlBackend` (the node's replicated engine, or `LocalBackend` in tests).
//!
//! ## Message flow
//!
//! ```text
//!  startup:  [SSLRequest → 'S' + TLS handshake (tls configured) | 'N'] [GSSENCRequest → 'N']
//!            (CancelRequest: accepted, ignored, closed)
//!            StartupMessage(user, database, settings) → [AuthenticationSASL; SASLInitialResponse
//!            → AuthenticationSASLContinue; SASLResponse → AuthenticationSASLFinal]
//!            (authentication on) AuthenticationOk, ParameterStatus × n
//!            (Session::reported), BackendKeyData, ReadyForQuery('I')
//!  simple:   Query(sql) → for each statement, planned against a fresh catalog after the
//!            previous one ran: [RowDescription, DataRow × n (text)] CommandComplete
//!            | EmptyQueryResponse | ErrorResponse (stops the rest); then ReadyForQuery
//!  extended: Parse → ParseComplete        (declared OIDs → types::data_type_for_oid)
//!            Bind → BindComplete          (text/binary parameters decoded, planned now)
//!            Describe S → ParameterDescription, RowDescription | NoData
//!            Describe P → RowDescription | NoData
//!            Execute(max_rows) → DataRow × n, CommandComplete | PortalSuspended
//!            Close → CloseComplete;  Flush → (output written);  Sync → ReadyForQuery
//!            after an error, messages are discarded until Sync (as PostgreSQL does)
//!  copy:     COPY t FROM STDIN → CopyInResponse; CopyData × n; CopyDone → CommandComplete
//!            "COPY n" | CopyFail → ErrorResponse. Flush/Sync are ignored in copy mode; copy
//!            messages arriving after a failed COPY are dropped.
//!  Terminate → close.
//! ```
//!
//! Execution: an `Execution`'s operations go to the backend as one `engine::Command::Batch`
//! with the plan's `Routing` (`RoutedBackend::execute_routed`); the backend sends it to the
//! partitions the routing names and `Execution::finish` merges their results. EXPLAIN sends
//! `Command::Explain` per operation the same way and names each partition's lines.
//! An autocommit read goes through `RoutedBackend::execute_read` with
//! `Session::read_isolation`: on a partitioned cluster, `basic` is served for a SELECT pinned
//! to one partition key (its group's primary answers from its executed state), `snapshot` for
//! every read (one `PartitionOperation::Snapshot` per partition group at one router
//! timestamp), every other read `sequential`, with a NOTICE when a statement is served
//! stronger than asked
//! (`docs/internals/sql.md`, "Read isolation"). Operations of
//! a simple query with several statements are separate batches (autocommit per statement).
//!
//! ## Limits (`PgLimits`)
//!
//! Every frame's length is checked before its body is read, and the body buffer grows only as
//! bytes arrive. A frame over `message_bytes_max` (or with a length under 4) is a protocol
//! violation: ErrorResponse 08P01 (FATAL), then the connection closes; so is a startup packet
//! outside 8..=`startup_bytes_max`, an unknown message type, or a body that does not parse.
//! COPY data beyond `copy_bytes_max` fails the COPY (54000) and the session goes on. Prepared
//! statements and portals per connection are bounded (54000); portals end at Sync. Clients
//! beyond `connections_max` get FATAL 53300. A client that does not finish startup within
//! `startup_timeout` is dropped. Nothing a client sends can panic the server: every read of a
//! body is checked (`protocol::Body`), and values decode through `sql::types` into SQLSTATE
//! errors.
//!
//! ## Authentication and TLS
//!
//! With `serve_secured` and authentication on (`crate::security`), a StartupMessage is answered
//! with AuthenticationSASL (SCRAM-SHA-256, `connection/authentication.rs`; the exchange itself
//! is the `pgwire` crate's `ScramServerAuth`, through `crate::security::scram`): it runs
//! against the user's verifier (the cluster file's admin, or a replicated role; an unknown user
//! gets a made-up one, so the exchange looks the same) and ends in AuthenticationSASLFinal and
//! AuthenticationOk, or FATAL 28P01 `password authentication failed for user "…"`. Negotiation,
//! TLS handshake, startup and authentication together must end within `startup_timeout`. With
//! TLS configured, SSLRequest gets 'S' and the session continues over rustls; a session without
//! TLS is refused with FATAL 28000. `CREATE ROLE`, `ALTER ROLE` and `DROP ROLE` (simple protocol)
//! are run by `crate::security::roles` for superusers, `GRANT` and `REVOKE` by
//! `crate::security::grants`; a role without `@read`/`@write` gets 42501 for statements that
//! read/write, and a role that is not a superuser needs its grants on every table a statement
//! touches (42501 `permission denied for table t`). `serve` (the old single-group node, the front end's tests)
//! neither authenticates nor offers TLS: every user is accepted (AuthenticationOk at once).
//!
//! ## Not supported
//!
//! - GSS encryption: refused with 'N'. The database name is read and ignored.
//! - Cancel requests: accepted and ignored (the connection is closed); BackendKeyData carries
//!   a process id and secret only because clients expect them.
//! - COPY TO, COPY in CSV or binary format (the planner refuses them), the function call
//!   protocol, replication connections, protocol versions other than 3.0 (3.x minor versions
//!   get NegotiateProtocolVersion for 3.0).
//! - Transactions beyond autocommit: BEGIN / START TRANSACTION are refused with 0A000, every
//!   statement commits on its own; ReadyForQuery is always 'I'; COMMIT and ROLLBACK answer
//!   PostgreSQL's WARNING "there is no transaction in progress" (25P01). Portals live until
//!   Sync, as in PostgreSQL's implicit transaction.
//! - Later steps: pgjdbc (its extended-protocol flow is implemented but untested here);
//!   pgbench's built-in TPC-B schema (`pgbench -i` needs statements the planner refuses —
//!   custom scripts run in all three query modes, see `tests/pg_psql.rs`); routing over several
//!   partitions; NOTIFY; DECLARE/FETCH cursors.
//!
//! Tests: `tests/pg_psql.rs` (psql, pgbench), `tests/pg_extended.rs` (tokio-postgres: binary
//! parameters and results, BEGIN refused, COPY), `tests/pg_protocol.rs` (raw bytes:
//! startup, 08P01 on bad frames, discard until Sync, portals fetched in chunks before Sync,
//! limits, random input).

mod connection;
mod protocol;

use crate::log;
use crate::sql_backend::{BackendError, SqlBackend};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// A backend whose tables may span partitions (`crate::ecast::sql::ClusterBackend`): runs a
/// planned command where its routing sends it, answering one engine outcome per partition
/// reached, with the partition's name (EXPLAIN shows it); `Execution::finish` merges them. A
/// backend with one partition (`LocalBackend`, a single replicated group) runs everything
/// there: the default.
pub trait RoutedBackend: SqlBackend {
    fn execute_routed(
        &self,
        routing: &sql::Routing,
        command: engine::Command,
    ) -> impl std::future::Future<Output = Result<Vec<(String, engine::Outcome)>, BackendError>> + Send
    {
        let _ = routing;
        let run = self.execute(command);
        async move { Ok(vec![("0".to_string(), run.await?)]) }
    }

    /// An autocommit read-only command at the session's read isolation
    /// (`SET tessera.read_isolation`), with the level it was served at (never weaker than
    /// asked; the front end sends a NOTICE when it is stronger). By default every read is
    /// served `sequential` (a single group orders its reads).
    fn execute_read(
        &self,
        routing: &sql::Routing,
        command: engine::Command,
        isolation: sql::ReadIsolation,
    ) -> impl std::future::Future<
        Output = Result<(Vec<(String, engine::Outcome)>, sql::ReadIsolation), BackendError>,
    > + Send {
        let _ = isolation;
        let run = self.execute_routed(routing, command);
        async move { Ok((run.await?, sql::ReadIsolation::Sequential)) }
    }
}

impl RoutedBackend for crate::sql_backend::LocalBackend {}

/// An open transaction block, as the front end hands it to the backend
/// (`RoutedBackend::execute_in`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransactionContext {
    /// The transaction's state at its gateway and the rules it runs by (its id, statements
    /// sent, table locks held, first placement key, whether it is global): the pure driver
    /// the simulator runs too (`cluster::transaction_driver`).
    pub driver: cluster::transaction_driver::Transaction,
    /// The current statement's locking clause (`SELECT … FOR UPDATE`), set by the front end
    /// for each statement.
    pub locking: Option<sql::RowLocking>,
    /// The innermost open savepoint's id (0: none), set by the front end; each statement
    /// carries it, so that the partitions keep what ROLLBACK TO it undoes.
    pub savepoint: u32,
}

impl TransactionContext {
    /// Unique across the cluster (a random per-process prefix and a counter).
    pub fn id(&self) -> u64 {
        self.driver.id
    }
}

/// A backend that runs transaction blocks (`crate::ecast::sql::ClusterBackend`,
/// `docs/internals/sprint.md`). The defaults refuse them (a backend without transactions).
pub trait TransactionBackend: RoutedBackend {
    /// A new transaction's identity (nothing is sent); `None`: this backend has no
    /// transactions, and BEGIN is refused (0A000).
    fn begin(&self) -> Option<TransactionContext> {
        None
    }

    /// Runs a statement of the transaction where its routing sends it (first taking the
    /// table locks it lacks), waiting for locks other transactions hold (or dying where the
    /// partitions say so: a deadlock, the execution-order rule).
    fn execute_in(
        &self,
        transaction: &mut TransactionContext,
        routing: &sql::Routing,
        command: engine::Command,
    ) -> impl std::future::Future<Output = Result<Vec<(String, engine::Outcome)>, BackendError>> + Send
    {
        let _ = (transaction, routing, command);
        async {
            Ok(vec![(
                String::new(),
                engine::Outcome::Error(engine::EngineError::FeatureNotSupported {
                    feature: "transaction blocks on this backend".into(),
                }),
            )])
        }
    }

    /// Ends the transaction everywhere (commit or abort), at one point of the global order.
    /// `Ok(Some(error))`: the commit was refused (another gateway had aborted it).
    fn end(
        &self,
        transaction: &TransactionContext,
        commit: bool,
    ) -> impl std::future::Future<Output = Result<Option<engine::EngineError>, BackendError>> + Send
    {
        let _ = (transaction, commit);
        async { Ok(None) }
    }

    /// ROLLBACK TO savepoint `savepoint` (its id) everywhere, at one point of the global
    /// order: every partition writes back what the transaction changed since; its locks stay.
    /// `Ok(Some(error))`: refused (another gateway had aborted the transaction).
    fn rollback_to(
        &self,
        transaction: &TransactionContext,
        savepoint: u32,
    ) -> impl std::future::Future<Output = Result<Option<engine::EngineError>, BackendError>> + Send
    {
        let _ = (transaction, savepoint);
        async {
            Ok(Some(engine::EngineError::FeatureNotSupported {
                feature: "savepoints on this backend".into(),
            }))
        }
    }
}

impl TransactionBackend for crate::sql_backend::LocalBackend {}

/// Per-server limits on what clients may send and hold.
#[derive(Clone, Debug)]
pub struct PgLimits {
    /// The largest message body accepted (a Query's text, a Bind's parameters, one CopyData).
    pub message_bytes_max: usize,
    /// The largest startup packet (PostgreSQL: 10,000 bytes).
    pub startup_bytes_max: usize,
    /// All CopyData of one COPY together.
    pub copy_bytes_max: usize,
    /// Named prepared statements per connection.
    pub statements_max: usize,
    /// Portals per connection (they end at Sync).
    pub portals_max: usize,
    /// Concurrent connections.
    pub connections_max: usize,
    /// Time for a new connection to finish its startup packets and its authentication.
    pub startup_timeout: Duration,
    /// A session that sends nothing for this long is closed with FATAL 57P05 (PostgreSQL's
    /// `idle_session_timeout`); `None`: never.
    pub idle_timeout: Option<Duration>,
}

impl Default for PgLimits {
    fn default() -> PgLimits {
        PgLimits {
            message_bytes_max: sql::parse::QUERY_BYTES_MAX + 64 * 1024,
            startup_bytes_max: 10_000,
            copy_bytes_max: 256 * 1024 * 1024,
            statements_max: 10_000,
            portals_max: 1_000,
            connections_max: 1_000,
            startup_timeout: Duration::from_secs(10),
            idle_timeout: None,
        }
    }
}

/// Serves one client over `reader` and `writer` to its end, as `serve` does for an accepted
/// connection (with a fixed process id and secret). For the fuzz target that drives the
/// protocol without sockets (`fuzz/fuzz_targets/pg_connection.rs`).
#[doc(hidden)]
pub async fn serve_connection<B, R, W>(backend: B, limits: PgLimits, reader: R, writer: W)
where
    B: TransactionBackend,
    R: tokio::io::AsyncRead + Unpin + Send,
    W: tokio::io::AsyncWrite + Unpin + Send,
{
    connection::Connection::new(backend, limits, reader, writer)
        .run(1, 0)
        .await
}

/// Accepts PostgreSQL clients on `listener` forever, each served by its own task over
/// `backend`, without authentication.
pub async fn serve<B: TransactionBackend>(listener: TcpListener, backend: B, limits: PgLimits) {
    serve_secured(listener, backend, limits, crate::security::Security::open()).await
}

/// As `serve`, with clients authenticated as `security` says (SCRAM-SHA-256 against the
/// admin of the cluster file and the replicated roles).
pub async fn serve_secured<B: TransactionBackend>(
    listener: TcpListener,
    backend: B,
    limits: PgLimits,
    security: Arc<crate::security::Security>,
) {
    let slots = Arc::new(Semaphore::new(limits.connections_max));
    let next_process_id = AtomicI32::new(1);
    let secrets = std::collections::hash_map::RandomState::new();
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                log::warn(format_args!(
                    "accepting a PostgreSQL client failed: {error}"
                ));
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let process_id = next_process_id.fetch_add(1, Ordering::Relaxed) & i32::MAX;
        let secret = {
            use std::hash::BuildHasher;
            secrets.hash_one(process_id) as i32
        };
        let permit = slots.clone().try_acquire_owned();
        let (backend, limits) = (backend.clone(), limits.clone());
        let security = security.clone();
        tokio::spawn(serve_client(
            stream,
            Client {
                backend,
                limits,
                security,
                admitted: permit.ok(),
                process_id,
                secret,
            },
        ));
    }
}

/// What one accepted client is served with.
struct Client<B> {
    backend: B,
    limits: PgLimits,
    security: Arc<crate::security::Security>,
    /// A connection slot, or `None` beyond `connections_max` (refused with 53300).
    admitted: Option<tokio::sync::OwnedSemaphorePermit>,
    process_id: i32,
    secret: i32,
}

/// How the client's first packets went (`negotiate`).
enum Negotiated {
    /// It asked for TLS and the server has it: 'S' was sent, the handshake comes next.
    Tls,
    /// It goes on in plain text; these bytes (its first packet's start) were read already.
    Plain(Vec<u8>),
}

/// Reads the client's first packet's start: an SSLRequest is answered 'S' (TLS configured) or 'N',
/// a GSSENCRequest 'N' (and the next 8 bytes are read); anything else is the start of a
/// StartupMessage or CancelRequest, handed back to be read again.
async fn negotiate(stream: &mut tokio::net::TcpStream, tls: bool) -> std::io::Result<Negotiated> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    loop {
        // The length first: only an 8-byte packet can be an SSLRequest or GSSENCRequest, and
        // a client that sent a bad length waits for no more bytes before it hears why.
        let mut length = [0u8; 4];
        stream.read_exact(&mut length).await?;
        if i32::from_be_bytes(length) != 8 {
            return Ok(Negotiated::Plain(length.to_vec()));
        }
        let mut code = [0u8; 4];
        stream.read_exact(&mut code).await?;
        match i32::from_be_bytes(code) {
            protocol::SSL_REQUEST if tls => {
                stream.write_all(b"S").await?;
                return Ok(Negotiated::Tls);
            }
            protocol::SSL_REQUEST | protocol::GSSENC_REQUEST => {
                stream.write_all(b"N").await?;
            }
            _ => return Ok(Negotiated::Plain([length, code].concat())),
        }
    }
}

/// Serves one client: the encryption negotiation, the TLS handshake if asked for, then the
/// connection (or its refusal beyond `connections_max`), all startup steps within
/// `startup_timeout` (the connection counts its own from its start).
async fn serve_client<B: TransactionBackend>(mut stream: tokio::net::TcpStream, client: Client<B>) {
    use tokio::io::AsyncReadExt;
    let tls = client.security.tls().cloned();
    let negotiated = tokio::time::timeout(
        client.limits.startup_timeout,
        negotiate(&mut stream, tls.is_some()),
    )
    .await;
    match (negotiated, tls) {
        (Ok(Ok(Negotiated::Plain(prefix))), _) => {
            let (reader, writer) = stream.into_split();
            let reader = std::io::Cursor::new(prefix).chain(reader);
            run_client(client, reader, writer, false).await;
        }
        (Ok(Ok(Negotiated::Tls)), Some(acceptor)) => {
            let handshake =
                tokio::time::timeout(client.limits.startup_timeout, acceptor.accept(stream)).await;
            match handshake {
                Ok(Ok(encrypted)) => {
                    let (reader, writer) = tokio::io::split(encrypted);
                    run_client(client, reader, writer, true).await;
                }
                Ok(Err(error)) => log::warn(format_args!(
                    "PostgreSQL client's TLS handshake failed: {error}"
                )),
                Err(_) => log::warn(format_args!("PostgreSQL client's TLS handshake timed out")),
            }
        }
        // The client left, was too slow, or (impossible) 'S' without TLS.
        _ => {}
    }
}

async fn run_client<B, R, W>(client: Client<B>, reader: R, writer: W, encrypted: bool)
where
    B: TransactionBackend,
    R: tokio::io::AsyncRead + Unpin + Send,
    W: tokio::io::AsyncWrite + Unpin + Send,
{
    let connection = connection::Connection::new(client.backend, client.limits, reader, writer)
        .with_security(client.security)
        .with_encryption(encrypted);
    match client.admitted {
        Some(_permit) => connection.run(client.process_id, client.secret).await,
        None => {
            connection
                .refuse(sql::SqlError::new(
                    "53300",
                    "sorry, too many clients already",
                ))
                .await
        }
    }
}
