/*
 * test_process.c - pgvalve as a process: command line, config errors,
 * refusing root, the Unix socket, pidfile, daemon mode and the shutdown
 * signals.
 */
#include "harness.h"

#include <fnmatch.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define DB "pgvtest"

static const char *binary(void)
{
	const char *b = getenv("PGV_BINARY");
	ck_assert_ptr_nonnull(b);
	return b;
}

static int run_pgvalve(char *const args[], const char *out)
{
	return run_program(args, NULL, out, 20);
}

static void tmp_path(char *buf, size_t size, const char *name)
{
	snprintf(buf, size, "%s/%s.%d", getenv("PGV_TEST_DIR"), name, (int)getpid());
}

START_TEST(version_and_help)
{
	char out[600];
	tmp_path(out, sizeof(out), "version.out");
	char *v[] = { (char *)binary(), "--version", NULL };
	ck_assert_int_eq(run_pgvalve(v, out), 0);
	ck_assert_msg(strncmp(read_file_tail(out, 4000), "pgvalve ", 8) == 0, "%s", read_file_tail(out, 4000));
	/* then the libraries, line by line as PgBouncer's -V */
	char want[256];
	snprintf(want, sizeof(want), "\nlibevent 2.*\nadns: c-ares 1.*\ntls: %s\nsystemd: yes\n", OpenSSL_version(OPENSSL_VERSION));
	const char *v_text = read_file_tail(out, 4000);
	const char *nl = strchr(v_text, '\n');
	ck_assert_msg(nl && fnmatch(want, nl, 0) == 0, "-V says:\n%s\nexpected the pattern:%s", v_text, want);
	char *h[] = { (char *)binary(), "-h", NULL };
	ck_assert_int_eq(run_pgvalve(h, out), 0);
	const char *text = read_file_tail(out, 4000);
	ck_assert_msg(strstr(text, "--daemon") && strstr(text, "--user") && strstr(text, "--verbose"), "%s", text);
	char *bad[] = { (char *)binary(), "--no-such-option", "x.ini", NULL };
	ck_assert_int_ne(run_pgvalve(bad, out), 0);
}
END_TEST

START_TEST(bad_config_refuses_to_start)
{
	static const struct { const char *text; const char *needle; } cases[] = {
		{ "[pgvalve]\nlisten_port = sixty\n", ":2:" },
		{ "[pgvalve]\npool_mode = sometimes\n", ":2:" },
		{ "[pgvalve]\ndefault_pool_size = -5\n", ":2:" },
		{ "[databases]\nx = host='unterminated\n[pgvalve]\n", ":2:" },
		{ "[pgvalve]\n%include /nonexistent/pgvalve-extra.ini\n", ":2:" },
		/* a typo stops the start, as in PgBouncer */
		{ "[pgbouncer]\ndefualt_pool_size = 5\n",
		  ":2: unknown parameter \"defualt_pool_size\" (did you mean default_pool_size?)" },
	};
	char ini[600], out[600];
	tmp_path(ini, sizeof(ini), "bad.ini");
	tmp_path(out, sizeof(out), "bad.out");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		FILE *f = fopen(ini, "w");
		ck_assert_ptr_nonnull(f);
		fputs(cases[i].text, f);
		fclose(f);
		chmod(ini, 0644);
		char *args[] = { (char *)binary(), "-u", getenv("PGV_TEST_RUNAS") && *getenv("PGV_TEST_RUNAS") ?
				 getenv("PGV_TEST_RUNAS") : "nobody", ini, NULL };
		int rc = run_pgvalve(args, out);
		const char *text = read_file_tail(out, 4000);
		ck_assert_msg(rc == 1, "case %zu: exit %d\n%s", i, rc, text);
		ck_assert_msg(strstr(text, ini) && strstr(text, cases[i].needle), "case %zu: no file:line in\n%s", i, text);
	}
	/* a missing config file */
	char *args[] = { (char *)binary(), "/nonexistent/pgvalve.ini", NULL };
	ck_assert_int_eq(run_pgvalve(args, out), 1);
	ck_assert(strstr(read_file_tail(out, 4000), "/nonexistent/pgvalve.ini") != NULL);
}
END_TEST

