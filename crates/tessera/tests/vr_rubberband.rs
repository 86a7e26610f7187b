//! Rubberband over `vr` partitions in real processes (ports 16000–16399 only): a `vr` cluster
//! at replication 1 (every storage process a one-member VR group of its own, standbys
//! included; `runtime::ecast::partition_host`), 3 E-Cast routers, reconfigured with
//! `tessera admin` while checked clients run.
//! (a) expand from one active process to three, rebalance, contract back to one, replace the
//! last one by a standby and let another standby leave, under load (the scenario is
//! `support::rubberband`'s, shared with `skyros_rubberband.rs`): every change completes, the
//! history (single-partition operations on the bypass, multi-partition ones through E-Cast) is
//! linearisable, every preloaded key keeps its value, every SET of the probe through a gateway
//! that learns configurations late reads back, and the contracted groups end up empty. The storage processes run with
//! `TESSERA_TEST_COPY_DELAY_MS` (a cut's copies leave the sender only 300 ms after the cut), so
//! the receiving groups defer for a while each time. Its canary
//! (`TESSERA_CANARY_ACT_BEFORE_INSTALL`: a receiving group executes before its installs) must
//! fail it;
//! (b) forged copy frames change nothing. (Above replication 1 a `vr` cluster reconfigures
//! too, by groups named by (arc, version): `vr_regrouping.rs`.)

mod support;

use resp::Value;
use runtime::ecast::config::PartitionMode;
use std::time::Duration;
use support::partitioned::PartitionedCluster;
use support::rubberband::{self, elasticity, expect_caught};
use support::{arguments, RespClient};

/// `storage` processes of which the first `active` are on the ring, replication 1, `vr`
/// partitions (`support::rubberband::start`).
fn start(name: &str, port: u16, storage: u64, active: u64) -> PartitionedCluster {
    assert!((16000..=16290).contains(&port), "ports 16000–16399 only");
    rubberband::start(name, port, PartitionMode::Vr, (storage, active), &[])
}

/// The elasticity run of `support::rubberband` on a `vr` cluster.
fn elasticity_vr(
    name: &str,
    port: u16,
    env: &[(&str, &str)],
) -> Result<rubberband::Elasticity, String> {
    assert!((16000..=16290).contains(&port), "ports 16000–16399 only");
    elasticity(name, port, PartitionMode::Vr, env)
}

#[test]
fn a_replication_1_vr_cluster_expands_rebalances_and_contracts_under_load_losing_nothing() {
    elasticity_vr("vrrb-elastic", 16000, &[]).unwrap();
}

/// The canary: receiving groups execute before their copies are installed. A GET of a
/// preloaded key that moved reads nothing, and a write there is overwritten by the copy: the
/// history check or the data check must fail.
#[test]
fn the_checks_catch_a_receiving_group_that_acts_before_its_install() {
    expect_caught("acting before the install", || {
        let canary = [("TESSERA_CANARY_ACT_BEFORE_INSTALL", "1")];
        elasticity_vr("vrrb-canary", 16030, &canary)
    });
}

/// Forged and malformed copy frames (`Frame::PartitionCopy`, `Frame::PartitionInstalled`) take
/// no storage process down and change no data: a zero or huge part count, a part past the
/// count, a whole copy for a version the group never cut and from a group that does not
/// exist, an acknowledgement of a copy nobody sent.
#[test]
fn forged_copy_frames_take_no_storage_process_down_and_change_nothing() {
    use placement::{ConfigVersion, ProcessId};
    use runtime::ecast::link::{self, Frame};
    use std::io::Write;
    use std::net::TcpStream;
    let cluster = start("vrrb-forged", 16090, 2, 2);
    let port = cluster.client_ports[0];
    let mut client = RespClient::connect(port, Duration::from_secs(1)).unwrap();
    assert_eq!(
        client.call(&arguments(&["SET", "before", "1"])).unwrap(),
        Value::Simple("OK".into())
    );
    // `PartitionStore::export`'s encoding (postcard) of one record: before = forged.
    let mut records = vec![1, 6];
    records.extend(b"before");
    records.push(6);
    records.extend(b"forged");
    let copy = |version: u64, from: u64, to: u64, part: u32, parts: u32, records: Vec<u8>| {
        Frame::PartitionCopy {
            version: ConfigVersion(version),
            from: ProcessId(from),
            to: ProcessId(to),
            part,
            parts,
            records,
        }
    };
    let forged = [
        copy(1, 2, 1, 0, 0, records.clone()),
        copy(1, 2, 1, 0, u32::MAX, records.clone()),
        copy(1, 2, 1, 5, 2, records.clone()),
        copy(1, 2, 1, 0, 1, vec![0xff; 64]),
        // Whole copies for versions group 1 never cut, from a real and a made-up group.
        copy(9, 2, 1, 0, 1, records.clone()),
        copy(0, 77, 1, 0, 1, records.clone()),
        copy(0, 2, 77, 0, 1, records.clone()),
        Frame::PartitionInstalled {
            version: ConfigVersion(3),
            from: ProcessId(1),
            to: ProcessId(2),
        },
        Frame::PartitionInstalled {
            version: ConfigVersion(u64::MAX),
            from: ProcessId(77),
            to: ProcessId(1),
        },
    ];
    let mut bytes = Vec::new();
    for frame in forged {
        bytes.extend(link::encode(&frame));
    }
    let mut stream = TcpStream::connect(cluster.config.storage[0].address).unwrap();
    stream.write_all(&bytes).unwrap();
    drop(stream);
    std::thread::sleep(Duration::from_millis(500));
    let mut client = RespClient::connect(port, Duration::from_secs(1)).unwrap();
    assert_eq!(
        client.call(&arguments(&["GET", "before"])).unwrap(),
        Value::Bulk(b"1".to_vec()),
        "a forged copy changed the data"
    );
    assert_eq!(
        client.call(&arguments(&["SET", "after", "2"])).unwrap(),
        Value::Simple("OK".into())
    );
}
