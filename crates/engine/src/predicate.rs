//! Predicates: an expression tree over one row, evaluated with SQL three-valued logic.
//!
//! `Predicate` is what operations carry (by column name, constants of any type). `bind` checks it
//! against a table and turns it into a `BoundPredicate` (by column position, constants coerced to
//! the column's type), which is what scans evaluate and what the query index analyses.
//!
//! On the wire a predicate is a postfix list of nodes, not a nested tree, so that decoding
//! untrusted bytes never recurses: the decoder refuses trees deeper than `PREDICATE_DEPTH_MAX`.

use crate::error::EngineError;
use crate::schema::TableSchema;
use crate::value::{DataType, Value};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cmp::Ordering;
use std::ops::Bound;

/// Deepest predicate accepted (nesting of AND, OR and NOT).
pub const PREDICATE_DEPTH_MAX: usize = 64;
/// Most nodes (comparisons and connectives) in one predicate.
pub const PREDICATE_NODES_MAX: usize = 4_096;
/// Most constants in one predicate (IN lists included).
pub const PREDICATE_CONSTANTS_MAX: usize = 65_536;
/// Longest LIKE pattern in bytes: matching costs up to text length × pattern length per row.
pub const LIKE_PATTERN_BYTES_MAX: usize = 1_024;

/// A comparison operator. Slots are fixed: append new variants at the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CompareOp {
    Equal,
    NotEqual,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
}

impl CompareOp {
    pub fn symbol(self) -> &'static str {
        match self {
            CompareOp::Equal => "=",
            CompareOp::NotEqual => "<>",
            CompareOp::Less => "<",
            CompareOp::LessOrEqual => "<=",
            CompareOp::Greater => ">",
            CompareOp::GreaterOrEqual => ">=",
        }
    }

    fn holds(self, ordering: Ordering) -> bool {
        match self {
            CompareOp::Equal => ordering == Ordering::Equal,
            CompareOp::NotEqual => ordering != Ordering::Equal,
            CompareOp::Less => ordering == Ordering::Less,
            CompareOp::LessOrEqual => ordering != Ordering::Greater,
            CompareOp::Greater => ordering == Ordering::Greater,
            CompareOp::GreaterOrEqual => ordering != Ordering::Less,
        }
    }
}

/// A predicate over one row of one table, by column name.
#[derive(Clone, Debug, PartialEq)]
pub enum Predicate {
    /// `column op value`.
    Compare {
        column: String,
        op: CompareOp,
        value: Value,
    },
    /// `column IN (values)`.
    In {
        column: String,
        values: Vec<Value>,
    },
    /// `column BETWEEN low AND high` (inclusive, as in SQL).
    Between {
        column: String,
        low: Value,
        high: Value,
    },
    /// `column LIKE pattern`: `%` any run of characters, `_` one character, `\` escapes.
    Like {
        column: String,
        pattern: String,
    },
    /// `column IS NULL` (or `IS NOT NULL` when `negated`).
    IsNull {
        column: String,
        negated: bool,
    },
    /// All hold (true when empty).
    And(Vec<Predicate>),
    /// One holds (false when empty).
    Or(Vec<Predicate>),
    Not(Box<Predicate>),
}

impl Predicate {
    pub fn compare(column: &str, op: CompareOp, value: Value) -> Predicate {
        Predicate::Compare {
            column: column.to_string(),
            op,
            value,
        }
    }

    pub fn equal(column: &str, value: Value) -> Predicate {
        Predicate::compare(column, CompareOp::Equal, value)
    }
}

/// One node of a predicate's postfix encoding. Slots are fixed: append new variants at the end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
enum PredicateNode {
    Compare {
        column: String,
        op: CompareOp,
        value: Value,
    },
    In {
        column: String,
        values: Vec<Value>,
    },
    Between {
        column: String,
        low: Value,
        high: Value,
    },
    Like {
        column: String,
        pattern: String,
    },
    IsNull {
        column: String,
        negated: bool,
    },
    /// Pops this many operands.
    And(u32),
    /// Pops this many operands.
    Or(u32),
    /// Pops one operand.
    Not,
}

