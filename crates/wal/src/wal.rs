//! The log itself: open and recover, append, sync, compact.

use crate::error::WalError;
use crate::segment::{self, FileName, Kind, Segment};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use vr::{DurableState, Record};
use wire::FRAME_HEADER_BYTES;

/// Scratch encoding buffers keep at most this much capacity between calls.
const SCRATCH_BYTES_RETAINED: usize = 1 << 20;

/// Where the log lives and how large its pieces may grow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalConfig {
    /// The log's directory, created on open if missing. The log owns every file in it whose name
    /// starts with `wal-` and has one of the log's suffixes; other files are left alone.
    pub directory: PathBuf,
    /// A segment is sealed and a new one started when the next record would take it past this
    /// many bytes. A record larger than this gets a segment of its own.
    pub segment_bytes_max: u64,
    /// The largest record payload written or read back. Checked on append (so that nothing
    /// unreadable is written) and on read before anything is allocated for a frame.
    pub record_bytes_max: usize,
}

impl WalConfig {
    pub const SEGMENT_BYTES_MAX_DEFAULT: u64 = 64 << 20;
    pub const RECORD_BYTES_MAX_DEFAULT: usize = 256 << 20;

    /// A log in `directory` with the default limits (64 MiB segments, 256 MiB records).
    pub fn new(directory: impl Into<PathBuf>) -> WalConfig {
        WalConfig {
            directory: directory.into(),
            segment_bytes_max: WalConfig::SEGMENT_BYTES_MAX_DEFAULT,
            record_bytes_max: WalConfig::RECORD_BYTES_MAX_DEFAULT,
        }
    }
}

/// What [`Wal::open`] read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovered {
    /// Every valid record, in write order; feed them to `vr::DurableState::replay`.
    pub records: Vec<Record>,
    /// Bytes of a torn or corrupt tail cut from the end of the last segment (0 after a clean
    /// shutdown).
    pub torn_bytes_cut: u64,
    /// Live segments after recovery.
    pub segments: usize,
}

/// The write-ahead log. See the crate documentation for the format and the crash-safety
/// argument.
#[derive(Debug)]
pub struct Wal {
    config: WalConfig,
    /// Live segments in index order; never empty. The last one is appended to.
    segments: Vec<Segment>,
    /// The last segment, open for writing, positioned at its end.
    file: File,
    /// Scratch: encoded frames of the records being written, and where each frame ends.
    frames: Vec<u8>,
    frame_ends: Vec<usize>,
    /// Bytes were written to `file` since its last sync.
    data_unsynced: bool,
    /// A segment was created since the directory's last sync.
    directory_unsynced: bool,
    /// A write or sync failed: what reached the disk is unknown (and after a failed fsync the
    /// kernel may have dropped the dirty pages), so no further write may build on it.
    failed: bool,
}

/// A compacted segment written under its temporary name and synced, not yet renamed.
#[derive(Debug)]
struct Staged {
    index: u64,
    bytes: u64,
    temporary: PathBuf,
    path: PathBuf,
    file: File,
}

