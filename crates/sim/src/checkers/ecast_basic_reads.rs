//! Basic reads (Crescando/RB §6.7) promise less than the other levels: one storage process
//! answers from whatever prefix of the stream it has delivered, checked only against the
//! configuration version. In `sequenced` mode a write completes when it is stable, that is,
//! delivered by every live replica, so a basic read of one key still behaves as a *regular*
//! register (Lamport): it returns the value of a put that was invoked before the read returned,
//! and never one older than a put that completed before the read was invoked (or the initial
//! absence once some put completed). New-old inversions between two basic reads are allowed,
//! which is why they are not part of the strict serialisability check.

use super::Violation;
use crate::ecast::history::{EcastCommand, EcastHistory, EcastOutput};
use ecast::Isolation;

pub fn check(history: &EcastHistory) -> Result<(), Violation> {
    for (index, read) in history.invocations.iter().enumerate() {
        let (
            EcastCommand::Get {
                key,
                isolation: Isolation::Basic,
            },
            Some(EcastOutput::Value(value)),
            Some(read_return),
        ) = (&read.command, &read.output, read.return_time)
        else {
            continue;
        };
        let puts: Vec<(u64, u64, Option<u64>)> = history
            .invocations
            .iter()
            .filter_map(|invocation| match invocation.command {
                EcastCommand::Put {
                    key: put_key,
                    value,
                } if put_key == *key => Some((value, invocation.call, invocation.return_time)),
                _ => None,
            })
            .collect();
        // The latest put that completed before the read was invoked.
        let floor = puts
            .iter()
            .filter(|(_, _, put_return)| put_return.is_some_and(|at| at < read.call))
            .max_by_key(|(_, _, put_return)| *put_return);
        let legal = match value {
            None => floor.is_none(),
            Some(value) => puts.iter().any(|(written, call, put_return)| {
                let from_the_past = *call < read_return;
                // Not overwritten by the floor before the read began: either it is the floor, or
                // it did not complete before the floor was invoked.
                let current = floor.is_none_or(|(floor_value, floor_call, _)| {
                    floor_value == written || put_return.is_none_or(|at| at > *floor_call)
                });
                written == value && from_the_past && current
            }),
        };
        if !legal {
            return Err(Violation {
                checker: "ecast_basic_reads",
                report: format!(
                    "basic read #{index} of key {key} (call {}, return {read_return}) returned {value:?}; \
                     the last put completed before it wrote {:?}",
                    read.call,
                    floor.map(|(value, _, _)| value)
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ecast::history::Invocation;

    fn invocation(call: u64, end: u64, command: EcastCommand, output: EcastOutput) -> Invocation {
        Invocation {
            client: 1,
            call,
            return_time: Some(end),
            command,
            output: Some(output),
        }
    }

    fn get(call: u64, end: u64, value: Option<u64>) -> Invocation {
        let command = EcastCommand::Get {
            key: 7,
            isolation: Isolation::Basic,
        };
        invocation(call, end, command, EcastOutput::Value(value))
    }

    fn put(call: u64, end: u64, value: u64) -> Invocation {
        invocation(
            call,
            end,
            EcastCommand::Put { key: 7, value },
            EcastOutput::Ok,
        )
    }

    #[test]
    fn a_basic_read_older_than_a_completed_put_is_rejected() {
        let history = EcastHistory {
            invocations: vec![put(0, 1, 5), put(2, 3, 6), get(4, 5, Some(5))],
        };
        assert!(check(&history).is_err());
        let history = EcastHistory {
            invocations: vec![put(0, 1, 5), get(4, 5, None)],
        };
        assert!(check(&history).is_err());
    }

    #[test]
    fn a_basic_read_may_see_a_concurrent_put_or_miss_it() {
        let history = EcastHistory {
            invocations: vec![
                put(0, 1, 5),
                put(2, 9, 6),
                get(4, 5, Some(6)),
                get(6, 7, Some(5)),
            ],
        };
        assert!(check(&history).is_ok());
    }

    #[test]
    fn a_basic_read_of_a_value_never_written_or_written_later_is_rejected() {
        let history = EcastHistory {
            invocations: vec![get(0, 1, Some(9)), put(2, 3, 9)],
        };
        assert!(check(&history).is_err());
    }
}
