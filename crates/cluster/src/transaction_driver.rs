//! The gateway's rules for one interactive transaction (Sprint's edge server,
//! `docs/internals/sprint.md`), as a pure state machine driven by outcomes and a clock in ms:
//! plan a statement's locks (`store::transactions::plan_statement`), take the table locks it
//! lacks at every partition first (`LockRequest`, one message to every partition), send the
//! numbered statement where its routing says, send either again after a growing pause while
//! another transaction's lock or a two-phase statement is in the way (the partition decides
//! between waiting and dying: local deadlock detection and the execution-order rule; patience
//! bounds the wait), abort a holder that shows no new statement for `abandoned_after_ms` while
//! this one waits, and end with one message to every partition.
//!
//! A transaction is *local* while its statements reach one partition (the placement key of its
//! first statement stands for it). It becomes *global* (Sprint §4.1) before its first message
//! that reaches further (a statement routed elsewhere or to every partition), or before it
//! waits for a table lock (a lock request to every partition that is refused for another
//! transaction's lock waits at every partition): one `Globalize` message to every partition,
//! which numbers it. Where a request's answers differ between partitions (their waits-for
//! graphs differ), any death wins: the transaction is aborted everywhere; otherwise any wait
//! sends the whole request again (grants are idempotent).
//!
//! The effects are messages (`Send`: a store operation and where it goes) and pauses; the
//! caller moves the bytes and keeps the time. The simulator's SQL transactions
//! (`sim::ecast::bypass`, `--sql-transactions`) run it. *Not yet shared with the runtime:*
//! `runtime::ecast::sql`'s `ClusterBackend::execute_in` and `Waiter` follow the same rules
//! with tokio's sleeps (the same constants as `DriverSettings::default`); moving the runtime onto
//! this driver is issue 18's.

use engine::{EngineError, Outcome};
use std::collections::BTreeMap;
use store::transactions::{LockRequest, Mode, TransactionStatement};

/// Where an operation goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// The partitions holding these placement keys (distinct).
    Keys(Vec<Vec<u8>>),
    /// Every partition, in one ordered message.
    Every,
}

/// One store operation to send (`store::lock_operation`, `transaction_operation`,
/// `end_operation`), and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Send {
    pub operation: Vec<u8>,
    pub route: Route,
}

/// What the caller does next.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Send this, and hand its outcomes (one per answering partition) to `outcomes`.
    Send(Send),
    /// Wait until `until_ms`, then call `resume`. `abort`: a waited-for holder judged
    /// abandoned; send its abort now (its answer is not needed).
    Pause { until_ms: u64, abort: Option<Send> },
    /// The statement is answered: its outcomes (a refusal, e.g. 40001 from a deadlock or 55P03
    /// after patience, is among them as an error).
    Answered(Vec<Outcome>),
}

/// The runtime's timing (`runtime::ecast::sql`): a simulator passes its own, in ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriverSettings {
    /// How long a statement waits for locks before it is answered with the refusal (55P03).
    pub patience_ms: u64,
    /// A holder whose last statement stamp has not moved for this long while a statement
    /// waits for it is aborted.
    pub abandoned_after_ms: u64,
    pub pause_first_ms: u64,
    pub pause_max_ms: u64,
}

impl Default for DriverSettings {
    fn default() -> DriverSettings {
        DriverSettings {
            patience_ms: 60_000,
            abandoned_after_ms: 20_000,
            pause_first_ms: 2,
            pause_max_ms: 50,
        }
    }
}

/// A statement being sent: its table locks first (`Locking`), then itself.
#[derive(Clone, Debug)]
struct Current {
    /// `Globalize` first (the statement reaches a second partition, or its table locks wait).
    globalizing: bool,
    locking: bool,
    lacking: Vec<(store::transactions::Resource, Mode)>,
    needed: Vec<(store::transactions::Resource, Mode)>,
    command: Vec<u8>,
    route: Route,
    number: u64,
    waiter: Waiter,
}

#[derive(Clone, Debug)]
struct Waiter {
    started_ms: u64,
    pause_ms: u64,
    /// The holder waited for, its last stamp, and since when.
    holder: Option<(u64, u64, u64)>,
}

