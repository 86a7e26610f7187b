//! Writes the seed corpora in `fuzz/seeds/<target>/`: small valid inputs for every target,
//! made with the crates' own encoders, so that the fuzzer starts from the shapes real peers,
//! clients and disks send. Run from `fuzz/`: `cargo run --example seeds` (stable is enough: a
//! plain build, without the fuzzer's instrumentation). Deterministic: running it again
//! rewrites the same files.

use std::path::Path;
use tessera_fuzz::{framed, joined};
use vr::StateMachine;
use wire::{ClientId, Entry, Message, Op, ReplicaIndex, Request, RequestKind, RequestNumber, View};

fn write(target: &str, seeds: &[Vec<u8>]) {
    let directory = Path::new("seeds").join(target);
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).expect("a seeds directory");
    for (at, seed) in seeds.iter().enumerate() {
        std::fs::write(directory.join(format!("seed-{at:02}")), seed).expect("a seed written");
    }
}

fn request(operation: &[u8]) -> Request {
    Request {
        client: ClientId(42),
        request: RequestNumber(7),
        kind: RequestKind::Write,
        operation: operation.to_vec(),
    }
}

fn entry(op: u64, operation: &[u8]) -> Entry {
    Entry {
        view: View(1),
        op: Op(op),
        requests: vec![request(operation)],
    }
}

fn messages() -> Vec<Message> {
    vec![
        Message::Request(request(b"\x00\x01\x01k\x01v")),
        Message::Prepare {
            view: View(3),
            commit: Op(9),
            entry: entry(10, b"put k v"),
        },
        Message::PrepareOk {
            view: View(3),
            op: Op(10),
            replica: ReplicaIndex(1),
        },
        Message::Commit {
            view: View(3),
            commit: Op(10),
        },
        Message::StartViewChange {
            view: View(4),
            replica: ReplicaIndex(2),
        },
        Message::StartView {
            view: View(4),
            op: Op(2),
            commit: Op(1),
            checkpoint_op: Op(0),
            log: vec![entry(1, b"a"), entry(2, b"b")],
        },
    ]
}

fn records() -> Vec<vr::Record> {
    vec![
        vr::Record::Entry(entry(1, b"put k v")),
        vr::Record::View { view: View(2) },
        vr::Record::Log {
            view: View(3),
            log_view: View(3),
            truncate_after: Op(1),
            entries: vec![entry(2, b"x")],
        },
        vr::Record::Entry(entry(2, b"y")),
    ]
}

fn wire_frame() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for message in messages() {
        seeds.push(postcard::to_allocvec(&message).unwrap());
        seeds.push(wire::encode(&message));
    }
    for record in records() {
        seeds.push(postcard::to_allocvec(&record).unwrap());
    }
    let mut stream = Vec::new();
    for message in messages() {
        wire::encode_into(&message, &mut stream);
    }
    seeds.push(stream);
    seeds
}

fn ecast_frame() -> Vec<Vec<u8>> {
    use runtime::ecast::link::{encode, Frame};
    let frames = [
        Frame::Vr {
            from: ReplicaIndex(0),
            message: messages()[1].clone(),
        },
        Frame::Request {
            reply_to: placement::ProcessId(3),
            request: request(b"\x00\x01\x01k\x01v"),
        },
        Frame::Reply {
            message: messages()[3].clone(),
        },
    ];
    let mut seeds = Vec::new();
    for frame in &frames {
        let bytes = encode(frame);
        seeds.push(bytes[wire::FRAME_HEADER_BYTES..].to_vec());
        seeds.push(bytes);
    }
    seeds
}

const RESP: &[&str] = &[
    "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
    "SET k v NX GET\r\nGET k\r\nSTRLEN k\r\nAPPEND k tail\r\n",
    "*5\r\n$4\r\nMSET\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\nMGET a b c\r\nEXISTS a a b\r\n",
    "INCR n\r\nINCRBY n -7\r\nDECR n\r\nDEL n a\r\nDBSIZE\r\n",
    "HELLO 3 SETNAME x\r\nPING\r\nECHO \"a b\\n\"\r\nCLIENT SETNAME y\r\nCLIENT GETNAME\r\nINFO server\r\n",
    "SET k v EX 10\r\nGETSET k w\r\nKEYS *\r\nSCAN 0 MATCH k* COUNT 10\r\nTYPE k\r\nQUIT\r\n",
    "*2\r\n$4\r\nPING\r\n$-1\r\n*-1\r\n*0\r\n\r\n",
];

