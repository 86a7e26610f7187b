//! `READMODE snapshot` on real processes of `vr` partition groups (issue 19 item 3), ports
//! 13500–13999 only: a snapshot MGET over keys of several partitions reads one cut of the
//! multi-partition order, so an MSET over those keys (one E-Cast message through the routers)
//! is never seen half. Writers MSET every key to one fresh value; readers at `snapshot` MGET
//! them all and count the replies whose values differ. `READMODE` and INFO say `snapshot` is
//! served, and INFO's `tessera_bypass_snapshot_answered` shows the reads took the groups'
//! `PartitionOperation::Snapshot` path (not the `sequential` fallback).
//!
//! The canary (`TESSERA_CANARY_SNAPSHOT_ON_ARRIVAL`, debug builds only,
//! `PartitionCanary::SnapshotOnArrival`): each group runs the read where it is logged, whatever
//! its timestamp, so one group may have executed an MSET the other has not yet admitted; the
//! cut check must catch it.

mod support;

use resp::Value;

use runtime::ecast::config::PartitionMode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::partitioned::{info_counter, PartitionedCluster};
use support::{arguments, RespClient};

fn start(name: &str, port: u16, canary: bool) -> PartitionedCluster {
    assert!((13500..=13799).contains(&port), "ports 13500–13999 only");
    let mut cluster = PartitionedCluster::prepare(name, port, (3, 3, 3), |config| {
        config.partitions = PartitionMode::Vr;
    });
    if canary {
        cluster.storage_env.push((
            "TESSERA_CANARY_SNAPSHOT_ON_ARRIVAL".to_string(),
            "1".to_string(),
        ));
    }
    cluster.launch();
    assert!(
        cluster.wait_until_ready(Duration::from_secs(60)),
        "the cluster was not ready within 60 s"
    );
    cluster
}

/// Six keys, over at least two partitions.
fn keys(cluster: &PartitionedCluster) -> Vec<String> {
    let keys: Vec<String> = (0..6).map(|index| format!("cut{index}")).collect();
    let partitions: std::collections::BTreeSet<_> =
        keys.iter().map(|key| cluster.partition_of(key)).collect();
    assert!(partitions.len() >= 2, "6 keys in one partition");
    keys
}

fn snapshot_client(port: u16) -> RespClient {
    let mut client = RespClient::connect(port, Duration::from_secs(2)).unwrap();
    assert_eq!(
        client.call(&arguments(&["READMODE", "snapshot"])).unwrap(),
        Value::Simple("OK".into())
    );
    client
}

/// What a run saw.
struct Run {
    msets: u64,
    reads: u64,
    /// MGET replies whose values were not all equal: an MSET seen half.
    torn: u64,
    failed: u64,
    /// Over the gateways: snapshot reads answered by the groups at one timestamp, refused
    /// shares, reads that fell back to `sequential`.
    answered: u64,
    refusals: u64,
    fallbacks: u64,
}

/// Two MSET writers and three snapshot readers for `duration`.
fn run(cluster: &PartitionedCluster, duration: Duration) -> Run {
    let keys = keys(cluster);
    let ports = cluster.client_ports.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let (msets, reads, torn, failed) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let mut threads = Vec::new();
    for writer in 0..2u64 {
        let (keys, port, stop, msets, failed) = (
            keys.clone(),
            ports[writer as usize % ports.len()],
            stop.clone(),
            msets.clone(),
            failed.clone(),
        );
        threads.push(std::thread::spawn(move || {
            let mut client = RespClient::connect(port, Duration::from_secs(2)).unwrap();
            let mut counter = 0u64;
            while !stop.load(Ordering::Relaxed) {
                counter += 1;
                let value = format!("{writer}-{counter}");
                let mut words = vec!["MSET".to_string()];
                for key in &keys {
                    words.push(key.clone());
                    words.push(value.clone());
                }
                let words: Vec<&str> = words.iter().map(String::as_str).collect();
                match client.call(&arguments(&words)) {
                    Ok(Value::Simple(ok)) if ok == "OK" => {
                        msets.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    for reader in 0..3usize {
        let (keys, port, stop, reads, torn, failed) = (
            keys.clone(),
            ports[reader % ports.len()],
            stop.clone(),
            reads.clone(),
            torn.clone(),
            failed.clone(),
        );
        threads.push(std::thread::spawn(move || {
            let mut client = snapshot_client(port);
            let mut words = vec!["MGET"];
            words.extend(keys.iter().map(String::as_str));
            while !stop.load(Ordering::Relaxed) {
                match client.call(&arguments(&words)) {
                    Ok(Value::Array(values)) if values.len() == keys.len() => {
                        reads.fetch_add(1, Ordering::Relaxed);
                        if values.windows(2).any(|pair| pair[0] != pair[1]) {
                            torn.fetch_add(1, Ordering::Relaxed);
                            eprintln!("torn snapshot MGET: {values:?}");
                        }
                    }
                    _ => {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    let started = Instant::now();
    while started.elapsed() < duration {
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().unwrap();
    }
    let sum = |name| {
        ports
            .iter()
            .map(|port| info_counter(*port, name))
            .sum::<u64>()
    };
    Run {
        msets: msets.load(Ordering::Relaxed),
        reads: reads.load(Ordering::Relaxed),
        torn: torn.load(Ordering::Relaxed),
        failed: failed.load(Ordering::Relaxed),
        answered: sum("tessera_bypass_snapshot_answered"),
        refusals: sum("tessera_snapshot_refusals"),
        fallbacks: sum("tessera_bypass_snapshot_fallbacks"),
    }
}

fn report(label: &str, run: &Run) {
    eprintln!(
        "{label}: {} MSETs, {} snapshot MGETs ({} torn), {} failed; gateways: {} answered by \
         the groups at one timestamp, {} refused shares, {} fell back to sequential",
        run.msets, run.reads, run.torn, run.failed, run.answered, run.refusals, run.fallbacks
    );
}

#[test]
fn snapshot_reads_of_vr_partition_groups_never_see_an_mset_half() {
    let cluster = start("snapcut", 13500, false);
    let mut client = snapshot_client(cluster.client_ports[0]);
    assert_eq!(
        client.call(&arguments(&["READMODE"])).unwrap(),
        Value::Simple("snapshot".into()),
        "READMODE snapshot is served as snapshot"
    );
    let run = run(&cluster, Duration::from_secs(8));
    report("snapshot", &run);
    assert_eq!(run.torn, 0, "a snapshot MGET saw an MSET half");
    assert!(run.msets >= 20 && run.reads >= 50, "too little raced");
    assert!(
        run.answered >= run.reads / 2,
        "the reads did not take the groups' snapshot path"
    );
}

#[test]
fn the_cut_check_catches_snapshot_reads_run_on_arrival() {
    // 13530: the other test's cluster (13500) takes 13500–13502, 13600–13602 (E-Cast) and
    // 13700–13702 (routers), and the two tests run at once.
    let cluster = start("snapcut-canary", 13530, true);
    let run = run(&cluster, Duration::from_secs(8));
    report("canary", &run);
    assert!(
        run.torn > 0,
        "with snapshot reads run where they are logged, the cut check must fail"
    );
}
