//! The five TPC-C transactions (clauses 2.4–2.8) as SQL over one connection, and their inputs
//! (drawn before the first attempt, so a retried transaction repeats the same inputs).
//!
//! Each transaction is `BEGIN` (`READ ONLY` for Order-Status and Stock-Level) … `COMMIT` with
//! the statements of the specification's profile, sent with the simple query protocol (literal
//! values, text results), so any PostgreSQL-protocol server runs them unchanged. New-Order
//! takes its order lines in item order (a common driver choice that lowers deadlocks without
//! changing what the transaction does).

use super::random::{self, Constants};
use super::Scale;
use stdx::Prng;
use tokio_postgres::{Client, SimpleQueryMessage};

/// The transaction types, in the order reports list them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    NewOrder,
    Payment,
    OrderStatus,
    Delivery,
    StockLevel,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::NewOrder,
        Kind::Payment,
        Kind::OrderStatus,
        Kind::Delivery,
        Kind::StockLevel,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::NewOrder => "new_order",
            Kind::Payment => "payment",
            Kind::OrderStatus => "order_status",
            Kind::Delivery => "delivery",
            Kind::StockLevel => "stock_level",
        }
    }

    /// Whether the transaction only reads (Order-Status and Stock-Level): it begins READ ONLY.
    pub fn is_read_only(self) -> bool {
        matches!(self, Kind::OrderStatus | Kind::StockLevel)
    }

    /// The standard mix (clause 5.2.3's minimums, the rest New-Order): 45/43/4/4/4.
    pub fn draw(prng: &mut Prng) -> Kind {
        match prng.below(100) {
            0..45 => Kind::NewOrder,
            45..88 => Kind::Payment,
            88..92 => Kind::OrderStatus,
            92..96 => Kind::Delivery,
            _ => Kind::StockLevel,
        }
    }
}

/// How Payment and Order-Status name their customer (clause 2.5.1.2: 60 % by last name).
#[derive(Clone, Debug)]
pub enum Customer {
    Id(u64),
    Last(String),
}

#[derive(Clone, Debug)]
pub struct Line {
    pub item: u64,
    pub supply_warehouse: u64,
    pub quantity: u64,
}

/// One transaction's inputs.
#[derive(Clone, Debug)]
pub enum Input {
    NewOrder {
        w: u64,
        d: u64,
        c: u64,
        /// In item order; when `rollback`, the last line names an unused item (clause 2.4.1.4).
        lines: Vec<Line>,
        rollback: bool,
    },
    Payment {
        w: u64,
        d: u64,
        customer_w: u64,
        customer_d: u64,
        customer: Customer,
        cents: i64,
    },
    OrderStatus {
        w: u64,
        d: u64,
        customer: Customer,
    },
    Delivery {
        w: u64,
        carrier: u64,
    },
    StockLevel {
        w: u64,
        d: u64,
        threshold: u64,
    },
}

impl Input {
    pub fn kind(&self) -> Kind {
        match self {
            Input::NewOrder { .. } => Kind::NewOrder,
            Input::Payment { .. } => Kind::Payment,
            Input::OrderStatus { .. } => Kind::OrderStatus,
            Input::Delivery { .. } => Kind::Delivery,
            Input::StockLevel { .. } => Kind::StockLevel,
        }
    }
}

