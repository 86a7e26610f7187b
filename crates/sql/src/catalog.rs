//! What the planner knows about tables: the `Catalog` trait, and a table's placement options.

use crate::error::{sqlstate, SqlError};
use crate::range_placement::{self, RangeMap};
use engine::{Engine, TableSchema, Value};
use std::collections::BTreeMap;

/// How a table's rows map to partitions (`WITH (placement = …)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Placement {
    /// Rows spread by a hash of the table's name and the row's partition key value, on the
    /// ring the key-value namespace uses (each partition holds the rows whose hash lies in its
    /// arc).
    #[default]
    Hash,
    /// Rows placed in partition key order on the same ring (`crate::range_placement`): a key
    /// interval is one interval of positions, so a range predicate on the key reaches only
    /// the partitions whose arcs cover it. `range_bounds` spreads the keys over the ring.
    Range,
    /// Every partition holds every row (small, read-mostly tables, as Sprint places TPC-C's
    /// Item): a read goes to one partition, a write to every partition in one message.
    Everywhere,
}

/// A table's placement: parsed and validated from `CREATE TABLE … WITH (…)`. Every option a
/// table accepts has an effect; the others are refused (0A000 for options or values not built
/// yet, 42601 for unknown ones).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableOptions {
    /// A primary key column (so a key's rows, and its uniqueness, live in one partition); the
    /// hidden row id for a table without a primary key.
    pub partition_key: String,
    pub placement: Placement,
    /// The name the table's rows are placed under (`store::rows::placement_key`): the table's
    /// name when it was created, or the placement name of the table `colocate_with` named. It
    /// never changes, so a renamed table's rows stay where they are. Stored by CREATE TABLE as
    /// the pair `placement_name`; a schema stored before it existed is placed under its name.
    pub placement_name: String,
    /// `WITH (colocate_with = 'other')` as parsed: the planner of CREATE TABLE resolves it to
    /// the other table's placement name (`colocate`); never stored.
    pub colocate_with: Option<String>,
    /// `WITH (range_bounds = 'v0,v1,…')` of a range-placed table: its split points, values of
    /// the partition key's type, strictly increasing (`crate::range_placement::RangeMap`);
    /// empty: positions are the keys' ordinals. Always empty for other placements.
    pub range_bounds: Vec<Value>,
}

/// The options CREATE TABLE accepts, for hints.
const OPTIONS_ACCEPTED: &str =
    "partition_by (or partition_key), placement = hash | range | everywhere, range_bounds and colocate_with";

/// The stored option naming a range-placed table's split points.
const RANGE_BOUNDS: &str = "range_bounds";

/// The stored option naming a table's placement name.
const PLACEMENT_NAME: &str = "placement_name";

/// Which values place alike (`store::rows::placement_key` encodes values by kind): the class of
/// a partition key column's type, for co-location.
fn placement_class(data_type: &engine::DataType) -> &'static str {
    use engine::DataType::*;
    match data_type {
        SmallInt | Int | BigInt => "integer",
        Double | Real => "double precision",
        Text { .. } => "text",
        Char { .. } => "character",
        Boolean => "boolean",
        Bytea => "bytea",
        Date => "date",
        Timestamp => "timestamp",
        TimestampTz => "timestamptz",
        Numeric { .. } => "numeric",
        Uuid => "uuid",
        Interval => "interval",
        Jsonb => "jsonb",
    }
}

impl TableOptions {
    /// The defaults for a schema: the first primary key column, hash placement.
    pub fn defaults(schema: &TableSchema) -> TableOptions {
        TableOptions {
            partition_key: schema.columns[schema.primary_key[0]].name.clone(),
            placement: Placement::Hash,
            placement_name: schema.name.clone(),
            colocate_with: None,
            range_bounds: Vec::new(),
        }
    }

