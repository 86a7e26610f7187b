//! The Lua state a script runs in, as Redis 7.0 builds it: the base, table, string and math
//! libraries; no `os`, `io`, `debug`, `package`, `dofile`, `loadfile`, `load` or `print`;
//! `loadstring` refuses precompiled bytecode; globals are read-only and reading an unknown
//! global is an error; `math.random` draws from a generator seeded by the caller; `KEYS`,
//! `ARGV` and the `redis` library. Every run gets a fresh state, so nothing a script does
//! reaches another.
//!
//! Errors: an error a script raises becomes Redis's error table (`{err = text}`; a string
//! error gets the code `ERR`), located at the script's line where it was raised, and the reply
//! is `<text> script: <sha>, on @user_script:<line>.`.

use crate::call::Context;
use crate::convert::{field_table, lua_to_reply, one_line, reply_to_lua};
use crate::{Killer, Script, MEMORY_BYTES_MAX};
use kv::Scratch;
use mlua::{
    ffi, ChunkMode, Function, HookTriggers, IntoLuaMulti, Lua, LuaOptions, MultiValue, StdLib,
    Table, VmState,
};
use resp::Value;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// How often (in Lua instructions) the hook looks at the killer.
const HOOK_INSTRUCTIONS: u32 = 1_000;

/// The chunk name of a script: Lua prints it as `user_script` in messages.
const CHUNK_NAME: &str = "@user_script";

/// Why a script ended without a value.
#[derive(Debug)]
pub enum Failure {
    /// The body does not compile: Lua's message.
    Compile(String),
    /// It raised an error: the reply's text.
    Raised(String),
    /// It ran out of memory.
    Memory,
}

/// The bootstrap: wraps `pcall` and `xpcall` so that a killed script cannot catch its kill
/// and so that an error `redis.call` raised is caught as Redis's table, protects the globals,
/// and runs the script under the error handler. Arguments: the script, the killed probe, the
/// conversion of a caught error, the error handler.
const BOOTSTRAP: &str = r#"
local script, killed, caught, handler = ...
local G = _G
local error, select, unpack, tostring, rawget = error, select, unpack, tostring, rawget
local raw_pcall, raw_xpcall, setmetatable = pcall, xpcall, setmetatable
local raw_rawset, raw_setmetatable, raw_getfenv, raw_setfenv = rawset, setmetatable, getfenv, setfenv
local raw_loadstring = loadstring
local function pack(...) return { n = select('#', ...), ... } end
local function checked(results)
  if killed() then error('script killed', 0) end
  if not results[1] then results[2] = caught(results[2]) end
  return unpack(results, 1, results.n)
end
local function deny() error('Attempt to modify a readonly table', 2) end
-- Read-only tables, as Redis 7.0 makes the globals and its libraries: each is an empty proxy
-- reading through to the real table; writing, rawset and setmetatable on it are refused, and
-- its metatable (getmetatable) is read-only too.
local protected = raw_setmetatable({}, { __mode = 'k' })
local function frozen(source)
  local view = raw_setmetatable({}, { __index = source, __newindex = deny, __metatable = false })
  protected[view] = true
  return view
end
local function protect(real, index)
  local meta = { __index = index or real, __newindex = deny }
  meta.__metatable = frozen(meta)
  local proxy = raw_setmetatable({}, meta)
  protected[proxy] = true
  return proxy
end
raw_rawset(G, 'pcall', function(...) return checked(pack(raw_pcall(...))) end)
raw_rawset(G, 'xpcall', function(f, h)
  return checked(pack(raw_xpcall(f, function(e) return h(caught(e)) end)))
end)
for _, name in ipairs({ 'redis', 'cjson', 'cmsgpack', 'bit', 'struct', 'string', 'math', 'table' }) do
  raw_rawset(G, name, protect(rawget(G, name)))
