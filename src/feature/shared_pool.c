/*
 * shared_pool.c - the instance's connection budgets across worker
 * processes (see shared_pool.h for the scheme): the shared table, the
 * budget operations the core calls through pgv.budget, and the tick that
 * gives idle servers back and retries waiting pools.
 *
 * Owns: the table mapping. Touches the core only through its interface:
 * reads pools and servers, closes an idle server, asks a pool to launch.
 */
#include "common.h"
#include "shared_pool.h"
#include "handover.h"
#include "instance.h"
#include "log.h"
#include "pool.h"
#include "server.h"
#include "workers.h"

#include <event2/event.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

/* Slots in the table; an index fits the 20 bits a token gives it. Slot 0 is the instance's. */
#define SLOTS 4096
#define INDEX_BITS 20
#define INDEX_MASK ((UINT64_C(1) << INDEX_BITS) - 1)
/* A database name, NUL, a user name (PgBouncer's MAX_DBNAME and MAX_USERNAME). */
#define KEY_MAX (64 + 1 + 128)
/* A want older than this is over: its worker stopped asking (its clients were served or left). */
#define WANT_FRESH_USEC (4 * SHARED_POOL_TICK_USEC)
/* How long a given-back server's budget waits for PostgreSQL to close the connection. */
#define DEPART_TIMEOUT_SEC 2

enum key_kind { KEY_FREE = 0, KEY_INSTANCE, KEY_DB, KEY_USER, KEY_POOL };

/*
 * One key's counts. Every field is written under the slot's own lock,
 * except want_any, also read without it (the release path's quick look),
 * and the key, written under the directory lock (slot_get) while the
 * slot's lock is held or nothing refers to it.
 * Followed by the per-worker columns: servers, clients, reserved (servers
 * given back for that worker's waiting clients, not yet taken by it),
 * want (the monotonic time that worker last asked for a server, 0 = not,
 * cleared when it takes one) and waited (the last time its clients waited
 * for the pool's servers, kept: the worker's recent demand).
 */
struct slot {
	pthread_mutex_t lock;	/* first: slot_claim clears what follows */
	uint32_t kind;
	uint32_t hash;
	uint32_t key_len;
	int64_t want_any;	/* the latest want of any worker, 0 = none since the last look */
	int64_t trim_at;	/* when trim_by last claimed closing servers over the limit */
	int32_t trim_by;	/* that worker's 0-based column */
	uint64_t welcome_wanted;	/* a pool's: workers (bit w = column w) whose logins wait for its welcome */
	char key[KEY_MAX];
} __attribute__((aligned(8)));

/* The directory lock: taken only to claim a slot for a new key (once per key), never on a count. */
struct table_head {
	pthread_mutex_t dir_lock;
	uint32_t full_logged;
	uint64_t welcome_asks;	/* bumped by every ask for a pool's welcome: the others look (tick_cb) */
};

/*
 * A server given back: its socket, kept open by a second descriptor after
 * the server closed, until PostgreSQL closes it too (its backend has left
 * pg_stat_activity by then); only then is its budget returned, so that
 * the asking worker's new connection never overlaps the old one.
 */
struct departing {
	struct list_node node;
	int fd;
	uint64_t token;
	struct event *ev;
	struct event *shut;	/* once the server's own close is done: our FIN, so PostgreSQL ends even without a Terminate */
};

static struct {
	struct table_head *head;
	char *slots;
	size_t slot_bytes;
	size_t map_bytes;
	int workers;
	int self;		/* 0-based column of this worker */
	struct event *tick;
	struct event *nudge;		/* SIGURG: another worker wants a server or freed one (nudge_workers) */
	const struct pool *last_want_pool;	/* server_wanted's last ask (compared, never followed) */
	enum budget_answer last_want_kind;	/* and the limit it was short of */
	usec_t last_want_at;
	struct budget_ops ops;
	struct list departing;		/* struct departing */
	uint64_t welcome_asks_seen;	/* head->welcome_asks when the tick last looked */
} sp;

static void depart(struct server *server);

/* ---------------------------------------------------------------- the table */

static struct slot *slot_at(uint32_t i)
{
	return (struct slot *)(sp.slots + sp.slot_bytes * i);
}

static int32_t *servers_of(struct slot *s)
{
	return (int32_t *)(s + 1);
}

static int32_t *clients_of(struct slot *s)
{
	return servers_of(s) + sp.workers;
}

static int32_t *reserved_of(struct slot *s)
{
	return clients_of(s) + sp.workers;
}

static int64_t *wants_of(struct slot *s)
{
	return (int64_t *)(reserved_of(s) + sp.workers + (sp.workers & 1));
}

static int64_t *waited_of(struct slot *s)
{
	return wants_of(s) + sp.workers;
}

static void mutex_lock(pthread_mutex_t *m)
{
	int rc = pthread_mutex_trylock(m);
	pgv.table_lockings++;
	if (rc == EBUSY) {	/* another worker holds it: timed (SHOW WORKERS, and logged at stop) */
		usec_t t0 = monotonic_usec();
		rc = pthread_mutex_lock(m);
		pgv.table_lock_waits++;
		pgv.table_lock_wait_usec += monotonic_usec() - t0;
	}
	/* Its holder died: each write under the lock is one word, the slot stays consistent. */
	if (rc == EOWNERDEAD)
		pthread_mutex_consistent(m);
	else if (rc != 0)
		die("shared pool table lock: %s", strerror(rc));
}

