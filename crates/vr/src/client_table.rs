use std::collections::BTreeMap;
use wire::{ClientId, ClientTableEntry, RequestNumber};

/// VRR's client table: for each client, the number of its latest executed write and that
/// write's result. It makes execution at-most-once: a retried request gets the saved result and
/// an older one is dropped. Every replica updates it when it executes, so it survives view
/// changes, and it is part of every checkpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientTable {
    // A BTreeMap: checkpoints must serialise in the same order on every replica.
    entries: BTreeMap<ClientId, (RequestNumber, Vec<u8>)>,
}

impl ClientTable {
    pub fn get(&self, client: ClientId) -> Option<(RequestNumber, &[u8])> {
        self.entries
            .get(&client)
            .map(|(request, result)| (*request, result.as_slice()))
    }

    /// Whether `request` from `client` was already executed (or superseded by a later one).
    pub fn executed(&self, client: ClientId, request: RequestNumber) -> bool {
        self.entries
            .get(&client)
            .is_some_and(|(latest, _)| request <= *latest)
    }

    pub fn record(&mut self, client: ClientId, request: RequestNumber, result: Vec<u8>) {
        assert!(
            !self.executed(client, request),
            "a request is executed at most once"
        );
        self.entries.insert(client, (request, result));
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn to_entries(&self) -> Vec<ClientTableEntry> {
        self.entries
            .iter()
            .map(|(client, (request, result))| ClientTableEntry {
                client: *client,
                request: *request,
                result: result.clone(),
            })
            .collect()
    }

    /// Rebuilds a table from checkpoint entries (from a peer: duplicates keep the latest).
    pub fn from_entries(entries: &[ClientTableEntry]) -> ClientTable {
        let mut table = ClientTable::default();
        for entry in entries {
            let slot = table
                .entries
                .entry(entry.client)
                .or_insert((entry.request, entry.result.clone()));
            if slot.0 < entry.request {
                *slot = (entry.request, entry.result.clone());
            }
        }
        table
    }
}
