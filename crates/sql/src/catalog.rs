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
}

/// The options CREATE TABLE accepts, for hints.
const OPTIONS_ACCEPTED: &str = "partition_by (or partition_key) and placement = hash";

impl TableOptions {
    /// The defaults for a schema: the first primary key column, hash placement.
    pub fn defaults(schema: &TableSchema) -> TableOptions {
        TableOptions {
            partition_key: schema.columns[schema.primary_key[0]].name.clone(),
            placement: Placement::Hash,
        }
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
            }
        }
        options
    }

    /// The canonical `WITH` pairs of these options, as CREATE TABLE stores them.
    pub fn to_pairs(&self) -> Vec<(String, String)> {
        let placement = match self.placement {
            Placement::Hash => "hash",
            Placement::Range => "range",
        };
        vec![
            ("partition_key".into(), self.partition_key.clone()),
            ("placement".into(), placement.into()),
        ]
    }

    /// Parses `WITH (key = value, …)` pairs (keys already lowercased) against a schema.
    /// Unknown options are 42601; bad values 22023; a partition key outside the primary key
    /// 42P16; options and values not built yet (`replication`, `replication_factor`,
    /// `placement = range | everywhere`) 0A000, naming them.
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
                    if !schema.is_primary_key_column(position) {
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
                        "range" | "everywhere" => {
                            return Err(SqlError::unsupported(format!(
                                "table option placement = {}",
                                value.to_ascii_lowercase()
                            ))
                            .with_hint("placement = hash spreads rows over every partition by their partition key"))
                        }
                        _ => return Err(bad_value("hash")),
                    }
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
