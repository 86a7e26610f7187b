//! Helpers for testing and benchmarking checkers: a tiny deterministic PRNG
//! and a generator of linearizable [`RegisterMapModel`] histories.
//!
//! [`RegisterMapModel`]: crate::RegisterMapModel

use crate::{MapInput, MapOutput, Operation};

/// The splitmix64 pseudo-random generator (Steele, Lea & Flood): tiny, fast
/// and fully determined by its seed. Not cryptographic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (0 if `bound` is 0). Slightly biased for huge
    /// bounds, which does not matter for tests.
    pub fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            0
        } else {
            self.next_u64() % bound
        }
    }

    /// True with probability `percent`/100.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// Shape of a generated register-map history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapHistoryParams {
    /// Number of operations.
    pub ops: usize,
    /// Keys are drawn uniformly from `0..keys`.
    pub keys: u64,
    /// Number of concurrent clients.
    pub clients: u64,
    /// Percentage of operations that are `Put`s (each with a unique value).
    pub put_percent: u64,
    /// Percentage of operations that are `Delete`s.
    pub delete_percent: u64,
    /// Percentage of operations left pending (no response recorded). Half of
    /// the pending operations take effect, half never do.
    pub pending_percent: u64,
    /// A client waits `0..=max_think` ticks between operations.
    pub max_think: u64,
    /// Operations last `1..=max_latency` ticks.
    pub max_latency: u64,
}

impl Default for MapHistoryParams {
    fn default() -> Self {
        Self {
            ops: 1000,
            keys: 10,
            clients: 8,
            put_percent: 45,
            delete_percent: 5,
            pending_percent: 2,
            max_think: 20,
            max_latency: 100,
        }
    }
}

/// A planned operation: its interval and the instant its effect happens.
struct Planned {
    op: Operation<MapInput, MapOutput>,
    effect: u64,
    takes_effect: bool,
}

fn plan(params: &MapHistoryParams, rng: &mut SplitMix64) -> Vec<Planned> {
    let mut clocks = vec![0u64; params.clients.max(1) as usize];
    let mut next_value = 1u64;
    let mut planned = Vec::with_capacity(params.ops);
    for _ in 0..params.ops {
        // The client that is free earliest issues the next operation, so all
        // clients stay busy at the same time.
        let (client, _) = clocks
            .iter()
            .enumerate()
            .min_by_key(|&(c, &t)| (t, c))
            .unwrap_or((0, &0));
        let call = clocks[client] + rng.below(params.max_think + 1);
        let ret = call + 1 + rng.below(params.max_latency.max(1));
        clocks[client] = ret;
        let key = rng.below(params.keys.max(1));
        let roll = rng.below(100);
        let input = if roll < params.put_percent {
            next_value += 1;
            MapInput::Put {
                key,
                value: next_value - 1,
            }
        } else if roll < params.put_percent + params.delete_percent {
            MapInput::Delete { key }
        } else {
            MapInput::Get { key }
        };
        let pending = rng.percent(params.pending_percent);
        let takes_effect = !pending || rng.percent(50);
        let op = Operation {
            client: client as u64,
            call,
            return_time: (!pending).then_some(ret),
            input,
            output: None,
        };
        planned.push(Planned {
            op,
            effect: call + rng.below(ret - call + 1),
            takes_effect,
        });
    }
    planned
}

/// Generates a linearizable history by simulating a real map: clients issue
/// operations with random overlapping intervals, and each operation's effect
/// happens at a random instant inside its interval. Outputs are what the map
/// returned at that instant; pending operations record no output.
pub fn linearizable_map_history(
    params: &MapHistoryParams,
    rng: &mut SplitMix64,
) -> Vec<Operation<MapInput, MapOutput>> {
    let mut planned = plan(params, rng);
    let mut order: Vec<usize> = (0..planned.len()).collect();
    order.sort_by_key(|&i| (planned[i].effect, i));
    let mut map = vec![None; params.keys.max(1) as usize];
    for i in order {
        let p = &mut planned[i];
        if !p.takes_effect {
            continue;
        }
        let slot = &mut map[p.op.input.key() as usize];
        let output = match p.op.input {
            MapInput::Get { .. } => MapOutput::Value(*slot),
            MapInput::Put { value, .. } => {
                *slot = Some(value);
                MapOutput::Ok
            }
            MapInput::Delete { .. } => {
                *slot = None;
                MapOutput::Ok
            }
        };
        if !p.op.is_pending() {
            p.op.output = Some(output);
        }
    }
    planned.into_iter().map(|p| p.op).collect()
}

/// A value no generated `Put` ever writes.
pub const IMPOSSIBLE_VALUE: u64 = u64::MAX;

/// Makes one random completed `Get` return [`IMPOSSIBLE_VALUE`], which makes
/// the history non-linearizable. Returns the index of the corrupted
/// operation, or `None` if the history has no completed `Get`.
pub fn corrupt_one_read(
    history: &mut [Operation<MapInput, MapOutput>],
    rng: &mut SplitMix64,
) -> Option<usize> {
    let reads: Vec<usize> = history
        .iter()
        .enumerate()
        .filter(|(_, op)| matches!(op.input, MapInput::Get { .. }) && !op.is_pending())
        .map(|(i, _)| i)
        .collect();
    if reads.is_empty() {
        return None;
    }
    let victim = reads[rng.below(reads.len() as u64) as usize];
    history[victim].output = Some(MapOutput::Value(Some(IMPOSSIBLE_VALUE)));
    Some(victim)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_is_deterministic_per_seed() {
        let a: Vec<u64> = (0..4)
            .scan(SplitMix64::new(7), |r, _| Some(r.next_u64()))
            .collect();
        let b: Vec<u64> = (0..4)
            .scan(SplitMix64::new(7), |r, _| Some(r.next_u64()))
            .collect();
        let c: Vec<u64> = (0..4)
            .scan(SplitMix64::new(8), |r, _| Some(r.next_u64()))
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn generated_histories_have_the_requested_shape() {
        let params = MapHistoryParams {
            ops: 500,
            keys: 7,
            pending_percent: 10,
            ..Default::default()
        };
        let history = linearizable_map_history(&params, &mut SplitMix64::new(1));
        assert_eq!(history.len(), 500);
        assert!(history.iter().all(|op| op.input.key() < 7));
        assert!(history
            .iter()
            .all(|op| op.is_pending() == op.output.is_none()));
        assert!(history.iter().any(|op| op.is_pending()));
        assert!(history
            .iter()
            .all(|op| op.return_time.is_none_or(|r| r > op.call)));
    }
}
