//! Multi-key commands and MULTI/EXEC across partitions, driven by a RESP connection
//! (`docs/internals/redis.md`, "Multi-key commands and transactions").
//!
//! A command whose result at one key depends on another key (RENAME, SMOVE, SINTERSTORE, an
//! EXEC of queued commands…) cannot be cut into independent single-key shares, so it runs in
//! three ordered steps, each one E-Cast message (or one bypass request when its keys share a
//! partition):
//!
//! 1. **reserve** every key it names (`kv::Command::Reserve`): each key is locked for the
//!    command's owner number and its record is read, at the message's place in the order;
//! 2. the gateway runs the commands on a scratch store of those records
//!    (`kv::run_transaction`), deterministically, at the command's stamp;
//! 3. **commit** (`kv::Command::Commit`): each key gets its new record (or is deleted, or kept)
//!    and is unlocked.
//!
//! Between 1 and 3 every other write to a reserved key is refused (`KvError::Locked`) and
//! retried by its gateway, and reads see the value from before the command, so the command
//! takes effect atomically at its commit. A reservation refused at any key is released at all
//! of them and retried after a random pause. A lock whose lease has passed (its gateway died)
//! is released by whichever gateway finds it, with one ordered `Release` of every key the lock
//! names: the commit and that release are ordered messages over the same keys, so the commit
//! applies everywhere or nowhere.

use super::gateway::{Job, Work};
use super::payload::{self, Split};
use ecast::Isolation;
use kv::{Bytes, Command, CommitWrite, KeysOperation, KvError, Outcome};
use resp::{Pending, Plan, Value};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How long a reservation holds its keys before another gateway may release it.
const LEASE_MS: u64 = 5_000;
/// A command still refused this long after it started gives up (`TRYAGAIN`).
const GIVE_UP_MS: u64 = 10_000;
/// The longest pause between two attempts (the pause grows from 1 ms, randomly).
const PAUSE_MS_MAX: u64 = 50;

/// Why a multi-key command did not complete.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum TransactionError {
    /// A store or gateway error (`Unavailable`: a commit may or may not have been applied).
    Store(KvError),
    /// A watched key changed since WATCH: nothing was written (EXEC answers nil).
    Watched,
}

/// The keys a set of commands names, each once, in order of first appearance.
pub(super) fn distinct_keys<'a>(keys: impl IntoIterator<Item = &'a [u8]>) -> Vec<Bytes> {
    let mut distinct: Vec<Bytes> = Vec::new();
    for key in keys {
        if !distinct.iter().any(|known| known.as_slice() == key) {
            distinct.push(key.to_vec());
        }
    }
    distinct
}

/// How many times a transaction is reserved again with the keys its SORT patterns named
/// (`KvError::Unreserved`) before it gives up: the elements, and so the keys, may change
/// between two attempts.
const UNRESERVED_ROUNDS_MAX: usize = 8;

/// A watched key as WATCH read it: its record (`None`: absent) and its write counter
/// (`kv::KvStore::version`). EXEC aborts if either differs when it reserves the key: the
/// counter catches a write that put the same record back, which the client may have read in
/// between (a GET after WATCH seeing a value that was then undone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct WatchedKey {
    pub key: Bytes,
    pub record: Option<Bytes>,
    pub version: u64,
}

/// Runs `commands` (stamped) atomically over every key they name and `watched` (keys as WATCH
/// read them; the command aborts if any was written since): their outcomes, in order.
/// A SORT whose BY or GET patterns name keys not reserved releases everything and runs again
/// with those keys reserved too, so that every key it reads is read at one point of the order.
pub(super) async fn run(
    jobs: &mpsc::Sender<Job>,
    commands: &[Command],
    watched: &[WatchedKey],
) -> Result<Vec<Outcome>, TransactionError> {
    let mut extra: Vec<Bytes> = Vec::new();
    for _ in 0..UNRESERVED_ROUNDS_MAX {
        let keys = distinct_keys(
            commands
                .iter()
                .flat_map(Command::keys)
                .chain(watched.iter().map(|watched| watched.key.as_slice()))
                .chain(extra.iter().map(Vec::as_slice)),
        );
        let ran = run_reserved(jobs, &keys, watched, |records| {
            let computed = kv::run_transaction(&records, commands)
                .map(|result| Computed::Commit(result.outcomes, result.writes))
                .map_err(TransactionError::Store);
            std::future::ready(computed)
        })
        .await;
        match ran {
            Err(TransactionError::Store(KvError::Unreserved { keys: missing })) => {
                assert!(!missing.is_empty(), "an unreserved read names its keys");
                extra.extend(missing);
            }
            other => return other,
        }
    }
    Err(TransactionError::Store(KvError::Unavailable))
}

