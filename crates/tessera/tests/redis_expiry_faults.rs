//! Expiry and MULTI/EXEC across partitions under SIGKILL, with the history checked (issue 22's
//! "Done when"): clients on every gateway of a cluster shaped as `tessera dev` starts it (3
//! routers, 3 storage processes, `skyros` partition groups of 3) run SET … PX/EX, PEXPIRE/EXPIRE
//! with NX/XX/GT/LT, PERSIST, GET, PTTL, DEL, GETEX and MULTI/EXEC over keys of two partitions,
//! with TTLs of tens to hundreds of milliseconds so that keys really expire during the run,
//! while the storage process that is primary of a partition the keys live in is SIGKILLed and
//! restarted. The history (wall-clock invoke and completion times on the test machine's clock,
//! which the gateways stamp with too; errors and timeouts recorded as unknown outcomes) is
//! checked by `lincheck::expiry::ExpiryModel`: each operation's stamp is unknown but lies in its
//! window, widened by `MARGIN_MS`. Canaries: the same history with one read forged to see a value
//! after its deadline is refused, and a cluster whose gateways stamp with a clock 50 ms behind
//! (`TESSERA_CANARY_STAMP_LAG_MS`, debug builds) produces a history the checker refuses.
//! Ports: 15600–15602 (RESP), 15700–15702 (E-Cast), 15610–15612 (routers); the canary's
//! 15620–15622, 15720–15722, 15630–15632.

mod support;

use lincheck::expiry::{
    Condition, ExpiryCommand, ExpiryInput, ExpiryModel, Reply, Span, TtlChange,
};
use lincheck::{Budget, CheckResult, Operation};
use resp::Value;
use runtime::ecast::config::PartitionMode;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use support::partitioned::{wait_until, PartitionedCluster};
use support::{arguments, RespClient};

/// How far a stamp may lie outside its operation's window: the gateway reads the same clock
/// (`SystemTime`, CLOCK_REALTIME) in whole milliseconds, truncated, where the client reads it in
/// microseconds; 2 ms covers the truncation with room to spare, and is small against the TTLs.
const MARGIN_MS: i64 = 2;
/// Key groups: each holds two keys in two different partitions; a MULTI/EXEC names both keys of
/// one group, so each group is one part for the checker.
const GROUPS: usize = 3;
const CLIENTS: usize = 6;

type ExpiryOperation = Operation<ExpiryInput, Vec<Reply>>;

fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// A cluster like `tessera dev`'s, its routers moved inside this test's port range.
fn cluster(name: &str, port: u16, storage_env: &[(&str, &str)]) -> PartitionedCluster {
    let mut cluster = PartitionedCluster::prepare(name, port, (3, 3, 3), |config| {
        config.partitions = PartitionMode::Skyros;
        for (index, router) in config.routers.iter_mut().enumerate() {
            router.address.set_port(port + 10 + index as u16);
        }
    });
    for (name, value) in storage_env {
        cluster
            .storage_env
            .push((name.to_string(), value.to_string()));
    }
    cluster.launch();
    assert!(cluster.wait_until_ready(Duration::from_secs(60)));
    cluster
}

/// The keys of each group (two partitions each, asserted), named by (group, index).
fn key_groups(cluster: &PartitionedCluster) -> Vec<[String; 2]> {
    (0..GROUPS)
        .map(|group| {
            let keys = cluster.keys_in_partitions(&format!("ttl{group}:"), 2);
            assert_ne!(keys[0].1, keys[1].1, "two partitions");
            [keys[0].0.clone(), keys[1].0.clone()]
        })
        .collect()
}

/// The partitions storage process `index`'s log last says it is the primary of.
fn primaries(cluster: &PartitionedCluster, index: usize) -> BTreeSet<u64> {
    let log = cluster.storage_log(index);
    let mut last = std::collections::BTreeMap::new();
    for line in log.lines() {
        if let Some(rest) = line.split("info: partition ").nth(1) {
            if !rest.contains(": view ") {
                continue;
            }
            let Some(partition) = rest.split(' ').next().and_then(|p| p.parse::<u64>().ok()) else {
                continue;
            };
            last.insert(partition, rest.contains("(primary)"));
        }
    }
    last.into_iter()
        .filter_map(|(partition, primary)| primary.then_some(partition))
        .collect()
}

