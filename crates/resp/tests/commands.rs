//! Table-driven tests of `plan` + `finish` against a real `kv::KvStore`, with Redis 7's replies.

use kv::{Command, KvError, KvStore, Outcome, SetCondition};
use resp::{finish, hello_reply, info_reply, is_nilext, plan, Pending, Plan, ServerInfo, Value};

fn args(words: &[&str]) -> Vec<Vec<u8>> {
    words.iter().map(|word| word.as_bytes().to_vec()).collect()
}

fn ok() -> Value {
    Value::ok()
}

fn bulk(text: &str) -> Value {
    Value::Bulk(text.as_bytes().to_vec())
}

fn int(number: i64) -> Value {
    Value::Integer(number)
}

fn err(text: &str) -> Value {
    Value::Error(text.to_string())
}

fn primary() -> ServerInfo {
    ServerInfo {
        role: "primary".into(),
        view: 7,
        commit_number: 42,
        replica_index: 0,
        replicas: 3,
        protocol: "vr".into(),
        durability: "fsync".into(),
        keys: Some(5),
        version: "0.1.0".into(),
        counters: vec![("skyros_nilext_fast".into(), 3)],
        sections: Vec::new(),
    }
}

/// The time every command of `call` is planned at (unix milliseconds).
const NOW_MS: u64 = 1_000_000;

/// Plays the runtime: plans, stamps, runs reads and writes on the store, and builds the reply.
fn call(store: &mut KvStore, words: &[&str]) -> Value {
    match plan(&args(words)) {
        Plan::Reply(value) => value,
        Plan::Execute(mut pending) => {
            pending.stamp(NOW_MS);
            let outcome = if pending.command.is_read() {
                store.read(&pending.command)
            } else {
                store.execute(&pending.command)
            };
            finish(&pending, &outcome)
        }
        Plan::Hello { protocol, .. } => {
            hello_reply(if protocol == 0 { 2 } else { protocol }, &primary())
        }
        Plan::Info { section } => info_reply(&primary(), section.as_deref()),
        Plan::Quit | Plan::SetName(_) => ok(),
        Plan::GetName => Value::Null,
        Plan::PeerDelay { .. } => Value::ok(),
    }
}

/// Runs a script of commands on one store, checking each reply.
fn script(steps: &[(&[&str], Value)]) {
    let mut store = KvStore::new();
    for (words, expected) in steps {
        assert_eq!(&call(&mut store, words), expected, "{words:?}");
    }
}

fn pending(words: &[&str]) -> Pending {
    match plan(&args(words)) {
        Plan::Execute(pending) => pending,
        other => panic!("{words:?} planned {other:?}"),
    }
}

#[test]
fn string_commands_follow_redis_semantics() {
    script(&[
        (&["GET", "k"], Value::Null),
        (&["STRLEN", "k"], int(0)),
        (&["SET", "k", "hello"], ok()),
        (&["GET", "k"], bulk("hello")),
        (&["STRLEN", "k"], int(5)),
        (&["APPEND", "k", " world"], int(11)),
        (&["APPEND", "new", "abc"], int(3)),
        (&["GET", "k"], bulk("hello world")),
        (&["GETSET", "k", "v2"], bulk("hello world")),
        (&["GETSET", "absent", "v"], Value::Null),
        (&["GET", "absent"], bulk("v")),
        (&["MSET", "a", "1", "b", "2", "a", "3"], ok()),
        (
            &["MGET", "a", "b", "nope", "k"],
            Value::Array(vec![bulk("3"), bulk("2"), Value::Null, bulk("v2")]),
        ),
        (&["DBSIZE"], int(5)),
        (&["EXISTS", "a"], int(1)),
        (&["EXISTS", "a", "a", "nope", "b"], int(3)),
        (&["EXISTS", "nope"], int(0)),
        (&["DEL", "a", "a", "nope"], int(1)),
        (&["UNLINK", "b", "new"], int(2)),
        (&["DEL", "b"], int(0)),
        (&["DBSIZE"], int(2)),
        (&["SET", "empty", ""], ok()),
        (&["GET", "empty"], bulk("")),
        (&["STRLEN", "empty"], int(0)),
        (&["EXISTS", "empty"], int(1)),
    ]);
}

#[test]
fn counters_follow_redis_semantics_and_errors() {
    script(&[
        (&["INCR", "n"], int(1)),
        (&["INCRBY", "n", "10"], int(11)),
        (&["DECR", "n"], int(10)),
        (&["DECRBY", "n", "15"], int(-5)),
        (&["DECRBY", "n", "-5"], int(0)),
        (&["INCRBY", "n", "-9223372036854775808"], int(i64::MIN)),
        (
            &["DECR", "n"],
            err("ERR increment or decrement would overflow"),
        ),
        (&["GET", "n"], bulk("-9223372036854775808")),
        (&["SET", "m", "9223372036854775807"], ok()),
        (
            &["INCR", "m"],
            err("ERR increment or decrement would overflow"),
        ),
        (&["INCRBY", "m", "0"], int(i64::MAX)),
        (&["SET", "s", "abc"], ok()),
        (
            &["INCR", "s"],
            err("ERR value is not an integer or out of range"),
        ),
        (
            &["INCRBY", "x", "abc"],
            err("ERR value is not an integer or out of range"),
        ),
        (
            &["INCRBY", "x", "1.5"],
            err("ERR value is not an integer or out of range"),
        ),
        (
            &["INCRBY", "x", "+1"],
            err("ERR value is not an integer or out of range"),
        ),
        (
            &["INCRBY", "x", "01"],
            err("ERR value is not an integer or out of range"),
        ),
        (
            &["INCRBY", "x", ""],
            err("ERR value is not an integer or out of range"),
        ),
        (
            &["INCRBY", "x", "9223372036854775808"],
            err("ERR value is not an integer or out of range"),
        ),
        (
            &["DECRBY", "x", "-9223372036854775808"],
            err("ERR decrement would overflow"),
        ),
        (&["DECRBY", "x", "9223372036854775807"], int(-i64::MAX)),
        (&["GET", "x"], bulk("-9223372036854775807")),
    ]);
}

