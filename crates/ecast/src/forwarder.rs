//! The forwarder (§5.5, Algorithm 2 [[19–22]]): beside the router group's primary, it sends
//! every sequenced, unstable message to its destinations, preceded by any earlier unstable
//! message the destination has not confirmed, resends until confirmed, turns the destinations'
//! confirmations into Confirm ops for the router log, tells senders when their messages become
//! stable, and timestamps snapshot reads (§6.7).
//!
//! It holds no state that matters for safety: everything it sends comes from the replicated
//! `RouterState`, so a new primary's forwarder, built from that state, resends every unstable
//! message and loses nothing. The driver creates one when its replica becomes primary (with a
//! client id never used before, e.g. derived from the view and an incarnation counter), feeds
//! it `Sync` after every replica step and `Tick` with the replica's ticks, and drops it when the
//! replica stops being primary.

use crate::router::{Operation, OperationResult, RouterState};
use crate::types::{
    routing_is_well_formed, Delivery, ReadRefusal, Sequence, SnapshotDelivery, SnapshotRead,
    Timestamp,
};
use placement::ecast::{destset, Message};
use placement::ProcessId;
use std::collections::BTreeMap;
use std::sync::Arc;
use vr::{ClientId, Request, RequestKind, RequestNumber};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForwarderSettings {
    /// A destination that confirmed nothing new for this long gets its unconfirmed messages
    /// again; an unanswered Confirm op is resent this often.
    pub resend_ticks: u64,
    /// Deliveries in one message to a destination at most.
    pub deliveries_per_message_max: usize,
}

