//! Redis's conversions between replies and Lua values (Redis 7.0, `script_lua.c`).
//!
//! Reply → Lua (what `redis.call` returns): an integer is a number, a bulk string a string, an
//! array a table, a status `{ok = text}`, an error `{err = text}` (raised by `redis.call`,
//! returned by `redis.pcall`). In RESP2 (the default) RESP3 types are first downgraded (a map
//! is a flat array, a double its text) and a nil is `false`. After `redis.setresp(3)`: a map
//! is `{map = {k = v}}`, a set `{set = {member = true}}`, a double `{double = n}`, a boolean
//! a Lua boolean, a verbatim string `{verbatim_string = {format = "txt", string = s}}`, a nil
//! `nil`, pairs an array of two-element arrays.
//!
//! Lua → reply (what a script returns): a number is an integer (truncated towards zero; a
//! NaN or a number out of range is `i64::MIN`, as the C cast on x86-64 makes it in Redis), a
//! string a bulk string, `nil` a nil; `true` the integer 1 and `false` a nil while the script
//! speaks RESP2, booleans after `redis.setresp(3)`; a table with a string field `err` an
//! error, `ok` a status, a number field `double` a double, a string `big_number` a bulk string
//! (Tessera has no big number type), a table `map` a map, `set` a set, `verbatim_string` a
//! verbatim string; any other table an array of its elements from 1 up to the first nil.
//! Anything else (a function…) is nil. The connection's protocol then encodes the reply (a
//! map is a flat array for a RESP2 client).

use mlua::{IntoLua, Lua, Table};
use resp::Value;

/// How deep a reply may nest tables: a table that contains itself would recurse for ever
/// (Redis stops at the Lua stack's limit with the same error).
const DEPTH_MAX: usize = 256;

/// The reply `value` converts to (a script's return value).
/// A reply nested deeper than `DEPTH_MAX` (a table that contains itself) is an error.
pub fn lua_to_reply(value: &mlua::Value, resp3: bool) -> Value {
    lua_to_reply_at(value, 0, resp3)
        .unwrap_or_else(|TooDeep| Value::Error("ERR reached lua stack limit".into()))
}

/// A reply nests tables deeper than `DEPTH_MAX`.
struct TooDeep;

fn lua_to_reply_at(value: &mlua::Value, depth: usize, resp3: bool) -> Result<Value, TooDeep> {
    if depth > DEPTH_MAX {
        return Err(TooDeep);
    }
    Ok(match value {
        mlua::Value::String(text) => Value::Bulk(text.as_bytes().to_vec()),
        mlua::Value::Boolean(flag) if resp3 => Value::Boolean(*flag),
        mlua::Value::Boolean(true) => Value::Integer(1),
        mlua::Value::Integer(number) => Value::Integer(*number),
        mlua::Value::Number(number) => Value::Integer(truncate(*number)),
        mlua::Value::Table(table) => table_to_reply(table, depth, resp3)?,
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

fn table_to_reply(table: &Table, depth: usize, resp3: bool) -> Result<Value, TooDeep> {
    let field = |name: &str| {
        table
            .raw_get::<mlua::Value>(name)
            .unwrap_or(mlua::Value::Nil)
    };
    if let mlua::Value::String(text) = field("err") {
        return Ok(Value::Error(one_line(&text.to_string_lossy())));
    }
    if let mlua::Value::String(text) = field("ok") {
        return Ok(Value::Simple(one_line(&text.to_string_lossy())));
    }
    match field("double") {
        mlua::Value::Number(number) => return Ok(Value::Double(number)),
        mlua::Value::Integer(number) => return Ok(Value::Double(number as f64)),
        _ => {}
    }
    if let mlua::Value::String(text) = field("big_number") {
        return Ok(Value::Bulk(text.as_bytes().to_vec()));
    }
    if let mlua::Value::Table(map) = field("map") {
        let mut pairs = Vec::new();
        for pair in map.pairs::<mlua::Value, mlua::Value>() {
            let Ok((key, item)) = pair else { break };
            pairs.push((
                lua_to_reply_at(&key, depth + 1, resp3)?,
                lua_to_reply_at(&item, depth + 1, resp3)?,
            ));
        }
        return Ok(Value::Map(pairs));
    }
    if let mlua::Value::Table(set) = field("set") {
        let mut members = Vec::new();
        for pair in set.pairs::<mlua::Value, mlua::Value>() {
            let Ok((member, _)) = pair else { break };
            members.push(lua_to_reply_at(&member, depth + 1, resp3)?);
        }
        return Ok(Value::Set(members));
    }
    if let mlua::Value::Table(verbatim) = field("verbatim_string") {
        if let Ok(mlua::Value::String(text)) = verbatim.raw_get::<mlua::Value>("string") {
            return Ok(Value::Verbatim(text.to_string_lossy()));
        }
    }
    let mut items = Vec::new();
    for index in 1.. {
        match table.raw_get::<mlua::Value>(index) {
            Ok(mlua::Value::Nil) | Err(_) => break,
            Ok(item) => items.push(lua_to_reply_at(&item, depth + 1, resp3)?),
        }
    }
    Ok(Value::Array(items))
}

/// A status or error text on one line: Redis replaces `\r` and `\n` by spaces.
pub fn one_line(text: &str) -> String {
    text.replace(['\r', '\n'], " ")
}

/// The Lua value `redis.call` returns for `reply`, as a script speaking RESP3 (after
/// `redis.setresp(3)`) or RESP2 sees it.
pub fn reply_to_lua(lua: &Lua, reply: Value, resp3: bool) -> mlua::Result<mlua::Value> {
    if resp3 {
        return resp3_reply_to_lua(lua, reply);
    }
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
                table.raw_set(index + 1, reply_to_lua(lua, item, false)?)?;
            }
            Ok(mlua::Value::Table(table))
        }
        // `into_resp2` leaves none of the RESP3 types.
        Value::Map(_)
        | Value::Double(_)
        | Value::Boolean(_)
        | Value::Verbatim(_)
        | Value::Set(_)
        | Value::Pairs(_)
        | Value::Streams(_) => Ok(mlua::Value::Boolean(false)),
    }
}

