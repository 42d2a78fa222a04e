/*
 * test_tenants.c - tenants looked up in a database (tenant.h), end to
 * end: a metadata database tenant_meta with a tenants table, three tenant
 * databases, and logins that name their tenant by the user name's
 * suffix, by options and by the TLS server name. current_database()
 * says where each login landed; the lookups table (written by
 * tenant_query's function) says how many lookups ran and with which id.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/*
 * tenant_query's function: every lookup leaves its id in lookups (as
 * bound, so a hostile id shows there verbatim) and takes 0.3 s, so that
 * logins arriving together overlap one lookup (tslow's 2 s: a slow one).
 */
static const char *const meta_setup[] = {
	"CREATE TABLE tenants (id text PRIMARY KEY, host text, port text, dbname text, pool_size text, "
	"pool_mode text, max_client_conn text, auth_user text, target_session_attrs text, "
	"banned boolean DEFAULT false)",
	"CREATE TABLE lookups (id text, at timestamptz DEFAULT clock_timestamp())",
	"CREATE FUNCTION tenant_row(tid text) RETURNS SETOF tenants LANGUAGE plpgsql SECURITY DEFINER AS $$ "
	"BEGIN INSERT INTO lookups (id) VALUES (tid); PERFORM pg_sleep(CASE tid WHEN 'tslow' THEN 2 ELSE 0.3 END); "
	"RETURN QUERY SELECT * FROM tenants WHERE id = tid; END $$",
	"GRANT EXECUTE ON FUNCTION tenant_row(text) TO md5_user",
};

/* PostgreSQL's port (run.sh's PGV_TEST_PGPORT). */
static int pg_port(void)
{
	return atoi(getenv("PGV_TEST_PGPORT"));
}

static void exec_ok(PGconn *conn, const char *sql)
{
	PGresult *res = PQexec(conn, sql);
	ck_assert_msg(PQresultStatus(res) == PGRES_COMMAND_OK || PQresultStatus(res) == PGRES_TUPLES_OK,
		      "%s: %s", sql, PQerrorMessage(conn));
	PQclear(res);
}

/* A superuser connection to database db of the test cluster, over its Unix socket. */
static PGconn *pg_db(const char *db)
{
	char conninfo[700];
	snprintf(conninfo, sizeof(conninfo), "host=%s port=%d dbname=%s user=pgvadmin", getenv("PGV_TEST_PGSOCKDIR"),
		 pg_port(), db);
	PGconn *conn = PQconnectdb(conninfo);
	ck_assert_msg(PQstatus(conn) == CONNECTION_OK, "%s: %s", db, PQerrorMessage(conn));
	return conn;
}

/* The databases, made once per cluster (the tests of this binary share it); the tenants' rows reset each test. */
static void tenants_setup(void)
{
	PGconn *pg = pg_direct();
	const char *dbs[] = { "tenant_meta", "tenant_a", "tenant_b", "tenant_c" };
	for (size_t i = 0; i < sizeof(dbs) / sizeof(dbs[0]); i++) {
		char sql[200];
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM pg_database WHERE datname = '%s'", dbs[i]);
		if (strcmp(query_value(pg, sql), "0") == 0) {
			snprintf(sql, sizeof(sql), "CREATE DATABASE %s", dbs[i]);
			exec_ok(pg, sql);
			if (i == 0) {
				PGconn *meta = pg_db("tenant_meta");
				for (size_t j = 0; j < sizeof(meta_setup) / sizeof(meta_setup[0]); j++)
					exec_ok(meta, meta_setup[j]);
				PQfinish(meta);
			}
		}
	}
	exec_ok(pg, "ALTER DATABASE tenant_meta ALLOW_CONNECTIONS true");
	PQfinish(pg);
	/* auth_query's function, in tenant_a only: a login it serves was looked up in its tenant's database. */
	PGconn *a = pg_db("tenant_a");
	exec_ok(a, "CREATE OR REPLACE FUNCTION pgv_auth(u text, OUT usename name, OUT passwd text) LANGUAGE sql "
		   "SECURITY DEFINER AS $$ SELECT usename, passwd FROM pg_catalog.pg_shadow WHERE usename = u $$");
	PQfinish(a);
	PGconn *meta = pg_db("tenant_meta");
	char sql[600];
	exec_ok(meta, "TRUNCATE tenants, lookups");
	snprintf(sql, sizeof(sql),
		 "INSERT INTO tenants VALUES ('t1', '127.0.0.1', '%d', 'tenant_a', NULL, NULL, NULL, 'md5_user', NULL), "
		 "('t2', '127.0.0.1', '%d', 'tenant_b', '2', 'transaction', '6', NULL, NULL), "
		 "('t3', '127.0.0.1', '%d', 'tenant_c', NULL, NULL, NULL, NULL, 'read-write'), "
		 "('tbad', '127.0.0.1', '%d', 'tenant_a', NULL, 'bogus', NULL, NULL, NULL), "
		 "('tbad2', '127.0.0.1', '%d', 'tenant_a', NULL, NULL, NULL, NULL, 'master'), "
		 "('tslow', '127.0.0.1', '%d', 'tenant_c', NULL, NULL, NULL, NULL, NULL)",
		 pg_port(), pg_port(), pg_port(), pg_port(), pg_port(), pg_port());
	exec_ok(meta, sql);
	PQfinish(meta);
}

/* A pgvalve routing tenants (extra: more settings, later ones win). */
static void start_tenants(struct pgv *p, const char *extra)
{
	char conf[2048];
	tenants_setup();
	snprintf(conf, sizeof(conf),
		 "auth_type = md5\nadmin_users = md5_user\npool_mode = transaction\n"
		 "tenant_source = host=127.0.0.1 port=%d dbname=tenant_meta user=md5_user\n"
		 "tenant_query = SELECT * FROM tenant_row($1)\n"
		 "tenant_from = user, options, sni\ntenant_cache_ttl = 60\nquery_wait_timeout = 3\n"
		 "client_tls_sslmode = allow\nclient_tls_cert_file = %s\nclient_tls_key_file = %s\n%s",
		 pg_port(), pgv_cert("server.crt"), pgv_cert("server.key"), extra ? extra : "");
	pgv_start(p, conf, std_databases(), "\"md5_user\" \"md5_pass\"\n");
}

