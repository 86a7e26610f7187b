//! What the PostgreSQL front end needs from a node: the catalog to plan against, and a way to
//! run engine commands through the replicated group. The node implements it
//! (`NodeHandle`); `LocalBackend` is an unreplicated engine for the front end's own tests.

use std::future::Future;
use std::sync::{Arc, Mutex};

/// Why a backend could not run a command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackendError {
    /// No primary answered in time (a view change, a partition): the client may retry.
    Unavailable,
}

impl std::fmt::Display for BackendError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BackendError::Unavailable => write!(formatter, "no primary answered; try again"),
        }
    }
}

pub trait SqlBackend: Clone + Send + Sync + 'static {
    /// The tables to plan against, with the catalog digest to guard the plan's commands with
    /// (`engine::Command::Guarded`). `fresh`: read through the primary now (linearisable);
    /// otherwise a cached copy may do, since a guarded command meeting another catalog does
    /// not run.
    fn catalog(
        &self,
        fresh: bool,
    ) -> impl Future<Output = Result<(u64, sql::MemoryCatalog), BackendError>> + Send;
    /// Runs one engine command: read-only commands through the primary's linearisable read
    /// path, others through the replicated log. Exactly once, however often it is retried.
    fn execute(
        &self,
        command: engine::Command,
    ) -> impl Future<Output = Result<engine::Outcome, BackendError>> + Send;
}

fn error_malformed() -> engine::EngineError {
    engine::EngineError::Malformed
}

/// A copy of an engine's catalog.
pub fn catalog_of(engine: &engine::Engine) -> sql::MemoryCatalog {
    use sql::Catalog;
    let mut catalog = sql::MemoryCatalog::new();
    for name in Catalog::table_names(engine) {
        if let Some(entry) = Catalog::table(engine, &name) {
            catalog.tables.insert(name, entry);
        }
    }
    catalog
}

/// One engine in this process, unreplicated: for tests of the front end.
#[derive(Clone, Default)]
pub struct LocalBackend {
    engine: Arc<Mutex<engine::Engine>>,
}

impl SqlBackend for LocalBackend {
    async fn catalog(&self, _fresh: bool) -> Result<(u64, sql::MemoryCatalog), BackendError> {
        let engine = self
            .engine
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        Ok((engine.catalog_digest(), catalog_of(&engine)))
    }

    async fn execute(&self, command: engine::Command) -> Result<engine::Outcome, BackendError> {
        use vr::StateMachine;
        let mut engine = self
            .engine
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let bytes = engine.apply(&command.encode());
        Ok(engine::Outcome::decode(&bytes).unwrap_or(engine::Outcome::Error(error_malformed())))
    }
}

/// A node as the SQL front end's backend: engine commands travel through the node's replicated
/// group like RESP commands do (the node's gateway is the VR client), each on a client id from
/// a small pool, so that a retried command executes once and the client table stays bounded by
/// the number of concurrent statements.
#[derive(Clone)]
pub struct NodeBackend {
    node: crate::node::NodeHandle,
    pool: Arc<Mutex<Vec<PooledClient>>>,
    /// The catalog as last read through the primary, with its digest; shared by the node's
    /// connections.
    catalog: Arc<Mutex<Option<(u64, sql::MemoryCatalog)>>>,
}

struct PooledClient {
    client: wire::ClientId,
    next: wire::RequestNumber,
    replies: tokio::sync::mpsc::UnboundedReceiver<wire::Message>,
}

/// Clients kept for reuse at most; more concurrent statements open (and close) their own.
const POOL_MAX: usize = 64;
const RETRY_AFTER: std::time::Duration = std::time::Duration::from_millis(100);
const RETRY_AFTER_MAX: std::time::Duration = std::time::Duration::from_secs(1);
const NOT_PRIMARY_BACKOFF: std::time::Duration = std::time::Duration::from_millis(20);
const GIVE_UP_AFTER: std::time::Duration = std::time::Duration::from_secs(10);

impl NodeBackend {
    pub fn new(node: crate::node::NodeHandle) -> NodeBackend {
        NodeBackend {
            node,
            pool: Arc::default(),
            catalog: Arc::default(),
        }
    }

