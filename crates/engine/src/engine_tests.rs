//! Behaviour of the engine through its public operations.

use crate::expression::{Expression, Function, Operator};
use crate::operation::{
    Aggregate, AggregateFunction, Assignment, ComputedAssignment, Group, OnConflict, Operation,
    Output, Partial,
};
use crate::predicate::{CompareOp, Predicate};
use crate::schema::{ColumnDef, TableSchema};
use crate::state_machine::{Command, Outcome};
use crate::value::{DataType, Value};
use crate::{Engine, EngineError};
use vr::StateMachine;

fn text(value: &str) -> Value {
    Value::Text(value.to_string())
}

/// t(id INT PRIMARY KEY, x INT, y INT, name VARCHAR(8)) with index t_x_idx on x, rows 1..=6
/// with x = id % 3, y = id % 2, name = "n<id>".
fn engine() -> Engine {
    let mut engine = Engine::new();
    let schema = TableSchema::new(
        "t",
        vec![
            ColumnDef::new("id", DataType::Int),
            ColumnDef::new("x", DataType::Int),
            ColumnDef::new("y", DataType::Int),
            ColumnDef::new(
                "name",
                DataType::Text {
                    length_max: Some(8),
                },
            ),
        ],
        &["id"],
    )
    .unwrap();
    engine.execute(&Operation::CreateTable { schema }).unwrap();
    engine
        .execute(&Operation::CreateIndex {
            name: "t_x_idx".into(),
            table: "t".into(),
            column: "x".into(),
        })
        .unwrap();
    let rows = (1..=6)
        .map(|id| {
            vec![
                Value::Int(id),
                Value::Int(id % 3),
                Value::Int(id % 2),
                text(&format!("n{id}")),
            ]
        })
        .collect();
    engine.execute(&insert("t", rows)).unwrap();
    engine
}

fn insert(table: &str, rows: Vec<Vec<Value>>) -> Operation {
    Operation::Insert {
        table: table.into(),
        columns: Vec::new(),
        rows,
        on_conflict: OnConflict::Error,
    }
}

fn select(predicate: Option<Predicate>) -> Operation {
    Operation::Select {
        table: "t".into(),
        columns: vec!["id".into()],
        predicate,
        limit: None,
    }
}

fn ids(output: &Output) -> Vec<i32> {
    let Output::Rows { rows, .. } = output else {
        panic!("not rows: {output:?}");
    };
    rows.iter()
        .map(|row| match row[0] {
            Value::Int(id) => id,
            _ => panic!("not an id"),
        })
        .collect()
}

fn code(result: Result<Output, EngineError>) -> &'static str {
    result.unwrap_err().code()
}

#[test]
fn ddl_errors_carry_sqlstate_codes() {
    let mut engine = engine();
    let schema = engine.table("t").unwrap().schema.clone();
    assert_eq!(
        code(engine.execute(&Operation::CreateTable { schema })),
        "42P07"
    );
    let clash = Operation::CreateIndex {
        name: "t_pkey".into(),
        table: "t".into(),
        column: "y".into(),
    };
    assert_eq!(code(engine.execute(&clash)), "42P07");
    let unknown_column = Operation::CreateIndex {
        name: "t_z".into(),
        table: "t".into(),
        column: "z".into(),
    };
    assert_eq!(code(engine.execute(&unknown_column)), "42703");
    let drop_missing = Operation::DropTable {
        name: "nope".into(),
        if_exists: false,
    };
    assert_eq!(code(engine.execute(&drop_missing)), "42P01");
    let drop_if_exists = Operation::DropTable {
        name: "nope".into(),
        if_exists: true,
    };
    assert_eq!(
        engine.execute(&drop_if_exists),
        Ok(Output::Dropped { existed: false })
    );
    let unknown = Operation::Select {
        table: "t".into(),
        columns: vec!["nope".into()],
        predicate: None,
        limit: None,
    };
    assert_eq!(code(engine.execute(&unknown)), "42703");
    let drop = Operation::DropTable {
        name: "t".into(),
        if_exists: false,
    };
    assert_eq!(engine.execute(&drop), Ok(Output::Dropped { existed: true }));
    assert_eq!(code(engine.execute(&select(None))), "42P01");
}

#[test]
fn every_type_is_stored_typed_and_text_literals_are_parsed() {
    let mut engine = Engine::new();
    let columns = vec![
        ColumnDef::new("k", DataType::BigInt),
        ColumnDef::new("flag", DataType::Boolean),
        ColumnDef::new("n", DataType::Int),
        ColumnDef::new("price", DataType::Double),
        ColumnDef::new(
            "code",
            DataType::Text {
                length_max: Some(3),
            },
        ),
        ColumnDef::new("blob", DataType::Bytea),
        ColumnDef::new("day", DataType::Date),
        ColumnDef::new("at", DataType::Timestamp),
    ];
    let schema = TableSchema::new("all_types", columns, &["k"]).unwrap();
    engine.execute(&Operation::CreateTable { schema }).unwrap();
    let literals = vec![
        text("1"),
        text("true"),
        text("-7"),
        text("2.5"),
        text("LHR"),
        text("\\x0aff"),
        text("2024-02-29"),
        text("2024-02-29 12:00:00"),
    ];
    engine
        .execute(&insert("all_types", vec![literals.clone()]))
        .unwrap();
    let all = Operation::Select {
        table: "all_types".into(),
        columns: Vec::new(),
        predicate: Some(Predicate::equal("day", text("2024-02-29"))),
        limit: None,
    };
    let Ok(Output::Rows { rows, .. }) = engine.execute(&all) else {
        panic!("select fails");
    };
    assert_eq!(
        rows,
        vec![vec![
            Value::BigInt(1),
            Value::Boolean(true),
            Value::Int(-7),
            Value::Double(2.5),
            text("LHR"),
            Value::Bytea(vec![10, 255]),
            Value::Date(19_782),
            Value::Timestamp(19_782 * 86_400_000_000 + 12 * 3_600_000_000),
        ]]
    );
    let mut too_long = literals.clone();
    too_long[0] = text("2");
    too_long[4] = text("LHRX");
    assert_eq!(
        code(engine.execute(&insert("all_types", vec![too_long]))),
        "22001"
    );
    let mut bad_date = literals.clone();
    bad_date[0] = text("3");
    bad_date[6] = text("2023-02-29");
    assert_eq!(
        code(engine.execute(&insert("all_types", vec![bad_date]))),
        "22P02"
    );
    let mut wrong_type = literals;
    wrong_type[0] = text("4");
    wrong_type[2] = Value::Boolean(true);
    assert_eq!(
        code(engine.execute(&insert("all_types", vec![wrong_type]))),
        "42804"
    );
}

#[test]
fn explain_states_the_planners_choice() {
    let engine = engine();
    let explain = |predicate: Predicate| engine.explain(&select(Some(predicate))).unwrap();
    assert_eq!(
        explain(Predicate::equal("id", Value::Int(5))),
        "Index Lookup on t using t_pkey (id = 5)"
    );
    assert_eq!(
        explain(Predicate::In {
            column: "id".into(),
            values: vec![Value::Int(2), Value::Int(1)],
        }),
        "Index Lookup on t using t_pkey (id IN (1, 2))"
    );
    assert_eq!(
        explain(Predicate::equal("x", Value::Int(2))),
        "Index Lookup on t using t_x_idx (x = 2; 1 of 1 index columns)"
    );
    assert_eq!(
        explain(Predicate::And(vec![
            Predicate::compare("id", CompareOp::Greater, Value::Int(2)),
            Predicate::compare("id", CompareOp::LessOrEqual, Value::Int(4)),
        ])),
        "Index Range Scan on t using t_pkey (id > 2 AND id <= 4)"
    );
    assert_eq!(
        explain(Predicate::compare("x", CompareOp::Less, Value::Int(1))),
        "Index Range Scan on t using t_x_idx (x < 1; 1 of 1 index columns)"
    );
    assert_eq!(
        explain(Predicate::equal("y", Value::Int(1))),
        "Shared Scan on t (query index: equality on col y)"
    );
    assert_eq!(
        explain(Predicate::compare(
            "y",
            CompareOp::GreaterOrEqual,
            Value::Int(1)
        )),
        "Shared Scan on t (query index: range on col y)"
    );
    assert_eq!(
        explain(Predicate::Like {
            column: "name".into(),
            pattern: "n%".into(),
        }),
        "Shared Scan on t (query index: residual)"
    );
    assert_eq!(
        engine.explain(&insert("t", vec![])).unwrap(),
        "Insert on t (0 rows)"
    );
}

