//! The gateway's merge: partitions' outputs → one statement result.
//!
//! Rows: each partition returns its rows in primary key order; the merge orders the union by
//! primary key (a merge of sorted runs), so the input to everything after it is exactly what a
//! single partition holding every row would have returned. Then, in SQL's order: residual
//! filter, grouping (engine partials merged per group key, or partials folded from rows here),
//! HAVING, ORDER BY (a stable sort, so ties keep primary key or group key order — which makes
//! the answer independent of how rows are split), OFFSET/LIMIT, projection. Aggregate partials
//! merge as the engine defines them: counts and sums add, minima and maxima compare, averages
//! carry (sum, count) and divide only at the end.

use crate::error::{sqlstate, SqlError};
use crate::expr::{cast_value, compare_values, Scalar};
use crate::plan::{
    project_returning, ChangedReturning, CommandKind, Execution, Finish, Grouping, QueryPlan,
    Source,
};
use crate::StatementResult;
use engine::{AggregateFunction, DataType, Operation, OperationResult, Output, Partial, Value};
use std::cmp::Ordering;
use std::collections::BTreeMap;

impl Execution {
    /// Merges the partitions' results: `results[partition][operation]`, one entry per
    /// partition the operations were sent to, each with one result per operation (for a
    /// split insert, the partitions that received no rows may be left out).
    ///
    /// The merged result is bounded as each partition's is (`bound_merged`): a statement over
    /// P partitions may receive up to P × `engine::RESULT_BYTES_MAX` of rows, and the rows it
    /// answers must fit in `MERGED_RESULT_BYTES_MAX`, else 54000.
    pub fn finish(&self, results: Vec<Vec<OperationResult>>) -> Result<StatementResult, SqlError> {
        bound_merged(self.finish_unbounded(results)?)
    }

    fn finish_unbounded(
        &self,
        results: Vec<Vec<OperationResult>>,
    ) -> Result<StatementResult, SqlError> {
        if let Finish::Window(window) = &self.finish {
            return window.finish(results);
        }
        if let Finish::Query(plan) = &self.finish {
            if let Source::Derived(inner) = &plan.source {
                return self.finish_derived(plan, inner, results);
            }
            if let Some(result) = self.finish_with_subquery_tables(plan, &results) {
                return result;
            }
        }
        if let Finish::Changed(changed) = &self.finish {
            return changed.finish(&results);
        }
        if let Finish::Returning(returning) = &self.finish {
            if let Some(upsert) = &returning.upsert {
                return upsert.finish(returning, &results);
            }
        }
        if let Finish::Sequence(advance) = &self.finish {
            return advance.finish(&results);
        }
        if let Finish::SetOperation(set) = &self.finish {
            let rows = set_rows(&set.node, &set.columns, &results)?;
            return Ok(StatementResult::Rows {
                columns: set.columns.clone(),
                tag: format!("SELECT {}", rows.len()),
                rows,
            });
        }
        let mut outputs: Vec<Output> = Vec::new();
        for partition in results {
            for result in partition {
                outputs.push(result?);
            }
        }
        match &self.finish {
            Finish::Command(kind) => Ok(StatementResult::Command {
                tag: command_tag(*kind, &outputs),
            }),
            Finish::Query(plan) => plan.finish(outputs),
            Finish::SetOperation(_)
            | Finish::Changed(_)
            | Finish::Window(_)
            | Finish::Sequence(_) => {
                unreachable!("finished above")
            }
            Finish::Returning(returning) => {
                let tag = command_tag(CommandKind::Insert, &outputs);
                let inserted: u64 = outputs
                    .iter()
                    .map(|output| match output {
                        Output::Inserted { count } => *count,
                        _ => 0,
                    })
                    .sum();
                if inserted != returning.rows.len() as u64 {
                    return Err(SqlError::new(
                        sqlstate::INTERNAL_ERROR,
                        format!(
                            "INSERT … RETURNING inserted {inserted} rows, not {}",
                            returning.rows.len()
                        ),
                    ));
                }
                Ok(StatementResult::Rows {
                    columns: returning.columns.clone(),
                    rows: returning.rows.clone(),
                    tag,
                })
            }
        }
    }
}

