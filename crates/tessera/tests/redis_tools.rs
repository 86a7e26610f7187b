//! `tessera dev` (its default cluster: 3 routers and 3 storage processes hosting partition
//! groups) works with the real Redis tools, unmodified, and leaves no process behind.
//! `scripts/test` installs redis-tools (Debian) when they are missing.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::redis_cli;

/// `tessera dev`, killed if the test fails before it stops it (its processes exit with it).
struct DevGuard(std::process::Child);

impl Drop for DevGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The cluster's processes still running (routers and storage processes).
fn node_processes(data_dir: &str) -> usize {
    let output = Command::new("pgrep")
        .arg("-f")
        .arg(format!("node --cluster {data_dir}/"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout).lines().count()
}

#[test]
fn redis_cli_and_redis_benchmark_run_unmodified_against_tessera_dev() {
    run_redis_tools("vr", 7801);
}

#[test]
fn redis_cli_and_redis_benchmark_run_unmodified_against_tessera_dev_under_skyros() {
    run_redis_tools("skyros", 7851);
}

fn run_redis_tools(protocol: &str, port: u16) {
    let data_dir = std::env::temp_dir().join(format!(
        "tessera-test-redis-tools-{protocol}-{}",
        std::process::id()
    ));
    let data_dir_text = data_dir.display().to_string();
    let mut dev = DevGuard(
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args([
                "dev",
                "--insecure",
                "--protocol",
                protocol,
                "--port",
                &port.to_string(),
                "--pg-port",
                &(port + 300).to_string(),
                "--data-dir",
                &data_dir_text,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(dev.0.stdout.take().unwrap()).lines();
    let ready = lines.next().expect("tessera dev prints a line").unwrap();
    assert!(ready.starts_with("Tessera dev cluster ready"), "{ready}");
    let connect_hint = lines.next().unwrap().unwrap();
    assert!(
        connect_hint.contains(&format!("redis-cli -p {port}")),
        "{connect_hint}"
    );
    std::thread::spawn(move || for _ in lines {});

    // Every storage process serves every command.
    assert_eq!(redis_cli(port, &["PING"]), "PONG");
    assert_eq!(redis_cli(port + 1, &["SET", "greeting", "hello"]), "OK");
    assert_eq!(redis_cli(port + 2, &["GET", "greeting"]), "hello");
    assert_eq!(redis_cli(port, &["INCR", "visits"]), "1");
    assert_eq!(redis_cli(port, &["MSET", "a", "1", "b", "2"]), "OK");
    assert_eq!(redis_cli(port + 1, &["MGET", "a", "b"]), "1\n2");
    assert_eq!(redis_cli(port + 1, &["EXISTS", "a", "missing"]), "1");
    assert_eq!(redis_cli(port, &["SET", "t", "v", "EX", "10"]), "OK");
    let ttl: i64 = redis_cli(port + 2, &["TTL", "t"]).parse().unwrap();
    assert!((9..=10).contains(&ttl), "{ttl}");
    assert!(redis_cli(port, &["NOSUCHCOMMAND"]).contains("unknown command"));
    assert!(redis_cli(port, &["INFO", "replication"]).contains("role:"));
    let info = redis_cli(port + 1, &["INFO", "tessera"]);
    assert!(
        info.contains(&format!("tessera_protocol:{protocol}")),
        "{info}"
    );

    let output = Command::new("redis-benchmark")
        .args([
            "-p",
            &port.to_string(),
            "-t",
            "set,get,incr,mset",
            "-n",
            "3000",
            "-c",
            "10",
            "-q",
        ])
        .output()
        .expect("redis-benchmark is installed (scripts/test installs redis-tools)");
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{report}");
    for test in ["SET", "GET", "INCR", "MSET"] {
        assert!(
            report
                .lines()
                .any(|line| line.contains(test) && line.contains("requests per second")),
            "{test} missing in:\n{report}"
        );
    }
    check_metrics(port + 400, port + 500);
    if protocol == "skyros" {
        // The writes went the one-round-trip way (redis-benchmark's SET and MSET are nilext).
        let info = redis_cli(port, &["INFO", "tessera"]);
        let fast: u64 = info
            .lines()
            .find_map(|line| line.strip_prefix("tessera_bypass_nilext_fast:"))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(0);
        assert!(fast >= 3000, "few one-round-trip writes: {info}");
    }

    // Ctrl-C stops every process: 3 routers and 3 storage processes.
    assert_eq!(node_processes(&data_dir_text), 6);
    Command::new("kill")
        .args(["-INT", &dev.0.id().to_string()])
        .status()
        .unwrap();
    let status = dev.0.wait().unwrap();
    assert!(
        status.success(),
        "tessera dev exits cleanly on Ctrl-C: {status}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while node_processes(&data_dir_text) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        node_processes(&data_dir_text),
        0,
        "no node outlives tessera dev"
    );
    let _ = std::fs::remove_dir_all(&data_dir);
}

/// One HTTP request to a metrics endpoint; the whole response.
fn http(port: u16, request: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let _ = stream.write_all(request);
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
}

/// `tessera dev`'s Prometheus endpoints (storage processes at `storage_base + i`, routers at
/// `router_base + i`): every partition group has exactly one primary among the storage
/// processes, the router group one among the routers, the RESP latency histogram counted the
/// commands above, and bad requests get HTTP errors.
fn check_metrics(storage_base: u16, router_base: u16) {
    let get = b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n";
    let value = |text: &str, prefix: &str| -> Vec<u64> {
        text.lines()
            .filter(|line| line.starts_with(prefix))
            .filter_map(|line| line.rsplit(' ').next()?.parse().ok())
            .collect()
    };
    let storage: Vec<String> = (0..3).map(|i| http(storage_base + i, get)).collect();
    for text in &storage {
        assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
        assert!(
            text.contains("tessera_partition_replicas{role=\"storage\"} 3"),
            "{text}"
        );
    }
    let primaries: u64 = storage
        .iter()
        .flat_map(|text| value(text, "tessera_replica_primary{"))
        .sum();
    assert_eq!(primaries, 3, "one primary per partition group");
    let commands: u64 = storage
        .iter()
        .flat_map(|text| value(text, "tessera_resp_command_seconds_count"))
        .sum();
    assert!(commands > 3000, "RESP commands counted: {commands}");
    let routers: Vec<String> = (0..3).map(|i| http(router_base + i, get)).collect();
    let router_primaries: u64 = routers
        .iter()
        .flat_map(|text| {
            value(
                text,
                "tessera_replica_primary{role=\"router\",group=\"router\"",
            )
        })
        .sum();
    assert_eq!(router_primaries, 1, "{routers:?}");
    assert!(http(storage_base, b"GET /other HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
    assert!(http(storage_base, b"POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
    // Just above the 8 KiB limit, all of it read before the answer (no reset).
    let oversized = [b'x'; 9 * 1024];
    assert!(http(storage_base, &oversized).starts_with("HTTP/1.1 400"));
    // The endpoint still serves after the bad requests.
    assert!(http(storage_base, get).starts_with("HTTP/1.1 200 OK"));
}
