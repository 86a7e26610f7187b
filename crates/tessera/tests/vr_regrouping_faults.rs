//! Rubberband over `vr` partitions above replication 1 with member failures (ports
//! 19000–19499 only): the `vr_regrouping.rs` cluster (3 routers, 6 storage processes,
//! replication 3, 4 on the ring, standbys 5 and 6), its copies held 2 s
//! (`TESSERA_TEST_COPY_DELAY_MS`) so that a member can be SIGKILLed between a keyspace cut and
//! its copy. Under checked clients (on gateways the kill spares), an expand (standby 5 joins
//! the ring) during which one storage process is killed:
//! (a) the primary of a retired group as it first owes its copies (the copy's sender: the
//!     group's view change must make a new primary, which sends the copy from the replicated
//!     `outgoing`);
//! (b) process 5, the primary of the started group it owns and a member of two more, as its
//!     replica starts (the started groups' view changes; the sender resends to the new
//!     primaries).
//! Each group loses one member of three (⌊(f − 1)/2⌋ = 1). The expand must complete (every
//! started group installs at a majority), then the killed process restarts (same ports, its
//! memory gone) and two more changes run: its ring successor contracts (the restarted process
//! is the owner, so the view-0 primary, of a started group while it recovers) and expands back.
//! Asserted: every change completes at the expected version, the history is linearisable,
//! every preloaded key and probe SET reads back. Canary `TESSERA_CANARY_NO_COPY_AFTER_VIEW_CHANGE`
//! (a primary of a later view never sends its group's copies) must fail (a).

mod support;

use std::time::{Duration, Instant};
use support::partitioned::{preload, wait_until, PartitionedCluster};
use support::rubberband::{
    check_preload, expect_caught, expected_replicas, probe, regrouped_counts, running_replicas,
    start_load, start_regrouped, Elasticity, PADDING, PRELOAD,
};

/// Whom the fault kills during the expand.
#[derive(Clone, Copy, Debug)]
enum Victim {
    /// The first process whose log says it is a primary owing copies of version 1: the sender
    /// of a retired group's copies.
    RetiredSender,
    /// Process 5, the standby that joins: owner (view-0 primary) of a started group.
    StartedPrimary,
}

fn start(name: &str, port: u16, storage_env: &[(&str, &str)]) -> PartitionedCluster {
    // Each cluster takes port..+6, port+100..+106 and port+200..+203.
    assert!((19000..=19290).contains(&port), "ports 19000–19499 only");
    let mut env = vec![("TESSERA_TEST_COPY_DELAY_MS", "2000")];
    env.extend_from_slice(storage_env);
    start_regrouped(name, port, &env)
}

/// Runs `tessera admin words…` to completion; panics unless it says it reached `version`.
fn change(cluster: &PartitionedCluster, words: &[&str], version: u64) {
    let output = cluster.admin_ok(words);
    assert!(
        output.contains(&format!("done: configuration version {version}")),
        "{output}"
    );
}

/// The ring's active process ids in identifier order (`tessera admin status`).
fn ring(cluster: &PartitionedCluster) -> Vec<u64> {
    let (_, processes) = cluster.admin_status();
    let mut active: Vec<(u64, u64)> = processes
        .iter()
        .filter(|(_, words)| words[1] == "active")
        .map(|(id, words)| (words[2].parse().unwrap(), *id))
        .collect();
    active.sort();
    active.into_iter().map(|(_, id)| id).collect()
}

