//! Who may talk to a storage process, and how much before they say who they are: the
//! `[security]` section of the cluster file, the admin user it defines, roles kept in the
//! replicated state (`roles`), SCRAM-SHA-256 verifiers (`scram`), and what a RESP connection
//! may do before and after `AUTH` (`resp`). The PostgreSQL front end (`crate::pg`) frames the
//! SCRAM exchange, which `scram` runs with the `pgwire` crate's server side. `docs/security.md` has the threat model.
//!
//! Secure by default: a cluster file without `[security]` requires authentication on every
//! client port, and a storage process refuses to start without the admin's password file
//! (`admin_password_file`, by default `<data_dir>/admin-password`). `insecure = true` turns
//! authentication off (every connection acts as a user with every right), and is logged as a
//! warning at start.

pub mod grants;
pub mod resp;
pub mod roles;
pub mod scram;
pub mod tls;

use crate::log;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The `[security]` section of the cluster file. Every field has a default.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SecurityConfig {
    /// No authentication on the client ports: every connection may do everything. Logged as
    /// a warning by every storage process.
    pub insecure: bool,
    /// The admin user's name: a superuser on pgwire, `+@all ~*` on RESP. Defined by this
    /// file (not the replicated roles), so a new cluster has someone who can create roles.
    pub admin_user: String,
    /// A file whose first line is the admin's password (absent: `<data_dir>/admin-password`).
    /// Read once at start; the process keeps only a SCRAM verifier of it.
    pub admin_password_file: Option<PathBuf>,
    /// Client connections per port of this storage process at most (RESP and pgwire each;
    /// not a cluster-wide count, `SHOW max_connections` shows it): beyond it a RESP client
    /// gets `-ERR max number of clients reached`, a PostgreSQL one FATAL 53300, and is closed.
    pub max_connections: usize,
    /// A connection that has not authenticated (pgwire: finished its startup and SCRAM
    /// exchange) within this long is closed: slow clients cannot hold connections open.
    pub auth_timeout_ms: u64,
    /// A connection that sends nothing for this long is closed (0: never; Redis's `timeout`,
    /// PostgreSQL's `idle_session_timeout`, FATAL 57P05).
    pub idle_timeout_ms: u64,
    /// The client ports' TLS certificate chain (PEM). With `tls_key_file`: the RESP port
    /// speaks only TLS and the PostgreSQL port refuses sessions without it (`tls`).
    pub tls_cert_file: Option<PathBuf>,
    /// The private key of `tls_cert_file` (PEM).
    pub tls_key_file: Option<PathBuf>,
    /// A file whose first line is the cluster secret (at least 16 bytes) every process
    /// authenticates its E-Cast frames with (HMAC-SHA-256, `ecast::link`); absent:
    /// `<data_dir>/cluster-secret`. Not read when `insecure`. `tessera admin` reads it too:
    /// without it, its requests are dropped.
    pub cluster_secret_file: Option<PathBuf>,
}

impl Default for SecurityConfig {
    fn default() -> SecurityConfig {
        SecurityConfig {
            insecure: false,
            admin_user: "admin".to_string(),
            admin_password_file: None,
            max_connections: 1_000,
            auth_timeout_ms: 10_000,
            idle_timeout_ms: 0,
            tls_cert_file: None,
            tls_key_file: None,
            cluster_secret_file: None,
        }
    }
}

impl SecurityConfig {
    /// The settings an insecure test or benchmark cluster writes.
    pub fn insecure() -> SecurityConfig {
        SecurityConfig {
            insecure: true,
            ..SecurityConfig::default()
        }
    }

