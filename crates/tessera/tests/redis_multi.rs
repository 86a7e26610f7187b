//! Multi-key commands and MULTI/EXEC/WATCH across partitions, against real clusters of real
//! processes: redis-cli and redis-py (`scripts/test` installs Debian's python3-redis for /usr/bin/python3) against
//! the cluster `tessera dev` starts (`skyros` partition groups) and a `sequenced` cluster,
//! with keys chosen in different partitions (asserted); and a checked concurrent history of
//! MULTI/EXEC transfers between accounts on different partitions (linearisable, the total
//! invariant); XREAD across partitions, blocking on `$`. Ports: 26000 (SQL 26050), 26300, 26600
//! (SQL 26650), 26900 (SQL 26950), and +100 and +200 above each; the XREAD test 15640–15642,
//! 15650–15652 (routers), 15740–15742.

mod support;

use support::redis_cli;

use lincheck::{Budget, CheckResult, Model, Operation};
use resp::Value;
use runtime::ecast::config::PartitionMode;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::partitioned::PartitionedCluster;
use support::{arguments, RespClient};

/// Keys `{prefix}0…` in `count` different partitions (asserted), by name.
fn spread(cluster: &PartitionedCluster, prefix: &str, count: usize) -> Vec<String> {
    let keys = cluster.keys_in_partitions(prefix, count);
    assert_eq!(keys.len(), count);
    for (index, (_, partition)) in keys.iter().enumerate() {
        assert!(
            keys[..index].iter().all(|(_, other)| other != partition),
            "{keys:?} are in different partitions"
        );
    }
    keys.into_iter().map(|(key, _)| key).collect()
}

