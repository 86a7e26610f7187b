//! The router-bypass mode (`--ecast --partitions vr`): partitions that are their own
//! replication groups, with `ecast::Partition`'s hold rule, and single-partition operations sent
//! straight to them (`docs/internals/ecast.md`, "Partitions with their own replication and a
//! router bypass"; `docs/TESTING.md`).
//!
//! What is modelled, and what is abstracted:
//!
//! - **Each partition's group is real replicas** (`groups`): three
//!   `vr::Replica<ecast::PartitionMachine>`s (one at replication 1 with Rubberband, as the
//!   runtime's one-member groups), running VR or, with `--partitions skyros`, Skyros, exchanging
//!   VR messages over the simulated network; the primary of a normal view runs
//!   `ecast::PrimaryDuty` — the runtime partition host's duty, the same code. Members crash
//!   (and restart recovering, VRR §4.3, as a diskless storage process does) or pause and come
//!   back after the others suspected them (a false suspicion); at most one member of a group
//!   fails at a time. A lost share answer is recalled with an `Answer` query (VR's read path
//!   abstracted: answered from the machine of a member that is a normal primary; an admitted
//!   share's answer never changes). A checker compares members that executed the same ops
//!   (`bypass_agreement`).
//! - **The router group is real replicas too** (`routers`, since stop 27): three
//!   `vr::Replica<ecast::RouterState>`s exchanging VR messages over the simulated network; the
//!   primary of a normal view runs the `ecast::Forwarder` and `ecast::WatermarkReporter`, as
//!   the runtime's router does. One router at a time crashes (restarting recovering) or pauses
//!   (a false suspicion); a new primary starts its own forwarder with a fresh client id.
//! - **Gateways** drive an `ecast::Gateway` built `with_watermark_gate` (rule A) and
//!   `with_bypass` (with regrouping at replication 3 and `with_skyros` for Skyros groups), as
//!   the runtime's gateways are: a transaction whose keys lie in one group of the
//!   configuration the gateway knows goes to that group's members as a lane's VR request
//!   (retried, re-targeted on `NotPrimary`, its result asked for when held, re-planned when
//!   `Moved`; a put to a Skyros group goes to every member as a nilext write and completes on
//!   a supermajority); any other goes through the routers as a VR client of their group (a
//!   retried Submit is deduplicated by the router state's sequence table); lost share answers
//!   are recalled from the partitions.
//!
//! - **Rubberband** (on 30 % of seeds): keyspace messages cut the groups' logs and copies move
//!   between groups. At replication 1 a group is a process's and keeps its name; at replication
//!   3 (half of those seeds) groups are named by (arc, version) (`placement::groups`): the
//!   routers run `RouterState::grouped`, a keyspace message retires the groups whose (arc,
//!   members) change and starts new ones, and a started group's node is made when the routers
//!   accept it (its members' storage processes starting their replicas), empty, with the
//!   message as its first entry.
//!
//! The workload is one object: a bank (transfers between accounts, audits of every account; the
//! total never changes) and registers (puts, gets, INCR-like read-and-add-1 on half the seeds,
//! and multi-key transactions that read some registers and write others, which give the
//! dependency chains of the second counterexample).
//! A transaction whose keys all live in one partition takes the bypass; any other goes through
//! the routers. Single-key gets read accounts too, so that bypass reads race transfers.

use super::bypass_checkers::{self, BypassOrder, Kind, Txn};
use crate::checkers::Violation;
use ecast::{
    Completion, Delivery, Gateway, GatewayCommand, GatewayEffect, GatewayInput, GatewaySettings,
    Grouping, Isolation, KeySet, PartitionCanary, PartitionData, PartitionMachine,
    PartitionMachineSettings, PartitionSettings, RouterSettings, RouterState, SenderSettings,
    Sequence, Timestamp, WatermarkInput,
};
use placement::ecast::{destset, Message as Routing, Target};
use placement::{
    ConfigVersion, Configuration, KeyMapping, Planner, Position, PositionSet, ProcessId, Regrouping,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use stdx::Prng;
use vr::{ClientId, Request};

#[path = "bypass_groups.rs"]
mod groups;
#[path = "bypass_routers.rs"]
mod routers;
#[path = "bypass_sql.rs"]
mod sql;
#[path = "bypass_statements.rs"]
mod statements;

pub use sql::SqlStats;
pub use statements::StatementStats;

/// Values read by a transaction, by key.
type Values = Vec<(u64, i64)>;

/// An answer part as partitions send it: a value of the key-value workload, or (the SQL mode) a
/// SQL statement's engine outcome bytes at its first part held, `None` at its other parts
/// (`cluster::partition_store`'s `Outcome::Foreign` and `Outcome::Ok`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Answer {
    Int(i64),
    Sql(Option<Vec<u8>>),
}

/// A partition's result: its answer parts.
type Answers = Vec<(u64, Answer)>;

fn int_answers(values: Values) -> Answers {
    values
        .into_iter()
        .map(|(key, value)| (key, Answer::Int(value)))
        .collect()
}

/// Gateways' process ids sit far above partitions'.
const GATEWAY_BASE: u64 = 1_000_000;
const FORWARDER_CLIENT_BASE: u64 = 0xf0f0_0000_0000_0000;
const GATEWAY_CLIENT_BASE: u64 = 0x6a7e_0000_0000_0000;
/// The replicated mode's bypass lanes: gateway g's lanes are VR clients
/// `LANE_CLIENT_BASE + g << LANE_GATEWAY_SHIFT + n`.
const LANE_CLIENT_BASE: u64 = 0x1a4e_0000_0000_0000;
const LANE_GATEWAY_SHIFT: u32 = 24;
/// A bypass lane's unanswered request is sent again this often (`BypassSettings::retry_ticks`).
const LANE_RETRY_TICKS: u64 = 40;
/// Skyros-Adapt at the gateways (`BypassOptions::skyros_adapt`): how often each gateway
/// re-decides its groups' modes, in ticks (the runtime's 200 ms at its 5 ms tick).
pub(super) const ADAPT_DECIDE_TICKS: u64 = 40;
/// A multi-partition answer missing this long after the gate opened is asked for again.
const RECALL_TICKS: u64 = 40;

/// The sequenced messages of `sequenced` (pending messages' `(sequence, timestamp, recall_at)`)
/// whose answers are due to be asked for again at `now`; each one's next recall is set.
pub(super) fn due_recalls<'a>(
    sequenced: impl Iterator<Item = &'a mut Option<(Sequence, Timestamp, u64)>>,
    now: u64,
) -> Vec<(Sequence, Timestamp)> {
    sequenced
        .filter_map(|sequenced| match sequenced {
            Some((sequence, timestamp, recall_at)) if *recall_at <= now => {
                *recall_at = now + RECALL_TICKS;
                Some((*sequence, *timestamp))
            }
            _ => None,
        })
        .collect()
}

/// A deliberately broken variant (hidden, test-only); each must be caught by a checker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BypassCanary {
    /// No rule H (`PartitionCanary::NoHold`).
    NoHold,
    /// `--snapshot-audits` on every seed, and each group runs a snapshot read where it is
    /// logged, whatever its timestamp (`PartitionCanary::SnapshotOnArrival`): one group may
    /// read after a transfer the other has not admitted yet, so a snapshot audit's cut is torn.
    SnapshotOnArrival,
    /// Rule H per message (`PartitionCanary::PerMessageHold`).
    PerMessageHold,
    /// No rule A: a gateway acknowledges a multi-partition transaction once it is stable
    /// (and answered), without waiting for the watermark to cover it.
    AckOnStable,
    /// The partition's driver ignores the E-Cast chain: every delivery is logged as if it
    /// followed the last one logged, so a lost delivery is skipped.
    ChainIgnored,
    /// A group that receives copies at a keyspace cut acts before they are installed
    /// (`PartitionMachineSettings::act_before_install`). Reconfigures on every seed.
    ActBeforeInstall,
    /// A group executes single-partition operations on keys its cut moved away
    /// (`PartitionMachineSettings::ignore_holdings`). Reconfigures on every seed.
    IgnoreHoldings,
    /// The partition groups' replicas commit an op as soon as their primary prepares it,
    /// without a quorum (`vr::Canary::CommitWithoutQuorum`): a crashed or deposed primary's
    /// last ops are lost by the view change after they were executed and answered. Crashes
    /// members often.
    GroupCommitWithoutQuorum,
    /// `skyros` partitions: the primary ignores the nilext gate (`vr::Canary::NilextGateIgnored`)
    /// and acknowledges every nilext write before ordering it, held or not.
    SkyrosGateIgnored,
    /// `skyros` partitions: the nilext gate ignores keyspace cuts (G3,
    /// `PartitionMachineSettings::gate_ignores_cuts`): a put to a key the group gave away, or
    /// one arriving while copies install, is acknowledged before it is ordered. Reconfigures
    /// on every seed.
    SkyrosGateIgnoresCuts,
    /// `skyros` partitions with Skyros-Comm: the primary previews a commutative write's result
    /// without checking that no pending update touches its keys
    /// (`vr::Canary::CommPreviewUnchecked`): an INCR behind a pending INCR of the same register
    /// completes with the stale value. The `--comm` workload on every seed.
    SkyrosCommUnchecked,
    /// A stopped replica answers nothing (no `group_lifecycle::Tombstone`): a gateway whose
    /// bypass request reaches a retired group only after its replicas stopped resends for
    /// ever (found by the simulator, stop 27). Reconfigures on every seed, replication 3.
    TombstoneSilent,
    /// A stopped replica does not acknowledge a copy resent to its group
    /// (`group_lifecycle::Tombstone::acknowledges_copy`): a sender that missed the running
    /// replica's one acknowledgement keeps the copy and never finishes (sim seed 2172). The
    /// options are the seed's own (rare: 10 of seeds 1..3,000 with `--sql-transactions`
    /// resend a copy to a stopped replica).
    TombstoneDeafToCopies,
    /// `--sql-transactions`, "commit on the first vote": COMMIT reaches only the partition of
    /// the first row the transaction touched, which commits alone; the other participants are
    /// told to abort.
    SqlCommitAtOneParticipant,
    /// `--sql-transactions`, "skip the execution-order rule": a transaction's reads take no
    /// lock and run as statements outside it, so nothing orders them against conflicting
    /// writers (the runtime's `TESSERA_CANARY_UNLOCKED_READS`).
    SqlUnlockedReads,
    /// `--sql-transactions`, "ignore incarnations": a group that receives rows at a keyspace
    /// cut does not receive the open transactions' locks and before-images with them (it is a
    /// new incarnation of those rows that knows nothing of the transactions), and nothing
    /// aborts those transactions: they go on, and commit or abort, as if the rows had not
    /// moved. Reconfigures on every seed.
    SqlIgnoreIncarnations,
    /// `--sql-transactions`, "skip the execution-order rule" (Sprint §4.1): no transaction
    /// ever becomes global (the gateway's `Globalize` is answered as granted without being
    /// sent), so the partitions never apply the rule and a cycle of waits across partitions
    /// (transfers in opposite directions) is a distributed deadlock nothing detects; only an
    /// abandoned-holder abort breaks it, hundreds of ticks later.
    SqlSkipExecutionOrder,
    /// `--sql-transactions`, "undo whole rows": an abort (or ROLLBACK TO) writes back the
    /// whole-row images of the rows it changed, over the columns other transactions changed
    /// under their own column locks meanwhile (stop 41's lost update).
    SqlWholeRowUndo,
    /// `--sql-transactions`, "undo increments by image": a blind increment (`bal = bal + k`,
    /// under an increment lock other increments share) is undone by its row's image on an
    /// abort, like any write, so the abort erases the increments other transactions made
    /// meanwhile (`store::Store::canary_increment_image`).
    SqlIncrementImage,
    /// `--sql-autocommit`, "one-phase autocommit writes": a statement outside transactions
    /// over several partitions goes in one message, as writes that cannot fail on the data
    /// did before intention locks were held only where the rows are. A partition where a
    /// transaction holds the table refuses it, the others run it, and sent again it runs
    /// twice there: a transfer's amount lands twice, and the balances' total moves.
    SqlOnePhaseAutocommit,
    /// `--sql-autocommit`, "pinned statements ignore rows": a statement outside transactions
    /// pinned to its rows is never kept out by a transaction's locks
    /// (`store::Store::canary_pinned_unjudged`), so an autocommit append writes a list a
    /// transaction holds, and the transaction's commit (its list as it read it) or abort
    /// (the list's before-image) erases it: a lost append.
    SqlPinnedIgnoresRows,
    /// `--sql-transactions`, "skip the suspicion's abort": a crashed gateway's suspicion
    /// (`store::abort_owned_operation`, one message to every partition) names an owner no
    /// transaction has, so the dead gateway's transactions keep their locks until a waiter
    /// judges them abandoned, hundreds of ticks later; a waiter refused for one of them by a
    /// message sent after the suspicion completed is the finding. Its crashed processes all
    /// stay down past their suspicion (a restarted one's new incarnation would abort them).
    SqlSkipSuspicionAbort,
    /// `--sql-transactions`, "ignore gateway incarnations": gateways send their table locks
    /// with the old owned message, which names the storage process only, the same for every
    /// incarnation (`store::owned_lock_operation`); a process restarted before its suspicion
    /// has its new incarnation's transactions taken for the old one's, which keep their locks
    /// until a waiter judges them abandoned; a waiter refused for one of them by a message
    /// sent after every partition answered the new incarnation's table lock is the finding.
    /// Its crashed processes all restart before they could be suspected.
    SqlIgnoreGatewayIncarnations,
    /// `--sql-statements`, "stale catalog": the catalog guard is not applied
    /// (`engine::Command::Guarded`), so a statement planned against a gateway's older cached
    /// catalog runs as planned (an insert with an old default, a read of the old columns).
    SqlStaleCatalog,
    /// SQL modes, "read jobs read the live state": a read job's results are computed when
    /// they come back, from the data as it is then, not from the copy taken at the reads'
    /// place in the log (`PartitionMachineSettings::job_reads_live`). `--sql-statements`,
    /// jobs always delayed.
    SqlJobReadsLive,
}

