/*
 * prepare.c - named prepared statements across pooled servers (see
 * prepare.h for the contract): the client's messages that name a
 * statement rewritten to pgvalve's names (Parse, Bind, Describe, Close,
 * and SQL PREPARE / EXECUTE / DEALLOCATE in a simple Query), with what
 * must first be prepared on the server, and the relay hooks.
 *
 * The tables it rewrites against are prepare_table.c's; the queue of
 * answers each rewritten message makes the server owe, and the server's
 * answers, are prepare_answer.c's (prepare_internal.h).
 *
 * Owns: the rewriting and its scratch buffer. Touches clients and servers
 * only through their netbufs (replace/insert) and their `prep` pointers.
 */
#include "common.h"
#include "prepare.h"
#include "prepare_internal.h"
#include "client.h"
#include "config.h"
#include "log.h"
#include "pool.h"
#include "server.h"
#include "sql_lex.h"

/* The rewrite buffer is kept between messages up to this size. */
#define PREP_SCRATCH_KEEP (256 * 1024)

/* A scratch buffer for rewritten messages, and the probe statements. */
static struct {
	struct pktbuf scratch;
	bool scratch_ready;
	struct prep_stmt *probe;	/* "SELECT": a statement any server can be made to hold (probe_stmt) */
	struct prep_stmt *probe_exit;	/* "ROLLBACK": the same, in an aborted transaction too */
} prep;

static struct pktbuf *scratch(void)
{
	if (!prep.scratch_ready) {
		pktbuf_init(&prep.scratch, 1024);
		prep.scratch_ready = true;
	}
	pktbuf_reset(&prep.scratch);
	return &prep.scratch;
}

bool prepare_enabled(const struct pool *pool)
{
	return pgv.cfg->max_prepared_statements > 0 && pool_effective_mode(pool) != POOL_MODE_SESSION;
}

/* ---------------------------------------------------------------- statement texts */

/* A cursor over a query text: the simple grammar of PREPARE, EXECUTE and DEALLOCATE only. */
struct sql_scan {
	const char *p;
	const char *end;	/* trailing blanks and semicolons cut off */
};

static bool sql_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

static void sql_skip_space(struct sql_scan *sc)
{
	struct sql_lexer lx;
	sql_lex_init(&lx, sc->p, (size_t)(sc->end - sc->p), true);
	sql_lex_skip_space(&lx);
	sc->p = lx.p;
}

/* The next token of sc (blanks and comments skipped), sc unmoved; lx is left after it. */
static enum sql_token_kind sql_token_at(const struct sql_scan *sc, struct sql_lexer *lx, struct sql_token *tok)
{
	sql_lex_init(lx, sc->p, (size_t)(sc->end - sc->p), true);
	return sql_lex_next(lx, tok);
}

/* A keyword (kw in lower case; the text in any case), and the blanks and comments after it. */
static bool sql_keyword(struct sql_scan *sc, const char *kw)
{
	struct sql_lexer lx;
	struct sql_token tok;
	sql_token_at(sc, &lx, &tok);
	if (!sql_token_is(&tok, kw))
		return false;
	sql_lex_skip_space(&lx);
	sc->p = lx.p;
	return true;
}

/* An identifier as PostgreSQL reads it (unquoted ones folded to lower case); sc is left just after it. */
static bool sql_identifier(struct sql_scan *sc, char *out, size_t size)
{
	struct sql_lexer lx;
	struct sql_token tok;
	sql_token_at(sc, &lx, &tok);
	if (!sql_token_name(&tok, out, size))
		return false;
	sc->p = lx.p;
	return true;
}

/* Whether sc is at a blank or a comment (what may separate two words). */
static bool sql_at_space(const struct sql_scan *sc)
{
	struct sql_lexer lx;
	sql_lex_init(&lx, sc->p, (size_t)(sc->end - sc->p), true);
	sql_lex_skip_space(&lx);
	return lx.p > sc->p;
}

/*
 * The query text of a statement that either level can make: a SQL one
 * written "AS query", a protocol one with no parameter types. False when
 * it has types: SQL names them, the protocol gives OIDs, and pgvalve
 * knows no mapping between the two.
 */
