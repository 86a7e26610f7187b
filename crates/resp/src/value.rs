//! Reply values.

/// A reply, rich enough for RESP2 and RESP3. The runtime encodes it for the connection's
/// protocol version; [`Value::into_resp2`] performs the RESP3 → RESP2 downgrade Redis performs.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `+text`. Never contains `\r` or `\n`.
    Simple(String),
    /// `-text`: the full text including its prefix, e.g. `ERR syntax error` or
    /// `NOPROTO unsupported protocol version`. Never contains `\r` or `\n`.
    Error(String),
    /// `:n`.
    Integer(i64),
    /// `$len` + bytes.
    Bulk(Vec<u8>),
    /// RESP3 `_`; RESP2 null bulk string `$-1`.
    Null,
    /// `*n`.
    Array(Vec<Value>),
    /// RESP3 `%n`. In RESP2 a map is sent as a flat array `[k1, v1, k2, v2, …]`
    /// (see [`Value::into_resp2`]).
    Map(Vec<(Value, Value)>),
    /// RESP3 `,`. In RESP2 a bulk string of its decimal text.
    Double(f64),
    /// RESP3 `#t`/`#f`. In RESP2 the integer 1 or 0.
    Boolean(bool),
    /// RESP3 verbatim string of format `txt` (`=len\r\ntxt:…`); the text here has no `txt:`
    /// prefix. In RESP2 a bulk string.
    Verbatim(String),
    /// RESP3 `~n` (SMEMBERS, SINTER, SPOP with a count…). In RESP2 an array.
    Set(Vec<Value>),
    /// Pairs that RESP3 sends as an array of two-element arrays and RESP2 as one flat array
    /// `[a1, b1, a2, b2, …]`, as Redis 7.0 replies ZRANGE … WITHSCORES, ZPOPMIN with a count,
    /// ZRANDMEMBER … WITHSCORES and HRANDFIELD … WITHVALUES.
    Pairs(Vec<(Value, Value)>),
    /// Streams with their entries, as Redis 7.0 replies XREAD: RESP3 sends a map (stream
    /// name → entries), RESP2 an array of `[name, entries]` arrays.
    Streams(Vec<(Value, Value)>),
    /// A nil where Redis answers a null *array*: RESP3 `_`, RESP2 `*-1` (BLPOP's timeout,
    /// LMPOP and ZMPOP of absent keys, LPOP with a count of an absent key).
    NullArray,
}

impl Value {
    /// `+OK`.
    pub fn ok() -> Value {
        Value::Simple("OK".to_string())
    }

    /// Whether this is an error reply.
    pub fn is_error(&self) -> bool {
        matches!(self, Value::Error(_))
    }

    /// The same reply expressed with RESP2 types only, as Redis downgrades replies for a RESP2
    /// connection: maps and pairs become flat arrays, sets arrays, doubles bulk text,
    /// booleans 1 or 0, verbatim strings bulk strings. `Null` and `NullArray` stay (the encoder
    /// writes `$-1` and `*-1`).
    pub fn into_resp2(self) -> Value {
        match self {
            Value::Array(items) => Value::Array(items.into_iter().map(Value::into_resp2).collect()),
            Value::Map(pairs) => Value::Array(
                pairs
                    .into_iter()
                    .flat_map(|(key, value)| [key.into_resp2(), value.into_resp2()])
                    .collect(),
            ),
            Value::Double(number) => Value::Bulk(double_text(number).into_bytes()),
            Value::Boolean(flag) => Value::Integer(i64::from(flag)),
            Value::Verbatim(text) => Value::Bulk(text.into_bytes()),
            Value::Set(items) => Value::Array(items.into_iter().map(Value::into_resp2).collect()),
            Value::Pairs(pairs) => Value::Array(
                pairs
                    .into_iter()
                    .flat_map(|(first, second)| [first.into_resp2(), second.into_resp2()])
                    .collect(),
            ),
            Value::Streams(streams) => Value::Array(
                streams
                    .into_iter()
                    .map(|(name, entries)| {
                        Value::Array(vec![name.into_resp2(), entries.into_resp2()])
                    })
                    .collect(),
            ),
            other => other,
        }
    }
}

/// A double as Redis 7.0 prints one in a reply, in either protocol (`%.17g`: `2.5`, `3`,
/// `0.10000000000000001`, `1e+100`; infinities `inf` and `-inf`, NaN `nan`).
pub fn double_text(number: f64) -> String {
    kv::value::format_score(number)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resp2_downgrade_flattens_maps_recursively() {
        let value = Value::Map(vec![
            (
                Value::Bulk(b"a".to_vec()),
                Value::Map(vec![(Value::Bulk(b"x".to_vec()), Value::Boolean(true))]),
            ),
            (Value::Bulk(b"b".to_vec()), Value::Double(1.5)),
            (
                Value::Bulk(b"c".to_vec()),
                Value::Array(vec![Value::Verbatim("t".into()), Value::Null]),
            ),
        ]);
        assert_eq!(
            value.into_resp2(),
            Value::Array(vec![
                Value::Bulk(b"a".to_vec()),
                Value::Array(vec![Value::Bulk(b"x".to_vec()), Value::Integer(1)]),
                Value::Bulk(b"b".to_vec()),
                Value::Bulk(b"1.5".to_vec()),
                Value::Bulk(b"c".to_vec()),
                Value::Array(vec![Value::Bulk(b"t".to_vec()), Value::Null]),
            ])
        );
        assert_eq!(
            Value::Double(f64::NEG_INFINITY).into_resp2(),
            Value::Bulk(b"-inf".to_vec())
        );
        assert_eq!(Value::ok().into_resp2(), Value::ok());
    }

    #[test]
    fn resp2_downgrade_flattens_pairs_and_keeps_sets_as_arrays() {
        let bulk = |text: &str| Value::Bulk(text.as_bytes().to_vec());
        let pairs = Value::Pairs(vec![
            (bulk("a"), Value::Double(0.1)),
            (bulk("b"), Value::Double(3.0)),
        ]);
        assert_eq!(
            pairs.into_resp2(),
            Value::Array(vec![
                bulk("a"),
                bulk("0.10000000000000001"),
                bulk("b"),
                bulk("3"),
            ])
        );
        assert_eq!(
            Value::Set(vec![bulk("x")]).into_resp2(),
            Value::Array(vec![bulk("x")])
        );
        assert_eq!(Value::NullArray.into_resp2(), Value::NullArray);
        assert_eq!(double_text(1e100), "1e+100");
        assert_eq!(double_text(f64::INFINITY), "inf");
    }
}
