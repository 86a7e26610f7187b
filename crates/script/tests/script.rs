//! Scripts against a scratch store: Redis 7.0's reply conversions, error texts and sandbox.
//! Each expected reply was recorded from redis-server 7.0.15 with the same script (the texts
//! that name a script's SHA1 use this body's own).

use kv::Scratch;
use resp::Value;
use script::{run, sha1_hex, Kill, Killer, Run, Script};

const NOW_MS: u64 = 1_795_719_468_728;

fn eval_on(scratch: &mut Scratch, body: &str, keys: &[&str], arguments: &[&str]) -> Run {
    eval_with(scratch, body, keys, arguments, false, &Killer::default())
}

fn eval_with(
    scratch: &mut Scratch,
    body: &str,
    keys: &[&str],
    arguments: &[&str],
    read_only: bool,
    killer: &Killer,
) -> Run {
    let keys: Vec<Vec<u8>> = keys.iter().map(|key| key.as_bytes().to_vec()).collect();
    let arguments: Vec<Vec<u8>> = arguments.iter().map(|a| a.as_bytes().to_vec()).collect();
    run(
        &Script {
            body: body.as_bytes(),
            keys: &keys,
            arguments: &arguments,
            now_ms: NOW_MS,
            seed: 7,
            read_only,
        },
        scratch,
        killer,
    )
}

/// A script with keys `keys` declared (all absent).
fn eval(body: &str, keys: &[&str]) -> Value {
    let mut scratch = scratch_of(keys);
    eval_on(&mut scratch, body, keys, &[]).reply
}

fn scratch_of(keys: &[&str]) -> Scratch {
    let records: Vec<(Vec<u8>, Option<Vec<u8>>)> = keys
        .iter()
        .map(|key| (key.as_bytes().to_vec(), None))
        .collect();
    Scratch::new(&records).expect("empty records decode")
}

fn bulk(text: &str) -> Value {
    Value::Bulk(text.as_bytes().to_vec())
}

fn error(text: &str) -> Value {
    Value::Error(text.to_string())
}

#[test]
fn lua_values_convert_to_replies_as_redis_does() {
    assert_eq!(
        eval("return {1,2.7,'x',false,true,{err='boom'}}", &[]),
        Value::Array(vec![
            Value::Integer(1),
            Value::Integer(2),
            bulk("x"),
            Value::Null,
            Value::Integer(1),
            error("boom"),
        ])
    );
    assert_eq!(
        eval("return {1,2,nil,4}", &[]),
        Value::Array(vec![Value::Integer(1), Value::Integer(2)])
    );
    assert_eq!(eval("return 3.99", &[]), Value::Integer(3));
    assert_eq!(eval("return -3.99", &[]), Value::Integer(-3));
    assert_eq!(eval("return 1e20", &[]), Value::Integer(i64::MIN));
    assert_eq!(eval("return 0/0", &[]), Value::Integer(i64::MIN));
    assert_eq!(eval("return {err='no code'}", &[]), error("no code"));
    assert_eq!(
        eval("return {ok='fine'}", &[]),
        Value::Simple("fine".into())
    );
    assert_eq!(eval("return {err='a\\r\\nb'}", &[]), error("a  b"));
    assert_eq!(
        eval("return {1, {2, {3}}, 'a'}", &[]),
        Value::Array(vec![
            Value::Integer(1),
            Value::Array(vec![
                Value::Integer(2),
                Value::Array(vec![Value::Integer(3)])
            ]),
            bulk("a"),
        ])
    );
    assert_eq!(
        eval("return {false, 1}", &[]),
        Value::Array(vec![Value::Null, Value::Integer(1)])
    );
    assert_eq!(
        eval("return setmetatable({}, {})", &[]),
        Value::Array(vec![])
    );
    assert_eq!(eval("return", &[]), Value::Null);
    assert_eq!(
        eval("local t = {} t[1] = t return t", &[]),
        error("ERR reached lua stack limit")
    );
}