#[derive(Clone, Debug)]
pub struct BypassOptions {
    pub seed: u64,
    /// Partitions on the ring, 3–5, each one destination (its own group).
    pub partitions: u64,
    pub accounts: u64,
    pub registers: u64,
    pub gateways: usize,
    pub slots: usize,
    pub window_max: u64,
    pub loss_percent: u64,
    pub duplicate_percent: u64,
    pub delay_ticks_max: u64,
    /// One partition whose deliveries from the router take this much longer (0: none), so that
    /// the watermark lags behind individual messages' stability.
    pub slow_partition_ticks: u64,
    pub router_crash_per_10000: u64,
    pub partition_crash_per_10000: u64,
    /// Shares of the workload, in percent: single-key gets, puts, multi-key transactions,
    /// transfers; audits take the rest.
    pub get_percent: u64,
    pub put_percent: u64,
    pub txn_percent: u64,
    pub transfer_percent: u64,
    /// Read-modify-writes of one register (INCR: read it, add 1), from the share the other
    /// kinds leave to audits; drawn by a generator of its own (0 on half the seeds).
    pub incr_percent: u64,
    pub think_ticks_max: u64,
    pub fault_ticks: u64,
    pub liveness_ticks_max: u64,
    /// Partitions start at the ring positions of the first registers (one register each), so
    /// that register transactions span partitions (the per-message canary's shaping).
    pub spread_registers: bool,
    /// Rubberband over the partitions (`docs/internals/rubberband.md`, "Rubberband over `vr`
    /// partitions"): the chance per tick, while faults are on, that the nemesis submits a
    /// keyspace message (0: never), and the standby processes it may expand into.
    pub reconfigure_per_10000: u64,
    pub standbys: u64,
    /// Members per partition group: 1 (a group per process, named by it) or 3 (groups named by
    /// (arc, version), `placement::groups`: a keyspace message retires the groups whose (arc,
    /// members) change and starts new ones; the routers run `RouterState::grouped`). Drawn
    /// only on seeds that reconfigure.
    pub replication: u8,
    /// `skyros` partitions (`--partitions skyros`): the groups run Skyros and puts are nilext
    /// writes, acknowledged before they are ordered when the primary's nilext gate allows it.
    pub skyros: bool,
    /// `skyros` partitions with Skyros-Comm (`Gateway::with_skyros_comm`): a write that is
    /// not nilext goes to every member too, and completes in one round trip on the primary's
    /// preview. Drawn on half the seeds (it has an effect only with `skyros`).
    pub skyros_comm: bool,
    /// `skyros` partitions: Skyros-Adapt at the gateways (`Gateway::with_adapt`, deciding every
    /// `ADAPT_DECIDE_TICKS`), as the runtime's gateways run it: a group with a straggler sends
    /// its writes both ways at once (to every member, and to the primary as an ordinary write
    /// with the same request number). Drawn on half the Comm seeds.
    pub skyros_adapt: bool,
    /// The partition groups' VR heartbeat and primary timeout, in ticks.
    pub group_heartbeat_ticks: u64,
    pub group_timeout_ticks: u64,
    /// A copy is logged in parts of `INSTALL_PART_BYTES` (4) bytes, or in at most this many
    /// parts when it is larger (`bypass_groups::install_part_bytes`). `usize::MAX`: always
    /// 4-byte parts, the rule before the `--sql-transactions` liveness seeds (1171, …) were
    /// explained (`crates/sim/tests/bypass_sql.rs`).
    pub install_parts_max: usize,
    /// `--sql-transactions`: the groups host `cluster::partition_store::PartitionStore` and
    /// every slot runs interactive SQL transactions (`bypass_sql.rs`) instead of the
    /// key-value workload.
    pub sql_transactions: bool,
    /// `--sql-transactions`: whole gateway processes crash and are suspected (on with the
    /// mode; off under the mode's other canaries, whose schedules stay as they were measured).
    pub sql_gateway_crashes: bool,
    /// `--sql-autocommit` (with `--sql-transactions`): some slots run, instead of a
    /// transaction, one statement outside transactions over several partitions (a transfer
    /// between two rows, or a non-key update), sent in two phases as the runtime's gateway
    /// task sends every write over several partitions (`bypass_sql.rs`).
    pub sql_autocommit: bool,
    /// `--sql-statements`: the groups host the runtime's SQL partition data and every slot
    /// sends one-shot SQL statements (`bypass_statements.rs`) instead of the key-value
    /// workload.
    pub sql_statements: bool,
    /// SQL modes: the partition machines hand out read-only statements as read jobs
    /// (`PartitionMachineSettings::read_jobs`, as the runtime's); a member runs each one this
    /// many ticks at most after it is handed out (a seeded draw per job; 0: at once, right
    /// after the step that handed it out).
    pub read_job_delay_ticks_max: u64,
    /// `--snapshot-audits`: this percentage of the audits is sent at `Isolation::Snapshot`
    /// (`Kind::SnapshotAudit`: one `PartitionOperation::Snapshot` per group at one router
    /// timestamp), judged by the cut. 0 (the default): none, and every seed runs as before.
    pub snapshot_audit_percent: u64,
    pub canary: Option<BypassCanary>,
}

impl BypassOptions {
    pub fn from_seed(seed: u64) -> BypassOptions {
        let mut prng = Prng::new(seed ^ 0xb1a5_5b1a_55b1_a55b);
        let partitions = prng.range_inclusive(3, 5);
        let faulty = !prng.percent(10);
        let mut draw = |low: u64, high: u64| {
            let value = prng.range_inclusive(low, high);
            if faulty {
                value
            } else {
                0
            }
        };
        let loss_percent = draw(0, 15);
        let duplicate_percent = draw(0, 10);
        let router_crash_per_10000 = draw(0, 20);
        let partition_crash_per_10000 = draw(0, 20);
        let delay_ticks_max = prng.range_inclusive(1, 20);
        let slow_partition_ticks = if prng.percent(50) {
            prng.range_inclusive(20, 150)
        } else {
            0
        };
        let accounts = prng.range_inclusive(3, 6);
        let registers = prng.range_inclusive(3, 6);
        let gateways = prng.range_inclusive(2, 4) as usize;
        let slots = prng.range_inclusive(1, 3) as usize;
        let window_max = prng.range_inclusive(slots as u64, 8);
        let get_percent = prng.range_inclusive(20, 50);
        let put_percent = prng.range_inclusive(5, 20);
        let txn_percent = prng.range_inclusive(10, 25);
        let transfer_percent = prng.range_inclusive(5, 20);
        let think_ticks_max = prng.range_inclusive(0, 20);
        let fault_ticks = prng.range_inclusive(800, 1_800);
        BypassOptions {
            seed,
            partitions,
            accounts,
            registers,
            gateways,
            slots,
            window_max,
            loss_percent,
            duplicate_percent,
            delay_ticks_max,
            slow_partition_ticks,
            router_crash_per_10000,
            partition_crash_per_10000,
            get_percent,
            put_percent,
            txn_percent,
            transfer_percent,
            incr_percent: 0,
            think_ticks_max,
            fault_ticks,
            liveness_ticks_max: 8_000,
            spread_registers: false,
            reconfigure_per_10000: 0,
            standbys: 0,
            replication: 1,
            skyros: false,
            skyros_comm: false,
            skyros_adapt: false,
            group_heartbeat_ticks: 10,
            group_timeout_ticks: 100,
            install_parts_max: 8,
            sql_transactions: false,
            sql_gateway_crashes: false,
            sql_autocommit: false,
            sql_statements: false,
            read_job_delay_ticks_max: 0,
            snapshot_audit_percent: 0,
            canary: None,
        }
        .with_reconfiguration_drawn()
        .with_group_timing_drawn()
        .with_read_jobs_drawn()
    }

    /// Read jobs at once on a third of the seeds, else after up to 1–120 ticks (longer than
    /// many seeds' primary timeout, as a long scan would take): from a generator of its own.
    fn with_read_jobs_drawn(mut self) -> BypassOptions {
        let mut prng = Prng::new(self.seed ^ 0x4ead_0b5e_4ead_0b5e);
        self.read_job_delay_ticks_max = if prng.percent(33) {
            0
        } else {
            prng.range_inclusive(1, 120)
        };
        self
    }

    /// Reconfiguration on 30 % of seeds, drawn from a generator of its own so that every
    /// other seed runs exactly as before.
    fn with_reconfiguration_drawn(mut self) -> BypassOptions {
        let mut prng = Prng::new(self.seed ^ 0x7e1a_571c_0ba5_5e5e);
        if prng.percent(30) {
            self.reconfigure_per_10000 = prng.range_inclusive(10, 60);
            self.standbys = prng.range_inclusive(1, 3);
            self.replication = if prng.percent(50) { 3 } else { 1 };
        }
        self
    }

    /// The partition groups' VR timing, from a generator of its own (as reconfiguration).
    fn with_group_timing_drawn(mut self) -> BypassOptions {
        let mut prng = Prng::new(self.seed ^ 0x6a0f_7e11_9a0f_7e11);
        self.group_heartbeat_ticks = prng.range_inclusive(5, 15);
        self.group_timeout_ticks = self.group_heartbeat_ticks * prng.range_inclusive(4, 10);
        self.skyros_comm = prng.percent(50);
        let mut prng = Prng::new(self.seed ^ 0x1c2e_3a11_1c2e_3a11);
        if prng.percent(50) {
            self.incr_percent = prng.range_inclusive(5, 20);
        }
        // From a generator of its own, so that every other draw is what it was before.
        let mut prng = Prng::new(self.seed ^ 0xada9_7ada_97ad_a97a);
        self.skyros_adapt = self.skyros_comm && prng.percent(50);
        self
    }