/// Most bytes of rows the gateway answers for one statement, counted as a partition counts its
/// result (`engine::operation::result_row_bytes`): the same bound as one partition's
/// (`engine::RESULT_BYTES_MAX`), so merging P partitions' answers never answers more than one
/// partition could. A constant, like the partitions' bound.
pub const MERGED_RESULT_BYTES_MAX: usize = engine::RESULT_BYTES_MAX;

fn merged_too_large() -> SqlError {
    SqlError::new(
        sqlstate::PROGRAM_LIMIT_EXCEEDED,
        format!(
            "the result of this query is larger than {MERGED_RESULT_BYTES_MAX} bytes, the most the gateway returns for one statement (add a LIMIT, narrow the WHERE clause, or read the rows in key ranges)"
        ),
    )
}

/// A merged result if its rows hold at most `MERGED_RESULT_BYTES_MAX` bytes, else 54000.
pub fn bound_merged(result: StatementResult) -> Result<StatementResult, SqlError> {
    if let StatementResult::Rows { rows, .. } = &result {
        let bytes = rows
            .iter()
            .map(|row| engine::operation::result_row_bytes(row))
            .fold(0, usize::saturating_add);
        if bytes > MERGED_RESULT_BYTES_MAX {
            return Err(merged_too_large());
        }
    }
    Ok(result)
}

