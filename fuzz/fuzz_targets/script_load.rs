//! The script loader on a client's bytes (the body of SCRIPT LOAD, EVAL, EVAL_RO): `script::compile`
//! — the `#!lua` shebang line and its flags, then Lua 5.1's parser in a fresh state with a
//! memory limit, text chunks only — and `script::sha1_hex`, the script's name.
//!
//! Properties: no panic and no crash in Lua's C code; a precompiled chunk (Lua's bytecode
//! signature, which Lua 5.1 would load unverified) never compiles; every refusal is a Redis
//! error text (`ERR …`); the name is 40 lowercase hex digits.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    let name = script::sha1_hex(body);
    assert_eq!(name.len(), 40);
    assert!(name
        .bytes()
        .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte)));
    let compiled = script::compile(body);
    if body.starts_with(b"\x1bLua") {
        assert!(compiled.is_err(), "a precompiled chunk compiled");
    }
    if let Err(text) = compiled {
        assert!(text.starts_with("ERR "), "{text}");
    }
});
