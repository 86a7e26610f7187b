//! Joins of user tables: planned here, executed at the gateway.
//!
//! ## Plan
//!
//! Every table of the FROM clause (comma lists, `[INNER] JOIN`, `CROSS JOIN`, `LEFT`/`RIGHT`/
//! `FULL [OUTER] JOIN`, `ON`, `USING`, `NATURAL`, parenthesised joins) becomes one engine
//! `Select` of that table, and all of them go out in one batch to every partition (one atomic
//! multi-partition read: every table is seen at the same point of the order). A WHERE conjunct
//! over one table that is not on the NULL-supplying side of an outer join, and that the engine's
//! predicate language expresses, is pushed into that table's read, so each partition filters
//! its rows before they travel. The joined row is every table's columns in FROM order (then
//! the merged columns of FULL JOIN … USING), so the scope the rest of the query compiles
//! against is the one PostgreSQL builds.
//!
//! The tree keeps outer joins where they are (they do not commute) and flattens every run of
//! inner and cross joins, with the WHERE conjuncts that remain, into one `JoinNode::Inner`
//! whose children may be joined in any order.
//!
//! ## Execution (`JoinPlan::rows`)
//!
//! Each table's rows (the union over partitions, sorted by primary key so that the answer does
//! not depend on how rows are split) are joined bottom-up. An inner node starts from its
//! smallest child and repeatedly joins the smallest child connected to what it has by an
//! equality conjunct (a hash join on all such equalities; NULL keys never match; numbers of
//! different types are compared as their common type), or, when none is connected, the
//! smallest child (a nested loop). Every conjunct is applied as soon as the tables it reads
//! are joined. An outer node joins its two sides the same way and pads the unmatched rows of
//! the preserved side(s) with NULLs. A join that would hold more than `JOIN_ROWS_MAX` rows at
//! any step stops with 54000 rather than exhausting memory.
//!
//! Deviations from PostgreSQL: an inner join's ON may name tables joined later in the FROM
//! clause (PostgreSQL: 42P01); the merged column of `USING` in an inner or left join has the
//! left column's type (PostgreSQL: the common type of both).

use super::{
    conjunction, flatten_and, table_name, table_scope, with_subquery_tables, Execution, Finish,
    Planner, Routing, Source,
};
use crate::catalog::TableEntry;
use crate::error::{sqlstate, SqlError};
use crate::expr::{
    ident_name, numeric_result, Compiler, Mode, Operator, Scalar, Scope, ScopeColumn,
};
use engine::{CompareOp, DataType, Operation, Output, Predicate, Value};
use sqlparser::ast::{self, Expr, TableFactor};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

/// Most rows a join may hold at any step (an intermediate result or the answer).
pub const JOIN_ROWS_MAX: usize = 1_000_000;

/// A join's plan: the tables read and how their rows combine.
#[derive(Clone, Debug, PartialEq)]
pub struct JoinPlan {
    /// One per table in FROM order; relation `i` is the statement's operation `i`.
    pub relations: Vec<JoinRelation>,
    pub tree: JoinNode,
    /// For every position of the joined row, the relations its value comes from (one for a
    /// table column, two for a merged FULL JOIN … USING column).
    pub owners: Vec<Vec<usize>>,
    /// The type of every position of the joined row.
    pub types: Vec<DataType>,
    /// A relation read after the others, only for the join keys their rows give (a
    /// semi-join, run inside a transaction block: `semi_join`); `None` reads every relation
    /// in one batch.
    pub probe: Option<Probe>,
}

/// A semi-join's probed relation: a table whose primary key the join's equalities (with the
/// constants pushed into its read) pin, read after the other relations by point lookups of
/// the distinct keys their rows give (`crate::plan::semi_join`).
#[derive(Clone, Debug, PartialEq)]
pub struct Probe {
    /// The probed relation (its one `Select` is operation `relations[relation].operations.start`).
    pub relation: usize,
    /// Its primary-key columns the join binds.
    pub bindings: Vec<ProbeBinding>,
    /// Each relation's table options (`None` for a derived table), to route the steps.
    pub options: Vec<Option<crate::catalog::TableOptions>>,
}

/// A probed column bound by an equality `probe.column = driver.column`.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeBinding {
    /// The probed table's column.
    pub column: String,
    pub data_type: DataType,
    /// The driving relation (a table read in the first step) and the column's offset in its
    /// rows.
    pub driver: usize,
    pub offset: usize,
    /// The driving column's name (for EXPLAIN).
    pub driver_column: String,
}

/// One table read by a join.
#[derive(Clone, Debug, PartialEq)]
pub struct JoinRelation {
    pub table: String,
    /// The name the query knows it by (its alias, else its name).
    pub qualifier: String,
    /// Its first column's position in the joined row.
    pub start: usize,
    pub width: usize,
    /// Its primary key's positions in its own rows (the order rows are joined in); empty for
    /// a derived table, whose rows keep the order its query answers them in.
    pub key_positions: Vec<usize>,
    /// The statement's operations its rows come from: a table's one `Select`, or a derived
    /// table's own operations (none when the gateway computes its rows).
    pub operations: std::ops::Range<usize>,
    /// A derived table (a subquery in FROM, a view, a WITH query, `generate_series`): its
    /// execution, finished at the gateway on its share of every partition's results.
    pub derived: Option<Box<Execution>>,
}

/// A node of the join tree.
#[derive(Clone, Debug, PartialEq)]
pub enum JoinNode {
    Relation(usize),
    /// Inner and cross joins of the children, in any order, filtered by the conditions.
    Inner {
        children: Vec<JoinNode>,
        conditions: Vec<Scalar>,
    },
    /// An outer join: the conditions are its ON (or USING) conjuncts.
    Outer {
        kind: OuterKind,
        left: Box<JoinNode>,
        right: Box<JoinNode>,
        conditions: Vec<Scalar>,
        merges: Vec<Merge>,
    },
}

/// Which sides of an outer join keep their unmatched rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OuterKind {
    Left,
    Right,
    Full,
}

/// A merged column of FULL JOIN … USING: `coalesce(left, right)` as `data_type`.
#[derive(Clone, Debug, PartialEq)]
pub struct Merge {
    pub target: usize,
    pub left: usize,
    pub right: usize,
    pub data_type: DataType,
}

type Row = Vec<Value>;

/// Rows of a part of the tree, with the relations and positions they fill.
struct Part {
    rows: Vec<Row>,
    relations: BTreeSet<usize>,
    positions: Vec<usize>,
}

impl JoinPlan {
    /// How many of the statement's first operations the join reads (every relation's).
    pub fn operation_count(&self) -> usize {
        self.relations
            .last()
            .map_or(0, |relation| relation.operations.end)
    }

