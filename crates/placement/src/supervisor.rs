//! The super process's failure detector and replacement policy (Crescando/RB §5.3, §6.1, §7.8),
//! as a pure, tick-driven state machine. The lead router runs it; the runtime only supplies the
//! evidence (for each storage process, whether its link ever connected and for how many ticks it
//! has been without a connection) and submits what it proposes through an E-Cast sender.
//!
//! - **Suspicion.** A live storage process whose link has been down for `suspect_after_ticks`
//!   (or `unreached_after_ticks`, if the link never connected: the process may still be
//!   starting) is proposed for suspicion once: a suspected process stops being a destination,
//!   so messages routed to it can become stable.
//! - **Replacement.** Once a suspicion is applied (the configuration has a ring member that is
//!   not live), that member is replaced by the lowest-numbered standby the router has no evidence
//!   against, with the §6.5 planner's instruction list; at most one plan per configuration
//!   version (a refusal waits for the next version). Never while a live ring member is
//!   unreachable but not yet suspected: the plan could name it as a sender, so it is suspected
//!   first. A false suspicion costs a copy, never consistency: the suspected process is routed
//!   nothing.
//! - **Gateways** (`GatewayWatch`, grouped `vr`/`skyros` clusters, whose storage processes are
//!   never suspected: VR handles a crashed member): a storage process whose link connected
//!   before and has been down for `suspect_after_ticks` is proposed once per outage, so the
//!   runtime can abort the transactions its gateway owned (`docs/internals/sprint.md`, "A
//!   gateway whose storage process dies").

use crate::{
    ConfigChange, ConfigMessage, ConfigVersion, Configuration, MembershipChange, Planner,
    ProcessId, ProcessState, Refusal, Transformation,
};
use std::collections::{BTreeMap, BTreeSet};

/// The policy, in ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SupervisorSettings {
    /// A process whose link connected before and has been down this long is suspected.
    pub suspect_after_ticks: u64,
    /// A process whose link never connected is suspected after this long (at least as long).
    pub unreached_after_ticks: u64,
}

/// What the runtime knows of one storage process's link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkEvidence {
    /// The link has had a connection at some point (the process was up and listening).
    pub ever_connected: bool,
    /// Ticks without a connection; `None` while connected or never tried.
    pub down_ticks: Option<u64>,
}

/// What the supervisor asks the runtime to submit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Proposal {
    /// Suspect `process` (report it with `Supervisor::submitted` once the sender took it).
    Suspect {
        process: ProcessId,
        message: ConfigMessage,
        down_ticks: u64,
    },
    /// Replace the suspected ring member `replaced` by `standby`.
    Replace {
        replaced: ProcessId,
        standby: ProcessId,
        message: ConfigMessage,
    },
    /// The planner refused to replace `replaced` by `standby` at this version.
    ReplaceRefused {
        replaced: ProcessId,
        standby: ProcessId,
        refusal: Refusal,
    },
}

#[derive(Clone, Debug)]
pub struct Supervisor {
    settings: SupervisorSettings,
    /// Processes whose suspicion was submitted, with the configuration version it was based
    /// on: not proposed again while the configuration is at that version (the suspicion is
    /// under way); at a later version a process still live is proposed again (the suspicion
    /// was refused, or it came back, joined again and is down again).
    submitted: BTreeMap<ProcessId, ConfigVersion>,
    /// The configuration version the last replacement was planned against.
    replace_planned_at: Option<ConfigVersion>,
}

impl Supervisor {
    pub fn new(settings: SupervisorSettings) -> Supervisor {
        assert!(settings.suspect_after_ticks >= 1);
        assert!(settings.unreached_after_ticks >= settings.suspect_after_ticks);
        Supervisor {
            settings,
            submitted: BTreeMap::new(),
            replace_planned_at: None,
        }
    }

    /// One round against `configuration`, with `evidence` for every storage process the
    /// cluster has: the suspicions to submit, then at most one replacement.
    pub fn decide(
        &mut self,
        configuration: &Configuration,
        evidence: &dyn Fn(ProcessId) -> LinkEvidence,
    ) -> Vec<Proposal> {
        let mut proposals = Vec::new();
        for process in configuration.processes().keys().copied() {
            let link = evidence(process);
            let threshold = if link.ever_connected {
                self.settings.suspect_after_ticks
            } else {
                self.settings.unreached_after_ticks
            };
            let down = link.down_ticks.is_some_and(|ticks| ticks >= threshold);
            let under_way = self.submitted.get(&process) == Some(&configuration.version());
            if down && configuration.is_live(process) && !under_way {
                proposals.push(Proposal::Suspect {
                    process,
                    message: ConfigMessage {
                        based_on: configuration.version(),
                        change: ConfigChange::Membership(MembershipChange::Suspect { process }),
                    },
                    down_ticks: link.down_ticks.unwrap_or(0),
                });
            }
        }
        if let Some(proposal) = self.replacement(configuration, evidence) {
            proposals.push(proposal);
        }
        proposals
    }

