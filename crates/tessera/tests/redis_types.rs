//! Hashes, sets, lists, sorted sets and expiring keys through redis-cli against a real
//! `tessera dev`: its default cluster with `skyros` groups, a `sequenced` cluster and `vr`
//! partition groups (keys spread over the ring, so commands reach different partitions).
//! Ports: 7951 (SQL 8251), 17500 and 17510, and +100 and +200 above each.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use support::redis_cli;

/// A running `tessera dev`, stopped (Ctrl-C) when dropped, also when a check fails.
struct Dev {
    child: Child,
    data_dir: std::path::PathBuf,
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let status = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.data_dir);
        if !std::thread::panicking() {
            let status = status.unwrap();
            assert!(status.success(), "tessera dev exits cleanly: {status}");
        }
    }
}

/// Starts `tessera dev` with `arguments` and waits for its ready line.
fn start(name: &str, arguments: &[&str]) -> Dev {
    let data_dir = std::env::temp_dir().join(format!(
        "tessera-test-redis-types-{name}-{}",
        std::process::id()
    ));
    let mut dev = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .arg("dev")
        .arg("--insecure")
        .args(arguments)
        .arg("--data-dir")
        .arg(&data_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(dev.stdout.take().unwrap()).lines();
    let ready = lines.next().expect("tessera dev prints a line").unwrap();
    assert!(ready.starts_with("Tessera dev cluster ready"), "{ready}");
    std::thread::spawn(move || for _ in lines {});
    Dev {
        child: dev,
        data_dir,
    }
}

/// Runs each family through the given gateways in turn (`ports`), checking redis-cli's output.
fn exercise(ports: &[u16]) {
    let mut next = 0;
    let mut cli = |words: &[&str]| {
        next += 1;
        redis_cli(ports[next % ports.len()], words)
    };
    // Hashes.
    assert_eq!(cli(&["HSET", "h", "f1", "v1", "f2", "v2"]), "2");
    assert_eq!(cli(&["HGETALL", "h"]), "f1\nv1\nf2\nv2");
    assert_eq!(cli(&["HINCRBY", "h", "n", "5"]), "5");
    assert_eq!(cli(&["HMGET", "h", "f2", "nope", "f2"]), "v2\n\nv2");
    assert_eq!(cli(&["HDEL", "h", "f1", "nope"]), "1");
    assert_eq!(cli(&["HLEN", "h"]), "2");
    // Sets, with a pop drawn from the operation's timestamp.
    assert_eq!(cli(&["SADD", "s", "a", "b", "c", "a"]), "3");
    assert_eq!(cli(&["SISMEMBER", "s", "b"]), "1");
    let popped = cli(&["SPOP", "s"]);
    assert!(["a", "b", "c"].contains(&popped.as_str()), "{popped}");
    assert_eq!(cli(&["SCARD", "s"]), "2");
    assert_eq!(cli(&["SISMEMBER", "s", &popped]), "0");
    // Lists.
    assert_eq!(cli(&["RPUSH", "l", "a", "b", "c"]), "3");
    assert_eq!(cli(&["LPUSH", "l", "z"]), "4");
    assert_eq!(cli(&["LPOP", "l"]), "z");
    assert_eq!(cli(&["LRANGE", "l", "0", "-1"]), "a\nb\nc");
    assert_eq!(cli(&["LPOS", "l", "c"]), "2");
    assert_eq!(cli(&["RPOP", "l", "2"]), "c\nb");
    // Sorted sets, scores formatted as Redis 7.0 does.
    assert_eq!(cli(&["ZADD", "z", "1", "a", "2.5", "b", "-inf", "c"]), "3");
    assert_eq!(
        cli(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        "c\n-inf\na\n1\nb\n2.5"
    );
    assert_eq!(cli(&["ZINCRBY", "z", "0.1", "a"]), "1.1000000000000001");
    assert_eq!(cli(&["ZRANGEBYSCORE", "z", "(1", "+inf"]), "a\nb");
    assert_eq!(cli(&["ZRANK", "z", "b"]), "2");
    assert_eq!(cli(&["ZPOPMAX", "z"]), "b\n2.5");
    // Types.
    assert_eq!(cli(&["TYPE", "h"]), "hash");
    assert_eq!(cli(&["TYPE", "z"]), "zset");
    assert_eq!(
        cli(&["GET", "h"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(
        cli(&["LPUSH", "s", "x"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    // Expiry: the time is the gateway's, stamped when the command is planned.
    assert_eq!(cli(&["EXPIRE", "h", "100"]), "1");
    let ttl: i64 = cli(&["TTL", "h"]).parse().unwrap();
    assert!((99..=100).contains(&ttl), "{ttl}");
    assert_eq!(cli(&["PERSIST", "h"]), "1");
    assert_eq!(cli(&["TTL", "h"]), "-1");
    assert_eq!(cli(&["SET", "t", "v", "PX", "300"]), "OK");
    let pttl: i64 = cli(&["PTTL", "t"]).parse().unwrap();
    assert!((1..=300).contains(&pttl), "{pttl}");
    assert_eq!(cli(&["SETEX", "u", "100", "w"]), "OK");
    assert_eq!(cli(&["GETEX", "u", "PERSIST"]), "w");
    assert_eq!(cli(&["TTL", "u"]), "-1");
    // Well past the expiry (300 ms): gone, for reads and writes alike.
    std::thread::sleep(Duration::from_millis(1_000));
    assert_eq!(cli(&["GET", "t"]), "");
    assert_eq!(cli(&["EXISTS", "t", "h", "s", "l", "z", "u"]), "5");
    assert_eq!(cli(&["APPEND", "t", "x"]), "1");
    assert_eq!(cli(&["GETDEL", "t"]), "x");
    assert_eq!(cli(&["DEL", "h", "s", "l", "z", "u"]), "5");
}

#[test]
fn typed_values_and_expiry_work_through_the_default_cluster_of_skyros_groups() {
    let _dev = start(
        "skyros-default",
        &[
            "--protocol",
            "skyros",
            "--port",
            "7951",
            "--pg-port",
            "8251",
        ],
    );
    exercise(&[7951, 7952, 7953]);
}

#[test]
fn typed_values_and_expiry_work_through_a_partitioned_sequenced_cluster() {
    let _dev = start(
        "sequenced",
        &["--protocol", "sequenced", "--nodes", "3", "--port", "17500"],
    );
    exercise(&[17500, 17501, 17502]);
}

#[test]
fn typed_values_and_expiry_work_through_vr_partition_groups() {
    let _dev = start(
        "vr-partitions",
        &[
            "--protocol",
            "vr",
            "--nodes",
            "3",
            "--port",
            "17510",
            "--pg-port",
            "0",
        ],
    );
    exercise(&[17510, 17511, 17512]);
}
