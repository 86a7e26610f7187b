//! The bypass mode's router group: three real `vr::Replica<ecast::RouterState>`s exchanging VR
//! messages over the simulated network, as the runtime's router processes do. The primary of a
//! normal view runs the forwarder (`ecast::Forwarder`: deliveries, confirmations, stability)
//! and the watermark reporter (`ecast::WatermarkReporter`); the gateways are VR clients of the
//! group (`ecast::Gateway` with three routers: it finds the primary, resends and follows
//! `NotPrimary`). One router at a time crashes (and restarts recovering, diskless: VRR §4.3) or
//! pauses (a false suspicion: it comes back as it was, possibly deposed); a crashed primary's
//! forwarder and reporter are lost with it, a deposed one's stop, and a new primary starts its
//! own with a fresh client id, as the runtime's router does.
//!
//! The checkers observe the replicas' states as they commit (every replica's state is a
//! committed prefix of the group's log; the first to apply an op is the primary that
//! committed it), which is what the atomic router of earlier stops gave them directly.

use super::{
    BypassSimulation, Msg, Node, FORWARDER_CLIENT_BASE, GATEWAY_BASE, GATEWAY_CLIENT_BASE,
};
use ecast::{
    Forwarder, ForwarderEffect, ForwarderInput, ForwarderSettings, RouterState, WatermarkInput,
    WatermarkReporter, WatermarkSettings,
};
use std::collections::VecDeque;
use vr::{
    ClientId, Effect, Input, Message, Nonce, Replica, ReplicaIndex, Request, StatusName, View,
};

/// Router replicas in the group.
pub(super) const ROUTERS: u8 = 3;

/// One router process: its replica of the router group (`None` while crashed), and, while it
/// is the primary of a normal view, the forwarder and the watermark reporter of that view.
pub(super) struct RouterMember {
    pub(super) replica: Option<Replica<RouterState>>,
    pub(super) down_until: Option<u64>,
    pub(super) forwarder: Option<(View, Forwarder)>,
    pub(super) reporter: Option<WatermarkReporter>,
}

/// The router group's VR configuration (memory durability, as the simulated routers).
pub(super) fn router_config(heartbeat_ticks: u64, timeout_ticks: u64) -> vr::Config {
    let mut config = vr::Config::new(ROUTERS, vr::Durability::Memory);
    config.heartbeat_ticks = heartbeat_ticks;
    config.primary_timeout_ticks = timeout_ticks;
    config.view_change_timeout_ticks = timeout_ticks;
    config
}

/// The router group at the start: every replica in view 0 with the same initial state.
pub(super) fn routers(config: &vr::Config, state: &RouterState) -> Vec<RouterMember> {
    (0..ROUTERS)
        .map(|index| RouterMember {
            replica: Some(Replica::new(
                config.clone(),
                ReplicaIndex(index),
                state.clone(),
            )),
            down_until: None,
            forwarder: None,
            reporter: None,
        })
        .collect()
}

impl BypassSimulation {
    /// The router state the checkers and reports read: the most advanced replica's (a
    /// committed prefix of the group's log).
    pub(super) fn router_state(&self) -> &RouterState {
        self.routers
            .iter()
            .filter_map(|router| router.replica.as_ref())
            .max_by_key(|replica| (replica.commit_min(), std::cmp::Reverse(replica.index())))
            .map_or(&self.router_initial, |replica| replica.state_machine())
    }

    /// A message for router `index`.
    pub(super) fn on_router(&mut self, index: u8, message: Msg) {
        let router = &self.routers[index as usize];
        if router.replica.is_none() || router.down_until.is_some() {
            return;
        }
        match message {
            Msg::Request { request, .. } => {
                self.step_router(index, Input::Message(Message::Request(request)))
            }
            Msg::Vr { message } => self.step_router(index, Input::Message(message)),
            Msg::Confirm { process, delivered } => {
                self.forwarder_input(index, ForwarderInput::Confirmed { process, delivered })
            }
            _ => {}
        }
    }

