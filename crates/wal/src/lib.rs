//! The segmented write-ahead log behind `disk` durability.
//!
//! A `disk`-durability replica emits `Effect::Persist { sequence, record }` and expects its
//! driver to write the records in order and report `Input::Persisted { sequence }` once every
//! record up to `sequence` is durable; after a restart the driver replays what it reads back
//! with `vr::DurableState::replay`. [`Wal`] is that storage; [`GroupCommitter`] is the loop the
//! runtime's writer thread runs around it (one sync per batch, compaction after checkpoints).
//! Everything here is synchronous std I/O, meant for a dedicated blocking thread.
//!
//! # Format
//!
//! A record is one `wire` frame, exactly as `wire::encode_into` writes it:
//!
//! ```text
//! [version: u8][payload length: u32 LE][crc32c of payload: u32 LE][postcard payload: vr::Record]
//! ```
//!
//! and is read back with `wire::decode::<vr::Record>(bytes, record_bytes_max)`, which checks the
//! version, the length against the cap (before anything is allocated) and the checksum. The
//! reader also checks the length against the bytes left in the file before allocating the
//! frame, so a damaged length field cannot cost more memory than the file's size.
//!
//! A segment is a file of frames back to back, with no header. Its name carries its index,
//! zero-padded to 20 digits so that lexical order is index order is write order:
//!
//! - `wal-{index:020}.log`: a segment of appended records;
//! - `wal-{index:020}.compacted.log`: a segment written by a compaction; it supersedes every
//!   segment with a lower index (records appended after the compaction may follow in it);
//! - `wal-{index:020}.compacted.tmp`: a compaction in progress, never read.
//!
//! A fresh log starts at `wal-00000000000000000000.log`; each new segment takes the next index.
//! The live segments are therefore a compacted segment or segment 0, followed by consecutive
//! indexes. A gap is reported as corruption, not skipped.
//!
//! # Crash safety
//!
//! What is durable is what [`Wal::sync`] (or a compaction) returned from; the argument is that
//! a crash at any point leaves a directory that [`Wal::open`] reads back as every synced
//! record, in order, possibly followed by some unsynced ones, and nothing else.
//!
//! - **Appends** only ever extend the last segment. A crash can tear its tail: a short header,
//!   a length running past the end of the file, a checksum mismatch, an undecodable payload.
//!   Open cuts the last segment at its first damaged frame (truncate, sync) and reports the cut
//!   bytes. No synced record is lost by the cut: a synced record is followed only by frames that
//!   were written later. (The cut also removes a corrupt frame in the last segment caused by
//!   something other than a crash; the log cannot tell the two apart there.)
//! - **Rotation** syncs the full segment before creating the next one, so a segment that has a
//!   successor never ends in a torn write. Damage in a sealed segment is therefore not a crash
//!   but corruption, and open refuses with [`WalError::Corrupt`] naming the file and offset
//!   instead of silently dropping records that were acknowledged. The new segment's directory
//!   entry is made durable by the next sync's directory fsync.
//! - **Compaction** writes the fewest records that replay to the current state (what
//!   `DurableState::to_records` is meant to return; see `records.rs`) to a temporary file,
//!   syncs it, renames it to a compacted segment whose index is above every live segment, syncs
//!   the directory, and only then deletes the older segments. A crash before the rename leaves a temporary file, which open deletes:
//!   the old segments are intact. A crash after it leaves a complete compacted segment
//!   (renaming is atomic and its content was synced first), so open deletes every segment below
//!   it, finishing the compaction. Either way the records read back replay to the same state.
//! - **Failures** of a write or an fsync poison the [`Wal`]: every later call fails. After a
//!   failed fsync the kernel may have dropped the dirty pages, so retrying could report
//!   durability falsely; reopening reads what actually reached the disk.
//!
//! Limits: a sealed segment truncated exactly at a frame boundary is indistinguishable from a
//! shorter one (frames carry no record numbers), and a segment deleted from the end of the log
//! goes unnoticed.
#![forbid(unsafe_code)]

mod error;
mod group_commit;
mod segment;
mod wal;

pub use error::WalError;
pub use group_commit::GroupCommitter;
pub use wal::{Recovered, Wal, WalConfig};
