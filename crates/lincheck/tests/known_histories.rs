//! Hand-written histories with known verdicts.

use lincheck::{
    check, Budget, CheckResult, MapInput, MapOutput, Model, Operation, RegisterMapModel, Violation,
};

type Op = Operation<MapInput, MapOutput>;

fn put(client: u64, call: u64, ret: u64, key: u64, value: u64) -> Op {
    Operation::completed(
        client,
        call,
        ret,
        MapInput::Put { key, value },
        MapOutput::Ok,
    )
}

fn delete(client: u64, call: u64, ret: u64, key: u64) -> Op {
    Operation::completed(client, call, ret, MapInput::Delete { key }, MapOutput::Ok)
}

fn get(client: u64, call: u64, ret: u64, key: u64, seen: Option<u64>) -> Op {
    Operation::completed(
        client,
        call,
        ret,
        MapInput::Get { key },
        MapOutput::Value(seen),
    )
}

fn pending_put(client: u64, call: u64, key: u64, value: u64) -> Op {
    Operation::pending(client, call, MapInput::Put { key, value })
}

fn verdict(history: &[Op]) -> CheckResult {
    check(&RegisterMapModel, history, Budget::unlimited())
}

fn violation(history: &[Op]) -> Violation {
    match verdict(history) {
        CheckResult::Illegal(v) => v,
        other => panic!("expected a violation, got {other:?}"),
    }
}

#[test]
fn an_empty_history_is_linearizable() {
    assert!(verdict(&[]).is_ok());
}

#[test]
fn overlapping_writes_may_take_effect_in_either_order() {
    let history = [
        put(1, 0, 10, 0, 1),
        put(2, 2, 8, 0, 2),
        get(3, 9, 12, 0, Some(1)),
        get(3, 13, 14, 0, Some(1)),
    ];
    assert!(verdict(&history).is_ok());
}

#[test]
fn reads_concurrent_with_a_write_may_see_old_then_new() {
    let history = [
        put(1, 0, 5, 0, 1),
        put(1, 6, 20, 0, 2),
        get(2, 7, 8, 0, Some(1)),
        get(2, 9, 10, 0, Some(2)),
        get(3, 11, 12, 0, Some(2)),
    ];
    assert!(verdict(&history).is_ok());
}

#[test]
fn operations_touching_at_the_same_instant_count_as_concurrent() {
    // The read's call coincides with the write's return: either order is allowed.
    let history = [put(1, 0, 5, 0, 1), get(2, 5, 6, 0, None)];
    assert!(verdict(&history).is_ok());
}

#[test]
fn a_deleted_key_reads_as_absent() {
    let history = [
        get(1, 0, 1, 4, None),
        put(1, 2, 3, 4, 7),
        get(2, 4, 5, 4, Some(7)),
        delete(2, 6, 7, 4),
        get(1, 8, 9, 4, None),
    ];
    assert!(verdict(&history).is_ok());
}

#[test]
fn independent_keys_are_checked_separately() {
    let history = [
        put(1, 0, 10, 1, 1),
        put(2, 0, 10, 2, 2),
        get(3, 1, 2, 2, Some(2)),
        get(3, 3, 4, 1, None),
        get(3, 11, 12, 1, Some(1)),
    ];
    assert!(verdict(&history).is_ok());
    assert_eq!(RegisterMapModel.partition(&history).len(), 2);
}

#[test]
fn a_pending_put_whose_value_is_later_read_is_linearizable() {
    let history = [pending_put(1, 0, 0, 5), get(2, 10, 11, 0, Some(5))];
    assert!(verdict(&history).is_ok());
}

#[test]
fn a_pending_put_that_is_never_read_is_linearizable() {
    let history = [
        put(1, 0, 1, 0, 1),
        pending_put(2, 2, 0, 5),
        get(3, 3, 4, 0, Some(1)),
        get(3, 5, 6, 0, Some(1)),
    ];
    assert!(verdict(&history).is_ok());
}

#[test]
fn a_pending_put_may_take_effect_long_after_its_call() {
    let history = [
        put(1, 0, 1, 0, 1),
        pending_put(2, 2, 0, 5),
        get(3, 3, 4, 0, Some(1)),
        get(3, 50, 51, 0, Some(1)),
        get(3, 90, 91, 0, Some(5)),
    ];
    assert!(verdict(&history).is_ok());
}

#[test]
fn a_pending_put_takes_effect_at_most_once() {
    let history = [
        put(1, 0, 1, 0, 1),
        pending_put(2, 2, 0, 5),
        get(3, 3, 4, 0, Some(5)),
        get(3, 5, 6, 0, Some(1)),
    ];
    assert!(verdict(&history).is_illegal());
}

