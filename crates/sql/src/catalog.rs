//! What the planner knows about tables: the `Catalog` trait, and a table's placement options.

use crate::error::{sqlstate, SqlError};
use engine::{Engine, TableSchema};
use std::collections::BTreeMap;

/// How a table's rows map to partitions (`WITH (placement = …)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Placement {
    /// Rows spread by a hash of the table's name and the row's partition key value, on the
    /// ring the key-value namespace uses (each partition holds the rows whose hash lies in its
    /// arc).
    #[default]
    Hash,
    /// Rows split into contiguous ranges of the partition key. Not built: CREATE TABLE refuses
    /// it (0A000); kept so that the planner's range routing stays tested.
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
}

/// The options CREATE TABLE accepts, for hints.
const OPTIONS_ACCEPTED: &str =
    "partition_by (or partition_key), placement = hash | everywhere and colocate_with";

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
        }
    }

    /// Co-location resolved (CREATE TABLE): the table takes `other`'s placement name, so that
    /// rows of both with equal partition key values lie in one partition. Refused (42P16)
    /// unless both are hash-placed and their partition keys' types place values alike.
    pub fn colocate(&mut self, schema: &TableSchema, other: &TableEntry) -> Result<(), SqlError> {
        let other_name = &other.schema.name;
        let invalid = |message: String| SqlError::new(sqlstate::INVALID_TABLE_DEFINITION, message);
        if self.placement != Placement::Hash || other.options.placement != Placement::Hash {
            return Err(invalid(format!(
                "colocate_with = '{other_name}' needs both tables placed by hash"
            )));
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
            } else if pair.0 == PLACEMENT_NAME {
                options.placement_name = pair.1.clone();
            }
        }
        options
    }

    /// The canonical `WITH` pairs of these options, as CREATE TABLE stores them.
    pub fn to_pairs(&self) -> Vec<(String, String)> {
        let placement = match self.placement {
            Placement::Hash => "hash",
            Placement::Range => "range",
            Placement::Everywhere => "everywhere",
        };
        vec![
            ("partition_key".into(), self.partition_key.clone()),
            ("placement".into(), placement.into()),
            (PLACEMENT_NAME.into(), self.placement_name.clone()),
        ]
    }

    /// Parses `WITH (key = value, …)` pairs (keys already lowercased) against a schema.
    /// Unknown options are 42601; bad values 22023; a partition key outside the primary key
    /// 42P16; options and values not built yet (`replication`, `replication_factor`,
    /// `placement = range`) 0A000, naming them.
    pub fn parse(
        schema: &TableSchema,
        pairs: &[(String, String)],
    ) -> Result<TableOptions, SqlError> {
        let mut options = TableOptions::defaults(schema);
        let mut seen: Vec<&str> = Vec::new();
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
                        "range" => {
                            return Err(SqlError::unsupported(format!(
                                "table option placement = {}",
                                value.to_ascii_lowercase()
                            ))
                            .with_hint("placement = hash spreads rows over every partition by their partition key"))
                        }
                        _ => return Err(bad_value("hash, everywhere")),
                    }
                }
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
