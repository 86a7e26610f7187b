//! `#[serde(with = "wire::bytes")]` for `Vec<u8>` fields: serialised as one byte string
//! instead of a sequence of `u8`s. Postcard writes both the same way (a varint length, then
//! the bytes), so the encoding does not change; only the cost does: a sequence is written and
//! read one element at a time through serde's visitor, a byte string with one copy. Formats
//! that write byte strings differently still read either form back.

use serde::de::{Deserializer, Error, SeqAccess, Visitor};
use serde::{Serialize, Serializer};
use std::fmt;

/// `value`'s postcard bytes in a buffer of exactly their size. A pass sizes them first (it
/// writes nothing), so a large value (a checkpoint of a whole partition) allocates and
/// touches its bytes once, instead of regrowing a buffer that doubles: each growth copies
/// what was written and faults in fresh pages, about twice the final size in all.
///
/// `value`'s `Serialize` runs twice: for a value whose serialisation builds something costly
/// itself, use `postcard::to_allocvec`.
pub fn to_vec_sized<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    to_vec_sized_after(&[], value)
}

/// `prefix`, then `value`'s postcard bytes, in a buffer of exactly their size
/// (`to_vec_sized`).
pub fn to_vec_sized_after<T: Serialize + ?Sized>(prefix: &[u8], value: &T) -> Vec<u8> {
    let size = postcard::experimental::serialized_size(value).expect("values serialise");
    let mut bytes = Vec::with_capacity(prefix.len() + size);
    bytes.extend_from_slice(prefix);
    let bytes = postcard::to_extend(value, bytes).expect("values serialise");
    debug_assert_eq!(
        bytes.len(),
        prefix.len() + size,
        "the sizing pass and the writing pass agree"
    );
    bytes
}

pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_bytes(bytes)
}

pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
    deserializer.deserialize_byte_buf(BytesVisitor)
}

struct BytesVisitor;

impl<'de> Visitor<'de> for BytesVisitor {
    type Value = Vec<u8>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a byte string")
    }

    fn visit_bytes<E: Error>(self, bytes: &[u8]) -> Result<Vec<u8>, E> {
        Ok(bytes.to_vec())
    }

    fn visit_byte_buf<E: Error>(self, bytes: Vec<u8>) -> Result<Vec<u8>, E> {
        Ok(bytes)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut sequence: A) -> Result<Vec<u8>, A::Error> {
        // Bounded by what the input holds: never trust a size hint for the allocation.
        let mut bytes = Vec::with_capacity(sequence.size_hint().unwrap_or(0).min(4096));
        while let Some(byte) = sequence.next_element::<u8>()? {
            bytes.push(byte);
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct AsSequence {
        tag: u32,
        payload: Vec<u8>,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct AsBytes {
        tag: u32,
        #[serde(with = "crate::bytes")]
        payload: Vec<u8>,
    }

    #[test]
    fn postcard_encodes_a_byte_string_exactly_as_a_sequence_of_bytes() {
        for length in [0usize, 1, 127, 128, 300, 70_000] {
            let payload: Vec<u8> = (0..length).map(|i| (i * 7) as u8).collect();
            let old = postcard::to_allocvec(&AsSequence {
                tag: 9,
                payload: payload.clone(),
            })
            .unwrap();
            let new = postcard::to_allocvec(&AsBytes {
                tag: 9,
                payload: payload.clone(),
            })
            .unwrap();
            assert_eq!(old, new, "length {length}");
            let back: AsBytes = postcard::from_bytes(&old).unwrap();
            assert_eq!(back.payload, payload);
            let back: AsSequence = postcard::from_bytes(&new).unwrap();
            assert_eq!(back.payload, payload);
        }
    }

    #[test]
    fn a_length_beyond_the_input_is_an_error_not_an_allocation() {
        // Length varint 0xFFFFFFFF, then two bytes.
        let bytes = [9u8, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 1, 2];
        assert!(postcard::from_bytes::<AsBytes>(&bytes).is_err());
    }
}
