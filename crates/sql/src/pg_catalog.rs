//! The virtual catalog: `pg_catalog.*` and `information_schema.*` tables materialised from the
//! `Catalog` at planning time, so that the catalog queries of psql and drivers run through the
//! ordinary gateway pipeline (filter, group, sort, limit, project) with no engine involved.
//!
//! Checked by the tests against the exact text of psql 15's `\dt`, `\d table` and `\d+ table`
//! (the real-process test compares with what PostgreSQL 15 prints), pgjdbc 42's
//! `getTables`, `getColumns`, `getPrimaryKeys`, `getIndexInfo` and `getImportedKeys`, and
//! SQLAlchemy 1.4's PostgreSQL reflection (`reflection_tests.rs` holds their queries verbatim).
//!
//! Supported in catalog queries:
//! - the tables below, with the columns those clients read; `[INNER|LEFT|CROSS] JOIN … ON`
//!   and comma joins (nested loops over materialised rows; every WHERE conjunct is applied as
//!   soon as its tables are joined, and joins stop at `JOIN_ROWS_MAX` rows with 54000);
//! - derived tables (`FROM (SELECT …) alias`) over catalog tables, and
//!   `generate_series(a, b)` in FROM (at most `SERIES_ROWS_MAX` rows);
//! - correlated scalar subqueries, `EXISTS`, `IN (SELECT …)` and `ARRAY(SELECT …)` over
//!   catalog tables (no aggregates, ORDER BY or UNION inside);
//! - every gateway expression, `~`/`!~`/`OPERATOR(pg_catalog.~)` with a small regex subset,
//!   `COLLATE` (ignored), casts to `regclass`/`oid`/`regtype` (no-ops: compare oids with
//!   numbers or numeric strings, as psql does), `format_type`, `pg_get_indexdef` (also with a
//!   column number), `pg_get_constraintdef`, `x = ANY(array)`, `array[k]`, `array_to_string`,
//!   `pg_size_pretty`, `TRIM`, integer `&`, and constant answers for `pg_get_userbyid`,
//!   `pg_table_is_visible`, `obj_description`, `pg_get_expr`, table sizes (NULL), …;
//! - `pg_partition_ancestors(rel)` (the table itself); `information_schema._pg_expandarray`,
//!   `unnest` and `generate_subscripts` set-returning in the select list (expanded together,
//!   over one of our space-separated arrays such as `indkey`); and
//!   `row_number() OVER (PARTITION BY p ORDER BY o)` answered as `o` (exact for `attnum`,
//!   which is dense from 1 per table here).
//!
//! Emulation shortcuts, deliberately lenient so that tools degrade instead of failing:
//! - a query every branch of which (UNION included) inner-joins an empty or unknown catalog
//!   table answers no rows without being compiled, and such a subquery reads no rows;
//! - inside a catalog query, a subquery this emulation cannot evaluate reads as NULL.
//!
//! Not supported: joins of catalog and user tables, arrays as a type (`indkey`, `indoption`
//! are int2vector text such as "1 2", indexed from 0; "{1,2}" text indexes from 1),
//! `::regclass` of a name, comments (`pg_description` is empty). `pg_attrdef` holds the
//! columns' DEFAULTs as text, which `pg_get_expr` returns.
//!
//! | table | rows |
//! |---|---|
//! | `pg_namespace` | pg_catalog (11), public (2200), information_schema |
//! | `pg_class` | per table (relkind 'r'; 'S' for a sequence, oid 16384 + 100 × its rank by name), its primary key index (+1), its secondary indexes (+2, …) |
//! | `pg_attribute` | one per table column (attnum from 1) |
//! | `pg_type` | the engine's types (bool, int2, int4, int8, float4, float8, numeric, text, varchar, bpchar, bytea, date, timestamp, timestamptz, interval, uuid, jsonb), with `typarray` |
//! | `pg_index`, `pg_constraint` | the primary key (constraint oid +50), the CHECK constraints (+60 + rank by name) and the secondary indexes; NOT NULL is `attnotnull`, as in PostgreSQL 15 |
//! | `pg_attrdef` | one per column DEFAULT |
//! | `pg_am`, `pg_database`, `pg_roles`, `pg_user`, `pg_tables` | one row each, or per table |
//! | `pg_settings` | fixed limits only (`max_index_keys`, `max_identifier_length`, …) |
//! | `pg_sequence`, `pg_sequences` | per sequence (`last_value` NULL: the counter lives at its partition) |
//! | `pg_description`, `pg_enum`, `pg_inherits`, `pg_collation`, `pg_policy`, `pg_statistic_ext`, `pg_publication`, `pg_trigger` | empty |
//! | `information_schema.tables`, `.columns`, `.table_constraints`, `.key_column_usage`, `.schemata`, `.check_constraints` | per table, column, primary key, CHECK |

use crate::catalog::Catalog;
use crate::error::{sqlstate, SqlError};
use crate::expr::{
    ident_name, object_name_parts, Compiler, Mode, Parameters, Scope, ScopeColumn, Subquery,
    SubqueryKind,
};
use crate::types::{pg_type, type_modifier};
use engine::{DataType, TableSchema, Value};
use sqlparser::ast::{self, TableFactor};

/// Most rows a join of virtual tables may produce.
pub const JOIN_ROWS_MAX: usize = 200_000;

const PG_CATALOG_OID: i64 = 11;
const PUBLIC_OID: i64 = 2200;
const INFORMATION_SCHEMA_OID: i64 = 13_000;
const FIRST_TABLE_OID: i64 = 16_384;
const HEAP_AM_OID: i64 = 2;
const BTREE_AM_OID: i64 = 403;

const VIRTUAL_PG_CATALOG: &[&str] = &[
    "pg_namespace",
    "pg_class",
    "pg_attribute",
    "pg_type",
    "pg_index",
    "pg_am",
    "pg_database",
    "pg_description",
    "pg_attrdef",
    "pg_constraint",
    "pg_inherits",
    "pg_roles",
    "pg_user",
    "pg_tables",
    "pg_collation",
    "pg_policy",
    "pg_statistic_ext",
    "pg_publication",
    "pg_trigger",
    "pg_sequence",
    "pg_sequences",
    "pg_enum",
    "pg_settings",
    "pg_views",
];
const VIRTUAL_INFORMATION_SCHEMA: &[&str] = &[
    "tables",
    "columns",
    "table_constraints",
    "key_column_usage",
    "schemata",
    "views",
    "check_constraints",
];

/// Whether a FROM name is a virtual catalog table.
pub fn is_virtual(schema: Option<&str>, table: &str) -> bool {
    match schema {
        Some("pg_catalog") => true,
        Some("information_schema") => true,
        None | Some("public") => VIRTUAL_PG_CATALOG.contains(&table) && table.starts_with("pg_"),
        _ => false,
    }
}