/// Every multi-key command with its keys on different partitions, through different gateways.
fn exercise(cluster: &PartitionedCluster) {
    let ports = &cluster.client_ports;
    let mut turn = 0;
    let mut cli = |words: &[&str]| {
        turn += 1;
        redis_cli(ports[turn % ports.len()], words)
    };
    let [a, b, c] = <[String; 3]>::try_from(spread(cluster, "key", 3)).unwrap();
    let (a, b, c) = (a.as_str(), b.as_str(), c.as_str());
    assert_eq!(cli(&["MSET", a, "1", b, "2", c, "3"]), "OK");
    assert_eq!(cli(&["MGET", a, b, c]), "1\n2\n3");
    assert_eq!(cli(&["RENAME", a, b]), "OK");
    assert_eq!(cli(&["EXISTS", a]), "0");
    assert_eq!(cli(&["GET", b]), "1");
    assert_eq!(cli(&["RENAME", a, b]), "ERR no such key");
    assert_eq!(cli(&["RENAMENX", b, c]), "0");
    assert_eq!(cli(&["COPY", c, a]), "1");
    assert_eq!(cli(&["COPY", c, a]), "0");
    assert_eq!(cli(&["GET", a]), "3");
    assert_eq!(cli(&["MSETNX", a, "x", "fresh", "y"]), "0");
    assert_eq!(cli(&["EXISTS", "fresh"]), "0");
    assert_eq!(cli(&["DEL", a, b, c, "fresh"]), "3");
    assert_eq!(cli(&["MSETNX", a, "x", b, "y"]), "1");
    assert_eq!(cli(&["DEL", a, b]), "2");
    // Sets.
    assert_eq!(cli(&["SADD", a, "x", "y", "z"]), "3");
    assert_eq!(cli(&["SADD", b, "y", "z", "w"]), "3");
    assert_eq!(cli(&["SINTERSTORE", c, a, b]), "2");
    assert_eq!(cli(&["SMEMBERS", c]), "y\nz");
    assert_eq!(cli(&["SINTERCARD", "2", a, b]), "2");
    assert_eq!(cli(&["SUNION", a, b]), "w\nx\ny\nz");
    assert_eq!(cli(&["SDIFFSTORE", c, a, b]), "1");
    assert_eq!(cli(&["SMOVE", a, b, "x"]), "1");
    assert_eq!(cli(&["SISMEMBER", b, "x"]), "1");
    assert_eq!(cli(&["SMOVE", a, b, "x"]), "0");
    assert_eq!(
        cli(&["SINTER", a, "nothing", c]),
        "",
        "an absent key is an empty set"
    );
    assert_eq!(cli(&["SET", "str", "v"]), "OK");
    assert_eq!(
        cli(&["SUNIONSTORE", c, a, "str"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(cli(&["DEL", a, b, c]), "3");
    // Lists.
    assert_eq!(cli(&["RPUSH", a, "1", "2", "3"]), "3");
    assert_eq!(cli(&["LMOVE", a, b, "LEFT", "RIGHT"]), "1");
    assert_eq!(cli(&["RPOPLPUSH", a, b]), "3");
    assert_eq!(cli(&["LRANGE", b, "0", "-1"]), "3\n1");
    assert_eq!(cli(&["LMOVE", a, a, "RIGHT", "LEFT"]), "2");
    assert_eq!(
        cli(&["LMOVE", a, "str", "LEFT", "LEFT"]).split(' ').next(),
        Some("WRONGTYPE")
    );
    assert_eq!(cli(&["DEL", a, b]), "2");
    // Sorted sets.
    assert_eq!(cli(&["ZADD", a, "1", "m", "2", "n"]), "2");
    assert_eq!(cli(&["ZADD", b, "3", "n", "4", "o"]), "2");
    assert_eq!(cli(&["ZUNIONSTORE", c, "2", a, b]), "3");
    assert_eq!(
        cli(&["ZRANGE", c, "0", "-1", "WITHSCORES"]),
        "m\n1\no\n4\nn\n5"
    );
    assert_eq!(
        cli(&["ZINTERSTORE", c, "2", a, b, "WEIGHTS", "2", "1"]),
        "1"
    );
    assert_eq!(cli(&["ZSCORE", c, "n"]), "7");
    assert_eq!(cli(&["ZDIFF", "2", a, b]), "m");
    assert_eq!(cli(&["ZRANGESTORE", c, b, "0", "0"]), "1");
    assert_eq!(cli(&["ZRANGE", c, "0", "-1"]), "n");
    assert_eq!(cli(&["DEL", a, b, c, "str"]), "4");
    // A transaction over three partitions.
    let transaction = Command::new("redis-cli")
        .arg("-p")
        .arg(ports[0].to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let script = format!(
        "MULTI\nSET {a} 10\nINCRBY {b} 5\nLPUSH {c} q\nINCR {c}\nPING\nEXEC\nMGET {a} {b}\n"
    );
    use std::io::Write;
    transaction
        .stdin
        .as_ref()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let output = transaction.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        vec![
            "OK",
            "QUEUED",
            "QUEUED",
            "QUEUED",
            "QUEUED",
            "QUEUED",
            "OK",
            "5",
            "1",
            "WRONGTYPE Operation against a key holding the wrong kind of value",
            // (redis-cli prints an empty line after an error.)
            "",
            "PONG",
            "10",
            "5"
        ],
        "{text}"
    );
    assert_eq!(cli(&["DEL", a, b, c]), "3");
    // Blocking pops wait at the gateway: a push through another gateway, to a key in another
    // partition than the first one named, wakes the BLPOP.
    let pusher = {
        let (port, key) = (ports[1], b.to_string());
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            redis_cli(port, &["RPUSH", &key, "x"])
        })
    };
    let started = Instant::now();
    assert_eq!(
        redis_cli(ports[0], &["BLPOP", a, b, "5"]),
        format!("{b}\nx")
    );
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert_eq!(pusher.join().unwrap(), "1");
    let started = Instant::now();
    assert_eq!(
        redis_cli(ports[2], &["BLPOP", a, b, "0.2"]),
        "",
        "nil after the timeout"
    );
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(cli(&["RPUSH", c, "1", "2"]), "2");
    assert_eq!(cli(&["BLMOVE", c, a, "RIGHT", "LEFT", "0"]), "2");
    assert_eq!(
        cli(&["LMPOP", "2", b, c, "LEFT", "COUNT", "5"]),
        format!("{c}\n1")
    );
    assert_eq!(cli(&["DEL", a]), "1");
    // The keyspace over every partition: SCAN with TYPE, RANDOMKEY, and HSCAN.
    assert_eq!(cli(&["RANDOMKEY"]), "");
    assert_eq!(cli(&["SET", a, "s"]), "OK");
    assert_eq!(cli(&["SADD", b, "m"]), "1");
    assert_eq!(cli(&["HSET", c, "f1", "v1", "g", "v2"]), "2");
    assert_eq!(cli(&["SCAN", "0", "TYPE", "set"]), format!("0\n{b}"));
    assert_eq!(
        cli(&["SCAN", "0", "MATCH", "key*", "TYPE", "HASH"]),
        format!("0\n{c}")
    );
    assert_eq!(cli(&["SCAN", "0", "TYPE", "stream"]), "0");
    let drawn = cli(&["RANDOMKEY"]);
    assert!([a, b, c].contains(&drawn.as_str()), "{drawn}");
    assert_eq!(cli(&["HSCAN", c, "0", "MATCH", "f*"]), "0\nf1\nv1");
    assert_eq!(cli(&["DEL", a, b, c]), "3");
}

#[test]
fn multi_key_commands_and_transactions_across_partitions_with_redis_cli() {
    let cluster =
        PartitionedCluster::dev("redis-multi-skyros", PartitionMode::Skyros, 26000, 26050);
    exercise(&cluster);
    drop(cluster);
    let mut sequenced =
        PartitionedCluster::prepare("redis-multi-sequenced", 26300, (3, 6, 3), |_| {});
    sequenced.launch();
    assert!(sequenced.wait_until_ready(Duration::from_secs(30)));
    exercise(&sequenced);
}

/// redis-py, unmodified: pipelines with transactions, WATCH with optimistic retries
/// (`Redis.transaction`), and the multi-key commands, on keys in different partitions.
#[test]
fn redis_py_transactions_and_watch_across_partitions() {
    let cluster = PartitionedCluster::dev("redis-multi-py", PartitionMode::Skyros, 26900, 26950);
    let keys = spread(&cluster, "acct", 3);
    let script = r#"
import sys, threading, redis
port, keys = int(sys.argv[1]), sys.argv[2:]
r = redis.Redis(port=port, decode_responses=True)
r.mset({key: 100 for key in keys})
# MULTI/EXEC through a pipeline.
with r.pipeline() as pipe:
    pipe.incrby(keys[0], -30).incrby(keys[1], 30).get(keys[2])
    assert pipe.execute() == [70, 130, '100'], 'transaction replies'
# WATCH: another client's write makes EXEC answer nil (WatchError in redis-py).
other = redis.Redis(port=port + 1, decode_responses=True)
with r.pipeline() as pipe:
    pipe.watch(keys[0])
    other.set(keys[0], 0)
    pipe.multi()
    pipe.set(keys[1], 'lost')
    try:
        pipe.execute()
        raise AssertionError('EXEC must fail after a watched key changed')
    except redis.WatchError:
        pass
assert r.get(keys[1]) == '130', 'nothing of the aborted transaction was written'
# A write that puts the watched value back (ABA) aborts EXEC too, as in Redis: the client may
# have read the value in between (a transfer then lost an update; kv::Versions).
with r.pipeline() as pipe:
    pipe.watch(keys[2])
    other.incr(keys[2]); assert int(pipe.get(keys[2])) == 101
    other.decr(keys[2])
    pipe.multi()
    pipe.set(keys[2], 'lost')
    try:
        pipe.execute()
        raise AssertionError('EXEC must fail after a watched key was written back')
    except redis.WatchError:
        pass
# The same for a key absent at WATCH and at EXEC, created and deleted in between.
with r.pipeline() as pipe:
    pipe.watch('watched-absent')
    other.set('watched-absent', 1); other.delete('watched-absent')
    pipe.multi()
    pipe.set('watched-absent', 'lost')
    try:
        pipe.execute()
        raise AssertionError('EXEC must fail after a watched absent key was created and deleted')
    except redis.WatchError:
        pass
assert r.get(keys[2]) == '100' and r.get('watched-absent') is None
r.set(keys[0], 70)
# Optimistic transfers from 4 threads, each retried on WatchError: the total is kept.
def transfer(source, target, times):
    client = redis.Redis(port=port + (source % 3), decode_responses=True)
    for _ in range(times):
        def move(pipe):
            balance = int(pipe.get(keys[source]))
            pipe.multi()
            pipe.set(keys[source], balance - 1)
            pipe.incrby(keys[target], 1)
        client.transaction(move, keys[source])
threads = [threading.Thread(target=transfer, args=(i % 3, (i + 1) % 3, 25)) for i in range(4)]
for thread in threads: thread.start()
for thread in threads: thread.join()
balances = [int(value) for value in r.mget(keys)]
assert sum(balances) == 300, balances
# Multi-key commands through the client's own methods.
r.delete(*keys)
r.sadd(keys[0], 'a', 'b'); r.sadd(keys[1], 'b', 'c')
assert r.sinterstore(keys[2], [keys[0], keys[1]]) == 1
assert r.smembers(keys[2]) == {'b'}
assert r.rename(keys[2], 'renamed') is True
assert r.exists(keys[2]) == 0 and r.smembers('renamed') == {'b'}
assert r.smove(keys[0], keys[1], 'a') is True
assert r.sunion(keys[0], keys[1]) == {'a', 'b', 'c'}
r.rpush('queue', 'job1', 'job2')
assert r.lmove('queue', keys[2], 'LEFT', 'RIGHT') == 'job1'
assert r.copy(keys[2], 'copied') is True and r.lrange('copied', 0, -1) == ['job1']
assert r.zunionstore('zout', {keys[0]: 2, keys[1]: 1}) == 3
print('ok')
"#;
    // Debian's interpreter, where python3-redis installs redis-py (not a PATH shim's).
    let output = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(script)
        .arg(cluster.client_ports[0].to_string())
        .args(&keys)
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.trim() == "ok",
        "redis-py script failed:\n{stdout}\n{stderr}"
    );
}

