//! What a partition group's primary does beside its replica, pure: the *duty*.
//!
//! A partition group is a replicated `PartitionMachine` (VR or Skyros). The routers deliver
//! each sequenced message to every member of the group; only the member whose replica is the
//! primary of a normal view acts on it. Its duty:
//!
//! - queue the deliveries it receives (a keyspace message becomes this group's cut, planned
//!   when it is submitted, against the holdings after every cut logged before it);
//! - submit them to its own replica as a VR client, **one request in flight**: copies to
//!   install and acknowledgements of copies first, then deliveries and the routers' stable
//!   watermark taking turns, so that neither starves the other;
//! - from each committed reply, tell what to do: confirm the admitted prefix to the router
//!   that delivered (`Logged`), acknowledge an installed copy to its sender (`Installed`);
//! - release the machine's replies it has not sent yet (a new primary sends every retained
//!   one again: duplicates are harmless, a lost one is not);
//! - pace the resending of the copies its group owes other groups.
//!
//! The driver that hosts replicas (`runtime::ecast::partition_host`, the simulator) only moves
//! bytes: it feeds the duty what arrives, steps the replica with the requests the duty makes,
//! and sends what the duty says to whom it says. A duty lives exactly as long as its replica is
//! the primary of one normal view (`follow`): a view change drops it and the next primary
//! starts a fresh one under a fresh client id, so no request of an old view is ever mistaken
//! for one of the new.

use crate::{
    Delivery, PartitionCut, PartitionData, PartitionMachine, PartitionOperation, PartitionResult,
    Released, Share, Timestamp,
};
use placement::ecast::Message as Routing;
use placement::{
    ConfigChange, ConfigVersion, Groups, Instruction, PositionSet, ProcessId, Regrouping,
};
use std::collections::{BTreeMap, VecDeque};
use vr::{ClientId, ReplicaIndex, Reply, Request, RequestKind, RequestNumber, View};

/// Deliveries a primary keeps waiting for its replica at most (more are dropped: the
/// forwarder resends what is not confirmed).
pub const PENDING_SHARES_MAX: usize = 8_192;

/// How a group turns an accepted keyspace message into its cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CutPlanning {
    /// The cluster's groups never change holdings: a keyspace message is an ordinary share.
    Fixed,
    /// One-member groups cut by the message's instruction list, from the holdings after every
    /// cut logged before it.
    Elastic,
    /// Groups named by (arc, version): the cut is this group's part of the regrouping between
    /// the groups before and after the message (which do not depend on the holdings).
    Regrouped,
}

/// A delivery as the primary queues it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Pending {
    Share(Share),
    /// An accepted keyspace message under `CutPlanning::Elastic`.
    Keyspace {
        share: Share,
        version: ConfigVersion,
        instructions: Vec<Instruction>,
    },
    /// An accepted keyspace message under `CutPlanning::Regrouped`, its cut planned already.
    Regrouped {
        share: Share,
        cut: PartitionCut,
    },
}

impl Pending {
    fn is_cut(&self) -> bool {
        matches!(self, Pending::Keyspace { .. } | Pending::Regrouped { .. })
    }
}

/// What `PrimaryDuty::deliver` did with a batch of deliveries (for the driver's log).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Delivered {
    /// The versions of the keyspace messages among them (the driver times copies from there).
    pub keyspace_versions: Vec<ConfigVersion>,
    /// Deliveries dropped because `PENDING_SHARES_MAX` wait already.
    pub dropped_full: usize,
    /// Regrouped keyspace messages dropped because their groups were not delivered with them
    /// (the forwarder resends them with the groups).
    pub without_groups: Vec<ConfigVersion>,
}

/// What the committed reply to the duty's request asks of the driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DutyReply {
    /// Not the reply to the request in flight (a duplicate, or one of an older request).
    Stale,
    /// Nothing to tell anyone.
    Quiet,
    /// Confirm every message up to `admitted` to router `router` (the one that delivered last).
    Confirm {
        router: ReplicaIndex,
        admitted: Timestamp,
    },
    /// The copy of `version` from group `from` is installed: acknowledge it to `from`'s
    /// members (`PartitionInstalled`), which log that they need not keep it.
    Installed {
        version: ConfigVersion,
        from: ProcessId,
    },
    /// A result the duty never expects for its request.
    Unexpected(PartitionResult),
}

