//! Everything one E-Cast seed decides: the router group, the storage ring, the fault mix and
//! the workload. Drawn in a fixed order from the seed, so a seed always means the same run.

use placement::migration::{MigrationCanary, MigrationSettings};
use stdx::Prng;
use vr::{Config, Durability};

/// A deliberately broken variant (hidden, test-only); each must be caught by a checker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EcastCanary {
    /// Storage processes deliver any newer message without the `previous` check.
    InboxSkipsGapCheck,
    /// Routers call a message stable once one destination confirmed it.
    StableOnFirstConfirm,
    /// A follower router that becomes primary rebuilds its routing state without the settled
    /// routes (`ecast::Canary::RebuildForgetsSettledRoutes`).
    RebuildForgetsSettledRoutes,
    /// The forwarder settles unstable messages too (`ecast::Canary::SettleUnstable`).
    SettleUnstable,
    /// The router group's primary commits without a quorum (VR's canary).
    RouterCommitWithoutQuorum,
    /// A receiving storage process applies later deliveries before its copy is installed
    /// (`placement::migration::MigrationCanary::ServeBeforeInstalled`).
    MigrationServesBeforeInstall,
    /// A sending storage process does not hold later items touching a range while it
    /// captures it in slices (`placement::migration::MigrationCanary::CaptureWithoutHold`).
    MigrationCaptureWithoutHold,
}

#[derive(Clone, Debug)]
pub struct EcastOptions {
    pub seed: u64,
    /// The router group: 3 or 5 VR replicas, diskless (the paper's routers keep no disk).
    pub router_config: Config,
    /// Storage processes on the ring, 4–6, in `sequenced` mode (they apply the E-Cast stream).
    pub storage_processes: u64,
    /// Replication factor on the ring, 1–3.
    pub replication: u8,
    /// Message loss 0–20 %, on every link.
    pub loss_percent: u64,
    pub duplicate_percent: u64,
    /// One-way delay 1..=delay_ticks_max (so messages reorder).
    pub delay_ticks_max: u64,
    /// Per tick: a router crashes (and restarts 20–400 ticks later), in 1/10000.
    pub router_crash_per_10000: u64,
    /// Per tick: the router partition layout changes, in 1/10000.
    pub partition_per_10000: u64,
    /// Storage processes that may crash for good during the run: at most replication − 1, so
    /// every range keeps a live replica. Each crash is reported by a Suspect message.
    pub storage_crashes_max: u64,
    pub storage_crash_per_10000: u64,
    /// Ticks from a storage crash to its Suspect submission (the failure detector's delay).
    pub suspect_delay_ticks: u64,
    /// Bank accounts (start at 100 each) and register keys.
    pub accounts: u64,
    pub registers: u64,
    /// Gateways, each with up to `slots` operations in flight (so its send window is used).
    pub gateways: usize,
    pub slots: usize,
    /// Routers' and senders' send window.
    pub window_max: u64,
    /// Share of reads (audits and gets) that are snapshot reads; the rest are sequential.
    pub snapshot_percent: u64,
    /// Share of register gets that are basic reads (straight to one storage process).
    pub basic_percent: u64,
    /// Share of operations on the bank (the rest on registers).
    pub bank_percent: u64,
    pub think_ticks_max: u64,
    pub fault_ticks: u64,
    pub liveness_ticks_max: u64,
    /// Per tick: the reconfiguration nemesis (the super process) submits a join, expand,
    /// contract, replace or rebalance, in 1/10000; 0 on seeds that do not draw it.
    pub reconfigure_per_10000: u64,
    /// Standbys that may join during the run.
    pub joins_max: u64,
    /// Partial live migration between storage processes.
    pub migration: MigrationSettings,
    /// The ring is elastic, as the runtime's (`Configuration::elastic`): a contract may leave
    /// fewer members than the replication factor (each range then has min(f, ring) replicas).
    /// Drawn only with the reconfiguration nemesis.
    pub elastic: bool,
    /// A storage process gets one `MigrationInput::Work` (one slice of engine work) every this
    /// many ticks: passes span many ticks, so deliveries interleave with them.
    pub work_every_ticks: u64,
    pub canary: Option<EcastCanary>,
}

