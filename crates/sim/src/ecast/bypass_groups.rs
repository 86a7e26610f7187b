//! Partition groups of real replicas in the bypass mode (`vr` partitions): each group is
//! `members` replicas of `PartitionMachine<SimData>` (`sim::replicas`: `vr::Replica`s driven
//! through `vr::Replication`) exchanging VR messages over the
//! simulated network, and the replica that is the primary of a normal view runs
//! `ecast::PrimaryDuty` — the same duty the runtime's partition host runs
//! (`runtime::ecast::partition_host`). The simulator adds what the host adds and nothing else:
//! it hands a member what arrives, steps its replica with the duty's requests, and sends what
//! the replica and the duty say to whom they say it.
//!
//! Faults of members: a member of a group of three may crash (its state is lost; it restarts
//! `Replica::recovering` with a fresh nonce, as a diskless storage process does) or pause (it
//! keeps its state, receives nothing and is not ticked; the others may suspect it and change
//! view; it comes back and learns it was deposed: a false suspicion). At most one member of a
//! group is down at a time, so a majority always remains. A one-member group (replication 1
//! with Rubberband) only pauses: with memory durability its crash would lose the group.

use super::{
    decode_values, partition_of, BypassCanary, BypassOptions, BypassSimulation, Msg, Node, SimData,
    GATEWAY_BASE, LANE_CLIENT_BASE, LANE_GATEWAY_SHIFT, LANE_RETRY_TICKS,
};
use crate::replicas;
use ecast::group_lifecycle::{Fate, GroupLifecycle, ReplicaState, Tombstone};
use ecast::partition_duty::{self, CutPlanning, DutyReply, PrimaryDuty};
use ecast::{
    BypassSettings, Delivery, Gateway, PartitionMachine, PartitionOperation, PartitionQuery,
    PartitionResult, Released, Timestamp,
};
use placement::{ConfigChange, ConfigVersion, Groups, ProcessId};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use vr::{
    ClientId, Effect, Input, Message, Nonce, ReplicaIndex, Replication, Reply, Request,
    RequestKind, RequestNumber, StateMachine, StatusName,
};

/// The duties' VR client ids (a fresh one per duty).
const DUTY_CLIENT_BASE: u64 = 0xd017_0000_0000_0000;
/// A copy is logged in parts of at least this many bytes (`PartitionOperation::InstallPart`;
/// the runtime's are `ClusterConfig::install_part_bytes`, MiBs): tiny, so that most installs
/// take several parts, interleaved with view changes.
const INSTALL_PART_BYTES: usize = 4;

/// The part size of a copy of `bytes` bytes: `INSTALL_PART_BYTES`, or larger so that the copy
/// takes at most `parts_max` parts (`BypassOptions::install_parts_max`, 8). Each part is one
/// VR round of the receiving group, one at a time, and nothing executes there before the last:
/// the SQL modes' copies (rows, catalog, transaction state: 500–1,200 bytes) took 150–300
/// rounds each in 4-byte parts, ~15 ticks a round under the modes' loss and delays, and kept
/// started groups from confirming anything past the 8,000-tick liveness bound
/// (`crates/sim/tests/bypass_sql.rs`). A function of the copy alone, so every primary of the
/// receiving group splits it alike (the machine accepts another split too: `install_part`).
fn install_part_bytes(bytes: usize, parts_max: usize) -> usize {
    assert!(parts_max >= 1, "a copy takes at least one part");
    INSTALL_PART_BYTES.max(bytes.div_ceil(parts_max))
}

/// The per-message canary's `MessageStable` requests, one client per group.
const STABLE_CLIENT_BASE: u64 = 0x57ab_0000_0000_0000;

/// One member of a partition group.
pub(super) struct Member {
    /// `None` while crashed.
    pub(super) replica: Option<replicas::Member<PartitionMachine<SimData>>>,
    /// Set while the replica is the primary of a normal view.
    pub(super) duty: Option<PrimaryDuty>,
    /// Down (crashed or paused) until this tick.
    pub(super) down_until: Option<u64>,
    /// Down but keeping its state (a pause), rather than crashed.
    pub(super) paused: bool,
    /// Above replication 1: its storage process's decisions about the group's life
    /// (`ecast::GroupLifecycle`, the runtime host's), and what it decided: the replica stopped
    /// (its tombstone answers late bypass requests) or dropped (answering nothing). The
    /// replica itself is kept only for the end checks.
    pub(super) lifecycle: GroupLifecycle,
    pub(super) tombstone: Option<Tombstone>,
    pub(super) dropped: bool,
    /// Its machine's open read jobs: the tick each is done, and whether later than handed
    /// out (the host's worker,
    /// `BypassOptions::read_job_delay_ticks_max`).
    pub(super) jobs: BTreeMap<u64, (u64, bool)>,
}

