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
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

/* A message's largest size: names, host entry and parameters of one server. */
#define MSG_MAX 16384
#define MSG_MAGIC 0x70677648u	/* "pgvH" */
/* Messages read per wake-up: hand-overs are rare, and the loop has other work. */
#define READS_PER_WAKE 16

/* The fixed part of a message; then db\0 user\0 host\0, params (name\0value\0), vars (reported, name\0value\0). */
struct wire {
	uint32_t magic;
	uint32_t from;			/* the sending worker, 1-based */
	uint32_t be_pid;
	uint32_t be_key;
	int64_t connect_time;
	int64_t role_checked;
	uint64_t token;
	uint32_t addrlen;
	int32_t host_idx;
	uint32_t param_count;
	uint32_t var_count;
	uint8_t role;
	uint8_t read_only;
	union pgv_sockaddr addr;
};

struct inbox_lock {
	pthread_mutex_t lock;
} __attribute__((aligned(64)));

static struct {
	int count;
	int (*fds)[2];			/* per worker: [0] its end, [1] everyone else's */
	struct inbox_lock *locks;	/* shared mapping, one per worker */
	size_t locks_bytes;
	struct event *ev;		/* this worker's inbox */
} ho;

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

static void build(struct msg *m, const struct server *server)
{
	struct wire w = {
		.magic = MSG_MAGIC,
		.from = (uint32_t)workers_self(),
		.be_pid = server->be_pid,
		.be_key = server->be_key,
		.connect_time = server->connect_time,
		.role_checked = server->role_checked,
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

bool handover_send(const struct server *server, int worker)
{
	static struct msg m;
	build(&m, server);
	if (m.full)
		return false;
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
	if (sendmsg(ho.fds[worker - 1][1], &mh, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)m.len) {
		server_log(LOG_LEVEL_WARNING, server, "could not hand over to worker %d: %s", worker, strerror(errno));
		return false;
	}
	server_log(LOG_LEVEL_INFO, server, "handed over to worker %d (backend pid %u)", worker, server->be_pid);
	return true;
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

static struct pool *find_pool(const char *db_name, const char *user)
{
	struct db *db = pool_find_db(db_name);
	if (!db || db->removed)
		return NULL;
	list_for_each(pos, &db->pools) {
		struct pool *pool = container_of(pos, struct pool, node);
		if (strcmp(pool->user, user) == 0)
			return pool;
	}
	return NULL;
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
	struct pool *pool = r->bad ? NULL : find_pool(db_name, user);
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
	log_info("%s/%s: backend pid %u taken over from worker %u, no new login", db_name, user, w->be_pid, w->from);
	server_take_over(pool, &t);
	pool_after_change(pool);	/* clients still waiting ask again at once */
}

static void inbox_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)what; (void)arg;
	static char buf[MSG_MAX];
	for (int i = 0; i < READS_PER_WAKE; i++) {
		int passed;
		ssize_t n = inbox_read(fd, buf, sizeof(buf), &passed);
		if (n < 0)
			return;
		struct wire w;
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
}

void handover_register(void)
{
	if (!ho.locks || !workers_supervised())
		return;
	int self = workers_self();
	ho.ev = event_new(pgv.base, ho.fds[self - 1][0], EV_READ | EV_PERSIST, inbox_cb, NULL);
	event_add(ho.ev, NULL);
}

void handover_stop(void)
{
	if (ho.ev)
		event_free(ho.ev);
	ho.ev = NULL;
}
