//! A gateway's command statistics and slow log, as Redis 7.0 keeps them per server: INFO's
//! `stats`, `commandstats` and `errorstats` sections, CONFIG RESETSTAT and SLOWLOG
//! GET/LEN/RESET/HELP (`docs/internals/redis.md`, "Introspection").
//!
//! Pure: the runtime measures each command's duration and the wall-clock time and hands them
//! in with the command and its reply ([`Call`]); nothing here reads a clock.

use crate::info::InfoSection;
use crate::Value;
use std::collections::{BTreeMap, VecDeque};

/// Redis 7.0's defaults for `slowlog-log-slower-than` (microseconds) and `slowlog-max-len`.
pub const SLOWLOG_SLOWER_THAN_DEFAULT_US: i64 = 10_000;
pub const SLOWLOG_MAX_LEN_DEFAULT: i64 = 128;

/// Redis keeps at most this many distinct error codes in `errorstats`; later codes count in
/// `total_error_replies` only.
const ERROR_CODES_MAX: usize = 128;

/// Redis cuts a slow log entry's arguments at 32 (the last one says how many more) and each
/// argument at 128 bytes.
const SLOWLOG_ARGUMENTS_MAX: usize = 32;
const SLOWLOG_ARGUMENT_BYTES_MAX: usize = 128;

/// One command's counters (`cmdstat_<name>`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct CommandCounters {
    calls: u64,
    microseconds: u64,
    rejected: u64,
    failed: u64,
}

/// One slow log entry.
#[derive(Clone, Debug, PartialEq, Eq)]
struct SlowEntry {
    id: u64,
    unix_time_s: u64,
    duration_us: u64,
    arguments: Vec<Vec<u8>>,
    client_address: String,
    client_name: Vec<u8>,
}

/// One command as it ran: what the runtime tells [`Stats::record`].
pub struct Call<'a> {
    /// The command as the client sent it (name first).
    pub arguments: &'a [Vec<u8>],
    /// The reply it got.
    pub reply: &'a Value,
    /// How long it took, in microseconds.
    pub duration_us: u64,
    /// The wall-clock time it ended, in unix seconds (a slow log entry's timestamp).
    pub unix_time_s: u64,
    /// The client's `ip:port` and name (empty if none), for the slow log.
    pub client_address: String,
    pub client_name: Vec<u8>,
}

/// What a reply says about a command, for the counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    /// Ran and succeeded.
    Succeeded,
    /// Ran and answered an error (`failed_calls`).
    Failed,
    /// Refused before it ran, e.g. wrong arity (`rejected_calls`).
    Rejected,
    /// Not a known command: no `cmdstat_` line, only the error counted.
    Unknown,
}

/// A gateway's statistics and slow log. `slower_than_us` and `max_len` are the
/// `slowlog-log-slower-than` and `slowlog-max-len` parameters (CONFIG GET/SET).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stats {
    commands: BTreeMap<String, CommandCounters>,
    errors: BTreeMap<String, u64>,
    commands_processed: u64,
    error_replies: u64,
    slowlog: VecDeque<SlowEntry>,
    next_slow_id: u64,
    /// Log commands that took at least this many microseconds; negative: none; 0: every one.
    pub slower_than_us: i64,
    /// Keep at most this many slow log entries (the oldest go first).
    pub max_len: i64,
}

impl Default for Stats {
    fn default() -> Stats {
        Stats {
            commands: BTreeMap::new(),
            errors: BTreeMap::new(),
            commands_processed: 0,
            error_replies: 0,
            slowlog: VecDeque::new(),
            next_slow_id: 0,
            slower_than_us: SLOWLOG_SLOWER_THAN_DEFAULT_US,
            max_len: SLOWLOG_MAX_LEN_DEFAULT,
        }
    }
}

