/*
 * pool.c - databases and pools: who gets which server, and when a new
 * server connection is opened.
 *
 * Clients wait in FIFO order; a released server goes to the longest
 * waiting client first, so nobody starves. New servers are opened only
 * while the pool is below its size (and the database below
 * max_db_connections), and not more often than server_login_retry allows
 * after a failed login.
 *
 * Owns: struct pool and the process instance (pgv); struct db is
 * pool_db.c's, the cancel-key index cancel_index.c's. Moves clients and
 * servers only through their set_state functions.
 */
#include "common.h"
#include "cancel_key.h"
#include "pool.h"
#include "pool_check.h"
#include "pool_internal.h"
#include "relay.h"
#include "auth.h"
#include "auth_file.h"
#include "client.h"
#include "dns.h"
#include "log.h"
#include "replication.h"
#include "server.h"

#include <strings.h>


static void pool_set_admin_welcome(struct pool *pool);
static void pool_free(struct pool *pool);
static bool pool_fast_fail(struct pool *pool, struct client *client);
static bool fast_failing(const struct pool *pool);
static void fast_fail_message(const struct pool *pool, char *msg, size_t size);
static void standby_waiters_home(struct pool *pool);
static void standby_waiters_recheck(struct pool *pool);
static int recheck_idle_servers(struct pool *pool, int wanted);

/* ---------------------------------------------------------------- pools */

static struct pool *pool_new(struct db *db, const char *user)
{
	struct pool *pool = xcalloc(1, sizeof(*pool));
	pool->db = db;
	pool->user = xstrdup(user);
	pool->ucount = pool_user_ref(user);
	pool->last_used = now_usec();
	pool->password = pool_login_password(db, user);
	list_init(&pool->active_clients);
	list_init(&pool->idle_clients);
	list_init(&pool->waiting_clients);
	list_init(&pool->welcome_clients);
	list_init(&pool->auth_waiters);
	list_init(&pool->query_waiters);
	list_init(&pool->active_servers);
	list_init(&pool->idle_servers);
	list_init(&pool->used_servers);
	list_init(&pool->tested_servers);
	list_init(&pool->login_servers);
	list_append(&db->pools, &pool->node);
	if (db->is_admin)
		pool_set_admin_welcome(pool);
	return pool;
}

struct pool *pool_get(struct db *db, const char *client_user)
{
	const char *user = db->cfg->user[0] ? db->cfg->user : client_user;

	list_for_each(pos, &db->pools) {
		struct pool *pool = container_of(pos, struct pool, node);
		if (!pool->standby_reads && strcmp(pool->user, user) == 0)
			return pool;
	}
	return pool_new(db, user);
}

struct pool *pool_standby_companion(struct pool *home)
{
	list_for_each(pos, &home->db->pools) {
		struct pool *pool = container_of(pos, struct pool, node);
		if (pool->standby_reads && strcmp(pool->user, home->user) == 0)
			return pool;
	}
	struct pool *pool = pool_new(home->db, home->user);
	pool->standby_reads = true;
	if (home->has_scram_keys)
		pool_remember_scram_keys(pool, home->scram_client_key, home->scram_server_key);
	return pool;
}

/* The list of pool a logged-in client in state sits in (as client.c's client_state_list). */
static struct list *logged_in_list(struct pool *pool, enum client_state state)
{
	switch (state) {
	case CL_IDLE:
		return &pool->idle_clients;
	case CL_WAITING:
		return &pool->waiting_clients;
	default:
		return &pool->active_clients;
	}
}

/* Lent when idle; back when active (its server being released) or waiting (standby_waiters_home). */
void pool_lend_client(struct client *client, struct pool *to)
{
	struct pool *from = client->pool;
	list_remove(logged_in_list(from, client->state), &client->node);
	list_append(logged_in_list(to, client->state), &client->node);
	client->pool = to;
	client->lent = to->standby_reads;
	from->last_used = to->last_used = now_usec();
}

bool pool_offer_idle_server(struct pool *pool, bool (*fits)(const struct server *server, void *arg), void *arg)
{
	if (!list_empty(&pool->waiting_clients) || db_paused(pool->db))
		return false;
	list_for_each(pos, &pool->idle_servers) {
		struct server *server = container_of(pos, struct server, node);
		if (pool_server_needs_check(server) || !fits(server, arg))
			continue;
		list_remove(&pool->idle_servers, pos);
		list_prepend(&pool->idle_servers, pos);
		return true;
	}
	return false;
}

int pool_effective_size(const struct pool *pool)
{
	const struct user_config *uc = config_find_user(pgv.cfg, pool->user);
	if (uc && uc->pool_size >= 0)
		return uc->pool_size;
	if (pool->db->cfg->pool_size >= 0)
		return pool->db->cfg->pool_size;
	return pgv.cfg->default_pool_size;
}

int pool_effective_mode(const struct pool *pool)
{
	if (pool->mode_cached_gen == pgv.config_generation)
		return pool->mode_cached;
	struct pool *p = (struct pool *)pool;	/* cache only */
	const struct user_config *uc = config_find_user(pgv.cfg, pool->user);
	int mode = pgv.cfg->pool_mode;
	if (pool->db->cfg->pool_mode >= 0)
		mode = pool->db->cfg->pool_mode;
	if (uc && uc->pool_mode >= 0)
		mode = uc->pool_mode;
	p->mode_cached = mode;
	p->mode_cached_gen = pgv.config_generation;
	p->relay_cached = (uint8_t)relay_features_ask(pool);	/* the features may ask the mode: cached first */
	return mode;
}

int pool_server_count(const struct pool *pool)
{
	return (int)(pool->active_servers.count + pool->idle_servers.count + pool->used_servers.count +
		     pool->tested_servers.count + pool->login_servers.count);
}

int pool_instance_server_count(const struct pool *pool)
{
	return pgv.budget ? pgv.budget->server_count(pool) : pool_server_count(pool);
}

/* max_db_connections of db (0 = none). */
static int db_server_limit(const struct db *db)
{
	return db->cfg->max_db_connections > 0 ? db->cfg->max_db_connections : pgv.cfg->max_db_connections;
}

/* max_user_connections of the pool's user (0 = none). */
static int user_server_limit(const struct pool *pool)
{
	const struct user_config *uc = config_find_user(pgv.cfg, pool->user);
	return uc && uc->max_user_connections > 0 ? uc->max_user_connections : pgv.cfg->max_user_connections;
}

int pool_server_capacity(const struct pool *pool)
{
	int n = pool_effective_size(pool), db_limit = db_server_limit(pool->db), user_limit = user_server_limit(pool);
	if (db_limit > 0)
		n = MIN(n, db_limit);
	if (user_limit > 0)
		n = MIN(n, user_limit);
	return n;
}