/// One regular pgwire message: a type byte, a length counting itself, the body.
fn pg_message(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut message = vec![tag];
    message.extend_from_slice(&(i32::try_from(body.len() + 4).unwrap()).to_be_bytes());
    message.extend_from_slice(body);
    message
}

fn pg_query(sql: &str) -> Vec<u8> {
    pg_message(b'Q', format!("{sql}\0").as_bytes())
}

fn pg_connection() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    // Mode 0: the startup phase as the client sends it.
    let mut startup = vec![0];
    startup.extend_from_slice(&8_i32.to_be_bytes());
    startup.extend_from_slice(&80_877_103_i32.to_be_bytes()); // SSLRequest
    let body = [&196_608_i32.to_be_bytes()[..], b"user\0u\0database\0d\0\0"].concat();
    startup.extend_from_slice(&(i32::try_from(body.len() + 4).unwrap()).to_be_bytes());
    startup.extend_from_slice(&body);
    startup.extend_from_slice(&pg_query("SELECT 1"));
    seeds.push(startup);
    // Mode 1: after a valid startup.
    let simple = [
        "CREATE TABLE t (id INT PRIMARY KEY, name TEXT, n BIGINT); INSERT INTO t VALUES (1, 'a', 2), (2, NULL, 3); SELECT * FROM t WHERE id = 1",
        "CREATE TABLE t (id INT PRIMARY KEY, v TEXT); UPDATE t SET v = 'x' WHERE id > 0; DELETE FROM t; SELECT count(*) FROM t",
        "SHOW server_version; SET application_name = 'f'; BEGIN; COMMIT; ROLLBACK",
        "SELECT c.relname FROM pg_catalog.pg_class c WHERE c.relname ~ '^t'",
    ];
    for sql in simple {
        let mut seed = vec![1];
        seed.extend_from_slice(&pg_query(sql));
        seed.extend_from_slice(&pg_message(b'X', b""));
        seeds.push(seed);
    }
    let mut extended = vec![1];
    extended.extend_from_slice(&pg_query("CREATE TABLE t (id INT PRIMARY KEY, v TEXT)"));
    // Parse "s": INSERT with two parameters, the first declared INT4 (OID 23).
    extended.extend_from_slice(&pg_message(
        b'P',
        &[
            &b"s\0INSERT INTO t VALUES ($1, $2)\0"[..],
            &1_i16.to_be_bytes(),
            &23_i32.to_be_bytes(),
        ]
        .concat(),
    ));
    // Bind "" to "s": text formats, parameters "5" and NULL, text results.
    extended.extend_from_slice(&pg_message(
        b'B',
        &[
            &b"\0s\0"[..],
            &0_i16.to_be_bytes(),
            &2_i16.to_be_bytes(),
            &1_i32.to_be_bytes(),
            b"5",
            &(-1_i32).to_be_bytes(),
            &0_i16.to_be_bytes(),
        ]
        .concat(),
    ));
    extended.extend_from_slice(&pg_message(b'D', b"P\0"));
    extended.extend_from_slice(&pg_message(
        b'E',
        &[&b"\0"[..], &0_i32.to_be_bytes()].concat(),
    ));
    extended.extend_from_slice(&pg_message(b'C', b"Ss\0"));
    extended.extend_from_slice(&pg_message(b'S', b""));
    seeds.push(extended);
    let mut copy = vec![1];
    copy.extend_from_slice(&pg_query("CREATE TABLE t (id INT PRIMARY KEY, v TEXT)"));
    copy.extend_from_slice(&pg_query("COPY t FROM STDIN"));
    copy.extend_from_slice(&pg_message(b'd', b"1\tone\n2\t\\N\n"));
    copy.extend_from_slice(&pg_message(b'c', b""));
    copy.extend_from_slice(&pg_query("SELECT * FROM t ORDER BY id LIMIT 1"));
    seeds.push(copy);
    seeds
}