end
local env = protect(G, function(_, name)
  local value = rawget(G, name)
  if value == nil then
    error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
  end
  return value
end)
raw_rawset(G, '_G', env)
raw_rawset(G, 'rawset', function(t, k, v)
  if protected[t] or t == G then deny() end
  return raw_rawset(t, k, v)
end)
raw_rawset(G, 'setmetatable', function(t, m)
  if protected[t] or t == G then deny() end
  return raw_setmetatable(t, m)
end)
raw_rawset(G, 'getfenv', function(...)
  local found = raw_getfenv(...)
  if found == G then return env end
  return found
end)
raw_rawset(G, 'setfenv', function(f, t)
  if f == 0 then deny() end
  return raw_setfenv(f, t)
end)
raw_rawset(G, 'loadstring', function(...)
  local loaded, message = raw_loadstring(...)
  if loaded then raw_setfenv(loaded, env) end
  return loaded, message
end)
raw_setmetatable(G, { __newindex = deny, __metatable = false })
raw_setfenv(script, env)
return raw_xpcall(script, handler)
"#;

/// The error `redis.call` raises for an error reply (its text): a Rust function cannot raise
/// a Lua table, so the handler and `pcall` turn it into Redis's `{err = text}`.
#[derive(Debug)]
struct Raised(String);

