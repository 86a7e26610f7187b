//! Where a SQL table's rows lie on a partitioned cluster's ring (Sprint §6.1's database
//! configuration, on Rubberband's ring): a row belongs where its *placement key* lies, a byte
//! string made of the table's name and the row's partition key value (`sql::TableOptions`:
//! the first primary key column unless `WITH (partition_by = …)` names another, the hidden row
//! id for a table without a primary key). The cluster maps placement keys to ring positions
//! exactly as it maps the key-value namespace's keys (`runtime::ecast::payload::KeyPlacement`,
//! by hash), so a table's rows and the RESP keys share the partitions and move together.
//!
//! Placement keys start with `ROW_KEY_PREFIX`, a NUL byte first, so they never name a key a
//! front end stores: they are positions, and the keys a statement's ordering conflicts on
//! (`ecast::KeySet`), never rows of the key-value namespace.

use engine::{Command, Operation, TableSchema, Value};

/// The first bytes of every placement key.
pub const ROW_KEY_PREFIX: &[u8] = b"\0tessera:sql:";

/// The placement key of the rows of `table` whose partition key is `value`. Values are
/// encoded by kind, so that a key compared as INT or BIGINT lands in one place (the planner
/// coerces constants to the column's type; this makes the placement independent of it).
pub fn placement_key(table: &str, value: &Value) -> Vec<u8> {
    let mut key = Vec::with_capacity(ROW_KEY_PREFIX.len() + table.len() + 10);
    key.extend_from_slice(ROW_KEY_PREFIX);
    key.extend_from_slice(table.as_bytes());
    key.push(0);
    match value {
        Value::Null => key.push(0),
        Value::Boolean(flag) => key.extend_from_slice(&[1, u8::from(*flag)]),
        Value::Int(number) => {
            key.push(2);
            key.extend_from_slice(&i64::from(*number).to_be_bytes());
        }
        Value::BigInt(number) => {
            key.push(2);
            key.extend_from_slice(&number.to_be_bytes());
        }
        Value::Double(number) => {
            // -0.0 and 0.0 are one key, as every NaN is (the engine orders them so).
            let canonical = if *number == 0.0 {
                0.0
            } else if number.is_nan() {
                f64::NAN
            } else {
                *number
            };
            key.push(3);
            key.extend_from_slice(&canonical.to_bits().to_be_bytes());
        }
        Value::Text(text) => {
            key.push(4);
            key.extend_from_slice(text.as_bytes());
        }
        Value::Bytea(bytes) => {
            key.push(5);
            key.extend_from_slice(bytes);
        }
        Value::Date(days) => {
            key.push(6);
            key.extend_from_slice(&days.to_be_bytes());
        }
        Value::Timestamp(micros) => {
            key.push(7);
            key.extend_from_slice(&micros.to_be_bytes());
        }
        Value::TimestampTz(micros) => {
            key.push(8);
            key.extend_from_slice(&micros.to_be_bytes());
        }
        // Equal numbers (1.5 and 1.50) place alike: the normalised mantissa and scale.
        Value::Numeric(decimal) => {
            let normal = decimal.normalize();
            key.push(9);
            key.extend_from_slice(&normal.mantissa().to_be_bytes());
            key.push(normal.scale() as u8);
        }
        Value::Uuid(bytes) => {
            key.push(10);
            key.extend_from_slice(bytes);
        }
        // Equal intervals ('1 mon' and '30 days') place alike: their span.
        Value::Interval(interval) => {
            key.push(11);
            key.extend_from_slice(&interval.span().to_be_bytes());
        }
        Value::Jsonb(text) => {
            key.push(12);
            key.extend_from_slice(text.as_bytes());
        }
    }
    key
}

/// The position of a table's partition key column in its rows.
pub fn partition_column(schema: &TableSchema) -> usize {
    let options = sql::TableOptions::of(schema);
    schema
        .columns
        .iter()
        .position(|column| column.name == options.partition_key)
        .unwrap_or(schema.primary_key[0])
}

/// The placement key of a stored row of `schema`.
pub fn row_key(schema: &TableSchema, row: &[Value]) -> Vec<u8> {
    placement_key(&schema.name, &row[partition_column(schema)])
}

/// Where an insert's rows hold the table's partition key: its position in the insert's
/// column list (no list: every column but the hidden row id, in table order). `None` when the
/// insert leaves it out (its rows' key is NULL, which the engine refuses).
fn insert_key_position(schema: &TableSchema, columns: &[String]) -> Option<usize> {
    let key = partition_column(schema);
    if columns.is_empty() {
        let row_id = schema.row_id_column();
        return (0..schema.columns.len())
            .filter(|position| Some(*position) != row_id)
            .position(|position| position == key);
    }
    let name = &schema.columns[key].name;
    columns.iter().position(|column| column == name)
}

