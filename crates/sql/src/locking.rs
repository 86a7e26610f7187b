//! `SELECT … FOR UPDATE | FOR SHARE [NOWAIT]`: the row locks a query asks for inside a
//! transaction block. The planner plans the query as it would without the clause; the front
//! end hands the locking to the transaction (`docs/internals/sprint.md`): FOR UPDATE takes the
//! locks a write of the same rows would (exclusive), FOR SHARE the shared locks every read in a
//! block takes anyway; NOWAIT fails with 55P03 instead of waiting. Outside a block the clause
//! changes nothing a client can see (PostgreSQL releases the locks when the statement ends).

use crate::error::SqlError;
use sqlparser::ast::{self, Statement};

/// How a query wants its rows locked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowLocking {
    /// FOR UPDATE (exclusive), rather than FOR SHARE.
    pub exclusive: bool,
    /// NOWAIT: a lock another transaction holds fails the statement at once (55P03).
    pub nowait: bool,
}

/// The locking clause of a top-level SELECT, if any. Refused (0A000): `SKIP LOCKED`, `OF
/// table`, and a clause with DISTINCT, GROUP BY, HAVING or a set operation (PostgreSQL refuses
/// those too).
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
    };
    for clause in &query.locks {
        if clause.of.is_some() {
            return Err(SqlError::unsupported("FOR UPDATE/SHARE OF a table"));
        }
        match clause.nonblock {
            Some(ast::NonBlock::SkipLocked) => {
                return Err(SqlError::unsupported("FOR UPDATE/SHARE SKIP LOCKED"))
            }
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
                nowait: false
            })
        );
        assert_eq!(
            locking("SELECT * FROM t FOR SHARE NOWAIT").unwrap(),
            Some(RowLocking {
                exclusive: false,
                nowait: true
            })
        );
        for refused in [
            "SELECT * FROM t FOR UPDATE SKIP LOCKED",
            "SELECT * FROM t FOR UPDATE OF t",
            "SELECT DISTINCT a FROM t FOR UPDATE",
            "SELECT a FROM t GROUP BY a FOR UPDATE",
        ] {
            let error = locking(refused).unwrap_err();
            assert_eq!(error.code, "0A000", "{refused}");
        }
    }
}
