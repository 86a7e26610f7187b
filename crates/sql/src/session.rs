//! Per-connection settings: SET, SHOW, RESET, DISCARD ALL, and the transaction statements.
//!
//! Transactions: the session keeps no transaction state. BEGIN and START TRANSACTION parse to
//! `SessionCommand::Begin`, which the PostgreSQL front end (`runtime::pg`) turns into a
//! transaction block over the cluster (`docs/internals/sprint.md`); `Session::apply` refuses
//! it with 0A000 (`parse::transactions_refused`), for a front end without transactions, since
//! accepting it would let a client believe a later ROLLBACK undoes its statements. With no
//! block open, COMMIT, END, ROLLBACK and ABORT succeed with a WARNING "there is no transaction
//! in progress" (25P01, `SessionCommand::warning`); SAVEPOINT, RELEASE SAVEPOINT, ROLLBACK TO
//! SAVEPOINT and `AND CHAIN` fail with 25P01; inside a block the front end runs savepoints.

use crate::error::{sqlstate, SqlError};
use std::collections::BTreeMap;

/// The isolation levels PostgreSQL accepts in `SET [default_]transaction_isolation`; every one
/// is served as serializable.
const ISOLATION_LEVELS: &[&str] = &[
    "serializable",
    "repeatable read",
    "read committed",
    "read uncommitted",
];

/// What `SHOW server_version` answers, and `version()`.
pub const SERVER_VERSION: &str = "15.0";
pub const VERSION_STRING: &str = "PostgreSQL 15.0 (Tessera) on x86_64, compiled by rustc";

/// The read isolation a session asks for (`SET tessera.read_isolation`, Crescando/RB §6.7).
///
/// It applies to autocommit read-only statements only. Writes, and every statement inside
/// `BEGIN … COMMIT` (reads included), are strictly serialisable whatever the setting says
/// (Sprint, `docs/internals/sprint.md`): as in PostgreSQL, where a session setting never
/// weakens what a transaction guarantees.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ReadIsolation {
    /// Reads are ordered with the writes (an E-Cast message, or a partition log's op through
    /// the router bypass): strictly serialisable.
    #[default]
    Sequential,
    /// A read timestamped by the lead router, at one point of every partition's stream: a
    /// consistent cut.
    Snapshot,
    /// A read straight from one replica per key, checked only against the configuration
    /// version: per key a regular register, no consistent cut.
    Basic,
}

impl ReadIsolation {
    /// The setting's value naming this level.
    pub fn name(self) -> &'static str {
        match self {
            ReadIsolation::Sequential => "sequential",
            ReadIsolation::Snapshot => "snapshot",
            ReadIsolation::Basic => "basic",
        }
    }

    /// The level a read asked at this one is served at over SQL, as `SHOW
    /// tessera.read_isolation` answers it (as `SHOW transaction_isolation` answers
    /// `serializable`): each level is served as itself on a partitioned cluster.
    /// `basic` — for an autocommit SELECT pinned to one partition key, answered by its
    /// partition group's primary from its executed state (a regular register per row:
    /// `docs/internals/sql.md`, "Read isolation"); any other read (several partitions, every
    /// partition) is served `sequential` with a NOTICE (`served_stronger`). `snapshot` — every
    /// autocommit read: over several partitions one `PartitionOperation::Snapshot` per
    /// partition group at one router timestamp, over one partition an op of its log (one
    /// point of one partition: a consistent cut) (`docs/internals/sql.md`, "Snapshot
    /// SELECTs"). A read refused at the moment and served through the log instead (a basic
    /// read the primary refuses, a snapshot read its groups keep refusing) gets no NOTICE:
    /// the refusal is the state of the moment, not the statement's kind. A backend of one
    /// group (`LocalBackend`) serves every read `sequential`, with the NOTICE.
    ///
    /// Sequential keeps every promise of the weaker levels — a snapshot read's consistent cut
    /// (an every-partition read is one E-Cast message, executed by every partition at one
    /// point of the global order), a basic read's "never older than the last write completed
    /// before it began" — so serving it is honouring the setting, the way PostgreSQL serves
    /// READ UNCOMMITTED as READ COMMITTED.
    pub fn served(self) -> ReadIsolation {
        self
    }

    /// The NOTICE (00000) for an autocommit read asked at `asked` and served at the stronger
    /// `served`.
    pub fn served_stronger(asked: ReadIsolation, served: ReadIsolation) -> SqlError {
        let scope = match asked {
            ReadIsolation::Basic => {
                "tessera.read_isolation = basic serves an autocommit SELECT pinned to one partition key"
            }
            _ => "one replicated group orders every SQL read with the writes (strictly serialisable), which keeps every promise of the weaker level",
        };
        SqlError::new(
            "00000",
            format!(
                "this read was served as {}, stronger than tessera.read_isolation = {}",
                served.name(),
                asked.name()
            ),
        )
        .with_detail(scope)
    }

    fn parse(value: &str) -> Option<ReadIsolation> {
        [
            ReadIsolation::Sequential,
            ReadIsolation::Snapshot,
            ReadIsolation::Basic,
        ]
        .into_iter()
        .find(|level| level.name().eq_ignore_ascii_case(value.trim()))
    }
}

