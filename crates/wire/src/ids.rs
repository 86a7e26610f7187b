use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! newtype {
    ($(#[$meta:meta])* $name:ident($inner:ty), $prefix:literal) => {
        $(#[$meta])*
        #[derive(
            Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
        )]
        pub struct $name(pub $inner);

        impl fmt::Display for $name {
            fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(formatter, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

newtype!(
    /// A replica's position in its group's configuration, `0..replica_count`.
    ReplicaIndex(u8),
    "r"
);
newtype!(
    /// A view number. The primary of view `v` is replica `v % replica_count`.
    View(u64),
    "v"
);
newtype!(
    /// An op number: the position of an entry in the log, starting at 1 (0 is "nothing").
    Op(u64),
    "op"
);
newtype!(
    /// A client's identity, chosen by the client (random 64 bits), unique per session.
    ClientId(u64),
    "c"
);
newtype!(
    /// A client's request number: strictly increasing per client.
    RequestNumber(u64),
    "#"
);
newtype!(
    /// A recovering replica's random nonce (VRR §4.3), to match responses to one recovery.
    Nonce(u64),
    "n"
);

impl View {
    pub fn next(self) -> View {
        View(self.0 + 1)
    }
}

impl Op {
    pub fn next(self) -> Op {
        Op(self.0 + 1)
    }
}
