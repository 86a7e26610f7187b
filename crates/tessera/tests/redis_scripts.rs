//! Redis scripts (EVAL, EVALSHA, EVAL_RO, SCRIPT, FUNCTION) against the cluster `tessera dev`
//! starts (`skyros` partition groups), with redis-cli and a raw RESP client: keys chosen in
//! different partitions (asserted), Redis's error bytes, and a concurrent workload of
//! conditional transfers by script whose total and non-negative balances are checked by every
//! read. Ports: 15540 (SQL 15590), 15550 (SQL 15593) and 15560 (SQL 15596), and +100 and
//! +200 above each.

mod support;

use resp::Value;
use runtime::ecast::config::PartitionMode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::partitioned::PartitionedCluster;
use support::{arguments, redis_cli, RespClient};

/// Keys `{prefix}0…` in `count` different partitions (asserted), by name.
fn spread(cluster: &PartitionedCluster, prefix: &str, count: usize) -> Vec<String> {
    let keys = cluster.keys_in_partitions(prefix, count);
    assert_eq!(keys.len(), count);
    for (index, (_, partition)) in keys.iter().enumerate() {
        assert!(
            keys[..index].iter().all(|(_, other)| other != partition),
            "{keys:?} are in different partitions"
        );
    }
    keys.into_iter().map(|(key, _)| key).collect()
}

/// A raw reply's bytes: the error texts are compared byte for byte.
fn call(port: u16, words: &[&str]) -> Value {
    let mut client = RespClient::connect(port, Duration::from_secs(5)).unwrap();
    client.call(&arguments(words)).unwrap()
}

fn error(text: &str) -> Value {
    Value::Error(text.to_string())
}

/// SHA1 of a script body, as redis-cli's `SCRIPT LOAD` reports it (and `sha1sum`).
fn sha(body: &str) -> String {
    script::sha1_hex(body.as_bytes())
}

