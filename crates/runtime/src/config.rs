//! A node's configuration file (`tessera node --config FILE`), TOML:
//!
//! ```toml
//! cluster = 7                    # any number; nodes of different clusters refuse each other
//! replica = 0                    # this node's index in `replicas`
//! durability = "memory"          # or "disk"; see below
//! replication = "vr"             # or "skyros": nilext writes in one round trip (optional)
//! skyros_comm = true             # skyros: other writes too, when they commute (optional)
//! data_dir = "/var/lib/tessera/0"
//! tick_ms = 5
//!
//! [[replicas]]
//! peer = "10.0.0.1:7100"         # replica-to-replica TCP
//! client = "10.0.0.1:6379"       # RESP
//! pg = "10.0.0.1:5433"           # PostgreSQL wire protocol (optional)
//! # … one [[replicas]] table per replica, in index order
//!
//! [protocol]                     # optional; durations in ticks
//! heartbeat_ticks = 10
//!
//! [limits]                       # optional
//! bulk_bytes_max = 536870912
//! ```
//!
//! Durability: `disk` keeps a write-ahead log in `data_dir/wal` and survives any restart. `memory`
//! writes nothing but a marker file: a replica that restarts recovers its state from f + 1 peers
//! (VRR §4.3), so the group survives up to f replicas restarting at once, not more. If every
//! replica restarts, they all wait for a peer that still has the state (the log says so every
//! second); start a new cluster with empty data directories instead.

use serde::Deserialize;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use vr::{Config, Durability, Protocol};

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    pub cluster: u64,
    pub replica: u8,
    pub durability: DurabilityName,
    #[serde(default)]
    pub replication: ReplicationName,
    /// Skyros-Comm: this node's gateway sends non-nilext writes to every replica, and they
    /// complete in one round trip when they commute with every pending update.
    #[serde(default = "default_true")]
    pub skyros_comm: bool,
    pub data_dir: PathBuf,
    #[serde(default = "default_tick_ms")]
    pub tick_ms: u64,
    pub replicas: Vec<ReplicaAddress>,
    #[serde(default)]
    pub protocol: ProtocolKnobs,
    #[serde(default)]
    pub limits: LimitKnobs,
}

fn default_true() -> bool {
    true
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DurabilityName {
    Memory,
    Disk,
}

/// The group's replication protocol.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ReplicationName {
    #[default]
    Vr,
    Skyros,
}

impl ReplicationName {
    pub fn as_str(self) -> &'static str {
        match self {
            ReplicationName::Vr => "vr",
            ReplicationName::Skyros => "skyros",
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicaAddress {
    pub peer: SocketAddr,
    pub client: SocketAddr,
    /// The PostgreSQL wire protocol (psql, pgjdbc); none when left out.
    #[serde(default)]
    pub pg: Option<SocketAddr>,
}

/// Protocol overrides; anything left out keeps `vr::Config::new`'s default.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProtocolKnobs {
    pub batch_requests_max: Option<usize>,
    pub batch_linger_ticks: Option<u64>,
    pub pipeline_ops_max: Option<u64>,
    pub heartbeat_ticks: Option<u64>,
    pub primary_timeout_ticks: Option<u64>,
    pub view_change_timeout_ticks: Option<u64>,
    pub resend_ticks: Option<u64>,
    pub checkpoint_interval_ops: Option<u64>,
    pub checkpoint_interval_bytes: Option<u64>,
    pub log_retained_ops: Option<u64>,
    pub read_batch_max: Option<usize>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitKnobs {
    pub inline_bytes_max: usize,
    pub bulk_bytes_max: usize,
    pub array_elements_max: usize,
    /// Replica-to-replica frames (checkpoints travel in them).
    pub peer_frame_bytes_max: usize,
    /// A client's pending request bytes at most; past it the connection is closed.
    pub connection_buffer_bytes_max: usize,
}

impl Default for LimitKnobs {
    fn default() -> LimitKnobs {
        let resp = crate::resp_codec::Limits::default();
        LimitKnobs {
            inline_bytes_max: resp.inline_bytes_max,
            bulk_bytes_max: resp.bulk_bytes_max,
            array_elements_max: resp.array_elements_max,
            peer_frame_bytes_max: 1 << 30,
            connection_buffer_bytes_max: 1 << 30,
        }
    }
}

fn default_tick_ms() -> u64 {
    5
}

/// Why a configuration file is refused.
#[derive(Debug)]
pub enum ConfigFileError {
    /// The file could not be read.
    Read { path: PathBuf, reason: String },
    /// The TOML does not parse or has unknown or missing fields.
    Parse { path: PathBuf, reason: String },
    /// The values do not make a valid node.
    Invalid { reason: String },
}

impl fmt::Display for ConfigFileError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigFileError::Read { path, reason } => {
                write!(formatter, "cannot read {}: {reason}", path.display())
            }
            ConfigFileError::Parse { path, reason } => write!(
                formatter,
                "invalid configuration {}: {reason}",
                path.display()
            ),
            ConfigFileError::Invalid { reason } => {
                write!(formatter, "invalid configuration: {reason}")
            }
        }
    }
}

impl std::error::Error for ConfigFileError {}

