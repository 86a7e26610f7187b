//! Authentication and the limits before it, against real processes and real clients
//! (`redis-cli`, `psql`, tokio-postgres' SCRAM): issue 23. Ports 24000–25999 and 32000–32999.
//!
//! - `tessera dev` is secure by default: it prints an admin password (and writes it to its data
//!   directory) that redis-cli and psql log in with; without it every command is refused.
//! - RESP: `AUTH`, `HELLO 2 AUTH`, `ACL SETUSER/GETUSER/LIST/DELUSER/WHOAMI`, categories and
//!   key patterns (NOPERM), WRONGPASS; an unauthenticated client sending an oversized request
//!   is cut off and the process keeps serving others; authentication and idle timeouts;
//!   `max_connections`.
//! - pgwire: SCRAM-SHA-256 with the right password, 28P01 with a wrong one, roles made with
//!   `CREATE ROLE … LOGIN PASSWORD` (stored as verifiers), `DROP ROLE`, a read-only role
//!   refused a write with 42501, the startup timeout.

mod support;

use resp::Value;
use runtime::ecast::config::PartitionMode;
use runtime::security::SecurityConfig;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::partitioned::{wait_until, PartitionedCluster};
use support::{arguments, RespClient};

const PASSWORD: &str = "correct horse battery";
const SECRET: &str = "the cluster secret of the security tests";

/// `redis-cli` against `port` with `options` (authentication) and a command; its stdout.
fn redis_cli(port: u16, options: &[&str], command: &[&str]) -> String {
    let output = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "--no-auth-warning"])
        .args(options)
        .args(command)
        .output()
        .expect("redis-cli runs (scripts/test installs redis-tools)");
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// `psql` as `user` with `password` against `port`; (stdout, stderr).
fn psql(port: u16, user: &str, password: &str, commands: &[&str]) -> (String, String) {
    let mut command = Command::new("psql");
    command
        .env("PGPASSWORD", password)
        .env("PGCONNECT_TIMEOUT", "10")
        .args([
            "-X",
            "-q",
            "-A",
            "-t",
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
        ])
        .args(["-U", user, "-d", "tessera", "-v", "ON_ERROR_STOP=0"]);
    for sql in commands {
        command.args(["-c", sql]);
    }
    let output = command
        .output()
        .expect("psql runs (scripts/test installs postgresql-client)");
    (
        String::from_utf8_lossy(&output.stdout).trim().to_string(),
        String::from_utf8_lossy(&output.stderr).trim().to_string(),
    )
}

/// A client that authenticated as the admin.
fn admin(port: u16) -> RespClient {
    let mut client = RespClient::connect(port, Duration::from_secs(1)).unwrap();
    let reply = client
        .call(&arguments(&["AUTH", "admin", PASSWORD]))
        .unwrap();
    assert_eq!(reply, Value::Simple("OK".into()));
    client
}

/// Whether the storage process on `port` has heard from the routers (INFO, as the admin).
fn ready(port: u16) -> bool {
    let Ok(mut client) = RespClient::connect(port, Duration::from_millis(200)) else {
        return false;
    };
    if client.call(&arguments(&["AUTH", "admin", PASSWORD])).ok()
        != Some(Value::Simple("OK".into()))
    {
        return false;
    }
    match client.call(&arguments(&["INFO", "tessera"])) {
        Ok(Value::Bulk(text)) => {
            !String::from_utf8_lossy(&text).contains("tessera_ecast_router_answers:0")
        }
        _ => false,
    }
}

/// A `tessera dev`-shaped cluster (vr groups of 3) with authentication on and short limits.
fn secured_cluster(name: &str, port: u16, pg_port: u16) -> PartitionedCluster {
    secured_cluster_with(name, port, pg_port, 3, |_| {})
}

fn secured_cluster_with(
    name: &str,
    port: u16,
    pg_port: u16,
    storage: u64,
    adjust: impl FnOnce(&mut runtime::ecast::config::ClusterConfig),
) -> PartitionedCluster {
    secured_cluster_with_env(name, port, pg_port, storage, adjust, &[])
}

/// As `secured_cluster_with`, every process started with `env` set.
fn secured_cluster_with_env(
    name: &str,
    port: u16,
    pg_port: u16,
    storage: u64,
    adjust: impl FnOnce(&mut runtime::ecast::config::ClusterConfig),
    env: &[(&str, &str)],
) -> PartitionedCluster {
    let mut cluster = PartitionedCluster::prepare(name, port, (3, storage, 3), |config| {
        config.partitions = PartitionMode::Vr;
        *config = config.clone().with_pg_ports(pg_port).unwrap();
        config.security = SecurityConfig {
            max_connections: 12,
            auth_timeout_ms: 1_500,
            idle_timeout_ms: 4_000,
            ..SecurityConfig::default()
        };
        adjust(config);
    });
    std::fs::write(cluster.directory.join("cluster-secret"), SECRET).unwrap();
    std::fs::write(
        cluster.directory.join("admin-password"),
        format!("{PASSWORD}\n"),
    )
    .unwrap();
    for (name, value) in env {
        let pair = (name.to_string(), value.to_string());
        cluster.router_env.push(pair.clone());
        cluster.storage_env.push(pair);
    }
    cluster.launch();
    assert!(
        wait_until(Duration::from_secs(30), || cluster
            .client_ports
            .iter()
            .all(|port| ready(*port))),
        "the secured cluster became ready"
    );
    cluster
}

/// Sends `bytes` on a fresh unauthenticated connection; everything the server sends until it
/// closes the connection (or 5 s pass).
fn raw_exchange(port: u16, bytes: &[u8]) -> (String, bool) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream.write_all(bytes).unwrap();
    let mut received = Vec::new();
    let closed = stream.read_to_end(&mut received).is_ok();
    (String::from_utf8_lossy(&received).into_owned(), closed)
}

