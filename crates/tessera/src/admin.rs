//! `tessera admin`: the super process of a partitioned cluster by hand (Crescando/RB §6.1,
//! §6.4–6.5): a `sequenced` one, or a `vr` or `skyros` one at replication 1 (each storage
//! process a one-member VR or Skyros group; a keyspace change cuts the affected groups' logs
//! and copies between them). `vr` and `skyros` clusters above replication 1 refuse every
//! command but `status`, with the reason. `status` prints the configuration and each storage
//! process's migration state; a keyspace command (expand, contract, replace, rebalance) reads
//! the configuration from the routers, plans the change with `placement::Planner::propose`,
//! submits it through its own `ecast::Sender`, and waits until every receiver installed its
//! copy, drawing progress on stderr; `join` and `leave` submit membership messages. Exit 0 when
//! done, 1 with the reason on a refusal or a failure.

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use placement::{
    ConfigChange, ConfigMessage, ConfigVersion, Configuration, Groups, Instruction,
    MembershipChange, Planner, Position, PositionSet, ProcessId, ProcessState, Regrouping,
    Transformation,
};
use runtime::ecast::admin::{RouterClient, Submitted};
use runtime::ecast::config::ClusterConfig;
use runtime::ecast::link::ProgressReport;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct AdminArguments {
    /// The cluster file (`tessera dev --protocol sequenced`, or `--protocol vr|skyros
    /// --replication 1`, writes it to `<data-dir>/cluster.toml`; by default the temporary
    /// directory's `tessera-dev`). A `vr` or `skyros` cluster above replication 1 takes only
    /// `status`.
    #[arg(long)]
    cluster: Option<PathBuf>,
    /// Give up waiting for a migration after this many seconds (exit 1).
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    #[command(subcommand)]
    command: AdminCommand,
}

#[derive(Subcommand)]
enum AdminCommand {
    /// The configuration version and every storage process: state, ring identifier, share of
    /// the ring and keys held, migration progress.
    Status,
    /// A standby (by default the lowest-numbered one) joins the ring in the middle of the
    /// largest arc.
    Expand {
        #[arg(long)]
        process: Option<u64>,
    },
    /// A ring member leaves the ring (it becomes a standby; a suspected one is forgotten).
    Contract {
        #[arg(long)]
        process: u64,
    },
    /// A standby (by default the lowest-numbered one) takes over a ring member's identifier.
    Replace {
        #[arg(long)]
        process: u64,
        #[arg(long)]
        with: Option<u64>,
    },
    /// An active process moves to another ring position (a decimal u64).
    Rebalance {
        #[arg(long)]
        process: u64,
        #[arg(long)]
        to: u64,
    },
    /// A process of the cluster file joins as a standby.
    Join {
        #[arg(long)]
        process: u64,
    },
    /// A standby leaves the cluster.
    Leave {
        #[arg(long)]
        process: u64,
    },
}

pub fn run(arguments: AdminArguments) -> anyhow::Result<()> {
    let path = arguments.cluster.clone().unwrap_or_else(|| {
        std::env::temp_dir()
            .join("tessera-dev")
            .join("cluster.toml")
    });
    let config = ClusterConfig::load(&path).map_err(anyhow::Error::msg)?;
    // `vr` and `skyros` partitions at replication 1 reconfigure (each process a one-member
    // group: a keyspace change is a cut in the affected groups' logs and copies between them,
    // docs/internals/rubberband.md "Rubberband over `vr` partitions"); other grouped clusters
    // are fixed at start.
    // `vr` partitions above replication 1 reconfigure too: the routers route to groups named
    // by (arc, version), and a keyspace change retires and starts groups ("Replication f > 1"
    // there); the plan is made against the storage processes' configuration
    // (`Query::Grouping`), not the routing one.
    let fixed = config.partitions.grouped() && !config.elastic_groups() && !config.regrouped();
    if fixed && !matches!(arguments.command, AdminCommand::Status) {
        bail!("refused: {}", config.fixed_groups_reason());
    }
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    tokio.block_on(async move {
        let mut client = RouterClient::start(config.clone())
            .await
            .map_err(anyhow::Error::msg)?;
        let grouping = if config.regrouped() {
            let grouping = client.grouping().await.map_err(anyhow::Error::msg)?;
            Some(grouping.context("the routers of this cluster do not route to groups")?)
        } else {
            None
        };
        let configuration = match &grouping {
            Some(grouping) => grouping.processes.clone(),
            None => client
                .configuration()
                .await
                .map_err(anyhow::Error::msg)?,
        };
        let timeout = Duration::from_secs(arguments.timeout);
        let transformation = match arguments.command {
            AdminCommand::Status => return status(&config, &mut client, &configuration).await,
            AdminCommand::Join { process } => {
                if config.storage(ProcessId(process)).is_none() {
                    bail!("refused: process {process} is not in the cluster file, so nothing could reach it");
                }
                let change = MembershipChange::Join {
                    process: ProcessId(process),
                };
                return membership(&mut client, &configuration, change).await;
            }
            AdminCommand::Leave { process } => {
                let change = MembershipChange::Leave {
                    process: ProcessId(process),
                };
                return membership(&mut client, &configuration, change).await;
            }
            AdminCommand::Expand { process } => {
                let process = match process {
                    Some(process) => ProcessId(process),
                    None => lowest_standby(&configuration)?,
                };
                Transformation::Expand {
                    process,
                    identifier: split_largest_arc(&configuration),
                }
            }
            AdminCommand::Contract { process } => Transformation::Contract {
                process: ProcessId(process),
            },
            AdminCommand::Replace { process, with } => Transformation::Replace {
                replaced: ProcessId(process),
                standby: match with {
                    Some(with) => ProcessId(with),
                    None => lowest_standby(&configuration)?,
                },
            },
            AdminCommand::Rebalance { process, to } => Transformation::Rebalance {
                process: ProcessId(process),
                identifier: Position(to),
            },
        };
        let groups = grouping.map(|grouping| grouping.groups);
        keyspace(
            &mut client,
            &configuration,
            groups.as_ref(),
            transformation,
            timeout,
        )
        .await
    })
}

