//! Rubberband over `skyros` partitions above replication 1 in real processes (ports
//! 18100–18499 only): 3 E-Cast routers, 6 storage processes, replication 3, 4 of them on the
//! ring and 2 standbys — a `tessera dev --protocol skyros --nodes 6 --replication 3 --active 4`
//! cluster. As for `vr` (`vr_regrouping.rs`, the same scenario from `support::rubberband`) the
//! routers route to groups named by (arc, version) and a keyspace change retires the groups
//! whose arc or members change and starts new ones; here every group runs
//! `vr::Protocol::Skyros`, so a single-partition SET on the bypass is a nilext write to every
//! member of its (version 0) group, acknowledged before it is ordered when the nilext gate
//! allows (docs/internals/rubberband.md, "Skyros partitions above replication 1").
//! (a) expand, contract, replace, rebalance under checked clients: every change completes at
//! the expected version, the history is linearisable, every preloaded key and every probe SET
//! reads back, groups were started and retired groups stopped, and SETs completed on the fast
//! path; (b) its canaries: a started group that acts before its installs
//! (`TESSERA_CANARY_ACT_BEFORE_INSTALL`), and a nilext gate that ignores keyspace cuts
//! (`TESSERA_CANARY_GATE_IGNORES_CUTS`: a retired group's primary acknowledges a SET to a key it
//! gave away, which then executes as `Moved`: lost) must fail it.

mod support;

use runtime::ecast::config::PartitionMode;
use support::rubberband::{self, expect_caught, Elasticity};

/// The regrouping run of `support::rubberband` on a `skyros` cluster.
fn regrouping(name: &str, port: u16, storage_env: &[(&str, &str)]) -> Result<Elasticity, String> {
    // Each run takes `port`..+6, +100..+106 and +200..+203; skyros_rubberband.rs's take
    // 18000–18003, 18100–18103, 18130–18133, … (every 30), so these start at 18110, 18140,
    // 18170.
    assert!((18100..=18290).contains(&port), "ports 18100–18499 only");
    rubberband::regrouping(name, port, PartitionMode::Skyros, storage_env)
}

#[test]
fn a_replication_3_skyros_cluster_expands_contracts_replaces_and_rebalances_under_load_losing_nothing(
) {
    let report = regrouping("skyrg-elastic", 18110, &[]).unwrap();
    // SETs completed on the fast path: acknowledged by all 3 members of their group (the
    // supermajority at f = 1) before the primary ordered them.
    let fast = report.counters["tessera_bypass_nilext_fast"];
    assert!(fast > 0, "no SET took the fast path: {report:?}");
}

/// Started groups execute before their copies are installed.
#[test]
fn the_checks_catch_a_started_skyros_group_that_acts_before_its_install() {
    expect_caught("acting before the install, skyros at replication 3", || {
        let canary = [("TESSERA_CANARY_ACT_BEFORE_INSTALL", "1")];
        regrouping("skyrg-act", 18140, &canary)
    });
}

/// The nilext gate ignores cuts (G3): the probe's gateway, which learns a new configuration
/// only from its own commands, sends a SET to the retired group that gave the key away; its
/// primary acknowledges it before ordering it (and the other members do), then it executes
/// after the cut as `Moved`: a completed write is lost.
#[test]
fn the_checks_catch_a_nilext_gate_that_ignores_keyspace_cuts_at_replication_3() {
    expect_caught("the nilext gate ignores cuts, replication 3", || {
        let canary = [("TESSERA_CANARY_GATE_IGNORES_CUTS", "1")];
        regrouping("skyrg-g3", 18170, &canary)
    });
}
