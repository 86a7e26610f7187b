//! A seeded model of interactive transactions over partitions (`store::transactions`,
//! `docs/internals/sprint.md`): three `Store`s hold the rows of one table by a placement that
//! changes as the run goes (Rubberband moves, done as `runtime::ecast::partition_host` does
//! them: rows and open transactions' before-images copied, then retained), clients run bank
//! transfers and two-read audits as the cluster's gateway does (`plan_statement`: table locks
//! everywhere first, the statement where its keys lie, a wait sent again, a death aborted
//! everywhere, the end to every partition), while other gateways abort idle transactions and
//! partitions restart from snapshots. Every action is one step of a seeded scheduler, so a
//! failing seed replays exactly.
//!
//! Checked: each audit's two reads are equal and sum to the total; after the run, every
//! balance equals its start plus the committed transfers' changes, no transaction is left open
//! and every engine's invariants hold. A second workload, list-append (each transaction reads
//! accounts' lists and appends unique values), is judged by an Elle-style dependency-graph
//! checker (`elle`: G0, G1a, G1b, G1c, G-single/G2, with real-time edges). Canaries prove the
//! checks catch real bugs: reads without locks (lost updates; dependency cycles), and moves
//! that leave the before-images behind (an abort after a move cannot undo the moved rows).

use engine::{
    Assignment, ColumnDef, Command, DataType, EngineError, OnConflict, Operation, Outcome, Output,
    Predicate, TableSchema, Value,
};
use lincheck::elle::{self, Committed, Micro};
use std::collections::{BTreeMap, HashMap};
use store::transactions::{plan_statement, LockRequest, TransactionStatement};
use store::{end_operation, lock_operation, rows, sql_operation, transaction_operation, Store};

const PARTITIONS: usize = 3;
const ACCOUNTS: i64 = 6;
const BALANCE: i64 = 100;
const CLIENTS: usize = 4;

