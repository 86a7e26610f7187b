//! The Skyros client's completion rule for one nilext request (`docs/internals/skyros.md`).
//!
//! A nilext request completes when, in one view, the primary and enough other replicas
//! (f + ⌈f/2⌉ + 1 in all) acknowledge it *with the same prefix digest as the primary's*, or
//! when any replica reports it already executed. Acknowledgements with another digest hold the
//! request in a different order relative to concurrent ones; they do not count (Tessera's
//! deviation from the paper, which makes view-change recovery sound for f ≥ 2).
//!
//! Except in a group of three replicas (f = 1), for a nilext (not commutative) request: there
//! the supermajority is every replica, and recovery (`durability_log::recover`, two logs, the
//! new primary's first) reproduces the new primary's own durability-log order, in which every
//! request completed before another started already precedes it; so any three acknowledgements
//! of one view, the primary's among them, complete the request whatever their digests
//! (`docs/internals/skyros.md`, deviation 1). A commutative request still needs matching
//! digests: the primary's preview assumes its own prefix.

use crate::durability_log::supermajority;
use crate::quorum::replicas_tolerated;
use std::collections::BTreeMap;
use wire::{ReplicaIndex, View};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NilextQuorum {
    /// Per view: the primary's digest (once heard) and every replica's digest.
    acks: BTreeMap<View, BTreeMap<ReplicaIndex, u64>>,
    /// Skyros-Comm: the request needs a result, which only the primary's acknowledgement (or an
    /// `executed` one) carries.
    wants_result: bool,
    /// Per view: the primary's previewed result.
    results: BTreeMap<View, Vec<u8>>,
    /// The result the request completed with.
    result: Option<Vec<u8>>,
}

impl NilextQuorum {
    /// For a nilext request, whose reply is known in advance.
    pub fn new() -> NilextQuorum {
        NilextQuorum::default()
    }

    /// For a commutative (Skyros-Comm) request: completion also needs the primary's result.
    pub fn commutative() -> NilextQuorum {
        NilextQuorum {
            wants_result: true,
            ..NilextQuorum::default()
        }
    }

    /// The result a commutative request completed with.
    pub fn result(&self) -> Option<&[u8]> {
        self.result.as_deref()
    }

    /// Records an acknowledgement; returns whether the request is now complete.
    pub fn on_ack(
        &mut self,
        replica_count: u8,
        view: View,
        replica: ReplicaIndex,
        prefix_digest: u64,
        executed: bool,
        result: Option<Vec<u8>>,
    ) -> bool {
        if executed {
            if !self.wants_result {
                // An executed acknowledgement of a plain nilext request carries no result,
                // except from a gated state machine (`StateMachine::nilext_gate`), whose
                // recorded result may say "held": only a client that knows the machine may
                // read that as the reply (the E-Cast gateway does), so it never completes here.
                return result.is_none();
            }
            if result.is_some() {
                self.result = result;
                return true;
            }
            return false;
        }
        if replica.0 >= replica_count {
            return false;
        }
        let primary = ReplicaIndex((view.0 % u64::from(replica_count)) as u8);
        if let (true, Some(result)) = (replica == primary, result) {
            self.results.insert(view, result);
        }
        let digests_matter = self.digests_matter(replica_count);
        let acks = self.acks.entry(view).or_default();
        acks.insert(replica, prefix_digest);
        let Some(primary_digest) = acks.get(&primary) else {
            return false;
        };
        let matching = acks
            .values()
            .filter(|digest| !digests_matter || **digest == *primary_digest)
            .count();
        if matching < supermajority(replicas_tolerated(replica_count) as usize) {
            return false;
        }
        if !self.wants_result {
            return true;
        }
        match self.results.get(&view) {
            Some(result) => {
                self.result = Some(result.clone());
                true
            }
            None => false,
        }
    }

    /// Whether the acknowledgements heard already rule out completion in one round trip, so
    /// that the client should take the slow path now rather than wait out its round: in the
    /// latest view the primary acknowledged, more replicas disagree with its prefix digest than
    /// a supermajority can spare; or, for a commutative request, the primary acknowledged
    /// without a result (it will reply once the request is ordered).
    pub fn hopeless(&self, replica_count: u8) -> bool {
        let Some((view, acks)) = self.acks.iter().next_back() else {
            return false;
        };
        let primary = ReplicaIndex((view.0 % u64::from(replica_count)) as u8);
        let Some(primary_digest) = acks.get(&primary) else {
            return false;
        };
        if self.wants_result && !self.results.contains_key(view) {
            return true;
        }
        if !self.digests_matter(replica_count) {
            return false;
        }
        let disagreeing = acks
            .values()
            .filter(|digest| **digest != *primary_digest)
            .count();
        let spare = replica_count as usize
            - supermajority(replicas_tolerated(replica_count) as usize).min(replica_count as usize);
        disagreeing > spare
    }

    /// Whether an acknowledgement counts only with the primary's prefix digest: always but for
    /// a nilext request in a group of three (or one) replicas, where the supermajority is every
    /// replica and recovery follows the new primary's own durability log (module doc).
    fn digests_matter(&self, replica_count: u8) -> bool {
        self.wants_result || !matches!(replica_count, 1 | 3)
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
        assert!(!quorum.on_ack(5, View(1), ReplicaIndex(0), 7, false, None));
        assert!(!quorum.on_ack(5, View(1), ReplicaIndex(2), 7, false, None));
        assert!(
            !quorum.on_ack(5, View(1), ReplicaIndex(3), 9, false, None),
            "other digest"
        );
        assert!(
            !quorum.on_ack(5, View(1), ReplicaIndex(4), 7, false, None),
            "no primary yet"
        );
        assert!(quorum.on_ack(5, View(1), ReplicaIndex(1), 7, false, None));
    }

