//! Privileges on tables (`GRANT` / `REVOKE`, PostgreSQL's syntax and errors), kept beside the
//! roles in the replicated state: one hidden table of the SQL engine, `GRANTS_TABLE`, one row
//! per (role, table, privilege), partitioned by the role's name. A GRANT inserts rows and a
//! REVOKE deletes them, each one write ordered like every other, so every gateway reads the
//! same grants and no GRANT is a read-modify-write that a concurrent one could undo.
//!
//! A table's creator owns it (a row with the privilege `OWNER`): it holds every privilege on
//! it, may grant and revoke them, and alone (with superusers) may drop it or index it.
//! Superusers bypass every check. Every statement a non-superuser runs reads its grants
//! (`held`, one linearisable read of one partition) and needs what `required` says of its
//! engine operations, else SQLSTATE 42501 `permission denied for table t`.

use super::roles::{self, name_of, syntax_error, tokens, Role, RolesError, Token};
use crate::pg::RoutedBackend;
use engine::{
    ColumnDef, CompareOp, DataType, EngineError, OnConflict, Operation, Output, Predicate,
    TableSchema, Value,
};
use sql::SqlError;
use std::collections::BTreeSet;

/// The hidden table of grants (a NUL byte in its name: no SQL client can name it).
pub const GRANTS_TABLE: &str = "\0tessera_grants";

/// What DROP ROLE answers when `held` (the role's rows of the grants table) is not empty:
/// PostgreSQL's 2BP01, with a DETAIL line per owned table (`owner of table t`) and per table
/// it has privileges on (`privileges for table t`); `None` when it holds nothing.
pub fn dependents_error(role: &str, held: &BTreeSet<(String, Privilege)>) -> Option<SqlError> {
    let owned: BTreeSet<&str> = held
        .iter()
        .filter(|(_, privilege)| *privilege == Privilege::Owner)
        .map(|(table, _)| table.as_str())
        .collect();
    let privileged: BTreeSet<&str> = held
        .iter()
        .filter(|(table, privilege)| {
            *privilege != Privilege::Owner && !owned.contains(table.as_str())
        })
        .map(|(table, _)| table.as_str())
        .collect();
    if owned.is_empty() && privileged.is_empty() {
        return None;
    }
    let detail: Vec<String> = owned
        .iter()
        .map(|table| format!("owner of table {table}"))
        .chain(
            privileged
                .iter()
                .map(|table| format!("privileges for table {table}")),
        )
        .collect();
    Some(
        SqlError::new(
            "2BP01",
            format!("role \"{role}\" cannot be dropped because some objects depend on it"),
        )
        .with_detail(detail.join("\n")),
    )
}

/// A privilege on a table. `Owner` is not granted by GRANT: the creator holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Privilege {
    Select,
    Insert,
    Update,
    Delete,
    /// Every privilege, granting them, DROP TABLE, CREATE INDEX.
    Owner,
}

impl Privilege {
    /// The four GRANT takes, in PostgreSQL's order (ALL [PRIVILEGES]).
    pub const GRANTABLE: [Privilege; 4] = [
        Privilege::Select,
        Privilege::Insert,
        Privilege::Update,
        Privilege::Delete,
    ];

    /// The name stored in the grants table (PostgreSQL's keyword).
    pub fn name(self) -> &'static str {
        match self {
            Privilege::Select => "SELECT",
            Privilege::Insert => "INSERT",
            Privilege::Update => "UPDATE",
            Privilege::Delete => "DELETE",
            Privilege::Owner => "OWNER",
        }
    }

    fn of_name(name: &str) -> Option<Privilege> {
        [Privilege::Owner]
            .into_iter()
            .chain(Privilege::GRANTABLE)
            .find(|privilege| privilege.name().eq_ignore_ascii_case(name))
    }
}

