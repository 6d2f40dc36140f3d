package memory.neo4j;

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import org.neo4j.configuration.Config;
import org.neo4j.configuration.GraphDatabaseInternalSettings;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.SettingValueParsers;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.connectors.HttpConnector;
import org.neo4j.configuration.connectors.HttpsConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.graphdb.Label;
import org.neo4j.graphdb.Node;
import org.neo4j.graphdb.Transaction;
import org.neo4j.io.fs.DefaultFileSystemAbstraction;
import org.neo4j.io.fs.FileSystemAbstraction;
import org.neo4j.kernel.impl.security.User;
import org.neo4j.logging.NullLogProvider;
import org.neo4j.memory.EmptyMemoryTracker;
import org.neo4j.server.security.SecureHasher;
import org.neo4j.server.security.SystemGraphCredential;
import org.neo4j.server.security.auth.CommunitySecurityModule;
import org.neo4j.server.security.auth.FileUserRepository;

/**
 * Runs Neo4j Community embedded, in the foreground, with only the Bolt connector.
 *
 * <pre>
 * java ... -jar neo4j-launcher.jar --home DIR [--host 127.0.0.1] [--port 7687]
 *     [--database memory] [--password PW] [--pagecache 128m] [--tx-memory SIZE] [--conf FILE]
 * </pre>
 *
 * The password may also come from the environment variable NEO4J_LAUNCHER_PASSWORD (run.sh
 * uses it so that the password is not on the java command line).
 * Without a password authentication is disabled; with it, authentication is enabled and the
 * built-in user "neo4j" gets that password (no change required), on a new or an existing store.
 * Prints exactly one line "neo4j ready bolt://HOST:PORT db=NAME" on stdout once Bolt serves
 * queries; Neo4j's own logs go to HOME/logs. SIGTERM/SIGINT shut the DBMS down cleanly.
 */
public final class Launcher {

    private static final String USAGE =
            "usage: Launcher --home DIR [--host 127.0.0.1] [--port 7687] [--database memory]"
                    + " [--password PW] [--pagecache 128m] [--tx-memory SIZE] [--conf FILE]";

    /** Environment variable read when --password is absent (set by run.sh). */
    static final String PASSWORD_ENV = "NEO4J_LAUNCHER_PASSWORD";

    private Launcher() {}

    public static void main(String[] args) throws Exception {
        try {
            run(args);
        } catch (Exception e) {
            System.err.println("error: " + e.getClass().getSimpleName() + ": " + rootMessage(e));
            System.exit(1);
        }
    }

