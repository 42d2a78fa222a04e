/*
 * test_limits.c - end-to-end tests of pgvalve's timeouts, pool sizing,
 * connection limits, server lifecycle and network knobs against a real
 * PostgreSQL 15.
 *
 * Timeouts: each fires within its value plus one janitor period (1/3 s)
 * plus some slack for a busy machine, not before about two thirds of its
 * value, with PgBouncer's error text, and a connection just under the
 * limit is left alone. Limits: the N+1st client or server is refused or
 * queued as documented. A database that goes away is simulated with a
 * TCP proxy this test starts and stops (forked; it can also hold cancel
 * requests, delay a login, or accept and close at once), or a listening
 * socket that never accepts. The cost test opens 2,000 idle clients and
 * reads pgvalve's CPU time from /proc.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* accept4, pipe2 */
#endif
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#define DB "pgvtest"
#define BASE "auth_type = md5\n"
#define TXN BASE "pool_mode = transaction\n"

/* The janitor's period, and what a busy two-core machine may add on top. */
#define TICK_S (1.0 / 3.0)
#define SLACK_S 1.5
/* Not before this share of a timeout's value. */
#define EARLY_SHARE 0.65

static const char QUEUED_NOTICE[] = "No server connection available in postgres backend, client being queued";

/* ================================================================ small helpers */

static void sleep_until(double t)
{
	sleep_s(t - now_s());
}

static int pg_port(void)
{
	const char *v = getenv("PGV_TEST_PGPORT");
	ck_assert_ptr_nonnull(v);
	return atoi(v);
}

/* Asserts that something a timeout of `value` seconds did happened `at` seconds after its start. */
static void assert_fired(const char *what, double at, double value)
{
	ck_assert_msg(at >= 0, "%s never happened (timeout %.2f s)", what, value);
	ck_assert_msg(at >= EARLY_SHARE * value, "%s after %.2f s: too early for a timeout of %.2f s", what, at, value);
	ck_assert_msg(at <= value + TICK_S + SLACK_S, "%s after %.2f s: too late for a timeout of %.2f s", what, at,
		      value);
}

/* The standard users plus an admin console user. */
static const char *userlist(void)
{
	static char buf[1024];
	snprintf(buf, sizeof(buf), "%s\"admin_u\" \"admin_pass\"\n", std_userlist());
	return buf;
}

/* "name = host=127.0.0.1 port=<port> dbname=pgvtest<extra>\n" appended to buf. */
static void add_db(char *buf, size_t size, const char *name, int port, const char *extra)
{
	size_t len = strlen(buf);
	snprintf(buf + len, size - len, "%s = host=127.0.0.1 port=%d dbname=pgvtest%s%s\n", name, port,
		 extra ? " " : "", extra ? extra : "");
}

static PGconn *connect_ok(struct pgv *p, const char *dbname, const char *user, const char *password)
{
	PGconn *c = pgv_connect(p, dbname, user, password);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "connect %s@%s: %s\n%s", user, dbname, PQerrorMessage(c),
		      pgv_log_tail(p, 1500));
	return c;
}

static PGconn *scram(struct pgv *p, const char *dbname)
{
	return connect_ok(p, dbname, "scram_user", "scram_pass");
}

static void exec_ok(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	ExecStatusType st = PQresultStatus(r);
	ck_assert_msg(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(c));
	PQclear(r);
}

static void quiet_notice(void *arg, const PGresult *res)
{
	(void)arg;
	(void)res;
}

/* Counts the "client being queued" notices into *(int *)arg. */
static void count_queued_notice(void *arg, const PGresult *res)
{
	if (strstr(PQresultErrorMessage(res), QUEUED_NOTICE))
		(*(int *)arg)++;
}

/* ---------------------------------------------------------------- PostgreSQL directly */

static PGconn *dconn;

static PGconn *direct(void)
{
	if (dconn == NULL || PQstatus(dconn) != CONNECTION_OK) {
		PQfinish(dconn);
		dconn = pg_direct();
	}
	return dconn;
}

static void direct_exec(const char *sql)
{
	exec_ok(direct(), sql);
}

static int direct_int(const char *sql)
{
	return atoi(query_value(direct(), sql));
}

static bool backend_alive(int pid)
{
	char sql[128];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM pg_stat_activity WHERE pid = %d", pid);
	return direct_int(sql) > 0;
}

/* Ends usename's backends (only the idle ones with idle_only); returns how many. */
static int terminate_backends(const char *usename, bool idle_only)
{
	char sql[512];
	snprintf(sql, sizeof(sql),
		 "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = '%s'"
		 " AND backend_type = 'client backend' AND pid <> pg_backend_pid()%s",
		 usename, idle_only ? " AND state = 'idle'" : "");
	return direct_int(sql);
}

/* Seconds until usename has exactly `want` backends, or -1 after timeout_s. */
static double wait_backends(const char *usename, int want, double timeout_s)
{
	double t0 = now_s();
	for (;;) {
		if (pg_count_backends(usename) == want)
			return now_s() - t0;
		if (now_s() - t0 > timeout_s)
			return -1;
		sleep_s(0.05);
	}
}

/* Earlier tests' backends (e.g. a pg_sleep whose client was cut off) must not be counted. */
static void no_backends_left(const char *const *users, int n)
{
	for (int i = 0; i < n; i++) {
		terminate_backends(users[i], false);
		ck_assert_msg(wait_backends(users[i], 0, 5) >= 0, "backends of %s do not go away", users[i]);
	}
}

static void clean_users(void)
{
	static const char *const all[] = { "scram_user", "md5_user", "pgbench_user" };
	no_backends_left(all, 3);
}

/* ---------------------------------------------------------------- backend counts over time */

struct watch {
	double t0, last;
	int n;
	const char *user[3];
	int peak[3];
	double first[3][8];	/* seconds after t0 when the count first reached k, -1 never */
};

static void watch_init(struct watch *w, const char *u0, const char *u1, const char *u2)
{
	memset(w, 0, sizeof(*w));
	const char *u[3] = { u0, u1, u2 };
	for (int i = 0; i < 3; i++) {
		if (u[i])
			w->user[w->n++] = u[i];
		for (int k = 0; k < 8; k++)
			w->first[i][k] = -1;
	}
	w->t0 = now_s();
	w->last = 0;
}

static void watch_sample(struct watch *w)
{
	if (w == NULL || now_s() - w->last < 0.1)
		return;
	w->last = now_s();
	for (int i = 0; i < w->n; i++) {
		int c = pg_count_backends(w->user[i]);
		if (c > w->peak[i])
			w->peak[i] = c;
		for (int k = 1; k <= c && k < 8; k++)
			if (w->first[i][k] < 0)
				w->first[i][k] = now_s() - w->t0;
	}
}

/* ---------------------------------------------------------------- libpq queries in parallel */

struct outcome {
	PGconn *c;
	double sent;		/* now_s() when sent */
	double at;		/* seconds after sent when the first result came, -1 not yet */
	bool done, ok;
	char sqlstate[6], severity[16], msg[256], value[128];
};

static void send_query(struct outcome *o, PGconn *c, const char *sql)
{
	memset(o, 0, sizeof(*o));
	o->c = c;
	o->at = -1;
	ck_assert_msg(PQsendQuery(c, sql) == 1, "send %s: %s", sql, PQerrorMessage(c));
	o->sent = now_s();
}

static void take_result(struct outcome *o, PGresult *r)
{
	if (o->at >= 0)
		return;
	o->at = now_s() - o->sent;
	ExecStatusType st = PQresultStatus(r);
	o->ok = st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK;
	if (o->ok) {
		if (st == PGRES_TUPLES_OK && PQntuples(r) > 0 && PQnfields(r) > 0)
			snprintf(o->value, sizeof(o->value), "%s", PQgetvalue(r, 0, PQnfields(r) - 1));
		return;
	}
	const char *f = PQresultErrorField(r, PG_DIAG_SQLSTATE);
	snprintf(o->sqlstate, sizeof(o->sqlstate), "%s", f ? f : "");
	f = PQresultErrorField(r, PG_DIAG_SEVERITY);
	snprintf(o->severity, sizeof(o->severity), "%s", f ? f : "");
	f = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
	snprintf(o->msg, sizeof(o->msg), "%s", f ? f : PQresultErrorMessage(r));
}

static void step_outcome(struct outcome *o)
{
	if (o->done)
		return;
	bool alive = PQconsumeInput(o->c) == 1;
	for (int guard = 0; guard < 100 && (!PQisBusy(o->c) || !alive); guard++) {
		PGresult *r = PQgetResult(o->c);
		if (r == NULL) {
			o->done = true;
			break;
		}
		take_result(o, r);
		PQclear(r);
	}
	if (!alive && o->at < 0) {
		/* lost without any result */
		o->at = now_s() - o->sent;
		snprintf(o->msg, sizeof(o->msg), "%s", PQerrorMessage(o->c));
		o->done = true;
	}
}

/* Until all are done or timeout_s passed; samples backend counts meanwhile. */
static void collect(struct outcome *o, int n, double timeout_s, struct watch *w)
{
	double end = now_s() + timeout_s;
	for (;;) {
		struct pollfd pfd[32];
		int np = 0, pending = 0;
		for (int i = 0; i < n; i++) {
			step_outcome(&o[i]);
			if (!o[i].done) {
				pending++;
				if (np < 32)
					pfd[np++] = (struct pollfd){ .fd = PQsocket(o[i].c), .events = POLLIN };
			}
		}
		watch_sample(w);
		if (pending == 0 || now_s() >= end)
			return;
		poll(pfd, (nfds_t)np, 30);
	}
}

static void assert_ok(const struct outcome *o, const char *what, const char *value)
{
	ck_assert_msg(o->done && o->ok, "%s: no success (after %.2f s): %s %s", what, o->at, o->sqlstate, o->msg);
	if (value)
		ck_assert_msg(strcmp(o->value, value) == 0, "%s: got \"%s\", expected \"%s\"", what, o->value, value);
}

/* A FATAL 08P01 from pgvalve whose message is exactly `reason`. */
static void assert_fatal(const struct outcome *o, const char *what, const char *reason)
{
	ck_assert_msg(o->at >= 0 && !o->ok, "%s: expected FATAL \"%s\", got %s (value \"%s\") after %.2f s", what,
		      reason, o->at < 0 ? "nothing" : "success", o->value, o->at);
	ck_assert_msg(strcmp(o->msg, reason) == 0, "%s: expected \"%s\", got \"%s\"", what, reason, o->msg);
	ck_assert_msg(strcmp(o->sqlstate, "08P01") == 0, "%s: SQLSTATE %s, expected 08P01", what, o->sqlstate);
	ck_assert_msg(strcmp(o->severity, "FATAL") == 0, "%s: severity %s, expected FATAL", what, o->severity);
}

/* ---------------------------------------------------------------- raw protocol clients */

static void assert_raw_fatal(const struct raw_error *err, const char *what, const char *reason)
{
	ck_assert_msg(strcmp(err->message, reason) == 0, "%s: expected FATAL \"%s\", got \"%s\"", what, reason,
		      err->message);
	ck_assert_msg(strcmp(err->sqlstate, "08P01") == 0, "%s: SQLSTATE %s, expected 08P01", what, err->sqlstate);
	ck_assert_msg(strcmp(err->severity, "FATAL") == 0, "%s: severity %s, expected FATAL", what, err->severity);
}

/* A logged-in raw client (md5 through raw_login_ex); fails the test otherwise. */
static int raw_client(struct pgv *p, const char *dbname, const char *user, const char *password)
{
	struct raw_error err;
	int fd = -1;
	int rc = raw_login_ex(p->port, dbname, user, password, NULL, &err, &fd);
	ck_assert_msg(rc == 0 && fd >= 0, "raw login %s@%s: rc %d %s %s\n%s", user, dbname, rc, err.sqlstate,
		      err.message, pgv_log_tail(p, 1500));
	return fd;
}

