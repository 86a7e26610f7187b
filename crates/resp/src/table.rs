//! The command table: names, arities, flags and key positions as Redis 7 reports them through
//! `COMMAND`, and the handler that plans each command.

use crate::commands as c;
use crate::multikey as m;
use crate::streams as x;
use crate::text::is;
use crate::types as t;
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
const BLOCKING: &[&str] = &["write", "blocking"];
const LIST_BLOCKING: &[&str] = &["@write", "@list", "@slow", "@blocking"];
const KEYSPACE_WRITE_SLOW: &[&str] = &["@keyspace", "@write", "@slow"];
const SET_READ_SLOW: &[&str] = &["@read", "@set", "@slow"];
const SET_WRITE_SLOW: &[&str] = &["@write", "@set", "@slow"];
const SORT_WRITE: &[&str] = &[
    "@write",
    "@set",
    "@sortedset",
    "@list",
    "@slow",
    "@dangerous",
];
const SORT_READ: &[&str] = &[
    "@read",
    "@set",
    "@sortedset",
    "@list",
    "@slow",
    "@dangerous",
];
const SORTED_READ_SLOW: &[&str] = &["@read", "@sortedset", "@slow"];
const SORTED_WRITE_SLOW: &[&str] = &["@write", "@sortedset", "@slow"];
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
    spec("blpop", -3, BLOCKING, (1, -2, 1), LIST_BLOCKING, m::blpop),
    spec("brpop", -3, BLOCKING, (1, -2, 1), LIST_BLOCKING, m::brpop),
    spec(
        "brpoplpush",
        4,
        BLOCKING,
        (1, 2, 1),
        LIST_BLOCKING,
        m::brpoplpush,
    ),
    spec("blmove", 6, BLOCKING, (1, 2, 1), LIST_BLOCKING, m::blmove),
    spec(
        "lmpop",
        -4,
        &["write", "movablekeys"],
        NO_KEYS,
        &["@write", "@list", "@slow"],
        m::lmpop,
    ),
    spec(
        "blmpop",
        -5,
        &["write", "blocking", "movablekeys"],
        NO_KEYS,
        LIST_BLOCKING,
        m::blmpop,
    ),
    spec(
        "bzpopmin",
        -3,
        BLOCKING,
        (1, -2, 1),
        &["@write", "@sortedset", "@fast", "@blocking"],
        m::bzpopmin,
    ),
    spec(
        "bzpopmax",
        -3,
        BLOCKING,
        (1, -2, 1),
        &["@write", "@sortedset", "@fast", "@blocking"],
        m::bzpopmax,
    ),
    spec(
        "hscan",
        -3,
        &["readonly"],
        ONE_KEY,
        &["@read", "@hash", "@slow"],
        t::hscan,
    ),
    spec("sscan", -3, &["readonly"], ONE_KEY, SET_READ_SLOW, t::sscan),
    spec(
        "zscan",
        -3,
        &["readonly"],
        ONE_KEY,
        SORTED_READ_SLOW,
        t::zscan,
    ),
    spec(
        "rename",
        3,
        &["write"],
        (1, 2, 1),
        KEYSPACE_WRITE_SLOW,
        m::rename,
    ),
    spec(
        "renamenx",
        3,
        &["write", "fast"],
        (1, 2, 1),
        &["@keyspace", "@write", "@fast"],
        m::renamenx,
    ),
    spec(
        "copy",
        -3,
        &["write", "denyoom"],
        (1, 2, 1),
        KEYSPACE_WRITE_SLOW,
        m::copy,
    ),
    spec(
        "smove",
        4,
        &["write", "fast"],
        (1, 2, 1),
        &["@write", "@set", "@fast"],
        m::smove,
    ),
    spec(
        "lmove",
        5,
        &["write", "denyoom"],
        (1, 2, 1),
        &["@write", "@list", "@slow"],
        m::lmove,
    ),
    spec(
        "rpoplpush",
        3,
        &["write", "denyoom"],
        (1, 2, 1),
        &["@write", "@list", "@slow"],
        m::rpoplpush,
    ),
    spec(
        "sinter",
        -2,
        &["readonly"],
        ALL_KEYS,
        SET_READ_SLOW,
        m::sinter,
    ),
    spec(
        "sunion",
        -2,
        &["readonly"],
        ALL_KEYS,
        SET_READ_SLOW,
        m::sunion,
    ),
    spec(
        "sdiff",
        -2,
        &["readonly"],
        ALL_KEYS,
        SET_READ_SLOW,
        m::sdiff,
    ),
    spec(
        "sinterstore",
        -3,
        &["write", "denyoom"],
        ALL_KEYS,
        SET_WRITE_SLOW,
        m::sinterstore,
    ),
    spec(
        "sunionstore",
        -3,
        &["write", "denyoom"],
        ALL_KEYS,
        SET_WRITE_SLOW,
        m::sunionstore,
    ),
    spec(
        "sdiffstore",
        -3,
        &["write", "denyoom"],
        ALL_KEYS,
        SET_WRITE_SLOW,
        m::sdiffstore,
    ),
    spec(
        "dump",
        2,
        &["readonly"],
        ONE_KEY,
        &["@keyspace", "@read", "@slow"],
        t::dump,
    ),
    spec(
        "restore",
        -4,
        &["write", "denyoom"],
        ONE_KEY,
        &["@keyspace", "@write", "@slow", "@dangerous"],
        t::restore,
    ),
    spec(
        "lcs",
        -3,
        &["readonly"],
        (1, 2, 1),
        &["@read", "@string", "@slow"],
        m::lcs,
    ),
    spec(
        "sort",
        -2,
        &["write", "denyoom", "movablekeys"],
        ONE_KEY,
        SORT_WRITE,
        m::sort,
    ),
    spec(
        "sort_ro",
        -2,
        &["readonly", "movablekeys"],
        ONE_KEY,
        SORT_READ,
        m::sort_ro,
    ),
    spec(
        "sintercard",
        -3,
        &["readonly", "movablekeys"],
        NO_KEYS,
        SET_READ_SLOW,
        m::sintercard,
    ),
    spec(
        "msetnx",
        -3,
        &["write", "denyoom"],
        PAIRS,
        &["@write", "@string", "@slow"],
        m::msetnx,
    ),
    spec(
        "zunion",
        -3,
        &["readonly", "movablekeys"],
        NO_KEYS,
        SORTED_READ_SLOW,
        m::zunion,
    ),
    spec(
        "zinter",
        -3,
        &["readonly", "movablekeys"],
        NO_KEYS,
        SORTED_READ_SLOW,
        m::zinter,
    ),
    spec(
        "zdiff",
        -3,
        &["readonly", "movablekeys"],
        NO_KEYS,
        SORTED_READ_SLOW,
        m::zdiff,
    ),
    spec(
        "zunionstore",
        -4,
        &["write", "denyoom", "movablekeys"],
        ONE_KEY,
        SORTED_WRITE_SLOW,
        m::zunionstore,
    ),
    spec(
        "zinterstore",
        -4,
        &["write", "denyoom", "movablekeys"],
        ONE_KEY,
        SORTED_WRITE_SLOW,
        m::zinterstore,
    ),
    spec(
        "zdiffstore",
        -4,
        &["write", "denyoom", "movablekeys"],
        ONE_KEY,
        SORTED_WRITE_SLOW,
        m::zdiffstore,
    ),
    spec(
        "zrangestore",
        -5,
        &["write", "denyoom"],
        (1, 2, 1),
        SORTED_WRITE_SLOW,
        m::zrangestore,
    ),
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
    spec(
        "getrange",
        4,
        &["readonly"],
        ONE_KEY,
        &["@read", "@string", "@slow"],
        c::getrange,
    ),
    spec(
        "substr",
        4,
        &["readonly"],
        ONE_KEY,
        &["@read", "@string", "@slow"],
        c::getrange,
    ),
    spec(
        "setrange",
        4,
        &["write", "denyoom"],
        ONE_KEY,
        &["@write", "@string", "@slow"],
        c::setrange,
    ),
    spec(
        "getbit",
        3,
        &["readonly", "fast"],
        ONE_KEY,
        &["@read", "@bitmap", "@fast"],
        c::getbit,
    ),
    spec(
        "setbit",
        4,
        &["write", "denyoom"],
        ONE_KEY,
        &["@write", "@bitmap", "@slow"],
        c::setbit,
    ),
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
    spec(
        "hset",
        -4,
        WRITE_FAST,
        ONE_KEY,
        &["@write", "@hash", "@fast"],
        t::hset,
    ),
    spec(
        "hmset",
        -4,
        WRITE_FAST,
        ONE_KEY,
        &["@write", "@hash", "@fast"],
        t::hmset,
    ),
    spec(
        "hsetnx",
        4,
        WRITE_FAST,
        ONE_KEY,
        &["@write", "@hash", "@fast"],
        t::hsetnx,
    ),
    spec(
        "hget",
        3,
        READ_FAST,
        ONE_KEY,
        &["@read", "@hash", "@fast"],
        t::hget,
    ),
    spec(
        "hmget",
        -3,
        READ_FAST,
        ONE_KEY,
        &["@read", "@hash", "@fast"],
        t::hmget,
    ),
    spec(
        "hdel",
        -3,
        &["write", "fast"],
        ONE_KEY,
        &["@write", "@hash", "@fast"],
        t::hdel,
    ),
    spec(
        "hgetall",
        2,
        &["readonly"],
        ONE_KEY,
        &["@read", "@hash", "@slow"],
        t::hgetall,
    ),
    spec(
        "hkeys",
        2,
        &["readonly"],
        ONE_KEY,
        &["@read", "@hash", "@slow"],
        t::hkeys,
    ),
    spec(
        "hvals",
        2,
        &["readonly"],
        ONE_KEY,
        &["@read", "@hash", "@slow"],
        t::hvals,
    ),
    spec(
        "hlen",
        2,
        READ_FAST,
        ONE_KEY,
        &["@read", "@hash", "@fast"],
        t::hlen,
    ),
    spec(
        "hexists",
        3,
        READ_FAST,
        ONE_KEY,
        &["@read", "@hash", "@fast"],
        t::hexists,
    ),
    spec(
        "hstrlen",
        3,
        READ_FAST,
        ONE_KEY,
        &["@read", "@hash", "@fast"],
        t::hstrlen,
    ),
    spec(
        "hincrby",
        4,
        WRITE_FAST,
        ONE_KEY,
        &["@write", "@hash", "@fast"],
        t::hincrby,
    ),
    spec(
        "hincrbyfloat",
        4,
        WRITE_FAST,
        ONE_KEY,
        &["@write", "@hash", "@fast"],
        t::hincrbyfloat,
    ),
    spec(
        "hrandfield",
        -2,
        &["readonly"],
        ONE_KEY,
        &["@read", "@hash", "@slow"],
        t::hrandfield,
    ),
    spec(
        "sadd",
        -3,
        WRITE_FAST,
        ONE_KEY,
        &["@write", "@set", "@fast"],
        t::sadd,
    ),
    spec(
        "srem",
        -3,
        &["write", "fast"],
        ONE_KEY,
        &["@write", "@set", "@fast"],
        t::srem,
    ),
    spec(
        "smembers",
        2,
        &["readonly"],
        ONE_KEY,
        &["@read", "@set", "@slow"],
        t::smembers,
    ),
    spec(
        "sismember",
        3,
        READ_FAST,
        ONE_KEY,
        &["@read", "@set", "@fast"],
        t::sismember,
    ),
    spec(
        "smismember",
        -3,
        READ_FAST,
        ONE_KEY,
        &["@read", "@set", "@fast"],
        t::smismember,
    ),
    spec(
        "scard",
        2,
        READ_FAST,
        ONE_KEY,
        &["@read", "@set", "@fast"],
        t::scard,
    ),
    spec(
        "spop",
        -2,
        &["write", "fast"],
        ONE_KEY,
        &["@write", "@set", "@fast"],
        t::spop,
    ),
    spec(
        "srandmember",
        -2,
        &["readonly"],
        ONE_KEY,
        &["@read", "@set", "@slow"],
        t::srandmember,
    ),
    spec(
        "lpush",
        -3,
        WRITE_FAST,
        ONE_KEY,
        &["@write", "@list", "@fast"],
        t::lpush,
    ),
    spec(
        "rpush",
        -3,
        WRITE_FAST,
        ONE_KEY,
        &["@write", "@list", "@fast"],
        t::rpush,
    ),
    spec(
        "lpushx",
        -3,
        WRITE_FAST,
        ONE_KEY,
        &["@write", "@list", "@fast"],
        t::lpushx,
    ),
    spec(
        "rpushx",
        -3,
        WRITE_FAST,
        ONE_KEY,
        &["@write", "@list", "@fast"],
        t::rpushx,
    ),
    spec(
        "lpop",
        -2,
        &["write", "fast"],
        ONE_KEY,
        &["@write", "@list", "@fast"],
        t::lpop,
    ),
    spec(
        "rpop",
        -2,
        &["write", "fast"],
        ONE_KEY,
        &["@write", "@list", "@fast"],
        t::rpop,
    ),
    spec(
        "llen",
        2,
        READ_FAST,
        ONE_KEY,
        &["@read", "@list", "@fast"],
        t::llen,
    ),
    spec(
        "lrange",
        4,
        &["readonly"],
        ONE_KEY,
        &["@read", "@list", "@slow"],
        t::lrange,
    ),
    spec(
        "lindex",
        3,
        &["readonly"],
        ONE_KEY,
        &["@read", "@list", "@slow"],
        t::lindex,
    ),
    spec(
        "lset",
        4,
        &["write", "denyoom"],
        ONE_KEY,
        &["@write", "@list", "@slow"],
        t::lset,
    ),
    spec(
        "linsert",
        5,
        &["write", "denyoom"],
        ONE_KEY,
        &["@write", "@list", "@slow"],
        t::linsert,
    ),
    spec(
        "lrem",
        4,
        &["write"],
        ONE_KEY,
        &["@write", "@list", "@slow"],
        t::lrem,
    ),
    spec(
        "ltrim",
        4,
        &["write"],
        ONE_KEY,
        &["@write", "@list", "@slow"],
        t::ltrim,
    ),
    spec(
        "xadd",
        -5,
        WRITE_FAST,
        ONE_KEY,
        &["@write", "@stream", "@fast"],
        x::xadd,
    ),
    spec(
        "xtrim",
        -4,
        &["write"],
        ONE_KEY,
        &["@write", "@stream", "@slow"],
        x::xtrim,
    ),
    spec(
        "xdel",
        -3,
        &["write", "fast"],
        ONE_KEY,
        &["@write", "@stream", "@fast"],
        x::xdel,
    ),
    spec(
        "xlen",
        2,
        READ_FAST,
        ONE_KEY,
        &["@read", "@stream", "@fast"],
        x::xlen,
    ),
    spec(
        "xrange",
        -4,
        &["readonly"],
        ONE_KEY,
        &["@read", "@stream", "@slow"],
        x::xrange,
    ),
    spec(
        "xread",
        -4,
        &["readonly", "blocking", "movablekeys"],
        NO_KEYS,
        &["@read", "@stream", "@slow", "@blocking"],
        x::xread,
    ),
    spec(
        "xrevrange",
        -4,
        &["readonly"],
        ONE_KEY,
        &["@read", "@stream", "@slow"],
        x::xrevrange,
    ),
    spec(
        "lpos",
        -3,
        &["readonly"],
        ONE_KEY,
        &["@read", "@list", "@slow"],
        t::lpos,
    ),
    spec(
        "zadd",
        -4,
        WRITE_FAST,
        ONE_KEY,
        &["@write", "@sortedset", "@fast"],
        t::zadd,
    ),
    spec(
        "zincrby",
        4,
        WRITE_FAST,
        ONE_KEY,
        &["@write", "@sortedset", "@fast"],
        t::zincrby,
    ),
    spec(
        "zscore",
        3,
        READ_FAST,
        ONE_KEY,
        &["@read", "@sortedset", "@fast"],
        t::zscore,
    ),
    spec(
        "zmscore",
        -3,
        READ_FAST,
        ONE_KEY,
        &["@read", "@sortedset", "@fast"],
        t::zmscore,
    ),
    spec(
        "zrem",
        -3,
        &["write", "fast"],
        ONE_KEY,
        &["@write", "@sortedset", "@fast"],
        t::zrem,
    ),
    spec(
        "zcard",
        2,
        READ_FAST,
        ONE_KEY,
        &["@read", "@sortedset", "@fast"],
        t::zcard,
    ),
    spec(
        "zcount",
        4,
        READ_FAST,
        ONE_KEY,
        &["@read", "@sortedset", "@fast"],
        t::zcount,
    ),
    spec(
        "zlexcount",
        4,
        READ_FAST,
        ONE_KEY,
        &["@read", "@sortedset", "@fast"],
        t::zlexcount,
    ),
    spec(
        "zrange",
        -4,
        &["readonly"],
        ONE_KEY,
        &["@read", "@sortedset", "@slow"],
        t::zrange,
    ),
    spec(
        "zrevrange",
        -4,
        &["readonly"],
        ONE_KEY,
        &["@read", "@sortedset", "@slow"],
        t::zrevrange,
    ),
    spec(
        "zrangebyscore",
        -4,
        &["readonly"],
        ONE_KEY,
        &["@read", "@sortedset", "@slow"],
        t::zrangebyscore,
    ),
    spec(
        "zrevrangebyscore",
        -4,
        &["readonly"],
        ONE_KEY,
        &["@read", "@sortedset", "@slow"],
        t::zrevrangebyscore,
    ),
    spec(
        "zrangebylex",
        -4,
        &["readonly"],
        ONE_KEY,
        &["@read", "@sortedset", "@slow"],
        t::zrangebylex,
    ),
    spec(
        "zrevrangebylex",
        -4,
        &["readonly"],
        ONE_KEY,
        &["@read", "@sortedset", "@slow"],
        t::zrevrangebylex,
    ),
    spec(
        "zrank",
        3,
        READ_FAST,
        ONE_KEY,
        &["@read", "@sortedset", "@fast"],
        t::zrank,
    ),
    spec(
        "zrevrank",
        3,
        READ_FAST,
        ONE_KEY,
        &["@read", "@sortedset", "@fast"],
        t::zrevrank,
    ),
    spec(
        "zpopmin",
        -2,
        &["write", "fast"],
        ONE_KEY,
        &["@write", "@sortedset", "@fast"],
        t::zpopmin,
    ),
    spec(
        "zpopmax",
        -2,
        &["write", "fast"],
        ONE_KEY,
        &["@write", "@sortedset", "@fast"],
        t::zpopmax,
    ),
    spec(
        "zintercard",
        -3,
        &["readonly", "movablekeys"],
        NO_KEYS,
        SORTED_READ_SLOW,
        m::zintercard,
    ),
    spec(
        "zrandmember",
        -2,
        &["readonly"],
        ONE_KEY,
        SORTED_READ_SLOW,
        t::zrandmember,
    ),
    spec(
        "zmpop",
        -4,
        &["write", "movablekeys"],
        NO_KEYS,
        SORTED_WRITE_SLOW,
        m::zmpop,
    ),
    spec(
        "bzmpop",
        -5,
        &["write", "blocking", "movablekeys"],
        NO_KEYS,
        &["@write", "@sortedset", "@slow", "@blocking"],
        m::bzmpop,
    ),
    spec(
        "zremrangebyrank",
        4,
        &["write"],
        ONE_KEY,
        &["@write", "@sortedset", "@slow"],
        t::zremrangebyrank,
    ),
    spec(
        "zremrangebyscore",
        4,
        &["write"],
        ONE_KEY,
        &["@write", "@sortedset", "@slow"],
        t::zremrangebyscore,
    ),
    spec(
        "zremrangebylex",
        4,
        &["write"],
        ONE_KEY,
        &["@write", "@sortedset", "@slow"],
        t::zremrangebylex,
    ),
    spec(
        "type",
        2,
        READ_FAST,
        ONE_KEY,
        &["@keyspace", "@read", "@fast"],
        t::type_of,
    ),
    spec(
        "expire",
        -3,
        &["write", "fast"],
        ONE_KEY,
        &["@keyspace", "@write", "@fast"],
        t::expire,
    ),
    spec(
        "pexpire",
        -3,
        &["write", "fast"],
        ONE_KEY,
        &["@keyspace", "@write", "@fast"],
        t::pexpire,
    ),
    spec(
        "expireat",
        -3,
        &["write", "fast"],
        ONE_KEY,
        &["@keyspace", "@write", "@fast"],
        t::expireat,
    ),
    spec(
        "pexpireat",
        -3,
        &["write", "fast"],
        ONE_KEY,
        &["@keyspace", "@write", "@fast"],
        t::pexpireat,
    ),
    spec(
        "ttl",
        2,
        READ_FAST,
        ONE_KEY,
        &["@keyspace", "@read", "@fast"],
        t::ttl,
    ),
    spec(
        "pttl",
        2,
        READ_FAST,
        ONE_KEY,
        &["@keyspace", "@read", "@fast"],
        t::pttl,
    ),
    spec(
        "expiretime",
        2,
        READ_FAST,
        ONE_KEY,
        &["@keyspace", "@read", "@fast"],
        t::expiretime,
    ),
    spec(
        "pexpiretime",
        2,
        READ_FAST,
        ONE_KEY,
        &["@keyspace", "@read", "@fast"],
        t::pexpiretime,
    ),
    spec(
        "persist",
        2,
        &["write", "fast"],
        ONE_KEY,
        &["@keyspace", "@write", "@fast"],
        t::persist,
    ),
    spec(
        "setex",
        4,
        &["write", "denyoom"],
        ONE_KEY,
        &["@write", "@string", "@slow"],
        t::setex,
    ),
    spec(
        "psetex",
        4,
        &["write", "denyoom"],
        ONE_KEY,
        &["@write", "@string", "@slow"],
        t::psetex,
    ),
    spec("setnx", 3, WRITE_FAST, ONE_KEY, STRING_WRITE, t::setnx),
    spec(
        "getex",
        -2,
        &["write", "fast"],
        ONE_KEY,
        STRING_WRITE,
        t::getex,
    ),
    spec(
        "getdel",
        2,
        &["write", "fast"],
        ONE_KEY,
        STRING_WRITE,
        t::getdel,
    ),
    spec(
        "incrbyfloat",
        3,
        WRITE_FAST,
        ONE_KEY,
        STRING_WRITE,
        t::incrbyfloat,
    ),
    container(
        "memory",
        -2,
        &[],
        &["@slow"],
        MEMORY_SUBCOMMANDS,
        c::container_without_subcommand,
    ),
    container(
        "object",
        -2,
        &[],
        &["@slow"],
        OBJECT_SUBCOMMANDS,
        c::container_without_subcommand,
    ),
    spec("ping", -1, &["fast"], NO_KEYS, CONNECTION, c::ping),
    spec("echo", 2, &["fast"], NO_KEYS, CONNECTION, c::echo),
    spec("hello", -1, HANDSHAKE, NO_KEYS, CONNECTION, c::hello),
    spec(
        "time",
        1,
        &["loading", "stale", "fast"],
        NO_KEYS,
        &["@fast"],
        c::time_in_multi,
    ),
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
    container(
        "slowlog",
        -2,
        &[],
        &["@slow"],
        SLOWLOG_SUBCOMMANDS,
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

static MEMORY_SUBCOMMANDS: &[Spec] = &[spec(
    "memory|usage",
    -3,
    &["readonly"],
    (2, 2, 1),
    &["@read", "@slow"],
    t::memory_usage,
)];

static OBJECT_SUBCOMMANDS: &[Spec] = &[spec(
    "object|encoding",
    3,
    &["readonly"],
    (2, 2, 1),
    &["@keyspace", "@read", "@slow"],
    t::object_encoding,
)];

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
    spec(
        "config|set",
        -4,
        ADMIN_NOSCRIPT,
        NO_KEYS,
        ADMIN_SLOW_DANGEROUS,
        c::served_by_the_gateway,
    ),
    spec(
        "config|resetstat",
        2,
        ADMIN_NOSCRIPT,
        NO_KEYS,
        ADMIN_SLOW_DANGEROUS,
        c::served_by_the_gateway,
    ),
];

const ADMIN_NOSCRIPT: &[&str] = &["admin", "noscript", "loading", "stale"];
const ADMIN_SLOW_DANGEROUS: &[&str] = &["@admin", "@slow", "@dangerous"];

/// SLOWLOG: the gateway's slow log (`stats`), answered by the runtime.
static SLOWLOG_SUBCOMMANDS: &[Spec] = &[
    spec(
        "slowlog|get",
        -2,
        &["admin", "loading", "stale"],
        NO_KEYS,
        ADMIN_SLOW_DANGEROUS,
        c::served_by_the_gateway,
    ),
    spec(
        "slowlog|len",
        2,
        &["admin", "loading", "stale"],
        NO_KEYS,
        ADMIN_SLOW_DANGEROUS,
        c::served_by_the_gateway,
    ),
    spec(
        "slowlog|reset",
        2,
        &["admin", "loading", "stale"],
        NO_KEYS,
        ADMIN_SLOW_DANGEROUS,
        c::served_by_the_gateway,
    ),
    spec(
        "slowlog|help",
        2,
        SERVER_INFO,
        NO_KEYS,
        &["@slow"],
        c::served_by_the_gateway,
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
