//! The Lua libraries Redis 7.0 bundles for scripts, in Rust: `cjson` (lua-cjson 2.1.0 as
//! Redis patches it), `cmsgpack` (lua-cmsgpack 0.4.0), `bit` (LuaBitOp 1.0.2) and `struct`
//! (Roberto Ierusalimschy's struct 0.2). Same outputs and error texts as Redis's C versions
//! for what scripts use; deterministic (a table's fields are visited in Lua's `next` order,
//! as the C libraries visit them). Each run gets its own copy, so a script's `cjson`
//! settings (`encode_max_depth`…) reach no other script.

use mlua::{IntoLuaMulti, LightUserData, Lua, MultiValue, Table, Value};
use std::cell::Cell;
use std::rc::Rc;

/// Installs `cjson`, `cmsgpack`, `bit` and `struct` as globals.
pub fn install(lua: &Lua) -> mlua::Result<()> {
    let globals = lua.globals();
    globals.raw_set("cjson", cjson(lua)?)?;
    globals.raw_set("cmsgpack", cmsgpack(lua)?)?;
    globals.raw_set("bit", bit(lua)?)?;
    globals.raw_set("struct", structure(lua)?)?;
    Ok(())
}

fn error<T>(text: impl Into<String>) -> mlua::Result<T> {
    Err(mlua::Error::runtime(text.into()))
}

/// The number `value` holds, if it is a number (or a string Lua would convert).
pub fn number_of(value: &Value) -> Option<f64> {
    number(value)
}

fn number(value: &Value) -> Option<f64> {
    match value {
        Value::Integer(integer) => Some(*integer as f64),
        Value::Number(number) => Some(*number),
        Value::String(text) => text.to_str().ok()?.trim().parse().ok(),
        _ => None,
    }
}

/// C's `%.<precision>g`.
pub fn format_g(value: f64, precision: usize) -> String {
    if value.is_nan() {
        return if value.is_sign_negative() {
            "-nan"
        } else {
            "nan"
        }
        .into();
    }
    if value.is_infinite() {
        return if value < 0.0 { "-inf" } else { "inf" }.into();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let precision = precision.max(1);
    let scientific = format!("{:.*e}", precision - 1, value);
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if exponent < -4 || exponent >= precision as i32 {
        let mantissa = trim_fraction(mantissa);
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.abs())
    } else {
        let decimals = (precision as i32 - 1 - exponent).max(0) as usize;
        trim_fraction(&format!("{value:.decimals$}")).to_string()
    }
}

fn trim_fraction(text: &str) -> &str {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    }
}

// ---------------------------------------------------------------------------------------
// cjson

/// A run's `cjson` settings (the `cjson.encode_*`/`decode_*` functions change them).
struct JsonConfig {
    encode_max_depth: Cell<i64>,
    decode_max_depth: Cell<i64>,
    /// 0: refuse NaN and infinities; 1: write them (`nan`, `inf`); 2: write `null`.
    encode_invalid_numbers: Cell<u8>,
    decode_invalid_numbers: Cell<bool>,
    encode_number_precision: Cell<i64>,
    encode_keep_buffer: Cell<bool>,
    sparse_convert: Cell<bool>,
    sparse_ratio: Cell<i64>,
    sparse_safe: Cell<i64>,
}

impl Default for JsonConfig {
    fn default() -> Self {
        JsonConfig {
            encode_max_depth: Cell::new(1000),
            decode_max_depth: Cell::new(1000),
            encode_invalid_numbers: Cell::new(0),
            decode_invalid_numbers: Cell::new(true),
            encode_number_precision: Cell::new(14),
            encode_keep_buffer: Cell::new(true),
            sparse_convert: Cell::new(false),
            sparse_ratio: Cell::new(2),
            sparse_safe: Cell::new(10),
        }
    }
}

/// `cjson.null`: a light userdata holding NULL, as lua-cjson's.
fn json_null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

