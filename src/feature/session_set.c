/*
 * session_set.c - a client's own SET statements, kept per client and put
 * right on whichever server it uses (see session_set.h for the contract).
 *
 * Owns: struct session_sets snapshots, the server's queue of SETs waiting
 * for their replies. Reads (never changes) a server's protocol state;
 * changes only the sets and varcache values of a server and its client.
 */
#include "common.h"
#include "session_set.h"
#include "client.h"
#include "config.h"
#include "log.h"
#include "pool.h"
#include "server.h"
#include "sql_lex.h"
#include "varcache.h"

#include <ctype.h>
#include <strings.h>

/* ---------------------------------------------------------------- parsing */

/*
 * The next name: a quoted identifier as written, or a word lower-cased
 * with the ".word" parts written right after it (a custom parameter,
 * myapp.tenant, is one name to SET). False if none or too long.
 */
static bool next_word(struct sql_lexer *lx, char *out, size_t size)
{
	struct sql_token tok, dot;
	sql_lex_next(lx, &tok);
	if (!sql_token_name(&tok, out, size))
		return false;
	if (tok.kind != SQL_TOKEN_WORD)
		return true;
	size_t n = strlen(out);
	while (lx->p < lx->end && lx->p[0] == '.') {
		struct sql_lexer at = *lx;
		sql_lex_next(&at, &dot);
		if (sql_lex_next(&at, &tok) != SQL_TOKEN_WORD || tok.start != lx->p + 1 ||
		    !sql_token_name(&tok, out + n + 1, size - n - 1))
			break;
		out[n] = '.';
		n += 1 + tok.len;
		*lx = at;
	}
	return true;
}

/*
 * Whether the rest of the text holds one statement only: no ';' outside
 * quotes and comments, except trailing ones, and nothing unterminated.
 * Dollar quoting counts as "not one statement" (never needed by a SET).
 */
static bool single_statement(struct sql_lexer lx)
{
	struct sql_token tok;
	bool ended = false;	/* past a ';': only more of them may follow */
	for (;;) {
		switch (sql_lex_next(&lx, &tok)) {
		case SQL_TOKEN_END:
			return !lx.unterminated;
		case SQL_TOKEN_SEMICOLON:
			ended = true;
			break;
		case SQL_TOKEN_DOLLAR:
		case SQL_TOKEN_PARAM:
			return false;
		default:
			if (ended || sql_token_is_char(&tok, '$'))
				return false;
		}
	}
}

enum session_set_kind session_set_parse(const char *sql, size_t len, char *name, size_t name_size)
{
	struct sql_lexer lx;
	char w[128], w2[128];

	sql_lex_init(&lx, sql, len, true);

	if (!next_word(&lx, w, sizeof(w)))
		return SESSION_SET_NONE;
	bool is_set = strcmp(w, "set") == 0, is_reset = strcmp(w, "reset") == 0;
	if (strcmp(w, "discard") == 0) {
		/* DISCARD PLANS/SEQUENCES/TEMP leave parameters alone. */
		if (!next_word(&lx, w, sizeof(w)) || strcmp(w, "all") != 0)
			return SESSION_SET_NONE;
		return single_statement(lx) ? SESSION_SET_DISCARD_ALL : SESSION_SET_OPAQUE;
	}
	if (!is_set && !is_reset)
		return SESSION_SET_NONE;
	/* Backslashes (E'' strings) could hide a second statement from single_statement(): never replay those. */
	if (memchr(lx.p, '\\', (size_t)(lx.end - lx.p)) || !single_statement(lx) || !next_word(&lx, w, sizeof(w)))
		return SESSION_SET_OPAQUE;
	if (is_set && strcmp(w, "local") == 0)
		return SESSION_SET_LOCAL;
	if (is_set && strcmp(w, "transaction") == 0)
		return SESSION_SET_LOCAL;
	if (is_set && strcmp(w, "constraints") == 0)
		return SESSION_SET_LOCAL;	/* its own tag, and transaction-scoped */
	if (is_set && strcmp(w, "session") == 0) {
		if (!next_word(&lx, w, sizeof(w)))
			return SESSION_SET_OPAQUE;
		if (strcmp(w, "characteristics") == 0)
			return SESSION_SET_OPAQUE;	/* several default_transaction_* at once */
		if (strcmp(w, "authorization") == 0)
			snprintf(w, sizeof(w), "session_authorization");
	}
	if (is_reset && strcmp(w, "all") == 0)
		return SESSION_SET_RESET_ALL;
	/* The grammar's multi-word names, as the parameters they set. */
	struct sql_lexer peek = lx;
	bool two = next_word(&peek, w2, sizeof(w2));
	if (strcmp(w, "time") == 0 && two && strcmp(w2, "zone") == 0)
		snprintf(w, sizeof(w), "timezone");
	else if (strcmp(w, "session") == 0 && two && strcmp(w2, "authorization") == 0)
		snprintf(w, sizeof(w), "session_authorization");
	else if (strcmp(w, "xml") == 0 && two && strcmp(w2, "option") == 0)
		snprintf(w, sizeof(w), "xmloption");
	else if (is_set && strcmp(w, "names") == 0)
		snprintf(w, sizeof(w), "client_encoding");
	else if (is_set && strcmp(w, "schema") == 0)
		snprintf(w, sizeof(w), "search_path");
	else if (is_reset && strcmp(w, "transaction") == 0)
		return SESSION_SET_LOCAL;
	else if (is_set && strcmp(w, "seed") == 0)
		return SESSION_SET_LOCAL;	/* setseed(): not a parameter to carry */
	if (strlen(w) + 1 > name_size)
		return SESSION_SET_OPAQUE;
	memcpy(name, w, strlen(w) + 1);
	return is_set ? SESSION_SET_SET : SESSION_SET_RESET;
}