/* A libpq login as user (with options, or TLS to server name sni, if given); never NULL. */
static PGconn *tenant_connect(struct pgv *p, const char *dbname, const char *user, const char *options,
			      const char *sni)
{
	const char *kw[16], *val[16];
	char port[16];
	int n = 0;
	snprintf(port, sizeof(port), "%d", p->port);
	kw[n] = "host", val[n++] = sni ? sni : "127.0.0.1";
	kw[n] = "hostaddr", val[n++] = "127.0.0.1";
	kw[n] = "port", val[n++] = port;
	kw[n] = "dbname", val[n++] = dbname;
	kw[n] = "user", val[n++] = user;
	kw[n] = "password", val[n++] = "md5_pass";
	kw[n] = "sslmode", val[n++] = sni ? "require" : "disable";
	kw[n] = "gssencmode", val[n++] = "disable";
	kw[n] = "connect_timeout", val[n++] = "10";
	if (options)
		kw[n] = "options", val[n++] = options;
	kw[n] = NULL, val[n] = NULL;
	PGconn *conn = PQconnectdbParams(kw, val, 0);
	ck_assert_msg(conn != NULL, "libpq out of memory");
	return conn;
}

/* The database a login lands in (fails the test if it cannot log in). */
static char *landed(struct pgv *p, const char *dbname, const char *user, const char *options, const char *sni)
{
	PGconn *conn = tenant_connect(p, dbname, user, options, sni);
	ck_assert_msg(PQstatus(conn) == CONNECTION_OK, "%s%s%s: %s\n%s", user, options ? " options " : "",
		      options ? options : "", PQerrorMessage(conn), pgv_log_tail(p, 2000));
	char *db = strdup(query_value(conn, "SELECT current_database()"));
	PQfinish(conn);
	return db;
}

/* The lookups tenant_query ran with this id (as bound). */
static int lookups_of(const char *id)
{
	PGconn *meta = pg_db("tenant_meta");
	const char *params[1] = { id };
	PGresult *res = PQexecParams(meta, "SELECT count(*) FROM lookups WHERE id = $1", 1, NULL, params, NULL, NULL, 0);
	ck_assert_msg(PQresultStatus(res) == PGRES_TUPLES_OK, "%s", PQerrorMessage(meta));
	int n = atoi(PQgetvalue(res, 0, 0));
	PQclear(res);
	PQfinish(meta);
	return n;
}

#define ck_landed(db, want) do { char *_d = (db); ck_assert_str_eq(_d, want); free(_d); } while (0)

/* alice.t42 logs in as alice to tenant t42, whatever database it names. */
START_TEST(routes_by_user_suffix)
{
	struct pgv p = { 0 };
	start_tenants(&p, NULL);
	ck_landed(landed(&p, "pgvtest", "md5_user.t1", NULL, NULL), "tenant_a");
	ck_landed(landed(&p, "pgvtest", "md5_user.t2", NULL, NULL), "tenant_b");
	/* The second login of t1 is served from the cache: one lookup. */
	ck_landed(landed(&p, "tenant_b", "md5_user.t1", NULL, NULL), "tenant_a");
	ck_assert_int_eq(lookups_of("t1"), 1);
	/* No tenant named: the login goes by its database name, as without tenants. */
	ck_landed(landed(&p, "pgvtest", "md5_user", NULL, NULL), "pgvtest");
	/* A tenant's database is reached through its tenant only, never by its name. */
	PGconn *conn = tenant_connect(&p, "tenant:t1", "md5_user", NULL, NULL);
	ck_assert_msg(PQstatus(conn) != CONNECTION_OK, "database tenant:t1 reached by name");
	PQfinish(conn);
	pgv_stop(&p);
}
END_TEST

/* -c pgvalve.tenant=t2 and Supavisor's reference=t3; the other settings of options still apply. */
START_TEST(routes_by_options)
{
	struct pgv p = { 0 };
	start_tenants(&p, NULL);
	ck_landed(landed(&p, "pgvtest", "md5_user", "-c pgvalve.tenant=t2", NULL), "tenant_b");
	ck_landed(landed(&p, "pgvtest", "md5_user", "reference=t3", NULL), "tenant_c");
	PGconn *conn = tenant_connect(&p, "pgvtest", "md5_user", "-c DateStyle=German --pgvalve.tenant=t1", NULL);
	ck_assert_msg(PQstatus(conn) == CONNECTION_OK, "%s", PQerrorMessage(conn));
	ck_assert_str_eq(query_value(conn, "SELECT current_database()"), "tenant_a");
	ck_assert_str_eq(query_value(conn, "SHOW DateStyle"), "German, DMY");
	PQfinish(conn);
	pgv_stop(&p);
}
END_TEST

/* Under client TLS, the server name's first label (libpq sends host= as SNI). */
START_TEST(routes_by_sni)
{
	struct pgv p = { 0 };
	start_tenants(&p, NULL);
	ck_landed(landed(&p, "pgvtest", "md5_user", NULL, "t1.tenants.test"), "tenant_a");
	ck_landed(landed(&p, "pgvtest", "md5_user", NULL, "t3.tenants.test"), "tenant_c");
	/* A server name and a user name naming different tenants: refused. */
	PGconn *conn = tenant_connect(&p, "pgvtest", "md5_user.t2", NULL, "t1.tenants.test");
	ck_assert_msg(PQstatus(conn) != CONNECTION_OK, "t1 by SNI and t2 by user name: logged in");
	ck_assert_msg(strstr(PQerrorMessage(conn), "tenant ids") != NULL, "%s", PQerrorMessage(conn));
	PQfinish(conn);
	pgv_stop(&p);
}
END_TEST