/// What a terminal draws: inputs for `kind` at home warehouse `w` of `warehouses`.
pub fn draw(
    kind: Kind,
    w: u64,
    warehouses: u64,
    scale: &Scale,
    constants: &Constants,
    prng: &mut Prng,
) -> Input {
    let other_warehouse = |prng: &mut Prng| -> u64 {
        if warehouses == 1 {
            return w;
        }
        let other = prng.range_inclusive(1, warehouses - 1);
        if other >= w {
            other + 1
        } else {
            other
        }
    };
    let customer_id =
        |prng: &mut Prng| random::nurand(prng, 1023, constants.c_id, 1, scale.customers);
    let customer = |prng: &mut Prng| -> Customer {
        if prng.percent(60) {
            let number = random::nurand(prng, 255, constants.c_last, 0, scale.last_names() - 1);
            Customer::Last(random::last_name(number))
        } else {
            Customer::Id(customer_id(prng))
        }
    };
    match kind {
        Kind::NewOrder => {
            let d = prng.range_inclusive(1, 10);
            let c = customer_id(prng);
            let count = prng.range_inclusive(5, 15);
            let rollback = prng.percent(1);
            let mut lines: Vec<Line> = (0..count)
                .map(|_| Line {
                    item: random::nurand(prng, 8191, constants.ol_i_id, 1, scale.items),
                    supply_warehouse: if warehouses > 1 && prng.percent(1) {
                        other_warehouse(prng)
                    } else {
                        w
                    },
                    quantity: prng.range_inclusive(1, 10),
                })
                .collect();
            lines.sort_by_key(|line| (line.supply_warehouse, line.item));
            if rollback {
                let last = lines.last_mut().expect("at least five lines");
                last.item = scale.items + 1;
            }
            Input::NewOrder {
                w,
                d,
                c,
                lines,
                rollback,
            }
        }
        Kind::Payment => {
            let d = prng.range_inclusive(1, 10);
            let (customer_w, customer_d) = if warehouses == 1 || prng.percent(85) {
                (w, d)
            } else {
                (other_warehouse(prng), prng.range_inclusive(1, 10))
            };
            Input::Payment {
                w,
                d,
                customer_w,
                customer_d,
                customer: customer(prng),
                cents: prng.range_inclusive(100, 500_000) as i64,
            }
        }
        Kind::OrderStatus => Input::OrderStatus {
            w,
            d: prng.range_inclusive(1, 10),
            customer: customer(prng),
        },
        Kind::Delivery => Input::Delivery {
            w,
            carrier: prng.range_inclusive(1, 10),
        },
        Kind::StockLevel => Input::StockLevel {
            w,
            d: prng.range_inclusive(1, 10),
            threshold: prng.range_inclusive(10, 20),
        },
    }
}

/// How a transaction ended without an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    Committed,
    /// New-Order's 1 % that name an unused item and roll back (a completed transaction).
    RolledBack,
}

type Rows = Vec<Vec<Option<String>>>;

/// A statement's rows, each value as text (`None` for NULL).
pub async fn run_sql(client: &Client, sql: &str) -> Result<Rows, tokio_postgres::Error> {
    let messages = client.simple_query(sql).await?;
    Ok(messages
        .iter()
        .filter_map(|message| match message {
            SimpleQueryMessage::Row(row) => Some(
                (0..row.len())
                    .map(|index| row.get(index).map(str::to_string))
                    .collect(),
            ),
            _ => None,
        })
        .collect())
}

/// A statement's failure that is not an error of the server (a missing row the population
/// guarantees, an unparsable value): the driver reports it and the run fails its checks.
#[derive(Debug)]
pub enum Failure {
    Server(tokio_postgres::Error),
    Invariant(String),
}

impl From<tokio_postgres::Error> for Failure {
    fn from(error: tokio_postgres::Error) -> Failure {
        Failure::Server(error)
    }
}

fn field(rows: &Rows, row: usize, column: usize, what: &str) -> Result<String, Failure> {
    rows.get(row)
        .and_then(|values| values.get(column))
        .cloned()
        .flatten()
        .ok_or_else(|| Failure::Invariant(format!("{what}: no value (row {row}, column {column})")))
}

fn integer(rows: &Rows, row: usize, column: usize, what: &str) -> Result<i64, Failure> {
    let text = field(rows, row, column, what)?;
    text.trim()
        .parse()
        .map_err(|_| Failure::Invariant(format!("{what}: {text:?} is not an integer")))
}

fn fixed(rows: &Rows, row: usize, column: usize, places: u32, what: &str) -> Result<i64, Failure> {
    let text = field(rows, row, column, what)?;
    random::parse_fixed(&text, places)
        .ok_or_else(|| Failure::Invariant(format!("{what}: {text:?} is not a decimal")))
}

/// The current time as a TIMESTAMP literal (the terminal's clock, as drivers pass it).
fn now() -> String {
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_micros() as i64);
    let seconds = micros.div_euclid(1_000_000);
    let (days, second_of_day) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        second_of_day / 3600,
        (second_of_day / 60) % 60,
        second_of_day % 60
    )
}

/// Runs one transaction. On `Err` the transaction may be open: the caller rolls it back.
pub async fn execute(client: &Client, input: &Input, isolation: &str) -> Result<Ended, Failure> {
    // Order-Status and Stock-Level are read-only (clauses 2.6, 2.8) and say so, as a driver
    // does: PostgreSQL's SSI then cannot make them the reason another transaction aborts
    // unless a writer committed before their snapshot (docs/bench/tpcc.md).
    let mode = if input.kind().is_read_only() {
        " READ ONLY"
    } else {
        ""
    };
    run_sql(client, &format!("BEGIN ISOLATION LEVEL {isolation}{mode}")).await?;
    let ended = match input {
        Input::NewOrder {
            w,
            d,
            c,
            lines,
            rollback,
        } => new_order(client, *w, *d, *c, lines, *rollback).await?,
        Input::Payment {
            w,
            d,
            customer_w,
            customer_d,
            customer,
            cents,
        } => payment(client, *w, *d, *customer_w, *customer_d, customer, *cents).await?,
        Input::OrderStatus { w, d, customer } => order_status(client, *w, *d, customer).await?,
        Input::Delivery { w, carrier } => delivery(client, *w, *carrier).await?,
        Input::StockLevel { w, d, threshold } => stock_level(client, *w, *d, *threshold).await?,
    };
    match ended {
        Ended::Committed => run_sql(client, "COMMIT").await?,
        Ended::RolledBack => run_sql(client, "ROLLBACK").await?,
    };
    Ok(ended)
}

