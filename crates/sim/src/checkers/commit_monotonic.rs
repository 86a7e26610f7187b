//! Commit numbers and the view never go back within one incarnation of a replica, and (with
//! disk durability) the view never goes below what the replica durably promised, even across
//! restarts: a view held only in memory may be lost, but nothing was sent for it.

use super::Violation;
use wire::{Op, View};

#[derive(Clone, Default)]
struct Seen {
    commit_min: Op,
    commit_max: Op,
    view: View,
    view_persisted: View,
}

pub struct CommitMonotonic {
    seen: Vec<Seen>,
}

impl CommitMonotonic {
    pub fn new(replica_count: usize) -> CommitMonotonic {
        CommitMonotonic {
            seen: vec![Seen::default(); replica_count],
        }
    }

    /// A restart begins a new incarnation: its commit numbers start over. Views persisted on
    /// disk must not go back, so `keep_view` keeps the view floor.
    pub fn restart(&mut self, replica: usize, keep_view: bool) {
        let view = if keep_view {
            self.seen[replica].view_persisted
        } else {
            View(0)
        };
        self.seen[replica] = Seen {
            view,
            view_persisted: view,
            ..Seen::default()
        };
    }

    pub fn observe(
        &mut self,
        replica: usize,
        commit_min: Op,
        commit_max: Op,
        view: View,
        view_persisted: View,
    ) -> Result<(), Violation> {
        let seen = &mut self.seen[replica];
        let went_back = if commit_min < seen.commit_min {
            Some(format!(
                "commit_min went from {} to {}",
                seen.commit_min, commit_min
            ))
        } else if commit_max < seen.commit_max {
            Some(format!(
                "commit_max went from {} to {}",
                seen.commit_max, commit_max
            ))
        } else if view < seen.view {
            Some(format!("view went from {} to {}", seen.view, view))
        } else {
            None
        };
        if let Some(report) = went_back {
            return Err(Violation {
                checker: "commit_monotonic",
                report: format!("replica {replica}: {report}"),
            });
        }
        *seen = Seen {
            commit_min,
            commit_max,
            view,
            view_persisted: seen.view_persisted.max(view_persisted),
        };
        Ok(())
    }
}