/// A finished retired replica stops this many ticks later (the runtime's 2 s).
const STOP_AFTER_TICKS: u64 = 100;

impl Member {
    fn up(&self) -> bool {
        self.active() && self.down_until.is_none() && self.replica.is_some()
    }

    /// Neither stopped nor dropped.
    fn active(&self) -> bool {
        self.tombstone.is_none() && !self.dropped
    }
}

/// The group members' VR configuration.
pub(super) fn group_config(options: &BypassOptions, members: u8) -> vr::Config {
    let (heartbeat_ticks, timeout_ticks) =
        (options.group_heartbeat_ticks, options.group_timeout_ticks);
    let mut config = vr::Config::new(members, vr::Durability::Memory);
    if options.skyros {
        config.protocol = vr::Protocol::Skyros;
    }
    config.canary = match options.canary {
        Some(BypassCanary::GroupCommitWithoutQuorum) => Some(vr::Canary::CommitWithoutQuorum),
        Some(BypassCanary::SkyrosGateIgnored) => Some(vr::Canary::NilextGateIgnored),
        Some(BypassCanary::SkyrosCommUnchecked) => Some(vr::Canary::CommPreviewUnchecked),
        _ => None,
    };
    config.heartbeat_ticks = heartbeat_ticks;
    config.primary_timeout_ticks = timeout_ticks;
    config.view_change_timeout_ticks = timeout_ticks;
    config
}

/// The members of a group whose machine starts as `machine`.
pub(super) fn members(config: &vr::Config, machine: &PartitionMachine<SimData>) -> Vec<Member> {
    (0..config.replica_count)
        .map(|index| Member {
            replica: Some(replicas::create(
                config.clone(),
                ReplicaIndex(index),
                machine.clone(),
            )),
            duty: None,
            down_until: None,
            paused: false,
            lifecycle: GroupLifecycle::new(STOP_AFTER_TICKS),
            tombstone: None,
            dropped: false,
            jobs: BTreeMap::new(),
        })
        .collect()
}

/// A gateway of the replicated mode takes the router bypass itself, as the runtime's do
/// (`Gateway::with_bypass`, with regrouping at replication 3): a transaction whose keys lie in
/// one group goes to its members as a lane's VR request.
pub(super) fn with_bypass(
    gateway: Gateway<super::Answer>,
    options: &BypassOptions,
    index: usize,
    groups: &std::collections::BTreeMap<ProcessId, u8>,
) -> Gateway<super::Answer> {
    let settings = BypassSettings {
        groups: groups.clone(),
        lanes: options.slots as u32,
        client_base: LANE_CLIENT_BASE + ((index as u64) << LANE_GATEWAY_SHIFT),
        retry_ticks: LANE_RETRY_TICKS,
    };
    let decode: ecast::BypassDecode<super::Answer> = |bytes| decode_values(bytes);
    let mut gateway = gateway.with_bypass(settings, decode);
    if options.replication > 1 {
        gateway = gateway.with_regrouping(1 << 16);
    }
    if options.skyros {
        // A put (writes only) is a nilext write: its execution answers no values.
        let nilext: ecast::BypassNilext = |payload| {
            let txn: super::Txn = postcard::from_bytes(payload).ok()?;
            let nilext = txn.reads.is_empty() && txn.adds.is_empty() && !txn.writes.is_empty();
            nilext.then(|| postcard::to_allocvec(&super::Answers::new()).expect("serialises"))
        };
        gateway = gateway.with_skyros(nilext);
        if options.skyros_comm {
            gateway = gateway.with_skyros_comm();
        }
        if options.skyros_adapt {
            gateway = gateway.with_adapt(super::ADAPT_DECIDE_TICKS);
        }
    }
    gateway
}

/// The gateway whose lane `client` is, if it is a lane.
fn lane_gateway(client: ClientId) -> Option<usize> {
    let offset = client.0.checked_sub(LANE_CLIENT_BASE)?;
    let gateway = offset >> LANE_GATEWAY_SHIFT;
    (gateway < 1 << 16).then_some(gateway as usize)
}

impl BypassSimulation {
    /// The machine that stands for group `index` in checks: the most advanced up member's
    /// (by executed ops), or in the abstract mode the group's one machine.
    pub(super) fn machine(&self, index: usize) -> &PartitionMachine<SimData> {
        let node = &self.partitions[index];
        node.members
            .iter()
            .filter_map(|member| member.replica.as_ref())
            .max_by_key(|replica| (replica.commit_min(), std::cmp::Reverse(replica.index())))
            .map_or(&node.initial, |replica| replica.state_machine())
    }

