//! The checker with a user-defined, non-partitioned model: a FIFO queue.

use std::collections::VecDeque;

use lincheck::{check, Budget, CheckResult, Model, Operation};

#[derive(Clone, Debug, PartialEq, Eq)]
enum QueueInput {
    Enqueue(u32),
    Dequeue,
}

/// `Dequeue` returns the front element, or `None` on an empty queue.
struct QueueModel;

impl Model for QueueModel {
    type State = VecDeque<u32>;
    type Input = QueueInput;
    type Output = Option<u32>;

    fn init(&self) -> VecDeque<u32> {
        VecDeque::new()
    }

    fn step(
        &self,
        state: &VecDeque<u32>,
        input: &QueueInput,
        output: Option<&Option<u32>>,
    ) -> Option<VecDeque<u32>> {
        let mut next = state.clone();
        match input {
            QueueInput::Enqueue(v) => {
                next.push_back(*v);
                Some(next)
            }
            QueueInput::Dequeue => {
                let front = next.pop_front();
                match output {
                    Some(seen) if *seen != front => None,
                    _ => Some(next),
                }
            }
        }
    }
}

fn enq(client: u64, call: u64, ret: u64, v: u32) -> Operation<QueueInput, Option<u32>> {
    Operation::completed(client, call, ret, QueueInput::Enqueue(v), None)
}

fn deq(client: u64, call: u64, ret: u64, seen: Option<u32>) -> Operation<QueueInput, Option<u32>> {
    Operation::completed(client, call, ret, QueueInput::Dequeue, seen)
}

#[test]
fn concurrent_enqueues_may_be_dequeued_in_either_order() {
    let history = [
        enq(1, 0, 10, 1),
        enq(2, 0, 10, 2),
        deq(3, 11, 12, Some(2)),
        deq(3, 13, 14, Some(1)),
        deq(3, 15, 16, None),
    ];
    assert!(check(&QueueModel, &history, Budget::unlimited()).is_ok());
}

#[test]
fn sequential_enqueues_must_be_dequeued_in_order() {
    let history = [enq(1, 0, 1, 1), enq(1, 2, 3, 2), deq(2, 4, 5, Some(2))];
    let CheckResult::Illegal(v) = check(&QueueModel, &history, Budget::unlimited()) else {
        panic!("dequeuing out of order must be illegal");
    };
    assert_eq!(v.longest_linearized_prefix, vec![0, 1]);
    assert!(
        v.report.contains("Dequeue -> Some(Some(2))"),
        "{}",
        v.report
    );
    assert!(
        v.report.contains("VecDeque") || v.report.contains("[1, 2]"),
        "{}",
        v.report
    );
}

#[test]
fn a_pending_dequeue_may_have_removed_an_element() {
    let history = [
        enq(1, 0, 1, 1),
        Operation::pending(2, 2, QueueInput::Dequeue),
        deq(3, 5, 6, None),
    ];
    assert!(check(&QueueModel, &history, Budget::unlimited()).is_ok());
}