#[test]
fn a_stale_read_after_a_completed_write_is_illegal_and_reported() {
    let history = [
        put(1, 0, 1, 0, 1),
        put(1, 2, 3, 0, 2),
        get(2, 4, 5, 0, Some(1)),
    ];
    let v = violation(&history);
    assert_eq!(v.partition, vec![0, 1, 2]);
    assert_eq!(v.longest_linearized_prefix, vec![0, 1]);
    assert!(v.report.contains("put(0, 2) -> ok"), "{}", v.report);
    assert!(v.report.contains("get(0) -> 1"), "{}", v.report);
    assert!(v.report.contains("client=2"), "{}", v.report);
}

#[test]
fn a_read_of_a_value_never_written_is_illegal() {
    let history = [put(1, 0, 5, 0, 1), get(2, 1, 6, 0, Some(7))];
    let v = violation(&history);
    assert!(v.report.contains("get(0) -> 7"), "{}", v.report);
    assert_eq!(v.longest_linearized_prefix, vec![0]);
}

#[test]
fn sequential_reads_going_backwards_are_illegal() {
    let history = [
        put(1, 0, 1, 0, 1),
        put(1, 2, 20, 0, 2),
        get(2, 3, 4, 0, Some(2)),
        get(2, 5, 6, 0, Some(1)),
    ];
    let v = violation(&history);
    assert!(v.report.contains("get(0) -> 2"), "{}", v.report);
    assert!(v.report.contains("get(0) -> 1"), "{}", v.report);
}

#[test]
fn a_lost_write_is_illegal() {
    // An acknowledged put is followed by a read that finds the key absent.
    let history = [
        get(1, 0, 1, 3, None),
        put(1, 2, 3, 3, 9),
        get(2, 4, 5, 3, None),
    ];
    let v = violation(&history);
    assert!(v.report.contains("put(3, 9) -> ok"), "{}", v.report);
    assert!(v.report.contains("get(3) -> absent"), "{}", v.report);
}

#[test]
fn a_violation_reports_only_the_failing_partition() {
    let history = [
        put(1, 0, 1, 1, 1),
        put(1, 2, 3, 2, 2),
        get(2, 4, 5, 1, Some(1)),
        get(2, 6, 7, 2, None),
        get(3, 8, 9, 1, Some(1)),
    ];
    let v = violation(&history);
    assert_eq!(v.partition, vec![1, 3]);
    assert!(!v.report.contains("get(1)"), "{}", v.report);
    assert_eq!(v.to_string(), v.report);
}

#[test]
fn the_longest_prefix_is_in_linearization_order() {
    // Client 2's write is linearized before client 1's although it is invoked later.
    let history = [
        put(1, 0, 10, 0, 1),
        put(2, 1, 2, 0, 2),
        get(3, 11, 12, 0, Some(1)),
        get(3, 13, 14, 0, Some(3)),
    ];
    let v = violation(&history);
    assert_eq!(v.longest_linearized_prefix, vec![1, 0, 2]);
}

#[test]
fn a_tiny_budget_returns_unknown() {
    let history = [
        put(1, 0, 10, 0, 1),
        put(2, 1, 9, 0, 2),
        get(3, 11, 12, 0, Some(1)),
    ];
    assert!(check(&RegisterMapModel, &history, Budget::steps(1)).is_unknown());
    assert!(check(&RegisterMapModel, &history, Budget::steps(0)).is_unknown());
    assert!(check(&RegisterMapModel, &history, Budget::unlimited()).is_ok());
}

#[test]
fn the_budget_is_shared_across_partitions() {
    let on_key = |key| {
        [
            put(1, 0, 10, key, 1),
            put(2, 1, 9, key, 2),
            get(3, 11, 12, key, Some(1)),
        ]
    };
    let one_key = on_key(0);
    let needed = (0..1000)
        .find(|&steps| check(&RegisterMapModel, &one_key, Budget::steps(steps)).is_ok())
        .expect("a small history needs few steps");
    assert!(needed > 1);
    let three_keys: Vec<Op> = (0..3).flat_map(on_key).collect();
    assert!(check(
        &RegisterMapModel,
        &three_keys,
        Budget::steps(3 * needed - 1)
    )
    .is_unknown());
    assert!(check(&RegisterMapModel, &three_keys, Budget::steps(3 * needed)).is_ok());
}

#[test]
fn a_violation_found_within_budget_is_reported_as_illegal() {
    let history = [get(1, 0, 1, 0, Some(4))];
    assert!(check(&RegisterMapModel, &history, Budget::steps(10)).is_illegal());
}

#[test]
fn a_return_time_before_the_call_is_treated_as_the_call_time() {
    let history = [put(1, 5, 3, 0, 1), get(2, 5, 6, 0, Some(1))];
    assert!(verdict(&history).is_ok());
}
