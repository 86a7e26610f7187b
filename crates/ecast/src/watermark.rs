//! The router group's stable watermark, for partitions with their own log (the router bypass;
//! `docs/internals/ecast.md`, "Partitions with their own replication and a router bypass").
//!
//! W = `RouterState::stable_watermark()`: every message with a timestamp ≤ W is stable. Two
//! pieces use it:
//!
//! - `WatermarkReporter`, beside the forwarder on the router group's primary: says when to
//!   send W to every partition (which logs it, rule H) and to every gateway (rule A): when it
//!   advances, and again every `resend_ticks` (reports are lost on the way; a partition
//!   ignores one that does not advance). It holds nothing that matters for safety: a new
//!   primary's reporter starts from the replicated state.
//! - `AcknowledgementGate`, in a gateway: holds the acknowledgement of each sequenced
//!   multi-partition message until a reported W covers its timestamp (rule A).
//!
//! Sequenced-mode clusters use neither; the forwarder and the router state are unchanged.

use crate::router::RouterState;
use crate::types::Timestamp;
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatermarkSettings {
    /// An unchanged watermark is reported again this often.
    pub resend_ticks: u64,
}

impl Default for WatermarkSettings {
    fn default() -> WatermarkSettings {
        WatermarkSettings { resend_ticks: 20 }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatermarkInput {
    /// One unit of logical time passed.
    Tick,
    /// The router state may have changed (call after every step of the replica).
    Sync,
}

#[derive(Clone, Debug)]
pub struct WatermarkReporter {
    settings: WatermarkSettings,
    now: u64,
    /// The last watermark reported, and when.
    reported: Option<(Timestamp, u64)>,
}

impl WatermarkReporter {
    pub fn new(settings: WatermarkSettings) -> WatermarkReporter {
        assert!(settings.resend_ticks > 0);
        WatermarkReporter {
            settings,
            now: 0,
            reported: None,
        }
    }

    /// The watermark to report now to every partition and gateway, if any.
    pub fn step(&mut self, input: WatermarkInput, state: &RouterState) -> Option<Timestamp> {
        if input == WatermarkInput::Tick {
            self.now += 1;
        }
        let watermark = state.stable_watermark();
        let due = match self.reported {
            None => true,
            Some((reported, at)) => {
                assert!(
                    watermark >= reported,
                    "the stable watermark never decreases"
                );
                watermark > reported || self.now >= at + self.settings.resend_ticks
            }
        };
        if !due {
            return None;
        }
        self.reported = Some((watermark, self.now));
        Some(watermark)
    }
}

/// Rule A at a gateway: a multi-partition message's client hears back only once the stable
/// watermark covers the message's timestamp (its stability alone is not enough: the messages
/// before it must be stable too).
#[derive(Clone, Debug, Default)]
pub struct AcknowledgementGate<Id> {
    /// The highest watermark reported.
    watermark: Timestamp,
    /// Sequenced messages waiting, by timestamp.
    waiting: BTreeMap<Timestamp, Vec<Id>>,
}

impl<Id> AcknowledgementGate<Id> {
    pub fn new() -> AcknowledgementGate<Id> {
        AcknowledgementGate {
            watermark: Timestamp::ZERO,
            waiting: BTreeMap::new(),
        }
    }

    pub fn watermark(&self) -> Timestamp {
        self.watermark
    }

    pub fn waiting(&self) -> usize {
        self.waiting.values().map(Vec::len).sum()
    }

    /// The message `id` was sequenced at `timestamp`. Returns it at once if the watermark
    /// already covers it.
    pub fn sequenced(&mut self, id: Id, timestamp: Timestamp) -> Option<Id> {
        if timestamp <= self.watermark {
            return Some(id);
        }
        self.waiting.entry(timestamp).or_default().push(id);
        None
    }

    /// A watermark report (any order, duplicates included): every message it now covers, in
    /// timestamp order, may be acknowledged.
    pub fn on_watermark(&mut self, watermark: Timestamp) -> Vec<Id> {
        if watermark <= self.watermark {
            return Vec::new();
        }
        self.watermark = watermark;
        let later = match watermark.0.checked_add(1) {
            Some(next) => self.waiting.split_off(&Timestamp(next)),
            None => BTreeMap::new(),
        };
        std::mem::replace(&mut self.waiting, later)
            .into_values()
            .flatten()
            .collect()
    }
}
