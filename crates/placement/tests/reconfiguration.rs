//! Refusals of §6.4 messages, the E-Cast routing function, and the planner's fallback.

use placement::ecast::{self, Message, Target};
use placement::*;
use std::collections::BTreeSet;

fn ring(replication: u8, identifiers: &[u64]) -> Configuration {
    let members: Vec<(ProcessId, Position)> = identifiers
        .iter()
        .enumerate()
        .map(|(index, id)| (ProcessId(index as u64 + 1), Position(*id)))
        .collect();
    Configuration::with_ring(replication, &members)
}

fn membership(
    configuration: &Configuration,
    change: MembershipChange,
) -> Result<Configuration, Refusal> {
    apply(
        configuration,
        &ConfigMessage {
            based_on: configuration.version(),
            change: ConfigChange::Membership(change),
        },
    )
}

fn transform(
    configuration: &Configuration,
    transformation: Transformation,
) -> Result<Configuration, Refusal> {
    let message = Planner::default().propose(configuration, transformation)?;
    apply(configuration, &message)
}

#[test]
fn contract_below_the_replication_factor_is_refused() {
    let configuration = ring(3, &[10, 20, 30]);
    assert_eq!(
        transform(
            &configuration,
            Transformation::Contract {
                process: ProcessId(1)
            }
        ),
        Err(Refusal::BelowReplication {
            ring_size: 2,
            replication: 3
        })
    );
    let bigger = ring(3, &[10, 20, 30, 40]);
    let after = transform(
        &bigger,
        Transformation::Contract {
            process: ProcessId(1),
        },
    )
    .expect("four to three");
    assert_eq!(after.state(ProcessId(1)), Some(ProcessState::Standby));
    assert_eq!(after.ring().len(), 3);
}

#[test]
fn an_active_process_cannot_leave_without_leaving_the_ring_first() {
    let configuration = ring(1, &[10, 20]);
    assert_eq!(
        membership(
            &configuration,
            MembershipChange::Leave {
                process: ProcessId(1)
            }
        ),
        Err(Refusal::OnRing {
            process: ProcessId(1)
        })
    );
    assert_eq!(
        membership(
            &configuration,
            MembershipChange::Join {
                process: ProcessId(1)
            }
        ),
        Err(Refusal::AlreadyMember {
            process: ProcessId(1)
        })
    );
}

#[test]
fn a_keyspace_message_computed_against_an_older_version_is_refused() {
    let configuration = ring(2, &[10, 20, 30]);
    let configuration = membership(
        &configuration,
        MembershipChange::Join {
            process: ProcessId(9),
        },
    )
    .expect("join");
    let message = Planner::default()
        .propose(
            &configuration,
            Transformation::Expand {
                process: ProcessId(9),
                identifier: Position(25),
            },
        )
        .expect("expand");
    let moved_on = membership(
        &configuration,
        MembershipChange::Join {
            process: ProcessId(10),
        },
    )
    .expect("join");
    assert_eq!(
        apply(&moved_on, &message),
        Err(Refusal::StaleVersion {
            based_on: ConfigVersion(1),
            current: ConfigVersion(2)
        })
    );
    assert!(apply(&configuration, &message).is_ok());
}

#[test]
fn a_stale_membership_message_is_refused_only_if_its_process_changed() {
    let configuration = ring(2, &[10, 20, 30]);
    let stale_version = configuration.version();
    let configuration = membership(
        &configuration,
        MembershipChange::Join {
            process: ProcessId(9),
        },
    )
    .expect("join");
    // Process 2 did not change since version 0: a suspicion computed then still applies.
    let suspect = ConfigMessage {
        based_on: stale_version,
        change: ConfigChange::Membership(MembershipChange::Suspect {
            process: ProcessId(2),
        }),
    };
    assert!(apply(&configuration, &suspect).is_ok());
    // Process 9 joined at version 1: a leave computed at version 0 conflicts.
    let leave = ConfigMessage {
        based_on: stale_version,
        change: ConfigChange::Membership(MembershipChange::Leave {
            process: ProcessId(9),
        }),
    };
    assert_eq!(
        apply(&configuration, &leave),
        Err(Refusal::Conflict {
            process: ProcessId(9),
            changed_at: ConfigVersion(1)
        })
    );
    let future = ConfigMessage {
        based_on: ConfigVersion(7),
        change: ConfigChange::Membership(MembershipChange::Leave {
            process: ProcessId(9),
        }),
    };
    assert!(matches!(
        apply(&configuration, &future),
        Err(Refusal::FutureVersion { .. })
    ));
}