#[test]
fn set_options_combine_as_in_redis_7() {
    script(&[
        // NX: only when absent.
        (&["SET", "k", "1", "NX"], ok()),
        (&["SET", "k", "2", "NX"], Value::Null),
        (&["GET", "k"], bulk("1")),
        // XX: only when present.
        (&["SET", "k", "3", "XX"], ok()),
        (&["SET", "other", "3", "XX"], Value::Null),
        (&["EXISTS", "other"], int(0)),
        (&["GET", "k"], bulk("3")),
        // GET: the previous value, written or not.
        (&["SET", "k", "4", "GET"], bulk("3")),
        (&["SET", "fresh", "1", "GET"], Value::Null),
        (&["GET", "fresh"], bulk("1")),
        (&["SET", "k", "5", "NX", "GET"], bulk("4")),
        (&["GET", "k"], bulk("4")),
        (&["SET", "nx", "1", "GET", "NX"], Value::Null),
        (&["GET", "nx"], bulk("1")),
        (&["SET", "k", "6", "XX", "GET"], bulk("4")),
        (&["GET", "k"], bulk("6")),
        (&["SET", "xx", "1", "XX", "GET"], Value::Null),
        (&["EXISTS", "xx"], int(0)),
        // Repeats and KEEPTTL are accepted.
        (&["SET", "k", "7", "NX", "NX"], Value::Null),
        (&["SET", "k", "8", "XX", "xx", "GET", "get"], bulk("6")),
        (&["SET", "k", "9", "KEEPTTL"], ok()),
        (&["SET", "k", "10", "KEEPTTL", "XX", "KEEPTTL"], ok()),
        (&["GET", "k"], bulk("10")),
        // Syntax errors.
        (&["SET", "k", "v", "NX", "XX"], err("ERR syntax error")),
        (&["SET", "k", "v", "XX", "NX"], err("ERR syntax error")),
        (&["SET", "k", "v", "FOO"], err("ERR syntax error")),
        (&["SET", "k", "v", "NXX"], err("ERR syntax error")),
        (&["SET", "k", "v", ""], err("ERR syntax error")),
        (&["SET", "k", "v", "EX"], err("ERR syntax error")),
        (
            &["SET", "k", "v", "KEEPTTL", "EX", "10"],
            err("ERR syntax error"),
        ),
        (
            &["SET", "k", "v", "EX", "10", "KEEPTTL"],
            err("ERR syntax error"),
        ),
        (
            &["SET", "k", "v", "EX", "10", "PX", "10"],
            err("ERR syntax error"),
        ),
        (
            &["SET", "k", "v", "PXAT", "10", "EXAT", "10"],
            err("ERR syntax error"),
        ),
        (&["GET", "k"], bulk("10")),
    ]);
}

#[test]
fn set_expiry_options_set_the_key_s_expiry() {
    script(&[
        (&["SET", "k", "v", "EX", "10"], ok()),
        (&["PTTL", "k"], int(10_000)),
        (&["SET", "k", "v", "px", "10"], ok()),
        (&["PTTL", "k"], int(10)),
        (&["SET", "k", "v", "KEEPTTL"], ok()),
        (&["PTTL", "k"], int(10)),
        (&["SET", "k", "v"], ok()),
        (&["PTTL", "k"], int(-1)),
        (&["SET", "k", "v", "EXAT", "2000"], ok()),
        (&["EXPIRETIME", "k"], int(2000)),
        (&["TTL", "k"], int(1000)),
        (
            &["SET", "k", "w", "PXAT", "1700000000000", "XX", "GET"],
            bulk("v"),
        ),
        (&["PEXPIRETIME", "k"], int(1_700_000_000_000)),
        (&["SET", "k", "v", "EX", "10", "EX", "20"], ok()),
        (&["TTL", "k"], int(20)),
        (
            &["SET", "k", "v", "EX", "ten"],
            err("ERR value is not an integer or out of range"),
        ),
        (
            &["SET", "k", "v", "EX", "0"],
            err("ERR invalid expire time in 'set' command"),
        ),
        (
            &["SET", "k", "v", "PX", "-1"],
            err("ERR invalid expire time in 'set' command"),
        ),
        (
            &["SET", "k", "v", "EX", "9223372036854775807"],
            err("ERR invalid expire time in 'set' command"),
        ),
        (
            &["SET", "k", "v", "EX", "10", "BAD"],
            err("ERR syntax error"),
        ),
        (&["SET", "k", "v", "PXAT", "1000000"], ok()),
        // PXAT at the planning time: gone at once.
        (&["EXISTS", "k"], int(0)),
    ]);
}

#[test]
fn set_variants_plan_the_matching_store_command() {
    let key = b"k".to_vec();
    let value = b"v".to_vec();
    let table: &[(&[&str], Command)] = &[
        (
            &["SET", "k", "v"],
            Command::Put {
                key: key.clone(),
                value: value.clone(),
            },
        ),
        (
            &["SET", "k", "v", "KEEPTTL"],
            Command::SetExpiring {
                key: key.clone(),
                value: value.clone(),
                condition: SetCondition::Always,
                return_previous: false,
                ttl: kv::TtlChange::Keep,
            },
        ),
        (
            &["SET", "k", "v", "GET"],
            Command::GetSet {
                key: key.clone(),
                value: value.clone(),
            },
        ),
        (
            &["SET", "k", "v", "NX"],
            Command::Set {
                key: key.clone(),
                value: value.clone(),
                condition: SetCondition::IfAbsent,
                return_previous: false,
            },
        ),
        (
            &["SET", "k", "v", "GET", "XX"],
            Command::Set {
                key: key.clone(),
                value: value.clone(),
                condition: SetCondition::IfPresent,
                return_previous: true,
            },
        ),
    ];
    for (words, command) in table {
        assert_eq!(&pending(words).command, command, "{words:?}");
    }
}

