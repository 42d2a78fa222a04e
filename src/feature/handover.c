/*
 * handover.c - logged-in servers passed between workers over their
 * inboxes (see handover.h for the scheme and why the counts stay exact).
 *
 * Owns: the inbox sockets and their locks. Reads a server's state to send
 * it; on the receiving side finds the pool and leaves the rest to the
 * core (server_take_over). Never changes the shared table itself: the
 * caller of handover_send moved the count, and a server it cannot use is
 * returned through pgv.budget.
 */
#include "common.h"
#include "handover.h"
#include "instance.h"
#include "log.h"
#include "netbuf.h"
#include "pool.h"
#include "prepare.h"
#include "server.h"
#include "varcache.h"
#include "workers.h"

#include <event2/event.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

/* A message's largest size: names, host entry and parameters of one server. */
#define MSG_MAX 16384
#define MSG_MAGIC 0x70677648u	/* "pgvH" */
#define ASK_MAGIC 0x70677641u	/* "pgvA": a wake-up, no server */
#define WELCOME_MAGIC 0x70677657u	/* "pgvW": a pool's welcome, no server (handover_send_welcome) */
/* Messages read per wake-up: hand-overs are rare, and the loop has other work. */
#define READS_PER_WAKE 16

/* The fixed part of a message; then db\0 user\0 host\0, params (name\0value\0), vars (reported, name\0value\0). */
struct wire {
	uint32_t magic;
	uint32_t from;			/* the sending worker, 1-based */
	uint32_t from_pid;		/* and its pid */
	uint64_t seq;			/* its flight in the receiver's inbox (struct flight) */
	uint32_t be_pid;
	uint32_t be_key;
	int64_t connect_time;
	int64_t role_checked;
	int64_t asked;			/* monotonic: when the receiver asked for a server (0: unknown) */
	int64_t sent;			/* monotonic: when the sender sent it */
	uint64_t token;
	uint32_t addrlen;
	int32_t host_idx;
	uint32_t param_count;
	uint32_t var_count;
	uint8_t role;
	uint8_t read_only;
	union pgv_sockaddr addr;
};

/*
 * A hand-over in flight to one worker, from the send until the receiver
 * took it: the sender sends, then moves the server's count to the
 * receiver's column slot by slot (moved: bit i for its token's slot i),
 * all under the receiver's inbox lock. A receiver that finds a flight
 * still FLIGHT_SENT under that lock knows its sender died between the
 * two: it counts the slots not moved itself (the dead sender's column is
 * zeroed as it is reaped), so the count follows the socket. A flight the
 * sender died before sending stays FLIGHT_SENT without a message; the
 * receiver frees it when it reads a later one (sends are in sequence
 * order: the lock orders them).
 */
#define FLIGHTS 64
enum flight_state { FLIGHT_FREE = 0, FLIGHT_SENT, FLIGHT_MOVED };

struct flight {
	uint64_t seq;
	uint32_t moved;
	uint32_t state;
};

struct inbox_lock {
	pthread_mutex_t lock;
	uint64_t seq;			/* the last flight's */
	struct flight flights[FLIGHTS];	/* by seq % FLIGHTS */
} __attribute__((aligned(64)));

static struct {
	int count;
	int (*fds)[2];			/* per worker: [0] its end, [1] everyone else's */
	struct inbox_lock *locks;	/* shared mapping, one per worker */
	size_t locks_bytes;
	struct event *ev;		/* this worker's inbox */
	void (*on_ask)(void);		/* a wake-up came (handover_on_wake) */
	void (*on_adopt)(uint64_t token, uint32_t moved, int from, pid_t from_pid);	/* handover_on_adopt */
	struct flight *sending;		/* this worker's flight between handover_send and handover_moved */
	int test_die;			/* TEST_DIE_ENV: 1 before the send, 2 after it */
} ho;

/*
 * For tests only (test_workers): worker 1, in its first run, dies by
 * SIGKILL in its first hand-over, "before-send" or "after-send" (before
 * its count is moved). Not documented for operators; read at start.
 */
#define TEST_DIE_ENV "PGVALVE_TEST_HANDOVER_DIE"

/* ---------------------------------------------------------------- set-up */

void handover_create(int count)
{
	ho.count = count;
	ho.fds = xcalloc((size_t)count, sizeof(*ho.fds));
	ho.locks_bytes = sizeof(struct inbox_lock) * (size_t)count;
	void *mem = mmap(NULL, ho.locks_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		die("could not map the hand-over locks: %s", strerror(errno));
	ho.locks = mem;
	pthread_mutexattr_t attr;
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
	for (int k = 0; k < count; k++) {
		if (pthread_mutex_init(&ho.locks[k].lock, &attr) != 0)
			die("could not make a hand-over lock");
		if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ho.fds[k]) < 0)
			die("could not make worker %d's hand-over socket: %s", k + 1, strerror(errno));
	}
	pthread_mutexattr_destroy(&attr);
}

