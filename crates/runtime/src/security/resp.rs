//! A RESP connection's identity and what it may do: `AUTH [user] password`, `HELLO 3 AUTH user
//! password`, the ACL basics (`ACL WHOAMI/USERS/LIST/GETUSER/SETUSER/DELUSER`), the limits on
//! a request before authentication, and the check of every command against the user's rules
//! (categories `@read`, `@write`, `@admin`; key patterns `~pattern`).
//!
//! The gateway's connection asks `intercept` first for every command; it answers the commands
//! above and refusals itself, and lets the rest through. A user's rules are read when it
//! authenticates: `ACL SETUSER` on a connected user applies from its next `AUTH`.

use super::roles::{self, Role, Rules, Write};
use super::Security;
use crate::pg::RoutedBackend;
use crate::resp_codec::{Limits, ParseError};
use resp::{Plan, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the connection does with a command after `intercept`.
pub(crate) enum Intercept {
    /// Reply this, run nothing.
    Reply(Value),
    /// Run the command as it is.
    Pass,
    /// Run this command instead (HELLO without its AUTH option, once authenticated).
    Rewritten(Vec<Vec<u8>>),
}

const NOAUTH: &str = "NOAUTH Authentication required.";
const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// One RESP connection's security state.
pub(crate) struct Session<B> {
    security: Arc<Security>,
    backend: B,
    /// `None` until the connection authenticates.
    user: Option<Role>,
    /// When the connection was accepted (the authentication deadline counts from it).
    accepted: Instant,
    /// Counts the connection against its user's CONNECTION LIMIT while it lives.
    slot: Option<super::ConnectionSlot>,
}

/// What a command needs of its user.
struct Needs<'a> {
    read: bool,
    write: bool,
    admin: bool,
    /// Every key (KEYS, SCAN), or these keys.
    all_keys: bool,
    keys: Vec<&'a [u8]>,
}

fn error(text: impl Into<String>) -> Intercept {
    Intercept::Reply(Value::Error(text.into()))
}

fn lowercase(argument: &[u8]) -> String {
    String::from_utf8_lossy(argument).to_ascii_lowercase()
}

impl<B: RoutedBackend> Session<B> {
    pub(crate) fn new(security: Arc<Security>, backend: B) -> Session<B> {
        let user = (!security.required()).then(Role::unrestricted);
        Session {
            security,
            backend,
            user,
            accepted: Instant::now(),
            slot: None,
        }
    }

    /// How long the next read may wait: until the authentication deadline while the
    /// connection has not authenticated, and the idle timeout (if any) either way. `None`:
    /// for ever. A zero duration: the deadline passed.
    pub(crate) fn read_timeout(&self) -> Option<Duration> {
        let idle = self.security.idle_timeout();
        if self.authenticated() {
            return idle;
        }
        let left = self
            .security
            .auth_timeout()
            .saturating_sub(self.accepted.elapsed());
        Some(idle.map_or(left, |idle| idle.min(left)))
    }

    pub(crate) fn authenticated(&self) -> bool {
        self.user.is_some()
    }

    /// The parser's limits: Redis's small ones before authentication.
    pub(crate) fn limits(&self) -> Limits {
        let limits = Limits::default();
        if self.authenticated() {
            return limits;
        }
        Limits {
            inline_bytes_max: super::UNAUTHENTICATED_INLINE_BYTES_MAX,
            bulk_bytes_max: super::UNAUTHENTICATED_BULK_BYTES_MAX,
            array_elements_max: super::UNAUTHENTICATED_ARGUMENTS_MAX,
        }
    }

    /// The error reply for a request the parser refused (Redis's words for the limits before
    /// authentication).
    pub(crate) fn parse_error(&self, error: &ParseError) -> Value {
        let text = match error.0.as_str() {
            "Protocol error: invalid multibulk length" if !self.authenticated() => {
                "Protocol error: unauthenticated multibulk length"
            }
            "Protocol error: invalid bulk length" if !self.authenticated() => {
                "Protocol error: unauthenticated bulk length"
            }
            other => other,
        };
        Value::Error(format!("ERR {text}"))
    }

    /// Whether the connection's user may touch `key` by its key patterns: the keys a script
    /// names without declaring them are checked with it when the script finds them (its
    /// declared keys were checked by `intercept`, as Redis checks each command a script runs).
    pub(crate) fn key_permission(&self) -> KeyPermission {
        KeyPermission(self.user.clone())
    }

