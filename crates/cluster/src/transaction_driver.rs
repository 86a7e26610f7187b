//! The gateway's rules for SQL statements that meet transactions' locks, as pure state
//! machines driven by outcomes, wake-up hints and a clock in ms (`docs/internals/sprint.md`):
//!
//! - `Transaction`: one interactive transaction at its gateway (Sprint's edge server). It plans
//!   a statement's locks (`store::transactions::plan_statement_on_paths`, or
//!   `plan_skip_locked`), takes the table locks it lacks at every partition first
//!   (`LockRequest`, one message to every partition), sends the numbered statement where its
//!   route says, sends either again after a growing pause while another transaction's lock or
//!   a two-phase statement is in the way (the partition decides between waiting and dying:
//!   local deadlock detection and the execution-order rule; patience bounds the wait, NOWAIT
//!   never waits), aborts a holder that shows no new statement for `abandoned_after_ms` while
//!   this one waits, and ends (COMMIT, ROLLBACK, ROLLBACK TO) with one message to every
//!   partition.
//! - `Autocommit`: a statement outside transactions. It waits for transactions' locks as a
//!   transaction's statement does, and for a two-phase statement (`store::prepared`) holding
//!   its tables, whose decision it forces (abort) when the statement holds them too long.
//!
//! A transaction is *local* while its statements reach one partition (the placement key of its
//! first statement stands for it). It becomes *global* (Sprint §4.1) before its first message
//! that reaches further (a statement routed elsewhere or to every partition), or before it
//! waits for a table lock held by a transaction (a lock request to every partition refused for
//! another transaction's lock waits at every partition; a wait for a two-phase statement does
//! not globalize): one `Globalize` message to every partition, which numbers it. Where a
//! request's answers differ between partitions (their waits-for graphs differ), any death wins:
//! the transaction is aborted everywhere and the deaths are answered first; otherwise any wait
//! sends the whole request again (grants are idempotent).
//!
//! **Inputs**: the outcomes of the last message (`outcomes`), the end of a pause (`resume`),
//! a wake-up hint (`woken`: the transaction a lock wait waits for ended, its gateway says so;
//! the pause may end early), a message lost in transit (`abandon_statement`), and `now_ms`
//! with each. **Outputs** (`Action`): a message to send (`Send`: a store operation, its route
//! and its kind), a pause (until a time, or a hint; with an abandoned holder's abort to send
//! first), or the statement's answer. After an end or an abort (`Kind::End`, `Kind::Abort`)
//! is answered, the caller tells every gateway that the transaction ended (the hint); a lost
//! hint costs one pause. The caller moves the bytes and keeps the time: the runtime
//! (`runtime::ecast::sql`, wall-clock ms) and the simulator (`--sql-transactions`, ticks) run
//! this same code.

use crate::sql_route::SqlRoute;
use engine::{EngineError, Outcome};
use std::collections::BTreeMap;
use store::transactions::{LockRequest, Mode, Resource, RowPath, TransactionStatement};

/// Where an operation goes (`cluster::sql_route`).
pub use crate::sql_route::SqlRoute as Route;

/// What a message is (the caller counts them; the answer of an `Abort` or `Decide` is not
/// needed; after an `End` or `Abort` is answered, the caller sends the wake-up hint).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `Globalize`: the transaction is numbered at every partition.
    Globalize,
    /// Table locks at every partition (`LockRequest`).
    Lock,
    /// The numbered statement.
    Statement,
    /// COMMIT or ROLLBACK of `transaction`.
    End { transaction: u64 },
    /// ROLLBACK TO a savepoint.
    RollbackTo,
    /// The abort of `transaction`, a holder idle for `idle_ms` while this one waited.
    Abort { transaction: u64, idle_ms: u64 },
    /// The abort of two-phase `statement`, which held a table for `held_ms`.
    Decide { statement: u64, held_ms: u64 },
}

/// One store operation to send (`store::lock_operation`, `transaction_operation`,
/// `end_operation`, …), where, and what it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Send {
    pub operation: Vec<u8>,
    pub route: Route,
    pub kind: Kind,
}

/// An answering partition's outcome, as the caller carries it (bare, or with the partition's
/// name).
pub trait Answer {
    fn outcome(&self) -> &Outcome;
}

impl Answer for Outcome {
    fn outcome(&self) -> &Outcome {
        self
    }
}

impl<N> Answer for (N, Outcome) {
    fn outcome(&self) -> &Outcome {
        &self.1
    }
}

/// What the caller does next.
#[derive(Clone, Debug, PartialEq)]
pub enum Action<A = Outcome> {
    /// Send this, and hand its outcomes (one per answering partition) to `outcomes`.
    Send(Send),
    /// Send `abort` first if any (a waited-for holder judged abandoned, or a two-phase
    /// statement held too long; its answer is not needed), then wait until `until_ms` or until
    /// `woken` says a hint ends the pause, then call `resume`. `holder`: the transaction a lock
    /// wait waits for (`None`: a wait for a two-phase statement, which no hint ends).
    Pause {
        until_ms: u64,
        abort: Option<Send>,
        holder: Option<u64>,
    },
    /// The statement is answered: its outcomes, deaths (40001) first. A refusal (40001 from a
    /// deadlock, 55P03 after patience or with NOWAIT) is among them as an error. `ran`: these
    /// are the statement's own outcomes (not those of its table locks or its `Globalize`).
    Answered { outcomes: Vec<A>, ran: bool },
}

/// A wake-up hint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hint {
    /// This transaction ended (committed or aborted).
    Ended(u64),
    /// Hints were missed (the caller's queue overflowed): any waited-for holder may have ended.
    Missed,
}

/// The timing: the runtime's in ms (`Default`); a simulator passes its own, in ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriverSettings {
    /// How long a statement waits for locks before it is answered with the refusal (55P03).
    pub patience_ms: u64,
    /// A holder whose last statement stamp has not moved for this long while a statement
    /// waits for it is aborted.
    pub abandoned_after_ms: u64,
    /// The first pause of a wait; each next one doubles, up to a maximum.
    pub pause_first_ms: u64,
    /// The longest pause of a lock wait without hints (polling).
    pub pause_max_ms: u64,
    /// Whether hints arrive (`woken`); a lock wait's pause then grows to `woken_pause_max_ms`,
    /// since it only covers a missed hint or a holder that is not the only one.
    pub hints: bool,
    pub woken_pause_max_ms: u64,
    /// The longest pause of a transaction's wait for a two-phase statement.
    pub busy_pause_max_ms: u64,
    /// Grants at the partition (`docs/internals/sprint.md`, "Grants at the partition"): a
    /// statement's message asks the partition to keep it when it must wait in the row-lock
    /// queue and to run it when its turn comes (`TransactionStatement::await_grant`), its
    /// answer then the message's; the caller waits for the answer, and after this long
    /// without one sends the statement again without that (`Transaction::overdue`): the
    /// partition lets the kept one go and answers the new one at once (granted, or refused
    /// naming the holder, so patience and the abandoned-holder rule run as for a polled
    /// wait). 0: never (every wait polls).
    pub grant_wait_ms: u64,
    /// A statement outside transactions held out by a two-phase statement is sent again for
    /// this long, after pauses from `autocommit_pause_first_ms` doubling to
    /// `autocommit_pause_max_ms`; a two-phase statement that keeps it out for
    /// `autocommit_decide_after_ms` is aborted (its gateway may be gone).
    pub autocommit_busy_for_ms: u64,
    pub autocommit_pause_first_ms: u64,
    pub autocommit_pause_max_ms: u64,
    pub autocommit_decide_after_ms: u64,
    /// The storage process this gateway lives in (0: unknown). Not 0: the table locks are
    /// sent as `store::owned_lock_operation`, so that every partition records the
    /// transaction's owner and a suspicion of that process aborts it
    /// (`docs/internals/sprint.md`, "A gateway whose storage process dies").
    pub owner: u64,
    /// The gateway's incarnation (0: none, the old owned message without one). Not 0 (with
    /// an owner): the table locks are sent as `store::incarnation_lock_operation`, judged by
    /// every partition; one refused as a dead incarnation's (`EngineError::IncarnationDead`)
    /// fails the transaction with 40001, and the gateway takes a new incarnation for its next
    /// transactions (`Transaction::incarnation_refused`, `next_incarnation`).
    pub incarnation: u64,
    /// The gateway's incarnation is current at every partition: an owned table lock of it
    /// was granted everywhere (`Transaction::announced`). Then (or without an incarnation) a
    /// statement pinned to one key carries its table's intention lock to its partition with
    /// its row locks, and names its owner there (`store::transactions::Holding`); until then
    /// a transaction's first statement takes its intentions at every partition, which makes
    /// the incarnation current everywhere at one point of the order.
    pub announced: bool,
}