const SQL: &[&str] = &[
    "SELECT id, name FROM people WHERE id = 1 AND age > 2 ORDER BY name DESC LIMIT 3",
    "SELECT city, count(*), sum(age), avg(score) FROM people GROUP BY city HAVING count(*) > 1",
    "INSERT INTO people (id, name, age) VALUES (7, 'x', 3), (8, 'y', NULL) ON CONFLICT (id) DO UPDATE SET age = EXCLUDED.age",
    "UPDATE people SET age = age + 1 WHERE id IN (1, 2) OR name LIKE 'a%'",
    "DELETE FROM people WHERE age BETWEEN 1 AND 30 AND city IS NOT NULL",
    "CREATE TABLE z (a INT PRIMARY KEY, b TEXT NOT NULL) WITH (placement = hash, replication_factor = 3)",
    "SELECT CASE WHEN age > 1 THEN 'a' ELSE 'b' END, age::text || '!', -age, abs(age) FROM people",
    "SELECT n.nspname, c.relname FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.relname ~ '^p'",
    "EXPLAIN SELECT * FROM people WHERE id = $1",
    "SET tessera.read_isolation = snapshot; SHOW TimeZone; BEGIN; COMMIT",
    "CREATE INDEX people_city ON people (city); DROP TABLE IF EXISTS accounts",
    "COPY people (id, name, age, city, score, born, data, flag) FROM STDIN",
    "SELECT owner, balance FROM accounts WHERE owner >= 'a' AND owner < 'c' AND balance <> 0",
    "UPDATE accounts SET balance = balance - 5 WHERE owner = $1",
];

/// Engine commands as the SQL front end plans them against the fuzz targets' catalog.
fn engine_commands() -> Vec<engine::Command> {
    let mut engine = engine::Engine::new();
    let mut commands = Vec::new();
    let script = "CREATE TABLE t (id INT PRIMARY KEY, v TEXT, n BIGINT); \
        CREATE INDEX t_n ON t (n); \
        INSERT INTO t VALUES (1, 'a', 10), (2, 'b', 20), (3, NULL, 30); \
        UPDATE t SET n = 11 WHERE v IS NOT NULL; \
        SELECT id, v FROM t WHERE n > 15 ORDER BY id; \
        DELETE FROM t WHERE id = 2; \
        SELECT count(*) FROM t";
    for statement in sql::parse(script).expect("the seed script parses") {
        let plan = sql::plan_statement(&statement, &engine).expect("the seed script plans");
        let sql::Plan::Execute(execution) = plan else {
            continue;
        };
        commands.push(engine::Command::Batch(execution.operations.clone()));
        if let [operation] = &execution.operations[..] {
            commands.push(engine::Command::Guarded {
                catalog: engine.catalog_digest(),
                command: Box::new(engine::Command::Execute(operation.clone())),
            });
        }
        engine.execute_batch(&execution.operations);
    }
    commands
}

fn store_operations() -> Vec<Vec<u8>> {
    let kv: Vec<Vec<u8>> = [
        "SET k v",
        "MSET a 1 b 2",
        "INCRBY a 5",
        "APPEND k w",
        "GET k",
        "MGET a b k",
        "DEL b",
        "DBSIZE",
    ]
    .iter()
    .filter_map(|command| {
        let arguments: Vec<Vec<u8>> = command.split(' ').map(|a| a.as_bytes().to_vec()).collect();
        match resp::plan(&arguments) {
            resp::Plan::Execute(pending) => Some(store::kv_operation(&pending.command)),
            _ => None,
        }
    })
    .collect();
    let sql: Vec<Vec<u8>> = engine_commands().iter().map(store::sql_operation).collect();
    vec![store::catalog_operation()]
        .into_iter()
        .chain(kv)
        .chain(sql)
        .collect()
}

fn store_apply() -> Vec<Vec<u8>> {
    let operations = store_operations();
    let mut store = store::Store::new();
    for operation in &operations {
        store.apply(operation);
    }
    let mut seeds = operations.clone();
    seeds.push(joined(&operations));
    let mut with_snapshot = operations.clone();
    with_snapshot.push(store.snapshot());
    seeds.push(joined(&with_snapshot));
    seeds
}

fn wal_recovery() -> Vec<Vec<u8>> {
    let mut segment = Vec::new();
    for record in records() {
        wire::encode_into(&record, &mut segment);
    }
    let torn = segment[..segment.len() - 3].to_vec();
    let mut seeds = Vec::new();
    for (flags, segments) in [
        (0_u8, vec![segment.clone()]),
        (0, vec![segment.clone(), torn.clone()]),
        (1, vec![segment.clone(), segment.clone(), torn]),
        (0, vec![framed(b"\x00")]),
    ] {
        let mut seed = vec![flags];
        seed.extend_from_slice(&joined(&segments));
        seeds.push(seed);
    }
    seeds
}

