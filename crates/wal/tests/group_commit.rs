mod common;

use common::*;
use vr::{DurableState, Record, View};
use wal::{GroupCommitter, Wal};

fn numbered(first_sequence: u64, records: Vec<Record>) -> Vec<(u64, Record)> {
    (first_sequence..).zip(records).collect()
}

#[test]
fn group_commit_returns_the_highest_sequence_and_compacts_after_a_checkpoint() {
    let directory = tempfile::tempdir().expect("temporary directory");
    let config = config(directory.path(), 300);
    let (wal, recovered) = Wal::open(config.clone()).expect("open");
    let mut committer = GroupCommitter::new(wal, &recovered.records);
    assert_eq!(committer.write_batch(&[]).expect("empty batch"), 0);

    let records = numbered(1, entries(1, 40));
    let mut written = Vec::new();
    for batch in records.chunks(6) {
        let durable = committer.write_batch(batch).expect("write a batch");
        assert_eq!(durable, batch.last().expect("a batch").0);
        written.extend(batch.iter().map(|(_, record)| record.clone()));
    }
    let segments_before = committer.wal().segments();
    assert!(segments_before >= 4, "{segments_before} segments");

    let next = records.last().expect("records").0 + 1;
    let batch = vec![
        (next, Record::Entry(entry(0, 41))),
        (next + 1, checkpoint(35)),
        (next + 2, Record::View { view: View(1) }),
    ];
    assert_eq!(
        committer.write_batch(&batch).expect("checkpoint batch"),
        next + 2
    );
    written.extend(batch.iter().map(|(_, record)| record.clone()));
    assert_eq!(committer.wal().segments(), 1, "old segments are deleted");
    assert_eq!(segment_files(directory.path()).len(), 1);
    let expected = DurableState::replay(&written);
    assert_eq!(committer.durable_state(), expected);
    assert_eq!(committer.write_batch(&[]).expect("empty batch"), next + 2);
    drop(committer);

    let (wal, recovered) = Wal::open(config).expect("reopen");
    assert_eq!(recovered.segments, 1);
    assert_eq!(DurableState::replay(&recovered.records), expected);

    // A committer built from what was recovered keeps the mirror exact across the next
    // compaction.
    let mut committer = GroupCommitter::new(wal, &recovered.records);
    let more = numbered(1, {
        let mut more = entries(42, 60);
        more.push(checkpoint(55));
        more
    });
    for batch in more.chunks(5) {
        committer.write_batch(batch).expect("write a batch");
    }
    written.extend(more.iter().map(|(_, record)| record.clone()));
    assert_eq!(committer.wal().segments(), 1);
    assert_eq!(committer.durable_state(), DurableState::replay(&written));
}

#[test]
fn a_batch_without_a_checkpoint_never_compacts() {
    let directory = tempfile::tempdir().expect("temporary directory");
    let (wal, recovered) = Wal::open(config(directory.path(), 200)).expect("open");
    let mut committer = GroupCommitter::new(wal, &recovered.records);
    let mut segments = committer.wal().segments();
    for batch in numbered(1, entries(1, 30)).chunks(4) {
        committer.write_batch(batch).expect("write a batch");
        assert!(committer.wal().segments() >= segments);
        segments = committer.wal().segments();
    }
    assert!(segments > 1);
    assert_eq!(committer.durable_sequence(), 33);
}
