//! Where a planned SQL statement goes on a partitioned cluster (Sprint §6.1): the placement
//! keys its plan's `sql::Routing` pins, every partition, or one partition (the catalog read).
//! Pure, so that the runtime's gateway (`runtime::ecast::sql`) and the simulator's
//! (`sim --ecast --partitions vr --sql-statements`) route statements by the same rules.

use placement::{Position, PositionSet};

/// Where the gateway task sends a SQL statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SqlRoute {
    /// The partitions holding these placement keys (distinct).
    Keys(Vec<Vec<u8>>),
    /// Every partition.
    Every,
    /// The partitions whose arcs meet these positions (a range on a range-placed table's
    /// partition key), in one message as `Every`.
    Range(PositionSet),
    /// One partition (the catalog read).
    Any,
}

/// The operations of a command (under its guard).
pub fn operations_of(command: &engine::Command) -> &[engine::Operation] {
    match command {
        engine::Command::Guarded { command, .. } => operations_of(command),
        engine::Command::Execute(operation) | engine::Command::Explain(operation) => {
            std::slice::from_ref(operation)
        }
        engine::Command::Batch(operations) => operations,
    }
}

/// Where a planned command goes: the placement keys its routing pins (distinct, sorted), or
/// every partition. Keys are placed under their tables' placement names (`schema_of`: the
/// catalog's schemas; a table it lacks is placed under its name). A command meeting tables
/// placed everywhere goes as `store::rows::spread` says: a write to every partition; a read of
/// those tables alone to one partition, `touched` (a placement key the transaction already
/// reached, so that it stays local) or a fixed one.
pub fn route_of(
    routing: &sql::Routing,
    command: &engine::Command,
    schema_of: &impl Fn(&str) -> Option<engine::TableSchema>,
    touched: Option<&[u8]>,
) -> SqlRoute {
    let operations = operations_of(command);
    // By the operations (an EXPLAIN of a write goes where the write would).
    let read = operations.iter().all(engine::Operation::is_read);
    match store::rows::spread(operations, read, schema_of) {
        store::rows::Spread::Every => return SqlRoute::Every,
        store::rows::Spread::One(fixed) => {
            return SqlRoute::Keys(vec![touched.map_or(fixed, <[u8]>::to_vec)])
        }
        store::rows::Spread::Placed | store::rows::Spread::PlacedAnsweredOnce => {}
    }
    // A table's placement (by hash or by range, under its placement name); none for an
    // everywhere table.
    let placed = |table: &str| match schema_of(table) {
        None => Some(sql::TableOptions {
            partition_key: String::new(),
            placement: sql::Placement::Hash,
            placement_name: table.to_string(),
            colocate_with: None,
            range_bounds: Vec::new(),
        }),
        Some(schema) => (!store::rows::everywhere(&schema)).then(|| sql::TableOptions::of(&schema)),
    };
    let mut keys: Vec<Vec<u8>> = match routing {
        sql::Routing::Keys { values, .. } => {
            let Some(options) = operations
                .iter()
                .find_map(|operation| placed(operation.table_name()))
            else {
                return SqlRoute::Every;
            };
            values
                .iter()
                .map(|value| store::rows::key_under(&options, value))
                .collect()
        }
        sql::Routing::RowsByKey { position } => operations
            .iter()
            .filter_map(|operation| match operation {
                engine::Operation::Insert { table, rows, .. } => {
                    let options = placed(table)?;
                    Some(
                        rows.iter()
                            .filter_map(|row| row.get(*position))
                            .map(|value| store::rows::key_under(&options, value))
                            .collect::<Vec<_>>(),
                    )
                }
                _ => None,
            })
            .flatten()
            .collect(),
        sql::Routing::KeyRange { low, high, .. } => {
            return range_route(operations, low, high, schema_of)
        }
        sql::Routing::Every | sql::Routing::NewRowIds | sql::Routing::None => {
            return SqlRoute::Every
        }
    };
    keys.sort_unstable();
    keys.dedup();
    SqlRoute::Keys(keys)
}

/// Where a statement on a range-placed table with its partition key in `(low, high)` goes:
/// the positions those keys lie at (`store::rows::range_positions`), so the partitions whose
/// arcs cover them; every partition if the statement meets another table, or a bound cannot be
/// placed.
fn range_route(
    operations: &[engine::Operation],
    low: &std::ops::Bound<engine::Value>,
    high: &std::ops::Bound<engine::Value>,
    schema_of: &impl Fn(&str) -> Option<engine::TableSchema>,
) -> SqlRoute {
    let Some(table) = operations.first().map(engine::Operation::table_name) else {
        return SqlRoute::Every;
    };
    if operations
        .iter()
        .any(|operation| operation.table_name() != table)
    {
        return SqlRoute::Every;
    }
    match schema_of(table).and_then(|schema| store::rows::range_positions(&schema, low, high)) {
        Some((first, last)) => {
            SqlRoute::Range(PositionSet::from_inclusive(Position(first), Position(last)))
        }
        None => SqlRoute::Every,
    }
}