/// `name` or `name|subcommand` for the container commands, lower case, as Redis 7.0 names a
/// command in `cmdstat_` lines.
pub fn command_name(arguments: &[Vec<u8>]) -> String {
    let name = String::from_utf8_lossy(&arguments[0]).to_ascii_lowercase();
    let container = matches!(
        name.as_str(),
        "client"
            | "config"
            | "script"
            | "function"
            | "pubsub"
            | "command"
            | "slowlog"
            | "object"
            | "memory"
            | "acl"
    );
    match arguments.get(1) {
        Some(subcommand) if container => format!(
            "{name}|{}",
            String::from_utf8_lossy(subcommand).to_ascii_lowercase()
        ),
        _ => name,
    }
}

fn verdict(reply: &Value) -> Verdict {
    let Value::Error(text) = reply else {
        return Verdict::Succeeded;
    };
    if text.starts_with("ERR unknown command") || text.starts_with("ERR unknown subcommand") {
        Verdict::Unknown
    } else if text.starts_with("ERR wrong number of arguments")
        || text.starts_with("NOAUTH")
        || text.starts_with("NOPERM")
    {
        Verdict::Rejected
    } else {
        Verdict::Failed
    }
}

/// An error reply's code: its first word (`ERR`, `WRONGTYPE`…), as `errorstat_` names it.
fn error_code(text: &str) -> &str {
    text.split(' ').next().unwrap_or(text)
}

impl Stats {
    /// Counts one command and logs it if slow. A command queued inside MULTI (`+QUEUED`) is
    /// counted when EXEC runs, as EXEC (Redis counts each queued command then too; Tessera
    /// sees only EXEC's reply).
    pub fn record(&mut self, call: Call) {
        if call.arguments.is_empty() || *call.reply == Value::Simple("QUEUED".into()) {
            return;
        }
        let verdict = verdict(call.reply);
        self.commands_processed += 1;
        if let Value::Error(text) = call.reply {
            self.error_replies += 1;
            let code = error_code(text);
            if self.errors.contains_key(code) || self.errors.len() < ERROR_CODES_MAX {
                *self.errors.entry(code.to_string()).or_default() += 1;
            }
        }
        if verdict == Verdict::Unknown {
            return;
        }
        let counters = self
            .commands
            .entry(command_name(call.arguments))
            .or_default();
        match verdict {
            Verdict::Rejected => counters.rejected += 1,
            Verdict::Failed | Verdict::Succeeded => {
                counters.calls += 1;
                counters.microseconds += call.duration_us;
                if verdict == Verdict::Failed {
                    counters.failed += 1;
                }
            }
            Verdict::Unknown => unreachable!("unknown commands returned above"),
        }
        if verdict != Verdict::Rejected {
            self.log_if_slow(&call);
        }
    }

    fn log_if_slow(&mut self, call: &Call) {
        let slow = self.slower_than_us >= 0 && call.duration_us >= self.slower_than_us as u64;
        if !slow {
            return;
        }
        let mut arguments: Vec<Vec<u8>> = Vec::new();
        for (index, argument) in call.arguments.iter().enumerate() {
            if index == SLOWLOG_ARGUMENTS_MAX - 1 && call.arguments.len() > SLOWLOG_ARGUMENTS_MAX {
                let more = call.arguments.len() - index;
                arguments.push(format!("... ({more} more arguments)").into_bytes());
                break;
            }
            if argument.len() > SLOWLOG_ARGUMENT_BYTES_MAX {
                let mut cut = argument[..SLOWLOG_ARGUMENT_BYTES_MAX].to_vec();
                let more = argument.len() - SLOWLOG_ARGUMENT_BYTES_MAX;
                cut.extend_from_slice(format!("... ({more} more bytes)").as_bytes());
                arguments.push(cut);
            } else {
                arguments.push(argument.clone());
            }
        }
        self.slowlog.push_front(SlowEntry {
            id: self.next_slow_id,
            unix_time_s: call.unix_time_s,
            duration_us: call.duration_us,
            arguments,
            client_address: call.client_address.clone(),
            client_name: call.client_name.clone(),
        });
        self.next_slow_id += 1;
        self.trim();
    }

