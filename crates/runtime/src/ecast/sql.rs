//! SQL on a partitioned cluster: the PostgreSQL front end (`crate::pg`) of every storage
//! process runs its statements through the process's gateway task, as single-key commands on
//! the tables' anchor (`payload::SQL_ANCHOR`). Until SQL spans partitions every table lives
//! whole in the partition holding that key: with partition groups (`vr`, `skyros`) a statement
//! goes straight to that group (the router bypass) and is ordered in its log, reads included,
//! so every statement is linearisable; in `sequenced` mode it is one E-Cast message.
//!
//! The RESP namespace's SQL table `kv` spans every partition, so a statement on it is refused
//! (0A000) here rather than answered from one partition's keys.

use super::gateway::{Job, Work};
use crate::sql_backend::{BackendError, SqlBackend};
use ecast::Isolation;
use kv::Outcome;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};

/// A storage process's `SqlBackend`: its gateway task, and the last catalog read.
#[derive(Clone)]
pub struct ClusterBackend {
    jobs: mpsc::Sender<Job>,
    catalog: Arc<Mutex<Option<(u64, sql::MemoryCatalog)>>>,
}

impl ClusterBackend {
    pub(crate) fn new(jobs: mpsc::Sender<Job>) -> ClusterBackend {
        ClusterBackend {
            jobs,
            catalog: Arc::new(Mutex::new(None)),
        }
    }

    /// Runs one store operation of the SQL half through the gateway; its result bytes.
    async fn run(&self, operation: Vec<u8>, read: bool) -> Result<Vec<u8>, BackendError> {
        let (reply, receiver) = oneshot::channel();
        let job = Job {
            work: Work::Sql { operation, read },
            isolation: Isolation::Sequential,
            reply,
        };
        self.jobs
            .send(job)
            .await
            .map_err(|_| BackendError::Unavailable)?;
        match receiver.await {
            Ok(Outcome::Foreign(bytes)) => Ok(bytes),
            _ => Err(BackendError::Unavailable),
        }
    }
}

impl SqlBackend for ClusterBackend {
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
        let bytes = self.run(store::catalog_operation(), true).await?;
        let mut read = store::decode_catalog(&bytes).ok_or(BackendError::Unavailable)?;
        crate::security::roles::hide(&mut read.1);
        *self
            .catalog
            .lock()
            .unwrap_or_else(|poison| poison.into_inner()) = Some(read.clone());
        Ok(read)
    }

    async fn execute(&self, command: engine::Command) -> Result<engine::Outcome, BackendError> {
        if store::touches_kv_table(&command) {
            return Ok(engine::Outcome::Error(
                engine::EngineError::FeatureNotSupported {
                    feature: format!(
                        "SQL over the Redis namespace (table {}) on a partitioned cluster: its keys lie in every partition",
                        store::KV_TABLE
                    ),
                },
            ));
        }
        let read = command.is_read();
        let bytes = self.run(store::sql_operation(&command), read).await?;
        Ok(engine::Outcome::decode(&bytes)
            .unwrap_or(engine::Outcome::Error(engine::EngineError::Malformed)))
    }
}
