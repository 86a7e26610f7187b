//! Rubberband over `skyros` partitions in real processes (ports 18000–18499 only): a `skyros`
//! cluster at replication 1 (every storage process a one-member Skyros group of its own,
//! standbys included; `runtime::ecast::partition_host`), 3 E-Cast routers, reconfigured with
//! `tessera admin` while checked clients run: single-partition SETs go on the bypass as Skyros
//! nilext writes (acknowledged before they are ordered when the nilext gate allows), other
//! single-partition commands as ordered requests, multi-partition ones through E-Cast.
//! (a) the elasticity run of `support::rubberband` (expand twice, rebalance, contract twice,
//! replace, leave): every change completes, the history is linearisable, every preloaded key
//! keeps its value, the contracted groups end up empty, and SETs took the fast path;
//! (b) its canaries: a receiving group that acts before its installs
//! (`TESSERA_CANARY_ACT_BEFORE_INSTALL`), and a nilext gate that ignores keyspace cuts
//! (`TESSERA_CANARY_GATE_IGNORES_CUTS`: a SET to a key its group gave away is acknowledged,
//! then answered `Moved` where it executes: lost) must fail it. (Above replication 1 a `skyros`
//! cluster regroups like a `vr` one: `skyros_regrouping.rs`.)

mod support;

use runtime::ecast::config::PartitionMode;
use support::rubberband::{elasticity, expect_caught, Elasticity};

/// The elasticity run of `support::rubberband` on a `skyros` cluster.
fn elasticity_skyros(name: &str, port: u16, env: &[(&str, &str)]) -> Result<Elasticity, String> {
    assert!((18000..=18290).contains(&port), "ports 18000–18499 only");
    elasticity(name, port, PartitionMode::Skyros, env)
}

#[test]
fn a_replication_1_skyros_cluster_expands_rebalances_and_contracts_under_load_losing_nothing() {
    let report = elasticity_skyros("skyrb-elastic", 18000, &[]).unwrap();
    // SETs completed on the fast path (acknowledged before ordering) during the run, and the
    // gate refused some (a pending cut, a key moved away, a conflicting pending request).
    let fast = report.counters["tessera_bypass_nilext_fast"];
    let refused = report.counters["tessera_skyros_nilext_refused"];
    assert!(fast > 0, "no SET took the fast path: {report:?}");
    assert!(refused > 0, "the nilext gate refused nothing: {report:?}");
}

/// A receiving group executes before its copies are installed: a GET of a preloaded key that
/// moved reads nothing, and a write there is overwritten by the copy.
#[test]
fn the_checks_catch_a_receiving_skyros_group_that_acts_before_its_install() {
    expect_caught("acting before the install", || {
        let canary = [("TESSERA_CANARY_ACT_BEFORE_INSTALL", "1")];
        elasticity_skyros("skyrb-act", 18030, &canary)
    });
}

/// The nilext gate ignores cuts (G3): a gateway that has not learnt the new configuration
/// sends a SET to the group that gave the key away, which acknowledges it before ordering it
/// and then answers it `Moved` (not executed, not in the copy): a completed write is lost.
#[test]
fn the_checks_catch_a_nilext_gate_that_ignores_keyspace_cuts() {
    expect_caught("the nilext gate ignores cuts", || {
        let canary = [("TESSERA_CANARY_GATE_IGNORES_CUTS", "1")];
        elasticity_skyros("skyrb-g3", 18060, &canary)
    });
}