/// What a GRANT or REVOKE names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Objects {
    /// `ON [TABLE] a, b`: names as written (folded to lower case unless quoted).
    Tables(Vec<String>),
    /// `ON ALL TABLES IN SCHEMA public`: the tables that exist when it runs.
    AllTablesInPublic,
}

/// A GRANT or REVOKE, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantStatement {
    /// GRANT (true) or REVOKE (false).
    pub grant: bool,
    /// Not empty; never `Owner`.
    pub privileges: Vec<Privilege>,
    pub objects: Objects,
    /// The grantees; not empty.
    pub roles: Vec<String>,
}

/// Whether `query` is a GRANT or REVOKE (this module runs them).
pub fn is_grant_statement(query: &str) -> bool {
    let first = query.split_whitespace().next().map(str::to_ascii_lowercase);
    matches!(first.as_deref(), Some("grant" | "revoke"))
}

fn word(token: Option<&Token>) -> Option<&str> {
    match token {
        Some(Token::Word(word)) => Some(word),
        _ => None,
    }
}

/// Parses the privilege list up to ON.
fn parse_privileges(tokens: &[Token]) -> Result<(Vec<Privilege>, &[Token]), SqlError> {
    let mut rest = tokens;
    let mut privileges = Vec::new();
    loop {
        let Some(name) = word(rest.first()) else {
            return Err(syntax_error("privilege list"));
        };
        rest = &rest[1..];
        match name {
            "all" => {
                if word(rest.first()) == Some("privileges") {
                    rest = &rest[1..];
                }
                privileges.extend(Privilege::GRANTABLE);
            }
            "select" | "insert" | "update" | "delete" => {
                privileges.push(Privilege::of_name(name).expect("a grantable privilege"));
            }
            "truncate" | "references" | "trigger" | "maintain" => {
                return Err(SqlError::unsupported(format!(
                    "the {} privilege",
                    name.to_ascii_uppercase()
                )))
            }
            other => {
                return Err(SqlError::unsupported(format!(
                    "GRANT {} (role membership and privileges other than SELECT, INSERT, UPDATE, DELETE on tables)",
                    other.to_ascii_uppercase()
                )))
            }
        }
        match rest.first() {
            Some(Token::Comma) => rest = &rest[1..],
            Some(Token::Parenthesis) => return Err(SqlError::unsupported("column privileges")),
            _ => break,
        }
    }
    if word(rest.first()) != Some("on") {
        return Err(syntax_error("ON"));
    }
    privileges.sort();
    privileges.dedup();
    Ok((privileges, &rest[1..]))
}

/// A table name, maybe qualified by `public.`.
fn parse_table(tokens: &[Token]) -> Result<(String, &[Token]), SqlError> {
    let first = name_of(tokens.first())?;
    match tokens.get(1) {
        Some(Token::Dot) => {
            if first != "public" {
                return Err(SqlError::new(
                    "3F000",
                    format!("schema \"{first}\" does not exist"),
                ));
            }
            Ok((name_of(tokens.get(2))?, &tokens[3..]))
        }
        _ => Ok((first, &tokens[1..])),
    }
}

/// Parses the objects after ON, up to TO / FROM.
fn parse_objects(tokens: &[Token]) -> Result<(Objects, &[Token]), SqlError> {
    let mut rest = tokens;
    match word(rest.first()) {
        Some("all") => {
            let words: Vec<Option<&str>> = (1..5).map(|index| word(rest.get(index))).collect();
            if words[..3] != [Some("tables"), Some("in"), Some("schema")] {
                return Err(SqlError::unsupported(
                    "GRANT ON ALL other than ALL TABLES IN SCHEMA",
                ));
            }
            let schema = name_of(rest.get(4))?;
            if schema != "public" {
                return Err(SqlError::new(
                    "3F000",
                    format!("schema \"{schema}\" does not exist"),
                ));
            }
            return Ok((Objects::AllTablesInPublic, &rest[5..]));
        }
        Some("table") => rest = &rest[1..],
        Some(
            kind @ ("sequence" | "database" | "schema" | "function" | "procedure" | "routine"
            | "language" | "tablespace" | "type" | "domain" | "foreign" | "large"),
        ) => {
            return Err(SqlError::unsupported(format!(
                "privileges on {}",
                kind.to_ascii_uppercase()
            )))
        }
        _ => {}
    }
    let mut tables = Vec::new();
    loop {
        let (table, tail) = parse_table(rest)?;
        tables.push(table);
        rest = tail;
        match rest.first() {
            Some(Token::Comma) => rest = &rest[1..],
            _ => break,
        }
    }
    Ok((Objects::Tables(tables), rest))
}