fn cjson(lua: &Lua) -> mlua::Result<Table> {
    let config = Rc::new(JsonConfig::default());
    let table = lua.create_table()?;
    let encoding = config.clone();
    table.raw_set(
        "encode",
        lua.create_function(move |_, value: Value| {
            let mut out = Vec::new();
            json_encode(&encoding, &value, 0, &mut out)?;
            Ok(mlua::BString::from(out))
        })?,
    )?;
    let decoding = config.clone();
    table.raw_set(
        "decode",
        lua.create_function(move |lua, text: mlua::String| {
            let bytes = text.as_bytes();
            let mut parser = JsonParser {
                lua,
                bytes: &bytes,
                at: 0,
                depth: 0,
                config: &decoding,
            };
            parser.document()
        })?,
    )?;
    table.raw_set("null", json_null())?;
    table.raw_set("_NAME", "cjson")?;
    table.raw_set("_VERSION", "2.1.0")?;
    let settings = config.clone();
    table.raw_set(
        "encode_max_depth",
        lua.create_function(move |_, depth: Option<i64>| {
            depth_setting(&settings.encode_max_depth, depth)
        })?,
    )?;
    let settings = config.clone();
    table.raw_set(
        "decode_max_depth",
        lua.create_function(move |_, depth: Option<i64>| {
            depth_setting(&settings.decode_max_depth, depth)
        })?,
    )?;
    let settings = config.clone();
    table.raw_set(
        "encode_invalid_numbers",
        lua.create_function(move |lua, setting: Value| {
            let code = match setting {
                Value::Nil => settings.encode_invalid_numbers.get(),
                Value::Boolean(on) => u8::from(on),
                Value::String(text) if text.as_bytes().as_ref() == b"null" => 2,
                Value::String(text) if text.as_bytes().as_ref() == b"on" => 1,
                Value::String(text) if text.as_bytes().as_ref() == b"off" => 0,
                _ => return error("bad argument #1 to '?' (invalid option)"),
            };
            settings.encode_invalid_numbers.set(code);
            match code {
                0 => false.into_lua_multi(lua),
                1 => true.into_lua_multi(lua),
                _ => "null".into_lua_multi(lua),
            }
        })?,
    )?;
    let settings = config.clone();
    table.raw_set(
        "decode_invalid_numbers",
        lua.create_function(move |_, setting: Option<bool>| {
            if let Some(on) = setting {
                settings.decode_invalid_numbers.set(on);
            }
            Ok(settings.decode_invalid_numbers.get())
        })?,
    )?;
    let settings = config.clone();
    table.raw_set(
        "encode_keep_buffer",
        lua.create_function(move |_, setting: Option<bool>| {
            if let Some(on) = setting {
                settings.encode_keep_buffer.set(on);
            }
            Ok(settings.encode_keep_buffer.get())
        })?,
    )?;
    let settings = config.clone();
    table.raw_set(
        "encode_number_precision",
        lua.create_function(move |_, precision: Option<i64>| {
            if let Some(precision) = precision {
                if !(1..=14).contains(&precision) {
                    return error("bad argument #1 to '?' (expected integer between 1 and 14)");
                }
                settings.encode_number_precision.set(precision);
            }
            Ok(settings.encode_number_precision.get())
        })?,
    )?;
    let settings = config;
    table.raw_set(
        "encode_sparse_array",
        lua.create_function(
            move |_, (convert, ratio, safe): (Option<bool>, Option<i64>, Option<i64>)| {
                if let Some(convert) = convert {
                    settings.sparse_convert.set(convert);
                }
                if let Some(ratio) = ratio {
                    settings.sparse_ratio.set(ratio.max(0));
                }
                if let Some(safe) = safe {
                    settings.sparse_safe.set(safe.max(0));
                }
                Ok((
                    settings.sparse_convert.get(),
                    settings.sparse_ratio.get(),
                    settings.sparse_safe.get(),
                ))
            },
        )?,
    )?;
    Ok(table)
}

/// The deepest nesting `cjson` may be set to follow: each level holds a table in mlua's
/// reference stack (about 8,000 slots), so lua-cjson's unbounded setting is refused past it.
const JSON_DEPTH_MAX: i64 = 1_000;

fn depth_setting(setting: &Cell<i64>, depth: Option<i64>) -> mlua::Result<i64> {
    if let Some(depth) = depth {
        if !(1..=JSON_DEPTH_MAX).contains(&depth) {
            return error("bad argument #1 to '?' (expected integer between 1 and 1000)");
        }
        setting.set(depth);
    }
    Ok(setting.get())
}

fn json_type_error<T>(value: &Value, reason: &str) -> mlua::Result<T> {
    error(format!("Cannot serialise {}: {reason}", value.type_name()))
}

fn json_encode(
    config: &JsonConfig,
    value: &Value,
    depth: i64,
    out: &mut Vec<u8>,
) -> mlua::Result<()> {
    match value {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(data) if data.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(true) => out.extend_from_slice(b"true"),
        Value::Boolean(false) => out.extend_from_slice(b"false"),
        Value::Integer(integer) => out.extend_from_slice(integer.to_string().as_bytes()),
        Value::Number(number) => json_number(config, value, *number, out)?,
        Value::String(text) => json_string(&text.as_bytes(), out),
        Value::Table(table) => {
            let depth = depth + 1;
            if depth > config.encode_max_depth.get() {
                return error(format!("Cannot serialise, excessive nesting ({depth})"));
            }
            match json_array_length(config, table)? {
                Some(length) if length > 0 => {
                    out.push(b'[');
                    for index in 1..=length {
                        if index > 1 {
                            out.push(b',');
                        }
                        let item: Value = table.raw_get(index)?;
                        json_encode(config, &item, depth, out)?;
                    }
                    out.push(b']');
                }
                _ => json_object(config, table, depth, out)?,
            }
        }
        other => json_type_error(other, "type not supported")?,
    }
    Ok(())
}

fn json_number(
    config: &JsonConfig,
    value: &Value,
    number: f64,
    out: &mut Vec<u8>,
) -> mlua::Result<()> {
    if !number.is_finite() {
        match config.encode_invalid_numbers.get() {
            0 => return json_type_error(value, "must not be NaN or Inf"),
            2 => {
                out.extend_from_slice(b"null");
                return Ok(());
            }
            _ => {}
        }
    }
    let precision = config.encode_number_precision.get() as usize;
    out.extend_from_slice(format_g(number, precision).as_bytes());
    Ok(())
}

fn json_object(
    config: &JsonConfig,
    table: &Table,
    depth: i64,
    out: &mut Vec<u8>,
) -> mlua::Result<()> {
    out.push(b'{');
    let mut first = true;
    for pair in table.clone().pairs::<Value, Value>() {
        let (key, item) = pair?;
        if !first {
            out.push(b',');
        }
        first = false;
        match &key {
            Value::String(text) => json_string(&text.as_bytes(), out),
            Value::Integer(_) | Value::Number(_) => {
                let mut text = Vec::new();
                let number = number(&key).unwrap_or(0.0);
                json_number(config, &key, number, &mut text)?;
                json_string(&text, out);
            }
            _ => {
                return json_type_error(
                    &Value::Table(table.clone()),
                    "table key must be a number or string",
                )
            }
        }
        out.push(b':');
        json_encode(config, &item, depth, out)?;
    }
    out.push(b'}');
    Ok(())
}

