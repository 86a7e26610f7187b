//! TPC-C's schema (clause 1.3) and initial population (clause 4.3.3.1), loaded with
//! `COPY … FROM STDIN` in chunks over several connections, with a progress bar.
//!
//! The DDL is the specification's. On Tessera (its `version()` says so) each table also gets
//! the placement Sprint gives TPC-C (§6, §7.1, `PLACEMENT`): every warehouse-keyed table
//! (HISTORY included, which has no primary key) partitioned by its warehouse id and co-located
//! with WAREHOUSE, so that a warehouse's rows lie in one partition whatever the table; ITEM
//! held by every partition. A transaction on one home warehouse whose items are all supplied
//! by it then runs at one partition. The five transactions' statements are the same on both.

use super::random::{self, Constants};
use super::Scale;
use futures_util::SinkExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use stdx::Prng;
use tokio_postgres::Client;

/// The nine tables, in creation order.
pub const SCHEMA: [(&str, &str); 9] = [
    (
        "warehouse",
        "w_id INT NOT NULL, w_name VARCHAR(10), w_street_1 VARCHAR(20), w_street_2 VARCHAR(20), \
         w_city VARCHAR(20), w_state CHAR(2), w_zip CHAR(9), w_tax DECIMAL(4,4), \
         w_ytd DECIMAL(12,2), PRIMARY KEY (w_id)",
    ),
    (
        "district",
        "d_w_id INT NOT NULL, d_id INT NOT NULL, d_name VARCHAR(10), d_street_1 VARCHAR(20), \
         d_street_2 VARCHAR(20), d_city VARCHAR(20), d_state CHAR(2), d_zip CHAR(9), \
         d_tax DECIMAL(4,4), d_ytd DECIMAL(12,2), d_next_o_id INT, PRIMARY KEY (d_w_id, d_id)",
    ),
    (
        "customer",
        "c_w_id INT NOT NULL, c_d_id INT NOT NULL, c_id INT NOT NULL, c_first VARCHAR(16), \
         c_middle CHAR(2), c_last VARCHAR(16), c_street_1 VARCHAR(20), c_street_2 VARCHAR(20), \
         c_city VARCHAR(20), c_state CHAR(2), c_zip CHAR(9), c_phone CHAR(16), \
         c_since TIMESTAMP, c_credit CHAR(2), c_credit_lim DECIMAL(12,2), \
         c_discount DECIMAL(4,4), c_balance DECIMAL(12,2), c_ytd_payment DECIMAL(12,2), \
         c_payment_cnt INT, c_delivery_cnt INT, c_data VARCHAR(500), \
         PRIMARY KEY (c_w_id, c_d_id, c_id)",
    ),
    (
        "history",
        "h_c_id INT, h_c_d_id INT, h_c_w_id INT, h_d_id INT, h_w_id INT, h_date TIMESTAMP, \
         h_amount DECIMAL(6,2), h_data VARCHAR(24)",
    ),
    (
        "new_order",
        "no_w_id INT NOT NULL, no_d_id INT NOT NULL, no_o_id INT NOT NULL, \
         PRIMARY KEY (no_w_id, no_d_id, no_o_id)",
    ),
    (
        "orders",
        "o_w_id INT NOT NULL, o_d_id INT NOT NULL, o_id INT NOT NULL, o_c_id INT, \
         o_entry_d TIMESTAMP, o_carrier_id INT, o_ol_cnt INT, o_all_local INT, \
         PRIMARY KEY (o_w_id, o_d_id, o_id)",
    ),
    (
        "order_line",
        "ol_w_id INT NOT NULL, ol_d_id INT NOT NULL, ol_o_id INT NOT NULL, \
         ol_number INT NOT NULL, ol_i_id INT, ol_supply_w_id INT, ol_delivery_d TIMESTAMP, \
         ol_quantity INT, ol_amount DECIMAL(6,2), ol_dist_info CHAR(24), \
         PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number)",
    ),
    (
        "item",
        "i_id INT NOT NULL, i_im_id INT, i_name VARCHAR(24), i_price DECIMAL(5,2), \
         i_data VARCHAR(50), PRIMARY KEY (i_id)",
    ),
    (
        "stock",
        "s_w_id INT NOT NULL, s_i_id INT NOT NULL, s_quantity INT, s_dist_01 CHAR(24), \
         s_dist_02 CHAR(24), s_dist_03 CHAR(24), s_dist_04 CHAR(24), s_dist_05 CHAR(24), \
         s_dist_06 CHAR(24), s_dist_07 CHAR(24), s_dist_08 CHAR(24), s_dist_09 CHAR(24), \
         s_dist_10 CHAR(24), s_ytd INT, s_order_cnt INT, s_remote_cnt INT, s_data VARCHAR(50), \
         PRIMARY KEY (s_w_id, s_i_id)",
    ),
];

