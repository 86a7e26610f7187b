//! Segment file names, and reading one segment's frames back.

use crate::error::WalError;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;
use vr::Record;
use wire::{DecodeError, FRAME_HEADER_BYTES};

const PREFIX: &str = "wal-";
const INDEX_DIGITS: usize = 20;
const APPENDED_SUFFIX: &str = ".log";
const COMPACTED_SUFFIX: &str = ".compacted.log";
const TEMPORARY_SUFFIX: &str = ".compacted.tmp";

/// How a segment came to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Records appended one batch after another (`wal-N.log`).
    Appended,
    /// Written whole by a compaction (`wal-N.compacted.log`): it supersedes every segment with a
    /// lower index. Records appended after the compaction may follow its compacted records.
    Compacted,
}

/// A live segment: its place in the log and how many valid bytes it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    pub(crate) index: u64,
    pub(crate) kind: Kind,
    pub(crate) bytes: u64,
}

/// What a file in the log's directory is, judged by its name alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FileName {
    Segment {
        index: u64,
        kind: Kind,
    },
    /// A compaction's output that was never renamed into place.
    Temporary,
    /// Not ours: left alone.
    Other,
}

pub(crate) fn segment_file_name(index: u64, kind: Kind) -> String {
    let suffix = match kind {
        Kind::Appended => APPENDED_SUFFIX,
        Kind::Compacted => COMPACTED_SUFFIX,
    };
    format!("{PREFIX}{index:020}{suffix}")
}

pub(crate) fn temporary_file_name(index: u64) -> String {
    format!("{PREFIX}{index:020}{TEMPORARY_SUFFIX}")
}

pub(crate) fn parse_file_name(name: &str) -> FileName {
    let Some(rest) = name.strip_prefix(PREFIX) else {
        return FileName::Other;
    };
    if rest.len() < INDEX_DIGITS || !rest.is_char_boundary(INDEX_DIGITS) {
        return FileName::Other;
    }
    let (digits, suffix) = rest.split_at(INDEX_DIGITS);
    if !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return FileName::Other;
    }
    // Twenty digits can exceed u64::MAX: such a name is not one we wrote.
    let Ok(index) = digits.parse::<u64>() else {
        return FileName::Other;
    };
    match suffix {
        APPENDED_SUFFIX => FileName::Segment {
            index,
            kind: Kind::Appended,
        },
        COMPACTED_SUFFIX => FileName::Segment {
            index,
            kind: Kind::Compacted,
        },
        TEMPORARY_SUFFIX => FileName::Temporary,
        _ => FileName::Other,
    }
}

/// The first damaged frame of a segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Damage {
    pub(crate) offset: u64,
    pub(crate) reason: String,
}

/// A segment read front to back, up to its end or its first damaged frame.
#[derive(Debug)]
pub(crate) struct Scan {
    pub(crate) records: Vec<Record>,
    /// Bytes of whole, valid frames from the start of the file.
    pub(crate) valid_bytes: u64,
    /// The file's length when it was read.
    pub(crate) file_bytes: u64,
    pub(crate) damage: Option<Damage>,
}

/// Reads every valid frame of `file` from its start. A frame's length is checked against
/// `record_bytes_max` and against the bytes left in the file before its payload is allocated,
/// so a damaged length field cannot make the reader allocate more than the file holds.
pub(crate) fn scan(path: &Path, file: &File, record_bytes_max: usize) -> Result<Scan, WalError> {
    let file_bytes = file
        .metadata()
        .map_err(|error| WalError::io(path, error))?
        .len();
    let mut reader = BufReader::new(file);
    let mut scan = Scan {
        records: Vec::new(),
        valid_bytes: 0,
        file_bytes,
        damage: None,
    };
    let header_bytes = FRAME_HEADER_BYTES as u64;
    while scan.valid_bytes < file_bytes {
        let offset = scan.valid_bytes;
        let remaining = file_bytes - offset;
        let damaged = |reason: String| Some(Damage { offset, reason });
        if remaining < header_bytes {
            scan.damage = damaged(format!(
                "short frame header: {remaining} of {FRAME_HEADER_BYTES} bytes"
            ));
            break;
        }
        let mut header = [0_u8; FRAME_HEADER_BYTES];
        reader
            .read_exact(&mut header)
            .map_err(|error| WalError::io(path, error))?;
        // The header alone lets the codec check the version and the length cap; a valid header
        // then asks for the whole frame.
        let frame_bytes = match wire::decode::<Record>(&header, record_bytes_max) {
            Err(DecodeError::Incomplete {
                needed: Some(frame_bytes),
            }) => frame_bytes,
            Ok((record, consumed)) => {
                // A frame with an empty payload (never written by us, but not invalid for the
                // codec if the record type ever allowed it).
                scan.records.push(record);
                scan.valid_bytes += consumed as u64;
                continue;
            }
            Err(error) => {
                scan.damage = damaged(error.to_string());
                break;
            }
        };
        if frame_bytes as u64 > remaining {
            scan.damage = damaged(format!(
                "frame of {frame_bytes} bytes runs past the end of the segment ({remaining} bytes left)"
            ));
            break;
        }
        let mut frame = vec![0_u8; frame_bytes];
        frame[..FRAME_HEADER_BYTES].copy_from_slice(&header);
        reader
            .read_exact(&mut frame[FRAME_HEADER_BYTES..])
            .map_err(|error| WalError::io(path, error))?;
        match wire::decode::<Record>(&frame, record_bytes_max) {
            Ok((record, _)) => {
                scan.records.push(record);
                scan.valid_bytes += frame_bytes as u64;
            }
            Err(error) => {
                scan.damage = damaged(error.to_string());
                break;
            }
        }
    }
    Ok(scan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_names_sort_in_index_order_and_parse_back() {
        let names = [
            segment_file_name(9, Kind::Appended),
            segment_file_name(10, Kind::Compacted),
            segment_file_name(11, Kind::Appended),
        ];
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(sorted, names);
        assert_eq!(names[0], "wal-00000000000000000009.log");
        assert_eq!(
            parse_file_name(&names[1]),
            FileName::Segment {
                index: 10,
                kind: Kind::Compacted
            }
        );
        assert_eq!(
            parse_file_name(&temporary_file_name(12)),
            FileName::Temporary
        );
    }

    #[test]
    fn foreign_and_malformed_names_are_left_alone() {
        for name in [
            "notes.txt",
            "wal-.log",
            "wal-123.log",
            "wal-0000000000000000000x.log",
            "wal-99999999999999999999.log",
            "wal-00000000000000000001.log.bak",
            "wal-00000000000000000001é.log",
            "wal-0000000000000000000é.log",
        ] {
            assert_eq!(parse_file_name(name), FileName::Other, "{name}");
        }
    }
}
