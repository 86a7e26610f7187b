//! SCRAM-SHA-256 (RFC 5802, RFC 7677) as PostgreSQL speaks it: the stored verifier
//! (`SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`, PostgreSQL's `pg_authid`
//! format), a password check against it (RESP `AUTH`), and the server side of the exchange
//! (pgwire `AuthenticationSASL`). Pure: the caller passes salts and nonces in; the crypto is
//! `ring`'s (PBKDF2-HMAC-SHA-256, HMAC-SHA-256, SHA-256, constant-time comparison).
//!
//! Not done: SASLprep of passwords (PostgreSQL also uses the raw bytes when a password is not
//! valid UTF-8 to normalise; here they always are), channel binding (`SCRAM-SHA-256-PLUS` is
//! not offered, and a client that requires it is refused).

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use ring::{digest, hmac, pbkdf2};
use std::num::NonZeroU32;

/// PBKDF2 iterations for new verifiers (PostgreSQL's `scram_iterations` default).
pub const ITERATIONS_DEFAULT: u32 = 4096;
/// Verifiers with more iterations are refused: checking one must not cost a CPU-second.
const ITERATIONS_MAX: u32 = 1_000_000;
/// Bytes of salt in new verifiers (PostgreSQL: 16).
pub const SALT_BYTES: usize = 16;
const KEY_BYTES: usize = 32;
/// The mechanism name, as the server advertises it.
pub const MECHANISM: &str = "SCRAM-SHA-256";

/// A stored SCRAM-SHA-256 verifier: never the password itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verifier {
    pub iterations: u32,
    pub salt: Vec<u8>,
    pub stored_key: [u8; KEY_BYTES],
    pub server_key: [u8; KEY_BYTES],
}

/// Why an exchange failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScramError {
    /// The client's message is not what the mechanism expects (08P01).
    Malformed(&'static str),
    /// The proof does not match the verifier: a wrong password (28P01).
    WrongProof,
}

fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; KEY_BYTES] {
    let key = hmac::Key::new(hmac::HMAC_SHA256, key);
    let tag = hmac::sign(&key, message);
    let mut out = [0u8; KEY_BYTES];
    out.copy_from_slice(tag.as_ref());
    out
}

fn sha256(message: &[u8]) -> [u8; KEY_BYTES] {
    let mut out = [0u8; KEY_BYTES];
    out.copy_from_slice(digest::digest(&digest::SHA256, message).as_ref());
    out
}

fn salted_password(password: &[u8], salt: &[u8], iterations: u32) -> [u8; KEY_BYTES] {
    let iterations = NonZeroU32::new(iterations).expect("verifiers have iterations ≥ 1");
    let mut out = [0u8; KEY_BYTES];
    pbkdf2::derive(
        pbkdf2::PBKDF2_HMAC_SHA256,
        iterations,
        salt,
        password,
        &mut out,
    );
    out
}

/// Whether two byte strings are equal, in time independent of where they differ.
fn equal(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b.iter())
            .fold(0u8, |difference, (x, y)| difference | (x ^ y))
            == 0
}

impl Verifier {
    /// The verifier of `password` with `salt` (fresh random bytes from the caller).
    pub fn new(password: &[u8], salt: &[u8], iterations: u32) -> Verifier {
        assert!((1..=ITERATIONS_MAX).contains(&iterations));
        assert!(!salt.is_empty());
        let salted = salted_password(password, salt, iterations);
        let client_key = hmac_sha256(&salted, b"Client Key");
        Verifier {
            iterations,
            salt: salt.to_vec(),
            stored_key: sha256(&client_key),
            server_key: hmac_sha256(&salted, b"Server Key"),
        }
    }

    /// PostgreSQL's text form: `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`.
    pub fn encode(&self) -> String {
        format!(
            "{MECHANISM}${}:{}${}:{}",
            self.iterations,
            BASE64.encode(&self.salt),
            BASE64.encode(self.stored_key),
            BASE64.encode(self.server_key)
        )
    }

    /// Parses the text form (what `encode` writes, and what `psql`'s `\password` sends as a
    /// role's PASSWORD). `None` for anything else.
    pub fn decode(text: &str) -> Option<Verifier> {
        let rest = text.strip_prefix(MECHANISM)?.strip_prefix('$')?;
        let (parameters, keys) = rest.split_once('$')?;
        let (iterations, salt) = parameters.split_once(':')?;
        let (stored, server) = keys.split_once(':')?;
        let iterations: u32 = iterations.parse().ok()?;
        if iterations == 0 || iterations > ITERATIONS_MAX {
            return None;
        }
        let salt = BASE64.decode(salt).ok()?;
        if salt.is_empty() {
            return None;
        }
        let key =
            |text: &str| -> Option<[u8; KEY_BYTES]> { BASE64.decode(text).ok()?.try_into().ok() };
        Some(Verifier {
            iterations,
            salt,
            stored_key: key(stored)?,
            server_key: key(server)?,
        })
    }

