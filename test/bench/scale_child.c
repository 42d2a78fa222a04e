/*
 * scale_child.c - one process of the scale load generator: its share of
 * the clients on one epoll loop (connect from a rotating 127.0.0.x source
 * address, optional TLS, startup and md5/SCRAM login, held idle or running
 * the open-loop transaction schedule of its active clients), driven by
 * the parent's commands and answering with reports (scale_gen.h).
 *
 * Owns its connections, its SSL_CTX (one per process, reused by every
 * connection; sessions are not resumed, so each TLS login is a full
 * handshake as a new client's is) and its SCRAM key cache. Writes only to
 * its sockets and its report pipe.
 *
 * Messages out are small (startup, password, Query) and go out whole or
 * the connection counts as failed ("send"): on loopback a fresh socket
 * always takes them.
 */
#include "scale_gen.h"
#include "scale_proto.h"

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum conn_state {
	C_FREE,
	C_CONNECTING,		/* connect() in progress */
	C_SSL_ANSWER,		/* SSLRequest sent, waiting for 'S' */
	C_TLS_HANDSHAKE,
	C_LOGIN,		/* startup sent, until ReadyForQuery */
	C_IDLE,			/* logged in, nothing outstanding */
	C_BUSY,			/* an active client's Query outstanding */
};

struct conn {
	int fd;
	uint8_t state;
	bool active, tls, failed_txn;
	uint32_t events;	/* what epoll watches */
	SSL *ssl;
	struct sp_auth *auth;	/* while logging in */
	uint64_t t0;		/* login: connect() started; busy: the transaction's scheduled time */
	uint8_t *part;		/* the start of a message not all read yet */
	size_t partlen;
	struct conn *lnext, *lprev;	/* logins in flight, oldest first */
};

#define EV_CMD UINT64_MAX
#define PENDING_CAP (1u << 16)

static const struct scale_opts *opt;
static struct scale_share share;
static int epfd, cmdfd, repfd;
static struct conn *conns;
static long nconns;
static unsigned src_next;
static SSL_CTX *ssl_ctx;
static struct sp_keycache keycache;
static uint8_t *scratch;
static size_t scratch_cap;
static uint8_t query_msg[4096];
static size_t query_len;

/* The logins of the current LOGIN or STORM command. */
static struct {
	bool open, burst;
	uint64_t started_at;	/* when the batch began: login_rate counts from it */
	long started;		/* logins started in this batch */
	long next, end;		/* conns[next..end) are still to start */
	long inflight;
	struct conn *head, *tail;
} batch;
static long next_held;		/* the first held client not started yet */
static long next_storm;

/* The active clients' schedule. */
static struct {
	bool running;
	uint64_t interval_us, next_due;
	uint64_t pending[PENDING_CAP];	/* scheduled times not dispatched yet */
	unsigned phead, pcount;
	long *idle;		/* ring of idle active clients */
	long icap, ihead, icount;
} sched;

static struct scale_report logins, txns;

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(3);	/* the parent is gone */
		p += n;
		len -= (size_t)n;
	}
}

static const char *errno_cause(int err)
{
	static char buf[SCALE_CAUSE_LEN];
	switch (err) {
	case ECONNREFUSED: return "refused";
	case ECONNRESET: case EPIPE: return "reset";
	case ETIMEDOUT: return "timeout";
	case EADDRNOTAVAIL: return "addrnotavail";
	case EMFILE: case ENFILE: return "fds";
	default:
		snprintf(buf, sizeof(buf), "errno:%d", err);
		return buf;
	}
}

/* The first failure of each kind goes to stderr, so a misconfigured run says why. */
static void say_once(const char *what, const char *text)
{
	static bool said_auth, said_error;
	bool *said = what[0] == 'a' ? &said_auth : &said_error;
	if (*said)
		return;
	*said = true;
	fprintf(stderr, "scale_gen: %s: %s\n", what, text);
}

static void set_events(struct conn *c, uint32_t ev)
{
	if (c->events == ev)
		return;
	struct epoll_event e = { .events = ev, .data.u64 = (uint64_t)(c - conns) };
	epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &e);
	c->events = ev;
}

static void login_unlink(struct conn *c)
{
	if (c->lprev)
		c->lprev->lnext = c->lnext;
	else
		batch.head = c->lnext;
	if (c->lnext)
		c->lnext->lprev = c->lprev;
	else
		batch.tail = c->lprev;
	c->lnext = c->lprev = NULL;
	batch.inflight--;
}