/// Tessera's `WITH` options for each table, by name.
pub const PLACEMENT: [(&str, &str); 9] = [
    ("warehouse", "partition_by = w_id"),
    (
        "district",
        "partition_by = d_w_id, colocate_with = warehouse",
    ),
    (
        "customer",
        "partition_by = c_w_id, colocate_with = warehouse",
    ),
    (
        "history",
        "partition_by = h_w_id, colocate_with = warehouse",
    ),
    (
        "new_order",
        "partition_by = no_w_id, colocate_with = warehouse",
    ),
    ("orders", "partition_by = o_w_id, colocate_with = warehouse"),
    (
        "order_line",
        "partition_by = ol_w_id, colocate_with = warehouse",
    ),
    ("item", "placement = everywhere"),
    ("stock", "partition_by = s_w_id, colocate_with = warehouse"),
];

/// The secondary indexes the transactions' non-key lookups use (Payment and Order-Status by
/// last name; Order-Status's newest order of a customer).
pub const INDEXES: [&str; 2] = [
    "CREATE INDEX customer_name ON customer (c_w_id, c_d_id, c_last, c_first)",
    "CREATE INDEX orders_customer ON orders (o_w_id, o_d_id, o_c_id, o_id)",
];

/// The timestamp the population is stamped with (clause 4.3.3.1: "current date and time").
pub const LOAD_TIME: &str = "2026-01-01 00:00:00";

/// Drops and creates the nine tables and their indexes (`placed`: with `PLACEMENT` on Tessera).
/// Whether the tables were placed (asked for, and the server is Tessera).
pub async fn create_schema(client: &Client, placed: bool) -> anyhow::Result<bool> {
    for (table, _) in SCHEMA.iter().rev() {
        client
            .simple_query(&format!("DROP TABLE IF EXISTS {table}"))
            .await
            .map_err(|error| anyhow::anyhow!("DROP TABLE {table}: {}", super::describe(&error)))?;
    }
    let version = client
        .query_one("SELECT version()", &[])
        .await
        .map_err(|error| anyhow::anyhow!("SELECT version(): {}", super::describe(&error)))?;
    let tessera = placed && version.get::<_, String>(0).contains("(Tessera)");
    for (table, columns) in SCHEMA {
        let placement = PLACEMENT
            .iter()
            .find(|(name, _)| *name == table)
            .filter(|_| tessera)
            .map(|(_, options)| format!(" WITH ({options})"))
            .unwrap_or_default();
        client
            .simple_query(&format!("CREATE TABLE {table} ({columns}){placement}"))
            .await
            .map_err(|error| {
                anyhow::anyhow!("CREATE TABLE {table}: {}", super::describe(&error))
            })?;
    }
    for index in INDEXES {
        client
            .simple_query(index)
            .await
            .map_err(|error| anyhow::anyhow!("{index}: {}", super::describe(&error)))?;
    }
    Ok(tessera)
}

/// One unit of loading work: a table's rows for one warehouse (or the items).
#[derive(Clone, Copy, Debug)]
pub enum Part {
    Items,
    /// The warehouse row and its districts.
    Warehouse(u64),
    Stock(u64),
    /// Customers and their history rows.
    Customers(u64),
    /// Orders, their lines and the undelivered new orders.
    Orders(u64),
}

/// The rows a part holds, for the progress bar.
pub fn rows_of(part: Part, scale: &Scale) -> u64 {
    match part {
        Part::Items => scale.items,
        Part::Warehouse(_) => 1 + 10,
        Part::Stock(_) => scale.items,
        Part::Customers(_) => 10 * scale.customers * 2,
        // Orders + about 10 lines each + the new orders.
        Part::Orders(_) => 10 * scale.customers * 12 + 10 * scale.new_orders(),
    }
}

/// Every part of a population of `warehouses`.
pub fn parts(warehouses: u64) -> Vec<Part> {
    let mut parts = vec![Part::Items];
    for warehouse in 1..=warehouses {
        parts.push(Part::Warehouse(warehouse));
        parts.push(Part::Stock(warehouse));
        parts.push(Part::Customers(warehouse));
        parts.push(Part::Orders(warehouse));
    }
    parts
}

/// A COPY of one table in chunks of `chunk` rows, counting rows into `done`.
struct Copier<'a> {
    client: &'a Client,
    table: &'static str,
    columns: &'static str,
    text: String,
    rows: u64,
    chunk: u64,
    done: &'a AtomicU64,
}

