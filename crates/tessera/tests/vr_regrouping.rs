//! Rubberband over `vr` partitions above replication 1 in real processes (ports 16400–16999
//! only): 3 E-Cast routers, 6 storage processes, replication 3, 4 of them on the ring and 2
//! standbys — a `tessera dev --protocol vr --nodes 6 --replication 3 --active 4` cluster. The
//! routers route to groups named by (arc, version) (`ecast::RouterState::grouped`); a keyspace
//! change retires the groups whose arc or members change and starts new ones on their new
//! members, which install the retired groups' copies through their own logs
//! (`runtime::ecast::partition_host`; docs/internals/rubberband.md, "Replication f > 1").
//! (a) under checked clients (bypass singles and routed multi-partition commands on the first
//! two processes' gateways), expand (a standby joins the ring), contract (process 1 leaves it),
//! replace (process 2 by the other standby) and rebalance (process 4 moves back): every change completes at the expected
//! version, the history is linearisable, every preloaded key reads back, every probe SET
//! through a gateway that learns configurations late reads back, groups were started and
//! retired groups stopped. Its canary (`TESSERA_CANARY_ACT_BEFORE_INSTALL`: a started group
//! executes before its copies are installed) must fail it. (b) Forged group deliveries take no
//! storage process down.

mod support;

use std::time::Duration;
use support::partitioned::{preload, PartitionedCluster};
use support::rubberband::{
    check_preload, expect_caught, probe, regrouped_counts, start_load, start_regrouped, Elasticity,
    PADDING, PRELOAD,
};

fn start(name: &str, port: u16, storage_env: &[(&str, &str)]) -> PartitionedCluster {
    assert!((16400..=16700).contains(&port), "ports 16400–16999 only");
    start_regrouped(name, port, storage_env)
}

