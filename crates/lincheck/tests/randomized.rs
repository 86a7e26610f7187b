//! Randomized tests: simulated linearizable histories, corrupted ones, and a
//! comparison against a brute-force checker on tiny random histories.

use lincheck::testing::{corrupt_one_read, linearizable_map_history, MapHistoryParams, SplitMix64};
use lincheck::{
    check, Budget, CheckResult, MapInput, MapOutput, Model, Operation, RegisterMapModel,
};

type Op = Operation<MapInput, MapOutput>;

fn shapes() -> Vec<MapHistoryParams> {
    vec![
        MapHistoryParams {
            ops: 300,
            keys: 5,
            clients: 6,
            ..Default::default()
        },
        MapHistoryParams {
            ops: 200,
            keys: 1,
            clients: 8,
            pending_percent: 5,
            ..Default::default()
        },
        MapHistoryParams {
            ops: 150,
            keys: 2,
            clients: 12,
            put_percent: 70,
            delete_percent: 10,
            pending_percent: 10,
            max_think: 2,
            max_latency: 40,
        },
        MapHistoryParams {
            ops: 400,
            keys: 1,
            clients: 8,
            put_percent: 50,
            delete_percent: 5,
            pending_percent: 8,
            max_think: 5,
            max_latency: 60,
        },
    ]
}

#[test]
fn simulated_linearizable_histories_are_always_accepted() {
    for (shape, params) in shapes().iter().enumerate() {
        for seed in 0..40 {
            let mut rng = SplitMix64::new(seed * 1000 + shape as u64);
            let history = linearizable_map_history(params, &mut rng);
            let result = check(&RegisterMapModel, &history, Budget::unlimited());
            assert!(result.is_ok(), "shape {shape} seed {seed}: {result:?}");
            // One partition for all keys, with a different state type. Skipped
            // for the busiest shape: without partitioning, the states of all
            // keys multiply, which is what partitioning avoids.
            if params.clients <= 8 {
                let unpartitioned = Unreduced {
                    read_only_hint: true,
                };
                let result = check(&unpartitioned, &history, Budget::unlimited());
                assert!(
                    result.is_ok(),
                    "shape {shape} seed {seed} (unpartitioned): {result:?}"
                );
            }
        }
    }
}

#[test]
fn a_read_of_an_impossible_value_is_always_rejected() {
    for (shape, params) in shapes().iter().enumerate() {
        for seed in 0..40 {
            let mut rng = SplitMix64::new(seed * 1000 + shape as u64);
            let mut history = linearizable_map_history(params, &mut rng);
            let Some(victim) = corrupt_one_read(&mut history, &mut rng) else {
                continue;
            };
            let CheckResult::Illegal(v) = check(&RegisterMapModel, &history, Budget::unlimited())
            else {
                panic!("shape {shape} seed {seed}: corrupted read #{victim} was accepted");
            };
            assert!(v.partition.contains(&victim), "shape {shape} seed {seed}");
            assert!(
                !v.longest_linearized_prefix.contains(&victim),
                "shape {shape} seed {seed}"
            );
            assert!(v.report.contains(&format!("#{victim} ")), "{}", v.report);
        }
    }
}

/// Exhaustive search over all orders consistent with real time, where pending
/// operations may also be left out.
fn brute_force(history: &[Op]) -> bool {
    let must_precede = |a: &Op, b: &Op| a.return_time.is_some_and(|r| r.max(a.call) < b.call);
    fn go(
        history: &[Op],
        done: &mut Vec<bool>,
        state: Vec<Option<u64>>,
        rel: &dyn Fn(&Op, &Op) -> bool,
    ) -> bool {
        if history
            .iter()
            .zip(done.iter())
            .all(|(op, &d)| d || op.is_pending())
        {
            return true;
        }
        for i in 0..history.len() {
            let ready = !done[i]
                && (0..history.len()).all(|j| done[j] || j == i || !rel(&history[j], &history[i]));
            if !ready {
                continue;
            }
            let key = history[i].input.key() as usize;
            let Some(next) =
                RegisterMapModel.step(&state[key], &history[i].input, history[i].output.as_ref())
            else {
                continue;
            };
            let mut state = state.clone();
            state[key] = next;
            done[i] = true;
            let ok = go(history, done, state, rel);
            done[i] = false;
            if ok {
                return true;
            }
        }
        false
    }
    go(
        history,
        &mut vec![false; history.len()],
        vec![None; 2],
        &must_precede,
    )
}

