//! Interactive SQL transactions at a partition (Sprint §4, `docs/internals/sprint.md`).
//!
//! A transaction's statements reach the partitions holding their rows (the router bypass for
//! one, one E-Cast message for several), each stamped with the transaction's id and the
//! gateway's clock. A statement pinned to one placement key carries its table's intention
//! lock (IS, IX) to its partition with its row locks: multiple-granularity locking needs the
//! intention only where the rows are (`Holding::intentions_here`). Any other table lock (S,
//! SIX, X: a statement over the whole table, or over several keys), and a transaction's first
//! table lock until its gateway's incarnation is current everywhere, is taken first at every
//! partition with one E-Cast message (`LockRequest`), so a statement refused for a lock is
//! refused by every partition it reaches, having run nowhere; the gateway sends it again. At
//! each partition a statement:
//!
//! 1. takes table locks (already held, after the lock message) under strict two-phase locking: shared for the tables it reads,
//!    exclusive for those it writes, held until the transaction ends. A lock another
//!    transaction holds in a conflicting mode is waited for (the partition answers
//!    `TransactionLocked`, nothing ran, the gateway retries) and the wait is recorded in the
//!    partition's waits-for graph, unless it would close a cycle there (local deadlock
//!    detection) or make a global transaction wait, directly or through local ones, for a
//!    global one numbered after it (Sprint's execution-order rule, §4.1): then the requester
//!    dies (`SerializationFailure`, 40001). A transaction becomes global when it reaches a
//!    second partition: its gateway sends `Globalize` to every partition in one message and
//!    each numbers it on delivery (`globalize`), so the numbers order global transactions
//!    alike everywhere, and no cycle of waits spans partitions
//!    (`docs/internals/sprint.md`, "Waits, deadlocks and the execution-order rule").
//!    Row-lock requests queue in log order (`Transactions::queue`): a request conflicting with
//!    an earlier waiter's row lock waits behind it (an edge in the same graph), so shared
//!    locks no longer overtake a waiting exclusive one;
//! 2. keeps the before-image of every row its writes may change, the first time it changes
//!    it (`engine::undo`), and writes in place;
//! 3. runs, and for a write keeps its outcome under the statement's number, so that the same
//!    statement sent again (another partition of the same message refused it, and the gateway
//!    retries the whole message) answers that outcome instead of running twice.
//!
//! The end of a transaction (`end_operation`) is one E-Cast message to every partition, at one
//! point of the global order: commit forgets the before-images, abort writes them back; both
//! release the locks. A partition never ends a transaction on its own: partitions are
//! replicated groups that do not lose a transaction's state, so every partition holding it
//! ends it at the same point of the order, the same way, and no votes are needed (Sprint
//! gathers votes because its data servers are single processes that may fail). A gateway
//! that dies leaves its transactions open; one whose statements wait for such a transaction
//! idle for long aborts it, with the same ordered message (`runtime::ecast::sql`).
//!
//! Statements outside transactions (autocommit) respect the locks: a write to a table any
//! transaction has locked, or a read of a table one has locked exclusively (its rows hold
//! uncommitted values), is refused with `TransactionLocked` and retried by its gateway.
//!
//! When Rubberband moves part of a partition's rows, the before-images of the moved rows, and
//! every lock, travel with them (`copy_where` for the copy sent and the part kept, `absorb`): the receiving group
//! then ends the transaction with the same message as everyone else. Table locks granted at
//! two partitions over their own rows may conflict once an absorb joins them (a whole-table
//! read's S here, a writer's IX that came with its rows): neither holder goes on under its
//! lock until the other ends (`admit_queued` judges a held table lock again).
//!
//! An abort by another gateway leaves a tombstone at every partition, seen there or not: a
//! transaction may reach a partition for the first time after it (`Transactions::end`).

use engine::table::{Key, Row};
use engine::{EngineError, Operation, Predicate, TableSchema, Value};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// What a lock is on: a table (`None`), or the rows of one partition key value of a table
/// (`Some(placement key)`, `rows::placement_key`), which also covers that value's absence (an
/// insert of it conflicts with a read that found nothing).
pub type Resource = (String, Option<Vec<u8>>);

/// How a transaction holds a resource: multiple-granularity locking (Gray et al.). A
/// statement pinned to partition keys takes an intention lock on the table (IS to read, IX to
/// write) and S or X on the rows of its keys; any other statement takes S or X on the table.
/// Rows only take `Shared` and `Exclusive`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    IntentShared,
    IntentExclusive,
    Shared,
    /// S and IX together (a transaction that read the whole table, then wrote rows of it).
    SharedIntentExclusive,
    Exclusive,
    /// On one column of one row (`column_paths`): the holder only adds constants to it
    /// (`blind_increments`), without reading it. Increments commute, so two holders do not
    /// conflict; a read or any other write does. An abort undoes its holder's increments by
    /// subtracting them (`Transaction::increments`), never by an image, which would erase
    /// the other holders' (Korth's increment locks; `docs/internals/sprint.md`).
    Increment,
    /// An update intent on a row or key prefix (`with_update_intent`): reads it as S does
    /// and is compatible with S and IS readers, but not with another update intent or any
    /// write, so two transactions that read before they write wait for each other instead of
    /// both converting to a write (a deadlock). Joined with IX it is SIX.
    Update,
}

impl Mode {
    /// The compatibility matrix of multiple-granularity locking.
    pub fn conflicts(self, other: Mode) -> bool {
        use Mode::*;
        !matches!(
            (self, other),
            (
                IntentShared,
                IntentShared | IntentExclusive | Shared | SharedIntentExclusive | Update
            ) | (IntentExclusive, IntentShared | IntentExclusive)
                | (Shared, IntentShared | Shared | Update)
                | (Update, IntentShared | Shared)
                | (SharedIntentExclusive, IntentShared)
                | (Increment, Increment)
        )
    }

    /// The weakest mode that grants both.
    pub fn join(self, other: Mode) -> Mode {
        use Mode::*;
        match (self, other) {
            (a, b) if a == b => a,
            (Exclusive, _) | (_, Exclusive) => Exclusive,
            // Anything else on a column an increment holds reads or writes it: exclusive.
            (Increment, _) | (_, Increment) => Exclusive,
            (Update, IntentExclusive) | (IntentExclusive, Update) => SharedIntentExclusive,
            (SharedIntentExclusive, _) | (_, SharedIntentExclusive) => SharedIntentExclusive,
            (IntentExclusive, Shared) | (Shared, IntentExclusive) => SharedIntentExclusive,
            (Update, Shared) | (Shared, Update) => Update,
            (IntentShared, b) => b,
            (a, IntentShared) => a,
            (a, b) => unreachable!("every pair is covered: {a:?} {b:?}"),
        }
    }

    /// Whether holding `self` grants `wanted`.
    pub fn covers(self, wanted: Mode) -> bool {
        self.join(wanted) == self
    }

    /// Whether the mode lets its holder write (some of) the resource.
    /// IS or IX: an intention on a table, taken where its rows are locked.
    pub fn is_intention(self) -> bool {
        matches!(self, Mode::IntentShared | Mode::IntentExclusive)
    }

    pub fn writes(self) -> bool {
        matches!(
            self,
            Mode::IntentExclusive | Mode::SharedIntentExclusive | Mode::Exclusive | Mode::Increment
        )
    }
}

/// One open transaction's state at this partition.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Transaction {
    /// When its gateway began it (ms). Informational: no lock decision depends on it.
    pub begin_ms: u64,
    /// The latest gateway stamp of its statements here (ms), admitted or refused (a
    /// transaction that waits is not idle).
    pub last_ms: u64,
    /// What it holds, and how.
    pub locks: BTreeMap<Resource, Mode>,
    /// The rows its writes changed here, as they were before (`None`: the row did not exist).
    /// For a row in `written`, only the image's values of those columns are its own.
    pub undo: BTreeMap<(String, Key), Option<Row>>,
    /// The rows it changed only by UPDATEs, with the columns those assigned (in schema
    /// order): an abort writes back only these columns of the row (`Undo`), each as it was
    /// before the transaction's first write *of that column*. Under column locks
    /// (`column_paths`) other transactions may change the row's other columns meanwhile, and
    /// commit: a whole-row image written back would undo their writes (a lost update). A row
    /// it inserted or deleted is written back whole (it held the whole row).
    pub written: BTreeMap<(String, Key), Vec<usize>>,
    /// The last write statement run here (its number) and the outcome it answered.
    pub last_write: Option<(u64, Vec<u8>)>,
    /// The highest statement number admitted here: a statement with a lower number is an
    /// attempt its gateway gave up on (it sent the statement again and went on), delivered
    /// late, and is refused (`Store`'s `run_transaction`), never run after its successors.
    pub statement: u64,
    /// Savepoints' undo, in the order recorded: (savepoint id, row, the row as it was when a
    /// statement under that savepoint first changed it). `rollback_to(s)` writes back the
    /// entries of ids ≥ s, newest first, so each row ends as it was when savepoint s was
    /// taken. A row gets an entry under savepoint c only if it has none under an id ≥ c (an
    /// entry under a later, released savepoint is older and serves c too).
    /// The columns of an entry, as in `written` (`None`: the whole row).
    pub savepoint_undo: Vec<SavepointUndo>,
    /// The columns it only incremented (under `Mode::Increment`, outside savepoints), each with
    /// the sum of its increments of that row (a `Value::Numeric`, exact): an abort subtracts
    /// the sum from the value then (other holders' increments stay). Such a column is not among
    /// the row's `written` columns; a later write of it that is not an increment makes it one
    /// (`remember`).
    #[serde(default)]
    pub increments: BTreeMap<(String, Key), Vec<(usize, Value)>>,
}

/// One entry of a transaction's savepoint undo: the savepoint id, the row, its image, and the
/// columns of the image that are its own (`None`: the whole row), as `Transaction::written`.
pub type SavepointUndo = (u32, (String, Key), Option<Row>, Option<Vec<usize>>);

/// A before-image to write back and which of its columns (`None`: the whole row).
pub type Undo = (engine::undo::BeforeImage, Option<Vec<usize>>);

/// Folds a newer image of a row into a transaction's image of it (`remember`): the columns the
/// new statement assigns that the image does not own yet take their values from the newer
/// image (as they were just before this first write of them); a statement that takes the
/// whole row (`None`) makes the image whole, its other columns as they are now (nobody else
/// can change them while it holds the row). Returns the columns owned afterwards.
fn fold_image(
    image: &mut Option<Row>,
    owned: Option<Vec<usize>>,
    newer: &Option<Row>,
    columns: Option<&[usize]>,
) -> Option<Vec<usize>> {
    let mut owned = owned?; // Whole already: the first image stands.
    let (Some(row), Some(newer)) = (image.as_mut(), newer.as_ref()) else {
        return None; // A row that did not exist (or no longer does): whole.
    };
    assert_eq!(row.len(), newer.len(), "images of one row of one schema");
    match columns {
        Some(columns) => {
            for &column in columns {
                if !owned.contains(&column) {
                    row[column] = newer[column].clone();
                    owned.push(column);
                }
            }
            owned.sort_unstable();
            Some(owned)
        }
        None => {
            for (column, value) in row.iter_mut().enumerate() {
                if !owned.contains(&column) {
                    *value = newer[column].clone();
                }
            }
            None
        }
    }
}

impl Transaction {
    /// Its undo, to write back on an abort: each row's image and the columns of it that are
    /// the transaction's own (`written`; `None`: the whole row).
    pub fn into_undo(mut self) -> Vec<Undo> {
        self.undo
            .into_iter()
            .map(|((table, key), before)| {
                let columns = self.written.remove(&(table.clone(), key.clone()));
                ((table, key, before), columns)
            })
            .collect()
    }
}

/// The transactions open at this partition, by id.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Transactions {
    open: BTreeMap<u64, Transaction>,
    /// Transactions aborted by another gateway (they idled while blocking it) and not ended
    /// by their own gateway yet: a later statement of theirs is refused (40001), never run as
    /// the start of a new transaction under the same id. At most `ABORTED_MAX`, the lowest
    /// ids forgotten first.
    aborted: std::collections::BTreeSet<u64>,
    /// Transactions their own gateway ended here (committed or rolled back), the most recent
    /// `ENDED_MAX`: a message of theirs delivered after the end (an attempt the gateway sent
    /// again and gave up on, ordered late) is refused, never taken for the start of the
    /// transaction, whose locks nobody would release and whose write would be applied twice
    /// (found by the simulator, seed 1341: a late UPDATE of a committed transfer re-opened it
    /// at one partition and an abandonment wrote back its image over a later commit).
    ended: Recent<u64, ENDED_MAX>,
    /// The waits-for graph here (replicated state, changed in log order): for each
    /// transaction whose last request here was refused for other transactions' locks, those
    /// transactions. Replaced on each refusal, removed when it is admitted or ends; an ended
    /// transaction is removed from every set. Never holds a cycle (`admit_as` refuses the
    /// request that would close one).
    waits: BTreeMap<u64, BTreeSet<u64>>,
    /// Global transactions (Sprint §4.1) and their sequence numbers here, in the order their
    /// `Globalize` was delivered: every partition delivers every `Globalize` at its point of
    /// the global order, so the numbers order global transactions alike everywhere.
    globals: BTreeMap<u64, u64>,
    /// The next global sequence number.
    global_next: u64,
    /// The fair lock queue of row locks (replicated state, changed in log order): each
    /// transaction whose last request here was refused while it wanted row locks, with those
    /// locks and its place (table locks do not queue: see `admit_queued`). A later request
    /// that conflicts with an earlier waiter's is refused too (it waits behind it: an edge in
    /// `waits`), unless it cannot delay that waiter or waiting behind it would kill it
    /// (`goes_ahead`). Left when the transaction is admitted, dies, asks without waiting
    /// (NOWAIT), moves on (`stop_waiting`) or ends.
    queue: BTreeMap<u64, Waiting>,
    /// The next place in the queue: places grow in log order.
    arrival_next: u64,
    /// Statements refused to wait in the queue whose gateway waits for their grant
    /// (`TransactionStatement::await_grant`), by transaction: the partition runs each when
    /// its turn comes (`store::Store`'s grants), instead of the gateway sending it again. At
    /// most one per transaction (its gateway sends one statement at a time); let go (answered
    /// with its refusal) when its transaction's next message of any kind arrives here, or
    /// at a keyspace cut. Not copied by `copy_where`: a parked statement's reply goes
    /// through the group that logged it.
    parked: BTreeMap<u64, Parked>,
    /// The next parking ticket: tickets grow in log order.
    ticket_next: u64,
    /// Each transaction's owner: the storage process whose gateway runs it (Sprint's edge
    /// server) and that gateway's incarnation, recorded when its first owned message executes
    /// here (`own`: the first table lock, sent to every partition) and forgotten at its end.
    /// A suspicion of that process aborts every transaction it owns (`owned_by`,
    /// `store::abort_owned_operation`), and so does a newer incarnation's first table lock
    /// (`incarnations`). Replicated state, changed in log order, moved with the rest by
    /// Rubberband. Invariant: every owner here is its process's current incarnation.
    owners: BTreeMap<u64, Owner>,
    /// What this partition knows of each storage process's gateway incarnations (the current
    /// one and the dead ones): replicated state, changed in log order by owned table locks and
    /// suspicions, both sent to every partition in one E-Cast message, moved with copies and
    /// kept across `forget_open`.
    incarnations: Incarnations,
}

/// Whose a transaction is: the storage process whose gateway runs it, and the incarnation of
/// that gateway (a value new at every gateway start, and again after the gateway learns it
/// was taken for dead: `engine::EngineError::IncarnationDead`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Owner {
    /// The storage process id (never 0).
    pub process: u64,
    /// The gateway's incarnation (0: a gateway that names none, the old `TAG_LOCK_OWNED`).
    pub incarnation: u64,
}

/// Most dead incarnations remembered (`Incarnations::dead`), over every process.
pub const DEAD_INCARNATIONS_MAX: usize = 4096;

/// Each storage process's gateway incarnations as this partition has seen them, in log
/// order (`docs/internals/sprint.md`, "A gateway restarted before it is suspected"):
///
/// - a table lock owned by a dead incarnation is refused (`IncarnationDead`);
/// - one owned by another incarnation than the current one supersedes it (a process runs one
///   gateway at a time): the current one's transactions are aborted, it is dead;
/// - a suspicion of the process aborts its transactions and its current incarnation is dead,
///   and so is every incarnation of it up to the suspicion's bound (`dead_through`): the
///   incarnations that started before the process was taken for dead, among them one that
///   crashed before any partition adopted it, whose first table lock may still be on its way.
///   Incarnations are ordered per process (the runtime's are its gateway's start time in µs,
///   the simulator's a counter).
///
/// Every partition meets these messages at the same points of the global order, so every
/// partition holds the same state at each point; a partition out of the ring falls behind
/// and catches up by `absorb`, where the side that saw more changes of a process wins.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Incarnations {
    /// Per process: its current incarnation (`None`: none since its suspicion, or never
    /// seen) and how many times its current incarnation changed here (ordered: a copy that
    /// saw more changes is ahead). Invariant: a current incarnation is never dead.
    processes: BTreeMap<u64, (Option<u64>, u64)>,
    /// Incarnations suspected or superseded, the most recent `DEAD_INCARNATIONS_MAX` (the
    /// oldest forgotten first).
    dead: Recent<Owner, DEAD_INCARNATIONS_MAX>,
    /// Per process: every incarnation up to this one (not 0, which is never judged) is dead,
    /// the highest bound its suspicions gave.
    dead_through: BTreeMap<u64, u64>,
}

impl Incarnations {
    /// Whether `owner`'s incarnation is known dead here.
    pub fn is_dead(&self, owner: Owner) -> bool {
        self.dead.contains(owner)
            || (owner.incarnation != 0
                && self
                    .dead_through
                    .get(&owner.process)
                    .is_some_and(|through| owner.incarnation <= *through))
    }

    /// The current incarnation of `process` here, if any.
    pub fn current(&self, process: u64) -> Option<u64> {
        self.processes
            .get(&process)
            .and_then(|(current, _)| *current)
    }

    fn bury(&mut self, owner: Owner) {
        self.dead.insert(owner);
    }

    /// `owner` (not dead) becomes its process's current incarnation; returns the incarnation
    /// it supersedes, now dead.
    fn adopt(&mut self, owner: Owner) -> Option<u64> {
        assert!(
            !self.is_dead(owner),
            "a dead incarnation is refused, never adopted"
        );
        let entry = self.processes.entry(owner.process).or_insert((None, 0));
        if entry.0 == Some(owner.incarnation) {
            return None;
        }
        let superseded = entry.0.replace(owner.incarnation);
        entry.1 += 1;
        if let Some(incarnation) = superseded {
            self.bury(Owner {
                process: owner.process,
                incarnation,
            });
        }
        superseded
    }

    /// A suspicion of `process`: its current incarnation, if any, is dead, and every one up
    /// to `through` (0: no bound, the old suspicion).
    fn suspect(&mut self, process: u64, through: u64) -> Option<u64> {
        if through != 0 {
            let bound = self.dead_through.entry(process).or_insert(0);
            *bound = (*bound).max(through);
        }
        let entry = self.processes.get_mut(&process)?;
        let current = entry.0.take()?;
        entry.1 += 1;
        self.bury(Owner {
            process,
            incarnation: current,
        });
        Some(current)
    }

    /// Takes in another partition's copy. Both saw the same E-Cast order, one of them up to a
    /// later point (a partition out of the ring sees none of these messages): the dead sets
    /// are joined, and for each process the side that saw more changes gives the current
    /// incarnation (equal counts: the same messages, the same incarnation), unless the joined
    /// dead set holds it.
    fn absorb(&mut self, other: Incarnations) {
        for owner in other.dead.order {
            self.bury(owner);
        }
        for (process, through) in other.dead_through {
            let bound = self.dead_through.entry(process).or_insert(0);
            *bound = (*bound).max(through);
        }
        for (process, (current, changes)) in other.processes {
            let here = self.processes.entry(process).or_insert((None, 0));
            if changes > here.1 {
                *here = (current, changes);
            }
        }
        let dead: Vec<u64> = self
            .processes
            .iter()
            .filter_map(|(process, (current, _))| {
                let incarnation = (*current)?;
                self.is_dead(Owner {
                    process: *process,
                    incarnation,
                })
                .then_some(*process)
            })
            .collect();
        for process in dead {
            self.processes.get_mut(&process).expect("listed").0 = None;
        }
    }

    fn assert_current_not_dead(&self) {
        for (process, (current, _)) in &self.processes {
            if let Some(incarnation) = *current {
                assert!(
                    !self.is_dead(Owner {
                        process: *process,
                        incarnation
                    }),
                    "a current incarnation is never dead"
                );
            }
        }
    }
}

/// A statement waiting at the partition for its grant (`Transactions::parked`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Parked {
    /// Its ticket (given in log order), by which the partition's host answers it.
    pub ticket: u64,
    /// The statement (`TransactionStatement`'s encoding, the body of its store operation).
    #[serde(with = "wire::bytes")]
    pub statement: Vec<u8>,
    /// The refusal it was answered with (`engine::Outcome`'s encoding): its answer if it is
    /// let go.
    #[serde(with = "wire::bytes")]
    pub refusal: Vec<u8>,
    /// The host's bytes for the reply (`Store::set_parked_reply`), handed back with the
    /// answer.
    #[serde(with = "wire::bytes")]
    pub reply: Vec<u8>,
}

/// A refused request waiting its turn in the lock queue (`Transactions::queue`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Waiting {
    /// Its place: refused requests are numbered in log order; the same request sent again
    /// keeps its place, a different one takes a new place at the end.
    pub arrival: u64,
    /// The row locks it waits for (those its transaction does not hold yet).
    pub locks: Vec<(Resource, Mode)>,
    /// The stamp of its latest try (ms): a waiter that tries again is not idle.
    pub last_ms: u64,
}

/// Most tombstones of transactions aborted by others (`Transactions::aborted`).
pub const ABORTED_MAX: usize = 4096;

/// Most tombstones of transactions ended by their own gateways (`Transactions::ended`).
pub const ENDED_MAX: usize = 16_384;

/// The most recent `MAX` distinct items by arrival, oldest forgotten first, with a set to look
/// them up: transaction ids ended by their gateways (ids of different gateways do not grow
/// together, so the lowest id is not the oldest), dead gateway incarnations. Serialised as the
/// arrival order alone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    from = "std::collections::VecDeque<T>",
    into = "std::collections::VecDeque<T>",
    bound(
        serialize = "T: Serialize + Ord + Copy",
        deserialize = "T: Deserialize<'de> + Ord + Copy"
    )
)]
struct Recent<T: Ord + Copy, const MAX: usize> {
    order: std::collections::VecDeque<T>,
    items: BTreeSet<T>,
}

impl<T: Ord + Copy, const MAX: usize> Default for Recent<T, MAX> {
    fn default() -> Recent<T, MAX> {
        Recent {
            order: std::collections::VecDeque::new(),
            items: BTreeSet::new(),
        }
    }
}

impl<T: Ord + Copy, const MAX: usize> Recent<T, MAX> {
    fn contains(&self, item: T) -> bool {
        self.items.contains(&item)
    }

    fn insert(&mut self, item: T) {
        if self.items.insert(item) {
            self.order.push_back(item);
        }
        while self.order.len() > MAX {
            let oldest = self.order.pop_front().expect("longer than the bound");
            self.items.remove(&oldest);
        }
        debug_assert_eq!(self.order.len(), self.items.len());
    }

    fn len(&self) -> usize {
        self.order.len()
    }
}

impl<T: Ord + Copy, const MAX: usize> From<std::collections::VecDeque<T>> for Recent<T, MAX> {
    fn from(order: std::collections::VecDeque<T>) -> Recent<T, MAX> {
        // Received bytes: duplicates and excess are dropped, never trusted.
        let mut recent = Recent::default();
        for item in order {
            recent.insert(item);
        }
        recent
    }
}

impl<T: Ord + Copy, const MAX: usize> From<Recent<T, MAX>> for std::collections::VecDeque<T> {
    fn from(recent: Recent<T, MAX>) -> std::collections::VecDeque<T> {
        recent.order
    }
}

/// A statement of a transaction, as the operation carries it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TransactionStatement {
    pub transaction: u64,
    /// The statement's number within its transaction (from 1).
    pub statement: u64,
    pub begin_ms: u64,
    /// The gateway's clock when it sent the statement.
    pub now_ms: u64,
    /// The locks it needs (`locks_needed`, with the placement keys the gateway routed it by).
    pub locks: Vec<(Resource, Mode)>,
    /// NOWAIT: a lock another transaction holds fails the statement (`admit_as`).
    pub nowait: bool,
    /// `engine::Command::encode`.
    #[serde(with = "wire::bytes")]
    pub command: Vec<u8>,
    /// The innermost savepoint open in the block when the statement was sent (ids grow
    /// within a transaction, from 1); 0: none.
    pub savepoint: u32,
    /// `SELECT … FOR UPDATE | SHARE SKIP LOCKED`: `locks` hold the table intention only; the
    /// partition leaves out the rows others hold and locks those it returns
    /// (`plan_skip_locked`, `Store`'s `skip_locked_read`).
    pub skip_locked: bool,
    /// The gateway waits for the grant: a statement refused to wait in the row-lock queue
    /// is parked (`Transactions::parked`) and run by the partition when its turn comes, its
    /// answer sent as the reply to this message (`docs/internals/sprint.md`, "Grants at the
    /// partition"); otherwise (and where the partition's host cannot defer the reply) the
    /// refusal is answered at once and the gateway sends the statement again.
    pub await_grant: bool,
    /// The gateway that sent it (`Owner`), if it names one: recorded as the transaction's
    /// owner here when this is its first owned message here (`Transactions::own`). Unlike an
    /// owned table lock, a statement never changes the process's incarnations (it reaches
    /// one partition, not every one at one point of the order): one whose incarnation is not
    /// the current one here is refused (`EngineError::IncarnationDead`), so its gateway takes
    /// a new incarnation and announces it with a table lock to every partition
    /// (`docs/internals/sprint.md`, "Intention locks where the rows are").
    pub owner: Option<Owner>,
}

/// A transaction's request for table locks at every partition (`lock_operation`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockRequest {
    pub transaction: u64,
    pub begin_ms: u64,
    pub now_ms: u64,
    pub locks: Vec<(Resource, Mode)>,
    /// NOWAIT (`admit_as`).
    pub nowait: bool,
}

/// What the lock step decided.
#[derive(Debug, PartialEq)]
pub enum Admission {
    /// Every lock is held: run.
    Run,
    /// Nothing ran, nothing was taken: answer this error.
    Refused(EngineError),
}

impl Transactions {
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    pub fn len(&self) -> usize {
        self.open.len()
    }

    /// The ids of the open transactions, in order.
    /// Whether no transaction is open here.
    pub fn is_idle(&self) -> bool {
        self.open.is_empty()
    }

    pub fn open_ids(&self) -> Vec<u64> {
        self.open.keys().copied().collect()
    }

    pub fn get(&self, id: u64) -> Option<&Transaction> {
        self.open.get(&id)
    }

    pub fn get_mut(&mut self, id: u64) -> Option<&mut Transaction> {
        self.open.get_mut(&id)
    }

    /// Takes the locks `needed` for transaction `id` (created here if new), or refuses them
    /// all. A transaction holding one in a conflicting mode makes `id` wait (strict two-phase
    /// locking: `TransactionLocked`, and the edges `id` → holders in the waits-for graph),
    /// unless waiting would close a cycle here (a deadlock) or break the execution-order rule
    /// (a global transaction waiting, directly or through local ones, for a global one
    /// numbered after it): then `id` dies (`SerializationFailure`). A prepared two-phase
    /// statement holding a table blocks every lock on it, reads included
    /// (`held_by_statement`): it writes the table at its commit.
    pub fn admit(
        &mut self,
        id: u64,
        begin_ms: u64,
        now_ms: u64,
        needed: &[(Resource, Mode)],
        held_by_statement: impl Fn(&str) -> Option<u64>,
    ) -> Admission {
        self.admit_as(id, (begin_ms, now_ms), needed, held_by_statement, false)
    }

