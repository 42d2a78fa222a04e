/*
 * test_drivers.c - the driver matrix (issue 16): real client drivers whose
 * defaults use named prepared statements, each with more clients than the
 * pool has servers, through pgvalve in transaction mode with
 * max_prepared_statements at its default; and their pipelined paths
 * (issue 29), each followed by a second client on a pool of one; and their
 * notification APIs, pgJDBC's included (issue 25); and their read-only
 * connections on a primary with two replicas, routed to the replicas by
 * load_balance_reads (issue 49). The drivers and their scripts
 * live in test/drivers/; setup.sh installs the pinned versions under
 * build/drivers (a no-op once done).
 */
#include "harness.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define DB "pgvtest"
#define POOL "auth_type = md5\npool_mode = transaction\ndefault_pool_size = 3\nmax_client_conn = 100\n"

/*
 * setup.sh's output, when it could not install the drivers. main() runs it
 * once, before the suite: a failure is then one failing test that says why,
 * not one for each driver test.
 */
static char setup_out[PATH_MAX];

/*
 * Runs setup.sh BUILD with extra "NAME=value" env entries (may be NULL),
 * its output into out, for 600 s at most; its exit status (-1 if it could
 * not run). Plain fork and exec: main() runs it outside any Check test,
 * where the harness's helpers (which assert) cannot be used.
 */
static int drivers_setup(const char *build, const char *out, char *const env[])
{
	char script[PATH_MAX];
	snprintf(script, sizeof(script), "%s/test/drivers/setup.sh", PGV_TEST_SRCDIR);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0)
			_exit(127);
		for (int i = 0; env && env[i]; i++)
			putenv(env[i]);
		execlp("timeout", "timeout", "600", "bash", script, build, (char *)NULL);
		_exit(127);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

START_TEST(drivers_installed)
{
	ck_abort_msg("test/drivers/setup.sh could not install the pinned drivers, so the driver matrix did not run:\n%s",
		     read_file_tail(setup_out, 3000));
}
END_TEST

/*
 * Runs one driver script against p, database db, as user:password, with
 * 10 clients; returns its exit status, its output in `text` (static, from
 * read_file_tail).
 */
static int run_driver_as(struct pgv *p, const char *interp, const char *script, const char *db, const char *user,
			 const char *password, const char **text)
{
	char prog[PATH_MAX], path[PATH_MAX], out[PATH_MAX], port[32], nodepath[PATH_MAX + 32];
	char classpath[PATH_MAX];
	snprintf(classpath, sizeof(classpath), "%s/drivers/java/*", PGV_TEST_BUILDDIR);
	if (strcmp(interp, "python") == 0)
		snprintf(prog, sizeof(prog), "%s/drivers/venv/bin/python", PGV_TEST_BUILDDIR);
	else
		snprintf(prog, sizeof(prog), "%s", interp);	/* node, java */
	snprintf(path, sizeof(path), "%s/test/drivers/%s", PGV_TEST_SRCDIR, script);
	snprintf(out, sizeof(out), "%s/%s.out", p->dir, script);
	snprintf(port, sizeof(port), "PGV_DRV_PORT=%d", p->port);
	snprintf(nodepath, sizeof(nodepath), "NODE_PATH=%s/drivers/node/node_modules", PGV_TEST_BUILDDIR);
	char dbenv[128], userenv[128], passenv[128];
	snprintf(dbenv, sizeof(dbenv), "PGV_DRV_DB=%s", db);
	snprintf(userenv, sizeof(userenv), "PGV_DRV_USER=%s", user);
	snprintf(passenv, sizeof(passenv), "PGV_DRV_PASSWORD=%s", password);
	char *env[] = { "PGV_DRV_HOST=127.0.0.1", port, dbenv, "PGV_DRV_DB_ONE=one", userenv, passenv,
			"PGV_DRV_CLIENTS=10", nodepath, NULL };
	char *argv[] = { prog, path, NULL };
	char *java_argv[] = { prog, "-cp", classpath, path, NULL };	/* a single-file program (JEP 330) */
	int rc = run_program(strcmp(interp, "java") == 0 ? java_argv : argv, env, out, 120);
	*text = read_file_tail(out, 3000);
	return rc;
}

static int run_driver(struct pgv *p, const char *interp, const char *script, const char **text)
{
	return run_driver_as(p, interp, script, DB, "scram_user", "scram_pass", text);
}