    /// Answers AUTH, HELLO … AUTH, ACL and every refusal; lets the rest through.
    pub(crate) async fn intercept(&mut self, arguments: &[Vec<u8>]) -> Intercept {
        let name = lowercase(&arguments[0]);
        match name.as_str() {
            "auth" => return Intercept::Reply(self.auth(arguments).await),
            "hello" => return self.hello(arguments).await,
            "quit" => return Intercept::Pass,
            _ => {}
        }
        let Some(user) = &self.user else {
            return error(NOAUTH);
        };
        if name == "acl" {
            return Intercept::Reply(self.acl(arguments).await);
        }
        if user.rules.read && user.rules.write && user.rules.admin && user.all_keys() {
            return Intercept::Pass;
        }
        let Some(needs) = needs(&name, arguments) else {
            return Intercept::Pass;
        };
        let denied = (needs.read && !user.rules.read)
            || (needs.write && !user.rules.write)
            || (needs.admin && !user.rules.admin);
        if denied {
            return error(command_refused(&name, arguments));
        }
        let keys_denied = if needs.all_keys {
            !user.all_keys()
        } else {
            needs.keys.iter().any(|key| !user.may_touch(key))
        };
        if keys_denied {
            return error(KEY_REFUSED);
        }
        Intercept::Pass
    }

    /// Checks `password` for `user`: the admin of the cluster file, or a replicated role.
    async fn verify(&self, user: &str, password: &[u8]) -> Result<Role, Value> {
        let role = if self.security.is_admin_user(user) {
            self.security.admin_role()
        } else {
            match roles::lookup(&self.backend, user).await {
                Ok(role) => role,
                Err(error) => return Err(Value::Error(format!("TRYAGAIN {error}"))),
            }
        };
        match role {
            Some(role)
                if role.rules.enabled
                    && role
                        .verifier
                        .as_ref()
                        .is_some_and(|verifier| verifier.check_password(password)) =>
            {
                Ok(role)
            }
            _ => {
                crate::log::warn(format_args!("RESP authentication failed for user {user:?}"));
                Err(Value::Error(WRONGPASS.into()))
            }
        }
    }

    /// `AUTH password` (the admin user, as Redis's `requirepass` names the default user) or
    /// `AUTH user password`.
    async fn auth(&mut self, arguments: &[Vec<u8>]) -> Value {
        let (user, password) = match arguments {
            [_, password] => {
                if !self.security.required() && self.security.admin_role().is_none() {
                    return Value::Error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?".into());
                }
                (self.security.config.admin_user.clone(), password)
            }
            [_, user, password] => (String::from_utf8_lossy(user).into_owned(), password),
            _ => return Value::Error("ERR wrong number of arguments for 'auth' command".into()),
        };
        match self.verify(&user, password).await {
            Ok(role) => match self.become_user(role) {
                Ok(()) => Value::ok(),
                Err(reply) => reply,
            },
            Err(reply) => reply,
        }
    }

    /// Makes the connection `role`'s, counted against its CONNECTION LIMIT (a connection that
    /// authenticates again as the same user keeps its slot). Refused: the connection stays
    /// as it was.
    fn become_user(&mut self, role: Role) -> Result<(), Value> {
        let same = self
            .slot
            .as_ref()
            .is_some_and(|slot| slot.role() == role.name);
        if !same {
            let slot = self
                .security
                .admit(&role)
                .map_err(|refusal| Value::Error(format!("ERR {refusal}")))?;
            self.slot = slot;
        }
        self.user = Some(role);
        Ok(())
    }

    /// `HELLO [protover [AUTH user password] [SETNAME name]]`: authenticates if AUTH is given,
    /// then lets HELLO run without it.
    async fn hello(&mut self, arguments: &[Vec<u8>]) -> Intercept {
        let auth_at = (2..arguments.len().saturating_sub(2))
            .find(|&index| arguments[index].eq_ignore_ascii_case(b"auth"));
        let Some(at) = auth_at else {
            if self.authenticated() {
                return Intercept::Pass;
            }
            return error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
        };
        let user = String::from_utf8_lossy(&arguments[at + 1]).into_owned();
        let verified = match self.verify(&user, &arguments[at + 2]).await {
            Ok(role) => self.become_user(role),
            Err(reply) => Err(reply),
        };
        if let Err(reply) = verified {
            return Intercept::Reply(reply);
        }
        let mut rewritten = arguments[..at].to_vec();
        rewritten.extend_from_slice(&arguments[at + 3..]);
        Intercept::Rewritten(rewritten)
    }
}

