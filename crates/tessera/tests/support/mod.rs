//! Test support for real-process tests: a cluster of `tessera node` processes, a blocking RESP
//! client, and a history checked for linearisability against the Redis command model.

#![allow(dead_code)]

pub mod load;
pub mod partitioned;
pub mod rubberband;

use lincheck::{Budget, CheckResult, Model, Operation};
use resp::{Plan, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct Cluster {
    pub directory: PathBuf,
    pub durability: &'static str,
    pub client_ports: Vec<u16>,
    nodes: Vec<Option<Child>>,
}

impl Cluster {
    /// Starts `replicas` nodes with RESP on `port..` and peers on `port + 100..`.
    pub fn start(name: &str, replicas: u8, durability: &'static str, port: u16) -> Cluster {
        Cluster::start_with(name, replicas, durability, "vr", port)
    }

    /// As `start`, with a replication protocol (`vr` or `skyros`).
    pub fn start_with(
        name: &str,
        replicas: u8,
        durability: &'static str,
        replication: &str,
        port: u16,
    ) -> Cluster {
        Cluster::start_with_pg(name, replicas, durability, replication, port, 0)
    }

    /// As `start_with`; replica i also serves PostgreSQL on `pg_port + i` (0: not at all).
    pub fn start_with_pg(
        name: &str,
        replicas: u8,
        durability: &'static str,
        replication: &str,
        port: u16,
        pg_port: u16,
    ) -> Cluster {
        let directory =
            std::env::temp_dir().join(format!("tessera-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&directory);
        std::fs::create_dir_all(&directory).unwrap();
        let mut configuration = Vec::new();
        for index in 0..replicas {
            configuration.push(format!(
                "\n[[replicas]]\npeer = \"127.0.0.1:{}\"\nclient = \"127.0.0.1:{}\"\n",
                port + 100 + u16::from(index),
                port + u16::from(index)
            ));
            if pg_port != 0 {
                configuration.push(format!(
                    "pg = \"127.0.0.1:{}\"\n",
                    pg_port + u16::from(index)
                ));
            }
        }
        for index in 0..replicas {
            let text = format!(
                "cluster = {port}\nreplica = {index}\ndurability = \"{durability}\"\nreplication = \"{replication}\"\ndata_dir = {:?}\ntick_ms = 5\n{}",
                directory.join(format!("r{index}")).display().to_string(),
                configuration.concat()
            );
            std::fs::write(directory.join(format!("r{index}.toml")), text).unwrap();
        }
        let mut cluster = Cluster {
            directory,
            durability,
            client_ports: (0..replicas).map(|index| port + u16::from(index)).collect(),
            nodes: (0..replicas).map(|_| None).collect(),
        };
        for index in 0..replicas as usize {
            cluster.restart(index);
        }
        cluster
    }

    pub fn restart(&mut self, index: usize) {
        assert!(
            self.nodes[index].is_none(),
            "replica {index} is already running"
        );
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.directory.join(format!("r{index}.log")))
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .arg("node")
            .arg("--config")
            .arg(self.directory.join(format!("r{index}.toml")))
            .arg("--exit-with-parent")
            .stdin(Stdio::piped())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.nodes[index] = Some(child);
    }

    /// SIGKILL: the process gets no chance to do anything.
    pub fn kill(&mut self, index: usize) {
        if let Some(mut child) = self.nodes[index].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn signal(&self, index: usize, signal: &str) {
        if let Some(child) = &self.nodes[index] {
            let status = Command::new("kill")
                .arg(format!("-{signal}"))
                .arg(child.id().to_string())
                .status()
                .unwrap();
            assert!(status.success(), "kill -{signal} failed");
        }
    }

    pub fn is_running(&self, index: usize) -> bool {
        self.nodes[index].is_some()
    }

    /// INFO fields of one replica, if it answers.
    pub fn info(&self, index: usize) -> Option<BTreeMap<String, String>> {
        let mut client =
            RespClient::connect(self.client_ports[index], Duration::from_millis(500)).ok()?;
        match client.call(&[b"INFO".to_vec()]).ok()? {
            Value::Bulk(bytes) => Some(
                String::from_utf8_lossy(&bytes)
                    .lines()
                    .filter_map(|line| line.split_once(':'))
                    .map(|(key, value)| (key.to_string(), value.trim().to_string()))
                    .collect(),
            ),
            _ => None,
        }
    }

    pub fn role(&self, index: usize) -> Option<String> {
        self.info(index)?.get("tessera_role").cloned()
    }

    pub fn primary(&self) -> Option<usize> {
        (0..self.nodes.len()).find(|index| {
            self.is_running(*index) && self.role(*index).as_deref() == Some("primary")
        })
    }

    /// Waits until every running replica is a primary or backup (not recovering or changing
    /// view) and one is primary.
    pub fn wait_until_healthy(&self, timeout: Duration) -> bool {
        let started = Instant::now();
        while started.elapsed() < timeout {
            let roles: Vec<Option<String>> = (0..self.nodes.len())
                .filter(|index| self.is_running(*index))
                .map(|index| self.role(index))
                .collect();
            let settled = roles
                .iter()
                .all(|role| matches!(role.as_deref(), Some("primary" | "backup")));
            if settled && roles.iter().any(|role| role.as_deref() == Some("primary")) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let roles: Vec<Option<String>> = (0..self.nodes.len())
            .map(|index| self.role(index))
            .collect();
        eprintln!(
            "not healthy after {timeout:?}: roles {roles:?}; logs in {}",
            self.directory.display()
        );
        false
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for index in 0..self.nodes.len() {
            self.signal(index, "CONT");
            self.kill(index);
        }
    }
}

/// A blocking RESP2 client.
pub struct RespClient {
    reader: BufReader<TcpStream>,
}

impl RespClient {
    pub fn connect(port: u16, timeout: Duration) -> std::io::Result<RespClient> {
        let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let stream = TcpStream::connect_timeout(&address, timeout)?;
        stream.set_read_timeout(Some(Duration::from_secs(20)))?;
        stream.set_nodelay(true)?;
        Ok(RespClient {
            reader: BufReader::new(stream),
        })
    }

    pub fn call(&mut self, arguments: &[Vec<u8>]) -> std::io::Result<Value> {
        let mut request = format!("*{}\r\n", arguments.len()).into_bytes();
        for argument in arguments {
            request.extend_from_slice(format!("${}\r\n", argument.len()).as_bytes());
            request.extend_from_slice(argument);
            request.extend_from_slice(b"\r\n");
        }
        self.reader.get_mut().write_all(&request)?;
        self.read_value()
    }

    fn read_value(&mut self) -> std::io::Result<Value> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "closed",
            ));
        }
        let line = line.trim_end_matches("\r\n");
        let invalid = || {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("bad reply line {line:?}"),
            )
        };
        let (kind, rest) = line.split_at(1.min(line.len()));
        match kind {
            "+" => Ok(Value::Simple(rest.to_string())),
            "-" => Ok(Value::Error(rest.to_string())),
            ":" => rest.parse().map(Value::Integer).map_err(|_| invalid()),
            "$" => {
                let length: i64 = rest.parse().map_err(|_| invalid())?;
                if length < 0 {
                    return Ok(Value::Null);
                }
                let mut bytes = vec![0u8; length as usize + 2];
                self.reader.read_exact(&mut bytes)?;
                bytes.truncate(length as usize);
                Ok(Value::Bulk(bytes))
            }
            "*" => {
                let count: i64 = rest.parse().map_err(|_| invalid())?;
                if count < 0 {
                    return Ok(Value::Null);
                }
                (0..count)
                    .map(|_| self.read_value())
                    .collect::<std::io::Result<Vec<_>>>()
                    .map(Value::Array)
            }
            _ => Err(invalid()),
        }
    }
}