async fn new_order(
    client: &Client,
    w: u64,
    d: u64,
    c: u64,
    lines: &[Line],
    rollback: bool,
) -> Result<Ended, Failure> {
    let customer = run_sql(
        client,
        &format!(
            "SELECT c_discount, c_last, c_credit FROM customer \
             WHERE c_w_id = {w} AND c_d_id = {d} AND c_id = {c}"
        ),
    )
    .await?;
    let discount = fixed(&customer, 0, 0, 4, "c_discount")?;
    let warehouse = run_sql(
        client,
        &format!("SELECT w_tax FROM warehouse WHERE w_id = {w}"),
    )
    .await?;
    let w_tax = fixed(&warehouse, 0, 0, 4, "w_tax")?;
    let district = run_sql(
        client,
        &format!(
            "SELECT d_tax, d_next_o_id FROM district WHERE d_w_id = {w} AND d_id = {d} FOR UPDATE"
        ),
    )
    .await?;
    let d_tax = fixed(&district, 0, 0, 4, "d_tax")?;
    let o_id = integer(&district, 0, 1, "d_next_o_id")?;
    run_sql(
        client,
        &format!(
            "UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = {w} AND d_id = {d}"
        ),
    )
    .await?;
    let all_local = i64::from(lines.iter().all(|line| line.supply_warehouse == w));
    let entered = now();
    run_sql(
        client,
        &format!(
            "INSERT INTO orders (o_w_id, o_d_id, o_id, o_c_id, o_entry_d, o_carrier_id, \
             o_ol_cnt, o_all_local) VALUES ({w}, {d}, {o_id}, {c}, '{entered}', NULL, {}, \
             {all_local})",
            lines.len()
        ),
    )
    .await?;
    run_sql(
        client,
        &format!("INSERT INTO new_order (no_w_id, no_d_id, no_o_id) VALUES ({w}, {d}, {o_id})"),
    )
    .await?;
    let mut total_cents = 0i64;
    for (index, line) in lines.iter().enumerate() {
        let item = run_sql(
            client,
            &format!(
                "SELECT i_price, i_name, i_data FROM item WHERE i_id = {}",
                line.item
            ),
        )
        .await?;
        if item.is_empty() {
            if rollback && index + 1 == lines.len() {
                return Ok(Ended::RolledBack);
            }
            return Err(Failure::Invariant(format!("item {} is missing", line.item)));
        }
        let price = fixed(&item, 0, 0, 2, "i_price")?;
        let stock = run_sql(
            client,
            &format!(
                "SELECT s_quantity, s_data, s_dist_{d:02} FROM stock \
                 WHERE s_w_id = {} AND s_i_id = {} FOR UPDATE",
                line.supply_warehouse, line.item
            ),
        )
        .await?;
        let quantity = integer(&stock, 0, 0, "s_quantity")?;
        let dist_info = field(&stock, 0, 2, "s_dist")?;
        let ordered = line.quantity as i64;
        let new_quantity = if quantity >= ordered + 10 {
            quantity - ordered
        } else {
            quantity - ordered + 91
        };
        let remote = i64::from(line.supply_warehouse != w);
        run_sql(
            client,
            &format!(
                "UPDATE stock SET s_quantity = {new_quantity}, s_ytd = s_ytd + {ordered}, \
                 s_order_cnt = s_order_cnt + 1, s_remote_cnt = s_remote_cnt + {remote} \
                 WHERE s_w_id = {} AND s_i_id = {}",
                line.supply_warehouse, line.item
            ),
        )
        .await?;
        let amount = ordered * price;
        total_cents += amount;
        run_sql(
            client,
            &format!(
                "INSERT INTO order_line (ol_w_id, ol_d_id, ol_o_id, ol_number, ol_i_id, \
                 ol_supply_w_id, ol_delivery_d, ol_quantity, ol_amount, ol_dist_info) VALUES \
                 ({w}, {d}, {o_id}, {}, {}, {}, NULL, {ordered}, {}, '{dist_info}')",
                index + 1,
                line.item,
                line.supply_warehouse,
                random::money(amount)
            ),
        )
        .await?;
    }
    // The terminal's output (clause 2.4.3.3); computed as the specification says, not stored.
    let _total =
        total_cents as f64 * (1.0 - discount as f64 / 1e4) * (1.0 + (w_tax + d_tax) as f64 / 1e4);
    Ok(Ended::Committed)
}

