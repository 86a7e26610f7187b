//! Users ("roles", PostgreSQL's word) kept in the replicated state: one hidden table of the
//! SQL engine, `ROLES_TABLE`, whose name no SQL client can write (it holds a NUL byte, which
//! the PostgreSQL protocol cannot carry), hidden from the catalog the planner sees. So roles
//! are replicated, logged, snapshotted and moved with the other tables, by the machinery that
//! already does it, and read linearisably through the same path (`SqlBackend`).
//!
//! A row: the name, the SCRAM-SHA-256 verifier (the salted password, `scram::Verifier`; never
//! the password), and the rules
//! (`Rules`, postcard-encoded): enabled (LOGIN / `on`), the command categories it may run
//! (`+@read`, `+@write`, `+@admin`) and the key patterns (`~pattern`) RESP commands may touch.
//! Both front ends write them: SQL `CREATE ROLE … LOGIN PASSWORD`, `ALTER ROLE`, `DROP ROLE`
//! (`run_statement`) and RESP `ACL SETUSER/DELUSER` (`super::resp`).

use super::scram::Verifier;
use crate::pg::RoutedBackend;
use crate::sql_backend::BackendError;
use engine::{
    ColumnDef, Command, CompareOp, DataType, EngineError, OnConflict, Operation, Outcome, Output,
    Predicate, TableSchema, Value,
};
use serde::{Deserialize, Serialize};
use sql::SqlError;

/// The hidden table of roles.
pub const ROLES_TABLE: &str = "\0tessera_roles";
/// Longest role name (PostgreSQL: NAMEDATALEN - 1).
pub const NAME_BYTES_MAX: usize = 63;
/// Most key patterns per role.
pub const KEY_PATTERNS_MAX: usize = 64;

/// What a role may do.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rules {
    /// May log in (LOGIN; RESP `on`).
    pub enabled: bool,
    /// Read commands (`+@read`: GET, SELECT, …).
    pub read: bool,
    /// Write commands (`+@write`: SET, INSERT, …).
    pub write: bool,
    /// Administration (`+@admin`: ACL, CREATE ROLE, FLUSHALL, …): a superuser.
    pub admin: bool,
    /// Glob patterns of the RESP keys it may touch (`~pattern`; `~*` is every key).
    pub key_patterns: Vec<Vec<u8>>,
    /// CONNECTION LIMIT: at most this many of its connections (pgwire and RESP together) per
    /// storage process; `None` (PostgreSQL's -1): no limit. Superusers are not held to it.
    /// Last, so that rows written before it existed decode (`decode_rules`).
    pub connection_limit: Option<u32>,
}

/// `Rules` as rows written before CONNECTION LIMIT existed hold them.
#[derive(Deserialize)]
struct RulesWithoutLimit {
    enabled: bool,
    read: bool,
    write: bool,
    admin: bool,
    key_patterns: Vec<Vec<u8>>,
}

/// Decodes a row's rules, in today's shape or the one before `connection_limit`.
fn decode_rules(bytes: &[u8]) -> Option<Rules> {
    if let Ok(rules) = postcard::from_bytes::<Rules>(bytes) {
        return Some(rules);
    }
    let old: RulesWithoutLimit = postcard::from_bytes(bytes).ok()?;
    Some(Rules {
        enabled: old.enabled,
        read: old.read,
        write: old.write,
        admin: old.admin,
        key_patterns: old.key_patterns,
        connection_limit: None,
    })
}

/// One user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Role {
    pub name: String,
    /// `None`: no password, so no login.
    pub verifier: Option<Verifier>,
    pub rules: Rules,
}

impl Role {
    /// The cluster file's admin: every right.
    pub fn admin(name: &str, verifier: Verifier) -> Role {
        Role {
            name: name.to_string(),
            verifier: Some(verifier),
            rules: Rules::everything(),
        }
    }

    /// What an insecure cluster's connections act as.
    pub fn unrestricted() -> Role {
        Role {
            name: "default".to_string(),
            verifier: None,
            rules: Rules::everything(),
        }
    }

    /// Whether the role may touch every key.
    pub fn all_keys(&self) -> bool {
        self.rules
            .key_patterns
            .iter()
            .any(|pattern| pattern == b"*")
    }

