//! `redis.call` and `redis.pcall`: one Redis command run on the script's scratch store.
//!
//! A command is planned by `resp::plan` exactly as a client's, stamped with the script's time,
//! and executed on the scratch store of the keys the script declared (`kv::Scratch`). What a
//! script may not do answers Redis's error texts: a command that is not allowed from scripts,
//! a write from a read-only script (EVAL_RO), and, as Redis Cluster refuses it, a key the script
//! did not declare (Tessera reserves only the declared keys, so it could not serve another one
//! atomically).

use kv::Scratch;
use resp::{Plan, Value};

/// Commands a script may never run (Redis's `noscript` commands, and connection state).
const NOT_ALLOWED: &[&[u8]] = &[
    b"eval",
    b"evalsha",
    b"eval_ro",
    b"evalsha_ro",
    b"fcall",
    b"fcall_ro",
    b"script",
    b"function",
    b"multi",
    b"exec",
    b"discard",
    b"watch",
    b"unwatch",
    b"subscribe",
    b"psubscribe",
    b"unsubscribe",
    b"punsubscribe",
    b"ssubscribe",
    b"sunsubscribe",
    b"auth",
    b"hello",
    b"client",
    b"quit",
    b"reset",
    b"monitor",
    b"readmode",
    b"debug",
    b"cluster",
];

/// Commands that read or change the whole keyspace: a script sees only its declared keys.
const WHOLE_KEYSPACE: &[&[u8]] = &[
    b"keys",
    b"scan",
    b"randomkey",
    b"flushall",
    b"flushdb",
    b"dbsize",
];

pub const NOT_ALLOWED_TEXT: &str = "ERR This Redis command is not allowed from script";
pub const WHOLE_KEYSPACE_TEXT: &str =
    "ERR KEYS, SCAN, RANDOMKEY, FLUSHALL, FLUSHDB and DBSIZE are not supported in scripts (a script sees only its declared keys)";
pub const WRONG_ARITY_TEXT: &str = "ERR Wrong number of args calling Redis command from script";
pub const UNKNOWN_TEXT: &str = "ERR Unknown Redis command called from script";
pub const READ_ONLY_TEXT: &str = "ERR Write commands are not allowed from read-only scripts.";
pub const UNDECLARED_TEXT: &str =
    "ERR Script attempted to access a non local key in a cluster node";
pub const NO_ARGUMENTS_TEXT: &str =
    "ERR Please specify at least one argument for this redis lib call";

/// What `redis.call` runs against.
pub struct Context<'a> {
    /// Told when a write command succeeds (SCRIPT KILL refuses a script that wrote).
    pub killer: &'a crate::Killer,
    /// The keys commands named that the scratch store did not hold (taken in as absent).
    pub undeclared: Vec<Vec<u8>>,
    pub scratch: &'a mut Scratch,
    /// The script's time (unix milliseconds), stamped where it was ordered.
    pub now_ms: u64,
    /// EVAL_RO, EVALSHA_RO: writes are refused.
    pub read_only: bool,
}

impl Context<'_> {
    /// Runs one command; its reply (an error reply is raised by `redis.call`).
    pub fn call(&mut self, arguments: &[Vec<u8>]) -> Value {
        let Some(name) = arguments.first() else {
            return Value::Error(NO_ARGUMENTS_TEXT.into());
        };
        let name = name.to_ascii_lowercase();
        if NOT_ALLOWED.contains(&name.as_slice()) {
            return Value::Error(NOT_ALLOWED_TEXT.into());
        }
        if WHOLE_KEYSPACE.contains(&name.as_slice()) {
            return Value::Error(WHOLE_KEYSPACE_TEXT.into());
        }
        if name == b"time" && arguments.len() == 1 {
            return self.time();
        }
        match resp::plan(arguments) {
            Plan::Reply(Value::Error(text)) => Value::Error(script_error_text(text)),
            Plan::Reply(value) => value,
            Plan::Execute(pending) => self.execute(pending),
            _ => Value::Error(NOT_ALLOWED_TEXT.into()),
        }
    }

    fn execute(&mut self, mut pending: resp::Pending) -> Value {
        pending.stamp(self.now_ms);
        if pending.command.counts() {
            return Value::Error(WHOLE_KEYSPACE_TEXT.into());
        }
        if self.read_only && !pending.command.is_read() {
            return Value::Error(READ_ONLY_TEXT.into());
        }
        let missing: Vec<Vec<u8>> = pending
            .command
            .keys()
            .into_iter()
            .filter(|key| !self.scratch.holds(key))
            .map(<[u8]>::to_vec)
            .collect();
        for key in missing {
            self.scratch.hold_absent(&key);
            self.undeclared.push(key);
        }
        match self.scratch.execute(&pending.command) {
            Ok(outcome) => {
                if !pending.command.is_read() && !matches!(outcome, kv::Outcome::Error(_)) {
                    self.killer.mark_written();
                }
                resp::finish(&pending, &outcome)
            }
            Err(error) => Value::Error(error.reply_text()),
        }
    }

    /// TIME: the script's stamp (seconds and microseconds), the same for every call of one
    /// script run, as Redis freezes the time a script sees.
    fn time(&self) -> Value {
        let seconds = self.now_ms / 1000;
        let micros = (self.now_ms % 1000) * 1000;
        Value::Array(vec![
            Value::Bulk(seconds.to_string().into_bytes()),
            Value::Bulk(micros.to_string().into_bytes()),
        ])
    }
}

/// A planner's error as a script sees it: Redis replaces the arity and unknown-command texts.
fn script_error_text(text: String) -> String {
    if text.starts_with("ERR wrong number of arguments for") {
        WRONG_ARITY_TEXT.to_string()
    } else if text.starts_with("ERR unknown command") {
        UNKNOWN_TEXT.to_string()
    } else {
        text
    }
}