    /// Joins the partitions' outputs: `outputs` are partition-major, `operation_count` per
    /// partition (a table's one `Select`, a derived table's own operations).
    pub fn rows_from_outputs(&self, outputs: Vec<Output>) -> Result<Vec<Row>, SqlError> {
        let count = self.operation_count();
        if self.relations.is_empty()
            || (count == 0 && !outputs.is_empty())
            || (count > 0 && !outputs.len().is_multiple_of(count))
        {
            return Err(SqlError::new(
                sqlstate::INTERNAL_ERROR,
                format!(
                    "a join reading {count} operations got {} outputs",
                    outputs.len()
                ),
            ));
        }
        let partition_count = outputs.len().checked_div(count).unwrap_or(0);
        let mut outputs: Vec<Option<Output>> = outputs.into_iter().map(Some).collect();
        let mut inputs: Vec<Vec<Row>> = Vec::with_capacity(self.relations.len());
        for relation in &self.relations {
            if let Some(inner) = &relation.derived {
                let own: Vec<Vec<engine::OperationResult>> = (0..partition_count)
                    .map(|partition| {
                        relation
                            .operations
                            .clone()
                            .map(|at| {
                                outputs[partition * count + at]
                                    .take()
                                    .ok_or(engine::EngineError::Malformed)
                            })
                            .collect()
                    })
                    .collect();
                let crate::StatementResult::Rows { rows, .. } = inner.finish(own)? else {
                    return Err(SqlError::new(
                        sqlstate::INTERNAL_ERROR,
                        "a subquery in FROM answered no rows",
                    ));
                };
                inputs.push(rows);
                continue;
            }
            assert_eq!(
                relation.operations.len(),
                1,
                "a table is read by one Select"
            );
            let mut rows = Vec::new();
            for partition in 0..partition_count {
                match outputs[partition * count + relation.operations.start].take() {
                    Some(Output::Rows { rows: found, .. }) => rows.extend(found),
                    other => {
                        return Err(SqlError::new(
                            sqlstate::INTERNAL_ERROR,
                            format!("unexpected engine output {other:?} for a join"),
                        ))
                    }
                }
            }
            inputs.push(rows);
        }
        self.rows(inputs)
    }

    /// Joins each relation's rows (its own columns, from any number of partitions).
    pub fn rows(&self, inputs: Vec<Vec<Row>>) -> Result<Vec<Row>, SqlError> {
        if inputs.len() != self.relations.len() {
            return Err(SqlError::new(
                sqlstate::INTERNAL_ERROR,
                "a join got rows for a different number of tables",
            ));
        }
        let width = self.types.len();
        let mut widened: Vec<Option<Vec<Row>>> = Vec::with_capacity(inputs.len());
        for (relation, mut rows) in self.relations.iter().zip(inputs) {
            if rows.iter().any(|row| row.len() != relation.width) {
                return Err(SqlError::new(
                    sqlstate::INTERNAL_ERROR,
                    format!("rows of {} have the wrong width", relation.table),
                ));
            }
            rows.sort_by(|left, right| {
                relation
                    .key_positions
                    .iter()
                    .map(|at| left[*at].cmp(&right[*at]))
                    .find(|ordering| ordering.is_ne())
                    .unwrap_or(Ordering::Equal)
            });
            let rows = rows
                .into_iter()
                .map(|row| {
                    let mut wide = vec![Value::Null; width];
                    for (offset, value) in row.into_iter().enumerate() {
                        wide[relation.start + offset] = value;
                    }
                    wide
                })
                .collect();
            widened.push(Some(rows));
        }
        let part = self.node(&self.tree, &mut widened)?;
        debug_assert!(part.rows.iter().all(|row| row.len() == width));
        Ok(part.rows)
    }

    fn node(&self, node: &JoinNode, inputs: &mut [Option<Vec<Row>>]) -> Result<Part, SqlError> {
        match node {
            JoinNode::Relation(index) => {
                let relation = &self.relations[*index];
                let rows = inputs[*index].take().ok_or_else(|| {
                    SqlError::new(sqlstate::INTERNAL_ERROR, "a join read a table twice")
                })?;
                Ok(Part {
                    rows,
                    relations: BTreeSet::from([*index]),
                    positions: (relation.start..relation.start + relation.width).collect(),
                })
            }
            JoinNode::Inner {
                children,
                conditions,
            } => {
                let mut parts = children
                    .iter()
                    .map(|child| self.node(child, inputs))
                    .collect::<Result<Vec<_>, _>>()?;
                self.inner(&mut parts, conditions)
            }
            JoinNode::Outer {
                kind,
                left,
                right,
                conditions,
                merges,
            } => {
                let left = self.node(left, inputs)?;
                let right = self.node(right, inputs)?;
                let relations: BTreeSet<usize> =
                    left.relations.union(&right.relations).copied().collect();
                let filters: Vec<&Scalar> = conditions.iter().collect();
                let keys = self.keys(&filters, &left.relations, &right.relations);
                let mut rows = join_pair(
                    &left.rows,
                    &right.rows,
                    &right.positions,
                    &keys,
                    &filters,
                    Some(*kind),
                )?;
                for row in &mut rows {
                    for merge in merges {
                        let value = match &row[merge.left] {
                            Value::Null => row[merge.right].clone(),
                            value => value.clone(),
                        };
                        row[merge.target] = crate::expr::cast_value(&value, merge.data_type)?;
                    }
                }
                let mut positions = left.positions;
                positions.extend(right.positions);
                positions.extend(merges.iter().map(|merge| merge.target));
                Ok(Part {
                    rows,
                    relations,
                    positions,
                })
            }
        }
    }

    /// An inner node: greedy order by equalities, each condition applied once its tables are in.
    fn inner(&self, parts: &mut Vec<Part>, conditions: &[Scalar]) -> Result<Part, SqlError> {
        let mut pending: Vec<(&Scalar, BTreeSet<usize>)> = conditions
            .iter()
            .map(|condition| (condition, self.relations_of(condition)))
            .collect();
        let smallest = |parts: &[Part], among: &mut dyn Iterator<Item = usize>| {
            among.min_by_key(|at| (parts[*at].rows.len(), *at))
        };
        let Some(first) = smallest(parts, &mut (0..parts.len())) else {
            return Err(SqlError::new(sqlstate::INTERNAL_ERROR, "an empty join"));
        };
        let mut joined = parts.remove(first);
        let ready = take_ready(&mut pending, &joined.relations);
        joined.rows = filter_rows(std::mem::take(&mut joined.rows), &ready)?;
        while !parts.is_empty() {
            let connected: Vec<usize> = (0..parts.len())
                .filter(|at| {
                    pending.iter().any(|(condition, relations)| {
                        relations.iter().all(|relation| {
                            joined.relations.contains(relation)
                                || parts[*at].relations.contains(relation)
                        }) && !self
                            .keys(&[condition], &joined.relations, &parts[*at].relations)
                            .is_empty()
                    })
                })
                .collect();
            let next = match smallest(parts, &mut connected.iter().copied()) {
                Some(next) => next,
                None => smallest(parts, &mut (0..parts.len())).expect("parts is not empty"),
            };
            let right = parts.remove(next);
            let relations: BTreeSet<usize> =
                joined.relations.union(&right.relations).copied().collect();
            let ready = take_ready(&mut pending, &relations);
            let keys = self.keys(&ready, &joined.relations, &right.relations);
            joined.rows = join_pair(
                &joined.rows,
                &right.rows,
                &right.positions,
                &keys,
                &ready,
                None,
            )?;
            joined.relations = relations;
            joined.positions.extend(right.positions);
        }
        if !pending.is_empty() {
            return Err(SqlError::new(
                sqlstate::INTERNAL_ERROR,
                "a join condition names a table outside its join",
            ));
        }
        Ok(joined)
    }

