//! Redis scripts at a gateway: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT, FUNCTION, FCALL
//! (`docs/internals/redis.md`, "Scripts").
//!
//! A script with declared keys runs as a multi-key command (`transaction::run_reserved`):
//! every declared key is reserved (locked and read) at one place of the order, the script runs
//! here on a scratch store of those records (`script::run`, on a blocking thread), and its
//! writes are committed in one ordered message. So it is atomic and strictly serialisable with
//! everything else, across partitions; replicas never run Lua, they apply the committed
//! records. A script without keys touches nothing and runs here alone.
//!
//! The script cache (SCRIPT LOAD, and every EVAL) belongs to this storage process's gateway,
//! as Redis Cluster's belongs to each node: EVALSHA on another process answers NOSCRIPT until
//! the script is loaded there too (clients retry with EVAL, as they do against Redis Cluster).

use super::gateway::Job;
use super::transaction::{self, Computed, TransactionError};
use crate::security::resp::{KeyPermission, KEY_REFUSED};
use kv::Scratch;
use resp::Value;
use script::{Kill, Killer};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::mpsc;

/// Redis 7.0's default `busy-reply-threshold` (`lua-time-limit`): once a script has run this
/// long, this gateway answers `BUSY` to other commands until it ends or SCRIPT KILL stops it.
pub(super) const BUSY_REPLY_THRESHOLD_MS: u64 = 5_000;

/// What other clients of the gateway get while a script runs past the threshold (Redis 7.0).
pub(super) const BUSY_TEXT: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

/// SCRIPT KILL's answer when every running script already wrote (Redis 7.0).
const UNKILLABLE_TEXT: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";

/// How many times a script may be run again for keys it did not declare (each run reserves
/// at least one more key).
const UNDECLARED_ROUNDS_MAX: usize = 64;

/// What one run of a script produced.
struct Once {
    reply: Value,
    /// The writes to commit, if the run is to be committed.
    writes: Option<Vec<(Vec<u8>, kv::CommitWrite)>>,
    /// Keys the script named without having them reserved (it was stopped, commits nothing).
    undeclared: Vec<Vec<u8>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The commands this module answers.
const COMMANDS: &[&[u8]] = &[
    b"eval",
    b"evalsha",
    b"eval_ro",
    b"evalsha_ro",
    b"script",
    b"function",
    b"fcall",
    b"fcall_ro",
];

/// What MULTI answers for a script command (a transaction does not run scripts yet).
pub(super) const NOT_IN_MULTI: &str =
    "ERR EVAL, EVALSHA, SCRIPT, FUNCTION and FCALL are not supported inside MULTI yet";

/// One gateway's scripts: the cache of bodies by SHA1 and the scripts running now.
pub(crate) struct Scripts {
    cache: Mutex<HashMap<String, Arc<Vec<u8>>>>,
    /// The scripts running now: a number drawn when each started, its killer, its start.
    running: Mutex<Vec<(u64, Killer, Instant)>>,
    /// `busy-reply-threshold` (alias `lua-time-limit`) in milliseconds; 0: never busy.
    busy_reply_threshold_ms: AtomicU64,
}

impl Default for Scripts {
    fn default() -> Scripts {
        Scripts {
            cache: Mutex::default(),
            running: Mutex::default(),
            busy_reply_threshold_ms: AtomicU64::new(BUSY_REPLY_THRESHOLD_MS),
        }
    }
}

/// Whether `name` (any case) is a command of this module.
pub(super) fn is_script_command(name: &[u8]) -> bool {
    COMMANDS.contains(&name.to_ascii_lowercase().as_slice())
}

/// Commands a busy gateway still runs (Redis 7.0's `allow-busy` commands that Tessera has).
fn allowed_while_busy(arguments: &[Vec<u8>]) -> bool {
    let name = arguments[0].to_ascii_lowercase();
    let subcommand = arguments.get(1).map(|word| word.to_ascii_lowercase());
    match name.as_slice() {
        b"auth" | b"hello" | b"quit" | b"reset" | b"multi" | b"discard" | b"watch" | b"unwatch"
        | b"shutdown" => true,
        b"script" => subcommand.as_deref() == Some(b"kill"),
        b"function" => matches!(subcommand.as_deref(), Some(b"kill" | b"stats")),
        _ => false,
    }
}

impl Scripts {
    /// `BUSY`'s error if a script at this gateway has run past `busy-reply-threshold` and the
    /// command is not one a busy Redis still runs.
    pub(super) fn refuse_busy(&self, arguments: &[Vec<u8>]) -> Option<Value> {
        let threshold_ms = self.busy_reply_threshold_ms.load(Ordering::SeqCst);
        if threshold_ms == 0 || allowed_while_busy(arguments) {
            return None;
        }
        let busy = self.lock_running().iter().any(|(_, killer, started)| {
            killer.killed().is_none() && started.elapsed().as_millis() >= u128::from(threshold_ms)
        });
        busy.then(|| Value::Error(BUSY_TEXT.into()))
    }