/// The duty of a partition group's primary (module documentation).
#[derive(Clone, Debug)]
pub struct PrimaryDuty {
    view: View,
    /// The VR client id it submits with.
    client: ClientId,
    request_next: RequestNumber,
    in_flight: bool,
    /// Deliveries received and not yet submitted, in arrival order.
    pending: Vec<Pending>,
    /// Copies to log (`InstallPart`s) and acknowledgements of this group's copies to log
    /// (`Installed`): submitted before deliveries.
    copies: VecDeque<PartitionOperation>,
    /// The copy whose part (`InstallPart`) is in flight (its sender is acknowledged once the
    /// last one commits).
    install_in_flight: Option<(ConfigVersion, ProcessId)>,
    /// When each outgoing copy (version, receiver) was last sent, in the driver's ticks.
    copies_sent: BTreeMap<(ConfigVersion, ProcessId), u64>,
    /// The router that delivered last (confirmations go there).
    router: ReplicaIndex,
    /// The number of the last released reply sent.
    released_sent: u64,
    /// The newest stable watermark the lead router reported, the last one submitted, and
    /// whether the last request was a watermark.
    watermark: Timestamp,
    watermark_submitted: Timestamp,
    watermark_last: bool,
}

/// Keeps `duty` following its replica: a fresh duty (client id from `client`) when the replica
/// is the primary of a normal view it has no duty for, none when it is not a normal primary.
/// Returns whether a fresh duty was made.
pub fn follow(
    duty: &mut Option<PrimaryDuty>,
    normal_primary: bool,
    view: View,
    client: impl FnOnce() -> ClientId,
) -> bool {
    if !normal_primary {
        *duty = None;
        return false;
    }
    if duty.as_ref().is_some_and(|duty| duty.view == view) {
        return false;
    }
    *duty = Some(PrimaryDuty::new(view, client()));
    true
}

impl PrimaryDuty {
    /// The duty of a replica that just became the primary of `view`.
    pub fn new(view: View, client: ClientId) -> PrimaryDuty {
        PrimaryDuty {
            view,
            client,
            request_next: RequestNumber(1),
            in_flight: false,
            pending: Vec::new(),
            copies: VecDeque::new(),
            install_in_flight: None,
            copies_sent: BTreeMap::new(),
            router: ReplicaIndex(0),
            // A new primary resends every retained reply (duplicates are harmless).
            released_sent: 0,
            watermark: Timestamp::ZERO,
            watermark_submitted: Timestamp::ZERO,
            watermark_last: false,
        }
    }

    pub fn view(&self) -> View {
        self.view
    }

    /// The VR client id of the duty's requests (replies to any other id are a gateway's).
    pub fn client(&self) -> ClientId {
        self.client
    }

