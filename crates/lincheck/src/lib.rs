//! A fast linearizability checker.
//!
//! A history of concurrent operations is *linearizable* if every operation can
//! be assigned a single instant between its invocation and its response such
//! that, applied in that order, the operations are legal for a sequential
//! model. This crate decides that question by depth-first search, following
//! Wing & Gong's algorithm with Lowe's *just-in-time linearization*: the
//! history becomes a time-ordered, doubly linked list of call and return
//! entries; at a call entry the search tries to linearize that operation now
//! (the model must accept its recorded output), lifts it out of the list and
//! restarts from the head; reaching a return entry means an operation would
//! be left unlinearized past its response, so the search backtracks. Every
//! (set of linearized operations, model state) configuration already explored
//! is memoized, which bounds the search and makes it fast in practice. The
//! entry list and configuration cache follow Porcupine (Athalye), and
//! histories are split with the model's [`Model::partition`]
//! into independent sub-histories, which is sound for P-compositional
//! objects such as a key-value map split per key (Horn & Kroening, "Faster
//! linearizability checking via P-compositionality").
//!
//! Pending operations (no response observed) may take effect at any point
//! after their invocation, or never. Two reductions keep the search small
//! while remaining exact: a configuration is also pruned when a cached one
//! has the same state and completed operations but only a subset of its
//! pending ones (pending operations are optional, so that one can do
//! everything this one can); and an operation the model declares read-only
//! ([`Model::is_read_only`]) is linearized as soon as it is legal, without
//! trying alternatives, since moving it earlier never affects the others.
//!
//! Deciding linearizability is NP-complete, so some histories are expensive:
//! cost grows with the number of operations concurrent within one partition,
//! and every pending operation stays concurrent with everything after its
//! call. A [`Budget`] bounds the work; [`CheckResult::Unknown`] reports that
//! it ran out.
//!
//! ```
//! use lincheck::{check, Budget, MapInput, MapOutput, Operation, RegisterMapModel};
//!
//! let history = vec![
//!     Operation::completed(1, 0, 10, MapInput::Put { key: 7, value: 1 }, MapOutput::Ok),
//!     Operation::completed(2, 2, 5, MapInput::Get { key: 7 }, MapOutput::Value(Some(1))),
//!     Operation::completed(3, 11, 12, MapInput::Get { key: 7 }, MapOutput::Value(None)),
//! ];
//! // The last read misses a write that completed before it started.
//! let result = check(&RegisterMapModel, &history, Budget::unlimited());
//! assert!(result.is_illegal());
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod elle;
pub mod expiry;
pub mod models;
mod report;
mod search;
pub mod testing;

use std::fmt;

pub use models::{MapInput, MapOutput, RegisterMapModel};

/// One completed or pending operation in a history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation<I, O> {
    /// Who issued the operation (used for reporting only).
    pub client: u64,
    /// Invocation time, on any clock shared by the whole history.
    pub call: u64,
    /// Response time; `None` if no response was seen (pending, outcome
    /// unknown). A pending operation is treated as returning after every
    /// other event: it may take effect at any point after its call, or never.
    /// A response time earlier than `call` is treated as equal to `call`.
    pub return_time: Option<u64>,
    /// The operation's input.
    pub input: I,
    /// The observed output; `None` iff pending. It is passed to
    /// [`Model::step`] as is.
    pub output: Option<O>,
}

impl<I, O> Operation<I, O> {
    /// An operation whose response `output` was observed at `return_time`.
    pub fn completed(client: u64, call: u64, return_time: u64, input: I, output: O) -> Self {
        Self {
            client,
            call,
            return_time: Some(return_time),
            input,
            output: Some(output),
        }
    }

    /// An operation invoked at `call` whose response was never observed.
    pub fn pending(client: u64, call: u64, input: I) -> Self {
        Self {
            client,
            call,
            return_time: None,
            input,
            output: None,
        }
    }

    /// True if no response was observed.
    pub fn is_pending(&self) -> bool {
        self.return_time.is_none()
    }
}

/// A sequential specification of the object under test.
pub trait Model {
    /// Model state; hashed and compared to memoize explored configurations.
    type State: Clone + Eq + std::hash::Hash + std::fmt::Debug;
    /// Operation inputs.
    type Input: Clone + std::fmt::Debug;
    /// Operation outputs.
    type Output: Clone + std::fmt::Debug;

    /// The initial state.
    fn init(&self) -> Self::State;

