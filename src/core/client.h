/*
 * client.h - a client connection: login, then the message loop.
 *
 * State diagram (client_set_state is the only place that changes it, and
 * moves the client between lists):
 *
 *   LOGIN --auth ok--> WELCOME --pool knows server params--> IDLE
 *     |                   |                                   |  ^
 *     |                   |            needs a server, none free |  server released
 *     |                   |                                   v  |
 *     |                   |                WAITING --got one--> ACTIVE
 *     |                   |           (IDLE goes straight to ACTIVE when a server is free)
 *     |                   |
 *     +-------------------+--a startup value not known good--> PARAMS_WAITING
 *                                                                 | got a server
 *                                                                 v   (or straight here if one is free)
 *        CLOSED (FATAL, PostgreSQL's error) <--value refused-- PARAMS_CHECK
 *        IDLE (ACTIVE, keeping the server, in session mode) <--taken--+
 *        PARAMS_WAITING / PARAMS_CHECK on another server <--server failed--+
 *   WELCOME --replication client: its own server logged in--> ACTIVE (until either closes)
 *
 *   any state --error, Terminate, EOF, timeout--> CLOSED
 *
 * PARAMS_WAITING and PARAMS_CHECK are a login whose startup parameters
 * (startup packet, options -c) hold a value no server of the pool is known
 * to accept: a server tries them before ReadyForQuery, so that a value
 * PostgreSQL refuses fails the login as it would without pgvalve. Such a
 * login has had AuthenticationOk, waits in the pool's queue like a query
 * (query_wait_timeout applies) and sits in the waiting and active lists.
 *
 * IDLE clients sit in their pool's list in the order they went idle, so
 * client_idle_timeout only ever looks at the head of the list.
 */
#ifndef PGVALVE_CLIENT_H
#define PGVALVE_CLIENT_H

#include "common.h"
#include "netbuf.h"
#include "list.h"
#include "varcache.h"
#include "auth_file.h"
#include "scram.h"

#include <netinet/in.h>
#include <sys/un.h>

enum client_state {
	CL_LOGIN,
	CL_WELCOME,
	CL_IDLE,
	CL_ACTIVE,
	CL_WAITING,
	CL_PARAMS_WAITING,	/* a login queued for a server to try its startup parameters */
	CL_PARAMS_CHECK,	/* a login whose linked server is taking its startup parameters */
	CL_CLOSED,
};

/*
 * Where a TCP client connected from: what SHOW CLIENTS, hba rules and log
 * lines use, in 18 bytes rather than a 28-byte sockaddr_in6 (an IPv6
 * address's flow label and scope id are not kept). client_sockaddr()
 * gives it back as a sockaddr.
 */
struct client_addr {
	uint8_t ip[16];			/* IPv4: the first 4 bytes */
	uint16_t port;			/* host order */
};

struct client;
struct welcome_param;
struct replication;
struct startup_params;
struct pktbuf;
struct pkt;
struct server;
struct pool;
struct cancel_request;
struct db;

/*
 * Client kinds. A login is pooled unless a kind registered at start-up
 * claims it: the admin console (admin.c) its database name, replication
 * connections (replication.c) the startup parameter "replication", a
 * sharded database (shard.c) its database name. The
 * core asks a kind's table at the few points where the kind behaves
 * differently and never names the module behind it; a NULL slot means
 * "as a pooled client".
 */
enum client_kind {
	CLIENT_POOLED,
	CLIENT_SHARDED,		/* claims first: a sharded database's logins, replication ones too */
	CLIENT_REPLICATION,	/* claims before the console: it must refuse a replication login to the console */
	CLIENT_CONSOLE,
	CLIENT_KINDS,
};

struct client_kind_ops {
	/*
	 * The startup packet was read and checked: 1 if this login is of the
	 * kind (set up for it), 0 if not, -1 if the client was closed.
	 */
	int (*claim)(struct client *client, const struct startup_params *sp, const char *dbname);
	/* Counted in its pool, before authentication: false if it was closed. */
	bool (*check_login)(struct client *client, const char *user);
	/* Authenticated: false if it was refused (and closed). */
	bool (*check_access)(struct client *client);
	/* Authenticated and allowed: takes over the rest of the login. */
	void (*logged_in)(struct client *client);
	/* A logged-in client's message (Query or extended protocol): as client.c's handler returns. */
	bool (*data_packet)(struct client *client, const struct pkt *pkt);
	/* A CancelRequest names this client. */
	void (*cancel)(struct client *target);
	/* The client is closing: drop what the kind holds for it. */
	void (*closing)(struct client *client);