#[test]
fn composite_primary_key_prefix_is_a_range_scan() {
    let mut engine = Engine::new();
    let schema = TableSchema::new(
        "flights",
        vec![
            ColumnDef::new("airport", DataType::Text { length_max: None }),
            ColumnDef::new("number", DataType::Int),
        ],
        &["airport", "number"],
    )
    .unwrap();
    engine.execute(&Operation::CreateTable { schema }).unwrap();
    let rows = ["LAX", "LHR", "SFO"]
        .iter()
        .flat_map(|airport| (1..=3).map(move |number| vec![text(airport), Value::Int(number)]))
        .collect();
    engine.execute(&insert("flights", rows)).unwrap();
    let query = Operation::Select {
        table: "flights".into(),
        columns: vec!["number".into()],
        predicate: Some(Predicate::And(vec![
            Predicate::equal("airport", text("LHR")),
            Predicate::compare("number", CompareOp::GreaterOrEqual, Value::Int(2)),
        ])),
        limit: None,
    };
    assert_eq!(
        engine.explain(&query).unwrap(),
        "Index Range Scan on flights using flights_pkey (airport = 'LHR' AND number >= 2)"
    );
    assert_eq!(ids(&engine.execute(&query).unwrap()), vec![2, 3]);
    assert_eq!(ids(&engine.read(&query).unwrap()), vec![2, 3]);

    // An index led by a key column the predicate pins finds a superset of the key range: the
    // range is chosen (TPC-C's customer-by-name lookup). An index led by another column is
    // still used.
    engine
        .execute(&Operation::CreateIndex {
            name: "flights_airport_idx".into(),
            table: "flights".into(),
            column: "airport".into(),
        })
        .unwrap();
    assert_eq!(
        engine.explain(&query).unwrap(),
        "Index Range Scan on flights using flights_pkey (airport = 'LHR' AND number >= 2)"
    );
    assert_eq!(ids(&engine.execute(&query).unwrap()), vec![2, 3]);
    engine
        .execute(&Operation::CreateIndex {
            name: "flights_number_idx".into(),
            table: "flights".into(),
            column: "number".into(),
        })
        .unwrap();
    let by_number = Operation::Select {
        table: "flights".into(),
        columns: vec!["number".into()],
        predicate: Some(Predicate::And(vec![
            Predicate::equal("airport", text("LHR")),
            Predicate::equal("number", Value::Int(3)),
        ])),
        limit: None,
    };
    assert_eq!(
        engine.explain(&by_number).unwrap(),
        "Index Lookup on flights using flights_pkey (airport = 'LHR' AND number = 3)"
    );
    let by_number_only = Operation::Select {
        table: "flights".into(),
        columns: vec!["number".into()],
        predicate: Some(Predicate::equal("number", Value::Int(3))),
        limit: None,
    };
    assert_eq!(
        engine.explain(&by_number_only).unwrap(),
        "Index Lookup on flights using flights_number_idx (number = 3; 1 of 1 index columns)"
    );
    assert_eq!(
        ids(&engine.execute(&by_number_only).unwrap()),
        vec![3, 3, 3]
    );
}

#[test]
fn one_cycle_applies_updates_and_deletes_in_batch_order_for_every_row() {
    let mut engine = engine();
    let set_y = |value: i32, predicate: Predicate| Operation::Update {
        table: "t".into(),
        assignments: vec![Assignment::new("y", Value::Int(value))],
        predicate: Some(predicate),
    };
    let y_is = |value: i32| Predicate::equal("y", Value::Int(value));
    let batch = vec![
        select(Some(y_is(1))),
        set_y(7, y_is(1)),
        select(Some(y_is(7))),
        set_y(8, y_is(7)),
        select(Some(y_is(7))),
        Operation::Delete {
            table: "t".into(),
            predicate: Some(y_is(8)),
        },
        select(Some(Predicate::Or(vec![y_is(8), y_is(0)]))),
    ];
    for operation in &batch {
        assert!(engine
            .explain(operation)
            .unwrap()
            .starts_with("Shared Scan"));
    }
    let results = engine.execute_batch(&batch);
    assert_eq!(ids(results[0].as_ref().unwrap()), vec![1, 3, 5]);
    assert_eq!(results[1], Ok(Output::Updated { count: 3 }));
    assert_eq!(ids(results[2].as_ref().unwrap()), vec![1, 3, 5]);
    assert_eq!(results[3], Ok(Output::Updated { count: 3 }));
    assert_eq!(ids(results[4].as_ref().unwrap()), Vec::<i32>::new());
    assert_eq!(results[5], Ok(Output::Deleted { count: 3 }));
    assert_eq!(ids(results[6].as_ref().unwrap()), vec![2, 4, 6]);
    engine.check_invariants().unwrap();
}

#[test]
fn index_lookups_in_a_batch_see_earlier_scans_and_keep_indexes_current() {
    let mut engine = engine();
    let batch = vec![
        Operation::Update {
            table: "t".into(),
            assignments: vec![Assignment::new("x", Value::Int(9))],
            predicate: Some(Predicate::equal("y", Value::Int(0))),
        },
        select(Some(Predicate::equal("x", Value::Int(9)))),
        Operation::Delete {
            table: "t".into(),
            predicate: Some(Predicate::equal("id", Value::Int(4))),
        },
        select(Some(Predicate::equal("x", Value::Int(9)))),
    ];
    assert!(engine
        .explain(&batch[1])
        .unwrap()
        .starts_with("Index Lookup"));
    let results = engine.execute_batch(&batch);
    assert_eq!(ids(results[1].as_ref().unwrap()), vec![2, 4, 6]);
    assert_eq!(results[2], Ok(Output::Deleted { count: 1 }));
    assert_eq!(ids(results[3].as_ref().unwrap()), vec![2, 6]);
    engine.check_invariants().unwrap();
}

#[test]
fn updates_refuse_key_columns_nulls_in_not_null_and_long_strings() {
    let mut engine = Engine::new();
    let schema = TableSchema::new(
        "t",
        vec![
            ColumnDef::new("id", DataType::Int),
            ColumnDef::new(
                "v",
                DataType::Text {
                    length_max: Some(2),
                },
            )
            .not_null(),
        ],
        &["id"],
    )
    .unwrap();
    engine.execute(&Operation::CreateTable { schema }).unwrap();
    let update = |column: &str, value: Value| Operation::Update {
        table: "t".into(),
        assignments: vec![Assignment::new(column, value)],
        predicate: None,
    };
    assert_eq!(code(engine.execute(&update("id", Value::Int(1)))), "0A000");
    assert_eq!(code(engine.execute(&update("v", Value::Null))), "23502");
    assert_eq!(code(engine.execute(&update("v", text("abc")))), "22001");
    assert_eq!(code(engine.execute(&update("w", text("a")))), "42703");
    assert_eq!(
        engine.execute(&update("v", text("ab"))),
        Ok(Output::Updated { count: 0 })
    );
}

#[test]
fn limit_stops_a_select_after_that_many_rows_in_key_order() {
    let mut engine = engine();
    let limited = Operation::Select {
        table: "t".into(),
        columns: vec!["id".into()],
        predicate: Some(Predicate::compare(
            "y",
            CompareOp::GreaterOrEqual,
            Value::Int(0),
        )),
        limit: Some(2),
    };
    assert_eq!(ids(&engine.execute(&limited).unwrap()), vec![1, 2]);
    assert_eq!(ids(&engine.read(&limited).unwrap()), vec![1, 2]);
}

fn apply(engine: &mut Engine, command: &Command) -> Outcome {
    Outcome::decode(&engine.apply(&command.encode())).unwrap()
}

#[test]
fn state_machine_executes_commands_and_query_refuses_writes() {
    let mut engine = engine();
    let read = Command::Execute(select(Some(Predicate::equal("id", Value::Int(3)))));
    let Outcome::Executed(Ok(output)) = Outcome::decode(&engine.query(&read.encode())).unwrap()
    else {
        panic!("query fails");
    };
    assert_eq!(ids(&output), vec![3]);
    let write = Command::Execute(Operation::Delete {
        table: "t".into(),
        predicate: None,
    });
    assert_eq!(
        Outcome::decode(&engine.query(&write.encode())).unwrap(),
        Outcome::Error(EngineError::ReadOnly)
    );
    assert_eq!(engine.table("t").unwrap().rows.len(), 6);
    assert_eq!(
        apply(&mut engine, &write),
        Outcome::Executed(Ok(Output::Deleted { count: 6 }))
    );
    assert_eq!(
        Outcome::decode(&engine.apply(&[0xff, 0xff, 0xff])).unwrap(),
        Outcome::Error(EngineError::Malformed)
    );
}

