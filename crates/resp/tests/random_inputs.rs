//! `plan`, `finish`, `info_reply` and `hello_reply` never panic, whatever a client sends.

use kv::{KvError, KvStore, Outcome};
use resp::{finish, hello_reply, info_reply, is_nilext, plan, Plan, ServerInfo, Value};

/// SplitMix64: a tiny seeded generator, enough to explore inputs reproducibly.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const NAMES: &[&str] = &[
    "GET", "SET", "GETSET", "DEL", "UNLINK", "EXISTS", "INCR", "INCRBY", "DECR", "DECRBY",
    "APPEND", "STRLEN", "MGET", "MSET", "DBSIZE", "PING", "ECHO", "HELLO", "AUTH", "COMMAND",
    "CLIENT", "CONFIG", "SELECT", "INFO", "QUIT", "get", "sEt", "hello", "client", "config",
    "command", "FOO", "", "LPUSH",
];

const WORDS: &[&str] = &[
    "NX",
    "XX",
    "GET",
    "KEEPTTL",
    "EX",
    "PX",
    "EXAT",
    "PXAT",
    "nx",
    "get",
    "AUTH",
    "SETNAME",
    "ID",
    "GETNAME",
    "SETINFO",
    "LIB-NAME",
    "LIB-VER",
    "HELP",
    "COUNT",
    "INFO",
    "DOCS",
    "SET",
    "save",
    "appendonly",
    "*",
    "[",
    "[^a-",
    "\\",
    "*?*",
    "0",
    "1",
    "2",
    "3",
    "-1",
    "10",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "+1",
    "01",
    "",
    " ",
    "all",
    "default",
    "server",
    "k",
    "v",
];

fn argument(prng: &mut SplitMix) -> Vec<u8> {
    match prng.below(4) {
        0 => {
            let length = prng.below(300);
            (0..length).map(|_| prng.next() as u8).collect()
        }
        1 => {
            let alphabet = b"\r\n\0 'ab*?[]^-\\\xff\xc3";
            let length = prng.below(12);
            (0..length)
                .map(|_| alphabet[prng.below(alphabet.len())])
                .collect()
        }
        _ => prng.pick(WORDS).as_bytes().to_vec(),
    }
}

fn outcome(prng: &mut SplitMix) -> Outcome {
    let value = |prng: &mut SplitMix| (prng.below(2) == 0).then(|| vec![b'x'; prng.below(4)]);
    match prng.below(5) {
        0 => Outcome::Ok,
        1 => Outcome::Value(value(prng)),
        2 => Outcome::Values((0..prng.below(4)).map(|_| value(prng)).collect()),
        3 => Outcome::Integer(prng.next() as i64 % 3),
        _ => Outcome::Error(
            [
                KvError::Malformed,
                KvError::NotAnInteger,
                KvError::Overflow,
                KvError::NotARead,
            ][prng.below(4)]
            .clone(),
        ),
    }
}

fn assert_wire_safe(value: &Value) {
    match value {
        Value::Simple(text) | Value::Error(text) => {
            assert!(
                !text.contains(['\r', '\n']),
                "{text:?} would break the protocol"
            );
        }
        Value::Array(items) => items.iter().for_each(assert_wire_safe),
        Value::Map(pairs) => pairs.iter().for_each(|(key, value)| {
            assert_wire_safe(key);
            assert_wire_safe(value);
        }),
        _ => {}
    }
}

#[test]
fn random_commands_never_panic_and_errors_stay_on_one_line() {
    let mut prng = SplitMix(0x7e55e7a);
    let mut store = KvStore::new();
    let info = ServerInfo::default();
    let mut executed = 0;
    for _ in 0..40_000 {
        let mut arguments = Vec::new();
        if prng.below(20) != 0 {
            let name = if prng.below(10) == 0 {
                argument(&mut prng)
            } else {
                prng.pick(NAMES).as_bytes().to_vec()
            };
            arguments.push(name);
            for _ in 0..prng.below(8) {
                arguments.push(argument(&mut prng));
            }
        }
        match plan(&arguments) {
            Plan::Reply(value) => assert_wire_safe(&value),
            Plan::Execute(pending) => {
                executed += 1;
                let real = if pending.command.is_read() {
                    store.read(&pending.command)
                } else {
                    store.execute(&pending.command)
                };
                let reply = finish(&pending, &real);
                assert!(
                    !matches!(&reply, Value::Error(text) if text.contains("internal error")),
                    "{arguments:?} produced {reply:?} from {real:?}"
                );
                if is_nilext(&pending) {
                    assert_eq!(reply, Value::ok(), "a nilext command replies +OK");
                }
                assert_wire_safe(&finish(&pending, &outcome(&mut prng)));
            }
            Plan::Hello {
                protocol,
                client_name,
            } => {
                assert!(matches!(protocol, 0 | 2 | 3));
                if let Some(name) = client_name {
                    assert!(name.iter().all(|byte| (b'!'..=b'~').contains(byte)));
                }
                assert_wire_safe(&hello_reply(protocol, &info));
            }
            Plan::Info { section } => {
                let reply = info_reply(&info, section.as_deref());
                assert!(matches!(reply, Value::Verbatim(_)));
            }
            Plan::SetName(name) => assert!(name.iter().all(|byte| (b'!'..=b'~').contains(byte))),
            Plan::Quit | Plan::GetName | Plan::PeerDelay { .. } => {}
        }
    }
    assert!(
        executed > 1_000,
        "the inputs reach the store ({executed} did)"
    );
}
