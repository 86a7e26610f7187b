//! Redis scripts for Tessera (`EVAL`, `EVALSHA`, `EVAL_RO`, `EVALSHA_RO`): Lua 5.1 run against
//! the records of the keys a script declared, with Redis 7.0's reply conversions, error texts
//! and sandbox (`docs/internals/redis.md`, "Scripts").
//!
//! The crate is pure: no I/O, no clock, no OS randomness. The runtime reserves the declared
//! keys (as for MULTI/EXEC), builds a [`kv::Scratch`] of their records, calls [`run`] with the
//! script's stamp and a seed, and commits the scratch store's writes if [`Run::commit`] says
//! so. Replicas never run a script: they apply its committed records, so every replica agrees
//! whatever the script did.
//!
//! Stopping: the runtime may set a [`Killer`] (its time limit, or `SCRIPT KILL`) from another
//! thread; the script then stops within a few thousand Lua instructions and nothing is
//! committed.

mod call;
mod convert;
mod libraries;
mod sandbox;

pub use call::{
    NOT_ALLOWED_TEXT, NO_ARGUMENTS_TEXT, READ_ONLY_TEXT, UNDECLARED_TEXT, UNKNOWN_TEXT,
    WHOLE_KEYSPACE_TEXT, WRONG_ARITY_TEXT,
};
pub use convert::{lua_to_reply, reply_to_lua, truncate};
pub use libraries::format_g;

use kv::Scratch;
use resp::Value;
use sha1::{Digest, Sha1};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;

/// The most memory one script run may allocate in its Lua state.
pub const MEMORY_BYTES_MAX: usize = 256 << 20;

/// One script run.
pub struct Script<'a> {
    /// The Lua source.
    pub body: &'a [u8],
    /// `KEYS`: the declared keys (every key a command of the script may name).
    pub keys: &'a [Vec<u8>],
    /// `ARGV`.
    pub arguments: &'a [Vec<u8>],
    /// The time the script sees (unix milliseconds): the stamp of its ordered operation.
    pub now_ms: u64,
    /// The seed of `math.random` (until the script calls `math.randomseed`).
    pub seed: u64,
    /// EVAL_RO, EVALSHA_RO: a write command is refused.
    pub read_only: bool,
}

/// What a script run produced.
#[derive(Debug, PartialEq)]
pub struct Run {
    /// The reply to the client.
    pub reply: Value,
    /// Whether the scratch store's writes are to be committed. Redis keeps the writes a script
    /// made before an error, and so does Tessera; a killed script (time limit, `SCRIPT KILL`)
    /// or one that ran out of memory commits nothing.
    pub commit: bool,
    /// What the script logged (`redis.log`), for the runtime's log.
    pub log: Vec<String>,
    /// Keys commands of the script named that the scratch store did not hold (not declared,
    /// so not reserved). They were taken in as absent so that the run could find every key it
    /// names, and the run commits nothing. The runtime reserves these keys too and runs the
    /// script again, as a single Redis serves undeclared keys; its reply, if it does not, is
    /// Redis Cluster's refusal.
    pub undeclared: Vec<Vec<u8>>,
}

/// Why a script was stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kill {
    /// It ran past the runtime's time limit.
    TimeLimit,
    /// `SCRIPT KILL`.
    Requested,
}

/// A flag the runtime sets, from any thread, to stop a running script; and the flag the
/// script sets once it wrote (SCRIPT KILL refuses to stop a script that wrote, as Redis).
#[derive(Clone, Debug, Default)]
pub struct Killer {
    state: Arc<AtomicU8>,
    wrote: Arc<AtomicBool>,
}

impl Killer {
    /// Records that the script ran a write command that succeeded.
    pub fn mark_written(&self) {
        self.wrote.store(true, Ordering::SeqCst);
    }

    /// Whether the script ran a write command that succeeded (Redis's "already executed write
    /// commands against the dataset").
    pub fn has_written(&self) -> bool {
        self.wrote.load(Ordering::SeqCst)
    }