#[test]
fn state_machine_never_panics_on_random_or_mutated_bytes() {
    let mut engine = engine();
    let valid = Command::Batch(vec![
        select(Some(Predicate::And(vec![
            Predicate::equal("x", Value::Int(1)),
            Predicate::Not(Box::new(Predicate::Like {
                column: "name".into(),
                pattern: "n_".into(),
            })),
        ]))),
        Operation::Update {
            table: "t".into(),
            assignments: vec![Assignment::new("name", text("z"))],
            predicate: Some(Predicate::Between {
                column: "id".into(),
                low: Value::Int(2),
                high: Value::Int(4),
            }),
        },
        Operation::UpdateComputed {
            table: "t".into(),
            assignments: vec![ComputedAssignment::new(
                "y",
                Expression::Case {
                    operand: None,
                    branches: vec![(
                        binary(Operator::Compare(CompareOp::Less), column("x"), int(2)),
                        binary(Operator::Divide, column("y"), column("x")),
                    )],
                    otherwise: Some(Box::new(Expression::Call(
                        Function::Coalesce,
                        vec![column("y"), int(0)],
                    ))),
                },
            )],
            predicate: None,
        },
    ])
    .encode();
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut random = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut decoded, mut malformed) = (0, 0);
    for round in 0..20_000 {
        let bytes: Vec<u8> = if round % 2 == 0 {
            let length = (random() % 64) as usize;
            (0..length).map(|_| random() as u8).collect()
        } else {
            let mut bytes = valid.clone();
            for _ in 0..1 + random() % 3 {
                let at = (random() as usize) % bytes.len();
                bytes[at] = random() as u8;
            }
            bytes.truncate(bytes.len() - (random() % 3) as usize);
            bytes
        };
        let outcome = Outcome::decode(&engine.apply(&bytes)).expect("outcomes decode");
        let _ = Outcome::decode(&engine.query(&bytes)).expect("outcomes decode");
        match outcome {
            Outcome::Error(EngineError::Malformed) => malformed += 1,
            _ => decoded += 1,
        }
        assert!(engine.restore(&bytes).is_err() || engine.check_invariants().is_ok());
        engine.check_invariants().unwrap();
    }
    assert!(malformed > 1_000, "{malformed} refused");
    assert!(decoded > 100, "{decoded} executed");
}

#[test]
fn snapshot_restore_round_trips_tables_and_rebuilds_indexes() {
    let mut engine = engine();
    engine
        .execute(&Operation::Update {
            table: "t".into(),
            assignments: vec![Assignment::new("name", Value::Null)],
            predicate: Some(Predicate::equal("id", Value::Int(2))),
        })
        .unwrap();
    let snapshot = engine.snapshot();
    let mut restored = Engine::new();
    restored.restore(&snapshot).unwrap();
    assert_eq!(restored, engine);
    assert_eq!(
        restored.table("t").unwrap().indexes,
        engine.table("t").unwrap().indexes
    );
    assert_eq!(restored.snapshot(), snapshot);

    let mut truncated = snapshot.clone();
    truncated.truncate(snapshot.len() / 2);
    let before = restored.clone();
    assert!(restored.restore(&truncated).is_err());
    assert_eq!(restored, before);
    assert!(restored.restore(&[]).is_err());
}

#[test]
fn aggregates_return_mergeable_partials_per_group_in_key_order() {
    let mut engine = engine();
    engine
        .execute(&Operation::Update {
            table: "t".into(),
            assignments: vec![Assignment::new("name", Value::Null)],
            predicate: Some(Predicate::equal("id", Value::Int(4))),
        })
        .unwrap();
    let aggregate = |function, column: Option<&str>| Aggregate {
        function,
        column: column.map(str::to_string),
    };
    let grouped = Operation::Aggregate {
        table: "t".into(),
        group_by: vec!["y".into()],
        aggregates: vec![
            aggregate(AggregateFunction::CountRows, None),
            aggregate(AggregateFunction::Count, Some("name")),
            aggregate(AggregateFunction::Sum, Some("id")),
            aggregate(AggregateFunction::Min, Some("name")),
            aggregate(AggregateFunction::Max, Some("x")),
            aggregate(AggregateFunction::Avg, Some("x")),
        ],
        predicate: None,
    };
    assert_eq!(
        engine.execute(&grouped),
        Ok(Output::Groups {
            group_by: vec!["y".into()],
            groups: vec![
                Group {
                    key: vec![Value::Int(0)],
                    partials: vec![
                        Partial::Count(3),
                        Partial::Count(2),
                        Partial::SumInteger(Some(12)),
                        Partial::Min(text("n2")),
                        Partial::Max(Value::Int(2)),
                        Partial::AvgInteger { sum: 3, count: 3 },
                    ],
                },
                Group {
                    key: vec![Value::Int(1)],
                    partials: vec![
                        Partial::Count(3),
                        Partial::Count(3),
                        Partial::SumInteger(Some(9)),
                        Partial::Min(text("n1")),
                        Partial::Max(Value::Int(2)),
                        Partial::AvgInteger { sum: 3, count: 3 },
                    ],
                },
            ],
        })
    );
    let empty = Operation::Aggregate {
        table: "t".into(),
        group_by: Vec::new(),
        aggregates: vec![
            aggregate(AggregateFunction::CountRows, None),
            aggregate(AggregateFunction::Sum, Some("x")),
        ],
        predicate: Some(Predicate::equal("y", Value::Int(5))),
    };
    assert_eq!(
        engine.read(&empty),
        Ok(Output::Groups {
            group_by: Vec::new(),
            groups: vec![Group {
                key: Vec::new(),
                partials: vec![Partial::Count(0), Partial::SumInteger(None)],
            }],
        })
    );
    let sum_text = Operation::Aggregate {
        table: "t".into(),
        group_by: Vec::new(),
        aggregates: vec![aggregate(AggregateFunction::Sum, Some("name"))],
        predicate: None,
    };
    assert_eq!(code(engine.execute(&sum_text)), "42804");
}

#[test]
fn inserts_that_cannot_fail_ride_the_cycle_in_batch_order() {
    let mut engine = engine();
    let y_is = |value: i32| Some(Predicate::equal("y", Value::Int(value)));
    let row = |id: i32, y: i32, name: &str| {
        vec![Value::Int(id), Value::Int(0), Value::Int(y), text(name)]
    };
    let upsert = |rows: Vec<Vec<Value>>, on_conflict: OnConflict| Operation::Insert {
        table: "t".into(),
        columns: Vec::new(),
        rows,
        on_conflict,
    };
    let batch = vec![
        select(y_is(1)),
        upsert(
            vec![row(3, 0, "a"), row(7, 1, "n7"), row(2, 1, "b")],
            OnConflict::DoNothing,
        ),
        Operation::Delete {
            table: "t".into(),
            predicate: y_is(1),
        },
        upsert(
            vec![row(1, 0, "r1"), row(2, 0, "r2")],
            OnConflict::DoUpdate(vec![Assignment::new("name", text("u"))]),
        ),
        Operation::Select {
            table: "t".into(),
            columns: vec!["id".into(), "name".into()],
            predicate: y_is(0),
            limit: None,
        },
    ];
    for operation in &batch {
        let plan = engine.explain(operation).unwrap();
        assert!(
            plan.starts_with("Shared Scan") || plan.ends_with("joins a shared scan cycle)"),
            "{plan}"
        );
    }
    let results = engine.execute_batch(&batch);
    assert_eq!(ids(results[0].as_ref().unwrap()), vec![1, 3, 5]);
    assert_eq!(results[1], Ok(Output::Inserted { count: 1 }));
    assert_eq!(results[2], Ok(Output::Deleted { count: 4 }));
    assert_eq!(results[3], Ok(Output::Inserted { count: 2 }));
    let Ok(Output::Rows { rows, .. }) = &results[4] else {
        panic!("select fails");
    };
    let expected: Vec<Vec<Value>> = [(1, "r1"), (2, "u"), (4, "n4"), (6, "n6")]
        .iter()
        .map(|(id, name)| vec![Value::Int(*id), text(name)])
        .collect();
    assert_eq!(*rows, expected);
    engine.check_invariants().unwrap();
    assert_eq!(engine.table("t").unwrap().rows.len(), 4);
}

fn column(name: &str) -> Expression {
    Expression::Column(name.to_string())
}

fn int(value: i32) -> Expression {
    Expression::Constant(Value::Int(value))
}

fn binary(operator: Operator, left: Expression, right: Expression) -> Expression {
    Expression::Binary(operator, Box::new(left), Box::new(right))
}

fn update_computed(
    assignments: Vec<(&str, Expression)>,
    predicate: Option<Predicate>,
) -> Operation {
    Operation::UpdateComputed {
        table: "t".into(),
        assignments: assignments
            .into_iter()
            .map(|(column, expression)| ComputedAssignment::new(column, expression))
            .collect(),
        predicate,
    }
}

fn all_rows(engine: &Engine) -> Vec<Vec<Value>> {
    engine.table("t").unwrap().rows.values().cloned().collect()
}