/// What a computation over reserved records decided.
pub(super) enum Computed<T> {
    /// Commit these writes (one per reserved key), then answer `T`.
    Commit(T, Vec<(Bytes, CommitWrite)>),
    /// Write nothing (release the keys), then answer `T`.
    Release(T),
}

/// Reserves `keys` (distinct), runs `compute` on their records and commits (or releases) what
/// it decided, atomically at the commit's place in the order; retried from the reservation
/// while another command holds a key (up to `GIVE_UP_MS`) or when the reservation was released
/// as stale before the commit. An error from `compute` releases the keys and is returned. If a
/// key of `watched` (each among `keys`) was written since WATCH read it, the keys are released
/// and `TransactionError::Watched` returned, without computing.
pub(super) async fn run_reserved<T, F, Fut>(
    jobs: &mpsc::Sender<Job>,
    keys: &[Bytes],
    watched: &[WatchedKey],
    mut compute: F,
) -> Result<T, TransactionError>
where
    F: FnMut(Vec<(Bytes, Option<Bytes>)>) -> Fut,
    Fut: std::future::Future<Output = Result<Computed<T>, TransactionError>>,
{
    let started = crate::os::unix_now_ms();
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let owner = crate::os::random_u64();
        let (records, versions) = match reserve(jobs, keys, owner).await? {
            Reserved::All(records, versions) => (records, versions),
            Reserved::Refused => {
                if crate::os::unix_now_ms() > started + GIVE_UP_MS {
                    return Err(TransactionError::Store(KvError::Locked {
                        owner: 0,
                        keys: Vec::new(),
                        until_ms: 0,
                    }));
                }
                pause(attempt).await;
                continue;
            }
        };
        if abandons(keys) {
            // Test-only: the gateway "dies" holding the locks (neither commit nor release).
            return Err(TransactionError::Store(KvError::Unavailable));
        }
        let changed = watched.iter().any(|watched| {
            let index = keys
                .iter()
                .position(|key| *key == watched.key)
                .expect("every watched key is reserved");
            records[index].1 != watched.record || versions[index] != watched.version
        });
        if changed {
            release(jobs, keys, owner).await;
            return Err(TransactionError::Watched);
        }
        let (computed, lost) = compute_renewing(
            jobs,
            keys,
            owner,
            (&records, &versions),
            compute(records.clone()),
        )
        .await;
        let (answer, writes) = match computed {
            Ok(Computed::Commit(_, _)) if lost => {
                // The lease lapsed while computing and a key changed or went to another
                // command: the writes were computed from stale records. Run it again.
                crate::log::warn(format_args!(
                    "a multi-key command's lease lapsed while it ran; running it again"
                ));
                release(jobs, keys, owner).await;
                pause(attempt).await;
                continue;
            }
            Ok(Computed::Commit(answer, writes)) => (answer, writes),
            Ok(Computed::Release(answer)) => {
                release(jobs, keys, owner).await;
                return Ok(answer);
            }
            Err(error) => {
                release(jobs, keys, owner).await;
                return Err(error);
            }
        };
        match commit(jobs, writes, owner).await? {
            true => return Ok(answer),
            // Released as stale before the commit, at every key: nothing was written.
            false => pause(attempt).await,
        }
    }
}

/// Runs `compute` while renewing the reservation's lease every half lease (a long script
/// keeps its keys, as a long Redis script keeps the server): each renewal is the same
/// reservation again by the same owner, at its place in the order, and must find every
/// record as it was reserved. The outcome, and whether the reservation was lost meanwhile (a
/// key held by another command, or changed: the lease had lapsed and another gateway released
/// it).
async fn compute_renewing<Fut, T>(
    jobs: &mpsc::Sender<Job>,
    keys: &[Bytes],
    owner: u64,
    reserved: (&[(Bytes, Option<Bytes>)], &[u64]),
    compute: Fut,
) -> (Result<Computed<T>, TransactionError>, bool)
where
    Fut: std::future::Future<Output = Result<Computed<T>, TransactionError>>,
{
    tokio::pin!(compute);
    let period = Duration::from_millis(LEASE_MS / 2);
    let mut lost = false;
    loop {
        tokio::select! {
            computed = &mut compute => return (computed, lost),
            () = tokio::time::sleep(period), if !lost => {
                lost = !renew(jobs, keys, owner, reserved).await;
            }
        }
    }
}