/// A partition's share of a statement: every insert keeps only the rows whose placement key
/// `held` accepts (the rows this partition holds; the others are other partitions' share of
/// the same message); everything else runs as it is, since a partition's engine holds only its
/// own rows. An insert whose rows lack the partition key keeps them all (the engine refuses
/// them, NULL in a key column, everywhere alike).
pub fn share_of(
    command: Command,
    schema_of: &impl Fn(&str) -> Option<TableSchema>,
    held: &impl Fn(&[u8]) -> bool,
) -> Command {
    match command {
        Command::Guarded { catalog, command } => Command::Guarded {
            catalog,
            command: Box::new(share_of(*command, schema_of, held)),
        },
        Command::Execute(operation) => {
            Command::Execute(operation_share(operation, schema_of, held))
        }
        Command::Batch(operations) => Command::Batch(
            operations
                .into_iter()
                .map(|operation| operation_share(operation, schema_of, held))
                .collect(),
        ),
        explain @ Command::Explain(_) => explain,
    }
}

fn operation_share(
    operation: Operation,
    schema_of: &impl Fn(&str) -> Option<TableSchema>,
    held: &impl Fn(&[u8]) -> bool,
) -> Operation {
    let Operation::Insert {
        table,
        columns,
        rows,
        on_conflict,
    } = operation
    else {
        return operation;
    };
    let position = schema_of(&table).and_then(|schema| insert_key_position(&schema, &columns));
    let rows = match position {
        Some(position) => rows
            .into_iter()
            .filter(|row| {
                row.get(position)
                    .is_none_or(|value| held(&placement_key(&table, value)))
            })
            .collect(),
        None => rows,
    };
    Operation::Insert {
        table,
        columns,
        rows,
        on_conflict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::{ColumnDef, DataType, OnConflict};

    fn schema(options: &[(&str, &str)]) -> TableSchema {
        let mut schema = TableSchema::new(
            "t",
            vec![
                ColumnDef::new("a", DataType::Int).not_null(),
                ColumnDef::new("b", DataType::Text { length_max: None }).not_null(),
                ColumnDef::new("c", DataType::Int),
            ],
            &["a", "b"],
        )
        .unwrap();
        schema.options = options
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect();
        schema
    }

    #[test]
    fn a_key_is_placed_by_table_and_value_whatever_its_integer_width() {
        let int = placement_key("t", &Value::Int(7));
        assert_eq!(int, placement_key("t", &Value::BigInt(7)));
        assert_ne!(int, placement_key("u", &Value::Int(7)));
        assert_ne!(int, placement_key("t", &Value::Int(8)));
        assert_ne!(int, placement_key("t", &Value::Text("7".into())));
        assert_eq!(
            placement_key("t", &Value::Double(0.0)),
            placement_key("t", &Value::Double(-0.0))
        );
        assert!(int.starts_with(ROW_KEY_PREFIX));
    }

    #[test]
    fn rows_are_placed_by_the_first_key_column_or_the_one_partition_by_names() {
        let row = vec![Value::Int(1), Value::Text("x".into()), Value::Null];
        assert_eq!(
            row_key(&schema(&[]), &row),
            placement_key("t", &Value::Int(1))
        );
        let by_b = schema(&[("partition_key", "b")]);
        assert_eq!(
            row_key(&by_b, &row),
            placement_key("t", &Value::Text("x".into()))
        );
    }

    #[test]
    fn a_share_keeps_the_insert_rows_held_here_and_every_other_operation() {
        let table = schema(&[("partition_key", "b")]);
        let schema_of = |name: &str| (name == "t").then(|| table.clone());
        let held = |key: &[u8]| key == placement_key("t", &Value::Text("mine".into()));
        let insert = |columns: &[&str], rows: Vec<Vec<Value>>| Operation::Insert {
            table: "t".into(),
            columns: columns.iter().map(|column| column.to_string()).collect(),
            rows,
            on_conflict: OnConflict::Error,
        };
        let row = |a: i32, b: &str| vec![Value::Int(a), Value::Text(b.into())];
        let select = Operation::Select {
            table: "t".into(),
            columns: Vec::new(),
            predicate: None,
            limit: None,
        };
        let command = Command::Guarded {
            catalog: 9,
            command: Box::new(Command::Batch(vec![
                insert(
                    &["a", "b"],
                    vec![row(1, "mine"), row(2, "theirs"), row(3, "mine")],
                ),
                // Reversed columns; no column list (every column).
                insert(
                    &["b", "a"],
                    vec![vec![Value::Text("theirs".into()), Value::Int(4)]],
                ),
                insert(
                    &[],
                    vec![vec![Value::Int(5), Value::Text("mine".into()), Value::Null]],
                ),
                // Without the key: kept (refused alike everywhere).
                insert(&["a"], vec![vec![Value::Int(6)]]),
                select.clone(),
            ])),
        };
        let share = share_of(command, &schema_of, &held);
        let Command::Guarded {
            catalog: 9,
            command,
        } = share
        else {
            panic!("{share:?}")
        };
        assert_eq!(
            *command,
            Command::Batch(vec![
                insert(&["a", "b"], vec![row(1, "mine"), row(3, "mine")]),
                insert(&["b", "a"], Vec::new()),
                insert(
                    &[],
                    vec![vec![Value::Int(5), Value::Text("mine".into()), Value::Null]]
                ),
                insert(&["a"], vec![vec![Value::Int(6)]]),
                select,
            ])
        );
    }
}
