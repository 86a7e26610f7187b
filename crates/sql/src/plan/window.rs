//! Window functions (`f(…) OVER (PARTITION BY … ORDER BY … frame)`), evaluated at the gateway
//! after the query's rows are gathered, as joins and set operations are.
//!
//! ## Planning: one query becomes three steps
//!
//! A SELECT whose select list or ORDER BY calls a window function is rewritten, on the AST:
//!
//! 1. **Input.** The query without its window functions: the same FROM, WHERE, GROUP BY and
//!    HAVING, whose select list is every expression the windows and the rest of the query need
//!    — each window function's arguments, PARTITION BY and ORDER BY expressions, and every
//!    largest part of a select item or sort key that holds no window function (`a` in
//!    `a + rank() OVER (…)`, `count(*)` in `sum(count(*)) OVER ()`). It is planned as any
//!    query (one table, a join, grouped or not, a WITH query…), so its engine operations, its
//!    routing and its errors are the ordinary ones.
//! 2. **Windows** (`WindowPlan`, `Finish::Window`): over the input's rows the gateway computes
//!    each window function (`WindowCall`) and appends its value to every row.
//! 3. **Output.** The select list, DISTINCT, ORDER BY, OFFSET and LIMIT over those rows, where a
//!    window function is now a column: planned as a query over a derived table
//!    (`Source::Derived`).
//!
//! ## Semantics (PostgreSQL's)
//!
//! Rows are sorted by the PARTITION BY values, then by the window's ORDER BY (a stable sort, so
//! ties keep the input's order, which is primary key or group key order). Peers are rows of a
//! partition equal in every ORDER BY value (all rows of the partition without ORDER BY).
//! The default frame is `RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW` (peers included:
//! the whole partition without ORDER BY). `ROWS` frames take `UNBOUNDED`, `n PRECEDING`,
//! `CURRENT ROW`, `n FOLLOWING`; `RANGE` frames `UNBOUNDED` and `CURRENT ROW`. Functions:
//! row_number, rank, dense_rank, percent_rank, cume_dist, ntile, lag, lead, first_value,
//! last_value, nth_value, and count/sum/avg/min/max over the frame. Without an ORDER BY in the
//! query, rows come in the order of the last window's sort (PostgreSQL: unspecified).
//!
//! Refused (0A000, named): `RANGE` with an offset, `GROUPS` frames, FILTER and IGNORE NULLS on
//! window functions, DISTINCT in a window aggregate (as PostgreSQL), window functions inside
//! expressions the rewrite does not descend into (a subquery's own window functions are its
//! own). Errors as PostgreSQL's: 42P20 for a window function in WHERE, GROUP BY, HAVING or a
//! window definition, and for frame and named-window misuse; 42803 for one inside an aggregate;
//! 42809 for OVER on a plain function; 42704 for an unknown window name.

use super::{
    column_name, execution_columns, with_subquery_tables, Execution, Finish, Planner, Source,
};
use crate::error::{sqlstate, SqlError};
use crate::expr::{
    aggregate_function, aggregate_result_type, cast_value, compare_values, ident_name, Scope,
    ScopeColumn,
};
use crate::{OutputColumn, StatementResult};
use engine::{AggregateFunction, DataType, OperationResult, Value};
use sqlparser::ast::{
    self, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, SelectItem, SetExpr,
    WindowFrameBound, WindowFrameUnits, WindowType,
};
use std::cmp::Ordering;

/// Named windows may refer to one another; this bounds the chain (PostgreSQL's are acyclic by
/// construction, ours are checked).
const WINDOW_REFERENCES_MAX: usize = 64;

/// The windows step of a query: the input query's execution, the window functions to compute
/// over its rows, and the resulting columns (the input's, then one per call).
#[derive(Clone, Debug, PartialEq)]
pub struct WindowPlan {
    pub input: Execution,
    pub calls: Vec<WindowCall>,
    pub columns: Vec<OutputColumn>,
}

/// One window function call over the input row (every operand is an input column).
#[derive(Clone, Debug, PartialEq)]
pub struct WindowCall {
    pub function: WindowFunction,
    /// Input positions of the arguments (none for `count(*)`).
    pub arguments: Vec<usize>,
    pub partition_by: Vec<usize>,
    pub order_by: Vec<WindowOrder>,
    pub frame: Frame,
    /// The arguments' types.
    pub argument_types: Vec<DataType>,
    /// The result type.
    pub data_type: DataType,
}

/// A window function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowFunction {
    RowNumber,
    Rank,
    DenseRank,
    PercentRank,
    CumeDist,
    Ntile,
    Lag,
    Lead,
    FirstValue,
    LastValue,
    NthValue,
    /// An aggregate over the frame.
    Aggregate(AggregateFunction),
}

/// One key of a window's ORDER BY.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowOrder {
    pub position: usize,
    pub descending: bool,
    pub nulls_first: bool,
}

/// A frame: `ROWS` (physical offsets) or `RANGE` (peer groups) between two bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    pub rows: bool,
    pub start: FrameBound,
    pub end: FrameBound,
}

/// One end of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameBound {
    UnboundedPreceding,
    Preceding(u64),
    CurrentRow,
    Following(u64),
    UnboundedFollowing,
}

impl Frame {
    /// `RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW`, PostgreSQL's default.
    pub const DEFAULT: Frame = Frame {
        rows: false,
        start: FrameBound::UnboundedPreceding,
        end: FrameBound::CurrentRow,
    };
}

fn window_error(message: impl Into<String>) -> SqlError {
    SqlError::new("42P20", message)
}

// ----- finding window functions in the AST -----

/// Whether a function call is a window function call (`… OVER …`).
fn is_window_call(expr: &Expr) -> bool {
    matches!(expr, Expr::Function(function) if function.over.is_some())
}