/// The length to encode `table` as an array with, or `None` to encode it as an object.
fn json_array_length(config: &JsonConfig, table: &Table) -> mlua::Result<Option<i64>> {
    let (mut max, mut items) = (0i64, 0i64);
    for pair in table.clone().pairs::<Value, Value>() {
        let (key, _) = pair?;
        let index = match key {
            Value::Integer(index) if index >= 1 => index as f64,
            Value::Number(index) if index.floor() == index && index >= 1.0 => index,
            _ => return Ok(None),
        };
        max = max.max(index.min(i64::MAX as f64) as i64);
        items += 1;
    }
    let ratio = config.sparse_ratio.get();
    if ratio > 0 && max > items.saturating_mul(ratio) && max > config.sparse_safe.get() {
        if !config.sparse_convert.get() {
            return json_type_error(&Value::Table(table.clone()), "excessively sparse array");
        }
        return Ok(None);
    }
    Ok(Some(max))
}

fn json_string(bytes: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &byte in bytes {
        match byte {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{byte:04x}").as_bytes()),
            _ => out.push(byte),
        }
    }
    out.push(b'"');
}

struct JsonParser<'a> {
    lua: &'a Lua,
    bytes: &'a [u8],
    at: usize,
    depth: i64,
    config: &'a JsonConfig,
}

