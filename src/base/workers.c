/*
 * workers.c - this process's place in the worker set and the shared slot
 * table (see workers.h for the scheme and who writes what).
 *
 * Owns: the table mapping and this process's identity. Reads pools and
 * statistics only to publish counters; changes nothing outside its own
 * state but the cfg handed to workers_apply_config.
 */
#include "common.h"
#include "workers.h"
#include "log.h"
#include "pool.h"
#include "pool_check.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

/* A reader retries a slot being written this many times, then takes what it sees. */
#define SEQ_READ_TRIES 100
#define DEFAULT_PRIVATE_SOCKET_BASE "/tmp"

/*
 * One slot. Every field is one aligned word read and written with relaxed
 * atomics; `seq` orders the worker's counter updates (odd = being written).
 */
struct worker_slot {
	/* supervisor */
	int32_t pid;
	int32_t state;
	uint32_t restarts;
	int64_t started;
	/* worker */
	uint32_t seq;
	int32_t peer_id;
	int32_t listening;
	uint32_t paused_gen;	/* the instance pause generation this worker has completed, 0 = none */
	uint32_t unreachable;	/* 1: this worker found no database reachable (readiness.h) */
	int64_t updated;
	uint64_t counters[sizeof(struct worker_counters) / sizeof(uint64_t)];
} __attribute__((aligned(64)));

/*
 * Instance-wide words, before the slots; written by any worker and by the
 * supervisor. pause_state = generation << 1 | paused: the pause state the
 * instance should be in, one word so that a reader never pairs one
 * change's generation with another's state.
 */
struct worker_table_head {
	uint32_t pause_state;
	uint32_t drain;		/* 1 once a DRAIN was asked for: the instance is ending (never cleared) */
} __attribute__((aligned(64)));

/* A blob area (see workers.h): its own sequence counter, its length, then the bytes. */
struct worker_blob {
	uint32_t seq;
	uint32_t len;
	char data[WORKERS_BLOB_BYTES];
} __attribute__((aligned(64)));

static struct {
	struct worker_blob *blobs;	/* count * WORKERS_BLOBS areas; NULL for a single process */
	size_t blobs_bytes;
	struct worker_table_head *head;
	struct worker_slot *table;
	size_t table_bytes;
	int count;		/* slots in the table */
	int self;		/* 1-based; 1 for a single process */
	pid_t supervisor;	/* names the private sockets; 0 for a single process */
	int cli_workers;	/* -w: -1 not given, 0 auto, N */
} wk = { .self = 1, .count = 1, .cli_workers = -1 };

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

const char *worker_state_name(enum worker_state state)
{
	switch (state) {
	case WORKER_STATE_STARTING: return "starting";
	case WORKER_STATE_RUNNING: return "running";
	case WORKER_STATE_BACKOFF: return "restarting";
	case WORKER_STATE_STOPPING: return "stopping";
	case WORKER_STATE_EXITED: return "exited";
	}
	return "unknown";
}

void workers_set_command_line(int workers)
{
	wk.cli_workers = workers;
}

int workers_resolve(const struct config *cfg)
{
	int n = cfg->workers;
	if (n == 0) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		n = cpus > 0 ? (int)cpus : 1;
	}
	return MAX(1, MIN(n, CONFIG_MAX_WORKERS));
}

int workers_peer_id(const struct config *cfg, int worker)
{
	return (cfg->peer_id > 0 ? cfg->peer_id : 1) + worker - 1;
}

void workers_socket_dir(const struct config *cfg, int worker, char *buf, size_t size)
{
	if (!wk.supervisor) {
		buf[0] = '\0';
		return;
	}
	const char *base = cfg->unix_socket_dir[0] ? cfg->unix_socket_dir : DEFAULT_PRIVATE_SOCKET_BASE;
	/* Absolute: a [peers] host starting with '/' is a socket directory, anything else a host name. */
	char cwd[256] = "";
	if (base[0] != '/' && !getcwd(cwd, sizeof(cwd)))
		base = DEFAULT_PRIVATE_SOCKET_BASE;
	snprintf(buf, size, "%s%s%s/pgvalve-%d-%d-w%d", cwd, cwd[0] ? "/" : "", base, cfg->listen_port,
		 (int)wk.supervisor, worker);
}

void workers_force_options(struct config *cfg)
{
	if (wk.cli_workers >= 0)
		cfg->workers = wk.cli_workers;
	if (wk.supervisor)
		cfg->so_reuseport = true;
}