    /// How group `index` cuts its holdings at a keyspace message.
    fn planning(&self) -> CutPlanning {
        match (
            self.options.reconfigure_per_10000 > 0,
            self.options.replication,
        ) {
            (false, _) => CutPlanning::Fixed,
            (true, 1) => CutPlanning::Elastic,
            (true, _) => CutPlanning::Regrouped,
        }
    }

    /// A message for group `index` reached member `member`.
    pub(super) fn on_member(&mut self, index: usize, member: u8, message: Msg) {
        let slot = &self.partitions[index].members[member as usize];
        if let Some(tombstone) = &slot.tombstone {
            let silent = self.options.canary == Some(BypassCanary::TombstoneSilent);
            let deaf = self.options.canary == Some(BypassCanary::TombstoneDeafToCopies);
            match (&message, silent) {
                (Msg::PartitionRequest { request }, false) => {
                    // A stale gateway's request to a group whose replica stopped here.
                    let reply = tombstone.answer(request);
                    self.stats.tombstone_answers += 1;
                    if let Some(gateway) = lane_gateway(request.client) {
                        let partition = self.partitions[index].id;
                        let message = Message::Reply(reply);
                        let reply = Msg::PartitionReply { partition, message };
                        self.send(Node::Member(index, member), Node::Gateway(gateway), reply);
                    }
                }
                (Msg::Copy { version, from, .. }, _)
                    if !deaf && tombstone.acknowledges_copy(*version) =>
                {
                    // A copy resent to a group whose replica stopped here: its sender missed
                    // the acknowledgement the running replica sent (sim seed 2172).
                    self.stats.tombstone_copy_acks += 1;
                    let (version, to) = (*version, self.partitions[index].id);
                    let sender = self.index_of(*from);
                    let ack = Msg::CopyAck { version, to };
                    self.send(Node::Member(index, member), Node::Partition(sender), ack);
                }
                _ => {}
            }
            return;
        }
        if !slot.up() {
            return;
        }
        match message {
            Msg::Vr { message } => self.step_member(index, member, Input::Message(message)),
            Msg::PartitionRequest { request } => {
                self.step_member(index, member, Input::Message(Message::Request(request)))
            }
            Msg::Deliver { router, deliveries } => {
                self.member_deliver(index, member, router, deliveries)
            }
            Msg::Watermark(watermark) => {
                let Some(duty) = self.duty_mut(index, member) else {
                    return;
                };
                duty.raise_watermark(watermark);
                let id = self.partitions[index].id;
                let logged = self.member_machine(index, member).rules().watermark();
                if watermark > logged {
                    if let Err(violation) = self.order.on_watermark(id, watermark) {
                        self.fail(violation);
                    }
                }
                self.submit(index, member);
            }
            Msg::StableSet(timestamps) => {
                if self.duty_mut(index, member).is_none() {
                    return;
                }
                for timestamp in timestamps {
                    let node = &mut self.partitions[index];
                    node.stable_requests += 1;
                    let request = Request {
                        client: ClientId(STABLE_CLIENT_BASE + index as u64),
                        request: RequestNumber(node.stable_requests),
                        kind: RequestKind::Write,
                        operation: PartitionOperation::MessageStable(timestamp).encode(),
                    };
                    self.step_member(index, member, Input::Message(Message::Request(request)));
                }
            }
            Msg::Recall {
                timestamp,
                gateway,
                sequence,
            } => {
                // The read path, abstracted: a normal primary answers from its machine (an
                // admitted share's answer never changes, so even a deposed one answers right).
                if self.duty_mut(index, member).is_none() {
                    return;
                }
                let query = PartitionOperation::Query(PartitionQuery::Answer { timestamp });
                let answer = PartitionResult::decode(
                    &self.member_machine(index, member).query(&query.encode()),
                );
                if let PartitionResult::Executed(bytes) = answer {
                    if let Some(values) = decode_values(&bytes) {
                        let partition = self.partitions[index].id;
                        self.send(
                            Node::Member(index, member),
                            Node::Gateway(gateway),
                            Msg::MultiAnswer {
                                sequence,
                                partition,
                                values,
                            },
                        );
                    }
                }
            }
            Msg::Copy {
                version,
                from,
                records,
            } => {
                // Tiny parts: most copies install in several (`InstallPart`).
                let part_bytes = install_part_bytes(records.len(), self.options.install_parts_max);
                let Some(duty) = self.duty_mut(index, member) else {
                    return;
                };
                if !duty.installing(version, from) {
                    duty.install(version, from, &records, part_bytes);
                    let parts = records.len().div_ceil(part_bytes).max(1);
                    self.stats.install_parts += parts as u64;
                    self.stats.multi_part_copies += u64::from(parts > 1);
                }
                self.submit(index, member);
            }
            Msg::CopyAck { version, to } => {
                let Some(duty) = self.duty_mut(index, member) else {
                    return;
                };
                duty.copy_acknowledged(version, to);
                self.submit(index, member);
            }
            _ => {}
        }
    }

