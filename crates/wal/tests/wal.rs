mod common;

use common::*;
use std::fs::{self, OpenOptions};
use std::io::Write;
use vr::{DurableState, Record, View};
use wal::{Wal, WalConfig, WalError};

/// Writes `records` in batches of `batch` with a sync after each, and returns the directory's
/// segment files.
fn write(config: &WalConfig, records: &[Record], batch: usize) {
    let (mut wal, _) = Wal::open(config.clone()).expect("open");
    for chunk in records.chunks(batch) {
        wal.append(chunk).expect("append");
        wal.sync().expect("sync");
    }
}

#[test]
fn records_written_then_reopened_come_back_identical_and_in_order_across_several_segments() {
    let directory = tempfile::tempdir().expect("temporary directory");
    let config = config(directory.path(), 256);
    let records = entries(1, 60);
    {
        let (mut wal, recovered) = Wal::open(config.clone()).expect("open");
        assert!(recovered.records.is_empty());
        assert_eq!(recovered.segments, 1);
        for chunk in records.chunks(7) {
            wal.append(chunk).expect("append");
            wal.sync().expect("sync");
        }
        let files = segment_files(directory.path());
        assert!(wal.segments() >= 4, "{} segments", wal.segments());
        assert_eq!(wal.segments(), files.len());
        let on_disk: u64 = files.iter().map(|path| file_bytes(path)).sum();
        assert_eq!(wal.bytes(), on_disk);
        for path in &files {
            assert!(
                file_bytes(path) <= 256,
                "{} is over the limit",
                path.display()
            );
        }
    }
    let (wal, recovered) = Wal::open(config).expect("reopen");
    assert_eq!(recovered.records, records);
    assert_eq!(recovered.torn_bytes_cut, 0);
    assert_eq!(recovered.segments, wal.segments());
    assert_eq!(recovered.segments, segment_files(directory.path()).len());
}

#[test]
fn records_appended_without_a_sync_are_read_back_after_a_clean_close() {
    let directory = tempfile::tempdir().expect("temporary directory");
    let config = config(directory.path(), 1 << 20);
    let records = entries(1, 5);
    {
        let (mut wal, _) = Wal::open(config.clone()).expect("open");
        wal.append(&records).expect("append");
    }
    let (_, recovered) = Wal::open(config).expect("reopen");
    assert_eq!(recovered.records, records);
}

#[test]
fn opening_a_missing_directory_creates_it_with_one_empty_segment() {
    let parent = tempfile::tempdir().expect("temporary directory");
    let directory = parent.path().join("node-1").join("wal");
    let (wal, recovered) = Wal::open(WalConfig::new(&directory)).expect("open");
    assert!(recovered.records.is_empty());
    assert_eq!(recovered.segments, 1);
    assert_eq!((wal.segments(), wal.bytes()), (1, 0));
    let files = segment_files(&directory);
    assert_eq!(files.len(), 1);
    assert!(files[0].ends_with("wal-00000000000000000000.log"));
}

#[test]
fn a_torn_tail_at_every_byte_of_the_last_record_loses_only_that_record() {
    let template = tempfile::tempdir().expect("temporary directory");
    let records = entries(1, 20);
    write(&config(template.path(), 300), &records, 3);
    let last_file = segment_files(template.path())
        .pop()
        .expect("a last segment");
    let last_file_name = last_file.file_name().expect("a file name").to_owned();
    let complete_bytes = file_bytes(&last_file);
    let last_frame_bytes = frame_bytes(records.last().expect("records"));
    let intact = &records[..records.len() - 1];
    let extra = Record::View { view: View(9) };

    for cut in 0..last_frame_bytes {
        let directory = tempfile::tempdir().expect("temporary directory");
        copy_directory(template.path(), directory.path());
        let torn_file = directory.path().join(&last_file_name);
        OpenOptions::new()
            .write(true)
            .open(&torn_file)
            .and_then(|file| file.set_len(complete_bytes - last_frame_bytes + cut))
            .expect("tear the last record");

        let config = config(directory.path(), 300);
        let (mut wal, recovered) = Wal::open(config.clone()).expect("open a torn log");
        assert_eq!(recovered.records, intact, "cut at byte {cut}");
        assert_eq!(recovered.torn_bytes_cut, cut, "cut at byte {cut}");
        assert_eq!(
            file_bytes(&torn_file),
            complete_bytes - last_frame_bytes,
            "the torn bytes are gone from the file"
        );

        wal.append(std::slice::from_ref(&extra))
            .expect("append after recovery");
        wal.sync().expect("sync after recovery");
        drop(wal);
        let (_, recovered) = Wal::open(config).expect("reopen");
        let mut expected = intact.to_vec();
        expected.push(extra.clone());
        assert_eq!(recovered.records, expected, "cut at byte {cut}");
        assert_eq!(recovered.torn_bytes_cut, 0);
    }
}

