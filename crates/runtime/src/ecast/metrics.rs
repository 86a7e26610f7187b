//! Metrics for operators: every router and storage process serves Prometheus metrics over HTTP
//! (`GET /metrics`, OpenMetrics text, `prometheus-client`) on the `metrics` address its entry of
//! the cluster file names. They are read at scrape time from what the process keeps anyway: the
//! counters `INFO` shows, each hosted replica's role, view, op and commit numbers (published by
//! the protocol task), the E-Cast process counters (`stats`), and a latency histogram of RESP
//! commands at the gateway (SQL statements: not yet). Measurement only: nothing here changes what a
//! process does.

use crate::log;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One replica this process runs, as its protocol task last published it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaReport {
    /// `router` or the partition group's destination id.
    pub group: String,
    pub replica: u8,
    pub view: u64,
    pub op: u64,
    pub commit: u64,
    pub primary: bool,
    /// In a normal view (not in a view change or a recovery).
    pub normal: bool,
    /// A partition replica's shared engine batches (`store::Cycles`: the SQL statements of
    /// one log entry run as one batch, one scan cycle per table); `None` for a router.
    pub cycles: Option<store::Cycles>,
}

/// What a process exposes: its replicas, its gateway's counters and latency histograms.
pub struct ProcessMetrics {
    pub replicas: Mutex<Vec<ReplicaReport>>,
    /// RESP commands, from the request's arrival at the connection to its reply (seconds).
    pub resp_latency: Histogram,
    /// The gateway's counters, read at scrape time (the ones `INFO` shows).
    counters: Mutex<Option<CounterSource>>,
}

/// Reads a gateway's counters as (name, value).
pub type CounterSource = Box<dyn Fn() -> Vec<(String, u64)> + Send + Sync>;

impl std::fmt::Debug for ProcessMetrics {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("ProcessMetrics")
    }
}

impl Default for ProcessMetrics {
    fn default() -> ProcessMetrics {
        // 50 µs to ~1.6 s, doubling.
        let buckets = || exponential_buckets(0.000_05, 2.0, 16);
        ProcessMetrics {
            replicas: Mutex::new(Vec::new()),
            resp_latency: Histogram::new(buckets()),
            counters: Mutex::new(None),
        }
    }
}

impl ProcessMetrics {
    /// The gateway's counters, read at every scrape.
    pub fn set_counters(&self, source: CounterSource) {
        *self.counters.lock().expect("metrics lock") = Some(source);
    }

    pub fn publish_replicas(&self, replicas: Vec<ReplicaReport>) {
        *self.replicas.lock().expect("metrics lock") = replicas;
    }

    /// The registry a scrape encodes: everything above, prefixed `tessera_`.
    /// Routers serve no clients: their registry has no command latencies.
    pub fn registry(self: &Arc<ProcessMetrics>, role: &str) -> Registry {
        let mut registry = Registry::with_prefix_and_labels(
            "tessera",
            [(
                std::borrow::Cow::Borrowed("role"),
                std::borrow::Cow::Owned(role.to_string()),
            )]
            .into_iter(),
        );
        if role == "storage" {
            registry.register(
                "resp_command_seconds",
                "RESP commands from arrival to reply",
                self.resp_latency.clone(),
            );
        }
        registry.register_collector(Box::new(ProcessCollector {
            metrics: self.clone(),
        }));
        registry
    }
}