	/* A server of the client's own (it is never pooled): */
	bool (*gives_startup_param)(const struct client *client, const char *name);	/* overrides a database default */
	void (*put_startup)(const struct client *client, struct pktbuf *b);	/* more startup parameters */
	void (*own_server_ready)(struct server *server);	/* logged in */
	void (*own_server_failed)(struct server *server, const char *sqlstate, const char *message);
	void (*own_server_lost)(struct server *server, const char *reason);	/* closed before it logged in */

	/* The pool's part: */
	void (*launch_servers)(struct pool *pool);	/* open the kind's own servers where there is room */
	/* A freed server must close to make that room: asked only while the pool has clients in WELCOME. */
	bool (*claims_server)(const struct pool *pool);
};

/* Start-up: the module behind a kind fills its table once. */
void client_register_kind(enum client_kind kind, const struct client_kind_ops *ops);
/* The registered tables, read-only after start-up (read inline: the data path asks per message). */
extern const struct client_kind_ops *client_kinds[CLIENT_KINDS];

/* A kind's table (NULL if nothing registered it). */
static inline const struct client_kind_ops *client_kind_ops(enum client_kind kind)
{
	return client_kinds[kind];
}

/*
 * A login route: a feature that picks a pooled login's database from what
 * the client sent (tenant.c: a tenant id in the user name, the options or
 * the TLS server name) instead of by the database name. At most one,
 * registered at start-up; NULL slots or none at all: logins go by name.
 */
struct login_route_ops {
	/*
	 * The startup packet of a pooled login was read: 1 if the route takes
	 * the login (it may rewrite login->user, sets login->route, and may
	 * hand back in *options, malloc'ed, the options string without its own
	 * words), 0 if not, -1 if the client was closed.
	 */
	int (*route)(struct client *client, const struct startup_params *sp, char **options);
	/*
	 * A routed login, its startup parameters taken: its database now, or
	 * NULL, the route holding it (client_route_done later, or already
	 * from inside resolve) or having closed it.
	 */
	struct db *(*resolve)(struct client *client);
	/* A routed login closes before the route gave its database: drop login->route. */
	void (*closing)(struct client *client);
};

void client_register_route(const struct login_route_ops *ops);
/* The route found the database of a login it held: the login goes on (admission, authentication). */
void client_route_done(struct client *client, struct db *db);

/* Data needed only while logging in; freed once the client is ACTIVE. */
struct client_login {
	char user[AUTH_NAME_MAX];
	char dbname[AUTH_NAME_MAX];
	uint8_t md5_salt[4];
	enum {
		LOGIN_STARTUP,		/* expecting StartupMessage / SSLRequest / CancelRequest */
		LOGIN_PASSWORD,		/* expecting PasswordMessage */
		LOGIN_SASL_INITIAL,	/* expecting SASLInitialResponse */
		LOGIN_SASL_RESPONSE,	/* expecting SASLResponse */
		LOGIN_GSS,		/* expecting GSSResponse (a Kerberos token) */
		LOGIN_ROUTE,		/* waiting for the login route to pick its database (a tenant lookup) */
		LOGIN_AUTH_QUERY,	/* waiting for auth_query to return the secret */
		LOGIN_LDAP,		/* waiting for the directory to check the password (ldap_auth.h) */
		LOGIN_DONE,
	} phase;
	int auth_method;		/* enum auth_type actually used */
	bool fake_auth;			/* unknown user: fail after the password, revealing nothing */
	bool user_known;		/* in auth_file or found by auth_query, even without a usable password */
	struct auth_secret stored;	/* from auth_file or auth_query; type SECRET_NONE if none */
	char hba_map[64];		/* map= of the matching auth_hba_file line */
	struct scram_server *scram;	/* during a SCRAM exchange */
	struct gss_auth *gss;		/* an hba gss line's exchange (gss_auth.h) */
	/* auth_query: waiting in auth_pool's queue, then answered by a server */
	struct list_node wait_node;
	struct client *client;
	struct pool *auth_pool;
	struct server *auth_server;
	bool secret_from_scram;		/* the exchange used a stored SCRAM secret (pass-through keys) */
	struct peer_cancel_group *peer_cancel;	/* a cancel request (never logs in) held while peer.c forwards it */
	/* AuthenticationSASLFinal, sent in one write with AuthenticationOk (client_finish_login) */
	uint8_t sasl_final[SCRAM_MSG_MAX + 16];
	uint32_t sasl_final_len;
	bool auth_ok_sent;		/* AuthenticationOk went out before a check of its parameters */
	uint8_t proto_minor;		/* the protocol agreed: 3.0 or 3.2 (long cancel keys) */
	const char *replication_word;	/* "no", "database" or "yes", for the login attempt's log line */
	void *route;			/* the login route's state until it picks the database (NULL: not routed) */
	/*
	 * The user name as the startup packet gave it when a login route took
	 * a tenant suffix off it (malloc'ed; NULL if user is that name): what
	 * the client salts an md5 response with. A pointer, not an array: the
	 * login state, cleared whole at its end, stays as small as unrouted.
	 */
	char *startup_user;
	/* auth_type ldap: the hba line's options, the check under way, the password it checks */
	char *ldap_options;
	struct ldap_auth_req *ldap;
	char *ldap_password;
};