#[test]
fn expand_onto_a_taken_identifier_is_refused() {
    let configuration = ring(1, &[10, 20]);
    let configuration = membership(
        &configuration,
        MembershipChange::Join {
            process: ProcessId(9),
        },
    )
    .expect("join");
    assert_eq!(
        transform(
            &configuration,
            Transformation::Expand {
                process: ProcessId(9),
                identifier: Position(20)
            }
        ),
        Err(Refusal::IdentifierTaken {
            identifier: Position(20),
            holder: ProcessId(2)
        })
    );
    assert_eq!(
        transform(
            &configuration,
            Transformation::Expand {
                process: ProcessId(1),
                identifier: Position(5)
            }
        ),
        Err(Refusal::NotStandby {
            process: ProcessId(1)
        })
    );
}

#[test]
fn replacing_a_process_whose_whole_group_failed_is_refused_as_data_loss() {
    // f = 2: [20, 30) lives on 2 and 3. Both fail: the data is gone, a replace cannot copy it.
    let mut configuration = ring(2, &[10, 20, 30, 40]);
    for process in [2, 3] {
        configuration = membership(
            &configuration,
            MembershipChange::Suspect {
                process: ProcessId(process),
            },
        )
        .expect("suspect");
    }
    configuration = membership(
        &configuration,
        MembershipChange::Join {
            process: ProcessId(9),
        },
    )
    .expect("join");
    let refusal = transform(
        &configuration,
        Transformation::Replace {
            replaced: ProcessId(3),
            standby: ProcessId(9),
        },
    );
    assert_eq!(
        refusal,
        Err(Refusal::NoLiveSource {
            range: Span::new(20, 30).to_set()
        })
    );
    // Replacing 2 instead only needs [10, 30): [10, 20) is still on 1.
    let also = transform(
        &configuration,
        Transformation::Replace {
            replaced: ProcessId(2),
            standby: ProcessId(9),
        },
    );
    assert_eq!(
        also,
        Err(Refusal::NoLiveSource {
            range: Span::new(20, 30).to_set()
        })
    );
}

#[test]
fn contracting_the_last_live_replica_of_a_range_is_refused() {
    // f = 2: [20, 30) lives on 2 and 3; 3 has failed. Contracting 2 would leave [20, 30) on
    // 3 (failed) and 4 (which would have to receive it from 2, the process leaving): allowed,
    // 2 is still live and sends. Suspecting 2 too, then contracting 3, finds no source.
    let mut configuration = ring(2, &[10, 20, 30, 40, 50]);
    configuration = membership(
        &configuration,
        MembershipChange::Suspect {
            process: ProcessId(3),
        },
    )
    .expect("suspect");
    let after = transform(
        &configuration,
        Transformation::Contract {
            process: ProcessId(2),
        },
    )
    .expect("2 sends before leaving");
    assert_eq!(
        after.replicas(Position(25)),
        vec![ProcessId(1), ProcessId(3)]
    );
    configuration = membership(
        &configuration,
        MembershipChange::Suspect {
            process: ProcessId(2),
        },
    )
    .expect("suspect");
    assert!(matches!(
        transform(
            &configuration,
            Transformation::Contract {
                process: ProcessId(3)
            }
        ),
        Err(Refusal::NoLiveSource { .. })
    ));
}

#[test]
fn an_instruction_list_that_deletes_the_last_copy_is_refused() {
    let configuration = ring(1, &[10, 20, 30]);
    let instructions = vec![Instruction::Delete {
        at: ProcessId(1),
        range: Span::new(10, 20).to_set(),
    }];
    let message = ConfigMessage {
        based_on: configuration.version(),
        change: ConfigChange::Keyspace(KeyspaceMessage {
            transformation: Transformation::Contract {
                process: ProcessId(1),
            },
            instructions,
        }),
    };
    assert!(matches!(
        apply(&configuration, &message),
        Err(Refusal::InvalidInstructions { .. })
    ));
}