/// The operands of the expressions the rewrite descends into; `None` for any other
/// expression (whose window functions, if any, are refused).
fn children(expr: &Expr) -> Option<Vec<&Expr>> {
    Some(match expr {
        Expr::Identifier(_)
        | Expr::CompoundIdentifier(_)
        | Expr::Value(_)
        | Expr::TypedString(_)
        | Expr::Subquery(_)
        | Expr::Exists { .. }
        | Expr::InSubquery { .. } => Vec::new(),
        Expr::BinaryOp { left, right, .. }
        | Expr::IsDistinctFrom(left, right)
        | Expr::IsNotDistinctFrom(left, right) => vec![left, right],
        Expr::Like { expr, pattern, .. } | Expr::ILike { expr, pattern, .. } => {
            vec![expr, pattern]
        }
        Expr::UnaryOp { expr, .. }
        | Expr::Nested(expr)
        | Expr::Cast { expr, .. }
        | Expr::IsNull(expr)
        | Expr::IsNotNull(expr)
        | Expr::IsTrue(expr)
        | Expr::IsNotTrue(expr)
        | Expr::IsFalse(expr)
        | Expr::IsNotFalse(expr)
        | Expr::IsUnknown(expr)
        | Expr::IsNotUnknown(expr) => vec![expr],
        Expr::InList { expr, list, .. } => std::iter::once(expr.as_ref()).chain(list).collect(),
        Expr::Between {
            expr, low, high, ..
        } => vec![expr, low, high],
        Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } => operand
            .iter()
            .map(|operand| operand.as_ref())
            .chain(
                conditions
                    .iter()
                    .flat_map(|when| [&when.condition, &when.result]),
            )
            .chain(else_result.iter().map(|otherwise| otherwise.as_ref()))
            .collect(),
        Expr::Function(function) => function_argument_exprs(function),
        _ => return None,
    })
}

/// A call's argument expressions (`*` has none).
fn function_argument_exprs(function: &ast::Function) -> Vec<&Expr> {
    let FunctionArguments::List(list) = &function.args else {
        return Vec::new();
    };
    list.args
        .iter()
        .filter_map(|argument| match argument {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(expr)) => Some(expr),
            _ => None,
        })
        .collect()
}

/// Whether an expression calls a window function (not counting subqueries'). Expressions the
/// rewrite does not descend into are judged by their text, so that a window function there is
/// refused rather than silently planned elsewhere.
pub(crate) fn contains_window(expr: &Expr) -> bool {
    if is_window_call(expr) {
        return true;
    }
    match children(expr) {
        Some(children) => children.into_iter().any(contains_window),
        None => rendered_has_over(&expr.to_string()),
    }
}

/// A conservative look for the keyword OVER in rendered SQL, outside quotes and subqueries.
fn rendered_has_over(text: &str) -> bool {
    let text = super::without_subqueries(&text.to_lowercase());
    let mut quoted = false;
    let bytes = text.as_bytes();
    for (at, byte) in bytes.iter().enumerate() {
        if *byte == b'\'' {
            quoted = !quoted;
        }
        // Bytes, not `str` slices: `at` may fall inside a multi-byte character.
        if quoted || !bytes[at..].starts_with(b"over") {
            continue;
        }
        let before = at.checked_sub(1).map(|before| bytes[before]);
        let after = bytes.get(at + 4).copied();
        let boundary = |byte: Option<u8>| {
            byte.is_none_or(|byte| !byte.is_ascii_alphanumeric() && byte != b'_' && byte != b'"')
        };
        if boundary(before) && boundary(after) {
            return true;
        }
    }
    false
}

/// Whether a SELECT calls window functions in its select list or ORDER BY (its own, not its
/// subqueries').
pub(crate) fn uses_windows(select: &ast::Select, query: &ast::Query) -> bool {
    let items = select.projection.iter().any(|item| match item {
        SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } => {
            contains_window(expr)
        }
        _ => false,
    });
    items
        || order_by_items(query)
            .iter()
            .any(|item| contains_window(&item.expr))
}

fn order_by_items(query: &ast::Query) -> &[ast::OrderByExpr] {
    match &query.order_by {
        Some(ast::OrderBy {
            kind: ast::OrderByKind::Expressions(items),
            ..
        }) => items,
        _ => &[],
    }
}

/// Where window functions are not allowed, PostgreSQL's 42P20.
pub(crate) fn refuse_in(select: &ast::Select) -> Result<(), SqlError> {
    if select.selection.as_ref().is_some_and(contains_window) {
        return Err(window_error("window functions are not allowed in WHERE"));
    }
    if let ast::GroupByExpr::Expressions(exprs, _) = &select.group_by {
        if exprs.iter().any(contains_window) {
            return Err(window_error("window functions are not allowed in GROUP BY"));
        }
    }
    if select.having.as_ref().is_some_and(contains_window) {
        return Err(window_error("window functions are not allowed in HAVING"));
    }
    if select.qualify.is_some() {
        return Err(SqlError::unsupported("QUALIFY"));
    }
    Ok(())
}

// ----- the rewrite -----

/// The window spec of a call, named windows resolved: PARTITION BY, ORDER BY, frame.
struct Spec {
    partition_by: Vec<Expr>,
    order_by: Vec<ast::OrderByExpr>,
    frame: Option<ast::WindowFrame>,
}

/// A window call found by the rewrite, its operands as input positions.
struct FoundCall {
    /// The call as written, to merge repeated calls into one column.
    text: String,
    name: String,
    star: bool,
    arguments: Vec<usize>,
    partition_by: Vec<usize>,
    order_by: Vec<WindowOrder>,
    frame: Frame,
}

/// The input query's select list being built, and the window calls found.
struct Rewrite<'s> {
    named: &'s [ast::NamedWindowDefinition],
    /// The input's select items, each one column (wildcards: several, see `width`).
    items: Vec<SelectItem>,
    /// Expressions already lifted into the input, with their input position.
    lifted: Vec<(Expr, usize)>,
    width: usize,
    calls: Vec<FoundCall>,
}

fn input_name(position: usize) -> String {
    format!("__window_input_{position}")
}

fn result_name(call: usize) -> String {
    format!("__window_result_{call}")
}

fn reference(name: String) -> Expr {
    Expr::Identifier(ast::Ident::with_quote('"', name))
}