static bool db_may_open_server(const struct db *db)
{
	int limit = db_server_limit(db);
	return limit <= 0 || db->server_count < limit;
}

static bool user_may_open_server(const struct pool *pool)
{
	int limit = user_server_limit(pool);
	return limit <= 0 || pool->ucount->servers < limit;
}

/*
 * Opens one server of pool, within the instance's budget when it is shared
 * (instance.h): the instance's servers of the pool stay within pool_limit.
 * 1 if opened, 0 if it could not start, -1 if the budget refused it
 * (*short_of: the limit that did, else BUDGET_TAKEN).
 */
static int open_server(struct pool *pool, int pool_limit, enum budget_answer *short_of)
{
	const struct budget_ops *budget = pgv.budget;
	*short_of = BUDGET_TAKEN;
	if (!budget)
		return server_connect(pool) ? 1 : 0;
	uint64_t token = 0;
	*short_of = budget->server_take(pool, pool_limit, db_server_limit(pool->db), user_server_limit(pool), &token);
	if (*short_of != BUDGET_TAKEN)
		return -1;
	return server_connect_counted(pool, token) ? 1 : 0;
}

int pool_open_replication_server(struct pool *pool, struct client *client)
{
	const struct budget_ops *budget = pgv.budget;
	uint64_t token = 0;
	if (budget) {
		enum budget_answer short_of = budget->server_take(pool, pool_effective_size(pool),
								  db_server_limit(pool->db), user_server_limit(pool), &token);
		if (short_of != BUDGET_TAKEN) {
			budget->server_wanted(pool, short_of);
			return -1;
		}
	}
	return server_connect_replication(pool, client, token) ? 1 : 0;
}

/*
 * Closes the longest-idle server of another pool of the same database
 * (same_db) or the same user, as PgBouncer does when a limit is full.
 */
static bool evict_idle_server(struct pool *pool, bool same_db)
{
	struct server *victim = NULL;
	list_for_each(dpos, &pgv.databases) {
		struct db *db = container_of(dpos, struct db, node);
		if (same_db && db != pool->db)
			continue;
		list_for_each(ppos, &db->pools) {
			struct pool *other = container_of(ppos, struct pool, node);
			if (other == pool || (!same_db && strcmp(other->user, pool->user) != 0))
				continue;
			struct list_node *tail = list_last(&other->idle_servers);	/* LIFO: the tail idled longest */
			if (!tail)
				continue;
			struct server *s = container_of(tail, struct server, node);
			if (!victim || s->last_used < victim->last_used)
				victim = s;
		}
	}
	if (!victim)
		return false;
	server_close(victim, "evicted");
	return true;
}

/*
 * The instance's budget refused a server of pool at max_db_connections or
 * max_user_connections (workers = N, where this process's own counts are
 * under the limit): this process's longest-idle server of another pool of
 * the database or user makes room, as evict_idle_server does alone.
 */
static bool evict_for_budget(struct pool *pool, enum budget_answer short_of)
{
	if (short_of == BUDGET_DB_FULL)
		return evict_idle_server(pool, true);
	if (short_of == BUDGET_USER_FULL)
		return evict_idle_server(pool, false);
	return false;
}

bool pool_may_open_server(struct pool *pool)
{
	/* At max_db_connections / max_user_connections another pool's idle server makes room. */
	if (!db_may_open_server(pool->db) && !evict_idle_server(pool, true))
		return false;
	if (!user_may_open_server(pool) && !evict_idle_server(pool, false))
		return false;
	return true;
}

static int pool_reserve_size(const struct pool *pool)
{
	const struct user_config *uc = config_find_user(pgv.cfg, pool->user);
	if (uc && uc->reserve_pool_size >= 0)
		return uc->reserve_pool_size;
	if (pool->db->cfg->reserve_pool_size >= 0)
		return pool->db->cfg->reserve_pool_size;
	return pgv.cfg->reserve_pool_size;
}

void pool_trim_excess(struct pool *pool)
{
	int size = pool_effective_size(pool);
	int closable = (int)(pool->used_servers.count + pool->idle_servers.count);
	if (size <= 0 || !closable || pool->db->is_admin)
		return;
	int limit = size + pool_reserve_size(pool);
	int many = pgv.budget ? pgv.budget->server_excess(pool, limit, closable) : pool_server_count(pool) - limit;
	while (many-- > 0) {
		/* used ones first (they would need a reset anyway), then the one idle longest (LIFO: the tail) */
		struct list_node *n = list_first(&pool->used_servers);
		if (!n)
			n = list_last(&pool->idle_servers);
		if (!n)
			break;
		server_close(container_of(n, struct server, node), "too many servers in the pool");
	}
}

/* min_pool_size of the database, or the global one. */
static int pool_min_size_of_db(const struct db *db)
{
	return db->cfg->min_pool_size >= 0 ? db->cfg->min_pool_size : pgv.cfg->min_pool_size;
}

int pool_min_size(const struct pool *pool)
{
	return MIN(pool_min_size_of_db(pool->db), pool_effective_size(pool));
}

usec_t pool_server_lifetime(const struct pool *pool)
{
	return pool->db->cfg->server_lifetime >= 0 ? pool->db->cfg->server_lifetime : pgv.cfg->server_lifetime;
}

bool pool_login_retry_pending(const struct pool *pool, usec_t now)
{
	if (!pool->last_login_failure)
		return false;
	/* a role-routed host list paces each host itself (server.h): the pool only briefly */
	usec_t wait = server_hooks.login_retry ? server_hooks.login_retry(pool) : 0;
	return now - pool->last_login_failure < (wait ? wait : pgv.cfg->server_login_retry);
}

void pool_keep_min_size(struct pool *pool)
{
	struct db *db = pool->db;
	int min = pool_min_size(pool);
	if (min <= 0 || db->is_admin || db_paused(db) || db->removed || pgv.shutting_down)
		return;
	if (pool_login_retry_pending(pool, now_usec()))
		return;
	/* Once for the instance: with a shared budget, its count decides (and the take is exact). */
	enum budget_answer short_of;
	while (pool_instance_server_count(pool) < min && db_may_open_server(db) && user_may_open_server(pool)) {
		if (open_server(pool, min, &short_of) <= 0)
			break;
	}
}

void pool_keep_forced_user_pool(struct db *db)
{
	if (pool_min_size_of_db(db) > 0 && db->cfg->user[0] && !db->is_admin && !db->removed)
		pool_get(db, db->cfg->user);
}

static int replication_servers_in(const struct list *l)
{
	int n = 0;
	list_for_each(pos, l)
		n += container_of(pos, struct server, node)->replication != REPLICATION_NONE;
	return n;
}