/// Parses the grantees after TO / FROM and what may follow them.
fn parse_roles(tokens: &[Token], grant: bool) -> Result<Vec<String>, SqlError> {
    let mut rest = tokens;
    let mut roles = Vec::new();
    loop {
        if word(rest.first()) == Some("group") {
            rest = &rest[1..];
        }
        let name = name_of(rest.first())?;
        if matches!(rest.first(), Some(Token::Word(_))) && name == "public" {
            return Err(SqlError::unsupported("privileges granted to PUBLIC"));
        }
        roles.push(name);
        rest = &rest[1..];
        match rest.first() {
            Some(Token::Comma) => rest = &rest[1..],
            _ => break,
        }
    }
    match (grant, word(rest.first()), rest.len()) {
        (_, None, 0) => Ok(roles),
        (false, Some("restrict" | "cascade"), 1) => Ok(roles),
        (true, Some("with"), _) => Err(SqlError::unsupported("WITH GRANT OPTION")),
        (_, Some("granted"), _) => Err(SqlError::unsupported("GRANTED BY")),
        _ => Err(syntax_error(&format!("{:?}", rest[0]))),
    }
}

/// Parses a GRANT or REVOKE on tables.
pub fn parse(query: &str) -> Result<GrantStatement, SqlError> {
    let tokens = tokens(query)?;
    let grant = match word(tokens.first()) {
        Some("grant") => true,
        Some("revoke") => false,
        _ => return Err(syntax_error(query)),
    };
    let mut rest = &tokens[1..];
    if !grant && word(rest.first()) == Some("grant") {
        return Err(SqlError::unsupported("GRANT OPTION FOR"));
    }
    let (privileges, tail) = parse_privileges(rest)?;
    let (objects, tail) = parse_objects(tail)?;
    rest = tail;
    let keyword = if grant { "to" } else { "from" };
    if word(rest.first()) != Some(keyword) {
        return Err(syntax_error(&keyword.to_ascii_uppercase()));
    }
    let roles = parse_roles(&rest[1..], grant)?;
    Ok(GrantStatement {
        grant,
        privileges,
        objects,
        roles,
    })
}

// ----- The grants table. -----

fn schema() -> TableSchema {
    let text = || DataType::Text { length_max: None };
    TableSchema::new(
        GRANTS_TABLE,
        vec![
            ColumnDef::new("role", text()).not_null(),
            ColumnDef::new("table_name", text()).not_null(),
            ColumnDef::new("privilege", text()).not_null(),
        ],
        &["role", "table_name", "privilege"],
    )
    .expect("the grants table's schema is valid")
}

fn equal(column: &str, value: &str) -> Predicate {
    Predicate::compare(column, CompareOp::Equal, Value::Text(value.to_string()))
}

