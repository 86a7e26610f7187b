//! The cluster file every process of a partitioned (`sequenced`) cluster reads: the router
//! group's addresses, the storage processes with their ring positions and addresses, and the
//! shared knobs. One file for the whole cluster; a process is told its role and index on the
//! command line (`tessera node --cluster FILE --router 0`).

use super::payload::KeyPlacement;
use placement::{Configuration, Position, PositionSet, ProcessId};
use serde::Deserialize;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// Identifies the cluster in logs.
    pub cluster: u64,
    /// Real milliseconds per protocol tick.
    #[serde(default = "default_tick_ms")]
    pub tick_ms: u64,
    /// Replicas per partition (successor replication on the ring).
    pub replication: u8,
    /// Where each process keeps its marker files and logs (`router-<i>`, `storage-<id>`).
    pub data_dir: PathBuf,
    /// A storage process the lead router cannot reach for this long is suspected (a Suspect
    /// configuration message): it stops being a destination, so messages become stable.
    #[serde(default = "default_suspect_after_ms")]
    pub suspect_after_ms: u64,
    /// How partitions replicate: `sequenced` (storage processes apply the router stream,
    /// read-one-write-all) or `vr` (each partition is a VR group of its replicas' storage
    /// processes, `partition_host`). Absent: `sequenced`.
    #[serde(default)]
    pub partitions: PartitionMode,
    /// `memory` (absent): replicas keep nothing on disk, a group survives the loss of a
    /// minority; `disk`: every replica of the router group and of every partition group keeps
    /// a write-ahead log (group commit) under `data_dir`, so the cluster survives every process
    /// stopping at once. Partition groups need `partitions = "vr"` or `"skyros"`.
    #[serde(default)]
    pub durability: ClusterDurability,
    /// Grouped partitions (`vr`, `skyros`): a keyspace change's copy is logged in the
    /// receiving group in parts of at most this many bytes (`ecast::PartitionOperation::
    /// InstallPart`), so that no replication message carries a whole copy (a copy above the
    /// link's 64 MiB frame limit never installed). 1 KiB to 16 MiB; absent: 4 MiB.
    #[serde(default = "default_install_part_bytes")]
    pub install_part_bytes: u64,
    /// `skyros` partitions: Skyros-Comm (§6.1, `docs/internals/skyros.md`), each storage
    /// process's gateway sends a write that is not nilext (INCR, APPEND, DEL, SET NX, …) to
    /// every member of its group as a commutative request, and it completes in one round trip
    /// when the primary previews its result (no pending update touches its keys). Absent:
    /// off (such writes are ordered first, two round trips). Needs `partitions = "skyros"`.
    #[serde(default)]
    pub skyros_comm: bool,
    pub routers: Vec<RouterAddress>,
    pub storage: Vec<StorageAddress>,
    /// Key prefixes whose keys are placed by range (in key order) rather than by hash, e.g.
    /// `["user:"]` (Rubberband §6.2's per-namespace placement): a range of such keys lies in
    /// one arc, so `KEYS user:ab*` or `SCAN 0 MATCH user:ab*` reads only the partitions
    /// covering it. None may be a prefix of another. Fixed for the life of the cluster.
    #[serde(default)]
    pub range_prefixes: Vec<String>,
    /// Authentication and limits on the client ports (`[security]`; absent: authentication
    /// on, with the admin's password in `<data_dir>/admin-password`), `crate::security`.
    #[serde(default)]
    pub security: crate::security::SecurityConfig,
}

/// How a partitioned cluster's partitions replicate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PartitionMode {
    /// Storage processes apply the router stream directly (Crescando/RB).
    #[default]
    Sequenced,
    /// Each partition is a `vr::Replica<ecast::PartitionMachine<…>>` group of the storage
    /// processes holding its arc; the routers see partitions as destinations.
    Vr,
    /// As `Vr`, with the groups running Skyros (`vr::Protocol::Skyros`): single-partition
    /// nilext writes are acknowledged before they are ordered when the primary's nilext gate
    /// allows (`docs/internals/ecast.md`, "Skyros partitions").
    Skyros,
}

/// Where a cluster's replicas keep their promises.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClusterDurability {
    #[default]
    Memory,
    Disk,
}

impl ClusterDurability {
    pub fn vr(self) -> vr::Durability {
        match self {
            ClusterDurability::Memory => vr::Durability::Memory,
            ClusterDurability::Disk => vr::Durability::Disk,
        }
    }
}

