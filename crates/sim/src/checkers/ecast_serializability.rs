//! Strict serialisability of the E-Cast workload (Crescando/RB §5, §6.7; DESIGN.md's claim for
//! `sequenced` partitions). The bank and the registers use disjoint keys, so they are two
//! independent objects and the history is checked per object (linearisability is local):
//!
//! - the bank is one object whose state is every balance: a transfer is an atomic multi-key
//!   write, an audit an atomic multi-key read. Linearisability of this object is strict
//!   serialisability of the transfers and audits. Before the search, a direct check that every
//!   completed audit sums to the initial total gives a readable report for the commonest bug;
//! - registers are checked per key with `lincheck::RegisterMapModel`.
//!
//! Basic reads are left out (they are not serialisable; `ecast_basic_reads` checks what they
//! promise). A read with no answer (abandoned) is dropped; a write with no answer is pending (it may or
//! may not have happened). An unknown verdict (search budget spent) is a failure.

use super::Violation;
use crate::ecast::history::{EcastCommand, EcastHistory, EcastOutput, BALANCE_INITIAL};
use ecast::Isolation;
use lincheck::{Budget, CheckResult, MapInput, MapOutput, Model, Operation, RegisterMapModel};

/// The bank as one sequential object.
pub struct BankModel {
    pub accounts: usize,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum BankInput {
    Transfer { from: u64, to: u64, amount: i64 },
    Audit,
}

impl Model for BankModel {
    type State = Vec<i64>;
    type Input = BankInput;
    type Output = EcastOutput;

    fn init(&self) -> Vec<i64> {
        vec![BALANCE_INITIAL; self.accounts]
    }

    fn step(
        &self,
        state: &Vec<i64>,
        input: &BankInput,
        output: Option<&EcastOutput>,
    ) -> Option<Vec<i64>> {
        match input {
            BankInput::Transfer { from, to, amount } => {
                if output.is_some_and(|output| *output != EcastOutput::Ok) {
                    return None;
                }
                let mut next = state.clone();
                *next.get_mut(*from as usize)? -= amount;
                *next.get_mut(*to as usize)? += amount;
                Some(next)
            }
            BankInput::Audit => match output {
                None => Some(state.clone()),
                Some(EcastOutput::Balances(balances)) if balances == state => Some(state.clone()),
                Some(_) => None,
            },
        }
    }

