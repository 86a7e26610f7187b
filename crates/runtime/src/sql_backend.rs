//! What the PostgreSQL front end needs from a storage process: the catalog to plan against, and
//! a way to run engine commands through the replicated partition groups
//! (`ecast::sql::ClusterBackend`); `LocalBackend` is an unreplicated engine for the front end's
//! own tests.

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

/// A catalog with the digest that guards plans made against it; shared, not copied, by the
/// sessions that plan against it.
pub type SharedCatalog = (u64, Arc<sql::MemoryCatalog>);

pub trait SqlBackend: Clone + Send + Sync + 'static {
    /// The tables to plan against, with the catalog digest to guard the plan's commands with
    /// (`engine::Command::Guarded`). `fresh`: read through the primary now (linearisable);
    /// otherwise a cached copy may do, since a guarded command meeting another catalog does
    /// not run.
    fn catalog(
        &self,
        fresh: bool,
    ) -> impl Future<Output = Result<(u64, Arc<sql::MemoryCatalog>), BackendError>> + Send;
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
    async fn catalog(&self, _fresh: bool) -> Result<(u64, Arc<sql::MemoryCatalog>), BackendError> {
        let engine = self
            .engine
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        Ok((engine.catalog_digest(), Arc::new(catalog_of(&engine))))
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
