//! A tiny synchronous RESP client for `INFO`: enough for `tessera status` and `tessera dev`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// INFO's fields, key → value.
pub type Fields = BTreeMap<String, String>;

/// The fields of `INFO` as key → value, after `AUTH user password` when `credentials` are
/// given, over TLS verified with the CA certificate `ca` when given.
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

/// The keys of `# Keyspace` (`db0:keys=N,...`; absent when there are none).
fn keys(fields: &Fields) -> String {
    fields
        .get("db0")
        .and_then(|db0| db0.strip_prefix("keys="))
        .and_then(|rest| rest.split(',').next())
        .unwrap_or("0")
        .to_string()
}

/// How an operator's tool reaches a cluster's RESP ports: the admin's user and password (read
/// from `security.admin_password_file`, unless the cluster is insecure) and, with TLS, the CA
/// certificate `ca.pem` beside the server certificate (where `tessera dev --tls` writes it).
pub fn access_of(
    config: &runtime::ecast::config::ClusterConfig,
) -> (Option<(String, String)>, Option<std::path::PathBuf>) {
    let security = &config.security;
    let credentials = (!security.insecure)
        .then(|| std::fs::read_to_string(security.admin_password_path(&config.data_dir)).ok())
        .flatten()
        .and_then(|text| text.lines().next().map(str::to_string))
        .map(|password| (security.admin_user.clone(), password));
    let ca = security
        .tls_cert_file
        .as_ref()
        .and_then(|certificate| Some(certificate.parent()?.join("ca.pem")));
    (credentials, ca)
}

/// One line per storage process, from its `INFO`: protocol, durability, the partition replicas
/// it runs (primaries, replicas in a view change or recovery), keys over those replicas (a key
/// is counted once per replica of its partition), how many of its
/// gateway's Skyros groups are in 2-RTT mode, and the SQL statements per shared engine batch
/// its replicas ran (the statements of one log entry share a scan cycle; `-` before any).
pub fn status_table(config: &runtime::ecast::config::ClusterConfig) -> String {
    let mut table = format!(
        "{:>4}  {:<21} {:<18} {:<7} {:>8} {:>9} {:>10} {:>9} {:>8} {:>11}\n",
        "id",
        "resp",
        "protocol",
        "durable",
        "replicas",
        "primaries",
        "view-chg",
        "keys",
        "2-rtt",
        "stmts/batch"
    );
    let (credentials, ca) = access_of(config);
    let credentials = credentials
        .as_ref()
        .map(|(user, password)| (user.as_str(), password.as_str()));
    for storage in &config.storage {
        let address = storage.client.to_string();
        match info_as(&address, credentials, ca.as_deref()) {
            Ok(fields) => {
                let field = |name: &str| {
                    fields
                        .get(&format!("tessera_{name}"))
                        .cloned()
                        .unwrap_or_else(|| "?".to_string())
                };
                let number = |name: &str| {
                    fields
                        .get(&format!("tessera_{name}"))
                        .and_then(|value| value.parse::<u64>().ok())
                };
                let per_batch = match (number("sql_batches"), number("sql_batched_statements")) {
                    (Some(batches), Some(statements)) if batches > 0 => {
                        format!("{:.2}", statements as f64 / batches as f64)
                    }
                    _ => "-".to_string(),
                };
                table.push_str(&format!(
                    "{:>4}  {:<21} {:<18} {:<7} {:>8} {:>9} {:>10} {:>9} {:>8} {:>11}\n",
                    storage.id,
                    address,
                    field("protocol"),
                    field("durability"),
                    field("partition_replicas"),
                    field("partition_primaries"),
                    field("partition_replicas_not_normal"),
                    keys(&fields),
                    field("skyros_adapt_two_rtt"),
                    per_batch,
                ));
            }
            Err(reason) => table.push_str(&format!(
                "{:>4}  {address:<21} unreachable: {reason}\n",
                storage.id
            )),
        }
    }
    table
}
