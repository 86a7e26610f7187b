// pgjdbc against one Tessera node: server-side prepared statements in binary mode, and the
// DatabaseMetaData calls tools make. Run with Java's single-file source launcher:
//
//   java -cp target/java/postgresql-42.7.14.jar crates/tessera/tests/java/JdbcCheck.java HOST PORT
//
// Prints "ok: <check>" per passing check and "FAIL: <check>: <reason>" per failing one, then
// "summary: <n> ok, <m> failed"; exits 1 if any check failed (2 if it could not connect).
// Checks run in order on one connection; a failing check does not stop the later ones.
// Driven by crates/tessera/tests/pgjdbc.rs.

import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.Date;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.sql.Types;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.TimeZone;
import org.postgresql.PGConnection;
import org.postgresql.PGResultSetMetaData;
import org.postgresql.PGStatement;

public class JdbcCheck {
    interface Check {
        void run() throws Exception;
    }

    static int passed = 0;
    static int failed = 0;

    static void check(String name, Check body) {
        try {
            body.run();
            passed++;
            System.out.println("ok: " + name);
        } catch (Throwable error) {
            failed++;
            StringBuilder reason = new StringBuilder(String.valueOf(error));
            if (error instanceof SQLException) {
                reason.append(" [SQLState ").append(((SQLException) error).getSQLState()).append(']');
            }
            for (Throwable cause = error.getCause(); cause != null; cause = cause.getCause()) {
                reason.append(" <- ").append(cause);
            }
            System.out.println("FAIL: " + name + ": " + reason.toString().replace('\n', ' '));
            try {
                if (connection.isClosed()) {
                    connection = connect();
                }
            } catch (SQLException reconnecting) {
                System.out.println("could not reconnect: " + reconnecting);
            }
        }
        System.out.flush();
    }

    static void expect(boolean condition, String message) {
        if (!condition) {
            throw new AssertionError(message);
        }
    }

    static void expectEqual(Object expected, Object actual, String what) {
        boolean equal = expected instanceof byte[] && actual instanceof byte[]
                ? Arrays.equals((byte[]) expected, (byte[]) actual)
                : Objects.equals(expected, actual);
        if (!equal) {
            throw new AssertionError(what + ": expected " + show(expected) + ", got " + show(actual));
        }
    }

    static String show(Object value) {
        return value instanceof byte[] ? Arrays.toString((byte[]) value) : String.valueOf(value);
    }

    static final String TABLE = "jdbc_item";
    static final String[] COLUMNS = {
        "id", "qty", "name", "code", "price", "active", "payload", "day", "at"
    };

    /** One row of jdbc_item as Java values (null: SQL NULL). */
    record Item(long id, Integer qty, String name, String code, Double price, Boolean active,
            byte[] payload, Date day, Timestamp at) {}

    static final List<Item> ITEMS = List.of(
            new Item(1L, 10, "anvil", "AN-1", 99.5, true, new byte[] {0, 1, 2, (byte) 0xff},
                    Date.valueOf("2024-02-29"), Timestamp.valueOf("2024-02-29 23:59:58.123456")),
            new Item(2L, -3, "bell 'quoted'", "BE-2", -0.25, false, new byte[] {},
                    Date.valueOf("1999-12-31"), Timestamp.valueOf("2000-01-01 00:00:00")),
            new Item(3L, 2147483647, "candle ünïcödé", null, 1e300, true, new byte[] {(byte) 0x80},
                    Date.valueOf("1970-01-01"), Timestamp.valueOf("1969-12-31 23:59:59.5")),
            new Item(9007199254740993L, null, "drum", "DR-4", null, null, null, null, null),
            new Item(5L, 7, "easel", "EA-5", 12.0, false, "text as bytes".getBytes(),
                    Date.valueOf("2030-06-15"), Timestamp.valueOf("2030-06-15 08:30:00")));

    static String url;
    static Connection connection;