    /// Whether `password` is the one this verifier was made from (RESP `AUTH`, which sends
    /// the password itself).
    pub fn check_password(&self, password: &[u8]) -> bool {
        let salted = salted_password(password, &self.salt, self.iterations);
        let client_key = hmac_sha256(&salted, b"Client Key");
        equal(&sha256(&client_key), &self.stored_key)
    }
}

/// The server's state between its first message and the client's final one.
#[derive(Debug)]
pub struct Exchange {
    verifier: Verifier,
    /// The client's nonce followed by the server's.
    nonce: String,
    client_first_bare: String,
    server_first: String,
    /// The channel-binding header the client sent, base64-encoded (what `c=` must repeat).
    gs2_header_base64: String,
}

/// Handles the client-first message (`n,,n=user,r=nonce`): returns the server-first message
/// (`r=…,s=…,i=…`) and the state to finish with. `server_nonce` is printable ASCII without
/// commas (the caller's random bytes, base64-encoded).
pub fn server_first(
    verifier: Verifier,
    client_first: &[u8],
    server_nonce: &str,
) -> Result<(Exchange, String), ScramError> {
    assert!(!server_nonce.is_empty() && !server_nonce.contains(','));
    let text = std::str::from_utf8(client_first).map_err(|_| ScramError::Malformed("not UTF-8"))?;
    // gs2-header: a channel-binding flag, an optional authzid, then the bare message.
    let (flag, rest) = text
        .split_once(',')
        .ok_or(ScramError::Malformed("no GS2 header"))?;
    match flag {
        "n" | "y" => {}
        _ if flag.starts_with("p=") => {
            return Err(ScramError::Malformed(
                "channel binding is not supported (SCRAM-SHA-256-PLUS is not offered)",
            ))
        }
        _ => return Err(ScramError::Malformed("invalid channel-binding flag")),
    }
    let (authzid, bare) = rest
        .split_once(',')
        .ok_or(ScramError::Malformed("no GS2 header"))?;
    if !authzid.is_empty() {
        return Err(ScramError::Malformed(
            "an authorization identity is not supported",
        ));
    }
    let gs2_header = &text[..flag.len() + 1 + authzid.len() + 1];
    let mut client_nonce = None;
    for attribute in bare.split(',') {
        if let Some(nonce) = attribute.strip_prefix("r=") {
            client_nonce = Some(nonce);
        } else if attribute.starts_with("m=") {
            return Err(ScramError::Malformed(
                "mandatory extensions are not supported",
            ));
        }
    }
    let client_nonce = client_nonce
        .filter(|nonce| !nonce.is_empty())
        .ok_or(ScramError::Malformed("no client nonce"))?;
    if !client_nonce
        .bytes()
        .all(|byte| (0x21..=0x7e).contains(&byte) && byte != b',')
    {
        return Err(ScramError::Malformed("invalid client nonce"));
    }
    let nonce = format!("{client_nonce}{server_nonce}");
    let server_first = format!(
        "r={nonce},s={},i={}",
        BASE64.encode(&verifier.salt),
        verifier.iterations
    );
    let exchange = Exchange {
        verifier,
        nonce,
        client_first_bare: bare.to_string(),
        server_first: server_first.clone(),
        gs2_header_base64: BASE64.encode(gs2_header),
    };
    Ok((exchange, server_first))
}