static void raw_query_ok(int fd, const char *sql, const char *expect)
{
	char value[256];
	struct raw_error err;
	int rc = raw_query(fd, sql, value, sizeof(value), &err);
	ck_assert_msg(rc == 0, "%s: rc %d %s %s", sql, rc, err.sqlstate, err.message);
	if (expect)
		ck_assert_msg(strcmp(value, expect) == 0, "%s: got \"%s\", expected \"%s\"", sql, value, expect);
}

/*
 * Raw clients driven together: each may send `sql` once (every <= 0) or
 * every `every` seconds while not waiting for an answer, and records the
 * first ErrorResponse, NOTICEs, ReadyForQuerys and when the socket closed.
 */
struct rcli {
	int fd;
	double t0;		/* elapsed times count from here */
	const char *sql;
	double every;
	double next;
	bool busy, sent_once, closed;
	int ready, notices;
	double err_at, closed_at;	/* seconds after t0, -1 never */
	struct raw_error err;
	unsigned char buf[16384];
	size_t len;
};

static void rcli_init(struct rcli *r, int fd, const char *sql, double every)
{
	memset(r, 0, sizeof(*r));
	r->fd = fd;
	r->t0 = now_s();
	r->sql = sql;
	r->every = every;
	r->next = r->t0;
	r->err_at = r->closed_at = -1;
}

static void rcli_send(struct rcli *r)
{
	size_t n = strlen(r->sql) + 1;
	unsigned char msg[1024];
	ck_assert(n + 5 <= sizeof(msg));
	msg[0] = 'Q';
	raw_put_u32(msg + 1, (uint32_t)(n + 4));
	memcpy(msg + 5, r->sql, n);
	if (!raw_send(r->fd, msg, n + 5)) {
		r->closed = true;
		if (r->closed_at < 0)
			r->closed_at = now_s() - r->t0;
		return;
	}
	r->busy = true;
	r->sent_once = true;
}

static void rcli_read(struct rcli *r)
{
	ssize_t n = recv(r->fd, r->buf + r->len, sizeof(r->buf) - r->len, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		r->closed = true;
		r->closed_at = now_s() - r->t0;
		return;
	}
	r->len += (size_t)n;
	while (r->len >= 5) {
		uint32_t mlen = raw_get_u32(r->buf + 1);
		ck_assert_msg(mlen >= 4 && mlen < sizeof(r->buf) - 1, "message of %u bytes", mlen);
		if (r->len < 1 + (size_t)mlen)
			break;
		switch (r->buf[0]) {
		case 'E':
			if (r->err_at < 0) {
				r->err_at = now_s() - r->t0;
				memset(&r->err, 0, sizeof(r->err));
				raw_parse_error(r->buf + 5, mlen - 4, &r->err);
			}
			break;
		case 'N':
			r->notices++;
			break;
		case 'Z':
			r->busy = false;
			r->ready++;
			break;
		default:
			break;
		}
		memmove(r->buf, r->buf + 1 + mlen, r->len - 1 - mlen);
		r->len -= 1 + mlen;
	}
}

static void rcli_run(struct rcli *v, int n, double seconds)
{
	double end = now_s() + seconds;
	while (now_s() < end) {
		struct pollfd pfd[16];
		ck_assert(n <= 16);
		for (int i = 0; i < n; i++) {
			struct rcli *r = &v[i];
			if (!r->closed && r->err_at < 0 && !r->busy && r->sql &&
			    (r->every > 0 ? now_s() >= r->next : !r->sent_once)) {
				rcli_send(r);
				r->next = now_s() + r->every;
			}
			pfd[i] = (struct pollfd){ .fd = r->closed ? -1 : r->fd, .events = POLLIN };
		}
		if (poll(pfd, (nfds_t)n, 20) > 0)
			for (int i = 0; i < n; i++)
				if (pfd[i].revents)
					rcli_read(&v[i]);
	}
}

/* ---------------------------------------------------------------- sockets and a TCP proxy */

static int listen_port_in_range(int *port_out)
{
	int start = (int)(getpid() % 500) * 2;
	for (int i = 0; i < 1000; i++) {
		int port = 25000 + (start + i) % 1000;
		if (port == pg_port())
			continue;
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int one = 1;
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(fd, 64) == 0) {
			*port_out = port;
			return fd;
		}
		close(fd);
	}
	ck_abort_msg("no free port in 25000-25999");
	return -1;
}

static int listen_exact(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	for (int i = 0; i < 100; i++) {
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(fd, 64) == 0)
			return fd;
		sleep_s(0.05);
	}
	ck_abort_msg("cannot listen on 127.0.0.1:%d again: %s", port, strerror(errno));
	return -1;
}

enum proxy_mode {
	PX_FORWARD,		/* relay to PostgreSQL */
	PX_HOLD_CANCELS,	/* relay, but CancelRequests are held open and never delivered */
	PX_CLOSE,		/* accept and close at once */
};

struct proxy {
	pid_t pid;
	int port;
	int count_fd;		/* one byte per accepted connection */
	int accepts;
};

/*
 * The proxy's processes must not use Check's assertions: Check reports
 * through a file descriptor number the proxy has closed and reused.
 */
static void relay(int c, int delay_ms, bool hold_cancels, int upstream_port)
{
	if (delay_ms > 0)
		sleep_s(delay_ms / 1000.0);
	if (hold_cancels) {
		unsigned char h[8];
		if (recv(c, h, sizeof(h), MSG_PEEK | MSG_WAITALL) == 8 && raw_get_u32(h) == 16 &&
		    raw_get_u32(h + 4) == 80877102u)
			for (;;)
				pause();	/* never delivered, never answered */
	}
	int u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)upstream_port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(u, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		_exit(0);
	int one = 1;
	setsockopt(u, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	char buf[65536];
	for (;;) {
		struct pollfd pfd[2] = { { .fd = c, .events = POLLIN }, { .fd = u, .events = POLLIN } };
		if (poll(pfd, 2, -1) < 0)
			continue;
		for (int i = 0; i < 2; i++) {
			if (!pfd[i].revents)
				continue;
			int from = i == 0 ? c : u, to = i == 0 ? u : c;
			ssize_t n = recv(from, buf, sizeof(buf), 0);
			if (n <= 0)
				_exit(0);
			for (ssize_t off = 0; off < n;) {
				ssize_t w = send(to, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
				if (w <= 0)
					_exit(0);
				off += w;
			}
		}
	}
}

static void proxy_loop(int lfd, int count_fd, enum proxy_mode mode, int delay_ms, int upstream_port)
{
	signal(SIGCHLD, SIG_IGN);	/* relays reap themselves */
	for (;;) {
		int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			_exit(1);
		}
		if (write(count_fd, "a", 1) < 0) {
			/* counting is best effort */
		}
		if (mode == PX_CLOSE) {
			close(c);
			continue;
		}
		pid_t me = getpid();
		pid_t g = fork();
		if (g == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != me)
				_exit(0);
			close(lfd);
			close(count_fd);
			relay(c, delay_ms, mode == PX_HOLD_CANCELS, upstream_port);
			_exit(0);
		}
		close(c);
	}
}

/* Starts the proxy on `port` (0: any free port), in this test's process group, killed with it. */
static void proxy_start(struct proxy *px, int port, enum proxy_mode mode, int delay_ms)
{
	int lfd = port ? listen_exact(port) : listen_port_in_range(&port);
	int pfd[2], upstream = pg_port();
	ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
	fcntl(pfd[0], F_SETFL, O_NONBLOCK);
	fcntl(pfd[1], F_SETFL, O_NONBLOCK);
	fflush(NULL);
	pid_t parent = getpid();
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(0);
		long maxfd = sysconf(_SC_OPEN_MAX);
		if (maxfd < 0 || maxfd > 65536)
			maxfd = 65536;
		for (int fd = 3; fd < maxfd; fd++)
			if (fd != lfd && fd != pfd[1])
				close(fd);
		proxy_loop(lfd, pfd[1], mode, delay_ms, upstream);
		_exit(0);
	}
	close(lfd);
	close(pfd[1]);
	int accepts = px->pid == 0 && px->port == 0 ? 0 : px->accepts;
	px->pid = pid;
	px->port = port;
	px->count_fd = pfd[0];
	px->accepts = accepts;
}

/* Connections the proxy accepted so far (over all its runs). */
static int proxy_accepts(struct proxy *px)
{
	char buf[256];
	ssize_t n;
	while (px->count_fd >= 0 && (n = read(px->count_fd, buf, sizeof(buf))) > 0)
		px->accepts += (int)n;
	return px->accepts;
}

/* Kills the proxy; its relays die with it (PR_SET_PDEATHSIG), which closes their connections. */
static void proxy_stop(struct proxy *px)
{
	if (px->pid <= 0)
		return;
	proxy_accepts(px);
	kill(px->pid, SIGKILL);
	waitpid(px->pid, NULL, 0);
	px->pid = 0;
	close(px->count_fd);
	px->count_fd = -1;
}

/* ---------------------------------------------------------------- async libpq logins */

struct aconn {
	PGconn *c;
	double start, at;	/* at: seconds after start when it ended, -1 still going */
	bool ok;
	PostgresPollingStatusType last;
	char err[512];
};

static void aconn_start(struct aconn *a, struct pgv *p, const char *dbname, const char *user, const char *password)
{
	const char *kw[10], *val[10];
	char port[16];
	memset(a, 0, sizeof(*a));
	pgv_conn_params(p, dbname, user, password, kw, val, port);
	a->start = now_s();
	a->at = -1;
	a->c = PQconnectStartParams(kw, val, 0);
	ck_assert_ptr_nonnull(a->c);
	a->last = PGRES_POLLING_WRITING;
	if (PQstatus(a->c) == CONNECTION_BAD) {
		a->at = 0;
		snprintf(a->err, sizeof(a->err), "%s", PQerrorMessage(a->c));
	}
}

/* Drives every unfinished login for up to wait_ms; returns how many are unfinished. */
static int aconn_step(struct aconn *v, int n, int wait_ms)
{
	struct pollfd pfd[64];
	int idx[64], np = 0, pending = 0;
	for (int i = 0; i < n; i++) {
		if (v[i].at >= 0)
			continue;
		pending++;
		if (np < 64) {
			pfd[np] = (struct pollfd){ .fd = PQsocket(v[i].c),
						   .events = v[i].last == PGRES_POLLING_READING ? POLLIN : POLLOUT };
			idx[np++] = i;
		}
	}
	if (pending == 0)
		return 0;
	poll(pfd, (nfds_t)np, wait_ms);
	for (int k = 0; k < np; k++) {
		if (!pfd[k].revents)
			continue;
		struct aconn *a = &v[idx[k]];
		a->last = PQconnectPoll(a->c);
		if (a->last == PGRES_POLLING_OK || a->last == PGRES_POLLING_FAILED) {
			a->at = now_s() - a->start;
			a->ok = a->last == PGRES_POLLING_OK;
			if (!a->ok)
				snprintf(a->err, sizeof(a->err), "%s", PQerrorMessage(a->c));
			pending--;
		}
	}
	return pending;
}

/* ---------------------------------------------------------------- admin console */

static bool show_databases_lists(PGconn *admin, const char *name)
{
	PGresult *r = PQexec(admin, "SHOW DATABASES");
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "SHOW DATABASES: %s", PQerrorMessage(admin));
	int col = PQfnumber(r, "name");
	ck_assert_int_ge(col, 0);
	bool found = false;
	for (int i = 0; i < PQntuples(r); i++)
		if (strcmp(PQgetvalue(r, i, col), name) == 0)
			found = true;
	PQclear(r);
	return found;
}