static void slot_lock(struct slot *s)
{
	mutex_lock(&s->lock);
}

static void slot_unlock(struct slot *s)
{
	pthread_mutex_unlock(&s->lock);
}

/* Slots by index + 1 (0 = none, skipped), locked in index order (the one order: no deadlock); n <= 3. */
static void slots_lock(const uint32_t *idx, int n)
{
	uint32_t sorted[3];
	int m = 0;
	for (int i = 0; i < n; i++) {
		if (!idx[i])
			continue;
		int j = m++;
		while (j > 0 && sorted[j - 1] > idx[i]) {
			sorted[j] = sorted[j - 1];
			j--;
		}
		sorted[j] = idx[i];
	}
	for (int i = 0; i < m; i++)
		if (i == 0 || sorted[i] != sorted[i - 1])
			slot_lock(slot_at(sorted[i] - 1));
}

static void slots_unlock(const uint32_t *idx, int n)
{
	for (int i = 0; i < n; i++) {
		bool dup = false;
		for (int j = 0; j < i; j++)
			dup |= idx[j] == idx[i];
		if (idx[i] && !dup)
			slot_unlock(slot_at(idx[i] - 1));
	}
}

static bool want_fresh(int64_t at, usec_t now)
{
	return at != 0 && now - at < WANT_FRESH_USEC;
}

/* Relaxed loads: also read without the lock (server_count); a column is one aligned word. */
static int32_t column_sum(const int32_t *col)
{
	int32_t n = 0;
	for (int w = 0; w < sp.workers; w++)
		n += __atomic_load_n(&col[w], __ATOMIC_RELAXED);
	return n;
}

/* Servers counted for the key, with those held back for workers still asking for them. */
static int32_t server_sum(struct slot *s, usec_t now)
{
	int32_t n = column_sum(servers_of(s));
	const int32_t *reserved = reserved_of(s);
	const int64_t *wants = wants_of(s);
	for (int w = 0; w < sp.workers; w++)
		if (reserved[w] > 0 && want_fresh(wants[w], now))
			n += reserved[w];
	return n;
}

static bool slot_unused(struct slot *s)
{
	const int32_t *servers = servers_of(s);
	const int32_t *clients = clients_of(s);
	const int32_t *reserved = reserved_of(s);
	for (int w = 0; w < sp.workers; w++)
		if (servers[w] || clients[w] || reserved[w])
			return false;
	return true;
}

/* Under the directory lock, with the slot's lock held or nothing counted in it: it is the key's from now on. */
static void slot_claim(struct slot *s, enum key_kind kind, uint32_t hash, const char *key, size_t len)
{
	__atomic_store_n(&s->kind, KEY_FREE, __ATOMIC_RELEASE);
	memset((char *)s + offsetof(struct slot, hash), 0, sp.slot_bytes - offsetof(struct slot, hash));
	memcpy(s->key, key, len);
	s->key_len = (uint32_t)len;
	s->hash = hash;
	__atomic_store_n(&s->kind, kind, __ATOMIC_RELEASE);	/* published last: lookups without a lock see the key whole */
}

static uint32_t key_hash(enum key_kind kind, const char *key, size_t len)
{
	uint32_t hash = 2166136261u ^ kind;
	for (size_t i = 0; i < len; i++)
		hash = (hash ^ (uint8_t)key[i]) * 16777619u;
	return hash;
}

static bool slot_is(struct slot *s, enum key_kind kind, uint32_t hash, const char *key, size_t len)
{
	return __atomic_load_n(&s->kind, __ATOMIC_ACQUIRE) == kind && s->hash == hash && s->key_len == len &&
	       memcmp(s->key, key, len) == 0;
}

/*
 * Index of the key's slot, without a lock: a hint, 0 if not seen (a slot
 * being claimed meanwhile may hide it). Whoever counts in it checks the
 * key again under the slot's lock (slot_holds).
 */
static uint32_t slot_lookup(enum key_kind kind, uint32_t hash, const char *key, size_t len)
{
	for (uint32_t probe = 0; probe < SLOTS - 1; probe++) {
		uint32_t i = 1 + (hash + probe) % (SLOTS - 1);
		struct slot *s = slot_at(i);
		if (__atomic_load_n(&s->kind, __ATOMIC_ACQUIRE) == KEY_FREE)
			return 0;
		if (slot_is(s, kind, hash, key, len))
			return i;
	}
	return 0;
}

/* A free slot for the key, or one nothing is counted in (checked under its lock). Under the directory lock. */
static uint32_t slot_make(enum key_kind kind, uint32_t hash, const char *key, size_t len)
{
	for (uint32_t probe = 0; probe < SLOTS - 1; probe++) {
		uint32_t i = 1 + (hash + probe) % (SLOTS - 1);
		struct slot *s = slot_at(i);
		if (s->kind == KEY_FREE) {
			slot_claim(s, kind, hash, key, len);
			return i;
		}
		if (slot_is(s, kind, hash, key, len))
			return i;	/* claimed by another worker meanwhile */
	}
	for (uint32_t probe = 0; probe < SLOTS - 1; probe++) {
		uint32_t i = 1 + (hash + probe) % (SLOTS - 1);
		struct slot *s = slot_at(i);
		slot_lock(s);
		bool unused = slot_unused(s);
		if (unused)
			slot_claim(s, kind, hash, key, len);
		slot_unlock(s);
		if (unused)
			return i;
	}
	if (!sp.head->full_logged) {
		sp.head->full_logged = 1;
		log_warning("the shared pool table is full (%d keys): new databases and users are limited per worker",
			    SLOTS - 1);
	}
	return 0;
}

