/*
 * pool.h - databases, pools, and the process instance.
 *
 * A pool is keyed by (database, user) and owns the lists its clients and
 * servers sit in, one list per state. pool.c matches waiting clients to
 * idle servers (FIFO for clients, LIFO or round robin for servers),
 * decides when to open a new server connection, and takes servers back
 * when a client is done with them.
 *
 * The process globals they hang from are in instance.h.
 */
#ifndef PGVALVE_POOL_H
#define PGVALVE_POOL_H

#include "common.h"
#include "list.h"
#include "config.h"
#include "varcache.h"
#include "stats.h"
#include "metrics.h"
#include "instance.h"

#include <event2/event.h>
#include <sys/socket.h>

struct client;
struct server;
struct auth_store;
struct auth_secret;
struct notify_pool;

/* One ParameterStatus pair the pool learned from its first server. */
struct welcome_param {
	char *name;
	char *value;
	int var_idx;		/* varcache index of name, or -1 (set for pool welcomes) */
};

/* Connections per user name, across databases (max_user_connections and friends). */
struct user_count {
	struct user_count *next;	/* hash chain */
	int refs;			/* pools and clients holding it; freed at 0 */
	int servers;
	int clients;
	char name[];
};

struct balance_counts;
struct host_role;

struct db {
	struct list_node node;		/* instance.databases */
	char *name;
	struct db_config *cfg;		/* own copy (config_db_clone), replaced on reload */
	bool is_autodb;			/* made from the "*" entry */
	bool is_admin;			/* the virtual pgbouncer/pgvalve database */
	bool removed;			/* gone from the config: no new logins, closes when unused */
	bool paused;			/* PAUSE: no server is handed out, released ones close */
	bool disabled;			/* DISABLE: new clients are refused */
	bool provisional;		/* auto-database made by logins none of which has succeeded yet */
	bool is_fake;			/* a name nothing matched: logins authenticate, then fail (not listed) */
	/*
	 * Made by a login route (client.h), not by the file: a login reaches
	 * it only through that route, never by its name, and a reload leaves
	 * its settings alone (the route updates them).
	 */
	bool is_routed;
	struct list pools;
	struct stats_period stats;
	/* latency histograms for the metrics endpoint (metrics.h) */
	struct metrics_histogram query_hist, xact_hist, wait_hist;
	int server_count;
	int client_count;		/* clients that chose it, counted from the startup packet on */		/* all servers of all its pools */
	usec_t last_used;
	unsigned host_next;		/* host list entry for the next connection (load_balance_hosts) */
	int host_count;			/* entries of cfg->host, counted whenever cfg is set (db_set_config) */
	int console_waits;		/* console clients waiting on it (PAUSE db, WAIT_CLOSE db): it is kept */
	struct balance_counts *balance_counts;	/* the read balancer's, per host list entry (balance_fresh.h) */
	struct host_role **host_roles;	/* role routing's entry per host list entry (roles.c); reset with cfg */
	int balance_counts_len;
	uint64_t balance_retries;	/* statements a standby refused as writes, run again on the primary */
};

struct pool {
	struct list_node node;		/* db->pools */
	struct db *db;
	char *user;			/* the user servers log in as */
	struct user_count *ucount;	/* servers of this user, all pools */
	char *password;			/* server login secret: plain or md5..., "" if none */
	bool has_scram_keys;		/* ClientKey/ServerKey from a client's SCRAM proof (pass-through) */
	uint8_t scram_client_key[32];
	uint8_t scram_server_key[32];

	/* clients by state */
	struct list active_clients;	/* holding a server */
	struct list idle_clients;	/* logged in, no server; oldest idle first */
	struct list waiting_clients;	/* FIFO: want a server */
	struct list welcome_clients;	/* authenticated, waiting for server parameters */
	struct list auth_waiters;	/* logins of other pools waiting for auth_query here (login->wait_node) */
	struct list query_waiters;	/* features' queries waiting for a server here (struct pool_query_waiter) */
	/* servers by state */
	struct list active_servers;	/* linked to a client */
	struct list idle_servers;	/* ready */
	struct list used_servers;	/* released, reset or check pending */
	struct list tested_servers;	/* running reset/check query */
	struct list login_servers;	/* connecting / authenticating */

