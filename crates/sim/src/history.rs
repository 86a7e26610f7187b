//! The client-visible history: what was asked, when, and what came back.

use kv::{Command, Outcome};
use wire::{ClientId, RequestNumber};

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