impl Exchange {
    /// Handles the client-final message (`c=…,r=…,p=proof`): the server-final message
    /// (`v=signature`) when the proof matches the verifier.
    pub fn finish(self, client_final: &[u8]) -> Result<String, ScramError> {
        let text =
            std::str::from_utf8(client_final).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or(ScramError::Malformed("no proof"))?;
        let mut attributes = without_proof.split(',');
        let binding = attributes
            .next()
            .and_then(|attribute| attribute.strip_prefix("c="))
            .ok_or(ScramError::Malformed("no channel binding"))?;
        if binding != self.gs2_header_base64 {
            return Err(ScramError::Malformed("channel binding does not match"));
        }
        let nonce = attributes
            .next()
            .and_then(|attribute| attribute.strip_prefix("r="))
            .ok_or(ScramError::Malformed("no nonce"))?;
        if nonce != self.nonce {
            return Err(ScramError::Malformed("nonce does not match"));
        }
        let proof = BASE64
            .decode(proof)
            .map_err(|_| ScramError::Malformed("proof is not base64"))?;
        if proof.len() != KEY_BYTES {
            return Err(ScramError::Malformed("proof has the wrong length"));
        }
        let auth_message = format!(
            "{},{},{}",
            self.client_first_bare, self.server_first, without_proof
        );
        let client_signature = hmac_sha256(&self.verifier.stored_key, auth_message.as_bytes());
        let mut client_key = [0u8; KEY_BYTES];
        for (index, byte) in client_key.iter_mut().enumerate() {
            *byte = proof[index] ^ client_signature[index];
        }
        if !equal(&sha256(&client_key), &self.verifier.stored_key) {
            return Err(ScramError::WrongProof);
        }
        let server_signature = hmac_sha256(&self.verifier.server_key, auth_message.as_bytes());
        Ok(format!("v={}", BASE64.encode(server_signature)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The client side, for the tests only (clients are psql, libpq, tokio-postgres).
    fn client_final(password: &[u8], client_first_bare: &str, server_first: &str) -> String {
        let mut salt = None;
        let mut iterations = None;
        let mut nonce = None;
        for attribute in server_first.split(',') {
            match attribute.split_at(2) {
                ("r=", value) => nonce = Some(value.to_string()),
                ("s=", value) => salt = Some(BASE64.decode(value).unwrap()),
                ("i=", value) => iterations = Some(value.parse().unwrap()),
                _ => {}
            }
        }
        let salted = salted_password(password, &salt.unwrap(), iterations.unwrap());
        let client_key = hmac_sha256(&salted, b"Client Key");
        let stored_key = sha256(&client_key);
        let without_proof = format!("c=biws,r={}", nonce.unwrap());
        let auth = format!("{client_first_bare},{server_first},{without_proof}");
        let signature = hmac_sha256(&stored_key, auth.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(signature.iter())
            .map(|(a, b)| a ^ b)
            .collect();
        format!("{without_proof},p={}", BASE64.encode(proof))
    }

    #[test]
    fn rfc_7677_example_exchange_verifies() {
        // RFC 7677 §3: user "user", password "pencil".
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let verifier = Verifier::new(b"pencil", &salt, 4096);
        let client_first = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
        let (exchange, server_first) =
            server_first(verifier, client_first, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0").unwrap();
        assert_eq!(
            server_first,
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
        );
        let client_final = b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
        assert_eq!(
            exchange.finish(client_final).unwrap(),
            "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
    }

    #[test]
    fn a_wrong_password_is_refused_and_a_right_one_accepted() {
        let verifier = Verifier::new(b"right", b"0123456789abcdef", 16);
        for (password, accepted) in [(&b"right"[..], true), (&b"wrong"[..], false)] {
            let (exchange, first) = server_first(verifier.clone(), b"n,,n=,r=abc", "xyz").unwrap();
            let last = client_final(password, "n=,r=abc", &first);
            assert_eq!(exchange.finish(last.as_bytes()).is_ok(), accepted);
            assert_eq!(verifier.check_password(password), accepted);
        }
    }

    #[test]
    fn verifiers_round_trip_their_text_and_refuse_garbage() {
        let verifier = Verifier::new(b"secret", b"salt-salt", 4096);
        let text = verifier.encode();
        assert!(text.starts_with("SCRAM-SHA-256$4096:"));
        assert!(!text.contains("secret"));
        assert_eq!(Verifier::decode(&text), Some(verifier));
        for garbage in [
            "",
            "md5abc",
            "SCRAM-SHA-256$0:AA==$AA==:AA==",
            "SCRAM-SHA-256$x",
        ] {
            assert_eq!(Verifier::decode(garbage), None, "{garbage}");
        }
    }

    /// Client bytes from a seeded generator (mutations of valid messages and noise) never
    /// panic the exchange, and only the right proof passes.
    #[test]
    fn arbitrary_client_bytes_never_panic_the_exchange() {
        let verifier = Verifier::new(b"pw", b"salt", 2);
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let valid_first = b"n,,n=,r=abcdef".to_vec();
        let valid_last = {
            let (_, first) = server_first(verifier.clone(), &valid_first, "srv").unwrap();
            client_final(b"pw", "n=,r=abcdef", &first).into_bytes()
        };
        for round in 0..5_000 {
            let mut first = valid_first.clone();
            let mut last = valid_last.clone();
            for message in [&mut first, &mut last] {
                for _ in 0..(next() % 4) {
                    let at = (next() as usize) % (message.len() + 1);
                    match next() % 3 {
                        0 if at < message.len() => message[at] = next() as u8,
                        1 => message.insert(at, next() as u8),
                        _ => message.truncate(at),
                    }
                }
            }
            let Ok((exchange, _)) = server_first(verifier.clone(), &first, "srv") else {
                continue;
            };
            let accepted = exchange.finish(&last).is_ok();
            if accepted {
                assert_eq!(
                    last, valid_last,
                    "round {round}: only the right proof passes"
                );
            }
        }
    }

    #[test]
    fn malformed_client_messages_are_errors_not_panics() {
        let verifier = Verifier::new(b"p", b"s", 1);
        for first in [
            &b""[..],
            b"n",
            b"n,",
            b"x,,r=a",
            b"p=tls-unique,,r=a",
            b"n,,n=u",
            b"n,a=b,r=x",
            b"\xff",
        ] {
            assert!(server_first(verifier.clone(), first, "s").is_err());
        }
        for last in [
            &b""[..],
            b"c=biws",
            b"c=eSws,r=as,p=AA==",
            b"c=biws,r=as,p=!!",
            b"c=biws,r=zz,p=AA==",
        ] {
            let (exchange, _) = server_first(verifier.clone(), b"n,,n=,r=a", "s").unwrap();
            assert!(exchange.finish(last).is_err());
        }
    }
}