/// What a command other than AUTH, HELLO, QUIT and ACL needs; `None`: nothing (connection
/// commands such as PING, CLIENT SETNAME, INFO, errors).
fn needs<'a>(name: &str, arguments: &'a [Vec<u8>]) -> Option<Needs<'a>> {
    let mut needs = Needs {
        read: false,
        write: false,
        admin: false,
        all_keys: false,
        keys: Vec::new(),
    };
    match name {
        "keys" | "scan" | "dbsize" | "randomkey" => {
            needs.read = true;
            needs.all_keys = true;
            return Some(needs);
        }
        "flushall" | "flushdb" | "debug" | "config" | "shutdown" => {
            needs.admin = true;
            return Some(needs);
        }
        "readmode" => return None,
        // A script may touch only the keys it declares (`script` refuses any other), with
        // any command: it needs what its keys and its commands might need.
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" => {
            needs.read = true;
            needs.write = !name.ends_with("_ro");
            needs.keys = declared_keys(arguments);
            return Some(needs);
        }
        // Pub/sub (`ecast::pubsub`): Tessera has no channel permissions; publishing is a
        // write, subscribing a read.
        "publish" => {
            needs.write = true;
            return Some(needs);
        }
        "subscribe" | "psubscribe" | "pubsub" => {
            needs.read = true;
            return Some(needs);
        }
        _ => {}
    }
    match resp::plan(arguments) {
        Plan::Execute(pending) => {
            let _ = &pending;
            needs.read = pending.command.is_read();
            needs.write = !needs.read;
            // SORT's BY and GET patterns name keys from the elements, which no key pattern of
            // the user's can be checked against in advance: they need every key (as Redis 7.0
            // refuses them without full key access).
            needs.all_keys =
                pending.command.keys().is_empty() || sorts_by_patterns(&pending.command);
            needs.keys = command_keys(arguments, &pending.command);
            Some(needs)
        }
        Plan::PeerDelay { .. } => {
            needs.admin = true;
            Some(needs)
        }
        _ => None,
    }
}

/// Whether a command is a SORT whose BY or GET patterns read other keys.
fn sorts_by_patterns(command: &kv::Command) -> bool {
    match command.unstamped() {
        kv::Command::Keys(kv::KeysOperation::Sort { options, .. }) => {
            options.by.as_ref().is_some_and(|by| by.contains(&b'*'))
                || options.gets.iter().any(|get| get.as_slice() != b"#")
        }
        _ => false,
    }
}

/// The keys an EVAL-like command declares (`name body numkeys key…`); none if its count is
/// not a number that fits (the command then fails before running).
fn declared_keys(arguments: &[Vec<u8>]) -> Vec<&[u8]> {
    let count = arguments
        .get(2)
        .and_then(|count| std::str::from_utf8(count).ok())
        .and_then(|count| count.parse::<usize>().ok());
    match count {
        Some(count) if count <= arguments.len().saturating_sub(3) => {
            arguments[3..3 + count].iter().map(Vec::as_slice).collect()
        }
        _ => Vec::new(),
    }
}

/// The keys of a planned command, borrowed from the request's arguments (a planned command
/// names its keys as copies of arguments).
fn command_keys<'a>(arguments: &'a [Vec<u8>], command: &kv::Command) -> Vec<&'a [u8]> {
    command
        .keys()
        .into_iter()
        .map(|key| {
            arguments
                .iter()
                .find(|argument| argument.as_slice() == key)
                .map(Vec::as_slice)
                // A key the planner derived (never today): no argument grants it.
                .unwrap_or(b"\0tessera:derived-key")
        })
        .collect()
}

// ----- ACL. -----