/// One interactive transaction at its gateway.
#[derive(Clone, Debug)]
pub struct Transaction {
    pub id: u64,
    pub begin_ms: u64,
    /// Statements sent so far (their numbers): 0 means no partition knows it.
    pub statements: u64,
    held: BTreeMap<String, Mode>,
    settings: DriverSettings,
    current: Option<Current>,
    /// The placement key of its first statement pinned to keys: the partition it is local to.
    first: Option<Vec<u8>>,
    /// Whether it is global (its `Globalize` was granted everywhere).
    pub global: bool,
}

impl Transaction {
    pub fn new(id: u64, begin_ms: u64, settings: DriverSettings) -> Transaction {
        Transaction {
            id,
            begin_ms,
            statements: 0,
            held: BTreeMap::new(),
            settings,
            current: None,
            first: None,
            global: false,
        }
    }

    /// Starts a statement (`command`, pinned to placement `keys` or reaching every partition):
    /// its first message. `Err` for a statement no transaction may run (DDL).
    pub fn statement(
        &mut self,
        command: &engine::Command,
        keys: Option<Vec<Vec<u8>>>,
        now_ms: u64,
    ) -> Result<Action, EngineError> {
        assert!(self.current.is_none(), "one statement at a time");
        let operations = store::transactions::operations_of(command);
        let plan =
            store::transactions::plan_statement(&self.held, operations, keys.as_deref(), false)?;
        // Counted before anything is sent: a lock taken, or a statement that may have run,
        // must be ended by COMMIT or ROLLBACK.
        self.statements += 1;
        let beyond = match (&keys, &self.first) {
            (None, _) => true,
            (Some(keys), Some(first)) => keys.iter().any(|key| key != first),
            (Some(keys), None) => {
                self.first = keys.first().cloned();
                keys.iter().any(|key| Some(key) != keys.first())
            }
        };
        self.current = Some(Current {
            globalizing: beyond && !self.global,
            locking: !plan.everywhere.is_empty(),
            lacking: plan.everywhere,
            needed: plan.needed,
            command: command.encode(),
            route: match keys {
                Some(keys) => Route::Keys(keys),
                None => Route::Every,
            },
            number: self.statements,
            waiter: Waiter::new(now_ms, &self.settings),
        });
        Ok(Action::Send(self.message(now_ms)))
    }

    /// The current statement's message (its locks, or itself), stamped `now_ms`.
    fn message(&self, now_ms: u64) -> Send {
        let current = self.current.as_ref().expect("a statement is under way");
        if current.globalizing {
            return Send {
                operation: store::globalize_operation(self.id),
                route: Route::Every,
            };
        }
        if current.locking {
            return Send {
                operation: store::lock_operation(&LockRequest {
                    transaction: self.id,
                    begin_ms: self.begin_ms,
                    now_ms,
                    locks: current.lacking.clone(),
                    nowait: false,
                }),
                route: Route::Every,
            };
        }
        Send {
            operation: store::transaction_operation(&TransactionStatement {
                transaction: self.id,
                statement: current.number,
                begin_ms: self.begin_ms,
                now_ms,
                locks: current.needed.clone(),
                nowait: false,
                command: current.command.clone(),
                savepoint: 0,
                skip_locked: false,
            }),
            route: current.route.clone(),
        }
    }

    /// The outcomes of the current statement's last message.
    pub fn outcomes(&mut self, outcomes: Vec<Outcome>, now_ms: u64) -> Action {
        let settings = self.settings;
        let current = self.current.as_mut().expect("a statement is under way");
        if current.globalizing {
            if first_error(&outcomes).is_some() {
                self.current = None;
                return Action::Answered(outcomes);
            }
            self.global = true;
            current.globalizing = false;
            return Action::Send(self.message(now_ms));
        }
        if let Some(pause) = current.waiter.wait(&outcomes, now_ms, &settings) {
            // A table lock waits at every partition: the transaction is global first.
            if current.locking && !self.global {
                current.globalizing = true;
            }
            return pause;
        }
        if current.locking {
            if outcomes
                .iter()
                .any(|outcome| matches!(outcome, Outcome::Error(_)))
            {
                self.current = None;
                return Action::Answered(outcomes);
            }
            store::transactions::hold_tables(&mut self.held, &current.lacking);
            current.locking = false;
            current.waiter = Waiter::new(now_ms, &settings);
            return Action::Send(self.message(now_ms));
        }
        self.current = None;
        Action::Answered(outcomes)
    }