fn to_postfix(predicate: &Predicate, nodes: &mut Vec<PredicateNode>) {
    match predicate {
        Predicate::Compare { column, op, value } => nodes.push(PredicateNode::Compare {
            column: column.clone(),
            op: *op,
            value: value.clone(),
        }),
        Predicate::In { column, values } => nodes.push(PredicateNode::In {
            column: column.clone(),
            values: values.clone(),
        }),
        Predicate::Between { column, low, high } => nodes.push(PredicateNode::Between {
            column: column.clone(),
            low: low.clone(),
            high: high.clone(),
        }),
        Predicate::Like { column, pattern } => nodes.push(PredicateNode::Like {
            column: column.clone(),
            pattern: pattern.clone(),
        }),
        Predicate::IsNull { column, negated } => nodes.push(PredicateNode::IsNull {
            column: column.clone(),
            negated: *negated,
        }),
        Predicate::And(operands) | Predicate::Or(operands) => {
            for operand in operands {
                to_postfix(operand, nodes);
            }
            let count = u32::try_from(operands.len()).expect("operand count fits u32");
            nodes.push(match predicate {
                Predicate::And(_) => PredicateNode::And(count),
                _ => PredicateNode::Or(count),
            });
        }
        Predicate::Not(operand) => {
            to_postfix(operand, nodes);
            nodes.push(PredicateNode::Not);
        }
    }
}

/// Rebuilds a tree from untrusted postfix nodes without recursion; refuses malformed lists and
/// trees deeper than `PREDICATE_DEPTH_MAX`.
fn from_postfix(nodes: Vec<PredicateNode>) -> Result<Predicate, String> {
    if nodes.len() > PREDICATE_NODES_MAX {
        return Err("predicate has too many nodes".into());
    }
    // Each stack entry is a finished subtree and its depth.
    let mut stack: Vec<(Predicate, usize)> = Vec::new();
    for node in nodes {
        let leaf = match node {
            PredicateNode::Compare { column, op, value } => {
                Predicate::Compare { column, op, value }
            }
            PredicateNode::In { column, values } => Predicate::In { column, values },
            PredicateNode::Between { column, low, high } => {
                Predicate::Between { column, low, high }
            }
            PredicateNode::Like { column, pattern } => Predicate::Like { column, pattern },
            PredicateNode::IsNull { column, negated } => Predicate::IsNull { column, negated },
            connective @ (PredicateNode::And(_) | PredicateNode::Or(_) | PredicateNode::Not) => {
                let count = match connective {
                    PredicateNode::And(count) | PredicateNode::Or(count) => count as usize,
                    _ => 1,
                };
                if count > stack.len() {
                    return Err("connective without enough operands".into());
                }
                let operands = stack.split_off(stack.len() - count);
                let depth = 1 + operands.iter().map(|(_, depth)| *depth).max().unwrap_or(0);
                if depth > PREDICATE_DEPTH_MAX {
                    return Err("predicate nested too deeply".into());
                }
                let mut operands: Vec<Predicate> =
                    operands.into_iter().map(|(operand, _)| operand).collect();
                let tree = match connective {
                    PredicateNode::Not => Predicate::Not(Box::new(operands.remove(0))),
                    PredicateNode::And(_) => Predicate::And(operands),
                    _ => Predicate::Or(operands),
                };
                stack.push((tree, depth));
                continue;
            }
        };
        stack.push((leaf, 1));
    }
    match (stack.pop(), stack.is_empty()) {
        (Some((predicate, _)), true) => Ok(predicate),
        _ => Err("predicate must be exactly one tree".into()),
    }
}

impl Serialize for Predicate {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut nodes = Vec::new();
        to_postfix(self, &mut nodes);
        nodes.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Predicate {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Predicate, D::Error> {
        let nodes = Vec::<PredicateNode>::deserialize(deserializer)?;
        from_postfix(nodes).map_err(serde::de::Error::custom)
    }
}

/// SQL's three truth values. Ordered so that AND is `min` and OR is `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Truth {
    False,
    Unknown,
    True,
}