/// Applies one `ACL SETUSER` rule.
fn apply_rule(role: &mut Role, rule: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(rule);
    let lower = text.to_ascii_lowercase();
    let rules = &mut role.rules;
    match lower.as_str() {
        "on" => rules.enabled = true,
        "off" => rules.enabled = false,
        "+@all" | "allcommands" => (rules.read, rules.write, rules.admin) = (true, true, true),
        "-@all" | "nocommands" => (rules.read, rules.write, rules.admin) = (false, false, false),
        "+@read" => rules.read = true,
        "-@read" => rules.read = false,
        "+@write" => rules.write = true,
        "-@write" => rules.write = false,
        "+@admin" | "+@dangerous" => rules.admin = true,
        "-@admin" | "-@dangerous" => rules.admin = false,
        "allkeys" => rules.key_patterns = vec![b"*".to_vec()],
        "resetkeys" => rules.key_patterns.clear(),
        "resetpass" => role.verifier = None,
        "reset" => {
            *rules = Rules::default();
            role.verifier = None;
        }
        "nopass" => return Err("'nopass' is not supported: every user has a password".into()),
        _ if rule.starts_with(b">") => {
            let password = String::from_utf8(rule[1..].to_vec())
                .map_err(|_| "passwords must be UTF-8".to_string())?;
            role.verifier = Some(roles::verifier_of_password(&password));
        }
        _ if rule.starts_with(b"~") => {
            if rules.key_patterns.len() >= roles::KEY_PATTERNS_MAX {
                return Err(format!("at most {} key patterns", roles::KEY_PATTERNS_MAX));
            }
            rules.key_patterns.push(rule[1..].to_vec());
        }
        _ => return Err("Syntax error".into()),
    }
    Ok(())
}

fn rules_text(role: &Role) -> (String, String) {
    let rules = &role.rules;
    let commands = match (rules.read, rules.write, rules.admin) {
        (true, true, true) => "+@all".to_string(),
        (false, false, false) => "-@all".to_string(),
        (read, write, admin) => {
            let mut parts = vec!["-@all"];
            for (on, name) in [(read, "+@read"), (write, "+@write"), (admin, "+@admin")] {
                if on {
                    parts.push(name);
                }
            }
            parts.join(" ")
        }
    };
    let keys: Vec<String> = rules
        .key_patterns
        .iter()
        .map(|pattern| format!("~{}", String::from_utf8_lossy(pattern)))
        .collect();
    (commands, keys.join(" "))
}

/// A password shown as Redis shows one: `#` and a hex digest (here SHA-256 of the verifier's
/// StoredKey, `Verifier::fingerprint`: neither the password nor the salted password, which
/// would let a reader log in, is shown).
fn password_text(role: &Role) -> Option<String> {
    role.verifier.as_ref().map(|verifier| {
        verifier
            .fingerprint()
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    })
}

impl<B: RoutedBackend> Session<B> {
    fn user_name(&self) -> &str {
        self.user
            .as_ref()
            .map_or("default", |user| user.name.as_str())
    }

    async fn acl(&mut self, arguments: &[Vec<u8>]) -> Value {
        let Some(subcommand) = arguments.get(1).map(|argument| lowercase(argument)) else {
            return Value::Error("ERR wrong number of arguments for 'acl' command".into());
        };
        if subcommand == "whoami" {
            return Value::Bulk(self.user_name().as_bytes().to_vec());
        }
        let admin = self.user.as_ref().is_some_and(|user| user.rules.admin);
        if !admin {
            return Value::Error(command_refused("acl", arguments));
        }
        let result = match subcommand.as_str() {
            "users" | "list" => self.acl_list(subcommand == "list").await,
            "getuser" => self.acl_getuser(arguments).await,
            "setuser" => self.acl_setuser(arguments).await,
            "deluser" => self.acl_deluser(arguments).await,
            _ => Err(format!(
                "ERR unknown subcommand '{subcommand}'. Try ACL HELP."
            )),
        };
        result.unwrap_or_else(Value::Error)
    }

    /// Every user: the cluster file's admin first, then the replicated roles.
    async fn all_users(&self) -> Result<Vec<Role>, String> {
        let mut users: Vec<Role> = self.security.admin_role().into_iter().collect();
        let replicated = roles::list(&self.backend)
            .await
            .map_err(|error| format!("TRYAGAIN {error}"))?;
        users.extend(replicated);
        Ok(users)
    }

    async fn acl_list(&self, rules: bool) -> Result<Value, String> {
        let users = self.all_users().await?;
        Ok(Value::Array(
            users
                .iter()
                .map(|user| {
                    if !rules {
                        return Value::Bulk(user.name.as_bytes().to_vec());
                    }
                    let (commands, keys) = rules_text(user);
                    let mut line = format!(
                        "user {} {}",
                        user.name,
                        if user.rules.enabled { "on" } else { "off" }
                    );
                    if let Some(password) = password_text(user) {
                        line.push_str(&format!(" #{password}"));
                    }
                    for part in [keys, commands] {
                        if !part.is_empty() {
                            line.push(' ');
                            line.push_str(&part);
                        }
                    }
                    Value::Bulk(line.into_bytes())
                })
                .collect(),
        ))
    }