/* Frees what a connection holds; its slot is free again. */
static void conn_release(struct conn *c)
{
	if (c->ssl)
		SSL_free(c->ssl);
	if (c->fd >= 0)
		close(c->fd);	/* also leaves the epoll set */
	free(c->auth);
	free(c->part);
	c->ssl = NULL;
	c->auth = NULL;
	c->part = NULL;
	c->partlen = 0;
	c->fd = -1;
	c->events = 0;
	c->state = C_FREE;
}

static void login_fail(struct conn *c, const char *cause)
{
	login_unlink(c);
	conn_release(c);
	logins.failed++;
	scale_causes_add(&logins.causes, cause, 1);
}

/* A logged-in client closed under us (by the pooler, or a send that failed). */
static void conn_lost(struct conn *c, const char *cause)
{
	conn_release(c);
	txns.lost++;
	scale_causes_add(&txns.lost_causes, cause, 1);
}

static void conn_fail(struct conn *c, const char *cause)
{
	if (c->state == C_IDLE || c->state == C_BUSY)
		conn_lost(c, cause);
	else
		login_fail(c, cause);
}

static bool conn_send(struct conn *c, const void *buf, size_t len)
{
	if (c->ssl) {
		ERR_clear_error();
		return SSL_write(c->ssl, buf, (int)len) == (int)len;
	}
	return send(c->fd, buf, len, MSG_NOSIGNAL) == (ssize_t)len;
}

static void send_startup(struct conn *c)
{
	uint8_t buf[512];
	size_t n = sp_build_startup(buf, sizeof(buf), opt->user, opt->dbname, "scale_gen");
	if (!n || !conn_send(c, buf, n)) {
		login_fail(c, "send");
		return;
	}
	c->auth = xmalloc(sizeof(*c->auth));
	sp_auth_init(c->auth, opt->user, opt->password, &keycache);
	c->state = C_LOGIN;
	set_events(c, EPOLLIN);
}

static void conn_start(struct conn *c)
{
	struct sockaddr_in src = { .sin_family = AF_INET };
	int one = 1;
	c->t0 = now_us();
	c->lprev = batch.tail;
	c->lnext = NULL;
	if (batch.tail)
		batch.tail->lnext = c;
	else
		batch.head = c;
	batch.tail = c;
	batch.inflight++;
	c->state = C_CONNECTING;
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		login_fail(c, errno_cause(errno));
		return;
	}
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));	/* as libpq does */
	/* the port is chosen at connect(), per destination: 127.0.0.x's ports are never the limit */
	setsockopt(c->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	unsigned span = SCALE_SRC_LAST - SCALE_SRC_FIRST + 1;
	src.sin_addr.s_addr = htonl(0x7f000000u | (SCALE_SRC_FIRST + src_next++ % span));
	if (bind(c->fd, (struct sockaddr *)&src, sizeof(src)) < 0) {
		login_fail(c, errno_cause(errno));
		return;
	}
	struct epoll_event e = { .events = EPOLLOUT, .data.u64 = (uint64_t)(c - conns) };
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &e) < 0) {
		login_fail(c, errno_cause(errno));
		return;
	}
	c->events = EPOLLOUT;
	if (connect(c->fd, (const struct sockaddr *)&opt->addr, sizeof(opt->addr)) < 0 && errno != EINPROGRESS)
		login_fail(c, errno_cause(errno));
}

static void tls_step(struct conn *c)
{
	ERR_clear_error();
	int r = SSL_do_handshake(c->ssl);
	if (r == 1) {
		send_startup(c);
		return;
	}
	switch (SSL_get_error(c->ssl, r)) {
	case SSL_ERROR_WANT_READ: set_events(c, EPOLLIN); break;
	case SSL_ERROR_WANT_WRITE: set_events(c, EPOLLOUT); break;
	default: login_fail(c, "tls"); break;
	}
}

static void on_connected(struct conn *c)
{
	int err = 0;
	socklen_t len = sizeof(err);
	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0) {
		login_fail(c, errno_cause(err ? err : errno));
		return;
	}
	if (!c->tls) {
		send_startup(c);
		return;
	}
	uint8_t req[8];
	if (!conn_send(c, req, sp_build_ssl_request(req))) {
		login_fail(c, "send");
		return;
	}
	c->state = C_SSL_ANSWER;
	set_events(c, EPOLLIN);
}

static void on_ssl_answer(struct conn *c)
{
	char a;
	ssize_t n = recv(c->fd, &a, 1, 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		login_fail(c, n == 0 ? "closed" : errno_cause(errno));
		return;
	}
	if (a != 'S') {
		login_fail(c, "tls_refused");
		return;
	}
	c->ssl = SSL_new(ssl_ctx);
	if (!c->ssl || !SSL_set_fd(c->ssl, c->fd)) {
		login_fail(c, "tls");
		return;
	}
	SSL_set_connect_state(c->ssl);
	c->state = C_TLS_HANDSHAKE;
	tls_step(c);
}

