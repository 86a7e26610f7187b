//! Real processes under faults: a 3-replica cluster serves concurrent RESP clients while
//! replicas, the primary included, are killed with SIGKILL and restarted, and paused with
//! SIGSTOP/SIGCONT. Every history is checked for linearisability (which also proves no
//! acknowledged write was lost: the final reads are part of it). Timings are reported, not
//! asserted beyond a generous liveness bound; the measured numbers live in docs/bench/.

mod support;

use resp::Value;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use stdx::Prng;
use support::{arguments, Cluster, History, RespClient};

const CLIENTS: u64 = 4;
const GROUPS: usize = 3;
const GROUP_SIZE: usize = 2;
const COUNTERS: usize = 2;

struct Shared {
    history: History,
    started: Instant,
    stop: AtomicBool,
    /// Microseconds since start at which the latest successful operation was invoked.
    last_success_call_us: AtomicU64,
    completed: AtomicU64,
    ports: Vec<u16>,
}

impl Shared {
    fn now_us(&self) -> u64 {
        self.started.elapsed().as_micros() as u64
    }
}

fn register(group: usize, member: usize) -> String {
    format!("g{group}.{member}")
}

fn next_command(prng: &mut Prng, client: u64, sequence: u64) -> Vec<Vec<u8>> {
    let unique = format!("{client}-{sequence}");
    let group = prng.below(GROUPS as u64) as usize;
    let member = prng.below(GROUP_SIZE as u64) as usize;
    let key = register(group, member);
    let counter = format!("c{}", prng.below(COUNTERS as u64));
    match prng.below(100) {
        0..=29 => arguments(&["SET", &key, &unique]),
        30..=59 => arguments(&["GET", &key]),
        60..=69 => arguments(&["INCR", &counter]),
        70..=74 => arguments(&["GET", &counter]),
        75..=82 => arguments(&["APPEND", &key, &format!("|{unique}")]),
        83..=90 => arguments(&[
            "MSET",
            &register(group, 0),
            &format!("{unique}a"),
            &register(group, 1),
            &format!("{unique}b"),
        ]),
        91..=96 => arguments(&["MGET", &register(group, 0), &register(group, 1)]),
        _ => arguments(&["DEL", &key]),
    }
}

fn is_read(command: &[Vec<u8>]) -> bool {
    matches!(command[0].as_slice(), b"GET" | b"MGET")
}

/// One client: sequential commands, reconnecting to another replica after any error. A write
/// whose reply never came (or came as TRYAGAIN) has an unknown outcome: it is recorded as
/// pending, so the checker may place it anywhere after its call, or nowhere.
fn client_loop(shared: Arc<Shared>, client: u64) {
    let mut prng = Prng::new(0xc11e47 + client);
    let mut sequence = 0;
    let mut target = client as usize % shared.ports.len();
    let mut connection: Option<RespClient> = None;
    while !shared.stop.load(Ordering::Relaxed) {
        if connection.is_none() {
            match RespClient::connect(shared.ports[target], Duration::from_millis(200)) {
                Ok(client) => connection = Some(client),
                Err(_) => {
                    target = (target + 1) % shared.ports.len();
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
            }
        }
        sequence += 1;
        let command = next_command(&mut prng, client, sequence);
        let call = shared.now_us();
        let reply = connection.as_mut().expect("connected above").call(&command);
        let returned = shared.now_us();
        match reply {
            Ok(Value::Error(text)) if text.starts_with("TRYAGAIN") => {
                if !is_read(&command) {
                    shared.history.record(client, call, None, command, None);
                }
            }
            Ok(value) => {
                shared
                    .history
                    .record(client, call, Some(returned), command, Some(value));
                shared
                    .last_success_call_us
                    .fetch_max(call, Ordering::Relaxed);
                shared.completed.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                if !is_read(&command) {
                    shared.history.record(client, call, None, command, None);
                }
                connection = None;
                target = (target + 1) % shared.ports.len();
            }
        }
        std::thread::sleep(Duration::from_micros(500));
    }
}

/// Reads every key once more through the cluster, into the history: a lost write shows up here.
fn final_reads(shared: &Shared, cluster: &Cluster) {
    let mut client = (0..cluster.client_ports.len())
        .find_map(|index| {
            RespClient::connect(cluster.client_ports[index], Duration::from_millis(500)).ok()
        })
        .expect("a replica accepts connections");
    let mut keys: Vec<String> = (0..GROUPS)
        .flat_map(|group| (0..GROUP_SIZE).map(move |member| register(group, member)))
        .collect();
    keys.extend((0..COUNTERS).map(|counter| format!("c{counter}")));
    for key in keys {
        let command = arguments(&["GET", &key]);
        let call = shared.now_us();
        let value = client.call(&command).expect("final read");
        assert!(
            !matches!(value, Value::Error(_)),
            "final read of {key} failed: {value:?}"
        );
        shared
            .history
            .record(1_000, call, Some(shared.now_us()), command, Some(value));
    }
}

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
    fn strike(&mut self, cluster: &mut Cluster, shared: &Shared) {
        let replicas = cluster.client_ports.len();
        let primary = cluster.primary();
        match self.prng.below(3) {
            0 => {
                let victim = primary.unwrap_or(0);
                let killed_at = shared.now_us();
                cluster.kill(victim);
                self.kills += 1;
                if primary.is_some() {
                    self.primary_kills += 1;
                }
                // Service has resumed once an operation invoked after the kill succeeded.
                let deadline = Instant::now() + Duration::from_secs(15);
                let resumed = || shared.last_success_call_us.load(Ordering::Relaxed) > killed_at;
                while !resumed() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(2));
                }
                assert!(
                    resumed(),
                    "no operation invoked after killing the primary succeeded within 15 s"
                );
                self.recovery_ms.push((shared.now_us() - killed_at) / 1000);
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
    let shared = Arc::new(Shared {
        history: History::default(),
        started: Instant::now(),
        stop: AtomicBool::new(false),
        last_success_call_us: AtomicU64::new(0),
        completed: AtomicU64::new(0),
        ports: cluster.client_ports.clone(),
    });
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let shared = shared.clone();
            std::thread::spawn(move || client_loop(shared, client))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let mut nemesis = Nemesis {
        prng: Prng::new(port.into()),
        kills: 0,
        primary_kills: 0,
        pauses: 0,
        recovery_ms: Vec::new(),
    };
    for _ in 0..faults {
        nemesis.strike(&mut cluster, &shared);
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
    shared.stop.store(true, Ordering::SeqCst);
    for client in clients {
        client.join().unwrap();
    }
    final_reads(&shared, &cluster);
    let completed = shared.completed.load(Ordering::SeqCst);
    let operations = shared.history.operations.lock().unwrap().len();
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
    shared.history.check();
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