impl NodeConfig {
    pub fn load(path: &std::path::Path) -> Result<NodeConfig, ConfigFileError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigFileError::Read {
            path: path.to_path_buf(),
            reason: error.to_string(),
        })?;
        let config: NodeConfig = toml::from_str(&text).map_err(|error| ConfigFileError::Parse {
            path: path.to_path_buf(),
            reason: error.to_string(),
        })?;
        config.protocol_config()?;
        Ok(config)
    }

    /// The protocol configuration this node runs with, validated.
    pub fn protocol_config(&self) -> Result<Config, ConfigFileError> {
        let replica_count =
            u8::try_from(self.replicas.len()).map_err(|_| ConfigFileError::Invalid {
                reason: "at most 255 replicas".into(),
            })?;
        if self.replica >= replica_count {
            return Err(ConfigFileError::Invalid {
                reason: format!(
                    "replica {} is not in a list of {replica_count} replicas",
                    self.replica
                ),
            });
        }
        if self.tick_ms == 0 {
            return Err(ConfigFileError::Invalid {
                reason: "tick_ms must be positive".into(),
            });
        }
        let durability = match self.durability {
            DurabilityName::Memory => Durability::Memory,
            DurabilityName::Disk => Durability::Disk,
        };
        let mut config = Config::new(replica_count, durability);
        config.protocol = match self.replication {
            ReplicationName::Vr => Protocol::Vr,
            ReplicationName::Skyros => Protocol::Skyros,
        };
        let knobs = &self.protocol;
        macro_rules! knob {
            ($name:ident) => {
                if let Some(value) = knobs.$name {
                    config.$name = value;
                }
            };
        }
        knob!(batch_requests_max);
        knob!(batch_linger_ticks);
        knob!(pipeline_ops_max);
        knob!(heartbeat_ticks);
        knob!(primary_timeout_ticks);
        knob!(view_change_timeout_ticks);
        knob!(resend_ticks);
        knob!(checkpoint_interval_ops);
        knob!(checkpoint_interval_bytes);
        knob!(log_retained_ops);
        knob!(read_batch_max);
        config
            .validate()
            .map_err(|error| ConfigFileError::Invalid {
                reason: error.to_string(),
            })?;
        Ok(config)
    }

    pub fn resp_limits(&self) -> crate::resp_codec::Limits {
        crate::resp_codec::Limits {
            inline_bytes_max: self.limits.inline_bytes_max,
            bulk_bytes_max: self.limits.bulk_bytes_max,
            array_elements_max: self.limits.array_elements_max,
        }
    }

    /// A configuration file's text for one node of a cluster on the given addresses.
    pub fn render(
        cluster: u64,
        replica: u8,
        durability: DurabilityName,
        replication: ReplicationName,
        data_dir: &std::path::Path,
        replicas: &[ReplicaAddress],
    ) -> String {
        let durability = match durability {
            DurabilityName::Memory => "memory",
            DurabilityName::Disk => "disk",
        };
        let mut text = format!(
            "cluster = {cluster}\nreplica = {replica}\ndurability = \"{durability}\"\nreplication = \"{}\"\ndata_dir = {:?}\ntick_ms = {}\n",
            replication.as_str(),
            data_dir.display().to_string(),
            default_tick_ms()
        );
        for address in replicas {
            text.push_str(&format!(
                "\n[[replicas]]\npeer = \"{}\"\nclient = \"{}\"\n",
                address.peer, address.client
            ));
            if let Some(pg) = address.pg {
                text.push_str(&format!("pg = \"{pg}\"\n"));
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rendered_configuration_parses_back() {
        let replicas: Vec<ReplicaAddress> = (0..3)
            .map(|index| ReplicaAddress {
                peer: format!("127.0.0.1:{}", 7100 + index).parse().unwrap(),
                client: format!("127.0.0.1:{}", 7000 + index).parse().unwrap(),
                pg: Some(format!("127.0.0.1:{}", 5433 + index).parse().unwrap()),
            })
            .collect();
        let text = NodeConfig::render(
            9,
            1,
            DurabilityName::Disk,
            ReplicationName::Skyros,
            std::path::Path::new("/tmp/x"),
            &replicas,
        );
        let config: NodeConfig = toml::from_str(&text).unwrap();
        assert_eq!(config.replica, 1);
        assert_eq!(config.protocol_config().unwrap().protocol, Protocol::Skyros);
        assert_eq!(config.replicas.len(), 3);
        assert_eq!(
            config.protocol_config().unwrap().durability,
            Durability::Disk
        );
    }

    #[test]
    fn unknown_fields_and_bad_values_are_refused_with_a_reason() {
        let bad = "cluster = 1\nreplica = 3\ndurability = \"memory\"\ndata_dir = \"/tmp\"\n[[replicas]]\npeer = \"127.0.0.1:1\"\nclient = \"127.0.0.1:2\"\n";
        let config: NodeConfig = toml::from_str(bad).unwrap();
        assert!(config
            .protocol_config()
            .unwrap_err()
            .to_string()
            .contains("replica 3"));
        let unknown = format!("{bad}\n[protocol]\nwarp_speed = 9\n");
        assert!(toml::from_str::<NodeConfig>(&unknown).is_err());
    }
}