impl Truth {
    fn from_bool(value: bool) -> Truth {
        if value {
            Truth::True
        } else {
            Truth::False
        }
    }

    fn not(self) -> Truth {
        match self {
            Truth::False => Truth::True,
            Truth::Unknown => Truth::Unknown,
            Truth::True => Truth::False,
        }
    }
}

/// SQL comparison of two values of one type: `None` (unknown) when either is NULL.
pub fn compare_sql(left: &Value, right: &Value) -> Option<Ordering> {
    if left.is_null() || right.is_null() {
        None
    } else {
        Some(left.cmp(right))
    }
}

/// One element of a compiled LIKE pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LikeToken {
    Literal(char),
    /// `_`.
    AnyOne,
    /// `%`.
    AnyRun,
}

/// Compiles a LIKE pattern; a trailing lone backslash matches a backslash.
pub fn compile_like(pattern: &str) -> Vec<LikeToken> {
    let mut tokens = Vec::new();
    let mut characters = pattern.chars();
    while let Some(character) = characters.next() {
        tokens.push(match character {
            '%' => LikeToken::AnyRun,
            '_' => LikeToken::AnyOne,
            '\\' => LikeToken::Literal(characters.next().unwrap_or('\\')),
            other => LikeToken::Literal(other),
        });
    }
    tokens
}

/// Whether `text` matches the pattern. Iterative with one backtrack point (the last `%`), so
/// O(text × pattern) time and no recursion.
pub fn like_matches(tokens: &[LikeToken], text: &str) -> bool {
    let characters: Vec<char> = text.chars().collect();
    let (mut text_at, mut token_at) = (0usize, 0usize);
    let mut backtrack: Option<(usize, usize)> = None;
    while text_at < characters.len() {
        match tokens.get(token_at) {
            Some(LikeToken::AnyRun) => {
                backtrack = Some((token_at, text_at));
                token_at += 1;
            }
            Some(LikeToken::AnyOne) => {
                text_at += 1;
                token_at += 1;
            }
            Some(LikeToken::Literal(literal)) if *literal == characters[text_at] => {
                text_at += 1;
                token_at += 1;
            }
            _ => match backtrack {
                Some((run_at, run_text_at)) => {
                    token_at = run_at + 1;
                    text_at = run_text_at + 1;
                    backtrack = Some((run_at, run_text_at + 1));
                }
                None => return false,
            },
        }
    }
    tokens[token_at.min(tokens.len())..]
        .iter()
        .all(|token| *token == LikeToken::AnyRun)
}

/// A predicate checked against a table: columns by position, constants of the column's type.
#[derive(Clone, Debug, PartialEq)]
pub enum BoundPredicate {
    Compare {
        column: usize,
        op: CompareOp,
        value: Value,
    },
    In {
        column: usize,
        values: Vec<Value>,
    },
    Between {
        column: usize,
        low: Value,
        high: Value,
    },
    Like {
        column: usize,
        tokens: Vec<LikeToken>,
    },
    IsNull {
        column: usize,
        negated: bool,
    },
    And(Vec<BoundPredicate>),
    Or(Vec<BoundPredicate>),
    Not(Box<BoundPredicate>),
}

impl BoundPredicate {
    /// Marks every column the predicate reads (`read[position] = true`).
    pub fn mark_columns(&self, read: &mut [bool]) {
        match self {
            BoundPredicate::Compare { column, .. }
            | BoundPredicate::In { column, .. }
            | BoundPredicate::Between { column, .. }
            | BoundPredicate::Like { column, .. }
            | BoundPredicate::IsNull { column, .. } => read[*column] = true,
            BoundPredicate::And(predicates) | BoundPredicate::Or(predicates) => predicates
                .iter()
                .for_each(|predicate| predicate.mark_columns(read)),
            BoundPredicate::Not(predicate) => predicate.mark_columns(read),
        }
    }

    /// Evaluates on a row with three-valued logic.
    pub fn evaluate(&self, row: &[Value]) -> Truth {
        self.evaluate_by(&|column| &row[column])
    }