    /// `--comm`: `skyros` partitions with Skyros-Comm on every seed, and a workload of mostly
    /// non-nilext single-register writes (INCR: read a register, add 1) among gets, puts,
    /// transactions and transfers, so that commutative writes meet pending updates of their
    /// keys often; Skyros-Adapt on half the seeds. Drawn from a generator of its own.
    pub fn with_comm_workload(mut self) -> BypassOptions {
        let mut prng = Prng::new(self.seed ^ 0xc0aa_c0aa_c0aa_c0aa);
        self.skyros = true;
        self.skyros_comm = true;
        self.skyros_adapt = prng.percent(50);
        self.get_percent = prng.range_inclusive(15, 30);
        self.put_percent = prng.range_inclusive(5, 15);
        self.txn_percent = prng.range_inclusive(5, 15);
        self.transfer_percent = prng.range_inclusive(0, 10);
        self.incr_percent = prng.range_inclusive(25, 45);
        self
    }

    /// Members per partition group in the replicated mode: three, as `tessera dev`'s fixed
    /// groups, except at replication 1 with Rubberband (a group per process, one member).
    pub fn group_members(&self) -> u8 {
        if self.reconfigure_per_10000 > 0 && self.replication == 1 {
            1
        } else {
            3
        }
    }

    /// The seed's options with `skyros` partitions.
    pub fn skyros(seed: u64) -> BypassOptions {
        let mut options = BypassOptions::from_seed(seed);
        options.skyros = true;
        options
    }

    /// The seed's options with SQL transactions.
    pub fn sql(seed: u64) -> BypassOptions {
        BypassOptions::from_seed(seed).with_sql_transactions()
    }

    /// The seed's options with SQL transactions and statements outside them.
    pub fn sql_autocommit(seed: u64) -> BypassOptions {
        BypassOptions::sql(seed).with_sql_autocommit()
    }

    /// Statements outside transactions beside them (`--sql-autocommit`).
    pub fn with_sql_autocommit(mut self) -> BypassOptions {
        self = self.with_sql_transactions();
        self.sql_autocommit = true;
        self
    }

    /// SQL transactions (`--sql-transactions`): the rows are the accounts and the registers
    /// (less contention than the key-value workload's few accounts), and faults last three
    /// times longer (a transaction is several messages, its first lock and its end each an
    /// E-Cast message to every partition).
    pub fn with_sql_transactions(mut self) -> BypassOptions {
        if !self.sql_transactions {
            self.sql_transactions = true;
            self.sql_gateway_crashes = true;
            self.accounts += self.registers;
            self.fault_ticks *= 3;
        }
        self
    }

    /// The seed's options with one-shot SQL statements.
    pub fn statements(seed: u64) -> BypassOptions {
        BypassOptions::from_seed(seed).with_sql_statements()
    }

    /// One-shot SQL statements (`--sql-statements`): the rows of each table are the accounts
    /// and the registers, and faults last twice as long (a non-key update is two messages to
    /// every partition).
    pub fn with_sql_statements(mut self) -> BypassOptions {
        if !self.sql_statements {
            self.sql_statements = true;
            self.accounts += self.registers;
            self.fault_ticks *= 2;
        }
        self
    }

    /// `--snapshot-audits`: between a third and all of the audits at `snapshot`, and at
    /// least a quarter of the workload audits (drawn from a generator of its own).
    pub fn with_snapshot_audits(mut self) -> BypassOptions {
        let mut prng = Prng::new(self.seed ^ 0x5a95_b07a_0d17);
        self.snapshot_audit_percent = prng.range_inclusive(34, 100);
        let others = self.get_percent
            + self.put_percent
            + self.txn_percent
            + self.transfer_percent
            + self.incr_percent;
        if others > 75 {
            self.get_percent = self.get_percent.saturating_sub(others - 75);
        }
        self.transfer_percent = self.transfer_percent.max(10);
        self
    }

    /// Whether the groups host SQL partition data (either SQL mode).
    fn sql_data(&self) -> bool {
        self.sql_transactions || self.sql_statements
    }

    pub fn canary(seed: u64, canary: BypassCanary) -> BypassOptions {
        let mut options = BypassOptions::from_seed(seed);
        options.canary = Some(canary);
        if canary == BypassCanary::SqlStaleCatalog {
            options = options.with_sql_statements();
        }
        if canary == BypassCanary::SqlJobReadsLive {
            options = options.with_sql_statements();
            options.read_job_delay_ticks_max = options.read_job_delay_ticks_max.max(40);
        }
        if canary == BypassCanary::SnapshotOnArrival {
            options = options.with_snapshot_audits();
        }
        if matches!(
            canary,
            BypassCanary::SqlCommitAtOneParticipant
                | BypassCanary::SqlUnlockedReads
                | BypassCanary::SqlIgnoreIncarnations
                | BypassCanary::SqlSkipExecutionOrder
                | BypassCanary::SqlSkipSuspicionAbort
                | BypassCanary::SqlIgnoreGatewayIncarnations
                | BypassCanary::SqlWholeRowUndo
                | BypassCanary::SqlIncrementImage
                | BypassCanary::SqlOnePhaseAutocommit
                | BypassCanary::SqlPinnedIgnoresRows
        ) {
            options = options.with_sql_transactions();
            options.sql_autocommit = matches!(
                canary,
                BypassCanary::SqlOnePhaseAutocommit | BypassCanary::SqlPinnedIgnoresRows
            );
            options.sql_gateway_crashes = matches!(
                canary,
                BypassCanary::SqlSkipSuspicionAbort | BypassCanary::SqlIgnoreGatewayIncarnations
            );
        }
        if canary == BypassCanary::SqlIgnoreIncarnations {
            let mut prng = Prng::new(seed ^ 0x5a1e_1a0e);
            options.reconfigure_per_10000 = prng.range_inclusive(30, 80);
            options.standbys = prng.range_inclusive(1, 3);
            options.replication = if prng.percent(50) { 3 } else { 1 };
        }
        if canary == BypassCanary::SqlIncrementImage {
            // Few accounts: increments of one balance by transactions that overlap, one of them
            // aborting, are what the canary needs.
            options.accounts = Prng::new(seed ^ 0x1c_4e3e).range_inclusive(3, 5);
        }
        if canary == BypassCanary::SqlSkipExecutionOrder {
            // Few accounts: transfers in opposite directions between the same two meet often
            // enough to close the cross-partition cycles the rule prevents.
            options.accounts = Prng::new(seed ^ 0xe0_0de7).range_inclusive(3, 5);
        }
        if canary == BypassCanary::SkyrosGateIgnored {
            // The counterexample of `ecast.md`, "Skyros partitions": a put acknowledged while
            // held for a multi-partition message whose other destination lags, then a read
            // there missing that message. One slow partition, calm links, many puts and
            // transactions, spread registers.
            let mut prng = Prng::new(seed ^ 0x5c1f_05c1);
            options.skyros = true;
            options.partitions = 3;
            options.registers = 6;
            options.spread_registers = true;
            options.slow_partition_ticks = prng.range_inclusive(40, 120);
            options.delay_ticks_max = prng.range_inclusive(1, 4);
            options.get_percent = 40;
            options.put_percent = 30;
            options.txn_percent = 30;
            options.transfer_percent = 0;
            options.loss_percent = 0;
            options.duplicate_percent = 0;
            options.router_crash_per_10000 = 0;
            options.partition_crash_per_10000 = 0;
            options.gateways = 4;
            options.slots = 3;
            options.window_max = 8;
            options.think_ticks_max = 5;
        }
        if matches!(
            canary,
            BypassCanary::PerMessageHold | BypassCanary::AckOnStable
        ) {
            // The second counterexample needs a chain M1 → M2 across three partitions while
            // M1's last destination lags, and bypass reads at both ends in that window: one
            // slow partition and calm links otherwise, one register at the start of each
            // partition (so that register transactions span partitions), many registers (so
            // that a read is not held by an unrelated laggard), mostly gets and transactions.
            // `crates/sim/tests/bypass.rs` checks that the same shape passes with the rule.
            let mut prng = Prng::new(seed ^ 0x5107_5107);
            options.partitions = 3;
            options.registers = 12;
            options.spread_registers = true;
            options.slow_partition_ticks = prng.range_inclusive(40, 120);
            options.delay_ticks_max = prng.range_inclusive(1, 4);
            options.get_percent = 70;
            options.put_percent = 5;
            options.txn_percent = 25;
            options.transfer_percent = 0;
            options.loss_percent = 0;
            options.duplicate_percent = 0;
            options.router_crash_per_10000 = 0;
            options.partition_crash_per_10000 = 0;
            options.gateways = 4;
            options.slots = 3;
            options.window_max = 8;
            options.think_ticks_max = 5;
        }
        if canary == BypassCanary::SkyrosGateIgnoresCuts {
            options.skyros = true;
        }
        if canary == BypassCanary::SkyrosCommUnchecked {
            options = options.with_comm_workload();
        }
        if canary == BypassCanary::GroupCommitWithoutQuorum {
            let mut prng = Prng::new(seed ^ 0xc0aa_17e0);
            options.partition_crash_per_10000 = prng.range_inclusive(30, 80);
            options.delay_ticks_max = options.delay_ticks_max.max(5);
        }
        if matches!(
            canary,
            BypassCanary::ActBeforeInstall
                | BypassCanary::IgnoreHoldings
                | BypassCanary::SkyrosGateIgnoresCuts
        ) {
            let mut prng = Prng::new(seed ^ 0xac7b_ef0e);
            options.reconfigure_per_10000 = prng.range_inclusive(20, 60);
            options.standbys = prng.range_inclusive(1, 3);
            options.replication = if prng.percent(50) { 3 } else { 1 };
        }
        if canary == BypassCanary::TombstoneSilent {
            let mut prng = Prng::new(seed ^ 0x7033_b570);
            options.reconfigure_per_10000 = prng.range_inclusive(30, 80);
            options.standbys = prng.range_inclusive(1, 3);
            options.replication = 3;
        }
        options
    }

    pub fn describe(&self) -> String {
        format!(
            "bypass partitions={} accounts={} registers={} gateways={}x{} window={} loss={}% dup={}% \
             delay<={} slow_partition=+{} router_crash={}/10000 partition_crash={}/10000 \
             get={}% put={}% txn={}% transfer={}% incr={}% ticks={} reconfigure={}/10000 standbys={} replication={} \
             group_heartbeat={} group_timeout={} snapshot_audits={}%{}{}{}{}{}{}{}",
            self.partitions,
            self.accounts,
            self.registers,
            self.gateways,
            self.slots,
            self.window_max,
            self.loss_percent,
            self.duplicate_percent,
            self.delay_ticks_max,
            self.slow_partition_ticks,
            self.router_crash_per_10000,
            self.partition_crash_per_10000,
            self.get_percent,
            self.put_percent,
            self.txn_percent,
            self.transfer_percent,
            self.incr_percent,
            self.fault_ticks,
            self.reconfigure_per_10000,
            self.standbys,
            self.replication,
            self.group_heartbeat_ticks,
            self.group_timeout_ticks,
            self.snapshot_audit_percent,
            if self.skyros { " skyros" } else { "" },
            if self.skyros && self.skyros_comm { " comm" } else { "" },
            if self.skyros && self.skyros_adapt { " adapt" } else { "" },
            if self.sql_transactions { " sql" } else { "" },
            if self.sql_autocommit { " autocommit" } else { "" },
            if self.sql_statements { " statements" } else { "" },
            self.canary
                .map_or(String::new(), |canary| format!(" canary={canary:?}"))
        )
    }
}