type Table = (Vec<(&'static str, DataType)>, Vec<Vec<Value>>);

fn text(value: &str) -> Value {
    Value::Text(value.to_string())
}

fn int8(value: i64) -> Value {
    Value::BigInt(value)
}

const TEXT: DataType = DataType::Text { length_max: None };
const INT8: DataType = DataType::BigInt;
const INT4: DataType = DataType::Int;
const BOOL: DataType = DataType::Boolean;

/// The object ids of a catalog: tables by sorted name, 100 apart; the primary key index at
/// +1, secondary indexes from +2.
struct Oids {
    tables: Vec<crate::catalog::TableEntry>,
}

impl Oids {
    fn table_oid(&self, at: usize) -> i64 {
        FIRST_TABLE_OID + 100 * at as i64
    }
}

fn type_rows() -> Vec<Vec<Value>> {
    let types = [
        DataType::Boolean,
        DataType::Int,
        DataType::BigInt,
        DataType::Double,
        DataType::Text { length_max: None },
        DataType::Text {
            length_max: Some(1),
        },
        DataType::Bytea,
        DataType::Date,
        DataType::Timestamp,
        DataType::TimestampTz,
        DataType::Numeric { typmod: None },
        DataType::Char { length: 1 },
        DataType::Uuid,
        DataType::Interval,
        DataType::Jsonb,
        DataType::SmallInt,
        DataType::Real,
    ];
    types
        .iter()
        .map(|data_type| {
            let pg = pg_type(*data_type);
            let category = match data_type {
                DataType::Boolean => "B",
                DataType::Int
                | DataType::BigInt
                | DataType::Double
                | DataType::Numeric { .. }
                | DataType::SmallInt
                | DataType::Real => "N",
                DataType::Text { .. } | DataType::Char { .. } => "S",
                DataType::Bytea | DataType::Uuid | DataType::Jsonb => "U",
                DataType::Date | DataType::Timestamp | DataType::TimestampTz => "D",
                DataType::Interval => "T",
            };
            vec![
                int8(i64::from(pg.oid)),
                text(pg.name),
                int8(PG_CATALOG_OID),
                Value::Int(i32::from(pg.typlen)),
                text("b"),
                text(category),
                int8(0),
                Value::Int(-1),
                Value::Boolean(false),
                int8(0),
                int8(0),
                int8(0),
                int8(array_type_oid(*data_type)),
                Value::Null,
            ]
        })
        .collect()
}

/// The oid of PostgreSQL's array type over `data_type` (`pg_type.typarray`), which drivers read
/// to register array adapters (psycopg2's `HstoreAdapter.get_oids`, pgjdbc's type cache).
fn array_type_oid(data_type: DataType) -> i64 {
    match data_type {
        DataType::Boolean => 1000,
        DataType::Int => 1007,
        DataType::BigInt => 1016,
        DataType::Double => 1022,
        DataType::Text { length_max: None } => 1009,
        DataType::Text {
            length_max: Some(_),
        } => 1015,
        DataType::Bytea => 1001,
        DataType::Date => 1182,
        DataType::Timestamp => 1115,
        DataType::TimestampTz => 1185,
        DataType::Numeric { .. } => 1231,
        DataType::Char { .. } => 1014,
        DataType::Uuid => 2951,
        DataType::Interval => 1187,
        DataType::Jsonb => 3807,
        DataType::SmallInt => 1005,
        DataType::Real => 1021,
    }
}

/// `information_schema.columns.data_type`: the type without its modifiers (`numeric`, as
/// PostgreSQL shows it; VARCHAR's length is `character_maximum_length`).
fn sql_type_name(data_type: DataType) -> String {
    match data_type {
        DataType::Numeric { .. } => "numeric".into(),
        DataType::Char { .. } => "character".into(),
        other => other.name(),
    }
}

fn virtual_table(schema: Option<&str>, name: &str, oids: &Oids) -> Result<Table, SqlError> {
    let information_schema = schema == Some("information_schema");
    if information_schema && !VIRTUAL_INFORMATION_SCHEMA.contains(&name)
        || !information_schema && !VIRTUAL_PG_CATALOG.contains(&name)
    {
        let qualified = schema.map_or(name.to_string(), |schema| format!("{schema}.{name}"));
        return Err(SqlError::undefined_table(&qualified)
            .with_hint("Tessera emulates only part of the system catalog"));
    }
    let tables = &oids.tables;
    let mut rows = Vec::new();
    let columns: Vec<(&'static str, DataType)> = match (information_schema, name) {
        (false, "pg_namespace") => {
            for (oid, name) in [
                (PG_CATALOG_OID, "pg_catalog"),
                (PUBLIC_OID, "public"),
                (INFORMATION_SCHEMA_OID, "information_schema"),
            ] {
                rows.push(vec![int8(oid), text(name), int8(10), Value::Null]);
            }
            vec![
                ("oid", INT8),
                ("nspname", TEXT),
                ("nspowner", INT8),
                ("nspacl", TEXT),
            ]
        }
        (false, "pg_class") => {
            for (at, entry) in tables.iter().enumerate() {
                let oid = oids.table_oid(at);
                let schema = &entry.schema;
                let class = |oid: i64,
                             name: &str,
                             kind: &str,
                             am: i64,
                             attributes: usize,
                             has_index: bool| {
                    vec![
                        int8(oid),
                        text(name),
                        int8(PUBLIC_OID),
                        text(kind),
                        int8(10),
                        int8(am),
                        Value::Double(-1.0),
                        Value::Boolean(has_index),
                        text("p"),
                        Value::Int(0),
                        Value::Boolean(false),
                        Value::Boolean(false),
                        Value::Boolean(false),
                        Value::Boolean(false),
                        Value::Boolean(false),
                        int8(0),
                        Value::Null,
                        int8(0),
                        Value::Int(i32::try_from(attributes).unwrap_or(i32::MAX)),
                        text("d"),
                        Value::Null,
                        int8(0),
                        Value::Int(0),
                    ]
                };
                let hidden = usize::from(schema.row_id_column().is_some());
                let sequence = crate::sequence::is_sequence(entry);
                let view = crate::view::is_view(entry);
                let mut table_row = class(
                    oid,
                    &schema.name,
                    if sequence {
                        "S"
                    } else if view {
                        "v"
                    } else {
                        "r"
                    },
                    if sequence || view { 0 } else { HEAP_AM_OID },
                    schema.columns.len() - hidden,
                    hidden == 0 || !entry.indexes.is_empty(),
                );
                // relchecks: psql's `\d` lists "Check constraints:" only when it is above 0.
                table_row[9] = Value::Int(i32::try_from(schema.checks.len()).unwrap_or(i32::MAX));
                rows.push(table_row);
                if hidden == 0 {
                    rows.push(class(
                        oid + 1,
                        &schema.primary_key_name(),
                        "i",
                        BTREE_AM_OID,
                        schema.primary_key.len(),
                        false,
                    ));
                }
                for (index_at, (index, columns)) in entry.indexes.iter().enumerate() {
                    rows.push(class(
                        oid + 2 + index_at as i64,
                        index,
                        "i",
                        BTREE_AM_OID,
                        columns.len(),
                        false,
                    ));
                }
            }
            vec![
                ("oid", INT8),
                ("relname", TEXT),
                ("relnamespace", INT8),
                ("relkind", TEXT),
                ("relowner", INT8),
                ("relam", INT8),
                ("reltuples", DataType::Double),
                ("relhasindex", BOOL),
                ("relpersistence", TEXT),
                ("relchecks", INT4),
                ("relhasrules", BOOL),
                ("relhastriggers", BOOL),
                ("relrowsecurity", BOOL),
                ("relforcerowsecurity", BOOL),
                ("relispartition", BOOL),
                ("reloftype", INT8),
                ("relpartbound", TEXT),
                ("reltablespace", INT8),
                ("relnatts", INT4),
                ("relreplident", TEXT),
                ("reloptions", TEXT),
                ("reltoastrelid", INT8),
                ("relpages", INT4),
            ]
        }
        (false, "pg_attribute") => {
            for (at, entry) in tables.iter().enumerate() {
                for (position, column) in visible_columns(&entry.schema) {
                    let pg = pg_type(column.data_type);
                    let not_null = !column.nullable || entry.schema.is_primary_key_column(position);
                    rows.push(vec![
                        int8(oids.table_oid(at)),
                        text(&column.name),
                        int8(i64::from(pg.oid)),
                        Value::Int(i32::from(pg.typlen)),
                        Value::Int(position as i32 + 1),
                        Value::Int(type_modifier(column.data_type)),
                        Value::Boolean(not_null),
                        Value::Boolean(has_default(column)),
                        Value::Boolean(false),
                        text(identity_kind(column)),
                        text(""),
                        int8(0),
                        Value::Int(0),
                        Value::Null,
                        // PostgreSQL's storage: plain for fixed-length types, extended else.
                        text(if pg.typlen > 0 { "p" } else { "x" }),
                        text(""),
                        Value::Int(-1),
                    ]);
                }
            }
            vec![
                ("attrelid", INT8),
                ("attname", TEXT),
                ("atttypid", INT8),
                ("attlen", INT4),
                ("attnum", INT4),
                ("atttypmod", INT4),
                ("attnotnull", BOOL),
                ("atthasdef", BOOL),
                ("attisdropped", BOOL),
                ("attidentity", TEXT),
                ("attgenerated", TEXT),
                ("attcollation", INT8),
                ("attndims", INT4),
                ("attoptions", TEXT),
                ("attstorage", TEXT),
                ("attcompression", TEXT),
                ("attstattarget", INT4),
            ]
        }
        (false, "pg_type") => {
            rows = type_rows();
            vec![
                ("oid", INT8),
                ("typname", TEXT),
                ("typnamespace", INT8),
                ("typlen", INT4),
                ("typtype", TEXT),
                ("typcategory", TEXT),
                ("typbasetype", INT8),
                ("typtypmod", INT4),
                ("typnotnull", BOOL),
                ("typelem", INT8),
                ("typrelid", INT8),
                ("typcollation", INT8),
                ("typarray", INT8),
                ("typdefault", TEXT),
            ]
        }
        (false, "pg_index") => {
            for (at, entry) in tables.iter().enumerate() {
                let oid = oids.table_oid(at);
                // A table without a primary key has no primary key index (its hidden row id
                // is not shown), but its secondary indexes are.
                let hidden_key = entry.schema.row_id_column().is_some();
                let key: Vec<String> = entry
                    .schema
                    .primary_key
                    .iter()
                    .map(|position| (position + 1).to_string())
                    .collect();
                if !hidden_key {
                    rows.push(vec![
                        int8(oid + 1),
                        int8(oid),
                        Value::Boolean(true),
                        Value::Boolean(true),
                        text(&key.join(" ")),
                        Value::Int(key.len() as i32),
                        Value::Boolean(false),
                        Value::Boolean(true),
                        Value::Null,
                        Value::Boolean(false),
                        text(&vec!["0"; key.len()].join(" ")),
                        Value::Null,
                        Value::Int(key.len() as i32),
                        Value::Boolean(true),
                        Value::Boolean(false),
                        Value::Boolean(true),
                        Value::Boolean(true),
                    ]);
                }
                for (index_at, (_, columns)) in entry.indexes.iter().enumerate() {
                    let positions: Vec<String> = columns
                        .iter()
                        .map(|column| {
                            entry
                                .schema
                                .column_position(column)
                                .map(|position| position + 1)
                                .unwrap_or(0)
                                .to_string()
                        })
                        .collect();
                    rows.push(vec![
                        int8(oid + 2 + index_at as i64),
                        int8(oid),
                        Value::Boolean(false),
                        Value::Boolean(false),
                        text(&positions.join(" ")),
                        Value::Int(columns.len() as i32),
                        Value::Boolean(false),
                        Value::Boolean(true),
                        Value::Null,
                        Value::Boolean(false),
                        text(&vec!["0"; columns.len()].join(" ")),
                        Value::Null,
                        Value::Int(columns.len() as i32),
                        Value::Boolean(true),
                        Value::Boolean(false),
                        Value::Boolean(true),
                        Value::Boolean(true),
                    ]);
                }
            }
            vec![
                ("indexrelid", INT8),
                ("indrelid", INT8),
                ("indisprimary", BOOL),
                ("indisunique", BOOL),
                ("indkey", TEXT),
                ("indnatts", INT4),
                ("indisclustered", BOOL),
                ("indisvalid", BOOL),
                ("indpred", TEXT),
                ("indisreplident", BOOL),
                ("indoption", TEXT),
                ("indexprs", TEXT),
                ("indnkeyatts", INT4),
                ("indimmediate", BOOL),
                ("indisexclusion", BOOL),
                ("indisready", BOOL),
                ("indislive", BOOL),
            ]
        }
        (false, "pg_am") => {
            rows.push(vec![int8(HEAP_AM_OID), text("heap"), text("t")]);
            rows.push(vec![int8(BTREE_AM_OID), text("btree"), text("i")]);
            vec![("oid", INT8), ("amname", TEXT), ("amtype", TEXT)]
        }
        (false, "pg_database") => {
            rows.push(vec![
                int8(16_383),
                text("tessera"),
                int8(10),
                Value::Int(6),
                Value::Boolean(true),
            ]);
            vec![
                ("oid", INT8),
                ("datname", TEXT),
                ("datdba", INT8),
                ("encoding", INT4),
                ("datallowconn", BOOL),
            ]
        }
        (false, "pg_roles" | "pg_user") => {
            rows.push(vec![int8(10), text("tessera"), Value::Boolean(true)]);
            vec![
                ("oid", INT8),
                (
                    if name == "pg_user" {
                        "usename"
                    } else {
                        "rolname"
                    },
                    TEXT,
                ),
                (
                    if name == "pg_user" {
                        "usesuper"
                    } else {
                        "rolsuper"
                    },
                    BOOL,
                ),
            ]
        }
        (false, "pg_views") => {
            for entry in tables.iter() {
                if let Some(query) = crate::view::query_text(entry) {
                    rows.push(vec![
                        text("public"),
                        text(&entry.schema.name),
                        text("tessera"),
                        text(&view_definition(query)),
                    ]);
                }
            }
            vec![
                ("schemaname", TEXT),
                ("viewname", TEXT),
                ("viewowner", TEXT),
                ("definition", TEXT),
            ]
        }
        (true, "views") => {
            for entry in tables.iter() {
                if let Some(query) = crate::view::query_text(entry) {
                    rows.push(vec![
                        text("tessera"),
                        text("public"),
                        text(&entry.schema.name),
                        text(&view_definition(query)),
                        text("NONE"),
                        text("NO"),
                        text("NO"),
                        text("NO"),
                        text("NO"),
                        text("NO"),
                    ]);
                }
            }
            vec![
                ("table_catalog", TEXT),
                ("table_schema", TEXT),
                ("table_name", TEXT),
                ("view_definition", TEXT),
                ("check_option", TEXT),
                ("is_updatable", TEXT),
                ("is_insertable_into", TEXT),
                ("is_trigger_updatable", TEXT),
                ("is_trigger_deletable", TEXT),
                ("is_trigger_insertable_into", TEXT),
            ]
        }
        (false, "pg_tables") => {
            for entry in tables.iter().filter(|entry| {
                !crate::sequence::is_sequence(entry) && !crate::view::is_view(entry)
            }) {
                rows.push(vec![
                    text("public"),
                    text(&entry.schema.name),
                    text("tessera"),
                    Value::Boolean(true),
                ]);
            }
            vec![
                ("schemaname", TEXT),
                ("tablename", TEXT),
                ("tableowner", TEXT),
                ("hasindexes", BOOL),
            ]
        }
        (false, "pg_constraint") => {
            for (at, entry) in tables.iter().enumerate() {
                let oid = oids.table_oid(at);
                if entry.schema.row_id_column().is_some() {
                    continue;
                }
                let key: Vec<String> = entry
                    .schema
                    .primary_key
                    .iter()
                    .map(|position| (position + 1).to_string())
                    .collect();
                rows.push(vec![
                    int8(oid + 50),
                    text(&entry.schema.primary_key_name()),
                    int8(PUBLIC_OID),
                    text("p"),
                    int8(oid),
                    int8(oid + 1),
                    text(&key.join(" ")),
                    int8(0),
                    int8(0),
                    Value::Boolean(false),
                    Value::Boolean(false),
                    Value::Boolean(true),
                    Value::Null,
                    text(" "),
                    text(" "),
                    text(" "),
                    int8(0),
                ]);
            }
            for (at, entry) in tables.iter().enumerate() {
                let oid = oids.table_oid(at);
                for (check_at, check) in entry.schema.checks.iter().enumerate() {
                    rows.push(vec![
                        int8(check_oid(oid, check_at)),
                        text(&check.name),
                        int8(PUBLIC_OID),
                        text("c"),
                        int8(oid),
                        int8(0),
                        text(&check_columns(&entry.schema, check).join(" ")),
                        int8(0),
                        int8(0),
                        Value::Boolean(false),
                        Value::Boolean(false),
                        Value::Boolean(true),
                        Value::Null,
                        text(" "),
                        text(" "),
                        text(" "),
                        int8(0),
                    ]);
                }
            }
            vec![
                ("oid", INT8),
                ("conname", TEXT),
                ("connamespace", INT8),
                ("contype", TEXT),
                ("conrelid", INT8),
                ("conindid", INT8),
                ("conkey", TEXT),
                ("conparentid", INT8),
                ("confrelid", INT8),
                ("condeferrable", BOOL),
                ("condeferred", BOOL),
                ("convalidated", BOOL),
                ("confkey", TEXT),
                ("confupdtype", TEXT),
                ("confdeltype", TEXT),
                ("confmatchtype", TEXT),
                ("contypid", INT8),
            ]
        }
        (false, "pg_description") => vec![
            ("objoid", INT8),
            ("classoid", INT8),
            ("objsubid", INT4),
            ("description", TEXT),
        ],
        (false, "pg_attrdef") => {
            for (at, entry) in tables.iter().enumerate() {
                for (position, column) in visible_columns(&entry.schema) {
                    if let Some(default) = column.default.as_ref().filter(|_| has_default(column)) {
                        let table = oids.table_oid(at);
                        rows.push(vec![
                            // Unique within pg_attrdef, as PostgreSQL's OIDs are per catalog.
                            int8(table * 10_000 + position as i64 + 1),
                            int8(table),
                            Value::Int(position as i32 + 1),
                            text(&default_text(default, column.data_type)),
                        ]);
                    }
                }
            }
            vec![
                ("oid", INT8),
                ("adrelid", INT8),
                ("adnum", INT4),
                ("adbin", TEXT),
            ]
        }
        (false, "pg_inherits") => vec![
            ("inhrelid", INT8),
            ("inhparent", INT8),
            ("inhseqno", INT4),
            ("inhdetachpending", BOOL),
        ],
        (false, "pg_collation") => vec![("oid", INT8), ("collname", TEXT)],
        // The server's fixed limits that drivers read here (pgjdbc's getImportedKeys reads
        // max_index_keys); the session's settings are answered by SHOW, not listed here.
        (false, "pg_settings") => {
            for (setting, value, unit) in [
                ("max_index_keys", "32", None),
                ("max_identifier_length", "63", None),
                ("block_size", "8192", None),
                ("server_encoding", "UTF8", None),
                ("integer_datetimes", "on", None),
            ] {
                rows.push(vec![
                    text(setting),
                    text(value),
                    unit.map_or(Value::Null, text),
                    text("Preset Options"),
                    text("internal"),
                ]);
            }
            vec![
                ("name", TEXT),
                ("setting", TEXT),
                ("unit", TEXT),
                ("category", TEXT),
                ("context", TEXT),
            ]
        }
        // No enum types (CREATE TYPE is refused).
        (false, "pg_enum") => vec![
            ("oid", INT8),
            ("enumtypid", INT8),
            ("enumsortorder", DataType::Double),
            ("enumlabel", TEXT),
        ],
        // One row per sequence (`sequence::SequenceDef`).
        (false, "pg_sequence") => {
            rows = sequence_rows(oids, false);
            vec![
                ("seqrelid", INT8),
                ("seqtypid", INT8),
                ("seqstart", INT8),
                ("seqincrement", INT8),
                ("seqmax", INT8),
                ("seqmin", INT8),
                ("seqcache", INT8),
                ("seqcycle", BOOL),
            ]
        }
        (false, "pg_sequences") => {
            rows = sequence_rows(oids, true);
            vec![
                ("schemaname", TEXT),
                ("sequencename", TEXT),
                ("sequenceowner", TEXT),
                ("data_type", TEXT),
                ("start_value", INT8),
                ("min_value", INT8),
                ("max_value", INT8),
                ("increment_by", INT8),
                ("cycle", BOOL),
                ("cache_size", INT8),
                ("last_value", INT8),
            ]
        }
        (false, "pg_policy" | "pg_statistic_ext" | "pg_publication" | "pg_trigger") => {
            vec![("oid", INT8)]
        }
        (true, "schemata") => {
            for schema in ["pg_catalog", "public", "information_schema"] {
                rows.push(vec![text("tessera"), text(schema), text("tessera")]);
            }
            vec![
                ("catalog_name", TEXT),
                ("schema_name", TEXT),
                ("schema_owner", TEXT),
            ]
        }
        (true, "tables") => {
            for entry in tables
                .iter()
                .filter(|entry| !crate::sequence::is_sequence(entry))
            {
                let view = crate::view::is_view(entry);
                rows.push(vec![
                    text("tessera"),
                    text("public"),
                    text(&entry.schema.name),
                    text(if view { "VIEW" } else { "BASE TABLE" }),
                    text(if view { "NO" } else { "YES" }),
                    text("NO"),
                ]);
            }
            vec![
                ("table_catalog", TEXT),
                ("table_schema", TEXT),
                ("table_name", TEXT),
                ("table_type", TEXT),
                ("is_insertable_into", TEXT),
                ("is_typed", TEXT),
            ]
        }
        (true, "columns") => {
            for entry in tables
                .iter()
                .filter(|entry| !crate::sequence::is_sequence(entry))
            {
                for (position, column) in visible_columns(&entry.schema) {
                    let nullable = column.nullable && !entry.schema.is_primary_key_column(position);
                    let length = match column.data_type {
                        DataType::Text {
                            length_max: Some(length),
                        }
                        | DataType::Char { length } => {
                            Value::Int(i32::try_from(length).unwrap_or(i32::MAX))
                        }
                        _ => Value::Null,
                    };
                    rows.push(vec![
                        text("tessera"),
                        text("public"),
                        text(&entry.schema.name),
                        text(&column.name),
                        Value::Int(position as i32 + 1),
                        column
                            .default
                            .as_ref()
                            .filter(|_| has_default(column))
                            .map_or(Value::Null, |default| {
                                text(&default_text(default, column.data_type))
                            }),
                        text(if nullable { "YES" } else { "NO" }),
                        text(&sql_type_name(column.data_type)),
                        length,
                        text(pg_type(column.data_type).name),
                    ]);
                }
            }
            vec![
                ("table_catalog", TEXT),
                ("table_schema", TEXT),
                ("table_name", TEXT),
                ("column_name", TEXT),
                ("ordinal_position", INT4),
                ("column_default", TEXT),
                ("is_nullable", TEXT),
                ("data_type", TEXT),
                ("character_maximum_length", INT4),
                ("udt_name", TEXT),
            ]
        }
        (true, "table_constraints") => {
            for entry in tables {
                let mut constraints: Vec<(String, &str)> = entry
                    .schema
                    .checks
                    .iter()
                    .map(|check| (check.name.clone(), "CHECK"))
                    .collect();
                if entry.schema.row_id_column().is_none() {
                    constraints.push((entry.schema.primary_key_name(), "PRIMARY KEY"));
                }
                for (name, kind) in constraints {
                    rows.push(vec![
                        text("tessera"),
                        text("public"),
                        text(&name),
                        text("public"),
                        text(&entry.schema.name),
                        text(kind),
                    ]);
                }
            }
            vec![
                ("constraint_catalog", TEXT),
                ("constraint_schema", TEXT),
                ("constraint_name", TEXT),
                ("table_schema", TEXT),
                ("table_name", TEXT),
                ("constraint_type", TEXT),
            ]
        }
        (true, "check_constraints") => {
            for entry in tables {
                for check in &entry.schema.checks {
                    let definition =
                        crate::plan::check::constraint_definition(&check.expression, false);
                    rows.push(vec![
                        text("tessera"),
                        text("public"),
                        text(&check.name),
                        text(definition.trim_start_matches("CHECK ")),
                    ]);
                }
            }
            vec![
                ("constraint_catalog", TEXT),
                ("constraint_schema", TEXT),
                ("constraint_name", TEXT),
                ("check_clause", TEXT),
            ]
        }
        (true, "key_column_usage") => {
            for entry in tables {
                if entry.schema.row_id_column().is_some() {
                    continue;
                }
                for (at, position) in entry.schema.primary_key.iter().enumerate() {
                    rows.push(vec![
                        text("tessera"),
                        text("public"),
                        text(&entry.schema.primary_key_name()),
                        text("public"),
                        text(&entry.schema.name),
                        text(&entry.schema.columns[*position].name),
                        Value::Int(at as i32 + 1),
                    ]);
                }
            }
            vec![
                ("constraint_catalog", TEXT),
                ("constraint_schema", TEXT),
                ("constraint_name", TEXT),
                ("table_schema", TEXT),
                ("table_name", TEXT),
                ("column_name", TEXT),
                ("ordinal_position", INT4),
            ]
        }
        _ => unreachable!("listed above"),
    };
    for row in &rows {
        assert_eq!(row.len(), columns.len(), "virtual table {name} row width");
    }
    Ok((columns, rows))
}

/// Whether a FROM item belongs to the virtual catalog: a catalog table, a derived table (whose
/// own FROM is then checked), or a catalog table function.
pub fn is_catalog_relation(factor: &TableFactor) -> Result<bool, SqlError> {
    Ok(match factor {
        TableFactor::Table { name, args, .. } => {
            let parts = object_name_parts(name)?;
            let (schema, table) = split_name(&parts)?;
            match args {
                None => is_virtual(schema, table),
                Some(_) => matches!(table, "pg_partition_ancestors" | "generate_series"),
            }
        }
        TableFactor::Derived { .. } => true,
        _ => false,
    })
}

fn split_name(parts: &[String]) -> Result<(Option<&str>, &str), SqlError> {
    match parts {
        [table] => Ok((None, table)),
        [.., schema, table] => Ok((Some(schema.as_str()), table)),
        [] => Err(SqlError::syntax("empty table name")),
    }
}

fn virtual_scope(qualifier: &str, columns: Vec<(String, DataType)>) -> Scope {
    Scope::new(
        columns
            .into_iter()
            .map(|(name, data_type)| ScopeColumn {
                table: Some(qualifier.to_string()),
                name,
                data_type,
                virtual_catalog: true,
                hidden: false,
            })
            .collect(),
    )
}

/// Most rows `generate_series` may produce in a catalog query.
pub const SERIES_ROWS_MAX: i64 = 10_000;

/// `generate_series(start, stop)` in a catalog query's FROM (pgjdbc's `getImportedKeys` joins
/// `generate_series(1, max_index_keys) pos(n)`): one INT row per integer from start to stop,
/// named by the alias's column (else the alias, else `generate_series`); at most `SERIES_ROWS_MAX` rows (54000).
fn generate_series(
    args: &[ast::FunctionArg],
    alias: Option<&ast::TableAlias>,
    qualifier: &str,
    catalog: &dyn Catalog,
    parameters: &mut Parameters,
) -> Result<(Scope, Vec<Vec<Value>>), SqlError> {
    let scope = Scope::default();
    let mut bounds = Vec::new();
    for arg in args {
        let ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(expr)) = arg else {
            return Err(SqlError::unsupported("named arguments of generate_series"));
        };
        let value = Compiler {
            scope: &scope,
            parameters,
            mode: Mode::Row,
            catalog: Some(catalog),
        }
        .compile(expr, Some(INT8))?
        .evaluate(&[])?;
        bounds.push(crate::expr::cast_value(&value, INT8)?);
    }
    let (start, stop) = match bounds.as_slice() {
        [Value::BigInt(start), Value::BigInt(stop)] => (*start, *stop),
        [_, _] => (1, 0),
        _ => {
            return Err(SqlError::unsupported(
                "generate_series with other than two integer arguments",
            ))
        }
    };
    if stop.saturating_sub(start) >= SERIES_ROWS_MAX {
        return Err(SqlError::new(
            sqlstate::PROGRAM_LIMIT_EXCEEDED,
            format!("generate_series in catalog queries is limited to {SERIES_ROWS_MAX} rows"),
        ));
    }
    // As in PostgreSQL: the alias's column, else the alias itself, else the function's name.
    let name = match alias {
        Some(alias) => alias
            .columns
            .first()
            .map_or(ident_name(&alias.name), |column| ident_name(&column.name)),
        None => "generate_series".to_string(),
    };
    let rows = (start..=stop)
        .map(|number| vec![Value::Int(i32::try_from(number).unwrap_or(i32::MAX))])
        .collect();
    Ok((virtual_scope(qualifier, vec![(name, INT4)]), rows))
}

fn relation(
    factor: &TableFactor,
    oids: &Oids,
    catalog: &dyn Catalog,
    parameters: &mut Parameters,
) -> Result<(Scope, Vec<Vec<Value>>), SqlError> {
    match factor {
        TableFactor::Table {
            name, alias, args, ..
        } => {
            let parts = object_name_parts(name)?;
            let (schema, table) = split_name(&parts)?;
            let qualifier = alias
                .as_ref()
                .map(|alias| ident_name(&alias.name))
                .unwrap_or(table.to_string());
            if let (Some(args), "generate_series") = (args, table) {
                return generate_series(
                    &args.args,
                    alias.as_ref(),
                    &qualifier,
                    catalog,
                    parameters,
                );
            }
            if let Some(args) = args {
                // pg_partition_ancestors(rel): a table is its own only ancestor here.
                if table != "pg_partition_ancestors" || args.args.len() != 1 {
                    return Err(SqlError::unsupported(format!("table function {name}")));
                }
                let scope = Scope::default();
                let ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(expr)) = &args.args[0]
                else {
                    return Err(SqlError::unsupported(format!("arguments of {name}")));
                };
                let value = Compiler {
                    scope: &scope,
                    parameters,
                    mode: Mode::Row,
                    catalog: Some(catalog),
                }
                .compile(expr, None)?
                .evaluate(&[])?;
                let relid = crate::expr::cast_value(&value, INT8)?;
                let name = alias
                    .as_ref()
                    .and_then(|alias| alias.columns.first())
                    .map_or("relid".to_string(), |column| ident_name(&column.name));
                return Ok((
                    virtual_scope(&qualifier, vec![(name, INT8)]),
                    vec![vec![relid]],
                ));
            }
            if !is_virtual(schema, table) {
                return Err(SqlError::unsupported("joins of catalog and user tables"));
            }
            let (columns, rows) = virtual_table(schema, table, oids)?;
            let columns = columns
                .into_iter()
                .map(|(name, data_type)| (name.to_string(), data_type))
                .collect();
            Ok((virtual_scope(&qualifier, columns), rows))
        }
        TableFactor::Derived {
            lateral: false,
            subquery,
            alias,
            ..
        } => {
            let statement = ast::Statement::Query(subquery.clone());
            let plan = crate::plan::plan(&statement, catalog, parameters)?;
            let crate::Plan::Execute(execution) = plan else {
                return Err(SqlError::unsupported("this derived table"));
            };
            if execution.routing != crate::Routing::None {
                return Err(SqlError::unsupported("subqueries over user tables"));
            }
            let crate::StatementResult::Rows { columns, rows, .. } = execution.finish(Vec::new())?
            else {
                return Err(SqlError::unsupported("this derived table"));
            };
            let qualifier = alias
                .as_ref()
                .map(|alias| ident_name(&alias.name))
                .unwrap_or_default();
            let columns = columns
                .into_iter()
                .map(|column| (column.name, column.data_type))
                .collect();
            Ok((virtual_scope(&qualifier, columns), rows))
        }
        other => Err(SqlError::unsupported(format!(
            "FROM {other} in a catalog query"
        ))),
    }
}

