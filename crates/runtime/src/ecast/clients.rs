//! The clients connected to one gateway: CLIENT LIST, INFO, ID, KILL, NO-EVICT and UNBLOCK,
//! INFO's `clients` section, and the gateway's command statistics and slow log
//! (`resp::stats`: INFO `stats`/`commandstats`/`errorstats`, CONFIG RESETSTAT, SLOWLOG)
//! (`docs/internals/redis.md`, "Introspection").
//!
//! Each RESP connection registers when it is accepted and leaves when it ends; it updates its
//! entry with every command. CLIENT KILL wakes the connections it names, which close at once
//! (between two commands, or while waiting for their client). Like a Redis Cluster node, a
//! gateway knows only its own clients.

use resp::Value;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::Notify;

/// One gateway's connections, and its command statistics.
#[derive(Default)]
pub(crate) struct Clients {
    next_id: AtomicU64,
    table: Mutex<BTreeMap<u64, Entry>>,
    stats: Mutex<resp::stats::Stats>,
    /// Blocking commands take a ticket when they start: the order they are served in.
    next_ticket: AtomicU64,
}

/// What CLIENT LIST shows of one connection.
struct Entry {
    address: SocketAddr,
    local: SocketAddr,
    created: Instant,
    active: Instant,
    name: Option<Vec<u8>>,
    /// The last command's name (lowercase, `name|subcommand` for a container command).
    command: String,
    protocol: u8,
    channels: usize,
    patterns: usize,
    /// Commands queued in MULTI (`None`: not in MULTI).
    queued: Option<usize>,
    no_evict: bool,
    kill: Arc<Notify>,
    /// While a blocking command waits (after an attempt found nothing): how many keys it
    /// waits on, and how CLIENT UNBLOCK wakes it.
    blocked: Option<(usize, Arc<Unblock>)>,
    /// While a blocking command runs: its place in line (`Clients::next_ticket`), the keys
    /// it pops from, and how CLIENT UNBLOCK wakes it (also before its first attempt).
    waiting: Option<(u64, Vec<Vec<u8>>, Arc<Unblock>)>,
}

/// How CLIENT UNBLOCK wakes one waiting blocking command: `error` says whether it answers
/// `UNBLOCKED` (ERROR) or as if it timed out (TIMEOUT, the default).
#[derive(Default)]
pub(super) struct Unblock {
    pub(super) notify: Notify,
    pub(super) error: std::sync::atomic::AtomicBool,
}

/// A connection marked blocked (INFO's `blocked_clients`, CLIENT UNBLOCK) until dropped.
pub(super) struct Blocked<'a> {
    clients: &'a Clients,
    id: u64,
    pub(super) unblock: Arc<Unblock>,
}

impl Drop for Blocked<'_> {
    fn drop(&mut self) {
        if let Some(entry) = self.clients.lock().get_mut(&self.id) {
            entry.blocked = None;
        }
    }
}

/// A blocking command's place in its gateway's line, until dropped: while it waits, younger
/// blocking commands leave the keys it pops from to it (`Clients::taken_by_older`).
pub(super) struct Waiting<'a> {
    clients: &'a Clients,
    id: u64,
    ticket: u64,
}

impl Waiting<'_> {
    /// The keys older blocking commands of this gateway wait on.
    pub(super) fn taken_by_older(&self) -> std::collections::BTreeSet<Vec<u8>> {
        let table = self.clients.lock();
        table
            .values()
            .filter_map(|entry| entry.waiting.as_ref())
            .filter(|(ticket, _, _)| *ticket < self.ticket)
            .flat_map(|(_, keys, _)| keys.iter().cloned())
            .collect()
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Some(entry) = self.clients.lock().get_mut(&self.id) {
            entry.waiting = None;
        }
    }
}

/// INFO's `clients` section, as Redis 7.0 names its fields.
pub(super) struct ClientCounts {
    pub connected: usize,
    pub blocked: usize,
    pub blocking_keys: usize,
    /// Connections accepted since the gateway started (INFO stats'
    /// `total_connections_received`).
    pub received: u64,
}