static bool stmt_plain_query(const struct prep_stmt *stmt, const char **query, uint32_t *len)
{
	const char *body = (const char *)stmt->body;
	if (!stmt->sql) {
		uint32_t qlen = (uint32_t)strnlen(body, stmt->body_len);
		if (qlen + 3 > stmt->body_len || stmt->body[qlen + 1] || stmt->body[qlen + 2])
			return false;
		*query = body;
		*len = qlen;
		return true;
	}
	struct sql_scan sc = { .p = body, .end = body + stmt->body_len };
	sql_skip_space(&sc);
	if (!sql_keyword(&sc, "as") || sc.p >= sc.end)
		return false;
	*query = sc.p;
	*len = (uint32_t)(sc.end - sc.p);
	return true;
}

/* Whether ensure_on_server() can make stmt: a protocol one, or a SQL one without types. */
static bool stmt_parseable(const struct prep_stmt *stmt)
{
	const char *q;
	uint32_t n;
	return !stmt->sql || stmt_plain_query(stmt, &q, &n);
}

/* A Parse that makes stmt as PGV_<sid> (sid: its own id, or SCRATCH); stmt_parseable(stmt). */
static void put_parse(struct pktbuf *b, const struct prep_stmt *stmt, uint64_t sid)
{
	char name[PREP_SERVER_NAME_MAX];
	const char *query;
	uint32_t qlen;
	prep_server_name_of_id(sid, name);
	pktbuf_begin(b, 'P');
	pktbuf_put_string(b, name);
	if (!stmt->sql) {
		pktbuf_put_bytes(b, stmt->body, stmt->body_len);
	} else if (stmt_plain_query(stmt, &query, &qlen)) {
		pktbuf_put_bytes(b, query, qlen);
		pktbuf_put_byte(b, 0);
		pktbuf_put_uint16(b, 0);
	}
	pktbuf_end(b);
}

/* Whether put_prepare_text() can make stmt: a SQL one, or a protocol one without types. */
static bool stmt_preparable(const struct prep_stmt *stmt)
{
	const char *q;
	uint32_t n;
	return stmt->sql || stmt_plain_query(stmt, &q, &n);
}

/*
 * `word "PGV_<sid>"` into the Query being built: quoted, as PostgreSQL
 * folds unquoted names to lower case, and the protocol's are not.
 */
static void put_sql_name(struct pktbuf *b, const char *word, uint64_t sid)
{
	char sname[PREP_SERVER_NAME_MAX];
	uint32_t n = prep_server_name_of_id(sid, sname);
	pktbuf_put_bytes(b, word, (uint32_t)strlen(word));
	pktbuf_put_bytes(b, " \"", 2);
	pktbuf_put_bytes(b, sname, n);
	pktbuf_put_byte(b, '"');
}

/* "PREPARE "PGV_<sid>" <text that makes stmt>" into the Query being built; stmt_preparable(stmt). */
static void put_prepare_text(struct pktbuf *b, const struct prep_stmt *stmt, uint64_t sid)
{
	const char *query;
	uint32_t qlen;
	put_sql_name(b, "PREPARE", sid);
	if (stmt->sql) {	/* the body starts with a blank or '(' */
		pktbuf_put_bytes(b, stmt->body, stmt->body_len);
	} else if (stmt_plain_query(stmt, &query, &qlen)) {
		pktbuf_put_bytes(b, " AS ", 4);
		pktbuf_put_bytes(b, query, qlen);
	}
}

/* ---------------------------------------------------------------- client messages */

/*
 * Puts into b whatever makes stmt exist on the server (a Close of the LRU
 * victim, a Parse) and queues their answers; stmt_parseable(stmt) unless it
 * is there already. Returns whether a Parse was needed. `name`: the
 * client's name when the Parse is the client's own.
 */
