/*
 * relay.h - what features may do on a pooled client's data path, and the
 * one table through which the core (client.c, server.c) asks them.
 *
 * Two features watch or rewrite the messages of a pooled client and its
 * server: prepared statements (prepare.c: statement names rewritten per
 * server, a Parse sent where the server lacks it, answers owed to the
 * client or swallowed) and session SETs (session_set.c: a client's own
 * SETs followed from server to server). Each fills its slots of
 * relay_hooks once at start-up; the core calls them through the inline
 * wrappers below, which do nothing when a slot is empty. The core never
 * names either module: this table is the whole of what it may ask of them.
 */
#ifndef PGVALVE_RELAY_H
#define PGVALVE_RELAY_H

#include "common.h"
#include "proto.h"
#include "pool.h"

struct client;
struct server;
struct pool;
struct pktbuf;
struct session_sets;

/* How the core treats a server message, as prepared statements judge it. */
enum prepare_verdict {
	PREPARE_FORWARD,	/* an answer for the client */
	PREPARE_SKIP,		/* the answer to something pgvalve sent itself */
	PREPARE_NEED_MORE,	/* decide again once the message is whole */
};

/* Whether a client message must be whole in the buffer before prep_client_message sees it. */
static inline bool relay_prep_needs_whole(uint8_t type)
{
	return type == 'P' || type == 'B' || type == 'D' || type == 'C' || type == 'Q';
}

/*
 * Whether prepared statements look at a server message of this type: a
 * DataRow (most messages of a result) never answers anything awaited, so
 * it passes without prep_server_message or prep_answer_owed.
 */
static inline bool relay_prep_watches_server(uint8_t type)
{
	return type != 'D';
}

/* How the core treats a server message, as notifications judge it. */
enum notify_verdict {
	NOTIFY_PASS,		/* on as usual */
	NOTIFY_HOLD,		/* pause the server: the feature resumes it, and the message is offered again */
	NOTIFY_DROP,		/* a NotificationResponse the pool's listener delivers instead */
	NOTIFY_SET_PID,		/* a NotificationResponse forwarded with another sender PID */
};

/* How the core treats a server message, as the read balancer's retry judges it. */
enum balance_verdict {
	BALANCE_PASS,		/* on as usual */
	BALANCE_SKIP,		/* dropped: the answer to a statement refused as a write, run again */
	BALANCE_RETRY,		/* its ReadyForQuery: dropped, the server released, then balance_retry */
};

/* Whether a client lent to a standby companion takes a server of it (relay_hooks.balance_takes). */
enum balance_take {
	BALANCE_TAKE,		/* the server may serve its read */
	BALANCE_WAIT,		/* not this one: another server there that may is about to be free */
	BALANCE_HOME,		/* none may soon: back to its own pool, to run on the primary */
};

/* Longest simple Query read whole to see whether it is a SET (longer ones are not parsed). */
#define SESSION_SET_QUERY_MAX 8192

/*
 * A client's whole Query or Parse, its statement text cut once for every
 * feature that reads it (relay_text_of).
 */
struct relay_text {
	const char *sql;	/* the statement (a Parse's after its name); a NUL follows it in the message */
	size_t len;		/* up to that NUL */
	unsigned marks;		/* sql_marks() of it (sql_lex.h) */
	bool named;		/* a Parse of a named statement */
};

/* Fills rt for a whole Query or Parse; false if its text has no NUL (PostgreSQL refuses it). */
bool relay_text_of(const struct pkt *pkt, struct relay_text *rt);

struct relay_hooks {
	/* prepared statements (prepare.h) */
	bool (*prep_enabled)(const struct pool *pool);
	/* true if it took care of the message (the caller does not forward it) */
	bool (*prep_client_message)(struct client *client, struct server *server, const struct pkt *pkt);
	/* true if the client was paused: the message is offered again later (prepare_client_waits) */
	bool (*prep_client_waits)(struct client *client, struct server *server, const struct pkt *pkt);
	enum prepare_verdict (*prep_server_message)(struct server *server, const struct pkt *pkt);
	void (*prep_answer_owed)(struct server *server);
	void (*prep_client_free)(struct client *client);
	void (*prep_server_free)(struct server *server);

	/* session SETs (session_set.h) */
	bool (*sets_enabled)(const struct pool *pool);
	/* A client's Query or Parse on its way to server: whole (rt), or the start of one too long to read whole (NULL) */
	void (*sets_note_query)(struct server *server, const struct pkt *pkt, const struct relay_text *rt);
	void (*sets_note_complete)(struct server *server, const char *tag);
	void (*sets_note_ready)(struct server *server);
	int (*sets_diff_sql)(const struct session_sets *client, const struct session_sets *server,
			     struct pktbuf *reset, struct pktbuf *replay, bool *reset_all);
	void (*sets_share)(struct client *client, struct server *server);
	void (*sets_applied)(struct server *server, const struct client *client);
	void (*sets_cleared)(struct server *server);
	void (*sets_client_free)(struct client *client);
	void (*sets_server_free)(struct server *server);
	/*
	 * Learning a session (server->sets_learn): at the end of its client's
	 * transaction, still linked, the server runs the query sets_learn_sql
	 * builds (SV_INTERNAL_LEARN; the client paused meanwhile); its rows
	 * and its end come back here, then it is released as usual. A server
	 * released with sets_learn still set (its client left, or its answer
	 * was swallowed) goes to sets_learn_dropped instead.
	 */
	void (*sets_learn_sql)(struct server *server, struct pktbuf *out);
	void (*sets_learn_row)(struct server *server, const struct pkt *pkt);
	void (*sets_learn_done)(struct server *server, bool failed);
	void (*sets_learn_dropped)(struct server *server);

