//! A partition's data as a `vr` partition group replicates it: `PartitionStore`, the
//! `ecast::PartitionData` of `runtime::ecast::partition_host`'s replicas and of the
//! simulator's SQL partition groups.

use crate::payload::{self, KeyPlacement};
use ecast::{KeySet, PartitionData};
use kv::Outcome;
use placement::{Position, PositionSet};
use serde::{Deserialize, Serialize};
use vr::StateMachine;

/// A partition's data: a `store::Store`, whose key-value namespace holds the keys in its arc
/// and whose engine holds every SQL table's catalog and the rows whose placement key lies in
/// its arc (`store::rows`). An operation is a gateway's payload (`payload::Split`, a survey or
/// a SQL statement, `payload::SqlPayload`), of which the partition executes its share: the
/// sub-commands whose key lies in its arc, or the statement over its rows (an insert keeping
/// the rows it holds); the result is their outcomes by index (a statement's: `Outcome::Foreign`,
/// the engine's outcome bytes, at its first part held, `Outcome::Ok` at the others).
/// Cloning shares the key-value map (a checkpoint's copy, `vr::StateMachine::snapshot_source`).
#[derive(Clone, Default)]
pub struct PartitionStore {
    arc: PositionSet,
    /// Where keys lie on the ring (`ClusterConfig::range_prefixes`).
    placement: KeyPlacement,
    store: store::Store,
    /// A group whose holdings change (`ClusterConfig::elastic_groups`): an operation's keys
    /// are every key it names, not only those in the arc, so that a single-partition
    /// operation on a key a cut moved away is answered `Moved` rather than executed as an
    /// empty share (multi-partition shares name more keys than they touch here: more
    /// conflicts for the rules, which only orders more).
    elastic: bool,
    /// The parts of the SQL statement executed last (`execute_sql`): a statement parked then
    /// keeps them for its answer (`PartitionData::parked`). Not replicated state: taken in
    /// the step that set it.
    parked_parts: Option<Vec<u32>>,
}

impl PartitionStore {
    pub fn new(arc: PositionSet, placement: KeyPlacement) -> PartitionStore {
        PartitionStore {
            arc,
            placement,
            store: store::Store::new(),
            elastic: false,
            parked_parts: None,
        }
    }

    /// The store of a group whose holdings change (`elastic` above).
    pub fn elastic(mut self) -> PartitionStore {
        self.elastic = true;
        self
    }

    /// The store, to change (the simulator's canaries; never the runtime).
    pub fn store_mut(&mut self) -> &mut store::Store {
        &mut self.store
    }

    /// The store (for checks: the simulator reads the final rows).
    pub fn store(&self) -> &store::Store {
        &self.store
    }

    pub fn len(&self) -> usize {
        self.store.kv.len()
    }

    pub fn is_empty(&self) -> bool {
        self.store.kv.is_empty()
    }

    /// Table rows held (every table's; a table placed everywhere counts at each partition).
    pub fn rows(&self) -> u64 {
        self.store
            .engine
            .tables()
            .map(|table| table.len() as u64)
            .sum()
    }

    /// Bytes of the key-value namespace held (keys and values).
    pub fn kv_bytes(&self) -> u64 {
        self.store.kv.bytes()
    }

    /// The parts of a SQL statement this partition answers if it runs it here, `None` if it
    /// does not run it.
    fn sql_parts(&self, payload: &payload::SqlPayload) -> Option<Vec<u32>> {
        let parts = payload.parts_held(&self.arc, &self.placement);
        // A statement over every partition runs wherever it is delivered, even here where no
        // arc it names lies wholly in the holdings (planned against another configuration,
        // which the pinned submission prevents): its message reaches every partition at one
        // point of the order, so all run it or none does; an arc nobody answers fails it.
        let runs = !parts.is_empty() || matches!(payload.target, payload::SqlTarget::Arcs(_));
        // Otherwise routed here against another ring: the gateway re-plans.
        runs.then_some(parts)
    }