#[test]
fn replies_convert_to_lua_values_as_redis_does() {
    assert_eq!(
        eval("return tostring(redis.call('get', KEYS[1]))", &["nokey"]),
        bulk("false")
    );
    assert_eq!(
        eval("return redis.call('set', KEYS[1], 'v')['ok']", &["k"]),
        bulk("OK")
    );
    assert_eq!(
        eval("return type(redis.call('incr', KEYS[1]))", &["k"]),
        bulk("number")
    );
    assert_eq!(
        eval("return redis.call('hgetall', KEYS[1])", &["nokey"]),
        Value::Array(vec![])
    );
    assert_eq!(
        eval("return redis.pcall('nosuchcmd')['err']", &[]),
        bulk("ERR Unknown Redis command called from script")
    );
    assert_eq!(
        eval("return redis.call('ping')", &[]),
        Value::Simple("PONG".into())
    );
    assert_eq!(
        eval("return redis.call('time')", &[]),
        Value::Array(vec![bulk("1795719468"), bulk("728000")])
    );
}

#[test]
fn redis_library_helpers_answer_as_redis() {
    assert_eq!(
        eval("return redis.error_reply('MY thing')", &[]),
        error("MY thing")
    );
    assert_eq!(
        eval("return redis.error_reply('thing')", &[]),
        error("ERR thing")
    );
    assert_eq!(
        eval("return redis.error_reply('a\\r\\nb')", &[]),
        error("ERR a  b")
    );
    assert_eq!(
        eval("return redis.status_reply('FINE')", &[]),
        Value::Simple("FINE".into())
    );
    assert_eq!(
        eval("return redis.sha1hex('')", &[]),
        bulk("da39a3ee5e6b4b0d3255bfef95601890afd80709")
    );
    assert_eq!(
        sha1_hex(b"return 1"),
        "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
    );
}

fn sha(body: &str) -> String {
    sha1_hex(body.as_bytes())
}

#[test]
fn errors_carry_redis_text_and_the_script_location() {
    let body = "return redis.call('set','a')";
    assert_eq!(
        eval(body, &[]),
        error(&format!(
            "ERR Wrong number of args calling Redis command from script script: {}, on @user_script:1.",
            sha(body)
        ))
    );
    assert_eq!(
        eval("return redis.pcall('set','a')", &[]),
        error("ERR Wrong number of args calling Redis command from script")
    );
    let body = "return redis.call('nosuch')";
    assert_eq!(
        eval(body, &[]),
        error(&format!(
            "ERR Unknown Redis command called from script script: {}, on @user_script:1.",
            sha(body)
        ))
    );
    let body = "error('x')";
    assert_eq!(
        eval(body, &[]),
        error(&format!(
            "ERR user_script:1: x script: {}, on @user_script:1.",
            sha(body)
        ))
    );
    let body = "error({err='TABLE err'})";
    assert_eq!(
        eval(body, &[]),
        error(&format!(
            "TABLE err script: {}, on @user_script:1.",
            sha(body)
        ))
    );
    assert_eq!(
        eval("syntax error here", &[]),
        error(
            "ERR Error compiling script (new function): user_script:1: '=' expected near 'error'"
        )
    );
    let body = "return redis.call('eval', 'return 1', 0)";
    assert_eq!(
        eval(body, &[]),
        error(&format!(
            "ERR This Redis command is not allowed from script script: {}, on @user_script:1.",
            sha(body)
        ))
    );
    let body = "local x = 1\nreturn redis.call('incr', KEYS[1])";
    let mut scratch = scratch_of(&["s"]);
    eval_on(
        &mut scratch,
        "return redis.call('set', KEYS[1], 'x')",
        &["s"],
        &[],
    );
    assert_eq!(
        eval_on(&mut scratch, body, &["s"], &[]).reply,
        error(&format!(
            "ERR value is not an integer or out of range script: {}, on @user_script:2.",
            sha(body)
        ))
    );
}

#[test]
fn a_key_not_declared_stops_the_script_and_is_reported_for_a_second_run() {
    let body = "redis.call('set', KEYS[1], 'x') return redis.call('set', 'other', 'v')";
    let mut scratch = scratch_of(&["k"]);
    let run = eval_on(&mut scratch, body, &["k"], &[]);
    assert_eq!(
        run.reply,
        error(&format!(
            "ERR Script attempted to access a non local key in a cluster node script: {}",
            sha(body)
        ))
    );
    assert!(
        !run.commit,
        "a script stopped at an undeclared key commits nothing"
    );
    assert_eq!(run.undeclared, vec![b"other".to_vec()]);
    // The run goes on with undeclared keys taken as absent, to find every key it names.
    let run = eval_on(
        &mut scratch_of(&["k"]),
        "local ok = redis.pcall('mget', KEYS[1], 'a', 'b') for i = 1, 3 do redis.call('del', 'job:' .. i) end return 'went on'",
        &["k"],
        &[],
    );
    assert!(!run.commit);
    let found: Vec<&[u8]> = run.undeclared.iter().map(Vec::as_slice).collect();
    assert_eq!(found, [&b"a"[..], b"b", b"job:1", b"job:2", b"job:3"]);
    // With the key held (reserved by the runtime's second run), the script runs; KEYS is still
    // what the client declared.
    let mut scratch = scratch_of(&["k", "other"]);
    let run = eval_on(
        &mut scratch,
        "redis.call('set', 'other', 'v') return #KEYS",
        &["k"],
        &[],
    );
    assert_eq!(run.reply, Value::Integer(1));
    assert!(run.commit);
    assert!(run.undeclared.is_empty());
}