/* Hands out transactions that are due to idle active clients, oldest first. */
static void dispatch(void)
{
	while (sched.pcount && sched.icount) {
		struct conn *c = &conns[sched.idle[sched.ihead]];
		sched.ihead = (sched.ihead + 1) % sched.icap;
		sched.icount--;
		if (c->state != C_IDLE)
			continue;	/* lost meanwhile */
		c->t0 = sched.pending[sched.phead];
		sched.phead = (sched.phead + 1) % PENDING_CAP;
		sched.pcount--;
		c->failed_txn = false;
		if (!conn_send(c, query_msg, query_len)) {
			conn_lost(c, "send");
			continue;
		}
		c->state = C_BUSY;
	}
}

static void idle_push(struct conn *c)
{
	sched.idle[(sched.ihead + sched.icount) % sched.icap] = c - conns;
	sched.icount++;
}

static void on_login_message(struct conn *c, char type, const uint8_t *body, size_t len)
{
	uint8_t out[SCRAM_MSG_MAX + 64];
	size_t outlen;
	const char *err;
	char code[8], cause[SCALE_CAUSE_LEN];
	switch (type) {
	case 'R':
		switch (sp_auth_step(c->auth, body, len, out, sizeof(out), &outlen, &err)) {
		case SP_AUTH_SEND:
			if (!conn_send(c, out, outlen))
				login_fail(c, "send");
			break;
		case SP_AUTH_FAIL:
			say_once("authentication", err);
			login_fail(c, "auth");
			break;
		default:
			break;
		}
		break;
	case 'E': {
		char text[200];
		if (sp_error_field(body, len, 'M', text, sizeof(text)))
			say_once("login refused", text);
		snprintf(cause, sizeof(cause), "sqlstate:%s", sp_error_field(body, len, 'C', code, sizeof(code)) ? code : "?");
		login_fail(c, cause);
		break;
	}
	case 'Z':
		hist_add(&logins.login, now_us() - c->t0);
		logins.logged_in++;
		login_unlink(c);
		free(c->auth);
		c->auth = NULL;
		c->state = C_IDLE;
		if (c->active) {
			idle_push(c);
			dispatch();
		}
		break;
	default:
		break;		/* ParameterStatus, BackendKeyData, NoticeResponse */
	}
}

static void on_message(struct conn *c, char type, const uint8_t *body, size_t len)
{
	char code[8], cause[SCALE_CAUSE_LEN];
	switch (c->state) {
	case C_LOGIN:
		on_login_message(c, type, body, len);
		break;
	case C_BUSY:
		if (type == 'E')
			c->failed_txn = true;
		else if (type == 'Z') {
			uint64_t us = now_us() - c->t0;
			hist_add(&txns.txn, us);
			if (us > txns.longest_wait_us)
				txns.longest_wait_us = us;
			txns.txns++;
			if (c->failed_txn)
				txns.txn_errors++;
			c->state = C_IDLE;
			idle_push(c);
			dispatch();
		}
		break;
	case C_IDLE:
		if (type == 'E') {	/* the pooler ends the session (FATAL) */
			snprintf(cause, sizeof(cause), "sqlstate:%s",
				 sp_error_field(body, len, 'C', code, sizeof(code)) ? code : "?");
			conn_lost(c, cause);
		}
		break;
	default:
		break;
	}
}

/* Reads what there is; each whole message goes to on_message, a partial one is kept. */
static void on_readable(struct conn *c)
{
	for (;;) {
		if (scratch_cap < c->partlen + 65536) {
			scratch_cap = c->partlen + 65536;
			scratch = xrealloc(scratch, scratch_cap);
		}
		size_t have = c->partlen;
		if (have) {
			memcpy(scratch, c->part, have);
			free(c->part);
			c->part = NULL;
			c->partlen = 0;
		}
		ssize_t n;
		if (c->ssl) {
			ERR_clear_error();
			int r = SSL_read(c->ssl, scratch + have, (int)(scratch_cap - have));
			if (r <= 0) {
				int e = SSL_get_error(c->ssl, r);
				n = e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? -2 : e == SSL_ERROR_ZERO_RETURN ? 0 : -1;
			} else
				n = r;
		} else {
			n = recv(c->fd, scratch + have, scratch_cap - have, 0);
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				n = -2;
		}
		if (n == -2 || n == 0 || n == -1) {
			if (have) {	/* keep the partial message */
				c->part = xmalloc(have);
				memcpy(c->part, scratch, have);
				c->partlen = have;
			}
			if (n == 0)
				conn_fail(c, "closed");
			else if (n == -1)
				conn_fail(c, c->ssl ? "tls" : errno_cause(errno));
			return;
		}
		size_t len = have + (size_t)n, pos = 0;
		while (c->state != C_FREE) {
			char type;
			const uint8_t *body;
			size_t blen;
			long m = sp_next_message(scratch + pos, len - pos, &type, &body, &blen);
			if (m < 0) {
				conn_fail(c, "protocol");
				return;
			}
			if (m == 0)
				break;
			on_message(c, type, body, blen);
			pos += (size_t)m;
		}
		if (c->state == C_FREE)
			return;
		if (pos < len) {
			c->partlen = len - pos;
			c->part = xmalloc(c->partlen);
			memcpy(c->part, scratch + pos, c->partlen);
		}
	}
}