    /// `evaluate` of a row given column by column (`value_of(position)`): the column image's
    /// path, which reads only the columns the predicate tests, until the first false conjunct.
    pub fn evaluate_by<'v, F: Fn(usize) -> &'v Value>(&self, value_of: &F) -> Truth {
        match self {
            BoundPredicate::Compare { column, op, value } => {
                match compare_sql(value_of(*column), value) {
                    Some(ordering) => Truth::from_bool(op.holds(ordering)),
                    None => Truth::Unknown,
                }
            }
            BoundPredicate::In { column, values } => {
                let cell = value_of(*column);
                if cell.is_null() {
                    return Truth::Unknown;
                }
                let mut truth = Truth::False;
                for value in values {
                    match compare_sql(cell, value) {
                        Some(Ordering::Equal) => return Truth::True,
                        Some(_) => {}
                        None => truth = Truth::Unknown,
                    }
                }
                truth
            }
            BoundPredicate::Between { column, low, high } => {
                let above = compare_sql(value_of(*column), low)
                    .map_or(Truth::Unknown, |ordering| {
                        Truth::from_bool(ordering != Ordering::Less)
                    });
                let below = compare_sql(value_of(*column), high)
                    .map_or(Truth::Unknown, |ordering| {
                        Truth::from_bool(ordering != Ordering::Greater)
                    });
                above.min(below)
            }
            BoundPredicate::Like { column, tokens } => match value_of(*column) {
                Value::Text(text) => Truth::from_bool(like_matches(tokens, text)),
                _ => Truth::Unknown,
            },
            BoundPredicate::IsNull { column, negated } => {
                Truth::from_bool(value_of(*column).is_null() != *negated)
            }
            BoundPredicate::And(operands) => {
                let mut truth = Truth::True;
                for operand in operands {
                    truth = truth.min(operand.evaluate_by(value_of));
                    if truth == Truth::False {
                        break;
                    }
                }
                truth
            }
            BoundPredicate::Or(operands) => {
                let mut truth = Truth::False;
                for operand in operands {
                    truth = truth.max(operand.evaluate_by(value_of));
                    if truth == Truth::True {
                        break;
                    }
                }
                truth
            }
            BoundPredicate::Not(operand) => operand.evaluate_by(value_of).not(),
        }
    }

    /// Whether the row qualifies (the predicate is true, not false or unknown).
    pub fn matches(&self, row: &[Value]) -> bool {
        self.evaluate(row) == Truth::True
    }

    /// `matches` of a row given column by column (`evaluate_by`).
    pub fn matches_by<'v, F: Fn(usize) -> &'v Value>(&self, value_of: &F) -> bool {
        self.evaluate_by(value_of) == Truth::True
    }

    /// The top-level conjuncts (nested ANDs flattened).
    pub fn conjuncts(&self) -> Vec<&BoundPredicate> {
        let mut conjuncts = Vec::new();
        let mut pending = vec![self];
        while let Some(predicate) = pending.pop() {
            match predicate {
                BoundPredicate::And(operands) => pending.extend(operands.iter().rev()),
                other => conjuncts.push(other),
            }
        }
        conjuncts
    }

    /// If the predicate is an equality (or IN list) on a column, the column and the non-NULL
    /// constants a qualifying row must equal one of.
    pub fn equality_constants(&self) -> Option<(usize, Vec<&Value>)> {
        match self {
            BoundPredicate::Compare {
                column,
                op: CompareOp::Equal,
                value,
            } if !value.is_null() => Some((*column, vec![value])),
            BoundPredicate::In { column, values } => Some((
                *column,
                values.iter().filter(|value| !value.is_null()).collect(),
            )),
            _ => None,
        }
    }

