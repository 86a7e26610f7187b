//! The PostgreSQL front end at the byte level, with a minimal client written here: the startup
//! negotiation, protocol violations (oversized and malformed frames close the connection with
//! 08P01), error recovery in the extended protocol (discard until Sync), limits, and random
//! bytes that must never take the server down for the next client.

use runtime::pg::{serve, PgLimits};
use runtime::sql_backend::LocalBackend;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn start(limits: PgLimits) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(serve(listener, LocalBackend::default(), limits));
    address
}

fn frame(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut bytes = vec![tag];
    bytes.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
    bytes.extend_from_slice(body);
    bytes
}

fn startup_packet() -> Vec<u8> {
    let mut body = 196_608i32.to_be_bytes().to_vec();
    body.extend_from_slice(b"user\0tessera\0database\0tessera\0\0");
    let mut bytes = (body.len() as i32 + 4).to_be_bytes().to_vec();
    bytes.extend_from_slice(&body);
    bytes
}

fn query(sql: &str) -> Vec<u8> {
    frame(b'Q', format!("{sql}\0").as_bytes())
}

/// Reads backend messages until one with `until` arrives (or the connection ends); returns
/// them all as (tag, body).
async fn read_until(stream: &mut TcpStream, until: u8) -> Vec<(u8, Vec<u8>)> {
    let mut messages = Vec::new();
    loop {
        let mut header = [0u8; 5];
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut header))
            .await
            .expect("no answer within 5 s");
        if read.is_err() {
            return messages;
        }
        let length = i32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
        let mut body = vec![0; length - 4];
        stream.read_exact(&mut body).await.expect("body");
        let tag = header[0];
        messages.push((tag, body));
        if tag == until {
            return messages;
        }
    }
}

async fn connected(address: SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(address).await.expect("connect");
    stream.write_all(&startup_packet()).await.expect("startup");
    let messages = read_until(&mut stream, b'Z').await;
    assert_eq!(messages.first().map(|(tag, _)| *tag), Some(b'R'));
    stream
}

fn tags(messages: &[(u8, Vec<u8>)]) -> String {
    messages.iter().map(|(tag, _)| *tag as char).collect()
}

fn error_code(messages: &[(u8, Vec<u8>)]) -> Option<String> {
    let (_, body) = messages.iter().find(|(tag, _)| *tag == b'E')?;
    let mut fields = body.split(|byte| *byte == 0);
    fields.find_map(|field| {
        field
            .strip_prefix(b"C")
            .map(|code| String::from_utf8_lossy(code).into_owned())
    })
}