    fn is_read_only(&self, input: &BankInput) -> bool {
        matches!(input, BankInput::Audit)
    }
}

const BUDGET_STEPS: u64 = 20_000_000;

pub fn check(history: &EcastHistory, accounts: usize) -> Result<(), Violation> {
    check_totals(history, accounts)?;
    let mut bank = Vec::new();
    let mut registers = Vec::new();
    for invocation in &history.invocations {
        let pending_read = invocation.output.is_none() && invocation.command.is_read();
        let basic = matches!(
            invocation.command,
            EcastCommand::Get {
                isolation: Isolation::Basic,
                ..
            }
        );
        if pending_read || basic {
            continue; // Basic reads promise less: `ecast_basic_reads` checks them.
        }
        let (client, call, return_time) =
            (invocation.client, invocation.call, invocation.return_time);
        match (&invocation.command, &invocation.output) {
            (EcastCommand::Transfer { from, to, amount }, output) => bank.push(Operation {
                client,
                call,
                return_time,
                input: BankInput::Transfer {
                    from: *from,
                    to: *to,
                    amount: *amount,
                },
                output: output.clone(),
            }),
            (EcastCommand::Audit { .. }, output) => bank.push(Operation {
                client,
                call,
                return_time,
                input: BankInput::Audit,
                output: output.clone(),
            }),
            (EcastCommand::Put { key, value }, output) => registers.push(Operation {
                client,
                call,
                return_time,
                input: MapInput::Put {
                    key: *key,
                    value: *value,
                },
                output: output.as_ref().map(|_| MapOutput::Ok),
            }),
            (EcastCommand::Get { key, .. }, output) => registers.push(Operation {
                client,
                call,
                return_time,
                input: MapInput::Get { key: *key },
                output: match output {
                    Some(EcastOutput::Value(value)) => Some(MapOutput::Value(*value)),
                    // A get answered with something else can never be legal.
                    Some(_) => Some(MapOutput::Value(Some(u64::MAX))),
                    None => None,
                },
            }),
        }
    }
    verdict(
        "bank",
        lincheck::check(&BankModel { accounts }, &bank, Budget::steps(BUDGET_STEPS)),
    )?;
    verdict(
        "registers",
        lincheck::check(&RegisterMapModel, &registers, Budget::steps(BUDGET_STEPS)),
    )
}

fn verdict(object: &str, result: CheckResult) -> Result<(), Violation> {
    match result {
        CheckResult::Ok => Ok(()),
        CheckResult::Illegal(violation) => Err(Violation {
            checker: "ecast_serializability",
            report: format!("the {object} history is not strictly serialisable:\n{violation}"),
        }),
        CheckResult::Unknown => Err(Violation {
            checker: "ecast_serializability",
            report: format!("the {object} check ran out of budget"),
        }),
    }
}

/// Every completed audit sees the initial total: transfers are atomic.
fn check_totals(history: &EcastHistory, accounts: usize) -> Result<(), Violation> {
    let total = BALANCE_INITIAL * accounts as i64;
    for (index, invocation) in history.invocations.iter().enumerate() {
        if let Some(EcastOutput::Balances(balances)) = &invocation.output {
            // Wide: a missing account reads as i64::MIN, and two of them overflow an i64.
            let sum: i128 = balances.iter().map(|balance| i128::from(*balance)).sum();
            if sum != i128::from(total) || balances.len() != accounts {
                return Err(Violation {
                    checker: "ecast_serializability",
                    report: format!(
                        "audit #{index} ({:?}, client {}, call {}) saw {balances:?}, total {sum}, not {total}",
                        invocation.command, invocation.client, invocation.call
                    ),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (client, call, return, command, output).
    type Entry = (u64, u64, Option<u64>, EcastCommand, Option<EcastOutput>);

    fn history(entries: Vec<Entry>) -> EcastHistory {
        EcastHistory {
            invocations: entries
                .into_iter()
                .map(|(client, call, return_time, command, output)| {
                    crate::ecast::history::Invocation {
                        client,
                        call,
                        return_time,
                        command,
                        output,
                    }
                })
                .collect(),
        }
    }

    const AUDIT: EcastCommand = EcastCommand::Audit {
        isolation: Isolation::Sequential,
    };

    #[test]
    fn an_audit_seeing_half_a_transfer_is_rejected() {
        let transfer = EcastCommand::Transfer {
            from: 0,
            to: 1,
            amount: 10,
        };
        let history = history(vec![
            (1, 0, Some(5), transfer, Some(EcastOutput::Ok)),
            (
                2,
                6,
                Some(7),
                AUDIT,
                Some(EcastOutput::Balances(vec![90, 100])),
            ),
        ]);
        assert!(check(&history, 2).is_err());
    }

    #[test]
    fn an_audit_missing_a_completed_transfer_is_rejected() {
        let transfer = EcastCommand::Transfer {
            from: 0,
            to: 1,
            amount: 10,
        };
        let history = history(vec![
            (1, 0, Some(5), transfer, Some(EcastOutput::Ok)),
            (
                2,
                6,
                Some(7),
                AUDIT,
                Some(EcastOutput::Balances(vec![100, 100])),
            ),
        ]);
        let violation = check(&history, 2).unwrap_err();
        assert!(violation.report.contains("bank"), "{violation}");
    }

    #[test]
    fn a_concurrent_or_pending_transfer_may_or_may_not_be_seen() {
        let transfer = EcastCommand::Transfer {
            from: 0,
            to: 1,
            amount: 10,
        };
        let history = history(vec![
            (1, 0, None, transfer, None),
            (
                2,
                6,
                Some(7),
                AUDIT,
                Some(EcastOutput::Balances(vec![90, 110])),
            ),
            (
                3,
                8,
                Some(9),
                AUDIT,
                Some(EcastOutput::Balances(vec![90, 110])),
            ),
            (4, 8, None, AUDIT, None),
        ]);
        assert!(check(&history, 2).is_ok());
    }

    #[test]
    fn a_stale_register_read_is_rejected() {
        let history = history(vec![
            (
                1,
                0,
                Some(2),
                EcastCommand::Put { key: 5, value: 1 },
                Some(EcastOutput::Ok),
            ),
            (
                2,
                3,
                Some(4),
                EcastCommand::Get {
                    key: 5,
                    isolation: Isolation::Snapshot,
                },
                Some(EcastOutput::Value(None)),
            ),
        ]);
        assert!(check(&history, 2).is_err());
    }
}