#[test]
fn computed_updates_read_the_old_row_and_keep_indexes_exact() {
    let mut engine = engine();
    // x = y, y = x: a swap, on the indexed column x; y + 10 * id for the others.
    let swapped = engine
        .execute(&update_computed(
            vec![("x", column("y")), ("y", column("x"))],
            Some(Predicate::compare(
                "id",
                CompareOp::LessOrEqual,
                Value::Int(3),
            )),
        ))
        .unwrap();
    assert_eq!(swapped, Output::Updated { count: 3 });
    let rows = all_rows(&engine);
    for row in &rows {
        let Value::Int(id) = row[0] else { panic!() };
        let (x, y) = if id <= 3 {
            (id % 2, id % 3)
        } else {
            (id % 3, id % 2)
        };
        assert_eq!(
            (row[1].clone(), row[2].clone()),
            (Value::Int(x), Value::Int(y))
        );
    }
    engine.check_invariants().unwrap();
    // Through the index path (x = 1) and with a text function.
    let updated = engine
        .execute(&update_computed(
            vec![(
                "name",
                Expression::Call(
                    Function::Upper,
                    vec![binary(Operator::Concat, column("name"), column("x"))],
                ),
            )],
            Some(Predicate::equal("x", Value::Int(1))),
        ))
        .unwrap();
    let expected: Vec<Value> = rows
        .iter()
        .filter(|row| row[1] == Value::Int(1))
        .map(|row| {
            let Value::Text(name) = &row[3] else { panic!() };
            text(&format!("{}1", name.to_uppercase()))
        })
        .collect();
    assert_eq!(
        Output::Updated {
            count: expected.len() as u64
        },
        updated
    );
    let names: Vec<Value> = all_rows(&engine)
        .into_iter()
        .filter(|row| row[1] == Value::Int(1))
        .map(|row| row[3].clone())
        .collect();
    assert_eq!(names, expected);
    engine.check_invariants().unwrap();
}

#[test]
fn a_computed_update_that_fails_on_any_row_changes_nothing() {
    let mut engine = engine();
    let before = all_rows(&engine);
    // x is 0 for id 3 and 6: rows 1 and 2 are computed first, then 3 fails.
    let cases: Vec<(Operation, &str)> = vec![
        (
            update_computed(
                vec![("y", binary(Operator::Divide, int(10), column("x")))],
                None,
            ),
            "22012",
        ),
        (
            update_computed(
                vec![("y", binary(Operator::Multiply, column("id"), int(i32::MAX)))],
                None,
            ),
            "22003",
        ),
        (
            update_computed(
                vec![(
                    "name",
                    binary(
                        Operator::Concat,
                        column("name"),
                        Expression::Constant(text("-long-name")),
                    ),
                )],
                None,
            ),
            "22001",
        ),
        (
            update_computed(
                vec![("y", binary(Operator::Add, column("name"), int(1)))],
                None,
            ),
            "42883",
        ),
        (
            update_computed(
                vec![("id", binary(Operator::Add, column("id"), int(1)))],
                None,
            ),
            "0A000",
        ),
        (update_computed(vec![("nope", int(1))], None), "42703"),
        (
            update_computed(vec![("y", int(1)), ("y", int(2))], None),
            "42601",
        ),
        (
            update_computed(
                vec![("y", Expression::Call(Function::NullIf, vec![int(1)]))],
                None,
            ),
            "42601",
        ),
    ];
    for (operation, code) in cases {
        let batch_error = engine.execute_batch(std::slice::from_ref(&operation));
        assert_eq!(
            batch_error[0].as_ref().unwrap_err().code(),
            code,
            "{operation:?}"
        );
        let sequential_error = engine.execute_sequentially(std::slice::from_ref(&operation));
        assert_eq!(sequential_error, batch_error);
        assert_eq!(all_rows(&engine), before, "{operation:?}");
        engine.check_invariants().unwrap();
    }
    // After all that, a statement that succeeds: NULL where x = 2 (a nullable column).
    let operation = update_computed(
        vec![(
            "x",
            Expression::Call(Function::NullIf, vec![column("x"), int(2)]),
        )],
        None,
    );
    assert_eq!(engine.execute(&operation), Ok(Output::Updated { count: 6 }));
    let xs: Vec<Value> = all_rows(&engine)
        .into_iter()
        .map(|row| row[1].clone())
        .collect();
    let (one, zero) = (Value::Int(1), Value::Int(0));
    assert_eq!(
        xs,
        vec![
            one.clone(),
            Value::Null,
            zero.clone(),
            one,
            Value::Null,
            zero
        ]
    );
    engine.check_invariants().unwrap();
}

#[test]
fn expressions_survive_the_wire_and_malformed_ones_are_refused() {
    let operation = update_computed(
        vec![(
            "y",
            Expression::Case {
                operand: Some(Box::new(column("x"))),
                branches: vec![
                    (int(1), int(10)),
                    (int(2), Expression::Negate(Box::new(column("y")))),
                ],
                otherwise: None,
            },
        )],
        None,
    );
    let command = Command::Execute(operation.clone());
    assert_eq!(Command::decode(&command.encode()), Ok(command));
    let mut deep = column("y");
    for _ in 0..crate::expression::EXPRESSION_DEPTH_MAX {
        deep = Expression::Negate(Box::new(deep));
    }
    let too_deep = Command::Execute(update_computed(vec![("y", deep)], None));
    assert_eq!(
        Command::decode(&too_deep.encode()),
        Err(EngineError::Malformed)
    );
    let mut engine = engine();
    let swapped = engine.execute(&operation).unwrap();
    assert_eq!(swapped, Output::Updated { count: 6 });
    let ys: Vec<Value> = all_rows(&engine)
        .into_iter()
        .map(|row| row[2].clone())
        .collect();
    // x = id % 3: 1 → 10, 2 → -(id % 2), 0 → NULL.
    assert_eq!(
        ys,
        vec![
            Value::Int(10),
            Value::Int(0),
            Value::Null,
            Value::Int(10),
            Value::Int(-1),
            Value::Null
        ]
    );
}

#[test]
fn hidden_row_ids_are_assigned_in_order_never_reused_and_kept_by_snapshots() {
    use crate::schema::ROW_ID_COLUMN;
    let mut engine = Engine::new();
    let schema = TableSchema::new(
        "h",
        vec![
            ColumnDef::new("a", DataType::Int),
            ColumnDef::new(ROW_ID_COLUMN, DataType::BigInt).not_null(),
        ],
        &[ROW_ID_COLUMN],
    )
    .unwrap();
    engine.execute(&Operation::CreateTable { schema }).unwrap();
    let insert = |values: &[i32]| Operation::Insert {
        table: "h".into(),
        columns: Vec::new(),
        rows: values
            .iter()
            .map(|value| vec![Value::Int(*value)])
            .collect(),
        on_conflict: OnConflict::Error,
    };
    engine.execute(&insert(&[7, 7, 8])).unwrap();
    let ids = |engine: &Engine| -> Vec<Vec<Value>> {
        engine.table("h").unwrap().rows.values().cloned().collect()
    };
    let row = |a: i32, id: i64| vec![Value::Int(a), Value::BigInt(id)];
    assert_eq!(ids(&engine), vec![row(7, 1), row(7, 2), row(8, 3)]);
    // Delete the newest row: its id is not given again, here or after a snapshot.
    engine
        .execute(&Operation::Delete {
            table: "h".into(),
            predicate: Some(Predicate::equal("a", Value::Int(8))),
        })
        .unwrap();
    let mut restored = Engine::from_snapshot(&engine.snapshot_bytes()).unwrap();
    assert_eq!(restored, engine);
    for engine in [&mut engine, &mut restored] {
        engine.execute(&insert(&[9])).unwrap();
        engine.check_invariants().unwrap();
    }
    assert_eq!(ids(&engine), vec![row(7, 1), row(7, 2), row(9, 4)]);
    assert_eq!(restored, engine);
    // A gateway may give the ids (a partitioned cluster places rows by them): checked as a
    // BIGINT NOT NULL key, and ids the table gives later stay above them.
    let named = |id: Value| Operation::Insert {
        table: "h".into(),
        columns: vec!["a".into(), ROW_ID_COLUMN.into()],
        rows: vec![vec![Value::Int(1), id]],
        on_conflict: OnConflict::Error,
    };
    assert_eq!(
        engine.execute(&named(Value::Null)).unwrap_err().code(),
        "23502"
    );
    assert_eq!(
        engine.execute(&named(Value::BigInt(4))).unwrap_err().code(),
        "23505"
    );
    engine.execute(&named(Value::BigInt(99))).unwrap();
    engine.execute(&insert(&[2])).unwrap();
    assert_eq!(
        ids(&engine),
        vec![row(7, 1), row(7, 2), row(9, 4), row(1, 99), row(2, 100)]
    );
    // ON CONFLICT inserts take ids at execution as well.
    let batch = vec![
        Operation::Insert {
            table: "h".into(),
            columns: vec!["a".into()],
            rows: vec![vec![Value::Int(5)]],
            on_conflict: OnConflict::DoNothing,
        },
        select_all("h"),
    ];
    let mut sequential = engine.clone();
    assert_eq!(
        engine.execute_batch(&batch),
        sequential.execute_sequentially(&batch)
    );
    assert_eq!(engine, sequential);
    assert_eq!(ids(&engine).last(), Some(&row(5, 101)));
    // A user column cannot take the reserved name unless it is the hidden key.
    let clash = TableSchema::new(
        "c",
        vec![
            ColumnDef::new("id", DataType::Int),
            ColumnDef::new(ROW_ID_COLUMN, DataType::BigInt),
        ],
        &["id"],
    );
    assert_eq!(clash.unwrap_err().code(), "42P10");
}

