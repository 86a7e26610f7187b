//! `SELECT … FOR UPDATE | FOR SHARE [NOWAIT]`: the row locks a query asks for inside a
//! transaction block. The planner plans the query as it would without the clause; the front
//! end hands the locking to the transaction (`docs/internals/sprint.md`): FOR UPDATE takes the
//! locks a write of the same rows would (exclusive), FOR SHARE the shared locks every read in a
//! block takes anyway; NOWAIT fails with 55P03 instead of waiting; SKIP LOCKED leaves out the
//! rows other transactions hold and locks the rows it returns (a job queue's worker). Outside a
//! block FOR UPDATE / FOR SHARE [NOWAIT] change nothing a client can see (PostgreSQL releases
//! the locks when the statement ends); SKIP LOCKED is refused there by the front end.

use crate::error::SqlError;
use sqlparser::ast::{self, Statement};

/// How a query wants its rows locked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowLocking {
    /// FOR UPDATE (exclusive), rather than FOR SHARE.
    pub exclusive: bool,
    /// NOWAIT: a lock another transaction holds fails the statement at once (55P03).
    pub nowait: bool,
    /// SKIP LOCKED: rows another transaction holds in a conflicting mode are left out.
    pub skip_locked: bool,
}

/// The locking clause of a top-level SELECT, if any. Refused (0A000): `OF table`, and a
/// clause with DISTINCT, GROUP BY, HAVING or a set operation (PostgreSQL refuses those too).
/// SKIP LOCKED is checked against the plan by the front end (one table, no join).
pub fn row_locking(statement: &Statement) -> Result<Option<RowLocking>, SqlError> {
    let Statement::Query(query) = statement else {
        return Ok(None);
    };
    if query.locks.is_empty() {
        return Ok(None);
    }
    let mut locking = RowLocking {
        exclusive: false,
        nowait: false,
        skip_locked: false,
    };
    for clause in &query.locks {
        if clause.of.is_some() {
            return Err(SqlError::unsupported("FOR UPDATE/SHARE OF a table"));
        }
        match clause.nonblock {
            Some(ast::NonBlock::SkipLocked) => locking.skip_locked = true,
            Some(ast::NonBlock::Nowait) => locking.nowait = true,
            None => {}
        }
        if clause.lock_type == ast::LockType::Update {
            locking.exclusive = true;
        }
    }
    let ast::SetExpr::Select(select) = query.body.as_ref() else {
        return Err(SqlError::unsupported(
            "FOR UPDATE/SHARE with UNION, INTERSECT or EXCEPT",
        ));
    };
    let grouped =
        !matches!(&select.group_by, ast::GroupByExpr::Expressions(exprs, _) if exprs.is_empty());
    if select.distinct.is_some() || grouped || select.having.is_some() {
        return Err(SqlError::unsupported(
            "FOR UPDATE/SHARE with DISTINCT, GROUP BY or HAVING",
        ));
    }
    Ok(Some(locking))
}

impl crate::Prepared {
    /// The locking clause of the prepared statement (`row_locking`).
    pub fn row_locking(&self) -> Result<Option<RowLocking>, SqlError> {
        match &self.statement {
            Some(statement) => row_locking(statement),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn locking(sql: &str) -> Result<Option<RowLocking>, SqlError> {
        row_locking(&crate::parse(sql).unwrap()[0])
    }

    #[test]
    fn clauses_are_read_and_the_unsupported_ones_named() {
        assert_eq!(locking("SELECT * FROM t").unwrap(), None);
        assert_eq!(
            locking("SELECT * FROM t WHERE id = 1 FOR UPDATE").unwrap(),
            Some(RowLocking {
                exclusive: true,
                nowait: false,
                skip_locked: false,
            })
        );
        assert_eq!(
            locking("SELECT * FROM t FOR SHARE NOWAIT").unwrap(),
            Some(RowLocking {
                exclusive: false,
                nowait: true,
                skip_locked: false,
            })
        );
        assert_eq!(
            locking("SELECT * FROM t ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED").unwrap(),
            Some(RowLocking {
                exclusive: true,
                nowait: false,
                skip_locked: true,
            })
        );
        for refused in [
            "SELECT * FROM t FOR UPDATE OF t",
            "SELECT DISTINCT a FROM t FOR UPDATE",
            "SELECT a FROM t GROUP BY a FOR UPDATE",
        ] {
            let error = locking(refused).unwrap_err();
            assert_eq!(error.code, "0A000", "{refused}");
        }
    }
}
