//! Frames: `[version: u8][payload length: u32 LE][crc32c of payload: u32 LE][postcard payload]`.
//!
//! The same frame is used on TCP between nodes and for records on disk. Decoding checks the
//! version, the length against a caller-given cap (before allocating anything), and the
//! checksum, and never panics on any input.

use serde::{de::DeserializeOwned, Serialize};
use std::fmt;

/// The frame format's version byte. Bump on an incompatible change of the frame or of a
/// message layout.
pub const FRAME_VERSION: u8 = 1;
/// Bytes before the payload.
pub const FRAME_HEADER_BYTES: usize = 9;

/// Why a byte string is not a valid frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes than the frame needs; `needed` is the whole frame's size when known.
    Incomplete { needed: Option<usize> },
    /// The version byte is not one this build reads.
    Version { found: u8 },
    /// The payload length exceeds the cap the reader set.
    TooLarge { length: usize, length_max: usize },
    /// The checksum does not match the payload.
    Checksum { expected: u32, found: u32 },
    /// The payload is not a valid encoding of the expected type.
    Payload { reason: String },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Incomplete {
                needed: Some(needed),
            } => {
                write!(formatter, "incomplete frame: {needed} bytes needed")
            }
            DecodeError::Incomplete { needed: None } => {
                write!(formatter, "incomplete frame header")
            }
            DecodeError::Version { found } => {
                write!(
                    formatter,
                    "unsupported frame version {found} (this build reads {FRAME_VERSION})"
                )
            }
            DecodeError::TooLarge { length, length_max } => {
                write!(
                    formatter,
                    "frame of {length} bytes exceeds the limit of {length_max} bytes"
                )
            }
            DecodeError::Checksum { expected, found } => {
                write!(formatter, "frame checksum mismatch: header says {expected:#010x}, payload has {found:#010x}")
            }
            DecodeError::Payload { reason } => {
                write!(formatter, "malformed frame payload: {reason}")
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// Encodes `value` as one frame appended to `buffer`.
pub fn encode_into<T: Serialize>(value: &T, buffer: &mut Vec<u8>) {
    let start = buffer.len();
    buffer.extend_from_slice(&[0u8; FRAME_HEADER_BYTES]);
    // Serialising our own types into a Vec cannot fail: postcard errors only on unsupported
    // serde features (maps with unknown length), which our message types never use.
    let mut buffer_taken = std::mem::take(buffer);
    buffer_taken =
        postcard::to_extend(value, buffer_taken).expect("message types serialise to postcard");
    *buffer = buffer_taken;
    let payload_length = buffer.len() - start - FRAME_HEADER_BYTES;
    let payload_length_u32 = u32::try_from(payload_length).expect("a frame payload fits in u32");
    let checksum = crc32c::crc32c(&buffer[start + FRAME_HEADER_BYTES..]);
    buffer[start] = FRAME_VERSION;
    buffer[start + 1..start + 5].copy_from_slice(&payload_length_u32.to_le_bytes());
    buffer[start + 5..start + 9].copy_from_slice(&checksum.to_le_bytes());
}

/// Encodes `value` as one frame.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let mut buffer = Vec::new();
    encode_into(value, &mut buffer);
    buffer
}