/// Reserves `keys` again for `owner` (a lease renewal); whether every key was still (or again)
/// this owner's with the record and write counter it had when reserved.
async fn renew(
    jobs: &mpsc::Sender<Job>,
    keys: &[Bytes],
    owner: u64,
    (records, versions): (&[(Bytes, Option<Bytes>)], &[u64]),
) -> bool {
    let now = crate::os::unix_now_ms();
    let steps = keys
        .iter()
        .map(|key| {
            Command::Reserve {
                key: key.clone(),
                owner,
                keys: keys.to_vec(),
                until_ms: now + LEASE_MS,
            }
            .stamped(now)
        })
        .collect();
    let Ok(outcomes) = submit(jobs, steps).await else {
        return false;
    };
    outcomes.len() == records.len()
        && outcomes.into_iter().zip(records.iter().zip(versions)).all(
            |(outcome, ((_, record), version))| {
                outcome
                    == Outcome::Reserved {
                        record: record.clone(),
                        version: *version,
                    }
            },
        )
}

/// Hidden, test-only (debug builds, `TESSERA_TEST_ABANDON_RESERVATIONS`): a command whose first
/// key starts with `abandon:` is abandoned after its reservation, as by a gateway that died
/// between reserve and commit, so that a real-process test can watch another gateway release
/// the stale locks.
fn abandons(keys: &[Bytes]) -> bool {
    cfg!(debug_assertions)
        && keys.first().is_some_and(|key| key.starts_with(b"abandon:"))
        && std::env::var_os("TESSERA_TEST_ABANDON_RESERVATIONS").is_some()
}

/// The records and write counters `keys` hold now, read at one point of the order (WATCH):
/// reserved, then released.
pub(super) async fn read_records(
    jobs: &mpsc::Sender<Job>,
    keys: &[Bytes],
) -> Result<Vec<WatchedKey>, TransactionError> {
    let keys = distinct_keys(keys.iter().map(Vec::as_slice));
    let started = crate::os::unix_now_ms();
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let owner = crate::os::random_u64();
        if let Reserved::All(records, versions) = reserve(jobs, &keys, owner).await? {
            release(jobs, &keys, owner).await;
            return Ok(records
                .into_iter()
                .zip(versions)
                .map(|((key, record), version)| WatchedKey {
                    key,
                    record,
                    version,
                })
                .collect());
        }
        if crate::os::unix_now_ms() > started + GIVE_UP_MS {
            return Err(TransactionError::Store(KvError::Unavailable));
        }
        pause(attempt).await;
    }
}

enum Reserved {
    /// Every key, with its record, and the keys' write counters in the same order.
    All(Vec<(Bytes, Option<Bytes>)>, Vec<u64>),
    /// Some key is held by another command: whatever this one reserved is released (and
    /// stale locks found on the way too).
    Refused,
}

async fn reserve(
    jobs: &mpsc::Sender<Job>,
    keys: &[Bytes],
    owner: u64,
) -> Result<Reserved, TransactionError> {
    let now = crate::os::unix_now_ms();
    let steps = keys
        .iter()
        .map(|key| {
            Command::Reserve {
                key: key.clone(),
                owner,
                keys: keys.to_vec(),
                until_ms: now + LEASE_MS,
            }
            .stamped(now)
        })
        .collect();
    let outcomes = match submit(jobs, steps).await {
        Ok(outcomes) => outcomes,
        Err(error) => {
            // Some keys may have been reserved: release what this owner holds.
            release(jobs, keys, owner).await;
            return Err(error);
        }
    };
    let mut records = Vec::with_capacity(keys.len());
    let mut versions = Vec::with_capacity(keys.len());
    let mut stale: Vec<(u64, Vec<Bytes>)> = Vec::new();
    let mut refused = false;
    for (key, outcome) in keys.iter().zip(outcomes) {
        match outcome {
            Outcome::Reserved { record, version } => {
                records.push((key.clone(), record));
                versions.push(version);
            }
            Outcome::Error(KvError::Locked {
                owner: holder,
                keys: held,
                until_ms,
            }) => {
                refused = true;
                if until_ms < now && !stale.iter().any(|(known, _)| *known == holder) {
                    stale.push((holder, held));
                }
            }
            Outcome::Error(error) => {
                release(jobs, keys, owner).await;
                return Err(TransactionError::Store(error));
            }
            _ => {
                release(jobs, keys, owner).await;
                return Err(TransactionError::Store(KvError::Malformed));
            }
        }
    }
    if !refused {
        return Ok(Reserved::All(records, versions));
    }
    release(jobs, keys, owner).await;
    for (holder, held) in stale {
        crate::log::warn(format_args!(
            "releasing a stale multi-key reservation of {} keys",
            held.len()
        ));
        release(jobs, &held, holder).await;
    }
    Ok(Reserved::Refused)
}