    /// Applies `input` to `state`. `output` is `None` for a pending operation
    /// (accept any outcome). Returns the next state if the recorded output is
    /// legal, else `None`.
    fn step(
        &self,
        state: &Self::State,
        input: &Self::Input,
        output: Option<&Self::Output>,
    ) -> Option<Self::State>;

    /// Splits the history (indices into it) into independent parts, each
    /// checked on its own from [`Model::init`]. Every index should appear in
    /// exactly one part; operations left out are not checked. Default: one
    /// part with everything.
    fn partition(&self, history: &[Operation<Self::Input, Self::Output>]) -> Vec<Vec<usize>> {
        vec![(0..history.len()).collect()]
    }

    /// True if `step` never changes the state for this input, whatever the
    /// state and output (e.g. a read). The search then linearizes such an
    /// operation as soon as it is legal, without trying alternatives, which
    /// prunes much of the search. Default: false, which is always correct.
    fn is_read_only(&self, input: &Self::Input) -> bool {
        let _ = input;
        false
    }

    /// Human-readable description of an operation for failure reports.
    fn describe(&self, input: &Self::Input, output: Option<&Self::Output>) -> String {
        format!("{input:?} -> {output:?}")
    }
}

/// The outcome of [`check`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckResult {
    /// The history is linearizable.
    Ok,
    /// The history is not linearizable.
    Illegal(Violation),
    /// The search budget ran out before a verdict was reached.
    Unknown,
}

impl CheckResult {
    /// True if the history is linearizable.
    pub fn is_ok(&self) -> bool {
        matches!(self, CheckResult::Ok)
    }

    /// True if the history is not linearizable.
    pub fn is_illegal(&self) -> bool {
        matches!(self, CheckResult::Illegal(_))
    }

    /// True if the budget ran out.
    pub fn is_unknown(&self) -> bool {
        matches!(self, CheckResult::Unknown)
    }

    /// The violation, if the history is not linearizable.
    pub fn violation(&self) -> Option<&Violation> {
        match self {
            CheckResult::Illegal(violation) => Some(violation),
            CheckResult::Ok | CheckResult::Unknown => None,
        }
    }
}

/// Why a history is not linearizable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Indices into the history of the failing partition (in partition order).
    pub partition: Vec<usize>,
    /// Indices into the history of the longest linearizable prefix found, in
    /// linearization order.
    pub longest_linearized_prefix: Vec<usize>,
    /// Multi-line report: the failing partition's operations sorted by call
    /// time (client, call, return, description), then the longest prefix.
    pub report: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.report)
    }
}

/// Limits the work done by [`check`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Budget {
    /// Maximum number of search steps across the whole check (all
    /// partitions). One step is one visit of a list entry by the search.
    /// [`CheckResult::Unknown`] is returned when more would be needed.
    pub steps_max: u64,
}

impl Budget {
    /// No limit.
    pub fn unlimited() -> Self {
        Self {
            steps_max: u64::MAX,
        }
    }

    /// At most `steps_max` search steps.
    pub fn steps(steps_max: u64) -> Self {
        Self { steps_max }
    }
}

impl Default for Budget {
    fn default() -> Self {
        Self::unlimited()
    }
}

/// Checks whether `history` is linearizable with respect to `model`.
///
/// Partitions (from [`Model::partition`]) are checked one after another; the
/// first non-linearizable one is reported. Returns [`CheckResult::Unknown`]
/// if the budget runs out first.
///
/// # Panics
///
/// If `Model::partition` returns an index out of range of `history`.
pub fn check<M: Model>(
    model: &M,
    history: &[Operation<M::Input, M::Output>],
    budget: Budget,
) -> CheckResult {
    let mut steps = search::Steps::new(budget.steps_max);
    for part in model.partition(history) {
        let ops: Vec<&Operation<M::Input, M::Output>> = part
            .iter()
            .map(|&i| {
                assert!(
                    i < history.len(),
                    "Model::partition returned index {i} but the history has {} operations",
                    history.len()
                );
                &history[i]
            })
            .collect();
        match search::check_partition(model, &ops, &mut steps) {
            search::Outcome::Linearizable => {}
            search::Outcome::Exhausted => return CheckResult::Unknown,
            search::Outcome::Illegal { longest } => {
                let prefix: Vec<usize> = longest.iter().map(|&local| part[local]).collect();
                let report = report::build(model, history, &part, &prefix);
                return CheckResult::Illegal(Violation {
                    partition: part,
                    longest_linearized_prefix: prefix,
                    report,
                });
            }
        }
    }
    CheckResult::Ok
}