static bool ensure_on_server(struct server *server, struct pktbuf *b, struct prep_stmt *stmt,
			     uint8_t parse_kind, const char *client_name)
{
	struct prep_server *ps = prep_server_state(server);
	struct prep_server_entry *e = prep_server_lookup(ps, stmt);
	if (e) {
		prep_cache_touch(ps, e);
		return false;
	}
	while (ps->count >= (uint32_t)pgv.cfg->max_prepared_statements) {
		struct prep_server_entry *victim = container_of(list_first(&ps->lru), struct prep_server_entry, lru);
		char name[PREP_SERVER_NAME_MAX];
		prep_server_name_of(victim->stmt, name);
		pktbuf_begin(b, 'C');
		pktbuf_put_byte(b, 'S');
		pktbuf_put_string(b, name);
		pktbuf_end(b);
		prep_pending_push(ps, PEND_CLOSE_EVICT, victim->stmt, NULL);
		prep_cache_remove(ps, victim->stmt);
	}
	put_parse(b, stmt, stmt->id);
	prep_cache_add(ps, stmt);
	prep_pending_push(ps, parse_kind, stmt, client_name);
	server->pool->db->stats.total.server_parse_count++;
	if (stmt->shape == SHAPE_UNKNOWN && !stmt->sql) {
		/* Once per statement, in the same batch: its shape, for describe_in_aborted() */
		char name[PREP_SERVER_NAME_MAX];
		prep_server_name_of(stmt, name);
		pktbuf_begin(b, 'D');
		pktbuf_put_byte(b, 'S');
		pktbuf_put_string(b, name);
		pktbuf_end(b);
		prep_pending_push(ps, PEND_DESCRIBE_LEARN, stmt, NULL);
	}
	return true;
}

/*
 * The client's message goes to its server as b, followed by the message's
 * last `kept` bytes as they are: both join the bytes forwarded around them
 * in one send (netbuf_replace), the message's tail is not copied.
 */
static void send_built(struct client *client, const struct pkt *pkt, struct pktbuf *b, uint32_t kept)
{
	netbuf_replace(&client->nb, pkt->len, pkt->len - kept, b->buf, b->len);
	/* One huge Parse must not pin its size for the life of the process. */
	if (b->size > PREP_SCRATCH_KEEP) {
		pktbuf_free(b);
		prep.scratch_ready = false;
	}
}

/* A statement both levels can make, for a server to hold when the client's own cannot be made there. */
static struct prep_stmt *probe_stmt(void)
{
	static const uint8_t body[] = "SELECT\0\0";	/* the query, its NUL, no parameter types */
	if (!prep.probe)
		prep.probe = prep_stmt_get(body, sizeof(body), false);
	return prep.probe;
}

/*
 * A statement whose Parse PostgreSQL takes even in an aborted transaction
 * (one that ends a transaction passes there), for a server that holds none.
 */
static struct prep_stmt *probe_exit_stmt(void)
{
	static const uint8_t body[] = "ROLLBACK\0\0";
	if (!prep.probe_exit)
		prep.probe_exit = prep_stmt_get(body, sizeof(body), false);
	return prep.probe_exit;
}

/*
 * Parse of a name the client has: PostgreSQL checks the new text, then
 * fails with 42P05. The server is made to do the same, with a Parse of
 * the new text under the name of a statement it holds (the client's old
 * one, another one it has, or else pgvalve's exit probe made first), so
 * that the transaction and the rest of the batch fare as in PostgreSQL,
 * an aborted transaction included; the error's message gets the
 * client's name back.
 */
static bool parse_duplicate(struct client *client, struct server *server, const struct pkt *pkt,
			    struct pkt_reader *r, const char *name, struct prep_stmt *old)
{
	struct prep_server *ps = prep_server_state(server);
	struct prep_stmt *target = old;
	/* PgBouncer's log line, which operators alert on; the client gets PostgreSQL's 42P05 */
	client_log(LOG_LEVEL_ERROR, client, "prepared statement '%s' was already prepared", name);
	if (!prep_server_lookup(ps, old))
		target = ps->count ? container_of(list_first(&ps->lru), struct prep_server_entry, lru)->stmt
				   : probe_exit_stmt();
	struct pktbuf *b = scratch();
	ensure_on_server(server, b, target, PEND_PARSE_INJECTED, NULL);
	char sname[PREP_SERVER_NAME_MAX];
	prep_server_name_of(target, sname);
	pktbuf_begin(b, 'P');
	pktbuf_put_string(b, sname);
	pktbuf_put_bytes(b, r->data + r->pos, pkt_remaining(r));
	pktbuf_end(b);
	prep_pending_push_renamed(ps, PEND_PARSE_DUP, NULL, name, target->id);
	send_built(client, pkt, b, 0);
	return true;
}