    /// The relations a condition reads.
    fn relations_of(&self, scalar: &Scalar) -> BTreeSet<usize> {
        let mut relations = BTreeSet::new();
        let mut used = vec![false; self.owners.len()];
        // Conditions never hold subqueries (the planner keeps those for after the join).
        let _ = super::mark_columns(scalar, &mut used);
        for (position, used) in used.iter().enumerate() {
            if *used {
                relations.extend(self.owners[position].iter().copied());
            }
        }
        relations
    }

    /// The equality conditions usable as hash keys between `left` and `right`: (expression over
    /// the left rows, expression over the right rows, the type both are compared as).
    fn keys<'s>(
        &self,
        conditions: &[&'s Scalar],
        left: &BTreeSet<usize>,
        right: &BTreeSet<usize>,
    ) -> Vec<(&'s Scalar, &'s Scalar, Option<DataType>)> {
        let mut keys = Vec::new();
        for condition in conditions {
            let Scalar::Binary(Operator::Compare(CompareOp::Equal), a, b) = condition else {
                continue;
            };
            let (a_relations, b_relations) = (self.relations_of(a), self.relations_of(b));
            let within = |relations: &BTreeSet<usize>, side: &BTreeSet<usize>| {
                !relations.is_empty() && relations.is_subset(side)
            };
            let (from_left, from_right) =
                if within(&a_relations, left) && within(&b_relations, right) {
                    (a.as_ref(), b.as_ref())
                } else if within(&b_relations, left) && within(&a_relations, right) {
                    (b.as_ref(), a.as_ref())
                } else {
                    continue;
                };
            let (Some(left_type), Some(right_type)) = (
                from_left.data_type(&self.types),
                from_right.data_type(&self.types),
            ) else {
                continue;
            };
            let numeric = |data_type: DataType| {
                matches!(
                    data_type,
                    DataType::Int | DataType::BigInt | DataType::Double | DataType::Numeric { .. }
                )
            };
            let common = if numeric(left_type) && numeric(right_type) {
                Some(numeric_result(left_type, right_type))
            } else if std::mem::discriminant(&left_type) == std::mem::discriminant(&right_type) {
                None
            } else {
                continue;
            };
            keys.push((from_left, from_right, common));
        }
        keys
    }
}

/// Removes and answers the pending conditions whose relations are all in `relations`.
fn take_ready<'s>(
    pending: &mut Vec<(&'s Scalar, BTreeSet<usize>)>,
    relations: &BTreeSet<usize>,
) -> Vec<&'s Scalar> {
    let mut ready = Vec::new();
    pending.retain(|(condition, needs)| {
        if needs.is_subset(relations) {
            ready.push(*condition);
            false
        } else {
            true
        }
    });
    ready
}

fn filter_rows(rows: Vec<Row>, filters: &[&Scalar]) -> Result<Vec<Row>, SqlError> {
    if filters.is_empty() {
        return Ok(rows);
    }
    let mut kept = Vec::with_capacity(rows.len());
    for row in rows {
        if qualifies(filters, &row)? {
            kept.push(row);
        }
    }
    Ok(kept)
}

fn qualifies(filters: &[&Scalar], row: &[Value]) -> Result<bool, SqlError> {
    for filter in filters {
        if !filter.qualifies(row)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A hash key: the key expressions' values as the common type; `None` if any is NULL (a NULL
/// key matches nothing).
fn key_of(
    row: &[Value],
    keys: &[(&Scalar, &Scalar, Option<DataType>)],
    left: bool,
) -> Result<Option<Vec<Value>>, SqlError> {
    let mut key = Vec::with_capacity(keys.len());
    for (left_expression, right_expression, common) in keys {
        let expression = if left {
            left_expression
        } else {
            right_expression
        };
        let value = expression.evaluate(row)?;
        if value.is_null() {
            return Ok(None);
        }
        key.push(match common {
            Some(data_type) => crate::expr::cast_value(&value, *data_type)?,
            None => value,
        });
    }
    Ok(Some(key))
}

fn too_many_rows() -> SqlError {
    SqlError::new(
        sqlstate::PROGRAM_LIMIT_EXCEEDED,
        format!("a join is limited to {JOIN_ROWS_MAX} rows at any step"),
    )
    .with_hint("add conditions that connect the tables, or filter them")
}

/// Joins two parts: hash join on `keys` (nested loop when there are none), every filter
/// applied to each combined row; an outer kind pads the unmatched rows of its preserved sides.
fn join_pair(
    left: &[Row],
    right: &[Row],
    right_positions: &[usize],
    keys: &[(&Scalar, &Scalar, Option<DataType>)],
    filters: &[&Scalar],
    outer: Option<OuterKind>,
) -> Result<Vec<Row>, SqlError> {
    let mut table: BTreeMap<Vec<Value>, Vec<usize>> = BTreeMap::new();
    if !keys.is_empty() {
        for (at, row) in right.iter().enumerate() {
            if let Some(key) = key_of(row, keys, false)? {
                table.entry(key).or_default().push(at);
            }
        }
    }
    let every: Vec<usize> = (0..right.len()).collect();
    let mut right_matched = vec![false; right.len()];
    let mut joined = Vec::new();
    let push = |joined: &mut Vec<Row>, row: Row| {
        if joined.len() >= JOIN_ROWS_MAX {
            return Err(too_many_rows());
        }
        joined.push(row);
        Ok(())
    };
    for left_row in left {
        let candidates: &[usize] = if keys.is_empty() {
            &every
        } else {
            match key_of(left_row, keys, true)? {
                Some(key) => table.get(&key).map_or(&[], Vec::as_slice),
                None => &[],
            }
        };
        let mut matched = false;
        for at in candidates {
            let mut row = left_row.clone();
            for position in right_positions {
                row[*position] = right[*at][*position].clone();
            }
            if !qualifies(filters, &row)? {
                continue;
            }
            matched = true;
            right_matched[*at] = true;
            push(&mut joined, row)?;
        }
        if !matched && matches!(outer, Some(OuterKind::Left | OuterKind::Full)) {
            push(&mut joined, left_row.clone())?;
        }
    }
    if matches!(outer, Some(OuterKind::Right | OuterKind::Full)) {
        for (at, matched) in right_matched.iter().enumerate() {
            if !matched {
                push(&mut joined, right[at].clone())?;
            }
        }
    }
    Ok(joined)
}

// ----- planning -----

/// A FROM tree before its ON conditions are compiled (they may name any table of the FROM
/// clause, so they compile against the whole scope).
enum Draft<'a> {
    Relation(usize),
    Inner {
        children: Vec<Draft<'a>>,
        on: Vec<&'a Expr>,
        using: Vec<Scalar>,
    },
    Outer {
        kind: OuterKind,
        left: Box<Draft<'a>>,
        right: Box<Draft<'a>>,
        on: Vec<&'a Expr>,
        using: Vec<Scalar>,
        merges: Vec<Merge>,
    },
}

/// What the FROM walk collects.
#[derive(Default)]
struct Builder {
    relations: Vec<JoinRelation>,
    /// Each relation's table (`None` for a derived table, whose conditions are not pushed).
    entries: Vec<Option<TableEntry>>,
    /// How many operations the relations walked so far read.
    operations: usize,
    /// Whether a relation is on the NULL-supplying side of an outer join.
    nullable: Vec<bool>,
    columns: Vec<ScopeColumn>,
    owners: Vec<Vec<usize>>,
}

impl Builder {
    /// Adds a relation with its scope: its columns follow the joined row's so far.
    fn add<'a>(
        &mut self,
        relation: JoinRelation,
        own: Scope,
        entry: Option<TableEntry>,
        nullable: bool,
    ) -> Walked<'a> {
        let index = self.relations.len();
        let (start, width) = (relation.start, relation.width);
        assert_eq!(start, self.columns.len());
        assert_eq!(width, own.columns.len());
        assert_eq!(relation.operations.start, self.operations);
        self.operations = relation.operations.end;
        self.columns.extend(own.columns);
        self.owners.extend(std::iter::repeat_n(vec![index], width));
        self.relations.push(relation);
        self.entries.push(entry);
        self.nullable.push(nullable);
        Walked {
            draft: Draft::Relation(index),
            star: (start..start + width).collect(),
            relations: vec![index],
        }
    }
}

