//! The typed values (hashes, lists, sets, sorted sets), WRONGTYPE, TYPE and expiry, executed
//! through the state machine's bytes as a replica executes them.

use kv::{
    AddFlags, Command, ExpireCondition, ExpireTime, HashOperation, KvError, KvStore, LexBound,
    ListOperation, Outcome, Range, Score, ScoreBound, SetOperation, SortedOperation, TtlChange,
    TtlQuery,
};
use vr::StateMachine;

fn b(text: &str) -> Vec<u8> {
    text.as_bytes().to_vec()
}

fn run(store: &mut KvStore, command: Command) -> Outcome {
    Outcome::decode(&store.apply(&command.encode())).unwrap()
}

fn at(now_ms: u64, command: Command) -> Command {
    command.stamped(now_ms)
}

fn hash(key: &str, operation: HashOperation) -> Command {
    Command::Hash {
        key: b(key),
        operation,
    }
}

fn list(key: &str, operation: ListOperation) -> Command {
    Command::List {
        key: b(key),
        operation,
    }
}

fn set(key: &str, operation: SetOperation) -> Command {
    Command::Members {
        key: b(key),
        operation,
    }
}

fn zset(key: &str, operation: SortedOperation) -> Command {
    Command::Sorted {
        key: b(key),
        operation,
    }
}

fn bulks(items: &[&str]) -> Outcome {
    Outcome::Values(items.iter().map(|item| Some(b(item))).collect())
}

fn score(value: f64) -> Score {
    Score::new(value).unwrap()
}