/// Expand with a member killed mid-copy, restart it, contract its successor and expand back.
/// Err: preloaded keys or probe SETs lost (a canary's run must end here or panic).
fn kill_mid_copy(
    name: &str,
    port: u16,
    victim: Victim,
    storage_env: &[(&str, &str)],
) -> Result<Elasticity, String> {
    let mut cluster = start(name, port, storage_env);
    // Checked clients on gateways the kill spares: process 6's (a standby throughout) and
    // process 5's (a) or process 1's (b).
    let spared = match victim {
        Victim::RetiredSender => [4, 5],
        Victim::StartedPrimary => [0, 5],
    };
    let load_ports: Vec<u16> = spared.iter().map(|i| cluster.client_ports[*i]).collect();
    preload(load_ports[0], PRELOAD, PADDING);
    let mut load = start_load(load_ports.clone());
    std::thread::sleep(Duration::from_millis(500));
    let admin = cluster.admin_spawn(&["expand"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let killed = loop {
        let found = match victim {
            Victim::RetiredSender => (0..4).find(|index| {
                cluster
                    .storage_log(*index)
                    .contains("owes copies of version 1")
            }),
            Victim::StartedPrimary => cluster
                .storage_log(4)
                .contains("born at version 1): replica 0 of")
                .then_some(4),
        };
        if let Some(index) = found {
            break index;
        }
        assert!(
            Instant::now() < deadline,
            "no {victim:?} to kill within 20 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    // Did the victim already send its copy? (It must not have: the copy delay is 2 s.)
    let sent_before = cluster
        .storage_log(killed)
        .contains("sending its copy of version 1");
    cluster.kill_storage(killed);
    eprintln!(
        "{victim:?}: killed storage process {} (copy sent before: {sent_before})",
        killed + 1
    );
    assert!(!sent_before, "the victim sent its copy before the kill");
    let output = admin.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(
        output.status.success() && stdout.contains("done: configuration version 1"),
        "the expand with process {} killed mid-copy did not complete:\n{stdout}\n{stderr}",
        killed + 1
    );
    // The fault hit what it meant to: (a) the killed primary's group made a new primary,
    // which sent the copy; (b) process 5's group installed its copies at another member.
    let others: String = (0..6)
        .filter(|index| *index != killed)
        .map(|index| cluster.storage_log(index))
        .collect();
    match victim {
        Victim::RetiredSender => {
            let log = cluster.storage_log(killed);
            let line = log
                .lines()
                .find(|line| line.contains("owes copies of version 1"))
                .expect("found above");
            let group = line
                .split("partition ")
                .nth(1)
                .and_then(|rest| rest.split(':').next())
                .expect("a partition id");
            let resent = others.lines().any(|line| {
                line.contains(&format!("partition {group}: primary in view "))
                    && !line.contains("in view 0,")
                    && line.contains("owes copies of version 1")
            }) && others
                .contains(&format!("partition {group}: sending its copy of version 1"));
            assert!(
                resent,
                "no new primary of group {group} sent its copy after the kill"
            );
        }
        Victim::StartedPrimary => {
            let owned = (1u64 << 61) | (1 << 30) | 5;
            let installed = format!("partition {owned}: installed the copy of version 1");
            // The expand is done once the group's new primary installed; the other members
            // install (and log it) as they execute that op, which may come a little later.
            let deadline = Instant::now() + Duration::from_secs(10);
            while !(0..6)
                .filter(|index| *index != killed)
                .any(|index| cluster.storage_log(index).contains(&installed))
            {
                assert!(
                    Instant::now() < deadline,
                    "process 5's started group installed nothing at another member"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    let mut lost = Vec::new();
    // The probe through gateways neither the kill nor the checked clients use.
    let quiet: Vec<usize> = (0..4)
        .filter(|index| *index != killed && !spared.contains(index))
        .collect();
    let (stale, fresh) = (
        cluster.client_ports[quiet[0]],
        cluster.client_ports[quiet[1]],
    );
    let mut probe_round = |round| {
        if let Err(reason) = probe(stale, fresh, round) {
            eprintln!("{reason}");
            lost.push(reason);
        }
    };
    probe_round(1);
    let (version, processes) = cluster.admin_status();
    assert_eq!(version, 1);
    // Process 5 is on the ring (an identifier; `unreachable` if it is the one killed).
    assert_ne!(processes[&5][2], "-", "{processes:?}");
    // A restart after the regrouping: the same ports, everything forgotten. Its groups
    // (started or kept at version 1) bring it back (VRR §4.3 recovery).
    cluster.restart_storage(killed);
    let restarted = killed as u64 + 1;
    std::thread::sleep(Duration::from_secs(3));
    // Contract the restarted process's ring successor: the restarted process owns a group
    // that change starts (its view-0 primary, recovering), then expand it back.
    let order = ring(&cluster);
    let at = order.iter().position(|id| *id == restarted).unwrap();
    let successor = order[(at + 1) % order.len()];
    change(
        &cluster,
        &["contract", "--process", &successor.to_string()],
        2,
    );
    probe_round(2);
    std::thread::sleep(Duration::from_millis(300));
    change(&cluster, &["expand"], 3);
    probe_round(3);
    let (version, processes) = cluster.admin_status();
    assert_eq!(version, 3);
    assert_eq!(
        processes
            .values()
            .filter(|words| words[1] == "active")
            .count(),
        5,
        "{processes:?}"
    );
    // The restarted process started (recovering) the group of version 2 it owns, and that
    // group reached a normal view there.
    let recovered = wait_until(Duration::from_secs(10), || {
        let log = cluster.storage_log(killed);
        let Some(line) = log
            .lines()
            .find(|line| line.contains("born at version 2): replica 0 of"))
        else {
            return false;
        };
        let Some(id) = line
            .split("group 0x")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        else {
            return false;
        };
        let normal = format!("partition {id} replica 0: view ");
        log.lines()
            .any(|line| line.contains(&normal) && line.contains(" Normal"))
    });
    // No retired replica keeps running: once the retired groups' replicas stopped (2 s after
    // their last `Installed`, leaving tombstones) or, lagging, were dropped two versions past
    // their retirement,
    // every active process runs exactly its 3 groups' replicas and the standby none.
    let expected = expected_replicas(&processes);
    let running = || running_replicas(&cluster, &expected);
    let settled = wait_until(Duration::from_secs(15), || running() == expected);
    let counts = regrouped_counts(&cluster);
    let logs = cluster.all_storage_logs();
    let stopped = logs
        .matches("its copies acknowledged: replica stopped")
        .count();
    let dropped_running = logs.matches("running replica (").count();
    eprintln!(
        "{stopped} replicas stopped, {dropped_running} running ones dropped two versions past their retirement"
    );
    let checked = check_preload(load_ports[0]);
    load.stop_and_read_back(&[load_ports[0]]);
    let completed = load.completed();
    eprintln!("{completed} operations completed");
    assert!(completed > 200, "only {completed} operations completed");
    load.check();
    checked?;
    if !lost.is_empty() {
        return Err(lost.join("; "));
    }
    assert!(
        recovered,
        "the restarted process {restarted} started no replica of a started group"
    );
    assert!(
        counts.installs >= 3,
        "only {} copies installed",
        counts.installs
    );
    assert!(
        settled,
        "retired replicas keep running: (process, replicas) {:?}, expected {expected:?}",
        running()
    );
    assert!(stopped >= 1, "no retired replica stopped");
    Ok(Elasticity {
        installs: counts.installs,
        moved: counts.moved,
        completed,
        counters: Default::default(),
    })
}

#[test]
fn a_retired_groups_sending_primary_killed_mid_copy_is_replaced_and_nothing_is_lost() {
    kill_mid_copy("vrrf-retired", 19000, Victim::RetiredSender, &[]).unwrap();
}

#[test]
fn a_started_groups_primary_killed_mid_copy_is_replaced_and_nothing_is_lost() {
    kill_mid_copy("vrrf-started", 19010, Victim::StartedPrimary, &[]).unwrap();
}

/// The canary: a primary of a view after 0 never sends its group's copies (the retired
/// group's new primary does not resend what the killed one owed).
#[test]
fn the_fault_test_catches_a_new_primary_that_does_not_send_copies() {
    expect_caught("no copies after a view change", || {
        let canary = [("TESSERA_CANARY_NO_COPY_AFTER_VIEW_CHANGE", "1")];
        kill_mid_copy("vrrf-canary", 19020, Victim::RetiredSender, &canary)
    });
}
