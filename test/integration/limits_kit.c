/*
 * limits_kit.c - the helpers test_limits, test_timeouts and
 * test_server_lifecycle share (limits_kit.h). A database that goes away
 * is simulated with a TCP proxy started and stopped here (forked; it can
 * also hold cancel requests, delay a login, or accept and close at once),
 * or a listening socket that never accepts.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* accept4, pipe2 */
#endif
#include "limits_kit.h"

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

static const char QUEUED_NOTICE[] = "No server connection available in postgres backend, client being queued";

/* ================================================================ small helpers */

void sleep_until(double t)
{
	sleep_s(t - now_s());
}

int pg_port(void)
{
	const char *v = getenv("PGV_TEST_PGPORT");
	ck_assert_ptr_nonnull(v);
	return atoi(v);
}

/* Asserts that something a timeout of `value` seconds did happened `at` seconds after its start. */
void assert_fired(const char *what, double at, double value)
{
	ck_assert_msg(at >= 0, "%s never happened (timeout %.2f s)", what, value);
	ck_assert_msg(at >= EARLY_SHARE * value, "%s after %.2f s: too early for a timeout of %.2f s", what, at, value);
	ck_assert_msg(at <= value + TICK_S + SLACK_S, "%s after %.2f s: too late for a timeout of %.2f s", what, at,
		      value);
}

/* The standard users plus an admin console user. */
const char *userlist(void)
{
	static char buf[1024];
	snprintf(buf, sizeof(buf), "%s\"admin_u\" \"admin_pass\"\n", std_userlist());
	return buf;
}

/* "name = host=127.0.0.1 port=<port> dbname=pgvtest<extra>\n" appended to buf. */
void add_db(char *buf, size_t size, const char *name, int port, const char *extra)
{
	size_t len = strlen(buf);
	snprintf(buf + len, size - len, "%s = host=127.0.0.1 port=%d dbname=pgvtest%s%s\n", name, port,
		 extra ? " " : "", extra ? extra : "");
}

PGconn *connect_ok(struct pgv *p, const char *dbname, const char *user, const char *password)
{
	PGconn *c = pgv_connect(p, dbname, user, password);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "connect %s@%s: %s\n%s", user, dbname, PQerrorMessage(c),
		      pgv_log_tail(p, 1500));
	return c;
}

PGconn *scram(struct pgv *p, const char *dbname)
{
	return connect_ok(p, dbname, "scram_user", "scram_pass");
}

void exec_ok(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	ExecStatusType st = PQresultStatus(r);
	ck_assert_msg(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(c));
	PQclear(r);
}

void quiet_notice(void *arg, const PGresult *res)
{
	(void)arg;
	(void)res;
}

/* Counts the "client being queued" notices into *(int *)arg. */
void count_queued_notice(void *arg, const PGresult *res)
{
	if (strstr(PQresultErrorMessage(res), QUEUED_NOTICE))
		(*(int *)arg)++;
}

/* ---------------------------------------------------------------- PostgreSQL directly */

static PGconn *dconn;

PGconn *direct(void)
{
	if (dconn == NULL || PQstatus(dconn) != CONNECTION_OK) {
		PQfinish(dconn);
		dconn = pg_direct();
	}
	return dconn;
}

void direct_exec(const char *sql)
{
	exec_ok(direct(), sql);
}

int direct_int(const char *sql)
{
	return atoi(query_value(direct(), sql));
}

bool backend_alive(int pid)
{
	char sql[128];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM pg_stat_activity WHERE pid = %d", pid);
	return direct_int(sql) > 0;
}

/* Ends usename's backends (only the idle ones with idle_only); returns how many. */
int terminate_backends(const char *usename, bool idle_only)
{
	char sql[512];
	snprintf(sql, sizeof(sql),
		 "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = '%s'"
		 " AND backend_type = 'client backend' AND pid <> pg_backend_pid()%s",
		 usename, idle_only ? " AND state = 'idle'" : "");
	return direct_int(sql);
}

/* Seconds until usename has exactly `want` backends, or -1 after timeout_s. */
double wait_backends(const char *usename, int want, double timeout_s)
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

void clean_users(void)
{
	static const char *const all[] = { "scram_user", "md5_user", "pgbench_user" };
	no_backends_left(all, 3);
}

