//! Where a range-placed table's rows lie on the ring (`WITH (placement = 'range')`): a pure,
//! order-preserving map from a partition key value to a ring position, so that an interval of
//! the key is one interval of positions (the arcs covering it), and rows spread over the ring as
//! the table's declared split points (`range_bounds`) say.
//!
//! Two steps. A value's *ordinal* is a `u64` that preserves the engine's order of the values
//! of one column type (`ordinal`): integers, dates and timestamps with their sign bit flipped,
//! doubles by their IEEE total order, text and bytes by their first eight bytes. The ordinal is
//! then mapped by the table's split points `b0 < b1 < … < bn` (`RangeMap`): the ring is cut into
//! n equal segments, segment i holds `[b(i), b(i+1))` linearly, values below `b0` lie at
//! position 0 and values from `bn` on at the last position. Without split points the position
//! is the ordinal itself. Both steps are monotone (never strictly: text sharing its first eight
//! bytes shares a position), which is all routing needs: the rows of `[low, high]` lie in the
//! positions `[map(low), map(high)]`.
//!
//! The position is stored in the row's placement key (`store::rows::range_placement_key`), so
//! that every process maps a placement key to its position without the catalog
//! (`cluster::payload::KeyPlacement::position`).

use engine::{DataType, Value};

const SIGN: u64 = 1 << 63;

/// Whether a partition key column of this type can be placed by range: its values have an
/// order-preserving ordinal (`ordinal`). NUMERIC (an exact decimal has no exact monotone map
/// to 64 bits here), INTERVAL, JSONB and CHAR (compared without trailing blanks) cannot.
pub fn supports(data_type: &DataType) -> bool {
    use DataType::*;
    matches!(
        data_type,
        SmallInt
            | Int
            | BigInt
            | Real
            | Double
            | Text { .. }
            | Bytea
            | Boolean
            | Date
            | Timestamp
            | TimestampTz
            | Uuid
    )
}

/// Whether `value` is of the kind a column of `data_type` stores (so that its ordinal is
/// comparable with the column's): the planner coerces constants to the column's type, but a
/// bound of another kind (a DOUBLE constant against an INT key) must not be mapped as if it
/// were one of the column's values.
pub fn same_kind(data_type: &DataType, value: &Value) -> bool {
    use DataType::*;
    matches!(
        (data_type, value),
        (SmallInt | Int | BigInt, Value::Int(_) | Value::BigInt(_))
            | (Real | Double, Value::Double(_))
            | (Text { .. }, Value::Text(_))
            | (Bytea, Value::Bytea(_))
            | (Boolean, Value::Boolean(_))
            | (Date, Value::Date(_))
            | (Timestamp, Value::Timestamp(_))
            | (TimestampTz, Value::TimestampTz(_))
            | (Uuid, Value::Uuid(_))
    )
}

/// The first eight bytes, big-endian, zero-padded: monotone in byte order.
fn prefix_ordinal(bytes: &[u8]) -> u64 {
    let mut prefix = [0u8; 8];
    let length = bytes.len().min(8);
    prefix[..length].copy_from_slice(&bytes[..length]);
    u64::from_be_bytes(prefix)
}

/// A value's order-preserving ordinal: for two values `a <= b` of one kind (as the engine
/// orders them), `ordinal(a) <= ordinal(b)`. NULL is 0 (no range predicate matches it, so any
/// fixed place will do). `None` for the kinds `supports` refuses.
pub fn ordinal(value: &Value) -> Option<u64> {
    let signed = |number: i64| (number as u64) ^ SIGN;
    Some(match value {
        Value::Null => 0,
        Value::Boolean(flag) => u64::from(*flag),
        Value::Int(number) | Value::Date(number) => signed(i64::from(*number)),
        Value::BigInt(number) | Value::Timestamp(number) | Value::TimestampTz(number) => {
            signed(*number)
        }
        Value::Double(number) => {
            // The engine's order: -0.0 equals 0.0, every NaN is one value above +inf.
            let canonical = if number.is_nan() {
                f64::NAN
            } else if *number == 0.0 {
                0.0
            } else {
                *number
            };
            let bits = canonical.to_bits();
            if bits & SIGN != 0 {
                !bits
            } else {
                bits | SIGN
            }
        }
        Value::Text(text) => prefix_ordinal(text.as_bytes()),
        Value::Bytea(bytes) => prefix_ordinal(bytes),
        Value::Uuid(bytes) => prefix_ordinal(bytes),
        Value::Numeric(_) | Value::Interval(_) | Value::Jsonb(_) => return None,
    })
}