impl Wal {
    /// Opens the log in `config.directory` (creating it if needed) and reads back every valid
    /// record in order.
    ///
    /// Before reading, it finishes whatever a crash interrupted: leftover temporary files of a
    /// compaction are deleted, and segments superseded by a complete compacted segment are
    /// deleted. A torn or corrupt tail of the last segment is cut (the file is truncated to its
    /// last valid frame and synced) and reported in [`Recovered::torn_bytes_cut`]; a damaged
    /// frame in an earlier, sealed segment, or a missing segment, is [`WalError::Corrupt`].
    pub fn open(config: WalConfig) -> Result<(Wal, Recovered), WalError> {
        let directory = config.directory.clone();
        fs::create_dir_all(&directory).map_err(|error| WalError::io(&directory, error))?;

        let mut found: Vec<(u64, Kind)> = Vec::new();
        let mut directory_changed = false;
        let listing = fs::read_dir(&directory).map_err(|error| WalError::io(&directory, error))?;
        for entry in listing {
            let entry = entry.map_err(|error| WalError::io(&directory, error))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            match segment::parse_file_name(name) {
                FileName::Segment { index, kind } => found.push((index, kind)),
                FileName::Temporary => {
                    remove_if_present(&entry.path())?;
                    directory_changed = true;
                }
                FileName::Other => {}
            }
        }
        found.sort_unstable_by_key(|&(index, _)| index);
        let path_of =
            |index: u64, kind: Kind| directory.join(segment::segment_file_name(index, kind));
        for pair in found.windows(2) {
            if pair[0].0 == pair[1].0 {
                return Err(WalError::corrupt(
                    &path_of(pair[1].0, pair[1].1),
                    0,
                    format!("two segments share index {}", pair[1].0),
                ));
            }
        }
        // A compacted segment exists under its final name only once it is complete and synced:
        // it holds the whole state of every segment before it, which a crash may have left
        // behind. Finish the compaction.
        if let Some(base) = found.iter().rposition(|&(_, kind)| kind == Kind::Compacted) {
            for (index, kind) in found.drain(..base) {
                remove_if_present(&path_of(index, kind))?;
                directory_changed = true;
            }
        }
        if directory_changed {
            sync_directory(&directory)?;
        }
        if let Some(&(index, kind)) = found.first() {
            if kind == Kind::Appended && index != 0 {
                return Err(WalError::corrupt(
                    &path_of(index, kind),
                    0,
                    "the segments before this one are missing (a log starts at segment 0 or at a compacted segment)",
                ));
            }
        }
        for pair in found.windows(2) {
            if pair[1].0 != pair[0].0 + 1 {
                return Err(WalError::corrupt(
                    &path_of(pair[1].0, pair[1].1),
                    0,
                    format!("segment {} is missing", pair[0].0 + 1),
                ));
            }
        }

        let mut records = Vec::new();
        let mut segments = Vec::with_capacity(found.len().max(1));
        let mut torn_bytes_cut = 0;
        let mut last_file = None;
        for (position, &(index, kind)) in found.iter().enumerate() {
            let path = path_of(index, kind);
            let last = position + 1 == found.len();
            let file = OpenOptions::new()
                .read(true)
                .write(last)
                .open(&path)
                .map_err(|error| WalError::io(&path, error))?;
            let scan = segment::scan(&path, &file, config.record_bytes_max)?;
            if let Some(damage) = scan.damage {
                if !last {
                    return Err(WalError::corrupt(&path, damage.offset, damage.reason));
                }
                // Only the last segment can end in a torn write: every earlier one was synced
                // whole before the next was created.
                file.set_len(scan.valid_bytes)
                    .and_then(|()| file.sync_all())
                    .map_err(|error| WalError::io(&path, error))?;
                torn_bytes_cut = scan.file_bytes - scan.valid_bytes;
            }
            records.extend(scan.records);
            segments.push(Segment {
                index,
                kind,
                bytes: scan.valid_bytes,
            });
            if last {
                last_file = Some(file);
            }
        }
        let file = match last_file {
            Some(file) => file,
            None => {
                let path = path_of(0, Kind::Appended);
                let file = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .map_err(|error| WalError::io(&path, error))?;
                sync_directory(&directory)?;
                segments.push(Segment {
                    index: 0,
                    kind: Kind::Appended,
                    bytes: 0,
                });
                file
            }
        };
        let recovered = Recovered {
            records,
            torn_bytes_cut,
            segments: segments.len(),
        };
        let mut wal = Wal {
            config,
            segments,
            file,
            frames: Vec::new(),
            frame_ends: Vec::new(),
            data_unsynced: false,
            directory_unsynced: false,
            failed: false,
        };
        // Scanning read the last segment through a buffer; appends start at its valid end.
        let end = wal.current().bytes;
        if let Err(error) = wal.file.seek(SeekFrom::Start(end)) {
            return Err(WalError::io(&wal.current_path(), error));
        }
        Ok((wal, recovered))
    }

    /// Appends `records`, in order, to the operating system's buffers: nothing is durable until
    /// [`Wal::sync`]. Every record is encoded and checked against `record_bytes_max` before any
    /// byte is written, so a too-large record fails the whole call cleanly.
    ///
    /// When the next record would take the current segment past `segment_bytes_max`, the
    /// segment is sealed (synced: an earlier segment never ends in a torn write) and a new one
    /// is created.
    pub fn append(&mut self, records: &[Record]) -> Result<(), WalError> {
        self.usable()?;
        if records.is_empty() {
            return Ok(());
        }
        let mut frames = std::mem::take(&mut self.frames);
        let mut frame_ends = std::mem::take(&mut self.frame_ends);
        let result = encode_frames(
            records,
            self.config.record_bytes_max,
            &mut frames,
            &mut frame_ends,
        )
        .and_then(|()| self.write_frames(&frames, &frame_ends));
        self.restore_scratch(frames, frame_ends);
        result
    }