/// A walked FROM item: its draft, the positions `*` lists for it, and its relations.
struct Walked<'a> {
    draft: Draft<'a>,
    star: Vec<usize>,
    relations: Vec<usize>,
}

/// Every relation of a FROM clause, parenthesised joins walked into.
fn factors<'a>(from: &'a [ast::TableWithJoins], into: &mut Vec<&'a TableFactor>) {
    for item in from {
        for factor in
            std::iter::once(&item.relation).chain(item.joins.iter().map(|join| &join.relation))
        {
            match factor {
                TableFactor::NestedJoin {
                    table_with_joins, ..
                } => factors(std::slice::from_ref(table_with_joins), into),
                other => into.push(other),
            }
        }
    }
}

impl Planner<'_, '_> {
    /// Whether a FROM clause joins (more than one item, or any JOIN) relations of which one
    /// at least is a user table, a view, a WITH query or reads one, so that `join_query`
    /// plans it. A join of the virtual catalog's relations alone is `pg_catalog`'s.
    pub(super) fn is_user_join(&self, from: &[ast::TableWithJoins]) -> Result<bool, SqlError> {
        let Some(first) = from.first() else {
            return Ok(false);
        };
        if from.len() == 1
            && first.joins.is_empty()
            && !matches!(first.relation, TableFactor::NestedJoin { .. })
        {
            return Ok(false);
        }
        Ok(!self.reads_only_catalog(from)?)
    }

    /// Whether a non-empty FROM clause reads the virtual catalog only (no user table, view or
    /// WITH query, directly or in a subquery in FROM).
    pub(super) fn reads_only_catalog(
        &self,
        from: &[ast::TableWithJoins],
    ) -> Result<bool, SqlError> {
        let mut all = Vec::new();
        factors(from, &mut all);
        if all.is_empty() {
            return Ok(false);
        }
        for factor in all {
            let catalog = match factor {
                TableFactor::Table { name, .. } if self.cte_index(name).is_some() => false,
                TableFactor::Derived { subquery, .. } => self.query_is_catalog(subquery)?,
                other => crate::pg_catalog::is_catalog_relation(other)?,
            };
            if !catalog {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Whether a query reads the virtual catalog only (a query reading no table counts).
    fn query_is_catalog(&self, query: &ast::Query) -> Result<bool, SqlError> {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                if !self.query_is_catalog(&cte.query)? {
                    return Ok(false);
                }
            }
        }
        self.body_is_catalog(&query.body)
    }

    fn body_is_catalog(&self, body: &ast::SetExpr) -> Result<bool, SqlError> {
        match body {
            ast::SetExpr::Select(select) => {
                Ok(select.from.is_empty() || self.reads_only_catalog(&select.from)?)
            }
            ast::SetExpr::Query(query) => self.query_is_catalog(query),
            ast::SetExpr::SetOperation { left, right, .. } => {
                Ok(self.body_is_catalog(left)? && self.body_is_catalog(right)?)
            }
            _ => Ok(true),
        }
    }
}

impl Planner<'_, '_> {
    /// A SELECT over a join of user tables.
    pub(super) fn join_query(
        &mut self,
        select: &ast::Select,
        query: &ast::Query,
    ) -> Result<Execution, SqlError> {
        let mut builder = Builder::default();
        let mut items = Vec::with_capacity(select.from.len());
        let mut star = Vec::new();
        for item in &select.from {
            let walked = self.walk_item(item, &mut builder, false)?;
            star.extend(walked.star);
            items.push(walked.draft);
        }
        let scope = Scope {
            columns: builder.columns.clone(),
            outer_start: None,
            star: Some(star),
        };
        let mut plan = JoinPlan {
            relations: builder.relations.clone(),
            tree: JoinNode::Relation(0),
            owners: builder.owners.clone(),
            types: scope.types(),
            probe: None,
        };
        // WHERE: pushed into one table's read, kept as a join condition, or (with a subquery)
        // applied to the joined rows.
        let mut pushed: Vec<Vec<Predicate>> = vec![Vec::new(); plan.relations.len()];
        let mut conditions = Vec::new();
        let mut residual = Vec::new();
        if let Some(selection) = &select.selection {
            let mut conjuncts = Vec::new();
            flatten_and(selection, &mut conjuncts);
            for conjunct in conjuncts {
                let scalar = self
                    .compiler(&scope)
                    .compile(conjunct, Some(DataType::Boolean))?;
                if has_subquery(&scalar) {
                    residual.push(scalar);
                    continue;
                }
                check_comparisons(&scalar, &plan.types)?;
                let relations = plan.relations_of(&scalar);
                if let [relation] = relations.iter().copied().collect::<Vec<_>>().as_slice() {
                    if let (false, Some(entry)) =
                        (builder.nullable[*relation], &builder.entries[*relation])
                    {
                        let own = table_scope(&entry.schema, &plan.relations[*relation].qualifier);
                        if let Some(predicate) = self.translate(conjunct, &own)? {
                            pushed[*relation].push(predicate);
                            continue;
                        }
                    }
                }
                conditions.push(scalar);
            }
        }
        let mut children = Vec::with_capacity(items.len());
        for item in items {
            match self.finish_draft(item, &scope, &plan)? {
                JoinNode::Inner {
                    children: inner,
                    conditions: on,
                } => {
                    children.extend(inner);
                    conditions.extend(on);
                }
                other => children.push(other),
            }
        }
        plan.probe = choose_probe(&plan, &builder, &pushed, &children, &conditions);
        plan.tree = JoinNode::Inner {
            children,
            conditions,
        };
        let mut operations = Vec::with_capacity(plan.operation_count());
        for (relation, mut predicates) in plan.relations.iter().zip(pushed) {
            assert_eq!(operations.len(), relation.operations.start);
            match &relation.derived {
                Some(inner) => operations.extend(inner.operations.iter().cloned()),
                None => operations.push(Operation::Select {
                    table: relation.table.clone(),
                    columns: Vec::new(),
                    predicate: match predicates.len() {
                        0 => None,
                        1 => predicates.pop(),
                        _ => Some(Predicate::And(predicates)),
                    },
                    limit: None,
                }),
            }
            assert_eq!(operations.len(), relation.operations.end);
        }
        let query_plan = self.select_list(
            select,
            query,
            &scope,
            Source::Join(Box::new(plan)),
            conjunction(residual),
        )?;
        // Relations whose rows the gateway computes (constants, `generate_series`) send nothing.
        let routing = if operations.is_empty() {
            Routing::None
        } else {
            Routing::Every
        };
        Ok(with_subquery_tables(Execution {
            operations,
            routing,
            finish: Finish::Query(query_plan),
            created_table: None,
            notices: Vec::new(),
        }))
    }

