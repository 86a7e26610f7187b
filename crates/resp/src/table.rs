//! The command table: names, arities, flags and key positions as Redis 7 reports them through
//! `COMMAND`, and the handler that plans each command.

use crate::commands as c;
use crate::text::is;
use crate::{Plan, Value};

/// Plans one command whose name and arity have already been checked.
pub(crate) type Handler = fn(&[Vec<u8>]) -> Plan;

/// One command or subcommand.
pub(crate) struct Spec {
    /// Lower case; subcommands are `container|sub`, as Redis 7 names them in errors.
    pub(crate) name: &'static str,
    /// Redis arity: `n` means exactly `n` arguments (name included), `-n` at least `n`.
    pub(crate) arity: i64,
    pub(crate) flags: &'static [&'static str],
    /// First key, last key (negative counts from the end), step between keys.
    pub(crate) keys: (i64, i64, i64),
    pub(crate) categories: &'static [&'static str],
    pub(crate) subcommands: &'static [Spec],
    pub(crate) handler: Handler,
}

impl Spec {
    /// Whether `count` arguments (the name included) fit the arity.
    pub(crate) fn arity_allows(&self, count: usize) -> bool {
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        if self.arity >= 0 {
            count == self.arity
        } else {
            count >= -self.arity
        }
    }

    /// The name a user types: the part after `|` for a subcommand.
    fn short_name(&self) -> &'static str {
        self.name
            .rsplit_once('|')
            .map_or(self.name, |(_, short)| short)
    }

    pub(crate) fn subcommand(&self, name: &[u8]) -> Option<&'static Spec> {
        self.subcommands
            .iter()
            .find(|spec| is(name, spec.short_name()))
    }

    /// The `COMMAND INFO` entry: the ten fields of Redis 7.
    pub(crate) fn info(&self) -> Value {
        let simple = |names: &[&str]| {
            Value::Array(
                names
                    .iter()
                    .map(|name| Value::Simple(name.to_string()))
                    .collect(),
            )
        };
        Value::Array(vec![
            Value::Bulk(self.name.as_bytes().to_vec()),
            Value::Integer(self.arity),
            simple(self.flags),
            Value::Integer(self.keys.0),
            Value::Integer(self.keys.1),
            Value::Integer(self.keys.2),
            simple(self.categories),
            Value::Array(Vec::new()),
            Value::Array(Vec::new()),
            Value::Array(self.subcommands.iter().map(Spec::info).collect()),
        ])
    }
}

const NO_KEYS: (i64, i64, i64) = (0, 0, 0);
const ONE_KEY: (i64, i64, i64) = (1, 1, 1);
const ALL_KEYS: (i64, i64, i64) = (1, -1, 1);
const PAIRS: (i64, i64, i64) = (1, -1, 2);

const READ_FAST: &[&str] = &["readonly", "fast"];
const WRITE_FAST: &[&str] = &["write", "denyoom", "fast"];
const CONNECTION: &[&str] = &["@fast", "@connection"];
const STRING_READ: &[&str] = &["@read", "@string", "@fast"];
const STRING_WRITE: &[&str] = &["@write", "@string", "@fast"];
const HANDSHAKE: &[&str] = &[
    "noscript",
    "loading",
    "stale",
    "fast",
    "no_auth",
    "allow_busy",
];

const fn spec(
    name: &'static str,
    arity: i64,
    flags: &'static [&'static str],
    keys: (i64, i64, i64),
    categories: &'static [&'static str],
    handler: Handler,
) -> Spec {
    Spec {
        name,
        arity,
        flags,
        keys,
        categories,
        subcommands: &[],
        handler,
    }
}

const fn container(
    name: &'static str,
    arity: i64,
    flags: &'static [&'static str],
    categories: &'static [&'static str],
    subcommands: &'static [Spec],
    handler: Handler,
) -> Spec {
    Spec {
        name,
        arity,
        flags,
        keys: NO_KEYS,
        categories,
        subcommands,
        handler,
    }
}