/* ---------------------------------------------------------------- snapshots */

struct session_sets *session_sets_ref(struct session_sets *s)
{
	if (s)
		s->refs++;
	return s;
}

void session_sets_unref(struct session_sets *s)
{
	if (!s || --s->refs)
		return;
	for (uint32_t i = 0; i < s->count; i++) {
		free(s->e[i].name);
		free(s->e[i].stmt);
	}
	free(s);
}

static int sets_find(const struct session_sets *s, const char *name)
{
	for (uint32_t i = 0; s && i < s->count; i++)
		if (strcmp(s->e[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* A copy of old without name, with room for one more entry; NULL if nothing would be left. */
static struct session_sets *sets_copy_without(const struct session_sets *old, const char *name, bool room)
{
	uint32_t n = old ? old->count : 0;
	struct session_sets *s = xcalloc(1, sizeof(*s) + (n + 1) * sizeof(s->e[0]));
	s->refs = 1;
	s->unknown_all = old && old->unknown_all;
	for (uint32_t i = 0; i < n; i++) {
		if (name && strcmp(old->e[i].name, name) == 0)
			continue;
		s->e[s->count].name = xstrdup(old->e[i].name);
		s->e[s->count].stmt = old->e[i].stmt ? xstrdup(old->e[i].stmt) : NULL;
		s->count++;
	}
	if (!room && s->count == 0 && !s->unknown_all) {
		free(s);
		return NULL;
	}
	return s;
}

/* *sp with name set to stmt (NULL: unknown value). The old snapshot is released. */
static void sets_put(struct session_sets **sp, const char *name, const char *stmt)
{
	struct session_sets *s = sets_copy_without(*sp, name, true);
	s->e[s->count].name = xstrdup(name);
	s->e[s->count].stmt = stmt ? xstrdup(stmt) : NULL;
	s->count++;
	session_sets_unref(*sp);
	*sp = s;
}

static void sets_remove(struct session_sets **sp, const char *name)
{
	if (sets_find(*sp, name) < 0)
		return;
	struct session_sets *s = sets_copy_without(*sp, name, false);
	session_sets_unref(*sp);
	*sp = s;
}

static void sets_mark_unknown_all(struct session_sets **sp)
{
	if (*sp && (*sp)->unknown_all)
		return;
	struct session_sets *s = sets_copy_without(*sp, NULL, true);
	s->unknown_all = true;
	session_sets_unref(*sp);
	*sp = s;
}

/* ---------------------------------------------------------------- watching a client's statements */

void session_set_check_config(const struct config *cfg)
{
	if (!cfg->track_client_set)
		log_warning("track_client_set is off: in transaction and statement pooling, a client's SET of a parameter "
			    "the server does not report (statement_timeout, search_path on PostgreSQL 15, ...) stays on "
			    "the server for the clients after it, and does not follow the client to other servers");
}

bool session_set_enabled(const struct pool *pool)
{
	/* Session mode: one client per server, and server_reset_query cleans up after it. */
	return pgv.cfg->track_client_set && pool_effective_mode(pool) != POOL_MODE_SESSION;
}

bool session_set_tracks(const struct server *server, const char *name)
{
	int idx = varcache_index(name);
	/* Reported and settable: ParameterStatus keeps the client's value (varcache). */
	return !(varcache_settable(idx) && (server->reported_mask & (UINT64_C(1) << idx)));
}

/* Something changed the server's session unseen: nobody gets it as it is. */
static void server_sets_unknown(struct server *server)
{
	sets_mark_unknown_all(&server->sets);
	server->synced_client_id = 0;
}

/* Whether text[len] starts with keyword (lower case), in any case, followed by no identifier character. */
static inline bool starts_with_keyword(const char *text, size_t len, const char *keyword, size_t n)
{
	if (len < n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (((unsigned char)text[i] | 0x20) != (unsigned char)keyword[i])
			return false;	/* | 0x20: the ASCII lower case of a letter, and no other byte maps to one */
	return len == n || !(isalnum((unsigned char)text[n]) || text[n] == '_' || text[n] == '$');
}

void session_set_note_query(struct server *server, const struct pkt *pkt)
{
	const char *sql = (const char *)pkt_body(pkt);
	size_t len = pkt_body_len(pkt);
	if (server->ignore_till_sync)
		return;		/* discarded unanswered after an error in the extended batch before it */
	/*
	 * Cheap first test, in place: only SET, RESET and DISCARD (or a
	 * comment before the statement) are parsed. A SELECT used to go
	 * through session_set_parse() for its first letter (~350 instructions
	 * per query, the plain relay's largest extra over PgBouncer).
	 */
	size_t i = 0;
	while (i < len && isspace((unsigned char)sql[i]))
		i++;
	const char *first = sql + i;
	size_t rest = len - i;
	bool candidate;
	switch (rest > 0 ? first[0] | 0x20 : 0) {
	case 's':
		candidate = starts_with_keyword(first, rest, "set", 3);
		break;
	case 'r':
		candidate = starts_with_keyword(first, rest, "reset", 5);
		break;
	case 'd':
		candidate = starts_with_keyword(first, rest, "discard", 7);
		break;
	case '-' | 0x20:
	case '/' | 0x20:
		candidate = first[0] == '-' || first[0] == '/';	/* a comment first: the parser skips it */
		break;
	default:
		candidate = false;
	}
	if (!candidate)
		return;
	char name[128];
	enum session_set_kind kind = session_set_parse(sql, len, name, sizeof(name));
	if (kind == SESSION_SET_NONE)
		return;
	if ((kind == SESSION_SET_SET || kind == SESSION_SET_RESET) && !session_set_tracks(server, name))
		kind = SESSION_SET_LOCAL;	/* its CommandComplete is expected, and changes nothing here */
	if (server->set_pending_count >= SESSION_SET_PENDING_MAX) {
		server_sets_unknown(server);	/* too many in flight to follow: reset it all afterwards */
		return;
	}
	struct session_set_pending *p = &server->set_pending[server->set_pending_count++];
	memset(p, 0, sizeof(*p));
	p->kind = (uint8_t)kind;
	p->replies_before = (uint32_t)server->expect_ready;
	p->txn_before = server->txn_status;
	if (kind == SESSION_SET_SET || kind == SESSION_SET_RESET) {
		p->name = xstrdup(name);
		/* kept as written, without trailing semicolons and blanks */
		size_t n = strnlen(sql, len);
		while (n > 0 && (isspace((unsigned char)sql[n - 1]) || sql[n - 1] == ';'))
			n--;
		p->stmt = xmalloc(n + 1);
		memcpy(p->stmt, sql, n);
		p->stmt[n] = '\0';
	}
}

/* Whether tag is want; inline, as it mostly differs within its first bytes (SELECT from SET). */
static inline bool tag_is(const char *tag, const char *want)
{
	size_t i = 0;
	while (tag[i] == want[i] && want[i])
		i++;
	return tag[i] == want[i];
}

void session_set_note_complete(struct server *server, const char *tag)
{
	/* By its first letter, then inline: the tag that comes most is SELECT's, which starts as SET does. */
	const char *set_tag = tag[0] == 'S' ? "SET" : tag[0] == 'R' ? "RESET" : tag[0] == 'D' ? "DISCARD ALL" : NULL;
	if (!set_tag || !tag_is(tag, set_tag))
		return;
	if (server->set_pending_count > 0 && server->set_pending[0].replies_before == 0 &&
	    server->set_pending[0].kind != SESSION_SET_OPAQUE) {
		server->set_pending[0].completed = true;
		return;
	}
	/* A SET we did not parse (extended protocol, several statements, ...). */
	server_sets_unknown(server);
}

static void pending_free(struct session_set_pending *p)
{
	free(p->name);
	free(p->stmt);
	p->name = p->stmt = NULL;
}

void session_set_pending_clear(struct server *server)
{
	for (int i = 0; i < server->set_pending_count; i++)
		pending_free(&server->set_pending[i]);
	server->set_pending_count = 0;
}

/* varcache tracks name but the server does not report it (search_path on PostgreSQL 15). */
static int unreported_var(const struct server *server, const char *name)
{
	int idx = varcache_index(name);
	if (idx < 0 || !varcache_settable(idx) || (server->reported_mask & (UINT64_C(1) << idx)))
		return -1;
	return idx;
}

static void client_sets_changed(struct client *client)
{
	client->vars_gen++;
}

/* RESET ALL / DISCARD ALL left the server at its defaults; unreported tracked values are unknown no more. */
static void forget_unreported(struct server *server, struct client *client)
{
	for (int idx = 0; idx < varcache_count(); idx++) {
		if (!varcache_settable(idx) || (server->reported_mask & (UINT64_C(1) << idx)))
			continue;
		if (varcache_get(server->vars, idx))
			varcache_clear(&server->vars, idx);
		if (client && varcache_get(client->vars, idx))
			varcache_clear(&client->vars, idx);
	}
}

static void pending_finish(struct server *server, struct session_set_pending *p)
{
	struct client *client = server->link;
	bool outside = p->txn_before == 'I' && server->txn_status == 'I';
	if (!p->completed || !client)
		return;
	switch ((enum session_set_kind)p->kind) {
	case SESSION_SET_SET:
	case SESSION_SET_RESET: {
		int idx = unreported_var(server, p->name);
		if (!outside) {
			/* May be committed or rolled back later: the server's value is unknown, the client keeps none. */
			sets_put(&server->sets, p->name, NULL);
			if (idx >= 0)
				varcache_mark_unknown(&server->vars, idx);
			server->synced_client_id = 0;
			break;
		}
		if (p->kind == SESSION_SET_SET) {
			sets_put(&client->sets, p->name, p->stmt);
			if (idx >= 0) {	/* the statement is its value now, for both */
				varcache_mark_unknown(&server->vars, idx);
				varcache_mark_unknown(&client->vars, idx);
			}
		} else {
			sets_remove(&client->sets, p->name);
			if (idx >= 0) {	/* back to the server's default, for both */
				varcache_clear(&server->vars, idx);
				varcache_clear(&client->vars, idx);
			}
		}
		/* The server carries what the client now has for that name. */
		if (p->kind == SESSION_SET_SET)
			sets_put(&server->sets, p->name, p->stmt);
		else
			sets_remove(&server->sets, p->name);
		client_sets_changed(client);
		break;
	}
	case SESSION_SET_RESET_ALL:
	case SESSION_SET_DISCARD_ALL:
		if (!outside) {
			server_sets_unknown(server);
			break;
		}
		session_sets_unref(client->sets);
		client->sets = NULL;
		session_set_cleared(server);
		forget_unreported(server, client);
		client_sets_changed(client);
		/* The reported parameters came back as ParameterStatus: client and server agree on them. */
		break;
	case SESSION_SET_OPAQUE:
		server_sets_unknown(server);
		break;
	case SESSION_SET_NONE:
	case SESSION_SET_LOCAL:
		break;
	}
}

void session_set_note_ready(struct server *server)
{
	if (server->set_pending_count == 0)
		return;
	struct session_set_pending *head = &server->set_pending[0];
	if (head->replies_before == 0) {
		pending_finish(server, head);
		pending_free(head);
		memmove(&server->set_pending[0], &server->set_pending[1],
			(size_t)(server->set_pending_count - 1) * sizeof(server->set_pending[0]));
		server->set_pending_count--;
	}
	for (int i = 0; i < server->set_pending_count; i++) {
		struct session_set_pending *p = &server->set_pending[i];
		if (p->replies_before > 0 && --p->replies_before == 0)
			p->txn_before = server->txn_status;	/* the status it runs in */
	}
}

/* ---------------------------------------------------------------- putting a server right */

static bool is_ascii(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s >= 0x80)
			return false;
	return true;
}

static void put_stmt(struct pktbuf *b, const char *a, const char *name)
{
	pktbuf_put_bytes(b, a, (uint32_t)strlen(a));
	if (name) {
		pktbuf_put_byte(b, '"');
		pktbuf_put_bytes(b, name, (uint32_t)strlen(name));
		pktbuf_put_byte(b, '"');
	}
	pktbuf_put_bytes(b, "; ", 2);
}

/* How to take a name back to the server's default. */
static void put_reset(struct pktbuf *b, const char *name)
{
	if (strcmp(name, "session_authorization") == 0)
		put_stmt(b, "RESET SESSION AUTHORIZATION", NULL);
	else
		put_stmt(b, "RESET ", name);
}

int session_set_diff_sql(const struct session_sets *client, const struct session_sets *server,
			 struct pktbuf *reset, struct pktbuf *replay, bool *reset_all)
{
	int n = 0;
	*reset_all = false;
	if (client == server)
		return 0;	/* the usual case: one snapshot */
	for (uint32_t i = 0; server && i < server->count && !*reset_all; i++)
		if (sets_find(client, server->e[i].name) < 0 &&
		    (!is_ascii(server->e[i].name) || strchr(server->e[i].name, '"')))
			*reset_all = true;	/* spelled in the previous client's encoding, or hard to quote */
	if (server && server->unknown_all)
		*reset_all = true;
	if (*reset_all)
		server = NULL;	/* after RESET ALL it carries nothing */
	for (uint32_t i = 0; server && i < server->count; i++) {
		if (sets_find(client, server->e[i].name) >= 0)
			continue;	/* the client's statement for it follows */
		put_reset(reset, server->e[i].name);
		n++;
	}
	for (uint32_t i = 0; client && i < client->count; i++) {
		const struct session_set_entry *e = &client->e[i];
		int j = sets_find(server, e->name);
		if (j >= 0 && server->e[j].stmt && strcmp(server->e[j].stmt, e->stmt) == 0)
			continue;	/* the same statement ran there already */
		put_stmt(replay, e->stmt, NULL);
		n++;
	}
	return n + *reset_all;
}

void session_set_share(struct client *client, struct server *server)
{
	struct session_sets *a = client->sets, *b = server->sets;
	if (a == b || !a || !b)
		return;
	/* The more shared one wins (ties: either, but always the same), so all end up on one. */
	struct session_sets *keep = (a->refs > b->refs || (a->refs == b->refs && (uintptr_t)a < (uintptr_t)b)) ? a : b;
	client->sets = session_sets_ref(keep);
	server->sets = session_sets_ref(keep);
	session_sets_unref(a);
	session_sets_unref(b);
}

void session_set_cleared(struct server *server)
{
	session_sets_unref(server->sets);
	server->sets = NULL;
}

void session_set_applied(struct server *server, const struct client *client)
{
	struct session_sets *s = session_sets_ref(client->sets);
	session_sets_unref(server->sets);
	server->sets = s;
	/* What the client's own SETs changed among the unreported tracked values is not what varcache says. */
	for (uint32_t i = 0; s && i < s->count; i++) {
		int idx = unreported_var(server, s->e[i].name);
		if (idx >= 0)
			varcache_mark_unknown(&server->vars, idx);
	}
}

static void session_set_client_free(struct client *client)
{
	session_sets_unref(client->sets);
}

static void session_set_server_free(struct server *server)
{
	session_sets_unref(server->sets);
	session_set_pending_clear(server);
}

void session_set_register(void)
{
	relay_hooks.sets_enabled = session_set_enabled;
	relay_hooks.sets_note_query = session_set_note_query;
	relay_hooks.sets_note_complete = session_set_note_complete;
	relay_hooks.sets_note_ready = session_set_note_ready;
	relay_hooks.sets_diff_sql = session_set_diff_sql;
	relay_hooks.sets_share = session_set_share;
	relay_hooks.sets_applied = session_set_applied;
	relay_hooks.sets_cleared = session_set_cleared;
	relay_hooks.sets_client_free = session_set_client_free;
	relay_hooks.sets_server_free = session_set_server_free;
}