fn redis_cli_scripts_and_error_bytes(cluster: &PartitionedCluster) {
    let ports = &cluster.client_ports;
    let [a, b] = <[String; 2]>::try_from(spread(cluster, "script", 2)).unwrap();
    let (a, b) = (a.as_str(), b.as_str());
    // A script writing two keys in two partitions, through one gateway; read through another.
    let body = "redis.call('set', KEYS[1], ARGV[1]) redis.call('rpush', KEYS[2], ARGV[2], ARGV[1]) return {redis.call('get', KEYS[1]), redis.call('llen', KEYS[2]), false, 2.9, {ok='fine'}}";
    assert_eq!(
        redis_cli(ports[0], &["EVAL", body, "2", a, b, "one", "two"]),
        "one\n2\n\n2\nfine"
    );
    assert_eq!(redis_cli(ports[1], &["GET", a]), "one");
    assert_eq!(redis_cli(ports[2], &["LRANGE", b, "0", "-1"]), "two\none");
    // SCRIPT LOAD and EVALSHA: the cache is the gateway's (another answers NOSCRIPT).
    let loaded = redis_cli(ports[0], &["SCRIPT", "LOAD", "return {KEYS[1], ARGV[1]}"]);
    assert_eq!(loaded, sha("return {KEYS[1], ARGV[1]}"));
    assert_eq!(
        redis_cli(ports[0], &["EVALSHA", &loaded, "1", a, "x"]),
        format!("{a}\nx")
    );
    assert_eq!(
        redis_cli(ports[0], &["SCRIPT", "EXISTS", &loaded, &"f".repeat(40)]),
        "1\n0"
    );
    assert_eq!(
        call(ports[1], &["EVALSHA", &loaded, "0"]),
        error("NOSCRIPT No matching script. Please use EVAL.")
    );
    assert_eq!(redis_cli(ports[0], &["SCRIPT", "FLUSH"]), "OK");
    assert_eq!(redis_cli(ports[0], &["SCRIPT", "EXISTS", &loaded]), "0");
    // EVAL_RO reads, and refuses a write.
    assert_eq!(
        redis_cli(
            ports[1],
            &["EVAL_RO", "return redis.call('get', KEYS[1])", "1", a]
        ),
        "one"
    );
    let write = "return redis.call('set',KEYS[1],'x')";
    assert_eq!(
        call(ports[1], &["EVAL_RO", write, "1", a]),
        error(&format!(
            "ERR Write commands are not allowed from read-only scripts. script: {}, on @user_script:1.",
            sha(write)
        ))
    );
    // A key the script did not declare is served, as a single Redis serves it (the script
    // runs again with it reserved): here `b`, in another partition.
    let undeclared =
        "redis.call('set', KEYS[1], 'changed') return redis.call('lrange', ARGV[1], 0, -1)";
    assert_eq!(
        redis_cli(ports[2], &["EVAL", undeclared, "1", a, b]),
        "two\none"
    );
    // Wrong arity: of EVAL itself, and of a command a script calls.
    assert_eq!(
        call(ports[0], &["EVAL", "return 1"]),
        error("ERR wrong number of arguments for 'eval' command")
    );
    assert_eq!(
        call(ports[0], &["EVAL", "return 1", "2", a]),
        error("ERR Number of keys can't be greater than number of args")
    );
    assert_eq!(
        call(ports[0], &["EVAL", "return 1", "-1"]),
        error("ERR Number of keys can't be negative")
    );
    let arity = "return redis.call('set', KEYS[1])";
    assert_eq!(
        call(ports[0], &["EVAL", arity, "1", a]),
        error(&format!(
            "ERR Wrong number of args calling Redis command from script script: {}, on @user_script:1.",
            sha(arity)
        ))
    );
    assert_eq!(
        call(
            ports[0],
            &["EVAL", "return redis.pcall('set', KEYS[1])", "1", a]
        ),
        error("ERR Wrong number of args calling Redis command from script")
    );
    assert_eq!(
        call(ports[0], &["EVAL", "syntax error here", "0"]),
        error(
            "ERR Error compiling script (new function): user_script:1: '=' expected near 'error'"
        )
    );
    assert_eq!(redis_cli(ports[0], &["FUNCTION", "FLUSH"]), "OK");
    assert_eq!(
        call(ports[0], &["FUNCTION", "LIST"]),
        Value::Array(Vec::new())
    );
    assert_eq!(
        call(ports[0], &["FCALL", "f", "0"]),
        error("ERR Function not found")
    );
    assert_eq!(
        call(ports[0], &["SCRIPT", "KILL"]),
        error("NOTBUSY No scripts in execution right now.")
    );
}

#[test]
fn scripts_across_partitions_answer_as_redis_with_redis_cli() {
    let cluster = PartitionedCluster::dev("redis-scripts", PartitionMode::Skyros, 15550, 15593);
    redis_cli_scripts_and_error_bytes(&cluster);
    let [a, _] = <[String; 2]>::try_from(spread(&cluster, "script", 2)).unwrap();
    // The undeclared-key script's SET was committed with its reply.
    assert_eq!(redis_cli(cluster.client_ports[0], &["GET", &a]), "changed");
}