#[test]
fn read_only_scripts_refuse_writes() {
    let mut scratch = scratch_of(&["s"]);
    let body = "return redis.call('set',KEYS[1],'x')";
    let run = eval_with(&mut scratch, body, &["s"], &[], true, &Killer::default());
    assert_eq!(
        run.reply,
        error(&format!(
            "ERR Write commands are not allowed from read-only scripts. script: {}, on @user_script:1.",
            sha(body)
        ))
    );
    assert!(scratch
        .writes()
        .iter()
        .all(|(_, write)| *write == kv::CommitWrite::Keep));
    let run = eval_with(
        &mut scratch,
        "return redis.call('get',KEYS[1])",
        &["s"],
        &[],
        true,
        &Killer::default(),
    );
    assert_eq!(run.reply, Value::Null);
}

#[test]
fn the_sandbox_hides_os_io_and_file_loading_and_protects_globals() {
    for name in [
        "os", "io", "print", "dofile", "loadfile", "require", "debug", "x",
    ] {
        let body = format!("return {name}");
        assert_eq!(
            eval(&body, &[]),
            error(&format!(
                "ERR user_script:1: Script attempted to access nonexistent global variable '{name}' script: {}, on @user_script:1.",
                sha(&body)
            )),
            "{name}"
        );
    }
    let body = "x = 5";
    assert_eq!(
        eval(body, &[]),
        error(&format!(
            "ERR user_script:1: Attempt to modify a readonly table script: {}, on @user_script:1.",
            sha(body)
        ))
    );
    assert_eq!(
        eval("return loadstring('return 1')()", &[]),
        Value::Integer(1)
    );
    assert_eq!(
        eval(
            "return loadstring(string.dump(function() return 1 end))",
            &[]
        ),
        Value::Null
    );
    assert_eq!(eval("return rawget(_G, 'x')", &[]), Value::Null);
    assert_eq!(eval("return string.rep('x', 3)", &[]), bulk("xxx"));
}

#[test]
fn keys_and_argv_are_the_declared_keys_and_arguments() {
    let mut scratch = scratch_of(&["a", "b"]);
    let run = eval_on(
        &mut scratch,
        "return {#KEYS, KEYS[2], ARGV[1]}",
        &["a", "b"],
        &["x"],
    );
    assert_eq!(
        run.reply,
        Value::Array(vec![Value::Integer(2), bulk("b"), bulk("x")])
    );
}

#[test]
fn writes_land_in_the_scratch_store_and_are_kept_after_an_error() {
    let mut scratch = scratch_of(&["a", "b"]);
    let run = eval_on(
        &mut scratch,
        "redis.call('set', KEYS[1], ARGV[1]) redis.call('rpush', KEYS[2], 1, 2) error('late')",
        &["a", "b"],
        &["v"],
    );
    assert!(run.reply.is_error());
    assert!(run.commit, "Redis keeps a script's writes before its error");
    let writes = scratch.writes();
    assert_eq!(writes.len(), 2);
    assert!(writes
        .iter()
        .all(|(_, write)| matches!(write, kv::CommitWrite::Record(_))));
}

#[test]
fn random_numbers_come_from_the_seed_and_randomseed_fixes_them() {
    let first = eval("return tostring(math.random())", &[]);
    assert_eq!(
        first,
        eval("return tostring(math.random())", &[]),
        "same seed"
    );
    let seeded = "math.randomseed(ARGV[1]) return {math.random(10), math.random(5, 6)}";
    let mut scratch = scratch_of(&[]);
    let one = eval_on(&mut scratch, seeded, &[], &["42"]).reply;
    let two = eval_on(&mut scratch, seeded, &[], &["42"]).reply;
    assert_eq!(one, two);
    let Value::Array(items) = one else {
        panic!("an array")
    };
    assert!(matches!(items[0], Value::Integer(1..=10)));
    assert!(matches!(items[1], Value::Integer(5..=6)));
}