#[test]
fn reads_are_planned_as_reads_and_writes_as_writes() {
    let reads: &[&[&str]] = &[
        &["GET", "k"],
        &["STRLEN", "k"],
        &["MGET", "a", "b"],
        &["EXISTS", "a"],
        &["DBSIZE"],
    ];
    for words in reads {
        assert!(pending(words).command.is_read(), "{words:?}");
    }
    let writes: &[&[&str]] = &[
        &["SET", "k", "v"],
        &["SET", "k", "v", "NX"],
        &["SET", "k", "v", "GET"],
        &["GETSET", "k", "v"],
        &["MSET", "k", "v"],
        &["DEL", "k"],
        &["UNLINK", "k"],
        &["INCR", "k"],
        &["DECR", "k"],
        &["INCRBY", "k", "2"],
        &["DECRBY", "k", "2"],
        &["APPEND", "k", "v"],
    ];
    for words in writes {
        assert!(!pending(words).command.is_read(), "{words:?}");
    }
}

#[test]
fn nil_externality_is_a_property_of_the_reply() {
    let table: &[(&[&str], bool)] = &[
        (&["SET", "k", "v"], true),
        // Always OK, but kept off the nilext paths: it must read the key's expiry to keep it.
        (&["set", "k", "v", "keepttl"], false),
        (&["MSET", "a", "1", "b", "2"], true),
        (&["SET", "k", "v", "NX"], false),
        (&["SET", "k", "v", "XX"], false),
        (&["SET", "k", "v", "GET"], false),
        (&["GETSET", "k", "v"], false),
        (&["DEL", "k"], false),
        (&["UNLINK", "k"], false),
        (&["INCR", "k"], false),
        (&["DECR", "k"], false),
        (&["INCRBY", "k", "1"], false),
        (&["DECRBY", "k", "1"], false),
        (&["APPEND", "k", "v"], false),
        (&["GET", "k"], false),
        (&["MGET", "k"], false),
        (&["EXISTS", "k"], false),
        (&["STRLEN", "k"], false),
        (&["DBSIZE"], false),
    ];
    for (words, nilext) in table {
        assert_eq!(is_nilext(&pending(words)), *nilext, "{words:?}");
    }
    // A nilext reply is the same whatever the store held.
    let states: [&[&[&str]]; 3] = [
        &[],
        &[&["SET", "k", "old"], &["SET", "a", "x"]],
        &[&["INCR", "k"], &["APPEND", "b", "y"]],
    ];
    for (words, nilext) in table {
        if !nilext {
            continue;
        }
        for setup in states {
            let mut store = KvStore::new();
            for step in setup {
                call(&mut store, step);
            }
            assert_eq!(call(&mut store, words), ok(), "{words:?} after {setup:?}");
        }
    }
}

#[test]
fn arity_errors_name_the_command_as_redis_does() {
    let table: &[(&[&str], &str)] = &[
        (&["GET"], "get"),
        (&["get", "a", "b"], "get"),
        (&["SET", "k"], "set"),
        (&["GETSET", "k"], "getset"),
        (&["APPEND", "k"], "append"),
        (&["STRLEN"], "strlen"),
        (&["INCR"], "incr"),
        (&["DECR", "a", "b"], "decr"),
        (&["INCRBY", "k"], "incrby"),
        (&["DECRBY", "k", "1", "2"], "decrby"),
        (&["MGET"], "mget"),
        (&["MSET", "k"], "mset"),
        (&["MSET", "a", "1", "b"], "mset"),
        (&["DEL"], "del"),
        (&["UNLINK"], "unlink"),
        (&["EXISTS"], "exists"),
        (&["DBSIZE", "x"], "dbsize"),
        (&["PING", "a", "b"], "ping"),
        (&["ECHO"], "echo"),
        (&["ECHO", "a", "b"], "echo"),
        (&["SELECT"], "select"),
        (&["AUTH"], "auth"),
        (&["CLIENT"], "client"),
        (&["CONFIG"], "config"),
        (&["CONFIG", "GET"], "config|get"),
        (&["config", "help", "x"], "config|help"),
        (&["CLIENT", "SETNAME"], "client|setname"),
        (&["CLIENT", "GETNAME", "x"], "client|getname"),
        (&["CLIENT", "ID", "x"], "client|id"),
        (&["CLIENT", "SETINFO", "LIB-NAME"], "client|setinfo"),
        (&["COMMAND", "COUNT", "x"], "command|count"),
    ];
    for (words, name) in table {
        let expected = format!("ERR wrong number of arguments for '{name}' command");
        assert_eq!(plan(&args(words)), Plan::Reply(err(&expected)), "{words:?}");
    }
}

#[test]
fn unknown_commands_are_reported_with_redis_text() {
    let reply = |words: &[&str]| plan(&args(words));
    assert_eq!(
        reply(&["FOO", "a", "b"]),
        Plan::Reply(err(
            "ERR unknown command 'FOO', with args beginning with: 'a' 'b' "
        ))
    );
    assert_eq!(
        reply(&["foo"]),
        Plan::Reply(err("ERR unknown command 'foo', with args beginning with: "))
    );
    assert_eq!(
        reply(&["XREADGROUP", "list", "x"]),
        Plan::Reply(err(
            "ERR unknown command 'XREADGROUP', with args beginning with: 'list' 'x' "
        ))
    );
    // Arguments are quoted until their text reaches 128 bytes; the one crossing it is cut.
    let sixty = "x".repeat(60);
    assert_eq!(
        reply(&["FOO", &sixty, &sixty, &sixty, "more"]),
        Plan::Reply(err(&format!(
            "ERR unknown command 'FOO', with args beginning with: '{sixty}' '{sixty}' 'xx' "
        )))
    );
    let long = "y".repeat(300);
    assert_eq!(
        reply(&[&long, &long, "b"]),
        Plan::Reply(err(&format!(
            "ERR unknown command '{}', with args beginning with: '{}' ",
            &long[..128],
            &long[..128]
        )))
    );
    // Line breaks become spaces; text stops at a NUL byte as C prints it.
    assert_eq!(
        plan(&[b"F\r\nOO".to_vec(), b"a\0b".to_vec(), vec![0xff]]),
        Plan::Reply(err(
            "ERR unknown command 'F  OO', with args beginning with: 'a' '\u{fffd}' "
        ))
    );
    assert_eq!(
        plan(&[b"get\0".to_vec(), b"k".to_vec()]),
        Plan::Reply(err(
            "ERR unknown command 'get', with args beginning with: 'k' "
        ))
    );
    // Containers name their HELP.
    assert_eq!(
        reply(&["config", "rewrite"]),
        Plan::Reply(err("ERR unknown subcommand 'rewrite'. Try CONFIG HELP."))
    );
    // CONFIG SET and SLOWLOG are the gateway's; the planner sees them only from scripts.
    assert_eq!(
        reply(&["config", "set", "save", ""]),
        Plan::Reply(err("ERR This Redis command is not allowed from script"))
    );
    assert_eq!(
        reply(&["slowlog", "len"]),
        Plan::Reply(err("ERR This Redis command is not allowed from script"))
    );
    assert_eq!(
        reply(&["Client", "LIST"]),
        Plan::Reply(err("ERR unknown subcommand 'LIST'. Try CLIENT HELP."))
    );
    assert_eq!(
        reply(&["COMMAND", "GETKEYS", "GET", "k"]),
        Plan::Reply(err("ERR unknown subcommand 'GETKEYS'. Try COMMAND HELP."))
    );
    assert_eq!(plan(&[]), Plan::Reply(err("ERR empty command")));
}