/// Decodes one frame from the front of `bytes`, returning the value and the bytes consumed.
/// `payload_length_max` is checked before the payload is read or allocated.
pub fn decode<T: DeserializeOwned>(
    bytes: &[u8],
    payload_length_max: usize,
) -> Result<(T, usize), DecodeError> {
    if bytes.is_empty() {
        return Err(DecodeError::Incomplete { needed: None });
    }
    if bytes[0] != FRAME_VERSION {
        return Err(DecodeError::Version { found: bytes[0] });
    }
    if bytes.len() < FRAME_HEADER_BYTES {
        return Err(DecodeError::Incomplete { needed: None });
    }
    let length = u32::from_le_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize;
    if length > payload_length_max {
        return Err(DecodeError::TooLarge {
            length,
            length_max: payload_length_max,
        });
    }
    let frame_length = FRAME_HEADER_BYTES + length;
    if bytes.len() < frame_length {
        return Err(DecodeError::Incomplete {
            needed: Some(frame_length),
        });
    }
    let expected = u32::from_le_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]);
    let payload = &bytes[FRAME_HEADER_BYTES..frame_length];
    let found = crc32c::crc32c(payload);
    if expected != found {
        return Err(DecodeError::Checksum { expected, found });
    }
    let (value, rest) =
        postcard::take_from_bytes::<T>(payload).map_err(|error| DecodeError::Payload {
            reason: error.to_string(),
        })?;
    if !rest.is_empty() {
        return Err(DecodeError::Payload {
            reason: format!("{} trailing bytes", rest.len()),
        });
    }
    Ok((value, frame_length))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ClientId, Entry, Message, Op, Request, RequestKind, RequestNumber, View};

    const LIMIT: usize = 1 << 20;

    fn sample() -> Message {
        Message::Prepare {
            view: View(3),
            commit: Op(9),
            entry: Entry {
                view: View(3),
                op: Op(10),
                requests: vec![Request {
                    client: ClientId(42),
                    request: RequestNumber(7),
                    kind: RequestKind::Write,
                    operation: b"put k v".to_vec(),
                }],
            },
        }
    }

    #[test]
    fn a_frame_round_trips_and_reports_its_length() {
        let bytes = encode(&sample());
        let (decoded, consumed) = decode::<Message>(&bytes, LIMIT).expect("valid frame");
        assert_eq!(decoded, sample());
        assert_eq!(consumed, bytes.len());
    }

    #[test]
    fn two_frames_back_to_back_decode_one_at_a_time() {
        let mut bytes = encode(&sample());
        encode_into(
            &Message::Commit {
                view: View(1),
                commit: Op(2),
            },
            &mut bytes,
        );
        let (first, consumed) = decode::<Message>(&bytes, LIMIT).unwrap();
        assert_eq!(first, sample());
        let (second, _) = decode::<Message>(&bytes[consumed..], LIMIT).unwrap();
        assert_eq!(
            second,
            Message::Commit {
                view: View(1),
                commit: Op(2)
            }
        );
    }

    #[test]
    fn every_truncation_is_incomplete_never_a_panic() {
        let bytes = encode(&sample());
        for cut in 0..bytes.len() {
            let error = decode::<Message>(&bytes[..cut], LIMIT).unwrap_err();
            assert!(
                matches!(error, DecodeError::Incomplete { .. }),
                "cut {cut}: {error}"
            );
        }
    }

    #[test]
    fn a_flipped_payload_bit_fails_the_checksum() {
        let mut bytes = encode(&sample());
        let last = bytes.len() - 1;
        bytes[last] ^= 0x01;
        assert!(matches!(
            decode::<Message>(&bytes, LIMIT),
            Err(DecodeError::Checksum { .. })
        ));
    }

    #[test]
    fn an_oversized_length_is_refused_before_reading_the_payload() {
        let mut bytes = vec![FRAME_VERSION];
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        bytes.extend_from_slice(&[0; 4]);
        assert_eq!(
            decode::<Message>(&bytes, LIMIT),
            Err(DecodeError::TooLarge {
                length: u32::MAX as usize,
                length_max: LIMIT
            })
        );
    }

    #[test]
    fn an_unknown_version_is_refused() {
        let mut bytes = encode(&sample());
        bytes[0] = 99;
        assert_eq!(
            decode::<Message>(&bytes, LIMIT),
            Err(DecodeError::Version { found: 99 })
        );
    }

    #[test]
    fn garbage_with_a_valid_checksum_is_a_payload_error() {
        let payload = [0xff_u8; 16];
        let mut bytes = vec![FRAME_VERSION];
        bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
        bytes.extend_from_slice(&payload);
        assert!(matches!(
            decode::<Message>(&bytes, LIMIT),
            Err(DecodeError::Payload { .. })
        ));
    }

    #[test]
    fn random_bytes_never_panic_the_decoder() {
        let mut prng_state = 0x1234_5678_u64;
        for length in 0..400 {
            let mut bytes = Vec::with_capacity(length);
            for _ in 0..length {
                prng_state ^= prng_state << 13;
                prng_state ^= prng_state >> 7;
                prng_state ^= prng_state << 17;
                bytes.push(prng_state as u8);
            }
            if !bytes.is_empty() {
                bytes[0] = FRAME_VERSION;
            }
            let _ = decode::<Message>(&bytes, LIMIT);
        }
    }
}