/// Every (table, privilege) `role` holds, read linearisably from its partition.
pub async fn held<B: RoutedBackend>(
    backend: &B,
    role: &str,
) -> Result<BTreeSet<(String, Privilege)>, RolesError> {
    let operation = Operation::Select {
        table: GRANTS_TABLE.to_string(),
        columns: Vec::new(),
        predicate: Some(equal("role", role)),
        limit: None,
    };
    let rows = match roles::run(backend, Some(role), operation).await {
        Ok(Output::Rows { rows, .. }) => rows,
        Ok(_) => return Err(RolesError::Engine(EngineError::Malformed)),
        // Nobody ever granted anything or created a table.
        Err(RolesError::Engine(EngineError::UndefinedTable { .. })) => Vec::new(),
        Err(error) => return Err(error),
    };
    Ok(rows
        .iter()
        .filter_map(|row| match row.as_slice() {
            [Value::Text(_), Value::Text(table), Value::Text(privilege)] => {
                Some((table.clone(), Privilege::of_name(privilege)?))
            }
            // A row this code did not write: not trusted.
            _ => None,
        })
        .collect())
}

/// Gives `role` `privileges` on `tables` (one write: the rows of one role share a partition).
async fn insert<B: RoutedBackend>(
    backend: &B,
    role: &str,
    tables: &[String],
    privileges: &[Privilege],
) -> Result<(), RolesError> {
    roles::ensure_table(backend, schema()).await?;
    let rows = tables
        .iter()
        .flat_map(|table| {
            privileges.iter().map(move |privilege| {
                vec![
                    Value::Text(role.to_string()),
                    Value::Text(table.clone()),
                    Value::Text(privilege.name().to_string()),
                ]
            })
        })
        .collect();
    let operation = Operation::Insert {
        table: GRANTS_TABLE.to_string(),
        columns: Vec::new(),
        rows,
        on_conflict: OnConflict::DoNothing,
    };
    roles::run(backend, Some(role), operation).await.map(drop)
}

/// Deletes what `predicate` matches: in `role`'s partition, or every partition (`None`).
async fn remove<B: RoutedBackend>(
    backend: &B,
    role: Option<&str>,
    predicate: Predicate,
) -> Result<(), RolesError> {
    let operation = Operation::Delete {
        table: GRANTS_TABLE.to_string(),
        predicate: Some(predicate),
    };
    match roles::run(backend, role, operation).await {
        Ok(_) | Err(RolesError::Engine(EngineError::UndefinedTable { .. })) => Ok(()),
        Err(error) => Err(error),
    }
}

/// Makes `role` the owner of the table it just created (after removing what a dropped table
/// of the same name left, if its DROP could not clean up).
pub async fn record_owner<B: RoutedBackend>(
    backend: &B,
    role: &str,
    table: &str,
) -> Result<(), RolesError> {
    forget_table(backend, table).await?;
    insert(backend, role, &[table.to_string()], &[Privilege::Owner]).await
}

/// Removes every grant on a dropped table (a new table of that name starts with none).
pub async fn forget_table<B: RoutedBackend>(backend: &B, table: &str) -> Result<(), RolesError> {
    remove(backend, None, equal("table_name", table)).await
}

/// Moves every grant on a renamed table to its new name (ALTER TABLE … RENAME TO): the
/// grants are read from every partition, written again under the new name (each role's rows
/// in its partition), and the old ones removed.
pub async fn rename_table<B: RoutedBackend>(
    backend: &B,
    table: &str,
    to: &str,
) -> Result<(), RolesError> {
    let operation = Operation::Select {
        table: GRANTS_TABLE.to_string(),
        columns: Vec::new(),
        predicate: Some(equal("table_name", table)),
        limit: None,
    };
    let rows = match roles::run(backend, None, operation).await {
        Ok(Output::Rows { rows, .. }) => rows,
        Ok(_) => return Err(RolesError::Engine(EngineError::Malformed)),
        Err(RolesError::Engine(EngineError::UndefinedTable { .. })) => return Ok(()),
        Err(error) => return Err(error),
    };
    forget_table(backend, to).await?;
    for row in &rows {
        if let [Value::Text(role), Value::Text(_), Value::Text(privilege)] = row.as_slice() {
            if let Some(privilege) = Privilege::of_name(privilege) {
                insert(backend, role, &[to.to_string()], &[privilege]).await?;
            }
        }
    }
    forget_table(backend, table).await
}