impl PartitionMode {
    /// Whether partitions are replication groups of their own (`vr` or `skyros`).
    pub fn grouped(self) -> bool {
        matches!(self, PartitionMode::Vr | PartitionMode::Skyros)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouterAddress {
    /// E-Cast traffic: other routers, storage processes, gateways.
    pub address: SocketAddr,
    /// Prometheus metrics over HTTP (`GET /metrics`; absent: none).
    #[serde(default)]
    pub metrics: Option<SocketAddr>,
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageAddress {
    /// The process id on the ring (from 1).
    pub id: u64,
    /// Its position on the ring, as a decimal string (TOML integers stop at 2^63).
    #[serde(deserialize_with = "u64_from_string")]
    pub position: u64,
    /// E-Cast traffic: deliveries, answers, basic reads.
    pub address: SocketAddr,
    /// RESP clients.
    pub client: SocketAddr,
    /// PostgreSQL clients (absent: no SQL listener on this process).
    #[serde(default)]
    pub pg: Option<SocketAddr>,
    /// Prometheus metrics over HTTP (`GET /metrics`; absent: none).
    #[serde(default)]
    pub metrics: Option<SocketAddr>,
    /// Starts as a standby (Rubberband §6.1): a live process with no identifier on the ring
    /// and no data, which `tessera admin expand` or an automatic replacement puts on the
    /// ring. Its `position` is ignored. Standbys are part of the initial configuration (not
    /// joined by message), so every process computes the same version 0.
    #[serde(default)]
    pub standby: bool,
}

/// A TOML basic string: quoted, with `"`, `\\` and control characters escaped.
fn toml_string(text: &str) -> String {
    let mut quoted = String::from('"');
    for character in text.chars() {
        match character {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            character if character.is_control() => {
                let _ = write!(quoted, "\\u{:04X}", u32::from(character));
            }
            character => quoted.push(character),
        }
    }
    quoted.push('"');
    quoted
}

fn u64_from_string<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    let text = String::deserialize(deserializer)?;
    text.parse().map_err(serde::de::Error::custom)
}

fn default_tick_ms() -> u64 {
    5
}

/// `ClusterConfig::install_part_bytes`'s default and bounds.
pub const INSTALL_PART_BYTES_DEFAULT: u64 = 4 << 20;
pub const INSTALL_PART_BYTES_MIN: u64 = 1 << 10;
pub const INSTALL_PART_BYTES_MAX: u64 = 16 << 20;

fn default_install_part_bytes() -> u64 {
    INSTALL_PART_BYTES_DEFAULT
}

/// 0.5 s (was 1.5 s: the storage-failure run's slowest write followed it,
/// `docs/bench/elasticity.md`). The evidence is a link without a connection, not silence:
/// on loopback a killed process refuses connections at once, and a live one, however loaded,
/// has its connections accepted by its kernel, so load alone does not make a suspicion; a
/// process never reached gets at least 1.5 s (`router::SUSPECT_UNREACHED_MS_MIN`).
fn default_suspect_after_ms() -> u64 {
    500
}

/// A `vr` partition's replication group.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct PartitionGroup {
    /// The partition's name: its owner's process id (the router configuration's destination).
    pub partition: ProcessId,
    /// The storage processes replicating it, in ring order; replica index = place here.
    pub members: Vec<ProcessId>,
    /// Its keys' ring positions.
    pub arc: PositionSet,
}

/// Which process of the cluster this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Router(u8),
    Storage(ProcessId),
}

