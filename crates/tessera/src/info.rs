//! A tiny synchronous RESP client for `INFO`: enough for `tessera status` and `tessera dev`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// INFO's fields, key → value.
pub type Fields = BTreeMap<String, String>;

/// The fields of `INFO` as key → value.
pub fn info(address: &str) -> Result<Fields, String> {
    let socket_address = address
        .parse()
        .map_err(|_| format!("{address} is not an address"))?;
    let mut stream = TcpStream::connect_timeout(&socket_address, Duration::from_millis(300))
        .map_err(|error| error.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(|error| error.to_string())?;
    stream
        .write_all(b"*1\r\n$4\r\nINFO\r\n")
        .map_err(|error| error.to_string())?;
    let mut reader = BufReader::new(stream);
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

/// One line per storage process, from its `INFO`: protocol, durability, the partition replicas
/// it runs (primaries, replicas in a view change or recovery), keys over those replicas (a key
/// is counted once per replica of its partition), and how many of its
/// gateway's Skyros groups are in 2-RTT mode.
pub fn status_table(config: &runtime::ecast::config::ClusterConfig) -> String {
    let mut table = format!(
        "{:>4}  {:<21} {:<18} {:<7} {:>8} {:>9} {:>10} {:>9} {:>8}\n",
        "id", "resp", "protocol", "durable", "replicas", "primaries", "view-chg", "keys", "2-rtt"
    );
    for storage in &config.storage {
        let address = storage.client.to_string();
        match info(&address) {
            Ok(fields) => {
                let field = |name: &str| {
                    fields
                        .get(&format!("tessera_{name}"))
                        .cloned()
                        .unwrap_or_else(|| "?".to_string())
                };
                table.push_str(&format!(
                    "{:>4}  {:<21} {:<18} {:<7} {:>8} {:>9} {:>10} {:>9} {:>8}\n",
                    storage.id,
                    address,
                    field("protocol"),
                    field("durability"),
                    field("partition_replicas"),
                    field("partition_primaries"),
                    field("partition_replicas_not_normal"),
                    keys(&fields),
                    field("skyros_adapt_two_rtt"),
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