/// Removes every grant of a dropped role.
pub async fn forget_role<B: RoutedBackend>(backend: &B, role: &str) -> Result<(), RolesError> {
    remove(backend, Some(role), equal("role", role)).await
}

// ----- Checks. -----

/// What `operation` needs on its table (PostgreSQL's rules: UPDATE and DELETE that read rows
/// through a WHERE, and computed assignments, need SELECT too; INSERT … ON CONFLICT DO
/// UPDATE needs UPDATE; DDL on an existing table needs its ownership; CREATE TABLE needs
/// nothing here: its creator becomes the owner). TRUNCATE runs as a DELETE of every row and
/// needs DELETE here (PostgreSQL has a TRUNCATE privilege, which GRANT refuses with 0A000).
pub fn required(operation: &Operation) -> Vec<Privilege> {
    match operation {
        Operation::CreateTable { .. } => Vec::new(),
        Operation::DropTable { .. }
        | Operation::CreateIndex { .. }
        | Operation::CreateIndexOn { .. }
        | Operation::AlterTable { .. }
        | Operation::DropIndex { .. } => vec![Privilege::Owner],
        Operation::Select { .. } | Operation::Aggregate { .. } => vec![Privilege::Select],
        Operation::Insert { on_conflict, .. } => match on_conflict {
            OnConflict::DoUpdate(_) | OnConflict::DoUpdateComputed { .. } => {
                vec![Privilege::Insert, Privilege::Update]
            }
            _ => vec![Privilege::Insert],
        },
        Operation::Update { predicate, .. } => match predicate {
            Some(_) => vec![Privilege::Update, Privilege::Select],
            None => vec![Privilege::Update],
        },
        Operation::UpdateComputed { .. } => vec![Privilege::Update, Privilege::Select],
        Operation::Delete { predicate, .. } => match predicate {
            Some(_) => vec![Privilege::Delete, Privilege::Select],
            None => vec![Privilege::Delete],
        },
    }
}

/// Whether privileges `held` allow `privilege` on `table`.
fn allows(held: &BTreeSet<(String, Privilege)>, table: &str, privilege: Privilege) -> bool {
    held.contains(&(table.to_string(), privilege))
        || held.contains(&(table.to_string(), Privilege::Owner))
}

/// The tables of `DROP TABLE` operations whose ownership `held` lacks: the caller looks them
/// up in a fresh catalog, because DROP TABLE IF EXISTS of a missing table is no one's.
pub fn drops_not_owned<'a>(
    held: &BTreeSet<(String, Privilege)>,
    operations: &'a [Operation],
) -> Vec<&'a str> {
    operations
        .iter()
        .filter_map(|operation| match operation {
            Operation::DropTable { name, .. } if !allows(held, name, Privilege::Owner) => {
                Some(name.as_str())
            }
            _ => None,
        })
        .collect()
}

/// The first operation `held` does not allow, as PostgreSQL words the refusal. `missing`:
/// tables a fresh catalog does not hold, whose DROP TABLE is left to the engine (its 42P01,
/// or IF EXISTS's notice). Every other operation names a table its plan resolved, so its
/// privileges are checked whatever a cached catalog says.
pub fn check(
    held: &BTreeSet<(String, Privilege)>,
    operations: &[Operation],
    missing: &[&str],
) -> Result<(), SqlError> {
    for operation in operations {
        let table = operation.table_name();
        if matches!(operation, Operation::DropTable { .. }) && missing.contains(&table) {
            continue;
        }
        for privilege in required(operation) {
            if allows(held, table, privilege) {
                continue;
            }
            let message = match privilege {
                Privilege::Owner => format!("must be owner of table {table}"),
                _ => format!("permission denied for table {table}"),
            };
            return Err(SqlError::new("42501", message));
        }
    }
    Ok(())
}

