/*
 * server.h - a server connection: connect, log in, serve one client at a
 * time, get reset or checked, close.
 *
 * State diagram (server_set_state changes it and moves the server between
 * its pool's lists):
 *
 *   LOOKUP --address known, connect started--> LOGIN
 *     ^                                          |
 *     +--connect failed, next host is a name-----+   (host lists, see server.c)
 *
 *   LOGIN --ReadyForQuery--> IDLE <--reset/check done-- TESTED
 *                            |  ^                          ^
 *                  pool links|  |released, clean           | reset/check query sent
 *                            v  |                          |
 *                          ACTIVE --released, needs reset--> USED
 *
 *   LOGIN --ReadyForQuery, role check or connect_query to run--> TESTED --done--> IDLE
 *         (a server whose role does not match target_session_attrs goes to CLOSED instead)
 *
 *   any state --error, EOF, lifetime--> CLOSED
 */
#ifndef PGVALVE_SERVER_H
#define PGVALVE_SERVER_H

#include "common.h"
#include "dns.h"
#include "netbuf.h"
#include "list.h"
#include "varcache.h"
#include "scram.h"
#include "session_set.h"

#include <sys/un.h>

struct pool;
struct db;
struct pkt;

enum server_state {
	SV_LOOKUP,		/* waiting for the DNS answer for its host name (no socket yet) */
	SV_LOGIN,
	SV_IDLE,
	SV_ACTIVE,
	SV_USED,
	SV_TESTED,
	SV_CLOSED,
};

/* What the server is doing for pgvalve itself, whose replies are not forwarded. */
enum server_internal {
	SV_INTERNAL_NONE,
	SV_INTERNAL_SET_PARAMS,		/* applying a client's parameters before its own messages */
	SV_INTERNAL_RESET,		/* server_reset_query */
	SV_INTERNAL_CHECK,		/* server_check_query */
	SV_INTERNAL_AUTH_QUERY,		/* auth_query for a login of another pool */
	SV_INTERNAL_CONNECT_QUERY,	/* the database's connect_query, once after login */
	SV_INTERNAL_ROLE_CHECK,		/* its role (server_hooks.logged_in's query), at login or while idle */
	SV_INTERNAL_UNDO,		/* release_sql: what a feature left on the server, undone before reuse */
	SV_INTERNAL_POSITION,		/* the read balancer's question after its client's transaction (position_for) */
	SV_INTERNAL_FEATURE,		/* a feature's own query on an idle server (server_run_feature_query) */
	SV_INTERNAL_LEARN,		/* session SETs: its session learned after its client's transaction (sets_learn) */
};

/* A feature's own query on a server: its rows (whole DataRows) and its end. */
struct server_query_ops {
	void (*row)(struct server *server, const struct pkt *pkt);
	/* answered (failed: an error came); the server then goes back to its pool (or closes) */
	void (*done)(struct server *server, bool failed);
	/* the RowDescription of a query run with server_run_feature_query_params (NULL: not read) */
	void (*columns)(struct server *server, const struct pkt *pkt);
};

/* What a server is, as far as target_session_attrs cares (roles.c sets it). */
enum server_role {
	SERVER_ROLE_UNKNOWN,
	SERVER_ROLE_PRIMARY,
	SERVER_ROLE_STANDBY,
};

/* Role routing's answer about a server that logged in or was checked (server_hooks). */
enum server_verdict {
	SERVER_ACCEPT,		/* it may serve its pool */
	SERVER_REJECT,		/* it does not match: the caller closes it, the pool opens another */
	SERVER_ASK,		/* run the query it gave first (SV_INTERNAL_ROLE_CHECK) */
};

struct server;
struct pkt;
struct balance_client;

/*
 * A server a feature holds for itself (notify.c's listener): one of the
 * pool's servers in use, claimed with server_claim(), that becomes the
 * feature's when its client releases it clean, instead of going back to
 * the pool; never pooled nor linked to a client again. It stays counted
 * where it was (its pool, database and user, the instance's shared
 * budget) and ACTIVE (shown as any other), so a feature's server never
 * takes the pool past its limits, and never waits for room. Every message
 * it sends then goes to packet() (which must consume it: netbuf_skip), and
 * lost() is told when it closes for any reason, from the claim on
 * (closed before its client let it go included). The owner closes it with
 * server_close().
 */
struct server_owner {
	void (*ready)(struct server *server);
	bool (*packet)(struct server *server, const struct pkt *pkt);	/* false: the server was closed */
	void (*lost)(struct server *server, const char *reason);
};

