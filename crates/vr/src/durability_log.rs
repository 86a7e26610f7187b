//! Skyros's durability log, and its recovery in a view change (`docs/internals/skyros.md`).
//!
//! Every replica appends a nilext request here and acknowledges it at once; the primary later
//! orders the requests into the consensus log, and a request leaves the log when it executes.
//! Each entry remembers the *prefix digest*: a digest of the set of requests the replica had
//! executed or held here when it appended the entry (the caller passes the executed part). A
//! client counts an acknowledgement only if its prefix digest equals the primary's; that is
//! Tessera's deviation from the paper which makes recovery sound for f ≥ 2. Executed requests
//! are the same on every replica once it catches up, so the sets of two replicas differ only
//! while requests are in flight: a divergence never lasts.

use std::collections::BTreeMap;
use wire::{ClientId, DurabilityLogState, DurableRequest, Request, RequestNumber};

/// A request's identity in digests: a 64-bit mix of (client, request number).
pub fn request_digest(client: ClientId, request: RequestNumber) -> u64 {
    mix(client.0 ^ mix(request.0).rotate_left(17))
}

fn mix(value: u64) -> u64 {
    // splitmix64's finaliser.
    let mut z = value.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

type Id = (ClientId, RequestNumber);

/// The requests a replica holds durably but has not executed, in arrival order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DurabilityLog {
    /// By arrival sequence.
    entries: BTreeMap<u64, DurableRequest>,
    /// The keys of each entry (`None`: any key), for the primary's per-key read check.
    keys: BTreeMap<u64, Option<Vec<Vec<u8>>>>,
    key_counts: BTreeMap<Vec<u8>, usize>,
    wildcards: usize,
    by_id: BTreeMap<Id, u64>,
    sequence_next: u64,
    /// The digest of the entries held now.
    sum: u64,
}

impl DurabilityLog {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The digest of the entries held now (a wrapping sum of `request_digest`s).
    pub fn sum(&self) -> u64 {
        self.sum
    }

    /// The entry for (client, request), if held.
    pub fn get(&self, client: ClientId, request: RequestNumber) -> Option<&DurableRequest> {
        let sequence = self.by_id.get(&(client, request))?;
        self.entries.get(sequence)
    }

    /// Whether an unexecuted entry may touch one of `keys` (`None`: any key).
    pub fn conflicts(&self, keys: Option<&[Vec<u8>]>) -> bool {
        if self.entries.is_empty() {
            return false;
        }
        match keys {
            None => true,
            Some(keys) => {
                self.wildcards > 0 || keys.iter().any(|key| self.key_counts.contains_key(key))
            }
        }
    }

    fn index_keys(&mut self, sequence: u64, keys: Option<Vec<Vec<u8>>>) {
        match &keys {
            None => self.wildcards += 1,
            Some(keys) => {
                for key in keys {
                    *self.key_counts.entry(key.clone()).or_insert(0) += 1;
                }
            }
        }
        self.keys.insert(sequence, keys);
    }

    fn unindex_keys(&mut self, sequence: u64) {
        match self.keys.remove(&sequence).expect("indexed on append") {
            None => self.wildcards -= 1,
            Some(keys) => {
                for key in keys {
                    let count = self.key_counts.get_mut(&key).expect("counted on append");
                    *count -= 1;
                    if *count == 0 {
                        self.key_counts.remove(&key);
                    }
                }
            }
        }
    }

    /// Appends a request not held yet; returns its prefix digest: `executed_digest` (the
    /// digest of the requests the replica has executed) plus the digest of the entries held.
    pub fn append(
        &mut self,
        request: Request,
        keys: Option<Vec<Vec<u8>>>,
        executed_digest: u64,
    ) -> u64 {
        let id = (request.client, request.request);
        assert!(!self.by_id.contains_key(&id), "appended twice");
        let prefix_digest = executed_digest.wrapping_add(self.sum);
        self.sum = self
            .sum
            .wrapping_add(request_digest(request.client, request.request));
        let sequence = self.sequence_next;
        self.sequence_next += 1;
        self.by_id.insert(id, sequence);
        self.index_keys(sequence, keys);
        self.entries.insert(
            sequence,
            DurableRequest {
                request,
                prefix_digest,
            },
        );
        prefix_digest
    }