/*
 * Index of the key's slot, made if create (reusing a slot nothing is
 * counted in); 0 if there is none (0 is the instance's, never a key's).
 * Takes no slot lock; the directory lock only to make one.
 */
static uint32_t slot_find(enum key_kind kind, const char *key, size_t len, bool create)
{
	if (len > KEY_MAX)
		return 0;
	uint32_t hash = key_hash(kind, key, len);
	uint32_t i = slot_lookup(kind, hash, key, len);
	if (i || !create)
		return i;
	mutex_lock(&sp.head->dir_lock);
	i = slot_make(kind, hash, key, len);
	pthread_mutex_unlock(&sp.head->dir_lock);
	return i;
}

/* Whether slot i (index + 1, 0 = none) still is the key's, its lock held: a reused slot is not. */
static bool slot_holds(uint32_t i, enum key_kind kind, const char *key, size_t len)
{
	return !i || slot_is(slot_at(i - 1), kind, key_hash(kind, key, len), key, len);
}

/* The pool's key (database NUL user) into key; its length, 0 if too long. */
static size_t pool_key(const struct pool *pool, char key[KEY_MAX])
{
	/* Built by hand: this runs once per wait at saturation, and snprintf cost ~1,000 instructions. */
	size_t db_len = strlen(pool->db->name), user_len = strlen(pool->user);
	if (db_len + 1 + user_len >= KEY_MAX)
		return 0;
	memcpy(key, pool->db->name, db_len);
	key[db_len] = '\0';
	memcpy(key + db_len + 1, pool->user, user_len);
	return db_len + 1 + user_len;
}

static uint32_t pool_slot(const struct pool *pool, bool create)
{
	char key[KEY_MAX];
	size_t len = pool_key(pool, key);
	return len ? slot_find(KEY_POOL, key, len, create) : 0;
}

/* Whether named slot i (index + 1, 0 = none) is still the name's, its lock held. */
static bool slot_holds_name(uint32_t i, enum key_kind kind, const char *name)
{
	return slot_holds(i, kind, name, strlen(name));
}

static uint32_t named_slot(enum key_kind kind, const char *name)
{
	return slot_find(kind, name, strlen(name), true);
}

static uint64_t token_pack(uint32_t a, uint32_t b, uint32_t c)
{
	/* Each index + 1, so that 0 is "none" and a token of anything is never 0. */
	return (uint64_t)(a + 1) | (uint64_t)(b + 1) << INDEX_BITS | (uint64_t)(c + 1) << (2 * INDEX_BITS);
}

/* The token's slots: index + 1 each, 0 = none. */
static void token_unpack(uint64_t token, uint32_t idx[3])
{
	for (int i = 0; i < 3; i++)
		idx[i] = (uint32_t)((token >> (i * INDEX_BITS)) & INDEX_MASK);
}

/*
 * Wakes the workers of mask (bit w = column w) at once rather than at
 * their next tick (workers past the 64th still wait for it): through
 * their hand-over inbox (handover_wake), or if that is full SIGURG,
 * which nothing else in pgvalve sends and whose default action is to be
 * ignored. Sent only when a want begins and when a
 * given-back server's budget is free, a few times a second at most.
 */
static void nudge_workers(uint64_t mask)
{
	for (int w = 0; w < sp.workers && w < 64 && mask; w++, mask >>= 1) {
		if (!(mask & 1u) || w == sp.self)
			continue;
		struct worker_status st;
		workers_read(w + 1, &st);
		if (st.pid > 0 && !handover_wake(w + 1))
			kill(st.pid, SIGURG);
	}
}

/* Workers holding servers of the slot (bit w = column w), this one aside. Under the slot's lock. */
static uint64_t holders_of(struct slot *s)
{
	uint64_t mask = 0;
	const int32_t *servers = servers_of(s);
	for (int w = 0; w < sp.workers && w < 64; w++)
		if (w != sp.self && servers[w] > 0)
			mask |= UINT64_C(1) << w;
	return mask;
}

/* Workers something is reserved for, still asking (bit w = column w). Under the slot's lock. */
static uint64_t reserved_for(struct slot *s, usec_t now)
{
	uint64_t mask = 0;
	for (int w = 0; w < sp.workers && w < 64; w++)
		if (reserved_of(s)[w] > 0 && want_fresh(wants_of(s)[w], now))
			mask |= UINT64_C(1) << w;
	return mask;
}

/* ---------------------------------------------------------------- budget operations */

/*
 * Whether one more server of the slot's key stays within limit (0 = no
 * limit): the sum is under it, or at it with a server reserved for this
 * worker (given back for it: already in the sum). Under the slot's lock.
 *
 * The server given back stays in its giver's column until PostgreSQL has
 * closed it, so the sum is then one over: taken before that, the two
 * would overlap, and the giver, seeing itself still ahead, would give
 * again (the budget would churn).
 */