/* t2's row says pool_size 2: six clients' transactions at once never hold more than two servers. */
START_TEST(tenant_pool_size_holds)
{
	struct pgv p = { 0 };
	start_tenants(&p, NULL);
	PGconn *conns[6];
	for (int i = 0; i < 6; i++) {
		conns[i] = tenant_connect(&p, "pgvtest", "md5_user.t2", NULL, NULL);
		ck_assert_msg(PQstatus(conns[i]) == CONNECTION_OK, "%s", PQerrorMessage(conns[i]));
	}
	/* Its row's max_client_conn is 6: a seventh client is refused, a client of another tenant is not. */
	PGconn *seventh = tenant_connect(&p, "pgvtest", "md5_user.t2", NULL, NULL);
	ck_assert_msg(PQstatus(seventh) != CONNECTION_OK && strstr(PQerrorMessage(seventh), "max_db_client_connections"),
		      "a seventh client of t2: %s", PQerrorMessage(seventh));
	PQfinish(seventh);
	ck_landed(landed(&p, "pgvtest", "md5_user.t3", NULL, NULL), "tenant_c");
	for (int i = 0; i < 6; i++)
		ck_assert(PQsendQuery(conns[i], "SELECT pg_sleep(0.4), current_database()"));
	PGconn *pg = pg_direct();
	int most = 0;
	for (double end = now_s() + 1.5; now_s() < end; sleep_ms(50)) {
		int n = atoi(query_value(pg, "SELECT count(*) FROM pg_stat_activity WHERE datname = 'tenant_b' "
					     "AND usename = 'md5_user'"));
		most = n > most ? n : most;
	}
	PQfinish(pg);
	for (int i = 0; i < 6; i++) {
		PGresult *res = PQgetResult(conns[i]);
		ck_assert_msg(PQresultStatus(res) == PGRES_TUPLES_OK, "%s", PQerrorMessage(conns[i]));
		ck_assert_str_eq(PQgetvalue(res, 0, 1), "tenant_b");
		PQclear(res);
		while ((res = PQgetResult(conns[i])))
			PQclear(res);
		PQfinish(conns[i]);
	}
	ck_assert_msg(most == 2, "tenant t2 (pool_size 2) held %d servers at most", most);
	pgv_stop(&p);
}
END_TEST

/*
 * A user not in auth_file: auth_query runs in its tenant's own database
 * (pgv_auth exists only in tenant_a), as the row's auth_user; SCRAM's keys
 * then log the server in, as for a configured database. t3's row has no
 * auth_user (and there is no global one): its logins cannot be checked.
 */
START_TEST(auth_query_in_tenant_database)
{
	struct pgv p = { 0 };
	start_tenants(&p, "auth_query = SELECT * FROM pgv_auth($1)\n");
	const char *kw[10], *val[10];
	char port[16];
	pgv_conn_params(&p, "pgvtest", "scram_user.t1", "scram_pass", kw, val, port);
	const char *msg = pgv_login_message(kw, val, "scram_user");
	ck_assert_msg(msg == NULL, "scram_user.t1: %s\n%s", msg, pgv_log_tail(&p, 2000));
	PGconn *conn = PQconnectdbParams(kw, val, 0);
	ck_assert_msg(PQstatus(conn) == CONNECTION_OK, "%s", PQerrorMessage(conn));
	ck_assert_str_eq(query_value(conn, "SELECT current_database() || ' ' || current_user"), "tenant_a scram_user");
	PQfinish(conn);
	pgv_conn_params(&p, "pgvtest", "scram_user.t1", "wrong", kw, val, port);
	ck_assert_ptr_nonnull(pgv_login_message(kw, val, "scram_user"));
	pgv_conn_params(&p, "pgvtest", "scram_user.t3", "scram_pass", kw, val, port);
	msg = pgv_login_message(kw, val, "scram_user");
	ck_assert_msg(msg && strstr(msg, "authentication failed"), "scram_user.t3: %s", msg ? msg : "logged in");
	pgv_stop(&p);
}
END_TEST

/* The console as md5_user (an admin_users entry); never NULL. */
static PGconn *console(struct pgv *p)
{
	PGconn *admin = pgv_connect(p, "pgbouncer", "md5_user", "md5_pass");
	ck_assert_msg(PQstatus(admin) == CONNECTION_OK, "%s", PQerrorMessage(admin));
	return admin;
}

/* A console command's outcome: NULL if it worked, else its error message (static buffer). */
static const char *console_run(PGconn *admin, const char *command)
{
	static char msg[512];
	PGresult *res = PQexec(admin, command);
	bool ok = PQresultStatus(res) == PGRES_COMMAND_OK || PQresultStatus(res) == PGRES_TUPLES_OK;
	snprintf(msg, sizeof(msg), "%s", PQerrorMessage(admin));
	PQclear(res);
	return ok ? NULL : msg;
}

/* Rows of a console SHOW whose first column is value. */
static int show_rows_with(PGconn *admin, const char *show, const char *value)
{
	PGresult *res = PQexec(admin, show);
	ck_assert_msg(PQresultStatus(res) == PGRES_TUPLES_OK, "%s: %s", show, PQerrorMessage(admin));
	int n = 0;
	for (int i = 0; i < PQntuples(res); i++)
		n += strcmp(PQgetvalue(res, i, 0), value) == 0;
	PQclear(res);
	return n;
}

/* Column col of the row of a console SHOW whose first column is key: NULL if there is none (static buffer). */
static const char *show_cell(PGconn *admin, const char *show, const char *key, const char *col)
{
	static char value[256];
	PGresult *res = PQexec(admin, show);
	ck_assert_msg(PQresultStatus(res) == PGRES_TUPLES_OK, "%s: %s", show, PQerrorMessage(admin));
	bool found = false;
	for (int i = 0; i < PQntuples(res) && !found; i++) {
		found = strcmp(PQgetvalue(res, i, 0), key) == 0;
		if (found)
			snprintf(value, sizeof(value), "%s", PQgetvalue(res, i, PQfnumber(res, col)));
	}
	PQclear(res);
	return found ? value : NULL;
}

/*
 * A tenant moved to another database: within tenant_cache_ttl its logins
 * still land where the cached row says; RECONNECT TENANT reads the row
 * again and from then on new logins and the next transaction of a client
 * already there go to the new database.
 */