/// What a connection tells its entry after each command.
pub(super) struct Activity<'a> {
    pub name: Option<&'a [u8]>,
    pub arguments: &'a [Vec<u8>],
    pub protocol: u8,
    pub channels: usize,
    pub patterns: usize,
    pub queued: Option<usize>,
}

/// A connection's place in the table; it leaves the table when dropped.
pub(super) struct Registration {
    pub(super) id: u64,
    clients: Arc<Clients>,
    /// Notified by CLIENT KILL: the connection closes.
    pub(super) kill: Arc<Notify>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.clients.lock().remove(&self.id);
    }
}

impl Clients {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Entry>> {
        self.table
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A new connection from `address` to `local`.
    pub(super) fn register(
        self: &Arc<Self>,
        address: SocketAddr,
        local: SocketAddr,
    ) -> Registration {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let kill = Arc::new(Notify::new());
        let now = Instant::now();
        self.lock().insert(
            id,
            Entry {
                address,
                local,
                created: now,
                active: now,
                name: None,
                command: "NULL".into(),
                protocol: 2,
                channels: 0,
                patterns: 0,
                queued: None,
                no_evict: false,
                kill: kill.clone(),
                blocked: None,
                waiting: None,
            },
        );
        Registration {
            id,
            clients: self.clone(),
            kill,
        }
    }

    fn stats(&self) -> std::sync::MutexGuard<'_, resp::stats::Stats> {
        self.stats
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Counts one command of connection `id` that took `duration` and got `reply`, and logs
    /// it in the slow log if it was slow.
    pub(super) fn record(
        &self,
        id: u64,
        arguments: &[Vec<u8>],
        reply: &Value,
        duration: std::time::Duration,
    ) {
        let (client_address, client_name) = match self.lock().get(&id) {
            Some(entry) => (
                entry.address.to_string(),
                entry.name.clone().unwrap_or_default(),
            ),
            None => (String::new(), Vec::new()),
        };
        let call = resp::stats::Call {
            arguments,
            reply,
            duration_us: u64::try_from(duration.as_micros()).unwrap_or(u64::MAX),
            unix_time_s: crate::os::unix_now_ms() / 1000,
            client_address,
            client_name,
        };
        self.stats().record(call);
    }

    /// SLOWLOG and CONFIG RESETSTAT; `None` for any other command.
    pub(super) fn on_stats_command(&self, arguments: &[Vec<u8>]) -> Option<Value> {
        if !is_stats_command(arguments) {
            return None;
        }
        if arguments[0].eq_ignore_ascii_case(b"slowlog") {
            return Some(self.stats().slowlog_command(&arguments[1..]));
        }
        if arguments.len() != 2 {
            return Some(arity_of("config|resetstat"));
        }
        self.stats().reset();
        Some(Value::ok())
    }

    /// Applies the per-process parameters among CONFIG SET's `changes` (the slow log's).
    pub(super) fn set_parameters(&self, changes: &[resp::config::Change]) {
        let mut stats = self.stats();
        for change in changes {
            if change.scope == resp::config::Scope::Process {
                let known = stats.set_parameter(change.name, change.value);
                assert!(known, "{} is a process parameter", change.name);
            }
        }
    }

    /// A per-process parameter's value (CONFIG GET).
    pub(super) fn parameter(&self, name: &str) -> Option<i64> {
        self.stats().parameter(name)
    }

    /// INFO's `clients`, `stats`, `commandstats` and `errorstats` sections.
    pub(super) fn info_sections(&self) -> Vec<resp::InfoSection> {
        let counts = self.counts();
        let stats = self.stats();
        vec![
            resp::InfoSection {
                name: "clients",
                lines: vec![
                    ("connected_clients".into(), counts.connected.to_string()),
                    ("blocked_clients".into(), counts.blocked.to_string()),
                    (
                        "total_blocking_keys".into(),
                        counts.blocking_keys.to_string(),
                    ),
                ],
            },
            stats.stats_section(counts.received),
            stats.commandstats_section(),
            stats.errorstats_section(),
        ]
    }

