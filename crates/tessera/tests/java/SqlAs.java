// Runs SQL statements as one user through pgjdbc (SCRAM-SHA-256 is pgjdbc's own code) and
// prints one line per step, for crates/tessera/tests/security.rs:
//
//   java -cp target/java/postgresql-42.7.14.jar crates/tessera/tests/java/SqlAs.java \
//       HOST PORT USER PASSWORD SQL...
//
// "connected", then per statement "rows: a,b;c,d" (a query), "count: n" (an update) or
// "error: SQLSTATE message"; a failed connection prints "connect error: SQLSTATE message".
// Statements run in the extended protocol (pgjdbc's default), one after another.

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Properties;

public class SqlAs {
    public static void main(String[] arguments) {
        String url = "jdbc:postgresql://" + arguments[0] + ":" + arguments[1] + "/tessera";
        Properties properties = new Properties();
        properties.setProperty("user", arguments[2]);
        properties.setProperty("password", arguments[3]);
        properties.setProperty("connectTimeout", "10");
        properties.setProperty("socketTimeout", "30");
        try (Connection connection = DriverManager.getConnection(url, properties)) {
            System.out.println("connected");
            for (int index = 4; index < arguments.length; index++) {
                System.out.println(run(connection, arguments[index]));
            }
        } catch (SQLException error) {
            System.out.println("connect error: " + error.getSQLState() + " " + error.getMessage());
        }
        System.out.flush();
    }

    static String run(Connection connection, String sql) {
        try (Statement statement = connection.createStatement()) {
            if (!statement.execute(sql)) {
                return "count: " + statement.getUpdateCount();
            }
            StringBuilder rows = new StringBuilder("rows: ");
            try (ResultSet result = statement.getResultSet()) {
                int columns = result.getMetaData().getColumnCount();
                boolean first = true;
                while (result.next()) {
                    if (!first) {
                        rows.append(';');
                    }
                    first = false;
                    for (int column = 1; column <= columns; column++) {
                        if (column > 1) {
                            rows.append(',');
                        }
                        rows.append(result.getString(column));
                    }
                }
            }
            return rows.toString();
        } catch (SQLException error) {
            return "error: " + error.getSQLState() + " " + error.getMessage().replace('\n', ' ');
        }
    }
}