/// A setting: its name as shown, default, whether the client may change it, and the values
/// allowed (`None`: any).
struct Setting {
    name: &'static str,
    default: &'static str,
    settable: bool,
    allowed: Option<&'static [&'static str]>,
}

const SETTINGS: &[Setting] = &[
    Setting {
        name: "server_version",
        default: SERVER_VERSION,
        settable: false,
        allowed: None,
    },
    Setting {
        name: "server_version_num",
        default: "150000",
        settable: false,
        allowed: None,
    },
    Setting {
        name: "server_encoding",
        default: "UTF8",
        settable: false,
        allowed: None,
    },
    Setting {
        name: "client_encoding",
        default: "UTF8",
        settable: true,
        allowed: Some(&["utf8", "utf-8", "unicode"]),
    },
    Setting {
        name: "DateStyle",
        default: "ISO, MDY",
        settable: true,
        allowed: None,
    },
    Setting {
        name: "TimeZone",
        default: "UTC",
        settable: true,
        allowed: None,
    },
    Setting {
        name: "IntervalStyle",
        default: "postgres",
        settable: true,
        allowed: None,
    },
    Setting {
        name: "standard_conforming_strings",
        default: "on",
        settable: true,
        allowed: Some(&["on", "true"]),
    },
    Setting {
        name: "integer_datetimes",
        default: "on",
        settable: false,
        allowed: None,
    },
    Setting {
        name: "transaction_isolation",
        default: "serializable",
        settable: true,
        allowed: Some(ISOLATION_LEVELS),
    },
    Setting {
        name: "default_transaction_isolation",
        default: "serializable",
        settable: true,
        allowed: Some(ISOLATION_LEVELS),
    },
    Setting {
        name: "transaction_read_only",
        default: "off",
        settable: true,
        allowed: None,
    },
    Setting {
        name: "application_name",
        default: "",
        settable: true,
        allowed: None,
    },
    Setting {
        name: "search_path",
        default: "\"$user\", public",
        settable: true,
        allowed: None,
    },
    Setting {
        name: "extra_float_digits",
        default: "1",
        settable: true,
        allowed: None,
    },
    Setting {
        name: "statement_timeout",
        default: "0",
        settable: true,
        allowed: None,
    },
    Setting {
        name: "lock_timeout",
        default: "0",
        settable: true,
        allowed: None,
    },
    Setting {
        name: "idle_in_transaction_session_timeout",
        default: "0",
        settable: true,
        allowed: None,
    },
    Setting {
        name: "is_superuser",
        default: "on",
        settable: false,
        allowed: None,
    },
    Setting {
        name: "session_authorization",
        default: "tessera",
        settable: false,
        allowed: None,
    },
    Setting {
        name: "max_identifier_length",
        default: "63",
        settable: false,
        allowed: None,
    },
    Setting {
        name: "client_min_messages",
        default: "notice",
        settable: true,
        allowed: None,
    },
    Setting {
        name: "bytea_output",
        default: "hex",
        settable: true,
        allowed: Some(&["hex"]),
    },
    Setting {
        name: "tessera.read_isolation",
        default: "sequential",
        settable: true,
        allowed: Some(&["sequential", "snapshot", "basic"]),
    },
];