/// Releases what `owner` holds of `keys` (best effort: a release that is lost leaves a lock
/// that its lease lets another gateway release).
pub(super) async fn release(jobs: &mpsc::Sender<Job>, keys: &[Bytes], owner: u64) {
    let steps = keys
        .iter()
        .map(|key| Command::Release {
            key: key.clone(),
            owner,
        })
        .collect();
    if let Err(error) = submit(jobs, steps).await {
        crate::log::warn(format_args!("a multi-key release failed: {error:?}"));
    }
}

/// Commits the writes: `true` if every key was still reserved (all applied), `false` if none
/// was (the reservation was released as stale first; nothing applied).
async fn commit(
    jobs: &mpsc::Sender<Job>,
    writes: Vec<(Bytes, CommitWrite)>,
    owner: u64,
) -> Result<bool, TransactionError> {
    let count = writes.len();
    let steps = writes
        .into_iter()
        .map(|(key, write)| Command::Commit { key, owner, write })
        .collect();
    let outcomes = submit(jobs, steps).await?;
    let applied = outcomes
        .iter()
        .filter(|outcome| **outcome == Outcome::Ok)
        .count();
    let released = outcomes
        .iter()
        .filter(|outcome| **outcome == Outcome::Error(KvError::NotReserved))
        .count();
    if applied == count {
        return Ok(true);
    }
    if released == count {
        return Ok(false);
    }
    if applied > 0 && released > 0 {
        // A commit is one ordered message over every key, and so is a stale release: this
        // cannot happen unless a lock was lost another way (a keyspace change moving a
        // reserved key: its lock does not move with it; `docs/internals/redis.md`).
        crate::log::warn(format_args!(
            "a multi-key commit applied at {applied} keys and found {released} released"
        ));
    }
    // Some step's answer was lost (`Unavailable`): the commit may have been applied.
    Err(TransactionError::Store(KvError::Unavailable))
}

/// Submits the steps as one command and waits for each step's outcome.
async fn submit(
    jobs: &mpsc::Sender<Job>,
    steps: Vec<Command>,
) -> Result<Vec<Outcome>, TransactionError> {
    let count = steps.len();
    let (reply, receiver) = oneshot::channel();
    let job = Job {
        work: Work::Keyed(Split::each(steps)),
        isolation: Isolation::Sequential,
        reply,
    };
    if jobs.send(job).await.is_err() {
        return Err(TransactionError::Store(KvError::Unavailable));
    }
    match receiver.await {
        Ok(Outcome::Pipeline(outcomes)) if outcomes.len() == count => Ok(outcomes),
        Ok(Outcome::Error(error)) => Err(TransactionError::Store(error)),
        _ => Err(TransactionError::Store(KvError::Unavailable)),
    }
}

/// A random pause before attempt `attempt + 1`, growing with the attempts.
async fn pause(attempt: u32) {
    let ceiling = (1u64 << attempt.min(6)).min(PAUSE_MS_MAX);
    let ms = 1 + crate::os::random_u64() % ceiling;
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

/// Whether a planned command runs as a multi-key command (reserve, run, commit) rather than
/// as one message of independent single-key shares: the multi-key operations. MSET, DEL and
/// MGET of several keys stay one message, as before: run as reservations they broke
/// `skyros_regrouping.rs`'s histories against Skyros's early-acknowledged SETs
/// (`docs/internals/redis.md`, "Deviations").
pub(super) fn needs_reservation(command: &Command) -> bool {
    matches!(command.unstamped(), Command::Keys(_))
}

/// How often a blocked command (BLPOP…) runs again while it finds nothing.
const BLOCKED_POLL_MS: u64 = 10;

/// Runs one planned multi-key command; its reply. A blocking command (BLPOP, BLMOVE…) that
/// finds nothing runs again every `BLOCKED_POLL_MS`, stamped anew, until it finds something,
/// its timeout passes (nil), or the client leaves (`stream` closed: nothing more is popped for
/// it).
///
/// While it waits the connection is marked blocked in `clients` (INFO's `blocked_clients`),
/// and CLIENT UNBLOCK ends the wait: as a timeout (nil) or with Redis's `UNBLOCKED` error.
pub(super) async fn execute_one(
    jobs: &mpsc::Sender<Job>,
    pending: &Pending,
    stream: &tokio::net::TcpStream,
    clients: (&super::clients::Clients, u64),
    notifier: &super::pubsub::Notifier,
) -> Value {
    let started = std::time::Instant::now();
    let mut pending = pending.clone();
    if pending.blocking_ms().is_some() {
        if let Err(error) = resolve_last_ids(jobs, &mut pending).await {
            return Value::Error(error.reply_text());
        }
    }
    let mut blocked = None;
    let waiting = pending.blocking_ms().map(|_| {
        clients
            .0
            .wait_in_line(clients.1, source_keys(&pending.command))
    });
    loop {
        let attempt = match &waiting {
            Some(waiting) => first_in_line(&pending.command, waiting),
            None => Some(pending.command.clone()),
        };
        let outcome = match attempt {
            // Every key it pops from is an older blocked client's: nothing for it yet.
            None => Outcome::Value(None),
            Some(command) => match attempt_once(jobs, command, blocked.is_some()).await {
                Ok(outcome) => outcome,
                Err(TransactionError::Store(error)) => return Value::Error(error.reply_text()),
                Err(TransactionError::Watched) => unreachable!("nothing was watched"),
            },
        };
        let waits = match pending.blocking_ms() {
            Some(0) => true,
            Some(timeout) => started.elapsed() < Duration::from_millis(timeout),
            None => false,
        };
        if !Pending::is_nil(&outcome) || !waits {
            notifier.notify(&pending.command, &outcome);
            return resp::finish(&pending, &outcome);
        }
        let keys = pending.command.keys().len();
        let blocked = blocked.get_or_insert_with(|| clients.0.block(clients.1, keys));
        let unblocked = tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(BLOCKED_POLL_MS)) => false,
            _ = blocked.unblock.notify.notified() => true,
        };
        if unblocked {
            if blocked
                .unblock
                .error
                .load(std::sync::atomic::Ordering::Relaxed)
            {
                return Value::Error("UNBLOCKED client unblocked via CLIENT UNBLOCK".into());
            }
            return resp::finish(&pending, &outcome);
        }
        if client_left(stream).await {
            return Value::Null;
        }
        pending.command = pending.command.unstamped().clone();
        pending.stamp(crate::os::unix_now_ms());
    }
}