static bool handle_parse(struct client *client, struct server *server, const struct pkt *pkt)
{
	struct pkt_reader r;
	pkt_reader_init(&r, pkt_body(pkt), pkt_body_len(pkt));
	const char *name = pkt_get_string(&r);
	if (!name || !name[0]) {	/* unnamed (or malformed: the server says so) */
		prep_pending_push(prep_server_state(server), PEND_OTHER, NULL, NULL);
		return false;
	}
	server->pool->db->stats.total.client_parse_count++;
	struct prep_stmt *old = prep_client_lookup(client, name);
	if (old)
		return parse_duplicate(client, server, pkt, &r, name, old);
	struct prep_stmt *stmt = prep_stmt_get(r.data + r.pos, pkt_remaining(&r), false);
	struct pktbuf *b = scratch();
	if (!ensure_on_server(server, b, stmt, PEND_PARSE, name)) {
		/*
		 * The server has it: the text is still checked there, under the
		 * scratch name, so that the client gets what PostgreSQL would say
		 * now (an aborted transaction, a table dropped since).
		 */
		put_parse(b, stmt, PREP_SCRATCH_ID);
		pktbuf_begin(b, 'C');
		pktbuf_put_byte(b, 'S');
		pktbuf_put_string(b, PREP_SCRATCH_NAME);
		pktbuf_end(b);
		prep_pending_push(server->prep, PEND_PARSE_CHECK, stmt, name);
		prep_pending_push(server->prep, PEND_CLOSE_SCRATCH, NULL, NULL);
	}
	prep_client_bind_name(client, name, stmt);	/* takes prep_stmt_get's reference */
	send_built(client, pkt, b, 0);
	return true;
}

/*
 * A Describe of stmt, which the server lacks, in a transaction known to be
 * aborted here: its last ReadyForQuery said so, every Sync and Query was
 * answered, and no Execute was sent since the last (a ROLLBACK could end
 * it before the Sync). The Parse pgvalve would send first is refused
 * there, the Describe itself is not when the statement returns no rows:
 * answered from its learned shape.
 */
static bool describe_in_aborted(const struct server *server, const struct prep_stmt *stmt)
{
	return stmt->shape == SHAPE_NO_ROWS && server->txn_status == 'E' && server->expect_ready == 0 &&
	       !server->prep->executed_unsynced && !prep_server_lookup(server->prep, stmt);
}

/*
 * Bind: portal, statement, rest. Describe: 'S'/'P', name. A client
 * statement's name becomes its server name; a name the client does not
 * have becomes the scratch name, which no server holds, so that the
 * server answers as PostgreSQL would (26000), the client's name put back
 * in the message: no client ever reaches a statement by its server name.
 */
static bool handle_use(struct client *client, struct server *server, const struct pkt *pkt)
{
	struct pkt_reader r;
	pkt_reader_init(&r, pkt_body(pkt), pkt_body_len(pkt));
	const char *portal = NULL;
	bool is_statement = true;
	if (pkt->type == 'B')
		portal = pkt_get_string(&r);
	else
		is_statement = pkt_get_byte(&r) == 'S';
	const char *name = pkt_get_string(&r);
	uint8_t kind = pkt->type == 'D' ? PEND_DESCRIBE : PEND_OTHER;
	struct prep_server *ps = prep_server_state(server);
	if (r.failed || !is_statement || !name[0]) {	/* unnamed, a portal, or malformed: as it is */
		prep_pending_push(ps, kind, NULL, NULL);
		return false;
	}
	struct prep_stmt *stmt = prep_client_lookup(client, name);
	if (stmt && !stmt_parseable(stmt) && !prep_server_lookup(ps, stmt))
		stmt = NULL;	/* a SQL one with types, not on this server: see the man page */
	if (stmt && pkt->type == 'D' && describe_in_aborted(server, stmt)) {
		prep_pending_push(ps, PEND_DESCRIBE_OWED, stmt, NULL);
		netbuf_replace(&client->nb, pkt->len, pkt->len, NULL, 0);	/* dropped, in the batch */
		prepare_server_answer_owed(server);
		return true;
	}
	struct pktbuf *b = scratch();
	if (stmt) {
		ensure_on_server(server, b, stmt, PEND_PARSE_INJECTED, NULL);
		if (pkt->type == 'B')
			server->pool->db->stats.total.bind_count++;
	}
	char sname[PREP_SERVER_NAME_MAX];
	uint32_t sname_len = prep_server_name_of_id(stmt ? stmt->id : PREP_SCRATCH_ID, sname);
	/* Only the head changes: the parameters after the name stay where they are. */
	uint32_t kept = pkt_body_len(pkt) - r.pos;
	pktbuf_begin(b, pkt->type);
	if (pkt->type == 'B')
		pktbuf_put_string(b, portal);
	else
		pktbuf_put_byte(b, 'S');
	pktbuf_put_bytes(b, sname, sname_len + 1);
	pktbuf_end_before(b, kept);
	/* Its errors name the client's statement (a Bind's parameter count, one whose Parse failed). */
	prep_pending_push_renamed(ps, kind, NULL, name, stmt ? stmt->id : PREP_SCRATCH_ID);
	send_built(client, pkt, b, kept);
	return true;
}