/*
 * Tens of thousands of idle clients each carry one (issue 19 counts the
 * bytes: keep it at 320 or under, one glibc chunk of 336): what only a
 * login, a console or a busy socket needs lives elsewhere (client_login,
 * admin.c's waits, netbuf's side structure), flags are bits.
 */
struct client {
	struct netbuf nb;		/* first: handlers get &client->nb */
	struct list_node node;		/* the list of its state */
	struct pool *pool;
	struct server *link;
	struct user_count *ucount;	/* its login user's counters, and its name once logged in */
	struct varcache *vars;		/* shared with other clients until it changes one */
	struct session_sets *sets;	/* its own session-level SETs (session_set.h) */
	/*
	 * By kind, one pointer: a replication connection never has tracked
	 * prepared statements, and sharing the slot keeps struct client within
	 * a 304-byte malloc chunk (doc/benchmarks.md, "What an idle client costs").
	 * Read repl through client_repl().
	 */
	union {
		struct prep_client *prep;	/* pooled: its named prepared statements (prepare_table.c) */
		struct replication *repl;	/* CLIENT_REPLICATION (replication.h), set when it claims the login */
	};
	/*
	 * One slot for two lifetimes: the login state until it is logged in
	 * (read it through client_login_state where the client may be logged
	 * in), then the cancel index's hash chain (send_welcome frees the
	 * login before the client enters the index). Saves a word of every
	 * idle client (doc/benchmarks.md, "What an idle client costs").
	 */
	union {
		struct client_login *login;
		struct client *cancel_next;
	};
	uint64_t id;
	usec_t connect_time;
	usec_t request_time;		/* when it last started waiting, was linked, or went idle */
	uint32_t vars_gen;		/* bumped whenever vars change */
	uint32_t budget_token;		/* counted in the instance's shared budget (instance.h), 0 = not */
	uint32_t cancel_pid;
	uint32_t cancel_key;
	struct client_addr addr;	/* TCP only */
	enum client_state state : 3;
	unsigned vars_apply_failures : 2;	/* servers that failed to take its parameters in a row */
	bool is_ipv6 : 1;		/* addr is IPv6 (else IPv4) */
	bool is_unix : 1;
	enum client_kind kind : 3;	/* set once, when the startup packet is read */
	bool logged_in : 1;
	bool in_cancel_index : 1;
	bool admin_superuser : 1;	/* user pgbouncer over the Unix socket, same OS user */
	bool shown_as_admin_user : 1;	/* auth_type any on the console: listed as user pgbouncer */
	bool admin_counted : 1;		/* its one query/transaction is in the admin stats */
	bool counted_in_db : 1;		/* in its db's client_count */
	bool quiet : 1;			/* a cancel-request connection: no disconnect log line */
	bool direct_tls : 1;		/* opened with TLS at once (ALPN required) */
	bool wait_notified : 1;		/* query_wait_notify sent for this wait */
	bool accepted_in_shutdown : 1;	/* came on the Unix socket after a shutdown began */
	bool served : 1;		/* has been given a server for a request at least once */
	bool cancel_long : 1;		/* protocol 3.2: its cancel key is the long one (cancel_key.h) */
	bool notify : 1;		/* notify.c holds state for it: channels, LISTENs pending, notifications queued */
	bool lent : 1;			/* in its pool's standby companion for this transaction (balance.h) */
	bool balance_state : 1;		/* the read balancer keeps positions for it (balance_fresh.h) */
	bool asks_standby : 1;		/* options -c target_session_attrs=read-only, standby or prefer-standby */
	bool held_for_ready : 1;	/* lent, paused at its next transaction until its server answered (balance.h) */
	bool sets_learn_always : 1;	/* prepared a statement that may change settings: each transaction is learned (session_set.h) */
	bool balance_control_only : 1;	/* its transaction on the primary ran only BEGIN/COMMIT so far (balance.h) */
	struct balance_retry *balance_retry;	/* a standby's statement kept until answered (balance.c) */
};