// ----- A checked history of MULTI/EXEC transfers. -----

/// What a client did: a transfer (MULTI, INCRBY from -amount, INCRBY to +amount, EXEC) and its
/// two new balances, a read of every account (MGET) or a single-key no-op write (INCRBY k 0,
/// refused and retried while a transfer holds k) and the balance it answered.
#[derive(Clone, Debug)]
enum Bank {
    Transfer { from: usize, to: usize, amount: i64 },
    ReadAll,
    Touch { account: usize },
}

/// One recorded call of the bank workload.
type BankOperation = Operation<Bank, Vec<i64>>;

struct BankModel {
    accounts: usize,
    initial: i64,
}

impl Model for BankModel {
    type State = Vec<i64>;
    type Input = Bank;
    type Output = Vec<i64>;

    fn init(&self) -> Vec<i64> {
        vec![self.initial; self.accounts]
    }

    fn step(&self, state: &Vec<i64>, input: &Bank, output: Option<&Vec<i64>>) -> Option<Vec<i64>> {
        let mut next = state.clone();
        let expected = match input {
            Bank::Transfer { from, to, amount } => {
                next[*from] -= amount;
                next[*to] += amount;
                vec![next[*from], next[*to]]
            }
            Bank::ReadAll => state.clone(),
            Bank::Touch { account } => vec![state[*account]],
        };
        match output {
            Some(observed) if *observed != expected => None,
            _ => Some(next),
        }
    }

