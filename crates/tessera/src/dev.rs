//! `tessera dev`: a local cluster of separate processes on 127.0.0.1 — an E-Cast router group
//! and storage processes hosting partition groups (`dev_ecast.rs`), serving RESP and SQL on
//! every storage process.
//!
//! With `--durability disk` it is still one replicated group of `tessera node` processes
//! (partition groups have no write-ahead log yet): one configuration file per replica, the
//! nodes started (each exits when this process goes, through its standard input), a primary
//! waited for, how to connect printed, then a status line every second until Ctrl-C, when it
//! stops every node.

use crate::info;
use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use runtime::config::{DurabilityName, NodeConfig, ReplicaAddress, ReplicationName};
use runtime::ecast::config::PartitionMode;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct DevArguments {
    /// With `--durability disk` only: replicas of the single group (3 tolerates one
    /// failure, 5 two; default 3).
    #[arg(long)]
    replicas: Option<u8>,
    /// `memory`: diskless, an op is durable on a majority of its partition's group;
    /// `disk`: a write-ahead log per replica (for now one replicated group, not a cluster:
    /// partition groups have no write-ahead log yet).
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
    match arguments.durability {
        DurabilityArgument::Memory => {
            if arguments.replicas.is_some() {
                bail!("--replicas sizes the single group of --durability disk; a cluster takes --nodes (storage processes) and --replication (replicas per partition)");
            }
            crate::dev_ecast::run(&arguments, partitions)
        }
        DurabilityArgument::Disk => {
            // Partition groups and the router group have no write-ahead log yet: a disk
            // deployment is still the single replicated group (`tessera node`).
            if partitions == PartitionMode::Sequenced {
                bail!("--durability disk is not built for --protocol sequenced");
            }
            if arguments.nodes.is_some()
                || arguments.active.is_some()
                || !arguments.range_prefixes.is_empty()
            {
                bail!("--durability disk runs one replicated group (partition groups have no write-ahead log yet): --nodes, --active and --range-prefix are for memory clusters");
            }
            run_single_group(arguments)
        }
    }
}

/// `--durability disk`: one VR or Skyros group of `tessera node` processes.
fn run_single_group(arguments: DevArguments) -> anyhow::Result<()> {
    let replicas = arguments.replicas.unwrap_or(3);
    if !(1..=9).contains(&replicas) {
        bail!("--replicas must be between 1 and 9");
    }
    let durability = match arguments.durability {
        DurabilityArgument::Memory => DurabilityName::Memory,
        DurabilityArgument::Disk => DurabilityName::Disk,
    };
    let replication = match arguments.protocol {
        ProtocolArgument::Vr => ReplicationName::Vr,
        ProtocolArgument::Skyros => ReplicationName::Skyros,
        ProtocolArgument::Sequenced => unreachable!("handled above"),
    };
    let data_dir = arguments
        .data_dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("tessera-dev"));
    if durability == DurabilityName::Memory && data_dir.exists() {
        std::fs::remove_dir_all(&data_dir)
            .with_context(|| format!("cannot clear {}", data_dir.display()))?;
    }
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("cannot create {}", data_dir.display()))?;
    let addresses: Vec<ReplicaAddress> = (0..replicas)
        .map(|index| {
            let port = |base: u16| {
                base.checked_add(u16::from(index))
                    .context("port out of range")
            };
            Ok(ReplicaAddress {
                client: format!("127.0.0.1:{}", port(arguments.port)?).parse()?,
                peer: format!(
                    "127.0.0.1:{}",
                    port(
                        arguments
                            .port
                            .checked_add(100)
                            .context("port out of range")?
                    )?
                )
                .parse()?,
                pg: match arguments.pg_port {
                    0 => None,
                    base => Some(format!("127.0.0.1:{}", port(base)?).parse()?),
                },
            })
        })
        .collect::<anyhow::Result<_>>()?;
    let cluster = std::process::id() as u64 ^ 0x7e55_e7a0;
    let mut nodes = Vec::new();
    for index in 0..replicas {
        nodes.push(start_node(
            &data_dir,
            index,
            cluster,
            durability,
            replication,
            &addresses,
        )?);
    }
    let clients: Vec<String> = addresses
        .iter()
        .map(|address| address.client.to_string())
        .collect();
    let outcome = wait_and_report(&arguments, &data_dir, &clients, &mut nodes);
    stop(&mut nodes);
    outcome
}