fn resp3_reply_to_lua(lua: &Lua, reply: Value) -> mlua::Result<mlua::Value> {
    let wrapped = |name: &str, inner: mlua::Value| -> mlua::Result<mlua::Value> {
        let table = lua.create_table()?;
        table.raw_set(name, inner)?;
        Ok(mlua::Value::Table(table))
    };
    let array = |items: Vec<Value>| -> mlua::Result<mlua::Value> {
        let table = lua.create_table_with_capacity(items.len(), 0)?;
        for (index, item) in items.into_iter().enumerate() {
            table.raw_set(index + 1, resp3_reply_to_lua(lua, item)?)?;
        }
        Ok(mlua::Value::Table(table))
    };
    match reply {
        Value::Null | Value::NullArray => Ok(mlua::Value::Nil),
        Value::Boolean(flag) => Ok(mlua::Value::Boolean(flag)),
        Value::Double(number) => wrapped("double", mlua::Value::Number(number)),
        Value::Map(pairs) => {
            let map = lua.create_table()?;
            for (key, item) in pairs {
                let key = resp3_reply_to_lua(lua, key)?;
                if !key.is_nil() {
                    map.raw_set(key, resp3_reply_to_lua(lua, item)?)?;
                }
            }
            wrapped("map", mlua::Value::Table(map))
        }
        Value::Set(members) => {
            let set = lua.create_table()?;
            for member in members {
                let member = resp3_reply_to_lua(lua, member)?;
                if !member.is_nil() {
                    set.raw_set(member, true)?;
                }
            }
            wrapped("set", mlua::Value::Table(set))
        }
        Value::Verbatim(text) => {
            let verbatim = lua.create_table()?;
            verbatim.raw_set("format", "txt")?;
            verbatim.raw_set("string", lua.create_string(text.as_bytes())?)?;
            wrapped("verbatim_string", mlua::Value::Table(verbatim))
        }
        Value::Pairs(pairs) => array(
            pairs
                .into_iter()
                .map(|(first, second)| Value::Array(vec![first, second]))
                .collect(),
        ),
        Value::Streams(streams) => resp3_reply_to_lua(lua, Value::Map(streams)),
        Value::Array(items) => array(items),
        other => reply_to_lua(lua, other, false),
    }
}

/// `{name = text}`.
pub fn field_table(lua: &Lua, name: &str, text: &[u8]) -> mlua::Result<mlua::Value> {
    let table = lua.create_table()?;
    table.raw_set(name, lua.create_string(text)?)?;
    Ok(mlua::Value::Table(table))
}
