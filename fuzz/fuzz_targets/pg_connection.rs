//! The PostgreSQL wire protocol on what a client sends: one connection
//! (`runtime::pg::serve_connection`: startup, simple and extended query protocols, COPY, the
//! message decoder `pg::protocol` and every body read) over an in-memory engine
//! (`LocalBackend`), the input being the client's whole byte stream.
//!
//! Input: a first byte 0 sends the rest as it is (the startup phase: SSLRequest, lengths,
//! parameters); any other first byte sends a valid StartupMessage first, then the rest (so the
//! fuzzer's mutations land in the query protocols). Properties: no panic; after a valid startup
//! everything the server writes is a sequence of well-formed backend messages.
#![no_main]

use libfuzzer_sys::fuzz_target;
use runtime::pg::{serve_connection, PgLimits};
use runtime::sql_backend::LocalBackend;
use std::sync::OnceLock;
use std::time::Duration;

fn executor() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a current-thread runtime")
    })
}

/// Small limits, so that short inputs reach them.
fn limits() -> PgLimits {
    PgLimits {
        message_bytes_max: 4096,
        startup_bytes_max: 512,
        copy_bytes_max: 4096,
        statements_max: 8,
        portals_max: 8,
        connections_max: 1,
        startup_timeout: Duration::from_secs(10),
        idle_timeout: None,
    }
}

/// StartupMessage: protocol 3.0, user "fuzz".
fn startup_message() -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&196_608_i32.to_be_bytes());
    body.extend_from_slice(b"user\0fuzz\0\0");
    let mut message = (i32::try_from(body.len() + 4).unwrap())
        .to_be_bytes()
        .to_vec();
    message.extend_from_slice(&body);
    message
}

/// Asserts that `out` is a sequence of whole backend messages: a type byte and a length that
/// counts itself and ends within the output.
fn assert_well_framed(out: &[u8]) {
    let mut at = 0;
    while at < out.len() {
        assert!(out.len() - at >= 5, "a short message header at {at}");
        let length = i32::from_be_bytes(out[at + 1..at + 5].try_into().unwrap());
        assert!(length >= 4, "message length {length} at {at}");
        let end = at + 1 + length as usize;
        assert!(end <= out.len(), "message at {at} runs past the output");
        at = end;
    }
}

fuzz_target!(|bytes: &[u8]| {
    let Some((&mode, rest)) = bytes.split_first() else {
        return;
    };
    let mut input = Vec::new();
    if mode != 0 {
        input.extend_from_slice(&startup_message());
    }
    input.extend_from_slice(rest);
    let mut out: Vec<u8> = Vec::new();
    executor().block_on(serve_connection(
        LocalBackend::default(),
        limits(),
        &input[..],
        &mut out,
    ));
    if mode != 0 {
        assert_well_framed(&out);
    }
});