/* Logins of servers opened for replication clients: they will serve nobody else. */
static int replication_logins(const struct pool *pool)
{
	return replication_servers_in(&pool->login_servers);
}

/* Servers that are or will be the pool's to hand out (replication ones serve their client alone). */
static int pooled_server_count(const struct pool *pool)
{
	return pool_server_count(pool) - replication_logins(pool) - replication_servers_in(&pool->active_servers);
}

/* Whether a login waits for the pool's first server (replication logins wait for their own). */
static bool welcome_awaited(const struct pool *pool)
{
	if (pool->welcome_ready)
		return false;
	list_for_each(pos, &pool->welcome_clients)
		if (!client_repl(container_of(pos, struct client, node)))
			return true;
	return false;
}

/* Servers of clients' own (replication), opened by their kind where the pool has room. */
static void launch_kind_servers(struct pool *pool)
{
	for (int k = 0; k < CLIENT_KINDS; k++) {
		const struct client_kind_ops *ops = client_kind_ops((enum client_kind)k);
		if (ops && ops->launch_servers)
			ops->launch_servers(pool);
	}
}

/*
 * Whether a kind's client waiting for room of its own came before the
 * first ordinary waiter. Such clients wait in WELCOME (client.h), so the
 * caller asks only while the pool has some there: every server release
 * passes here.
 */
static bool kind_claims_server(const struct pool *pool)
{
	for (int k = 0; k < CLIENT_KINDS; k++) {
		const struct client_kind_ops *ops = client_kind_ops((enum client_kind)k);
		if (ops && ops->claims_server && ops->claims_server(pool))
			return true;
	}
	return false;
}

void pool_launch_servers(struct pool *pool)
{
	if (db_paused(pool->db) || pool->db->is_admin)
		return;
	if (pool->standby_reads)
		standby_waiters_recheck(pool);
	launch_kind_servers(pool);	/* first: they cannot use anyone else's server */
	int waiters = (int)(pool->waiting_clients.count + pool_lookups_waiting(pool));
	/* No waiter but a login held for the first server's parameters: one server is wanted. */
	int demand = waiters > 0 ? waiters : welcome_awaited(pool) ? 1 : 0;
	if (demand == 0)
		return;
	/* Servers on their way back (logging in, being reset) will take waiters too. */
	int coming = (int)(pool->login_servers.count + pool->used_servers.count + pool->tested_servers.count) -
		     replication_logins(pool);
	/* Stale idle servers, checked, come back before new ones could log in. */
	if (coming < waiters)
		coming += recheck_idle_servers(pool, waiters - coming);
	if (coming >= demand)
		return;
	if (pool_login_retry_pending(pool, now_usec()))
		return;	/* the janitor tries again once server_login_retry has passed */

	int size = pool_effective_size(pool);
	int total = pool_instance_server_count(pool);
	if (!pool->welcome_ready && size < 1)
		size = 1;	/* one connection is needed to learn the server's parameters */
	/* reserve_pool_size more, once the first client has waited reserve_pool_timeout */
	struct list_node *first = list_first(&pool->waiting_clients);
	int reserve = pool_reserve_size(pool);
	int base_size = size;
	struct client *first_waiter = first ? container_of(first, struct client, node) : NULL;
	if (first_waiter && reserve > 0 && total >= size &&
	    now_usec() - first_waiter->request_time >= pgv.cfg->reserve_pool_timeout)
		size += reserve;
	enum budget_answer short_of = total >= size ? BUDGET_POOL_FULL : BUDGET_TAKEN;
	while (coming < demand && total < size) {
		if (!pool_may_open_server(pool))
			break;
		int opened = open_server(pool, size, &short_of);
		if (opened < 0 && evict_for_budget(pool, short_of))
			opened = open_server(pool, size, &short_of);
		if (opened == 0 && coming == 0)
			standby_waiters_home(pool);	/* no standby may serve: the primary does */
		if (opened <= 0)
			break;
		/* As PgBouncer: each reserve connection is logged, for the client that waited. */
		if (total >= base_size)
			client_log(LOG_LEVEL_WARNING, first_waiter, "taking connection from reserve_pool");
		coming++;
		total++;
	}
	/* Other workers hold the budget: one of them gives a server back (shared_pool.h). */
	if (short_of != BUDGET_TAKEN && coming < demand && pgv.budget)
		pgv.budget->server_wanted(pool, short_of);
}

void pool_after_change(struct pool *pool)
{
	if (pool->waiting_clients.count || pool_lookups_waiting(pool) || pool->welcome_clients.count)
		pool_launch_servers(pool);
}

/* ---------------------------------------------------------------- users and limits */

static struct user_count **user_count_slot(const char *name)
{
	if (!pgv.user_counts) {
		pgv.user_counts_size = 256;
		pgv.user_counts = xcalloc(pgv.user_counts_size, sizeof(*pgv.user_counts));
	}
	struct user_count **slot = &pgv.user_counts[hash_string(name) & (pgv.user_counts_size - 1)];
	while (*slot && strcmp((*slot)->name, name) != 0)
		slot = &(*slot)->next;
	return slot;
}

size_t pool_user_count_list(const struct user_count **out, size_t max)
{
	size_t n = 0;
	for (uint32_t i = 0; i < pgv.user_counts_size; i++)
		for (const struct user_count *u = pgv.user_counts[i]; u; u = u->next) {
			if (out && n < max)
				out[n] = u;
			n++;
		}
	return out ? MIN(n, max) : n;
}

struct user_count *pool_user_ref(const char *name)
{
	struct user_count **slot = user_count_slot(name);
	if (!*slot) {
		size_t len = strlen(name);
		*slot = xcalloc(1, sizeof(**slot) + len + 1);
		memcpy((*slot)->name, name, len + 1);
	}
	(*slot)->refs++;
	return *slot;
}

void pool_user_unref(struct user_count *u)
{
	if (--u->refs > 0 || !pgv.user_counts)
		return;
	struct user_count **slot = user_count_slot(u->name);
	if (*slot == u)
		*slot = u->next;
	free(u);
}

const char *pool_client_limit_reached(const struct db *db, const char *user, uint32_t *budget_token)
{
	*budget_token = 0;
	/* As PgBouncer, admin_users are not held back by these on the admin console; elsewhere they are. */
	if (db->is_admin && config_list_contains(pgv.cfg->admin_users, user))
		return NULL;
	int dblimit = db->cfg->max_db_client_connections > 0 ? db->cfg->max_db_client_connections :
		pgv.cfg->max_db_client_connections;
	if (dblimit > 0 && db->client_count >= dblimit)
		return "client connections exceeded (max_db_client_connections)";
	const struct user_config *uc = config_find_user(pgv.cfg, user);
	int ulimit = uc && uc->max_user_client_connections > 0 ? uc->max_user_client_connections :
		pgv.cfg->max_user_client_connections;
	struct user_count *u = ulimit > 0 ? *user_count_slot(user) : NULL;
	if (u && u->clients >= ulimit)
		return "client connections exceeded (max_user_client_connections)";
	/* The console stays reachable when the instance is full, as in one process. */
	if (pgv.budget && !db->is_admin)
		return pgv.budget->client_take(db->is_fake ? NULL : db->name, user, pgv.cfg->max_client_conn,
					       dblimit, ulimit, budget_token);
	return NULL;
}