impl Rewrite<'_> {
    /// The input column holding `expr`'s value (added on first use).
    fn lift(&mut self, expr: &Expr) -> usize {
        if let Some((_, position)) = self.lifted.iter().find(|(known, _)| known == expr) {
            return *position;
        }
        let position = self.width;
        self.items.push(SelectItem::ExprWithAlias {
            expr: expr.clone(),
            alias: ast::Ident::with_quote('"', input_name(position)),
        });
        self.lifted.push((expr.clone(), position));
        self.width += 1;
        position
    }

    /// `expr` over the input's columns and the window results: the largest parts without a
    /// window function become input columns, each window call a result column.
    fn rewrite(&mut self, expr: &Expr) -> Result<Expr, SqlError> {
        if !contains_window(expr) {
            // Literals and parameters stay where they are (their types come from context).
            if matches!(expr, Expr::Value(_)) {
                return Ok(expr.clone());
            }
            return Ok(reference(input_name(self.lift(expr))));
        }
        let rewrite = |this: &mut Self, expr: &Expr| this.rewrite(expr).map(Box::new);
        Ok(match expr {
            Expr::Function(function) if function.over.is_some() => {
                reference(result_name(self.call(function)?))
            }
            Expr::Function(function) => {
                let name = function_name(function);
                if aggregate_function(&name, false).is_some() || name == "count" {
                    return Err(SqlError::new(
                        sqlstate::GROUPING_ERROR,
                        "aggregate function calls cannot contain window function calls",
                    ));
                }
                let mut function = function.clone();
                if let FunctionArguments::List(list) = &mut function.args {
                    for argument in &mut list.args {
                        if let FunctionArg::Unnamed(FunctionArgExpr::Expr(expr)) = argument {
                            *expr = self.rewrite(expr)?;
                        }
                    }
                }
                Expr::Function(function)
            }
            Expr::BinaryOp { left, op, right } => Expr::BinaryOp {
                left: rewrite(self, left)?,
                op: op.clone(),
                right: rewrite(self, right)?,
            },
            Expr::UnaryOp { op, expr } => Expr::UnaryOp {
                op: *op,
                expr: rewrite(self, expr)?,
            },
            Expr::Nested(inner) => Expr::Nested(rewrite(self, inner)?),
            Expr::Cast {
                kind,
                expr,
                data_type,
                format,
            } => Expr::Cast {
                kind: kind.clone(),
                expr: rewrite(self, expr)?,
                data_type: data_type.clone(),
                format: format.clone(),
            },
            Expr::IsNull(inner) => Expr::IsNull(rewrite(self, inner)?),
            Expr::IsNotNull(inner) => Expr::IsNotNull(rewrite(self, inner)?),
            Expr::IsTrue(inner) => Expr::IsTrue(rewrite(self, inner)?),
            Expr::IsNotTrue(inner) => Expr::IsNotTrue(rewrite(self, inner)?),
            Expr::IsFalse(inner) => Expr::IsFalse(rewrite(self, inner)?),
            Expr::IsNotFalse(inner) => Expr::IsNotFalse(rewrite(self, inner)?),
            Expr::IsUnknown(inner) => Expr::IsUnknown(rewrite(self, inner)?),
            Expr::IsNotUnknown(inner) => Expr::IsNotUnknown(rewrite(self, inner)?),
            Expr::IsDistinctFrom(left, right) => {
                Expr::IsDistinctFrom(rewrite(self, left)?, rewrite(self, right)?)
            }
            Expr::IsNotDistinctFrom(left, right) => {
                Expr::IsNotDistinctFrom(rewrite(self, left)?, rewrite(self, right)?)
            }
            Expr::InList {
                expr,
                list,
                negated,
            } => Expr::InList {
                expr: rewrite(self, expr)?,
                list: list
                    .iter()
                    .map(|item| self.rewrite(item))
                    .collect::<Result<_, _>>()?,
                negated: *negated,
            },
            Expr::Between {
                expr,
                negated,
                low,
                high,
            } => Expr::Between {
                expr: rewrite(self, expr)?,
                negated: *negated,
                low: rewrite(self, low)?,
                high: rewrite(self, high)?,
            },
            Expr::Case {
                case_token,
                end_token,
                operand,
                conditions,
                else_result,
            } => Expr::Case {
                case_token: case_token.clone(),
                end_token: end_token.clone(),
                operand: match operand {
                    Some(operand) => Some(rewrite(self, operand)?),
                    None => None,
                },
                conditions: conditions
                    .iter()
                    .map(|when| {
                        Ok(ast::CaseWhen {
                            condition: self.rewrite(&when.condition)?,
                            result: self.rewrite(&when.result)?,
                        })
                    })
                    .collect::<Result<_, SqlError>>()?,
                else_result: match else_result {
                    Some(otherwise) => Some(rewrite(self, otherwise)?),
                    None => None,
                },
            },
            other => {
                return Err(SqlError::unsupported(format!(
                    "window functions inside {other}"
                )))
            }
        })
    }

    /// A window call: its operands lifted, its window resolved; the index of its result.
    fn call(&mut self, function: &ast::Function) -> Result<usize, SqlError> {
        let text = function.to_string();
        if let Some(known) = self.calls.iter().position(|call| call.text == text) {
            return Ok(known);
        }
        let name = function_name(function);
        if function.filter.is_some() {
            return Err(SqlError::unsupported("FILTER in window functions"));
        }
        if function.null_treatment.is_some() {
            return Err(SqlError::unsupported("IGNORE NULLS and RESPECT NULLS"));
        }
        if !function.within_group.is_empty() {
            return Err(SqlError::unsupported("WITHIN GROUP"));
        }
        let mut star = false;
        let mut argument_exprs: Vec<&Expr> = Vec::new();
        match &function.args {
            FunctionArguments::None => {}
            FunctionArguments::Subquery(_) => {
                return Err(SqlError::unsupported(
                    "a subquery as a function's arguments",
                ))
            }
            FunctionArguments::List(list) => {
                if list.duplicate_treatment == Some(ast::DuplicateTreatment::Distinct) {
                    return Err(SqlError::new(
                        sqlstate::FEATURE_NOT_SUPPORTED,
                        "DISTINCT is not implemented for window functions",
                    ));
                }
                if !list.clauses.is_empty() {
                    return Err(SqlError::unsupported("ORDER BY in function arguments"));
                }
                for argument in &list.args {
                    match argument {
                        FunctionArg::Unnamed(FunctionArgExpr::Expr(expr)) => {
                            argument_exprs.push(expr)
                        }
                        FunctionArg::Unnamed(FunctionArgExpr::Wildcard) => star = true,
                        _ => {
                            return Err(SqlError::unsupported(
                                "named or qualified function arguments",
                            ))
                        }
                    }
                }
            }
        }
        let spec = self.spec(function.over.as_ref().expect("a window call"))?;
        let nested = argument_exprs.iter().any(|expr| contains_window(expr));
        if nested {
            return Err(window_error("window function calls cannot be nested"));
        }
        if spec.partition_by.iter().any(contains_window)
            || spec.order_by.iter().any(|item| contains_window(&item.expr))
        {
            return Err(window_error(
                "window functions are not allowed in window definitions",
            ));
        }
        let arguments = argument_exprs
            .into_iter()
            .map(|expr| self.lift(expr))
            .collect();
        let partition_by = spec
            .partition_by
            .iter()
            .map(|expr| self.lift(expr))
            .collect();
        let mut order_by = Vec::new();
        for item in &spec.order_by {
            let descending = match &item.options.sort {
                Some(ast::OrderBySort::Desc) => true,
                Some(ast::OrderBySort::Asc) | None => false,
                Some(ast::OrderBySort::Using(_)) => {
                    return Err(SqlError::unsupported("ORDER BY … USING in a window"))
                }
            };
            order_by.push(WindowOrder {
                position: self.lift(&item.expr),
                descending,
                nulls_first: item.options.nulls_first.unwrap_or(descending),
            });
        }
        let frame = match &spec.frame {
            None => Frame::DEFAULT,
            Some(frame) => frame_of(frame)?,
        };
        self.calls.push(FoundCall {
            text,
            name,
            star,
            arguments,
            partition_by,
            order_by,
            frame,
        });
        Ok(self.calls.len() - 1)
    }

    /// A call's window: inline, named (`OVER w`), or an inline one copying a named one
    /// (`OVER (w ORDER BY …)`), with PostgreSQL's rules for what a copy may add.
    fn spec(&self, over: &WindowType) -> Result<Spec, SqlError> {
        match over {
            WindowType::NamedWindow(name) => self.named_spec(&ident_name(name), 0),
            WindowType::WindowSpec(spec) => self.extend_spec(spec, 0),
        }
    }

    fn extend_spec(&self, spec: &ast::WindowSpec, depth: usize) -> Result<Spec, SqlError> {
        let Some(base_name) = &spec.window_name else {
            return Ok(Spec {
                partition_by: spec.partition_by.clone(),
                order_by: spec.order_by.clone(),
                frame: spec.window_frame.clone(),
            });
        };
        let base_name = ident_name(base_name);
        let base = self.named_spec(&base_name, depth + 1)?;
        if !spec.partition_by.is_empty() {
            return Err(window_error(format!(
                "cannot override PARTITION BY clause of window \"{base_name}\""
            )));
        }
        if !spec.order_by.is_empty() && !base.order_by.is_empty() {
            return Err(window_error(format!(
                "cannot override ORDER BY clause of window \"{base_name}\""
            )));
        }
        if base.frame.is_some() {
            return Err(window_error(format!(
                "cannot copy window \"{base_name}\" because it has a frame clause"
            ))
            .with_hint("Omit the parentheses in this OVER clause."));
        }
        Ok(Spec {
            partition_by: base.partition_by,
            order_by: if spec.order_by.is_empty() {
                base.order_by
            } else {
                spec.order_by.clone()
            },
            frame: spec.window_frame.clone(),
        })
    }

    fn named_spec(&self, name: &str, depth: usize) -> Result<Spec, SqlError> {
        if depth > WINDOW_REFERENCES_MAX {
            return Err(window_error(format!(
                "window \"{name}\" refers to windows too deeply"
            )));
        }
        let found = self
            .named
            .iter()
            .find(|definition| ident_name(&definition.0) == name)
            .ok_or_else(|| {
                SqlError::new(
                    sqlstate::UNDEFINED_OBJECT,
                    format!("window \"{name}\" does not exist"),
                )
            })?;
        match &found.1 {
            ast::NamedWindowExpr::WindowSpec(spec) => self.extend_spec(spec, depth),
            ast::NamedWindowExpr::NamedWindow(other) => {
                self.named_spec(&ident_name(other), depth + 1)
            }
        }
    }
}