impl Default for DriverSettings {
    fn default() -> DriverSettings {
        DriverSettings {
            patience_ms: 60_000,
            abandoned_after_ms: 20_000,
            pause_first_ms: 2,
            pause_max_ms: 50,
            hints: false,
            woken_pause_max_ms: 200,
            busy_pause_max_ms: 50,
            grant_wait_ms: 1_000,
            autocommit_busy_for_ms: 10_000,
            autocommit_pause_first_ms: 5,
            autocommit_pause_max_ms: 100,
            autocommit_decide_after_ms: 2_000,
            owner: 0,
            incarnation: 0,
            announced: false,
        }
    }
}

/// How a statement of a transaction is run besides its command and route.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatementOptions {
    /// Its locking clause (`SELECT … FOR UPDATE | FOR SHARE [NOWAIT | SKIP LOCKED]`).
    pub locking: Option<sql::RowLocking>,
    /// The innermost open savepoint's id (0: none).
    pub savepoint: u32,
    /// Row locks finer than the partition key (`store::transactions::row_paths`), computed
    /// by the caller from its catalog.
    pub paths: Option<Vec<RowPath>>,
}

/// A statement being sent: `Globalize` first if needed, its table locks (`locking`), then
/// itself.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Current {
    /// `Globalize` first (the statement reaches a second partition, or its table locks wait).
    globalizing: bool,
    locking: bool,
    lacking: Vec<(Resource, Mode)>,
    needed: Vec<(Resource, Mode)>,
    command: Vec<u8>,
    route: Route,
    number: u64,
    savepoint: u32,
    skip_locked: bool,
    waiter: Waiter,
    /// The statement's message in flight awaits its grant (`DriverSettings::grant_wait_ms`):
    /// since when.
    awaiting: Option<u64>,
    /// An attempt of it was superseded by `overdue` (sent again without awaiting its grant):
    /// that attempt's answer, if it is a death, is taken (`takes_superseded`).
    superseded: bool,
}

/// A wait for transactions' locks (and, for a transaction's message, for two-phase
/// statements).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Waiter {
    started_ms: u64,
    pause_ms: u64,
    /// NOWAIT: never waits (the partitions refuse with 55P03 where it would).
    nowait: bool,
    /// The holder waited for, its last stamp, and since when.
    holder: Option<(u64, u64, u64)>,
    /// The two-phase statement holding the tables out, and since when.
    busy_holder: Option<(u64, u64)>,
    /// The holder the pause under way waits for (a hint of its end ends the pause).
    paused_for: Option<u64>,
    /// Hints received while no pause was under way (a message in flight), so that an end
    /// between a refusal and its pause is not missed: the ends (the latest `HINTS_KEPT`), and
    /// whether some were missed.
    ended: Vec<u64>,
    missed: bool,
}

/// How many hints a waiter keeps while its message is in flight.
const HINTS_KEPT: usize = 64;