    /// Checks the values (called when the cluster file is loaded).
    pub fn validate(&self) -> Result<(), String> {
        if self.max_connections == 0 {
            return Err("security.max_connections must be positive".into());
        }
        if self.auth_timeout_ms == 0 {
            return Err("security.auth_timeout_ms must be positive".into());
        }
        if self.tls_cert_file.is_some() != self.tls_key_file.is_some() {
            return Err("security.tls_cert_file and security.tls_key_file go together".into());
        }
        if !roles::valid_name(&self.admin_user) {
            return Err(format!(
                "security.admin_user {:?} is not a valid user name",
                self.admin_user
            ));
        }
        Ok(())
    }

    /// Where the admin's password is read from.
    pub fn admin_password_path(&self, data_dir: &Path) -> PathBuf {
        self.admin_password_file
            .clone()
            .unwrap_or_else(|| data_dir.join("admin-password"))
    }

    /// The section as TOML (`ClusterConfig::render`); empty when everything is the default.
    pub fn render(&self) -> String {
        let default = SecurityConfig::default();
        if *self == default {
            return String::new();
        }
        let mut text = String::from("\n[security]\n");
        if self.insecure {
            text.push_str("insecure = true\n");
        }
        if self.admin_user != default.admin_user {
            text.push_str(&format!("admin_user = {:?}\n", self.admin_user));
        }
        if let Some(path) = &self.admin_password_file {
            text.push_str(&format!(
                "admin_password_file = {:?}\n",
                path.display().to_string()
            ));
        }
        for (name, path) in [
            ("tls_cert_file", &self.tls_cert_file),
            ("tls_key_file", &self.tls_key_file),
            ("cluster_secret_file", &self.cluster_secret_file),
        ] {
            if let Some(path) = path {
                text.push_str(&format!("{name} = {:?}\n", path.display().to_string()));
            }
        }
        for (name, value, default) in [
            (
                "max_connections",
                self.max_connections as u64,
                default.max_connections as u64,
            ),
            (
                "auth_timeout_ms",
                self.auth_timeout_ms,
                default.auth_timeout_ms,
            ),
            (
                "idle_timeout_ms",
                self.idle_timeout_ms,
                default.idle_timeout_ms,
            ),
        ] {
            if value != default {
                text.push_str(&format!("{name} = {value}\n"));
            }
        }
        text
    }
}

/// Shortest cluster secret accepted.
pub const CLUSTER_SECRET_BYTES_MIN: usize = 16;

/// Reads the cluster secret (`None` when insecure) and makes this process authenticate its
/// E-Cast frames with it. Every process of the cluster (routers, storage processes, `tessera
/// admin`, `tessera bench-ecast`) calls this before its first link.
pub fn authenticate_peers(config: &SecurityConfig, data_dir: &Path) -> Result<(), String> {
    if config.insecure {
        return crate::ecast::link::use_cluster_secret(None);
    }
    let path = config
        .cluster_secret_file
        .clone()
        .unwrap_or_else(|| data_dir.join("cluster-secret"));
    let text = std::fs::read_to_string(&path).map_err(|error| {
        format!(
            "peers authenticate their frames and the cluster secret {} cannot be read ({error}): write a secret there, set security.cluster_secret_file, or set security.insecure = true",
            path.display()
        )
    })?;
    let secret = text.lines().next().unwrap_or("").trim();
    if secret.len() < CLUSTER_SECRET_BYTES_MIN {
        return Err(format!(
            "the cluster secret in {} is shorter than {CLUSTER_SECRET_BYTES_MIN} bytes",
            path.display()
        ));
    }
    crate::ecast::link::use_cluster_secret(Some(secret.as_bytes()))
}

/// Limits on what a RESP connection may send before it authenticates (Redis's: a request of
/// more than 10 arguments or with a bulk string over 16 KiB is a protocol error that closes
/// the connection), and an inline request over 1 KiB.
pub const UNAUTHENTICATED_ARGUMENTS_MAX: usize = 10;
pub const UNAUTHENTICATED_BULK_BYTES_MAX: usize = 16 * 1024;
pub const UNAUTHENTICATED_INLINE_BYTES_MAX: usize = 1024;