    /// Steps router `index`'s replica and carries out its effects; the forwarder's requests
    /// to its own replica are stepped in turn.
    pub(super) fn step_router(&mut self, index: u8, input: Input) {
        let mut queue = VecDeque::from([input]);
        while let Some(input) = queue.pop_front() {
            let Some(replica) = self.routers[index as usize].replica.as_mut() else {
                return;
            };
            let mut effects = Vec::new();
            replica.step(input, &mut effects);
            let mut forwarder_effects = Vec::new();
            for effect in effects {
                match effect {
                    Effect::Send { to, message } => {
                        self.send(Node::Router(index), Node::Router(to.0), Msg::Vr { message })
                    }
                    Effect::Reply { client, message } => {
                        self.router_reply(index, client, message, &mut forwarder_effects)
                    }
                    Effect::Persist { .. } => {
                        unreachable!("the simulated routers are diskless")
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
            self.after_router_step(index, &mut forwarder_effects);
            for request in self.execute_forwarder_effects(index, forwarder_effects) {
                queue.push_back(Input::Message(Message::Request(request)));
            }
        }
        if self.routers[index as usize].reporter.is_some() {
            self.report_watermark(index, WatermarkInput::Sync);
        }
    }

    /// A reply of router `index`'s replica: to its own forwarder, or to a gateway.
    fn router_reply(
        &mut self,
        index: u8,
        client: ClientId,
        message: Message,
        forwarder_effects: &mut Vec<ForwarderEffect>,
    ) {
        let router = &mut self.routers[index as usize];
        let ours = router
            .forwarder
            .as_ref()
            .is_some_and(|(_, forwarder)| forwarder.client() == client);
        if ours {
            if let (Message::Reply(reply), Some(replica), Some((_, forwarder))) =
                (message, router.replica.as_ref(), router.forwarder.as_mut())
            {
                forwarder.step(
                    ForwarderInput::Reply {
                        request: reply.request,
                        result: reply.result,
                    },
                    replica.state_machine(),
                    forwarder_effects,
                );
            }
            return;
        }
        let gateway = client.0.wrapping_sub(GATEWAY_CLIENT_BASE);
        if gateway < self.gateways.len() as u64 {
            self.send(
                Node::Router(index),
                Node::Gateway(gateway as usize),
                Msg::RouterReply(message),
            );
        }
    }

    /// The checkers observe what the replica committed; the forwarder and the reporter follow
    /// its primaryship (a new view's primary starts its own, with a fresh client id).
    fn after_router_step(&mut self, index: u8, forwarder_effects: &mut Vec<ForwarderEffect>) {
        self.observe_router(index);
        let router = &mut self.routers[index as usize];
        let replica = router.replica.as_ref().expect("stepped above");
        let primary = replica.status() == StatusName::Normal && replica.is_primary();
        if !primary {
            router.forwarder = None;
            router.reporter = None;
            return;
        }
        let view = replica.view();
        if router
            .forwarder
            .as_ref()
            .is_none_or(|(known, _)| *known != view)
        {
            self.stats.forwarders += 1;
            let client = ClientId(FORWARDER_CLIENT_BASE + self.stats.forwarders);
            let forwarder = Forwarder::new(
                client,
                ForwarderSettings::default(),
                replica.state_machine(),
            );
            router.forwarder = Some((view, forwarder));
            router.reporter = Some(WatermarkReporter::new(WatermarkSettings::default()));
        }
        let (_, forwarder) = router.forwarder.as_mut().expect("set above");
        forwarder.step(
            ForwarderInput::Sync,
            replica.state_machine(),
            forwarder_effects,
        );
    }

    /// An input for router `index`'s forwarder (dropped where it is not the primary: the
    /// sender resends).
    pub(super) fn forwarder_input(&mut self, index: u8, input: ForwarderInput) {
        let router = &mut self.routers[index as usize];
        let (Some(replica), Some((_, forwarder))) =
            (router.replica.as_ref(), router.forwarder.as_mut())
        else {
            return;
        };
        let mut effects = Vec::new();
        forwarder.step(input, replica.state_machine(), &mut effects);
        for request in self.execute_forwarder_effects(index, effects) {
            self.step_router(index, Input::Message(Message::Request(request)));
        }
    }

    /// Sends the forwarder's messages; returns its requests for its own replica.
    fn execute_forwarder_effects(
        &mut self,
        index: u8,
        effects: Vec<ForwarderEffect>,
    ) -> Vec<Request> {
        let mut requests = Vec::new();
        for effect in effects {
            match effect {
                ForwarderEffect::Submit(request) => requests.push(request),
                ForwarderEffect::Deliver { to, deliveries } => {
                    let partition = self.index_of(to);
                    self.send(
                        Node::Router(index),
                        Node::Partition(partition),
                        Msg::Deliver {
                            router: index,
                            deliveries,
                        },
                    );
                }
                ForwarderEffect::Stable {
                    to,
                    sequence,
                    timestamp,
                } => {
                    let gateway = to.0.wrapping_sub(GATEWAY_BASE);
                    if gateway < self.gateways.len() as u64 {
                        self.send(
                            Node::Router(index),
                            Node::Gateway(gateway as usize),
                            Msg::Stable {
                                sequence,
                                timestamp,
                            },
                        );
                    }
                }
                ForwarderEffect::DeliverSnapshot { .. }
                | ForwarderEffect::SnapshotStamped { .. }
                | ForwarderEffect::SnapshotRefused { .. } => {}
            }
        }
        requests
    }

    /// Every tick: the live routers' replicas, and the primary's forwarder and reporter.
    pub(super) fn tick_routers(&mut self) {
        for index in 0..ROUTERS {
            let router = &self.routers[index as usize];
            if router.replica.is_none() || router.down_until.is_some() {
                continue;
            }
            self.step_router(index, Input::Tick);
            if self.routers[index as usize].forwarder.is_some() {
                self.forwarder_input(index, ForwarderInput::Tick);
                self.report_watermark(index, WatermarkInput::Tick);
            }
        }
    }

    /// The nemesis for the router group: a crashed router comes back recovering once its
    /// time is up (at once when the faults stop); at most one router is down or recovering
    /// at a time (two of three never recover, VRR §4.3).
    pub(super) fn router_faults(&mut self) {
        let faults = self.faults_on();
        for index in 0..ROUTERS {
            let router = &self.routers[index as usize];
            if router
                .down_until
                .is_some_and(|until| !faults || self.now >= until)
            {
                self.revive_router(index);
            }
        }
        let any_down = self.routers.iter().any(|router| {
            router.down_until.is_some()
                || router
                    .replica
                    .as_ref()
                    .is_some_and(|replica| replica.status() == StatusName::Recovering)
        });
        if !faults
            || any_down
            || !self
                .prng
                .chance(self.options.router_crash_per_10000, 10_000)
        {
            return;
        }
        let index = self.prng.range_inclusive(0, u64::from(ROUTERS) - 1) as usize;
        let until = self.now + self.prng.range_inclusive(20, 300);
        // Half the faults are pauses (a false suspicion: the router comes back as it was,
        // deposed if the others changed view meanwhile), half crashes (its state is lost).
        let pause = self.prng.percent(50);
        self.stats.router_crashes += u64::from(!pause);
        self.stats.router_pauses += u64::from(pause);
        let router = &mut self.routers[index];
        if !pause {
            router.replica = None;
            router.forwarder = None;
            router.reporter = None;
        }
        router.down_until = Some(until);
    }

    /// A paused router resumes as it was; a crashed one restarts recovering (VRR §4.3) from
    /// the initial state with a fresh nonce.
    fn revive_router(&mut self, index: u8) {
        let nonce = Nonce(self.prng.next_u64());
        let router = &mut self.routers[index as usize];
        router.down_until = None;
        if router.replica.is_some() {
            return;
        }
        router.replica = Some(Replica::recovering(
            self.router_config.clone(),
            ReplicaIndex(index),
            self.router_initial.clone(),
            nonce,
        ));
    }
}