#[test]
fn command_names_and_keywords_are_case_insensitive() {
    script(&[
        (&["sEt", "k", "v"], ok()),
        (&["get", "k"], bulk("v")),
        (&["GeT", "k"], bulk("v")),
        (&["set", "k", "w", "nX"], Value::Null),
        (&["set", "k", "w", "Xx", "gEt"], bulk("v")),
        (&["pInG"], Value::Simple("PONG".into())),
        (&["select", "0"], ok()),
        (
            &["config", "get", "SAVE"],
            Value::Map(vec![(bulk("save"), bulk(""))]),
        ),
        (&["client", "setinfo", "lib-name", "redis-py"], ok()),
    ]);
    assert_eq!(plan(&args(&["CLIENT", "getName"])), Plan::GetName);
    assert_eq!(
        plan(&args(&["client", "SETNAME", "conn-1"])),
        Plan::SetName(b"conn-1".to_vec())
    );
    assert_eq!(plan(&args(&["quit"])), Plan::Quit);
    assert_eq!(plan(&args(&["QUIT", "now"])), Plan::Quit);
}

#[test]
fn connection_commands_answer_without_the_store() {
    script(&[
        (&["PING"], Value::Simple("PONG".into())),
        (&["PING", "hi there"], bulk("hi there")),
        (&["ECHO", "x\r\ny"], bulk("x\r\ny")),
        (&["SELECT", "0"], ok()),
        (&["SELECT", "1"], err("ERR DB index is out of range")),
        (&["SELECT", "-1"], err("ERR DB index is out of range")),
        (&["SELECT", "zero"], err("ERR value is not an integer or out of range")),
        (&["SELECT", "4294967296"], err("ERR value is not an integer or out of range")),
        (&["CLIENT", "ID"], int(resp::CLIENT_ID)),
        (&["CLIENT", "SETINFO", "LIB-VER", "1.2.3"], ok()),
        (&["CLIENT", "SETINFO", "LIB-FOO", "x"], err("ERR Unrecognized option 'LIB-FOO'")),
        (
            &["CLIENT", "SETINFO", "lib-name", "my lib"],
            err("ERR lib-name cannot contain spaces, newlines or special characters."),
        ),
        (
            &["CLIENT", "SETNAME", "a b"],
            err("ERR Client names cannot contain spaces, newlines or special characters."),
        ),
        (
            &["AUTH", "secret"],
            err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"),
        ),
        (&["AUTH", "user", "secret"], err("ERR AUTH is not supported: Tessera has no users or passwords")),
        (&["AUTH", "a", "b", "c"], err("ERR syntax error")),
    ]);
    assert_eq!(
        plan(&args(&["CLIENT", "SETNAME", ""])),
        Plan::SetName(Vec::new())
    );
    for words in [
        &["CLIENT", "HELP"][..],
        &["CONFIG", "HELP"],
        &["COMMAND", "HELP"],
    ] {
        match plan(&args(words)) {
            Plan::Reply(Value::Array(lines)) => {
                assert!(lines.len() > 2, "{words:?}");
                assert!(lines.iter().all(|line| matches!(line, Value::Simple(_))));
            }
            other => panic!("{words:?} planned {other:?}"),
        }
    }
}

#[test]
fn config_get_answers_what_redis_benchmark_asks() {
    let get = |patterns: &[&str]| {
        let mut words = vec!["CONFIG", "GET"];
        words.extend_from_slice(patterns);
        match plan(&args(&words)) {
            Plan::Reply(value) => value,
            other => panic!("{words:?} planned {other:?}"),
        }
    };
    let save = (bulk("save"), bulk(""));
    let appendonly = (bulk("appendonly"), bulk("no"));
    assert_eq!(get(&["save"]), Value::Map(vec![save.clone()]));
    assert_eq!(get(&["appendonly"]), Value::Map(vec![appendonly.clone()]));
    assert_eq!(get(&["maxmemory"]), Value::Map(vec![]));
    assert_eq!(
        get(&["*"]),
        Value::Map(vec![save.clone(), appendonly.clone()])
    );
    assert_eq!(
        get(&["app*", "s?ve"]),
        Value::Map(vec![save.clone(), appendonly.clone()])
    );
    assert_eq!(get(&["save", "SAVE", "s*"]), Value::Map(vec![save.clone()]));
    // RESP2 clients see the flat array Redis sends.
    assert_eq!(
        get(&["save"]).into_resp2(),
        Value::Array(vec![bulk("save"), bulk("")])
    );
}