/// One interactive transaction at its gateway.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transaction {
    pub id: u64,
    pub begin_ms: u64,
    /// Statements sent so far (their numbers): 0 means no partition knows it.
    pub statements: u64,
    /// The table locks it holds at every partition.
    held: BTreeMap<String, Mode>,
    settings: DriverSettings,
    current: Option<Current>,
    /// The placement key of its first statement pinned to keys: the partition it is local to.
    first: Option<Vec<u8>>,
    /// Whether it is global (its `Globalize` was granted everywhere).
    pub global: bool,
    /// Its table locks were refused because the partitions took its gateway's incarnation
    /// for dead (`EngineError::IncarnationDead`): that incarnation.
    incarnation_refused: Option<u64>,
    /// An owned table lock of its gateway's incarnation was granted at every partition.
    announced: bool,
    /// A statement of it took a writing mode: its reads take update intents.
    wrote: bool,
    /// A message of it was sent beyond the partition of its first placement key (a
    /// `Globalize`, a table lock to every partition, a statement routed elsewhere): its end
    /// goes to every partition.
    wide: bool,
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
            incarnation_refused: None,
            announced: false,
            wrote: false,
            wide: false,
        }
    }

    /// The incarnation the partitions refused this transaction's table locks for, taking it
    /// for dead (its storage process was suspected, or a newer incarnation of it began a
    /// transaction), if they did: the transaction failed (40001), and the gateway's next
    /// transactions must be owned by a new incarnation (`next_incarnation`).
    pub fn incarnation_refused(&self) -> Option<u64> {
        self.incarnation_refused
    }

    /// The gateway's incarnation, if an owned table lock of this transaction made it current
    /// at every partition: the caller's next transactions may then take their intention
    /// locks where their rows are (`DriverSettings::announced`).
    pub fn announced(&self) -> Option<u64> {
        self.announced.then_some(self.settings.incarnation)
    }

    /// Whether a statement pinned to one key takes its table's intention lock at its
    /// partition only (`DriverSettings::announced`).
    fn intentions_here(&self) -> bool {
        self.settings.owner == 0
            || self.settings.incarnation == 0
            || self.settings.announced
            || self.announced
    }

    /// The placement key of its first statement pinned to keys: a read of tables placed
    /// everywhere goes to its partition (`sql_route::route_of`'s `touched`), so that the
    /// transaction stays local.
    pub fn local_key(&self) -> Option<&[u8]> {
        self.first.as_deref()
    }

    /// Starts a statement (`command`, routed by `route`: `Keys` pinned to placement keys,
    /// anything else reaches beyond one partition): its first message, or its answer when no
    /// partition needs it (no key). `Err` for a statement no transaction may run (DDL, the
    /// table `kv`) or one over the size limit; nothing is sent then.
    pub fn statement<A: Answer>(
        &mut self,
        command: &engine::Command,
        route: Route,
        options: StatementOptions,
        now_ms: u64,
    ) -> Result<Action<A>, EngineError> {
        assert!(self.current.is_none(), "one statement at a time");
        if store::touches_kv_table(command) {
            return Err(EngineError::FeatureNotSupported {
                feature: format!("the table {} inside a transaction block", store::KV_TABLE),
            });
        }
        if route == SqlRoute::Keys(Vec::new()) {
            // No key, no partition: nothing to run.
            return Ok(Action::Answered {
                outcomes: Vec::new(),
                ran: true,
            });
        }
        let encoded = command.encode();
        crate::limits::check_statement_size(&encoded)?;
        let keys = match &route {
            SqlRoute::Keys(keys) => Some(keys.as_slice()),
            _ => None,
        };
        let (exclusive, nowait, skip_locked) = options.locking.map_or((false, false, false), |l| {
            (l.exclusive, l.nowait, l.skip_locked)
        });
        let operations = store::transactions::operations_of(command);
        let plan = if skip_locked {
            // Each partition chooses and locks the rows (`TransactionStatement::skip_locked`).
            store::transactions::plan_skip_locked(&self.held, operations, keys, exclusive)?
        } else {
            let mut paths = options.paths;
            if options.savepoint != 0 {
                // `ROLLBACK TO` writes back images: no increment locks under a savepoint.
                if let Some(paths) = paths.as_mut() {
                    store::transactions::without_increments(paths);
                }
            }
            let holding = store::transactions::Holding {
                everywhere: &self.held,
                wrote: self.wrote,
                intentions_here: self.intentions_here(),
            };
            store::transactions::plan_statement_holding(
                &holding,
                operations,
                keys,
                paths.as_deref(),
                exclusive,
            )?
        };
        self.wrote |= plan.needed.iter().any(|(_, mode)| mode.writes());
        // Counted before anything is sent: a lock taken, or a statement that may have run,
        // must be ended by COMMIT or ROLLBACK.
        self.statements += 1;
        let beyond = match (keys, &self.first) {
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
            command: encoded,
            route,
            number: self.statements,
            savepoint: options.savepoint,
            skip_locked,
            waiter: Waiter::new(now_ms, &self.settings, nowait),
            awaiting: None,
            superseded: false,
        });
        Ok(Action::Send(self.send(now_ms)))
    }

    /// The current statement's next message (`message`), awaiting its grant where the
    /// settings say so: the statement itself, without NOWAIT.
    fn send(&mut self, now_ms: u64) -> Send {
        let grant_wait_ms = self.settings.grant_wait_ms;
        let current = self.current.as_mut().expect("a statement is under way");
        let awaits = grant_wait_ms > 0
            && !current.globalizing
            && !current.locking
            && !current.waiter.nowait
            && !current.skip_locked;
        current.awaiting = awaits.then_some(now_ms);
        let send = self.message(now_ms, awaits);
        let local = matches!(
            (&send.route, &self.first),
            (Route::Keys(keys), Some(first)) if keys.iter().all(|key| key == first)
        );
        self.wide |= !local;
        send
    }

    /// When the message in flight, awaiting its grant, is overdue (`overdue`), if it awaits.
    pub fn overdue_at(&self) -> Option<u64> {
        let awaiting = self.current.as_ref()?.awaiting?;
        Some(awaiting + self.settings.grant_wait_ms)
    }

    /// The message in flight awaited its grant for `grant_wait_ms` without an answer: the
    /// statement again, not awaiting (its partition lets the kept one go, whose answer the
    /// caller then ignores, and answers this one at once); hand its outcomes to `outcomes`.
    /// `None` if nothing is overdue.
    pub fn overdue(&mut self, now_ms: u64) -> Option<Send> {
        if self.overdue_at().is_none_or(|at| now_ms < at) {
            return None;
        }
        let current = self.current.as_mut().expect("awaiting");
        current.awaiting = None;
        current.superseded = true;
        Some(self.message(now_ms, false))
    }

    /// Whether `outcomes`, the late answer to an attempt of the current statement that
    /// `overdue` superseded, are to be handed to `outcomes` now, as the statement's answer:
    /// only a death (a deadlock, the execution-order rule: the transaction must abort, and it
    /// holds its locks until its gateway ends it). The caller then ignores the answer of the
    /// attempt sent since. Anything else is left to that attempt, which the partition judges
    /// afresh. An answer to an attempt of an earlier statement is never taken (the statement
    /// was answered).
    pub fn takes_superseded<A: Answer>(&self, outcomes: &[A]) -> bool {
        self.current
            .as_ref()
            .is_some_and(|current| current.superseded && !current.globalizing && !current.locking)
            && outcomes.iter().any(|answer| dies(answer.outcome()))
    }

    /// The current statement's message (its `Globalize`, its locks, or itself), stamped
    /// `now_ms`.
    fn message(&self, now_ms: u64, await_grant: bool) -> Send {
        let current = self.current.as_ref().expect("a statement is under way");
        if current.globalizing {
            return Send {
                operation: store::globalize_operation(self.id),
                route: Route::Every,
                kind: Kind::Globalize,
            };
        }
        if current.locking {
            let request = LockRequest {
                transaction: self.id,
                begin_ms: self.begin_ms,
                now_ms,
                locks: current.lacking.clone(),
                nowait: current.waiter.nowait,
            };
            return Send {
                operation: match (self.settings.owner, self.settings.incarnation) {
                    (0, _) => store::lock_operation(&request),
                    (owner, 0) => store::owned_lock_operation(&request, owner),
                    (process, incarnation) => store::incarnation_lock_operation(
                        &request,
                        store::transactions::Owner {
                            process,
                            incarnation,
                        },
                    ),
                },
                route: Route::Every,
                kind: Kind::Lock,
            };
        }
        Send {
            operation: store::transaction_operation(&TransactionStatement {
                transaction: self.id,
                statement: current.number,
                begin_ms: self.begin_ms,
                now_ms,
                locks: current.needed.clone(),
                nowait: current.waiter.nowait,
                command: current.command.clone(),
                savepoint: current.savepoint,
                skip_locked: current.skip_locked,
                await_grant,
                owner: (self.settings.owner != 0).then_some(store::transactions::Owner {
                    process: self.settings.owner,
                    incarnation: self.settings.incarnation,
                }),
            }),
            route: current.route.clone(),
            kind: Kind::Statement,
        }
    }

    /// The outcomes of the current statement's last message.
    pub fn outcomes<A: Answer>(&mut self, outcomes: Vec<A>, now_ms: u64) -> Action<A> {
        let settings = self.settings;
        let current = self.current.as_mut().expect("a statement is under way");
        current.awaiting = None;
        if current.globalizing {
            // Refused somewhere: it had ended or was aborted there (by another gateway).
            if outcomes
                .iter()
                .any(|answer| error_of(answer.outcome()).is_some())
            {
                self.current = None;
                return answered(outcomes, false);
            }
            self.global = true;
            current.globalizing = false;
            return Action::Send(self.send(now_ms));
        }
        // Any partition's death aborts the transaction everywhere: nothing waits.
        if !outcomes.iter().any(|answer| dies(answer.outcome())) {
            if let Some(pause) = current.waiter.locked(&outcomes, now_ms, &settings) {
                // A table lock waits at every partition: the transaction is global first.
                if current.locking && !self.global {
                    current.globalizing = true;
                }
                return pause;
            }
            if let Some(pause) = current.waiter.busy(&outcomes, now_ms, &settings) {
                return pause;
            }
        }
        let own = (self.settings.owner, self.settings.incarnation);
        if own.1 != 0
            && outcomes
                .iter()
                .any(|answer| incarnation_dead(answer.outcome()) == Some(own))
        {
            self.incarnation_refused = Some(own.1);
        }
        if current.locking {
            if outcomes
                .iter()
                .any(|answer| matches!(answer.outcome(), Outcome::Error(_)))
            {
                self.current = None;
                return answered(outcomes, false);
            }
            // Granted everywhere: the incarnation is current at every partition.
            self.announced |= own.0 != 0 && own.1 != 0;
            store::transactions::hold_tables(&mut self.held, &current.lacking);
            current.locking = false;
            current.waiter = Waiter::new(now_ms, &settings, current.waiter.nowait);
            return Action::Send(self.send(now_ms));
        }
        self.current = None;
        answered(outcomes, true)
    }

    /// A hint: whether it ends the pause under way (then call `resume`). Hints that arrive
    /// while a message is in flight are kept, and one naming the holder its refusal names
    /// makes the pause that follows empty.
    pub fn woken(&mut self, hint: Hint) -> bool {
        self.current
            .as_mut()
            .is_some_and(|current| current.waiter.woken(hint))
    }

    /// After a pause: the current message again.
    pub fn resume(&mut self, now_ms: u64) -> Send {
        let current = self.current.as_mut().expect("a statement is under way");
        current.waiter.paused_for = None;
        self.send(now_ms)
    }

    /// The statement under way failed in transit (its outcome unknown): the transaction must
    /// be aborted.
    pub fn abandon_statement(&mut self) {
        self.current = None;
    }

    /// COMMIT or ROLLBACK, or nothing when no statement was sent (no partition knows it):
    /// one message to every partition, or for a local transaction (never global, every
    /// statement pinned to its first placement key, no table lock taken everywhere) one
    /// message to that key's partition, the only one that knows it (Sprint's local commit,
    /// §4.2; `docs/internals/sprint.md`, "Local commit"). Once answered, the caller sends the
    /// hint.
    pub fn end(&self, commit: bool) -> Option<Send> {
        let route = match &self.first {
            Some(first) if !self.wide => Route::Keys(vec![first.clone()]),
            _ => Route::Every,
        };
        (self.statements > 0).then(|| Send {
            operation: store::end_operation(self.id, commit, true),
            route,
            kind: Kind::End {
                transaction: self.id,
            },
        })
    }

    /// ROLLBACK TO savepoint `savepoint` (its id): one message to every partition, each
    /// writing back what the transaction changed there since; nothing when no statement was
    /// sent.
    pub fn rollback_to(&self, savepoint: u32) -> Option<Send> {
        (self.statements > 0).then(|| Send {
            operation: store::rollback_to_operation(self.id, savepoint),
            route: Route::Every,
            kind: Kind::RollbackTo,
        })
    }
}

