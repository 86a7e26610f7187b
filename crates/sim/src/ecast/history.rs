//! The E-Cast workload's client history: bank transfers and audits, register puts and gets.

use ecast::Isolation;
use serde::{Deserialize, Serialize};

/// Initial balance of every account.
pub const BALANCE_INITIAL: i64 = 100;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum EcastCommand {
    /// Atomically moves `amount` from one account to another (one E-Cast write message).
    Transfer {
        from: u64,
        to: u64,
        amount: i64,
    },
    /// Reads every account atomically (one E-Cast read message, or a snapshot read).
    Audit {
        isolation: Isolation,
    },
    Put {
        key: u64,
        value: u64,
    },
    Get {
        key: u64,
        isolation: Isolation,
    },
}

impl EcastCommand {
    pub fn is_read(&self) -> bool {
        matches!(self, EcastCommand::Audit { .. } | EcastCommand::Get { .. })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum EcastOutput {
    Ok,
    Balances(Vec<i64>),
    Value(Option<u64>),
}

#[derive(Clone, Debug)]
pub struct Invocation {
    pub client: u64,
    pub call: u64,
    pub return_time: Option<u64>,
    pub command: EcastCommand,
    pub output: Option<EcastOutput>,
}

#[derive(Clone, Debug, Default)]
pub struct EcastHistory {
    pub invocations: Vec<Invocation>,
}

impl EcastHistory {
    pub fn invoke(&mut self, client: u64, call: u64, command: EcastCommand) -> usize {
        self.invocations.push(Invocation {
            client,
            call,
            return_time: None,
            command,
            output: None,
        });
        self.invocations.len() - 1
    }

    pub fn complete(&mut self, index: usize, time: u64, output: EcastOutput) {
        let invocation = &mut self.invocations[index];
        assert!(
            invocation.return_time.is_none(),
            "an operation completes once"
        );
        invocation.return_time = Some(time);
        invocation.output = Some(output);
    }

    pub fn completed(&self) -> usize {
        self.invocations
            .iter()
            .filter(|invocation| invocation.return_time.is_some())
            .count()
    }
}

/// What a storage process applies: a gateway's payload (postcard bytes in the envelope).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoragePayload {
    Transfer {
        from: u64,
        to: u64,
        amount: i64,
    },
    Put {
        key: u64,
        value: u64,
    },
    /// Answer the values of these keys (those this process holds).
    Read {
        keys: Vec<u64>,
    },
    /// A configuration message: nothing to apply.
    Nothing,
}
