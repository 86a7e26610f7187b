//! INFO and HELLO replies, built from what the runtime knows about the replica.

use crate::{Value, CLIENT_ID, REDIS_VERSION};

/// What the runtime knows about this replica when it answers INFO or HELLO.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerInfo {
    /// Tessera's word for the replica's role: `primary`, `backup` (or a transient state such as
    /// `view_change` or `recovering`). INFO also reports Redis's `role:master` for a primary
    /// and `role:slave` otherwise; `master` is accepted here as a synonym of `primary`.
    pub role: String,
    pub view: u64,
    pub commit_number: u64,
    pub replica_index: u8,
    /// How many replicas the group has.
    pub replicas: u8,
    /// The replication protocol, e.g. `vr`.
    pub protocol: String,
    /// How writes are made durable, e.g. `fsync` or `memory`.
    pub durability: String,
    /// The number of keys, when the runtime knows it; `None` leaves `# Keyspace` empty.
    pub keys: Option<u64>,
    /// Tessera's version (INFO `tessera_version`). Redis clients see [`REDIS_VERSION`].
    pub version: String,
    /// More `# Tessera` lines (`tessera_<name>:<value>`), e.g. Skyros's path counters.
    pub counters: Vec<(String, u64)>,
    /// Sections the runtime fills itself (`clients`, `stats`, `commandstats`, `errorstats`:
    /// `stats::Stats`); a section not given here is left out.
    pub sections: Vec<InfoSection>,
}

/// One INFO section the runtime provides: its name (lower case, one of [`SECTIONS`]) and its
/// `field:value` lines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InfoSection {
    pub name: &'static str,
    pub lines: Vec<(String, String)>,
}

impl ServerInfo {
    fn is_primary(&self) -> bool {
        self.role.eq_ignore_ascii_case("primary") || self.role.eq_ignore_ascii_case("master")
    }
}

/// The INFO sections, in the order Redis 7.0 prints them (Tessera's own last).
const SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "stats",
    "replication",
    "commandstats",
    "errorstats",
    "keyspace",
    "tessera",
];

/// Sections only `all`, `everything` or their own name print (Redis 7.0's default leaves
/// them out).
const NOT_DEFAULT: &[&str] = &["commandstats"];

/// The INFO reply: text of `# Section` headers and `field:value` lines, each ending in `\r\n`,
/// sections separated by an empty line, as a RESP3 verbatim string (RESP2: bulk string) as
/// Redis sends it.
///
/// `section` is what the client asked for: `None` or `default`, `all` or `everything` for every
/// section, else one or more section names separated by spaces (any case). An unknown section
/// gives an empty text, as in Redis.
pub fn info_reply(info: &ServerInfo, section: Option<&str>) -> Value {
    let requested: Vec<String> = section
        .unwrap_or("default")
        .split_ascii_whitespace()
        .map(str::to_ascii_lowercase)
        .collect();
    let all = requested
        .iter()
        .any(|name| matches!(name.as_str(), "all" | "everything"));
    let default = requested.is_empty() || requested.iter().any(|name| name == "default");
    let mut text = String::new();
    for &name in SECTIONS {
        let wanted = all
            || (default && !NOT_DEFAULT.contains(&name))
            || requested.iter().any(|wanted| wanted == name);
        let provided = matches!(name, "server" | "replication" | "keyspace" | "tessera")
            || info.sections.iter().any(|section| section.name == name);
        if !wanted || !provided {
            continue;
        }
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        render_section(&mut text, name, info);
    }
    Value::Verbatim(text)
}

fn render_section(text: &mut String, name: &str, info: &ServerInfo) {
    let header = match name {
        "server" => "# Server",
        "clients" => "# Clients",
        "memory" => "# Memory",
        "stats" => "# Stats",
        "replication" => "# Replication",
        "commandstats" => "# Commandstats",
        "errorstats" => "# Errorstats",
        "keyspace" => "# Keyspace",
        _ => "# Tessera",
    };
    text.push_str(header);
    text.push_str("\r\n");
    let mut line = |field: &str, value: &str| {
        text.push_str(field);
        text.push(':');
        text.push_str(&value.replace(['\r', '\n'], " "));
        text.push_str("\r\n");
    };
    match name {
        "server" => {
            line("redis_version", REDIS_VERSION);
            line("redis_mode", "standalone");
            line("tessera_version", &info.version);
        }
        "replication" => {
            line("role", if info.is_primary() { "master" } else { "slave" });
            line("tessera_role", &info.role);
        }
        "keyspace" => {
            // Redis lists a database only when it holds keys.
            if let Some(keys @ 1..) = info.keys {
                line("db0", &format!("keys={keys},expires=0,avg_ttl=0"));
            }
        }
        "clients" | "memory" | "stats" | "commandstats" | "errorstats" => {
            let sections = info.sections.iter().filter(|section| section.name == name);
            for (field, value) in sections.flat_map(|section| &section.lines) {
                line(field, value);
            }
        }
        _ => {
            line("tessera_view", &info.view.to_string());
            line("tessera_commit_number", &info.commit_number.to_string());
            line("tessera_replica_index", &info.replica_index.to_string());
            line("tessera_replicas", &info.replicas.to_string());
            line("tessera_protocol", &info.protocol);
            line("tessera_durability", &info.durability);
            for (name, value) in &info.counters {
                line(&format!("tessera_{name}"), &value.to_string());
            }
        }
    }
}

/// The HELLO reply for a connection now speaking `protocol` (2 or 3): in RESP3 a map, in RESP2
/// the same pairs as a flat array, with Redis's fields: `server` "redis", `version`
/// [`REDIS_VERSION`], `proto`, `id` [`CLIENT_ID`], `mode` "standalone", `role` "master" for a
/// primary and "replica" otherwise, `modules` an empty array.
pub fn hello_reply(protocol: u8, info: &ServerInfo) -> Value {
    let bulk = |text: &str| Value::Bulk(text.as_bytes().to_vec());
    let pairs = vec![
        (bulk("server"), bulk("redis")),
        (bulk("version"), bulk(REDIS_VERSION)),
        (bulk("proto"), Value::Integer(i64::from(protocol))),
        (bulk("id"), Value::Integer(CLIENT_ID)),
        (bulk("mode"), bulk("standalone")),
        (
            bulk("role"),
            bulk(if info.is_primary() {
                "master"
            } else {
                "replica"
            }),
        ),
        (bulk("modules"), Value::Array(Vec::new())),
    ];
    let map = Value::Map(pairs);
    if protocol >= 3 {
        map
    } else {
        map.into_resp2()
    }
}
