//! A scripted run of the whole pure half over a real VR router group, driven by hand the way a
//! runtime driver would: gateway requests into the primary, replica effects out, the forwarder
//! beside the primary fed `Sync` and `Tick`, its `Submit`s stepped into its own replica, inboxes
//! answering with confirmations. The script loses every delivery to one destination, crashes the
//! primary, and checks that the new primary's forwarder delivers everything, in order, and that
//! every message becomes stable at the timestamp the gateway was told (§5.5: uniform delivery
//! across router fail-over).

use ecast::{
    Envelope, Forwarder, ForwarderEffect, ForwarderInput, ForwarderSettings, Inbox, InboxEffect,
    InboxInput, InboxSettings, Operation, OperationResult, Outcome, RouterSettings, RouterState,
    Sequence, Timestamp,
};
use placement::ecast::{Message as Routing, Target};
use placement::{ConfigVersion, Configuration, Position, ProcessId};
use std::collections::{BTreeMap, VecDeque};
use vr::{
    ClientId, Config, Durability, Effect, Input, Message, Replica, ReplicaIndex, Request,
    RequestKind, RequestNumber, StatusName,
};

const GATEWAY: ProcessId = ProcessId(100);
const GATEWAY_CLIENT: ClientId = ClientId(7);
const SPACING: u64 = u64::MAX / 4;

struct World {
    routers: Vec<Option<Replica<RouterState>>>,
    forwarders: Vec<Option<Forwarder>>,
    forwarder_clients: u64,
    network: VecDeque<(ReplicaIndex, ReplicaIndex, Message)>,
    inboxes: BTreeMap<ProcessId, Inbox>,
    delivered: BTreeMap<ProcessId, Vec<u64>>,
    /// Deliveries to this process are lost.
    black_hole: Option<ProcessId>,
    gateway_replies: Vec<Message>,
}

impl World {
    fn new() -> World {
        let members: Vec<(ProcessId, Position)> = (0..4)
            .map(|index| (ProcessId(index + 1), Position(index * SPACING)))
            .collect();
        let ring = Configuration::with_ring(2, &members);
        let config = Config::new(3, Durability::Memory);
        World {
            routers: (0..3)
                .map(|index| {
                    let state = RouterState::new(ring.clone(), RouterSettings::default());
                    Some(Replica::new(config.clone(), ReplicaIndex(index), state))
                })
                .collect(),
            forwarders: vec![None, None, None],
            forwarder_clients: 1_000,
            network: VecDeque::new(),
            inboxes: members
                .iter()
                .map(|(id, _)| {
                    (
                        *id,
                        Inbox::new(*id, ConfigVersion(0), InboxSettings::default()),
                    )
                })
                .collect(),
            delivered: BTreeMap::new(),
            black_hole: None,
            gateway_replies: Vec::new(),
        }
    }

    /// Steps a router, executes its effects, keeps its forwarder in step with its primaryship.
    fn step(&mut self, index: usize, input: Input) {
        let mut inputs = VecDeque::from([input]);
        while let Some(input) = inputs.pop_front() {
            let Some(replica) = self.routers[index].as_mut() else {
                return;
            };
            let mut effects = Vec::new();
            replica.step(input, &mut effects);
            let mut forwarder_effects = Vec::new();
            for effect in effects {
                match effect {
                    Effect::Send { to, message } => {
                        self.network
                            .push_back((ReplicaIndex(index as u8), to, message))
                    }
                    Effect::Reply { client, message } if client == GATEWAY_CLIENT => {
                        self.gateway_replies.push(message)
                    }
                    Effect::Reply {
                        message: Message::Reply(reply),
                        ..
                    } => {
                        if let (Some(forwarder), Some(replica)) = (
                            self.forwarders[index].as_mut(),
                            self.routers[index].as_ref(),
                        ) {
                            forwarder.step(
                                ForwarderInput::Reply {
                                    request: reply.request,
                                    result: reply.result,
                                },
                                replica.state_machine(),
                                &mut forwarder_effects,
                            );
                        }
                    }
                    // Checkpoints never complete here: the log is never compacted.
                    Effect::Reply { .. } | Effect::Persist { .. } | Effect::Checkpoint { .. } => {}
                }
            }
            let replica = self.routers[index].as_ref().expect("stepped above");
            if replica.status() == StatusName::Normal && replica.is_primary() {
                if self.forwarders[index].is_none() {
                    self.forwarder_clients += 1;
                    let client = ClientId(self.forwarder_clients);
                    let settings = ForwarderSettings {
                        resend_ticks: 5,
                        deliveries_per_message_max: 8,
                    };
                    self.forwarders[index] =
                        Some(Forwarder::new(client, settings, replica.state_machine()));
                }
                let forwarder = self.forwarders[index].as_mut().expect("set above");
                forwarder.step(
                    ForwarderInput::Sync,
                    replica.state_machine(),
                    &mut forwarder_effects,
                );
            } else {
                self.forwarders[index] = None;
            }
            for request in self.execute(index, forwarder_effects) {
                inputs.push_back(Input::Message(Message::Request(request)));
            }
        }
    }