    /// `admit`; with `nowait` (`SELECT … FOR UPDATE NOWAIT`) a conflicting holder (or an
    /// earlier waiter it would have to wait behind) makes the statement fail as a wait would
    /// (`TransactionLocked`) without waiting (no edge, no place in the queue).
    pub fn admit_as(
        &mut self,
        id: u64,
        stamps: (u64, u64),
        needed: &[(Resource, Mode)],
        held_by_statement: impl Fn(&str) -> Option<u64>,
        nowait: bool,
    ) -> Admission {
        self.admit_queued(id, stamps, needed, held_by_statement, nowait, true)
    }

    /// Takes locks no other transaction holds for `id`, whatever waits for them (SKIP LOCKED's
    /// rows, chosen as held by no one: `held_by_other`). Refused like a NOWAIT request if one
    /// is held after all.
    pub fn admit_unqueued(&mut self, id: u64, needed: &[(Resource, Mode)]) -> Admission {
        self.admit_queued(id, (0, 0), needed, |_| None, true, false)
    }

    fn admit_queued(
        &mut self,
        id: u64,
        (begin_ms, now_ms): (u64, u64),
        needed: &[(Resource, Mode)],
        held_by_statement: impl Fn(&str) -> Option<u64>,
        nowait: bool,
        queued: bool,
    ) -> Admission {
        if self.ended.contains(id) {
            return Admission::Refused(ended_refusal());
        }
        if self.aborted.contains(&id) {
            return Admission::Refused(EngineError::SerializationFailure {
                reason: "the transaction's abort: it held locks another statement waited for while it was idle, or its gateway's storage process was suspected".into(),
            });
        }
        let mine = self.open.get(&id);
        // The locks it lacks: only those are waited for, each resource once (its modes
        // joined), in the order of first need. A long request is indexed, not searched: a
        // statement of a COPY cut into a transaction needs a lock per row (10,000), and a
        // search of the list per lock cost 85 % of the storage processes' CPU while loading.
        // A short one (TPC-C's: a few locks) is searched, which allocates nothing.
        let mut wanted: Vec<(Resource, Mode)> = Vec::new();
        // Table locks it holds and needs again: checked too (below), never taken again.
        let mut held_tables: Vec<(&Resource, Mode)> = Vec::new();
        let mut index: Option<BTreeMap<&Resource, usize>> =
            (needed.len() > WANTED_SEARCHED_MAX).then(BTreeMap::new);
        for (resource, mode) in needed {
            if mine
                .and_then(|me| me.locks.get(resource))
                .is_some_and(|held| held.covers(*mode))
            {
                if resource.1.is_none() {
                    held_tables.push((resource, *mode));
                }
                continue;
            }
            let known = match &index {
                Some(index) => index.get(resource).copied(),
                None => wanted.iter().position(|(known, _)| known == resource),
            };
            match known {
                Some(at) => wanted[at].1 = wanted[at].1.join(*mode),
                None => {
                    if let Some(index) = index.as_mut() {
                        index.insert(resource, wanted.len());
                    }
                    wanted.push((resource.clone(), *mode));
                }
            }
        }
        let mut holders = BTreeSet::new();
        let mut first: Option<(String, u64)> = None;
        // A table lock it holds that conflicts with another holder's: an absorb joined them
        // (`absorb_conflicts`). Each was granted over its own partition's rows; the rows are
        // together now, so neither may go on under it until the other ends.
        for (resource, mode) in &held_tables {
            for (other_id, other) in &self.open {
                if *other_id != id
                    && other
                        .locks
                        .get(*resource)
                        .is_some_and(|held| held.conflicts(*mode))
                {
                    holders.insert(*other_id);
                    first.get_or_insert((resource.0.clone(), *other_id));
                }
            }
        }
        for (resource, mode) in &wanted {
            let table = &resource.0;
            // A prepared statement's commit writes its tables whatever locks are held there
            // (`prepared`), so it is an exclusive table lock until its decision: a read lock
            // taken meanwhile would see the table change under it (a block's two reads of it
            // differ, or a read-modify-write loses the statement's update). Row locks too: a
            // transaction that already held the table when the statement was prepared (its
            // vote judged only the rows the statement pins, `pinned_blocker`) takes no new row
            // of it until the decision; the rows it holds the statement does not touch.
            if let Some(statement) = held_by_statement(table) {
                return Admission::Refused(EngineError::Busy {
                    table: table.clone(),
                    statement,
                });
            }
            for (other_id, other) in &self.open {
                if *other_id == id
                    || !other
                        .locks
                        .get(resource)
                        .is_some_and(|held| held.conflicts(*mode))
                {
                    continue;
                }
                holders.insert(*other_id);
                first.get_or_insert((table.clone(), *other_id));
            }
        }
        // The earlier waiters it would overtake: it waits behind them (no overtaking), in
        // their order.
        // Only row locks queue: a table lock is refused and asked for again, whether it went
        // to every partition (granted alike everywhere, which a queue judged on each
        // partition's own waiters and graph would break) or came with a statement.
        let rows_wanted: Vec<(Resource, Mode)> = wanted
            .iter()
            .filter(|(resource, _)| resource.1.is_some())
            .cloned()
            .collect();
        let place = self
            .queue
            .get(&id)
            .filter(|waiting| waiting.locks == rows_wanted)
            .map(|waiting| waiting.arrival);
        let mut ahead: Vec<(u64, u64, String)> = Vec::new();
        if queued {
            for (waiter, waiting) in &self.queue {
                if *waiter == id || place.is_some_and(|place| waiting.arrival > place) {
                    continue;
                }
                let Some(((table, _), _)) = first_conflict(&rows_wanted, &waiting.locks) else {
                    continue;
                };
                if !self.goes_ahead(id, *waiter, &waiting.locks) {
                    ahead.push((waiting.arrival, *waiter, table.clone()));
                }
            }
            ahead.sort();
        }
        if let Some(me) = self.open.get_mut(&id) {
            me.last_ms = me.last_ms.max(now_ms);
        }
        let blocker = first.map(|(table, holder)| (table, holder, self.open[&holder].last_ms));
        let blocker = blocker.or_else(|| {
            ahead.first().map(|(_, waiter, table)| {
                let waiting = &self.queue[waiter];
                let stamp = self.open.get(waiter).map_or(0, |open| open.last_ms);
                (table.clone(), *waiter, waiting.last_ms.max(stamp))
            })
        });
        let Some((table, named, last_ms)) = blocker else {
            self.waits.remove(&id);
            self.queue.remove(&id);
            let entry = self.open.entry(id).or_insert(Transaction {
                begin_ms,
                last_ms: now_ms,
                ..Transaction::default()
            });
            for (resource, mode) in &wanted {
                let held = entry.locks.entry(resource.clone()).or_insert(*mode);
                *held = held.join(*mode);
            }
            self.assert_granted(id, &wanted);
            return Admission::Run;
        };
        let locked = EngineError::TransactionLocked {
            table: table.clone(),
            transaction: named,
            last_ms,
        };
        if nowait {
            self.waits.remove(&id);
            self.queue.remove(&id);
            return Admission::Refused(locked);
        }
        holders.extend(ahead.iter().map(|(_, waiter, _)| *waiter));
        self.waits.insert(id, holders);
        if let Some(refusal) = self.wait_refusal(id, &table) {
            self.waits.remove(&id);
            self.queue.remove(&id);
            return Admission::Refused(refusal);
        }
        if rows_wanted.is_empty() {
            // It waits for table locks only: no place in the queue.
            self.queue.remove(&id);
        } else {
            let arrival = place.unwrap_or_else(|| {
                let arrival = self.arrival_next;
                self.arrival_next += 1;
                arrival
            });
            self.queue.insert(
                id,
                Waiting {
                    arrival,
                    locks: rows_wanted,
                    last_ms: now_ms,
                },
            );
        }
        self.assert_queue();
        Admission::Refused(locked)
    }

    /// Whether transaction `id` is granted ahead of the earlier `waiter` (which waits for
    /// `locks`) although their requests conflict:
    ///
    /// - `id` already holds a lock that conflicts with one `waiter` waits for: `waiter` waits
    ///   for `id`'s end anyway, and granting `id` more cannot delay it (an upgrade: S held, X
    ///   wanted while another waits for X);
    /// - waiting behind `waiter` would close a cycle (`waiter` already waits, through others,
    ///   for `id`) or break the execution-order rule (a global `id`, or one a global waits for
    ///   through locals, behind a global numbered after it): `id` would die of a queue edge
    ///   alone. It goes ahead instead, as Sprint's order of global transactions says; `waiter`
    ///   then waits for it as a holder, an edge the rule allows. A local `waiter` counts as
    ///   numbered after every global (it would be, if it became global while `id` waited
    ///   behind it: TPC-C's Payment waits for the warehouse row while local, and New-Orders,
    ///   already global, queued behind it died when it became global).
    ///
    /// Granting makes no edge, so going ahead never hides a cycle; it only gives up fairness,
    /// and only towards transactions that `waiter` waits for already or that Sprint orders
    /// first (finitely many: later globals are numbered after it).
    fn goes_ahead(&self, id: u64, waiter: u64, locks: &[(Resource, Mode)]) -> bool {
        if let Some(me) = self.open.get(&id) {
            if locks.iter().any(|(resource, mode)| {
                me.locks
                    .get(resource)
                    .is_some_and(|held| held.conflicts(*mode))
            }) {
                return true;
            }
        }
        if self.reaches(waiter, id) {
            return true;
        }
        let upstream: Vec<u64> = match self.globals.contains_key(&id) {
            true => vec![id],
            false => self.globals_reaching(id),
        };
        if !upstream.is_empty() && !self.globals.contains_key(&waiter) {
            // A local waiter may yet become global, numbered after every global there is:
            // the queue edge would then break the rule, and `id` (or the global behind it)
            // would die. Sprint orders it first: it goes ahead.
            return true;
        }
        let downstream: Vec<u64> = match self.globals.contains_key(&waiter) {
            true => vec![waiter],
            false => self.globals_reached(waiter),
        };
        upstream.iter().any(|before| {
            downstream
                .iter()
                .any(|after| self.globals[before] < self.globals[after])
        })
    }

    /// A grant conflicts with no other transaction's granted lock.
    fn assert_granted(&self, id: u64, granted: &[(Resource, Mode)]) {
        for (resource, mode) in granted {
            for (other_id, other) in &self.open {
                assert!(
                    *other_id == id
                        || !other
                            .locks
                            .get(resource)
                            .is_some_and(|held| held.conflicts(*mode)),
                    "a lock granted to {id:016x} conflicts with one {other_id:016x} holds"
                );
            }
        }
        self.assert_queue();
    }

    /// The queue's invariants: places are distinct and given in log order (each below the
    /// next to give), every waiter waits for some lock, and none is a transaction another
    /// gateway aborted (an ended transaction leaves the queue).
    fn assert_queue(&self) {
        let mut places = BTreeSet::new();
        for (waiter, waiting) in &self.queue {
            assert!(
                waiting.arrival < self.arrival_next && places.insert(waiting.arrival),
                "queue places are distinct and in log order"
            );
            assert!(!waiting.locks.is_empty(), "a waiter waits for a lock");
            assert!(
                !self.aborted.contains(waiter),
                "an aborted transaction left the queue"
            );
        }
        for id in self.parked.keys() {
            assert!(
                self.queue.contains_key(id),
                "a parked statement waits in the queue"
            );
        }
    }

    /// The transactions waiting in the lock queue here, in their order, with the locks each
    /// waits for.
    pub fn queue(&self) -> Vec<(u64, Vec<(Resource, Mode)>)> {
        let mut waiting: Vec<_> = self
            .queue
            .iter()
            .map(|(id, waiting)| (waiting.arrival, *id, waiting.locks.clone()))
            .collect();
        waiting.sort_by_key(|(arrival, _, _)| *arrival);
        waiting
            .into_iter()
            .map(|(_, id, locks)| (id, locks))
            .collect()
    }

    /// Whether `id`'s new edges (`waits[id]`) close a cycle here, or break the execution-order
    /// rule: the refusal that makes `id` die instead of waiting.
    fn wait_refusal(&self, id: u64, table: &str) -> Option<EngineError> {
        if let Some(holder) = self.waits[&id]
            .iter()
            .find(|holder| self.reaches(**holder, id))
        {
            return Some(EngineError::SerializationFailure {
                reason: format!(
                    "a deadlock detected on relation \"{table}\": transaction {id:016x} would wait for transaction {holder:016x}, which waits for it (retry the transaction)"
                ),
            });
        }
        // New paths between global transactions through local ones all pass through `id`'s
        // new edges: from each global reaching `id` (or `id` itself, if global) to each global
        // reached from it.
        let downstream = self.globals_reached(id);
        let upstream: Vec<u64> = match self.globals.contains_key(&id) {
            true => vec![id],
            false => self.globals_reaching(id),
        };
        for waiter in &upstream {
            for waited in &downstream {
                if self.globals[waiter] < self.globals[waited] {
                    return Some(EngineError::SerializationFailure {
                        reason: format!(
                            "the execution-order rule on relation \"{table}\": global transaction {waiter:016x} would wait for global transaction {waited:016x}, ordered after it (retry the transaction)"
                        ),
                    });
                }
            }
        }
        None
    }

    /// Whether `to` is reachable from `from` in the waits-for graph.
    fn reaches(&self, from: u64, to: u64) -> bool {
        let mut seen = BTreeSet::new();
        let mut pending = vec![from];
        while let Some(node) = pending.pop() {
            if node == to {
                return true;
            }
            if seen.insert(node) {
                pending.extend(self.waits.get(&node).into_iter().flatten().copied());
            }
        }
        false
    }

    /// The global transactions `id` waits for, directly or through local transactions only.
    fn globals_reached(&self, id: u64) -> Vec<u64> {
        let mut found = BTreeSet::new();
        let mut seen = BTreeSet::from([id]);
        let mut pending: Vec<u64> = self.waits.get(&id).into_iter().flatten().copied().collect();
        while let Some(node) = pending.pop() {
            if !seen.insert(node) {
                continue;
            }
            if self.globals.contains_key(&node) {
                found.insert(node);
            } else {
                pending.extend(self.waits.get(&node).into_iter().flatten().copied());
            }
        }
        found.into_iter().collect()
    }

    /// The global transactions that wait for `id`, directly or through local transactions only.
    fn globals_reaching(&self, id: u64) -> Vec<u64> {
        let mut found = BTreeSet::new();
        let mut seen = BTreeSet::from([id]);
        let mut pending = vec![id];
        while let Some(node) = pending.pop() {
            for (waiter, waited) in &self.waits {
                if !waited.contains(&node) || !seen.insert(*waiter) {
                    continue;
                }
                if self.globals.contains_key(waiter) {
                    found.insert(*waiter);
                } else {
                    pending.push(*waiter);
                }
            }
        }
        found.into_iter().collect()
    }

    /// Makes transaction `id` global here (its `Globalize` delivered): it takes the next global
    /// sequence number. A transaction already global keeps its number; one aborted by another
    /// gateway dies (`SerializationFailure`).
    ///
    /// If a global transaction already waits for `id`, directly or through local ones, that
    /// wait now breaks the execution-order rule (the waiter is numbered before `id`). Sprint's
    /// Figure 3 aborts `id`, the transaction being ordered; here `id` goes on and the waiter
    /// dies at its next request here if `id` still holds what it wants (`wait_refusal` judges
    /// every refusal), or is admitted if `id` ended meanwhile. Every waiter sends its request
    /// again within a bounded pause (`cluster::transaction_driver`, which the runtime and
    /// the simulator run), so such an edge lives no longer than that pause, and a
    /// cycle of waits across partitions, which must hold one (`docs/internals/sprint.md`), is
    /// broken by it. The transaction being ordered has often just won a contended lock (TPC-C's
    /// Payment: the warehouse row, for which New-Orders then queue), so killing it wasted the
    /// most work.
    pub fn globalize(&mut self, id: u64) -> Result<u64, EngineError> {
        if self.ended.contains(id) {
            return Err(ended_refusal());
        }
        if self.aborted.contains(&id) {
            return Err(EngineError::SerializationFailure {
                reason: "the transaction's abort: it held locks another statement waited for while it was idle, or its gateway's storage process was suspected".into(),
            });
        }
        if let Some(sequence) = self.globals.get(&id) {
            return Ok(*sequence);
        }
        let sequence = self.global_next;
        self.global_next += 1;
        self.globals.insert(id, sequence);
        assert!(
            self.globals_reached(id)
                .iter()
                .all(|waited| self.globals[waited] < sequence),
            "the newest global transaction is numbered after every other"
        );
        Ok(sequence)
    }

    /// Transaction `id`'s global sequence number here, if it is global.
    pub fn global_sequence(&self, id: u64) -> Option<u64> {
        self.globals.get(&id).copied()
    }

    /// The transactions `id` waits for here (its last refusal).
    pub fn waits_for(&self, id: u64) -> Vec<u64> {
        self.waits.get(&id).into_iter().flatten().copied().collect()
    }

    /// Every edge of the waits-for graph here, (waiter, holder).
    pub fn wait_edges(&self) -> Vec<(u64, u64)> {
        self.waits
            .iter()
            .flat_map(|(waiter, holders)| holders.iter().map(move |holder| (*waiter, *holder)))
            .collect()
    }

    /// Transaction `id` is not waiting here any more (a message of its own arrived that is not
    /// a lock request: it moved on, e.g. ROLLBACK TO after a failed statement).
    pub fn stop_waiting(&mut self, id: u64) {
        self.waits.remove(&id);
        self.queue.remove(&id);
    }

    /// Forgets `id` in the waits-for graph and among the global transactions (it ended).
    fn forget(&mut self, id: u64) {
        self.waits.remove(&id);
        self.queue.remove(&id);
        self.waits.retain(|_, holders| {
            holders.remove(&id);
            !holders.is_empty()
        });
        self.globals.remove(&id);
    }

    /// The transaction that keeps a statement outside transactions from `tables_read` and
    /// `tables_written`: one holding a written table in any mode (intentions included: the
    /// statement does not say which rows it writes), or a read one in a mode that writes (its
    /// rows may hold uncommitted values). Judged on this partition's table locks (a
    /// transaction's intentions lie only where its rows are, so partitions may judge apart: a
    /// write over several partitions goes in two phases, `prepared`). For a statement pinned
    /// to partition keys, `pinned_blocker` judges finer.
    pub fn blocker(
        &self,
        tables_read: &[String],
        tables_written: &[String],
    ) -> Option<EngineError> {
        self.open.iter().find_map(|(id, transaction)| {
            let ((table, _), _) = transaction.locks.iter().find(|((table, row), mode)| {
                row.is_none()
                    && (tables_written.contains(table)
                        || (mode.writes() && tables_read.contains(table)))
            })?;
            Some(EngineError::TransactionLocked {
                table: table.clone(),
                transaction: *id,
                last_ms: transaction.last_ms,
            })
        })
    }

    /// `blocker` for a statement pinned to partition keys (`pinned_keys`: every operation on
    /// `schema`'s table, its partition key pinned by equality or `IN`, or an insert's rows):
    /// the locks a transaction's statement on the same rows would take (`locks_needed_on_paths`
    /// over `column_paths` for one key, the placement keys' rows for several) judged against
    /// every open transaction's locks, so it waits only for the transactions that hold its
    /// rows (or columns), or its table whole, not for every transaction with an intention on
    /// its table (which kept autocommit statements out for as long as any transaction wrote
    /// the table at their partition). `None` when the statement is not so pinned (then
    /// `blocker` judges).
    pub fn pinned_blocker(
        &self,
        operations: &[Operation],
        schema: &TableSchema,
    ) -> Option<Option<EngineError>> {
        let keys = pinned_keys(operations, schema)?;
        let partition_column = crate::rows::partition_column(schema);
        let paths = column_paths(operations, schema, partition_column, &keys)
            .unwrap_or_else(|| keys.iter().map(|key| vec![key.clone()]).collect());
        let needed = locks_needed_on_paths(operations, Some(&paths)).ok()?;
        debug_assert!(
            needed
                .iter()
                .any(|((table, row), _)| table == &schema.name && row.is_none()),
            "a pinned statement takes an intention on its table"
        );
        Some(self.open.iter().find_map(|(id, transaction)| {
            needed.iter().find_map(|(resource, mode)| {
                let held = transaction.locks.get(resource)?;
                held.conflicts(*mode)
                    .then(|| EngineError::TransactionLocked {
                        table: resource.0.clone(),
                        transaction: *id,
                        last_ms: transaction.last_ms,
                    })
            })
        }))
    }

    /// Whether a transaction other than `id` holds `resource` in a mode that conflicts with
    /// `mode` (SKIP LOCKED's test; under multiple-granularity locking a finer lock on a row
    /// implies an intention on its placement key, so testing the placement key suffices).
    pub fn held_by_other(&self, id: u64, resource: &Resource, mode: Mode) -> bool {
        self.open.iter().any(|(other_id, other)| {
            *other_id != id
                && other
                    .locks
                    .get(resource)
                    .is_some_and(|held| held.conflicts(mode))
        })
    }

    /// Records before-images for transaction `id` (those of rows it already changed are kept),
    /// and, under savepoint `savepoint` (0: none), the rows' images for `rollback_to`.
    pub fn remember(&mut self, id: u64, images: Vec<Undo>, savepoint: u32) {
        let transaction = self
            .open
            .get_mut(&id)
            .expect("a transaction is admitted before it writes");
        // Where each row's savepoint entry is: the entry under an id ≥ `savepoint` (looked up
        // in one map, not by a scan of the undo per image), or a new one.
        let mut recorded: BTreeMap<(String, Key), usize> = if savepoint == 0 {
            BTreeMap::new()
        } else {
            transaction
                .savepoint_undo
                .iter()
                .enumerate()
                .filter(|(_, (id, _, _, _))| *id >= savepoint)
                .map(|(at, (_, place, _, _))| (place.clone(), at))
                .collect()
        };
        for ((table, key, before), columns) in images {
            let place = (table, key);
            if savepoint != 0 {
                match recorded.get(&place) {
                    Some(&at) => {
                        let (_, _, image, owned) = &mut transaction.savepoint_undo[at];
                        *owned = fold_image(image, owned.take(), &before, columns.as_deref());
                    }
                    None => {
                        recorded.insert(place.clone(), transaction.savepoint_undo.len());
                        transaction.savepoint_undo.push((
                            savepoint,
                            place.clone(),
                            before.clone(),
                            columns.clone(),
                        ));
                    }
                }
            }
            // A column it only incremented so far, written now otherwise: from here on it is
            // the transaction's by image, the image being the value less its increments (as
            // it was before its first increment, plus the other holders' committed ones:
            // nobody else can change it while this write's lock is held). The savepoint entry
            // above keeps the value as it is now: `ROLLBACK TO` keeps earlier increments.
            let mut before = before;
            if let Some(increments) = transaction.increments.get_mut(&place) {
                increments.retain(|(column, sum)| {
                    let written = columns
                        .as_ref()
                        .is_none_or(|columns| columns.contains(column));
                    if !written {
                        return true;
                    }
                    if let Some(row) = before.as_mut() {
                        row[*column] = add_amount(&row[*column], sum, true)
                            .expect("a value less its own increments was a value");
                    }
                    false
                });
                if increments.is_empty() {
                    transaction.increments.remove(&place);
                }
            }
            match transaction.undo.get_mut(&place) {
                Some(image) => {
                    let owned = transaction.written.remove(&place);
                    if let Some(owned) = fold_image(image, owned, &before, columns.as_deref()) {
                        transaction.written.insert(place, owned);
                    }
                }
                None => {
                    if let (Some(columns), Some(_)) = (columns, &before) {
                        transaction.written.insert(place.clone(), columns);
                    }
                    transaction.undo.insert(place, before);
                }
            }
        }
        debug_assert!(transaction
            .written
            .keys()
            .all(|place| matches!(transaction.undo.get(place), Some(Some(_)))));
    }

    /// Adds `amount` to transaction `id`'s increments of `column` of a row (`Mode::Increment`).
    pub fn record_increment(
        &mut self,
        id: u64,
        place: (String, Key),
        column: usize,
        amount: &Value,
    ) {
        let transaction = self
            .open
            .get_mut(&id)
            .expect("a transaction is admitted before it writes");
        assert!(
            transaction.undo.contains_key(&place),
            "an incremented row has its image"
        );
        assert!(
            !transaction
                .written
                .get(&place)
                .is_some_and(|columns| columns.contains(&column)),
            "a column is the transaction's by image or by increments, not both"
        );
        let sums = transaction.increments.entry(place).or_default();
        match sums.iter_mut().find(|(held, _)| *held == column) {
            Some((_, sum)) => {
                *sum = add_amount(sum, amount, false).expect("increments checked by escrow");
            }
            None => sums.push((column, amount.clone())),
        }
    }

    /// The sums other open transactions than `id` have added to `column` of a row and not
    /// ended (`Transaction::increments`).
    pub fn others_increments(&self, id: u64, place: &(String, Key), column: usize) -> Vec<Value> {
        self.open
            .iter()
            .filter(|(other, _)| **other != id)
            .filter_map(|(_, transaction)| transaction.increments.get(place))
            .flat_map(|sums| sums.iter().filter(|(held, _)| *held == column))
            .map(|(_, sum)| sum.clone())
            .collect()
    }

    /// ROLLBACK TO savepoint `savepoint` of transaction `id`: removes the savepoint undo of ids
    /// ≥ `savepoint` and returns it, newest first, for the caller to write back (`None` if the
    /// transaction is not open here). Locks stay held (stricter than PostgreSQL, which
    /// releases those taken since the savepoint; holding more is always safe).
    pub fn rollback_to(&mut self, id: u64, savepoint: u32) -> Option<Vec<Undo>> {
        assert!(savepoint > 0, "savepoint ids start at 1");
        let transaction = self.open.get_mut(&id)?;
        let (undone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut transaction.savepoint_undo)
            .into_iter()
            .partition(|(id, _, _, _)| *id >= savepoint);
        transaction.savepoint_undo = kept;
        Some(
            undone
                .into_iter()
                .rev()
                .map(|(_, (table, key), before, columns)| ((table, key, before), columns))
                .collect(),
        )
    }

    /// Parks transaction `id`'s statement `statement`, refused with `refusal` and waiting in
    /// the queue; its ticket. A statement parked before for `id` must have been let go.
    pub fn park(&mut self, id: u64, statement: Vec<u8>, refusal: Vec<u8>) -> u64 {
        assert!(
            self.queue.contains_key(&id),
            "a parked statement waits in the queue"
        );
        let ticket = self.ticket_next;
        self.ticket_next += 1;
        let earlier = self.parked.insert(
            id,
            Parked {
                ticket,
                statement,
                refusal,
                reply: Vec::new(),
            },
        );
        assert!(earlier.is_none(), "one parked statement per transaction");
        ticket
    }

    /// The host's reply bytes for the statement parked under `ticket`.
    pub fn set_parked_reply(&mut self, ticket: u64, reply: Vec<u8>) {
        let parked = self
            .parked
            .values_mut()
            .find(|parked| parked.ticket == ticket)
            .expect("the statement just parked");
        parked.reply = reply;
    }

    /// Removes transaction `id`'s parked statement, if any.
    pub fn unpark(&mut self, id: u64) -> Option<Parked> {
        self.parked.remove(&id)
    }

    /// Parks again, under its own ticket, a statement `unpark` took out to judge it afresh
    /// and that still waits in the queue.
    pub fn repark(&mut self, id: u64, parked: Parked) {
        assert!(
            self.queue.contains_key(&id),
            "a parked statement waits in the queue"
        );
        assert!(
            parked.ticket < self.ticket_next,
            "tickets are given in log order"
        );
        let earlier = self.parked.insert(id, parked);
        assert!(earlier.is_none(), "one parked statement per transaction");
    }

    /// Removes every parked statement, in ticket order.
    pub fn unpark_all(&mut self) -> Vec<Parked> {
        let mut all: Vec<Parked> = std::mem::take(&mut self.parked).into_values().collect();
        all.sort_by_key(|parked| parked.ticket);
        all
    }

    /// The transactions with a parked statement, in the order their turns come: their places
    /// in the queue (one that left the queue, e.g. by another partition's copy, first), then
    /// their tickets.
    pub fn parked_in_order(&self) -> Vec<u64> {
        let mut order: Vec<(u64, u64, u64)> = self
            .parked
            .iter()
            .map(|(id, parked)| {
                let place = self.queue.get(id).map_or(0, |waiting| waiting.arrival + 1);
                (place, parked.ticket, *id)
            })
            .collect();
        order.sort();
        order.into_iter().map(|(_, _, id)| id).collect()
    }