static bool pool_unused(const struct pool *pool)
{
	return !pool_server_count(pool) && !pool->active_clients.count && !pool->idle_clients.count &&
	       !pool->waiting_clients.count && !pool->welcome_clients.count && !pool_lookups_waiting(pool);
}

/* A login still choosing or authenticating holds its pool without being in any of its lists. */
static bool pool_has_logins(const struct pool *pool)
{
	list_for_each(pos, &pgv.login_clients)
		if (container_of(pos, struct client, node)->pool == pool)
			return true;
	return false;
}

/*
 * pool_idle_timeout, as PgBouncer 1.26: the time counts from when the pool
 * was last seen with a client or a server. Never the console's pool, nor a
 * forced-user pool kept at min_pool_size (it would be made again at the
 * next tick, over and over while its server cannot be reached).
 */
void pool_drop_idle_pools(struct db *db, usec_t now)
{
	usec_t timeout = pgv.cfg->pool_idle_timeout;
	if (timeout <= 0 || db->is_admin)
		return;
	list_for_each_safe(pos, tmp, &db->pools) {
		struct pool *pool = container_of(pos, struct pool, node);
		if (!pool_unused(pool) || pool_has_logins(pool)) {
			pool->last_used = now;
			continue;
		}
		if ((db->cfg->user[0] && pool_min_size(pool) > 0) || now - pool->last_used < timeout)
			continue;
		log_info("cleaning up idle pool for user %s on db %s because: pool idle timeout (age= %llds)",
			 pool->user, db->name, (long long)((now - pool->last_used) / USEC_PER_SEC));
		pool_destroy(pool);
	}
}

/* Unlinks db from pgv.databases and frees it with its pools. */
void db_free(struct db *db)
{
	list_for_each_safe(pos, tmp, &db->pools) {
		struct pool *pool = container_of(pos, struct pool, node);
		list_remove(&db->pools, &pool->node);
		pool_free(pool);
	}
	if (list_node_linked(&db->node))
		list_remove(&pgv.databases, &db->node);
	config_db_free(db->cfg);
	free(db->balance_counts);
	free(db->host_roles);
	free(db->name);
	free(db);
}

void pool_close_db(struct db *db, const char *reason)
{
	/* Logins that chose it hold its pools too. */
	list_for_each_safe(pos, tmp, &pgv.login_clients) {
		struct client *client = container_of(pos, struct client, node);
		if (client->pool && client->pool->db == db)
			client_close(client, "08P01", reason);
	}
	list_for_each(ppos, &db->pools) {
		struct pool *pool = container_of(ppos, struct pool, node);
		struct list *clists[] = { &pool->active_clients, &pool->idle_clients, &pool->waiting_clients,
					  &pool->welcome_clients };
		for (size_t i = 0; i < ARRAY_SIZE(clists); i++) {
			struct list_node *n;
			while ((n = list_first(clists[i])))
				client_close(container_of(n, struct client, node), "08P01", reason);
		}
		struct list *slists[] = { &pool->active_servers, &pool->idle_servers, &pool->used_servers,
					  &pool->tested_servers, &pool->login_servers };
		for (size_t i = 0; i < ARRAY_SIZE(slists); i++) {
			struct list_node *n;
			while ((n = list_first(slists[i])))
				server_close(container_of(n, struct server, node), reason);
		}
	}
	/* As PgBouncer, the pools go, and their statistics with them. */
	struct list_node *n;
	while ((n = list_first(&db->pools)))
		pool_destroy(container_of(n, struct pool, node));
}

/* Unused for autodb_idle_timeout: no client or server in any pool, no console waiting on it (that keeps it). */
static bool db_idle(const struct db *db, usec_t now)
{
	usec_t timeout = pgv.cfg->autodb_idle_timeout;
	if (timeout <= 0 || now - db->last_used < timeout || db->console_waits)
		return false;
	list_for_each(pos, &db->pools)
		if (!pool_unused(container_of(pos, struct pool, node)))
			return false;
	return true;
}

void pool_drop_idle_autodb(struct db *db, usec_t now)
{
	if (!db->is_autodb || !db_idle(db, now))
		return;
	log_info("auto-database %s unused for %lld s, dropped", db->name,
		 (long long)(pgv.cfg->autodb_idle_timeout / USEC_PER_SEC));
	db_free(db);
}

bool pool_drop_idle_routed_db(struct db *db, usec_t now)
{
	/* A login still authenticating is counted in client_count, not yet in a pool's lists. */
	if (!db->is_routed || db->client_count || !db_idle(db, now))
		return false;
	log_info("database %s unused for %lld s, dropped", db->name,
		 (long long)(pgv.cfg->autodb_idle_timeout / USEC_PER_SEC));
	db_free(db);
	return true;
}

struct db *pool_fake_db(const char *name)
{
	struct db *db = xcalloc(1, sizeof(*db));
	db->name = xstrdup(name);
	db->cfg = config_db_new(name);
	db->host_count = host_list_count(db->cfg->host);
	db->is_fake = true;
	db->provisional = true;
	stats_init(&db->stats, now_usec());
	list_init(&db->pools);
	list_node_init(&db->node);
	return db;
}

struct pool *pool_get_for_login(struct db *db, const char *client_user, bool db_is_new)
{
	uint32_t before = db->pools.count;
	struct pool *pool = pool_get(db, client_user);
	if (db->pools.count != before)
		pool->provisional = true;
	if (db_is_new)
		db->provisional = true;
	if (pool->provisional)
		pool->logins++;
	return pool;
}

bool pool_login_abandoned(struct client *client)
{
	struct pool *pool = client->pool;
	if (!pool || !pool->provisional || --pool->logins > 0)
		return false;
	struct db *db = pool->db;
	/* Nothing but logins can have used a pool that none of them got into. */
	if (!pool_unused(pool))
		return false;
	pool_destroy(pool);
	if (db->is_fake && !db->client_count && !db->pools.count) {
		db_free(db);
	} else if (db->provisional && db->is_autodb && !db->removed && !db->client_count && !db->pools.count &&
		   !db->console_waits) {
		log_info("auto-database %s dropped: no login to it succeeded", db->name);
		db_free(db);
	}
	return true;
}