impl JsonParser<'_> {
    fn document(&mut self) -> mlua::Result<Value> {
        let value = self.value()?;
        self.skip_space();
        if self.at < self.bytes.len() {
            return self.expected("the end");
        }
        Ok(value)
    }

    fn skip_space(&mut self) {
        while matches!(self.bytes.get(self.at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// lua-cjson's message: what was expected, what token was found, and where (1-based).
    fn expected<T>(&self, what: &str) -> mlua::Result<T> {
        let found = match self.bytes.get(self.at) {
            None => "T_END",
            Some(b'{') => "T_OBJ_BEGIN",
            Some(b'}') => "T_OBJ_END",
            Some(b'[') => "T_ARR_BEGIN",
            Some(b']') => "T_ARR_END",
            Some(b',') => "T_COMMA",
            Some(b':') => "T_COLON",
            Some(b'"') => "T_STRING",
            _ => "invalid token",
        };
        error(format!(
            "Expected {what} but found {found} at character {}",
            self.at + 1
        ))
    }

    fn descend(&mut self) -> mlua::Result<()> {
        self.depth += 1;
        if self.depth > self.config.decode_max_depth.get() {
            return error(format!(
                "Found too many nested data structures ({}) at character {}",
                self.depth,
                self.at + 1
            ));
        }
        Ok(())
    }

    fn value(&mut self) -> mlua::Result<Value> {
        self.skip_space();
        match self.bytes.get(self.at) {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => {
                let text = self.string()?;
                Ok(Value::String(self.lua.create_string(&text)?))
            }
            Some(b't') if self.bytes[self.at..].starts_with(b"true") => {
                self.at += 4;
                Ok(Value::Boolean(true))
            }
            Some(b'f') if self.bytes[self.at..].starts_with(b"false") => {
                self.at += 5;
                Ok(Value::Boolean(false))
            }
            Some(b'n') if self.bytes[self.at..].starts_with(b"null") => {
                self.at += 4;
                Ok(json_null())
            }
            _ => self.number(),
        }
    }

    fn number(&mut self) -> mlua::Result<Value> {
        let start = self.at;
        let mut end = start;
        while let Some(byte) = self.bytes.get(end) {
            if byte.is_ascii_alphanumeric() || matches!(byte, b'+' | b'-' | b'.') {
                end += 1;
            } else {
                break;
            }
        }
        let text = std::str::from_utf8(&self.bytes[start..end]).unwrap_or("");
        let lower = text.to_ascii_lowercase();
        let invalid_allowed = self.config.decode_invalid_numbers.get();
        let parsed = if lower.trim_start_matches(['-', '+']).starts_with("0x") {
            let negative = lower.starts_with('-');
            let digits = lower
                .trim_start_matches(['-', '+'])
                .trim_start_matches("0x");
            u64::from_str_radix(digits, 16)
                .ok()
                .filter(|_| invalid_allowed)
                .map(|value| {
                    if negative {
                        -(value as f64)
                    } else {
                        value as f64
                    }
                })
        } else if matches!(
            lower.trim_start_matches(['-', '+']),
            "inf" | "infinity" | "nan"
        ) {
            lower.parse::<f64>().ok().filter(|_| invalid_allowed)
        } else if !text.is_empty()
            && text.bytes().all(|byte| {
                byte.is_ascii_digit() || matches!(byte, b'+' | b'-' | b'.' | b'e' | b'E')
            })
        {
            text.parse::<f64>().ok()
        } else {
            None
        };
        match parsed {
            Some(number) => {
                self.at = end;
                Ok(Value::Number(number))
            }
            None => self.expected("value"),
        }
    }

    fn string(&mut self) -> mlua::Result<Vec<u8>> {
        let start = self.at;
        self.at += 1;
        let mut out = Vec::new();
        loop {
            let Some(&byte) = self.bytes.get(self.at) else {
                self.at = start;
                return error(format!(
                    "Expected value but found invalid token at character {}",
                    start + 1
                ));
            };
            self.at += 1;
            match byte {
                b'"' => return Ok(out),
                b'\\' => {
                    let Some(&escape) = self.bytes.get(self.at) else {
                        return error(format!(
                            "Expected value but found invalid token at character {}",
                            start + 1
                        ));
                    };
                    self.at += 1;
                    match escape {
                        b'"' | b'\\' | b'/' => out.push(escape),
                        b'b' => out.push(0x08),
                        b'f' => out.push(0x0c),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => self.unicode_escape(start, &mut out)?,
                        _ => {
                            return error(format!(
                                "Expected value but found invalid token at character {}",
                                start + 1
                            ))
                        }
                    }
                }
                _ => out.push(byte),
            }
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.bytes.get(self.at..self.at + 4)?;
        let text = std::str::from_utf8(digits).ok()?;
        let value = u32::from_str_radix(text, 16).ok()?;
        self.at += 4;
        Some(value)
    }

    fn unicode_escape(&mut self, start: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
        let invalid = || -> mlua::Result<()> {
            error(format!(
                "Expected value but found invalid unicode escape code at character {}",
                start + 1
            ))
        };
        let Some(first) = self.hex4() else {
            return invalid();
        };
        let code = if (0xd800..0xdc00).contains(&first) {
            if self.bytes.get(self.at..self.at + 2) != Some(b"\\u") {
                return invalid();
            }
            self.at += 2;
            match self.hex4() {
                Some(second) if (0xdc00..0xe000).contains(&second) => {
                    0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00)
                }
                _ => return invalid(),
            }
        } else if (0xdc00..0xe000).contains(&first) {
            return invalid();
        } else {
            first
        };
        let Some(character) = char::from_u32(code) else {
            return invalid();
        };
        let mut buffer = [0u8; 4];
        out.extend_from_slice(character.encode_utf8(&mut buffer).as_bytes());
        Ok(())
    }

    fn array(&mut self) -> mlua::Result<Value> {
        self.descend()?;
        self.at += 1;
        let table = self.lua.create_table()?;
        self.skip_space();
        if self.bytes.get(self.at) == Some(&b']') {
            self.at += 1;
            self.depth -= 1;
            return Ok(Value::Table(table));
        }
        let mut index = 1;
        loop {
            let item = self.value()?;
            table.raw_set(index, item)?;
            index += 1;
            self.skip_space();
            match self.bytes.get(self.at) {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    self.depth -= 1;
                    return Ok(Value::Table(table));
                }
                _ => return self.expected("comma or array end"),
            }
        }
    }

    fn object(&mut self) -> mlua::Result<Value> {
        self.descend()?;
        self.at += 1;
        let table = self.lua.create_table()?;
        self.skip_space();
        if self.bytes.get(self.at) == Some(&b'}') {
            self.at += 1;
            self.depth -= 1;
            return Ok(Value::Table(table));
        }
        loop {
            self.skip_space();
            if self.bytes.get(self.at) != Some(&b'"') {
                return self.expected("object key string");
            }
            let key = self.string()?;
            self.skip_space();
            if self.bytes.get(self.at) != Some(&b':') {
                return self.expected("colon");
            }
            self.at += 1;
            let item = self.value()?;
            table.raw_set(self.lua.create_string(&key)?, item)?;
            self.skip_space();
            match self.bytes.get(self.at) {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    self.depth -= 1;
                    return Ok(Value::Table(table));
                }
                _ => return self.expected("comma or object end"),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// cmsgpack

/// The most values a library function returns at once (`cmsgpack.unpack` of many objects,
/// `struct.unpack` of a long format): every value returned from Rust takes a slot of mlua's
/// reference stack (about 8,000) until Lua has it, so more would abort the process. Lua 5.1's
/// own C functions stop at about the same count ("too many results to unpack").
const RESULTS_MAX: usize = 4_000;

/// lua-cmsgpack encodes tables nested at most this deep; deeper ones are `nil`.
const MSGPACK_NESTING_MAX: usize = 16;
/// How deep `unpack` follows nested arrays and maps before refusing the input.
const MSGPACK_UNPACK_DEPTH_MAX: usize = 1_000;

fn cmsgpack(lua: &Lua) -> mlua::Result<Table> {
    let table = lua.create_table()?;
    table.raw_set(
        "pack",
        lua.create_function(|_, (values, count): (Table, i64)| {
            if count < 1 {
                return error("MessagePack pack needs input.");
            }
            let mut out = Vec::new();
            for index in 1..=count {
                msgpack_encode(&values.raw_get(index)?, 0, &mut out)?;
            }
            Ok(mlua::BString::from(out))
        })?,
    )?;
    table.raw_set(
        "unpack",
        lua.create_function(|lua, text: mlua::String| msgpack_unpack(lua, &text.as_bytes(), 0, 0))?,
    )?;
    table.raw_set(
        "unpack_one",
        lua.create_function(|lua, (text, offset): (mlua::String, Option<i64>)| {
            msgpack_unpack(lua, &text.as_bytes(), 1, offset.unwrap_or(0))
        })?,
    )?;
    table.raw_set(
        "unpack_limit",
        lua.create_function(
            |lua, (text, limit, offset): (mlua::String, i64, Option<i64>)| {
                msgpack_unpack(lua, &text.as_bytes(), limit, offset.unwrap_or(0))
            },
        )?,
    )?;
    table.raw_set("_NAME", "cmsgpack")?;
    table.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    table.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    table.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(table)
}

fn msgpack_encode(value: &Value, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match value {
        Value::Boolean(flag) => out.push(if *flag { 0xc3 } else { 0xc2 }),
        Value::Integer(integer) => msgpack_integer(*integer, out),
        Value::Number(number) => {
            let number = *number;
            // lua-cmsgpack's IS_INT64_EQUIVALENT: finite and equal to its int64 cast.
            // 2^63 is the first double out of the int64 range; -2^63 is in it.
            const LIMIT: f64 = 9_223_372_036_854_775_808.0;
            if (-LIMIT..LIMIT).contains(&number) && (number as i64) as f64 == number {
                msgpack_integer(number as i64, out);
            } else if (number as f32) as f64 == number {
                out.push(0xca);
                out.extend_from_slice(&(number as f32).to_be_bytes());
            } else {
                out.push(0xcb);
                out.extend_from_slice(&number.to_be_bytes());
            }
        }
        Value::String(text) => {
            let bytes = text.as_bytes();
            let length = bytes.len();
            if length < 32 {
                out.push(0xa0 | length as u8);
            } else if length <= 0xff {
                out.extend_from_slice(&[0xd9, length as u8]);
            } else if length <= 0xffff {
                out.push(0xda);
                out.extend_from_slice(&(length as u16).to_be_bytes());
            } else {
                out.push(0xdb);
                out.extend_from_slice(&(length as u32).to_be_bytes());
            }
            out.extend_from_slice(&bytes);
        }
        Value::Table(table) if level < MSGPACK_NESTING_MAX => {
            if msgpack_is_array(table)? {
                let length = table.raw_len();
                msgpack_header(length, 0x90, 0xdc, 0xdd, out);
                for index in 1..=length {
                    let item: Value = table.raw_get(index)?;
                    msgpack_encode(&item, level + 1, out)?;
                }
            } else {
                // Two passes (count, then encode) rather than collecting the pairs: every
                // value held from Rust takes a slot of mlua's reference stack (about 8,000),
                // and a map of 100,000 fields would exhaust it.
                let mut count = 0usize;
                for pair in table.clone().pairs::<Value, Value>() {
                    pair?;
                    count += 1;
                }
                msgpack_header(count, 0x80, 0xde, 0xdf, out);
                for pair in table.clone().pairs::<Value, Value>() {
                    let (key, item) = pair?;
                    msgpack_encode(&key, level + 1, out)?;
                    msgpack_encode(&item, level + 1, out)?;
                }
            }
        }
        _ => out.push(0xc0),
    }
    Ok(())
}

fn msgpack_header(length: usize, fix: u8, sixteen: u8, thirty_two: u8, out: &mut Vec<u8>) {
    if length <= 15 {
        out.push(fix | length as u8);
    } else if length <= 0xffff {
        out.push(sixteen);
        out.extend_from_slice(&(length as u16).to_be_bytes());
    } else {
        out.push(thirty_two);
        out.extend_from_slice(&(length as u32).to_be_bytes());
    }
}

/// lua-cmsgpack's `table_is_an_array`: every key a positive integer, and no hole.
fn msgpack_is_array(table: &Table) -> mlua::Result<bool> {
    let (mut max, mut count) = (0f64, 0f64);
    for pair in table.clone().pairs::<Value, Value>() {
        let (key, _) = pair?;
        let index = match key {
            Value::Integer(index) => index as f64,
            Value::Number(index) => index,
            _ => return Ok(false),
        };
        if !(index > 0.0 && index.floor() == index && index <= i32::MAX as f64) {
            return Ok(false);
        }
        max = f64::max(max, index);
        count += 1.0;
    }
    Ok(max == count)
}

fn msgpack_integer(integer: i64, out: &mut Vec<u8>) {
    if integer >= 0 {
        let value = integer as u64;
        if value <= 127 {
            out.push(value as u8);
        } else if value <= 0xff {
            out.extend_from_slice(&[0xcc, value as u8]);
        } else if value <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(value as u16).to_be_bytes());
        } else if value <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(value as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&value.to_be_bytes());
        }
    } else if integer >= -32 {
        out.push(integer as i8 as u8);
    } else if integer >= -128 {
        out.extend_from_slice(&[0xd0, integer as i8 as u8]);
    } else if integer >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(integer as i16).to_be_bytes());
    } else if integer >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(integer as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&integer.to_be_bytes());
    }
}