/* Whether path holds a line "YYYY-MM-DD HH:MM:SS.mmm UTC [pid] FATAL ...needle...". */
static bool fatal_line_logged(const char *path, const char *needle)
{
	char line[2048];
	bool found = false;
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		int y, mo, d, h, mi, sec, ms, pid, n = 0;
		found = sscanf(line, "%4d-%2d-%2d %2d:%2d:%2d.%3d UTC [%d] FATAL %n", &y, &mo, &d, &h, &mi, &sec, &ms,
			       &pid, &n) == 8 && n > 0 && pid > 0 && strstr(line + n, needle) != NULL;
	}
	fclose(f);
	return found;
}

/* An empty logfile the test user owns (as root, start-up errors only append to an existing one). */
static void make_logfile(const char *path)
{
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	const char *runas = getenv("PGV_TEST_RUNAS");
	if (runas && *runas) {
		char *argv[] = { "chown", (char *)runas, (char *)path, NULL };
		ck_assert_int_eq(run_program(argv, NULL, "/dev/null", 10), 0);
	}
}

/*
 * Start-up errors go to the logfile too, with timestamp and PID, as every
 * other line: a config error after the logfile line, and (as root) the
 * refusal to run as root.
 */
START_TEST(startup_errors_in_logfile)
{
	char ini[600], out[600], logf[600], text[1400];
	tmp_path(ini, sizeof(ini), "early.ini");
	tmp_path(out, sizeof(out), "early.out");
	tmp_path(logf, sizeof(logf), "early.log");
	make_logfile(logf);
	snprintf(text, sizeof(text), "[pgbouncer]\nlogfile = %s\nlisten_port = 1\nmax_client_con = 10\n", logf);
	FILE *f = fopen(ini, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	chmod(ini, 0644);
	const char *runas = getenv("PGV_TEST_RUNAS") && *getenv("PGV_TEST_RUNAS") ? getenv("PGV_TEST_RUNAS") : "nobody";
	char *args[] = { (char *)binary(), "-u", (char *)runas, ini, NULL };
	ck_assert_int_eq(run_pgvalve(args, out), 1);
	ck_assert_msg(fatal_line_logged(logf, ":4: unknown parameter \"max_client_con\""), "logfile:\n%s\nstderr:\n%s",
		      read_file_tail(logf, 2000), read_file_tail(out, 2000));
	/* and on stderr, in the same format */
	ck_assert_msg(fatal_line_logged(out, "unknown parameter"), "%s", read_file_tail(out, 2000));
	if (geteuid() != 0)
		return;	/* the rest is root's; CI runs as root */
	snprintf(text, sizeof(text), "[pgbouncer]\nlogfile = %s\nlisten_port = 1\n", logf);
	f = fopen(ini, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	char *root_args[] = { (char *)binary(), ini, NULL };
	ck_assert_int_eq(run_pgvalve(root_args, out), 1);
	ck_assert_msg(fatal_line_logged(logf, "should not run as root"), "logfile:\n%s", read_file_tail(logf, 2000));
}
END_TEST

START_TEST(refuses_root_without_user)
{
	if (geteuid() != 0)
		return;	/* only meaningful as root; CI runs as root */
	char ini[600], out[600];
	tmp_path(ini, sizeof(ini), "root.ini");
	tmp_path(out, sizeof(out), "root.out");
	FILE *f = fopen(ini, "w");
	ck_assert_ptr_nonnull(f);
	fputs("[pgvalve]\nlisten_addr = 127.0.0.1\nlisten_port = 1\n", f);
	fclose(f);
	char *args[] = { (char *)binary(), ini, NULL };
	ck_assert_int_eq(run_pgvalve(args, out), 1);
	ck_assert_msg(strstr(read_file_tail(out, 4000), "should not run as root"), "%s", read_file_tail(out, 4000));
}
END_TEST

START_TEST(unix_socket_and_pidfile)
{
	struct pgv p;
	char pidfile[700], conninfo[900];
	pgv_start(&p, "auth_type = md5\n", std_databases(), std_userlist());
	snprintf(pidfile, sizeof(pidfile), "%s/pgvalve.pid", p.dir);
	ck_assert_int_eq(atoi(read_file_tail(pidfile, 64)), p.pid);

	snprintf(conninfo, sizeof(conninfo), "host=%s port=%d dbname=%s user=md5_user password=md5_pass", p.dir,
		 p.port, DB);
	PGconn *c = PQconnectdb(conninfo);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "unix socket: %s", PQerrorMessage(c));
	ck_assert_str_eq(query_value(c, "SELECT current_user"), "md5_user");
	PQfinish(c);
	pgv_stop(&p);
	ck_assert_msg(access(pidfile, F_OK) != 0, "pidfile left behind");
}
END_TEST

/*
 * The descriptor limit at start (issue 56): logged as PgBouncer logs it,
 * with a warning when max_client_conn cannot be held by one process (the
 * test machine's limit is 20,000 at most), and none once workers share it.
 */
START_TEST(descriptor_limit_at_start)
{
	struct pgv p;
	pgv_start(&p, "auth_type = md5\nmax_client_conn = 100000\n", std_databases(), std_userlist());
	pgv_expect_log(&p, "kernel file descriptor limit: ", 5);
	pgv_expect_log(&p, "max_client_conn 100000 needs about", 5);
	pgv_stop(&p);
	pgv_start(&p, "auth_type = md5\nmax_client_conn = 10000\nworkers = 2\n", std_databases(), std_userlist());
	pgv_expect_log(&p, "workers: 2, expected use per process: ", 5);
	ck_assert_int_eq(pgv_log_count(&p, "needs about"), 0);
	pgv_stop(&p);
}
END_TEST

/* Until p exits (seconds at most): callers wait for an exit that follows at once (milliseconds). */
static void wait_exit(struct pgv *p, double seconds)
{
	double t0 = now_s();
	while (pgv_running(p) && now_s() - t0 < seconds)
		usleep(50 * 1000);
}

/* SIGTERM (PgBouncer 1.25: SHUTDOWN WAIT_FOR_CLIENTS): no new clients, exit after the last one. */
START_TEST(sigterm_waits_for_clients)
{
	struct pgv p;
	pgv_start(&p, "auth_type = md5\npool_mode = transaction\n", std_databases(), std_userlist());
	PGconn *c = pgv_connect(&p, DB, "md5_user", "md5_pass");
	ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
	ck_assert_str_eq(query_value(c, "SELECT 1"), "1");

	ck_assert_int_eq(kill(p.pid, SIGTERM), 0);
	pgv_expect_log(&p, "got SIGTERM", 5);
	/* a negative window: a wrong exit follows the signal's log line at once; 300 ms catches it */
	usleep(300 * 1000);
	ck_assert_msg(pgv_running(&p), "pgvalve exited with a client still connected");
	PGconn *late = pgv_connect(&p, DB, "md5_user", "md5_pass");
	ck_assert_int_eq(PQstatus(late), CONNECTION_BAD);
	PQfinish(late);
	ck_assert_str_eq(query_value(c, "SELECT 2"), "2");
	PQfinish(c);
	wait_exit(&p, 5);
	ck_assert_msg(!pgv_running(&p), "pgvalve still running after its last client left\n%s", pgv_log_tail(&p, 1500));
	ck_assert(pgv_log_contains(&p, "client connections dropped, exiting"));
	pgv_stop(&p);
}
END_TEST

START_TEST(second_sigterm_exits_now)
{
	struct pgv p;
	pgv_start(&p, "auth_type = md5\n", std_databases(), std_userlist());
	PGconn *c = pgv_connect(&p, DB, "md5_user", "md5_pass");
	ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
	ck_assert_int_eq(kill(p.pid, SIGTERM), 0);
	pgv_expect_log(&p, "got SIGTERM", 5);	/* two pending SIGTERMs would be one */
	usleep(200 * 1000);	/* a negative window, as above */
	ck_assert(pgv_running(&p));
	ck_assert_int_eq(kill(p.pid, SIGTERM), 0);
	wait_exit(&p, 3);
	ck_assert_msg(!pgv_running(&p), "a second SIGTERM did not end pgvalve");
	PGresult *r = PQexec(c, "SELECT 1");
	ck_assert_int_ne(PQresultStatus(r), PGRES_TUPLES_OK);
	/* unlike PgBouncer, which just exits: the client is told why (doc/config.md, "For PgBouncer users") */
	ck_assert_msg(strstr(PQerrorMessage(c), "pooler is shutting down"), "%s", PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

START_TEST(sigquit_exits_now)
{
	struct pgv p;
	pgv_start(&p, "auth_type = md5\n", std_databases(), std_userlist());
	PGconn *c = pgv_connect(&p, DB, "md5_user", "md5_pass");
	ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
	ck_assert_int_eq(kill(p.pid, SIGQUIT), 0);
	wait_exit(&p, 3);
	ck_assert_msg(!pgv_running(&p), "SIGQUIT did not end pgvalve");
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/* SIGINT (SHUTDOWN WAIT_FOR_SERVERS): a transaction in flight finishes, then pgvalve exits. */
START_TEST(sigint_waits_for_servers)
{
	struct pgv p;
	pgv_start(&p, "auth_type = md5\npool_mode = transaction\n", std_databases(), std_userlist());
	PGconn *c = pgv_connect(&p, DB, "md5_user", "md5_pass");
	ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
	PGresult *r = PQexec(c, "BEGIN");
	ck_assert_int_eq(PQresultStatus(r), PGRES_COMMAND_OK);
	PQclear(r);
	ck_assert_int_eq(kill(p.pid, SIGINT), 0);
	/* a negative window: a wrong exit would follow the signal within milliseconds; 300 ms catches it */
	usleep(300 * 1000);
	ck_assert_msg(pgv_running(&p), "pgvalve exited while a server was in a transaction");
	ck_assert_str_eq(query_value(c, "SELECT 'inside'"), "inside");
	r = PQexec(c, "COMMIT");
	ck_assert_int_eq(PQresultStatus(r), PGRES_COMMAND_OK);
	PQclear(r);
	wait_exit(&p, 5);
	ck_assert_msg(!pgv_running(&p), "pgvalve still running after its servers were released\n%s",
		      pgv_log_tail(&p, 1500));
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

START_TEST(daemon_mode)
{
	struct pgv p;
	/* Start normally to get a config written, then stop and rerun it with -d. */
	pgv_start(&p, "auth_type = md5\n", std_databases(), std_userlist());
	pgv_stop(&p);
	char pidfile[700], out[700];
	snprintf(pidfile, sizeof(pidfile), "%s/pgvalve.pid", p.dir);
	snprintf(out, sizeof(out), "%s/daemon.out", p.dir);
	const char *runas = getenv("PGV_TEST_RUNAS");
	char *args_root[] = { (char *)binary(), "-d", "-u", (char *)runas, p.ini, NULL };
	char *args_user[] = { (char *)binary(), "-d", p.ini, NULL };
	int rc = run_pgvalve(runas && *runas ? args_root : args_user, out);
	ck_assert_msg(rc == 0, "pgvalve -d exited %d: %s", rc, read_file_tail(out, 2000));
	/* the daemon writes its pidfile and then listens as it starts: 50 x 100 ms, 5 s on a loaded machine each */
	pid_t pid = 0;
	for (int i = 0; i < 50 && pid <= 0; i++) {
		pid = (pid_t)atoi(read_file_tail(pidfile, 64));
		if (pid <= 0)
			usleep(100 * 1000);
	}
	ck_assert_msg(pid > 0, "no pidfile from the daemon");
	PGconn *c = NULL;
	for (int i = 0; i < 50; i++) {
		c = pgv_connect(&p, DB, "md5_user", "md5_pass");
		if (PQstatus(c) == CONNECTION_OK)
			break;
		PQfinish(c);
		c = NULL;
		usleep(100 * 1000);
	}
	ck_assert_msg(c != NULL, "daemon does not accept connections");
	ck_assert_str_eq(query_value(c, "SELECT 'daemon'"), "daemon");
	PQfinish(c);
	ck_assert_int_eq(kill(pid, SIGTERM), 0);
	/* no clients left: the exit is at once; 5 s on a loaded machine */
	for (int i = 0; i < 50 && kill(pid, 0) == 0; i++)
		usleep(100 * 1000);
	ck_assert_msg(kill(pid, 0) != 0, "daemon still running");
}
END_TEST

static Suite *process_suite(void)
{
	Suite *s = suite_create("process");
	TCase *tc = pgv_tcase_create("cli", 30);
	tcase_add_test(tc, version_and_help);
	tcase_add_test(tc, bad_config_refuses_to_start);
	tcase_add_test(tc, refuses_root_without_user);
	tcase_add_test(tc, startup_errors_in_logfile);
	suite_add_tcase(s, tc);
	tc = pgv_tcase_create("lifecycle", 30);
	tcase_add_test(tc, unix_socket_and_pidfile);
	tcase_add_test(tc, descriptor_limit_at_start);
	tcase_add_test(tc, sigterm_waits_for_clients);
	tcase_add_test(tc, second_sigterm_exits_now);
	tcase_add_test(tc, sigquit_exits_now);
	tcase_add_test(tc, sigint_waits_for_servers);
	tcase_add_test(tc, daemon_mode);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return pgv_run_suite(process_suite());
}