/* ---------------------------------------------------------------- matching */

/* server_check_query's "<empty>" means an empty query: the cheapest round trip there is. */
static void run_check_query(struct server *server)
{
	const char *q = pgv.cfg->server_check_query;
	if (strcmp(q, "<empty>") == 0)
		q = "";
	server_set_state(server, SV_TESTED);
	server_run_internal(server, SV_INTERNAL_CHECK, q, (uint32_t)strlen(q));
}

/*
 * An idle server ready to use now: the first in the idle list (the most
 * recently used, or under server_round_robin the next in turn) that has
 * not idled past server_check_delay. A stale one is not handed out: the
 * client waits, and pool_launch_servers() checks stale servers for it.
 */
static struct server *take_idle_server(struct pool *pool)
{
	list_for_each(pos, &pool->idle_servers) {
		struct server *server = container_of(pos, struct server, node);
		if (!pool_server_needs_check(server))
			return server;
	}
	return NULL;
}

/*
 * Sends server_check_query to up to `wanted` idle servers past
 * server_check_delay; each comes back through pool_server_ready() and
 * serves whoever waits by then. One check per waiter, as PgBouncer
 * rechecks one server per waiting client: after a quiet spell a single
 * query must not make every idle server of a large pool run the check.
 * Returns how many it started.
 */
static int recheck_idle_servers(struct pool *pool, int wanted)
{
	int started = 0;
	list_for_each_safe(pos, tmp, &pool->idle_servers) {
		if (started >= wanted)
			break;
		struct server *server = container_of(pos, struct server, node);
		if (!pool_server_needs_check(server))
			continue;
		run_check_query(server);
		started++;
	}
	return started;
}

static void link_pair(struct client *client, struct server *server)
{
	bool was_waiting = client->state == CL_WAITING || client->state == CL_PARAMS_WAITING;
	struct stats *st = &server->pool->db->stats.total;
	st->server_assignment_count++;
	if (was_waiting) {
		usec_t waited = MAX(now_usec() - client->request_time, 0);
		st->wait_time += (uint64_t)waited;
		metrics_histogram_observe(&server->pool->db->wait_hist, waited);
	}
	server_link(server, client);
	client_linked(client);
	if (server_apply_client_vars(server, client)) {
		netbuf_pause(&client->nb);	/* resumed when the server has answered */
	} else if (client->state == CL_PARAMS_CHECK) {
		/*
		 * A login's values already on the server: taken, but the login
		 * finishes on the server's answer to an empty query, never from
		 * here, where finishing it hands the server to the next login
		 * at once and a queue of such logins would nest without end.
		 */
		server_run_internal(server, SV_INTERNAL_SET_PARAMS, "", 0);
	} else if (was_waiting) {
		netbuf_resume(&client->nb);
	}
}

/* Clients sent back to home wait there: its idle servers serve them, or it opens more. */
static void home_serve_waiters(struct pool *home)
{
	struct list_node *n;
	while (!db_paused(home->db) && (n = list_first(&home->waiting_clients))) {
		struct server *server = take_idle_server(home);
		if (!server)
			break;
		link_pair(container_of(n, struct client, node), server);
	}
	pool_after_change(home);
}

/*
 * The read balancer's standby pool could not get a server (no standby may
 * serve now, a connect or a login failed): the clients lent to it that
 * wait go back to their own pool, in their order, and run on the primary
 * rather than wait or fail for a read the primary can answer.
 */
static void standby_waiters_home(struct pool *pool)
{
	if (!pool->standby_reads || list_empty(&pool->waiting_clients))
		return;
	struct pool *home = pool_get(pool->db, pool->user);
	list_for_each_safe(pos, tmp, &pool->waiting_clients) {
		struct client *client = container_of(pos, struct client, node);
		if (client->lent && client->state == CL_WAITING)
			pool_lend_client(client, home);
	}
	home_serve_waiters(home);
}

bool db_paused(const struct db *db)
{
	/* A global PAUSE covers every database without touching their own flags. */
	return db->paused || (pgv.paused_all && !db->is_admin);
}

const char *pool_pause_reason(void)
{
	/* SIGINT (Ctrl-C) and SHUTDOWN WAIT_FOR_SERVERS pause everything on the way out: say so */
	return pgv.shutdown_mode == SHUTDOWN_WAIT_FOR_SERVERS ? "shutting down" : "pause mode";
}

/* Whether client takes server: always, unless it is lent to a standby companion whose balancer says otherwise. */
static enum balance_take lent_client_takes(struct client *client, const struct server *server)
{
	if (!server->pool->standby_reads || !client->lent || !relay_hooks.balance_takes)
		return BALANCE_TAKE;
	if (client->state != CL_WAITING && client->state != CL_IDLE)	/* (a login waiting for a server is never lent) */
		return BALANCE_TAKE;
	return relay_hooks.balance_takes(client, server);
}

bool pool_request_server(struct client *client)
{
	struct pool *pool = client->pool;

	if (pgv.shutdown_mode == SHUTDOWN_WAIT_FOR_SERVERS) {
		client_close(client, "08P01", "server shutting down");
		return false;
	}
	if (pool_fast_fail(pool, client))
		return false;

	/* Only skip the queue when there is none (and the database is not paused). */
	if (list_empty(&pool->waiting_clients) && !db_paused(pool->db)) {
		struct server *server = take_idle_server(pool);
		enum balance_take take = server ? lent_client_takes(client, server) : BALANCE_WAIT;
		if (take == BALANCE_TAKE) {
			link_pair(client, server);
			return true;
		}
		if (take == BALANCE_HOME) {	/* its read runs on the primary after all */
			pool_lend_client(client, pool_get(pool->db, pool->user));
			return pool_request_server(client);
		}
	}
	client->request_time = now_usec();
	netbuf_pause(&client->nb);
	client_set_state(client, client_waiting_state(client));
	pool_launch_servers(pool);
	return false;
}

/*
 * The first waiting client that may take server. In a standby companion,
 * a lent client whose read this standby may not serve (balance_takes: it
 * is behind the client's freshness) waits on for another server there
 * that is about to be free, or goes back to its own pool to run on the
 * primary; the next one is asked.
 */
static struct client *first_waiter_taking(struct pool *pool, const struct server *server)
{
	struct pool *home = NULL;
	struct client *taker = NULL;
	list_for_each_safe(pos, tmp, &pool->waiting_clients) {
		struct client *client = container_of(pos, struct client, node);
		enum balance_take take = lent_client_takes(client, server);
		if (take == BALANCE_TAKE) {
			taker = client;
			break;
		}
		if (take == BALANCE_HOME) {
			home = pool_get(pool->db, pool->user);
			pool_lend_client(client, home);
		}
	}
	if (home)
		home_serve_waiters(home);
	return taker;
}