fn lowest_standby(configuration: &Configuration) -> anyhow::Result<ProcessId> {
    configuration
        .processes()
        .iter()
        .find(|(_, info)| info.state == ProcessState::Standby)
        .map(|(process, _)| *process)
        .context("refused: there is no standby")
}

/// The middle of the largest primary range (the whole ring's opposite point for a ring of
/// one), so that an expansion takes over half of the most loaded arc.
fn split_largest_arc(configuration: &Configuration) -> Position {
    let largest = configuration
        .partitions()
        .into_iter()
        .map(|partition| {
            let length = partition.span.end.0.wrapping_sub(partition.span.start.0);
            // A ring of one: the arc from the identifier to itself is the whole ring.
            let length = if length == 0 {
                u128::from(u64::MAX) + 1
            } else {
                u128::from(length)
            };
            (length, partition.span.start.0)
        })
        .max();
    match largest {
        Some((length, start)) => Position(start.wrapping_add((length / 2) as u64)),
        None => Position(1 << 63),
    }
}

/// The fraction of the ring `set` covers.
fn share(set: &PositionSet) -> f64 {
    let positions: u128 = set
        .intervals()
        .iter()
        .map(|(first, last)| u128::from(last - first) + 1)
        .sum();
    positions as f64 / (u128::from(u64::MAX) + 1) as f64
}

async fn membership(
    client: &mut RouterClient,
    configuration: &Configuration,
    change: MembershipChange,
) -> anyhow::Result<()> {
    let message = ConfigMessage {
        based_on: configuration.version(),
        change: ConfigChange::Membership(change),
    };
    match client
        .submit(message.clone())
        .await
        .map_err(anyhow::Error::msg)?
    {
        Submitted::Accepted { .. } => {
            println!(
                "{change:?} applied: configuration version {}",
                configuration.version().0 + 1
            );
            Ok(())
        }
        Submitted::Refused(refusal) => bail!("refused: {refusal}"),
    }
}

async fn status(
    config: &ClusterConfig,
    client: &mut RouterClient,
    configuration: &Configuration,
) -> anyhow::Result<()> {
    let ids: Vec<ProcessId> = config
        .storage
        .iter()
        .map(|storage| ProcessId(storage.id))
        .collect();
    let reports = client.progress(&ids, Duration::from_millis(800)).await;
    let ring = configuration.ring().len();
    println!(
        "configuration version {}: {ring} on the ring, replication {} (effective {})",
        configuration.version().0,
        configuration.replication(),
        configuration.group_size()
    );
    println!(
        "{:>4}  {:<10} {:>20}  {:>6}  {:>9}  {:>9}  migration",
        "id", "state", "identifier", "ring%", "keys", "MB"
    );
    for id in ids {
        let report = reports.get(&id);
        let state = match (configuration.state(id), report) {
            (_, Some(report)) if report.failed.is_some() => "failed",
            (None, _) => "gone",
            (Some(ProcessState::Suspected { .. }), _) => "suspected",
            (_, None) => "unreachable",
            (Some(ProcessState::Standby), _) => "standby",
            (Some(ProcessState::Active { .. }), _) => "active",
        };
        let identifier = configuration
            .state(id)
            .and_then(ProcessState::identifier)
            .map_or_else(|| "-".to_string(), |position| position.0.to_string());
        let ring_share = 100.0 * share(&configuration.ranges_of(id));
        let (keys, megabytes, migration) = match report {
            Some(report) => (
                report.keys.to_string(),
                format!("{:.1}", report.bytes as f64 / 1e6),
                migration_summary(report),
            ),
            None => ("?".into(), "?".into(), "?".into()),
        };
        println!(
            "{:>4}  {state:<10} {identifier:>20}  {ring_share:>6.1}  {keys:>9}  {megabytes:>9}  {migration}",
            id.0
        );
    }
    Ok(())
}

