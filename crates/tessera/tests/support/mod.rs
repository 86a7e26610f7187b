//! Test support for real-process tests: a blocking RESP client and a history checked for
//! linearisability against the Redis command model; clusters of real processes are in
//! `partitioned` (what `tessera dev` starts) and `rubberband`.

#![allow(dead_code)]

pub mod load;
pub mod partitioned;
pub mod register;
pub mod rubberband;

use lincheck::{Budget, CheckResult, Model, Operation};
use resp::{Plan, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

use std::sync::Mutex;
use std::time::Duration;

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

    /// Sends every command at once (one write), then reads their replies in order.
    pub fn pipeline(&mut self, commands: &[Vec<Vec<u8>>]) -> std::io::Result<Vec<Value>> {
        let mut request = Vec::new();
        for arguments in commands {
            request.extend_from_slice(format!("*{}\r\n", arguments.len()).as_bytes());
            for argument in arguments {
                request.extend_from_slice(format!("${}\r\n", argument.len()).as_bytes());
                request.extend_from_slice(argument);
                request.extend_from_slice(b"\r\n");
            }
        }
        self.reader.get_mut().write_all(&request)?;
        commands.iter().map(|_| self.read_value()).collect()
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

/// Runs psql commands against one node; returns stdout (errors go to stdout too, `-v
/// ON_ERROR_STOP=0`), failing the test if psql itself cannot run.
pub fn psql(port: u16, commands: &[&str]) -> String {
    let mut command = std::process::Command::new("psql");
    command.args([
        "-X",
        "-q",
        "-A",
        "-t",
        "-h",
        "127.0.0.1",
        "-p",
        &port.to_string(),
    ]);
    command.args(["-U", "tessera", "-d", "tessera"]);
    for sql in commands {
        command.args(["-c", sql]);
    }
    let output = command
        .output()
        .expect("psql is installed (scripts/test installs postgresql-client)");
    let mut text = String::from_utf8_lossy(&output.stdout).to_string();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    text.trim().to_string()
}

/// The real redis-cli against `port`, which must succeed; its stdout, trimmed.
pub fn redis_cli(port: u16, words: &[&str]) -> String {
    let output = std::process::Command::new("redis-cli")
        .arg("-p")
        .arg(port.to_string())
        .args(words)
        .output()
        .expect("redis-cli is installed (scripts/test installs redis-tools)");
    assert!(
        output.status.success(),
        "redis-cli {words:?} failed: {output:?}"
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}