#[test]
fn command_introspection_is_enough_for_redis_cli_and_benchmark() {
    let reply = |words: &[&str]| match plan(&args(words)) {
        Plan::Reply(value) => value,
        other => panic!("{words:?} planned {other:?}"),
    };
    let Value::Integer(count) = reply(&["COMMAND", "COUNT"]) else {
        panic!("COMMAND COUNT is an integer");
    };
    let Value::Array(all) = reply(&["COMMAND"]) else {
        panic!("COMMAND is an array");
    };
    assert_eq!(all.len() as i64, count);
    assert_eq!(reply(&["COMMAND", "INFO"]), Value::Array(all.clone()));
    assert_eq!(reply(&["COMMAND", "DOCS"]), Value::Map(Vec::new()));
    assert_eq!(reply(&["COMMAND", "DOCS", "get"]), Value::Map(Vec::new()));
    let Value::Array(infos) = reply(&["COMMAND", "INFO", "get", "nosuch", "MSET", "config|get"])
    else {
        panic!("COMMAND INFO is an array");
    };
    assert_eq!(infos.len(), 4);
    let Value::Array(get) = &infos[0] else {
        panic!("an entry is an array");
    };
    assert_eq!(get.len(), 10);
    assert_eq!(get[0], bulk("get"));
    assert_eq!(get[1], int(2));
    assert_eq!(
        get[2],
        Value::Array(vec![
            Value::Simple("readonly".into()),
            Value::Simple("fast".into())
        ])
    );
    assert_eq!(&get[3..6], &[int(1), int(1), int(1)]);
    assert_eq!(infos[1], Value::Null);
    let Value::Array(mset) = &infos[2] else {
        panic!("an entry is an array");
    };
    assert_eq!(&mset[..2], &[bulk("mset"), int(-3)]);
    assert_eq!(&mset[3..6], &[int(1), int(-1), int(2)]);
    let Value::Array(config_get) = &infos[3] else {
        panic!("an entry is an array");
    };
    assert_eq!(&config_get[..2], &[bulk("config|get"), int(-3)]);
    // Every listed command is one `plan` knows, refusing one argument fewer than its arity.
    for entry in &all {
        let Value::Array(fields) = entry else {
            panic!("an entry is an array");
        };
        let (Value::Bulk(name), Value::Integer(arity)) = (&fields[0], &fields[1]) else {
            panic!("an entry starts with its name and arity");
        };
        let needed = arity.unsigned_abs() as usize;
        if needed < 2 {
            continue;
        }
        let mut words = vec![name.clone()];
        words.resize(needed - 1, b"x".to_vec());
        let name = String::from_utf8_lossy(name);
        assert_eq!(
            plan(&words),
            Plan::Reply(err(&format!(
                "ERR wrong number of arguments for '{name}' command"
            ))),
            "{name}"
        );
    }
}

#[test]
fn hello_negotiates_the_protocol_and_validates_options() {
    let table: &[(&[&str], Plan)] = &[
        (
            &["HELLO"],
            Plan::Hello {
                protocol: 0,
                client_name: None,
            },
        ),
        (
            &["HELLO", "3"],
            Plan::Hello {
                protocol: 3,
                client_name: None,
            },
        ),
        (
            &["hello", "2"],
            Plan::Hello {
                protocol: 2,
                client_name: None,
            },
        ),
        (
            &["HELLO", "3", "setname", "worker-1"],
            Plan::Hello {
                protocol: 3,
                client_name: Some(b"worker-1".to_vec()),
            },
        ),
        (
            &["HELLO", "2", "SETNAME", "a", "SETNAME", "b"],
            Plan::Hello {
                protocol: 2,
                client_name: Some(b"b".to_vec()),
            },
        ),
        (
            &["HELLO", "1"],
            Plan::Reply(err("NOPROTO unsupported protocol version")),
        ),
        (
            &["HELLO", "4"],
            Plan::Reply(err("NOPROTO unsupported protocol version")),
        ),
        (
            &["HELLO", "three"],
            Plan::Reply(err(
                "ERR Protocol version is not an integer or out of range",
            )),
        ),
        (
            &["HELLO", "SETNAME", "x"],
            Plan::Reply(err(
                "ERR Protocol version is not an integer or out of range",
            )),
        ),
        (
            &["HELLO", "3", "AUTH", "default", "secret"],
            Plan::Reply(err(
                "ERR AUTH is not supported: Tessera has no users or passwords",
            )),
        ),
        (
            &["HELLO", "3", "AUTH", "default"],
            Plan::Reply(err("ERR Syntax error in HELLO option 'AUTH'")),
        ),
        (
            &["HELLO", "3", "SETNAME"],
            Plan::Reply(err("ERR Syntax error in HELLO option 'SETNAME'")),
        ),
        (
            &["HELLO", "3", "foo"],
            Plan::Reply(err("ERR Syntax error in HELLO option 'foo'")),
        ),
        (
            &["HELLO", "3", "SETNAME", "two words"],
            Plan::Reply(err(
                "ERR Client names cannot contain spaces, newlines or special characters.",
            )),
        ),
        (
            &["HELLO", "3", "foo", "AUTH", "u", "p"],
            Plan::Reply(err("ERR Syntax error in HELLO option 'foo'")),
        ),
    ];
    for (words, expected) in table {
        assert_eq!(&plan(&args(words)), expected, "{words:?}");
    }
}

#[test]
fn hello_replies_with_redis_fields_as_a_map_or_a_flat_array() {
    let expected = vec![
        (bulk("server"), bulk("redis")),
        (bulk("version"), bulk(resp::REDIS_VERSION)),
        (bulk("proto"), int(3)),
        (bulk("id"), int(resp::CLIENT_ID)),
        (bulk("mode"), bulk("standalone")),
        (bulk("role"), bulk("master")),
        (bulk("modules"), Value::Array(vec![])),
    ];
    assert_eq!(hello_reply(3, &primary()), Value::Map(expected));
    let Value::Array(flat) = hello_reply(2, &primary()) else {
        panic!("RESP2 HELLO is a flat array");
    };
    assert_eq!(flat.len(), 14);
    assert_eq!(&flat[4..6], &[bulk("proto"), int(2)]);
    let backup = ServerInfo {
        role: "backup".into(),
        ..primary()
    };
    let Value::Map(pairs) = hello_reply(3, &backup) else {
        panic!("RESP3 HELLO is a map");
    };
    assert_eq!(pairs[5], (bulk("role"), bulk("replica")));
}

fn info_text(info: &ServerInfo, section: Option<&str>) -> String {
    match info_reply(info, section) {
        Value::Verbatim(text) => text,
        other => panic!("INFO replied {other:?}"),
    }
}