/// Expand, contract, replace, rebalance under load; Err: preloaded keys or probe SETs lost (a canary's
/// run must end here or panic in the checks).
fn regrouping(name: &str, port: u16, storage_env: &[(&str, &str)]) -> Result<Elasticity, String> {
    let cluster = start(name, port, storage_env);
    preload(cluster.client_ports[0], PRELOAD, PADDING);
    let mut load = start_load(cluster.client_ports[..2].to_vec());
    let (stale, fresh) = (cluster.client_ports[2], cluster.client_ports[3]);
    let mut lost = Vec::new();
    let mut change = |words: &[&str], round: usize| {
        let output = cluster.admin_ok(words);
        if let Err(reason) = probe(stale, fresh, round) {
            eprintln!("{reason}");
            lost.push(reason);
        }
        output
    };
    std::thread::sleep(Duration::from_millis(500));
    let expanded = change(&["expand"], 1);
    assert!(
        expanded.contains("done: configuration version 1"),
        "{expanded}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let contracted = change(&["contract", "--process", "1"], 2);
    assert!(
        contracted.contains("done: configuration version 2"),
        "{contracted}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let replaced = change(&["replace", "--process", "2", "--with", "6"], 3);
    assert!(
        replaced.contains("done: configuration version 3"),
        "{replaced}"
    );
    let (version, processes) = cluster.admin_status();
    assert_eq!(version, 3);
    assert_eq!(processes[&1][1], "standby", "{processes:?}");
    assert_eq!(processes[&2][1], "standby", "{processes:?}");
    for id in [3, 4, 5, 6] {
        assert_eq!(processes[&id][1], "active", "{processes:?}");
    }
    // Move process 4's identifier back by 2^60 (its arc and its predecessor's change; the
    // members stay: both groups are retired and started under the same members).
    let identifier: u64 = processes[&4][2].parse().unwrap();
    let to = (identifier - (1u64 << 60)).to_string();
    std::thread::sleep(Duration::from_millis(300));
    let rebalanced = change(&["rebalance", "--process", "4", "--to", &to], 4);
    assert!(
        rebalanced.contains("done: configuration version 4"),
        "{rebalanced}"
    );
    let (version, processes) = cluster.admin_status();
    assert_eq!(version, 4);
    assert_eq!(processes[&4][2], to, "{processes:?}");
    // Retired groups stop once their copies are acknowledged (2 s after).
    std::thread::sleep(Duration::from_secs(3));
    let counts = regrouped_counts(&cluster);
    let checked = check_preload(cluster.client_ports[0]);
    load.stop_and_read_back(&[cluster.client_ports[0]]);
    let completed = load.completed();
    eprintln!("{completed} operations completed");
    assert!(completed > 200, "only {completed} operations completed");
    load.check();
    checked?;
    if !lost.is_empty() {
        return Err(lost.join("; "));
    }
    assert!(
        counts.installs >= 3,
        "only {} copies installed",
        counts.installs
    );
    assert!(
        counts.stopped >= 3,
        "only {} retired replicas stopped",
        counts.stopped
    );
    Ok(Elasticity {
        installs: counts.installs,
        moved: counts.moved,
        completed,
        counters: Default::default(),
    })
}

#[test]
fn a_replication_3_vr_cluster_expands_contracts_and_replaces_under_load_losing_nothing() {
    regrouping("vrrg-elastic", 16400, &[]).unwrap();
}

/// The canary: started groups execute before their copies are installed.
#[test]
fn the_checks_catch_a_started_group_that_acts_before_its_install() {
    expect_caught("acting before the install, replication 3", || {
        let canary = [("TESSERA_CANARY_ACT_BEFORE_INSTALL", "1")];
        regrouping("vrrg-canary", 16700, &canary)
    });
}

/// Forged group deliveries (`Frame::GroupDeliver`) take no storage process down and cut no
/// group: a group whose name fits no destination id, one with members outside the cluster, a
/// keyspace message with no groups, with groups of one version only, and one out of the
/// group's chain (groups no sequence of configurations makes: `Regrouping::try_between`'s
/// unit test).
#[test]
fn forged_group_deliveries_take_no_storage_process_down() {
    use ecast::{Delivery, Envelope, Sequence, Timestamp};
    use placement::ecast::{Message as Routing, Target};
    use placement::{
        ConfigVersion, Group, GroupName, Groups, Planner, Position, ProcessId, Transformation,
    };
    use runtime::ecast::link::Frame;
    use support::partitioned::redis_cli;
    use vr::ReplicaIndex;
    let mut cluster = start("vrrg-forged", 16450, &[]);
    assert_eq!(
        redis_cli(cluster.client_ports[0], &["SET", "kept", "1"]).trim(),
        "OK"
    );
    let processes = cluster.config.initial_configuration();
    let before = Groups::initial(&processes);
    let message = Planner::default()
        .propose(
            &processes,
            Transformation::Expand {
                process: ProcessId(5),
                identifier: Position(1 << 40),
            },
        )
        .unwrap();
    let next = placement::message::apply(&processes, &message).unwrap();
    let after = before.follow(&next);
    let delivery = |routing: Routing| Delivery {
        timestamp: Timestamp(u64::MAX),
        previous: Timestamp(u64::MAX - 1),
        version: ConfigVersion(1),
        envelope: Envelope {
            sender: ProcessId(77),
            sequence: Sequence(1),
            planned_at: ConfigVersion(0),
            routing,
            payload: vec![0xa5; 64],
        }
        .into(),
    };
    let keyspace = delivery(Routing::Config {
        sender: ProcessId(77),
        message: message.clone(),
    });
    let write = delivery(Routing::Write {
        sender: ProcessId(77),
        target: Target::Points(vec![Position(1)]),
    });
    let real = before.groups()[0].clone();
    let mut unnameable = real.clone();
    unnameable.name = GroupName {
        owner: ProcessId(1 << 40),
        born: ConfigVersion(3),
    };
    let mut outsiders = real.clone();
    outsiders.name.born = ConfigVersion(9);
    outsiders.members = vec![ProcessId(1), ProcessId(77), ProcessId(2)];
    let deliver =
        |group: &Group, deliveries: Vec<Delivery>, groupings: Vec<Groups>| Frame::GroupDeliver {
            group: group.clone(),
            router: ReplicaIndex(0),
            deliveries,
            groupings,
        };
    let frames = [
        deliver(&unnameable, vec![write.clone()], vec![]),
        deliver(&outsiders, vec![write.clone()], vec![]),
        deliver(&real, vec![keyspace.clone()], vec![]),
        deliver(
            &real,
            vec![keyspace.clone()],
            vec![after.clone(), after.clone()],
        ),
        deliver(
            &real,
            vec![keyspace.clone()],
            vec![before.clone(), before.clone()],
        ),
        // Real groups, but out of the group's chain (its `previous` was never delivered).
        deliver(
            &real,
            vec![keyspace.clone()],
            vec![before.clone(), after.clone()],
        ),
    ];
    cluster.forge_to_every_storage(&frames);
    assert_eq!(
        redis_cli(cluster.client_ports[3], &["GET", "kept"]).trim(),
        "1"
    );
    // No group was cut: a keyspace change still plans against version 0 and completes.
    let expanded = cluster.admin_ok(&["expand"]);
    assert!(
        expanded.contains("done: configuration version 1"),
        "{expanded}"
    );
    assert_eq!(
        redis_cli(cluster.client_ports[4], &["GET", "kept"]).trim(),
        "1"
    );
}