    /// INFO's `memory` section: what Tessera has of Redis's (the scripts cached here).
    pub(super) fn info_section(&self) -> resp::InfoSection {
        resp::InfoSection {
            name: "memory",
            lines: vec![(
                "number_of_cached_scripts".into(),
                self.lock_cache().len().to_string(),
            )],
        }
    }

    /// CONFIG SET `busy-reply-threshold` / `lua-time-limit` (milliseconds).
    pub(super) fn set_busy_reply_threshold_ms(&self, threshold_ms: u64) {
        self.busy_reply_threshold_ms
            .store(threshold_ms, Ordering::SeqCst);
    }

    pub(super) fn busy_reply_threshold_ms(&self) -> u64 {
        self.busy_reply_threshold_ms.load(Ordering::SeqCst)
    }

    /// Answers one script command (`is_script_command`).
    pub(super) async fn on_command(
        &self,
        jobs: &mpsc::Sender<Job>,
        arguments: &[Vec<u8>],
        permission: &KeyPermission,
    ) -> Value {
        let name = arguments[0].to_ascii_lowercase();
        match name.as_slice() {
            b"eval" | b"eval_ro" | b"evalsha" | b"evalsha_ro" => {
                self.eval(jobs, &name, arguments, permission).await
            }
            b"script" => self.script(arguments),
            b"function" => function(arguments),
            _ => fcall(&name, arguments),
        }
    }

    async fn eval(
        &self,
        jobs: &mpsc::Sender<Job>,
        name: &[u8],
        arguments: &[Vec<u8>],
        permission: &KeyPermission,
    ) -> Value {
        let call = match parse_call(name, arguments) {
            Ok(call) => call,
            Err(text) => return Value::Error(text),
        };
        let by_sha = name.starts_with(b"evalsha");
        let body = if by_sha {
            let sha = String::from_utf8_lossy(&arguments[1]).to_ascii_lowercase();
            match self.lookup(&sha) {
                Some(body) => body,
                None => {
                    return Value::Error("NOSCRIPT No matching script. Please use EVAL.".into())
                }
            }
        } else {
            let body = Arc::new(arguments[1].clone());
            if let Err(text) = script::compile(&body) {
                return Value::Error(text);
            }
            self.insert(body.clone());
            body
        };
        let read_only = name.ends_with(b"_ro");
        self.run(jobs, body, call.keys, call.arguments, read_only, permission)
            .await
    }

