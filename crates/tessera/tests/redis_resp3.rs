//! RESP3 reply types, the sorted-set commands built with them (ZMPOP, BZMPOP, ZRANDMEMBER,
//! ZINTERCARD) and the introspection commands (INFO clients/stats/commandstats/errorstats,
//! CLIENT UNBLOCK, CONFIG RESETSTAT, SLOWLOG) against `tessera dev`, over a raw socket (the
//! exact bytes, recorded from redis-server 7.0.15) and with redis-cli.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use support::redis_cli;

/// `tessera dev`, killed if the test fails before it stops it.
struct DevGuard(Child);

impl Drop for DevGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a `sequenced` `tessera dev` (3 storage processes on `port`…`port + 2`).
fn start(port: u16, data_dir: &std::path::Path) -> DevGuard {
    let mut dev = DevGuard(
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args([
                "dev",
                "--insecure",
                "--protocol",
                "sequenced",
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

/// A raw RESP connection: sends commands, returns each reply's bytes exactly.
struct Raw {
    reader: BufReader<TcpStream>,
}

impl Raw {
    fn connect(port: u16) -> Raw {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Raw {
            reader: BufReader::new(stream),
        }
    }

    /// Sends `words` and returns the whole reply as text (CRLFs kept).
    fn call(&mut self, words: &[&str]) -> String {
        let mut request = format!("*{}\r\n", words.len());
        for word in words {
            request.push_str(&format!("${}\r\n{word}\r\n", word.len()));
        }
        self.reader.get_mut().write_all(request.as_bytes()).unwrap();
        let mut reply = String::new();
        self.read_value(&mut reply);
        reply
    }

    fn read_value(&mut self, out: &mut String) {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        assert!(
            line.ends_with("\r\n"),
            "a reply line ends in CRLF: {line:?}"
        );
        out.push_str(&line);
        let count = || line[1..line.len() - 2].parse::<i64>().unwrap();
        match line.as_bytes()[0] {
            b'$' | b'=' if count() >= 0 => {
                let mut body = vec![0u8; count() as usize + 2];
                self.reader.read_exact(&mut body).unwrap();
                out.push_str(&String::from_utf8(body).unwrap());
            }
            b'*' | b'~' | b'>' => {
                for _ in 0..count().max(0) {
                    self.read_value(out);
                }
            }
            b'%' => {
                for _ in 0..count() * 2 {
                    self.read_value(out);
                }
            }
            _ => {}
        }
    }
}

/// The bytes redis-server 7.0.15 sends for each (recorded with the same commands).
fn resp3_replies_are_redis_7_0s(port: u16) {
    let mut raw = Raw::connect(port);
    raw.call(&["HELLO", "3"]);
    assert_eq!(
        raw.call(&["ZADD", "z", "1", "a", "2.5", "b", "0.1", "c"]),
        ":3\r\n"
    );
    assert_eq!(raw.call(&["ZSCORE", "z", "b"]), ",2.5\r\n");
    assert_eq!(raw.call(&["ZSCORE", "z", "c"]), ",0.10000000000000001\r\n");
    assert_eq!(raw.call(&["ZSCORE", "z", "nosuch"]), "_\r\n");
    assert_eq!(raw.call(&["ZINCRBY", "z", "1", "a"]), ",2\r\n");
    assert_eq!(raw.call(&["ZMSCORE", "z", "a", "x"]), "*2\r\n,2\r\n_\r\n");
    assert_eq!(
        raw.call(&["ZRANGE", "z", "0", "1", "WITHSCORES"]),
        "*2\r\n*2\r\n$1\r\nc\r\n,0.10000000000000001\r\n*2\r\n$1\r\na\r\n,2\r\n"
    );
    assert_eq!(raw.call(&["ZPOPMAX", "z"]), "*2\r\n$1\r\nb\r\n,2.5\r\n");
    assert_eq!(
        raw.call(&["ZPOPMIN", "z", "1"]),
        "*1\r\n*2\r\n$1\r\nc\r\n,0.10000000000000001\r\n"
    );
    assert_eq!(
        raw.call(&["ZMPOP", "1", "z", "MIN"]),
        "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\na\r\n,2\r\n"
    );
    assert_eq!(raw.call(&["ZMPOP", "1", "z", "MIN"]), "_\r\n");
    assert_eq!(raw.call(&["SADD", "s", "1"]), ":1\r\n");
    assert_eq!(raw.call(&["SMEMBERS", "s"]), "~1\r\n$1\r\n1\r\n");
    assert_eq!(raw.call(&["HSET", "h", "f", "v"]), ":1\r\n");
    assert_eq!(raw.call(&["HGETALL", "h"]), "%1\r\n$1\r\nf\r\n$1\r\nv\r\n");
    assert_eq!(raw.call(&["BLPOP", "nolist", "0.01"]), "_\r\n");
    // The same in RESP2: scores as bulk strings, flat pairs, nil arrays as `*-1`.
    raw.call(&["HELLO", "2"]);
    assert_eq!(raw.call(&["ZADD", "y", "1.5", "m"]), ":1\r\n");
    assert_eq!(
        raw.call(&["ZRANGE", "y", "0", "-1", "WITHSCORES"]),
        "*2\r\n$1\r\nm\r\n$3\r\n1.5\r\n"
    );
    assert_eq!(
        raw.call(&["ZMPOP", "1", "y", "MAX", "COUNT", "3"]),
        "*2\r\n$1\r\ny\r\n*1\r\n*2\r\n$1\r\nm\r\n$3\r\n1.5\r\n"
    );
    assert_eq!(raw.call(&["ZMPOP", "1", "y", "MAX"]), "*-1\r\n");
    assert_eq!(raw.call(&["LPOP", "nolist", "2"]), "*-1\r\n");
    assert_eq!(raw.call(&["BZPOPMIN", "y", "0.01"]), "*-1\r\n");
    assert_eq!(raw.call(&["SMEMBERS", "s"]), "*1\r\n$1\r\n1\r\n");
}

fn new_sorted_set_commands_work_across_the_ring(port: u16) {
    // Keys on different storage processes' arcs; ZMPOP pops from the first that holds one.
    assert_eq!(redis_cli(port, &["ZADD", "zb", "3", "x", "4", "y"]), "2");
    assert_eq!(
        redis_cli(
            port + 1,
            &["ZMPOP", "3", "za", "zb", "zc", "MAX", "COUNT", "5"]
        ),
        "zb\ny\n4\nx\n3"
    );
    assert_eq!(redis_cli(port, &["EXISTS", "zb"]), "0");
    assert_eq!(
        redis_cli(port, &["ZMPOP", "1", "zb", "up"]),
        "ERR syntax error"
    );
    // BZMPOP waits for a push made through another storage process.
    let waiter =
        std::thread::spawn(move || redis_cli(port + 2, &["BZMPOP", "5", "2", "zq", "zr", "MIN"]));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(redis_cli(port, &["ZADD", "zr", "7", "seven"]), "1");
    assert_eq!(waiter.join().unwrap(), "zr\nseven\n7");
    assert_eq!(redis_cli(port, &["ZADD", "r", "1", "a", "2", "b"]), "2");
    let drawn = redis_cli(port, &["ZRANDMEMBER", "r", "-5"]);
    assert_eq!(drawn.lines().count(), 5);
    assert!(drawn.lines().all(|member| member == "a" || member == "b"));
    assert_eq!(
        redis_cli(port, &["ZRANDMEMBER", "r", "2"]).lines().count(),
        2
    );
    assert_eq!(redis_cli(port, &["SADD", "plain", "b", "c"]), "2");
    assert_eq!(redis_cli(port, &["ZINTERCARD", "2", "r", "plain"]), "1");
    assert_eq!(
        redis_cli(port, &["ZINTERCARD", "0", "r"]),
        "ERR at least 1 input key is needed for 'zintercard' command"
    );
}

/// GETRANGE, SETRANGE, GETBIT, SETBIT through different storage processes.
fn string_ranges_and_bits(port: u16) {
    assert_eq!(redis_cli(port, &["SET", "greeting", "Hello World"]), "OK");
    assert_eq!(
        redis_cli(port + 1, &["SETRANGE", "greeting", "6", "Redis"]),
        "11"
    );
    assert_eq!(
        redis_cli(port + 2, &["GETRANGE", "greeting", "-5", "-1"]),
        "Redis"
    );
    assert_eq!(redis_cli(port, &["SUBSTR", "greeting", "0", "4"]), "Hello");
    assert_eq!(redis_cli(port + 1, &["SETBIT", "bits", "9", "1"]), "0");
    assert_eq!(redis_cli(port + 2, &["GETBIT", "bits", "9"]), "1");
    assert_eq!(redis_cli(port, &["STRLEN", "bits"]), "2");
    assert_eq!(
        redis_cli(port, &["SETRANGE", "greeting", "536870908", "world"]),
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
    );
}

/// TIME answers the gateway's clock.
fn time_is_the_gateway_s_clock(port: u16) {
    let reply = redis_cli(port, &["TIME"]);
    let (seconds, micros) = reply.split_once('\n').unwrap();
    let seconds: u64 = seconds.parse().unwrap();
    let micros: u64 = micros.parse().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(seconds.abs_diff(now) <= 5, "{seconds} vs {now}");
    assert!(micros < 1_000_000);
    assert_eq!(
        redis_cli(port, &["TIME", "x"]),
        "ERR wrong number of arguments for 'time' command"
    );
}

/// `field` in INFO's text (`None` if absent).
fn info_field(port: u16, section: &str, field: &str) -> Option<String> {
    redis_cli(port, &["INFO", section])
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")).map(str::to_string))
}

fn introspection_counts_what_the_gateway_served(port: u16) {
    // A client blocked in BLPOP shows in INFO and CLIENT LIST, and CLIENT UNBLOCK wakes it.
    let blocked = std::thread::spawn(move || redis_cli(port, &["BLPOP", "nolist", "0"]));
    let mut waited = 0;
    while info_field(port, "clients", "blocked_clients").as_deref() != Some("1") {
        waited += 1;
        assert!(waited < 200, "BLPOP never showed as blocked");
        std::thread::sleep(Duration::from_millis(20));
    }
    let list = redis_cli(port, &["CLIENT", "LIST"]);
    let line = list
        .lines()
        .find(|line| line.contains("cmd=blpop"))
        .unwrap();
    assert!(line.contains(" flags=b "), "{line}");
    let id = line
        .strip_prefix("id=")
        .and_then(|rest| rest.split(' ').next())
        .unwrap()
        .to_string();
    assert_eq!(redis_cli(port, &["CLIENT", "UNBLOCK", &id, "ERROR"]), "1");
    assert_eq!(
        blocked.join().unwrap(),
        "UNBLOCKED client unblocked via CLIENT UNBLOCK"
    );
    assert_eq!(
        info_field(port, "clients", "blocked_clients").as_deref(),
        Some("0")
    );
    assert_eq!(redis_cli(port, &["CLIENT", "UNBLOCK", &id]), "0");
    // Command and error statistics, reset by CONFIG RESETSTAT.
    assert_eq!(redis_cli(port, &["CONFIG", "RESETSTAT"]), "OK");
    redis_cli(port, &["SET", "k", "v"]);
    redis_cli(port, &["LPUSH", "k", "x"]);
    redis_cli(port, &["GET"]);
    let lpush = info_field(port, "commandstats", "cmdstat_lpush").unwrap();
    assert!(lpush.starts_with("calls=1,usec="), "{lpush}");
    assert!(
        lpush.ends_with(",rejected_calls=0,failed_calls=1"),
        "{lpush}"
    );
    assert!(info_field(port, "commandstats", "cmdstat_get")
        .unwrap()
        .starts_with("calls=0,"));
    assert!(info_field(port, "commandstats", "cmdstat_get")
        .unwrap()
        .ends_with(",rejected_calls=1,failed_calls=0"));
    assert_eq!(
        info_field(port, "errorstats", "errorstat_WRONGTYPE").as_deref(),
        Some("count=1")
    );
    assert_eq!(
        info_field(port, "stats", "total_error_replies").as_deref(),
        Some("2")
    );
    // The default INFO leaves commandstats out, as Redis's does.
    assert!(!redis_cli(port, &["INFO"]).contains("# Commandstats"));
    // SLOWLOG with its two parameters.
    assert_eq!(
        redis_cli(port, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
        "OK"
    );
    assert_eq!(redis_cli(port, &["SLOWLOG", "RESET"]), "OK");
    redis_cli(port, &["SET", "slow", "1"]);
    let entries = redis_cli(port, &["SLOWLOG", "GET", "1"]);
    assert!(entries.contains("\nSET\nslow\n1\n127.0.0.1:"), "{entries}");
    assert_eq!(
        redis_cli(port, &["CONFIG", "GET", "slowlog-max-len"]),
        "slowlog-max-len\n128"
    );
    assert_eq!(
        redis_cli(port, &["CONFIG", "SET", "slowlog-max-len", "1"]),
        "OK"
    );
    assert_eq!(redis_cli(port, &["SLOWLOG", "LEN"]), "1");
    assert_eq!(
        redis_cli(port, &["CONFIG", "SET", "slowlog-log-slower-than", "-1"]),
        "OK"
    );
    assert_eq!(redis_cli(port, &["SLOWLOG", "RESET"]), "OK");
    redis_cli(port, &["SET", "fast", "1"]);
    assert_eq!(redis_cli(port, &["SLOWLOG", "LEN"]), "0");
}

/// Two clients blocked on one key are served oldest first, and a younger one waiting on a
/// second key too is served from that key meanwhile.
fn blocked_clients_are_served_oldest_first(port: u16) {
    let blocked_count = || info_field(port, "clients", "blocked_clients").unwrap();
    let wait_for = |count: &str| {
        let mut waited = 0;
        while blocked_count() != count {
            waited += 1;
            assert!(waited < 300, "never {count} blocked clients");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let older = std::thread::spawn(move || redis_cli(port, &["BLPOP", "line", "0"]));
    wait_for("1");
    let younger = std::thread::spawn(move || redis_cli(port, &["BLPOP", "line", "other", "0"]));
    wait_for("2");
    assert_eq!(redis_cli(port, &["RPUSH", "line", "first"]), "1");
    assert_eq!(older.join().unwrap(), "line\nfirst");
    wait_for("1");
    assert_eq!(redis_cli(port, &["RPUSH", "other", "second"]), "1");
    assert_eq!(younger.join().unwrap(), "other\nsecond");
    // A younger client cannot take the key an older one waits on, but gets its own keys.
    let older = std::thread::spawn(move || redis_cli(port, &["BRPOPLPUSH", "src", "dst", "0"]));
    wait_for("1");
    let younger =
        std::thread::spawn(move || redis_cli(port, &["BLMPOP", "0", "2", "src", "mine", "LEFT"]));
    wait_for("2");
    assert_eq!(redis_cli(port, &["RPUSH", "mine", "m"]), "1");
    assert_eq!(younger.join().unwrap(), "mine\nm");
    assert_eq!(redis_cli(port, &["RPUSH", "src", "s"]), "1");
    assert_eq!(older.join().unwrap(), "s");
    assert_eq!(redis_cli(port, &["LRANGE", "dst", "0", "-1"]), "s");
    // A pipeline of LPUSH and BLPOP: the LPUSH reply comes before the BLPOP waits, and the
    // client blocked earlier gets the pushed item.
    let mut older = Raw::connect(port);
    let waiting = std::thread::spawn(move || older.call(&["BLPOP", "piped", "0"]));
    wait_for("1");
    let mut pipelined = Raw::connect(port);
    pipelined
        .reader
        .get_mut()
        .write_all(b"LPUSH piped 1\r\nBLPOP piped 0\r\n")
        .unwrap();
    let mut reply = String::new();
    pipelined.read_value(&mut reply);
    assert_eq!(reply, ":1\r\n");
    assert_eq!(waiting.join().unwrap(), "*2\r\n$5\r\npiped\r\n$1\r\n1\r\n");
    wait_for("1");
    assert_eq!(redis_cli(port, &["LPUSH", "piped", "2"]), "1");
    let mut reply = String::new();
    pipelined.read_value(&mut reply);
    assert_eq!(reply, "*2\r\n$5\r\npiped\r\n$1\r\n2\r\n");
}

#[test]
fn resp3_sorted_sets_and_introspection_against_a_sequenced_cluster() {
    let port = 33430;
    let data_dir = std::env::temp_dir().join(format!("tessera-resp3-{}", std::process::id()));
    let dev = start(port, &data_dir);
    resp3_replies_are_redis_7_0s(port);
    new_sorted_set_commands_work_across_the_ring(port);
    string_ranges_and_bits(port);
    time_is_the_gateway_s_clock(port);
    introspection_counts_what_the_gateway_served(port);
    blocked_clients_are_served_oldest_first(port);
    drop(dev);
    let _ = std::fs::remove_dir_all(&data_dir);
}
