//! The SQL front end on a client's text: `sql::parse`, planning every statement against a small
//! catalog (an engine holding two tables with rows and an index), running the plan's engine
//! operations on that engine and merging their results (`Execution::finish`), EXPLAIN, COPY
//! data, session commands, and the extended protocol's `prepare` and `bind` with text
//! parameters.
//!
//! Properties: no panic; every error carries a five-character SQLSTATE; the engine's
//! invariants hold after every statement.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sql::{parse, plan_statement, prepare, Plan, SqlError};
use std::sync::OnceLock;

const CATALOG: &str = "\
CREATE TABLE people (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL, age INT, city TEXT, \
score DOUBLE PRECISION, born DATE, data BYTEA, flag BOOLEAN);
CREATE INDEX people_age ON people (age);
CREATE TABLE accounts (owner TEXT PRIMARY KEY, balance BIGINT NOT NULL) WITH (placement = hash);
INSERT INTO people VALUES (1, 'ada', 36, 'london', 1.5, '1815-12-10', '\\x00ff', true), \
(2, 'bob', 25, NULL, NULL, NULL, NULL, false), (3, 'cy', NULL, 'paris', -0.5, NULL, '', NULL);
INSERT INTO accounts VALUES ('ada', 100), ('bob', -5);";

/// COPY FROM STDIN data given to every COPY the input plans.
const COPY_DATA: &[u8] = b"4\tdee\t1\t\\N\t2.5\t2000-01-01\t\\\\x01\tt\n5\te\n";

struct Session {
    engine: engine::Engine,
    session: sql::Session,
}

fn check(error: &SqlError) {
    assert_eq!(error.code.len(), 5, "{error:?}");
}

impl Session {
    fn run(&mut self, plan: Plan) -> Result<(), SqlError> {
        match plan {
            Plan::Empty => Ok(()),
            Plan::Session(command) => self.session.apply(&command).map(|_| ()),
            Plan::Explain(explain) => {
                let texts = explain
                    .operations
                    .iter()
                    .map(|operation| self.engine.explain(operation))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(SqlError::from)?;
                explain.finish(&[texts]);
                Ok(())
            }
            Plan::CopyIn(copy) => {
                let execution = copy.execution(COPY_DATA)?;
                self.execute(execution)
            }
            Plan::Execute(execution) => self.execute(execution),
            // The SELECT's rows, then the INSERT of them, as the front end runs it.
            Plan::InsertSelect(insert) => {
                let selected = self.finish(insert.select.clone())?;
                let sql::StatementResult::Rows { rows, .. } = selected else {
                    panic!("the SELECT of an INSERT … SELECT answered no rows");
                };
                let execution = insert.execution(rows)?;
                self.execute(execution)
            }
            // UPDATE … FROM / DELETE … USING: the join's SELECT, then the writes by key (the
            // front end runs both in one transaction; here nothing runs between them).
            Plan::WriteFrom(write) => {
                let selected = self.finish(write.select.clone())?;
                let sql::StatementResult::Rows { rows, .. } = selected else {
                    panic!("the SELECT of an UPDATE … FROM answered no rows");
                };
                let execution = write.execution(rows)?;
                self.execute(execution)
            }
        }
    }

    fn execute(&mut self, execution: sql::Execution) -> Result<(), SqlError> {
        self.finish(execution).map(|_| ())
    }

    fn finish(&mut self, execution: sql::Execution) -> Result<sql::StatementResult, SqlError> {
        let results = self.engine.execute_batch(&execution.operations);
        assert_eq!(results.len(), execution.operations.len());
        let outcome = execution.finish(vec![results]);
        if let Err(violation) = self.engine.check_invariants() {
            panic!("engine invariants: {violation}");
        }
        outcome
    }
}

fn base() -> &'static engine::Engine {
    static BASE: OnceLock<engine::Engine> = OnceLock::new();
    BASE.get_or_init(|| {
        let mut session = Session {
            engine: engine::Engine::new(),
            session: sql::Session::new(),
        };
        for statement in parse(CATALOG).expect("the catalog parses") {
            let plan = plan_statement(&statement, &session.engine).expect("the catalog plans");
            session.run(plan).expect("the catalog runs");
        }
        session.engine
    })
}

fuzz_target!(|bytes: &[u8]| {
    let text = String::from_utf8_lossy(bytes);
    let mut session = Session {
        engine: base().clone(),
        session: sql::Session::new(),
    };
    match parse(&text) {
        Err(error) => check(&error),
        Ok(statements) => {
            for statement in statements {
                let planned = plan_statement(&statement, &session.engine);
                if let Err(error) = planned.and_then(|plan| session.run(plan)) {
                    check(&error);
                }
            }
        }
    }
    match prepare(&text, &session.engine, &[]) {
        Err(error) => check(&error),
        Ok(prepared) => {
            let values: Vec<Option<engine::Value>> = prepared
                .parameter_types
                .iter()
                .enumerate()
                .map(|(at, _)| (at % 3 != 2).then(|| engine::Value::Text(at.to_string())))
                .collect();
            match prepared.bind(&session.engine, &values) {
                Err(error) => check(&error),
                Ok(plan) => {
                    if let Err(error) = session.run(plan) {
                        check(&error);
                    }
                }
            }
        }
    }
});