struct server {
	struct netbuf nb;		/* first: handlers get &server->nb */
	enum server_state state;
	enum server_internal internal;
	const struct server_query_ops *query_ops;	/* SV_INTERNAL_FEATURE's */
	struct list_node node;
	struct pool *pool;
	struct client *link;
	struct varcache *vars;
	uint64_t reported_mask;		/* tracked parameters this server reports in ParameterStatus */
	uint64_t synced_client_id;	/* vars were last brought in line with this client ... */
	uint32_t synced_vars_gen;	/* ... at this generation of its vars */
	struct session_sets *sets;	/* the client SETs it carries (session_set.h) */
	struct session_set_pending set_pending[SESSION_SET_PENDING_MAX];	/* SETs sent, replies not seen */
	int set_pending_count;
	/*
	 * Session SETs (session_set.h): its client's transaction may have
	 * changed the session in ways not followed from the text; before it
	 * goes back to the pool, still linked, its settings are learned.
	 */
	bool sets_learn;
	bool sets_opaque;		/* ... and changed it in ways learning cannot see whole: reset for others */
	struct session_learn *sets_learning;	/* custom names to ask */
	/*
	 * The learn whose query is on its way (its rows so far): the client's
	 * next transaction may follow it to the server at once, noting its
	 * own sets_learn and sets_learning meanwhile.
	 */
	struct session_learn *sets_learn_in_flight;
	struct welcome_param *params;	/* every ParameterStatus seen at login */
	int param_count;
	struct scram_client *scram;	/* during login only */
	uint32_t be_pid;
	uint32_t be_key;
	uint64_t id;
	usec_t connect_time;
	usec_t arrived;			/* when this process got it: its connect, or its take-over (handover.h) */
	usec_t last_used;
	int expect_ready;		/* ReadyForQuery still owed (one per Query/Sync/FunctionCall) */
	bool unsynced;			/* extended-protocol messages sent since the last Sync */
	bool ignore_till_sync;		/* an error in that batch: the server discards everything up to its Sync */
	bool finishing_owed;		/* USED: its client left, it finishes the answers owed (server_finish_owed) */
	usec_t owed_since;		/* ... since then (the janitor bounds it) */
	bool copy_in;			/* COPY FROM STDIN in progress: until the client's CopyDone or CopyFail */
	int syncs_after_execute;	/* Syncs since the client's last Execute (or Query): swallowed if it starts a COPY */
	char txn_status;		/* from the last ReadyForQuery: 'I', 'T', 'E' */
	uint8_t role;			/* enum server_role */
	bool read_only;			/* default_transaction_read_only (or in recovery) */
	bool logged_in;			/* past its login's own steps (role check, connect_query) */
	usec_t role_checked;		/* when its role was last learned */
	bool close_needed;		/* close instead of reuse when released */
	bool dirty;			/* released in an unknown protocol state: never reused */
	uint64_t budget_token;		/* counted in the instance's shared budget (instance.h), 0 = not */
	bool internal_failed;
	char internal_sqlstate[6];	/* the first error of an internal query */
	char internal_error[256];
	bool tls_requested;		/* SSLRequest sent, answer byte not seen yet */
	struct client *auth_client;	/* the login its auth_query answers (NULL if it left) */
	char *auth_result;		/* the secret column of the first row */
	bool auth_null;			/* no row, or a NULL secret */
	int cancels_in_flight;
	usec_t cancel_sent_at;		/* the latest cancel request for it */
	bool cancel_expired;		/* a cancel was given up: never reuse */
	usec_t query_start;		/* statistics: first client message since the last ReadyForQuery */
	usec_t last_active;		/* last ReadyForQuery (idle_transaction_timeout) */
	usec_t xact_start;		/* ... since the last ReadyForQuery with status I */
	union pgv_sockaddr addr;	/* AF_UNSPEC until known (LOOKUP) */
	socklen_t addrlen;
	/* Where it connects: one entry of the database's host list. */
	char *host;			/* the entry: a name, an address or a socket dir ("" = default dir) */
	int host_idx;			/* its index in the list */
	int hosts_left;			/* entries not tried yet for this connection */
	int addrs_left;			/* further addresses of a name to try before the next entry */
	struct dns_waiter dns;		/* LOOKUP: the pending lookup of host */
	/*
	 * Inside server_connect(): a failure there closes the server without
	 * launching another one (the caller stops its launch loop), or a pool
	 * with server_login_retry = 0 would recurse without end.
	 */
	bool connecting_sync;
	struct prep_server *prep;	/* its prepared statements (prepare_table.c) and awaited answers (prepare_answer.c) */
	/* A replication client's own server (replication.h): never pooled, closes with its client. */
	uint8_t replication;		/* enum replication_type; REPLICATION_NONE for pooled servers */
	struct client *repl_client;	/* that client while this server logs in; then it is link */
	const struct server_owner *owner;	/* a feature's own server (see struct server_owner); NULL if pooled */
	const struct server_owner *claim;	/* to become owner's once its client releases it (server_claim) */
	/*
	 * Set by a feature whose statements left state on the server that the
	 * next client must not see (notify.c: LISTENs): a static string run as
	 * an internal query when the server is released, before anyone reuses it.
	 */
	const char *release_sql;
	/*
	 * Set by the read balancer (relay_hooks.balance_released, balance.h)
	 * when its client's transaction on the primary ended: the WAL
	 * position is asked (SV_INTERNAL_POSITION) when the server is
	 * released clean, before release_sql; the answer goes to
	 * balance_position_row/_done, a server closed first to balance_server_free.
	 */
	struct balance_client *position_for;
	uint32_t position_seq;		/* ... and which of its client's questions it is */
	/* Its socket lives on in another worker (handover.h): closed here without a Terminate. */
	bool handed_over;
};