static bool slot_fits(struct slot *s, int limit, usec_t now)
{
	if (limit <= 0)
		return true;
	int32_t sum = server_sum(s, now);
	return sum < limit ||
	       (sum == limit && reserved_of(s)[sp.self] > 0 && want_fresh(wants_of(s)[sp.self], now));
}

/* One more server counted in this worker's column; what was asked or held back for it is over. */
static void slot_count_taken(struct slot *s)
{
	servers_of(s)[sp.self]++;
	wants_of(s)[sp.self] = 0;	/* asked again if still short */
	reserved_of(s)[sp.self] = 0;
}

static enum budget_answer server_take(const struct pool *pool, int pool_limit, int db_limit, int user_limit,
				      uint64_t *token)
{
	usec_t now = monotonic_usec();
	char key[KEY_MAX];
	size_t key_len = pool_key(pool, key);
	uint32_t p, d, u, idx[3];
	/* The three slots' locks, in index order; again if one was reused for another key meanwhile. */
	for (;;) {
		p = key_len ? slot_find(KEY_POOL, key, key_len, true) : 0;
		d = named_slot(KEY_DB, pool->db->name);
		u = named_slot(KEY_USER, pool->user);
		if (!p || !d || !u) {
			*token = 0;	/* uncounted: the pool's own counts decide */
			return BUDGET_TAKEN;
		}
		idx[0] = p + 1, idx[1] = d + 1, idx[2] = u + 1;
		slots_lock(idx, 3);
		if (slot_holds(idx[0], KEY_POOL, key, key_len) && slot_holds_name(idx[1], KEY_DB, pool->db->name) &&
		    slot_holds_name(idx[2], KEY_USER, pool->user))
			break;
		slots_unlock(idx, 3);
	}
	struct slot *ps = slot_at(p), *ds = slot_at(d), *us = slot_at(u);
	enum budget_answer answer = !slot_fits(ps, pool_limit, now) ? BUDGET_POOL_FULL
				  : !slot_fits(ds, db_limit, now)   ? BUDGET_DB_FULL
				  : !slot_fits(us, user_limit, now) ? BUDGET_USER_FULL
								    : BUDGET_TAKEN;
	if (answer == BUDGET_TAKEN) {
		slot_count_taken(ps);
		slot_count_taken(ds);
		slot_count_taken(us);
		sp.last_want_pool = NULL;	/* the next wait asks again at once */
		*token = token_pack(p, d, u);
	}
	slots_unlock(idx, 3);
	return answer;
}

static void column_return(int32_t *col)
{
	if (col[sp.self] > 0)
		col[sp.self]--;
}

/* One less in this worker's column (servers or clients) of each of the token's slots. */
static void token_return(uint64_t token, int32_t *(*column)(struct slot *))
{
	uint32_t idx[3];
	token_unpack(token, idx);
	for (int i = 0; i < 3; i++) {
		if (!idx[i])
			continue;
		struct slot *s = slot_at(idx[i] - 1);
		slot_lock(s);
		column_return(column(s));
		slot_unlock(s);
	}
}

static void server_return(uint64_t token)
{
	token_return(token, servers_of);
}

/*
 * Without the lock: every caller only decides whether to try server_take,
 * which checks again under the slots' locks, and at saturation each wait
 * asks this (a lock would be taken once a transaction). A slot another worker claims
 * meanwhile is either not found (the pool's own count answers) or found
 * with its key whole; a column is one aligned word.
 */
static int server_count(const struct pool *pool)
{
	uint32_t p = pool_slot(pool, false);
	return p ? column_sum(servers_of(slot_at(p))) : pool_server_count(pool);
}

/* A want is refreshed at most this often per pool: it stays fresh for WANT_FRESH_USEC. */
#define WANT_REFRESH_USEC (SHARED_POOL_TICK_USEC / 5)

/* The slot a refusal asks in: the pool's, or its database's or user's (any pool of it can give). */
static uint32_t wanted_slot(const struct pool *pool, enum budget_answer short_of)
{
	if (short_of == BUDGET_DB_FULL)
		return named_slot(KEY_DB, pool->db->name);
	if (short_of == BUDGET_USER_FULL)
		return named_slot(KEY_USER, pool->user);
	return pool_slot(pool, true);
}

/*
 * A pool whose logins here wait for its welcome (the parameters its first
 * server reports), while the budget leaves no server to learn them: any
 * worker holding the pool's servers knows them and sends them
 * (share_welcome, handover_send_welcome), so that no login waits for a
 * server another worker holds, busy or idle. Its clients then wait for a
 * server as logged-in clients (and ask for one) as in one process.
 */
static void welcome_wanted(const struct pool *pool)
{
	uint32_t p = pool_slot(pool, true);
	if (!p || sp.self >= 64)
		return;
	struct slot *s = slot_at(p);
	uint64_t bit = UINT64_C(1) << sp.self, nudge = 0;
	slot_lock(s);
	if (!(s->welcome_wanted & bit)) {
		s->welcome_wanted |= bit;
		nudge = holders_of(s);
	}
	slot_unlock(s);
	__atomic_add_fetch(&sp.head->welcome_asks, 1, __ATOMIC_RELEASE);
	nudge_workers(nudge);
}