/// Materialises a FROM clause of virtual tables, joins included: the joined rows and their scope.
pub fn from_clause(
    from: &[ast::TableWithJoins],
    catalog: &dyn Catalog,
    parameters: &mut Parameters,
    selection: Option<&ast::Expr>,
) -> Result<(Vec<Vec<Value>>, Scope), SqlError> {
    from_clause_within(from, catalog, parameters, selection)
}

/// `from_clause`, filtering early: after each table joins, every WHERE conjunct whose columns
/// are all in scope by then is applied, so that comma joins (`FROM pg_class c, pg_class c2,
/// pg_index i WHERE …`, as psql writes them) do not materialise the whole cross product. The
/// caller still evaluates the whole WHERE afterwards (applying a conjunct twice is harmless);
/// ON conditions see only the tables joined so far.
fn from_clause_within(
    from: &[ast::TableWithJoins],
    catalog: &dyn Catalog,
    parameters: &mut Parameters,
    selection: Option<&ast::Expr>,
) -> Result<(Vec<Vec<Value>>, Scope), SqlError> {
    let mut pending: Vec<&ast::Expr> = Vec::new();
    if let Some(selection) = selection {
        flatten_and(selection, &mut pending);
    }
    let oids = Oids {
        tables: catalog
            .table_names()
            .iter()
            .filter_map(|name| catalog.table(name))
            .collect(),
    };
    let mut scope = Scope::default();
    let mut rows: Vec<Vec<Value>> = vec![Vec::new()];
    for item in from {
        let (right_scope, right_rows) = relation(&item.relation, &oids, catalog, parameters)?;
        rows = join(
            rows,
            &mut scope,
            right_scope,
            right_rows,
            None,
            false,
            parameters,
            catalog,
        )?;
        apply_ready(&mut rows, &scope, &mut pending, parameters, catalog)?;
        for joined in &item.joins {
            let (constraint, left_outer) = match &joined.join_operator {
                ast::JoinOperator::Join(constraint) | ast::JoinOperator::Inner(constraint) => {
                    (constraint, false)
                }
                ast::JoinOperator::Left(constraint) | ast::JoinOperator::LeftOuter(constraint) => {
                    (constraint, true)
                }
                ast::JoinOperator::CrossJoin(constraint) => (constraint, false),
                _ => return Err(SqlError::unsupported("RIGHT, FULL and other joins")),
            };
            let on = match constraint {
                ast::JoinConstraint::On(expr) => Some(expr),
                ast::JoinConstraint::None => None,
                _ => return Err(SqlError::unsupported("USING and NATURAL joins")),
            };
            let (right_scope, right_rows) = relation(&joined.relation, &oids, catalog, parameters)?;
            rows = join(
                rows,
                &mut scope,
                right_scope,
                right_rows,
                on,
                left_outer,
                parameters,
                catalog,
            )?;
            apply_ready(&mut rows, &scope, &mut pending, parameters, catalog)?;
        }
    }
    Ok((rows, scope))
}