int workers_check_peer_ids(const struct config *cfg, int count, char *errbuf, size_t errsize)
{
	if (count <= 1 || workers_peer_id(cfg, count) <= WORKERS_PEER_ID_MAX)
		return 0;
	snprintf(errbuf, errsize, "peer_id %d leaves no room for %d workers (worker peer ids go up to %d)",
		 cfg->peer_id, count, WORKERS_PEER_ID_MAX);
	return -1;
}

int workers_apply_peers(struct config *cfg, char *errbuf, size_t errsize)
{
	if (!wk.supervisor)
		return 0;
	if (workers_check_peer_ids(cfg, wk.count, errbuf, errsize) < 0)
		return -1;
	char dir[256];
	for (int k = 1; k <= wk.count; k++) {
		int id = workers_peer_id(cfg, k);
		if (k == wk.self) {
			config_drop_peer(cfg, id);
			continue;
		}
		workers_socket_dir(cfg, k, dir, sizeof(dir));
		config_put_peer(cfg, id, dir, cfg->listen_port, "workers");
	}
	cfg->peer_id = workers_peer_id(cfg, wk.self);
	return 0;
}

int workers_apply_config(struct config *cfg, char *errbuf, size_t errsize)
{
	workers_force_options(cfg);
	return workers_apply_peers(cfg, errbuf, errsize);
}

