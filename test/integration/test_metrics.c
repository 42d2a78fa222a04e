/*
 * test_metrics.c - the Prometheus endpoint (metrics_port): its text parsed
 * by promtool and compared with the admin console under load, a real
 * Prometheus scraping it and answering PromQL, OpenMetrics on request,
 * /health, the auth token, reload, hostile HTTP clients, the latency
 * histograms, and workers = 2 totals.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#define DB "pgvtest"
#define USER "pgbench_user"
#define PASS "bench_pass"
#define BASE "auth_type = md5\npool_mode = transaction\nadmin_users = " USER "\nmax_client_conn = 300\n"
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

struct http_reply {
	int status;		/* 0: no status line (closed or timed out) */
	char headers[4096];
	char *body;		/* malloc'd, NUL-terminated */
};

static void reply_free(struct http_reply *r)
{
	free(r->body);
	r->body = NULL;
}

/* Reads until EOF (or timeout_ms without a byte); what came, NUL-terminated, malloc'd. */
static char *read_all(int fd, int timeout_ms, size_t *len_out)
{
	size_t cap = 65536, len = 0;
	char *buf = malloc(cap);
	ck_assert_ptr_nonnull(buf);
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		if (poll(&pfd, 1, timeout_ms) <= 0)
			break;
		if (len + 4096 > cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			ck_assert_ptr_nonnull(buf);
		}
		ssize_t n = read(fd, buf + len, cap - len - 1);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	*len_out = len;
	return buf;
}

/* Sends raw bytes as one request and parses whatever comes back. */
static void http_raw(int port, const char *request, size_t reqlen, struct http_reply *r)
{
	memset(r, 0, sizeof(*r));
	int fd = raw_connect(port);
	ck_assert_msg(fd >= 0, "connect to the metrics port %d", port);
	raw_send(fd, request, reqlen);
	size_t len;
	char *all = read_all(fd, 10000, &len);
	close(fd);
	if (sscanf(all, "HTTP/1.%*d %d", &r->status) != 1)
		r->status = 0;
	char *sep = strstr(all, "\r\n\r\n");
	if (sep) {
		size_t hl = (size_t)(sep - all);
		snprintf(r->headers, sizeof(r->headers), "%.*s", (int)(hl < sizeof(r->headers) - 1 ? hl : sizeof(r->headers) - 1), all);
		r->body = strdup(sep + 4);
	} else {
		r->body = strdup("");
	}
	free(all);
}

static void http_get(int port, const char *path, const char *extra_headers, struct http_reply *r)
{
	char req[4096];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s\r\n", path,
			 extra_headers ? extra_headers : "");
	http_raw(port, req, (size_t)n, r);
}

/* The value of the sample line that starts with series + ' ' (e.g. name{labels}); NAN-free: fails if absent. */
static bool series_value(const char *body, const char *series, double *out)
{
	size_t sl = strlen(series);
	for (const char *p = body; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, series, sl) == 0 && p[sl] == ' ') {
			*out = strtod(p + sl + 1, NULL);
			return true;
		}
	}
	return false;
}

static double metric(const char *body, const char *series)
{
	double v;
	ck_assert_msg(series_value(body, series, &v), "no series %s in:\n%.3000s", series, body);
	return v;
}

static char *scrape(int mport)
{
	struct http_reply r;
	http_get(mport, "/metrics", NULL, &r);
	ck_assert_msg(r.status == 200, "GET /metrics: status %d\n%s", r.status, r.headers);
	return r.body;
}

/* A connected socket to 127.0.0.1:port, or -1 if nothing accepts. */
static int try_connect(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void start_with_metrics(struct pgv *p, int *mport, const char *extra)
{
	char ini[2048];
	*mport = pgv_pick_http_port(0);
	snprintf(ini, sizeof(ini), BASE "metrics_port = %d\n%s", *mport, extra ? extra : "");
	pgv_start(p, ini, std_databases(), std_userlist());
}

static PGconn *login(struct pgv *p, const char *dbname)
{
	PGconn *c = pgv_connect(p, dbname, USER, PASS);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "login to %s: %s", dbname, PQerrorMessage(c));
	return c;
}

/* Notices (a worker left out of a console command) stay off the test's output. */
static void quiet(void *arg, const PGresult *res)
{
	(void)arg;
	(void)res;
}

static void exec_ok(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK || PQresultStatus(r) == PGRES_COMMAND_OK, "%s: %s", sql,
		      PQerrorMessage(c));
	PQclear(r);
}

/* A column of the console's SHOW row whose first column is key. */
static double console_value(PGconn *a, const char *show, const char *key, const char *col)
{
	PGresult *r = PQexec(a, show);
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	int c = PQfnumber(r, col);
	ck_assert_msg(c >= 0, "%s has no column %s", show, col);
	for (int i = 0; i < PQntuples(r); i++)
		if (strcmp(PQgetvalue(r, i, 0), key) == 0) {
			double v = strtod(PQgetvalue(r, i, c), NULL);
			PQclear(r);
			return v;
		}
	PQclear(r);
	ck_abort_msg("%s: no row %s", show, key);
	return 0;
}