fn select_all(table: &str) -> Operation {
    Operation::Select {
        table: table.into(),
        columns: Vec::new(),
        predicate: None,
        limit: None,
    }
}

/// Rubberband moves a partition's rows of part of the ring: the sender copies them with the
/// catalog (`copy_where`) and drops them (`retain_rows`), the receiver takes them in
/// (`absorb`), indexes and hidden row id counters included.
#[test]
fn rows_copied_absorbed_and_retained_move_between_engines_with_their_indexes() {
    let schema = TableSchema::new(
        "t",
        vec![
            ColumnDef::new("id", DataType::BigInt).not_null(),
            ColumnDef::new("v", DataType::Int),
        ],
        &["id"],
    )
    .unwrap();
    let mut sender = Engine::new();
    sender.execute(&Operation::CreateTable { schema }).unwrap();
    sender
        .execute(&Operation::CreateIndex {
            name: "t_v".into(),
            table: "t".into(),
            column: "v".into(),
        })
        .unwrap();
    let rows: Vec<Vec<Value>> = (0..40)
        .map(|id| vec![Value::BigInt(id), Value::Int((id % 5) as i32)])
        .collect();
    sender
        .execute(&Operation::Insert {
            table: "t".into(),
            columns: Vec::new(),
            rows,
            on_conflict: OnConflict::Error,
        })
        .unwrap();
    let whole = sender.clone();
    let moves = |_: &TableSchema, row: &[Value]| matches!(row[0], Value::BigInt(id) if id >= 25);
    let copy = sender.copy_where(moves);
    sender.retain_rows(|schema, row| !moves(schema, row));
    // The receiver already holds the table with one row of its own (and a stale copy of a
    // moving row, which the copy overwrites).
    let mut receiver = Engine::new();
    receiver
        .execute(&Operation::CreateTable {
            schema: whole.table("t").unwrap().schema.clone(),
        })
        .unwrap();
    receiver
        .execute(&Operation::Insert {
            table: "t".into(),
            columns: Vec::new(),
            rows: vec![
                vec![Value::BigInt(100), Value::Int(1)],
                vec![Value::BigInt(30), Value::Int(4)],
            ],
            on_conflict: OnConflict::Error,
        })
        .unwrap();
    receiver.absorb(copy.clone());
    let mut fresh = Engine::new();
    fresh.absorb(copy);
    for engine in [&sender, &receiver, &fresh] {
        engine.check_invariants().unwrap();
    }
    let ids = |engine: &Engine| -> Vec<i64> {
        engine
            .table("t")
            .unwrap()
            .rows
            .keys()
            .map(|key| match key[0] {
                Value::BigInt(id) => id,
                _ => unreachable!(),
            })
            .collect()
    };
    assert_eq!(ids(&sender), (0..25).collect::<Vec<_>>());
    assert_eq!(ids(&fresh), (25..40).collect::<Vec<_>>());
    assert_eq!(ids(&receiver), (25..40).chain([100]).collect::<Vec<_>>());
    // The moved row 30 is the sender's (v = 0), through the index too.
    let by_v = |engine: &Engine, v: i32| {
        engine
            .read_batch(&[Operation::Select {
                table: "t".into(),
                columns: vec!["id".into()],
                predicate: Some(Predicate::equal("v", Value::Int(v))),
                limit: None,
            }])
            .remove(0)
            .unwrap()
    };
    assert_eq!(
        by_v(&receiver, 0),
        crate::Output::Rows {
            columns: vec!["id".into()],
            rows: vec![
                vec![Value::BigInt(25)],
                vec![Value::BigInt(30)],
                vec![Value::BigInt(35)]
            ],
        }
    );
    assert!(fresh.table("t").unwrap().indexes.contains_key("t_v"));
    assert_eq!(fresh.catalog_digest(), whole.catalog_digest());
}

#[test]
fn an_index_on_several_columns_keys_its_entries_on_all_of_them() {
    let mut engine = engine();
    let digest = engine.catalog_digest();
    let index = |name: &str, columns: &[&str]| Operation::CreateIndexOn {
        name: name.into(),
        table: "t".into(),
        columns: columns.iter().map(|column| column.to_string()).collect(),
    };
    assert_eq!(code(engine.execute(&index("t_yz", &["y", "z"]))), "42703");
    assert_eq!(code(engine.execute(&index("t_none", &[]))), "0A000");
    assert_eq!(
        code(engine.execute(&index("t_x_idx", &["y", "x"]))),
        "42P07"
    );
    assert_eq!(
        engine.catalog_digest(),
        digest,
        "failed DDL changes nothing"
    );
    engine.execute(&index("t_yx", &["y", "x"])).unwrap();
    let created = &engine.table("t").unwrap().indexes["t_yx"];
    assert_eq!(created.columns, vec![2, 1]);
    assert_eq!(created.entries.len(), 6);
    let row = &engine.table("t").unwrap().rows[&vec![Value::Int(1)]];
    assert!(created
        .entries
        .contains(&(vec![row[2].clone(), row[1].clone()], vec![Value::Int(1)])));
    // The definition's other columns are part of the catalog digest.
    let mut other = self::engine();
    other.execute(&index("t_yx", &["y", "id"])).unwrap();
    assert_ne!(engine.catalog_digest(), other.catalog_digest());
    // Writes keep it exact; a lookup by both columns uses both.
    engine
        .execute(&Operation::Delete {
            table: "t".into(),
            predicate: Some(Predicate::equal("x", Value::Int(0))),
        })
        .unwrap();
    engine.check_invariants().unwrap();
    assert_eq!(engine.table("t").unwrap().indexes["t_yx"].entries.len(), 4);
    let select = Operation::Select {
        table: "t".into(),
        columns: vec!["id".into()],
        predicate: Some(Predicate::And(vec![
            Predicate::equal("y", Value::Int(1)),
            Predicate::equal("x", Value::Int(1)),
        ])),
        limit: None,
    };
    assert_eq!(
        engine.explain(&select).unwrap(),
        "Index Lookup on t using t_yx (y = 1 AND x = 1; 2 of 2 index columns)"
    );
    let Ok(Output::Rows { rows, .. }) = engine.execute(&select) else {
        panic!("rows")
    };
    assert_eq!(rows, vec![vec![Value::Int(1)]]);
}

fn alter(changes: Vec<crate::operation::TableChange>) -> Operation {
    Operation::AlterTable {
        table: "t".into(),
        changes,
    }
}