    /// The map from partition key values to ring positions of a range-placed table
    /// (`crate::range_placement`); `None` for other placements, or split points that no longer
    /// map (never stored so: CREATE TABLE checks them).
    pub fn range_map(&self) -> Option<RangeMap> {
        if self.placement != Placement::Range {
            return None;
        }
        let ordinals: Option<Vec<u64>> = self
            .range_bounds
            .iter()
            .map(range_placement::ordinal)
            .collect();
        RangeMap::new(ordinals?).ok()
    }

    /// Co-location resolved (CREATE TABLE): the table takes `other`'s placement name, so that
    /// rows of both with equal partition key values lie in one partition. Refused (42P16)
    /// unless both are hash-placed and their partition keys' types place values alike.
    pub fn colocate(&mut self, schema: &TableSchema, other: &TableEntry) -> Result<(), SqlError> {
        let other_name = &other.schema.name;
        let invalid = |message: String| SqlError::new(sqlstate::INVALID_TABLE_DEFINITION, message);
        let both = |placement: Placement| {
            self.placement == placement && other.options.placement == placement
        };
        if !both(Placement::Hash) && !both(Placement::Range) {
            return Err(invalid(format!(
                "colocate_with = '{other_name}' needs both tables placed by hash, or both by range"
            )));
        }
        // Range-placed tables share positions only under the same split points: a table that
        // names none takes the other's.
        if self.placement == Placement::Range {
            if self.range_bounds.is_empty() {
                self.range_bounds = other.options.range_bounds.clone();
            } else if self.range_bounds != other.options.range_bounds {
                return Err(invalid(format!(
                    "range_bounds differ from those of table \"{other_name}\""
                ))
                .with_detail("co-located range-placed tables must place equal keys at equal positions, so their split points must be equal")
                .with_hint("omit range_bounds to take the other table's"));
            }
        }
        let type_of = |schema: &TableSchema, column: &str| {
            schema
                .columns
                .iter()
                .find(|candidate| candidate.name == column)
                .map(|column| placement_class(&column.data_type))
        };
        let mine = type_of(schema, &self.partition_key);
        let theirs = type_of(&other.schema, &other.options.partition_key);
        if mine.is_none() || mine != theirs {
            return Err(invalid(format!(
                "partition key \"{}\" ({}) cannot be co-located with the partition key \"{}\" ({}) of table \"{other_name}\"",
                self.partition_key,
                mine.unwrap_or("?"),
                other.options.partition_key,
                theirs.unwrap_or("?"),
            ))
            .with_detail("co-located rows share a partition when their partition key values are equal, so the keys must be of one kind of type"));
        }
        self.placement_name = other.options.placement_name.clone();
        self.colocate_with = None;
        Ok(())
    }

    /// The options a schema carries (stored by CREATE TABLE). Stored options are read
    /// leniently (a table created before an option was withdrawn keeps its place): pairs that
    /// no longer parse are skipped, one by one.
    pub fn of(schema: &TableSchema) -> TableOptions {
        let mut options = TableOptions::defaults(schema);
        for pair in &schema.options {
            if let Ok(parsed) = TableOptions::parse(schema, std::slice::from_ref(pair)) {
                match pair.0.as_str() {
                    "partition_key" | "partition_by" => {
                        options.partition_key = parsed.partition_key
                    }
                    "placement" => options.placement = parsed.placement,
                    _ => {}
                }
            } else if pair.0 == "placement" && pair.1 == "range" {
                // (Parsed alone, against the default partition key, which may not support it.)
                options.placement = Placement::Range;
            } else if pair.0 == PLACEMENT_NAME {
                options.placement_name = pair.1.clone();
            }
        }
        // Split points are read against the partition key the other pairs name.
        if let Some((_, text)) = schema.options.iter().find(|pair| pair.0 == RANGE_BOUNDS) {
            if let Ok(bounds) = options.parse_range_bounds(schema, text) {
                options.range_bounds = bounds;
            }
        }
        options
    }

