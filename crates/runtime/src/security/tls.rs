//! TLS on the client ports (rustls 0.23 with the `ring` provider): the acceptor made from the
//! certificate chain and private key files of `[security]` (PEM). The RESP port then speaks
//! only TLS (`redis-cli --tls --cacert …`); the PostgreSQL port answers SSLRequest with 'S' and
//! refuses a session that did not ask for TLS (FATAL 28000), so `sslmode=require` and
//! `verify-full` work and `sslmode=disable` is refused.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;
use tokio_rustls::TlsAcceptor;

/// The acceptor for `certificate` (a PEM chain, the server's first) and `key` (PEM, PKCS#8,
/// PKCS#1 or SEC1).
pub fn acceptor(certificate: &Path, key: &Path) -> Result<TlsAcceptor, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(certificate)
        .and_then(|certificates| certificates.collect())
        .map_err(|error| format!("{}: {error}", certificate.display()))?;
    if chain.is_empty() {
        return Err(format!("{}: no certificate", certificate.display()));
    }
    let key =
        PrivateKeyDer::from_pem_file(key).map_err(|error| format!("{}: {error}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| error.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|error| format!("the TLS certificate and key do not fit: {error}"))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}