static bool handle_close(struct client *client, struct server *server, const struct pkt *pkt)
{
	struct pkt_reader r;
	pkt_reader_init(&r, pkt_body(pkt), pkt_body_len(pkt));
	bool is_statement = pkt_get_byte(&r) == 'S';
	const char *name = pkt_get_string(&r);
	if (r.failed || !is_statement || !name[0]) {
		prep_pending_push(prep_server_state(server), PEND_OTHER, NULL, NULL);
		return false;
	}
	/*
	 * Others may use the same statement: only the client's name goes;
	 * PostgreSQL answers even unknown names. The pending answer keeps the
	 * statement: a Close discarded after an error leaves the name.
	 */
	prep_pending_push(prep_server_state(server), PEND_CLOSE_OWED, prep_client_lookup(client, name), name);
	prep_client_forget_name(client, name, NULL);
	netbuf_replace(&client->nb, pkt->len, pkt->len, NULL, 0);	/* dropped, in the batch */
	prepare_server_answer_owed(server);
	return true;
}

/* ---------------------------------------------------------------- SQL PREPARE / EXECUTE / DEALLOCATE */

/* Ends the Query being built in b and sends it in place of the client's. */
static void send_query(struct client *client, const struct pkt *pkt, struct pktbuf *b)
{
	pktbuf_put_byte(b, 0);
	pktbuf_end(b);
	send_built(client, pkt, b, 0);
}

/*
 * The Query being built in b makes stmt on the server first, unless the
 * server has it (e, its cache entry, or NULL): "PREPARE PGV_<id> ...; ".
 * Returns whether it was put there (then its tag is pgvalve's to swallow).
 */
static bool sql_prefix_prepare(struct server *server, struct pktbuf *b, struct prep_stmt *stmt,
			       struct prep_server_entry *e)
{
	struct prep_server *ps = server->prep;
	if (e) {
		prep_cache_touch(ps, e);
		return false;
	}
	put_prepare_text(b, stmt, stmt->id);
	pktbuf_put_bytes(b, "; ", 2);
	prep_cache_add(ps, stmt);
	server->pool->db->stats.total.server_parse_count++;
	return true;
}

/*
 * PREPARE of a name the client has: as parse_duplicate(), in SQL, under
 * the name of a statement the server holds, prepared first in the same
 * Query if need be.
 */
static bool sql_prepare_duplicate(struct client *client, struct server *server, const struct pkt *pkt,
				  const char *name, struct prep_stmt *old, const char *text, size_t len)
{
	struct prep_server *ps = server->prep;
	struct prep_stmt *target = prep_server_lookup(ps, old) || stmt_preparable(old) ? old : probe_stmt();
	struct pktbuf *b = scratch();
	pktbuf_begin(b, 'Q');
	bool prefixed = sql_prefix_prepare(server, b, target, prep_server_lookup(ps, target));
	struct prep_pending *p = prep_pending_push_renamed(ps, prefixed ? PEND_QUERY_PREFIXED : PEND_QUERY,
							   prefixed ? target : NULL, name, target->id);
	put_sql_name(b, "PREPARE", target->id);
	prep_pending_shift_positions(p, pkt, text, b);
	pktbuf_put_bytes(b, text, (uint32_t)len);
	send_query(client, pkt, b);
	return true;
}

