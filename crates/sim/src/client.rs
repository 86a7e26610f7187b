//! A simulated client: one outstanding request at a time (VRR's client model), retried with the
//! same request number until a reply comes, following NotPrimary hints to the primary.
//!
//! Under Skyros a nilext write goes to every replica and completes on a supermajority of
//! matching acknowledgements (`vr::NilextQuorum`); after two unanswered rounds the client
//! takes the slow path: the same request, as an ordinary write, to the primary.

use vr::NilextQuorum;
use wire::{ClientId, Message, ReplicaIndex, Request, RequestKind, RequestNumber, View};

/// Unanswered rounds of a nilext write before the client falls back to the slow path.
pub const NILEXT_ROUNDS_MAX: u32 = 2;

#[derive(Debug)]
pub struct Outstanding {
    pub request: Request,
    pub history_index: usize,
    pub sent_at: u64,
    /// Skyros: the reply a nilext request has whatever the state (none for a commutative
    /// write, whose result comes with the primary's acknowledgement), and its acknowledgements.
    pub nilext: Option<(Option<Vec<u8>>, NilextQuorum)>,
    pub rounds: u32,
}

#[derive(Debug)]
pub struct Client {
    pub id: ClientId,
    pub request_next: RequestNumber,
    pub outstanding: Option<Outstanding>,
    pub view_guess: View,
    pub target: ReplicaIndex,
    pub idle_until: u64,
    pub writes: u64,
}

/// What the simulation must do after a client handles a message.
pub enum ClientAction {
    Nothing,
    /// Send the outstanding request (again) to `target`.
    Resend,
    /// The outstanding request completed with this reply.
    Completed {
        history_index: usize,
        request: Request,
        result: Vec<u8>,
        /// Whether the reply came from the primary after execution (not from nilext acks).
        executed: bool,
    },
}

impl Client {
    pub fn new(id: ClientId) -> Client {
        Client {
            id,
            request_next: RequestNumber(1),
            outstanding: None,
            view_guess: View(0),
            target: ReplicaIndex(0),
            idle_until: 0,
            writes: 0,
        }
    }

    pub fn on_message(&mut self, message: Message, replica_count: u8) -> ClientAction {
        let Some(outstanding) = &self.outstanding else {
            return ClientAction::Nothing;
        };
        match message {
            Message::NilextAck {
                view,
                replica,
                request,
                prefix_digest,
                executed,
                result: previewed,
                ..
            } if request == outstanding.request.request => {
                let outstanding = self.outstanding.as_mut().expect("checked above");
                let Some((result, quorum)) = &mut outstanding.nilext else {
                    return ClientAction::Nothing;
                };
                if !quorum.on_ack(
                    replica_count,
                    view,
                    replica,
                    prefix_digest,
                    executed,
                    previewed,
                ) {
                    if quorum.hopeless(replica_count)
                        && outstanding.request.kind == RequestKind::Nilext
                    {
                        // Take the slow path now: the same request, ordered by the primary.
                        outstanding.request.kind = RequestKind::Write;
                        self.target = ReplicaIndex((view.0 % u64::from(replica_count)) as u8);
                        return ClientAction::Resend;
                    }
                    return ClientAction::Nothing;
                }
                let result = match result {
                    Some(result) => result.clone(),
                    None => quorum.result().expect("completed with a result").to_vec(),
                };
                self.view_guess = self.view_guess.max(view);
                let outstanding = self.outstanding.take().expect("checked above");
                ClientAction::Completed {
                    history_index: outstanding.history_index,
                    request: outstanding.request,
                    result,
                    executed: false,
                }
            }
            Message::Reply(reply) if reply.request == outstanding.request.request => {
                self.view_guess = self.view_guess.max(reply.view);
                let outstanding = self.outstanding.take().expect("checked above");
                ClientAction::Completed {
                    history_index: outstanding.history_index,
                    request: outstanding.request,
                    result: reply.result,
                    executed: true,
                }
            }
            Message::NotPrimary { view, request, .. } if request == outstanding.request.request => {
                if view > self.view_guess {
                    self.view_guess = view;
                    let primary = ReplicaIndex((view.0 % u64::from(replica_count)) as u8);
                    if primary != self.target {
                        self.target = primary;
                        return ClientAction::Resend;
                    }
                }
                ClientAction::Nothing
            }
            _ => ClientAction::Nothing,
        }
    }

    /// On a retry timeout, try the next replica; a nilext write unanswered for
    /// `NILEXT_ROUNDS_MAX` rounds becomes an ordinary write (the slow path).
    pub fn rotate_target(&mut self, replica_count: u8) {
        self.target = ReplicaIndex((self.target.0 + 1) % replica_count);
        if let Some(outstanding) = &mut self.outstanding {
            outstanding.rounds += 1;
            if matches!(
                outstanding.request.kind,
                RequestKind::Nilext | RequestKind::Commutative
            ) && outstanding.rounds >= NILEXT_ROUNDS_MAX
            {
                outstanding.request.kind = RequestKind::Write;
            }
        }
    }
}
