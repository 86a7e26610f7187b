//! Configuration announcements (`docs/internals/ecast.md`, "Configuration announcements"): an
//! accepted configuration change reaches every live storage process, in order like every other
//! message, so a quiet process (one no data message reaches) learns the new version at once
//! and serves basic reads planned at it. Router state, forwarder and inboxes are driven here
//! as a driver would, with no other traffic after the change.

use ecast::{
    Envelope, Forwarder, ForwarderEffect, ForwarderInput, ForwarderSettings, Inbox, InboxEffect,
    InboxInput, InboxSettings, Operation, OperationResult, Outcome, ReadRefusal, RouterSettings,
    RouterState, Sequence, Timestamp,
};
use placement::ecast::{Message, Target};
use placement::{
    ConfigChange, ConfigMessage, ConfigVersion, Configuration, MembershipChange, Position,
    ProcessId,
};
use std::collections::BTreeMap;
use vr::{ClientId, ReplicaIndex, StateMachine};

const SPACING: u64 = u64::MAX / 4;
const SENDER: ProcessId = ProcessId(100);
const PROCESSES: u64 = 4;

/// Four storage processes at replication 2 (process p owns the arc from (p − 1) · SPACING).
fn ring() -> Configuration {
    let members: Vec<(ProcessId, Position)> = (0..PROCESSES)
        .map(|index| (ProcessId(index + 1), Position(index * SPACING)))
        .collect();
    Configuration::with_ring(2, &members)
}

/// A write to the arc `owner` owns (its owner and its successor hold it).
fn write(sequence: u64, owner: u64) -> Envelope {
    Envelope {
        sender: SENDER,
        sequence: Sequence(sequence),
        planned_at: ConfigVersion(0),
        routing: Message::Write {
            sender: SENDER,
            target: Target::Points(vec![Position((owner - 1) * SPACING + 5)]),
        },
        payload: vec![sequence as u8],
    }
}

fn suspect(sequence: u64, process: u64) -> Envelope {
    Envelope {
        sender: SENDER,
        sequence: Sequence(sequence),
        planned_at: ConfigVersion(0),
        routing: Message::Config {
            sender: SENDER,
            message: ConfigMessage {
                based_on: ConfigVersion(0),
                change: ConfigChange::Membership(MembershipChange::Suspect {
                    process: ProcessId(process),
                }),
            },
        },
        payload: Vec::new(),
    }
}

/// One router (its state, its forwarder) and an inbox per storage process; `crashed`
/// processes receive nothing.
struct World {
    state: RouterState,
    forwarder: Forwarder,
    inboxes: BTreeMap<ProcessId, Inbox>,
    crashed: Vec<ProcessId>,
    /// Per process, the timestamps it delivered.
    delivered: BTreeMap<ProcessId, Vec<Timestamp>>,
}

impl World {
    fn new(announce_configurations: bool) -> World {
        let settings = RouterSettings {
            announce_configurations,
            ..RouterSettings::default()
        };
        let state = RouterState::new(ring(), settings);
        let forwarder = Forwarder::new(ClientId(1), ForwarderSettings::default(), &state);
        let inboxes = (1..=PROCESSES)
            .map(|id| {
                let process = ProcessId(id);
                let inbox = Inbox::new(process, ConfigVersion(0), InboxSettings::default());
                (process, inbox)
            })
            .collect();
        World {
            state,
            forwarder,
            inboxes,
            crashed: Vec::new(),
            delivered: BTreeMap::new(),
        }
    }

    /// Sequences `envelope` and runs the forwarder, the inboxes and the forwarder's Confirm ops
    /// until nothing moves. Returns the message's destinations.
    fn submit(&mut self, envelope: Envelope) -> Vec<ProcessId> {
        let operation = Operation::Submit {
            sender: SENDER,
            messages: vec![envelope],
        };
        let result = OperationResult::decode(&self.state.apply(&operation.encode()));
        let OperationResult::Submitted(outcomes) = result else {
            panic!("{result:?}");
        };
        let [(_, Outcome::Sequenced { destinations, .. })] = outcomes.as_slice() else {
            panic!("{outcomes:?}");
        };
        let destinations = destinations.clone();
        self.run(ForwarderInput::Sync);
        destinations
    }

