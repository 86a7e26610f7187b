//! Everything one seed decides: cluster shape, protocol knobs, fault mix and workload.

use stdx::Prng;
use vr::{Canary, Config, Durability, Protocol};

/// The fault mix of one run. Percentages are per message (or per tick for the nemesis).
#[derive(Clone, Debug)]
pub struct Faults {
    /// Message loss, 0–30 %.
    pub loss_percent: u64,
    /// Message duplication.
    pub duplicate_percent: u64,
    /// One-way delay is drawn from 1..=delay_ticks_max (so messages reorder).
    pub delay_ticks_max: u64,
    /// Chance per tick that the partition layout changes (symmetric or one-way), in 1/10000.
    pub partition_per_10000: u64,
    /// Chance per tick that a replica crashes (and later restarts), in 1/10000.
    pub crash_per_10000: u64,
    /// Chance per tick that a replica is paused (and later resumed), in 1/10000.
    pub pause_per_10000: u64,
    /// Per replica: ticks delivered per 100 global ticks (clock skew), 50..=150.
    pub clock_rate_percent: Vec<u64>,
    /// Disk write latency is drawn from 1..=disk_ticks_max.
    pub disk_ticks_max: u64,
}

/// The simulated workload.
#[derive(Clone, Debug)]
pub struct Workload {
    pub clients: usize,
    /// Key families: multi-key operations stay within one family, so the linearisability
    /// check can split the history per family (P-compositionality).
    pub families: usize,
    pub family_size: usize,
    /// A client waits up to this long between getting a reply and sending its next request.
    pub think_ticks_max: u64,
    /// A client resends an unanswered request after this long (to the next replica).
    pub retry_ticks: u64,
    /// Skyros: non-nilext writes go the Skyros-Comm way (to every replica, completing in one
    /// round trip when they commute with every pending update).
    pub skyros_comm: bool,
    /// SQL seeds: tables in every replica's initial store and engine commands among the KV ones.
    pub sql: Option<SqlWorkload>,
}

/// The SQL half of a workload.
#[derive(Clone, Debug)]
pub struct SqlWorkload {
    /// Per table `acct_<n>`: the column of its secondary index, if it has one.
    pub indexes: Vec<Option<&'static str>>,
    /// The share of a client's operations that are SQL commands.
    pub percent: u64,
}

#[derive(Clone, Debug)]
pub struct Options {
    pub seed: u64,
    pub config: Config,
    pub faults: Faults,
    pub workload: Workload,
    /// Ticks of the safety phase (faults on, clients busy).
    pub fault_ticks: u64,
    /// After the faults stop, every outstanding request must complete within this many ticks.
    pub liveness_ticks_max: u64,
    /// A frame limit between replicas, like the runtime link's (`--frame-bytes`): the network
    /// drops a larger message and the replicas' `message_bytes_max` is set to it, so that
    /// view changes, state transfers and recoveries go in parts. None: no limit (not drawn,
    /// so every seed runs as it did before).
    pub frame_bytes_max: Option<u64>,
}