    /// After a pause: the current message again.
    pub fn resume(&self, now_ms: u64) -> Send {
        self.message(now_ms)
    }

    /// The statement under way failed in transit (its outcome unknown): the transaction must
    /// be aborted.
    pub fn abandon_statement(&mut self) {
        self.current = None;
    }

    /// COMMIT or ROLLBACK: one message to every partition, or nothing when no statement was
    /// sent.
    pub fn end(&self, commit: bool) -> Option<Send> {
        (self.statements > 0).then(|| Send {
            operation: store::end_operation(self.id, commit, true),
            route: Route::Every,
        })
    }
}

impl Waiter {
    fn new(now_ms: u64, settings: &DriverSettings) -> Waiter {
        Waiter {
            started_ms: now_ms,
            pause_ms: settings.pause_first_ms,
            holder: None,
        }
    }

    /// A pause if the message must be sent again: refused for a transaction's lock or held
    /// out by a two-phase statement, with patience left.
    fn wait(
        &mut self,
        outcomes: &[Outcome],
        now_ms: u64,
        settings: &DriverSettings,
    ) -> Option<Action> {
        if outcomes.iter().any(dies) {
            return None; // Any partition's death aborts the transaction everywhere.
        }
        let locked = outcomes.iter().find_map(transaction_locked);
        let busy = outcomes
            .iter()
            .any(|outcome| refusal(outcome, busy).is_some());
        if (locked.is_none() && !busy)
            || now_ms.saturating_sub(self.started_ms) > settings.patience_ms
        {
            return None;
        }
        let mut abort = None;
        if let Some((transaction, last_ms)) = locked {
            match self.holder {
                Some((holder, seen, since)) if holder == transaction && seen == last_ms => {
                    if now_ms.saturating_sub(since) > settings.abandoned_after_ms {
                        abort = Some(Send {
                            operation: store::end_operation(transaction, false, false),
                            route: Route::Every,
                        });
                        self.holder = None;
                    }
                }
                _ => self.holder = Some((transaction, last_ms, now_ms)),
            }
        }
        let until_ms = now_ms + self.pause_ms;
        self.pause_ms = (self.pause_ms * 2).min(settings.pause_max_ms);
        Some(Action::Pause { until_ms, abort })
    }
}

fn refusal<T>(outcome: &Outcome, pick: impl Fn(&EngineError) -> Option<T>) -> Option<T> {
    match outcome {
        Outcome::Error(error) | Outcome::Executed(Err(error)) => pick(error),
        Outcome::Batch(results) => results
            .iter()
            .find_map(|result| result.as_ref().err().and_then(&pick)),
        _ => None,
    }
}

fn busy(error: &EngineError) -> Option<u64> {
    match error {
        EngineError::Busy { statement, .. } => Some(*statement),
        _ => None,
    }
}

/// The transaction whose lock an outcome was refused for, with its last stamp.
pub fn transaction_locked(outcome: &Outcome) -> Option<(u64, u64)> {
    refusal(outcome, |error| match error {
        EngineError::TransactionLocked {
            transaction,
            last_ms,
            ..
        } => Some((*transaction, *last_ms)),
        _ => None,
    })
}

/// Whether an outcome says the transaction dies (40001: a deadlock, the execution-order rule,
/// an abort by another gateway).
pub fn dies(outcome: &Outcome) -> bool {
    refusal(outcome, |error| {
        matches!(error, EngineError::SerializationFailure { .. }).then_some(())
    })
    .is_some()
}

