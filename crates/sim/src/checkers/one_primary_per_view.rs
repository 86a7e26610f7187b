//! VRR §4: at most one replica is the primary of a given view (the primary is `view % n`, and
//! it is primary only once f + 1 replicas joined the view change).

use super::Violation;
use std::collections::BTreeMap;
use wire::{ReplicaIndex, View};

#[derive(Default)]
pub struct OnePrimaryPerView {
    primaries: BTreeMap<View, ReplicaIndex>,
}

impl OnePrimaryPerView {
    pub fn observe(
        &mut self,
        replica: ReplicaIndex,
        view: View,
        is_primary: bool,
    ) -> Result<(), Violation> {
        if !is_primary {
            return Ok(());
        }
        let primary = *self.primaries.entry(view).or_insert(replica);
        if primary != replica {
            return Err(Violation {
                checker: "one_primary_per_view",
                report: format!("{replica} and {primary} were both primary of {view}"),
            });
        }
        Ok(())
    }
}
