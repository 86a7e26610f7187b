//! The table engine a partition replicates (docs to follow).
#![forbid(unsafe_code)]

pub mod engine;
#[cfg(test)]
mod engine_tests;
pub mod error;
pub mod operation;
pub mod planner;
pub mod predicate;
#[cfg(test)]
mod property_tests;
pub mod query_index;
pub mod schema;
pub mod state_machine;
pub mod table;
pub mod value;

pub use engine::Engine;
pub use error::EngineError;
pub use operation::{Assignment, OnConflict, Operation, OperationResult, Output};
pub use predicate::{CompareOp, Predicate};
pub use schema::{ColumnDef, TableSchema};
pub use state_machine::{Command, Outcome};
pub use value::{DataType, Value};