impl crate::plan::UpsertReturning {
    /// The rows an INSERT … ON CONFLICT inserted or updated, from `results[partition] =
    /// [select of the proposed keys, insert]`: the statement replayed over the stored rows read
    /// (as `engine::table::Table::insert` executes it), projected. Any partition's error is the
    /// statement's; the rows found must number what the partitions counted.
    fn finish(
        &self,
        returning: &crate::plan::Returning,
        results: &[Vec<OperationResult>],
    ) -> Result<StatementResult, SqlError> {
        use engine::table::Conflict;
        let schema = &self.schema;
        let mut stored: BTreeMap<Vec<Value>, Vec<Value>> = BTreeMap::new();
        let mut outputs: Vec<Output> = Vec::new();
        for partition in results {
            for result in partition {
                match result.clone()? {
                    Output::Rows { rows, .. } => {
                        for row in rows {
                            stored.insert(schema.key_of(&row), row);
                        }
                    }
                    output => outputs.push(output),
                }
            }
        }
        let mut changed: Vec<Vec<Value>> = Vec::new();
        for (key, row) in &self.bound.rows {
            let Some(existing) = stored.get_mut(key) else {
                stored.insert(key.clone(), row.clone());
                changed.push(row.clone());
                continue;
            };
            let upsert = match &self.bound.on_conflict {
                Conflict::DoNothing => continue,
                Conflict::DoUpdateComputed(upsert) => upsert,
                other => {
                    return Err(SqlError::new(
                        sqlstate::INTERNAL_ERROR,
                        format!("ON CONFLICT … RETURNING with {other:?}"),
                    ))
                }
            };
            let mut both = existing.clone();
            both.extend(row.iter().cloned());
            if let Some(condition) = &upsert.condition {
                if engine::expression::truth(&condition.evaluate(&both)?)? != Some(true) {
                    continue;
                }
            }
            for (position, expression) in &upsert.assignments {
                let column = &schema.columns[*position];
                let value = engine::expression::assign(
                    &expression.evaluate(&both)?,
                    column.data_type,
                    &column.name,
                )?;
                existing[*position] = schema.check_value(*position, &value)?;
            }
            changed.push(existing.clone());
        }
        let tag = command_tag(CommandKind::Insert, &outputs);
        let counted: u64 = outputs
            .iter()
            .map(|output| match output {
                Output::Inserted { count } => *count,
                _ => 0,
            })
            .sum();
        if counted != changed.len() as u64 {
            return Err(SqlError::new(
                sqlstate::INTERNAL_ERROR,
                format!(
                    "INSERT … ON CONFLICT … RETURNING found {} rows, the partitions {counted}",
                    changed.len()
                ),
            ));
        }
        let rows = changed
            .iter()
            .map(|row| {
                crate::plan::project_returning(&returning.projection, &returning.columns, row)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(StatementResult::Rows {
            columns: returning.columns.clone(),
            rows,
            tag,
        })
    }
}

impl ChangedReturning {
    /// The changed rows from `results[partition] = [select, write]`: the selected rows of
    /// every partition (as they were before the write), with UPDATE's SET clauses applied,
    /// in primary key order, projected. Any partition's error is the statement's.
    fn finish(&self, results: &[Vec<OperationResult>]) -> Result<StatementResult, SqlError> {
        let mut old_rows: Vec<Vec<Value>> = Vec::new();
        let mut outputs: Vec<Output> = Vec::new();
        for partition in results {
            for result in partition {
                match result.clone()? {
                    Output::Rows { rows, .. } => old_rows.extend(rows),
                    output => outputs.push(output),
                }
            }
        }
        let tag = command_tag(self.kind, &outputs);
        let changed = outputs
            .iter()
            .map(|output| match output {
                Output::Updated { count } | Output::Deleted { count } => *count,
                _ => 0,
            })
            .sum::<u64>();
        // The select and the write ran at one point of the order with one predicate.
        if changed != old_rows.len() as u64 {
            return Err(SqlError::new(
                sqlstate::INTERNAL_ERROR,
                format!(
                    "RETURNING read {} rows but the statement changed {changed}",
                    old_rows.len()
                ),
            ));
        }
        old_rows.sort_by(|left, right| {
            self.key
                .iter()
                .map(|position| left[*position].cmp(&right[*position]))
                .find(|ordering| ordering.is_ne())
                .unwrap_or(Ordering::Equal)
        });
        let mut rows = Vec::with_capacity(old_rows.len());
        for old in old_rows {
            let mut row = old.clone();
            for (position, data_type, name, expression) in &self.assignments {
                row[*position] =
                    engine::expression::assign(&expression.evaluate(&old)?, *data_type, name)?;
            }
            rows.push(project_returning(&self.projection, &self.columns, &row)?);
        }
        Ok(StatementResult::Rows {
            columns: self.columns.clone(),
            rows,
            tag,
        })
    }
}

/// The rows of a set operation node: each query finished on its own share of every
/// partition's results, cast to the unified column types, then combined as PostgreSQL does
/// (without ALL: distinct rows; NULLs equal each other). Rows come in value order.
fn set_rows(
    node: &crate::plan::SetNode,
    columns: &[crate::OutputColumn],
    results: &[Vec<OperationResult>],
) -> Result<Vec<Vec<Value>>, SqlError> {
    use crate::plan::SetNode;
    use sqlparser::ast::SetOperator;
    match node {
        SetNode::Query {
            execution,
            operations,
        } => {
            let own: Vec<Vec<OperationResult>> = results
                .iter()
                .map(|partition| partition[operations.clone()].to_vec())
                .collect();
            let StatementResult::Rows { rows, .. } = execution.finish(own)? else {
                return Err(SqlError::new(
                    sqlstate::INTERNAL_ERROR,
                    "a query of a set operation answered no rows",
                ));
            };
            rows.into_iter()
                .map(|row| {
                    row.iter()
                        .zip(columns)
                        .map(|(value, column)| cast_value(value, column.data_type))
                        .collect()
                })
                .collect()
        }
        SetNode::Operation {
            operator,
            all,
            left,
            right,
        } => {
            let left = set_rows(left, columns, results)?;
            let right = set_rows(right, columns, results)?;
            let mut counts: BTreeMap<Vec<Value>, (usize, usize)> = BTreeMap::new();
            for row in left {
                counts.entry(row).or_default().0 += 1;
            }
            for row in right {
                counts.entry(row).or_default().1 += 1;
            }
            let mut rows = Vec::new();
            for (row, (in_left, in_right)) in counts {
                let times = match (operator, all) {
                    (SetOperator::Union, true) => in_left + in_right,
                    (SetOperator::Union, false) => usize::from(in_left + in_right > 0),
                    (SetOperator::Intersect, true) => in_left.min(in_right),
                    (SetOperator::Intersect, false) => usize::from(in_left > 0 && in_right > 0),
                    (SetOperator::Except, true) => in_left.saturating_sub(in_right),
                    (SetOperator::Except, false) => usize::from(in_left > 0 && in_right == 0),
                    (other, _) => {
                        return Err(SqlError::unsupported(format!("set operator {other}")))
                    }
                };
                for _ in 0..times {
                    rows.push(row.clone());
                }
            }
            Ok(rows)
        }
    }
}

impl Execution {
    /// A query over a derived table: the inner execution finished on the first operations'
    /// results of every partition, then this query over its rows (the remaining operations
    /// are the query's subquery tables, as for any query over rows the gateway holds).
    fn finish_derived(
        &self,
        plan: &QueryPlan,
        inner: &Execution,
        results: Vec<Vec<OperationResult>>,
    ) -> Result<StatementResult, SqlError> {
        let count = inner.operations.len();
        assert!(count <= self.operations.len());
        let own = results
            .iter()
            .map(|partition| {
                partition.get(..count).map(<[_]>::to_vec).ok_or_else(|| {
                    SqlError::new(
                        sqlstate::INTERNAL_ERROR,
                        "a partition answered fewer results than the statement's operations",
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let StatementResult::Rows { rows, .. } = inner.finish(own)? else {
            return Err(SqlError::new(
                sqlstate::INTERNAL_ERROR,
                "a subquery in FROM answered no rows",
            ));
        };
        let mut outer = plan.clone();
        outer.source = Source::Rows(rows);
        Execution {
            operations: self.operations.clone(),
            routing: self.routing.clone(),
            finish: Finish::Query(outer),
            created_table: None,
            notices: Vec::new(),
        }
        .finish(results)
    }

    /// A query whose subqueries read user tables: the operations after the query's own are
    /// those tables' rows (from every partition), given to the subqueries before the query is
    /// finished. `None` when the query has no such subquery.
    fn finish_with_subquery_tables(
        &self,
        plan: &QueryPlan,
        results: &[Vec<OperationResult>],
    ) -> Option<Result<StatementResult, SqlError>> {
        // The query itself sends one operation (none when the gateway holds its rows): any
        // more are subquery tables. Checked first, so plain queries are not cloned.
        let own = plan.source.operation_count();
        if self.operations.len() <= own {
            return None;
        }
        let mut plan = plan.clone();
        let mut indexes: Vec<usize> = Vec::new();
        crate::plan::visit_plan_subqueries(&mut plan, &mut |subquery| {
            if let Some((_, index)) = &subquery.table {
                indexes.push(*index);
            }
        });
        let first = *indexes.iter().min()?;
        assert!(indexes.iter().all(|index| *index < self.operations.len()));
        Some((|| {
            let mut outputs: Vec<Output> = Vec::new();
            let mut tables: Vec<Vec<Vec<Value>>> = vec![Vec::new(); self.operations.len()];
            for partition in results {
                for (at, result) in partition.iter().enumerate() {
                    let output = result.clone()?;
                    if at < first {
                        outputs.push(output);
                        continue;
                    }
                    match output {
                        Output::Rows { rows, .. } => tables[at].extend(rows),
                        other => return Err(unexpected(&other)),
                    }
                }
            }
            crate::plan::visit_plan_subqueries(&mut plan, &mut |subquery| {
                if let Some((_, index)) = &subquery.table {
                    subquery.rows = std::mem::take(&mut tables[*index]);
                }
            });
            plan.finish(outputs)
        })())
    }
}

fn command_tag(kind: CommandKind, outputs: &[Output]) -> String {
    let count: u64 = outputs
        .iter()
        .map(|output| match output {
            Output::Inserted { count } | Output::Updated { count } | Output::Deleted { count } => {
                *count
            }
            _ => 0,
        })
        .sum();
    match kind {
        CommandKind::CreateTable => "CREATE TABLE".into(),
        CommandKind::CreateIndex => "CREATE INDEX".into(),
        CommandKind::DropTable => "DROP TABLE".into(),
        CommandKind::Insert => format!("INSERT 0 {count}"),
        CommandKind::Update => format!("UPDATE {count}"),
        CommandKind::Delete => format!("DELETE {count}"),
        CommandKind::Copy => format!("COPY {count}"),
        CommandKind::Truncate => "TRUNCATE TABLE".into(),
        CommandKind::CreateSequence => "CREATE SEQUENCE".into(),
        CommandKind::DropSequence => "DROP SEQUENCE".into(),
        CommandKind::AlterTable => "ALTER TABLE".into(),
        CommandKind::DropIndex => "DROP INDEX".into(),
        CommandKind::CreateView => "CREATE VIEW".into(),
        CommandKind::DropView => "DROP VIEW".into(),
    }
}

/// Orders values for ORDER BY: SQL comparison, falling back to the engine's total order for
/// values SQL cannot compare (so sorting never fails half-way).
fn sort_compare(left: &Value, right: &Value) -> Ordering {
    compare_values(left, right)
        .ok()
        .flatten()
        .unwrap_or_else(|| left.cmp(right))
}

impl QueryPlan {
    /// Merges the partitions' outputs for this query (one output per partition; none when
    /// the source is `Rows`).
    pub fn finish(&self, outputs: Vec<Output>) -> Result<StatementResult, SqlError> {
        let rows = match &self.grouping {
            Some(grouping) => self.grouped_rows(grouping, outputs)?,
            None => self.input_rows(outputs)?,
        };
        // Evaluate the projection and the sort keys, sort stably, cut, keep the projection.
        // (sort keys, projected row, DISTINCT ON keys).
        let mut keyed: Vec<(Vec<Value>, Vec<Value>, Vec<Value>)> = Vec::with_capacity(rows.len());
        let mut seen: std::collections::BTreeSet<Vec<Value>> = Default::default();
        // Without DISTINCT ON, OFFSET or LIMIT every projected row is answered (DISTINCT drops
        // its repeats before they are kept): stop as soon as they pass the merged bound rather
        // than project them all first.
        let answers_every_row =
            self.distinct_on.is_empty() && self.offset == 0 && self.limit.is_none();
        let mut kept_bytes: usize = 0;
        for row in &rows {
            let projected = evaluate_all(&self.projection, row)?;
            if answers_every_row {
                kept_bytes =
                    kept_bytes.saturating_add(engine::operation::result_row_bytes(&projected));
                if kept_bytes > MERGED_RESULT_BYTES_MAX {
                    return Err(merged_too_large());
                }
            }
            // DISTINCT keeps a row's first occurrence; its sort keys are among its projected
            // values, so equal rows sort equally and dropping the later ones is exact.
            if self.distinct {
                let key = projected
                    .iter()
                    .zip(&self.columns)
                    .map(|(value, column)| cast_value(value, column.data_type))
                    .collect::<Result<Vec<_>, _>>()?;
                if !seen.insert(key) {
                    continue;
                }
            }
            let keys = self
                .order_by
                .iter()
                .map(|key| key.scalar.evaluate(row))
                .collect::<Result<Vec<_>, _>>()?;
            let on = self
                .distinct_on
                .iter()
                .map(|key| key.evaluate(row))
                .collect::<Result<Vec<_>, _>>()?;
            keyed.push((keys, projected, on));
        }
        if !self.order_by.is_empty() {
            keyed.sort_by(|(left, _, _), (right, _, _)| {
                for ((a, b), key) in left.iter().zip(right).zip(&self.order_by) {
                    let ordering = match (a.is_null(), b.is_null()) {
                        (true, true) => Ordering::Equal,
                        (true, false) => {
                            if key.nulls_first {
                                Ordering::Less
                            } else {
                                Ordering::Greater
                            }
                        }
                        (false, true) => {
                            if key.nulls_first {
                                Ordering::Greater
                            } else {
                                Ordering::Less
                            }
                        }
                        (false, false) => {
                            let ordering = sort_compare(a, b);
                            if key.descending {
                                ordering.reverse()
                            } else {
                                ordering
                            }
                        }
                    };
                    if ordering != Ordering::Equal {
                        return ordering;
                    }
                }
                Ordering::Equal
            });
        }
        if !self.distinct_on.is_empty() {
            // The first row of each DISTINCT ON value, in sort order (the sort is stable;
            // NULLs are one value, as PostgreSQL groups them).
            let mut seen: std::collections::BTreeSet<Vec<Value>> = Default::default();
            keyed.retain(|(_, _, on)| seen.insert(on.clone()));
        }
        let offset = usize::try_from(self.offset).unwrap_or(usize::MAX);
        let limit = self.limit.map_or(usize::MAX, |limit| {
            usize::try_from(limit).unwrap_or(usize::MAX)
        });
        let rows = keyed
            .into_iter()
            .skip(offset)
            .take(limit)
            .map(|(_, projected, _)| {
                projected
                    .into_iter()
                    .zip(&self.columns)
                    .map(|(value, column)| cast_value(&value, column.data_type))
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let tag = format!("SELECT {}", rows.len());
        Ok(StatementResult::Rows {
            columns: self.columns.clone(),
            rows,
            tag,
        })
    }

    /// The input rows: merged in key order, residual applied.
    fn input_rows(&self, outputs: Vec<Output>) -> Result<Vec<Vec<Value>>, SqlError> {
        let mut rows = match &self.source {
            Source::Rows(rows) => rows.clone(),
            Source::Engine { key_positions } => {
                let mut rows = Vec::new();
                for output in outputs {
                    match output {
                        Output::Rows {
                            rows: partition_rows,
                            ..
                        } => rows.extend(partition_rows),
                        other => return Err(unexpected(&other)),
                    }
                }
                // Each partition's rows are in key order; order the union the same way.
                rows.sort_by(|left, right| {
                    key_positions
                        .iter()
                        .map(|at| left[*at].cmp(&right[*at]))
                        .find(|ordering| ordering.is_ne())
                        .unwrap_or(Ordering::Equal)
                });
                rows
            }
            Source::Join(join) => join.rows_from_outputs(outputs)?,
            Source::EngineGroups | Source::Derived(_) => {
                return Err(SqlError::new(
                    sqlstate::INTERNAL_ERROR,
                    "groups where rows were expected",
                ))
            }
        };
        if let Some(residual) = &self.residual {
            let mut kept = Vec::with_capacity(rows.len());
            for row in rows {
                if residual.qualifies(&row)? {
                    kept.push(row);
                }
            }
            rows = kept;
        }
        Ok(rows)
    }

    /// The grouped rows (group columns, then aggregate results), HAVING applied, in group key
    /// order.
    fn grouped_rows(
        &self,
        grouping: &Grouping,
        outputs: Vec<Output>,
    ) -> Result<Vec<Vec<Value>>, SqlError> {
        let mut groups: BTreeMap<Vec<Value>, Vec<Partial>> = BTreeMap::new();
        let argument_types: Vec<Option<DataType>> = grouping
            .aggregates
            .iter()
            .map(|call| {
                call.argument
                    .as_ref()
                    .and_then(|argument| argument.data_type(&self.input_types))
            })
            .collect();
        let initial = grouping
            .aggregates
            .iter()
            .zip(&argument_types)
            .map(|(call, data_type)| initial_partial(call.function, *data_type))
            .collect::<Result<Vec<_>, _>>()?;
        // string_agg's values per group and call: (sort keys, value, separator).
        type Collected = Vec<Vec<(Vec<Value>, Value, Value)>>;
        let ordered = grouping
            .aggregates
            .iter()
            .any(|call| call.ordered.is_some());
        let mut collected: BTreeMap<Vec<Value>, Collected> = BTreeMap::new();
        if let Source::EngineGroups = self.source {
            for output in outputs {
                let Output::Groups {
                    groups: partition_groups,
                    ..
                } = output
                else {
                    return Err(unexpected(&output));
                };
                for group in partition_groups {
                    match groups.get_mut(&group.key) {
                        Some(partials) => merge_partials(partials, &group.partials)?,
                        None => {
                            groups.insert(group.key, group.partials);
                        }
                    }
                }
            }
        } else {
            let mut seen: BTreeMap<Vec<Value>, crate::expr::SeenValues> = BTreeMap::new();
            for row in self.input_rows(outputs)? {
                if ordered {
                    let key: Vec<Value> = grouping
                        .group_by
                        .iter()
                        .map(|at| row[*at].clone())
                        .collect();
                    let seen = seen
                        .entry(key.clone())
                        .or_insert_with(|| crate::expr::SeenValues::new(grouping.aggregates.len()));
                    let lists = collected
                        .entry(key)
                        .or_insert_with(|| vec![Vec::new(); grouping.aggregates.len()]);
                    for (index, call) in grouping.aggregates.iter().enumerate() {
                        let (Some(string_agg), Some(argument)) = (&call.ordered, &call.argument)
                        else {
                            continue;
                        };
                        let value = argument.evaluate(&row)?;
                        if value.is_null() || !seen.admit(index, call, &value) {
                            continue;
                        }
                        let keys = string_agg
                            .order_by
                            .iter()
                            .map(|(key, _, _)| key.evaluate(&row))
                            .collect::<Result<Vec<_>, _>>()?;
                        lists[index].push((keys, value, string_agg.separator.evaluate(&row)?));
                    }
                }
                let key: Vec<Value> = grouping
                    .group_by
                    .iter()
                    .map(|at| row[*at].clone())
                    .collect();
                let seen = seen
                    .entry(key.clone())
                    .or_insert_with(|| crate::expr::SeenValues::new(grouping.aggregates.len()));
                let partials = groups.entry(key).or_insert_with(|| initial.clone());
                for (index, ((call, partial), data_type)) in grouping
                    .aggregates
                    .iter()
                    .zip(partials.iter_mut())
                    .zip(&argument_types)
                    .enumerate()
                {
                    match &call.argument {
                        None => partial.add(&Value::Null),
                        Some(argument) => {
                            let value = argument.evaluate(&row)?;
                            if !value.is_null() {
                                let value = match data_type {
                                    Some(data_type) => cast_value(&value, *data_type)?,
                                    None => value,
                                };
                                if seen.admit(index, call, &value) {
                                    partial.add(&value);
                                }
                            }
                        }
                    }
                }
            }
        }
        // Without GROUP BY there is exactly one group, even over no rows and no partitions.
        if grouping.group_by.is_empty() && groups.is_empty() {
            groups.insert(Vec::new(), initial);
        }
        let mut rows = Vec::with_capacity(groups.len());
        for (key, partials) in groups {
            let mut lists = collected.remove(&key).unwrap_or_default();
            let mut row = key;
            for (index, partial) in partials.iter().enumerate() {
                row.push(match &grouping.aggregates[index].ordered {
                    Some(string_agg) => string_agg
                        .finish(lists.get_mut(index).map(std::mem::take).unwrap_or_default()),
                    None => finish_partial(partial)?,
                });
            }
            if let Some(having) = &grouping.having {
                if !having.qualifies(&row)? {
                    continue;
                }
            }
            rows.push(row);
        }
        Ok(rows)
    }
}

fn evaluate_all(scalars: &[Scalar], row: &[Value]) -> Result<Vec<Value>, SqlError> {
    scalars.iter().map(|scalar| scalar.evaluate(row)).collect()
}

fn unexpected(output: &Output) -> SqlError {
    SqlError::new(
        sqlstate::INTERNAL_ERROR,
        format!("unexpected engine output {output:?}"),
    )
}

/// The partial an aggregate starts from, as the engine would bind it.
pub(crate) fn initial_partial(
    function: AggregateFunction,
    argument: Option<DataType>,
) -> Result<Partial, SqlError> {
    let not_numeric = || {
        SqlError::new(
            sqlstate::UNDEFINED_FUNCTION,
            format!(
                "function {}({}) does not exist",
                function_name(function),
                argument.map_or("unknown".into(), DataType::name)
            ),
        )
    };
    Ok(match function {
        AggregateFunction::CountRows | AggregateFunction::Count => Partial::Count(0),
        AggregateFunction::Min => Partial::Min(Value::Null),
        AggregateFunction::Max => Partial::Max(Value::Null),
        AggregateFunction::Sum => match argument.map(DataType::widened) {
            Some(DataType::Int | DataType::BigInt) | None => Partial::SumInteger(None),
            Some(DataType::Double) => Partial::SumDouble(None),
            Some(DataType::Numeric { .. }) => Partial::SumNumeric {
                sum: Value::Null,
                overflow: false,
            },
            _ => return Err(not_numeric()),
        },
        AggregateFunction::Avg => match argument.map(DataType::widened) {
            Some(DataType::Int | DataType::BigInt) | None => {
                Partial::AvgInteger { sum: 0, count: 0 }
            }
            Some(DataType::Double) => Partial::AvgDouble { sum: 0.0, count: 0 },
            Some(DataType::Numeric { .. }) => Partial::AvgNumeric {
                sum: Value::Null,
                count: 0,
                overflow: false,
            },
            _ => return Err(not_numeric()),
        },
    })
}

fn function_name(function: AggregateFunction) -> &'static str {
    match function {
        AggregateFunction::CountRows | AggregateFunction::Count => "count",
        AggregateFunction::Sum => "sum",
        AggregateFunction::Min => "min",
        AggregateFunction::Max => "max",
        AggregateFunction::Avg => "avg",
    }
}

/// Folds another partition's partials for the same group into `into`.
pub fn merge_partials(into: &mut [Partial], from: &[Partial]) -> Result<(), SqlError> {
    if into.len() != from.len() {
        return Err(SqlError::new(
            sqlstate::INTERNAL_ERROR,
            "partitions returned different aggregates",
        ));
    }
    for (into, from) in into.iter_mut().zip(from) {
        match (into, from) {
            (Partial::Count(a), Partial::Count(b)) => *a += b,
            (Partial::SumInteger(a), Partial::SumInteger(b)) => {
                if let Some(b) = b {
                    *a = Some(a.unwrap_or(0) + b);
                }
            }
            (Partial::SumDouble(a), Partial::SumDouble(b)) => {
                if let Some(b) = b {
                    *a = Some(a.unwrap_or(0.0) + b);
                }
            }
            (Partial::Min(a), Partial::Min(b)) => {
                if !b.is_null() && (a.is_null() || b < a) {
                    *a = b.clone();
                }
            }
            (Partial::Max(a), Partial::Max(b)) => {
                if !b.is_null() && (a.is_null() || b > a) {
                    *a = b.clone();
                }
            }
            (
                Partial::AvgInteger { sum, count },
                Partial::AvgInteger {
                    sum: other_sum,
                    count: other_count,
                },
            ) => {
                *sum += other_sum;
                *count += other_count;
            }
            (
                Partial::AvgDouble { sum, count },
                Partial::AvgDouble {
                    sum: other_sum,
                    count: other_count,
                },
            ) => {
                *sum += other_sum;
                *count += other_count;
            }
            (
                Partial::SumNumeric { sum, overflow },
                Partial::SumNumeric {
                    sum: other_sum,
                    overflow: other_overflow,
                },
            ) => {
                *overflow |= other_overflow;
                engine::operation::add_numeric(sum, overflow, other_sum);
            }
            (
                Partial::AvgNumeric {
                    sum,
                    count,
                    overflow,
                },
                Partial::AvgNumeric {
                    sum: other_sum,
                    count: other_count,
                    overflow: other_overflow,
                },
            ) => {
                *overflow |= other_overflow;
                engine::operation::add_numeric(sum, overflow, other_sum);
                *count += other_count;
            }
            _ => {
                return Err(SqlError::new(
                    sqlstate::INTERNAL_ERROR,
                    "partitions returned partials of different kinds",
                ))
            }
        }
    }
    Ok(())
}

/// An aggregate's final value.
pub fn finish_partial(partial: &Partial) -> Result<Value, SqlError> {
    Ok(match partial {
        Partial::Count(count) => Value::BigInt(i64::try_from(*count).unwrap_or(i64::MAX)),
        Partial::SumInteger(None) | Partial::SumDouble(None) => Value::Null,
        Partial::SumInteger(Some(sum)) => Value::BigInt(i64::try_from(*sum).map_err(|_| {
            SqlError::new(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "bigint out of range")
        })?),
        Partial::SumDouble(Some(sum)) => Value::Double(*sum),
        Partial::Min(value) | Partial::Max(value) => value.clone(),
        Partial::AvgInteger { count: 0, .. } | Partial::AvgDouble { count: 0, .. } => Value::Null,
        Partial::AvgInteger { sum, count } => Value::Double(*sum as f64 / *count as f64),
        Partial::AvgDouble { sum, count } => Value::Double(sum / *count as f64),
        Partial::SumNumeric { overflow: true, .. } | Partial::AvgNumeric { overflow: true, .. } => {
            return Err(engine::numeric::overflow().into())
        }
        Partial::SumNumeric { sum, .. } => sum.clone(),
        Partial::AvgNumeric { count: 0, .. } => Value::Null,
        Partial::AvgNumeric { sum, count, .. } => match sum {
            Value::Numeric(sum) => {
                let count = engine::numeric::Decimal::from(*count);
                Value::Numeric(engine::numeric::divide(*sum, count)?)
            }
            _ => Value::Null,
        },
    })
}

/// For a gateway that merges partial results of an operation it split (e.g. an aggregate
/// sent to several partitions), whether an operation's outputs can be merged by `finish`.
pub fn is_mergeable(operation: &Operation) -> bool {
    matches!(
        operation,
        Operation::Select { .. } | Operation::Aggregate { .. }
    )
}
