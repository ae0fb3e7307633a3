import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;

/**
 * One Connector/J session kept open while myplex is upgraded
 * (tests/takeover.rs): see tests/clients/python/upgrade_loop.py for the
 * contract. useServerPrepStmts: the statement is prepared on the server.
 */
public class UpgradeLoop {
    public static void main(String[] args) throws Exception {
        String url = "jdbc:mariadb://" + System.getenv("UL_HOST") + ":" + System.getenv("UL_PORT") + "/"
                + System.getenv("UL_DB") + "?useServerPrepStmts=true";
        Path stop = Path.of(System.getenv("UL_STOP"));
        long n = 0;
        try (Connection c = DriverManager.getConnection(url, System.getenv("UL_USER"), System.getenv("UL_PASSWORD"));
                Statement s = c.createStatement();
                PreparedStatement p = c.prepareStatement("SELECT ? + 1")) {
            s.execute("SET SESSION sql_mode = 'ANSI_QUOTES'");
            long cid;
            try (ResultSet r = s.executeQuery("SELECT CONNECTION_ID()")) {
                r.next();
                cid = r.getLong(1);
            }
            while (!Files.exists(stop)) {
                try (ResultSet r = s.executeQuery("SELECT CONNECTION_ID(), @@sql_mode")) {
                    r.next();
                    if (r.getLong(1) != cid || !"ANSI_QUOTES".equals(r.getString(2))) {
                        System.out.println("error: session state lost: " + r.getLong(1) + " " + r.getString(2)
                                + " after " + n + " statements, expected " + cid);
                        System.exit(1);
                    }
                }
                p.setLong(1, n);
                try (ResultSet r = p.executeQuery()) {
                    r.next();
                    if (r.getLong(1) != n + 1) {
                        System.out.println("error: wrong answer " + r.getLong(1) + " for " + n);
                        System.exit(1);
                    }
                }
                n++;
                Thread.sleep(10);
            }
        } catch (Exception e) {
            System.out.println("error: " + e + " after " + n + " statements");
            System.exit(1);
        }
        System.out.println("ok statements=" + n + " reconnects=0");
    }
}