/// The register map as one object (no partitioning), optionally without the
/// read-only hint.
struct Unreduced {
    read_only_hint: bool,
}

impl Model for Unreduced {
    type State = Vec<Option<u64>>;
    type Input = MapInput;
    type Output = MapOutput;

    fn init(&self) -> Self::State {
        Vec::new()
    }

    fn step(
        &self,
        state: &Self::State,
        input: &MapInput,
        output: Option<&MapOutput>,
    ) -> Option<Self::State> {
        let key = input.key() as usize;
        let value = RegisterMapModel.step(&state.get(key).copied().flatten(), input, output)?;
        let mut next = state.clone();
        if next.len() <= key {
            next.resize(key + 1, None);
        }
        next[key] = value;
        while next.last() == Some(&None) {
            next.pop();
        }
        Some(next)
    }

    fn is_read_only(&self, input: &MapInput) -> bool {
        self.read_only_hint && matches!(input, MapInput::Get { .. })
    }
}

/// Shape of a tiny random history (outputs are random, so many are illegal).
struct Tiny {
    max_ops: u64,
    keys: u64,
    pending_percent: u64,
}

fn tiny_history(rng: &mut SplitMix64, shape: &Tiny) -> Vec<Op> {
    let n = 1 + rng.below(shape.max_ops) as usize;
    (0..n)
        .map(|i| {
            let key = rng.below(shape.keys);
            let call = rng.below(10);
            let input = match rng.below(5) {
                0 | 1 => MapInput::Put {
                    key,
                    value: 1 + rng.below(3),
                },
                2 => MapInput::Delete { key },
                _ => MapInput::Get { key },
            };
            if rng.percent(shape.pending_percent) {
                return Operation::pending(i as u64, call, input);
            }
            let output = match input {
                MapInput::Get { .. } => MapOutput::Value(rng.below(4).checked_sub(1)),
                _ => MapOutput::Ok,
            };
            Operation::completed(i as u64, call, call + rng.below(6), input, output)
        })
        .collect()
}

fn agree_with_brute_force(seed: u64, cases: usize, shape: &Tiny) {
    let mut rng = SplitMix64::new(seed);
    let (mut ok, mut illegal) = (0, 0);
    for case in 0..cases {
        let history = tiny_history(&mut rng, shape);
        let expected = brute_force(&history);
        let result = check(&RegisterMapModel, &history, Budget::unlimited());
        assert_eq!(
            result.is_ok(),
            expected,
            "case {case}: {history:#?}\n{result:?}"
        );
        // Without the read-only reduction and without partitioning.
        let unreduced = Unreduced {
            read_only_hint: false,
        };
        let plain = check(&unreduced, &history, Budget::unlimited());
        assert_eq!(
            plain.is_ok(),
            expected,
            "case {case} (unreduced): {history:#?}"
        );
        if expected {
            ok += 1;
        } else {
            illegal += 1;
        }
    }
    // Both verdicts must be well represented for the comparison to mean much.
    assert!(
        ok > cases / 10 && illegal > cases / 10,
        "ok {ok}, illegal {illegal}"
    );
}

#[test]
fn verdicts_agree_with_brute_force_on_tiny_random_histories() {
    agree_with_brute_force(
        0x11ce_c4ec,
        3000,
        &Tiny {
            max_ops: 6,
            keys: 2,
            pending_percent: 15,
        },
    );
}

#[test]
fn verdicts_agree_with_brute_force_on_tiny_histories_with_many_pending_ops() {
    agree_with_brute_force(
        0x9e4d_01a6,
        2000,
        &Tiny {
            max_ops: 8,
            keys: 1,
            pending_percent: 40,
        },
    );
}