/* ---------------------------------------------------------------- backend counts over time */

void watch_init(struct watch *w, const char *u0, const char *u1, const char *u2)
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

void send_query(struct outcome *o, PGconn *c, const char *sql)
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
void collect(struct outcome *o, int n, double timeout_s, struct watch *w)
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

void assert_ok(const struct outcome *o, const char *what, const char *value)
{
	ck_assert_msg(o->done && o->ok, "%s: no success (after %.2f s): %s %s", what, o->at, o->sqlstate, o->msg);
	if (value)
		ck_assert_msg(strcmp(o->value, value) == 0, "%s: got \"%s\", expected \"%s\"", what, o->value, value);
}

/* A FATAL 08P01 from pgvalve whose message is exactly `reason`. */
void assert_fatal(const struct outcome *o, const char *what, const char *reason)
{
	ck_assert_msg(o->at >= 0 && !o->ok, "%s: expected FATAL \"%s\", got %s (value \"%s\") after %.2f s", what,
		      reason, o->at < 0 ? "nothing" : "success", o->value, o->at);
	ck_assert_msg(strcmp(o->msg, reason) == 0, "%s: expected \"%s\", got \"%s\"", what, reason, o->msg);
	ck_assert_msg(strcmp(o->sqlstate, "08P01") == 0, "%s: SQLSTATE %s, expected 08P01", what, o->sqlstate);
	ck_assert_msg(strcmp(o->severity, "FATAL") == 0, "%s: severity %s, expected FATAL", what, o->severity);
}

/* ---------------------------------------------------------------- raw protocol clients */

void assert_raw_fatal(const struct raw_error *err, const char *what, const char *reason)
{
	ck_assert_msg(strcmp(err->message, reason) == 0, "%s: expected FATAL \"%s\", got \"%s\"", what, reason,
		      err->message);
	ck_assert_msg(strcmp(err->sqlstate, "08P01") == 0, "%s: SQLSTATE %s, expected 08P01", what, err->sqlstate);
	ck_assert_msg(strcmp(err->severity, "FATAL") == 0, "%s: severity %s, expected FATAL", what, err->severity);
}

/* A logged-in raw client (md5 through raw_login_ex); fails the test otherwise. */
int raw_client(struct pgv *p, const char *dbname, const char *user, const char *password)
{
	struct raw_error err;
	int fd = -1;
	int rc = raw_login_ex(p->port, dbname, user, password, NULL, &err, &fd);
	ck_assert_msg(rc == 0 && fd >= 0, "raw login %s@%s: rc %d %s %s\n%s", user, dbname, rc, err.sqlstate,
		      err.message, pgv_log_tail(p, 1500));
	return fd;
}

void raw_query_ok(int fd, const char *sql, const char *expect)
{
	char value[256];
	struct raw_error err;
	int rc = raw_query(fd, sql, value, sizeof(value), &err);
	ck_assert_msg(rc == 0, "%s: rc %d %s %s", sql, rc, err.sqlstate, err.message);
	if (expect)
		ck_assert_msg(strcmp(value, expect) == 0, "%s: got \"%s\", expected \"%s\"", sql, value, expect);
}

void rcli_init(struct rcli *r, int fd, const char *sql, double every)
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

void rcli_run(struct rcli *v, int n, double seconds)
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

int listen_port_in_range(int *port_out)
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
void proxy_start(struct proxy *px, int port, enum proxy_mode mode, int delay_ms)
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
int proxy_accepts(struct proxy *px)
{
	char buf[256];
	ssize_t n;
	while (px->count_fd >= 0 && (n = read(px->count_fd, buf, sizeof(buf))) > 0)
		px->accepts += (int)n;
	return px->accepts;
}

/* Kills the proxy; its relays die with it (PR_SET_PDEATHSIG), which closes their connections. */
void proxy_stop(struct proxy *px)
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

void aconn_start(struct aconn *a, struct pgv *p, const char *dbname, const char *user, const char *password)
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
int aconn_step(struct aconn *v, int n, int wait_ms)
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

bool show_databases_lists(PGconn *admin, const char *name)
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
int raw_startup_until_password(int port, const char *user, const char *dbname)
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