/// A storage process's security settings at run time.
pub struct Security {
    pub config: SecurityConfig,
    /// The admin's verifier, made at start from the password file (`None` when insecure and
    /// the file is absent).
    admin: Option<scram::Verifier>,
    /// Salts the made-up verifiers of unknown users (so that an unknown user's exchange
    /// looks like a known one's, as PostgreSQL's mock authentication does).
    mock_secret: [u8; 16],
    /// The client ports' TLS, if configured.
    tls: Option<tokio_rustls::TlsAcceptor>,
    /// Open connections per role name in this process (pgwire and RESP), for CONNECTION LIMIT;
    /// only roles that are not superusers are counted. An entry is removed at zero.
    connections: std::sync::Mutex<std::collections::HashMap<String, u32>>,
}

/// One counted connection of a role (`Security::admit`); released when dropped.
pub struct ConnectionSlot {
    security: Arc<Security>,
    role: String,
}

impl ConnectionSlot {
    /// The role the slot counts a connection of.
    pub fn role(&self) -> &str {
        &self.role
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut connections = self.security.connections();
        let count = connections
            .get_mut(&self.role)
            .expect("a slot's role is counted");
        assert!(*count > 0);
        *count -= 1;
        if *count == 0 {
            connections.remove(&self.role);
        }
    }
}

impl std::fmt::Debug for Security {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Security")
            .field("config", &self.config)
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

impl Security {
    /// Reads the admin's password file and makes its verifier. An error when authentication
    /// is on and the file is missing or empty.
    pub fn load(config: &SecurityConfig, data_dir: &Path) -> Result<Arc<Security>, String> {
        config.validate()?;
        let path = config.admin_password_path(data_dir);
        let password = match std::fs::read_to_string(&path) {
            Ok(text) => text.lines().next().unwrap_or("").to_string(),
            Err(_) if config.insecure => String::new(),
            Err(error) => {
                return Err(format!(
                    "authentication is on and the admin's password file {} cannot be read ({error}): write a password there, set security.admin_password_file, or set security.insecure = true",
                    path.display()
                ))
            }
        };
        if password.is_empty() && !config.insecure {
            return Err(format!(
                "the admin's password file {} is empty",
                path.display()
            ));
        }
        if config.insecure {
            log::warn(format_args!(
                "security.insecure = true: client ports accept anyone, without a password"
            ));
        }
        let admin = (!password.is_empty()).then(|| {
            scram::Verifier::new(
                password.as_bytes(),
                &random_bytes::<{ scram::SALT_BYTES }>(),
                scram::ITERATIONS_DEFAULT,
            )
        });
        let tls = match (&config.tls_cert_file, &config.tls_key_file) {
            (Some(certificate), Some(key)) => Some(tls::acceptor(certificate, key)?),
            _ => None,
        };
        Ok(Arc::new(Security {
            config: config.clone(),
            admin,
            mock_secret: random_bytes::<16>(),
            tls,
            connections: Default::default(),
        }))
    }

    /// Open settings for a process that runs without a cluster file's `[security]` (the old
    /// single-group runtime, tests of the front ends alone).
    pub fn open() -> Arc<Security> {
        Arc::new(Security {
            config: SecurityConfig::insecure(),
            admin: None,
            mock_secret: [0; 16],
            tls: None,
            connections: Default::default(),
        })
    }