    /// Executes this partition's share of a SQL statement; its answers by part.
    fn execute_sql(&mut self, payload: &payload::SqlPayload) -> Vec<(u32, Outcome)> {
        let Some(parts) = self.sql_parts(payload) else {
            return Vec::new();
        };
        let (arc, placement) = (&self.arc, &self.placement);
        let result = self.store.execute_share(&payload.operation, |key| {
            arc.contains(placement.position(key))
        });
        // Should the statement be parked (`parked`), its answer is wrapped with these parts.
        self.parked_parts = Some(parts.clone());
        answers_by_part(parts, result)
    }

    /// Whether a statement's share may run in a shared engine batch (`batchable`).
    fn shares_a_cycle(&self, payload: &payload::SqlPayload) -> bool {
        store::shares_a_cycle(&payload.operation)
            || store::Store::is_shared_prepare(&payload.operation)
            || self.store.is_shared_commit(&payload.operation)
    }

    /// Executes the shares of SQL statements in order, as `execute_sql` on each would, the
    /// statements `store::Store::execute_shares` batches in one engine batch.
    fn execute_sql_batch(&mut self, payloads: &[payload::SqlPayload]) -> Vec<Vec<(u32, Outcome)>> {
        let parts: Vec<Option<Vec<u32>>> = payloads
            .iter()
            .map(|payload| self.sql_parts(payload))
            .collect();
        let operations: Vec<&[u8]> = payloads
            .iter()
            .zip(&parts)
            .filter(|(_, parts)| parts.is_some())
            .map(|(payload, _)| payload.operation.as_slice())
            .collect();
        let (arc, placement) = (&self.arc, &self.placement);
        let mut results = self
            .store
            .execute_shares(&operations, |key| arc.contains(placement.position(key)))
            .into_iter();
        let outcomes = parts
            .into_iter()
            .map(|parts| match parts {
                Some(parts) => answers_by_part(parts, results.next().expect("one per share")),
                None => Vec::new(),
            })
            .collect();
        assert!(results.next().is_none(), "one result per share");
        outcomes
    }

    /// The counters of the shared engine batches this replica ran (not replicated state).
    pub fn cycles(&self) -> store::Cycles {
        self.store.cycles
    }

    /// §6.7 basic read of a SQL statement pinned to partition keys
    /// (`payload::SqlTarget::Keys`): what `execute_sql` would answer, from the rows as they
    /// are (`store::Store::read_share`: a read only, under a catalog guard that matches, of
    /// tables no open transaction writes), or `None` (refused: the read goes through the
    /// log). Refused too when this partition holds none of its keys (routed against another
    /// ring: through the log it is answered with nothing and the gateway re-plans) and for
    /// statements over arcs or the catalog read (every partition, or the catalog: ordered).
    fn read_sql(&self, payload: &payload::SqlPayload) -> Option<Vec<(u32, Outcome)>> {
        if !matches!(payload.target, payload::SqlTarget::Keys(_)) {
            return None;
        }
        let parts = payload.parts_held(&self.arc, &self.placement);
        if parts.is_empty() {
            return None;
        }
        let (arc, placement) = (&self.arc, &self.placement);
        let result = self.store.read_share(&payload.operation, |key| {
            arc.contains(placement.position(key))
        })?;
        let mut outcomes = Vec::with_capacity(parts.len());
        let mut result = Some(Outcome::Foreign(result));
        for part in parts {
            outcomes.push((part, result.take().unwrap_or(Outcome::Ok)));
        }
        Some(outcomes)
    }

    /// Whether a stored row of `schema` lies in `range`.
    fn row_in(
        &self,
        range: &PositionSet,
        schema: &engine::TableSchema,
        row: &[engine::Value],
    ) -> bool {
        store::rows::holds_row(schema, row, |key| {
            range.contains(self.placement.position(key))
        })
    }
}

/// A statement's answers by part: the engine's result at the first part held, `Outcome::Ok`
/// at the others.
fn answers_by_part(parts: Vec<u32>, result: Vec<u8>) -> Vec<(u32, Outcome)> {
    let mut outcomes = Vec::with_capacity(parts.len());
    let mut result = Some(Outcome::Foreign(result));
    for part in parts {
        outcomes.push((part, result.take().unwrap_or(Outcome::Ok)));
    }
    outcomes
}

