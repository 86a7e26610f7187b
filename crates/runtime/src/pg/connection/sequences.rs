//! Statements that draw from or set sequences (`sql::sequence`): the planner names what the
//! statement needs, this runs each request as one ordered write at the partition that owns the
//! sequence (outside any transaction block: nextval is never undone), then plans the statement
//! again with the values drawn. No protocol logic here: the batch, its routing and the values
//! it yields are the `sql` crate's.

use super::super::protocol::Fail;
use super::{answered_here, backend_error, is_stale_catalog, Connection};
use crate::pg::TransactionBackend;
use engine::{Command, Outcome};
use sql::error::sqlstate;
use sql::sequence::{SequenceRequest, SequenceUse};
use sql::{Plan, SqlError, StatementResult};
use tokio::io::{AsyncRead, AsyncWrite};

/// A plan for a statement planned again (after a stale catalog) with the values already drawn:
/// if the tables changed so that it now needs other values, it is refused rather than run with
/// placeholders.
pub(super) fn final_plan(planned: Result<(Plan, SequenceUse), SqlError>) -> Result<Plan, SqlError> {
    let (plan, used) = planned?;
    if !used.is_final() {
        return Err(SqlError::new(
            "40001",
            "the tables changed while the statement drew sequence values",
        )
        .with_hint("run the statement again"));
    }
    Ok(plan)
}

impl<B, R, W> Connection<B, R, W>
where
    B: TransactionBackend,
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send,
{
    /// Plans with the session's sequence state; when the statement draws from or sets
    /// sequences, runs those writes and plans again with the values. Returns the digest, the
    /// plan, and the state to plan again with after a stale catalog (`final_plan`).
    pub(super) async fn planned_sequenced(
        &mut self,
        plan: impl Fn(&sql::MemoryCatalog, SequenceUse) -> Result<(Plan, SequenceUse), SqlError>,
    ) -> Result<(u64, Plan, SequenceUse), Fail> {
        let start = self.session.sequences();
        let (digest, (planned, used)) = self
            // A statement that draws is not answered from the catalog alone: the draw is an
            // ordered write guarded by the catalog digest, so it needs no catalog read.
            .planned(
                |catalog| plan(catalog, start.clone()),
                |(planned, used)| answered_here(planned) && used.is_final(),
            )
            .await?;
        if used.is_final() {
            self.session.set_sequences(&used);
            return Ok((digest, planned, start));
        }
        let mut drawn = Vec::with_capacity(used.requests.len());
        for request in &used.requests {
            let values = self.draw(request).await?;
            drawn.push((request.clone(), values));
        }
        let supplied = used.supplied(&drawn);
        let (digest, (planned, used)) = self
            .planned(|catalog| plan(catalog, supplied.clone()), |_| false)
            .await?;
        let planned = final_plan(Ok((planned, used.clone())))?;
        self.session.set_sequences(&used);
        Ok((digest, planned, supplied))
    }

    /// Runs one request at the sequence's partition (planned against the cached catalog, again
    /// against a fresh one if the sequence changed meanwhile); the values drawn.
    async fn draw(&mut self, request: &SequenceRequest) -> Result<Vec<i64>, Fail> {
        let mut fresh = false;
        for _ in 0..8 {
            let (digest, catalog) = self.catalog(fresh).await?;
            let execution = match sql::sequence::advance(catalog.as_ref(), request) {
                Err(_) if !fresh => {
                    fresh = true;
                    continue;
                }
                planned => planned?,
            };
            self.check_privileges(&execution.operations).await?;
            let command = Command::Guarded {
                catalog: digest,
                command: Box::new(Command::Batch(execution.operations.clone())),
            };
            // Never inside the transaction block: a sequence advance is not undone.
            let outcomes = self
                .backend
                .execute_routed(&execution.routing, command)
                .await
                .map_err(backend_error)?;
            let mut results = Vec::with_capacity(outcomes.len());
            let mut stale = false;
            for (_, outcome) in outcomes {
                match outcome {
                    Outcome::Batch(partition) => results.push(partition),
                    Outcome::Error(error) => {
                        let error = SqlError::from(error);
                        if is_stale_catalog(&error) {
                            stale = true;
                            break;
                        }
                        return Err(Fail::Error(error));
                    }
                    _ => {
                        return Err(Fail::Error(SqlError::new(
                            sqlstate::INTERNAL_ERROR,
                            "a sequence's partition answered with another kind of outcome",
                        )))
                    }
                }
            }
            if stale || results.is_empty() {
                fresh = true;
                continue;
            }
            let result: StatementResult = execution.finish(results)?;
            let values = sql::sequence::drawn_values(&result);
            if let SequenceRequest::Next { count, .. } = request {
                assert_eq!(values.len() as u64, *count, "one value per nextval drawn");
            }
            return Ok(values);
        }
        Err(Fail::Error(SqlError::new(
            "40001",
            format!(
                "sequence \"{}\" kept changing while values were drawn",
                request.sequence()
            ),
        )))
    }
}