/// A small deterministic generator per client.
struct Draw(u64);

impl Draw {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % bound
    }
}

/// One command, its words for Redis and the model's command. Keys are numbered
/// `group * 2 + index`.
fn draw_command(
    draw: &mut Draw,
    keys: &[String; 2],
    key_base: u32,
    value: u64,
) -> (Vec<String>, ExpiryCommand) {
    let index = draw.below(2) as usize;
    let name = keys[index].clone();
    let key = key_base + index as u32;
    let ttl = 20 + draw.below(280) as i64;
    let condition = match draw.below(5) {
        0 => (Condition::Always, None),
        1 => (Condition::IfNone, Some("NX")),
        2 => (Condition::IfSome, Some("XX")),
        3 => (Condition::IfLater, Some("GT")),
        _ => (Condition::IfEarlier, Some("LT")),
    };
    let words = |list: &[&str]| list.iter().map(|word| word.to_string()).collect::<Vec<_>>();
    match draw.below(100) {
        0..=21 => (
            words(&["SET", &name, &value.to_string(), "PX", &ttl.to_string()]),
            ExpiryCommand::SetAfter {
                key,
                value,
                after_ms: ttl,
            },
        ),
        22..=24 => (
            words(&["SET", &name, &value.to_string(), "EX", "1"]),
            ExpiryCommand::SetAfter {
                key,
                value,
                after_ms: 1_000,
            },
        ),
        25..=36 => {
            let mut list = words(&["PEXPIRE", &name, &ttl.to_string()]);
            list.extend(condition.1.map(str::to_string));
            (
                list,
                ExpiryCommand::Expire {
                    key,
                    after_ms: ttl,
                    condition: condition.0,
                },
            )
        }
        37..=39 => {
            let mut list = words(&["EXPIRE", &name, "1"]);
            list.extend(condition.1.map(str::to_string));
            (
                list,
                ExpiryCommand::Expire {
                    key,
                    after_ms: 1_000,
                    condition: condition.0,
                },
            )
        }
        40..=44 => (words(&["PERSIST", &name]), ExpiryCommand::Persist { key }),
        45..=66 => (words(&["GET", &name]), ExpiryCommand::Get { key }),
        67..=80 => (words(&["PTTL", &name]), ExpiryCommand::TimeToLive { key }),
        81..=84 => (words(&["DEL", &name]), ExpiryCommand::Delete { key }),
        85..=91 => (
            words(&["GETEX", &name, "PX", &ttl.to_string()]),
            ExpiryCommand::GetExpire {
                key,
                change: TtlChange::After(ttl),
            },
        ),
        92..=93 => (
            words(&["GETEX", &name, "EX", "1"]),
            ExpiryCommand::GetExpire {
                key,
                change: TtlChange::After(1_000),
            },
        ),
        _ => (
            words(&["GETEX", &name, "PERSIST"]),
            ExpiryCommand::GetExpire {
                key,
                change: TtlChange::Persist,
            },
        ),
    }
}

/// A reply as the model sees it; `None` for anything else (an error: outcome unknown).
fn reply(value: &Value) -> Option<Reply> {
    match value {
        Value::Simple(text) if text == "OK" => Some(Reply::Ok),
        Value::Null => Some(Reply::Nil),
        Value::Integer(number) => Some(Reply::Integer(*number)),
        Value::Bulk(bytes) => std::str::from_utf8(bytes)
            .ok()?
            .parse()
            .ok()
            .map(Reply::Value),
        _ => None,
    }
}