	bool welcome_ready;
	/*
	 * Made by a login none of whose clients has authenticated yet: freed
	 * with the last of them (`logins`), so that failed or abandoned logins
	 * leave no pool, user or database behind.
	 */
	bool provisional;
	uint32_t logins;
	struct welcome_param *welcome;
	int welcome_count;
	struct varcache *welcome_vars;
	struct varcache_accepted accepted_vars;	/* login values a server took (client.c's login check) */
	struct varcache *login_vars;	/* the last login's values, shared by clients with the same (varcache_share_login) */

	int mode_cached;		/* pool_effective_mode, valid for config_generation */
	uint8_t relay_cached;		/* relay.h's enum relay_feature bits, valid with mode_cached */
	uint64_t mode_cached_gen;
	usec_t last_login_failure;	/* for server_login_retry */
	usec_t last_used;		/* a client last came or went (pool_idle_timeout) */
	char last_error[256];		/* the last server login error, sent to waiting clients */
	char last_error_sqlstate[6];
	/*
	 * A logged-in server was cut by the server side (terminated, a
	 * restart) since the last login that worked: logins that PostgreSQL
	 * cuts short meanwhile are its going down, not a refusal (server.c).
	 */
	bool servers_lost;
	struct notify_pool *notify;	/* the pool's listener and its channels (notify.h); NULL if none */
	/*
	 * The read balancer's standby pool of its database and user
	 * (balance.h): its servers go to the list's standbys (role routing
	 * reads it as target_session_attrs=standby), and it has no clients of
	 * its own, only ones lent to it for a transaction. pool_get never
	 * returns it.
	 */
	bool standby_reads;
};


/* The standby pool (standby_reads) beside home, made if need be (the read balancer). */
struct pool *pool_standby_companion(struct pool *home);
/*
 * Moves a logged-in client to pool `to`, a pool of the same database and
 * user: lent (client->lent) to the standby pool for one transaction while
 * idle, and back when its server is released or none can be had. It keeps
 * its state, in its new pool's lists.
 */
void pool_lend_client(struct client *client, struct pool *to);
/*
 * For a client about to ask pool for a server (the read balancer: a
 * standby that has replayed far enough): the first idle server ready now
 * (not past server_check_delay) that fits goes to the front of the idle
 * list, so pool_request_server hands it out next. False if none fits, or
 * if clients wait already (they come first, with whatever server frees).
 */
bool pool_offer_idle_server(struct pool *pool, bool (*fits)(const struct server *server, void *arg), void *arg);

/* Builds databases from pgv.cfg (start-up). */
void pool_setup_databases(void);
/* Reload: brings databases and pools in line with the new pgv.cfg and pgv.auth. */
void pool_apply_config(void);
struct db *pool_find_db(const char *name);
/* Finds a database, or makes one from the "*" entry. NULL if neither. */
struct db *pool_find_or_autodb(const char *name);
/*
 * A database a login route made from its own data (tenant.h): is_routed,
 * taking a copy of cfg. Kept until the route drops it (pool_drop_idle_routed_db)
 * or the process ends.
 */
struct db *pool_add_routed_db(const struct db_config *cfg, const char *name);
/* Its route's new settings: servers whose connection settings changed are replaced (as on reload). */
void pool_update_routed_db(struct db *db, const struct db_config *cfg);
/*
 * autodb_idle_timeout for a routed database, asked by its route: freed
 * (true; its pointer is then dead) once it had no client, server or
 * console waiting for that long, as an auto-database is.
 */
bool pool_drop_idle_routed_db(struct db *db, usec_t now);
struct pool *pool_get(struct db *db, const char *client_user);
/*
 * A login chose its database and user: the pool, made provisional if it
 * is new (and the database too if the login made it from "*"), until a
 * client of it authenticates (pool_client_logged_in).
 */
struct pool *pool_get_for_login(struct db *db, const char *client_user, bool db_is_new);
/*
 * A stand-in for a database name nothing matches, as PgBouncer: the login
 * authenticates first and only then hears "no such database", which tells
 * an unauthenticated client nothing. Not in pgv.databases; freed with its
 * last login.
 */
struct db *pool_fake_db(const char *name);
/*
 * A client left before authenticating: provisional objects it alone held
 * are freed. True if its pool was (client->pool must not be used then).
 */
bool pool_login_abandoned(struct client *client);