#[test]
fn a_flipped_bit_anywhere_in_the_last_record_cuts_that_record() {
    let template = tempfile::tempdir().expect("temporary directory");
    let records = entries(1, 12);
    write(&config(template.path(), 300), &records, 4);
    let last_file = segment_files(template.path())
        .pop()
        .expect("a last segment");
    let last_file_name = last_file.file_name().expect("a file name").to_owned();
    let complete = fs::read(&last_file).expect("read the last segment");
    let last_frame_bytes = frame_bytes(records.last().expect("records")) as usize;
    let frame_start = complete.len() - last_frame_bytes;

    for position in frame_start..complete.len() {
        let directory = tempfile::tempdir().expect("temporary directory");
        copy_directory(template.path(), directory.path());
        let mut damaged = complete.clone();
        damaged[position] ^= 1 << (position % 8);
        fs::write(directory.path().join(&last_file_name), &damaged).expect("flip a bit");

        let (_, recovered) =
            Wal::open(config(directory.path(), 300)).expect("open a damaged last segment");
        assert_eq!(
            recovered.records,
            &records[..records.len() - 1],
            "bit flipped at byte {position}"
        );
        assert_eq!(recovered.torn_bytes_cut, last_frame_bytes as u64);
    }
}

#[test]
fn a_flipped_bit_in_a_sealed_segment_is_a_corrupt_error_naming_the_file() {
    let directory = tempfile::tempdir().expect("temporary directory");
    let records = entries(1, 20);
    let config = config(directory.path(), 300);
    write(&config, &records, 5);
    let files = segment_files(directory.path());
    assert!(files.len() >= 3);
    let sealed = &files[0];
    let second_frame_start = frame_bytes(&records[0]);
    let mut bytes = fs::read(sealed).expect("read the first segment");
    bytes[second_frame_start as usize + 12] ^= 0x10;
    fs::write(sealed, &bytes).expect("flip a bit");
    let lengths: Vec<u64> = files.iter().map(|path| file_bytes(path)).collect();

    match Wal::open(config) {
        Err(error @ WalError::Corrupt { .. }) => {
            let message = error.to_string();
            let WalError::Corrupt { path, offset, .. } = error else {
                unreachable!()
            };
            assert_eq!(&path, sealed);
            assert_eq!(offset, second_frame_start);
            let name = sealed.file_name().expect("a file name").to_string_lossy();
            assert!(message.contains(name.as_ref()), "{message}");
            assert!(message.contains("checksum"), "{message}");
        }
        other => panic!("expected a corrupt segment, got {other:?}"),
    }
    let after: Vec<u64> = files.iter().map(|path| file_bytes(path)).collect();
    assert_eq!(after, lengths, "a refused open changes no segment");
}

fn absurd_header() -> Vec<u8> {
    let mut header = vec![wire::FRAME_VERSION];
    header.extend_from_slice(&u32::MAX.to_le_bytes());
    header.extend_from_slice(&0_u32.to_le_bytes());
    header.extend_from_slice(b"and a little payload");
    header
}

#[test]
fn an_absurd_length_field_in_the_last_segment_is_cut_without_allocating_it() {
    // With no cap at all, only the check against the file's size stands between the reader
    // and a 4 GiB allocation.
    for record_bytes_max in [WalConfig::RECORD_BYTES_MAX_DEFAULT, usize::MAX] {
        let directory = tempfile::tempdir().expect("temporary directory");
        let config = WalConfig {
            record_bytes_max,
            ..config(directory.path(), 1 << 20)
        };
        let records = entries(1, 4);
        write(&config, &records, 4);
        let last = segment_files(directory.path()).pop().expect("a segment");
        let garbage = absurd_header();
        OpenOptions::new()
            .append(true)
            .open(&last)
            .and_then(|mut file| file.write_all(&garbage))
            .expect("append an absurd frame");

        let (_, recovered) = Wal::open(config).expect("open");
        assert_eq!(recovered.records, records);
        assert_eq!(recovered.torn_bytes_cut, garbage.len() as u64);
    }
}

#[test]
fn an_absurd_length_field_in_a_sealed_segment_is_a_corrupt_error() {
    let directory = tempfile::tempdir().expect("temporary directory");
    let config = config(directory.path(), 300);
    write(&config, &entries(1, 20), 5);
    let first = segment_files(directory.path())[0].clone();
    let sealed_bytes = file_bytes(&first);
    OpenOptions::new()
        .append(true)
        .open(&first)
        .and_then(|mut file| file.write_all(&absurd_header()))
        .expect("append an absurd frame");

    match Wal::open(config) {
        Err(WalError::Corrupt {
            path,
            offset,
            reason,
        }) => {
            assert_eq!(path, first);
            assert_eq!(offset, sealed_bytes);
            assert!(reason.contains("exceeds the limit"), "{reason}");
        }
        other => panic!("expected a corrupt segment, got {other:?}"),
    }
}

