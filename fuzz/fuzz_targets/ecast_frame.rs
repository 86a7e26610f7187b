//! The E-Cast link's frame decoder: `wire::decode::<Frame>` with the link's cap, as a
//! connection's reader runs it on a stream of frames (`runtime::ecast::link`).
//!
//! The input is read as a stream of frames (the header checks) and as the payload of one frame
//! with a valid checksum (postcard). Properties: no panic; a decoded frame re-encodes to bytes
//! that decode and re-encode to the same bytes (`Frame` has no `PartialEq`; its encoding stands
//! for it).
#![no_main]

use libfuzzer_sys::fuzz_target;
use runtime::ecast::link::{encode, Frame, FRAME_BYTES_MAX};

fn read_stream(mut bytes: &[u8]) {
    while !bytes.is_empty() {
        let Ok((frame, consumed)) = wire::decode::<Frame>(bytes, FRAME_BYTES_MAX) else {
            return;
        };
        assert!(consumed <= bytes.len(), "{consumed} > {}", bytes.len());
        bytes = &bytes[consumed..];
        let encoded = encode(&frame);
        let (again, _) =
            wire::decode::<Frame>(&encoded, FRAME_BYTES_MAX).expect("an encoded frame decodes");
        assert_eq!(encode(&again), encoded);
    }
}

fuzz_target!(|bytes: &[u8]| {
    read_stream(bytes);
    read_stream(&tessera_fuzz::framed(bytes));
});