void handover_destroy(void)
{
	for (int k = 0; k < ho.count; k++) {
		close(ho.fds[k][0]);
		close(ho.fds[k][1]);
	}
	free(ho.fds);
	ho.fds = NULL;
	if (ho.locks)
		munmap(ho.locks, ho.locks_bytes);
	ho.locks = NULL;
	ho.count = 0;
}

static void inbox_lock(int worker)
{
	int rc = pthread_mutex_lock(&ho.locks[worker - 1].lock);
	if (rc == EOWNERDEAD)	/* its holder died: the inbox holds whole messages or none */
		pthread_mutex_consistent(&ho.locks[worker - 1].lock);
	else if (rc != 0)
		die("hand-over lock: %s", strerror(rc));
}

static void inbox_unlock(int worker)
{
	pthread_mutex_unlock(&ho.locks[worker - 1].lock);
}

/* One message from fd: its length (-1: none left), *passed the socket that came with it (-1: none). */
static ssize_t inbox_read(int fd, char *buf, size_t size, int *passed)
{
	char control[CMSG_SPACE(sizeof(int) * 4)];
	struct iovec iov = { buf, size };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
			     .msg_controllen = sizeof(control) };
	*passed = -1;
	ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t many = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < many; i++) {
			int got;
			memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*passed < 0)
				*passed = got;
			else
				close(got);	/* never sent: one socket a message */
		}
	}
	return n;
}

void handover_worker_gone(int worker)
{
	if (!ho.locks || worker < 1 || worker > ho.count)
		return;
	char buf[MSG_MAX];
	int closed = 0, passed;
	inbox_lock(worker);
	while (inbox_read(ho.fds[worker - 1][0], buf, sizeof(buf), &passed) >= 0) {
		if (passed >= 0) {
			close(passed);	/* its backend ends before the worker's column is zeroed */
			closed++;
		}
	}
	/* Whatever was moved to its column goes with it; a restarted worker starts with no flight. */
	memset(ho.locks[worker - 1].flights, 0, sizeof(ho.locks[worker - 1].flights));
	inbox_unlock(worker);
	if (closed)
		log_info("closed %d server connections handed over to worker %d as it died", closed, worker);
}

/* ---------------------------------------------------------------- sending */

bool handover_eligible(const struct server *server)
{
	if (!ho.locks || server->nb.fd < 0 || netbuf_ssl(&server->nb))
		return false;
	if (server->link || server->owner || server->claim || server->release_sql || server->replication ||
	    server->auth_client)
		return false;
	/* Nothing a client left on it: no prepared statement (the receiver would not know it), no session SET. */
	if (prepare_server_count(server) || (server->sets && (server->sets->count || server->sets->unknown_all)))
		return false;
	if (!server->logged_in || server->close_needed || server->dirty || server->cancels_in_flight ||
	    server->cancel_expired || server->internal != SV_INTERNAL_NONE)
		return false;
	return server_is_clean(server) && netbuf_buffered(&server->nb) == 0 && netbuf_queue_len(&server->nb) == 0;
}

bool handover_begin(int worker)
{
	if (!ho.locks || worker < 1 || worker > ho.count)
		return false;
	inbox_lock(worker);
	struct worker_status st;
	workers_read(worker, &st);
	if (st.pid > 0 && st.state == WORKER_STATE_RUNNING)
		return true;
	inbox_unlock(worker);
	return false;
}

void handover_end(int worker)
{
	inbox_unlock(worker);
}

void handover_log_sent(const struct server *server, int worker)
{
	server_log(LOG_LEVEL_INFO, server, "handed over to worker %d (backend pid %u)", worker, server->be_pid);
}

struct msg {
	char buf[MSG_MAX];
	size_t len;
	bool full;
};

static void put(struct msg *m, const void *data, size_t len)
{
	if (m->full || m->len + len > sizeof(m->buf)) {
		m->full = true;
		return;
	}
	memcpy(m->buf + m->len, data, len);
	m->len += len;
}

static void put_str(struct msg *m, const char *s)
{
	put(m, s ? s : "", strlen(s ? s : "") + 1);
}

