//! What a client sends before and around authentication that has its own parser: the SCRAM
//! client-first and client-final messages (`runtime::security::scram::server_first`,
//! `Exchange::finish`, which run the `pgwire` crate's `ScramServerAuth`), and the role and privilege statements (`security::roles::parse`,
//! `security::grants::parse`, which the SQL parser never sees).
//!
//! Input: a mode byte, then the bytes. Mode even: a client-first message and a client-final
//! one separated by `tessera_fuzz::SEPARATOR` (`@NONCE@` in the final one becomes the
//! exchange's nonce), run against a verifier of one iteration (the
//! fuzzer's time goes to the parsers, not PBKDF2); mode odd: statement text (lossy UTF-8).
//! Properties: no panic; a SCRAM refusal is `Malformed` or `WrongProof`, never a success for a
//! made-up proof; server-first extends the client's nonce; statement errors carry a
//! five-character SQLSTATE; a parsed GRANT names privileges and roles and never OWNER.
#![no_main]

use libfuzzer_sys::fuzz_target;
use runtime::security::{grants, roles, scram};

/// Where the server's nonce goes in a fuzzed client-final message: pgwire picks a random
/// server nonce, so a seed says `@NONCE@` and the target puts the exchange's nonce there, so
/// that mutations reach pgwire's proof check instead of stopping at the nonce.
const NONCE_PLACEHOLDER: &[u8] = b"@NONCE@";

fn with_nonce(message: &[u8], nonce: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + nonce.len());
    let mut rest = message;
    while let Some(at) = rest
        .windows(NONCE_PLACEHOLDER.len())
        .position(|window| window == NONCE_PLACEHOLDER)
    {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(nonce.as_bytes());
        rest = &rest[at + NONCE_PLACEHOLDER.len()..];
    }
    out.extend_from_slice(rest);
    out
}

fn scram_exchange(bytes: &[u8]) {
    let pieces = tessera_fuzz::pieces(bytes);
    let first = pieces.first().copied().unwrap_or_default();
    let verifier = scram::Verifier::new(b"fuzz password", b"fuzz salt 16 byt", 1);
    let Ok((exchange, server_first)) = scram::server_first(&verifier, first) else {
        return;
    };
    let nonce = server_first
        .strip_prefix("r=")
        .and_then(|rest| rest.split(',').next())
        .expect("server-first starts with the nonce");
    let text = std::str::from_utf8(first).expect("an accepted client-first is UTF-8");
    let client_nonce = text
        .split(',')
        .find_map(|attribute| attribute.strip_prefix("r="))
        .expect("an accepted client-first has a nonce");
    assert!(nonce.starts_with(client_nonce), "{server_first}");
    assert!(nonce.len() > client_nonce.len(), "{server_first}");
    let last = with_nonce(pieces.get(1).copied().unwrap_or_default(), nonce);
    match exchange.finish(&last) {
        // Only the password's proof passes: the fuzzer does not have it (a 32-byte proof
        // from the ClientKey), so a success would be a bug in the check.
        Ok(server_final) => panic!("a made-up proof was accepted: {server_final}"),
        Err(scram::ScramError::Malformed(_) | scram::ScramError::WrongProof) => {}
    }
}

fn statement(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let _ = roles::is_role_statement(&text);
    let _ = grants::is_grant_statement(&text);
    match roles::parse(&text) {
        Ok(_) => {}
        Err(error) => assert_eq!(error.code.len(), 5, "{error:?}"),
    }
    match grants::parse(&text) {
        Ok(statement) => {
            assert!(!statement.privileges.is_empty());
            assert!(!statement.roles.is_empty());
            assert!(!statement.privileges.contains(&grants::Privilege::Owner));
        }
        Err(error) => assert_eq!(error.code.len(), 5, "{error:?}"),
    }
}

fuzz_target!(|bytes: &[u8]| {
    let Some((&mode, rest)) = bytes.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        scram_exchange(rest);
    } else {
        statement(rest);
    }
});