    fn walk_item<'a>(
        &mut self,
        item: &'a ast::TableWithJoins,
        builder: &mut Builder,
        nullable: bool,
    ) -> Result<Walked<'a>, SqlError> {
        let mut left = self.walk_factor(&item.relation, builder, nullable)?;
        for join in &item.joins {
            let (kind, constraint) = match &join.join_operator {
                ast::JoinOperator::Join(constraint) | ast::JoinOperator::Inner(constraint) => {
                    (None, constraint)
                }
                ast::JoinOperator::CrossJoin(constraint) => (None, constraint),
                ast::JoinOperator::Left(constraint) | ast::JoinOperator::LeftOuter(constraint) => {
                    (Some(OuterKind::Left), constraint)
                }
                ast::JoinOperator::Right(constraint)
                | ast::JoinOperator::RightOuter(constraint) => (Some(OuterKind::Right), constraint),
                ast::JoinOperator::FullOuter(constraint) => (Some(OuterKind::Full), constraint),
                other => {
                    return Err(SqlError::unsupported(format!(
                        "join operator {}",
                        format!("{other:?}").split('(').next().unwrap_or("")
                    )))
                }
            };
            let right_nullable =
                nullable || matches!(kind, Some(OuterKind::Left | OuterKind::Full));
            if matches!(kind, Some(OuterKind::Right | OuterKind::Full)) {
                for relation in &left.relations {
                    builder.nullable[*relation] = true;
                }
            }
            let right = self.walk_factor(&join.relation, builder, right_nullable)?;
            left = self.combine(left, right, kind, constraint, builder)?;
        }
        Ok(left)
    }

    fn walk_factor<'a>(
        &mut self,
        factor: &'a TableFactor,
        builder: &mut Builder,
        nullable: bool,
    ) -> Result<Walked<'a>, SqlError> {
        match factor {
            TableFactor::Table {
                name,
                alias,
                args: None,
                ..
            } => {
                let (schema, table) = table_name(name)?;
                if crate::pg_catalog::is_virtual(schema.as_deref(), &table) {
                    return Err(SqlError::unsupported("joins of catalog and user tables"));
                }
                if let Some(derived) = self.derived_relation(factor)? {
                    let qualifier = alias
                        .as_ref()
                        .map_or(table.clone(), |alias| ident_name(&alias.name));
                    return self.add_derived(derived, &qualifier, builder, nullable);
                }
                let entry = self.entry(name)?;
                let qualifier = alias
                    .as_ref()
                    .map(|alias| ident_name(&alias.name))
                    .unwrap_or(table);
                if builder
                    .relations
                    .iter()
                    .any(|relation| relation.qualifier == qualifier)
                {
                    return Err(SqlError::new(
                        "42712",
                        format!("table name \"{qualifier}\" specified more than once"),
                    ));
                }
                let mut own = table_scope(&entry.schema, &qualifier);
                if let Some(alias) = alias {
                    rename_columns(&mut own, &qualifier, &super::alias_columns(alias))?;
                }
                let relation = JoinRelation {
                    table: entry.schema.name.clone(),
                    qualifier,
                    start: builder.columns.len(),
                    width: own.columns.len(),
                    key_positions: entry.schema.primary_key.clone(),
                    operations: builder.operations..builder.operations + 1,
                    derived: None,
                };
                Ok(builder.add(relation, own, Some(entry), nullable))
            }
            TableFactor::Table {
                name,
                alias,
                args: Some(args),
                ..
            } if table_name(name)?.1 == "generate_series" => {
                let qualifier = alias
                    .as_ref()
                    .map_or("generate_series".to_string(), |alias| {
                        ident_name(&alias.name)
                    });
                let derived = self.series_relation(&args.args, alias.as_ref(), &qualifier)?;
                self.add_derived(derived, &qualifier, builder, nullable)
            }
            TableFactor::Derived { alias, .. } => {
                let derived = self.derived_in_join(factor)?;
                let qualifier = alias
                    .as_ref()
                    .map(|alias| ident_name(&alias.name))
                    .unwrap_or_default();
                self.add_derived(derived, &qualifier, builder, nullable)
            }
            TableFactor::NestedJoin {
                table_with_joins,
                alias: None,
            } => self.walk_item(table_with_joins, builder, nullable),
            other => Err(SqlError::unsupported(format!("FROM {other} in a join"))),
        }
    }

    /// A subquery in FROM inside a join: planned as any query (constants and the virtual
    /// catalog included), under its alias.
    fn derived_in_join(&mut self, factor: &TableFactor) -> Result<(Source, Scope), SqlError> {
        let TableFactor::Derived {
            lateral,
            subquery,
            alias,
            sample,
        } = factor
        else {
            unreachable!("called for a derived table");
        };
        if *lateral {
            return Err(SqlError::unsupported("LATERAL"));
        }
        if sample.is_some() {
            return Err(SqlError::unsupported("TABLESAMPLE"));
        }
        let Some(alias) = alias else {
            return Err(SqlError::syntax("subquery in FROM must have an alias")
                .with_hint("For example, FROM (SELECT ...) [AS] foo."));
        };
        let execution = self.query(subquery)?;
        super::derived_scope(
            execution,
            &ident_name(&alias.name),
            &super::alias_columns(alias),
        )
    }

    /// `generate_series(start, stop [, step])` in a join: its rows computed here from constant
    /// arguments (`crate::series`), a derived table without operations.
    pub(super) fn series_relation(
        &mut self,
        args: &[ast::FunctionArg],
        alias: Option<&ast::TableAlias>,
        qualifier: &str,
    ) -> Result<(Source, Scope), SqlError> {
        let empty = Scope::default();
        let mut values: Vec<Value> = Vec::with_capacity(args.len());
        for (at, arg) in args.iter().enumerate() {
            let ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(expr)) = arg else {
                return Err(SqlError::unsupported("named arguments of generate_series"));
            };
            // Untyped literals take the first argument's type; a timestamp's step is an
            // interval (PostgreSQL resolves `'1 day'` so).
            let first = values.first().and_then(crate::expr::value_type);
            let hint = match (at, first) {
                (0, _) => None,
                (2, Some(DataType::Timestamp | DataType::TimestampTz | DataType::Date)) => {
                    Some(DataType::Interval)
                }
                (_, first) => first,
            };
            let value = self.compiler(&empty).compile(expr, hint)?.evaluate(&[])?;
            values.push(match (value, hint, expr) {
                (Value::Text(text), Some(hint), Expr::Value(_)) => {
                    crate::expr::cast_value(&Value::Text(text), hint)?
                }
                (value, _, _) => value,
            });
        }
        let (data_type, rows) = crate::series::generate(&values, super::join::JOIN_ROWS_MAX)?;
        // As in PostgreSQL: the alias's column, else the alias itself, else the function's name.
        let name = match alias {
            Some(alias) => alias
                .columns
                .first()
                .map_or(ident_name(&alias.name), |column| ident_name(&column.name)),
            None => "generate_series".to_string(),
        };
        let execution = crate::series::execution(&name, data_type, rows);
        super::derived_scope(execution, qualifier, &[])
    }

    /// Adds a derived table (its execution as `Source::Derived`, its scope under its
    /// qualifier) as the join's next relation; its operations follow the relations' before it.
    fn add_derived<'a>(
        &mut self,
        (source, own): (Source, Scope),
        qualifier: &str,
        builder: &mut Builder,
        nullable: bool,
    ) -> Result<Walked<'a>, SqlError> {
        let qualifier = qualifier.to_string();
        let Source::Derived(execution) = source else {
            return Err(SqlError::new(
                sqlstate::INTERNAL_ERROR,
                "a derived table planned as another source",
            ));
        };
        if builder
            .relations
            .iter()
            .any(|relation| relation.qualifier == qualifier)
        {
            return Err(SqlError::new(
                "42712",
                format!("table name \"{qualifier}\" specified more than once"),
            ));
        }
        let count = execution.operations.len();
        let relation = JoinRelation {
            table: qualifier.clone(),
            qualifier,
            start: builder.columns.len(),
            width: own.columns.len(),
            key_positions: Vec::new(),
            operations: builder.operations..builder.operations + count,
            derived: Some(execution),
        };
        Ok(builder.add(relation, own, None, nullable))
    }

    /// `left JOIN right` with its kind and constraint.
    fn combine<'a>(
        &mut self,
        left: Walked<'a>,
        right: Walked<'a>,
        kind: Option<OuterKind>,
        constraint: &'a ast::JoinConstraint,
        builder: &mut Builder,
    ) -> Result<Walked<'a>, SqlError> {
        let mut on = Vec::new();
        let mut using_names: Vec<String> = Vec::new();
        match constraint {
            ast::JoinConstraint::On(expr) => flatten_and(expr, &mut on),
            ast::JoinConstraint::Using(names) => {
                for name in names {
                    let parts = crate::expr::object_name_parts(name)?;
                    match parts.as_slice() {
                        [name] => using_names.push(name.clone()),
                        _ => {
                            return Err(SqlError::syntax(format!(
                                "syntax error at or near \"{name}\""
                            )))
                        }
                    }
                }
            }
            ast::JoinConstraint::Natural => {
                let visible = |star: &[usize]| -> Vec<String> {
                    star.iter()
                        .map(|at| builder.columns[*at].name.clone())
                        .filter(|name| name != engine::schema::ROW_ID_COLUMN)
                        .collect()
                };
                let right_names = visible(&right.star);
                using_names = visible(&left.star)
                    .into_iter()
                    .filter(|name| right_names.contains(name))
                    .collect();
            }
            ast::JoinConstraint::None => {
                if kind.is_some() {
                    return Err(SqlError::syntax("an outer join needs ON, USING or NATURAL"));
                }
            }
        }
        let mut using = Vec::new();
        let mut merges = Vec::new();
        let mut merged_star = Vec::new();
        let mut left_star = left.star;
        let mut right_star = right.star;
        for name in &using_names {
            let left_at = using_column(builder, &left_star, name, "left")?;
            let right_at = using_column(builder, &right_star, name, "right")?;
            let (left_type, right_type) = (
                builder.columns[left_at].data_type,
                builder.columns[right_at].data_type,
            );
            let numeric = |data_type: DataType| {
                matches!(
                    data_type,
                    DataType::Int | DataType::BigInt | DataType::Double | DataType::Numeric { .. }
                )
            };
            let comparable = std::mem::discriminant(&left_type)
                == std::mem::discriminant(&right_type)
                || (numeric(left_type) && numeric(right_type));
            if !comparable {
                return Err(SqlError::new(
                    sqlstate::UNDEFINED_FUNCTION,
                    format!(
                        "operator does not exist: {} = {}",
                        left_type.name(),
                        right_type.name()
                    ),
                )
                .with_hint("No operator matches the given name and argument types."));
            }
            using.push(Scalar::Binary(
                Operator::Compare(CompareOp::Equal),
                Box::new(Scalar::Column(left_at)),
                Box::new(Scalar::Column(right_at)),
            ));
            left_star.retain(|at| *at != left_at);
            right_star.retain(|at| *at != right_at);
            match kind {
                None | Some(OuterKind::Left) => {
                    builder.columns[right_at].hidden = true;
                    merged_star.push(left_at);
                }
                Some(OuterKind::Right) => {
                    builder.columns[left_at].hidden = true;
                    merged_star.push(right_at);
                }
                Some(OuterKind::Full) => {
                    builder.columns[left_at].hidden = true;
                    builder.columns[right_at].hidden = true;
                    let target = builder.columns.len();
                    let data_type = if left_type == right_type {
                        left_type
                    } else if numeric(left_type) {
                        numeric_result(left_type, right_type)
                    } else {
                        DataType::Text { length_max: None }
                    };
                    builder.columns.push(ScopeColumn {
                        table: None,
                        name: name.clone(),
                        data_type,
                        virtual_catalog: false,
                        hidden: false,
                    });
                    let mut owners = builder.owners[left_at].clone();
                    owners.extend(builder.owners[right_at].iter().copied());
                    builder.owners.push(owners);
                    merges.push(Merge {
                        target,
                        left: left_at,
                        right: right_at,
                        data_type,
                    });
                    merged_star.push(target);
                }
            }
        }
        let mut star = merged_star;
        star.extend(left_star);
        star.extend(right_star);
        let mut relations = left.relations;
        relations.extend(right.relations);
        let draft = match kind {
            None => {
                let mut children = Vec::new();
                let (mut all_on, mut all_using) = (on, using);
                match left.draft {
                    Draft::Inner {
                        children: inner,
                        on: inner_on,
                        using: inner_using,
                    } => {
                        children.extend(inner);
                        all_on.extend(inner_on);
                        all_using.extend(inner_using);
                    }
                    other => children.push(other),
                }
                children.push(right.draft);
                Draft::Inner {
                    children,
                    on: all_on,
                    using: all_using,
                }
            }
            Some(kind) => Draft::Outer {
                kind,
                left: Box::new(left.draft),
                right: Box::new(right.draft),
                on,
                using,
                merges,
            },
        };
        Ok(Walked {
            draft,
            star,
            relations,
        })
    }

    /// Compiles a draft's ON conditions against the whole scope.
    fn finish_draft(
        &mut self,
        draft: Draft<'_>,
        scope: &Scope,
        plan: &JoinPlan,
    ) -> Result<JoinNode, SqlError> {
        Ok(match draft {
            Draft::Relation(index) => JoinNode::Relation(index),
            Draft::Inner {
                children,
                on,
                using,
            } => {
                let mut conditions = self.compile_on(&on, scope)?;
                conditions.extend(using);
                JoinNode::Inner {
                    children: children
                        .into_iter()
                        .map(|child| self.finish_draft(child, scope, plan))
                        .collect::<Result<_, _>>()?,
                    conditions,
                }
            }
            Draft::Outer {
                kind,
                left,
                right,
                on,
                using,
                merges,
            } => {
                let mut conditions = self.compile_on(&on, scope)?;
                conditions.extend(using);
                let left = self.finish_draft(*left, scope, plan)?;
                let right = self.finish_draft(*right, scope, plan)?;
                let mut inside = BTreeSet::new();
                collect_relations(&left, &mut inside);
                collect_relations(&right, &mut inside);
                for condition in &conditions {
                    if let Some(outside) = plan
                        .relations_of(condition)
                        .into_iter()
                        .find(|relation| !inside.contains(relation))
                    {
                        return Err(SqlError::new(
                            sqlstate::UNDEFINED_TABLE,
                            format!(
                                "invalid reference to FROM-clause entry for table \"{}\"",
                                plan.relations[outside].qualifier
                            ),
                        ));
                    }
                }
                JoinNode::Outer {
                    kind,
                    left: Box::new(left),
                    right: Box::new(right),
                    conditions,
                    merges,
                }
            }
        })
    }

    fn compile_on(&mut self, on: &[&Expr], scope: &Scope) -> Result<Vec<Scalar>, SqlError> {
        let mut conditions = Vec::with_capacity(on.len());
        for conjunct in on {
            let mut compiler = Compiler {
                scope,
                parameters: self.parameters,
                mode: Mode::Row,
                catalog: Some(self.catalog),
            };
            let scalar = compiler.compile(conjunct, Some(DataType::Boolean))?;
            if has_subquery(&scalar) {
                return Err(SqlError::unsupported("subqueries in JOIN conditions"));
            }
            check_comparisons(&scalar, &scope.types())?;
            conditions.push(scalar);
        }
        Ok(conditions)
    }
}