fn router_apply() -> Vec<Vec<u8>> {
    use ecast::{Envelope, Operation, Query, Sequence, Timestamp};
    use placement::{ecast::Target, ConfigVersion, Position, ProcessId};
    let sender = ProcessId(100);
    let write = |sequence: u64, position: u64| Envelope {
        sender,
        sequence: Sequence(sequence),
        planned_at: ConfigVersion(0),
        routing: placement::ecast::Message::Write {
            sender,
            target: Target::Points(vec![Position(position)]),
        },
        payload: vec![sequence as u8],
    };
    let operations = [
        Operation::Submit {
            sender,
            messages: vec![write(1, 3), write(2, u64::MAX / 2)],
        },
        Operation::Confirm {
            confirmations: vec![(ProcessId(1), Timestamp(1)), (ProcessId(2), Timestamp(1))],
        },
        Operation::Query(Query::Now),
        Operation::Query(Query::Outcome {
            sender,
            sequence: Sequence(2),
        }),
        Operation::Settle {
            confirmations: vec![(ProcessId(3), Timestamp(2))],
            through: Timestamp(1),
            routes: vec![(ProcessId(1), Timestamp(1))],
        },
    ];
    let encoded: Vec<Vec<u8>> = operations.iter().map(Operation::encode).collect();
    let mut seeds = encoded.clone();
    seeds.push(joined(&encoded));
    seeds
}

fn partition_apply() -> Vec<Vec<u8>> {
    use ecast::{PartitionOperation, PartitionQuery, Sequence, Share, Timestamp};
    use placement::ProcessId;
    let share = |timestamp: u64, previous: u64, operation: &[u8]| Share {
        timestamp: Timestamp(timestamp),
        previous: Timestamp(previous),
        sender: ProcessId(50),
        sequence: Sequence(timestamp),
        operation: operation.to_vec(),
    };
    let operations = [
        PartitionOperation::Single {
            client: 1,
            number: 1,
            operation: b"pa\x07".to_vec(),
        },
        PartitionOperation::Deliveries(vec![share(1, 0, b"pb\x01"), share(2, 1, b"ga")]),
        PartitionOperation::Single {
            client: 2,
            number: 1,
            operation: b"gb".to_vec(),
        },
        PartitionOperation::Watermark(Timestamp(2)),
        PartitionOperation::Query(PartitionQuery::Result {
            client: 2,
            number: 1,
        }),
        PartitionOperation::Query(PartitionQuery::Answer {
            timestamp: Timestamp(1),
        }),
        PartitionOperation::Query(PartitionQuery::Progress),
    ];
    let encoded: Vec<Vec<u8>> = operations.iter().map(PartitionOperation::encode).collect();
    let mut seeds = encoded.clone();
    seeds.push(joined(&encoded));
    seeds
}

/// SCRAM exchanges (mode 0: client-first, separator, client-final with `@NONCE@` for the
/// server's nonce; RFC 7677's shape) and role
/// and privilege statements (mode 1).
fn security_messages() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for (first, last) in [
        (
            "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
            "c=biws,r=@NONCE@,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        ),
        ("y,,n=,r=abc", "c=eSws,r=@NONCE@,p=AAAA"),
        ("p=tls-server-end-point,,n=,r=x", ""),
    ] {
        let mut seed = vec![0];
        seed.extend(tessera_fuzz::joined(&[
            first.as_bytes().to_vec(),
            last.as_bytes().to_vec(),
        ]));
        seeds.push(seed);
    }
    for statement in [
        "CREATE ROLE alice WITH LOGIN PASSWORD 'it''s' CONNECTION LIMIT 3",
        "ALTER USER \"Bob\" NOSUPERUSER PASSWORD NULL CONNECTION LIMIT -1",
        "DROP ROLE IF EXISTS a, b",
        "GRANT SELECT, INSERT ON TABLE notes, public.\"Other\" TO alice, GROUP bob",
        "GRANT ALL PRIVILEGES ON ALL TABLES IN SCHEMA public TO carol",
        "REVOKE UPDATE, DELETE ON notes FROM alice CASCADE",
        "GRANT SELECT (a) ON t TO u WITH GRANT OPTION",
    ] {
        let mut seed = vec![1];
        seed.extend_from_slice(statement.as_bytes());
        seeds.push(seed);
    }
    seeds
}

fn main() {
    write("security_messages", &security_messages());
    write("wire_frame", &wire_frame());
    write("ecast_frame", &ecast_frame());
    write(
        "resp_request",
        &RESP
            .iter()
            .map(|text| text.as_bytes().to_vec())
            .collect::<Vec<_>>(),
    );
    write("pg_connection", &pg_connection());
    write(
        "sql_plan",
        &SQL.iter()
            .map(|text| text.as_bytes().to_vec())
            .collect::<Vec<_>>(),
    );
    write("store_apply", &store_apply());
    write("wal_recovery", &wal_recovery());
    write("router_apply", &router_apply());
    write("partition_apply", &partition_apply());
}
