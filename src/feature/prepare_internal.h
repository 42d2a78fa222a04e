/*
 * prepare_internal.h - what prepare.c, prepare_table.c and prepare_answer.c
 * share; nothing outside src/feature/prepare*.c includes it (prepare.h is
 * the feature's contract).
 *
 *   prepare_table.c   the three tables: shared statements (refcounted,
 *                     process-wide), each client's names, each server's
 *                     statements in LRU order; what a statement answers
 *                     to a Describe, once learned;
 *   prepare_answer.c  each server's queue of awaited answers: pushed as
 *                     messages are sent, walked against the server's
 *                     answers (swallowed, owed, corrected errors, undone
 *                     on failure);
 *   prepare.c         the client's messages rewritten: Parse, Bind,
 *                     Describe, Close, and SQL PREPARE / EXECUTE /
 *                     DEALLOCATE; the relay hooks.
 * Calls go downwards only: prepare.c -> prepare_answer.c -> prepare_table.c.
 */
#ifndef PGVALVE_PREPARE_INTERNAL_H
#define PGVALVE_PREPARE_INTERNAL_H

#include "common.h"
#include "list.h"
#include "proto.h"

struct client;
struct server;

/* Server-side name: prefix plus the statement id in hex. */
#define PREP_SERVER_PREFIX "PGV_"
#define PREP_SERVER_NAME_MAX 24
/* Client names up to this length are kept in the awaited answers themselves, longer ones on the heap. */
#define PREP_PENDING_NAME_MAX 64

/* One distinct statement: the Parse body after the name, or the text after a SQL PREPARE's name. */
struct prep_stmt {
	struct prep_stmt *hnext;
	uint64_t id;
	uint32_t hash;
	uint32_t refs;
	uint32_t body_len;
	bool sql;		/* from SQL PREPARE: body is "[(types)] AS query" */
	uint8_t shape;		/* enum stmt_shape: learned once, by the Describe after its first Parse */
	uint8_t *param_desc;	/* its ParameterDescription, whole, once learned (SHAPE_NO_ROWS only) */
	uint32_t param_desc_len;
	uint8_t body[];		/* protocol: query NUL, int16 nparams, int32 oids */
};

/*
 * What a Describe of a statement answers besides its parameters. Needed
 * when the statement must be described on a server that lacks it while
 * that server's transaction is aborted: PostgreSQL would describe one
 * that returns no rows there (only RowDescription needs the catalogue),
 * but refuses the Parse pgvalve would have to send first.
 */
enum stmt_shape {
	SHAPE_UNKNOWN,
	SHAPE_NO_ROWS,		/* NoData: param_desc holds the ParameterDescription */
	SHAPE_ROWS,		/* RowDescription: refused in an aborted transaction anyway */
};

struct prep_client_entry {
	struct prep_client_entry *hnext;
	struct prep_stmt *stmt;
	uint32_t hash;
	char name[];
};

struct prep_client {
	struct prep_client_entry **buckets;
	uint32_t nbuckets;
	uint32_t count;
};

struct prep_server_entry {
	struct prep_server_entry *hnext;
	struct list_node lru;		/* head: least recently used */
	struct prep_stmt *stmt;
};

/* What an awaited answer is, and what to do with it. */
enum prep_pending_kind {
	PEND_PARSE,		/* the client's Parse, renamed: forward ParseComplete */
	PEND_PARSE_INJECTED,	/* pgvalve's Parse before a Bind/Describe: swallow ParseComplete */
	PEND_PARSE_CHECK,	/* the server has it: the client's Parse checked under SCRATCH, forward its answer */
	PEND_PARSE_DUP,		/* the client's Parse of a name it has: the server fails it (42P05) */
	PEND_CLOSE_OWED,	/* the client closed its statement: pgvalve owes CloseComplete */
	PEND_CLOSE_EVICT,	/* pgvalve closed an LRU victim: swallow CloseComplete */
	PEND_CLOSE_SCRATCH,	/* pgvalve closed SCRATCH after a check: swallow CloseComplete */
	PEND_DESCRIBE,		/* ends with RowDescription or NoData */
	PEND_DESCRIBE_LEARN,	/* pgvalve's Describe after a statement's first Parse: swallowed, shape learned */
	PEND_DESCRIBE_OWED,	/* a Describe pgvalve answers from the learned shape (describe_in_aborted) */
	PEND_OTHER,		/* Bind, Execute, Close of a portal: ends with its own *Complete */
	PEND_SYNC,		/* ends with ReadyForQuery */
	PEND_QUERY,		/* simple Query or FunctionCall: ends with ReadyForQuery */
	PEND_QUERY_PREPARE,	/* the client's SQL PREPARE, renamed: an error before its tag undoes it */
	PEND_QUERY_PREFIXED,	/* pgvalve's PREPARE before the client's statement: swallow its tag */
	PEND_QUERY_CHECKED,	/* the client's PREPARE checked under SCRATCH, then deallocated: swallow tag 2 */
	PEND_QUERY_DEALLOCATE,	/* SCRATCH prepared (swallow tag 1), the client's DEALLOCATE run on it */
};

/*
 * A server-side name no statement keeps: ids start at 1. Unknown names
 * go to servers as this one, so that the server answers as PostgreSQL
 * would (26000); checks of a client's text prepare and drop it at once.
 */