START_TEST(moved_tenant_reconnect)
{
	struct pgv p = { 0 };
	start_tenants(&p, NULL);
	PGconn *early = tenant_connect(&p, "pgvtest", "md5_user.t1", NULL, NULL);
	ck_assert_msg(PQstatus(early) == CONNECTION_OK, "%s", PQerrorMessage(early));
	ck_assert_str_eq(query_value(early, "SELECT current_database()"), "tenant_a");
	PGconn *meta = pg_db("tenant_meta");
	exec_ok(meta, "UPDATE tenants SET dbname = 'tenant_b', pool_mode = 'session' WHERE id = 't1'");
	PQfinish(meta);
	ck_landed(landed(&p, "pgvtest", "md5_user.t1", NULL, NULL), "tenant_a");
	PGconn *admin = console(&p);
	const char *err = console_run(admin, "RECONNECT TENANT t1");
	ck_assert_msg(err == NULL, "RECONNECT TENANT t1: %s", err);
	err = console_run(admin, "RECONNECT TENANT nosuch");
	ck_assert_msg(err && strstr(err, "no such tenant"), "RECONNECT TENANT nosuch: %s", err ? err : "ok");
	char *db = NULL;
	for (double end = now_s() + 5; now_s() < end; sleep_ms(100)) {
		free(db);
		db = landed(&p, "pgvtest", "md5_user.t1", NULL, NULL);
		if (strcmp(db, "tenant_b") == 0)
			break;
	}
	ck_landed(db, "tenant_b");
	ck_assert_str_eq(query_value(early, "SELECT current_database()"), "tenant_b");
	/* The row's new pool_mode holds for the tenant's pool (no cached mode of the old row). */
	const char *mode = show_cell(admin, "SHOW POOLS", "tenant:t1", "pool_mode");
	ck_assert_msg(mode && strcmp(mode, "session") == 0, "tenant:t1's pool_mode: %s", mode ? mode : "no pool");
	PQfinish(early);
	PQfinish(admin);
	pgv_stop(&p);
}
END_TEST

/*
 * BAN TENANT closes the tenant's clients and refuses its logins with a
 * message of its own, other tenants go on; UNBAN TENANT lets it in again.
 * A tenant banned before its first login is never looked up.
 */
START_TEST(ban_tenant)
{
	struct pgv p = { 0 };
	start_tenants(&p, NULL);
	PGconn *c3 = tenant_connect(&p, "pgvtest", "md5_user.t3", NULL, NULL);
	PGconn *c1 = tenant_connect(&p, "pgvtest", "md5_user.t1", NULL, NULL);
	ck_assert_msg(PQstatus(c3) == CONNECTION_OK && PQstatus(c1) == CONNECTION_OK, "%s %s", PQerrorMessage(c3),
		      PQerrorMessage(c1));
	PGconn *admin = console(&p);
	const char *err = console_run(admin, "BAN TENANT t3");
	ck_assert_msg(err == NULL, "BAN TENANT t3: %s", err);
	PGresult *res = PQexec(c3, "SELECT current_database()");
	ck_assert_msg(PQresultStatus(res) != PGRES_TUPLES_OK && strstr(PQerrorMessage(c3), "banned"),
		      "t3's client after BAN: %s", PQerrorMessage(c3));
	PQclear(res);
	PQfinish(c3);
	PGconn *conn = tenant_connect(&p, "pgvtest", "md5_user.t3", NULL, NULL);
	ck_assert_msg(PQstatus(conn) != CONNECTION_OK && strstr(PQerrorMessage(conn), "tenant \"t3\" is banned"),
		      "a login of t3 after BAN: %s", PQerrorMessage(conn));
	PQfinish(conn);
	ck_assert_str_eq(query_value(c1, "SELECT current_database()"), "tenant_a");
	const char *state = show_cell(admin, "SHOW TENANTS", "t3", "state");
	ck_assert_msg(state && strcmp(state, "banned") == 0, "SHOW TENANTS: t3 %s", state ? state : "not listed");
	ck_assert_ptr_null(console_run(admin, "UNBAN TENANT t3"));
	ck_landed(landed(&p, "pgvtest", "md5_user.t3", NULL, NULL), "tenant_c");
	/* Banned before its first login (a quoted id): refused without a lookup. */
	ck_assert_ptr_null(console_run(admin, "BAN TENANT \"t-new\""));
	conn = tenant_connect(&p, "pgvtest", "md5_user.t-new", NULL, NULL);
	ck_assert_msg(strstr(PQerrorMessage(conn), "banned"), "%s", PQerrorMessage(conn));
	PQfinish(conn);
	ck_assert_int_eq(lookups_of("t-new"), 0);
	/* SHOW TENANTS lists them by id: t-new, t1, t3. */
	res = PQexec(admin, "SHOW TENANTS");
	ck_assert_int_eq(PQntuples(res), 3);
	ck_assert_str_eq(PQgetvalue(res, 0, 0), "t-new");
	ck_assert_str_eq(PQgetvalue(res, 1, 0), "t1");
	ck_assert_str_eq(PQgetvalue(res, 2, 0), "t3");
	PQclear(res);
	/* TENANT after any other verb is no command. */
	err = console_run(admin, "PAUSE TENANT t1");
	ck_assert_msg(err && strstr(err, "invalid command"), "PAUSE TENANT t1: %s", err ? err : "ok");
	PQfinish(c1);
	PQfinish(admin);
	pgv_stop(&p);
}
END_TEST

/*
 * A tenant unused for autodb_idle_timeout is forgotten with its database
 * (and an unknown one once no longer remembered): SHOW TENANTS and SHOW
 * DATABASES drop them, and the next login looks the tenant up again.
 */