    /// Whether `key` matches one of the role's patterns.
    pub fn may_touch(&self, key: &[u8]) -> bool {
        self.rules
            .key_patterns
            .iter()
            .any(|pattern| resp::glob_match(pattern, key))
    }
}

impl Rules {
    pub fn everything() -> Rules {
        Rules {
            enabled: true,
            read: true,
            write: true,
            admin: true,
            key_patterns: vec![b"*".to_vec()],
            connection_limit: None,
        }
    }
}

/// Whether `name` may name a role: 1 to 63 bytes, no NUL, no whitespace, no control character.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= NAME_BYTES_MAX
        && name
            .chars()
            .all(|character| !character.is_control() && !character.is_whitespace())
}

/// Removes the roles and grants tables from a catalog the planner will see.
pub fn hide(catalog: &mut sql::MemoryCatalog) {
    catalog.tables.remove(ROLES_TABLE);
    catalog.tables.remove(super::grants::GRANTS_TABLE);
}

fn schema() -> TableSchema {
    TableSchema::new(
        ROLES_TABLE,
        vec![
            ColumnDef::new("name", DataType::Text { length_max: None }).not_null(),
            ColumnDef::new("verifier", DataType::Text { length_max: None }),
            ColumnDef::new("rules", DataType::Bytea).not_null(),
        ],
        &["name"],
    )
    .expect("the roles table's schema is valid")
}

fn by_name(name: &str) -> Option<Predicate> {
    Some(Predicate::Compare {
        column: "name".to_string(),
        op: CompareOp::Equal,
        value: Value::Text(name.to_string()),
    })
}

fn row_of(role: &Role) -> Vec<Value> {
    vec![
        Value::Text(role.name.clone()),
        role.verifier
            .as_ref()
            .map_or(Value::Null, |verifier| Value::Text(verifier.encode())),
        Value::Bytea(postcard::to_allocvec(&role.rules).expect("rules serialise")),
    ]
}

/// A row read back; `None` for a row this code did not write (refused, not trusted).
fn role_of(row: &[Value]) -> Option<Role> {
    let [Value::Text(name), verifier, Value::Bytea(rules)] = row else {
        return None;
    };
    let verifier = match verifier {
        Value::Null => None,
        // Rows written before pgwire's SCRAM (issue 23) hold PostgreSQL's verifier, which
        // cannot log in here: the role has no password until one is set again.
        Value::Text(text) if super::scram::is_postgres_verifier(text) => None,
        Value::Text(text) => Some(Verifier::decode(text)?),
        _ => return None,
    };
    Some(Role {
        name: name.clone(),
        verifier,
        rules: decode_rules(rules)?,
    })
}

/// Why a roles operation failed.
#[derive(Debug)]
pub enum RolesError {
    /// The cluster did not answer.
    Unavailable,
    /// The engine refused the operation (its SQLSTATE text).
    Engine(EngineError),
}

impl From<BackendError> for RolesError {
    fn from(_: BackendError) -> RolesError {
        RolesError::Unavailable
    }
}

impl std::fmt::Display for RolesError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RolesError::Unavailable => write!(formatter, "the cluster did not answer; try again"),
            RolesError::Engine(error) => write!(formatter, "{error}"),
        }
    }
}

/// Runs `operation` where the roles table's rows for `name` live (its partition key), or on
/// every partition when `name` is `None` (the table's DDL, listing every role): the rows of
/// every answer, in name order; the first error.
pub(super) async fn run<B: RoutedBackend>(
    backend: &B,
    name: Option<&str>,
    operation: Operation,
) -> Result<Output, RolesError> {
    let routing = match name {
        Some(name) => sql::Routing::Keys {
            column: "name".to_string(),
            values: vec![Value::Text(name.to_string())],
        },
        None => sql::Routing::Every,
    };
    let answers = backend
        .execute_routed(&routing, Command::Execute(operation))
        .await?;
    let mut merged: Option<Output> = None;
    for (_, outcome) in answers {
        let output = match outcome {
            Outcome::Executed(Ok(output)) => output,
            Outcome::Executed(Err(error)) | Outcome::Error(error) => {
                return Err(RolesError::Engine(error))
            }
            _ => return Err(RolesError::Engine(EngineError::Malformed)),
        };
        merged = Some(match (merged, output) {
            (None, output) => output,
            (
                Some(Output::Rows { columns, mut rows }),
                Output::Rows {
                    rows: more_rows, ..
                },
            ) => {
                rows.extend(more_rows);
                let name = |row: &Vec<Value>| match row.first() {
                    Some(Value::Text(name)) => Some(name.clone()),
                    _ => None,
                };
                rows.sort_by_key(name);
                Output::Rows { columns, rows }
            }
            // DDL on every partition: each answers the same.
            (Some(first), _) => first,
        });
    }
    merged.ok_or(RolesError::Unavailable)
}