#define PREP_SCRATCH_ID 0
#define PREP_SCRATCH_NAME PREP_SERVER_PREFIX "0"

/*
 * Kinds whose failure makes or forgets a name, or changes what the server
 * holds: what pgvalve sent after them was rewritten as if they succeed.
 */
#define PEND_RISKY ((1u << PEND_PARSE) | (1u << PEND_PARSE_INJECTED) | (1u << PEND_PARSE_CHECK) | \
		    (1u << PEND_CLOSE_OWED) | (1u << PEND_CLOSE_EVICT) | (1u << PEND_QUERY_PREPARE) | \
		    (1u << PEND_QUERY_PREFIXED) | (1u << PEND_QUERY_CHECKED) | (1u << PEND_QUERY_DEALLOCATE))

struct prep_pending {
	uint8_t kind;
	uint8_t tags;			/* query kinds: CommandCompletes seen */
	bool rename;			/* an error naming server statement `sid` is about the client's `name` */
	uint64_t sid;
	/*
	 * A Query pgvalve rewrote: from character `pos_from` (1-based) on, the
	 * server's error positions are the client's plus `pos_shift`; before
	 * it they point into pgvalve's own text.
	 */
	uint32_t pos_from;
	int32_t pos_shift;
	struct prep_stmt *stmt;		/* holds a reference; NULL for most kinds */
	char name[PREP_PENDING_NAME_MAX];	/* the client's name, for undoing and for errors */
	char *long_name;		/* instead of name when it does not fit */
};

struct prep_server {
	struct prep_server_entry **buckets;
	uint32_t nbuckets;
	uint32_t count;
	struct list lru;
	struct prep_pending *ring;
	uint32_t ring_head;
	uint32_t ring_len;
	uint32_t ring_cap;		/* a power of two */
	/*
	 * Awaited answers whose failure would change which names exist
	 * (PEND_RISKY): before the last Sync or Query in the ring (closed),
	 * after it (open). While some are closed, messages naming statements
	 * wait (prepare_client_waits); `holding`: the client is paused for that.
	 */
	uint32_t risky_closed;
	uint32_t risky_open;
	bool holding;
	bool executed_unsynced;		/* an Execute sent since the last Sync or Query (describe_in_aborted) */
	uint8_t *owed_error;		/* an ErrorResponse naming the client's statement, in place of the server's */
	uint32_t owed_error_len;
};

/* ---------------------------------------------------------------- prepare_table.c */

/* Writes PGV_<id in hex> and its NUL into buf (PREP_SERVER_NAME_MAX); returns the length. */
uint32_t prep_server_name_of_id(uint64_t id, char *buf);
uint32_t prep_server_name_of(const struct prep_stmt *stmt, char *buf);

/* The shared statement with this body, made if new; the caller gets a reference. */
struct prep_stmt *prep_stmt_get(const uint8_t *body, uint32_t len, bool sql);
void prep_stmt_ref(struct prep_stmt *s);
void prep_stmt_unref(struct prep_stmt *s);	/* s may be NULL */
/* The ParameterDescription and then the NoData or RowDescription of pgvalve's Describe after its first Parse. */
void prep_stmt_learn_parameters(struct prep_stmt *stmt, const struct pkt *pkt);
void prep_stmt_learn_shape(struct prep_stmt *stmt, enum stmt_shape shape);
/* Frees the (by then empty) table of shared statements: prepare_global_cleanup(). */
void prep_stmt_table_free(void);

/* A client's names: lookup; bind (takes the caller's reference); forget one (only if it is `only`, when set), all. */
struct prep_stmt *prep_client_lookup(const struct client *client, const char *name);
void prep_client_bind_name(struct client *client, const char *name, struct prep_stmt *stmt);
void prep_client_forget_name(struct client *client, const char *name, const struct prep_stmt *only);
void prep_client_forget_all(struct client *client);

/* A server's statements: its state, made on first use; its LRU cache. */
struct prep_server *prep_server_state(struct server *server);
struct prep_server_entry *prep_server_lookup(struct prep_server *ps, const struct prep_stmt *stmt);
void prep_cache_add(struct prep_server *ps, struct prep_stmt *stmt);
void prep_cache_remove(struct prep_server *ps, const struct prep_stmt *stmt);
void prep_cache_touch(struct prep_server *ps, struct prep_server_entry *e);
void prep_cache_clear(struct prep_server *ps);

/* ---------------------------------------------------------------- prepare_answer.c */

/* Queues an awaited answer; name (may be NULL) is copied, stmt (may be NULL) referenced. */
struct prep_pending *prep_pending_push(struct prep_server *ps, uint8_t kind, struct prep_stmt *stmt,
				       const char *name);
/* The same, for a message sent under server name PGV_<sid>: its errors name the client's `name` instead. */
struct prep_pending *prep_pending_push_renamed(struct prep_server *ps, uint8_t kind, struct prep_stmt *stmt,
					       const char *name, uint64_t sid);
/*
 * The Query being built in b goes in place of the client's: its bytes
 * from b->len on are the client's from `client_at` on; the server's error
 * positions from there are shifted back.
 */
void prep_pending_shift_positions(struct prep_pending *p, const struct pkt *pkt, const char *client_at,
				  const struct pktbuf *b);

#endif