impl std::fmt::Debug for PartitionStore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PartitionStore")
            .field("arc", &self.arc)
            .field("keys", &self.store.kv.len())
            .field("elastic", &self.elastic)
            .finish()
    }
}

/// What a partition's result bytes carry: the outcomes of its share, by sub-command index.
/// The number of records in a copy (`PartitionStore::export`'s encoding: a postcard sequence,
/// whose length comes first); 0 if it does not decode.
pub fn record_count(records: &[u8]) -> u64 {
    postcard::take_from_bytes::<u64>(records)
        .map(|(count, _)| count)
        .unwrap_or(0)
}

pub fn decode_outcomes(result: &[u8]) -> Vec<(u32, Outcome)> {
    postcard::from_bytes(result).unwrap_or_default()
}

pub fn encode_outcomes(outcomes: &[(u32, Outcome)]) -> Vec<u8> {
    postcard::to_allocvec(outcomes).expect("outcomes serialise")
}

impl PartitionData for PartitionStore {
    fn keys(&self, operation: &[u8]) -> KeySet {
        if let Some(sql) = payload::decode_sql(operation) {
            // Every statement names the tables (statements are ordered among themselves and
            // with nothing else); one pinned to partition keys names their placement keys too,
            // so that the group answers `Moved` once a cut took them away.
            let mut keys = vec![payload::SQL_ANCHOR.to_vec()];
            if let Ok(payload::SqlPayload {
                target: payload::SqlTarget::Keys(rows),
                ..
            }) = sql
            {
                keys.extend(rows);
            }
            return KeySet::of(keys);
        }
        if payload::decode_survey(operation).is_some() {
            return KeySet::Unknown; // DBSIZE, KEYS, FLUSHALL…: every key.
        }
        let named = if self.elastic {
            payload::share_in(operation, &PositionSet::whole(), &self.placement)
        } else {
            payload::share_in(operation, &self.arc, &self.placement)
        };
        match named {
            Ok(share) => KeySet::of(
                share
                    .iter()
                    .flat_map(|(_, command)| command.keys().into_iter().map(<[u8]>::to_vec)),
            ),
            Err(_) => KeySet::Unknown,
        }
    }

    fn execute(&mut self, operation: &[u8]) -> Vec<u8> {
        if let Some(sql) = payload::decode_sql(operation) {
            let outcomes = match sql {
                Ok(sql) => self.execute_sql(&sql),
                Err(_) => Vec::new(),
            };
            return encode_outcomes(&outcomes);
        }
        if let Some(survey) = payload::decode_survey(operation) {
            let Ok((survey, arcs)) = survey else {
                return encode_outcomes(&[]);
            };
            if survey == payload::Survey::Flush {
                let (arc, placement) = (&self.arc, &self.placement);
                self.store
                    .kv
                    .remove_where(|key| arc.contains(placement.position(key)));
                return encode_outcomes(&[]);
            }
            let arc = self.arc.clone();
            if let Some(outcomes) = payload::config_survey(&survey, &arcs, &arc, &mut self.store.kv)
            {
                return encode_outcomes(&outcomes);
            }
            let kv = &self.store.kv;
            let entry_of = |key: &[u8]| kv.entry(key);
            return encode_outcomes(&payload::survey_answers(
                &survey,
                &arcs,
                &self.arc,
                kv.key_names(),
                &self.placement,
                &entry_of,
            ));
        }
        let Ok(share) = payload::share_in(operation, &self.arc, &self.placement) else {
            return encode_outcomes(&[]);
        };
        let outcomes: Vec<(u32, Outcome)> = share
            .into_iter()
            .map(|(index, command)| (index, self.store.kv.execute(&command)))
            .collect();
        encode_outcomes(&outcomes)
    }