START_TEST(idle_tenant_forgotten)
{
	struct pgv p = { 0 };
	start_tenants(&p, "autodb_idle_timeout = 1\nserver_idle_timeout = 1\ntenant_cache_ttl = 2\n");
	ck_landed(landed(&p, "pgvtest", "md5_user.t3", NULL, NULL), "tenant_c");
	struct raw_error err = { 0 };
	ck_assert_int_eq(raw_login(p.port, "pgvtest", "md5_user.gone", "md5_pass", &err), -1);
	PGconn *admin = console(&p);
	ck_assert_int_eq(show_rows_with(admin, "SHOW TENANTS", "t3"), 1);
	ck_assert_int_eq(show_rows_with(admin, "SHOW DATABASES", "tenant:t3"), 1);
	double end = now_s() + 10;
	while ((show_rows_with(admin, "SHOW TENANTS", "t3") || show_rows_with(admin, "SHOW TENANTS", "gone")) &&
	       now_s() < end)
		sleep_ms(200);
	ck_assert_int_eq(show_rows_with(admin, "SHOW TENANTS", "t3"), 0);
	ck_assert_int_eq(show_rows_with(admin, "SHOW TENANTS", "gone"), 0);
	ck_assert_int_eq(show_rows_with(admin, "SHOW DATABASES", "tenant:t3"), 0);
	ck_landed(landed(&p, "pgvtest", "md5_user.t3", NULL, NULL), "tenant_c");
	ck_assert_int_eq(lookups_of("t3"), 2);
	PQfinish(admin);
	pgv_stop(&p);
}
END_TEST

/* Drives the started logins until each is logged in or failed, or until deadline (now_s()). */
static void poll_logins(PGconn **conns, int n, double deadline)
{
	for (int pending = n; pending > 0 && now_s() < deadline; sleep_ms(10)) {
		pending = 0;
		for (int i = 0; i < n; i++) {
			PostgresPollingStatusType st = PQconnectPoll(conns[i]);
			pending += st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED;
		}
	}
}

/*
 * A storm of logins of a tenant whose lookup is slow (2 s): they wait for
 * one lookup, while a cached tenant's logins go on at once meanwhile.
 */
START_TEST(slow_lookup_storm)
{
	struct pgv p = { 0 };
	start_tenants(&p, NULL);
	ck_landed(landed(&p, "pgvtest", "md5_user.t1", NULL, NULL), "tenant_a");
	enum { N = 20 };
	PGconn *slow[N];
	const char *kw[16], *val[16];
	char port[16];
	pgv_conn_params(&p, "pgvtest", "md5_user.tslow", "md5_pass", kw, val, port);
	double t0 = now_s();
	for (int i = 0; i < N; i++)
		slow[i] = PQconnectStartParams(kw, val, 0);
	poll_logins(slow, N, now_s() + 0.3);	/* their startup packets are in */
	for (int i = 0; i < 5; i++) {
		double t1 = now_s();
		ck_landed(landed(&p, "pgvtest", "md5_user.t1", NULL, NULL), "tenant_a");
		ck_assert_msg(now_s() - t1 < pgv_time_bound(0.5, 1.5), "a cached tenant's login took %.1f s beside a "
			      "slow lookup", now_s() - t1);
	}
	poll_logins(slow, N, now_s() + 10);
	for (int i = 0; i < N; i++) {
		ck_assert_msg(PQstatus(slow[i]) == CONNECTION_OK, "%s", PQerrorMessage(slow[i]));
		ck_assert_str_eq(query_value(slow[i], "SELECT current_database()"), "tenant_c");
		PQfinish(slow[i]);
	}
	ck_assert_msg(now_s() - t0 >= 1.8, "the slow lookup's logins were served in %.1f s", now_s() - t0);
	ck_assert_int_eq(lookups_of("tslow"), 1);
	pgv_stop(&p);
}
END_TEST

/* An unknown tenant: PostgreSQL's "database does not exist" SQLSTATE, and remembered briefly. */
START_TEST(unknown_tenant_refused)
{
	struct pgv p = { 0 };
	start_tenants(&p, NULL);
	struct raw_error err = { 0 };
	ck_assert_int_eq(raw_login(p.port, "pgvtest", "md5_user.nosuch", "md5_pass", &err), -1);
	ck_assert_str_eq(err.sqlstate, "3D000");
	ck_assert_msg(strstr(err.message, "nosuch") != NULL, "%s", err.message);
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(raw_login(p.port, "pgvtest", "md5_user.nosuch", "md5_pass", &err), -1);
	ck_assert_str_eq(err.sqlstate, "3D000");
	ck_assert_int_eq(lookups_of("nosuch"), 1);
	pgv_stop(&p);
}
END_TEST

/* Escapes id for options as PostgreSQL splits it: a backslash before white space and backslashes. */
static void options_escape(const char *prefix, const char *id, char *out, size_t size)
{
	size_t n = (size_t)snprintf(out, size, "%s", prefix);
	for (const char *c = id; *c && n + 3 < size; c++) {
		if (*c == ' ' || *c == '\\')
			out[n++] = '\\';
		out[n++] = *c;
	}
	out[n] = '\0';
}

/* Quotes, backslashes, SQL and long ids: bound as they are, the tenants table intact, others served. */
START_TEST(hostile_tenant_ids)
{
	struct pgv p = { 0 };
	start_tenants(&p, NULL);
	const char *ids[] = {
		"t1'; DROP TABLE tenants; --",
		"x' OR '1'='1",
		"back\\slash\\'",
		"q\"uo\"te",
		"$1$$; DELETE FROM tenants",
	};
	char opts[12000], user[128];
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		struct raw_error err = { 0 };
		snprintf(user, sizeof(user), "md5_user.%s", ids[i]);
		ck_assert_int_eq(raw_login(p.port, "pgvtest", user, "md5_pass", &err), -1);
		ck_assert_msg(strcmp(err.sqlstate, "3D000") == 0, "%s: %s %s", ids[i], err.sqlstate, err.message);
		ck_assert_msg(lookups_of(ids[i]) == 1, "%s: not looked up as bound", ids[i]);
		options_escape("-c pgvalve.tenant=", ids[i], opts, sizeof(opts));
		PGconn *conn = tenant_connect(&p, "pgvtest", "md5_user", opts, NULL);
		ck_assert_msg(PQstatus(conn) != CONNECTION_OK && strstr(PQerrorMessage(conn), "does not exist"),
			      "%s by options: %s", ids[i], PQerrorMessage(conn));
		PQfinish(conn);
	}
	/* 200 bytes of SQL is looked up; 9,000 bytes is refused before any lookup. */
	char longid[9001];
	memset(longid, 'x', sizeof(longid) - 1);
	longid[sizeof(longid) - 1] = '\0';
	const char *sql = "'); DROP TABLE tenants; SELECT ('";
	memcpy(longid, sql, strlen(sql));
	longid[200] = '\0';
	options_escape("reference=", longid, opts, sizeof(opts));
	PGconn *conn = tenant_connect(&p, "pgvtest", "md5_user", opts, NULL);
	ck_assert_msg(strstr(PQerrorMessage(conn), "does not exist"), "%s", PQerrorMessage(conn));
	PQfinish(conn);
	ck_assert_int_eq(lookups_of(longid), 1);
	longid[200] = 'x';
	options_escape("reference=", longid, opts, sizeof(opts));
	conn = tenant_connect(&p, "pgvtest", "md5_user", opts, NULL);
	ck_assert_msg(strstr(PQerrorMessage(conn), "tenant id too long"), "%s", PQerrorMessage(conn));
	PQfinish(conn);
	conn = tenant_connect(&p, "pgvtest", "md5_user", "-c pgvalve.tenant=", NULL);
	ck_assert_msg(strstr(PQerrorMessage(conn), "empty tenant id"), "%s", PQerrorMessage(conn));
	PQfinish(conn);
	PGconn *meta = pg_db("tenant_meta");
	ck_assert_str_eq(query_value(meta, "SELECT count(*) FROM tenants"), "6");
	PQfinish(meta);
	ck_landed(landed(&p, "pgvtest", "md5_user.t1", NULL, NULL), "tenant_a");
	pgv_stop(&p);
}
END_TEST

