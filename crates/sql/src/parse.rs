//! Parsing: a query string → sqlparser statements (PostgreSQL dialect), with limits, and the
//! session statements (SET, SHOW, RESET, DISCARD, COMMIT, ROLLBACK; BEGIN is refused).

use crate::error::{sqlstate, SqlError};
use crate::expr::{ident_name, object_name_parts};
use crate::session::SessionCommand;
use sqlparser::ast::{self, Expr, Statement};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Token, Tokenizer};

/// Longest query string accepted, in bytes (a wire message is capped near this anyway).
pub const QUERY_BYTES_MAX: usize = 16 << 20;
/// Deepest expression or query nesting the parser accepts: it bounds every recursion over the
/// AST in this crate (compiler, evaluator, planner), so no client input can overflow the stack.
pub const RECURSION_LIMIT: usize = 48;
/// Most operators (arithmetic, comparison, AND, OR, NOT, LIKE, IS, …) in one statement. The
/// parser builds operator chains (`a OR b OR c …`) iteratively into trees as deep as the chain,
/// which the planner, the evaluator and even dropping the tree then walk recursively: this
/// bounds that depth (PostgreSQL refuses such statements too, with 54001).
pub const OPERATORS_MAX: usize = 1_000;
/// Most parameters in one statement (the protocol's Int16 count).
pub const PARAMETERS_MAX: usize = 65_535;

fn parse_error(error: ParserError) -> SqlError {
    match error {
        ParserError::RecursionLimitExceeded => SqlError::new(
            sqlstate::PROGRAM_LIMIT_EXCEEDED,
            format!("statement nested more than {RECURSION_LIMIT} levels deep"),
        ),
        ParserError::TokenizerError(message) | ParserError::ParserError(message) => {
            SqlError::syntax(format!("syntax error: {message}"))
        }
    }
}

/// Parses a query string of zero or more statements separated by `;`.
pub fn parse(sql: &str) -> Result<Vec<Statement>, SqlError> {
    if sql.len() > QUERY_BYTES_MAX {
        return Err(SqlError::new(
            sqlstate::PROGRAM_LIMIT_EXCEEDED,
            format!("query strings are limited to {QUERY_BYTES_MAX} bytes"),
        ));
    }
    if sql.trim().trim_matches(';').trim().is_empty() {
        return Ok(Vec::new());
    }
    check_operator_count(sql)?;
    let dialect = PostgreSqlDialect {};
    Parser::new(&dialect)
        .with_recursion_limit(RECURSION_LIMIT)
        .try_with_sql(sql)
        .and_then(|mut parser| parser.parse_statements())
        .map_err(|error| refused_statement(sql).unwrap_or_else(|| parse_error(error)))
}

/// Statements PostgreSQL has that the parser cannot read: refused by name (0A000) rather than
/// as a syntax error, so a client learns the feature is missing, not that it misspelt it.
fn refused_statement(sql: &str) -> Option<SqlError> {
    let dialect = PostgreSqlDialect {};
    let tokens = Tokenizer::new(&dialect, sql).tokenize().ok()?;
    let mut words: Vec<String> = Vec::new();
    for token in tokens {
        match token {
            Token::SemiColon => words.clear(),
            Token::Whitespace(_) => {}
            Token::Word(word) if words.len() < 2 => words.push(word.value.to_ascii_uppercase()),
            _ => {
                if words.len() < 2 {
                    words.push(String::new());
                }
            }
        }
        if words.len() == 2 && words[0] == "ALTER" && words[1] == "SEQUENCE" {
            return Some(
                SqlError::unsupported("ALTER SEQUENCE")
                    .with_hint("setval('name', value) sets a sequence's next value; DROP SEQUENCE and CREATE SEQUENCE change its options"),
            );
        }
    }
    None
}

/// Refuses statements with more than `OPERATORS_MAX` operators (54001). Text that does not
/// tokenize is left for the parser to report.
fn check_operator_count(sql: &str) -> Result<(), SqlError> {
    use sqlparser::keywords::Keyword;
    let dialect = PostgreSqlDialect {};
    let Ok(tokens) = Tokenizer::new(&dialect, sql).tokenize() else {
        return Ok(());
    };
    let mut operators = 0usize;
    for token in tokens {
        let counts = match &token {
            Token::SemiColon => {
                operators = 0;
                false
            }
            Token::Word(word) => matches!(
                word.keyword,
                Keyword::AND
                    | Keyword::OR
                    | Keyword::NOT
                    | Keyword::LIKE
                    | Keyword::ILIKE
                    | Keyword::IS
                    | Keyword::BETWEEN
                    | Keyword::IN
                    | Keyword::COLLATE
            ),
            Token::EOF
            | Token::Number(..)
            | Token::Comma
            | Token::Whitespace(_)
            | Token::LParen
            | Token::RParen
            | Token::Period
            | Token::Placeholder(_) => false,
            Token::SingleQuotedString(_)
            | Token::DoubleQuotedString(_)
            | Token::DollarQuotedString(_)
            | Token::EscapedStringLiteral(_)
            | Token::NationalStringLiteral(_)
            | Token::UnicodeStringLiteral(_)
            | Token::HexStringLiteral(_) => false,
            _ => true,
        };
        if counts {
            operators += 1;
            if operators > OPERATORS_MAX {
                return Err(SqlError::new(
                    "54001",
                    format!("statement too complex: more than {OPERATORS_MAX} operators"),
                )
                .with_hint("use IN (…) for long lists of alternatives"));
            }
        }
    }
    Ok(())
}