/// A table alias's column list (`t AS x (a, b)`): the first columns renamed, as PostgreSQL
/// does (42P10 for more names than columns).
fn rename_columns(scope: &mut Scope, qualifier: &str, names: &[String]) -> Result<(), SqlError> {
    let visible = scope
        .columns
        .iter()
        .filter(|column| column.name != engine::schema::ROW_ID_COLUMN)
        .count();
    if names.len() > visible {
        return Err(SqlError::new(
            sqlstate::INVALID_DEFINITION,
            format!(
                "table \"{qualifier}\" has {visible} columns available but {} columns specified",
                names.len()
            ),
        ));
    }
    for (column, name) in scope.columns.iter_mut().zip(names) {
        column.name = name.clone();
    }
    Ok(())
}

/// The one column named `name` among a side's visible columns.
fn using_column(
    builder: &Builder,
    star: &[usize],
    name: &str,
    side: &str,
) -> Result<usize, SqlError> {
    let mut found = star.iter().filter(|at| builder.columns[**at].name == name);
    match (found.next(), found.next()) {
        (Some(at), None) => Ok(*at),
        (Some(_), Some(_)) => Err(SqlError::new(
            sqlstate::AMBIGUOUS_COLUMN,
            format!("common column name \"{name}\" appears more than once in {side} table"),
        )),
        (None, _) => Err(SqlError::new(
            sqlstate::UNDEFINED_COLUMN,
            format!("column \"{name}\" specified in USING clause does not exist in {side} table"),
        )),
    }
}