impl EcastOptions {
    pub fn from_seed(seed: u64) -> EcastOptions {
        let mut prng = Prng::new(seed ^ 0xeca5_7eca_57ec_a57e);
        let routers = if prng.percent(70) { 3 } else { 5 };
        let mut router_config = Config::new(routers, Durability::Memory);
        router_config.heartbeat_ticks = prng.range_inclusive(5, 15);
        router_config.primary_timeout_ticks =
            router_config.heartbeat_ticks * prng.range_inclusive(4, 10);
        router_config.view_change_timeout_ticks = prng.range_inclusive(50, 150);
        router_config.resend_ticks = prng.range_inclusive(10, 30);
        router_config.batch_requests_max = prng.range_inclusive(1, 16) as usize;
        router_config.pipeline_ops_max = prng.range_inclusive(1, 8);
        let storage_processes = prng.range_inclusive(4, 6);
        let replication = prng.range_inclusive(1, 3) as u8;
        let faulty = !prng.percent(10);
        let draw = |prng: &mut Prng, low: u64, high: u64| {
            if faulty {
                prng.range_inclusive(low, high)
            } else {
                prng.next_u64();
                0
            }
        };
        let loss_percent = draw(&mut prng, 0, 20);
        let duplicate_percent = draw(&mut prng, 0, 10);
        let delay_ticks_max = prng.range_inclusive(1, 20);
        let router_crash_per_10000 = draw(&mut prng, 0, 15);
        let partition_per_10000 = draw(&mut prng, 0, 20);
        let storage_crashes_max = if replication >= 2 {
            draw(&mut prng, 0, u64::from(replication) - 1)
        } else {
            prng.next_u64();
            0
        };
        let storage_crash_per_10000 = prng.range_inclusive(2, 10);
        let suspect_delay_ticks = prng.range_inclusive(10, 200);
        let accounts = prng.range_inclusive(2, 6);
        let registers = prng.range_inclusive(2, 6);
        let gateways = prng.range_inclusive(2, 4) as usize;
        let slots = prng.range_inclusive(1, 3) as usize;
        let window_max = prng.range_inclusive(slots as u64, 8);
        let snapshot_percent = prng.range_inclusive(0, 50);
        let bank_percent = prng.range_inclusive(30, 70);
        let think_ticks_max = prng.range_inclusive(0, 30);
        let fault_ticks = prng.range_inclusive(1_500, 3_500);
        let basic_percent = prng.range_inclusive(0, 30);
        // Drawn last, so that the draws above mean what they meant before reconfiguration.
        let reconfigure = prng.percent(50);
        let reconfigure_per_10000 = prng.range_inclusive(20, 80) * u64::from(reconfigure);
        let joins_max = prng.range_inclusive(1, 4);
        // Records are about 32 bytes: chunks of 1–4 records, 1–8 records a tick.
        let migration = MigrationSettings {
            chunk_bytes_max: prng.range_inclusive(32, 128),
            in_flight_bytes_max: prng.range_inclusive(64, 512),
            bytes_per_tick_max: prng.range_inclusive(32, 256),
            bytes_per_step_max: u64::MAX,
            resend_ticks: prng.range_inclusive(20, 60),
            sender_timeout_ticks: prng.range_inclusive(1_500, 2_500),
            held_max: 10_000,
            slice_keys_max: 1,
            send_while_capturing: true,
            canary: None,
        };
        // Drawn after everything else (engine passes came later): 1–3 keys a slice, a slice
        // every 1–10 ticks per storage process, so captures, clears and deletes span many
        // ticks and interleave with deliveries.
        let mut migration = migration;
        migration.slice_keys_max = prng.range_inclusive(1, 3) as usize;
        let work_every_ticks = prng.range_inclusive(1, 10);
        // Drawn last, so that the draws above mean what they meant before.
        let elastic = reconfigure && prng.percent(50);
        // Drawn after that: on half the seeds a step sends at most 1–4 chunks' worth.
        if prng.percent(50) {
            migration.bytes_per_step_max = prng.range_inclusive(32, 256);
        }
        // Drawn after that: on a quarter of the seeds nothing is sent before a capture ends
        // (as before chunks left while capturing).
        migration.send_while_capturing = !prng.percent(25);
        EcastOptions {
            seed,
            router_config,
            storage_processes,
            replication,
            loss_percent,
            duplicate_percent,
            delay_ticks_max,
            router_crash_per_10000,
            partition_per_10000,
            storage_crashes_max,
            storage_crash_per_10000,
            suspect_delay_ticks,
            accounts,
            registers,
            gateways,
            slots,
            window_max,
            snapshot_percent,
            basic_percent,
            bank_percent,
            think_ticks_max,
            fault_ticks,
            liveness_ticks_max: 8_000,
            reconfigure_per_10000,
            joins_max,
            migration,
            elastic,
            work_every_ticks,
            canary: None,
        }
    }

    /// The seed's run with a deliberate bug.
    pub fn canary(seed: u64, canary: EcastCanary) -> EcastOptions {
        let mut options = EcastOptions::from_seed(seed);
        options.canary = Some(canary);
        if canary == EcastCanary::RouterCommitWithoutQuorum {
            options.router_config.canary = Some(vr::Canary::CommitWithoutQuorum);
        }
        if canary == EcastCanary::MigrationServesBeforeInstall {
            options.migration.canary = Some(MigrationCanary::ServeBeforeInstalled);
            options.reconfigure_per_10000 = options.reconfigure_per_10000.max(40);
        }
        if canary == EcastCanary::MigrationCaptureWithoutHold {
            options.migration.canary = Some(MigrationCanary::CaptureWithoutHold);
            options.reconfigure_per_10000 = options.reconfigure_per_10000.max(40);
        }
        options
    }

    pub fn describe(&self) -> String {
        format!(
            "ecast routers={} storage={} replication={} loss={}% dup={}% delay<={} router_crash={}/10000 \
             partition={}/10000 storage_crashes<={} accounts={} registers={} gateways={}x{} window={} \
             snapshot={}% basic={}% bank={}% ticks={} reconfigure={}/10000 joins<={} \
             chunk<={}B in_flight<={}B per_tick<={}B slice<={} work_every={}{}{}{}",
            self.router_config.replica_count,
            self.storage_processes,
            self.replication,
            self.loss_percent,
            self.duplicate_percent,
            self.delay_ticks_max,
            self.router_crash_per_10000,
            self.partition_per_10000,
            self.storage_crashes_max,
            self.accounts,
            self.registers,
            self.gateways,
            self.slots,
            self.window_max,
            self.snapshot_percent,
            self.basic_percent,
            self.bank_percent,
            self.fault_ticks,
            self.reconfigure_per_10000,
            self.joins_max,
            self.migration.chunk_bytes_max,
            self.migration.in_flight_bytes_max,
            self.migration.bytes_per_tick_max,
            self.migration.slice_keys_max,
            self.work_every_ticks,
            if self.elastic { " elastic" } else { "" },
            if self.migration.send_while_capturing {
                ""
            } else {
                " capture_first"
            },
            self.canary
                .map_or(String::new(), |canary| format!(" canary={canary:?}"))
        )
    }
}