#[test]
fn alter_table_rewrites_rows_remaps_indexes_and_is_atomic() {
    use crate::operation::TableChange;
    let mut engine = engine();
    engine
        .execute(&Operation::CreateIndexOn {
            name: "t_name_y".into(),
            table: "t".into(),
            columns: vec!["name".into(), "y".into()],
        })
        .unwrap();
    let digest = engine.catalog_digest();
    // Two changes, the second failing: nothing changes (the table is altered on a copy).
    let failing = alter(vec![
        TableChange::AddColumn {
            column: ColumnDef::new("z", DataType::Int),
            fill: Value::Int(7),
        },
        TableChange::DropColumn {
            column: "id".into(),
        },
    ]);
    assert_eq!(engine.execute(&failing).unwrap_err().code(), "0A000");
    assert_eq!(engine.catalog_digest(), digest);
    assert_eq!(engine.table("t").unwrap().schema.columns.len(), 4);
    // ADD then DROP: rows rewritten, the index over the dropped column goes, the other is
    // remapped, and lookups through it still find the rows.
    let output = engine.execute(&alter(vec![
        TableChange::AddColumn {
            column: ColumnDef::new("z", DataType::Int),
            fill: Value::Int(7),
        },
        TableChange::DropColumn { column: "x".into() },
    ]));
    assert_eq!(output, Ok(Output::Altered));
    assert_ne!(engine.catalog_digest(), digest);
    engine.check_invariants().unwrap();
    let table = engine.table("t").unwrap();
    assert_eq!(table.indexes.keys().collect::<Vec<_>>(), ["t_name_y"]);
    assert_eq!(table.indexes["t_name_y"].columns, vec![2, 1]);
    assert_eq!(
        table.rows[&vec![Value::Int(4)]],
        vec![Value::Int(4), Value::Int(0), text("n4"), Value::Int(7)]
    );
    let found = engine.execute(&select(Some(Predicate::compare(
        "name",
        CompareOp::Equal,
        text("n5"),
    ))));
    assert_eq!(
        found,
        Ok(Output::Rows {
            columns: vec!["id".into()],
            rows: vec![vec![Value::Int(5)]],
        })
    );
    // SET NOT NULL checks the rows; RENAME TO moves the table under its new name.
    engine
        .execute(&Operation::Update {
            table: "t".into(),
            assignments: vec![Assignment::new("z", Value::Null)],
            predicate: Some(Predicate::compare("id", CompareOp::Equal, Value::Int(2))),
        })
        .unwrap();
    let nulls = engine.execute(&alter(vec![TableChange::SetNotNull {
        column: "z".into(),
        not_null: true,
    }]));
    assert_eq!(
        nulls,
        Err(EngineError::ColumnContainsNulls {
            table: "t".into(),
            column: "z".into(),
        })
    );
    let rename = alter(vec![TableChange::RenameTable { to: "u".into() }]);
    assert_eq!(engine.execute(&rename).unwrap_err().code(), "0A000");
    engine
        .execute(&Operation::Delete {
            table: "t".into(),
            predicate: None,
        })
        .unwrap();
    engine.execute(&rename).unwrap();
    assert!(engine.table("t").is_none());
    assert!(engine.table("u").unwrap().rows.is_empty());
    assert_eq!(
        engine.execute(&Operation::DropIndex {
            name: "t_name_y".into(),
            table: "u".into(),
        }),
        Ok(Output::Dropped { existed: true })
    );
    engine.check_invariants().unwrap();
    // A snapshot round trip keeps the altered table.
    let restored = Engine::from_snapshot(&engine.snapshot_bytes()).unwrap();
    assert_eq!(restored, engine);
}

// ----- CHECK constraints -----

/// The engine of `engine()` with CHECK constraints `t_x_check (x >= 0)` and `t_check
/// (y <= x + 1)` added (every row of `engine()` satisfies both).
fn checked_engine() -> Engine {
    let mut engine = engine();
    let column = |name: &str| Box::new(Expression::Column(name.to_string()));
    let constant = |value: i32| Box::new(Expression::Constant(Value::Int(value)));
    let checks = [
        (
            "t_x_check",
            Expression::Binary(
                Operator::Compare(CompareOp::GreaterOrEqual),
                column("x"),
                constant(0),
            ),
        ),
        (
            "t_check",
            Expression::Binary(
                Operator::Compare(CompareOp::LessOrEqual),
                column("y"),
                Box::new(Expression::Binary(Operator::Add, column("x"), constant(1))),
            ),
        ),
    ];
    for (name, expression) in checks {
        engine
            .execute(&Operation::AlterTable {
                table: "t".into(),
                changes: vec![crate::operation::TableChange::AddCheck {
                    check: crate::schema::CheckConstraint {
                        name: name.into(),
                        expression,
                    },
                }],
            })
            .unwrap();
    }
    engine
}

fn check_violation(result: Result<Output, EngineError>) -> (String, String) {
    match result {
        Err(EngineError::CheckViolation {
            constraint, row, ..
        }) => (constraint, row),
        other => panic!("not a check violation: {other:?}"),
    }
}

#[test]
fn checks_are_kept_in_name_order_and_refuse_a_failing_insert_whole() {
    let mut engine = checked_engine();
    let names: Vec<&str> = engine.tables["t"]
        .schema
        .checks
        .iter()
        .map(|check| check.name.as_str())
        .collect();
    assert_eq!(names, ["t_check", "t_x_check"]);
    let row =
        |id: i32, x: i32, y: i32| vec![Value::Int(id), Value::Int(x), Value::Int(y), text("n")];
    let before = engine.clone();
    let failed = engine.execute(&insert("t", vec![row(10, 1, 1), row(11, -1, 0)]));
    let (constraint, failing) = check_violation(failed.clone());
    assert_eq!(constraint, "t_x_check");
    assert_eq!(failing, "(11, -1, 0, n)");
    assert_eq!(
        failed.unwrap_err().to_string(),
        "new row for relation \"t\" violates check constraint \"t_x_check\""
    );
    assert_eq!(engine, before, "a failing insert writes no row");
    // Both fail: the first in name order is reported.
    let (constraint, _) = check_violation(engine.execute(&insert("t", vec![row(12, -5, 9)])));
    assert_eq!(constraint, "t_check");
    // NULL passes a CHECK.
    let null_x = vec![Value::Int(13), Value::Null, Value::Null, Value::Null];
    engine.execute(&insert("t", vec![null_x])).unwrap();
    engine.check_invariants().unwrap();
}

#[test]
fn checks_refuse_updates_constant_or_computed_as_a_whole() {
    for sequential in [false, true] {
        let mut engine = checked_engine();
        let before = engine.clone();
        let set_y = Operation::Update {
            table: "t".into(),
            assignments: vec![Assignment::new("y", Value::Int(2))],
            predicate: None,
        };
        // y = 2 fails t_check where x = 0 (ids 3 and 6); rows 1, 2 come first.
        let result = if sequential {
            engine
                .execute_sequentially(std::slice::from_ref(&set_y))
                .pop()
                .unwrap()
        } else {
            engine
                .execute_batch(&[select(None), set_y.clone()])
                .pop()
                .unwrap()
        };
        let (constraint, row) = check_violation(result);
        assert_eq!(
            (constraint.as_str(), row.as_str()),
            ("t_check", "(3, 0, 2, n3)")
        );
        assert_eq!(engine, before, "nothing changed");
        // By key, through the index path.
        let by_key = Operation::Update {
            table: "t".into(),
            assignments: vec![Assignment::new("x", Value::Int(-1))],
            predicate: Some(Predicate::equal("id", Value::Int(1))),
        };
        check_violation(engine.execute(&by_key));
        let computed = Operation::UpdateComputed {
            table: "t".into(),
            assignments: vec![ComputedAssignment::new(
                "x",
                Expression::Binary(
                    Operator::Subtract,
                    Box::new(Expression::Column("x".into())),
                    Box::new(Expression::Constant(Value::Int(1))),
                ),
            )],
            predicate: None,
        };
        let (constraint, _) = check_violation(engine.execute(&computed));
        assert_eq!(constraint, "t_check");
        assert_eq!(engine, before, "nothing changed");
        let fine = Operation::Update {
            table: "t".into(),
            assignments: vec![Assignment::new("y", Value::Int(0))],
            predicate: None,
        };
        assert_eq!(engine.execute(&fine), Ok(Output::Updated { count: 6 }));
        engine.check_invariants().unwrap();
    }
}

#[test]
fn checks_apply_to_upserts_proposed_and_updated_rows() {
    let mut engine = checked_engine();
    let before = engine.clone();
    let upsert = |rows: Vec<Vec<Value>>, on_conflict: OnConflict| Operation::Insert {
        table: "t".into(),
        columns: Vec::new(),
        rows,
        on_conflict,
    };
    // DO NOTHING still checks the proposed row, as PostgreSQL does.
    let proposed = vec![Value::Int(1), Value::Int(-1), Value::Int(0), text("n")];
    check_violation(engine.execute(&upsert(vec![proposed], OnConflict::DoNothing)));
    // DO UPDATE's new row (id 3 has x = 0): y = 5 fails t_check; batched with a scan.
    let update_y = OnConflict::DoUpdate(vec![Assignment::new("y", Value::Int(5))]);
    let row3 = vec![Value::Int(3), Value::Int(0), Value::Int(0), text("n")];
    let results = engine.execute_batch(&[select(None), upsert(vec![row3], update_y)]);
    let (constraint, row) = check_violation(results[1].clone());
    assert_eq!(
        (constraint.as_str(), row.as_str()),
        ("t_check", "(3, 0, 5, n3)")
    );
    assert_eq!(engine, before);
}