impl std::fmt::Display for Raised {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for Raised {}

/// The `Raised` inside an error, if `redis.call` raised it.
fn raised_by_call(error: &mlua::Error) -> Option<&Raised> {
    match error {
        mlua::Error::CallbackError { cause, .. } => raised_by_call(cause),
        mlua::Error::ExternalError(inner) => inner.downcast_ref::<Raised>(),
        _ => None,
    }
}

/// A caught error as the script sees it: `redis.call`'s as Redis's table, others unchanged.
fn caught(lua: &Lua, error: mlua::Value) -> mlua::Result<mlua::Value> {
    if let mlua::Value::Error(inner) = &error {
        if let Some(Raised(text)) = raised_by_call(inner) {
            return field_table(lua, "err", text.as_bytes());
        }
    }
    Ok(error)
}

/// Runs the script; its reply, or why it failed.
pub fn run(
    script: &Script,
    sha: &str,
    scratch: &mut Scratch,
    killer: &Killer,
    log: &mut Vec<String>,
    undeclared: &mut Vec<Vec<u8>>,
) -> Result<Value, Failure> {
    let lua = Lua::new_with(
        StdLib::TABLE | StdLib::STRING | StdLib::MATH,
        LuaOptions::default(),
    )
    .map_err(|error| Failure::Raised(one_line(&format!("ERR {error}"))))?;
    let resp3 = Rc::new(Cell::new(false));
    let prepared = prepare(&lua, script, &resp3);
    let hooked = killer.clone();
    let hook = lua.set_hook(
        HookTriggers::new().every_nth_instruction(HOOK_INSTRUCTIONS),
        move |_, _| match hooked.killed() {
            Some(_) => Err(mlua::Error::runtime("script killed")),
            None => Ok(VmState::Continue),
        },
    );
    let function = prepared
        .and(hook)
        .map_err(|error| Failure::Raised(one_line(&format!("ERR {error}"))))
        .and_then(|()| compile(&lua, script.body))?;
    let logs = Rc::new(RefCell::new(Vec::new()));
    let context = RefCell::new(Context {
        scratch,
        now_ms: script.now_ms,
        read_only: script.read_only,
        killer,
        undeclared: Vec::new(),
    });
    let outcome = lua.scope(|scope| {
        let redis: Table = lua.globals().raw_get("redis")?;
        let call = scope.create_function(|lua, (arguments, count): (Table, i64)| {
            let (ok, reply) = raw_call(lua, &context, &arguments, count, resp3.get())?;
            match (ok, &reply) {
                (false, mlua::Value::Table(table)) => {
                    let text: String = table.raw_get("err")?;
                    Err(mlua::Error::external(Raised(text)))
                }
                _ => Ok(reply),
            }
        })?;
        let pcall = scope.create_function(|lua, (arguments, count): (Table, i64)| {
            Ok(raw_call(lua, &context, &arguments, count, resp3.get())?.1)
        })?;
        lua.set_named_registry_value(CALL_KEY, call)?;
        lua.set_named_registry_value(PCALL_KEY, pcall)?;
        // SAFETY: the trampolines touch only the Lua stack they are given, within the slots
        // a C function is guaranteed (`LUA_MINSTACK`), and hold nothing that needs dropping
        // when a Lua error unwinds through them.
        redis.raw_set("call", unsafe { lua.create_c_function(call_trampoline)? })?;
        redis.raw_set("pcall", unsafe { lua.create_c_function(pcall_trampoline)? })?;
        let probe = killer.clone();
        let killed = scope.create_function(move |_, ()| Ok(probe.killed().is_some()))?;
        let handler = lua.create_function(handle_error)?;
        let caught = lua.create_function(caught)?;
        install_log(&lua, &logs)?;
        install_trampolines(&lua)?;
        let bootstrap = lua
            .load(BOOTSTRAP)
            .set_name("=bootstrap")
            .set_mode(ChunkMode::Text)
            .into_function()?;
        bootstrap.call::<MultiValue>((function, killed, caught, handler))
    });
    log.extend(logs.borrow_mut().drain(..));
    undeclared.append(&mut context.into_inner().undeclared);
    finish(outcome, sha, resp3.get())
}

/// The script's first result, or its error table's text.
fn finish(outcome: mlua::Result<MultiValue>, sha: &str, resp3: bool) -> Result<Value, Failure> {
    let results = match outcome {
        Ok(results) => results,
        Err(mlua::Error::MemoryError(_)) => return Err(Failure::Memory),
        Err(error) => return Err(Failure::Raised(one_line(&format!("ERR {error}")))),
    };
    let mut results = results.into_iter();
    let ok = matches!(results.next(), Some(mlua::Value::Boolean(true)));
    let first = results.next().unwrap_or(mlua::Value::Nil);
    if ok {
        return Ok(lua_to_reply(&first, resp3));
    }
    match &first {
        // Lua 5.1 calls no handler for a memory error: its message arrives as it is.
        mlua::Value::String(text) if text.as_bytes().as_ref() == b"not enough memory" => {
            Err(Failure::Memory)
        }
        mlua::Value::Table(table) if is_memory_error(table) => Err(Failure::Memory),
        _ => Err(Failure::Raised(raised_text(&first, sha))),
    }
}

fn is_memory_error(table: &Table) -> bool {
    matches!(
        table.raw_get::<mlua::Value>("cause"),
        Ok(mlua::Value::Error(inner)) if matches!(*inner, mlua::Error::MemoryError(_))
    )
}

/// `<message> script: <sha>, on <source>:<line>.` from the handler's error table.
fn raised_text(error: &mlua::Value, sha: &str) -> String {
    let mlua::Value::Table(table) = error else {
        return format!("ERR {} script: {sha}", describe(error));
    };
    let message = match table.raw_get::<mlua::Value>("err") {
        Ok(mlua::Value::String(text)) => text.to_string_lossy(),
        _ => "ERR unknown error".to_string(),
    };
    let source = table.raw_get::<Option<String>>("source").ok().flatten();
    let line = table.raw_get::<Option<i64>>("line").ok().flatten();
    let text = match (source, line) {
        (Some(source), Some(line)) => format!("{message} script: {sha}, on {source}:{line}."),
        _ => format!("{message} script: {sha}"),
    };
    one_line(&text)
}

fn describe(value: &mlua::Value) -> String {
    match value {
        mlua::Value::String(text) => text.to_string_lossy(),
        mlua::Value::Error(error) => error.to_string(),
        mlua::Value::Nil => "nil".to_string(),
        other => other.type_name().to_string(),
    }
}

/// The error handler (`xpcall`'s): makes the error Redis's table and records where in the
/// script it was raised.
fn handle_error(lua: &Lua, error: mlua::Value) -> mlua::Result<Table> {
    let table = match &error {
        mlua::Value::Table(table)
            if matches!(
                table.raw_get::<mlua::Value>("err"),
                Ok(mlua::Value::String(_))
            ) =>
        {
            table.clone()
        }
        mlua::Value::String(text) => {
            let mut message = b"ERR ".to_vec();
            message.extend_from_slice(&text.as_bytes());
            error_table(lua, &message)?
        }
        mlua::Value::Error(inner) if raised_by_call(inner).is_some() => {
            let Some(Raised(text)) = raised_by_call(inner) else {
                unreachable!("matched just above")
            };
            error_table(lua, text.as_bytes())?
        }
        mlua::Value::Error(inner) => {
            let table = error_table(lua, format!("ERR {}", message_of(inner)).as_bytes())?;
            table.raw_set("cause", error.clone())?;
            table
        }
        other => error_table(lua, format!("ERR {}", describe(other)).as_bytes())?,
    };
    if let Some((source, line)) = script_frame(lua) {
        table.raw_set("source", source)?;
        table.raw_set("line", line)?;
    }
    Ok(table)
}

/// An error's message as Redis's C libraries raise theirs: the message alone, without mlua's
/// `runtime error:` prefix and stack traceback.
fn message_of(error: &mlua::Error) -> String {
    match error {
        mlua::Error::CallbackError { cause, .. } => message_of(cause),
        mlua::Error::RuntimeError(message) => message.clone(),
        mlua::Error::BadArgument { to, pos, cause, .. } => format!(
            "bad argument #{pos} to '{}' ({})",
            to.as_deref().unwrap_or("?"),
            message_of(cause)
        ),
        other => other.to_string(),
    }
}

fn error_table(lua: &Lua, message: &[u8]) -> mlua::Result<Table> {
    match field_table(lua, "err", message)? {
        mlua::Value::Table(table) => Ok(table),
        _ => Err(mlua::Error::runtime("an error table is a table")),
    }
}

/// The innermost frame of the script itself: its source and current line.
fn script_frame(lua: &Lua) -> Option<(String, i64)> {
    for level in 0..64 {
        let frame = lua.inspect_stack(level, |debug| {
            let source = debug.source().source.map(|source| source.into_owned());
            (source, debug.current_line())
        })?;
        if let (Some(source), Some(line)) = frame {
            if source == CHUNK_NAME {
                return Some((source, line as i64));
            }
        }
    }
    None
}

/// Where `redis.call`'s and `redis.pcall`'s Rust functions are kept (the Lua registry).
const CALL_KEY: &str = "tessera.redis.call";
const PCALL_KEY: &str = "tessera.redis.pcall";

/// `redis.call`, `redis.pcall` and the variadic library functions as Lua sees them: C
/// functions that pack their arguments
/// into one table and call the Rust function registered under `key` with `(table, count)`.
/// Rust never holds the arguments one by one (each value it holds takes a slot of mlua's
/// reference stack, about 8,000: `redis.call('rpush', k, unpack(t))` with thousands of
/// strings would abort the process), and, being C functions, they keep the script's frame
/// on the stack when a script tail-calls them (`return redis.call(…)`), so an error keeps its
/// line, as Redis's C `redis.call` does.
unsafe fn forward_packed(state: *mut ffi::lua_State, key: &std::ffi::CStr) -> std::ffi::c_int {
    let count = ffi::lua_gettop(state);
    ffi::lua_createtable(state, count, 0);
    for index in 1..=count {
        ffi::lua_pushvalue(state, index);
        ffi::lua_rawseti(state, -2, ffi::lua_Integer::from(index));
    }
    ffi::lua_getfield(state, ffi::LUA_REGISTRYINDEX, key.as_ptr());
    ffi::lua_insert(state, -2);
    ffi::lua_pushinteger(state, ffi::lua_Integer::from(count));
    ffi::lua_call(state, 2, 1);
    1
}

/// A C function per Rust function that takes its arguments packed (`forward_packed`).
macro_rules! trampoline {
    ($name:ident, $key:literal) => {
        unsafe extern "C-unwind" fn $name(state: *mut ffi::lua_State) -> std::ffi::c_int {
            forward_packed(state, $key)
        }
    };
}

trampoline!(call_trampoline, c"tessera.redis.call");
trampoline!(pcall_trampoline, c"tessera.redis.pcall");
trampoline!(log_trampoline, c"tessera.redis.log");
trampoline!(setresp_trampoline, c"tessera.redis.setresp");
trampoline!(sha1hex_trampoline, c"tessera.redis.sha1hex");
trampoline!(pack_trampoline, c"tessera.cmsgpack.pack");
trampoline!(band_trampoline, c"tessera.bit.band");
trampoline!(bor_trampoline, c"tessera.bit.bor");
trampoline!(bxor_trampoline, c"tessera.bit.bxor");
trampoline!(struct_pack_trampoline, c"tessera.struct.pack");

/// Replaces each variadic library function (a Rust function taking `(table, count)`) by its
/// C trampoline, the Rust function kept in the registry under the trampoline's key.
fn install_trampolines(lua: &Lua) -> mlua::Result<()> {
    let places: [(&str, &str, ffi::lua_CFunction); 8] = [
        ("redis", "log", log_trampoline),
        ("redis", "setresp", setresp_trampoline),
        ("redis", "sha1hex", sha1hex_trampoline),
        ("cmsgpack", "pack", pack_trampoline),
        ("bit", "band", band_trampoline),
        ("bit", "bor", bor_trampoline),
        ("bit", "bxor", bxor_trampoline),
        ("struct", "pack", struct_pack_trampoline),
    ];
    for (library, name, trampoline) in places {
        let table: Table = lua.globals().raw_get(library)?;
        let function: Function = table.raw_get(name)?;
        lua.set_named_registry_value(&format!("tessera.{library}.{name}"), function)?;
        // SAFETY: as for `redis.call` (`run`).
        table.raw_set(name, unsafe { lua.create_c_function(trampoline)? })?;
    }
    Ok(())
}

/// `redis.call`'s raw form: `(true, reply)` or `(false, error table)`.
fn raw_call(
    lua: &Lua,
    context: &RefCell<Context>,
    arguments: &Table,
    count: i64,
    resp3: bool,
) -> mlua::Result<(bool, mlua::Value)> {
    let mut words = Vec::with_capacity(count.clamp(0, 1 << 16) as usize);
    for index in 1..=count {
        match arguments.raw_get::<mlua::Value>(index)? {
            mlua::Value::String(text) => words.push(text.as_bytes().to_vec()),
            mlua::Value::Integer(number) => words.push(number.to_string().into_bytes()),
            mlua::Value::Number(number) => words.push(lua_number_text(number).into_bytes()),
            _ => {
                let reply = field_table(
                    lua,
                    "err",
                    b"ERR Lua redis lib command arguments must be strings or integers",
                )?;
                return Ok((false, reply));
            }
        }
    }
    let reply = match context.try_borrow_mut() {
        Ok(mut context) => context.call(&words),
        Err(_) => Value::Error(crate::NOT_ALLOWED_TEXT.into()),
    };
    let failed = reply.is_error();
    Ok((!failed, reply_to_lua(lua, reply, resp3)?))
}

/// A Lua number as a command argument: Lua's own `%.14g`.
fn lua_number_text(number: f64) -> String {
    if number.fract() == 0.0 && number.abs() < 1e15 {
        format!("{}", number as i64)
    } else {
        format!("{number}")
    }
}

/// Compiles `body` in a fresh state, running nothing.
pub fn compile_only(body: &[u8]) -> Result<(), Failure> {
    let lua = Lua::new_with(StdLib::NONE, LuaOptions::default())
        .map_err(|error| Failure::Compile(error.to_string()))?;
    lua.set_memory_limit(MEMORY_BYTES_MAX)
        .map_err(|error| Failure::Compile(error.to_string()))?;
    compile(&lua, body).map(|_| ())
}

fn compile(lua: &Lua, body: &[u8]) -> Result<Function, Failure> {
    lua.load(body)
        .set_name(CHUNK_NAME)
        .set_mode(ChunkMode::Text)
        .into_function()
        .map_err(|error| match error {
            mlua::Error::SyntaxError { message, .. } => Failure::Compile(message),
            mlua::Error::MemoryError(_) => Failure::Memory,
            other => Failure::Compile(other.to_string()),
        })
}

/// Everything but `redis.call`/`pcall` and the global protection (the bootstrap's).
fn prepare(lua: &Lua, script: &Script, resp3: &Rc<Cell<bool>>) -> mlua::Result<()> {
    lua.set_memory_limit(MEMORY_BYTES_MAX)?;
    let globals = lua.globals();
    for name in [
        "dofile", "loadfile", "load", "print", "module", "require", "gcinfo", "newproxy",
    ] {
        globals.raw_set(name, mlua::Value::Nil)?;
    }
    globals.raw_set("loadstring", lua.create_function(load_source)?)?;
    globals.raw_set("KEYS", string_table(lua, script.keys)?)?;
    globals.raw_set("ARGV", string_table(lua, script.arguments)?)?;
    install_random(lua, script.seed)?;
    globals.raw_set("redis", redis_library(lua, resp3)?)?;
    crate::libraries::install(lua)?;
    Ok(())
}

fn string_table(lua: &Lua, items: &[Vec<u8>]) -> mlua::Result<Table> {
    let table = lua.create_table_with_capacity(items.len(), 0)?;
    for (index, item) in items.iter().enumerate() {
        table.raw_set(index + 1, lua.create_string(item)?)?;
    }
    Ok(table)
}

/// `loadstring`, which refuses precompiled bytecode (it could break the Lua VM): `nil` and a
/// message, as Lua answers a chunk that does not compile.
fn load_source(
    lua: &Lua,
    (source, name): (mlua::String, Option<String>),
) -> mlua::Result<MultiValue> {
    let bytes = source.as_bytes().to_vec();
    if bytes.first() == Some(&0x1b) {
        return (
            mlua::Value::Nil,
            "loading precompiled bytecode is not allowed",
        )
            .into_lua_multi(lua);
    }
    let name = name.unwrap_or_else(|| String::from_utf8_lossy(&bytes).into_owned());
    match lua
        .load(bytes)
        .set_name(format!("={name}"))
        .set_mode(ChunkMode::Text)
        .into_function()
    {
        Ok(function) => mlua::Value::Function(function).into_lua_multi(lua),
        Err(mlua::Error::SyntaxError { message, .. }) => {
            (mlua::Value::Nil, message).into_lua_multi(lua)
        }
        Err(error) => Err(error),
    }
}

/// `math.random` and `math.randomseed` over a generator seeded by the caller (Lua 5.1's
/// ranges: `()` in [0, 1), `(m)` in [1, m], `(m, n)` in [m, n]).
fn install_random(lua: &Lua, seed: u64) -> mlua::Result<()> {
    let state = Rc::new(Cell::new(seed));
    let math: Table = lua.globals().raw_get("math")?;
    let drawn = state.clone();
    let random = lua.create_function(move |_, bounds: (Option<f64>, Option<f64>)| {
        let fraction = (next(&drawn) >> 11) as f64 / (1u64 << 53) as f64;
        match bounds {
            (None, None) => Ok(fraction),
            (Some(upper), None) if upper >= 1.0 => Ok((fraction * upper.floor()).floor() + 1.0),
            (Some(lower), Some(upper)) if lower <= upper => {
                Ok((fraction * (upper - lower + 1.0)).floor() + lower)
            }
            _ => Err(mlua::Error::runtime(
                "bad argument #1 to 'random' (interval is empty)",
            )),
        }
    })?;
    let seeded = state;
    let randomseed = lua.create_function(move |_, seed: f64| {
        seeded.set(seed as i64 as u64);
        Ok(())
    })?;
    math.raw_set("random", random)?;
    math.raw_set("randomseed", randomseed)?;
    Ok(())
}

/// SplitMix64: small, and every seed gives a full-period sequence.
fn next(state: &Cell<u64>) -> u64 {
    let value = state.get().wrapping_add(0x9e37_79b9_7f4a_7c15);
    state.set(value);
    let mut mixed = value;
    mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    mixed ^ (mixed >> 31)
}

/// The `redis` table but `call` and `pcall` (the bootstrap's) and `log` (`install_log`).
fn redis_library(lua: &Lua, resp3: &Rc<Cell<bool>>) -> mlua::Result<Table> {
    let redis = lua.create_table()?;
    redis.raw_set("error_reply", lua.create_function(error_reply)?)?;
    redis.raw_set(
        "status_reply",
        lua.create_function(|lua, text: mlua::String| field_table(lua, "ok", &text.as_bytes()))?,
    )?;
    redis.raw_set(
        "sha1hex",
        lua.create_function(|_, (arguments, count): (Table, i64)| {
            let text = match arguments.raw_get::<mlua::Value>(1)? {
                mlua::Value::String(text) if count == 1 => text.as_bytes().to_vec(),
                mlua::Value::Integer(number) if count == 1 => number.to_string().into_bytes(),
                mlua::Value::Number(number) if count == 1 => lua_number_text(number).into_bytes(),
                _ => return Err(mlua::Error::runtime("wrong number of arguments")),
            };
            Ok(crate::sha1_hex(&text))
        })?,
    )?;
    let protocol = resp3.clone();
    redis.raw_set(
        "setresp",
        lua.create_function(move |_, (arguments, count): (Table, i64)| {
            if count != 1 {
                return Err(mlua::Error::runtime(
                    "redis.setresp() requires one argument.",
                ));
            }
            match crate::libraries::number_of(&arguments.raw_get(1)?) {
                Some(version) if version == 2.0 || version == 3.0 => {
                    protocol.set(version == 3.0);
                    Ok(())
                }
                _ => Err(mlua::Error::runtime("RESP version must be 2 or 3.")),
            }
        })?,
    )?;
    redis.raw_set("breakpoint", lua.create_function(|_, ()| Ok(false))?)?;
    redis.raw_set("replicate_commands", lua.create_function(|_, ()| Ok(true))?)?;
    redis.raw_set("REDIS_VERSION", resp::REDIS_VERSION)?;
    redis.raw_set("REDIS_VERSION_NUM", 0x07_00_00)?;
    for (name, level) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
    ] {
        redis.raw_set(name, level)?;
    }
    Ok(redis)
}