static void build(struct msg *m, const struct server *server, int64_t asked, uint64_t seq)
{
	struct wire w = {
		.magic = MSG_MAGIC,
		.from = (uint32_t)workers_self(),
		.from_pid = (uint32_t)getpid(),
		.seq = seq,
		.be_pid = server->be_pid,
		.be_key = server->be_key,
		.connect_time = server->connect_time,
		.role_checked = server->role_checked,
		.asked = asked,
		.sent = monotonic_usec(),
		.token = server->budget_token,
		.addrlen = (uint32_t)server->addrlen,
		.host_idx = server->host_idx,
		.param_count = (uint32_t)server->param_count,
		.role = server->role,
		.read_only = server->read_only,
		.addr = server->addr,
	};
	int vars = varcache_count();
	for (int i = 0; i < vars; i++)
		w.var_count += varcache_get(server->vars, i) != NULL;
	m->len = 0;
	m->full = false;
	put(m, &w, sizeof(w));
	put_str(m, server->pool->db->name);
	put_str(m, server->pool->user);
	put_str(m, server->host);
	for (int i = 0; i < server->param_count; i++) {
		put_str(m, server->params[i].name);
		put_str(m, server->params[i].value);
	}
	for (int i = 0; i < vars; i++) {
		const char *v = varcache_get(server->vars, i);
		if (!v)
			continue;
		uint8_t reported = (server->reported_mask >> i) & 1;
		put(m, &reported, 1);
		put_str(m, varcache_name(i));
		put_str(m, v);
	}
}

/* The test hook (TEST_DIE_ENV): this worker dies here if told to, in its first run. */
static void test_die(int when)
{
	if (ho.test_die != when || workers_self() != 1)
		return;
	struct worker_status st;
	workers_read(workers_self(), &st);
	if (st.restarts == 0)
		raise(SIGKILL);
}

bool handover_send(const struct server *server, int worker, int64_t asked, uint32_t **moved)
{
	static struct msg m;
	struct inbox_lock *in = &ho.locks[worker - 1];
	uint64_t seq = in->seq + 1;
	struct flight *f = &in->flights[seq % FLIGHTS];
	if (f->state != FLIGHT_FREE)
		return false;	/* FLIGHTS hand-overs the receiver has not read yet: the old way */
	build(&m, server, asked, seq);
	if (m.full)
		return false;
	in->seq = seq;
	*f = (struct flight){ .seq = seq, .moved = 0, .state = FLIGHT_SENT };
	char control[CMSG_SPACE(sizeof(int))];
	memset(control, 0, sizeof(control));
	struct iovec iov = { m.buf, m.len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
			     .msg_controllen = sizeof(control) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &server->nb.fd, sizeof(int));
	test_die(1);
	if (sendmsg(ho.fds[worker - 1][1], &mh, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)m.len) {
		f->state = FLIGHT_FREE;
		server_log(LOG_LEVEL_WARNING, server, "could not hand over to worker %d: %s", worker, strerror(errno));
		return false;
	}
	test_die(2);
	ho.sending = f;
	*moved = &f->moved;
	return true;
}

void handover_moved(int worker)
{
	(void)worker;
	if (ho.sending)
		__atomic_store_n(&ho.sending->state, FLIGHT_MOVED, __ATOMIC_RELEASE);
	ho.sending = NULL;
}

void handover_on_adopt(void (*fn)(uint64_t token, uint32_t moved, int from, pid_t from_pid))
{
	ho.on_adopt = fn;
}

/* ---------------------------------------------------------------- wake-ups */

/*
 * A wake-up is a message of its own magic and no socket: the worker's
 * loop wakes on its inbox's readiness, as for a server, rather than on a
 * signal (whose delivery libevent turns into a write to a pipe of its own
 * and a read of it before the handler runs).
 */
bool handover_wake(int worker)
{
	if (!ho.locks || worker < 1 || worker > ho.count || worker == workers_self())
		return false;
	uint32_t magic = ASK_MAGIC;
	return send(ho.fds[worker - 1][1], &magic, sizeof(magic), MSG_DONTWAIT | MSG_NOSIGNAL) == sizeof(magic);
}

void handover_on_wake(void (*fn)(void))
{
	ho.on_ask = fn;
}

/* ---------------------------------------------------------------- a pool's welcome */

bool handover_send_welcome(int worker, const struct pool *pool)
{
	static struct msg m;
	struct worker_status st;
	if (!ho.locks || worker < 1 || worker > ho.count || worker == workers_self() || !pool->welcome_ready)
		return false;
	workers_read(worker, &st);
	if (st.pid <= 0 || st.state != WORKER_STATE_RUNNING)
		return false;
	struct wire w = {
		.magic = WELCOME_MAGIC,
		.from = (uint32_t)workers_self(),
		.from_pid = (uint32_t)getpid(),
		.sent = monotonic_usec(),
		.param_count = (uint32_t)pool->welcome_count,
	};
	m.len = 0;
	m.full = false;
	put(&m, &w, sizeof(w));
	put_str(&m, pool->db->name);
	put_str(&m, pool->user);
	for (int i = 0; i < pool->welcome_count; i++) {
		put_str(&m, pool->welcome[i].name);
		put_str(&m, pool->welcome[i].value);
	}
	if (m.full)
		return false;
	return send(ho.fds[worker - 1][1], m.buf, m.len, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)m.len;
}