    fn duty_mut(&mut self, index: usize, member: u8) -> Option<&mut PrimaryDuty> {
        self.partitions[index].members[member as usize]
            .duty
            .as_mut()
    }

    fn member_machine(&self, index: usize, member: u8) -> &PartitionMachine<SimData> {
        self.partitions[index].members[member as usize]
            .replica
            .as_ref()
            .expect("an up member has a replica")
            .state_machine()
    }

    /// The router's deliveries at member `member`: its duty (if it is the primary) queues this
    /// group's shares and cuts.
    fn member_deliver(&mut self, index: usize, member: u8, router: u8, deliveries: Vec<Delivery>) {
        let slot = &mut self.partitions[index].members[member as usize];
        for delivery in &deliveries {
            slot.lifecycle.see_version(delivery.version);
        }
        if self.duty_mut(index, member).is_none() {
            return; // A backup: the primary got the same message.
        }
        let process = self.partitions[index].id;
        let logged = self.member_machine(index, member).rules().logged();
        let mut groupings: Vec<Groups> = Vec::new();
        let mut queued = Vec::with_capacity(deliveries.len());
        for delivery in deliveries {
            let keyspace = matches!(
                &delivery.envelope.routing,
                placement::ecast::Message::Config { message, .. }
                    if matches!(message.change, ConfigChange::Keyspace(_))
            );
            if keyspace {
                // The groups before and after the message (replication 3's cut is planned
                // from them; the routers send them with the delivery).
                for version in [ConfigVersion(delivery.version.0 - 1), delivery.version] {
                    if let Some(grouping) = self.groupings.get(&version) {
                        if !groupings.iter().any(|groups| groups.version() == version) {
                            groupings.push(grouping.groups.clone());
                        }
                    }
                }
                queued.push(delivery);
                continue;
            }
            // This partition's share of the transaction, as the application's data expects.
            let configuration = self.configuration_at(delivery.version);
            // (The SQL mode's payloads go whole: each partition executes its share itself.)
            let txn = match self.options.sql_data() {
                true => Err(()),
                false => {
                    postcard::from_bytes::<super::Txn>(&delivery.envelope.payload).map_err(|_| ())
                }
            };
            let payload = match txn {
                Ok(txn) => {
                    let share = txn.share(|key| partition_of(configuration, key) == process);
                    postcard::to_allocvec(&share).expect("a share serialises")
                }
                Err(_) => delivery.envelope.payload.clone(),
            };
            let previous = if self.options.canary == Some(BypassCanary::ChainIgnored)
                && delivery.timestamp > logged
            {
                logged
            } else {
                delivery.previous
            };
            let mut envelope = (*delivery.envelope).clone();
            envelope.payload = payload;
            queued.push(Delivery {
                previous,
                envelope: Arc::new(envelope),
                ..delivery
            });
        }
        let planning = self.planning();
        let duty = self.duty_mut(index, member).expect("checked above");
        duty.deliver(ReplicaIndex(router), queued, planning, &groupings, process);
        self.submit(index, member);
    }

    /// Steps member `member`'s replica with the duty's next request, if any.
    fn submit(&mut self, index: usize, member: u8) {
        if let Some(request) = self.next_request(index, member) {
            self.step_member(index, member, Input::Message(Message::Request(request)));
        }
    }

    fn next_request(&mut self, index: usize, member: u8) -> Option<Request> {
        let node = &mut self.partitions[index];
        let id = node.id;
        let arc = node.arc.clone();
        let slot = &mut node.members[member as usize];
        let replica = slot.replica.as_ref()?;
        slot.duty
            .as_mut()?
            .next_request(replica.state_machine(), &arc, id)
    }

