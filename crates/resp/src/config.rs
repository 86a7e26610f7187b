//! CONFIG GET and CONFIG SET: the parameters Tessera has, their names (Redis 7.0's, with its
//! `*-ziplist-*` aliases), how their values are parsed, and the replies, byte for byte as
//! Redis 7.0 gives them.
//!
//! Two kinds of parameter: the encoding thresholds of [`kv::EncodingLimits`], which decide
//! replicated encodings and so are set cluster-wide by an ordered operation (the runtime
//! carries a [`Change`] list to every partition), and the gateway's own (per process)
//! parameters, which the runtime keeps itself. Reporting-only parameters (`save`,
//! `appendonly`) are answered by GET and refused by SET.

use crate::text::glob_matches;
use crate::Value;
use kv::EncodingLimits;

/// How a parameter's value is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A decimal integer in `min..=i64::MAX`.
    Integer { min: i64 },
    /// A memory size: digits and an optional unit (`k`, `kb`, `m`, `mb`, `g`, `gb`, any case).
    Memory,
    /// Keyspace notification classes (`notify`): a string of flags, kept as their bits.
    Events,
}

/// Where a parameter lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Replicated: one of `kv::EncodingLimits`'s fields, by its canonical name.
    Cluster,
    /// Kept by each gateway process for itself.
    Process,
}

/// A settable parameter.
struct Parameter {
    name: &'static str,
    alias: Option<&'static str>,
    kind: Kind,
    scope: Scope,
}

const PARAMETERS: &[Parameter] = &[
    cluster(
        "hash-max-listpack-entries",
        "hash-max-ziplist-entries",
        INTEGER,
    ),
    cluster(
        "hash-max-listpack-value",
        "hash-max-ziplist-value",
        Kind::Memory,
    ),
    Parameter {
        name: "set-max-intset-entries",
        alias: None,
        kind: INTEGER,
        scope: Scope::Cluster,
    },
    cluster(
        "zset-max-listpack-entries",
        "zset-max-ziplist-entries",
        INTEGER,
    ),
    cluster(
        "zset-max-listpack-value",
        "zset-max-ziplist-value",
        Kind::Memory,
    ),
    Parameter {
        name: "slowlog-log-slower-than",
        alias: None,
        kind: Kind::Integer { min: -1 },
        scope: Scope::Process,
    },
    Parameter {
        name: "slowlog-max-len",
        alias: None,
        kind: INTEGER,
        scope: Scope::Process,
    },
    Parameter {
        name: "notify-keyspace-events",
        alias: None,
        kind: Kind::Events,
        scope: Scope::Cluster,
    },
    Parameter {
        name: "busy-reply-threshold",
        alias: Some("lua-time-limit"),
        kind: INTEGER,
        scope: Scope::Process,
    },
];

const INTEGER: Kind = Kind::Integer { min: 0 };

/// The keyspace notification parameter's name: cluster-scoped, but not one of the limits.
pub const NOTIFY: &str = "notify-keyspace-events";

const fn cluster(name: &'static str, alias: &'static str, kind: Kind) -> Parameter {
    Parameter {
        name,
        alias: Some(alias),
        kind,
        scope: Scope::Cluster,
    }
}

/// Parameters CONFIG GET reports and CONFIG SET refuses (Tessera has no such setting to
/// change): what redis-benchmark asks for.
const REPORTED: &[(&str, &str)] = &[("save", ""), ("appendonly", "no")];

/// One parameter set by CONFIG SET: its canonical name and value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub name: &'static str,
    pub scope: Scope,
    pub value: i64,
}

/// The current values GET answers from: the cluster's limits and keyspace notification flags,
/// and the process's parameters (canonical name → value).
pub struct Current<'a> {
    pub limits: &'a EncodingLimits,
    pub notify_flags: i64,
    pub process: &'a dyn Fn(&str) -> Option<i64>,
}

fn find(name: &[u8]) -> Option<&'static Parameter> {
    PARAMETERS.iter().find(|parameter| {
        name.eq_ignore_ascii_case(parameter.name.as_bytes())
            || parameter
                .alias
                .is_some_and(|alias| name.eq_ignore_ascii_case(alias.as_bytes()))
    })
}

fn failed(name: &str, reason: &str) -> Value {
    Value::Error(format!(
        "ERR CONFIG SET failed (possibly related to argument '{name}') - {reason}"
    ))
}

