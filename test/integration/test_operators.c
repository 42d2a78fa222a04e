/*
 * test_operators.c - pgvalve driven the way the Kubernetes operators that
 * ship PgBouncer drive it (issue 27, point 5), against the real
 * PostgreSQL. What each operator relies on was read from its source:
 *
 * CloudNativePG's Pooler (1.25-1.27: pkg/management/pgbouncer/config,
 * internal/cmd/manager/pgbouncer/run, .../metricsserver):
 *   - execs `/usr/bin/pgbouncer <configs>/pgbouncer.ini`, here a link named
 *     pgbouncer to the binary under test;
 *   - its generated ini: [databases] `* = host=...`, [pgbouncer] pool_mode,
 *     auth_user/auth_query (public.user_search($1))/auth_dbname, then the
 *     parameters sorted by name: admin_users = pgbouncer, auth_hba_file,
 *     auth_type = hba, client_tls_* (sslmode prefer), ignore_startup_parameters
 *     = extra_float_digits,options, log_stats = 0, server_tls_sslmode =
 *     verify-ca with the auth user's client certificate (no auth_file), and
 *     no logfile: everything goes to stderr;
 *   - its hba file: `local pgbouncer pgbouncer peer` first, md5 for the rest;
 *   - its log writer matches every stderr line (continuations start with a
 *     tab) against `(?s)(^.*) \[([0-9]+)\] ([A-Z]+) (.+)$`;
 *   - its exporter connects over the Unix socket as pgbouncer and decodes
 *     SHOW POOLS by column count (16 or 17 as PgBouncer 1.18/1.24+), SHOW
 *     STATS by position (database first, then the totals), SHOW LISTS as
 *     (text, int) pairs named as PgBouncer names them; PAUSE and RESUME;
 *   - stops it with SIGINT.
 * Crunchy PGO (v5: internal/pgbouncer/config.go):
 *   - `[pgbouncer]` + `%include /etc/pgbouncer/pgbouncer.ini` (a user file,
 *     empty by default) first, then its own [pgbouncer] (conffile, client
 *     TLS required, server_tls_sslmode = verify-full, auth_file with the
 *     auth user's password, auth_query pgbouncer.get_auth($1),
 *     unix_socket_dir empty, ignore_startup_parameters = extra_float_digits)
 *     and [databases] `* = host=... port=...`;
 *   - a sidecar that runs `pkill -HUP --exact pgbouncer` when the mounted
 *     files change.
 */
#include "admin_console.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---------------------------------------------------------------- fixture */

static void pg_exec_ok(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	ExecStatusType st = PQresultStatus(r);
	ck_assert_msg(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(c));
	PQclear(r);
}

/*
 * Lets `user` log in to PostgreSQL over TCP with its client certificate
 * (the operators' auth user does): ssl_ca_file for the cluster and a
 * `hostssl dbname user ... cert` line before the fixture's password lines.
 * This binary's cluster is its own (run.sh), so the change stays here.
 */
static void pg_allow_cert_login(const char *dbname, const char *user)
{
	PGconn *c = pg_direct();
	char path[600], line[200], sql[800];
	snprintf(path, sizeof(path), "%s", query_value(c, "SHOW hba_file"));
	const char *old = read_file_tail(path, 64 * 1024);
	char *copy = strdup(old);
	FILE *f = fopen(path, "w");
	ck_assert_msg(f != NULL, "rewrite %s: %s", path, strerror(errno));
	snprintf(line, sizeof(line), "hostssl %s %s 127.0.0.1/32 cert\n", dbname, user);
	fputs(line, f);
	fputs(copy, f);
	fclose(f);
	free(copy);
	snprintf(sql, sizeof(sql), "ALTER SYSTEM SET ssl_ca_file = '%s'", pgv_cert("ca.crt"));
	pg_exec_ok(c, sql);
	pg_exec_ok(c, "SELECT pg_reload_conf()");
	PQfinish(c);
	/* the postmaster re-reads its files a moment later: new sessions show it (50 x 100 ms, 5 s on a loaded machine) */
	for (int i = 0; i < 50; i++) {
		c = pg_direct();
		bool done = strcmp(query_value(c, "SHOW ssl_ca_file"), pgv_cert("ca.crt")) == 0;
		PQfinish(c);
		if (done)
			return;
		sleep_ms(100);
	}
	ck_abort_msg("PostgreSQL did not take ssl_ca_file");
}

