//! VRR's safety property: committed prefixes agree. Every op a replica executes must be the
//! same entry on every replica that ever executes it; and every write a client saw acknowledged
//! must be in a committed entry (so, with prefix agreement and convergence, it is never lost).

use super::Violation;
use std::collections::{BTreeMap, BTreeSet};
use stdx::Fnv64;
use wire::{ClientId, Entry, Op, RequestNumber};

#[derive(Default)]
pub struct CommittedPrefix {
    /// Op -> (digest of the entry, the replica that first executed it).
    committed: BTreeMap<Op, (u64, usize)>,
    /// Every write request found in a committed entry.
    requests: BTreeSet<(ClientId, RequestNumber)>,
    /// Per replica: ops up to here were compared.
    compared_through: Vec<Op>,
}

pub fn digest(entry: &Entry) -> u64 {
    Fnv64::digest(&postcard::to_allocvec(entry).expect("entries serialise"))
}

impl CommittedPrefix {
    pub fn new(replica_count: usize) -> CommittedPrefix {
        CommittedPrefix {
            compared_through: vec![Op(0); replica_count],
            ..CommittedPrefix::default()
        }
    }

    pub fn restart(&mut self, replica: usize) {
        self.compared_through[replica] = Op(0);
    }

    /// The highest op any replica executed.
    pub fn op_max(&self) -> Op {
        self.committed.keys().next_back().copied().unwrap_or(Op(0))
    }

    /// Compares the newly executed ops of `replica`. `entry_at` yields the entry at an op if
    /// the replica still holds it (ops installed from a checkpoint are not in its log).
    pub fn observe<'a>(
        &mut self,
        replica: usize,
        commit_min: Op,
        entry_at: impl Fn(Op) -> Option<&'a Entry>,
    ) -> Result<(), Violation> {
        let from = self.compared_through[replica].next();
        for op in from.0..=commit_min.0 {
            let Some(entry) = entry_at(Op(op)) else {
                continue;
            };
            let entry_digest = digest(entry);
            match self.committed.get(&Op(op)) {
                Some((known, first)) if *known != entry_digest => {
                    return Err(Violation {
                        checker: "committed_prefix",
                        report: format!(
                            "op {op} executed as different entries: replica {first} and replica {replica} \
                             (this one: view {} with {} requests)",
                            entry.view,
                            entry.requests.len()
                        ),
                    });
                }
                Some(_) => {}
                None => {
                    self.committed.insert(Op(op), (entry_digest, replica));
                    for request in &entry.requests {
                        self.requests.insert((request.client, request.request));
                    }
                }
            }
        }
        self.compared_through[replica] = self.compared_through[replica].max(commit_min);
        Ok(())
    }

    /// A client got a reply to a write: it must be in a committed entry.
    pub fn acknowledged(&self, client: ClientId, request: RequestNumber) -> Result<(), Violation> {
        if self.requests.contains(&(client, request)) {
            return Ok(());
        }
        Err(Violation {
            checker: "committed_prefix",
            report: format!(
                "write {client} {request} was acknowledged but is in no committed entry"
            ),
        })
    }
}