#[test]
fn replace_hands_the_identifier_to_the_standby_which_receives_everything() {
    let configuration = ring(3, &[10, 20, 30, 40, 50]);
    let configuration = membership(
        &configuration,
        MembershipChange::Join {
            process: ProcessId(9),
        },
    )
    .expect("join");
    let message = Planner::default()
        .propose(
            &configuration,
            Transformation::Replace {
                replaced: ProcessId(3),
                standby: ProcessId(9),
            },
        )
        .expect("plan");
    let after = apply(&configuration, &message).expect("replace");
    assert_eq!(
        after.state(ProcessId(9)),
        Some(ProcessState::Active {
            identifier: Position(30)
        })
    );
    assert_eq!(after.state(ProcessId(3)), Some(ProcessState::Standby));
    let ConfigChange::Keyspace(keyspace) = &message.change else {
        panic!("keyspace")
    };
    let received: Vec<_> = project(&keyspace.instructions, ProcessId(9));
    let total = received
        .iter()
        .fold(PositionSet::empty(), |all, instruction| match instruction {
            EngineInstruction::Receive { range, .. } => all.union(range),
            _ => all,
        });
    assert_eq!(total, Span::new(10, 40).to_set());
    assert_eq!(
        project(&keyspace.instructions, ProcessId(3)).last(),
        Some(&EngineInstruction::Delete {
            range: Span::new(10, 40).to_set()
        })
    );
}

#[test]
fn the_fallback_planner_returns_a_valid_plan_no_better_than_the_exhaustive_best() {
    let configuration = ring(5, &[10, 20, 30, 40, 50, 60, 70, 80, 90]);
    let transformation = Transformation::Rebalance {
        process: ProcessId(2),
        identifier: Position(75),
    };
    let next = target(&configuration, transformation).expect("rebalance");
    let migration = Migration::between(&configuration, &next).expect("no loss");
    let exhaustive = Planner::default();
    let solutions = exhaustive.solutions(&migration).expect("enumerable");
    assert!(solutions.len() > 1);
    let limited = Planner {
        solutions_max: 1,
        ..Planner::default()
    };
    assert!(matches!(
        limited.solutions(&migration),
        Err(Refusal::TooManySolutions { .. })
    ));
    let fallback = limited.best(&migration).expect("fallback");
    assert!(fallback.score >= solutions[0].score);
    assert!(check(&configuration, &migration, &fallback.instructions).is_ok());
}

#[test]
fn reads_go_to_one_live_replica_and_writes_to_all() {
    let configuration = ring(3, &[10, 20, 30, 40]);
    let configuration = membership(
        &configuration,
        MembershipChange::Suspect {
            process: ProcessId(2),
        },
    )
    .expect("suspect");
    let point = Target::Points(vec![Position(25)]);
    let write = Message::Write {
        sender: ProcessId(100),
        target: point.clone(),
    };
    assert_eq!(
        ecast::destset(&configuration, &write),
        BTreeSet::from([ProcessId(3), ProcessId(4)])
    );
    let chosen: BTreeSet<ProcessId> = (0..4)
        .flat_map(|offset| {
            let read = Message::Read {
                sender: ProcessId(100),
                target: point.clone(),
                replica_offset: offset,
            };
            ecast::destset(&configuration, &read)
        })
        .collect();
    // The offset spreads reads over the live replicas, never the suspected one.
    assert_eq!(chosen, BTreeSet::from([ProcessId(3), ProcessId(4)]));
    let range_write = Message::Write {
        sender: ProcessId(100),
        target: Target::Range(Span::new(12, 14).to_set()),
    };
    assert_eq!(
        ecast::destset(&configuration, &range_write),
        BTreeSet::from([ProcessId(1), ProcessId(3)])
    );
}