static void server_wanted(const struct pool *pool, enum budget_answer short_of)
{
	usec_t now = monotonic_usec();
	/* At saturation every wait asks: the last pool's ask is refreshed, not repeated, within WANT_REFRESH_USEC. */
	if (pool == sp.last_want_pool && short_of == sp.last_want_kind && now - sp.last_want_at < WANT_REFRESH_USEC)
		return;
	sp.last_want_pool = pool;
	sp.last_want_kind = short_of;
	sp.last_want_at = now;
	if (!pool->welcome_ready)
		welcome_wanted(pool);
	uint64_t nudge = 0;
	uint32_t i = wanted_slot(pool, short_of);
	if (i) {
		struct slot *s = slot_at(i);
		slot_lock(s);
		/* A server held back for an earlier ask that went stale no longer counts: a new ask starts afresh. */
		if (!want_fresh(wants_of(s)[sp.self], now)) {
			reserved_of(s)[sp.self] = 0;
			nudge = holders_of(s);	/* a new ask: the holders look now, not at their next tick */
		}
		wants_of(s)[sp.self] = now;
		waited_of(s)[sp.self] = now;
		__atomic_store_n(&s->want_any, now, __ATOMIC_RELAXED);
		slot_unlock(s);
	}
	nudge_workers(nudge);
}

/*
 * The worker (0-based column) this worker would give one server of the
 * slot back to, whose clients wait: one with nothing reserved for it yet,
 * and (if clients here want the servers too, now or within
 * WANT_FRESH_USEC) none or at least two fewer than this one holds; -1 for
 * none, *any whether any other worker asks at all. Reads only (relaxed
 * loads): under the slot's lock it decides, without it it says whether
 * taking the lock can be worth it.
 */
static int give_back_pick(struct slot *s, bool local_waiters, usec_t now, bool *any)
{
	const int32_t *servers = servers_of(s), *reserved = reserved_of(s);
	const int64_t *wants = wants_of(s);
	/*
	 * Recent demand counts as waiting: at saturation a worker's queue is
	 * empty now and then between its clients' transactions, and giving a
	 * server away at such a moment only makes it ask for one back.
	 */
	bool local_demand = local_waiters || want_fresh(__atomic_load_n(&waited_of(s)[sp.self], __ATOMIC_RELAXED), now);
	int32_t mine = __atomic_load_n(&servers[sp.self], __ATOMIC_RELAXED);
	*any = false;
	for (int w = 0; w < sp.workers; w++) {
		if (w == sp.self || !want_fresh(__atomic_load_n(&wants[w], __ATOMIC_RELAXED), now))
			continue;
		*any = true;
		/*
		 * With demand here too, the one holding more gives until they
		 * hold as many, give or take one (one more would only swing the
		 * difference back); one holding none is given one in turn.
		 */
		int32_t theirs = __atomic_load_n(&servers[w], __ATOMIC_RELAXED);
		if (__atomic_load_n(&reserved[w], __ATOMIC_RELAXED) > 0 || (local_demand && theirs > 0 && mine <= theirs + 1))
			continue;
		return w;
	}
	return -1;
}

/* give_back_pick's worker, with one server reserved for it. Under the slot's lock. */
static int give_back_locked(struct slot *s, bool local_waiters, usec_t now)
{
	bool any;
	int w = give_back_pick(s, local_waiters, now, &any);
	if (w >= 0)
		reserved_of(s)[w]++;
	else if (!any)
		__atomic_store_n(&s->want_any, 0, __ATOMIC_RELAXED);
	return w;
}

/*
 * Server s was given back to worker w for its pool (s: the pool's slot):
 * its socket goes to w, which lends it at once (handover.h), rather than
 * closing here and logging in anew there. Inside w's inbox lock: sent
 * first, then its count moved to w's column slot by slot, each recorded
 * in the flight (so that w counts the rest itself if this worker dies
 * between: handover.h); what was reserved for w and its ask are over (it
 * asks again if still short). False: not sent, nothing changed.
 */
static bool hand_over(struct server *server, struct slot *s, int w)
{
	if (!handover_begin(w + 1))
		return false;
	uint32_t *moved = NULL;
	int64_t asked = __atomic_load_n(&wants_of(s)[w], __ATOMIC_RELAXED);	/* for its log line only */
	bool sent = handover_send(server, w + 1, asked, &moved);
	if (sent) {
		uint32_t idx[3];
		token_unpack(server->budget_token, idx);	/* s is among them */
		for (int i = 0; i < 3; i++) {
			if (!idx[i])
				continue;
			struct slot *t = slot_at(idx[i] - 1);
			slot_lock(t);
			int32_t *servers = servers_of(t);
			if (servers[sp.self] > 0) {
				servers[sp.self]--;
				servers[w]++;
			}
			if (t == s) {
				if (reserved_of(s)[w] > 0)
					reserved_of(s)[w]--;
				wants_of(s)[w] = 0;
			}
			__atomic_store_n(moved, *moved | 1u << i, __ATOMIC_RELEASE);
			slot_unlock(t);
		}
		handover_moved(w + 1);
		server->budget_token = 0;	/* w's now */
		server->handed_over = true;
	}
	handover_end(w + 1);
	if (sent)
		handover_log_sent(server, w + 1);
	return sent;
}