/// The number of parameters a statement uses: the highest `$n` in it.
pub fn parameter_count(sql: &str) -> Result<usize, SqlError> {
    let dialect = PostgreSqlDialect {};
    let tokens = Tokenizer::new(&dialect, sql)
        .tokenize()
        .map_err(|error| SqlError::syntax(format!("syntax error: {error}")))?;
    let mut count = 0usize;
    for token in tokens {
        if let Token::Placeholder(placeholder) = token {
            let index = placeholder
                .strip_prefix('$')
                .and_then(|digits| digits.parse::<usize>().ok())
                .filter(|index| (1..=PARAMETERS_MAX).contains(index))
                .ok_or_else(|| SqlError::syntax(format!("invalid parameter {placeholder}")))?;
            count = count.max(index);
        }
    }
    Ok(count)
}

/// The text of a SET value: identifiers and strings as written, numbers as text.
fn setting_value(values: &[Expr]) -> Result<Option<String>, SqlError> {
    let mut parts = Vec::with_capacity(values.len());
    for value in values {
        let part = match value {
            Expr::Identifier(ident)
                if ident.value.eq_ignore_ascii_case("default") && values.len() == 1 =>
            {
                return Ok(None)
            }
            Expr::Identifier(ident) => ident.value.clone(),
            Expr::CompoundIdentifier(idents) => idents
                .iter()
                .map(|ident| ident.value.clone())
                .collect::<Vec<_>>()
                .join("."),
            Expr::Value(value) => match &value.value {
                ast::Value::SingleQuotedString(text) => text.clone(),
                ast::Value::Number(text, _) => text.clone(),
                ast::Value::Boolean(flag) => {
                    if *flag {
                        "on".into()
                    } else {
                        "off".into()
                    }
                }
                other => other.to_string(),
            },
            Expr::UnaryOp {
                op: ast::UnaryOperator::Minus,
                expr,
            } => format!("-{expr}"),
            other => return Err(SqlError::syntax(format!("invalid SET value {other}"))),
        };
        parts.push(part);
    }
    Ok(Some(parts.join(", ")))
}

/// The session command a statement is, or 0A000 for statements Tessera does not offer.
pub fn session_command(statement: &Statement) -> Result<SessionCommand, SqlError> {
    Ok(match statement {
        Statement::Set(set) => match set {
            ast::Set::SingleAssignment {
                variable, values, ..
            } => SessionCommand::Set {
                name: object_name_parts(variable)?.join("."),
                value: setting_value(values)?,
            },
            ast::Set::SetTimeZone { value, .. } => SessionCommand::Set {
                name: "TimeZone".into(),
                value: setting_value(std::slice::from_ref(value))?,
            },
            ast::Set::SetNames { charset_name, .. } => SessionCommand::Set {
                name: "client_encoding".into(),
                value: Some(ident_name(charset_name)),
            },
            // SET TRANSACTION / SESSION CHARACTERISTICS: accepted, autocommit regardless.
            ast::Set::SetTransaction { .. } => SessionCommand::Set {
                name: "transaction_isolation".into(),
                value: None,
            },
            other => return Err(SqlError::unsupported(format!("{other}"))),
        },
        Statement::ShowVariable { variable } => SessionCommand::Show {
            name: show_name(variable),
        },
        Statement::Reset(reset) => match &reset.reset {
            ast::Reset::ALL => SessionCommand::ResetAll { tag: "RESET" },
            ast::Reset::ConfigurationParameter(name) => SessionCommand::Set {
                name: object_name_parts(name)?.join("."),
                value: None,
            },
            ast::Reset::SessionAuthorization => SessionCommand::ResetAll { tag: "RESET" },
        },
        Statement::Discard {
            object_type: ast::DiscardObject::ALL,
        } => SessionCommand::ResetAll { tag: "DISCARD ALL" },
        Statement::Discard { .. } => SessionCommand::ResetAll { tag: "DISCARD" },
        // A transaction block is the front end's (`SessionCommand::Begin`), and so are its
        // savepoints (outside a block they answer 25P01, as PostgreSQL does).
        Statement::StartTransaction {
            modes,
            statements,
            exception,
            ..
        } => {
            if !statements.is_empty() || exception.is_some() {
                return Err(SqlError::unsupported("BEGIN … END blocks with statements"));
            }
            let mut read_only = false;
            for mode in modes {
                match mode {
                    ast::TransactionMode::AccessMode(ast::TransactionAccessMode::ReadOnly) => {
                        read_only = true
                    }
                    ast::TransactionMode::AccessMode(ast::TransactionAccessMode::ReadWrite) => {
                        read_only = false
                    }
                    ast::TransactionMode::IsolationLevel(
                        ast::TransactionIsolationLevel::Snapshot,
                    ) => {
                        return Err(SqlError::unsupported("ISOLATION LEVEL SNAPSHOT"));
                    }
                    // Every other level is served as SERIALIZABLE, which is stronger.
                    ast::TransactionMode::IsolationLevel(_) => {}
                }
            }
            SessionCommand::Begin { read_only }
        }
        Statement::Commit { chain: true, .. } => {
            return Err(no_transaction_block("COMMIT AND CHAIN"))
        }
        Statement::Commit { .. } => SessionCommand::Commit,
        Statement::Rollback {
            chain: false,
            savepoint: None,
        } => SessionCommand::Rollback,
        Statement::Rollback {
            chain: false,
            savepoint: Some(name),
        } => SessionCommand::RollbackTo {
            name: crate::expr::ident_name(name),
        },
        Statement::Rollback { .. } => return Err(no_transaction_block("ROLLBACK AND CHAIN")),
        Statement::Savepoint { name } => SessionCommand::Savepoint {
            name: crate::expr::ident_name(name),
        },
        Statement::ReleaseSavepoint { name } => SessionCommand::Release {
            name: crate::expr::ident_name(name),
        },
        Statement::Prepare { .. } | Statement::Execute { .. } | Statement::Deallocate { .. } => {
            return Err(
                SqlError::unsupported("SQL-level PREPARE, EXECUTE and DEALLOCATE")
                    .with_hint("use the extended query protocol"),
            )
        }
        other => {
            let text = other.to_string();
            let words: Vec<&str> = text.split_whitespace().take(2).collect();
            return Err(SqlError::unsupported(format!(
                "statement {}",
                words.join(" ")
            )));
        }
    })
}