int pool_effective_size(const struct pool *pool);
/* The most servers pool can ever have: pool_size, max_db_connections, max_user_connections (no reserve). */
int pool_server_capacity(const struct pool *pool);
/* min_pool_size for this pool (database or global), capped at its size. */
int pool_min_size(const struct pool *pool);
/* server_lifetime for this pool's servers (database or global); 0 = none. */
usec_t pool_server_lifetime(const struct pool *pool);
/* A login failed less than server_login_retry ago: open no server yet. */
bool pool_login_retry_pending(const struct pool *pool, usec_t now);
/*
 * A database with a forced user and min_pool_size: its one pool exists
 * before any client comes, so min_pool_size is kept from the start (janitor).
 */
void pool_keep_forced_user_pool(struct db *db);
/* Opens servers in the background up to min_pool_size (janitor). */
void pool_keep_min_size(struct pool *pool);
/* pool_idle_timeout: frees pools of db with no clients or servers for that long (janitor). */
void pool_drop_idle_pools(struct db *db, usec_t now);
/*
 * Every server connection is replaced: idle ones close now (reason), the
 * others when released ("obsolete connection"). For new server TLS settings.
 */
void pool_retire_all_servers(const char *reason);
/* Whether two configurations differ in a setting of TLS to servers. */
bool pool_server_tls_changed(const struct config *a, const struct config *b);
/* Closes every client (logins included) and server of db with reason, and frees its pools. */
void pool_close_db(struct db *db, const char *reason);
/* autodb_idle_timeout: frees an unused database made from "*" (janitor). */
void pool_drop_idle_autodb(struct db *db, usec_t now);
/* The connection counters of a user name, with a reference taken (made on first use). */
struct user_count *pool_user_ref(const char *name);
/* Drops a reference; the counters go when nothing holds them. */
void pool_user_unref(struct user_count *u);
/* Every user's counters: up to max into out; with out NULL, how many there are. */
size_t pool_user_count_list(const struct user_count **out, size_t max);
/*
 * May one more client of this database/user log in? NULL if yes, else
 * PgBouncer's "client connections exceeded (...)" message. With a shared
 * budget (instance.h) the instance's counts decide too, max_client_conn
 * included, and *budget_token is what the client holds there (returned
 * when it closes).
 */
const char *pool_client_limit_reached(const struct db *db, const char *user, uint32_t *budget_token);
int pool_effective_mode(const struct pool *pool);
/*
 * The relay features (relay.h) on for this pool, asked of each feature
 * once per config generation with the mode: the data path tests a bit per
 * message instead of calling every feature.
 */
static inline unsigned pool_relay_features(const struct pool *pool)
{
	if (pool->mode_cached_gen != pgv.config_generation)
		(void)pool_effective_mode(pool);
	return pool->relay_cached;
}
int pool_server_count(const struct pool *pool);
/* The instance's servers of pool: every worker's with a shared budget (instance.h), else pool_server_count. */
int pool_instance_server_count(const struct pool *pool);
/*
 * A replication client's own server (replication.c), counted in the
 * instance's shared budget like any server of the pool when there is one
 * (workers = N): 1 opened, 0 it could not start, -1 the instance's budget
 * is used up (other workers are asked for a server; the pool's next
 * change or the budget's tick tries again).
 */
int pool_open_replication_server(struct pool *pool, struct client *client);
/*
 * Janitor: the pool holds more servers than pool_size + reserve_pool_size
 * (a reload or SET lowered them): the excess closes, used servers first,
 * then idle ones, as PgBouncer's janitor does; linked ones at a later
 * pass, once they are back in the pool. With workers = N, the instance's count
 * decides and the workers close the excess between them.
 */
void pool_trim_excess(struct pool *pool);

/*
 * The client has a message for a server. Links an idle server now, or
 * queues the client (and opens a server if the pool may). Returns true if
 * the client is linked on return. During SHUTDOWN WAIT_FOR_SERVERS the
 * client is closed instead ("server shutting down").
 */
bool pool_request_server(struct client *client);
/* A client was authenticated: finish login now or wait for server parameters. */
void pool_client_logged_in(struct client *client);
/* Server finished login or a reset: hand it to a waiting client or park it. */
void pool_server_ready(struct server *server);
/* Client is done with its server (end of transaction, statement, or session). */
void pool_release_server(struct server *server);
/* Idle servers past server_check_delay: pool_check.h. */
/*
 * A server login failed with an error: the pool's waiting clients get it,
 * and new ones while server_login_retry runs (PgBouncer's "cached error").
 */