    fn is_read_only(&self, input: &Bank) -> bool {
        !matches!(input, Bank::Transfer { .. })
    }
}

fn integer(value: &Value) -> Option<i64> {
    match value {
        Value::Integer(number) => Some(*number),
        Value::Bulk(bytes) => std::str::from_utf8(bytes).ok()?.parse().ok(),
        _ => None,
    }
}

/// One client's call: the output to record, or None when the outcome is unknown (an error).
fn perform(client: &mut RespClient, accounts: &[String], operation: &Bank) -> Option<Vec<i64>> {
    let call = |client: &mut RespClient, words: &[&str]| client.call(&arguments(words)).ok();
    match operation {
        Bank::Transfer { from, to, amount } => {
            let (plus, minus) = (amount.to_string(), (-amount).to_string());
            call(client, &["MULTI"])?;
            call(client, &["INCRBY", &accounts[*from], &minus])?;
            call(client, &["INCRBY", &accounts[*to], &plus])?;
            // Anything but the two replies (an error: the outcome is unknown) is recorded as
            // pending, and counted by the caller.
            match call(client, &["EXEC"])? {
                Value::Array(replies) if replies.len() == 2 => {
                    replies.iter().map(integer).collect()
                }
                _ => None,
            }
        }
        Bank::ReadAll => {
            let words: Vec<&str> = std::iter::once("MGET")
                .chain(accounts.iter().map(String::as_str))
                .collect();
            match call(client, &words)? {
                Value::Array(values) => values.iter().map(integer).collect(),
                _ => None,
            }
        }
        Bank::Touch { account } => {
            let reply = call(client, &["INCRBY", &accounts[*account], "0"])?;
            Some(vec![integer(&reply)?])
        }
    }
}