/// Runs one operation (a command, or MULTI + commands + EXEC): the replies, or `None` if the
/// outcome is unknown. The window is taken around the command, or around EXEC (the stamp is
/// taken when EXEC is planned).
fn perform(
    client: &mut RespClient,
    commands: &[Vec<String>],
    multi: bool,
) -> (u64, Option<Vec<Reply>>) {
    let call = |client: &mut RespClient, words: &[String]| {
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        client.call(&arguments(&words)).ok()
    };
    if !multi {
        let invoked = unix_us();
        let replies = call(client, &commands[0]).and_then(|value| Some(vec![reply(&value)?]));
        return (invoked, replies);
    }
    let mut invoked = unix_us();
    let mut queued = |client: &mut RespClient| -> Option<Vec<Reply>> {
        if call(client, &["MULTI".to_string()])? != Value::Simple("OK".into()) {
            return None;
        }
        for words in commands {
            if call(client, words)? != Value::Simple("QUEUED".into()) {
                return None;
            }
        }
        invoked = unix_us();
        match call(client, &["EXEC".to_string()])? {
            Value::Array(values) if values.len() == commands.len() => {
                values.iter().map(reply).collect()
            }
            _ => None,
        }
    };
    let replies = queued(client);
    (invoked, replies)
}

struct Workload {
    history: Arc<Mutex<Vec<ExpiryOperation>>>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// `CLIENTS` clients, two per gateway, each drawing operations on a random group until `stop`.
/// A client whose call fails records it as pending, then reconnects (waiting while its gateway
/// is down: nothing is recorded meanwhile).
fn start_workload(ports: &[u16], groups: &[[String; 2]]) -> Workload {
    let history: Arc<Mutex<Vec<ExpiryOperation>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let threads = (0..CLIENTS)
        .map(|client_index| {
            let (history, stop, groups) = (history.clone(), stop.clone(), groups.to_vec());
            let port = ports[client_index % ports.len()];
            std::thread::spawn(move || {
                let mut draw = Draw(client_index as u64 * 7_919 + 17);
                let mut client = None;
                let mut written = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let Some(connection) = client.as_mut() else {
                        match RespClient::connect(port, Duration::from_secs(1)) {
                            Ok(fresh) => client = Some(fresh),
                            Err(_) => std::thread::sleep(Duration::from_millis(50)),
                        }
                        continue;
                    };
                    let group = draw.below(GROUPS as u64) as usize;
                    let key_base = group as u32 * 2;
                    let multi = draw.below(100) < 15;
                    let count = if multi { 2 + draw.below(3) as usize } else { 1 };
                    let mut words = Vec::new();
                    let mut commands = Vec::new();
                    for _ in 0..count {
                        written += 1;
                        let value = (client_index as u64 + 1) * 1_000_000 + written;
                        let (text, command) =
                            draw_command(&mut draw, &groups[group], key_base, value);
                        words.push(text);
                        commands.push(command);
                    }
                    let (invoked, replies) = perform(connection, &words, multi);
                    let returned = unix_us();
                    let call_ms = (invoked / 1_000) as i64;
                    let failed = replies.is_none();
                    let input = ExpiryInput {
                        window: Span::window(
                            call_ms,
                            replies.as_ref().map(|_| (returned / 1_000) as i64),
                            MARGIN_MS,
                        ),
                        commands,
                    };
                    let operation = match replies {
                        Some(replies) => Operation::completed(
                            client_index as u64,
                            invoked,
                            returned,
                            input,
                            replies,
                        ),
                        None => Operation::pending(client_index as u64, invoked, input),
                    };
                    history.lock().unwrap().push(operation);
                    if failed {
                        // A fresh connection: no half-queued MULTI is left behind.
                        client = None;
                    }
                }
            })
        })
        .collect();
    Workload {
        history,
        stop,
        threads,
    }
}

impl Workload {
    fn len(&self) -> usize {
        self.history.lock().unwrap().len()
    }

    /// Lets the workload run for `duration`; asserts it recorded at least `least` operations
    /// meanwhile.
    fn run_for(&self, duration: Duration, least: usize) {
        let before = self.len();
        std::thread::sleep(duration);
        let recorded = self.len() - before;
        eprintln!("{recorded} operations in {duration:?}");
        assert!(
            recorded >= least,
            "the workload made no progress: {recorded} operations in {duration:?}"
        );
    }

    fn finish(self) -> Vec<ExpiryOperation> {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads {
            thread.join().unwrap();
        }
        Arc::try_unwrap(self.history).unwrap().into_inner().unwrap()
    }
}

fn check(history: &[ExpiryOperation]) -> CheckResult {
    lincheck::check(&ExpiryModel, history, Budget::steps(100_000_000))
}