    /// Makes every record appended so far durable: syncs the current segment's data, and the
    /// directory if a segment was created since its last sync.
    pub fn sync(&mut self) -> Result<(), WalError> {
        self.usable()?;
        if self.data_unsynced {
            if let Err(error) = self.file.sync_data() {
                return Err(self.fail(&self.current_path(), error));
            }
            self.data_unsynced = false;
        }
        if self.directory_unsynced {
            if let Err(error) = sync_directory(&self.config.directory) {
                self.failed = true;
                return Err(error);
            }
            self.directory_unsynced = false;
        }
        Ok(())
    }

    /// Replaces the whole log with one segment holding exactly the fewest records that replay
    /// to `state` (what `vr::DurableState::to_records` is meant to return), then deletes the
    /// segments it supersedes. Call it after a checkpoint record is synced, with the state that
    /// replaying every appended record gives.
    ///
    /// The new segment is written under a temporary name and synced, renamed to its final name
    /// (an index above every live segment) and the directory synced; only then are the older
    /// segments deleted. A crash before the rename leaves a temporary file that
    /// [`Wal::open`] deletes; a crash after it leaves a complete compacted segment that
    /// supersedes the older ones. Appends continue in the compacted segment.
    pub fn compact(&mut self, state: &DurableState) -> Result<(), WalError> {
        self.usable()?;
        let records = state.to_records();
        let staged = self.stage_compaction(&records)?;
        self.publish_compaction(&staged)?;
        self.retire_superseded(staged)
    }

    /// Live segment files.
    pub fn segments(&self) -> usize {
        self.segments.len()
    }

    /// Bytes of valid frames in the live segments.
    pub fn bytes(&self) -> u64 {
        self.segments.iter().map(|segment| segment.bytes).sum()
    }

