//! Fixtures shared by the integration tests.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use vr::{Checkpoint, ClientId, Entry, Op, Record, Request, RequestKind, RequestNumber, View};
use wal::WalConfig;

pub fn config(directory: &Path, segment_bytes_max: u64) -> WalConfig {
    WalConfig {
        segment_bytes_max,
        ..WalConfig::new(directory)
    }
}

pub fn entry(view: u64, op: u64) -> Entry {
    Entry {
        view: View(view),
        op: Op(op),
        requests: vec![Request {
            client: ClientId(7),
            request: RequestNumber(op),
            kind: RequestKind::Write,
            operation: format!("put key-{op} value-{op}").into_bytes(),
        }],
    }
}

pub fn checkpoint(op: u64) -> Record {
    Record::Checkpoint(Checkpoint {
        op: Op(op),
        state: format!("state through {op}").into_bytes(),
        client_table: vec![],
        executed_digest: 0,
    })
}

/// Entries `first..=last` in view 0, with a view promise every tenth op.
pub fn entries(first: u64, last: u64) -> Vec<Record> {
    let mut records = Vec::new();
    for op in first..=last {
        records.push(Record::Entry(entry(0, op)));
        if op % 10 == 0 {
            records.push(Record::View { view: View(0) });
        }
    }
    records
}

/// Segment files in the directory, in name order.
pub fn segment_files(directory: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(directory)
        .expect("list the log directory")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "log"))
        .collect();
    files.sort();
    files
}

pub fn all_files(directory: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(directory)
        .expect("list the log directory")
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    files.sort();
    files
}

pub fn copy_directory(from: &Path, to: &Path) {
    for path in all_files(from) {
        let name = path.file_name().expect("a file name");
        fs::copy(&path, to.join(name)).expect("copy a segment");
    }
}

pub fn file_bytes(path: &Path) -> u64 {
    fs::metadata(path).expect("segment metadata").len()
}

pub fn frame_bytes(record: &Record) -> u64 {
    wire::encode(record).len() as u64
}