/// The server answers a simple query on a new connection.
async fn assert_alive(address: SocketAddr) {
    let mut stream = connected(address).await;
    stream
        .write_all(&query("SELECT 1 + 1"))
        .await
        .expect("query");
    let messages = read_until(&mut stream, b'Z').await;
    assert_eq!(tags(&messages), "TDCZ");
    assert_eq!(&messages[1].1[6..], b"2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_refuses_ssl_and_reports_parameters() {
    let address = start(PgLimits::default()).await;
    let mut stream = TcpStream::connect(address).await.expect("connect");
    // SSLRequest, then GSSENCRequest: both refused with 'N'.
    for code in [80_877_103i32, 80_877_104] {
        let mut request = 8i32.to_be_bytes().to_vec();
        request.extend_from_slice(&code.to_be_bytes());
        stream.write_all(&request).await.expect("request");
        let mut answer = [0u8; 1];
        stream.read_exact(&mut answer).await.expect("answer");
        assert_eq!(answer, *b"N");
    }
    stream.write_all(&startup_packet()).await.expect("startup");
    let messages = read_until(&mut stream, b'Z').await;
    let tags = tags(&messages);
    assert!(tags.starts_with("RS"), "{tags}");
    assert!(tags.ends_with("KZ"), "{tags}");
    let statuses: Vec<String> = messages
        .iter()
        .filter(|(tag, _)| *tag == b'S')
        .map(|(_, body)| String::from_utf8_lossy(body).replace('\0', " "))
        .collect();
    for expected in [
        "server_version 15.0",
        "client_encoding UTF8",
        "integer_datetimes on",
        "standard_conforming_strings on",
    ] {
        assert!(
            statuses.iter().any(|status| status.starts_with(expected)),
            "{expected} in {statuses:?}"
        );
    }
    // A CancelRequest is accepted and the connection closed.
    let mut cancel = TcpStream::connect(address).await.expect("connect");
    let mut request = 16i32.to_be_bytes().to_vec();
    request.extend_from_slice(&80_877_102i32.to_be_bytes());
    request.extend_from_slice(&[0; 8]);
    cancel.write_all(&request).await.expect("cancel");
    let mut rest = Vec::new();
    let _ = cancel.read_to_end(&mut rest).await;
    assert!(rest.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_and_malformed_frames_close_with_08p01() {
    let limits = PgLimits {
        message_bytes_max: 1024,
        ..PgLimits::default()
    };
    let address = start(limits).await;
    let cases: Vec<Vec<u8>> = vec![
        // Announces 1 GiB: refused before anything is allocated.
        {
            let mut bytes = vec![b'Q'];
            bytes.extend_from_slice(&(1i32 << 30).to_be_bytes());
            bytes
        },
        // A length under 4.
        vec![b'Q', 0, 0, 0, 2],
        // A negative length.
        vec![b'P', 0xff, 0xff, 0xff, 0xff],
        // An unknown message type.
        frame(b'?', b""),
        // A Bind whose counts run past its end.
        frame(b'B', b"\0\0\x00\x05"),
        // A Query without its terminating NUL.
        frame(b'Q', b"SELECT 1"),
    ];
    for case in cases {
        let mut stream = connected(address).await;
        stream.write_all(&case).await.expect("send");
        let messages = read_until(&mut stream, b'Z').await;
        assert_eq!(tags(&messages), "E", "case {case:?}");
        assert_eq!(error_code(&messages).as_deref(), Some("08P01"));
        let mut rest = Vec::new();
        let _ = stream.read_to_end(&mut rest).await;
    }
    // A startup packet announcing too much.
    let mut stream = TcpStream::connect(address).await.expect("connect");
    stream
        .write_all(&(1i32 << 20).to_be_bytes())
        .await
        .expect("send");
    let messages = read_until(&mut stream, b'Z').await;
    assert_eq!(error_code(&messages).as_deref(), Some("08P01"));
    assert_alive(address).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extended_protocol_discards_until_sync_after_an_error() {
    let address = start(PgLimits::default()).await;
    let mut stream = connected(address).await;
    stream
        .write_all(&query("CREATE TABLE t (k INT PRIMARY KEY, v TEXT)"))
        .await
        .expect("create");
    read_until(&mut stream, b'Z').await;
    let mut batch = Vec::new();
    // Parse fails (unknown table); the Bind and Execute after it are discarded.
    batch.extend(frame(b'P', b"\0SELECT v FROM nope\0\0\0"));
    batch.extend(frame(b'B', b"\0\0\0\0\0\0\0\0"));
    batch.extend(frame(b'E', b"\0\0\0\0\0"));
    batch.extend(frame(b'S', b""));
    // Then a good round with a binary int4 parameter and a binary result.
    batch.extend(frame(
        b'P',
        b"s1\0INSERT INTO t VALUES ($1, $2)\0\0\x02\0\0\0\x17\0\0\0\x19",
    ));
    let mut bind = b"\0s1\0\0\x01\0\x01\0\x02\0\0\0\x04".to_vec();
    bind.extend_from_slice(&7i32.to_be_bytes());
    bind.extend_from_slice(&3i32.to_be_bytes());
    bind.extend_from_slice(b"abc\0\0");
    batch.extend(frame(b'B', &bind));
    batch.extend(frame(b'E', b"\0\0\0\0\0"));
    batch.extend(frame(b'P', b"s2\0SELECT k, v FROM t WHERE k = $1\0\0\0"));
    batch.extend(frame(b'D', b"Ss2\0"));
    let mut bind = b"\0s2\0\0\x01\0\x01\0\x01\0\0\0\x04".to_vec();
    bind.extend_from_slice(&7i32.to_be_bytes());
    bind.extend_from_slice(b"\0\x01\0\x01");
    batch.extend(frame(b'B', &bind));
    batch.extend(frame(b'E', b"\0\0\0\0\0"));
    batch.extend(frame(b'C', b"Ss2\0"));
    batch.extend(frame(b'S', b""));
    stream.write_all(&batch).await.expect("batch");
    let first = read_until(&mut stream, b'Z').await;
    assert_eq!(tags(&first), "EZ");
    assert_eq!(error_code(&first).as_deref(), Some("42P01"));
    let second = read_until(&mut stream, b'Z').await;
    // Parse, Bind, Execute(INSERT), Parse, Describe (t + T), Bind, DataRow, CommandComplete,
    // Close, ReadyForQuery.
    assert_eq!(tags(&second), "12C1tT2DC3Z");
    let data_row = &second[7].1;
    let mut expected = 2i16.to_be_bytes().to_vec();
    expected.extend_from_slice(&4i32.to_be_bytes());
    expected.extend_from_slice(&7i32.to_be_bytes());
    expected.extend_from_slice(&3i32.to_be_bytes());
    expected.extend_from_slice(b"abc");
    assert_eq!(data_row, &expected);
    // A binary parameter of the wrong length is 22P03 and the session goes on.
    let mut batch = Vec::new();
    batch.extend(frame(b'P', b"\0SELECT v FROM t WHERE k = $1\0\0\0"));
    batch.extend(frame(b'B', b"\0\0\0\x01\0\x01\0\x01\0\0\0\x02\0\x07\0\0"));
    batch.extend(frame(b'E', b"\0\0\0\0\0"));
    batch.extend(frame(b'S', b""));
    stream.write_all(&batch).await.expect("batch");
    let third = read_until(&mut stream, b'Z').await;
    assert_eq!(error_code(&third).as_deref(), Some("22P03"));
    stream
        .write_all(&query("SELECT v FROM t"))
        .await
        .expect("query");
    assert_eq!(tags(&read_until(&mut stream, b'Z').await), "TDCZ");
}

/// Execute with a row limit suspends the portal; later Executes before Sync fetch the rest,
/// as in PostgreSQL's implicit transaction. Sync ends the portal (no BEGIN keeps it open).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn portals_fetch_in_chunks_until_sync() {
    let address = start(PgLimits::default()).await;
    let mut stream = connected(address).await;
    let values: Vec<String> = (1..=7).map(|n| format!("({n})")).collect();
    stream
        .write_all(&query(&format!(
            "CREATE TABLE numbers (n INT PRIMARY KEY); INSERT INTO numbers VALUES {}",
            values.join(", ")
        )))
        .await
        .expect("create");
    assert_eq!(tags(&read_until(&mut stream, b'Z').await), "CCZ");
    let execute_two = frame(b'E', b"\0\0\0\0\x02");
    let mut batch = Vec::new();
    batch.extend(frame(
        b'P',
        b"\0SELECT n FROM numbers WHERE n >= 2 ORDER BY n\0\0\0",
    ));
    batch.extend(frame(b'B', b"\0\0\0\0\0\0\0\0"));
    for _ in 0..4 {
        batch.extend(&execute_two);
    }
    batch.extend(frame(b'S', b""));
    stream.write_all(&batch).await.expect("batch");
    let messages = read_until(&mut stream, b'Z').await;
    assert_eq!(tags(&messages), "12DDsDDsDDCCZ");
    let numbers: Vec<&[u8]> = messages
        .iter()
        .filter(|(tag, _)| *tag == b'D')
        .map(|(_, body)| &body[6..])
        .collect();
    assert_eq!(numbers, vec![&b"2"[..], b"3", b"4", b"5", b"6", b"7"]);
    let completions: Vec<&[u8]> = messages
        .iter()
        .filter(|(tag, _)| *tag == b'C')
        .map(|(_, body)| body.as_slice())
        .collect();
    assert_eq!(completions, vec![&b"SELECT 2\0"[..], b"SELECT 0\0"]);
    // After Sync the portal is gone.
    let mut batch = execute_two.clone();
    batch.extend(frame(b'S', b""));
    stream.write_all(&batch).await.expect("batch");
    let messages = read_until(&mut stream, b'Z').await;
    assert_eq!(tags(&messages), "EZ");
    assert_eq!(error_code(&messages).as_deref(), Some("34000"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_limits_and_copy_fail_leave_the_session_usable() {
    let limits = PgLimits {
        copy_bytes_max: 16,
        ..PgLimits::default()
    };
    let address = start(limits).await;
    let mut stream = connected(address).await;
    stream
        .write_all(&query("CREATE TABLE c (k INT PRIMARY KEY)"))
        .await
        .expect("create");
    read_until(&mut stream, b'Z').await;
    // Too much data: 54000, and the CopyData and CopyDone after it are dropped.
    stream
        .write_all(&query("COPY c FROM STDIN"))
        .await
        .expect("copy");
    assert_eq!(tags(&read_until(&mut stream, b'G').await), "G");
    let mut data = frame(b'd', b"1\n2\n3\n4\n5\n6\n7\n8\n9\n");
    data.extend(frame(b'd', b"10\n"));
    data.extend(frame(b'c', b""));
    stream.write_all(&data).await.expect("data");
    let messages = read_until(&mut stream, b'Z').await;
    assert_eq!(error_code(&messages).as_deref(), Some("54000"));
    // CopyFail.
    stream
        .write_all(&query("COPY c FROM STDIN"))
        .await
        .expect("copy");
    read_until(&mut stream, b'G').await;
    stream
        .write_all(&frame(b'f', b"changed my mind\0"))
        .await
        .expect("fail");
    let messages = read_until(&mut stream, b'Z').await;
    assert_eq!(error_code(&messages).as_deref(), Some("57014"));
    // A COPY that fits.
    stream
        .write_all(&query("COPY c FROM STDIN"))
        .await
        .expect("copy");
    read_until(&mut stream, b'G').await;
    let mut data = frame(b'd', b"1\n2\n");
    data.extend(frame(b'c', b""));
    stream.write_all(&data).await.expect("data");
    let messages = read_until(&mut stream, b'Z').await;
    assert_eq!(tags(&messages), "CZ");
    assert_eq!(messages[0].1, b"COPY 2\0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_connections_are_refused_with_53300() {
    let limits = PgLimits {
        connections_max: 1,
        ..PgLimits::default()
    };
    let address = start(limits).await;
    let first = connected(address).await;
    let mut second = TcpStream::connect(address).await.expect("connect");
    second.write_all(&startup_packet()).await.expect("startup");
    let messages = read_until(&mut second, b'Z').await;
    assert_eq!(error_code(&messages).as_deref(), Some("53300"));
    drop(first);
}

/// A small deterministic generator (xorshift), so that a failure reproduces.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_bytes_never_take_the_server_down() {
    let limits = PgLimits {
        message_bytes_max: 4096,
        startup_timeout: Duration::from_millis(200),
        ..PgLimits::default()
    };
    let address = start(limits).await;
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    let valid_tags = b"QPBDESCHXdcfF";
    for round in 0..300 {
        let mut stream = TcpStream::connect(address).await.expect("connect");
        let mut bytes = Vec::new();
        let after_startup = round % 3 != 0;
        if after_startup {
            bytes.extend(startup_packet());
        }
        for _ in 0..random.below(6) + 1 {
            match random.below(4) {
                // Pure noise.
                0 => {
                    for _ in 0..random.below(64) {
                        bytes.push(random.next() as u8);
                    }
                }
                // A well-framed message of a valid type with a random body.
                _ => {
                    let tag = valid_tags[random.below(valid_tags.len() as u64) as usize];
                    let mut body = Vec::new();
                    for _ in 0..random.below(40) {
                        // Bias towards NULs and small numbers, which parse further.
                        body.push(match random.below(3) {
                            0 => 0,
                            1 => random.below(4) as u8,
                            _ => random.next() as u8,
                        });
                    }
                    bytes.extend(frame(tag, &body));
                }
            }
        }
        let _ = stream.write_all(&bytes).await;
        let _ = stream.shutdown().await;
        let mut sink = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(2), stream.read_to_end(&mut sink)).await;
    }
    assert_alive(address).await;
}