/// Redis 7.0's libraries and RESP3 in scripts, streams written from a script (BullMQ's events),
/// keys built from a declared prefix, and the script time limit as Redis has it: `BUSY` to the
/// gateway's other clients past `busy-reply-threshold`, SCRIPT KILL of a script that has not
/// written, `UNKILLABLE` for one that has. Ports 15540 (SQL 15590), +100, +200.
#[test]
fn script_libraries_streams_undeclared_keys_and_busy_scripts_as_redis_7_0() {
    let cluster = PartitionedCluster::dev("redis-scripts-7", PartitionMode::Vr, 15540, 15590);
    let ports = cluster.client_ports.clone();
    let [a, b] = <[String; 2]>::try_from(spread(&cluster, "lib", 2)).unwrap();
    let (a, b) = (a.as_str(), b.as_str());
    // cmsgpack and cjson round-trip what a client packed; bit and struct as LuaBitOp/struct.
    let body = "local t = cmsgpack.unpack(ARGV[1]) redis.call('set', KEYS[1], cjson.encode(t)) return {redis.call('get', KEYS[1]), bit.tohex(bit.bor(0xf0, 0x0f), -4), #struct.pack('>I4d', 7, 0.5)}";
    let mut client = RespClient::connect(ports[0], Duration::from_secs(5)).unwrap();
    let reply = client
        .call(&[
            b"EVAL".to_vec(),
            body.as_bytes().to_vec(),
            b"1".to_vec(),
            a.as_bytes().to_vec(),
            vec![0x81, 0xa1, b'b', 0x93, 0x01, 0x02, 0x03],
        ])
        .unwrap();
    assert_eq!(
        reply,
        Value::Array(vec![
            Value::Bulk(b"{\"b\":[1,2,3]}".to_vec()),
            Value::Bulk(b"00FF".to_vec()),
            Value::Integer(12),
        ])
    );
    // EVAL cached the script at that gateway (INFO's memory section counts the cache).
    assert!(
        redis_cli(ports[0], &["INFO", "memory"]).contains("number_of_cached_scripts:1"),
        "{}",
        redis_cli(ports[0], &["INFO", "memory"])
    );
    // RESP3 from a script: a map to a RESP2 client is a flat array.
    assert_eq!(redis_cli(ports[1], &["HSET", b, "f", "v"]), "1");
    assert_eq!(
        redis_cli(
            ports[1],
            &[
                "EVAL",
                "redis.setresp(3) return redis.call('hgetall', KEYS[1])",
                "1",
                b
            ]
        ),
        "f\nv"
    );
    assert_eq!(
        call(ports[1], &["EVAL", "cjson.encode = nil", "0"]),
        error(&format!(
            "ERR user_script:1: Attempt to modify a readonly table script: {}, on @user_script:1.",
            sha("cjson.encode = nil")
        ))
    );
    // A stream written by a script at a key built from a declared prefix (undeclared), read
    // back through another gateway; the IDs come from the script's stamp.
    let prefix = format!("{{{a}}}:");
    let events = format!("{prefix}events");
    let add = "local key = KEYS[1] .. 'events' for i = 1, 3 do redis.call('XADD', key, 'MAXLEN', '~', '2', '*', 'n', i) end return redis.call('XLEN', key)";
    assert_eq!(redis_cli(ports[0], &["EVAL", add, "1", &prefix]), "2");
    let range = call(ports[2], &["XRANGE", &events, "-", "+"]);
    let Value::Array(entries) = range else {
        panic!("{range:?}")
    };
    assert_eq!(entries.len(), 2);
    let Value::Array(last) = &entries[1] else {
        panic!("{entries:?}")
    };
    assert_eq!(
        last[1],
        Value::Array(vec![Value::Bulk(b"n".to_vec()), Value::Bulk(b"3".to_vec())])
    );
    assert_eq!(redis_cli(ports[2], &["TYPE", &events]), "stream");
    assert_eq!(
        call(ports[2], &["XADD", &events, "1-1", "f", "v"]),
        error("ERR The ID specified in XADD is equal or smaller than the target stream top item")
    );
    // BUSY: past the threshold, the gateway's other clients are refused; SCRIPT KILL stops a
    // script that has not written, and the script's client gets Redis's text.
    assert_eq!(
        redis_cli(ports[0], &["CONFIG", "SET", "lua-time-limit", "100"]),
        "OK"
    );
    assert_eq!(
        redis_cli(ports[0], &["CONFIG", "GET", "busy-reply-threshold"]),
        "busy-reply-threshold\n100"
    );
    let port = ports[0];
    let looping = std::thread::spawn(move || call(port, &["EVAL", "while true do end", "0"]));
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(
        call(ports[0], &["PING"]),
        error("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.")
    );
    // Another storage process is not busy (its own gateway runs no script).
    assert_eq!(redis_cli(ports[1], &["PING"]), "PONG");
    assert_eq!(redis_cli(ports[0], &["SCRIPT", "KILL"]), "OK");
    let killed = looping.join().unwrap();
    assert!(
        matches!(&killed, Value::Error(text) if text.starts_with("ERR Script killed by user with SCRIPT KILL...")),
        "{killed:?}"
    );
    assert_eq!(redis_cli(ports[0], &["PING"]), "PONG");
    // A script that wrote cannot be killed: UNKILLABLE, and it runs on until it ends; its
    // write is then committed.
    let key = a.to_string();
    let writer = std::thread::spawn(move || {
        // About 6 s of Lua at ~170M loop turns a second (longer on a loaded machine).
        let body = "redis.call('set', KEYS[1], 'written') local n = 0 while n < 1000000000 do n = n + 1 end return n";
        let mut client = RespClient::connect(port, Duration::from_secs(120)).unwrap();
        client.call(&arguments(&["EVAL", body, "1", &key])).unwrap()
    });
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(
        call(ports[0], &["SCRIPT", "KILL"]),
        error("UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.")
    );
    // Past the 5 s lease the key is still the script's (its lease is renewed): a write from
    // another gateway waits for the script's commit and applies after it. Were the lease to
    // lapse, that gateway would release the key and append first, and the script's commit
    // would fail and run it again, ending at "written".
    std::thread::sleep(Duration::from_millis(4_800));
    assert_eq!(redis_cli(ports[2], &["APPEND", a, "x"]), "8");
    assert_eq!(writer.join().unwrap(), Value::Integer(1_000_000_000));
    assert_eq!(redis_cli(ports[1], &["GET", a]), "writtenx");
    assert_eq!(
        redis_cli(ports[0], &["CONFIG", "SET", "busy-reply-threshold", "5000"]),
        "OK"
    );
}