/// One attempt of a blocking command: its outcome. Once the command has blocked, a source key
/// that holds another type does not answer it: Redis wakes a blocked pop only for a key of the
/// type it pops, so a MULTI that pushes, deletes and SETs the key leaves it blocked, and
/// `BLPOP k1 k2` with k1 now a string is served from k2. After a WRONGTYPE the attempt runs
/// again with the source keys' types read atomically with it; sources of another type are left
/// out (none left: it found nothing). A WRONGTYPE that remains comes from the destination
/// (BLMOVE into a string), which Redis answers with the error.
async fn attempt_once(
    jobs: &mpsc::Sender<Job>,
    command: Command,
    blocked: bool,
) -> Result<Outcome, TransactionError> {
    let first = run(jobs, std::slice::from_ref(&command), &[])
        .await?
        .remove(0);
    if !blocked || first != Outcome::Error(KvError::WrongType) {
        return Ok(first);
    }
    let Some(expected) = popped_type(&command) else {
        return Ok(first);
    };
    let now_ms = match &command {
        Command::At { now_ms, .. } => Some(*now_ms),
        _ => None,
    };
    let mut command = command;
    loop {
        let sources = source_keys(&command);
        let mut commands: Vec<Command> = sources
            .iter()
            .map(|key| {
                let read = Command::Type { key: key.clone() };
                match now_ms {
                    Some(now_ms) => read.stamped(now_ms),
                    None => read,
                }
            })
            .collect();
        commands.push(command.clone());
        let mut outcomes = run(jobs, &commands, &[]).await?;
        let outcome = outcomes.pop().expect("one outcome per command");
        let other: Vec<&Vec<u8>> = sources
            .iter()
            .zip(&outcomes)
            .filter(|(_, kind)| match kind {
                Outcome::Value(Some(name)) => name != b"none" && name != expected.as_bytes(),
                _ => false,
            })
            .map(|(key, _)| key)
            .collect();
        if other.is_empty() {
            return Ok(outcome);
        }
        let excluded = |key: &[u8]| other.iter().any(|other| other.as_slice() == key);
        match without_sources(&command, &excluded) {
            Some(restricted) => {
                // Each round leaves out at least one source, so the loop ends.
                assert!(source_keys(&restricted).len() < sources.len());
                command = restricted;
            }
            None => return Ok(Outcome::Value(None)),
        }
    }
}

/// The type a blocking command pops from its source keys (TYPE's name), if it pops.
fn popped_type(command: &Command) -> Option<&'static str> {
    match command.unstamped() {
        Command::Keys(KeysOperation::ListPop { .. } | KeysOperation::ListMove { .. }) => {
            Some("list")
        }
        Command::Keys(KeysOperation::SortedPop { .. } | KeysOperation::SortedMultiPop { .. }) => {
            Some("zset")
        }
        Command::Keys(KeysOperation::StreamRead { .. }) => Some("stream"),
        _ => None,
    }
}