    /// Steps a member's replica with `input`, carries out its effects, keeps its duty
    /// following its primaryship, sends released replies, and submits the duty's requests.
    pub(super) fn step_member(&mut self, index: usize, member: u8, input: Input) {
        let mut queue = VecDeque::from([input]);
        while let Some(input) = queue.pop_front() {
            let slot = &mut self.partitions[index].members[member as usize];
            let Some(replica) = slot.replica.as_mut() else {
                return;
            };
            let mut effects = Vec::new();
            replica.step(input, &mut effects);
            for effect in effects {
                match effect {
                    Effect::Send { to, message } => self.send(
                        Node::Member(index, member),
                        Node::Member(index, to.0),
                        Msg::Vr { message },
                    ),
                    Effect::Reply { client, message } => {
                        self.member_reply(index, member, client, message)
                    }
                    Effect::Persist { .. } => {
                        unreachable!("partition groups here are diskless")
                    }
                    // Serialised inline, completed right after this step (the vr-only
                    // simulation delays completions; `docs/internals/vr.md`).
                    Effect::Checkpoint {
                        mut checkpoint,
                        source,
                    } => {
                        checkpoint.state = source.serialise();
                        queue.push_back(Input::Checkpointed(checkpoint));
                    }
                }
            }
            self.run_jobs(index, member);
            self.follow(index, member);
            self.send_released(index, member);
            if let Some(request) = self.next_request(index, member) {
                queue.push_back(Input::Message(Message::Request(request)));
            }
        }
    }

    /// Read jobs, as the runtime's host runs them on a worker thread: each job the member's
    /// machine hands out gets a due tick (now, or after a seeded delay); a due job runs on its
    /// copy of the data and its results go back to the machine, which releases the replies
    /// waiting for it. Jobs no longer open (run by a logged query or a snapshot restore) are
    /// forgotten. Called after every step of the member (so at least every tick while up).
    fn run_jobs(&mut self, index: usize, member: u8) {
        let now = self.now;
        let delay_max = self.options.read_job_delay_ticks_max;
        let slot = &mut self.partitions[index].members[member as usize];
        let Some(replica) = slot.replica.as_mut() else {
            slot.jobs.clear();
            return;
        };
        let open: Vec<u64> = replica
            .state_machine()
            .jobs_after(0)
            .map(|(number, _)| number)
            .collect();
        slot.jobs.retain(|number, _| open.contains(number));
        for number in open {
            slot.jobs.entry(number).or_insert_with(|| {
                let delay = match delay_max {
                    0 => 0,
                    max => self.job_prng.range_inclusive(0, max),
                };
                (now + delay, delay > 0)
            });
        }
        let due: Vec<(u64, bool)> = slot
            .jobs
            .iter()
            .filter(|(_, (due, _))| *due <= now)
            .map(|(number, (_, delayed))| (*number, *delayed))
            .collect();
        // Due jobs that form a chain (`ReadJob::chains_to`) run as one batch, as the runtime's
        // worker runs the jobs queued while it was busy.
        let mut chains: Vec<Vec<(u64, ecast::ReadJob<SimData>)>> = Vec::new();
        for (number, _) in &due {
            slot.jobs.remove(number);
            let job = replica
                .state_machine()
                .jobs_after(number - 1)
                .next()
                .filter(|(open, _)| open == number)
                .map(|(_, job)| job.clone())
                .expect("a due job is open");
            match chains.last_mut() {
                Some(chain) if chain.last().expect("not empty").1.chains_to(&job) => {
                    chain.push((*number, job))
                }
                _ => chains.push(vec![(*number, job)]),
            }
        }
        for chain in chains {
            let jobs: Vec<&ecast::ReadJob<SimData>> = chain.iter().map(|(_, job)| job).collect();
            let results = ecast::ReadJob::run_together(&jobs);
            if chain.len() > 1 {
                self.stats.read_jobs_chained += chain.len() as u64;
            }
            for ((number, _), results) in chain.iter().zip(results) {
                replica.job_done(*number, results);
            }
        }
        self.stats.read_jobs += due.len() as u64;
        self.stats.read_jobs_delayed += due.iter().filter(|(_, delayed)| *delayed).count() as u64;
    }

    /// The duty follows the replica (fresh client id per duty, from the world's counter).
    fn follow(&mut self, index: usize, member: u8) {
        // The next unused id; counted only when a fresh duty takes it.
        let client = ClientId(DUTY_CLIENT_BASE + self.duty_clients + 1);
        let slot = &mut self.partitions[index].members[member as usize];
        let Some(replica) = slot.replica.as_ref() else {
            slot.duty = None;
            return;
        };
        let primary = replica.status() == StatusName::Normal && replica.is_primary();
        if partition_duty::follow(&mut slot.duty, primary, replica.view(), || client) {
            self.duty_clients += 1;
            self.stats.primaryships += 1;
        }
    }