static const struct driver {
	const char *interp;
	const char *script;
} drivers[] = {
	{ "python", "psycopg3.py" },	/* prepare_threshold=0 */
	{ "python", "asyncpg_cache.py" },	/* its default statement cache */
	{ "node", "node_pg.js" },	/* node-postgres named queries */
};

START_TEST(driver_default_prepares)
{
	const struct driver *d = &drivers[_i];
	struct pgv p;
	pgv_start(&p, POOL, std_databases(), std_userlist());
	const char *text;
	int rc = run_driver(&p, d->interp, d->script, &text);
	ck_assert_msg(rc == 0 && strstr(text, "ok: "), "%s exited %d:\n%s\n%s", d->script, rc, text,
		      pgv_log_tail(&p, 2000));
	ck_assert_msg(!pgv_log_contains(&p, "does not exist") && !pgv_log_contains(&p, "already exists"),
		      "%s", pgv_log_tail(&p, 2000));
	pgv_stop(&p);
}
END_TEST

/* The same drivers without statement tracking break: the matrix does test what it claims. */
START_TEST(drivers_break_without_tracking)
{
	const struct driver *d = &drivers[_i];
	struct pgv p;
	pgv_start(&p, POOL "max_prepared_statements = 0\n", std_databases(), std_userlist());
	const char *text;
	int rc = run_driver(&p, d->interp, d->script, &text);
	ck_assert_msg(rc != 0 && strstr(text, "FAILED: "), "%s passed without max_prepared_statements:\n%s",
		      d->script, text);
	pgv_stop(&p);
}
END_TEST

/* The databases of the matrix, and "one": the same on a pool of one server. */
static const char *databases_with_one(void)
{
	static char buf[512];
	snprintf(buf, sizeof(buf), "%sone = host=127.0.0.1 port=%s dbname=" DB " pool_size=1\n", std_databases(),
		 getenv("PGV_TEST_PGPORT"));
	return buf;
}

/* Drivers' pipelined paths (issue 29): each checks its results, and that a second client of a pool of one is served. */
static const struct driver pipelined[] = {
	{ "python", "psycopg3_pipeline.py" },	/* pipeline(): plain, prepared, an error and a late sync */
	{ "python", "asyncpg_executemany.py" },	/* executemany(): one batch, one Sync */
};

START_TEST(pipelines_give_the_server_back)
{
	const struct driver *d = &pipelined[_i];
	struct pgv p;
	pgv_start(&p, POOL, databases_with_one(), std_userlist());
	const char *text;
	int rc = run_driver(&p, d->interp, d->script, &text);
	ck_assert_msg(rc == 0 && strstr(text, "ok: "), "%s exited %d:\n%s\n%s", d->script, rc, text,
		      pgv_log_tail(&p, 2000));
	ck_assert_msg(!pgv_log_contains(&p, "not idle"), "%s", pgv_log_tail(&p, 2000));
	pgv_stop(&p);
}
END_TEST

/* Drivers' own notification APIs (issue 25): LISTEN in transaction pooling, self-notifications by login PID. */
static const struct driver notifying[] = {
	{ "python", "psycopg3_notify.py" },	/* conn.notifies() */
	{ "python", "asyncpg_notify.py" },	/* add_listener */
	{ "node", "node_pg_notify.js" },	/* client.on('notification') */
	{ "java", "JdbcNotify.java" },	/* PGConnection.getNotifications() */
};

START_TEST(drivers_get_notifications)
{
	const struct driver *d = &notifying[_i];
	struct pgv p;
	/* pgJDBC sends extra_float_digits at login: ignored, as PgBouncer's users configure it */
	pgv_start(&p, POOL "ignore_startup_parameters = extra_float_digits\n", std_databases(), std_userlist());
	const char *text;
	int rc = run_driver(&p, d->interp, d->script, &text);
	ck_assert_msg(rc == 0 && strstr(text, "ok: "), "%s exited %d:\n%s\n%s", d->script, rc, text,
		      pgv_log_tail(&p, 2000));
	pgv_stop(&p);
}
END_TEST

/*
 * libpq 18's max_protocol_version=latest asks for protocol 3.2: pgvalve's
 * answer is 3.2 itself, and libpq's cancel with the long key lands (issue 27).
 */