void pool_server_login_failed(struct pool *pool, const char *sqlstate, const char *message);
/* A server could not be reached (connect, DNS, TLS): no retry before server_login_retry; clients wait. */
void pool_server_connect_failed(struct pool *pool);
/*
 * Whether one more server of pool fits max_db_connections and
 * max_user_connections, closing another pool's idle server to make room.
 */
bool pool_may_open_server(struct pool *pool);
/* Opens new servers if clients are waiting and limits allow. */
void pool_launch_servers(struct pool *pool);
/* Called after a server or client left, to keep things moving. */
void pool_after_change(struct pool *pool);

/*
 * The pool's welcome (what a login is told) from a server's ParameterStatus
 * pairs: its first server's here, or with workers = N another worker's
 * (shared_pool.h); the logins waiting for it go on.
 */
void pool_learn_welcome(struct pool *pool, const struct welcome_param *params, int count);
/* A login needs its secret looked up with auth_query on a server of this (auth_user) pool. */
void pool_queue_auth_query(struct pool *pool, struct client *client);
/* The login gave up (closed) while waiting for or running its lookup. */
void pool_cancel_auth_query(struct client *client);
/*
 * A feature's query that needs a server of a pool (tenant lookups):
 * queued like an auth_query, given the first server the pool has ready
 * (one is opened if need be). run() gets the server, out of the queue,
 * and sends its query (server_run_feature_query_params); failed() hears
 * that the pool gave up (a server login failed, the pool was removed), at
 * once from pool_queue_query while its server logins fail with an error
 * (as a client's request would, PgBouncer's cached error).
 * The waiter is the feature's memory; pool is set while it is queued.
 */
struct pool_query_waiter {
	struct list_node node;
	struct pool *pool;
	void (*run)(struct pool_query_waiter *w, struct server *server);
	void (*failed)(struct pool_query_waiter *w, const char *sqlstate, const char *message);
};
void pool_queue_query(struct pool *pool, struct pool_query_waiter *w);
/* Takes a queued waiter out of its pool's queue (nothing if it is not queued). */
void pool_cancel_query(struct pool_query_waiter *w);
/* Lookups (auth_query logins, features' queries) waiting for a server of pool. */
static inline uint32_t pool_lookups_waiting(const struct pool *pool)
{
	return pool->auth_waiters.count + pool->query_waiters.count;
}
/* An auth_query secret (plain or md5) also serves this pool's server logins, as in PgBouncer. */
void pool_use_looked_up_secret(struct pool *pool, const char *user, const struct auth_secret *secret);
/* Keeps keys recovered from a client's SCRAM proof for this pool's server logins. */
void pool_remember_scram_keys(struct pool *pool, const uint8_t client_key[32], const uint8_t server_key[32]);

/* Cancel-key index of clients. Lookups ignore the key's TTL bits (peer.h). */
void cancel_index_add(struct client *client);
void cancel_index_remove(struct client *client);
struct client *cancel_index_find(uint32_t pid, uint32_t key);

/* Closes every client and server (shutdown). */
void pool_close_all_connections(const char *reason);
void pool_free_all(void);

/* Whether db is paused, by PAUSE db, KILL db or a global PAUSE. */
bool db_paused(const struct db *db);
/* Why a paused pool's server closes, for its log line: "pause mode", or "shutting down" in a shutdown. */
const char *pool_pause_reason(void);
/* SHOW POOLS' maxwait: how long the first client in line has waited (0 if none). */
usec_t pool_max_wait(const struct pool *pool, usec_t now);
/* SHOW POOLS' cancel columns: active servers with a cancel in flight, and used ones waiting for theirs. */
void pool_count_cancels(const struct pool *pool, int *active_cancel, int *being_canceled);
/* Frees a pool with no clients or servers left (KILL). */
void pool_destroy(struct pool *pool);

/* The admin console's database: no servers, fixed welcome parameters. */
struct db *pool_create_admin_db(const char *name);
/* PAUSE: close idle servers now; busy ones close when released. */
void pool_db_pause(struct db *db);
/* RESUME: waiting clients get servers again. */
void pool_db_resume(struct db *db);
/* RECONNECT: replace every server once it is released. */
void pool_db_reconnect(struct db *db);
/*
 * DNS change hook: servers that reached host name `name` at an address its
 * new answer no longer lists close (idle ones now, busy ones when released).
 */
void pool_dns_changed(const char *name);

#endif