/* ================================================================ client timeouts */

/* Startup for user/dbname on a new raw socket, up to the password request (code 3, cleartext). */
static int raw_startup_until_password(int port, const char *user, const char *dbname)
{
	unsigned char pkt[256];
	size_t off = 8;
	off += (size_t)snprintf((char *)pkt + off, sizeof(pkt) - off, "user%c%s%cdatabase%c%s%c", 0, user, 0, 0,
				dbname, 0);
	pkt[off++] = 0;
	raw_put_u32(pkt, (uint32_t)off);
	raw_put_u32(pkt + 4, 196608);
	int fd = raw_connect(port);
	ck_assert(raw_send(fd, pkt, off));
	struct rcli r;
	rcli_init(&r, fd, NULL, 0);
	double end = now_s() + 5;
	while (r.len < 9 && now_s() < end && !r.closed) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		poll(&pfd, 1, 50);
		ssize_t n = recv(fd, r.buf + r.len, sizeof(r.buf) - r.len, MSG_DONTWAIT);
		if (n > 0)
			r.len += (size_t)n;
		else if (n == 0)
			r.closed = true;
	}
	ck_assert_msg(r.len >= 9 && r.buf[0] == 'R' && raw_get_u32(r.buf + 5) == 3,
		      "expected a cleartext password request (got %zu bytes, type %c)", r.len, r.len ? r.buf[0] : '-');
	return fd;
}

START_TEST(client_login_timeout_fires)
{
	struct pgv p;
	pgv_start(&p, "auth_type = plain\nclient_login_timeout = 1.5\n", std_databases(), std_userlist());
	/* The pool's first login also logs in to PostgreSQL (TLS, SCRAM): done here, outside the timing. */
	PGconn *warm = pgv_connect(&p, DB, "scram_user", "scram_pass");
	ck_assert_str_eq(query_value(warm, "SELECT 1"), "1");
	PQfinish(warm);
	/* slow: never answers the password request */
	double t0 = now_s();
	int slow = raw_startup_until_password(p.port, "scram_user", DB);
	/* in time: answers after 0.9 s, then stays */
	int ontime = raw_startup_until_password(p.port, "scram_user", DB);
	struct rcli r[2];
	rcli_init(&r[0], slow, NULL, 0);
	r[0].t0 = t0;
	sleep_until(t0 + 0.9);
	raw_send_password_message(ontime, "scram_pass", 11);
	rcli_init(&r[1], ontime, NULL, 0);
	r[1].t0 = t0;
	rcli_run(r, 2, 3.5);

	assert_fired("client_login_timeout", r[0].err_at, 1.5);
	assert_raw_fatal(&r[0].err, "client that did not log in", "client_login_timeout");
	ck_assert_msg(r[0].closed, "the slow client was not disconnected");
	ck_assert_msg(r[1].err_at < 0 && !r[1].closed, "the client that logged in at 0.9 s was cut off: %s",
		      r[1].err.message);
	ck_assert_msg(r[1].ready == 1, "the client that logged in at 0.9 s got %d ReadyForQuery", r[1].ready);
	raw_query_ok(ontime, "SELECT 'still here'", "still here");
	pgv_expect_log(&p, "closing because: client_login_timeout (age=", 2);
	close(slow);
	close(ontime);
	pgv_stop(&p);
}
END_TEST

/* A client whose login waits for a server that never answers is cut off by client_login_timeout too. */
START_TEST(client_login_timeout_server_down)
{
	struct pgv p;
	char dbs[512] = "";
	int bh_port;
	int blackhole = listen_port_in_range(&bh_port);	/* never accepts */
	add_db(dbs, sizeof(dbs), "blackhole", bh_port, NULL);
	pgv_start(&p, BASE "client_login_timeout = 1.5\nserver_connect_timeout = 20\n", dbs, std_userlist());
	double t0 = now_s();
	PGconn *c = pgv_connect(&p, "blackhole", "scram_user", "scram_pass");
	double took = now_s() - t0;
	ck_assert_msg(PQstatus(c) == CONNECTION_BAD, "logged in through a server that never answers");
	ck_assert_msg(strstr(PQerrorMessage(c), "client_login_timeout") != NULL, "error: %s", PQerrorMessage(c));
	assert_fired("client_login_timeout while the server is down", took, 1.5);
	PQfinish(c);
	pgv_expect_log(&p, "closing because: client_login_timeout", 2);
	pgv_stop(&p);
	close(blackhole);
}
END_TEST

START_TEST(client_idle_timeout_fires)
{
	struct pgv p;
	pgv_start(&p, TXN "client_idle_timeout = 1.5\n", std_databases(), std_userlist());
	struct rcli r[2];
	rcli_init(&r[0], raw_client(&p, DB, "scram_user", "scram_pass"), NULL, 0);
	/* busy: a query every 0.7 s, so never idle for 1.5 s */
	rcli_init(&r[1], raw_client(&p, DB, "md5_user", "md5_pass"), "SELECT 1", 0.7);
	rcli_run(r, 2, 3.6);
	assert_fired("client_idle_timeout", r[0].err_at, 1.5);
	assert_raw_fatal(&r[0].err, "idle client", "client_idle_timeout");
	ck_assert(r[0].closed);
	ck_assert_msg(r[1].err_at < 0 && !r[1].closed, "the busy client was cut off: %s", r[1].err.message);
	ck_assert_int_ge(r[1].ready, 4);
	pgv_expect_log(&p, "closing because: client_idle_timeout (age=", 2);
	close(r[0].fd);
	close(r[1].fd);
	pgv_stop(&p);
}
END_TEST

START_TEST(query_timeout_fires)
{
	struct pgv p;
	pgv_start(&p, TXN "query_timeout = 1.5\ndefault_pool_size = 3\n", std_databases(), std_userlist());
	PGconn *a = scram(&p, DB), *b = scram(&p, DB);
	struct outcome o[2];
	send_query(&o[0], a, "SELECT pg_sleep(4), 'long'");
	send_query(&o[1], b, "SELECT pg_sleep(0.5), 'short'");
	collect(o, 2, 6, NULL);
	assert_fatal(&o[0], "long query", "query timeout");
	assert_fired("query timeout", o[0].at, 1.5);
	assert_ok(&o[1], "a 0.5 s query under a 1.5 s query_timeout", "short");
	pgv_expect_log(&p, "closing because: query timeout (age=", 2);
	/* the pool serves on */
	ck_assert_str_eq(query_value(b, "SELECT 'after'"), "after");
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
	terminate_backends("scram_user", false);
}
END_TEST

START_TEST(query_wait_timeout_and_notify)
{
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 1\nquery_wait_timeout = 2\nquery_wait_notify = 0.5\n",
		  std_databases(), std_userlist());
	PGconn *holder = scram(&p, DB), *w1 = scram(&p, DB), *w2 = scram(&p, DB);
	int notices1 = 0, notices2 = 0;
	PQsetNoticeReceiver(w1, count_queued_notice, &notices1);
	PQsetNoticeReceiver(w2, count_queued_notice, &notices2);

	/* Under the limit: queued behind a 1 s query, served when it ends. */
	struct outcome o[2];
	send_query(&o[0], holder, "SELECT pg_sleep(1), 'held'");
	sleep_s(0.1);
	send_query(&o[1], w1, "SELECT 'w1'");
	collect(o, 2, 5, NULL);
	assert_ok(&o[0], "holder", "held");
	assert_ok(&o[1], "client queued for 0.9 s (query_wait_timeout 2 s)", "w1");
	ck_assert_msg(o[1].at >= 0.6, "w1 was not queued (answered after %.2f s)", o[1].at);
	ck_assert_int_le(notices1, 1);

	/* Over it: queued behind a 5 s query, refused at 2 s, told once that it is queued. */
	send_query(&o[0], holder, "SELECT pg_sleep(5), 'held'");
	sleep_s(0.1);
	send_query(&o[1], w2, "SELECT 'w2'");
	collect(&o[1], 1, 5, NULL);
	assert_fatal(&o[1], "client queued for too long", "query_wait_timeout");
	assert_fired("query_wait_timeout", o[1].at, 2);
	ck_assert_msg(notices2 == 1, "%d \"client being queued\" notices, expected exactly 1", notices2);
	pgv_expect_log(&p, "closing because: query_wait_timeout (age=", 2);
	PQfinish(holder);
	PQfinish(w1);
	PQfinish(w2);
	pgv_stop(&p);
	terminate_backends("scram_user", false);
}
END_TEST

START_TEST(idle_transaction_timeout_fires)
{
	struct pgv p;
	pgv_start(&p, TXN "idle_transaction_timeout = 1.5\n", std_databases(), std_userlist());
	struct rcli r[3];
	int idle_tx = raw_client(&p, DB, "scram_user", "scram_pass");
	int busy_tx = raw_client(&p, DB, "scram_user", "scram_pass");
	int idle = raw_client(&p, DB, "scram_user", "scram_pass");
	raw_query_ok(idle_tx, "BEGIN", NULL);
	rcli_init(&r[0], idle_tx, NULL, 0);
	raw_query_ok(busy_tx, "BEGIN", NULL);
	rcli_init(&r[1], busy_tx, "SELECT 1", 0.7);
	rcli_init(&r[2], idle, NULL, 0);	/* idle outside a transaction */
	rcli_run(r, 3, 3.6);
	assert_fired("idle transaction timeout", r[0].err_at, 1.5);
	assert_raw_fatal(&r[0].err, "client idle in a transaction", "idle transaction timeout");
	ck_assert(r[0].closed);
	ck_assert_msg(r[1].err_at < 0 && !r[1].closed, "busy transaction was cut off: %s", r[1].err.message);
	raw_query_ok(busy_tx, "COMMIT", NULL);
	ck_assert_msg(r[2].err_at < 0 && !r[2].closed, "idle client outside a transaction was cut off: %s",
		      r[2].err.message);
	raw_query_ok(idle, "SELECT 'fine'", "fine");
	pgv_expect_log(&p, "closing because: idle transaction timeout (age=", 2);
	close(idle_tx);
	close(busy_tx);
	close(idle);
	pgv_stop(&p);
}
END_TEST

START_TEST(transaction_timeout_fires)
{
	struct pgv p;
	pgv_start(&p, TXN "transaction_timeout = 2\n", std_databases(), std_userlist());
	int long_tx = raw_client(&p, DB, "scram_user", "scram_pass");
	int short_tx = raw_client(&p, DB, "scram_user", "scram_pass");
	struct rcli r[1];
	double t0 = now_s();
	raw_query_ok(long_tx, "BEGIN", NULL);
	rcli_init(&r[0], long_tx, "SELECT 1", 0.3);	/* never idle, but the transaction goes on */
	r[0].t0 = t0;

	/* A transaction of 0.6 s with a 2 s limit commits; outside a transaction nothing counts. */
	raw_query_ok(short_tx, "BEGIN", NULL);
	rcli_run(r, 1, 0.3);
	raw_query_ok(short_tx, "SELECT 1", "1");
	rcli_run(r, 1, 0.3);
	raw_query_ok(short_tx, "COMMIT", NULL);
	rcli_run(r, 1, 2.6);
	raw_query_ok(short_tx, "SELECT 'idle is fine'", "idle is fine");

	ck_assert_msg(r[0].err_at >= 0, "the 3.2 s transaction was not cut off (%d queries ran)", r[0].ready);
	ck_assert_msg(r[0].err_at >= EARLY_SHARE * 2 && r[0].err_at <= 2 + TICK_S + SLACK_S + 0.3,
		      "transaction timeout after %.2f s (timeout 2 s)", r[0].err_at);
	assert_raw_fatal(&r[0].err, "long transaction", "transaction timeout");
	ck_assert(r[0].closed);
	pgv_expect_log(&p, "closing because: transaction timeout (age=", 2);
	close(long_tx);
	close(short_tx);
	pgv_stop(&p);
}
END_TEST