#[test]
fn info_reports_redis_and_tessera_sections() {
    let text = info_text(&primary(), None);
    assert!(
        text.starts_with("# Server\r\nredis_version:7.0.0\r\n"),
        "{text}"
    );
    for line in [
        "redis_mode:standalone",
        "tessera_version:0.1.0",
        "# Replication",
        "role:master",
        "tessera_role:primary",
        "# Keyspace",
        "db0:keys=5,expires=0,avg_ttl=0",
        "# Tessera",
        "tessera_view:7",
        "tessera_commit_number:42",
        "tessera_replica_index:0",
        "tessera_replicas:3",
        "tessera_protocol:vr",
        "tessera_durability:fsync",
        "tessera_skyros_nilext_fast:3",
    ] {
        assert!(
            text.contains(&format!("{line}\r\n")),
            "{line} missing from {text}"
        );
    }
    assert!(
        text.contains("\r\n\r\n# Replication\r\n"),
        "sections are separated by a blank line"
    );
    assert!(text.ends_with("\r\n"));
    for line in text
        .split("\r\n")
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
    {
        assert!(line.contains(':'), "{line:?} is field:value");
    }
    // Sections on request, in any case and combination; unknown sections are empty.
    assert_eq!(info_text(&primary(), Some("all")), text);
    assert_eq!(info_text(&primary(), Some("default")), text);
    let replication = info_text(&primary(), Some("REPLICATION"));
    assert_eq!(
        replication,
        "# Replication\r\nrole:master\r\ntessera_role:primary\r\n"
    );
    let two = info_text(&primary(), Some("tessera server"));
    assert!(
        two.starts_with("# Server\r\n") && two.contains("\r\n\r\n# Tessera\r\n"),
        "{two}"
    );
    assert!(!two.contains("# Keyspace"));
    assert_eq!(info_text(&primary(), Some("nosuchsection")), "");
    // A backup is a Redis slave; an empty or unknown keyspace lists no database.
    let backup = ServerInfo {
        role: "backup".into(),
        keys: Some(0),
        ..primary()
    };
    let text = info_text(&backup, None);
    assert!(text.contains("role:slave\r\n") && text.contains("tessera_role:backup\r\n"));
    assert!(text.contains("# Keyspace\r\n\r\n"), "{text}");
    let unknown = ServerInfo {
        keys: None,
        ..primary()
    };
    assert!(!info_text(&unknown, Some("keyspace")).contains("db0"));
    // Runtime-provided text cannot break the line format.
    let odd = ServerInfo {
        durability: "a\r\nb".into(),
        ..primary()
    };
    assert!(info_text(&odd, Some("tessera")).contains("tessera_durability:a  b\r\n"));
}

#[test]
fn info_plans_carry_the_requested_sections() {
    assert_eq!(plan(&args(&["INFO"])), Plan::Info { section: None });
    assert_eq!(
        plan(&args(&["info", "Replication"])),
        Plan::Info {
            section: Some("Replication".into())
        }
    );
    assert_eq!(
        plan(&args(&["INFO", "server", "keyspace"])),
        Plan::Info {
            section: Some("server keyspace".into())
        }
    );
}

#[test]
fn finish_turns_store_errors_and_surprises_into_error_replies() {
    let incr = pending(&["INCR", "k"]);
    assert_eq!(
        finish(&incr, &Outcome::Error(KvError::NotAnInteger)),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        finish(&incr, &Outcome::Error(KvError::Overflow)),
        err("ERR increment or decrement would overflow")
    );
    assert_eq!(
        finish(&incr, &Outcome::Error(KvError::Malformed)),
        err("ERR malformed command")
    );
    // An outcome of the wrong shape is an error reply, never a panic.
    let surprise = err("ERR internal error: the store returned an unexpected outcome");
    let outcomes = [
        Outcome::Ok,
        Outcome::Value(None),
        Outcome::Values(vec![None]),
        Outcome::Integer(1),
    ];
    let commands: &[&[&str]] = &[
        &["SET", "k", "v"],
        &["SET", "k", "v", "NX"],
        &["GET", "k"],
        &["STRLEN", "k"],
        &["MGET", "k"],
        &["EXISTS", "k"],
        &["DEL", "k"],
    ];
    for words in commands {
        let pending = pending(words);
        let mut accepted = 0;
        for outcome in &outcomes {
            let reply = finish(&pending, outcome);
            if reply != surprise {
                accepted += 1;
            }
        }
        assert_eq!(accepted, 1, "{words:?} accepts exactly one outcome shape");
    }
}

/// Scores are doubles (RESP3 `,`), WITHSCORES replies pairs, sets are sets and a missing
/// pop answers a nil array: the RESP3 types Redis 7.0 replies with (the encoder downgrades
/// them for RESP2; `runtime::resp_codec` checks the bytes).
#[test]
fn sorted_set_and_set_replies_carry_their_resp3_types() {
    let pair = |member: &str, score: f64| (bulk(member), Value::Double(score));
    script(&[
        (&["zadd", "z", "1", "a", "2.5", "b", "3", "c"], int(3)),
        (&["zscore", "z", "b"], Value::Double(2.5)),
        (&["zscore", "z", "nosuch"], Value::Null),
        (
            &["zmscore", "z", "a", "nosuch"],
            Value::Array(vec![Value::Double(1.0), Value::Null]),
        ),
        (&["zincrby", "z", "0.1", "a"], Value::Double(1.1)),
        (
            &["zadd", "z", "incr", "-0.1", "a"],
            Value::Double(1.1 - 0.1),
        ),
        (
            &["zrange", "z", "1", "-1", "withscores"],
            Value::Pairs(vec![pair("b", 2.5), pair("c", 3.0)]),
        ),
        (
            &["zrange", "z", "1", "-1"],
            Value::Array(vec![bulk("b"), bulk("c")]),
        ),
        (
            &["zpopmax", "z"],
            Value::Array(vec![bulk("c"), Value::Double(3.0)]),
        ),
        (
            &["zpopmin", "z", "1"],
            Value::Pairs(vec![pair("a", 1.1 - 0.1)]),
        ),
        (&["zpopmin", "nosuch"], Value::Array(Vec::new())),
        (&["sadd", "s", "x"], int(1)),
        (&["smembers", "s"], Value::Set(vec![bulk("x")])),
        (&["sinter", "s"], Value::Set(vec![bulk("x")])),
        (&["spop", "s", "5"], Value::Set(vec![bulk("x")])),
        (&["lpop", "nosuch", "2"], Value::NullArray),
        (&["hset", "h", "f", "v"], int(1)),
        (&["hgetall", "h"], Value::Map(vec![(bulk("f"), bulk("v"))])),
        (
            &["hrandfield", "h", "1", "withvalues"],
            Value::Pairs(vec![(bulk("f"), bulk("v"))]),
        ),
    ]);
}