/*
 * Clients lent to a standby companion that wait while it has an idle
 * server wait for one that fits them (balance_takes) and is about to be
 * free: asked again whenever the pool changes (pool_launch_servers: a
 * server closed, a client queued), so that none waits on for a server
 * that went, or that serves someone else.
 */
static void standby_waiters_recheck(struct pool *pool)
{
	if (list_empty(&pool->waiting_clients) || list_empty(&pool->idle_servers))
		return;
	struct server *server = take_idle_server(pool);
	struct client *waiter = server ? first_waiter_taking(pool, server) : NULL;
	if (waiter)
		link_pair(waiter, server);
}

void pool_server_ready(struct server *server)
{
	struct pool *pool = server->pool;

	if (server->close_needed) {
		server_close(server, "obsolete connection");
		return;
	}
	if (db_paused(pool->db)) {
		server_close(server, pool_pause_reason());
		return;
	}
	if (server->budget_token && pgv.budget &&
	    pgv.budget->server_give_back(server, pool->waiting_clients.count || pool_lookups_waiting(pool) ||
							 pool->welcome_clients.count)) {
		server_close(server, server->handed_over ? "handed over to another worker"
							 : "given back for another worker's waiting clients");
		return;
	}
	/* Lookups first: a login is blocked on them, and they are short. */
	struct list_node *a = list_first(&pool->auth_waiters);
	if (a) {
		struct client_login *login = container_of(a, struct client_login, wait_node);
		list_remove(&pool->auth_waiters, a);
		login->auth_server = server;
		server_run_auth_query(server, login->client);
		return;
	}
	struct list_node *q = list_first(&pool->query_waiters);
	if (q) {
		struct pool_query_waiter *w = container_of(q, struct pool_query_waiter, node);
		list_remove(&pool->query_waiters, q);
		w->pool = NULL;
		w->run(w, server);
		return;
	}
	if (!list_empty(&pool->welcome_clients) && kind_claims_server(pool)) {
		/* First in line, a replication client needs this server's room for one of its own. */
		server_close(server, "evicted for pool_size");
		return;
	}
	struct client *waiter = first_waiter_taking(pool, server);
	if (waiter) {
		link_pair(waiter, server);
		return;
	}
	server->last_used = now_usec();
	server_set_state(server, SV_IDLE);
}

void pool_release_server(struct server *server)
{
	struct pool *pool = server->pool;

	if (server->replication) {	/* never pooled: it goes with its client */
		if (server->link)
			server_unlink(server);
		server_close(server, "replication client disconnected");
		return;
	}
	if (server->internal == SV_INTERNAL_LEARN) {
		/* Its client left while its session was learned: back here once learned (server_learn_session). */
		struct client *client = server->link;
		if (client && client->nb.pkt_remaining && client->nb.pkt_forward)
			server->dirty = true;	/* half a message of its next transaction went behind the learn */
		server_unlink(server);
		server_set_state(server, SV_USED);
		return;
	}
	if (server->sets_learn)	/* released unlearned: what its client changed is reset for the next */
		relay_call(sets_learn_dropped, server);
	/* Judged while still linked: a client half-way through a message makes it unclean. */
	bool clean = server_is_clean(server);
	bool drain = !clean && !server->dirty && server_may_drain(server);
	if (clean && server->link && relay_balance_enabled(pool))
		relay_call(balance_released, server->link, server);	/* may set position_for */
	if (server->link)
		server_unlink(server);
	if (drain) {
		server_finish_owed(server);	/* back here once its answers are in */
		return;
	}
	if (!clean)
		server->dirty = true;	/* stays so even if held for a cancel first */
	if (server->cancels_in_flight > 0) {
		/* Never hand on a server a cancel may still hit; cancel completion releases it again. */
		server_set_state(server, SV_USED);
		return;
	}
	if (server->close_needed) {
		server_close(server, "obsolete connection");
		return;
	}
	if (server->cancel_expired) {	/* a cancel we gave up on could still reach it */
		server_close(server, "cancel_wait_timeout");
		return;
	}
	if (db_paused(pool->db) && !server->dirty && server_is_clean(server)) {
		server_close(server, pool_pause_reason());
		return;
	}
	if (server->dirty || !server_is_clean(server)) {
		server_close(server, "client disconnected while the server was not idle");
		return;
	}
	if (server->claim) {	/* a feature's own from now on (server.h), still counted here */
		server_adopt(server);
		pool_after_change(pool);	/* its waiters may need another server, if there is room */
		return;
	}
	if (server->position_for) {	/* the read balancer's question, while its client goes on (balance_fresh.h) */
		const char *sql = relay_hooks.balance_position_sql;
		server_set_state(server, SV_TESTED);
		server_run_internal(server, SV_INTERNAL_POSITION, sql, (uint32_t)strlen(sql));
		return;
	}
	/* server_lifetime = 0: each server serves once (as PgBouncer). */
	usec_t lifetime = pool_server_lifetime(pool);
	if (now_usec() - server->connect_time >= lifetime) {
		server_close(server, "server lifetime over");
		return;
	}
	if (server->release_sql) {	/* a feature's state on it (LISTENs) goes before anyone else's turn */
		const char *sql = server->release_sql;
		server->release_sql = NULL;
		server_set_state(server, SV_TESTED);
		server_run_internal(server, SV_INTERNAL_UNDO, sql, (uint32_t)strlen(sql));
		return;
	}
	int mode = pool_effective_mode(pool);
	const char *reset = pgv.cfg->server_reset_query;
	if ((mode == POOL_MODE_SESSION || pgv.cfg->server_reset_query_always) && reset[0]) {
		server_set_state(server, SV_TESTED);
		server_run_internal(server, SV_INTERNAL_RESET, reset, (uint32_t)strlen(reset));
		return;
	}
	pool_server_ready(server);
}

/* ---------------------------------------------------------------- login */

void pool_learn_welcome(struct pool *pool, const struct welcome_param *params, int count)
{
	pool->welcome = xcalloc((size_t)count + 1, sizeof(*pool->welcome));
	for (int i = 0; i < count; i++) {
		pool->welcome[i].name = xstrdup(params[i].name);
		pool->welcome[i].value = xstrdup(params[i].value);
		pool->welcome[i].var_idx = varcache_index(params[i].name);
		varcache_set_by_name(&pool->welcome_vars, params[i].name, params[i].value);
	}
	pool->welcome_count = count;
	pool->welcome_ready = true;
	list_for_each_safe(pos, tmp, &pool->welcome_clients) {
		struct client *client = container_of(pos, struct client, node);
		if (!client_repl(client))	/* replication logins wait for their own server */
			client_finish_login(client);
	}
}