/// The tables a statement names, checked to exist (42P01 as PostgreSQL).
fn tables_of(objects: &Objects, catalog: &sql::MemoryCatalog) -> Result<Vec<String>, SqlError> {
    match objects {
        Objects::AllTablesInPublic => Ok(catalog.tables.keys().cloned().collect()),
        Objects::Tables(tables) => {
            for table in tables {
                if !catalog.tables.contains_key(table) {
                    return Err(SqlError::new(
                        "42P01",
                        format!("relation \"{table}\" does not exist"),
                    ));
                }
            }
            Ok(tables.clone())
        }
    }
}

/// Runs a GRANT or REVOKE for `user` against the tables of `catalog` (hidden tables removed);
/// its command tag. A superuser may grant on every table, another role on the tables it owns.
pub async fn run_statement<B: RoutedBackend>(
    backend: &B,
    security: &super::Security,
    user: &Role,
    catalog: &sql::MemoryCatalog,
    query: &str,
) -> Result<String, SqlError> {
    let statement = parse(query)?;
    assert!(!statement.privileges.is_empty() && !statement.roles.is_empty());
    assert!(!statement.privileges.contains(&Privilege::Owner));
    let tables = tables_of(&statement.objects, catalog)?;
    if !user.rules.admin {
        let owned = held(backend, &user.name)
            .await
            .map_err(roles::unavailable)?;
        if let Some(table) = tables
            .iter()
            .find(|table| !owned.contains(&((*table).clone(), Privilege::Owner)))
        {
            return Err(SqlError::new(
                "42501",
                format!("permission denied for table {table}"),
            ));
        }
    }
    for role in &statement.roles {
        let exists = security.is_admin_user(role)
            || roles::lookup(backend, role)
                .await
                .map_err(roles::unavailable)?
                .is_some();
        if !exists {
            return Err(SqlError::new(
                "42704",
                format!("role \"{role}\" does not exist"),
            ));
        }
    }
    for role in &statement.roles {
        if statement.grant {
            if !tables.is_empty() {
                insert(backend, role, &tables, &statement.privileges)
                    .await
                    .map_err(roles::unavailable)?;
            }
            continue;
        }
        for table in &tables {
            let privileges = statement
                .privileges
                .iter()
                .map(|privilege| Value::Text(privilege.name().to_string()))
                .collect();
            let predicate = Predicate::And(vec![
                equal("role", role),
                equal("table_name", table),
                Predicate::In {
                    column: "privilege".to_string(),
                    values: privileges,
                },
            ]);
            remove(backend, Some(role), predicate)
                .await
                .map_err(roles::unavailable)?;
        }
    }
    Ok(if statement.grant { "GRANT" } else { "REVOKE" }.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_and_revoke_parse_as_postgresql_writes_them() {
        let statement =
            parse("GRANT SELECT, insert ON TABLE notes, public.\"Other\" TO alice, bob;").unwrap();
        assert_eq!(
            statement,
            GrantStatement {
                grant: true,
                privileges: vec![Privilege::Select, Privilege::Insert],
                objects: Objects::Tables(vec!["notes".into(), "Other".into()]),
                roles: vec!["alice".into(), "bob".into()],
            }
        );
        let statement =
            parse("revoke all privileges on all tables in schema public from carol cascade")
                .unwrap();
        assert!(!statement.grant);
        assert_eq!(statement.privileges, Privilege::GRANTABLE.to_vec());
        assert_eq!(statement.objects, Objects::AllTablesInPublic);
        assert_eq!(parse("GRANT ALL ON t TO u").unwrap().privileges.len(), 4);
        for (query, code) in [
            ("GRANT TRUNCATE ON t TO u", "0A000"),
            ("GRANT SELECT (a) ON t TO u", "0A000"),
            ("GRANT SELECT ON t TO u WITH GRANT OPTION", "0A000"),
            ("GRANT SELECT ON t TO PUBLIC", "0A000"),
            ("GRANT SELECT ON SEQUENCE s TO u", "0A000"),
            ("GRANT admin TO u", "0A000"),
            ("REVOKE GRANT OPTION FOR SELECT ON t FROM u", "0A000"),
            ("GRANT SELECT ON other.t TO u", "3F000"),
            ("GRANT SELECT ON ALL TABLES IN SCHEMA other TO u", "3F000"),
            ("GRANT SELECT ON t FROM u", "42601"),
            ("GRANT SELECT t TO u", "42601"),
            ("GRANT SELECT ON t TO", "42601"),
            ("REVOKE SELECT ON t FROM u extra", "42601"),
            ("GRANT", "42601"),
        ] {
            assert_eq!(parse(query).unwrap_err().code, code, "{query}");
        }
        assert!(is_grant_statement(" Revoke x"));
        assert!(!is_grant_statement("SELECT 'grant'"));
    }

    fn select(table: &str, predicate: Option<Predicate>) -> Operation {
        Operation::Select {
            table: table.into(),
            columns: Vec::new(),
            predicate,
            limit: None,
        }
    }

    #[test]
    fn statements_need_the_privileges_postgresql_asks_and_owners_hold_all() {
        let held: BTreeSet<(String, Privilege)> = [
            ("notes".to_string(), Privilege::Select),
            ("mine".to_string(), Privilege::Owner),
        ]
        .into_iter()
        .collect();
        let predicate = Some(equal("id", "1"));
        assert!(check(&held, &[select("notes", predicate.clone())], &[]).is_ok());
        let delete = Operation::Delete {
            table: "notes".into(),
            predicate: predicate.clone(),
        };
        let error = check(&held, &[delete], &[]).unwrap_err();
        assert_eq!(error.code, "42501");
        assert_eq!(error.message, "permission denied for table notes");
        let drop_table = Operation::DropTable {
            name: "notes".into(),
            if_exists: false,
        };
        assert_eq!(
            drops_not_owned(&held, std::slice::from_ref(&drop_table)),
            vec!["notes"]
        );
        assert_eq!(
            check(&held, std::slice::from_ref(&drop_table), &[])
                .unwrap_err()
                .message,
            "must be owner of table notes"
        );
        // DROP TABLE IF EXISTS of a table a fresh catalog does not hold is the engine's.
        assert!(check(&held, &[drop_table], &["notes"]).is_ok());
        let owned = [
            select("mine", None),
            Operation::Delete {
                table: "mine".into(),
                predicate,
            },
            Operation::DropTable {
                name: "mine".into(),
                if_exists: false,
            },
        ];
        assert!(check(&held, &owned, &[]).is_ok());
        assert!(drops_not_owned(&held, &owned).is_empty());
        // Only a DROP TABLE is let through for a missing table: a read is checked regardless.
        assert!(check(&BTreeSet::new(), &[select("absent", None)], &["absent"]).is_err());
        assert_eq!(
            required(&Operation::Update {
                table: "t".into(),
                assignments: Vec::new(),
                predicate: None
            }),
            vec![Privilege::Update]
        );
        assert!(schema().name.contains('\0'));
    }

    #[test]
    fn a_role_with_tables_or_privileges_is_not_dropped_and_the_detail_names_them() {
        assert!(dependents_error("r", &BTreeSet::new()).is_none());
        let held: BTreeSet<(String, Privilege)> = [
            ("mine", Privilege::Owner),
            ("mine", Privilege::Select),
            ("theirs", Privilege::Select),
            ("theirs", Privilege::Insert),
            ("other", Privilege::Delete),
        ]
        .into_iter()
        .map(|(table, privilege)| (table.to_string(), privilege))
        .collect();
        let error = dependents_error("r", &held).unwrap();
        assert_eq!(error.code, "2BP01");
        assert_eq!(
            error.message,
            "role \"r\" cannot be dropped because some objects depend on it"
        );
        assert_eq!(
            error.detail.as_deref(),
            Some("owner of table mine\nprivileges for table other\nprivileges for table theirs")
        );
    }
}