    fn member_reply(&mut self, index: usize, member: u8, client: ClientId, message: Message) {
        let own = self.partitions[index].members[member as usize]
            .duty
            .as_ref()
            .is_some_and(|duty| duty.client() == client);
        if !own {
            if let Some(gateway) = lane_gateway(client) {
                let partition = self.partitions[index].id;
                self.send(
                    Node::Member(index, member),
                    Node::Gateway(gateway),
                    Msg::PartitionReply { partition, message },
                );
                return;
            }
        }
        // Else a former duty's request (committed after a view change) or the per-message
        // canary's: nothing to do.
        let (true, Message::Reply(reply)) = (own, message) else {
            return;
        };
        let process = self.partitions[index].id;
        let duty = self.duty_mut(index, member).expect("checked above");
        match duty.on_reply(&reply) {
            DutyReply::Stale | DutyReply::Quiet => {}
            DutyReply::Confirm { router, admitted } => self.send(
                Node::Member(index, member),
                Node::Router(router.0),
                Msg::Confirm {
                    process,
                    delivered: admitted,
                },
            ),
            DutyReply::Installed { version, from } => {
                self.stats.installs += 1;
                let sender = self.index_of(from);
                self.send(
                    Node::Member(index, member),
                    Node::Partition(sender),
                    Msg::CopyAck {
                        version,
                        to: process,
                    },
                );
            }
            DutyReply::Unexpected(result) => self.fail(crate::checkers::Violation {
                checker: "bypass_duty",
                report: format!(
                    "group {}: the duty's request was answered {result:?}",
                    process.0
                ),
            }),
        }
    }

    /// The primary's duty sends the replies its machine released since the last it sent.
    fn send_released(&mut self, index: usize, member: u8) {
        let node = &mut self.partitions[index];
        let id = node.id;
        let slot = &mut node.members[member as usize];
        let (Some(replica), Some(_)) = (slot.replica.as_ref(), slot.duty.as_ref()) else {
            return;
        };
        // A share is admitted where it executes in the log, even if its answer waits for a
        // read job (released later, below): the order checker sees the admission now.
        let admissions: Vec<(u64, Timestamp)> = replica
            .state_machine()
            .released_or_open_after(node.admissions_seen)
            .filter_map(|(number, released)| match released {
                Released::Answer { timestamp, .. } => Some((*number, *timestamp)),
                _ => None,
            })
            .collect();
        for (number, timestamp) in admissions {
            self.partitions[index].admissions_seen = number;
            self.stats.admitted += 1;
            if let Err(violation) = self.order.on_admit(id, timestamp) {
                self.fail(violation);
            }
        }
        let node = &mut self.partitions[index];
        let slot = &mut node.members[member as usize];
        let (Some(replica), Some(duty)) = (slot.replica.as_ref(), slot.duty.as_mut()) else {
            return;
        };
        let replica_view = replica.view();
        let released: Vec<(u64, Released)> = duty
            .released(replica.state_machine())
            .into_iter()
            .map(|(number, released)| (number, released.clone()))
            .collect();
        for (number, released) in released {
            let from = Node::Member(index, member);
            match released {
                Released::Single {
                    client,
                    number,
                    result,
                } => {
                    let Some(gateway) = lane_gateway(client) else {
                        continue;
                    };
                    let released = Msg::PartitionReleased {
                        partition: id,
                        client,
                        number,
                        result,
                    };
                    self.send(from, Node::Gateway(gateway), released);
                }
                Released::Moved { client, number } => {
                    // Answered as the lane's VR reply would be, so that the gateway re-plans.
                    self.stats.moved += 1;
                    let Some(gateway) = lane_gateway(client) else {
                        continue;
                    };
                    let reply = Reply {
                        view: replica_view,
                        client,
                        request: number,
                        result: PartitionResult::Moved.encode(),
                    };
                    let message = Msg::PartitionReply {
                        partition: id,
                        message: Message::Reply(reply),
                    };
                    self.send(from, Node::Gateway(gateway), message);
                }
                Released::Answer {
                    sender,
                    sequence,
                    timestamp,
                    result,
                } => {
                    if number > self.partitions[index].admissions_seen {
                        self.partitions[index].admissions_seen = number;
                        self.stats.admitted += 1;
                        if let Err(violation) = self.order.on_admit(id, timestamp) {
                            self.fail(violation);
                        }
                    }
                    let Some(values) = decode_values(&result) else {
                        continue;
                    };
                    if sender.0 >= GATEWAY_BASE {
                        let gateway = Node::Gateway((sender.0 - GATEWAY_BASE) as usize);
                        let answer = Msg::MultiAnswer {
                            sequence,
                            partition: id,
                            values,
                        };
                        self.send(from, gateway, answer);
                    }
                }
            }
        }
    }