fn start_node(
    data_dir: &Path,
    index: u8,
    cluster: u64,
    durability: DurabilityName,
    replication: ReplicationName,
    addresses: &[ReplicaAddress],
) -> anyhow::Result<Child> {
    let node_dir = data_dir.join(format!("r{index}"));
    std::fs::create_dir_all(&node_dir)?;
    let config_path = data_dir.join(format!("r{index}.toml"));
    std::fs::write(
        &config_path,
        NodeConfig::render(
            cluster,
            index,
            durability,
            replication,
            &node_dir,
            addresses,
        ),
    )?;
    let log = std::fs::File::create(data_dir.join(format!("r{index}.log")))?;
    let executable = std::env::current_exe().context("cannot find the tessera executable")?;
    Command::new(executable)
        .arg("node")
        .arg("--config")
        .arg(&config_path)
        .arg("--exit-with-parent")
        .stdin(Stdio::piped())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("cannot start replica {index}"))
}

fn wait_and_report(
    arguments: &DevArguments,
    data_dir: &Path,
    clients: &[String],
    nodes: &mut [Child],
) -> anyhow::Result<()> {
    let started = Instant::now();
    let primary = loop {
        check_alive(nodes, data_dir)?;
        if let Some(primary) = find_primary(clients) {
            break primary;
        }
        if started.elapsed() > Duration::from_secs(30) {
            bail!(
                "no primary was elected within 30 s; see the logs in {}",
                data_dir.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    println!(
        "Tessera dev cluster ready in {:.1}s: {} replicas, {}, {} durability, primary is replica {primary}.",
        started.elapsed().as_secs_f64(),
        clients.len(),
        match arguments.protocol {
            ProtocolArgument::Vr => "vr",
            ProtocolArgument::Skyros => "skyros",
            ProtocolArgument::Sequenced => "sequenced",
        },
        match arguments.durability {
            DurabilityArgument::Memory => "memory",
            DurabilityArgument::Disk => "disk",
        }
    );
    for (index, client) in clients.iter().enumerate() {
        let port = client.rsplit(':').next().unwrap_or("?");
        match arguments.pg_port {
            0 => println!("  replica {index}: redis-cli -p {port}"),
            base => println!(
                "  replica {index}: redis-cli -p {port}    psql -h 127.0.0.1 -p {}",
                u32::from(base) + index as u32
            ),
        }
    }
    println!(
        "Any replica serves every command (backups forward to the primary). Logs: {}",
        data_dir.display()
    );
    println!("Ctrl-C stops the cluster.");
    if arguments.no_wait {
        return Ok(());
    }
    let stop_requested = install_ctrl_c()?;
    while !stop_requested.load(std::sync::atomic::Ordering::SeqCst) {
        check_alive(nodes, data_dir)?;
        print!("\r{}\x1b[K", status_line(clients));
        std::io::stdout().flush()?;
        for _ in 0..10 {
            if stop_requested.load(std::sync::atomic::Ordering::SeqCst) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    println!("\nstopping");
    Ok(())
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

fn find_primary(clients: &[String]) -> Option<usize> {
    clients.iter().position(|client| {
        info::info(client).is_ok_and(|fields| {
            fields
                .get("tessera_role")
                .is_some_and(|role| role == "primary")
        })
    })
}

fn status_line(clients: &[String]) -> String {
    let mut parts = Vec::new();
    for (index, client) in clients.iter().enumerate() {
        match info::info(client) {
            Ok(fields) => {
                let field =
                    |name: &str| fields.get(name).cloned().unwrap_or_else(|| "?".to_string());
                parts.push(format!(
                    "r{index} {} v{} commit {}",
                    field("tessera_role"),
                    field("tessera_view"),
                    field("tessera_commit_number")
                ));
            }
            Err(_) => parts.push(format!("r{index} down")),
        }
    }
    parts.join(" | ")
}

fn check_alive(nodes: &mut [Child], data_dir: &Path) -> anyhow::Result<()> {
    for (index, node) in nodes.iter_mut().enumerate() {
        if let Some(status) = node.try_wait()? {
            bail!(
                "replica {index} exited ({status}); see {}",
                data_dir.join(format!("r{index}.log")).display()
            );
        }
    }
    Ok(())
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