/// How many reads saw a key expire (a nil GET or GETEX, PTTL -2) and how many saw a deadline
/// (a positive PTTL): the run must exercise expiry, not only writes.
fn expiry_observations(history: &[ExpiryOperation]) -> (usize, usize) {
    let (mut expired, mut deadlines) = (0, 0);
    for operation in history {
        let Some(replies) = &operation.output else {
            continue;
        };
        for (command, reply) in operation.input.commands.iter().zip(replies) {
            match (command, reply) {
                (ExpiryCommand::Get { .. } | ExpiryCommand::GetExpire { .. }, Reply::Nil)
                | (ExpiryCommand::TimeToLive { .. }, Reply::Integer(-2)) => expired += 1,
                (ExpiryCommand::TimeToLive { .. }, Reply::Integer(left)) if *left > 0 => {
                    deadlines += 1
                }
                _ => {}
            }
        }
    }
    (expired, deadlines)
}

/// The final probe: a fresh key beside each workload key (`<name>-probe`, model key 100 + k),
/// set with PX 100, then read 400 ms later (nil); recorded in the history. Returns the index of
/// the first probe read, for the forged canary. The probe keys are ones no workload operation
/// touches: a workload operation of unknown outcome (its window open to the end) on a workload
/// key may be placed between a SET and its read, and a pending PERSIST or EXPIRE would then
/// explain the forged read (the canary failed so once, stop 31).
fn probe(history: &mut Vec<ExpiryOperation>, port: u16, groups: &[[String; 2]]) -> usize {
    let mut client = RespClient::connect(port, Duration::from_secs(5)).unwrap();
    let mut record = |client: &mut RespClient, words: &[&str], command: ExpiryCommand| {
        let invoked = unix_us();
        let value = client.call(&arguments(words)).unwrap();
        let returned = unix_us();
        let replied = reply(&value).unwrap_or_else(|| panic!("{words:?}: {value:?}"));
        let input = ExpiryInput {
            window: Span::window(
                (invoked / 1_000) as i64,
                Some((returned / 1_000) as i64),
                MARGIN_MS,
            ),
            commands: vec![command],
        };
        history.push(Operation::completed(
            99,
            invoked,
            returned,
            input,
            vec![replied],
        ));
        replied
    };
    let mut reads = 0;
    for (group, keys) in groups.iter().enumerate() {
        for (index, name) in keys.iter().enumerate() {
            let key = 100 + (group * 2 + index) as u32;
            let value = 99_000_000 + u64::from(key);
            let set = ExpiryCommand::SetAfter {
                key,
                value,
                after_ms: 100,
            };
            let name = format!("{name}-probe");
            let words = ["SET", name.as_str(), &value.to_string(), "PX", "100"];
            assert_eq!(record(&mut client, &words, set), Reply::Ok);
        }
    }
    std::thread::sleep(Duration::from_millis(400));
    for (group, keys) in groups.iter().enumerate() {
        for (index, name) in keys.iter().enumerate() {
            let key = 100 + (group * 2 + index) as u32;
            let name = format!("{name}-probe");
            let replied = record(
                &mut client,
                &["GET", name.as_str()],
                ExpiryCommand::Get { key },
            );
            assert_eq!(replied, Reply::Nil, "{name} expired");
            reads += 1;
        }
    }
    // The reads are the history's last entries: the first of them.
    history.len() - reads
}

