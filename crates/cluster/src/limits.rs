//! Bounds on what one statement may send through the cluster.
//!
//! A SQL statement travels as one operation: through the bypass to one partition group (one VR
//! request and one Prepare to the group's backups), or through the routers as one E-Cast
//! message (one Prepare in the router group, then a share to every partition). Each of those
//! is one frame between processes, and a frame over the link's limit
//! (`runtime::ecast::link::FRAME_BYTES_MAX`, 64 MiB) is refused by its receiver: a larger
//! statement would be resent until its gateway gave up ("no primary answered"), and a VR
//! Prepare may batch several requests. So a statement's operation is bounded well below the
//! frame limit, and one over the bound is refused before it is sent, with SQLSTATE 54000.

use engine::EngineError;

/// The most bytes one statement's operation may take (half of the runtime's frame limit,
/// leaving room for the key sets, the batching of other requests into the same Prepare and the
/// frame's own fields).
pub const STATEMENT_BYTES_MAX: usize = 32 << 20;

/// Refuses an operation of more than `STATEMENT_BYTES_MAX` bytes: nothing was sent.
pub fn check_statement_size(operation: &[u8]) -> Result<(), EngineError> {
    if operation.len() <= STATEMENT_BYTES_MAX {
        return Ok(());
    }
    Err(EngineError::ProgramLimitExceeded {
        limit: format!(
            "a statement of {} bytes exceeds the cluster's limit of {STATEMENT_BYTES_MAX} bytes per statement (split a large COPY or INSERT into several)",
            operation.len()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_up_to_the_bound_pass_and_larger_ones_are_refused_with_54000() {
        assert_eq!(check_statement_size(&[]), Ok(()));
        assert_eq!(check_statement_size(&vec![0; STATEMENT_BYTES_MAX]), Ok(()));
        let error = check_statement_size(&vec![0; STATEMENT_BYTES_MAX + 1]).unwrap_err();
        assert_eq!(error.code(), "54000");
        assert!(error.to_string().contains("split a large COPY"), "{error}");
    }
}