#[derive(Clone, Debug, Default)]
pub struct BypassStats {
    pub ticks: u64,
    pub operations: usize,
    pub completed: usize,
    pub singles: u64,
    pub multis: u64,
    /// Single-partition operations a partition held (rule H or behind a held one).
    pub held: u64,
    /// `skyros`: puts acknowledged before they were ordered, and puts the gate refused.
    pub fast_acks: u64,
    pub gate_refusals: u64,
    /// Skyros-Comm: writes that completed in one round trip on the primary's preview.
    pub comm_fast: u64,
    /// `--snapshot-audits`: snapshot audits completed, and the gateways' snapshot reads over
    /// groups answered at one timestamp, shares refused (`SnapshotPassed`), and reads served
    /// sequentially instead (`ecast::GatewayStats`).
    pub snapshot_audits: u64,
    pub snapshot_answered: u64,
    pub snapshot_refusals: u64,
    pub snapshot_fallbacks: u64,
    pub admitted: u64,
    pub messages_sent: u64,
    pub messages_dropped: u64,
    pub router_crashes: u64,
    /// Router replicas paused (and resumed as they were).
    pub router_pauses: u64,
    pub partition_crashes: u64,
    /// Replicated mode: members paused (and resumed with their state), and duties started
    /// (a member becoming the primary of a normal view; the initial primaries count).
    pub partition_pauses: u64,
    pub primaryships: u64,
    /// Replication 3: group replicas stopped (retired, finished) and dropped (two versions
    /// past their group's retirement) by `ecast::GroupLifecycle`.
    pub replicas_stopped: u64,
    pub replicas_dropped: u64,
    /// Late bypass requests answered by a stopped replica's tombstone.
    pub tombstone_answers: u64,
    /// Copies resent to a group whose replica stopped, acknowledged by its tombstone.
    pub tombstone_copy_acks: u64,
    /// Replicated mode: the gateways' bypass requests sent to group members (`ecast::Gateway`'s
    /// lanes, retries and `Result` queries included).
    pub lane_requests: u64,
    pub forwarders: u64,
    /// Keyspace messages the nemesis submitted, and those the routers accepted.
    pub reconfigurations: u64,
    pub reconfigurations_accepted: u64,
    /// Copies installed, and single-partition operations answered `Moved` (re-planned).
    pub installs: u64,
    pub moved: u64,
    /// Copies a primary logged in parts (`InstallPart`): the parts queued (a copy resent to
    /// a new primary counts again), and the copies of more than one part.
    pub install_parts: u64,
    pub multi_part_copies: u64,
    /// Replication 3: groups started and retired by accepted keyspace messages.
    pub groups_started: u64,
    pub groups_retired: u64,
    pub timestamp_max: u64,
    pub watermark_max: u64,
    /// `--sql-transactions`.
    pub sql: SqlStats,
    /// `--sql-statements`.
    pub statements: StatementStats,
    /// SQL modes: the most statements one shared engine batch held (`store::Cycles`), over
    /// the partition replicas alive at the end (a restarted or transferred replica counts
    /// from then).
    pub sql_batch_largest: u64,
    /// SQL modes: read jobs run by members (`read_job_delay_ticks_max`), and those that ran
    /// after a delay.
    pub read_jobs: u64,
    pub read_jobs_delayed: u64,
    /// Read jobs that ran in a chain with another (`ReadJob::run_together`).
    pub read_jobs_chained: u64,
}

pub struct BypassReport {
    pub seed: u64,
    pub trace_hash: u64,
    pub stats: BypassStats,
    pub result: Result<(), Violation>,
}

#[derive(Clone, Debug)]
enum Msg {
    /// Gateway → router: a VR client request of gateway `from`.
    Request { request: Request },
    /// Router → gateway: the VR reply.
    RouterReply(vr::Message),
    Stable {
        sequence: Sequence,
        timestamp: Timestamp,
    },
    /// Router → partitions and gateways.
    Watermark(Timestamp),
    /// Router → partitions, the per-message canary only: messages above the watermark that
    /// are stable.
    StableSet(Vec<Timestamp>),
    /// Router → partition: the forwarder of router `router` delivers.
    Deliver {
        router: u8,
        deliveries: Vec<Delivery>,
    },
    /// Partition → router.
    Confirm {
        process: ProcessId,
        delivered: Timestamp,
    },
    /// Gateway → partition: send the answer to this message again.
    Recall {
        timestamp: Timestamp,
        gateway: usize,
        sequence: Sequence,
    },
    /// Partition → gateway: its share's answer.
    MultiAnswer {
        sequence: Sequence,
        partition: ProcessId,
        values: Answers,
    },
    /// Partition → partition: the copy captured at a keyspace cut.
    Copy {
        version: ConfigVersion,
        from: ProcessId,
        records: Vec<u8>,
    },
    /// Partition → partition: the copy of `version` is installed at `to`.
    CopyAck {
        version: ConfigVersion,
        to: ProcessId,
    },
    /// Member → member of a partition group (`groups`): a VR message.
    Vr { message: vr::Message },
    /// Gateway → member (the replicated mode's bypass, `Gateway::with_bypass`): a lane's VR
    /// request carrying a `PartitionOperation`.
    PartitionRequest { request: Request },
    /// Member → gateway: the VR reply (or `NotPrimary`) to a lane's request.
    PartitionReply {
        partition: ProcessId,
        message: vr::Message,
    },
    /// Member (primary) → gateway: a held lane request executed (`Released::Single`).
    PartitionReleased {
        partition: ProcessId,
        client: ClientId,
        number: vr::RequestNumber,
        result: Vec<u8>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Node {
    /// A replica of the router group (`routers`).
    Router(u8),
    /// A partition group: in the replicated mode a message to it goes to each member.
    Partition(usize),
    /// A member (replica index) of a partition group (`groups`).
    Member(usize, u8),
    Gateway(usize),
}

/// A partition's data: the simulator's key-value map behind `ecast::PartitionData`.
/// Operations (single-partition transactions and shares alike) are postcard `Txn`s; results are
/// postcard `Answers`. In the SQL mode the data is the runtime's `PartitionStore` instead
/// (`sql`), every operation a `cluster::payload::SqlPayload`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct SimData {
    accounts: u64,
    data: BTreeMap<u64, i64>,
    /// The positions this group holds (its arc, then each cut's holdings): a snapshot read
    /// (`SNAPSHOT_READ`) carries the whole transaction and executes the share held here.
    holds: PositionSet,
    sql: Option<SqlData>,
    /// The `SqlIgnoreIncarnations` canary: imported copies lose their open transactions.
    forget_transactions: bool,
    /// The `SqlWholeRowUndo` canary: the store writes back whole-row images on aborts
    /// (`store::Store::canary_whole_row_undo`, set before each execution: not in the store's
    /// snapshots, so a restarted replica gets it again from here).
    whole_row_undo: bool,
    /// The `SqlIncrementImage` canary (`store::Store::canary_increment_image`).
    increment_image: bool,
    /// The `SqlPinnedIgnoresRows` canary (`store::Store::canary_pinned_unjudged`).
    pinned_unjudged: bool,
}

/// The SQL mode's partition data; equal when their snapshots are (`bypass_agreement`).
#[derive(Clone, Debug, Serialize, Deserialize)]
struct SqlData(cluster::partition_store::PartitionStore);

impl PartialEq for SqlData {
    fn eq(&self, other: &SqlData) -> bool {
        postcard::to_allocvec(&self.0).ok() == postcard::to_allocvec(&other.0).ok()
    }
}

impl Eq for SqlData {}

/// Prefixes a snapshot audit's payload: the whole `Txn`, of which each group executes the
/// share it holds (a snapshot read of several groups sends every group the whole read, as the
/// runtime's RESP and SQL payloads, which carry their own cut, do). Ten 0xff bytes are never
/// the start of a `Txn` (an over-long varint), so no other payload is mistaken for one.
const SNAPSHOT_READ: [u8; 10] = [0xff; 10];

impl SimData {
    /// A snapshot read's transaction, cut to the keys held here.
    fn snapshot_share(&self, operation: &[u8]) -> Option<Txn> {
        let txn =
            postcard::from_bytes::<Txn>(operation.strip_prefix(SNAPSHOT_READ.as_slice())?).ok()?;
        Some(txn.share(|key| self.holds.contains(position(key))))
    }

    /// The SQL mode's store.
    fn sql_store(&self) -> Option<&store::Store> {
        self.sql.as_ref().map(|sql| sql.0.store())
    }
}

impl PartitionData for SimData {
    fn position(&self, key: &[u8]) -> Position {
        if let Some(sql) = &self.sql {
            return sql.0.position(key);
        }
        KeyMapping::Hash.position(key)
    }

    fn export(&self, range: &PositionSet) -> Vec<u8> {
        if let Some(sql) = &self.sql {
            return sql.0.export(range);
        }
        let records: Vec<(u64, i64)> = self
            .data
            .iter()
            .filter(|(key, _)| range.contains(position(**key)))
            .map(|(key, value)| (*key, *value))
            .collect();
        postcard::to_allocvec(&records).expect("records serialise")
    }

    fn import(&mut self, records: &[u8]) {
        if let Some(sql) = &mut self.sql {
            if self.forget_transactions {
                type Records = (
                    Vec<(Vec<u8>, Vec<u8>)>,
                    Option<Vec<u8>>,
                    store::prepared::Prepared,
                    Vec<(Vec<u8>, kv::Lock)>,
                    store::transactions::Transactions,
                );
                if let Ok((records, tables, prepared, locks, _)) =
                    postcard::from_bytes::<Records>(records)
                {
                    let without = (
                        records,
                        tables,
                        prepared,
                        locks,
                        store::transactions::Transactions::default(),
                    );
                    let bytes = postcard::to_allocvec(&without).expect("records serialise");
                    return sql.0.import(&bytes);
                }
            }
            return sql.0.import(records);
        }
        let records: Vec<(u64, i64)> = postcard::from_bytes(records).unwrap_or_default();
        self.data.extend(records);
    }

    fn retain(&mut self, holds: &PositionSet) {
        self.holds = holds.clone();
        if let Some(sql) = &mut self.sql {
            return sql.0.retain(holds);
        }
        self.data.retain(|key, _| holds.contains(position(*key)));
    }

    fn keys(&self, operation: &[u8]) -> KeySet {
        if let Some(sql) = &self.sql {
            return sql.0.keys(operation);
        }
        if let Some(snapshot) = operation.strip_prefix(SNAPSHOT_READ.as_slice()) {
            // Every key it reads, held here or not: `PartitionMachine` answers it `Moved` only
            // when none is held.
            return match postcard::from_bytes::<Txn>(snapshot) {
                Ok(txn) => KeySet::of(txn.keys().into_iter().map(key_bytes)),
                Err(_) => KeySet::Unknown,
            };
        }
        match postcard::from_bytes::<Txn>(operation) {
            Ok(txn) => KeySet::of(txn.keys().into_iter().map(key_bytes)),
            Err(_) => KeySet::Unknown,
        }
    }

    fn preview(&self, operation: &[u8]) -> Option<Vec<u8>> {
        if self.sql.is_some() {
            return None;
        }
        let mut copy = self.data.clone();
        let txn = postcard::from_bytes::<Txn>(operation).ok()?;
        let accounts = self.accounts;
        let values = txn.execute(&mut copy, |key| {
            bypass_checkers::initial_value(accounts, key)
        });
        Some(postcard::to_allocvec(&int_answers(values)).expect("values serialise"))
    }

    fn execute(&mut self, operation: &[u8]) -> Vec<u8> {
        if let Some(sql) = &mut self.sql {
            sql.0.store_mut().canary_whole_row_undo = self.whole_row_undo;
            sql.0.store_mut().canary_increment_image = self.increment_image;
            sql.0.store_mut().canary_pinned_unjudged = self.pinned_unjudged;
            return sql_answers(&sql.0.execute(operation));
        }
        let txn = match self.snapshot_share(operation) {
            Some(share) => share,
            None => match postcard::from_bytes::<Txn>(operation) {
                Ok(txn) => txn,
                Err(_) => return Vec::new(),
            },
        };
        let accounts = self.accounts;
        let values = txn.execute(&mut self.data, |key| {
            bypass_checkers::initial_value(accounts, key)
        });
        postcard::to_allocvec(&int_answers(values)).expect("values serialise")
    }

