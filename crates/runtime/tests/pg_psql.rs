//! The PostgreSQL front end against the real `psql` (Debian's postgresql-client; scripts/test
//! installs it). Skipped, with a note, where psql is missing.

use runtime::pg::{serve, PgLimits};
use runtime::sql_backend::LocalBackend;
use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Stdio};

/// A server on a loopback port over a fresh `LocalBackend`, on its own runtime thread.
fn start_server() -> SocketAddr {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            sender
                .send(listener.local_addr().expect("address"))
                .expect("send");
            serve(listener, LocalBackend::default(), PgLimits::default()).await;
        });
    });
    receiver.recv().expect("server address")
}

/// The real-client tests must run, not skip: `scripts/test` installs postgresql-client.
fn require_psql() {
    assert!(
        psql_available(),
        "psql is not installed: scripts/test installs postgresql-client"
    );
}

fn psql_available() -> bool {
    Command::new("psql")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|status| status.success())
        .unwrap_or(false)
}

/// Runs psql with `script` on standard input; returns (stdout, stderr).
fn psql(address: SocketAddr, script: &str) -> (String, String) {
    let mut child = Command::new("psql")
        .args([
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=0",
            "-h",
            &address.ip().to_string(),
            "-p",
            &address.port().to_string(),
            "-U",
            "tessera",
            "-d",
            "tessera",
        ])
        .env("PGCONNECT_TIMEOUT", "5")
        .env("PGSSLMODE", "prefer")
        .env("PGGSSENCMODE", "disable")
        .env_remove("PGPASSWORD")
        .env("PAGER", "cat")
        .env("PSQL_PAGER", "cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("psql starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("script written");
    let output = child.wait_with_output().expect("psql finishes");
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn psql_session_with_ddl_dml_copy_catalog_and_errors() {
    require_psql();
    let address = start_server();
    let script = r#"
CREATE TABLE users (id INT PRIMARY KEY, name TEXT NOT NULL, age INT, city VARCHAR(20));
INSERT INTO users VALUES (1, 'ada', 36, 'london'), (2, 'bob', 25, 'paris'), (3, 'cy', 52, 'london');
SELECT id, name FROM users WHERE city = 'london' AND age > 40;
UPDATE users SET city = 'rome' WHERE age < 30;
DELETE FROM users WHERE name = 'cy';
SELECT id, name, age, city FROM users ORDER BY id;
INSERT INTO users VALUES (1, 'dup', 1, 'x');
SELECT count(*) AS n FROM users;
COPY users (id, name, age, city) FROM STDIN;
10	dee	41	oslo
11	eve	\N	lima
\.
\copy users from stdin
20	fay	30	kyiv
\.
SELECT id, name, age FROM users WHERE id >= 10 ORDER BY id;
\dt
\d users
SELECT 1 AS one; SELECT 'two' AS two;
SELECT nosuchcolumn FROM users;
SHOW server_version;
"#;
    let (stdout, stderr) = psql(address, script);
    eprintln!("--- stdout\n{stdout}\n--- stderr\n{stderr}");
    // Non-key predicates.
    assert!(stdout.contains(" id | name \n----+------\n  3 | cy\n(1 row)"));
    // UPDATE and DELETE with predicates.
    assert!(stdout.contains("  1 | ada  |  36 | london"));
    assert!(stdout.contains("  2 | bob  |  25 | rome"));
    assert!(!stdout.contains("  3 | cy   |"));
    // The duplicate key fails and the session goes on.
    assert!(stderr.contains("ERROR:  duplicate key value violates unique constraint"));
    assert!(stdout.contains(" n \n---\n 2\n(1 row)"));
    // COPY and \copy.
    assert!(stdout.contains(" 10 | dee  |  41"));
    assert!(stdout.contains(" 11 | eve  |    "));
    assert!(stdout.contains(" 20 | fay  |  30"));
    // Catalog commands.
    assert!(stdout.contains("users"), "\\dt lists the table");
    assert!(
        stdout.contains("Table \"public.users\""),
        "\\d describes the table"
    );
    assert!(stdout.contains("character varying(20)"));
    // Several statements in one query; an error leaves the session usable.
    assert!(stdout.contains(" one \n-----\n   1"));
    assert!(stdout.contains(" two \n-----\n two"));
    assert!(stderr.contains("nosuchcolumn"));
    assert!(stdout.contains("15.0"));
}

#[test]
fn psql_reports_an_error_code_with_verbose_errors() {
    require_psql();
    let address = start_server();
    let script = "\\set VERBOSITY verbose\nCREATE TABLE t (k INT PRIMARY KEY);\nINSERT INTO t VALUES (1);\nINSERT INTO t VALUES (1);\nSELECT k FROM t;\n";
    let (stdout, stderr) = psql(address, script);
    assert!(stderr.contains("ERROR:  23505"), "stderr: {stderr}");
    assert!(stdout.contains(" k \n---\n 1\n(1 row)"), "stdout: {stdout}");
}

/// pgbench (from the same Debian package) with a custom script, in the simple, extended and
/// prepared query modes (its built-in TPC-B-like schema needs statements the planner refuses).
#[test]
fn pgbench_custom_script_in_every_query_mode() {
    let available = Command::new("pgbench")
        .arg("--version")
        .output()
        .map(|output| output.status.success())
        .unwrap_or(false);
    assert!(
        available,
        "pgbench is not installed: scripts/test installs postgresql-client"
    );
    require_psql();
    let address = start_server();
    let values: Vec<String> = (1..=100).map(|id| format!("({id}, 0)")).collect();
    let (_, stderr) = psql(
        address,
        &format!(
            "CREATE TABLE accounts (id INT PRIMARY KEY, balance BIGINT);\nINSERT INTO accounts VALUES {};\n",
            values.join(", ")
        ),
    );
    assert!(stderr.is_empty(), "{stderr}");
    let script = std::env::temp_dir().join(format!("tessera-pgbench-{}.sql", address.port()));
    std::fs::write(
        &script,
        "\\set id random(1, 100)\nUPDATE accounts SET balance = 1 WHERE id = :id;\nSELECT balance FROM accounts WHERE id = :id;\n",
    )
    .expect("script");
    for mode in ["simple", "extended", "prepared"] {
        let output = Command::new("pgbench")
            .args([
                "-n",
                "-h",
                &address.ip().to_string(),
                "-p",
                &address.port().to_string(),
                "-U",
                "tessera",
                "-c",
                "2",
                "-t",
                "50",
                "-M",
                mode,
                "-f",
                &script.to_string_lossy(),
                "tessera",
            ])
            .env("PGGSSENCMODE", "disable")
            .output()
            .expect("pgbench runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{mode}: {stdout}\n{stderr}");
        assert!(
            stdout.contains("number of transactions actually processed: 100/100"),
            "{mode}: {stdout}\n{stderr}"
        );
    }
    let _ = std::fs::remove_file(&script);
}