    /// Runs a script over its declared keys: reserved, run, committed. A script that names
    /// a key it did not declare is stopped before it commits anything; the key joins the
    /// reservation and the script runs again from the start (a single Redis serves undeclared
    /// keys; BullMQ's scripts build job keys from a declared prefix). Each round adds at least
    /// one key; after `UNDECLARED_ROUNDS_MAX` rounds the script is refused with Redis
    /// Cluster's text.
    async fn run(
        &self,
        jobs: &mpsc::Sender<Job>,
        body: Arc<Vec<u8>>,
        keys: Vec<Vec<u8>>,
        arguments: Vec<Vec<u8>>,
        read_only: bool,
        permission: &KeyPermission,
    ) -> Value {
        let keys = Arc::new(keys);
        let arguments = Arc::new(arguments);
        let mut reserved = transaction::distinct_keys(keys.iter().map(Vec::as_slice));
        for _ in 0..UNDECLARED_ROUNDS_MAX {
            let undeclared = Mutex::new(Vec::new());
            let reply = if reserved.is_empty() {
                match self
                    .run_once(&body, &keys, &arguments, read_only, Vec::new())
                    .await
                {
                    Ok(once) => {
                        *lock(&undeclared) = once.undeclared;
                        once.reply
                    }
                    Err(text) => Value::Error(text),
                }
            } else {
                self.run_reserved(
                    jobs,
                    &reserved,
                    &body,
                    &keys,
                    &arguments,
                    read_only,
                    &undeclared,
                )
                .await
            };
            let undeclared = undeclared
                .into_inner()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if undeclared.is_empty() {
                return reply;
            }
            // The user's key patterns cover every key the script touches, as Redis checks each
            // command a script runs (the declared keys were checked before it ran).
            if undeclared.iter().any(|key| !permission.allows(key)) {
                return Value::Error(KEY_REFUSED.into());
            }
            let before = reserved.len();
            for key in undeclared {
                if !reserved.contains(&key) {
                    reserved.push(key);
                }
            }
            assert!(
                reserved.len() > before,
                "an undeclared key was not reserved yet"
            );
        }
        Value::Error(format!(
            "{} (it named undeclared keys in more than {UNDECLARED_ROUNDS_MAX} runs)",
            script::UNDECLARED_TEXT
        ))
    }

    /// One reserved run over `reserved`: the reply, with the writes committed; a run stopped
    /// at an undeclared key records its keys in `undeclared` and releases everything.
    #[allow(clippy::too_many_arguments)]
    async fn run_reserved(
        &self,
        jobs: &mpsc::Sender<Job>,
        reserved: &[Vec<u8>],
        body: &Arc<Vec<u8>>,
        keys: &Arc<Vec<Vec<u8>>>,
        arguments: &Arc<Vec<Vec<u8>>>,
        read_only: bool,
        undeclared: &Mutex<Vec<Vec<u8>>>,
    ) -> Value {
        let result = transaction::run_reserved(jobs, reserved, &[], |records| {
            let run = self.run_once(body, keys, arguments, read_only, records);
            async move {
                match run.await {
                    Ok(once) if !once.undeclared.is_empty() => {
                        *lock(undeclared) = once.undeclared;
                        Ok(Computed::Release(once.reply))
                    }
                    Ok(Once {
                        reply,
                        writes: Some(writes),
                        ..
                    }) => Ok(Computed::Commit(reply, writes)),
                    Ok(once) => Ok(Computed::Release(once.reply)),
                    Err(text) => Ok(Computed::Release(Value::Error(text))),
                }
            }
        })
        .await;
        match result {
            Ok(reply) => reply,
            Err(TransactionError::Store(error)) => Value::Error(error.reply_text()),
            Err(TransactionError::Watched) => unreachable!("a script watches nothing"),
        }
    }