#[test]
fn resp_clients_authenticate_and_users_have_only_their_rights() {
    // Ports 32081–32083 (RESP), 32181–32183, 32281–32283, 32481–32483 (pgwire).
    let cluster = secured_cluster("security-resp", 32081, 32481);
    let port = cluster.client_ports[0];
    let admin_options = ["--user", "admin", "--pass", PASSWORD];
    // Nothing runs before AUTH; a wrong password is refused as Redis refuses it.
    assert_eq!(
        redis_cli(port, &[], &["SET", "k", "v"]),
        "NOAUTH Authentication required."
    );
    let mut wrong = RespClient::connect(port, Duration::from_secs(1)).unwrap();
    assert_eq!(
        wrong.call(&arguments(&["AUTH", "admin", "wrong"])).unwrap(),
        Value::Error("WRONGPASS invalid username-password pair or user is disabled.".into())
    );
    assert_eq!(
        wrong.call(&arguments(&["GET", "k"])).unwrap(),
        Value::Error("NOAUTH Authentication required.".into())
    );
    assert_eq!(
        redis_cli(port, &admin_options, &["SET", "pub:1", "hello"]),
        "OK"
    );
    assert_eq!(
        redis_cli(cluster.client_ports[1], &admin_options, &["GET", "pub:1"]),
        "hello"
    );
    assert_eq!(
        redis_cli(port, &["-a", PASSWORD], &["GET", "pub:1"]),
        "hello"
    );
    // A reader of pub:* made with ACL SETUSER, kept in the replicated state: every storage
    // process knows it.
    assert_eq!(
        redis_cli(
            port,
            &admin_options,
            &["ACL", "SETUSER", "reader", "on", ">rpw", "+@read", "~pub:*"]
        ),
        "OK"
    );
    let reader = ["--user", "reader", "--pass", "rpw"];
    let other = cluster.client_ports[2];
    assert_eq!(redis_cli(other, &reader, &["GET", "pub:1"]), "hello");
    assert_eq!(redis_cli(other, &reader, &["ACL", "WHOAMI"]), "reader");
    assert_eq!(
        redis_cli(other, &reader, &["SET", "pub:1", "x"]),
        "NOPERM this user has no permissions to run the 'set' command"
    );
    assert_eq!(
        redis_cli(other, &reader, &["GET", "secret"]),
        "NOPERM this user has no permissions to access one of the keys used as arguments"
    );
    assert_eq!(
        redis_cli(other, &reader, &["ACL", "LIST"]),
        "NOPERM this user has no permissions to run the 'acl|list' command"
    );
    assert_eq!(
        redis_cli(other, &reader, &["FLUSHALL"]),
        "NOPERM this user has no permissions to run the 'flushall' command"
    );
    // The bytes on the wire, as redis-server 7.0.15 sends them.
    let (reply, _) = raw_exchange(
        other,
        b"AUTH reader rpw\r\nSET pub:1 x\r\nMGET pub:1 secret\r\nQUIT\r\n",
    );
    assert_eq!(
        reply,
        "+OK\r\n-NOPERM this user has no permissions to run the 'set' command\r\n\
         -NOPERM this user has no permissions to access one of the keys used as arguments\r\n+OK\r\n"
    );
    assert_eq!(
        redis_cli(other, &admin_options, &["GET", "pub:1"]),
        "hello",
        "nothing was written"
    );
    let list = redis_cli(port, &admin_options, &["ACL", "LIST"]);
    assert!(list.contains("user admin on #"), "{list}");
    assert!(list.contains("user reader on #"), "{list}");
    assert!(list.contains("~pub:* -@all +@read"), "{list}");
    assert!(!list.contains("rpw"), "passwords are never shown: {list}");
    let getuser = redis_cli(port, &admin_options, &["ACL", "GETUSER", "reader"]);
    assert!(getuser.contains("flags\non\npasswords"), "{getuser}");
    // HELLO with AUTH authenticates and switches the protocol in one command.
    let mut client = RespClient::connect(port, Duration::from_secs(1)).unwrap();
    assert!(matches!(
        client
            .call(&arguments(&["HELLO", "2", "AUTH", "reader", "rpw"]))
            .unwrap(),
        Value::Array(_)
    ));
    assert_eq!(
        client.call(&arguments(&["ACL", "WHOAMI"])).unwrap(),
        Value::Bulk(b"reader".to_vec())
    );
    // Turned off, the reader cannot log in; deleted, it is gone.
    assert_eq!(
        redis_cli(port, &admin_options, &["ACL", "SETUSER", "reader", "off"]),
        "OK"
    );
    let mut off = RespClient::connect(port, Duration::from_secs(1)).unwrap();
    assert!(matches!(
        off.call(&arguments(&["AUTH", "reader", "rpw"])).unwrap(),
        Value::Error(text) if text.starts_with("WRONGPASS")
    ));
    assert_eq!(
        redis_cli(port, &admin_options, &["ACL", "DELUSER", "reader"]),
        "1"
    );
    assert_eq!(
        redis_cli(port, &admin_options, &["ACL", "GETUSER", "reader"]),
        ""
    );
    assert!(redis_cli(port, &admin_options, &["ACL", "DELUSER", "admin"]).starts_with("ERR"));
}