/// The bank workload: `CLIENTS` clients on `ports` (in turn), each `OPERATIONS` transfers,
/// reads and single-key writes over 3 accounts in 3 partitions; with `kill`, that storage
/// process is SIGKILLed once a third of the calls returned (and a third of them are asserted
/// to be called after it). Checks the history (linearisable; every read sees the
/// total; a forged reply is refused) and the final total; returns how many calls had no known
/// outcome (an error or a lost connection).
fn bank(cluster: &mut PartitionedCluster, ports: &[u16], kill: Option<usize>) -> usize {
    const ACCOUNTS: usize = 3;
    const INITIAL: i64 = 1_000;
    const CLIENTS: u64 = 4;
    let operations: u64 = if kill.is_some() { 150 } else { 60 };
    let accounts = spread(cluster, "bank", ACCOUNTS);
    let mut setup = RespClient::connect(ports[0], Duration::from_secs(5)).unwrap();
    for account in &accounts {
        let reply = setup.call(&arguments(&["SET", account, &INITIAL.to_string()]));
        assert_eq!(reply.unwrap(), Value::Simple("OK".into()));
    }
    let history: Arc<Mutex<Vec<BankOperation>>> = Arc::default();
    let start = Instant::now();
    let threads: Vec<_> = (0..CLIENTS)
        .map(|client_index| {
            let (history, accounts) = (history.clone(), accounts.clone());
            let port = ports[client_index as usize % ports.len()];
            std::thread::spawn(move || {
                let mut client = RespClient::connect(port, Duration::from_secs(5)).unwrap();
                let mut seed = client_index * 7_919 + 13;
                for _ in 0..operations {
                    seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    let pick = (seed >> 33) as usize;
                    let operation = match pick % 5 {
                        0 => Bank::ReadAll,
                        1 => Bank::Touch {
                            account: (pick / 5) % ACCOUNTS,
                        },
                        _ => {
                            let from = (pick / 5) % ACCOUNTS;
                            let to = (from + 1 + (pick / 17) % (ACCOUNTS - 1)) % ACCOUNTS;
                            Bank::Transfer {
                                from,
                                to,
                                amount: 1 + (pick / 101) as i64 % 50,
                            }
                        }
                    };
                    let call = start.elapsed().as_micros() as u64;
                    let output = perform(&mut client, &accounts, &operation);
                    let returned = start.elapsed().as_micros() as u64;
                    let failed = output.is_none();
                    history.lock().unwrap().push(match output {
                        Some(output) => {
                            Operation::completed(client_index, call, returned, operation, output)
                        }
                        None => Operation::pending(client_index, call, operation),
                    });
                    if failed {
                        // A fresh connection: no half-queued MULTI is left behind.
                        match RespClient::connect(port, Duration::from_secs(5)) {
                            Ok(fresh) => client = fresh,
                            Err(_) => return,
                        }
                    }
                }
            })
        })
        .collect();
    let mut killed_at_us = None;
    if let Some(index) = kill {
        let third = (CLIENTS * operations / 3) as usize;
        while history.lock().unwrap().len() < third {
            std::thread::sleep(Duration::from_millis(1));
        }
        killed_at_us = Some(start.elapsed().as_micros() as u64);
        cluster.kill_storage(index);
    }
    for thread in threads {
        thread.join().unwrap();
    }
    let history = history.lock().unwrap();
    if let Some(killed_at_us) = killed_at_us {
        let after = history
            .iter()
            .filter(|operation| operation.call > killed_at_us)
            .count();
        assert!(
            after as u64 >= CLIENTS * operations / 3,
            "only {after} calls after the kill"
        );
    }
    let transfers = history
        .iter()
        .filter(|operation| {
            matches!(operation.input, Bank::Transfer { .. }) && operation.output.is_some()
        })
        .count();
    assert!(transfers > 50, "the workload transferred ({transfers})");
    // Every read of all accounts sees the total: no transfer is seen half done.
    for operation in history.iter() {
        if let (Bank::ReadAll, Some(balances)) = (&operation.input, &operation.output) {
            assert_eq!(
                balances.iter().sum::<i64>(),
                INITIAL * ACCOUNTS as i64,
                "{balances:?}"
            );
        }
    }
    let model = BankModel {
        accounts: ACCOUNTS,
        initial: INITIAL,
    };
    match lincheck::check(&model, &history, Budget::steps(200_000_000)) {
        CheckResult::Ok => {}
        CheckResult::Illegal(violation) => panic!("not linearisable:\n{}", violation.report),
        CheckResult::Unknown => panic!("the linearisability search gave up"),
    }
    // The canary: the same history with one transfer's replies altered is refused.
    let mut forged: Vec<BankOperation> = history.clone();
    let index = forged
        .iter()
        .position(|operation| {
            matches!(operation.input, Bank::Transfer { .. }) && operation.output.is_some()
        })
        .unwrap();
    forged[index].output.as_mut().unwrap()[0] += 1;
    assert!(lincheck::check(&model, &forged, Budget::steps(200_000_000)).is_illegal());
    // Read back (retried: after a kill, a lock of a dead gateway may hold a key for its lease).
    let total = (0..100)
        .find_map(|_| {
            let words: Vec<&str> = std::iter::once("MGET")
                .chain(accounts.iter().map(String::as_str))
                .collect();
            match setup.call(&arguments(&words)) {
                Ok(Value::Array(values)) => values.iter().map(integer).sum::<Option<i64>>(),
                _ => {
                    std::thread::sleep(Duration::from_millis(100));
                    None
                }
            }
        })
        .expect("the balances are read back");
    assert_eq!(total, INITIAL * ACCOUNTS as i64);
    history
        .iter()
        .filter(|operation| operation.output.is_none())
        .count()
}