    /// The SQL mode runs a log entry's statements as the runtime does: the batchable ones
    /// (`PartitionStore::batchable`) put off and run as one shared engine batch.
    fn batchable(&self, operation: &[u8]) -> bool {
        self.sql
            .as_ref()
            .is_some_and(|sql| sql.0.batchable(operation))
    }

    fn reads_only(&self, operation: &[u8]) -> bool {
        self.sql
            .as_ref()
            .is_some_and(|sql| sql.0.reads_only(operation))
    }

    fn execute_batch(&mut self, operations: &[Vec<u8>]) -> Vec<Vec<u8>> {
        if let Some(sql) = &mut self.sql {
            sql.0.store_mut().canary_whole_row_undo = self.whole_row_undo;
            sql.0.store_mut().canary_increment_image = self.increment_image;
            sql.0.store_mut().canary_pinned_unjudged = self.pinned_unjudged;
            return sql
                .0
                .execute_batch(operations)
                .iter()
                .map(|result| sql_answers(result))
                .collect();
        }
        operations
            .iter()
            .map(|operation| self.execute(operation))
            .collect()
    }
}

/// A `PartitionStore` result as the SQL mode's `Answers`.
fn sql_answers(result: &[u8]) -> Vec<u8> {
    let answers: Answers = cluster::partition_store::decode_outcomes(result)
        .into_iter()
        .map(|(part, outcome)| {
            let bytes = match outcome {
                kv::Outcome::Foreign(bytes) => Some(bytes),
                _ => None,
            };
            (u64::from(part), Answer::Sql(bytes))
        })
        .collect();
    postcard::to_allocvec(&answers).expect("answers serialise")
}

fn decode_values(bytes: &[u8]) -> Option<Answers> {
    postcard::from_bytes(bytes).ok()
}

/// A partition group (`groups`): its members, real replicas.
struct PartitionNode {
    id: ProcessId,
    members: Vec<groups::Member>,
    /// The arc the group starts with, and the machine a member starts or restarts from.
    arc: PositionSet,
    initial: PartitionMachine<SimData>,
    /// The per-message canary's `MessageStable` requests sent to the group so far.
    stable_requests: u64,
    /// The checker's cursor in the released queue (admissions observed), never reset.
    admissions_seen: u64,
}

#[derive(Clone, Debug)]
enum SlotOp {
    /// A transaction, driven by the `ecast::Gateway` as command `history` (through the bypass
    /// when its keys lie in one group, else through the routers).
    Multi {
        history: usize,
        destinations: BTreeSet<ProcessId>,
        /// Its current message, once sequenced (a retried read gets a new one).
        sequenced: Option<(Sequence, Timestamp)>,
        answered: BTreeSet<ProcessId>,
        recall_at: u64,
    },
}

struct GatewayNode {
    id: ProcessId,
    /// The pure gateway, with the router bypass (`with_bypass`, and `with_skyros` for `skyros`
    /// partitions) and rule A's watermark gate (not under the `AckOnStable` canary).
    gateway: Gateway<Answer>,
    slots: Vec<Option<SlotOp>>,
    idle_until: Vec<u64>,
}

pub struct BypassSimulation {
    options: BypassOptions,
    prng: Prng,
    /// Read jobs' delays (`BypassOptions::read_job_delay_ticks_max`), a generator of their
    /// own.
    job_prng: Prng,
    now: u64,
    /// Every configuration the routers reached, by version (shares are cut by the
    /// configuration at their message's place).
    configurations: BTreeMap<ConfigVersion, Configuration>,
    /// Replication 3: the storage processes' configuration and groups of every version.
    groupings: BTreeMap<ConfigVersion, Grouping>,
    /// A partition group's node index by its destination id (groups started later are
    /// appended).
    node_index: BTreeMap<ProcessId, usize>,
    /// Every partition machine's settings (a started group's too).
    machine_settings: PartitionMachineSettings,
    /// Replicated mode: the groups' VR configuration by group size.
    group_configs: BTreeMap<u8, vr::Config>,
    /// Replicated mode: duty client ids handed out so far.
    duty_clients: u64,
    /// The nemesis's keyspace command in flight at gateway 0 (its id), if any.
    reconfiguring: Option<u64>,
    planner: Planner,
    /// The router group (`routers`): its replicas, the state a replica starts or recovers
    /// from, and its VR configuration.
    routers: Vec<routers::RouterMember>,
    router_initial: RouterState,
    router_config: vr::Config,
    partitions: Vec<PartitionNode>,
    gateways: Vec<GatewayNode>,
    /// (delivery tick, sequence) → (destination, message).
    network: BTreeMap<(u64, u64), (Node, Msg)>,
    network_sequence: u64,
    history: bypass_checkers::BypassHistory,
    order: BypassOrder,
    stats: BypassStats,
    trace_hash: u64,
    violation: Option<Violation>,
    /// `--sql-transactions`: the SQL workload's clients and findings.
    sql: Option<sql::SqlState>,
    /// `--sql-statements`: the one-shot workload's clients, history and findings.
    statements: Option<statements::StatementState>,
}

/// Where a key lives on the ring (hash placement, as the `--ecast` mode).
fn position(key: u64) -> Position {
    KeyMapping::Hash.position(&key.to_be_bytes())
}

/// The partition (its destination id) holding a key.
fn partition_of(configuration: &Configuration, key: u64) -> ProcessId {
    partition_holding(configuration, position(key))
}

/// The partition (its destination id) holding a ring position.
fn partition_holding(configuration: &Configuration, position: Position) -> ProcessId {
    let routing = Routing::Write {
        sender: ProcessId(GATEWAY_BASE),
        target: Target::Points(vec![position]),
    };
    destset(configuration, &routing)
        .into_iter()
        .next()
        .expect("every key has a partition")
}

/// A partition group's node. `sql`: the SQL modes' data, `Some(true)` with the tables and the
/// rows it holds (a group of the first configuration; `statements`: the one-shot workload's
/// tables), `Some(false)` empty (a group started by a keyspace message: copies bring the
/// catalog and rows).
fn partition_node(
    id: ProcessId,
    accounts: u64,
    settings: PartitionMachineSettings,
    holds: PositionSet,
    sql: Option<bool>,
    statements: bool,
    canary: Option<BypassCanary>,
) -> PartitionNode {
    let sql = sql.map(|populated| {
        let mut data = cluster::partition_store::PartitionStore::new(
            holds.clone(),
            cluster::payload::KeyPlacement::hash(),
        );
        if populated {
            let operations = match statements {
                true => statements::initial_operations(accounts),
                false => sql::initial_operations(accounts),
            };
            for operation in operations {
                data.execute(&operation);
            }
        }
        SqlData(data)
    });
    let machine = PartitionMachine::new(
        SimData {
            accounts,
            data: BTreeMap::new(),
            holds: holds.clone(),
            sql,
            forget_transactions: canary == Some(BypassCanary::SqlIgnoreIncarnations),
            whole_row_undo: canary == Some(BypassCanary::SqlWholeRowUndo),
            increment_image: canary == Some(BypassCanary::SqlIncrementImage),
            pinned_unjudged: canary == Some(BypassCanary::SqlPinnedIgnoresRows),
        },
        settings,
    )
    .with_holdings(holds.clone());
    PartitionNode {
        id,
        initial: machine,
        members: Vec::new(),
        arc: holds,
        stable_requests: 0,
        admissions_seen: 0,
    }
}

fn key_bytes(key: u64) -> Vec<u8> {
    key.to_be_bytes().to_vec()
}

impl BypassSimulation {
    pub fn new(options: BypassOptions) -> BypassSimulation {
        let prng = Prng::new(options.seed);
        let spacing = u64::MAX / options.partitions;
        let mut positions: Vec<Position> = (0..options.partitions)
            .map(|index| Position(index * spacing))
            .collect();
        if options.spread_registers && options.registers >= options.partitions {
            positions = (0..options.partitions)
                .map(|index| position(options.accounts + index))
                .collect();
            positions.sort();
        }
        let members: Vec<(ProcessId, Position)> = positions
            .into_iter()
            .enumerate()
            .map(|(index, position)| (ProcessId(index as u64 + 1), position))
            .collect();
        // Replication 1: a partition is one destination, its own group named by its process.
        // Replication 3: the routers route to groups named by (arc, version) over the ring.
        let standbys: Vec<ProcessId> = (0..options.standbys)
            .map(|index| ProcessId(options.partitions + index + 1))
            .collect();
        let processes = Configuration::with_members(options.replication, &members, &standbys);
        let router_settings = RouterSettings {
            window_max: options.window_max,
            outcomes_retained: options.window_max.max(64),
            // Partition groups: a configuration message goes only where it matters.
            announce_configurations: false,
            // The simulated groups' suspicions (`--sql-transactions`' gateway crashes) are
            // data messages of the workload, not the routers' (`bypass_sql.rs`).
            suspicions_to_groups: false,
            canary: None,
        };
        let state = if options.replication > 1 {
            RouterState::grouped(processes, router_settings)
        } else {
            RouterState::new(processes, router_settings)
        };
        let router_config =
            routers::router_config(options.group_heartbeat_ticks, options.group_timeout_ticks);
        let configuration = state.configuration().clone();
        let partition_canary = match options.canary {
            Some(BypassCanary::NoHold) => Some(PartitionCanary::NoHold),
            Some(BypassCanary::PerMessageHold) => Some(PartitionCanary::PerMessageHold),
            Some(BypassCanary::SnapshotOnArrival) => Some(PartitionCanary::SnapshotOnArrival),
            _ => None,
        };
        let accounts = options.accounts;
        let machine_settings = PartitionMachineSettings {
            rules: PartitionSettings {
                canary: partition_canary,
                ..PartitionSettings::default()
            },
            act_before_install: options.canary == Some(BypassCanary::ActBeforeInstall),
            ignore_holdings: options.canary == Some(BypassCanary::IgnoreHoldings),
            gate_ignores_cuts: options.canary == Some(BypassCanary::SkyrosGateIgnoresCuts),
            read_jobs: options.sql_data(),
            job_reads_live: options.canary == Some(BypassCanary::SqlJobReadsLive),
            ..PartitionMachineSettings::default()
        };
        let partitions: Vec<PartitionNode> = match state.grouping() {
            Some(grouping) => grouping
                .groups
                .groups()
                .iter()
                .map(|group| {
                    partition_node(
                        group.destination(),
                        accounts,
                        machine_settings.clone(),
                        group.arc(),
                        options.sql_data().then_some(true),
                        options.sql_statements,
                        options.canary,
                    )
                })
                .collect(),
            None => (0..options.partitions + options.standbys)
                .map(|index| {
                    let id = ProcessId(index + 1);
                    partition_node(
                        id,
                        accounts,
                        machine_settings.clone(),
                        configuration.ranges_of(id),
                        options.sql_data().then_some(true),
                        options.sql_statements,
                        options.canary,
                    )
                })
                .collect(),
        };
        let group_configs: BTreeMap<u8, vr::Config> = [1, 3]
            .into_iter()
            .map(|size| (size, groups::group_config(&options, size)))
            .collect();
        let mut partitions = partitions;
        {
            let config = &group_configs[&options.group_members()];
            for node in &mut partitions {
                node.members = groups::members(config, &node.initial);
            }
        }
        let node_index = partitions
            .iter()
            .enumerate()
            .map(|(index, partition)| (partition.id, index))
            .collect();
        let groupings = state
            .grouping()
            .map(|grouping| BTreeMap::from([(grouping.groups.version(), grouping.clone())]))
            .unwrap_or_default();
        // The replicated mode's bypass: every group the routers start with, and its size.
        let bypass_groups: BTreeMap<ProcessId, u8> = partitions
            .iter()
            .map(|node| (node.id, options.group_members()))
            .collect();
        let gateways = (0..options.gateways)
            .map(|index| GatewayNode {
                id: ProcessId(GATEWAY_BASE + index as u64),
                gateway: {
                    let settings = GatewaySettings {
                        sender: SenderSettings {
                            window_max: options.window_max,
                            resubmit_ticks: 50,
                        },
                        // Lost answers are recalled from the partitions (`Recall`); the
                        // gateway's own read retry is the last resort.
                        answer_wait_ticks: 2_000,
                        ..GatewaySettings::default()
                    };
                    let gateway = Gateway::new(
                        ProcessId(GATEWAY_BASE + index as u64),
                        ClientId(GATEWAY_CLIENT_BASE + index as u64),
                        configuration.clone(),
                        routers::ROUTERS,
                        (index % routers::ROUTERS as usize) as u8,
                        options.seed ^ index as u64,
                        settings,
                    );
                    let gateway = if options.canary == Some(BypassCanary::AckOnStable) {
                        gateway
                    } else {
                        gateway.with_watermark_gate()
                    };
                    groups::with_bypass(gateway, &options, index, &bypass_groups)
                },
                slots: vec![None; options.slots],
                idle_until: vec![0; options.slots],
            })
            .collect();
        BypassSimulation {
            prng,
            job_prng: Prng::new(options.seed ^ 0x10b5_10b5_10b5_10b5),
            now: 0,
            configurations: BTreeMap::from([(configuration.version(), configuration)]),
            groupings,
            node_index,
            machine_settings,
            group_configs,
            duty_clients: 0,
            reconfiguring: None,
            planner: Planner::default(),
            routers: routers::routers(&router_config, &state),
            router_initial: state,
            router_config,
            partitions,
            gateways,
            network: BTreeMap::new(),
            network_sequence: 0,
            history: bypass_checkers::BypassHistory::new(accounts, options.registers),
            order: BypassOrder::default(),
            stats: BypassStats::default(),
            trace_hash: 0xcbf2_9ce4_8422_2325,
            violation: None,
            sql: options
                .sql_transactions
                .then(|| sql::SqlState::new(options.gateways, options.slots, options.seed)),
            statements: options.sql_statements.then(|| {
                statements::StatementState::new(
                    options.seed,
                    options.gateways,
                    options.slots,
                    options.accounts,
                    options.fault_ticks,
                )
            }),
            options,
        }
    }

