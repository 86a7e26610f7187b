//! What simulated clients ask for: single- and multi-key operations on key families, with
//! unique written values so that every read names the write it saw; on SQL seeds also engine
//! commands on a few small tables (upserts, point selects, updates and deletes with non-key
//! predicates, filtered selects and aggregates, batches of them), one table per command.

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

// ----- SQL. -----

/// The name of SQL table `index`.
pub fn table_name(index: usize) -> String {
    format!("acct_{index}")
}

/// Ids come from `0..SQL_IDS`, so a table never holds more rows than that: the checker's model
/// clones a table per step, and small tables keep predicates colliding with each other.
pub const SQL_IDS: u64 = 8;
const OWNERS: [&str; 3] = ["ann", "bob", "cy"];

/// `acct_<n> (id BIGINT PRIMARY KEY, owner TEXT, balance BIGINT, flag BOOLEAN)`.
pub fn table_schema(index: usize) -> engine::TableSchema {
    use engine::{ColumnDef, DataType};
    engine::TableSchema::new(
        &table_name(index),
        vec![
            ColumnDef::new("id", DataType::BigInt).not_null(),
            ColumnDef::new("owner", DataType::Text { length_max: None }),
            ColumnDef::new("balance", DataType::BigInt),
            ColumnDef::new("flag", DataType::Boolean),
        ],
        &["id"],
    )
    .expect("a valid schema")
}