/// Every role whose name passes `filter` (all when `None`), in name order.
async fn select<B: RoutedBackend>(
    backend: &B,
    name: Option<&str>,
) -> Result<Vec<Role>, RolesError> {
    let operation = Operation::Select {
        table: ROLES_TABLE.to_string(),
        columns: Vec::new(),
        predicate: name.and_then(by_name),
        limit: None,
    };
    match run(backend, name, operation).await {
        Ok(Output::Rows { rows, .. }) => Ok(rows.iter().filter_map(|row| role_of(row)).collect()),
        Ok(_) => Err(RolesError::Engine(EngineError::Malformed)),
        // No role was ever created.
        Err(RolesError::Engine(EngineError::UndefinedTable { .. })) => Ok(Vec::new()),
        Err(error) => Err(error),
    }
}

/// The role named `name`, read linearisably.
pub async fn lookup<B: RoutedBackend>(backend: &B, name: &str) -> Result<Option<Role>, RolesError> {
    Ok(select(backend, Some(name)).await?.into_iter().next())
}

/// Every role, in name order.
pub async fn list<B: RoutedBackend>(backend: &B) -> Result<Vec<Role>, RolesError> {
    select(backend, None).await
}

/// Creates a hidden table (the roles', the grants') if it was never written.
pub(super) async fn ensure_table<B: RoutedBackend>(
    backend: &B,
    schema: TableSchema,
) -> Result<(), RolesError> {
    match run(backend, None, Operation::CreateTable { schema }).await {
        Ok(_) | Err(RolesError::Engine(EngineError::DuplicateTable { .. })) => Ok(()),
        Err(error) => Err(error),
    }
}

/// How `write` treats an existing role of the same name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Write {
    /// CREATE ROLE: refused (`Ok(false)`) if it exists.
    Create,
    /// ACL SETUSER: created or replaced.
    Upsert,
}

/// Writes `role`; `Ok(false)` when `Write::Create` met an existing role.
pub async fn write<B: RoutedBackend>(
    backend: &B,
    role: &Role,
    how: Write,
) -> Result<bool, RolesError> {
    assert!(valid_name(&role.name));
    ensure_table(backend, schema()).await?;
    let row = row_of(role);
    let on_conflict = match how {
        Write::Create => OnConflict::DoNothing,
        Write::Upsert => OnConflict::DoUpdate(vec![
            engine::Assignment::new("verifier", row[1].clone()),
            engine::Assignment::new("rules", row[2].clone()),
        ]),
    };
    let operation = Operation::Insert {
        table: ROLES_TABLE.to_string(),
        columns: Vec::new(),
        rows: vec![row],
        on_conflict,
    };
    match run(backend, Some(&role.name), operation).await? {
        Output::Inserted { count } => Ok(count == 1),
        _ => Err(RolesError::Engine(EngineError::Malformed)),
    }
}

/// Deletes the role named `name`; whether it existed.
pub async fn delete<B: RoutedBackend>(backend: &B, name: &str) -> Result<bool, RolesError> {
    let operation = Operation::Delete {
        table: ROLES_TABLE.to_string(),
        predicate: by_name(name),
    };
    match run(backend, Some(name), operation).await {
        Ok(Output::Deleted { count }) => Ok(count > 0),
        Ok(_) => Err(RolesError::Engine(EngineError::Malformed)),
        Err(RolesError::Engine(EngineError::UndefinedTable { .. })) => Ok(false),
        Err(error) => Err(error),
    }
}

// ----- SQL: CREATE ROLE, ALTER ROLE, DROP ROLE. -----

/// A role statement, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RoleStatement {
    Create { name: String, options: RoleOptions },
    Alter { name: String, options: RoleOptions },
    Drop { names: Vec<String>, if_exists: bool },
}