    /// Gives connection `id`'s blocking command, which pops from `keys`, its place in line.
    pub(super) fn wait_in_line(&self, id: u64, keys: Vec<Vec<u8>>) -> Waiting<'_> {
        let ticket = self.next_ticket.fetch_add(1, Ordering::Relaxed);
        if let Some(entry) = self.lock().get_mut(&id) {
            entry.waiting = Some((ticket, keys, Arc::new(Unblock::default())));
        }
        Waiting {
            clients: self,
            id,
            ticket,
        }
    }

    /// Marks connection `id` blocked on `keys` keys until the guard is dropped.
    /// A command in line (`wait_in_line`) keeps the wake-up CLIENT UNBLOCK may already have
    /// sent it.
    pub(super) fn block(&self, id: u64, keys: usize) -> Blocked<'_> {
        let mut table = self.lock();
        let entry = table.get_mut(&id);
        let unblock = entry
            .as_ref()
            .and_then(|entry| entry.waiting.as_ref())
            .map_or_else(
                || Arc::new(Unblock::default()),
                |(_, _, unblock)| unblock.clone(),
            );
        if let Some(entry) = entry {
            entry.blocked = Some((keys, unblock.clone()));
        }
        drop(table);
        Blocked {
            clients: self,
            id,
            unblock,
        }
    }

    /// The counts INFO's `clients` section reports.
    pub(super) fn counts(&self) -> ClientCounts {
        let table = self.lock();
        let blocked = table.values().filter_map(|entry| entry.blocked.as_ref());
        ClientCounts {
            connected: table.len(),
            blocked: blocked.clone().count(),
            blocking_keys: blocked.map(|(keys, _)| *keys).sum(),
            received: self.next_id.load(Ordering::Relaxed),
        }
    }

    /// `CLIENT UNBLOCK id [TIMEOUT|ERROR]`: 1 if that client was waiting in a blocking command
    /// (now woken), else 0. A blocking command that has not yet made its first attempt counts
    /// as waiting: it ends at that attempt if it finds nothing.
    fn unblock(&self, options: &[Vec<u8>]) -> Value {
        let (id, error) = match options {
            [id] => (id, false),
            [id, reason] if reason.eq_ignore_ascii_case(b"timeout") => (id, false),
            [id, reason] if reason.eq_ignore_ascii_case(b"error") => (id, true),
            [_, _] => {
                return Value::Error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR".into())
            }
            _ => return arity("unblock"),
        };
        let Some(id) = std::str::from_utf8(id)
            .ok()
            .and_then(|text| text.parse::<i64>().ok())
        else {
            return Value::Error("ERR value is not an integer or out of range".into());
        };
        let table = self.lock();
        let blocked = u64::try_from(id)
            .ok()
            .and_then(|id| table.get(&id))
            .and_then(|entry| entry.waiting.as_ref());
        match blocked {
            Some((_, _, unblock)) => {
                unblock.error.store(error, Ordering::Relaxed);
                unblock.notify.notify_one();
                Value::Integer(1)
            }
            None => Value::Integer(0),
        }
    }

    /// Records a connection's command.
    pub(super) fn on_activity(&self, id: u64, activity: Activity) {
        let mut table = self.lock();
        let Some(entry) = table.get_mut(&id) else {
            return;
        };
        entry.active = Instant::now();
        entry.name = activity.name.map(<[u8]>::to_vec);
        entry.command = command_name(activity.arguments);
        entry.protocol = activity.protocol;
        entry.channels = activity.channels;
        entry.patterns = activity.patterns;
        entry.queued = activity.queued;
    }

    /// CLIENT LIST, INFO, ID, KILL, NO-EVICT for connection `id`; `None` for any other CLIENT
    /// subcommand (SETNAME, GETNAME… are the planner's).
    pub(super) fn on_command(&self, id: u64, arguments: &[Vec<u8>]) -> Option<Value> {
        let subcommand = arguments.get(1)?.to_ascii_lowercase();
        let rest = &arguments[2..];
        Some(match subcommand.as_slice() {
            b"id" if rest.is_empty() => Value::Integer(id as i64),
            b"info" if rest.is_empty() => {
                let table = self.lock();
                let line = table.get(&id).map(|entry| describe(id, entry));
                Value::Verbatim(line.unwrap_or_default())
            }
            b"list" => self.list(rest),
            b"kill" => self.kill(id, rest),
            b"unblock" => self.unblock(rest),
            b"no-evict" => match rest {
                [mode] if mode.eq_ignore_ascii_case(b"on") || mode.eq_ignore_ascii_case(b"off") => {
                    if let Some(entry) = self.lock().get_mut(&id) {
                        entry.no_evict = mode.eq_ignore_ascii_case(b"on");
                    }
                    Value::ok()
                }
                [_] => Value::Error("ERR syntax error".into()),
                _ => arity("no-evict"),
            },
            b"id" | b"info" => arity(&String::from_utf8_lossy(&subcommand)),
            _ => return None,
        })
    }

    /// `CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id…]`.
    fn list(&self, options: &[Vec<u8>]) -> Value {
        let mut ids: Option<Vec<u64>> = None;
        let mut kind: Option<Vec<u8>> = None;
        match options {
            [] => {}
            [option, value] if option.eq_ignore_ascii_case(b"type") => {
                let value = value.to_ascii_lowercase();
                if !matches!(
                    value.as_slice(),
                    b"normal" | b"master" | b"replica" | b"pubsub"
                ) {
                    return Value::Error(format!(
                        "ERR Unknown client type '{}'",
                        String::from_utf8_lossy(&value)
                    ));
                }
                kind = Some(value);
            }
            [option, values @ ..] if option.eq_ignore_ascii_case(b"id") && !values.is_empty() => {
                let parsed: Option<Vec<u64>> = values.iter().map(|value| parse_id(value)).collect();
                match parsed {
                    Some(parsed) => ids = Some(parsed),
                    None => return Value::Error("ERR Invalid client ID".into()),
                }
            }
            _ => return Value::Error("ERR syntax error".into()),
        }
        let table = self.lock();
        let mut text = String::new();
        for (id, entry) in table.iter() {
            let wanted = ids.as_ref().is_none_or(|ids| ids.contains(id))
                && kind
                    .as_deref()
                    .is_none_or(|kind| client_type(entry) == kind);
            if wanted {
                text.push_str(&describe(*id, entry));
            }
        }
        Value::Verbatim(text)
    }

    /// `CLIENT KILL addr:port` (`+OK` or no such client) or `CLIENT KILL <filter value>…`
    /// (ID, ADDR, LADDR, TYPE, SKIPME; how many were killed).
    fn kill(&self, me: u64, options: &[Vec<u8>]) -> Value {
        if let [address] = options {
            let address = String::from_utf8_lossy(address).into_owned();
            let table = self.lock();
            let found = table
                .values()
                .find(|entry| entry.address.to_string() == address);
            return match found {
                Some(entry) => {
                    entry.kill.notify_one();
                    Value::ok()
                }
                None => Value::Error("ERR No such client".into()),
            };
        }
        if options.is_empty() || options.len() % 2 == 1 {
            return Value::Error("ERR syntax error".into());
        }
        let mut filter = KillFilter::default();
        for pair in options.chunks(2) {
            if let Err(text) = filter.add(&pair[0], &pair[1]) {
                return Value::Error(text);
            }
        }
        let table = self.lock();
        let mut killed = 0;
        for (id, entry) in table.iter() {
            if filter.matches(*id, entry, me) {
                entry.kill.notify_one();
                killed += 1;
            }
        }
        Value::Integer(killed)
    }
}