    /// Every tick: each up member's replica is ticked; the primaries' duties resend owed
    /// copies every 20 ticks.
    pub(super) fn tick_members(&mut self) {
        for index in 0..self.partitions.len() {
            for member in 0..self.partitions[index].members.len() as u8 {
                if !self.partitions[index].members[member as usize].up() {
                    continue;
                }
                self.step_member(index, member, Input::Tick);
                if self.options.reconfigure_per_10000 > 0 {
                    self.send_member_copies(index, member);
                }
                if self.options.replication > 1 {
                    self.follow_lifecycle(index, member);
                }
            }
        }
    }

    /// Above replication 1: what the member's storage process decides for its replica
    /// (`ecast::GroupLifecycle`, as the runtime host does).
    fn follow_lifecycle(&mut self, index: usize, member: u8) {
        let now = self.now;
        let node = &mut self.partitions[index];
        let id = node.id;
        let slot = &mut node.members[member as usize];
        let Some(replica) = slot.replica.as_deref() else {
            return;
        };
        let state = ReplicaState::of(replica);
        match slot.lifecycle.running(id, state, now) {
            Fate::Keep => {}
            Fate::Stop => {
                slot.tombstone = Some(Tombstone::of(replica));
                slot.duty = None;
                slot.lifecycle.stopped(id);
                self.stats.replicas_stopped += 1;
            }
            Fate::Drop { .. } => {
                slot.dropped = true;
                slot.duty = None;
                slot.lifecycle.dropped(id);
                self.stats.replicas_dropped += 1;
            }
        }
    }

    /// Above replication 1: every member's storage process learns the routers' new grouping
    /// (the runtime's learn it from the deliveries of any group they host).
    pub(super) fn members_see_grouping(&mut self, groups: &Groups) {
        for node in &mut self.partitions {
            let id = node.id;
            for slot in &mut node.members {
                slot.lifecycle.see_groupings(groups, [id]);
            }
        }
    }

    fn send_member_copies(&mut self, index: usize, member: u8) {
        let now = self.now;
        let node = &mut self.partitions[index];
        let from = node.id;
        let slot = &mut node.members[member as usize];
        let (Some(replica), Some(duty)) = (slot.replica.as_ref(), slot.duty.as_mut()) else {
            return;
        };
        let outgoing: Vec<(ConfigVersion, ProcessId)> = replica
            .state_machine()
            .outgoing()
            .map(|(version, to, _)| (version, to))
            .collect();
        duty.retain_copies(&outgoing);
        let due: Vec<(ConfigVersion, ProcessId, Vec<u8>)> = replica
            .state_machine()
            .outgoing()
            .filter(|(version, to, _)| duty.copy_due(*version, *to, now, 20))
            .map(|(version, to, records)| (version, to, records.clone()))
            .collect();
        for (version, to, records) in due {
            let receiver = self.index_of(to);
            self.send(
                Node::Member(index, member),
                Node::Partition(receiver),
                Msg::Copy {
                    version,
                    from,
                    records,
                },
            );
        }
    }

    /// The nemesis's faults of members (while faults are on), and their ends.
    pub(super) fn member_faults(&mut self) {
        let faults = self.faults_on();
        for index in 0..self.partitions.len() {
            let size = self.partitions[index].members.len();
            for member in 0..size {
                let slot = &self.partitions[index].members[member];
                if slot
                    .down_until
                    .is_some_and(|until| !faults || self.now >= until)
                {
                    self.revive(index, member as u8);
                }
            }
            // At most f = 1 member fails at a time: a restarted member counts as failed until
            // its recovery ends (two recovering members of three never recover, VRR §4.3).
            let any_down = self.partitions[index].members.iter().any(|member| {
                member.down_until.is_some()
                    || member
                        .replica
                        .as_ref()
                        .is_some_and(|replica| replica.status() == StatusName::Recovering)
            });
            if !faults
                || any_down
                || !self
                    .prng
                    .chance(self.options.partition_crash_per_10000, 10_000)
            {
                continue;
            }
            let member = self.prng.range_inclusive(0, size as u64 - 1) as usize;
            if !self.partitions[index].members[member].active() {
                continue; // Stopped or dropped: nothing left to fail.
            }
            let until = self.now + self.prng.range_inclusive(20, 300);
            // A one-member group only pauses (a crash would lose it: memory durability).
            let pause = size == 1 || self.prng.percent(50);
            self.stats.partition_crashes += u64::from(!pause);
            self.stats.partition_pauses += u64::from(pause);
            let slot = &mut self.partitions[index].members[member];
            slot.down_until = Some(until);
            slot.paused = pause;
            slot.duty = None;
            if !pause {
                slot.replica = None;
            }
        }
    }