/// Parameters the server reports in ParameterStatus at startup and when they change.
pub const REPORTED_SETTINGS: &[&str] = &[
    "server_version",
    "server_encoding",
    "client_encoding",
    "DateStyle",
    "TimeZone",
    "IntervalStyle",
    "standard_conforming_strings",
    "integer_datetimes",
    "is_superuser",
    "session_authorization",
    "application_name",
];

fn setting(name: &str) -> Option<&'static Setting> {
    SETTINGS
        .iter()
        .find(|setting| setting.name.eq_ignore_ascii_case(name))
}

/// One connection's settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Session {
    /// Values set by the client, by canonical setting name.
    overrides: BTreeMap<&'static str, String>,
    /// `currval` per sequence and `lastval` (empty until this session's first nextval).
    sequences: crate::sequence::SequenceUse,
}

/// A session statement, planned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionCommand {
    /// `SET name = value` (`value` None: `SET name TO DEFAULT` or `RESET name`).
    Set { name: String, value: Option<String> },
    /// `SHOW name` (`ALL` lists everything).
    Show { name: String },
    /// `RESET ALL` and `DISCARD ALL`.
    ResetAll { tag: &'static str },
    /// BEGIN / START TRANSACTION: the front end opens a transaction block (the session keeps
    /// no transaction state; the connection does). `read_only`: READ ONLY was given. Every
    /// isolation level is served as serialisable (strictly: `docs/internals/sprint.md`).
    Begin { read_only: bool },
    /// COMMIT / END: the front end ends its transaction block; with none open, a warning and
    /// nothing else.
    Commit,
    /// ROLLBACK / ABORT with no transaction in progress: a warning; every statement has
    /// already committed, as the client was told when BEGIN was refused.
    Rollback,
    /// SAVEPOINT name (folded as an identifier): the front end marks a point of its block;
    /// outside one, 25P01.
    Savepoint { name: String },
    /// RELEASE [SAVEPOINT] name: forgets the savepoint and every later one; outside a block,
    /// 25P01.
    Release { name: String },
    /// ROLLBACK TO [SAVEPOINT] name: undoes what the block did since the savepoint (which
    /// stays); outside a block, 25P01.
    RollbackTo { name: String },
}

impl SessionCommand {
    /// The NOTICE the server sends with the command's completion: a read isolation that is
    /// served at another (stronger) level says so when it is set (none is since snapshot
    /// SELECTs were built, branch `sqlsnapsel`: `ReadIsolation::served`).
    pub fn notice(&self) -> Option<SqlError> {
        let SessionCommand::Set {
            name,
            value: Some(value),
        } = self
        else {
            return None;
        };
        if !name.eq_ignore_ascii_case("tessera.read_isolation") {
            return None;
        }
        let asked = ReadIsolation::parse(value)?;
        let served = asked.served();
        (served != asked).then(|| {
            SqlError::new(
                "00000",
                format!(
                    "tessera.read_isolation = {} is served as {} over SQL",
                    asked.name(),
                    served.name()
                ),
            )
            .with_detail(
                "every SQL read is ordered with the writes (strictly serialisable), which keeps every promise of the weaker level",
            )
        })
    }

    /// The WARNING the server sends before the command's completion, as PostgreSQL does.
    pub fn warning(&self) -> Option<SqlError> {
        match self {
            SessionCommand::Commit | SessionCommand::Rollback => Some(SqlError::new(
                sqlstate::NO_ACTIVE_SQL_TRANSACTION,
                "there is no transaction in progress",
            )),
            _ => None,
        }
    }
}