    async fn find(&self, name: &str) -> Result<Option<Role>, String> {
        if self.security.is_admin_user(name) {
            return Ok(self.security.admin_role());
        }
        roles::lookup(&self.backend, name)
            .await
            .map_err(|error| format!("TRYAGAIN {error}"))
    }

    async fn acl_getuser(&self, arguments: &[Vec<u8>]) -> Result<Value, String> {
        let [_, _, name] = arguments else {
            return Err("ERR wrong number of arguments for 'acl|getuser' command".into());
        };
        let Some(user) = self.find(&String::from_utf8_lossy(name)).await? else {
            return Ok(Value::Null);
        };
        let (commands, keys) = rules_text(&user);
        let bulk = |text: &str| Value::Bulk(text.as_bytes().to_vec());
        let flag = if user.rules.enabled { "on" } else { "off" };
        Ok(Value::Map(vec![
            (bulk("flags"), Value::Array(vec![bulk(flag)])),
            (
                bulk("passwords"),
                Value::Array(password_text(&user).iter().map(|text| bulk(text)).collect()),
            ),
            (bulk("commands"), bulk(&commands)),
            (bulk("keys"), bulk(&keys)),
            (bulk("channels"), bulk("")),
            (bulk("selectors"), Value::Array(Vec::new())),
        ]))
    }

    async fn acl_setuser(&self, arguments: &[Vec<u8>]) -> Result<Value, String> {
        let Some(name) = arguments.get(2) else {
            return Err("ERR wrong number of arguments for 'acl|setuser' command".into());
        };
        let name = String::from_utf8_lossy(name).into_owned();
        if !roles::valid_name(&name) {
            return Err("ERR Usernames can't contain spaces or null characters".into());
        }
        if self.security.is_admin_user(&name) {
            return Err(format!("ERR the user '{name}' is the admin user of the cluster file (security.admin_user) and cannot be changed with ACL"));
        }
        let mut role = self.find(&name).await?.unwrap_or(Role {
            name: name.clone(),
            verifier: None,
            rules: Rules::default(),
        });
        for rule in &arguments[3..] {
            apply_rule(&mut role, rule).map_err(|reason| {
                format!(
                    "ERR Error in ACL SETUSER modifier '{}': {reason}",
                    String::from_utf8_lossy(rule)
                )
            })?;
        }
        roles::write(&self.backend, &role, Write::Upsert)
            .await
            .map_err(|error| format!("TRYAGAIN {error}"))?;
        Ok(Value::ok())
    }

    async fn acl_deluser(&self, arguments: &[Vec<u8>]) -> Result<Value, String> {
        if arguments.len() < 3 {
            return Err("ERR wrong number of arguments for 'acl|deluser' command".into());
        }
        let mut deleted = 0;
        for name in &arguments[2..] {
            let name = String::from_utf8_lossy(name);
            if self.security.is_admin_user(&name) {
                return Err(format!("ERR The '{name}' user cannot be removed"));
            }
            if roles::delete(&self.backend, &name)
                .await
                .map_err(|error| format!("TRYAGAIN {error}"))?
            {
                deleted += 1;
            }
        }
        Ok(Value::Integer(deleted))
    }
}

/// The TLS handshake of a RESP client, within `timeout`; `None` (logged) when it fails.
pub(crate) async fn handshake(
    acceptor: &tokio_rustls::TlsAcceptor,
    stream: tokio::net::TcpStream,
    timeout: &Duration,
) -> Option<tokio_rustls::server::TlsStream<tokio::net::TcpStream>> {
    match tokio::time::timeout(*timeout, acceptor.accept(stream)).await {
        Ok(Ok(encrypted)) => Some(encrypted),
        Ok(Err(error)) => {
            crate::log::warn(format_args!("RESP client's TLS handshake failed: {error}"));
            None
        }
        Err(_) => {
            crate::log::warn(format_args!("RESP client's TLS handshake timed out"));
            None
        }
    }
}

/// Answers a client beyond `max_connections` as Redis does, and closes it.
pub(crate) async fn refuse_connection(mut stream: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt;
    crate::log::warn(format_args!(
        "RESP client refused: security.max_connections reached"
    ));
    let _ = stream
        .write_all(b"-ERR max number of clients reached\r\n")
        .await;
    let _ = stream.shutdown().await;
}

/// A connection user's key patterns, owned (it outlives a borrow of the session across a
/// script's run).
pub(crate) struct KeyPermission(Option<Role>);

