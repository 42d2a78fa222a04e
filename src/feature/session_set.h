/*
 * session_set.h - a client's own session-level SETs in transaction and
 * statement pooling (track_client_set, a pgvalve extension).
 *
 * PostgreSQL reports some parameters in ParameterStatus; varcache.h
 * carries those. A plain "SET statement_timeout = ..." by a client
 * changes a parameter it does not report: on a shared server it would
 * stay there for whichever client comes next, and be missing on the
 * client's next server. So:
 *
 *  - each simple Query that is one SET/RESET/DISCARD ALL statement is
 *    parsed (name only; the text is kept as written) when the client
 *    sends it; when its CommandComplete is SET/RESET (DISCARD ALL) and the
 *    server was outside a transaction block before and after, the client
 *    remembers it (RESET name forgets it, RESET ALL and DISCARD ALL
 *    forget everything);
 *  - the server remembers the same statements as what it carries;
 *  - when a server is lent to a client (server.c's apply), the difference
 *    is put right in the same round trip as the tracked parameters:
 *    "RESET name" for what the server carries and the client does not,
 *    the client's statement for what the server lacks. The same client
 *    coming back costs nothing; an equal set (every client ran the same
 *    SETs) costs a comparison. Why not reset each server when it is
 *    released instead: that is a round trip after every transaction of a
 *    client with SETs, even when the same client (LIFO makes that the
 *    usual case) or one with the same SETs gets the server next; here the
 *    work is done only when the next client differs, and then rides on
 *    the round trip that brings the tracked parameters in line anyway.
 *  - anything else that may change the session (a SET or RESET inside a
 *    transaction block, among other statements or through the extended
 *    protocol; a CommandComplete SET, RESET, DISCARD ALL, DO or CALL not
 *    followed above; set_config() in a Query or Parse; a function or view
 *    named in the text that changes settings, or a write where a trigger
 *    or a column default does, as volatility.h lists them; a text too
 *    long to read) sets server->sets_learn: when the
 *    transaction ends, after the client has its ReadyForQuery and before
 *    the server goes back to the pool (still linked, the client paused
 *    until then), the server's session-level settings are learned
 *    (pg_settings where source = 'session', role, session_authorization,
 *    custom parameters by the names the client's text and set gave) and
 *    become the client's set, as PostgreSQL keeps them: committed, rolled
 *    back, SET LOCAL gone, savepoints undone. One round trip on the
 *    server, none on the client unless its next query comes before it.
 *  - what learning cannot see whole (DO, CALL, a setting function, a
 *    set_config() of a name not written out: custom parameters set there
 *    under other names) marks the server for RESET ALL before another
 *    client's transaction (opaque); the client keeps what was learned.
 *    A named Parse with set_config() makes each later transaction of its
 *    client learned (client->sets_learn_always).
 *
 * Not covered: a setting changed by C code, by a function created since
 * pg_proc was read, or reached in ways pg_proc does not show (a name
 * built at run time, an event trigger, a rule): as in PgBouncer, it stays
 * on the server.
 *
 * Sets are immutable, refcounted snapshots: a client and the servers that
 * carry its SETs share one, so the usual comparison is a pointer compare.
 *
 * Must not touch sockets: server.c sends what session_set_diff_sql builds.
 */
#ifndef PGVALVE_SESSION_SET_H
#define PGVALVE_SESSION_SET_H

#include "common.h"
#include "proto.h"
#include "relay.h"

struct client;
struct config;
struct pool;
struct server;

struct session_set_entry {
	char *name;			/* normalized: lower case, "timezone", "role", ... */
	char *stmt;			/* as the client wrote it, or the set_config() of a learned value */
};

struct session_sets {
	uint32_t refs;
	uint32_t count;
	bool unknown_all;		/* server only: changed in ways not seen, reset everything */
	struct session_set_entry e[];
};

#define SESSION_SET_PENDING_MAX 4
/* Simple Queries up to SESSION_SET_QUERY_MAX (relay.h) are read whole and parsed; a longer SET resets the server afterwards. */

/* A statement a client sent, waiting for its reply (queued on the server, in order). */
struct session_set_pending {
	uint32_t replies_before;	/* ReadyForQuery owed to earlier messages */
	uint8_t kind;			/* enum session_set_kind */
	char txn_before;		/* the server's status when it was sent */
	bool completed;			/* its CommandComplete said SET/RESET/DISCARD ALL */
	char *name;
	char *stmt;
};

enum session_set_kind {
	SESSION_SET_NONE,		/* not a session-changing statement */
	SESSION_SET_SET,		/* SET [SESSION] name ... */
	SESSION_SET_RESET,		/* RESET name */
	SESSION_SET_RESET_ALL,		/* RESET ALL */
	SESSION_SET_DISCARD_ALL,	/* DISCARD ALL */
	SESSION_SET_LOCAL,		/* SET LOCAL / SET TRANSACTION: ends with the transaction */
	SESSION_SET_OPAQUE,		/* changes the session in a way not parsed: reset it all */
};

/* At start-up: warns when track_client_set is off (the documented leak). */
void session_set_check_config(const struct config *cfg);
/* track_client_set is on and the pool lends servers per transaction or statement. */
bool session_set_enabled(const struct pool *pool);

/*
 * Classifies one simple-Query text (len bytes, maybe NUL-terminated).
 * For SET and RESET, name gets the normalized parameter name.
 */
enum session_set_kind session_set_parse(const char *sql, size_t len, char *name, size_t name_size);

/* The client sent a Query or Parse to its server (relay_hooks.sets_note_query): track a SET, or note what to learn. */
void session_set_note_query(struct server *server, const struct pkt *pkt, const struct relay_text *rt);
/* A CommandComplete from the server (not of pgvalve's own queries). */
void session_set_note_complete(struct server *server, const char *tag);
/* A ReadyForQuery from the server for a client's message (status already stored). */
void session_set_note_ready(struct server *server);

/*
 * Appends to reset the statements that take away what the server carries
 * and the client does not; to replay those that give it what the client
 * has and it lacks (each statement followed by "; "). Returns the number
 * of statements. *reset_all: the server must first be reset as a whole
 * (RESET ALL), after which it carries nothing.
 */
int session_set_diff_sql(const struct session_sets *client, const struct session_sets *server,
			 struct pktbuf *reset, struct pktbuf *replay, bool *reset_all);
/*
 * The diff was empty: the two sets are equal, so client and server take
 * the same snapshot (immutable), and clients and servers with the same
 * SETs end up sharing one: the next comparison is a pointer compare.
 */
void session_set_share(struct client *client, struct server *server);
/* The diff ran: the server now carries the client's set. */
void session_set_applied(struct server *server, const struct client *client);
/* RESET ALL / DISCARD ALL ran on the server (by pgvalve or its client): it carries nothing. */
void session_set_cleared(struct server *server);
/* Whether a name is one session_set tracks on this server (false: varcache does, from ParameterStatus). */
bool session_set_tracks(const struct server *server, const char *name);

struct session_sets *session_sets_ref(struct session_sets *s);
void session_sets_unref(struct session_sets *s);
/* Drops a server's queue of statements waiting for replies. */
void session_set_pending_clear(struct server *server);
/* Fills the session-SET slots of relay_hooks (start-up). */
void session_set_register(void);

#endif