impl Session {
    pub fn new() -> Session {
        Session::default()
    }

    /// The current value of a setting (case-insensitive name).
    pub fn get(&self, name: &str) -> Option<String> {
        let setting = setting(name)?;
        Some(
            self.overrides
                .get(setting.name)
                .cloned()
                .unwrap_or_else(|| setting.default.to_string()),
        )
    }

    /// The read isolation the session asked for (`SET tessera.read_isolation`).
    pub fn read_isolation(&self) -> ReadIsolation {
        self.get("tessera.read_isolation")
            .as_deref()
            .and_then(ReadIsolation::parse)
            .unwrap_or_default()
    }

    /// The read isolation its autocommit reads are served at (`ReadIsolation::served`):
    /// what `SHOW tessera.read_isolation` answers.
    pub fn read_isolation_served(&self) -> ReadIsolation {
        self.read_isolation().served()
    }

    /// What SHOW answers for a setting: its value, except that the read isolation is the
    /// level served, not the one asked.
    fn shown(&self, name: &str) -> Option<String> {
        let value = self.get(name)?;
        if setting(name)?.name == "tessera.read_isolation" {
            return Some(self.read_isolation_served().name().to_string());
        }
        Some(value)
    }

    /// Every (name, value) the server reports in ParameterStatus.
    pub fn reported(&self) -> Vec<(String, String)> {
        REPORTED_SETTINGS
            .iter()
            .map(|name| (name.to_string(), self.get(name).unwrap_or_default()))
            .collect()
    }

    /// The session's sequence state for planning a statement (`plan_statement_sequenced`).
    pub fn sequences(&self) -> crate::sequence::SequenceUse {
        let mut state = crate::sequence::SequenceUse::default();
        state.current = self.sequences.current.clone();
        state.last = self.sequences.last;
        state
    }

    /// Keeps a statement's sequence state (currval, lastval) once its values were drawn.
    pub fn set_sequences(&mut self, used: &crate::sequence::SequenceUse) {
        self.sequences.current = used.current.clone();
        self.sequences.last = used.last;
    }

    /// Applies a session command.
    pub fn apply(&mut self, command: &SessionCommand) -> Result<crate::StatementResult, SqlError> {
        use crate::StatementResult;
        Ok(match command {
            SessionCommand::Set { name, value } => {
                self.set(name, value.as_deref())?;
                StatementResult::Command { tag: "SET".into() }
            }
            SessionCommand::Show { name } => self.show(name)?,
            SessionCommand::ResetAll { tag } => {
                self.overrides.clear();
                if tag.starts_with("DISCARD") {
                    // DISCARD ALL and DISCARD SEQUENCES forget currval and lastval.
                    self.sequences = Default::default();
                }
                StatementResult::Command {
                    tag: tag.to_string(),
                }
            }
            SessionCommand::Begin { .. } => return Err(crate::parse::transactions_refused()),
            SessionCommand::Commit => StatementResult::Command {
                tag: "COMMIT".into(),
            },
            SessionCommand::Rollback => StatementResult::Command {
                tag: "ROLLBACK".into(),
            },
            SessionCommand::Savepoint { .. } => {
                return Err(crate::parse::no_transaction_block("SAVEPOINT"))
            }
            SessionCommand::Release { .. } => {
                return Err(crate::parse::no_transaction_block("RELEASE SAVEPOINT"))
            }
            SessionCommand::RollbackTo { .. } => {
                return Err(crate::parse::no_transaction_block("ROLLBACK TO SAVEPOINT"))
            }
        })
    }

