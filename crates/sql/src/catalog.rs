//! What the planner knows about tables: the `Catalog` trait, and a table's placement options.

use crate::error::{sqlstate, SqlError};
use engine::{Engine, TableSchema};
use std::collections::BTreeMap;

/// How a table's rows map to partitions (`WITH (placement = …)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Placement {
    /// Rows spread by a hash of the partition key.
    #[default]
    Hash,
    /// Rows split into contiguous ranges of the partition key.
    Range,
}

/// How each partition is replicated (`WITH (replication = …)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Replication {
    /// Viewstamped Replication.
    #[default]
    Vr,
    /// Skyros: nilext writes in one round trip.
    Skyros,
    /// Writes ordered by a sequencer (E-Cast).
    Sequenced,
}

/// Most replicas per partition accepted in `replication_factor`.
pub const REPLICATION_FACTOR_MAX: u32 = 9;

/// A table's placement: parsed and validated from `CREATE TABLE … WITH (…)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableOptions {
    /// A primary key column (so a key's rows, and its uniqueness, live in one partition).
    pub partition_key: String,
    pub placement: Placement,
    pub replication: Replication,
    /// Replicas per partition, 1 to `REPLICATION_FACTOR_MAX`.
    pub replication_factor: u32,
}

impl TableOptions {
    /// The defaults for a schema: the first primary key column, hash, VR, three replicas.
    pub fn defaults(schema: &TableSchema) -> TableOptions {
        TableOptions {
            partition_key: schema.columns[schema.primary_key[0]].name.clone(),
            placement: Placement::Hash,
            replication: Replication::Vr,
            replication_factor: 3,
        }
    }

    /// The options a schema carries (stored by CREATE TABLE), or the defaults if it carries
    /// none or they no longer parse.
    pub fn of(schema: &TableSchema) -> TableOptions {
        TableOptions::parse(schema, &schema.options)
            .unwrap_or_else(|_| TableOptions::defaults(schema))
    }

    /// The canonical `WITH` pairs of these options, as CREATE TABLE stores them.
    pub fn to_pairs(&self) -> Vec<(String, String)> {
        let placement = match self.placement {
            Placement::Hash => "hash",
            Placement::Range => "range",
        };
        let replication = match self.replication {
            Replication::Vr => "vr",
            Replication::Skyros => "skyros",
            Replication::Sequenced => "sequenced",
        };
        vec![
            ("partition_key".into(), self.partition_key.clone()),
            ("placement".into(), placement.into()),
            ("replication".into(), replication.into()),
            (
                "replication_factor".into(),
                self.replication_factor.to_string(),
            ),
        ]
    }

    /// Parses `WITH (key = value, …)` pairs (keys already lowercased) against a schema.
    /// Unknown options are 42601; bad values 22023; a partition key outside the primary key 42P16.
    pub fn parse(
        schema: &TableSchema,
        pairs: &[(String, String)],
    ) -> Result<TableOptions, SqlError> {
        let mut options = TableOptions::defaults(schema);
        let mut seen: Vec<&str> = Vec::new();
        for (key, value) in pairs {
            if seen.contains(&key.as_str()) {
                return Err(SqlError::syntax(format!(
                    "option \"{key}\" specified more than once"
                )));
            }
            seen.push(key);
            let bad_value = |allowed: &str| {
                SqlError::invalid_parameter(format!(
                    "invalid value for option \"{key}\": \"{value}\""
                ))
                .with_hint(format!("valid values are {allowed}"))
            };
            match key.as_str() {
                "partition_key" => {
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
                        "range" => Placement::Range,
                        _ => return Err(bad_value("hash, range")),
                    }
                }
                "replication" => {
                    options.replication = match value.to_ascii_lowercase().as_str() {
                        "vr" => Replication::Vr,
                        "skyros" => Replication::Skyros,
                        "sequenced" => Replication::Sequenced,
                        _ => return Err(bad_value("vr, skyros, sequenced")),
                    }
                }
                "replication_factor" => {
                    options.replication_factor = value
                        .parse::<u32>()
                        .ok()
                        .filter(|factor| (1..=REPLICATION_FACTOR_MAX).contains(factor))
                        .ok_or_else(|| bad_value(&format!("1 to {REPLICATION_FACTOR_MAX}")))?;
                }
                _ => {
                    return Err(SqlError::syntax(format!("unrecognized table option \"{key}\""))
                        .with_hint("valid options are partition_key, placement, replication, replication_factor"))
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
    /// Secondary indexes: (index name, column name), by index name.
    pub indexes: Vec<(String, String)>,
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
                    (
                        index.name.clone(),
                        table.schema.columns[index.column].name.clone(),
                    )
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
