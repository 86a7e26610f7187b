//! Message and id types shared by the protocols, the simulator and the runtime, and the codec
//! that frames them for the network and the disk.
//!
//! Wire enums never renumber: postcard encodes a variant by its position, so a new variant is
//! appended at the end and a retired one keeps its slot (renamed `Retired…`).
#![forbid(unsafe_code)]

pub mod bytes;
mod codec;
mod ids;
mod vr;

pub use codec::{decode, encode, encode_into, DecodeError, FRAME_HEADER_BYTES, FRAME_VERSION};
pub use ids::{ClientId, Nonce, Op, ReplicaIndex, RequestNumber, View};
pub use vr::{
    Checkpoint, ClientTableEntry, DurabilityLogState, DurableRequest, Entry, Message,
    RecoveryState, Reply, Request, RequestKind,
};