/*
 * A server received from worker from (pid from_pid) that died before it
 * moved its count here (bit i of moved: slot i was): the rest moves now.
 * The dead worker's column still counts it unless the supervisor zeroed
 * it (then the worker is either not running or restarted, with a new pid
 * and a column of its own: left alone). A restart comes a second after
 * the death at the earliest, far longer than this takes.
 */
static void adopt_count(uint64_t token, uint32_t moved, int from, pid_t from_pid)
{
	struct worker_status st;
	workers_read(from, &st);
	bool from_dead = from >= 1 && from <= sp.workers && from - 1 != sp.self && (st.pid == 0 || st.pid == from_pid);
	uint32_t idx[3];
	token_unpack(token, idx);
	for (int i = 0; i < 3; i++) {
		if (!idx[i] || (moved & 1u << i))
			continue;
		struct slot *t = slot_at(idx[i] - 1);
		slot_lock(t);
		int32_t *servers = servers_of(t);
		if (from_dead && servers[from - 1] > 0)
			servers[from - 1]--;
		servers[sp.self]++;
		slot_unlock(t);
	}
}

/*
 * On every release: cheap while nobody asks (one relaxed load per slot of
 * the server's token). An ask for a server of its pool, or of any pool of
 * its database or user, is weighed by give_back_locked. Given for its own
 * pool, an eligible server is handed over; otherwise it closes and its
 * budget waits for PostgreSQL's end (depart).
 */
static bool server_give_back(struct server *server, bool local_waiters)
{
	uint32_t idx[3];
	token_unpack(server->budget_token, idx);
	usec_t now = 0;
	for (int i = 0; i < 3; i++) {
		if (!idx[i])
			continue;
		struct slot *s = slot_at(idx[i] - 1);
		int64_t any = __atomic_load_n(&s->want_any, __ATOMIC_RELAXED);
		if (!any)
			continue;	/* nobody asked lately */
		if (!now)
			now = monotonic_usec();
		if (!want_fresh(any, now))
			continue;
		/* Clients here want it too: it serves them for a while first, or the budget would only log in and out. */
		if (local_waiters && now_usec() - server->arrived < SHARED_POOL_HOLD_USEC)
			return false;
		/*
		 * At saturation every worker asks all the time, and most releases
		 * find the pool split evenly: a look without the lock first, so
		 * that those do not take it (the lock's look decides).
		 */
		bool asked;
		if (give_back_pick(s, local_waiters, now, &asked) < 0 && asked)
			continue;
		slot_lock(s);
		int w = give_back_locked(s, local_waiters, now);
		slot_unlock(s);
		if (w < 0)
			continue;
		if (i == 0 && handover_eligible(server) && hand_over(server, s, w))
			return true;
		depart(server);
		return true;
	}
	return false;
}

/*
 * A trim's claim: long enough for the claiming worker to close its servers
 * (each returns its budget as it closes, in the same janitor pass), so
 * that another worker counts them gone before it claims the rest.
 */
#define TRIM_CLAIM_USEC (100 * 1000)

static int server_excess(const struct pool *pool, int limit, int closable)
{
	usec_t now = monotonic_usec();
	int many = 0;
	uint32_t p = pool_slot(pool, false);
	if (p) {
		struct slot *s = slot_at(p);
		slot_lock(s);
		bool others_trim = s->trim_at && s->trim_by != sp.self && now - s->trim_at < TRIM_CLAIM_USEC;
		int excess = column_sum(servers_of(s)) - limit;
		if (!others_trim && excess > 0) {
			many = MIN(excess, closable);
			s->trim_at = now;
			s->trim_by = sp.self;
		}
		slot_unlock(s);
	}
	return many;
}

/*
 * A client's token: bit 0 set when counted (the instance's slot), then the
 * database's and the user's slot index + 1 (0: not counted there), 15 bits
 * each (SLOTS fits).
 */
#define CLIENT_SLOT_BITS 15
_Static_assert(SLOTS < (1 << CLIENT_SLOT_BITS), "a slot index + 1 fits a client token's field");

static const char *client_take(const char *db_name, const char *user, int max_client, int db_limit, int user_limit,
			       uint32_t *token)
{
	const char *refused = NULL;
	uint32_t d, u, idx[3];
	/* The slots' locks, in index order; again if one was reused for another key meanwhile. */
	for (;;) {
		/* Names come from a login not yet authenticated: only a set limit makes them keys. */
		d = db_name && db_limit > 0 ? named_slot(KEY_DB, db_name) : 0;
		u = user_limit > 0 ? named_slot(KEY_USER, user) : 0;
		idx[0] = 1, idx[1] = d ? d + 1 : 0, idx[2] = u ? u + 1 : 0;
		slots_lock(idx, 3);
		if ((!d || slot_holds_name(idx[1], KEY_DB, db_name)) && (!u || slot_holds_name(idx[2], KEY_USER, user)))
			break;
		slots_unlock(idx, 3);
	}
	if (max_client > 0 && column_sum(clients_of(slot_at(0))) >= max_client)
		refused = "no more connections allowed (max_client_conn)";
	else if (d && column_sum(clients_of(slot_at(d))) >= db_limit)
		refused = "client connections exceeded (max_db_client_connections)";
	else if (u && column_sum(clients_of(slot_at(u))) >= user_limit)
		refused = "client connections exceeded (max_user_client_connections)";
	if (!refused) {
		clients_of(slot_at(0))[sp.self]++;
		if (d)
			clients_of(slot_at(d))[sp.self]++;
		if (u)
			clients_of(slot_at(u))[sp.self]++;
		*token = 1u | (d ? d + 1 : 0) << 1 | (u ? u + 1 : 0) << (1 + CLIENT_SLOT_BITS);
	}
	slots_unlock(idx, 3);
	return refused;
}