    /// The statement parked for transaction `id`.
    pub fn parked(&self, id: u64) -> Option<&Parked> {
        self.parked.get(&id)
    }

    /// How many statements are parked.
    pub fn parked_len(&self) -> usize {
        self.parked.len()
    }

    /// Whether transaction `id` waits in the row-lock queue.
    pub fn queued(&self, id: u64) -> bool {
        self.queue.contains_key(&id)
    }

    /// Whether transaction `id` waits in the queue for a row lock another transaction holds
    /// in a conflicting mode: judged again, its request would be refused for that holder
    /// (unless its new edges now made it die).
    pub fn held_against(&self, id: u64) -> bool {
        let Some(waiting) = self.queue.get(&id) else {
            return false;
        };
        waiting.locks.iter().any(|(resource, mode)| {
            self.open.iter().any(|(other_id, other)| {
                *other_id != id
                    && other
                        .locks
                        .get(resource)
                        .is_some_and(|held| held.conflicts(*mode))
            })
        })
    }

    /// The partition left the ring (a cut left it no holdings): no message of a transaction
    /// reaches it any more, so what it knows of open transactions (their locks, waits, places
    /// in the queue, owners and global numbers) goes stale at once, and is forgotten. Should it
    /// join the ring again, the copies it receives then bring the transactions open at that
    /// point (`absorb`). Kept, a transaction that ended while it was out held its locks here
    /// until a waiter judged it abandoned, and one a suspicion aborted kept its locks too
    /// (found by the simulator's gateway crashes). Tombstones and counters stay.
    pub fn forget_open(&mut self) {
        assert!(
            self.parked.is_empty(),
            "a cut lets every parked statement go first"
        );
        self.open.clear();
        self.waits.clear();
        self.queue.clear();
        self.owners.clear();
        self.globals.clear();
    }

    /// Records `owner` (its process not 0, its incarnation current here) as transaction
    /// `id`'s owner, unless it has one: the first owned message decides. Called before the
    /// message's locks are judged, so a transaction whose first request waits (or dies and is
    /// not ended yet) is owned too. Not for a transaction aborted by another gateway (its
    /// later messages are refused).
    pub fn own(&mut self, id: u64, owner: Owner) {
        assert_ne!(owner.process, 0, "0 names no storage process");
        // Incarnation 0: an old gateway's message, never judged.
        if owner.incarnation != 0 {
            assert_eq!(
                self.incarnations.current(owner.process),
                Some(owner.incarnation),
                "only the current incarnation owns transactions (`take_incarnation` first)"
            );
        }
        if self.aborted.contains(&id) || self.ended.contains(id) {
            return;
        }
        let recorded = *self.owners.entry(id).or_insert(owner);
        debug_assert_eq!(
            recorded, owner,
            "a transaction's messages come from one gateway"
        );
    }

    /// Transaction `id`'s owner, if recorded here.
    pub fn owner(&self, id: u64) -> Option<Owner> {
        self.owners.get(&id).copied()
    }

    /// The transactions owned by storage process `process` (any incarnation: only its
    /// current one owns any) that are open or waiting here, in order: what a suspicion of
    /// `process`, or its new incarnation, aborts.
    pub fn owned_by(&self, process: u64) -> Vec<u64> {
        self.owners
            .iter()
            .filter(|(_, recorded)| recorded.process == process)
            .map(|(id, _)| *id)
            .collect()
    }

    /// The incarnations known here.
    pub fn incarnations(&self) -> &Incarnations {
        &self.incarnations
    }

    /// A table lock owned by `owner` arrives: `Err(())` if its incarnation is dead here (the
    /// request is refused, nothing else changes); otherwise `owner` is its process's current
    /// incarnation from now on, and `Ok` gives the transactions of the incarnation it
    /// superseded, which the caller aborts (`Store::abort_owned` semantics) before anything
    /// else runs. Call `check_incarnations` after.
    #[allow(clippy::result_unit_err)]
    pub fn take_incarnation(&mut self, owner: Owner) -> Result<Vec<u64>, ()> {
        assert_ne!(owner.process, 0, "0 names no storage process");
        assert_ne!(
            owner.incarnation, 0,
            "an old gateway's message is not judged"
        );
        if self.incarnations.is_dead(owner) {
            return Err(());
        }
        let superseded = self.incarnations.adopt(owner);
        let owned = self.owned_by(owner.process);
        if superseded.is_none() {
            assert!(
                owned.iter().all(|id| {
                    let incarnation = self.owners[id].incarnation;
                    incarnation == owner.incarnation || incarnation == 0
                }),
                "the current incarnation's transactions only"
            );
            return Ok(Vec::new());
        }
        Ok(owned)
    }

    /// A suspicion of `process`: its current incarnation (if any) is dead from now on, and
    /// every one up to `through` (0: no bound). The caller aborts `owned_by(process)` first.
    pub fn suspect(&mut self, process: u64, through: u64) -> Option<u64> {
        assert!(
            self.owned_by(process).is_empty(),
            "the suspected process's transactions are aborted first"
        );
        let current = self.incarnations.suspect(process, through);
        debug_assert!(
            through == 0
                || self.incarnations.is_dead(Owner {
                    process,
                    incarnation: through
                }),
            "the bound is dead"
        );
        current
    }

    /// The incarnation invariants: a current incarnation is never dead, and every owner here
    /// is its process's current incarnation.
    pub fn check_incarnations(&self) {
        self.incarnations.assert_current_not_dead();
        for (id, owner) in self
            .owners
            .iter()
            .filter(|(_, owner)| owner.incarnation != 0)
        {
            assert!(
                !self.incarnations.is_dead(*owner),
                "transaction {id:x} is owned by a dead incarnation"
            );
            assert_eq!(
                self.incarnations.current(owner.process),
                Some(owner.incarnation),
                "transaction {id:x} is owned by its process's current incarnation"
            );
        }
    }

    /// Whether transaction `id`'s own gateway ended it here (among the last `ENDED_MAX`).
    pub fn has_ended(&self, id: u64) -> bool {
        self.ended.contains(id)
    }

    /// How many ended transactions are remembered (at most `ENDED_MAX`).
    pub fn ended_len(&self) -> usize {
        self.ended.len()
    }

    /// Whether another gateway aborted transaction `id` (and its own has not ended it).
    pub fn was_aborted(&self, id: u64) -> bool {
        self.aborted.contains(&id)
    }

    /// Ends transaction `id`: removes it and returns it (its before-images are written back by
    /// the caller on an abort); `None` if it is not open here. `by_owner`: its own gateway
    /// ends it (its last message); otherwise another aborts it, and a tombstone refuses its
    /// later statements.
    pub fn end(&mut self, id: u64, by_owner: bool) -> Option<Transaction> {
        // Seen here: it holds locks, or it waits (a waiter may be named to another waiter,
        // and aborted as abandoned, before it holds anything anywhere), or its owner's first
        // message was refused here.
        let seen = self.open.contains_key(&id)
            || self.queue.contains_key(&id)
            || self.waits.contains_key(&id)
            || self.owners.contains_key(&id);
        self.forget(id);
        self.owners.remove(&id);
        if by_owner {
            self.aborted.remove(&id);
            // Whether it was seen here or not: a late message of it may still arrive.
            self.ended.insert(id);
        } else {
            // A tombstone whether this partition has seen it or not: a transaction takes its
            // intention locks where its rows are, so it may reach this partition only after
            // the abort; its statement must then be refused here as everywhere, or its
            // COMMIT would commit here what the abort undid elsewhere (found by the simulator,
            // seed 2494). Every partition meets the abort at one point of the order, so the
            // tombstones stay alike.
            self.aborted.insert(id);
            while self.aborted.len() > ABORTED_MAX {
                self.aborted.pop_first();
            }
            if !seen {
                return None;
            }
        }
        self.open.remove(&id)
    }

    /// A copy holding, of each transaction, every lock and the before-images of the rows
    /// `keep` accepts (Rubberband's copy of part of the ring). A row's place is judged by its
    /// before-image, or, for a row the transaction inserted, by the row as it is now
    /// (`current`); an image of a row that exists in neither form changes nothing and is left
    /// out.
    pub fn copy_where(
        &self,
        keep: impl Fn(&TableSchema, &[Value]) -> bool,
        schema_of: impl Fn(&str) -> Option<TableSchema>,
        current: impl Fn(&str, &Key) -> Option<Row>,
    ) -> Transactions {
        let open = self
            .open
            .iter()
            .map(|(id, transaction)| {
                let undo: BTreeMap<(String, Key), Option<Row>> = transaction
                    .undo
                    .iter()
                    .filter(|((table, key), before)| {
                        let Some(schema) = schema_of(table) else {
                            return false;
                        };
                        let row = Option::clone(before).or_else(|| current(table, key));
                        row.is_some_and(|row| keep(&schema, &row))
                    })
                    .map(|(place, before)| (place.clone(), before.clone()))
                    .collect();
                let savepoint_undo = transaction
                    .savepoint_undo
                    .iter()
                    .filter(|(_, (table, key), before, _)| {
                        let Some(schema) = schema_of(table) else {
                            return false;
                        };
                        let row = Option::clone(before).or_else(|| current(table, key));
                        row.is_some_and(|row| keep(&schema, &row))
                    })
                    .cloned()
                    .collect();
                let written = transaction
                    .written
                    .iter()
                    .filter(|(place, _)| undo.contains_key(*place))
                    .map(|(place, columns)| (place.clone(), columns.clone()))
                    .collect();
                let increments = transaction
                    .increments
                    .iter()
                    .filter(|(place, _)| undo.contains_key(*place))
                    .map(|(place, sums)| (place.clone(), sums.clone()))
                    .collect();
                let copy = Transaction {
                    undo,
                    written,
                    savepoint_undo,
                    increments,
                    ..transaction.clone()
                };
                (*id, copy)
            })
            .collect();
        Transactions {
            open,
            aborted: self.aborted.clone(),
            ended: self.ended.clone(),
            waits: self.waits.clone(),
            globals: self.globals.clone(),
            global_next: self.global_next,
            queue: self.queue.clone(),
            arrival_next: self.arrival_next,
            // A parked statement is answered by the group that logged it (it lets its parked
            // statements go at the cut): the copy carries none.
            parked: BTreeMap::new(),
            ticket_next: self.ticket_next,
            owners: self.owners.clone(),
            incarnations: self.incarnations.clone(),
        }
    }

    /// Takes in another partition's copy: locks are merged (the stronger mode), before-images
    /// added (the two copies hold different rows), the newest stamp kept.
    pub fn absorb(&mut self, other: Transactions) {
        self.aborted.extend(other.aborted);
        for id in other.ended.order {
            self.ended.insert(id);
        }
        // Both copies recorded an owner from the same first message (sent to every
        // partition): they agree where both know it.
        for (id, owner) in other.owners {
            let here = *self.owners.entry(id).or_insert(owner);
            debug_assert_eq!(here, owner, "a transaction has one owner");
        }
        self.incarnations.absorb(other.incarnations);
        // Both copies numbered the same `Globalize` messages in the same order (every
        // partition delivers each one); the edges are the union of both graphs.
        self.global_next = self.global_next.max(other.global_next);
        for (id, sequence) in other.globals {
            self.globals.entry(id).or_insert(sequence);
        }
        for (waiter, holders) in other.waits {
            self.waits.entry(waiter).or_default().extend(holders);
        }
        // The other copy's waiters not waiting here join the queue at its end, in their
        // order (the two copies' places are numbered apart); one waiting in both keeps its
        // place here and waits for both sets of locks.
        let mut incoming: Vec<(u64, Waiting)> = other.queue.into_iter().collect();
        incoming.sort_by_key(|(_, waiting)| waiting.arrival);
        for (waiter, waiting) in incoming {
            match self.queue.get_mut(&waiter) {
                Some(here) => {
                    for lock in waiting.locks {
                        if !here.locks.contains(&lock) {
                            here.locks.push(lock);
                        }
                    }
                    here.last_ms = here.last_ms.max(waiting.last_ms);
                }
                None => {
                    let arrival = self.arrival_next;
                    self.arrival_next += 1;
                    self.queue.insert(waiter, Waiting { arrival, ..waiting });
                }
            }
        }
        while self.aborted.len() > ABORTED_MAX {
            self.aborted.pop_first();
        }
        for (id, incoming) in other.open {
            let Some(transaction) = self.open.get_mut(&id) else {
                self.open.insert(id, incoming);
                continue;
            };
            transaction.last_ms = transaction.last_ms.max(incoming.last_ms);
            // The last write's outcome answers a resend of it here too: without it a statement
            // that ran where its rows were is run again where they moved (the transaction was
            // already open here by its table locks), and a statement that is not idempotent
            // (`bal = bal + 1`, an INSERT) applies twice (found by the simulator with blind
            // increments, seed 347).
            if incoming.last_write.as_ref().map(|(number, _)| *number)
                > transaction.last_write.as_ref().map(|(number, _)| *number)
            {
                transaction.last_write = incoming.last_write;
            }
            transaction.statement = transaction.statement.max(incoming.statement);
            for (resource, mode) in incoming.locks {
                let held = transaction.locks.entry(resource).or_insert(mode);
                *held = held.join(mode);
            }
            for (place, before) in incoming.undo {
                if transaction.undo.contains_key(&place) {
                    continue; // The two copies hold different rows.
                }
                if let Some(columns) = incoming.written.get(&place) {
                    transaction.written.insert(place.clone(), columns.clone());
                }
                if let Some(sums) = incoming.increments.get(&place) {
                    transaction.increments.insert(place.clone(), sums.clone());
                }
                transaction.undo.insert(place, before);
            }
            // The two copies hold different rows, so their savepoint entries never name the
            // same row; each keeps its own order.
            transaction.savepoint_undo.extend(incoming.savepoint_undo);
        }
        self.queue
            .retain(|waiter, _| !self.aborted.contains(waiter));
        self.assert_queue();
        self.check_incarnations();
    }
}

/// The longest lock request `Transactions::admit_queued` deduplicates by searching its list;
/// longer ones go through an index.
const WANTED_SEARCHED_MAX: usize = 32;

/// The first of `wanted` (in its order) that conflicts with a lock of `theirs` on the same
/// resource. Both name each resource once (`Transactions::admit_queued`'s `wanted`); long
/// lists (a COPY's statement locks every row it inserts) are matched through an index, short
/// ones (TPC-C's) by comparing every pair, which allocates nothing.
fn first_conflict<'a>(
    wanted: &'a [(Resource, Mode)],
    theirs: &[(Resource, Mode)],
) -> Option<&'a (Resource, Mode)> {
    if wanted.len().saturating_mul(theirs.len()) <= 256 {
        return wanted.iter().find(|(resource, mode)| {
            theirs
                .iter()
                .any(|(their, their_mode)| their == resource && their_mode.conflicts(*mode))
        });
    }
    let index: BTreeMap<&Resource, Mode> = theirs
        .iter()
        .map(|(resource, mode)| (resource, *mode))
        .collect();
    debug_assert_eq!(index.len(), theirs.len(), "one entry per resource");
    wanted.iter().find(|(resource, mode)| {
        index
            .get(resource)
            .is_some_and(|their_mode| their_mode.conflicts(*mode))
    })
}

/// The refusal of a message of a transaction its own gateway ended here, delivered late (its
/// gateway waits for no answer to it any more).
fn ended_refusal() -> EngineError {
    EngineError::SerializationFailure {
        reason: "the transaction had ended: a late copy of one of its messages".into(),
    }
}

/// The refusal of a statement its gateway sent again and went on from (a later statement of
/// the transaction was admitted here), delivered late.
pub fn superseded_refusal() -> EngineError {
    EngineError::SerializationFailure {
        reason: "a late copy of a statement its transaction went on from".into(),
    }
}

/// The operations of a command (under its guard).
pub fn operations_of(command: &engine::Command) -> &[Operation] {
    match command {
        engine::Command::Guarded { command, .. } => operations_of(command),
        engine::Command::Execute(operation) | engine::Command::Explain(operation) => {
            std::slice::from_ref(operation)
        }
        engine::Command::Batch(operations) => operations,
    }
}

/// The tables a command reads (its read operations'), distinct.
pub fn tables_read(command: &engine::Command) -> Vec<String> {
    let mut tables: Vec<String> = operations_of(command)
        .iter()
        .filter(|operation| operation.is_read())
        .map(|operation| operation.table_name().to_string())
        .collect();
    tables.sort();
    tables.dedup();
    tables
}

/// The placement keys a statement pins, by the planner's routing rule (`sql::plan`'s
/// `routing_of`, whose keys the gateway routes by and a transaction's statement locks): the
/// first top-level conjunct of each operation's predicate that sets the partition key equal
/// to a constant or `IN` a list, or an insert's rows' partition key values; every operation
/// on `schema`'s table, which is not placed everywhere. `None` otherwise.
pub fn pinned_keys(operations: &[Operation], schema: &TableSchema) -> Option<Vec<Vec<u8>>> {
    if operations.is_empty() || crate::rows::everywhere(schema) {
        return None;
    }
    let options = sql::TableOptions::of(schema);
    let partition_key = options.partition_key.as_str();
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for operation in operations {
        if operation.table_name() != schema.name || operation.is_ddl() {
            return None;
        }
        let values: Vec<Value> = match operation {
            Operation::Insert { columns, rows, .. } => {
                let position = if columns.is_empty() {
                    crate::rows::partition_column(schema)
                } else {
                    columns.iter().position(|column| column == partition_key)?
                };
                rows.iter()
                    .map(|row| row.get(position).cloned())
                    .collect::<Option<Vec<Value>>>()?
            }
            Operation::Select { predicate, .. }
            | Operation::Delete { predicate, .. }
            | Operation::Aggregate { predicate, .. }
            | Operation::Update { predicate, .. }
            | Operation::UpdateComputed { predicate, .. } => {
                let predicate = predicate.as_ref()?;
                let conjuncts: Vec<&Predicate> = match predicate {
                    Predicate::And(operands) => operands.iter().collect(),
                    other => vec![other],
                };
                conjuncts.iter().find_map(|conjunct| match conjunct {
                    Predicate::Compare {
                        column,
                        op: engine::predicate::CompareOp::Equal,
                        value,
                    } if column == partition_key => Some(vec![value.clone()]),
                    Predicate::In { column, values } if column == partition_key => {
                        Some(values.clone())
                    }
                    _ => None,
                })?
            }
            _ => return None,
        };
        keys.extend(
            values
                .iter()
                .map(|value| crate::rows::key_under(&options, value)),
        );
    }
    keys.sort();
    keys.dedup();
    (!keys.is_empty()).then_some(keys)
}

/// A row resource with the coarser row resources above it, coarsest first: the placement key
/// of a partition key value, then (`row_paths`) resources for longer primary-key prefixes. A
/// statement takes S or X on the last and IS or IX on the others (and on the table).
pub type RowPath = Vec<Vec<u8>>;

/// The locks a statement needs. Pinned to partition keys (`rows`: their placement keys, every
/// operation on one table): IS on the table and S on those rows to read, IX and X to write.
/// Otherwise: S on each table it reads, X on each it writes. `Err` for DDL, which a
/// transaction block does not run.
pub fn locks_needed(
    operations: &[Operation],
    rows: Option<&[Vec<u8>]>,
) -> Result<Vec<(Resource, Mode)>, EngineError> {
    let paths: Option<Vec<RowPath>> =
        rows.map(|rows| rows.iter().map(|row| vec![row.clone()]).collect());
    locks_needed_on_paths(operations, paths.as_deref())
}

/// `locks_needed` with row paths (`RowPath`): intention locks down each path, S or X at its end.
pub fn locks_needed_on_paths(
    operations: &[Operation],
    rows: Option<&[RowPath]>,
) -> Result<Vec<(Resource, Mode)>, EngineError> {
    let mut needed: BTreeMap<Resource, Mode> = BTreeMap::new();
    let one_table = operations
        .first()
        .map(Operation::table_name)
        .filter(|first| {
            operations
                .iter()
                .all(|operation| operation.table_name() == *first)
        });
    let rows = rows.filter(|_| one_table.is_some());
    for operation in operations {
        if operation.is_ddl() {
            return Err(EngineError::FeatureNotSupported {
                feature: "DDL (CREATE, DROP, ALTER) inside a transaction block".into(),
            });
        }
        let table = operation.table_name().to_string();
        let read = operation.is_read();
        let mut take = |resource: Resource, mode: Mode| {
            let held = needed.entry(resource).or_insert(mode);
            *held = held.join(mode);
        };
        match rows {
            Some(rows) => {
                let (intent, row_mode) = if read {
                    (Mode::IntentShared, Mode::Shared)
                } else {
                    (Mode::IntentExclusive, Mode::Exclusive)
                };
                take((table.clone(), None), intent);
                for path in rows {
                    assert!(
                        !path.is_empty(),
                        "a row path names at least its placement key"
                    );
                    let (path, leaf_mode) = if is_increment_path(path) {
                        let leaf = if read { row_mode } else { Mode::Increment };
                        (&path[..path.len() - 1], leaf)
                    } else {
                        (&path[..], row_mode)
                    };
                    assert!(
                        path.iter().all(|resource| !resource.is_empty()),
                        "only an increment mark is empty"
                    );
                    for (depth, resource) in path.iter().enumerate() {
                        let mode = if depth + 1 == path.len() {
                            leaf_mode
                        } else {
                            intent
                        };
                        take((table.clone(), Some(resource.clone())), mode);
                    }
                }
            }
            None => take(
                (table, None),
                if read { Mode::Shared } else { Mode::Exclusive },
            ),
        }
    }
    Ok(needed.into_iter().collect())
}

/// Most row paths one statement's IN lists expand to (`pinned_prefixes`); beyond it the
/// statement keeps the shorter prefix's lock.
pub const ROW_PATHS_MAX: usize = 10_000;

/// The primary-key prefixes a predicate pins: each column of the prefix has one non-NULL
/// equality constant among the predicate's top-level conjuncts, or one `IN` list (its
/// non-NULL values, one prefix each: `s_w_id = 1 AND s_i_id IN (3, 5)` pins (1, 3) and
/// (1, 5), a semi-join's point lookups), as long as there are at most `ROW_PATHS_MAX`
/// prefixes. One empty prefix when the first column is not pinned.
fn pinned_prefixes(predicate: &Predicate, schema: &TableSchema) -> Vec<Vec<Value>> {
    let mut conjuncts = Vec::new();
    let mut pending = vec![predicate];
    while let Some(predicate) = pending.pop() {
        match predicate {
            Predicate::And(operands) => pending.extend(operands.iter()),
            other => conjuncts.push(other),
        }
    }
    // The column's constants: `None` when not pinned (or pinned ambiguously: keep the
    // coarser lock).
    let constants = |column: &str| -> Option<Vec<Value>> {
        let mut found: Option<Vec<Value>> = None;
        for conjunct in &conjuncts {
            let values: Vec<Value> = match conjunct {
                Predicate::Compare {
                    column: named,
                    op: engine::predicate::CompareOp::Equal,
                    value,
                } if named == column => vec![value.clone()],
                Predicate::In {
                    column: named,
                    values,
                } if named == column => {
                    let mut values: Vec<Value> = values
                        .iter()
                        .filter(|value| !value.is_null())
                        .cloned()
                        .collect();
                    values.sort();
                    values.dedup();
                    values
                }
                _ => continue,
            };
            match &found {
                None => found = Some(values),
                // Two different constants: no row qualifies; keep the coarser lock.
                Some(earlier) if *earlier != values => return None,
                Some(_) => {}
            }
        }
        found.filter(|values| !values.is_empty() && values.iter().all(|value| !value.is_null()))
    };
    let mut prefixes: Vec<Vec<Value>> = vec![Vec::new()];
    for &position in &schema.primary_key {
        let Some(values) = constants(&schema.columns[position].name) else {
            break;
        };
        if prefixes.len().saturating_mul(values.len()) > ROW_PATHS_MAX {
            break;
        }
        prefixes = prefixes
            .iter()
            .flat_map(|prefix| {
                values.iter().map(move |value| {
                    let mut longer = prefix.clone();
                    longer.push(value.clone());
                    longer
                })
            })
            .collect();
    }
    prefixes
}

/// The resource of a primary-key prefix longer than one column: its placement key, a marker,
/// the prefix's length and each further value, length-prefixed.
fn prefix_resource(placement: &[u8], prefix: &[Value]) -> Vec<u8> {
    let mut resource = placement.to_vec();
    resource.extend_from_slice(&[0xFF, prefix.len() as u8]);
    for value in &prefix[1..] {
        let encoded = crate::rows::placement_key("", value);
        resource.extend_from_slice(&(encoded.len() as u32).to_be_bytes());
        resource.extend_from_slice(&encoded);
    }
    resource
}

/// The path of a pinned primary-key prefix: the placement key, then one resource per longer
/// prefix.
fn prefix_path(options: &sql::TableOptions, prefix: &[Value]) -> RowPath {
    assert!(!prefix.is_empty());
    // The key the row's statements are routed by (by range for a range-placed table).
    let placement = crate::rows::key_under(options, &prefix[0]);
    let mut path = vec![placement.clone()];
    for length in 2..=prefix.len() {
        path.push(prefix_resource(&placement, &prefix[..length]));
    }
    path
}

/// Row locks finer than a partition key value, for a statement on one table pinned to one
/// partition key value (`keys`: its placement keys) of a table whose partition key is the
/// first primary-key column: a statement pinning a longer primary-key prefix by equalities
/// (`WHERE c_w_id = 1 AND c_d_id = 2 AND c_id = 3`; an IN list pins one prefix per value,
/// `pinned_prefixes`) locks that prefix, under intention locks
/// on the shorter ones, so two statements on different rows of one partition key value do not
/// conflict, while one that reads or writes a whole prefix still conflicts with every row
/// under it. An insert locks each row's whole key. `None`: lock the placement keys alone.
pub fn row_paths(
    operations: &[Operation],
    schema: &TableSchema,
    partition_column: usize,
    keys: &[Vec<u8>],
) -> Option<Vec<RowPath>> {
    paths_of(operations, schema, partition_column, keys, false)
}

/// `row_paths`, one level finer where a statement names one whole row: a select of named
/// columns, an update (plain or computed) reaches the row's columns it reads or writes, each a
/// resource under the row's (`column_resource`), the path's end. So a read of some columns of a
/// row and a write of others (TPC-C's New-Order reading `w_tax` while Payment adds to
/// `w_ytd`) do not conflict; a read and a write of one column do, and so does anything that
/// takes the whole row (a delete, an insert, `SELECT *`, an aggregate, a locking clause: the
/// caller uses `row_paths` for `FOR UPDATE | SHARE`), which holds S or X on the row resource
/// above the columns' intentions. Key columns take no column resource: they change only by a
/// delete and an insert, which lock the row.
pub fn column_paths(
    operations: &[Operation],
    schema: &TableSchema,
    partition_column: usize,
    keys: &[Vec<u8>],
) -> Option<Vec<RowPath>> {
    paths_of(operations, schema, partition_column, keys, true)
}

/// The columns an UPDATE assigns (positions in `schema`, sorted), when none of them is a key
/// column; `None` for any other operation, which changes whole rows.
pub fn columns_assigned(operation: &Operation, schema: &TableSchema) -> Option<Vec<usize>> {
    let names: Vec<&str> = match operation {
        Operation::Update { assignments, .. } => assignments
            .iter()
            .map(|assignment| assignment.column.as_str())
            .collect(),
        Operation::UpdateComputed { assignments, .. } => assignments
            .iter()
            .map(|assignment| assignment.column.as_str())
            .collect(),
        _ => return None,
    };
    let mut positions = Vec::with_capacity(names.len());
    for name in names {
        let position = schema
            .columns
            .iter()
            .position(|column| column.name == name)?;
        if schema.primary_key.contains(&position) {
            return None; // The row moves: whole rows.
        }
        positions.push(position);
    }
    positions.sort_unstable();
    positions.dedup();
    (!positions.is_empty()).then_some(positions)
}

/// The exact amount a value holds, for increments: integers and NUMERIC (`None` for NULL and
/// every other type).
pub fn amount_of(value: &Value) -> Option<engine::numeric::Decimal> {
    match value {
        Value::Int(number) => Some((*number).into()),
        Value::BigInt(number) => Some((*number).into()),
        Value::Numeric(decimal) => Some(*decimal),
        _ => None,
    }
}