/// The transfer script: moves ARGV[1] from KEYS[1] to KEYS[2] only if KEYS[1] holds that much;
/// 1 if it moved, 0 if not.
const TRANSFER: &str = "
local balance = tonumber(redis.call('get', KEYS[1]))
local amount = tonumber(ARGV[1])
if balance < amount then return 0 end
redis.call('decrby', KEYS[1], amount)
redis.call('incrby', KEYS[2], amount)
return 1";

/// Reads every account at once (any number of keys).
const READ_ALL: &str = "
local balances = {}
for i, key in ipairs(KEYS) do balances[i] = tonumber(redis.call('get', key)) end
return balances";

fn balances(value: &Value) -> Vec<i64> {
    let Value::Array(items) = value else {
        panic!("an array of balances: {value:?}")
    };
    items
        .iter()
        .map(|item| match item {
            Value::Integer(number) => *number,
            Value::Bulk(text) => std::str::from_utf8(text).unwrap().parse().unwrap(),
            other => panic!("a balance: {other:?}"),
        })
        .collect()
}

#[test]
fn concurrent_transfer_scripts_across_partitions_keep_the_total_and_never_overdraw() {
    const ACCOUNTS: usize = 3;
    const INITIAL: i64 = 100;
    const CLIENTS: usize = 4;
    const TRANSFERS: usize = 60;
    let cluster =
        PartitionedCluster::dev("redis-scripts-bank", PartitionMode::Skyros, 15560, 15596);
    let ports = cluster.client_ports.clone();
    let accounts = spread(&cluster, "bank", ACCOUNTS);
    for account in &accounts {
        assert_eq!(
            redis_cli(ports[0], &["SET", account, &INITIAL.to_string()]),
            "OK"
        );
    }
    let moved = Arc::new(AtomicU64::new(0));
    let reads = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..CLIENTS)
        .map(|index| {
            let (accounts, moved) = (accounts.clone(), moved.clone());
            let port = ports[index % ports.len()];
            std::thread::spawn(move || {
                let mut client = RespClient::connect(port, Duration::from_secs(5)).unwrap();
                let mut seed = index as u64 * 7_919 + 13;
                for _ in 0..TRANSFERS {
                    seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    let pick = (seed >> 33) as usize;
                    let from = pick % ACCOUNTS;
                    let to = (from + 1 + (pick / 7) % (ACCOUNTS - 1)) % ACCOUNTS;
                    // Amounts up to 60: many transfers are refused by the script's check.
                    let amount = (1 + (pick / 31) % 60).to_string();
                    let words = [
                        "EVAL",
                        TRANSFER,
                        "2",
                        &accounts[from],
                        &accounts[to],
                        &amount,
                    ];
                    match client.call(&arguments(&words)).unwrap() {
                        Value::Integer(1) => {
                            moved.fetch_add(1, Ordering::Relaxed);
                        }
                        Value::Integer(0) => {}
                        other => panic!("a transfer answered {other:?}"),
                    }
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|index| {
            let (accounts, reads) = (accounts.clone(), reads.clone());
            let port = ports[(index + 1) % ports.len()];
            std::thread::spawn(move || {
                let mut client = RespClient::connect(port, Duration::from_secs(5)).unwrap();
                for turn in 0..80 {
                    let mut words = vec![if turn % 2 == 0 { "EVAL_RO" } else { "MGET" }];
                    if turn % 2 == 0 {
                        words.extend([READ_ALL, "3"]);
                    }
                    words.extend(accounts.iter().map(String::as_str));
                    let seen = balances(&client.call(&arguments(&words)).unwrap());
                    assert_eq!(
                        seen.iter().sum::<i64>(),
                        INITIAL * ACCOUNTS as i64,
                        "{seen:?}"
                    );
                    assert!(seen.iter().all(|balance| *balance >= 0), "{seen:?}");
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for thread in writers.into_iter().chain(readers) {
        thread.join().expect("no invariant broke");
    }
    let moved = moved.load(Ordering::Relaxed);
    assert!(moved > 20, "the workload transferred ({moved})");
    assert_eq!(reads.load(Ordering::Relaxed), 160);
    let words: Vec<&str> = ["EVAL", READ_ALL, "3"]
        .into_iter()
        .chain(accounts.iter().map(String::as_str))
        .collect();
    let last = balances(&call(ports[0], &words));
    assert_eq!(
        last.iter().sum::<i64>(),
        INITIAL * ACCOUNTS as i64,
        "{last:?}"
    );
}

/// A user's key patterns cover the keys a script touches without declaring them, as Redis
/// checks every command a script runs: a reader of `pub:*` may have a script read an undeclared
/// `pub:` key, and is refused one outside its patterns. A secured cluster (AUTH). Ports 15510
/// (SQL 15580), +100, +200.
#[test]
fn a_script_touching_undeclared_keys_is_held_to_the_users_key_patterns() {
    const PASSWORD: &str = "correct horse battery";
    let mut cluster =
        PartitionedCluster::prepare("redis-scripts-acl", 15510, (3, 3, 3), |config| {
            config.partitions = PartitionMode::Vr;
            *config = config.clone().with_pg_ports(15580).unwrap();
            config.security = runtime::security::SecurityConfig::default();
        });
    std::fs::write(
        cluster.directory.join("cluster-secret"),
        "the scripts' cluster secret",
    )
    .unwrap();
    std::fs::write(
        cluster.directory.join("admin-password"),
        format!("{PASSWORD}\n"),
    )
    .unwrap();
    cluster.launch();
    let port = cluster.client_ports[0];
    let login = |user: &str, password: &str| {
        let mut client = RespClient::connect(port, Duration::from_secs(5)).unwrap();
        assert_eq!(
            client.call(&arguments(&["AUTH", user, password])).unwrap(),
            Value::Simple("OK".into())
        );
        client
    };
    let ready = support::partitioned::wait_until(Duration::from_secs(30), || {
        RespClient::connect(port, Duration::from_millis(200))
            .ok()
            .and_then(|mut client| {
                client.call(&arguments(&["AUTH", "admin", PASSWORD])).ok()?;
                client.call(&arguments(&["SET", "pub:x", "public"])).ok()
            })
            == Some(Value::Simple("OK".into()))
    });
    assert!(ready, "the secured cluster became ready");
    let mut admin = login("admin", PASSWORD);
    assert_eq!(
        admin
            .call(&arguments(&["SET", "secret", "hidden"]))
            .unwrap(),
        Value::Simple("OK".into())
    );
    assert_eq!(
        admin
            .call(&arguments(&[
                "ACL", "SETUSER", "reader", "on", ">rpw", "+@all", "~pub:*"
            ]))
            .unwrap(),
        Value::Simple("OK".into())
    );
    let mut reader = login("reader", "rpw");
    let read = "return redis.call('get', ARGV[1])";
    assert_eq!(
        reader
            .call(&arguments(&["EVAL", read, "1", "pub:y", "pub:x"]))
            .unwrap(),
        Value::Bulk(b"public".to_vec())
    );
    assert_eq!(
        reader
            .call(&arguments(&["EVAL", read, "1", "pub:y", "secret"]))
            .unwrap(),
        error("NOPERM this user has no permissions to access one of the keys used as arguments")
    );
}
