//! Rubberband data placement (Crescando/RB §6): the ring configuration, the E-Cast routing
//! function over it, the keyspace and membership messages, and the planner that turns a
//! keyspace transformation into the instruction list least likely to lose data.
//!
//! Pure: no I/O, clock, thread or OS randomness, and only ordered maps, so the router group,
//! the simulator and the admin tool compute the same answers from the same configuration.
//!
//! # Map of the crate, against the paper
//!
//! | module | paper | what |
//! |---|---|---|
//! | `position` | §6.2 | `Position` (a point of the 64-bit ring), `Span` (an arc `[a, b)`), `PositionSet`, `KeyMapping` (hash or range placement of keys) |
//! | `configuration` | §6.2 | `Configuration`: version, replication factor `f`, processes (`Standby`, `Active { identifier }`, `Suspected { identifier }`); `owner`, `replicas`, `ranges_of`, `partitions`, `covering`, `read_cover` |
//! | `message` | §6.4 | membership messages (join, leave, suspect), the four keyspace transformations (expand, contract, replace, rebalance), `apply` with typed `Refusal`s |
//! | `plan` | §6.4–6.5 | `Instruction` lists (copy / delete, projected per engine into send / receive / delete), `Migration` (what must move), `check`, the `Planner` |
//! | `ecast` | §5.3, §6.3 | the routing function: `destset`, `apply`, `suspects` |
//! | `groups` | (VRR §7) | `vr` partitions above replication 1: replica groups named by (owner, version born), `Groups::follow` along the configurations, `Regrouping` (which groups a keyspace message retires, starts and keeps, and the copies between them), `Groups::routing` (one E-Cast destination per group) |
//! | `migration` | §6.4–6.5 | partial live migration, one storage process's half: `Migrator` (chunked, checksummed, throttled streams; holding and replaying later deliveries; deletes after every install; self-declared failure); see `docs/internals/rubberband.md` |
//!
//! # Placement (§6.2)
//!
//! Each ring member has an identifier; its primary range is the arc from its identifier to its
//! successor's. With replication factor `f` the range is held by its owner and the owner's
//! `f - 1` successors, so a member holds its own primary range and its `f - 1` predecessors'
//! (its *partition*, `ranges_of`). A group is the `f` successive members holding one primary
//! range. Keys reach the ring through `KeyMapping`: `Hash` is FNV-1a 64 followed by the
//! splitmix64 finaliser (pinned by a test: changing it misplaces stored data), `Range` is the
//! key's first eight bytes big-endian, which preserves key order so a key range is one arc.
//!
//! # Invariants
//!
//! - No two ring members share an identifier; the replication factor is `1..=REPLICATION_MAX`
//!   and never changes.
//! - Every position has exactly `min(f, ring size)` distinct replicas (suspected ones
//!   included: suspicion never moves data, it only stops routing to the process).
//! - `apply` advances the version by exactly one or refuses and changes nothing.
//! - An accepted keyspace message's instructions give every live new replica exactly the data
//!   it did not hold, each position once, from a live process that held it; every live process
//!   deletes exactly what it no longer holds; so no delete removes the last live copy, and
//!   every range whose replicas change keeps at least one live replica.
//! - A contract never leaves fewer ring members than `f`.
//!
//! # The planner, and our reading of §6.5
//!
//! A *solution* is an instruction list; its *graph* has an edge sender → receiver for every
//! copy. Partial live migration has no undo: a receiver whose sender dies mid-transfer is left
//! incomplete and must declare itself failed, and it then fails its own receivers in turn.
//! The planner
//! 1. enumerates the minimal solutions: a solution is not minimal if its graph is a super-graph
//!    of another solution's (footnote 5). Edges into different receivers are disjoint, so a
//!    solution is minimal exactly when each receiver's set of senders is a minimal set of live
//!    old holders covering everything it must receive; the solutions are the product of those
//!    per-receiver minimal covers;
//! 2. for every live process `x`, simulates `x` failing during the migration: flooding the
//!    graph from `x` gives the transitively failed set, to which the already suspected
//!    processes are added;
//! 3. counts, for every replica group of the *new* configuration (the `f` successive processes
//!    that will hold each primary range once deletes have run), how many of its members are
//!    failed. A group with all `f` failed is data loss;
//! 4. ranks solutions by the worst case first and then by how often each level occurs: the
//!    profile "how many (failure, group) pairs reach `f` failed; then `f - 1`; …" compared
//!    lexicographically, smaller is better. This is "the solution which for any additional
//!    single process failure leaves the smallest number of (transitively) failed processes in
//!    any group of `f` successive processes", with "3 groups with 2 failed each preferred over
//!    1 group with 3" falling out of comparing the highest level first;
//! 5. breaks ties by the number of groups in which every live member is busy migrating
//!    (fewer is better: §6.5's "at least one storage process per replication group that is not
//!    busy"), then by the number of edges, then by enumeration order (lower process ids first),
//!    so the answer is deterministic.
//!
//! Fig. 6 and Fig. 7 are reproduced in `tests/paper_figures.rs`; a hidden canary ranking
//! (`Planner::canary`) that prefers the worst solution must fail that test.
//!
//! # Deviations from the paper, and why
//!
//! - **Version checks.** Footnote 4 refuses a keyspace message computed against another
//!   version; we do the same (`StaleVersion`). Membership messages also carry their version,
//!   but are refused only if their own process changed since (`Conflict`): a join or a
//!   suspicion does not depend on the rest of the configuration, and refusing it would turn
//!   every concurrent failure report into a retry.
//! - **Configuration contents.** The paper's config also lists client and super processes and
//!   a configuration message's destination set includes every super process. In Tessera the
//!   router group itself holds the configuration, so we keep only storage processes and route
//!   a configuration message to the live processes it names or instructs.
//! - **Suspected processes.** A suspected ring member keeps its identifier (as d in Fig. 7)
//!   until contracted or replaced; a suspected standby is forgotten (the paper remembers only
//!   unsuspected processes). Nothing stops a forgotten process id from joining again; the
//!   runtime must give a restarted process a new id (the paper's crash-stop model).
//! - **Contract and replace of a live process** turn it into a standby instead of removing it,
//!   so that it can leave with a membership message or be expanded again.
//! - **Instruction lists are verified** by `apply` against the transformation (the paper
//!   trusts the super process). Deletes are listed only for live processes: a suspected
//!   process executes nothing (Fig. 6 lists d's delete because d is live there).
//! - **Senders are old holders only**: no chained copies through a new replica, which would
//!   only add edges.
//! - **Enumeration limit.** Past `Planner::solutions_max` minimal solutions (default 20,000),
//!   the planner improves one receiver's sender set at a time (coordinate descent) instead of
//!   enumerating the product; the paper enumerates fully for `f <= 5`, and so do we in every
//!   case the tests reach except the one that forces the fallback.
//! - **Data already lost is refused, not skipped**: a transformation that needs a range whose
//!   every replica is suspected is refused (`NoLiveSource`) rather than silently giving the new
//!   replica nothing.
//! - **Range placement is conservative at the top**: a key range `[start, end)` maps to the
//!   positions `[pos(start), pos(end)]`, including `end`'s own position because shorter keys
//!   share its zero-padded prefix; a range read may reach one extra partition.
//! - **Partial live migration** (`migration`) deviates in its own ways — deletes wait for every
//!   install, only items that depend on a copy wait, heartbeats and timeouts detect a failed
//!   sender — listed with their reasons in `docs/internals/rubberband.md`.
//! - **Range reads ignore the replica offset**: a range read goes to a minimal cover chosen
//!   greedily (lowest process id on ties); point reads use the offset (§6.3).
#![forbid(unsafe_code)]

pub mod configuration;
pub mod ecast;
pub mod groups;
pub mod message;
pub mod migration;
pub mod plan;
pub mod position;
pub mod supervisor;

pub use configuration::{
    ConfigVersion, Configuration, Member, Partition, ProcessId, ProcessInfo, ProcessState,
    REPLICATION_MAX,
};
pub use groups::{past_retirement, Group, GroupName, Groups, Regrouping};
pub use message::{
    apply, target, ConfigChange, ConfigMessage, KeyspaceMessage, MembershipChange, Refusal,
    Transformation,
};
pub use plan::{
    check, flood, project, EngineInstruction, Instruction, Migration, Piece, Planner, Score,
    Solution,
};
pub use position::{hash_position, range_position, KeyMapping, Position, PositionSet, Span};