/// `value + amount` (`- amount` when `subtract`), exactly, of `value`'s own type (an integer
/// stays one); `None` if either is not an amount or the result does not fit the type. NULL
/// stays NULL (an increment of NULL is NULL).
pub fn add_amount(value: &Value, amount: &Value, subtract: bool) -> Option<Value> {
    if value.is_null() {
        return Some(Value::Null);
    }
    let (base, amount) = (amount_of(value)?, amount_of(amount)?);
    let sum = if subtract {
        base.checked_sub(amount)?
    } else {
        base.checked_add(amount)?
    };
    match value {
        Value::Int(_) => i32::try_from(i64::try_from(sum).ok()?).ok().map(Value::Int),
        Value::BigInt(_) => i64::try_from(sum).ok().map(Value::BigInt),
        _ => Some(Value::Numeric(sum)),
    }
    .filter(|_| !matches!(value, Value::Int(_) | Value::BigInt(_)) || sum.fract().is_zero())
}

/// A row path that ends in this (empty) resource asks for `Mode::Increment` on the resource
/// before it (a column's, `column_paths`); no real resource is empty.
pub const INCREMENT_MARK: &[u8] = &[];

/// Whether a row path asks for an increment lock (`INCREMENT_MARK`).
pub fn is_increment_path(path: &[Vec<u8>]) -> bool {
    path.len() > 1 && path.last().is_some_and(|resource| resource.is_empty())
}

/// Turns increment locks into plain column locks (exclusive): a statement under a savepoint
/// takes no increment lock, since `ROLLBACK TO` writes back images.
pub fn without_increments(paths: &mut [RowPath]) {
    for path in paths.iter_mut() {
        if is_increment_path(path) {
            path.pop();
        }
    }
}

/// The columns an UPDATE only adds a constant to, read nowhere else in it: `SET c = c + k`,
/// `c = k + c` or `c = c - k` with `k` a literal other than NULL (maybe cast or negated), `c` an INT, BIGINT or NUMERIC column
/// that is not a key column, assigned once, named by no other assignment, by the predicate
/// or by a CHECK constraint (a constraint over increments that commute would be checked
/// against other transactions' uncommitted increments). Positions in `schema`, sorted.
/// These may be locked with `Mode::Increment` and undone by subtraction.
pub fn blind_increments(operation: &Operation, schema: &TableSchema) -> Vec<usize> {
    let Operation::UpdateComputed {
        assignments,
        predicate,
        ..
    } = operation
    else {
        return Vec::new();
    };
    let names_of = |expression: &engine::Expression| {
        let mut names: Vec<String> = Vec::new();
        let _ = expression.map_columns(&mut |name: &String| {
            names.push(name.clone());
            Ok::<(), ()>(())
        });
        names
    };
    let mut read_elsewhere: Vec<String> = Vec::new();
    predicate_columns(predicate, &mut read_elsewhere);
    for check in &schema.checks {
        read_elsewhere.extend(names_of(&check.expression));
    }
    let mut candidates: Vec<(usize, &str)> = Vec::new();
    for (at, assignment) in assignments.iter().enumerate() {
        use engine::Expression::{Binary, Column};
        let column = assignment.column.as_str();
        let is_self =
            |expression: &engine::Expression| matches!(expression, Column(name) if name == column);
        // A literal, maybe cast or negated: never NULL (adding NULL is no increment).
        let constant = |expression: &engine::Expression| {
            let mut expression = expression;
            loop {
                match expression {
                    engine::Expression::Cast(operand, _) | engine::Expression::Negate(operand) => {
                        expression = operand
                    }
                    engine::Expression::Constant(value) => return !value.is_null(),
                    _ => return false,
                }
            }
        };
        let increment = match &assignment.expression {
            Binary(engine::expression::Operator::Add, left, right) => {
                (is_self(left) && constant(right)) || (is_self(right) && constant(left))
            }
            Binary(engine::expression::Operator::Subtract, left, right) => {
                is_self(left) && constant(right)
            }
            _ => false,
        };
        if increment {
            candidates.push((at, column));
        } else {
            read_elsewhere.extend(names_of(&assignment.expression));
        }
    }
    let mut positions: Vec<usize> = candidates
        .iter()
        .filter(|(at, column)| {
            let assigned_once = assignments
                .iter()
                .enumerate()
                .all(|(other, assignment)| other == *at || assignment.column != *column);
            let read_by_other = candidates.iter().any(|(other, _)| {
                other != at
                    && names_of(&assignments[*other].expression)
                        .iter()
                        .any(|name| name == column)
            });
            assigned_once && !read_by_other && !read_elsewhere.iter().any(|name| name == column)
        })
        .filter_map(|(_, column)| {
            let position = schema.columns.iter().position(|def| def.name == *column)?;
            let numeric = matches!(
                schema.columns[position].data_type,
                engine::DataType::Int | engine::DataType::BigInt | engine::DataType::Numeric { .. }
            );
            (numeric && !schema.primary_key.contains(&position)).then_some(position)
        })
        .collect();
    positions.sort_unstable();
    positions.dedup();
    positions
}

/// The columns a predicate names, added to `names`.
fn predicate_columns(predicate: &Option<Predicate>, names: &mut Vec<String>) {
    let mut pending: Vec<&Predicate> = predicate.iter().collect();
    while let Some(predicate) = pending.pop() {
        match predicate {
            Predicate::Compare { column, .. }
            | Predicate::In { column, .. }
            | Predicate::Between { column, .. }
            | Predicate::Like { column, .. }
            | Predicate::IsNull { column, .. } => names.push(column.clone()),
            Predicate::And(operands) | Predicate::Or(operands) => pending.extend(operands),
            Predicate::Not(operand) => pending.push(operand),
        }
    }
}

/// The resource of one column of a row: the row's resource, a marker, the name, length-
/// prefixed. (Were it ever equal to another row's resource, that would only add a conflict.)
fn column_resource(row: &[u8], column: &str) -> Vec<u8> {
    let mut resource = row.to_vec();
    resource.push(0xFE);
    resource.extend_from_slice(&(column.len() as u32).to_be_bytes());
    resource.extend_from_slice(column.as_bytes());
    resource
}

/// The columns, other than key columns, that an operation reads or writes on the rows it
/// reaches, for the column-level locks of `column_paths`; `None` for an operation that takes
/// whole rows (or names none of its columns).
fn columns_touched(operation: &Operation, schema: &TableSchema) -> Option<Vec<String>> {
    let mut names: Vec<String> = Vec::new();
    match operation {
        Operation::Select {
            columns, predicate, ..
        } if !columns.is_empty() => {
            names.extend(columns.iter().cloned());
            predicate_columns(predicate, &mut names);
        }
        Operation::Update {
            assignments,
            predicate,
            ..
        } => {
            names.extend(
                assignments
                    .iter()
                    .map(|assignment| assignment.column.clone()),
            );
            predicate_columns(predicate, &mut names);
        }
        Operation::UpdateComputed {
            assignments,
            predicate,
            ..
        } => {
            for assignment in assignments {
                names.push(assignment.column.clone());
                let _ = assignment.expression.map_columns(&mut |name: &String| {
                    names.push(name.clone());
                    Ok::<(), ()>(())
                });
            }
            predicate_columns(predicate, &mut names);
        }
        _ => return None,
    }
    let key_columns: Vec<&str> = schema
        .primary_key
        .iter()
        .map(|&position| schema.columns[position].name.as_str())
        .collect();
    names.retain(|name| !key_columns.contains(&name.as_str()));
    names.sort();
    names.dedup();
    (!names.is_empty()).then_some(names)
}

fn paths_of(
    operations: &[Operation],
    schema: &TableSchema,
    partition_column: usize,
    keys: &[Vec<u8>],
    by_column: bool,
) -> Option<Vec<RowPath>> {
    if keys.len() != 1 || schema.primary_key.first() != Some(&partition_column) {
        return None;
    }
    let options = sql::TableOptions::of(schema);
    let key_columns: Vec<&str> = schema
        .primary_key
        .iter()
        .map(|&position| schema.columns[position].name.as_str())
        .collect();
    let mut paths = Vec::new();
    for operation in operations {
        if operation.table_name() != schema.name {
            return None;
        }
        let prefixes = match operation {
            Operation::Select { predicate, .. }
            | Operation::Delete { predicate, .. }
            | Operation::Aggregate { predicate, .. } => {
                pinned_prefixes(predicate.as_ref()?, schema)
            }
            Operation::Update {
                predicate,
                assignments,
                ..
            } => {
                if assignments
                    .iter()
                    .any(|assignment| key_columns.contains(&assignment.column.as_str()))
                {
                    return None;
                }
                pinned_prefixes(predicate.as_ref()?, schema)
            }
            Operation::UpdateComputed {
                predicate,
                assignments,
                ..
            } => {
                if assignments
                    .iter()
                    .any(|assignment| key_columns.contains(&assignment.column.as_str()))
                {
                    return None;
                }
                pinned_prefixes(predicate.as_ref()?, schema)
            }
            Operation::Insert { columns, rows, .. } => {
                let positions: Option<Vec<usize>> = schema
                    .primary_key
                    .iter()
                    .map(|&key_position| {
                        if columns.is_empty() {
                            Some(key_position)
                        } else {
                            let name = &schema.columns[key_position].name;
                            columns.iter().position(|column| column == name)
                        }
                    })
                    .collect();
                let positions = positions?;
                for row in rows {
                    let prefix: Option<Vec<Value>> = positions
                        .iter()
                        .map(|&position| {
                            row.get(position).filter(|value| !value.is_null()).cloned()
                        })
                        .collect();
                    paths.push(prefix_path(&options, &prefix?));
                }
                continue;
            }
            _ => return None,
        };
        // The columns a whole row's statement reaches, and those it only increments.
        let touched = by_column
            .then(|| columns_touched(operation, schema))
            .flatten();
        let increments: Vec<&str> = touched
            .as_ref()
            .map(|_| blind_increments(operation, schema))
            .unwrap_or_default()
            .into_iter()
            .map(|position| schema.columns[position].name.as_str())
            .collect();
        for prefix in prefixes {
            if prefix.is_empty() {
                return None;
            }
            let path = prefix_path(&options, &prefix);
            if path[0] != keys[0] {
                // Routed by another value than the predicate pins: keep the routed lock.
                return None;
            }
            let columns = touched
                .as_ref()
                .filter(|_| prefix.len() == schema.primary_key.len());
            match columns {
                Some(columns) => {
                    let row = path.last().expect("a path names its row").clone();
                    for column in columns {
                        let mut to_column = path.clone();
                        to_column.push(column_resource(&row, column));
                        if increments.contains(&column.as_str()) {
                            to_column.push(INCREMENT_MARK.to_vec());
                        }
                        paths.push(to_column);
                    }
                }
                None => paths.push(path),
            }
        }
    }
    if paths.iter().any(|path| path[0] != keys[0]) {
        return None;
    }
    paths.sort();
    paths.dedup();
    Some(paths)
}

/// Whether `locks` (with those already `held`) cover every table the operations name: a
/// statement whose locks do not is refused, never run unlocked.
pub fn covers_tables(
    operations: &[Operation],
    locks: &[(Resource, Mode)],
    held: Option<&Transaction>,
) -> bool {
    operations.iter().all(|operation| {
        let table = (operation.table_name().to_string(), None);
        let wanted = if operation.is_read() {
            Mode::IntentShared
        } else {
            Mode::IntentExclusive
        };
        locks
            .iter()
            .filter(|(resource, _)| *resource == table)
            .map(|(_, mode)| *mode)
            .chain(held.and_then(|held| held.locks.get(&table).copied()))
            .any(|mode| mode.covers(wanted))
    })
}

/// The same locks, exclusive where they were shared (`SELECT … FOR UPDATE`): IS becomes IX, S
/// becomes X.
pub fn as_exclusive(locks: Vec<(Resource, Mode)>) -> Vec<(Resource, Mode)> {
    locks
        .into_iter()
        .map(|(resource, mode)| {
            let mode = match mode {
                Mode::IntentShared => Mode::IntentExclusive,
                Mode::Shared | Mode::SharedIntentExclusive => Mode::Exclusive,
                other => other,
            };
            (resource, mode)
        })
        .collect()
}

/// What a gateway sends for one statement of a transaction (`plan_statement`).
#[derive(Clone, Debug, PartialEq)]
pub struct StatementLocks {
    /// The locks the statement carries (its partition admits them).
    pub needed: Vec<(Resource, Mode)>,
    /// The locks to take first at every partition, in one message (`LockRequest`): table
    /// locks the transaction does not hold there yet, and, for a statement that may reach
    /// several partitions, all of them. Empty: send the statement at once.
    pub everywhere: Vec<(Resource, Mode)>,
}

/// Plans the locks of a statement of a transaction that holds `held` table locks at every
/// partition: pinned to `keys` (placement keys; `None`: not pinned, it reaches every
/// partition), `exclusive` for `SELECT … FOR UPDATE`, every table lock taken at every
/// partition (`plan_statement_holding` for intentions where the rows are; module doc). `Err`
/// for DDL.
pub fn plan_statement(
    held: &BTreeMap<String, Mode>,
    operations: &[Operation],
    keys: Option<&[Vec<u8>]>,
    exclusive: bool,
) -> Result<StatementLocks, EngineError> {
    plan_statement_on_paths(held, operations, keys, None, exclusive)
}

/// `plan_statement` with finer row paths (`row_paths`) for a statement pinned to one key.
pub fn plan_statement_on_paths(
    held: &BTreeMap<String, Mode>,
    operations: &[Operation],
    keys: Option<&[Vec<u8>]>,
    paths: Option<&[RowPath]>,
    exclusive: bool,
) -> Result<StatementLocks, EngineError> {
    let holding = Holding {
        everywhere: held,
        wrote: held.values().any(|mode| mode.writes()),
        intentions_here: false,
    };
    plan_statement_holding(&holding, operations, keys, paths, exclusive)
}

/// What a transaction holds, as its gateway plans its next statement's locks.
#[derive(Clone, Copy, Debug)]
pub struct Holding<'a> {
    /// The table locks it holds at every partition.
    pub everywhere: &'a BTreeMap<String, Mode>,
    /// Whether it has written (a statement of it took a writing mode): its reads then take
    /// update intents (`with_update_intent`).
    pub wrote: bool,
    /// A statement pinned to one placement key carries its table's intention lock (IS, IX)
    /// to its one partition, with its row locks, instead of taking it at every partition
    /// first (multiple-granularity locking needs the intention only where the rows are:
    /// `docs/internals/sprint.md`, "Intention locks where the rows are"). Its gateway's
    /// incarnation must be current at every partition first (`TransactionStatement::owner`).
    pub intentions_here: bool,
}

/// `plan_statement_on_paths` for a transaction holding `holding`.
pub fn plan_statement_holding(
    holding: &Holding,
    operations: &[Operation],
    keys: Option<&[Vec<u8>]>,
    paths: Option<&[RowPath]>,
    exclusive: bool,
) -> Result<StatementLocks, EngineError> {
    let held = holding.everywhere;
    let needed = match (keys, paths) {
        (Some(keys), Some(paths)) => {
            assert!(
                paths.iter().all(|path| keys.contains(&path[0])),
                "row paths start at the statement's placement keys"
            );
            locks_needed_on_paths(operations, Some(paths))?
        }
        _ => locks_needed(operations, keys)?,
    };
    let needed = if exclusive {
        as_exclusive(needed)
    } else {
        needed
    };
    let needed = match paths {
        Some(paths) if holding.wrote => with_update_intent(needed, paths),
        _ => needed,
    };
    let several = !matches!(keys, Some(keys) if keys.len() == 1);
    let everywhere = needed
        .iter()
        .filter(|((table, row), mode)| {
            several
                || (row.is_none()
                    && !(holding.intentions_here && mode.is_intention())
                    && held.get(table).is_none_or(|held| !held.covers(*mode)))
        })
        .cloned()
        .collect();
    Ok(StatementLocks { needed, everywhere })
}

/// A transaction that has written reads rows and primary-key prefixes with an update intent
/// (`Mode::Update`) instead of S (columns keep S): it will likely write under what it reads,
/// and two such transactions each holding S and each converting to SIX or X is a deadlock, one
/// of them aborted. With update intents the second waits for the first instead; plain readers
/// are not delayed. Over-locking, never under (it covers S). TPC-C's Payment reads a district's customers by last name after its warehouse
/// and district increments, then updates one of them: with increment locks (which let
/// Payments overlap) that conversion aborted 2–4 % of transactions.
fn with_update_intent(needed: Vec<(Resource, Mode)>, paths: &[RowPath]) -> Vec<(Resource, Mode)> {
    let column_leaf = |resource: &[u8]| {
        paths.iter().any(|path| {
            let path = if is_increment_path(path) {
                &path[..path.len() - 1]
            } else {
                &path[..]
            };
            path.len() >= 2
                && path.last().is_some_and(|leaf| leaf.as_slice() == resource)
                && resource.starts_with(&path[path.len() - 2])
                && resource.get(path[path.len() - 2].len()) == Some(&0xFE)
        })
    };
    let leaves: Vec<&[u8]> = paths
        .iter()
        .filter_map(|path| path.last().map(Vec::as_slice))
        .collect();
    needed
        .into_iter()
        .map(|((table, row), mode)| {
            let leaf = row
                .as_deref()
                .is_some_and(|resource| leaves.contains(&resource) && !column_leaf(resource));
            let mode = if leaf && mode == Mode::Shared {
                Mode::Update
            } else {
                mode
            };
            ((table, row), mode)
        })
        .collect()
}

/// Plans `SELECT … FOR UPDATE | SHARE SKIP LOCKED` (one `Select` of one table): the table's
/// intention (IX for UPDATE, IS for SHARE), at every partition first unless held; the rows are
/// chosen and locked by each partition (`TransactionStatement::skip_locked`). A query that is
/// not one plain select of one table is refused.
pub fn plan_skip_locked(
    held: &BTreeMap<String, Mode>,
    operations: &[Operation],
    keys: Option<&[Vec<u8>]>,
    exclusive: bool,
) -> Result<StatementLocks, EngineError> {
    let [Operation::Select { table, .. }] = operations else {
        return Err(EngineError::FeatureNotSupported {
            feature: "SKIP LOCKED on a query that is not a plain SELECT of one table (a join, a subquery, an aggregate)".into(),
        });
    };
    let mode = if exclusive {
        Mode::IntentExclusive
    } else {
        Mode::IntentShared
    };
    let needed = vec![((table.clone(), None), mode)];
    let several = !matches!(keys, Some(keys) if keys.len() == 1);
    let everywhere = needed
        .iter()
        .filter(|((table, _), mode)| {
            several || held.get(table).is_none_or(|held| !held.covers(*mode))
        })
        .cloned()
        .collect();
    Ok(StatementLocks { needed, everywhere })
}