#[test]
fn limits_before_authentication_cut_off_abusers_and_the_server_serves_others() {
    // Ports 32061–32063 (RESP), 32161–32163, 32261–32263, 32461–32463 (pgwire).
    let cluster = secured_cluster("security-limits", 32061, 32461);
    let port = cluster.client_ports[0];
    let mut patient = admin(port);
    // A 512 MB bulk announced before AUTH: an error, then the connection is closed.
    let (reply, closed) = raw_exchange(port, b"*1\r\n$536870912\r\n");
    assert_eq!(
        reply,
        "-ERR Protocol error: unauthenticated bulk length\r\n"
    );
    assert!(closed, "the connection is closed after the error");
    let (reply, closed) = raw_exchange(port, b"*100\r\n");
    assert_eq!(
        reply,
        "-ERR Protocol error: unauthenticated multibulk length\r\n"
    );
    assert!(closed);
    // After AUTH the same sizes are allowed (a 100 KB value).
    let value = "v".repeat(100_000);
    assert_eq!(
        patient.call(&arguments(&["SET", "big", &value])).unwrap(),
        Value::Simple("OK".into())
    );
    assert_eq!(
        patient.call(&arguments(&["STRLEN", "big"])).unwrap(),
        Value::Integer(100_000)
    );
    // max_connections = 12 per port: the 13th client is refused as Redis refuses it.
    let mut held: Vec<RespClient> = (0..11).map(|_| admin(port)).collect();
    let (reply, _) = raw_exchange(port, b"");
    assert_eq!(reply, "-ERR max number of clients reached\r\n");
    held.clear();
    assert_eq!(
        patient.call(&arguments(&["PING"])).unwrap(),
        Value::Simple("PONG".into())
    );
    // A connection that never authenticates is closed after auth_timeout_ms (1.5 s).
    let started = Instant::now();
    let (reply, closed) = raw_exchange(port, b"");
    assert!(closed && reply.is_empty(), "{reply:?}");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(1_400) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    // The same on pgwire: a silent client is dropped (as PostgreSQL does, without a word);
    // one that sends its StartupMessage and never answers the SCRAM challenge gets FATAL.
    let started = Instant::now();
    let (reply, closed) = raw_exchange(32461, b"");
    assert!(
        closed && reply.is_empty(),
        "pgwire closes a silent client: {reply:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    let mut startup = Vec::new();
    startup.extend_from_slice(&196_608_i32.to_be_bytes());
    startup.extend_from_slice(b"user\0admin\0\0");
    let mut packet = ((startup.len() + 4) as i32).to_be_bytes().to_vec();
    packet.extend_from_slice(&startup);
    let started = Instant::now();
    let (reply, closed) = raw_exchange(32461, &packet);
    assert!(closed, "pgwire closes a client stalled in authentication");
    assert!(
        reply.contains("SCRAM-SHA-256"),
        "the SASL challenge came first: {reply:?}"
    );
    assert!(reply.contains("startup timed out"), "{reply:?}");
    assert!(started.elapsed() >= Duration::from_millis(1_400));
    // Idle for longer than idle_timeout_ms (4 s): closed.
    let mut idle = admin(port);
    std::thread::sleep(Duration::from_millis(4_500));
    assert!(
        idle.call(&arguments(&["PING"])).is_err(),
        "an idle client is closed"
    );
    assert_eq!(
        admin(port).call(&arguments(&["GET", "big"])).unwrap(),
        Value::Bulk(value.into_bytes())
    );
}

#[test]
fn psql_logs_in_with_scram_and_roles_live_in_the_replicated_state() {
    // Ports 32071–32073 (RESP), 32171–32173, 32271–32273, 32471–32473 (pgwire).
    let cluster = secured_cluster("security-pg", 32071, 32471);
    let (pg, pg_other) = (32471, 32472);
    let (out, err) = psql(
        pg,
        "admin",
        PASSWORD,
        &[
            "CREATE ROLE alice LOGIN PASSWORD 'apw'",
            "CREATE TABLE notes (id BIGINT PRIMARY KEY, body TEXT)",
            "INSERT INTO notes VALUES (1, 'first')",
            "GRANT SELECT, INSERT ON notes TO alice",
        ],
    );
    assert!(err.is_empty(), "{err}");
    assert_eq!(out, "");
    // Alice, created and granted through process 1, logs in at process 2 with SCRAM-SHA-256.
    let (out, err) = psql(
        pg_other,
        "alice",
        "apw",
        &[
            "SELECT body FROM notes",
            "INSERT INTO notes VALUES (2, 'second')",
        ],
    );
    assert!(err.is_empty(), "{err}");
    assert_eq!(out, "first");
    let (_, err) = psql(pg_other, "alice", "wrong", &["SELECT 1"]);
    assert!(
        err.contains("password authentication failed for user \"alice\""),
        "{err}"
    );
    let (_, err) = psql(pg, "nobody", "x", &["SELECT 1"]);
    assert!(
        err.contains("password authentication failed for user \"nobody\""),
        "{err}"
    );
    let (_, err) = psql(pg, "admin", "wrong", &["SELECT 1"]);
    assert!(
        err.contains("password authentication failed for user \"admin\""),
        "{err}"
    );
    // The SQLSTATE as a driver sees it.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let code = runtime.block_on(async {
        let error = tokio_postgres::connect(
            &format!("host=127.0.0.1 port={pg} user=alice password=wrong dbname=tessera"),
            tokio_postgres::NoTls,
        )
        .await
        .err()
        .expect("a wrong password is refused");
        error.code().map(|code| code.code().to_string())
    });
    assert_eq!(code.as_deref(), Some("28P01"));
    // Only a superuser manages roles; the roles table is not visible to SQL.
    let (_, err) = psql(
        pg,
        "alice",
        "apw",
        &["CREATE ROLE mallory LOGIN PASSWORD 'm'"],
    );
    assert!(err.contains("permission denied to create role"), "{err}");
    let (out, _) = psql(pg, "admin", PASSWORD, &["SELECT count(*) FROM notes"]);
    assert_eq!(out, "2");
    let (out, _) = psql(
        pg,
        "admin",
        PASSWORD,
        &["SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = 'public'"],
    );
    assert_eq!(out, "kv\nnotes", "the roles table is hidden from SQL");
    // A read-only user made with ACL SETUSER reads over SQL and is refused a write (42501).
    assert_eq!(
        redis_cli(
            cluster.client_ports[0],
            &["--user", "admin", "--pass", PASSWORD],
            &["ACL", "SETUSER", "reader", "on", ">rpw", "+@read", "~*"]
        ),
        "OK"
    );
    assert!(
        psql(pg, "admin", PASSWORD, &["GRANT SELECT ON notes TO reader"])
            .1
            .is_empty()
    );
    let (out, err) = psql(
        pg,
        "reader",
        "rpw",
        &["SELECT body FROM notes WHERE id = 2", "DELETE FROM notes"],
    );
    assert_eq!(out, "second");
    assert!(
        err.contains("permission denied for role reader to write"),
        "{err}"
    );
    // pgjdbc logs in with SCRAM-SHA-256 (its own implementation) as a role made with SQL.
    let (_, err) = psql(
        pg,
        "admin",
        PASSWORD,
        &["CREATE ROLE tessera LOGIN SUPERUSER PASSWORD 'jpw'"],
    );
    assert!(err.is_empty(), "{err}");
    let jar = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/java/postgresql-42.7.14.jar");
    assert!(
        jar.is_file(),
        "the pgjdbc jar {} is missing: run scripts/fetch-pgjdbc (scripts/test runs it)",
        jar.display()
    );
    {
        let jdbc = |password: &str| {
            let output = Command::new("java")
                .arg("-cp")
                .arg(&jar)
                .arg(
                    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                        .join("tests/java/JdbcCheck.java"),
                )
                .args([
                    "127.0.0.1",
                    &pg.to_string(),
                    &format!("password={password}"),
                ])
                .output()
                .expect("java runs");
            String::from_utf8_lossy(&output.stdout).into_owned()
        };
        let refused = jdbc("wrong");
        assert!(
            refused.contains("FAIL: connect") && refused.contains("28P01"),
            "{refused}"
        );
        let accepted = jdbc("jpw");
        assert!(!accepted.contains("FAIL: connect"), "{accepted}");
        assert!(accepted.contains("ok: connect"), "{accepted}");
    }
    // ALTER ROLE changes the password; DROP ROLE removes the user. A password given as
    // PostgreSQL's verifier cannot be stored (pgwire's SCRAM needs the salted password).
    let (_, err) = psql(
        pg,
        "admin",
        PASSWORD,
        &["ALTER ROLE alice PASSWORD 'SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVk:c2VydmVy'"],
    );
    assert!(
        err.contains("a password given as a SCRAM-SHA-256 verifier is not supported"),
        "{err}"
    );
    let (_, err) = psql(pg, "admin", PASSWORD, &["ALTER ROLE alice PASSWORD 'new'"]);
    assert!(err.is_empty(), "{err}");
    let (_, err) = psql(pg, "alice", "apw", &["SELECT 1"]);
    assert!(err.contains("password authentication failed"), "{err}");
    assert_eq!(psql(pg, "alice", "new", &["SELECT 1"]).0, "1");
    // A role that holds privileges is not dropped (2BP01, the DETAIL names them) until
    // they are revoked.
    let (_, err) = psql(pg, "admin", PASSWORD, &["DROP ROLE alice"]);
    assert!(
        err.contains(
            "ERROR:  role \"alice\" cannot be dropped because some objects depend on it\nDETAIL:  privileges for table notes"
        ),
        "{err}"
    );
    assert_eq!(psql(pg, "alice", "new", &["SELECT 1"]).0, "1");
    let (_, err) = psql(
        pg,
        "admin",
        PASSWORD,
        &[
            "REVOKE ALL ON notes FROM alice",
            "DROP ROLE alice",
            "DROP ROLE alice",
        ],
    );
    assert!(err.contains("role \"alice\" does not exist"), "{err}");
    assert!(psql(pg, "alice", "new", &["SELECT 1"])
        .1
        .contains("password authentication failed"));
}

