use std::fmt;
use std::sync::Arc;

/// The deterministic service a VR group replicates.
///
/// Every replica executes the same committed operations in the same order, so every method must
/// be a pure function of the state and its arguments: no clocks, no randomness, no iteration over
/// unordered collections. Operations arrive as opaque bytes from clients: a method must never
/// panic on them, and must report malformed input in its result instead.
pub trait StateMachine {
    /// Executes one committed write and returns its result.
    fn apply(&mut self, operation: &[u8]) -> Vec<u8>;
    /// Executes a read-only operation without changing any state.
    fn query(&self, operation: &[u8]) -> Vec<u8>;
    /// Executes committed writes one after another, as `apply` on each in order would, and
    /// returns their results in order. A state machine overrides it to share work between
    /// them (the table engine runs a batch's scans as one shared scan cycle); the replica hands
    /// it every request of a log entry.
    fn apply_batch(&mut self, operations: &[&[u8]]) -> Vec<Vec<u8>> {
        operations
            .iter()
            .map(|operation| self.apply(operation))
            .collect()
    }
    /// Executes read-only operations as `query` on each would, results in order. The primary
    /// hands it every read that became ready at once (the reads that queued behind one
    /// read-index probe), so that a state machine can answer them in one pass.
    fn query_batch(&self, operations: &[&[u8]]) -> Vec<Vec<u8>> {
        operations
            .iter()
            .map(|operation| self.query(operation))
            .collect()
    }
    /// The replica became its view's primary (`true`) or stopped being it (`false`): called
    /// when a replica enters normal status as primary or backup and when it starts a view
    /// change. A state machine may keep less on a backup (the E-Cast router state keeps only
    /// what a fail-over needs, `docs/internals/ecast.md`, "Lazy follower routers"), as long as
    /// every `apply` result, snapshot and restore is the same function of the committed ops in
    /// both roles. The default does nothing.
    fn lead(&mut self, primary: bool) {
        let _ = primary;
    }
    /// The reply to a client that retried a request already executed: `result` is what the
    /// client table saved when it executed (on this replica, perhaps as a backup), `operation`
    /// the retried request's bytes. A state machine whose saved results leave out what only a
    /// primary knows (see `lead`) recomputes them here, read-only. The default returns
    /// `result`.
    fn reply_again(&self, operation: &[u8], result: &[u8]) -> Vec<u8> {
        let _ = operation;
        result.to_vec()
    }
    /// Serialises the whole state, for checkpoints and state transfer.
    fn snapshot(&self) -> Vec<u8>;
    /// A checkpoint's view of the state as it is now: an immutable copy that serialises to
    /// what `snapshot()` returns now, later and on another thread (the replica hands it to its
    /// driver in `Effect::Checkpoint`, `docs/internals/vr.md`, "Checkpoints off the loop").
    /// A state machine whose big collections share structure (copy-on-write) returns one in
    /// far less time than `snapshot()` takes. The default serialises now.
    fn snapshot_source(&self) -> SnapshotSource {
        SnapshotSource::ready(self.snapshot())
    }
    /// Work the state machine handed its host to run off the replica's loop finished: `job`
    /// names it (the state machine's own numbering), `results` is what it computed. Used by
    /// `ecast::PartitionMachine`'s read jobs (`docs/internals/scans.md`, "Built: read-only
    /// log ops off the loop"): the results fill what executing the reads would have recorded
    /// and release their replies. It must change nothing the replica itself reads (VR's
    /// client table, the log): a job's op is answered when it is applied. A job the state
    /// machine no longer knows (restored from a snapshot since) is ignored. The default
    /// ignores every job (it hands out none).
    fn job_done(&mut self, job: u64, results: Vec<Vec<u8>>) {
        let _ = (job, results);
    }
    /// Replaces the whole state with a snapshot. On error the state must be unchanged.
    fn restore(&mut self, snapshot: &[u8]) -> Result<(), RestoreError>;
    /// The keys an operation reads or writes, for Skyros's per-key read check; `None` means
    /// "it may touch anything" (the safe answer for bytes that do not decode).
    fn keys(&self, operation: &[u8]) -> Option<Vec<Vec<u8>>> {
        let _ = operation;
        None
    }
    /// Skyros-Comm: the result `apply(operation)` would return now, without changing anything;
    /// `None` when it cannot tell (the write then takes two round trips).
    fn preview(&self, operation: &[u8]) -> Option<Vec<u8>> {
        let _ = operation;
        None
    }
    /// Skyros, at the primary: whether a nilext write may be acknowledged before it is
    /// ordered. A state machine that may *hold* an operation after it is logged (a partition
    /// under E-Cast's rule H, `ecast::PartitionMachine`) must not let a write be acknowledged
    /// that its log position would hold: it answers `Clear` or `Closed`. The default, `Open`,
    /// is plain Skyros (`docs/internals/skyros.md`, "Skyros in a partition").
    fn nilext_gate(&self, operation: &[u8]) -> NilextGate {
        let _ = operation;
        NilextGate::Open
    }
}

/// `StateMachine::nilext_gate`'s answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NilextGate {
    /// Plain Skyros: acknowledge (the default).
    Open,
    /// The executed state would run the operation at once if it were logged now. The primary
    /// acknowledges it only if, besides, no unexecuted request ordered before it touches its
    /// keys and everything inherited from the previous view has executed (those may be held
    /// when they execute); otherwise as `Closed`.
    Clear,
    /// Do not acknowledge before ordering: the primary orders it and replies when it executes
    /// (the client completes on that reply, as on Skyros's slow path).
    Closed,
}

/// The state of a state machine at one op, to serialise later on any thread
/// (`StateMachine::snapshot_source`). Cloning it shares the copy.
#[derive(Clone)]
pub struct SnapshotSource {
    serialise: Arc<dyn Fn() -> Vec<u8> + Send + Sync>,
}

impl SnapshotSource {
    /// A source that serialises with `serialise`, which must not depend on anything that
    /// changes after the call (it captures an immutable copy of the state).
    pub fn new(serialise: impl Fn() -> Vec<u8> + Send + Sync + 'static) -> SnapshotSource {
        SnapshotSource {
            serialise: Arc::new(serialise),
        }
    }

    /// A source already serialised (the default `snapshot_source`).
    pub fn ready(snapshot: Vec<u8>) -> SnapshotSource {
        let snapshot = Arc::new(snapshot);
        SnapshotSource::new(move || snapshot.as_ref().clone())
    }

    /// The snapshot's bytes: what `StateMachine::snapshot` returned when the source was taken.
    pub fn serialise(&self) -> Vec<u8> {
        (self.serialise)()
    }
}

impl fmt::Debug for SnapshotSource {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("SnapshotSource")
    }
}

/// Two sources are equal when they are the same copy (a clone of one another).
impl PartialEq for SnapshotSource {
    fn eq(&self, other: &SnapshotSource) -> bool {
        Arc::ptr_eq(&self.serialise, &other.serialise)
    }
}

impl Eq for SnapshotSource {}

/// Why a snapshot could not be restored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestoreError {
    /// The snapshot bytes are not a valid encoding of the state.
    Malformed { reason: String },
}

impl fmt::Display for RestoreError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RestoreError::Malformed { reason } => write!(formatter, "malformed snapshot: {reason}"),
        }
    }
}

impl std::error::Error for RestoreError {}
