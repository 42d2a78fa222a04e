// pgJDBC PGConnection.getNotifications() through pgvalve in transaction
// pooling: CLIENTS listening connections and one that notifies from inside
// transactions (and listens too); every listener gets every notification in
// order, the sender its own with its login PID (getBackendPID()). Settings
// come from PGV_DRV_* (test_drivers.c). Run as a single-file program:
// java -cp 'BUILD/drivers/java/*' JdbcNotify.java
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.postgresql.PGConnection;
import org.postgresql.PGNotification;

public class JdbcNotify {
    static final int COUNT = 20;

    static Connection connect() throws Exception {
        String url = "jdbc:postgresql://" + System.getenv("PGV_DRV_HOST") + ":" + System.getenv("PGV_DRV_PORT") + "/"
                + System.getenv("PGV_DRV_DB");
        Properties p = new Properties();
        p.setProperty("user", System.getenv("PGV_DRV_USER"));
        p.setProperty("password", System.getenv("PGV_DRV_PASSWORD"));
        p.setProperty("sslmode", "disable");
        return DriverManager.getConnection(url, p);
    }

    public static void main(String[] args) {
        try {
            run();
        } catch (Exception e) {
            System.out.println("FAILED: " + e);
            System.exit(1);
        }
    }

    static void run() throws Exception {
        int clients = Integer.parseInt(System.getenv().getOrDefault("PGV_DRV_CLIENTS", "10"));
        List<Connection> conns = new ArrayList<>();
        for (int k = 0; k <= clients; k++) {
            Connection c = connect();
            try (Statement s = c.createStatement()) {
                s.execute("LISTEN drv");
            }
            conns.add(c);
        }
        Connection sender = conns.get(clients);
        int own = sender.unwrap(PGConnection.class).getBackendPID();
        sender.setAutoCommit(false);
        try (PreparedStatement ps = sender.prepareStatement("SELECT pg_notify(?, ?)")) {
            for (int i = 0; i < COUNT; i++) {
                ps.setString(1, "drv");
                ps.setString(2, Integer.toString(i));
                ps.executeQuery().close();
                sender.commit();
            }
        }
        sender.setAutoCommit(true);
        long deadline = System.currentTimeMillis() + 15000;
        for (int k = 0; k <= clients; k++) {
            PGConnection pg = conns.get(k).unwrap(PGConnection.class);
            List<PGNotification> got = new ArrayList<>();
            while (got.size() < COUNT) {
                long left = deadline - System.currentTimeMillis();
                if (left <= 0)
                    throw new Exception("client " + k + ": timeout after " + got.size() + " notifications");
                PGNotification[] ns = pg.getNotifications((int) Math.min(left, 1000));
                if (ns != null)
                    for (PGNotification n : ns)
                        got.add(n);
            }
            for (int i = 0; i < COUNT; i++) {
                PGNotification n = got.get(i);
                if (!n.getName().equals("drv") || !n.getParameter().equals(Integer.toString(i)))
                    throw new Exception("client " + k + ": notification " + i + " is " + n.getName() + "/" + n.getParameter());
                if (k == clients && n.getPID() != own)
                    throw new Exception("the sender saw pid " + n.getPID() + ", its own is " + own);
                if (k != clients && n.getPID() == own)
                    throw new Exception("client " + k + " saw the sender's login pid " + own);
            }
        }
        for (Connection c : conns)
            c.close();
        System.out.println("ok: pgJDBC " + org.postgresql.util.DriverInfo.DRIVER_VERSION + ", " + (clients + 1)
                + " clients, " + COUNT + " notifications each");
    }
}