/* Runs SQL as the cluster's superuser in dbname. */
static void pg_setup(const char *dbname, const char *sql)
{
	char conninfo[700];
	snprintf(conninfo, sizeof(conninfo), "host=%s port=%s dbname=%s user=pgvadmin", getenv("PGV_TEST_PGSOCKDIR"),
		 getenv("PGV_TEST_PGPORT"), dbname);
	PGconn *c = PQconnectdb(conninfo);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	pg_exec_ok(c, sql);
	PQfinish(c);
}

/*
 * Starts pgvalve the way an operator's image does: as a program named
 * pgbouncer (a link to the binary under test), with the ini's pgbouncer
 * section named [pgbouncer]. The harness's own keys come first in that
 * section; `extra` follows and wins.
 */
static void start_as_pgbouncer(struct pgv *p, const char *extra, const char *databases, const char *userlist)
{
	char bindir[700], link[760];
	pgv_reserve_dir(p);
	snprintf(bindir, sizeof(bindir), "%s/bin", p->dir);
	ck_assert_int_eq(mkdir(bindir, 0755), 0);
	snprintf(link, sizeof(link), "%s/pgbouncer", bindir);
	ck_assert_msg(symlink(getenv("PGV_BINARY"), link) == 0, "symlink: %s", strerror(errno));
	setenv("PGV_BINARY", link, 1);
	setenv("PGV_TEST_INI_SECTION", "pgbouncer", 1);
	pgv_start_ex(p, extra, databases, userlist, NULL, 0);
}

/* What pgvalve wrote to stderr (the operators read no logfile). */
static const char *stderr_text(struct pgv *p)
{
	char path[700];
	snprintf(path, sizeof(path), "%s/stderr.log", p->dir);
	return read_file_tail(path, 256 * 1024);
}

/*
 * CloudNativePG's log writer: lines starting with a tab continue the one
 * before; every record must match its regex, or the operator logs it as
 * unmatched. Returns the number of records; fails on the first misfit.
 */
static int expect_cnpg_log_records(const char *text)
{
	regex_t re;
	int records = 0;
	ck_assert_int_eq(regcomp(&re, "^(.*) \\[([0-9]+)\\] ([A-Z]+) (.+)$", REG_EXTENDED), 0);
	char *copy = strdup(text), *save = NULL;
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (line[0] == '\t')
			continue;
		regmatch_t m[5];
		ck_assert_msg(regexec(&re, line, 5, m, 0) == 0, "stderr line does not match CloudNativePG's regex: %s",
			      line);
		char level[16] = "";
		int len = (int)(m[3].rm_eo - m[3].rm_so);
		snprintf(level, sizeof(level), "%.*s", len, line + m[3].rm_so);
		ck_assert_msg(strcmp(level, "LOG") == 0 || strcmp(level, "WARNING") == 0 ||
				      strcmp(level, "ERROR") == 0 || strcmp(level, "FATAL") == 0 ||
				      strcmp(level, "DEBUG") == 0 || strcmp(level, "NOISE") == 0,
			      "log level %s is not one of PgBouncer's: %s", level, line);
		records++;
	}
	free(copy);
	regfree(&re);
	return records;
}

/* ---------------------------------------------------------------- the console over peer authentication */

/* The OS user the console connection runs as: pgbouncer when root (created if missing), else this one. */
static const struct passwd *console_os_user(void)
{
	if (geteuid() != 0)
		return getpwuid(geteuid());
	if (getpwnam("pgbouncer") == NULL) {
		char *const argv[] = { "useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
				       "pgbouncer", NULL };
		char out[700];
		snprintf(out, sizeof(out), "%s/useradd.log", getenv("PGV_TEST_DIR"));
		ck_assert_msg(run_program(argv, NULL, out, 30) == 0, "useradd pgbouncer: %s", read_file_tail(out, 500));
	}
	const struct passwd *pw = getpwnam("pgbouncer");
	ck_assert_ptr_nonnull(pw);
	return pw;
}

