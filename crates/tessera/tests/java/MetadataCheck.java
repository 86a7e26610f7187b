import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

/**
 * pgjdbc's DatabaseMetaData against Tessera (issue 20): getTables, getColumns, getPrimaryKeys,
 * getIndexInfo and getImportedKeys/getExportedKeys over a table with a two-column primary key,
 * a DEFAULT, NOT NULL and a two-column secondary index.
 *
 * <p>Usage: java -cp postgresql.jar MetadataCheck.java HOST PORT [USER PASSWORD]. Prints one line per call
 * ("call: rows"); throws (exit status 1) on the first difference from what PostgreSQL answers.
 */
public class MetadataCheck {
    static void expectEqual(Object expected, Object actual, String what) {
        if (!expected.equals(actual)) {
            throw new AssertionError(what + ": expected " + expected + ", got " + actual);
        }
        System.out.println(what + ": " + actual);
    }

    public static void main(String[] args) throws Exception {
        String url = "jdbc:postgresql://" + args[0] + ":" + args[1] + "/tessera";
        Properties properties = new Properties();
        properties.setProperty("user", args.length > 2 ? args[2] : "tessera");
        properties.setProperty("password", args.length > 3 ? args[3] : "");
        try (Connection connection = DriverManager.getConnection(url, properties)) {
            try (Statement statement = connection.createStatement()) {
                statement.execute("CREATE TABLE orders (region TEXT NOT NULL, id BIGINT, "
                        + "note VARCHAR(30) DEFAULT 'none', placed TIMESTAMP, "
                        + "PRIMARY KEY (region, id))");
                statement.execute("CREATE INDEX orders_placed_note ON orders (placed, note)");
            }
            DatabaseMetaData metadata = connection.getMetaData();
            List<String> tables = new ArrayList<>();
            try (ResultSet rows = metadata.getTables(null, "public", "%", new String[] {"TABLE"})) {
                while (rows.next()) {
                    tables.add(rows.getString("TABLE_SCHEM") + "." + rows.getString("TABLE_NAME")
                            + " " + rows.getString("TABLE_TYPE"));
                }
            }
            expectEqual(List.of("public.kv TABLE", "public.orders TABLE"), tables, "getTables");
            List<String> columns = new ArrayList<>();
            try (ResultSet rows = metadata.getColumns(null, "public", "orders", "%")) {
                while (rows.next()) {
                    columns.add(rows.getInt("ORDINAL_POSITION") + " " + rows.getString("COLUMN_NAME")
                            + " " + rows.getString("TYPE_NAME") + "(" + rows.getInt("COLUMN_SIZE")
                            + ") nullable=" + rows.getString("IS_NULLABLE") + " default="
                            + rows.getString("COLUMN_DEF"));
                }
            }
            expectEqual(List.of(
                    "1 region text(2147483647) nullable=NO default=null",
                    "2 id int8(19) nullable=NO default=null",
                    "3 note varchar(30) nullable=YES default='none'::character varying",
                    "4 placed timestamp(29) nullable=YES default=null"),
                    columns, "getColumns");
            List<String> keys = new ArrayList<>();
            try (ResultSet rows = metadata.getPrimaryKeys(null, "public", "orders")) {
                while (rows.next()) {
                    keys.add(rows.getString("COLUMN_NAME") + " #" + rows.getInt("KEY_SEQ") + " "
                            + rows.getString("PK_NAME"));
                }
            }
            expectEqual(List.of("region #1 orders_pkey", "id #2 orders_pkey"), keys,
                    "getPrimaryKeys");
            List<String> indexes = new ArrayList<>();
            try (ResultSet rows = metadata.getIndexInfo(null, "public", "orders", false, false)) {
                while (rows.next()) {
                    indexes.add(rows.getString("INDEX_NAME") + " unique="
                            + !rows.getBoolean("NON_UNIQUE") + " #"
                            + rows.getInt("ORDINAL_POSITION") + " "
                            + rows.getString("COLUMN_NAME") + " " + rows.getString("ASC_OR_DESC"));
                }
            }
            expectEqual(List.of(
                    "orders_pkey unique=true #1 region A",
                    "orders_pkey unique=true #2 id A",
                    "orders_placed_note unique=false #1 placed A",
                    "orders_placed_note unique=false #2 note A"),
                    indexes, "getIndexInfo");
            List<String> unique = new ArrayList<>();
            try (ResultSet rows = metadata.getIndexInfo(null, "public", "orders", true, false)) {
                while (rows.next()) {
                    unique.add(rows.getString("INDEX_NAME") + " " + rows.getString("COLUMN_NAME"));
                }
            }
            expectEqual(List.of("orders_pkey region", "orders_pkey id"), unique,
                    "getIndexInfo unique");
            for (String call : List.of("getImportedKeys", "getExportedKeys")) {
                int count = 0;
                try (ResultSet rows = call.equals("getImportedKeys")
                        ? metadata.getImportedKeys(null, "public", "orders")
                        : metadata.getExportedKeys(null, "public", "orders")) {
                    while (rows.next()) {
                        count++;
                    }
                }
                expectEqual(0, count, call);
            }
            try (Statement statement = connection.createStatement()) {
                statement.execute("DROP TABLE orders");
            }
            System.out.println("done");
        }
    }
}
