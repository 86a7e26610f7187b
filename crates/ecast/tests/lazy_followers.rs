//! Lazy follower routers (`docs/internals/ecast.md`, "Lazy follower routers"): a follower keeps
//! only the core of the router state and a new primary rebuilds the routing state from it. These
//! tests run one op sequence through a routing state (the primary's) and a follower's, and at
//! many points of it make the follower primary: its rebuilt state must equal the primary's in
//! everything (destinations and `previous` of every unstable message, `last_routed`, the
//! stability index, outcomes), and both must keep the same core (the same snapshot bytes).

use ecast::{
    Canary, Envelope, Operation, OperationResult, Outcome, RouterSettings, RouterState, Sequence,
    Timestamp,
};
use placement::ecast::{Message, Target};
use placement::{ConfigChange, ConfigMessage, ConfigVersion, Configuration, MembershipChange};
use placement::{Position, ProcessId};
use std::collections::BTreeMap;
use stdx::Prng;
use vr::StateMachine;

const SPACING: u64 = u64::MAX / 6;
const SENDERS: [ProcessId; 2] = [ProcessId(100), ProcessId(101)];

fn ring() -> Configuration {
    let members: Vec<(ProcessId, Position)> = (0..6)
        .map(|index| (ProcessId(index + 1), Position(index * SPACING)))
        .collect();
    Configuration::with_ring(3, &members)
}

fn write(sender: ProcessId, sequence: u64, owners: &[u64]) -> Envelope {
    Envelope {
        sender,
        sequence: Sequence(sequence),
        planned_at: ConfigVersion(0),
        routing: Message::Write {
            sender,
            target: Target::Points(
                owners
                    .iter()
                    .map(|owner| Position((owner - 1) * SPACING + 11))
                    .collect(),
            ),
        },
        payload: vec![sequence as u8],
    }
}

fn suspect(sender: ProcessId, sequence: u64, process: u64, version: ConfigVersion) -> Envelope {
    Envelope {
        sender,
        sequence: Sequence(sequence),
        planned_at: version,
        routing: Message::Config {
            sender,
            message: ConfigMessage {
                based_on: version,
                change: ConfigChange::Membership(MembershipChange::Suspect {
                    process: ProcessId(process),
                }),
            },
        },
        payload: Vec::new(),
    }
}

/// A primary's state and a follower's, fed the same committed ops.
struct Pair {
    primary: RouterState,
    follower: RouterState,
    /// Per destination, the timestamps routed to it (from the primary's results), so that
    /// confirmations are true: a destination confirms a prefix of its own messages.
    routed: BTreeMap<ProcessId, Vec<Timestamp>>,
    confirmed: BTreeMap<ProcessId, usize>,
    next_sequence: BTreeMap<ProcessId, u64>,
}

impl Pair {
    fn new(settings: RouterSettings) -> Pair {
        let primary = RouterState::new(ring(), settings);
        let mut follower = primary.clone();
        follower.lead(false);
        assert!(!follower.routes());
        Pair {
            primary,
            follower,
            routed: BTreeMap::new(),
            confirmed: BTreeMap::new(),
            next_sequence: BTreeMap::new(),
        }
    }

    /// Applies an op to both; returns the primary's result and the follower's.
    fn apply(&mut self, operation: &Operation) -> (OperationResult, OperationResult) {
        let bytes = operation.encode();
        let primary = OperationResult::decode(&self.primary.apply(&bytes));
        let follower = OperationResult::decode(&self.follower.apply(&bytes));
        assert_eq!(
            self.primary.snapshot(),
            self.follower.snapshot(),
            "the primary and the follower keep the same core"
        );
        (primary, follower)
    }