static inline bool client_is_console(const struct client *client)
{
	return client->kind == CLIENT_CONSOLE;
}

/* Its login state while it logs in; NULL once it is logged in. */
static inline struct client_login *client_login_state(const struct client *client)
{
	return client->logged_in ? NULL : client->login;
}

/* A replication connection's state; NULL for every other client. */
static inline struct replication *client_repl(const struct client *client)
{
	return client->kind == CLIENT_REPLICATION ? client->repl : NULL;
}

/* Takes an accepted socket. */
void client_accept(int fd, const struct sockaddr *addr, socklen_t addrlen, bool is_unix);
void client_set_state(struct client *client, enum client_state state);
/* Sends an error (if message != NULL) and closes. reason is logged as "closing because: ...". */
void client_close(struct client *client, const char *sqlstate, const char *reason);
/* Frees a closed client (from the loop's reaper). */
void client_free(struct client *client);
/*
 * Authenticated, the pool's server parameters known: sends
 * AuthenticationOk..ReadyForQuery with the pool's parameters and the
 * client's own, or first has a server try the client's startup values
 * when one of them is not known good (PARAMS_WAITING).
 */
void client_finish_login(struct client *client);
/*
 * A replication client's own server logged in (replication.c): the client
 * gets that server's parameters and txn_status in its ReadyForQuery, and
 * is ACTIVE on it from now on.
 */
void client_finish_replication_login(struct client *client, const struct welcome_param *params, int count,
				     char txn_status);
/* The state a client that asks for a server waits in: WAITING, or PARAMS_WAITING for a login. */
enum client_state client_waiting_state(const struct client *client);
/* The pool gave this client a server (called by pool.c): ACTIVE, or PARAMS_CHECK for a login. */
void client_linked(struct client *client);
/*
 * Its linked server has answered pgvalve's SETs of the client's parameters
 * without an error (called by server.c): the client's messages may run,
 * or, for a login in PARAMS_CHECK, the login is finished.
 */
void client_server_in_line(struct client *client);
/*
 * Its server went back to the pool: the client is idle (called by
 * server.c). A login in PARAMS_CHECK keeps its state: whoever unlinked it
 * queues it again or closes it.
 */
void client_unlinked(struct client *client);
/*
 * Its linked server sent a ReadyForQuery the client got (called by
 * server.c, after the server was maybe released): a client held_for_ready
 * reads on once no answer is owed.
 */
void client_ready_seen(struct client *client);
/* Whether nb is a client's (its handler is client.c's). */
bool client_owns_netbuf(const struct netbuf *nb);
/* Sends an ErrorResponse without closing. */
void client_send_error(struct client *client, const char *severity, const char *sqlstate, const char *msg);
/* Log prefix "C-0x...: db/user@addr:port". */
const char *client_prefix(const struct client *client, char *buf, size_t size);
const char *client_user_name(const struct client *client);
/* A TCP client's address and port as a sockaddr; false for a Unix socket. */
bool client_sockaddr(const struct client *client, struct sockaddr_storage *out);
const char *client_db_name(const struct client *client);

/*
 * Cancels: handles a CancelRequest that arrived on the connection
 * requester. Returns true if requester is held open while the request is
 * forwarded to a peer (peer.c closes it); false if the caller closes it now.
 */
bool client_handle_cancel(struct client *requester, const struct cancel_request *req);

#define client_log(level, c, fmt, ...) do { \
	if (log_enabled(level)) { char _pfx[256]; \
		log_msg(level, "%s " fmt, client_prefix((c), _pfx, sizeof(_pfx)), ##__VA_ARGS__); } \
	} while (0)

#endif
