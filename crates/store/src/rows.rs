//! Where a SQL table's rows lie on a partitioned cluster's ring (Sprint §6.1's database
//! configuration, on Rubberband's ring): a row belongs where its *placement key* lies, a byte
//! string made of the table's name and the row's partition key value (`sql::TableOptions`:
//! the first primary key column unless `WITH (partition_by = …)` names another, the hidden row
//! id for a table without a primary key). The cluster maps placement keys to ring positions
//! exactly as it maps the key-value namespace's keys (`cluster::payload::KeyPlacement`, by
//! hash), so a table's rows and the RESP keys share the partitions and move together. A
//! range-placed table's placement keys carry their position instead (`range_placement_key`,
//! `sql::range_placement`): its rows lie on the ring in partition key order.
//!
//! Placement keys start with `ROW_KEY_PREFIX`, a NUL byte first, so they never name a key a
//! front end stores: they are positions, and the keys a statement's ordering conflicts on
//! (`ecast::KeySet`), never rows of the key-value namespace.

use engine::{Command, Operation, Outcome, Output, TableSchema, Value};

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
    push_value(&mut key, value);
    key
}

/// The byte after `ROW_KEY_PREFIX` that marks a range-placed row's placement key (a table name,
/// never empty and never holding NUL, cannot start with it).
const RANGE_MARKER: u8 = 0;

/// The placement key of the rows of a range-placed table (`placement = 'range'`) whose
/// partition key is `value`, lying at ring position `position` (`sql::range_placement`): the
/// prefix, `RANGE_MARKER`, the position (eight bytes, big-endian), then the table and value as
/// `placement_key` has them. The position travels in the key so that every process maps it to
/// the ring without the catalog (`range_position_of_key`).
pub fn range_placement_key(table: &str, value: &Value, position: u64) -> Vec<u8> {
    assert!(!table.is_empty(), "a placement name is never empty");
    let mut key = Vec::with_capacity(ROW_KEY_PREFIX.len() + 9 + table.len() + 10);
    key.extend_from_slice(ROW_KEY_PREFIX);
    key.push(RANGE_MARKER);
    key.extend_from_slice(&position.to_be_bytes());
    key.extend_from_slice(table.as_bytes());
    key.push(0);
    push_value(&mut key, value);
    key
}

/// The ring position a range-placed row's placement key carries; `None` for any other key
/// (placed by hash).
pub fn range_position_of_key(key: &[u8]) -> Option<u64> {
    let rest = key.strip_prefix(ROW_KEY_PREFIX)?;
    let (&RANGE_MARKER, rest) = rest.split_first()? else {
        return None;
    };
    let position: [u8; 8] = rest.get(..8)?.try_into().ok()?;
    Some(u64::from_be_bytes(position))
}

/// The placement key of a row of `schema` whose partition key is `value`: by range for a
/// range-placed table, else by hash (`placement_key`), under the table's placement name.
pub fn key_of(schema: &TableSchema, value: &Value) -> Vec<u8> {
    key_under(&sql::TableOptions::of(schema), value)
}

/// `key_of` for a table's parsed options.
pub fn key_under(options: &sql::TableOptions, value: &Value) -> Vec<u8> {
    match options.range_map() {
        // A kind without an ordinal never reaches here (CREATE TABLE refuses its key type);
        // position 0 keeps such a value placed, deterministically.
        Some(map) => {
            let position = map.position_of(value).unwrap_or(0);
            range_placement_key(&options.placement_name, value, position)
        }
        None => placement_key(&options.placement_name, value),
    }
}

/// The ring positions (inclusive) where rows of a range-placed table with a partition key in
/// `(low, high)` lie; `None` when the table is not range-placed, or a bound is not of the
/// key column's kind (then only every position is safe). An empty interval (low above high)
/// gives the one position of `low`: a statement matching nothing still reaches one partition.
pub fn range_positions(
    schema: &TableSchema,
    low: &std::ops::Bound<Value>,
    high: &std::ops::Bound<Value>,
) -> Option<(u64, u64)> {
    use std::ops::Bound;
    let options = sql::TableOptions::of(schema);
    let map = options.range_map()?;
    let column = schema
        .columns
        .iter()
        .find(|column| column.name == options.partition_key)?;
    let position = |bound: &Bound<Value>, unbounded: u64| match bound {
        Bound::Included(value) | Bound::Excluded(value) => {
            if !sql::range_placement::same_kind(&column.data_type, value) || value.is_null() {
                return None;
            }
            map.position_of(value)
        }
        Bound::Unbounded => Some(unbounded),
    };
    let first = position(low, 0)?;
    let last = position(high, u64::MAX)?;
    Some((first, last.max(first)))
}