static void on_event(struct conn *c, uint32_t ev)
{
	switch (c->state) {
	case C_CONNECTING:
		on_connected(c);
		break;
	case C_SSL_ANSWER:
		on_ssl_answer(c);
		break;
	case C_TLS_HANDSHAKE:
		tls_step(c);
		break;
	case C_FREE:
		break;
	default:
		if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))
			on_readable(c);
		break;
	}
}

static void send_report(struct scale_report *r, int kind)
{
	r->kind = kind;
	write_all(repfd, r, sizeof(*r));
	memset(r, 0, sizeof(*r));
}

/* The transactions since the last snapshot, with the oldest wait still open. */
static void snapshot(void)
{
	uint64_t now = now_us();
	for (long i = 0; i < share.active; i++) {
		struct conn *c = &conns[i];
		if (c->state == C_BUSY && now - c->t0 > txns.longest_wait_us)
			txns.longest_wait_us = now - c->t0;
		if (c->state == C_BUSY || c->state == C_IDLE)
			txns.active_now++;
	}
	if (sched.pcount && now > sched.pending[sched.phead] && now - sched.pending[sched.phead] > txns.longest_wait_us)
		txns.longest_wait_us = now - sched.pending[sched.phead];
	send_report(&txns, REPORT_TXNS);
}

static void quit(void)
{
	uint8_t x[5];
	sp_build_terminate(x);
	for (long i = 0; i < nconns; i++) {
		struct conn *c = &conns[i];
		if (c->state == C_IDLE || c->state == C_BUSY)
			(void)conn_send(c, x, sizeof(x));
		if (c->state != C_FREE)
			conn_release(c);
	}
	_exit(0);
}

static void on_command(void)
{
	struct scale_cmd cmd;
	ssize_t n = read(cmdfd, &cmd, sizeof(cmd));
	if (n < 0 && errno == EINTR)
		return;
	if (n != (ssize_t)sizeof(cmd))
		quit();		/* the parent is gone */
	switch (cmd.op) {
	case CMD_LOGIN:
		batch.open = true;
		batch.burst = false;
		batch.started_at = now_us();
		batch.started = 0;
		batch.next = next_held;
		batch.end = MIN(share.held, next_held + cmd.n);
		next_held = batch.end;
		break;
	case CMD_STORM:
		batch.open = true;
		batch.burst = true;
		batch.next = share.held + next_storm;
		batch.end = share.held + MIN(share.storm, next_storm + cmd.n);
		next_storm = batch.end - share.held;
		break;
	case CMD_RATE:
		if (share.rate > 0 && share.active > 0) {
			sched.running = true;
			sched.interval_us = (uint64_t)(1e6 / share.rate);
			if (sched.interval_us == 0)
				sched.interval_us = 1;
			sched.next_due = now_us();
		}
		break;
	case CMD_SNAPSHOT:
		snapshot();
		break;
	case CMD_RESTART:
		txns.dropped += sched.pcount;
		sched.pcount = 0;
		sched.next_due = now_us();
		break;
	case CMD_QUIT:
	default:
		quit();
	}
}

/* Starts what the batch allows; reports it once every login of it is done. */
static void batch_progress(void)
{
	if (!batch.open)
		return;
	long allowed = LONG_MAX;
	if (!batch.burst && share.login_rate > 0)
		allowed = (long)((double)(now_us() - batch.started_at) * share.login_rate / 1e6) + 1;
	while (batch.next < batch.end && (batch.burst || (batch.inflight < opt->login_window && batch.started < allowed))) {
		batch.started++;
		conn_start(&conns[batch.next++]);
	}
	if (batch.next == batch.end && batch.inflight == 0) {
		batch.open = false;
		send_report(&logins, REPORT_LOGINS);
	}
}

