//! `tessera admin`: the super process of a partitioned cluster by hand (Crescando/RB §6.1,
//! §6.4–6.5): a `sequenced` one, or a `vr` or `skyros` one (at replication 1 each storage
//! process is a one-member VR or Skyros group; a keyspace change cuts the affected groups' logs
//! and copies between them; above it a keyspace change retires the groups whose arc or
//! members change and starts new ones, named by (arc, version), which install the retired
//! groups' copies). `status` prints the configuration and each storage
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
use runtime::ecast::link::{CopyReport, ProgressReport};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct AdminArguments {
    /// The cluster file (`tessera dev --protocol sequenced|vr|skyros` writes it to
    /// `<data-dir>/cluster.toml`; by default the temporary directory's `tessera-dev`).
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
    /// the ring, keys, table rows and key-value megabytes held (summed over the partition
    /// groups it is a member of), migration progress.
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

/// `tessera status`: `tessera admin status`, then each storage process's own report.
pub fn status_command(cluster: Option<PathBuf>) -> anyhow::Result<()> {
    let path = cluster_path(cluster.clone());
    let config = ClusterConfig::load(&path).map_err(anyhow::Error::msg)?;
    run(AdminArguments {
        cluster,
        timeout: 600,
        command: AdminCommand::Status,
    })?;
    println!();
    print!("{}", crate::info::status_table(&config));
    Ok(())
}

fn cluster_path(cluster: Option<PathBuf>) -> PathBuf {
    cluster.unwrap_or_else(|| {
        std::env::temp_dir()
            .join("tessera-dev")
            .join("cluster.toml")
    })
}

pub fn run(arguments: AdminArguments) -> anyhow::Result<()> {
    let path = cluster_path(arguments.cluster.clone());
    let config = ClusterConfig::load(&path).map_err(anyhow::Error::msg)?;
    // `vr` and `skyros` partitions at replication 1 reconfigure (each process a one-member
    // group: a keyspace change is a cut in the affected groups' logs and copies between them,
    // docs/internals/rubberband.md "Rubberband over `vr` partitions"). Above replication 1
    // they reconfigure too: the routers route to groups named by (arc, version), and a
    // keyspace change retires and starts groups ("Replication f > 1" there); the plan is made
    // against the storage processes' configuration (`Query::Grouping`), not the routing one.
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
        "{:>4}  {:<10} {:>20}  {:>6}  {:>9}  {:>9}  {:>9}  migration",
        "id", "state", "identifier", "ring%", "keys", "rows", "MB"
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
        let (keys, rows, megabytes, migration) = match report {
            Some(report) => (
                report.keys.to_string(),
                report.rows.to_string(),
                format!("{:.1}", report.bytes as f64 / 1e6),
                migration_summary(report),
            ),
            None => ("?".into(), "?".into(), "?".into(), "?".into()),
        };
        println!(
            "{:>4}  {state:<10} {identifier:>20}  {ring_share:>6.1}  {keys:>9}  {rows:>9}  {megabytes:>9}  {migration}",
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

/// What `tessera admin` knows of one keyspace change's copies, from the involved processes'
/// progress reports. Keys, bytes and time come from the receivers' own accounts
/// (`ProgressReport::copies`: what each received, timed by its clock from its delivery of the
/// keyspace message), so a copy that ends between two polls, or before the first, is still
/// counted whole and timed to the millisecond (a `vr`/`skyros` partition host reports the
/// copies into the groups it is the primary of). Processes that report no copies (an older
/// version) are followed through their streams, and timed by the admin's polling.
#[derive(Debug, Default)]
struct Tally {
    /// Per stream (from, to): bytes total (once known) and done, keys total and done, as the
    /// streams of either end last reported them (the polling account).
    streams: BTreeMap<(ProcessId, ProcessId), Moved>,
    /// Per stream: the receiver's latest account of its copy.
    copies: BTreeMap<(ProcessId, ProcessId), CopyReport>,
    /// Receivers whose copies are all installed.
    done: BTreeSet<ProcessId>,
}

/// One copy as the streams showed it: bytes total (once known) and done, keys total and done.
type Moved = (Option<u64>, u64, Option<u64>, u64);

/// A tally's totals at one moment.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Totals {
    bytes_done: u64,
    bytes_total: u64,
    keys_done: u64,
    keys_total: u64,
    /// The copy's time by the receivers' clocks (the longest receiver's: the copies run at
    /// once from the same keyspace message), if every stream has a receiver's account.
    copy_seconds: Option<f64>,
}

impl Tally {
    /// Takes in one process's report for the change to `version`.
    fn report(
        &mut self,
        receivers: &BTreeSet<ProcessId>,
        version: ConfigVersion,
        report: &ProgressReport,
    ) {
        for stream in report.outgoing.iter().chain(&report.incoming) {
            if stream.stream.version != version {
                continue;
            }
            let entry = self
                .streams
                .entry((stream.stream.from, stream.stream.to))
                .or_insert((None, 0, None, 0));
            entry.0 = entry.0.max(stream.bytes_total);
            entry.1 = entry.1.max(stream.bytes_done);
            entry.2 = entry.2.max(stream.keys_total);
            entry.3 = entry.3.max(stream.keys_done);
        }
        for copy in &report.copies {
            // A report's copies are the ones into it: into its process (a `sequenced` storage
            // process, or a group at replication 1) or into a group whose primary it is.
            if copy.stream.version != version {
                continue;
            }
            let key = (copy.stream.from, copy.stream.to);
            let newer = self.copies.get(&key).is_none_or(|known| {
                !known.installed && (copy.installed || copy.micros >= known.micros)
            });
            if newer {
                self.copies.insert(key, *copy);
            }
        }
        let installed = report.version >= version
            && !report
                .incoming
                .iter()
                .any(|stream| stream.stream.version <= version);
        if receivers.contains(&report.process) && installed && self.done.insert(report.process) {
            for ((_, to), entry) in self.streams.iter_mut() {
                if *to == report.process {
                    entry.1 = entry.0.unwrap_or(entry.1);
                    entry.3 = entry.2.unwrap_or(entry.3);
                }
            }
        }
    }

    fn totals(&self) -> Totals {
        let mut totals = Totals {
            bytes_done: 0,
            bytes_total: 0,
            keys_done: 0,
            keys_total: 0,
            copy_seconds: None,
        };
        let mut timed = !self.streams.is_empty() || !self.copies.is_empty();
        let mut micros = 0;
        let keys: BTreeSet<&(ProcessId, ProcessId)> =
            self.streams.keys().chain(self.copies.keys()).collect();
        for key in keys {
            let moved = self.streams.get(key).copied().unwrap_or((None, 0, None, 0));
            match self.copies.get(key) {
                Some(copy) => {
                    let bytes_done = if copy.installed {
                        copy.bytes
                    } else {
                        copy.bytes.max(moved.1)
                    };
                    let keys_done = if copy.installed {
                        copy.keys
                    } else {
                        copy.keys.max(moved.3)
                    };
                    totals.bytes_done += bytes_done;
                    totals.keys_done += keys_done;
                    totals.bytes_total += if copy.installed {
                        copy.bytes
                    } else {
                        moved.0.unwrap_or(0)
                    };
                    totals.keys_total += if copy.installed {
                        copy.keys
                    } else {
                        moved.2.unwrap_or(0)
                    };
                    micros = micros.max(copy.micros);
                }
                None => {
                    timed = false;
                    totals.bytes_done += moved.1;
                    totals.keys_done += moved.3;
                    totals.bytes_total += moved.0.unwrap_or(0);
                    totals.keys_total += moved.2.unwrap_or(0);
                }
            }
        }
        if timed {
            totals.copy_seconds = Some(micros as f64 / 1e6);
        }
        totals
    }
}

/// The progress line (`bar`: the terminal's bar, else a plain line); `elapsed` is the admin's
/// own time since the change was accepted, used for the rate only where the receivers did not
/// time their copies.
fn progress_line(
    totals: &Totals,
    done: usize,
    receivers: usize,
    elapsed: f64,
    bar: bool,
) -> String {
    let seconds = totals.copy_seconds.unwrap_or(elapsed);
    let rate = totals.bytes_done as f64 / 1e6 / seconds.max(1e-3);
    if bar {
        let width = 30;
        let all_done = done == receivers;
        let filled = (totals.bytes_done.min(totals.bytes_total) * width as u64)
            .checked_div(totals.bytes_total)
            .map_or(if all_done { width } else { 0 }, |filled| filled as usize);
        format!(
            "[{}{}] {:.1}/{:.1} MB  {}/{} keys  {rate:.1} MB/s  {done}/{receivers} receivers",
            "#".repeat(filled),
            ".".repeat(width - filled),
            totals.bytes_done as f64 / 1e6,
            totals.bytes_total as f64 / 1e6,
            totals.keys_done,
            totals.keys_total,
        )
    } else {
        format!(
            "progress: {:.1} of {:.1} MB, {} of {} keys, {rate:.1} MB/s, {done} of {receivers} receivers installed",
            totals.bytes_done as f64 / 1e6,
            totals.bytes_total as f64 / 1e6,
            totals.keys_done,
            totals.keys_total,
        )
    }
}

/// The closing line: what moved, in how long by the receivers' clocks (or, failing those, by
/// the admin's polling, which it then says), and the command's own time.
fn done_line(
    transformation: &Transformation,
    version: ConfigVersion,
    totals: &Totals,
    elapsed: f64,
) -> String {
    if totals.copy_seconds.is_none() && totals.bytes_total == 0 && totals.keys_done == 0 {
        // Nothing to copy (every process left holds the range already, or a standby change).
        return format!(
            "{transformation:?} done: configuration version {}, no data to move; {elapsed:.2} s in all",
            version.0
        );
    }
    let (seconds, timed_by) = match totals.copy_seconds {
        Some(seconds) => (seconds, "the receivers' clocks"),
        None => (elapsed, "polling every 250 ms"),
    };
    format!(
        "{transformation:?} done: configuration version {}, moved {:.1} MB ({} keys) in {seconds:.3} s ({:.1} MB/s, timed by {timed_by}); {elapsed:.2} s in all",
        version.0,
        totals.bytes_done as f64 / 1e6,
        totals.keys_done,
        totals.bytes_done as f64 / 1e6 / seconds.max(1e-3),
    )
}

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
    let mut tally = Tally::default();
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
            tally.report(&receivers, version, report);
        }
        for process in &involved {
            if !reports.contains_key(process) && !tally.done.contains(process) {
                let since = *unreachable_since
                    .entry(*process)
                    .or_insert_with(Instant::now);
                // Above replication 1 a started group needs only a majority of its members
                // (below): a failed member is one of its group's ⌊(f − 1)/2⌋, nothing
                // suspects it and no standby replaces it.
                if regrouping.is_none()
                    && receivers.contains(process)
                    && since.elapsed() > Duration::from_secs(10)
                {
                    finish_line(terminal);
                    bail!(
                        "receiver {} has not answered for 10 s (it may have failed; the routers suspect it and a standby replaces it)",
                        process.0
                    );
                }
            }
        }
        let totals = tally.totals();
        let elapsed = started.elapsed().as_secs_f64();
        let done = tally.done.len();
        let all_done = match &regrouping {
            // Every started group installed its copies at a majority of its members (a
            // member reports done once its replicas executed every install it waits for:
            // executed means committed, at a majority of the group).
            Some(regrouping) => regrouping.started.iter().all(|group| {
                let done = group
                    .members
                    .iter()
                    .filter(|member| tally.done.contains(member))
                    .count();
                2 * done > group.members.len()
            }),
            None => receivers
                .iter()
                .all(|receiver| tally.done.contains(receiver)),
        };
        if terminal {
            let line = progress_line(&totals, done, receivers.len(), elapsed, true);
            eprint!("\r{line}\x1b[K");
        } else if last_line.elapsed() >= Duration::from_secs(1) || all_done {
            last_line = Instant::now();
            eprintln!(
                "{}",
                progress_line(&totals, done, receivers.len(), elapsed, false)
            );
        }
        if all_done {
            finish_line(terminal);
            println!("{}", done_line(&transformation, version, &totals, elapsed));
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

    use placement::migration::StreamId;
    use runtime::ecast::link::StreamReport;

    const V: ConfigVersion = ConfigVersion(4);

    fn stream(from: u64, to: u64) -> StreamId {
        StreamId {
            version: V,
            from: ProcessId(from),
            to: ProcessId(to),
        }
    }

    fn report(process: u64, version: ConfigVersion) -> ProgressReport {
        ProgressReport {
            version,
            ..ProgressReport::idle(ProcessId(process))
        }
    }

    fn expand() -> Transformation {
        Transformation::Expand {
            process: ProcessId(2),
            identifier: Position(7),
        }
    }

    /// A copy that ended before the admin's first poll (a short one): the streams are gone
    /// from both ends, and the receiver's own account gives what moved and how long it took.
    /// (Before, this printed "moved 0.0 MB (0 keys)" and a rate from the admin's polling.)
    #[test]
    fn a_copy_over_before_the_first_poll_is_counted_whole_and_timed_by_the_receiver() {
        let receivers = BTreeSet::from([ProcessId(2)]);
        let mut tally = Tally::default();
        tally.report(&receivers, V, &report(1, V));
        let mut receiver = report(2, V);
        receiver.copies = vec![
            // An older change's copy: not this one's.
            CopyReport {
                stream: StreamId {
                    version: ConfigVersion(3),
                    ..stream(1, 2)
                },
                keys: 5,
                bytes: 500,
                micros: 1_000,
                installed: true,
            },
            CopyReport {
                stream: stream(1, 2),
                keys: 249_766,
                bytes: 33_218_878,
                micros: 183_000,
                installed: true,
            },
        ];
        tally.report(&receivers, V, &receiver);
        assert_eq!(tally.done, receivers);
        let totals = tally.totals();
        assert_eq!(
            done_line(&expand(), V, &totals, 0.26),
            "Expand { process: ProcessId(2), identifier: Position(7) } done: configuration \
             version 4, moved 33.2 MB (249766 keys) in 0.183 s (181.5 MB/s, timed by the \
             receivers' clocks); 0.26 s in all"
        );
    }

    /// Mid-copy: bytes and keys received out of the totals the first chunk announced, at the
    /// rate of the receivers' clocks; two receivers, one done.
    #[test]
    fn the_progress_line_counts_what_the_receivers_received_by_their_clocks() {
        let receivers = BTreeSet::from([ProcessId(2), ProcessId(3)]);
        let mut tally = Tally::default();
        let mut copying = report(2, V);
        copying.incoming = vec![StreamReport {
            stream: stream(1, 2),
            bytes_total: Some(4_000_000),
            keys_total: Some(40_000),
            bytes_done: 1_000_000,
            keys_done: 10_000,
        }];
        copying.copies = vec![CopyReport {
            stream: stream(1, 2),
            keys: 10_000,
            bytes: 1_000_000,
            micros: 500_000,
            installed: false,
        }];
        tally.report(&receivers, V, &copying);
        let mut finished = report(3, V);
        finished.copies = vec![CopyReport {
            stream: stream(1, 3),
            keys: 20_000,
            bytes: 2_000_000,
            micros: 400_000,
            installed: true,
        }];
        tally.report(&receivers, V, &finished);
        let totals = tally.totals();
        assert_eq!(totals.copy_seconds, Some(0.5));
        assert_eq!(
            progress_line(&totals, tally.done.len(), 2, 3.0, false),
            "progress: 3.0 of 6.0 MB, 30000 of 60000 keys, 6.0 MB/s, 1 of 2 receivers installed"
        );
        assert_eq!(
            progress_line(&totals, tally.done.len(), 2, 3.0, true),
            "[###############...............] 3.0/6.0 MB  30000/60000 keys  6.0 MB/s  1/2 receivers"
        );
        // A later report of the same copy, installed, replaces the running one.
        copying.incoming.clear();
        copying.copies[0] = CopyReport {
            keys: 40_000,
            bytes: 4_000_000,
            micros: 900_000,
            installed: true,
            ..copying.copies[0]
        };
        tally.report(&receivers, V, &copying);
        let totals = tally.totals();
        assert_eq!(tally.done, receivers);
        assert_eq!((totals.keys_done, totals.bytes_done), (60_000, 6_000_000));
        assert_eq!(totals.copy_seconds, Some(0.9));
    }

    /// A change with no copies (the processes left hold everything already) says so, rather
    /// than "moved 0.0 MB (0 keys) ... timed by polling".
    #[test]
    fn a_change_without_copies_says_there_was_nothing_to_move() {
        let totals = Tally::default().totals();
        assert_eq!(
            done_line(&expand(), V, &totals, 0.02),
            "Expand { process: ProcessId(2), identifier: Position(7) } done: configuration \
             version 4, no data to move; 0.02 s in all"
        );
    }

    /// A process that reports no copies (an older version) is followed through its
    /// streams, and the closing line says the time is the admin's polling.
    #[test]
    fn without_the_receivers_accounts_the_time_is_the_polling_and_says_so() {
        let receivers = BTreeSet::from([ProcessId(2)]);
        let mut tally = Tally::default();
        let mut receiver = report(2, V);
        receiver.incoming = vec![StreamReport {
            stream: stream(1, 2),
            bytes_total: Some(2_000_000),
            keys_total: Some(100),
            bytes_done: 1_000_000,
            keys_done: 50,
        }];
        tally.report(&receivers, V, &receiver);
        assert!(tally.done.is_empty());
        receiver.incoming.clear();
        tally.report(&receivers, V, &receiver);
        let totals = tally.totals();
        assert_eq!(totals.copy_seconds, None);
        assert_eq!(
            done_line(&expand(), V, &totals, 0.5),
            "Expand { process: ProcessId(2), identifier: Position(7) } done: configuration \
             version 4, moved 2.0 MB (100 keys) in 0.500 s (4.0 MB/s, timed by polling every \
             250 ms); 0.50 s in all"
        );
    }
}