/// ZMPOP, ZRANDMEMBER and ZINTERCARD: replies and argument errors as Redis 7.0's.
#[test]
fn zmpop_zrandmember_and_zintercard_follow_redis_7_0() {
    let scored = |member: &str, score: f64| Value::Array(vec![bulk(member), Value::Double(score)]);
    script(&[
        (&["zadd", "z", "1", "a", "2", "b", "3", "c"], int(3)),
        (&["zmpop", "1", "nosuch", "min"], Value::NullArray),
        (
            &["zmpop", "2", "nosuch", "z", "min"],
            Value::Array(vec![bulk("z"), Value::Array(vec![scored("a", 1.0)])]),
        ),
        (
            &["zmpop", "1", "z", "MAX", "COUNT", "5"],
            Value::Array(vec![
                bulk("z"),
                Value::Array(vec![scored("c", 3.0), scored("b", 2.0)]),
            ]),
        ),
        (&["exists", "z"], int(0)),
        (
            &["zmpop", "0", "z", "min"],
            err("ERR numkeys should be greater than 0"),
        ),
        (&["zmpop", "1", "z", "sideways"], err("ERR syntax error")),
        (&["zmpop", "2", "z", "min"], err("ERR syntax error")),
        (
            &["zmpop", "1", "z", "min", "count", "0"],
            err("ERR count should be greater than 0"),
        ),
        (
            &["zmpop", "1", "z", "min", "count", "1", "x"],
            err("ERR syntax error"),
        ),
        (&["set", "str", "v"], ok()),
        (
            &["zmpop", "1", "str", "min"],
            err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        ),
        (&["zadd", "r", "1", "a"], int(1)),
        (&["zrandmember", "r"], bulk("a")),
        (&["zrandmember", "nosuch"], Value::Null),
        (&["zrandmember", "nosuch", "3"], Value::Array(Vec::new())),
        (&["zrandmember", "r", "0"], Value::Array(Vec::new())),
        (
            &["zrandmember", "r", "-2", "withscores"],
            Value::Pairs(vec![
                (bulk("a"), Value::Double(1.0)),
                (bulk("a"), Value::Double(1.0)),
            ]),
        ),
        (
            &["zrandmember", "r", "1", "scores"],
            err("ERR syntax error"),
        ),
        (
            &["zrandmember", "r", "x"],
            err("ERR value is not an integer or out of range"),
        ),
        (&["zadd", "y", "1", "a", "2", "b"], int(2)),
        (&["sadd", "plain", "a", "b"], int(2)),
        (&["zintercard", "2", "r", "y"], int(1)),
        (&["zintercard", "2", "y", "plain"], int(2)),
        (&["zintercard", "2", "y", "plain", "limit", "1"], int(1)),
        (&["zintercard", "2", "y", "plain", "limit", "0"], int(2)),
        (
            &["zintercard", "0", "y"],
            err("ERR at least 1 input key is needed for 'zintercard' command"),
        ),
        (&["zintercard", "1", "y", "y"], err("ERR syntax error")),
        (&["zintercard", "1", "y", "limit"], err("ERR syntax error")),
        (
            &["zintercard", "1", "y", "limit", "-1"],
            err("ERR LIMIT can't be negative"),
        ),
    ]);
}

/// GETRANGE, SUBSTR, SETRANGE, GETBIT, SETBIT: replies and errors as redis-server 7.0.15's
/// (the same commands were compared with it byte for byte).
#[test]
fn string_ranges_and_bits_follow_redis_7_0() {
    script(&[
        (&["getrange", "nosuch", "0", "-1"], bulk("")),
        (&["set", "s", "Hello World"], ok()),
        (&["getrange", "s", "0", "4"], bulk("Hello")),
        (&["getrange", "s", "-5", "-1"], bulk("World")),
        (&["getrange", "s", "5", "3"], bulk("")),
        (&["getrange", "s", "-1", "-5"], bulk("")),
        (&["getrange", "s", "0", "100"], bulk("Hello World")),
        (&["substr", "s", "-100", "2"], bulk("Hel")),
        (
            &["getrange", "s", "x", "2"],
            err("ERR value is not an integer or out of range"),
        ),
        (&["setrange", "nosuch", "5", ""], int(0)),
        (&["exists", "nosuch"], int(0)),
        (&["setrange", "s", "6", "Redis"], int(11)),
        (&["get", "s"], bulk("Hello Redis")),
        (&["setrange", "new", "3", "ab"], int(5)),
        (&["get", "new"], Value::Bulk(b"\0\0\0ab".to_vec())),
        (
            &["setrange", "s", "-1", "x"],
            err("ERR offset is out of range"),
        ),
        (
            &["setrange", "s", "536870908", "world"],
            err("ERR string exceeds maximum allowed size (proto-max-bulk-len)"),
        ),
        (&["setrange", "s", "5", ""], int(11)),
        (&["lpush", "l", "a"], int(1)),
        (
            &["setrange", "l", "0", "x"],
            err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        ),
        (&["getbit", "nosuch", "0"], int(0)),
        (&["setbit", "b", "7", "1"], int(0)),
        (&["get", "b"], bulk("\u{1}")),
        (&["getbit", "b", "7"], int(1)),
        (&["getbit", "b", "100"], int(0)),
        (&["setbit", "b", "7", "0"], int(1)),
        (
            &["setbit", "b", "7", "2"],
            err("ERR bit is not an integer or out of range"),
        ),
        (
            &["setbit", "b", "4294967296", "1"],
            err("ERR bit offset is not an integer or out of range"),
        ),
        (
            &["getbit", "b", "-1"],
            err("ERR bit offset is not an integer or out of range"),
        ),
        (&["set", "n", "1234"], ok()),
        (&["setbit", "n", "0", "1"], int(0)),
        (&["get", "n"], Value::Bulk(b"\xb1234".to_vec())),
    ]);
}