/// The options of CREATE/ALTER ROLE this server takes; `None`: not given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoleOptions {
    pub login: Option<bool>,
    pub superuser: Option<bool>,
    /// `Some(None)`: PASSWORD NULL.
    pub password: Option<Option<String>>,
    /// CONNECTION LIMIT n; `Some(None)`: -1, no limit.
    pub connection_limit: Option<Option<u32>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Token {
    /// An unquoted word, lowercased.
    Word(String),
    /// A double-quoted identifier.
    Quoted(String),
    /// A single-quoted string.
    Literal(String),
    Comma,
    /// `.` (a qualified name, GRANT's `public.t`).
    Dot,
    /// `(` or `)` (GRANT's column lists, refused).
    Parenthesis,
}

pub(super) fn syntax_error(near: &str) -> SqlError {
    SqlError::new("42601", format!("syntax error at or near \"{near}\""))
}

pub(super) fn tokens(text: &str) -> Result<Vec<Token>, SqlError> {
    let mut tokens = Vec::new();
    let mut characters = text.chars().peekable();
    while let Some(&character) = characters.peek() {
        if character.is_whitespace() || character == ';' {
            characters.next();
        } else if character == ',' {
            characters.next();
            tokens.push(Token::Comma);
        } else if character == '.' {
            characters.next();
            tokens.push(Token::Dot);
        } else if character == '(' || character == ')' {
            characters.next();
            tokens.push(Token::Parenthesis);
        } else if character == '\'' || character == '"' {
            characters.next();
            let mut value = String::new();
            loop {
                match characters.next() {
                    None => return Err(SqlError::new("42601", "unterminated quoted string")),
                    Some(quote) if quote == character => {
                        if characters.peek() == Some(&character) {
                            characters.next();
                            value.push(character);
                        } else {
                            break;
                        }
                    }
                    Some(other) => value.push(other),
                }
            }
            tokens.push(if character == '\'' {
                Token::Literal(value)
            } else {
                Token::Quoted(value)
            });
        } else if character.is_alphanumeric() || character == '_' || character == '-' {
            let mut word = String::new();
            if character == '-' {
                characters.next();
                word.push('-');
            }
            while let Some(&next) = characters.peek() {
                if next.is_alphanumeric() || next == '_' || next == '$' {
                    word.push(next.to_ascii_lowercase());
                    characters.next();
                } else {
                    break;
                }
            }
            tokens.push(Token::Word(word));
        } else {
            return Err(syntax_error(&character.to_string()));
        }
    }
    Ok(tokens)
}

/// Whether `query` is a role statement this module runs (CREATE/ALTER/DROP ROLE or USER).
pub fn is_role_statement(query: &str) -> bool {
    let mut words = query.split_whitespace().map(str::to_ascii_lowercase);
    matches!(
        (words.next().as_deref(), words.next().as_deref()),
        (Some("create" | "alter" | "drop"), Some("role" | "user"))
    )
}

pub(super) fn name_of(token: Option<&Token>) -> Result<String, SqlError> {
    let name = match token {
        Some(Token::Word(word)) => word.clone(),
        Some(Token::Quoted(name)) => name.clone(),
        _ => {
            return Err(SqlError::new(
                "42601",
                "syntax error: a role name is expected",
            ))
        }
    };
    if !valid_name(&name) {
        return Err(SqlError::new(
            "42602",
            format!("invalid role name \"{name}\""),
        ));
    }
    Ok(name)
}