/* A row with an invalid value: that tenant is refused with the reason logged, the others are served. */
START_TEST(bad_row_refused)
{
	struct pgv p = { 0 };
	start_tenants(&p, NULL);
	PGconn *conn = tenant_connect(&p, "pgvtest", "md5_user.tbad", NULL, NULL);
	ck_assert_msg(PQstatus(conn) != CONNECTION_OK, "tenant tbad (pool_mode bogus) logged in");
	ck_assert_msg(strstr(PQerrorMessage(conn), "row is invalid"), "%s", PQerrorMessage(conn));
	PQfinish(conn);
	ck_assert_msg(pgv_log_contains(&p, "tenant \"tbad\": its row is refused") && pgv_log_contains(&p, "bogus"),
		      "%s", pgv_log_tail(&p, 2000));
	ck_landed(landed(&p, "pgvtest", "md5_user.t3", NULL, NULL), "tenant_c");
	/* target_session_attrs is checked too: 'master' is no value of it (t3's 'read-write' is). */
	conn = tenant_connect(&p, "pgvtest", "md5_user.tbad2", NULL, NULL);
	ck_assert_msg(PQstatus(conn) != CONNECTION_OK && strstr(PQerrorMessage(conn), "row is invalid"), "%s",
		      PQerrorMessage(conn));
	PQfinish(conn);
	ck_assert_msg(pgv_log_contains(&p, "tenant \"tbad2\": its row is refused") &&
		      pgv_log_contains(&p, "target_session_attrs"), "%s", pgv_log_tail(&p, 2000));
	pgv_stop(&p);
}
END_TEST

/*
 * Logins of one tenant not known yet, all at once: one lookup, and all of
 * them land. SHOW TENANTS lists it afterwards.
 */
START_TEST(concurrent_logins_one_lookup)
{
	struct pgv p = { 0 };
	start_tenants(&p, NULL);
	enum { N = 8 };
	PGconn *conns[N];
	const char *kw[16], *val[16];
	char port[16];
	pgv_conn_params(&p, "pgvtest", "md5_user.t3", "md5_pass", kw, val, port);
	for (int i = 0; i < N; i++)
		conns[i] = PQconnectStartParams(kw, val, 0);
	poll_logins(conns, N, now_s() + 20);
	for (int i = 0; i < N; i++) {
		ck_assert_msg(PQstatus(conns[i]) == CONNECTION_OK, "%s", PQerrorMessage(conns[i]));
		ck_assert_str_eq(query_value(conns[i], "SELECT current_database()"), "tenant_c");
	}
	ck_assert_int_eq(lookups_of("t3"), 1);
	PGconn *admin = pgv_connect(&p, "pgbouncer", "md5_user", "md5_pass");
	ck_assert_msg(PQstatus(admin) == CONNECTION_OK, "%s", PQerrorMessage(admin));
	PGresult *res = PQexec(admin, "SHOW TENANTS");
	ck_assert_msg(PQresultStatus(res) == PGRES_TUPLES_OK, "%s", PQerrorMessage(admin));
	ck_assert_int_eq(PQntuples(res), 1);
	ck_assert_str_eq(PQgetvalue(res, 0, PQfnumber(res, "tenant")), "t3");
	ck_assert_str_eq(PQgetvalue(res, 0, PQfnumber(res, "state")), "ok");
	ck_assert_str_eq(PQgetvalue(res, 0, PQfnumber(res, "database")), "tenant_c");
	ck_assert_int_eq(atoi(PQgetvalue(res, 0, PQfnumber(res, "clients"))), N);
	PQclear(res);
	PQfinish(admin);
	for (int i = 0; i < N; i++)
		PQfinish(conns[i]);
	pgv_stop(&p);
}
END_TEST

/*
 * The metadata database refuses connections (and its sessions are cut):
 * a cached tenant, its row past tenant_cache_ttl, is still served at once;
 * an unknown one is refused with a clear error within query_wait_timeout.
 */
