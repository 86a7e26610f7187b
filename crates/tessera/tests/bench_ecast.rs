//! `tessera bench ecast` against a real 6-process, 3-router `sequenced` cluster (ports
//! 13250–13452, loopback): its messages go through `Frame::SenderRequest` to the routers, are
//! reported stable to a sender outside the storage processes, and are applied by the storage
//! processes (or, with `--no-apply`, delivered without touching the store). No rate is
//! asserted: only that messages complete, none fail, and the store shows exactly what was sent.

mod support;

use resp::Value;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::{arguments, RespClient};

/// RESP on 13250..=13255, E-Cast on 13350..=13355, routers on 13450..=13452.
const PORT: u16 = 13250;
const NODES: u16 = 6;

struct Dev(Child);

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.0.kill(); // Its processes exit with it (their standard input closes).
        let _ = self.0.wait();
    }
}

fn call(port: u16, words: &[&str]) -> Option<Value> {
    RespClient::connect(port, Duration::from_secs(1))
        .ok()?
        .call(&arguments(words))
        .ok()
}

fn dbsize() -> i64 {
    match call(PORT, &["DBSIZE"]) {
        Some(Value::Integer(count)) => count,
        other => panic!("DBSIZE answered {other:?}"),
    }
}

/// Runs `tessera bench ecast` and returns its JSON line.
fn bench(cluster: &Path, json: &Path, extra: &[&str]) -> String {
    let status = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["bench", "ecast", "--cluster"])
        .arg(cluster)
        .args([
            "--senders",
            "2",
            "--window",
            "8",
            "--duration",
            "1",
            "--warmup",
            "0.2",
        ])
        .args(["--keyspace", "40", "--json"])
        .arg(json)
        .args(extra)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "tessera bench ecast failed");
    std::fs::read_to_string(json).unwrap()
}

fn number(json: &str, field: &str) -> u64 {
    let at = json.find(&format!("\"{field}\":")).expect(field) + field.len() + 3;
    json[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

#[test]
fn messages_submitted_straight_to_the_routers_become_stable_and_are_applied_or_not() {
    let directory =
        std::env::temp_dir().join(format!("tessera-bench-ecast-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    let log = std::fs::File::create(
        std::env::temp_dir().join(format!("tessera-bench-ecast-{}.log", std::process::id())),
    )
    .unwrap();
    let _dev = Dev(Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args([
            "dev",
            "--insecure",
            "--protocol",
            "sequenced",
            "--nodes",
            "6",
            "--replication",
            "3",
        ])
        .args(["--routers", "3", "--port", &PORT.to_string(), "--data-dir"])
        .arg(&directory)
        .stdin(Stdio::piped())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ready = (0..NODES).all(|node| {
            call(PORT + node, &["SET", "ready", "1"]) == Some(Value::Simple("OK".to_string()))
        });
        if ready {
            break;
        }
        assert!(Instant::now() < deadline, "the cluster did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    let cluster = directory.join("cluster.toml");
    assert_eq!(dbsize(), 1);

    // Not applied: every message completes (stable), the store is untouched.
    let json = bench(&cluster, &directory.join("no-apply.json"), &["--no-apply"]);
    assert!(number(&json, "operations") > 0, "{json}");
    assert_eq!(number(&json, "errors"), 0, "{json}");
    assert!(json.contains("\"applied\":false"), "{json}");
    assert_eq!(dbsize(), 1, "empty payloads wrote nothing");

    // Applied: the keys written are there, with the bench's 8-byte values.
    let json = bench(&cluster, &directory.join("apply.json"), &[]);
    assert!(number(&json, "operations") > 0, "{json}");
    assert_eq!(number(&json, "errors"), 0, "{json}");
    let keys = dbsize() - 1;
    assert!((1..=40).contains(&keys), "{keys} keys of 40 possible");
    let Some(Value::Array(names)) = call(PORT + 3, &["KEYS", "key:*"]) else {
        panic!("KEYS failed");
    };
    assert_eq!(names.len() as i64, keys);
    for name in names {
        let Value::Bulk(name) = name else {
            panic!("a key name is {name:?}");
        };
        let name = String::from_utf8(name).unwrap();
        assert_eq!(
            call(PORT + 1, &["GET", &name]),
            Some(Value::Bulk(b"vvvvvvvv".to_vec())),
            "{name}"
        );
    }
    let _ = std::fs::remove_dir_all(&directory);
}