#[derive(Clone, Copy, Default)]
struct Canaries {
    unlocked_reads: bool,
    moves_drop_before_images: bool,
    /// Not a canary: the list-append workload instead of bank transfers.
    list_append: bool,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// One step of a transaction's script.
#[derive(Clone, Debug)]
enum Step {
    Read(i64),
    /// Write the account: the value read, plus `delta` (computed at the client).
    Write(i64, i64),
    ReadAll,
    /// Append `value` to the account's list: the list read before, plus the value.
    Append(i64, u64),
}

struct Client {
    id: u64,
    begin_ms: u64,
    statements: u64,
    held: BTreeMap<String, store::transactions::Mode>,
    script: Vec<Step>,
    at: usize,
    /// The statement number of the step being sent (kept while it waits).
    sending: Option<u64>,
    reads: BTreeMap<i64, i64>,
    audits: Vec<Vec<Vec<Value>>>,
    deltas: Vec<(i64, i64)>,
    /// Lists read (list-append workload), by account.
    lists: BTreeMap<i64, Vec<u64>>,
    /// List-append operations done, in order.
    history: Vec<Micro>,
    /// The model's clock at its first action (real-time order).
    began: u64,
    /// The account of its first statement: it is local to that account's partition while it
    /// touches no other (as the gateway judges by placement keys; a move takes the account's
    /// locks with its rows).
    first: Option<i64>,
    /// Its `Globalize` was granted everywhere.
    global: bool,
}

fn parse_list(text: &str) -> Vec<u64> {
    text.split(',')
        .filter(|item| !item.is_empty())
        .map(|item| item.parse().unwrap())
        .collect()
}

struct Model {
    stores: Vec<Store>,
    owner: BTreeMap<i64, usize>,
    rng: Rng,
    clock: u64,
    next_id: u64,
    canaries: Canaries,
    committed: Vec<(i64, i64)>,
    /// Committed list-append transactions.
    appends: Vec<Committed>,
    next_value: u64,
    findings: Vec<String>,
}

fn schema() -> TableSchema {
    TableSchema::new(
        "acct",
        vec![
            ColumnDef::new("id", DataType::BigInt).not_null(),
            ColumnDef::new("bal", DataType::BigInt).not_null(),
            ColumnDef::new("list", DataType::Text { length_max: None }).not_null(),
        ],
        &["id"],
    )
    .unwrap()
}

fn key(id: i64) -> Vec<u8> {
    rows::placement_key("acct", &Value::BigInt(id))
}

fn select(predicate: Option<Predicate>) -> Operation {
    Operation::Select {
        table: "acct".into(),
        columns: vec![],
        predicate,
        limit: None,
    }
}

fn refusal(outcome: &Outcome) -> Option<&EngineError> {
    match outcome {
        Outcome::Error(error) => Some(error),
        Outcome::Batch(results) => results.iter().find_map(|result| result.as_ref().err()),
        _ => None,
    }
}

fn rows_of(outcome: &Outcome) -> Vec<Vec<Value>> {
    match outcome {
        Outcome::Batch(results) => results
            .iter()
            .flat_map(|result| match result {
                Ok(Output::Rows { rows, .. }) => rows.clone(),
                _ => Vec::new(),
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// What a client's action came to.
enum Went {
    /// A step ran.
    Done,
    /// Refused for a lock: the same action again later.
    Wait,
    /// Dead (a deadlock, the execution-order rule) or aborted by another gateway: abort and
    /// start over.
    Abort,
    Committed,
}

impl Model {
    fn new(seed: u64, canaries: Canaries) -> Model {
        let mut model = Model {
            stores: (0..PARTITIONS).map(|_| Store::new()).collect(),
            owner: BTreeMap::new(),
            rng: Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1),
            clock: 1_000,
            next_id: 1,
            canaries,
            committed: Vec::new(),
            appends: Vec::new(),
            next_value: 0,
            findings: Vec::new(),
        };
        let create = sql_operation(&Command::Execute(Operation::CreateTable {
            schema: schema(),
        }));
        for store in &mut model.stores {
            store.execute_share(&create, |_| true);
        }
        for id in 0..ACCOUNTS {
            let at = model.rng.below(PARTITIONS as u64) as usize;
            model.owner.insert(id, at);
            let insert = sql_operation(&Command::Execute(Operation::Insert {
                table: "acct".into(),
                columns: vec![],
                rows: vec![vec![
                    Value::BigInt(id),
                    Value::BigInt(BALANCE),
                    Value::Text(String::new()),
                ]],
                on_conflict: OnConflict::Error,
            }));
            model.stores[at].execute_share(&insert, |_| true);
        }
        model
    }

    fn client(&mut self) -> Client {
        let id = self.next_id;
        self.next_id += 1;
        self.clock += 1;
        let script = if self.canaries.list_append {
            let mut script = Vec::new();
            for _ in 0..1 + self.rng.below(3) {
                let id = self.rng.below(ACCOUNTS as u64) as i64;
                script.push(Step::Read(id));
                if self.rng.chance(60) {
                    self.next_value += 1;
                    script.push(Step::Append(id, self.next_value));
                }
            }
            script
        } else if self.rng.chance(30) {
            vec![Step::ReadAll, Step::ReadAll]
        } else {
            let from = self.rng.below(ACCOUNTS as u64) as i64;
            let to = (from + 1 + self.rng.below(ACCOUNTS as u64 - 1) as i64) % ACCOUNTS;
            let amount = 1 + self.rng.below(20) as i64;
            vec![
                Step::Read(from),
                Step::Read(to),
                Step::Write(from, -amount),
                Step::Write(to, amount),
            ]
        };
        Client {
            id,
            begin_ms: self.clock,
            statements: 0,
            held: BTreeMap::new(),
            script,
            at: 0,
            sending: None,
            reads: BTreeMap::new(),
            lists: BTreeMap::new(),
            audits: Vec::new(),
            deltas: Vec::new(),
            history: Vec::new(),
            began: self.clock,
            first: None,
            global: false,
        }
    }

    /// Runs an operation on partitions `at` (their held keys: their rows); the outcomes.
    fn send(&mut self, operation: &[u8], at: &[usize]) -> Vec<Outcome> {
        let owner = self.owner.clone();
        at.iter()
            .map(|&partition| {
                let held = |placement: &[u8]| {
                    (0..ACCOUNTS).any(|id| key(id) == placement && owner[&id] == partition)
                };
                Outcome::decode(&self.stores[partition].execute_share(operation, held)).unwrap()
            })
            .collect()
    }

    fn every(&self) -> Vec<usize> {
        (0..PARTITIONS).collect()
    }

    /// Judges outcomes: a death or an abort by someone else aborts; a lock waits.
    /// A death anywhere wins over a wait elsewhere (the partitions' waits-for graphs differ).
    fn judge(outcomes: &[Outcome]) -> Option<Went> {
        if outcomes.iter().any(|outcome| {
            matches!(
                refusal(outcome),
                Some(EngineError::SerializationFailure { .. })
            )
        }) {
            return Some(Went::Abort);
        }
        for outcome in outcomes {
            match refusal(outcome) {
                Some(EngineError::SerializationFailure { .. }) => return Some(Went::Abort),
                Some(EngineError::TransactionLocked { .. } | EngineError::Busy { .. }) => {
                    return Some(Went::Wait)
                }
                Some(other) => panic!("unexpected refusal {other:?}"),
                None => {}
            }
        }
        None
    }

    /// One action of `client`: the next step (its locks first), or its commit.
    fn act(&mut self, client: &mut Client) -> Went {
        self.clock += 1;
        let Some(step) = client.script.get(client.at).cloned() else {
            return self.commit(client);
        };
        let (operation, keys) = match &step {
            Step::Read(id) => (
                select(Some(Predicate::equal("id", Value::BigInt(*id)))),
                Some(vec![key(*id)]),
            ),
            Step::Write(id, delta) => (
                Operation::Update {
                    table: "acct".into(),
                    assignments: vec![Assignment::new(
                        "bal",
                        Value::BigInt(client.reads[id] + delta),
                    )],
                    predicate: Some(Predicate::equal("id", Value::BigInt(*id))),
                },
                Some(vec![key(*id)]),
            ),
            Step::ReadAll => (select(None), None),
            Step::Append(id, value) => {
                let mut list = client.lists[id].clone();
                list.push(*value);
                let text = list
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(",");
                (
                    Operation::Update {
                        table: "acct".into(),
                        assignments: vec![Assignment::new("list", Value::Text(text))],
                        predicate: Some(Predicate::equal("id", Value::BigInt(*id))),
                    },
                    Some(vec![key(*id)]),
                )
            }
        };
        let command = Command::Batch(vec![operation.clone()]);
        let targets: Vec<usize> = match &step {
            Step::Read(id) | Step::Write(id, _) | Step::Append(id, _) => vec![self.owner[id]],
            Step::ReadAll => self.every(),
        };
        let account = match &step {
            Step::Read(id) | Step::Write(id, _) | Step::Append(id, _) => Some(*id),
            Step::ReadAll => None,
        };
        if client.first.is_none() {
            client.first = account;
        }
        if !client.global && (account.is_none() || account != client.first) {
            if let Some(went) = self.globalize(client) {
                return went;
            }
        }
        let outcomes = if self.canaries.unlocked_reads && command.is_read() {
            // The canary: a read that takes no lock and respects none.
            targets
                .iter()
                .map(|&partition| self.stores[partition].engine.read_command(&command))
                .collect()
        } else {
            let plan = plan_statement(
                &client.held,
                std::slice::from_ref(&operation),
                keys.as_deref(),
                false,
            )
            .unwrap();
            let number = *client.sending.get_or_insert_with(|| {
                client.statements += 1;
                client.statements
            });
            if !plan.everywhere.is_empty() {
                let request = lock_operation(&LockRequest {
                    transaction: client.id,
                    begin_ms: client.begin_ms,
                    now_ms: self.clock,
                    locks: plan.everywhere.clone(),
                    nowait: false,
                });
                let every = self.every();
                let outcomes = self.send(&request, &every);
                if let Some(went) = Model::judge(&outcomes) {
                    if matches!(went, Went::Wait) && !client.global {
                        // Its table locks wait at every partition: it becomes global.
                        return self.globalize(client).unwrap_or(went);
                    }
                    return went;
                }
                store::transactions::hold_tables(&mut client.held, &plan.everywhere);
            }
            let statement = transaction_operation(&TransactionStatement {
                transaction: client.id,
                statement: number,
                begin_ms: client.begin_ms,
                now_ms: self.clock,
                locks: plan.needed,
                nowait: false,
                command: command.encode(),
                savepoint: 0,
                skip_locked: false,
                await_grant: false,
                owner: None,
            });
            self.send(&statement, &targets)
        };
        if let Some(went) = Model::judge(&outcomes) {
            return went;
        }
        client.sending = None;
        let rows: Vec<Vec<Value>> = outcomes.iter().flat_map(rows_of).collect();
        match step {
            Step::Read(id) => {
                let [row] = rows.as_slice() else {
                    panic!("account {id}: {rows:?}");
                };
                let Value::BigInt(balance) = row[1] else {
                    panic!("{row:?}")
                };
                client.reads.insert(id, balance);
                if let Value::Text(text) = &row[2] {
                    let list = parse_list(text);
                    client.lists.insert(id, list.clone());
                    client.history.push(Micro::Read(id, list));
                }
            }
            Step::Append(id, value) => {
                client.lists.get_mut(&id).unwrap().push(value);
                client.history.push(Micro::Append(id, value));
            }
            Step::Write(id, delta) => client.deltas.push((id, delta)),
            Step::ReadAll => {
                let mut rows = rows;
                rows.sort_by_key(|row| format!("{:?}", row[0]));
                client.audits.push(rows);
            }
        }
        client.at += 1;
        Went::Done
    }

    /// `Globalize` at every partition; `Some(Abort)` where one refuses it.
    fn globalize(&mut self, client: &mut Client) -> Option<Went> {
        let every = self.every();
        let outcomes = self.send(&store::globalize_operation(client.id), &every);
        if outcomes.iter().any(|outcome| refusal(outcome).is_some()) {
            return Some(Went::Abort);
        }
        client.global = true;
        None
    }

    fn commit(&mut self, client: &mut Client) -> Went {
        let every = self.every();
        let outcomes = self.send(&end_operation(client.id, true, true), &every);
        if outcomes.iter().any(|outcome| refusal(outcome).is_some()) {
            return Went::Abort; // Aborted by another gateway: the commit was refused.
        }
        client.at += 1;
        self.committed.extend(client.deltas.iter().copied());
        self.appends.push(Committed {
            id: client.id,
            began: client.began,
            ended: self.clock,
            history: client.history.clone(),
        });
        if let [first, second] = client.audits.as_slice() {
            if first != second {
                self.findings
                    .push(format!("audit {}: {first:?} then {second:?}", client.id));
            }
            let total: i64 = first
                .iter()
                .map(|row| match row[1] {
                    Value::BigInt(balance) => balance,
                    _ => 0,
                })
                .sum();
            if total != ACCOUNTS * BALANCE {
                self.findings
                    .push(format!("audit {}: total {total}: {first:?}", client.id));
            }
        }
        Went::Committed
    }

    fn abort(&mut self, client: &Client) {
        let every = self.every();
        self.send(&end_operation(client.id, false, true), &every);
    }

    /// Moves account `id`'s rows from their partition to another, as a keyspace cut does.
    fn move_account(&mut self, id: i64) {
        let from = self.owner[&id];
        let to = (from + 1 + self.rng.below(PARTITIONS as u64 - 1) as usize) % PARTITIONS;
        let moved = |_: &TableSchema, row: &[Value]| row[0] == Value::BigInt(id);
        let tables = self.stores[from].engine.copy_where(moved);
        let transactions = self.stores[from].transactions_where(moved);
        self.stores[to].engine.absorb(tables);
        if !self.canaries.moves_drop_before_images {
            self.stores[to].transactions.absorb(transactions);
        }
        self.owner.insert(id, to);
        self.stores[from].retain_rows_where(|schema, row| !moved(schema, row));
    }

    fn restart(&mut self, partition: usize) {
        use vr::StateMachine;
        let snapshot = self.stores[partition].snapshot();
        let mut store = Store::new();
        store.restore(&snapshot).unwrap();
        self.stores[partition] = store;
    }

    fn balances(&self) -> BTreeMap<i64, i64> {
        let mut balances = BTreeMap::new();
        for store in &self.stores {
            for row in store.engine.table("acct").unwrap().rows.values() {
                if let [Value::BigInt(id), Value::BigInt(balance), _] = row.as_slice() {
                    assert!(
                        balances.insert(*id, *balance).is_none(),
                        "account {id} twice"
                    );
                }
            }
        }
        balances
    }
}

/// Runs one seed; the findings (empty: every check held).
fn run(seed: u64, canaries: Canaries) -> Vec<String> {
    let mut model = Model::new(seed, canaries);
    let mut clients: Vec<Client> = (0..CLIENTS).map(|_| model.client()).collect();
    let mut finished = 0;
    let mut steps = 0;
    while finished < 60 {
        steps += 1;
        assert!(steps < 200_000, "seed {seed}: no progress (livelock?)");
        let faults = finished < 50;
        if faults && model.rng.chance(3) {
            let id = model.rng.below(ACCOUNTS as u64) as i64;
            model.move_account(id);
        }
        if faults && model.rng.chance(1) {
            let partition = model.rng.below(PARTITIONS as u64) as usize;
            model.restart(partition);
        }
        if faults && model.rng.chance(1) {
            // Another gateway aborts some transaction (it idled while blocking a statement).
            let victim = clients[model.rng.below(CLIENTS as u64) as usize].id;
            let every = model.every();
            model.send(&end_operation(victim, false, false), &every);
        }
        let index = model.rng.below(CLIENTS as u64) as usize;
        let mut client = clients.swap_remove(index);
        match model.act(&mut client) {
            Went::Done | Went::Wait => {}
            Went::Committed => {
                finished += 1;
                client = model.client();
            }
            Went::Abort => {
                model.abort(&client);
                client = model.client();
            }
        }
        clients.push(client);
    }
    // Let every open transaction end (abort: nothing of theirs is committed).
    for client in &clients {
        model.abort(client);
    }
    let mut findings = model.findings.clone();
    let mut expected: BTreeMap<i64, i64> = (0..ACCOUNTS).map(|id| (id, BALANCE)).collect();
    for (id, delta) in &model.committed {
        *expected.get_mut(id).unwrap() += delta;
    }
    if canaries.list_append {
        let mut finals = BTreeMap::new();
        for store in &model.stores {
            for row in store.engine.table("acct").unwrap().rows.values() {
                if let [Value::BigInt(id), _, Value::Text(list)] = row.as_slice() {
                    finals.insert(*id, parse_list(list));
                }
            }
        }
        findings.extend(elle::check(&model.appends, &finals));
    }
    let balances = model.balances();
    if balances != expected {
        findings.push(format!(
            "seed {seed}: balances {balances:?} != committed transfers' {expected:?}"
        ));
    }
    for (partition, store) in model.stores.iter().enumerate() {
        store.engine.check_invariants().unwrap();
        assert!(
            store.transactions.is_empty(),
            "seed {seed}: partition {partition} keeps {} transactions",
            store.transactions.len()
        );
    }
    findings
}

#[test]
fn list_appends_have_no_dependency_cycle_under_moves_restarts_and_aborts() {
    let list_append = Canaries {
        list_append: true,
        ..Canaries::default()
    };
    for seed in 1..=300 {
        let findings = run(seed, list_append);
        assert!(findings.is_empty(), "seed {seed}: {findings:?}");
    }
}

#[test]
fn canary_unlocked_reads_make_dependency_cycles() {
    let canary = Canaries {
        list_append: true,
        unlocked_reads: true,
        ..Canaries::default()
    };
    let caught = (1..=100).find(|&seed| {
        run(seed, canary)
            .iter()
            .any(|finding| finding.contains("cycle") || finding.starts_with("lost"))
    });
    assert!(
        caught.is_some(),
        "no seed of 100 found a cycle with unlocked reads"
    );
}

#[test]
fn transfers_and_audits_stay_serialisable_under_moves_restarts_and_aborts() {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for seed in 1..=500 {
        let findings = run(seed, Canaries::default());
        assert!(findings.is_empty(), "seed {seed}: {findings:?}");
        *counts.entry("seeds").or_default() += 1;
    }
    assert_eq!(counts["seeds"], 500);
}

#[test]
fn canary_unlocked_reads_lose_updates() {
    let caught = (1..=200).find(|&seed| {
        !run(
            seed,
            Canaries {
                unlocked_reads: true,
                ..Canaries::default()
            },
        )
        .is_empty()
    });
    assert!(
        caught.is_some(),
        "no seed of 200 caught reads without locks"
    );
}

#[test]
fn canary_moves_that_drop_before_images_are_caught() {
    let caught = (1..=200).find(|&seed| {
        !run(
            seed,
            Canaries {
                moves_drop_before_images: true,
                ..Canaries::default()
            },
        )
        .is_empty()
    });
    assert!(caught.is_some(), "no seed of 200 caught lost before-images");
}