START_TEST(metadata_down)
{
	struct pgv p = { 0 };
	start_tenants(&p, "tenant_cache_ttl = 1\n");
	ck_landed(landed(&p, "pgvtest", "md5_user.t1", NULL, NULL), "tenant_a");
	PGconn *pg = pg_direct();
	exec_ok(pg, "ALTER DATABASE tenant_meta ALLOW_CONNECTIONS false");
	exec_ok(pg, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'tenant_meta'");
	sleep_ms(1200);	/* t1's row is stale now */
	for (int i = 0; i < 3; i++) {
		double t0 = now_s();
		ck_landed(landed(&p, "pgvtest", "md5_user.t1", NULL, NULL), "tenant_a");
		ck_assert_msg(now_s() - t0 < pgv_time_bound(1.0, 2.5), "a cached tenant waited %.1f s", now_s() - t0);
	}
	/* The first with the reason (the pool's cached login error), the next from the failed lookup's memory. */
	const char *want[] = { "not currently accepting connections", "cannot be looked up" };
	for (int i = 0; i < 2; i++) {
		double t0 = now_s();
		PGconn *conn = tenant_connect(&p, "pgvtest", "md5_user.t2", NULL, NULL);
		double took = now_s() - t0;
		ck_assert_msg(PQstatus(conn) != CONNECTION_OK, "t2 logged in with the metadata database down");
		ck_assert_msg(strstr(PQerrorMessage(conn), want[i]), "%s", PQerrorMessage(conn));
		ck_assert_msg(took < 3.0 + 1.5, "refused after %.1f s (query_wait_timeout 3)", took);
		PQfinish(conn);
	}
	exec_ok(pg, "ALTER DATABASE tenant_meta ALLOW_CONNECTIONS true");
	PQfinish(pg);
	pgv_stop(&p);
}
END_TEST

/*
 * tenant_source a TCP port that accepts (the kernel's backlog) and never
 * answers: the lookup is given up at query_wait_timeout and its login
 * refused with that reason, while other logins go on meanwhile (the loop
 * does not wait for the lookup).
 */
START_TEST(silent_metadata_server)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sin);
	ck_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 && listen(fd, 16) == 0 &&
		  getsockname(fd, (struct sockaddr *)&sin, &len) == 0);
	char extra[256];
	snprintf(extra, sizeof(extra), "tenant_source = host=127.0.0.1 port=%d dbname=tenant_meta user=md5_user\n",
		 ntohs(sin.sin_port));
	struct pgv p = { 0 };
	start_tenants(&p, extra);
	const char *kw[16], *val[16];
	char port[16];
	pgv_conn_params(&p, "pgvtest", "md5_user.t1", "md5_pass", kw, val, port);
	double t0 = now_s();
	PGconn *waiting = PQconnectStartParams(kw, val, 0);
	ck_assert(waiting && PQstatus(waiting) != CONNECTION_BAD);
	/* While t1's lookup hangs, a login by database name is served at once. */
	sleep_ms(300);
	double t1 = now_s();
	ck_landed(landed(&p, "pgvtest", "md5_user", NULL, NULL), "pgvtest");
	ck_assert_msg(now_s() - t1 < pgv_time_bound(1.0, 2.5), "a login waited %.1f s beside a hanging lookup",
		      now_s() - t1);
	PostgresPollingStatusType st;
	while ((st = PQconnectPoll(waiting)) != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED && now_s() - t0 < 10)
		sleep_ms(20);
	double took = now_s() - t0;
	ck_assert_msg(st == PGRES_POLLING_FAILED, "t1 logged in through a silent tenant_source");
	ck_assert_msg(strstr(PQerrorMessage(waiting), "within query_wait_timeout"), "%s", PQerrorMessage(waiting));
	ck_assert_msg(took > 2.5 && took < 3.0 + 1.5, "refused after %.1f s (query_wait_timeout 3)", took);
	PQfinish(waiting);
	pgv_stop(&p);
	close(fd);
}
END_TEST

/* A login as md5_user.<tenant> to one instance, over its own Unix socket; never NULL. */
static PGconn *instance_connect(struct pgv *p, const char *tenant)
{
	char conninfo[1024];
	snprintf(conninfo, sizeof(conninfo), "host=%s port=%d dbname=pgvtest user=md5_user.%s password=md5_pass", p->dir,
		 p->port, tenant);
	PGconn *conn = PQconnectdb(conninfo);
	ck_assert_msg(PQstatus(conn) == CONNECTION_OK, "%s: %s", p->dir, PQerrorMessage(conn));
	return conn;
}

/*
 * Two instances on one port (so_reuseport), the table their one source of
 * truth: t1 moved to tenant_b is reached there by both once its row is
 * past tenant_cache_ttl, by a new login (which waits for the row read
 * again) and by a client already there (the row of a tenant in use is
 * read again without a login, its servers replaced).
 */
START_TEST(fleet_follows_the_table)
{
	int port = pgv_pick_port();
	struct pgv a = { 0 }, b = { 0 };
	const char *extra = "so_reuseport = 1\ntenant_cache_ttl = 1\n";
	tenants_setup();
	char conf[2048];
	snprintf(conf, sizeof(conf),
		 "auth_type = md5\nadmin_users = md5_user\npool_mode = transaction\n"
		 "tenant_source = host=127.0.0.1 port=%d dbname=tenant_meta user=md5_user\n"
		 "tenant_query = SELECT * FROM tenant_row($1)\ntenant_from = user\nquery_wait_timeout = 3\n%s",
		 pg_port(), extra);
	pgv_start_on_port(&a, port, conf, std_databases(), "\"md5_user\" \"md5_pass\"\n");
	pgv_start_on_port(&b, port, conf, std_databases(), "\"md5_user\" \"md5_pass\"\n");
	PGconn *on_a = instance_connect(&a, "t1"), *on_b = instance_connect(&b, "t1");
	ck_assert_str_eq(query_value(on_a, "SELECT current_database()"), "tenant_a");
	ck_assert_str_eq(query_value(on_b, "SELECT current_database()"), "tenant_a");
	PQfinish(on_a);
	PGconn *meta = pg_db("tenant_meta");
	exec_ok(meta, "UPDATE tenants SET dbname = 'tenant_b' WHERE id = 't1'");
	PQfinish(meta);
	sleep_ms(1200);	/* past tenant_cache_ttl */
	on_a = instance_connect(&a, "t1");
	ck_assert_str_eq(query_value(on_a, "SELECT current_database()"), "tenant_b");
	PQfinish(on_a);
	const char *db = "";
	for (double end = now_s() + 5; now_s() < end; sleep_ms(100))
		if (strcmp(db = query_value(on_b, "SELECT current_database()"), "tenant_b") == 0)
			break;
	ck_assert_str_eq(db, "tenant_b");
	PQfinish(on_b);
	for (int i = 0; i < 6; i++)	/* the shared port: either instance */
		ck_landed(landed(&a, "pgvtest", "md5_user.t1", NULL, NULL), "tenant_b");
	pgv_stop(&b);
	pgv_stop(&a);
}
END_TEST

