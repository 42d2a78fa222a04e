/*
 * instance.h - the process instance: the documented set of process
 * globals, and the few callbacks through which the connection core tells
 * the layers above it that something happened.
 *
 * struct instance holds the loop, the running config, the auth store, the
 * databases, the lists of connections that belong to no pool (logins,
 * closed ones waiting for the reaper, cancel connections) and the
 * cancel-key index. Everything else is reached from a client or server.
 *
 * Layering: this module sits below the core (client, server, pool, auth)
 * and calls nothing above util. The hooks are filled in at start-up by
 * the modules that own the behaviour (loop.c, peer.c; drain.c's when a
 * drain starts); an empty hook means "nothing to do", so unit tests that
 * link only the core need none.
 */
#ifndef PGVALVE_INSTANCE_H
#define PGVALVE_INSTANCE_H

#include "common.h"
#include "list.h"

struct event_base;
struct config;
struct auth_store;
struct hba;
struct ident_map;
struct user_count;
struct client;
struct db;
struct pool;
struct server;
struct cancel_request;

/* What the core reports upwards, without naming who listens. */
struct instance_hooks {
	/* A client connection closed (loop.c: a shutdown waiting for clients may end). */
	void (*client_gone)(void);
	/*
	 * A CancelRequest names no client of this process (peer.c: maybe a
	 * peer's). True if requester is held open while it is forwarded;
	 * false if the caller closes it now.
	 */
	bool (*forward_cancel)(struct client *requester, const struct cancel_request *req);
	/* A client is closing: drop any forwarded cancel it still holds (peer.c). */
	void (*client_closing)(struct client *client);
	/*
	 * A pooled client is between transactions: its server went back to
	 * the pool, or (session mode) answered ReadyForQuery 'I' with nothing
	 * more owed (drain.c, filled when a drain starts: a draining process
	 * closes it). Called deep in the core, in the middle of a release:
	 * the listener may only take note, never close a connection from here.
	 */
	void (*client_at_boundary)(void);
};

/* A server_take's answer: counted, or the limit that refused it. */
enum budget_answer { BUDGET_TAKEN = 0, BUDGET_POOL_FULL, BUDGET_DB_FULL, BUDGET_USER_FULL };

/*
 * Connection budgets the process shares with others of its instance
 * (shared_pool.c, workers = N > 1). NULL in pgv.budget: this process holds
 * the instance's connections alone and the pools' own counts decide.
 * A token names what a take counted, for its return; 0 = nothing.
 */
struct budget_ops {
	/*
	 * One more server of pool, if the instance's servers of the pool stay
	 * within pool_limit, of its database within db_limit, of its user
	 * within user_limit (0 = no limit); counted if BUDGET_TAKEN.
	 */
	enum budget_answer (*server_take)(const struct pool *pool, int pool_limit, int db_limit, int user_limit,
					  uint64_t *token);
	void (*server_return)(uint64_t token);
	/* The instance's counted servers of pool. */
	int (*server_count)(const struct pool *pool);
	/*
	 * The instance holds more servers of pool than limit (a reload lowered
	 * pool_size): how many of this process's `closable` servers to close,
	 * at most; 0 while another process is closing its own (each trim is
	 * claimed for a moment, so the processes never close more than the
	 * excess between them).
	 */
	int (*server_excess)(const struct pool *pool, int limit, int closable);
	/*
	 * Clients of pool wait and the instance's budget is used up (short_of:
	 * the limit server_take refused with): ask the others for a server of
	 * the pool, or for one of any pool of its database or user.
	 */
	void (*server_wanted)(const struct pool *pool, enum budget_answer short_of);
	/*
	 * A counted server is ready again (local_waiters: clients of its pool
	 * here want it): true if it is to close now, its budget held for
	 * another process whose clients wait (the budget may take its token,
	 * to return it once PostgreSQL has closed the connection). Called on
	 * every release: cheap when nobody waits.
	 */
	bool (*server_give_back)(struct server *server, bool local_waiters);
	/*
	 * A counted server is closing (what it had to send is queued, its
	 * socket about to close): the budget may take its token, to return it
	 * once PostgreSQL has closed the connection, so that a server opened
	 * with it never overlaps the old one in pg_stat_activity.
	 */
	void (*server_closing)(struct server *server);
	/*
	 * One more client of database db_name and user (limits as above;
	 * max_client for the instance): NULL if counted, else PgBouncer's
	 * message naming the limit.
	 */
	const char *(*client_take)(const char *db_name, const char *user, int max_client, int db_limit,
				   int user_limit, uint32_t *token);
	void (*client_return)(uint32_t token);	/* a client's token is 32 bits: struct client stays small */
};

struct instance {
	struct event_base *base;
	struct config *cfg;
	const char *config_path;
	struct auth_store *auth;
	struct hba *hba;		/* auth_hba_file, when auth_type = hba */
	struct ident_map *ident;	/* auth_ident_file, for map= */
	struct list databases;
	struct list login_clients;	/* clients before they belong to a pool */
	struct list dead_clients;	/* closed, freed by the loop's reaper */
	struct list dead_servers;
	struct list cancel_requests;	/* cancel connections in flight */
	struct db *admin_db;		/* the console's virtual database (pool_create_admin_db) */
	struct list peer_pools;		/* peer.c: cancel forwarding, one pool per peer id in use */
	struct user_count **user_counts;	/* hash table by name */
	uint32_t user_counts_size;
	uint32_t client_count;		/* every client socket, for max_client_conn */
	uint32_t server_count;
	uint64_t next_conn_id;
	uint64_t config_generation;	/* bumped when cfg changes; invalidates per-pool caches */
	bool log_to_stderr;		/* as started (-q, -d) */
	int cli_verbose;		/* -v count */
	bool shutting_down;
	bool paused_all;		/* PAUSE without a database name (or SIGUSR1) */
	/* SHUTDOWN_DRAIN: clients closed at their transaction boundaries (drain.h) */
	enum { SHUTDOWN_NONE, SHUTDOWN_WAIT_FOR_CLIENTS, SHUTDOWN_WAIT_FOR_SERVERS, SHUTDOWN_DRAIN } shutdown_mode;
	bool shutdown_signalled;	/* a SIGINT or SIGTERM began the shutdown (a second one exits at once) */
	/* cancel key index: open hash over client BackendKeyData */
	struct client **cancel_table;
	uint32_t cancel_table_size;
	uint32_t cancel_count;
	struct instance_hooks hooks;
	const struct budget_ops *budget;	/* NULL: the process alone (see struct budget_ops) */
};

extern struct instance pgv;

/* Lists exist before anything is put in them (start-up, before the config's objects). */
void instance_init(void);

static inline void instance_client_gone(void)
{
	if (pgv.hooks.client_gone)
		pgv.hooks.client_gone();
}

static inline void instance_client_at_boundary(void)
{
	if (pgv.hooks.client_at_boundary)
		pgv.hooks.client_at_boundary();
}

#endif