    fn trim(&mut self) {
        let max = usize::try_from(self.max_len.max(0)).unwrap_or(usize::MAX);
        self.slowlog.truncate(max);
    }

    /// Sets `slowlog-max-len` (dropping the oldest entries beyond it) or
    /// `slowlog-log-slower-than`; false for any other name.
    pub fn set_parameter(&mut self, name: &str, value: i64) -> bool {
        match name {
            "slowlog-log-slower-than" => self.slower_than_us = value,
            "slowlog-max-len" => {
                self.max_len = value;
                self.trim();
            }
            _ => return false,
        }
        true
    }

    /// The value of `slowlog-log-slower-than` or `slowlog-max-len`.
    pub fn parameter(&self, name: &str) -> Option<i64> {
        match name {
            "slowlog-log-slower-than" => Some(self.slower_than_us),
            "slowlog-max-len" => Some(self.max_len),
            _ => None,
        }
    }

    /// CONFIG RESETSTAT: the counters, `commandstats` and `errorstats` start again (the slow
    /// log stays, as in Redis).
    pub fn reset(&mut self) {
        self.commands.clear();
        self.errors.clear();
        self.commands_processed = 0;
        self.error_replies = 0;
    }

    /// INFO's `stats` section: the counters this gateway keeps, with
    /// `total_connections_received` from the runtime.
    pub fn stats_section(&self, connections_received: u64) -> InfoSection {
        InfoSection {
            name: "stats",
            lines: vec![
                (
                    "total_connections_received".into(),
                    connections_received.to_string(),
                ),
                (
                    "total_commands_processed".into(),
                    self.commands_processed.to_string(),
                ),
                ("total_error_replies".into(), self.error_replies.to_string()),
            ],
        }
    }

    /// INFO's `commandstats`: `cmdstat_<name>:calls=…,usec=…,usec_per_call=…,
    /// rejected_calls=…,failed_calls=…` for every command counted since the last reset.
    pub fn commandstats_section(&self) -> InfoSection {
        let lines = self
            .commands
            .iter()
            .map(|(name, counters)| {
                let per_call = if counters.calls == 0 {
                    0.0
                } else {
                    counters.microseconds as f64 / counters.calls as f64
                };
                (
                    format!("cmdstat_{name}"),
                    format!(
                        "calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}",
                        counters.calls, counters.microseconds, counters.rejected, counters.failed
                    ),
                )
            })
            .collect();
        InfoSection {
            name: "commandstats",
            lines,
        }
    }

    /// INFO's `errorstats`: `errorstat_<code>:count=…`.
    pub fn errorstats_section(&self) -> InfoSection {
        let lines = self
            .errors
            .iter()
            .map(|(code, count)| (format!("errorstat_{code}"), format!("count={count}")))
            .collect();
        InfoSection {
            name: "errorstats",
            lines,
        }
    }