impl<'a> Copier<'a> {
    fn new(
        client: &'a Client,
        table: &'static str,
        columns: &'static str,
        chunk: u64,
        done: &'a AtomicU64,
    ) -> Copier<'a> {
        Copier {
            client,
            table,
            columns,
            text: String::new(),
            rows: 0,
            chunk,
            done,
        }
    }

    /// Adds one row (tab-separated fields, `\N` for NULL, no newline).
    async fn row(&mut self, fields: String) -> anyhow::Result<()> {
        self.text.push_str(&fields);
        self.text.push('\n');
        self.rows += 1;
        if self.rows >= self.chunk {
            self.flush().await?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> anyhow::Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        let statement = format!("COPY {} ({}) FROM STDIN", self.table, self.columns);
        let sink = self
            .client
            .copy_in::<_, bytes::Bytes>(statement.as_str())
            .await
            .map_err(|error| anyhow::anyhow!("{statement}: {}", super::describe(&error)))?;
        futures_util::pin_mut!(sink);
        let text = std::mem::take(&mut self.text);
        sink.send(bytes::Bytes::from(text.into_bytes()))
            .await
            .map_err(|error| anyhow::anyhow!("{statement}: {}", super::describe(&error)))?;
        let copied = sink
            .finish()
            .await
            .map_err(|error| anyhow::anyhow!("{statement}: {}", super::describe(&error)))?;
        anyhow::ensure!(
            copied == self.rows,
            "{statement} copied {copied} of {} rows",
            self.rows
        );
        self.done.fetch_add(self.rows, Ordering::Relaxed);
        self.rows = 0;
        Ok(())
    }
}

