//! Write-ahead logs of a cluster process (`durability = "disk"`): one log per replica the
//! process hosts (a router's replica of the router group, a storage process's replica of each
//! partition group), all written by one thread. A replica's `Effect::Persist` records go to
//! its log; the thread takes whatever is queued, appends each log's records, syncs each log
//! once (group commit) and reports the highest sequence now durable per replica, which the
//! process's task feeds back as `Input::Persisted`. A failed write stops the process: an
//! acknowledgement without durability would break the protocol's promise.
//!
//! The protocol decides what is persisted and when a promise may be made (`vr`); this module
//! only moves records to files and completions back.

use crate::log;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tokio::sync::mpsc;
use vr::{DurableState, Record};

/// One replica's log, by the process's name for the replica (a partition's destination id;
/// 0 for a router's replica).
pub type LogId = u64;

enum Job {
    Register {
        log: LogId,
        committer: Box<wal::GroupCommitter>,
    },
    Persist {
        log: LogId,
        sequence: u64,
        record: Record,
    },
    /// The replica is gone for good: its log is closed and its directory deleted.
    Remove { log: LogId, directory: PathBuf },
}

/// The process's log writer: a thread, and where its completions go.
#[derive(Clone)]
pub struct WalExecutor {
    jobs: std::sync::mpsc::Sender<Job>,
}

/// The largest record a replica's log takes: what one frame holds (4 GiB, the frame's u32
/// length). Not the link's 64 MiB: a replica's `Record::Checkpoint` holds its whole state, and
/// a `Record::Log` the log a view change installed, both of which can be larger than a frame
/// now that VR messages travel in parts (`docs/internals/vr.md`, "Messages larger than a
/// frame"); a record over the cap stops the process (`flush`). Reading back allocates a
/// record only after checking it against the bytes left in its file.
pub const RECORD_BYTES_MAX: usize = u32::MAX as usize;

/// Opens (or creates) the log in `directory` and replays it: the replica's durable state, and
/// the committer that appends to it.
pub fn open(
    directory: &Path,
    record_bytes_max: usize,
) -> Result<(DurableState, wal::GroupCommitter), String> {
    let config = wal::WalConfig {
        directory: directory.to_path_buf(),
        segment_bytes_max: 64 << 20,
        record_bytes_max,
    };
    let (wal, recovered) =
        wal::Wal::open(config).map_err(|error| format!("{}: {error}", directory.display()))?;
    if recovered.torn_bytes_cut > 0 {
        log::warn(format_args!(
            "{}: cut a torn write-ahead log tail of {} bytes",
            directory.display(),
            recovered.torn_bytes_cut
        ));
    }
    let durable = DurableState::replay(&recovered.records);
    let committer = wal::GroupCommitter::new(wal, &recovered.records);
    Ok((durable, committer))
}

impl WalExecutor {
    /// Starts the writer thread; `(log, sequence)` completions go to `completions`.
    pub fn start(completions: mpsc::UnboundedSender<(LogId, u64)>) -> Result<WalExecutor, String> {
        let (jobs, receiver) = std::sync::mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("wal".to_string())
            .spawn(move || write(receiver, completions))
            .map_err(|error| format!("cannot start the WAL thread: {error}"))?;
        Ok(WalExecutor { jobs })
    }

    pub fn register(&self, log: LogId, committer: wal::GroupCommitter) {
        let committer = Box::new(committer);
        let _ = self.jobs.send(Job::Register { log, committer });
    }

    pub fn persist(&self, log: LogId, sequence: u64, record: Record) {
        let _ = self.jobs.send(Job::Persist {
            log,
            sequence,
            record,
        });
    }

    pub fn remove(&self, log: LogId, directory: PathBuf) {
        let _ = self.jobs.send(Job::Remove { log, directory });
    }
}

fn write(
    receiver: std::sync::mpsc::Receiver<Job>,
    completions: mpsc::UnboundedSender<(LogId, u64)>,
) {
    let mut committers: BTreeMap<LogId, Box<wal::GroupCommitter>> = BTreeMap::new();
    let mut batches: BTreeMap<LogId, Vec<(u64, Record)>> = BTreeMap::new();
    while let Ok(first) = receiver.recv() {
        let mut next = Some(first);
        while let Some(job) = next.take().or_else(|| receiver.try_recv().ok()) {
            match job {
                Job::Persist {
                    log,
                    sequence,
                    record,
                } => batches.entry(log).or_default().push((sequence, record)),
                Job::Register { log, committer } => {
                    flush(log, &mut committers, &mut batches, &completions);
                    committers.insert(log, committer);
                }
                Job::Remove { log, directory } => {
                    flush(log, &mut committers, &mut batches, &completions);
                    committers.remove(&log);
                    if let Err(error) = std::fs::remove_dir_all(&directory) {
                        log::warn(format_args!(
                            "cannot delete {}: {error}",
                            directory.display()
                        ));
                    }
                }
            }
        }
        let logs: Vec<LogId> = batches.keys().copied().collect();
        for log in logs {
            flush(log, &mut committers, &mut batches, &completions);
        }
    }
}

/// Writes and syncs `log`'s queued records, and reports them durable.
fn flush(
    log: LogId,
    committers: &mut BTreeMap<LogId, Box<wal::GroupCommitter>>,
    batches: &mut BTreeMap<LogId, Vec<(u64, Record)>>,
    completions: &mpsc::UnboundedSender<(LogId, u64)>,
) {
    let Some(batch) = batches.remove(&log) else {
        return;
    };
    let Some(committer) = committers.get_mut(&log) else {
        // Records of a log never registered or already removed: nobody waits for them.
        log::warn(format_args!(
            "{} records for write-ahead log {log:#x}, which is not open: dropped",
            batch.len()
        ));
        return;
    };
    match committer.write_batch(&batch) {
        Ok(sequence) => {
            let _ = completions.send((log, sequence));
        }
        Err(error) => {
            log::error(format_args!(
                "write-ahead log {log:#x} failed, stopping: {error}"
            ));
            std::process::exit(70);
        }
    }
}