    #[test]
    fn a_commutative_request_completes_only_with_the_primarys_result() {
        let mut quorum = NilextQuorum::commutative();
        assert!(!quorum.on_ack(3, View(0), ReplicaIndex(1), 4, false, None));
        assert!(!quorum.on_ack(3, View(0), ReplicaIndex(2), 4, false, None));
        assert!(
            !quorum.on_ack(3, View(0), ReplicaIndex(0), 4, false, None),
            "the primary did not preview a result: the request waits for its reply"
        );
        let mut quorum = NilextQuorum::commutative();
        assert!(!quorum.on_ack(3, View(0), ReplicaIndex(0), 4, false, Some(vec![7])));
        assert!(!quorum.on_ack(3, View(0), ReplicaIndex(1), 4, false, Some(vec![8])));
        assert!(quorum.on_ack(3, View(0), ReplicaIndex(2), 4, false, None));
        assert_eq!(
            quorum.result(),
            Some([7].as_slice()),
            "a backup's result is ignored"
        );
        let mut quorum = NilextQuorum::commutative();
        assert!(!quorum.on_ack(3, View(5), ReplicaIndex(1), 0, true, None));
        assert!(quorum.on_ack(3, View(5), ReplicaIndex(1), 0, true, Some(vec![1])));
    }

    #[test]
    fn a_disagreeing_replica_too_many_makes_the_round_hopeless() {
        let mut quorum = NilextQuorum::new();
        assert!(!quorum.on_ack(5, View(0), ReplicaIndex(1), 3, false, None));
        assert!(!quorum.hopeless(5), "no word from the primary yet");
        assert!(!quorum.on_ack(5, View(0), ReplicaIndex(0), 4, false, None));
        assert!(
            !quorum.hopeless(5),
            "one of five may disagree (4 of 5 needed)"
        );
        assert!(!quorum.on_ack(5, View(0), ReplicaIndex(2), 5, false, None));
        assert!(quorum.hopeless(5), "two of five disagree");
        let mut quorum = NilextQuorum::commutative();
        assert!(!quorum.on_ack(3, View(0), ReplicaIndex(0), 4, false, Some(vec![1])));
        assert!(!quorum.on_ack(3, View(0), ReplicaIndex(2), 3, false, None));
        assert!(
            quorum.hopeless(3),
            "a commutative request needs 3 of 3 with the primary's digest"
        );
        let mut quorum = NilextQuorum::commutative();
        assert!(!quorum.on_ack(3, View(0), ReplicaIndex(0), 4, false, None));
        assert!(quorum.hopeless(3), "the primary previewed no result");
    }

    #[test]
    fn with_three_replicas_a_nilext_request_completes_on_every_acknowledgement_whatever_its_digest()
    {
        let mut quorum = NilextQuorum::new();
        // View 1: the primary is replica 1.
        assert!(!quorum.on_ack(3, View(1), ReplicaIndex(0), 4, false, None));
        assert!(!quorum.on_ack(3, View(1), ReplicaIndex(2), 5, false, None));
        assert!(
            !quorum.hopeless(3),
            "not hopeless before the primary: digests do not matter"
        );
        assert!(!quorum.on_ack(3, View(2), ReplicaIndex(1), 6, false, None));
        assert!(!quorum.hopeless(3));
        assert!(
            quorum.on_ack(3, View(1), ReplicaIndex(1), 6, false, None),
            "the primary and both backups of view 1, three different digests"
        );
        let mut quorum = NilextQuorum::new();
        assert!(!quorum.on_ack(3, View(1), ReplicaIndex(1), 6, false, None));
        assert!(
            !quorum.on_ack(3, View(1), ReplicaIndex(2), 5, false, None),
            "still 3 of 3: two acknowledgements never complete"
        );
        // Five replicas keep the digest rule (f = 2: `completes_at_the_supermajority_…`).
        let mut quorum = NilextQuorum::new();
        for replica in [0, 2, 3, 4] {
            assert!(!quorum.on_ack(
                5,
                View(1),
                ReplicaIndex(replica),
                replica.into(),
                false,
                None
            ));
        }
        assert!(!quorum.on_ack(5, View(1), ReplicaIndex(1), 9, false, None));
        assert!(quorum.hopeless(5));
    }

    #[test]
    fn acknowledgements_of_different_views_do_not_mix() {
        let mut quorum = NilextQuorum::new();
        assert!(!quorum.on_ack(3, View(0), ReplicaIndex(0), 1, false, None));
        assert!(!quorum.on_ack(3, View(0), ReplicaIndex(1), 1, false, None));
        assert!(!quorum.on_ack(3, View(1), ReplicaIndex(2), 1, false, None));
        assert!(!quorum.on_ack(3, View(1), ReplicaIndex(1), 1, false, None));
        assert!(quorum.on_ack(3, View(0), ReplicaIndex(2), 1, false, None));
        assert!(
            !NilextQuorum::new().on_ack(3, View(9), ReplicaIndex(0), 0, true, Some(vec![1])),
            "a gated machine's recorded result is not a completion"
        );
        assert!(
            quorum.on_ack(3, View(9), ReplicaIndex(0), 0, true, None),
            "executed"
        );
    }
}