START_TEST(libpq_newest_protocol)
{
	struct pgv p;
	pgv_start(&p, POOL, std_databases(), std_userlist());
	const char *text;
	int rc = run_driver(&p, "python", "libpq_protocol.py", &text);
	ck_assert_msg(rc == 0 && strstr(text, "ok: "), "libpq_protocol.py exited %d:\n%s\n%s", rc, text,
		      pgv_log_tail(&p, 2000));
	pgv_stop(&p);
}
END_TEST

/* Drivers' read-only connections (issue 49): routed to a replica by load_balance_reads = explicit. */
static const struct driver read_only[] = {
	{ "python", "psycopg3_read_only.py" },	/* conn.read_only = True */
	{ "java", "JdbcReadOnly.java" },	/* Connection.setReadOnly(true) */
};

START_TEST(drivers_read_only_on_replicas)
{
	const struct driver *d = &read_only[_i];
	struct pgv p;
	char dbs[512];
	roles_cluster_start();
	PGconn *primary = roles_cluster_connect(1);
	PGresult *r = PQexec(primary, "DROP TABLE IF EXISTS drv_ro; CREATE TABLE drv_ro (a int)");
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s", PQerrorMessage(primary));
	PQclear(r);
	snprintf(dbs, sizeof(dbs), "ro = host=127.0.0.2,127.0.0.3,127.0.0.4 port=%d dbname=postgres user=pgvadmin "
		 "target_session_attrs=read-write load_balance_reads=explicit\n", roles_cluster_port);
	pgv_start(&p, "auth_type = trust\npool_mode = transaction\nserver_login_retry = 1\n"
		  "ignore_startup_parameters = extra_float_digits\n", dbs, "\"pgvadmin\" \"\"\n");
	const char *text;
	int rc = run_driver_as(&p, d->interp, d->script, "ro", "pgvadmin", "unused", &text);
	ck_assert_msg(rc == 0 && strstr(text, "ok: "), "%s exited %d:\n%s\n%s", d->script, rc, text,
		      pgv_log_tail(&p, 2000));
	fprintf(stderr, "%s: %s", d->script, text);
	pgv_stop(&p);
	PQfinish(primary);
	roles_cluster_stop();
}
END_TEST

/*
 * libpq 18 with OpenSSL (psycopg's binary wheel; Debian's is 15) and
 * SCRAM-SHA-256-PLUS (issue 44): channel_binding=require through pgvalve
 * over TLS binds; a proxy that shows another certificate is refused for
 * it, and counted so; a login through it that does not bind goes on.
 */
START_TEST(libpq_newest_channel_binding)
{
	struct pgv p;
	char conf[1024];
	int mport = pgv_pick_http_port(0);
	snprintf(conf, sizeof(conf), "auth_type = scram-sha-256\nclient_tls_sslmode = require\nclient_tls_cert_file = %s\n"
		 "client_tls_key_file = %s\nlog_connections = 1\nmetrics_port = %d\nmetrics_listen_addr = 127.0.0.1\n",
		 pgv_cert("server.crt"), pgv_cert("server.key"), mport);
	pgv_start(&p, conf, std_databases(), std_userlist());
	ck_assert_int_eq(setenv("PGV_DRV_PROXY_CERT", pgv_cert("scram_user.crt"), 1), 0);
	ck_assert_int_eq(setenv("PGV_DRV_PROXY_KEY", pgv_cert("scram_user.key"), 1), 0);
	const char *text;
	int rc = run_driver(&p, "python", "libpq_channel_binding.py", &text);
	ck_assert_msg(rc == 0 && strstr(text, "ok: "), "libpq_channel_binding.py exited %d:\n%s\n%s", rc, text,
		      pgv_log_tail(&p, 2000));
	fprintf(stderr, "test_drivers: %s", text);
	ck_assert_int_eq(pgv_log_count(&p, "login authenticated: method=scram-sha-256-plus"), 1);
	ck_assert_int_eq(pgv_log_count(&p, "login authenticated: method=scram-sha-256\n"), 1);	/* through the proxy */
	pgv_expect_log(&p, "closing because: SCRAM channel binding check failed", 5);
	ck_assert_double_eq(pgv_auth_failures(mport, "scram-sha-256", "channel_binding_mismatch"), 1);
	pgv_stop(&p);
}
END_TEST

/*
 * When the package index cannot be used, setup.sh says why in its last
 * line instead of pip's "No matching distribution": a TLS server whose
 * certificate no system CA signed, and a port where nothing listens, as
 * the index (into a fresh directory, pip's own config files ignored).
 */