fn flatten_and<'e>(expr: &'e ast::Expr, conjuncts: &mut Vec<&'e ast::Expr>) {
    match expr {
        ast::Expr::BinaryOp {
            left,
            op: ast::BinaryOperator::And,
            right,
        } => {
            flatten_and(left, conjuncts);
            flatten_and(right, conjuncts);
        }
        ast::Expr::Nested(inner)
            if matches!(
                inner.as_ref(),
                ast::Expr::BinaryOp {
                    op: ast::BinaryOperator::And,
                    ..
                }
            ) =>
        {
            flatten_and(inner, conjuncts)
        }
        other => conjuncts.push(other),
    }
}

/// Filters the rows by the pending conjuncts that compile in the current scope.
fn apply_ready(
    rows: &mut Vec<Vec<Value>>,
    scope: &Scope,
    pending: &mut Vec<&ast::Expr>,
    parameters: &mut Parameters,
    catalog: &dyn Catalog,
) -> Result<(), SqlError> {
    let mut waiting = Vec::with_capacity(pending.len());
    for conjunct in pending.drain(..) {
        let compiled = Compiler {
            scope,
            parameters,
            mode: Mode::Row,
            catalog: Some(catalog),
        }
        .compile(conjunct, Some(DataType::Boolean));
        let Ok(filter) = compiled else {
            waiting.push(conjunct);
            continue;
        };
        let mut kept = Vec::with_capacity(rows.len());
        for row in rows.drain(..) {
            if filter.qualifies(&row)? {
                kept.push(row);
            }
        }
        *rows = kept;
    }
    *pending = waiting;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn join(
    left: Vec<Vec<Value>>,
    scope: &mut Scope,
    right_scope: Scope,
    right: Vec<Vec<Value>>,
    on: Option<&ast::Expr>,
    left_outer: bool,
    parameters: &mut Parameters,
    catalog: &dyn Catalog,
) -> Result<Vec<Vec<Value>>, SqlError> {
    let right_width = right_scope.columns.len();
    scope.columns.extend(right_scope.columns);
    let condition = match on {
        Some(expr) => Some(
            Compiler {
                scope,
                parameters,
                mode: Mode::Row,
                catalog: Some(catalog),
            }
            .compile(expr, Some(DataType::Boolean))?,
        ),
        None => None,
    };
    let mut joined = Vec::new();
    for left_row in left {
        let mut matched = false;
        for right_row in &right {
            let mut row = left_row.clone();
            row.extend(right_row.iter().cloned());
            if let Some(condition) = &condition {
                if !condition.qualifies(&row)? {
                    continue;
                }
            }
            matched = true;
            if joined.len() >= JOIN_ROWS_MAX {
                return Err(SqlError::new(
                    sqlstate::PROGRAM_LIMIT_EXCEEDED,
                    format!("catalog joins are limited to {JOIN_ROWS_MAX} rows"),
                ));
            }
            joined.push(row);
        }
        if left_outer && !matched {
            let mut row = left_row;
            row.extend(std::iter::repeat_n(Value::Null, right_width));
            joined.push(row);
        }
    }
    Ok(joined)
}

/// The hidden columns `expand_set_returning` adds: the element and its 1-based index.
pub const EXPANDED_ELEMENT: &str = "_pg_expandarray.x";
pub const EXPANDED_INDEX: &str = "_pg_expandarray.n";

/// `information_schema._pg_expandarray(array)`, `unnest(array)` and
/// `generate_subscripts(array, 1)` in a catalog select list are set-returning: each row becomes
/// one row per element of the array (our arrays are space-separated text such as `indkey`
/// "1 2"), with the element and its index in two hidden columns (`unnest` is the element,
/// `generate_subscripts` the index).
pub fn expand_set_returning(
    select: &ast::Select,
    rows: &mut Vec<Vec<Value>>,
    scope: &mut Scope,
    catalog: &dyn Catalog,
    parameters: &mut Parameters,
) -> Result<(), SqlError> {
    let mut argument: Option<&ast::Expr> = None;
    for item in &select.projection {
        let (ast::SelectItem::UnnamedExpr(expr) | ast::SelectItem::ExprWithAlias { expr, .. }) =
            item
        else {
            continue;
        };
        let call = match expr {
            ast::Expr::CompoundFieldAccess { root, .. } => match root.as_ref() {
                ast::Expr::Nested(inner) => inner.as_ref(),
                other => other,
            },
            other => other,
        };
        if let ast::Expr::Function(function) = call {
            let is_expand = function
                .name
                .0
                .last()
                .and_then(|part| part.as_ident())
                .is_some_and(|ident| {
                    matches!(
                        ident_name(ident).as_str(),
                        "_pg_expandarray" | "unnest" | "generate_subscripts"
                    )
                });
            if let (true, ast::FunctionArguments::List(list)) = (is_expand, &function.args) {
                if let Some(ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(argument_expr))) =
                    list.args.first()
                {
                    // Several set-returning calls expand in step (as PostgreSQL zips them):
                    // here only over one array.
                    if argument.is_some_and(|known| known != argument_expr) {
                        return Err(SqlError::unsupported(
                            "set-returning functions over different arrays in one select list",
                        ));
                    }
                    argument = Some(argument_expr);
                }
            }
        }
    }
    let Some(argument) = argument else {
        return Ok(());
    };
    let array = Compiler {
        scope,
        parameters,
        mode: Mode::Row,
        catalog: Some(catalog),
    }
    .compile(argument, None)?;
    let mut expanded = Vec::new();
    for row in rows.iter() {
        let Value::Text(elements) = array.evaluate(row)? else {
            continue;
        };
        for (index, element) in elements.split_whitespace().enumerate() {
            let Ok(element) = element.parse::<i32>() else {
                continue;
            };
            let mut row = row.clone();
            row.push(Value::Int(element));
            row.push(Value::Int(index as i32 + 1));
            expanded.push(row);
        }
    }
    *rows = expanded;
    for name in [EXPANDED_ELEMENT, EXPANDED_INDEX] {
        scope.columns.push(ScopeColumn {
            table: None,
            name: name.to_string(),
            data_type: INT4,
            virtual_catalog: true,
            hidden: false,
        });
    }
    Ok(())
}

