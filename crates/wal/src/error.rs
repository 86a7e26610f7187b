//! What can go wrong with the log.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Why a log operation failed.
#[derive(Debug)]
pub enum WalError {
    /// The operating system refused an operation on `path` (the directory, a segment, or a
    /// temporary file). After a failed write or sync the [`Wal`](crate::Wal) refuses every
    /// further write: reopen it to learn what reached the disk.
    Io { path: PathBuf, source: io::Error },
    /// A sealed segment (not the last one) holds a damaged frame at `offset`, or the set of
    /// segment files is inconsistent (a missing segment). The log cannot tell which records
    /// were lost, so it refuses to guess.
    Corrupt {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
    /// A record's encoded payload exceeds `WalConfig::record_bytes_max`: it would be written
    /// but could never be read back, so nothing is written.
    RecordTooLarge { bytes: usize, bytes_max: usize },
}

impl WalError {
    pub(crate) fn io(path: &Path, source: io::Error) -> WalError {
        WalError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    pub(crate) fn corrupt(path: &Path, offset: u64, reason: impl Into<String>) -> WalError {
        WalError::Corrupt {
            path: path.to_path_buf(),
            offset,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for WalError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WalError::Io { path, source } => {
                write!(formatter, "i/o error on {}: {source}", path.display())
            }
            WalError::Corrupt {
                path,
                offset,
                reason,
            } => write!(
                formatter,
                "corrupt write-ahead log segment {} at byte {offset}: {reason}",
                path.display()
            ),
            WalError::RecordTooLarge { bytes, bytes_max } => write!(
                formatter,
                "record of {bytes} bytes exceeds the limit of {bytes_max} bytes"
            ),
        }
    }
}

impl std::error::Error for WalError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WalError::Io { source, .. } => Some(source),
            WalError::Corrupt { .. } | WalError::RecordTooLarge { .. } => None,
        }
    }
}