    /// Compaction, step 1: the new segment, complete and synced under its temporary name.
    /// Failing here leaves the log as it was.
    fn stage_compaction(&mut self, records: &[Record]) -> Result<Staged, WalError> {
        let mut frames = std::mem::take(&mut self.frames);
        let mut frame_ends = std::mem::take(&mut self.frame_ends);
        let result = encode_frames(
            records,
            self.config.record_bytes_max,
            &mut frames,
            &mut frame_ends,
        )
        .and_then(|()| {
            let index = self.next_index()?;
            let temporary = self
                .config
                .directory
                .join(segment::temporary_file_name(index));
            let path = self.segment_path(index, Kind::Compacted);
            let written = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&temporary)
                .and_then(|mut file| {
                    file.write_all(&frames)?;
                    file.sync_all()?;
                    Ok(file)
                });
            match written {
                Ok(file) => Ok(Staged {
                    index,
                    bytes: frames.len() as u64,
                    temporary,
                    path,
                    file,
                }),
                Err(error) => {
                    // Best effort: open deletes a leftover temporary file anyway.
                    let _ = fs::remove_file(&temporary);
                    Err(WalError::io(&temporary, error))
                }
            }
        });
        self.restore_scratch(frames, frame_ends);
        result
    }

    /// Compaction, step 2: the rename that makes the new segment supersede the older ones, and
    /// the directory sync that makes the rename durable.
    fn publish_compaction(&mut self, staged: &Staged) -> Result<(), WalError> {
        if let Err(error) = fs::rename(&staged.temporary, &staged.path) {
            // A failed rename changed nothing.
            let _ = fs::remove_file(&staged.temporary);
            return Err(WalError::io(&staged.path, error));
        }
        if let Err(error) = sync_directory(&self.config.directory) {
            // Whether the rename is durable is unknown: appending to the older segments could
            // write records that the compacted segment later hides. Stop here.
            self.failed = true;
            return Err(error);
        }
        Ok(())
    }

    /// Compaction, step 3: continue in the new segment and delete the ones it supersedes. A
    /// failure here leaves superseded files that the next open deletes.
    fn retire_superseded(&mut self, staged: Staged) -> Result<(), WalError> {
        let superseded = std::mem::replace(
            &mut self.segments,
            vec![Segment {
                index: staged.index,
                kind: Kind::Compacted,
                bytes: staged.bytes,
            }],
        );
        self.file = staged.file;
        // The compacted segment holds everything appended so far, synced, and the directory
        // sync after the rename covered every earlier segment creation.
        self.data_unsynced = false;
        self.directory_unsynced = false;
        let mut first_error = None;
        for segment in superseded {
            let path = self.segment_path(segment.index, segment.kind);
            if let Err(error) = remove_if_present(&path) {
                first_error.get_or_insert(error);
            }
        }
        if let Err(error) = sync_directory(&self.config.directory) {
            first_error.get_or_insert(error);
        }
        first_error.map_or(Ok(()), Err)
    }

    fn write_frames(&mut self, frames: &[u8], frame_ends: &[usize]) -> Result<(), WalError> {
        let mut chunk_start = 0;
        let mut frame_start = 0;
        for &frame_end in frame_ends {
            let current_bytes = self.current().bytes + (frame_start - chunk_start) as u64;
            let frame_bytes = (frame_end - frame_start) as u64;
            if current_bytes > 0
                && current_bytes.saturating_add(frame_bytes) > self.config.segment_bytes_max
            {
                self.write_to_current(&frames[chunk_start..frame_start])?;
                self.rotate()?;
                chunk_start = frame_start;
            }
            frame_start = frame_end;
        }
        self.write_to_current(&frames[chunk_start..])
    }

    fn write_to_current(&mut self, bytes: &[u8]) -> Result<(), WalError> {
        if bytes.is_empty() {
            return Ok(());
        }
        if let Err(error) = self.file.write_all(bytes) {
            return Err(self.fail(&self.current_path(), error));
        }
        self.data_unsynced = true;
        if let Some(current) = self.segments.last_mut() {
            current.bytes += bytes.len() as u64;
        }
        Ok(())
    }

    /// Seals the current segment (syncs it) and starts the next one.
    fn rotate(&mut self) -> Result<(), WalError> {
        if let Err(error) = self.file.sync_data() {
            return Err(self.fail(&self.current_path(), error));
        }
        self.data_unsynced = false;
        let index = self.next_index()?;
        let path = self.segment_path(index, Kind::Appended);
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(file) => self.file = file,
            Err(error) => return Err(self.fail(&path, error)),
        }
        self.segments.push(Segment {
            index,
            kind: Kind::Appended,
            bytes: 0,
        });
        self.directory_unsynced = true;
        Ok(())
    }

    fn current(&self) -> Segment {
        // `segments` is never empty (open creates segment 0 in an empty directory).
        self.segments.last().copied().unwrap_or(Segment {
            index: 0,
            kind: Kind::Appended,
            bytes: 0,
        })
    }

    fn current_path(&self) -> PathBuf {
        let current = self.current();
        self.segment_path(current.index, current.kind)
    }

    fn segment_path(&self, index: u64, kind: Kind) -> PathBuf {
        self.config
            .directory
            .join(segment::segment_file_name(index, kind))
    }

    fn next_index(&self) -> Result<u64, WalError> {
        let current = self.current();
        current.index.checked_add(1).ok_or_else(|| {
            WalError::corrupt(&self.current_path(), 0, "no segment index follows this one")
        })
    }

    fn usable(&self) -> Result<(), WalError> {
        if self.failed {
            return Err(WalError::io(
                &self.config.directory,
                io::Error::other("an earlier write or sync failed; reopen the log"),
            ));
        }
        Ok(())
    }

    fn fail(&mut self, path: &Path, error: io::Error) -> WalError {
        self.failed = true;
        WalError::io(path, error)
    }

    fn restore_scratch(&mut self, mut frames: Vec<u8>, mut frame_ends: Vec<usize>) {
        frames.clear();
        frames.shrink_to(SCRATCH_BYTES_RETAINED);
        frame_ends.clear();
        frame_ends.shrink_to(SCRATCH_BYTES_RETAINED / FRAME_HEADER_BYTES);
        self.frames = frames;
        self.frame_ends = frame_ends;
    }
}

/// Encodes each record as one frame into `frames` (cleared first), noting where each ends.
fn encode_frames(
    records: &[Record],
    record_bytes_max: usize,
    frames: &mut Vec<u8>,
    frame_ends: &mut Vec<usize>,
) -> Result<(), WalError> {
    frames.clear();
    frame_ends.clear();
    for record in records {
        let start = frames.len();
        wire::encode_into(record, frames);
        let bytes = frames.len() - start - FRAME_HEADER_BYTES;
        if bytes > record_bytes_max {
            frames.clear();
            frame_ends.clear();
            return Err(WalError::RecordTooLarge {
                bytes,
                bytes_max: record_bytes_max,
            });
        }
        frame_ends.push(frames.len());
    }
    Ok(())
}

fn remove_if_present(path: &Path) -> Result<(), WalError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(WalError::io(path, error)),
    }
}