/*
 * A logged-in server another worker handed over (handover.h): its socket
 * and what went with it. Strings and arrays are the caller's (copied).
 */
struct server_transfer {
	int fd;
	uint32_t be_pid;
	uint32_t be_key;
	usec_t connect_time;
	uint8_t role;			/* enum server_role */
	bool read_only;
	usec_t role_checked;
	const char *host;		/* its entry of the database's host list */
	int host_idx;
	const union pgv_sockaddr *addr;
	socklen_t addrlen;
	uint64_t budget_token;		/* already counted in this process's column */
	const struct welcome_param *params;	/* every ParameterStatus seen at its login */
	int param_count;
	/* its tracked parameters now: name, value, and whether it reports it */
	const char *const *var_names;
	const char *const *var_values;
	const bool *var_reported;
	int var_count;
};

/*
 * What the core asks role routing (roles.c) about servers and host list
 * entries; filled once at start-up, an empty slot means "any host, no
 * check". The hot path never reaches them: only connects, logins and
 * ParameterStatus messages do.
 */
struct server_hooks {
	/* May a new connection of pool try entry idx of its database's host list now? */
	bool (*host_eligible)(const struct pool *pool, int idx);
	/* Entry idx could not be reached, or refused the login. */
	void (*host_failed)(const struct db *db, int idx);
	/* Logged in (before connect_query): accept, reject, or run *sql (SERVER_ASK). */
	enum server_verdict (*logged_in)(struct server *server, const char **sql);
	/* A DataRow of that query. */
	void (*check_row)(struct server *server, const struct pkt *pkt);
	/* That query was answered (failed: its error): accept or reject. */
	enum server_verdict (*check_done)(struct server *server, bool failed);
	/* A logged-in server reported a parameter (ParameterStatus); may close the server. */
	void (*param_reported)(struct server *server, const char *name, const char *value);
	/* How long pool waits after a failed connect or login before the next (0: server_login_retry). */
	usec_t (*login_retry)(const struct pool *pool);
};
extern struct server_hooks server_hooks;
/*
 * Set once a server's in_hot_standby differed from its pool's welcome, or
 * changed: from then on each link compares the client's value with its
 * server's (client.c tells the client), before that nothing is compared.
 */
extern bool server_hot_standby_mixed;

/* Entries of a database's host list ("a,b,c"): how many, and entry idx without blanks (malloced). */
int host_list_count(const char *list);
char *host_list_entry(const char *list, int idx);

/*
 * Opens a new server connection for pool (state LOOKUP or LOGIN). NULL if
 * it could not even start (no host of the list could be tried); the
 * pool's clients in login have been told why then.
 */
struct server *server_connect(struct pool *pool);
/*
 * server_connect for a server already counted in the instance's shared
 * budget under token (instance.h); server_close returns it, also when the
 * connect fails here.
 */
struct server *server_connect_counted(struct pool *pool, uint64_t budget_token);
/*
 * The same for a replication client: a server of its own, opened with its
 * startup parameters; budget_token as server_connect_counted's (0: none).
 */