    /// SQL statements that may share a scan cycle (`store::shares_a_cycle`: autocommit
    /// queries and updates, no DDL, not on the table `kv`; and the commits of two-phase
    /// statements with shared holds, `Store::is_shared_commit`, such as Crescando's non-key
    /// UPDATEs over several partitions): their execution changes only the tables and the
    /// two-phase statements, which `keys` and `position` do not read.
    fn batchable(&self, operation: &[u8]) -> bool {
        matches!(
            payload::decode_sql(operation),
            Some(Ok(payload)) if self.shares_a_cycle(&payload)
        )
    }

    /// A batchable statement that only reads (`store::is_read_operation`: every engine
    /// operation a query): its execution changes no row, no catalog, no transaction or
    /// two-phase state, only this replica's `store::Cycles` counters. A read of a table an
    /// open transaction holds is refused by the data itself (`Store::share_refused`), on the
    /// job's copy exactly as here: the copy carries the transactions.
    fn reads_only(&self, operation: &[u8]) -> bool {
        matches!(
            payload::decode_sql(operation),
            Some(Ok(payload)) if store::shares_a_cycle(&payload.operation)
                && store::is_read_operation(&payload.operation)
        )
    }

    /// Each maximal run of consecutive batchable statements as one `execute_sql_batch` (one
    /// engine batch, shared scan cycles), everything else alone, in order.
    fn execute_batch(&mut self, operations: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut results = Vec::with_capacity(operations.len());
        let mut at = 0;
        while at < operations.len() {
            let mut run: Vec<payload::SqlPayload> = Vec::new();
            while let Some(operation) = operations.get(at) {
                match payload::decode_sql(operation) {
                    Some(Ok(payload)) if self.shares_a_cycle(&payload) => {
                        run.push(payload);
                        at += 1;
                    }
                    _ => break,
                }
            }
            if run.is_empty() {
                results.push(self.execute(&operations[at]));
                at += 1;
                continue;
            }
            results.extend(
                self.execute_sql_batch(&run)
                    .iter()
                    .map(|outcomes| encode_outcomes(outcomes)),
            );
        }
        results
    }

    /// A transaction statement refused to wait in the row-lock queue whose gateway awaits
    /// its grant (`store::Store::take_parked`): its parts are kept with it, to wrap its
    /// answer as `execute` would have.
    fn parked(&mut self) -> Option<u64> {
        let ticket = self.store.take_parked()?;
        let parts = self.parked_parts.take().unwrap_or_default();
        self.store.set_parked_reply(
            ticket,
            postcard::to_allocvec(&parts).expect("parts serialise"),
        );
        Some(ticket)
    }

    fn let_go(&mut self, ticket: u64) {
        self.store.let_go_ticket(ticket);
    }

    fn answered(&mut self) -> Vec<(u64, Vec<u8>)> {
        self.store
            .take_answered()
            .into_iter()
            .map(|(ticket, reply, outcome)| {
                let parts: Vec<u32> = postcard::from_bytes(&reply).unwrap_or_default();
                (ticket, encode_outcomes(&answers_by_part(parts, outcome)))
            })
            .collect()
    }

    fn position(&self, key: &[u8]) -> Position {
        if key == payload::SQL_ANCHOR {
            // The tables' key stands for the catalog, which every partition holds: it lies in
            // whatever this partition holds (nowhere once it holds nothing).
            return Position(
                self.arc
                    .intervals()
                    .first()
                    .map_or(0, |interval| interval.0),
            );
        }
        self.placement.position(key)
    }

    /// Skyros-Comm: a share of RESP commands previews on a copy of the keys it touches (SQL
    /// and surveys never: they touch whole tables or every key).
    fn preview(&self, operation: &[u8]) -> Option<Vec<u8>> {
        if payload::decode_sql(operation).is_some() || payload::decode_survey(operation).is_some() {
            return None;
        }
        let share = payload::share_in(operation, &self.arc, &self.placement).ok()?;
        let outcomes = self
            .store
            .kv
            .preview_commands(share.iter().map(|(_, command)| command))?;
        let indexed: Vec<(u32, Outcome)> = share
            .iter()
            .map(|(index, _)| *index)
            .zip(outcomes)
            .collect();
        Some(encode_outcomes(&indexed))
    }