#[derive(Debug)]
struct ProcessCollector {
    metrics: Arc<ProcessMetrics>,
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let replicas = self.metrics.replicas.lock().expect("metrics lock").clone();
        type Field = fn(&ReplicaReport) -> u64;
        let fields: [(&str, &str, Field); 5] = [
            ("replica_view", "the replica's view number", |r| r.view),
            (
                "replica_op",
                "the replica's op number (last op in its log)",
                |r| r.op,
            ),
            ("replica_commit", "the replica's commit number", |r| {
                r.commit
            }),
            (
                "replica_primary",
                "1 if the replica is the primary of a normal view",
                |r| u64::from(r.primary && r.normal),
            ),
            (
                "replica_normal",
                "1 if the replica is in a normal view",
                |r| u64::from(r.normal),
            ),
        ];
        for (name, help, field) in fields {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for report in &replicas {
                let labels = [
                    ("group", report.group.clone()),
                    ("replica", report.replica.to_string()),
                ];
                let metric = family.encode_family(&labels)?;
                ConstGauge::new(field(report) as i64).encode(metric)?;
            }
        }
        // Uncommitted ops per replica: how far its commit number trails its log.
        let mut lag = encoder.encode_descriptor(
            "replica_commit_lag_ops",
            "ops in the replica's log above its commit number",
            None,
            MetricType::Gauge,
        )?;
        for report in &replicas {
            let labels = [
                ("group", report.group.clone()),
                ("replica", report.replica.to_string()),
            ];
            let metric = lag.encode_family(&labels)?;
            ConstGauge::new(report.op.saturating_sub(report.commit) as i64).encode(metric)?;
        }
        // Shared scan cycles per partition replica: statements per batch is the ratio of the
        // two counters' rates; the largest batch so far beside them.
        type Cycles = fn(&store::Cycles) -> u64;
        let cycles: [(&str, &str, Cycles); 3] = [
            (
                "replica_sql_batches",
                "engine batches of SQL statements the replica ran (one scan cycle per table each)",
                |cycles| cycles.batches,
            ),
            (
                "replica_sql_batched_statements",
                "SQL statements in those batches",
                |cycles| cycles.statements,
            ),
            (
                "replica_sql_batch_largest",
                "the most SQL statements one batch held",
                |cycles| cycles.largest,
            ),
        ];
        for (name, help, field) in cycles {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for report in &replicas {
                let Some(counters) = &report.cycles else {
                    continue;
                };
                let labels = [
                    ("group", report.group.clone()),
                    ("replica", report.replica.to_string()),
                ];
                let metric = family.encode_family(&labels)?;
                ConstGauge::new(field(counters) as i64).encode(metric)?;
            }
        }
        let counters = match &*self.metrics.counters.lock().expect("metrics lock") {
            Some(source) => source(),
            None => Vec::new(),
        };
        for (name, value) in counters {
            // Exposed as gauges: some are levels, and a counter's `_total` name would differ
            // from the INFO field operators already know.
            let metric =
                encoder.encode_descriptor(&name, "as INFO shows it", None, MetricType::Gauge)?;
            ConstGauge::new(value as i64).encode(metric)?;
        }
        use super::stats;
        let process = [
            ("frames_in", stats::FRAMES_IN.get()),
            ("bytes_in", stats::BYTES_IN.get()),
            ("frames_out", stats::FRAMES_OUT.get()),
            ("link_writes", stats::WRITES.get()),
            ("frames_dropped", super::link::frames_dropped()),
            ("turns", stats::TURNS.get()),
        ];
        for (name, value) in process {
            let metric = encoder.encode_descriptor(
                name,
                "E-Cast process counter since start",
                None,
                MetricType::Gauge,
            )?;
            ConstGauge::new(value as i64).encode(metric)?;
        }
        Ok(())
    }
}

/// Binds a metrics listener (inside the tokio runtime).
pub fn bind(address: std::net::SocketAddr) -> Result<TcpListener, String> {
    let listener = std::net::TcpListener::bind(address)
        .map_err(|error| format!("metrics listener {address}: {error}"))?;
    listener
        .set_nonblocking(true)
        .map_err(|error| format!("metrics listener {address}: {error}"))?;
    TcpListener::from_std(listener).map_err(|error| format!("metrics listener {address}: {error}"))
}

/// Requests larger than this are refused (a scrape is one short GET).
const REQUEST_BYTES_MAX: usize = 8 * 1024;
/// A client that has not sent its request in this time is dropped.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves `GET /metrics` forever; any other request gets 404 (405 for another method), and a
/// malformed or oversized one 400. One request per connection.
pub async fn serve(listener: TcpListener, registry: Arc<Registry>) {
    loop {
        let (mut stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                log::warn(format_args!("accepting a metrics scrape failed: {error}"));
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let registry = registry.clone();
        tokio::spawn(async move {
            let request = tokio::time::timeout(REQUEST_TIMEOUT, read_head(&mut stream)).await;
            let response = match request {
                Ok(Some(head)) => respond(&head, &registry),
                Ok(None) => status_only("400 Bad Request"),
                Err(_) => return,
            };
            let _ = stream.write_all(&response).await;
            let _ = stream.shutdown().await;
        });
    }
}

/// The request head (up to the blank line), or `None` if it is malformed or too large.
async fn read_head(stream: &mut tokio::net::TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|window| window == b"\r\n\r\n") {
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 || head.len() + read > REQUEST_BYTES_MAX {
            return None;
        }
        head.extend_from_slice(&chunk[..read]);
    }
    String::from_utf8(head).ok()
}

fn respond(head: &str, registry: &Registry) -> Vec<u8> {
    let mut words = head.lines().next().unwrap_or("").split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    if method != "GET" {
        return status_only("405 Method Not Allowed");
    }
    if path != "/metrics" {
        return status_only("404 Not Found");
    }
    let mut body = String::new();
    if prometheus_client::encoding::text::encode(&mut body, registry).is_err() {
        return status_only("500 Internal Server Error");
    }
    let mut response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    response.extend_from_slice(body.as_bytes());
    response
}

fn status_only(status: &str) -> Vec<u8> {
    format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").into_bytes()
}