#[test]
fn concurrent_multi_exec_transfers_across_partitions_are_linearisable_and_keep_the_total() {
    let mut cluster =
        PartitionedCluster::dev("redis-multi-bank", PartitionMode::Skyros, 26600, 26650);
    let ports = cluster.client_ports.clone();
    let unknown = bank(&mut cluster, &ports, None);
    assert_eq!(unknown, 0, "without faults every call has an answer");
}

/// The same with a storage process SIGKILLed mid-run (its partition replicas and its gateway
/// die; the clients use the other two gateways): nothing acknowledged is lost, nothing is seen
/// half done.
#[test]
fn multi_exec_transfers_survive_sigkill_of_a_storage_process() {
    let mut cluster =
        PartitionedCluster::dev("redis-multi-kill", PartitionMode::Skyros, 26630, 26680);
    let ports = cluster.client_ports[..2].to_vec();
    let unknown = bank(&mut cluster, &ports, Some(2));
    eprintln!("multi/exec under SIGKILL: {unknown} calls without a known outcome");
}

/// A gateway that dies between a reservation and its commit leaves its keys locked; another
/// gateway refused by such a lock after its lease (5 s) releases it, at every key it names, and
/// goes on. The dying gateway is simulated (`TESSERA_TEST_ABANDON_RESERVATIONS`, debug builds:
/// a command on `abandon:` keys is abandoned after its reservation).
#[test]
fn a_reservation_abandoned_by_its_gateway_is_released_after_its_lease() {
    let mut cluster =
        PartitionedCluster::prepare("redis-multi-abandon", 27300, (3, 3, 3), |config| {
            config.partitions = PartitionMode::Skyros;
        });
    cluster.storage_env.push((
        "TESSERA_TEST_ABANDON_RESERVATIONS".to_string(),
        "1".to_string(),
    ));
    cluster.launch();
    assert!(cluster.wait_until_ready(Duration::from_secs(30)));
    let ports = cluster.client_ports.clone();
    let keys = cluster.keys_in_partitions("abandon:", 2);
    assert_ne!(keys[0].1, keys[1].1, "two partitions");
    let (a, b) = (keys[0].0.as_str(), keys[1].0.as_str());
    assert_eq!(redis_cli(ports[0], &["SET", a, "1"]), "OK");
    // The RENAME reserves both keys and is abandoned: no answer but an error, no effect.
    let abandoned = redis_cli(ports[0], &["RENAME", a, b]);
    assert!(abandoned.starts_with("TRYAGAIN"), "{abandoned}");
    let started = Instant::now();
    // Reads are served from the values before the (never committed) command.
    assert_eq!(redis_cli(ports[1], &["GET", a]), "1");
    // A write to either key (one a lock refuses: not a plain SET) waits for the lease, then
    // releases the lock and runs.
    assert_eq!(redis_cli(ports[1], &["APPEND", b, "x"]), "1");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(3) && waited < Duration::from_secs(10),
        "the write waited {waited:?} for a 5 s lease"
    );
    // Both locks went with one release: the other key is writable at once.
    let quick = Instant::now();
    assert_eq!(redis_cli(ports[2], &["INCR", a]), "2");
    assert!(quick.elapsed() < Duration::from_secs(2));
    assert_eq!(redis_cli(ports[2], &["MGET", a, b]), "2\nx");
}