#[test]
fn expiry_and_multi_exec_across_partitions_survive_sigkill_of_a_partition_primary() {
    let started = Instant::now();
    let mut cluster = cluster("redis-expiry-kill", 15600, &[]);
    let groups = key_groups(&cluster);
    let used: BTreeSet<u64> = groups
        .iter()
        .flatten()
        .map(|key| cluster.partition_of(key).0)
        .collect();
    let ports = cluster.client_ports.clone();
    let workload = start_workload(&ports, &groups);
    workload.run_for(Duration::from_secs(3), 300);
    // The victim: a storage process that is the primary of a partition the keys are in.
    let (victim, led) = (0..3)
        .find_map(|index| {
            let led = primaries(&cluster, index)
                .intersection(&used)
                .next()
                .copied()?;
            Some((index, led))
        })
        .expect("some storage process leads a partition holding the keys");
    let killed_at = unix_us();
    cluster.kill_storage(victim);
    // Another replica takes over the partition it led (a view change under the workload).
    assert!(
        wait_until(Duration::from_secs(20), || (0..3)
            .filter(|index| *index != victim)
            .any(|index| primaries(&cluster, index).contains(&led))),
        "a new primary for partition {led}"
    );
    // A MULTI/EXEC the dead gateway had reserved keeps its keys locked for the lease (5 s):
    // writes to them wait (`docs/internals/redis.md`, "Multi-key commands and transactions").
    workload.run_for(Duration::from_secs(7), 100);
    cluster.restart_storage(victim);
    assert!(
        wait_until(Duration::from_secs(30), || cluster.recovered(victim, 3)),
        "storage process {victim} recovered"
    );
    let restarted_at = unix_us();
    workload.run_for(Duration::from_secs(4), 300);
    let mut history = workload.finish();
    let forged_read = probe(&mut history, ports[(victim + 1) % 3], &groups);
    // The restarted gateway served its clients again.
    let victim_clients: BTreeSet<u64> = (0..CLIENTS as u64)
        .filter(|client| *client as usize % ports.len() == victim)
        .collect();
    let served_after = history
        .iter()
        .filter(|operation| {
            victim_clients.contains(&operation.client)
                && operation.call > restarted_at
                && operation.output.is_some()
        })
        .count();
    assert!(
        served_after > 20,
        "the restarted gateway answered {served_after}"
    );
    let during = history
        .iter()
        .filter(|operation| operation.call > killed_at && operation.call < restarted_at)
        .count();
    assert!(
        during > 100,
        "{during} operations while storage process {victim} was down"
    );
    let (expired, deadlines) = expiry_observations(&history);
    assert!(
        expired > 100 && deadlines > 100,
        "expiry observed: {expired} expired, {deadlines} deadlines"
    );
    let unknown = history
        .iter()
        .filter(|operation| operation.is_pending())
        .count();
    let transactions = history
        .iter()
        .filter(|operation| operation.input.commands.len() > 1 && operation.output.is_some())
        .count();
    assert!(transactions > 50, "{transactions} transactions");
    let checking = Instant::now();
    match check(&history) {
        CheckResult::Ok => {}
        CheckResult::Illegal(violation) => panic!("not linearisable:\n{}", violation.report),
        CheckResult::Unknown => panic!("the linearisability search gave up"),
    }
    eprintln!(
        "expiry under SIGKILL of storage process {victim}: {} operations ({transactions} MULTI/EXEC, {unknown} unknown outcomes, {expired} expiries seen, {deadlines} TTLs), checked in {:?}, test {:?}",
        history.len(),
        checking.elapsed(),
        started.elapsed()
    );
    // The canary on the same history: the first probe read (400 ms after its key's SET PX 100)
    // forged to see the value. Every stamp in the windows puts it past the deadline.
    let mut forged = history.clone();
    let ExpiryCommand::Get { key } = forged[forged_read].input.commands[0] else {
        unreachable!("a probe read")
    };
    forged[forged_read].output = Some(vec![Reply::Value(99_000_000 + u64::from(key))]);
    assert!(
        check(&forged).is_illegal(),
        "the forged stale read is refused"
    );
}

/// The canary: gateways that stamp with a clock 50 ms behind the clients' (as a gateway on a
/// lagging host would, or a replica deciding expiry by a clock other than the stamp's) give a
/// history the checker refuses: a key set with PX n is already gone, or still there, where the
/// windows say otherwise.
#[test]
fn the_canary_gateways_stamping_with_a_lagging_clock_fail_the_check() {
    let cluster = cluster(
        "redis-expiry-canary",
        15620,
        &[("TESSERA_CANARY_STAMP_LAG_MS", "50")],
    );
    let groups = key_groups(&cluster);
    let workload = start_workload(&cluster.client_ports, &groups);
    workload.run_for(Duration::from_secs(2), 100);
    let history = workload.finish();
    assert!(check(&history).is_illegal(), "a lagging stamp is caught");
}