/// A blocking XREAD's `$` IDs replaced by the streams' last IDs, read at one point of the
/// order before it waits (`KeysOperation::StreamLastIds`): what it then waits for are the
/// entries added after that point. Any other command is left as it is.
async fn resolve_last_ids(jobs: &mpsc::Sender<Job>, pending: &mut Pending) -> Result<(), KvError> {
    let now_ms = match &pending.command {
        Command::At { now_ms, .. } => Some(*now_ms),
        _ => None,
    };
    let Command::Keys(KeysOperation::StreamRead { keys, after, count }) =
        pending.command.unstamped()
    else {
        return Ok(());
    };
    if after.iter().all(Option::is_some) {
        return Ok(());
    }
    let read = Command::Keys(KeysOperation::StreamLastIds { keys: keys.clone() });
    let read = match now_ms {
        Some(now_ms) => read.stamped(now_ms),
        None => read,
    };
    let last_ids = match run(jobs, std::slice::from_ref(&read), &[]).await {
        Ok(mut outcomes) => match outcomes.remove(0) {
            Outcome::Values(ids) if ids.len() == keys.len() => ids,
            Outcome::Error(error) => return Err(error),
            _ => return Err(KvError::Unavailable),
        },
        Err(TransactionError::Store(error)) => return Err(error),
        Err(TransactionError::Watched) => unreachable!("nothing was watched"),
    };
    let mut resolved = Vec::with_capacity(after.len());
    for (after, last) in after.iter().zip(last_ids) {
        let last = last
            .as_deref()
            .and_then(|text| kv::StreamId::parse(text, 0))
            .ok_or(KvError::Unavailable)?;
        resolved.push(Some(after.unwrap_or(last)));
    }
    let command = Command::Keys(KeysOperation::StreamRead {
        keys: keys.clone(),
        after: resolved,
        count: *count,
    });
    pending.command = match now_ms {
        Some(now_ms) => command.stamped(now_ms),
        None => command,
    };
    Ok(())
}

/// The keys a blocking pop waits on.
fn source_keys(command: &Command) -> Vec<Vec<u8>> {
    match command.unstamped() {
        Command::Keys(operation) => operation
            .source_keys()
            .into_iter()
            .map(<[u8]>::to_vec)
            .collect(),
        _ => Vec::new(),
    }
}

/// The attempt a blocking pop may make now: its command without the keys older blocked
/// clients of this gateway wait on (they are served first, as Redis serves the
/// longest-waiting client), or `None` if that leaves none.
fn first_in_line(command: &Command, waiting: &super::clients::Waiting) -> Option<Command> {
    let taken = waiting.taken_by_older();
    if taken.is_empty() {
        return Some(command.clone());
    }
    without_sources(command, &|key: &[u8]| taken.contains(key))
}

/// `command` without the source keys `excluded` names, its stamp kept
/// (`KeysOperation::without_sources`); `None` if no source key is left. A command that pops
/// from nothing is returned as it is.
fn without_sources(command: &Command, excluded: &dyn Fn(&[u8]) -> bool) -> Option<Command> {
    match command {
        Command::At { now_ms, command } => match command.as_ref() {
            Command::Keys(operation) => Some(Command::At {
                now_ms: *now_ms,
                command: Box::new(Command::Keys(operation.without_sources(excluded)?)),
            }),
            _ => Some(Command::At {
                now_ms: *now_ms,
                command: command.clone(),
            }),
        },
        Command::Keys(operation) => Some(Command::Keys(operation.without_sources(excluded)?)),
        other => Some(other.clone()),
    }
}

/// Whether the client closed its side (a read would return end of file now).
async fn client_left(stream: &tokio::net::TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(
        tokio::time::timeout(Duration::ZERO, stream.peek(&mut byte)).await,
        Ok(Ok(0)) | Ok(Err(_))
    )
}

/// A single-key command refused because a multi-key command holds its key is planned again
/// (stamped now) and resubmitted after a pause, until it is not refused or `GIVE_UP_MS`
/// passed; a lock past its lease is released on the way. Any other outcome is returned as is.
pub(super) async fn settle(jobs: &mpsc::Sender<Job>, pending: &Pending, first: Outcome) -> Outcome {
    let started = crate::os::unix_now_ms();
    let mut outcome = first;
    let mut attempt = 0u32;
    while let Outcome::Error(KvError::Locked {
        owner,
        keys,
        until_ms,
    }) = &outcome
    {
        let now = crate::os::unix_now_ms();
        if now > started + GIVE_UP_MS {
            break;
        }
        if *until_ms < now {
            release(jobs, keys, *owner).await;
        }
        attempt += 1;
        pause(attempt).await;
        let command = pending
            .command
            .unstamped()
            .clone()
            .stamped(super::fault::stamp_now_ms());
        let Ok(split) = payload::split(&command) else {
            break;
        };
        let (reply, receiver) = oneshot::channel();
        let job = Job {
            work: Work::Keyed(split),
            isolation: Isolation::Sequential,
            reply,
        };
        if jobs.send(job).await.is_err() {
            return Outcome::Error(KvError::Unavailable);
        }
        outcome = receiver
            .await
            .unwrap_or(Outcome::Error(KvError::Unavailable));
    }
    outcome
}