/// A subquery over the virtual catalog inside an expression whose row has scope `outer`.
pub fn subquery(
    query: &ast::Query,
    outer: &Scope,
    catalog: &dyn Catalog,
    parameters: &mut Parameters,
    kind: SubqueryKind,
) -> Result<Subquery, SqlError> {
    let ast::SetExpr::Select(select) = query.body.as_ref() else {
        return Err(SqlError::unsupported("UNION and VALUES in subqueries"));
    };
    if query.order_by.is_some()
        || query.with.is_some()
        || select.distinct.is_some()
        || select.having.is_some()
    {
        return Err(SqlError::unsupported(
            "ORDER BY, WITH, DISTINCT and HAVING in subqueries",
        ));
    }
    if !matches!(&select.group_by, ast::GroupByExpr::Expressions(exprs, _) if exprs.is_empty())
        || crate::plan::uses_aggregates(select, query)
    {
        return Err(SqlError::unsupported("aggregates in subqueries"));
    }
    let limit = match &query.limit_clause {
        None => None,
        Some(ast::LimitClause::LimitOffset {
            limit: Some(ast::Expr::Value(value)),
            offset: None,
            ..
        }) => match &value.value {
            ast::Value::Number(text, _) => text.parse().ok(),
            _ => None,
        },
        Some(_) => return Err(SqlError::unsupported("this LIMIT in a subquery")),
    };
    if provably_empty(query).is_some() {
        // Reads an empty catalog table (`pg_sequence`, `pg_description`, …): no rows, so NULL,
        // false or not-in whatever it selects, as for a whole query (`provably_empty`).
        return Ok(Subquery {
            rows: Vec::new(),
            filter: None,
            projection: None,
            data_type: None,
            kind,
            limit,
            table: None,
            aggregates: Vec::new(),
        });
    }
    let (rows, inner) = if select.from.is_empty() {
        (vec![Vec::new()], Scope::default())
    } else {
        if !select
            .from
            .iter()
            .all(|item| is_catalog_relation(&item.relation).unwrap_or(false))
        {
            return Err(SqlError::unsupported("subqueries over user tables"));
        }
        from_clause_within(&select.from, catalog, parameters, select.selection.as_ref())?
    };
    let outer_start = inner.columns.len();
    let mut columns = inner.columns;
    columns.extend(outer.columns.iter().cloned());
    let scope = Scope {
        columns,
        outer_start: Some(outer_start),
        star: None,
    };
    let mut compiler = Compiler {
        scope: &scope,
        parameters,
        mode: Mode::Row,
        catalog: Some(catalog),
    };
    let filter = select
        .selection
        .as_ref()
        .map(|selection| compiler.compile(selection, Some(DataType::Boolean)))
        .transpose()?;
    let projection = match (&kind, select.projection.as_slice()) {
        (SubqueryKind::Exists, _) => None,
        (
            _,
            [ast::SelectItem::UnnamedExpr(expr)] | [ast::SelectItem::ExprWithAlias { expr, .. }],
        ) => Some(compiler.compile(expr, None)?),
        _ => return Err(SqlError::syntax("subquery must return only one column")),
    };
    let data_type = projection
        .as_ref()
        .and_then(|projection| compiler.type_of(projection));
    Ok(Subquery {
        rows,
        filter,
        projection,
        data_type,
        kind,
        limit,
        table: None,
        aggregates: Vec::new(),
    })
}