/* ---------------------------------------------------------------- receiving */

struct reader {
	const char *p;
	const char *end;
	bool bad;
};

static const char *get_str(struct reader *r)
{
	const char *nul = r->bad ? NULL : memchr(r->p, '\0', (size_t)(r->end - r->p));
	if (!nul) {
		r->bad = true;
		return "";
	}
	const char *s = r->p;
	r->p = nul + 1;
	return s;
}

static uint8_t get_byte(struct reader *r)
{
	if (r->bad || r->p >= r->end) {
		r->bad = true;
		return 0;
	}
	return (uint8_t)*r->p++;
}

/* The pool of db_name and user; with home, not a read balancer's standby pool (its welcome differs). */
static struct pool *find_pool(const char *db_name, const char *user, bool home)
{
	struct db *db = pool_find_db(db_name);
	if (!db || db->removed)
		return NULL;
	list_for_each(pos, &db->pools) {
		struct pool *pool = container_of(pos, struct pool, node);
		if (strcmp(pool->user, user) == 0 && !(home && pool->standby_reads))
			return pool;
	}
	return NULL;
}

/*
 * The count of a server received: under this worker's inbox lock its
 * sender has either moved it here (FLIGHT_MOVED) or died before it had
 * (FLIGHT_SENT): then this worker moves what was not (on_adopt).
 * Flights before this one still FLIGHT_SENT were never sent (their
 * senders died first): freed.
 */
static void adopt(const struct wire *w)
{
	int self = workers_self();
	struct inbox_lock *in = &ho.locks[self - 1];
	/*
	 * Most often its sender is done by the time this worker has woken and
	 * read the message: then nothing needs the lock (only the sender,
	 * under it, makes a flight of a free one), unless an earlier flight
	 * still waits to be found unsent.
	 */
	struct flight *mine = &in->flights[w->seq % FLIGHTS];
	bool older_sent = false;
	for (int i = 0; i < FLIGHTS; i++)
		older_sent |= __atomic_load_n(&in->flights[i].state, __ATOMIC_ACQUIRE) == FLIGHT_SENT &&
			      in->flights[i].seq < w->seq;
	if (!older_sent && __atomic_load_n(&mine->state, __ATOMIC_ACQUIRE) == FLIGHT_MOVED && mine->seq == w->seq) {
		__atomic_store_n(&mine->state, FLIGHT_FREE, __ATOMIC_RELEASE);
		return;
	}
	inbox_lock(self);
	for (int i = 0; i < FLIGHTS; i++)
		if (in->flights[i].state == FLIGHT_SENT && in->flights[i].seq < w->seq)
			in->flights[i].state = FLIGHT_FREE;
	struct flight *f = &in->flights[w->seq % FLIGHTS];
	if (f->seq == w->seq && f->state != FLIGHT_FREE) {
		if (f->state == FLIGHT_SENT) {
			log_warning("worker %u died handing over backend pid %u: its count is taken here", w->from,
				    w->be_pid);
			if (w->token && ho.on_adopt)
				ho.on_adopt(w->token, f->moved, (int)w->from, (pid_t)w->from_pid);
		}
		f->state = FLIGHT_FREE;
	}
	inbox_unlock(self);
}

/* The parameters of a message (both lists are bounded by the message's size). */
#define LIST_MAX (MSG_MAX / 4)