/// `tessera dev`, killed with its processes when dropped.
struct Dev(Child);

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn tessera_dev_is_secure_by_default_and_prints_a_working_password() {
    let data_dir =
        std::env::temp_dir().join(format!("tessera-test-security-dev-{}", std::process::id()));
    let mut dev = Dev(Command::new(env!("CARGO_BIN_EXE_tessera"))
        // No metrics listeners: their default ports (--port + 400, + 500) would meet the
        // other `tessera dev` test's RESP ports, and both run at once.
        .args([
            "dev",
            "--port",
            "32091",
            "--pg-port",
            "32491",
            "--metrics-port",
            "0",
        ])
        .arg("--data-dir")
        .arg(&data_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap());
    let mut lines = BufReader::new(dev.0.stdout.take().unwrap()).lines();
    let ready = lines.next().unwrap().unwrap();
    assert!(ready.starts_with("Tessera dev cluster ready"), "{ready}");
    let admin_line = lines.next().unwrap().unwrap();
    let password = admin_line
        .strip_prefix("Admin user admin, password ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("{admin_line}"))
        .to_string();
    assert!(password.len() >= 20, "a generated password: {password}");
    let file = std::fs::read_to_string(data_dir.join("admin-password")).unwrap();
    assert_eq!(file.trim(), password);
    let cluster_file = std::fs::read_to_string(data_dir.join("cluster.toml")).unwrap();
    assert!(
        !cluster_file.contains(&password),
        "the cluster file holds no password"
    );
    let storage_line = lines.next().unwrap().unwrap();
    assert!(
        storage_line.contains(&format!(
            "redis-cli -p 32091 --user admin --pass {password}"
        )) && storage_line.contains(&format!(
            "psql 'postgresql://admin:{password}@127.0.0.1:32491/tessera'"
        )),
        "{storage_line}"
    );
    assert_eq!(
        redis_cli(32091, &[], &["SET", "a", "b"]),
        "NOAUTH Authentication required."
    );
    let options = ["--user", "admin", "--pass", password.as_str()];
    assert_eq!(redis_cli(32091, &options, &["SET", "a", "b"]), "OK");
    assert_eq!(redis_cli(32092, &options, &["GET", "a"]), "b");
    let (_, err) = psql(32491, "admin", "not-it", &["SELECT 1"]);
    assert!(err.contains("password authentication failed"), "{err}");
    let output = Command::new("psql")
        .args([
            "-X",
            "-A",
            "-t",
            &format!("postgresql://admin:{password}@127.0.0.1:32492/tessera"),
            "-c",
            "SELECT 41 + 1",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "42",
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    drop(dev);
    let _ = std::fs::remove_dir_all(&data_dir);
}

#[test]
fn tessera_dev_tls_serves_redis_cli_tls_and_psql_verify_full_and_refuses_plain_text() {
    let data_dir =
        std::env::temp_dir().join(format!("tessera-test-security-tls-{}", std::process::id()));
    let mut dev = Dev(Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args([
            "dev",
            "--tls",
            "--port",
            "32095",
            "--pg-port",
            "32495",
            "--metrics-port",
            "0",
            "--data-dir",
        ])
        .arg(&data_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap());
    let mut lines = BufReader::new(dev.0.stdout.take().unwrap()).lines();
    let ready = lines.next().unwrap().unwrap();
    assert!(ready.starts_with("Tessera dev cluster ready"), "{ready}");
    let password = std::fs::read_to_string(data_dir.join("admin-password")).unwrap();
    let password = password.trim();
    let ca = data_dir.join("tls").join("ca.pem");
    let ca_text = ca.display().to_string();
    let _ = lines.next();
    let storage_line = lines.next().unwrap().unwrap();
    assert!(
        storage_line.contains(&format!("redis-cli -p 32095 --tls --cacert {ca_text}"))
            && storage_line.contains(&format!("sslmode=verify-full&sslrootcert={ca_text}")),
        "{storage_line}"
    );
    let tls = [
        "--tls",
        "--cacert",
        ca_text.as_str(),
        "--user",
        "admin",
        "--pass",
        password,
    ];
    assert_eq!(redis_cli(32095, &tls, &["SET", "tls-key", "sealed"]), "OK");
    assert_eq!(redis_cli(32097, &tls, &["GET", "tls-key"]), "sealed");
    // Plain text on the TLS port gets no answer a RESP client can read.
    let plain = redis_cli(
        32095,
        &["--user", "admin", "--pass", password],
        &["GET", "tls-key"],
    );
    assert!(!plain.contains("sealed"), "{plain}");
    // psql verifies the server's certificate against the generated CA (host name checked).
    let url = |port: u16, mode: &str| {
        format!("postgresql://admin:{password}@127.0.0.1:{port}/tessera?sslmode={mode}&sslrootcert={ca_text}")
    };
    let run = |url: String| {
        let output = Command::new("psql")
            .args(["-X", "-A", "-t", &url, "-c", "SELECT 6 * 7"])
            .output()
            .unwrap();
        (
            String::from_utf8_lossy(&output.stdout).trim().to_string(),
            String::from_utf8_lossy(&output.stderr).trim().to_string(),
        )
    };
    let (out, err) = run(url(32495, "verify-full"));
    assert_eq!(out, "42", "{err}");
    let (out, err) = run(url(32496, "require"));
    assert_eq!(out, "42", "{err}");
    let (_, err) = run(url(32495, "disable"));
    assert!(err.contains("this server requires TLS"), "{err}");
    // Another CA does not vouch for this server.
    let (_, err) = run(format!(
        "postgresql://admin:{password}@127.0.0.1:32495/tessera?sslmode=verify-full&sslrootcert=/dev/null"
    ));
    assert!(!err.is_empty() && !err.contains("42"), "{err}");
    drop(dev);
    let _ = std::fs::remove_dir_all(&data_dir);
}

#[test]
fn peer_frames_without_the_cluster_secret_are_dropped_and_change_nothing() {
    use runtime::ecast::config::ClusterConfig;
    use std::net::SocketAddr;
    // Ports 25920–25959: RESP, E-Cast, routers and pgwire moved into the last free range.
    let address = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    let cluster = secured_cluster_with("security-peers", 25920, 25950, 4, |config| {
        let mut moved: ClusterConfig = config.clone().with_active(3).unwrap();
        for (index, storage) in moved.storage.iter_mut().enumerate() {
            let index = index as u16;
            storage.client = address(25920 + index);
            storage.address = address(25930 + index);
            storage.pg = Some(address(25950 + index));
        }
        for (index, router) in moved.routers.iter_mut().enumerate() {
            router.address = address(25940 + index as u16);
        }
        *config = moved;
    });
    let (version, processes) = cluster.admin_status();
    assert_eq!(version, 0);
    assert!(
        processes[&4].iter().any(|word| word == "standby"),
        "{processes:?}"
    );
    // The same cluster file with another secret: what a process without the secret sends.
    std::fs::write(
        cluster.directory.join("wrong-secret"),
        "not the secret of this cluster",
    )
    .unwrap();
    let mut wrong = cluster.config.clone();
    wrong.security.cluster_secret_file = Some(cluster.directory.join("wrong-secret"));
    std::fs::write(cluster.directory.join("wrong.toml"), wrong.render()).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["admin", "--cluster"])
        .arg(cluster.directory.join("wrong.toml"))
        .args(["--timeout", "5", "leave", "--process", "4"])
        .output()
        .unwrap();
    assert!(
        !output.status.success(),
        "an admin without the secret is not answered"
    );
    let logs: String = cluster
        .router_logs
        .iter()
        .map(|log| std::fs::read_to_string(cluster.directory.join(log)).unwrap_or_default())
        .collect();
    assert!(
        logs.contains("HMAC tag is wrong"),
        "the routers log the dropped frames"
    );
    let (version, processes) = cluster.admin_status();
    assert_eq!(version, 0, "the forged leave changed nothing");
    assert!(
        processes[&4].iter().any(|word| word == "standby"),
        "{processes:?}"
    );
    // A frame forged to a storage process's E-Cast port: dropped and counted; the same frame
    // with the cluster's secret is taken (the canary: the check is what drops it).
    let frame = runtime::ecast::link::Frame::Stable {
        sender: placement::ProcessId(0),
        sequence: ecast::Sequence(1),
        timestamp: ecast::Timestamp(1),
    };
    let unauthenticated = frames_unauthenticated;
    let before = unauthenticated(25920);
    let mut peer = PeerConnection::open(25930, SECRET.as_bytes(), true);
    peer.send_frame(&frame);
    assert_eq!(
        unauthenticated(25920),
        before,
        "a frame with the secret's tag is taken"
    );
    let mut forger = PeerConnection::open(25930, b"guessed secret, wrong", true);
    forger.send_frame(&frame);
    assert_eq!(
        unauthenticated(25920),
        before + 1,
        "a forged frame is dropped"
    );
    // Replays (issue 23): a frame recorded from a connection of a holder of the secret,
    // sent again on that connection (its number is past) or on a new one (another key from
    // other nonces), and frames out of their order, are dropped and counted too.
    let recorded = peer.seal(&frame);
    peer.send(&recorded);
    assert_eq!(
        unauthenticated(25920),
        before + 1,
        "the recorded frame was taken once"
    );
    peer.send(&recorded);
    assert_eq!(
        unauthenticated(25920),
        before + 2,
        "replayed on its own connection"
    );
    let mut replayer = PeerConnection::open(25930, b"the replayer has no secret", true);
    replayer.send(&recorded);
    assert_eq!(
        unauthenticated(25920),
        before + 3,
        "replayed on a new connection"
    );
    let mut reordered = PeerConnection::open(25930, SECRET.as_bytes(), true);
    let first = reordered.seal(&frame);
    let second = reordered.seal(&frame);
    reordered.send(&second);
    reordered.send(&first);
    assert_eq!(unauthenticated(25920), before + 4, "reordered frames");
    let (version, _) = cluster.admin_status();
    assert_eq!(version, 0, "nothing changed the configuration");
    // The canary: the same leave with the secret does change the configuration.
    cluster.admin_ok(&["leave", "--process", "4"]);
    let (version, processes) = cluster.admin_status();
    assert_eq!(version, 1);
    assert!(
        processes[&4].iter().any(|word| word == "gone"),
        "{processes:?}"
    );
}

/// `tessera_ecast_frames_unauthenticated` of the storage process whose RESP port is `port`.
fn frames_unauthenticated(port: u16) -> u64 {
    let mut client = admin(port);
    match client.call(&arguments(&["INFO", "tessera"])).unwrap() {
        Value::Bulk(text) => String::from_utf8_lossy(&text)
            .lines()
            .find_map(|line| line.strip_prefix("tessera_ecast_frames_unauthenticated:"))
            .and_then(|value| value.trim().parse().ok())
            .expect("the counter is in INFO"),
        other => panic!("{other:?}"),
    }
}

/// A connection to an E-Cast port as a peer makes it: the link handshake (hello and nonce
/// each way), then frames sealed under `secret` for this connection.
struct PeerConnection {
    stream: TcpStream,
    sealer: runtime::ecast::link::Sealer,
}

impl PeerConnection {
    /// `fresh: false` seals as `TESSERA_CANARY_PEER_REPLAY` processes check (no nonces, no
    /// numbers).
    fn open(port: u16, secret: &[u8], fresh: bool) -> PeerConnection {
        use runtime::ecast::link::{Sealer, HELLO_MAGIC, NONCE_BYTES};
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut nonce = [0u8; NONCE_BYTES];
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        nonce.copy_from_slice(&now.to_le_bytes()[..NONCE_BYTES]);
        let mut hello = HELLO_MAGIC.to_vec();
        hello.extend_from_slice(&nonce);
        stream.write_all(&hello).unwrap();
        let mut answer = [0u8; NONCE_BYTES];
        stream.read_exact(&mut answer).unwrap();
        PeerConnection {
            stream,
            sealer: Sealer::with_secret(secret, &nonce, &answer, fresh),
        }
    }

    /// The bytes of `frame` as this connection's next frame (not sent).
    fn seal(&mut self, frame: &runtime::ecast::link::Frame) -> Vec<u8> {
        let mut bytes = Vec::new();
        self.sealer.seal(frame, &mut bytes);
        bytes
    }

    /// Sends `bytes` and gives the process time to read them.
    fn send(&mut self, bytes: &[u8]) {
        // The process may have closed the connection already: what it did is in its counter.
        let _ = self.stream.write_all(bytes);
        std::thread::sleep(Duration::from_millis(300));
    }

    fn send_frame(&mut self, frame: &runtime::ecast::link::Frame) {
        let bytes = self.seal(frame);
        self.send(&bytes);
    }
}

/// One line per step of `tests/java/SqlAs.java` (pgjdbc) or `tests/python/sql_as.py`
/// (psycopg 3) running `statements` as `user`.
fn client_lines(
    client: &str,
    port: u16,
    user: &str,
    password: &str,
    statements: &[&str],
) -> Vec<String> {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut command = match client {
        "pgjdbc" => {
            let jar = manifest.join("../../target/java/postgresql-42.7.14.jar");
            assert!(
                jar.is_file(),
                "the pgjdbc jar {} is missing: run scripts/fetch-pgjdbc (scripts/test runs it)",
                jar.display()
            );
            let mut command = Command::new("java");
            command
                .arg("-cp")
                .arg(jar)
                .arg(manifest.join("tests/java/SqlAs.java"));
            command
        }
        "psycopg" => {
            let mut command = Command::new("/usr/bin/python3");
            command.arg(manifest.join("tests/python/sql_as.py"));
            command
        }
        other => panic!("no client {other}"),
    };
    let output = command
        .args(["127.0.0.1", &port.to_string(), user, password])
        .args(statements)
        .output()
        .unwrap_or_else(|error| panic!("{client} runs (scripts/test installs it): {error}"));
    let lines: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert!(
        !lines.is_empty(),
        "{client} printed nothing: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    lines
}

#[test]
fn sql_privileges_are_granted_per_table_and_every_client_is_refused_with_42501() {
    // Ports 32001–32003 (RESP), 32101–32103 (E-Cast), 32201–32203 (routers), 32301–32303.
    let _cluster = secured_cluster("security-grants", 32001, 32301);
    let (pg, pg_other, pg_third) = (32301, 32302, 32303);
    let (_, err) = psql(
        pg,
        "admin",
        PASSWORD,
        &[
            "CREATE ROLE builder LOGIN PASSWORD 'bpw'",
            "CREATE ROLE guest LOGIN PASSWORD 'gpw'",
            "CREATE TABLE ledger (id BIGINT PRIMARY KEY, amount BIGINT)",
            "INSERT INTO ledger VALUES (1, 10), (2, 20)",
        ],
    );
    assert!(err.is_empty(), "{err}");
    // A role reads nothing it was not granted, and PostgreSQL's words say so.
    let (out, err) = psql(
        pg_other,
        "guest",
        "gpw",
        &["SELECT amount FROM ledger WHERE id = 1"],
    );
    assert_eq!(out, "");
    assert!(
        err.contains("ERROR:  permission denied for table ledger"),
        "{err}"
    );
    // A table's creator owns it: every privilege, and the right to grant them.
    let (out, err) = psql(
        pg,
        "builder",
        "bpw",
        &[
            "CREATE TABLE parts (id BIGINT PRIMARY KEY, name TEXT)",
            "INSERT INTO parts VALUES (1, 'bolt'), (2, 'nut')",
            "UPDATE parts SET name = 'screw' WHERE id = 2",
            "SELECT name FROM parts ORDER BY id",
        ],
    );
    assert!(err.is_empty(), "{err}");
    assert_eq!(out, "bolt\nscrew");
    let (_, err) = psql(pg_other, "guest", "gpw", &["SELECT * FROM parts"]);
    assert!(err.contains("permission denied for table parts"), "{err}");
    let (_, err) = psql(pg, "builder", "bpw", &["GRANT SELECT ON parts TO guest"]);
    assert!(err.is_empty(), "{err}");
    // Granted through process 1, seen by process 3 at once (the grants are replicated rows).
    let (out, err) = psql(
        pg_third,
        "guest",
        "gpw",
        &[
            "SELECT name FROM parts WHERE id = 1",
            "INSERT INTO parts VALUES (3, 'washer')",
        ],
    );
    assert_eq!(out, "bolt");
    assert!(err.contains("permission denied for table parts"), "{err}");
    for (sql, refusal) in [
        (
            "DELETE FROM parts WHERE id = 1",
            "permission denied for table parts",
        ),
        (
            "UPDATE parts SET name = 'x'",
            "permission denied for table parts",
        ),
        (
            "GRANT INSERT ON parts TO guest",
            "permission denied for table parts",
        ),
        ("DROP TABLE parts", "must be owner of table parts"),
        (
            "CREATE INDEX parts_name ON parts (name)",
            "must be owner of table parts",
        ),
        (
            "EXPLAIN SELECT * FROM ledger",
            "permission denied for table ledger",
        ),
    ] {
        let (_, err) = psql(pg_third, "guest", "gpw", &[sql]);
        assert!(err.contains(refusal), "{sql}: {err}");
    }
    let (_, err) = psql(pg, "builder", "bpw", &["GRANT SELECT ON ledger TO guest"]);
    assert!(err.contains("permission denied for table ledger"), "{err}");
    // REVOKE takes it away again, everywhere.
    let (_, err) = psql(
        pg_other,
        "builder",
        "bpw",
        &["REVOKE SELECT ON parts FROM guest"],
    );
    assert!(err.is_empty(), "{err}");
    let (_, err) = psql(pg_third, "guest", "gpw", &["SELECT * FROM parts"]);
    assert!(err.contains("permission denied for table parts"), "{err}");
    // The superuser grants on every table, checked against the catalog and the roles.
    let (_, err) = psql(
        pg,
        "admin",
        PASSWORD,
        &["GRANT ALL PRIVILEGES ON ALL TABLES IN SCHEMA public TO guest"],
    );
    assert!(err.is_empty(), "{err}");
    let (out, err) = psql(
        pg_other,
        "guest",
        "gpw",
        &[
            "INSERT INTO ledger VALUES (3, 30)",
            "UPDATE ledger SET amount = amount + 1 WHERE id = 3",
            "DELETE FROM parts WHERE id = 1",
            "SELECT sum(amount) FROM ledger",
            "SELECT count(*) FROM parts",
        ],
    );
    assert!(err.is_empty(), "{err}");
    assert_eq!(out, "61\n1");
    let (_, err) = psql(pg, "admin", PASSWORD, &["GRANT SELECT ON nope TO guest"]);
    assert!(err.contains("relation \"nope\" does not exist"), "{err}");
    let (_, err) = psql(pg, "admin", PASSWORD, &["GRANT SELECT ON ledger TO nobody"]);
    assert!(err.contains("role \"nobody\" does not exist"), "{err}");
    let (_, err) = psql(
        pg,
        "admin",
        PASSWORD,
        &["GRANT TRUNCATE ON ledger TO guest"],
    );
    assert!(err.contains("is not supported"), "{err}");
    let (_, err) = psql(
        pg,
        "admin",
        PASSWORD,
        &["REVOKE INSERT, DELETE ON ledger FROM guest"],
    );
    assert!(err.is_empty(), "{err}");

    // Real drivers: SCRAM-SHA-256 logins, a wrong password refused, 42501 for a missing grant.
    for client in ["pgjdbc", "psycopg"] {
        let lines = client_lines(
            client,
            pg_other,
            "guest",
            "gpw",
            &[
                "SELECT amount FROM ledger WHERE id = 1",
                "DELETE FROM ledger WHERE id = 1",
                "SELECT name FROM parts",
                "GRANT SELECT ON parts TO guest",
            ],
        );
        assert_eq!(lines[0], "connected", "{client}: {lines:?}");
        assert_eq!(lines[1], "rows: 10", "{client}: {lines:?}");
        assert!(
            lines[2].starts_with("error: 42501 ")
                && lines[2].contains("permission denied for table ledger"),
            "{client}: {lines:?}"
        );
        assert_eq!(lines[3], "rows: screw", "{client}: {lines:?}");
        // pgjdbc sends it in the extended protocol, psycopg (no parameters) as a simple query;
        // in both it runs and the guest, not the table's owner, is refused.
        assert!(
            lines[4].starts_with("error: 42501 ")
                && lines[4].contains("permission denied for table parts"),
            "{client}: {lines:?}"
        );
        let refused = client_lines(client, pg, "guest", "wrong", &["SELECT 1"]);
        assert!(
            refused[0].starts_with("connect error:")
                && refused[0].contains("password authentication failed for user \"guest\""),
            "{client}: {refused:?}"
        );
        if client == "pgjdbc" {
            assert!(
                refused[0].starts_with("connect error: 28P01 "),
                "{refused:?}"
            );
        }
    }

    // A dropped table takes its grants and its ownership with it: a new table of the name
    // starts with none.
    let (_, err) = psql(pg, "builder", "bpw", &["DROP TABLE parts"]);
    assert!(err.is_empty(), "{err}");
    let (_, err) = psql(
        pg,
        "admin",
        PASSWORD,
        &[
            "CREATE TABLE parts (id BIGINT PRIMARY KEY)",
            "INSERT INTO parts VALUES (7)",
        ],
    );
    assert!(err.is_empty(), "{err}");
    for user in [("builder", "bpw"), ("guest", "gpw")] {
        let (_, err) = psql(pg_third, user.0, user.1, &["SELECT * FROM parts"]);
        assert!(
            err.contains("permission denied for table parts"),
            "{user:?}: {err}"
        );
    }
    // A role that holds privileges is not dropped (PostgreSQL's 2BP01 and DETAIL); once
    // they are revoked it is, and a new role of the name starts with none.
    let (_, err) = psql(pg, "admin", PASSWORD, &["DROP ROLE guest"]);
    assert!(
        err.contains("ERROR:  role \"guest\" cannot be dropped because some objects depend on it\nDETAIL:  privileges for table kv\nprivileges for table ledger"),
        "{err}"
    );
    let (_, err) = psql(
        pg,
        "builder",
        "bpw",
        &["CREATE TABLE bins (id BIGINT PRIMARY KEY)"],
    );
    assert!(err.is_empty(), "{err}");
    let (_, err) = psql(pg, "admin", PASSWORD, &["DROP ROLE builder"]);
    assert!(err.contains("DETAIL:  owner of table bins"), "{err}");
    let (_, err) = psql(
        pg,
        "admin",
        PASSWORD,
        &[
            "REVOKE ALL ON ALL TABLES IN SCHEMA public FROM guest",
            "DROP ROLE guest",
            "CREATE ROLE guest LOGIN PASSWORD 'gpw'",
        ],
    );
    assert!(err.is_empty(), "{err}");
    let (_, err) = psql(pg_other, "guest", "gpw", &["SELECT * FROM ledger"]);
    assert!(err.contains("permission denied for table ledger"), "{err}");
    // Role and privilege statements in pgjdbc's extended protocol (Parse/Bind/Execute): a
    // role created and granted SELECT by pgjdbc reads, and is refused an INSERT (42501).
    let lines = client_lines(
        "pgjdbc",
        pg,
        "admin",
        PASSWORD,
        &[
            "CREATE ROLE clerk LOGIN PASSWORD 'cpw'",
            "GRANT SELECT ON ledger TO clerk",
            "CREATE ROLE clerk LOGIN",
            "CREATE ROLE other PASSWORD 'SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVk:c2VydmVy'",
        ],
    );
    assert_eq!(lines[0], "connected", "{lines:?}");
    assert!(lines[1].starts_with("count: "), "{lines:?}");
    assert!(lines[2].starts_with("count: "), "{lines:?}");
    assert!(
        lines[3].starts_with("error: 42710 ") && lines[3].contains("role \"clerk\" already exists"),
        "{lines:?}"
    );
    assert!(lines[4].starts_with("error: 0A000 "), "{lines:?}");
    let lines = client_lines(
        "pgjdbc",
        pg_other,
        "clerk",
        "cpw",
        &[
            "SELECT count(*) FROM ledger",
            "INSERT INTO ledger VALUES (9, 90)",
            "DROP ROLE guest",
        ],
    );
    assert_eq!(lines[0], "connected", "{lines:?}");
    assert_eq!(lines[1], "rows: 3", "{lines:?}");
    assert!(
        lines[2].starts_with("error: 42501 ")
            && lines[2].contains("permission denied for table ledger"),
        "{lines:?}"
    );
    assert!(
        lines[3].starts_with("error: 42501 ")
            && lines[3].contains("permission denied to drop role"),
        "{lines:?}"
    );
    let lines = client_lines(
        "pgjdbc",
        pg,
        "admin",
        PASSWORD,
        &[
            "DROP ROLE clerk",
            "REVOKE SELECT ON ledger FROM clerk",
            "DROP ROLE clerk",
        ],
    );
    assert!(
        lines[1].starts_with("error: 2BP01 ") && lines[1].contains("privileges for table ledger"),
        "{lines:?}"
    );
    assert!(lines[2].starts_with("count: "), "{lines:?}");
    assert!(lines[3].starts_with("count: "), "{lines:?}");
    assert!(client_lines("pgjdbc", pg, "clerk", "cpw", &[])[0].starts_with("connect error: 28P01 "));
    // SHOW max_connections is this process's per-port bound (secured_cluster sets 12).
    assert_eq!(
        psql(pg_third, "admin", PASSWORD, &["SHOW max_connections"]).0,
        "12"
    );
    let lines = client_lines("pgjdbc", pg, "admin", PASSWORD, &["SHOW max_connections"]);
    assert_eq!(lines[1], "rows: 12", "{lines:?}");
    // The superuser is never refused.
    assert_eq!(
        psql(
            pg_third,
            "admin",
            PASSWORD,
            &["SELECT count(*) FROM ledger"]
        )
        .0,
        "3"
    );
}

#[test]
fn connection_limits_hold_per_role_and_per_process() {
    // Ports 32401–32403 (RESP), 32501–32503, 32601–32603, 32701–32703 (pgwire).
    let cluster = secured_cluster("security-limits-per-role", 32401, 32701);
    let (pg, pg_other) = (32701, 32702);
    let (_, err) = psql(
        pg,
        "admin",
        PASSWORD,
        &["CREATE ROLE limited LOGIN PASSWORD 'lpw' CONNECTION LIMIT 1"],
    );
    assert!(err.is_empty(), "{err}");
    assert_eq!(psql(pg, "limited", "lpw", &["SELECT 1"]).0, "1");
    // One RESP connection of the role holds its one slot in process 1: pgwire and RESP count
    // together.
    let mut held = RespClient::connect(cluster.client_ports[0], Duration::from_secs(1)).unwrap();
    let reply = held.call(&arguments(&["AUTH", "limited", "lpw"])).unwrap();
    assert_eq!(reply, Value::Simple("OK".into()));
    let (out, err) = psql(pg, "limited", "lpw", &["SELECT 1"]);
    assert_eq!(out, "");
    assert!(
        err.contains("FATAL:  too many connections for role \"limited\""),
        "{err}"
    );
    let mut second = RespClient::connect(cluster.client_ports[0], Duration::from_secs(1)).unwrap();
    assert_eq!(
        second
            .call(&arguments(&["AUTH", "limited", "lpw"]))
            .unwrap(),
        Value::Error("ERR too many connections for role \"limited\"".into())
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let code = runtime.block_on(async {
        let error = tokio_postgres::connect(
            &format!("host=127.0.0.1 port={pg} user=limited password=lpw dbname=tessera"),
            tokio_postgres::NoTls,
        )
        .await
        .err()
        .expect("the role is at its limit");
        error.code().map(|code| code.code().to_string())
    });
    assert_eq!(code.as_deref(), Some("53300"));
    // The count is per process: process 2 has none of the role's connections.
    assert_eq!(psql(pg_other, "limited", "lpw", &["SELECT 1"]).0, "1");
    // A superuser is not held to a limit; ALTER ROLE raises it; a closed connection frees its
    // slot.
    let (_, err) = psql(
        pg,
        "admin",
        PASSWORD,
        &["ALTER ROLE limited CONNECTION LIMIT 2"],
    );
    assert!(err.is_empty(), "{err}");
    assert_eq!(psql(pg, "limited", "lpw", &["SELECT 1"]).0, "1");
    let (_, err) = psql(
        pg,
        "admin",
        PASSWORD,
        &["ALTER ROLE limited CONNECTION LIMIT 1"],
    );
    assert!(err.is_empty(), "{err}");
    assert!(psql(pg, "limited", "lpw", &["SELECT 1"])
        .1
        .contains("too many connections"));
    drop(held);
    assert!(
        wait_until(Duration::from_secs(5), || psql(
            pg,
            "limited",
            "lpw",
            &["SELECT 1"]
        )
        .0 == "1"),
        "the closed connection's slot is free again"
    );
    let (_, err) = psql(
        pg,
        "admin",
        PASSWORD,
        &["ALTER ROLE limited CONNECTION LIMIT -2"],
    );
    assert!(err.contains("invalid connection limit: -2"), "{err}");
}

#[test]
fn the_replay_check_is_what_drops_replayed_peer_frames() {
    // The canary of the replay part of `peer_frames_without_the_cluster_secret_…`: a cluster
    // whose links tag frames without nonces or numbers (debug builds only) takes a recorded
    // frame replayed on its connection and on a new one. Ports 32051–32053, 32151–32153,
    // 32251–32253, 32351–32353.
    if !cfg!(debug_assertions) {
        return;
    }
    let _cluster = secured_cluster_with_env(
        "security-replay-canary",
        32051,
        32351,
        3,
        |_| {},
        &[("TESSERA_CANARY_PEER_REPLAY", "1")],
    );
    let frame = runtime::ecast::link::Frame::Stable {
        sender: placement::ProcessId(0),
        sequence: ecast::Sequence(1),
        timestamp: ecast::Timestamp(1),
    };
    let before = frames_unauthenticated(32051);
    let mut peer = PeerConnection::open(32151, SECRET.as_bytes(), false);
    let recorded = peer.seal(&frame);
    peer.send(&recorded);
    peer.send(&recorded);
    let mut replayer = PeerConnection::open(32151, b"the replayer has no secret", false);
    replayer.send(&recorded);
    assert_eq!(
        frames_unauthenticated(32051),
        before,
        "without nonces and numbers, replays pass the tag check"
    );
    // The tag itself is still checked: a forged frame is dropped even here.
    let mut forger = PeerConnection::open(32151, b"guessed secret, wrong", false);
    forger.send_frame(&frame);
    assert_eq!(frames_unauthenticated(32051), before + 1);
}