/// Finds a customer by id or by last name (the middle one of those sorted by first name,
/// clause 2.5.2.2).
async fn find_customer(
    client: &Client,
    w: u64,
    d: u64,
    customer: &Customer,
) -> Result<u64, Failure> {
    match customer {
        Customer::Id(id) => Ok(*id),
        Customer::Last(last) => {
            let rows = run_sql(
                client,
                &format!(
                    "SELECT c_id FROM customer WHERE c_w_id = {w} AND c_d_id = {d} \
                     AND c_last = '{last}' ORDER BY c_first"
                ),
            )
            .await?;
            if rows.is_empty() {
                return Err(Failure::Invariant(format!(
                    "no customer named {last} in warehouse {w} district {d}"
                )));
            }
            let middle = (rows.len() - 1) / 2;
            Ok(integer(&rows, middle, 0, "c_id")? as u64)
        }
    }
}

async fn payment(
    client: &Client,
    w: u64,
    d: u64,
    customer_w: u64,
    customer_d: u64,
    customer: &Customer,
    cents: i64,
) -> Result<Ended, Failure> {
    let amount = random::money(cents);
    run_sql(
        client,
        &format!("UPDATE warehouse SET w_ytd = w_ytd + {amount} WHERE w_id = {w}"),
    )
    .await?;
    let warehouse = run_sql(
        client,
        &format!(
            "SELECT w_street_1, w_street_2, w_city, w_state, w_zip, w_name FROM warehouse \
             WHERE w_id = {w}"
        ),
    )
    .await?;
    let w_name = field(&warehouse, 0, 5, "w_name")?;
    run_sql(
        client,
        &format!("UPDATE district SET d_ytd = d_ytd + {amount} WHERE d_w_id = {w} AND d_id = {d}"),
    )
    .await?;
    let district = run_sql(
        client,
        &format!(
            "SELECT d_street_1, d_street_2, d_city, d_state, d_zip, d_name FROM district \
             WHERE d_w_id = {w} AND d_id = {d}"
        ),
    )
    .await?;
    let d_name = field(&district, 0, 5, "d_name")?;
    let c = find_customer(client, customer_w, customer_d, customer).await?;
    let found = run_sql(
        client,
        &format!(
            "SELECT c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, c_zip, \
             c_phone, c_credit, c_credit_lim, c_discount, c_balance, c_since FROM customer \
             WHERE c_w_id = {customer_w} AND c_d_id = {customer_d} AND c_id = {c} FOR UPDATE"
        ),
    )
    .await?;
    let credit = field(&found, 0, 9, "c_credit")?;
    if credit.trim() == "BC" {
        let data = run_sql(
            client,
            &format!(
                "SELECT c_data FROM customer \
                 WHERE c_w_id = {customer_w} AND c_d_id = {customer_d} AND c_id = {c}"
            ),
        )
        .await?;
        let old = field(&data, 0, 0, "c_data")?;
        let mut new = format!("{c} {customer_d} {customer_w} {d} {w} {amount} | {old}");
        new.truncate(500);
        run_sql(
            client,
            &format!(
                "UPDATE customer SET c_balance = c_balance - {amount}, \
                 c_ytd_payment = c_ytd_payment + {amount}, c_payment_cnt = c_payment_cnt + 1, \
                 c_data = '{new}' \
                 WHERE c_w_id = {customer_w} AND c_d_id = {customer_d} AND c_id = {c}"
            ),
        )
        .await?;
    } else {
        run_sql(
            client,
            &format!(
                "UPDATE customer SET c_balance = c_balance - {amount}, \
                 c_ytd_payment = c_ytd_payment + {amount}, c_payment_cnt = c_payment_cnt + 1 \
                 WHERE c_w_id = {customer_w} AND c_d_id = {customer_d} AND c_id = {c}"
            ),
        )
        .await?;
    }
    let mut h_data = format!("{}    {}", w_name.trim(), d_name.trim());
    h_data.truncate(24);
    run_sql(
        client,
        &format!(
            "INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, \
             h_data) VALUES ({c}, {customer_d}, {customer_w}, {d}, {w}, '{}', {amount}, \
             '{h_data}')",
            now()
        ),
    )
    .await?;
    Ok(Ended::Committed)
}