/// The answer, deaths first (the front end reports the 40001: the transaction is aborted
/// everywhere, rather than another partition's wait).
fn answered<A: Answer>(mut outcomes: Vec<A>, ran: bool) -> Action<A> {
    outcomes.sort_by_key(|answer| !dies(answer.outcome()));
    Action::Answered { outcomes, ran }
}

/// A statement outside transactions: it holds no locks and never dies; it waits for
/// transactions' locks (as a transaction's statement, with the same abandonment rule) and for
/// two-phase statements holding its tables (forcing the decision of one that holds them for
/// long). The caller sends the statement, hands its outcomes here, and sends it again after
/// each pause.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Autocommit {
    settings: DriverSettings,
    waiter: Waiter,
    started_ms: u64,
    pause_ms: u64,
    /// The two-phase statement holding it out, and since when.
    blocked: Option<(u64, u64)>,
}

impl Autocommit {
    pub fn new(now_ms: u64, settings: DriverSettings) -> Autocommit {
        Autocommit {
            settings,
            waiter: Waiter::new(now_ms, &settings, false),
            started_ms: now_ms,
            pause_ms: settings.autocommit_pause_first_ms,
            blocked: None,
        }
    }

    /// The outcomes of the statement: a pause before it is sent again, or its answer.
    pub fn outcomes<A: Answer>(&mut self, outcomes: Vec<A>, now_ms: u64) -> Action<A> {
        let settings = self.settings;
        // A transaction's lock: waited for (nothing ran anywhere: a write over several
        // partitions goes in two phases, so one partition's refusal aborts it everywhere; a
        // read refused by one partition is sent again whole).
        if let Some(pause) = self.waiter.locked(&outcomes, now_ms, &settings) {
            return pause;
        }
        let Some(statement) = outcomes
            .iter()
            .find_map(|answer| refusal(answer.outcome(), busy))
        else {
            return Action::Answered {
                outcomes,
                ran: true,
            };
        };
        if now_ms.saturating_sub(self.started_ms) > settings.autocommit_busy_for_ms {
            return Action::Answered {
                outcomes,
                ran: true,
            };
        }
        let abort = held_too_long(&mut self.blocked, statement, now_ms, &settings);
        let until_ms = now_ms + self.pause_ms;
        self.pause_ms = (self.pause_ms * 2).min(settings.autocommit_pause_max_ms);
        self.waiter.paused_for = None;
        Action::Pause {
            until_ms,
            abort,
            holder: None,
        }
    }

    /// A hint: whether it ends the pause under way (then send the statement again).
    pub fn woken(&mut self, hint: Hint) -> bool {
        self.waiter.woken(hint)
    }

    /// After a pause, before the statement is sent again.
    pub fn resume(&mut self) {
        self.waiter.paused_for = None;
    }
}

impl Waiter {
    fn new(now_ms: u64, settings: &DriverSettings, nowait: bool) -> Waiter {
        Waiter {
            started_ms: now_ms,
            pause_ms: settings.pause_first_ms,
            nowait,
            holder: None,
            busy_holder: None,
            paused_for: None,
            ended: Vec::new(),
            missed: false,
        }
    }

    fn patience_spent(&self, now_ms: u64, settings: &DriverSettings) -> bool {
        self.nowait || now_ms.saturating_sub(self.started_ms) > settings.patience_ms
    }

    /// A pause if the message was refused for a transaction's lock and patience remains;
    /// with the abort of a holder idle too long.
    fn locked<A: Answer>(
        &mut self,
        outcomes: &[A],
        now_ms: u64,
        settings: &DriverSettings,
    ) -> Option<Action<A>> {
        let (transaction, last_ms) = outcomes
            .iter()
            .find_map(|answer| transaction_locked(answer.outcome()))?;
        if self.patience_spent(now_ms, settings) {
            return None;
        }
        let mut abort = None;
        match self.holder {
            Some((holder, seen, since)) if holder == transaction && seen == last_ms => {
                let idle_ms = now_ms.saturating_sub(since);
                if idle_ms > settings.abandoned_after_ms {
                    abort = Some(Send {
                        operation: store::end_operation(transaction, false, false),
                        route: Route::Every,
                        kind: Kind::Abort {
                            transaction,
                            idle_ms,
                        },
                    });
                    self.holder = None;
                }
            }
            _ => self.holder = Some((transaction, last_ms, now_ms)),
        }
        let most = if settings.hints {
            settings.woken_pause_max_ms
        } else {
            settings.pause_max_ms
        };
        Some(self.pause(now_ms, most, abort, Some(transaction)))
    }

    /// A pause if the message was held out by a two-phase statement and patience remains;
    /// with that statement's abort once it has held the tables out for
    /// `autocommit_decide_after_ms` (its gateway may have died between its two phases, as
    /// `Autocommit` judges it).
    fn busy<A: Answer>(
        &mut self,
        outcomes: &[A],
        now_ms: u64,
        settings: &DriverSettings,
    ) -> Option<Action<A>> {
        let statement = outcomes
            .iter()
            .find_map(|answer| refusal(answer.outcome(), busy))?;
        if self.patience_spent(now_ms, settings) {
            return None;
        }
        let abort = held_too_long(&mut self.busy_holder, statement, now_ms, settings);
        Some(self.pause(now_ms, settings.busy_pause_max_ms, abort, None))
    }

    fn pause<A>(
        &mut self,
        now_ms: u64,
        most: u64,
        abort: Option<Send>,
        holder: Option<u64>,
    ) -> Action<A> {
        let mut until_ms = now_ms + self.pause_ms;
        self.pause_ms = (self.pause_ms * 2).min(most);
        self.paused_for = holder;
        if let Some(holder) = holder {
            if self.missed || self.ended.contains(&holder) {
                // Its end arrived while the message was in flight: no pause.
                until_ms = now_ms;
            }
        }
        self.ended.clear();
        self.missed = false;
        Action::Pause {
            until_ms,
            abort,
            holder,
        }
    }

    /// Whether `hint` ends the pause under way; without one, the hint is kept for the next.
    fn woken(&mut self, hint: Hint) -> bool {
        match (hint, self.paused_for) {
            (Hint::Missed, Some(_)) => true,
            (Hint::Ended(ended), Some(holder)) => ended == holder,
            (Hint::Missed, None) => {
                self.missed = true;
                false
            }
            (Hint::Ended(ended), None) => {
                if self.ended.len() == HINTS_KEPT {
                    self.ended.remove(0);
                }
                self.ended.push(ended);
                false
            }
        }
    }
}

