//! Tessera's Redis command model: what a Redis command means for a replicated `kv::KvStore`,
//! and what Redis would reply.
//!
//! The crate is pure: no I/O, no sockets, no clock. The runtime decodes RESP frames into a
//! command (the array of bulk strings a client sent, the name first, any case), then:
//!
//! 1. calls [`plan`], which answers at once, or asks for connection state, or names one store
//!    operation ([`Plan::Execute`]);
//! 2. for `Execute(pending)`: stamps it with its clock ([`Pending::stamp`], unix milliseconds:
//!    the only time the store sees), runs `pending.command` (a read, `Command::is_read()`, is served
//!    without logging; a write is replicated first), then replies [`finish`]`(&pending, &outcome)`;
//! 3. encodes the [`Value`] for the connection's protocol. For a RESP2 connection the runtime
//!    must downgrade RESP3 types first — [`Value::into_resp2`] does it: a [`Value::Map`] (CONFIG
//!    GET, COMMAND DOCS, HELLO) becomes a flat array `[k1, v1, k2, v2, …]`, a double becomes bulk
//!    text, a boolean 1 or 0, a verbatim string (INFO) a bulk string.
//!
//! Every validation error (arity, syntax, an unparsable integer) is produced by [`plan`], before
//! anything is logged; errors follow Redis 7's texts. The error replies that only the store can
//! decide are INCR's on a value that is not an integer and on overflow.
//!
//! # Commands
//!
//! | command | plan | reply |
//! |---|---|---|
//! | `PING [message]` | `Reply` | `+PONG`, or the message as a bulk string |
//! | `ECHO message` | `Reply` | the message |
//! | `HELLO [2\|3 [AUTH u p] [SETNAME n]]` | `Hello` | [`hello_reply`]; AUTH is refused (Tessera has no users) |
//! | `AUTH …` | `Reply` | an error, as a Redis without passwords answers |
//! | `COMMAND`, `COMMAND COUNT\|INFO\|DOCS\|HELP` | `Reply` | the command table; DOCS is an empty map |
//! | `CLIENT SETNAME\|GETNAME` | `SetName`/`GetName` | `+OK` / the name or nil (an empty name clears it) |
//! | `CLIENT ID\|SETINFO\|HELP` | `Reply` | [`CLIENT_ID`] / `+OK` / help |
//! | `CONFIG GET pattern…` | `Reply` | a map: `save` → `""`, `appendonly` → `no`, nothing else |
//! | `SELECT 0` | `Reply` | `+OK`; any other index is out of range |
//! | `INFO [section…]` | `Info` | [`info_reply`] |
//! | `QUIT` | `Quit` | `+OK`, then close |
//! | `DBSIZE` | `Execute(Count)` | integer |
//! | `GET k` | `Execute(Get)` | bulk or nil |
//! | `STRLEN k` | `Execute(Get)` | the length, 0 if absent |
//! | `MGET k…` | `Execute(MultiGet)` | array of bulks and nils |
//! | `EXISTS k…` | `Execute(MultiGet)` | how many exist, a key named twice counted twice |
//! | `SET k v` | `Execute(Put)` | `+OK` |
//! | `SET k v GET` | `Execute(GetSet)` | the previous value or nil |
//! | `SET k v NX\|XX` | `Execute(Set)` | `+OK`, or nil if not written |
//! | `SET k v NX\|XX GET` | `Execute(Set)` | the previous value or nil |
//! | `SET … EX\|PX\|EXAT\|PXAT n\|KEEPTTL` | `Execute(SetExpiring)` | `+OK` or nil, or the previous value with GET |
//! | hashes, sets, lists, sorted sets, TYPE, EXPIRE…, TTL…, PERSIST, GETEX, GETDEL, SETEX | `Execute(Hash\|Members\|List\|Sorted\|…)` | as Redis 7.0: `docs/internals/redis.md` |
//! | `GETSET k v` | `Execute(GetSet)` | the previous value or nil |
//! | `MSET k v …` | `Execute(MultiPut)` | `+OK` |
//! | `DEL k…`, `UNLINK k…` | `Execute(MultiDelete)` | how many existed |
//! | `INCR`, `DECR`, `INCRBY k n`, `DECRBY k n` | `Execute(Increment)` | the new value |
//! | `APPEND k v` | `Execute(Append)` | the new length |
//!
//! Anything else is refused with Redis's `unknown command` (or `unknown subcommand`) error.
//!
//! # Nil-externality
//!
//! Skyros (Ganesan et al., SOSP 2021) observes that many writes are *nil-externalising*: their
//! reply reveals nothing about the state they ran against, so a replicated store may acknowledge
//! them once durable and defer ordering them until something reads what they wrote. Whether an
//! operation is nilext is a property of the reply the client sees, so this crate decides it:
//! [`is_nilext`].
//!
//! - **Nilext**: plain `SET k v` and `MSET`. They always reply `+OK` and
//!   cannot fail once planned (their errors are syntax errors, answered by [`plan`]).
//! - **Non-nilext writes**: `SET` with `NX`, `XX` or `GET` (the reply says whether it wrote, or
//!   what was there), `GETSET`, `DEL`/`UNLINK` (a count), `INCR`/`DECR`/`INCRBY`/`DECRBY` (the new
//!   value, or an error that depends on the stored value), `APPEND` (the new length).
//! - **Reads** (`GET`, `STRLEN`, `MGET`, `EXISTS`, `DBSIZE`) externalise state by definition and
//!   are not nilext either.
#![forbid(unsafe_code)]

