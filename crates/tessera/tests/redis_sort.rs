//! SORT, LCS, the raw-string encoding rule, CLIENT REPLY and keyspace notifications against
//! the cluster `tessera dev` starts (`skyros` partition groups), with redis-cli and a raw RESP
//! connection: SORT's BY and GET patterns read keys on other partitions, STORE is atomic and
//! is seen by WATCH, and a write coordinated by one storage process notifies a subscriber on
//! another. Ports: 15000 (SQL 15050), and +100 and +200 above each.

mod support;

use runtime::ecast::config::PartitionMode;
use std::io::{Read, Write};
use std::net::TcpStream;
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

    fn send_bytes(&mut self, words: &[&[u8]]) {
        let mut request = format!("*{}\r\n", words.len()).into_bytes();
        for word in words {
            request.extend_from_slice(format!("${}\r\n", word.len()).as_bytes());
            request.extend_from_slice(word);
            request.extend_from_slice(b"\r\n");
        }
        self.stream.write_all(&request).unwrap();
    }

    /// Reads one bulk string reply (up to 5 s) and returns its bytes.
    fn bulk(&mut self) -> Vec<u8> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(end) = self.received.windows(2).position(|pair| pair == b"\r\n") {
                let header = String::from_utf8_lossy(&self.received[..end]).to_string();
                assert!(header.starts_with('$'), "{header}");
                let length: usize = header[1..].parse().unwrap();
                if self.received.len() >= end + 2 + length + 2 {
                    let bytes = self.received[end + 2..end + 2 + length].to_vec();
                    self.received.drain(..end + 2 + length + 2);
                    return bytes;
                }
            }
            assert!(Instant::now() < deadline, "no bulk reply");
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) => panic!("closed"),
                Ok(read) => self.received.extend_from_slice(&chunk[..read]),
                Err(_) => {}
            }
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

    /// Reads everything that arrives within `wait`: nothing may.
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

/// A `pmessage` push as RESP2 sends it, for pattern `__key*`.
fn pmessage(channel: &str, message: &str) -> Vec<u8> {
    format!(
        "*4\r\n$8\r\npmessage\r\n$6\r\n__key*\r\n${}\r\n{channel}\r\n${}\r\n{message}\r\n",
        channel.len(),
        message.len()
    )
    .into_bytes()
}

#[test]
fn sort_lcs_client_reply_and_notifications_against_a_partitioned_cluster() {
    let cluster = PartitionedCluster::dev("redis-sort", PartitionMode::Skyros, 15000, 15050);
    let ports = cluster.client_ports.clone();
    sort_reads_patterns_across_partitions(ports[0]);
    sort_store_is_atomic_and_touches_watched_keys(ports[1]);
    lcs_and_the_raw_encoding(ports[2]);
    dump_and_restore(ports[1]);
    client_reply_silences_replies(ports[0]);
    keyspace_notifications_reach_other_processes(&ports);
}

