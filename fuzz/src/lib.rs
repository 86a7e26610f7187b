//! Helpers the fuzz targets share. The targets themselves are in `fuzz_targets/`; the seed
//! corpora in `corpus/` are written by `examples/seeds.rs` (see docs/security.md).

/// `payload` as one valid `wire` frame: the version, its length and its CRC32C, so that a
/// mutated payload reaches the postcard decoder instead of stopping at the checksum.
pub fn framed(payload: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(wire::FRAME_HEADER_BYTES + payload.len());
    frame.push(wire::FRAME_VERSION);
    let length = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    frame.extend_from_slice(&length.to_le_bytes());
    frame.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// The separator between the pieces of an input made of several byte strings (operations,
/// segments, messages); chosen to be rare in postcard and RESP alike.
pub const SEPARATOR: &[u8] = b"\xf0\x9f\x92\xa5";

/// Splits an input into its pieces at every `SEPARATOR`.
pub fn pieces(bytes: &[u8]) -> Vec<&[u8]> {
    let mut pieces = Vec::new();
    let mut rest = bytes;
    while let Some(at) = rest
        .windows(SEPARATOR.len())
        .position(|window| window == SEPARATOR)
    {
        pieces.push(&rest[..at]);
        rest = &rest[at + SEPARATOR.len()..];
    }
    pieces.push(rest);
    pieces
}

/// Joins pieces with `SEPARATOR`: the inverse of `pieces` (for the seed generator).
pub fn joined(pieces: &[Vec<u8>]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for (at, piece) in pieces.iter().enumerate() {
        if at > 0 {
            bytes.extend_from_slice(SEPARATOR);
        }
        bytes.extend_from_slice(piece);
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_undo_joined() {
        let parts = vec![b"a".to_vec(), Vec::new(), b"bc".to_vec()];
        assert_eq!(pieces(&joined(&parts)), vec![&b"a"[..], b"", b"bc"]);
    }

    #[test]
    fn a_framed_payload_decodes_as_wire_frames_do() {
        let frame = framed(&postcard::to_allocvec(&7_u64).unwrap());
        assert_eq!(wire::decode::<u64>(&frame, 64), Ok((7, frame.len())));
    }
}