    fn submit(&mut self, prng: &mut Prng) {
        let sender = *prng.pick(&SENDERS);
        let count = prng.range_inclusive(1, 6);
        let mut messages = Vec::new();
        for _ in 0..count {
            let sequence = self.next_sequence.entry(sender).or_insert(1);
            let envelope = if prng.percent(3) {
                let version = self.primary.configuration().version();
                suspect(sender, *sequence, prng.range_inclusive(1, 6), version)
            } else {
                let owners: Vec<u64> = (0..prng.range_inclusive(1, 3))
                    .map(|_| prng.range_inclusive(1, 6))
                    .collect();
                let mut envelope = write(sender, *sequence, &owners);
                envelope.planned_at = self.primary.configuration().version();
                envelope
            };
            messages.push(envelope);
            *sequence += 1;
        }
        let operation = Operation::Submit { sender, messages };
        let (result, _) = self.apply(&operation);
        let OperationResult::Submitted(outcomes) = result else {
            panic!("{result:?}");
        };
        for (sequence, outcome) in outcomes {
            match outcome {
                Outcome::Sequenced {
                    timestamp,
                    destinations,
                    ..
                } => {
                    for process in destinations {
                        let routed = self.routed.entry(process).or_default();
                        if routed.last().is_none_or(|last| *last < timestamp) {
                            routed.push(timestamp);
                        }
                    }
                }
                Outcome::WindowFull | Outcome::OutOfOrder { .. } => {
                    // Not sequenced: submit it again later, in order.
                    let next = self.next_sequence.get_mut(&sender).unwrap();
                    *next = (*next).min(sequence.0);
                }
                _ => {}
            }
        }
    }

    fn confirm(&mut self, prng: &mut Prng) {
        let mut confirmations = Vec::new();
        for (process, routed) in &self.routed {
            if !prng.percent(40) {
                continue;
            }
            let confirmed = self.confirmed.entry(*process).or_default();
            if *confirmed < routed.len() {
                *confirmed =
                    prng.range_inclusive(*confirmed as u64 + 1, routed.len() as u64) as usize;
                confirmations.push((*process, routed[*confirmed - 1]));
            }
        }
        if prng.percent(50) {
            self.apply(&Operation::Confirm { confirmations });
        } else {
            let (through, routes) = self
                .primary
                .settle_point()
                .unwrap_or((self.primary.settled(), Vec::new()));
            self.apply(&Operation::Settle {
                confirmations,
                through,
                routes,
            });
        }
    }

    /// The follower becomes primary: its rebuilt routing state must be the primary's.
    fn fail_over(&mut self) {
        let mut rebuilt = self.follower.clone();
        rebuilt.lead(true);
        assert!(rebuilt.routes());
        assert_eq!(
            rebuilt, self.primary,
            "a rebuilt routing state is the primary's"
        );
        // A primary that steps down and back rebuilds the same.
        let mut again = self.primary.clone();
        again.lead(false);
        assert_eq!(again, self.follower);
        again.lead(true);
        assert_eq!(again, self.primary);
    }
}

#[test]
fn a_follower_made_primary_anywhere_rebuilds_the_primarys_routing_state() {
    let mut fail_overs = 0;
    let mut unstable_at_fail_over = 0;
    for seed in 1..=40 {
        let mut prng = Prng::new(seed);
        let settings = RouterSettings {
            window_max: prng.range_inclusive(4, 24),
            outcomes_retained: 32,
            announce_configurations: true,
            suspicions_to_groups: false,
            canary: None,
        };
        let mut pair = Pair::new(settings);
        for _ in 0..300 {
            if prng.percent(50) {
                pair.submit(&mut prng);
            } else {
                pair.confirm(&mut prng);
            }
            if prng.percent(10) {
                unstable_at_fail_over += pair.primary.unstable().len();
                fail_overs += 1;
                pair.fail_over();
            }
        }
        pair.fail_over();
    }
    assert!(fail_overs > 1_000, "{fail_overs} fail-overs");
    assert!(
        unstable_at_fail_over > 3 * fail_overs,
        "fail-overs happen amid unstable messages: {unstable_at_fail_over} in {fail_overs}"
    );
}