    /// Deliveries received and not yet submitted.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    pub fn in_flight(&self) -> bool {
        self.in_flight
    }

    /// Router `router`'s deliveries to group `group`. `groupings`: under
    /// `CutPlanning::Regrouped`, the groups around every keyspace message among them.
    pub fn deliver(
        &mut self,
        router: ReplicaIndex,
        deliveries: Vec<Delivery>,
        planning: CutPlanning,
        groupings: &[Groups],
        group: ProcessId,
    ) -> Delivered {
        self.router = router;
        let mut delivered = Delivered::default();
        let count = deliveries.len();
        for (index, delivery) in deliveries.into_iter().enumerate() {
            if self.pending.len() >= PENDING_SHARES_MAX {
                delivered.dropped_full = count - index;
                break;
            }
            let envelope = std::sync::Arc::unwrap_or_clone(delivery.envelope);
            let instructions = match &envelope.routing {
                Routing::Config { message, .. } => match &message.change {
                    ConfigChange::Keyspace(keyspace) => Some(keyspace.instructions.clone()),
                    ConfigChange::Membership(_) => None,
                },
                _ => None,
            };
            if instructions.is_some() {
                delivered.keyspace_versions.push(delivery.version);
            }
            let share = Share {
                timestamp: delivery.timestamp,
                previous: delivery.previous,
                sender: envelope.sender,
                sequence: envelope.sequence,
                operation: envelope.payload,
            };
            // A keyspace message's share carries no operation: its cut is the operation.
            let bare = |share: Share| Share {
                operation: Vec::new(),
                ..share
            };
            let pending = match (instructions, planning) {
                (Some(instructions), CutPlanning::Elastic) => Pending::Keyspace {
                    share: bare(share),
                    version: delivery.version,
                    instructions,
                },
                (Some(_), CutPlanning::Regrouped) => {
                    match regrouped_cut(groupings, delivery.version, group) {
                        Some(cut) => Pending::Regrouped {
                            share: bare(share),
                            cut,
                        },
                        None => {
                            // Not logged: the chain waits for it.
                            delivered.without_groups.push(delivery.version);
                            continue;
                        }
                    }
                }
                _ => Pending::Share(share),
            };
            self.pending.push(pending);
        }
        debug_assert!(self.pending.len() <= PENDING_SHARES_MAX);
        delivered
    }

    /// The lead router reported `watermark` stable.
    pub fn raise_watermark(&mut self, watermark: Timestamp) {
        self.watermark = self.watermark.max(watermark);
    }

    /// Group `to` installed this group's copy of `version`: log that it need not be kept
    /// (once, however often the acknowledgement arrives).
    pub fn copy_acknowledged(&mut self, version: ConfigVersion, to: ProcessId) {
        let operation = PartitionOperation::Installed { version, to };
        if !self.copies.contains(&operation) {
            self.copies.push_back(operation);
        }
    }

    /// Whether the copy of `version` from group `from` is queued or being installed already
    /// (its parts arriving again are not reassembled again).
    pub fn installing(&self, version: ConfigVersion, from: ProcessId) -> bool {
        let queued = self
            .copies
            .iter()
            .any(|operation| copy_of(operation) == Some((version, from)));
        queued || self.install_in_flight == Some((version, from))
    }

    /// The whole copy of `version` from group `from` arrived: log it in parts of at most
    /// `part_bytes` bytes (`PartitionOperation::InstallPart`, split at fixed offsets, so a
    /// new primary logs the same parts and the machine skips those it has), in order.
    pub fn install(
        &mut self,
        version: ConfigVersion,
        from: ProcessId,
        records: &[u8],
        part_bytes: usize,
    ) {
        debug_assert!(!self.installing(version, from), "a copy is installed once");
        self.copies
            .extend(crate::install_parts(version, from, records, part_bytes));
    }

    /// Drops the queued parts of the copy of `version` from `from` (a part was refused: the
    /// sender resends the copy and it is logged again from its first part).
    fn drop_parts(&mut self, version: ConfigVersion, from: ProcessId) {
        self.copies
            .retain(|operation| copy_of(operation) != Some((version, from)));
    }

    /// Forgets the resend times of copies the machine no longer owes (`outgoing`).
    pub fn retain_copies(&mut self, outgoing: &[(ConfigVersion, ProcessId)]) {
        self.copies_sent.retain(|copy, _| outgoing.contains(copy));
    }

    /// Whether the copy of `version` owed to group `to` is to be sent (again) at tick `now`:
    /// never sent by this duty, or last sent `resend_ticks` or more ago. Records the sending.
    pub fn copy_due(
        &mut self,
        version: ConfigVersion,
        to: ProcessId,
        now: u64,
        resend_ticks: u64,
    ) -> bool {
        let sent = self.copies_sent.get(&(version, to));
        if sent.is_some_and(|sent| now < sent.saturating_add(resend_ticks)) {
            return false;
        }
        self.copies_sent.insert((version, to), now);
        true
    }

    /// The replies `machine` released that this duty has not sent, oldest first, with their
    /// numbers in the machine's release queue; they count as sent from now on.
    pub fn released<'m, D: PartitionData>(
        &mut self,
        machine: &'m PartitionMachine<D>,
    ) -> Vec<(u64, &'m Released)> {
        let mut released = Vec::new();
        for (number, reply) in machine.released_after(self.released_sent) {
            debug_assert!(*number > self.released_sent, "released in number order");
            self.released_sent = *number;
            released.push((*number, reply));
        }
        released
    }

    /// The duty's next request to its own replica of group `group` (whose fixed arc is
    /// `arc`), or none while one is in flight or nothing is due.
    pub fn next_request<D: PartitionData>(
        &mut self,
        machine: &PartitionMachine<D>,
        arc: &PositionSet,
        group: ProcessId,
    ) -> Option<Request> {
        if self.in_flight {
            return None;
        }
        let operation = self.next_operation(machine, arc, group)?;
        let request = Request {
            client: self.client,
            request: self.request_next,
            kind: RequestKind::Write,
            operation: operation.encode(),
        };
        self.request_next = RequestNumber(self.request_next.0 + 1);
        self.in_flight = true;
        debug_assert_eq!(request.request.0 + 1, self.request_next.0);
        Some(request)
    }

    fn next_operation<D: PartitionData>(
        &mut self,
        machine: &PartitionMachine<D>,
        arc: &PositionSet,
        group: ProcessId,
    ) -> Option<PartitionOperation> {
        // Deliveries and watermarks take turns, so that neither starves the other (held
        // operations wait for the watermark; the routers for the confirmations). Copies and
        // their acknowledgements go first: executions may wait for them.
        while let Some(operation) = self.copies.pop_front() {
            if let PartitionOperation::InstallPart {
                version,
                from,
                offset,
                bytes,
                ..
            } = &operation
            {
                // A part the machine logged already (under an earlier primary) is skipped; the
                // last one never is (it holds none while receiving): its commit is the
                // acknowledgement.
                let end = offset + bytes.len() as u64;
                if machine
                    .install_received(*version, *from)
                    .is_some_and(|received| end <= received && !bytes.is_empty())
                {
                    continue;
                }
            }
            if let Some(copy) = copy_of(&operation) {
                self.install_in_flight = Some(copy);
            }
            return Some(operation);
        }
        let watermark_due = self.watermark > self.watermark_submitted;
        if watermark_due && (self.pending.is_empty() || !self.watermark_last) {
            self.watermark_submitted = self.watermark;
            self.watermark_last = true;
            return Some(PartitionOperation::Watermark(self.watermark));
        }
        if self.pending.first()?.is_cut() {
            self.watermark_last = false;
            let cut = self.pending.remove(0);
            let share = match &cut {
                Pending::Keyspace { share, .. } | Pending::Regrouped { share, .. } => share,
                Pending::Share(_) => unreachable!("a cut"),
            };
            // Only a cut that is next in the chain is logged: an early one (a delivery before
            // it is missing) is dropped and comes back with the forwarder's resends (after the
            // missing delivery), so that no cut is ever planned before an earlier one is in
            // the log (the rules could drop that one, `Ignored::BufferFull`, and a later cut
            // would start from the wrong holdings). The previous request, if it was a cut,
            // has committed: one request in flight.
            if share.previous > machine.rules().logged() {
                return None;
            }
            return Some(match cut {
                Pending::Keyspace {
                    share,
                    version,
                    instructions,
                } => {
                    let before = machine
                        .holds_logged()
                        .cloned()
                        .unwrap_or_else(|| arc.clone());
                    let holds = PartitionCut::holds_after(&instructions, group, &before);
                    let cut = PartitionCut::project(&instructions, group, version, holds);
                    // In a `skyros` group the cut, an ordered write like every request here,
                    // is ordered after every nilext write the primary acknowledged before it,
                    // and no nilext write is acknowledged early while it is pending nor, once
                    // it executed, for a key it moved away or while copies install
                    // (`docs/internals/rubberband.md`, "Skyros partitions at replication 1").
                    PartitionOperation::Cut { share, cut }
                }
                Pending::Regrouped { share, cut } => PartitionOperation::Cut { share, cut },
                Pending::Share(_) => unreachable!("a cut"),
            });
        }
        self.watermark_last = false;
        // The shares up to the next keyspace message.
        let end = self
            .pending
            .iter()
            .position(Pending::is_cut)
            .unwrap_or(self.pending.len());
        let shares: Vec<Share> = self
            .pending
            .drain(..end)
            .map(|pending| match pending {
                Pending::Share(share) => share,
                _ => unreachable!("drained up to the first cut"),
            })
            .collect();
        debug_assert!(!shares.is_empty());
        Some(PartitionOperation::Deliveries(shares))
    }

    /// The replica answered `reply` to the duty's client: what the driver is to do.
    pub fn on_reply(&mut self, reply: &Reply) -> DutyReply {
        debug_assert_eq!(reply.client, self.client, "the duty's own reply");
        if !self.in_flight || reply.request.0 + 1 != self.request_next.0 {
            return DutyReply::Stale;
        }
        self.in_flight = false;
        let install = self.install_in_flight.take();
        match (PartitionResult::decode(&reply.result), install) {
            (PartitionResult::Logged { admitted }, _) if admitted == Timestamp::ZERO => {
                DutyReply::Quiet
            }
            (PartitionResult::Logged { admitted }, _) => DutyReply::Confirm {
                router: self.router,
                admitted,
            },
            (PartitionResult::Installed, Some((version, from))) => {
                // Parts queued behind it (logged before a view change) need not be logged.
                self.drop_parts(version, from);
                DutyReply::Installed { version, from }
            }
            (PartitionResult::PartLogged { .. }, Some(_)) => DutyReply::Quiet,
            // An install of a cut this group has not logged yet, or a part out of order: the
            // copy's other parts are dropped (the sender resends it).
            (PartitionResult::Unknown, Some((version, from))) => {
                self.drop_parts(version, from);
                DutyReply::Quiet
            }
            // An `Installed` of an acknowledgement.
            (PartitionResult::Installed, None) => DutyReply::Quiet,
            (other, _) => DutyReply::Unexpected(other),
        }
    }
}