/* A column of the console's SHOW row whose first two columns are key and key2 (SHOW POOLS: database, user). */
static double console_value2(PGconn *a, const char *show, const char *key, const char *key2, const char *col)
{
	PGresult *r = PQexec(a, show);
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	int c = PQfnumber(r, col);
	ck_assert_msg(c >= 0, "%s has no column %s", show, col);
	for (int i = 0; i < PQntuples(r); i++)
		if (strcmp(PQgetvalue(r, i, 0), key) == 0 && strcmp(PQgetvalue(r, i, 1), key2) == 0) {
			double v = strtod(PQgetvalue(r, i, c), NULL);
			PQclear(r);
			return v;
		}
	PQclear(r);
	ck_abort_msg("%s: no row %s/%s", show, key, key2);
	return 0;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

/* promtool check metrics on text; exit status 0 expected, its output in the failure message. */
static void expect_promtool_ok(struct pgv *p, const char *text)
{
	char in[700], out[700], cmd[1600];
	snprintf(in, sizeof(in), "%s/scrape.txt", p->dir);
	snprintf(out, sizeof(out), "%s/promtool.out", p->dir);
	write_file(in, text);
	snprintf(cmd, sizeof(cmd), "promtool check metrics < '%s'", in);
	char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	int rc = run_program(argv, NULL, out, 30);
	ck_assert_msg(rc == 0, "promtool check metrics: exit %d\n%s", rc, read_file_tail(out, 3000));
}

/* pgbench -S for `seconds` through pgvalve in a background process. */
static pid_t pgbench_background(struct pgv *p, int clients, int seconds)
{
	char port[16], cl[16], secs[16], out[700];
	snprintf(port, sizeof(port), "%d", p->port);
	snprintf(cl, sizeof(cl), "%d", clients);
	snprintf(secs, sizeof(secs), "%d", seconds);
	snprintf(out, sizeof(out), "%s/pgbench.out", p->dir);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char *argv[] = { "pgbench", "-n", "-S", "-c", cl, "-T", secs, "-h", "127.0.0.1", "-p", port, "-U", USER,
				 DB, NULL };
		char *env[] = { "PGPASSWORD=" PASS, NULL };
		_exit(run_program(argv, env, out, seconds + 60) == 0 ? 0 : 1);
	}
	return pid;
}

/* ---------------------------------------------------------------- tests */

