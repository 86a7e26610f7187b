//! Quorum arithmetic for a group of `2f + 1` replicas.

/// How many replicas may fail: `f` for a group of `2f + 1` (or `2f + 2`) replicas.
pub const fn replicas_tolerated(replica_count: u8) -> u8 {
    assert!(replica_count >= 1);
    (replica_count - 1) / 2
}

/// The size of a majority quorum, `f + 1`.
pub const fn majority(replica_count: u8) -> u8 {
    replicas_tolerated(replica_count) + 1
}

const _: () = assert!(majority(1) == 1);
const _: () = assert!(majority(3) == 2);
const _: () = assert!(majority(5) == 3);
const _: () = assert!(replicas_tolerated(5) == 2);

/// The highest value held by at least a majority: the `(f + 1)`-th largest of `values`.
/// With `values[i]` the highest op replica `i` holds, this is the commit point.
pub fn majority_value(values: &[u64]) -> u64 {
    assert!(!values.is_empty());
    assert!(values.len() <= u8::MAX as usize);
    let mut sorted = values.to_vec();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    sorted[majority(values.len() as u8) as usize - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn majority_value_is_held_by_at_least_f_plus_one() {
        assert_eq!(majority_value(&[5, 3, 9]), 5);
        assert_eq!(majority_value(&[0, 0, 9]), 0);
        assert_eq!(majority_value(&[7, 7, 1, 2, 9]), 7);
        assert_eq!(majority_value(&[4]), 4);
    }
}
