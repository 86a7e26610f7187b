//! A join's semi-join, run in two steps (`JoinPlan::probe`, chosen by `join::choose_probe`).
//!
//! The one-batch plan reads every table of a join at one point of the order, each filtered
//! only by its own conjuncts: TPC-C's Stock-Level reads a warehouse's whole stock (100,000
//! rows) to join it with ~200 order lines. A semi-join reads the other tables first
//! (`SemiJoin::first`), then the probed table only for the distinct values their rows give
//! for its bound primary-key columns (`SemiJoin::probe`: its pushed conjuncts and `column IN
//! (…)` per binding, point lookups by primary key, routed to the partitions of the keys it
//! pins), and joins as before (`SemiJoin::finish`: the two steps' results laid out as the
//! one-batch plan's, so the join, aggregates and ordering are the same code).
//!
//! **Two points of the order.** The steps read at two points, so the gateway runs a
//! semi-join only inside a transaction block, where the first step's locks keep its rows
//! unchanged until the block ends and the probe locks the rows it reads (strict two-phase
//! locking makes the two reads one serialisable read). Outside a block the gateway sends the
//! one-batch plan (`Execution::operations`), which is unchanged.
//!
//! **Same answer.** Every joined row satisfies each binding's equality, so a probed row that
//! is not read (its key is no driving row's value) joins with nothing; probed rows read beyond
//! those (an IN list per column is a cartesian superset for a composite key) are filtered by
//! the join's own conditions as before. Driving values convert to the probed column's type
//! (`join::bindable`: integers of any width, or one non-numeric type); a value out of the
//! column's range equals no stored value and is dropped, as are NULLs.

use super::join::{JoinPlan, Probe};
use super::{routing_of, CommandKind, Execution, Finish, Routing, Source};
use crate::error::{sqlstate, SqlError};
use crate::StatementResult;
use engine::{Operation, OperationResult, Output, Predicate, Value};
use std::collections::BTreeSet;

/// The probe reads by lookups only up to this many keys (the engine's bound on one
/// statement's point lookups); beyond it, it reads with its pushed conjuncts alone (as the
/// one-batch plan does).
pub const PROBE_KEYS_MAX: usize = engine::planner::LOOKUP_KEYS_MAX;

/// A semi-join plan's steps (`Execution::semi_join`).
#[derive(Clone, Copy, Debug)]
pub struct SemiJoin<'a> {
    execution: &'a Execution,
    join: &'a JoinPlan,
    probe: &'a Probe,
    /// The probed relation's operation in the one-batch plan.
    at: usize,
}

impl Execution {
    /// The steps of a semi-join, when the plan is a join with a probed relation
    /// (`JoinPlan::probe`). The gateway runs them only inside a transaction block (module doc).
    pub fn semi_join(&self) -> Option<SemiJoin<'_>> {
        let Finish::Query(query) = &self.finish else {
            return None;
        };
        let Source::Join(join) = &query.source else {
            return None;
        };
        let probe = join.probe.as_ref()?;
        let operations = &join.relations[probe.relation].operations;
        assert_eq!(operations.len(), 1, "a probed relation is a table");
        let at = operations.start;
        assert!(
            matches!(self.operations.get(at), Some(Operation::Select { .. })),
            "a probed relation is read by one Select"
        );
        Some(SemiJoin {
            execution: self,
            join,
            probe,
            at,
        })
    }
}

