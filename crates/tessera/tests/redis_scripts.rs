//! Redis scripts (EVAL, EVALSHA, EVAL_RO, SCRIPT, FUNCTION) against the cluster `tessera dev`
//! starts (`skyros` partition groups), with redis-cli and a raw RESP client: keys chosen in
//! different partitions (asserted), Redis's error bytes, and a concurrent workload of
//! conditional transfers by script whose total and non-negative balances are checked by every
//! read. Ports: 31000 (SQL 31050) and 31300 (SQL 31350), and +100 and +200 above each.

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
    // A key the script did not declare is refused, as Redis Cluster refuses a non-local key
    // (the SET before it is kept, as Redis keeps a script's writes before an error).
    let undeclared = "redis.call('set', KEYS[1], 'changed') return redis.call('get', ARGV[1])";
    assert_eq!(
        call(ports[2], &["EVAL", undeclared, "1", a, b]),
        error(&format!(
            "ERR Script attempted to access a non local key in a cluster node script: {}, on @user_script:1.",
            sha(undeclared)
        ))
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
    let cluster = PartitionedCluster::dev("redis-scripts", PartitionMode::Skyros, 31000, 31050);
    redis_cli_scripts_and_error_bytes(&cluster);
    let [a, _] = <[String; 2]>::try_from(spread(&cluster, "script", 2)).unwrap();
    // The undeclared-key script's SET, before its error, was kept (as Redis keeps it).
    assert_eq!(redis_cli(cluster.client_ports[0], &["GET", &a]), "changed");
    // A script past the time limit is killed and writes nothing.
    let looping = "redis.call('set', KEYS[1], 'looped') while true do end";
    let reply = call(cluster.client_ports[1], &["EVAL", looping, "1", &a]);
    assert!(
        matches!(&reply, Value::Error(text) if text.starts_with("ERR Script killed")),
        "{reply:?}"
    );
    assert_eq!(redis_cli(cluster.client_ports[0], &["GET", &a]), "changed");
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
        PartitionedCluster::dev("redis-scripts-bank", PartitionMode::Skyros, 31300, 31350);
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