    fn connections(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, u32>> {
        self.connections
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Counts a new connection of `role` against its CONNECTION LIMIT in this process: `Ok`
    /// with the slot to hold while connected (`None` for a superuser, never counted), or the
    /// refusal's text (PostgreSQL's, SQLSTATE 53300) when the role has its limit already.
    pub fn admit(
        self: &Arc<Security>,
        role: &roles::Role,
    ) -> Result<Option<ConnectionSlot>, String> {
        if role.rules.admin {
            return Ok(None);
        }
        let mut connections = self.connections();
        let count = connections.entry(role.name.clone()).or_insert(0);
        if role
            .rules
            .connection_limit
            .is_some_and(|limit| *count >= limit)
        {
            if *count == 0 {
                connections.remove(&role.name);
            }
            return Err(format!("too many connections for role \"{}\"", role.name));
        }
        *count += 1;
        Ok(Some(ConnectionSlot {
            security: Arc::clone(self),
            role: role.name.clone(),
        }))
    }

    /// The client ports' TLS acceptor, if `tls_cert_file` is set.
    pub fn tls(&self) -> Option<&tokio_rustls::TlsAcceptor> {
        self.tls.as_ref()
    }

    /// Whether clients must authenticate.
    pub fn required(&self) -> bool {
        !self.config.insecure
    }

    /// The admin user as a role (every right), if it has a password.
    pub fn admin_role(&self) -> Option<roles::Role> {
        Some(roles::Role::admin(
            &self.config.admin_user,
            self.admin.clone()?,
        ))
    }

    /// Whether `name` is the admin user (defined by the cluster file, not by a role).
    pub fn is_admin_user(&self, name: &str) -> bool {
        name == self.config.admin_user
    }

    /// A verifier that no password matches, the same for every call with one name, for the
    /// exchange with a user that does not exist.
    pub fn mock_verifier(&self, name: &str) -> scram::Verifier {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &self.mock_secret);
        let salt = ring::hmac::sign(&key, name.as_bytes());
        let salted = ring::hmac::sign(&key, salt.as_ref());
        scram::Verifier {
            iterations: scram::ITERATIONS_DEFAULT,
            salt: salt.as_ref()[..scram::SALT_BYTES].to_vec(),
            salted_password: salted
                .as_ref()
                .try_into()
                .expect("HMAC-SHA-256 tags are 32 bytes"),
        }
    }

    pub fn auth_timeout(&self) -> Duration {
        Duration::from_millis(self.config.auth_timeout_ms)
    }

    /// `None`: connections may stay idle for ever.
    pub fn idle_timeout(&self) -> Option<Duration> {
        (self.config.idle_timeout_ms > 0)
            .then(|| Duration::from_millis(self.config.idle_timeout_ms))
    }
}

/// `N` bytes from the operating system's generator.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; N];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .expect("the operating system's random generator works");
    bytes
}

/// A printable random token (a SCRAM nonce, a generated password): `bytes` random bytes in
/// URL-safe base64 without padding.
pub fn random_token(bytes: usize) -> String {
    use base64::Engine as _;
    use ring::rand::SecureRandom;
    let mut buffer = vec![0u8; bytes];
    ring::rand::SystemRandom::new()
        .fill(&mut buffer)
        .expect("the operating system's random generator works");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(buffer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_limits_count_a_roles_connections_and_release_them_when_dropped() {
        let security = Security::open();
        let mut role = roles::Role::unrestricted();
        assert!(
            security.admit(&role).unwrap().is_none(),
            "superusers are not counted"
        );
        role.rules.admin = false;
        role.rules.connection_limit = Some(2);
        let first = security.admit(&role).unwrap().unwrap();
        let second = security.admit(&role).unwrap().unwrap();
        assert_eq!(
            security.admit(&role).err().unwrap(),
            "too many connections for role \"default\""
        );
        drop(first);
        let third = security.admit(&role).unwrap().unwrap();
        assert_eq!(third.role(), "default");
        role.rules.connection_limit = Some(0);
        drop((second, third));
        assert!(security.admit(&role).is_err());
        assert!(
            security.connections().is_empty(),
            "no count is left at zero"
        );
        role.rules.connection_limit = None;
        let unlimited: Vec<_> = (0..5).map(|_| security.admit(&role).unwrap()).collect();
        assert_eq!(security.connections()["default"], 5);
        drop(unlimited);
        assert!(security.connections().is_empty());
    }
}
