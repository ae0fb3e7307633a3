// Client-matrix scenario for Java: MariaDB Connector/J (Debian's
// libmariadb-java). Run by tests/client_matrix.rs once against MariaDB
// directly and once through myplex; the two outputs must be identical byte
// for byte (after the harness replaces the "(conn=N)" connection id that
// Connector/J puts into its messages).
//
// Usage: java -cp CLASSES:mariadb-java-client.jar Scenario VARIANT
//   defaults   Connector/J defaults: FOUND_ROWS (useAffectedRows=false), no
//              multi queries, client-side prepared statements
//   server_ps  useServerPrepStmts=true, useAffectedRows=true,
//              allowMultiQueries=true, useBulkStmts=true
//   rewrite    rewriteBatchedStatements=true, allowMultiQueries=true
// Connection from the environment: CM_HOST CM_PORT CM_USER CM_PASSWORD CM_DB.

import java.sql.CallableStatement;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.SQLWarning;
import java.sql.Statement;
import java.sql.Types;
import java.util.ArrayList;
import java.util.List;

public class Scenario {
    static final StringBuilder OUT = new StringBuilder();

    static void out(String s) {
        OUT.append(s).append('\n');
    }

    static String esc(String s) {
        StringBuilder b = new StringBuilder();
        s.codePoints().forEach(c -> {
            if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
                b.append((char) c);
            } else {
                b.append(String.format("\\u{%x}", c));
            }
        });
        return b.toString();
    }

    static String val(Object v) {
        if (v == null) {
            return "NULL";
        }
        if (v instanceof byte[]) {
            StringBuilder b = new StringBuilder("byte[]:");
            for (byte x : (byte[]) v) {
                b.append(String.format("%02x", x & 0xff));
            }
            return b.toString();
        }
        return v.getClass().getSimpleName() + ":\"" + esc(v.toString()) + "\"";
    }

    static void error(SQLException e) {
        out("  SQLException errorCode=" + e.getErrorCode() + " sqlState=" + e.getSQLState()
                + " class=" + e.getClass().getSimpleName() + " message=\"" + esc(String.valueOf(e.getMessage())) + "\"");
    }

    static void warnings(SQLWarning w) {
        for (; w != null; w = w.getNextWarning()) {
            out("  warning errorCode=" + w.getErrorCode() + " sqlState=" + w.getSQLState()
                    + " message=\"" + esc(String.valueOf(w.getMessage())) + "\"");
        }
    }

    static void resultSet(ResultSet rs) throws SQLException {
        ResultSetMetaData md = rs.getMetaData();
        int n = md.getColumnCount();
        for (int i = 1; i <= n; i++) {
            out("  column name=" + esc(md.getColumnName(i)) + " label=" + esc(md.getColumnLabel(i))
                    + " type=" + md.getColumnType(i) + " typeName=" + md.getColumnTypeName(i)
                    + " class=" + md.getColumnClassName(i) + " precision=" + md.getPrecision(i)
                    + " scale=" + md.getScale(i) + " displaySize=" + md.getColumnDisplaySize(i)
                    + " nullable=" + md.isNullable(i) + " signed=" + md.isSigned(i)
                    + " table=" + esc(md.getTableName(i)) + " catalog=" + esc(md.getCatalogName(i)));
        }
        while (rs.next()) {
            List<String> row = new ArrayList<>();
            for (int i = 1; i <= n; i++) {
                row.add(val(rs.getObject(i)));
            }
            out("  row " + String.join(" | ", row));
        }
        rs.close();
    }

    /** Every result of an executed statement (JDBC's getMoreResults loop). */
    static void results(Statement st, boolean isResultSet) throws SQLException {
        int i = 0;
        while (true) {
            if (isResultSet) {
                out("  result " + i + " resultset");
                resultSet(st.getResultSet());
            } else {
                int count = st.getUpdateCount();
                if (count == -1) {
                    break;
                }
                out("  result " + i + " updateCount=" + count);
            }
            warnings(st.getWarnings());
            st.clearWarnings();
            i++;
            isResultSet = st.getMoreResults();
        }
    }

    static void q(Connection c, String sql) {
        out("execute: " + esc(sql));
        try (Statement st = c.createStatement()) {
            results(st, st.execute(sql));
        } catch (SQLException e) {
            error(e);
        }
    }

    static void insertWithKeys(Connection c, String sql) {
        out("executeUpdate with keys: " + esc(sql));
        try (Statement st = c.createStatement()) {
            int n = st.executeUpdate(sql, Statement.RETURN_GENERATED_KEYS);
            out("  updateCount=" + n);
            try (ResultSet keys = st.getGeneratedKeys()) {
                while (keys.next()) {
                    out("  generated key " + val(keys.getObject(1)));
                }
            }
        } catch (SQLException e) {
            error(e);
        }
    }

    static void prepared(PreparedStatement ps, String what) {
        out("execute prepared: " + what);
        try {
            results(ps, ps.execute());
        } catch (SQLException e) {
            error(e);
        }
    }

    public static void main(String[] args) throws Exception {
        String variant = args.length > 0 ? args[0] : "defaults";
        String opts;
        switch (variant) {
            case "defaults":
                opts = "";
                break;
            case "server_ps":
                opts = "&useServerPrepStmts=true&useAffectedRows=true&allowMultiQueries=true&useBulkStmts=true";
                break;
            case "rewrite":
                opts = "&rewriteBatchedStatements=true&allowMultiQueries=true";
                break;
            default:
                throw new IllegalArgumentException("unknown variant " + variant);
        }
        String url = "jdbc:mariadb://" + System.getenv("CM_HOST") + ":" + System.getenv("CM_PORT") + "/"
                + System.getenv("CM_DB") + "?user=" + System.getenv("CM_USER") + "&password="
                + System.getenv("CM_PASSWORD") + opts;
        out("variant: " + variant);
        try {
            run(url);
        } catch (SQLException e) {
            out("aborted");
            error(e);
        }
        System.out.print(OUT);
    }

    static void run(String url) throws SQLException {
        Connection c;
        try {
            c = DriverManager.getConnection(url);
        } catch (SQLException e) {
            out("connect failed");
            error(e);
            return;
        }
        DatabaseMetaData md = c.getMetaData();
        out("driver: " + md.getDriverName() + " " + md.getDriverVersion());
        out("database: " + md.getDatabaseProductName() + " " + md.getDatabaseProductVersion() + " major="
                + md.getDatabaseMajorVersion() + " minor=" + md.getDatabaseMinorVersion());

        q(c, "SELECT CONNECTION_ID() > 0 AS has_id");
        q(c, "SELECT @@character_set_client, @@character_set_connection, @@character_set_results, "
                + "@@collation_connection, @@autocommit, @@sql_mode, @@session.time_zone");
        q(c, "SHOW SESSION STATUS LIKE 'Compression'");

        q(c, "DROP TABLE IF EXISTS t");
        q(c, "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, n INT, vl VARCHAR(20) CHARACTER SET latin1, "
                + "vu VARCHAR(20) CHARACTER SET utf8mb4, d DECIMAL(10,3), dt DATETIME(6), b BLOB, j JSON)");
        insertWithKeys(c, "INSERT INTO t (n, vl, vu, d, dt, b, j) VALUES (1, 'caf\u00e9', 'na\u00efve \uD83D\uDE00', "
                + "12.345, '2024-02-29 13:14:15.123456', X'00FF10', '{\"a\": [1, 2.5, \"x\"], \"b\": null}'), "
                + "(NULL, NULL, NULL, NULL, NULL, NULL, NULL)");
        q(c, "SELECT LAST_INSERT_ID()");
        q(c, "SELECT * FROM t ORDER BY id");

        q(c, "UPDATE t SET n = n WHERE id = 1");
        q(c, "UPDATE t SET n = 1 WHERE id IN (1, 2)");

        q(c, "SELECT * FROM nosuch");
        q(c, "SELECT CAST('x' AS INT) AS c");
        q(c, "SHOW WARNINGS");

        try (PreparedStatement ps = c.prepareStatement("SELECT id, n, vl, vu, d, dt, b, j FROM t WHERE id = ?")) {
            ps.setInt(1, 1);
            prepared(ps, "id=1");
            ps.setInt(1, 2);
            prepared(ps, "id=2");
        }
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO t (n, vu, d) VALUES (?, ?, ?)",
                Statement.RETURN_GENERATED_KEYS)) {
            ps.setInt(1, 7);
            ps.setString(2, "seven");
            ps.setBigDecimal(3, new java.math.BigDecimal("7.5"));
            prepared(ps, "n=7");
            ps.setInt(1, 8);
            ps.setNull(2, Types.VARCHAR);
            ps.setNull(3, Types.DECIMAL);
            prepared(ps, "n=8");
            try (ResultSet keys = ps.getGeneratedKeys()) {
                while (keys.next()) {
                    out("  generated key " + val(keys.getObject(1)));
                }
            }
            // A batch: bulk (COM_STMT_BULK_EXECUTE), rewritten or one by one,
            // as the variant says.
            out("executeBatch: n=9,10,11");
            for (int n = 9; n <= 11; n++) {
                ps.setInt(1, n);
                ps.setString(2, "b" + n);
                ps.setNull(3, Types.DECIMAL);
                ps.addBatch();
            }
            try {
                int[] counts = ps.executeBatch();
                out("  counts " + java.util.Arrays.toString(counts));
                try (ResultSet keys = ps.getGeneratedKeys()) {
                    while (keys.next()) {
                        out("  generated key " + val(keys.getObject(1)));
                    }
                }
            } catch (SQLException e) {
                error(e);
            }
        }
        q(c, "SELECT LAST_INSERT_ID()");
        q(c, "SELECT id, n, vu FROM t WHERE n BETWEEN 9 AND 11 ORDER BY id");

        // Transactions through the JDBC API, then through SQL.
        c.setAutoCommit(false);
        out("setAutoCommit(false)");
        q(c, "INSERT INTO t (n) VALUES (100)");
        c.commit();
        out("commit");
        q(c, "INSERT INTO t (n) VALUES (200)");
        c.rollback();
        out("rollback");
        c.setAutoCommit(true);
        out("setAutoCommit(true)");
        q(c, "START TRANSACTION");
        q(c, "INSERT INTO t (n) VALUES (300)");
        q(c, "ROLLBACK");
        q(c, "SELECT id, n FROM t WHERE n >= 100 ORDER BY id");

        q(c, "DROP PROCEDURE IF EXISTS p");
        q(c, "CREATE PROCEDURE p(IN a INT, OUT b INT) BEGIN SELECT a AS first; SELECT a + 1 AS second, 'x' AS s; "
                + "SET b = a * 10; END");
        q(c, "CALL p(4, @o)");
        q(c, "SELECT @o");
        try (CallableStatement cs = c.prepareCall("{call p(?, ?)}")) {
            cs.registerOutParameter(2, Types.INTEGER);
            for (int a = 5; a <= 6; a++) {
                cs.setInt(1, a);
                prepared(cs, "call p(" + a + ", ?)");
                try {
                    out("  out b=" + cs.getInt(2));
                } catch (SQLException e) {
                    error(e);
                }
            }
        }

        // Connector/J keeps sending UTF-8; the server then reads latin1.
        q(c, "SET NAMES latin1");
        q(c, "SELECT 'caf\u00e9' AS s, HEX('caf\u00e9') AS h, HEX(vl) FROM t WHERE id = 1");
        q(c, "SELECT @@character_set_client, @@collation_connection");
        q(c, "SET NAMES utf8mb4");

        q(c, "SELECT 1 AS a; SELECT 2 AS b");
        q(c, "SELECT 1 AS a; SELECT * FROM nosuch; SELECT 3 AS c");

        q(c, "SELECT CONNECTION_ID() > 0 AS has_id");
        c.close();
        out("done");
    }
}
