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
fn a_key_not_declared_is_refused_as_redis_cluster_does() {
    let body = "return redis.call('set', 'other', 'v')";
    assert_eq!(
        eval(body, &["k"]),
        error(&format!(
            "ERR Script attempted to access a non local key in a cluster node script: {}, on @user_script:1.",
            sha(body)
        ))
    );
    assert_eq!(
        eval("return redis.pcall('mget', KEYS[1], 'other')", &["k"]),
        error("ERR Script attempted to access a non local key in a cluster node")
    );
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