    async fn client(&self) -> Result<PooledClient, BackendError> {
        if let Some(pooled) = self.lock_pool().pop() {
            return Ok(pooled);
        }
        let client = wire::ClientId(crate::node::random_u64());
        let (replies, receiver) = tokio::sync::mpsc::unbounded_channel();
        let event = crate::node::Event::ClientOpened { client, replies };
        self.node
            .events
            .send(event)
            .await
            .map_err(|_| BackendError::Unavailable)?;
        Ok(PooledClient {
            client,
            next: wire::RequestNumber(1),
            replies: receiver,
        })
    }

    async fn release(&self, pooled: PooledClient) {
        let client = pooled.client;
        {
            let mut pool = self.lock_pool();
            if pool.len() < POOL_MAX {
                pool.push(pooled);
                return;
            }
        }
        let _ = self
            .node
            .events
            .send(crate::node::Event::ClientClosed { client })
            .await;
    }

    fn lock_pool(&self) -> std::sync::MutexGuard<'_, Vec<PooledClient>> {
        self.pool
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Sends the request until a reply comes (the same request number every time).
    async fn submit(
        &self,
        pooled: &mut PooledClient,
        kind: wire::RequestKind,
        operation: Vec<u8>,
    ) -> Result<Vec<u8>, BackendError> {
        let number = pooled.next;
        pooled.next = wire::RequestNumber(number.0 + 1);
        let request = wire::Request {
            client: pooled.client,
            request: number,
            kind,
            operation,
        };
        let started = std::time::Instant::now();
        let mut retry_after = RETRY_AFTER;
        while started.elapsed() < GIVE_UP_AFTER {
            let event = crate::node::Event::Submit {
                request: request.clone(),
            };
            if self.node.events.send(event).await.is_err() {
                return Err(BackendError::Unavailable);
            }
            // Resend after 100 ms, then back off to 1 s: a statement waiting behind a long
            // scan cycle is not lost, and its resends (dropped as duplicates) cost little.
            let deadline = tokio::time::sleep(retry_after);
            retry_after = (retry_after * 2).min(RETRY_AFTER_MAX);
            tokio::pin!(deadline);
            loop {
                tokio::select! {
                    message = pooled.replies.recv() => match message {
                        Some(wire::Message::Reply(reply)) if reply.request == number => {
                            return Ok(reply.result);
                        }
                        Some(wire::Message::NotPrimary { request, .. }) if request == number => {
                            tokio::time::sleep(NOT_PRIMARY_BACKOFF).await;
                            break;
                        }
                        Some(_) => continue, // A late answer to an earlier attempt.
                        None => return Err(BackendError::Unavailable),
                    },
                    () = &mut deadline => break,
                }
            }
        }
        Err(BackendError::Unavailable)
    }
}

impl SqlBackend for NodeBackend {
    /// Read through the primary like any read (linearisable): a statement planned on a
    /// backup sees every table created before it started, wherever that happened.
    async fn catalog(&self, fresh: bool) -> Result<(u64, sql::MemoryCatalog), BackendError> {
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
        let mut pooled = self.client().await?;
        let operation = crate::store::catalog_operation();
        match self
            .submit(&mut pooled, wire::RequestKind::Read, operation)
            .await
        {
            Ok(bytes) => {
                self.release(pooled).await;
                let read = crate::store::decode_catalog(&bytes).ok_or(BackendError::Unavailable)?;
                *self
                    .catalog
                    .lock()
                    .unwrap_or_else(|poison| poison.into_inner()) = Some(read.clone());
                Ok(read)
            }
            Err(error) => {
                let client = pooled.client;
                let _ = self
                    .node
                    .events
                    .send(crate::node::Event::ClientClosed { client })
                    .await;
                Err(error)
            }
        }
    }

    async fn execute(&self, command: engine::Command) -> Result<engine::Outcome, BackendError> {
        let kind = if command.is_read() {
            wire::RequestKind::Read
        } else {
            wire::RequestKind::Write
        };
        let operation = crate::store::sql_operation(&command);
        let mut pooled = self.client().await?;
        let result = self.submit(&mut pooled, kind, operation).await;
        match result {
            Ok(bytes) => {
                self.release(pooled).await;
                Ok(engine::Outcome::decode(&bytes)
                    .unwrap_or(engine::Outcome::Error(error_malformed())))
            }
            Err(error) => {
                // The request may still execute later: this client id is not reused.
                let client = pooled.client;
                let _ = self
                    .node
                    .events
                    .send(crate::node::Event::ClientClosed { client })
                    .await;
                Err(error)
            }
        }
    }
}
