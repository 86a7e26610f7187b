//! The PostgreSQL front end's extended query protocol against a real client, tokio-postgres:
//! it prepares statements (Parse, Describe), binds every parameter in binary and asks for
//! binary results, copies in, and is refused BEGIN.

use runtime::pg::{serve, PgLimits};
use runtime::sql_backend::LocalBackend;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, NoTls};

async fn connect() -> Client {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    tokio::spawn(serve(
        listener,
        LocalBackend::default(),
        PgLimits::default(),
    ));
    let (client, connection) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user=tessera dbname=tessera"),
        NoTls,
    )
    .await
    .expect("connects");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_statements_with_binary_parameters_and_results() {
    let client = connect().await;
    client
        .batch_execute(
            "CREATE TABLE items (id BIGINT PRIMARY KEY, name TEXT, price DOUBLE PRECISION, \
             stock INT, fresh BOOLEAN, blob BYTEA)",
        )
        .await
        .expect("create");
    let insert = client
        .prepare("INSERT INTO items VALUES ($1, $2, $3, $4, $5, $6)")
        .await
        .expect("prepare insert");
    assert_eq!(
        insert.params(),
        &[
            Type::INT8,
            Type::TEXT,
            Type::FLOAT8,
            Type::INT4,
            Type::BOOL,
            Type::BYTEA
        ]
    );
    for id in 1..=5i64 {
        let name = format!("item {id}");
        let price = id as f64 * 1.5;
        let stock = (id * 10) as i32;
        let fresh = id % 2 == 0;
        let blob: Vec<u8> = vec![0, 1, 2, id as u8];
        let name: Option<&str> = if id == 5 { None } else { Some(&name) };
        let inserted = client
            .execute(&insert, &[&id, &name, &price, &stock, &fresh, &blob])
            .await
            .expect("insert");
        assert_eq!(inserted, 1);
    }

    let select = client
        .prepare(
            "SELECT id, name, price, stock, fresh, blob FROM items WHERE price > $1 ORDER BY id",
        )
        .await
        .expect("prepare select");
    assert_eq!(select.params(), &[Type::FLOAT8]);
    assert_eq!(select.columns().len(), 6);
    assert_eq!(select.columns()[2].type_(), &Type::FLOAT8);
    let rows = client.query(&select, &[&3.0f64]).await.expect("select");
    assert_eq!(rows.len(), 3);
    let first = &rows[0];
    assert_eq!(first.get::<_, i64>(0), 3);
    assert_eq!(first.get::<_, Option<String>>(1).as_deref(), Some("item 3"));
    assert_eq!(first.get::<_, f64>(2), 4.5);
    assert_eq!(first.get::<_, i32>(3), 30);
    assert!(!first.get::<_, bool>(4));
    assert_eq!(first.get::<_, Vec<u8>>(5), vec![0, 1, 2, 3]);
    assert_eq!(rows[2].get::<_, Option<String>>(1), None);

    // Unprepared queries with parameters (unnamed statement), UPDATE and DELETE.
    let updated = client
        .execute("UPDATE items SET stock = 0 WHERE fresh = $1", &[&true])
        .await
        .expect("update");
    assert_eq!(updated, 2);
    let deleted = client
        .execute("DELETE FROM items WHERE stock = $1", &[&0i32])
        .await
        .expect("delete");
    assert_eq!(deleted, 2);
    let count = client
        .query_one("SELECT count(*) FROM items", &[])
        .await
        .expect("count");
    assert_eq!(count.get::<_, i64>(0), 3);

    // An error keeps the connection usable, with its SQLSTATE.
    let error = client
        .execute(
            &insert,
            &[&1i64, &"again", &1.0f64, &1i32, &true, &vec![1u8]],
        )
        .await
        .expect_err("duplicate key");
    assert_eq!(error.code(), Some(&SqlState::UNIQUE_VIOLATION));
    let error = client
        .query("SELECT nope FROM items", &[])
        .await
        .expect_err("undefined column");
    assert_eq!(error.code(), Some(&SqlState::UNDEFINED_COLUMN));
    let rows = client
        .query("SELECT id FROM items WHERE id = $1", &[&1i64])
        .await
        .expect("still usable");
    assert_eq!(rows.len(), 1);

    // Simple query protocol from the same client.
    let messages = client
        .simple_query("SELECT name FROM items WHERE id = 1; SELECT 2")
        .await
        .expect("simple query");
    let texts: Vec<String> = messages
        .iter()
        .filter_map(|message| match message {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
            _ => None,
        })
        .collect();
    assert_eq!(texts, vec!["item 1".to_string(), "2".to_string()]);
}