    fn hash(&mut self, value: u64) {
        self.trace_hash = (self.trace_hash ^ value).wrapping_mul(0x0100_0000_01b3);
    }

    fn fail(&mut self, violation: Violation) {
        if self.violation.is_none() {
            self.violation = Some(violation);
        }
    }

    fn faults_on(&self) -> bool {
        self.now < self.options.fault_ticks
    }

    /// The partition (index) holding a key in the routers' current configuration (a gateway
    /// that has just read it: the abstraction of its configuration query).
    fn partition_of(&self, key: u64) -> usize {
        self.index_of(partition_of(self.current(), key))
    }

    /// The node of a partition group (every destination the routers ever route to has one:
    /// a started group's is made when the routers accept the message that starts it).
    fn index_of(&self, destination: ProcessId) -> usize {
        *self
            .node_index
            .get(&destination)
            .expect("every destination has a node")
    }

    fn current(&self) -> &Configuration {
        self.configurations
            .values()
            .next_back()
            .expect("there is always a configuration")
    }

    /// The configuration at `version` (the current one if unknown, which does not happen).
    fn configuration_at(&self, version: ConfigVersion) -> &Configuration {
        self.configurations
            .get(&version)
            .unwrap_or_else(|| self.current())
    }

    /// Asks every partition again for the answers of `due` (`due_recalls`) on behalf of
    /// `gateway` (one that has none does not answer).
    pub(super) fn send_recalls(&mut self, gateway: usize, due: Vec<(Sequence, Timestamp)>) {
        for (sequence, timestamp) in due {
            for index in 0..self.partitions.len() {
                self.send(
                    Node::Gateway(gateway),
                    Node::Partition(index),
                    Msg::Recall {
                        timestamp,
                        gateway,
                        sequence,
                    },
                );
            }
        }
    }

    fn send(&mut self, from: Node, to: Node, message: Msg) {
        if let Node::Partition(index) = to {
            // Every member receives its own copy (lost, delayed, duplicated on its own).
            for member in 0..self.partitions[index].members.len() as u8 {
                self.send(from, Node::Member(index, member), message.clone());
            }
            return;
        }
        self.stats.messages_sent += 1;
        let faults = self.faults_on();
        if faults && self.prng.percent(self.options.loss_percent) {
            self.stats.messages_dropped += 1;
            return;
        }
        let copies = if faults && self.prng.percent(self.options.duplicate_percent) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut delay = self.prng.range_inclusive(1, self.options.delay_ticks_max);
            let slow = matches!(to, Node::Partition(0) | Node::Member(0, _));
            if matches!(from, Node::Router(_)) && slow && faults {
                delay += self.options.slow_partition_ticks;
            }
            self.network_sequence += 1;
            self.network.insert(
                (self.now + delay, self.network_sequence),
                (to, message.clone()),
            );
        }
    }

    // ----- The router group (`routers`). -----

    /// The checkers observe what router `index`'s replica has committed.
    fn observe_router(&mut self, index: u8) {
        let Some(state) = self.routers[index as usize]
            .replica
            .as_ref()
            .map(|replica| replica.state_machine())
        else {
            return;
        };
        let configuration = state.configuration().clone();
        if !self.configurations.contains_key(&configuration.version()) {
            let grouping = state.grouping().cloned();
            self.stats.reconfigurations_accepted += 1;
            self.configurations
                .insert(configuration.version(), configuration);
            self.start_groups(grouping);
        }
        let configurations = &self.configurations;
        // The SQL mode's payloads are not `Txn`s: the per-key order checker sees no keys.
        let sql_mode = self.options.sql_data();
        let shares = |routed: &ecast::Routed| {
            let configuration = configurations
                .get(&routed.routed_under)
                .expect("every version is kept");
            let txn: Txn = if sql_mode {
                Txn::default()
            } else {
                postcard::from_bytes(&routed.envelope.payload).unwrap_or_default()
            };
            routed
                .destinations
                .keys()
                .map(|process| {
                    let keys = txn
                        .keys()
                        .into_iter()
                        .filter(|key| partition_of(configuration, *key) == *process)
                        .collect();
                    (*process, keys)
                })
                .collect()
        };
        let state = self.routers[index as usize]
            .replica
            .as_ref()
            .expect("checked above")
            .state_machine();
        let mut order = std::mem::take(&mut self.order);
        order.observe_router(state, shares);
        self.order = order;
        self.stats.timestamp_max = self.stats.timestamp_max.max(state.timestamp_last().0);
    }

    /// Router `router`'s watermark reporter (the primary's), and the watermark it reports to
    /// the partitions and the gateways.
    fn report_watermark(&mut self, router: u8, input: WatermarkInput) {
        let member = &mut self.routers[router as usize];
        let (Some(reporter), Some(replica)) = (member.reporter.as_mut(), member.replica.as_ref())
        else {
            return;
        };
        let Some(watermark) = reporter.step(input, replica.state_machine()) else {
            return;
        };
        self.stats.watermark_max = self.stats.watermark_max.max(watermark.0);
        let stable_above: Vec<Timestamp> =
            if self.options.canary == Some(BypassCanary::PerMessageHold) {
                let state = replica.state_machine();
                (watermark.0 + 1..=state.timestamp_last().0)
                    .map(Timestamp)
                    .filter(|timestamp| state.is_stable(*timestamp))
                    .collect()
            } else {
                Vec::new()
            };
        for index in 0..self.partitions.len() {
            let rules = self.machine(index).rules();
            if self.machine(index).finished()
                && rules.waiting() == 0
                && rules.watermark() >= rules.logged()
            {
                // A retired group that nothing can be held at any more: its replicas have
                // stopped logging watermarks (`rubberband.md`, "Replication f > 1").
                continue;
            }
            self.send(
                Node::Router(router),
                Node::Partition(index),
                Msg::Watermark(watermark),
            );
            if !stable_above.is_empty() {
                self.send(
                    Node::Router(router),
                    Node::Partition(index),
                    Msg::StableSet(stable_above.clone()),
                );
            }
        }
        for index in 0..self.gateways.len() {
            self.send(
                Node::Router(router),
                Node::Gateway(index),
                Msg::Watermark(watermark),
            );
        }
    }

    // ----- Partitions. -----

    /// Replication 3: records the routers' new grouping and makes a node for every group it
    /// starts (the abstraction of its members' storage processes starting their replicas from
    /// the configuration they learn), before any delivery can reach it. The group starts empty,
    /// holding nothing, so that nothing executes before its cut (K, its first chain entry).
    fn start_groups(&mut self, grouping: Option<Grouping>) {
        let Some(grouping) = grouping else {
            return;
        };
        let version = grouping.groups.version();
        let (_, before) = self
            .groupings
            .last_key_value()
            .expect("the initial grouping is recorded");
        assert_eq!(
            before.groups.version().0 + 1,
            version.0,
            "every version is observed"
        );
        let regrouping = Regrouping::between(&before.groups, &grouping.groups);
        self.stats.groups_retired += regrouping.retired.len() as u64;
        for group in &regrouping.started {
            self.stats.groups_started += 1;
            let id = group.destination();
            assert!(!self.node_index.contains_key(&id), "a group name is new");
            self.node_index.insert(id, self.partitions.len());
            let mut node = partition_node(
                id,
                self.options.accounts,
                self.machine_settings.clone(),
                PositionSet::empty(),
                self.options.sql_data().then_some(false),
                self.options.sql_statements,
                self.options.canary,
            );
            let config = &self.group_configs[&self.options.group_members()];
            node.members = groups::members(config, &node.initial);
            self.partitions.push(node);
        }
        self.members_see_grouping(&grouping.groups);
        self.groupings.insert(version, grouping);
    }

    // ----- Gateways. -----

    fn issue(&mut self, gateway: usize, slot: usize) {
        let accounts = self.options.accounts;
        let registers = self.options.registers;
        let value = self.history.invocations.len() as i64 + 1;
        let roll = self.prng.below(100);
        let options = &self.options;
        let (kind, txn) = if roll < options.get_percent {
            let key = self.prng.below(accounts + registers);
            (
                Kind::Get,
                Txn {
                    reads: vec![key],
                    ..Txn::default()
                },
            )
        } else if roll < options.get_percent + options.put_percent {
            let key = accounts + self.prng.below(registers);
            (
                Kind::Put,
                Txn {
                    writes: vec![(key, value)],
                    ..Txn::default()
                },
            )
        } else if roll < options.get_percent + options.put_percent + options.txn_percent {
            let mut keys: Vec<u64> = (accounts..accounts + registers).collect();
            self.prng.shuffle(&mut keys);
            let reads = self.prng.range_inclusive(1, 2) as usize;
            let writes =
                self.prng
                    .range_inclusive(1, (registers - reads as u64).min(2)) as usize;
            (
                Kind::Txn,
                Txn {
                    reads: keys[..reads].to_vec(),
                    writes: keys[reads..reads + writes]
                        .iter()
                        .map(|key| (*key, value))
                        .collect(),
                    adds: Vec::new(),
                },
            )
        } else if roll
            < options.get_percent
                + options.put_percent
                + options.txn_percent
                + options.transfer_percent
        {
            let from = self.prng.below(accounts);
            let to = (from + 1 + self.prng.below(accounts - 1)) % accounts;
            let amount = self.prng.range_inclusive(1, 10) as i64;
            (
                Kind::Transfer,
                Txn {
                    adds: vec![(from, -amount), (to, amount)],
                    ..Txn::default()
                },
            )
        } else if roll
            < options.get_percent
                + options.put_percent
                + options.txn_percent
                + options.transfer_percent
                + options.incr_percent
        {
            let key = accounts + self.prng.below(registers);
            (
                Kind::Incr,
                Txn {
                    reads: vec![key],
                    adds: vec![(key, 1)],
                    ..Txn::default()
                },
            )
        } else {
            let snapshot = options.snapshot_audit_percent > 0
                && self.prng.percent(options.snapshot_audit_percent);
            (
                if snapshot {
                    Kind::SnapshotAudit
                } else {
                    Kind::Audit
                },
                Txn {
                    reads: (0..accounts).collect(),
                    ..Txn::default()
                },
            )
        };
        let partitions: BTreeSet<usize> = txn
            .keys()
            .into_iter()
            .map(|key| self.partition_of(key))
            .collect();
        let client = self.gateways[gateway].id.0;
        let history =
            self.history
                .invoke(client, self.now, kind, partitions.len() == 1, txn.clone());
        self.dispatch(gateway, slot, history, txn);
    }