    fn run(&mut self, input: ForwarderInput) {
        let mut inputs = vec![input];
        let mut rounds = 0;
        while let Some(input) = inputs.pop() {
            rounds += 1;
            assert!(rounds < 1_000, "the exchange settles");
            let mut effects = Vec::new();
            self.forwarder.step(input, &self.state, &mut effects);
            for effect in effects {
                match effect {
                    ForwarderEffect::Deliver { to, deliveries } => {
                        if self.crashed.contains(&to) {
                            continue;
                        }
                        let inbox = self.inboxes.get_mut(&to).expect("a storage process");
                        let mut inbox_effects = Vec::new();
                        let input = InboxInput::Deliver {
                            router: ReplicaIndex(0),
                            deliveries,
                        };
                        inbox.step(input, &mut inbox_effects);
                        for effect in inbox_effects {
                            match effect {
                                InboxEffect::Deliver(delivery) => {
                                    self.delivered
                                        .entry(to)
                                        .or_default()
                                        .push(delivery.timestamp);
                                }
                                InboxEffect::Confirm {
                                    process, delivered, ..
                                } => inputs.push(ForwarderInput::Confirmed { process, delivered }),
                                other => panic!("{other:?}"),
                            }
                        }
                    }
                    ForwarderEffect::Submit(request) => {
                        let result = self.state.apply(&request.operation);
                        inputs.push(ForwarderInput::Reply {
                            request: request.request,
                            result,
                        });
                        inputs.push(ForwarderInput::Sync);
                    }
                    ForwarderEffect::Stable { .. } => {}
                    other => panic!("{other:?}"),
                }
            }
        }
    }

    fn version(&self, process: u64) -> ConfigVersion {
        self.inboxes[&ProcessId(process)].version()
    }

    fn basic_read(&self, process: u64, planned_at: ConfigVersion) -> Result<(), ReadRefusal> {
        self.inboxes[&ProcessId(process)].check_basic(planned_at)
    }
}

#[test]
fn a_quiet_storage_process_learns_a_suspicion_at_once_and_serves_reads_planned_after_it() {
    let mut world = World::new(true);
    // t1 reaches processes 1 and 2 only; 3 and 4 stay quiet.
    assert_eq!(world.submit(write(1, 1)), [ProcessId(1), ProcessId(2)]);
    world.crashed.push(ProcessId(4));
    let destinations = world.submit(suspect(2, 4));
    assert_eq!(
        destinations,
        (1..=PROCESSES).map(ProcessId).collect::<Vec<_>>(),
        "the suspicion goes to every process live before it (the suspect included)"
    );
    assert_eq!(world.state.configuration().version(), ConfigVersion(1));
    for process in 1..=3 {
        assert_eq!(
            world.version(process),
            ConfigVersion(1),
            "process {process}"
        );
        assert_eq!(world.basic_read(process, ConfigVersion(1)), Ok(()));
    }
    // Process 3 delivered only the announcement, in order with the rest of its stream.
    assert_eq!(world.delivered[&ProcessId(3)], [Timestamp(2)]);
    assert_eq!(world.delivered[&ProcessId(1)], [Timestamp(1), Timestamp(2)]);
    // Every live destination confirmed it and the suspect counts as done: stable, settled.
    assert!(world.state.unstable().is_empty());
    assert_eq!(world.state.stable_watermark(), Timestamp(2));
    // A data message after it is routed as before: the announcement is not a route.
    assert_eq!(
        world.submit(Envelope {
            planned_at: ConfigVersion(1),
            ..write(3, 3)
        }),
        [ProcessId(3)],
        "process 4 is suspected: only 3 holds the arc now"
    );
    assert_eq!(world.delivered[&ProcessId(3)], [Timestamp(2), Timestamp(3)]);
}

/// Without announcements (what the partition-group modes run, and what every mode ran before)
/// the quiet process stays at the old version and refuses the read: the test above would fail.
#[test]
fn without_announcements_a_quiet_process_refuses_reads_planned_at_the_new_version() {
    let mut world = World::new(false);
    world.submit(write(1, 1));
    world.crashed.push(ProcessId(4));
    assert_eq!(world.submit(suspect(2, 4)), [ProcessId(4)]);
    assert_eq!(world.state.configuration().version(), ConfigVersion(1));
    assert_eq!(world.version(3), ConfigVersion(0));
    assert_eq!(
        world.basic_read(3, ConfigVersion(1)),
        Err(ReadRefusal::VersionMismatch {
            process: ConfigVersion(0),
            request: ConfigVersion(1),
        })
    );
}

/// A refused configuration message changes nothing and is announced nowhere.
#[test]
fn a_refused_configuration_message_is_not_announced() {
    let mut world = World::new(true);
    world.crashed.push(ProcessId(4));
    world.submit(suspect(1, 4));
    let operation = Operation::Submit {
        sender: SENDER,
        // Planned at version 0 again: placement refuses it (4 is suspected already).
        messages: vec![suspect(2, 4)],
    };
    let result = OperationResult::decode(&world.state.apply(&operation.encode()));
    let OperationResult::Submitted(outcomes) = result else {
        panic!("{result:?}");
    };
    assert!(
        matches!(outcomes.as_slice(), [(_, Outcome::Refused(_))]),
        "{outcomes:?}"
    );
    world.run(ForwarderInput::Sync);
    assert_eq!(world.delivered[&ProcessId(3)], [Timestamp(1)]);
    assert_eq!(world.version(3), ConfigVersion(1));
}
