// pgJDBC's Connection.setReadOnly(true) (its transactions begin READ ONLY,
// readOnlyMode=transaction, the default: what Spring's
// @Transactional(readOnly = true) does) through pgvalve with
// load_balance_reads: once the standbys' roles are known, each such
// transaction runs on a replica, past prepareThreshold too (named
// statements), while a read-write connection's inserts run on the
// primary. Settings come from PGV_DRV_* (test_drivers.c). Run as a
// single-file program: java -cp 'BUILD/drivers/java/*' JdbcReadOnly.java
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.util.Properties;
import java.util.TreeSet;

public class JdbcReadOnly {
    static final int COUNT = 20;
    static final String WHERE = "SELECT host(inet_server_addr()) || '|' || pg_is_in_recovery() WHERE ? > 0";

    static Connection connect() throws Exception {
        String url = "jdbc:postgresql://" + System.getenv("PGV_DRV_HOST") + ":" + System.getenv("PGV_DRV_PORT") + "/"
                + System.getenv("PGV_DRV_DB");
        Properties p = new Properties();
        p.setProperty("user", System.getenv("PGV_DRV_USER"));
        p.setProperty("password", System.getenv("PGV_DRV_PASSWORD"));
        p.setProperty("sslmode", "disable");
        Connection c = DriverManager.getConnection(url, p);
        c.setAutoCommit(false);
        return c;
    }

    static String one(Connection c, String sql, int arg) throws Exception {
        try (PreparedStatement s = c.prepareStatement(sql)) {
            s.setInt(1, arg);
            try (ResultSet r = s.executeQuery()) {
                r.next();
                String v = r.getString(1);
                c.commit();
                return v;
            }
        }
    }

    public static void main(String[] args) {
        try {
            System.exit(run());
        } catch (Exception e) {
            System.out.println("FAILED: " + e);
            System.exit(1);
        }
    }

    static int run() throws Exception {
        Connection ro = connect();
        ro.setReadOnly(true);
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (!one(ro, WHERE, 1).endsWith("|true")) { // until pgvalve knows the standbys
            if (System.nanoTime() > deadline) {
                System.out.println("FAILED: read-only transactions stay on the primary");
                return 1;
            }
            Thread.sleep(100);
        }
        Connection rw = connect();
        TreeSet<String> hosts = new TreeSet<>();
        for (int i = 0; i < COUNT; i++) {
            String got = one(ro, WHERE, i + 1);
            if (!got.endsWith("|true")) {
                System.out.println("FAILED: read-only transaction " + i + " ran on " + got);
                return 1;
            }
            hosts.add(got);
            String wrote = one(rw, "INSERT INTO drv_ro VALUES (?) RETURNING pg_is_in_recovery()::text", i);
            if (!wrote.equals("false")) {
                System.out.println("FAILED: a write transaction ran on a standby (" + wrote + ")");
                return 1;
            }
        }
        System.out.println("ok: " + COUNT + " read-only transactions on " + hosts + ", " + COUNT
                + " writes on the primary");
        return 0;
    }
}