fn options_of(tokens: &[Token], user: bool) -> Result<RoleOptions, SqlError> {
    let mut options = RoleOptions {
        login: user.then_some(true),
        ..RoleOptions::default()
    };
    let mut rest = tokens;
    if let [Token::Word(with), tail @ ..] = rest {
        if with == "with" {
            rest = tail;
        }
    }
    while let [first, tail @ ..] = rest {
        let Token::Word(word) = first else {
            return Err(syntax_error(&format!("{first:?}")));
        };
        rest = tail;
        match word.as_str() {
            "login" => options.login = Some(true),
            "nologin" => options.login = Some(false),
            "superuser" => options.superuser = Some(true),
            "nosuperuser" => options.superuser = Some(false),
            "connection" => {
                let [Token::Word(limit), Token::Word(number), tail @ ..] = rest else {
                    return Err(syntax_error("CONNECTION"));
                };
                if limit != "limit" {
                    return Err(syntax_error(limit));
                }
                options.connection_limit = Some(connection_limit_of(number)?);
                rest = tail;
            }
            "encrypted" | "password" => {
                if word == "encrypted" {
                    match rest {
                        [Token::Word(password), tail @ ..] if password == "password" => rest = tail,
                        _ => return Err(syntax_error("ENCRYPTED")),
                    }
                }
                match rest {
                    [Token::Literal(password), tail @ ..] => {
                        refuse_postgres_verifier(password)?;
                        options.password = Some(Some(password.clone()));
                        rest = tail;
                    }
                    [Token::Word(null), tail @ ..] if null == "null" => {
                        options.password = Some(None);
                        rest = tail;
                    }
                    _ => return Err(syntax_error("PASSWORD")),
                }
            }
            other => {
                return Err(SqlError::unsupported(format!(
                    "role option {}",
                    other.to_ascii_uppercase()
                )))
            }
        }
    }
    Ok(options)
}

/// CONNECTION LIMIT's number: -1 (no limit) or 0 and above (PostgreSQL: 22023 below -1).
fn connection_limit_of(number: &str) -> Result<Option<u32>, SqlError> {
    match number.parse::<i64>() {
        Ok(-1) => Ok(None),
        Ok(limit) if limit >= 0 => u32::try_from(limit).map(Some).map_err(|_| {
            SqlError::new(
                "22003",
                format!("value \"{number}\" is out of range for type integer"),
            )
        }),
        Ok(_) => Err(SqlError::new(
            "22023",
            format!("invalid connection limit: {number}"),
        )),
        Err(_) => Err(syntax_error(number)),
    }
}

/// Parses a role statement.
pub fn parse(query: &str) -> Result<RoleStatement, SqlError> {
    let tokens = tokens(query)?;
    let (verb, user) = match tokens.as_slice() {
        [Token::Word(verb), Token::Word(kind), ..] => (verb.as_str(), kind == "user"),
        _ => return Err(syntax_error(query)),
    };
    let rest = &tokens[2..];
    match verb {
        "create" | "alter" => {
            let name = name_of(rest.first())?;
            let options = options_of(&rest[1..], user && verb == "create")?;
            Ok(if verb == "create" {
                RoleStatement::Create { name, options }
            } else {
                RoleStatement::Alter { name, options }
            })
        }
        "drop" => {
            let (if_exists, mut rest) = match rest {
                [Token::Word(a), Token::Word(b), tail @ ..] if a == "if" && b == "exists" => {
                    (true, tail)
                }
                _ => (false, rest),
            };
            let mut names = vec![name_of(rest.first())?];
            rest = &rest[1..];
            while let [Token::Comma, tail @ ..] = rest {
                names.push(name_of(tail.first())?);
                rest = &tail[1..];
            }
            if let Some(token) = rest.first() {
                return Err(syntax_error(&format!("{token:?}")));
            }
            Ok(RoleStatement::Drop { names, if_exists })
        }
        _ => Err(syntax_error(verb)),
    }
}

/// Applies `options` to `role` (a password becomes a verifier).
fn apply_options(role: &mut Role, options: &RoleOptions) {
    if let Some(login) = options.login {
        role.rules.enabled = login;
    }
    if let Some(superuser) = options.superuser {
        role.rules.admin = superuser;
    }
    if let Some(password) = &options.password {
        role.verifier = password.as_deref().map(verifier_of_password);
    }
    if let Some(limit) = options.connection_limit {
        role.rules.connection_limit = limit;
    }
}

/// The verifier for a password given in a statement or `ACL SETUSER >password` (always the
/// password itself: a PostgreSQL verifier is refused by the parser, `refuse_postgres_verifier`).
pub fn verifier_of_password(password: &str) -> Verifier {
    Verifier::new(
        password.as_bytes(),
        &super::random_bytes::<{ super::scram::SALT_BYTES }>(),
        super::scram::ITERATIONS_DEFAULT,
    )
}