    /// §6.7 basic reads: a share of RESP commands that only read, previewed on the data as it
    /// is (what executing it would answer, `preview`'s path), or a SQL read pinned to
    /// partition keys (`read_sql`); surveys, other SQL and anything that writes go through
    /// the log.
    fn read(&self, operation: &[u8]) -> Option<Vec<u8>> {
        if let Some(sql) = payload::decode_sql(operation) {
            return self
                .read_sql(&sql.ok()?)
                .map(|outcomes| encode_outcomes(&outcomes));
        }
        if payload::decode_survey(operation).is_some() {
            return None;
        }
        let share = payload::share_in(operation, &self.arc, &self.placement).ok()?;
        if share.is_empty() || !share.iter().all(|(_, command)| command.is_read()) {
            return None;
        }
        self.preview(operation)
    }

    /// A write to a key a multi-key command holds is refused (`KvError::Locked`), so the
    /// nilext gate must not acknowledge it early.
    fn executes_as_is(&self, operation: &[u8]) -> bool {
        if self.store.kv.locked_keys() == 0 {
            return true;
        }
        match payload::share_in(operation, &PositionSet::whole(), &self.placement) {
            Ok(share) => share.iter().all(|(_, command)| {
                command
                    .keys()
                    .into_iter()
                    .all(|key| self.store.kv.lock(key).is_none())
            }),
            Err(_) => false,
        }
    }

    // Keyspace cuts (`ecast::partition_keyspace`), driven at replication 1
    // (`ClusterConfig::elastic_groups`).
    fn export(&self, range: &PositionSet) -> Vec<u8> {
        let records: Vec<(&[u8], Vec<u8>)> = self
            .store
            .kv
            .records_after(None)
            .filter(|(key, _)| range.contains(self.placement.position(key)))
            .map(|(key, record)| (key.as_slice(), record))
            .collect();
        // The table rows of the range, with the whole catalog (the receiver may be a group
        // started by this change, which knows no table yet), and the two-phase statements
        // undecided (every partition holds them); the records come first (`record_count`).
        let tables = self
            .store
            .engine
            .copy_where(|schema, row| self.row_in(range, schema, row))
            .snapshot_bytes();
        // Keys reserved by a multi-key command stay reserved where they go (its commit or
        // release follows them there, re-planned at the new configuration).
        let locks = self
            .store
            .kv
            .locks_where(|key| range.contains(self.placement.position(key)));
        // Open transactions: every lock, and the before-images of the range's rows, go with
        // the rows (their end reaches every partition, this one's receiver included).
        let transactions = self
            .store
            .transactions_where(|schema, row| self.row_in(range, schema, row));
        // The keys' write counters: the receiver's become greater than these, so a key WATCH
        // read here and EXEC reserves there is seen as changed (`kv::KvStore::absorb_versions`).
        let versions = self.store.kv.versions();
        postcard::to_allocvec(&(
            records,
            Some(tables),
            &self.store.prepared,
            locks,
            transactions,
            versions,
        ))
        .expect("records serialise")
    }

    fn import(&mut self, records: &[u8]) {
        self.store.forget_prepared_shares();
        type Records = (
            Vec<(Vec<u8>, Vec<u8>)>,
            Option<Vec<u8>>,
            store::prepared::Prepared,
            Vec<(Vec<u8>, kv::Lock)>,
            store::transactions::Transactions,
            Vec<u64>,
        );
        let (records, tables, prepared, locks, transactions, versions): Records =
            postcard::from_bytes(records).unwrap_or_default();
        self.store.kv.absorb_versions(&versions);
        for (key, record) in records {
            // A record that does not decode is dropped (never a panic on received bytes).
            let _ = self.store.kv.insert_record(key, &record);
        }
        for (key, lock) in locks {
            self.store.kv.insert_lock(key, lock);
        }
        if let Some(Ok(tables)) = tables.map(|tables| engine::Engine::from_snapshot(&tables)) {
            self.store.engine.absorb(tables);
        }
        self.store.prepared.absorb(prepared);
        self.store.absorb_transactions(transactions);
    }

