//! `tessera`: run a local cluster, run one process of a deployment, change a cluster's ring, ask a
//! cluster for its status, or load it.

mod admin;
mod bench;
mod bench_ecast;
mod bench_history;
mod dev;
mod dev_ecast;
mod dev_tls;
mod info;
mod pg_client;
mod ticket;
mod tpcc;

use anyhow::Context;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// Every process of a cluster (routers, storage processes, gateways, load generators) is this
/// binary. Its hot paths allocate many small, short-lived buffers (decoded ops, deliveries,
/// encoded frames); glibc's allocator cost a quarter of a router's CPU there (consolidating
/// free lists whenever a buffer of a kilobyte or more is requested), mimalloc about 16 % less
/// work overall (`docs/bench/ecast.md`).
///
/// mimalloc is built with its `no_thp` feature: it never asks the kernel for transparent huge
/// pages (`madvise(MADV_HUGEPAGE)` on its arenas). With them, a storage process copying a range
/// spent 30–46 % of its time in the kernel zeroing 2 MB pages as fresh arena memory was first
/// touched; without them a copy of 1 KB values took about half the time
/// (`docs/bench/elasticity.md`, "Copy speed").
/// This is a build-time switch, not `mi_option_set` at the top of `main`: mimalloc reserves its
/// first arena (1 GiB of address space, advised for huge pages) at its first allocation, which
/// the Rust runtime makes before `main`, so the option would come too late for that arena. On a kernel whose THP mode is
/// `always` (not `madvise`) it does not turn huge pages off; `MIMALLOC_ALLOW_THP=0` does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "tessera",
    version,
    about = "Tessera: a strongly consistent, elastic, main-memory data store"
)]
struct Arguments {
    #[command(subcommand)]
    command: Subcommands,
}

#[derive(Subcommand)]
enum Subcommands {
    /// Run a local cluster of separate processes on 127.0.0.1, ready for redis-cli.
    Dev(dev::DevArguments),
    #[command(alias = "ecast-node")]
    Node {
        #[arg(long)]
        cluster: PathBuf,
        /// Run router N (from 0).
        #[arg(long, conflicts_with = "storage")]
        router: Option<u8>,
        /// Run the storage process with this id (from 1).
        #[arg(long, required_unless_present = "router")]
        storage: Option<u64>,
        /// Exit when standard input closes (used by `tessera dev`).
        #[arg(long)]
        exit_with_parent: bool,
    },
    /// Change a partitioned cluster's ring while it serves (`sequenced`, or `vr` at
    /// replication 1): status, expand, contract, replace, rebalance, join, leave (Rubberband).
    Admin(admin::AdminArguments),
    /// Workload generators.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Print the cluster's configuration and each storage process: its state on the ring,
    /// keys, partition replicas (primaries, replicas in a view change) and its gateway's
    /// Skyros-Adapt mode.
    Status {
        /// The cluster file (`tessera dev` writes it to `<data-dir>/cluster.toml`; by default
        /// the temporary directory's `tessera-dev`).
        #[arg(long)]
        cluster: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Closed-loop GET/SET load over RESP (works against redis-server too).
    Kv(bench::KvArguments),
    /// The Amadeus Ticket workload (Crescando/RB) over the PostgreSQL protocol.
    Ticket(ticket::TicketArguments),
    /// Ordered multi-partition messages through the routers of a partitioned cluster,
    /// submitted directly as E-Cast senders (no RESP).
    Ecast(bench_ecast::EcastArguments),
    /// TPC-C (the five transactions at the standard mix) over the PostgreSQL protocol, against
    /// Tessera or PostgreSQL.
    Tpcc(tpcc::TpccArguments),
}

fn main() -> anyhow::Result<()> {
    let arguments = Arguments::parse();
    match arguments.command {
        Subcommands::Dev(arguments) => dev::run(arguments),
        Subcommands::Node {
            cluster,
            router,
            storage,
            exit_with_parent,
        } => {
            fail_stop_on_panic();
            run_node(cluster, router, storage, exit_with_parent)
        }
        Subcommands::Admin(arguments) => {
            // A refusal is an answer, not a crash: its reason on one line, exit 1.
            if let Err(error) = admin::run(arguments) {
                eprintln!("tessera admin: {error:#}");
                std::process::exit(1);
            }
            Ok(())
        }
        Subcommands::Bench(BenchCommand::Kv(arguments)) => bench::run(arguments),
        Subcommands::Bench(BenchCommand::Ticket(arguments)) => ticket::run(arguments),
        Subcommands::Bench(BenchCommand::Ecast(arguments)) => bench_ecast::run(arguments),
        Subcommands::Bench(BenchCommand::Tpcc(arguments)) => tpcc::run(arguments),
        Subcommands::Status { cluster } => {
            if let Err(error) = admin::status_command(cluster) {
                eprintln!("tessera status: {error:#}");
                std::process::exit(1);
            }
            Ok(())
        }
    }
}

/// A cluster process is fail-stop: a panic anywhere in it (a bug; nothing a client or a peer sends
/// may cause one) ends the whole process instead of one tokio task. Tokio catches a task's
/// panic and keeps the runtime going, which would leave a process that is up, holds its ports
/// and answers heartbeats, but no longer runs the task that served its replica: its peers
/// would wait for it forever instead of handling a crash, which every protocol here does
/// (view change, suspicion, recovery).
fn fail_stop_on_panic() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        eprintln!("tessera: a panic is a bug; this process stops so its peers can handle a crash");
        std::process::abort();
    }));
}

