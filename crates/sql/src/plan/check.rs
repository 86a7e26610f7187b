//! CHECK constraints at planning: compiled into the engine's expressions (which every
//! partition evaluates on the rows it writes: `engine::TableSchema::checks`), named as
//! PostgreSQL names them, and printed as `pg_get_constraintdef` prints them.
//!
//! A CHECK must mean the same on every replica and every partition, whenever a row is written:
//! so it may not use the statement's time (`now()`, which the planner turns into a constant:
//! frozen at CREATE TABLE it would mean something else), `gen_random_uuid()` or a sequence.
//! PostgreSQL accepts such constraints (its documentation warns against them); here they are
//! refused with 0A000.

use super::{table_scope, Planner};
use crate::error::{sqlstate, SqlError};
use engine::expression::{value_type, Function, Operator};
use engine::predicate::CompareOp;
use engine::schema::{CheckConstraint, ROW_ID_COLUMN};
use engine::{DataType, Expression, TableSchema, Value};
use sqlparser::ast::Expr;

/// A CHECK of a CREATE TABLE or ALTER TABLE, before it is named.
pub(super) struct PendingCheck<'a> {
    /// `CONSTRAINT name CHECK (…)`.
    pub name: Option<String>,
    pub expr: &'a Expr,
}

impl Planner<'_, '_> {
    /// Compiles a CHECK's condition over the table's columns into the engine's form.
    pub(super) fn check_expression(
        &mut self,
        schema: &TableSchema,
        expr: &Expr,
    ) -> Result<Expression, SqlError> {
        let scope = table_scope(schema, &schema.name);
        let saved_now = self.parameters.now.take();
        let saved_entropy = self.parameters.entropy.take();
        let requests = self.parameters.sequences.requests.len();
        let compiled = self.compiler(&scope).compile(expr, Some(DataType::Boolean));
        self.parameters.now = saved_now;
        self.parameters.entropy = saved_entropy;
        let drew = self.parameters.sequences.requests.len() != requests;
        self.parameters.sequences.requests.truncate(requests);
        let scalar = compiled.map_err(|error| {
            if error.code == sqlstate::INTERNAL_ERROR {
                volatile_refused()
            } else {
                error
            }
        })?;
        if drew {
            return Err(volatile_refused());
        }
        let types = scope.types();
        scalar.check_operators(&types)?;
        if let Some(found) = scalar.data_type(&types) {
            if found != DataType::Boolean {
                return Err(SqlError::new(
                    sqlstate::DATATYPE_MISMATCH,
                    format!(
                        "argument of CHECK must be type boolean, not type {}",
                        found.name()
                    ),
                ));
            }
        }
        let expression = scalar.to_engine(&scope).map_err(|error| {
            if error.code == sqlstate::FEATURE_NOT_SUPPORTED {
                SqlError::unsupported(format!(
                    "{} in CHECK constraints",
                    error
                        .message
                        .trim_end_matches(" is not supported")
                        .trim_end_matches(" in UPDATE SET")
                ))
            } else {
                error
            }
        })?;
        let mut row_id = false;
        let _ = expression.map_columns(&mut |name: &String| {
            row_id |= name == ROW_ID_COLUMN;
            Ok::<(), ()>(())
        });
        if row_id {
            return Err(SqlError::unsupported(format!(
                "the hidden column {ROW_ID_COLUMN} in CHECK constraints"
            )));
        }
        Ok(expression)
    }