impl SemiJoin<'_> {
    /// The first step: every operation of the one-batch plan but the probed table's, routed
    /// as a one-table read when one table remains (`routing_of` its pushed conjuncts), else to
    /// every partition. Its finish is never used: its results go to `probe` and `finish`.
    pub fn first(&self) -> Execution {
        let mut operations = self.execution.operations.clone();
        operations.remove(self.at);
        let routing = match operations.as_slice() {
            [Operation::Select {
                table, predicate, ..
            }] => self
                .join
                .relations
                .iter()
                .zip(&self.probe.options)
                .find(|(relation, _)| relation.derived.is_none() && relation.table == *table)
                .and_then(|(_, options)| options.as_ref())
                .map_or(Routing::Every, |options| {
                    routing_of(predicate.as_ref(), options)
                }),
            _ => Routing::Every,
        };
        Execution {
            operations,
            routing,
            finish: Finish::Command(CommandKind::Insert),
            created_table: None,
            notices: Vec::new(),
        }
    }

    /// The first step's operation index of a relation's `Select`.
    fn first_index(&self, relation: usize) -> usize {
        let at = self.join.relations[relation].operations.start;
        assert_ne!(at, self.at, "a driving relation is not the probed one");
        if at > self.at {
            at - 1
        } else {
            at
        }
    }

    /// The second step from the first step's results (`results[partition][operation]`): the
    /// probed table's `Select` with `column IN (the driving values)` per binding, routed by
    /// its predicate. `None` when some binding has no value: no probed row can join.
    pub fn probe(&self, first: &[Vec<OperationResult>]) -> Result<Option<Execution>, SqlError> {
        let mut lists: Vec<Vec<Value>> = Vec::with_capacity(self.probe.bindings.len());
        for binding in &self.probe.bindings {
            let at = self.first_index(binding.driver);
            let mut values: BTreeSet<Value> = BTreeSet::new();
            for partition in first {
                let Some(result) = partition.get(at) else {
                    return Err(internal(
                        "a semi-join's first step answered too few results",
                    ));
                };
                let rows = match result {
                    Ok(Output::Rows { rows, .. }) => rows,
                    Ok(other) => {
                        return Err(internal(format!(
                            "a semi-join's driving table answered {other:?}"
                        )))
                    }
                    Err(error) => return Err(error.clone().into()),
                };
                for row in rows {
                    let Some(value) = row.get(binding.offset) else {
                        return Err(internal("a driving row is narrower than its table"));
                    };
                    if value.is_null() {
                        continue;
                    }
                    // Out of the probed column's range: equal to no stored value.
                    if let Ok(value) = crate::expr::cast_value(value, binding.data_type) {
                        values.insert(value);
                    }
                }
            }
            if values.is_empty() {
                return Ok(None);
            }
            lists.push(values.into_iter().collect());
        }
        let Some(Operation::Select {
            table,
            columns,
            predicate,
            limit,
        }) = self.execution.operations.get(self.at).cloned()
        else {
            unreachable!("checked by semi_join");
        };
        let mut conjuncts: Vec<Predicate> = match predicate {
            None => Vec::new(),
            Some(Predicate::And(operands)) => operands,
            Some(other) => vec![other],
        };
        let combinations = lists
            .iter()
            .try_fold(1usize, |product, list| product.checked_mul(list.len()));
        if combinations.is_some_and(|count| count <= PROBE_KEYS_MAX) {
            for (binding, values) in self.probe.bindings.iter().zip(lists) {
                conjuncts.push(Predicate::In {
                    column: binding.column.clone(),
                    values,
                });
            }
        }
        let predicate = match conjuncts.len() {
            0 => None,
            1 => conjuncts.pop(),
            _ => Some(Predicate::And(conjuncts)),
        };
        let options = self.probe.options[self.probe.relation]
            .as_ref()
            .expect("a probed relation is a table");
        Ok(Some(Execution {
            routing: routing_of(predicate.as_ref(), options),
            operations: vec![Operation::Select {
                table,
                columns,
                predicate,
                limit,
            }],
            finish: Finish::Command(CommandKind::Insert),
            created_table: None,
            notices: Vec::new(),
        }))
    }

    /// The statement's answer from both steps' results (`probe`: none when `probe` answered
    /// `None`), laid out as the one-batch plan's results: each step's partitions, with empty
    /// rows for the operations the step did not send (every operation's rows are the union
    /// over partitions, so this is what one partition holding them all answers).
    pub fn finish(
        &self,
        first: Vec<Vec<OperationResult>>,
        probe: Vec<Vec<OperationResult>>,
    ) -> Result<StatementResult, SqlError> {
        let count = self.execution.operations.len();
        let empty = || {
            Ok(Output::Rows {
                columns: Vec::new(),
                rows: Vec::new(),
            })
        };
        let mut results: Vec<Vec<OperationResult>> = Vec::with_capacity(first.len() + probe.len());
        for mut partition in first {
            if partition.len() + 1 != count {
                return Err(internal(
                    "a semi-join's first step answered the wrong count",
                ));
            }
            partition.insert(self.at, empty());
            results.push(partition);
        }
        for partition in probe {
            let [result] = <[OperationResult; 1]>::try_from(partition)
                .map_err(|_| internal("a semi-join's probe answered the wrong count"))?;
            let mut laid: Vec<OperationResult> = (0..count).map(|_| empty()).collect();
            laid[self.at] = result;
            results.push(laid);
        }
        if results.is_empty() {
            // No partition answered (no driving row reached any): the one-batch plan's shape.
            results.push((0..count).map(|_| empty()).collect());
        }
        self.execution.finish(results)
    }
}

fn internal(message: impl Into<String>) -> SqlError {
    SqlError::new(sqlstate::INTERNAL_ERROR, message.into())
}