/* PREPARE name ...: false if it is not one pgvalve takes (the caller passes it on). */
static bool sql_prepare(struct client *client, struct server *server, const struct pkt *pkt, struct sql_scan *sc)
{
	struct prep_server *ps = server->prep;
	struct sql_scan at_name = *sc;
	char name[PREP_PENDING_NAME_MAX];
	if (sql_keyword(&at_name, "transaction"))
		return false;	/* two-phase commit, not a statement */
	if (!sql_identifier(sc, name, sizeof(name)) || sc->p >= sc->end || !(sql_at_space(sc) || *sc->p == '('))
		return false;
	server->pool->db->stats.total.client_parse_count++;
	struct prep_stmt *old = prep_client_lookup(client, name);
	if (old)
		return sql_prepare_duplicate(client, server, pkt, name, old, sc->p, (size_t)(sc->end - sc->p));
	struct prep_stmt *stmt = prep_stmt_get((const uint8_t *)sc->p, (uint32_t)(sc->end - sc->p), true);
	struct pktbuf *b = scratch();
	pktbuf_begin(b, 'Q');
	if (prep_server_lookup(ps, stmt)) {
		/* The server has it: checked there under the scratch name, then dropped (as parse's check). */
		put_prepare_text(b, stmt, PREP_SCRATCH_ID);
		b->len -= stmt->body_len;	/* to measure what comes before the client's text */
		prep_pending_shift_positions(prep_pending_push(ps, PEND_QUERY_CHECKED, stmt, name), pkt, sc->p, b);
		b->len += stmt->body_len;
		put_sql_name(b, "; DEALLOCATE", PREP_SCRATCH_ID);
	} else {
		put_prepare_text(b, stmt, stmt->id);
		b->len -= stmt->body_len;
		prep_pending_shift_positions(prep_pending_push(ps, PEND_QUERY_PREPARE, stmt, name), pkt, sc->p, b);
		b->len += stmt->body_len;
		prep_cache_add(ps, stmt);
		server->pool->db->stats.total.server_parse_count++;
	}
	prep_client_bind_name(client, name, stmt);	/* takes prep_stmt_get's reference */
	send_query(client, pkt, b);
	return true;
}

/* EXECUTE name ...: the statement made on the server first if need be; an unknown name as in handle_use(). */
static bool sql_execute(struct client *client, struct server *server, const struct pkt *pkt, struct sql_scan *sc)
{
	struct prep_server *ps = server->prep;
	char name[PREP_PENDING_NAME_MAX];
	if (!sql_identifier(sc, name, sizeof(name)))
		return false;
	struct prep_stmt *stmt = prep_client_lookup(client, name);
	struct prep_server_entry *e = stmt ? prep_server_lookup(ps, stmt) : NULL;
	struct pktbuf *b = scratch();
	struct prep_pending *p;
	pktbuf_begin(b, 'Q');
	if (e || (stmt && stmt_preparable(stmt))) {
		/* One Query, "PREPARE PGV_x ...; EXECUTE PGV_x ..." if the server lacks it */
		bool prefixed = sql_prefix_prepare(server, b, stmt, e);
		p = prep_pending_push_renamed(ps, prefixed ? PEND_QUERY_PREFIXED : PEND_QUERY, prefixed ? stmt : NULL,
					      name, stmt->id);
	} else {
		stmt = NULL;	/* a protocol one with types, not on this server: see the man page */
		p = prep_pending_push_renamed(ps, PEND_QUERY, NULL, name, PREP_SCRATCH_ID);
	}
	if (stmt)
		server->pool->db->stats.total.bind_count++;
	put_sql_name(b, "EXECUTE", stmt ? stmt->id : PREP_SCRATCH_ID);
	prep_pending_shift_positions(p, pkt, sc->p, b);
	pktbuf_put_bytes(b, sc->p, (uint32_t)(sc->end - sc->p));
	send_query(client, pkt, b);
	return true;
}

/*
 * DEALLOCATE [PREPARE] name: the client's name goes (others may use the
 * statement); the server runs a DEALLOCATE of its own scratch copy, so
 * that it fails where PostgreSQL's would (an aborted transaction), and
 * then the name comes back. An unknown name as in handle_use().
 */