    /// Re-appends an entry with the digest it had (replay of persisted records).
    pub fn restore_entry(&mut self, entry: DurableRequest, keys: Option<Vec<Vec<u8>>>) {
        let id = (entry.request.client, entry.request.request);
        if self.by_id.contains_key(&id) {
            return;
        }
        self.sum = self.sum.wrapping_add(request_digest(id.0, id.1));
        let sequence = self.sequence_next;
        self.sequence_next += 1;
        self.by_id.insert(id, sequence);
        self.index_keys(sequence, keys);
        self.entries.insert(sequence, entry);
    }

    /// Drops a request (it executed), and any older request of the same client.
    pub fn remove_executed(&mut self, client: ClientId, request: RequestNumber) {
        let stale: Vec<Id> = self
            .by_id
            .range((client, RequestNumber(0))..=(client, request))
            .map(|(id, _)| *id)
            .collect();
        for id in stale {
            let sequence = self.by_id.remove(&id).expect("listed above");
            self.entries.remove(&sequence);
            self.unindex_keys(sequence);
            self.sum = self.sum.wrapping_sub(request_digest(id.0, id.1));
        }
    }

    /// Empties the log for a new view.
    pub fn clear(&mut self) {
        *self = DurabilityLog::default();
    }

    pub fn iter(&self) -> impl Iterator<Item = &DurableRequest> {
        self.entries.values()
    }

    pub fn requests(&self) -> Vec<Request> {
        self.iter().map(|entry| entry.request.clone()).collect()
    }

    pub fn to_state(&self) -> DurabilityLogState {
        DurabilityLogState {
            entries: self.iter().cloned().collect(),
        }
    }

    pub fn from_state(
        state: &DurabilityLogState,
        keys: impl Fn(&Request) -> Option<Vec<Vec<u8>>>,
    ) -> DurabilityLog {
        let mut log = DurabilityLog::default();
        for entry in &state.entries {
            log.restore_entry(entry.clone(), keys(&entry.request));
        }
        log
    }
}