    static Connection connect() throws SQLException {
        return DriverManager.getConnection(url);
    }

    /** A fresh connection: after a failed probe pgjdbc's view of the stream may be broken. */
    static void reconnect() throws SQLException {
        try {
            connection.close();
        } catch (SQLException ignored) {
            // It may be broken already.
        }
        connection = connect();
    }

    public static void main(String[] args) throws Exception {
        // Dates and timestamps without time zone: the JVM's zone must not shift them. UTC keeps
        // the check independent of the machine's zone.
        TimeZone.setDefault(TimeZone.getTimeZone("UTC"));
        String host = args.length > 0 ? args[0] : "127.0.0.1";
        String port = args.length > 1 ? args[1] : "5433";
        String extra = args.length > 2 && !args[2].isEmpty() ? "&" + args[2] : "";
        url = "jdbc:postgresql://" + host + ":" + port
                + "/tessera?user=tessera&prepareThreshold=1&binaryTransfer=true"
                + "&connectTimeout=10&socketTimeout=30" + extra;
        try {
            connection = connect();
        } catch (SQLException error) {
            System.out.println("FAIL: connect " + url + ": " + error + " [SQLState "
                    + error.getSQLState() + "]");
            System.exit(2);
            return;
        }
        System.out.println("ok: connect " + url + " (pgjdbc "
                + connection.getMetaData().getDriverVersion() + ", server "
                + connection.getMetaData().getDatabaseProductVersion() + ")");
        passed++;
        probes();
        run();
        try {
            connection.close();
        } catch (SQLException ignored) {
            // The checks are what matter.
        }
        System.out.println("summary: " + passed + " ok, " + failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }

    interface Setter {
        void set(PreparedStatement statement, int index, Object value) throws SQLException;
    }

    interface Reader {
        Object get(ResultSet rows) throws SQLException;
    }

    /**
     * One JDBC setter on its own: INSERT (id, column) VALUES (?, ?) through a server-prepared
     * statement executed twice, then each row read back through a server-prepared SELECT in
     * binary. `value` null: the setter is a setNull.
     */
    record Probe(String name, String column, Setter setter, Object first, Object second,
            Reader reader, int binary) {}

    // Which standard setters work against this server (the probes decide; the flow below uses
    // the standard setter where its probe passed, and a workaround where it failed).
    static boolean setStringText = true;
    static boolean setStringVarchar = true;
    static boolean setDateWorks = true;
    static boolean setTimestampWorks = true;
    static boolean setNullVarchar = true;
    static boolean setNullTimestamp = true;

    static void probes() throws Exception {
        check("probe table", () -> {
            try (Statement statement = connection.createStatement()) {
                statement.execute("DROP TABLE IF EXISTS jdbc_probe");
                statement.execute("CREATE TABLE jdbc_probe (id BIGINT PRIMARY KEY, qty INT, "
                        + "name TEXT, code VARCHAR(8), price DOUBLE PRECISION, active BOOLEAN, "
                        + "payload BYTEA, day DATE, at TIMESTAMP)");
            }
        });
        List<Probe> probes = List.of(
                new Probe("setLong (BIGINT)", "id", (s, i, v) -> s.setLong(i, (Long) v),
                        -7L, 9007199254740993L, r -> r.getLong(1), 1),
                new Probe("setInt (INT)", "qty", (s, i, v) -> s.setInt(i, (Integer) v),
                        -2147483648, 42, r -> r.getInt(1), 1),
                new Probe("setString (TEXT column)", "name",
                        (s, i, v) -> s.setString(i, (String) v), "tëxt", "", r -> r.getString(1), -1),
                new Probe("setString (VARCHAR column)", "code",
                        (s, i, v) -> s.setString(i, (String) v), "vc", "ü8", r -> r.getString(1), -1),
                new Probe("setDouble (DOUBLE PRECISION)", "price",
                        (s, i, v) -> s.setDouble(i, (Double) v), -1.5e-300, 3.25,
                        r -> r.getDouble(1), 1),
                new Probe("setBoolean (BOOLEAN)", "active",
                        (s, i, v) -> s.setBoolean(i, (Boolean) v), true, false,
                        r -> r.getBoolean(1), -1),
                new Probe("setBytes (BYTEA)", "payload", (s, i, v) -> s.setBytes(i, (byte[]) v),
                        new byte[] {0, (byte) 0xff}, new byte[] {}, r -> r.getBytes(1), 1),
                new Probe("setDate (DATE)", "day", (s, i, v) -> s.setDate(i, (Date) v),
                        Date.valueOf("2024-02-29"), Date.valueOf("1969-07-20"),
                        r -> r.getDate(1), 1),
                new Probe("setTimestamp (TIMESTAMP)", "at",
                        (s, i, v) -> s.setTimestamp(i, (Timestamp) v),
                        Timestamp.valueOf("2024-02-29 23:59:58.123456"),
                        Timestamp.valueOf("1999-12-31 23:59:59"), r -> r.getTimestamp(1), 1),
                new Probe("setNull(INTEGER)", "qty", (s, i, v) -> s.setNull(i, Types.INTEGER),
                        null, null, r -> r.getObject(1), 1),
                new Probe("setNull(VARCHAR) (VARCHAR column)", "code",
                        (s, i, v) -> s.setNull(i, Types.VARCHAR), null, null,
                        r -> r.getObject(1), -1),
                new Probe("setNull(DOUBLE)", "price", (s, i, v) -> s.setNull(i, Types.DOUBLE),
                        null, null, r -> r.getObject(1), 1),
                new Probe("setNull(BINARY)", "payload", (s, i, v) -> s.setNull(i, Types.BINARY),
                        null, null, r -> r.getObject(1), 1),
                new Probe("setNull(DATE)", "day", (s, i, v) -> s.setNull(i, Types.DATE),
                        null, null, r -> r.getObject(1), 1),
                new Probe("setNull(TIMESTAMP)", "at", (s, i, v) -> s.setNull(i, Types.TIMESTAMP),
                        null, null, r -> r.getObject(1), 1));
        long nextId = 1000;
        for (Probe probe : probes) {
            long firstId = nextId++;
            long secondId = nextId++;
            boolean ok = checkOk("probe " + probe.name() + ": server-prepared INSERT twice, "
                    + "read back in binary", () -> {
                boolean key = probe.column().equals("id");
                String sql = key
                        ? "INSERT INTO jdbc_probe (id) VALUES (?)"
                        : "INSERT INTO jdbc_probe (id, " + probe.column() + ") VALUES (?, ?)";
                Object[] values = {probe.first(), probe.second()};
                long[] ids = key
                        ? new long[] {(Long) probe.first(), (Long) probe.second()}
                        : new long[] {firstId, secondId};
                try (PreparedStatement insert = connection.prepareStatement(sql)) {
                    for (int row = 0; row < 2; row++) {
                        if (key) {
                            probe.setter().set(insert, 1, values[row]);
                        } else {
                            insert.setLong(1, ids[row]);
                            probe.setter().set(insert, 2, values[row]);
                        }
                        expectEqual(1, insert.executeUpdate(), "insert count");
                    }
                    expect(insert.unwrap(PGStatement.class).isUseServerPrepare(),
                            "not server-prepared");
                }
                // pgjdbc asks for binary results once it has described the statement: from
                // the second execution of the prepared SELECT on.
                try (PreparedStatement select = connection.prepareStatement(
                        "SELECT " + probe.column() + " FROM jdbc_probe WHERE id = ?")) {
                    int[] order = {0, 0, 1};
                    for (int execution = 0; execution < order.length; execution++) {
                        int row = order[execution];
                        select.setLong(1, ids[row]);
                        try (ResultSet rows = select.executeQuery()) {
                            expect(rows.next(), "no row " + ids[row]);
                            int format = rows.getMetaData().unwrap(PGResultSetMetaData.class)
                                    .getFormat(1);
                            if (execution > 0 && probe.binary() >= 0) {
                                expectEqual(probe.binary(), format, "result format (1: binary) "
                                        + "in execution " + (execution + 1));
                            }
                            Object read = probe.reader().get(rows);
                            expectEqual(values[row], read, probe.column());
                        }
                    }
                }
            });
            switch (probe.name()) {
                case "setString (TEXT column)" -> setStringText = ok;
                case "setString (VARCHAR column)" -> setStringVarchar = ok;
                case "setDate (DATE)" -> setDateWorks = ok;
                case "setTimestamp (TIMESTAMP)" -> setTimestampWorks = ok;
                case "setNull(VARCHAR) (VARCHAR column)" -> setNullVarchar = ok;
                case "setNull(TIMESTAMP)" -> setNullTimestamp = ok;
                default -> { }
            }
            if (!ok) {
                reconnect();
            }
        }
        boolean described = checkOk("probe setString (TEXT and VARCHAR columns) in a "
                + "statement pgjdbc describes first (an untyped parameter: Parse, Describe S, "
                + "ParameterDescription)", () -> {
            try (PreparedStatement insert = connection.prepareStatement(
                    "INSERT INTO jdbc_probe (id, name, code, day) VALUES (?, ?, ?, ?)")) {
                insert.setLong(1, 2000L);
                insert.setString(2, "described");
                insert.setString(3, "vc");
                insert.setObject(4, "2024-01-02", Types.OTHER);
                expectEqual(1, insert.executeUpdate(), "insert count");
            }
        });
        if (!described) {
            // pgjdbc declares setString/setNull(VARCHAR) parameters as varchar (1043); any
            // statement it describes hits the same error: bind strings untyped instead.
            setStringText = false;
            setStringVarchar = false;
            setNullVarchar = false;
            reconnect();
        }
        System.out.println("bindings: TEXT " + (setStringText ? "setString" : WORKAROUND_STRING)
                + ", VARCHAR " + (setStringVarchar ? "setString" : WORKAROUND_STRING)
                + ", DATE " + (setDateWorks ? "setDate" : "setObject(LocalDate)")
                + ", TIMESTAMP " + (setTimestampWorks ? "setTimestamp" : "setObject(LocalDateTime)")
                + ", NULL VARCHAR " + (setNullVarchar ? "setNull(VARCHAR)" : "setNull(OTHER)")
                + ", NULL TIMESTAMP " + (setNullTimestamp ? "setNull(TIMESTAMP)" : "setNull(OTHER)"));
    }

    static final String WORKAROUND_STRING = "setObject(s, Types.OTHER)";

    static void bindText(PreparedStatement statement, int index, String value)
            throws SQLException {
        if (setStringText) statement.setString(index, value);
        else statement.setObject(index, value, Types.OTHER);
    }

    static void bindVarchar(PreparedStatement statement, int index, String value)
            throws SQLException {
        if (value == null) {
            statement.setNull(index, setNullVarchar ? Types.VARCHAR : Types.OTHER);
        } else if (setStringVarchar) {
            statement.setString(index, value);
        } else {
            statement.setObject(index, value, Types.OTHER);
        }
    }

    static void bindDate(PreparedStatement statement, int index, Date value) throws SQLException {
        if (value == null) statement.setNull(index, Types.DATE);
        else if (setDateWorks) statement.setDate(index, value);
        else statement.setObject(index, value.toLocalDate());
    }

    static void bindTimestamp(PreparedStatement statement, int index, Timestamp value)
            throws SQLException {
        if (value == null) {
            statement.setNull(index, setNullTimestamp ? Types.TIMESTAMP : Types.OTHER);
        } else if (setTimestampWorks) {
            statement.setTimestamp(index, value);
        } else {
            statement.setObject(index, value.toLocalDateTime());
        }
    }

    static boolean checkOk(String name, Check body) {
        int before = failed;
        check(name, body);
        return failed == before;
    }

    static void run() throws Exception {
        check("prepareThreshold=1 is in effect", () -> {
            expectEqual(1, connection.unwrap(PGConnection.class).getPrepareThreshold(),
                    "connection prepareThreshold");
        });

        check("CREATE TABLE with BIGINT/INT/TEXT/VARCHAR/DOUBLE PRECISION/BOOLEAN/BYTEA/DATE/"
                + "TIMESTAMP and a primary key", () -> {
            try (Statement statement = connection.createStatement()) {
                statement.execute("DROP TABLE IF EXISTS " + TABLE);
                statement.execute("CREATE TABLE " + TABLE + " (id BIGINT PRIMARY KEY, qty INT, "
                        + "name TEXT NOT NULL, code VARCHAR(8), price DOUBLE PRECISION, "
                        + "active BOOLEAN, payload BYTEA, day DATE, at TIMESTAMP)");
            }
        });

        check("INSERT through one server-prepared statement executed " + ITEMS.size()
                + " times (setLong/setInt/setDouble/setBoolean/setBytes/setNull and the string, "
                + "date and timestamp bindings)", () -> {
            try (PreparedStatement insert = connection.prepareStatement("INSERT INTO " + TABLE
                    + " (id, qty, name, code, price, active, payload, day, at) "
                    + "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")) {
                for (Item item : ITEMS) {
                    insert.setLong(1, item.id());
                    if (item.qty() == null) insert.setNull(2, Types.INTEGER);
                    else insert.setInt(2, item.qty());
                    bindText(insert, 3, item.name());
                    bindVarchar(insert, 4, item.code());
                    if (item.price() == null) insert.setNull(5, Types.DOUBLE);
                    else insert.setDouble(5, item.price());
                    if (item.active() == null) insert.setNull(6, Types.BOOLEAN);
                    else insert.setBoolean(6, item.active());
                    if (item.payload() == null) insert.setNull(7, Types.BINARY);
                    else insert.setBytes(7, item.payload());
                    bindDate(insert, 8, item.day());
                    bindTimestamp(insert, 9, item.at());
                    expectEqual(1, insert.executeUpdate(), "insert count of id " + item.id());
                }
                expect(insert.unwrap(PGStatement.class).isUseServerPrepare(),
                        "the INSERT did not use a server-side prepared statement");
            }
        });
        check("SELECT * through a server-prepared statement: from its second execution every "
                + "int8/int4/float8/bytea/date/timestamp column arrives in binary and every value reads back equal", () -> {
            try (PreparedStatement select = connection.prepareStatement(
                    "SELECT id, qty, name, code, price, active, payload, day, at FROM " + TABLE
                    + " WHERE id = ?")) {
                for (int round = 0; round < 2; round++) {
                    for (Item item : ITEMS) {
                        select.setLong(1, item.id());
                        try (ResultSet rows = select.executeQuery()) {
                            expect(rows.next(), "no row for id " + item.id());
                            if (round > 0 || item != ITEMS.get(0)) {
                                expectBinary(rows, COLUMNS.length);
                            }
                            expectItem(item, rows);
                            expect(!rows.next(), "two rows for id " + item.id());
                        }
                    }
                }
                expect(select.unwrap(PGStatement.class).isUseServerPrepare(),
                        "the SELECT did not use a server-side prepared statement");
            }
        });

        check("SELECT with non-key predicates (qty > ?, active = ?, name LIKE ?, day < ?, "
                + "code IS NULL) and parameters of each type", () -> {
            try (PreparedStatement select = connection.prepareStatement(
                    "SELECT id, qty, name, code, price, active, payload, day, at FROM " + TABLE
                    + " WHERE qty > ? AND active = ? ORDER BY id")) {
                select.setInt(1, 0);
                select.setBoolean(2, true);
                expectIds(select, 1L, 3L);
                select.setInt(1, -100);
                select.setBoolean(2, false);
                expectIds(select, 2L, 5L);
            }
            try (PreparedStatement select = connection.prepareStatement(
                    "SELECT id, qty, name, code, price, active, payload, day, at FROM " + TABLE
                    + " WHERE price >= ? AND day < ? ORDER BY id")) {
                select.setDouble(1, -1.0);
                bindDate(select, 2, Date.valueOf("2025-01-01"));
                expectIds(select, 1L, 2L, 3L);
            }
            try (PreparedStatement select = connection.prepareStatement(
                    "SELECT id, qty, name, code, price, active, payload, day, at FROM " + TABLE
                    + " WHERE name LIKE ? OR at > ? ORDER BY id")) {
                bindText(select, 1, "d%");
                bindTimestamp(select, 2, Timestamp.valueOf("2029-01-01 00:00:00"));
                expectIds(select, 5L, 9007199254740993L);
            }
            try (PreparedStatement select = connection.prepareStatement(
                    "SELECT id FROM " + TABLE + " WHERE code IS NULL AND payload = ?")) {
                select.setBytes(1, new byte[] {(byte) 0x80});
                expectIds(select, 3L);
            }
        });

        check("aggregates through a server-prepared statement (count, sum, min, max)",
                () -> {
            try (PreparedStatement select = connection.prepareStatement(
                    "SELECT count(*), sum(qty), min(price), max(day) FROM " + TABLE
                    + " WHERE id < ?")) {
                select.setLong(1, 100L);
                try (ResultSet rows = select.executeQuery()) {
                    expect(rows.next(), "no aggregate row");
                    expectEqual(4L, rows.getLong(1), "count(*)");
                    expectEqual(10L + -3 + 2147483647L + 7, rows.getLong(2), "sum(qty)");
                    expectEqual(-0.25, rows.getDouble(3), "min(price)");
                    expectEqual(Date.valueOf("2030-06-15"), rows.getDate(4), "max(day)");
                }
            }
        });

        check("UPDATE with parameters and non-key predicates returns its update count", () -> {
            try (PreparedStatement update = connection.prepareStatement("UPDATE " + TABLE
                    + " SET price = ?, code = ?, at = ? WHERE active = ? AND qty < ?")) {
                update.setDouble(1, 42.0);
                bindVarchar(update, 2, "UPD");
                bindTimestamp(update, 3, Timestamp.valueOf("2001-02-03 04:05:06.7"));
                update.setBoolean(4, false);
                update.setInt(5, 100);
                expectEqual(2, update.executeUpdate(), "rows updated (ids 2, 5)");
                update.setDouble(1, 0.0);
                bindVarchar(update, 2, "NONE");
                bindTimestamp(update, 3, null);
                update.setBoolean(4, true);
                update.setInt(5, -1000);
                expectEqual(0, update.executeUpdate(), "rows updated by a predicate nobody meets");
            }
            try (PreparedStatement select = connection.prepareStatement(
                    "SELECT price, code, at FROM " + TABLE + " WHERE id = ?")) {
                select.setLong(1, 5L);
                try (ResultSet rows = select.executeQuery()) {
                    expect(rows.next(), "no row 5");
                    expectEqual(42.0, rows.getDouble(1), "updated price");
                    expectEqual("UPD", rows.getString(2), "updated code");
                    expectEqual(Timestamp.valueOf("2001-02-03 04:05:06.7"), rows.getTimestamp(3),
                            "updated at");
                }
            }
        });

        check("DELETE with parameters returns its update count", () -> {
            try (PreparedStatement delete = connection.prepareStatement(
                    "DELETE FROM " + TABLE + " WHERE name = ? OR qty IS NULL")) {
                bindText(delete, 1, "anvil");
                expectEqual(2, delete.executeUpdate(), "rows deleted (ids 1, 9007199254740993)");
                bindText(delete, 1, "nobody");
                expectEqual(0, delete.executeUpdate(), "rows deleted the second time");
            }
            try (PreparedStatement count = connection.prepareStatement(
                    "SELECT count(*) FROM " + TABLE + " WHERE id > ?")) {
                count.setLong(1, 0L);
                try (ResultSet rows = count.executeQuery()) {
                    expect(rows.next(), "no count row");
                    expectEqual(3L, rows.getLong(1), "rows left");
                }
            }
        });

        check("a duplicate key raises SQLState 23505 and the connection stays usable", () -> {
            try (PreparedStatement insert = connection.prepareStatement(
                    "INSERT INTO " + TABLE + " (id, name) VALUES (?, ?)")) {
                insert.setLong(1, 2L);
                bindText(insert, 2, "duplicate");
                try {
                    insert.executeUpdate();
                    throw new AssertionError("a duplicate key was inserted");
                } catch (SQLException error) {
                    expectEqual("23505", error.getSQLState(),
                            "SQLState of the duplicate key (" + error.getMessage() + ")");
                }
                insert.setLong(1, 6L);
                bindText(insert, 2, "after the error");
                expectEqual(1, insert.executeUpdate(), "insert after the error");
            }
            try (PreparedStatement select = connection.prepareStatement(
                    "SELECT name FROM " + TABLE + " WHERE id = ?")) {
                select.setLong(1, 6L);
                try (ResultSet rows = select.executeQuery()) {
                    expect(rows.next(), "the row inserted after the error is missing");
                    expectEqual("after the error", rows.getString(1), "name");
                }
            }
        });

        DatabaseMetaData metadata = connection.getMetaData();

        check("DatabaseMetaData.getTables finds the table", () -> {
            try (ResultSet tables = metadata.getTables(null, null, TABLE, new String[] {"TABLE"})) {
                List<String> found = new ArrayList<>();
                while (tables.next()) {
                    found.add(tables.getString("TABLE_SCHEM") + "." + tables.getString("TABLE_NAME")
                            + " " + tables.getString("TABLE_TYPE"));
                }
                expectEqual(List.of("public." + TABLE + " TABLE"), found, "getTables");
            }
        });

        check("DatabaseMetaData.getColumns lists the columns, in order, with their types", () -> {
            String[][] expected = {
                {"id", "int8", String.valueOf(Types.BIGINT), "0"},
                {"qty", "int4", String.valueOf(Types.INTEGER), "1"},
                {"name", "text", String.valueOf(Types.VARCHAR), "0"},
                {"code", "varchar", String.valueOf(Types.VARCHAR), "1"},
                {"price", "float8", String.valueOf(Types.DOUBLE), "1"},
                {"active", "bool", String.valueOf(Types.BIT), "1"},
                {"payload", "bytea", String.valueOf(Types.BINARY), "1"},
                {"day", "date", String.valueOf(Types.DATE), "1"},
                {"at", "timestamp", String.valueOf(Types.TIMESTAMP), "1"},
            };
            try (ResultSet columns = metadata.getColumns(null, "public", TABLE, null)) {
                List<String> found = new ArrayList<>();
                while (columns.next()) {
                    found.add(columns.getString("COLUMN_NAME") + " "
                            + columns.getString("TYPE_NAME") + " " + columns.getInt("DATA_TYPE")
                            + " " + columns.getInt("NULLABLE") + " #"
                            + columns.getInt("ORDINAL_POSITION")
                            + ("code".equals(columns.getString("COLUMN_NAME"))
                                    ? " size " + columns.getInt("COLUMN_SIZE") : ""));
                }
                List<String> wanted = new ArrayList<>();
                for (int index = 0; index < expected.length; index++) {
                    String[] column = expected[index];
                    wanted.add(column[0] + " " + column[1] + " " + column[2] + " " + column[3]
                            + " #" + (index + 1) + ("code".equals(column[0]) ? " size 8" : ""));
                }
                expectEqual(wanted, found, "getColumns");
            }
        });

        check("DatabaseMetaData.getPrimaryKeys returns the key", () -> {
            try (ResultSet keys = metadata.getPrimaryKeys(null, "public", TABLE)) {
                List<String> found = new ArrayList<>();
                while (keys.next()) {
                    found.add(keys.getString("TABLE_NAME") + "." + keys.getString("COLUMN_NAME")
                            + " #" + keys.getInt("KEY_SEQ"));
                }
                expectEqual(List.of(TABLE + ".id #1"), found, "getPrimaryKeys");
            }
        });

        check("the connection is still usable at the end", () -> {
            try (PreparedStatement select = connection.prepareStatement(
                    "SELECT count(*) FROM " + TABLE + " WHERE qty >= ? OR qty IS NULL")) {
                select.setInt(1, -1000);
                try (ResultSet rows = select.executeQuery()) {
                    expect(rows.next(), "no count row");
                    expectEqual(4L, rows.getLong(1), "rows");
                }
            }
        });
    }

    /** The types pgjdbc 42.7 receives in binary once a statement is described (not text,
     *  varchar or bool: their text form is what it uses). */
    static final java.util.Set<String> BINARY_TYPES =
            java.util.Set.of("int8", "int4", "float8", "bytea", "date", "timestamp");

    /** Every result column of a type in BINARY_TYPES arrived in binary format. */
    static void expectBinary(ResultSet rows, int count) throws SQLException {
        PGResultSetMetaData metadata = rows.getMetaData().unwrap(PGResultSetMetaData.class);
        List<String> text = new ArrayList<>();
        for (int column = 1; column <= count; column++) {
            String type = rows.getMetaData().getColumnTypeName(column);
            if (BINARY_TYPES.contains(type) && metadata.getFormat(column) != 1) {
                text.add(rows.getMetaData().getColumnName(column) + " (" + type + ")");
            }
        }
        expect(text.isEmpty(), "columns not in binary format: " + text);
    }

    static void expectItem(Item item, ResultSet rows) throws SQLException {
        String id = "id " + item.id() + ": ";
        expectEqual(item.id(), rows.getLong("id"), id + "id");
        expectEqual(item.qty(), rows.getObject("qty", Integer.class), id + "qty");
        expectEqual(item.name(), rows.getString("name"), id + "name");
        expectEqual(item.code(), rows.getString("code"), id + "code");
        expectEqual(item.price(), rows.getObject("price", Double.class), id + "price");
        expectEqual(item.active(), rows.getObject("active", Boolean.class), id + "active");
        expectEqual(item.payload(), rows.getBytes("payload"), id + "payload");
        expectEqual(item.day(), rows.getDate("day"), id + "day");
        expectEqual(item.at(), rows.getTimestamp("at"), id + "at");
        // getObject's default mapping, as ORMs read values.
        expectEqual(item.id(), rows.getObject("id"), id + "getObject(id)");
        expectEqual(item.qty(), rows.getObject("qty"), id + "getObject(qty)");
    }

    /** Runs the query twice: the second execution must arrive in binary (see probes). */
    static void expectIds(PreparedStatement select, Long... ids) throws SQLException {
        for (int execution = 0; execution < 2; execution++) {
            List<Long> found = new ArrayList<>();
            try (ResultSet rows = select.executeQuery()) {
                while (rows.next()) {
                    found.add(rows.getLong(1));
                    if (execution > 0) {
                        expectBinary(rows, rows.getMetaData().getColumnCount());
                    }
                    if (rows.getMetaData().getColumnCount() == COLUMNS.length) {
                        long id = found.get(found.size() - 1);
                        Item item = ITEMS.stream().filter(i -> i.id() == id).findFirst()
                                .orElseThrow();
                        expectItem(item, rows);
                    }
                }
            }
            expectEqual(List.of(ids), found, "ids");
        }
    }
}