    /// If the predicate is a range on a column, the column and the interval a qualifying row's
    /// value lies in.
    pub fn range(&self) -> Option<(usize, Interval)> {
        match self {
            BoundPredicate::Compare { column, op, value } if !value.is_null() => {
                let interval = match op {
                    CompareOp::Less => Interval::new(Bound::Unbounded, Bound::Excluded(value)),
                    CompareOp::LessOrEqual => {
                        Interval::new(Bound::Unbounded, Bound::Included(value))
                    }
                    CompareOp::Greater => Interval::new(Bound::Excluded(value), Bound::Unbounded),
                    CompareOp::GreaterOrEqual => {
                        Interval::new(Bound::Included(value), Bound::Unbounded)
                    }
                    CompareOp::Equal => {
                        Interval::new(Bound::Included(value), Bound::Included(value))
                    }
                    CompareOp::NotEqual => return None,
                };
                Some((*column, interval))
            }
            BoundPredicate::Between { column, low, high } if !low.is_null() && !high.is_null() => {
                Some((
                    *column,
                    Interval::new(Bound::Included(low), Bound::Included(high)),
                ))
            }
            _ => None,
        }
    }
}

/// A range of non-NULL values of one column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interval {
    pub low: Bound<Value>,
    pub high: Bound<Value>,
}

impl Interval {
    fn new(low: Bound<&Value>, high: Bound<&Value>) -> Interval {
        Interval {
            low: low.cloned(),
            high: high.cloned(),
        }
    }

    /// The intersection of two intervals.
    pub fn intersect(self, other: Interval) -> Interval {
        Interval {
            low: tighter(self.low, other.low, Ordering::Greater),
            high: tighter(self.high, other.high, Ordering::Less),
        }
    }

    /// Whether a (non-NULL) value lies in the interval.
    pub fn contains(&self, value: &Value) -> bool {
        let above = match &self.low {
            Bound::Unbounded => true,
            Bound::Included(low) => value >= low,
            Bound::Excluded(low) => value > low,
        };
        let below = match &self.high {
            Bound::Unbounded => true,
            Bound::Included(high) => value <= high,
            Bound::Excluded(high) => value < high,
        };
        !value.is_null() && above && below
    }
}

/// The tighter of two bounds: the one further in direction `inward` (Greater for lows).
fn tighter(a: Bound<Value>, b: Bound<Value>, inward: Ordering) -> Bound<Value> {
    match (&a, &b) {
        (Bound::Unbounded, _) => b,
        (_, Bound::Unbounded) => a,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            match x.cmp(y) {
                Ordering::Equal if matches!(a, Bound::Excluded(_)) => a,
                Ordering::Equal => b,
                ordering if ordering == inward => a,
                _ => b,
            }
        }
    }
}

/// Checks a predicate against a table and binds it. Refuses unknown columns (42703), constants
/// that do not convert to the column's type (42804, 22P02, 22003), LIKE on a non-text column
/// (42804) and predicates beyond the explicit limits (54000).
pub fn bind(predicate: &Predicate, schema: &TableSchema) -> Result<BoundPredicate, EngineError> {
    check_limits(predicate)?;
    bind_checked(predicate, schema)
}

/// Measures depth, nodes and constants without recursion, so a deep tree built in memory is
/// refused before anything recurses over it.
fn check_limits(predicate: &Predicate) -> Result<(), EngineError> {
    let too_complex = |what: &str| EngineError::ProgramLimitExceeded {
        limit: format!("predicate {what}"),
    };
    let (mut nodes, mut constants) = (0usize, 0usize);
    let mut pending = vec![(predicate, 1usize)];
    while let Some((predicate, depth)) = pending.pop() {
        nodes += 1;
        if depth > PREDICATE_DEPTH_MAX {
            return Err(too_complex("nested too deeply"));
        }
        if nodes > PREDICATE_NODES_MAX {
            return Err(too_complex("has too many nodes"));
        }
        match predicate {
            Predicate::And(operands) | Predicate::Or(operands) => {
                pending.extend(operands.iter().map(|operand| (operand, depth + 1)));
            }
            Predicate::Not(operand) => pending.push((operand, depth + 1)),
            Predicate::In { values, .. } => constants += values.len(),
            _ => constants += 2,
        }
        if constants > PREDICATE_CONSTANTS_MAX {
            return Err(too_complex("has too many constants"));
        }
    }
    Ok(())
}