/// A backend without transactions (this test's unreplicated engine) refuses BEGIN (0A000): a
/// driver's transaction fails at once instead of pretending that ROLLBACK will undo its
/// statements. (The cluster's backend runs them: `crates/tessera/tests/sql_transactions.rs`.) Chunked
/// fetching of portals within one Sync is tested at the byte level in `pg_protocol.rs`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn driver_transactions_are_refused_and_change_nothing() {
    let mut client = connect().await;
    client
        .batch_execute("CREATE TABLE numbers (n INT PRIMARY KEY, square BIGINT)")
        .await
        .expect("create");
    client
        .batch_execute("INSERT INTO numbers VALUES (1, 1), (2, 4)")
        .await
        .expect("insert");
    let Err(error) = client.transaction().await else {
        panic!("BEGIN is refused");
    };
    assert_eq!(error.code(), Some(&SqlState::FEATURE_NOT_SUPPORTED));
    let error = client
        .batch_execute("BEGIN; UPDATE numbers SET square = 0; ROLLBACK")
        .await
        .expect_err("BEGIN is refused");
    assert_eq!(error.code(), Some(&SqlState::FEATURE_NOT_SUPPORTED));
    let rows = client
        .query("SELECT n, square FROM numbers ORDER BY n", &[])
        .await
        .expect("select");
    let got: Vec<(i32, i64)> = rows.iter().map(|row| (row.get(0), row.get(1))).collect();
    assert_eq!(got, vec![(1, 1), (2, 4)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_in_through_the_extended_protocol() {
    use copy::send_all;
    let client = connect().await;
    client
        .batch_execute("CREATE TABLE kv (k TEXT PRIMARY KEY, v INT)")
        .await
        .expect("create");
    let copied = send_all(
        &client,
        "COPY kv (k, v) FROM STDIN",
        b"a\t1\nb\t2\nc\t\\N\n",
    )
    .await;
    assert_eq!(copied, 3);
    let rows = client
        .query("SELECT k, v FROM kv ORDER BY k", &[])
        .await
        .expect("select");
    let got: Vec<(String, Option<i32>)> = rows.iter().map(|row| (row.get(0), row.get(1))).collect();
    assert_eq!(
        got,
        vec![
            ("a".to_string(), Some(1)),
            ("b".to_string(), Some(2)),
            ("c".to_string(), None)
        ]
    );
}

/// `copy_in` with one CopyData.
mod copy {
    use futures_util::SinkExt;
    use std::pin::pin;

    pub async fn send_all(client: &tokio_postgres::Client, sql: &str, data: &'static [u8]) -> u64 {
        let sink = client
            .copy_in::<_, &'static [u8]>(sql)
            .await
            .expect("copy in");
        let mut sink = pin!(sink);
        sink.send(data).await.expect("send");
        sink.as_mut().finish().await.expect("finish")
    }
}

/// A backend that caches the catalog as `NodeBackend` does (only `fresh` reads refresh it),
/// over one local engine, counting the fresh reads.
#[derive(Clone, Default)]
struct CachingBackend {
    inner: LocalBackend,
    cache: std::sync::Arc<std::sync::Mutex<Option<runtime::sql_backend::SharedCatalog>>>,
    fresh_reads: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl runtime::sql_backend::SqlBackend for CachingBackend {
    async fn catalog(
        &self,
        fresh: bool,
    ) -> Result<runtime::sql_backend::SharedCatalog, runtime::sql_backend::BackendError> {
        if !fresh {
            if let Some(cached) = self.cache.lock().unwrap().clone() {
                return Ok(cached);
            }
        }
        self.fresh_reads
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let read = self.inner.catalog(true).await?;
        *self.cache.lock().unwrap() = Some(read.clone());
        Ok(read)
    }

    async fn execute(
        &self,
        command: engine::Command,
    ) -> Result<engine::Outcome, runtime::sql_backend::BackendError> {
        self.inner.execute(command).await
    }
}

/// One partition: planned commands run where every other command runs.
impl runtime::pg::RoutedBackend for CachingBackend {}
impl runtime::pg::TransactionBackend for CachingBackend {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_planned_against_a_stale_catalog_is_planned_again_not_run() {
    let backend = CachingBackend::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    tokio::spawn(serve(listener, backend.clone(), PgLimits::default()));
    let (client, connection) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user=tessera dbname=tessera"),
        NoTls,
    )
    .await
    .expect("connects");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
        .batch_execute(
            "CREATE TABLE t (id BIGINT PRIMARY KEY, a TEXT); \
             INSERT INTO t VALUES (1, 'one'), (2, 'two')",
        )
        .await
        .expect("create and insert");
    let select = client
        .prepare("SELECT a FROM t WHERE id = $1")
        .await
        .expect("prepare");
    let rows = client.query(&select, &[&2i64]).await.expect("select");
    assert_eq!(rows[0].get::<_, &str>(0), "two");

    // The catalog changes behind the cache (an index: same columns, another digest); the
    // cache is not refreshed by the DDL itself, so the next bind plans against a stale
    // catalog, its guarded command is refused, and the gateway plans again and runs it.
    let direct = LocalBackend::clone(&backend.inner);
    let index = engine::Command::Execute(engine::Operation::CreateIndex {
        name: "t_a".into(),
        table: "t".into(),
        column: "a".into(),
    });
    let created = runtime::sql_backend::SqlBackend::execute(&direct, index)
        .await
        .expect("index");
    assert!(!matches!(created, engine::Outcome::Error(_)), "{created:?}");
    let before = backend
        .fresh_reads
        .load(std::sync::atomic::Ordering::SeqCst);
    let rows = client.query(&select, &[&1i64]).await.expect("select");
    assert_eq!(rows[0].get::<_, &str>(0), "one");
    let after = backend
        .fresh_reads
        .load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        after,
        before + 1,
        "one stale plan, one fresh read, one rerun"
    );

    // The same through the simple protocol.
    let drop = engine::Command::Execute(engine::Operation::DropTable {
        name: "t".into(),
        if_exists: false,
    });
    runtime::sql_backend::SqlBackend::execute(&direct, drop)
        .await
        .expect("drop");
    let error = client
        .simple_query("SELECT a FROM t")
        .await
        .expect_err("the table is gone, whatever the cache says");
    assert_eq!(error.code(), Some(&SqlState::UNDEFINED_TABLE));
}