/* Runs SELECT 1 on conn until it fails (up to 5 s): libpq's message then, else NULL (static buffer). */
static const char *until_closed(PGconn *conn)
{
	static char msg[512];
	for (double end = now_s() + 5; now_s() < end; sleep_ms(100)) {
		PGresult *res = PQexec(conn, "SELECT 1");
		bool ok = PQresultStatus(res) == PGRES_TUPLES_OK;
		PQclear(res);
		if (!ok) {
			snprintf(msg, sizeof(msg), "%s", PQerrorMessage(conn));
			return msg;
		}
	}
	return NULL;
}

/*
 * The table decides: a tenant deleted from it, or whose row says banned,
 * has its clients closed once its row is read again (tenant_cache_ttl 1,
 * no login needed) and its logins refused, each with its own message;
 * the row unbanned lets it in again.
 */
START_TEST(removed_or_banned_by_row)
{
	struct pgv p = { 0 };
	start_tenants(&p, "tenant_cache_ttl = 1\n");
	PGconn *c2 = tenant_connect(&p, "pgvtest", "md5_user.t2", NULL, NULL);
	PGconn *c3 = tenant_connect(&p, "pgvtest", "md5_user.t3", NULL, NULL);
	ck_assert_msg(PQstatus(c2) == CONNECTION_OK && PQstatus(c3) == CONNECTION_OK, "%s %s", PQerrorMessage(c2),
		      PQerrorMessage(c3));
	PGconn *meta = pg_db("tenant_meta");
	exec_ok(meta, "UPDATE tenants SET banned = true WHERE id = 't3'");
	exec_ok(meta, "DELETE FROM tenants WHERE id = 't2'");
	const char *msg = until_closed(c3);
	ck_assert_msg(msg && strstr(msg, "tenant \"t3\" is banned"), "t3's client: %s", msg ? msg : "still served");
	msg = until_closed(c2);
	ck_assert_msg(msg && strstr(msg, "tenant \"t2\" does not exist"), "t2's client: %s", msg ? msg : "still served");
	PQfinish(c2);
	PQfinish(c3);
	PGconn *conn = tenant_connect(&p, "pgvtest", "md5_user.t3", NULL, NULL);
	ck_assert_msg(strstr(PQerrorMessage(conn), "is banned"), "a login of t3: %s", PQerrorMessage(conn));
	PQfinish(conn);
	struct raw_error err = { 0 };
	ck_assert_int_eq(raw_login(p.port, "pgvtest", "md5_user.t2", "md5_pass", &err), -1);
	ck_assert_str_eq(err.sqlstate, "3D000");
	exec_ok(meta, "UPDATE tenants SET banned = false WHERE id = 't3'");
	PQfinish(meta);
	sleep_ms(1200);	/* past tenant_cache_ttl: the next login reads the row again */
	ck_landed(landed(&p, "pgvtest", "md5_user.t3", NULL, NULL), "tenant_c");
	pgv_stop(&p);
}
END_TEST

/*
 * workers = 2: each worker looks its tenants up; the console on the port
 * merges SHOW TENANTS by tenant (one row each, clients summed), and BAN
 * TENANT reaches every worker.
 */
START_TEST(workers_share_the_console)
{
	struct pgv p = { 0 };
	start_tenants(&p, "workers = 2\n");
	enum { N = 6 };
	PGconn *conns[N];
	for (int i = 0; i < N; i++) {
		conns[i] = tenant_connect(&p, "pgvtest", i % 2 ? "md5_user.t1" : "md5_user.t3", NULL, NULL);
		ck_assert_msg(PQstatus(conns[i]) == CONNECTION_OK, "%s", PQerrorMessage(conns[i]));
		ck_assert_str_eq(query_value(conns[i], "SELECT current_database()"), i % 2 ? "tenant_a" : "tenant_c");
	}
	PGconn *admin = console(&p);
	ck_assert_int_eq(show_rows_with(admin, "SHOW TENANTS", "t1"), 1);
	const char *clients = show_cell(admin, "SHOW TENANTS", "t1", "clients");
	ck_assert_msg(clients && atoi(clients) == N / 2, "SHOW TENANTS: t1 has %s clients", clients ? clients : "no row");
	ck_assert_ptr_null(console_run(admin, "BAN TENANT t3"));
	for (int i = 0; i < 4; i++) {	/* whichever worker takes it */
		PGconn *conn = tenant_connect(&p, "pgvtest", "md5_user.t3", NULL, NULL);
		ck_assert_msg(strstr(PQerrorMessage(conn), "banned"), "%s", PQerrorMessage(conn));
		PQfinish(conn);
	}
	for (int i = 0; i < N; i++)
		PQfinish(conns[i]);
	PQfinish(admin);
	pgv_stop(&p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tenants");
	TCase *tc = pgv_tcase_create("routing", 60);
	tcase_add_test(tc, routes_by_user_suffix);
	tcase_add_test(tc, routes_by_options);
	tcase_add_test(tc, routes_by_sni);
	tcase_add_test(tc, tenant_pool_size_holds);
	tcase_add_test(tc, concurrent_logins_one_lookup);
	tcase_add_test(tc, auth_query_in_tenant_database);
	tcase_add_test(tc, moved_tenant_reconnect);
	tcase_add_test(tc, ban_tenant);
	tcase_add_test(tc, idle_tenant_forgotten);
	tcase_add_test(tc, fleet_follows_the_table);
	tcase_add_test(tc, slow_lookup_storm);
	tcase_add_test(tc, workers_share_the_console);
	tcase_add_test(tc, removed_or_banned_by_row);
	suite_add_tcase(s, tc);
	TCase *bad = pgv_tcase_create("refusals", 60);
	tcase_add_test(bad, unknown_tenant_refused);
	tcase_add_test(bad, hostile_tenant_ids);
	tcase_add_test(bad, bad_row_refused);
	tcase_add_test(bad, metadata_down);
	tcase_add_test(bad, silent_metadata_server);
	suite_add_tcase(s, bad);
	return pgv_run_suite(s);
}