    fn retain(&mut self, holds: &PositionSet) {
        // A cut: the store's arc (which shares and surveys are cut to) becomes the holdings.
        self.arc = holds.clone();
        self.store.forget_prepared_shares();
        if holds.is_empty() {
            // Out of the ring: no decision reaches it any more, so the two-phase statements it
            // holds are forgotten; if it joins again, the copies it receives bring those
            // undecided then (kept, such a statement held its tables here for ever: a write to
            // every partition was refused here and run elsewhere; found by the simulator's
            // one-shot SQL workload).
            self.store.prepared = store::prepared::Prepared::default();
        }
        let placement = &self.placement;
        self.store
            .kv
            .remove_where(|key| !holds.contains(placement.position(key)));
        self.store
            .kv
            .remove_locks_where(|key| !holds.contains(placement.position(key)));
        // Open transactions keep the before-images of the rows kept.
        let placement = &self.placement;
        self.store.retain_rows_where(|schema, row| {
            store::rows::holds_row(schema, row, |key| holds.contains(placement.position(key)))
        });
        if holds.is_empty() {
            // Out of the ring, likewise for the open transactions' locks and owners
            // (`Transactions::forget_open`).
            self.store.transactions.forget_open();
        }
    }
}

#[derive(Serialize, Deserialize)]
struct StoreSnapshot {
    arc: PositionSet,
    range_prefixes: Vec<Vec<u8>>,
    /// `store::Store`'s snapshot: the key-value namespace and the tables.
    #[serde(with = "wire::bytes")]
    store: Vec<u8>,
    elastic: bool,
}

impl Serialize for PartitionStore {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        StoreSnapshot {
            arc: self.arc.clone(),
            range_prefixes: self.placement.range_prefixes().to_vec(),
            store: self.store.snapshot(),
            elastic: self.elastic,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for PartitionStore {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let snapshot = StoreSnapshot::deserialize(deserializer)?;
        let mut store = store::Store::new();
        store
            .restore(&snapshot.store)
            .map_err(|error| serde::de::Error::custom(format!("{error:?}")))?;
        let placement =
            KeyPlacement::new(snapshot.range_prefixes).map_err(serde::de::Error::custom)?;
        Ok(PartitionStore {
            arc: snapshot.arc,
            placement,
            store,
            elastic: snapshot.elastic,
            parked_parts: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::record_count;

    /// The failure detector's suspicion of a storage process, delivered to a partition group,
    /// is a SQL statement: ordered with every SQL message of the group (its key is the SQL
    /// anchor), never a barrier to the key-value traffic (unknown keys), and it runs wherever it
    /// is delivered, with no part to answer.
    #[test]
    fn a_suspicion_is_ordered_with_sql_only_and_runs_anywhere() {
        use ecast::PartitionData;
        let mut partition = super::PartitionStore::new(
            placement::PositionSet::whole(),
            crate::payload::KeyPlacement::new(Vec::new()).unwrap(),
        );
        let suspicion = crate::payload::suspicion_payload(placement::ProcessId(3), 7);
        assert_eq!(
            partition.keys(&suspicion),
            ecast::KeySet::of([crate::payload::SQL_ANCHOR.to_vec()])
        );
        assert!(!partition.batchable(&suspicion));
        assert!(partition.read(&suspicion).is_none());
        assert!(super::decode_outcomes(&partition.execute(&suspicion)).is_empty());
    }

    /// `tessera admin`'s key count of a copy is the length `PartitionStore::export` encoded.
    #[test]
    fn a_copy_counts_its_records() {
        for count in [0usize, 1, 127, 128, 300, 70_000] {
            let records: Vec<(&[u8], &[u8])> =
                vec![(b"key".as_slice(), b"value".as_slice()); count];
            let encoded = postcard::to_allocvec(&records).unwrap();
            assert_eq!(record_count(&encoded), count as u64);
        }
        assert_eq!(record_count(&[]), 0, "garbage counts nothing");
    }
}