fn bind_checked(
    predicate: &Predicate,
    schema: &TableSchema,
) -> Result<BoundPredicate, EngineError> {
    let constant = |column: usize, value: &Value| {
        let definition = &schema.columns[column];
        crate::value::coerce(value, definition.data_type, &definition.name)
    };
    Ok(match predicate {
        Predicate::Compare { column, op, value } => {
            let column = schema.column_position(column)?;
            BoundPredicate::Compare {
                column,
                op: *op,
                value: constant(column, value)?,
            }
        }
        Predicate::In { column, values } => {
            let column = schema.column_position(column)?;
            BoundPredicate::In {
                column,
                values: values
                    .iter()
                    .map(|value| constant(column, value))
                    .collect::<Result<_, _>>()?,
            }
        }
        Predicate::Between { column, low, high } => {
            let column = schema.column_position(column)?;
            BoundPredicate::Between {
                column,
                low: constant(column, low)?,
                high: constant(column, high)?,
            }
        }
        Predicate::Like { column, pattern } => {
            let position = schema.column_position(column)?;
            if pattern.len() > LIKE_PATTERN_BYTES_MAX {
                return Err(EngineError::ProgramLimitExceeded {
                    limit: format!("LIKE patterns of at most {LIKE_PATTERN_BYTES_MAX} bytes"),
                });
            }
            let data_type = schema.columns[position].data_type;
            if !matches!(data_type, DataType::Text { .. }) {
                return Err(EngineError::DatatypeMismatch {
                    column: column.clone(),
                    expected: "text".into(),
                    found: data_type.name(),
                });
            }
            BoundPredicate::Like {
                column: position,
                tokens: compile_like(pattern),
            }
        }
        Predicate::IsNull { column, negated } => BoundPredicate::IsNull {
            column: schema.column_position(column)?,
            negated: *negated,
        },
        Predicate::And(operands) => {
            let mut operands = bind_all(operands, schema)?;
            // Cheap conjuncts first (a stable sort, so the order is the same on every
            // replica): AND's three-valued result does not depend on the order, and a scan
            // evaluates each candidate row until the first false conjunct, so a test of a
            // fixed-width column rejects most rows before a string's heap bytes are read.
            operands.sort_by_key(|operand| evaluation_cost(operand, schema));
            BoundPredicate::And(operands)
        }
        Predicate::Or(operands) => BoundPredicate::Or(bind_all(operands, schema)?),
        Predicate::Not(operand) => BoundPredicate::Not(Box::new(bind_checked(operand, schema)?)),
    })
}

/// A rank of what evaluating a bound predicate on a row costs: a NULL test, then comparisons
/// of fixed-width values, then of values with heap bytes (text, bytea, jsonb, numeric), then
/// LIKE, then nested connectives.
fn evaluation_cost(predicate: &BoundPredicate, schema: &TableSchema) -> u8 {
    let compared = |column: &usize| match schema.columns[*column].data_type {
        DataType::Text { .. } | DataType::Bytea | DataType::Jsonb | DataType::Numeric { .. } => 2,
        _ => 1,
    };
    match predicate {
        BoundPredicate::IsNull { .. } => 0,
        BoundPredicate::Compare { column, .. }
        | BoundPredicate::In { column, .. }
        | BoundPredicate::Between { column, .. } => compared(column),
        BoundPredicate::Like { .. } => 3,
        BoundPredicate::And(_) | BoundPredicate::Or(_) | BoundPredicate::Not(_) => 4,
    }
}