    /// `SLOWLOG GET [count]`, `LEN`, `RESET`, `HELP` (the arguments after SLOWLOG).
    pub fn slowlog_command(&mut self, arguments: &[Vec<u8>]) -> Value {
        let Some(subcommand) = arguments.first() else {
            return Value::Error("ERR wrong number of arguments for 'slowlog' command".into());
        };
        let rest = &arguments[1..];
        match subcommand.to_ascii_lowercase().as_slice() {
            b"get" if rest.len() <= 1 => self.slowlog_get(rest.first()),
            b"len" if rest.is_empty() => Value::Integer(self.slowlog.len() as i64),
            b"reset" if rest.is_empty() => {
                self.slowlog.clear();
                Value::ok()
            }
            b"help" if rest.is_empty() => slowlog_help(),
            b"get" => Value::Error(format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try SLOWLOG HELP.",
                String::from_utf8_lossy(subcommand)
            )),
            b"len" | b"reset" | b"help" => Value::Error(format!(
                "ERR wrong number of arguments for 'slowlog|{}' command",
                String::from_utf8_lossy(subcommand).to_ascii_lowercase()
            )),
            _ => Value::Error(format!(
                "ERR unknown subcommand '{}'. Try SLOWLOG HELP.",
                String::from_utf8_lossy(subcommand)
            )),
        }
    }

    /// `SLOWLOG GET [count]`: the newest `count` entries (default 10, -1 every one), newest
    /// first: `[id, timestamp, microseconds, [arguments…], client address, client name]`.
    fn slowlog_get(&self, count: Option<&Vec<u8>>) -> Value {
        let count = match count {
            None => 10,
            Some(text) => match std::str::from_utf8(text)
                .ok()
                .and_then(|text| text.parse::<i64>().ok())
            {
                Some(-1) => usize::MAX,
                Some(count) if count >= 0 => usize::try_from(count).unwrap_or(usize::MAX),
                _ => return Value::Error("ERR count should be greater than or equal to -1".into()),
            },
        };
        Value::Array(
            self.slowlog
                .iter()
                .take(count)
                .map(|entry| {
                    Value::Array(vec![
                        Value::Integer(entry.id as i64),
                        Value::Integer(entry.unix_time_s as i64),
                        Value::Integer(entry.duration_us as i64),
                        Value::Array(
                            entry
                                .arguments
                                .iter()
                                .map(|argument| Value::Bulk(argument.clone()))
                                .collect(),
                        ),
                        Value::Bulk(entry.client_address.clone().into_bytes()),
                        Value::Bulk(entry.client_name.clone()),
                    ])
                })
                .collect(),
        )
    }
}