fn migration_summary(report: &ProgressReport) -> String {
    let mut parts = Vec::new();
    for stream in &report.incoming {
        parts.push(format!(
            "receiving v{} from {}: {}",
            stream.stream.version.0,
            stream.stream.from.0,
            fraction(stream.bytes_done, stream.bytes_total)
        ));
    }
    for stream in &report.outgoing {
        parts.push(format!(
            "sending v{} to {}: {}",
            stream.stream.version.0,
            stream.stream.to.0,
            fraction(stream.bytes_done, stream.bytes_total)
        ));
    }
    if report.held > 0 {
        parts.push(format!("{} held", report.held));
    }
    if report.deletes_pending > 0 {
        parts.push(format!("{} deletes pending", report.deletes_pending));
    }
    if let Some(reason) = &report.failed {
        parts.push(format!("declared itself failed: {reason}"));
    }
    if parts.is_empty() {
        "idle".to_string()
    } else {
        parts.join("; ")
    }
}

fn fraction(done: u64, total: Option<u64>) -> String {
    match total {
        Some(total) => format!("{:.1}/{:.1} MB", done as f64 / 1e6, total as f64 / 1e6),
        None => format!("{:.1} MB/?", done as f64 / 1e6),
    }
}

/// One copy as the admin saw it: bytes total (once known) and done, keys total and done.
type Moved = (Option<u64>, u64, Option<u64>, u64);