pub fn arguments(words: &[&str]) -> Vec<Vec<u8>> {
    words.iter().map(|word| word.as_bytes().to_vec()).collect()
}

/// The Redis command model: a command's sequential specification is what `resp` plans, the
/// store executes and `resp` replies. The recorded output is the reply the client got.
pub struct RespModel;

fn planned(arguments: &[Vec<u8>]) -> Option<resp::Pending> {
    match resp::plan(arguments) {
        Plan::Execute(pending) => Some(pending),
        _ => None,
    }
}

impl Model for RespModel {
    type State = kv::KvStore;
    type Input = Vec<Vec<u8>>;
    type Output = Value;

    fn init(&self) -> kv::KvStore {
        kv::KvStore::new()
    }

    fn step(
        &self,
        state: &kv::KvStore,
        input: &Vec<Vec<u8>>,
        output: Option<&Value>,
    ) -> Option<kv::KvStore> {
        let pending = planned(input)?;
        let mut next = state.clone();
        let outcome = next.execute(&pending.command);
        let reply = resp::finish(&pending, &outcome);
        match output {
            Some(observed) if *observed != reply => None,
            _ => Some(next),
        }
    }

    fn is_read_only(&self, input: &Vec<Vec<u8>>) -> bool {
        planned(input).is_some_and(|pending| pending.command.is_read())
    }

    fn partition(&self, history: &[Operation<Vec<Vec<u8>>, Value>]) -> Vec<Vec<usize>> {
        let mut parts: BTreeMap<Vec<u8>, Vec<usize>> = BTreeMap::new();
        for (index, operation) in history.iter().enumerate() {
            let key = planned(&operation.input)
                .and_then(|pending| pending.command.keys().first().map(|key| group_of(key)))
                .unwrap_or_default();
            parts.entry(key).or_default().push(index);
        }
        parts.into_values().collect()
    }

    fn describe(&self, input: &Vec<Vec<u8>>, output: Option<&Value>) -> String {
        let words: Vec<String> = input
            .iter()
            .map(|word| String::from_utf8_lossy(word).into_owned())
            .collect();
        format!("{} -> {:?}", words.join(" "), output)
    }
}

/// Keys "g{group}.{member}" share a part: multi-key commands stay within a group.
pub fn group_of(key: &[u8]) -> Vec<u8> {
    key.split(|byte| *byte == b'.')
        .next()
        .unwrap_or(key)
        .to_vec()
}

/// A shared, append-only history of RESP operations.
#[derive(Default)]
pub struct History {
    pub operations: Mutex<Vec<Operation<Vec<Vec<u8>>, Value>>>,
}

impl History {
    pub fn record(
        &self,
        client: u64,
        call: u64,
        return_time: Option<u64>,
        input: Vec<Vec<u8>>,
        output: Option<Value>,
    ) {
        self.operations.lock().unwrap().push(Operation {
            client,
            call,
            return_time,
            input,
            output,
        });
    }

    /// The checker's verdict on the history so far.
    pub fn verdict(&self) -> CheckResult {
        let operations = self.operations.lock().unwrap();
        lincheck::check(&RespModel, &operations, Budget::steps(200_000_000))
    }

    /// Checks linearisability; panics with the checker's report on a violation.
    pub fn check(&self) {
        match self.verdict() {
            CheckResult::Ok => {}
            CheckResult::Illegal(violation) => {
                panic!("history is not linearisable:\n{}", violation.report)
            }
            CheckResult::Unknown => {
                panic!("the linearisability search gave up: neither proven nor refuted")
            }
        }
    }
}