/// lua-cmsgpack's `mp_unpack_full`: up to `limit` objects from `offset` (0 and 0: all of
/// them, and no offset returned); with a limit or offset, the offset after the last object
/// (-1 at the end) comes first.
fn msgpack_unpack(lua: &Lua, bytes: &[u8], limit: i64, offset: i64) -> mlua::Result<MultiValue> {
    if offset < 0 || limit < 0 {
        return error(format!(
            "Invalid request to unpack with offset of {offset} and limit of {limit}."
        ));
    }
    if offset as u64 > bytes.len() as u64 {
        return error(format!(
            "Start offset {offset} greater than input length {}.",
            bytes.len()
        ));
    }
    let decode_all = limit == 0 && offset == 0;
    let limit = if decode_all { i64::MAX } else { limit };
    let mut cursor = MsgpackCursor {
        bytes,
        at: offset as usize,
    };
    let mut values = Vec::new();
    while cursor.at < bytes.len() && (values.len() as i64) < limit {
        if values.len() >= RESULTS_MAX {
            return error("too many results to unpack");
        }
        values.push(cursor.value(lua, 0)?);
    }
    if !decode_all {
        let next = if cursor.at == bytes.len() {
            -1
        } else {
            cursor.at as i64
        };
        values.insert(0, Value::Number(next as f64));
    }
    Ok(MultiValue::from_iter(values))
}

