/*
 * prepare.h - named prepared statements in transaction and statement
 * pooling (max_prepared_statements), as PgBouncer 1.21+ does them.
 *
 * Contract:
 *  - Each distinct statement (the Parse message after its name: query text
 *    and parameter types) exists once in the process, refcounted, shared by
 *    every client that prepared it and every server it is prepared on. On
 *    servers it is called PGV_<id>.
 *  - A client's named statements are a map from its own names to shared
 *    statements. Parse, Bind, Describe and Close that name one are
 *    rewritten (client -> server name); a statement missing on the server
 *    the client is linked to is prepared there first, in the same stream.
 *  - Each server keeps an LRU of at most max_prepared_statements
 *    statements; the least recently used one is closed on the server.
 *  - Because pgvalve answers some messages itself (a Close) and swallows
 *    the answers to messages it injected, it keeps, per server, the queue
 *    of answers it awaits and walks the server's replies against it.
 *    Errors follow the protocol: an ErrorResponse fails the message at the
 *    head of the queue and discards what follows up to the next Sync,
 *    also what the client sends after it (server->ignore_till_sync).
 *  - A client's names answer as PostgreSQL's: PostgreSQL itself gives the
 *    errors (42P05 for a Parse or PREPARE of a name the client has, 26000
 *    for a name it does not have, 25P02 in a failed transaction), on
 *    messages rewritten so that the server fails them the same way; an
 *    unknown name goes to the server as PGV_0, which no server keeps, and
 *    the client's name is put back in the error's message. No client name
 *    reaches a server as it is.
 *  - SQL PREPARE name / EXECUTE name / DEALLOCATE name, each alone in a
 *    simple Query, are tracked the same way (beyond PgBouncer): the query
 *    text is rewritten to pgvalve's name, prefixed with the PREPARE when
 *    the server lacks it; both levels share the client's names.
 *  - Session pooling and max_prepared_statements = 0 are pass-through:
 *    nothing here is called.
 * Must not touch sockets except through netbuf_replace/netbuf_insert on
 * the client and server it is given: rewritten messages and made answers
 * join the batch of forwarded bytes, one send() per read as without it.
 */
#ifndef PGVALVE_PREPARE_H
#define PGVALVE_PREPARE_H

#include "common.h"
#include "proto.h"
#include "relay.h"

struct client;
struct server;
struct pool;

/* Whether statements of this pool's clients are tracked (mode and setting). */
bool prepare_enabled(const struct pool *pool);

/*
 * A client message, whole if relay_prep_needs_whole(), about to go to its
 * linked server. Returns true if it was taken care of here (skipped, and
 * maybe something else sent or answered); false if the caller forwards it.
 */
bool prepare_client_message(struct client *client, struct server *server, const struct pkt *pkt);
/*
 * Asked first, for the same message: true if it names a statement whose
 * existence hangs on answers the server still owes for earlier Syncs or
 * Queries (a pipeline). Then the client is paused, and resumed once they
 * came, so that the name is judged as PostgreSQL judges it at that point.
 */
bool prepare_client_waits(struct client *client, struct server *server, const struct pkt *pkt);

/* A server message for its linked client: matches it against the awaited answers. */
enum prepare_verdict prepare_server_message(struct server *server, const struct pkt *pkt);
/* After the caller forwarded or skipped that message: sends answers pgvalve owes the client next. */
void prepare_server_answer_owed(struct server *server);

void prepare_server_free(struct server *server);
void prepare_client_free(struct client *client);

/* Counts for SHOW CLIENTS / SHOW SERVERS (prepared_statements). */
uint32_t prepare_client_count(const struct client *client);
uint32_t prepare_server_count(const struct server *server);

/*
 * The query text of the client's named statement name (a Parse's, or a SQL
 * PREPARE's without parameter types), not NUL-terminated: false if the
 * client has no such name (the read balancer, deciding for a Bind).
 */
bool prepare_client_statement_text(const struct client *client, const char *name, const char **text, size_t *len);

/*
 * The read balancer's 25006 retry (balance.h). Whether the client has a
 * statement of that name, of either level: a batch that parses a name the
 * client has is not kept for a retry (PostgreSQL refuses that Parse,
 * 42P05), so that every name a kept batch parses was new before it.
 */
bool prepare_client_has_statement(const struct client *client, const char *name);
/*
 * The same retry, before the batch a standby refused runs again on
 * another server: the client's name that the batch's own Parse made on
 * the first pass is forgotten (the client never saw its ParseComplete),
 * so that the Parse sent again makes it anew there instead of being
 * refused as a duplicate (42P05). A name the client did not have does
 * nothing. Servers are left as they are: the standby keeps what it
 * parsed (PostgreSQL keeps a named statement whose Parse passed though a
 * later message of the batch failed), and its cache says so.
 */
void prepare_client_forget_statement(struct client *client, const char *name);

/* The shared statements: how many, and their memory with texts (SHOW MEM). */
void prepare_shared_stats(uint32_t *count, uint64_t *bytes);

void prepare_global_cleanup(void);
/* Fills the prepared-statement slots of relay_hooks (start-up). */
void prepare_register(void);

#endif