/* [users] overrides: md5_user gets short query/idle-transaction/client-idle timeouts, pgbench_user a transaction_timeout. */
START_TEST(user_overrides_of_timeouts)
{
	struct pgv p;
	pgv_start(&p,
		  TXN "default_pool_size = 8\n"
		  "\n[users]\n"
		  "md5_user = query_timeout=1 idle_transaction_timeout=1 client_idle_timeout=1.5\n"
		  "pgbench_user = transaction_timeout=1.5\n",
		  std_databases(), std_userlist());
	enum { M_QUERY, M_IDLE_TX, M_IDLE, B_TX, S_QUERY, S_IDLE_TX, S_IDLE, S_TX, N };
	struct rcli r[N];
	int fd[N];
	/* Each timeout's clock starts at that client's own last step (login or BEGIN), not after the set-up. */
	double since[N];
	for (int i = 0; i < N; i++) {
		const char *user = i < B_TX ? "md5_user" : i == B_TX ? "pgbench_user" : "scram_user";
		const char *pw = i < B_TX ? "md5_pass" : i == B_TX ? "bench_pass" : "scram_pass";
		fd[i] = raw_client(&p, DB, user, pw);
		since[i] = now_s();
	}
	const int in_tx[] = { M_IDLE_TX, S_IDLE_TX, B_TX, S_TX };
	for (int i = 0; i < 4; i++) {
		since[in_tx[i]] = now_s();
		raw_query_ok(fd[in_tx[i]], "BEGIN", NULL);
	}
	double t0 = now_s();
	rcli_init(&r[M_QUERY], fd[M_QUERY], "SELECT pg_sleep(3)", 0);
	rcli_init(&r[M_IDLE_TX], fd[M_IDLE_TX], NULL, 0);
	rcli_init(&r[M_IDLE], fd[M_IDLE], NULL, 0);
	rcli_init(&r[B_TX], fd[B_TX], "SELECT 1", 0.3);
	rcli_init(&r[S_QUERY], fd[S_QUERY], "SELECT pg_sleep(2)", 0);
	rcli_init(&r[S_IDLE_TX], fd[S_IDLE_TX], NULL, 0);
	rcli_init(&r[S_IDLE], fd[S_IDLE], NULL, 0);
	rcli_init(&r[S_TX], fd[S_TX], "SELECT 1", 0.3);
	for (int i = 0; i < N; i++)
		r[i].t0 = i == M_QUERY || i == S_QUERY ? t0 : since[i];
	rcli_run(r, N, 3.6);

	assert_fired("[users] query_timeout", r[M_QUERY].err_at, 1);
	assert_raw_fatal(&r[M_QUERY].err, "md5_user's long query", "query timeout");
	assert_fired("[users] idle_transaction_timeout", r[M_IDLE_TX].err_at, 1);
	assert_raw_fatal(&r[M_IDLE_TX].err, "md5_user idle in a transaction", "idle transaction timeout");
	assert_fired("[users] client_idle_timeout", r[M_IDLE].err_at, 1.5);
	assert_raw_fatal(&r[M_IDLE].err, "idle md5_user", "client_idle_timeout");
	ck_assert_msg(r[B_TX].err_at >= 0 && r[B_TX].err_at <= 1.5 + TICK_S + SLACK_S + 0.3 &&
		      r[B_TX].err_at >= EARLY_SHARE * 1.5, "[users] transaction_timeout after %.2f s (1.5 s)",
		      r[B_TX].err_at);
	assert_raw_fatal(&r[B_TX].err, "pgbench_user's long transaction", "transaction timeout");
	/* scram_user has no override and the global values are off */
	for (int i = S_QUERY; i < N; i++)
		ck_assert_msg(r[i].err_at < 0 && !r[i].closed, "scram_user connection %d was cut off: %s",
			      i - S_QUERY, r[i].err.message);
	ck_assert_int_eq(r[S_QUERY].ready, 1);
	raw_query_ok(fd[S_IDLE_TX], "COMMIT", NULL);
	raw_query_ok(fd[S_TX], "COMMIT", NULL);
	raw_query_ok(fd[S_IDLE], "SELECT 'ok'", "ok");
	for (int i = 0; i < N; i++)
		close(fd[i]);
	pgv_stop(&p);
	terminate_backends("md5_user", false);
}
END_TEST

/* ================================================================ server timeouts */

/* A cancel that never completes holds its server; cancel_wait_timeout closes it. */
START_TEST(cancel_wait_timeout_closes_held_server)
{
	struct pgv p;
	struct proxy px = { 0 };
	char dbs[512] = "";
	proxy_start(&px, 0, PX_HOLD_CANCELS, 0);
	add_db(dbs, sizeof(dbs), "viaproxy", px.port, NULL);
	pgv_start(&p, TXN "default_pool_size = 1\ncancel_wait_timeout = 2\n", dbs, std_userlist());
	PGconn *c = scram(&p, "viaproxy");
	char pid1[32];
	snprintf(pid1, sizeof(pid1), "%s", query_value(c, "SELECT pg_backend_pid()"));

	struct outcome o;
	send_query(&o, c, "SELECT pg_sleep(1), 'slept'");
	double t0 = o.sent;
	sleep_s(0.3);
	PGcancel *cancel = PQgetCancel(c);
	char errbuf[256];
	ck_assert_int_eq(PQcancel(cancel, errbuf, sizeof(errbuf)), 1);
	PQfreeCancel(cancel);
	collect(&o, 1, 5, NULL);
	/* the proxy held the cancel back: the query ran to its end */
	assert_ok(&o, "query whose cancel never arrived", "slept");

	/* Its server is held until the cancel completes or cancel_wait_timeout (from when it was taken). */
	send_query(&o, c, "SELECT pg_backend_pid()");
	collect(&o, 1, 8, NULL);
	assert_ok(&o, "query after the held server", NULL);
	double at = o.sent + o.at - t0;
	ck_assert_msg(at >= 1.6, "served after %.2f s: the server a cancel was still in flight for was reused", at);
	ck_assert_msg(at <= 2 + TICK_S + SLACK_S, "served after %.2f s: cancel_wait_timeout (2 s) did not free the pool",
		      at);
	ck_assert_str_ne(o.value, pid1);
	pgv_expect_log(&p, "closing because: cancel_wait_timeout (age=", 2);
	PQfinish(c);
	pgv_stop(&p);
	proxy_stop(&px);
}
END_TEST

START_TEST(server_connect_timeout_fires)
{
	struct pgv p;
	struct proxy px = { 0 };
	char dbs[512] = "";
	int bh_port;
	int blackhole = listen_port_in_range(&bh_port);	/* never accepts: logins hang in its backlog */
	proxy_start(&px, 0, PX_FORWARD, 400);		/* answers 0.4 s late */
	add_db(dbs, sizeof(dbs), "blackhole", bh_port, NULL);
	add_db(dbs, sizeof(dbs), "slow", px.port, NULL);
	pgv_start(&p, BASE "server_connect_timeout = 1.5\nquery_wait_timeout = 4\n", dbs, std_userlist());

	/*
	 * As PgBouncer, a connect timeout closes only the server: the login
	 * stays queued for the next try until query_wait_timeout.
	 */
	double t0 = now_s();
	PGconn *c = pgv_connect(&p, "blackhole", "scram_user", "scram_pass");
	double took = now_s() - t0;
	ck_assert_msg(PQstatus(c) == CONNECTION_BAD, "logged in through a server that never answers");
	ck_assert_msg(strstr(PQerrorMessage(c), "query_wait_timeout") != NULL, "error: %s", PQerrorMessage(c));
	assert_fired("query_wait_timeout", took, 4);
	PQfinish(c);
	pgv_expect_log(&p, "closing because: connect timeout (age=", 2);

	t0 = now_s();
	c = scram(&p, "slow");
	ck_assert_msg(now_s() - t0 >= 0.35, "the slow server answered in %.2f s?", now_s() - t0);
	ck_assert_str_eq(query_value(c, "SELECT 'slow but fine'"), "slow but fine");
	PQfinish(c);
	pgv_stop(&p);
	proxy_stop(&px);
	close(blackhole);
}
END_TEST

/* Logins to a server that accepts and hangs up at once: retried every server_login_retry, not per client. */
START_TEST(server_login_retry_paces_attempts)
{
	struct pgv p;
	struct proxy px = { 0 };
	char dbs[512] = "";
	proxy_start(&px, 0, PX_CLOSE, 0);
	add_db(dbs, sizeof(dbs), "flaky", px.port, NULL);
	pgv_start(&p, BASE "server_login_retry = 2\nclient_login_timeout = 30\n", dbs, std_userlist());

	enum { N = 20 };
	struct aconn a[N];
	double t0 = now_s();
	int started = 0, at5 = -1;
	while (started < N || aconn_step(a, started, 0) > 0) {
		if (started < N && now_s() >= t0 + 0.25 * started) {
			aconn_start(&a[started], &p, "flaky", "scram_user", "scram_pass");
			started++;
		}
		aconn_step(a, started, 20);
		if (at5 < 0 && now_s() >= t0 + 5.0)
			at5 = proxy_accepts(&px);
		ck_assert_msg(now_s() - t0 < 15, "clients still waiting after 15 s");
	}
	if (at5 < 0)
		at5 = proxy_accepts(&px);
	for (int i = 0; i < N; i++) {
		ck_assert_msg(!a[i].ok, "client %d logged in through a server that hangs up", i);
		ck_assert_msg(strstr(a[i].err, "FATAL") != NULL, "client %d: no error from pgvalve: %s", i, a[i].err);
		ck_assert_msg(a[i].at <= 2 + TICK_S + SLACK_S, "client %d waited %.2f s for its error", i, a[i].at);
		PQfinish(a[i].c);
	}
	ck_assert_msg(at5 >= 2 && at5 <= 4,
		      "%d server connection attempts in 5 s for 20 clients with server_login_retry = 2", at5);
	pgv_stop(&p);
	proxy_stop(&px);
}
END_TEST

/*
 * After proxy_stop(): the relay's processes die asynchronously; wait until
 * PostgreSQL has lost scram_user's backends (the relay closed both sides),
 * then give pgvalve a moment to read the end of its server connection.
 */
static void wait_relayed_servers_gone(void)
{
	ck_assert_msg(wait_backends("scram_user", 0, 5) >= 0, "scram_user still has %d backends after the relay stopped",
		      pg_count_backends("scram_user"));
	sleep_s(0.2);
}