fn function_name(function: &ast::Function) -> String {
    function
        .name
        .0
        .last()
        .and_then(|part| part.as_ident())
        .map(ident_name)
        .unwrap_or_default()
}

/// A frame clause, checked as PostgreSQL checks it.
fn frame_of(frame: &ast::WindowFrame) -> Result<Frame, SqlError> {
    let rows = match frame.units {
        WindowFrameUnits::Rows => true,
        WindowFrameUnits::Range => false,
        WindowFrameUnits::Groups => {
            return Err(SqlError::unsupported("GROUPS frames in window functions"))
        }
    };
    let end_bound = frame
        .end_bound
        .clone()
        .unwrap_or(WindowFrameBound::CurrentRow);
    let start = bound_of(&frame.start_bound, rows, "starting")?;
    let end = bound_of(&end_bound, rows, "ending")?;
    if start == FrameBound::UnboundedFollowing {
        return Err(window_error("frame start cannot be UNBOUNDED FOLLOWING"));
    }
    if end == FrameBound::UnboundedPreceding {
        return Err(window_error("frame end cannot be UNBOUNDED PRECEDING"));
    }
    match (start, end) {
        (FrameBound::CurrentRow, FrameBound::Preceding(_)) => Err(window_error(
            "frame starting from current row cannot have preceding rows",
        )),
        (FrameBound::Following(_), FrameBound::Preceding(_) | FrameBound::CurrentRow) => Err(
            window_error("frame starting from following row cannot have preceding rows"),
        ),
        _ => Ok(Frame { rows, start, end }),
    }
}

fn bound_of(bound: &WindowFrameBound, rows: bool, which: &str) -> Result<FrameBound, SqlError> {
    let offset = |expr: &Expr| -> Result<u64, SqlError> {
        if !rows {
            return Err(
                SqlError::unsupported("RANGE with offset PRECEDING/FOLLOWING")
                    .with_hint("use ROWS, or UNBOUNDED and CURRENT ROW"),
            );
        }
        offset_value(expr, which)
    };
    Ok(match bound {
        WindowFrameBound::CurrentRow => FrameBound::CurrentRow,
        WindowFrameBound::Preceding(None) => FrameBound::UnboundedPreceding,
        WindowFrameBound::Following(None) => FrameBound::UnboundedFollowing,
        WindowFrameBound::Preceding(Some(expr)) => FrameBound::Preceding(offset(expr)?),
        WindowFrameBound::Following(Some(expr)) => FrameBound::Following(offset(expr)?),
    })
}

