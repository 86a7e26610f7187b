use std::fmt;

/// `Config::message_bytes_max` by default: 56 MiB, 8 MiB below the runtime link's 64 MiB
/// frame limit (`runtime::ecast::link::FRAME_BYTES_MAX`), which leaves room for the frame's own
/// fields around a VR message.
pub const MESSAGE_BYTES_MAX_DEFAULT: u64 = 56 << 20;

/// The smallest `Config::message_bytes_max`: a part's fields and some of its bytes.
pub const MESSAGE_BYTES_MIN: u64 = 2 * crate::parts::PART_OVERHEAD_BYTES;

/// How a replica makes its state survive a crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Durability {
    /// Diskless: an op is durable once f + 1 replicas hold it in memory. A restarted replica
    /// has lost everything and runs VRR's recovery protocol (§4.3) before it takes part again.
    Memory,
    /// Every entry is persisted before it is acknowledged; a restarted replica replays its own
    /// records, then catches up. Survives the loss of every replica at once.
    Disk,
}

/// How a group replicates writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// Viewstamped Replication: every write is ordered by the primary before it completes.
    Vr,
    /// Skyros: nilext writes complete at a supermajority of durability logs in one round trip;
    /// the primary orders them in the background (`docs/internals/skyros.md`).
    Skyros,
}

/// A group's knobs. Durations are in ticks, the protocol's only notion of time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub replica_count: u8,
    pub durability: Durability,
    pub protocol: Protocol,
    /// Requests in one log entry at most.
    pub batch_requests_max: usize,
    /// How long the primary may hold a partial batch while other entries are in flight.
    pub batch_linger_ticks: u64,
    /// Uncommitted entries the primary keeps in flight at most.
    pub pipeline_ops_max: u64,
    /// Requests waiting for a batch at most; more are dropped (the client retries).
    pub request_queue_max: usize,
    /// Reads waiting for a read probe at most; more are dropped (the client retries).
    pub read_queue_max: usize,
    /// Ready reads answered in one step at most (one `query_batch`); the rest wait for the
    /// next step, so that a backlog of long reads does not hold the primary past its
    /// backups' timeout in one go.
    pub read_batch_max: usize,
    /// The primary sends a Commit heartbeat this often when it has nothing else to send.
    pub heartbeat_ticks: u64,
    /// A backup that hears nothing from its primary for this long starts a view change.
    pub primary_timeout_ticks: u64,
    /// A view change that has not finished after this long moves on to the next view.
    pub view_change_timeout_ticks: u64,
    /// Unanswered protocol messages (Prepare, probes, view change, GetState, Recovery) are resent
    /// this often.
    pub resend_ticks: u64,
    /// A checkpoint is taken every this many executed ops…
    pub checkpoint_interval_ops: u64,
    /// … or once the ops executed since the last one hold this many operation bytes, which
    /// bounds what a view change carries (the log after the checkpoint) when ops are large.
    pub checkpoint_interval_bytes: u64,
    /// … but an ops-due checkpoint also waits until the operation bytes executed since the
    /// last one reach this percentage of that checkpoint's serialised state: a checkpoint costs
    /// a serialisation of the whole state, so a large state with small ops would otherwise
    /// spend most of a core re-serialising itself (TPC-C with one warehouse: a quarter of the
    /// partition primary's CPU). 0 checkpoints by ops alone. The bytes bound above still holds.
    pub checkpoint_state_percent: u64,
    /// The most bytes of one message this replica sends to a peer (its frame, as
    /// `vr::message_bytes` bounds it). A larger one (a view change's log, a checkpoint in a
    /// state transfer, a Prepare of large requests) is sent in parts within it
    /// (`Message::Part`); a peer message over it that arrives whole is refused and counted.
    /// Must leave room below the transport's frame limit (the runtime's link: 64 MiB).
    pub message_bytes_max: u64,
    /// The most bytes of one message reassembled from parts; parts of a larger one are
    /// refused. A guard against nonsense counts, not a working limit: it must hold the largest
    /// checkpoint plus the log after it.
    pub message_parts_bytes_max: u64,
    /// Entries kept behind the latest checkpoint, so that slightly lagging replicas catch up
    /// from the log instead of a snapshot.
    pub log_retained_ops: u64,
    /// A deliberately broken behaviour, for proving that the simulator's checkers catch real
    /// bugs. Never set outside tests: no configuration file or command line can reach it.
    #[doc(hidden)]
    pub canary: Option<Canary>,
}

/// Deliberate protocol bugs (see `Config::canary`).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Canary {
    /// The primary commits an entry as soon as it prepares it, without a quorum.
    CommitWithoutQuorum,
    /// Messages over `message_bytes_max` are sent whole, as before parts existed: a view
    /// change whose log is larger than a frame never finishes behind a frame limit.
    UnsplitMessages,
    /// The primary serves reads at once, without a read probe: a deposed primary that does not
    /// know it yet serves stale values. Only a history checker can see this.
    ReadWithoutProbe,
    /// Skyros: durability-log recovery wants a request on ⌈f/2⌉ + 2 logs (one more than the
    /// paper's ⌈f/2⌉ + 1), so a completed nilext write missing from one participant's log is
    /// lost in a view change. (One fewer only adds requests that never completed, and misorders
    /// only in rare vote patterns: the simulator does not reliably see it.)
    RecoveryThresholdTooHigh,
    /// Skyros: the primary ignores the state machine's nilext gate (`StateMachine::nilext_gate`)
    /// and acknowledges every nilext write before ordering it, as plain Skyros does; in a
    /// partition (`ecast::PartitionMachine`) a write that rule H then holds is acknowledged.
    NilextGateIgnored,
    /// Skyros-Comm: the primary previews a commutative write's result without checking that it
    /// commutes with every pending update (an unexecuted request in its durability log or among
    /// its ordered writes that touches its keys, or an inherited entry not yet executed): an
    /// INCR behind a pending INCR of the same key completes with the stale result.
    CommPreviewUnchecked,
}