/// Catalog tables that are always empty here; a query that inner-joins one (or an unknown
/// catalog table) answers no rows without being compiled.
const EMPTY_TABLES: &[&str] = &[
    "pg_description",
    "pg_enum",
    "pg_inherits",
    "pg_collation",
    "pg_policy",
    "pg_statistic_ext",
    "pg_publication",
    "pg_trigger",
];

fn empty_relation(factor: &TableFactor) -> bool {
    let TableFactor::Table {
        name, args: None, ..
    } = factor
    else {
        return false;
    };
    let Ok(parts) = object_name_parts(name) else {
        return false;
    };
    let Ok((schema, table)) = split_name(&parts) else {
        return false;
    };
    let known = match schema {
        Some("information_schema") => VIRTUAL_INFORMATION_SCHEMA.contains(&table),
        Some("pg_catalog") => VIRTUAL_PG_CATALOG.contains(&table),
        None | Some("public") if table.starts_with("pg_") => {
            VIRTUAL_PG_CATALOG.contains(&table) || !table.starts_with("pg_")
        }
        _ => return false,
    };
    EMPTY_TABLES.contains(&table)
        || !known && matches!(schema, Some("pg_catalog" | "information_schema"))
        || !known && schema.is_none() && table.starts_with("pg_")
}

