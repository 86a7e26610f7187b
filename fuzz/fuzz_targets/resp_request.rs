//! The RESP front end on what a client sends: `resp_codec::parse_request` (with its limits) on a
//! connection's bytes, every command it parses planned by `resp::plan`, run on a
//! `store::Store` (so `kv::Command` encoding and decoding too), finished with `resp::finish`
//! and encoded in RESP2 and RESP3.
//!
//! The bytes are parsed twice: under the default limits and under small ones (so that short
//! inputs reach every limit). Properties: no panic; a parsed request consumes at least one
//! byte and no more than the buffer holds; a request under the small limits respects them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use runtime::resp_codec::{encode_reply, parse_request, Limits};
use vr::StateMachine;

fn small_limits() -> Limits {
    Limits {
        inline_bytes_max: 64,
        bulk_bytes_max: 256,
        array_elements_max: 16,
    }
}

fn serve(bytes: &[u8], limits: &Limits, store: &mut store::Store) {
    let mut rest = bytes;
    let mut out = Vec::new();
    loop {
        let (arguments, consumed) = match parse_request(rest, limits) {
            Ok(Some(parsed)) => parsed,
            Ok(None) => return,
            Err(error) => {
                assert!(error.0.starts_with("Protocol error"), "{error:?}");
                return;
            }
        };
        assert!(consumed > 0, "a request consumes at least one byte");
        assert!(consumed <= rest.len(), "{consumed} > {}", rest.len());
        assert!(arguments.len() <= limits.array_elements_max.max(1) || rest[0] != b'*');
        rest = &rest[consumed..];
        if arguments.is_empty() {
            continue;
        }
        let reply = match resp::plan(&arguments) {
            resp::Plan::Execute(pending) => {
                let operation = store::kv_operation(&pending.command);
                let outcome_bytes = if pending.command.is_read() {
                    store.query(&operation)
                } else {
                    store.apply(&operation)
                };
                let outcome = kv::Outcome::decode(&outcome_bytes).expect("the store's outcome");
                resp::finish(&pending, &outcome)
            }
            resp::Plan::Reply(value) => value,
            _ => resp::Value::ok(),
        };
        out.clear();
        encode_reply(&reply, 2, &mut out);
        encode_reply(&reply, 3, &mut out);
    }
}

fuzz_target!(|bytes: &[u8]| {
    serve(bytes, &Limits::default(), &mut store::Store::new());
    serve(bytes, &small_limits(), &mut store::Store::new());
});
