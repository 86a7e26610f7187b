//! placement: Rubberband data placement (docs below are a stub; see the end of the work).
#![forbid(unsafe_code)]

pub mod configuration;
pub mod ecast;
pub mod message;
pub mod plan;
pub mod position;

pub use configuration::{
    ConfigVersion, Configuration, Member, Partition, ProcessId, ProcessInfo, ProcessState,
    REPLICATION_MAX,
};
pub use message::{
    apply, target, ConfigChange, ConfigMessage, KeyspaceMessage, MembershipChange, Refusal,
    Transformation,
};
pub use plan::{
    check, flood, project, EngineInstruction, Instruction, Migration, Piece, Planner, Score,
    Solution,
};
pub use position::{hash_position, range_position, KeyMapping, Position, PositionSet, Span};
