//! The client-visible history: what was asked, when, and what came back.
//!
//! A run replicates `store::Store`, so an operation is either a RESP key-value command or an
//! engine (SQL) command, and so is its outcome.

use lincheck::Operation;
use wire::{ClientId, RequestNumber};

/// One client operation on the replicated store.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// A key-value command (tag 0).
    Kv(kv::Command),
    /// An engine command (tag 1): one operation or a batch.
    Sql(engine::Command),
}

/// What an operation returned, in its front end's terms.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Kv(kv::Outcome),
    Sql(engine::Outcome),
}

impl Command {
    /// Whether the command only reads (goes the primary's read path).
    pub fn is_read(&self) -> bool {
        match self {
            Command::Kv(command) => command.is_read(),
            Command::Sql(command) => command.is_read(),
        }
    }

    /// The store operation: a tag byte and the front end's encoding.
    pub fn operation(&self) -> Vec<u8> {
        match self {
            Command::Kv(command) => store::kv_operation(command),
            Command::Sql(command) => store::sql_operation(command),
        }
    }

    /// Decodes the store's result bytes for this command (a malformed answer becomes the front
    /// end's own error, which no model produces).
    pub fn decode_outcome(&self, result: &[u8]) -> Outcome {
        match self {
            Command::Kv(_) => Outcome::Kv(
                kv::Outcome::decode(result).unwrap_or(kv::Outcome::Error(kv::KvError::Malformed)),
            ),
            Command::Sql(_) => Outcome::Sql(
                engine::Outcome::decode(result)
                    .unwrap_or(engine::Outcome::Error(engine::EngineError::Malformed)),
            ),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Invocation {
    pub client: ClientId,
    pub request: RequestNumber,
    pub command: Command,
    /// Logical event counter at invocation; strictly increasing over the run.
    pub call: u64,
    /// Logical event counter at the reply; None while (or if forever) unanswered.
    pub return_time: Option<u64>,
    pub outcome: Option<Outcome>,
}

#[derive(Default)]
pub struct History {
    pub invocations: Vec<Invocation>,
}

impl History {
    pub fn begin(
        &mut self,
        client: ClientId,
        request: RequestNumber,
        command: Command,
        call: u64,
    ) -> usize {
        self.invocations.push(Invocation {
            client,
            request,
            command,
            call,
            return_time: None,
            outcome: None,
        });
        self.invocations.len() - 1
    }

    pub fn end(&mut self, index: usize, outcome: Outcome, return_time: u64) {
        let invocation = &mut self.invocations[index];
        assert!(
            invocation.return_time.is_none(),
            "an invocation returns once"
        );
        invocation.return_time = Some(return_time);
        invocation.outcome = Some(outcome);
    }

    pub fn completed(&self) -> usize {
        self.invocations
            .iter()
            .filter(|invocation| invocation.return_time.is_some())
            .count()
    }
}

impl History {
    /// One front end's operations, as `lincheck` operations: `command` and `outcome` pick that
    /// front end's commands and outcomes out of the history. Reads that never got a reply had
    /// no effect and are left out; writes without one are pending (they may have taken effect).
    pub fn operations<C: Clone, O: Clone>(
        &self,
        command: impl Fn(&Command) -> Option<&C>,
        outcome: impl Fn(&Outcome) -> Option<&O>,
    ) -> Vec<Operation<C, O>> {
        self.invocations
            .iter()
            .filter(|invocation| invocation.return_time.is_some() || !invocation.command.is_read())
            .filter_map(|invocation| {
                let input = command(&invocation.command)?.clone();
                let output = invocation.outcome.as_ref().map(|answer| {
                    outcome(answer)
                        .unwrap_or_else(|| {
                            panic!("{:?} answered with {answer:?}", invocation.command)
                        })
                        .clone()
                });
                Some(Operation {
                    client: invocation.client.0,
                    call: invocation.call,
                    return_time: invocation.return_time,
                    input,
                    output,
                })
            })
            .collect()
    }
}