/// RecoverDurabilityLog (Skyros §4.6, with Tessera's candidate rule for f ≥ 2).
///
/// `logs` are the durability logs of the view change's participants from the latest normal
/// view (at most f + 1 of them); `is_duplicate` says whether a request is already in the
/// recovered consensus log or executed. Returns the requests to append to the consensus log,
/// in an order that keeps every real-time precedence between completed requests.
///
/// 1. E: the requests present in at least ⌈f/2⌉ + 1 logs, minus duplicates (the paper).
/// 2. A request c is a *candidate* when at least ⌈f/2⌉ + 1 logs hold it after the same set of
///    E-requests, D(c). Every completed request is a candidate whose D(c) is exactly what the
///    primary held before it (acknowledgements count only with the primary's prefix digest).
/// 3. Constraints: c before z for every candidate c and every z in E outside D(c). Every
///    real-time edge x → y has x completed and y outside D(x), so it is a constraint; and the
///    constraints are acyclic, because along c → z the sets D strictly grow (D(c) ⊂ D(z)).
/// 4. A topological sort, ties broken by the order in which requests were first seen (the
///    first log's order, then each later log's new requests).
pub fn recover(
    logs: &[Vec<Request>],
    threshold: usize,
    is_duplicate: impl Fn(&Request) -> bool,
) -> Vec<Request> {
    // E, in first-seen order.
    let mut count: BTreeMap<Id, usize> = BTreeMap::new();
    let mut first_seen: Vec<Request> = Vec::new();
    for log in logs {
        let mut seen_here = std::collections::BTreeSet::new();
        for request in log {
            let id = (request.client, request.request);
            if !seen_here.insert(id) {
                continue; // A malformed log listing a request twice counts it once.
            }
            let slot = count.entry(id).or_insert(0);
            if *slot == 0 {
                first_seen.push(request.clone());
            }
            *slot += 1;
        }
    }
    let members: Vec<Request> = first_seen
        .into_iter()
        .filter(|request| count[&(request.client, request.request)] >= threshold)
        .filter(|request| !is_duplicate(request))
        .collect();
    let index: BTreeMap<Id, usize> = members
        .iter()
        .enumerate()
        .map(|(position, request)| ((request.client, request.request), position))
        .collect();
    let n = members.len();
    // For each log, each member's prefix within E (as a sorted list of member positions).
    let mut prefix_votes: Vec<BTreeMap<Vec<usize>, usize>> = vec![BTreeMap::new(); n];
    for log in logs {
        let mut prefix: Vec<usize> = Vec::new();
        let mut seen_here = std::collections::BTreeSet::new();
        for request in log {
            let id = (request.client, request.request);
            if !seen_here.insert(id) {
                continue;
            }
            let Some(&position) = index.get(&id) else {
                continue;
            };
            let mut key = prefix.clone();
            key.sort_unstable();
            *prefix_votes[position].entry(key).or_insert(0) += 1;
            prefix.push(position);
        }
    }
    // Constraints c → z for candidates c and z outside D(c).
    let mut successors: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut in_degree = vec![0usize; n];
    for c in 0..n {
        let Some((before, _)) = prefix_votes[c]
            .iter()
            .find(|(_, votes)| **votes >= threshold)
        else {
            continue;
        };
        let before: std::collections::BTreeSet<usize> = before.iter().copied().collect();
        for (z, degree) in in_degree.iter_mut().enumerate() {
            if z != c && !before.contains(&z) {
                successors[c].push(z);
                *degree += 1;
            }
        }
    }
    // Kahn's algorithm, always taking the ready member that came first.
    let mut ready: std::collections::BTreeSet<usize> =
        (0..n).filter(|member| in_degree[*member] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(next) = ready.pop_first() {
        order.push(next);
        for &z in &successors[next] {
            in_degree[z] -= 1;
            if in_degree[z] == 0 {
                ready.insert(z);
            }
        }
    }
    if order.len() < n {
        // Impossible when the logs come from correct replicas (the constraints are acyclic,
        // see above); a peer's damaged log must not stop the view change, so the rest follows
        // in first-seen order. The simulator's checkers would see any harm.
        let placed: std::collections::BTreeSet<usize> = order.iter().copied().collect();
        order.extend((0..n).filter(|member| !placed.contains(member)));
    }
    order
        .into_iter()
        .map(|position| members[position].clone())
        .collect()
}

/// ⌈f/2⌉ + 1: how many of the f + 1 participant logs must agree (Skyros §4.6).
pub fn recovery_threshold(tolerated: usize) -> usize {
    tolerated.div_ceil(2) + 1
}

/// f + ⌈f/2⌉ + 1: the replies a nilext write needs (Skyros §4.2).
pub fn supermajority(tolerated: usize) -> usize {
    tolerated + tolerated.div_ceil(2) + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::RequestKind;

    fn op(client: u64) -> Request {
        Request {
            client: ClientId(client),
            request: RequestNumber(1),
            kind: RequestKind::Nilext,
            operation: vec![client as u8],
        }
    }

    fn ids(requests: &[Request]) -> Vec<u64> {
        requests.iter().map(|request| request.client.0).collect()
    }

    #[test]
    fn quorum_sizes_follow_the_paper() {
        assert_eq!(supermajority(1), 3);
        assert_eq!(supermajority(2), 4);
        assert_eq!(supermajority(3), 6);
        assert_eq!(recovery_threshold(1), 2);
        assert_eq!(recovery_threshold(2), 2);
        assert_eq!(recovery_threshold(3), 3);
    }

    #[test]
    fn prefix_digests_depend_on_the_set_not_the_order() {
        let mut a = DurabilityLog::default();
        let mut b = DurabilityLog::default();
        a.append(op(1), None, 0);
        a.append(op(2), None, 0);
        b.append(op(2), None, 0);
        b.append(op(1), None, 0);
        assert_eq!(a.append(op(3), None, 0), b.append(op(3), None, 0));
        // a executes request 1: it moves from a's log to a's executed digest.
        a.remove_executed(ClientId(1), RequestNumber(1));
        assert_eq!(a.len(), 2);
        let executed = request_digest(ClientId(1), RequestNumber(1));
        assert_eq!(
            a.append(op(4), None, executed),
            b.append(op(4), None, 0),
            "executing does not change digests"
        );
    }

    #[test]
    fn the_condorcet_logs_of_the_paper_rule_get_an_order_from_candidates() {
        // f = 2, the example of docs/internals/skyros.md: A: c x y, B: x y c, C: y c x.
        // Under Tessera's acknowledgement rule, which of x, y, c can have completed? Only a
        // request whose prefix two logs agree on: x after {c} (A) or {} (B) or {y, c} (C):
        // no agreement, so x did not complete; y after {c,x} (A), {x} (B), {} (C): no; c
        // after {} (A), {x,y} (B), {y} (C): no. None completed: any order is linearisable.
        let (x, y, c) = (op(1), op(2), op(3));
        let logs = vec![
            vec![c.clone(), x.clone(), y.clone()],
            vec![x.clone(), y.clone(), c.clone()],
            vec![y.clone(), c.clone(), x.clone()],
        ];
        let order = recover(&logs, recovery_threshold(2), |_| false);
        assert_eq!(order.len(), 3);
    }

    #[test]
    fn a_completed_request_precedes_everything_outside_its_prefix() {
        // f = 2: x completed with prefix {} on A and B (4 of 5 with the primary); y arrived
        // later everywhere except C, which got x late.
        let (x, y) = (op(1), op(2));
        let logs = vec![
            vec![x.clone(), y.clone()],
            vec![x.clone(), y.clone()],
            vec![y.clone(), x.clone()],
        ];
        let order = recover(&logs, recovery_threshold(2), |_| false);
        assert_eq!(ids(&order), vec![1, 2]);
        // The same with the late log first, whose order breaks ties.
        let logs = vec![logs[2].clone(), logs[0].clone(), logs[1].clone()];
        let order = recover(&logs, recovery_threshold(2), |_| false);
        assert_eq!(ids(&order), vec![1, 2]);
    }

    #[test]
    fn requests_on_too_few_logs_and_duplicates_are_left_out() {
        let (x, y, z) = (op(1), op(2), op(3));
        let logs = vec![vec![x.clone(), y.clone()], vec![x.clone(), z.clone()]];
        let order = recover(&logs, recovery_threshold(1), |request| {
            request.client == ClientId(1)
        });
        assert!(
            order.is_empty(),
            "y and z are on one log only; x is a duplicate"
        );
    }

    /// Random executions as in `recovery_keeps_real_time_order_over_random_histories`, where a
    /// request completes once the primary (log 0) and a supermajority acknowledged it, with the
    /// primary's digest if `digests_matter`, else whatever their digests; every set of f + 1
    /// participants (each in turn as the new primary, whose log comes first) must recover every
    /// completed request after every completed request that finished before it started.
    /// Returns the first violation.
    fn real_time_violation(
        seed: u64,
        rounds: usize,
        tolerated: usize,
        digests_matter: bool,
    ) -> Option<String> {
        let mut prng = stdx::Prng::new(seed);
        let replicas = 2 * tolerated + 1;
        for round in 0..rounds {
            let mut logs: Vec<DurabilityLog> = vec![DurabilityLog::default(); replicas];
            let requests = 2 + prng.below(6) as usize;
            let mut arrivals: Vec<(u64, usize, usize)> = Vec::new();
            for i in 0..requests {
                for replica in 0..replicas {
                    let delay = if prng.below(3) == 0 {
                        prng.below(10)
                    } else {
                        0
                    };
                    arrivals.push((2 * i as u64 + delay, replica, i));
                }
            }
            arrivals.sort();
            let mut prefix: Vec<Vec<Option<u64>>> = vec![vec![None; replicas]; requests];
            let mut arrived_at: Vec<Vec<u64>> = vec![vec![u64::MAX; replicas]; requests];
            for (time, replica, i) in &arrivals {
                prefix[*i][*replica] = Some(logs[*replica].append(op(*i as u64 + 1), None, 0));
                arrived_at[*i][*replica] = *time;
            }
            let needed = supermajority(tolerated);
            let completed_at: Vec<Option<u64>> = (0..requests)
                .map(|i| {
                    let mut times: Vec<u64> = (0..replicas)
                        .filter(|r| !digests_matter || prefix[i][*r] == prefix[i][0])
                        .map(|r| arrived_at[i][r])
                        .collect();
                    times.sort();
                    (times.len() >= needed).then(|| times[needed - 1].max(arrived_at[i][0]))
                })
                .collect();
            // Every choice of f + 1 participants and of the new primary among them.
            for mask in 0u32..(1 << replicas) {
                if mask.count_ones() as usize != tolerated + 1 {
                    continue;
                }
                let chosen: Vec<usize> = (0..replicas).filter(|r| mask & (1 << r) != 0).collect();
                for first in &chosen {
                    let participants: Vec<Vec<Request>> = std::iter::once(*first)
                        .chain(chosen.iter().copied().filter(|r| r != first))
                        .map(|r| logs[r].requests())
                        .collect();
                    let order = recover(&participants, recovery_threshold(tolerated), |_| false);
                    let position: BTreeMap<u64, usize> = order
                        .iter()
                        .enumerate()
                        .map(|(p, request)| (request.client.0 - 1, p))
                        .collect();
                    for (a, done) in completed_at.iter().enumerate() {
                        let Some(done) = *done else {
                            continue;
                        };
                        let Some(&at) = position.get(&(a as u64)) else {
                            return Some(format!(
                                "round {round}, participants {chosen:?}: completed {a} lost"
                            ));
                        };
                        for b in 0..requests {
                            if 2 * b as u64 > done
                                && position.get(&(b as u64)).is_some_and(|p| *p < at)
                            {
                                return Some(format!(
                                    "round {round}, participants {chosen:?} (new primary {first}): \
                                     {a} completed before {b} started, recovered after it"
                                ));
                            }
                        }
                    }
                }
            }
        }
        None
    }

    #[test]
    fn with_three_replicas_completion_needs_no_matching_digests() {
        // `NilextQuorum` counts every acknowledgement of a nilext request in a group of three.
        assert_eq!(real_time_violation(11, 5_000, 1, false), None);
        assert_eq!(real_time_violation(12, 2_000, 1, true), None);
        assert_eq!(real_time_violation(13, 2_000, 2, true), None);
    }

    #[test]
    fn with_five_replicas_completion_without_matching_digests_breaks_real_time_order() {
        // The canary of the check above: f = 2 without the digest rule loses real-time order
        // (deviation 1 in docs/internals/skyros.md), and the check finds it.
        let violation = real_time_violation(14, 20_000, 2, false);
        assert!(
            violation
                .as_deref()
                .is_some_and(|v| v.contains("recovered after")),
            "{violation:?}"
        );
    }

    #[test]
    fn recovery_keeps_real_time_order_over_random_histories() {
        // Random executions of the acknowledgement rule: requests arrive at 2f+1 logs in
        // random orders; a request completes when the primary (log 0) and enough logs agree on
        // its prefix. Any f + 1 logs other than the primary's must recover every completed
        // request, after every completed request that finished before it started.
        let mut prng = stdx::Prng::new(7);
        for round in 0..2_000 {
            let tolerated = 1 + (round % 3);
            let replicas = 2 * tolerated + 1;
            let mut logs: Vec<DurabilityLog> = vec![DurabilityLog::default(); replicas];
            let requests = 2 + prng.below(6) as usize;
            // (request, per-replica arrival step) — a request is invoked at step 2*i, and
            // arrives at replica r at step 2*i + delay.
            let mut arrivals: Vec<(u64, usize, usize)> = Vec::new();
            for i in 0..requests {
                for replica in 0..replicas {
                    let delay = if prng.below(4) == 0 { prng.below(8) } else { 0 };
                    arrivals.push((2 * i as u64 + delay, replica, i));
                }
            }
            arrivals.sort();
            let mut prefix: Vec<Vec<Option<u64>>> = vec![vec![None; replicas]; requests];
            let mut arrived_at: Vec<Vec<u64>> = vec![vec![u64::MAX; replicas]; requests];
            for (time, replica, i) in &arrivals {
                let digest = logs[*replica].append(op(*i as u64 + 1), None, 0);
                prefix[*i][*replica] = Some(digest);
                arrived_at[*i][*replica] = *time;
            }
            // Completion time: the time the supermajority-th matching ack arrived (or never).
            let needed = supermajority(tolerated);
            let mut completed_at: Vec<Option<u64>> = vec![None; requests];
            for i in 0..requests {
                let primary_digest = prefix[i][0];
                let mut times: Vec<u64> = (0..replicas)
                    .filter(|replica| prefix[i][*replica] == primary_digest)
                    .map(|replica| arrived_at[i][replica])
                    .collect();
                times.sort();
                if times.len() >= needed {
                    completed_at[i] = Some(times[needed - 1].max(arrived_at[i][0]));
                }
            }
            let participants: Vec<Vec<Request>> =
                (1..=tolerated + 1).map(|r| logs[r].requests()).collect();
            let order = recover(&participants, recovery_threshold(tolerated), |_| false);
            let position: BTreeMap<u64, usize> = order
                .iter()
                .enumerate()
                .map(|(p, request)| (request.client.0 - 1, p))
                .collect();
            for a in 0..requests {
                let Some(done) = completed_at[a] else {
                    continue;
                };
                assert!(
                    position.contains_key(&(a as u64)),
                    "round {round}: completed request {a} lost"
                );
                for b in 0..requests {
                    // b invoked after a completed (invocation at 2*b).
                    if 2 * b as u64 > done && position.contains_key(&(b as u64)) {
                        assert!(
                            position[&(a as u64)] < position[&(b as u64)],
                            "round {round}: {a} completed before {b} started, recovered after"
                        );
                    }
                }
            }
        }
    }
}