/// A waiter held out by two-phase statement `statement` (`blocked`: the one it was held out by
/// before, and since when): its abort once the same statement has held it out for
/// `autocommit_decide_after_ms` (its gateway may have died between its phases), after which
/// the wait is counted afresh.
fn held_too_long(
    blocked: &mut Option<(u64, u64)>,
    statement: u64,
    now_ms: u64,
    settings: &DriverSettings,
) -> Option<Send> {
    match *blocked {
        Some((holder, since)) if holder == statement => {
            let held_ms = now_ms.saturating_sub(since);
            if held_ms <= settings.autocommit_decide_after_ms {
                return None;
            }
            *blocked = None;
            Some(Send {
                operation: store::decide_operation(statement, false),
                route: Route::Every,
                kind: Kind::Decide { statement, held_ms },
            })
        }
        _ => {
            *blocked = Some((statement, now_ms));
            None
        }
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

/// The two-phase statement an outcome says holds a table (`EngineError::Busy`).
pub fn busy_statement(outcome: &Outcome) -> Option<u64> {
    refusal(outcome, busy)
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
/// an abort by another gateway, its gateway's incarnation taken for dead).
pub fn dies(outcome: &Outcome) -> bool {
    refusal(outcome, |error| death(error).then_some(())).is_some()
}

/// Whether an error is a death (40001).
fn death(error: &EngineError) -> bool {
    matches!(
        error,
        EngineError::SerializationFailure { .. } | EngineError::IncarnationDead { .. }
    )
}

/// The gateway incarnation an outcome refuses as dead (`EngineError::IncarnationDead`):
/// (process, incarnation).
pub fn incarnation_dead(outcome: &Outcome) -> Option<(u64, u64)> {
    refusal(outcome, |error| match error {
        EngineError::IncarnationDead {
            process,
            incarnation,
        } => Some((*process, *incarnation)),
        _ => None,
    })
}

/// A gateway's incarnation after one of its transactions was refused as incarnation
/// `refused`'s (`Transaction::incarnation_refused`): `fresh` (a value the caller draws, new
/// and not 0) if the gateway still uses `refused`, else `current` unchanged (another of its
/// sessions already moved on; moving again would supersede that new incarnation and abort its
/// transactions). A runtime whose sessions share the incarnation does this as one
/// compare-and-swap.
pub fn next_incarnation(current: u64, refused: u64, fresh: u64) -> u64 {
    assert_ne!(fresh, 0, "0 is no incarnation");
    if current == refused {
        assert_ne!(fresh, refused, "a new incarnation");
        fresh
    } else {
        current
    }
}

fn error_of(outcome: &Outcome) -> Option<&EngineError> {
    match outcome {
        Outcome::Error(error) | Outcome::Executed(Err(error)) => Some(error),
        Outcome::Batch(results) => results.iter().find_map(|result| result.as_ref().err()),
        _ => None,
    }
}

/// The first error among a statement's outcomes, a death (40001) before any other: where
/// partitions answer differently, the transaction dies everywhere.
pub fn first_error(outcomes: &[Outcome]) -> Option<&EngineError> {
    let errors = || outcomes.iter().filter_map(error_of);
    errors()
        .find(|error| death(error))
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

    fn start(
        txn: &mut Transaction,
        command: &Command,
        keys: Option<Vec<Vec<u8>>>,
        now: u64,
    ) -> Action {
        let route = keys.map_or(Route::Every, Route::Keys);
        txn.statement(command, route, StatementOptions::default(), now)
            .unwrap()
    }

    fn locked(holder: u64, last_ms: u64) -> Outcome {
        Outcome::Error(EngineError::TransactionLocked {
            transaction: holder,
            table: "t".into(),
            last_ms,
        })
    }

    /// A gateway whose incarnation is not yet current at every partition: a transaction's
    /// first statement takes its table's intention at every partition first.
    fn settings() -> DriverSettings {
        DriverSettings {
            patience_ms: 100,
            abandoned_after_ms: 30,
            pause_first_ms: 2,
            pause_max_ms: 8,
            owner: 3,
            incarnation: 9,
            ..DriverSettings::default()
        }
    }

    fn busy_outcome(statement: u64) -> Outcome {
        Outcome::Error(EngineError::Busy {
            table: "t".into(),
            statement,
        })
    }

    /// `SELECT … FOR UPDATE NOWAIT`'s options.
    fn nowait_options() -> StatementOptions {
        StatementOptions {
            locking: Some(sql::RowLocking {
                exclusive: true,
                nowait: true,
                skip_locked: false,
            }),
            ..StatementOptions::default()
        }
    }
    #[test]
    fn a_first_statement_takes_its_table_lock_everywhere_then_runs_where_its_row_lives() {
        let mut txn = Transaction::new(7, 1_000, settings());
        assert_eq!(txn.end(true), None, "nothing sent: nothing to end");
        let Action::Send(lock) = start(&mut txn, &read(1), Some(vec![key(1)]), 1_000) else {
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
            Action::Answered {
                outcomes: vec![answer],
                ran: true
            }
        );
        // The table lock is held now: the next statement goes straight to its row.
        let Action::Send(next) = start(&mut txn, &read(1), Some(vec![key(1)]), 1_003) else {
            panic!("a message")
        };
        assert_eq!(next.route, Route::Keys(vec![key(1)]));
        assert_eq!(txn.end(true).map(|end| end.route), Some(Route::Every));
    }

    #[test]
    fn a_lock_wait_pauses_aborts_an_idle_holder_and_gives_up_after_patience() {
        let mut txn = Transaction::new(7, 1_000, settings());
        start(&mut txn, &read(1), Some(vec![key(1)]), 1_000);
        let mut now = 1_000;
        let mut aborts = 0;
        let mut pauses = Vec::new();
        loop {
            match txn.outcomes(vec![locked(3, 500)], now) {
                Action::Pause {
                    until_ms, abort, ..
                } => {
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
                Action::Answered { outcomes, ran } => {
                    assert!(!ran, "refused at its table lock");
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

    fn statement_of(send: &Send) -> TransactionStatement {
        let (tag, body) = send.operation.split_first().unwrap();
        assert_eq!(
            *tag,
            store::transaction_operation(&TransactionStatement {
                transaction: 0,
                statement: 0,
                begin_ms: 0,
                now_ms: 0,
                locks: Vec::new(),
                nowait: false,
                command: Vec::new(),
                savepoint: 0,
                skip_locked: false,
                await_grant: false,
                owner: None,
            })[0],
            "a statement"
        );
        postcard::from_bytes(body).unwrap()
    }

    /// Grants at the partition: the statement's message (not its table lock, not a NOWAIT
    /// one) awaits its grant; unanswered for `grant_wait_ms`, it is due again without
    /// awaiting, once; its outcomes are then handled as any (a refusal pauses as a polled
    /// wait, so patience and the abandoned-holder rule still run). With `grant_wait_ms` 0
    /// nothing awaits.
    #[test]
    fn a_statement_awaits_its_grant_and_is_sent_again_without_when_overdue() {
        let settings = DriverSettings {
            grant_wait_ms: 40,
            ..settings()
        };
        let mut txn = Transaction::new(7, 1_000, settings);
        let Action::Send(lock) = start(&mut txn, &read(1), Some(vec![key(1)]), 1_000) else {
            panic!("its table lock first")
        };
        assert_eq!(lock.kind, Kind::Lock);
        assert_eq!(txn.overdue_at(), None, "a table lock does not await");
        let Action::Send(first) = txn.outcomes(vec![ok()], 1_001) else {
            panic!("then the statement")
        };
        assert!(statement_of(&first).await_grant);
        assert_eq!(txn.overdue_at(), Some(1_041));
        assert_eq!(txn.overdue(1_040), None, "not yet");
        let again = txn.overdue(1_041).expect("overdue");
        let again_statement = statement_of(&again);
        assert!(!again_statement.await_grant);
        assert_eq!(again_statement.statement, statement_of(&first).statement);
        assert_eq!(txn.overdue_at(), None, "sent again once");
        assert_eq!(txn.overdue(2_000), None);
        // Refused: a pause; the statement after it awaits again.
        let Action::Pause { until_ms, .. } = txn.outcomes(vec![locked(3, 500)], 1_042) else {
            panic!("a refusal pauses")
        };
        assert!(statement_of(&txn.resume(until_ms)).await_grant);
        // Granted: answered, nothing awaits.
        let Action::Answered { ran: true, .. } = txn.outcomes(vec![ok()], until_ms + 1) else {
            panic!("answered")
        };
        assert_eq!(txn.overdue_at(), None);
        // NOWAIT, and grants off: never awaits.
        let options = nowait_options();
        let Action::Send(lock) = txn
            .statement::<Outcome>(&read(1), Route::Keys(vec![key(1)]), options, 2_000)
            .unwrap()
        else {
            panic!("sent")
        };
        let Action::Send(nowait) = (match lock.kind {
            Kind::Lock => txn.outcomes(vec![ok()], 2_001),
            _ => Action::Send(lock),
        }) else {
            panic!("the statement")
        };
        assert!(!statement_of(&nowait).await_grant);
        assert_eq!(txn.overdue_at(), None);
        let mut polling = Transaction::new(
            8,
            1_000,
            DriverSettings {
                grant_wait_ms: 0,
                ..settings
            },
        );
        let Action::Send(_) = start(&mut polling, &read(1), Some(vec![key(1)]), 1_000) else {
            panic!()
        };
        let Action::Send(plain) = polling.outcomes(vec![ok()], 1_001) else {
            panic!()
        };
        assert!(!statement_of(&plain).await_grant);
        assert_eq!(polling.overdue_at(), None);
    }

    /// Seed 3214 of `sim --ecast --partitions vr --sql-transactions`: an attempt awaiting its
    /// grant was superseded by `overdue`, then died at the partition (the execution-order
    /// rule), and its gateway, waiting for the later attempt (which took ~400 ticks to arrive),
    /// kept the dead transaction's locks meanwhile. A death answered to the superseded attempt
    /// is the statement's answer; nothing else of it is, nor anything before `overdue` or
    /// after the statement was answered.
    #[test]
    fn a_death_answered_to_a_superseded_attempt_is_the_statements_answer() {
        let settings = DriverSettings {
            grant_wait_ms: 40,
            ..settings()
        };
        let mut txn = Transaction::new(7, 1_000, settings);
        let Action::Send(_) = start(&mut txn, &read(1), Some(vec![key(1)]), 1_000) else {
            panic!("its table lock first")
        };
        let Action::Send(_) = txn.outcomes(vec![ok()], 1_001) else {
            panic!("then the statement, awaiting its grant")
        };
        assert!(!txn.takes_superseded(&[dead()]), "nothing superseded yet");
        txn.overdue(1_041).expect("overdue");
        assert!(
            !txn.takes_superseded(&[ok()]),
            "a success is the later attempt's to give"
        );
        assert!(
            !txn.takes_superseded(&[locked(3, 500)]),
            "a wait is the later attempt's to judge"
        );
        assert!(txn.takes_superseded(&[ok(), dead()]), "a death anywhere");
        let Action::Answered { outcomes, .. } = txn.outcomes(vec![dead()], 1_050) else {
            panic!("the death answers the statement")
        };
        assert!(dies(&outcomes[0]));
        assert!(
            !txn.takes_superseded(&[dead()]),
            "the statement is answered: a later death of it is not taken again"
        );
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
        let first = start(&mut txn, &read(1), Some(vec![key(1)]), 1_000);
        let Action::Send(statement) = granted_lock(&mut txn, first, 1_001) else {
            panic!("the statement")
        };
        assert_eq!(statement.route, Route::Keys(vec![key(1)]));
        txn.outcomes(vec![ok()], 1_002);
        assert!(!txn.global, "one partition: local");
        // The same key again: still local, straight to its row.
        let Action::Send(again) = start(&mut txn, &read(1), Some(vec![key(1)]), 1_003) else {
            panic!("a message")
        };
        assert_eq!(again.route, Route::Keys(vec![key(1)]));
        txn.outcomes(vec![ok()], 1_004);
        // Another key: Globalize to every partition first, then the statement.
        let Action::Send(globalize) = start(&mut txn, &read(2), Some(vec![key(2)]), 1_005) else {
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
        let Action::Send(next) = start(&mut txn, &read(3), None, 1_008) else {
            panic!("a message")
        };
        assert_ne!(next.operation, store::globalize_operation(7));
        // A refused Globalize (the execution-order rule at one partition) answers the death.
        let mut other = Transaction::new(8, 1_000, settings());
        let Action::Send(globalize) = start(&mut other, &read(1), None, 1_000) else {
            panic!("a message")
        };
        assert_eq!(globalize.operation, store::globalize_operation(8));
        assert_eq!(
            other.outcomes(vec![ok(), dead()], 1_001),
            Action::Answered {
                outcomes: vec![dead(), ok()],
                ran: false
            }
        );
        assert!(!other.global);
    }

    #[test]
    fn mixed_answers_a_death_anywhere_aborts_and_a_wait_anywhere_sends_the_whole_request_again() {
        let mut txn = Transaction::new(7, 1_000, settings());
        let Action::Send(lock) = start(&mut txn, &read(1), Some(vec![key(1)]), 1_000) else {
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
            Action::Answered {
                outcomes: vec![dead(), locked(3, 900)],
                ran: false
            }
        );
        assert!(matches!(
            first_error(&outcomes),
            Some(EngineError::SerializationFailure { .. })
        ));
    }

    #[test]
    fn a_hint_of_the_holders_end_ends_its_pause_and_with_hints_pauses_grow_further() {
        let hinted = DriverSettings {
            hints: true,
            woken_pause_max_ms: 32,
            ..settings()
        };
        let mut txn = Transaction::new(7, 1_000, hinted);
        let first = start(&mut txn, &read(1), Some(vec![key(1)]), 1_000);
        let Action::Send(_) = granted_lock(&mut txn, first, 1_000) else {
            panic!("the statement")
        };
        assert!(!txn.woken(Hint::Ended(4)), "no pause under way");
        let mut now = 1_001;
        let mut pauses = Vec::new();
        for _ in 0..6 {
            let Action::Pause {
                until_ms, holder, ..
            } = txn.outcomes(vec![locked(3, now)], now)
            else {
                panic!("a lock wait")
            };
            assert_eq!(holder, Some(3));
            assert!(!txn.woken(Hint::Ended(4)), "another transaction's end");
            assert!(txn.woken(Hint::Ended(3)), "the holder's end");
            assert!(txn.woken(Hint::Missed), "a missed hint may have been its");
            pauses.push(until_ms - now);
            now += 1; // Woken early.
            let again = txn.resume(now);
            assert_eq!(again.kind, Kind::Statement);
        }
        assert_eq!(
            pauses,
            [2, 4, 8, 16, 32, 32],
            "beyond the polling maximum (8)"
        );
    }

    /// A two-phase statement whose gateway died between its phases holds its tables until
    /// someone decides it: a transaction held out by it for `autocommit_decide_after_ms`
    /// aborts it, as a statement outside transactions does.
    #[test]
    fn a_transaction_held_out_by_a_two_phase_statement_for_long_aborts_it() {
        let settings = DriverSettings {
            patience_ms: 10_000,
            autocommit_decide_after_ms: 50,
            ..settings()
        };
        let mut txn = Transaction::new(7, 1_000, settings);
        let Action::Send(_) = start(&mut txn, &read(1), Some(vec![key(1)]), 1_000) else {
            panic!("a message")
        };
        let mut now = 1_001;
        let mut aborts = Vec::new();
        while now < 1_400 {
            let Action::Pause {
                until_ms, abort, ..
            } = txn.outcomes(vec![ok(), busy_outcome(9)], now)
            else {
                panic!("a wait for the two-phase statement")
            };
            if let Some(abort) = abort {
                assert_eq!(abort.operation, store::decide_operation(9, false));
                assert_eq!(abort.route, Route::Every);
                aborts.push(now);
            }
            now = until_ms.max(now + 1);
            txn.resume(now);
        }
        assert!(
            // Within one pause (at most `busy_pause_max_ms`) of 50 ms held out.
            matches!(aborts.first(), Some(at) if *at > 1_051 && *at <= 1_051 + 50),
            "aborted once held out for 50 ms: {aborts:?}"
        );
        assert!(aborts.len() >= 2, "and again if it still holds: {aborts:?}");
    }

    #[test]
    fn a_wait_for_a_two_phase_statement_does_not_globalize_nor_wake_and_nowait_never_waits() {
        let mut txn = Transaction::new(7, 1_000, settings());
        let Action::Send(lock) = start(&mut txn, &read(1), Some(vec![key(1)]), 1_000) else {
            panic!("a message")
        };
        assert_eq!(lock.kind, Kind::Lock);
        let Action::Pause {
            until_ms, holder, ..
        } = txn.outcomes(vec![ok(), busy_outcome(9)], 1_001)
        else {
            panic!("a wait for the two-phase statement")
        };
        assert_eq!(holder, None);
        assert!(!txn.woken(Hint::Ended(9)) && !txn.woken(Hint::Missed));
        assert_eq!(
            txn.resume(until_ms).kind,
            Kind::Lock,
            "no Globalize: no transaction holds the table"
        );
        assert!(!txn.global);
        // NOWAIT: the refusal is the answer at once, and the messages say NOWAIT.
        let mut nowait = Transaction::new(8, 1_000, settings());
        let options = nowait_options();
        let Action::Send(lock) = nowait
            .statement::<Outcome>(&read(1), Route::Keys(vec![key(1)]), options, 1_000)
            .unwrap()
        else {
            panic!("a message")
        };
        assert!(
            lock.operation
                == store::incarnation_lock_operation(
                    &LockRequest {
                        transaction: 8,
                        begin_ms: 1_000,
                        now_ms: 1_000,
                        locks: vec![(("t".into(), None), Mode::IntentExclusive)],
                        nowait: true,
                    },
                    store::transactions::Owner {
                        process: 3,
                        incarnation: 9
                    }
                )
        );
        assert_eq!(
            nowait.outcomes(vec![locked(3, 900)], 1_000),
            Action::Answered {
                outcomes: vec![locked(3, 900)],
                ran: false
            }
        );
    }

    /// A gateway that knows its storage process (and names no incarnation, the old message)
    /// sends its table locks owned by it (every partition records the owner, and a suspicion
    /// of that process aborts the transaction), and its statements name it too. Without an
    /// incarnation nothing needs announcing: intentions go with the statements. A gateway
    /// that knows no process sends no owner and takes its intentions with its statements.
    #[test]
    fn a_gateway_with_an_owner_sends_its_table_locks_owned() {
        let owned = DriverSettings {
            owner: 5,
            incarnation: 0,
            ..settings()
        };
        let mut txn = Transaction::new(8, 1_000, owned);
        let everything = Command::Batch(vec![Operation::Select {
            table: "t".into(),
            columns: vec![],
            predicate: None,
            limit: None,
        }]);
        let Action::Send(globalize) = start(&mut txn, &everything, None, 1_000) else {
            panic!("a message")
        };
        assert_eq!(
            globalize.kind,
            Kind::Globalize,
            "it reaches every partition"
        );
        let Action::Send(lock) = txn.outcomes(vec![ok()], 1_000) else {
            panic!("then its table lock")
        };
        assert_eq!(lock.kind, Kind::Lock);
        let request = LockRequest {
            transaction: 8,
            begin_ms: 1_000,
            now_ms: 1_000,
            locks: vec![(("t".into(), None), Mode::Shared)],
            nowait: false,
        };
        assert!(lock.operation == store::owned_lock_operation(&request, 5));
        let Action::Send(statement) = txn.outcomes(vec![ok()], 1_001) else {
            panic!("the statement")
        };
        assert_eq!(statement.kind, Kind::Statement);
        let owner = store::transactions::Owner {
            process: 5,
            incarnation: 0,
        };
        assert_eq!(statement_of(&statement).owner, Some(owner));
        assert_eq!(txn.announced(), None, "no incarnation to announce");
        let mut pinned = Transaction::new(8, 1_000, owned);
        let Action::Send(first) = start(&mut pinned, &read(1), Some(vec![key(1)]), 1_000) else {
            panic!("a message")
        };
        assert_eq!(first.kind, Kind::Statement, "no lock message first");
        assert_eq!(statement_of(&first).owner, Some(owner));
        let unowned = DriverSettings {
            owner: 0,
            incarnation: 0,
            ..settings()
        };
        let mut plain = Transaction::new(8, 1_000, unowned);
        let Action::Send(first) = start(&mut plain, &read(1), Some(vec![key(1)]), 1_000) else {
            panic!("a message")
        };
        assert_eq!(first.kind, Kind::Statement);
        let statement = statement_of(&first);
        assert_eq!(statement.owner, None);
        assert_eq!(
            statement.locks[0],
            (("t".into(), None), Mode::IntentShared),
            "the table's intention, with the row's lock"
        );
    }

    /// A local transaction (every message to its first key's partition) ends there alone;
    /// one that sent anything beyond (a `Globalize`, a table lock to every partition) ends
    /// at every partition.
    #[test]
    fn a_local_transaction_ends_at_its_partition_and_a_wide_one_everywhere() {
        let announced = DriverSettings {
            announced: true,
            ..settings()
        };
        let mut local = Transaction::new(7, 1_000, announced);
        start(&mut local, &read(1), Some(vec![key(1)]), 1_000);
        local.outcomes(vec![ok()], 1_001);
        start(&mut local, &read(1), Some(vec![key(1)]), 1_002);
        local.outcomes(vec![ok()], 1_003);
        let end = local.end(true).expect("statements were sent");
        assert_eq!(end.route, Route::Keys(vec![key(1)]));
        assert!(end.operation == store::end_operation(7, true, true));
        // A second key: Globalize first, then the end everywhere.
        let Action::Send(globalize) = start(&mut local, &read(2), Some(vec![key(2)]), 1_004) else {
            panic!("a message")
        };
        assert_eq!(globalize.kind, Kind::Globalize);
        assert_eq!(local.end(false).map(|end| end.route), Some(Route::Every));
        // Its table lock to every partition (the incarnation not yet announced): everywhere.
        let mut first = Transaction::new(8, 1_000, settings());
        start(&mut first, &read(1), Some(vec![key(1)]), 1_000);
        assert_eq!(first.end(false).map(|end| end.route), Some(Route::Every));
    }

    /// Until a gateway's incarnation is current at every partition, a transaction's first
    /// statement takes its table's intention everywhere, which announces it
    /// (`Transaction::announced`). Once announced (`DriverSettings::announced`), a statement
    /// pinned to one key carries its intention to its partition with its row locks and its
    /// owner, the same for every later table; a statement that reaches every partition still
    /// takes its table lock everywhere first; and reads after a write still take update
    /// intents.
    #[test]
    fn an_announced_incarnation_takes_intentions_where_the_rows_are() {
        let mut first = Transaction::new(7, 1_000, settings());
        let Action::Send(lock) = start(&mut first, &read(1), Some(vec![key(1)]), 1_000) else {
            panic!("a message")
        };
        assert_eq!((lock.kind, lock.route), (Kind::Lock, Route::Every));
        assert_eq!(first.announced(), None, "not granted yet");
        let Action::Send(_) = first.outcomes(vec![ok(), ok()], 1_001) else {
            panic!("then the statement")
        };
        assert_eq!(first.announced(), Some(9), "granted at every partition");
        let refused = DriverSettings {
            incarnation: 10,
            ..settings()
        };
        let mut dead = Transaction::new(8, 1_000, refused);
        start(&mut dead, &read(1), Some(vec![key(1)]), 1_000);
        let dead_answer = Outcome::Error(EngineError::IncarnationDead {
            process: 3,
            incarnation: 10,
        });
        dead.outcomes(vec![ok(), dead_answer], 1_001);
        assert_eq!(dead.announced(), None, "refused somewhere: not announced");

        let announced = DriverSettings {
            announced: true,
            ..settings()
        };
        let owner = store::transactions::Owner {
            process: 3,
            incarnation: 9,
        };
        let mut txn = Transaction::new(11, 1_000, announced);
        let write = Command::Batch(vec![Operation::Update {
            table: "t".into(),
            assignments: vec![engine::Assignment {
                column: "v".into(),
                value: Value::BigInt(1),
            }],
            predicate: Some(Predicate::equal("k", Value::BigInt(2))),
        }]);
        let Action::Send(sent) = start(&mut txn, &write, Some(vec![key(2)]), 1_000) else {
            panic!("a message")
        };
        assert_eq!(sent.kind, Kind::Statement);
        assert_eq!(sent.route, Route::Keys(vec![key(2)]));
        let statement = statement_of(&sent);
        assert_eq!(statement.owner, Some(owner));
        assert!(statement
            .locks
            .contains(&(("t".into(), None), Mode::IntentExclusive)));
        txn.outcomes(vec![ok()], 1_001);
        // Its partition refuses the incarnation: a death, and a new incarnation.
        let mut refused_here = Transaction::new(12, 1_000, announced);
        start(&mut refused_here, &read(1), Some(vec![key(1)]), 1_000);
        let dead_here = Outcome::Error(EngineError::IncarnationDead {
            process: 3,
            incarnation: 9,
        });
        let Action::Answered { ran: true, .. } =
            refused_here.outcomes(vec![dead_here.clone()], 1_001)
        else {
            panic!("answered")
        };
        assert_eq!(refused_here.incarnation_refused(), Some(9));
        // A whole-table read takes S everywhere first.
        let everything = Command::Batch(vec![Operation::Select {
            table: "t".into(),
            columns: vec![],
            predicate: None,
            limit: None,
        }]);
        let Action::Send(globalize) = start(&mut txn, &everything, None, 1_002) else {
            panic!("a message")
        };
        assert_eq!(globalize.kind, Kind::Globalize);
        let Action::Send(lock) = txn.outcomes(vec![ok()], 1_003) else {
            panic!("then its table lock")
        };
        assert_eq!((lock.kind, lock.route), (Kind::Lock, Route::Every));
    }

    /// A gateway with an incarnation sends its table locks owned by (process, incarnation).
    /// A refusal of that incarnation as dead (its process was suspected, or a newer
    /// incarnation began a transaction) fails the transaction with 40001, a death, and the
    /// gateway takes a new incarnation for its next transaction, unless another session
    /// already did.
    #[test]
    fn a_refusal_of_the_gateways_incarnation_fails_the_transaction_and_takes_a_new_one() {
        let with = |incarnation| DriverSettings {
            owner: 5,
            incarnation,
            ..settings()
        };
        let request = |transaction| LockRequest {
            transaction,
            begin_ms: 1_000,
            now_ms: 1_000,
            locks: vec![(("t".into(), None), Mode::IntentShared)],
            nowait: false,
        };
        let owner = |incarnation| store::transactions::Owner {
            process: 5,
            incarnation,
        };
        let mut txn = Transaction::new(8, 1_000, with(0xa1));
        let Action::Send(lock) = start(&mut txn, &read(1), Some(vec![key(1)]), 1_000) else {
            panic!("a message")
        };
        assert!(lock.operation == store::incarnation_lock_operation(&request(8), owner(0xa1)));
        let refused = Outcome::Error(EngineError::IncarnationDead {
            process: 5,
            incarnation: 0xa1,
        });
        assert!(dies(&refused));
        assert_eq!(incarnation_dead(&refused), Some((5, 0xa1)));
        assert_eq!(
            txn.outcomes(vec![refused.clone(), locked(3, 900)], 1_001),
            Action::Answered {
                outcomes: vec![refused.clone(), locked(3, 900)],
                ran: false
            },
            "a death: nothing waits"
        );
        assert_eq!(
            first_error(&[locked(3, 900), refused.clone()]),
            error_of(&refused)
        );
        assert_eq!(txn.incarnation_refused(), Some(0xa1));
        // The gateway's next incarnation, and its next transaction's locks.
        let next = next_incarnation(0xa1, 0xa1, 0xb2);
        assert_eq!(next, 0xb2);
        let mut again = Transaction::new(9, 1_000, with(next));
        let Action::Send(lock) = start(&mut again, &read(1), Some(vec![key(1)]), 1_000) else {
            panic!("a message")
        };
        assert!(lock.operation == store::incarnation_lock_operation(&request(9), owner(0xb2)));
        let Action::Send(statement) = again.outcomes(vec![ok()], 1_001) else {
            panic!("the statement")
        };
        assert_eq!(statement.kind, Kind::Statement);
        assert_eq!(again.incarnation_refused(), None);
        // A late refusal of the old incarnation in another session: the gateway stays on the
        // new one.
        assert_eq!(next_incarnation(0xb2, 0xa1, 0xc3), 0xb2);
        // A refusal naming another incarnation is not this transaction's.
        let mut other = Transaction::new(10, 1_000, with(0xb2));
        start(&mut other, &read(1), Some(vec![key(1)]), 1_000);
        other.outcomes(vec![refused], 1_001);
        assert_eq!(other.incarnation_refused(), None);
    }

    #[test]
    fn the_table_kv_and_a_statement_without_keys_send_nothing() {
        let mut txn = Transaction::new(7, 1_000, settings());
        let kv = Command::Batch(vec![Operation::Select {
            table: store::KV_TABLE.into(),
            columns: vec![],
            predicate: None,
            limit: None,
        }]);
        assert!(matches!(
            txn.statement::<Outcome>(&kv, Route::Every, StatementOptions::default(), 1_000),
            Err(EngineError::FeatureNotSupported { .. })
        ));
        assert_eq!(
            txn.statement::<Outcome>(
                &read(1),
                Route::Keys(Vec::new()),
                StatementOptions::default(),
                1_000
            ),
            Ok(Action::Answered {
                outcomes: Vec::new(),
                ran: true
            })
        );
        assert_eq!(txn.statements, 0);
        assert_eq!(txn.end(false), None);
        assert_eq!(txn.rollback_to(1), None);
    }

    #[test]
    fn a_statement_outside_transactions_waits_for_locks_and_decides_a_two_phase_statement_held_long(
    ) {
        let quick = DriverSettings {
            autocommit_busy_for_ms: 500,
            autocommit_decide_after_ms: 50,
            ..settings()
        };
        let mut statement = Autocommit::new(1_000, quick);
        let Action::Pause { holder, .. } = statement.outcomes(vec![locked(3, 900)], 1_000) else {
            panic!("a lock wait")
        };
        assert_eq!(holder, Some(3));
        assert!(statement.woken(Hint::Ended(3)));
        statement.resume();
        let mut now = 1_001;
        let mut decided = Vec::new();
        let mut pauses = Vec::new();
        let answer = loop {
            match statement.outcomes(vec![ok(), busy_outcome(9)], now) {
                Action::Pause {
                    until_ms,
                    abort,
                    holder,
                } => {
                    assert_eq!(holder, None);
                    if let Some(abort) = abort {
                        assert_eq!(abort.operation, store::decide_operation(9, false));
                        decided.push(now);
                    }
                    pauses.push(until_ms - now);
                    now = until_ms;
                    statement.resume();
                }
                Action::Answered { outcomes, ran } => break (outcomes, ran),
                Action::Send(_) => panic!("the caller sends the statement again"),
            }
        };
        assert_eq!(answer, (vec![ok(), busy_outcome(9)], true), "after 500 ms");
        assert!(now > 1_500);
        assert_eq!(pauses[..5], [5, 10, 20, 40, 80]);
        assert!(pauses.iter().all(|pause| *pause <= 100));
        assert!(!decided.is_empty(), "a statement held 50 ms is decided");
        assert!(decided[0] > 1_051);
        let Action::Answered { outcomes, .. } = Autocommit::new(0, quick).outcomes(vec![ok()], 0)
        else {
            panic!("answered")
        };
        assert_eq!(outcomes, vec![ok()]);
    }

    #[test]
    fn a_hint_that_arrives_while_the_message_is_in_flight_empties_the_next_pause() {
        let mut txn = Transaction::new(7, 1_000, settings());
        let first = start(&mut txn, &read(1), Some(vec![key(1)]), 1_000);
        let Action::Send(_) = granted_lock(&mut txn, first, 1_000) else {
            panic!("the statement")
        };
        // In flight: the holder ends before its refusal arrives.
        assert!(!txn.woken(Hint::Ended(3)));
        let Action::Pause { until_ms, .. } = txn.outcomes(vec![locked(3, 900)], 1_001) else {
            panic!("a lock wait")
        };
        assert_eq!(until_ms, 1_001, "no pause: its end is known");
        txn.resume(1_001);
        // Kept hints are forgotten at the pause: the next one is a full pause.
        let Action::Pause { until_ms, .. } = txn.outcomes(vec![locked(3, 900)], 1_001) else {
            panic!("a lock wait")
        };
        assert_eq!(until_ms, 1_005);
        txn.resume(1_005);
        // Another transaction's end, or none, leaves the pause as it is; a missed one empties it.
        assert!(!txn.woken(Hint::Ended(4)));
        let Action::Pause { until_ms, .. } = txn.outcomes(vec![locked(3, 900)], 1_005) else {
            panic!("a lock wait")
        };
        assert_eq!(until_ms, 1_013);
        txn.resume(1_013);
        assert!(!txn.woken(Hint::Missed));
        let Action::Pause { until_ms, .. } = txn.outcomes(vec![locked(3, 900)], 1_013) else {
            panic!("a lock wait")
        };
        assert_eq!(until_ms, 1_013);
    }
}