#[test]
fn add_check_validates_rows_and_drop_column_or_check_removes_it() {
    use crate::operation::TableChange;
    use crate::schema::CheckConstraint;
    let mut engine = checked_engine();
    let alter = |changes: Vec<TableChange>| Operation::AlterTable {
        table: "t".into(),
        changes,
    };
    let positive_y = CheckConstraint {
        name: "y_positive".into(),
        expression: Expression::Binary(
            Operator::Compare(CompareOp::Greater),
            Box::new(Expression::Column("y".into())),
            Box::new(Expression::Constant(Value::Int(0))),
        ),
    };
    let violated = engine
        .execute(&alter(vec![TableChange::AddCheck {
            check: positive_y.clone(),
        }]))
        .unwrap_err();
    assert_eq!(violated.code(), "23514");
    assert_eq!(
        violated.to_string(),
        "check constraint \"y_positive\" of relation \"t\" is violated by some row"
    );
    let duplicate = CheckConstraint {
        name: "t_check".into(),
        ..positive_y.clone()
    };
    let taken = engine
        .execute(&alter(vec![TableChange::AddCheck { check: duplicate }]))
        .unwrap_err();
    assert_eq!(taken.code(), "42710");
    let missing = engine
        .execute(&alter(vec![TableChange::DropCheck {
            name: "nope".into(),
        }]))
        .unwrap_err();
    assert_eq!(
        (missing.code(), missing.to_string().as_str()),
        (
            "42704",
            "constraint \"nope\" of relation \"t\" does not exist"
        )
    );
    // RENAME COLUMN follows into the expressions; DROP COLUMN drops the checks using it.
    engine
        .execute(&alter(vec![TableChange::RenameColumn {
            column: "x".into(),
            to: "x2".into(),
        }]))
        .unwrap();
    check_violation(engine.execute(&Operation::Insert {
        table: "t".into(),
        columns: vec!["id".into(), "x2".into()],
        rows: vec![vec![Value::Int(20), Value::Int(-3)]],
        on_conflict: OnConflict::Error,
    }));
    engine
        .execute(&alter(vec![TableChange::DropCheck {
            name: "t_x_check".into(),
        }]))
        .unwrap();
    assert_eq!(engine.tables["t"].schema.checks.len(), 1);
    engine
        .execute(&alter(vec![TableChange::DropColumn { column: "y".into() }]))
        .unwrap();
    assert!(engine.tables["t"].schema.checks.is_empty());
    engine.check_invariants().unwrap();
}

#[test]
fn checks_survive_a_snapshot_and_change_the_catalog_digest() {
    let plain = engine();
    let engine = checked_engine();
    assert_ne!(plain.catalog_digest(), engine.catalog_digest());
    let restored = Engine::from_snapshot(&engine.snapshot_bytes()).unwrap();
    assert_eq!(
        restored.tables["t"].schema.checks,
        engine.tables["t"].schema.checks
    );
    assert_eq!(restored.catalog_digest(), engine.catalog_digest());
}

/// A receiver that missed DDL (no destination while it ran: a standby, or a process that left
/// the ring) and holds none of the table's rows takes the copy's definitions: its schema and
/// its indexes, so that its catalog digest equals the sender's.
#[test]
fn a_receiver_that_missed_ddl_takes_the_copys_definitions() {
    let schema = TableSchema::new(
        "t",
        vec![
            ColumnDef::new("id", DataType::BigInt).not_null(),
            ColumnDef::new("v", DataType::Int),
        ],
        &["id"],
    )
    .unwrap();
    let mut sender = Engine::new();
    sender
        .execute(&Operation::CreateTable {
            schema: schema.clone(),
        })
        .unwrap();
    let mut receiver = sender.clone();
    let mut member = sender.clone();
    sender
        .execute(&Operation::CreateIndex {
            name: "t_v".into(),
            table: "t".into(),
            column: "v".into(),
        })
        .unwrap();
    sender
        .execute(&Operation::AlterTable {
            table: "t".into(),
            changes: vec![crate::TableChange::AddColumn {
                column: ColumnDef::new("w", DataType::BigInt),
                fill: Value::BigInt(7),
            }],
        })
        .unwrap();
    sender
        .execute(&Operation::Insert {
            table: "t".into(),
            columns: Vec::new(),
            rows: vec![vec![Value::BigInt(1), Value::Int(2), Value::BigInt(7)]],
            on_conflict: OnConflict::Error,
        })
        .unwrap();
    assert_ne!(receiver.catalog_digest(), sender.catalog_digest());
    receiver.absorb(sender.copy_where(|_, _| true));
    assert_eq!(receiver.catalog_digest(), sender.catalog_digest());
    assert_eq!(receiver.table("t").unwrap().rows.len(), 1);
    // A receiver with the same schema but without the index gets the index, rows indexed.
    member
        .execute(&Operation::AlterTable {
            table: "t".into(),
            changes: vec![crate::TableChange::AddColumn {
                column: ColumnDef::new("w", DataType::BigInt),
                fill: Value::BigInt(7),
            }],
        })
        .unwrap();
    member.absorb(sender.copy_where(|_, _| true));
    assert_eq!(member.catalog_digest(), sender.catalog_digest());
    let index = &member.table("t").unwrap().indexes["t_v"];
    assert_eq!(index.entries.len(), 1);
}

// ----- Copy-on-write tables: `Engine::snapshot_copy` (`docs/internals/scans.md`). -----

#[test]
fn a_snapshot_copy_shares_tables_until_a_write_and_never_sees_later_writes() {
    let mut engine = engine();
    let other = TableSchema::new("u", vec![ColumnDef::new("id", DataType::Int)], &["id"])
        .expect("valid schema");
    engine
        .execute(&Operation::CreateTable { schema: other })
        .expect("creates u");
    let bytes = engine.snapshot();
    let copy = engine.snapshot_copy();
    let answer = copy.read(&select_all("t")).expect("reads");
    assert!(copy.shares_table(&engine, "t") && copy.shares_table(&engine, "u"));

    // Reads, alone, in a cycle and as a batch, copy nothing.
    let by_x = Operation::Select {
        table: "t".into(),
        columns: Vec::new(),
        predicate: Some(Predicate::equal("x", Value::Int(1))),
        limit: None,
    };
    let by_y = Operation::Select {
        table: "t".into(),
        columns: Vec::new(),
        predicate: Some(Predicate::equal("y", Value::Int(1))),
        limit: None,
    };
    engine.execute(&select_all("t")).expect("reads");
    engine.execute(&by_y).expect("reads");
    engine.execute_batch(&[select_all("t"), by_x.clone(), by_y.clone()]);
    assert!(
        copy.shares_table(&engine, "t"),
        "reads do not copy a shared table"
    );

    // A write copies only the table it writes; the copy keeps the old rows.
    let update = Operation::Update {
        table: "t".into(),
        assignments: vec![Assignment::new("name", text("changed"))],
        predicate: Some(Predicate::equal("y", Value::Int(1))),
    };
    engine.execute(&update).expect("updates");
    assert!(!copy.shares_table(&engine, "t"), "the write copied t");
    assert!(copy.shares_table(&engine, "u"), "u was not written");
    assert_ne!(engine.read(&select_all("t")).expect("reads"), answer);
    assert_eq!(copy.read(&select_all("t")).expect("reads"), answer);

    // DDL and more writes after: the copy serialises exactly to the state of its point.
    engine
        .execute(&Operation::CreateIndex {
            name: "t_y_idx".into(),
            table: "t".into(),
            column: "y".into(),
        })
        .expect("creates an index");
    engine
        .execute(&Operation::Delete {
            table: "t".into(),
            predicate: None,
        })
        .expect("deletes");
    engine
        .execute(&Operation::DropTable {
            name: "u".into(),
            if_exists: false,
        })
        .expect("drops u");
    assert_eq!(copy.snapshot(), bytes);
    copy.check_invariants()
        .expect("the copy keeps its invariants");
    engine
        .check_invariants()
        .expect("the engine keeps its invariants");
    assert_eq!(copy.read(&select_all("t")).expect("reads"), answer);
    assert!(
        matches!(copy.read(&select_all("u")), Ok(Output::Rows { rows, .. }) if rows.is_empty()),
        "the copy still has u"
    );
    assert!(engine.read(&select_all("u")).is_err(), "u is dropped");
}

/// big(id INT PRIMARY KEY, body TEXT) with `rows` rows of a `bytes`-byte body each.
fn engine_with_big_rows(rows: i32, bytes: usize) -> Engine {
    let mut engine = Engine::new();
    let schema = TableSchema::new(
        "big",
        vec![
            ColumnDef::new("id", DataType::Int),
            ColumnDef::new("body", DataType::Text { length_max: None }),
        ],
        &["id"],
    )
    .unwrap();
    engine.execute(&Operation::CreateTable { schema }).unwrap();
    let rows = (0..rows)
        .map(|id| {
            let body = format!("{id}{}", "x".repeat(bytes));
            vec![Value::Int(id), text(&body)]
        })
        .collect();
    engine.execute(&insert("big", rows)).unwrap();
    engine
}

