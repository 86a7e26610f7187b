//! `tessera dev --tls`: a local certificate authority and a server certificate it signs (for
//! `localhost` and 127.0.0.1), made with rcgen (ring), written to `<data-dir>/tls/`. The CA's
//! key is not kept: it signs the one certificate and is dropped, so the CA cannot sign another.

use anyhow::Context;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use std::path::{Path, PathBuf};

/// The files a TLS dev cluster uses.
pub struct DevTls {
    /// The CA certificate clients verify the server with (`sslrootcert`, `--cacert`).
    pub ca: PathBuf,
    /// The server's certificate (`security.tls_cert_file`).
    pub certificate: PathBuf,
    /// The server's private key (`security.tls_key_file`), owner-only.
    pub key: PathBuf,
}

/// The files under `data_dir/tls`: kept if they exist (a disk cluster started again), made
/// otherwise.
pub fn prepare(data_dir: &Path) -> anyhow::Result<DevTls> {
    let directory = data_dir.join("tls");
    let files = DevTls {
        ca: directory.join("ca.pem"),
        certificate: directory.join("server.pem"),
        key: directory.join("server.key"),
    };
    if files.ca.exists() && files.certificate.exists() && files.key.exists() {
        return Ok(files);
    }
    std::fs::create_dir_all(&directory)
        .with_context(|| format!("cannot create {}", directory.display()))?;
    let (ca, certificate, key) = generate().context("cannot make the dev certificates")?;
    std::fs::write(&files.ca, ca)?;
    std::fs::write(&files.certificate, certificate)?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    std::io::Write::write_all(&mut options.open(&files.key)?, key.as_bytes())?;
    Ok(files)
}

/// (CA certificate, server certificate, server key), PEM.
fn generate() -> Result<(String, String, String), rcgen::Error> {
    let mut authority = CertificateParams::new(Vec::<String>::new())?;
    authority.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    authority
        .distinguished_name
        .push(DnType::CommonName, "Tessera dev CA");
    authority.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let authority_key = KeyPair::generate()?;
    let ca = authority.self_signed(&authority_key)?;
    let issuer = Issuer::new(authority, authority_key);
    let mut server =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])?;
    server
        .distinguished_name
        .push(DnType::CommonName, "tessera dev");
    server.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_key = KeyPair::generate()?;
    let certificate = server.signed_by(&server_key, &issuer)?;
    Ok((ca.pem(), certificate.pem(), server_key.serialize_pem()))
}
