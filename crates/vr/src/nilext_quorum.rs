//! The Skyros client's completion rule for one nilext request (`docs/internals/skyros.md`).
//!
//! A nilext request completes when, in one view, the primary and enough other replicas
//! (f + ⌈f/2⌉ + 1 in all) acknowledge it *with the same prefix digest as the primary's*, or
//! when any replica reports it already executed. Acknowledgements with another digest hold the
//! request in a different order relative to concurrent ones; they do not count (Tessera's
//! deviation from the paper, which makes view-change recovery sound for f ≥ 2).

use crate::durability_log::supermajority;
use crate::quorum::replicas_tolerated;
use std::collections::BTreeMap;
use wire::{ReplicaIndex, View};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NilextQuorum {
    /// Per view: the primary's digest (once heard) and every replica's digest.
    acks: BTreeMap<View, BTreeMap<ReplicaIndex, u64>>,
}

impl NilextQuorum {
    pub fn new() -> NilextQuorum {
        NilextQuorum::default()
    }

    /// Records an acknowledgement; returns whether the request is now complete.
    pub fn on_ack(
        &mut self,
        replica_count: u8,
        view: View,
        replica: ReplicaIndex,
        prefix_digest: u64,
        executed: bool,
    ) -> bool {
        if executed {
            return true;
        }
        if replica.0 >= replica_count {
            return false;
        }
        let acks = self.acks.entry(view).or_default();
        acks.insert(replica, prefix_digest);
        let primary = ReplicaIndex((view.0 % u64::from(replica_count)) as u8);
        let Some(primary_digest) = acks.get(&primary) else {
            return false;
        };
        let matching = acks
            .values()
            .filter(|digest| **digest == *primary_digest)
            .count();
        matching >= supermajority(replicas_tolerated(replica_count) as usize)
    }

    /// The replicas that acknowledged in `view` (for resending to the others).
    pub fn acknowledged(&self, view: View) -> impl Iterator<Item = ReplicaIndex> + '_ {
        self.acks
            .get(&view)
            .into_iter()
            .flat_map(|acks| acks.keys().copied())
    }

    /// The latest view any replica acknowledged in.
    pub fn latest_view(&self) -> Option<View> {
        self.acks.keys().next_back().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completes_at_the_supermajority_with_the_primary_and_matching_digests() {
        let mut quorum = NilextQuorum::new();
        // 5 replicas, view 1: primary is replica 1; 4 matching acks needed.
        assert!(!quorum.on_ack(5, View(1), ReplicaIndex(0), 7, false));
        assert!(!quorum.on_ack(5, View(1), ReplicaIndex(2), 7, false));
        assert!(
            !quorum.on_ack(5, View(1), ReplicaIndex(3), 9, false),
            "other digest"
        );
        assert!(
            !quorum.on_ack(5, View(1), ReplicaIndex(4), 7, false),
            "no primary yet"
        );
        assert!(quorum.on_ack(5, View(1), ReplicaIndex(1), 7, false));
    }

    #[test]
    fn acknowledgements_of_different_views_do_not_mix() {
        let mut quorum = NilextQuorum::new();
        assert!(!quorum.on_ack(3, View(0), ReplicaIndex(0), 1, false));
        assert!(!quorum.on_ack(3, View(0), ReplicaIndex(1), 1, false));
        assert!(!quorum.on_ack(3, View(1), ReplicaIndex(2), 1, false));
        assert!(!quorum.on_ack(3, View(1), ReplicaIndex(1), 1, false));
        assert!(quorum.on_ack(3, View(0), ReplicaIndex(2), 1, false));
        assert!(
            quorum.on_ack(3, View(9), ReplicaIndex(0), 0, true),
            "executed"
        );
    }
}