    /// One run of the script on `records` (a blocking thread; it runs until it ends or SCRIPT
    /// KILL stops it, its reservation's lease renewed meanwhile by `transaction`):
    /// its reply, the writes if they are to be committed, and the undeclared keys it met.
    async fn run_once(
        &self,
        body: &Arc<Vec<u8>>,
        keys: &Arc<Vec<Vec<u8>>>,
        arguments: &Arc<Vec<Vec<u8>>>,
        read_only: bool,
        records: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    ) -> Result<Once, String> {
        let killer = Killer::default();
        let number = crate::os::random_u64();
        self.lock_running()
            .push((number, killer.clone(), Instant::now()));
        let (body, keys, arguments) = (body.clone(), keys.clone(), arguments.clone());
        let now_ms = crate::os::unix_now_ms();
        let seed = crate::os::random_u64();
        let running = killer.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let mut scratch = Scratch::new(&records).map_err(|error| error.reply_text())?;
            let script = script::Script {
                body: &body,
                keys: &keys,
                arguments: &arguments,
                now_ms,
                seed,
                read_only,
            };
            let run = script::run(&script, &mut scratch, &running);
            for line in &run.log {
                crate::log::info(format_args!("script log: {line}"));
            }
            let writes = run.commit.then(|| scratch.writes());
            Ok(Once {
                reply: run.reply,
                writes,
                undeclared: run.undeclared,
            })
        })
        .await;
        self.lock_running()
            .retain(|(running, _, _)| *running != number);
        joined.unwrap_or_else(|error| Err(format!("ERR the script's thread failed: {error}")))
    }

    fn lock_running(&self) -> std::sync::MutexGuard<'_, Vec<(u64, Killer, Instant)>> {
        self.running
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Vec<u8>>>> {
        self.cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn lookup(&self, sha: &str) -> Option<Arc<Vec<u8>>> {
        self.lock_cache().get(sha).cloned()
    }

    /// Caches a body that compiles; its SHA1.
    fn insert(&self, body: Arc<Vec<u8>>) -> String {
        let sha = script::sha1_hex(&body);
        self.lock_cache().insert(sha.clone(), body);
        sha
    }

    /// SCRIPT LOAD, EXISTS, FLUSH, KILL, HELP.
    fn script(&self, arguments: &[Vec<u8>]) -> Value {
        let Some(subcommand) = arguments.get(1) else {
            return Value::Error("ERR wrong number of arguments for 'script' command".into());
        };
        let subcommand = subcommand.to_ascii_lowercase();
        let arity = |name: &str| {
            Value::Error(format!(
                "ERR wrong number of arguments for 'script|{name}' command"
            ))
        };
        match (subcommand.as_slice(), arguments.len()) {
            (b"load", 3) => {
                let body = Arc::new(arguments[2].clone());
                match script::compile(&body) {
                    Ok(()) => Value::Bulk(self.insert(body).into_bytes()),
                    Err(text) => Value::Error(text),
                }
            }
            (b"load", _) => arity("load"),
            (b"exists", 2) => arity("exists"),
            (b"exists", _) => {
                let cache = self.lock_cache();
                Value::Array(
                    arguments[2..]
                        .iter()
                        .map(|sha| {
                            let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
                            Value::Integer(i64::from(cache.contains_key(&sha)))
                        })
                        .collect(),
                )
            }
            (b"flush", 2) => self.flush(),
            (b"flush", 3)
                if arguments[2].eq_ignore_ascii_case(b"sync")
                    || arguments[2].eq_ignore_ascii_case(b"async") =>
            {
                self.flush()
            }
            (b"flush", 3) => Value::Error("ERR SCRIPT FLUSH only support SYNC|ASYNC option".into()),
            (b"flush", _) => arity("flush"),
            (b"kill", 2) => self.kill(),
            (b"kill", _) => arity("kill"),
            (b"debug", _) => Value::Error(
                "ERR SCRIPT DEBUG is not supported by Tessera (no Lua debugger)".into(),
            ),
            (b"help", 2) => help(SCRIPT_HELP),
            _ => Value::Error(format!(
                "ERR unknown subcommand '{}'. Try SCRIPT HELP.",
                String::from_utf8_lossy(&arguments[1])
            )),
        }
    }

    fn flush(&self) -> Value {
        self.lock_cache().clear();
        Value::ok()
    }

    /// SCRIPT KILL: stops the scripts running at this gateway that have not written (each
    /// then writes nothing: its writes are committed only when it ends); `UNKILLABLE` if
    /// every running script already wrote, as Redis refuses to stop a script that wrote.
    fn kill(&self) -> Value {
        let running = self.lock_running();
        if running.is_empty() {
            return Value::Error("NOTBUSY No scripts in execution right now.".into());
        }
        let killable: Vec<&Killer> = running
            .iter()
            .map(|(_, killer, _)| killer)
            .filter(|killer| !killer.has_written())
            .collect();
        if killable.is_empty() {
            return Value::Error(UNKILLABLE_TEXT.into());
        }
        for killer in killable {
            killer.kill(Kill::Requested);
        }
        Value::ok()
    }
}