    /// Parses split points (`'v0,v1,…'`) as values of the partition key's type; checks that
    /// the table is range-placed on a key of a type that supports it and that the points map
    /// strictly increasing.
    fn parse_range_bounds(&self, schema: &TableSchema, text: &str) -> Result<Vec<Value>, SqlError> {
        let bad = |reason: String| {
            SqlError::invalid_parameter(format!(
                "invalid value for option \"{RANGE_BOUNDS}\": \"{text}\": {reason}"
            ))
            .with_hint("split points of the partition key, comma-separated and increasing: range_bounds = '0,100000,200000'")
        };
        if self.placement != Placement::Range {
            return Err(bad(
                "only a table with placement = range has split points".into()
            ));
        }
        let column = schema
            .columns
            .iter()
            .find(|column| column.name == self.partition_key)
            .ok_or_else(|| SqlError::undefined_column(&self.partition_key))?;
        let mut bounds = Vec::new();
        for piece in text.split(',') {
            let value = engine::value::parse_text(piece.trim(), column.data_type)
                .map_err(|error| bad(error.to_string()))?;
            if value.is_null() {
                return Err(bad("a split point is NULL".into()));
            }
            bounds.push(value);
        }
        let ordinals = bounds
            .iter()
            .map(|value| range_placement::ordinal(value).ok_or_else(|| bad("no order".into())))
            .collect::<Result<Vec<u64>, SqlError>>()?;
        RangeMap::new(ordinals).map_err(bad)?;
        Ok(bounds)
    }

    /// The canonical `WITH` pairs of these options, as CREATE TABLE stores them.
    pub fn to_pairs(&self) -> Vec<(String, String)> {
        let placement = match self.placement {
            Placement::Hash => "hash",
            Placement::Range => "range",
            Placement::Everywhere => "everywhere",
        };
        let mut pairs = vec![
            ("partition_key".into(), self.partition_key.clone()),
            ("placement".into(), placement.into()),
            (PLACEMENT_NAME.into(), self.placement_name.clone()),
        ];
        if !self.range_bounds.is_empty() {
            // Text output reads back as the same values (`parse_range_bounds`).
            let texts: Vec<String> = self
                .range_bounds
                .iter()
                .filter_map(engine::value::text_output)
                .collect();
            pairs.push((RANGE_BOUNDS.into(), texts.join(",")));
        }
        pairs
    }