#[test]
fn every_type_refuses_the_commands_of_the_others_and_type_names_it() {
    let mut store = KvStore::new();
    run(
        &mut store,
        Command::Put {
            key: b("s"),
            value: b("v"),
        },
    );
    run(
        &mut store,
        hash(
            "h",
            HashOperation::Set {
                pairs: vec![(b("f"), b("v"))],
            },
        ),
    );
    run(
        &mut store,
        list(
            "l",
            ListOperation::Push {
                items: vec![b("a")],
                front: true,
                only_if_exists: false,
            },
        ),
    );
    run(
        &mut store,
        set(
            "t",
            SetOperation::Add {
                members: vec![b("m")],
            },
        ),
    );
    run(
        &mut store,
        zset(
            "z",
            SortedOperation::Add {
                members: vec![(score(1.0), b("m"))],
                flags: AddFlags::default(),
            },
        ),
    );
    for (key, name) in [
        ("s", "string"),
        ("h", "hash"),
        ("l", "list"),
        ("t", "set"),
        ("z", "zset"),
        ("none", "none"),
    ] {
        assert_eq!(
            run(&mut store, Command::Type { key: b(key) }),
            Outcome::Value(Some(b(name)))
        );
    }
    let wrong = Outcome::Error(KvError::WrongType);
    assert_eq!(run(&mut store, Command::Get { key: b("h") }), wrong);
    assert_eq!(
        run(&mut store, Command::Increment { key: b("l"), by: 1 }),
        wrong
    );
    assert_eq!(
        run(
            &mut store,
            Command::Append {
                key: b("t"),
                value: b("x")
            }
        ),
        wrong
    );
    assert_eq!(run(&mut store, hash("s", HashOperation::Len)), wrong);
    assert_eq!(run(&mut store, list("h", ListOperation::Len)), wrong);
    assert_eq!(run(&mut store, set("z", SetOperation::Card)), wrong);
    assert_eq!(run(&mut store, zset("t", SortedOperation::Card)), wrong);
    assert_eq!(
        run(
            &mut store,
            hash(
                "l",
                HashOperation::Set {
                    pairs: vec![(b("f"), b("v"))]
                }
            )
        ),
        wrong
    );
    assert_eq!(
        KvError::WrongType.reply_text(),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    // A refused write changed nothing; MGET reads other types as nil; SET overwrites any type.
    assert_eq!(
        run(&mut store, list("l", ListOperation::Len)),
        Outcome::Integer(1)
    );
    assert_eq!(
        run(
            &mut store,
            Command::MultiGet {
                keys: vec![b("s"), b("h")]
            }
        ),
        Outcome::Values(vec![Some(b("v")), None])
    );
    assert_eq!(
        run(
            &mut store,
            Command::Exists {
                keys: vec![b("h"), b("z"), b("h"), b("no")]
            }
        ),
        Outcome::Integer(3)
    );
    run(
        &mut store,
        Command::Put {
            key: b("h"),
            value: b("now a string"),
        },
    );
    assert_eq!(
        run(&mut store, Command::Type { key: b("h") }),
        Outcome::Value(Some(b("string")))
    );
}

#[test]
fn hashes_follow_redis() {
    let mut store = KvStore::new();
    let pairs = vec![(b("a"), b("1")), (b("b"), b("2")), (b("a"), b("3"))];
    assert_eq!(
        run(&mut store, hash("h", HashOperation::Set { pairs })),
        Outcome::Integer(2)
    );
    assert_eq!(
        run(&mut store, hash("h", HashOperation::GetAll)),
        bulks(&["a", "3", "b", "2"])
    );
    assert_eq!(
        run(
            &mut store,
            hash(
                "h",
                HashOperation::SetIfAbsent {
                    field: b("a"),
                    value: b("x")
                }
            )
        ),
        Outcome::Integer(0)
    );
    assert_eq!(
        run(
            &mut store,
            hash(
                "h",
                HashOperation::MultiGet {
                    fields: vec![b("b"), b("zz")]
                }
            )
        ),
        Outcome::Values(vec![Some(b("2")), None])
    );
    assert_eq!(
        run(
            &mut store,
            hash(
                "h",
                HashOperation::IncrementBy {
                    field: b("a"),
                    by: 10
                }
            )
        ),
        Outcome::Integer(13)
    );
    assert_eq!(
        run(
            &mut store,
            hash(
                "h",
                HashOperation::IncrementByFloat {
                    field: b("a"),
                    by: score(0.5)
                }
            )
        ),
        Outcome::Value(Some(b("13.5")))
    );
    assert_eq!(
        run(
            &mut store,
            hash(
                "h",
                HashOperation::IncrementBy {
                    field: b("a"),
                    by: 1
                }
            )
        ),
        Outcome::Error(KvError::HashNotAnInteger)
    );
    assert_eq!(
        run(
            &mut store,
            hash("h", HashOperation::StrLen { field: b("a") })
        ),
        Outcome::Integer(4)
    );
    assert_eq!(
        run(
            &mut store,
            hash(
                "h",
                HashOperation::Delete {
                    fields: vec![b("a"), b("b"), b("c")]
                }
            )
        ),
        Outcome::Integer(2)
    );
    assert_eq!(
        run(&mut store, Command::Exists { keys: vec![b("h")] }),
        Outcome::Integer(0),
        "an emptied hash is deleted"
    );
    assert!(store.is_empty());
    assert_eq!(store.bytes(), 0);
}

#[test]
fn lists_follow_redis() {
    let mut store = KvStore::new();
    let push = |items: &[&str], front| {
        list(
            "l",
            ListOperation::Push {
                items: items.iter().map(|item| b(item)).collect(),
                front,
                only_if_exists: false,
            },
        )
    };
    assert_eq!(
        run(&mut store, push(&["a", "b", "c"], true)),
        Outcome::Integer(3)
    );
    assert_eq!(
        run(&mut store, push(&["d", "a"], false)),
        Outcome::Integer(5)
    );
    assert_eq!(
        run(
            &mut store,
            list("l", ListOperation::Range { start: 0, stop: -1 })
        ),
        bulks(&["c", "b", "a", "d", "a"])
    );
    assert_eq!(
        run(
            &mut store,
            list(
                "l",
                ListOperation::Range {
                    start: -2,
                    stop: 100
                }
            )
        ),
        bulks(&["d", "a"])
    );
    assert_eq!(
        run(&mut store, list("l", ListOperation::Index { index: -1 })),
        Outcome::Value(Some(b("a")))
    );
    assert_eq!(
        run(
            &mut store,
            list(
                "l",
                ListOperation::Position {
                    item: b("a"),
                    rank: -1,
                    count: None,
                    max_len: 0
                }
            )
        ),
        Outcome::Integer(4)
    );
    assert_eq!(
        run(
            &mut store,
            list(
                "l",
                ListOperation::Position {
                    item: b("a"),
                    rank: 1,
                    count: Some(0),
                    max_len: 0
                }
            )
        ),
        Outcome::Integers(vec![2, 4])
    );
    assert_eq!(
        run(
            &mut store,
            list(
                "l",
                ListOperation::Insert {
                    before: true,
                    pivot: b("d"),
                    item: b("x")
                }
            )
        ),
        Outcome::Integer(6)
    );
    assert_eq!(
        run(
            &mut store,
            list(
                "l",
                ListOperation::Insert {
                    before: true,
                    pivot: b("zz"),
                    item: b("x")
                }
            )
        ),
        Outcome::Integer(-1)
    );
    assert_eq!(
        run(
            &mut store,
            list(
                "l",
                ListOperation::Remove {
                    count: -1,
                    item: b("a")
                }
            )
        ),
        Outcome::Integer(1)
    );
    assert_eq!(
        run(
            &mut store,
            list("l", ListOperation::Range { start: 0, stop: -1 })
        ),
        bulks(&["c", "b", "a", "x", "d"])
    );
    assert_eq!(
        run(
            &mut store,
            list(
                "l",
                ListOperation::Set {
                    index: 9,
                    item: b("y")
                }
            )
        ),
        Outcome::Error(KvError::IndexOutOfRange)
    );
    assert_eq!(
        run(
            &mut store,
            list(
                "nope",
                ListOperation::Set {
                    index: 0,
                    item: b("y")
                }
            )
        ),
        Outcome::Error(KvError::NoSuchKey)
    );
    assert_eq!(
        run(
            &mut store,
            list("l", ListOperation::Trim { start: 1, stop: -2 })
        ),
        Outcome::Ok
    );
    assert_eq!(
        run(
            &mut store,
            list(
                "l",
                ListOperation::Pop {
                    front: false,
                    count: Some(10)
                }
            )
        ),
        bulks(&["x", "a", "b"])
    );
    assert_eq!(
        run(
            &mut store,
            list(
                "l",
                ListOperation::Pop {
                    front: true,
                    count: None
                }
            )
        ),
        Outcome::Value(None)
    );
    assert!(store.is_empty());
    let pushx = list(
        "l",
        ListOperation::Push {
            items: vec![b("a")],
            front: true,
            only_if_exists: true,
        },
    );
    assert_eq!(run(&mut store, pushx), Outcome::Integer(0));
    assert!(store.is_empty(), "PUSHX creates nothing");
}

#[test]
fn sorted_sets_follow_redis() {
    let mut store = KvStore::new();
    let add = |members: Vec<(f64, &str)>, flags| {
        zset(
            "z",
            SortedOperation::Add {
                members: members
                    .into_iter()
                    .map(|(value, member)| (score(value), b(member)))
                    .collect(),
                flags,
            },
        )
    };
    assert_eq!(
        run(
            &mut store,
            add(
                vec![(1.0, "a"), (2.0, "b"), (0.1, "c"), (f64::INFINITY, "d")],
                AddFlags::default()
            )
        ),
        Outcome::Integer(4)
    );
    let changed = AddFlags {
        count_changed: true,
        only_greater: true,
        ..AddFlags::default()
    };
    assert_eq!(
        run(
            &mut store,
            add(vec![(0.5, "a"), (3.0, "b"), (1.0, "e")], changed)
        ),
        Outcome::Integer(2)
    );
    let incr_xx = AddFlags {
        increment: true,
        only_existing: true,
        ..AddFlags::default()
    };
    assert_eq!(
        run(&mut store, add(vec![(1.0, "zz")], incr_xx)),
        Outcome::Value(None)
    );
    assert_eq!(
        run(
            &mut store,
            zset(
                "z",
                SortedOperation::IncrementBy {
                    by: score(f64::NEG_INFINITY),
                    member: b("d")
                }
            )
        ),
        Outcome::Error(KvError::ScoreNotANumber)
    );
    let all = SortedOperation::Range {
        range: Range::Rank { start: 0, stop: -1 },
        reverse: false,
        limit: None,
        with_scores: true,
    };
    assert_eq!(
        run(&mut store, zset("z", all)),
        bulks(&[
            "c",
            "0.10000000000000001",
            "a",
            "1",
            "e",
            "1",
            "b",
            "3",
            "d",
            "inf"
        ])
    );
    let by_score = SortedOperation::Range {
        range: Range::Score {
            min: ScoreBound {
                score: score(1.0),
                exclusive: true,
            },
            max: ScoreBound {
                score: score(f64::INFINITY),
                exclusive: false,
            },
        },
        reverse: true,
        limit: Some((1, 1)),
        with_scores: false,
    };
    assert_eq!(run(&mut store, zset("z", by_score)), bulks(&["b"]));
    let by_lex = SortedOperation::Count {
        range: Range::Lex {
            min: LexBound::Exclusive(b("a")),
            max: LexBound::Highest,
        },
    };
    assert_eq!(run(&mut store, zset("z", by_lex)), Outcome::Integer(4));
    assert_eq!(
        run(
            &mut store,
            zset(
                "z",
                SortedOperation::Rank {
                    member: b("b"),
                    reverse: true
                }
            )
        ),
        Outcome::Integer(1)
    );
    assert_eq!(
        run(
            &mut store,
            zset(
                "z",
                SortedOperation::Rank {
                    member: b("q"),
                    reverse: false
                }
            )
        ),
        Outcome::Value(None)
    );
    assert_eq!(
        run(
            &mut store,
            zset(
                "z",
                SortedOperation::Pop {
                    highest: false,
                    count: Some(2)
                }
            )
        ),
        bulks(&["c", "0.10000000000000001", "a", "1"])
    );
    assert_eq!(
        run(
            &mut store,
            zset(
                "z",
                SortedOperation::RemoveRange {
                    range: Range::Rank { start: 0, stop: 0 }
                }
            )
        ),
        Outcome::Integer(1)
    );
    assert_eq!(
        run(
            &mut store,
            zset(
                "z",
                SortedOperation::MultiScore {
                    members: vec![b("b"), b("e")]
                }
            )
        ),
        Outcome::Values(vec![Some(b("3")), None])
    );
}

#[test]
fn random_draws_are_the_same_on_every_replica_and_follow_the_counts() {
    let mut first = KvStore::new();
    let members: Vec<Vec<u8>> = (0..50)
        .map(|index| format!("m{index}").into_bytes())
        .collect();
    run(&mut first, set("s", SetOperation::Add { members }));
    let mut second = first.clone();
    let pop = at(1_000, set("s", SetOperation::Pop { count: Some(5) }));
    let popped = run(&mut first, pop.clone());
    assert_eq!(run(&mut second, pop), popped, "replicas agree");
    assert_eq!(first, second);
    let Outcome::Values(popped) = popped else {
        panic!()
    };
    assert_eq!(popped.len(), 5);
    assert_eq!(
        run(&mut first, set("s", SetOperation::Card)),
        Outcome::Integer(45)
    );
    let distinct = run(
        &mut first,
        at(
            5,
            set("s", SetOperation::RandomMembers { count: Some(100) }),
        ),
    );
    let Outcome::Values(distinct) = distinct else {
        panic!()
    };
    let unique: std::collections::BTreeSet<_> = distinct.iter().collect();
    assert_eq!((distinct.len(), unique.len()), (45, 45));
    let Outcome::Values(repeats) = run(
        &mut first,
        at(
            5,
            set("s", SetOperation::RandomMembers { count: Some(-100) }),
        ),
    ) else {
        panic!()
    };
    assert_eq!(repeats.len(), 100);
}

#[test]
fn an_expired_key_is_gone_at_once_for_reads_and_deleted_by_writes() {
    let mut store = KvStore::new();
    let set_ex = Command::SetExpiring {
        key: b("k"),
        value: b("v"),
        condition: kv::SetCondition::Always,
        return_previous: false,
        ttl: TtlChange::Set(ExpireTime::AfterMs(100)),
    };
    assert_eq!(run(&mut store, at(1_000, set_ex)), Outcome::Integer(1));
    let ttl = |milliseconds, absolute| Command::TimeToLive {
        key: b("k"),
        query: TtlQuery {
            milliseconds,
            absolute,
        },
    };
    assert_eq!(
        run(&mut store, at(1_040, ttl(true, false))),
        Outcome::Integer(60)
    );
    assert_eq!(
        run(&mut store, at(1_040, ttl(false, false))),
        Outcome::Integer(0)
    );
    assert_eq!(
        run(&mut store, at(1_040, ttl(true, true))),
        Outcome::Integer(1_100)
    );
    assert_eq!(
        run(&mut store, at(1_099, Command::Get { key: b("k") })),
        Outcome::Value(Some(b("v")))
    );
    assert_eq!(
        run(&mut store, at(1_100, Command::Get { key: b("k") })),
        Outcome::Value(None)
    );
    assert_eq!(
        run(&mut store, at(1_100, ttl(true, false))),
        Outcome::Integer(-2)
    );
    assert_eq!(store.len(), 1, "a read deletes nothing");
    assert_eq!(
        run(
            &mut store,
            at(
                1_100,
                Command::Append {
                    key: b("k"),
                    value: b("w")
                }
            )
        ),
        Outcome::Integer(1)
    );
    assert_eq!(
        store.get(b"k"),
        Some(&b("w")),
        "the write found the key gone"
    );
    assert_eq!(
        run(&mut store, at(1_100, ttl(true, false))),
        Outcome::Integer(-1)
    );
}

#[test]
fn expire_conditions_and_persist_follow_redis() {
    let mut store = KvStore::new();
    run(
        &mut store,
        Command::Put {
            key: b("k"),
            value: b("v"),
        },
    );
    let expire = |after, condition| {
        at(
            0,
            Command::Expire {
                key: b("k"),
                at: ExpireTime::AfterMs(after),
                condition,
                command: "pexpire".into(),
            },
        )
    };
    assert_eq!(
        run(&mut store, expire(100, ExpireCondition::IfSome)),
        Outcome::Integer(0)
    );
    assert_eq!(
        run(&mut store, expire(100, ExpireCondition::IfLater)),
        Outcome::Integer(0),
        "no expiry is forever"
    );
    assert_eq!(
        run(&mut store, expire(100, ExpireCondition::IfEarlier)),
        Outcome::Integer(1)
    );
    assert_eq!(
        run(&mut store, expire(50, ExpireCondition::IfLater)),
        Outcome::Integer(0)
    );
    assert_eq!(
        run(&mut store, expire(200, ExpireCondition::IfNone)),
        Outcome::Integer(0)
    );
    assert_eq!(
        run(&mut store, expire(200, ExpireCondition::Always)),
        Outcome::Integer(1)
    );
    assert_eq!(
        run(&mut store, at(0, Command::Persist { key: b("k") })),
        Outcome::Integer(1)
    );
    assert_eq!(
        run(&mut store, at(0, Command::Persist { key: b("k") })),
        Outcome::Integer(0)
    );
    assert_eq!(
        run(&mut store, expire(-1, ExpireCondition::Always)),
        Outcome::Integer(1),
        "a past time deletes"
    );
    assert!(store.is_empty());
    assert_eq!(
        run(
            &mut store,
            Command::Expire {
                key: b("k"),
                at: ExpireTime::AfterMs(1),
                condition: ExpireCondition::Always,
                command: "expire".into()
            }
        ),
        Outcome::Error(KvError::Unstamped)
    );
    run(
        &mut store,
        Command::Put {
            key: b("k"),
            value: b("v"),
        },
    );
    let overflow = at(
        10,
        Command::Expire {
            key: b("k"),
            at: ExpireTime::AfterMs(i64::MAX),
            condition: ExpireCondition::Always,
            command: "expire".into(),
        },
    );
    assert_eq!(
        run(&mut store, overflow),
        Outcome::Error(KvError::InvalidExpireTime {
            command: "expire".into()
        })
    );
    assert_eq!(
        KvError::InvalidExpireTime {
            command: "expire".into()
        }
        .reply_text(),
        "ERR invalid expire time in 'expire' command"
    );
}

#[test]
fn typed_values_and_expiries_survive_snapshots_and_copy_records() {
    let mut store = KvStore::new();
    run(
        &mut store,
        hash(
            "h",
            HashOperation::Set {
                pairs: vec![(b("f"), b("v"))],
            },
        ),
    );
    run(
        &mut store,
        at(
            0,
            list(
                "l",
                ListOperation::Push {
                    items: vec![b("a"), b("b")],
                    front: false,
                    only_if_exists: false,
                },
            ),
        ),
    );
    run(
        &mut store,
        set(
            "t",
            SetOperation::Add {
                members: vec![b("m")],
            },
        ),
    );
    run(
        &mut store,
        zset(
            "z",
            SortedOperation::Add {
                members: vec![(score(-2.5), b("m"))],
                flags: AddFlags::default(),
            },
        ),
    );
    run(
        &mut store,
        Command::Put {
            key: b("s"),
            value: b("plain"),
        },
    );
    run(
        &mut store,
        at(
            10,
            Command::Expire {
                key: b("l"),
                at: ExpireTime::AtMs(5_000),
                condition: ExpireCondition::Always,
                command: "pexpireat".into(),
            },
        ),
    );
    let mut restored = KvStore::new();
    restored.restore(&store.snapshot()).unwrap();
    assert_eq!(restored, store);
    assert_eq!(restored.bytes(), store.bytes());
    // A copy as live migration and keyspace cuts make it: records in, records out.
    let mut copy = KvStore::new();
    for (key, record) in store.records_after(None) {
        copy.insert_record(key.clone(), &record).unwrap();
    }
    // The same records (the write counters are the receiver's own: WATCH's, not data).
    assert_eq!(
        copy.records_after(None).collect::<Vec<_>>(),
        store.records_after(None).collect::<Vec<_>>()
    );
    assert_eq!(copy.bytes(), store.bytes());
    assert_eq!(copy.entry(b"l").unwrap().expires_at_ms, Some(5_000));
    assert_eq!(
        run(&mut copy, at(4_999, list("l", ListOperation::Len))),
        Outcome::Integer(2)
    );
    assert_eq!(
        run(&mut copy, at(5_000, list("l", ListOperation::Len))),
        Outcome::Integer(0)
    );
    assert!(copy.insert_record(b("x"), &[42]).is_err());
    assert!(KvStore::new().restore(&[1, 2, 3]).is_err());
}

#[test]
fn a_huge_negative_random_count_is_bounded_not_a_crash() {
    let mut store = KvStore::new();
    run(
        &mut store,
        set(
            "s",
            SetOperation::Add {
                members: vec![b("a")],
            },
        ),
    );
    run(
        &mut store,
        hash(
            "h",
            HashOperation::Set {
                pairs: vec![(b("f"), b("v"))],
            },
        ),
    );
    let max = kv::RANDOM_REPEATS_MAX as usize;
    let Outcome::Values(drawn) = run(
        &mut store,
        at(
            1,
            set(
                "s",
                SetOperation::RandomMembers {
                    count: Some(i64::MIN),
                },
            ),
        ),
    ) else {
        panic!()
    };
    assert_eq!(drawn.len(), max);
    let Outcome::Values(drawn) = run(
        &mut store,
        at(
            1,
            hash(
                "h",
                HashOperation::RandomFields {
                    count: Some(i64::MIN),
                    with_values: true,
                },
            ),
        ),
    ) else {
        panic!()
    };
    assert_eq!(drawn.len(), 2 * max);
}