/// `CONFIG SET parameter value [parameter value ...]` (arguments from `SET`'s parameter on):
/// the changes, all valid, or Redis 7.0's error reply. All or nothing, as in Redis.
pub fn parse_set(pairs: &[Vec<u8>]) -> Result<Vec<Change>, Value> {
    if pairs.len() < 2 {
        return Err(Value::Error(
            "ERR wrong number of arguments for 'config|set' command".into(),
        ));
    }
    if pairs.len() % 2 == 1 {
        return Err(Value::Error("ERR syntax error".into()));
    }
    let mut changes: Vec<Change> = Vec::new();
    let mut given: Vec<&[u8]> = Vec::new();
    for pair in pairs.chunks(2) {
        let Some(parameter) = find(&pair[0]) else {
            return Err(Value::Error(format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{}'",
                String::from_utf8_lossy(&pair[0])
            )));
        };
        let value = &pair[1];
        if given.iter().any(|name| name.eq_ignore_ascii_case(&pair[0])) {
            return Err(failed(
                &String::from_utf8_lossy(&pair[0]),
                "duplicate parameter",
            ));
        }
        given.push(&pair[0]);
        let value = parse_value(parameter, value)
            .map_err(|reason| failed(&String::from_utf8_lossy(&pair[0]), &reason))?;
        changes.retain(|change| change.name != parameter.name);
        changes.push(Change {
            name: parameter.name,
            scope: parameter.scope,
            value,
        });
    }
    Ok(changes)
}

fn parse_value(parameter: &Parameter, value: &[u8]) -> Result<i64, String> {
    match parameter.kind {
        Kind::Integer { min } => {
            let number = std::str::from_utf8(value)
                .ok()
                .and_then(|text| text.parse::<i64>().ok())
                .filter(|number| number.to_string().as_bytes() == value)
                .ok_or_else(|| "argument couldn't be parsed into an integer".to_string())?;
            if number < min {
                return Err(format!(
                    "argument must be between {min} and {} inclusive",
                    i64::MAX
                ));
            }
            Ok(number)
        }
        Kind::Memory => memory_value(value).ok_or_else(|| "argument must be a memory value".into()),
        Kind::Events => crate::notify::parse_flags(value),
    }
}