#[test]
fn stream_commands_parse_as_redis_7_0() {
    use kv::{Command, StreamId, StreamIdChoice, StreamOperation, StreamTrim};
    let planned = |words: &[&str]| match plan(&args(words)) {
        Plan::Execute(pending) => pending.command,
        other => panic!("{words:?}: {other:?}"),
    };
    let refused = |words: &[&str], text: &str| {
        assert_eq!(plan(&args(words)), Plan::Reply(err(text)), "{words:?}")
    };
    assert_eq!(
        planned(&[
            "XADD",
            "s",
            "NOMKSTREAM",
            "MAXLEN",
            "~",
            "10",
            "*",
            "f",
            "v"
        ]),
        Command::Stream {
            key: b"s".to_vec(),
            operation: StreamOperation::Add {
                id: StreamIdChoice::Automatic,
                fields: vec![(b"f".to_vec(), b"v".to_vec())],
                trim: Some(StreamTrim::MaxLength(10)),
                no_create: true,
            },
        }
    );
    assert_eq!(
        planned(&["xadd", "s", "minid", "5-1", "7-*", "f", "v"]),
        Command::Stream {
            key: b"s".to_vec(),
            operation: StreamOperation::Add {
                id: StreamIdChoice::Milliseconds(7),
                fields: vec![(b"f".to_vec(), b"v".to_vec())],
                trim: Some(StreamTrim::MinimumId(StreamId { ms: 5, seq: 1 })),
                no_create: false,
            },
        }
    );
    // XREVRANGE key end start: an exclusive start moves to the next ID.
    assert_eq!(
        planned(&["XREVRANGE", "s", "+", "(3-0", "COUNT", "2"]),
        Command::Stream {
            key: b"s".to_vec(),
            operation: StreamOperation::Range {
                start: StreamId { ms: 3, seq: 1 },
                end: StreamId::MAX,
                count: 2,
                reverse: true,
            }
        }
    );
    refused(
        &["XADD", "s", "*", "f"],
        "ERR wrong number of arguments for 'xadd' command",
    );
    refused(
        &["XADD", "s", "1-x", "f", "v"],
        "ERR Invalid stream ID specified as stream command argument",
    );
    refused(
        &["XADD", "s", "MAXLEN", "-1", "*", "f", "v"],
        "ERR The MAXLEN argument must be >= 0.",
    );
    refused(
        &["XADD", "s", "MAXLEN", "1", "MINID", "1", "*", "f", "v"],
        "ERR syntax error, MAXLEN and MINID options at the same time are not compatible",
    );
    refused(&["XTRIM", "s", "LEN", "1"], "ERR syntax error");
    refused(&["XRANGE", "s", "-", "+", "COUNT"], "ERR syntax error");
    refused(
        &["XDEL", "s", "abc"],
        "ERR Invalid stream ID specified as stream command argument",
    );
}

#[test]
fn xread_reads_the_entries_after_each_id_across_streams() {
    let entry = |id: &str, field: &str, value: &str| {
        Value::Array(vec![bulk(id), Value::Array(vec![bulk(field), bulk(value)])])
    };
    script(&[
        (&["XADD", "a", "1-1", "f", "1"], bulk("1-1")),
        (&["XADD", "a", "2-1", "f", "2"], bulk("2-1")),
        (&["XADD", "b", "5-0", "g", "5"], bulk("5-0")),
        (
            &["XREAD", "STREAMS", "a", "b", "1-1", "0"],
            Value::Streams(vec![
                (bulk("a"), Value::Array(vec![entry("2-1", "f", "2")])),
                (bulk("b"), Value::Array(vec![entry("5-0", "g", "5")])),
            ]),
        ),
        // COUNT bounds each stream; an absent stream and `$` contribute nothing.
        (
            &[
                "xread", "count", "1", "streams", "a", "missing", "b", "0-0", "0", "$",
            ],
            Value::Streams(vec![(
                bulk("a"),
                Value::Array(vec![entry("1-1", "f", "1")]),
            )]),
        ),
        (&["XREAD", "STREAMS", "a", "2-1"], Value::NullArray),
        (&["XREAD", "STREAMS", "a", "$"], Value::NullArray),
        (&["SET", "s", "x"], ok()),
        (
            &["XREAD", "STREAMS", "a", "s", "0", "0"],
            err("WRONGTYPE Operation against a key holding the wrong kind of value"),
        ),
    ]);
    // RESP2: an array of [name, entries].
    let reply = Value::Streams(vec![(bulk("a"), Value::Array(vec![]))]).into_resp2();
    assert_eq!(
        reply,
        Value::Array(vec![Value::Array(vec![bulk("a"), Value::Array(vec![])])])
    );
    // A blocking XREAD is planned as one (0: for ever).
    assert_eq!(
        pending(&["XREAD", "BLOCK", "0", "STREAMS", "a", "$"]).blocking_ms(),
        Some(0)
    );
    assert_eq!(pending(&["XREAD", "STREAMS", "a", "0"]).blocking_ms(), None);
    let refused = |words: &[&str], text: &str| {
        assert_eq!(plan(&args(words)), Plan::Reply(err(text)), "{words:?}");
    };
    refused(
        &["XREAD", "STREAMS", "a", "b", "0"],
        "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
    );
    refused(&["XREAD", "COUNT", "1", "a", "0"], "ERR syntax error");
    refused(
        &["XREAD", "COUNT", "x", "STREAMS", "a", "0"],
        "ERR value is not an integer or out of range",
    );
    refused(
        &["XREAD", "BLOCK", "-1", "STREAMS", "a", "0"],
        "ERR timeout is negative",
    );
    refused(
        &["XREAD", "BLOCK", "1.5", "STREAMS", "a", "0"],
        "ERR timeout is not an integer or out of range",
    );
    refused(
        &["XREAD", "STREAMS", "a", "1-x"],
        "ERR Invalid stream ID specified as stream command argument",
    );
    refused(
        &["XREAD", "STREAMS", "a", ">"],
        "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
    );
    refused(
        &["XREAD", "STREAMS", "a"],
        "ERR wrong number of arguments for 'xread' command",
    );
}