static bool sql_deallocate(struct client *client, struct server *server, const struct pkt *pkt, struct sql_scan *sc)
{
	struct prep_server *ps = server->prep;
	char name[PREP_PENDING_NAME_MAX];
	sql_keyword(sc, "prepare");
	struct sql_scan at_name = *sc;
	if (sql_keyword(&at_name, "all") && at_name.p == at_name.end)
		return false;	/* the server's CommandComplete clears everything (prepare_server_message) */
	if (!sql_identifier(sc, name, sizeof(name)) || sc->p != sc->end)
		return false;
	struct prep_stmt *stmt = prep_client_lookup(client, name);
	struct pktbuf *b = scratch();
	pktbuf_begin(b, 'Q');
	if (stmt) {
		put_sql_name(b, "PREPARE", PREP_SCRATCH_ID);
		pktbuf_put_bytes(b, " AS SELECT; ", 12);
		prep_pending_push(ps, PEND_QUERY_DEALLOCATE, stmt, name);
		prep_client_forget_name(client, name, NULL);
	} else {
		prep_pending_push_renamed(ps, PEND_QUERY, NULL, name, PREP_SCRATCH_ID);
	}
	put_sql_name(b, "DEALLOCATE", PREP_SCRATCH_ID);
	send_query(client, pkt, b);
	return true;
}

/*
 * PREPARE name ..., EXECUTE name ..., DEALLOCATE [PREPARE] name, alone in
 * a Query: the client's name is kept here and servers see PGV_<id>, as
 * for protocol-level statements. Anything else (several statements,
 * DEALLOCATE ALL) goes as it is.
 */
/*
 * Whether a NUL-terminated Query text may start with PREPARE, EXECUTE or
 * DEALLOCATE: by its first letter, inline (every Query of a pool with
 * prepared statements asks, and most start otherwise).
 */
static bool may_name_statement(const char *text)
{
	while (sql_space(*text))
		text++;
	switch (*text | 0x20) {	/* | 0x20: a letter's lower case; only P, E, D map to p, e, d */
	case 'p':
	case 'e':
	case 'd':
		return true;
	default:
		return false;
	}
}

static bool handle_query(struct client *client, struct server *server, const struct pkt *pkt)
{
	const char *text = (const char *)pkt_body(pkt);
	uint32_t len = pkt_body_len(pkt);
	struct prep_server *ps = prep_server_state(server);
	if (len > 0 && text[len - 1] == '\0' && may_name_statement(text)) {
		struct sql_scan sc = { .p = text, .end = text + len - 1 };
		while (sc.end > sc.p && (sql_space(sc.end[-1]) || sc.end[-1] == ';'))
			sc.end--;
		sql_skip_space(&sc);
		bool taken = false;
		if (memchr(sc.p, ';', (size_t)(sc.end - sc.p)))
			taken = false;	/* maybe several statements: not ours to split */
		else if (sql_keyword(&sc, "prepare"))
			taken = sql_prepare(client, server, pkt, &sc);
		else if (sql_keyword(&sc, "execute"))
			taken = sql_execute(client, server, pkt, &sc);
		else if (sql_keyword(&sc, "deallocate"))
			taken = sql_deallocate(client, server, pkt, &sc);
		if (taken)
			return true;
	}
	prep_pending_push(ps, PEND_QUERY, NULL, NULL);
	return false;
}

/* Whether the message names a statement (a Query: may; it is not parsed here). */
static bool message_names_statement(const struct pkt *pkt)
{
	const char *body = (const char *)pkt_body(pkt);
	uint32_t len = pkt_body_len(pkt);
	switch (pkt->type) {
	case 'P':
		return len > 0 && body[0];
	case 'B': {
		const char *end = memchr(body, 0, len);
		return end && end + 1 < body + len && end[1];
	}
	case 'D':
	case 'C':
		return len > 1 && body[0] == 'S' && body[1];
	case 'Q':
		return true;
	default:
		return false;
	}
}

/*
 * A Describe of a client statement that returns no rows, which the server
 * lacks, while a Sync or Query is still unanswered: whether the
 * transaction is aborted by then decides how it is answered (from its
 * learned shape: describe_in_aborted; else a Parse first), so it waits
 * for those answers.
 */
