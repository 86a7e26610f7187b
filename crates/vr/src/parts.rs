//! Messages larger than one frame, sent in parts (`Message::Part`).
//!
//! A link refuses a frame over its limit (`runtime::ecast::link::FRAME_BYTES_MAX`), and the
//! messages that carry a log or a checkpoint (DoViewChange, StartView, NewState,
//! RecoveryResponse, and a Prepare of a batch of large requests) grow with the log since the
//! last checkpoint and with the state. So a replica bounds every message it sends by
//! `Config::message_bytes_max`: one whose encoding may be larger is encoded once and cut into
//! parts, each a `Message::Part` within the bound; the receiver reassembles the parts, decodes
//! the whole (the frame's checksum covers it) and steps it exactly as if it had arrived in one
//! piece. The protocol's handlers never see a part (`docs/internals/vr.md`, "Messages larger
//! than a frame").

use std::collections::{BTreeMap, VecDeque};
use wire::{Checkpoint, DurabilityLogState, Entry, Message, ReplicaIndex, Request};

/// Bytes of a varint-encoded u64 at most (postcard).
const VARINT: u64 = 10;
/// Bytes of a message's fixed fields at most (frame header, variant tag, every integer field
/// of any variant, option tags): every variant has fewer than ten integer fields.
const FIXED: u64 = 9 + 5 + 12 * VARINT;

/// Bytes a `Message::Part` takes besides its `bytes` at most (its own fixed fields and the
/// length of its bytes): a part of `message_bytes_max - PART_OVERHEAD_BYTES` bytes fits.
pub const PART_OVERHEAD_BYTES: u64 = FIXED + VARINT;

/// Parts of one sender being reassembled at a time at most; a part of another message evicts
/// the sender's oldest unfinished one (a lost part: the protocol resends the whole).
const ASSEMBLIES_PER_SENDER: usize = 4;

/// An upper bound on the bytes of `message`'s frame (`wire::encode`), computed without
/// encoding it: the fixed fields at their longest plus every variable field's bytes and
/// length.
pub fn message_bytes(message: &Message) -> u64 {
    FIXED
        + match message {
            Message::Request(request) => request_bytes(request),
            Message::Reply(reply) => VARINT + reply.result.len() as u64,
            Message::Prepare { entry, .. } => entry_bytes(entry),
            Message::DoViewChange {
                log,
                durability_log,
                ..
            } => log_bytes(log) + VARINT + durability_log.iter().map(request_bytes).sum::<u64>(),
            Message::StartView { log, .. } => log_bytes(log),
            Message::NewState {
                checkpoint,
                log,
                durability,
                ..
            } => {
                checkpoint.as_ref().map_or(0, checkpoint_bytes)
                    + log_bytes(log)
                    + durability.as_ref().map_or(0, durability_bytes)
            }
            Message::RecoveryResponse { primary, .. } => primary.as_ref().map_or(0, |state| {
                checkpoint_bytes(&state.checkpoint)
                    + log_bytes(&state.log)
                    + durability_bytes(&state.durability)
            }),
            Message::NilextAck { result, .. } => result
                .as_ref()
                .map_or(0, |result| VARINT + result.len() as u64),
            Message::Part { bytes, .. } => VARINT + bytes.len() as u64,
            Message::NotPrimary { .. }
            | Message::PrepareOk { .. }
            | Message::Commit { .. }
            | Message::StartViewChange { .. }
            | Message::GetState { .. }
            | Message::Recovery { .. }
            | Message::ReadProbe { .. }
            | Message::ReadProbeOk { .. } => 0,
        }
}

fn request_bytes(request: &Request) -> u64 {
    3 * VARINT + 5 + request.operation.len() as u64
}

fn entry_bytes(entry: &Entry) -> u64 {
    3 * VARINT + entry.requests.iter().map(request_bytes).sum::<u64>()
}

fn log_bytes(log: &[Entry]) -> u64 {
    VARINT + log.iter().map(entry_bytes).sum::<u64>()
}

fn checkpoint_bytes(checkpoint: &Checkpoint) -> u64 {
    4 * VARINT
        + checkpoint.state.len() as u64
        + checkpoint
            .client_table
            .iter()
            .map(|entry| 3 * VARINT + entry.result.len() as u64)
            .sum::<u64>()
}

fn durability_bytes(durability: &DurabilityLogState) -> u64 {
    VARINT
        + durability
            .entries
            .iter()
            .map(|entry| VARINT + request_bytes(&entry.request))
            .sum::<u64>()
}