    /// Stops the script (the first reason set stays).
    pub fn kill(&self, kill: Kill) {
        let code = match kill {
            Kill::TimeLimit => 1,
            Kill::Requested => 2,
        };
        let _ = self
            .state
            .compare_exchange(0, code, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// Why the script was stopped, if it was.
    pub fn killed(&self) -> Option<Kill> {
        match self.state.load(Ordering::SeqCst) {
            0 => None,
            1 => Some(Kill::TimeLimit),
            _ => Some(Kill::Requested),
        }
    }
}

/// What a script's shebang line (`#!lua flags=…`, Redis 7.0) declares.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shebang {
    /// `no-writes`: the script runs as read-only (as under EVAL_RO).
    pub no_writes: bool,
}

/// Redis 7.0's shebang flags Tessera accepts. `no-writes` makes the script read-only;
/// `allow-oom`, `allow-stale` and `allow-cross-slot-keys` allow what Tessera never refuses (it
/// has no out-of-memory refusal, no stale replica reads, and serves keys across partitions);
/// `no-cluster` is refused when run (every Tessera deployment is a cluster).
const SHEBANG_FLAGS: &[&str] = &[
    "no-writes",
    "allow-oom",
    "allow-stale",
    "no-cluster",
    "allow-cross-slot-keys",
];

/// Parses the shebang line of `body`, if it has one: the flags, and the body with that line
/// blanked (line numbers in messages stay the script's). Redis 7.0's error texts.
pub fn shebang(body: &[u8]) -> Result<(Shebang, std::borrow::Cow<'_, [u8]>), String> {
    if !body.starts_with(b"#!") {
        return Ok((Shebang::default(), std::borrow::Cow::Borrowed(body)));
    }
    let end = body
        .iter()
        .position(|byte| *byte == b'\n')
        .unwrap_or(body.len());
    let line = String::from_utf8_lossy(&body[..end]).into_owned();
    let mut parts = line.split(' ').filter(|part| !part.is_empty());
    if parts.next() != Some("#!lua") {
        return Err("ERR Unexpected engine in script shebang in first line".into());
    }
    let mut declared = Shebang::default();
    for part in parts {
        let Some(flags) = part.strip_prefix("flags=") else {
            return Err(format!("ERR Unknown lua shebang option: {part}"));
        };
        for flag in flags.split(',').filter(|flag| !flag.is_empty()) {
            if !SHEBANG_FLAGS.contains(&flag) {
                return Err(format!("ERR Unexpected flag in script shebang: {flag}"));
            }
            if flag == "no-cluster" {
                return Err("ERR Can not run script on cluster, 'no-cluster' flag is set.".into());
            }
            declared.no_writes |= flag == "no-writes";
        }
    }
    Ok((declared, std::borrow::Cow::Owned(body[end..].to_vec())))
}

/// A script's name in replies and in the script cache: the SHA1 of its body, in lowercase hex.
pub fn sha1_hex(body: &[u8]) -> String {
    let digest = Sha1::digest(body);
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Whether `body` compiles (SCRIPT LOAD, and EVAL before caching a body): Redis's error reply
/// if it does not.
pub fn compile(body: &[u8]) -> Result<(), String> {
    let (_, body) = shebang(body)?;
    match sandbox::compile_only(&body) {
        Ok(()) => Ok(()),
        Err(sandbox::Failure::Compile(text)) => Err(compile_error_text(&text)),
        Err(_) => Err("ERR Error compiling script (new function): out of memory".into()),
    }
}

fn compile_error_text(text: &str) -> String {
    convert::one_line(&format!(
        "ERR Error compiling script (new function): {text}"
    ))
}

/// Runs `script` on `scratch` (the records of its declared keys). Never panics on what the
/// script does.
pub fn run(script: &Script, scratch: &mut Scratch, killer: &Killer) -> Run {
    let sha = sha1_hex(script.body);
    let mut log = Vec::new();
    let (declared, body) = match shebang(script.body) {
        Ok(parsed) => parsed,
        Err(text) => {
            return Run {
                reply: Value::Error(text),
                commit: false,
                log,
                undeclared: Vec::new(),
            }
        }
    };
    let script = Script {
        body: &body,
        read_only: script.read_only || declared.no_writes,
        ..*script
    };
    let mut undeclared = Vec::new();
    let result = sandbox::run(&script, &sha, scratch, killer, &mut log, &mut undeclared);
    let (reply, commit) = match (killer.killed(), result) {
        (Some(kill), _) => (Value::Error(killed_text(kill, &sha)), false),
        (None, Ok(reply)) => (reply, true),
        (None, Err(sandbox::Failure::Compile(text))) => {
            (Value::Error(compile_error_text(&text)), false)
        }
        (None, Err(sandbox::Failure::Raised(text))) => (Value::Error(text), true),
        (None, Err(sandbox::Failure::Memory)) => (
            Value::Error(format!(
                "ERR Script ran out of memory (Tessera's limit is {} MiB) script: {sha}",
                MEMORY_BYTES_MAX >> 20
            )),
            false,
        ),
    };
    assert!(
        !matches!(&reply, Value::Error(text) if text.contains(['\r', '\n'])),
        "an error reply is one line"
    );
    let (reply, commit) = if undeclared.is_empty() || killer.killed().is_some() {
        (reply, commit)
    } else {
        (
            Value::Error(format!("{UNDECLARED_TEXT} script: {sha}")),
            false,
        )
    };
    assert!(
        !commit || undeclared.is_empty(),
        "a run that met an undeclared key commits nothing"
    );
    Run {
        reply,
        commit,
        log,
        undeclared,
    }
}

fn killed_text(kill: Kill, sha: &str) -> String {
    match kill {
        Kill::Requested => format!("ERR Script killed by user with SCRIPT KILL... script: {sha}"),
        Kill::TimeLimit => format!(
            "ERR Script killed: it ran past Tessera's script time limit and wrote nothing script: {sha}"
        ),
    }
}