fn bind_all(
    operands: &[Predicate],
    schema: &TableSchema,
) -> Result<Vec<BoundPredicate>, EngineError> {
    operands
        .iter()
        .map(|operand| bind_checked(operand, schema))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::ColumnDef;

    fn schema() -> TableSchema {
        TableSchema::new(
            "t",
            vec![
                ColumnDef::new("id", DataType::Int),
                ColumnDef::new("name", DataType::Text { length_max: None }),
            ],
            &["id"],
        )
        .unwrap()
    }

    fn truth(predicate: Predicate, row: &[Value]) -> Truth {
        bind(&predicate, &schema()).unwrap().evaluate(row)
    }

    #[test]
    fn null_makes_comparisons_unknown_and_three_valued_logic_combines_them() {
        let null_row = [Value::Int(1), Value::Null];
        let unknown = Predicate::equal("name", Value::Text("a".into()));
        let falsum = Predicate::equal("id", Value::Int(2));
        let verum = Predicate::equal("id", Value::Int(1));
        assert_eq!(truth(unknown.clone(), &null_row), Truth::Unknown);
        assert_eq!(
            truth(Predicate::Not(Box::new(unknown.clone())), &null_row),
            Truth::Unknown
        );
        assert_eq!(
            truth(
                Predicate::And(vec![unknown.clone(), falsum.clone()]),
                &null_row
            ),
            Truth::False
        );
        assert_eq!(
            truth(
                Predicate::And(vec![unknown.clone(), verum.clone()]),
                &null_row
            ),
            Truth::Unknown
        );
        assert_eq!(
            truth(Predicate::Or(vec![unknown.clone(), verum]), &null_row),
            Truth::True
        );
        assert_eq!(
            truth(Predicate::Or(vec![unknown, falsum]), &null_row),
            Truth::Unknown
        );
        let is_null = Predicate::IsNull {
            column: "name".into(),
            negated: false,
        };
        assert_eq!(truth(is_null, &null_row), Truth::True);
    }

    /// Binding puts a conjunction's cheap conjuncts first, and the order never changes the
    /// three-valued result: every order of three conjuncts (one of them on a NULL-able text
    /// column) evaluates alike on rows with NULLs, matches and mismatches.
    #[test]
    fn conjunctions_test_fixed_width_columns_first_with_the_same_truth_in_any_order() {
        let text = Predicate::equal("name", Value::Text("a".into()));
        let number = Predicate::compare("id", CompareOp::Greater, Value::Int(1));
        let null = Predicate::IsNull {
            column: "name".into(),
            negated: true,
        };
        let bound = bind(
            &Predicate::And(vec![text.clone(), number.clone(), null.clone()]),
            &schema(),
        )
        .unwrap();
        let BoundPredicate::And(operands) = &bound else {
            panic!("a conjunction: {bound:?}");
        };
        assert!(matches!(operands[0], BoundPredicate::IsNull { .. }));
        assert!(matches!(
            operands[1],
            BoundPredicate::Compare { column: 0, .. }
        ));
        assert!(matches!(
            operands[2],
            BoundPredicate::Compare { column: 1, .. }
        ));
        let rows = [
            [Value::Int(2), Value::Text("a".into())],
            [Value::Int(2), Value::Text("b".into())],
            [Value::Int(0), Value::Text("a".into())],
            [Value::Int(2), Value::Null],
            [Value::Null, Value::Text("a".into())],
            [Value::Null, Value::Null],
        ];
        let orders = [
            [0, 1, 2],
            [0, 2, 1],
            [1, 0, 2],
            [1, 2, 0],
            [2, 0, 1],
            [2, 1, 0],
        ];
        // Each conjunct bound alone, then joined in each order as written (not sorted).
        let conjuncts: Vec<BoundPredicate> = [text, number, null]
            .iter()
            .map(|conjunct| bind(conjunct, &schema()).unwrap())
            .collect();
        for row in &rows {
            let expected = bound.evaluate(row);
            for order in &orders {
                let unsorted =
                    BoundPredicate::And(order.iter().map(|at| conjuncts[*at].clone()).collect());
                assert_eq!(
                    unsorted.evaluate(row),
                    expected,
                    "{row:?} in order {order:?}"
                );
            }
        }
    }

    #[test]
    fn in_list_with_null_is_unknown_unless_a_value_matches() {
        let row = [Value::Int(3), Value::Null];
        let list = |values: Vec<Value>| Predicate::In {
            column: "id".into(),
            values,
        };
        assert_eq!(
            truth(list(vec![Value::Int(3), Value::Null]), &row),
            Truth::True
        );
        assert_eq!(
            truth(list(vec![Value::Int(4), Value::Null]), &row),
            Truth::Unknown
        );
        assert_eq!(truth(list(vec![Value::Int(4)]), &row), Truth::False);
    }

    #[test]
    fn between_is_inclusive_and_constants_are_coerced() {
        let row = [Value::Int(5), Value::Null];
        let between = |low: Value, high: Value| Predicate::Between {
            column: "id".into(),
            low,
            high,
        };
        assert_eq!(
            truth(between(Value::Int(5), Value::BigInt(5)), &row),
            Truth::True
        );
        assert_eq!(
            truth(between(Value::Text("6".into()), Value::Int(9)), &row),
            Truth::False
        );
        let error = bind(&between(Value::Text("x".into()), Value::Int(9)), &schema());
        assert_eq!(error.unwrap_err().code(), "22P02");
    }

    #[test]
    fn like_supports_percent_underscore_and_escapes() {
        let matches = |pattern: &str, text: &str| like_matches(&compile_like(pattern), text);
        assert!(matches("a%", "abc"));
        assert!(matches("%c", "abc"));
        assert!(matches("a_c", "abc"));
        assert!(!matches("a_c", "abbc"));
        assert!(matches("%b%", "abc"));
        assert!(matches("%", ""));
        assert!(!matches("_", ""));
        assert!(matches("a\\%", "a%"));
        assert!(!matches("a\\%", "ab"));
        assert!(matches("%a%a%a%b", "aaaaaaaaab"));
        assert!(!matches("%a%a%a%b", "aaaaaaaaaa"));
        assert!(matches("ü_", "üx"));
    }

    #[test]
    fn binding_reports_unknown_columns_and_like_on_non_text() {
        let unknown = Predicate::equal("nope", Value::Int(1));
        assert_eq!(bind(&unknown, &schema()).unwrap_err().code(), "42703");
        let like = Predicate::Like {
            column: "id".into(),
            pattern: "1%".into(),
        };
        assert_eq!(bind(&like, &schema()).unwrap_err().code(), "42804");
        let long = Predicate::Like {
            column: "name".into(),
            pattern: "%".repeat(LIKE_PATTERN_BYTES_MAX + 1),
        };
        assert_eq!(bind(&long, &schema()).unwrap_err().code(), "54000");
    }

    #[test]
    fn postfix_encoding_round_trips_and_refuses_deep_or_malformed_trees() {
        let predicate = Predicate::And(vec![
            Predicate::equal("id", Value::Int(1)),
            Predicate::Not(Box::new(Predicate::Or(vec![
                Predicate::IsNull {
                    column: "name".into(),
                    negated: true,
                },
                Predicate::Or(vec![]),
            ]))),
        ]);
        let bytes = postcard::to_allocvec(&predicate).unwrap();
        assert_eq!(
            postcard::from_bytes::<Predicate>(&bytes).unwrap(),
            predicate
        );

        let mut deep = Predicate::equal("id", Value::Int(1));
        for _ in 0..PREDICATE_DEPTH_MAX {
            deep = Predicate::Not(Box::new(deep));
        }
        let bytes = postcard::to_allocvec(&deep).unwrap();
        assert!(postcard::from_bytes::<Predicate>(&bytes).is_err());
        assert_eq!(bind(&deep, &schema()).unwrap_err().code(), "54000");

        let dangling = postcard::to_allocvec(&vec![PredicateNode::Not]).unwrap();
        assert!(postcard::from_bytes::<Predicate>(&dangling).is_err());
        let two_roots = postcard::to_allocvec(&vec![
            PredicateNode::IsNull {
                column: "id".into(),
                negated: false,
            };
            2
        ])
        .unwrap();
        assert!(postcard::from_bytes::<Predicate>(&two_roots).is_err());
    }

    #[test]
    fn interval_intersection_keeps_the_tighter_bounds() {
        let a = Interval::new(Bound::Included(&Value::Int(1)), Bound::Unbounded);
        let b = Interval::new(
            Bound::Excluded(&Value::Int(1)),
            Bound::Included(&Value::Int(5)),
        );
        let both = a.intersect(b);
        assert!(!both.contains(&Value::Int(1)));
        assert!(both.contains(&Value::Int(5)));
        assert!(!both.contains(&Value::Int(6)));
        assert!(!both.contains(&Value::Null));
    }
}