/// The first error among a statement's outcomes, a death (40001) before any other: where
/// partitions answer differently, the transaction dies everywhere.
pub fn first_error(outcomes: &[Outcome]) -> Option<&EngineError> {
    let errors = || {
        outcomes.iter().filter_map(|outcome| match outcome {
            Outcome::Error(error) | Outcome::Executed(Err(error)) => Some(error),
            Outcome::Batch(results) => results.iter().find_map(|result| result.as_ref().err()),
            _ => None,
        })
    };
    errors()
        .find(|error| matches!(error, EngineError::SerializationFailure { .. }))
        .or_else(|| errors().next())
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::{Command, Operation, Predicate, Value};

    fn key(k: i64) -> Vec<u8> {
        store::rows::placement_key("t", &Value::BigInt(k))
    }

    fn read(k: i64) -> Command {
        Command::Batch(vec![Operation::Select {
            table: "t".into(),
            columns: vec![],
            predicate: Some(Predicate::equal("k", Value::BigInt(k))),
            limit: None,
        }])
    }

    fn locked(holder: u64, last_ms: u64) -> Outcome {
        Outcome::Error(EngineError::TransactionLocked {
            transaction: holder,
            table: "t".into(),
            last_ms,
        })
    }

    fn settings() -> DriverSettings {
        DriverSettings {
            patience_ms: 100,
            abandoned_after_ms: 30,
            pause_first_ms: 2,
            pause_max_ms: 8,
        }
    }

    #[test]
    fn a_first_statement_takes_its_table_lock_everywhere_then_runs_where_its_row_lives() {
        let mut txn = Transaction::new(7, 1_000, settings());
        assert_eq!(txn.end(true), None, "nothing sent: nothing to end");
        let Action::Send(lock) = txn.statement(&read(1), Some(vec![key(1)]), 1_000).unwrap() else {
            panic!("a message first")
        };
        assert_eq!(
            lock.route,
            Route::Every,
            "the table lock goes to every partition"
        );
        let Action::Send(statement) = txn.outcomes(vec![Outcome::Batch(vec![])], 1_001) else {
            panic!("then the statement")
        };
        assert_eq!(statement.route, Route::Keys(vec![key(1)]));
        let answer = Outcome::Batch(vec![]);
        assert_eq!(
            txn.outcomes(vec![answer.clone()], 1_002),
            Action::Answered(vec![answer])
        );
        // The table lock is held now: the next statement goes straight to its row.
        let Action::Send(next) = txn.statement(&read(1), Some(vec![key(1)]), 1_003).unwrap() else {
            panic!("a message")
        };
        assert_eq!(next.route, Route::Keys(vec![key(1)]));
        assert_eq!(txn.end(true).map(|end| end.route), Some(Route::Every));
    }

    #[test]
    fn a_lock_wait_pauses_aborts_an_idle_holder_and_gives_up_after_patience() {
        let mut txn = Transaction::new(7, 1_000, settings());
        txn.statement(&read(1), Some(vec![key(1)]), 1_000).unwrap();
        let mut now = 1_000;
        let mut aborts = 0;
        let mut pauses = Vec::new();
        loop {
            match txn.outcomes(vec![locked(3, 500)], now) {
                Action::Pause { until_ms, abort } => {
                    assert!(until_ms > now);
                    pauses.push(until_ms - now);
                    if let Some(abort) = abort {
                        assert_eq!(abort.operation, store::end_operation(3, false, false));
                        aborts += 1;
                    }
                    now = until_ms;
                    if txn.resume(now).operation == store::globalize_operation(7) {
                        // The table lock waits everywhere: global first, once.
                        assert!(!txn.global);
                        let Action::Send(_) = txn.outcomes(vec![ok()], now) else {
                            panic!("then the lock request again")
                        };
                        assert!(txn.global);
                    }
                }
                Action::Answered(outcomes) => {
                    assert_eq!(
                        outcomes,
                        vec![locked(3, 500)],
                        "the refusal, after patience"
                    );
                    break;
                }
                Action::Send(_) => panic!("a refused message is sent again after a pause"),
            }
        }
        assert!(now > 1_100, "patience is kept");
        assert!(aborts >= 1, "a holder idle for 30 ms is aborted");
        assert_eq!(pauses[..3], [2, 4, 8], "pauses double up to the maximum");
        assert!(pauses.iter().all(|pause| *pause <= 8));
    }

    fn ok() -> Outcome {
        Outcome::Batch(vec![])
    }

    fn dead() -> Outcome {
        Outcome::Error(EngineError::SerializationFailure {
            reason: "a deadlock".into(),
        })
    }

    /// Runs the current statement through its table lock, granted at once.
    fn granted_lock(txn: &mut Transaction, action: Action, now: u64) -> Action {
        let Action::Send(lock) = action else {
            panic!("a message")
        };
        assert_eq!(lock.route, Route::Every);
        txn.outcomes(vec![ok(), ok()], now)
    }

    #[test]
    fn a_transaction_becomes_global_once_before_its_first_message_to_a_second_partition() {
        let mut txn = Transaction::new(7, 1_000, settings());
        let first = txn.statement(&read(1), Some(vec![key(1)]), 1_000).unwrap();
        let Action::Send(statement) = granted_lock(&mut txn, first, 1_001) else {
            panic!("the statement")
        };
        assert_eq!(statement.route, Route::Keys(vec![key(1)]));
        txn.outcomes(vec![ok()], 1_002);
        assert!(!txn.global, "one partition: local");
        // The same key again: still local, straight to its row.
        let Action::Send(again) = txn.statement(&read(1), Some(vec![key(1)]), 1_003).unwrap()
        else {
            panic!("a message")
        };
        assert_eq!(again.route, Route::Keys(vec![key(1)]));
        txn.outcomes(vec![ok()], 1_004);
        // Another key: Globalize to every partition first, then the statement.
        let Action::Send(globalize) = txn.statement(&read(2), Some(vec![key(2)]), 1_005).unwrap()
        else {
            panic!("a message")
        };
        assert_eq!(globalize.operation, store::globalize_operation(7));
        assert_eq!(globalize.route, Route::Every);
        let Action::Send(statement) = txn.outcomes(vec![ok(), ok()], 1_006) else {
            panic!("then the statement")
        };
        assert_eq!(statement.route, Route::Keys(vec![key(2)]));
        assert!(txn.global);
        txn.outcomes(vec![ok()], 1_007);
        // Once global, never again.
        let Action::Send(next) = txn.statement(&read(3), None, 1_008).unwrap() else {
            panic!("a message")
        };
        assert_ne!(next.operation, store::globalize_operation(7));
        // A refused Globalize (the execution-order rule at one partition) answers the death.
        let mut other = Transaction::new(8, 1_000, settings());
        let Action::Send(globalize) = other.statement(&read(1), None, 1_000).unwrap() else {
            panic!("a message")
        };
        assert_eq!(globalize.operation, store::globalize_operation(8));
        assert_eq!(
            other.outcomes(vec![ok(), dead()], 1_001),
            Action::Answered(vec![ok(), dead()])
        );
        assert!(!other.global);
    }

    #[test]
    fn mixed_answers_a_death_anywhere_aborts_and_a_wait_anywhere_sends_the_whole_request_again() {
        let mut txn = Transaction::new(7, 1_000, settings());
        let Action::Send(lock) = txn.statement(&read(1), Some(vec![key(1)]), 1_000).unwrap() else {
            panic!("a message")
        };
        // Granted at one partition, waiting at the other: a pause, then the same request (and
        // the transaction, whose table lock waits at every partition, becomes global first).
        let Action::Pause { until_ms, .. } = txn.outcomes(vec![ok(), locked(3, 900)], 1_001) else {
            panic!("a wait anywhere waits")
        };
        let globalize = txn.resume(until_ms);
        assert_eq!(globalize.operation, store::globalize_operation(7));
        let Action::Send(again) = txn.outcomes(vec![ok(), ok()], until_ms) else {
            panic!("the lock request again")
        };
        assert_eq!(again.route, lock.route);
        // A death at one partition, a wait at another: the death wins, nothing waits.
        let outcomes = vec![locked(3, 900), dead()];
        assert_eq!(
            txn.outcomes(outcomes.clone(), until_ms + 1),
            Action::Answered(outcomes.clone())
        );
        assert!(matches!(
            first_error(&outcomes),
            Some(EngineError::SerializationFailure { .. })
        ));
    }
}