/* A lookup was queued: an idle server answers it now (take_idle_server may start checks instead), else one opens. */
static void serve_lookups(struct pool *pool)
{
	struct server *server = take_idle_server(pool);
	if (server) {
		pool_server_ready(server);
		return;
	}
	pool_launch_servers(pool);
}

void pool_queue_auth_query(struct pool *pool, struct client *client)
{
	struct client_login *login = client->login;
	login->client = client;
	login->auth_pool = pool;
	list_append(&pool->auth_waiters, &login->wait_node);
	serve_lookups(pool);
}

void pool_queue_query(struct pool *pool, struct pool_query_waiter *w)
{
	if (fast_failing(pool)) {	/* as a client would be (pool_fast_fail) */
		char msg[400];
		fast_fail_message(pool, msg, sizeof(msg));
		w->pool = NULL;
		w->failed(w, pool->last_error_sqlstate[0] ? pool->last_error_sqlstate : "08P01", msg);
		return;
	}
	w->pool = pool;
	list_append(&pool->query_waiters, &w->node);
	serve_lookups(pool);
}

void pool_cancel_query(struct pool_query_waiter *w)
{
	if (w->pool)
		list_remove(&w->pool->query_waiters, &w->node);
	w->pool = NULL;
}

/* The pool cannot give its query waiters a server: each hears why, once. */
static void fail_query_waiters(struct pool *pool, const char *sqlstate, const char *message)
{
	struct list_node *n;
	while ((n = list_first(&pool->query_waiters))) {
		struct pool_query_waiter *w = container_of(n, struct pool_query_waiter, node);
		list_remove(&pool->query_waiters, n);
		w->pool = NULL;
		w->failed(w, sqlstate, message);
	}
}

void pool_cancel_auth_query(struct client *client)
{
	struct client_login *login = client_login_state(client);
	if (!login)
		return;
	if (login->auth_pool && list_node_linked(&login->wait_node))
		list_remove(&login->auth_pool->auth_waiters, &login->wait_node);
	if (login->auth_server)
		login->auth_server->auth_client = NULL;	/* its answer goes nowhere */
	login->auth_pool = NULL;
	login->auth_server = NULL;
}

void pool_use_looked_up_secret(struct pool *pool, const char *user, const struct auth_secret *secret)
{
	/* Only for the pool of that very user, and never over a password from the config. */
	if (strcmp(pool->user, user) != 0 || pool->db->cfg->password[0])
		return;
	if (secret->type != SECRET_PLAIN && secret->type != SECRET_MD5)
		return;	/* SCRAM: the keys from the client's proof do it (pass-through) */
	free(pool->password);
	pool->password = xstrdup(secret->secret);
}

void pool_remember_scram_keys(struct pool *pool, const uint8_t client_key[32], const uint8_t server_key[32])
{
	memcpy(pool->scram_client_key, client_key, 32);
	memcpy(pool->scram_server_key, server_key, 32);
	pool->has_scram_keys = true;
}

void pool_client_logged_in(struct client *client)
{
	struct pool *pool = client->pool;
	if (pool->db->is_fake) {
		/* Only now, to someone who proved who they are. */
		char msg[300];
		if (pgv.cfg->log_connections)
			client_log(LOG_LEVEL_INFO, client, "login failed: db=%s user=%s", pool->db->name,
				   client_user_name(client));
		snprintf(msg, sizeof(msg), "no such database: %s", pool->db->name);
		client_close(client, "08P01", msg);
		return;
	}
	/* Authenticated: the user is real, its pool and database stay. */
	pool->provisional = false;
	pool->db->provisional = false;
	const struct client_kind_ops *ops = client_kind_ops(client->kind);
	if (ops && ops->check_access && !ops->check_access(client))
		return;
	if (pool->db->disabled) {	/* checked after authentication, as PgBouncer */
		char msg[200];
		snprintf(msg, sizeof(msg), "database \"%s\" is disabled", pool->db->name);
		client_close(client, "08P01", msg);
		return;
	}
	if (ops && ops->logged_in) {	/* a replication client waits for a server of its own */
		ops->logged_in(client);
		return;
	}
	if (pool->welcome_ready) {
		client_finish_login(client);
		return;
	}
	if (pool_fast_fail(pool, client))
		return;
	netbuf_pause(&client->nb);
	client_set_state(client, CL_WELCOME);
	pool_launch_servers(pool);
}

/*
 * A logged-in server that will serve the pool's clients again: not one
 * being retired (close_needed: RECONNECT, new settings), nor a replication
 * client's own. Servers still logging in do not count, as in PgBouncer.
 */
static bool pool_has_usable_server(const struct pool *pool)
{
	const struct list *lists[] = { &pool->idle_servers, &pool->active_servers, &pool->used_servers,
				       &pool->tested_servers };
	for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
		list_for_each(pos, lists[i]) {
			const struct server *server = container_of(pos, struct server, node);
			if (!server->close_needed && !server->replication)
				return true;
		}
	}
	return false;
}

void pool_server_login_failed(struct pool *pool, const char *sqlstate, const char *message)
{
	pool->last_login_failure = now_usec();
	metrics_count_server_connect_failure();
	strlcpy_s(pool->last_error, message, sizeof(pool->last_error));
	strlcpy_s(pool->last_error_sqlstate, sqlstate, sizeof(pool->last_error_sqlstate));
	standby_waiters_home(pool);
	/*
	 * The server's own error, to everyone who cannot go on without a new
	 * server: logins waiting for server parameters, logins of other pools
	 * waiting for auth_query here, and logged-in clients in the queue when
	 * no other server of the pool (the failed one is still counted) could
	 * serve them later.
	 */
	struct list_node *n;
	list_for_each_safe(pos, tmp, &pool->welcome_clients) {
		struct client *client = container_of(pos, struct client, node);
		if (!client_repl(client))	/* a replication login waits for its own server, not this one */
			client_close(client, sqlstate, message);
	}
	while ((n = list_first(&pool->auth_waiters)))
		client_close(container_of(n, struct client_login, wait_node)->client, sqlstate, message);
	fail_query_waiters(pool, sqlstate, message);
	if (!pool_has_usable_server(pool)) {
		while ((n = list_first(&pool->waiting_clients)))
			client_close(container_of(n, struct client, node), sqlstate, message);
	}
}

void pool_server_connect_failed(struct pool *pool)
{
	metrics_count_server_connect_failure();
	pool->last_login_failure = now_usec();	/* paces the next try (server_login_retry) */
	pool->last_error[0] = '\0';		/* nothing to fail clients with: they wait */
	standby_waiters_home(pool);
}

