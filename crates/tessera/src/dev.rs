//! `tessera dev`: a local cluster of separate processes on 127.0.0.1 — an E-Cast router group
//! and storage processes hosting partition groups (`dev_ecast.rs`), serving RESP and SQL on
//! every storage process.
//!
//! Each process exits when this one goes (through its standard input); Ctrl-C stops them all.

use clap::{Args, ValueEnum};
use runtime::ecast::config::{ClusterDurability, PartitionMode};
use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct DevArguments {
    /// `memory`: diskless, an op is durable on a majority of its partition's group, and the
    /// data directory starts empty every time; `disk`: every replica of the router group and
    /// of every partition group keeps a write-ahead log in the data directory (group commit),
    /// the cluster survives every process stopping at once, and a second `tessera dev
    /// --durability disk` on the same directory starts the same cluster again.
    #[arg(long, value_enum, default_value_t = DurabilityArgument::Memory)]
    durability: DurabilityArgument,
    /// How each partition replicates. `vr`: a Viewstamped Replication group of its replicas,
    /// every write ordered before it completes; `skyros`: VR plus nil-externality, so SET and
    /// MSET complete in one round trip to a supermajority and are ordered later; `sequenced`:
    /// no protocol of its own, storage processes apply the router group's stream
    /// (read-one-write-all; RESP only).
    #[arg(long, value_enum, default_value_t = ProtocolArgument::Vr)]
    pub(crate) protocol: ProtocolArgument,
    /// Where configurations, logs and (with disk durability) data go. Memory durability starts
    /// from an empty directory every time; disk durability keeps the data between runs.
    #[arg(long)]
    pub(crate) data_dir: Option<PathBuf>,
    /// RESP port of replica 0; replica i listens on port + i, and on port + 100 + i for peers.
    #[arg(long, default_value_t = 7001)]
    pub(crate) port: u16,
    /// PostgreSQL wire protocol port of storage process 1 (process i + 1: port + i); 0 for
    /// none. Not with `--protocol sequenced`.
    #[arg(long, default_value_t = 5433)]
    pub(crate) pg_port: u16,
    /// Prometheus metrics over HTTP (`GET /metrics`) of storage process i + 1 on this port + i,
    /// and of router i on this port + 100 + i; 0 for none. Default: `--port` + 400.
    #[arg(long)]
    pub(crate) metrics_port: Option<u32>,
    /// Stop after starting and reporting readiness (for scripts and tests).
    #[arg(long)]
    pub(crate) no_wait: bool,
    /// Storage processes (default 3; 6 with `--protocol sequenced`). Storage process i + 1
    /// serves RESP on port + i; E-Cast traffic uses port + 100 + i, and router i port + 200 + i.
    #[arg(long)]
    pub(crate) nodes: Option<u64>,
    /// Routers in the E-Cast router group of a partitioned cluster.
    #[arg(long, default_value_t = 3)]
    pub(crate) routers: u8,
    /// Replicas per partition of a partitioned cluster (successor replication on the ring).
    #[arg(long, default_value_t = 3)]
    pub(crate) replication: u8,
    /// Storage processes on the initial ring of a partitioned cluster (default: all of
    /// `--nodes`); the others start as standbys for `tessera admin expand` and for automatic
    /// replacement of a failed process (`sequenced`). `vr` and `skyros` partitions take standbys
    /// and `tessera admin` keyspace changes at every `--replication` (no automatic
    /// replacement: at `--replication 1` a one-member group's data dies with its process).
    #[arg(long)]
    pub(crate) active: Option<u64>,
    /// A key prefix whose keys a partitioned cluster places by range (in key order) instead of
    /// by hash; repeatable (`--range-prefix user: --range-prefix order:`). `KEYS user:ab*` and
    /// `SCAN 0 MATCH user:ab*` then read only the partitions holding that range.
    #[arg(long = "range-prefix", value_name = "PREFIX")]
    pub(crate) range_prefixes: Vec<String>,
    /// With `--protocol skyros`: Skyros-Comm (`skyros_comm = true` in the cluster file), a
    /// write that is not nilext (INCR, APPEND, DEL, SET NX, …) completes in one round trip
    /// when it commutes with every pending update. Off by default (`docs/internals/skyros.md`,
    /// "Skyros-Comm").
    #[arg(long)]
    pub(crate) skyros_comm: bool,
    /// Run without authentication: every client port accepts anyone (printed as a warning).
    /// Without it, `tessera dev` makes an admin user with a generated password, prints it and
    /// writes it to `<data-dir>/admin-password`.
    #[arg(long)]
    pub(crate) insecure: bool,
    /// TLS on the client ports: a local CA and a certificate for localhost/127.0.0.1 it signs
    /// go to `<data-dir>/tls/`; RESP then speaks only TLS (`redis-cli --tls --cacert`) and
    /// PostgreSQL requires it (`sslmode=verify-full sslrootcert=…`).
    #[arg(long)]
    pub(crate) tls: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ProtocolArgument {
    Vr,
    Skyros,
    /// A partitioned cluster: E-Cast routers and read-one-write-all storage processes.
    Sequenced,
}

#[derive(Clone, Copy, ValueEnum)]
enum DurabilityArgument {
    Memory,
    Disk,
}

pub fn run(arguments: DevArguments) -> anyhow::Result<()> {
    let partitions = match arguments.protocol {
        ProtocolArgument::Vr => PartitionMode::Vr,
        ProtocolArgument::Skyros => PartitionMode::Skyros,
        ProtocolArgument::Sequenced => PartitionMode::Sequenced,
    };
    let durability = match arguments.durability {
        DurabilityArgument::Memory => ClusterDurability::Memory,
        DurabilityArgument::Disk => ClusterDurability::Disk,
    };
    crate::dev_ecast::run(&arguments, partitions, durability)
}

pub(crate) fn install_ctrl_c() -> anyhow::Result<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let set = flag.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::spawn(move || {
        runtime.block_on(async {
            let _ = tokio::signal::ctrl_c().await;
        });
        set.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    Ok(flag)
}

/// Closes every node's standard input (they exit), then kills whatever is left.
pub(crate) fn stop(nodes: &mut [Child]) {
    for node in nodes.iter_mut() {
        drop(node.stdin.take());
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    for node in nodes.iter_mut() {
        while Instant::now() < deadline && matches!(node.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = node.kill();
        let _ = node.wait();
    }
}