async fn order_status(
    client: &Client,
    w: u64,
    d: u64,
    customer: &Customer,
) -> Result<Ended, Failure> {
    let c = find_customer(client, w, d, customer).await?;
    let found = run_sql(
        client,
        &format!(
            "SELECT c_balance, c_first, c_middle, c_last FROM customer \
             WHERE c_w_id = {w} AND c_d_id = {d} AND c_id = {c}"
        ),
    )
    .await?;
    fixed(&found, 0, 0, 2, "c_balance")?;
    let order = run_sql(
        client,
        &format!(
            "SELECT o_id, o_carrier_id, o_entry_d FROM orders \
             WHERE o_w_id = {w} AND o_d_id = {d} AND o_c_id = {c} ORDER BY o_id DESC LIMIT 1"
        ),
    )
    .await?;
    // A customer may have no order yet when the population is reduced.
    if let Ok(o_id) = integer(&order, 0, 0, "o_id") {
        run_sql(
            client,
            &format!(
                "SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d \
                 FROM order_line WHERE ol_w_id = {w} AND ol_d_id = {d} AND ol_o_id = {o_id}"
            ),
        )
        .await?;
    }
    Ok(Ended::Committed)
}

async fn delivery(client: &Client, w: u64, carrier: u64) -> Result<Ended, Failure> {
    let delivered = now();
    for d in 1..=10 {
        let oldest = run_sql(
            client,
            &format!(
                "SELECT no_o_id FROM new_order WHERE no_w_id = {w} AND no_d_id = {d} \
                 ORDER BY no_o_id LIMIT 1 FOR UPDATE"
            ),
        )
        .await?;
        // Clause 2.7.4.2: a district without undelivered orders is skipped.
        let Ok(o_id) = integer(&oldest, 0, 0, "no_o_id") else {
            continue;
        };
        run_sql(
            client,
            &format!(
                "DELETE FROM new_order WHERE no_w_id = {w} AND no_d_id = {d} AND no_o_id = {o_id}"
            ),
        )
        .await?;
        let order = run_sql(
            client,
            &format!(
                "SELECT o_c_id FROM orders WHERE o_w_id = {w} AND o_d_id = {d} AND o_id = {o_id}"
            ),
        )
        .await?;
        let c = integer(&order, 0, 0, "o_c_id")?;
        run_sql(
            client,
            &format!(
                "UPDATE orders SET o_carrier_id = {carrier} \
                 WHERE o_w_id = {w} AND o_d_id = {d} AND o_id = {o_id}"
            ),
        )
        .await?;
        run_sql(
            client,
            &format!(
                "UPDATE order_line SET ol_delivery_d = '{delivered}' \
                 WHERE ol_w_id = {w} AND ol_d_id = {d} AND ol_o_id = {o_id}"
            ),
        )
        .await?;
        let sum = run_sql(
            client,
            &format!(
                "SELECT SUM(ol_amount) FROM order_line \
                 WHERE ol_w_id = {w} AND ol_d_id = {d} AND ol_o_id = {o_id}"
            ),
        )
        .await?;
        let cents = fixed(&sum, 0, 0, 2, "SUM(ol_amount)")?;
        run_sql(
            client,
            &format!(
                "UPDATE customer SET c_balance = c_balance + {}, \
                 c_delivery_cnt = c_delivery_cnt + 1 \
                 WHERE c_w_id = {w} AND c_d_id = {d} AND c_id = {c}",
                random::money(cents)
            ),
        )
        .await?;
    }
    Ok(Ended::Committed)
}

async fn stock_level(client: &Client, w: u64, d: u64, threshold: u64) -> Result<Ended, Failure> {
    let district = run_sql(
        client,
        &format!("SELECT d_next_o_id FROM district WHERE d_w_id = {w} AND d_id = {d}"),
    )
    .await?;
    let next = integer(&district, 0, 0, "d_next_o_id")?;
    let low = next - 20;
    let count = run_sql(
        client,
        &format!(
            "SELECT COUNT(DISTINCT s_i_id) FROM order_line, stock \
             WHERE ol_w_id = {w} AND ol_d_id = {d} AND ol_o_id < {next} AND ol_o_id >= {low} \
             AND s_w_id = {w} AND s_i_id = ol_i_id AND s_quantity < {threshold}"
        ),
    )
    .await?;
    integer(&count, 0, 0, "low stock count")?;
    Ok(Ended::Committed)
}