/// BEGIN and START TRANSACTION in a front end without transactions (`Session::apply`): 0A000.
/// Accepting them while every statement still commits alone would make a later ROLLBACK lose
/// nothing it promised to undo, which is worse than refusing.
pub fn transactions_refused() -> SqlError {
    SqlError::unsupported("interactive transactions (BEGIN / START TRANSACTION)")
        .with_detail("every statement commits on its own (autocommit); ROLLBACK could undo nothing")
        .with_hint("send the statements without BEGIN; a single statement is atomic")
}

/// What PostgreSQL answers for a statement that only works inside a transaction block when
/// none is open (25P01).
pub(crate) fn no_transaction_block(statement: &str) -> SqlError {
    SqlError::new(
        sqlstate::NO_ACTIVE_SQL_TRANSACTION,
        format!("{statement} can only be used in transaction blocks"),
    )
}

/// The setting a SHOW names: the words joined with `_`, and PostgreSQL's multi-word
/// spellings (`SHOW TRANSACTION ISOLATION LEVEL`, which SQLAlchemy sends on connect, and
/// `SHOW TIME ZONE`) mapped to the parameters they mean.
fn show_name(variable: &[ast::Ident]) -> String {
    // sqlparser hands `SHOW tessera.read_isolation` over as the words without the period
    // (it skips every token but words), the way it hands `SHOW transaction isolation level`
    // over: Tessera's own settings are the dotted ones.
    if variable.len() > 1 && variable[0].value.eq_ignore_ascii_case("tessera") {
        return variable
            .iter()
            .map(|ident| ident.value.clone())
            .collect::<Vec<_>>()
            .join(".");
    }
    let joined = variable
        .iter()
        .map(|ident| ident.value.clone())
        .collect::<Vec<_>>()
        .join(" ")
        .replace(' ', "_")
        .replace("_._", ".");
    match joined.to_ascii_lowercase().as_str() {
        "transaction_isolation_level" => "transaction_isolation".to_string(),
        "time_zone" => "TimeZone".to_string(),
        _ => joined,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alter_sequence_is_refused_by_name_and_other_syntax_errors_stay_syntax_errors() {
        for sql in [
            "ALTER SEQUENCE s RESTART WITH 5",
            "alter sequence public.s increment by 2",
            "SELECT 1; ALTER SEQUENCE s CYCLE",
        ] {
            let error = parse(sql).unwrap_err();
            assert_eq!(
                error.code,
                sqlstate::FEATURE_NOT_SUPPORTED,
                "{sql}: {error:?}"
            );
            assert!(error.message.contains("ALTER SEQUENCE"), "{error:?}");
        }
        let error = parse("ALTER SEQUENC s RESTART").unwrap_err();
        assert_eq!(error.code, sqlstate::SYNTAX_ERROR, "{error:?}");
        assert!(parse("SELECT 'ALTER SEQUENCE'").is_ok());
    }
}