    /// A down member comes back: a paused one as it was, a crashed one recovering (VRR
    /// §4.3) from an empty machine with a fresh nonce.
    fn revive(&mut self, index: usize, member: u8) {
        let nonce = Nonce(self.prng.next_u64());
        let node = &mut self.partitions[index];
        let config = &self.group_configs[&(node.members.len() as u8)];
        let slot = &mut node.members[member as usize];
        slot.down_until = None;
        slot.paused = false;
        if slot.replica.is_none() {
            let config = config.clone();
            slot.replica = Some(replicas::recovering(
                config,
                ReplicaIndex(member),
                node.initial.clone(),
                nonce,
            ));
        }
        self.follow(index, member);
    }

    /// Replicas agree: members that executed the same ops hold the same state.
    pub(super) fn check_agreement(&self) -> Result<(), crate::checkers::Violation> {
        for node in &self.partitions {
            let replicas: Vec<&dyn Replication<Machine = PartitionMachine<SimData>>> = node
                .members
                .iter()
                .filter_map(|member| member.replica.as_deref())
                .collect();
            for pair in replicas.windows(2) {
                let (a, b) = (pair[0], pair[1]);
                if a.commit_min() == b.commit_min()
                    && a.state_machine().snapshot() != b.state_machine().snapshot()
                {
                    return Err(crate::checkers::Violation {
                        checker: "bypass_agreement",
                        report: format!(
                            "group {}: replicas {} and {} executed up to op {} and differ",
                            node.id.0,
                            a.index().0,
                            b.index().0,
                            a.commit_min().0
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// For the liveness report: each member's status, view, ops and duty.
    pub(super) fn members_report(&self) -> String {
        let mut report = String::new();
        for node in &self.partitions {
            if node.members.is_empty() {
                continue;
            }
            report.push_str(&format!("group {}: ", node.id.0));
            for member in &node.members {
                if member.tombstone.is_some() || member.dropped {
                    report.push_str(if member.tombstone.is_some() {
                        "(stopped) "
                    } else {
                        "(dropped) "
                    });
                }
            }
            for member in &node.members {
                match &member.replica {
                    None => report.push_str("[crashed] "),
                    Some(replica) => {
                        let machine = replica.state_machine();
                        report.push_str(&format!(
                            "[{:?} view {} op {} commit {} logged {} admitted {} watermark {} waiting {} version {} holds {:?} finished {}{}{}] ",
                            replica.status(),
                            replica.view().0,
                            replica.op().0,
                            replica.commit_min().0,
                            machine.rules().logged(),
                            machine.admitted(),
                            machine.rules().watermark(),
                            machine.rules().waiting(),
                            machine.version().0,
                            machine.holds(),
                            machine.finished(),
                            member.duty.as_ref().map_or(String::new(), |duty| format!(
                                " duty(pending {} in flight {})",
                                duty.pending(),
                                duty.in_flight()
                            )),
                            member.down_until.map_or(String::new(), |until| format!(" down until {until}")),
                        ));
                    }
                }
            }
        }
        report
    }

    /// `skyros` partitions: nilext writes the members' nilext gates refused (as primaries).
    pub(super) fn members_nilext_refused(&self) -> u64 {
        self.partitions
            .iter()
            .flat_map(|node| &node.members)
            .filter_map(|member| member.replica.as_ref())
            .map(|replica| replica.stats().skyros_nilext_refused)
            .sum()
    }

    /// Whether every member of every group is up and has executed what its group committed.
    pub(super) fn members_settled(&self) -> bool {
        self.partitions.iter().all(|node| {
            // A group with a stopped member finished: it owes nothing, and a member that
            // lagged behind the others' stop stays in its view change (the runtime drops it
            // two versions past the group's retirement).
            if node.members.iter().any(|member| member.tombstone.is_some()) {
                return true;
            }
            let active = node.members.iter().filter(|member| member.active()).count();
            let executed: Vec<u64> = node
                .members
                .iter()
                .filter(|member| member.active())
                .filter_map(|member| {
                    member
                        .up()
                        .then(|| {
                            // Settled: in a normal view, everything it logged executed (a
                            // recovering member, or ops a crashed primary committed that its
                            // backups have logged but not yet executed, are work to come).
                            member.replica.as_ref().and_then(|replica| {
                                (replica.status() == StatusName::Normal
                                    && replica.op() == replica.commit_min())
                                .then(|| replica.commit_min().0)
                            })
                        })
                        .flatten()
                })
                .collect();
            executed.len() == active && executed.windows(2).all(|pair| pair[0] == pair[1])
        })
    }
}