    /// Delivers the forwarder's messages to inboxes at once (confirmations come straight back).
    fn execute(&mut self, index: usize, effects: Vec<ForwarderEffect>) -> Vec<Request> {
        let mut requests = Vec::new();
        let mut queue: VecDeque<ForwarderEffect> = effects.into();
        while let Some(effect) = queue.pop_front() {
            match effect {
                ForwarderEffect::Submit(request) => requests.push(request),
                ForwarderEffect::Deliver { to, deliveries } if Some(to) != self.black_hole => {
                    let mut effects = Vec::new();
                    let inbox = self.inboxes.get_mut(&to).expect("a ring member");
                    inbox.step(
                        InboxInput::Deliver {
                            router: ReplicaIndex(index as u8),
                            deliveries,
                        },
                        &mut effects,
                    );
                    for effect in effects {
                        match effect {
                            InboxEffect::Deliver(delivery) => self
                                .delivered
                                .entry(to)
                                .or_default()
                                .push(delivery.timestamp.0),
                            InboxEffect::Confirm {
                                process, delivered, ..
                            } => {
                                let (Some(forwarder), Some(replica)) = (
                                    self.forwarders[index].as_mut(),
                                    self.routers[index].as_ref(),
                                ) else {
                                    continue;
                                };
                                let mut more = Vec::new();
                                forwarder.step(
                                    ForwarderInput::Confirmed { process, delivered },
                                    replica.state_machine(),
                                    &mut more,
                                );
                                queue.extend(more);
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        requests
    }

    fn tick(&mut self) {
        for index in 0..self.routers.len() {
            self.step(index, Input::Tick);
            let (Some(forwarder), Some(replica)) = (
                self.forwarders[index].as_mut(),
                self.routers[index].as_ref(),
            ) else {
                continue;
            };
            let mut effects = Vec::new();
            forwarder.step(ForwarderInput::Tick, replica.state_machine(), &mut effects);
            for request in self.execute(index, effects) {
                self.step(index, Input::Message(Message::Request(request)));
            }
        }
        while let Some((_, to, message)) = self.network.pop_front() {
            if self.routers[to.0 as usize].is_some() {
                self.step(to.0 as usize, Input::Message(message));
            }
        }
    }

    fn primary(&self) -> Option<usize> {
        self.routers.iter().position(|replica| {
            replica.as_ref().is_some_and(|replica| {
                replica.status() == StatusName::Normal && replica.is_primary()
            })
        })
    }
}

fn write(sequence: u64, owner: u64) -> Envelope {
    Envelope {
        sender: GATEWAY,
        sequence: Sequence(sequence),
        planned_at: ConfigVersion(0),
        routing: Routing::Write {
            sender: GATEWAY,
            target: Target::Points(vec![Position((owner - 1) * SPACING + 3)]),
        },
        payload: Vec::new(),
    }
}

#[test]
fn a_new_primary_delivers_what_the_old_one_lost_in_order_and_nothing_acknowledged_is_lost() {
    let mut world = World::new();
    world.tick();
    let primary = world.primary().expect("view 0 has a primary");
    // Process 3 hears nothing from the first primary.
    world.black_hole = Some(ProcessId(3));
    let messages: Vec<Envelope> = (1..=6)
        .map(|sequence| write(sequence, 1 + sequence % 4))
        .collect();
    let request = Request {
        client: GATEWAY_CLIENT,
        request: RequestNumber(1),
        kind: RequestKind::Write,
        operation: Operation::Submit {
            sender: GATEWAY,
            messages,
        }
        .encode(),
    };
    world.step(primary, Input::Message(Message::Request(request)));
    for _ in 0..5 {
        world.tick();
    }
    let Some(Message::Reply(reply)) = world.gateway_replies.first() else {
        panic!("the Submit was answered: {:?}", world.gateway_replies);
    };
    let OperationResult::Submitted(outcomes) = OperationResult::decode(&reply.result) else {
        panic!("a Submit result");
    };
    let told: Vec<(Sequence, Timestamp)> = outcomes
        .iter()
        .map(|(sequence, outcome)| match outcome {
            Outcome::Sequenced { timestamp, .. } => (*sequence, *timestamp),
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(!world.delivered.contains_key(&ProcessId(3)));
    let unstable_before = world.routers[primary]
        .as_ref()
        .unwrap()
        .state_machine()
        .unstable()
        .len();
    assert!(unstable_before > 0, "messages to process 3 stay unstable");

    // The primary crashes; the deliveries to process 3 now get through.
    world.routers[primary] = None;
    world.forwarders[primary] = None;
    world.black_hole = None;
    for _ in 0..400 {
        world.tick();
        let settled = world.primary().is_some_and(|index| {
            world.routers[index]
                .as_ref()
                .unwrap()
                .state_machine()
                .unstable()
                .is_empty()
        });
        if settled {
            break;
        }
    }
    let new_primary = world.primary().expect("a new primary");
    assert_ne!(new_primary, primary);
    let state = world.routers[new_primary].as_ref().unwrap().state_machine();
    assert!(state.unstable().is_empty(), "everything became stable");
    for (sequence, timestamp) in told {
        let outcome = state.outcome(GATEWAY, sequence);
        assert!(
            matches!(outcome, Outcome::Sequenced { timestamp: t, stable: true, .. } if t == timestamp),
            "message {sequence:?} was told {timestamp}, the new primary says {outcome:?}"
        );
    }
    assert!(world.routers[new_primary].as_ref().unwrap().view().0 > 0);
    // Every process delivered, in order, exactly what was routed to it.
    for (process, timestamps) in &world.delivered {
        assert!(
            timestamps.windows(2).all(|pair| pair[0] < pair[1]),
            "{process:?}: {timestamps:?}"
        );
    }
    let total: usize = world.delivered.values().map(Vec::len).sum();
    assert_eq!(total, 12, "six writes, two replicas each");
    assert!(!world.delivered[&ProcessId(3)].is_empty());
}

fn outcomes_of(message: &Message) -> Vec<(Sequence, Outcome)> {
    let Message::Reply(reply) = message else {
        panic!("not a reply: {message:?}");
    };
    match OperationResult::decode(&reply.result) {
        OperationResult::Submitted(outcomes) => outcomes,
        other => panic!("not a Submit result: {other:?}"),
    }
}

#[test]
fn followers_do_not_route_and_a_submit_retried_after_a_view_change_gets_its_outcomes_recomputed() {
    let mut world = World::new();
    world.tick();
    let primary = world.primary().expect("view 0 has a primary");
    // Process 3 hears nothing, before and after the view change: its messages stay unstable.
    world.black_hole = Some(ProcessId(3));
    let request = Request {
        client: GATEWAY_CLIENT,
        request: RequestNumber(1),
        kind: RequestKind::Write,
        operation: Operation::Submit {
            sender: GATEWAY,
            messages: (1..=6)
                .map(|sequence| write(sequence, 1 + sequence % 4))
                .collect(),
        }
        .encode(),
    };
    world.step(primary, Input::Message(Message::Request(request.clone())));
    for _ in 0..5 {
        world.tick();
    }
    let told = outcomes_of(world.gateway_replies.first().expect("answered"));
    for (index, router) in world.routers.iter().enumerate() {
        let state = router.as_ref().unwrap().state_machine();
        assert_eq!(state.routes(), index == primary, "router {index}");
        assert_eq!(state.timestamp_last(), Timestamp(6));
    }
    world.routers[primary] = None;
    world.forwarders[primary] = None;
    for _ in 0..400 {
        world.tick();
        if world.primary().is_some() {
            break;
        }
    }
    let new_primary = world.primary().expect("a new primary");
    let replica = world.routers[new_primary].as_ref().unwrap();
    assert!(
        replica.state_machine().routes(),
        "it rebuilt its routing state"
    );
    // What its client table saved as a follower: timestamps, no destinations.
    let (number, saved) = replica.client_table().get(GATEWAY_CLIENT).expect("saved");
    assert_eq!(number, RequestNumber(1));
    let OperationResult::Submitted(saved) = OperationResult::decode(saved) else {
        panic!("a Submit result");
    };
    assert!(saved.iter().all(|(_, outcome)| matches!(
        outcome,
        Outcome::Sequenced { destinations, stable: false, .. } if destinations.is_empty()
    )));
    // The gateway retries with the same request number: the new primary recomputes.
    world.gateway_replies.clear();
    world.step(new_primary, Input::Message(Message::Request(request)));
    let again = outcomes_of(world.gateway_replies.first().expect("answered again"));
    let state = world.routers[new_primary].as_ref().unwrap().state_machine();
    assert_eq!(again.len(), told.len());
    for ((sequence, told), (_, again)) in told.iter().zip(&again) {
        let (
            Outcome::Sequenced {
                timestamp,
                destinations,
                ..
            },
            Outcome::Sequenced {
                timestamp: timestamp_again,
                destinations: destinations_again,
                stable,
            },
        ) = (told, again)
        else {
            panic!("{told:?} / {again:?}");
        };
        assert_eq!(timestamp, timestamp_again, "{sequence:?}");
        assert_eq!(*stable, state.is_stable(*timestamp));
        if destinations.contains(&ProcessId(3)) {
            assert!(!stable, "{sequence:?} waits for process 3");
            assert_eq!(destinations, destinations_again, "{sequence:?}");
        }
    }
    assert!(again.iter().any(|(_, outcome)| matches!(
        outcome,
        Outcome::Sequenced { destinations, .. } if !destinations.is_empty()
    )));
}
