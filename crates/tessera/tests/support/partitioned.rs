//! A partitioned cluster of real processes (`tessera node`): routers and storage
//! processes on loopback, in `sequenced` or `vr` mode, with the faults the tests inject (SIGKILL,
//! SIGSTOP, restarts) and `tessera admin`. Storage process i (0-based) serves RESP on
//! `port + i` and E-Cast on `port + 100 + i`; router i listens on `port + 200 + i`, unless the
//! test's `adjust` moves them.

use super::{arguments, RespClient};
use resp::Value;
use runtime::ecast::config::ClusterConfig;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct PartitionedCluster {
    pub directory: PathBuf,
    pub config: ClusterConfig,
    pub client_ports: Vec<u16>,
    pub routers: Vec<Option<Child>>,
    /// Each router's current log file (a restart writes a new one).
    pub router_logs: Vec<String>,
    pub storage: Vec<Option<Child>>,
    /// Each storage process's current log file.
    pub storage_logs: Vec<String>,
    /// Environment of the router processes (a test's fault, `runtime::ecast::fault`).
    pub router_env: Vec<(String, String)>,
    /// Environment of the storage processes (a canary).
    pub storage_env: Vec<(String, String)>,
}

impl PartitionedCluster {
    /// `routers` routers and `storage` storage processes with `replication` replicas per
    /// partition; `adjust` edits the configuration before it is written. No process runs yet
    /// (`launch` starts them), so a test can still set their environment.
    pub fn prepare(
        name: &str,
        port: u16,
        (routers, storage, replication): (u8, u64, u8),
        adjust: impl FnOnce(&mut ClusterConfig),
    ) -> PartitionedCluster {
        let directory =
            std::env::temp_dir().join(format!("tessera-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&directory);
        std::fs::create_dir_all(&directory).unwrap();
        let mut config = ClusterConfig::loopback(
            u64::from(port),
            routers,
            storage,
            replication,
            port,
            port + 200,
            directory.clone(),
        )
        .unwrap();
        // The tests of replication, routing and faults run without authentication;
        // `tests/security.rs` runs with it (and `adjust` may turn it back on).
        config.security = runtime::security::SecurityConfig::insecure();
        adjust(&mut config);
        std::fs::write(directory.join("cluster.toml"), config.render()).unwrap();
        PartitionedCluster {
            client_ports: config
                .storage
                .iter()
                .map(|storage| storage.client.port())
                .collect(),
            directory,
            config,
            routers: Vec::new(),
            router_logs: Vec::new(),
            storage: Vec::new(),
            storage_logs: Vec::new(),
            router_env: Vec::new(),
            storage_env: Vec::new(),
        }
    }

    /// A cluster as `tessera dev` starts it, running: 3 routers and 3 storage processes
    /// hosting partition groups of 3 (`partitions`: `vr` or `skyros`), RESP on `port + i` and
    /// PostgreSQL on `pg_port + i`.
    pub fn dev(
        name: &str,
        partitions: runtime::ecast::config::PartitionMode,
        port: u16,
        pg_port: u16,
    ) -> PartitionedCluster {
        PartitionedCluster::dev_with_env(name, partitions, port, pg_port, &[])
    }

    /// `dev`, with these variables in the storage processes' environment (a test's setting).
    pub fn dev_with_env(
        name: &str,
        partitions: runtime::ecast::config::PartitionMode,
        port: u16,
        pg_port: u16,
        storage_env: &[(&str, &str)],
    ) -> PartitionedCluster {
        let mut cluster = PartitionedCluster::prepare(name, port, (3, 3, 3), |config| {
            config.partitions = partitions;
            *config = config.clone().with_pg_ports(pg_port).unwrap();
        });
        cluster.storage_env.extend(
            storage_env
                .iter()
                .map(|(name, value)| (name.to_string(), value.to_string())),
        );
        cluster.launch();
        // Readiness is not what these tests check: under a loaded machine (tests in parallel,
        // two clusters of six debug processes starting at once) 30 s was not always enough.
        assert!(cluster.wait_until_ready(Duration::from_secs(60)));
        cluster
    }

    /// Starts every router and storage process of the configuration.
    pub fn launch(&mut self) {
        for index in 0..self.config.routers.len() as u64 {
            let name = format!("router-{index}");
            let child = self.spawn(&name, "--router", index);
            self.routers.push(Some(child));
            self.router_logs.push(format!("{name}.log"));
        }
        for id in 1..=self.config.storage.len() as u64 {
            let name = format!("storage-{id}");
            let child = self.spawn(&name, "--storage", id);
            self.storage.push(Some(child));
            self.storage_logs.push(format!("{name}.log"));
        }
    }

    fn spawn(&self, name: &str, role: &str, index: u64) -> Child {
        let log = std::fs::File::create(self.directory.join(format!("{name}.log"))).unwrap();
        let env = if role == "--router" {
            &self.router_env
        } else {
            &self.storage_env
        };
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .envs(env.iter().map(|(name, value)| (name, value)))
            .arg("node")
            .arg("--cluster")
            .arg(self.directory.join("cluster.toml"))
            .arg(role)
            .arg(index.to_string())
            .arg("--exit-with-parent")
            .stdin(Stdio::piped())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap()
    }

    /// Ready when every storage process's gateway has had an answer from the routers.
    pub fn wait_until_ready(&self, timeout: Duration) -> bool {
        wait_until(timeout, || {
            self.client_ports.iter().all(|port| {
                info(*port).is_some_and(|text| !text.contains("tessera_ecast_router_answers:0"))
            })
        })
    }

    /// The running router whose log last says it is the primary of a normal view, in the
    /// highest such view (a deposed primary's log lags until it hears of the new view).
    pub fn lead_router(&self) -> Option<usize> {
        let mut lead: Option<(u64, usize)> = None;
        for (index, child) in self.routers.iter().enumerate() {
            if child.is_none() {
                continue;
            }
            let log = std::fs::read_to_string(self.directory.join(&self.router_logs[index]))
                .unwrap_or_default();
            let Some(line) = log.lines().rfind(|line| line.contains("info: view ")) else {
                continue;
            };
            if !line.contains("Normal (primary)") {
                continue;
            }
            let view = line
                .split("info: view ")
                .nth(1)
                .and_then(|rest| rest.split(' ').next())
                .and_then(|view| view.parse::<u64>().ok());
            if let Some(view) = view {
                if lead.is_none_or(|(known, _)| view > known) {
                    lead = Some((view, index));
                }
            }
        }
        lead.map(|(_, index)| index)
    }

    /// `tessera admin status`: the configuration version and, per process id, the words of
    /// its row.
    pub fn admin_status(&self) -> (u64, BTreeMap<u64, Vec<String>>) {
        let text = self.admin_ok(&["status"]);
        let mut lines = text.lines();
        let version = lines
            .next()
            .and_then(|line| line.strip_prefix("configuration version "))
            .and_then(|rest| rest.split(':').next())
            .and_then(|version| version.parse().ok())
            .unwrap_or_else(|| panic!("no version in {text}"));
        let mut processes = BTreeMap::new();
        for line in lines.skip(1) {
            let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
            let id: u64 = words[0].parse().unwrap();
            processes.insert(id, words);
        }
        (version, processes)
    }

    /// Waits until a router other than `not` leads.
    pub fn wait_for_lead(&self, not: Option<usize>) -> usize {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(lead) = self.lead_router().filter(|lead| Some(*lead) != not) {
                return lead;
            }
            assert!(Instant::now() < deadline, "no router leads after 10 s");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends `signal` (`STOP`, `CONT`) to storage process `index` (0-based).
    pub fn signal_storage(&self, index: usize, signal: &str) {
        if let Some(child) = &self.storage[index] {
            let status = Command::new("kill")
                .arg(format!("-{signal}"))
                .arg(child.id().to_string())
                .status()
                .unwrap();
            assert!(status.success(), "kill -{signal} failed");
        }
    }

    pub fn signal_router(&self, index: usize, signal: &str) {
        if let Some(child) = &self.routers[index] {
            let status = Command::new("kill")
                .arg(format!("-{signal}"))
                .arg(child.id().to_string())
                .status()
                .unwrap();
            assert!(status.success(), "kill -{signal} failed");
        }
    }

    /// SIGKILL of router `index` (0-based).
    pub fn kill_router(&mut self, index: usize) {
        if let Some(mut child) = self.routers[index].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn restart_router(&mut self, index: usize) {
        assert!(self.routers[index].is_none(), "router {index} is running");
        let name = format!("router-{index}-restarted");
        self.routers[index] = Some(self.spawn(&name, "--router", index as u64));
        self.router_logs[index] = format!("{name}.log");
    }

    /// SIGKILL of storage process `index` (0-based: process id `index + 1`).
    pub fn kill_storage(&mut self, index: usize) {
        if let Some(mut child) = self.storage[index].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn restart_storage(&mut self, index: usize) {
        assert!(self.storage[index].is_none(), "storage {index} is running");
        let name = format!("storage-{}-restarted", index + 1);
        self.storage[index] = Some(self.spawn(&name, "--storage", index as u64 + 1));
        self.storage_logs[index] = format!("{name}.log");
    }

    /// `vr` mode: whether every replica of storage process `index` is back in a normal view
    /// (its log's last line per partition says `Normal`); it hosts `replication` of them.
    pub fn recovered(&self, index: usize, replication: usize) -> bool {
        let log = std::fs::read_to_string(self.directory.join(&self.storage_logs[index]))
            .unwrap_or_default();
        let mut last: BTreeMap<String, bool> = BTreeMap::new();
        for line in log.lines() {
            if let Some(rest) = line.split("info: partition ").nth(1) {
                let partition = rest.split(' ').next().unwrap_or_default().to_string();
                last.insert(partition, rest.contains(" Normal"));
            }
        }
        last.len() == replication && last.values().all(|normal| *normal)
    }

    /// The partition (its id in the router configuration) that holds `key` (hash placement).
    pub fn partition_of(&self, key: &str) -> placement::ProcessId {
        self.config
            .router_configuration()
            .owner(runtime::ecast::payload::KeyPlacement::hash().position(key.as_bytes()))
            .expect("every position has an owner")
    }

    /// Keys `{prefix}0`, `{prefix}1`, … each in a partition none of the earlier ones is in,
    /// with their partitions.
    pub fn keys_in_partitions(
        &self,
        prefix: &str,
        count: usize,
    ) -> Vec<(String, placement::ProcessId)> {
        let mut keys: Vec<(String, placement::ProcessId)> = Vec::new();
        for key in (0..).map(|index| format!("{prefix}{index}")) {
            if keys.len() == count {
                break;
            }
            let partition = self.partition_of(&key);
            if keys.iter().all(|(_, known)| *known != partition) {
                keys.push((key, partition));
            }
        }
        keys
    }

    /// Runs `tessera admin --cluster FILE words…`: (success, stdout, stderr).
    /// Writes `frames` (forged by a test: not from any real peer) to every storage process's
    /// E-Cast port, waits a second, and panics if any storage process exited.
    pub fn forge_to_every_storage(&mut self, frames: &[runtime::ecast::link::Frame]) {
        use std::io::Write;
        let bytes: Vec<u8> = frames
            .iter()
            .flat_map(runtime::ecast::link::encode)
            .collect();
        for storage in &self.config.storage {
            let mut stream = std::net::TcpStream::connect(storage.address).unwrap();
            stream.write_all(&bytes).unwrap();
        }
        std::thread::sleep(Duration::from_millis(1_000));
        for (index, child) in self.storage.iter_mut().enumerate() {
            let child = child.as_mut().expect("every storage process was started");
            assert!(
                child.try_wait().unwrap().is_none(),
                "storage process {} exited after forged frames",
                index + 1
            );
        }
    }

    /// `tessera admin --cluster FILE words…` started, not waited for (its output piped): a
    /// test that injects a fault while the change runs (`Child::wait_with_output`).
    pub fn admin_spawn(&self, words: &[&str]) -> Child {
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .arg("admin")
            .arg("--cluster")
            .arg(self.directory.join("cluster.toml"))
            .arg("--timeout")
            .arg("30")
            .args(words)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Storage process `index`'s current log (0-based).
    pub fn storage_log(&self, index: usize) -> String {
        std::fs::read_to_string(self.directory.join(&self.storage_logs[index])).unwrap_or_default()
    }

    /// Every storage log of the run, restarted processes' earlier logs included.
    pub fn all_storage_logs(&self) -> String {
        let mut names: Vec<PathBuf> = std::fs::read_dir(&self.directory)
            .map(|entries| {
                entries
                    .filter_map(|entry| entry.ok().map(|entry| entry.path()))
                    .filter(|path| {
                        path.file_name()
                            .and_then(|name| name.to_str())
                            .is_some_and(|name| {
                                name.starts_with("storage-") && name.ends_with(".log")
                            })
                    })
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
            .iter()
            .map(|path| std::fs::read_to_string(path).unwrap_or_default())
            .collect()
    }

    pub fn admin(&self, words: &[&str]) -> (bool, String, String) {
        let output = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .arg("admin")
            .arg("--cluster")
            .arg(self.directory.join("cluster.toml"))
            .arg("--timeout")
            .arg("30")
            .args(words)
            .output()
            .unwrap();
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    pub fn admin_ok(&self, words: &[&str]) -> String {
        let (ok, stdout, stderr) = self.admin(words);
        assert!(ok, "tessera admin {words:?} failed:\n{stdout}\n{stderr}");
        stdout
    }
}

impl Drop for PartitionedCluster {
    fn drop(&mut self) {
        for child in self.routers.iter_mut().chain(self.storage.iter_mut()) {
            if let Some(mut child) = child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        // A failing test keeps its cluster's directory (logs, data) for debugging; a canary's
        // expected failure (`catch_canary`) does not, or every test run would leave one behind.
        if !std::thread::panicking() || CANARY_RUNNING.with(Cell::get) {
            let _ = std::fs::remove_dir_all(&self.directory);
        }
    }
}

thread_local! {
    static CANARY_RUNNING: Cell<bool> = const { Cell::new(false) };
}

/// Runs a canary (a run with a bug on purpose, which the checks must catch, often by
/// panicking) and returns how it ended, as `std::panic::catch_unwind` does. Clusters dropped
/// while it unwinds remove their directories, as after a passing test.
pub fn catch_canary<R>(run: impl FnOnce() -> R) -> std::thread::Result<R> {
    let was = CANARY_RUNNING.with(|running| running.replace(true));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run));
    CANARY_RUNNING.with(|running| running.set(was));
    outcome
}

/// Polls `condition` every 50 ms until it holds (true) or `timeout` passes (its last answer).
pub fn wait_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    condition()
}

/// `INFO tessera` of the storage process serving RESP on `port`, if it answers.
pub fn info(port: u16) -> Option<String> {
    let mut client = RespClient::connect(port, Duration::from_millis(200)).ok()?;
    match client.call(&arguments(&["INFO", "tessera"])).ok()? {
        Value::Bulk(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
        Value::Verbatim(text) => Some(text),
        _ => None,
    }
}

/// A counter of `INFO tessera` of the storage process serving RESP on `port` (0 if absent).
pub fn info_counter(port: u16, name: &str) -> u64 {
    info(port)
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{name}:")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0)
}

/// The real `redis-cli` against `port`; its standard output.
/// Preloaded key `index` (tests that check no acknowledged write is lost while data moves).
pub fn preload_key(index: usize) -> String {
    format!("pre{index}")
}

/// Preloaded key `index`'s value: the index, then `padding` bytes.
pub fn preload_value(index: usize, padding: usize) -> String {
    format!("{index}-{}", "x".repeat(padding))
}

/// Writes `count` preloaded keys through `port` as MSETs of 100 keys (multi-partition
/// messages once the keys span several partitions).
pub fn preload(port: u16, count: usize, padding: usize) {
    let mut client = RespClient::connect(port, Duration::from_secs(1)).unwrap();
    for batch in (0..count).collect::<Vec<_>>().chunks(100) {
        let mut words = vec!["MSET".to_string()];
        for index in batch {
            words.push(preload_key(*index));
            words.push(preload_value(*index, padding));
        }
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        assert_eq!(
            client.call(&arguments(&words)).unwrap(),
            Value::Simple("OK".into())
        );
    }
}

/// Runs `commands` on one redis-cli connection (piped in, one per line; words must not
/// contain spaces), so per-connection state (`READMODE`) carries from one to the next.
pub fn redis_cli_session(port: u16, commands: &[&[&str]]) -> String {
    use std::io::Write;
    let mut child = Command::new("redis-cli")
        .arg("-p")
        .arg(port.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("redis-cli is installed (scripts/test installs it)");
    let mut input = child.stdin.take().unwrap();
    for words in commands {
        writeln!(input, "{}", words.join(" ")).unwrap();
    }
    drop(input);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "redis-cli failed: {output:?}");
    String::from_utf8(output.stdout).unwrap()
}

pub fn redis_cli(port: u16, words: &[&str]) -> String {
    let output = Command::new("redis-cli")
        .arg("-p")
        .arg(port.to_string())
        .args(words)
        .output()
        .expect("redis-cli is installed (scripts/test installs it)");
    assert!(output.status.success(), "redis-cli failed: {output:?}");
    String::from_utf8(output.stdout).unwrap()
}