/// A password given as PostgreSQL's SCRAM verifier (`psql`'s `\password`, a dump of
/// `pg_authid`) is refused with 0A000: the stored form is the SaltedPassword that pgwire's
/// server needs, which cannot be derived from `StoredKey:ServerKey`.
fn refuse_postgres_verifier(password: &str) -> Result<(), SqlError> {
    if super::scram::is_postgres_verifier(password) {
        return Err(
            SqlError::unsupported("a password given as a SCRAM-SHA-256 verifier")
                .with_hint("give the password itself: it is stored salted and hashed"),
        );
    }
    Ok(())
}

/// A roles or grants failure as the SQL error a client gets.
pub fn unavailable(error: RolesError) -> SqlError {
    match error {
        RolesError::Unavailable => SqlError::new("08007", error.to_string()),
        RolesError::Engine(error) => SqlError::new(error.code(), error.to_string()),
    }
}

/// Runs a role statement for `user` (who must be a superuser); its command tag.
pub async fn run_statement<B: RoutedBackend>(
    backend: &B,
    security: &super::Security,
    user: &Role,
    query: &str,
) -> Result<String, SqlError> {
    let statement = parse(query)?;
    let (verb, names) = match &statement {
        RoleStatement::Create { name, .. } => ("create", vec![name.clone()]),
        RoleStatement::Alter { name, .. } => ("alter", vec![name.clone()]),
        RoleStatement::Drop { names, .. } => ("drop", names.clone()),
    };
    if !user.rules.admin {
        return Err(SqlError::new(
            "42501",
            format!("permission denied to {verb} role"),
        ));
    }
    if let Some(admin) = names.iter().find(|name| security.is_admin_user(name)) {
        return Err(SqlError::new(
            "42501",
            format!("role \"{admin}\" is the admin user of the cluster file (security.admin_user) and cannot be changed with SQL"),
        ));
    }
    match statement {
        RoleStatement::Create { name, options } => {
            let mut role = Role {
                name: name.clone(),
                verifier: None,
                // Nothing until granted: tables need GRANT, RESP keys `ACL SETUSER ~pattern`
                // (the categories only bound what grants and patterns allow).
                rules: Rules {
                    enabled: false,
                    read: true,
                    write: true,
                    admin: false,
                    key_patterns: Vec::new(),
                    connection_limit: None,
                },
            };
            apply_options(&mut role, &options);
            if !write(backend, &role, Write::Create)
                .await
                .map_err(unavailable)?
            {
                return Err(SqlError::new(
                    "42710",
                    format!("role \"{name}\" already exists"),
                ));
            }
            Ok("CREATE ROLE".to_string())
        }
        RoleStatement::Alter { name, options } => {
            let Some(mut role) = lookup(backend, &name).await.map_err(unavailable)? else {
                return Err(SqlError::new(
                    "42704",
                    format!("role \"{name}\" does not exist"),
                ));
            };
            apply_options(&mut role, &options);
            write(backend, &role, Write::Upsert)
                .await
                .map_err(unavailable)?;
            Ok("ALTER ROLE".to_string())
        }
        RoleStatement::Drop { names, if_exists } => {
            // A role that owns tables or holds privileges is not dropped (PostgreSQL's
            // 2BP01): checked for every name before any is dropped.
            for name in &names {
                let held = super::grants::held(backend, name)
                    .await
                    .map_err(unavailable)?;
                if let Some(error) = super::grants::dependents_error(name, &held) {
                    return Err(error);
                }
            }
            for name in &names {
                if !delete(backend, name).await.map_err(unavailable)? && !if_exists {
                    return Err(SqlError::new(
                        "42704",
                        format!("role \"{name}\" does not exist"),
                    ));
                }
                // Rows granted between the check and the drop go with it.
                super::grants::forget_role(backend, name)
                    .await
                    .map_err(unavailable)?;
            }
            Ok("DROP ROLE".to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A parameter has no place in PostgreSQL's grammar of these statements: Parse of one
    /// in the extended protocol is a syntax error (42601), as PostgreSQL answers.
    #[test]
    fn parameters_in_role_and_grant_statements_are_syntax_errors() {
        for query in [
            "CREATE ROLE x PASSWORD $1",
            "CREATE ROLE $1 LOGIN",
            "ALTER ROLE x CONNECTION LIMIT $1",
        ] {
            assert_eq!(parse(query).unwrap_err().code, "42601", "{query}");
        }
        for query in ["GRANT SELECT ON t TO $1", "GRANT SELECT ON $1 TO r"] {
            assert_eq!(
                super::super::grants::parse(query).unwrap_err().code,
                "42601",
                "{query}"
            );
        }
    }

    #[test]
    fn passwords_given_as_postgresql_verifiers_are_refused() {
        let error = parse("ALTER ROLE r PASSWORD 'SCRAM-SHA-256$4096:AAAA$AAAA:AAAA'").unwrap_err();
        assert_eq!(error.code, "0A000");
    }

    #[test]
    fn role_statements_parse_as_postgresql_writes_them() {
        let statement = parse("CREATE ROLE alice WITH LOGIN PASSWORD 'it''s';").unwrap();
        assert_eq!(
            statement,
            RoleStatement::Create {
                name: "alice".into(),
                options: RoleOptions {
                    login: Some(true),
                    superuser: None,
                    password: Some(Some("it's".into())),
                    connection_limit: None,
                },
            }
        );
        let statement = parse("create user \"Bob\" password null").unwrap();
        assert!(matches!(
            statement,
            RoleStatement::Create { ref name, options: RoleOptions { login: Some(true), password: Some(None), .. } } if name == "Bob"
        ));
        assert_eq!(
            parse("DROP ROLE IF EXISTS a, b").unwrap(),
            RoleStatement::Drop {
                names: vec!["a".into(), "b".into()],
                if_exists: true
            }
        );
        assert_eq!(parse("ALTER ROLE a CREATEDB").unwrap_err().code, "0A000");
        let limited = |query: &str| match parse(query) {
            Ok(RoleStatement::Create { options, .. } | RoleStatement::Alter { options, .. }) => {
                Ok(options.connection_limit)
            }
            Ok(other) => panic!("{other:?}"),
            Err(error) => Err(error.code),
        };
        assert_eq!(
            limited("CREATE ROLE a LOGIN CONNECTION LIMIT 2"),
            Ok(Some(Some(2)))
        );
        assert_eq!(
            limited("ALTER ROLE a WITH CONNECTION LIMIT -1"),
            Ok(Some(None))
        );
        assert_eq!(
            limited("ALTER ROLE a CONNECTION LIMIT 0"),
            Ok(Some(Some(0)))
        );
        assert_eq!(limited("ALTER ROLE a LOGIN"), Ok(None));
        assert_eq!(limited("ALTER ROLE a CONNECTION LIMIT -2"), Err("22023"));
        assert_eq!(limited("ALTER ROLE a CONNECTION LIMIT x"), Err("42601"));
        assert_eq!(limited("ALTER ROLE a CONNECTION 3"), Err("42601"));
        assert_eq!(parse("CREATE ROLE 'a'").unwrap_err().code, "42601");
        assert_eq!(
            parse("CREATE ROLE a PASSWORD 'x").unwrap_err().code,
            "42601"
        );
        assert!(is_role_statement("  Create Role x"));
        assert!(!is_role_statement("CREATE TABLE role (a int)"));
    }

    #[test]
    fn rows_round_trip_and_foreign_rows_are_refused() {
        let role = Role {
            name: "alice".into(),
            verifier: Some(Verifier::new(b"pw", b"salt", 1)),
            rules: Rules {
                enabled: true,
                read: true,
                write: false,
                admin: false,
                key_patterns: vec![b"user:*".to_vec()],
                connection_limit: Some(3),
            },
        };
        assert_eq!(role_of(&row_of(&role)), Some(role.clone()));
        // A row written before CONNECTION LIMIT existed still decodes, without a limit.
        let old =
            postcard::to_allocvec(&(true, true, false, false, vec![b"user:*".to_vec()])).unwrap();
        let rules = decode_rules(&old).unwrap();
        assert_eq!(rules.connection_limit, None);
        assert_eq!(rules.key_patterns, vec![b"user:*".to_vec()]);
        assert_eq!(role_of(&[Value::Text("x".into())]), None);
        assert!(role.may_touch(b"user:1"));
        assert!(!role.may_touch(b"admin:1"));
        assert!(!role.all_keys());
        assert!(!valid_name("a b") && !valid_name("") && !valid_name("a\0b"));
        assert!(schema().name.contains('\0'));
    }
}