struct server *server_connect_replication(struct pool *pool, struct client *client, uint64_t budget_token);
/* A feature's own server (struct server_owner): this one, once its client releases it. */
void server_claim(struct server *server, const struct server_owner *owner);
/* Drops the claim: the server goes back to the pool as any other. */
void server_unclaim(struct server *server);
/* pool_release_server: the claimed server, released clean, becomes its owner's (owner->ready). */
void server_adopt(struct server *server);
/*
 * Takes over a logged-in server of pool from another worker: counted as
 * any server of the pool, then ready at once (it serves a waiting client
 * or idles; pool_server_ready). The pool must have a welcome, or learns it
 * from this server.
 */
struct server *server_take_over(struct pool *pool, const struct server_transfer *t);
/* server_connect_timeout ran out (janitor): fail the login and close. */
void server_connect_timed_out(struct server *server);
void server_set_state(struct server *server, enum server_state state);
void server_close(struct server *server, const char *reason);
/* Closes the linked client (FATAL 08P01 reason), then the server. */
void server_close_with_client(struct server *server, const char *reason);
/* Frees a closed server (from the loop's reaper). */
void server_free(struct server *server);
/* cancel_wait_timeout: gives up cancel connections older than timeout. */
void server_expire_cancel_requests(usec_t now, usec_t timeout);
/* Closes cancel connections still open (shutdown). */
void server_cancel_requests_free_all(void);
/* Link/unlink with a client; set up forwarding both ways. */
void server_link(struct server *server, struct client *client);
void server_unlink(struct server *server);
/* Runs a query whose results pgvalve consumes (reset, check, SET). */
void server_run_internal(struct server *server, enum server_internal what, const char *sql, uint32_t sql_len);
/*
 * A feature's query (one simple Query) on an idle server, which is tested
 * (SV_TESTED) meanwhile: ops->row for each row, ops->done at its end, then
 * the server is ready for its pool again (closed if it left a transaction).
 */
void server_run_feature_query(struct server *server, const struct server_query_ops *ops, const char *sql);
/*
 * The same through the extended protocol: values (text) bound to $1..$n,
 * never spliced into sql, and the portal described (ops->columns).
 */
void server_run_feature_query_params(struct server *server, const struct server_query_ops *ops, const char *sql,
				     int nparams, const char *const *values);
/* Its client's transaction ended with server->sets_learn set: learn the session, still linked (relay.h). */
void server_learn_session(struct server *server);
/* Runs auth_query for client's user (extended protocol, the name as a parameter). */
void server_run_auth_query(struct server *server, struct client *client);
/* Brings the server's parameters in line with the client's; returns true if a query was sent. */
bool server_apply_client_vars(struct server *server, struct client *client);
/*
 * Whether a server being released unclean only owes answers to messages
 * its client sent (a Terminate in the middle of a pipeline), with no
 * COPY or half-sent message left: then server_finish_owed() can finish them.
 * Asked while the client is still linked.
 */
bool server_may_drain(const struct server *server);
/*
 * As PostgreSQL, which runs what a client sent before its Terminate: the
 * server (unlinked) finishes those answers, a Sync ending a batch left
 * open, then goes through pool_release_server() again. USED meanwhile.
 */
void server_finish_owed(struct server *server);
/* Called for each message a client forwards to it: keeps the ReadyForQuery accounting. */
void server_note_client_message(struct server *server, uint8_t type);
/* Whether the server is between transactions with nothing outstanding. */
bool server_is_clean(const struct server *server);
const char *server_prefix(const struct server *server, char *buf, size_t size);
/*
 * Sends a CancelRequest for whatever it runs, on a new connection. The
 * requester's connection (NULL: none) is closed only once PostgreSQL has
 * closed that one, as PostgreSQL itself closes a cancel connection after
 * signalling the backend: a client that waits for that EOF (libpq does)
 * must not send its next query before the cancel has landed, or the
 * cancel hits that query. False if no connection could be started.
 */
bool server_send_cancel(struct server *server, struct client *requester);
/* The requester of a cancel in flight went away first. */
void server_cancel_requester_gone(struct client *requester);

#define server_log(level, s, fmt, ...) do { \
	if (log_enabled(level)) { char _pfx[256]; \
		log_msg(level, "%s " fmt, server_prefix((s), _pfx, sizeof(_pfx)), ##__VA_ARGS__); } \
	} while (0)

#endif
