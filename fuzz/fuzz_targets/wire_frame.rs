//! The peer frame decoder: `wire::decode` (version, length cap, CRC32C, postcard) of the VR
//! `Message`s replicas send each other and of the `vr::Record`s the write-ahead log holds.
//!
//! The input is read twice: as a connection's byte stream (frames one after another until one
//! fails: the header checks), and as the payload of one frame with a valid checksum (the
//! postcard decoding a checksum would otherwise hide from the fuzzer). Properties: no panic; no
//! frame longer than the input or the cap is accepted; a decoded value encodes back to a frame
//! that decodes to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::{de::DeserializeOwned, Serialize};
use std::fmt::Debug;

/// A small cap, so that short inputs reach the length check too.
const PAYLOAD_BYTES_MAX: usize = 4096;

fn read_stream<T: Serialize + DeserializeOwned + PartialEq + Debug>(mut bytes: &[u8]) {
    while !bytes.is_empty() {
        match wire::decode::<T>(bytes, PAYLOAD_BYTES_MAX) {
            Ok((value, consumed)) => {
                assert!(consumed >= wire::FRAME_HEADER_BYTES, "{consumed}");
                assert!(consumed <= bytes.len(), "{consumed} > {}", bytes.len());
                assert!(consumed - wire::FRAME_HEADER_BYTES <= PAYLOAD_BYTES_MAX);
                let encoded = wire::encode(&value);
                let (again, again_consumed) =
                    wire::decode::<T>(&encoded, usize::MAX).expect("an encoded value decodes");
                assert_eq!(again, value);
                assert_eq!(again_consumed, encoded.len());
                bytes = &bytes[consumed..];
            }
            Err(wire::DecodeError::Incomplete {
                needed: Some(needed),
            }) => {
                assert!(needed > bytes.len(), "{needed} <= {}", bytes.len());
                return;
            }
            Err(_) => return,
        }
    }
}

fuzz_target!(|bytes: &[u8]| {
    read_stream::<wire::Message>(bytes);
    read_stream::<vr::Record>(bytes);
    let frame = tessera_fuzz::framed(bytes);
    read_stream::<wire::Message>(&frame);
    read_stream::<vr::Record>(&frame);
});