    /// The sender took the suspicion of `process`, based on `version`: it is not proposed
    /// again at that version.
    pub fn submitted(&mut self, process: ProcessId, version: ConfigVersion) {
        self.submitted.insert(process, version);
    }

    fn replacement(
        &mut self,
        configuration: &Configuration,
        evidence: &dyn Fn(ProcessId) -> LinkEvidence,
    ) -> Option<Proposal> {
        if self.replace_planned_at == Some(configuration.version()) {
            return None;
        }
        let reachable = |process: ProcessId| evidence(process).down_ticks.is_none();
        let ring = configuration.ring();
        if ring
            .iter()
            .any(|member| member.live && !reachable(member.process))
        {
            return None; // Suspect it first.
        }
        let replaced = ring.iter().find(|member| !member.live)?.process;
        let standby = configuration
            .processes()
            .iter()
            .find(|(process, info)| info.state == ProcessState::Standby && reachable(**process))
            .map(|(process, _)| *process)?;
        self.replace_planned_at = Some(configuration.version());
        let transformation = Transformation::Replace { replaced, standby };
        Some(
            match Planner::default().propose(configuration, transformation) {
                Ok(message) => Proposal::Replace {
                    replaced,
                    standby,
                    message,
                },
                Err(refusal) => Proposal::ReplaceRefused {
                    replaced,
                    standby,
                    refusal,
                },
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{apply, Position};
    use std::collections::BTreeMap;

    const SETTINGS: SupervisorSettings = SupervisorSettings {
        suspect_after_ticks: 100,
        unreached_after_ticks: 300,
    };

    /// Three ring members (1, 2, 3) and one standby (4), replication 2.
    fn configuration() -> Configuration {
        let members: Vec<(ProcessId, Position)> = (1..=3)
            .map(|id| (ProcessId(id), Position(id * (u64::MAX / 4))))
            .collect();
        let configuration = Configuration::with_ring(2, &members);
        let join = ConfigMessage {
            based_on: configuration.version(),
            change: ConfigChange::Membership(MembershipChange::Join {
                process: ProcessId(4),
            }),
        };
        apply(&configuration, &join).unwrap()
    }

    fn evidence(down: &BTreeMap<u64, (bool, u64)>) -> impl Fn(ProcessId) -> LinkEvidence + '_ {
        |process| match down.get(&process.0) {
            Some((ever_connected, ticks)) => LinkEvidence {
                ever_connected: *ever_connected,
                down_ticks: Some(*ticks),
            },
            None => LinkEvidence {
                ever_connected: true,
                down_ticks: None,
            },
        }
    }

    #[test]
    fn a_process_down_long_enough_is_suspected_once() {
        let configuration = configuration();
        let mut supervisor = Supervisor::new(SETTINGS);
        let down = BTreeMap::from([(2, (true, 99))]);
        assert!(supervisor
            .decide(&configuration, &evidence(&down))
            .is_empty());
        let down = BTreeMap::from([(2, (true, 100))]);
        let proposals = supervisor.decide(&configuration, &evidence(&down));
        assert!(
            matches!(&proposals[..], [Proposal::Suspect { process, down_ticks: 100, .. }] if *process == ProcessId(2)),
            "{proposals:?}"
        );
        // Not taken by the sender: proposed again; taken: not again at this version.
        assert_eq!(supervisor.decide(&configuration, &evidence(&down)).len(), 1);
        supervisor.submitted(ProcessId(2), configuration.version());
        assert!(supervisor
            .decide(&configuration, &evidence(&down))
            .is_empty());
        // At a later version with 2 still live (its suspicion refused, or 2 back and down
        // again): proposed again.
        let leave = ConfigMessage {
            based_on: configuration.version(),
            change: ConfigChange::Membership(MembershipChange::Leave {
                process: ProcessId(4),
            }),
        };
        let later = apply(&configuration, &leave).unwrap();
        assert!(later.version() > configuration.version());
        assert_eq!(supervisor.decide(&later, &evidence(&down)).len(), 1);
    }

    #[test]
    fn a_process_never_reached_gets_longer() {
        let configuration = configuration();
        let mut supervisor = Supervisor::new(SETTINGS);
        let down = BTreeMap::from([(3, (false, 299))]);
        assert!(supervisor
            .decide(&configuration, &evidence(&down))
            .is_empty());
        let down = BTreeMap::from([(3, (false, 300))]);
        assert_eq!(supervisor.decide(&configuration, &evidence(&down)).len(), 1);
    }

    #[test]
    fn a_suspected_member_is_replaced_by_a_reachable_standby_once_per_version() {
        let mut configuration = configuration();
        let suspect = ConfigMessage {
            based_on: configuration.version(),
            change: ConfigChange::Membership(MembershipChange::Suspect {
                process: ProcessId(2),
            }),
        };
        configuration = apply(&configuration, &suspect).unwrap();
        let mut supervisor = Supervisor::new(SETTINGS);
        // Process 3 is unreachable but not suspected yet: no plan may name it; suspect it.
        let down = BTreeMap::from([(2, (true, 500)), (3, (true, 150))]);
        let proposals = supervisor.decide(&configuration, &evidence(&down));
        assert!(
            matches!(&proposals[..], [Proposal::Suspect { process, .. }] if *process == ProcessId(3)),
            "{proposals:?}"
        );
        // Process 3 is back: 2 is replaced by the standby 4, once at this version.
        let down = BTreeMap::from([(2, (true, 600))]);
        let proposals = supervisor.decide(&configuration, &evidence(&down));
        assert!(
            matches!(&proposals[..], [Proposal::Replace { replaced, standby, .. }]
                if *replaced == ProcessId(2) && *standby == ProcessId(4)),
            "{proposals:?}"
        );
        assert!(supervisor
            .decide(&configuration, &evidence(&down))
            .is_empty());
        // An unreachable standby is never chosen.
        let mut supervisor = Supervisor::new(SETTINGS);
        let down = BTreeMap::from([(2, (true, 600)), (4, (true, 1))]);
        assert!(supervisor
            .decide(&configuration, &evidence(&down))
            .is_empty());
    }
}

/// The gateways' failure detector of grouped clusters: which storage processes' gateways to
/// take for dead, one proposal per outage (until the link connects again), and again after a
/// refused or lost submission.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GatewayWatch {
    /// Processes whose suspicion was submitted during their current outage.
    suspected: BTreeSet<ProcessId>,
}

impl GatewayWatch {
    /// The processes to propose now, with the ticks each has been down, given each one's link
    /// evidence: connected once and down for at least `suspect_after_ticks`, not proposed in
    /// this outage. A process whose link is up (or was never tried) ends its outage.
    pub fn decide(
        &mut self,
        settings: &SupervisorSettings,
        evidence: impl IntoIterator<Item = (ProcessId, LinkEvidence)>,
    ) -> Vec<(ProcessId, u64)> {
        let mut proposals = Vec::new();
        for (process, link) in evidence {
            let Some(down_ticks) = link.down_ticks else {
                self.suspected.remove(&process);
                continue;
            };
            if link.ever_connected
                && down_ticks >= settings.suspect_after_ticks
                && !self.suspected.contains(&process)
            {
                proposals.push((process, down_ticks));
            }
        }
        proposals
    }