    /// The table's CHECK constraints with `pending` added in order: each compiled and named
    /// (PostgreSQL's `t_c_check` for a condition over one column `c`, else `t_check`, with a
    /// number appended until the name is free); 42710 for a name given twice.
    pub(super) fn named_checks(
        &mut self,
        schema: &TableSchema,
        pending: &[PendingCheck<'_>],
    ) -> Result<Vec<CheckConstraint>, SqlError> {
        let mut checks = schema.checks.clone();
        let existing = checks.len();
        for check in pending {
            let expression = self.check_expression(schema, check.expr)?;
            let name = match &check.name {
                Some(name) => {
                    if let Some(at) = checks.iter().position(|other| other.name == *name) {
                        // PostgreSQL's two messages: against the table, or within the command.
                        let message = if at < existing {
                            format!(
                                "constraint \"{name}\" for relation \"{}\" already exists",
                                schema.name
                            )
                        } else {
                            format!("check constraint \"{name}\" already exists")
                        };
                        return Err(SqlError::new("42710", message));
                    }
                    name.clone()
                }
                None => generated_name(&schema.name, &expression, &checks),
            };
            checks.push(CheckConstraint { name, expression });
        }
        checks.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(checks)
    }
}

fn volatile_refused() -> SqlError {
    SqlError::unsupported(
        "CHECK constraints that use the statement's time, gen_random_uuid() or a sequence",
    )
    .with_detail("a CHECK is evaluated wherever a row is written, on every replica and partition, so it must give the same answer for the same row")
}

/// PostgreSQL's name for an unnamed CHECK: `table_column_check` when the condition names one
/// column, else `table_check`; then `…1`, `…2`, … until it is free among `taken`.
pub fn generated_name(table: &str, expression: &Expression, taken: &[CheckConstraint]) -> String {
    let mut columns: Vec<String> = Vec::new();
    let _ = expression.map_columns(&mut |name: &String| {
        if !columns.contains(name) {
            columns.push(name.clone());
        }
        Ok::<(), ()>(())
    });
    let base = match columns.as_slice() {
        [column] => format!("{table}_{column}_check"),
        _ => format!("{table}_check"),
    };
    let free = |name: &str| !taken.iter().any(|check| check.name == name);
    if free(&base) {
        return base;
    }
    (1..)
        .map(|number| format!("{base}{number}"))
        .find(|name| free(name))
        .expect("some number is free")
}

/// `pg_get_constraintdef` of a CHECK: `CHECK ((n > 0))`, or with `pretty` (psql's `\d`)
/// `CHECK (n > 0)`, as PostgreSQL 15 deparses the condition (BETWEEN as two comparisons, IN
/// as `= ANY (ARRAY[…])`, constants labelled with their type where PostgreSQL labels them).
pub fn constraint_definition(expression: &Expression, pretty: bool) -> String {
    let body = Printer { pretty }.print(expression);
    if pretty {
        format!("CHECK ({body})")
    } else {
        format!("CHECK ({})", Printer { pretty }.wrap(expression, body))
    }
}

/// Where a node is printed, for pretty printing's parentheses.
#[derive(Clone, Copy, PartialEq)]
enum Parent {
    /// An operand of AND (`true`) or OR (`false`), or of NOT (`None`).
    Boolean(Option<bool>),
    /// An operand of an arithmetic or comparison operator; `first`: its left operand.
    Operator { operator: Operator, first: bool },
    /// A function argument, list item, CASE part, or cast operand.
    Other,
}

struct Printer {
    pretty: bool,
}

impl Printer {
    /// A node in full (non-pretty) form gets parentheses around any operator expression.
    fn wrap(&self, expression: &Expression, text: String) -> String {
        if self.needs_parentheses_plain(expression) {
            format!("({text})")
        } else {
            text
        }
    }

    fn needs_parentheses_plain(&self, expression: &Expression) -> bool {
        match expression {
            Expression::Binary(..)
            | Expression::Not(_)
            | Expression::IsNull(..)
            | Expression::IsBoolean(..)
            | Expression::InList(..)
            | Expression::Between(..) => true,
            Expression::Negate(operand) => !matches!(**operand, Expression::Constant(_)),
            _ => false,
        }
    }