/// Cuts `message` (sent by `sender`) into parts whose frames are at most `message_bytes_max`
/// bytes each, in order.
pub fn split(message: &Message, sender: ReplicaIndex, message_bytes_max: u64) -> Vec<Message> {
    // Sized by the bound up front: growing the buffer would copy it a few times over.
    let mut frame = Vec::with_capacity(message_bytes(message) as usize);
    wire::encode_into(message, &mut frame);
    let part_bytes = message_bytes_max
        .checked_sub(PART_OVERHEAD_BYTES)
        .filter(|bytes| *bytes > 0)
        .expect("a validated configuration leaves room in a part") as usize;
    let digest = frame_digest(&frame);
    let count = frame.len().div_ceil(part_bytes);
    let count_u32 = u32::try_from(count).expect("a message has fewer than 2^32 parts");
    frame
        .chunks(part_bytes)
        .enumerate()
        .map(|(index, bytes)| Message::Part {
            replica: sender,
            digest,
            index: index as u32,
            count: count_u32,
            bytes: bytes.to_vec(),
        })
        .collect()
}

/// A frame's name: its length and its payload's checksum (from its header), so that the same
/// message encoded again (a resend) has the same digest.
fn frame_digest(frame: &[u8]) -> u64 {
    let checksum = u32::from_le_bytes([frame[5], frame[6], frame[7], frame[8]]);
    ((frame.len() as u64) << 32) | u64::from(checksum)
}

/// What a part completed.
#[derive(Debug, PartialEq, Eq)]
pub enum Received {
    /// More parts are needed.
    Pending,
    /// Every part arrived: the whole message.
    Complete(Message),
    /// The part (or the message it completed) is malformed, or larger than allowed: dropped.
    Refused,
}

#[derive(Debug)]
struct Assembly {
    replica: ReplicaIndex,
    digest: u64,
    count: u32,
    parts: BTreeMap<u32, Vec<u8>>,
    bytes: u64,
}

/// Parts being reassembled, by sender and digest.
#[derive(Debug, Default)]
pub struct Assembler {
    assemblies: VecDeque<Assembly>,
}

impl Assembler {
    /// Takes one part from `replica`. A message whose frame is over `bytes_max`, a part that
    /// contradicts the others of its digest, or a reassembled frame that does not decode to
    /// one message from `replica` is refused.
    pub fn receive(
        &mut self,
        replica: ReplicaIndex,
        digest: u64,
        index: u32,
        count: u32,
        bytes: Vec<u8>,
        bytes_max: u64,
    ) -> Received {
        let length = digest >> 32;
        let well_formed = count > 0
            && index < count
            && !bytes.is_empty()
            && length <= bytes_max
            && bytes.len() as u64 <= length
            && u64::from(count) <= length;
        if !well_formed {
            return Received::Refused;
        }
        let position = self
            .assemblies
            .iter()
            .position(|assembly| assembly.replica == replica && assembly.digest == digest);
        let position = match position {
            Some(position) => position,
            None => {
                let from_sender = self
                    .assemblies
                    .iter()
                    .filter(|assembly| assembly.replica == replica)
                    .count();
                if from_sender >= ASSEMBLIES_PER_SENDER {
                    let oldest = self
                        .assemblies
                        .iter()
                        .position(|assembly| assembly.replica == replica)
                        .expect("counted above");
                    self.assemblies.remove(oldest);
                }
                self.assemblies.push_back(Assembly {
                    replica,
                    digest,
                    count,
                    parts: BTreeMap::new(),
                    bytes: 0,
                });
                self.assemblies.len() - 1
            }
        };
        let assembly = &mut self.assemblies[position];
        if assembly.count != count {
            return Received::Refused;
        }
        if assembly.parts.contains_key(&index) {
            return Received::Pending; // A duplicate.
        }
        if assembly.bytes + bytes.len() as u64 > length {
            self.assemblies.remove(position);
            return Received::Refused;
        }
        assembly.bytes += bytes.len() as u64;
        assembly.parts.insert(index, bytes);
        if assembly.parts.len() < count as usize {
            return Received::Pending;
        }
        let assembly = self.assemblies.remove(position).expect("found above");
        if assembly.bytes != length {
            return Received::Refused;
        }
        let mut frame = Vec::with_capacity(length as usize);
        for part in assembly.parts.into_values() {
            frame.extend_from_slice(&part);
        }
        match wire::decode::<Message>(&frame, frame.len()) {
            Ok((message, consumed)) if consumed == frame.len() => {
                let from = crate::replica::sender_of(&message);
                let nested = matches!(message, Message::Part { .. });
                if nested || from.is_some_and(|from| from != replica) {
                    return Received::Refused;
                }
                Received::Complete(message)
            }
            _ => Received::Refused,
        }
    }

    /// Bytes held in unfinished assemblies (for observers).
    pub fn bytes(&self) -> u64 {
        self.assemblies.iter().map(|assembly| assembly.bytes).sum()
    }
}