fn sort_reads_patterns_across_partitions(port: u16) {
    let cli = |words: &[&str]| redis_cli(port, words);
    assert_eq!(cli(&["RPUSH", "list", "3", "1", "2", "10"]), "4");
    assert_eq!(cli(&["SORT", "list"]), "1\n2\n3\n10");
    assert_eq!(cli(&["SORT", "list", "DESC", "LIMIT", "1", "2"]), "3\n2");
    assert_eq!(cli(&["SORT", "list", "ALPHA"]), "1\n10\n2\n3");
    assert_eq!(cli(&["SORT_RO", "list", "LIMIT", "-5", "1"]), "1");
    // Weights and hash fields under keys spread over the partitions.
    for (item, weight) in [("3", "1"), ("1", "3"), ("2", "2"), ("10", "0")] {
        assert_eq!(cli(&["SET", &format!("w_{item}"), weight]), "OK");
        let name = format!("n{item}");
        assert_eq!(cli(&["HSET", &format!("h_{item}"), "name", &name]), "1");
    }
    assert_eq!(cli(&["SORT", "list", "BY", "w_*"]), "10\n3\n2\n1");
    assert_eq!(
        cli(&["SORT", "list", "BY", "w_*", "GET", "#", "GET", "h_*->name"]),
        "10\nn10\n3\nn3\n2\nn2\n1\nn1"
    );
    // BY without `*`: the list's own order; GET of a missing key is nil.
    assert_eq!(
        cli(&[
            "SORT",
            "list",
            "BY",
            "nosort",
            "GET",
            "w_*",
            "GET",
            "missing_*"
        ]),
        "1\n\n3\n\n2\n\n0"
    );
    assert_eq!(cli(&["SADD", "words", "b", "a"]), "2");
    // MGET reads a key of another type as nil, wherever the keys lie.
    assert_eq!(cli(&["MGET", "w_3", "words", "w_1"]), "1\n\n3");
    assert_eq!(
        cli(&["SORT", "words"]),
        "ERR One or more scores can't be converted into double"
    );
    assert_eq!(cli(&["SORT", "words", "ALPHA", "DESC"]), "b\na");
    assert_eq!(cli(&["SORT", "w_1"]).split(' ').next(), Some("WRONGTYPE"));
    assert_eq!(
        cli(&["SORT", "list", "LIMIT", "x", "1"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(cli(&["SORT_RO", "list", "STORE", "x"]), "ERR syntax error");
    assert_eq!(cli(&["SORT", "list", "BOGUS"]), "ERR syntax error");
}

fn sort_store_is_atomic_and_touches_watched_keys(port: u16) {
    let cli = |words: &[&str]| redis_cli(port, words);
    assert_eq!(cli(&["RPUSH", "source", "c", "a", "b"]), "3");
    assert_eq!(cli(&["SET", "sorted", "old"]), "OK");
    assert_eq!(cli(&["EXPIRE", "sorted", "100"]), "1");
    assert_eq!(cli(&["SORT", "source", "ALPHA", "STORE", "sorted"]), "3");
    assert_eq!(cli(&["LRANGE", "sorted", "0", "-1"]), "a\nb\nc");
    assert_eq!(
        cli(&["TTL", "sorted"]),
        "-1",
        "STORE replaces the key and its expiry"
    );
    // An empty result deletes the destination.
    assert_eq!(cli(&["SORT", "nothing", "STORE", "sorted"]), "0");
    assert_eq!(cli(&["EXISTS", "sorted"]), "0");
    // WATCH sees a SORT … STORE that changed the watched key.
    let mut client = Raw::connect(port);
    client.send(&["RPUSH", "watched", "x"]);
    client.expect(b":1\r\n");
    client.send(&["WATCH", "watched"]);
    client.expect(b"+OK\r\n");
    assert_eq!(cli(&["SORT", "empty", "STORE", "watched"]), "0");
    client.send(&["MULTI"]);
    client.expect(b"+OK\r\n");
    client.send(&["PING"]);
    client.expect(b"+QUEUED\r\n");
    client.send(&["EXEC"]);
    client.expect(b"$-1\r\n");
    // Inside MULTI, SORT with BY patterns runs with the transaction's other commands.
    client.send(&["MULTI"]);
    client.expect(b"+OK\r\n");
    client.send(&["MSET", "w_a", "2", "w_b", "1", "w_c", "3"]);
    client.expect(b"+QUEUED\r\n");
    client.send(&["SORT", "source", "BY", "w_*"]);
    client.expect(b"+QUEUED\r\n");
    client.send(&["EXEC"]);
    client.expect(b"*2\r\n+OK\r\n*3\r\n$1\r\nb\r\n$1\r\na\r\n$1\r\nc\r\n");
}

fn lcs_and_the_raw_encoding(port: u16) {
    let cli = |words: &[&str]| redis_cli(port, words);
    assert_eq!(cli(&["MSET", "k1", "ohmytext", "k2", "mynewtext"]), "OK");
    assert_eq!(cli(&["LCS", "k1", "k2"]), "mytext");
    assert_eq!(cli(&["LCS", "k1", "k2", "LEN"]), "6");
    assert_eq!(
        cli(&["LCS", "k1", "k2", "IDX", "WITHMATCHLEN"]),
        "matches\n4\n7\n5\n8\n4\n2\n3\n0\n1\n2\nlen\n6"
    );
    assert_eq!(
        cli(&["LCS", "k1", "k2", "IDX", "MINMATCHLEN", "3"]),
        "matches\n4\n7\n5\n8\nlen\n6"
    );
    assert_eq!(
        cli(&["LCS", "k1", "k2", "LEN", "IDX"]),
        "ERR If you want both the length and indexes, please just use IDX."
    );
    assert_eq!(cli(&["RPUSH", "l", "x"]), "1");
    assert_eq!(
        cli(&["LCS", "k1", "l"]),
        "ERR The specified keys must contain string values"
    );
    assert_eq!(cli(&["LCS", "k1", "absent"]), "");
    // APPEND and SETRANGE leave a string raw, whatever its bytes, until it is replaced.
    assert_eq!(cli(&["SET", "n", "1"]), "OK");
    assert_eq!(cli(&["OBJECT", "ENCODING", "n"]), "int");
    assert_eq!(cli(&["APPEND", "n", "2"]), "2");
    assert_eq!(cli(&["OBJECT", "ENCODING", "n"]), "raw");
    assert_eq!(cli(&["INCR", "n"]), "13");
    assert_eq!(cli(&["OBJECT", "ENCODING", "n"]), "int");
    assert_eq!(cli(&["SETRANGE", "n", "0", "2"]), "2");
    assert_eq!(cli(&["OBJECT", "ENCODING", "n"]), "raw");
    assert_eq!(cli(&["SET", "n", "5"]), "OK");
    assert_eq!(cli(&["OBJECT", "ENCODING", "n"]), "int");
}

fn dump_and_restore(port: u16) {
    let cli = |words: &[&str]| redis_cli(port, words);
    assert_eq!(cli(&["ZADD", "scores", "1.5", "a", "2", "b"]), "2");
    assert_eq!(cli(&["HSET", "fields", "f", "v", "g", "w"]), "2");
    // redis-cli's `--no-raw` would escape the payload; a hex round trip through the shell is
    // not needed: RESTORE takes the payload DUMP gave, sent back as bytes by a raw client.
    let mut client = Raw::connect(port);
    for (source, copy, expected) in [
        ("scores", "scores2", "a\n1.5\nb\n2"),
        ("fields", "fields2", "f\nv\ng\nw"),
        ("list", "list2", "3\n1\n2\n10"),
    ] {
        client.send(&["DUMP", source]);
        let payload = client.bulk();
        client.send_bytes(&[b"RESTORE", copy.as_bytes(), b"0", &payload]);
        client.expect(b"+OK\r\n");
        let read = match source {
            "scores" => cli(&["ZRANGE", copy, "0", "-1", "WITHSCORES"]),
            "fields" => cli(&["HGETALL", copy]),
            _ => cli(&["LRANGE", copy, "0", "-1"]),
        };
        assert_eq!(read, expected);
        client.send_bytes(&[b"RESTORE", copy.as_bytes(), b"0", &payload]);
        client.expect(b"-BUSYKEY Target key name already exists.\r\n");
        let mut corrupted = payload.clone();
        corrupted[1] ^= 0xff;
        client.send_bytes(&[b"RESTORE", copy.as_bytes(), b"0", &corrupted, b"REPLACE"]);
        client.expect(b"-ERR DUMP payload version or checksum are wrong\r\n");
    }
    client.send(&["DUMP", "scores"]);
    let payload = client.bulk();
    client.send_bytes(&[b"RESTORE", b"timed", b"100000", &payload]);
    client.expect(b"+OK\r\n");
    let ttl: i64 = cli(&["PTTL", "timed"]).parse().unwrap();
    assert!(ttl > 90_000 && ttl <= 100_000, "{ttl}");
    client.send_bytes(&[b"RESTORE", b"gone", b"1", &payload, b"ABSTTL"]);
    client.expect(b"+OK\r\n");
    assert_eq!(
        cli(&["EXISTS", "gone"]),
        "0",
        "a TTL in the past writes nothing"
    );
    assert_eq!(
        cli(&["RESTORE", "x", "0", "payload", "IDLETIME", "5"]),
        "ERR RESTORE IDLETIME and FREQ are not supported: Tessera keeps no LRU or LFU data"
    );
    assert_eq!(
        cli(&["RESTORE", "x", "-1", "payload"]),
        "ERR Invalid TTL value, must be >= 0"
    );
    assert_eq!(cli(&["DUMP", "absent"]), "");
}

fn client_reply_silences_replies(port: u16) {
    let mut client = Raw::connect(port);
    client.send(&["CLIENT", "REPLY", "OFF"]);
    client.send(&["SET", "quiet", "1"]);
    client.send(&["GET", "quiet"]);
    client.nothing_within(Duration::from_millis(300));
    client.send(&["CLIENT", "REPLY", "ON"]);
    client.expect(b"+OK\r\n");
    client.send(&["GET", "quiet"]);
    client.expect(b"$1\r\n1\r\n");
    client.send(&["CLIENT", "REPLY", "SKIP"]);
    client.send(&["PING", "skipped"]);
    client.send(&["PING", "answered"]);
    client.expect(b"$8\r\nanswered\r\n");
    client.send(&["CLIENT", "REPLY", "MAYBE"]);
    client.expect(b"-ERR syntax error\r\n");
    // CONFIG inside MULTI is queued and runs at EXEC, its reply (or error) in its place.
    client.send(&["MULTI"]);
    client.expect(b"+OK\r\n");
    client.send(&["SET", "configured", "1"]);
    client.expect(b"+QUEUED\r\n");
    client.send(&["CONFIG", "SET", "slowlog-max-len", "77"]);
    client.expect(b"+QUEUED\r\n");
    client.send(&["CONFIG", "SET", "maxmemory", "bla"]);
    client.expect(b"+QUEUED\r\n");
    client.send(&["EXEC"]);
    client.expect(
        b"*3\r\n+OK\r\n+OK\r\n-ERR Unknown option or number of arguments for CONFIG SET - 'maxmemory'\r\n",
    );
    assert_eq!(
        redis_cli(port, &["CONFIG", "GET", "slowlog-max-len"]),
        "slowlog-max-len\n77"
    );
}

fn keyspace_notifications_reach_other_processes(ports: &[u16]) {
    let mut subscriber = Raw::connect(ports[1]);
    subscriber.send(&["PSUBSCRIBE", "__key*"]);
    subscriber.expect(b"*3\r\n$10\r\npsubscribe\r\n$6\r\n__key*\r\n:1\r\n");
    // Off by default: nothing is sent.
    assert_eq!(redis_cli(ports[0], &["SET", "event", "1"]), "OK");
    subscriber.nothing_within(Duration::from_millis(300));
    assert_eq!(
        redis_cli(
            ports[0],
            &["CONFIG", "SET", "notify-keyspace-events", "KEl$gx"]
        ),
        "OK"
    );
    assert_eq!(
        redis_cli(ports[0], &["CONFIG", "GET", "notify-keyspace-events"]),
        "notify-keyspace-events\ng$lxKE"
    );
    assert_eq!(
        redis_cli(ports[0], &["CONFIG", "SET", "notify-keyspace-events", "Kn"]),
        "ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - event class 'n' (new key) is not supported by Tessera"
    );
    assert_eq!(redis_cli(ports[0], &["SET", "event", "2"]), "OK");
    subscriber.expect(&pmessage("__keyspace@0__:event", "set"));
    subscriber.expect(&pmessage("__keyevent@0__:set", "event"));
    // A set write is not in the classes asked for; the list push is.
    assert_eq!(redis_cli(ports[0], &["SADD", "eventset", "a"]), "1");
    assert_eq!(redis_cli(ports[0], &["RPUSH", "eventlist", "a"]), "1");
    subscriber.expect(&pmessage("__keyspace@0__:eventlist", "rpush"));
    subscriber.expect(&pmessage("__keyevent@0__:rpush", "eventlist"));
    // DEL names only the keys that existed; a multi-key command its own events.
    assert_eq!(
        redis_cli(ports[0], &["DEL", "event", "never", "eventset"]),
        "2"
    );
    subscriber.expect(&pmessage("__keyspace@0__:event", "del"));
    subscriber.expect(&pmessage("__keyevent@0__:del", "event"));
    subscriber.expect(&pmessage("__keyspace@0__:eventset", "del"));
    subscriber.expect(&pmessage("__keyevent@0__:del", "eventset"));
    assert_eq!(redis_cli(ports[0], &["RENAME", "eventlist", "moved"]), "OK");
    subscriber.expect(&pmessage("__keyspace@0__:eventlist", "rename_from"));
    subscriber.expect(&pmessage("__keyevent@0__:rename_from", "eventlist"));
    subscriber.expect(&pmessage("__keyspace@0__:moved", "rename_to"));
    subscriber.expect(&pmessage("__keyevent@0__:rename_to", "moved"));
    // The flags are cluster configuration: the CONFIG SET sent them to every other gateway,
    // whose writes notify too, and CONFIG GET reads them back anywhere.
    assert_eq!(redis_cli(ports[2], &["SET", "event", "3"]), "OK");
    subscriber.expect(&pmessage("__keyspace@0__:event", "set"));
    subscriber.expect(&pmessage("__keyevent@0__:set", "event"));
    assert_eq!(
        redis_cli(ports[2], &["CONFIG", "GET", "notify-keyspace-events"]),
        "notify-keyspace-events\ng$lxKE"
    );
    // A key that expires is reclaimed in the background and notified once, as `expired`.
    assert_eq!(redis_cli(ports[0], &["PSETEX", "short", "100", "v"]), "OK");
    subscriber.expect(&pmessage("__keyspace@0__:short", "set"));
    subscriber.expect(&pmessage("__keyevent@0__:set", "short"));
    subscriber.expect(&pmessage("__keyspace@0__:short", "expire"));
    subscriber.expect(&pmessage("__keyevent@0__:expire", "short"));
    subscriber.expect(&pmessage("__keyspace@0__:short", "expired"));
    subscriber.expect(&pmessage("__keyevent@0__:expired", "short"));
    subscriber.nothing_within(Duration::from_millis(1_500));
    // KEYS lists a key until it is deleted, expired or not: the reclaimer deleted it.
    let keys = redis_cli(ports[1], &["KEYS", "*"]);
    assert!(!keys.lines().any(|key| key == "short"), "{keys}");
}