/// Every command Tessera answers. `COMMAND COUNT` is its length.
pub(crate) static COMMANDS: &[Spec] = &[
    spec("get", 2, READ_FAST, ONE_KEY, STRING_READ, c::get),
    spec(
        "set",
        -3,
        &["write", "denyoom"],
        ONE_KEY,
        &["@write", "@string", "@slow"],
        c::set,
    ),
    spec("getset", 3, WRITE_FAST, ONE_KEY, STRING_WRITE, c::getset),
    spec("append", 3, WRITE_FAST, ONE_KEY, STRING_WRITE, c::append),
    spec("strlen", 2, READ_FAST, ONE_KEY, STRING_READ, c::strlen),
    spec("incr", 2, WRITE_FAST, ONE_KEY, STRING_WRITE, c::incr),
    spec("decr", 2, WRITE_FAST, ONE_KEY, STRING_WRITE, c::decr),
    spec("incrby", 3, WRITE_FAST, ONE_KEY, STRING_WRITE, c::incrby),
    spec("decrby", 3, WRITE_FAST, ONE_KEY, STRING_WRITE, c::decrby),
    spec("mget", -2, READ_FAST, ALL_KEYS, STRING_READ, c::mget),
    spec(
        "mset",
        -3,
        &["write", "denyoom"],
        PAIRS,
        &["@write", "@string", "@slow"],
        c::mset,
    ),
    spec(
        "del",
        -2,
        &["write"],
        ALL_KEYS,
        &["@keyspace", "@write", "@slow"],
        c::del,
    ),
    spec(
        "unlink",
        -2,
        &["write", "fast"],
        ALL_KEYS,
        &["@keyspace", "@write", "@fast"],
        c::del,
    ),
    spec(
        "exists",
        -2,
        READ_FAST,
        ALL_KEYS,
        &["@keyspace", "@read", "@fast"],
        c::exists,
    ),
    spec(
        "dbsize",
        1,
        READ_FAST,
        NO_KEYS,
        &["@keyspace", "@read", "@fast"],
        c::dbsize,
    ),
    spec("ping", -1, &["fast"], NO_KEYS, CONNECTION, c::ping),
    spec("echo", 2, &["fast"], NO_KEYS, CONNECTION, c::echo),
    spec("hello", -1, HANDSHAKE, NO_KEYS, CONNECTION, c::hello),
    spec("auth", -2, HANDSHAKE, NO_KEYS, CONNECTION, c::auth),
    spec("quit", -1, HANDSHAKE, NO_KEYS, CONNECTION, c::quit),
    spec(
        "select",
        2,
        &["loading", "stale", "fast"],
        NO_KEYS,
        CONNECTION,
        c::select,
    ),
    spec(
        "info",
        -1,
        &["loading", "stale"],
        NO_KEYS,
        &["@slow", "@dangerous"],
        c::info,
    ),
    container(
        "command",
        -1,
        &["loading", "stale"],
        &["@slow", "@connection"],
        COMMAND_SUBCOMMANDS,
        c::command_all,
    ),
    container(
        "client",
        -2,
        &[],
        &["@slow"],
        CLIENT_SUBCOMMANDS,
        c::container_without_subcommand,
    ),
    container(
        "debug",
        -2,
        &["admin", "noscript", "loading", "stale"],
        &["@admin", "@slow", "@dangerous"],
        DEBUG_SUBCOMMANDS,
        c::container_without_subcommand,
    ),
    container(
        "config",
        -2,
        &[],
        &["@slow"],
        CONFIG_SUBCOMMANDS,
        c::container_without_subcommand,
    ),
];

const SERVER_INFO: &[&str] = &["loading", "stale"];
const CLIENT_FLAGS: &[&str] = &["noscript", "loading", "stale"];
const SLOW_CONNECTION: &[&str] = &["@slow", "@connection"];

static COMMAND_SUBCOMMANDS: &[Spec] = &[
    spec(
        "command|count",
        2,
        SERVER_INFO,
        NO_KEYS,
        SLOW_CONNECTION,
        c::command_count,
    ),
    spec(
        "command|docs",
        -2,
        SERVER_INFO,
        NO_KEYS,
        SLOW_CONNECTION,
        c::command_docs,
    ),
    spec(
        "command|info",
        -2,
        SERVER_INFO,
        NO_KEYS,
        SLOW_CONNECTION,
        c::command_info,
    ),
    spec(
        "command|help",
        2,
        SERVER_INFO,
        NO_KEYS,
        SLOW_CONNECTION,
        c::command_help,
    ),
];

/// Tessera's own DEBUG subcommands (Redis's are not offered).
static DEBUG_SUBCOMMANDS: &[Spec] = &[spec(
    "debug|peer-delay",
    3,
    &["admin", "noscript", "loading", "stale"],
    NO_KEYS,
    &["@admin", "@slow", "@dangerous"],
    c::debug_peer_delay,
)];

static CLIENT_SUBCOMMANDS: &[Spec] = &[
    spec(
        "client|id",
        2,
        CLIENT_FLAGS,
        NO_KEYS,
        SLOW_CONNECTION,
        c::client_id,
    ),
    spec(
        "client|getname",
        2,
        CLIENT_FLAGS,
        NO_KEYS,
        SLOW_CONNECTION,
        c::client_getname,
    ),
    spec(
        "client|setname",
        3,
        CLIENT_FLAGS,
        NO_KEYS,
        SLOW_CONNECTION,
        c::client_setname,
    ),
    spec(
        "client|setinfo",
        4,
        CLIENT_FLAGS,
        NO_KEYS,
        SLOW_CONNECTION,
        c::client_setinfo,
    ),
    spec(
        "client|help",
        2,
        SERVER_INFO,
        NO_KEYS,
        SLOW_CONNECTION,
        c::client_help,
    ),
];

static CONFIG_SUBCOMMANDS: &[Spec] = &[
    spec(
        "config|get",
        -3,
        &["admin", "noscript", "loading", "stale"],
        NO_KEYS,
        &["@admin", "@slow", "@dangerous"],
        c::config_get,
    ),
    spec(
        "config|help",
        2,
        SERVER_INFO,
        NO_KEYS,
        &["@slow"],
        c::config_help,
    ),
];

/// The top-level command called `name` (any case).
pub(crate) fn lookup(name: &[u8]) -> Option<&'static Spec> {
    COMMANDS.iter().find(|spec| is(name, spec.name))
}

/// A command or subcommand by its full name (`get`, `config|get`; any case), as
/// `COMMAND INFO` accepts it.
pub(crate) fn lookup_full_name(name: &[u8]) -> Option<&'static Spec> {
    COMMANDS.iter().find_map(|spec| {
        if is(name, spec.name) {
            return Some(spec);
        }
        spec.subcommands.iter().find(|sub| is(name, sub.name))
    })
}