#[test]
fn a_read_whose_result_passes_the_bound_fails_with_54000_on_every_path() {
    use crate::operation::RESULT_BYTES_MAX;
    // 80 rows of 512 KiB (a value holds at most 1 MiB): 40 MiB of bodies, over the 32 MiB
    // bound.
    let mut engine = engine_with_big_rows(80, 512 << 10);
    let select =
        |columns: &[&str], predicate: Option<Predicate>, limit: Option<u64>| Operation::Select {
            table: "big".into(),
            columns: columns.iter().map(|column| column.to_string()).collect(),
            predicate,
            limit,
        };
    let everything = select(&["id", "body"], None, None);
    let too_large = |result: &crate::OperationResult| match result {
        Err(error) => error.code() == "54000" && error.to_string().contains("add a LIMIT"),
        Ok(_) => false,
    };
    // The shared scan (a batch), the read path, a read batch and the reference executor agree.
    assert!(too_large(&engine.read(&everything)));
    assert!(too_large(
        &engine.read_batch(std::slice::from_ref(&everything))[0]
    ));
    assert!(too_large(
        &engine.execute_batch(std::slice::from_ref(&everything))[0]
    ));
    assert!(too_large(
        &engine
            .clone()
            .execute_sequentially(std::slice::from_ref(&everything))[0]
    ));
    // A key range that still selects too much: the key-range path fails alike.
    let range = Predicate::And(vec![
        Predicate::compare("id", CompareOp::GreaterOrEqual, Value::Int(2)),
        Predicate::compare("id", CompareOp::Less, Value::Int(79)),
    ]);
    assert!(too_large(&engine.read(&select(
        &["body"],
        Some(range),
        None
    ))));
    // An aggregate grouped by the body: 80 groups of 512 KiB keys.
    let grouped = Operation::Aggregate {
        table: "big".into(),
        group_by: vec!["body".into()],
        aggregates: vec![Aggregate {
            function: AggregateFunction::CountRows,
            column: None,
        }],
        predicate: None,
    };
    assert!(too_large(&engine.read(&grouped)));

    // Reads under the bound are answered: a LIMIT, a narrower column list, a smaller range,
    // and the same table's write in the same batch is not affected by a failing read beside it.
    let limited = engine
        .read(&select(&["id", "body"], None, Some(20)))
        .unwrap();
    assert_eq!(ids(&limited).len(), 20);
    let keys = engine.read(&select(&["id"], None, None)).unwrap();
    assert_eq!(ids(&keys), (0..80).collect::<Vec<_>>());
    let few = Predicate::compare("id", CompareOp::Less, Value::Int(10));
    assert!(engine.read(&select(&["body"], Some(few), None)).is_ok());
    let update = Operation::Update {
        table: "big".into(),
        assignments: vec![Assignment {
            column: "body".into(),
            value: text("short"),
        }],
        predicate: Some(Predicate::equal("id", Value::Int(0))),
    };
    let results = engine.execute_batch(&[everything.clone(), update]);
    assert!(too_large(&results[0]));
    assert_eq!(results[1], Ok(Output::Updated { count: 1 }));

    // The failing read stopped reading once past the bound: the table-level output it would
    // have answered holds just past RESULT_BYTES_MAX of rows, not all 40 MiB.
    let table = engine.table("big").unwrap();
    let bound = crate::operation::bind_scan_operation(&everything, &table.schema)
        .expect("a select binds to a scan")
        .unwrap();
    let Output::Rows { rows, .. } = table.select_on_keys(&bound, table.rows.keys()) else {
        panic!("a select answers rows");
    };
    let read: usize = rows
        .iter()
        .map(|row| crate::operation::result_row_bytes(row))
        .sum();
    assert!(read > RESULT_BYTES_MAX, "{read}");
    assert!(read <= RESULT_BYTES_MAX + (512 << 10) + 64, "{read}");
    assert!(rows.len() < 80, "{}", rows.len());
}

/// Rows live in a persistent map: a write cycle (updates, deletes and upserts sharing one pass,
/// which reads the shared rows and applies its changes after) leaves a snapshot taken before it
/// exactly as it was, and the written table consistent with its indexes.
#[test]
fn a_write_cycle_after_a_snapshot_leaves_the_snapshot_unchanged() {
    let mut engine = engine();
    engine.check_invariants().unwrap();
    let bytes = engine.snapshot();
    let copy = engine.snapshot_copy();
    let before = copy.read(&select_all("t")).expect("reads");
    let batch = [
        Operation::Update {
            table: "t".into(),
            assignments: vec![Assignment::new("x", Value::Int(7))],
            predicate: Some(Predicate::equal("y", Value::Int(1))),
        },
        Operation::Delete {
            table: "t".into(),
            predicate: Some(Predicate::equal("x", Value::Int(2))),
        },
        Operation::Insert {
            table: "t".into(),
            columns: Vec::new(),
            rows: vec![
                vec![Value::Int(3), Value::Int(0), Value::Int(0), text("up")],
                vec![Value::Int(9), Value::Int(9), Value::Int(9), text("new")],
            ],
            on_conflict: OnConflict::DoUpdate(vec![Assignment::new("name", text("u"))]),
        },
    ];
    let results = engine.execute_batch(&batch);
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_ne!(engine.read(&select_all("t")).expect("reads"), before);
    engine.check_invariants().unwrap();
    copy.check_invariants().unwrap();
    assert_eq!(copy.read(&select_all("t")).expect("reads"), before);
    assert_eq!(
        copy.snapshot(),
        bytes,
        "the snapshot is the state at its point"
    );
}

/// `catalog_digest` is cached: after every DDL (succeeding or failing), a write, and an
/// `absorb`, the cached digest is the one computed afresh, and it changed where the catalog did.
#[test]
fn the_cached_catalog_digest_equals_a_fresh_one_after_every_ddl() {
    use crate::operation::TableChange;
    let mut engine = engine();
    let alter = |change: TableChange| Operation::AlterTable {
        table: "t".into(),
        changes: vec![change],
    };
    let steps = vec![
        Operation::CreateTable {
            schema: TableSchema::new("u", vec![ColumnDef::new("id", DataType::Int)], &["id"])
                .expect("valid schema"),
        },
        Operation::CreateIndex {
            name: "t_y_idx".into(),
            table: "t".into(),
            column: "y".into(),
        },
        Operation::CreateIndexOn {
            name: "t_xy_idx".into(),
            table: "t".into(),
            columns: vec!["x".into(), "y".into()],
        },
        alter(TableChange::AddColumn {
            column: ColumnDef::new("z", DataType::Int),
            fill: Value::Int(0),
        }),
        alter(TableChange::RenameColumn {
            column: "z".into(),
            to: "w".into(),
        }),
        alter(TableChange::SetNotNull {
            column: "w".into(),
            not_null: true,
        }),
        alter(TableChange::DropColumn { column: "w".into() }),
        Operation::DropIndex {
            name: "t_y_idx".into(),
            table: "t".into(),
        },
        // Fails: t holds rows.
        alter(TableChange::RenameTable { to: "t2".into() }),
        Operation::AlterTable {
            table: "u".into(),
            changes: vec![TableChange::RenameTable { to: "u2".into() }],
        },
        Operation::DropTable {
            name: "u2".into(),
            if_exists: false,
        },
        // Fails: the table is gone.
        Operation::DropTable {
            name: "u2".into(),
            if_exists: false,
        },
    ];
    for step in &steps {
        let before = engine.catalog_digest();
        let result = engine.execute(step);
        let after = engine.catalog_digest();
        assert_eq!(after, engine.catalog_digest_fresh(), "after {step:?}");
        assert_eq!(
            after != before,
            result.is_ok(),
            "a DDL changes the digest exactly when it succeeds: {step:?} {result:?}"
        );
        engine.check_invariants().unwrap();
    }
    // A write leaves the catalog (and the cached digest) as it was.
    let before = engine.catalog_digest();
    let delete = Operation::Delete {
        table: "t".into(),
        predicate: None,
    };
    engine.execute(&delete).expect("deletes");
    assert_eq!(engine.catalog_digest(), before);
    // Absorbing another engine's tables changes the catalog.
    let mut other = Engine::new();
    other
        .execute(&Operation::CreateTable {
            schema: TableSchema::new("v", vec![ColumnDef::new("id", DataType::Int)], &["id"])
                .expect("valid schema"),
        })
        .expect("creates v");
    engine.absorb(other);
    assert_ne!(engine.catalog_digest(), before);
    assert_eq!(engine.catalog_digest(), engine.catalog_digest_fresh());
}

/// Canary for the check above: a catalog change that bypasses the invalidation (a table
/// inserted behind the engine's back) leaves a stale cached digest, and `check_invariants`
/// reports it.
#[test]
fn check_invariants_catches_a_stale_cached_catalog_digest() {
    let mut engine = engine();
    let cached = engine.catalog_digest();
    let schema = TableSchema::new("u", vec![ColumnDef::new("id", DataType::Int)], &["id"])
        .expect("valid schema");
    engine.tables.insert(
        "u".into(),
        std::sync::Arc::new(crate::table::Table::new(schema)),
    );
    assert_eq!(engine.catalog_digest(), cached, "the cache was bypassed");
    assert_ne!(engine.catalog_digest_fresh(), cached);
    assert!(engine.check_invariants().is_err());
}