struct MsgpackCursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl MsgpackCursor<'_> {
    fn take(&mut self, count: usize) -> mlua::Result<&[u8]> {
        match self.bytes.get(self.at..self.at.saturating_add(count)) {
            Some(slice) if self.at.checked_add(count).is_some() => {
                self.at += count;
                Ok(slice)
            }
            _ => error("Missing bytes in input."),
        }
    }

    fn unsigned(&mut self, width: usize) -> mlua::Result<u64> {
        let bytes = self.take(width)?;
        Ok(bytes
            .iter()
            .fold(0u64, |value, byte| value << 8 | u64::from(*byte)))
    }

    fn signed(&mut self, width: usize) -> mlua::Result<i64> {
        let value = self.unsigned(width)?;
        let shift = 64 - 8 * width as u32;
        Ok(((value << shift) as i64) >> shift)
    }

    fn value(&mut self, lua: &Lua, depth: usize) -> mlua::Result<Value> {
        if depth > MSGPACK_UNPACK_DEPTH_MAX {
            return error("Bad data format in input.");
        }
        let tag = self.take(1)?[0];
        Ok(match tag {
            0x00..=0x7f => Value::Number(f64::from(tag)),
            0x80..=0x8f => self.map(lua, usize::from(tag & 0x0f), depth)?,
            0x90..=0x9f => self.array(lua, usize::from(tag & 0x0f), depth)?,
            0xa0..=0xbf => self.string(lua, usize::from(tag & 0x1f))?,
            0xc0 => Value::Nil,
            0xc2 => Value::Boolean(false),
            0xc3 => Value::Boolean(true),
            0xc4 | 0xd9 => {
                let length = self.unsigned(1)? as usize;
                self.string(lua, length)?
            }
            0xc5 | 0xda => {
                let length = self.unsigned(2)? as usize;
                self.string(lua, length)?
            }
            0xc6 | 0xdb => {
                let length = self.unsigned(4)? as usize;
                self.string(lua, length)?
            }
            0xca => {
                let bits = self.unsigned(4)? as u32;
                Value::Number(f64::from(f32::from_bits(bits)))
            }
            0xcb => Value::Number(f64::from_bits(self.unsigned(8)?)),
            0xcc => Value::Number(self.unsigned(1)? as f64),
            0xcd => Value::Number(self.unsigned(2)? as f64),
            0xce => Value::Number(self.unsigned(4)? as f64),
            0xcf => Value::Number(self.unsigned(8)? as f64),
            0xd0 => Value::Number(self.signed(1)? as f64),
            0xd1 => Value::Number(self.signed(2)? as f64),
            0xd2 => Value::Number(self.signed(4)? as f64),
            0xd3 => Value::Number(self.signed(8)? as f64),
            0xdc => {
                let length = self.unsigned(2)? as usize;
                self.array(lua, length, depth)?
            }
            0xdd => {
                let length = self.unsigned(4)? as usize;
                self.array(lua, length, depth)?
            }
            0xde => {
                let length = self.unsigned(2)? as usize;
                self.map(lua, length, depth)?
            }
            0xdf => {
                let length = self.unsigned(4)? as usize;
                self.map(lua, length, depth)?
            }
            0xe0..=0xff => Value::Number(f64::from(tag as i8)),
            _ => return error("Bad data format in input."),
        })
    }

    fn string(&mut self, lua: &Lua, length: usize) -> mlua::Result<Value> {
        let bytes = self.take(length)?;
        Ok(Value::String(lua.create_string(bytes)?))
    }

    /// Each element needs at least one byte: a length past the input is refused before a
    /// table of that size is built.
    fn check_length(&self, length: usize) -> mlua::Result<()> {
        if length > self.bytes.len() - self.at {
            return error("Missing bytes in input.");
        }
        Ok(())
    }

    fn array(&mut self, lua: &Lua, length: usize, depth: usize) -> mlua::Result<Value> {
        self.check_length(length)?;
        let table = lua.create_table_with_capacity(length, 0)?;
        for index in 1..=length {
            let item = self.value(lua, depth + 1)?;
            table.raw_set(index, item)?;
        }
        Ok(Value::Table(table))
    }

    fn map(&mut self, lua: &Lua, length: usize, depth: usize) -> mlua::Result<Value> {
        self.check_length(length.saturating_mul(2))?;
        let table = lua.create_table_with_capacity(0, length)?;
        for _ in 0..length {
            let key = self.value(lua, depth + 1)?;
            let item = self.value(lua, depth + 1)?;
            match &key {
                Value::Nil => return error("Bad data format in input."),
                Value::Number(number) if number.is_nan() => {
                    return error("Bad data format in input.")
                }
                _ => table.raw_set(key, item)?,
            }
        }
        Ok(Value::Table(table))
    }
}

// ---------------------------------------------------------------------------------------
// bit

/// LuaBitOp's conversion of a number to a 32-bit integer: rounded to the nearest integer
/// (ties to even), modulo 2^32, as a signed value.
fn to_bit(value: &Value, position: usize, name: &str) -> mlua::Result<i32> {
    let Some(number) = number(value) else {
        return error(format!(
            "bad argument #{position} to '{name}' (number expected, got {})",
            if matches!(value, Value::Nil) {
                "no value"
            } else {
                value.type_name()
            }
        ));
    };
    if !number.is_finite() {
        return Ok(0);
    }
    let rounded = number.round_ties_even() % 4_294_967_296.0;
    Ok(rounded as i64 as u32 as i32)
}