/* One line per answer: "<cmd>|<status>|<ncols>|<col,col,...>|<rows as name=value;...>". */
static void console_report(FILE *out, PGconn *c, const char *cmd)
{
	PGresult *r = PQexec(c, cmd);
	fprintf(out, "%s|%s|%d|", cmd, PQresStatus(PQresultStatus(r)), PQnfields(r));
	for (int i = 0; i < PQnfields(r); i++)
		fprintf(out, "%s%s", i ? "," : "", PQfname(r, i));
	fputc('|', out);
	if (PQnfields(r) == 2)
		for (int row = 0; row < PQntuples(r); row++)
			fprintf(out, "%s=%s;", PQgetvalue(r, row, 0), PQgetvalue(r, row, 1));
	fputc('\n', out);
	PQclear(r);
}

/*
 * The operator's exporter and controller: as OS user pw, over the Unix
 * socket, user pgbouncer to database pgbouncer; SHOW POOLS/STATS/LISTS,
 * PAUSE, RESUME. Runs in a child that switches user; its report comes back
 * through a pipe (static buffer).
 */
static const char *console_as(struct pgv *p, const struct passwd *pw)
{
	static char report[16384];
	int fds[2];
	ck_assert_int_eq(pipe(fds), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(fds[0]);
		FILE *out = fdopen(fds[1], "w");
		if (geteuid() == 0 && (setgroups(0, NULL) != 0 || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0)) {
			fprintf(out, "setuid failed: %s\n", strerror(errno));
			_exit(1);
		}
		char conninfo[900];
		snprintf(conninfo, sizeof(conninfo), "host=%s port=%d dbname=pgbouncer user=pgbouncer connect_timeout=10",
			 p->dir, p->port);
		PGconn *c = PQconnectdb(conninfo);
		if (PQstatus(c) != CONNECTION_OK) {
			fprintf(out, "connect failed: %s\n", PQerrorMessage(c));
			_exit(1);
		}
		const char *cmds[] = { "SHOW POOLS;", "SHOW STATS;", "SHOW LISTS;", "PAUSE", "RESUME" };
		for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
			console_report(out, c, cmds[i]);
		PQfinish(c);
		fclose(out);
		_exit(0);
	}
	close(fds[1]);
	size_t n = 0;
	ssize_t got;
	while (n < sizeof(report) - 1 && (got = read(fds[0], report + n, sizeof(report) - 1 - n)) > 0)
		n += (size_t)got;
	report[n] = '\0';
	close(fds[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "console child: %s\n%s", report,
		      pgv_log_tail(p, 2000));
	return report;
}

/* The report line of one command (static buffer). */
static const char *report_line(const char *report, const char *cmd)
{
	static char line[8192];
	char prefix[64];
	snprintf(prefix, sizeof(prefix), "%s|", cmd);
	const char *at = strstr(report, prefix);
	ck_assert_msg(at != NULL, "no answer to %s in:\n%s", cmd, report);
	size_t len = strcspn(at, "\n");
	snprintf(line, sizeof(line), "%.*s", (int)len, at);
	return line;
}

/* SHOW POOLS as CloudNativePG decodes it with PgBouncer 1.24+: 17 columns in this order. */
static void expect_cnpg_pools(const char *report)
{
	const char *line = report_line(report, "SHOW POOLS;");
	ck_assert_msg(strstr(line, "|PGRES_TUPLES_OK|17|database,user,cl_active,cl_waiting,cl_active_cancel_req,"
				   "cl_waiting_cancel_req,sv_active,sv_active_cancel,sv_being_canceled,sv_idle,"
				   "sv_used,sv_tested,sv_login,maxwait,maxwait_us,pool_mode,load_balance_hosts|") != NULL,
		      "SHOW POOLS is not what CloudNativePG decodes: %s", line);
}

/*
 * SHOW STATS: PgBouncer 1.25's 23 columns in its order, with 1.26's login
 * counters after the bind counters (total_, then avg_). CloudNativePG reads
 * it by position and needs database first, then the totals.
 */
static void expect_pgbouncer_stats(const char *report)
{
	const char *line = report_line(report, "SHOW STATS;");
	ck_assert_msg(strstr(line, "|PGRES_TUPLES_OK|25|database,total_server_assignment_count,total_xact_count,"
				   "total_query_count,total_received,total_sent,total_xact_time,total_query_time,"
				   "total_wait_time,total_client_parse_count,total_server_parse_count,total_bind_count,"
				   "total_client_login_count,avg_server_assignment_count,avg_xact_count,avg_query_count,"
				   "avg_recv,avg_sent,avg_xact_time,avg_query_time,avg_wait_time,avg_client_parse_count,"
				   "avg_server_parse_count,avg_bind_count,avg_client_login_count|") != NULL,
		      "SHOW STATS is not PgBouncer 1.26's: %s", line);
}

/* SHOW LISTS: (list, items) pairs, every item an integer, every name one PgBouncer uses. */
static void expect_pgbouncer_lists(const char *report)
{
	static const char *const names[] = { "databases", "users", "peers", "pools", "peer_pools", "free_clients",
					     "used_clients", "login_clients", "free_servers", "used_servers",
					     "dns_names", "dns_zones", "dns_queries", "dns_pending" };
	const char *line = report_line(report, "SHOW LISTS;");
	ck_assert_msg(strstr(line, "|PGRES_TUPLES_OK|2|list,items|") != NULL, "SHOW LISTS: %s", line);
	const char *rows = strrchr(line, '|') + 1;
	int seen = 0;
	for (const char *r = rows; *r; seen++) {
		const char *eq = strchr(r, '='), *end = strchr(r, ';');
		ck_assert_msg(eq && end && eq < end, "SHOW LISTS row: %s", r);
		bool known = false;
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			known |= strlen(names[i]) == (size_t)(eq - r) && strncmp(names[i], r, (size_t)(eq - r)) == 0;
		ck_assert_msg(known, "SHOW LISTS names a list PgBouncer does not: %.*s", (int)(eq - r), r);
		char *num_end;
		strtol(eq + 1, &num_end, 10);
		ck_assert_msg(num_end == end && num_end > eq + 1, "SHOW LISTS item is not an integer: %.*s",
			      (int)(end - r), r);
		r = end + 1;
	}
	ck_assert_int_eq(seen, (int)(sizeof(names) / sizeof(names[0])));
}

/* ---------------------------------------------------------------- CloudNativePG */

/* The auth user's lookup function as CloudNativePG creates it in auth_dbname. */
#define CNPG_USER_SEARCH \
	"CREATE OR REPLACE FUNCTION public.user_search(uname TEXT) RETURNS TABLE (usename name, passwd text) " \
	"LANGUAGE sql SECURITY DEFINER AS 'SELECT usename, passwd FROM pg_catalog.pg_shadow WHERE usename=$1;';" \
	"REVOKE ALL ON FUNCTION public.user_search(text) FROM public;" \
	"GRANT EXECUTE ON FUNCTION public.user_search(text) TO md5_user;"

/* The ini CloudNativePG generates (parameters sorted), with this test's paths and the local cluster. */
static const char *cnpg_ini_params(const char *hba)
{
	static char buf[4096];
	snprintf(buf, sizeof(buf),
		 "pool_mode = session\n"
		 "auth_user = md5_user\n"
		 "auth_query = SELECT usename, passwd FROM public.user_search($1)\n"
		 "auth_dbname = postgres\n"
		 "\n"
		 "admin_users = pgbouncer\n"
		 "auth_file =\n"
		 "auth_hba_file = %s\n"
		 "auth_type = hba\n"
		 "client_tls_ca_file = %s\n"
		 "client_tls_cert_file = %s\n"
		 "client_tls_key_file = %s\n"
		 "client_tls_sslmode = prefer\n"
		 "ignore_startup_parameters = extra_float_digits,options\n"
		 "log_stats = 0\n"
		 "logfile =\n"
		 "server_tls_ca_file = %s\n"
		 "server_tls_cert_file = %s\n"
		 "server_tls_key_file = %s\n"
		 "server_tls_sslmode = verify-ca\n",
		 hba, pgv_cert("ca.crt"), pgv_cert("server.crt"), pgv_cert("server.key"), pgv_cert("ca.crt"),
		 pgv_cert("md5_user.crt"),
		 pgv_cert("md5_user.key"));
	return buf;
}

/* The hba file CloudNativePG writes; not as root, peer needs a map from this OS user to pgbouncer. */
static const char *cnpg_hba(const struct passwd *console_user)
{
	static char text[512];
	if (geteuid() == 0) {
		snprintf(text, sizeof(text), "local pgbouncer pgbouncer peer\n\n"
					     "host all all 0.0.0.0/0 md5\nhost all all ::/0 md5\n");
		return pgv_write_test_file("op", "cnpg.hba", text);
	}
	char ident[256];
	snprintf(ident, sizeof(ident), "op %s pgbouncer\n", console_user->pw_name);
	snprintf(text, sizeof(text),
		 "local pgbouncer pgbouncer peer map=op\n\nhost all all 0.0.0.0/0 md5\nhost all all ::/0 md5\n");
	const char *hba = pgv_write_test_file("op", "cnpg.hba", text);
	static char with_ident[1400];
	snprintf(with_ident, sizeof(with_ident), "%s\nauth_ident_file = %s", hba, pgv_write_test_file("op", "cnpg.ident", ident));
	return with_ident;
}

START_TEST(cloudnativepg_pooler)
{
	struct pgv p;
	char databases[200];
	const struct passwd *console_user = console_os_user();

	/* CloudNativePG's auth_dbname is postgres; only there does the auth user need its certificate */
	pg_allow_cert_login("postgres", "md5_user");
	pg_setup("postgres", CNPG_USER_SEARCH);
	snprintf(databases, sizeof(databases), "* = host=127.0.0.1 port=%d", pg_port_env());
	start_as_pgbouncer(&p, cnpg_ini_params(cnpg_hba(console_user)), databases, NULL);

	/* an application: md5 rule, password checked with the secret auth_query found (the user has none in a file) */
	char conninfo[600];
	snprintf(conninfo, sizeof(conninfo),
		 "host=127.0.0.1 port=%d dbname=pgvtest user=scram_user password=scram_pass sslmode=require "
		 "options='-c statement_timeout=0' connect_timeout=10",
		 p.port);
	PGconn *app = PQconnectdb(conninfo);
	ck_assert_msg(PQstatus(app) == CONNECTION_OK, "application login: %s\n%s", PQerrorMessage(app),
		      pgv_log_tail(&p, 3000));
	ck_assert_str_eq(query_value(app, "SELECT current_user"), "scram_user");
	ck_assert_msg(PQsslInUse(app), "client_tls_sslmode = prefer did not give TLS to a client asking for it");

	/* the auth user reached PostgreSQL with its certificate: no password for it exists anywhere here */
	PGconn *direct = pg_direct();
	ck_assert_str_eq(query_value(direct, "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) "
					     "WHERE a.usename = 'scram_user' AND s.ssl"),
			 "1");
	PQfinish(direct);

	/*
	 * The exporter and the controller over the Unix socket, peer-authenticated
	 * as pgbouncer. PAUSE in session mode waits for the clients holding
	 * servers (as PgBouncer's does), so the application leaves first and
	 * comes back after RESUME.
	 */
	PQfinish(app);
	const char *report = console_as(&p, console_user);
	expect_cnpg_pools(report);
	expect_pgbouncer_stats(report);
	expect_pgbouncer_lists(report);
	ck_assert_msg(strstr(report_line(report, "PAUSE"), "|PGRES_COMMAND_OK|") != NULL, "%s", report);
	ck_assert_msg(strstr(report_line(report, "RESUME"), "|PGRES_COMMAND_OK|") != NULL, "%s", report);
	app = PQconnectdb(conninfo);
	ck_assert_msg(PQstatus(app) == CONNECTION_OK, "login after RESUME: %s", PQerrorMessage(app));
	ck_assert_str_eq(query_value(app, "SELECT 1"), "1");

	/* a refused login and a reload also end up in the log the operator parses */
	snprintf(conninfo, sizeof(conninfo),
		 "host=127.0.0.1 port=%d dbname=pgvtest user=scram_user password=wrong sslmode=disable", p.port);
	PGconn *bad = PQconnectdb(conninfo);
	ck_assert_int_ne(PQstatus(bad), CONNECTION_OK);
	PQfinish(bad);
	kill(p.pid, SIGHUP);
	sleep_ms(500);	/* pacing: the reload's lines among those parsed below; the verdict does not count on them */
	PQfinish(app);

	/* SIGINT: the operator's stop; PgBouncer's safe shutdown, which ends once no client is left */
	ck_assert_int_eq(kill(p.pid, SIGINT), 0);
	/* the last client has gone: the exit is at once; 10 s on a loaded machine */
	double deadline = now_s() + 10;
	while (pgv_running(&p) && now_s() < deadline)
		sleep_ms(50);
	ck_assert_msg(!pgv_running(&p), "still running 10 s after SIGINT\n%s", pgv_log_tail(&p, 2000));
	int records = expect_cnpg_log_records(stderr_text(&p));
	ck_assert_msg(records >= 5, "only %d log records on stderr:\n%s", records, stderr_text(&p));
	ck_assert_msg(strstr(stderr_text(&p), "SASL authentication failed") != NULL,
		      "the refused login is not in stderr:\n%s", stderr_text(&p));
	pgv_stop(&p);
}
END_TEST

/* ---------------------------------------------------------------- Crunchy PGO */

/* PGO's auth function (schema pgbouncer), with md5_user standing in for _crunchypgbouncer. */
#define PGO_GET_AUTH \
	"CREATE SCHEMA IF NOT EXISTS pgbouncer;" \
	"GRANT USAGE ON SCHEMA pgbouncer TO md5_user;" \
	"CREATE OR REPLACE FUNCTION pgbouncer.get_auth(username TEXT) RETURNS TABLE(username TEXT, password TEXT) " \
	"LANGUAGE sql SECURITY DEFINER AS $$ SELECT rolname::TEXT, rolpassword::TEXT FROM pg_catalog.pg_authid " \
	"WHERE pg_authid.rolname = $1 AND pg_authid.rolcanlogin AND NOT pg_authid.rolsuper $$;" \
	"REVOKE ALL ON FUNCTION pgbouncer.get_auth(text) FROM public;" \
	"GRANT EXECUTE ON FUNCTION pgbouncer.get_auth(text) TO md5_user;"

/* The file PGO writes (%include of the user's file first), with this test's paths. */
static void write_pgo_ini(struct pgv *p, const char *user_file, const char *authfile)
{
	char path[700], text[4096];
	snprintf(path, sizeof(path), "%s/~postgres-operator.ini", p->dir);
	snprintf(text, sizeof(text),
		 "# Generated by postgres-operator. DO NOT EDIT.\n"
		 "# Your changes will not be saved.\n"
		 "\n[pgbouncer]\n%%include %s\n\n[pgbouncer]\n"
		 "auth_file = %s\n"
		 "auth_query = SELECT username, password from pgbouncer.get_auth($1)\n"
		 "auth_user = md5_user\n"
		 "client_tls_ca_file = %s\n"
		 "client_tls_cert_file = %s\n"
		 "client_tls_key_file = %s\n"
		 "client_tls_sslmode = require\n"
		 "conffile = %s\n"
		 "ignore_startup_parameters = extra_float_digits\n"
		 "listen_addr = 127.0.0.1\n"
		 "listen_port = %d\n"
		 "logfile =\n"
		 "server_tls_ca_file = %s\n"
		 "server_tls_sslmode = verify-full\n"
		 "unix_socket_dir =\n"
		 "\n[databases]\n* = host=localhost port=%d\n",
		 user_file, authfile, pgv_cert("ca.crt"), pgv_cert("server.crt"), pgv_cert("server.key"), path, p->port,
		 pgv_cert("ca.crt"), pg_port_env());
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	chmod(path, 0644);
}

/* pkill -HUP --exact pgbouncer, limited to this test's children so that nothing else on the machine hears it. */
static void pkill_hup_exact_pgbouncer(void)
{
	char parent[32], out[700];
	snprintf(parent, sizeof(parent), "%ld", (long)getpid());
	snprintf(out, sizeof(out), "%s/pkill-%ld.log", getenv("PGV_TEST_DIR"), (long)getpid());
	char *const argv[] = { "pkill", "-HUP", "--exact", "--parent", parent, "pgbouncer", NULL };
	ck_assert_msg(run_program(argv, NULL, out, 10) == 0, "pkill --exact pgbouncer found no process named pgbouncer");
}

static PGconn *pgo_client(struct pgv *p, const char *sslmode)
{
	char conninfo[600];
	snprintf(conninfo, sizeof(conninfo),
		 "host=127.0.0.1 port=%d dbname=pgvtest user=scram_user password=scram_pass sslmode=%s "
		 "connect_timeout=10",
		 p->port, sslmode);
	return PQconnectdb(conninfo);
}

START_TEST(crunchy_pgo)
{
	struct pgv p;
	char md5[36], authtext[128], user_file[700], ini[760];

	pg_setup("pgvtest", PGO_GET_AUTH);
	md5_secret("md5_user", "md5_pass", md5);
	snprintf(authtext, sizeof(authtext), "\"md5_user\" \"%s\"\n", md5);

	/* the harness's own ini only reserves the dir and the port; PGO's file is the one pgvalve runs on */
	pgv_reserve_dir(&p);
	p.port = pgv_pick_port();
	snprintf(user_file, sizeof(user_file), "%s/pgbouncer.ini", p.dir);
	FILE *f = fopen(user_file, "w");
	ck_assert_ptr_nonnull(f);
	fputs("admin_users = md5_user\ndefault_pool_size = 20\n", f);
	fclose(f);
	chmod(user_file, 0644);
	char authfile[700];
	snprintf(authfile, sizeof(authfile), "%s/users.txt", p.dir);
	f = fopen(authfile, "w");
	ck_assert_ptr_nonnull(f);
	fputs(authtext, f);
	fclose(f);
	chmod(authfile, 0644);
	write_pgo_ini(&p, user_file, authfile);
	snprintf(ini, sizeof(ini), "%s/~postgres-operator.ini", p.dir);

	char bindir[700], link[760], errfile[760];
	snprintf(bindir, sizeof(bindir), "%s/bin", p.dir);
	ck_assert_int_eq(mkdir(bindir, 0755), 0);
	snprintf(link, sizeof(link), "%s/pgbouncer", bindir);
	ck_assert_int_eq(symlink(getenv("PGV_BINARY"), link), 0);
	snprintf(errfile, sizeof(errfile), "%s/stderr.log", p.dir);
	const char *runas = getenv("PGV_TEST_RUNAS");
	char *argv_root[] = { link, "-u", (char *)runas, ini, NULL };
	char *argv_plain[] = { link, ini, NULL };
	p.pid = run_program_background(runas && *runas ? argv_root : argv_plain, errfile);

	/* client TLS is required: a plain client is refused, a TLS one gets in (server side verify-full) */
	PGconn *c = NULL;
	/* until the pgbouncer started just above listens: a process start, 10 s on a loaded machine */
	for (double deadline = now_s() + 10; now_s() < deadline; sleep_ms(100)) {
		c = pgo_client(&p, "require");
		if (PQstatus(c) == CONNECTION_OK)
			break;
		PQfinish(c);
		c = NULL;
	}
	ck_assert_msg(c != NULL, "no TLS login through PGO's config:\n%s", read_file_tail(errfile, 3000));
	ck_assert_str_eq(query_value(c, "SELECT current_user"), "scram_user");
	PGconn *plain = pgo_client(&p, "disable");
	ck_assert_int_ne(PQstatus(plain), CONNECTION_OK);
	PQfinish(plain);

	/* the user's file changes; PGO's sidecar signals every process named exactly pgbouncer */
	char admin_info[600];
	snprintf(admin_info, sizeof(admin_info),
		 "host=127.0.0.1 port=%d dbname=pgbouncer user=md5_user password=md5_pass sslmode=require", p.port);
	PGconn *admin = PQconnectdb(admin_info);
	ck_assert_msg(PQstatus(admin) == CONNECTION_OK, "console: %s", PQerrorMessage(admin));
	ck_assert_str_eq(config_value(admin, "default_pool_size"), "20");
	f = fopen(user_file, "w");
	ck_assert_ptr_nonnull(f);
	fputs("admin_users = md5_user\ndefault_pool_size = 7\n", f);
	fclose(f);
	pkill_hup_exact_pgbouncer();
	/* a reload is milliseconds; 5 s on a loaded machine */
	double deadline = now_s() + 5;
	while (strcmp(config_value(admin, "default_pool_size"), "7") != 0 && now_s() < deadline)
		sleep_ms(100);
	ck_assert_str_eq(config_value(admin, "default_pool_size"), "7");
	ck_assert_str_eq(config_value(admin, "conffile"), ini);
	ck_assert_str_eq(query_value(c, "SELECT 2"), "2");
	PQfinish(admin);
	PQfinish(c);
	ck_assert_int_ge(expect_cnpg_log_records(read_file_tail(errfile, 256 * 1024)), 1);
	stop_program(p.pid);
	p.pid = 0;
}
END_TEST

static Suite *operators_suite(void)
{
	Suite *s = suite_create("operators");
	TCase *tc = pgv_tcase_create("operators", 60);
	/* the auth user logs in to PostgreSQL with TLS: PostgreSQL must serve it */
	tcase_set_tags(tc, "server_tls");
	tcase_add_test(tc, cloudnativepg_pooler);
	tcase_add_test(tc, crunchy_pgo);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return pgv_run_suite(operators_suite());
}