/// Loads one part. Each part draws from its own generator, so a population is the same
/// whatever order or concurrency the parts load with.
pub async fn load_part(
    client: &Client,
    part: Part,
    scale: &Scale,
    constants: Constants,
    seed: u64,
    chunk: u64,
    done: Arc<AtomicU64>,
) -> anyhow::Result<()> {
    let part_seed = match part {
        Part::Items => 1,
        Part::Warehouse(w) => 10 + 4 * w,
        Part::Stock(w) => 11 + 4 * w,
        Part::Customers(w) => 12 + 4 * w,
        Part::Orders(w) => 13 + 4 * w,
    };
    let mut prng = Prng::new(seed.wrapping_mul(0x9e37_79b9).wrapping_add(part_seed));
    let prng = &mut prng;
    match part {
        Part::Items => {
            let mut copier = Copier::new(
                client,
                "item",
                "i_id, i_im_id, i_name, i_price, i_data",
                chunk,
                &done,
            );
            for i_id in 1..=scale.items {
                let im_id = prng.range_inclusive(1, 10_000);
                let name = random::alphanumeric(prng, 14, 24);
                let price = random::money(prng.range_inclusive(100, 10_000) as i64);
                let data = random::data_with_original(prng);
                copier
                    .row(format!("{i_id}\t{im_id}\t{name}\t{price}\t{data}"))
                    .await?;
            }
            copier.flush().await
        }
        Part::Warehouse(w) => {
            let mut warehouse = Copier::new(
                client,
                "warehouse",
                "w_id, w_name, w_street_1, w_street_2, w_city, w_state, w_zip, w_tax, w_ytd",
                chunk,
                &done,
            );
            let address = random_address(prng);
            let name = random::alphanumeric(prng, 6, 10);
            let tax = random::rate(prng.range_inclusive(0, 2000));
            warehouse
                .row(format!("{w}\t{name}\t{address}\t{tax}\t300000.00"))
                .await?;
            warehouse.flush().await?;
            let mut districts = Copier::new(
                client,
                "district",
                "d_w_id, d_id, d_name, d_street_1, d_street_2, d_city, d_state, d_zip, d_tax, \
                 d_ytd, d_next_o_id",
                chunk,
                &done,
            );
            for d in 1..=10 {
                let address = random_address(prng);
                let name = random::alphanumeric(prng, 6, 10);
                let tax = random::rate(prng.range_inclusive(0, 2000));
                let next = scale.customers + 1;
                districts
                    .row(format!(
                        "{w}\t{d}\t{name}\t{address}\t{tax}\t30000.00\t{next}"
                    ))
                    .await?;
            }
            districts.flush().await
        }
        Part::Stock(w) => {
            let mut stock = Copier::new(
                client,
                "stock",
                "s_w_id, s_i_id, s_quantity, s_dist_01, s_dist_02, s_dist_03, s_dist_04, \
                 s_dist_05, s_dist_06, s_dist_07, s_dist_08, s_dist_09, s_dist_10, s_ytd, \
                 s_order_cnt, s_remote_cnt, s_data",
                chunk,
                &done,
            );
            for i in 1..=scale.items {
                let quantity = prng.range_inclusive(10, 100);
                let mut dists = String::new();
                for _ in 0..10 {
                    dists.push_str(&random::alphanumeric(prng, 24, 24));
                    dists.push('\t');
                }
                let data = random::data_with_original(prng);
                stock
                    .row(format!("{w}\t{i}\t{quantity}\t{dists}0\t0\t0\t{data}"))
                    .await?;
            }
            stock.flush().await
        }
        Part::Customers(w) => {
            let mut customers = Copier::new(
                client,
                "customer",
                "c_w_id, c_d_id, c_id, c_first, c_middle, c_last, c_street_1, c_street_2, \
                 c_city, c_state, c_zip, c_phone, c_since, c_credit, c_credit_lim, c_discount, \
                 c_balance, c_ytd_payment, c_payment_cnt, c_delivery_cnt, c_data",
                chunk,
                &done,
            );
            let mut history = Copier::new(
                client,
                "history",
                "h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data",
                chunk,
                &done,
            );
            for d in 1..=10 {
                for c in 1..=scale.customers {
                    let last = if c <= 1000 {
                        random::last_name((c - 1).min(999))
                    } else {
                        random::last_name(random::nurand(
                            prng,
                            255,
                            constants.c_last,
                            0,
                            scale.last_names() - 1,
                        ))
                    };
                    let first = random::alphanumeric(prng, 8, 16);
                    let address = random_address(prng);
                    let phone = random::numeric(prng, 16);
                    let credit = if prng.percent(10) { "BC" } else { "GC" };
                    let discount = random::rate(prng.range_inclusive(0, 5000));
                    let data = random::alphanumeric(prng, 300, 500);
                    customers
                        .row(format!(
                            "{w}\t{d}\t{c}\t{first}\tOE\t{last}\t{address}\t{phone}\t{LOAD_TIME}\t\
                             {credit}\t50000.00\t{discount}\t-10.00\t10.00\t1\t0\t{data}"
                        ))
                        .await?;
                    let h_data = random::alphanumeric(prng, 12, 24);
                    history
                        .row(format!(
                            "{c}\t{d}\t{w}\t{d}\t{w}\t{LOAD_TIME}\t10.00\t{h_data}"
                        ))
                        .await?;
                }
            }
            customers.flush().await?;
            history.flush().await
        }
        Part::Orders(w) => {
            let mut orders = Copier::new(
                client,
                "orders",
                "o_w_id, o_d_id, o_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local",
                chunk,
                &done,
            );
            let mut lines = Copier::new(
                client,
                "order_line",
                "ol_w_id, ol_d_id, ol_o_id, ol_number, ol_i_id, ol_supply_w_id, ol_delivery_d, \
                 ol_quantity, ol_amount, ol_dist_info",
                chunk,
                &done,
            );
            let mut new_orders = Copier::new(
                client,
                "new_order",
                "no_w_id, no_d_id, no_o_id",
                chunk,
                &done,
            );
            let delivered_below = scale.first_new_order();
            for d in 1..=10 {
                let mut customers: Vec<u64> = (1..=scale.customers).collect();
                prng.shuffle(&mut customers);
                for o in 1..=scale.customers {
                    let delivered = o < delivered_below;
                    let carrier = if delivered {
                        prng.range_inclusive(1, 10).to_string()
                    } else {
                        "\\N".to_string()
                    };
                    let count = prng.range_inclusive(5, 15);
                    let c = customers[(o - 1) as usize];
                    orders
                        .row(format!(
                            "{w}\t{d}\t{o}\t{c}\t{LOAD_TIME}\t{carrier}\t{count}\t1"
                        ))
                        .await?;
                    for number in 1..=count {
                        let item = prng.range_inclusive(1, scale.items);
                        let (delivery, amount) = if delivered {
                            (LOAD_TIME.to_string(), "0.00".to_string())
                        } else {
                            (
                                "\\N".to_string(),
                                random::money(prng.range_inclusive(1, 999_999) as i64),
                            )
                        };
                        let info = random::alphanumeric(prng, 24, 24);
                        lines
                            .row(format!(
                                "{w}\t{d}\t{o}\t{number}\t{item}\t{w}\t{delivery}\t5\t{amount}\t{info}"
                            ))
                            .await?;
                    }
                    if !delivered {
                        new_orders.row(format!("{w}\t{d}\t{o}")).await?;
                    }
                }
            }
            orders.flush().await?;
            lines.flush().await?;
            new_orders.flush().await
        }
    }
}

/// Street 1, street 2, city, state and zip, tab-separated.
fn random_address(prng: &mut Prng) -> String {
    let street_1 = random::alphanumeric(prng, 10, 20);
    let street_2 = random::alphanumeric(prng, 10, 20);
    let city = random::alphanumeric(prng, 10, 20);
    let state = random::state(prng);
    let zip = random::zip(prng);
    format!("{street_1}\t{street_2}\t{city}\t{state}\t{zip}")
}