impl Default for ForwarderSettings {
    fn default() -> ForwarderSettings {
        ForwarderSettings {
            resend_ticks: 20,
            deliveries_per_message_max: 64,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ForwarderInput {
    /// One unit of logical time passed.
    Tick,
    /// The router state may have changed (call after every step of the replica).
    Sync,
    /// A destination delivered every message routed to it up to `delivered`.
    Confirmed {
        process: ProcessId,
        delivered: Timestamp,
    },
    /// The router group answered one of this forwarder's requests.
    Reply {
        request: RequestNumber,
        result: Vec<u8>,
    },
    /// A gateway asks for a snapshot read.
    SnapshotRead(SnapshotRead),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ForwarderEffect {
    /// Send deliveries, in timestamp order, to a destination.
    Deliver {
        to: ProcessId,
        deliveries: Vec<Delivery>,
    },
    /// Tell a sender its message is stable (§5.5's ⟨stable, id(m)⟩).
    Stable {
        to: ProcessId,
        sequence: Sequence,
        timestamp: Timestamp,
    },
    /// Submit a request to the router group (to this forwarder's own replica, the primary).
    Submit(Request),
    /// Send a snapshot read to one destination.
    DeliverSnapshot {
        to: ProcessId,
        delivery: SnapshotDelivery,
    },
    /// Tell a gateway its snapshot read's point and destinations.
    SnapshotStamped {
        to: ProcessId,
        read_id: u64,
        at: Timestamp,
        destinations: Vec<ProcessId>,
    },
    /// Tell a gateway its snapshot read was not timestamped.
    SnapshotRefused {
        to: ProcessId,
        read_id: u64,
        refusal: ReadRefusal,
    },
}

#[derive(Clone, Debug)]
struct ConfirmInFlight {
    request: Request,
    sent_at: u64,
}

/// Counters for observers (a driver's statistics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForwarderStats {
    /// Deliveries sent again because their destination confirmed nothing new for
    /// `resend_ticks`.
    pub resent: u64,
    /// Confirm ops submitted again because no reply came for `resend_ticks`.
    pub confirms_resent: u64,
}

#[derive(Clone, Debug)]
pub struct Forwarder {
    settings: ForwarderSettings,
    stats: ForwarderStats,
    client: ClientId,
    request_next: RequestNumber,
    now: u64,
    /// The router state's `applied` when last synced.
    applied_seen: Option<u64>,
    /// Messages sent once already: everything up to here.
    scanned_up_to: Timestamp,
    /// The unstable messages as last seen (timestamp → sender, sequence), to notice stability.
    known_unstable: BTreeMap<Timestamp, (ProcessId, Sequence)>,
    /// Confirmations heard from destinations (they may be ahead of the log's).
    heard: BTreeMap<ProcessId, Timestamp>,
    /// Per destination with unconfirmed messages: when to resend them.
    resend_at: BTreeMap<ProcessId, u64>,
    confirm_in_flight: Option<ConfirmInFlight>,
}

impl Forwarder {
    /// A forwarder for a replica that just became primary. `client` must never have been used
    /// by any earlier forwarder (VR's client table would take its requests for old ones).
    /// Nothing is sent until the first `Sync`, which sends every unstable message.
    pub fn new(client: ClientId, settings: ForwarderSettings, state: &RouterState) -> Forwarder {
        assert!(settings.resend_ticks > 0);
        assert!(settings.deliveries_per_message_max > 0);
        Forwarder {
            settings,
            stats: ForwarderStats::default(),
            client,
            request_next: RequestNumber(1),
            now: 0,
            applied_seen: None,
            scanned_up_to: Timestamp::ZERO,
            known_unstable: state
                .unstable()
                .iter()
                .map(|(timestamp, routed)| {
                    (
                        *timestamp,
                        (routed.envelope.sender, routed.envelope.sequence),
                    )
                })
                .collect(),
            heard: BTreeMap::new(),
            resend_at: BTreeMap::new(),
            confirm_in_flight: None,
        }
    }

    pub fn client(&self) -> ClientId {
        self.client
    }

    pub fn stats(&self) -> ForwarderStats {
        self.stats
    }

    /// The single entry point: appends effects, performs none.
    pub fn step(
        &mut self,
        input: ForwarderInput,
        state: &RouterState,
        effects: &mut Vec<ForwarderEffect>,
    ) {
        match input {
            ForwarderInput::Tick => self.on_tick(state, effects),
            ForwarderInput::Sync => self.on_sync(state, effects),
            ForwarderInput::Confirmed { process, delivered } => {
                self.on_confirmed(process, delivered, state, effects)
            }
            ForwarderInput::Reply { request, result } => {
                self.on_reply(request, &result, state, effects)
            }
            ForwarderInput::SnapshotRead(read) => self.on_snapshot_read(read, state, effects),
        }
    }

    /// What a destination is known to have delivered: the log's confirmation or a newer one
    /// heard directly.
    fn acknowledged(&self, process: ProcessId, state: &RouterState) -> Timestamp {
        state
            .confirmed(process)
            .max(self.heard.get(&process).copied().unwrap_or_default())
    }

    fn on_sync(&mut self, state: &RouterState, effects: &mut Vec<ForwarderEffect>) {
        if self.applied_seen == Some(state.applied()) {
            return;
        }
        self.applied_seen = Some(state.applied());
        self.notify_stable(state, effects);
        // Send each newly sequenced message to its destinations (Algorithm 2 [[22]]). Earlier
        // unconfirmed messages went out before; if one was lost, the destination buffers this
        // one until the resend of the earlier one arrives.
        let mut batches: BTreeMap<ProcessId, Vec<Delivery>> = BTreeMap::new();
        let after = self.scanned_up_to;
        for (timestamp, routed) in state.unstable().range(after.next()..) {
            for (process, previous) in &routed.destinations {
                if *timestamp <= self.acknowledged(*process, state) {
                    continue;
                }
                batches.entry(*process).or_default().push(Delivery {
                    timestamp: *timestamp,
                    previous: *previous,
                    version: routed.version_after,
                    envelope: Arc::clone(&routed.envelope),
                });
            }
        }
        self.scanned_up_to = state.timestamp_last();
        for (process, deliveries) in batches {
            let resend_at = self.now + self.settings.resend_ticks;
            self.resend_at.entry(process).or_insert(resend_at);
            self.send(process, deliveries, effects);
        }
        self.maybe_submit_confirm(state, effects);
    }

    /// Stable notifications for messages that left the unstable sequence since last seen.
    fn notify_stable(&mut self, state: &RouterState, effects: &mut Vec<ForwarderEffect>) {
        let unstable = state.unstable();
        // Every unstable message at or below the newest known one is known (messages never
        // become unstable again), so the known ones are all still unstable exactly when the
        // counts agree: the walk below runs only when something did become stable.
        let newest = self.known_unstable.keys().next_back().copied();
        let fresh = unstable.range(newest.unwrap_or_default().next()..).count();
        if unstable.len() - fresh != self.known_unstable.len() {
            self.known_unstable.retain(|timestamp, (sender, sequence)| {
                if unstable.contains_key(timestamp) {
                    return true;
                }
                effects.push(ForwarderEffect::Stable {
                    to: *sender,
                    sequence: *sequence,
                    timestamp: *timestamp,
                });
                false
            });
        }
        let newest = self.known_unstable.keys().next_back().copied();
        for (timestamp, routed) in unstable.range(newest.unwrap_or_default().next()..) {
            self.known_unstable.insert(
                *timestamp,
                (routed.envelope.sender, routed.envelope.sequence),
            );
        }
    }

    fn send(
        &self,
        process: ProcessId,
        deliveries: Vec<Delivery>,
        effects: &mut Vec<ForwarderEffect>,
    ) {
        // Moved, not copied: a chunk is split off the front each time.
        let max = self.settings.deliveries_per_message_max;
        let mut rest = deliveries;
        while !rest.is_empty() {
            let tail = rest.split_off(rest.len().min(max));
            effects.push(ForwarderEffect::Deliver {
                to: process,
                deliveries: rest,
            });
            rest = tail;
        }
    }

    fn on_tick(&mut self, state: &RouterState, effects: &mut Vec<ForwarderEffect>) {
        self.now += 1;
        self.on_sync(state, effects);
        let due: Vec<ProcessId> = self
            .resend_at
            .iter()
            .filter(|(_, at)| **at <= self.now)
            .map(|(process, _)| *process)
            .collect();
        for process in due {
            self.resend(process, state, effects);
        }
        if let Some(in_flight) = &mut self.confirm_in_flight {
            if self.now >= in_flight.sent_at + self.settings.resend_ticks {
                in_flight.sent_at = self.now;
                self.stats.confirms_resent += 1;
                effects.push(ForwarderEffect::Submit(in_flight.request.clone()));
            }
        }
    }

    /// Resends a destination's unconfirmed messages from the first one, in order: "when sending
    /// a message to some process, first send any preceding, unstable message" (§5.4).
    fn resend(
        &mut self,
        process: ProcessId,
        state: &RouterState,
        effects: &mut Vec<ForwarderEffect>,
    ) {
        let acknowledged = self.acknowledged(process, state);
        let deliveries: Vec<Delivery> = state
            .unstable()
            .range(acknowledged.next()..)
            .filter_map(|(timestamp, routed)| {
                let previous = routed.destinations.get(&process)?;
                Some(Delivery {
                    timestamp: *timestamp,
                    previous: *previous,
                    version: routed.version_after,
                    envelope: Arc::clone(&routed.envelope),
                })
            })
            .take(self.settings.deliveries_per_message_max)
            .collect();
        if deliveries.is_empty() {
            self.resend_at.remove(&process);
            return;
        }
        self.resend_at
            .insert(process, self.now + self.settings.resend_ticks);
        self.stats.resent += deliveries.len() as u64;
        self.send(process, deliveries, effects);
    }

    fn on_confirmed(
        &mut self,
        process: ProcessId,
        delivered: Timestamp,
        state: &RouterState,
        effects: &mut Vec<ForwarderEffect>,
    ) {
        if delivered > state.timestamp_last() {
            return; // Not a timestamp of ours (a confused or stale destination): drop.
        }
        let heard = self.heard.entry(process).or_default();
        if delivered > *heard {
            *heard = delivered;
            // Progress: give the destination a full period before resending.
            if let Some(at) = self.resend_at.get_mut(&process) {
                *at = self.now + self.settings.resend_ticks;
            }
        }
        self.maybe_submit_confirm(state, effects);
    }

    /// One Settle op in flight at a time, carrying every destination's newest prefix and the
    /// point up to which the router state found every message stable (so that followers
    /// forget what lies below it, `RouterState::settle_point`).
    fn maybe_submit_confirm(&mut self, state: &RouterState, effects: &mut Vec<ForwarderEffect>) {
        if self.confirm_in_flight.is_some() {
            return;
        }
        let confirmations: Vec<(ProcessId, Timestamp)> = self
            .heard
            .iter()
            .filter(|(process, heard)| **heard > state.confirmed(**process))
            .map(|(process, heard)| (*process, *heard))
            .collect();
        let settle = state.settle_point();
        if confirmations.is_empty() && settle.is_none() {
            return;
        }
        let (through, routes) = settle.unwrap_or((state.settled(), Vec::new()));
        let request = Request {
            client: self.client,
            request: self.request_next,
            kind: RequestKind::Write,
            operation: Operation::Settle {
                confirmations,
                through,
                routes,
            }
            .encode(),
        };
        self.request_next = RequestNumber(self.request_next.0 + 1);
        self.confirm_in_flight = Some(ConfirmInFlight {
            request: request.clone(),
            sent_at: self.now,
        });
        effects.push(ForwarderEffect::Submit(request));
    }

    fn on_reply(
        &mut self,
        request: RequestNumber,
        result: &[u8],
        state: &RouterState,
        effects: &mut Vec<ForwarderEffect>,
    ) {
        let ours = self
            .confirm_in_flight
            .as_ref()
            .is_some_and(|in_flight| in_flight.request.request == request);
        if !ours {
            return; // A duplicate or stale reply.
        }
        // Whatever the result (an error would mean a bug of ours), the confirmations are
        // either logged or will be heard again: destinations re-confirm on every delivery.
        let _ = OperationResult::decode(result);
        self.confirm_in_flight = None;
        self.on_sync(state, effects);
        self.maybe_submit_confirm(state, effects);
    }

    /// §6.7: the lead router timestamps a snapshot read with its last sequenced timestamp and
    /// injects it into each destination's stream right after the last message routed there.
    fn on_snapshot_read(
        &mut self,
        read: SnapshotRead,
        state: &RouterState,
        effects: &mut Vec<ForwarderEffect>,
    ) {
        let refuse = |refusal| ForwarderEffect::SnapshotRefused {
            to: read.sender,
            read_id: read.read_id,
            refusal,
        };
        let sender_matches =
            matches!(read.routing, Message::Read { sender, .. } if sender == read.sender);
        if !sender_matches {
            effects.push(refuse(ReadRefusal::NotARead));
            return;
        }
        if !routing_is_well_formed(&read.routing) {
            effects.push(refuse(ReadRefusal::Malformed));
            return;
        }
        let at = state.timestamp_last();
        if at < read.not_before {
            effects.push(refuse(ReadRefusal::RouterBehind {
                router: at,
                not_before: read.not_before,
            }));
            return;
        }
        let configuration = state.configuration();
        let destinations: Vec<ProcessId> =
            destset(configuration, &read.routing).into_iter().collect();
        for process in &destinations {
            effects.push(ForwarderEffect::DeliverSnapshot {
                to: *process,
                delivery: SnapshotDelivery {
                    at,
                    after: state.last_routed(*process),
                    version: configuration.version(),
                    read: read.clone(),
                },
            });
        }
        effects.push(ForwarderEffect::SnapshotStamped {
            to: read.sender,
            read_id: read.read_id,
            at,
            destinations,
        });
    }
}