/// If a catalog query provably answers no rows (every UNION branch inner-joins an empty or
/// unknown catalog table, and none aggregates without GROUP BY), the names of its columns.
pub fn provably_empty(query: &ast::Query) -> Option<Vec<String>> {
    fn branch(body: &ast::SetExpr, query: &ast::Query) -> Option<Vec<String>> {
        match body {
            ast::SetExpr::Select(select) => {
                let inner_empty = select.from.iter().any(|item| {
                    empty_relation(&item.relation)
                        || item.joins.iter().any(|join| {
                            matches!(
                                join.join_operator,
                                ast::JoinOperator::Join(_)
                                    | ast::JoinOperator::Inner(_)
                                    | ast::JoinOperator::CrossJoin(_)
                            ) && empty_relation(&join.relation)
                        })
                });
                let grouped = matches!(&select.group_by, ast::GroupByExpr::Expressions(exprs, _) if !exprs.is_empty());
                if !inner_empty || (!grouped && crate::plan::uses_aggregates(select, query)) {
                    return None;
                }
                Some(
                    select
                        .projection
                        .iter()
                        .map(|item| match item {
                            ast::SelectItem::UnnamedExpr(expr) => crate::plan::column_name(expr),
                            ast::SelectItem::ExprWithAlias { alias, .. } => ident_name(alias),
                            _ => "?column?".to_string(),
                        })
                        .collect(),
                )
            }
            ast::SetExpr::SetOperation {
                left, right, op, ..
            } if *op != ast::SetOperator::Except => {
                let names = branch(left, query)?;
                branch(right, query)?;
                Some(names)
            }
            ast::SetExpr::SetOperation { left, .. } => branch(left, query),
            ast::SetExpr::Query(inner) => branch(&inner.body, inner),
            _ => None,
        }
    }
    branch(&query.body, query)
}

/// `pg_get_constraintdef(oid, true)` (pretty) looks up `oid + PRETTY_DEFINITION_KEY`: a CHECK
/// prints with fewer parentheses then, as PostgreSQL's does.
pub const PRETTY_DEFINITION_KEY: i64 = 1 << 40;

/// A CHECK constraint's oid: its table's oid + 60 + its rank by name (below the next table's
/// oid: `engine::schema::CHECKS_MAX` is 32).
fn check_oid(table: i64, rank: usize) -> i64 {
    const _: () = assert!(60 + engine::schema::CHECKS_MAX < 100);
    table + 60 + rank as i64
}

/// The columns (numbers from 1) a CHECK names, in table order (`pg_constraint.conkey`).
fn check_columns(
    schema: &engine::TableSchema,
    check: &engine::schema::CheckConstraint,
) -> Vec<String> {
    let mut used = vec![false; schema.columns.len()];
    let _ = check.expression.map_columns(&mut |name: &String| {
        if let Ok(position) = schema.column_position(name) {
            used[position] = true;
        }
        Ok::<(), ()>(())
    });
    (0..used.len())
        .filter(|position| used[*position])
        .map(|position| (position + 1).to_string())
        .collect()
}

/// Object definitions by oid: `CREATE INDEX …` for index oids, `PRIMARY KEY (…)` and `CHECK
/// (…)` for constraint oids (for `pg_get_indexdef`, `pg_get_constraintdef`).
/// `pg_get_indexdef(index, k, …)` looks up `index × INDEX_COLUMN_KEY + k` in `index_columns`.
pub const INDEX_COLUMN_KEY: i64 = 1_000;