const SCRIPT_HELP: &[&str] = &[
    "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush this storage process's script cache.",
    "KILL",
    "    Kill the scripts running at this storage process that have not written.",
    "LOAD <script>",
    "    Load a script into this storage process's script cache without executing it.",
    "HELP",
    "    Prints this help.",
];

fn help(lines: &[&str]) -> Value {
    Value::Array(
        lines
            .iter()
            .map(|line| Value::Simple(line.to_string()))
            .collect(),
    )
}

/// EVAL's arguments past the script: the declared keys and ARGV.
struct Call {
    keys: Vec<Vec<u8>>,
    arguments: Vec<Vec<u8>>,
}

/// `<name> script|sha numkeys key… arg…`, checked as Redis 7.0 checks it.
fn parse_call(name: &[u8], arguments: &[Vec<u8>]) -> Result<Call, String> {
    if arguments.len() < 3 {
        return Err(format!(
            "ERR wrong number of arguments for '{}' command",
            String::from_utf8_lossy(name)
        ));
    }
    let count = std::str::from_utf8(&arguments[2])
        .ok()
        .and_then(|text| text.parse::<i64>().ok())
        .ok_or("ERR value is not an integer or out of range")?;
    let available = (arguments.len() - 3) as i64;
    if count > available {
        return Err("ERR Number of keys can't be greater than number of args".into());
    }
    if count < 0 {
        return Err("ERR Number of keys can't be negative".into());
    }
    let split = 3 + count as usize;
    Ok(Call {
        keys: arguments[3..split].to_vec(),
        arguments: arguments[split..].to_vec(),
    })
}

/// FUNCTION: Tessera has no function libraries yet. FLUSH and LIST answer for the empty set
/// (what they do with no library), DELETE finds nothing; LOAD and RESTORE, which would
/// create one, are refused by name.
fn function(arguments: &[Vec<u8>]) -> Value {
    let Some(subcommand) = arguments.get(1) else {
        return Value::Error("ERR wrong number of arguments for 'function' command".into());
    };
    let subcommand = subcommand.to_ascii_lowercase();
    let rest = &arguments[2..];
    match subcommand.as_slice() {
        b"flush" => match rest {
            [] => Value::ok(),
            [mode] if mode.eq_ignore_ascii_case(b"sync") || mode.eq_ignore_ascii_case(b"async") => {
                Value::ok()
            }
            [_] => Value::Error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option".into()),
            _ => Value::Error("ERR wrong number of arguments for 'function|flush' command".into()),
        },
        b"list" => function_list(rest),
        b"delete" => match rest {
            [_] => Value::Error("ERR Library not found".into()),
            _ => Value::Error("ERR wrong number of arguments for 'function|delete' command".into()),
        },
        b"load" | b"restore" | b"dump" | b"kill" | b"stats" => Value::Error(format!(
            "ERR FUNCTION {} is not supported by Tessera (no function libraries yet)",
            String::from_utf8_lossy(&subcommand).to_ascii_uppercase()
        )),
        _ => Value::Error(format!(
            "ERR unknown subcommand '{}'. Try FUNCTION HELP.",
            String::from_utf8_lossy(&arguments[1])
        )),
    }
}

/// `FUNCTION LIST [WITHCODE] [LIBRARYNAME pattern]`: no library matches.
fn function_list(options: &[Vec<u8>]) -> Value {
    let mut index = 0;
    while index < options.len() {
        let option = &options[index];
        if option.eq_ignore_ascii_case(b"withcode") {
            index += 1;
        } else if option.eq_ignore_ascii_case(b"libraryname") && index + 1 < options.len() {
            index += 2;
        } else {
            return Value::Error(format!(
                "ERR Unknown argument {}",
                String::from_utf8_lossy(option)
            ));
        }
    }
    Value::Array(Vec::new())
}

/// FCALL, FCALL_RO: no function exists.
fn fcall(name: &[u8], arguments: &[Vec<u8>]) -> Value {
    if arguments.len() < 3 {
        return Value::Error(format!(
            "ERR wrong number of arguments for '{}' command",
            String::from_utf8_lossy(name)
        ));
    }
    Value::Error("ERR Function not found".into())
}
