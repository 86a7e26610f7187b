//! Pub/sub across storage processes, against the cluster `tessera dev` starts (`skyros`
//! partition groups): a subscriber on one storage process receives what is published on
//! another, in RESP2 and RESP3 (push), PUBLISH counts the receivers of every process, and the
//! subscribed mode answers Redis 7.0's bytes. Then redis-py, unmodified: EVAL and EVALSHA
//! through `register_script` and pub/sub, across two storage processes. Ports: 31600 (SQL
//! 31650) and 31610 (SQL 31660), and +100 and +200 above each.

mod support;

use runtime::ecast::config::PartitionMode;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};
use support::partitioned::PartitionedCluster;
use support::redis_cli;

/// A raw RESP connection: what it receives is compared byte for byte.
struct Raw {
    stream: TcpStream,
    received: Vec<u8>,
}

impl Raw {
    fn connect(port: u16) -> Raw {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        Raw {
            stream,
            received: Vec::new(),
        }
    }

    fn send(&mut self, words: &[&str]) {
        let mut request = format!("*{}\r\n", words.len()).into_bytes();
        for word in words {
            request.extend_from_slice(format!("${}\r\n{word}\r\n", word.len()).as_bytes());
        }
        self.stream.write_all(&request).unwrap();
    }

    /// Waits (up to 5 s) until exactly `expected` arrived next, and consumes it.
    fn expect(&mut self, expected: &[u8]) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.received.len() < expected.len() && Instant::now() < deadline {
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(read) => self.received.extend_from_slice(&chunk[..read]),
                Err(_) => {}
            }
        }
        let got = self.received.len().min(expected.len());
        assert_eq!(
            String::from_utf8_lossy(&self.received[..got]),
            String::from_utf8_lossy(expected)
        );
        self.received.drain(..expected.len());
    }

    /// Waits (up to 5 s) for the server to close the connection.
    fn closed(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut chunk = [0u8; 4096];
        loop {
            assert!(Instant::now() < deadline, "the connection stayed open");
            match self.stream.read(&mut chunk) {
                Ok(0) => return,
                Ok(read) => self.received.extend_from_slice(&chunk[..read]),
                Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => return,
                Err(_) => {}
            }
        }
    }

    /// Reads everything that arrives within `wait` (a push that must not come).
    fn nothing_within(&mut self, wait: Duration) {
        std::thread::sleep(wait);
        let mut chunk = [0u8; 4096];
        if let Ok(read) = self.stream.read(&mut chunk) {
            self.received.extend_from_slice(&chunk[..read]);
        }
        assert!(
            self.received.is_empty(),
            "{:?}",
            String::from_utf8_lossy(&self.received)
        );
    }
}