/// Records table locks taken at every partition (after a granted `LockRequest`).
pub fn hold_tables(held: &mut BTreeMap<String, Mode>, taken: &[(Resource, Mode)]) {
    for ((table, row), mode) in taken {
        if row.is_none() {
            let entry = held.entry(table.clone()).or_insert(*mode);
            *entry = entry.join(*mode);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `first_conflict` answers alike by index (long lists) and by comparing every pair
    /// (short ones): random lists of row locks over a few keys and every mode.
    #[test]
    fn first_conflict_by_index_is_first_conflict_by_pairs() {
        const MODES: [Mode; 7] = [
            Mode::IntentShared,
            Mode::IntentExclusive,
            Mode::Shared,
            Mode::SharedIntentExclusive,
            Mode::Exclusive,
            Mode::Increment,
            Mode::Update,
        ];
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |below: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % below
        };
        let (mut found, mut indexed) = (0, 0);
        for _ in 0..2_000 {
            let list = |length: u64, next: &mut dyn FnMut(u64) -> u64| {
                let mut keys: Vec<u8> = (0..40).collect();
                (0..length)
                    .map(|_| {
                        let key = keys.swap_remove(next(keys.len() as u64) as usize);
                        let mode = MODES[next(MODES.len() as u64) as usize];
                        (("t".to_string(), Some(vec![key])), mode)
                    })
                    .collect::<Vec<(Resource, Mode)>>()
            };
            let wanted = list(1 + next(30), &mut next);
            let theirs = list(1 + next(30), &mut next);
            let pairs = wanted.iter().find(|(resource, mode)| {
                theirs
                    .iter()
                    .any(|(their, their_mode)| their == resource && their_mode.conflicts(*mode))
            });
            assert_eq!(
                first_conflict(&wanted, &theirs),
                pairs,
                "{wanted:?} {theirs:?}"
            );
            found += usize::from(pairs.is_some());
            indexed += usize::from(wanted.len() * theirs.len() > 256);
        }
        assert!(
            found > 500 && indexed > 500,
            "found {found}, indexed {indexed}"
        );
    }

    fn table(name: &str, mode: Mode) -> Vec<(Resource, Mode)> {
        vec![((name.to_string(), None), mode)]
    }

    fn row(name: &str, key: u8, mode: Mode) -> Vec<(Resource, Mode)> {
        let intent = if mode == Mode::Shared {
            Mode::IntentShared
        } else {
            Mode::IntentExclusive
        };
        vec![
            ((name.to_string(), None), intent),
            ((name.to_string(), Some(vec![key])), mode),
        ]
    }

    #[test]
    fn the_matrix_is_symmetric_and_joins_grant_both() {
        use Mode::*;
        let all = [
            IntentShared,
            IntentExclusive,
            Shared,
            SharedIntentExclusive,
            Exclusive,
        ];
        for a in all {
            for b in all {
                assert_eq!(a.conflicts(b), b.conflicts(a), "{a:?} {b:?}");
                let joined = a.join(b);
                assert!(joined.covers(a) && joined.covers(b), "{a:?} {b:?}");
                // A holder of the join conflicts with whatever either conflicts with.
                for c in all {
                    if a.conflicts(c) || b.conflicts(c) {
                        assert!(joined.conflicts(c), "{a:?} {b:?} {c:?}");
                    }
                }
            }
        }
        assert!(!IntentExclusive.conflicts(IntentExclusive));
        assert!(Shared.conflicts(IntentExclusive));
        assert_eq!(IntentExclusive.join(Shared), SharedIntentExclusive);
    }

    /// A request of more locks than `WANTED_SEARCHED_MAX` (a COPY's statement in a
    /// transaction: a lock per row) is deduplicated through an index: the same resource asked
    /// twice is one lock of the joined mode, a conflict with another holder names it, and the
    /// granted locks are exactly the joined ones, as for a short request.
    #[test]
    fn a_long_lock_request_joins_repeated_resources_and_waits_like_a_short_one() {
        let none = |_: &str| None;
        for rows in [8u8, 200] {
            let mut needed: Vec<(Resource, Mode)> = Vec::new();
            for key in 0..rows {
                needed.extend(row("t", key, Mode::Shared));
            }
            // Every row again, in X: each row is one lock, X (S joined with X).
            for key in 0..rows {
                needed.extend(row("t", key, Mode::Exclusive));
            }
            assert_eq!(needed.len() > WANTED_SEARCHED_MAX, rows == 200);
            let mut open = Transactions::default();
            assert_eq!(
                open.admit(9, 90, 90, &row("t", 3, Mode::Shared), none),
                Admission::Run
            );
            assert!(
                matches!(
                    open.admit(1, 100, 100, &needed, none),
                    Admission::Refused(EngineError::TransactionLocked { transaction: 9, .. })
                ),
                "{rows} rows: row 3's S holder is in the way"
            );
            open.end(9, false);
            assert_eq!(
                open.admit(1, 100, 101, &needed, none),
                Admission::Run,
                "{rows} rows"
            );
            let held = &open.get(1).expect("open").locks;
            assert_eq!(
                held.len(),
                1 + usize::from(rows),
                "{rows} rows: the table and each row once"
            );
            assert_eq!(held[&("t".to_string(), None)], Mode::IntentExclusive);
            for key in 0..rows {
                let resource = row("t", key, Mode::Exclusive).pop().expect("the row").0;
                assert_eq!(held[&resource], Mode::Exclusive, "{rows} rows: row {key}");
            }
        }
    }

    #[test]
    fn row_locks_of_different_keys_do_not_conflict_and_a_table_lock_waits_for_rows() {
        let mut open = Transactions::default();
        let none = |_: &str| None;
        assert_eq!(
            open.admit(1, 100, 100, &row("t", 1, Mode::Exclusive), none),
            Admission::Run
        );
        assert_eq!(
            open.admit(2, 200, 200, &row("t", 2, Mode::Exclusive), none),
            Admission::Run
        );
        // 2 wants row 1: waits for 1 (whatever their ages); 1 then wants row 2: a deadlock, 1 dies.
        assert!(matches!(
            open.admit(2, 200, 201, &row("t", 1, Mode::Shared), none),
            Admission::Refused(EngineError::TransactionLocked { transaction: 1, .. })
        ));
        assert_eq!(open.waits_for(2), vec![1]);
        let Admission::Refused(EngineError::SerializationFailure { reason }) =
            open.admit(1, 100, 201, &row("t", 2, Mode::Shared), none)
        else {
            panic!("1 closes the cycle 1 → 2 → 1: it dies")
        };
        assert!(reason.contains("deadlock"), "{reason}");
        assert!(
            open.waits_for(1).is_empty(),
            "a dead requester waits for nothing"
        );
        assert_eq!(open.waits_for(2), vec![1], "2 still waits");
        // A whole-table read conflicts with both writers' intentions.
        assert!(matches!(
            open.admit(0, 50, 202, &table("t", Mode::Shared), none),
            Admission::Refused(EngineError::TransactionLocked { .. })
        ));
    }

    /// Intention locks are taken where the rows are, so two partitions may hold conflicting
    /// table locks of two transactions (a whole-table read's S granted here while it waits
    /// elsewhere for a writer's IX there); a cut that moves the writer's rows here joins
    /// them (`absorb`). Neither may go on under its lock then: each needing its table lock
    /// again waits for the other (a deadlock if both do, one of them dies), instead of
    /// reading or writing the other's rows (found by the simulator, seeds 2494 and 4255: an
    /// audit read a transfer's uncommitted debit).
    #[test]
    fn table_locks_joined_by_an_absorb_are_judged_again_before_use() {
        let none = |_: &str| None;
        let mut here = Transactions::default();
        assert_eq!(
            here.admit(1, 100, 100, &table("t", Mode::Shared), none),
            Admission::Run
        );
        let mut there = Transactions::default();
        let mut write = table("t", Mode::IntentExclusive);
        write.extend(row("t", 5, Mode::Exclusive));
        assert_eq!(there.admit(2, 200, 200, &write, none), Admission::Run);
        here.absorb(there);
        // The reader's next statement needs its S again: it waits for the writer.
        assert!(matches!(
            here.admit(1, 100, 300, &table("t", Mode::Shared), none),
            Admission::Refused(EngineError::TransactionLocked { transaction: 2, .. })
        ));
        assert_eq!(here.waits_for(1), vec![2]);
        // The writer's next statement needs its IX again: it closes the cycle and dies.
        let mut again = table("t", Mode::IntentExclusive);
        again.extend(row("t", 6, Mode::Exclusive));
        assert!(matches!(
            here.admit(2, 200, 301, &again, none),
            Admission::Refused(EngineError::SerializationFailure { .. })
        ));
        // Without the join nothing changes: a held lock needed again is granted at once.
        let mut alone = Transactions::default();
        assert_eq!(
            alone.admit(1, 100, 100, &table("t", Mode::Shared), none),
            Admission::Run
        );
        assert_eq!(
            alone.admit(1, 100, 101, &table("t", Mode::Shared), none),
            Admission::Run
        );
    }

    #[test]
    fn shared_locks_share_and_an_upgrade_waits_until_two_upgrades_deadlock() {
        let mut open = Transactions::default();
        let none = |_: &str| None;
        assert_eq!(
            open.admit(1, 100, 100, &table("t", Mode::Shared), none),
            Admission::Run
        );
        assert_eq!(
            open.admit(2, 200, 200, &table("t", Mode::Shared), none),
            Admission::Run
        );
        // 2 wants exclusive over 1's shared lock: waits (no age decides).
        assert_eq!(
            open.admit(2, 200, 210, &table("t", Mode::Exclusive), none),
            Admission::Refused(EngineError::TransactionLocked {
                table: "t".into(),
                transaction: 1,
                last_ms: 100,
            })
        );
        assert_eq!(open.get(2).unwrap().last_ms, 210, "a waiter is not idle");
        // 1 wants the same: the cycle 1 → 2 → 1, 1 dies; nothing was taken by the refusals.
        assert!(matches!(
            open.admit(1, 100, 260, &table("t", Mode::Exclusive), none),
            Admission::Refused(EngineError::SerializationFailure { .. })
        ));
        assert_eq!(
            open.get(1).unwrap().locks[&("t".to_string(), None)],
            Mode::Shared
        );
        open.end(1, true).unwrap();
        assert!(
            open.wait_edges().is_empty(),
            "an ended holder's in-edges go"
        );
        assert_eq!(
            open.admit(2, 200, 270, &table("t", Mode::Exclusive), none),
            Admission::Run
        );
        assert_eq!(open.get(2).unwrap().last_ms, 270);
    }

    #[test]
    fn a_chain_of_waits_without_a_cycle_waits_and_a_nowait_request_records_no_edge() {
        let mut open = Transactions::default();
        let none = |_: &str| None;
        for id in 1..=3 {
            assert_eq!(
                open.admit(id, 0, 0, &row("t", id as u8, Mode::Exclusive), none),
                Admission::Run
            );
        }
        // 3 → 2 → 1: a chain, everyone waits.
        assert!(matches!(
            open.admit(3, 0, 1, &row("t", 2, Mode::Exclusive), none),
            Admission::Refused(EngineError::TransactionLocked { transaction: 2, .. })
        ));
        assert!(matches!(
            open.admit(2, 0, 1, &row("t", 1, Mode::Exclusive), none),
            Admission::Refused(EngineError::TransactionLocked { transaction: 1, .. })
        ));
        assert_eq!(open.wait_edges(), vec![(2, 1), (3, 2)]);
        // A refusal replaces the waiter's edges; NOWAIT waits for nothing.
        assert!(matches!(
            open.admit_as(3, (0, 2), &row("t", 1, Mode::Shared), none, true),
            Admission::Refused(EngineError::TransactionLocked { transaction: 1, .. })
        ));
        assert_eq!(open.wait_edges(), vec![(2, 1)]);
        // 1 closing 1 → 2 → 1 dies; 1 taking its own row again runs and waits for nothing.
        assert!(matches!(
            open.admit(1, 0, 3, &row("t", 2, Mode::Shared), none),
            Admission::Refused(EngineError::SerializationFailure { .. })
        ));
        assert_eq!(
            open.admit(1, 0, 3, &row("t", 1, Mode::Shared), none),
            Admission::Run
        );
        // A new transaction that waits is recorded before it holds anything.
        assert!(matches!(
            open.admit(9, 0, 4, &row("t", 3, Mode::Shared), none),
            Admission::Refused(EngineError::TransactionLocked { transaction: 3, .. })
        ));
        assert!(open.get(9).is_none() && open.waits_for(9) == vec![3]);
        open.end(9, true);
        assert_eq!(open.wait_edges(), vec![(2, 1)]);
    }

    /// Sprint §4.1 and its Proposition 2: a global transaction never waits for a global one
    /// numbered after it, directly or through local transactions.
    #[test]
    fn a_global_transaction_never_waits_for_one_ordered_after_it() {
        let none = |_: &str| None;
        let mut open = Transactions::default();
        // Globals 1 (first) and 2 (second) hold rows 1 and 2; local 5 holds row 5.
        for id in [1, 2, 5] {
            assert_eq!(
                open.admit(id, 0, 0, &row("t", id as u8, Mode::Exclusive), none),
                Admission::Run
            );
        }
        assert_eq!(open.globalize(1), Ok(0));
        assert_eq!(open.globalize(2), Ok(1));
        assert_eq!(open.globalize(2), Ok(1), "once numbered, always");
        // Directly: 1 waiting for 2 (numbered after it) dies; 2 waiting for 1 waits.
        let Admission::Refused(EngineError::SerializationFailure { reason }) =
            open.admit(1, 0, 1, &row("t", 2, Mode::Shared), none)
        else {
            panic!("1 would wait for 2, ordered after it")
        };
        assert!(reason.contains("execution-order rule"), "{reason}");
        assert!(open.waits_for(1).is_empty());
        assert!(matches!(
            open.admit(2, 0, 1, &row("t", 1, Mode::Shared), none),
            Admission::Refused(EngineError::TransactionLocked { transaction: 1, .. })
        ));
        open.end(2, true);
        // Through a local: 1 → 5 is fine alone (5 is local); 5 → 3 with 3 global after 1
        // closes 1 → 5 → 3, and 5, the requester, dies.
        assert_eq!(
            open.admit(3, 0, 0, &row("t", 3, Mode::Exclusive), none),
            Admission::Run
        );
        assert_eq!(open.globalize(3), Ok(2));
        assert!(matches!(
            open.admit(1, 0, 2, &row("t", 5, Mode::Shared), none),
            Admission::Refused(EngineError::TransactionLocked { transaction: 5, .. })
        ));
        let Admission::Refused(EngineError::SerializationFailure { reason }) =
            open.admit(5, 0, 2, &row("t", 3, Mode::Shared), none)
        else {
            panic!("1 would wait for 3 through 5")
        };
        assert!(reason.contains("execution-order rule"), "{reason}");
        // The other way round is allowed: 3 → 5 → 1 (3 is numbered after 1).
        assert_eq!(
            open.admit(1, 0, 3, &row("t", 1, Mode::Shared), none),
            Admission::Run,
            "1 stops waiting"
        );
        assert!(matches!(
            open.admit(3, 0, 3, &row("t", 5, Mode::Shared), none),
            Admission::Refused(EngineError::TransactionLocked { transaction: 5, .. })
        ));
        assert!(matches!(
            open.admit(5, 0, 3, &row("t", 1, Mode::Shared), none),
            Admission::Refused(EngineError::TransactionLocked { transaction: 1, .. })
        ));
        assert_eq!(open.wait_edges(), vec![(3, 5), (5, 1)]);
        // A fourth global, numbered after 3: 5 waiting for it instead breaks the rule.
        assert_eq!(
            open.admit(4, 0, 0, &row("t", 4, Mode::Exclusive), none),
            Admission::Run
        );
        assert_eq!(open.globalize(4), Ok(3));
        assert!(
            matches!(
                open.admit(5, 0, 4, &row("t", 4, Mode::Shared), none),
                Admission::Refused(EngineError::SerializationFailure { .. })
            ),
            "3 (numbered 2) would wait for 4 (numbered 3) through 5"
        );
        assert_eq!(open.wait_edges(), vec![(3, 5)]);
    }

    /// Sprint's Figure 3, with the other victim: a transaction becoming global when a global
    /// one already waits for it (directly or through locals) goes on; the waiter, numbered
    /// before it, dies at its next request if the new global still holds what it waits for,
    /// and is admitted if it ended.
    #[test]
    fn a_transaction_becoming_global_while_a_global_one_waits_for_it_makes_the_waiter_die() {
        let none = |_: &str| None;
        let mut open = Transactions::default();
        for id in [1, 5, 6] {
            assert_eq!(
                open.admit(id, 0, 0, &row("t", id as u8, Mode::Exclusive), none),
                Admission::Run
            );
        }
        assert_eq!(open.globalize(1), Ok(0));
        // Global 1 → local 5 → local 6: all wait.
        assert!(matches!(
            open.admit(1, 0, 1, &row("t", 5, Mode::Shared), none),
            Admission::Refused(EngineError::TransactionLocked { .. })
        ));
        assert!(matches!(
            open.admit(5, 0, 1, &row("t", 6, Mode::Shared), none),
            Admission::Refused(EngineError::TransactionLocked { .. })
        ));
        // 6 becomes global: 1 waits for it through 5, numbered before it. 6 goes on.
        assert_eq!(open.globalize(6), Ok(1));
        assert_eq!(open.global_sequence(6), Some(1));
        assert_eq!(open.wait_edges(), vec![(1, 5), (5, 6)]);
        // 5 asks again: it waits for 6, and 1 (global 0) would reach 6 (global 1) through it:
        // 5 dies, and its edges go.
        let Admission::Refused(EngineError::SerializationFailure { reason }) =
            open.admit(5, 0, 2, &row("t", 6, Mode::Shared), none)
        else {
            panic!("1 would wait for 6, ordered after it, through 5")
        };
        assert!(reason.contains("execution-order rule"), "{reason}");
        assert_eq!(open.wait_edges(), vec![(1, 5)]);
        // Directly: 7 global waits for 6 before 6 is numbered…
        assert_eq!(open.globalize(7), Ok(2));
        assert!(matches!(
            open.admit(7, 0, 2, &row("t", 6, Mode::Shared), none),
            Admission::Refused(EngineError::TransactionLocked { transaction: 6, .. })
        ));
        // …is allowed (7 is numbered after 6); had 6 ended, a waiter would simply run.
        open.end(6, true);
        assert_eq!(
            open.admit(7, 0, 3, &row("t", 6, Mode::Shared), none),
            Admission::Run
        );
        assert_eq!(open.wait_edges(), vec![(1, 5)]);
        open.end(5, true);
        open.end(7, true);
        assert_eq!(open.wait_edges(), Vec::<(u64, u64)>::new());
        // A waiter numbered before the new global that is still held dies when it asks again.
        assert_eq!(
            open.admit(10, 0, 0, &row("t", 10, Mode::Exclusive), none),
            Admission::Run
        );
        assert!(matches!(
            open.admit(1, 0, 4, &row("t", 10, Mode::Shared), none),
            Admission::Refused(EngineError::TransactionLocked {
                transaction: 10,
                ..
            })
        ));
        assert_eq!(open.globalize(10), Ok(3));
        assert!(matches!(
            open.admit(1, 0, 5, &row("t", 10, Mode::Shared), none),
            Admission::Refused(EngineError::SerializationFailure { .. })
        ));
        assert!(open.waits_for(1).is_empty());
        // 6's number was given up with it.
        assert_eq!(open.global_sequence(6), None);
        // A transaction nobody waits for becomes global, and its record is kept until it ends.
        assert_eq!(open.globalize(8), Ok(4));
        open.end(8, true);
        assert_eq!(open.global_sequence(8), None);
        // A tombstoned transaction cannot become global.
        open.end(10, false);
        assert!(matches!(
            open.globalize(10),
            Err(EngineError::SerializationFailure { .. })
        ));
    }

    fn named(admission: Admission) -> Option<u64> {
        match admission {
            Admission::Refused(EngineError::TransactionLocked { transaction, .. }) => {
                Some(transaction)
            }
            _ => None,
        }
    }

    /// The fair queue: S, S granted; X waits; a later S waits behind the X (it would overtake
    /// it), even when it asks first after the holders end; the X goes first.
    #[test]
    fn a_shared_request_waits_behind_an_earlier_exclusive_waiter() {
        let none = |_: &str| None;
        let mut open = Transactions::default();
        assert_eq!(
            open.admit(1, 0, 0, &row("t", 1, Mode::Shared), none),
            Admission::Run
        );
        assert_eq!(
            open.admit(2, 0, 0, &row("t", 1, Mode::Shared), none),
            Admission::Run
        );
        assert_eq!(
            named(open.admit(3, 0, 1, &row("t", 1, Mode::Exclusive), none)),
            Some(1)
        );
        // 4's S is compatible with the holders' S, but 3 waits for X: 4 waits behind 3.
        let Admission::Refused(EngineError::TransactionLocked {
            transaction: 3,
            last_ms: 1,
            ..
        }) = open.admit(4, 0, 2, &row("t", 1, Mode::Shared), none)
        else {
            panic!("4 waits behind 3, named with 3's stamp")
        };
        assert_eq!(open.wait_edges(), vec![(3, 1), (3, 2), (4, 3)]);
        let order: Vec<u64> = open.queue().into_iter().map(|(id, _)| id).collect();
        assert_eq!(order, vec![3, 4], "queue order is the order of refusals");
        // A waiter asking again keeps its place; its stamp moves.
        assert_eq!(
            named(open.admit(4, 0, 3, &row("t", 1, Mode::Shared), none)),
            Some(3)
        );
        assert_eq!(
            named(open.admit(3, 0, 4, &row("t", 1, Mode::Exclusive), none)),
            Some(1)
        );
        assert_eq!(open.queue()[0].0, 3, "3 kept its place");
        // A new S request, and a new one on another row of the table: the first waits, the
        // second does not conflict with anything and runs.
        assert_eq!(
            named(open.admit(5, 0, 5, &row("t", 1, Mode::Shared), none)),
            Some(3)
        );
        assert_eq!(
            open.admit(6, 0, 5, &row("t", 2, Mode::Shared), none),
            Admission::Run
        );
        open.end(1, true);
        open.end(2, true);
        // 4 asks first after the holders ended: still behind 3.
        assert_eq!(
            named(open.admit(4, 0, 6, &row("t", 1, Mode::Shared), none)),
            Some(3)
        );
        assert_eq!(
            open.admit(3, 0, 7, &row("t", 1, Mode::Exclusive), none),
            Admission::Run
        );
        assert!(
            open.queue().iter().all(|(id, _)| *id != 3),
            "3 left the queue"
        );
        // Now 4 waits for 3 as a holder; when 3 ends, 4 and 5 share.
        assert_eq!(
            named(open.admit(4, 0, 8, &row("t", 1, Mode::Shared), none)),
            Some(3)
        );
        open.end(3, true);
        assert_eq!(
            open.admit(5, 0, 9, &row("t", 1, Mode::Shared), none),
            Admission::Run
        );
        assert_eq!(
            open.admit(4, 0, 9, &row("t", 1, Mode::Shared), none),
            Admission::Run
        );
        assert!(open.queue().is_empty() && open.wait_edges().is_empty());
    }

    /// A queue edge is a waits-for edge: a cycle through it is a deadlock.
    #[test]
    fn a_cycle_through_a_queue_edge_is_a_deadlock() {
        let none = |_: &str| None;
        let mut open = Transactions::default();
        assert_eq!(
            open.admit(1, 0, 0, &row("t", 1, Mode::Shared), none),
            Admission::Run
        );
        assert_eq!(
            open.admit(3, 0, 0, &row("t", 9, Mode::Exclusive), none),
            Admission::Run
        );
        // 2 waits for 1's S; 3 waits behind 2 in the queue (3 → 2, a queue edge).
        assert_eq!(
            named(open.admit(2, 0, 1, &row("t", 1, Mode::Exclusive), none)),
            Some(1)
        );
        assert_eq!(
            named(open.admit(3, 0, 1, &row("t", 1, Mode::Shared), none)),
            Some(2)
        );
        assert_eq!(open.wait_edges(), vec![(2, 1), (3, 2)]);
        // 1 wants 3's row: 1 → 3 → 2 → 1.
        let Admission::Refused(EngineError::SerializationFailure { reason }) =
            open.admit(1, 0, 2, &row("t", 9, Mode::Shared), none)
        else {
            panic!("1 closes a cycle through the queue edge 3 → 2")
        };
        assert!(reason.contains("deadlock"), "{reason}");
        // The dead requester left no place in the queue; the others keep theirs.
        let order: Vec<u64> = open.queue().into_iter().map(|(id, _)| id).collect();
        assert_eq!(order, vec![2, 3]);
    }

    /// Going ahead of a waiter where waiting behind it could only kill: an upgrade (the
    /// waiter waits for the requester anyway), a cycle the queue edge alone would close, and a
    /// global transaction behind a global one numbered after it.
    #[test]
    fn a_request_goes_ahead_where_waiting_behind_could_only_kill() {
        let none = |_: &str| None;
        let mut open = Transactions::default();
        // Upgrade: 1 holds S, 2 waits for X, 1 asks X: granted (2 waited for 1 anyway).
        assert_eq!(
            open.admit(1, 0, 0, &row("t", 1, Mode::Shared), none),
            Admission::Run
        );
        assert_eq!(
            named(open.admit(2, 0, 1, &row("t", 1, Mode::Exclusive), none)),
            Some(1)
        );
        assert_eq!(
            open.admit(1, 0, 2, &row("t", 1, Mode::Exclusive), none),
            Admission::Run
        );
        assert_eq!(open.queue().len(), 1, "2 still waits");
        // Ended ids are never used again (`Transactions::ended`): the next cases start afresh.
        open = Transactions::default();
        // Cycle: 2 waits for X behind holder 1 (S), 1 waits for 3's row; 3 asks S: waiting
        // behind 2 would close 3 → 2 → 1 → 3. 3 goes ahead (S shares with 1's S).
        assert_eq!(
            open.admit(1, 0, 0, &row("t", 1, Mode::Shared), none),
            Admission::Run
        );
        assert_eq!(
            open.admit(3, 0, 0, &row("t", 9, Mode::Exclusive), none),
            Admission::Run
        );
        assert_eq!(
            named(open.admit(2, 0, 1, &row("t", 1, Mode::Exclusive), none)),
            Some(1)
        );
        assert_eq!(
            named(open.admit(1, 0, 1, &row("t", 9, Mode::Shared), none)),
            Some(3)
        );
        assert_eq!(
            open.admit(3, 0, 2, &row("t", 1, Mode::Shared), none),
            Admission::Run
        );
        open = Transactions::default();
        // The rule: globals 1 (numbered 0) and 2 (numbered 1); local 5 holds S. 2 waits for
        // X; 1, asking S, would wait behind 2, numbered after it: it goes ahead. Global 3,
        // numbered after 2, waits behind it.
        assert_eq!(
            open.admit(5, 0, 0, &row("t", 1, Mode::Shared), none),
            Admission::Run
        );
        assert_eq!(open.globalize(1), Ok(0));
        assert_eq!(open.globalize(2), Ok(1));
        assert_eq!(open.globalize(3), Ok(2));
        assert_eq!(
            named(open.admit(2, 0, 1, &row("t", 1, Mode::Exclusive), none)),
            Some(5)
        );
        assert_eq!(
            open.admit(1, 0, 2, &row("t", 1, Mode::Shared), none),
            Admission::Run
        );
        assert_eq!(
            named(open.admit(3, 0, 2, &row("t", 1, Mode::Shared), none)),
            Some(2)
        );
        assert_eq!(
            open.wait_edges(),
            vec![(2, 5), (3, 2)],
            "2 waits for the holder it met, 3 behind 2"
        );
        // A global does not wait behind a local waiter (it may yet be numbered after it):
        // local 6 waits for X on row 7, which local 8 holds S; global 1 asking S goes ahead,
        // local 9 asking S waits behind 6.
        assert_eq!(
            open.admit(8, 0, 3, &row("t", 7, Mode::Shared), none),
            Admission::Run
        );
        assert_eq!(
            named(open.admit(6, 0, 3, &row("t", 7, Mode::Exclusive), none)),
            Some(8)
        );
        assert_eq!(
            open.admit(1, 0, 4, &row("t", 7, Mode::Shared), none),
            Admission::Run
        );
        assert_eq!(
            named(open.admit(9, 0, 4, &row("t", 7, Mode::Shared), none)),
            Some(6)
        );
    }

    /// Waiters that die, ask without waiting, move on, end or are aborted leave the queue;
    /// the queue moves with a copy and joins another partition's at its end.
    #[test]
    fn waiters_leave_the_queue_and_it_moves_with_a_copy() {
        let none = |_: &str| None;
        let mut open = Transactions::default();
        assert_eq!(
            open.admit(1, 0, 0, &row("t", 1, Mode::Exclusive), none),
            Admission::Run
        );
        for id in 2..=5 {
            assert!(named(open.admit(id, 0, 1, &row("t", 1, Mode::Shared), none)).is_some());
        }
        assert_eq!(open.queue().len(), 4);
        // NOWAIT: refused, and no longer waiting.
        assert!(named(open.admit_as(2, (0, 2), &row("t", 1, Mode::Shared), none, true)).is_some());
        open.stop_waiting(3);
        open.end(4, true);
        // 5, never admitted, is aborted as abandoned by another gateway.
        assert!(open.end(5, false).is_none());
        assert!(open.queue().is_empty(), "{:?}", open.queue());
        assert_eq!(open.wait_edges(), Vec::<(u64, u64)>::new());
        // A copy keeps the queue; absorbing it elsewhere appends its waiters in their order.
        assert!(named(open.admit(6, 0, 3, &row("t", 1, Mode::Shared), none)).is_some());
        assert!(named(open.admit(7, 0, 3, &row("t", 1, Mode::Exclusive), none)).is_some());
        let copy = open.copy_where(|_, _| true, |_| None, |_, _| None);
        assert_eq!(copy.queue(), open.queue());
        let mut other = Transactions::default();
        assert_eq!(
            other.admit(8, 0, 0, &row("t", 2, Mode::Exclusive), none),
            Admission::Run
        );
        assert!(named(other.admit(9, 0, 1, &row("t", 2, Mode::Shared), none)).is_some());
        other.absorb(copy);
        let order: Vec<u64> = other.queue().into_iter().map(|(id, _)| id).collect();
        assert_eq!(order, vec![9, 6, 7]);
    }

    #[test]
    fn statements_outside_transactions_wait_for_written_tables_and_exclusive_reads() {
        let mut open = Transactions::default();
        let none = |_: &str| None;
        assert_eq!(
            open.admit(1, 0, 0, &table("r", Mode::Shared), none),
            Admission::Run
        );
        assert_eq!(
            open.admit(1, 0, 0, &table("w", Mode::Exclusive), none),
            Admission::Run
        );
        let names = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert!(open.blocker(&names(&["r"]), &[]).is_none(), "reads share");
        assert!(open.blocker(&[], &names(&["r"])).is_some());
        assert!(open.blocker(&names(&["w"]), &[]).is_some(), "dirty rows");
        assert!(open.blocker(&names(&["x"]), &names(&["y"])).is_none());
    }

    /// A prepared statement writes its tables at its commit, under whatever locks are held
    /// there: a block reading the table meanwhile would see it change between two reads
    /// (found by `sql_read_isolation.rs`: a read-only block's two reads differed, and a
    /// read-modify-write block lost a concurrent two-phase UPDATE's transfer).
    #[test]
    fn a_prepared_statement_blocks_every_lock_on_its_tables_reads_included() {
        let mut open = Transactions::default();
        let held = |table: &str| (table == "t").then_some(9);
        for mode in [
            Mode::IntentShared,
            Mode::Shared,
            Mode::IntentExclusive,
            Mode::SharedIntentExclusive,
            Mode::Exclusive,
        ] {
            assert!(
                matches!(
                    open.admit(1, 0, 0, &table("t", mode), held),
                    Admission::Refused(EngineError::Busy { statement: 9, .. })
                ),
                "{mode:?}"
            );
        }
        let mut row_read = table("t", Mode::IntentShared);
        row_read.extend(row("t", 1, Mode::Shared));
        assert!(matches!(
            open.admit(1, 0, 0, &row_read, held),
            Admission::Refused(EngineError::Busy { statement: 9, .. })
        ));
        assert_eq!(
            open.admit(1, 0, 0, &table("u", Mode::Shared), held),
            Admission::Run,
            "other tables are not held"
        );
    }

    /// The lock modes' algebra, over every pair: conflicts are symmetric, a join covers both
    /// modes and conflicts with at least what either conflicts with, joins commute.
    #[test]
    fn every_pair_of_modes_joins_and_conflicts_consistently() {
        use Mode::*;
        let modes = [
            IntentShared,
            IntentExclusive,
            Shared,
            SharedIntentExclusive,
            Exclusive,
            Increment,
            Update,
        ];
        for a in modes {
            for b in modes {
                assert_eq!(a.conflicts(b), b.conflicts(a), "{a:?} {b:?}");
                let joined = a.join(b);
                assert_eq!(joined, b.join(a), "{a:?} {b:?}");
                assert!(joined.covers(a) && joined.covers(b), "{a:?} {b:?}");
                for c in modes {
                    if a.conflicts(c) || b.conflicts(c) {
                        assert!(joined.conflicts(c), "{a:?}+{b:?} vs {c:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn ddl_is_refused_and_modes_are_the_strongest_needed() {
        let select = Operation::Select {
            table: "t".into(),
            columns: vec![],
            predicate: None,
            limit: None,
        };
        let delete = Operation::Delete {
            table: "t".into(),
            predicate: None,
        };
        assert_eq!(
            locks_needed(&[select.clone(), delete.clone()], None).unwrap(),
            table("t", Mode::Exclusive)
        );
        assert_eq!(
            locks_needed(std::slice::from_ref(&select), None).unwrap(),
            table("t", Mode::Shared)
        );
        assert_eq!(
            locks_needed(&[select], Some(&[vec![7]])).unwrap(),
            row("t", 7, Mode::Shared)
        );
        assert_eq!(
            locks_needed(&[delete], Some(&[vec![7]])).unwrap(),
            row("t", 7, Mode::Exclusive)
        );
        assert!(locks_needed(
            &[Operation::DropTable {
                name: "t".into(),
                if_exists: false
            }],
            None
        )
        .is_err());
    }
}

#[cfg(test)]
mod store_tests {
    use super::{LockRequest, Recent, Transactions, ENDED_MAX};
    use crate::transactions::{
        locks_needed, plan_skip_locked, Mode, Resource, TransactionStatement,
    };
    use crate::{end_operation, sql_operation, transaction_operation, Store};
    use engine::{
        Assignment, ColumnDef, Command, DataType, EngineError, OnConflict, Operation, Outcome,
        Predicate, TableSchema, Value,
    };
    use std::collections::BTreeMap;

    fn store() -> Store {
        let schema = TableSchema::new(
            "t",
            vec![
                ColumnDef::new("id", DataType::BigInt).not_null(),
                ColumnDef::new("n", DataType::BigInt),
            ],
            &["id"],
        )
        .unwrap();
        let mut store = Store::new();
        let create = Command::Execute(Operation::CreateTable { schema });
        store.execute_share(&sql_operation(&create), |_| true);
        store.execute_share(&sql_operation(&Command::Execute(insert(1, 10))), |_| true);
        store
    }

    fn insert(id: i64, n: i64) -> Operation {
        Operation::Insert {
            table: "t".into(),
            columns: Vec::new(),
            rows: vec![vec![Value::BigInt(id), Value::BigInt(n)]],
            on_conflict: OnConflict::Error,
        }
    }

    fn set_n(n: i64) -> Operation {
        Operation::Update {
            table: "t".into(),
            assignments: vec![Assignment::new("n", Value::BigInt(n))],
            predicate: Some(Predicate::equal("id", Value::BigInt(1))),
        }
    }

    fn run(store: &mut Store, transaction: u64, statement: u64, operation: Operation) -> Outcome {
        run_under(store, transaction, statement, operation, 0)
    }

    fn run_under(
        store: &mut Store,
        transaction: u64,
        statement: u64,
        operation: Operation,
        savepoint: u32,
    ) -> Outcome {
        let locks =
            crate::transactions::locks_needed(std::slice::from_ref(&operation), None).unwrap();
        let bytes = transaction_operation(&TransactionStatement {
            transaction,
            statement,
            begin_ms: transaction,
            now_ms: 1_000,
            locks,
            nowait: false,
            command: Command::Batch(vec![operation]).encode(),
            savepoint,
            skip_locked: false,
            await_grant: false,
            owner: None,
        });
        Outcome::decode(&store.execute_share(&bytes, |_| true)).unwrap()
    }

    /// Runs `operation` as transaction `transaction`'s statement with the locks the runtime's
    /// gateway gives a statement pinned to its key (`column_paths`: the row's columns).
    fn run_pinned(
        store: &mut Store,
        transaction: u64,
        statement: u64,
        operation: Operation,
    ) -> Outcome {
        let schema = store.engine.table("t").unwrap().schema.clone();
        let operations = [operation.clone()];
        let keys = crate::transactions::pinned_keys(&operations, &schema).unwrap();
        let paths = crate::transactions::column_paths(&operations, &schema, 0, &keys).unwrap();
        let locks = crate::transactions::locks_needed_on_paths(&operations, Some(&paths)).unwrap();
        let bytes = transaction_operation(&TransactionStatement {
            transaction,
            statement,
            begin_ms: transaction,
            now_ms: 1_000,
            locks,
            nowait: false,
            command: Command::Batch(vec![operation]).encode(),
            savepoint: 0,
            skip_locked: false,
            await_grant: false,
            owner: None,
        });
        Outcome::decode(&store.execute_share(&bytes, |_| true)).unwrap()
    }

    fn set_n_of(id: i64, n: i64) -> Operation {
        Operation::Update {
            table: "t".into(),
            assignments: vec![Assignment::new("n", Value::BigInt(n))],
            predicate: Some(Predicate::equal("id", Value::BigInt(id))),
        }
    }

    fn select_where(predicate: Predicate) -> Command {
        Command::Execute(Operation::Select {
            table: "t".into(),
            columns: Vec::new(),
            predicate: Some(predicate),
            limit: None,
        })
    }

    /// A statement outside transactions pinned to its rows waits only for the transactions
    /// that hold those rows, not for every transaction with an intention on its table (which
    /// kept autocommit statements out while any transaction wrote the table here); whole-table
    /// statements still wait for any writer, and every refusal names the holder.
    #[test]
    fn a_statement_outside_transactions_waits_only_for_the_holders_of_its_rows() {
        let mut store = store();
        send(&mut store, &sql_operation(&Command::Execute(insert(2, 20))));
        assert!(error(&run_pinned(&mut store, 5, 1, set_n_of(1, 11))).is_none());
        let locked = |outcome: &Outcome| {
            matches!(
                error(outcome),
                Some(EngineError::TransactionLocked { transaction: 5, .. })
            )
        };
        // Row 2: nobody holds it.
        let other = send(
            &mut store,
            &sql_operation(&Command::Execute(set_n_of(2, 21))),
        );
        assert!(error(&other).is_none(), "{other:?}");
        let read_other = select_where(Predicate::equal("id", Value::BigInt(2)));
        assert!(store
            .read_share(&sql_operation(&read_other), |_| true)
            .is_some());
        // Row 1: transaction 5 holds it (its uncommitted 11 must not be read or overwritten).
        let same = send(
            &mut store,
            &sql_operation(&Command::Execute(set_n_of(1, 12))),
        );
        assert!(locked(&same), "{same:?}");
        let read_same = select_where(Predicate::equal("id", Value::BigInt(1)));
        assert!(locked(&send(&mut store, &sql_operation(&read_same))));
        assert!(store
            .read_share(&sql_operation(&read_same), |_| true)
            .is_none());
        let both = select_where(Predicate::In {
            column: "id".into(),
            values: vec![Value::BigInt(1), Value::BigInt(2)],
        });
        assert!(locked(&send(&mut store, &sql_operation(&both))));
        // Not pinned: judged on the table, which 5 writes.
        let scan = Command::Execute(Operation::Update {
            table: "t".into(),
            assignments: vec![Assignment::new("n", Value::BigInt(0))],
            predicate: Some(Predicate::equal("n", Value::BigInt(99))),
        });
        assert!(locked(&send(&mut store, &sql_operation(&scan))));
        assert!(locked(&send(
            &mut store,
            &sql_operation(&Command::Execute(insert(1, 13)))
        )));
        assert!(error(&send(
            &mut store,
            &sql_operation(&Command::Execute(insert(3, 30)))
        ))
        .is_none());
        // A two-phase statement pinned to row 2 votes yes beside 5 (which holds row 1, not
        // 2), and until its decision 5 takes no new row of the table (found by the
        // simulator's autocommit transfers: 5 wrote row 2 meanwhile, the statement's commit
        // wrote it under 5's lock, and 5's abort undid the statement's update).
        let prepare =
            crate::prepare_operation(77, &sql_operation(&Command::Execute(set_n_of(2, 22))));
        let vote = send(&mut store, &prepare);
        assert!(error(&vote).is_none(), "{vote:?}");
        let during = run_pinned(&mut store, 5, 2, set_n_of(2, 23));
        assert!(
            matches!(
                error(&during),
                Some(EngineError::Busy { statement: 77, .. })
            ),
            "{during:?}"
        );
        let decided = send(&mut store, &crate::decide_operation(77, true));
        assert!(error(&decided).is_none(), "{decided:?}");
        // The holder ends: row 1 is free.
        send(&mut store, &end_operation(5, true, true));
        assert!(error(&send(
            &mut store,
            &sql_operation(&Command::Execute(set_n_of(1, 12)))
        ))
        .is_none());
        assert_eq!(rows(&store), vec![row(1, 12), row(2, 22), row(3, 30)]);
    }

    fn rows(store: &Store) -> Vec<Vec<Value>> {
        store
            .engine
            .table("t")
            .unwrap()
            .rows
            .values()
            .cloned()
            .collect()
    }

    fn error(outcome: &Outcome) -> Option<&EngineError> {
        match outcome {
            Outcome::Error(error) => Some(error),
            Outcome::Batch(results) => results.iter().find_map(|result| result.as_ref().err()),
            _ => None,
        }
    }

    fn row(id: i64, n: i64) -> Vec<Value> {
        vec![Value::BigInt(id), Value::BigInt(n)]
    }

    fn rollback_to(store: &mut Store, transaction: u64, savepoint: u32) -> Outcome {
        let bytes = crate::rollback_to_operation(transaction, savepoint);
        Outcome::decode(&store.execute_share(&bytes, |_| true)).unwrap()
    }

    /// SAVEPOINT a; …; SAVEPOINT b; …; RELEASE b; …; ROLLBACK TO a: every row is as it was at
    /// a, including those first changed under the released b and changed again after it; the
    /// transaction's own undo still restores the state before it on abort.
    #[test]
    fn rollback_to_a_savepoint_restores_the_rows_as_they_were_when_it_was_taken() {
        for commit in [false, true] {
            let mut store = store();
            let before = rows(&store);
            // Before any savepoint: id 1 becomes 11.
            assert!(error(&run_under(&mut store, 7, 1, set_n(11), 0)).is_none());
            // Under savepoint 1 (a): insert 2.
            assert!(error(&run_under(&mut store, 7, 2, insert(2, 20), 1)).is_none());
            let at_b = vec![row(1, 11), row(2, 20)];
            assert_eq!(rows(&store), at_b);
            // Under savepoint 2 (b): id 1 becomes 12, then b is released (nothing is sent) and
            // id 1 becomes 13 under a again: its entry under b (11) is older and serves a.
            assert!(error(&run_under(&mut store, 7, 3, set_n(12), 2)).is_none());
            assert!(error(&run_under(&mut store, 7, 4, set_n(13), 1)).is_none());
            let open = store.transactions.get(7).unwrap();
            assert_eq!(open.savepoint_undo.len(), 2, "{:?}", open.savepoint_undo);
            // ROLLBACK TO a: 2 written back (absent) and 1 back to 11.
            let outcome = rollback_to(&mut store, 7, 1);
            assert_eq!(
                outcome,
                Outcome::Batch(vec![Ok(engine::Output::Updated { count: 2 })])
            );
            assert_eq!(rows(&store), vec![row(1, 11)]);
            assert!(store.transactions.get(7).unwrap().savepoint_undo.is_empty());
            // Rolling back to it again changes nothing; the savepoint goes on working.
            assert_eq!(
                rollback_to(&mut store, 7, 1),
                Outcome::Batch(vec![Ok(engine::Output::Updated { count: 0 })])
            );
            assert!(error(&run_under(&mut store, 7, 5, insert(3, 30), 1)).is_none());
            assert!(error(&run_under(&mut store, 7, 6, set_n(14), 1)).is_none());
            rollback_to(&mut store, 7, 1);
            assert_eq!(rows(&store), vec![row(1, 11)]);
            store.engine.check_invariants().unwrap();
            store.execute_share(&end_operation(7, commit, true), |_| true);
            assert_eq!(rows(&store), if commit { vec![row(1, 11)] } else { before });
            // A transaction not open here answers an empty batch.
            assert_eq!(rollback_to(&mut store, 7, 1), Outcome::Batch(Vec::new()));
        }
    }

    fn statement(
        transaction: u64,
        locks: Vec<(Resource, Mode)>,
        operation: Operation,
        skip_locked: bool,
    ) -> Vec<u8> {
        transaction_operation(&TransactionStatement {
            transaction,
            statement: 1,
            begin_ms: transaction,
            now_ms: 1_000,
            locks,
            nowait: false,
            command: Command::Batch(vec![operation]).encode(),
            savepoint: 0,
            skip_locked,
            await_grant: false,
            owner: None,
        })
    }

    /// A statement of `transaction` on the rows of placement key `k1` (row locks: the
    /// fair queue), `await_grant` as given; its store operation.
    fn row_statement(
        transaction: u64,
        statement: u64,
        command: Command,
        await_grant: bool,
    ) -> Vec<u8> {
        let locks = crate::transactions::locks_needed(
            crate::transactions::operations_of(&command),
            Some(&[b"k1".to_vec()]),
        )
        .unwrap();
        transaction_operation(&TransactionStatement {
            transaction,
            statement,
            begin_ms: transaction,
            now_ms: 1_000,
            locks,
            nowait: false,
            command: command.encode(),
            savepoint: 0,
            skip_locked: false,
            await_grant,
            owner: None,
        })
    }

    fn send(store: &mut Store, operation: &[u8]) -> Outcome {
        Outcome::decode(&store.execute_share(operation, |_| true)).unwrap()
    }

    fn updated(count: u64) -> Outcome {
        Outcome::Batch(vec![Ok(engine::Output::Updated { count })])
    }

    /// Parks `transaction`'s statement: refused for `holder`'s lock, its ticket taken, with
    /// `reply` attached.
    fn parked(store: &mut Store, operation: &[u8], holder: u64, reply: &[u8]) -> u64 {
        let refused = send(store, operation);
        assert!(
            matches!(
                error(&refused),
                Some(EngineError::TransactionLocked { transaction, .. }) if *transaction == holder
            ),
            "{refused:?}"
        );
        let ticket = store.take_parked().expect("parked");
        store.set_parked_reply(ticket, reply.to_vec());
        assert!(store.take_answered().is_empty(), "not answered yet");
        ticket
    }

    fn answered(store: &mut Store) -> Vec<(u64, Vec<u8>, Outcome)> {
        store
            .take_answered()
            .into_iter()
            .map(|(ticket, reply, outcome)| (ticket, reply, Outcome::decode(&outcome).unwrap()))
            .collect()
    }

    /// Grants at the partition: a statement refused to wait in the row-lock queue, whose
    /// gateway waits for its grant, runs when the holder ends, without being sent again; its
    /// answer comes out under its ticket with its host's reply bytes. Without `await_grant`,
    /// or with NOWAIT, nothing is parked.
    #[test]
    fn a_refused_statement_runs_when_the_holder_ends_without_a_resend() {
        let mut store = store();
        let write = |n| Command::Batch(vec![set_n(n)]);
        assert_eq!(
            send(&mut store, &row_statement(7, 1, write(11), true)),
            updated(1)
        );
        assert_eq!(store.take_parked(), None, "granted at once");
        let ticket = parked(
            &mut store,
            &row_statement(8, 1, write(12), true),
            7,
            b"reply 8",
        );
        assert_eq!(store.transactions.parked_len(), 1);
        // A polling gateway's statement (and a NOWAIT one) is refused, nothing parked; nor
        // does it grant 8.
        assert!(error(&send(&mut store, &row_statement(5, 1, write(5), false))).is_some());
        assert_eq!(store.take_parked(), None);
        let mut nowait: TransactionStatement =
            postcard::from_bytes(&row_statement(6, 1, write(6), true)[1..]).unwrap();
        nowait.nowait = true;
        assert!(error(&send(&mut store, &transaction_operation(&nowait))).is_some());
        assert_eq!(store.take_parked(), None);
        assert!(store.take_answered().is_empty());
        // The holder commits: 8 runs at the end's place, 5 (polling) still waits behind it.
        assert_eq!(send(&mut store, &end_operation(7, true, true)), updated(1));
        assert_eq!(
            answered(&mut store),
            vec![(ticket, b"reply 8".to_vec(), updated(1))]
        );
        assert_eq!(rows(&store), vec![row(1, 12)]);
        assert_eq!(store.transactions.parked_len(), 0);
        assert!(
            store.transactions.get(8).unwrap().locks.len() >= 2,
            "8 holds its locks"
        );
        // Its gateway, had it sent it again, is answered its first outcome: it runs once.
        assert_eq!(
            send(&mut store, &row_statement(8, 1, write(12), true)),
            updated(1)
        );
        assert_eq!(store.take_parked(), None);
        store.execute_share(&end_operation(8, false, true), |_| true);
        assert_eq!(
            rows(&store),
            vec![row(1, 11)],
            "8's abort writes back what 7 committed"
        );
        let _ = answered(&mut store);
    }

    /// Two parked waiters are granted in their order in the queue, each when the one before
    /// it ends; an insert granted once and sent again is not run twice.
    #[test]
    fn two_waiters_are_granted_in_queue_order() {
        let mut store = store();
        let write = |n| Command::Batch(vec![set_n(n)]);
        assert_eq!(
            send(&mut store, &row_statement(7, 1, write(11), true)),
            updated(1)
        );
        let first = parked(&mut store, &row_statement(9, 1, write(19), true), 7, b"9");
        let second = parked(&mut store, &row_statement(8, 1, write(18), true), 7, b"8");
        assert_eq!(
            store
                .transactions
                .queue()
                .into_iter()
                .map(|(id, _)| id)
                .collect::<Vec<_>>(),
            vec![9, 8]
        );
        send(&mut store, &end_operation(7, true, true));
        assert_eq!(
            answered(&mut store),
            vec![(first, b"9".to_vec(), updated(1))]
        );
        assert_eq!(rows(&store), vec![row(1, 19)]);
        // 8 still waits, now for 9.
        assert_eq!(store.transactions.wait_edges(), vec![(8, 9)]);
        send(&mut store, &end_operation(9, true, true));
        assert_eq!(
            answered(&mut store),
            vec![(second, b"8".to_vec(), updated(1))]
        );
        assert_eq!(rows(&store), vec![row(1, 18)]);
        // 8 inserts a row while 7' (10) holds its key: granted at 10's end; the same
        // statement sent again answers its first outcome, no duplicate key.
        let insert_2 = Command::Batch(vec![insert(2, 5)]);
        send(&mut store, &end_operation(8, true, true));
        assert_eq!(
            send(&mut store, &row_statement(10, 1, write(20), true)),
            updated(1)
        );
        let ticket = parked(
            &mut store,
            &row_statement(11, 1, insert_2.clone(), true),
            10,
            b"",
        );
        send(&mut store, &end_operation(10, true, true));
        let granted = answered(&mut store);
        assert_eq!(granted.len(), 1);
        assert_eq!(granted[0].0, ticket);
        assert!(error(&granted[0].2).is_none(), "{granted:?}");
        let again = send(&mut store, &row_statement(11, 1, insert_2, true));
        assert_eq!(again, granted[0].2, "answered its first outcome");
        assert_eq!(rows(&store), vec![row(1, 20), row(2, 5)]);
    }

    /// A parked statement whose transaction moves on (rolls back, rolls back to a savepoint,
    /// is aborted by another gateway) is let go, answered with its refusal, and never runs;
    /// a keyspace cut lets every parked statement go; a grant under a catalog that changed
    /// meanwhile answers `StaleCatalog` and runs nothing.
    #[test]
    fn a_waiter_whose_transaction_rolled_back_is_not_run() {
        let write = |n| Command::Batch(vec![set_n(n)]);
        let moves_on = [
            end_operation(8, false, true),
            crate::rollback_to_operation(8, 1),
            end_operation(8, false, false),
        ];
        for (case, message) in moves_on.iter().enumerate() {
            let mut store = store();
            assert_eq!(
                send(&mut store, &row_statement(7, 1, write(11), true)),
                updated(1)
            );
            let ticket = parked(&mut store, &row_statement(8, 1, write(12), true), 7, b"8");
            send(&mut store, message);
            let let_go = answered(&mut store);
            assert_eq!(let_go.len(), 1, "case {case}");
            assert_eq!(let_go[0].0, ticket);
            assert!(matches!(
                error(&let_go[0].2),
                Some(EngineError::TransactionLocked { transaction: 7, .. })
            ));
            assert_eq!(store.transactions.parked_len(), 0);
            send(&mut store, &end_operation(7, true, true));
            assert!(answered(&mut store).is_empty(), "case {case}: not run");
            assert_eq!(rows(&store), vec![row(1, 11)], "case {case}");
        }
        // A keyspace cut.
        let mut store = store();
        assert_eq!(
            send(&mut store, &row_statement(7, 1, write(11), true)),
            updated(1)
        );
        let ticket = parked(&mut store, &row_statement(8, 1, write(12), true), 7, b"8");
        store.retain_rows_where(|_, _| true);
        let let_go = answered(&mut store);
        assert_eq!(let_go.iter().map(|a| a.0).collect::<Vec<_>>(), vec![ticket]);
        send(&mut store, &end_operation(7, true, true));
        assert!(answered(&mut store).is_empty());
        assert_eq!(rows(&store), vec![row(1, 11)]);
        // A catalog change while parked.
        let mut store = store_with_parked_guarded();
        let other = TableSchema::new(
            "u",
            vec![ColumnDef::new("id", DataType::BigInt).not_null()],
            &["id"],
        )
        .unwrap();
        let create = Command::Execute(Operation::CreateTable { schema: other });
        assert!(error(&send(&mut store, &sql_operation(&create))).is_none());
        send(&mut store, &end_operation(7, true, true));
        let granted = answered(&mut store);
        assert_eq!(granted.len(), 1);
        assert_eq!(error(&granted[0].2), Some(&EngineError::StaleCatalog));
        assert_eq!(rows(&store), vec![row(1, 11)]);
    }

    /// 7 holds row k1; 8's statement, planned under the catalog as it is, is parked.
    fn store_with_parked_guarded() -> Store {
        let mut store = store();
        let write = |n| Command::Batch(vec![set_n(n)]);
        assert_eq!(
            send(&mut store, &row_statement(7, 1, write(11), true)),
            updated(1)
        );
        let guarded = Command::Guarded {
            catalog: store.engine.catalog_digest(),
            command: Box::new(write(12)),
        };
        parked(&mut store, &row_statement(8, 1, guarded, true), 7, b"8");
        store
    }

    /// SKIP LOCKED passes over a row another transaction holds, returns the next one in key
    /// order within the limit, and locks it, so a third worker passes over both.
    #[test]
    fn skip_locked_leaves_out_held_rows_and_locks_what_it_returns() {
        let mut store = store();
        for id in 2..=4 {
            store.execute_share(
                &sql_operation(&Command::Execute(insert(id, id * 10))),
                |_| true,
            );
        }
        let key = crate::rows::placement_key("t", &Value::BigInt(1));
        let update = set_n(11);
        let locks = locks_needed(std::slice::from_ref(&update), Some(&[key])).unwrap();
        let outcome = store.execute_share(&statement(7, locks, update, false), |_| true);
        assert!(error(&Outcome::decode(&outcome).unwrap()).is_none());
        let take_one = Operation::Select {
            table: "t".into(),
            columns: vec!["id".into()],
            predicate: Some(Predicate::compare(
                "n",
                engine::predicate::CompareOp::GreaterOrEqual,
                Value::BigInt(0),
            )),
            limit: Some(1),
        };
        let plan = plan_skip_locked(
            &BTreeMap::new(),
            std::slice::from_ref(&take_one),
            None,
            true,
        )
        .unwrap();
        assert_eq!(
            plan.needed,
            vec![(("t".to_string(), None), Mode::IntentExclusive)]
        );
        let ids = |store: &mut Store, transaction: u64| -> Vec<Vec<Value>> {
            let bytes = statement(transaction, plan.needed.clone(), take_one.clone(), true);
            match Outcome::decode(&store.execute_share(&bytes, |_| true)).unwrap() {
                Outcome::Batch(mut results) => match results.remove(0) {
                    Ok(engine::Output::Rows { rows, .. }) => rows,
                    other => panic!("{other:?}"),
                },
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(ids(&mut store, 8), vec![vec![Value::BigInt(2)]]);
        assert_eq!(ids(&mut store, 9), vec![vec![Value::BigInt(3)]]);
        // The owner of a row is not kept out of it; after 8 ends, its row is free again.
        assert_eq!(ids(&mut store, 9), vec![vec![Value::BigInt(3)]]);
        store.execute_share(&end_operation(8, true, true), |_| true);
        assert_eq!(ids(&mut store, 10), vec![vec![Value::BigInt(2)]]);
        // A join or an aggregate is refused.
        let count = Operation::Delete {
            table: "t".into(),
            predicate: None,
        };
        assert!(plan_skip_locked(&BTreeMap::new(), &[take_one, count], None, true).is_err());
    }

    /// The savepoint undo travels with its rows when part of the partition moves, as the
    /// transaction's undo does (`copy_where` / `absorb`).
    #[test]
    fn savepoint_undo_moves_with_its_rows() {
        let mut store = store();
        assert!(error(&run_under(&mut store, 7, 1, insert(2, 20), 1)).is_none());
        assert!(error(&run_under(&mut store, 7, 2, set_n(11), 1)).is_none());
        let moved = store.transactions_where(|_, row| row[0] == Value::BigInt(2));
        let kept = store.transactions_where(|_, row| row[0] == Value::BigInt(1));
        assert_eq!(moved.get(7).unwrap().savepoint_undo.len(), 1);
        assert_eq!(kept.get(7).unwrap().savepoint_undo.len(), 1);
        let mut joined = kept.clone();
        joined.absorb(moved);
        assert_eq!(joined.get(7).unwrap().savepoint_undo.len(), 2);
    }

    /// Sim seed 347 (with blind increments): a statement ran where its row was, the row
    /// moved to a group where the transaction was already open (its table locks reach every
    /// partition), and a resend of the statement ran again there: `absorb` merged locks and
    /// undo but not the last write's outcome. It merges the latest now, and the statement
    /// high-water.
    #[test]
    fn the_last_writes_outcome_moves_into_a_group_that_has_the_transaction_open() {
        let mut store = store();
        assert!(error(&run(&mut store, 7, 1, insert(2, 20))).is_none());
        assert!(error(&run(&mut store, 7, 2, set_n(11))).is_none());
        let moved = store.transactions_where(|_, row| row[0] == Value::BigInt(2));
        assert_eq!(
            moved.get(7).unwrap().last_write.as_ref().map(|(n, _)| *n),
            Some(2)
        );
        // The receiving group knows the transaction from an earlier message only.
        let mut receiving = store.transactions_where(|_, _| false);
        receiving.get_mut(7).unwrap().last_write = None;
        receiving.get_mut(7).unwrap().statement = 1;
        receiving.absorb(moved);
        let joined = receiving.get(7).unwrap();
        assert_eq!(joined.last_write.as_ref().map(|(n, _)| *n), Some(2));
        assert_eq!(joined.statement, 2);
    }

    #[test]
    fn an_abort_writes_every_changed_row_back_and_a_commit_keeps_them() {
        for commit in [false, true] {
            let mut store = store();
            let before = rows(&store);
            assert!(error(&run(&mut store, 7, 1, insert(2, 20))).is_none());
            assert!(error(&run(&mut store, 7, 2, set_n(11))).is_none());
            let delete = Operation::Delete {
                table: "t".into(),
                predicate: Some(Predicate::equal("id", Value::BigInt(2))),
            };
            assert!(error(&run(&mut store, 7, 3, delete)).is_none());
            let during = rows(&store);
            assert_eq!(during, vec![vec![Value::BigInt(1), Value::BigInt(11)]]);
            store.execute_share(&end_operation(7, commit, true), |_| true);
            assert!(store.transactions.is_empty());
            assert_eq!(rows(&store), if commit { during } else { before });
            store.engine.check_invariants().unwrap();
        }
    }

    #[test]
    fn a_statement_sent_again_answers_its_first_outcome_without_running_twice() {
        let mut store = store();
        let increment = Operation::UpdateComputed {
            table: "t".into(),
            assignments: vec![engine::ComputedAssignment::new(
                "n",
                engine::Expression::Binary(
                    engine::expression::Operator::Add,
                    Box::new(engine::Expression::Column("n".into())),
                    Box::new(engine::Expression::Constant(Value::BigInt(1))),
                ),
            )],
            predicate: None,
        };
        let first = run(&mut store, 7, 1, increment.clone());
        let again = run(&mut store, 7, 1, increment);
        assert_eq!(first, again);
        assert_eq!(
            rows(&store),
            vec![vec![Value::BigInt(1), Value::BigInt(11)]]
        );
    }

    #[test]
    fn others_wait_for_the_locks_whatever_their_age() {
        let mut store = store();
        assert!(error(&run(&mut store, 7, 1, set_n(11))).is_none());
        // Autocommit: a write and a read of the exclusively locked table wait.
        let write = sql_operation(&Command::Batch(vec![set_n(0)]));
        let refused = Outcome::decode(&store.execute_share(&write, |_| true)).unwrap();
        assert!(matches!(
            error(&refused),
            Some(EngineError::TransactionLocked { transaction: 7, .. })
        ));
        let select = Operation::Select {
            table: "t".into(),
            columns: vec![],
            predicate: None,
            limit: None,
        };
        let read = sql_operation(&Command::Batch(vec![select.clone()]));
        let refused = Outcome::decode(&store.execute_share(&read, |_| true)).unwrap();
        assert!(matches!(
            error(&refused),
            Some(EngineError::TransactionLocked { .. })
        ));
        // Another transaction waits, whatever its age; one that would close a cycle dies.
        assert!(matches!(
            error(&run(&mut store, 3, 1, select.clone())),
            Some(EngineError::TransactionLocked { transaction: 7, .. })
        ));
        assert!(matches!(
            error(&run(&mut store, 9, 1, select.clone())),
            Some(EngineError::TransactionLocked { transaction: 7, .. })
        ));
        assert_eq!(store.transactions.wait_edges(), vec![(3, 7), (9, 7)]);
        // Globalize through the store: 9 global first, then 7 (which 9 waits for): 7 goes on,
        // and 9, asking again while 7 holds, dies.
        let globalize = |id| crate::globalize_operation(id);
        let answer = Outcome::decode(&store.execute_share(&globalize(9), |_| true)).unwrap();
        assert_eq!(answer, Outcome::Batch(Vec::new()));
        let answer = Outcome::decode(&store.execute_share(&globalize(7), |_| true)).unwrap();
        assert_eq!(answer, Outcome::Batch(Vec::new()));
        assert!(matches!(
            error(&run(&mut store, 9, 1, select.clone())),
            Some(EngineError::SerializationFailure { .. })
        ));
        assert_eq!(
            rows(&store),
            vec![vec![Value::BigInt(1), Value::BigInt(11)]]
        );
        store.execute_share(&end_operation(7, true, true), |_| true);
        let ran = Outcome::decode(&store.execute_share(&write, |_| true)).unwrap();
        assert!(error(&ran).is_none());
    }

    #[test]
    fn a_transaction_aborted_by_another_gateway_cannot_go_on_under_its_id() {
        let mut store = store();
        assert!(error(&run(&mut store, 7, 1, set_n(11))).is_none());
        store.execute_share(&end_operation(7, false, false), |_| true);
        assert_eq!(
            rows(&store),
            vec![vec![Value::BigInt(1), Value::BigInt(10)]]
        );
        assert!(matches!(
            error(&run(&mut store, 7, 2, set_n(12))),
            Some(EngineError::SerializationFailure { .. })
        ));
        assert_eq!(
            rows(&store),
            vec![vec![Value::BigInt(1), Value::BigInt(10)]]
        );
        // Its own gateway's commit is refused, and forgets the tombstone.
        let commit = Outcome::decode(&store.execute_share(&end_operation(7, true, true), |_| true));
        assert!(matches!(
            error(&commit.unwrap()),
            Some(EngineError::SerializationFailure { .. })
        ));
        assert!(store.transactions.aborted.is_empty());
        assert_eq!(
            rows(&store),
            vec![vec![Value::BigInt(1), Value::BigInt(10)]]
        );
    }

    /// Seed 1341 of the simulator's transactional sweep: an attempt of an UPDATE its gateway
    /// had sent again (and gone on from) was delivered after the transaction committed. Taken
    /// for a new start, it wrote its value over a later commit and held the row's lock.
    #[test]
    fn a_late_message_of_an_ended_transaction_is_refused_and_opens_nothing() {
        let mut store = store();
        assert!(error(&run(&mut store, 7, 1, set_n(11))).is_none());
        store.execute_share(&end_operation(7, true, true), |_| true);
        assert!(error(&run(&mut store, 8, 1, set_n(20))).is_none());
        store.execute_share(&end_operation(8, true, true), |_| true);
        assert_eq!(rows(&store), vec![row(1, 20)]);
        // The late copy of 7's first statement.
        assert!(matches!(
            error(&run(&mut store, 7, 1, set_n(11))),
            Some(EngineError::SerializationFailure { .. })
        ));
        assert_eq!(rows(&store), vec![row(1, 20)], "no write");
        assert!(store.transactions.get(7).is_none(), "no lock");
        assert!(store.transactions.has_ended(7) && store.transactions.has_ended(8));
        // Nor does a late table-lock request or Globalize open it.
        let lock = crate::owned_lock_operation(
            &LockRequest {
                transaction: 7,
                begin_ms: 7,
                now_ms: 1_000,
                locks: locks_needed(&[set_n(0)], None).unwrap(),
                nowait: false,
            },
            3,
        );
        assert!(error(&Outcome::decode(&store.execute_share(&lock, |_| true)).unwrap()).is_some());
        assert_eq!(store.transactions.owner(7), None);
        assert!(store.transactions.globalize(7).is_err());
        assert!(store.transactions.get(7).is_none());
        // Another transaction takes the row at once.
        assert!(error(&run(&mut store, 9, 1, set_n(30))).is_none());
        assert_eq!(rows(&store), vec![row(1, 30)]);
        // A transaction this partition never saw leaves a tombstone at its end too (the end
        // goes to every partition; its late message may come here).
        store.execute_share(&end_operation(10, false, true), |_| true);
        assert!(store.transactions.has_ended(10));
        assert!(error(&run(&mut store, 10, 1, set_n(40))).is_some());
        assert_eq!(rows(&store), vec![row(1, 30)]);
    }

    /// A statement sent again and answered, then the transaction's next statement: the first
    /// attempt of the earlier one, delivered now, is refused, not run after its successor.
    #[test]
    fn a_late_attempt_of_a_statement_the_transaction_went_on_from_is_refused() {
        let mut store = store();
        assert!(error(&run(&mut store, 7, 1, set_n(11))).is_none());
        assert!(error(&run(&mut store, 7, 2, set_n(12))).is_none());
        assert!(matches!(
            error(&run(&mut store, 7, 1, set_n(11))),
            Some(EngineError::SerializationFailure { .. })
        ));
        assert_eq!(rows(&store), vec![row(1, 12)]);
        // The same statement again answers what it answered (it ran here).
        assert!(error(&run(&mut store, 7, 2, set_n(12))).is_none());
        store.execute_share(&end_operation(7, false, true), |_| true);
        assert_eq!(rows(&store), vec![row(1, 10)], "the abort restores the row");
    }

    /// The ended transactions go with a copy and a snapshot; the most recent `ENDED_MAX` are
    /// kept, the oldest by arrival forgotten first (not the lowest id).
    #[test]
    fn ended_transactions_move_with_copies_and_snapshots_and_are_bounded() {
        use vr::StateMachine;
        let mut store = store();
        assert!(error(&run(&mut store, 7, 1, set_n(11))).is_none());
        store.execute_share(&end_operation(7, true, true), |_| true);
        let mut other = Store::new();
        other.absorb_transactions(store.transactions_where(|_, _| true));
        assert!(other.transactions.has_ended(7));
        let mut restored = Store::new();
        restored.restore(&store.snapshot()).unwrap();
        assert!(restored.transactions.has_ended(7));

        let mut ended = Transactions::default();
        let high = 1u64 << 40;
        ended.end(high, true);
        for id in 1..=ENDED_MAX as u64 {
            ended.end(id, true);
        }
        assert_eq!(ended.ended_len(), ENDED_MAX);
        assert!(!ended.has_ended(high), "the oldest went first");
        assert!(ended.has_ended(1) && ended.has_ended(ENDED_MAX as u64));
        // Received bytes with duplicates decode to the set they name.
        let bytes =
            postcard::to_allocvec(&std::collections::VecDeque::from(vec![3u64, 3, 4])).unwrap();
        let recent: Recent<u64, ENDED_MAX> = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(recent.len(), 2);
    }

    #[test]
    fn transactions_survive_a_snapshot() {
        use vr::StateMachine;
        let mut store = store();
        assert!(error(&run(&mut store, 7, 1, set_n(11))).is_none());
        let mut restored = Store::new();
        restored.restore(&store.snapshot()).unwrap();
        assert_eq!(restored.transactions, store.transactions);
        restored.execute_share(&end_operation(7, false, true), |_| true);
        assert_eq!(
            rows(&restored),
            vec![vec![Value::BigInt(1), Value::BigInt(10)]]
        );
    }

    /// `owned_lock_operation`: transaction `transaction`'s table locks for `operation`, from the
    /// gateway of storage process `owner`.
    fn owned_lock(
        store: &mut Store,
        transaction: u64,
        owner: u64,
        operation: &Operation,
    ) -> Outcome {
        let locks = locks_needed(std::slice::from_ref(operation), None).unwrap();
        let request = crate::transactions::LockRequest {
            transaction,
            begin_ms: transaction,
            now_ms: 1_000,
            locks,
            nowait: false,
        };
        send(store, &crate::owned_lock_operation(&request, owner))
    }

    /// The owner an old gateway's `owned_lock_operation` names: incarnation 0.
    fn legacy(process: u64) -> super::Owner {
        super::Owner {
            process,
            incarnation: 0,
        }
    }

    fn owner(process: u64, incarnation: u64) -> super::Owner {
        super::Owner {
            process,
            incarnation,
        }
    }

    /// `incarnation_lock_operation`: transaction `transaction`'s table locks for `operation`,
    /// from the gateway `owner`.
    fn incarnation_lock(
        store: &mut Store,
        transaction: u64,
        owner: super::Owner,
        operation: &Operation,
    ) -> Outcome {
        let locks = locks_needed(std::slice::from_ref(operation), None).unwrap();
        let request = crate::transactions::LockRequest {
            transaction,
            begin_ms: transaction,
            now_ms: 1_000,
            locks,
            nowait: false,
        };
        send(store, &crate::incarnation_lock_operation(&request, owner))
    }

    fn incarnation_dead(outcome: &Outcome) -> Option<(u64, u64)> {
        match error(outcome) {
            Some(EngineError::IncarnationDead {
                process,
                incarnation,
            }) => Some((*process, *incarnation)),
            _ => None,
        }
    }

    /// Gap 1 of "A gateway restarted before it is suspected": storage process 5 restarts
    /// before anyone suspects it. Its new incarnation's first table lock, at its place in the
    /// order, aborts the old incarnation's transaction (write undone, a tombstone, the
    /// statement parked behind it granted there and then), and the old incarnation is dead:
    /// a late lock request of it is refused (`IncarnationDead`) and opens nothing.
    #[test]
    fn a_new_incarnations_first_lock_aborts_the_old_incarnations_transactions() {
        let mut store = store();
        let write = |n| Command::Batch(vec![set_n(n)]);
        let request = |transaction| crate::transactions::LockRequest {
            transaction,
            begin_ms: transaction,
            now_ms: 1_000,
            locks: vec![(("t".to_string(), None), Mode::IntentExclusive)],
            nowait: false,
        };
        let old = owner(5, 0xa1);
        let new = owner(5, 0xb2);
        assert_eq!(
            send(
                &mut store,
                &crate::incarnation_lock_operation(&request(7), old)
            ),
            Outcome::Batch(Vec::new())
        );
        assert_eq!(
            send(
                &mut store,
                &crate::incarnation_lock_operation(&request(8), owner(6, 1))
            ),
            Outcome::Batch(Vec::new())
        );
        assert_eq!(
            send(&mut store, &row_statement(7, 1, write(11), true)),
            updated(1)
        );
        let ticket = parked(&mut store, &row_statement(8, 1, write(12), true), 7, b"8");
        assert_eq!(store.transactions.incarnations().current(5), Some(0xa1));
        // The restarted gateway's first transaction.
        assert_eq!(
            send(
                &mut store,
                &crate::incarnation_lock_operation(&request(9), new)
            ),
            Outcome::Batch(Vec::new())
        );
        assert!(store.transactions.was_aborted(7));
        assert_eq!(store.transactions.owned_by(5), vec![9]);
        assert_eq!(store.transactions.owner(9), Some(new));
        assert_eq!(
            answered(&mut store),
            vec![(ticket, b"8".to_vec(), updated(1))],
            "8 ran at the new incarnation's lock"
        );
        assert_eq!(rows(&store), vec![row(1, 12)]);
        assert!(store.transactions.incarnations().is_dead(old));
        assert!(!store.transactions.incarnations().is_dead(new));
        assert_eq!(store.transactions.incarnations().current(5), Some(0xb2));
        // The old incarnation's statement and COMMIT meet the tombstone.
        assert!(matches!(
            error(&run(&mut store, 7, 2, set_n(13))),
            Some(EngineError::SerializationFailure { .. })
        ));
        // A late table lock of the old incarnation (a transaction it began as it died).
        assert_eq!(
            incarnation_dead(&incarnation_lock(&mut store, 10, old, &set_n(14))),
            Some((5, 0xa1))
        );
        assert!(store.transactions.get(10).is_none());
        assert_eq!(store.transactions.owner(10), None);
        assert_eq!(store.transactions.owned_by(5), vec![9]);
        // The current incarnation's next transactions go on; another process's are untouched.
        assert_eq!(
            send(
                &mut store,
                &crate::incarnation_lock_operation(&request(11), new)
            ),
            Outcome::Batch(Vec::new())
        );
        assert_eq!(store.transactions.owned_by(5), vec![9, 11]);
        assert_eq!(store.transactions.owned_by(6), vec![8]);
        store.transactions.check_incarnations();
    }

    /// A statement that names its owner (`TransactionStatement::owner`, sent once the
    /// gateway's incarnation is current everywhere) takes its table's intention here with its
    /// rows and makes its owner the transaction's; it never changes the incarnations: one
    /// naming a dead incarnation, or one this partition has not taken as current, is refused
    /// (`IncarnationDead`) and opens nothing. A suspicion aborts what the statements opened.
    #[test]
    fn a_statement_owns_its_transaction_only_for_the_current_incarnation() {
        let mut store = store();
        let owned_statement = |transaction, owner| {
            let mut statement: TransactionStatement = postcard::from_bytes(
                &row_statement(transaction, 1, Command::Batch(vec![set_n(11)]), false)[1..],
            )
            .unwrap();
            statement.owner = Some(owner);
            transaction_operation(&statement)
        };
        let current = owner(5, 1);
        // Not yet current here (never announced): refused, nothing opened, nothing adopted.
        assert_eq!(
            incarnation_dead(&send(&mut store, &owned_statement(7, current))),
            Some((5, 1))
        );
        assert!(store.transactions.get(7).is_none());
        assert_eq!(store.transactions.incarnations().current(5), None);
        // Announced by a table lock of another transaction: the statement runs and owns 8.
        let announce = crate::transactions::LockRequest {
            transaction: 6,
            begin_ms: 6,
            now_ms: 1_000,
            locks: vec![(("t".to_string(), None), Mode::IntentShared)],
            nowait: false,
        };
        assert_eq!(
            send(
                &mut store,
                &crate::incarnation_lock_operation(&announce, current)
            ),
            Outcome::Batch(Vec::new())
        );
        assert_eq!(send(&mut store, &owned_statement(8, current)), updated(1));
        assert_eq!(store.transactions.owner(8), Some(current));
        assert!(store
            .transactions
            .get(8)
            .unwrap()
            .locks
            .contains_key(&("t".to_string(), None)));
        // Another incarnation of the process, not adopted by a statement.
        assert_eq!(
            incarnation_dead(&send(&mut store, &owned_statement(9, owner(5, 2)))),
            Some((5, 2))
        );
        assert_eq!(store.transactions.incarnations().current(5), Some(1));
        assert!(store.transactions.get(9).is_none());
        // The suspicion aborts 6 and 8 (8's write undone); a late statement is refused.
        assert_eq!(
            send(&mut store, &crate::abort_owned_operation(5)),
            updated(2)
        );
        assert_eq!(rows(&store), vec![row(1, 10)]);
        assert_eq!(
            incarnation_dead(&send(&mut store, &owned_statement(10, current))),
            Some((5, 1))
        );
        assert!(store.transactions.get(10).is_none());
        store.transactions.check_incarnations();
    }

    /// Gap 2: a suspicion of process 5 aborts its transactions and makes its current
    /// incarnation dead, so a table lock of that incarnation still in flight when the suspicion
    /// was sequenced is refused and opens nothing (before, it opened a transaction owned after
    /// the suspicion, which kept its locks until the 20 s rule). A new incarnation then owns
    /// transactions again; a gateway told `IncarnationDead` (a false suspicion) takes one.
    #[test]
    fn a_suspicion_makes_the_current_incarnation_dead_and_refuses_its_late_lock() {
        let mut store = store();
        let first = owner(5, 1);
        assert_eq!(
            incarnation_lock(&mut store, 7, first, &set_n(11)),
            Outcome::Batch(Vec::new())
        );
        assert!(error(&run(&mut store, 7, 1, set_n(11))).is_none());
        assert_eq!(
            send(&mut store, &crate::abort_owned_operation(5)),
            updated(1)
        );
        assert_eq!(rows(&store), vec![row(1, 10)]);
        assert_eq!(store.transactions.incarnations().current(5), None);
        assert!(store.transactions.incarnations().is_dead(first));
        // The late first lock of 8 (same incarnation).
        assert_eq!(
            incarnation_dead(&incarnation_lock(&mut store, 8, first, &set_n(12))),
            Some((5, 1))
        );
        assert!(store.transactions.get(8).is_none());
        assert!(store.transactions.owned_by(5).is_empty());
        // Nothing holds the row: another process's transaction takes it at once.
        assert_eq!(
            incarnation_lock(&mut store, 9, owner(6, 1), &set_n(13)),
            Outcome::Batch(Vec::new())
        );
        assert!(error(&run(&mut store, 9, 1, set_n(13))).is_none());
        assert_eq!(send(&mut store, &end_operation(9, true, true)), updated(1));
        // A second suspicion with no current incarnation changes nothing.
        assert_eq!(
            send(&mut store, &crate::abort_owned_operation(5)),
            updated(0)
        );
        // The gateway's next incarnation.
        assert_eq!(
            incarnation_lock(&mut store, 10, owner(5, 2), &set_n(14)),
            Outcome::Batch(Vec::new())
        );
        assert_eq!(store.transactions.incarnations().current(5), Some(2));
        store.transactions.check_incarnations();
    }

    /// Seed 9327: a gateway crashed right after sending its new incarnation's first table
    /// lock, which no partition had adopted when the suspicion arrived (it killed the
    /// incarnation current then, an older one), and the lock, ordered after it, was adopted
    /// and held until the 20 s rule. A suspicion with a bound kills every incarnation up to
    /// it: the late lock is refused and opens nothing; a later incarnation is adopted; a
    /// snapshot and an absorb keep the bound.
    #[test]
    fn a_suspicion_with_a_bound_refuses_an_unadopted_incarnations_late_lock() {
        use vr::StateMachine;
        let mut store = store();
        assert_eq!(
            incarnation_lock(&mut store, 7, owner(5, 1), &set_n(11)),
            Outcome::Batch(Vec::new())
        );
        send(&mut store, &end_operation(7, true, true));
        // Incarnation 3 crashed with its first lock in flight; the suspicion's bound is 3.
        assert_eq!(
            send(&mut store, &crate::abort_owned_through_operation(5, 3)),
            updated(0)
        );
        assert!(store.transactions.incarnations().is_dead(owner(5, 1)));
        assert_eq!(
            incarnation_dead(&incarnation_lock(&mut store, 8, owner(5, 3), &set_n(12))),
            Some((5, 3))
        );
        assert!(store.transactions.get(8).is_none());
        assert!(store.transactions.incarnations().is_dead(owner(5, 2)));
        // The old message without an incarnation is never judged.
        assert!(!store.transactions.incarnations().is_dead(owner(5, 0)));
        let mut restored = Store::new();
        restored.restore(&store.snapshot()).unwrap();
        assert!(restored.transactions.incarnations().is_dead(owner(5, 3)));
        let mut joined = store.transactions_where(|_, _| true);
        joined.absorb(Transactions::default());
        assert!(joined.incarnations().is_dead(owner(5, 3)));
        let mut behind = Transactions::default();
        behind.absorb(store.transactions_where(|_, _| true));
        assert!(behind.incarnations().is_dead(owner(5, 2)));
        // The next incarnation, started after the suspicion's bound.
        assert_eq!(
            incarnation_lock(&mut store, 9, owner(5, 4), &set_n(13)),
            Outcome::Batch(Vec::new())
        );
        assert_eq!(store.transactions.incarnations().current(5), Some(4));
        store.transactions.check_incarnations();
    }

    /// The incarnations are replicated state: they survive a snapshot, move with a copy, and
    /// an absorb takes, per process, the current incarnation of the side that saw more
    /// changes (the other is behind in the same order), never a dead one, and the union of
    /// the dead ones.
    #[test]
    fn incarnations_survive_a_snapshot_and_the_copy_ahead_wins_an_absorb() {
        use vr::StateMachine;
        let mut store = store();
        incarnation_lock(&mut store, 7, owner(5, 1), &set_n(11));
        send(&mut store, &end_operation(7, true, true));
        // A copy taken here is behind what follows.
        let behind = store.transactions_where(|_, _| true);
        incarnation_lock(&mut store, 8, owner(5, 2), &set_n(12));
        send(&mut store, &end_operation(8, true, true));
        incarnation_lock(&mut store, 9, owner(6, 1), &set_n(13));
        send(&mut store, &crate::abort_owned_operation(6));
        let mut restored = Store::new();
        restored.restore(&store.snapshot()).unwrap();
        assert_eq!(
            restored.transactions.incarnations(),
            store.transactions.incarnations()
        );
        assert_eq!(
            incarnation_dead(&incarnation_lock(
                &mut restored,
                10,
                owner(5, 1),
                &set_n(14)
            )),
            Some((5, 1))
        );
        let ahead = store.transactions_where(|_, _| true);
        assert_eq!(ahead.incarnations(), store.transactions.incarnations());
        // The behind side absorbs the copy ahead: it catches up.
        let mut receiver = behind.clone();
        assert_eq!(receiver.incarnations().current(5), Some(1));
        receiver.absorb(ahead.clone());
        assert_eq!(receiver.incarnations(), ahead.incarnations());
        // The side ahead absorbs a copy behind it: nothing goes back.
        let mut receiver = ahead.clone();
        receiver.absorb(behind.clone());
        assert_eq!(receiver.incarnations().current(5), Some(2));
        assert_eq!(receiver.incarnations().current(6), None);
        assert!(receiver.incarnations().is_dead(owner(5, 1)));
        assert!(receiver.incarnations().is_dead(owner(6, 1)));
        // An empty partition (a new group) takes everything.
        let mut receiver = Transactions::default();
        receiver.absorb(ahead.clone());
        assert_eq!(receiver.incarnations(), ahead.incarnations());
        receiver.check_incarnations();
    }

    /// A suspicion of storage process 5 aborts every transaction its gateway owns here, the
    /// one holding locks (its write undone, its locks released, a tombstone: its later
    /// statements and its COMMIT are refused with 40001) and the one only waiting, and no other
    /// process's: 8 (owner 6), which waited, is then admitted.
    #[test]
    fn a_suspicion_aborts_every_transaction_its_process_owns_and_no_other() {
        let mut store = store();
        assert_eq!(
            owned_lock(&mut store, 7, 5, &set_n(11)),
            Outcome::Batch(Vec::new())
        );
        assert!(error(&run(&mut store, 7, 1, set_n(11))).is_none());
        assert!(matches!(
            error(&owned_lock(&mut store, 8, 6, &set_n(12))),
            Some(EngineError::TransactionLocked { transaction: 7, .. })
        ));
        assert!(matches!(
            error(&owned_lock(&mut store, 9, 5, &insert(2, 20))),
            Some(EngineError::TransactionLocked { .. })
        ));
        assert_eq!(store.transactions.owned_by(5), vec![7, 9]);
        assert_eq!(store.transactions.owner(8), Some(legacy(6)));
        // A later owned message of 7 changes nothing about its owner.
        assert!(matches!(
            owned_lock(&mut store, 7, 5, &set_n(11)),
            Outcome::Batch(_)
        ));
        assert_eq!(rows(&store), vec![row(1, 11)]);
        // Another process's suspicion aborts nothing here.
        assert_eq!(
            send(&mut store, &crate::abort_owned_operation(4)),
            updated(0)
        );
        assert_eq!(
            send(&mut store, &crate::abort_owned_operation(5)),
            updated(2)
        );
        assert_eq!(rows(&store), vec![row(1, 10)]);
        assert!(store.transactions.get(7).is_none());
        assert!(store.transactions.was_aborted(7) && store.transactions.was_aborted(9));
        assert!(store.transactions.owned_by(5).is_empty());
        assert!(matches!(
            error(&run(&mut store, 7, 2, set_n(13))),
            Some(EngineError::SerializationFailure { .. })
        ));
        assert!(matches!(
            error(&owned_lock(&mut store, 9, 5, &insert(2, 20))),
            Some(EngineError::SerializationFailure { .. })
        ));
        assert!(
            store.transactions.owned_by(5).is_empty(),
            "a tombstone is not owned again"
        );
        assert_eq!(rows(&store), vec![row(1, 10)]);
        let commit = send(&mut store, &end_operation(7, true, true));
        assert!(matches!(
            error(&commit),
            Some(EngineError::SerializationFailure { .. })
        ));
        // 8's locks are free now.
        assert_eq!(
            owned_lock(&mut store, 8, 6, &set_n(12)),
            Outcome::Batch(Vec::new())
        );
        assert!(error(&run(&mut store, 8, 1, set_n(12))).is_none());
        assert_eq!(rows(&store), vec![row(1, 12)]);
        assert_eq!(send(&mut store, &end_operation(8, true, true)), updated(1));
        assert_eq!(store.transactions.owner(8), None, "forgotten at its end");
    }

    /// A statement parked behind a suspected process's transaction runs at the suspicion's
    /// place in the log, as at that transaction's end.
    #[test]
    fn a_statement_parked_behind_a_suspected_owner_is_granted_at_the_suspicion() {
        let mut store = store();
        let write = |n| Command::Batch(vec![set_n(n)]);
        let request = |transaction| crate::transactions::LockRequest {
            transaction,
            begin_ms: transaction,
            now_ms: 1_000,
            locks: vec![(("t".to_string(), None), Mode::IntentExclusive)],
            nowait: false,
        };
        send(&mut store, &crate::owned_lock_operation(&request(7), 5));
        send(&mut store, &crate::owned_lock_operation(&request(8), 6));
        assert_eq!(
            send(&mut store, &row_statement(7, 1, write(11), true)),
            updated(1)
        );
        let ticket = parked(&mut store, &row_statement(8, 1, write(12), true), 7, b"8");
        assert_eq!(
            send(&mut store, &crate::abort_owned_operation(5)),
            updated(1)
        );
        assert_eq!(
            answered(&mut store),
            vec![(ticket, b"8".to_vec(), updated(1))]
        );
        assert_eq!(rows(&store), vec![row(1, 12)]);
    }

    /// Seed 3294 of the simulator's transactional sweep (on `2007d61`, before ended
    /// transactions were remembered): transaction 7 of storage process 5 took its table locks
    /// and ran its statement 1 (the attempt its gateway sent again), and committed; the first
    /// attempt of statement 1, delivered after the commit, opened 7 again with no owner (the
    /// owner is recorded by the table-lock request only, and forgotten at the end). Process 5
    /// then died; its suspicion, looking for what 5 owns, found nothing, and the row stayed
    /// locked until a waiter judged 7 abandoned. Now the late attempt opens nothing, so the
    /// suspicion has nothing to miss and another transaction takes the row at once.
    #[test]
    fn a_late_attempt_after_the_commit_leaves_nothing_a_suspicion_of_its_owner_would_miss() {
        let mut store = store();
        assert_eq!(
            owned_lock(&mut store, 7, 5, &set_n(11)),
            Outcome::Batch(Vec::new())
        );
        assert!(error(&run(&mut store, 7, 1, set_n(11))).is_none());
        assert_eq!(send(&mut store, &end_operation(7, true, true)), updated(1));
        assert_eq!(store.transactions.owner(7), None, "forgotten at its end");
        // The late first attempt of statement 1.
        assert!(matches!(
            error(&run(&mut store, 7, 1, set_n(11))),
            Some(EngineError::SerializationFailure { .. })
        ));
        assert!(store.transactions.get(7).is_none(), "nothing open, unowned");
        assert_eq!(
            send(&mut store, &crate::abort_owned_operation(5)),
            updated(0)
        );
        assert_eq!(
            owned_lock(&mut store, 8, 6, &set_n(12)),
            Outcome::Batch(Vec::new())
        );
        assert!(error(&run(&mut store, 8, 1, set_n(12))).is_none());
        assert_eq!(rows(&store), vec![row(1, 12)]);
    }

    /// A partition that leaves the ring forgets its open transactions (no end or suspicion
    /// reaches it any more) and keeps their tombstones; joining again, it takes them from the
    /// copy it receives.
    #[test]
    fn a_partition_out_of_the_ring_forgets_open_transactions_and_rejoins_with_a_copy() {
        let mut store = store();
        owned_lock(&mut store, 7, 5, &set_n(11));
        assert!(error(&run(&mut store, 7, 1, set_n(11))).is_none());
        owned_lock(&mut store, 8, 6, &set_n(12));
        send(&mut store, &crate::abort_owned_operation(6));
        let source = store.transactions_where(|_, _| true);
        store.retain_rows_where(|_, _| false);
        store.transactions.forget_open();
        assert!(store.transactions.is_empty());
        assert!(store.transactions.owned_by(5).is_empty());
        assert!(store.transactions.wait_edges().is_empty());
        assert!(store.transactions.was_aborted(8), "tombstones stay");
        store.transactions.absorb(source);
        assert_eq!(store.transactions.owned_by(5), vec![7]);
        assert!(store.transactions.get(7).is_some());
    }

    /// The owner is replicated state: it survives a snapshot and moves with a copy of the
    /// transaction (Rubberband), and a copy absorbed keeps it.
    #[test]
    fn a_transactions_owner_survives_a_snapshot_and_moves_with_a_copy() {
        use vr::StateMachine;
        let mut store = store();
        owned_lock(&mut store, 7, 5, &set_n(11));
        assert!(error(&run(&mut store, 7, 1, set_n(11))).is_none());
        let mut restored = Store::new();
        restored.restore(&store.snapshot()).unwrap();
        assert_eq!(restored.transactions.owner(7), Some(legacy(5)));
        let copy = store.transactions_where(|_, _| true);
        assert_eq!(copy.owner(7), Some(legacy(5)));
        let mut receiver = crate::transactions::Transactions::default();
        receiver.absorb(copy);
        assert_eq!(receiver.owned_by(5), vec![7]);
        assert_eq!(
            send(&mut restored, &crate::abort_owned_operation(5)),
            updated(1)
        );
        assert_eq!(rows(&restored), vec![row(1, 10)]);
    }
}

#[cfg(test)]
mod row_path_tests {
    use super::*;
    use engine::{Assignment, ColumnDef, DataType, OnConflict};

    /// customer(c_w_id, c_d_id, c_id, c_last): primary key (c_w_id, c_d_id, c_id).
    fn customer() -> TableSchema {
        TableSchema::new(
            "customer",
            vec![
                ColumnDef::new("c_w_id", DataType::Int).not_null(),
                ColumnDef::new("c_d_id", DataType::Int).not_null(),
                ColumnDef::new("c_id", DataType::Int).not_null(),
                ColumnDef::new("c_last", DataType::BigInt),
            ],
            &["c_w_id", "c_d_id", "c_id"],
        )
        .unwrap()
    }

    fn equal(pairs: &[(&str, i32)]) -> Option<Predicate> {
        Some(Predicate::And(
            pairs
                .iter()
                .map(|(column, value)| Predicate::equal(column, Value::Int(*value)))
                .collect(),
        ))
    }

    fn select(predicate: Option<Predicate>) -> Operation {
        Operation::Select {
            table: "customer".into(),
            columns: vec![],
            predicate,
            limit: None,
        }
    }

    fn update(predicate: Option<Predicate>, column: &str) -> Operation {
        Operation::Update {
            table: "customer".into(),
            assignments: vec![Assignment {
                column: column.into(),
                value: Value::Int(5),
            }],
            predicate,
        }
    }

    fn warehouse_key(w: i32) -> Vec<Vec<u8>> {
        vec![crate::rows::placement_key("customer", &Value::Int(w))]
    }

    /// Whether two statements' locks conflict on any resource.
    fn conflict(a: &[(Resource, Mode)], b: &[(Resource, Mode)]) -> bool {
        a.iter().any(|(resource, mode)| {
            b.iter()
                .any(|(other, other_mode)| resource == other && mode.conflicts(*other_mode))
        })
    }

    /// The locks a statement of `operations` on `keys` needs with `paths` (nothing held).
    fn planned(
        operations: &[Operation],
        keys: &[Vec<u8>],
        paths: Option<Vec<RowPath>>,
        exclusive: bool,
    ) -> Vec<(Resource, Mode)> {
        plan_statement_on_paths(
            &BTreeMap::new(),
            operations,
            Some(keys),
            paths.as_deref(),
            exclusive,
        )
        .unwrap()
        .needed
    }

    fn locks(operation: Operation, w: i32) -> Vec<(Resource, Mode)> {
        let keys = warehouse_key(w);
        let operations = [operation];
        let paths = row_paths(&operations, &customer(), 0, &keys);
        planned(&operations, &keys, paths, false)
    }

    #[test]
    fn writes_of_different_rows_of_one_partition_key_do_not_conflict() {
        let one = locks(
            update(
                equal(&[("c_w_id", 1), ("c_d_id", 2), ("c_id", 3)]),
                "c_last",
            ),
            1,
        );
        let other = locks(
            update(
                equal(&[("c_w_id", 1), ("c_d_id", 2), ("c_id", 4)]),
                "c_last",
            ),
            1,
        );
        let same = locks(
            update(
                equal(&[("c_d_id", 2), ("c_id", 3), ("c_w_id", 1)]),
                "c_last",
            ),
            1,
        );
        assert!(!conflict(&one, &other));
        assert!(conflict(&one, &same));
        // The row lock is the path's end; the placement key and the district carry intents.
        assert_eq!(one.len(), 4);
        assert_eq!(
            one.iter()
                .filter(|(_, mode)| *mode == Mode::Exclusive)
                .count(),
            1
        );
    }

    #[test]
    fn a_read_of_a_prefix_conflicts_with_writes_under_it_and_only_those() {
        let district = locks(select(equal(&[("c_w_id", 1), ("c_d_id", 2)])), 1);
        let row_in = locks(
            update(
                equal(&[("c_w_id", 1), ("c_d_id", 2), ("c_id", 9)]),
                "c_last",
            ),
            1,
        );
        let row_out = locks(
            update(
                equal(&[("c_w_id", 1), ("c_d_id", 3), ("c_id", 9)]),
                "c_last",
            ),
            1,
        );
        assert!(conflict(&district, &row_in));
        assert!(!conflict(&district, &row_out));
        // A whole partition key value (a read by warehouse only) covers every district.
        let warehouse = locks(select(equal(&[("c_w_id", 1)])), 1);
        assert!(conflict(&warehouse, &row_in) && conflict(&warehouse, &row_out));
        // An insert into the district read conflicts (no phantom); elsewhere it does not.
        let insert = |d: i32| Operation::Insert {
            table: "customer".into(),
            columns: vec![],
            rows: vec![vec![
                Value::Int(1),
                Value::Int(d),
                Value::Int(77),
                Value::Null,
            ]],
            on_conflict: OnConflict::Error,
        };
        assert!(conflict(&district, &locks(insert(2), 1)));
        assert!(!conflict(&district, &locks(insert(5), 1)));
    }

    /// `c_w_id = w AND c_d_id = d AND c_id IN (ids)`: a semi-join's point lookups.
    fn lookups(w: i32, d: i32, ids: Vec<Value>) -> Option<Predicate> {
        Some(Predicate::And(vec![
            Predicate::equal("c_w_id", Value::Int(w)),
            Predicate::equal("c_d_id", Value::Int(d)),
            Predicate::In {
                column: "c_id".into(),
                values: ids,
            },
        ]))
    }

    #[test]
    fn a_read_of_an_in_list_locks_each_row_it_names_and_only_those() {
        let ids = vec![Value::Int(3), Value::Int(5), Value::Null, Value::Int(3)];
        let read = locks(select(lookups(1, 2, ids)), 1);
        let write = |d: i32, id: i32| {
            locks(
                update(
                    equal(&[("c_w_id", 1), ("c_d_id", d), ("c_id", id)]),
                    "c_last",
                ),
                1,
            )
        };
        assert!(conflict(&read, &write(2, 3)));
        assert!(conflict(&read, &write(2, 5)));
        assert!(!conflict(&read, &write(2, 4)));
        assert!(!conflict(&read, &write(3, 3)));
        // Two rows (NULL and the duplicate dropped): a shared lock at each path's end.
        assert_eq!(
            read.iter()
                .filter(|(_, mode)| *mode == Mode::Shared)
                .count(),
            2
        );
        // An insert of a named row that does not exist yet conflicts (no phantom).
        let insert = |id: i32| Operation::Insert {
            table: "customer".into(),
            columns: vec![],
            rows: vec![vec![
                Value::Int(1),
                Value::Int(2),
                Value::Int(id),
                Value::Null,
            ]],
            on_conflict: OnConflict::Error,
        };
        assert!(conflict(&read, &locks(insert(5), 1)));
        assert!(!conflict(&read, &locks(insert(6), 1)));
        // A write of an IN list locks its rows exclusively, and those only.
        let writes = locks(
            update(lookups(1, 2, vec![Value::Int(5), Value::Int(7)]), "c_last"),
            1,
        );
        assert!(conflict(&read, &writes));
        assert!(!conflict(&write(2, 3), &writes));
        // Only NULLs, or more rows than ROW_PATHS_MAX: the district's (coarser) lock.
        let district = locks(select(equal(&[("c_w_id", 1), ("c_d_id", 2)])), 1);
        let many: Vec<Value> = (0..=ROW_PATHS_MAX as i32).map(Value::Int).collect();
        for coarse in [lookups(1, 2, vec![Value::Null]), lookups(1, 2, many)] {
            assert_eq!(locks(select(coarse), 1), district);
        }
    }

    fn column_locks(operation: Operation, w: i32) -> Vec<(Resource, Mode)> {
        let schema = customer_wide();
        let keys = warehouse_key(w);
        let operations = [operation];
        let paths = column_paths(&operations, &schema, 0, &keys);
        assert!(paths.is_some(), "pinned to one row: {operations:?}");
        planned(&operations, &keys, paths, false)
    }

    /// `customer` with two more columns: c_balance BIGINT, c_credit BIGINT.
    fn customer_wide() -> TableSchema {
        let mut columns = customer().columns;
        columns.push(ColumnDef::new("c_balance", DataType::BigInt));
        columns.push(ColumnDef::new("c_credit", DataType::BigInt));
        TableSchema::new("customer", columns, &["c_w_id", "c_d_id", "c_id"]).unwrap()
    }

    fn select_columns(columns: &[&str], predicate: Option<Predicate>) -> Operation {
        Operation::Select {
            table: "customer".into(),
            columns: columns.iter().map(|column| column.to_string()).collect(),
            predicate,
            limit: None,
        }
    }

    /// Runs `operation` as statement `statement` of transaction `id` with `locks`.
    fn run_locked(
        store: &mut crate::Store,
        id: u64,
        statement: u64,
        operation: Operation,
        savepoint: u32,
    ) -> engine::Outcome {
        let keys = warehouse_key(1);
        let operations = [operation.clone()];
        let mut paths = column_paths(&operations, &customer_wide(), 0, &keys).expect("one row");
        if savepoint != 0 {
            // As the gateway does: no increment locks under a savepoint.
            without_increments(&mut paths);
        }
        let locks = planned(&operations, &keys, Some(paths), false);
        let bytes = crate::transaction_operation(&TransactionStatement {
            transaction: id,
            statement,
            begin_ms: id,
            now_ms: 1_000,
            locks,
            nowait: true,
            command: engine::Command::Batch(vec![operation]).encode(),
            savepoint,
            skip_locked: false,
            await_grant: false,
            owner: None,
        });
        engine::Outcome::decode(&store.execute_share(&bytes, |_| true)).unwrap()
    }

    /// Ends transaction `id` by its own gateway.
    fn end(store: &mut crate::Store, id: u64, commit: bool) {
        store.execute_share(&crate::end_operation(id, commit, true), |_| true);
    }

    fn failed(outcome: &engine::Outcome) -> bool {
        match outcome {
            engine::Outcome::Error(_) => true,
            engine::Outcome::Batch(results) => results.iter().any(Result::is_err),
            _ => false,
        }
    }

    /// Stop 42: column locks let two transactions change different columns of one row, but an
    /// abort wrote its whole-row image back, over the other's committed column (a lost
    /// update). Now an abort (and a ROLLBACK TO) writes back only the columns the transaction
    /// assigned, each as it was before the transaction's first write of that column.
    #[test]
    fn an_abort_under_column_locks_writes_back_only_its_own_columns() {
        let mut store = store_with_balance(100);
        let set = |column: &str, value: i64| Operation::Update {
            table: "customer".into(),
            assignments: vec![Assignment {
                column: column.into(),
                value: Value::BigInt(value),
            }],
            predicate: equal(&[("c_w_id", 1), ("c_d_id", 2), ("c_id", 3)]),
        };
        let stored = |store: &crate::Store| -> Vec<Value> {
            let rows: Vec<_> = store
                .engine
                .table("customer")
                .unwrap()
                .rows
                .values()
                .cloned()
                .collect();
            assert_eq!(rows.len(), 1);
            rows[0][3..].to_vec()
        };
        let big = |values: [i64; 3]| values.map(Value::BigInt).to_vec();
        // 7 changes the balance; 8 the last name (no conflict), and commits.
        assert!(!failed(&run_locked(
            &mut store,
            7,
            1,
            set("c_balance", 150),
            0
        )));
        assert!(!failed(&run_locked(&mut store, 8, 1, set("c_last", 31), 0)));
        end(&mut store, 8, true);
        // 9 changes the credit and commits; then 7 changes the credit too.
        assert!(!failed(&run_locked(
            &mut store,
            9,
            1,
            set("c_credit", 8),
            0
        )));
        end(&mut store, 9, true);
        assert!(!failed(&run_locked(
            &mut store,
            7,
            2,
            set("c_credit", 9),
            0
        )));
        assert_eq!(stored(&store), big([31, 150, 9]));
        // 7 aborts: its balance and credit as before its writes of them, 8's and 9's kept.
        end(&mut store, 7, false);
        assert_eq!(stored(&store), big([31, 100, 8]));

        // ROLLBACK TO: 10 changes the balance under savepoint 1, 11 the last name (commits).
        assert!(!failed(&run_locked(
            &mut store,
            10,
            1,
            set("c_balance", 200),
            1
        )));
        assert!(!failed(&run_locked(
            &mut store,
            11,
            1,
            set("c_last", 32),
            0
        )));
        end(&mut store, 11, true);
        assert!(!failed(&run_locked(
            &mut store,
            10,
            2,
            set("c_credit", 10),
            1
        )));
        store.execute_share(&crate::rollback_to_operation(10, 1), |_| true);
        assert_eq!(stored(&store), big([32, 100, 8]));
        end(&mut store, 10, true);
        assert_eq!(stored(&store), big([32, 100, 8]));

        // A whole-row write after a column's: the image becomes whole, the other columns as
        // they were when it took the row (no one can change them since).
        assert!(!failed(&run_locked(
            &mut store,
            12,
            1,
            set("c_balance", 300),
            0
        )));
        assert!(!failed(&run_locked(
            &mut store,
            13,
            1,
            set("c_last", 33),
            0
        )));
        end(&mut store, 13, true);
        let whole = Operation::Delete {
            table: "customer".into(),
            predicate: equal(&[("c_w_id", 1), ("c_d_id", 2), ("c_id", 3)]),
        };
        assert!(!failed(&run_locked(&mut store, 12, 2, whole, 0)));
        end(&mut store, 12, false);
        assert_eq!(stored(&store), big([33, 100, 8]));
    }

    /// After a transaction has written (it holds a writing table mode), its reads of rows and
    /// key prefixes take update intents (`with_update_intent`): two such readers of one district's
    /// customers then wait for each other instead of both converting to a write and
    /// deadlocking. Column reads keep S; a transaction that has not written reads with S.
    #[test]
    fn reads_after_a_write_take_an_update_intent_on_rows_and_prefixes() {
        let schema = customer_wide();
        let keys = warehouse_key(1);
        let plan = |held: &BTreeMap<String, Mode>, operation: Operation| {
            let operations = [operation];
            let paths = column_paths(&operations, &schema, 0, &keys);
            plan_statement_on_paths(held, &operations, Some(&keys), paths.as_deref(), false)
                .unwrap()
                .needed
        };
        let by_district = || select_columns(&["c_last"], equal(&[("c_w_id", 1), ("c_d_id", 2)]));
        let by_row = || {
            select_columns(
                &["c_last"],
                equal(&[("c_w_id", 1), ("c_d_id", 2), ("c_id", 3)]),
            )
        };
        let reading = BTreeMap::new();
        let wrote = BTreeMap::from([("district".to_string(), Mode::IntentExclusive)]);
        let leaf = |locks: &[(Resource, Mode)]| locks.last().map(|(_, mode)| *mode);
        assert_eq!(leaf(&plan(&reading, by_district())), Some(Mode::Shared));
        let intent = plan(&wrote, by_district());
        assert_eq!(leaf(&intent), Some(Mode::Update));
        assert!(conflict(&intent, &intent), "two update intents: one waits");
        assert!(
            !conflict(&intent, &plan(&reading, by_district())),
            "a plain reader does not wait"
        );
        assert!(conflict(
            &intent,
            &column_locks(
                update(
                    equal(&[("c_w_id", 1), ("c_d_id", 2), ("c_id", 4)]),
                    "c_credit"
                ),
                1
            )
        ));
        assert_eq!(column_modes(&plan(&wrote, by_row())), vec![Mode::Shared]);
    }

    /// `SET c = c <op> k` on the test row, as a computed update.
    fn increment(column: &str, operator: engine::expression::Operator, amount: i64) -> Operation {
        Operation::UpdateComputed {
            table: "customer".into(),
            assignments: vec![engine::ComputedAssignment::new(
                column,
                engine::Expression::Binary(
                    operator,
                    Box::new(engine::Expression::Column(column.into())),
                    Box::new(engine::Expression::Constant(Value::BigInt(amount))),
                ),
            )],
            predicate: equal(&[("c_w_id", 1), ("c_d_id", 2), ("c_id", 3)]),
        }
    }

    fn add(column: &str, amount: i64) -> Operation {
        increment(column, engine::expression::Operator::Add, amount)
    }

    /// The modes a statement's locks hold on column resources (the path's last resource).
    fn column_modes(locks: &[(Resource, Mode)]) -> Vec<Mode> {
        locks
            .iter()
            .filter(|((_, row), _)| row.as_ref().is_some_and(|row| row.contains(&0xFE)))
            .map(|(_, mode)| *mode)
            .collect()
    }

    /// Blind increments (`blind_increments`) take `Mode::Increment` on their column, which
    /// conflicts with every read and other write of it but not with another increment; an
    /// increment that reads another column, a column read elsewhere in the statement, any other
    /// expression, and any statement under a savepoint (`without_increments`) take X.
    #[test]
    fn increment_locks_are_planned_for_blind_increments_only() {
        use engine::expression::Operator;
        let row = || equal(&[("c_w_id", 1), ("c_d_id", 2), ("c_id", 3)]);
        let plus = column_locks(add("c_balance", 5), 1);
        assert_eq!(column_modes(&plus), vec![Mode::Increment]);
        let minus = column_locks(increment("c_balance", Operator::Subtract, 5), 1);
        assert_eq!(column_modes(&minus), vec![Mode::Increment]);
        assert!(!conflict(&plus, &minus), "increments commute");
        let read = column_locks(select_columns(&["c_balance"], row()), 1);
        assert!(conflict(&plus, &read));
        assert!(conflict(
            &plus,
            &column_locks(update(row(), "c_balance"), 1)
        ));
        assert!(!conflict(
            &plus,
            &column_locks(update(row(), "c_credit"), 1)
        ));
        // Not blind: multiplied, from another column, a column of the predicate, a key.
        let times = column_locks(increment("c_balance", Operator::Multiply, 2), 1);
        assert_eq!(column_modes(&times), vec![Mode::Exclusive]);
        let from_other = Operation::UpdateComputed {
            table: "customer".into(),
            assignments: vec![engine::ComputedAssignment::new(
                "c_balance",
                engine::Expression::Binary(
                    Operator::Add,
                    Box::new(engine::Expression::Column("c_balance".into())),
                    Box::new(engine::Expression::Column("c_credit".into())),
                ),
            )],
            predicate: row(),
        };
        assert!(column_modes(&column_locks(from_other, 1))
            .iter()
            .all(|mode| *mode != Mode::Increment));
        let mut filtered = add("c_balance", 1);
        if let Operation::UpdateComputed { predicate, .. } = &mut filtered {
            *predicate = Some(Predicate::And(vec![
                row().unwrap(),
                Predicate::equal("c_balance", Value::BigInt(1)),
            ]));
        }
        assert_eq!(
            column_modes(&column_locks(filtered, 1)),
            vec![Mode::Exclusive]
        );
        let mut null = add("c_balance", 1);
        if let Operation::UpdateComputed { assignments, .. } = &mut null {
            assignments[0].expression = engine::Expression::Binary(
                Operator::Add,
                Box::new(engine::Expression::Column("c_balance".into())),
                Box::new(engine::Expression::Constant(Value::Null)),
            );
        }
        assert_eq!(column_modes(&column_locks(null, 1)), vec![Mode::Exclusive]);
        // Under a savepoint the gateway drops the mark: X.
        let schema = customer_wide();
        let keys = warehouse_key(1);
        let operations = [add("c_balance", 5)];
        let mut paths = column_paths(&operations, &schema, 0, &keys).unwrap();
        without_increments(&mut paths);
        let under_savepoint = planned(&operations, &keys, Some(paths), false);
        assert_eq!(column_modes(&under_savepoint), vec![Mode::Exclusive]);
        // Joined with anything else, an increment lock is exclusive.
        assert_eq!(Mode::Increment.join(Mode::Shared), Mode::Exclusive);
        assert_eq!(Mode::Increment.join(Mode::Increment), Mode::Increment);
        assert!(Mode::Exclusive.covers(Mode::Increment));
        assert!(!Mode::Increment.covers(Mode::Shared));
    }

    /// A store with the wide customer table and its row (1, 2, 3) of balance `balance`.
    fn store_with_balance(balance: i64) -> crate::Store {
        let mut store = crate::Store::new();
        let create = engine::Command::Execute(Operation::CreateTable {
            schema: customer_wide(),
        });
        store.execute_share(&crate::sql_operation(&create), |_| true);
        let insert = Operation::Insert {
            table: "customer".into(),
            columns: vec![],
            rows: vec![vec![
                Value::Int(1),
                Value::Int(2),
                Value::Int(3),
                Value::BigInt(30),
                Value::BigInt(balance),
                Value::BigInt(7),
            ]],
            on_conflict: OnConflict::Error,
        };
        store.execute_share(
            &crate::sql_operation(&engine::Command::Execute(insert)),
            |_| true,
        );
        store
    }

    fn balance(store: &crate::Store) -> Value {
        let rows: Vec<_> = store
            .engine
            .table("customer")
            .unwrap()
            .rows
            .values()
            .cloned()
            .collect();
        rows[0][4].clone()
    }

    /// Two transactions increment one column side by side; an abort subtracts its own sum and
    /// keeps the other's committed increment (the image of the row before its increment would
    /// erase it: the canary `canary_increment_image` does, and loses it). A later plain write
    /// of a column a transaction incremented makes its undo an image of the value less its
    /// increments.
    #[test]
    fn an_abort_subtracts_its_own_increments_and_keeps_the_others() {
        for canary in [false, true] {
            let mut store = store_with_balance(100);
            store.canary_increment_image = canary;
            assert!(!failed(&run_locked(
                &mut store,
                7,
                1,
                add("c_balance", 5),
                0
            )));
            assert!(!failed(&run_locked(
                &mut store,
                8,
                1,
                add("c_balance", 10),
                0
            )));
            assert!(!failed(&run_locked(
                &mut store,
                7,
                2,
                add("c_balance", 2),
                0
            )));
            assert_eq!(balance(&store), Value::BigInt(117));
            // A read of the column waits for the increments (NOWAIT: refused).
            let read = select_columns(
                &["c_balance"],
                equal(&[("c_w_id", 1), ("c_d_id", 2), ("c_id", 3)]),
            );
            assert!(failed(&run_locked(&mut store, 9, 1, read, 0)));
            end(&mut store, 9, false);
            end(&mut store, 8, true);
            end(&mut store, 7, false);
            if canary {
                assert_eq!(
                    balance(&store),
                    Value::BigInt(100),
                    "the image erases 8's +10"
                );
                continue;
            }
            assert_eq!(
                balance(&store),
                Value::BigInt(110),
                "8's +10 kept, 7's +7 undone"
            );
            assert!(store.transactions.get(7).is_none());
            // An increment, then a plain write of the column, then an abort: as before both.
            assert!(!failed(&run_locked(
                &mut store,
                10,
                1,
                add("c_balance", 1),
                0
            )));
            let set = Operation::Update {
                table: "customer".into(),
                assignments: vec![Assignment {
                    column: "c_balance".into(),
                    value: Value::BigInt(50),
                }],
                predicate: equal(&[("c_w_id", 1), ("c_d_id", 2), ("c_id", 3)]),
            };
            assert!(!failed(&run_locked(&mut store, 10, 2, set, 0)));
            assert!(store.transactions.get(10).unwrap().increments.is_empty());
            end(&mut store, 10, false);
            assert_eq!(balance(&store), Value::BigInt(110));
            // Under a savepoint an increment is undone by ROLLBACK TO's image.
            assert!(!failed(&run_locked(
                &mut store,
                11,
                1,
                add("c_balance", 4),
                0
            )));
            let outcome = run_locked(&mut store, 11, 2, add("c_balance", 6), 1);
            assert!(!failed(&outcome));
            assert_eq!(balance(&store), Value::BigInt(120));
            store.execute_share(&crate::rollback_to_operation(11, 1), |_| true);
            assert_eq!(balance(&store), Value::BigInt(114));
            end(&mut store, 11, false);
            assert_eq!(balance(&store), Value::BigInt(110));
        }
    }

    /// The escrow bound: an increment that could leave the column out of its type's range if
    /// some pending increments aborted is undone and refused (40001); once they end it runs.
    #[test]
    fn an_increment_that_could_overflow_with_others_pending_is_refused() {
        let top = i64::MAX - 100;
        let mut store = store_with_balance(top);
        assert!(!failed(&run_locked(
            &mut store,
            7,
            1,
            add("c_balance", -100),
            0
        )));
        // +150 fits now (top - 100 + 150), but not if 7 aborts (top + 150).
        let refused = run_locked(&mut store, 8, 1, add("c_balance", 150), 0);
        match &refused {
            engine::Outcome::Error(error) => assert!(
                matches!(error, engine::EngineError::SerializationFailure { .. }),
                "{error:?}"
            ),
            other => panic!("refused: {other:?}"),
        }
        assert_eq!(balance(&store), Value::BigInt(top - 100), "undone");
        assert!(store
            .transactions
            .get(8)
            .is_none_or(|open| open.increments.is_empty()));
        end(&mut store, 8, false);
        // +50 fits either way.
        assert!(!failed(&run_locked(
            &mut store,
            9,
            1,
            add("c_balance", 50),
            0
        )));
        end(&mut store, 9, true);
        end(&mut store, 7, true);
        assert_eq!(balance(&store), Value::BigInt(top - 50));
        assert!(!failed(&run_locked(
            &mut store,
            10,
            1,
            add("c_balance", 50),
            0
        )));
        end(&mut store, 10, false);
        assert_eq!(balance(&store), Value::BigInt(top - 50));
    }

    /// Column-level locks (`column_paths`): a read of some columns of a row and a write of
    /// others do not conflict; a read and a write of one column, two writes of one column, and
    /// anything that takes the whole row (a delete, an insert of the key, `SELECT *`, a
    /// locking clause's whole-row paths) do. A predicate's non-key column is read; a computed
    /// assignment reads its expression's columns.
    #[test]
    fn column_locks_conflict_on_shared_columns_and_whole_rows_only() {
        let row = || equal(&[("c_w_id", 1), ("c_d_id", 2), ("c_id", 3)]);
        let read_last = column_locks(select_columns(&["c_last"], row()), 1);
        let write_balance = column_locks(update(row(), "c_balance"), 1);
        let write_last = column_locks(update(row(), "c_last"), 1);
        let read_balance = column_locks(select_columns(&["c_id", "c_balance"], row()), 1);
        assert!(!conflict(&read_last, &write_balance));
        assert!(conflict(&read_last, &write_last));
        assert!(conflict(&read_balance, &write_balance));
        assert!(conflict(&write_balance, &write_balance));
        assert!(!conflict(&read_last, &read_balance));
        // The predicate's non-key column is read: a write of it conflicts.
        let filtered = Predicate::And(vec![
            row().unwrap(),
            Predicate::equal("c_credit", Value::BigInt(1)),
        ]);
        let read_filtered = column_locks(select_columns(&["c_last"], Some(filtered)), 1);
        let write_credit = column_locks(update(row(), "c_credit"), 1);
        assert!(conflict(&read_filtered, &write_credit));
        assert!(!conflict(&read_last, &write_credit));
        // A computed assignment reads its expression's columns.
        let computed = Operation::UpdateComputed {
            table: "customer".into(),
            assignments: vec![engine::ComputedAssignment::new(
                "c_balance",
                engine::Expression::Column("c_credit".into()),
            )],
            predicate: row(),
        };
        assert!(conflict(&column_locks(computed, 1), &write_credit));
        // Whole rows: SELECT *, a delete, an insert of the key, and the whole-row paths a
        // locking clause uses, all conflict with a write of any one column.
        let schema = customer_wide();
        let keys = warehouse_key(1);
        let star = select_columns(&[], row());
        let delete = Operation::Delete {
            table: "customer".into(),
            predicate: row(),
        };
        let insert = Operation::Insert {
            table: "customer".into(),
            columns: vec![],
            rows: vec![vec![
                Value::Int(1),
                Value::Int(2),
                Value::Int(3),
                Value::Null,
                Value::Null,
                Value::Null,
            ]],
            on_conflict: OnConflict::Error,
        };
        for whole in [star, delete, insert] {
            let operations = [whole];
            let paths = column_paths(&operations, &schema, 0, &keys);
            let needed = planned(&operations, &keys, paths, false);
            assert!(conflict(&needed, &write_balance), "{operations:?}");
            assert!(
                operations[0].is_read() || conflict(&needed, &read_last),
                "{operations:?}"
            );
        }
        let for_update = [select_columns(&["c_last"], row())];
        let whole_rows = row_paths(&for_update, &schema, 0, &keys);
        let exclusive = planned(&for_update, &keys, whole_rows, true);
        assert!(conflict(&exclusive, &write_balance));
        // Rows of one partition key stay apart as before.
        let other_row = equal(&[("c_w_id", 1), ("c_d_id", 2), ("c_id", 4)]);
        assert!(!conflict(
            &column_locks(update(other_row, "c_balance"), 1),
            &write_balance
        ));
    }

    #[test]
    fn statements_that_cannot_be_refined_keep_the_partition_key_lock() {
        let schema = customer();
        let keys = warehouse_key(1);
        // No predicate, a key column assigned, two constants for one column, a routed key the
        // predicate does not pin, several keys, another partition column.
        for operation in [
            select(None),
            update(equal(&[("c_w_id", 1), ("c_d_id", 2), ("c_id", 3)]), "c_id"),
            select(equal(&[("c_w_id", 1), ("c_w_id", 2)])),
            select(equal(&[("c_d_id", 2)])),
            select(equal(&[("c_w_id", 2), ("c_d_id", 2)])),
        ] {
            assert_eq!(
                row_paths(std::slice::from_ref(&operation), &schema, 0, &keys),
                None,
                "{operation:?}"
            );
        }
        let operation = [select(equal(&[("c_w_id", 1), ("c_d_id", 2)]))];
        let two = [warehouse_key(1), warehouse_key(2)].concat();
        assert_eq!(row_paths(&operation, &schema, 0, &two), None);
        assert_eq!(row_paths(&operation, &schema, 1, &keys), None);
    }
}