impl KeyPermission {
    pub(crate) fn allows(&self, key: &[u8]) -> bool {
        self.0.as_ref().is_some_and(|user| user.may_touch(key))
    }
}

/// Redis 7.0's refusal of a key outside the user's patterns (7.2 words it "No permissions to
/// access a key"; Tessera answers as the 7.0.15 it is checked against).
pub const KEY_REFUSED: &str =
    "NOPERM this user has no permissions to access one of the keys used as arguments";

/// Commands Redis 7.0 names with their subcommand in a refusal (`'config|get'`).
const CONTAINER_COMMANDS: [&str; 15] = [
    "acl", "client", "cluster", "command", "config", "function", "latency", "memory", "module",
    "object", "pubsub", "script", "slowlog", "xgroup", "xinfo",
];

/// Redis 7.0's refusal of a command outside the user's categories, byte for byte:
/// `NOPERM this user has no permissions to run the 'set' command` (`'acl|setuser'` for a
/// container command's subcommand).
pub fn command_refused(name: &str, arguments: &[Vec<u8>]) -> String {
    let full_name = match arguments.get(1) {
        Some(subcommand) if CONTAINER_COMMANDS.contains(&name) => {
            format!("{name}|{}", lowercase(subcommand))
        }
        _ => name.to_string(),
    };
    format!("NOPERM this user has no permissions to run the '{full_name}' command")
}

#[cfg(test)]
mod tests {

    #[test]
    fn refusals_are_redis_7_0_bytes() {
        let arguments = |words: &[&str]| -> Vec<Vec<u8>> {
            words.iter().map(|word| word.as_bytes().to_vec()).collect()
        };
        // What redis-server 7.0.15 answers a user with `+@read ~a*` (recorded by hand).
        assert_eq!(
            command_refused("set", &arguments(&["SET", "a", "1"])),
            "NOPERM this user has no permissions to run the 'set' command"
        );
        assert_eq!(
            command_refused("acl", &arguments(&["ACL", "SETUSER", "x"])),
            "NOPERM this user has no permissions to run the 'acl|setuser' command"
        );
        assert_eq!(
            command_refused("config", &arguments(&["CONFIG", "GET", "x"])),
            "NOPERM this user has no permissions to run the 'config|get' command"
        );
        assert_eq!(
            command_refused("flushall", &arguments(&["FLUSHALL", "ASYNC"])),
            "NOPERM this user has no permissions to run the 'flushall' command"
        );
        assert_eq!(
            KEY_REFUSED,
            "NOPERM this user has no permissions to access one of the keys used as arguments"
        );
    }

    use super::*;

    #[test]
    fn setuser_rules_change_what_they_name() {
        let mut role = Role {
            name: "u".into(),
            verifier: None,
            rules: Rules::default(),
        };
        for rule in ["on", "+@read", "~user:*", ">secret"] {
            apply_rule(&mut role, rule.as_bytes()).unwrap();
        }
        assert!(role.rules.enabled && role.rules.read && !role.rules.write && !role.rules.admin);
        assert!(role.verifier.as_ref().unwrap().check_password(b"secret"));
        assert_eq!(rules_text(&role), ("-@all +@read".into(), "~user:*".into()));
        assert!(apply_rule(&mut role, b"+@bogus").is_err());
        assert!(apply_rule(&mut role, b"nopass").is_err());
        apply_rule(&mut role, b"reset").unwrap();
        assert_eq!(role.rules, Rules::default());
        assert!(role.verifier.is_none());
    }

    #[test]
    fn commands_need_their_category_and_keys() {
        let arguments = |words: &[&str]| -> Vec<Vec<u8>> {
            words.iter().map(|word| word.as_bytes().to_vec()).collect()
        };
        let get = arguments(&["GET", "k"]);
        let needs_get = needs("get", &get).unwrap();
        assert!(needs_get.read && !needs_get.write);
        assert_eq!(needs_get.keys, vec![&b"k"[..]]);
        let set = arguments(&["SET", "a", "b"]);
        let needs_set = needs("set", &set).unwrap();
        assert!(needs_set.write && !needs_set.read);
        assert_eq!(needs_set.keys, vec![&b"a"[..]]);
        assert!(needs("flushall", &arguments(&["FLUSHALL"])).unwrap().admin);
        assert!(needs("keys", &arguments(&["KEYS", "*"])).unwrap().all_keys);
        assert!(needs("ping", &arguments(&["PING"])).is_none());
    }
}