#[test]
fn the_rebuild_canary_makes_a_rebuilt_state_differ() {
    let mut differs = false;
    for seed in 1..=10 {
        let mut prng = Prng::new(seed);
        let settings = RouterSettings {
            window_max: 16,
            outcomes_retained: 32,
            announce_configurations: true,
            suspicions_to_groups: false,
            canary: Some(Canary::RebuildForgetsSettledRoutes),
        };
        let mut pair = Pair::new(settings);
        for _ in 0..200 {
            if prng.percent(50) {
                pair.submit(&mut prng);
            } else {
                pair.confirm(&mut prng);
            }
        }
        let mut rebuilt = pair.follower.clone();
        rebuilt.lead(true);
        differs |= rebuilt != pair.primary;
    }
    assert!(differs, "the canary must be visible");
}

#[test]
fn a_view_change_amid_unstable_messages_keeps_their_timestamps_destinations_and_chains() {
    let settings = RouterSettings::default();
    let mut pair = Pair::new(settings);
    // Six messages of one sender, each to three of the six processes; 1 and 2 confirm all.
    let messages: Vec<Envelope> = (1..=6)
        .map(|sequence| write(SENDERS[0], sequence, &[sequence % 6 + 1]))
        .collect();
    let (primary, follower) = pair.apply(&Operation::Submit {
        sender: SENDERS[0],
        messages,
    });
    let OperationResult::Submitted(told) = primary else {
        panic!();
    };
    let OperationResult::Submitted(saved) = follower else {
        panic!();
    };
    // The follower's result has timestamps but neither destinations nor stability.
    for ((_, told), (_, saved)) in told.iter().zip(&saved) {
        let (
            Outcome::Sequenced {
                timestamp: t1,
                destinations,
                ..
            },
            Outcome::Sequenced {
                timestamp: t2,
                destinations: none,
                stable: false,
            },
        ) = (told, saved)
        else {
            panic!("{told:?} / {saved:?}");
        };
        assert_eq!(t1, t2);
        assert_eq!(destinations.len(), 3);
        assert!(none.is_empty());
    }
    // t_s goes to s % 6 + 1 and its two successors: t1 → {2, 3, 4}, t2 → {3, 4, 5},
    // t3 → {4, 5, 6}, t4 → {5, 6, 1}, t5 → {6, 1, 2}, t6 → {1, 2, 3}. Everyone but 5 delivers
    // everything: t1, t5 and t6 are stable, t2–t4 wait for 5, the settled point is t1.
    let confirmations = vec![
        (ProcessId(1), Timestamp(6)),
        (ProcessId(2), Timestamp(6)),
        (ProcessId(3), Timestamp(6)),
        (ProcessId(4), Timestamp(3)),
        (ProcessId(6), Timestamp(5)),
    ];
    pair.apply(&Operation::Confirm { confirmations });
    let (through, routes) = pair.primary.settle_point().expect("t1 is stable");
    pair.apply(&Operation::Settle {
        confirmations: Vec::new(),
        through,
        routes,
    });
    assert_eq!(pair.follower.settled(), Timestamp(1));
    let unstable: Vec<u64> = pair.primary.unstable().keys().map(|t| t.0).collect();
    assert_eq!(unstable, vec![2, 3, 4]);
    // The follower becomes primary.
    pair.fail_over();
    let mut rebuilt = pair.follower.clone();
    rebuilt.lead(true);
    // A retried Submit answered from the follower's saved result gets the outcomes again,
    // with destinations and stability, as the old primary would say them now.
    let retried = Operation::Submit {
        sender: SENDERS[0],
        messages: (1..=6)
            .map(|sequence| write(SENDERS[0], sequence, &[sequence % 6 + 1]))
            .collect(),
    };
    let saved = OperationResult::Submitted(saved).encode();
    let again = OperationResult::decode(&rebuilt.reply_again(&retried.encode(), &saved));
    let OperationResult::Submitted(again) = again else {
        panic!("{again:?}");
    };
    for (sequence, outcome) in &again {
        assert_eq!(outcome, &pair.primary.outcome(SENDERS[0], *sequence));
        if let Outcome::Sequenced {
            timestamp,
            destinations,
            stable,
        } = outcome
        {
            assert_eq!(*stable, pair.primary.is_stable(*timestamp));
            assert_eq!(destinations.is_empty(), *timestamp <= rebuilt.settled());
        }
    }
}
