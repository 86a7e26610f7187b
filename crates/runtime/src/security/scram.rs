//! SCRAM-SHA-256 (RFC 5802, RFC 7677): the stored verifier, a password check against it
//! (RESP `AUTH`), and the server side of the pgwire exchange, which the `pgwire` crate's
//! `ScramServerAuth` runs (issue 23: not a hand-written SCRAM). This module only frames what
//! pgwire needs and refuses what it would accept but PostgreSQL does not.
//!
//! The stored verifier is the SaltedPassword (`Hi(SASLprep(password), salt, i)`) with its salt
//! and iteration count, text `SCRAM-SHA-256-SALTED$<iterations>:<salt>$<SaltedPassword>`:
//! pgwire's server recomputes ClientKey, StoredKey and ServerKey from it. PostgreSQL stores
//! only `StoredKey:ServerKey`, from which one cannot log in; the SaltedPassword is enough to
//! log in as the user (not to learn the password). `docs/security.md` states the trade-off.
//!
//! Not done: channel binding (`SCRAM-SHA-256-PLUS` is not offered, and a client that requires
//! it is refused), authorization identities, mandatory extensions (`m=`).

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use pgwire::api::auth::sasl::scram::{
    gen_salted_password, ScramServerAuth, ScramServerAuthWaitingForClientFinal,
};
use pgwire::api::auth::Password;
use pgwire::error::PgWireError;
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
/// The stored verifier's scheme tag (not PostgreSQL's `SCRAM-SHA-256$`: another content).
const SCHEME: &str = "SCRAM-SHA-256-SALTED";

/// A stored SCRAM-SHA-256 verifier: the salted password, never the password itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verifier {
    pub iterations: u32,
    pub salt: Vec<u8>,
    /// `Hi(SASLprep(password), salt, iterations)`: what pgwire's server checks proofs with.
    pub salted_password: [u8; KEY_BYTES],
}

/// Why an exchange failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScramError {
    /// The client's message is not what the mechanism expects (08P01).
    Malformed(String),
    /// The proof does not match the verifier: a wrong password (28P01).
    WrongProof,
}

/// PBKDF2-HMAC-SHA-256 of bytes that are not UTF-8 (a RESP password can be any bytes;
/// SASLprep applies only to text, as PostgreSQL does when a password does not normalise).
fn salted_bytes(password: &[u8], salt: &[u8], iterations: u32) -> [u8; KEY_BYTES] {
    let iterations = NonZeroU32::new(iterations).expect("verifiers have iterations ≥ 1");
    let mut out = [0u8; KEY_BYTES];
    ring::pbkdf2::derive(
        ring::pbkdf2::PBKDF2_HMAC_SHA256,
        iterations,
        salt,
        password,
        &mut out,
    );
    out
}

/// The SaltedPassword of `password` as a client computes it (pgwire's `gen_salted_password`,
/// with SASLprep, for text).
fn salted(password: &[u8], salt: &[u8], iterations: u32) -> [u8; KEY_BYTES] {
    match std::str::from_utf8(password) {
        Ok(text) => gen_salted_password(text, salt, iterations as usize)
            .try_into()
            .expect("SHA-256 PBKDF2 output is 32 bytes"),
        Err(_) => salted_bytes(password, salt, iterations),
    }
}

/// Whether two byte strings are equal, in time independent of where they differ.
pub fn equal(a: &[u8], b: &[u8]) -> bool {
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
        Verifier {
            iterations,
            salt: salt.to_vec(),
            salted_password: salted(password, salt, iterations),
        }
    }

    /// The text form kept in the roles table:
    /// `SCRAM-SHA-256-SALTED$<iterations>:<salt>$<SaltedPassword>` (base64).
    pub fn encode(&self) -> String {
        format!(
            "{SCHEME}${}:{}${}",
            self.iterations,
            BASE64.encode(&self.salt),
            BASE64.encode(self.salted_password)
        )
    }

    /// Parses the text form `encode` writes. `None` for anything else (also for PostgreSQL's
    /// `SCRAM-SHA-256$…:StoredKey:ServerKey`, see `is_postgres_verifier`).
    pub fn decode(text: &str) -> Option<Verifier> {
        let rest = text.strip_prefix(SCHEME)?.strip_prefix('$')?;
        let (parameters, key) = rest.split_once('$')?;
        let (iterations, salt) = parameters.split_once(':')?;
        let iterations: u32 = iterations.parse().ok()?;
        if iterations == 0 || iterations > ITERATIONS_MAX {
            return None;
        }
        let salt = BASE64.decode(salt).ok()?;
        if salt.is_empty() {
            return None;
        }
        Some(Verifier {
            iterations,
            salt,
            salted_password: BASE64.decode(key).ok()?.try_into().ok()?,
        })
    }

    /// Whether `password` is the one this verifier was made from (RESP `AUTH`, which sends
    /// the password itself), compared in constant time.
    pub fn check_password(&self, password: &[u8]) -> bool {
        equal(
            &salted(password, &self.salt, self.iterations),
            &self.salted_password,
        )
    }

    /// A fingerprint of the verifier that does not let one log in (`ACL GETUSER`'s
    /// `#<hex>`): SHA-256 of the StoredKey.
    pub fn fingerprint(&self) -> [u8; KEY_BYTES] {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &self.salted_password);
        let client_key = ring::hmac::sign(&key, b"Client Key");
        let stored_key = ring::digest::digest(&ring::digest::SHA256, client_key.as_ref());
        let mut out = [0u8; KEY_BYTES];
        out.copy_from_slice(
            ring::digest::digest(&ring::digest::SHA256, stored_key.as_ref()).as_ref(),
        );
        out
    }
}