fn bit(lua: &Lua) -> mlua::Result<Table> {
    let table = lua.create_table()?;
    table.raw_set(
        "tobit",
        lua.create_function(|_, value: Value| Ok(f64::from(to_bit(&value, 1, "tobit")?)))?,
    )?;
    table.raw_set(
        "bnot",
        lua.create_function(|_, value: Value| Ok(f64::from(!to_bit(&value, 1, "bnot")?)))?,
    )?;
    table.raw_set(
        "bswap",
        lua.create_function(|_, value: Value| {
            Ok(f64::from(to_bit(&value, 1, "bswap")?.swap_bytes()))
        })?,
    )?;
    for (name, operation) in [
        ("band", (|a, b| a & b) as fn(i32, i32) -> i32),
        ("bor", |a, b| a | b),
        ("bxor", |a, b| a ^ b),
    ] {
        table.raw_set(
            name,
            lua.create_function(move |_, (values, count): (Table, i64)| {
                let mut result = to_bit(&values.raw_get(1)?, 1, name)?;
                for index in 2..=count {
                    result = operation(
                        result,
                        to_bit(&values.raw_get(index)?, index as usize, name)?,
                    );
                }
                Ok(f64::from(result))
            })?,
        )?;
    }
    for (name, operation) in [
        (
            "lshift",
            (|a: i32, n: u32| ((a as u32) << n) as i32) as fn(i32, u32) -> i32,
        ),
        ("rshift", |a, n| ((a as u32) >> n) as i32),
        ("arshift", |a, n| a >> n),
        ("rol", |a, n| (a as u32).rotate_left(n) as i32),
        ("ror", |a, n| (a as u32).rotate_right(n) as i32),
    ] {
        table.raw_set(
            name,
            lua.create_function(move |_, (value, count): (Value, Value)| {
                let value = to_bit(&value, 1, name)?;
                let count = to_bit(&count, 2, name)? as u32 & 31;
                Ok(f64::from(operation(value, count)))
            })?,
        )?;
    }
    table.raw_set(
        "tohex",
        lua.create_function(|_, (value, digits): (Value, Value)| {
            let mut bits = to_bit(&value, 1, "tohex")? as u32;
            let mut count = match digits {
                Value::Nil => 8,
                other => to_bit(&other, 2, "tohex")?,
            };
            let mut alphabet = b"0123456789abcdef";
            // Redis's fix: the most negative count would stay negative when negated.
            if count == i32::MIN {
                count = i32::MIN + 1;
            }
            if count < 0 {
                count = -count;
                alphabet = b"0123456789ABCDEF";
            }
            let count = count.min(8) as usize;
            let mut text = vec![b'0'; count];
            for slot in text.iter_mut().rev() {
                *slot = alphabet[(bits & 15) as usize];
                bits >>= 4;
            }
            Ok(mlua::BString::from(text))
        })?,
    )?;
    Ok(table)
}

// ---------------------------------------------------------------------------------------
// struct

/// One item of a `struct` format.
enum Item {
    /// An integer of this many bytes, signed or not.
    Integer {
        size: usize,
        signed: bool,
    },
    Float,
    Double,
    /// A string of a fixed length (`cN`; `c0`: the length is the previous number).
    Chars(usize),
    /// A zero-terminated string.
    Zero,
    /// A padding byte.
    Padding,
}

/// Parses `format` into items with their endianness (little-endian unless `>`).
fn struct_items(format: &[u8]) -> mlua::Result<Vec<(Item, bool)>> {
    let mut items = Vec::new();
    let mut big_endian = false;
    let mut at = 0;
    let count = |at: &mut usize, default: usize| -> mlua::Result<usize> {
        let start = *at;
        while format.get(*at).is_some_and(u8::is_ascii_digit) {
            *at += 1;
        }
        if start == *at {
            return Ok(default);
        }
        std::str::from_utf8(&format[start..*at])
            .ok()
            .and_then(|text| text.parse().ok())
            .ok_or_else(|| mlua::Error::runtime("integral size out of limits"))
    };
    while at < format.len() {
        let option = format[at];
        at += 1;
        let item = match option {
            b' ' => continue,
            b'<' | b'=' => {
                big_endian = false;
                continue;
            }
            b'>' => {
                big_endian = true;
                continue;
            }
            b'!' => return error("alignment ('!') is not supported by Tessera's struct library"),
            b'b' | b'B' => Item::Integer {
                size: 1,
                signed: option == b'b',
            },
            b'h' | b'H' => Item::Integer {
                size: 2,
                signed: option == b'h',
            },
            b'l' | b'L' | b'T' => Item::Integer {
                size: 8,
                signed: option == b'l',
            },
            b'i' | b'I' => {
                let size = count(&mut at, 4)?;
                if !(1..=8).contains(&size) {
                    return error(format!("integral size {size} is larger than limit of 8"));
                }
                Item::Integer {
                    size,
                    signed: option == b'i',
                }
            }
            b'f' => Item::Float,
            b'd' => Item::Double,
            b'c' => Item::Chars(count(&mut at, 1)?),
            b's' => Item::Zero,
            b'x' => Item::Padding,
            other => return error(format!("invalid format option '{}'", other as char)),
        };
        items.push((item, big_endian));
    }
    Ok(items)
}