	/* LISTEN/UNLISTEN in transaction and statement mode (notify.h) */
	bool (*notify_enabled)(const struct pool *pool);
	/*
	 * A client's whole Query or Parse, before it goes to server: true if
	 * it must wait (the client was paused; the message is offered again
	 * when the feature resumes it, and nothing of it was noted).
	 */
	bool (*notify_note_client)(struct client *client, struct server *server, const struct relay_text *rt);
	/*
	 * A whole CommandComplete, ErrorResponse, ReadyForQuery or
	 * NotificationResponse for a client with client->notify set: what the
	 * core does with it (enum notify_verdict; pid: NOTIFY_SET_PID's value)
	 */
	enum notify_verdict (*notify_note_server)(struct server *server, const struct pkt *pkt, uint32_t *pid);
	/* Such a client is between transactions again (its server went back to the pool) */
	void (*notify_client_idle)(struct client *client);
	void (*notify_client_free)(struct client *client);

	/* the read balancer (balance.h) */
	bool (*balance_enabled)(const struct pool *pool);
	/*
	 * A client with no server starts a transaction with this whole Query
	 * or Parse: the pool it is to run in (its own, or its standby
	 * companion: pool_lend_client), or NULL for its own.
	 */
	struct pool *(*balance_pick)(struct client *client, const struct pkt *pkt);
	/*
	 * A client lent to a standby companion is about to get server (an
	 * idle one when it asks, or one ready while it waits): whether that
	 * standby may serve its read (not behind the client's freshness);
	 * if not, it waits on for another server there, or goes back to its
	 * own pool.
	 */
	enum balance_take (*balance_takes)(struct client *client, const struct server *server);
	/*
	 * Read your writes (balance_fresh.h). A balancing pool's client ends a
	 * transaction, its server released clean (pool_release_server, still
	 * linked): counted; may set server->position_for, and the server then
	 * runs balance_position_sql (SV_INTERNAL_POSITION) before it goes back
	 * to the pool, whose rows and end come back here.
	 */
	void (*balance_released)(struct client *client, struct server *server);
	const char *balance_position_sql;
	void (*balance_position_row)(struct server *server, const struct pkt *pkt);
	void (*balance_position_done)(struct server *server, bool failed);
	/* A server with position_for set, or a client with balance_state set, is freed. */
	void (*balance_server_free)(struct server *server);
	/*
	 * A message from the server of a client holding client->balance_retry
	 * (whole if ErrorResponse or ReadyForQuery): what the core does with it
	 * (enum balance_verdict). swallowed: prepared statements judged it
	 * PREPARE_SKIP (the answer to a message pgvalve sent itself, or an
	 * error they replace with their own), so that it is not taken for the
	 * client's answer.
	 */
	enum balance_verdict (*balance_server_message)(struct server *server, const struct pkt *pkt, bool swallowed);
	/* A client whose refused statement's ReadyForQuery was swallowed, its server released: run it again */
	void (*balance_retry)(struct client *client);
	/* Its server was lost before answering anything: true to unlink it (not close it) and balance_retry it */
	bool (*balance_server_lost)(const struct client *client);
	void (*balance_client_free)(struct client *client);
	/*
	 * A whole Query, Parse or Bind (or a FunctionCall) of a client with
	 * balance_control_only set, before it goes to its server: the bit is
	 * cleared unless the message only begins or ends the transaction.
	 */
	void (*balance_statement)(struct client *client, const struct pkt *pkt);
};

/* Filled at start-up (prepare_register, session_set_register), read-only after. */
extern struct relay_hooks relay_hooks;

enum relay_feature {
	RELAY_PREP = 1 << 0,
	RELAY_SETS = 1 << 1,
	RELAY_NOTIFY = 1 << 2,
	RELAY_BALANCE = 1 << 3,
};

/* Asks each feature's *_enabled slot: the bits pool_relay_features (pool.h) caches per config generation. */
static inline unsigned relay_features_ask(const struct pool *pool)
{
	return (relay_hooks.prep_enabled && relay_hooks.prep_enabled(pool) ? RELAY_PREP : 0) |
	       (relay_hooks.sets_enabled && relay_hooks.sets_enabled(pool) ? RELAY_SETS : 0) |
	       (relay_hooks.notify_enabled && relay_hooks.notify_enabled(pool) ? RELAY_NOTIFY : 0) |
	       (relay_hooks.balance_enabled && relay_hooks.balance_enabled(pool) ? RELAY_BALANCE : 0);
}

static inline bool relay_balance_enabled(const struct pool *pool)
{
	return pool_relay_features(pool) & RELAY_BALANCE;
}

static inline bool relay_prep_enabled(const struct pool *pool)
{
	return pool_relay_features(pool) & RELAY_PREP;
}

static inline bool relay_sets_enabled(const struct pool *pool)
{
	return pool_relay_features(pool) & RELAY_SETS;
}

static inline bool relay_notify_enabled(const struct pool *pool)
{
	return pool_relay_features(pool) & RELAY_NOTIFY;
}

/* Longest Query or Parse read whole for the read balancer (longer ones stay on the primary). */
#define BALANCE_QUERY_MAX 8192

/* Longest Query or Parse read whole to look for LISTEN/UNLISTEN (longer ones are not parsed). */
#define NOTIFY_QUERY_MAX 65536

/* A slot that an enabled feature always fills: called without a check. */
#define relay_call(slot, ...) relay_hooks.slot(__VA_ARGS__)

/* A slot that may be empty (freeing, clearing). */
#define relay_call_if(slot, ...) do { if (relay_hooks.slot) relay_hooks.slot(__VA_ARGS__); } while (0)

#endif
