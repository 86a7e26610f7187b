//! Skyros-Adapt (§6.2): a Skyros client's straggler and failure detection.
//!
//! The client keeps a moving average of each replica's acknowledgement latency (the last
//! `WINDOW` samples; a replica that did not answer within a round counts the round as its
//! latency). It sorts the averages and compares the slowest member of the fastest supermajority
//! with the slowest member of the fastest simple majority: when the former is more than
//! `STRAGGLER_FACTOR` times the latter, or no supermajority answers at all, the client switches
//! to the 2-RTT mode (the primary orders the write before it replies, as VR), and back when
//! the supermajority is healthy again. Time is whatever unit the caller measures in.

use crate::durability_log::supermajority;
use crate::quorum::{majority, replicas_tolerated};
use std::collections::VecDeque;

/// Samples per replica in the moving average (the paper's window of twenty).
pub const WINDOW: usize = 20;
/// The supermajority's slowest member may be this many times slower than the majority's.
pub const STRAGGLER_FACTOR: u64 = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AdaptMode {
    /// Nilext writes go to every replica and complete on a supermajority: one round trip.
    Normal,
    /// Nilext writes are ordered by the primary before they complete: two round trips, but only
    /// a simple majority needs to answer.
    TwoRtt,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Adapt {
    replica_count: u8,
    samples: Vec<VecDeque<u64>>,
    mode: AdaptMode,
}

impl Adapt {
    pub fn new(replica_count: u8) -> Adapt {
        Adapt {
            replica_count,
            samples: vec![VecDeque::new(); replica_count as usize],
            mode: AdaptMode::Normal,
        }
    }

    pub fn mode(&self) -> AdaptMode {
        self.mode
    }

    /// A replica acknowledged after `latency` (or did not within a round: pass the round).
    pub fn record(&mut self, replica: u8, latency: u64) {
        let Some(samples) = self.samples.get_mut(replica as usize) else {
            return;
        };
        if samples.len() == WINDOW {
            samples.pop_front();
        }
        samples.push_back(latency);
    }

    /// Each replica's average latency; `None` for a replica with no sample yet.
    pub fn averages(&self) -> Vec<Option<u64>> {
        self.samples
            .iter()
            .map(|samples| {
                (!samples.is_empty()).then(|| samples.iter().sum::<u64>() / samples.len() as u64)
            })
            .collect()
    }

    /// Re-decides the mode from the averages; returns it.
    pub fn decide(&mut self) -> AdaptMode {
        let mut averages: Vec<u64> = self.averages().into_iter().flatten().collect();
        averages.sort_unstable();
        let tolerated = replicas_tolerated(self.replica_count) as usize;
        let super_size = supermajority(tolerated);
        let majority_size = majority(self.replica_count) as usize;
        if averages.len() < majority_size {
            return self.mode; // Too little evidence: keep the mode.
        }
        self.mode = match averages.get(super_size - 1) {
            None => AdaptMode::TwoRtt, // No supermajority has answered.
            Some(slowest_super) => {
                let slowest_majority = averages[majority_size - 1].max(1);
                if *slowest_super > STRAGGLER_FACTOR * slowest_majority {
                    AdaptMode::TwoRtt
                } else {
                    AdaptMode::Normal
                }
            }
        };
        self.mode
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_straggler_in_the_supermajority_switches_to_two_round_trips_and_back() {
        let mut adapt = Adapt::new(5);
        for _ in 0..WINDOW {
            for (replica, latency) in [(0, 100), (1, 110), (2, 120), (3, 130), (4, 140)] {
                adapt.record(replica, latency);
            }
        }
        assert_eq!(adapt.decide(), AdaptMode::Normal);
        // Two replicas 300 units slower: the 4th fastest (supermajority of 5) is > 3x the 3rd.
        for _ in 0..WINDOW {
            adapt.record(3, 500);
            adapt.record(4, 500);
        }
        assert_eq!(adapt.decide(), AdaptMode::TwoRtt);
        // Stragglers even in the simple majority: 2-RTT would not help, back to normal (§6.2).
        for _ in 0..WINDOW {
            adapt.record(2, 500);
        }
        assert_eq!(adapt.decide(), AdaptMode::Normal);
        for _ in 0..WINDOW {
            for replica in 2..5 {
                adapt.record(replica, 120);
            }
        }
        assert_eq!(adapt.decide(), AdaptMode::Normal);
    }

    #[test]
    fn a_missing_supermajority_switches_to_two_round_trips() {
        let mut adapt = Adapt::new(3);
        adapt.record(0, 50);
        adapt.record(1, 60);
        assert_eq!(
            adapt.decide(),
            AdaptMode::TwoRtt,
            "replica 2 never answered"
        );
        adapt.record(2, 70);
        assert_eq!(adapt.decide(), AdaptMode::Normal);
        adapt.record(9, 1); // A foreign index is ignored.
        assert_eq!(adapt.averages().len(), 3);
    }
}
