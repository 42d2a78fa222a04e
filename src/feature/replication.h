/*
 * replication.h - replication connections (startup parameter
 * `replication=true|database`), as PgBouncer 1.23+ carries them.
 *
 * A replication client is not pooled. Once authenticated it waits (state
 * WELCOME, in its pool's welcome list) for a server connection of its own,
 * opened for it with the client's startup parameters (`options` verbatim
 * included) plus `replication`; that server counts against pool_size (an
 * idle server of the pool is closed to make room: "evicted for
 * pool_size"), serves only this client and closes with it. When the
 * server's login completes, the client gets that server's
 * ParameterStatus set and is linked to it; from then on every message is
 * relayed untouched both ways (the walsender speaks CopyBoth, which the
 * pooled path does not need to understand). A failed login of that
 * server fails this client alone, with the server's error; the pool's
 * other clients and its server_login_retry state are not touched.
 *
 * Owns: struct replication (per replication client) and the decision of
 * when its server may be opened. Must not forward data itself: netbuf.c
 * does, as for any linked pair.
 */
#ifndef PGVALVE_REPLICATION_H
#define PGVALVE_REPLICATION_H

#include "common.h"
#include "proto.h"

struct client;
struct server;
struct pool;

enum replication_type {
	REPLICATION_NONE,
	REPLICATION_LOGICAL,		/* replication=database */
	REPLICATION_PHYSICAL,		/* replication=true (on, yes, 1) */
};

/* A replication client's own data; NULL on ordinary clients. */
struct replication {
	enum replication_type type;
	struct server *server;		/* its server while that logs in; NULL once linked */
	uint32_t params_len;
	char params[];			/* startup parameters for its server: name\0value\0... */
};

/*
 * Parses the startup parameter as PostgreSQL does: "database", or a
 * boolean (true/false, on/off, yes/no, 1/0, and unique prefixes, any
 * case). False if the value is neither.
 */
bool replication_parse(const char *value, enum replication_type *type);
/* SHOW CLIENTS / SHOW SERVERS: "none", "logical", "physical". */
const char *replication_type_name(enum replication_type type);
/*
 * Keeps what the client's server must be sent: every startup parameter
 * but user, database, replication and _pq_ options, as given.
 */
struct replication *replication_new(enum replication_type type, const struct startup_params *sp);
/* Whether the client gave this startup parameter (the database's defaults give way to it). */
bool replication_has_param(const struct replication *repl, const char *name);
/* Appends the server's startup parameters (after user and database) to a startup packet being built. */
void replication_put_startup(const struct replication *repl, struct pktbuf *b);

/* The client authenticated: it waits for its own server, which opens when the pool has room. */
void replication_client_logged_in(struct client *client);
/* Opens servers for waiting replication clients of pool while its size allows (pool.c's launch). */
void replication_launch_servers(struct pool *pool);
/*
 * A server of pool came free: whether a replication client waiting for
 * room came before the first ordinary waiter (then the server is closed
 * to make that room, as PgBouncer serves its one queue in arrival order).
 */
bool replication_claims_server(const struct pool *pool);
/* The client's server finished its login: link the two and finish the client's login. */
void replication_server_ready(struct server *server);
/*
 * PostgreSQL refused the login of the client's server (sqlstate and
 * message: its error): the client is closed with it, as it would be
 * without pgvalve.
 */
void replication_server_failed(struct server *server, const char *sqlstate, const char *message);
/*
 * The client's server closed before its login ended for a reason of its
 * own (not reached, timed out, obsolete, paused): the client waits for the
 * next one, as ordinary clients wait on connect failures.
 */
void replication_server_lost(struct server *server, const char *reason);
/* The client is closing: its server, linked or still logging in, closes too. */
void replication_client_closing(struct client *client);

/*
 * Registers the replication client kind (client.h) at start-up: how the
 * core reaches everything above without naming this module.
 */
void replication_register(void);

#endif