/// CLIENT KILL's filters; every one given must match.
struct KillFilter {
    id: Option<u64>,
    address: Option<String>,
    local: Option<String>,
    kind: Option<Vec<u8>>,
    skip_me: bool,
}

impl Default for KillFilter {
    fn default() -> KillFilter {
        KillFilter {
            id: None,
            address: None,
            local: None,
            kind: None,
            skip_me: true,
        }
    }
}

impl KillFilter {
    fn add(&mut self, name: &[u8], value: &[u8]) -> Result<(), String> {
        let text = String::from_utf8_lossy(value).into_owned();
        match name.to_ascii_lowercase().as_slice() {
            b"id" => {
                self.id = Some(parse_id(value).ok_or("ERR client-id should be greater than 0")?)
            }
            b"addr" => self.address = Some(text),
            b"laddr" => self.local = Some(text),
            b"type" => {
                let kind = value.to_ascii_lowercase();
                if !matches!(
                    kind.as_slice(),
                    b"normal" | b"master" | b"replica" | b"pubsub"
                ) {
                    return Err(format!("ERR Unknown client type '{text}'"));
                }
                self.kind = Some(kind);
            }
            b"skipme" => match value.to_ascii_lowercase().as_slice() {
                b"yes" => self.skip_me = true,
                b"no" => self.skip_me = false,
                _ => return Err("ERR syntax error".into()),
            },
            _ => return Err("ERR syntax error".into()),
        }
        Ok(())
    }