static const struct setup_failure {
	bool tls;
	const char *says;
} setup_failures[] = {
	{ true, "setup.sh: pip could not install the pinned drivers: TLS certificate verification failed" },
	{ false, "setup.sh: pip could not install the pinned drivers: no network: the package index cannot be reached" },
};

/* Until something accepts on 127.0.0.1:port (fails the test after timeout_s). */
/* Until something listens on port (callers: a process start, 10 s on a loaded machine). */
static void wait_listening(int port, double timeout_s)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (double deadline = now_s() + timeout_s; now_s() < deadline; sleep_ms(50)) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ck_assert_int_ge(fd, 0);
		int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
		close(fd);
		if (rc == 0)
			return;
	}
	ck_abort_msg("nothing listens on 127.0.0.1:%d after %.0f s", port, timeout_s);
}

START_TEST(setup_failure_says_why)
{
	const struct setup_failure *f = &setup_failures[_i];
	char dir[PATH_MAX - 64], out[PATH_MAX], index_url[128], cert[PATH_MAX], key[PATH_MAX], accept[32];
	int port = pgv_pick_port();
	snprintf(dir, sizeof(dir), "%s/setup-fail-%d", getenv("PGV_TEST_DIR"), _i);
	snprintf(out, sizeof(out), "%s.out", dir);
	snprintf(index_url, sizeof(index_url), "PIP_INDEX_URL=%s://127.0.0.1:%d/simple", f->tls ? "https" : "http",
		 port);
	pid_t server = -1;
	if (f->tls) {
		snprintf(cert, sizeof(cert), "%s/server.crt", getenv("PGV_TEST_CERTDIR"));
		snprintf(key, sizeof(key), "%s/server.key", getenv("PGV_TEST_CERTDIR"));
		snprintf(accept, sizeof(accept), "127.0.0.1:%d", port);
		char *argv[] = { "openssl", "s_server", "-quiet", "-www", "-accept", accept, "-cert", cert, "-key", key,
				 NULL };
		char log[PATH_MAX];
		snprintf(log, sizeof(log), "%s.s_server", dir);
		server = run_program_background(argv, log);
		ck_assert_int_gt(server, 0);
		wait_listening(port, 10);
	}
	char *env[] = { index_url, "PIP_CONFIG_FILE=/dev/null", "PIP_FIND_LINKS=", "PIP_RETRIES=0", "PIP_TIMEOUT=5",
			NULL };
	int rc = drivers_setup(dir, out, env);
	if (server > 0)
		stop_program(server);
	const char *text = read_file_tail(out, 3000);
	ck_assert_msg(rc != 0 && strstr(text, f->says), "setup.sh exited %d, without \"%s\":\n%s", rc, f->says, text);
}
END_TEST

static Suite *drivers_suite(bool installed)
{
	Suite *s = suite_create("drivers");
	TCase *tc = pgv_tcase_create("matrix", 600);
	if (installed) {
		tcase_add_loop_test(tc, driver_default_prepares, 0, (int)(sizeof(drivers) / sizeof(drivers[0])));
		tcase_add_loop_test(tc, drivers_break_without_tracking, 0,
				    (int)(sizeof(drivers) / sizeof(drivers[0])));
		tcase_add_test(tc, libpq_newest_protocol);
		tcase_add_test(tc, libpq_newest_channel_binding);
		tcase_add_loop_test(tc, pipelines_give_the_server_back, 0,
				    (int)(sizeof(pipelined) / sizeof(pipelined[0])));
		tcase_add_loop_test(tc, drivers_get_notifications, 0, (int)(sizeof(notifying) / sizeof(notifying[0])));
		tcase_add_loop_test(tc, drivers_read_only_on_replicas, 0, (int)(sizeof(read_only) / sizeof(read_only[0])));
	} else {
		tcase_add_test(tc, drivers_installed);
	}
	suite_add_tcase(s, tc);
	tc = pgv_tcase_create("setup", 60);
	tcase_add_loop_test(tc, setup_failure_says_why, 0, (int)(sizeof(setup_failures) / sizeof(setup_failures[0])));
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	pgv_ensure_fixture();
	snprintf(setup_out, sizeof(setup_out), "%s/drivers-setup.out", getenv("PGV_TEST_DIR"));
	bool installed = drivers_setup(PGV_TEST_BUILDDIR, setup_out, NULL) == 0;
	return pgv_run_suite(drivers_suite(installed));
}