void workers_table_create(int count, pid_t supervisor)
{
	wk.count = MAX(1, count);
	wk.supervisor = supervisor;
	wk.table_bytes = sizeof(struct worker_table_head) + sizeof(struct worker_slot) * (size_t)wk.count;
	void *mem = mmap(NULL, wk.table_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		die("could not map the shared worker table: %s", strerror(errno));
	wk.head = mem;
	wk.table = (struct worker_slot *)(wk.head + 1);
	if (wk.count > 1) {
		/* Pages are only used once written: a few hundred KB a worker in practice. */
		wk.blobs_bytes = sizeof(struct worker_blob) * WORKERS_BLOBS * (size_t)wk.count;
		mem = mmap(NULL, wk.blobs_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (mem == MAP_FAILED)
			die("could not map the shared metrics areas: %s", strerror(errno));
		wk.blobs = mem;
	}
}

void workers_table_destroy(void)
{
	if (wk.head)
		munmap(wk.head, wk.table_bytes);
	if (wk.blobs)
		munmap(wk.blobs, wk.blobs_bytes);
	wk.head = NULL;
	wk.table = NULL;
	wk.blobs = NULL;
}

int workers_id_owner(uint64_t id)
{
	uint64_t k = id >> WORKERS_ID_SHIFT;
	return workers_count() > 1 && k >= 1 && k <= (uint64_t)workers_count() ? (int)k : 0;
}

void workers_become(int worker)
{
	wk.self = worker;
	if (wk.supervisor) {
		char tag[16];
		snprintf(tag, sizeof(tag), "w%d", worker);
		log_set_process(tag);
	}
	if (!wk.supervisor && wk.table)
		workers_set_process(1, getpid(), WORKER_STATE_STARTING, 0, now_usec());
}

int workers_self(void)
{
	return wk.self;
}

int workers_count(void)
{
	return wk.count;
}

bool workers_owns_unix_socket(void)
{
	return wk.self == 1;
}

static struct worker_slot *slot(int worker)
{
	if (!wk.table || worker < 1 || worker > wk.count)
		return NULL;
	return &wk.table[worker - 1];
}

void workers_set_process(int worker, pid_t pid, enum worker_state state, unsigned restarts, usec_t started)
{
	struct worker_slot *s = slot(worker);
	if (!s)
		return;
	STORE(s->pid, (int32_t)pid);
	STORE(s->restarts, restarts);
	STORE(s->started, started);
	STORE(s->state, (int32_t)state);
}

void workers_set_state(int worker, enum worker_state state)
{
	struct worker_slot *s = slot(worker);
	if (s)
		STORE(s->state, (int32_t)state);
}

/* Sums over every pool and database of this process. */
static void count_self(struct worker_counters *c)
{
	memset(c, 0, sizeof(*c));
	c->cl_login = pgv.login_clients.count;
	list_for_each(dpos, &pgv.databases) {
		const struct db *db = container_of(dpos, struct db, node);
		c->xact_count += db->stats.total.xact_count;
		c->query_count += db->stats.total.query_count;
		c->bytes_received += db->stats.total.bytes_received;
		c->bytes_sent += db->stats.total.bytes_sent;
		list_for_each(ppos, &db->pools) {
			const struct pool *p = container_of(ppos, struct pool, node);
			c->cl_active += p->active_clients.count;
			c->cl_waiting += p->waiting_clients.count;
			c->cl_idle += p->idle_clients.count;
			c->cl_login += p->welcome_clients.count;
			c->sv_active += p->active_servers.count;
			int stale = pool_stale_idle_count(p);	/* sv_used, as in SHOW POOLS (pool_check.h) */
			c->sv_idle += p->idle_servers.count - stale;
			c->sv_used += p->used_servers.count + p->tested_servers.count + stale;
			c->sv_login += p->login_servers.count;
		}
	}
}

static void write_counters(struct worker_slot *s, const struct worker_counters *c, usec_t now)
{
	uint64_t words[ARRAY_SIZE(s->counters)];
	memcpy(words, c, sizeof(words));
	uint32_t seq = LOAD(s->seq);
	if (seq & 1)
		seq++;		/* left odd by a predecessor killed mid-update */
	STORE(s->seq, seq + 1);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	for (size_t i = 0; i < ARRAY_SIZE(words); i++)
		STORE(s->counters[i], words[i]);
	STORE(s->updated, now);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	STORE(s->seq, seq + 2);
}

void workers_announce_running(void)
{
	struct worker_slot *s = slot(wk.self);
	if (!s)
		return;
	struct worker_counters zero = { 0 };
	write_counters(s, &zero, now_usec());
	STORE(s->peer_id, (int32_t)(pgv.cfg ? pgv.cfg->peer_id : 0));
	STORE(s->paused_gen, 0);
	STORE(s->unreachable, 0);
	__atomic_store_n(&s->listening, 1, __ATOMIC_RELEASE);
	if (!wk.supervisor)
		workers_set_state(1, WORKER_STATE_RUNNING);
}

void workers_publish(void)
{
	struct worker_slot *s = slot(wk.self);
	if (!s)
		return;
	struct worker_counters c;
	count_self(&c);
	STORE(s->peer_id, (int32_t)pgv.cfg->peer_id);
	write_counters(s, &c, now_usec());
}

void workers_read(int worker, struct worker_status *out)
{
	memset(out, 0, sizeof(*out));
	out->worker = worker;
	struct worker_slot *s = slot(worker);
	if (!s)
		return;
	uint64_t words[ARRAY_SIZE(s->counters)];
	for (int tries = 0; tries < SEQ_READ_TRIES; tries++) {
		uint32_t before = LOAD(s->seq);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		for (size_t i = 0; i < ARRAY_SIZE(words); i++)
			words[i] = LOAD(s->counters[i]);
		out->updated = LOAD(s->updated);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (!(before & 1) && LOAD(s->seq) == before)
			break;
	}
	memcpy(&out->c, words, sizeof(out->c));
	out->pid = LOAD(s->pid);
	out->peer_id = LOAD(s->peer_id);
	out->restarts = LOAD(s->restarts);
	out->started = LOAD(s->started);
	out->state = (enum worker_state)LOAD(s->state);
	/* The supervisor knows a worker was started; the worker says when it listens. */
	if (out->state == WORKER_STATE_STARTING && __atomic_load_n(&s->listening, __ATOMIC_ACQUIRE))
		out->state = WORKER_STATE_RUNNING;
}

bool workers_slot_listening(int worker)
{
	struct worker_slot *s = slot(worker);
	return s && LOAD(s->listening);
}

void workers_clear_slot(int worker)
{
	struct worker_slot *s = slot(worker);
	if (s)
		STORE(s->listening, 0);
}

void workers_add_counters(struct worker_counters *sum, const struct worker_counters *c)
{
	sum->cl_active += c->cl_active;
	sum->cl_waiting += c->cl_waiting;
	sum->cl_idle += c->cl_idle;
	sum->cl_login += c->cl_login;
	sum->sv_active += c->sv_active;
	sum->sv_idle += c->sv_idle;
	sum->sv_used += c->sv_used;
	sum->sv_login += c->sv_login;
	sum->xact_count += c->xact_count;
	sum->query_count += c->query_count;
	sum->bytes_received += c->bytes_received;
	sum->bytes_sent += c->bytes_sent;
}

void workers_tell_supervisor(int sig)
{
	if (wk.supervisor && getppid() == wk.supervisor)
		kill(wk.supervisor, sig);
}

bool workers_supervised(void)
{
	return wk.supervisor != 0;
}

uint32_t workers_set_paused(bool paused)
{
	if (!wk.head)
		return 0;
	uint32_t old = __atomic_load_n(&wk.head->pause_state, __ATOMIC_ACQUIRE), new;
	do {
		uint32_t gen = ((old >> 1) + 1) & 0x7fffffffu;
		new = (gen ? gen : 1) << 1 | (paused ? 1 : 0);	/* generation 0 is the start state */
	} while (!__atomic_compare_exchange_n(&wk.head->pause_state, &old, new, false, __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE));
	return new >> 1;
}

bool workers_want_paused(uint32_t *gen)
{
	uint32_t state = wk.head ? __atomic_load_n(&wk.head->pause_state, __ATOMIC_ACQUIRE) : 0;
	if (gen)
		*gen = state >> 1;
	return state & 1;
}

void workers_publish_paused(uint32_t gen_done)
{
	struct worker_slot *s = slot(wk.self);
	if (s)
		STORE(s->paused_gen, gen_done);
}

/*
 * The slot of the next other worker after *k that serves (running, with a
 * process), NULL after the last; *k starts at 0. Workers that do not
 * serve have nothing to say about pauses or databases.
 */
static struct worker_slot *next_other_serving(int *k)
{
	while (++*k <= wk.count) {
		if (*k == wk.self)
			continue;
		struct worker_status w;
		workers_read(*k, &w);
		if (w.state == WORKER_STATE_RUNNING && w.pid > 0)
			return slot(*k);
	}
	return NULL;
}

bool workers_others_paused(uint32_t gen)
{
	/* Only workers that serve: one (re)starting comes up paused (the supervisor sees to it). */
	struct worker_slot *s;
	for (int k = 0; (s = next_other_serving(&k));) {
		uint32_t done = LOAD(s->paused_gen);
		if (done == 0 || done < gen)	/* 31-bit generations: no wrap in practice */
			return false;
	}
	return true;
}

bool workers_others_stopping(void)
{
	for (int k = 1; k <= wk.count; k++) {
		if (k == wk.self)
			continue;
		struct worker_status w;
		workers_read(k, &w);
		if (w.state != WORKER_STATE_STOPPING && w.state != WORKER_STATE_EXITED)
			return false;
	}
	return true;
}

void workers_set_drain(void)
{
	if (wk.head)
		__atomic_store_n(&wk.head->drain, 1, __ATOMIC_RELEASE);
}

bool workers_want_drain(void)
{
	return wk.head && __atomic_load_n(&wk.head->drain, __ATOMIC_ACQUIRE);
}

void workers_publish_unreachable(bool unreachable)
{
	struct worker_slot *s = slot(wk.self);
	if (s)
		STORE(s->unreachable, unreachable ? 1 : 0);
}

bool workers_others_unreachable(void)
{
	struct worker_slot *s;
	for (int k = 0; (s = next_other_serving(&k));)
		if (!LOAD(s->unreachable))
			return false;
	return true;
}

static struct worker_blob *blob(int worker, enum workers_blob which)
{
	if (!wk.blobs || worker < 1 || worker > wk.count || which >= WORKERS_BLOBS)
		return NULL;
	return &wk.blobs[(size_t)(worker - 1) * WORKERS_BLOBS + which];
}

bool workers_blob_write(enum workers_blob which, const void *data, size_t len)
{
	struct worker_blob *b = blob(wk.self, which);
	if (!b || len > WORKERS_BLOB_BYTES)
		return false;
	uint32_t seq = LOAD(b->seq);
	if (seq & 1)
		seq++;		/* left odd by a predecessor killed mid-write */
	STORE(b->seq, seq + 1);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	if (len)
		memcpy(b->data, data, len);
	STORE(b->len, (uint32_t)len);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	STORE(b->seq, seq + 2);
	return true;
}

char *workers_blob_read(int worker, enum workers_blob which, size_t *len)
{
	struct worker_blob *b = blob(worker, which);
	if (!b)
		return NULL;
	char *copy = xmalloc(WORKERS_BLOB_BYTES + 1);
	uint32_t n = 0;
	for (int tries = 0; tries < SEQ_READ_TRIES; tries++) {
		uint32_t before = LOAD(b->seq);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		n = MIN(LOAD(b->len), (uint32_t)WORKERS_BLOB_BYTES);
		memcpy(copy, b->data, n);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (!(before & 1) && LOAD(b->seq) == before)
			break;
	}
	copy[n] = '\0';
	*len = n;
	return copy;
}