/* Server logins fail with an error and the pool has no server at all: who needs one fails at once. */
static bool fast_failing(const struct pool *pool)
{
	return pool->last_error[0] && pool_login_retry_pending(pool, now_usec()) && !pooled_server_count(pool);
}

/* The error pool_fast_fail gives, into msg. */
static void fast_fail_message(const struct pool *pool, char *msg, size_t size)
{
	snprintf(msg, size, "server login has been failing, cached error: %s (server_login_retry)", pool->last_error);
}

/*
 * As PgBouncer: while server logins fail with an error and the pool has no
 * server at all, a client that needs one is failed at once with that error
 * instead of queueing until server_login_retry. True if it was closed.
 */
static bool pool_fast_fail(struct pool *pool, struct client *client)
{
	if (!fast_failing(pool))
		return false;
	char msg[400];
	fast_fail_message(pool, msg, sizeof(msg));
	client_close(client, pool->last_error_sqlstate[0] ? pool->last_error_sqlstate : "08P01", msg);
	return true;
}

/* ---------------------------------------------------------------- admin */

struct db *pool_create_admin_db(const char *name)
{
	struct db_config *dc = config_db_new(name);
	free(dc->user);
	dc->user = xstrdup("pgbouncer");	/* one admin pool, user pgbouncer, as PgBouncer shows it */
	struct db *db = db_create(dc, name, false);
	config_db_free(dc);
	db->is_admin = true;
	pgv.admin_db = db;
	return db;
}

static void pool_set_admin_welcome(struct pool *pool)
{
	static const char *const params[][2] = {
		{ "server_version", "1.26.0/pgvalve-" PACKAGE_VERSION },
		{ "server_encoding", "UTF8" },
		{ "client_encoding", "UTF8" },
		{ "DateStyle", "ISO" },
		{ "TimeZone", "GMT" },
		{ "standard_conforming_strings", "on" },
		{ "is_superuser", "on" },
	};
	pool->welcome = xcalloc(ARRAY_SIZE(params), sizeof(*pool->welcome));
	for (size_t i = 0; i < ARRAY_SIZE(params); i++) {
		pool->welcome[i].name = xstrdup(params[i][0]);
		pool->welcome[i].value = xstrdup(params[i][1]);
		pool->welcome[i].var_idx = varcache_index(params[i][0]);
	}
	pool->welcome_count = (int)ARRAY_SIZE(params);
	pool->welcome_ready = true;
}

void pool_db_pause(struct db *db)
{
	list_for_each(ppos, &db->pools) {
		struct pool *pool = container_of(ppos, struct pool, node);
		pool_close_server_list(&pool->idle_servers, pool_pause_reason());
	}
}

void pool_db_resume(struct db *db)
{
	list_for_each(ppos, &db->pools) {
		struct pool *pool = container_of(ppos, struct pool, node);
		pool_after_change(pool);
	}
}

void pool_db_reconnect(struct db *db)
{
	if (!db->is_admin)
		db_retire_servers(db, "reconnect requested");
}

/* ---------------------------------------------------------------- teardown */

static void close_clients(struct list *l, const char *reason)
{
	list_for_each_safe(pos, tmp, l) {
		struct client *client = container_of(pos, struct client, node);
		client_close(client, "57P01", reason);
	}
}

void pool_close_all_connections(const char *reason)
{
	close_clients(&pgv.login_clients, reason);
	list_for_each(dpos, &pgv.databases) {
		struct db *db = container_of(dpos, struct db, node);
		list_for_each(ppos, &db->pools) {
			struct pool *pool = container_of(ppos, struct pool, node);
			close_clients(&pool->welcome_clients, reason);
			close_clients(&pool->waiting_clients, reason);
			close_clients(&pool->active_clients, reason);
			close_clients(&pool->idle_clients, reason);
			pool_close_server_list(&pool->active_servers, reason);
			pool_close_server_list(&pool->idle_servers, reason);
			pool_close_server_list(&pool->used_servers, reason);
			pool_close_server_list(&pool->tested_servers, reason);
			pool_close_server_list(&pool->login_servers, reason);
		}
	}
}

void pool_destroy(struct pool *pool)
{
	/* Logins of other pools waiting for a lookup here cannot go on. */
	struct list_node *n;
	while ((n = list_first(&pool->auth_waiters))) {
		struct client_login *login = container_of(n, struct client_login, wait_node);
		list_remove(&pool->auth_waiters, n);
		login->auth_pool = NULL;
		auth_query_answer(login->client, NULL, "the auth_user pool was removed");
	}
	fail_query_waiters(pool, "08006", "the pool was removed");
	list_remove(&pool->db->pools, &pool->node);
	pool_free(pool);
}

static void pool_free(struct pool *pool)
{
	/* Queued features' queries are theirs to free: they are just no longer queued here. */
	struct list_node *n;
	while ((n = list_first(&pool->query_waiters))) {
		list_remove(&pool->query_waiters, n);
		container_of(n, struct pool_query_waiter, node)->pool = NULL;
	}
	for (int i = 0; i < pool->welcome_count; i++) {
		free(pool->welcome[i].name);
		free(pool->welcome[i].value);
	}
	free(pool->welcome);
	varcache_unref(pool->welcome_vars);
	varcache_unref(pool->login_vars);
	varcache_accepted_free(&pool->accepted_vars);
	pool_user_unref(pool->ucount);
	free(pool->user);
	free(pool->password);
	free(pool);
}

void pool_free_all(void)
{
	list_for_each_safe(dpos, dtmp, &pgv.databases) {
		struct db *db = container_of(dpos, struct db, node);
		db_free(db);
	}
	free(pgv.cancel_table);
	pgv.cancel_table = NULL;
	pgv.cancel_table_size = pgv.cancel_count = 0;
	for (uint32_t i = 0; i < pgv.user_counts_size; i++) {
		while (pgv.user_counts[i]) {
			struct user_count *u = pgv.user_counts[i];
			pgv.user_counts[i] = u->next;
			free(u);
		}
	}
	free(pgv.user_counts);
	pgv.user_counts = NULL;
	pgv.user_counts_size = 0;
}

usec_t pool_max_wait(const struct pool *pool, usec_t now)
{
	struct list_node *first = list_first(&pool->waiting_clients);
	if (!first)
		first = list_first(&pool->welcome_clients);
	return first ? MAX(now - container_of(first, struct client, node)->request_time, 0) : 0;
}

void pool_count_cancels(const struct pool *pool, int *active_cancel, int *being_canceled)
{
	*active_cancel = *being_canceled = 0;
	list_for_each(pos, &pool->used_servers)
		if (container_of(pos, struct server, node)->cancels_in_flight)
			(*being_canceled)++;
	list_for_each(pos, &pool->active_servers)
		if (container_of(pos, struct server, node)->cancels_in_flight)
			(*active_cancel)++;
}