/// The test fault `TESSERA_TEST_PANIC_AFTER_MS=<ms>` (debug builds only): a task of this
/// process panics that long after start, as a bug would; `fail_stop_on_panic` must then end
/// the process (`ecast_cluster.rs` checks it).
fn panic_later_if_asked() {
    if !cfg!(debug_assertions) {
        return;
    }
    let Some(delay) = std::env::var("TESSERA_TEST_PANIC_AFTER_MS")
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
    else {
        return;
    };
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
        panic!("TESSERA_TEST_PANIC_AFTER_MS: a task panics, as a bug would");
    });
}

/// Tokio worker threads of this process: the first of the environment variables `variables`
/// that is set (a number), else `default`; 0 runs every task on the process's main thread
/// (tokio's current-thread runtime).
fn worker_threads(variables: &[&str], default: usize) -> usize {
    variables
        .iter()
        .find_map(|variable| std::env::var(variable).ok()?.parse().ok())
        .unwrap_or(default)
}

/// The async runtime of a router or storage process, with `worker_threads(variables, default)`
/// workers.
fn async_runtime(variables: &[&str], default: usize) -> anyhow::Result<tokio::runtime::Runtime> {
    let threads = worker_threads(variables, default);
    let mut builder = if threads == 0 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(threads);
        builder
    };
    // Named so that `top -H` and profiles tell this process's off-loop work (checkpoint
    // serialisation, read jobs: tokio's blocking pool) from a load generator's workers.
    builder
        .thread_name("tessera-pool")
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// An E-Cast router's or storage process's default: tokio's current-thread runtime (0). On a
/// 2-core machine running ten such processes it cut the CPU per ordered message by 12–18 % and
/// raised throughput by 10–20 % against two worker threads, and an elasticity run (migration
/// slices on the storage processes' one thread) was no slower (`docs/bench/ecast.md`, `thru4`
/// and `thru5`). The "stalls" once blamed on it are CPU starvation by other processes on the
/// machine, which hits both runtimes; a process with one thread is more exposed to it (the
/// scheduler shares CPU per thread), so a machine shared with CPU-hungry work may prefer
/// `TESSERA_WORKER_THREADS=2`.
const ECAST_WORKER_THREADS: usize = 0;

fn run_node(
    path: PathBuf,
    router: Option<u8>,
    storage: Option<u64>,
    exit_with_parent: bool,
) -> anyhow::Result<()> {
    let config = runtime::ecast::config::ClusterConfig::load(&path).map_err(anyhow::Error::msg)?;
    // A role's own variable first (`TESSERA_ROUTER_WORKER_THREADS`,
    // `TESSERA_STORAGE_WORKER_THREADS`), then `TESSERA_WORKER_THREADS` for both.
    let role = if router.is_some() {
        "TESSERA_ROUTER_WORKER_THREADS"
    } else {
        "TESSERA_STORAGE_WORKER_THREADS"
    };
    let tokio = async_runtime(&[role, "TESSERA_WORKER_THREADS"], ECAST_WORKER_THREADS)?;
    tokio.block_on(async move {
        panic_later_if_asked();
        match (router, storage) {
            (Some(index), _) => runtime::ecast::router::start(config, index).await,
            (None, Some(id)) => {
                runtime::ecast::storage::start(config, placement::ProcessId(id)).await
            }
            (None, None) => Err("--router or --storage is required".to_string()),
        }
        .map_err(anyhow::Error::msg)?;
        wait_for_exit(exit_with_parent).await
    })
}

/// Runs until Ctrl-C, SIGTERM, or (with `exit_with_parent`) standard input closing.
async fn wait_for_exit(exit_with_parent: bool) -> anyhow::Result<()> {
    if exit_with_parent {
        // The parent holds our standard input open; when it goes, so do we.
        tokio::task::spawn_blocking(|| {
            let mut sink = [0u8; 64];
            while matches!(std::io::Read::read(&mut std::io::stdin(), &mut sink), Ok(read) if read > 0)
            {
            }
            std::process::exit(0);
        });
    }
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    Ok(())
}
