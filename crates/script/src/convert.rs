//! Redis's conversions between replies and Lua values (Redis 7.0, RESP2 scripts).
//!
//! Reply → Lua (what `redis.call` returns): an integer is a number, a bulk string a string, a
//! nil (bulk or array) `false`, an array a table, a status `{ok = text}`, an error
//! `{err = text}` (raised by `redis.call`, returned by `redis.pcall`). RESP3 types are first
//! downgraded to RESP2 (a map is a flat array, a double its text): a script speaks RESP2.
//!
//! Lua → reply (what a script returns): a number is an integer (truncated towards zero; a
//! NaN or a number out of range is `i64::MIN`, as the C cast on x86-64 makes it in Redis), a
//! string a bulk string, `true` the integer 1, `false` and `nil` a nil bulk, a table with a
//! string field `err` an error and one with a string field `ok` a status, any other table an
//! array of its elements from 1 up to the first nil. Anything else (a function…) is nil.

use mlua::{IntoLua, Lua, Table};
use resp::Value;

/// How deep a reply may nest tables: a table that contains itself would recurse for ever
/// (Redis stops at the Lua stack's limit with the same error).
const DEPTH_MAX: usize = 256;

/// The reply `value` converts to (a script's return value).
/// A reply nested deeper than `DEPTH_MAX` (a table that contains itself) is an error.
pub fn lua_to_reply(value: &mlua::Value) -> Value {
    lua_to_reply_at(value, 0)
        .unwrap_or_else(|TooDeep| Value::Error("ERR reached lua stack limit".into()))
}

/// A reply nests tables deeper than `DEPTH_MAX`.
struct TooDeep;

fn lua_to_reply_at(value: &mlua::Value, depth: usize) -> Result<Value, TooDeep> {
    if depth > DEPTH_MAX {
        return Err(TooDeep);
    }
    Ok(match value {
        mlua::Value::String(text) => Value::Bulk(text.as_bytes().to_vec()),
        mlua::Value::Boolean(true) => Value::Integer(1),
        mlua::Value::Integer(number) => Value::Integer(*number),
        mlua::Value::Number(number) => Value::Integer(truncate(*number)),
        mlua::Value::Table(table) => table_to_reply(table, depth)?,
        _ => Value::Null,
    })
}

/// A Lua number as Redis returns it: truncated towards zero; NaN and numbers out of the
/// integer range are `i64::MIN` (Redis casts with C, whose result x86-64 defines so).
pub fn truncate(number: f64) -> i64 {
    // 2^63 is the first double out of range; -2^63 is in range.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if number.is_nan() || !(-LIMIT..LIMIT).contains(&number) {
        return i64::MIN;
    }
    number as i64
}

fn table_to_reply(table: &Table, depth: usize) -> Result<Value, TooDeep> {
    if let Ok(mlua::Value::String(text)) = table.raw_get::<mlua::Value>("err") {
        return Ok(Value::Error(one_line(&text.to_string_lossy())));
    }
    if let Ok(mlua::Value::String(text)) = table.raw_get::<mlua::Value>("ok") {
        return Ok(Value::Simple(one_line(&text.to_string_lossy())));
    }
    let mut items = Vec::new();
    for index in 1.. {
        match table.raw_get::<mlua::Value>(index) {
            Ok(mlua::Value::Nil) | Err(_) => break,
            Ok(item) => items.push(lua_to_reply_at(&item, depth + 1)?),
        }
    }
    Ok(Value::Array(items))
}

/// A status or error text on one line: Redis replaces `\r` and `\n` by spaces.
pub fn one_line(text: &str) -> String {
    text.replace(['\r', '\n'], " ")
}

/// The Lua value `redis.call` returns for `reply`.
pub fn reply_to_lua(lua: &Lua, reply: Value) -> mlua::Result<mlua::Value> {
    match reply.into_resp2() {
        Value::Simple(text) => field_table(lua, "ok", text.as_bytes()),
        Value::Error(text) => field_table(lua, "err", text.as_bytes()),
        Value::Integer(number) => Ok(mlua::Value::Number(number as f64)),
        Value::Bulk(bytes) => lua.create_string(&bytes)?.into_lua(lua),
        // A nil bulk and a nil array are both `false` in Lua, as in Redis.
        Value::Null | Value::NullArray => Ok(mlua::Value::Boolean(false)),
        Value::Array(items) => {
            let table = lua.create_table_with_capacity(items.len(), 0)?;
            for (index, item) in items.into_iter().enumerate() {
                table.raw_set(index + 1, reply_to_lua(lua, item)?)?;
            }
            Ok(mlua::Value::Table(table))
        }
        // `into_resp2` leaves none of the RESP3 types.
        Value::Map(_)
        | Value::Double(_)
        | Value::Boolean(_)
        | Value::Verbatim(_)
        | Value::Set(_)
        | Value::Pairs(_) => Ok(mlua::Value::Boolean(false)),
    }
}

/// `{name = text}`.
pub fn field_table(lua: &Lua, name: &str, text: &[u8]) -> mlua::Result<mlua::Value> {
    let table = lua.create_table()?;
    table.raw_set(name, lua.create_string(text)?)?;
    Ok(mlua::Value::Table(table))
}