/// Whether `text` is a PostgreSQL SCRAM verifier (`SCRAM-SHA-256$<i>:<salt>$<StoredKey>:
/// <ServerKey>`, what `psql`'s `\password` sends and what rows of older versions hold): it
/// cannot drive pgwire's server, which needs the SaltedPassword.
pub fn is_postgres_verifier(text: &str) -> bool {
    text.starts_with("SCRAM-SHA-256$")
}

/// The server's state between its first message and the client's final one.
#[derive(Debug)]
pub struct Exchange {
    waiting: ScramServerAuthWaitingForClientFinal,
    /// The client's nonce followed by the server's (what the final message must repeat).
    nonce: String,
}

/// Refuses in a client-first message what pgwire accepts but this server does not support:
/// channel binding (`p=`), an authorization identity, mandatory extensions, an empty nonce.
fn refuse_unsupported(text: &str) -> Result<(), ScramError> {
    let malformed = |reason: &str| Err(ScramError::Malformed(reason.to_string()));
    let mut attributes = text.split(',');
    match attributes.next() {
        Some("n" | "y") => {}
        Some(flag) if flag.starts_with("p=") => {
            return malformed(
                "channel binding is not supported (SCRAM-SHA-256-PLUS is not offered)",
            )
        }
        _ => return malformed("invalid channel-binding flag"),
    }
    match attributes.next() {
        Some("") => {}
        Some(_) => return malformed("an authorization identity is not supported"),
        None => return malformed("no GS2 header"),
    }
    let mut nonce = None;
    for attribute in attributes {
        if attribute.starts_with("m=") {
            return malformed("mandatory extensions are not supported");
        }
        if let Some(value) = attribute.strip_prefix("r=") {
            nonce = nonce.or(Some(value));
        }
    }
    match nonce {
        Some(nonce) if !nonce.is_empty() && nonce.bytes().all(|b| (0x21..=0x7e).contains(&b)) => {
            Ok(())
        }
        _ => malformed("no valid client nonce"),
    }
}

fn from_pgwire(error: PgWireError) -> ScramError {
    match error {
        PgWireError::InvalidPassword(_) => ScramError::WrongProof,
        other => ScramError::Malformed(other.to_string()),
    }
}

/// Handles the client-first message (`n,,n=user,r=nonce`) with pgwire's `ScramServerAuth`:
/// returns the server-first message (`r=…,s=…,i=…`, pgwire adds a random server nonce) and
/// the state to finish with.
pub fn server_first(
    verifier: &Verifier,
    client_first: &[u8],
) -> Result<(Exchange, String), ScramError> {
    let text = std::str::from_utf8(client_first)
        .map_err(|_| ScramError::Malformed("not UTF-8".to_string()))?;
    refuse_unsupported(text)?;
    let mut server = ScramServerAuth::new();
    server.set_iterations(verifier.iterations as usize);
    let password = Password::new(
        Some(verifier.salt.clone()),
        verifier.salted_password.to_vec(),
    );
    let (server_first, waiting) = server
        .on_client_first_message(client_first, password)
        .map_err(from_pgwire)?;
    let nonce = server_first
        .strip_prefix("r=")
        .and_then(|rest| rest.split(',').next())
        .expect("pgwire's server-first message starts with the nonce")
        .to_string();
    Ok((Exchange { waiting, nonce }, server_first))
}

impl Exchange {
    /// Handles the client-final message (`c=…,r=…,p=proof`): the server-final message
    /// (`v=signature`) when the proof matches the verifier. The nonce must be the exchange's
    /// (RFC 5802 §5.1; pgwire does not check it, the proof covers it anyway).
    pub fn finish(self, client_final: &[u8]) -> Result<String, ScramError> {
        let text = std::str::from_utf8(client_final)
            .map_err(|_| ScramError::Malformed("not UTF-8".to_string()))?;
        let nonce = text.split(',').nth(1).and_then(|a| a.strip_prefix("r="));
        if nonce != Some(self.nonce.as_str()) {
            return Err(ScramError::Malformed("nonce does not match".to_string()));
        }
        self.waiting
            .on_client_final_message(client_final)
            .map_err(from_pgwire)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The client side, for tests only (clients are psql, libpq, psycopg, pgjdbc).
    pub(crate) fn client_final(
        password: &[u8],
        client_first_bare: &str,
        server_first: &str,
    ) -> String {
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
        let salted = salted(password, &salt.unwrap(), iterations.unwrap());
        let hmac = |key: &[u8], message: &[u8]| {
            ring::hmac::sign(&ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key), message)
        };
        let client_key = hmac(&salted, b"Client Key");
        let stored_key = ring::digest::digest(&ring::digest::SHA256, client_key.as_ref());
        let without_proof = format!("c=biws,r={}", nonce.unwrap());
        let auth = format!("{client_first_bare},{server_first},{without_proof}");
        let signature = hmac(stored_key.as_ref(), auth.as_bytes());
        let proof: Vec<u8> = client_key
            .as_ref()
            .iter()
            .zip(signature.as_ref())
            .map(|(a, b)| a ^ b)
            .collect();
        format!("{without_proof},p={}", BASE64.encode(proof))
    }