/// XREAD over streams in different partitions, and a blocking XREAD with `$` woken by an XADD
/// through another gateway (only the entry added after it blocked is returned). Ports 15640–15642
/// (RESP), 15740–15742 (E-Cast), 15650–15652 (routers).
#[test]
fn xread_across_partitions_and_blocking_xread_with_dollar() {
    let port = 15640;
    let mut cluster = PartitionedCluster::prepare("redis-xread", port, (3, 3, 3), |config| {
        config.partitions = PartitionMode::Skyros;
        for (index, router) in config.routers.iter_mut().enumerate() {
            router.address.set_port(port + 10 + index as u16);
        }
    });
    cluster.launch();
    assert!(cluster.wait_until_ready(Duration::from_secs(60)));
    let ports = cluster.client_ports.clone();
    let [a, b] = <[String; 2]>::try_from(spread(&cluster, "stream", 2)).unwrap();
    let (a, b) = (a.as_str(), b.as_str());
    assert_eq!(redis_cli(ports[0], &["XADD", a, "1-1", "f", "1"]), "1-1");
    assert_eq!(redis_cli(ports[1], &["XADD", a, "2-1", "f", "2"]), "2-1");
    assert_eq!(redis_cli(ports[2], &["XADD", b, "5-0", "g", "5"]), "5-0");
    assert_eq!(
        redis_cli(ports[0], &["XREAD", "STREAMS", a, b, "0", "0"]),
        format!("{a}\n1-1\nf\n1\n2-1\nf\n2\n{b}\n5-0\ng\n5")
    );
    assert_eq!(
        redis_cli(
            ports[1],
            &["XREAD", "COUNT", "1", "STREAMS", a, b, "1-1", "5-0"]
        ),
        format!("{a}\n2-1\nf\n2")
    );
    assert_eq!(
        redis_cli(ports[2], &["XREAD", "STREAMS", a, b, "$", "$"]),
        ""
    );
    // BLOCK with `$`: only what is added after it blocked, through another gateway.
    let adder = {
        let (port, key) = (ports[1], b.to_string());
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            redis_cli(port, &["XADD", &key, "6-0", "h", "6"])
        })
    };
    let started = Instant::now();
    assert_eq!(
        redis_cli(
            ports[0],
            &["XREAD", "BLOCK", "5000", "STREAMS", a, b, "$", "$"]
        ),
        format!("{b}\n6-0\nh\n6")
    );
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert_eq!(adder.join().unwrap(), "6-0");
    // An ID already behind the last entry answers at once; a timeout answers nil.
    let started = Instant::now();
    assert_eq!(
        redis_cli(ports[2], &["XREAD", "BLOCK", "0", "STREAMS", b, "5-0"]),
        format!("{b}\n6-0\nh\n6")
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    let started = Instant::now();
    assert_eq!(
        redis_cli(ports[2], &["XREAD", "BLOCK", "200", "STREAMS", a, "$"]),
        ""
    );
    assert!(started.elapsed() >= Duration::from_millis(200));
}