/// A range-placed table's map from ordinals to positions: its split points' ordinals, strictly
/// increasing (at least two), or none (the position is the ordinal).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeMap {
    bounds: Vec<u64>,
}

impl RangeMap {
    /// The map of split points given as ordinals; `Err` names what is wrong with them.
    pub fn new(bounds: Vec<u64>) -> Result<RangeMap, String> {
        if bounds.len() == 1 {
            return Err("range_bounds needs at least two split points".into());
        }
        if bounds.windows(2).any(|pair| pair[0] >= pair[1]) {
            return Err("range_bounds must be strictly increasing (text bounds must differ in their first eight bytes)".into());
        }
        Ok(RangeMap { bounds })
    }

    /// The identity: positions are ordinals.
    pub fn identity() -> RangeMap {
        RangeMap::default()
    }

    /// The position of an ordinal: monotone, 0 below the first split point, `u64::MAX` from the
    /// last one on, and segment i of n equal segments of the ring for `[b(i), b(i+1))`.
    pub fn position(&self, ordinal: u64) -> u64 {
        let bounds = &self.bounds;
        let (Some(&first), Some(&last)) = (bounds.first(), bounds.last()) else {
            return ordinal;
        };
        if ordinal <= first {
            return 0;
        }
        if ordinal >= last {
            return u64::MAX;
        }
        let segments = (bounds.len() - 1) as u128;
        // The segment holding the ordinal: the last split point at or below it.
        let segment = bounds.partition_point(|&bound| bound <= ordinal) - 1;
        let (low, high) = (bounds[segment], bounds[segment + 1]);
        assert!(low <= ordinal && ordinal < high);
        let fraction = (u128::from(ordinal - low) << 64) / u128::from(high - low);
        let position = (((segment as u128) << 64) + fraction) / segments;
        assert!(position <= u128::from(u64::MAX));
        position as u64
    }

