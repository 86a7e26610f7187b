//! What the PostgreSQL-protocol load generators (`bench ticket`, `bench tpcc`) share: a
//! connection to one of their `host:port`s, and appending their JSON lines.

use anyhow::Context;
use std::io::Write;
use std::time::Duration;
use tokio_postgres::{Client, NoTls};

/// Connects to `hosts[index mod len]` (`host:port`) and drives the connection on its own task.
pub async fn connect(
    hosts: &[String],
    index: usize,
    user: &str,
    dbname: &str,
    password: Option<&str>,
) -> anyhow::Result<Client> {
    let host = &hosts[index % hosts.len()];
    let (address, port) = host
        .rsplit_once(':')
        .with_context(|| format!("{host:?} is not host:port"))?;
    let mut config = tokio_postgres::Config::new();
    config
        .host(address)
        .port(port.parse().context("bad port")?)
        .user(user)
        .dbname(dbname)
        .connect_timeout(Duration::from_secs(30));
    if let Some(password) = password {
        config.password(password);
    }
    let (client, connection) = config.connect(NoTls).await.map_err(|error| {
        let reason = match error.as_db_error() {
            Some(db) => format!("{}: {}", db.code().code(), db.message()),
            None => error.to_string(),
        };
        anyhow::anyhow!("cannot connect to {host}: {reason}")
    })?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// Appends one JSON line to `path`, if there is one.
pub fn append_json(path: Option<&std::path::Path>, json: &str) -> anyhow::Result<()> {
    if let Some(path) = path {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        writeln!(file, "{json}")?;
    }
    Ok(())
}