/// The copy (version, sender) an install operation carries.
fn copy_of(operation: &PartitionOperation) -> Option<(ConfigVersion, ProcessId)> {
    match operation {
        PartitionOperation::Install { version, from, .. }
        | PartitionOperation::InstallPart { version, from, .. } => Some((*version, *from)),
        _ => None,
    }
}

/// Group `group`'s cut of the keyspace message that made `version`, from the regrouping
/// between the groups before it and those after it (both among `groupings`).
pub fn regrouped_cut(
    groupings: &[Groups],
    version: ConfigVersion,
    group: ProcessId,
) -> Option<PartitionCut> {
    let after = groupings
        .iter()
        .find(|groups| groups.version() == version)?;
    let before = groupings
        .iter()
        .filter(|groups| groups.version() < version)
        .max_by_key(|groups| groups.version())?;
    PartitionCut::regroup(&Regrouping::try_between(before, after)?, group)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition_machine::tests::Bytes;
    use crate::{Envelope, PartitionMachineSettings, Sequence};
    use placement::ecast::Target;
    use placement::{ConfigMessage, KeyspaceMessage, Position, Transformation};
    use std::sync::Arc;
    use vr::StateMachine;

    const GROUP: ProcessId = ProcessId(7);

    fn machine() -> PartitionMachine<Bytes> {
        PartitionMachine::new(Bytes::default(), PartitionMachineSettings::default())
    }

    fn arc() -> PositionSet {
        PositionSet::whole()
    }

    fn delivery(timestamp: u64, previous: u64, payload: &[u8]) -> Delivery {
        let sender = ProcessId(1_000 + timestamp);
        Delivery {
            timestamp: Timestamp(timestamp),
            previous: Timestamp(previous),
            version: ConfigVersion(0),
            envelope: Arc::new(Envelope {
                sender,
                sequence: Sequence(timestamp),
                planned_at: ConfigVersion(0),
                routing: Routing::Write {
                    sender,
                    target: Target::Points(vec![Position(u64::from(payload[1]))]),
                },
                payload: payload.to_vec(),
            }),
        }
    }

    /// A keyspace message at `timestamp` making version `version`: this group sends positions
    /// 0..=9 to group 8 and drops them.
    fn keyspace(timestamp: u64, previous: u64, version: u64) -> Delivery {
        let sender = ProcessId(99);
        let instructions = vec![
            Instruction::Copy {
                from: GROUP,
                to: ProcessId(8),
                range: PositionSet::from_inclusive(Position(0), Position(9)),
            },
            Instruction::Delete {
                at: GROUP,
                range: PositionSet::from_inclusive(Position(0), Position(9)),
            },
        ];
        Delivery {
            timestamp: Timestamp(timestamp),
            previous: Timestamp(previous),
            version: ConfigVersion(version),
            envelope: Arc::new(Envelope {
                sender,
                sequence: Sequence(timestamp),
                planned_at: ConfigVersion(version - 1),
                routing: Routing::Config {
                    sender,
                    message: ConfigMessage {
                        based_on: ConfigVersion(version - 1),
                        change: ConfigChange::Keyspace(KeyspaceMessage {
                            transformation: Transformation::Contract {
                                process: ProcessId(8),
                            },
                            instructions,
                        }),
                    },
                },
                payload: Vec::new(),
            }),
        }
    }

    fn operation(request: &Request) -> PartitionOperation {
        PartitionOperation::decode(&request.operation).expect("the duty's own encoding")
    }

    /// Applies `request` to `machine` and hands the duty its reply.
    fn commit(
        duty: &mut PrimaryDuty,
        machine: &mut PartitionMachine<Bytes>,
        request: &Request,
    ) -> DutyReply {
        let result = machine.apply(&request.operation);
        duty.on_reply(&Reply {
            view: duty.view(),
            client: request.client,
            request: request.request,
            result,
        })
    }

    #[test]
    fn one_request_is_in_flight_and_deliveries_are_confirmed_to_the_router_that_delivered() {
        let mut machine = machine();
        let mut duty = PrimaryDuty::new(View(3), ClientId(42));
        duty.deliver(
            ReplicaIndex(2),
            vec![delivery(1, 0, b"pa\x01"), delivery(2, 1, b"pb\x02")],
            CutPlanning::Fixed,
            &[],
            GROUP,
        );
        let request = duty.next_request(&machine, &arc(), GROUP).expect("due");
        assert_eq!(
            (request.client, request.request),
            (ClientId(42), RequestNumber(1))
        );
        assert!(
            matches!(operation(&request), PartitionOperation::Deliveries(shares) if shares.len() == 2)
        );
        duty.deliver(
            ReplicaIndex(1),
            vec![delivery(3, 2, b"pc\x03")],
            CutPlanning::Fixed,
            &[],
            GROUP,
        );
        assert_eq!(
            duty.next_request(&machine, &arc(), GROUP),
            None,
            "one in flight"
        );
        // The confirmation goes to the router that delivered last.
        assert_eq!(
            commit(&mut duty, &mut machine, &request),
            DutyReply::Confirm {
                router: ReplicaIndex(1),
                admitted: Timestamp(2)
            }
        );
        // The same reply again is stale.
        let result =
            machine.query(&PartitionOperation::Query(crate::PartitionQuery::Progress).encode());
        let stale = Reply {
            view: View(3),
            client: ClientId(42),
            request: RequestNumber(1),
            result,
        };
        assert_eq!(duty.on_reply(&stale), DutyReply::Stale);
        let next = duty
            .next_request(&machine, &arc(), GROUP)
            .expect("the third delivery");
        assert_eq!(next.request, RequestNumber(2));
        assert!(duty.in_flight());
    }

    #[test]
    fn watermarks_and_deliveries_take_turns_and_copies_go_first() {
        let machine = machine();
        let mut duty = PrimaryDuty::new(View(1), ClientId(5));
        let mut kinds = Vec::new();
        let reply_to = |duty: &mut PrimaryDuty, request: &Request| {
            duty.on_reply(&Reply {
                view: View(1),
                client: request.client,
                request: request.request,
                result: PartitionResult::Logged {
                    admitted: Timestamp::ZERO,
                }
                .encode(),
            })
        };
        for round in 1..=3_u64 {
            duty.deliver(
                ReplicaIndex(0),
                vec![delivery(round, round - 1, b"pa\x01")],
                CutPlanning::Fixed,
                &[],
                GROUP,
            );
            duty.raise_watermark(Timestamp(round));
        }
        duty.copy_acknowledged(ConfigVersion(4), ProcessId(9));
        duty.copy_acknowledged(ConfigVersion(4), ProcessId(9));
        while let Some(request) = duty.next_request(&machine, &arc(), GROUP) {
            kinds.push(match operation(&request) {
                PartitionOperation::Installed { .. } => "installed",
                PartitionOperation::Watermark(_) => "watermark",
                PartitionOperation::Deliveries(_) => "deliveries",
                other => panic!("unexpected {other:?}"),
            });
            assert_eq!(reply_to(&mut duty, &request), DutyReply::Quiet);
        }
        // The acknowledgement once, first; then a watermark (nothing submitted yet) and the
        // deliveries; the watermark is not due again (it did not rise).
        assert_eq!(kinds, ["installed", "watermark", "deliveries"]);
        duty.deliver(
            ReplicaIndex(0),
            vec![delivery(4, 3, b"pa\x01")],
            CutPlanning::Fixed,
            &[],
            GROUP,
        );
        duty.raise_watermark(Timestamp(4));
        // Deliveries went last: the risen watermark goes first, then the delivery.
        let first = duty.next_request(&machine, &arc(), GROUP).expect("due");
        assert_eq!(
            operation(&first),
            PartitionOperation::Watermark(Timestamp(4))
        );
        reply_to(&mut duty, &first);
        let second = duty.next_request(&machine, &arc(), GROUP).expect("due");
        assert!(matches!(
            operation(&second),
            PartitionOperation::Deliveries(_)
        ));
    }

    #[test]
    fn a_cut_is_planned_from_the_holdings_only_when_it_is_next_in_the_chain() {
        let mut machine = machine();
        let mut duty = PrimaryDuty::new(View(0), ClientId(1));
        // The cut's predecessor (timestamp 1) has not arrived: the early cut is dropped.
        let delivered = duty.deliver(
            ReplicaIndex(0),
            vec![keyspace(2, 1, 1)],
            CutPlanning::Elastic,
            &[],
            GROUP,
        );
        assert_eq!(delivered.keyspace_versions, vec![ConfigVersion(1)]);
        assert_eq!(duty.next_request(&machine, &arc(), GROUP), None);
        assert_eq!(duty.pending(), 0, "dropped: it comes back with the resends");
        // Resent after its predecessor, it is logged as the group's cut.
        duty.deliver(
            ReplicaIndex(0),
            vec![delivery(1, 0, b"pa\x01"), keyspace(2, 1, 1)],
            CutPlanning::Elastic,
            &[],
            GROUP,
        );
        let shares = duty
            .next_request(&machine, &arc(), GROUP)
            .expect("the share first");
        assert!(
            matches!(operation(&shares), PartitionOperation::Deliveries(shares) if shares.len() == 1)
        );
        commit(&mut duty, &mut machine, &shares);
        let cut = duty.next_request(&machine, &arc(), GROUP).expect("the cut");
        let PartitionOperation::Cut { share, cut } = operation(&cut) else {
            panic!("a cut");
        };
        assert_eq!((share.timestamp, share.operation.len()), (Timestamp(2), 0));
        assert_eq!(cut.version, ConfigVersion(1));
        assert!(!cut.holds.contains(Position(5)) && cut.holds.contains(Position(10)));
        // Regrouped without the groups: not queued at all.
        let delivered = duty.deliver(
            ReplicaIndex(0),
            vec![keyspace(3, 2, 2)],
            CutPlanning::Regrouped,
            &[],
            GROUP,
        );
        assert_eq!(delivered.without_groups, vec![ConfigVersion(2)]);
        assert_eq!(duty.pending(), 0);
    }

    #[test]
    fn a_copy_is_installed_once_and_acknowledged_to_its_sender_when_committed() {
        let mut machine = machine();
        let mut duty = PrimaryDuty::new(View(2), ClientId(3));
        assert!(!duty.installing(ConfigVersion(1), ProcessId(4)));
        duty.install(ConfigVersion(1), ProcessId(4), &[], 16);
        assert!(duty.installing(ConfigVersion(1), ProcessId(4)));
        let request = duty
            .next_request(&machine, &arc(), GROUP)
            .expect("the install");
        assert!(duty.installing(ConfigVersion(1), ProcessId(4)), "in flight");
        let reply = duty.on_reply(&Reply {
            view: View(2),
            client: ClientId(3),
            request: request.request,
            result: PartitionResult::Installed.encode(),
        });
        assert_eq!(
            reply,
            DutyReply::Installed {
                version: ConfigVersion(1),
                from: ProcessId(4)
            }
        );
        assert!(!duty.installing(ConfigVersion(1), ProcessId(4)));
        // An install the machine does not know yet is dropped quietly (the sender resends).
        duty.install(ConfigVersion(2), ProcessId(4), &[], 16);
        let request = duty
            .next_request(&machine, &arc(), GROUP)
            .expect("the install");
        assert_eq!(commit(&mut duty, &mut machine, &request), DutyReply::Quiet);
    }

    /// A copy is logged in parts, one request at a time; a view change mid-install: the next
    /// primary's duty gets the resent copy, skips the parts the machine logged, logs the rest,
    /// and the machine ends as one whole install would leave it.
    #[test]
    fn a_copy_is_logged_in_parts_and_a_new_primary_logs_only_the_rest() {
        use crate::partition_machine::tests::receiving_group;
        let records: Vec<(u8, u8)> = (b'a'..=b'z').map(|key| (key, key)).collect();
        let records = postcard::to_allocvec(&records).expect("encodes");
        let (version, from) = (ConfigVersion(1), ProcessId(1));
        let mut whole = receiving_group(PartitionMachineSettings::default());
        let install = PartitionOperation::Install {
            version,
            from,
            records: records.clone(),
        };
        whole.apply(&install.encode());
        let mut machine = receiving_group(PartitionMachineSettings::default());
        let mut first = PrimaryDuty::new(View(0), ClientId(1));
        first.install(version, from, &records, 8);
        let parts = records.len().div_ceil(8);
        assert!(parts > 3);
        // Two parts commit, a third is logged but its reply is lost in the view change.
        for _ in 0..2 {
            let request = first.next_request(&machine, &arc(), GROUP).expect("a part");
            assert!(matches!(
                operation(&request),
                PartitionOperation::InstallPart { .. }
            ));
            assert_eq!(commit(&mut first, &mut machine, &request), DutyReply::Quiet);
            assert!(first.installing(version, from));
        }
        let third = first.next_request(&machine, &arc(), GROUP).expect("a part");
        machine.apply(&third.operation);
        assert_eq!(machine.install_received(version, from), Some(24));
        // The next primary: the sender resends the copy.
        let mut second = PrimaryDuty::new(View(1), ClientId(2));
        assert!(!second.installing(version, from));
        second.install(version, from, &records, 8);
        let mut offsets = Vec::new();
        let reply = loop {
            let request = second
                .next_request(&machine, &arc(), GROUP)
                .expect("a part");
            let PartitionOperation::InstallPart { offset, .. } = operation(&request) else {
                panic!("a part");
            };
            offsets.push(offset);
            match commit(&mut second, &mut machine, &request) {
                DutyReply::Quiet => continue,
                reply => break reply,
            }
        };
        assert_eq!(reply, DutyReply::Installed { version, from });
        let expected: Vec<u64> = (3..parts as u64).map(|part| part * 8).collect();
        assert_eq!(offsets, expected, "the parts logged before are skipped");
        assert!(!second.installing(version, from));
        assert_eq!(second.next_request(&machine, &arc(), GROUP), None);
        assert_eq!(machine, whole, "as one whole install");
    }

    /// A refused part (out of order: a part before it is missing) drops the copy's queued
    /// parts, so that the sender's resend is reassembled and logged again.
    #[test]
    fn a_refused_part_drops_the_rest_of_its_copy() {
        use crate::partition_machine::tests::receiving_group;
        let records = [7_u8; 40];
        let (version, from) = (ConfigVersion(1), ProcessId(1));
        let mut machine = receiving_group(PartitionMachineSettings::default());
        let mut duty = PrimaryDuty::new(View(0), ClientId(1));
        duty.install(version, from, &records[..], 8);
        // The first part is lost (never logged): the second is refused.
        let lost = duty.next_request(&machine, &arc(), GROUP).expect("a part");
        duty.on_reply(&Reply {
            view: View(0),
            client: lost.client,
            request: lost.request,
            result: PartitionResult::PartLogged { received: 8 }.encode(),
        });
        let second = duty.next_request(&machine, &arc(), GROUP).expect("a part");
        assert_eq!(commit(&mut duty, &mut machine, &second), DutyReply::Quiet);
        assert!(!duty.installing(version, from), "dropped");
        assert_eq!(duty.next_request(&machine, &arc(), GROUP), None);
        assert_eq!(machine.install_received(version, from), None);
    }

    #[test]
    fn released_replies_are_sent_once_per_duty_and_again_by_a_new_primary() {
        let mut machine = machine();
        let mut duty = PrimaryDuty::new(View(0), ClientId(1));
        duty.deliver(
            ReplicaIndex(0),
            vec![delivery(1, 0, b"pa\x01")],
            CutPlanning::Fixed,
            &[],
            GROUP,
        );
        let request = duty.next_request(&machine, &arc(), GROUP).expect("due");
        commit(&mut duty, &mut machine, &request);
        assert_eq!(duty.released(&machine).len(), 1, "the share's answer");
        assert!(duty.released(&machine).is_empty(), "sent once");
        let mut following = Some(duty);
        assert!(
            !follow(&mut following, true, View(0), || ClientId(9)),
            "same view"
        );
        assert!(
            follow(&mut following, true, View(1), || ClientId(9)),
            "a new view"
        );
        let fresh = following.as_mut().expect("a duty");
        assert_eq!(fresh.client(), ClientId(9));
        assert_eq!(fresh.released(&machine).len(), 1, "a new primary resends");
        assert!(!follow(&mut following, false, View(1), || ClientId(10)));
        assert!(following.is_none(), "no duty off a normal primary");
    }

    #[test]
    fn copies_are_resent_only_after_the_resend_interval_and_the_queue_is_bounded() {
        let mut duty = PrimaryDuty::new(View(0), ClientId(1));
        let copy = (ConfigVersion(3), ProcessId(8));
        assert!(duty.copy_due(copy.0, copy.1, 100, 50));
        assert!(!duty.copy_due(copy.0, copy.1, 149, 50));
        assert!(duty.copy_due(copy.0, copy.1, 150, 50));
        duty.retain_copies(&[]);
        assert!(
            duty.copy_due(copy.0, copy.1, 151, 50),
            "forgotten: due at once"
        );
        let deliveries: Vec<Delivery> = (1..=PENDING_SHARES_MAX as u64 + 5)
            .map(|timestamp| delivery(timestamp, timestamp - 1, b"pa\x01"))
            .collect();
        let delivered = duty.deliver(ReplicaIndex(0), deliveries, CutPlanning::Fixed, &[], GROUP);
        assert_eq!(
            (duty.pending(), delivered.dropped_full),
            (PENDING_SHARES_MAX, 5)
        );
    }
}