/* The database goes away under a queued client and comes back: the client is served. */
START_TEST(database_down_then_back)
{
	struct pgv p;
	struct proxy px = { 0 };
	char dbs[512] = "";
	proxy_start(&px, 0, PX_FORWARD, 0);
	add_db(dbs, sizeof(dbs), "viaproxy", px.port, NULL);
	pgv_start(&p, TXN "server_login_retry = 1\nquery_wait_timeout = 10\n", dbs, std_userlist());
	PGconn *a = scram(&p, "viaproxy");
	ck_assert_str_eq(query_value(a, "SELECT 1"), "1");

	proxy_stop(&px);	/* its server connection goes too */
	wait_relayed_servers_gone();
	struct outcome o[2];
	send_query(&o[0], a, "SELECT 'back'");
	sleep_s(0.5);
	/* a client arriving during the outage (login needs no server once the pool knows its parameters) */
	PGconn *b = scram(&p, "viaproxy");
	PQsetNoticeReceiver(b, quiet_notice, NULL);
	send_query(&o[1], b, "SELECT 'b back'");
	collect(o, 2, 1.2, NULL);
	ck_assert_msg(o[0].at < 0, "the queued client got an answer while the database was down: %s%s", o[0].value,
		      o[0].msg);

	proxy_start(&px, px.port, PX_FORWARD, 0);
	double up = now_s();
	collect(o, 2, 8, NULL);
	assert_ok(&o[0], "client queued while the database was down", "back");
	double waited = o[0].sent + o[0].at - up;
	ck_assert_msg(waited <= 1 + TICK_S + SLACK_S, "served %.2f s after the database came back (retry 1 s)", waited);
	/* PgBouncer fails fast a client that needs a server while logins fail; a queued one is served */
	ck_assert_msg((o[1].ok && strcmp(o[1].value, "b back") == 0) ||
		      (!o[1].ok && strstr(o[1].msg, "server_login_retry") != NULL),
		      "client that came during the outage: %s%s", o[1].value, o[1].msg);
	PQfinish(a);
	PQfinish(b);
	pgv_stop(&p);
	proxy_stop(&px);
}
END_TEST

/* The database stays away: the queued client gets query_wait_timeout; later clients work once it is back. */
START_TEST(database_down_query_wait_timeout)
{
	struct pgv p;
	struct proxy px = { 0 };
	char dbs[512] = "";
	proxy_start(&px, 0, PX_FORWARD, 0);
	add_db(dbs, sizeof(dbs), "viaproxy", px.port, NULL);
	pgv_start(&p, TXN "server_login_retry = 0.5\nquery_wait_timeout = 2\n", dbs, std_userlist());
	PGconn *a = scram(&p, "viaproxy");
	ck_assert_str_eq(query_value(a, "SELECT 1"), "1");
	proxy_stop(&px);
	wait_relayed_servers_gone();
	struct outcome o;
	send_query(&o, a, "SELECT 'never'");
	collect(&o, 1, 5, NULL);
	assert_fatal(&o, "client queued while the database is down", "query_wait_timeout");
	assert_fired("query_wait_timeout", o.at, 2);
	PQfinish(a);

	proxy_start(&px, px.port, PX_FORWARD, 0);
	sleep_s(0.6);
	PGconn *b = scram(&p, "viaproxy");
	ck_assert_str_eq(query_value(b, "SELECT 'recovered'"), "recovered");
	PQfinish(b);
	pgv_stop(&p);
	proxy_stop(&px);
}
END_TEST

