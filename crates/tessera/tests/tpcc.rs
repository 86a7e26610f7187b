//! TPC-C runs unmodified on the cluster `tessera dev` starts (3 routers, 3 storage processes,
//! `vr` groups of 3: three partitions), through `tessera bench tpcc` (ports 35500–35799 only):
//! the specification's schema (DECIMAL, CHAR, TIMESTAMP, a table without a primary key) and a
//! reduced population loaded with COPY, then the five transactions at the standard mix from
//! terminals on every storage process, warehouses spread over the partitions, then clause
//! 3.3.2's consistency conditions 1–4 over the whole database. Each condition is a query a
//! lost or half-applied transaction would violate (a New-Order whose order-line inserts were
//! lost breaks 4; a Delivery whose delete survived without its update, 2 or 3; a Payment half
//! applied, 1); the checker's canary damages the database by hand and must see conditions 1
//! and 4 fail. Throughput is not asserted: it is measured by `bench/tpcc/run.sh`.

mod support;

use runtime::ecast::config::PartitionMode;
use std::process::Command;
use support::partitioned::PartitionedCluster;

#[test]
fn tpcc_runs_unmodified_and_keeps_its_consistency_conditions() {
    let cluster = PartitionedCluster::dev("tpcc", PartitionMode::Vr, 35500, 35560);
    let output = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["bench", "tpcc", "--hosts"])
        .arg("127.0.0.1:35560,127.0.0.1:35561,127.0.0.1:35562")
        .args(["--user", "tessera", "--dbname", "tessera"])
        .args([
            "--warehouses",
            "3",
            "--load",
            "--items",
            "1000",
            "--customers",
            "60",
        ])
        .args(["--terminals", "6", "--duration", "15", "--check"])
        .output()
        .expect("tessera bench tpcc runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stdout}");
    assert!(output.status.success(), "{stdout}\n{stderr}");
    // Without --no-placement, Tessera's tables are placed as Sprint places TPC-C.
    assert!(
        stdout.contains("tables placed by warehouse (load::PLACEMENT)"),
        "{stdout}"
    );
    // Every transaction type completed, none failed with an error (aborts are retried).
    let summary = stdout
        .lines()
        .find(|line| line.contains("tpmC"))
        .unwrap_or_else(|| panic!("no summary line: {stdout}"));
    assert!(summary.contains(", 0 errors"), "{summary}");
    for kind in [
        "new_order",
        "payment",
        "order_status",
        "delivery",
        "stock_level",
    ] {
        let line = stdout
            .lines()
            .find(|line| line.trim_start().starts_with(kind))
            .unwrap_or_else(|| panic!("no line for {kind}: {stdout}"));
        let done: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert!(done > 0, "no {kind} completed: {line}");
    }
    assert_eq!(stdout.matches(": holds").count(), 4, "{stdout}");

    // The checker's canary: a lost order line and a half-applied payment are caught.
    let damage = Command::new("psql")
        .args(["-h", "127.0.0.1", "-p", "35561", "-U", "tessera", "-X", "tessera"])
        .args(["-c", "DELETE FROM order_line WHERE ol_w_id = 1 AND ol_d_id = 1 AND ol_o_id = 5 AND ol_number = 1"])
        .args(["-c", "UPDATE warehouse SET w_ytd = w_ytd + 0.01 WHERE w_id = 2"])
        .output()
        .expect("psql runs");
    let damage_out = String::from_utf8_lossy(&damage.stdout);
    assert!(
        damage_out.contains("DELETE 1") && damage_out.contains("UPDATE 1"),
        "{damage_out}"
    );
    let checked = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["bench", "tpcc", "--hosts", "127.0.0.1:35562"])
        .args(["--user", "tessera", "--dbname", "tessera"])
        .args(["--warehouses", "3", "--terminals", "0", "--check"])
        .output()
        .expect("tessera bench tpcc runs");
    let checked_out = String::from_utf8_lossy(&checked.stdout);
    assert!(!checked.status.success(), "{checked_out}");
    assert!(
        checked_out.contains("condition 1: W_YTD = sum(D_YTD): VIOLATED"),
        "{checked_out}"
    );
    assert!(
        checked_out.contains("condition 4: sum(O_OL_CNT) = rows in ORDER-LINE: VIOLATED"),
        "{checked_out}"
    );
    assert_eq!(checked_out.matches(": holds").count(), 2, "{checked_out}");
    drop(cluster);
}