/// Makes the directory's entries (created, renamed, deleted files) durable. Only Unix lets a
/// directory be opened and synced; elsewhere this does nothing.
fn sync_directory(directory: &Path) -> Result<(), WalError> {
    if cfg!(unix) {
        File::open(directory)
            .and_then(|handle| handle.sync_all())
            .map_err(|error| WalError::io(directory, error))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use vr::{Checkpoint, Entry, Op, View};

    fn history() -> Vec<Record> {
        let mut records: Vec<Record> = (1..=30)
            .map(|op| {
                Record::Entry(Entry {
                    view: View(0),
                    op: Op(op),
                    requests: vec![],
                })
            })
            .collect();
        records.push(Record::Checkpoint(Checkpoint {
            op: Op(25),
            state: b"the state through op 25".to_vec(),
            client_table: vec![],
            executed_digest: 0,
        }));
        records.push(Record::View { view: View(1) });
        records
    }

    fn config(directory: &Path) -> WalConfig {
        WalConfig {
            segment_bytes_max: 128,
            ..WalConfig::new(directory)
        }
    }

    fn file_names(directory: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(directory)
            .expect("list the directory")
            .map(|entry| {
                entry
                    .expect("a directory entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        names
    }

    /// A log holding `history()` over several segments, and the state it replays to.
    fn written_log(directory: &Path) -> (Wal, DurableState) {
        let (mut wal, _) = Wal::open(config(directory)).expect("open");
        let records = history();
        wal.append(&records).expect("append");
        wal.sync().expect("sync");
        assert!(wal.segments() >= 3, "{} segments", wal.segments());
        (wal, DurableState::replay(&records))
    }

    #[test]
    fn a_crash_between_writing_the_compacted_temporary_file_and_renaming_it_reopens_to_the_pre_compaction_records(
    ) {
        let directory = tempfile::tempdir().expect("temporary directory");
        let (mut wal, state) = written_log(directory.path());
        let segments_before = file_names(directory.path());
        let staged = wal.stage_compaction(&state.to_records()).expect("stage");
        // The crash: the temporary file is complete and synced, but never renamed.
        drop(staged);
        drop(wal);
        let temporary = segment::temporary_file_name(segments_before.len() as u64);
        assert!(file_names(directory.path()).contains(&temporary));

        let (wal, recovered) = Wal::open(config(directory.path())).expect("reopen");
        assert_eq!(recovered.records, history());
        assert_eq!(recovered.segments, segments_before.len());
        assert_eq!(wal.segments(), segments_before.len());
        assert_eq!(
            file_names(directory.path()),
            segments_before,
            "the leftover temporary file is deleted"
        );
    }

    #[test]
    fn a_crash_after_renaming_the_compacted_segment_reopens_to_it_and_deletes_the_superseded_segments(
    ) {
        let directory = tempfile::tempdir().expect("temporary directory");
        let (mut wal, state) = written_log(directory.path());
        let segments_before = file_names(directory.path()).len();
        let staged = wal.stage_compaction(&state.to_records()).expect("stage");
        wal.publish_compaction(&staged).expect("publish");
        // The crash: renamed and durable, but the older segments are still there.
        drop(staged);
        drop(wal);
        assert_eq!(file_names(directory.path()).len(), segments_before + 1);

        let (mut wal, recovered) = Wal::open(config(directory.path())).expect("reopen");
        assert_eq!(recovered.records, state.to_records());
        assert_eq!(DurableState::replay(&recovered.records), state);
        assert_eq!(recovered.segments, 1);
        assert_eq!(
            file_names(directory.path()),
            vec![segment::segment_file_name(
                segments_before as u64,
                Kind::Compacted
            )]
        );

        // The finished log appends and rotates as usual.
        let promise = Record::View { view: View(2) };
        wal.append(std::slice::from_ref(&promise)).expect("append");
        wal.sync().expect("sync");
        drop(wal);
        let (_, recovered) = Wal::open(config(directory.path())).expect("reopen again");
        assert_eq!(recovered.records.last(), Some(&promise));
    }

    #[test]
    fn a_compaction_that_fails_before_the_rename_leaves_the_log_usable() {
        let directory = tempfile::tempdir().expect("temporary directory");
        let (mut wal, state) = written_log(directory.path());
        // A directory squatting on the temporary name makes staging fail.
        let temporary = directory
            .path()
            .join(segment::temporary_file_name(wal.current().index + 1));
        fs::create_dir(&temporary).expect("squat on the temporary name");
        assert!(matches!(wal.compact(&state), Err(WalError::Io { .. })));
        fs::remove_dir(&temporary).expect("stop squatting");

        let promise = Record::View { view: View(3) };
        wal.append(std::slice::from_ref(&promise))
            .expect("append after a failed compaction");
        wal.sync().expect("sync");
        let mut records = history();
        records.push(promise);
        let state = DurableState::replay(&records);
        wal.compact(&state).expect("compact on the second try");
        assert_eq!(wal.segments(), 1);
        drop(wal);
        let (_, recovered) = Wal::open(config(directory.path())).expect("reopen");
        assert_eq!(DurableState::replay(&recovered.records), state);
    }
}