/// The DDL that sets up the SQL tables: each table, and its secondary index if it has one.
pub fn sql_setup(indexes: &[Option<&'static str>]) -> Vec<engine::Operation> {
    let mut operations = Vec::new();
    for (index, column) in indexes.iter().enumerate() {
        operations.push(engine::Operation::CreateTable {
            schema: table_schema(index),
        });
        if let Some(column) = column {
            operations.push(engine::Operation::CreateIndex {
                name: format!("{}_{column}", table_name(index)),
                table: table_name(index),
                column: column.to_string(),
            });
        }
    }
    operations
}

/// The store every replica starts from on a SQL seed: the tables exist, empty.
pub fn initial_store(indexes: &[Option<&'static str>]) -> store::Store {
    let mut store = store::Store::new();
    for operation in sql_setup(indexes) {
        let result = store.engine.execute(&operation);
        assert!(result.is_ok(), "setup {operation:?}: {result:?}");
    }
    store
}

/// Draws the next SQL command of a client: one operation, or a batch of 2–4 on one table.
pub fn next_sql_command(prng: &mut Prng, tables: usize) -> engine::Command {
    let table = table_name(prng.below(tables as u64) as usize);
    if prng.percent(20) {
        let count = prng.range_inclusive(2, 4);
        let reads_only = prng.percent(30);
        let operations = (0..count)
            .map(|_| sql_operation(prng, &table, reads_only))
            .collect();
        return engine::Command::Batch(operations);
    }
    let reads_only = prng.percent(40);
    engine::Command::Execute(sql_operation(prng, &table, reads_only))
}

/// Wraps some commands in `Command::Guarded` as a gateway planning against a cached catalog
/// does: mostly with the tables' digest (the workload runs no DDL, so the guard passes), now
/// and then with a wrong one (refused, nothing runs).
pub fn maybe_guard(prng: &mut Prng, command: engine::Command, catalog: u64) -> engine::Command {
    match prng.below(100) {
        0..=14 => engine::Command::Guarded {
            catalog,
            command: Box::new(command),
        },
        15..=16 => engine::Command::Guarded {
            catalog: catalog ^ 0x5a5a,
            command: Box::new(command),
        },
        _ => command,
    }
}

fn sql_operation(prng: &mut Prng, table: &str, reads_only: bool) -> engine::Operation {
    use engine::{
        Aggregate, AggregateFunction, Assignment, CompareOp, OnConflict, Operation, Predicate,
        Value,
    };
    let id = |prng: &mut Prng| Value::BigInt(prng.below(SQL_IDS) as i64);
    let owner = |prng: &mut Prng| Value::Text(prng.pick(&OWNERS).to_string());
    let balance = |prng: &mut Prng| Value::BigInt(prng.below(100) as i64);
    let flag = |prng: &mut Prng| Value::Boolean(prng.percent(50));
    let table = table.to_string();
    if reads_only {
        return match prng.below(100) {
            0..=34 => Operation::Select {
                table,
                columns: vec![],
                predicate: Some(Predicate::equal("id", id(prng))),
                limit: None,
            },
            35..=64 => {
                // A non-key predicate: owner, balance range, flag.
                let predicate = match prng.below(3) {
                    0 => Predicate::equal("owner", owner(prng)),
                    1 => Predicate::compare("balance", CompareOp::GreaterOrEqual, balance(prng)),
                    _ => Predicate::And(vec![
                        Predicate::equal("flag", flag(prng)),
                        Predicate::compare("balance", CompareOp::Less, balance(prng)),
                    ]),
                };
                Operation::Select {
                    table,
                    columns: vec!["id".into(), "balance".into(), "flag".into()],
                    predicate: Some(predicate),
                    limit: prng.percent(20).then(|| prng.range_inclusive(1, 3)),
                }
            }
            _ => Operation::Aggregate {
                table,
                group_by: if prng.percent(30) {
                    vec!["owner".into()]
                } else {
                    vec![]
                },
                aggregates: vec![
                    Aggregate {
                        function: AggregateFunction::CountRows,
                        column: None,
                    },
                    Aggregate {
                        function: AggregateFunction::Sum,
                        column: Some("balance".into()),
                    },
                ],
                predicate: prng
                    .percent(50)
                    .then(|| Predicate::equal("flag", flag(prng))),
            },
        };
    }
    match prng.below(100) {
        0..=39 => {
            // Upsert: insert, or on a key conflict update the row's owner and balance.
            let (owner, balance) = (owner(prng), balance(prng));
            let on_conflict = if prng.percent(85) {
                OnConflict::DoUpdate(vec![
                    Assignment::new("owner", owner.clone()),
                    Assignment::new("balance", balance.clone()),
                ])
            } else if prng.percent(50) {
                OnConflict::DoNothing
            } else {
                // A plain insert: 23505 on a conflict, and nothing written.
                OnConflict::Error
            };
            let mut rows = vec![vec![id(prng), owner, balance, flag(prng)]];
            if prng.percent(20) {
                let other = id(prng);
                if other != rows[0][0] {
                    rows.push(vec![
                        other,
                        Value::Text("cy".into()),
                        Value::BigInt(7),
                        flag(prng),
                    ]);
                }
            }
            Operation::Insert {
                table,
                columns: vec![],
                rows,
                on_conflict,
            }
        }
        40..=64 => {
            // UPDATE SET flag = c WHERE balance > c AND owner = 'x', or SET balance by flag.
            if prng.percent(60) {
                Operation::Update {
                    table,
                    assignments: vec![Assignment::new("flag", flag(prng))],
                    predicate: Some(Predicate::And(vec![
                        Predicate::compare("balance", CompareOp::Greater, balance(prng)),
                        Predicate::equal("owner", owner(prng)),
                    ])),
                }
            } else {
                Operation::Update {
                    table,
                    assignments: vec![Assignment::new("balance", balance(prng))],
                    predicate: Some(Predicate::equal("flag", flag(prng))),
                }
            }
        }
        65..=84 => Operation::Delete {
            // DELETE WHERE flag = true AND balance < c.
            table,
            predicate: Some(Predicate::And(vec![
                Predicate::equal("flag", Value::Boolean(true)),
                Predicate::compare("balance", CompareOp::Less, balance(prng)),
            ])),
        },
        _ => Operation::Delete {
            table,
            predicate: Some(Predicate::equal("id", id(prng))),
        },
    }
}