/// For `pg_get_indexdef(index, k, pretty)`: at `index × INDEX_COLUMN_KEY + k` the name of the
/// index's column k (from 1), and at `index × INDEX_COLUMN_KEY` the whole definition.
pub fn index_columns(catalog: &dyn Catalog) -> std::collections::BTreeMap<i64, String> {
    let whole = definitions(catalog);
    let mut columns = std::collections::BTreeMap::new();
    let entries: Vec<crate::catalog::TableEntry> = catalog
        .table_names()
        .iter()
        .filter_map(|name| catalog.table(name))
        .collect();
    for (at, entry) in entries.iter().enumerate() {
        let oid = FIRST_TABLE_OID + 100 * at as i64;
        let schema = &entry.schema;
        let mut indexes: Vec<(i64, Vec<String>)> = Vec::new();
        if schema.row_id_column().is_none() {
            let key = schema
                .primary_key
                .iter()
                .map(|position| schema.columns[*position].name.clone())
                .collect();
            indexes.push((oid + 1, key));
        }
        for (index_at, (_, names)) in entry.indexes.iter().enumerate() {
            indexes.push((oid + 2 + index_at as i64, names.clone()));
        }
        for (index, names) in indexes {
            if let Some(definition) = whole.get(&index) {
                columns.insert(index * INDEX_COLUMN_KEY, definition.clone());
            }
            for (k, name) in names.into_iter().enumerate() {
                columns.insert(index * INDEX_COLUMN_KEY + k as i64 + 1, name);
            }
        }
    }
    columns
}

/// A view's definition as `pg_views.definition` and `pg_get_viewdef` show it: PostgreSQL
/// prints its own deparsed form (a leading space, one column per line, a semicolon); ours is
/// the query text as the parser prints it, with the leading space and the semicolon.
fn view_definition(query: &str) -> String {
    format!(" {query};")
}

pub fn definitions(catalog: &dyn Catalog) -> std::collections::BTreeMap<i64, String> {
    let oids = Oids {
        tables: catalog
            .table_names()
            .iter()
            .filter_map(|name| catalog.table(name))
            .collect(),
    };
    let mut texts = std::collections::BTreeMap::new();
    for (at, entry) in oids.tables.iter().enumerate() {
        let oid = oids.table_oid(at);
        let schema = &entry.schema;
        if let Some(query) = crate::view::query_text(entry) {
            // pg_get_viewdef(view oid).
            texts.insert(oid, view_definition(query));
        }
        let hidden_key = schema.row_id_column().is_some();
        let key: Vec<&str> = schema
            .primary_key
            .iter()
            .map(|position| schema.columns[*position].name.as_str())
            .collect();
        if !hidden_key {
            texts.insert(
                oid + 1,
                format!(
                    "CREATE UNIQUE INDEX {} ON public.{} USING btree ({})",
                    schema.primary_key_name(),
                    schema.name,
                    key.join(", ")
                ),
            );
            let definition = format!("PRIMARY KEY ({})", key.join(", "));
            texts.insert(oid + 50 + PRETTY_DEFINITION_KEY, definition.clone());
            texts.insert(oid + 50, definition);
        }
        for (check_at, check) in schema.checks.iter().enumerate() {
            let constraint = check_oid(oid, check_at);
            let define =
                |pretty| crate::plan::check::constraint_definition(&check.expression, pretty);
            texts.insert(constraint, define(false));
            texts.insert(constraint + PRETTY_DEFINITION_KEY, define(true));
        }
        for (index_at, (index, columns)) in entry.indexes.iter().enumerate() {
            texts.insert(
                oid + 2 + index_at as i64,
                format!(
                    "CREATE INDEX {index} ON public.{} USING btree ({})",
                    schema.name,
                    columns.join(", ")
                ),
            );
        }
    }
    texts
}

/// `format_type(oid, typmod)` for the types the catalog lists.
pub fn format_type(oid: i64, modifier: i64) -> Option<String> {
    let oid = u32::try_from(oid).ok()?;
    let data_type = crate::types::data_type_for_oid(oid)?;
    Some(match (oid, data_type) {
        (crate::types::VARCHAR_OID, _) if modifier > 4 => {
            format!("character varying({})", modifier - 4)
        }
        (crate::types::VARCHAR_OID, _) => "character varying".into(),
        (crate::types::NUMERIC_OID, _) if modifier >= 4 => {
            let modifier = modifier - 4;
            format!(
                "numeric({},{})",
                (modifier >> 16) & 0xffff,
                modifier & 0xffff
            )
        }
        (_, DataType::Timestamp) => "timestamp without time zone".into(),
        (crate::types::JSON_OID, _) => "json".into(),
        (_, data_type) => data_type.name(),
    })
}

/// A table's columns as clients see them: without the hidden row id of a table declared
/// without a primary key.
fn visible_columns(schema: &TableSchema) -> impl Iterator<Item = (usize, &engine::ColumnDef)> {
    let hidden = schema.row_id_column();
    schema
        .columns
        .iter()
        .enumerate()
        .filter(move |(position, _)| Some(*position) != hidden)
}

/// A column's DEFAULT as `information_schema.columns.column_default` spells it: `now()`,
/// `CURRENT_DATE`, `LOCALTIMESTAMP`, a number, or a quoted literal with its type.
fn default_text(default: &engine::ColumnDefault, data_type: DataType) -> String {
    match default {
        engine::ColumnDefault::NextValue { sequence }
        | engine::ColumnDefault::Identity { sequence, .. } => {
            format!("nextval('{}'::regclass)", sequence.replace('\'', "''"))
        }
        engine::ColumnDefault::StatementTime(DataType::TimestampTz) => "now()".into(),
        engine::ColumnDefault::RandomUuid => "gen_random_uuid()".into(),
        engine::ColumnDefault::StatementTime(DataType::Timestamp) => "LOCALTIMESTAMP".into(),
        engine::ColumnDefault::StatementTime(_) => "CURRENT_DATE".into(),
        engine::ColumnDefault::Constant(Value::Null) => "NULL".into(),
        engine::ColumnDefault::Constant(
            value @ (Value::Int(_) | Value::BigInt(_) | Value::Double(_) | Value::Boolean(_)),
        ) => engine::value::text_output(value).unwrap_or_default(),
        engine::ColumnDefault::Constant(value) => format!(
            "'{}'::{}",
            engine::value::text_output(value)
                .unwrap_or_default()
                .replace('\'', "''"),
            match data_type {
                DataType::Text {
                    length_max: Some(_),
                } => "character varying".to_string(),
                other => sql_type_name(other),
            }
        ),
    }
}

/// Whether a column has a DEFAULT PostgreSQL shows (`atthasdef`, `pg_attrdef`): an identity
/// column's sequence is not a default there.
fn has_default(column: &engine::ColumnDef) -> bool {
    !matches!(
        column.default,
        None | Some(engine::ColumnDefault::Identity { .. })
    )
}

/// `pg_attribute.attidentity`: `a` GENERATED ALWAYS, `d` BY DEFAULT, empty otherwise.
fn identity_kind(column: &engine::ColumnDef) -> &'static str {
    match column.default {
        Some(engine::ColumnDefault::Identity { always: true, .. }) => "a",
        Some(engine::ColumnDefault::Identity { always: false, .. }) => "d",
        _ => "",
    }
}

/// `pg_sequence` rows (`named`: `pg_sequences` rows) of every sequence. `last_value` is NULL:
/// the counter lives at its partition, not in the catalog.
fn sequence_rows(oids: &Oids, named: bool) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for (at, entry) in oids.tables.iter().enumerate() {
        let Some(definition) = crate::sequence::SequenceDef::of(&entry.schema) else {
            continue;
        };
        let type_oid: i64 = match definition.type_name {
            "smallint" => 21,
            "integer" => 23,
            _ => 20,
        };
        rows.push(if named {
            vec![
                text("public"),
                text(&entry.schema.name),
                text("tessera"),
                text(definition.type_name),
                int8(definition.start),
                int8(definition.min),
                int8(definition.max),
                int8(definition.increment),
                Value::Boolean(definition.cycle),
                int8(definition.cache),
                Value::Null,
            ]
        } else {
            vec![
                int8(oids.table_oid(at)),
                int8(type_oid),
                int8(definition.start),
                int8(definition.increment),
                int8(definition.max),
                int8(definition.min),
                int8(definition.cache),
                Value::Boolean(definition.cycle),
            ]
        });
    }
    rows
}
