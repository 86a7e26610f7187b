//! The sending half of an application process (§5.4, Algorithm 1 [[5–9, 16–18]]): numbers
//! messages per sender, keeps them in a bounded send window until they are stable (or refused),
//! and hands the driver Submit ops carrying the window, in submission order.
//!
//! The driver owns the conversation with the router group (it is a VR client: one request at a
//! time, retried with the same request number, following the primary); the sender only says
//! what to submit and learns from the results and the forwarder's stable notifications.

use crate::router::{Operation, OperationResult, Outcome};
use crate::types::{Envelope, Sequence, Timestamp};
use placement::{ConfigVersion, ProcessId, Refusal};
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SenderSettings {
    /// Messages in the window at most (Algorithm 1's W). Should not exceed the routers'
    /// `window_max`, or the surplus is answered `WindowFull` and resubmitted.
    pub window_max: u64,
    /// A sequenced message that has not been reported stable after this long is submitted
    /// again, to learn its outcome (the stable notification may have been lost).
    pub resubmit_ticks: u64,
}

impl Default for SenderSettings {
    fn default() -> SenderSettings {
        SenderSettings {
            window_max: 16,
            resubmit_ticks: 50,
        }
    }
}

/// Why `submit` refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SenderError {
    /// The window is full: wait for a message to become stable.
    WindowFull,
    /// The routing part names another sender.
    WrongSender,
}

/// What the sender learnt, for the application.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SenderEvent {
    /// The message has its place in the global order (reported once).
    Sequenced {
        sequence: Sequence,
        timestamp: Timestamp,
        destinations: Vec<ProcessId>,
    },
    /// Every live destination delivered it; it left the window.
    Stable {
        sequence: Sequence,
        timestamp: Timestamp,
    },
    /// It was not routed and left the window (a stale plan or a refused configuration
    /// message): re-plan.
    Refused {
        sequence: Sequence,
        refusal: Refusal,
    },
    /// The router no longer knows what became of it (or calls it invalid); it left the window.
    Lost { sequence: Sequence, reason: String },
}

#[derive(Clone, Debug)]
struct Pending {
    envelope: Envelope,
    timestamp: Option<Timestamp>,
    /// When it was last put in a Submit.
    submitted_at: Option<u64>,
}

#[derive(Clone, Debug)]
pub struct Sender {
    id: ProcessId,
    settings: SenderSettings,
    next: Sequence,
    now: u64,
    /// Invariant: at most `window_max` entries, in sequence order.
    window: BTreeMap<Sequence, Pending>,
}

impl Sender {
    pub fn new(id: ProcessId, settings: SenderSettings) -> Sender {
        assert!(settings.window_max >= 1);
        Sender {
            id,
            settings,
            next: Sequence(1),
            now: 0,
            window: BTreeMap::new(),
        }
    }

    pub fn id(&self) -> ProcessId {
        self.id
    }

    pub fn in_window(&self) -> usize {
        self.window.len()
    }

    pub fn tick(&mut self) {
        self.now += 1;
    }

    /// Puts a message in the window and returns its sequence number (Algorithm 1 [[5–6]]).
    pub fn submit(
        &mut self,
        planned_at: ConfigVersion,
        routing: placement::ecast::Message,
        payload: Vec<u8>,
    ) -> Result<Sequence, SenderError> {
        if self.window.len() as u64 >= self.settings.window_max {
            return Err(SenderError::WindowFull);
        }
        let envelope = Envelope {
            sender: self.id,
            sequence: self.next,
            planned_at,
            routing,
            payload,
        };
        if envelope.routing_sender() != self.id {
            return Err(SenderError::WrongSender);
        }
        let sequence = self.next;
        self.next = sequence.next();
        self.window.insert(
            sequence,
            Pending {
                envelope,
                timestamp: None,
                submitted_at: None,
            },
        );
        Ok(sequence)
    }

    /// The Submit op to send now, if any (Algorithm 1 [[16–18]]): every message never
    /// submitted or answered "not sequenced", and every one submitted `resubmit_ticks` ago
    /// without becoming stable, in sequence order. (The driver retries one Submit request
    /// itself until answered; this is for what the answers leave open.)
    pub fn batch(&mut self) -> Option<Operation> {
        let now = self.now;
        let resubmit_ticks = self.settings.resubmit_ticks;
        let mut messages = Vec::new();
        for pending in self.window.values_mut() {
            let due = match pending.submitted_at {
                None => true,
                Some(at) => now >= at + resubmit_ticks,
            };
            if due {
                pending.submitted_at = Some(now);
                messages.push(pending.envelope.clone());
            }
        }
        (!messages.is_empty()).then_some(Operation::Submit {
            sender: self.id,
            messages,
        })
    }

    /// Learns from a router's answer to a Submit.
    pub fn on_result(&mut self, result: &OperationResult, events: &mut Vec<SenderEvent>) {
        let OperationResult::Submitted(outcomes) = result else {
            return;
        };
        for (sequence, outcome) in outcomes {
            self.on_outcome(*sequence, outcome, events);
        }
    }

    fn on_outcome(&mut self, sequence: Sequence, outcome: &Outcome, events: &mut Vec<SenderEvent>) {
        let Some(pending) = self.window.get_mut(&sequence) else {
            return; // Already settled.
        };
        match outcome {
            Outcome::Sequenced {
                timestamp,
                destinations,
                stable,
            } => {
                if pending.timestamp.is_none() {
                    pending.timestamp = Some(*timestamp);
                    events.push(SenderEvent::Sequenced {
                        sequence,
                        timestamp: *timestamp,
                        destinations: destinations.clone(),
                    });
                }
                if *stable {
                    self.on_stable(sequence, *timestamp, events);
                }
            }
            Outcome::Refused(refusal) => {
                self.window.remove(&sequence);
                events.push(SenderEvent::Refused {
                    sequence,
                    refusal: refusal.clone(),
                });
            }
            Outcome::WindowFull | Outcome::OutOfOrder { .. } => {
                pending.submitted_at = None; // Not sequenced: submit again.
            }
            Outcome::Forgotten => {
                self.window.remove(&sequence);
                events.push(SenderEvent::Lost {
                    sequence,
                    reason: "the router forgot its outcome".to_string(),
                });
            }
            Outcome::Invalid { reason } => {
                self.window.remove(&sequence);
                events.push(SenderEvent::Lost {
                    sequence,
                    reason: reason.clone(),
                });
            }
        }
    }

    /// A forwarder's stable notification (Algorithm 1 [[7–9]]).
    pub fn on_stable(
        &mut self,
        sequence: Sequence,
        timestamp: Timestamp,
        events: &mut Vec<SenderEvent>,
    ) {
        let Some(pending) = self.window.get(&sequence) else {
            return;
        };
        if pending.timestamp.is_some_and(|known| known != timestamp) {
            return; // Not about our message: ignore.
        }
        if pending.timestamp.is_none() {
            events.push(SenderEvent::Sequenced {
                sequence,
                timestamp,
                destinations: Vec::new(),
            });
        }
        self.window.remove(&sequence);
        events.push(SenderEvent::Stable {
            sequence,
            timestamp,
        });
    }
}