    fn set(&mut self, name: &str, value: Option<&str>) -> Result<(), SqlError> {
        let Some(setting) = setting(name) else {
            // PostgreSQL accepts any custom "prefix.name"; unknown plain names are 42704.
            if name.contains('.') && !name.starts_with("tessera.") {
                return Ok(());
            }
            return Err(SqlError::new(
                sqlstate::UNDEFINED_OBJECT,
                format!("unrecognized configuration parameter \"{name}\""),
            ));
        };
        if !setting.settable {
            return Err(SqlError::new(
                "55P02",
                format!("parameter \"{}\" cannot be changed", setting.name),
            ));
        }
        let Some(value) = value else {
            self.overrides.remove(setting.name);
            return Ok(());
        };
        if setting.name == "TimeZone" && !is_utc(value) {
            return Err(SqlError::unsupported(format!(
                "time zone \"{value}\" (the session time zone is always UTC)"
            ))
            .with_hint("TIMESTAMPTZ values are read and printed in UTC; an offset in the value itself (+02:00) is applied"));
        }
        if let Some(allowed) = setting.allowed {
            if !allowed
                .iter()
                .any(|allowed| allowed.eq_ignore_ascii_case(value))
            {
                return Err(SqlError::invalid_parameter(format!(
                    "invalid value for parameter \"{}\": \"{value}\"",
                    setting.name
                ))
                .with_hint(format!("Available values: {}.", allowed.join(", "))));
            }
        }
        // Every isolation level is served as SERIALIZABLE (strictly, `docs/internals/sprint.md`),
        // which is stronger than any asked for: SHOW says what is served.
        if setting.allowed == Some(ISOLATION_LEVELS) {
            self.overrides
                .insert(setting.name, "serializable".to_string());
            return Ok(());
        }
        let value = if setting.allowed.is_some() && setting.name != "client_encoding" {
            value.to_ascii_lowercase()
        } else if setting.name == "client_encoding" {
            "UTF8".to_string()
        } else {
            value.to_string()
        };
        self.overrides.insert(setting.name, value);
        Ok(())
    }

    fn show(&self, name: &str) -> Result<crate::StatementResult, SqlError> {
        use crate::{OutputColumn, StatementResult};
        use engine::{DataType, Value};
        let text = DataType::Text { length_max: None };
        if name.eq_ignore_ascii_case("all") {
            let rows = SETTINGS
                .iter()
                .map(|setting| {
                    vec![
                        Value::Text(setting.name.to_string()),
                        Value::Text(self.shown(setting.name).unwrap_or_default()),
                    ]
                })
                .collect();
            return Ok(StatementResult::Rows {
                columns: vec![
                    OutputColumn::new("name", text),
                    OutputColumn::new("setting", text),
                ],
                rows,
                tag: format!("SHOW {}", SETTINGS.len()),
            });
        }
        let Some(value) = self.shown(name) else {
            return Err(SqlError::new(
                sqlstate::UNDEFINED_OBJECT,
                format!("unrecognized configuration parameter \"{name}\""),
            ));
        };
        let setting = setting(name).expect("shown found it");
        Ok(StatementResult::Rows {
            columns: vec![OutputColumn::new(&setting.name.to_lowercase(), text)],
            rows: vec![vec![Value::Text(value)]],
            tag: "SHOW".into(),
        })
    }
}

/// Whether a TimeZone value names UTC (the only session time zone: TIMESTAMPTZ values print
/// in UTC, so accepting another zone would be accepting an option without its effect).
fn is_utc(value: &str) -> bool {
    let value = value.trim().trim_matches('\'');
    [
        "UTC",
        "Etc/UTC",
        "GMT",
        "Etc/GMT",
        "UCT",
        "Etc/UCT",
        "Universal",
        "Etc/Universal",
        "Zulu",
        "Etc/Zulu",
        "Z",
        "0",
        "+0",
        "-0",
        "+00",
        "00:00",
        "+00:00",
        "GMT0",
        "Etc/GMT0",
        "Etc/GMT+0",
        "Etc/GMT-0",
        "Greenwich",
        "Etc/Greenwich",
        "DEFAULT",
        "LOCAL",
    ]
    .iter()
    .any(|utc| utc.eq_ignore_ascii_case(value))
}
