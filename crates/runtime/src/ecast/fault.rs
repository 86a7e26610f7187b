//! Faults a real-process test injects into a router (hidden, debug builds only). A fault here is
//! something a network can do — delay a link — never a change of what the protocol decides, so a
//! test that runs with one checks the protocol under that fault, and a canary (see
//! `TESSERA_CANARY_*`) is what changes behaviour.
//!
//! `TESSERA_TEST_SLOW_PARTITION=<partition>:<milliseconds>` makes every delivery the router sends
//! to `vr` partition `<partition>` (its id in the router configuration) leave that much later, in
//! the order it was sent: a destination that lags behind the others, which is what rule A of
//! `docs/internals/ecast.md` is about.

//!
//! `TESSERA_TEST_NO_DECISIONS=1` makes a storage process's gateway stop a two-phase SQL
//! statement (`store::prepared`) after its prepare, as if the process died between the two
//! phases: it answers the client that the outcome is unknown and never sends the decision, so
//! the statement holds its tables until another gateway aborts it. DDL, also two-phase over
//! several partitions, is decided all the same (the tests create their tables first).
//!
//! `TESSERA_CANARY_STAMP_LAG_MS=<milliseconds>` (a canary, not a fault) makes a storage process's
//! gateway stamp the commands it plans that much in the past (`stamp_now_ms`): its expiries are
//! decided by a clock that lags the client's, which `tests/redis_expiry_faults.rs`'s checker must
//! refuse.

use super::link::{Frame, Links};
use placement::ProcessId;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// A delayed link to one partition's members.
pub struct SlowPartition {
    partition: ProcessId,
    delay: Duration,
    queue: mpsc::UnboundedSender<(Instant, SocketAddr, Frame)>,
}

impl SlowPartition {
    /// The fault the environment asks for, if any (never in release builds). A malformed value
    /// is reported and ignored.
    pub fn from_environment(links: &Links) -> Option<SlowPartition> {
        if !cfg!(debug_assertions) {
            return None;
        }
        let value = std::env::var("TESSERA_TEST_SLOW_PARTITION").ok()?;
        let Some((partition, delay)) = parse(&value) else {
            crate::log::warn(format_args!(
                "TESSERA_TEST_SLOW_PARTITION={value:?} is not <partition>:<milliseconds>; ignored"
            ));
            return None;
        };
        let (queue, mut receiver) = mpsc::unbounded_channel::<(Instant, SocketAddr, Frame)>();
        let links = links.clone();
        // One task sends the frames in the order they were queued, each when it is due.
        tokio::spawn(async move {
            while let Some((due, to, frame)) = receiver.recv().await {
                tokio::time::sleep_until(due).await;
                links.send(to, frame);
            }
        });
        crate::log::info(format_args!(
            "test fault: deliveries to partition {} are delayed by {} ms",
            partition.0,
            delay.as_millis()
        ));
        Some(SlowPartition {
            partition,
            delay,
            queue,
        })
    }

    /// Sends `frame` to `to` late if it is a delivery to the slow partition; gives it back
    /// otherwise.
    pub fn delay(&self, partition: ProcessId, to: SocketAddr, frame: Frame) -> Option<Frame> {
        if partition != self.partition {
            return Some(frame);
        }
        let _ = self.queue.send((Instant::now() + self.delay, to, frame));
        None
    }
}

/// Whether this process's gateway drops two-phase statements' decisions (never in release
/// builds).
pub fn no_decisions() -> bool {
    static NO_DECISIONS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *NO_DECISIONS.get_or_init(|| {
        cfg!(debug_assertions) && std::env::var_os("TESSERA_TEST_NO_DECISIONS").is_some()
    })
}

/// The time a gateway stamps a command it plans with (`docs/internals/redis.md`, "Time"): the
/// unix clock, or (debug builds, `TESSERA_CANARY_STAMP_LAG_MS`) that clock set back by the
/// canary's lag.
pub fn stamp_now_ms() -> u64 {
    static LAG_MS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let lag_ms = *LAG_MS.get_or_init(|| {
        if !cfg!(debug_assertions) {
            return 0;
        }
        std::env::var("TESSERA_CANARY_STAMP_LAG_MS")
            .ok()
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(0)
    });
    crate::os::unix_now_ms().saturating_sub(lag_ms)
}

fn parse(value: &str) -> Option<(ProcessId, Duration)> {
    let (partition, milliseconds) = value.split_once(':')?;
    let partition = ProcessId(partition.trim().parse().ok()?);
    let delay = Duration::from_millis(milliseconds.trim().parse().ok()?);
    Some((partition, delay))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fault_is_a_partition_and_a_delay() {
        assert_eq!(
            parse("4:250"),
            Some((ProcessId(4), Duration::from_millis(250)))
        );
        assert_eq!(parse("4"), None);
        assert_eq!(parse("x:250"), None);
        assert_eq!(parse("4:-1"), None);
    }
}
