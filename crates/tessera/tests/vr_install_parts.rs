//! A copy logged in many parts in real processes (ports 16060–16263 only): a `vr` cluster at
//! replication 3 (3 active storage processes and a standby) with a tiny `install_part_bytes`,
//! so that the copies a replacement moves are logged in dozens of `InstallPart`s each
//! (`docs/internals/rubberband.md`, "Copies in bounded parts"). The regression it guards: a
//! copy logged as one VR operation whose `Prepare` exceeded the link's frame limit never
//! installed, and the replacement never ended (`bench/sprint/recovery.sh`, 86 MB copies; here
//! the part size stands in for the limit, with a few MB of data).

mod support;

use resp::Value;
use runtime::ecast::config::PartitionMode;
use std::time::Duration;
use support::partitioned::{preload, preload_key, preload_value, PartitionedCluster};
use support::{arguments, psql, RespClient};

const PORT: u16 = 16060;
const PG_PORT: u16 = 16070;
const KEYS: usize = 12_000;
const PADDING: usize = 100;
const ROWS: usize = 2_000;
const PART_BYTES: u64 = 16 << 10;

/// Every preloaded key read back through `port` with MGETs of 100; the wrong ones.
fn wrong_keys(port: u16) -> Vec<String> {
    let mut client = RespClient::connect(port, Duration::from_secs(5)).unwrap();
    let mut wrong = Vec::new();
    for batch in (0..KEYS).collect::<Vec<_>>().chunks(100) {
        let keys: Vec<String> = batch.iter().map(|index| preload_key(*index)).collect();
        let mut words = vec!["MGET"];
        words.extend(keys.iter().map(String::as_str));
        let values = match client.call(&arguments(&words)) {
            Ok(Value::Array(values)) => values,
            other => {
                wrong.push(format!("MGET answered {other:?}"));
                continue;
            }
        };
        for ((index, key), value) in batch.iter().zip(&keys).zip(values) {
            if value != Value::Bulk(preload_value(*index, PADDING).into_bytes()) {
                wrong.push(key.clone());
            }
        }
    }
    wrong
}

/// The number of parts of every copy the storage logs say was installed.
fn installed_parts(logs: &str) -> Vec<u64> {
    logs.lines()
        .filter(|line| line.contains("installed the copy of version"))
        .filter_map(|line| {
            let (_, tail) = line.split_once(" (")?;
            tail.split_once(" parts of at most")?.0.parse().ok()
        })
        .collect()
}

#[test]
fn a_replacement_whose_copies_take_many_parts_completes_and_loses_nothing() {
    let mut cluster = PartitionedCluster::prepare("install-parts", PORT, (3, 4, 3), |config| {
        config.partitions = PartitionMode::Vr;
        config.install_part_bytes = PART_BYTES;
        *config = config
            .clone()
            .with_active(3)
            .unwrap()
            .with_pg_ports(PG_PORT)
            .unwrap();
    });
    cluster.launch();
    assert!(
        cluster.wait_until_ready(Duration::from_secs(30)),
        "the cluster was not ready within 30 s"
    );
    let port = cluster.client_ports[0];
    preload(port, KEYS, PADDING);
    let pg = PG_PORT;
    let created = psql(pg, &["CREATE TABLE big (id int PRIMARY KEY, v text)"]);
    assert!(!created.contains("ERROR"), "{created}");
    for batch in (0..ROWS).collect::<Vec<_>>().chunks(250) {
        let values: Vec<String> = batch
            .iter()
            .map(|id| format!("({id}, '{}')", "r".repeat(200)))
            .collect();
        let insert = format!("INSERT INTO big VALUES {}", values.join(", "));
        let inserted = psql(pg, &[&insert]);
        assert!(!inserted.contains("ERROR"), "{inserted}");
    }
    // Storage 2 dies; the standby (4) replaces it: every group regroups and the started
    // groups receive their copies (about a third of the data each) in 16 KiB parts.
    cluster.kill_storage(1);
    let replaced = cluster.admin_ok(&["replace", "--process", "2"]);
    // (Its version depends on whether the routers' suspicion of 2 was logged first.)
    assert!(
        replaced.contains("done: configuration version"),
        "{replaced}"
    );
    let parts = installed_parts(&cluster.all_storage_logs());
    eprintln!("{replaced}\ninstalled copies' parts: {parts:?}");
    assert!(
        parts.iter().any(|parts| *parts > 10),
        "no copy was installed in more than 10 parts: {parts:?}"
    );
    let wrong = wrong_keys(port);
    assert!(
        wrong.is_empty(),
        "{} of {KEYS} keys lost or wrong, e.g. {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
    let rows = psql(pg, &["SELECT count(*), sum(id), sum(length(v)) FROM big"]);
    let expected = format!("{ROWS}|{}|{}", ROWS * (ROWS - 1) / 2, ROWS * 200);
    assert_eq!(rows, expected, "every row is readable");
}