    fn matches(&self, id: u64, entry: &Entry, me: u64) -> bool {
        !(self.skip_me && id == me)
            && self.id.is_none_or(|wanted| wanted == id)
            && self
                .address
                .as_ref()
                .is_none_or(|wanted| *wanted == entry.address.to_string())
            && self
                .local
                .as_ref()
                .is_none_or(|wanted| *wanted == entry.local.to_string())
            && self
                .kind
                .as_deref()
                .is_none_or(|wanted| wanted == client_type(entry))
    }
}

/// Whether `arguments` is SLOWLOG or CONFIG RESETSTAT (`Clients::on_stats_command`).
pub(super) fn is_stats_command(arguments: &[Vec<u8>]) -> bool {
    let name = &arguments[0];
    name.eq_ignore_ascii_case(b"slowlog")
        || (name.eq_ignore_ascii_case(b"config")
            && arguments
                .get(1)
                .is_some_and(|subcommand| subcommand.eq_ignore_ascii_case(b"resetstat")))
}

fn parse_id(value: &[u8]) -> Option<u64> {
    std::str::from_utf8(value)
        .ok()?
        .parse::<u64>()
        .ok()
        .filter(|id| *id > 0)
}

fn client_type(entry: &Entry) -> &'static [u8] {
    if entry.channels + entry.patterns > 0 {
        b"pubsub"
    } else {
        b"normal"
    }
}

fn arity(subcommand: &str) -> Value {
    arity_of(&format!("client|{subcommand}"))
}

fn arity_of(command: &str) -> Value {
    Value::Error(format!(
        "ERR wrong number of arguments for '{command}' command"
    ))
}

/// `name` or `name|subcommand` for the container commands, as CLIENT LIST's `cmd`.
fn command_name(arguments: &[Vec<u8>]) -> String {
    let name = String::from_utf8_lossy(&arguments[0]).to_ascii_lowercase();
    let container = matches!(
        name.as_str(),
        "client" | "config" | "script" | "function" | "pubsub" | "command" | "slowlog" | "object"
    );
    match arguments.get(1) {
        Some(subcommand) if container => format!(
            "{name}|{}",
            String::from_utf8_lossy(subcommand).to_ascii_lowercase()
        ),
        _ => name,
    }
}

/// One line of CLIENT LIST: the fields Tessera knows (Redis's buffer and memory fields, which
/// describe Redis's own structures, are left out).
fn describe(id: u64, entry: &Entry) -> String {
    let name = entry
        .name
        .as_deref()
        .map(String::from_utf8_lossy)
        .unwrap_or_default();
    let mut flags = String::new();
    if entry.channels + entry.patterns > 0 {
        flags.push('P');
    }
    if entry.queued.is_some() {
        flags.push('x');
    }
    if entry.no_evict {
        flags.push('e');
    }
    if entry.blocked.is_some() {
        flags.push('b');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    let multi = entry.queued.map_or(-1, |queued| queued as i64);
    format!(
        "id={id} addr={} laddr={} name={name} age={} idle={} flags={flags} db=0 sub={} psub={} multi={multi} cmd={} resp={}\n",
        entry.address,
        entry.local,
        entry.created.elapsed().as_secs(),
        entry.active.elapsed().as_secs(),
        entry.channels,
        entry.patterns,
        entry.command,
        entry.protocol,
    )
}