fn structure(lua: &Lua) -> mlua::Result<Table> {
    let table = lua.create_table()?;
    table.raw_set(
        "pack",
        lua.create_function(|_, (values, count): (Table, i64)| {
            let format = match values.raw_get::<Value>(1)? {
                Value::String(format) => format,
                other => {
                    return error(format!(
                        "bad argument #1 to 'pack' (string expected, got {})",
                        other.type_name()
                    ))
                }
            };
            let items = struct_items(&format.as_bytes())?;
            let mut values =
                (2..=count).map(|index| values.raw_get::<Value>(index).unwrap_or(Value::Nil));
            let mut out = Vec::new();
            for (position, (item, big_endian)) in items.iter().enumerate() {
                let mut next = || values.next().unwrap_or(Value::Nil);
                let argument = position + 2;
                match item {
                    Item::Padding => out.push(0),
                    Item::Integer { size, .. } => {
                        let value = next();
                        let Some(number) = number(&value) else {
                            return error(format!(
                                "bad argument #{argument} to 'pack' (number expected, got {})",
                                value.type_name()
                            ));
                        };
                        let bytes = (number as i64).to_le_bytes();
                        let mut bytes = bytes[..*size].to_vec();
                        if *big_endian {
                            bytes.reverse();
                        }
                        out.extend_from_slice(&bytes);
                    }
                    Item::Float | Item::Double => {
                        let value = next();
                        let Some(number) = number(&value) else {
                            return error(format!(
                                "bad argument #{argument} to 'pack' (number expected, got {})",
                                value.type_name()
                            ));
                        };
                        let mut bytes = match item {
                            Item::Float => (number as f32).to_le_bytes().to_vec(),
                            _ => number.to_le_bytes().to_vec(),
                        };
                        if *big_endian {
                            bytes.reverse();
                        }
                        out.extend_from_slice(&bytes);
                    }
                    Item::Chars(_) | Item::Zero => {
                        let value = next();
                        let Value::String(text) = &value else {
                            return error(format!(
                                "bad argument #{argument} to 'pack' (string expected, got {})",
                                value.type_name()
                            ));
                        };
                        let bytes = text.as_bytes();
                        match item {
                            Item::Chars(length) => {
                                let length = if *length == 0 { bytes.len() } else { *length };
                                if bytes.len() < length {
                                    return error(format!(
                                        "bad argument #{argument} to 'pack' (string too short)"
                                    ));
                                }
                                out.extend_from_slice(&bytes[..length]);
                            }
                            _ => {
                                out.extend_from_slice(&bytes);
                                out.push(0);
                            }
                        }
                    }
                }
            }

            Ok(mlua::BString::from(out))
        })?,
    )?;
    table.raw_set(
        "unpack",
        lua.create_function(
            |lua, (format, data, start): (mlua::String, mlua::String, Option<i64>)| {
                let items = struct_items(&format.as_bytes())?;
                let bytes = data.as_bytes();
                let mut at = match start {
                    Some(start) if start >= 1 => (start - 1) as usize,
                    Some(_) => {
                        return error("bad argument #3 to 'unpack' (offset must be 1 or greater)")
                    }
                    None => 0,
                };
                let mut results = Vec::new();
                let mut previous = 0f64;
                let short = || error::<()>("bad argument #2 to 'unpack' (data string too short)");
                for (item, big_endian) in &items {
                    let width = match item {
                        Item::Padding => 1,
                        Item::Integer { size, .. } => *size,
                        Item::Float => 4,
                        Item::Double => 8,
                        Item::Chars(0) => previous.max(0.0) as usize,
                        Item::Chars(length) => *length,
                        Item::Zero => match bytes
                            .get(at..)
                            .and_then(|rest| rest.iter().position(|byte| *byte == 0))
                        {
                            Some(end) => end + 1,
                            None => {
                                return error(
                                    "bad argument #2 to 'unpack' (unfinished string in data)",
                                )
                            }
                        },
                    };
                    let Some(slice) = bytes.get(at..at.saturating_add(width)) else {
                        short()?;
                        unreachable!("short() is an error");
                    };
                    let mut ordered = slice.to_vec();
                    if *big_endian
                        && matches!(item, Item::Integer { .. } | Item::Float | Item::Double)
                    {
                        ordered.reverse();
                    }
                    at += width;
                    match item {
                        Item::Padding => {}
                        Item::Integer { size, signed } => {
                            let mut raw = 0u64;
                            for (index, byte) in ordered.iter().enumerate() {
                                raw |= u64::from(*byte) << (8 * index);
                            }
                            let value = if *signed && *size < 8 {
                                let shift = 64 - 8 * *size as u32;
                                (((raw << shift) as i64) >> shift) as f64
                            } else if *signed {
                                raw as i64 as f64
                            } else {
                                raw as f64
                            };
                            previous = value;
                            results.push(Value::Number(value));
                        }
                        Item::Float => {
                            let value = f32::from_le_bytes(ordered.try_into().unwrap_or([0; 4]));
                            results.push(Value::Number(f64::from(value)));
                        }
                        Item::Double => {
                            let value = f64::from_le_bytes(ordered.try_into().unwrap_or([0; 8]));
                            results.push(Value::Number(value));
                        }
                        Item::Chars(_) => results.push(Value::String(lua.create_string(slice)?)),
                        Item::Zero => {
                            results.push(Value::String(lua.create_string(&slice[..width - 1])?))
                        }
                    }
                }
                results.push(Value::Number((at + 1) as f64));
                Ok(MultiValue::from_iter(results))
            },
        )?,
    )?;
    table.raw_set(
        "size",
        lua.create_function(|_, format: mlua::String| {
            let mut size = 0usize;
            for (item, _) in struct_items(&format.as_bytes())? {
                size += match item {
                    Item::Padding => 1,
                    Item::Integer { size, .. } => size,
                    Item::Float => 4,
                    Item::Double => 8,
                    Item::Chars(length) if length > 0 => length,
                    Item::Chars(_) | Item::Zero => {
                        return error("options 'c0' - 's' have undefined sizes")
                    }
                };
            }
            Ok(size as f64)
        })?,
    )?;
    Ok(table)
}