/* Off by default: no metrics_port, nothing listens (the setting shows 0). */
START_TEST(off_by_default)
{
	struct pgv p;
	pgv_start(&p, BASE, std_databases(), std_userlist());
	PGconn *a = login(&p, "pgbouncer");
	ck_assert_str_eq(query_value(a, "SHOW CONFIG"), "admin_users");
	PGresult *r = PQexec(a, "SHOW CONFIG");
	bool seen = false;
	for (int i = 0; i < PQntuples(r); i++)
		if (strcmp(PQgetvalue(r, i, 0), "metrics_port") == 0) {
			ck_assert_str_eq(PQgetvalue(r, i, 1), "0");
			seen = true;
		}
	PQclear(r);
	ck_assert(seen);
	ck_assert(!pgv_log_contains(&p, "metrics: listening"));
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* The console's SHOW POOLS row of (DB, USER) and SHOW STATS row of DB are what body (a scrape) says. */
static void expect_console_agrees(PGconn *a, const char *body)
{
	const char *pl = "{database=\"" DB "\",user=\"" USER "\"}";
	char s[256];
	struct { const char *metric, *col; } pools[] = {
		{ "pgbouncer_pools_client_active_connections", "cl_active" },
		{ "pgbouncer_pools_client_waiting_connections", "cl_waiting" },
		{ "pgbouncer_pools_server_active_connections", "sv_active" },
		{ "pgbouncer_pools_server_idle_connections", "sv_idle" },
		{ "pgbouncer_pools_server_used_connections", "sv_used" },
		{ "pgbouncer_pools_server_testing_connections", "sv_tested" },
		{ "pgbouncer_pools_server_login_connections", "sv_login" },
	};
	PGresult *r = PQexec(a, "SHOW POOLS");
	int row = -1;
	for (int i = 0; i < PQntuples(r); i++)
		if (strcmp(PQgetvalue(r, i, 0), DB) == 0 && strcmp(PQgetvalue(r, i, 1), USER) == 0)
			row = i;
	ck_assert_int_ge(row, 0);
	for (size_t i = 0; i < ARRAY_LEN(pools); i++) {
		snprintf(s, sizeof(s), "%s%s", pools[i].metric, pl);
		double want = strtod(PQgetvalue(r, row, PQfnumber(r, pools[i].col)), NULL);
		ck_assert_msg(metric(body, s) == want, "%s = %g, SHOW POOLS %s = %g", s, metric(body, s), pools[i].col,
			      want);
	}
	PQclear(r);
	struct { const char *metric, *col; double scale; } stats[] = {
		{ "pgbouncer_stats_queries_pooled_total", "total_query_count", 1 },
		{ "pgbouncer_stats_sql_transactions_pooled_total", "total_xact_count", 1 },
		{ "pgbouncer_stats_server_assignments_total", "total_server_assignment_count", 1 },
		{ "pgbouncer_stats_received_bytes_total", "total_received", 1 },
		{ "pgbouncer_stats_sent_bytes_total", "total_sent", 1 },
		{ "pgbouncer_stats_queries_duration_seconds_total", "total_query_time", 1e-6 },
		{ "pgbouncer_stats_server_in_transaction_seconds_total", "total_xact_time", 1e-6 },
		{ "pgbouncer_stats_client_wait_seconds_total", "total_wait_time", 1e-6 },
	};
	for (size_t i = 0; i < ARRAY_LEN(stats); i++) {
		snprintf(s, sizeof(s), "%s{database=\"" DB "\"}", stats[i].metric);
		double want = console_value(a, "SHOW STATS", DB, stats[i].col) * stats[i].scale;
		double got = metric(body, s);
		ck_assert_msg(got >= want - 1e-6 && got <= want + 1e-6, "%s = %.9g, SHOW STATS %s = %.9g", s, got,
			      stats[i].col, want);
	}
}

/*
 * Under pgbench load: promtool accepts the scrape, every exporter family is
 * there, and the numbers agree with the console (counters between two
 * console reads around the scrape; gauges and counters exactly once idle).
 */
START_TEST(exporter_series_match_console)
{
	struct pgv p;
	int mport;
	start_with_metrics(&p, &mport, NULL);
	PGconn *a = login(&p, "pgbouncer");
	pid_t bench = pgbench_background(&p, 4, 4);
	sleep_s(1.5);

	double before = console_value(a, "SHOW STATS", DB, "total_query_count");
	char *body = scrape(mport);
	double after = console_value(a, "SHOW STATS", DB, "total_query_count");
	double during = metric(body, "pgbouncer_stats_queries_pooled_total{database=\"" DB "\"}");
	ck_assert_msg(before > 0 && before <= during && during <= after, "console %.0f .. %.0f, metrics %.0f", before,
		      after, during);
	expect_promtool_ok(&p, body);
	free(body);

	int status;
	ck_assert_int_eq(waitpid(bench, &status, 0), bench);
	char bench_out[700];
	snprintf(bench_out, sizeof(bench_out), "%s/pgbench.out", p.dir);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "pgbench: %s", read_file_tail(bench_out, 2000));

	/* idle now: exact agreement, with two clients holding the pool */
	PGconn *c1 = login(&p, DB), *c2 = login(&p, DB);
	exec_ok(c1, "BEGIN");
	exec_ok(c1, "SELECT 1");
	body = scrape(mport);
	expect_promtool_ok(&p, body);
	expect_console_agrees(a, body);
	const char *pl = "{database=\"" DB "\",user=\"" USER "\"}";
	char s[256];
	snprintf(s, sizeof(s), "pgbouncer_pools_client_active_connections%s", pl);
	ck_assert_double_eq(metric(body, s), 2);
	snprintf(s, sizeof(s), "pgbouncer_pools_server_active_connections%s", pl);
	ck_assert_double_eq(metric(body, s), 1);
	/* SHOW LISTS, CONFIG, DATABASES, VERSION */
	ck_assert_double_eq(metric(body, "pgbouncer_databases"), console_value(a, "SHOW LISTS", "databases", "items"));
	ck_assert_double_eq(metric(body, "pgbouncer_users"), console_value(a, "SHOW LISTS", "users", "items"));
	ck_assert_double_eq(metric(body, "pgbouncer_pools"), console_value(a, "SHOW LISTS", "pools", "items"));
	ck_assert_double_eq(metric(body, "pgbouncer_used_clients"), console_value(a, "SHOW LISTS", "used_clients", "items"));
	ck_assert_double_eq(metric(body, "pgbouncer_used_servers"), console_value(a, "SHOW LISTS", "used_servers", "items"));
	ck_assert_double_eq(metric(body, "pgbouncer_config_max_client_connections"), 300);
	ck_assert_double_eq(metric(body, "pgbouncer_up"), 1);
	ck_assert_msg(strstr(body, "# TYPE pgbouncer_stats_queries_pooled_total counter\n"), "counter type");
	ck_assert_msg(strstr(body, "# TYPE pgbouncer_pools_client_active_connections gauge\n"), "gauge type");
	ck_assert_msg(strstr(body, "pgbouncer_version_info{version=\""), "version_info");
	snprintf(s, sizeof(s), "pgbouncer_databases_current_connections{name=\"" DB "\",host=\"127.0.0.1\",port=\"%s\","
			       "database=\"" DB "\",force_user=\"\",pool_mode=\"\"}", getenv("PGV_TEST_PGPORT"));
	ck_assert_double_eq(metric(body, s), console_value(a, "SHOW DATABASES", DB, "current_connections"));
	free(body);
	PQfinish(c1);
	PQfinish(c2);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* Accept: application/openmetrics-text gets OpenMetrics: its content type, counter families without _total, # EOF. */
START_TEST(openmetrics_on_request)
{
	struct pgv p;
	int mport;
	start_with_metrics(&p, &mport, NULL);
	PGconn *c = login(&p, DB);
	exec_ok(c, "SELECT 1");
	struct http_reply r;
	http_get(mport, "/metrics", "Accept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5\r\n", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_msg(strstr(r.headers, "application/openmetrics-text; version=1.0.0"), "%s", r.headers);
	ck_assert_msg(strstr(r.body, "# TYPE pgbouncer_stats_queries_pooled counter\n"), "%.2000s", r.body);
	ck_assert_msg(strstr(r.body, "\npgbouncer_stats_queries_pooled_total{database=\"" DB "\"} "), "sample");
	ck_assert_msg(strstr(r.body, "# TYPE pgbouncer_version info\n"), "info type");
	size_t len = strlen(r.body);
	ck_assert_msg(len > 6 && strcmp(r.body + len - 6, "# EOF\n") == 0, "ends with # EOF");
	reply_free(&r);
	http_get(mport, "/metrics", NULL, &r);
	ck_assert_msg(strstr(r.headers, "text/plain; version=0.0.4"), "%s", r.headers);
	ck_assert_msg(!strstr(r.body, "# EOF"), "no # EOF in the 0.0.4 format");
	reply_free(&r);
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/* A real Prometheus scrapes pgvalve; PromQL through its HTTP API sees the clients that are connected. */
START_TEST(prometheus_scrapes_pgvalve)
{
	struct pgv p;
	int mport;
	start_with_metrics(&p, &mport, NULL);
	int pport = pgv_pick_http_port(mport);
	char cfg[700], data[700], out[700], text[1024], listen[64];
	snprintf(cfg, sizeof(cfg), "%s/prometheus.yml", p.dir);
	snprintf(data, sizeof(data), "--storage.tsdb.path=%s/prometheus-data", p.dir);
	snprintf(out, sizeof(out), "%s/prometheus.log", p.dir);
	snprintf(listen, sizeof(listen), "--web.listen-address=127.0.0.1:%d", pport);
	snprintf(text, sizeof(text),
		 "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
		 "scrape_configs:\n  - job_name: pgvalve\n    static_configs:\n      - targets: ['127.0.0.1:%d']\n",
		 mport);
	write_file(cfg, text);
	char cfgarg[800];
	snprintf(cfgarg, sizeof(cfgarg), "--config.file=%s", cfg);
	char *argv[] = { "prometheus", cfgarg, data, listen, "--storage.tsdb.retention.time=1h", NULL };
	pid_t prom = run_program_background(argv, out);

	PGconn *c[3];
	for (int i = 0; i < 3; i++)
		c[i] = login(&p, DB);
	const char *req = "GET /api/v1/query?query=sum(pgbouncer_pools_client_active_connections%7Bdatabase%3D%22"
			  DB "%22%7D) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
	/* Prometheus starts, scrapes and answers its query: a few scrape intervals; 40 s on a loaded machine */
	bool seen = false;
	char last[2048] = "";
	for (double end = now_s() + 40; now_s() < end && !seen; sleep_ms(500)) {
		int fd = try_connect(pport);
		if (fd < 0)
			continue;
		raw_send(fd, req, strlen(req));
		size_t len;
		char *all = read_all(fd, 5000, &len);
		close(fd);
		snprintf(last, sizeof(last), "%s", all);
		/* {"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[<t>,"3"]}]}} */
		seen = strstr(all, "\"success\"") && strstr(all, ",\"3\"]");
		free(all);
	}
	ck_assert_msg(seen, "PromQL never saw 3 clients; last answer:\n%s\nprometheus log:\n%s", last,
		      read_file_tail(out, 2000));
	/* the target is healthy: up == 1 from Prometheus' own view */
	stop_program(prom);
	for (int i = 0; i < 3; i++)
		PQfinish(c[i]);
	pgv_stop(&p);
}
END_TEST

/* /health: 200 while serving, 503 while paused, 200 again after RESUME; no token needed. */
START_TEST(health_follows_pause)
{
	struct pgv p;
	int mport;
	start_with_metrics(&p, &mport, "metrics_auth_token = s3cret\n");
	struct http_reply r;
	http_get(mport, "/health", NULL, &r);
	ck_assert_int_eq(r.status, 200);
	reply_free(&r);
	PGconn *a = login(&p, "pgbouncer");
	exec_ok(a, "PAUSE");
	http_get(mport, "/health", NULL, &r);
	ck_assert_int_eq(r.status, 503);
	reply_free(&r);
	exec_ok(a, "RESUME");
	http_get(mport, "/health", NULL, &r);
	ck_assert_int_eq(r.status, 200);
	reply_free(&r);
	/* SIGTERM with a client still connected: shutting down, the endpoint still answers, 503 */
	PGconn *c = login(&p, DB);
	ck_assert_int_eq(kill(p.pid, SIGTERM), 0);
	pgv_expect_log(&p, "got SIGTERM", 5);
	http_get(mport, "/health", NULL, &r);
	ck_assert_int_eq(r.status, 503);
	ck_assert_msg(strstr(r.body, "shutting down"), "%s", r.body);
	reply_free(&r);
	PQfinish(c);
	PQfinish(a);
	pgv_stop(&p);
}
END_TEST

/* metrics_auth_token: no or a wrong token gets 401; the bearer token or basic auth with it as password gets 200. */
START_TEST(auth_token)
{
	struct pgv p;
	int mport;
	start_with_metrics(&p, &mport, "metrics_auth_token = s3cret\n");
	struct http_reply r;
	http_get(mport, "/metrics", NULL, &r);
	ck_assert_int_eq(r.status, 401);
	ck_assert_msg(!strstr(r.body, "pgbouncer_"), "no metrics without the token");
	reply_free(&r);
	http_get(mport, "/metrics", "Authorization: Bearer wrong\r\n", &r);
	ck_assert_int_eq(r.status, 401);
	reply_free(&r);
	http_get(mport, "/metrics", "Authorization: Bearer s3cretX\r\n", &r);
	ck_assert_int_eq(r.status, 401);
	reply_free(&r);
	http_get(mport, "/metrics", "Authorization: Bearer s3cret\r\n", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_msg(strstr(r.body, "pgbouncer_up 1\n"), "%.500s", r.body);
	reply_free(&r);
	/* base64("prom:s3cret") */
	http_get(mport, "/metrics", "Authorization: Basic cHJvbTpzM2NyZXQ=\r\n", &r);
	ck_assert_int_eq(r.status, 200);
	reply_free(&r);
	/* base64("prom:nope") */
	http_get(mport, "/metrics", "Authorization: Basic cHJvbTpub3Bl\r\n", &r);
	ck_assert_int_eq(r.status, 401);
	reply_free(&r);
	pgv_stop(&p);
}
END_TEST

/* Reload: a new metrics_port is served, the old one closed; metrics_port = 0 turns it off. */
START_TEST(reload_moves_the_port)
{
	struct pgv p;
	int mport;
	start_with_metrics(&p, &mport, NULL);
	free(scrape(mport));
	int nport = pgv_pick_http_port(mport);
	char line[64];
	snprintf(line, sizeof(line), "metrics_port = %d\n", nport);
	FILE *f = fopen(p.ini, "a");
	fputs(line, f);
	fclose(f);
	pgv_reload(&p);
	free(scrape(nport));
	ck_assert_int_lt(try_connect(mport), 0);
	f = fopen(p.ini, "a");
	fputs("metrics_port = 0\n", f);
	fclose(f);
	pgv_reload(&p);
	ck_assert_int_lt(try_connect(nport), 0);
	pgv_stop(&p);
}
END_TEST

/* Whether the pooler still answers a query (a fresh login) within a few seconds. */
static void expect_pooler_serving(struct pgv *p)
{
	double t0 = now_s();
	PGconn *c = login(p, DB);
	ck_assert_str_eq(query_value(c, "SELECT 42"), "42");
	PQfinish(c);
	ck_assert_msg(now_s() - t0 < pgv_time_bound(3, 10), "the pooler took %.1f s to answer", now_s() - t0);
}

/*
 * Hostile HTTP: garbage, oversized headers, a large body, a wrong method
 * get 4xx (or the connection closed); slow clients are cut after the
 * timeout; a flood of idle connections neither stops the pooler nor keeps
 * the endpoint down once they are gone.
 */
START_TEST(hostile_http_clients)
{
	struct pgv p;
	int mport;
	start_with_metrics(&p, &mport, NULL);
	struct http_reply r;

	static const char garbage[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 garbage\r\n\r\n";
	http_raw(mport, garbage, sizeof(garbage) - 1, &r);
	ck_assert_msg(r.status == 0 || (r.status >= 400 && r.status < 500), "garbage: %d", r.status);
	reply_free(&r);

	http_raw(mport, "GET /metrics HTTP/1.1\r\nHost\r\n\r\n", 31, &r);
	ck_assert_msg(r.status == 0 || (r.status >= 400 && r.status < 500), "bad header: %d", r.status);
	reply_free(&r);

	size_t big = 64 * 1024;
	char *huge = malloc(big + 200);
	int n = snprintf(huge, 200, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ");
	memset(huge + n, 'a', big);
	memcpy(huge + n + big, "\r\n\r\n", 4);
	http_raw(mport, huge, (size_t)n + big + 4, &r);
	ck_assert_msg(r.status == 0 || (r.status >= 400 && r.status < 500), "oversized headers: %d", r.status);
	reply_free(&r);
	free(huge);

	char post[512];
	n = snprintf(post, sizeof(post), "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 4000000\r\n\r\nabc");
	http_raw(mport, post, (size_t)n, &r);
	ck_assert_msg(r.status >= 400 && r.status < 500, "big POST: %d", r.status);
	reply_free(&r);

	http_raw(mport, "DELETE /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 57, &r);
	ck_assert_int_eq(r.status, 405);
	reply_free(&r);

	http_get(mport, "/nope", NULL, &r);
	ck_assert_int_eq(r.status, 404);
	reply_free(&r);

	/* slow clients: half a request line each, more of them than the connection limit */
	int slow[40];
	for (size_t i = 0; i < ARRAY_LEN(slow); i++) {
		slow[i] = raw_connect(mport);
		ck_assert_int_ge(slow[i], 0);
		raw_send(slow[i], "GET /met", 8);
	}
	expect_pooler_serving(&p);
	/* the first ones are cut after the timeout (5 s), the rest get their turn and are cut too */
	double t0 = now_s();
	ck_assert_msg(raw_wait_closed(slow[0], 15000), "a slow client was never cut off");
	ck_assert_msg(now_s() - t0 < 12, "cut after %.1f s", now_s() - t0);
	for (size_t i = 1; i < ARRAY_LEN(slow); i++)
		ck_assert_msg(raw_wait_closed(slow[i], 30000), "slow client %zu never cut off", i);
	for (size_t i = 0; i < ARRAY_LEN(slow); i++)
		close(slow[i]);
	expect_pooler_serving(&p);
	char *body = scrape(mport);
	ck_assert_msg(strstr(body, "pgbouncer_up 1\n"), "scrape after the flood");
	free(body);
	pgv_stop(&p);
}
END_TEST

/* Histograms: a 0.3 s query lands in le=0.5 and not le=0.25; +Inf equals _count; failures are counted. */
START_TEST(latency_histograms_and_failure_counters)
{
	struct pgv p;
	int mport;
	start_with_metrics(&p, &mport, NULL);
	PGconn *c = login(&p, DB);
	char *body = scrape(mport);
	double le025 = metric(body, "pgvalve_query_duration_seconds_bucket{database=\"" DB "\",le=\"0.25\"}");
	double le05 = metric(body, "pgvalve_query_duration_seconds_bucket{database=\"" DB "\",le=\"0.5\"}");
	free(body);
	exec_ok(c, "SELECT pg_sleep(0.3)");
	body = scrape(mport);
	ck_assert_double_eq(metric(body, "pgvalve_query_duration_seconds_bucket{database=\"" DB "\",le=\"0.25\"}"), le025);
	ck_assert_double_eq(metric(body, "pgvalve_query_duration_seconds_bucket{database=\"" DB "\",le=\"0.5\"}"),
			    le05 + 1);
	double inf = metric(body, "pgvalve_query_duration_seconds_bucket{database=\"" DB "\",le=\"+Inf\"}");
	ck_assert_double_eq(inf, metric(body, "pgvalve_query_duration_seconds_count{database=\"" DB "\"}"));
	ck_assert(metric(body, "pgvalve_query_duration_seconds_sum{database=\"" DB "\"}") >= 0.3);
	ck_assert(metric(body, "pgvalve_transaction_duration_seconds_count{database=\"" DB "\"}") >= 1);
	ck_assert_msg(strstr(body, "# TYPE pgvalve_client_wait_seconds histogram\n"), "wait histogram");
	double bad = metric(body, "pgvalve_login_failures_total{reason=\"bad_password\"}");
	double nodb = metric(body, "pgvalve_login_failures_total{reason=\"no_database\"}");
	free(body);
	PGconn *x = pgv_connect(&p, DB, USER, "wrong");
	ck_assert_int_ne(PQstatus(x), CONNECTION_OK);
	PQfinish(x);
	x = pgv_connect(&p, "no_such_db", USER, PASS);
	ck_assert_int_ne(PQstatus(x), CONNECTION_OK);
	PQfinish(x);
	body = scrape(mport);
	ck_assert_double_eq(metric(body, "pgvalve_login_failures_total{reason=\"bad_password\"}"), bad + 1);
	ck_assert_double_eq(metric(body, "pgvalve_login_failures_total{reason=\"no_database\"}"), nodb + 1);
	expect_promtool_ok(&p, body);
	free(body);
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/*
 * Saturation, cancels and server failures: a client queued behind a pool
 * of one shows in pgvalve_clients_waiting and, once served, in the wait
 * histogram; a cancel request is counted; a database whose server is down
 * counts a server connect failure.
 */
START_TEST(saturation_cancel_and_connect_failures)
{
	struct pgv p;
	int mport;
	char dbs[512];
	snprintf(dbs, sizeof(dbs), "%sdown = host=127.0.0.1 port=1 dbname=x\n", std_databases());
	char ini[2048];
	mport = pgv_pick_http_port(0);
	snprintf(ini, sizeof(ini), BASE "metrics_port = %d\ndefault_pool_size = 1\n", mport);
	pgv_start(&p, ini, dbs, std_userlist());
	PGconn *holder = login(&p, DB), *queued = login(&p, DB);
	exec_ok(holder, "BEGIN");
	exec_ok(holder, "SELECT 1");
	char *body = scrape(mport);
	double waits = metric(body, "pgvalve_client_wait_seconds_count{database=\"" DB "\"}");
	double cancels = metric(body, "pgvalve_cancel_requests_forwarded_total");
	double failures = metric(body, "pgvalve_server_connect_failures_total");
	ck_assert_double_eq(metric(body, "pgvalve_clients_waiting"), 0);
	free(body);

	ck_assert_int_eq(PQsendQuery(queued, "SELECT 2"), 1);
	bool waiting = false;
	/* the query is queued as it arrives (milliseconds); 5 s on a loaded machine */
	for (double end = now_s() + 5; now_s() < end && !waiting; sleep_ms(50)) {
		body = scrape(mport);
		waiting = metric(body, "pgvalve_clients_waiting") == 1 &&
			  metric(body, "pgbouncer_pools_client_waiting_connections{database=\"" DB "\",user=\"" USER "\"}") == 1;
		free(body);
	}
	ck_assert_msg(waiting, "the queued client never showed as waiting");
	/* the wait's sum checked below is at least this: a lower bound, which a loaded machine only lengthens */
	sleep_ms(300);
	exec_ok(holder, "COMMIT");
	PGresult *r;
	while ((r = PQgetResult(queued)) != NULL)
		PQclear(r);
	body = scrape(mport);
	ck_assert_double_eq(metric(body, "pgvalve_clients_waiting"), 0);
	ck_assert_double_eq(metric(body, "pgvalve_client_wait_seconds_count{database=\"" DB "\"}"), waits + 1);
	ck_assert(metric(body, "pgvalve_client_wait_seconds_sum{database=\"" DB "\"}") >= 0.3);
	free(body);

	/* a cancel request reaches PostgreSQL through pgvalve */
	ck_assert_int_eq(PQsendQuery(holder, "SELECT pg_sleep(10)"), 1);
	/* a cancel sent before the query runs would leave it its 10 s */
	pg_wait_running("SELECT pg_sleep(10)", 1);
	PGcancel *cancel = PQgetCancel(holder);
	char errbuf[256];
	ck_assert_int_eq(PQcancel(cancel, errbuf, sizeof(errbuf)), 1);
	PQfreeCancel(cancel);
	while ((r = PQgetResult(holder)) != NULL)
		PQclear(r);
	body = scrape(mport);
	ck_assert_double_eq(metric(body, "pgvalve_cancel_requests_forwarded_total"), cancels + 1);
	free(body);

	/* the server of "down" refuses connections */
	PGconn *x = pgv_connect(&p, "down", USER, PASS);
	ck_assert_int_ne(PQstatus(x), CONNECTION_OK);
	PQfinish(x);
	body = scrape(mport);
	ck_assert(metric(body, "pgvalve_server_connect_failures_total") >= failures + 1);
	expect_promtool_ok(&p, body);
	free(body);
	PQfinish(holder);
	PQfinish(queued);
	pgv_stop(&p);
}
END_TEST

/* Worker k's console over its private socket (workers.h names the directory). */
static PGconn *worker_console(struct pgv *p, int k)
{
	char dir[700], port[16];
	snprintf(dir, sizeof(dir), "%s/pgvalve-%d-%d-w%d", p->dir, p->port, (int)p->pid, k);
	snprintf(port, sizeof(port), "%d", p->port);
	const char *kw[] = { "host", "port", "dbname", "user", "password", "sslmode", "connect_timeout", NULL };
	const char *val[] = { dir, port, "pgbouncer", USER, PASS, "disable", "10", NULL };
	PGconn *c = PQconnectdbParams(kw, val, 0);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "worker %d console: %s", k, PQerrorMessage(c));
	return c;
}

/* Until n workers answer on the metrics port: forks that listen in milliseconds; 15 s on a loaded machine. */
static void wait_workers_up(int mport, int n)
{
	for (double end = now_s() + 15;; sleep_ms(200)) {
		int fd = try_connect(mport);	/* worker 1 may still be starting */
		if (fd < 0) {
			ck_assert_msg(now_s() < end, "nothing listens on the metrics port");
			continue;
		}
		close(fd);
		char *body = scrape(mport);
		int up = 0;
		for (int k = 1; k <= n; k++) {
			char s[64];
			double v;
			snprintf(s, sizeof(s), "pgvalve_worker_up{worker=\"%d\"}", k);
			up += series_value(body, s, &v) && v == 1;
		}
		free(body);
		if (up == n)
			return;
		ck_assert_msg(now_s() < end, "only %d of %d workers up", up, n);
	}
}

/*
 * workers = 2: one port; the totals are the sum of what each worker's own
 * console says; a killed worker's counters stay in the totals (never
 * lower than before) once it is restarted.
 */
START_TEST(workers_totals_are_the_sum)
{
	struct pgv p;
	int mport;
	start_with_metrics(&p, &mport, "workers = 2\n");
	wait_workers_up(mport, 2);
	enum { N = 24 };
	PGconn *c[N];
	for (int i = 0; i < N; i++) {
		c[i] = login(&p, DB);
		for (int q = 0; q < 5; q++)
			exec_ok(c[i], "SELECT 1");
	}
	sleep_s(1.6);	/* every worker publishes at least once a second */

	double per[3] = { 0 }, active[3] = { 0 };
	for (int k = 1; k <= 2; k++) {
		PGconn *a = worker_console(&p, k);
		per[k] = console_value(a, "SHOW STATS", DB, "total_query_count");
		PGresult *r = PQexec(a, "SHOW POOLS");
		for (int i = 0; i < PQntuples(r); i++)
			if (strcmp(PQgetvalue(r, i, 0), DB) == 0)
				active[k] += strtod(PQgetvalue(r, i, PQfnumber(r, "cl_active")), NULL);
		PQclear(r);
		PQfinish(a);
	}
	ck_assert_msg(per[1] > 0 && per[2] > 0, "both workers served (%.0f, %.0f)", per[1], per[2]);
	char *body = scrape(mport);
	expect_promtool_ok(&p, body);
	double total = metric(body, "pgbouncer_stats_queries_pooled_total{database=\"" DB "\"}");
	ck_assert_msg(total == per[1] + per[2], "total %.0f, workers %.0f + %.0f", total, per[1], per[2]);
	ck_assert_double_eq(metric(body, "pgbouncer_pools_client_active_connections{database=\"" DB "\",user=\"" USER "\"}"),
			    active[1] + active[2]);
	ck_assert_double_eq(active[1] + active[2], N);
	double w2_pid_dummy;
	ck_assert(series_value(body, "pgvalve_worker_restarts_total{worker=\"2\"}", &w2_pid_dummy));
	free(body);

	/* kill worker 2: its clients go, its counters stay */
	PGconn *a = login(&p, "pgbouncer");
	PGresult *r = PQexec(a, "SHOW WORKERS");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	int pid2 = atoi(PQgetvalue(r, 1, PQfnumber(r, "pid")));
	PQclear(r);
	PQfinish(a);
	ck_assert_int_gt(pid2, 0);
	ck_assert_int_eq(kill(pid2, SIGKILL), 0);
	double last = total;
	bool restarted = false;
	/* the supervisor restarts a worker within a second or two of its death; 20 s on a loaded machine */
	for (double end = now_s() + 20; now_s() < end && !restarted; sleep_ms(100)) {
		body = scrape(mport);
		double t = metric(body, "pgbouncer_stats_queries_pooled_total{database=\"" DB "\"}"), v;
		ck_assert_msg(t >= last, "the total went back from %.0f to %.0f", last, t);
		last = t;
		restarted = series_value(body, "pgvalve_worker_restarts_total{worker=\"2\"}", &v) && v >= 1 &&
			    series_value(body, "pgvalve_worker_up{worker=\"2\"}", &v) && v == 1;
		free(body);
	}
	ck_assert_msg(restarted, "worker 2 was not restarted\n%s", pgv_log_tail(&p, 2000));
	sleep_s(1.2);
	body = scrape(mport);
	ck_assert_double_eq(metric(body, "pgbouncer_stats_queries_pooled_total{database=\"" DB "\"}"), total);
	free(body);

	/* kill worker 1, the one serving the endpoint: its successor serves it again, nothing lost */
	a = worker_console(&p, 2);
	r = PQexec(a, "SHOW WORKERS");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	int pid1 = atoi(PQgetvalue(r, 0, PQfnumber(r, "pid")));
	PQclear(r);
	PQfinish(a);
	ck_assert_int_gt(pid1, 0);
	ck_assert_int_eq(kill(pid1, SIGKILL), 0);
	restarted = false;
	/* the same bound for worker 1, which also owns the metrics listener */
	for (double end = now_s() + 20; now_s() < end && !restarted; sleep_ms(200)) {
		int fd = try_connect(mport);
		if (fd < 0)
			continue;	/* down while worker 1 is restarted */
		close(fd);
		struct http_reply hr;
		http_get(mport, "/metrics", NULL, &hr);
		double t, v;
		if (hr.status == 200 && series_value(hr.body, "pgvalve_worker_restarts_total{worker=\"1\"}", &v) && v >= 1) {
			t = metric(hr.body, "pgbouncer_stats_queries_pooled_total{database=\"" DB "\"}");
			ck_assert_msg(t == total, "after worker 1's restart the total is %.0f, was %.0f", t, total);
			restarted = true;
		}
		reply_free(&hr);
	}
	ck_assert_msg(restarted, "the endpoint did not come back with a new worker 1\n%s", pgv_log_tail(&p, 2000));
	ck_assert_int_eq(pgv_log_count(&p, "could not listen on"), 0);
	for (int i = 0; i < N; i++)
		PQfinish(c[i]);
	pgv_stop(&p);
}
END_TEST

/*
 * workers = 4: what pgbouncer_exporter reads from the console on the port
 * (now the instance's: admin_fanout.c) is what /metrics says, clients and
 * servers of every worker counted once.
 */
START_TEST(instance_console_agrees_with_metrics)
{
	struct pgv p;
	int mport;
	start_with_metrics(&p, &mport, "workers = 4\n");
	wait_workers_up(mport, 4);
	enum { N = 24 };
	PGconn *c[N];
	for (int i = 0; i < N; i++) {
		c[i] = login(&p, DB);
		for (int q = 0; q < 3; q++)
			exec_ok(c[i], "SELECT 1");
	}
	exec_ok(c[0], "BEGIN");	/* one server active, one client in a transaction */
	exec_ok(c[0], "SELECT 1");
	sleep_s(1.6);	/* every worker publishes at least once a second */
	char *body = scrape(mport);
	expect_promtool_ok(&p, body);
	PGconn *a = login(&p, "pgbouncer");
	PQsetNoticeReceiver(a, quiet, NULL);
	expect_console_agrees(a, body);
	char s[256];
	ck_assert_double_eq(console_value2(a, "SHOW POOLS", DB, USER, "cl_active"), N);
	ck_assert_double_eq(console_value2(a, "SHOW POOLS", DB, USER, "sv_active"), 1);
	ck_assert_double_eq(metric(body, "pgbouncer_stats_queries_pooled_total{database=\"" DB "\"}"),
			    console_value(a, "SHOW STATS_TOTALS", DB, "query_count"));
	ck_assert_double_eq(metric(body, "pgbouncer_stats_sql_transactions_pooled_total{database=\"" DB "\"}"),
			    console_value(a, "SHOW STATS_TOTALS", DB, "xact_count"));
	ck_assert_double_ge(console_value(a, "SHOW STATS_TOTALS", DB, "query_count"), 3 * N);
	ck_assert_double_eq(metric(body, "pgbouncer_used_servers"), console_value(a, "SHOW LISTS", "used_servers", "items"));
	snprintf(s, sizeof(s), "pgbouncer_databases_current_connections{name=\"" DB "\",host=\"127.0.0.1\",port=\"%s\","
			       "database=\"" DB "\",force_user=\"\",pool_mode=\"\"}", getenv("PGV_TEST_PGPORT"));
	ck_assert_double_eq(metric(body, s), console_value(a, "SHOW DATABASES", DB, "current_connections"));
	free(body);
	PQfinish(a);
	for (int i = 0; i < N; i++)
		PQfinish(c[i]);
	pgv_stop(&p);
}
END_TEST

/* GET path over TLS, verifying the server against ca.crt for host; the status, or 0 if the handshake failed. */
static int https_get(int port, const char *host, const char *path, const char *headers, char *body, size_t size)
{
	char ca[600];
	snprintf(ca, sizeof(ca), "%s/ca.crt", getenv("PGV_TEST_CERTDIR"));
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	ck_assert_ptr_nonnull(ctx);
	ck_assert_int_eq(SSL_CTX_load_verify_locations(ctx, ca, NULL), 1);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL *ssl = SSL_new(ctx);
	SSL_set1_host(ssl, host);
	SSL_set_tlsext_host_name(ssl, host);
	int fd = try_connect(port);
	ck_assert_int_ge(fd, 0);
	SSL_set_fd(ssl, fd);
	int status = 0;
	body[0] = '\0';
	if (SSL_connect(ssl) == 1) {
		char req[512];
		int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n%s\r\n", path,
				 host, headers ? headers : "");
		ck_assert_int_eq(SSL_write(ssl, req, n), n);
		size_t len = 0;
		int got;
		while (len + 1 < size && (got = SSL_read(ssl, body + len, (int)(size - len - 1))) > 0)
			len += (size_t)got;
		body[len] = '\0';
		if (sscanf(body, "HTTP/1.%*d %d", &status) != 1)
			status = -1;
	}
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	close(fd);
	return status;
}

/* metrics_tls: HTTPS with the client_tls certificate (verified against the CA); plain HTTP gets nothing. */
START_TEST(tls_endpoint)
{
	struct pgv p;
	int mport;
	char extra[2048];
	const char *d = getenv("PGV_TEST_CERTDIR");
	ck_assert_msg(d && *d, "PGV_TEST_CERTDIR: run.sh makes the certificates");
	snprintf(extra, sizeof(extra),
		 "metrics_tls = 1\nclient_tls_sslmode = allow\nclient_tls_cert_file = %s/server.crt\n"
		 "client_tls_key_file = %s/server.key\nmetrics_auth_token = tok\n", d, d);
	start_with_metrics(&p, &mport, extra);
	static char body[1 << 20];
	ck_assert_int_eq(https_get(mport, "localhost", "/health", NULL, body, sizeof(body)), 200);
	ck_assert_int_eq(https_get(mport, "localhost", "/metrics", NULL, body, sizeof(body)), 401);
	ck_assert_int_eq(https_get(mport, "localhost", "/metrics", "Authorization: Bearer tok\r\n", body, sizeof(body)),
			 200);
	ck_assert_msg(strstr(body, "\npgbouncer_up 1\n"), "%.500s", body);
	/* plain HTTP on the TLS port: no HTTP answer */
	struct http_reply r;
	http_get(mport, "/metrics", "Authorization: Bearer tok\r\n", &r);
	ck_assert_msg(r.status == 0 || r.status >= 400, "plain HTTP got %d", r.status);
	reply_free(&r);
	expect_pooler_serving(&p);
	pgv_stop(&p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = pgv_tcase_create("metrics", 120);
	tcase_add_test(tc, off_by_default);
	tcase_add_test(tc, exporter_series_match_console);
	tcase_add_test(tc, openmetrics_on_request);
	tcase_add_test(tc, prometheus_scrapes_pgvalve);
	tcase_add_test(tc, health_follows_pause);
	tcase_add_test(tc, auth_token);
	tcase_add_test(tc, reload_moves_the_port);
	tcase_add_test(tc, hostile_http_clients);
	tcase_add_test(tc, latency_histograms_and_failure_counters);
	tcase_add_test(tc, saturation_cancel_and_connect_failures);
	tcase_add_test(tc, workers_totals_are_the_sum);
	tcase_add_test(tc, instance_console_agrees_with_metrics);
	tcase_add_test(tc, tls_endpoint);
	suite_add_tcase(s, tc);
	return pgv_run_suite(s);
}