/// `split`, for the `parts_cost` example (not part of the protocol's interface).
#[doc(hidden)]
pub fn split_for_bench(message: &Message, sender: ReplicaIndex, bytes_max: u64) -> Vec<Message> {
    split(message, sender, bytes_max)
}

/// Reassembles parts as a receiver does, for the `parts_cost` example.
#[doc(hidden)]
pub fn reassemble_for_bench(parts: Vec<Message>) -> Option<Message> {
    let mut assembler = Assembler::default();
    let mut whole = None;
    for part in parts {
        if let Message::Part {
            replica,
            digest,
            index,
            count,
            bytes,
        } = part
        {
            if let Received::Complete(message) =
                assembler.receive(replica, digest, index, count, bytes, u64::from(u32::MAX))
            {
                whole = Some(message);
            }
        }
    }
    whole
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::{
        ClientId, ClientTableEntry, DurableRequest, Op, RecoveryState, RequestKind, RequestNumber,
        View,
    };

    fn request(client: u64, bytes: usize) -> Request {
        Request {
            client: ClientId(u64::MAX - client),
            request: RequestNumber(u64::MAX / 3),
            kind: RequestKind::Write,
            operation: vec![7; bytes],
        }
    }

    fn entry(op: u64, requests: usize, bytes: usize) -> Entry {
        Entry {
            view: View(u64::MAX / 5),
            op: Op(op),
            requests: (0..requests)
                .map(|client| request(client as u64, bytes))
                .collect(),
        }
    }

    fn checkpoint(state: usize) -> Checkpoint {
        Checkpoint {
            op: Op(u64::MAX / 7),
            state: vec![1; state],
            client_table: (0..5)
                .map(|client| ClientTableEntry {
                    client: ClientId(client),
                    request: RequestNumber(u64::MAX),
                    result: vec![2; 300],
                })
                .collect(),
            executed_digest: u64::MAX,
        }
    }

    fn samples() -> Vec<Message> {
        let log: Vec<Entry> = (1..40).map(|op| entry(op, 3, op as usize * 37)).collect();
        let durability = DurabilityLogState {
            entries: (0..4)
                .map(|client| DurableRequest {
                    request: request(client, 1000),
                    prefix_digest: u64::MAX,
                })
                .collect(),
        };
        let big = View(u64::MAX);
        vec![
            Message::Request(request(1, 70_000)),
            Message::Prepare {
                view: big,
                commit: Op(u64::MAX),
                entry: entry(9, 64, 5000),
            },
            Message::DoViewChange {
                view: big,
                log_view: big,
                op: Op(u64::MAX),
                commit: Op(u64::MAX),
                checkpoint_op: Op(u64::MAX),
                replica: ReplicaIndex(255),
                log: log.clone(),
                durability_log: (0..9).map(|client| request(client, 33)).collect(),
            },
            Message::StartView {
                view: big,
                op: Op(u64::MAX),
                commit: Op(u64::MAX),
                checkpoint_op: Op(u64::MAX),
                log: log.clone(),
            },
            Message::NewState {
                view: big,
                op: Op(u64::MAX),
                commit: Op(u64::MAX),
                checkpoint: Some(checkpoint(200_000)),
                log: log.clone(),
                replica: ReplicaIndex(255),
                durability: Some(durability.clone()),
            },
            Message::RecoveryResponse {
                view: big,
                nonce: wire::Nonce(u64::MAX),
                replica: ReplicaIndex(255),
                primary: Some(RecoveryState {
                    op: Op(u64::MAX),
                    commit: Op(u64::MAX),
                    checkpoint: checkpoint(1 << 20),
                    log,
                    durability,
                }),
            },
            Message::Commit {
                view: big,
                commit: Op(u64::MAX),
            },
            Message::Part {
                replica: ReplicaIndex(255),
                digest: u64::MAX,
                index: u32::MAX,
                count: u32::MAX,
                bytes: vec![3; 100_000],
            },
        ]
    }

    #[test]
    fn the_bound_is_never_below_the_encoded_size_and_close_to_it() {
        for message in samples() {
            let encoded = wire::encode(&message).len() as u64;
            let bound = message_bytes(&message);
            assert!(encoded <= bound, "{}: {encoded} > {bound}", message.name());
            // Within the per-field slack: 10 bytes per length or integer, at most.
            assert!(
                bound - encoded <= FIXED + encoded / 10 + 4096,
                "{}: bound {bound} for {encoded} bytes",
                message.name()
            );
        }
    }

    #[test]
    fn a_message_splits_into_bounded_parts_that_reassemble_to_it() {
        for message in samples() {
            if matches!(message, Message::Part { .. }) {
                continue; // A part of a part is refused as nested (tested below).
            }
            for limit in [256u64, 1000, 65_536] {
                let parts = split(&message, ReplicaIndex(255), limit);
                assert!(parts.len() > 1 || message_bytes(&message) <= limit);
                let mut assembler = Assembler::default();
                let mut whole = None;
                // In reverse order, with a duplicate: order and duplicates do not matter.
                let mut arriving: Vec<Message> = parts.iter().rev().cloned().collect();
                if parts.len() > 1 {
                    arriving.insert(1, parts[parts.len() - 1].clone());
                }
                for part in arriving {
                    assert!(message_bytes(&part) <= limit, "a part is over the limit");
                    let Message::Part {
                        replica,
                        digest,
                        index,
                        count,
                        bytes,
                    } = part
                    else {
                        panic!("split makes parts")
                    };
                    match assembler.receive(replica, digest, index, count, bytes, 1 << 30) {
                        Received::Pending => {}
                        Received::Complete(message) => whole = Some(message),
                        Received::Refused => panic!("a good part was refused"),
                    }
                }
                let expected = message.clone();
                assert_eq!(whole, Some(expected), "{} at {limit}", message.name());
                assert_eq!(assembler.bytes(), 0, "nothing left over");
            }
        }
    }

    #[test]
    fn malformed_forged_and_oversized_parts_are_refused() {
        let message = samples().swap_remove(2); // A DoViewChange from r255.
        let parts = split(&message, ReplicaIndex(255), 512);
        let fields = |part: &Message| match part.clone() {
            Message::Part {
                digest,
                index,
                count,
                bytes,
                ..
            } => (digest, index, count, bytes),
            _ => unreachable!(),
        };
        let (digest, index, count, bytes) = fields(&parts[0]);
        let mut assembler = Assembler::default();
        let r = ReplicaIndex(255);
        // Index past the count, no parts, empty bytes, a total over the cap.
        assert_eq!(
            assembler.receive(r, digest, count, count, bytes.clone(), 1 << 30),
            Received::Refused
        );
        assert_eq!(
            assembler.receive(r, digest, 0, 0, bytes.clone(), 1 << 30),
            Received::Refused
        );
        assert_eq!(
            assembler.receive(r, digest, index, count, Vec::new(), 1 << 30),
            Received::Refused
        );
        assert_eq!(
            assembler.receive(r, digest, index, count, bytes.clone(), 100),
            Received::Refused
        );
        // Another count for the same digest.
        assert_eq!(
            assembler.receive(r, digest, index, count, bytes.clone(), 1 << 30),
            Received::Pending
        );
        assert_eq!(
            assembler.receive(r, digest, 1, count + 1, bytes.clone(), 1 << 30),
            Received::Refused
        );
        // Parts claiming to be from another replica than the message's sender.
        let mut other = Assembler::default();
        let mut outcome = Received::Pending;
        for part in &parts {
            let (digest, index, count, bytes) = fields(part);
            outcome = other.receive(ReplicaIndex(3), digest, index, count, bytes, 1 << 30);
        }
        assert_eq!(
            outcome,
            Received::Refused,
            "a part's sender must be its message's"
        );
        // A corrupted byte: the frame's checksum refuses the whole.
        let mut corrupt = Assembler::default();
        let mut outcome = Received::Pending;
        for (at, part) in parts.iter().enumerate() {
            let (digest, index, count, mut bytes) = fields(part);
            if at == 1 {
                bytes[0] ^= 1;
            }
            outcome = corrupt.receive(r, digest, index, count, bytes, 1 << 30);
        }
        assert_eq!(outcome, Received::Refused);
        // A part of a part.
        let nested = split(&parts[0], r, 256);
        let mut assembler = Assembler::default();
        let mut outcome = Received::Pending;
        for part in nested {
            let (digest, index, count, bytes) = fields(&part);
            outcome = assembler.receive(r, digest, index, count, bytes, 1 << 30);
        }
        assert_eq!(outcome, Received::Refused);
    }

    #[test]
    fn a_sender_holds_a_bounded_number_of_unfinished_messages() {
        let mut assembler = Assembler::default();
        for size in 0..10u64 {
            let message = Message::Request(request(size, 2000 + size as usize));
            let part = split(&message, ReplicaIndex(1), 512).swap_remove(0);
            let Message::Part {
                replica,
                digest,
                index,
                count,
                bytes,
            } = part
            else {
                unreachable!()
            };
            assembler.receive(replica, digest, index, count, bytes, 1 << 30);
        }
        assert_eq!(assembler.assemblies.len(), ASSEMBLIES_PER_SENDER);
    }
}