/// A memory size as Redis's `memtoull` reads it: digits, then nothing or a unit (`k` 1000,
/// `kb` 1024, `m`, `mb`, `g`, `gb`; any case). At most `i64::MAX`.
fn memory_value(text: &[u8]) -> Option<i64> {
    let digits = text.iter().take_while(|byte| byte.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let number: i64 = std::str::from_utf8(&text[..digits]).ok()?.parse().ok()?;
    let unit = text[digits..].to_ascii_lowercase();
    let multiplier: i64 = match unit.as_slice() {
        b"" | b"b" => 1,
        b"k" => 1000,
        b"kb" => 1024,
        b"m" => 1000 * 1000,
        b"mb" => 1024 * 1024,
        b"g" => 1000 * 1000 * 1000,
        b"gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    number.checked_mul(multiplier)
}

/// The cluster-scoped changes, as the ordered operation carries them (canonical name, value).
pub fn cluster_changes(changes: &[Change]) -> Vec<(String, u64)> {
    changes
        .iter()
        .filter(|change| change.scope == Scope::Cluster)
        .map(|change| {
            let value = u64::try_from(change.value).expect("cluster parameters are never negative");
            (change.name.to_string(), value)
        })
        .collect()
}

/// Sets one of the limits by its canonical name; false (nothing changed) for any other name.
pub fn set_limit(limits: &mut EncodingLimits, name: &str, value: u64) -> bool {
    let field = match name {
        "hash-max-listpack-entries" => &mut limits.hash_max_listpack_entries,
        "hash-max-listpack-value" => &mut limits.hash_max_listpack_value,
        "set-max-intset-entries" => &mut limits.set_max_intset_entries,
        "zset-max-listpack-entries" => &mut limits.zset_max_listpack_entries,
        "zset-max-listpack-value" => &mut limits.zset_max_listpack_value,
        _ => return false,
    };
    *field = value;
    true
}

fn limit(limits: &EncodingLimits, name: &str) -> i64 {
    let value = match name {
        "hash-max-listpack-entries" => limits.hash_max_listpack_entries,
        "hash-max-listpack-value" => limits.hash_max_listpack_value,
        "set-max-intset-entries" => limits.set_max_intset_entries,
        "zset-max-listpack-entries" => limits.zset_max_listpack_entries,
        "zset-max-listpack-value" => limits.zset_max_listpack_value,
        other => unreachable!("{other} is not a cluster parameter"),
    };
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn has_glob(pattern: &[u8]) -> bool {
    pattern
        .iter()
        .any(|byte| matches!(byte, b'*' | b'?' | b'['))
}

/// `CONFIG GET pattern [pattern ...]` (the patterns): a map of every matching parameter, each
/// once, under every name that matches (a parameter and its alias are both listed, as in
/// Redis 7.0). A pattern without glob characters names one parameter, any case, and is
/// answered under the name as given (as Redis 7.0 does).
pub fn get_reply(patterns: &[Vec<u8>], current: &Current) -> Value {
    if patterns.is_empty() {
        return Value::Error("ERR wrong number of arguments for 'config|get' command".into());
    }
    let mut pairs: Vec<(Vec<u8>, String)> = Vec::new();
    let mut push = |name: Vec<u8>, value: String| {
        if !pairs
            .iter()
            .any(|(seen, _)| seen.eq_ignore_ascii_case(&name))
        {
            pairs.push((name, value));
        }
    };
    for pattern in patterns {
        for parameter in PARAMETERS {
            let value = match parameter.scope {
                Scope::Cluster if parameter.name == NOTIFY => Some(current.notify_flags),
                Scope::Cluster => Some(limit(current.limits, parameter.name)),
                Scope::Process => (current.process)(parameter.name),
            };
            let Some(value) = value else { continue };
            let value = match parameter.kind {
                Kind::Events => crate::notify::flags_text(value),
                Kind::Integer { .. } | Kind::Memory => value.to_string(),
            };
            let names = std::iter::once(parameter.name).chain(parameter.alias);
            for name in names {
                if !has_glob(pattern) {
                    if pattern.eq_ignore_ascii_case(name.as_bytes()) {
                        push(pattern.clone(), value.clone());
                    }
                } else if glob_matches(pattern, name.as_bytes(), true) {
                    push(name.as_bytes().to_vec(), value.clone());
                }
            }
        }
        for (name, value) in REPORTED {
            if glob_matches(pattern, name.as_bytes(), true) {
                push(name.as_bytes().to_vec(), value.to_string());
            }
        }
    }
    Value::Map(
        pairs
            .into_iter()
            .map(|(name, value)| (Value::Bulk(name), Value::Bulk(value.into_bytes())))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|word| word.as_bytes().to_vec()).collect()
    }

    fn error(value: Value) -> String {
        match value {
            Value::Error(text) => text,
            other => panic!("not an error: {other:?}"),
        }
    }

    #[test]
    fn set_parses_aliases_units_and_refuses_as_redis_does() {
        let changes = parse_set(&args(&[
            "zset-max-ziplist-entries",
            "0",
            "HASH-MAX-LISTPACK-VALUE",
            "1kb",
        ]))
        .unwrap();
        let mut limits = EncodingLimits::default();
        for (name, value) in cluster_changes(&changes) {
            assert!(set_limit(&mut limits, &name, value));
        }
        assert_eq!(limits.zset_max_listpack_entries, 0);
        assert_eq!(limits.hash_max_listpack_value, 1024);
        let refused = |words: &[&str]| error(parse_set(&args(words)).unwrap_err());
        assert_eq!(
            refused(&["x", "1"]),
            "ERR Unknown option or number of arguments for CONFIG SET - 'x'"
        );
        assert_eq!(
            refused(&["hash-max-listpack-entries", "abc"]),
            "ERR CONFIG SET failed (possibly related to argument 'hash-max-listpack-entries') - argument couldn't be parsed into an integer"
        );
        assert_eq!(
            refused(&["hash-max-listpack-entries", "-1"]),
            "ERR CONFIG SET failed (possibly related to argument 'hash-max-listpack-entries') - argument must be between 0 and 9223372036854775807 inclusive"
        );
        assert_eq!(
            refused(&["hash-max-listpack-value", "1x"]),
            "ERR CONFIG SET failed (possibly related to argument 'hash-max-listpack-value') - argument must be a memory value"
        );
        assert_eq!(
            refused(&["set-max-intset-entries", "1", "set-max-intset-entries", "2"]),
            "ERR CONFIG SET failed (possibly related to argument 'set-max-intset-entries') - duplicate parameter"
        );
        assert_eq!(
            refused(&["set-max-intset-entries", "1", "x"]),
            "ERR syntax error"
        );
        assert_eq!(
            refused(&["set-max-intset-entries", "1", "x", "1"]),
            "ERR Unknown option or number of arguments for CONFIG SET - 'x'"
        );
        assert_eq!(
            refused(&["set-max-intset-entries", "1", "slowlog-max-len"]),
            "ERR syntax error"
        );
        assert_eq!(
            refused(&["save", ""]),
            "ERR Unknown option or number of arguments for CONFIG SET - 'save'"
        );
    }

    #[test]
    fn get_lists_names_and_aliases_once() {
        let limits = EncodingLimits::default();
        let process = |name: &str| (name == "slowlog-max-len").then_some(128);
        let current = Current {
            limits: &limits,
            notify_flags: crate::notify::KEYSPACE | crate::notify::LIST,
            process: &process,
        };
        let Value::Map(pairs) = get_reply(&args(&["zset-*", "ZSET-MAX-ZIPLIST-ENTRIES"]), &current)
        else {
            panic!("a map")
        };
        let names: Vec<Vec<u8>> = pairs
            .iter()
            .map(|(name, _)| match name {
                Value::Bulk(name) => name.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(names.len(), 4, "{names:?}");
        let Value::Map(pairs) = get_reply(&args(&["slowlog*", "save"]), &current) else {
            panic!("a map")
        };
        assert_eq!(pairs.len(), 2, "the unset process parameter is not listed");
        let Value::Map(pairs) = get_reply(&args(&["notify-*"]), &current) else {
            panic!("a map")
        };
        assert_eq!(
            pairs,
            vec![(
                Value::Bulk(b"notify-keyspace-events".to_vec()),
                Value::Bulk(b"lK".to_vec())
            )]
        );
    }
}