static void take(const struct wire *w, struct reader *r, int fd)
{
	static struct welcome_param params[LIST_MAX];
	static const char *names[LIST_MAX], *values[LIST_MAX];
	static bool reported[LIST_MAX];
	const char *db_name = get_str(r), *user = get_str(r), *host = get_str(r);
	uint32_t np = MIN(w->param_count, (uint32_t)LIST_MAX), nv = MIN(w->var_count, (uint32_t)LIST_MAX);
	for (uint32_t i = 0; i < np; i++) {
		params[i].name = (char *)get_str(r);
		params[i].value = (char *)get_str(r);
	}
	for (uint32_t i = 0; i < nv; i++) {
		reported[i] = get_byte(r) != 0;
		names[i] = get_str(r);
		values[i] = get_str(r);
	}
	adopt(w);
	struct pool *pool = r->bad ? NULL : find_pool(db_name, user, false);
	if (!pool || fd < 0 || w->addrlen > sizeof(w->addr)) {
		log_warning("a server of %s/%s handed over by worker %u has no pool here: closed", db_name, user, w->from);
		if (fd >= 0)
			close(fd);
		if (w->token && pgv.budget)
			pgv.budget->server_return(w->token);
		return;
	}
	struct server_transfer t = {
		.fd = fd, .be_pid = w->be_pid, .be_key = w->be_key, .connect_time = w->connect_time,
		.role = w->role, .read_only = w->read_only != 0, .role_checked = w->role_checked,
		.host = host, .host_idx = w->host_idx, .addr = &w->addr, .addrlen = w->addrlen,
		.budget_token = pgv.budget ? w->token : 0, .params = params, .param_count = (int)np,
		.var_names = names, .var_values = values, .var_reported = reported, .var_count = (int)nv,
	};
	server_take_over(pool, &t);
	pool_after_change(pool);	/* clients still waiting ask again at once */
	/* Measured from the ask (the receiver's) and the send (the sender's) to a waiting client served. */
	int64_t now = monotonic_usec();
	log_info("%s/%s: backend pid %u taken over from worker %u, no new login (%lld us after the ask, %lld after the send)",
		 db_name, user, w->be_pid, w->from, w->asked ? (long long)(now - w->asked) : -1LL,
		 (long long)(now - w->sent));
}

/* Another worker's welcome for a pool whose logins here wait for one (handover_send_welcome). */
static void take_welcome(const struct wire *w, struct reader *r)
{
	static struct welcome_param params[LIST_MAX];
	const char *db_name = get_str(r), *user = get_str(r);
	uint32_t np = MIN(w->param_count, (uint32_t)LIST_MAX);
	for (uint32_t i = 0; i < np; i++) {
		params[i].name = (char *)get_str(r);
		params[i].value = (char *)get_str(r);
	}
	struct pool *pool = r->bad ? NULL : find_pool(db_name, user, true);
	if (!pool || pool->welcome_ready)
		return;		/* gone, or it learned them from a server of its own meanwhile */
	log_info("%s/%s: server parameters learned from worker %u, no server needed for the logins waiting", db_name,
		 user, w->from);
	pool_learn_welcome(pool, params, (int)np);
}

static void inbox_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)what; (void)arg;
	static char buf[MSG_MAX];
	bool woken = false;
	for (int i = 0; i < READS_PER_WAKE; i++) {
		int passed;
		ssize_t n = inbox_read(fd, buf, sizeof(buf), &passed);
		if (n < 0)
			break;
		if (n == sizeof(uint32_t) && passed < 0 && memcmp(buf, &(uint32_t){ ASK_MAGIC }, sizeof(uint32_t)) == 0) {
			woken = true;	/* several wake-ups read together act once */
			continue;
		}
		struct wire w;
		if ((size_t)n >= sizeof(w) && passed < 0 && memcmp(buf, &(uint32_t){ WELCOME_MAGIC }, sizeof(uint32_t)) == 0) {
			memcpy(&w, buf, sizeof(w));
			struct reader r = { buf + sizeof(w), buf + n, false };
			take_welcome(&w, &r);
			continue;
		}
		if ((size_t)n < sizeof(w) || memcmp(buf, &(uint32_t){ MSG_MAGIC }, sizeof(uint32_t)) != 0) {
			log_warning("a malformed hand-over message (%zd bytes) was dropped", n);
			if (passed >= 0)
				close(passed);
			continue;
		}
		memcpy(&w, buf, sizeof(w));
		struct reader r = { buf + sizeof(w), buf + n, false };
		take(&w, &r, passed);
	}
	if (woken && ho.on_ask)
		ho.on_ask();
}

void handover_register(void)
{
	if (!ho.locks || !workers_supervised())
		return;
	int self = workers_self();
	const char *die = getenv(TEST_DIE_ENV);
	ho.test_die = !die ? 0 : strcmp(die, "before-send") == 0 ? 1 : strcmp(die, "after-send") == 0 ? 2 : 0;
	if (ho.test_die)
		log_warning("%s is set: worker 1 dies in its first hand-over (for tests only)", TEST_DIE_ENV);
	ho.ev = event_new(pgv.base, ho.fds[self - 1][0], EV_READ | EV_PERSIST, inbox_cb, NULL);
	event_add(ho.ev, NULL);
}

void handover_stop(void)
{
	if (ho.ev)
		event_free(ho.ev);
	ho.ev = NULL;
}