/// A ROWS offset: a constant (no columns), not NULL, not negative.
fn offset_value(expr: &Expr, which: &str) -> Result<u64, SqlError> {
    let scope = Scope::default();
    let mut parameters = crate::expr::Parameters::default();
    let scalar = crate::expr::Compiler {
        scope: &scope,
        parameters: &mut parameters,
        mode: crate::expr::Mode::Row,
        catalog: None,
    }
    .compile(expr, Some(DataType::BigInt))
    .map_err(|error| {
        if error.code == sqlstate::UNDEFINED_COLUMN {
            SqlError::new(
                sqlstate::INVALID_DEFINITION,
                "argument of ROWS must not contain variables",
            )
        } else {
            error
        }
    })?;
    match cast_value(&scalar.evaluate(&[])?, DataType::BigInt)? {
        Value::Null => Err(SqlError::new(
            "22004",
            format!("frame {which} offset must not be null"),
        )),
        Value::BigInt(offset) if offset < 0 => Err(SqlError::new(
            "22013",
            format!("frame {which} offset must not be negative"),
        )),
        Value::BigInt(offset) => Ok(offset as u64),
        other => Err(SqlError::new(
            sqlstate::DATATYPE_MISMATCH,
            format!("argument of ROWS must be type bigint, not {other}"),
        )),
    }
}

