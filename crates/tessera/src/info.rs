//! A tiny synchronous RESP client for `INFO`: enough for `tessera status` and `tessera dev`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// INFO's fields, key → value.
pub type Fields = BTreeMap<String, String>;

/// The fields of `INFO` as key → value.
pub fn info(address: &str) -> Result<Fields, String> {
    info_as(address, None, None)
}

/// As `info`, after `AUTH user password` when `credentials` are given, over TLS verified
/// with the CA certificate `ca` when given.
pub fn info_as(
    address: &str,
    credentials: Option<(&str, &str)>,
    ca: Option<&std::path::Path>,
) -> Result<Fields, String> {
    let socket_address = address
        .parse()
        .map_err(|_| format!("{address} is not an address"))?;
    let stream = TcpStream::connect_timeout(&socket_address, Duration::from_millis(300))
        .map_err(|error| error.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(|error| error.to_string())?;
    match ca {
        None => exchange(stream, credentials),
        Some(ca) => exchange(tls_client(stream, &socket_address, ca)?, credentials),
    }
}

/// A TLS client over `stream` that trusts only `ca`'s certificates (rustls, ring).
fn tls_client(
    stream: TcpStream,
    address: &std::net::SocketAddr,
    ca: &std::path::Path,
) -> Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_file_iter(ca).map_err(|error| error.to_string())? {
        roots
            .add(certificate.map_err(|error| error.to_string())?)
            .map_err(|error| error.to_string())?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| error.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::from(address.ip());
    let connection = rustls::ClientConnection::new(std::sync::Arc::new(config), name)
        .map_err(|error| error.to_string())?;
    Ok(rustls::StreamOwned::new(connection, stream))
}

/// Sends AUTH (if `credentials`) and INFO on `stream`; INFO's fields.
fn exchange<S: Read + Write>(
    mut stream: S,
    credentials: Option<(&str, &str)>,
) -> Result<Fields, String> {
    let mut request = Vec::new();
    if let Some((user, password)) = credentials {
        for part in [
            "*3\r\n$4\r\nAUTH\r\n".to_string(),
            format!("${}\r\n{user}\r\n", user.len()),
            format!("${}\r\n{password}\r\n", password.len()),
        ] {
            request.extend_from_slice(part.as_bytes());
        }
    }
    request.extend_from_slice(b"*1\r\n$4\r\nINFO\r\n");
    stream
        .write_all(&request)
        .and_then(|()| stream.flush())
        .map_err(|error| error.to_string())?;
    let mut reader = BufReader::new(stream);
    if credentials.is_some() {
        let mut line = String::new();
        reader
            .read_line(&mut line)
            .map_err(|error| error.to_string())?;
        if line.trim_end() != "+OK" {
            return Err(format!("AUTH refused: {}", line.trim()));
        }
    }
    let mut header = String::new();
    reader
        .read_line(&mut header)
        .map_err(|error| error.to_string())?;
    let length: usize = header
        .strip_prefix('$')
        .and_then(|rest| rest.trim().parse().ok())
        .ok_or_else(|| format!("unexpected reply {:?}", header.trim()))?;
    if length > 16 << 20 {
        return Err("INFO reply too large".to_string());
    }
    let mut body = vec![0u8; length];
    reader
        .read_exact(&mut body)
        .map_err(|error| error.to_string())?;
    let text = String::from_utf8_lossy(&body);
    Ok(text
        .lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(key, value)| (key.to_string(), value.trim().to_string()))
        .collect())
}

/// One line per replica: role, status, view, commit number, lag behind the highest.
pub fn status_table(nodes: &[String]) -> String {
    let answers: Vec<(String, Result<Fields, String>)> = nodes
        .iter()
        .map(|node| (node.clone(), info(node)))
        .collect();
    let commit_max = answers
        .iter()
        .filter_map(|(_, answer)| {
            answer
                .as_ref()
                .ok()?
                .get("tessera_commit_number")?
                .parse::<u64>()
                .ok()
        })
        .max()
        .unwrap_or(0);
    let mut table = format!(
        "{:<22} {:>7} {:<12} {:>6} {:>12} {:>8}\n",
        "node", "replica", "role", "view", "commit", "lag"
    );
    for (node, answer) in answers {
        match answer {
            Ok(fields) => {
                let field =
                    |name: &str| fields.get(name).cloned().unwrap_or_else(|| "?".to_string());
                let commit = field("tessera_commit_number");
                let lag = commit.parse::<u64>().map_or("?".to_string(), |commit| {
                    (commit_max - commit.min(commit_max)).to_string()
                });
                table.push_str(&format!(
                    "{:<22} {:>7} {:<12} {:>6} {:>12} {:>8}\n",
                    node,
                    field("tessera_replica_index"),
                    field("tessera_role"),
                    field("tessera_view"),
                    commit,
                    lag
                ));
            }
            Err(reason) => table.push_str(&format!("{node:<22} unreachable: {reason}\n")),
        }
    }
    table
}
