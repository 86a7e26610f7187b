//! A destination's inbox (§5.4, Algorithm 1 [[10–14]]): delivers messages strictly in
//! timestamp order and gap free, confirms what it delivered, and places snapshot reads (§6.7)
//! at their point of the stream.
//!
//! Gap-freedom without knowing the global order: every delivery names the timestamp of the
//! message routed to this destination just before it (`previous`); the inbox delivers a message
//! only if `previous` is the last one it delivered. The paper discards anything else, relying
//! on FIFO channels; our channels reorder, so the inbox also buffers a bounded number of
//! early arrivals (keyed by `previous`) and delivers them when the gap closes. Duplicates are
//! dropped, and every delivery message is answered with a confirmation of everything
//! delivered so far, so a lost confirmation is repaired by the next resend.

use crate::types::{Canary, Delivery, ReadRefusal, SnapshotDelivery, Timestamp};
use placement::{ConfigVersion, ProcessId};
use std::collections::BTreeMap;
use vr::ReplicaIndex;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InboxSettings {
    /// Early arrivals kept at most (more are dropped: the forwarder resends them).
    pub buffer_max: usize,
    /// Snapshot reads waiting for their point at most (more are refused).
    pub snapshot_reads_max: usize,
    #[doc(hidden)]
    pub canary: Option<Canary>,
}