    /// The position of a value (`None`: a kind without an ordinal).
    pub fn position_of(&self, value: &Value) -> Option<u64> {
        ordinal(value).map(|ordinal| self.position(ordinal))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values of one kind, in the engine's order.
    fn sorted_kinds() -> Vec<Vec<Value>> {
        vec![
            [
                i64::MIN,
                -1_000_000,
                -2,
                -1,
                0,
                1,
                2,
                255,
                256,
                1_000_000,
                i64::MAX,
            ]
            .map(Value::BigInt)
            .to_vec(),
            [i32::MIN, -300, -1, 0, 1, 300, i32::MAX]
                .map(Value::Int)
                .to_vec(),
            [i32::MIN, -1, 0, 1, 20_000].map(Value::Date).to_vec(),
            [i64::MIN, -5, 0, 5, i64::MAX]
                .map(Value::Timestamp)
                .to_vec(),
            [
                f64::NEG_INFINITY,
                -1e300,
                -1.5,
                -1e-300,
                0.0,
                1e-300,
                1.5,
                1e300,
                f64::INFINITY,
                f64::NAN,
            ]
            .map(Value::Double)
            .to_vec(),
            [
                "",
                "a",
                "ab",
                "abc",
                "abcdefgh",
                "abcdefghz",
                "abd",
                "b",
                "é",
            ]
            .map(|text| Value::Text(text.into()))
            .to_vec(),
            vec![Value::Boolean(false), Value::Boolean(true)],
        ]
    }

    #[test]
    fn ordinals_preserve_the_engine_order_of_every_kind() {
        for values in sorted_kinds() {
            for pair in values.windows(2) {
                assert!(pair[0] <= pair[1], "test data sorted: {pair:?}");
                let (a, b) = (ordinal(&pair[0]).unwrap(), ordinal(&pair[1]).unwrap());
                assert!(a <= b, "{:?} → {a:x} after {:?} → {b:x}", pair[0], pair[1]);
            }
        }
        // Strict where the kind allows it: negatives below zero below positives.
        assert!(ordinal(&Value::BigInt(-1)) < ordinal(&Value::BigInt(0)));
        assert!(ordinal(&Value::Int(-1)) < ordinal(&Value::Int(0)));
        assert_eq!(ordinal(&Value::Int(7)), ordinal(&Value::BigInt(7)));
        assert!(ordinal(&Value::Double(-0.5)) < ordinal(&Value::Double(-0.25)));
        assert_eq!(ordinal(&Value::Double(-0.0)), ordinal(&Value::Double(0.0)));
        // Text: a prefix sorts first; only the first eight bytes count.
        assert!(ordinal(&Value::Text("ab".into())) < ordinal(&Value::Text("abc".into())));
        assert_eq!(
            ordinal(&Value::Text("abcdefgh".into())),
            ordinal(&Value::Text("abcdefghz".into()))
        );
        assert_eq!(ordinal(&Value::Null), Some(0));
        assert_eq!(ordinal(&Value::Jsonb("{}".into())), None);
    }

    #[test]
    fn positions_preserve_order_and_spread_the_declared_domain() {
        let bounds: Vec<u64> = [0, 100_000, 200_000]
            .iter()
            .map(|&bound| ordinal(&Value::BigInt(bound)).unwrap())
            .collect();
        let map = RangeMap::new(bounds).unwrap();
        let at = |key: i64| map.position_of(&Value::BigInt(key)).unwrap();
        // Below the first split point, the first position; from the last on, the last.
        assert_eq!(at(-5), 0);
        assert_eq!(at(0), 0);
        assert_eq!(at(200_000), u64::MAX);
        assert_eq!(at(i64::MAX), u64::MAX);
        // The split points cut the ring in equal segments: 100,000 is half way.
        assert_eq!(at(100_000), 1 << 63);
        assert_eq!(at(50_000), 1 << 62);
        // Monotone, and 1..200,000 reaches every eighth of the ring.
        let mut previous = 0;
        let mut eighths = std::collections::BTreeSet::new();
        for key in (-10..210_000).step_by(7) {
            let position = at(key);
            assert!(position >= previous, "key {key}");
            previous = position;
            eighths.insert(position >> 61);
        }
        assert_eq!(eighths.len(), 8);
        // Without split points, the ordinal.
        assert_eq!(
            RangeMap::identity().position_of(&Value::Int(0)),
            Some(1 << 63)
        );
    }

    #[test]
    fn bad_split_points_are_refused() {
        assert!(RangeMap::new(vec![5]).is_err());
        assert!(RangeMap::new(vec![5, 5]).is_err());
        assert!(RangeMap::new(vec![6, 5]).is_err());
        assert!(RangeMap::new(vec![]).is_ok());
        assert!(RangeMap::new(vec![1, 2, 3]).is_ok());
    }

    #[test]
    fn kinds_match_their_column_types() {
        assert!(same_kind(&DataType::Int, &Value::BigInt(1)));
        assert!(!same_kind(&DataType::Int, &Value::Double(1.5)));
        assert!(!same_kind(&DataType::Date, &Value::Int(1)));
        assert!(supports(&DataType::BigInt));
        assert!(!supports(&DataType::Jsonb));
    }
}