    /// Parses `WITH (key = value, …)` pairs (keys already lowercased) against a schema.
    /// Unknown options are 42601; bad values 22023; a partition key outside the primary key
    /// 42P16; options and values not built yet (`replication`, `replication_factor`, range
    /// placement on a key type without an order-preserving position) 0A000, naming them.
    pub fn parse(
        schema: &TableSchema,
        pairs: &[(String, String)],
    ) -> Result<TableOptions, SqlError> {
        let mut options = TableOptions::defaults(schema);
        let mut seen: Vec<&str> = Vec::new();
        let mut range_bounds: Option<String> = None;
        for (key, value) in pairs {
            // `partition_key` is the older spelling of `partition_by`: one option.
            let name = if key == "partition_key" {
                "partition_by"
            } else {
                key.as_str()
            };
            if seen.contains(&name) {
                return Err(SqlError::syntax(format!(
                    "option \"{key}\" specified more than once"
                )));
            }
            seen.push(name);
            let bad_value = |allowed: &str| {
                SqlError::invalid_parameter(format!(
                    "invalid value for option \"{key}\": \"{value}\""
                ))
                .with_hint(format!("valid values are {allowed}"))
            };
            match name {
                "partition_by" => {
                    let position = schema
                        .columns
                        .iter()
                        .position(|column| column.name == *value)
                        .ok_or_else(|| SqlError::undefined_column(value))?;
                    // A table without a primary key (its hidden row id, unique across the
                    // cluster, keys it) may be placed by any column: the gateway gives each
                    // row its id and routes it by that column (`store::rows::row_id_routing`);
                    // UPDATE of the column is refused, as a key column's is.
                    let row_id_keyed = schema.row_id_column().is_some();
                    if !row_id_keyed && !schema.is_primary_key_column(position) {
                        return Err(SqlError::new(
                            sqlstate::INVALID_TABLE_DEFINITION,
                            format!("partition key \"{value}\" must be a primary key column"),
                        )
                        .with_detail("a row's key must decide its partition, so that the primary key is unique within one partition"));
                    }
                    options.partition_key = value.clone();
                }
                "placement" => {
                    options.placement = match value.to_ascii_lowercase().as_str() {
                        "hash" => Placement::Hash,
                        "everywhere" => Placement::Everywhere,
                        "range" => Placement::Range,
                        _ => return Err(bad_value("hash, range, everywhere")),
                    }
                }
                // Checked once the partition key and placement are known (below).
                "range_bounds" => range_bounds = Some(value.clone()),
                "colocate_with" => {
                    if value.is_empty() {
                        return Err(bad_value("the name of a table"));
                    }
                    options.colocate_with = Some(value.clone());
                }
                "replication" | "replication_factor" => {
                    return Err(SqlError::unsupported(format!("table option \"{key}\""))
                        .with_detail("every table's partitions are the cluster's partition groups, replicated as the cluster is (tessera dev --protocol, --replication)")
                        .with_hint(format!("valid options are {OPTIONS_ACCEPTED}")))
                }
                _ => {
                    return Err(SqlError::syntax(format!("unrecognized table option \"{key}\""))
                        .with_hint(format!("valid options are {OPTIONS_ACCEPTED}")))
                }
            }
        }
        if options.placement == Placement::Range {
            let column = schema
                .columns
                .iter()
                .find(|column| column.name == options.partition_key)
                .ok_or_else(|| SqlError::undefined_column(&options.partition_key))?;
            if !range_placement::supports(&column.data_type) {
                return Err(SqlError::unsupported(format!(
                    "placement = range on a partition key of type {}",
                    column.data_type.name()
                ))
                .with_hint("range placement takes integer, real, text, bytea, boolean, date, timestamp and uuid keys; placement = hash takes any"));
            }
        }
        if let Some(text) = range_bounds {
            options.range_bounds = options.parse_range_bounds(schema, &text)?;
        }
        Ok(options)
    }
}

/// One table as the planner sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct TableEntry {
    pub schema: TableSchema,
    /// Secondary indexes: (index name, its column names, the leading one first), by index
    /// name.
    pub indexes: Vec<(String, Vec<String>)>,
    pub options: TableOptions,
}

/// The tables a statement may name. The gateway implements it over its directory; tests use
/// `MemoryCatalog` or an `Engine`.
pub trait Catalog {
    /// The table of that (already case-folded) name.
    fn table(&self, name: &str) -> Option<TableEntry>;
    /// Every table's name, sorted.
    fn table_names(&self) -> Vec<String>;
}

/// A catalog held in memory.
#[derive(Clone, Debug, Default)]
pub struct MemoryCatalog {
    pub tables: BTreeMap<String, TableEntry>,
}

impl MemoryCatalog {
    pub fn new() -> MemoryCatalog {
        MemoryCatalog::default()
    }

    pub fn insert(&mut self, entry: TableEntry) {
        self.tables.insert(entry.schema.name.clone(), entry);
    }
}

impl Catalog for MemoryCatalog {
    fn table(&self, name: &str) -> Option<TableEntry> {
        self.tables.get(name).cloned()
    }

    fn table_names(&self) -> Vec<String> {
        self.tables.keys().cloned().collect()
    }
}

/// One partition's engine as a catalog: every table with the default options.
impl Catalog for Engine {
    fn table(&self, name: &str) -> Option<TableEntry> {
        Engine::table(self, name).map(|table| TableEntry {
            schema: table.schema.clone(),
            indexes: table
                .indexes
                .values()
                .map(|index| {
                    let columns = index
                        .columns
                        .iter()
                        .map(|column| table.schema.columns[*column].name.clone())
                        .collect();
                    (index.name.clone(), columns)
                })
                .collect(),
            options: TableOptions::of(&table.schema),
        })
    }

    fn table_names(&self) -> Vec<String> {
        self.tables()
            .map(|table| table.schema.name.clone())
            .collect()
    }
}