static bool describe_awaits_state(struct client *client, struct prep_server *ps, const struct pkt *pkt)
{
	if (pkt->type != 'D' || !ps->ring_len)
		return false;
	const char *body = (const char *)pkt_body(pkt);
	uint32_t len = pkt_body_len(pkt);
	if (len < 2 || body[0] != 'S' || !memchr(body + 1, 0, len - 1))
		return false;
	const struct prep_stmt *stmt = prep_client_lookup(client, body + 1);
	return stmt && stmt->shape == SHAPE_NO_ROWS && !prep_server_lookup(ps, stmt);
}

bool prepare_client_waits(struct client *client, struct server *server, const struct pkt *pkt)
{
	struct prep_server *ps = server->prep;
	if (!ps || server->expect_ready == 0 || !message_names_statement(pkt))
		return false;	/* nothing decided later (expect_ready: a queue out of step never holds) */
	if (!ps->risky_closed && !describe_awaits_state(client, ps, pkt))
		return false;
	/* resumed as awaited answers come in (pending_pop), and asked again */
	ps->holding = true;
	netbuf_pause(&client->nb);
	return true;
}

bool prepare_client_message(struct client *client, struct server *server, const struct pkt *pkt)
{
	if (server->ignore_till_sync && pkt->type != 'S') {
		/*
		 * The server discards it unanswered: nothing to await, no name
		 * made or forgotten (as in PostgreSQL), and those carrying a
		 * statement name go no further.
		 */
		if (!relay_prep_needs_whole(pkt->type))
			return false;
		netbuf_replace(&client->nb, pkt->len, pkt->len, NULL, 0);
		return true;
	}
	switch (pkt->type) {
	case 'P':
		return handle_parse(client, server, pkt);
	case 'B':
	case 'D':
		return handle_use(client, server, pkt);
	case 'C':
		return handle_close(client, server, pkt);
	case 'E':
		prep_pending_push(prep_server_state(server), PEND_OTHER, NULL, NULL);
		server->prep->executed_unsynced = true;
		return false;
	case 'S':
		prep_pending_push(prep_server_state(server), PEND_SYNC, NULL, NULL);
		server->prep->executed_unsynced = false;
		return false;
	case 'Q':
		prep_server_state(server)->executed_unsynced = false;	/* its ReadyForQuery tells the state after it */
		return handle_query(client, server, pkt);
	case 'F':
		prep_pending_push(prep_server_state(server), PEND_QUERY, NULL, NULL);
		server->prep->executed_unsynced = false;
		return false;
	default:	/* Flush, COPY data: no answer of their own */
		return false;
	}
}

/* ---------------------------------------------------------------- process */

bool prepare_client_statement_text(const struct client *client, const char *name, const char **text, size_t *len)
{
	const struct prep_stmt *stmt = prep_client_lookup(client, name);
	if (!stmt)
		return false;
	if (stmt->sql) {
		uint32_t n;
		if (!stmt_plain_query(stmt, text, &n))
			return false;
		*len = n;
		return true;
	}
	*text = (const char *)stmt->body;
	*len = strnlen(*text, stmt->body_len);
	return *len < stmt->body_len;
}

bool prepare_client_has_statement(const struct client *client, const char *name)
{
	return prep_client_lookup(client, name) != NULL;
}

void prepare_client_forget_statement(struct client *client, const char *name)
{
	prep_client_forget_name(client, name, NULL);
}

void prepare_global_cleanup(void)
{
	prep_stmt_unref(prep.probe);
	prep.probe = NULL;
	prep_stmt_unref(prep.probe_exit);
	prep.probe_exit = NULL;
	if (prep.scratch_ready)
		pktbuf_free(&prep.scratch);
	prep.scratch_ready = false;
	prep_stmt_table_free();
}

void prepare_register(void)
{
	relay_hooks.prep_enabled = prepare_enabled;
	relay_hooks.prep_client_message = prepare_client_message;
	relay_hooks.prep_client_waits = prepare_client_waits;
	relay_hooks.prep_server_message = prepare_server_message;
	relay_hooks.prep_answer_owed = prepare_server_answer_owed;
	relay_hooks.prep_client_free = prepare_client_free;
	relay_hooks.prep_server_free = prepare_server_free;
}