#[test]
fn suspect_messages_name_their_process_and_suspects_senders_have_no_effect() {
    let configuration = ring(3, &[10, 20, 30, 40]);
    let suspect = ConfigMessage {
        based_on: configuration.version(),
        change: ConfigChange::Membership(MembershipChange::Suspect {
            process: ProcessId(2),
        }),
    };
    let message = Message::Config {
        sender: ProcessId(1),
        message: suspect.clone(),
    };
    assert_eq!(ecast::suspects(&message), BTreeSet::from([ProcessId(2)]));
    let (after, refusal) = ecast::apply(&configuration, &message);
    assert_eq!(refusal, None);
    assert_eq!(
        after.state(ProcessId(2)),
        Some(ProcessState::Suspected {
            identifier: Position(20)
        })
    );
    // Now 2 is suspected: its own messages change nothing.
    let from_suspect = Message::Config {
        sender: ProcessId(2),
        message: ConfigMessage {
            based_on: after.version(),
            change: ConfigChange::Membership(MembershipChange::Suspect {
                process: ProcessId(1),
            }),
        },
    };
    assert_eq!(ecast::apply(&after, &from_suspect), (after.clone(), None));
    // A refused message leaves the configuration unchanged and reports why.
    let (unchanged, refusal) = ecast::apply(&after, &message);
    assert_eq!(unchanged, after);
    assert!(matches!(
        refusal,
        Some(Refusal::Conflict { .. }) | Some(Refusal::NotActive { .. })
    ));
}

#[test]
fn moving_data_onto_only_suspected_replicas_is_refused() {
    // f = 1: 1 holds [10, 20), 2 (suspected) holds [20, 10). Moving 1 to 15 would give
    // [10, 15) to 2, which cannot receive it: no live replica would hold it.
    let configuration = ring(1, &[10, 20]);
    let configuration = membership(
        &configuration,
        MembershipChange::Suspect {
            process: ProcessId(2),
        },
    )
    .expect("suspect");
    assert_eq!(
        transform(
            &configuration,
            Transformation::Rebalance {
                process: ProcessId(1),
                identifier: Position(15)
            }
        ),
        Err(Refusal::NoLiveReplica {
            range: Span::new(10, 15).to_set()
        })
    );
}

/// The runtime's elastic cluster: replication 3, one active process and two standbys; expand
/// one at a time to three, then contract back to one. Below three members every member holds
/// everything (`min(f, ring size)` replicas); the last member cannot be contracted.
#[test]
fn an_elastic_ring_grows_from_one_member_and_shrinks_back_but_never_to_none() {
    let start = Configuration::with_members(
        3,
        &[(ProcessId(1), Position(100))],
        &[ProcessId(2), ProcessId(3)],
    )
    .elastic();
    assert_eq!(start.state(ProcessId(2)), Some(ProcessState::Standby));
    assert_eq!(start.version(), ConfigVersion(0));
    assert!(start.ranges_of(ProcessId(1)).is_whole());
    let two = transform(
        &start,
        Transformation::Expand {
            process: ProcessId(2),
            identifier: Position(1 << 63),
        },
    )
    .expect("one to two");
    assert!(
        two.ranges_of(ProcessId(2)).is_whole(),
        "two members of f = 3 hold everything"
    );
    assert!(two.is_elastic(), "later versions inherit elasticity");
    let three = transform(
        &two,
        Transformation::Expand {
            process: ProcessId(3),
            identifier: Position(1 << 62),
        },
    )
    .expect("two to three");
    let contracted = transform(
        &three,
        Transformation::Contract {
            process: ProcessId(3),
        },
    )
    .expect("an elastic ring may go below f");
    let one = transform(
        &contracted,
        Transformation::Contract {
            process: ProcessId(1),
        },
    )
    .expect("down to one member");
    assert!(one.ranges_of(ProcessId(2)).is_whole());
    let refusal = transform(
        &one,
        Transformation::Contract {
            process: ProcessId(2),
        },
    )
    .expect_err("the last member holds the only copy");
    assert_eq!(
        refusal,
        Refusal::BelowReplication {
            ring_size: 0,
            replication: 3
        }
    );
    assert!(refusal.to_string().contains("empty"), "{refusal}");
    // Not elastic: the same contract from three members is refused, as before.
    let rigid = ring(3, &[10, 20, 30]);
    assert!(matches!(
        transform(
            &rigid,
            Transformation::Contract {
                process: ProcessId(1)
            }
        ),
        Err(Refusal::BelowReplication { ring_size: 2, .. })
    ));
}