impl ClusterConfig {
    pub fn load(path: &Path) -> Result<ClusterConfig, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
        let config: ClusterConfig =
            toml::from_str(&text).map_err(|error| format!("{}: {error}", path.display()))?;
        config.validate()?;
        Ok(config)
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.routers.is_empty() || self.routers.len() > 9 {
            return Err("between 1 and 9 routers".into());
        }
        if self.replication > placement::REPLICATION_MAX {
            return Err(format!(
                "replication {} is above the most Rubberband supports ({})",
                self.replication,
                placement::REPLICATION_MAX
            ));
        }
        // Every listener its own address: two on one would leave one process unable to start,
        // or a client talking to the wrong protocol.
        let mut listeners = std::collections::BTreeMap::new();
        let routers = self.routers.iter().enumerate().flat_map(|(index, router)| {
            [
                Some((router.address, format!("router {index}"))),
                router
                    .metrics
                    .map(|address| (address, format!("router {index}'s metrics"))),
            ]
        });
        let storage = self.storage.iter().flat_map(|storage| {
            let id = storage.id;
            [
                Some((storage.address, format!("storage {id}"))),
                Some((storage.client, format!("storage {id}'s RESP clients"))),
                storage
                    .pg
                    .map(|address| (address, format!("storage {id}'s PostgreSQL clients"))),
                storage
                    .metrics
                    .map(|address| (address, format!("storage {id}'s metrics"))),
            ]
        });
        for (address, name) in routers.chain(storage).flatten() {
            if let Some(other) = listeners.insert(address, name.clone()) {
                return Err(format!("{name} and {other} both listen on {address}"));
            }
        }
        if !self.storage.iter().any(|storage| !storage.standby) {
            return Err("at least one storage process must start active (not a standby)".into());
        }
        if self.replication == 0 || self.storage.len() < self.replication as usize {
            return Err(format!(
                "{} storage processes cannot hold {} replicas per partition",
                self.storage.len(),
                self.replication
            ));
        }
        if self.tick_ms == 0 {
            return Err("tick_ms must be positive".into());
        }
        if !(INSTALL_PART_BYTES_MIN..=INSTALL_PART_BYTES_MAX).contains(&self.install_part_bytes) {
            return Err(format!(
                "install_part_bytes must lie between {INSTALL_PART_BYTES_MIN} and \
                 {INSTALL_PART_BYTES_MAX} (got {})",
                self.install_part_bytes
            ));
        }
        if self.install_part_bytes != INSTALL_PART_BYTES_DEFAULT && !self.partitions.grouped() {
            // An accepted option has an effect: `sequenced` partitions log no copies.
            return Err(
                "install_part_bytes needs partition groups (partitions = \"vr\" or \"skyros\")"
                    .into(),
            );
        }
        if self.skyros_comm && self.partitions != PartitionMode::Skyros {
            // An accepted option has an effect: only Skyros groups take commutative requests.
            return Err("skyros_comm needs partitions = \"skyros\"".into());
        }
        self.key_placement()?;
        self.security.validate()?;
        if self.durability == ClusterDurability::Disk && !self.partitions.grouped() {
            return Err(
                "durability = \"disk\" needs partition groups (partitions = \"vr\" or \"skyros\")"
                    .into(),
            );
        }
        if !self.partitions.grouped() && self.storage.iter().any(|storage| storage.pg.is_some()) {
            return Err(
                "a PostgreSQL listener (pg) needs partition groups (partitions = \"vr\" or \"skyros\"): sequenced storage processes hold no tables yet"
                    .into(),
            );
        }
        for (index, storage) in self.storage.iter().enumerate() {
            if storage.id == 0 || storage.id >= super::STORAGE_ID_LIMIT {
                return Err(format!("storage process {index}: bad id {}", storage.id));
            }
            if self.storage[..index]
                .iter()
                .any(|other| other.id == storage.id)
            {
                return Err(format!("storage process id {} appears twice", storage.id));
            }
        }
        Ok(())
    }

    /// How keys map to ring positions (the same in every process of the cluster).
    pub fn key_placement(&self) -> Result<KeyPlacement, String> {
        KeyPlacement::new(
            self.range_prefixes
                .iter()
                .map(|prefix| prefix.as_bytes().to_vec())
                .collect(),
        )
    }

    /// The configuration every process starts from (version 0 of `placement`): the active
    /// storage processes on the ring, the others standbys. Elastic: a contract may leave
    /// fewer ring members than the replication factor (each range then has
    /// `min(replication, ring size)` replicas), so a cluster can shrink to one process.
    pub fn initial_configuration(&self) -> Configuration {
        let members: Vec<(ProcessId, Position)> = self
            .storage
            .iter()
            .filter(|storage| !storage.standby)
            .map(|storage| (ProcessId(storage.id), Position(storage.position)))
            .collect();
        let standbys: Vec<ProcessId> = self
            .storage
            .iter()
            .filter(|storage| storage.standby)
            .map(|storage| ProcessId(storage.id))
            .collect();
        Configuration::with_members(self.replication, &members, &standbys).elastic()
    }

    /// The same cluster with only the first `active` storage processes on the ring (evenly
    /// spaced) and the rest standbys.
    pub fn with_active(mut self, active: u64) -> Result<ClusterConfig, String> {
        if active == 0 || active > self.storage.len() as u64 {
            return Err(format!(
                "--active must be between 1 and the number of storage processes ({})",
                self.storage.len()
            ));
        }
        let spacing = u64::MAX / active;
        for (index, storage) in self.storage.iter_mut().enumerate() {
            let index = index as u64;
            storage.standby = index >= active;
            if index < active {
                storage.position = index * spacing + spacing / 2;
            }
        }
        self.validate()?;
        Ok(self)
    }

    /// The configuration the router group replicates and gateways plan against. In
    /// `sequenced` mode the storage processes' ring (`initial_configuration`); in `vr` mode one
    /// destination per partition: the partition is named by its owner's id, sits at the
    /// owner's identifier and has replication 1 (the group replicates itself), so E-Cast's
    /// routing sends each key to exactly the partition whose arc holds it.
    /// `vr` partitions at replication 1: every storage process (standbys included) is a
    /// one-member VR group of its own, named by its process id, so a keyspace change never
    /// changes a group's members and `tessera admin` drives it (`partition_host`; Rubberband
    /// over `vr` partitions in `docs/internals/rubberband.md`). The routers' destinations are
    /// the processes themselves: their configuration is the real one and follows every
    /// accepted configuration message. `skyros` partitions too: a cut is an ordered op, so
    /// the primary orders it after every nilext write it acknowledged, and the nilext gate
    /// acknowledges none past a pending or executed cut that moves its keys (G2, G3 of
    /// `docs/internals/ecast.md`, "Skyros partitions"; the argument for the runtime in
    /// `docs/internals/rubberband.md`, "Skyros partitions at replication 1").
    pub fn elastic_groups(&self) -> bool {
        self.partitions.grouped() && self.replication == 1
    }

    /// `vr` and `skyros` partitions above replication 1: the routers route to groups named by
    /// (arc, version) (`ecast::RouterState::grouped`, `placement::groups`), whose names change
    /// exactly when a keyspace change changes a group's arc or members; the forwarder sends a
    /// group's deliveries to the members the router state names (`Frame::GroupDeliver`).
    /// Version 0's groups are named by their owners, as `partition_groups` names them, so
    /// until a keyspace change the destinations are the fixed groups' (docs/internals/
    /// rubberband.md, "Replication f > 1: groups named by (arc, version)"). A `skyros` group
    /// is driven exactly as a `vr` one, its replicas running `vr::Protocol::Skyros`: the
    /// nilext gate (G1–G3) keeps every nilext write acknowledged before a retired group's cut
    /// ordered before it, and a started group's fast path closed until its installs ("Skyros
    /// partitions above replication 1" there).
    pub fn regrouped(&self) -> bool {
        self.partitions.grouped() && self.replication > 1
    }

    pub fn router_configuration(&self) -> Configuration {
        if self.elastic_groups() {
            return self.initial_configuration();
        }
        match self.partitions {
            PartitionMode::Sequenced => self.initial_configuration(),
            PartitionMode::Vr | PartitionMode::Skyros => {
                let members: Vec<(ProcessId, Position)> = self
                    .initial_configuration()
                    .partitions()
                    .into_iter()
                    .map(|partition| (partition.owner, partition.span.start))
                    .collect();
                Configuration::with_members(1, &members, &[])
            }
        }
    }

    /// `vr` mode: every partition (named by its owner) with its group's members in ring
    /// order (a member's replica index is its place in the list) and its arc.
    pub fn partition_groups(&self) -> Vec<PartitionGroup> {
        if self.elastic_groups() {
            let initial = self.initial_configuration();
            return self
                .storage
                .iter()
                .map(|storage| {
                    let process = ProcessId(storage.id);
                    PartitionGroup {
                        partition: process,
                        members: vec![process],
                        arc: initial.ranges_of(process),
                    }
                })
                .collect();
        }
        self.initial_configuration()
            .partitions()
            .into_iter()
            .map(|partition| PartitionGroup {
                partition: partition.owner,
                members: partition.replicas,
                arc: partition.span.to_set(),
            })
            .collect()
    }

    /// The group of partition `partition` (`vr` mode).
    pub fn partition_group(&self, partition: ProcessId) -> Option<PartitionGroup> {
        self.partition_groups()
            .into_iter()
            .find(|group| group.partition == partition)
    }

    /// A partition group's VR configuration (with the cluster's durability, like the routers').
    pub fn partition_protocol(&self, members: usize) -> vr::Config {
        let mut config = vr::Config::new(members as u8, self.durability.vr());
        if self.partitions == PartitionMode::Skyros {
            config.protocol = vr::Protocol::Skyros;
            // Hidden, test-only (debug builds): the nilext gate is ignored, the real-process
            // test's canary (`crates/tessera/tests/skyros_partitions.rs`).
            if cfg!(debug_assertions)
                && std::env::var_os("TESSERA_CANARY_NILEXT_GATE_IGNORED").is_some()
            {
                config.canary = Some(vr::Canary::NilextGateIgnored);
            }
        }
        config
    }

    pub fn storage(&self, id: ProcessId) -> Option<&StorageAddress> {
        self.storage.iter().find(|storage| storage.id == id.0)
    }

    /// The router group's VR configuration (diskless: an op is durable on a majority).
    pub fn router_protocol(&self) -> vr::Config {
        vr::Config::new(self.routers.len() as u8, self.durability.vr())
    }

    /// The TOML text `load` reads back.
    pub fn render(&self) -> String {
        let mut text = String::new();
        let _ = writeln!(text, "cluster = {}", self.cluster);
        let _ = writeln!(text, "tick_ms = {}", self.tick_ms);
        let _ = writeln!(text, "replication = {}", self.replication);
        let _ = writeln!(text, "data_dir = {:?}", self.data_dir.display().to_string());
        let _ = writeln!(text, "suspect_after_ms = {}", self.suspect_after_ms);
        if self.install_part_bytes != INSTALL_PART_BYTES_DEFAULT {
            let _ = writeln!(text, "install_part_bytes = {}", self.install_part_bytes);
        }
        if !self.range_prefixes.is_empty() {
            let prefixes: Vec<String> = self
                .range_prefixes
                .iter()
                .map(|prefix| toml_string(prefix))
                .collect();
            let _ = writeln!(text, "range_prefixes = [{}]", prefixes.join(", "));
        }
        if self.durability == ClusterDurability::Disk {
            let _ = writeln!(text, "durability = \"disk\"");
        }
        match self.partitions {
            PartitionMode::Sequenced => {}
            PartitionMode::Vr => {
                let _ = writeln!(text, "partitions = \"vr\"");
            }
            PartitionMode::Skyros => {
                let _ = writeln!(text, "partitions = \"skyros\"");
            }
        }
        if self.skyros_comm {
            let _ = writeln!(text, "skyros_comm = true");
        }
        for router in &self.routers {
            let _ = writeln!(text, "\n[[routers]]\naddress = \"{}\"", router.address);
            if let Some(metrics) = router.metrics {
                let _ = writeln!(text, "metrics = \"{metrics}\"");
            }
        }
        for storage in &self.storage {
            let _ = writeln!(
                text,
                "\n[[storage]]\nid = {}\nposition = \"{}\"\naddress = \"{}\"\nclient = \"{}\"",
                storage.id, storage.position, storage.address, storage.client
            );
            if let Some(pg) = storage.pg {
                let _ = writeln!(text, "pg = \"{pg}\"");
            }
            if let Some(metrics) = storage.metrics {
                let _ = writeln!(text, "metrics = \"{metrics}\"");
            }
            if storage.standby {
                let _ = writeln!(text, "standby = true");
            }
        }
        text.push_str(&self.security.render());
        text
    }

    /// Gives storage process `i` a PostgreSQL listener on `base + i` (on its RESP address's
    /// host).
    pub fn with_pg_ports(mut self, base: u16) -> Result<ClusterConfig, String> {
        for (index, storage) in self.storage.iter_mut().enumerate() {
            let port = u64::from(base) + index as u64;
            let port = u16::try_from(port).map_err(|_| format!("port {port} out of range"))?;
            storage.pg = Some(SocketAddr::new(storage.client.ip(), port));
        }
        self.validate()?;
        Ok(self)
    }

    /// Metrics endpoints: storage process i (0-based) on `base + i`, router i on
    /// `base + 100 + i`, on their E-Cast addresses' IP.
    pub fn with_metrics_ports(mut self, base: u16) -> Result<ClusterConfig, String> {
        let port = |offset: u64| -> Result<u16, String> {
            let port = u64::from(base) + offset;
            u16::try_from(port).map_err(|_| format!("port {port} out of range"))
        };
        for (index, storage) in self.storage.iter_mut().enumerate() {
            storage.metrics = Some(SocketAddr::new(storage.address.ip(), port(index as u64)?));
        }
        for (index, router) in self.routers.iter_mut().enumerate() {
            router.metrics = Some(SocketAddr::new(
                router.address.ip(),
                port(100 + index as u64)?,
            ));
        }
        self.validate()?;
        Ok(self)
    }

    /// A loopback cluster: routers on `router_port + i`, storage process `i` (id `i + 1`) on
    /// `client_port + i` for RESP and `client_port + 100 + i` for E-Cast traffic, evenly
    /// spaced on the ring.
    pub fn loopback(
        cluster: u64,
        routers: u8,
        storage: u64,
        replication: u8,
        client_port: u16,
        router_port: u16,
        data_dir: PathBuf,
    ) -> Result<ClusterConfig, String> {
        let port = |base: u16, offset: u64| -> Result<SocketAddr, String> {
            let port = u64::from(base) + offset;
            let port = u16::try_from(port).map_err(|_| format!("port {port} out of range"))?;
            Ok(SocketAddr::from(([127, 0, 0, 1], port)))
        };
        let spacing = u64::MAX / storage.max(1);
        let config = ClusterConfig {
            range_prefixes: Vec::new(),
            security: crate::security::SecurityConfig::default(),
            cluster,
            tick_ms: default_tick_ms(),
            replication,
            data_dir,
            suspect_after_ms: default_suspect_after_ms(),
            partitions: PartitionMode::Sequenced,
            durability: ClusterDurability::Memory,
            install_part_bytes: default_install_part_bytes(),
            skyros_comm: false,
            routers: (0..u64::from(routers))
                .map(|index| {
                    Ok(RouterAddress {
                        address: port(router_port, index)?,
                        metrics: None,
                    })
                })
                .collect::<Result<_, String>>()?,
            storage: (0..storage)
                .map(|index| {
                    Ok(StorageAddress {
                        id: index + 1,
                        position: index * spacing + spacing / 2,
                        address: port(client_port, 100 + index)?,
                        client: port(client_port, index)?,
                        pg: None,
                        metrics: None,
                        standby: false,
                    })
                })
                .collect::<Result<_, String>>()?,
        };
        config.validate()?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/deployment.md`'s three-machine example is a valid cluster file.
    #[test]
    fn the_documented_three_machine_deployment_parses_and_validates() {
        let doc = include_str!("../../../../docs/deployment.md");
        let start = doc.find("```toml\n").expect("a toml block") + "```toml\n".len();
        let end = start + doc[start..].find("```").expect("its end");
        let config: ClusterConfig = toml::from_str(&doc[start..end]).unwrap();
        config.validate().unwrap();
        assert_eq!(config.routers.len(), 3);
        assert_eq!(config.partitions, PartitionMode::Vr);
        assert!(config.storage.iter().all(|storage| storage.pg.is_some()));
        assert!(config
            .storage
            .iter()
            .all(|storage| storage.metrics.is_some()));
        assert!(config.routers.iter().all(|router| router.metrics.is_some()));
        assert_eq!(config.durability, ClusterDurability::Disk);
        assert_eq!(config.install_part_bytes, INSTALL_PART_BYTES_DEFAULT);
        let groups = config.partition_groups();
        assert_eq!(groups.len(), 3);
        assert!(groups.iter().all(|group| group.members.len() == 3));
        assert!(!config.security.insecure);
        assert!(config.security.tls_cert_file.is_some());
        let rendered: ClusterConfig = toml::from_str(&config.render()).unwrap();
        assert_eq!(rendered, config, "render keeps the [security] section");
    }

    #[test]
    fn a_cluster_file_without_security_is_secure_and_half_a_tls_pair_is_refused() {
        let mut config =
            ClusterConfig::loopback(7, 3, 3, 3, 9600, 9800, PathBuf::from("/tmp/x")).unwrap();
        assert!(!config.security.insecure);
        assert!(!config.render().contains("[security]"));
        config.security.tls_cert_file = Some(PathBuf::from("/tmp/cert.pem"));
        assert!(config.validate().is_err());
        config.security.tls_key_file = Some(PathBuf::from("/tmp/key.pem"));
        config.security.max_connections = 3;
        config.validate().unwrap();
        let parsed: ClusterConfig = toml::from_str(&config.render()).unwrap();
        assert_eq!(parsed, config);
    }

    /// Two listeners on one address are refused with both names, and metrics ports render
    /// and parse back.
    #[test]
    fn every_listener_needs_its_own_address() {
        let mut config =
            ClusterConfig::loopback(7, 3, 3, 3, 9600, 9800, PathBuf::from("/tmp/x")).unwrap();
        config.partitions = PartitionMode::Vr;
        let config = config.with_metrics_ports(9900).unwrap();
        let parsed: ClusterConfig = toml::from_str(&config.render()).unwrap();
        assert_eq!(parsed, config);
        let error = config.with_pg_ports(9899).unwrap_err();
        assert!(
            error.contains("storage 2's PostgreSQL clients")
                && error.contains("storage 1's metrics"),
            "{error}"
        );
        let mut config =
            ClusterConfig::loopback(7, 3, 3, 3, 9600, 9800, PathBuf::from("/tmp/x")).unwrap();
        config.routers[1].address = config.storage[0].client;
        let error = config.validate().unwrap_err();
        assert!(error.contains("both listen on 127.0.0.1:9600"), "{error}");
    }

    /// A copy's part size: 4 MiB when absent (and not rendered then), rendered and parsed
    /// back otherwise, refused outside 1 KiB–16 MiB or without partition groups.
    #[test]
    fn install_part_bytes_is_bounded_and_renders_back() {
        let mut config =
            ClusterConfig::loopback(7, 3, 3, 3, 9600, 9800, PathBuf::from("/tmp/x")).unwrap();
        assert_eq!(config.install_part_bytes, 4 << 20);
        assert!(!config.render().contains("install_part_bytes"));
        config.install_part_bytes = 16 << 10;
        let error = config.validate().unwrap_err();
        assert!(error.contains("needs partition groups"), "{error}");
        config.partitions = PartitionMode::Vr;
        config.validate().unwrap();
        let parsed: ClusterConfig = toml::from_str(&config.render()).unwrap();
        assert_eq!(parsed, config);
        for wrong in [0, 1023, (16 << 20) + 1] {
            config.install_part_bytes = wrong;
            let error = config.validate().unwrap_err();
            assert!(
                error.contains("install_part_bytes must lie between"),
                "{error}"
            );
        }
        for right in [1024, 16 << 20] {
            config.install_part_bytes = right;
            config.validate().unwrap();
        }
    }

    /// Skyros-Comm: off when absent (and not rendered then), rendered and parsed back when on,
    /// refused without `skyros` partitions (it would have no effect).
    #[test]
    fn skyros_comm_needs_skyros_partitions_and_renders_back() {
        let mut config =
            ClusterConfig::loopback(7, 3, 3, 3, 9600, 9800, PathBuf::from("/tmp/x")).unwrap();
        assert!(!config.skyros_comm);
        assert!(!config.render().contains("skyros_comm"));
        config.skyros_comm = true;
        for mode in [PartitionMode::Sequenced, PartitionMode::Vr] {
            config.partitions = mode;
            let error = config.validate().unwrap_err();
            assert!(error.contains("skyros_comm needs"), "{error}");
        }
        config.partitions = PartitionMode::Skyros;
        config.validate().unwrap();
        assert!(config.render().contains("skyros_comm = true"));
        let parsed: ClusterConfig = toml::from_str(&config.render()).unwrap();
        assert_eq!(parsed, config);
    }

    #[test]
    fn a_pg_listener_needs_partition_groups() {
        let config =
            ClusterConfig::loopback(7, 3, 3, 3, 9600, 9800, PathBuf::from("/tmp/x")).unwrap();
        let error = config.with_pg_ports(5433).unwrap_err();
        assert!(error.contains("needs partition groups"), "{error}");
    }

    #[test]
    fn a_rendered_cluster_file_parses_back() {
        let config =
            ClusterConfig::loopback(7, 3, 6, 3, 9600, 9800, PathBuf::from("/tmp/x")).unwrap();
        let parsed: ClusterConfig = toml::from_str(&config.render()).unwrap();
        assert_eq!(parsed, config);
        let mut grouped = config.clone();
        grouped.partitions = PartitionMode::Vr;
        let grouped = grouped.with_pg_ports(5433).unwrap();
        let parsed: ClusterConfig = toml::from_str(&grouped.render()).unwrap();
        assert_eq!(parsed, grouped);
        assert_eq!(
            parsed.storage[2].pg,
            Some(SocketAddr::from(([127, 0, 0, 1], 5435)))
        );
        assert_eq!(
            config.initial_configuration().replicas(Position(1)).len(),
            3
        );
    }

    #[test]
    fn standbys_render_parse_back_and_start_off_the_ring() {
        let config = ClusterConfig::loopback(7, 3, 6, 3, 9600, 9800, PathBuf::from("/tmp/x"))
            .unwrap()
            .with_active(1)
            .unwrap();
        let parsed: ClusterConfig = toml::from_str(&config.render()).unwrap();
        assert_eq!(parsed, config);
        let initial = config.initial_configuration();
        assert_eq!(initial.ring().len(), 1);
        assert_eq!(
            initial.state(ProcessId(6)),
            Some(placement::ProcessState::Standby)
        );
        // One active process with replication 3 holds everything.
        assert!(initial.ranges_of(ProcessId(1)).is_whole());
        assert!(initial.is_elastic());
        assert!(config.clone().with_active(0).is_err());
        assert!(config.with_active(7).is_err());
    }

    #[test]
    fn range_prefixes_render_parse_back_and_overlapping_ones_are_refused() {
        let mut config =
            ClusterConfig::loopback(7, 3, 6, 3, 9600, 9800, PathBuf::from("/tmp/x")).unwrap();
        config.range_prefixes = vec!["user:".into(), "odd \"quoted\" \\ é\t:".into()];
        let parsed: ClusterConfig = toml::from_str(&config.render()).unwrap();
        assert_eq!(parsed, config);
        assert!(parsed.validate().is_ok());
        config.range_prefixes.push("user:eu:".into());
        let error = config.validate().unwrap_err();
        assert!(error.contains("overlap"), "{error}");
    }

    #[test]
    fn a_vr_cluster_takes_standbys_at_every_replication_and_routes_to_its_processes_at_replication_1(
    ) {
        let mut config =
            ClusterConfig::loopback(7, 3, 3, 1, 9600, 9800, PathBuf::from("/tmp/x")).unwrap();
        config.partitions = PartitionMode::Vr;
        let config = config.with_active(1).unwrap();
        assert!(config.elastic_groups());
        // One one-member group per storage process, standbys included (holding nothing).
        let groups = config.partition_groups();
        assert_eq!(groups.len(), 3);
        assert!(groups
            .iter()
            .all(|group| group.members == vec![group.partition]));
        assert!(groups[0].arc.is_whole());
        assert!(groups[1].arc.is_empty() && groups[2].arc.is_empty());
        // The routers' configuration is the real one (standbys included).
        assert_eq!(
            config.router_configuration(),
            config.initial_configuration()
        );
        assert!(!config.regrouped());
        // Above replication 1 the routers route to groups named by (arc, version), so standbys
        // are allowed; version 0's groups are the fixed groups (named by their owners).
        let mut above =
            ClusterConfig::loopback(7, 3, 3, 2, 9600, 9800, PathBuf::from("/tmp/x")).unwrap();
        above.partitions = PartitionMode::Vr;
        let above = above.with_active(2).unwrap();
        assert!(above.regrouped() && !above.elastic_groups());
        let grouped = ecast::RouterState::grouped(
            above.initial_configuration(),
            ecast::RouterSettings::default(),
        );
        assert_eq!(grouped.configuration(), &above.router_configuration());
    }

    #[test]
    fn a_skyros_cluster_takes_standbys_at_every_replication_like_a_vr_one() {
        let mut skyros =
            ClusterConfig::loopback(7, 3, 3, 1, 9600, 9800, PathBuf::from("/tmp/x")).unwrap();
        skyros.partitions = PartitionMode::Skyros;
        let skyros = skyros.with_active(1).unwrap();
        assert!(skyros.elastic_groups());
        assert_eq!(skyros.partition_groups().len(), 3);
        assert_eq!(
            skyros.router_configuration(),
            skyros.initial_configuration()
        );
        assert_eq!(skyros.partition_protocol(1).protocol, vr::Protocol::Skyros);
        let mut above =
            ClusterConfig::loopback(7, 3, 3, 2, 9600, 9800, PathBuf::from("/tmp/x")).unwrap();
        above.partitions = PartitionMode::Skyros;
        // Above replication 1 its routers route to groups named by (arc, version), as a `vr`
        // cluster's do, and its groups run Skyros.
        let above = above.with_active(2).unwrap();
        assert!(above.regrouped() && !above.elastic_groups());
        assert_eq!(above.partition_protocol(2).protocol, vr::Protocol::Skyros);
        assert_eq!(
            ecast::RouterState::grouped(
                above.initial_configuration(),
                ecast::RouterSettings::default()
            )
            .configuration(),
            &above.router_configuration()
        );
    }

    #[test]
    fn a_vr_cluster_file_parses_back_with_one_router_destination_per_partition() {
        let mut config =
            ClusterConfig::loopback(7, 3, 6, 3, 9600, 9800, PathBuf::from("/tmp/x")).unwrap();
        config.partitions = PartitionMode::Vr;
        let parsed: ClusterConfig = toml::from_str(&config.render()).unwrap();
        assert_eq!(parsed, config);
        let routed = config.router_configuration();
        assert_eq!(routed.replication(), 1);
        let groups = config.partition_groups();
        assert_eq!(groups.len(), 6);
        for group in &groups {
            assert_eq!(group.members.len(), 3);
            assert_eq!(group.members[0], group.partition);
            // Every position of the arc routes to exactly this partition.
            let inside =
                config.initial_configuration().ring()[group.partition.0 as usize - 1].identifier;
            assert_eq!(routed.replicas(inside), vec![group.partition]);
            assert!(group.arc.contains(inside));
        }
        assert!(config.regrouped());
        assert_eq!(
            ecast::RouterState::grouped(
                config.initial_configuration(),
                ecast::RouterSettings::default()
            )
            .configuration(),
            &routed,
            "the grouped routers start with the fixed groups' routing"
        );
        assert!(
            config.clone().with_active(5).is_ok(),
            "standbys in vr mode above replication 1"
        );
    }

    #[test]
    fn too_few_storage_processes_for_the_replication_are_refused() {
        let error = ClusterConfig::loopback(7, 3, 2, 3, 9600, 9800, PathBuf::from("/tmp/x"));
        assert!(error.is_err());
    }

    #[test]
    fn a_replication_factor_above_rubberbands_limit_is_refused_not_a_panic() {
        let error = ClusterConfig::loopback(7, 3, 6, 6, 9600, 9800, PathBuf::from("/tmp/x"))
            .expect_err("6 replicas is above REPLICATION_MAX");
        assert!(error.to_string().contains("above"), "{error}");
    }
}