    /// Pretty printing's rule (PostgreSQL's `isSimpleNode` with PRETTYFLAG_PAREN).
    fn needs_parentheses_pretty(expression: &Expression, parent: Parent) -> bool {
        let arithmetic = |operator: Operator| match operator {
            Operator::Add | Operator::Subtract => Some(false),
            Operator::Multiply | Operator::Divide | Operator::Modulo => Some(true),
            _ => None,
        };
        match (expression, parent) {
            (_, Parent::Other) => false,
            (Expression::Binary(Operator::And, ..), Parent::Boolean(_)) => false,
            (Expression::Binary(Operator::Or, ..), Parent::Boolean(Some(false))) => false,
            (Expression::Binary(Operator::Or, ..), Parent::Boolean(_)) => true,
            (Expression::Not(_), Parent::Boolean(Some(_))) => false,
            (Expression::Not(_), _) => true,
            (
                Expression::Binary(..)
                | Expression::IsNull(..)
                | Expression::IsBoolean(..)
                | Expression::InList(..)
                | Expression::Between(..),
                Parent::Boolean(_),
            ) => false,
            (
                Expression::Binary(operator, ..),
                Parent::Operator {
                    operator: outer,
                    first,
                },
            ) => match (arithmetic(*operator), arithmetic(outer)) {
                (Some(high), Some(outer_high)) if high == outer_high => !first,
                (Some(true), Some(false)) => false,
                _ => true,
            },
            (
                Expression::IsNull(..)
                | Expression::IsBoolean(..)
                | Expression::InList(..)
                | Expression::Between(..),
                Parent::Operator { .. },
            ) => true,
            (Expression::Negate(operand), _) => !matches!(**operand, Expression::Constant(_)),
            _ => false,
        }
    }

    /// A child printed under `parent`: with the parentheses its form needs.
    fn child(&self, expression: &Expression, parent: Parent) -> String {
        let text = self.print(expression);
        let wrap = if self.pretty {
            Printer::needs_parentheses_pretty(expression, parent)
        } else {
            self.needs_parentheses_plain(expression)
        };
        if wrap {
            format!("({text})")
        } else {
            text
        }
    }

    fn print(&self, expression: &Expression) -> String {
        match expression {
            Expression::Column(name) => quote_identifier(name),
            Expression::Constant(value) => constant(value, false),
            Expression::Negate(operand) => match &**operand {
                Expression::Constant(value) => constant(value, true),
                operand => format!("- {}", self.child(operand, Parent::Other)),
            },
            Expression::Not(operand) => {
                format!("NOT {}", self.child(operand, Parent::Boolean(None)))
            }
            Expression::Binary(operator @ (Operator::And | Operator::Or), ..) => {
                let and = *operator == Operator::And;
                let mut operands = Vec::new();
                flatten(expression, *operator, &mut operands);
                let parts: Vec<String> = operands
                    .iter()
                    .map(|operand| self.child(operand, Parent::Boolean(Some(and))))
                    .collect();
                parts.join(if and { " AND " } else { " OR " })
            }
            Expression::Binary(operator, left, right) => format!(
                "{} {} {}",
                self.child(
                    left,
                    Parent::Operator {
                        operator: *operator,
                        first: true
                    }
                ),
                operator_text(*operator),
                self.child(
                    right,
                    Parent::Operator {
                        operator: *operator,
                        first: false
                    }
                )
            ),
            Expression::IsNull(operand, negated) => format!(
                "{} IS {}NULL",
                self.child(operand, Parent::Other),
                if *negated { "NOT " } else { "" }
            ),
            Expression::IsBoolean(operand, expected, negated) => format!(
                "{} IS {}{}",
                self.child(operand, Parent::Other),
                if *negated { "NOT " } else { "" },
                if *expected { "TRUE" } else { "FALSE" }
            ),
            Expression::InList(operand, items, negated) => {
                let items: Vec<String> = items
                    .iter()
                    .map(|item| self.child(item, Parent::Other))
                    .collect();
                format!(
                    "{} {} (ARRAY[{}])",
                    self.child(operand, Parent::Other),
                    if *negated { "<> ALL" } else { "= ANY" },
                    items.join(", ")
                )
            }
            Expression::Between(operand, low, high, negated) => {
                // PostgreSQL rewrites BETWEEN into two comparisons.
                let (first, second, joiner) = if *negated {
                    (CompareOp::Less, CompareOp::Greater, Operator::Or)
                } else {
                    (
                        CompareOp::GreaterOrEqual,
                        CompareOp::LessOrEqual,
                        Operator::And,
                    )
                };
                let compare = |op: CompareOp, bound: &Expression| {
                    Expression::Binary(
                        Operator::Compare(op),
                        operand.clone(),
                        Box::new(bound.clone()),
                    )
                };
                let rewritten = Expression::Binary(
                    joiner,
                    Box::new(compare(first, low)),
                    Box::new(compare(second, high)),
                );
                self.print(&rewritten)
            }
            Expression::Case {
                operand,
                branches,
                otherwise,
            } => {
                let mut text = String::from("CASE");
                if let Some(operand) = operand {
                    text.push(' ');
                    text.push_str(&self.child(operand, Parent::Other));
                }
                for (condition, result) in branches {
                    text.push_str(&format!(
                        " WHEN {} THEN {}",
                        self.child(condition, Parent::Other),
                        self.child(result, Parent::Other)
                    ));
                }
                if let Some(otherwise) = otherwise {
                    text.push_str(&format!(" ELSE {}", self.child(otherwise, Parent::Other)));
                }
                text.push_str(" END");
                text
            }
            Expression::Cast(operand, data_type) => {
                let inner = self.print(operand);
                let simple = matches!(**operand, Expression::Column(_) | Expression::Call(..));
                if self.pretty && simple {
                    format!("{inner}::{}", data_type.name())
                } else {
                    format!("({inner})::{}", data_type.name())
                }
            }
            Expression::Call(function, arguments) => {
                let arguments: Vec<String> = arguments
                    .iter()
                    .map(|argument| self.child(argument, Parent::Other))
                    .collect();
                format!("{}({})", function_name(*function), arguments.join(", "))
            }
        }
    }
}

fn flatten<'e>(expression: &'e Expression, operator: Operator, operands: &mut Vec<&'e Expression>) {
    match expression {
        Expression::Binary(inner, left, right) if *inner == operator => {
            flatten(left, operator, operands);
            flatten(right, operator, operands);
        }
        other => operands.push(other),
    }
}