/// Appends a value's placement encoding (by kind).
fn push_value(key: &mut Vec<u8>, value: &Value) {
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
}

/// The name a table's rows are placed under (`sql::TableOptions::placement_name`): its name
/// at creation, or the table it is co-located with; a renamed table keeps it.
pub fn placement_name(schema: &TableSchema) -> String {
    sql::TableOptions::of(schema).placement_name
}

/// Whether every partition holds every row of the table (`placement = 'everywhere'`).
pub fn everywhere(schema: &TableSchema) -> bool {
    sql::TableOptions::of(schema).placement == sql::Placement::Everywhere
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
    let options = sql::TableOptions::of(schema);
    let column = schema
        .columns
        .iter()
        .position(|column| column.name == options.partition_key)
        .unwrap_or(schema.primary_key[0]);
    key_under(&options, &row[column])
}

/// Whether a partition whose holdings `held` accepts holds a stored row of `schema`: every
/// partition holds an everywhere table's rows.
pub fn holds_row(schema: &TableSchema, row: &[Value], held: impl Fn(&[u8]) -> bool) -> bool {
    everywhere(schema) || held(&row_key(schema, row))
}

/// Where a command meeting tables placed everywhere goes (`placement = 'everywhere'`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Spread {
    /// No everywhere table: as its routing places it.
    Placed,
    /// Reads of everywhere tables alone: one partition, any (each holds every row); this
    /// placement key names a fixed one (the first table's, for NULL).
    One(Vec<u8>),
    /// A write to an everywhere table: every partition, in one message, answered once
    /// (`answer_once`).
    Every,
    /// A read of everywhere tables with tables placed by hash: where its routing places it,
    /// each everywhere table answered once (`answer_once`).
    PlacedAnsweredOnce,
}

/// How a command's operations meet everywhere tables (`schema_of`: the catalog's schemas).
pub fn spread(
    operations: &[Operation],
    read: bool,
    schema_of: &impl Fn(&str) -> Option<TableSchema>,
) -> Spread {
    let everywhere_tables: Vec<TableSchema> = operations
        .iter()
        .filter_map(|operation| schema_of(operation.table_name()))
        .filter(everywhere)
        .collect();
    let Some(first) = everywhere_tables.first() else {
        return Spread::Placed;
    };
    if !read {
        Spread::Every
    } else if everywhere_tables.len() == operations.len() {
        Spread::One(placement_key(&placement_name(first), &Value::Null))
    } else {
        Spread::PlacedAnsweredOnce
    }
}