static void schedule_due(uint64_t now)
{
	if (!sched.running)
		return;
	for (; sched.next_due <= now; sched.next_due += sched.interval_us) {
		if (sched.pcount == PENDING_CAP) {
			txns.dropped++;
			continue;
		}
		sched.pending[(sched.phead + sched.pcount) % PENDING_CAP] = sched.next_due;
		sched.pcount++;
	}
	dispatch();
}

static void expire_logins(uint64_t now)
{
	uint64_t limit = (uint64_t)(opt->login_timeout * 1e6);
	while (batch.head && now - batch.head->t0 > limit)
		login_fail(batch.head, "timeout");
}

/* How long epoll may sleep: until the next transaction is due, a login times out, or 1 s. */
static struct timespec sleep_for(uint64_t now)
{
	uint64_t until = now + 1000000;
	if (sched.running && sched.next_due < until)
		until = sched.next_due;
	if (batch.head) {
		uint64_t t = batch.head->t0 + (uint64_t)(opt->login_timeout * 1e6) + 1;
		if (t < until)
			until = t;
	}
	if (batch.open && !batch.burst && share.login_rate > 0 && batch.next < batch.end) {
		uint64_t t = batch.started_at + (uint64_t)((double)batch.started * 1e6 / share.login_rate);
		if (t < until)
			until = t;	/* the next login the rate allows */
	}
	uint64_t d = until > now ? until - now : 0;
	return (struct timespec){ .tv_sec = (time_t)(d / 1000000), .tv_nsec = (long)(d % 1000000) * 1000 };
}

/*
 * The order a batch of ready connections is served in: by connection
 * number, the held clients (active ones first) before the storm's. A real
 * storm's clients each have a CPU of their own and answer the pooler at
 * once; here one process plays thousands of them, and in epoll's order
 * (each socket reported again behind the others) it would do every
 * client's next TLS step in turn, so that all of them finished late
 * together whatever the pooler did. In a fixed order the generator's
 * own delay falls on the last clients, as a queue of independent clients
 * would see it, and what the figures show is the pooler's order.
 */
static int by_connection(const void *a, const void *b)
{
	uint64_t x = ((const struct epoll_event *)a)->data.u64, y = ((const struct epoll_event *)b)->data.u64;
	return x < y ? -1 : x > y;
}

void scale_child_run(const struct scale_opts *o, const struct scale_share *sh, int index, int cmd_fd, int rep_fd)
{
	opt = o;
	share = *sh;
	cmdfd = cmd_fd;
	repfd = rep_fd;
	src_next = (unsigned)index * 61u;
	nconns = share.held + share.storm;
	conns = xcalloc((size_t)(nconns ? nconns : 1), sizeof(*conns));
	for (long i = 0; i < nconns; i++) {
		conns[i].fd = -1;
		conns[i].active = i < share.active;
		conns[i].tls = i < share.held ? opt->tls : (opt->tls || opt->storm_tls);
	}
	sched.icap = share.active + 1;
	sched.idle = xcalloc((size_t)sched.icap, sizeof(*sched.idle));
	query_len = sp_build_query(query_msg, sizeof(query_msg), opt->query);
	if (opt->tls || (opt->storm_tls && share.storm)) {
		ssl_ctx = SSL_CTX_new(TLS_client_method());
		if (!ssl_ctx)
			_exit(4);
		SSL_CTX_set_verify(ssl_ctx, SSL_VERIFY_NONE, NULL);
		SSL_CTX_set_mode(ssl_ctx, SSL_MODE_RELEASE_BUFFERS);
		SSL_CTX_set_session_cache_mode(ssl_ctx, SSL_SESS_CACHE_OFF);
	}
	epfd = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event e = { .events = EPOLLIN, .data.u64 = EV_CMD };
	if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, cmdfd, &e) < 0)
		_exit(4);
	static struct epoll_event evs[1024];
	for (;;) {
		uint64_t now = now_us();
		expire_logins(now);
		batch_progress();
		schedule_due(now);
		struct timespec ts = sleep_for(now_us());
		int n = epoll_pwait2(epfd, evs, (int)ARRAY_SIZE(evs), &ts, NULL);
		if (n < 0 && errno != EINTR)
			_exit(4);
		if (n > 1)	/* lower connection numbers first: see by_connection */
			qsort(evs, (size_t)n, sizeof(evs[0]), by_connection);
		for (int i = 0; i < n; i++) {
			if (evs[i].data.u64 == EV_CMD)
				on_command();
			else
				on_event(&conns[evs[i].data.u64], evs[i].events);
		}
	}
}