/// Why a configuration is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// A group has 1 to 255 replicas.
    ReplicaCount { replica_count: u8 },
    /// A named knob must be positive.
    Zero { knob: &'static str },
    /// A backup must wait for several heartbeats before it suspects its primary.
    TimeoutBelowHeartbeat,
    /// `message_bytes_max` must leave room for a part's fields and some bytes.
    MessageBytesTooSmall { message_bytes_max: u64 },
    /// `message_parts_bytes_max` must be at least `message_bytes_max`.
    MessagePartsBelowMessage,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::ReplicaCount { replica_count } => {
                write!(
                    formatter,
                    "a group needs at least one replica, not {replica_count}"
                )
            }
            ConfigError::Zero { knob } => write!(formatter, "{knob} must be positive"),
            ConfigError::TimeoutBelowHeartbeat => {
                write!(
                    formatter,
                    "primary_timeout_ticks must be at least twice heartbeat_ticks"
                )
            }
            ConfigError::MessageBytesTooSmall { message_bytes_max } => write!(
                formatter,
                "message_bytes_max must be at least {MESSAGE_BYTES_MIN} bytes, not {message_bytes_max}"
            ),
            ConfigError::MessagePartsBelowMessage => write!(
                formatter,
                "message_parts_bytes_max must be at least message_bytes_max"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Sensible defaults for a group of `replica_count` replicas with a 1 ms tick.
    pub fn new(replica_count: u8, durability: Durability) -> Config {
        Config {
            replica_count,
            durability,
            protocol: Protocol::Vr,
            batch_requests_max: 64,
            batch_linger_ticks: 1,
            pipeline_ops_max: 16,
            request_queue_max: 4096,
            read_queue_max: 4096,
            read_batch_max: 512,
            heartbeat_ticks: 10,
            primary_timeout_ticks: 100,
            view_change_timeout_ticks: 100,
            resend_ticks: 20,
            checkpoint_interval_ops: 16_384,
            checkpoint_interval_bytes: 64 << 20,
            checkpoint_state_percent: 50,
            log_retained_ops: 1024,
            message_bytes_max: MESSAGE_BYTES_MAX_DEFAULT,
            // A whole message is one frame before it is cut, and a frame's length is a u32.
            message_parts_bytes_max: u64::from(u32::MAX),
            canary: None,
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.replica_count == 0 {
            return Err(ConfigError::ReplicaCount {
                replica_count: self.replica_count,
            });
        }
        let knobs = [
            ("batch_requests_max", self.batch_requests_max as u64),
            ("batch_linger_ticks", self.batch_linger_ticks),
            ("pipeline_ops_max", self.pipeline_ops_max),
            ("request_queue_max", self.request_queue_max as u64),
            ("read_queue_max", self.read_queue_max as u64),
            ("read_batch_max", self.read_batch_max as u64),
            ("heartbeat_ticks", self.heartbeat_ticks),
            ("primary_timeout_ticks", self.primary_timeout_ticks),
            ("view_change_timeout_ticks", self.view_change_timeout_ticks),
            ("resend_ticks", self.resend_ticks),
            ("checkpoint_interval_ops", self.checkpoint_interval_ops),
            ("checkpoint_interval_bytes", self.checkpoint_interval_bytes),
        ];
        if let Some((knob, _)) = knobs.iter().find(|(_, value)| *value == 0) {
            return Err(ConfigError::Zero { knob });
        }
        if self.primary_timeout_ticks < 2 * self.heartbeat_ticks {
            return Err(ConfigError::TimeoutBelowHeartbeat);
        }
        if self.message_bytes_max < MESSAGE_BYTES_MIN {
            return Err(ConfigError::MessageBytesTooSmall {
                message_bytes_max: self.message_bytes_max,
            });
        }
        if self.message_parts_bytes_max < self.message_bytes_max {
            return Err(ConfigError::MessagePartsBelowMessage);
        }
        Ok(())
    }

    /// f: how many replicas may fail.
    pub fn replicas_tolerated(&self) -> u8 {
        crate::quorum::replicas_tolerated(self.replica_count)
    }

    /// f + 1.
    pub fn majority(&self) -> usize {
        crate::quorum::majority(self.replica_count) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_bound_is_validated_with_errors_that_name_the_option() {
        let config = Config::new(3, Durability::Disk);
        assert_eq!(config.validate(), Ok(()));
        assert!(config.message_bytes_max <= config.message_parts_bytes_max);
        let mut small = config.clone();
        small.message_bytes_max = MESSAGE_BYTES_MIN - 1;
        let error = small.validate().unwrap_err();
        assert!(error.to_string().contains("message_bytes_max"), "{error}");
        small.message_bytes_max = MESSAGE_BYTES_MIN;
        assert_eq!(
            small.validate(),
            Ok(()),
            "the smallest bound leaves room in a part"
        );
        let mut parts = config.clone();
        parts.message_parts_bytes_max = parts.message_bytes_max - 1;
        let error = parts.validate().unwrap_err();
        assert!(
            error.to_string().contains("message_parts_bytes_max"),
            "{error}"
        );
    }
}