#[test]
fn a_killed_script_stops_even_inside_pcall_and_commits_nothing() {
    let killer = Killer::default();
    killer.kill(Kill::TimeLimit);
    let mut scratch = scratch_of(&["a"]);
    let run = eval_with(
        &mut scratch,
        "redis.call('set', KEYS[1], 1) while true do pcall(function() while true do end end) end",
        &["a"],
        &[],
        false,
        &killer,
    );
    assert!(!run.commit);
    let Value::Error(text) = run.reply else {
        panic!("an error")
    };
    assert!(text.starts_with("ERR Script killed"), "{text}");
}

#[test]
fn a_script_that_allocates_without_bound_runs_out_of_memory() {
    let run = {
        let mut scratch = scratch_of(&[]);
        eval_on(
            &mut scratch,
            "local t = {} local s = string.rep('x', 1024 * 1024) for i = 1, 100000 do t[i] = s .. i end",
            &[],
            &[],
        )
    };
    assert!(!run.commit);
    let Value::Error(text) = run.reply else {
        panic!("an error")
    };
    assert!(text.contains("memory"), "{text}");
}

#[test]
fn redis_log_collects_lines_for_the_runtime() {
    let mut scratch = scratch_of(&[]);
    let run = eval_on(
        &mut scratch,
        "redis.log(redis.LOG_WARNING, 'hello', 'world')",
        &[],
        &[],
    );
    assert_eq!(run.log, vec!["hello world".to_string()]);
    assert_eq!(run.reply, Value::Null);
}

#[test]
fn a_shebang_line_declares_flags_as_redis_7_0() {
    assert_eq!(eval("#!lua\nreturn 1", &[]), Value::Integer(1));
    assert_eq!(
        eval("#!not-lua\nreturn 1", &[]),
        error("ERR Unexpected engine in script shebang in first line")
    );
    assert_eq!(
        eval("#!lua badger=data\nreturn 1", &[]),
        error("ERR Unknown lua shebang option: badger=data")
    );
    assert_eq!(
        eval("#!lua flags=allow-oom,what?\nreturn 1", &[]),
        error("ERR Unexpected flag in script shebang: what?")
    );
    let body = "#!lua flags=no-writes\nreturn redis.call('set', KEYS[1], 1)";
    assert_eq!(
        eval(body, &["x"]),
        error(&format!(
            "ERR Write commands are not allowed from read-only scripts. script: {}, on @user_script:2.",
            sha(body)
        ))
    );
    assert_eq!(script::compile(b"#!lua flags=no-writes\nreturn 1"), Ok(()));
}

/// The script's reply as a bulk string (the libraries' outputs are compared as text).
fn text(body: &str) -> String {
    match eval(body, &[]) {
        Value::Bulk(bytes) => String::from_utf8(bytes).unwrap(),
        other => panic!("{body}: {other:?}"),
    }
}

/// A hex dump in Lua, as the Valkey suite's cmsgpack cases print one.
const HEX: &str = "local function hex(s) local h = '' for i = 1, #s do h = h .. string.format('%02x', string.byte(s, i)) end return h end ";