static void client_return(uint32_t token)
{
	uint32_t mask = (1u << CLIENT_SLOT_BITS) - 1;
	uint64_t d = (token >> 1) & mask, u = (token >> (1 + CLIENT_SLOT_BITS)) & mask;
	if (token & 1u)	/* the same slots in a server token's form: index + 1 each, 0 = none */
		token_return((uint64_t)1 | d << INDEX_BITS | u << (2 * INDEX_BITS), clients_of);
}

/* ---------------------------------------------------------------- given-back servers */

static void departed(struct departing *d)
{
	list_remove(&sp.departing, &d->node);
	event_free(d->ev);
	event_free(d->shut);
	close(d->fd);
	if (sp.head) {
		server_return(d->token);
		/* Its budget is free: the worker it was given back for takes it now, not at its next tick. */
		uint32_t idx[3];
		token_unpack(d->token, idx);
		usec_t now = monotonic_usec();
		uint64_t mask = 0;
		for (int i = 0; i < 3; i++) {
			if (!idx[i])
				continue;
			struct slot *s = slot_at(idx[i] - 1);
			slot_lock(s);
			mask |= reserved_for(s, now);
			slot_unlock(s);
		}
		nudge_workers(mask);
	}
	free(d);
}

static void departing_cb(evutil_socket_t fd, short what, void *arg)
{
	struct departing *d = arg;
	if (what & EV_READ) {
		char buf[256];
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)))
			return;	/* the end of what it sent (a TLS close_notify): EOF follows */
	}
	departed(d);
}

static void departing_shut_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what;
	struct departing *d = arg;
	shutdown(d->fd, SHUT_WR);
}

/*
 * The server is about to close (given back, or closing for any reason):
 * its budget goes with PostgreSQL's end of the connection, not ours.
 */
static void depart(struct server *server)
{
	int fd = server->nb.fd >= 0 ? dup(server->nb.fd) : -1;
	if (fd < 0)
		return;	/* returned when the server closes, as any other */
	struct departing *d = xcalloc(1, sizeof(*d));
	d->fd = fd;
	d->token = server->budget_token;
	server->budget_token = 0;
	struct timeval tv = { DEPART_TIMEOUT_SEC, 0 };
	d->ev = event_new(pgv.base, fd, EV_READ | EV_PERSIST, departing_cb, d);
	event_add(d->ev, &tv);
	struct timeval now = { 0, 0 };
	d->shut = evtimer_new(pgv.base, departing_shut_cb, d);
	event_add(d->shut, &now);
	list_node_init(&d->node);
	list_append(&sp.departing, &d->node);
}

/* ---------------------------------------------------------------- the tick */

/*
 * An idle server of pool, the one idle longest, given back if another
 * worker asks for a server of the pool, or of any pool of its database or
 * user (short of max_db_connections / max_user_connections there): the
 * release's weighing, with no clients of its own waiting for it.
 */
static void give_back_idle(struct pool *pool)
{
	struct list_node *tail = list_last(&pool->idle_servers);	/* LIFO: the tail idled longest */
	if (!tail)
		return;
	struct server *server = container_of(tail, struct server, node);
	if (server_give_back(server, false))
		server_close(server, server->handed_over ? "handed over to another worker"
							 : "given back for another worker's waiting clients");
}

/* The welcome of pool for the workers whose logins wait for it, if any ask (welcome_wanted). */
static void share_welcome(struct pool *pool)
{
	uint32_t p = pool_slot(pool, false);
	uint64_t self = sp.self < 64 ? UINT64_C(1) << sp.self : 0;
	if (!p || !(__atomic_load_n(&slot_at(p)->welcome_wanted, __ATOMIC_RELAXED) & ~self))
		return;
	struct slot *s = slot_at(p);
	slot_lock(s);
	uint64_t mask = s->welcome_wanted & ~self;
	s->welcome_wanted &= ~mask;
	slot_unlock(s);
	for (int w = 0; w < sp.workers && w < 64; w++) {
		if (!(mask & UINT64_C(1) << w) || handover_send_welcome(w + 1, pool))
			continue;
		slot_lock(s);	/* not sent (its inbox full): asked again at the next tick */
		s->welcome_wanted |= UINT64_C(1) << w;
		slot_unlock(s);
		sp.welcome_asks_seen--;
	}
}

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what; (void)arg;
	/* Someone asked for a pool's welcome since the last look: the pools that have one send it. */
	uint64_t asks = __atomic_load_n(&sp.head->welcome_asks, __ATOMIC_ACQUIRE);
	bool share = asks != sp.welcome_asks_seen;
	sp.welcome_asks_seen = asks;
	list_for_each(dpos, &pgv.databases) {
		struct db *db = container_of(dpos, struct db, node);
		if (db->is_admin)
			continue;
		list_for_each_safe(ppos, ptmp, &db->pools) {
			struct pool *pool = container_of(ppos, struct pool, node);
			if (share && pool->welcome_ready && !pool->standby_reads)
				share_welcome(pool);
			if (pool->waiting_clients.count || pool_lookups_waiting(pool) || pool->welcome_clients.count)
				pool_after_change(pool);	/* takes what was given back, or asks again */
			else
				give_back_idle(pool);
		}
	}
}

