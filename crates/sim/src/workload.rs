//! What simulated clients ask for: single- and multi-key operations on key families, with
//! unique written values so that every read names the write it saw.

use kv::Command;
use stdx::Prng;

pub fn key(family: usize, member: usize) -> Vec<u8> {
    format!("f{family}k{member}").into_bytes()
}

/// Counter families only see increments, reads and deletes; register families see the rest.
pub fn is_counter_family(family: usize) -> bool {
    family.is_multiple_of(3)
}

/// Draws the next command of a client. `unique` is a value no other write uses.
pub fn next_command(
    prng: &mut Prng,
    families: usize,
    family_size: usize,
    unique: String,
) -> Command {
    let family = prng.below(families as u64) as usize;
    // Some operations are a client's pipeline: several commands on one family, executed in
    // order as one operation.
    if prng.percent(8) {
        let count = prng.range_inclusive(2, 4);
        let commands = (0..count)
            .map(|index| command_in_family(prng, family, family_size, format!("{unique}.p{index}")))
            .collect();
        return Command::Pipeline { commands };
    }
    command_in_family(prng, family, family_size, unique)
}

/// One command on one key family.
fn command_in_family(
    prng: &mut Prng,
    family: usize,
    family_size: usize,
    unique: String,
) -> Command {
    let member = prng.below(family_size as u64) as usize;
    let one = key(family, member);
    let some_keys = |prng: &mut Prng| -> Vec<Vec<u8>> {
        let mut members: Vec<usize> = (0..family_size).collect();
        prng.shuffle(&mut members);
        let count = prng.range_inclusive(1, family_size as u64) as usize;
        members[..count]
            .iter()
            .map(|member| key(family, *member))
            .collect()
    };
    let roll = prng.below(100);
    if is_counter_family(family) {
        return match roll {
            0..=29 => Command::Get { key: one },
            30..=79 => Command::Increment {
                key: one,
                by: prng.range_inclusive(1, 9) as i64 - 3,
            },
            80..=89 => Command::MultiGet {
                keys: some_keys(prng),
            },
            _ => Command::Delete { key: one },
        };
    }
    let value = unique.into_bytes();
    match roll {
        0..=29 => Command::Get { key: one },
        30..=54 => Command::Put { key: one, value },
        55..=59 => Command::Delete { key: one },
        60..=67 => Command::Append {
            key: one,
            value: [b"|".as_slice(), &value].concat(),
        },
        68..=72 => Command::GetSet { key: one, value },
        73..=82 => {
            let pairs = some_keys(prng)
                .into_iter()
                .enumerate()
                .map(|(index, key)| {
                    (
                        key,
                        [value.as_slice(), format!(".{index}").as_bytes()].concat(),
                    )
                })
                .collect();
            Command::MultiPut { pairs }
        }
        83..=89 => Command::MultiGet {
            keys: some_keys(prng),
        },
        90..=94 => Command::Set {
            key: one,
            value,
            condition: *prng.pick(&[
                kv::SetCondition::Always,
                kv::SetCondition::IfAbsent,
                kv::SetCondition::IfPresent,
            ]),
            return_previous: prng.percent(50),
        },
        _ => Command::MultiDelete {
            keys: some_keys(prng),
        },
    }
}

/// The keys a command touches.
pub fn keys_of(command: &Command) -> Vec<&[u8]> {
    command.keys()
}
