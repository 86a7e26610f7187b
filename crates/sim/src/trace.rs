//! The run's trace: a hash of every event (to prove determinism) and, when enabled, the last
//! lines of a readable transcript (printed for a failing seed).

use std::collections::VecDeque;
use stdx::Fnv64;
use wire::Message;

pub struct Trace {
    hash: Fnv64,
    lines: Option<VecDeque<String>>,
    lines_max: usize,
    /// Print every line as it happens (for runs that panic before they can report).
    pub live: bool,
}

impl Trace {
    pub fn new(lines_max: usize) -> Trace {
        let lines = (lines_max > 0).then(VecDeque::new);
        let live = lines_max == usize::MAX;
        let lines = if live { None } else { lines };
        Trace {
            hash: Fnv64::default(),
            lines,
            lines_max,
            live,
        }
    }

    pub fn hash(&mut self, words: &[u64]) {
        for word in words {
            self.hash.write_u64(*word);
        }
    }

    pub fn hash_bytes(&mut self, bytes: &[u8]) {
        self.hash.write(bytes);
    }

    pub fn line(&mut self, line: impl FnOnce() -> String) {
        if self.live {
            println!("{}", line());
            return;
        }
        if let Some(lines) = &mut self.lines {
            if lines.len() == self.lines_max {
                lines.pop_front();
            }
            lines.push_back(line());
        }
    }

    pub fn digest(&self) -> u64 {
        self.hash.finish()
    }

    pub fn lines(&self) -> Vec<String> {
        self.lines.iter().flatten().cloned().collect()
    }
}

/// A one-line summary of a message for the transcript.
pub fn summarize(message: &Message) -> String {
    match message {
        Message::Request(request) => format!("request {} {} {:?}", request.client, request.request, request.kind),
        Message::Reply(reply) => format!("reply {} {} {}", reply.view, reply.client, reply.request),
        Message::NotPrimary { view, client, request } => format!("not_primary {view} {client} {request}"),
        Message::Prepare { view, commit, entry } => {
            format!("prepare {view} {} (entry {}, {} requests) commit {commit}", entry.op, entry.view, entry.requests.len())
        }
        Message::PrepareOk { view, op, replica } => format!("prepare_ok {view} {op} from {replica}"),
        Message::Commit { view, commit } => format!("commit {view} {commit}"),
        Message::StartViewChange { view, replica } => format!("start_view_change {view} from {replica}"),
        Message::DoViewChange { view, log_view, op, commit, checkpoint_op, replica, log, durability_log } => format!(
            "do_view_change {view} log_view {log_view} {op} commit {commit} checkpoint {checkpoint_op} from {replica} ({} entries, {} durable)",
            log.len(),
            durability_log.len()
        ),
        Message::StartView { view, op, commit, checkpoint_op, log } => {
            format!("start_view {view} {op} commit {commit} checkpoint {checkpoint_op} ({} entries)", log.len())
        }
        Message::GetState { view, op, replica } => format!("get_state {view} after {op} from {replica}"),
        Message::NewState { view, op, commit, checkpoint, log, replica, durability } => format!(
            "new_state {view} {op} commit {commit} checkpoint {:?} ({} entries, durable {:?}) from {replica}",
            checkpoint.as_ref().map(|checkpoint| checkpoint.op.0),
            log.len(),
            durability.as_ref().map(|durability| durability.entries.len())
        ),
        Message::Recovery { replica, nonce } => format!("recovery from {replica} {nonce}"),
        Message::RecoveryResponse { view, nonce, replica, primary } => {
            format!("recovery_response {view} {nonce} from {replica} primary={}", primary.is_some())
        }
        Message::ReadProbe { view, round } => format!("read_probe {view} round {round}"),
        Message::ReadProbeOk { view, round, replica } => format!("read_probe_ok {view} round {round} from {replica}"),
        Message::NilextAck { view, replica, client, request, prefix_digest, executed, result } => {
            format!(
                "nilext_ack {view} {client} {request} from {replica} digest {prefix_digest:x} executed={executed} result={}",
                result.is_some()
            )
        }
        Message::Part { replica, digest, index, count, bytes } => {
            format!("part {index}/{count} of {digest:x} from {replica} ({} bytes)", bytes.len())
        }
    }
}