/// One queued command of a MULTI.
enum Queued {
    /// Known at once (PING, ECHO…): replied in its place by EXEC.
    Reply(Value),
    /// Runs in the transaction.
    Command(Pending),
}

/// A connection's MULTI/WATCH state.
#[derive(Default)]
pub(super) struct Session {
    /// Inside MULTI: the queued commands, and whether one was refused (EXEC then aborts).
    queue: Option<(Vec<Queued>, bool)>,
    /// Watched keys as WATCH read them.
    watched: Vec<WatchedKey>,
    /// Queued commands the connection runs itself when EXEC has run the others (CONFIG): each
    /// one's place in the queue and its arguments.
    deferred: Vec<(usize, Vec<Vec<u8>>)>,
}

const EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";

impl Session {
    /// MULTI, EXEC, DISCARD, WATCH, UNWATCH, and every command while inside MULTI (queued);
    /// `None` for any other command outside MULTI. `keyless`: the command is one the gateway
    /// plans itself (KEYS, SCAN, FLUSHALL…), which a transaction does not run.
    pub(super) async fn on_command(
        &mut self,
        jobs: &mpsc::Sender<Job>,
        arguments: &[Vec<u8>],
        keyless: bool,
        notifier: &super::pubsub::Notifier,
    ) -> Option<Value> {
        let name = arguments[0].to_ascii_lowercase();
        let arity = |exact: bool, count: usize| {
            if exact {
                arguments.len() == count
            } else {
                arguments.len() >= count
            }
        };
        let (exact, count) = match name.as_slice() {
            b"multi" | b"exec" | b"discard" | b"unwatch" => (true, 1),
            b"watch" => (false, 2),
            _ => return self.queue(arguments, keyless),
        };
        if !arity(exact, count) {
            let text = resp_arity_error(&name);
            if let Some((_, aborted)) = &mut self.queue {
                *aborted = true;
            }
            return Some(Value::Error(text));
        }
        Some(match name.as_slice() {
            b"multi" if self.queue.is_some() => {
                Value::Error("ERR MULTI calls can not be nested".into())
            }
            b"multi" => {
                self.queue = Some((Vec::new(), false));
                Value::ok()
            }
            b"discard" => match self.queue.take() {
                None => Value::Error("ERR DISCARD without MULTI".into()),
                Some(_) => {
                    self.watched.clear();
                    self.deferred.clear();
                    Value::ok()
                }
            },
            b"unwatch" if self.queue.is_some() => return self.queue(arguments, keyless),
            b"unwatch" => {
                self.watched.clear();
                Value::ok()
            }
            b"watch" if self.queue.is_some() => {
                Value::Error("ERR WATCH inside MULTI is not allowed".into())
            }
            b"watch" => self.watch(jobs, &arguments[1..]).await,
            _ => self.exec(jobs, notifier).await,
        })
    }

    /// Inside MULTI: how many commands are queued (`None` outside MULTI).
    pub(super) fn queued(&self) -> Option<usize> {
        self.queue.as_ref().map(|(queued, _)| queued.len())
    }

    /// Inside MULTI: queues a command the connection runs itself at EXEC, after the others
    /// (`take_deferred`); its reply takes its place in EXEC's array. `None` outside MULTI.
    pub(super) fn defer(&mut self, arguments: &[Vec<u8>]) -> Option<Value> {
        let (queued, _) = self.queue.as_mut()?;
        self.deferred.push((queued.len(), arguments.to_vec()));
        queued.push(Queued::Reply(Value::Null));
        Some(Value::Simple("QUEUED".into()))
    }

    /// The deferred commands of the transaction EXEC is about to run (forgotten by the
    /// session; the caller runs them if EXEC answers an array).
    pub(super) fn take_deferred(&mut self) -> Vec<(usize, Vec<Vec<u8>>)> {
        std::mem::take(&mut self.deferred)
    }