#[test]
fn appending_a_record_over_the_cap_is_refused_and_writes_nothing() {
    let directory = tempfile::tempdir().expect("temporary directory");
    let config = WalConfig {
        record_bytes_max: 64,
        ..config(directory.path(), 1 << 20)
    };
    let (mut wal, _) = Wal::open(config.clone()).expect("open");
    let small = Record::View { view: View(1) };
    let mut big = common::entry(0, 1);
    big.requests[0].operation = vec![0xab; 100];
    let refused = wal.append(&[small.clone(), Record::Entry(big)]);
    match refused {
        Err(WalError::RecordTooLarge { bytes, bytes_max }) => {
            assert!(bytes > 100);
            assert_eq!(bytes_max, 64);
        }
        other => panic!("expected RecordTooLarge, got {other:?}"),
    }
    assert_eq!(wal.bytes(), 0, "nothing of the refused batch was written");
    wal.append(std::slice::from_ref(&small))
        .expect("the log is still usable");
    wal.sync().expect("sync");
    drop(wal);
    let (_, recovered) = Wal::open(config).expect("reopen");
    assert_eq!(recovered.records, vec![small]);
}

#[test]
fn compaction_leaves_one_segment_that_replays_to_the_same_state() {
    let directory = tempfile::tempdir().expect("temporary directory");
    let config = config(directory.path(), 400);
    let mut records = entries(1, 40);
    records.push(checkpoint(30));
    records.push(Record::View { view: View(2) });
    records.push(Record::Log {
        view: View(2),
        log_view: View(2),
        truncate_after: vr::Op(38),
        entries: vec![common::entry(2, 39)],
    });
    let state = DurableState::replay(&records);
    let (mut wal, _) = Wal::open(config.clone()).expect("open");
    wal.append(&records).expect("append");
    wal.sync().expect("sync");
    let segments_before = wal.segments();
    let bytes_before = wal.bytes();
    assert!(segments_before >= 4, "{segments_before} segments");

    wal.compact(&state).expect("compact");
    assert_eq!(wal.segments(), 1);
    assert!(wal.bytes() < bytes_before);
    let files = all_files(directory.path());
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].to_string_lossy().ends_with(".compacted.log"));

    // Appends continue after the compaction, rotating as usual.
    let more = entries(40, 60);
    wal.append(&more).expect("append after compaction");
    wal.sync().expect("sync after compaction");
    assert!(wal.segments() > 1);
    drop(wal);

    let (wal, recovered) = Wal::open(config).expect("reopen");
    assert_eq!(recovered.segments, wal.segments());
    let compacted = &recovered.records[..recovered.records.len() - more.len()];
    assert_eq!(DurableState::replay(compacted), state);
    let everything: Vec<Record> = records.iter().chain(&more).cloned().collect();
    assert_eq!(
        DurableState::replay(&recovered.records),
        DurableState::replay(&everything)
    );
}

#[test]
fn a_missing_segment_is_a_corrupt_error() {
    let directory = tempfile::tempdir().expect("temporary directory");
    let config = config(directory.path(), 300);
    write(&config, &entries(1, 30), 5);
    let files = segment_files(directory.path());
    assert!(files.len() >= 3);

    fs::remove_file(&files[1]).expect("lose a middle segment");
    match Wal::open(config.clone()) {
        Err(WalError::Corrupt { path, reason, .. }) => {
            assert_eq!(path, files[2]);
            assert!(reason.contains("segment 1 is missing"), "{reason}");
        }
        other => panic!("expected a corrupt log, got {other:?}"),
    }

    fs::remove_file(&files[0]).expect("lose the first segment");
    match Wal::open(config) {
        Err(WalError::Corrupt { path, .. }) => assert_eq!(path, files[2]),
        other => panic!("expected a corrupt log, got {other:?}"),
    }
}

#[test]
fn foreign_files_in_the_directory_are_left_alone() {
    let directory = tempfile::tempdir().expect("temporary directory");
    let notes = directory.path().join("notes.txt");
    fs::write(&notes, b"not a segment").expect("write a foreign file");
    let config = config(directory.path(), 300);
    write(&config, &entries(1, 3), 3);
    let (_, recovered) = Wal::open(config).expect("reopen");
    assert_eq!(recovered.records, entries(1, 3));
    assert!(notes.exists());
}

#[test]
fn errors_display_as_lowercase_sentences() {
    let errors = [
        WalError::Io {
            path: "/tmp/wal".into(),
            source: std::io::Error::other("disk on fire"),
        },
        WalError::Corrupt {
            path: "/tmp/wal/wal-00000000000000000003.log".into(),
            offset: 42,
            reason: "frame checksum mismatch".into(),
        },
        WalError::RecordTooLarge {
            bytes: 10,
            bytes_max: 5,
        },
    ];
    for error in errors {
        let message = error.to_string();
        assert!(
            message.starts_with(|first: char| first.is_ascii_lowercase()),
            "{message}"
        );
    }
}