fn collect_relations(node: &JoinNode, into: &mut BTreeSet<usize>) {
    match node {
        JoinNode::Relation(index) => {
            into.insert(*index);
        }
        JoinNode::Inner { children, .. } => {
            for child in children {
                collect_relations(child, into);
            }
        }
        JoinNode::Outer { left, right, .. } => {
            collect_relations(left, into);
            collect_relations(right, into);
        }
    }
}

/// Refuses a comparison of two non-constant operands whose types have no operator
/// (`text = integer`: 42883 at planning, as PostgreSQL). A constant is coerced to the other
/// side's type when compiled (`name = 1` is 22P02, as PostgreSQL's unknown literal).
fn check_comparisons(scalar: &Scalar, types: &[DataType]) -> Result<(), SqlError> {
    let numeric = |data_type: DataType| {
        matches!(
            data_type.widened(),
            DataType::Int | DataType::BigInt | DataType::Double | DataType::Numeric { .. }
        )
    };
    let mut copy = scalar.clone();
    let mut pending = vec![&mut copy];
    while let Some(scalar) = pending.pop() {
        if let Scalar::Binary(Operator::Compare(operator), left, right) = scalar {
            let constant = |scalar: &Scalar| matches!(scalar, Scalar::Constant(_));
            if let (false, false, Some(left_type), Some(right_type)) = (
                constant(left),
                constant(right),
                left.data_type(types),
                right.data_type(types),
            ) {
                let comparable = std::mem::discriminant(&left_type)
                    == std::mem::discriminant(&right_type)
                    || (numeric(left_type) && numeric(right_type));
                if !comparable {
                    return Err(SqlError::new(
                        sqlstate::UNDEFINED_FUNCTION,
                        format!(
                            "operator does not exist: {} {} {}",
                            left_type.name(),
                            operator.symbol(),
                            right_type.name()
                        ),
                    )
                    .with_hint(
                        "No operator matches the given name and argument types. You might need to add explicit type casts.",
                    ));
                }
            }
        }
        pending.extend(super::operands_mut(scalar));
    }
    Ok(())
}