    /// Inside MULTI: refuses a command a transaction cannot queue (answered `text`; EXEC then
    /// aborts, as for any command refused when queued). `None` outside MULTI.
    /// EXEC refused before it runs (a script keeps the gateway busy): the transaction is
    /// discarded and the connection leaves MULTI, as Redis answers it (`EXECABORT Transaction
    /// discarded because of: <the refusal>`). `None` outside MULTI.
    pub(super) fn abort_exec(&mut self, refusal: &str) -> Option<Value> {
        self.queue.take()?;
        self.deferred.clear();
        self.watched.clear();
        Some(Value::Error(format!(
            "EXECABORT Transaction discarded because of: {refusal}"
        )))
    }

    pub(super) fn refuse_queued(&mut self, text: &str) -> Option<Value> {
        let (_, aborted) = self.queue.as_mut()?;
        *aborted = true;
        Some(Value::Error(text.to_string()))
    }

    /// Queues a command inside MULTI (`None` outside). A command refused at once (unknown,
    /// wrong arity, bad arguments, or one a transaction does not run) is answered with its
    /// error and makes EXEC abort, as Redis does.
    fn queue(&mut self, arguments: &[Vec<u8>], keyless: bool) -> Option<Value> {
        let (queued, aborted) = self.queue.as_mut()?;
        let refuse = |aborted: &mut bool, text: String| {
            *aborted = true;
            Some(Value::Error(text))
        };
        if keyless {
            return refuse(
                aborted,
                "ERR KEYS, SCAN, FLUSHALL, FLUSHDB and DBSIZE are not supported inside MULTI yet"
                    .into(),
            );
        }
        match resp::plan(arguments) {
            Plan::Reply(Value::Error(text)) => refuse(aborted, text),
            Plan::Reply(value) => {
                queued.push(Queued::Reply(value));
                Some(Value::Simple("QUEUED".into()))
            }
            Plan::Execute(pending) if pending.command.counts() => refuse(
                aborted,
                "ERR KEYS, SCAN, FLUSHALL, FLUSHDB and DBSIZE are not supported inside MULTI yet"
                    .into(),
            ),
            Plan::Execute(pending) => {
                queued.push(Queued::Command(pending));
                Some(Value::Simple("QUEUED".into()))
            }
            _ => refuse(
                aborted,
                "ERR this command is not supported inside MULTI yet".into(),
            ),
        }
    }

    async fn watch(&mut self, jobs: &mpsc::Sender<Job>, keys: &[Vec<u8>]) -> Value {
        let fresh: Vec<Bytes> = keys
            .iter()
            .filter(|key| !self.watched.iter().any(|watched| watched.key == **key))
            .cloned()
            .collect();
        if fresh.is_empty() {
            return Value::ok();
        }
        match read_records(jobs, &fresh).await {
            Ok(records) => {
                self.watched.extend(records);
                Value::ok()
            }
            Err(TransactionError::Store(error)) => Value::Error(error.reply_text()),
            Err(TransactionError::Watched) => unreachable!("a read watches nothing"),
        }
    }

    /// EXEC: the queued commands as one multi-key command over every key they name and every
    /// watched key, at one stamp; nil if a watched key changed.
    async fn exec(
        &mut self,
        jobs: &mpsc::Sender<Job>,
        notifier: &super::pubsub::Notifier,
    ) -> Value {
        let Some((queued, aborted)) = self.queue.take() else {
            return Value::Error("ERR EXEC without MULTI".into());
        };
        let watched = std::mem::take(&mut self.watched);
        if aborted {
            return Value::Error(EXECABORT.into());
        }
        let now = super::fault::stamp_now_ms();
        let mut commands = Vec::new();
        let mut queued = queued;
        for entry in &mut queued {
            if let Queued::Command(pending) = entry {
                pending.stamp(now);
                commands.push(pending.command.clone());
            }
        }
        if commands.is_empty() && watched.is_empty() {
            return Value::Array(
                queued
                    .into_iter()
                    .map(|entry| match entry {
                        Queued::Reply(value) => value,
                        Queued::Command(_) => unreachable!("no command was queued"),
                    })
                    .collect(),
            );
        }
        let mut outcomes = match run(jobs, &commands, &watched).await {
            Ok(outcomes) => outcomes.into_iter(),
            Err(TransactionError::Watched) => return Value::Null,
            Err(TransactionError::Store(error)) => return Value::Error(error.reply_text()),
        };
        Value::Array(
            queued
                .into_iter()
                .map(|entry| match entry {
                    Queued::Reply(value) => value,
                    Queued::Command(pending) => {
                        let outcome = outcomes.next().expect("one outcome per queued command");
                        notifier.notify(&pending.command, &outcome);
                        resp::finish(&pending, &outcome)
                    }
                })
                .collect(),
        )
    }
}

fn resp_arity_error(name: &[u8]) -> String {
    format!(
        "ERR wrong number of arguments for '{}' command",
        String::from_utf8_lossy(name)
    )
}