impl Options {
    /// Draws a whole run from `seed`.
    pub fn from_seed(seed: u64) -> Options {
        let mut prng = Prng::new(seed);
        let replica_count = if prng.percent(50) { 3 } else { 5 };
        let durability = if prng.percent(50) {
            Durability::Memory
        } else {
            Durability::Disk
        };
        let mut config = Config::new(replica_count, durability);
        config.batch_requests_max = prng.range_inclusive(1, 16) as usize;
        config.batch_linger_ticks = prng.range_inclusive(1, 3);
        config.pipeline_ops_max = prng.range_inclusive(1, 8);
        config.heartbeat_ticks = prng.range_inclusive(5, 15);
        config.primary_timeout_ticks = config.heartbeat_ticks * prng.range_inclusive(4, 10);
        config.view_change_timeout_ticks = prng.range_inclusive(60, 200);
        config.resend_ticks = prng.range_inclusive(10, 30);
        config.checkpoint_interval_ops = prng.range_inclusive(4, 64);
        config.log_retained_ops = prng.range_inclusive(0, 16);
        config.request_queue_max = prng.range_inclusive(8, 256) as usize;
        config.read_queue_max = prng.range_inclusive(8, 256) as usize;
        // Derived, not drawn, so that every seed draws what it drew before these knobs.
        config.read_batch_max = (config.read_queue_max / 4).max(1);
        // About as many bytes as the op count's worth of small commands: big SQL batches and
        // pipelines reach it first.
        config.checkpoint_interval_bytes = config.checkpoint_interval_ops * 48;

        let quiet = prng.percent(10); // Some runs have no faults at all: a clean baseline.
        let faults = Faults {
            loss_percent: if quiet {
                0
            } else {
                prng.range_inclusive(0, 30)
            },
            duplicate_percent: if quiet { 0 } else { prng.range_inclusive(0, 5) },
            delay_ticks_max: prng.range_inclusive(1, 12),
            partition_per_10000: if quiet || prng.percent(30) {
                0
            } else {
                prng.range_inclusive(5, 40)
            },
            crash_per_10000: if quiet || prng.percent(25) {
                0
            } else {
                prng.range_inclusive(5, 30)
            },
            pause_per_10000: if quiet || prng.percent(50) {
                0
            } else {
                prng.range_inclusive(5, 20)
            },
            clock_rate_percent: (0..replica_count)
                .map(|_| {
                    if quiet || prng.percent(50) {
                        100
                    } else {
                        prng.range_inclusive(50, 150)
                    }
                })
                .collect(),
            disk_ticks_max: prng.range_inclusive(1, 4),
        };
        let clients = prng.range_inclusive(2, 24) as usize;
        let workload = Workload {
            clients,
            // At most about six clients per family: a part of the history with two dozen
            // concurrent clients can exhaust the linearisability search (it reports "unknown").
            families: (prng.range_inclusive(2, 8) as usize).max(clients.div_ceil(6)),
            family_size: prng.range_inclusive(1, 3) as usize,
            think_ticks_max: prng.range_inclusive(0, 10),
            retry_ticks: prng.range_inclusive(40, 120),
            skyros_comm: false,
            sql: None,
        };
        let fault_ticks = prng.range_inclusive(2_000, 6_000);
        // Drawn last, so that every other draw of a seed is the same under either protocol.
        config.protocol = if prng.percent(50) {
            Protocol::Skyros
        } else {
            Protocol::Vr
        };
        let mut workload = workload;
        workload.skyros_comm = prng.percent(50);
        // Drawn after everything else, so a seed's other draws are what they were before SQL.
        // About four clients per table: the strict serialisability check searches each table's
        // history, and "unknown" (budget spent) counts as a failure.
        if prng.percent(50) {
            let tables = (prng.range_inclusive(1, 3) as usize).max(clients.div_ceil(4));
            let indexes = (0..tables)
                .map(|_| match prng.below(4) {
                    0 => Some("owner"),
                    1 => Some("balance"),
                    _ => None,
                })
                .collect();
            workload.sql = Some(SqlWorkload {
                indexes,
                percent: prng.range_inclusive(30, 80),
            });
        }
        Options {
            seed,
            config,
            faults,
            workload,
            fault_ticks,
            liveness_ticks_max: 4_000,
            frame_bytes_max: None,
        }
    }

    /// `seed`'s run behind a frame limit of `frame_bytes` between replicas (the replicas'
    /// message bound set to it).
    pub fn with_frame_limit(mut self, frame_bytes: u64) -> Options {
        self.frame_bytes_max = Some(frame_bytes);
        self.config.message_bytes_max = frame_bytes;
        self
    }

    /// A deliberately broken variant, under enough loss, crashes and partitions to show it.
    pub fn canary(seed: u64, canary: Canary) -> Options {
        let mut options = Options::from_seed(seed);
        options.config.canary = Some(canary);
        if canary == Canary::RecoveryThresholdTooHigh {
            options.config.protocol = Protocol::Skyros;
        }
        options.faults.loss_percent = options.faults.loss_percent.max(10);
        options.faults.crash_per_10000 = options.faults.crash_per_10000.max(20);
        options.faults.partition_per_10000 = options.faults.partition_per_10000.max(20);
        options
    }

    /// One line describing the run, printed before anything else.
    pub fn describe(&self) -> String {
        let config = &self.config;
        let faults = &self.faults;
        format!(
            "replicas={} protocol={:?} durability={:?} batch={} linger={} pipeline={} heartbeat={} primary_timeout={} \
             checkpoint_interval={} retained={} clients={} families={}x{} loss={}% dup={}% delay<={} \
             partitions={} crashes={} pauses={} skew={:?} fault_ticks={} skyros_comm={}{}{}{}",
            config.replica_count,
            config.protocol,
            config.durability,
            config.batch_requests_max,
            config.batch_linger_ticks,
            config.pipeline_ops_max,
            config.heartbeat_ticks,
            config.primary_timeout_ticks,
            config.checkpoint_interval_ops,
            config.log_retained_ops,
            self.workload.clients,
            self.workload.families,
            self.workload.family_size,
            faults.loss_percent,
            faults.duplicate_percent,
            faults.delay_ticks_max,
            faults.partition_per_10000,
            faults.crash_per_10000,
            faults.pause_per_10000,
            faults.clock_rate_percent,
            self.fault_ticks,
            self.workload.skyros_comm,
            self.workload.sql.as_ref().map_or(String::new(), |sql| format!(
                " sql={}%x{} indexes={:?}",
                sql.percent,
                sql.indexes.len(),
                sql.indexes
            )),
            config.canary.map_or(String::new(), |canary| format!(" canary={canary:?}")),
            self.frame_bytes_max.map_or(String::new(), |bytes| format!(" frame_bytes={bytes}")),
        )
    }
}