fn slowlog_help() -> Value {
    let lines = [
        "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET [<count>]",
        "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
        "    Entries are made of:",
        "    id, timestamp, time in microseconds, arguments array, client IP and port,",
        "    client name",
        "LEN",
        "    Return the length of the slowlog.",
        "RESET",
        "    Reset the slowlog.",
        "HELP",
        "    Prints this help.",
    ];
    Value::Array(
        lines
            .iter()
            .map(|line| Value::Simple(line.to_string()))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|word| word.as_bytes().to_vec()).collect()
    }

    fn call<'a>(arguments: &'a [Vec<u8>], reply: &'a Value, duration_us: u64) -> Call<'a> {
        Call {
            arguments,
            reply,
            duration_us,
            unix_time_s: 1_700_000_000,
            client_address: "127.0.0.1:5000".into(),
            client_name: b"me".to_vec(),
        }
    }

    fn line(section: &InfoSection, name: &str) -> Option<String> {
        section
            .lines
            .iter()
            .find(|(field, _)| field == name)
            .map(|(_, value)| value.clone())
    }

    #[test]
    fn commands_errors_and_rejections_are_counted_as_redis_counts_them() {
        let mut stats = Stats::default();
        let set = args(&["SET", "k", "v"]);
        stats.record(call(&set, &Value::ok(), 4));
        stats.record(call(&set, &Value::ok(), 6));
        let lpush = args(&["lpush", "k", "x"]);
        let wrongtype = Value::Error("WRONGTYPE Operation against a key".into());
        stats.record(call(&lpush, &wrongtype, 1));
        let get = args(&["get"]);
        let arity = Value::Error("ERR wrong number of arguments for 'get' command".into());
        stats.record(call(&get, &arity, 1));
        let nosuch = args(&["nosuch"]);
        let unknown = Value::Error("ERR unknown command 'nosuch'".into());
        stats.record(call(&nosuch, &unknown, 1));
        let config = args(&["config", "GET", "x"]);
        stats.record(call(&config, &Value::Map(Vec::new()), 1));
        let commands = stats.commandstats_section();
        assert_eq!(
            line(&commands, "cmdstat_set").as_deref(),
            Some("calls=2,usec=10,usec_per_call=5.00,rejected_calls=0,failed_calls=0")
        );
        assert_eq!(
            line(&commands, "cmdstat_lpush").as_deref(),
            Some("calls=1,usec=1,usec_per_call=1.00,rejected_calls=0,failed_calls=1")
        );
        assert_eq!(
            line(&commands, "cmdstat_get").as_deref(),
            Some("calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0")
        );
        assert!(line(&commands, "cmdstat_config|get").is_some());
        assert!(line(&commands, "cmdstat_nosuch").is_none());
        let errors = stats.errorstats_section();
        assert_eq!(line(&errors, "errorstat_ERR").as_deref(), Some("count=2"));
        assert_eq!(
            line(&errors, "errorstat_WRONGTYPE").as_deref(),
            Some("count=1")
        );
        let totals = stats.stats_section(3);
        assert_eq!(line(&totals, "total_error_replies").as_deref(), Some("3"));
        assert_eq!(
            line(&totals, "total_commands_processed").as_deref(),
            Some("6")
        );
        stats.reset();
        assert!(stats.commandstats_section().lines.is_empty());
        assert!(stats.errorstats_section().lines.is_empty());
        assert_eq!(
            line(&stats.stats_section(3), "total_error_replies").as_deref(),
            Some("0")
        );
    }

    #[test]
    fn the_slow_log_keeps_the_newest_entries_over_the_threshold() {
        let mut stats = Stats::default();
        assert!(stats.set_parameter("slowlog-log-slower-than", 100));
        let fast = args(&["get", "a"]);
        stats.record(call(&fast, &Value::Null, 99));
        assert_eq!(stats.slowlog_command(&args(&["len"])), Value::Integer(0));
        for key in ["a", "b", "c"] {
            let slow = args(&["get", key]);
            stats.record(call(&slow, &Value::Null, 100));
        }
        assert_eq!(stats.slowlog_command(&args(&["LEN"])), Value::Integer(3));
        let Value::Array(entries) = stats.slowlog_command(&args(&["get", "1"])) else {
            panic!("SLOWLOG GET is an array");
        };
        assert_eq!(
            entries,
            vec![Value::Array(vec![
                Value::Integer(2),
                Value::Integer(1_700_000_000),
                Value::Integer(100),
                Value::Array(vec![
                    Value::Bulk(b"get".to_vec()),
                    Value::Bulk(b"c".to_vec())
                ]),
                Value::Bulk(b"127.0.0.1:5000".to_vec()),
                Value::Bulk(b"me".to_vec()),
            ])]
        );
        assert!(stats.set_parameter("slowlog-max-len", 2));
        assert_eq!(stats.slowlog_command(&args(&["len"])), Value::Integer(2));
        // Long commands are cut as Redis cuts them.
        let mut long = args(&["rpush", "k"]);
        long.extend((0..40).map(|_| vec![b'x'; 200]));
        stats.record(call(&long, &Value::Integer(40), 500));
        let Value::Array(entries) = stats.slowlog_command(&args(&["get"])) else {
            panic!("SLOWLOG GET is an array");
        };
        let Value::Array(entry) = &entries[0] else {
            panic!("an entry is an array");
        };
        let Value::Array(arguments) = &entry[3] else {
            panic!("arguments are an array");
        };
        assert_eq!(arguments.len(), 32);
        assert_eq!(
            arguments[31],
            Value::Bulk(b"... (11 more arguments)".to_vec())
        );
        let Value::Bulk(cut) = &arguments[2] else {
            panic!("an argument is a bulk string");
        };
        assert!(cut.ends_with(b"... (72 more bytes)") && cut.len() == 128 + 19);
        assert_eq!(stats.slowlog_command(&args(&["reset"])), Value::ok());
        assert_eq!(stats.slowlog_command(&args(&["len"])), Value::Integer(0));
        assert!(stats.set_parameter("slowlog-log-slower-than", -1));
        stats.record(call(&fast, &Value::Null, 1_000_000));
        assert_eq!(stats.slowlog_command(&args(&["len"])), Value::Integer(0));
        assert!(stats.slowlog_command(&args(&["get", "-2"])).is_error());
        assert!(stats.slowlog_command(&args(&["nosuch"])).is_error());
    }
}