    /// Submits transaction `history` to the slot's `ecast::Gateway`, which sends it through
    /// the bypass if its keys lie in one group of the configuration it knows, else through
    /// the routers.
    fn dispatch(&mut self, gateway: usize, slot: usize, history: usize, txn: Txn) {
        let configuration = self.gateways[gateway].gateway.configuration();
        let partitions: BTreeSet<ProcessId> = txn
            .keys()
            .into_iter()
            .map(|key| partition_of(configuration, key))
            .collect();
        if partitions.len() == 1 {
            // As far as the gateway knows, `ecast::Gateway`'s bypass takes it
            // (`Gateway::with_bypass`; it re-plans what a cut moved away).
            self.stats.singles += 1;
        } else {
            self.stats.multis += 1;
        }
        let positions: Vec<Position> = txn.keys().into_iter().map(position).collect();
        let mut payload = postcard::to_allocvec(&txn).expect("a txn serialises");
        let parts: Vec<u64> = txn.reads.clone();
        let snapshot = self.history.invocations[history].kind == Kind::SnapshotAudit;
        if snapshot {
            // Each group it reaches gets the whole read (`SimData::execute`: its share).
            payload = [SNAPSHOT_READ.as_slice(), &payload].concat();
        }
        let command = match (txn.reads.is_empty(), txn.writes_anything()) {
            (false, false) => GatewayCommand::Read {
                isolation: if snapshot {
                    Isolation::Snapshot
                } else {
                    Isolation::Sequential
                },
                positions,
                payload,
                parts,
            },
            (reads_nothing, _) => GatewayCommand::Write {
                positions,
                payload,
                parts,
                needs_answers: !reads_nothing,
            },
        };
        self.gateways[gateway].slots[slot] = Some(SlotOp::Multi {
            history,
            destinations: partitions,
            sequenced: None,
            answered: BTreeSet::new(),
            recall_at: u64::MAX,
        });
        self.gateway_step(
            gateway,
            GatewayInput::Submit {
                id: history as u64,
                command,
            },
        );
    }

    /// Steps gateway `gateway`'s `ecast::Gateway` and executes its effects.
    fn gateway_step(&mut self, gateway: usize, input: GatewayInput<Answer>) {
        let mut effects = Vec::new();
        self.gateways[gateway].gateway.step(input, &mut effects);
        for effect in effects {
            match effect {
                // Never emitted: this world's reads are sequential (basic reads of partition
                // groups are tested on real processes, `tests/resp_read_isolation.rs`).
                GatewayEffect::PartitionBasicRead { .. } => {}
                GatewayEffect::Request { router, request } => self.send(
                    Node::Gateway(gateway),
                    Node::Router(router),
                    Msg::Request { request },
                ),
                GatewayEffect::Sequenced {
                    id,
                    sequence,
                    timestamp,
                } => {
                    let now = self.now;
                    if let Some(pending) = self.sql_pending(id) {
                        pending.sequenced = Some((sequence, timestamp, now + RECALL_TICKS));
                        continue;
                    }
                    if let Some(sequenced) = self.statement_pending(id) {
                        *sequenced = Some((sequence, timestamp, now + RECALL_TICKS));
                        continue;
                    }
                    if let Some(SlotOp::Multi {
                        sequenced,
                        answered,
                        recall_at,
                        ..
                    }) = self.multi_slot(gateway, id)
                    {
                        if sequenced.map(|(own, _)| own) != Some(sequence) {
                            answered.clear();
                        }
                        *sequenced = Some((sequence, timestamp));
                        *recall_at = now + RECALL_TICKS;
                    }
                }
                GatewayEffect::Complete { id, completion } => {
                    if self.reconfiguring == Some(id) {
                        self.reconfiguring = None;
                        continue;
                    }
                    if (statements::STATEMENT_ID_BASE..1 << 62).contains(&id)
                        && self.statements.is_some()
                    {
                        self.statements_complete(id, completion);
                        continue;
                    }
                    if (sql::SQL_ID_BASE..1 << 62).contains(&id) && self.sql.is_some() {
                        self.sql_complete(id, completion);
                        continue;
                    }
                    let slot = self.gateways[gateway].slots.iter().position(|slot| {
                        matches!(slot, Some(SlotOp::Multi { history, .. }) if *history as u64 == id)
                    });
                    let Some(slot) = slot else {
                        continue;
                    };
                    match completion {
                        Completion::Done(answers) => {
                            let values = answers
                                .into_iter()
                                .filter_map(|(key, answer)| match answer {
                                    Answer::Int(value) => Some((key, value)),
                                    Answer::Sql(_) => None,
                                })
                                .collect();
                            self.finish(gateway, slot, id as usize, values);
                        }
                        Completion::Failed(_) => {
                            // Its outcome is unknown: the history keeps it pending.
                            self.gateways[gateway].slots[slot] = None;
                        }
                    }
                }
                GatewayEffect::Refused { .. } if self.options.reconfigure_per_10000 > 0 => {}
                GatewayEffect::Plan { id } => {
                    let mut configuration = self.gateways[gateway].gateway.configuration().clone();
                    if let Some(grouping) = self.groupings.get(&configuration.version()) {
                        // Grouped: plan against the storage processes of that version.
                        configuration = grouping.processes.clone();
                    }
                    let transformation = super::world::choose_transformation(&configuration, id);
                    let message = transformation.and_then(|transformation| {
                        self.planner.propose(&configuration, transformation).ok()
                    });
                    self.gateway_step(gateway, GatewayInput::Planned { id, message });
                }
                GatewayEffect::Refused { id, refusal } => self.fail(Violation {
                    checker: "bypass_order",
                    report: format!(
                        "gateway {gateway}'s command {id} was refused ({refusal:?}) with no \
                         configuration change"
                    ),
                }),
                GatewayEffect::SnapshotRead { .. }
                | GatewayEffect::BasicRead { .. }
                | GatewayEffect::Submitted { .. }
                | GatewayEffect::ConfigurationRefreshed { .. } => {}
                GatewayEffect::PartitionRequest {
                    partition,
                    replica,
                    request,
                    ..
                } => {
                    // (`skyros` gateways are not built `with_bypass`: this world's own
                    // single-partition path sends those transactions.)
                    if let Some(index) = self.node_index.get(&partition).copied() {
                        self.stats.lane_requests += 1;
                        self.send(
                            Node::Gateway(gateway),
                            Node::Member(index, replica),
                            Msg::PartitionRequest { request },
                        );
                    }
                }
                GatewayEffect::BypassGroups { .. } => {}
            }
        }
    }

    fn multi_slot(&mut self, gateway: usize, id: u64) -> Option<&mut SlotOp> {
        self.gateways[gateway]
            .slots
            .iter_mut()
            .flatten()
            .find(|slot| matches!(slot, SlotOp::Multi { history, .. } if *history as u64 == id))
    }

    fn gateway_tick(&mut self, gateway: usize) {
        self.gateway_step(gateway, GatewayInput::Tick);
        if self.sql.is_some() {
            self.sql_tick(gateway);
            return;
        }
        if self.statements.is_some() {
            self.statements_tick(gateway);
            return;
        }
        for slot in 0..self.options.slots {
            match self.gateways[gateway].slots[slot].clone() {
                None => {
                    if self.faults_on() && self.now >= self.gateways[gateway].idle_until[slot] {
                        self.issue(gateway, slot);
                    }
                }
                Some(SlotOp::Multi {
                    sequenced: Some((sequence, timestamp)),
                    destinations,
                    answered,
                    recall_at,
                    ..
                }) => {
                    if self.now >= recall_at {
                        if let Some(SlotOp::Multi { recall_at, .. }) =
                            &mut self.gateways[gateway].slots[slot]
                        {
                            *recall_at = self.now + RECALL_TICKS;
                        }
                        // Under reconfiguration the message may have been re-planned against
                        // other partitions: ask every one (an unknown answer is not sent).
                        let destinations = if self.options.reconfigure_per_10000 > 0 {
                            self.partitions
                                .iter()
                                .map(|partition| partition.id)
                                .collect()
                        } else {
                            destinations
                        };
                        for process in destinations {
                            if !answered.contains(&process) {
                                let index = self.index_of(process);
                                self.send(
                                    Node::Gateway(gateway),
                                    Node::Partition(index),
                                    Msg::Recall {
                                        timestamp,
                                        gateway,
                                        sequence,
                                    },
                                );
                            }
                        }
                    }
                }
                Some(SlotOp::Multi { .. }) => {}
            }
        }
    }

    fn on_gateway(&mut self, gateway: usize, message: Msg) {
        match message {
            Msg::RouterReply(reply) => self.gateway_step(gateway, GatewayInput::Router(reply)),
            Msg::Stable {
                sequence,
                timestamp,
            } => self.gateway_step(
                gateway,
                GatewayInput::Stable {
                    sequence,
                    timestamp,
                },
            ),
            Msg::Watermark(watermark) => {
                self.gateway_step(gateway, GatewayInput::Watermark(watermark))
            }
            Msg::PartitionReply { partition, message } => {
                self.gateway_step(gateway, GatewayInput::Partition { partition, message })
            }
            Msg::PartitionReleased {
                partition,
                client,
                number,
                result,
            } => self.gateway_step(
                gateway,
                GatewayInput::Released {
                    partition,
                    client,
                    number,
                    result,
                },
            ),
            Msg::MultiAnswer {
                sequence,
                partition,
                values,
            } => {
                for slot in self.gateways[gateway].slots.iter_mut().flatten() {
                    if let SlotOp::Multi {
                        sequenced: Some((own, _)),
                        answered,
                        ..
                    } = slot
                    {
                        if *own == sequence {
                            answered.insert(partition);
                        }
                    }
                }
                let answers = values.into_iter().collect();
                self.gateway_step(gateway, GatewayInput::Answer { sequence, answers });
            }
            _ => {}
        }
    }

    fn finish(&mut self, gateway: usize, slot: usize, history: usize, values: Values) {
        self.history.complete(history, self.now, values);
        self.stats.completed += 1;
        self.gateways[gateway].slots[slot] = None;
        let think = self.prng.range_inclusive(0, self.options.think_ticks_max);
        self.gateways[gateway].idle_until[slot] = self.now + think;
    }

    // ----- The run. -----

    fn nemesis(&mut self) {
        self.router_faults();
        if !self.faults_on() {
            self.member_faults();
            return;
        }
        if self.options.reconfigure_per_10000 > 0
            && self.reconfiguring.is_none()
            && self.prng.chance(self.options.reconfigure_per_10000, 10_000)
        {
            // The nemesis as super process: a keyspace message planned by gateway 0's driver
            // (`GatewayEffect::Plan`), the draw being the command's id.
            let id = (1 << 62) | (self.prng.next_u64() >> 2);
            self.reconfiguring = Some(id);
            self.stats.reconfigurations += 1;
            self.gateway_step(
                0,
                GatewayInput::Submit {
                    id,
                    command: GatewayCommand::Config,
                },
            );
        }
        self.member_faults();
    }

