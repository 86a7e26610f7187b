//! CONFIG GET/SET against `tessera dev` with redis-cli: the encoding thresholds are set
//! cluster-wide (a SET through one storage process decides the encodings keys get through
//! the others), Redis 7.0's error replies, and a disk cluster that restarts keeps them.

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use support::redis_cli;

/// `tessera dev`, killed if the test fails before it stops it.
struct DevGuard(Child);

impl Drop for DevGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `tessera dev` (3 storage processes on `port`…`port + 2`) and waits until it is ready.
fn start(protocol: &str, durability: &str, port: u16, data_dir: &Path) -> DevGuard {
    let mut dev = DevGuard(
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args([
                "dev",
                "--insecure",
                "--protocol",
                protocol,
                "--durability",
                durability,
                "--port",
                &port.to_string(),
                "--pg-port",
                "0",
                "--metrics-port",
                "0",
                "--data-dir",
                &data_dir.display().to_string(),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(dev.0.stdout.take().unwrap()).lines();
    let ready = lines.next().expect("tessera dev prints a line").unwrap();
    assert!(ready.starts_with("Tessera dev cluster ready"), "{ready}");
    std::thread::spawn(move || for _ in lines {});
    dev
}

/// Stops `tessera dev` as Ctrl-C does and waits for it.
fn stop(mut dev: DevGuard) {
    let pid = dev.0.id().to_string();
    Command::new("kill").args(["-INT", &pid]).status().unwrap();
    dev.0.wait().unwrap();
}

fn config_errors_are_redis_7s(port: u16) {
    assert_eq!(
        redis_cli(port, &["CONFIG", "SET", "maxmemory-policy", "noeviction"]),
        "ERR Unknown option or number of arguments for CONFIG SET - 'maxmemory-policy'"
    );
    assert_eq!(
        redis_cli(port, &["CONFIG", "SET", "hash-max-listpack-entries", "x"]),
        "ERR CONFIG SET failed (possibly related to argument 'hash-max-listpack-entries') - argument couldn't be parsed into an integer"
    );
    assert_eq!(
        redis_cli(port, &["CONFIG", "SET", "zset-max-listpack-value", "-1"]),
        "ERR CONFIG SET failed (possibly related to argument 'zset-max-listpack-value') - argument must be a memory value"
    );
    assert_eq!(
        redis_cli(port, &["CONFIG", "SET", "set-max-intset-entries"]),
        "ERR wrong number of arguments for 'config|set' command"
    );
    // All or nothing: the bad second pair leaves the first unset.
    assert_eq!(
        redis_cli(
            port,
            &["CONFIG", "SET", "set-max-intset-entries", "3", "save", ""]
        ),
        "ERR Unknown option or number of arguments for CONFIG SET - 'save'"
    );
    assert_eq!(
        redis_cli(port, &["CONFIG", "GET", "set-max-intset-entries"]),
        "set-max-intset-entries\n512"
    );
}

fn thresholds_apply_cluster_wide(port: u16) {
    assert_eq!(
        redis_cli(
            port,
            &[
                "CONFIG",
                "GET",
                "zset-max-ziplist-entries",
                "hash-max-*-value"
            ]
        )
        .lines()
        .count(),
        6,
        "the alias asked for and both names of hash-max-listpack-value"
    );
    assert_eq!(redis_cli(port, &["ZADD", "before", "1", "a"]), "1");
    assert_eq!(
        redis_cli(
            port,
            &[
                "CONFIG",
                "SET",
                "zset-max-ziplist-entries",
                "0",
                "hash-max-listpack-value",
                "1kb"
            ]
        ),
        "OK"
    );
    // Another storage process sees the setting, and every key, wherever it lies on the ring,
    // gets the encoding it decides.
    assert_eq!(
        redis_cli(port + 1, &["CONFIG", "GET", "zset-max-listpack-entries"]),
        "zset-max-listpack-entries\n0"
    );
    for index in 0..20 {
        let key = format!("z{index}");
        assert_eq!(redis_cli(port + 2, &["ZADD", &key, "1", "a"]), "1");
        assert_eq!(
            redis_cli(port + 1, &["OBJECT", "ENCODING", &key]),
            "skiplist"
        );
    }
    // A key made before keeps its layout until a write touches it.
    assert_eq!(
        redis_cli(port, &["OBJECT", "ENCODING", "before"]),
        "listpack"
    );
    assert_eq!(redis_cli(port, &["ZADD", "before", "2", "b"]), "1");
    assert_eq!(
        redis_cli(port, &["OBJECT", "ENCODING", "before"]),
        "skiplist"
    );
    // 1kb is 1024 bytes: a 1000-byte value stays in a listpack.
    let long = "v".repeat(1000);
    assert_eq!(redis_cli(port, &["HSET", "h", "f", &long]), "1");
    assert_eq!(redis_cli(port, &["OBJECT", "ENCODING", "h"]), "listpack");
}

/// MEMORY USAGE: nil for a missing key, Redis 7.0's errors, and an estimate that grows with
/// the value and with the layout (a table costs more than a listpack of the same fields).
fn memory_usage_estimates_bytes(port: u16) {
    let usage = |key: &str, extra: &[&str]| -> i64 {
        let mut words = vec!["MEMORY", "USAGE", key];
        words.extend_from_slice(extra);
        let reply = redis_cli(port, &words);
        reply
            .parse()
            .unwrap_or_else(|_| panic!("{words:?}: {reply}"))
    };
    assert_eq!(redis_cli(port, &["MEMORY", "USAGE", "missing"]), "");
    assert_eq!(
        redis_cli(port, &["MEMORY", "USAGE", "m", "SAMPLES", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        redis_cli(port, &["MEMORY", "USAGE", "m", "SAMPLES", "-1"]),
        "ERR syntax error"
    );
    assert_eq!(redis_cli(port, &["SET", "s1", "x"]), "OK");
    assert_eq!(redis_cli(port, &["SET", "s2", &"x".repeat(1000)]), "OK");
    assert_eq!(usage("s2", &[]) - usage("s1", &[]), 999);
    for field in 0..10 {
        let field = field.to_string();
        redis_cli(port, &["HSET", "small", &field, "v"]);
        redis_cli(port, &["HSET", "big", &field, "v"]);
    }
    redis_cli(port, &["CONFIG", "SET", "hash-max-listpack-entries", "0"]);
    redis_cli(port, &["HSET", "big", "10", "v"]);
    redis_cli(port, &["HDEL", "big", "10"]);
    assert_eq!(redis_cli(port, &["OBJECT", "ENCODING", "big"]), "hashtable");
    assert!(usage("big", &["SAMPLES", "0"]) > usage("small", &["SAMPLES", "0"]));
    redis_cli(port, &["CONFIG", "SET", "hash-max-listpack-entries", "128"]);
}

#[test]
fn config_set_changes_encodings_on_every_process_of_a_sequenced_cluster() {
    let port = 33210;
    let data_dir = std::env::temp_dir().join(format!("tessera-config-seq-{}", std::process::id()));
    let dev = start("sequenced", "memory", port, &data_dir);
    config_errors_are_redis_7s(port);
    thresholds_apply_cluster_wide(port);
    memory_usage_estimates_bytes(port);
    stop(dev);
    let _ = std::fs::remove_dir_all(&data_dir);
}

#[test]
fn a_disk_cluster_keeps_its_thresholds_through_a_restart() {
    let port = 33220;
    let data_dir = std::env::temp_dir().join(format!("tessera-config-disk-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data_dir);
    let dev = start("vr", "disk", port, &data_dir);
    config_errors_are_redis_7s(port);
    thresholds_apply_cluster_wide(port);
    stop(dev);
    let dev = start("vr", "disk", port, &data_dir);
    assert_eq!(
        redis_cli(port + 2, &["CONFIG", "GET", "zset-max-listpack-entries"]),
        "zset-max-listpack-entries\n0"
    );
    assert_eq!(redis_cli(port, &["ZADD", "after", "1", "a"]), "1");
    assert_eq!(
        redis_cli(port + 1, &["OBJECT", "ENCODING", "after"]),
        "skiplist"
    );
    assert_eq!(
        redis_cli(port + 1, &["OBJECT", "ENCODING", "before"]),
        "skiplist"
    );
    stop(dev);
    let _ = std::fs::remove_dir_all(&data_dir);
}