/* A wake-up through the inbox (nudge_workers): as the tick, at once. */
static void wake_cb(void)
{
	tick_cb(-1, 0, NULL);
}

/* ---------------------------------------------------------------- set-up */

void shared_pool_create(int count)
{
	sp.workers = MAX(1, count);
	/* servers, clients, reserved (int32 each, padded to 8 bytes), want and waited (int64) per worker */
	size_t columns = sizeof(int32_t) * (size_t)(3 * sp.workers + (sp.workers & 1)) +
			 sizeof(int64_t) * (size_t)(2 * sp.workers);
	sp.slot_bytes = (sizeof(struct slot) + columns + 63) & ~(size_t)63;
	size_t head_bytes = (sizeof(struct table_head) + 63) & ~(size_t)63;
	sp.map_bytes = head_bytes + sp.slot_bytes * SLOTS;
	void *mem = mmap(NULL, sp.map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		die("could not map the shared pool table: %s", strerror(errno));
	sp.head = mem;
	sp.slots = (char *)mem + head_bytes;
	pthread_mutexattr_t attr;
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
	if (pthread_mutex_init(&sp.head->dir_lock, &attr) != 0)
		die("could not make the shared pool table lock");
	for (uint32_t i = 0; i < SLOTS; i++)
		if (pthread_mutex_init(&slot_at(i)->lock, &attr) != 0)
			die("could not make the shared pool table's slot locks");
	pthread_mutexattr_destroy(&attr);
	slot_at(0)->kind = KEY_INSTANCE;
}

void shared_pool_destroy(void)
{
	if (sp.head)
		munmap(sp.head, sp.map_bytes);
	sp.head = NULL;
	sp.slots = NULL;
}

void shared_pool_reclaim(int worker)
{
	if (!sp.head || worker < 1 || worker > sp.workers)
		return;
	int w = worker - 1;
	int32_t servers = 0, clients = 0;
	for (uint32_t i = 0; i < SLOTS; i++) {
		struct slot *s = slot_at(i);
		if (__atomic_load_n(&s->kind, __ATOMIC_ACQUIRE) == KEY_FREE)
			continue;	/* a claim clears every column: nothing of worker's */
		slot_lock(s);
		if (s->kind == KEY_POOL)
			servers += servers_of(s)[w];
		if (s->kind == KEY_INSTANCE)
			clients += clients_of(s)[w];
		servers_of(s)[w] = 0;
		clients_of(s)[w] = 0;
		reserved_of(s)[w] = 0;
		wants_of(s)[w] = 0;
		waited_of(s)[w] = 0;
		if (w < 64)
			s->welcome_wanted &= ~(UINT64_C(1) << w);
		slot_unlock(s);
	}
	if (servers || clients)
		log_info("worker %d's %d server and %d client connections are free again", worker, (int)servers,
			 (int)clients);
}

void shared_pool_register(void)
{
	if (!sp.head || !workers_supervised())
		return;
	sp.self = workers_self() - 1;
	sp.ops = (struct budget_ops){
		.server_take = server_take,
		.server_return = server_return,
		.server_count = server_count,
		.server_excess = server_excess,
		.server_wanted = server_wanted,
		.server_give_back = server_give_back,
		.server_closing = depart,
		.client_take = client_take,
		.client_return = client_return,
	};
	pgv.budget = &sp.ops;
	list_init(&sp.departing);
	struct timeval tv = { 0, SHARED_POOL_TICK_USEC };
	sp.tick = event_new(pgv.base, -1, EV_PERSIST, tick_cb, NULL);
	event_add(sp.tick, &tv);
	sp.nudge = evsignal_new(pgv.base, SIGURG, tick_cb, NULL);
	event_add(sp.nudge, NULL);
	handover_on_wake(wake_cb);
	handover_on_adopt(adopt_count);
}

void shared_pool_stop(void)
{
	if (pgv.budget)
		log_info("shared pool table: %llu lockings waited for another worker, %llu us in all (of %llu lockings)",
			 (unsigned long long)pgv.table_lock_waits, (unsigned long long)pgv.table_lock_wait_usec,
			 (unsigned long long)pgv.table_lockings);
	if (sp.tick)
		event_free(sp.tick);
	sp.tick = NULL;
	if (sp.nudge)
		event_free(sp.nudge);
	sp.nudge = NULL;
	handover_on_wake(NULL);
	handover_on_adopt(NULL);
	if (pgv.budget)
		list_for_each_safe(pos, tmp, &sp.departing)
			departed(container_of(pos, struct departing, node));
	pgv.budget = NULL;
}