#[test]
fn cmsgpack_packs_and_unpacks_as_redis_7_0() {
    // Outputs recorded from redis-server 7.0 by the Valkey suite (unit/scripting).
    assert_eq!(
        text(&format!("{HEX} return hex(cmsgpack.pack(0.1))")),
        "cb3fb999999999999a"
    );
    assert_eq!(
        text(&format!("{HEX} return hex(cmsgpack.pack(-1099511627776))")),
        "d3ffffff0000000000"
    );
    // Nesting stops at 16 levels: the 17th table is nil.
    assert_eq!(
        eval(
            &format!("{HEX} local a = {{x=nil,y=5}} local b = {{x=a}} a['x'] = b local re = cmsgpack.unpack(cmsgpack.pack(a)) return {{hex(cmsgpack.pack(a)), re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.y == re.y, re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x == nil}}"),
            &[]
        ),
        Value::Array(vec![
            bulk("82a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a178c0"),
            Value::Integer(1),
            Value::Integer(1),
        ])
    );
    // Every width of integer, string, array and map round-trips.
    let body = "local big = {} for i = 1, 70000 do big[i] = i end
        local m = {} for i = 1, 100000 do m['k' .. i] = -i * 1000000 end
        local values = {0, 127, 128, 255, 256, 65535, 65536, 2^32, 2^40, -1, -32, -33, -128, -129, -32768, -32769, -2^31, -2^31 - 1, 1.5, string.rep('x', 31), string.rep('y', 32), string.rep('z', 300), string.rep('w', 70000), true, false}
        local packed = cmsgpack.pack(values, big, m)
        local v, b, n = cmsgpack.unpack(packed)
        for i = 1, #values do assert(v[i] == values[i], 'value ' .. i) end
        assert(#b == 70000 and b[70000] == 70000)
        for i = 1, 100000 do assert(n['k' .. i] == -i * 1000000) end
        assert(#cjson.decode(cjson.encode(big)) == 70000)
        local offset, first = cmsgpack.unpack_one(cmsgpack.pack('a', 'b'), 0)
        local last_offset, second = cmsgpack.unpack_limit(cmsgpack.pack('a', 'b'), 1, offset)
        return {offset, first, last_offset, second}";
    assert_eq!(
        eval(body, &[]),
        Value::Array(vec![
            Value::Integer(2),
            bulk("a"),
            Value::Integer(-1),
            bulk("b")
        ])
    );
    // msgpackr (what BullMQ's client packs with) writes float32 and uint64.
    let mut scratch = scratch_of(&[]);
    let bytes: Vec<u8> = vec![
        0x82, 0xa1, b'a', 0xca, 0x3f, 0xc0, 0, 0, 0xa1, b'b', 0xcf, 0, 0, 0, 1, 0, 0, 0, 0,
    ];
    let keys: Vec<Vec<u8>> = Vec::new();
    let arguments = vec![bytes];
    let reply = run(
        &Script {
            body: b"local t = cmsgpack.unpack(ARGV[1]) return {tostring(t.a), tostring(t.b)}",
            keys: &keys,
            arguments: &arguments,
            now_ms: NOW_MS,
            seed: 7,
            read_only: false,
        },
        &mut scratch,
        &Killer::default(),
    )
    .reply;
    assert_eq!(reply, Value::Array(vec![bulk("1.5"), bulk("4294967296")]));
    assert!(matches!(
        eval("return cmsgpack.unpack('\\220\\255')", &[]),
        Value::Error(text) if text.contains("Missing bytes in input.")
    ));
}

#[test]
fn cjson_encodes_and_decodes_as_redis_7_0() {
    assert_eq!(
        text("return table.concat(cjson.decode('[0.0, -5e3, -1, 0.3e-3, 1023.2, 0e10]'), ' ')"),
        "0 -5000 -1 0.0003 1023.2 0"
    );
    assert_eq!(
        text("return cjson.encode({1, 2, 'a/b', true, false})"),
        "[1,2,\"a\\/b\",true,false]"
    );
    assert_eq!(text("return cjson.encode({})"), "{}");
    assert_eq!(
        text("return cjson.encode({a = {b = 0.5}})"),
        "{\"a\":{\"b\":0.5}}"
    );
    assert_eq!(text("return cjson.encode(1/3)"), "0.33333333333333");
    assert_eq!(text("return cjson.encode(1e20)"), "1e+20");
    assert_eq!(
        text("return cjson.encode({[1] = 'x', [3] = 'z'})"),
        "[\"x\",null,\"z\"]"
    );
    assert_eq!(
        text("return cjson.encode('\\1\\n\\127é')"),
        "\"\\u0001\\n\\u007fé\""
    );
    assert_eq!(
        text("return cjson.encode(cjson.decode('{\"k\":\"\\\\u00e9\\\\ud83d\\\\ude00\"}'))"),
        "{\"k\":\"é😀\"}"
    );
    assert_eq!(
        eval("local t = cjson.decode('[1, null, {\"a\": [true]}]') return {t[2] == cjson.null, t[3].a[1], #t}", &[]),
        Value::Array(vec![Value::Integer(1), Value::Integer(1), Value::Integer(3)])
    );
    let refused = |body: &str, expected: &str| match eval(body, &[]) {
        Value::Error(text) => assert!(text.contains(expected), "{body}: {text}"),
        other => panic!("{body}: {other:?}"),
    };
    refused(
        "return cjson.encode({[false] = 1})",
        "Cannot serialise table: table key must be a number or string",
    );
    refused(
        "return cjson.encode({0/0})",
        "Cannot serialise number: must not be NaN or Inf",
    );
    refused(
        "return cjson.encode({[1] = 1, [20] = 2})",
        "Cannot serialise table: excessively sparse array",
    );
    refused(
        "return cjson.encode(function() end)",
        "Cannot serialise function: type not supported",
    );
    refused(
        "cjson.encode_max_depth(1) return cjson.encode({{}})",
        "Cannot serialise, excessive nesting (2)",
    );
    refused(
        "cjson.decode_max_depth(1) return cjson.decode('[[1]]')",
        "Found too many nested data structures (2) at character 2",
    );
    refused(
        "return cjson.decode('[1,]')",
        "Expected value but found T_ARR_END at character 4",
    );
    refused(
        "return cjson.decode('{1:2}')",
        "Expected object key string but found invalid token at character 2",
    );
    assert_eq!(
        text("cjson.encode_invalid_numbers(true) return cjson.encode(1/0)"),
        "inf"
    );
    // The Valkey suite's smoke test runs whole.
    assert_eq!(
        eval(
            "local some_map = {s1='Some string', n1=100, a1={'Some','String','Array'}, b1=true, b2=false}
             local decoded = cjson.decode(cjson.encode(some_map))
             assert(decoded.s1 == 'Some string' and decoded.n1 == 100 and decoded.a1[3] == 'Array' and decoded.b2 == false)
             local table1 = {one='one', [1]='one'}
             decoded = cjson.decode(cjson.encode(table1))
             assert(decoded['one'] == 'one' and decoded['1'] == 'one')
             return 1",
            &[]
        ),
        Value::Integer(1)
    );
}

#[test]
fn bit_and_struct_work_on_32_bit_integers_as_luabitop() {
    assert_eq!(
        eval(
            "return {bit.tobit(1), bit.band(1), bit.bxor(1, 2), bit.bor(1,2,4,8,16,32,64,128), bit.bnot(0), bit.lshift(1, 31), bit.rshift(-1, 28), bit.arshift(-16, 2), bit.rol(0x80000001, 1), bit.ror(1, 1), bit.tobit(2^32 + 5), bit.bswap(0x01020304)}",
            &[]
        ),
        Value::Array(
            [1, 1, 3, 255, -1, -2147483648, 15, -4, 3, -2147483648, 5, 0x04030201]
                .into_iter()
                .map(Value::Integer)
                .collect()
        )
    );
    // Redis's fix of LuaBitOp's tohex with the most negative digit count.
    assert_eq!(text("return bit.tohex(65535, -2147483648)"), "0000FFFF");
    assert_eq!(
        text("return bit.tohex(255) .. bit.tohex(255, -2)"),
        "000000ffFF"
    );
    assert_eq!(
        eval("local a, b, c, nxt = struct.unpack('>Hi2c3', struct.pack('>Hi2c3', 513, -2, 'abc')) return {a, b, c, nxt, struct.size('>Hi2c3'), #struct.pack('<d', 1.5)}", &[]),
        Value::Array(vec![Value::Integer(513), Value::Integer(-2), bulk("abc"), Value::Integer(8), Value::Integer(7), Value::Integer(8)])
    );
}

#[test]
fn redis_setresp_3_gives_scripts_resp3_types() {
    let mut scratch = scratch_of(&["h", "z", "nothing"]);
    eval_on(
        &mut scratch,
        "redis.call('hset', KEYS[1], 'f', 'v') redis.call('zadd', KEYS[2], 1.5, 'm')",
        &["h", "z"],
        &[],
    );
    let map = Value::Map(vec![(bulk("f"), bulk("v"))]);
    assert_eq!(
        eval_on(
            &mut scratch,
            "redis.setresp(3) return redis.call('hgetall', KEYS[1])",
            &["h"],
            &[]
        )
        .reply,
        map
    );
    assert_eq!(
        eval_on(
            &mut scratch,
            "redis.setresp(2) return redis.call('hgetall', KEYS[1])",
            &["h"],
            &[]
        )
        .reply,
        Value::Array(vec![bulk("f"), bulk("v")])
    );
    assert_eq!(
        eval_on(
            &mut scratch,
            "redis.setresp(3) local m = redis.call('hgetall', KEYS[1]) local s = redis.call('zscore', KEYS[2], 'm') return {m.map.f, s.double * 2, redis.call('get', 'nothing') == nil, true, false}",
            &["h", "z", "nothing"],
            &[]
        )
        .reply,
        Value::Array(vec![bulk("v"), Value::Integer(3), Value::Boolean(true), Value::Boolean(true), Value::Boolean(false)])
    );
    assert_eq!(eval("return {double = 0.5}", &[]), Value::Double(0.5));
    assert!(
        matches!(eval("redis.setresp(4)", &[]), Value::Error(text) if text.contains("RESP version must be 2 or 3."))
    );
}

#[test]
fn globals_and_libraries_are_read_only_as_redis_7_0() {
    for body in [
        "setmetatable(_G, {})",
        "local g = getmetatable(_G) g.__index = {}",
        "redis = function() return 1 end",
        "_G = {}",
        "redis.call = function() return 1 end",
        "cjson.encode = function() return 1 end",
        "cmsgpack.pack = function() return 1 end",
        "bit.lshift = function() return 1 end",
        "string.rep = nil",
        "rawset(_G, 'x', 1)",
        "rawset(redis, 'x', 1)",
        "a = 10",
        "loadstring('b = 1')()",
    ] {
        match eval(body, &[]) {
            Value::Error(text) => assert!(
                text.contains("Attempt to modify a readonly table"),
                "{body}: {text}"
            ),
            other => panic!("{body}: {other:?}"),
        }
    }
    // Reading through the protection works, and locals are the script's own.
    assert_eq!(
        eval("local t = {} t.x = 1 setmetatable(t, {}) return {t.x, string.rep('a', 2), #KEYS, math.floor(2.5)}", &[]),
        Value::Array(vec![Value::Integer(1), bulk("aa"), Value::Integer(0), Value::Integer(2)])
    );
}

#[test]
fn thousands_of_arguments_and_results_never_exhaust_the_reference_stack() {
    // Each would abort the process if every value were handed to Rust at once (mlua holds a
    // reference per value, about 8,000 at most).
    assert_eq!(
        eval(
            "local a = {} for i = 1, 7999 do a[i] = 'item' .. i end
             redis.pcall('rpush', KEYS[1], unpack(a))
             return redis.call('rpush', KEYS[1], unpack(a))",
            &["list"]
        ),
        Value::Integer(15998)
    );
    assert_eq!(
        eval(
            "local a = {} for i = 1, 7000 do a[i] = 'x' end
             local packed = cmsgpack.pack(unpack(a))
             local ok = pcall(cmsgpack.unpack, packed)
             redis.log(redis.LOG_NOTICE, unpack(a))
             local b = {} for i = 1, 7000 do b[i] = i end
             return {#packed, ok, bit.bor(unpack(b))}",
            &[]
        ),
        Value::Array(vec![
            Value::Integer(14000),
            Value::Null,
            Value::Integer(8191)
        ])
    );
    let mut big_map = String::from("local m = {} for i = 1, 100000 do m['k' .. i] = 'v' end ");
    big_map.push_str("return #cmsgpack.pack(m) > 0 and #cjson.encode(m) > 0");
    assert_eq!(eval(&big_map, &[]), Value::Integer(1));
    assert!(matches!(
        eval("cjson.decode_max_depth(100000)", &[]),
        Value::Error(text) if text.contains("expected integer between 1 and 1000")
    ));
}

#[test]
fn library_errors_carry_their_message_alone_as_redis_c_libraries() {
    let body = "return redis.sha1hex()";
    assert_eq!(
        eval(body, &[]),
        error(&format!(
            "ERR wrong number of arguments script: {}, on @user_script:1.",
            sha(body)
        ))
    );
    let body = "return cmsgpack.unpack('\\220\\255')";
    assert_eq!(
        eval(body, &[]),
        error(&format!(
            "ERR Missing bytes in input. script: {}, on @user_script:1.",
            sha(body)
        ))
    );
    let body = "return redis.call('cluster', 'reset')";
    assert_eq!(
        eval(body, &[]),
        error(&format!(
            "ERR This Redis command is not allowed from script script: {}, on @user_script:1.",
            sha(body)
        ))
    );
}