    #[test]
    fn rfc_7677_salted_password_and_keys() {
        // RFC 7677 §3: user "user", password "pencil"; the client's proof in the RFC is for
        // its nonces, so check the keys the exchange derives instead.
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let verifier = Verifier::new(b"pencil", &salt, 4096);
        let (exchange, first) = server_first(&verifier, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
            .expect("a valid client-first");
        assert!(first.starts_with("r=rOprNGfwEbeRWgbNEkqO"));
        assert!(first.ends_with(",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"));
        let last = client_final(b"pencil", "n=user,r=rOprNGfwEbeRWgbNEkqO", &first);
        assert!(exchange.finish(last.as_bytes()).unwrap().starts_with("v="));
    }

    #[test]
    fn a_wrong_password_is_refused_and_a_right_one_accepted() {
        let verifier = Verifier::new(b"right", b"0123456789abcdef", 16);
        for (password, accepted) in [(&b"right"[..], true), (&b"wrong"[..], false)] {
            let (exchange, first) = server_first(&verifier, b"n,,n=,r=abc").unwrap();
            let last = client_final(password, "n=,r=abc", &first);
            let result = exchange.finish(last.as_bytes());
            assert_eq!(result.is_ok(), accepted);
            if !accepted {
                assert_eq!(result, Err(ScramError::WrongProof));
            }
            assert_eq!(verifier.check_password(password), accepted);
        }
    }

    #[test]
    fn verifiers_round_trip_their_text_and_refuse_garbage() {
        let verifier = Verifier::new(b"secret", b"salt-salt", 4096);
        let text = verifier.encode();
        assert!(text.starts_with("SCRAM-SHA-256-SALTED$4096:"));
        assert!(!text.contains("secret"));
        assert_eq!(Verifier::decode(&text), Some(verifier));
        let postgres = "SCRAM-SHA-256$4096:AAAA$AAAA:AAAA";
        assert!(is_postgres_verifier(postgres));
        for garbage in ["", "md5abc", "SCRAM-SHA-256-SALTED$0:AA==$AA==", postgres] {
            assert_eq!(Verifier::decode(garbage), None, "{garbage}");
        }
    }

    #[test]
    fn a_replayed_final_message_fails_in_a_new_exchange() {
        let verifier = Verifier::new(b"pw", b"salt", 2);
        let (_, first) = server_first(&verifier, b"n,,n=,r=abc").unwrap();
        let last = client_final(b"pw", "n=,r=abc", &first);
        let (again, _) = server_first(&verifier, b"n,,n=,r=abc").unwrap();
        assert!(matches!(
            again.finish(last.as_bytes()),
            Err(ScramError::Malformed(_))
        ));
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
        for round in 0..2_000 {
            let mut first = valid_first.clone();
            for _ in 0..(next() % 4) {
                let at = (next() as usize) % (first.len() + 1);
                match next() % 3 {
                    0 if at < first.len() => first[at] = next() as u8,
                    1 => first.insert(at, next() as u8),
                    _ => first.truncate(at),
                }
            }
            let Ok((exchange, server)) = server_first(&verifier, &first) else {
                continue;
            };
            let valid_last = client_final(b"pw", "n=,r=abcdef", &server).into_bytes();
            let mut last = valid_last.clone();
            for _ in 0..(next() % 4) {
                let at = (next() as usize) % (last.len() + 1);
                match next() % 3 {
                    0 if at < last.len() => last[at] = next() as u8,
                    1 => last.insert(at, next() as u8),
                    _ => last.truncate(at),
                }
            }
            if exchange.finish(&last).is_ok() {
                assert!(
                    first == valid_first && last == valid_last,
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
            b"p=tls-server-end-point,,n=,r=a",
            b"n,,n=u",
            b"n,a=b,n=,r=x",
            b"n,,m=x,n=,r=x",
            b"\xff",
        ] {
            assert!(server_first(&verifier, first).is_err(), "{first:?}");
        }
        for last in [
            &b""[..],
            b"c=biws",
            b"c=eSws,r=as,p=AA==",
            b"c=biws,r=as,p=!!",
            b"c=biws,r=zz,p=AA==",
        ] {
            let (exchange, _) = server_first(&verifier, b"n,,n=,r=a").unwrap();
            assert!(exchange.finish(last).is_err());
        }
    }
}