mod commands;
pub mod config;
mod info;
mod multikey;
pub mod notify;
pub mod stats;
mod streams;
mod table;
mod text;
mod types;
mod value;

pub use commands::{finish, is_nilext, plan, Pending};
pub use info::{hello_reply, info_reply, InfoSection, ServerInfo};
pub use value::{double_text, Value};

/// Redis glob matching (`KEYS`, `SCAN … MATCH`): `*`, `?`, `[abc]`, `[^abc]`, `[a-z]` and `\`
/// escapes, case-sensitive.
pub fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    text::glob_matches(pattern, text, false)
}

/// The Redis version Tessera presents to clients (INFO `redis_version`, HELLO `version`):
/// the Redis whose command semantics it follows.
pub const REDIS_VERSION: &str = "7.0.0";

/// The connection id reported by `CLIENT ID` and HELLO. Tessera does not number connections.
pub const CLIENT_ID: i64 = 1;

/// What the runtime must do for one command.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// Answer at once, without touching the store (PING, ECHO, COMMAND, CONFIG GET, CLIENT ID,
    /// SELECT, every error).
    Reply(Value),
    /// HELLO: switch the connection to `protocol`, apply `client_name` if given (an empty name
    /// clears the name), then reply [`hello_reply`]`(protocol in effect, info)`.
    ///
    /// `protocol` is 2 or 3, or **0 when HELLO named no version**: keep the connection's
    /// current protocol.
    Hello {
        protocol: u8,
        client_name: Option<Vec<u8>>,
    },
    /// Run one store operation, then reply [`finish`]`(&pending, &outcome)`.
    Execute(Pending),
    /// INFO: fill a [`ServerInfo`] and reply [`info_reply`]`(&info, section.as_deref())`.
    /// `section` holds the requested section names separated by spaces, as typed.
    Info { section: Option<String> },
    /// QUIT: reply `+OK`, then close the connection.
    Quit,
    /// CLIENT SETNAME: remember this name for the connection (empty: no name), reply `+OK`.
    /// The name is already validated (printable ASCII without spaces).
    SetName(Vec<u8>),
    /// CLIENT GETNAME: reply the connection's name as a bulk string, or `Value::Null`.
    GetName,
    /// DEBUG PEER-DELAY: delay this node's messages to its peers by `micros`, reply `+OK`.
    PeerDelay { micros: u64 },
}