#[test]
fn a_subscriber_on_one_storage_process_receives_what_another_publishes() {
    let cluster = PartitionedCluster::dev("redis-pubsub", PartitionMode::Skyros, 31600, 31650);
    let ports = cluster.client_ports.clone();
    // RESP2 on process 1.
    let mut first = Raw::connect(ports[0]);
    first.send(&["SUBSCRIBE", "news", "other"]);
    first.expect(b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n");
    first.expect(b"*3\r\n$9\r\nsubscribe\r\n$5\r\nother\r\n:2\r\n");
    // RESP3 on process 3, by pattern.
    let mut third = Raw::connect(ports[2]);
    third.send(&["HELLO", "3"]);
    third.expect(b"%7\r\n");
    // The rest of HELLO's map (its server fields are not under test here).
    std::thread::sleep(Duration::from_millis(200));
    let mut rest = [0u8; 4096];
    let _ = third.stream.read(&mut rest);
    third.received.clear();
    third.send(&["PSUBSCRIBE", "n*"]);
    third.expect(b">3\r\n$10\r\npsubscribe\r\n$2\r\nn*\r\n:1\r\n");
    // Published on process 2: both receive it, and PUBLISH counts both.
    assert_eq!(redis_cli(ports[1], &["PUBLISH", "news", "hello"]), "2");
    first.expect(b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n");
    third.expect(b">4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$5\r\nhello\r\n");
    // A channel nobody subscribed to.
    assert_eq!(redis_cli(ports[1], &["PUBLISH", "quiet", "x"]), "0");
    first.nothing_within(Duration::from_millis(200));
    // The subscribed mode (RESP2): Redis 7.0's bytes.
    first.send(&["GET", "x"]);
    first.expect(b"-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n");
    first.send(&["PING"]);
    first.expect(b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    first.send(&["SUBSCRIBE"]);
    first.expect(b"-ERR wrong number of arguments for 'subscribe' command\r\n");
    // RESP3 clients run any command while subscribed.
    third.send(&["GET", "x"]);
    third.expect(b"_\r\n");
    // PUBSUB answers for the process it is sent to.
    assert_eq!(
        redis_cli(ports[0], &["PUBSUB", "NUMSUB", "news"]),
        "news\n1"
    );
    assert_eq!(
        redis_cli(ports[1], &["PUBSUB", "NUMSUB", "news"]),
        "news\n0"
    );
    assert_eq!(redis_cli(ports[2], &["PUBSUB", "NUMPAT"]), "1");
    // NUMPAT counts distinct patterns, not subscriptions (as Redis).
    let mut fourth = Raw::connect(ports[2]);
    fourth.send(&["PSUBSCRIBE", "n*"]);
    fourth.expect(b"*3\r\n$10\r\npsubscribe\r\n$2\r\nn*\r\n:1\r\n");
    assert_eq!(redis_cli(ports[2], &["PUBSUB", "NUMPAT"]), "1");
    drop(fourth);
    let deadline = Instant::now() + Duration::from_secs(5);
    while redis_cli(ports[2], &["CLIENT", "LIST", "TYPE", "pubsub"])
        .lines()
        .count()
        != 1
    {
        assert!(
            Instant::now() < deadline,
            "the closed subscriber is still listed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(redis_cli(ports[0], &["PUBSUB", "CHANNELS", "n*"]), "news");
    // Unsubscribed from one channel: a message to it reaches only the pattern.
    first.send(&["UNSUBSCRIBE", "news"]);
    first.expect(b"*3\r\n$11\r\nunsubscribe\r\n$4\r\nnews\r\n:1\r\n");
    assert_eq!(redis_cli(ports[1], &["PUBLISH", "news", "again"]), "1");
    third.expect(b">4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$5\r\nagain\r\n");
    first.nothing_within(Duration::from_millis(200));
    // CLIENT LIST shows the subscriber as it is; CLIENT KILL closes it.
    let list = redis_cli(ports[0], &["CLIENT", "LIST", "TYPE", "pubsub"]);
    assert_eq!(list.lines().count(), 1, "{list}");
    assert!(
        list.contains(" flags=P ")
            && list.contains(" sub=1 psub=0 ")
            && list.contains(" cmd=unsubscribe "),
        "{list}"
    );
    let id = list
        .split_whitespace()
        .next()
        .unwrap()
        .strip_prefix("id=")
        .unwrap();
    assert_eq!(redis_cli(ports[0], &["CLIENT", "KILL", "ID", id]), "1");
    first.closed();
    assert_eq!(
        redis_cli(ports[0], &["CLIENT", "LIST", "TYPE", "pubsub"]),
        ""
    );
    // A subscriber that leaves is forgotten.
    drop(third);
    let deadline = Instant::now() + Duration::from_secs(5);
    while redis_cli(ports[1], &["PUBLISH", "news", "late"]) != "0" {
        assert!(
            Instant::now() < deadline,
            "the closed subscriber is still counted"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// redis-py, unmodified (`scripts/test` installs Debian's python3-redis): a registered script
/// (EVALSHA, falling back to EVAL on NOSCRIPT) over keys in different partitions, called through
/// two storage processes, and a subscriber on one process receiving a message published on
/// another.
#[test]
fn redis_py_scripts_and_pubsub_across_two_storage_processes() {
    let cluster = PartitionedCluster::dev("redis-pubsub-py", PartitionMode::Skyros, 31610, 31660);
    let keys: Vec<String> = cluster
        .keys_in_partitions("py", 2)
        .into_iter()
        .map(|(key, _)| key)
        .collect();
    let script = r#"
import sys, time, redis
port_a, port_b, keys = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
a = redis.Redis(port=port_a, decode_responses=True)
b = redis.Redis(port=port_b, decode_responses=True)
a.mset({keys[0]: 10, keys[1]: 0})
move = a.register_script("""
local left = tonumber(redis.call('get', KEYS[1]))
if left < tonumber(ARGV[1]) then return redis.error_reply('not enough') end
redis.call('decrby', KEYS[1], ARGV[1])
return redis.call('incrby', KEYS[2], ARGV[1])
""")
assert move(keys=keys, args=[3]) == 3
# The same script object through the other process: its cache is empty there (NOSCRIPT), and
# redis-py falls back to EVAL.
assert move(keys=keys, args=[3], client=b) == 6
try:
    move(keys=keys, args=[100], client=b)
    raise AssertionError('the script must refuse')
except redis.ResponseError as error:
    assert str(error) == 'not enough', str(error)
assert [int(v) for v in b.mget(keys)] == [4, 6]
assert a.eval("return {KEYS[1], ARGV[1], 3.7, false}", 1, keys[0], 'x') == [keys[0], 'x', 3, None]
# Pub/sub: subscribed on A, published on B.
p = a.pubsub()
p.subscribe('chan')
assert p.get_message(timeout=2)['type'] == 'subscribe'
assert b.publish('chan', 'from b') == 1
deadline = time.time() + 5
message = None
while message is None and time.time() < deadline:
    message = p.get_message(timeout=1)
assert message is not None and message['type'] == 'message', message
assert message['channel'] == 'chan' and message['data'] == 'from b', message
p.close()
print('ok')
"#;
    let output = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(script)
        .arg(cluster.client_ports[0].to_string())
        .arg(cluster.client_ports[1].to_string())
        .args(&keys)
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.trim() == "ok",
        "redis-py script failed:\n{stdout}\n{stderr}"
    );
}
