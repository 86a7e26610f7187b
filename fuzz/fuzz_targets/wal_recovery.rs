//! Write-ahead log recovery from arbitrary segment bytes: `wal::Wal::open` on a directory of
//! one to three segments holding the input, then `vr::DurableState::replay` of what it read.
//!
//! Input: a flags byte (bit 0: the first segment is a compacted one), then the segments'
//! bytes separated by `tessera_fuzz::SEPARATOR`. Properties: no panic; a damaged sealed segment
//! is refused as corruption; otherwise the torn tail is cut, a second open reads the same
//! records with nothing to cut, and a record appended after recovery is read back after them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::{Path, PathBuf};
use wal::{Wal, WalConfig, WalError};

const SEGMENTS_MAX: usize = 3;

fn directory() -> PathBuf {
    let base = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    base.join(format!("tessera-fuzz-wal-{}", std::process::id()))
}

fn config(directory: &Path) -> WalConfig {
    WalConfig {
        directory: directory.to_path_buf(),
        segment_bytes_max: 1 << 20,
        record_bytes_max: 1 << 16,
    }
}

fuzz_target!(|bytes: &[u8]| {
    let Some((&flags, rest)) = bytes.split_first() else {
        return;
    };
    let directory = directory();
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).expect("a scratch directory");
    let segments: Vec<&[u8]> = tessera_fuzz::pieces(rest)
        .into_iter()
        .take(SEGMENTS_MAX)
        .collect();
    let compacted = flags & 1 == 1;
    let first_index = if compacted { 5 } else { 0 };
    for (at, segment) in segments.iter().enumerate() {
        let index = first_index + at as u64;
        let suffix = if at == 0 && compacted {
            ".compacted.log"
        } else {
            ".log"
        };
        let path = directory.join(format!("wal-{index:020}{suffix}"));
        std::fs::write(&path, segment).expect("a segment written");
    }
    let last_bytes = segments.last().map_or(0, |segment| segment.len() as u64);

    let (mut wal, recovered) = match Wal::open(config(&directory)) {
        Ok(opened) => opened,
        Err(WalError::Corrupt { .. }) => {
            assert!(segments.len() > 1, "only a sealed segment can be corrupt");
            let _ = std::fs::remove_dir_all(&directory);
            return;
        }
        Err(error) => panic!("recovery failed with {error}"),
    };
    assert!(recovered.torn_bytes_cut <= last_bytes);
    let _ = vr::DurableState::replay(&recovered.records);
    let appended = vr::Record::View {
        view: wire::View(7),
    };
    wal.append(std::slice::from_ref(&appended))
        .expect("an append after recovery");
    wal.sync().expect("a sync after recovery");
    drop(wal);

    let (_, again) = Wal::open(config(&directory)).expect("a recovered log opens again");
    assert_eq!(again.torn_bytes_cut, 0, "the tail was cut the first time");
    assert_eq!(again.records.len(), recovered.records.len() + 1);
    assert_eq!(
        again.records[..recovered.records.len()],
        recovered.records[..]
    );
    assert_eq!(again.records.last(), Some(&appended));
    let _ = std::fs::remove_dir_all(&directory);
});