/// The signature error PostgreSQL gives for a call no function matches.
fn no_function(name: &str, types: &[DataType]) -> SqlError {
    SqlError::new(
        sqlstate::UNDEFINED_FUNCTION,
        format!(
            "function {name}({}) does not exist",
            types
                .iter()
                .map(|data_type| data_type.name())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    )
    .with_hint(
        "No function matches the given name and argument types. You might need to add explicit type casts.",
    )
}

fn is_integer(data_type: DataType) -> bool {
    matches!(data_type.widened(), DataType::Int | DataType::BigInt)
}

fn is_numeric(data_type: DataType) -> bool {
    matches!(
        data_type.widened(),
        DataType::Int | DataType::BigInt | DataType::Double
    )
}

impl FoundCall {
    /// The call, typed against the input's columns.
    fn bind(&self, types: &[DataType]) -> Result<WindowCall, SqlError> {
        let argument_types: Vec<DataType> = self
            .arguments
            .iter()
            .map(|position| types[*position])
            .collect();
        let no_function = || no_function(&self.name, &argument_types);
        let ranking = |function: WindowFunction, data_type: DataType| {
            if argument_types.is_empty() && !self.star {
                Ok((function, data_type))
            } else {
                Err(no_function())
            }
        };
        let (function, data_type) = match self.name.as_str() {
            "row_number" => ranking(WindowFunction::RowNumber, DataType::BigInt)?,
            "rank" => ranking(WindowFunction::Rank, DataType::BigInt)?,
            "dense_rank" => ranking(WindowFunction::DenseRank, DataType::BigInt)?,
            "percent_rank" => ranking(WindowFunction::PercentRank, DataType::Double)?,
            "cume_dist" => ranking(WindowFunction::CumeDist, DataType::Double)?,
            "ntile" => match argument_types.as_slice() {
                [count] if is_integer(*count) => (WindowFunction::Ntile, DataType::Int),
                _ => return Err(no_function()),
            },
            "lag" | "lead" => {
                let function = if self.name == "lag" {
                    WindowFunction::Lag
                } else {
                    WindowFunction::Lead
                };
                match argument_types.as_slice() {
                    [value] => (function, *value),
                    [value, offset] if is_integer(*offset) => (function, *value),
                    [value, offset, default] if is_integer(*offset) => {
                        let same = std::mem::discriminant(value) == std::mem::discriminant(default);
                        let data_type = if same {
                            *value
                        } else if is_numeric(*value) && is_numeric(*default) {
                            crate::expr::numeric_result(*value, *default)
                        } else {
                            return Err(no_function());
                        };
                        (function, data_type)
                    }
                    _ => return Err(no_function()),
                }
            }
            "first_value" | "last_value" => match argument_types.as_slice() {
                [value] if self.name == "first_value" => (WindowFunction::FirstValue, *value),
                [value] => (WindowFunction::LastValue, *value),
                _ => return Err(no_function()),
            },
            "nth_value" => match argument_types.as_slice() {
                [value, index] if is_integer(*index) => (WindowFunction::NthValue, *value),
                _ => return Err(no_function()),
            },
            name => {
                let Some(aggregate) = aggregate_function(name, self.star) else {
                    return Err(SqlError::new(
                        "42809",
                        format!(
                            "OVER specified, but {name} is not a window function nor an aggregate function"
                        ),
                    ));
                };
                let argument = match (self.star, argument_types.as_slice()) {
                    (true, []) => None,
                    (false, [argument]) => Some(*argument),
                    _ => return Err(no_function()),
                };
                // Refuses sum/avg of what they cannot add (42883), as grouping does.
                crate::merge::initial_partial(aggregate, argument)?;
                (
                    WindowFunction::Aggregate(aggregate),
                    aggregate_result_type(aggregate, argument),
                )
            }
        };
        Ok(WindowCall {
            function,
            arguments: self.arguments.clone(),
            partition_by: self.partition_by.clone(),
            order_by: self.order_by.clone(),
            frame: self.frame,
            argument_types,
            data_type,
        })
    }
}

impl Planner<'_, '_> {
    /// A SELECT with window functions (see the module documentation): the input query, the
    /// windows over its rows, then the select list, DISTINCT, ORDER BY and LIMIT over them.
    pub(super) fn window_query(
        &mut self,
        select: &ast::Select,
        query: &ast::Query,
    ) -> Result<Execution, SqlError> {
        let mut names: Vec<String> = Vec::new();
        for definition in &select.named_window {
            let name = ident_name(&definition.0);
            if names.contains(&name) {
                return Err(window_error(format!(
                    "window \"{name}\" is already defined"
                )));
            }
            names.push(name);
        }
        let mut rewrite = Rewrite {
            named: &select.named_window,
            items: Vec::new(),
            lifted: Vec::new(),
            width: 0,
            calls: Vec::new(),
        };
        let mut projection: Vec<SelectItem> = Vec::new();
        for item in &select.projection {
            match item {
                SelectItem::UnnamedExpr(expr) => projection.push(SelectItem::ExprWithAlias {
                    expr: rewrite.rewrite(expr)?,
                    alias: ast::Ident::with_quote('"', column_name(expr)),
                }),
                SelectItem::ExprWithAlias { expr, alias } => {
                    projection.push(SelectItem::ExprWithAlias {
                        expr: rewrite.rewrite(expr)?,
                        alias: alias.clone(),
                    })
                }
                wildcard => {
                    for name in self.wildcard_names(select, wildcard)? {
                        projection.push(SelectItem::ExprWithAlias {
                            expr: reference(input_name(rewrite.width)),
                            alias: ast::Ident::with_quote('"', name),
                        });
                        rewrite.width += 1;
                    }
                    rewrite.items.push(wildcard.clone());
                }
            }
        }
        let output_names: Vec<String> = projection
            .iter()
            .filter_map(|item| match item {
                SelectItem::ExprWithAlias { alias, .. } => Some(ident_name(alias)),
                _ => None,
            })
            .collect();
        let mut order_by = order_by_items(query).to_vec();
        for item in &mut order_by {
            // A result column's name or position is the output query's business.
            let output_reference = match &item.expr {
                Expr::Identifier(ident) => output_names.contains(&ident_name(ident)),
                Expr::Value(_) => true,
                _ => false,
            };
            if !output_reference {
                item.expr = rewrite.rewrite(&item.expr)?;
            }
        }
        if rewrite.items.is_empty() {
            // `SELECT FROM t` has the rows of t and no columns; one constant keeps the rows.
            rewrite.lift(&Expr::value(ast::Value::Number("1".into(), false)));
        }
        let input = self.window_input(select, rewrite.items.clone())?;
        let input_columns = execution_columns(&input);
        if input_columns.len() != rewrite.width {
            return Err(SqlError::new(
                sqlstate::INTERNAL_ERROR,
                format!(
                    "the input of the windows answers {} columns, not {}",
                    input_columns.len(),
                    rewrite.width
                ),
            ));
        }
        let types: Vec<DataType> = input_columns
            .iter()
            .map(|column| column.data_type)
            .collect();
        let calls = rewrite
            .calls
            .iter()
            .map(|call| call.bind(&types))
            .collect::<Result<Vec<_>, _>>()?;
        let mut columns: Vec<OutputColumn> = input_columns
            .iter()
            .enumerate()
            .map(|(position, column)| OutputColumn::new(&input_name(position), column.data_type))
            .collect();
        columns.extend(
            calls
                .iter()
                .enumerate()
                .map(|(index, call)| OutputColumn::new(&result_name(index), call.data_type)),
        );
        let scope = Scope::new(
            columns
                .iter()
                .map(|column| ScopeColumn {
                    table: None,
                    name: column.name.clone(),
                    data_type: column.data_type,
                    virtual_catalog: false,
                    hidden: false,
                })
                .collect(),
        );
        let windows = Execution {
            operations: input.operations.clone(),
            routing: input.routing.clone(),
            finish: Finish::Window(Box::new(WindowPlan {
                input,
                calls,
                columns,
            })),
            created_table: None,
            notices: Vec::new(),
        };
        let mut output_select = select.clone();
        output_select.projection = projection;
        output_select.from = Vec::new();
        output_select.selection = None;
        output_select.group_by = ast::GroupByExpr::Expressions(Vec::new(), Vec::new());
        output_select.having = None;
        output_select.named_window = Vec::new();
        let mut output_query = query.clone();
        if let Some(ast::OrderBy {
            kind: ast::OrderByKind::Expressions(items),
            ..
        }) = &mut output_query.order_by
        {
            *items = order_by;
        }
        let (operations, routing) = (windows.operations.clone(), windows.routing.clone());
        let plan = self.select_list(
            &output_select,
            &output_query,
            &scope,
            Source::Derived(Box::new(windows)),
            None,
        )?;
        Ok(with_subquery_tables(Execution {
            operations,
            routing,
            finish: Finish::Query(plan),
            created_table: None,
            notices: Vec::new(),
        }))
    }

    /// The input query: FROM, WHERE, GROUP BY and HAVING as written, with `items` as its
    /// select list.
    fn window_input(
        &mut self,
        select: &ast::Select,
        items: Vec<SelectItem>,
    ) -> Result<Execution, SqlError> {
        let mut input = select.clone();
        input.projection = items;
        input.distinct = None;
        input.named_window = Vec::new();
        self.query(&select_query(input))
    }

    /// The names of the columns a `*` or `t.*` of this SELECT stands for.
    fn wildcard_names(
        &mut self,
        select: &ast::Select,
        wildcard: &SelectItem,
    ) -> Result<Vec<String>, SqlError> {
        let mut probe = select.clone();
        probe.projection = vec![wildcard.clone()];
        probe.distinct = None;
        probe.named_window = Vec::new();
        probe.selection = None;
        probe.group_by = ast::GroupByExpr::Expressions(Vec::new(), Vec::new());
        probe.having = None;
        let execution = self.query(&select_query(probe))?;
        Ok(execution_columns(&execution)
            .into_iter()
            .map(|column| column.name)
            .collect())
    }
}

/// A query of just this SELECT.
fn select_query(select: ast::Select) -> ast::Query {
    ast::Query {
        with: None,
        body: Box::new(SetExpr::Select(Box::new(select))),
        order_by: None,
        limit_clause: None,
        fetch: None,
        locks: Vec::new(),
        for_clause: None,
        settings: None,
        format_clause: None,
        pipe_operators: Vec::new(),
    }
}

// ----- evaluation at the gateway -----

impl WindowPlan {
    /// EXPLAIN's line for the windows step.
    pub fn describe(&self) -> String {
        format!(
            "Gateway: compute {} window functions over the rows of the query without them",
            self.calls.len()
        )
    }

    /// The input's rows, each with the window results appended, in the order of the last
    /// window's sort.
    pub(crate) fn finish(
        &self,
        results: Vec<Vec<OperationResult>>,
    ) -> Result<StatementResult, SqlError> {
        let StatementResult::Rows { mut rows, .. } = self.input.finish(results)? else {
            return Err(SqlError::new(
                sqlstate::INTERNAL_ERROR,
                "the input of window functions answered no rows",
            ));
        };
        let mut order: Vec<usize> = (0..rows.len()).collect();
        let mut results: Vec<Vec<Value>> = Vec::with_capacity(self.calls.len());
        for call in &self.calls {
            let (values, sorted) = call.evaluate(&rows)?;
            results.push(values);
            order = sorted;
        }
        for (index, row) in rows.iter_mut().enumerate() {
            for values in &mut results {
                row.push(std::mem::replace(&mut values[index], Value::Null));
            }
            assert_eq!(
                row.len(),
                self.columns.len(),
                "every window adds one column"
            );
        }
        let mut slots: Vec<Option<Vec<Value>>> = rows.into_iter().map(Some).collect();
        let rows: Vec<Vec<Value>> = order
            .into_iter()
            .map(|index| slots[index].take().expect("a permutation"))
            .collect();
        Ok(StatementResult::Rows {
            columns: self.columns.clone(),
            tag: format!("SELECT {}", rows.len()),
            rows,
        })
    }
}

/// SQL ordering of two values for one key: NULLs first or last, descending or not.
fn compare_key(left: &Value, right: &Value, descending: bool, nulls_first: bool) -> Ordering {
    match (left.is_null(), right.is_null()) {
        (true, true) => Ordering::Equal,
        (true, false) if nulls_first => Ordering::Less,
        (true, false) => Ordering::Greater,
        (false, true) if nulls_first => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => {
            let ordering = compare_values(left, right)
                .ok()
                .flatten()
                .unwrap_or_else(|| left.cmp(right));
            if descending {
                ordering.reverse()
            } else {
                ordering
            }
        }
    }
}

/// Bounds the work a frame aggregate may do (rows × frame rows recomputed), so a quadratic
/// frame over a large partition fails with 54000 instead of stalling the gateway.
const FRAME_WORK_MAX: u64 = 200_000_000;

impl WindowCall {
    fn same_partition(&self, left: &[Value], right: &[Value]) -> bool {
        self.partition_by
            .iter()
            .all(|at| compare_key(&left[*at], &right[*at], false, false) == Ordering::Equal)
    }

    fn peers(&self, left: &[Value], right: &[Value]) -> bool {
        self.order_by.iter().all(|key| {
            compare_key(
                &left[key.position],
                &right[key.position],
                key.descending,
                key.nulls_first,
            ) == Ordering::Equal
        })
    }

    /// This call's value for every row (by the row's index), and the rows' order sorted by
    /// partition then window order.
    fn evaluate(&self, rows: &[Vec<Value>]) -> Result<(Vec<Value>, Vec<usize>), SqlError> {
        let mut order: Vec<usize> = (0..rows.len()).collect();
        order.sort_by(|left, right| {
            let (left, right) = (&rows[*left], &rows[*right]);
            self.partition_by
                .iter()
                .map(|at| compare_key(&left[*at], &right[*at], false, false))
                .chain(self.order_by.iter().map(|key| {
                    compare_key(
                        &left[key.position],
                        &right[key.position],
                        key.descending,
                        key.nulls_first,
                    )
                }))
                .find(|ordering| ordering.is_ne())
                .unwrap_or(Ordering::Equal)
        });
        let mut values = vec![Value::Null; rows.len()];
        let mut work: u64 = 0;
        let mut start = 0;
        while start < order.len() {
            let mut end = start + 1;
            while end < order.len() && self.same_partition(&rows[order[start]], &rows[order[end]]) {
                end += 1;
            }
            let partition: Vec<&[Value]> = order[start..end]
                .iter()
                .map(|index| rows[*index].as_slice())
                .collect();
            let partition_values = self.partition(&partition, &mut work)?;
            for (offset, value) in partition_values.into_iter().enumerate() {
                values[order[start + offset]] = cast_value(&value, self.data_type)?;
            }
            start = end;
        }
        Ok((values, order))
    }

    /// The peer group `[first, end)` of every row of a sorted partition.
    fn peer_groups(&self, partition: &[&[Value]]) -> Vec<(usize, usize)> {
        let mut groups = vec![(0, 0); partition.len()];
        let mut first = 0;
        while first < partition.len() {
            let mut end = first + 1;
            while end < partition.len() && self.peers(partition[first], partition[end]) {
                end += 1;
            }
            for group in &mut groups[first..end] {
                *group = (first, end);
            }
            first = end;
        }
        groups
    }

    /// The frame `[start, end)` of row `at` of a partition of `count` rows.
    fn frame(&self, at: usize, peers: (usize, usize), count: usize) -> (usize, usize) {
        let start = match self.frame.start {
            FrameBound::UnboundedPreceding => 0,
            FrameBound::Preceding(offset) if self.frame.rows => {
                at.saturating_sub(usize::try_from(offset).unwrap_or(usize::MAX))
            }
            FrameBound::Following(offset) if self.frame.rows => at
                .saturating_add(usize::try_from(offset).unwrap_or(usize::MAX))
                .min(count),
            FrameBound::CurrentRow if self.frame.rows => at,
            FrameBound::CurrentRow => peers.0,
            // Refused at planning (RANGE offsets) or impossible (UNBOUNDED FOLLOWING start).
            FrameBound::Preceding(_) | FrameBound::Following(_) => peers.0,
            FrameBound::UnboundedFollowing => count,
        };
        let end = match self.frame.end {
            FrameBound::UnboundedFollowing => count,
            FrameBound::Preceding(offset) if self.frame.rows => {
                let offset = usize::try_from(offset).unwrap_or(usize::MAX);
                if at >= offset {
                    at - offset + 1
                } else {
                    0
                }
            }
            FrameBound::Following(offset) if self.frame.rows => at
                .saturating_add(usize::try_from(offset).unwrap_or(usize::MAX))
                .saturating_add(1)
                .min(count),
            FrameBound::CurrentRow if self.frame.rows => at + 1,
            FrameBound::CurrentRow => peers.1,
            FrameBound::Preceding(_) | FrameBound::Following(_) => peers.1,
            FrameBound::UnboundedPreceding => 0,
        };
        (start, end.max(start))
    }

    /// The values of one sorted partition.
    fn partition(&self, partition: &[&[Value]], work: &mut u64) -> Result<Vec<Value>, SqlError> {
        let count = partition.len();
        let groups = self.peer_groups(partition);
        let argument = |at: usize, index: usize| partition[at][self.arguments[index]].clone();
        let mut values = Vec::with_capacity(count);
        match self.function {
            WindowFunction::RowNumber => {
                values.extend((1..=count).map(|number| Value::BigInt(number as i64)))
            }
            WindowFunction::Rank => values.extend(
                groups
                    .iter()
                    .map(|(first, _)| Value::BigInt(*first as i64 + 1)),
            ),
            WindowFunction::DenseRank => {
                let mut rank = 0i64;
                for (at, (first, _)) in groups.iter().enumerate() {
                    if *first == at {
                        rank += 1;
                    }
                    values.push(Value::BigInt(rank));
                }
            }
            WindowFunction::PercentRank => values.extend(groups.iter().map(|(first, _)| {
                Value::Double(if count > 1 {
                    *first as f64 / (count - 1) as f64
                } else {
                    0.0
                })
            })),
            WindowFunction::CumeDist => values.extend(
                groups
                    .iter()
                    .map(|(_, end)| Value::Double(*end as f64 / count as f64)),
            ),
            WindowFunction::Ntile => values.extend(ntile(&argument(0, 0), count)?),
            WindowFunction::Lag | WindowFunction::Lead => {
                for at in 0..count {
                    let offset = match self.arguments.get(1) {
                        Some(_) => match integer(&argument(at, 1)) {
                            Some(offset) => offset,
                            None => {
                                values.push(Value::Null);
                                continue;
                            }
                        },
                        None => 1,
                    };
                    let target = if self.function == WindowFunction::Lag {
                        (at as i64).checked_sub(offset)
                    } else {
                        (at as i64).checked_add(offset)
                    };
                    let value = match target {
                        Some(target) if (0..count as i64).contains(&target) => {
                            argument(target as usize, 0)
                        }
                        _ if self.arguments.len() > 2 => argument(at, 2),
                        _ => Value::Null,
                    };
                    values.push(value);
                }
            }
            WindowFunction::FirstValue | WindowFunction::LastValue | WindowFunction::NthValue => {
                for (at, peers) in groups.iter().enumerate() {
                    let (start, end) = self.frame(at, *peers, count);
                    let chosen = match self.function {
                        WindowFunction::FirstValue => (start < end).then_some(start),
                        WindowFunction::LastValue => (start < end).then(|| end - 1),
                        _ => match integer(&argument(at, 1)) {
                            None => None,
                            Some(index) if index <= 0 => {
                                return Err(SqlError::new(
                                    "22016",
                                    "argument of nth_value must be greater than zero",
                                ))
                            }
                            Some(index) => usize::try_from(index - 1)
                                .ok()
                                .and_then(|index| start.checked_add(index))
                                .filter(|chosen| *chosen < end),
                        },
                    };
                    values.push(chosen.map_or(Value::Null, |chosen| argument(chosen, 0)));
                }
            }
            WindowFunction::Aggregate(function) => {
                self.aggregates(function, partition, &groups, work, &mut values)?
            }
        }
        Ok(values)
    }

    /// An aggregate over each row's frame. Frames that only grow (a fixed start, as the
    /// default frame and `UNBOUNDED PRECEDING` ones) are folded incrementally; others are
    /// folded afresh per row, within `FRAME_WORK_MAX`.
    fn aggregates(
        &self,
        function: AggregateFunction,
        partition: &[&[Value]],
        groups: &[(usize, usize)],
        work: &mut u64,
        values: &mut Vec<Value>,
    ) -> Result<(), SqlError> {
        let argument_type = self.argument_types.first().copied();
        let initial = crate::merge::initial_partial(function, argument_type)?;
        let count = partition.len();
        let mut current: Option<(usize, usize, engine::Partial)> = None;
        for (at, peers) in groups.iter().enumerate() {
            let (start, end) = self.frame(at, *peers, count);
            let (from, mut partial) = match current.take() {
                Some((known_start, known_end, partial))
                    if known_start == start && known_end <= end =>
                {
                    (known_end, partial)
                }
                _ => (start, initial.clone()),
            };
            *work = work.saturating_add((end - from) as u64);
            if *work > FRAME_WORK_MAX {
                return Err(SqlError::new(
                    sqlstate::PROGRAM_LIMIT_EXCEEDED,
                    "window frame aggregates over too many rows",
                )
                .with_hint(
                    "use a frame that starts at UNBOUNDED PRECEDING, or a smaller partition",
                ));
            }
            for row in &partition[from..end] {
                match self.arguments.first() {
                    None => partial.add(&Value::Null),
                    Some(position) => {
                        let value = &row[*position];
                        if !value.is_null() {
                            let value = match argument_type {
                                Some(data_type) => cast_value(value, data_type)?,
                                None => value.clone(),
                            };
                            partial.add(&value);
                        }
                    }
                }
            }
            values.push(crate::merge::finish_partial(&partial)?);
            current = Some((start, end, partial));
        }
        Ok(())
    }
}

fn integer(value: &Value) -> Option<i64> {
    match value {
        Value::Int(value) => Some(i64::from(*value)),
        Value::BigInt(value) => Some(*value),
        _ => None,
    }
}

/// ntile(n) over a partition of `count` rows: n buckets as equal as possible, the first ones
/// one row larger; `n` is the partition's first row's (PostgreSQL evaluates it once).
fn ntile(buckets: &Value, count: usize) -> Result<Vec<Value>, SqlError> {
    let Some(buckets) = integer(buckets) else {
        return Ok(vec![Value::Null; count]);
    };
    if buckets <= 0 {
        return Err(SqlError::new(
            "22014",
            "argument of ntile must be greater than zero",
        ));
    }
    let buckets = usize::try_from(buckets).unwrap_or(usize::MAX);
    let (size, larger) = (count / buckets, count % buckets);
    let mut values = Vec::with_capacity(count);
    let mut bucket = 1usize;
    let mut left_in_bucket = size + usize::from(larger > 0);
    for _ in 0..count {
        if left_in_bucket == 0 {
            bucket += 1;
            left_in_bucket = size + usize::from(bucket <= larger);
        }
        values.push(Value::Int(i32::try_from(bucket).unwrap_or(i32::MAX)));
        left_in_bucket -= 1;
    }
    Ok(values)
}

impl Planner<'_, '_> {
    /// Whether a FROM clause reads the virtual catalog, whose own planning evaluates the
    /// window functions drivers' catalog queries use (`pg_catalog`).
    pub(super) fn is_catalog_from(&self, from: &[ast::TableWithJoins]) -> Result<bool, SqlError> {
        let Some(first) = from.first() else {
            return Ok(false);
        };
        match &first.relation {
            ast::TableFactor::Derived { subquery, .. } => match subquery.body.as_ref() {
                SetExpr::Select(inner) => self.is_catalog_from(&inner.from),
                _ => Ok(false),
            },
            ast::TableFactor::Table { name, .. } if self.cte_index(name).is_some() => Ok(false),
            relation => crate::pg_catalog::is_catalog_relation(relation),
        }
    }
}

#[cfg(test)]
mod rendered_tests {
    #[test]
    fn rendered_over_is_found_by_bytes_whatever_characters_surround_it() {
        assert!(super::rendered_has_over("sum(x) over (partition by é)"));
        // Non-ASCII letters count as boundaries: conservative (a refusal, never a wrong plan).
        assert!(super::rendered_has_over("é€overé"));
        assert!(!super::rendered_has_over("'over' || 'ü'"));
        // Found by the fuzzer: a multi-byte character right before a byte the scan visits.
        assert!(!super::rendered_has_over(":n&\u{fffd}slecn.*spum"));
    }
}
