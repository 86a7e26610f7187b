//! The simulator's group members, whatever protocol replicates their group: the simulator
//! drives them through `vr::Replication` only, and this module is the one place that picks the
//! implementation by `Config::protocol`: `vr::Replica<S>` (VR) or `vr::Replica<S, vr::Skyros>`
//! (VR composed with the Skyros extension). Trait objects, not a type parameter: a
//! `Simulation` or a `BypassSimulation` would otherwise carry the parameter through every file
//! of its mode for no gain (the simulator is not bound by a virtual call per step).

use vr::{
    Config, DurableState, Nonce, Protocol, Replica, ReplicaIndex, Replication, RestoreError,
    Skyros, StateMachine,
};

/// One member of a simulated group, replicating a `S`.
pub type Member<S> = Box<dyn Replication<Machine = S>>;

/// A member of a new group.
pub fn create<S: StateMachine + 'static>(
    config: Config,
    index: ReplicaIndex,
    machine: S,
) -> Member<S> {
    match config.protocol {
        Protocol::Vr => Box::new(<Replica<S> as Replication>::create(config, index, machine)),
        Protocol::Skyros => Box::new(<Replica<S, Skyros> as Replication>::create(
            config, index, machine,
        )),
    }
}

/// A `memory`-durability member that restarted empty and recovers from its group.
pub fn recovering<S: StateMachine + 'static>(
    config: Config,
    index: ReplicaIndex,
    machine: S,
    nonce: Nonce,
) -> Member<S> {
    match config.protocol {
        Protocol::Vr => Box::new(<Replica<S> as Replication>::recovering(
            config, index, machine, nonce,
        )),
        Protocol::Skyros => Box::new(<Replica<S, Skyros> as Replication>::recovering(
            config, index, machine, nonce,
        )),
    }
}

/// A `disk`-durability member restarted from its records.
pub fn open<S: StateMachine + 'static>(
    config: Config,
    index: ReplicaIndex,
    machine: S,
    durable: DurableState,
) -> Result<Member<S>, RestoreError> {
    Ok(match config.protocol {
        Protocol::Vr => Box::new(<Replica<S> as Replication>::open(
            config, index, machine, durable,
        )?),
        Protocol::Skyros => Box::new(<Replica<S, Skyros> as Replication>::open(
            config, index, machine, durable,
        )?),
    })
}