fn operator_text(operator: Operator) -> &'static str {
    match operator {
        Operator::Add => "+",
        Operator::Subtract => "-",
        Operator::Multiply => "*",
        Operator::Divide => "/",
        Operator::Modulo => "%",
        Operator::Concat => "||",
        Operator::Compare(op) => op.symbol(),
        Operator::And => "AND",
        Operator::Or => "OR",
    }
}

fn function_name(function: Function) -> String {
    match function {
        Function::Coalesce => "COALESCE".into(),
        Function::NullIf => "NULLIF".into(),
        Function::Ceil => "ceil".into(),
        Function::JsonTypeof => "jsonb_typeof".into(),
        Function::JsonArrayLength => "jsonb_array_length".into(),
        Function::JsonBuildObject => "jsonb_build_object".into(),
        Function::ToJsonb => "to_jsonb".into(),
        other => format!("{other:?}").to_lowercase(),
    }
}

/// A constant as PostgreSQL's deparser prints it: non-negative integers and numerics bare,
/// booleans as `true`/`false`, anything else quoted and labelled with its type.
fn constant(value: &Value, negated: bool) -> String {
    let text = engine::value::text_output(value);
    let Some(text) = text else {
        return "NULL".into();
    };
    let text = if negated { format!("-{text}") } else { text };
    let bare = !text.starts_with('-');
    match value {
        Value::Boolean(flag) if !negated => flag.to_string(),
        Value::Int(_) if bare => text,
        Value::BigInt(number) if bare && i32::try_from(*number).is_ok() => text,
        Value::Numeric(_) if bare => text,
        _ => {
            let label = value_type(value)
                .map(|data_type| data_type.name())
                .unwrap_or_else(|| "text".into());
            format!("'{}'::{label}", text.replace('\'', "''"))
        }
    }
}

/// An identifier as PostgreSQL's `quote_identifier` prints it (quoted unless it is a plain
/// lowercase name).
fn quote_identifier(name: &str) -> String {
    let plain = name
        .chars()
        .next()
        .is_some_and(|first| first.is_ascii_lowercase() || first == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '$');
    if plain {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}