fn has_subquery(scalar: &Scalar) -> bool {
    let mut copy = scalar.clone();
    let mut pending = vec![&mut copy];
    while let Some(scalar) = pending.pop() {
        match scalar {
            Scalar::Subquery(_) => return true,
            other => pending.extend(super::operands_mut(other)),
        }
    }
    false
}

impl JoinPlan {
    /// EXPLAIN's lines for the gateway's join.
    pub fn describe(&self) -> Vec<String> {
        let mut lines = vec![format!(
            "Gateway: join {} tables ({}): hash join on equality conditions, nested loop otherwise",
            self.relations.len(),
            self.relations
                .iter()
                .map(|relation| relation.qualifier.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )];
        if let Some(probe) = &self.probe {
            let relation = &self.relations[probe.relation];
            lines.push(format!(
                "Gateway: semi-join inside a transaction block: read the other tables first, then {} only for their distinct values of ({}), by primary key (one batch outside a block)",
                relation.qualifier,
                probe
                    .bindings
                    .iter()
                    .map(|binding| format!(
                        "{} = {}.{}",
                        binding.column,
                        self.relations[binding.driver].qualifier,
                        binding.driver_column
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        lines
    }
}

/// The types a semi-join binds a probed column from: integers of any width (the driver's
/// value converted to the probed column's type), or one non-numeric type whose values compare
/// as stored (texts of any length bound). Floating and exact decimals, CHAR, intervals and
/// JSONB are left to the hash join (their equality is not their values' identity).
fn bindable(probe: DataType, driver: DataType) -> bool {
    let integer = |data_type: DataType| {
        matches!(
            data_type,
            DataType::SmallInt | DataType::Int | DataType::BigInt
        )
    };
    let plain = |data_type: DataType| {
        matches!(
            data_type,
            DataType::Boolean
                | DataType::Text { .. }
                | DataType::Bytea
                | DataType::Date
                | DataType::Timestamp
                | DataType::TimestampTz
                | DataType::Uuid
        )
    };
    (integer(probe) && integer(driver))
        || (plain(probe) && std::mem::discriminant(&probe) == std::mem::discriminant(&driver))
}

/// The columns a read's top-level conjuncts pin to constants (`c = v`, `c IN (…)`).
fn pinned_columns(predicates: &[Predicate]) -> BTreeSet<String> {
    let mut pinned = BTreeSet::new();
    let mut pending: Vec<&Predicate> = predicates.iter().collect();
    while let Some(predicate) = pending.pop() {
        match predicate {
            Predicate::And(operands) => pending.extend(operands.iter()),
            Predicate::Compare {
                column,
                op: CompareOp::Equal,
                ..
            }
            | Predicate::In { column, .. } => {
                pinned.insert(column.clone());
            }
            _ => {}
        }
    }
    pinned
}

/// The relation a semi-join probes, if any. A relation qualifies when it is a table joined
/// by the top inner node (not under an outer join), every column of its primary key is bound
/// by an equality with a column of another table of the join (`s_i_id = ol_i_id`) or pinned
/// by a constant pushed into its read (`s_w_id = 1`), at least one by a join, and some other
/// relation's read is filtered (without statistics, the filtered side is taken to be the
/// small one). Among several, the one with the fewest pushed conjuncts (then the last).
fn choose_probe(
    plan: &JoinPlan,
    builder: &Builder,
    pushed: &[Vec<Predicate>],
    children: &[JoinNode],
    conditions: &[Scalar],
) -> Option<Probe> {
    let single_owner = |position: usize| match plan.owners.get(position).map(Vec::as_slice) {
        Some([owner]) => Some(*owner),
        _ => None,
    };
    let mut best: Option<(usize, Probe)> = None;
    for child in children {
        let JoinNode::Relation(relation) = child else {
            continue;
        };
        let relation = *relation;
        let Some(entry) = &builder.entries[relation] else {
            continue;
        };
        if builder.nullable[relation] || plan.relations[relation].derived.is_some() {
            continue;
        }
        let schema = &entry.schema;
        if schema.primary_key.is_empty() {
            continue;
        }
        let start = plan.relations[relation].start;
        let mut bindings: Vec<ProbeBinding> = Vec::new();
        for condition in conditions {
            let Scalar::Binary(Operator::Compare(CompareOp::Equal), a, b) = condition else {
                continue;
            };
            let (Scalar::Column(a), Scalar::Column(b)) = (a.as_ref(), b.as_ref()) else {
                continue;
            };
            let (own, other) = match (single_owner(*a), single_owner(*b)) {
                (Some(x), Some(y)) if x == relation && y != relation => (*a, *b),
                (Some(x), Some(y)) if y == relation && x != relation => (*b, *a),
                _ => continue,
            };
            let offset = own - start;
            if !schema.primary_key.contains(&offset) {
                continue;
            }
            let driver = single_owner(other).expect("checked above");
            let Some(driver_entry) = builder.entries[driver]
                .as_ref()
                .filter(|_| plan.relations[driver].derived.is_none())
            else {
                continue;
            };
            let column = &schema.columns[offset];
            if !bindable(column.data_type, plan.types[other]) {
                continue;
            }
            if bindings.iter().any(|binding| binding.column == column.name) {
                continue;
            }
            bindings.push(ProbeBinding {
                column: column.name.clone(),
                data_type: column.data_type,
                driver,
                offset: other - plan.relations[driver].start,
                driver_column: driver_entry.schema.columns[other - plan.relations[driver].start]
                    .name
                    .clone(),
            });
        }
        if bindings.is_empty() {
            continue;
        }
        let pinned = pinned_columns(&pushed[relation]);
        let covered = schema.primary_key.iter().all(|position| {
            let name = &schema.columns[*position].name;
            pinned.contains(name) || bindings.iter().any(|binding| binding.column == *name)
        });
        let others_filtered =
            (0..plan.relations.len()).any(|other| other != relation && !pushed[other].is_empty());
        if !covered || !others_filtered {
            continue;
        }
        let probe = Probe {
            relation,
            bindings,
            options: builder
                .entries
                .iter()
                .map(|entry| entry.as_ref().map(|entry| entry.options.clone()))
                .collect(),
        };
        let weight = pushed[relation].len();
        if best.as_ref().is_none_or(|(fewest, _)| weight <= *fewest) {
            best = Some((weight, probe));
        }
    }
    best.map(|(_, probe)| probe)
}