    /// `process`'s suspicion was submitted: not proposed again in this outage.
    pub fn submitted(&mut self, process: ProcessId) {
        self.suspected.insert(process);
    }

    /// `process`'s suspicion was refused or lost: proposed again at the next decision.
    pub fn failed(&mut self, process: ProcessId) {
        self.suspected.remove(&process);
    }
}

#[cfg(test)]
mod gateway_tests {
    use super::*;

    /// A process down long enough is proposed once per outage; again after its submission
    /// failed, and after its link was up and went down again; never one that never connected
    /// or is down too briefly.
    #[test]
    fn a_gateway_is_proposed_once_per_outage_and_again_after_a_failed_submission() {
        let settings = SupervisorSettings {
            suspect_after_ticks: 5,
            unreached_after_ticks: 50,
        };
        let down = |ticks: u64| LinkEvidence {
            ever_connected: true,
            down_ticks: Some(ticks),
        };
        let up = LinkEvidence {
            ever_connected: true,
            down_ticks: None,
        };
        let never = LinkEvidence {
            ever_connected: false,
            down_ticks: Some(100),
        };
        let (p, q, r) = (ProcessId(1), ProcessId(2), ProcessId(3));
        let mut watch = GatewayWatch::default();
        assert_eq!(
            watch.decide(&settings, [(p, down(5)), (q, down(4)), (r, never)]),
            vec![(p, 5)]
        );
        watch.submitted(p);
        assert!(watch.decide(&settings, [(p, down(9))]).is_empty());
        watch.failed(p);
        assert_eq!(watch.decide(&settings, [(p, down(10))]), vec![(p, 10)]);
        watch.submitted(p);
        assert!(watch.decide(&settings, [(p, up)]).is_empty());
        assert_eq!(watch.decide(&settings, [(p, down(6))]), vec![(p, 6)]);
    }
}