impl Default for InboxSettings {
    fn default() -> InboxSettings {
        InboxSettings {
            buffer_max: 1024,
            snapshot_reads_max: 256,
            canary: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InboxInput {
    /// Deliveries from the router with this index (the confirmation goes back to it).
    Deliver {
        router: ReplicaIndex,
        deliveries: Vec<Delivery>,
    },
    /// A snapshot read injected by the lead router.
    Snapshot(SnapshotDelivery),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InboxEffect {
    /// Hand this message to the application; effects are in delivery order.
    Deliver(Delivery),
    /// Execute this snapshot read now: after every delivery before it, before every one after.
    ExecuteSnapshot(SnapshotDelivery),
    /// Answer the read's gateway with a refusal.
    RefuseSnapshot {
        delivery: SnapshotDelivery,
        refusal: ReadRefusal,
    },
    /// Tell a router this process delivered everything routed to it up to `delivered`.
    Confirm {
        to: ReplicaIndex,
        process: ProcessId,
        delivered: Timestamp,
    },
}

/// Counters for observers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InboxStats {
    pub delivered: u64,
    pub duplicates: u64,
    pub buffered: u64,
    /// Deliveries whose `previous` contradicts what this inbox delivered (a router bug).
    pub inconsistent: u64,
}

#[derive(Clone, Debug)]
pub struct Inbox {
    process: ProcessId,
    settings: InboxSettings,
    /// The last timestamp delivered; everything routed here up to it was delivered, in order.
    delivered: Timestamp,
    /// The configuration version in force after the last delivered message.
    version: ConfigVersion,
    /// Early arrivals by `previous`. Invariant: every key is greater than `delivered`.
    buffer: BTreeMap<Timestamp, Delivery>,
    /// Snapshot reads by the timestamp they follow. Invariant: every key is greater than
    /// `delivered`.
    snapshots: BTreeMap<Timestamp, Vec<SnapshotDelivery>>,
    stats: InboxStats,
}

impl Inbox {
    /// A fresh inbox: nothing delivered, configuration `version` (the bootstrap one).
    pub fn new(process: ProcessId, version: ConfigVersion, settings: InboxSettings) -> Inbox {
        Inbox {
            process,
            settings,
            delivered: Timestamp::ZERO,
            version,
            buffer: BTreeMap::new(),
            snapshots: BTreeMap::new(),
            stats: InboxStats::default(),
        }
    }

    pub fn process(&self) -> ProcessId {
        self.process
    }

    pub fn delivered(&self) -> Timestamp {
        self.delivered
    }

    pub fn version(&self) -> ConfigVersion {
        self.version
    }

    pub fn stats(&self) -> InboxStats {
        self.stats
    }

    /// §6.7 basic read: served only if planned against this process's configuration version.
    pub fn check_basic(&self, planned_at: ConfigVersion) -> Result<(), ReadRefusal> {
        if planned_at == self.version {
            Ok(())
        } else {
            Err(ReadRefusal::VersionMismatch {
                process: self.version,
                request: planned_at,
            })
        }
    }

    /// The single entry point: appends effects, performs none.
    pub fn step(&mut self, input: InboxInput, effects: &mut Vec<InboxEffect>) {
        match input {
            InboxInput::Deliver { router, deliveries } => {
                for delivery in deliveries {
                    self.on_delivery(delivery, effects);
                }
                effects.push(InboxEffect::Confirm {
                    to: router,
                    process: self.process,
                    delivered: self.delivered,
                });
            }
            InboxInput::Snapshot(delivery) => self.on_snapshot(delivery, effects),
        }
        self.invariants();
    }

    fn on_delivery(&mut self, delivery: Delivery, effects: &mut Vec<InboxEffect>) {
        if delivery.timestamp <= self.delivered {
            self.stats.duplicates += 1;
            return;
        }
        if delivery.previous >= delivery.timestamp {
            self.stats.inconsistent += 1;
            return; // Malformed: a chain runs forwards.
        }
        let skip_gap_check = self.settings.canary == Some(Canary::InboxSkipsGapCheck);
        if delivery.previous == self.delivered || skip_gap_check {
            self.deliver(delivery, effects);
            while let Some(next) = self.buffer.remove(&self.delivered) {
                self.deliver(next, effects);
            }
            self.buffer.retain(|previous, _| *previous > self.delivered);
            return;
        }
        if delivery.previous < self.delivered {
            // It claims to follow a message before our last one, yet comes after it: the
            // chain contradicts what we delivered. Never happens with a correct router.
            self.stats.inconsistent += 1;
            return;
        }
        if self.buffer.len() < self.settings.buffer_max {
            self.stats.buffered += 1;
            self.buffer.entry(delivery.previous).or_insert(delivery);
        }
    }

    fn deliver(&mut self, delivery: Delivery, effects: &mut Vec<InboxEffect>) {
        self.delivered = delivery.timestamp;
        self.version = delivery.version;
        self.stats.delivered += 1;
        effects.push(InboxEffect::Deliver(delivery));
        // Snapshot reads placed right after this message run now; any placed before it missed
        // their point (only possible with a broken chain) and are refused.
        let waiting = self.snapshots.split_off(&self.delivered.next());
        let due = std::mem::replace(&mut self.snapshots, waiting);
        for (after, reads) in due {
            for read in reads {
                if after == self.delivered {
                    effects.push(InboxEffect::ExecuteSnapshot(read));
                } else {
                    let refusal = ReadRefusal::SnapshotPassed {
                        delivered: self.delivered,
                        after,
                    };
                    effects.push(InboxEffect::RefuseSnapshot {
                        delivery: read,
                        refusal,
                    });
                }
            }
        }
    }

    fn on_snapshot(&mut self, delivery: SnapshotDelivery, effects: &mut Vec<InboxEffect>) {
        if delivery.after == self.delivered {
            effects.push(InboxEffect::ExecuteSnapshot(delivery));
            return;
        }
        if delivery.after < self.delivered {
            let refusal = ReadRefusal::SnapshotPassed {
                delivered: self.delivered,
                after: delivery.after,
            };
            effects.push(InboxEffect::RefuseSnapshot { delivery, refusal });
            return;
        }
        let waiting: usize = self.snapshots.values().map(Vec::len).sum();
        if waiting >= self.settings.snapshot_reads_max {
            effects.push(InboxEffect::RefuseSnapshot {
                delivery,
                refusal: ReadRefusal::Overloaded,
            });
            return;
        }
        self.snapshots
            .entry(delivery.after)
            .or_default()
            .push(delivery);
    }

    fn invariants(&self) {
        if let Some((previous, _)) = self.buffer.first_key_value() {
            assert!(*previous > self.delivered, "buffered deliveries are ahead");
        }
        if let Some((after, _)) = self.snapshots.first_key_value() {
            assert!(*after > self.delivered, "waiting snapshot reads are ahead");
        }
        assert!(self.buffer.len() <= self.settings.buffer_max);
    }
}
