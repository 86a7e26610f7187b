//! BullMQ's basic producer/worker example (`tests/bullmq/example.js`), with BullMQ and ioredis
//! unmodified from npm (`tests/bullmq/package-lock.json`), against the cluster `tessera dev`
//! starts: a producer adds jobs, a worker processes them, and the script asserts that every job
//! completed exactly once with its result, and a QueueEvents listener (XREAD BLOCK on the
//! queue's event stream) sees each job's `completed` event once. BullMQ runs its Lua scripts (cmsgpack, cjson,
//! undeclared job keys built from a declared prefix, streams), EVALSHA, BZPOPMIN, INFO and
//! CLIENT SETNAME. `npm ci` installs the packages if `node_modules` is missing; the test skips,
//! saying so, only if node/npm is missing or the registry cannot be reached. Ports: 15520
//! (+100, +200).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// `tessera dev`, killed if the test fails before it stops it.
struct DevGuard(std::process::Child);

impl Drop for DevGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const PORT: u16 = 15520;
const JOBS: u32 = 100;

fn example_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/bullmq")
}

/// Installs the pinned packages if they are missing; `Err` with the reason to skip if it
/// cannot (no node or npm, or no registry).
fn install() -> Result<(), String> {
    let directory = example_dir();
    if directory.join("node_modules/bullmq/package.json").exists() {
        return Ok(());
    }
    for tool in ["node", "npm"] {
        let found = Command::new(tool).arg("--version").output();
        if !found.is_ok_and(|output| output.status.success()) {
            return Err(format!("{tool} is not installed"));
        }
    }
    let output = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(&directory)
        .output()
        .map_err(|error| format!("npm ci did not start: {error}"))?;
    if output.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&output.stderr);
    let unreachable = [
        "ENOTFOUND",
        "ECONNREFUSED",
        "EAI_AGAIN",
        "ETIMEDOUT",
        "ENETUNREACH",
    ];
    if unreachable.iter().any(|code| text.contains(code)) {
        return Err(format!("npm ci cannot reach the registry: {text}"));
    }
    panic!("npm ci failed: {text}");
}

#[test]
fn bullmq_producer_and_worker_run_every_job_exactly_once_against_tessera_dev() {
    if let Err(reason) = install() {
        eprintln!("SKIPPED: BullMQ's example needs its npm packages: {reason}");
        return;
    }
    let data_dir = std::env::temp_dir().join(format!("tessera-test-bullmq-{}", std::process::id()));
    let mut dev = DevGuard(
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args([
                "dev",
                "--insecure",
                "--port",
                &PORT.to_string(),
                "--pg-port",
                "0",
            ])
            .args([
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
    // The example against one storage process, then against another (a new queue each run):
    // it passes wherever BullMQ connects.
    for port in [PORT, PORT + 1] {
        let output = Command::new("node")
            .arg("example.js")
            .arg(port.to_string())
            .arg(JOBS.to_string())
            .current_dir(example_dir())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "the example failed against port {port}:\n{stdout}\n{stderr}"
        );
        assert!(
            stdout.starts_with(&format!(
                "OK {JOBS} jobs added, processed and completed exactly once"
            )),
            "{stdout}"
        );
        eprintln!("port {port}: {}", stdout.trim());
    }
    drop(dev);
    let _ = std::fs::remove_dir_all(&data_dir);
}
