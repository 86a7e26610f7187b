//! Real processes under faults: a 3-replica cluster serves concurrent RESP clients while
//! replicas, the primary included, are killed with SIGKILL and restarted, and paused with
//! SIGSTOP/SIGCONT. Every history is checked for linearisability (which also proves no
//! acknowledged write was lost: the final reads are part of it). Timings are reported, not
//! asserted beyond a generous liveness bound; the measured numbers live in docs/bench/.

mod support;

use resp::Value;
use std::time::Duration;
use stdx::Prng;
use support::load::{Load, LoadOptions, Mix};
use support::{arguments, Cluster, History};

struct Nemesis {
    prng: Prng,
    kills: u32,
    primary_kills: u32,
    pauses: u32,
    /// Per primary kill: time until any client next completed an operation.
    recovery_ms: Vec<u64>,
}

impl Nemesis {
    /// One fault, then heal it and wait until the cluster is healthy again. With memory
    /// durability only one replica is ever down (more would lose data by definition).
    fn strike(&mut self, cluster: &mut Cluster, load: &Load) {
        let replicas = cluster.client_ports.len();
        let primary = cluster.primary();
        match self.prng.below(3) {
            0 => {
                let victim = primary.unwrap_or(0);
                let killed_at = load.now_us();
                cluster.kill(victim);
                self.kills += 1;
                if primary.is_some() {
                    self.primary_kills += 1;
                }
                // Service has resumed once an operation invoked after the kill succeeded.
                let resumed_ms = load.wait_for_progress(killed_at, "killing the primary");
                self.recovery_ms.push(resumed_ms);
                std::thread::sleep(Duration::from_millis(self.prng.range_inclusive(100, 800)));
                cluster.restart(victim);
            }
            1 => {
                let victim =
                    (primary.unwrap_or(0) + 1 + self.prng.below(replicas as u64 - 1) as usize)
                        % replicas;
                cluster.kill(victim);
                self.kills += 1;
                std::thread::sleep(Duration::from_millis(self.prng.range_inclusive(100, 800)));
                cluster.restart(victim);
            }
            _ => {
                let victim = self.prng.below(replicas as u64) as usize;
                cluster.signal(victim, "STOP");
                self.pauses += 1;
                std::thread::sleep(Duration::from_millis(self.prng.range_inclusive(100, 1500)));
                cluster.signal(victim, "CONT");
            }
        }
        assert!(
            cluster.wait_until_healthy(Duration::from_secs(20)),
            "the cluster did not become healthy within 20 s"
        );
    }
}

fn run_chaos(
    name: &str,
    durability: &'static str,
    replication: &str,
    port: u16,
    faults: u32,
    kill_all_at_end: bool,
) {
    let mut cluster = Cluster::start_with(name, 3, durability, replication, port);
    assert!(
        cluster.wait_until_healthy(Duration::from_secs(20)),
        "no primary at start"
    );
    let mut load = Load::start(
        cluster.client_ports.clone(),
        LoadOptions {
            clients: 4,
            seed: 0xc11e47,
            mix: Mix::Replicated,
            snapshot_client: false,
            pause: Some(Duration::from_micros(500)),
            errors_pending: false,
        },
    );
    std::thread::sleep(Duration::from_millis(500));
    let mut nemesis = Nemesis {
        prng: Prng::new(port.into()),
        kills: 0,
        primary_kills: 0,
        pauses: 0,
        recovery_ms: Vec::new(),
    };
    for _ in 0..faults {
        nemesis.strike(&mut cluster, &load);
        std::thread::sleep(Duration::from_millis(300));
    }
    if kill_all_at_end {
        // Every replica at once: only the write-ahead logs remain.
        for index in 0..3 {
            cluster.kill(index);
        }
        for index in 0..3 {
            cluster.restart(index);
        }
        assert!(
            cluster.wait_until_healthy(Duration::from_secs(30)),
            "no primary after restarting every replica"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    load.stop_and_read_back(&cluster.client_ports);
    let completed = load.completed();
    let operations = load.operations();
    eprintln!(
        "{name}: {operations} operations ({completed} completed), {} kills ({} of the primary), {} pauses; \
         service resumed after a primary kill (ms): {:?}",
        nemesis.kills, nemesis.primary_kills, nemesis.pauses, nemesis.recovery_ms
    );
    assert!(
        completed > 500,
        "too few operations completed for the check to mean much: {completed}"
    );
    assert!(
        nemesis.kills + nemesis.pauses >= faults,
        "every fault was injected"
    );
    load.check();
}

#[test]
fn memory_durability_stays_linearizable_while_replicas_are_killed_and_paused() {
    run_chaos("chaos-memory", "memory", "vr", 7401, 8, false);
}

#[test]
fn skyros_memory_durability_stays_linearizable_while_replicas_are_killed_and_paused() {
    run_chaos("chaos-skyros-memory", "memory", "skyros", 7901, 8, false);
}

#[test]
fn skyros_disk_durability_stays_linearizable_and_survives_killing_every_replica() {
    run_chaos("chaos-skyros-disk", "disk", "skyros", 8101, 8, true);
}

#[test]
fn disk_durability_stays_linearizable_and_survives_killing_every_replica() {
    run_chaos("chaos-disk", "disk", "vr", 7601, 8, true);
}

/// The checker used above must catch real bugs: a lost acknowledged write and a stale read.
#[test]
fn the_history_checker_catches_a_lost_write_and_a_stale_read() {
    let ok = Value::Simple("OK".to_string());
    let lost = History::default();
    lost.record(
        1,
        0,
        Some(10),
        arguments(&["SET", "g0.0", "a"]),
        Some(ok.clone()),
    );
    lost.record(
        2,
        20,
        Some(30),
        arguments(&["GET", "g0.0"]),
        Some(Value::Null),
    );
    assert!(
        lost.verdict().is_illegal(),
        "a read after an acknowledged write that misses it is not linearisable"
    );

    let stale = History::default();
    stale.record(
        1,
        0,
        Some(10),
        arguments(&["SET", "g0.0", "a"]),
        Some(ok.clone()),
    );
    stale.record(
        1,
        11,
        Some(20),
        arguments(&["SET", "g0.0", "b"]),
        Some(ok.clone()),
    );
    stale.record(
        2,
        25,
        Some(30),
        arguments(&["GET", "g0.0"]),
        Some(Value::Bulk(b"a".to_vec())),
    );
    assert!(stale.verdict().is_illegal(), "a stale read is caught");

    let fine = History::default();
    fine.record(1, 0, Some(10), arguments(&["SET", "g0.0", "a"]), Some(ok));
    fine.record(2, 5, None, arguments(&["SET", "g0.0", "b"]), None);
    fine.record(
        3,
        20,
        Some(30),
        arguments(&["GET", "g0.0"]),
        Some(Value::Bulk(b"b".to_vec())),
    );
    fine.check();
}