/// Each operation on an everywhere table answered once: every partition holds (and changed)
/// the same rows, so the answers of all but the first partition are emptied (no rows, a count
/// of 0, no groups) before the gateway merges them.
pub fn answer_once(
    operations: &[Operation],
    schema_of: &impl Fn(&str) -> Option<TableSchema>,
    outcomes: &mut [Outcome],
) {
    let once: Vec<bool> = operations
        .iter()
        .map(|operation| {
            schema_of(operation.table_name()).is_some_and(|schema| everywhere(&schema))
        })
        .collect();
    if !once.contains(&true) {
        return;
    }
    let empty = |output: &mut Output| match output {
        Output::Inserted { count } | Output::Updated { count } | Output::Deleted { count } => {
            *count = 0
        }
        Output::Rows { rows, .. } => rows.clear(),
        Output::Groups { groups, .. } => groups.clear(),
        Output::Created | Output::Dropped { .. } | Output::Altered => {}
    };
    for outcome in outcomes.iter_mut().skip(1) {
        match outcome {
            Outcome::Executed(Ok(output)) if once.first() == Some(&true) => empty(output),
            Outcome::Batch(results) => {
                for (result, once) in results.iter_mut().zip(&once) {
                    if let (Ok(output), true) = (result, once) {
                        empty(output);
                    }
                }
            }
            _ => {}
        }
    }
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

/// The routing of an insert into a table without a primary key once its rows have hidden
/// row ids (`sql::with_row_ids` routes them by the id): by the table's partition key when
/// `WITH (partition_by = …)` names another column, at its position in the insert's columns,
/// or to NULL's partition when the insert leaves it out (every row's key is NULL there).
pub fn row_id_routing(
    operations: &[Operation],
    routing: sql::Routing,
    schema_of: &impl Fn(&str) -> Option<TableSchema>,
) -> sql::Routing {
    let Some((table, columns)) = operations.iter().find_map(|operation| match operation {
        Operation::Insert { table, columns, .. } => Some((table, columns)),
        _ => None,
    }) else {
        return routing;
    };
    let Some(schema) = schema_of(table) else {
        return routing;
    };
    let key = partition_column(&schema);
    if Some(key) == schema.row_id_column() || columns.is_empty() {
        return routing;
    }
    match insert_key_position(&schema, columns) {
        Some(position) => sql::Routing::RowsByKey { position },
        None => sql::Routing::Keys {
            column: schema.columns[key].name.clone(),
            values: vec![Value::Null],
        },
    }
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
    // Every partition keeps an everywhere table's rows.
    let placed = schema_of(&table).filter(|schema| !everywhere(schema));
    let position = placed.as_ref().and_then(|schema| {
        insert_key_position(schema, &columns)
            .map(|position| (position, sql::TableOptions::of(schema)))
    });
    let rows = match position {
        Some((position, options)) => rows
            .into_iter()
            .filter(|row| {
                row.get(position)
                    .is_none_or(|value| held(&key_under(&options, value)))
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
    fn range_placement_keys_carry_an_order_preserving_position() {
        let ranged = schema(&[("placement", "range"), ("range_bounds", "-100,100")]);
        let position = |key: i32| {
            range_position_of_key(&key_of(&ranged, &Value::Int(key))).expect("a range key")
        };
        // Negative keys below positive ones; clamped outside the split points; NULL placed.
        let keys = [-1000, -100, -99, -1, 0, 1, 50, 99, 100, 1000];
        for pair in keys.windows(2) {
            assert!(position(pair[0]) <= position(pair[1]), "{pair:?}");
        }
        assert!(position(-1) < position(0));
        assert_eq!(position(-1000), 0);
        assert_eq!(position(0), 1 << 63);
        assert_eq!(position(1000), u64::MAX);
        assert!(range_position_of_key(&key_of(&ranged, &Value::Null)).is_some());
        // Distinct keys stay distinct placement keys (their locks and conflicts), even at one
        // position.
        assert_ne!(
            key_of(&ranged, &Value::Int(1000)),
            key_of(&ranged, &Value::Int(2000))
        );
        // A row's key is its partition key value's; hash-placed keys carry no position.
        let row = [Value::Int(-99), Value::Text("x".into()), Value::Null];
        assert_eq!(row_key(&ranged, &row), key_of(&ranged, &Value::Int(-99)));
        let hashed = schema(&[]);
        assert_eq!(range_position_of_key(&row_key(&hashed, &row)), None);
        assert_eq!(range_position_of_key(b"\0tessera:sql:"), None);
        assert_eq!(
            range_position_of_key(b"\0tessera:sql:\0abc"),
            None,
            "too short"
        );
        // The positions of a key interval cover every key in it.
        use std::ops::Bound;
        let (first, last) = range_positions(
            &ranged,
            &Bound::Included(Value::Int(-50)),
            &Bound::Excluded(Value::Int(60)),
        )
        .unwrap();
        for key in -50..60 {
            assert!((first..=last).contains(&position(key)), "{key}");
        }
        assert_eq!(
            range_positions(&hashed, &Bound::Unbounded, &Bound::Unbounded),
            None
        );
        assert_eq!(
            range_positions(
                &ranged,
                &Bound::Included(Value::Text("a".into())),
                &Bound::Unbounded
            ),
            None,
            "a bound of another kind"
        );
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
    fn rows_are_placed_under_the_stored_placement_name_not_the_table_name() {
        let row = vec![Value::Int(1), Value::Text("x".into()), Value::Null];
        let mut renamed = schema(&[("placement_name", "w")]);
        renamed.name = "renamed".into();
        assert_eq!(row_key(&renamed, &row), placement_key("w", &Value::Int(1)));
        assert_eq!(placement_name(&renamed), "w");
        // Stored before placement names: the table's name.
        assert_eq!(placement_name(&schema(&[])), "t");
        let held = |key: &[u8]| key == placement_key("w", &Value::Int(1));
        assert!(holds_row(&renamed, &row, held));
        assert!(!holds_row(&schema(&[]), &row, held));
        // Every partition holds an everywhere table's rows.
        assert!(holds_row(
            &schema(&[("placement", "everywhere")]),
            &row,
            |_| false
        ));
    }

    fn select(table: &str) -> Operation {
        Operation::Select {
            table: table.into(),
            columns: Vec::new(),
            predicate: None,
            limit: None,
        }
    }

    #[test]
    fn everywhere_reads_go_to_one_partition_writes_to_every_one_answered_once() {
        let mut item = schema(&[("placement", "everywhere")]);
        item.name = "item".into();
        let hashed = schema(&[]);
        let schema_of = |name: &str| match name {
            "item" => Some(item.clone()),
            "t" => Some(hashed.clone()),
            _ => None,
        };
        assert_eq!(spread(&[select("t")], true, &schema_of), Spread::Placed);
        assert_eq!(
            spread(&[select("item"), select("item")], true, &schema_of),
            Spread::One(placement_key("item", &Value::Null)),
            "the fixed partition: the item table's placement name, for NULL"
        );
        assert_eq!(
            spread(&[select("item"), select("t")], true, &schema_of),
            Spread::PlacedAnsweredOnce
        );
        let delete = Operation::Delete {
            table: "item".into(),
            predicate: None,
        };
        assert_eq!(
            spread(std::slice::from_ref(&delete), false, &schema_of),
            Spread::Every
        );
        // Answered once: the second partition's item answers emptied, t's kept.
        let rows = |values: &[i32]| {
            Ok(Output::Rows {
                columns: vec!["a".into()],
                rows: values
                    .iter()
                    .map(|value| vec![Value::Int(*value)])
                    .collect(),
            })
        };
        let mut outcomes = vec![
            Outcome::Batch(vec![rows(&[1, 2]), rows(&[7])]),
            Outcome::Batch(vec![rows(&[1, 2]), rows(&[8])]),
        ];
        answer_once(&[select("item"), select("t")], &schema_of, &mut outcomes);
        assert_eq!(
            outcomes,
            vec![
                Outcome::Batch(vec![rows(&[1, 2]), rows(&[7])]),
                Outcome::Batch(vec![rows(&[]), rows(&[8])]),
            ]
        );
        let mut deleted = vec![
            Outcome::Executed(Ok(Output::Deleted { count: 3 })),
            Outcome::Executed(Ok(Output::Deleted { count: 3 })),
            Outcome::Executed(Err(engine::EngineError::Malformed)),
        ];
        answer_once(&[delete], &schema_of, &mut deleted);
        assert_eq!(
            deleted,
            vec![
                Outcome::Executed(Ok(Output::Deleted { count: 3 })),
                Outcome::Executed(Ok(Output::Deleted { count: 0 })),
                Outcome::Executed(Err(engine::EngineError::Malformed)),
            ]
        );
        // Every partition keeps all of an everywhere insert's rows.
        let insert = Command::Execute(Operation::Insert {
            table: "item".into(),
            columns: Vec::new(),
            rows: vec![
                vec![Value::Int(1), Value::Text("x".into()), Value::Null],
                vec![Value::Int(2), Value::Text("y".into()), Value::Null],
            ],
            on_conflict: OnConflict::Error,
        });
        assert_eq!(share_of(insert.clone(), &schema_of, &|_| false), insert);
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
