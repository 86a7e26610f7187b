//! Reusable sequential models.

use std::collections::BTreeMap;

use crate::{Model, Operation};

/// An operation on a map from `u64` keys to `u64` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MapInput {
    /// Read the value of `key`.
    Get {
        /// The key read.
        key: u64,
    },
    /// Set `key` to `value`.
    Put {
        /// The key written.
        key: u64,
        /// The value written.
        value: u64,
    },
    /// Remove `key`.
    Delete {
        /// The key removed.
        key: u64,
    },
}

impl MapInput {
    /// The key the operation touches.
    pub fn key(&self) -> u64 {
        match *self {
            MapInput::Get { key } | MapInput::Put { key, .. } | MapInput::Delete { key } => key,
        }
    }
}

/// The response to a [`MapInput`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MapOutput {
    /// Response to `Get`: the value, or `None` if the key is absent.
    Value(Option<u64>),
    /// Response to `Put` and `Delete`.
    Ok,
}

/// A linearizable map from `u64` keys to optional `u64` values (`None` =
/// absent; every key starts absent), where each key behaves as an
/// independent register.
///
/// The model partitions histories per key (a map is P-compositional), so each
/// partition only ever touches one key and the state is just that key's
/// value: [`Model::step`] ignores the key. Use it through [`crate::check`],
/// which always partitions first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegisterMapModel;

impl Model for RegisterMapModel {
    type State = Option<u64>;
    type Input = MapInput;
    type Output = MapOutput;

    fn init(&self) -> Option<u64> {
        None
    }

    fn step(
        &self,
        state: &Option<u64>,
        input: &MapInput,
        output: Option<&MapOutput>,
    ) -> Option<Option<u64>> {
        match (input, output) {
            (MapInput::Get { .. }, None) => Some(*state),
            (MapInput::Get { .. }, Some(MapOutput::Value(seen))) => {
                (seen == state).then_some(*state)
            }
            (MapInput::Put { value, .. }, None | Some(MapOutput::Ok)) => Some(Some(*value)),
            (MapInput::Delete { .. }, None | Some(MapOutput::Ok)) => Some(None),
            (MapInput::Get { .. }, Some(MapOutput::Ok))
            | (MapInput::Put { .. } | MapInput::Delete { .. }, Some(MapOutput::Value(_))) => None,
        }
    }

    /// One part per key, in increasing key order; each part lists the
    /// operation indices in history order.
    fn partition(&self, history: &[Operation<MapInput, MapOutput>]) -> Vec<Vec<usize>> {
        let mut by_key: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
        for (i, op) in history.iter().enumerate() {
            by_key.entry(op.input.key()).or_default().push(i);
        }
        by_key.into_values().collect()
    }

    fn is_read_only(&self, input: &MapInput) -> bool {
        matches!(input, MapInput::Get { .. })
    }

    fn describe(&self, input: &MapInput, output: Option<&MapOutput>) -> String {
        let call = match input {
            MapInput::Get { key } => format!("get({key})"),
            MapInput::Put { key, value } => format!("put({key}, {value})"),
            MapInput::Delete { key } => format!("delete({key})"),
        };
        let result = match output {
            None => "pending".to_string(),
            Some(MapOutput::Ok) => "ok".to_string(),
            Some(MapOutput::Value(Some(v))) => v.to_string(),
            Some(MapOutput::Value(None)) => "absent".to_string(),
        };
        format!("{call} -> {result}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_must_return_the_current_value() {
        let m = RegisterMapModel;
        assert_eq!(
            m.step(
                &Some(3),
                &MapInput::Get { key: 1 },
                Some(&MapOutput::Value(Some(3)))
            ),
            Some(Some(3))
        );
        assert_eq!(
            m.step(
                &Some(3),
                &MapInput::Get { key: 1 },
                Some(&MapOutput::Value(None))
            ),
            None
        );
        assert_eq!(m.step(&None, &MapInput::Get { key: 1 }, None), Some(None));
    }

    #[test]
    fn writes_replace_the_value_and_mismatched_outputs_are_illegal() {
        let m = RegisterMapModel;
        let put = MapInput::Put { key: 1, value: 9 };
        assert_eq!(m.step(&None, &put, Some(&MapOutput::Ok)), Some(Some(9)));
        assert_eq!(m.step(&None, &put, None), Some(Some(9)));
        assert_eq!(
            m.step(&Some(9), &MapInput::Delete { key: 1 }, Some(&MapOutput::Ok)),
            Some(None)
        );
        assert_eq!(m.step(&None, &put, Some(&MapOutput::Value(None))), None);
        assert_eq!(
            m.step(&None, &MapInput::Get { key: 1 }, Some(&MapOutput::Ok)),
            None
        );
    }

    #[test]
    fn only_gets_are_read_only() {
        let m = RegisterMapModel;
        assert!(m.is_read_only(&MapInput::Get { key: 1 }));
        assert!(!m.is_read_only(&MapInput::Put { key: 1, value: 1 }));
        assert!(!m.is_read_only(&MapInput::Delete { key: 1 }));
    }

    #[test]
    fn partition_groups_operations_per_key_in_key_order() {
        let history = vec![
            Operation::completed(0, 0, 1, MapInput::Put { key: 5, value: 1 }, MapOutput::Ok),
            Operation::completed(0, 2, 3, MapInput::Get { key: 2 }, MapOutput::Value(None)),
            Operation::pending(1, 0, MapInput::Delete { key: 5 }),
        ];
        assert_eq!(
            RegisterMapModel.partition(&history),
            vec![vec![1], vec![0, 2]]
        );
    }

    #[test]
    fn describe_names_the_call_and_its_result() {
        let m = RegisterMapModel;
        assert_eq!(
            m.describe(&MapInput::Put { key: 1, value: 2 }, Some(&MapOutput::Ok)),
            "put(1, 2) -> ok"
        );
        assert_eq!(
            m.describe(&MapInput::Get { key: 1 }, Some(&MapOutput::Value(None))),
            "get(1) -> absent"
        );
        assert_eq!(
            m.describe(&MapInput::Delete { key: 4 }, None),
            "delete(4) -> pending"
        );
    }
}