START_TEST(server_lifetime_closes_idle_and_released_servers)
{
	struct pgv p;
	pgv_start(&p, TXN "server_lifetime = 2\nserver_idle_timeout = 0\n", std_databases(), std_userlist());
	double t0 = now_s();
	PGconn *c = scram(&p, DB);
	int pid1 = atoi(query_value(c, "SELECT pg_backend_pid()"));

	/* idle: closed after its lifetime */
	double gone = -1;
	while (now_s() - t0 < 2 + TICK_S + SLACK_S + 1) {
		if (!backend_alive(pid1)) {
			gone = now_s() - t0;
			break;
		}
		sleep_s(0.1);
	}
	assert_fired("server_lifetime (idle server)", gone, 2);
	pgv_expect_log(&p, "closing because: server lifetime over (age=", 2);

	/* in use: kept through a transaction longer than its lifetime, closed when released */
	exec_ok(c, "BEGIN");
	int pid2 = atoi(query_value(c, "SELECT pg_backend_pid()"));
	ck_assert_int_ne(pid1, pid2);
	for (int i = 0; i < 6; i++) {
		sleep_s(0.5);
		ck_assert_int_eq(atoi(query_value(c, "SELECT pg_backend_pid()")), pid2);
	}
	exec_ok(c, "COMMIT");
	double t1 = now_s();
	while (backend_alive(pid2) && now_s() - t1 < 1.5)
		sleep_s(0.05);
	ck_assert_msg(!backend_alive(pid2), "server past its lifetime still open %.2f s after release", now_s() - t1);
	ck_assert_int_ne(atoi(query_value(c, "SELECT pg_backend_pid()")), pid2);
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

START_TEST(server_idle_timeout_closes_unused_servers)
{
	struct pgv p;
	pgv_start(&p, TXN "server_idle_timeout = 1.5\n", std_databases(), std_userlist());
	PGconn *c = scram(&p, DB);
	int pid = atoi(query_value(c, "SELECT pg_backend_pid()"));
	/* used every 0.6 s for 3 s: stays */
	for (int i = 0; i < 5; i++) {
		sleep_s(0.6);
		ck_assert_int_eq(atoi(query_value(c, "SELECT pg_backend_pid()")), pid);
	}
	double t0 = now_s(), gone = -1;
	while (now_s() - t0 < 1.5 + TICK_S + SLACK_S + 1) {
		if (!backend_alive(pid)) {
			gone = now_s() - t0;
			break;
		}
		sleep_s(0.1);
	}
	assert_fired("server_idle_timeout", gone, 1.5);
	pgv_expect_log(&p, "closing because: server idle timeout (age=", 2);
	ck_assert_str_eq(query_value(c, "SELECT 'new server'"), "new server");
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

START_TEST(autodb_idle_timeout_drops_database)
{
	struct pgv p;
	char dbs[256];
	snprintf(dbs, sizeof(dbs), "* = host=127.0.0.1 port=%d\n", pg_port());
	pgv_start(&p, BASE "admin_users = admin_u\nautodb_idle_timeout = 1.5\nserver_idle_timeout = 0.5\n", dbs,
		  userlist());
	PGconn *admin = connect_ok(&p, "pgbouncer", "admin_u", "admin_pass");
	PQsetNoticeReceiver(admin, quiet_notice, NULL);
	ck_assert(!show_databases_lists(admin, DB));
	PGconn *c = scram(&p, DB);
	ck_assert_str_eq(query_value(c, "SELECT current_database()"), DB);
	ck_assert(show_databases_lists(admin, DB));
	PQfinish(c);
	double t0 = now_s(), gone = -1;
	while (now_s() - t0 < 1.5 + TICK_S + SLACK_S + 1) {
		if (!show_databases_lists(admin, DB)) {
			gone = now_s() - t0;
			break;
		}
		sleep_s(0.1);
	}
	assert_fired("autodb_idle_timeout", gone, 1.5);
	pgv_expect_log(&p, "auto-database pgvtest unused for", 2);
	/* and it comes back on demand */
	c = scram(&p, DB);
	ck_assert_str_eq(query_value(c, "SELECT 'again'"), "again");
	ck_assert(show_databases_lists(admin, DB));
	PQfinish(c);
	PQfinish(admin);
	pgv_stop(&p);
}
END_TEST

/* A pgvalve whose server_check_query (server_check_delay 1 s) adds a row to pgv_check_log per check. */
static void start_with_check_log(struct pgv *p)
{
	direct_exec("CREATE TABLE IF NOT EXISTS pgv_check_log (at timestamptz DEFAULT clock_timestamp())");
	direct_exec("GRANT SELECT, INSERT ON pgv_check_log TO PUBLIC");
	direct_exec("TRUNCATE pgv_check_log");
	pgv_start(p, TXN "server_check_delay = 1\nserver_check_query = INSERT INTO pgv_check_log DEFAULT VALUES\n"
		  "admin_users = md5_user\n", std_databases(), std_userlist());
}

/* SHOW POOLS' column col for DB's pool of user; -1 when there is no such pool. */
static int pools_count(PGconn *admin, const char *user, const char *col)
{
	PGresult *r = PQexec(admin, "SHOW POOLS");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	int v = -1, f = PQfnumber(r, col);
	ck_assert_msg(f >= 0, "SHOW POOLS has no column %s", col);
	for (int i = 0; i < PQntuples(r); i++)
		if (strcmp(PQgetvalue(r, i, 0), DB) == 0 && strcmp(PQgetvalue(r, i, 1), user) == 0)
			v = atoi(PQgetvalue(r, i, f));
	PQclear(r);
	return v;
}

/* SHOW SERVERS rows of user in state. */
static int servers_in_state(PGconn *admin, const char *user, const char *state)
{
	PGresult *r = PQexec(admin, "SHOW SERVERS");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	int n = 0, fu = PQfnumber(r, "user"), fs = PQfnumber(r, "state");
	ck_assert(fu >= 0 && fs >= 0);
	for (int i = 0; i < PQntuples(r); i++)
		n += strcmp(PQgetvalue(r, i, fu), user) == 0 && strcmp(PQgetvalue(r, i, fs), state) == 0;
	PQclear(r);
	return n;
}

/* Column col of SHOW WORKERS's "total" row (pgvalve's own view of the same counts). */
static int workers_total(PGconn *admin, const char *col)
{
	PGresult *r = PQexec(admin, "SHOW WORKERS");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	int v = -1, f = PQfnumber(r, col);
	ck_assert_msg(f >= 0, "SHOW WORKERS has no column %s", col);
	for (int i = 0; i < PQntuples(r); i++)
		if (strcmp(PQgetvalue(r, i, 0), "total") == 0)
			v = atoi(PQgetvalue(r, i, f));
	PQclear(r);
	return v;
}

START_TEST(server_check_query_after_delay)
{
	struct pgv p;
	start_with_check_log(&p);
	PGconn *c = scram(&p, DB);
	for (int i = 0; i < 3; i++) {
		ck_assert_str_eq(query_value(c, "SELECT 'quick'"), "quick");
		sleep_s(0.2);
	}
	ck_assert_msg(direct_int("SELECT count(*) FROM pgv_check_log") == 0,
		      "server_check_query ran for a server used within server_check_delay");
	sleep_s(1.5);
	ck_assert_str_eq(query_value(c, "SELECT 'after a pause'"), "after a pause");
	ck_assert_msg(direct_int("SELECT count(*) FROM pgv_check_log") == 1,
		      "server_check_query ran %d times for a server unused for 1.5 s (delay 1 s)",
		      direct_int("SELECT count(*) FROM pgv_check_log"));
	ck_assert_str_eq(query_value(c, "SELECT 'quick again'"), "quick again");
	ck_assert_int_eq(direct_int("SELECT count(*) FROM pgv_check_log"), 1);
	PQfinish(c);
	pgv_stop(&p);
	direct_exec("DROP TABLE pgv_check_log");
}
END_TEST

/*
 * After a quiet spell every idle server is past server_check_delay: one
 * query checks one of them (not the whole pool), and waiters arriving
 * together get a check each and are all served, without a new connection
 * while stale servers are left.
 */
START_TEST(server_check_query_once_per_waiter)
{
	clean_users();
	struct pgv p;
	start_with_check_log(&p);
	enum { N = 4 };
	PGconn *c[N];
	struct outcome o[N];
	for (int i = 0; i < N; i++)
		c[i] = scram(&p, DB);
	for (int i = 0; i < N; i++)
		send_query(&o[i], c[i], "SELECT pg_sleep(0.3), 'busy'");
	collect(o, N, 10, NULL);
	for (int i = 0; i < N; i++)
		assert_ok(&o[i], "filling the pool", "busy");
	ck_assert_int_eq(pg_count_backends("scram_user"), N);
	ck_assert_int_eq(direct_int("SELECT count(*) FROM pgv_check_log"), 0);

	PGconn *admin = connect_ok(&p, "pgbouncer", "md5_user", "md5_pass");
	ck_assert_int_eq(pools_count(admin, "scram_user", "sv_idle"), N);
	ck_assert_int_eq(pools_count(admin, "scram_user", "sv_used"), 0);
	sleep_s(1.5);	/* all N idle servers are now past server_check_delay */
	/* PgBouncer's janitor moves such servers to SV_USED: SHOW POOLS counts them there */
	ck_assert_int_eq(pools_count(admin, "scram_user", "sv_idle"), 0);
	ck_assert_int_eq(pools_count(admin, "scram_user", "sv_used"), N);
	ck_assert_int_eq(servers_in_state(admin, "scram_user", "used"), N);
	ck_assert_int_eq(servers_in_state(admin, "scram_user", "idle"), 0);
	/* and so does SHOW WORKERS (this pgvalve has no other server) */
	ck_assert_int_eq(workers_total(admin, "sv_idle"), 0);
	ck_assert_int_eq(workers_total(admin, "sv_used"), N);
	ck_assert_str_eq(query_value(c[0], "SELECT 'one'"), "one");
	ck_assert_msg(direct_int("SELECT count(*) FROM pgv_check_log") == 1,
		      "one query after a quiet spell ran server_check_query %d times (%d idle servers)",
		      direct_int("SELECT count(*) FROM pgv_check_log"), N);
	ck_assert_int_eq(pools_count(admin, "scram_user", "sv_idle"), 1);
	ck_assert_int_eq(pools_count(admin, "scram_user", "sv_used"), N - 1);
	ck_assert_int_eq(workers_total(admin, "sv_idle"), 1);
	ck_assert_int_eq(workers_total(admin, "sv_used"), N - 1);

	sleep_s(1.5);
	struct watch w;
	watch_init(&w, "scram_user", NULL, NULL);
	for (int i = 0; i < N; i++)
		send_query(&o[i], c[i], "SELECT 'together'");
	collect(o, N, 10, &w);
	for (int i = 0; i < N; i++)
		assert_ok(&o[i], "waiters after a quiet spell", "together");
	int checks = direct_int("SELECT count(*) FROM pgv_check_log") - 1;
	ck_assert_msg(checks >= 1 && checks <= N, "%d waiters after a quiet spell ran %d checks", N, checks);
	ck_assert_msg(w.peak[0] <= N && pg_count_backends("scram_user") == N,
		      "servers opened while stale ones were idle: peak %d, now %d (pool had %d)", w.peak[0],
		      pg_count_backends("scram_user"), N);
	for (int i = 0; i < N; i++)
		PQfinish(c[i]);
	PQfinish(admin);
	pgv_stop(&p);
	direct_exec("DROP TABLE pgv_check_log");
}
END_TEST

/* ================================================================ pool sizing */

START_TEST(pool_sizes_default_db_user)
{
	clean_users();
	struct pgv p;
	char dbs[512] = "";
	add_db(dbs, sizeof(dbs), DB, pg_port(), "pool_size=2");
	add_db(dbs, sizeof(dbs), "pgv2", pg_port(), NULL);
	pgv_start(&p, TXN "default_pool_size = 3\n\n[users]\nmd5_user = pool_size=1\n", dbs, std_userlist());
	struct outcome o[11];
	PGconn *c[11];
	for (int i = 0; i < 11; i++)
		c[i] = i < 4 ? scram(&p, DB) : i < 7 ? connect_ok(&p, DB, "md5_user", "md5_pass") :
			connect_ok(&p, "pgv2", "pgbench_user", "bench_pass");
	struct watch w;
	watch_init(&w, "scram_user", "md5_user", "pgbench_user");
	for (int i = 0; i < 11; i++)
		send_query(&o[i], c[i], i >= 4 && i < 7 ? "SELECT pg_sleep(0.6), 'ok'" : "SELECT pg_sleep(1), 'ok'");
	collect(o, 11, 10, &w);
	for (int i = 0; i < 11; i++)
		assert_ok(&o[i], "queued client", "ok");
	ck_assert_msg(w.peak[0] == 2, "scram_user on %s (pool_size=2): %d servers", DB, w.peak[0]);
	ck_assert_msg(w.peak[1] == 1, "md5_user ([users] pool_size=1): %d servers", w.peak[1]);
	ck_assert_msg(w.peak[2] == 3, "pgbench_user on pgv2 (default_pool_size 3): %d servers", w.peak[2]);
	for (int i = 0; i < 11; i++)
		PQfinish(c[i]);
	pgv_stop(&p);
}
END_TEST

START_TEST(min_pool_size_kept_and_refilled)
{
	clean_users();
	struct pgv p;
	char dbs[512] = "";
	add_db(dbs, sizeof(dbs), DB, pg_port(), "min_pool_size=2");
	add_db(dbs, sizeof(dbs), "pgv2", pg_port(), NULL);
	pgv_start(&p, TXN "min_pool_size = 1\nserver_idle_timeout = 1\ndefault_pool_size = 5\n", dbs, std_userlist());
	PGconn *s = scram(&p, DB);
	PGconn *b = connect_ok(&p, "pgv2", "pgbench_user", "bench_pass");
	ck_assert_msg(wait_backends("scram_user", 2, 3) >= 0, "min_pool_size=2: %d servers",
		      pg_count_backends("scram_user"));
	ck_assert_msg(wait_backends("pgbench_user", 1, 3) >= 0, "global min_pool_size 1: %d servers",
		      pg_count_backends("pgbench_user"));
	/* server_idle_timeout does not go below the minimum, and nothing more is opened */
	for (int i = 0; i < 10; i++) {
		sleep_s(0.2);
		ck_assert_int_eq(pg_count_backends("scram_user"), 2);
		ck_assert_int_eq(pg_count_backends("pgbench_user"), 1);
	}

	/* a burst opens more; server_idle_timeout takes them back to the minimum */
	PGconn *c[4];
	struct outcome o[4];
	for (int i = 0; i < 4; i++)
		c[i] = scram(&p, DB);
	struct watch w;
	watch_init(&w, "scram_user", NULL, NULL);
	for (int i = 0; i < 4; i++)
		send_query(&o[i], c[i], "SELECT pg_sleep(0.5), 'ok'");
	collect(o, 4, 5, &w);
	for (int i = 0; i < 4; i++)
		assert_ok(&o[i], "burst", "ok");
	ck_assert_int_eq(w.peak[0], 4);
	double t0 = now_s();
	sleep_s(0.2);
	int extra = pg_count_backends("scram_user");
	/* Asserted only if the test itself was not held up long enough for the timeout to be due. */
	ck_assert_msg(extra > 2 || now_s() - t0 >= 0.8, "extra servers closed %.2f s after use (idle timeout 1 s)",
		      now_s() - t0);
	double back = wait_backends("scram_user", 2, 1 + TICK_S + SLACK_S + 1);
	ck_assert_msg(back >= 0, "still %d servers after server_idle_timeout", pg_count_backends("scram_user"));
	assert_fired("server_idle_timeout down to min_pool_size", back + 0.5, 1);

	/* killed servers are replaced */
	char before[256];
	snprintf(before, sizeof(before), "%s",
		 query_value(direct(), "SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE usename = 'scram_user'"));
	ck_assert_int_eq(terminate_backends("scram_user", true), 2);
	ck_assert_int_eq(terminate_backends("pgbench_user", true), 1);
	/* Gone first (pg_stat_activity lists a backend until it has exited), then replaced. */
	char still_listed[512];
	snprintf(still_listed, sizeof(still_listed),
		 "SELECT count(*) FROM pg_stat_activity WHERE usename = 'scram_user' AND pid = ANY('{%s}'::int[])", before);
	for (int i = 0; i < 100 && direct_int(still_listed) > 0; i++)
		sleep_s(0.05);
	ck_assert_msg(wait_backends("scram_user", 2, 3) >= 0, "after pg_terminate_backend: %d servers, expected 2 again",
		      pg_count_backends("scram_user"));
	ck_assert_msg(wait_backends("pgbench_user", 1, 3) >= 0,
		      "after pg_terminate_backend: %d pgbench_user servers, expected 1 again",
		      pg_count_backends("pgbench_user"));
	ck_assert_msg(direct_int(still_listed) == 0, "the killed servers (%s) still show", before);
	sleep_s(0.5);
	ck_assert_int_eq(pg_count_backends("scram_user"), 2);
	ck_assert_str_eq(query_value(s, "SELECT 'served'"), "served");
	ck_assert_str_eq(query_value(b, "SELECT 'served'"), "served");
	for (int i = 0; i < 4; i++)
		PQfinish(c[i]);
	PQfinish(s);
	PQfinish(b);
	pgv_stop(&p);
}
END_TEST

START_TEST(reserve_pool_after_timeout)
{
	clean_users();
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 2\nreserve_pool_size = 1\nreserve_pool_timeout = 1.5\n",
		  std_databases(), std_userlist());
	PGconn *c[4];
	struct outcome o[4];
	for (int i = 0; i < 4; i++)
		c[i] = scram(&p, DB);
	struct watch w;
	watch_init(&w, "scram_user", NULL, NULL);
	for (int i = 0; i < 4; i++)
		send_query(&o[i], c[i], "SELECT pg_sleep(2.5), 'ok'");
	collect(o, 4, 10, &w);
	for (int i = 0; i < 4; i++)
		assert_ok(&o[i], "client of a pool with a reserve", "ok");
	ck_assert_msg(w.first[0][2] >= 0 && w.first[0][2] < 1.0, "the pool of 2 was full only after %.2f s",
		      w.first[0][2]);
	assert_fired("reserve pool (third server)", w.first[0][3], 1.5);
	ck_assert_msg(w.peak[0] == 3, "%d servers with pool 2 + reserve 1", w.peak[0]);
	pgv_expect_log(&p, "taking connection from reserve_pool", 2);
	for (int i = 0; i < 4; i++)
		PQfinish(c[i]);
	pgv_stop(&p);
}
END_TEST

/* max_db_connections / max_user_connections queue clients; they never exceed the limit. */
START_TEST(max_db_and_user_connections_queue)
{
	clean_users();
	struct pgv p;
	char dbs[512] = "";
	add_db(dbs, sizeof(dbs), DB, pg_port(), "max_db_connections=2");
	add_db(dbs, sizeof(dbs), "pgv2", pg_port(), NULL);
	pgv_start(&p, TXN "default_pool_size = 5\n\n[users]\npgbench_user = max_user_connections=3\n", dbs,
		  std_userlist());
	PGconn *c[9];
	struct outcome o[9];
	for (int i = 0; i < 9; i++)
		c[i] = i < 4 ? scram(&p, DB) : connect_ok(&p, "pgv2", "pgbench_user", "bench_pass");
	struct watch w;
	watch_init(&w, "scram_user", "pgbench_user", NULL);
	for (int i = 0; i < 9; i++)
		send_query(&o[i], c[i], "SELECT pg_sleep(0.8), 'ok'");
	collect(o, 9, 10, &w);
	for (int i = 0; i < 9; i++)
		assert_ok(&o[i], "client over max_db/max_user_connections (queued, not refused)", "ok");
	ck_assert_msg(w.peak[0] == 2, "max_db_connections=2: %d servers", w.peak[0]);
	ck_assert_msg(w.peak[1] == 3, "max_user_connections=3: %d servers", w.peak[1]);
	for (int i = 0; i < 9; i++)
		PQfinish(c[i]);
	pgv_stop(&p);
}
END_TEST

/*
 * A database at max_db_connections whose servers all sit idle in another
 * user's pool: PgBouncer closes one of them ("evicted") for the waiting
 * client instead of leaving it queued until query_wait_timeout.
 */
START_TEST(full_database_evicts_idle_server)
{
	clean_users();
	struct pgv p;
	pgv_start(&p, TXN "default_pool_size = 2\nmax_db_connections = 2\nquery_wait_timeout = 5\n",
		  std_databases(), std_userlist());
	PGconn *m = connect_ok(&p, DB, "md5_user", "md5_pass");
	ck_assert_int_eq(terminate_backends("md5_user", true), 1);	/* md5_user's pool: no server */
	ck_assert(wait_backends("md5_user", 0, 3) >= 0);
	PGconn *s[2] = { scram(&p, DB), scram(&p, DB) };
	struct outcome o[2];
	send_query(&o[0], s[0], "SELECT pg_sleep(0.3), 'ok'");
	send_query(&o[1], s[1], "SELECT pg_sleep(0.3), 'ok'");
	collect(o, 2, 5, NULL);
	assert_ok(&o[0], "scram_user", "ok");
	assert_ok(&o[1], "scram_user", "ok");
	ck_assert_int_eq(pg_count_backends("scram_user"), 2);	/* now idle, the database is full */
	sleep_s(0.4);	/* md5_user's pool has noticed its dead server */
	struct outcome om;
	PQsetNoticeReceiver(m, quiet_notice, NULL);
	send_query(&om, m, "SELECT 'got one'");
	collect(&om, 1, 7, NULL);
	ck_assert_msg(om.ok && om.at <= 2.0,
		      "md5_user waited %.2f s (%s%s) while scram_user's 2 servers sat idle in a full database "
		      "(max_db_connections=2)", om.at, om.value, om.msg);
	ck_assert_str_eq(om.value, "got one");
	PQfinish(m);
	PQfinish(s[0]);
	PQfinish(s[1]);
	pgv_stop(&p);
}
END_TEST

/* The same for a user at max_user_connections with idle servers on another database. */
START_TEST(full_user_evicts_idle_server)
{
	clean_users();
	struct pgv p;
	char dbs[512] = "";
	add_db(dbs, sizeof(dbs), DB, pg_port(), NULL);
	add_db(dbs, sizeof(dbs), "pgv2", pg_port(), NULL);
	pgv_start(&p, TXN "default_pool_size = 2\nmax_user_connections = 2\nquery_wait_timeout = 5\n", dbs,
		  std_userlist());
	PGconn *other = scram(&p, "pgv2");
	ck_assert_int_eq(terminate_backends("scram_user", true), 1);	/* pgv2's pool: no server */
	ck_assert(wait_backends("scram_user", 0, 3) >= 0);
	PGconn *s[2] = { scram(&p, DB), scram(&p, DB) };
	struct outcome o[2];
	send_query(&o[0], s[0], "SELECT pg_sleep(0.3), 'ok'");
	send_query(&o[1], s[1], "SELECT pg_sleep(0.3), 'ok'");
	collect(o, 2, 5, NULL);
	assert_ok(&o[0], "scram_user on pgvtest", "ok");
	assert_ok(&o[1], "scram_user on pgvtest", "ok");
	ck_assert_int_eq(pg_count_backends("scram_user"), 2);
	sleep_s(0.4);
	struct outcome om;
	PQsetNoticeReceiver(other, quiet_notice, NULL);
	send_query(&om, other, "SELECT 'got one'");
	collect(&om, 1, 7, NULL);
	ck_assert_msg(om.ok && om.at <= 2.0,
		      "scram_user on pgv2 waited %.2f s (%s%s) while its 2 servers on pgvtest sat idle "
		      "(max_user_connections=2)", om.at, om.value, om.msg);
	PQfinish(other);
	PQfinish(s[0]);
	PQfinish(s[1]);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ client limits */

static void expect_refused(struct pgv *p, const char *dbname, const char *user, const char *password,
			   const char *reason)
{
	struct raw_error err;
	int rc = raw_login(p->port, dbname, user, password, &err);
	ck_assert_msg(rc == -1, "%s@%s: expected \"%s\", login rc %d", user, dbname, reason, rc);
	assert_raw_fatal(&err, "refused login", reason);
}

START_TEST(client_connection_limits)
{
	struct pgv p;
	char dbs[512] = "";
	add_db(dbs, sizeof(dbs), DB, pg_port(), "max_db_client_connections=3");
	add_db(dbs, sizeof(dbs), "pgv2", pg_port(), NULL);
	pgv_start(&p, TXN "max_user_client_connections = 2\n", dbs, std_userlist());
	int s1 = raw_client(&p, DB, "scram_user", "scram_pass");
	int s2 = raw_client(&p, DB, "scram_user", "scram_pass");
	expect_refused(&p, DB, "scram_user", "scram_pass",
		       "client connections exceeded (max_user_client_connections)");
	expect_refused(&p, "pgv2", "scram_user", "scram_pass",
		       "client connections exceeded (max_user_client_connections)");
	int m1 = raw_client(&p, DB, "md5_user", "md5_pass");	/* the database's third */
	expect_refused(&p, DB, "md5_user", "md5_pass", "client connections exceeded (max_db_client_connections)");
	expect_refused(&p, DB, "pgbench_user", "bench_pass",
		       "client connections exceeded (max_db_client_connections)");
	int m2 = raw_client(&p, "pgv2", "md5_user", "md5_pass");	/* another database has room */
	/* everyone in still works; a place that frees up is taken again */
	raw_query_ok(s1, "SELECT 1", "1");
	raw_query_ok(m1, "SELECT 1", "1");
	raw_query_ok(m2, "SELECT 1", "1");
	raw_send(s2, "X\0\0\0\4", 5);
	close(s2);
	sleep_s(0.3);
	int s3 = raw_client(&p, DB, "scram_user", "scram_pass");
	raw_query_ok(s3, "SELECT 'back in'", "back in");
	close(s1);
	close(s3);
	close(m1);
	close(m2);
	pgv_stop(&p);
}
END_TEST

/* Clients logging in at the same moment count against max_db_client_connections from their startup. */
START_TEST(max_db_client_connections_concurrent_logins)
{
	struct pgv p;
	char dbs[512] = "";
	add_db(dbs, sizeof(dbs), DB, pg_port(), "max_db_client_connections=3");
	pgv_start(&p, TXN, dbs, std_userlist());
	PGconn *warm = scram(&p, DB);	/* the pool knows its server parameters */
	PQfinish(warm);
	sleep_s(0.2);
	enum { N = 8 };
	struct aconn a[N];
	for (int i = 0; i < N; i++)
		aconn_start(&a[i], &p, DB, i % 2 ? "md5_user" : "scram_user", i % 2 ? "md5_pass" : "scram_pass");
	double t0 = now_s();
	while (aconn_step(a, N, 50) > 0)
		ck_assert_msg(now_s() - t0 < 15, "logins still going after 15 s");
	int ok = 0;
	for (int i = 0; i < N; i++) {
		if (a[i].ok)
			ok++;
		else
			ck_assert_msg(strstr(a[i].err, "client connections exceeded (max_db_client_connections)"),
				      "login %d: %s", i, a[i].err);
	}
	ck_assert_msg(ok == 3, "%d of %d simultaneous logins got in with max_db_client_connections=3", ok, N);
	for (int i = 0; i < N; i++)
		PQfinish(a[i].c);
	pgv_stop(&p);
}
END_TEST

START_TEST(max_client_conn_refuses)
{
	struct pgv p;
	pgv_start(&p, TXN "max_client_conn = 4\nadmin_users = admin_u\n", std_databases(), userlist());
	int fd[4];
	for (int i = 0; i < 4; i++)
		fd[i] = raw_client(&p, DB, "scram_user", "scram_pass");
	expect_refused(&p, DB, "md5_user", "md5_pass", "no more connections allowed (max_client_conn)");
	/* the admin console stays reachable, as in PgBouncer */
	PGconn *admin = connect_ok(&p, "pgbouncer", "admin_u", "admin_pass");
	PQfinish(admin);
	for (int i = 0; i < 4; i++)
		raw_query_ok(fd[i], "SELECT 1", "1");
	raw_send(fd[0], "X\0\0\0\4", 5);
	close(fd[0]);
	sleep_s(0.3);
	fd[0] = raw_client(&p, DB, "md5_user", "md5_pass");
	raw_query_ok(fd[0], "SELECT 'in'", "in");
	for (int i = 0; i < 4; i++)
		close(fd[i]);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ network */

START_TEST(max_packet_size_refuses_large_message)
{
	struct pgv p;
	pgv_start(&p, TXN "max_packet_size = 2048\n", std_databases(), std_userlist());
	int big = raw_client(&p, DB, "scram_user", "scram_pass");
	int other = raw_client(&p, DB, "scram_user", "scram_pass");
	char sql[8192];
	snprintf(sql, sizeof(sql), "SELECT length('%0*d')", 1500, 0);
	raw_query_ok(big, sql, "1500");
	snprintf(sql, sizeof(sql), "SELECT length('%0*d')", 6000, 0);
	char value[64];
	struct raw_error err;
	ck_assert_int_eq(raw_query(big, sql, value, sizeof(value), &err), -1);
	ck_assert_msg(strcmp(err.severity, "FATAL") == 0 && strcmp(err.sqlstate, "08P01") == 0,
		      "oversized message: %s %s %s", err.severity, err.sqlstate, err.message);
	ck_assert_msg(raw_wait_closed(big, 3000), "connection kept after an oversized message");
	close(big);
	raw_query_ok(other, "SELECT 'unaffected'", "unaffected");
	int again = raw_client(&p, DB, "scram_user", "scram_pass");
	raw_query_ok(again, "SELECT 2", "2");
	close(other);
	close(again);
	pgv_stop(&p);
}
END_TEST

START_TEST(small_pkt_buf_large_messages)
{
	struct pgv p;
	pgv_start(&p, TXN "pkt_buf = 256\n", std_databases(), std_userlist());
	PGconn *c = scram(&p, DB);
	PGresult *r = PQexec(c, "SELECT repeat('x', 1000000) || 'end'");
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQerrorMessage(c));
	ck_assert_int_eq(PQgetlength(r, 0, 0), 1000003);
	ck_assert_int_eq(strcmp(PQgetvalue(r, 0, 0) + 1000000, "end"), 0);
	PQclear(r);
	size_t n = 200000;
	int off;
	char *q = malloc(n + 128);
	ck_assert_ptr_nonnull(q);
	off = snprintf(q, 128, "SELECT md5('");
	for (size_t i = 0; i < n; i++)
		q[off + (int)i] = (char)('a' + i % 26);
	snprintf(q + off + n, 128,
		 "') = (SELECT md5(string_agg(chr(97 + (g %% 26)), '' ORDER BY g)) FROM generate_series(0, %zu) g)", n - 1);
	ck_assert_str_eq(query_value(c, q), "t");
	free(q);
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/* The kernel's view of a socket: timer kind and when, from /proc/net/tcp ("tr:tm->when"). */
static bool tcp_timer(int local_port, int remote_port, int *tr, long *when)
{
	FILE *f = fopen("/proc/net/tcp", "re");
	char line[512];
	bool found = false;
	ck_assert_ptr_nonnull(f);
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned int la, lp, ra, rp, st, t;
		unsigned long w;
		if (sscanf(line, " %*u: %8X:%4X %8X:%4X %2X %*8X:%*8X %2X:%8lX", &la, &lp, &ra, &rp, &st, &t, &w) == 7 &&
		    (int)lp == local_port && (int)rp == remote_port && st == 1) {
			*tr = (int)t;
			*when = (long)w;
			found = true;
		}
	}
	fclose(f);
	return found;
}

static int local_port_of(int fd)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	return ntohs(sa.sin_port);
}

START_TEST(tcp_keepalive_and_listen_backlog)
{
	struct pgv p, off;
	pgv_start(&p, TXN "tcp_keepalive = 1\ntcp_keepidle = 7\nlisten_backlog = 37\n", std_databases(),
		  std_userlist());
	pgv_start(&off, TXN "tcp_keepalive = 0\n", std_databases(), std_userlist());
	PGconn *c = scram(&p, DB), *d = scram(&off, DB);
	ck_assert_str_eq(query_value(c, "SELECT 1"), "1");
	ck_assert_str_eq(query_value(d, "SELECT 1"), "1");
	sleep_s(0.2);
	int tr = -1;
	long when = -1;
	/* pgvalve's end of our connection: local = its port, remote = ours */
	ck_assert(tcp_timer(p.port, local_port_of(PQsocket(c)), &tr, &when));
	ck_assert_msg(tr == 2 && when > 0 && when <= 700,
		      "tcp_keepalive=1 tcp_keepidle=7: client socket timer %d, %ld ticks (expected keepalive, <= 7 s)",
		      tr, when);
	ck_assert(tcp_timer(off.port, local_port_of(PQsocket(d)), &tr, &when));
	ck_assert_msg(tr == 0, "tcp_keepalive=0: client socket has timer %d", tr);

	/* listen_backlog: the listening socket's accept queue limit (ss shows it as Send-Q) */
	char out[700], filter[64], text[4096];
	snprintf(out, sizeof(out), "%s/ss.out", p.dir);
	snprintf(filter, sizeof(filter), "sport = :%d", p.port);
	char *argv[] = { "ss", "-ltnH", filter, NULL };
	ck_assert_int_eq(run_program(argv, NULL, out, 10), 0);
	snprintf(text, sizeof(text), "%s", read_file_tail(out, 4000));
	unsigned long recvq = 0, sendq = 0;
	ck_assert_msg(sscanf(text, "LISTEN %lu %lu", &recvq, &sendq) == 2, "ss: %s", text);
	ck_assert_msg(sendq == 37, "listen_backlog=37: backlog %lu", sendq);

	/* Clients inherit the listener's settings; after a reload that changes them they get the new ones. */
	FILE *ini = fopen(p.ini, "a");
	ck_assert_ptr_nonnull(ini);
	fputs("tcp_keepalive = 0\n", ini);
	fclose(ini);
	ck_assert_int_eq(kill(p.pid, SIGHUP), 0);
	for (int i = 0; i < 100 && !pgv_log_contains(&p, "configuration reloaded"); i++)
		sleep_s(0.05);
	ck_assert_msg(pgv_log_contains(&p, "configuration reloaded"), "%s", pgv_log_tail(&p, 1500));
	PGconn *e = scram(&p, DB);
	ck_assert_str_eq(query_value(e, "SELECT 1"), "1");
	sleep_s(0.2);
	ck_assert(tcp_timer(p.port, local_port_of(PQsocket(e)), &tr, &when));
	ck_assert_msg(tr == 0, "tcp_keepalive=0 after a reload: client socket has timer %d", tr);
	PQfinish(e);
	PQfinish(c);
	PQfinish(d);
	pgv_stop(&p);
	pgv_stop(&off);
}
END_TEST

/* tcp_keepalive applies to server connections too (PgBouncer tunes every socket it opens). */
START_TEST(tcp_keepalive_on_server_connections)
{
	clean_users();
	struct pgv p;
	pgv_start(&p, TXN "tcp_keepalive = 1\ntcp_keepidle = 7\n", std_databases(), std_userlist());
	PGconn *c = scram(&p, DB);
	ck_assert_str_eq(query_value(c, "SELECT 1"), "1");
	int port = direct_int("SELECT client_port FROM pg_stat_activity WHERE usename = 'scram_user'"
			      " AND backend_type = 'client backend' LIMIT 1");
	ck_assert_int_gt(port, 0);
	sleep_s(0.2);
	int tr = -1;
	long when = -1;
	ck_assert_msg(tcp_timer(port, pg_port(), &tr, &when), "pgvalve's socket 127.0.0.1:%d not found", port);
	ck_assert_msg(tr == 2 && when > 0 && when <= 700,
		      "tcp_keepalive=1 tcp_keepidle=7: pgvalve's server socket has timer %d, %ld ticks "
		      "(expected keepalive)", tr, when);
	PQfinish(c);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ cost of idle clients */

static double process_cpu_s(pid_t pid)
{
	char path[64], buf[2048];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	ck_assert_msg(f != NULL, "open %s", path);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *s = strrchr(buf, ')');
	ck_assert_ptr_nonnull(s);
	unsigned long utime = 0, stime = 0;
	/* after "pid (comm)": state is field 3, utime 14, stime 15 */
	ck_assert(sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) == 2);
	return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

START_TEST(idle_clients_cost_little)
{
	enum { N = 2000 };
	struct rlimit rl;
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < 2 * N + 200) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	ck_assert_msg(rl.rlim_cur >= N + 200, "RLIMIT_NOFILE %lu is too low for %d clients",
		      (unsigned long)rl.rlim_cur, N);
	struct pgv p;
	pgv_start(&p, TXN "max_client_conn = 2100\ndefault_pool_size = 2\nlog_connections = 0\nlog_disconnections = 0\n",
		  std_databases(), std_userlist());
	static int fd[N];
	double t0 = now_s();
	for (int i = 0; i < N; i++)
		fd[i] = raw_client(&p, DB, "scram_user", "scram_pass");
	double login_s = now_s() - t0;
	sleep_s(1);
	double cpu0 = process_cpu_s(p.pid), w0 = now_s();
	sleep_s(5);
	double cpu = process_cpu_s(p.pid) - cpu0, wall = now_s() - w0;
	double share = cpu / wall;
	ck_assert_msg(share < 0.05, "pgvalve used %.1f%% of a core with %d idle clients (%.2f s CPU in %.1f s)",
		      share * 100, N, cpu, wall);
	/* nobody was dropped or sent anything */
	static struct pollfd pfd[N];
	for (int i = 0; i < N; i++)
		pfd[i] = (struct pollfd){ .fd = fd[i], .events = POLLIN };
	int ready = poll(pfd, N, 0);
	ck_assert_msg(ready == 0, "%d of %d idle clients were closed or sent something", ready, N);
	/* and they are still served */
	char sql[64], want[16];
	for (int i = 0; i < N; i += N / 20) {
		snprintf(sql, sizeof(sql), "SELECT %d", i);
		snprintf(want, sizeof(want), "%d", i);
		raw_query_ok(fd[i], sql, want);
	}
	raw_query_ok(fd[N - 1], "SELECT 'last'", "last");
	fprintf(stderr, "idle_clients_cost_little: %d logins in %.1f s; %.2f%% of a core while idle\n", N, login_s,
		share * 100);
	for (int i = 0; i < N; i++)
		close(fd[i]);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ pool_idle_timeout */

/* Whether SHOW POOLS has DB's pool of user. */
static bool pools_list_user(PGconn *a, const char *user)
{
	return pools_count(a, user, "cl_active") >= 0;
}

/* A pool with no clients and no servers for pool_idle_timeout is freed; one in use is kept. */
START_TEST(pool_idle_timeout_frees_unused_pools)
{
	struct pgv p;
	pgv_start(&p, "auth_type = md5\npool_mode = transaction\npool_idle_timeout = 1\nserver_idle_timeout = 1\n"
		  "admin_users = md5_user\n", std_databases(), std_userlist());
	PGconn *keep = pgv_connect(&p, DB, "md5_user", "md5_pass");
	ck_assert_str_eq(query_value(keep, "SELECT 1"), "1");
	PGconn *c = pgv_connect(&p, DB, "scram_user", "scram_pass");
	ck_assert_str_eq(query_value(c, "SELECT 1"), "1");
	PQfinish(c);
	PGconn *a = pgv_connect(&p, "pgbouncer", "md5_user", "md5_pass");
	ck_assert(pools_list_user(a, "scram_user"));	/* just used: still there */
	double t0 = now_s();
	while (pools_list_user(a, "scram_user") && now_s() - t0 < 1 + 1 + 0.34 + 3)
		usleep(100 * 1000);
	ck_assert_msg(!pools_list_user(a, "scram_user"), "an unused pool was not freed\n%s", pgv_log_tail(&p, 1000));
	ck_assert(pools_list_user(a, "md5_user"));	/* a client is connected: kept */
	ck_assert(pgv_log_contains(&p, "cleaning up idle pool for user scram_user on db " DB
				   " because: pool idle timeout (age= "));
	/* and the pool comes back on the next login */
	c = pgv_connect(&p, DB, "scram_user", "scram_pass");
	ck_assert_str_eq(query_value(c, "SELECT 2"), "2");
	PQfinish(c);
	PQfinish(a);
	PQfinish(keep);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ suite */

int main(void)
{
	Suite *s = suite_create("limits");
	struct {
		const char *name;
		const TTest *test;
		double timeout;
	} tests[] = {
		{ "client_login_timeout", client_login_timeout_fires, 20 },
		{ "client_login_timeout_server_down", client_login_timeout_server_down, 20 },
		{ "client_idle_timeout", client_idle_timeout_fires, 20 },
		{ "query_timeout", query_timeout_fires, 20 },
		{ "query_wait_timeout", query_wait_timeout_and_notify, 25 },
		{ "idle_transaction_timeout", idle_transaction_timeout_fires, 20 },
		{ "transaction_timeout", transaction_timeout_fires, 20 },
		{ "user_overrides", user_overrides_of_timeouts, 20 },
		{ "cancel_wait_timeout", cancel_wait_timeout_closes_held_server, 25 },
		{ "server_connect_timeout", server_connect_timeout_fires, 25 },
		{ "server_login_retry", server_login_retry_paces_attempts, 30 },
		{ "database_down_then_back", database_down_then_back, 30 },
		{ "database_down_wait_timeout", database_down_query_wait_timeout, 25 },
		{ "server_lifetime", server_lifetime_closes_idle_and_released_servers, 30 },
		{ "server_idle_timeout", server_idle_timeout_closes_unused_servers, 25 },
		{ "autodb_idle_timeout", autodb_idle_timeout_drops_database, 25 },
		{ "server_check_query", server_check_query_after_delay, 20 },
		{ "server_check_query_once_per_waiter", server_check_query_once_per_waiter, 30 },
		{ "pool_sizes", pool_sizes_default_db_user, 30 },
		{ "min_pool_size", min_pool_size_kept_and_refilled, 40 },
		{ "reserve_pool", reserve_pool_after_timeout, 30 },
		{ "max_db_user_connections", max_db_and_user_connections_queue, 30 },
		{ "full_database_evicts", full_database_evicts_idle_server, 30 },
		{ "full_user_evicts", full_user_evicts_idle_server, 30 },
		{ "client_connection_limits", client_connection_limits, 20 },
		{ "max_db_client_concurrent", max_db_client_connections_concurrent_logins, 25 },
		{ "max_client_conn", max_client_conn_refuses, 20 },
		{ "max_packet_size", max_packet_size_refuses_large_message, 20 },
		{ "pkt_buf", small_pkt_buf_large_messages, 20 },
		{ "tcp_keepalive_listen_backlog", tcp_keepalive_and_listen_backlog, 20 },
		{ "tcp_keepalive_servers", tcp_keepalive_on_server_connections, 20 },
		{ "idle_clients_cost", idle_clients_cost_little, 90 },
		{ "pool_idle_timeout", pool_idle_timeout_frees_unused_pools, 25 },
	};
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		TCase *tc = pgv_tcase_create(tests[i].name, tests[i].timeout);
		tcase_add_test(tc, tests[i].test);
		suite_add_tcase(s, tc);
	}
	return pgv_run_suite(s);
}