/// Plans, submits and follows one keyspace transformation.
/// `groups`: above replication 1, the groups of `configuration`'s version — the receivers
/// are then the members of the groups the change starts (each installs a copy from every
/// retired group its arc overlaps), not the instruction list's receivers.
async fn keyspace(
    client: &mut RouterClient,
    configuration: &Configuration,
    groups: Option<&Groups>,
    transformation: Transformation,
    timeout: Duration,
) -> anyhow::Result<()> {
    let message = match Planner::default().propose(configuration, transformation) {
        Ok(message) => message,
        Err(refusal) => bail!("refused: {refusal}"),
    };
    let instructions = match &message.change {
        ConfigChange::Keyspace(keyspace) => keyspace.instructions.clone(),
        ConfigChange::Membership(_) => unreachable!("the planner proposes keyspace messages"),
    };
    let version = ConfigVersion(configuration.version().0 + 1);
    match client
        .submit(message.clone())
        .await
        .map_err(anyhow::Error::msg)?
    {
        Submitted::Accepted { .. } => {}
        Submitted::Refused(refusal) => bail!("refused: {refusal}"),
    }
    let regrouping = match groups {
        Some(groups) => {
            let next = placement::message::apply(configuration, &message)
                .map_err(|refusal| anyhow::anyhow!("refused: {refusal}"))?;
            Some(Regrouping::between(groups, &groups.follow(&next)))
        }
        None => None,
    };
    let (receivers, mut involved): (BTreeSet<ProcessId>, BTreeSet<ProcessId>) = match &regrouping {
        Some(regrouping) => {
            let receivers = regrouping
                .started
                .iter()
                .flat_map(|group| group.members.iter().copied())
                .collect();
            let senders = regrouping
                .retired
                .iter()
                .flat_map(|group| group.members.iter().copied())
                .collect();
            (receivers, senders)
        }
        None => {
            let receivers = instructions
                .iter()
                .filter_map(|instruction| match instruction {
                    Instruction::Copy { to, .. } => Some(*to),
                    Instruction::Delete { .. } => None,
                })
                .collect();
            (receivers, BTreeSet::new())
        }
    };
    involved.extend(receivers.iter().copied());
    for instruction in &instructions {
        match instruction {
            Instruction::Copy { from, .. } => involved.insert(*from),
            Instruction::Delete { at, .. } => involved.insert(*at),
        };
    }
    let involved: Vec<ProcessId> = involved.into_iter().collect();
    eprintln!(
        "{transformation:?} accepted: configuration version {}; {} copies into {:?}",
        version.0,
        instructions
            .iter()
            .filter(|instruction| matches!(instruction, Instruction::Copy { .. }))
            .count(),
        receivers
            .iter()
            .map(|process| process.0)
            .collect::<Vec<_>>()
    );
    let started = Instant::now();
    let terminal = std::io::stderr().is_terminal();
    let mut streams: BTreeMap<(ProcessId, ProcessId), Moved> = BTreeMap::new();
    let mut done: BTreeSet<ProcessId> = BTreeSet::new();
    let mut last_line = Instant::now();
    let mut unreachable_since: BTreeMap<ProcessId, Instant> = BTreeMap::new();
    loop {
        let reports = client.progress(&involved, Duration::from_millis(500)).await;
        for (process, report) in &reports {
            unreachable_since.remove(process);
            if let Some(reason) = &report.failed {
                finish_line(terminal);
                bail!(
                    "storage process {} declared itself failed during the migration: {reason}",
                    process.0
                );
            }
            for stream in report.outgoing.iter().chain(&report.incoming) {
                if stream.stream.version != version {
                    continue;
                }
                let entry = streams
                    .entry((stream.stream.from, stream.stream.to))
                    .or_insert((None, 0, None, 0));
                entry.0 = entry.0.max(stream.bytes_total);
                entry.1 = entry.1.max(stream.bytes_done);
                entry.2 = entry.2.max(stream.keys_total);
                entry.3 = entry.3.max(stream.keys_done);
            }
            let installed = report.version >= version
                && !report
                    .incoming
                    .iter()
                    .any(|stream| stream.stream.version <= version);
            if receivers.contains(process) && installed && done.insert(*process) {
                for ((_, to), entry) in streams.iter_mut() {
                    if to == process {
                        entry.1 = entry.0.unwrap_or(entry.1);
                        entry.3 = entry.2.unwrap_or(entry.3);
                    }
                }
            }
        }
        for process in &involved {
            if !reports.contains_key(process) && !done.contains(process) {
                let since = *unreachable_since
                    .entry(*process)
                    .or_insert_with(Instant::now);
                if receivers.contains(process) && since.elapsed() > Duration::from_secs(10) {
                    finish_line(terminal);
                    bail!(
                        "receiver {} has not answered for 10 s (it may have failed; the routers suspect it and a standby replaces it)",
                        process.0
                    );
                }
            }
        }
        let bytes_total: u64 = streams.values().filter_map(|entry| entry.0).sum();
        let bytes_done: u64 = streams.values().map(|entry| entry.1).sum();
        let keys_total: u64 = streams.values().filter_map(|entry| entry.2).sum();
        let keys_done: u64 = streams.values().map(|entry| entry.3).sum();
        let seconds = started.elapsed().as_secs_f64();
        let rate = bytes_done as f64 / 1e6 / seconds.max(1e-3);
        let all_done = receivers.iter().all(|receiver| done.contains(receiver));
        if terminal {
            let width = 30;
            let filled = (bytes_done.min(bytes_total) * width as u64)
                .checked_div(bytes_total)
                .map_or(if all_done { width } else { 0 }, |filled| filled as usize);
            eprint!(
                "\r[{}{}] {:.1}/{:.1} MB  {keys_done}/{keys_total} keys  {rate:.1} MB/s  {}/{} receivers\x1b[K",
                "#".repeat(filled),
                ".".repeat(width - filled),
                bytes_done as f64 / 1e6,
                bytes_total as f64 / 1e6,
                done.len(),
                receivers.len()
            );
        } else if last_line.elapsed() >= Duration::from_secs(1) || all_done {
            last_line = Instant::now();
            eprintln!(
                "progress: {:.1} of {:.1} MB, {keys_done} of {keys_total} keys, {rate:.1} MB/s, {} of {} receivers installed",
                bytes_done as f64 / 1e6,
                bytes_total as f64 / 1e6,
                done.len(),
                receivers.len()
            );
        }
        if all_done {
            finish_line(terminal);
            println!(
                "{transformation:?} done: configuration version {}, moved {:.1} MB ({keys_done} keys) in {seconds:.2} s ({rate:.1} MB/s)",
                version.0,
                bytes_done as f64 / 1e6
            );
            return Ok(());
        }
        if started.elapsed() > timeout {
            finish_line(terminal);
            bail!("the migration did not finish within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn finish_line(terminal: bool) {
    if terminal {
        eprintln!();
        let _ = std::io::stderr().flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expansion_splits_the_largest_arc() {
        let one = Configuration::with_ring(3, &[(ProcessId(1), Position(100))]);
        assert_eq!(split_largest_arc(&one), Position(100 + (1 << 63)));
        let two = Configuration::with_ring(
            3,
            &[
                (ProcessId(1), Position(0)),
                (ProcessId(2), Position(1 << 62)),
            ],
        );
        // The arc from 2^62 around to 0 is three quarters of the ring.
        assert_eq!(split_largest_arc(&two), Position((1 << 63) + (1 << 61)));
        assert!((share(&PositionSet::whole()) - 1.0).abs() < 1e-9);
    }
}