    private static void run(String[] args) throws Exception {
        String home = null;
        String host = "127.0.0.1";
        int port = 7687;
        String database = "memory";
        String password = null;
        String pagecache = "128m";
        String txMemory = null;
        String conf = null;
        boolean exitWhenReady = false; // used by build.sh to record the class-data-sharing archive

        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.equals("--exit-when-ready")) {
                exitWhenReady = true;
                continue;
            }
            if (a.equals("-h") || a.equals("--help")) {
                System.out.println(USAGE);
                return;
            }
            if (i + 1 >= args.length) {
                fail("missing value for " + a);
            }
            String v = args[++i];
            switch (a) {
                case "--home": home = v; break;
                case "--host": host = v; break;
                case "--port":
                    try {
                        port = Integer.parseInt(v);
                    } catch (NumberFormatException e) {
                        fail("bad --port: " + v);
                    }
                    break;
                case "--database": database = v; break;
                case "--password": password = v; break;
                case "--pagecache": pagecache = v; break;
                case "--tx-memory": txMemory = v; break;
                case "--conf": conf = v; break;
                default: fail("unknown argument " + a);
            }
        }
        if (home == null) {
            fail("--home is required");
        }
        if (password == null) {
            // run.sh passes --password this way, keeping it off the java command line (ps, debug.log).
            String env = System.getenv(PASSWORD_ENV);
            password = env == null || env.isEmpty() ? null : env;
        }
        if (password != null && password.isEmpty()) {
            fail("--password must not be empty");
        }

        Path homeDir = Path.of(home).toAbsolutePath().normalize();
        Files.createDirectories(homeDir);

        // Transaction memory: modest and always below the heap (Neo4j's default is 70% of heap).
        long maxHeap = Runtime.getRuntime().maxMemory();
        long txGlobal = txMemory != null
                ? SettingValueParsers.BYTES.parse(txMemory)
                : Math.min(256L << 20, maxHeap / 2);
        long txSingle = Math.max(16L << 20, txGlobal / 2);

        if (password != null) {
            writeInitialPassword(homeDir, password);
        }

        DatabaseManagementServiceBuilder builder = new DatabaseManagementServiceBuilder(homeDir);
        if (conf != null) {
            builder.loadPropertiesFromFile(Path.of(conf));
        }
        builder.setConfig(Map.ofEntries(
                // Only Bolt; no HTTP(S).
                Map.entry(BoltConnector.enabled, true),
                Map.entry(BoltConnector.listen_address, new SocketAddress(host, port)),
                Map.entry(BoltConnector.advertised_address, new SocketAddress(host, port)),
                Map.entry(BoltConnector.encryption_level, BoltConnector.EncryptionLevel.DISABLED),
                Map.entry(HttpConnector.enabled, false),
                Map.entry(HttpsConnector.enabled, false),
                // Name of the default (in Community: the only) user database. Changing it on an
                // existing store makes Community create/serve that database instead; the old one
                // stays on disk and comes back when the old name is used again.
                Map.entry(GraphDatabaseSettings.initial_default_database, database),
                // Auth.
                Map.entry(GraphDatabaseSettings.auth_enabled, password != null),
                Map.entry(GraphDatabaseSettings.auth_minimum_password_length, 1),
                // Bounded memory (heap itself is -Xmx of the JVM).
                Map.entry(GraphDatabaseSettings.pagecache_memory, SettingValueParsers.BYTES.parse(pagecache)),
                Map.entry(GraphDatabaseSettings.memory_transaction_global_max_size, txGlobal),
                Map.entry(GraphDatabaseSettings.memory_transaction_max_size, txSingle),
                // Small, lazily grown transaction logs (default preallocates 256 MiB per database).
                Map.entry(GraphDatabaseSettings.preallocate_logical_logs, false),
                Map.entry(GraphDatabaseSettings.logical_log_rotation_threshold, 64L << 20),
                // Kept a day for recovery and debugging, but never more than 512 MiB: a bulk load of 1M memories
                // wrote 12 GB of logs that "1 days" alone kept (docs/benchmarks.md).
                Map.entry(GraphDatabaseSettings.keep_logical_logs, "1 days 512M"),
                // Nothing reaches the network.
                Map.entry(GraphDatabaseSettings.udc_enabled, false),
                Map.entry(GraphDatabaseInternalSettings.udc_network_enabled, false),
                Map.entry(BoltConnector.server_bolt_telemetry_enabled, false),
                // Quick stop: Netty's default quiet period is 5 s per event-loop group (~10 s total).
                Map.entry(GraphDatabaseInternalSettings.netty_server_shutdown_quiet_period, 0),
                Map.entry(GraphDatabaseInternalSettings.netty_server_shutdown_timeout, Duration.ofSeconds(5))));

        DatabaseManagementService dbms;
        try {
            dbms = builder.build();
        } catch (RuntimeException e) {
            System.err.println("error: neo4j failed to start: " + rootMessage(e)
                    + " (see " + homeDir.resolve("logs/debug.log") + ")");
            System.exit(1);
            return;
        }

        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                dbms.shutdown();
            } catch (Throwable t) {
                System.err.println("error: neo4j shutdown: " + rootMessage(t));
            } finally {
                stopped.countDown();
            }
        }, "neo4j-shutdown"));

        try {
            if (!dbms.listDatabases().contains(database)) {
                throw new IllegalStateException("database '" + database + "' does not exist in "
                        + homeDir + " (existing: " + dbms.listDatabases()
                        + ")");
            }
            GraphDatabaseService db = dbms.database(database);
            if (!db.isAvailable(60_000)) {
                throw new IllegalStateException("database '" + database + "' is not available");
            }
            if (password != null) {
                setPassword(dbms.database(GraphDatabaseSettings.SYSTEM_DATABASE_NAME), password);
            }
            db.executeTransactionally("RETURN 1");
        } catch (RuntimeException e) {
            System.err.println("error: " + rootMessage(e));
            System.exit(1);
        }

        PrintStream out = System.out;
        out.println("neo4j ready bolt://" + host + ":" + port + " db=" + database);
        out.flush();

        if (exitWhenReady) {
            System.exit(0);
        }
        stopped.await(); // stay in the foreground until a signal runs the shutdown hook
    }

    /**
     * Writes data/dbms/auth.ini like `neo4j-admin dbms set-initial-password`, so that the password
     * is in place before Bolt accepts connections: Neo4j applies it when it creates the system
     * database, and at start-up while "neo4j" is the only user and still has the default password.
     */
    private static void writeInitialPassword(Path homeDir, String password) throws Exception {
        Config cfg = Config.newBuilder().set(GraphDatabaseSettings.neo4j_home, homeDir).build();
        Path file = CommunitySecurityModule.getInitialUserRepositoryFile(cfg);
        try (FileSystemAbstraction fs = new DefaultFileSystemAbstraction()) {
            fs.mkdirs(file.getParent());
            if (fs.fileExists(file)) {
                fs.deleteFile(file);
            }
            FileUserRepository repo =
                    new FileUserRepository(fs, file, NullLogProvider.getInstance(), EmptyMemoryTracker.INSTANCE);
            repo.start();
            repo.create(new User("neo4j", null,
                    SystemGraphCredential.createCredentialForPassword(
                            password.getBytes(StandardCharsets.UTF_8), new SecureHasher()),
                    false, false));
            repo.shutdown();
        }
    }

    /**
     * Makes sure "neo4j" has this password and no pending password change, on new and existing
     * stores. The common cases (fresh store: auth.ini applied; restart with the same password) are
     * checked with a cheap read; only a real change runs ALTER USER (Cypher on the system database
     * is slow to plan the first time: ~10 s on 2 cores).
     */
    private static void setPassword(GraphDatabaseService system, String password) {
        byte[] pw = password.getBytes(StandardCharsets.UTF_8);
        try (Transaction tx = system.beginTx()) {
            Node user = tx.findNode(Label.label("User"), "name", "neo4j");
            if (user != null
                    && Boolean.FALSE.equals(user.getProperty("passwordChangeRequired", null))
                    && SystemGraphCredential.deserialize(
                                    String.valueOf(user.getProperty("credentials", "")), new SecureHasher())
                            .matchesPassword(pw)) {
                return;
            }
        } catch (Exception e) {
            // Unexpected layout: fall through to Cypher, which is authoritative.
        }
        try {
            system.executeTransactionally(
                    "ALTER USER neo4j SET PLAINTEXT PASSWORD $pw CHANGE NOT REQUIRED", Map.of("pw", password));
        } catch (RuntimeException e) {
            // Re-setting the current password is refused ("Old password and new password cannot be
            // the same"); then only the change-required flag may need clearing.
            if (!String.valueOf(rootMessage(e)).contains("cannot be the same")) {
                throw e;
            }
            system.executeTransactionally("ALTER USER neo4j SET PASSWORD CHANGE NOT REQUIRED");
        }
    }

    private static String rootMessage(Throwable t) {
        Throwable r = t;
        while (r.getCause() != null && r.getCause() != r) {
            r = r.getCause();
        }
        return r == t ? String.valueOf(t.getMessage()) : t.getMessage() + ": " + r.getMessage();
    }

    private static void fail(String msg) {
        System.err.println("error: " + msg);
        System.err.println(USAGE);
        System.exit(2);
    }
}