/// `redis.log(level, message…)`: kept for the runtime's log.
fn install_log(lua: &Lua, logs: &Rc<RefCell<Vec<String>>>) -> mlua::Result<()> {
    let redis: Table = lua.globals().raw_get("redis")?;
    let logs = logs.clone();
    let log = lua.create_function(move |_, (arguments, count): (Table, i64)| {
        let level = match crate::libraries::number_of(&arguments.raw_get(1)?) {
            Some(level) if count >= 1 => level as i64,
            _ => {
                return Err(mlua::Error::runtime(
                    "First argument must be a number (log level).",
                ))
            }
        };
        if !(0..=3).contains(&level) {
            return Err(mlua::Error::runtime("Invalid debug level."));
        }
        let mut words = Vec::new();
        for index in 2..=count {
            words.push(match arguments.raw_get::<mlua::Value>(index)? {
                mlua::Value::String(text) => text.to_string_lossy(),
                other => describe(&other),
            });
        }
        let mut logs = logs.borrow_mut();
        if logs.len() < 1_000 {
            logs.push(words.join(" "));
        }
        Ok(())
    })?;
    redis.raw_set("log", log)
}

/// `redis.error_reply(text)`: `{err = "CODE message"}`; a text without a code gets `ERR`.
fn error_reply(lua: &Lua, text: mlua::String) -> mlua::Result<mlua::Value> {
    let text = text.to_string_lossy();
    let text = text.strip_prefix('-').unwrap_or(&text);
    let message = match text.split_once(' ') {
        Some((code, message)) => {
            format!(
                "{code} {}",
                message.trim_matches(|c| c == '\r' || c == '\n')
            )
        }
        None => format!("ERR {}", text.trim_matches(|c| c == '\r' || c == '\n')),
    };
    field_table(lua, "err", message.as_bytes())
}