    /// For the liveness report: each partition with something still under way.
    fn partitions_not_idle(&self) -> String {
        let mut report = String::new();
        for (index, partition) in self.partitions.iter().enumerate() {
            let machine = self.machine(index);
            let outgoing = machine.outgoing().count();
            if machine.installing().is_empty() && machine.deferred() == 0 && outgoing == 0 {
                continue;
            }
            report.push_str(&format!(
                "[{} installing {:?} deferred {} outgoing {} version {}] ",
                partition.id.0,
                machine.installing(),
                machine.deferred(),
                outgoing,
                machine.version().0
            ));
        }
        for (timestamp, routed) in self.router_state().unstable() {
            report.push_str(&format!(
                "unstable {timestamp} (routed under {}, version after {}, {}) to {:?} ",
                routed.routed_under.0,
                routed.version_after.0,
                match &routed.envelope.routing {
                    Routing::Config { .. } => "configuration",
                    _ => "data",
                },
                routed
                    .destinations
                    .keys()
                    .map(|id| id.0)
                    .collect::<Vec<_>>()
            ));
        }
        report.push_str(&self.members_report());
        if let Some(sql) = &self.sql {
            report.push_str(&sql.report());
        }
        for (index, node) in self.gateways.iter().enumerate() {
            for id in node.gateway.pending_ids() {
                if id >= sql::SQL_ID_BASE {
                    let phase = node.gateway.describe(id).unwrap_or_default();
                    report.push_str(&format!("gateway {index} message {id:x}: {phase} "));
                }
            }
            for slot in node.slots.iter().flatten() {
                let SlotOp::Multi { history, .. } = slot;
                let phase = node.gateway.describe(*history as u64);
                report.push_str(&format!(
                    "gateway {index} command {history}: {} ",
                    phase.unwrap_or_else(|| "not pending".to_string())
                ));
            }
        }
        report
    }

    /// Above replication 1: group `index` is not in the current configuration (it retired; it
    /// must finish: `PartitionMachine::finished`).
    fn retired(&self, index: usize) -> bool {
        self.options.replication > 1 && self.current().state(self.partitions[index].id).is_none()
    }

    fn settled(&self) -> bool {
        !self.faults_on()
            && self.gateways.iter().all(|gateway| {
                gateway.slots.iter().all(Option::is_none) && gateway.gateway.pending_count() == 0
            })
            && self.router_state().unstable().is_empty()
            && self.reconfiguring.is_none()
            && self.sql.as_ref().is_none_or(sql::SqlState::settled)
            && self
                .statements
                .as_ref()
                .is_none_or(statements::StatementState::settled)
            && self.partitions.iter().enumerate().all(|(index, _)| {
                let machine = self.machine(index);
                machine.rules().waiting() == 0
                    && machine.installing().is_empty()
                    && machine.deferred() == 0
                    && machine.outgoing().next().is_none()
                    && (!self.retired(index) || machine.finished())
            })
            && self.members_settled()
    }

    /// At the end: every group holds exactly its ranges of the final configuration and no key
    /// outside them, and the bank's total is intact in the groups' data (a lost or doubled
    /// copy breaks it even if no audit saw it).
    fn check_keyspace(&self) -> Result<(), Violation> {
        let configuration = self.current();
        let fail = |report: String| {
            Err(Violation {
                checker: "bypass_keyspace",
                report,
            })
        };
        for (index, partition) in self.partitions.iter().enumerate() {
            let machine = self.machine(index);
            let expected = configuration.ranges_of(partition.id);
            if machine.holds() != Some(&expected) {
                return fail(format!(
                    "partition {} holds {:?}, configuration {} gives it {:?}",
                    partition.id.0,
                    machine.holds(),
                    configuration.version().0,
                    expected
                ));
            }
            if self.retired(index) && !machine.finished() {
                return fail(format!(
                    "retired group {} is not finished (copies outstanding or waiting): {}",
                    partition.id.0,
                    self.members_report()
                ));
            }
            if let Some(key) = machine
                .data()
                .data
                .keys()
                .find(|key| !expected.contains(position(**key)))
            {
                return fail(format!(
                    "partition {} still has key {key}, which it does not hold",
                    partition.id.0
                ));
            }
        }
        let accounts = self.options.accounts;
        let total: i64 = (0..accounts)
            .map(|key| {
                self.machine(self.index_of(partition_of(configuration, key)))
                    .data()
                    .data
                    .get(&key)
                    .copied()
                    .unwrap_or_else(|| bypass_checkers::initial_value(accounts, key))
            })
            .sum();
        let expected: i64 = (0..accounts)
            .map(|key| bypass_checkers::initial_value(accounts, key))
            .sum();
        if total != expected {
            return fail(format!(
                "the accounts' final balances in their groups sum to {total}, not {expected}"
            ));
        }
        Ok(())
    }

    pub fn run(mut self) -> BypassReport {
        let deadline = self.options.fault_ticks + self.options.liveness_ticks_max;
        loop {
            self.now += 1;
            if self.now > deadline {
                let waiting: usize = (0..self.partitions.len())
                    .map(|index| self.machine(index).rules().waiting())
                    .sum();
                self.fail(Violation {
                    checker: "liveness",
                    report: format!(
                        "not settled {} ticks after the faults stopped: {} operations open, {} \
                             unstable messages, {waiting} partition entries waiting, watermark {}, \
                             reconfiguring {}; partitions not idle: {}",
                        self.options.liveness_ticks_max,
                        self.history.invocations.len() - self.history.completed(),
                        self.router_state().unstable().len(),
                        self.router_state().stable_watermark(),
                        self.reconfiguring.is_some(),
                        self.partitions_not_idle()
                    ),
                });
                break;
            }
            self.nemesis();
            while let Some(entry) = self.network.first_entry() {
                if entry.key().0 > self.now {
                    break;
                }
                let (to, message) = entry.remove();
                self.deliver(to, message);
            }
            self.tick_members();
            self.tick_routers();
            for gateway in 0..self.gateways.len() {
                self.gateway_tick(gateway);
            }
            if self.violation.is_some() || self.settled() {
                break;
            }
        }
        self.stats.ticks = self.now;
        self.stats.operations = self.history.invocations.len();
        self.stats.fast_acks = self
            .gateways
            .iter()
            .map(|node| node.gateway.stats().nilext_fast)
            .sum();
        self.stats.gate_refusals = self.members_nilext_refused();
        self.stats.comm_fast = self
            .gateways
            .iter()
            .map(|node| node.gateway.stats().comm_fast)
            .sum();
        self.stats.held = (0..self.partitions.len())
            .map(|index| self.machine(index).rules().stats().held)
            .sum();
        self.stats.snapshot_audits = self
            .history
            .invocations
            .iter()
            .filter(|invocation| {
                invocation.kind == Kind::SnapshotAudit && invocation.output.is_some()
            })
            .count() as u64;
        for node in &self.gateways {
            let stats = node.gateway.stats();
            self.stats.snapshot_answered += stats.snapshot_group_answered;
            self.stats.snapshot_refusals += stats.snapshot_refusals;
            self.stats.snapshot_fallbacks += stats.snapshot_group_fallbacks;
        }
        let mut result = match self.violation.take() {
            Some(violation) => Err(violation),
            None => Ok(()),
        };
        if result.is_ok() {
            result = self
                .order
                .at_end()
                .and_then(|()| bypass_checkers::check_serializability(&self.history))
                .and_then(|()| self.check_keyspace())
                .and_then(|()| self.check_agreement());
            if result.is_ok() && self.sql.is_some() {
                result = self.check_sql();
            }
            if result.is_ok() && self.statements.is_some() {
                result = self.check_statements();
            }
        }
        if let Some(statements) = &self.statements {
            self.stats.statements = statements.stats.clone();
        }
        self.stats.sql_batch_largest = self
            .partitions
            .iter()
            .flat_map(|node| &node.members)
            .filter_map(|member| member.replica.as_ref())
            .filter_map(|replica| replica.state_machine().data().sql_store())
            .map(|store| store.cycles.largest)
            .max()
            .unwrap_or(0);
        if let Some(sql) = &self.sql {
            self.stats.sql = sql.stats.clone();
        }
        BypassReport {
            seed: self.options.seed,
            trace_hash: self.trace_hash,
            stats: self.stats,
            result,
        }
    }

    fn deliver(&mut self, to: Node, message: Msg) {
        let (node_code, message_code) = (
            match to {
                Node::Router(index) => 200 + u64::from(index),
                Node::Partition(index) => 1 + index as u64,
                Node::Gateway(index) => 100 + index as u64,
                Node::Member(index, member) => 1_000 + 8 * index as u64 + u64::from(member),
            },
            message_code(&message),
        );
        self.hash(self.now);
        self.hash(node_code << 8 | message_code);
        match to {
            Node::Router(index) => self.on_router(index, message),
            Node::Partition(_) => unreachable!("`send` addresses a group's members"),
            Node::Member(index, member) => self.on_member(index, member, message),
            Node::Gateway(index) => self.on_gateway(index, message),
        }
    }
}

fn message_code(message: &Msg) -> u64 {
    match message {
        Msg::Request { .. } => 1,
        Msg::RouterReply(_) => 2,
        Msg::Stable { .. } => 3,
        Msg::Watermark(_) => 4,
        Msg::StableSet(_) => 5,
        Msg::Deliver { .. } => 6,
        Msg::Confirm { .. } => 7,
        Msg::Recall { .. } => 10,
        Msg::MultiAnswer { .. } => 11,
        Msg::Copy { .. } => 13,
        Msg::CopyAck { .. } => 14,
        Msg::Vr { .. } => 15,
        Msg::PartitionRequest { .. } => 16,
        Msg::PartitionReply { .. } => 17,
        Msg::PartitionReleased { .. } => 18,
    }
}

/// Runs one seed of the bypass mode.
pub fn run(options: BypassOptions) -> BypassReport {
    BypassSimulation::new(options).run()
}

/// A failed seed: (seed, report, checker, or "panic").
pub type BypassFailure = super::SweepFailure;

/// Runs `seeds` (under `canary`, if any) on two threads, for tests; a panic counts as a failure.
pub fn sweep(seeds: &[u64], canary: Option<BypassCanary>) -> Vec<BypassFailure> {
    sweep_mode(seeds, canary, false)
}

/// `sweep`, with `skyros` partitions if asked (a canary may imply them).
pub fn sweep_mode(seeds: &[u64], canary: Option<BypassCanary>, skyros: bool) -> Vec<BypassFailure> {
    super::sweep_with(seeds, |seed| {
        let mut options = match canary {
            Some(canary) => BypassOptions::canary(seed, canary),
            None => BypassOptions::from_seed(seed),
        };
        options.skyros |= skyros;
        run(options).result
    })
}

/// Runs `seeds` with one-shot SQL statements (`--sql-statements`), under `canary` if any.
pub fn sweep_statements(seeds: &[u64], canary: Option<BypassCanary>) -> Vec<BypassFailure> {
    super::sweep_with(seeds, |seed| {
        let options = match canary {
            Some(canary) => BypassOptions::canary(seed, canary).with_sql_statements(),
            None => BypassOptions::statements(seed),
        };
        run(options).result
    })
}

/// Runs `seeds` with SQL transactions and statements outside them (`--sql-autocommit`).
pub fn sweep_sql_autocommit(seeds: &[u64]) -> Vec<BypassFailure> {
    super::sweep_with(seeds, |seed| {
        run(BypassOptions::sql_autocommit(seed)).result
    })
}

/// Runs `seeds` with SQL transactions (`--sql-transactions`), under `canary` if any.
pub fn sweep_sql(seeds: &[u64], canary: Option<BypassCanary>) -> Vec<BypassFailure> {
    super::sweep_with(seeds, |seed| {
        let options = match canary {
            Some(canary) => BypassOptions::canary(seed, canary).with_sql_transactions(),
            None => BypassOptions::sql(seed),
        };
        run(options).result
    })
}
