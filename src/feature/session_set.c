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
#include "volatility.h"

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
		s->e[s->count].stmt = xstrdup(old->e[i].stmt);
		s->count++;
	}
	if (!room && s->count == 0 && !s->unknown_all) {
		free(s);
		return NULL;
	}
	return s;
}

/* *sp with name set to stmt. The old snapshot is released. */
static void sets_put(struct session_sets **sp, const char *name, const char *stmt)
{
	struct session_sets *s = sets_copy_without(*sp, name, true);
	s->e[s->count].name = xstrdup(name);
	s->e[s->count].stmt = xstrdup(stmt);
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

/*
 * Whether a text (blanks skipped) starts with SET, RESET, DISCARD, DO or a
 * comment: the statements parsed, looked at in place by their first word.
 * A SELECT used to go through session_set_parse() for its first letter
 * (~350 instructions per query, the plain relay's largest extra over
 * PgBouncer).
 */
static inline __attribute__((always_inline)) bool starts_like_set(const char *first, size_t rest)
{
	switch (rest > 0 ? first[0] | 0x20 : 0) {
	case 's':	/* SELECT's case: unrolled, it differs at the third letter */
		return rest >= 3 && (first[1] | 0x20) == 'e' && (first[2] | 0x20) == 't' &&
		       starts_with_keyword(first, rest, "set", 3);
	case 'r':
		return starts_with_keyword(first, rest, "reset", 5);
	case 'd':
		return starts_with_keyword(first, rest, "discard", 7) || starts_with_keyword(first, rest, "do", 2);
	case '-' | 0x20:
	case '/' | 0x20:
		return first[0] == '-' || first[0] == '/';	/* a comment first: the parser skips it */
	default:
		return false;
	}
}

/* ---------------------------------------------------------------- what a transaction may have changed */

/*
 * Custom parameters (myapp.tenant) that PostgreSQL has only as
 * placeholders are not listed in pg_settings: learning asks for each by
 * name, those the client's text names this transaction and those its set
 * carries already. Past SESSION_LEARN_NAMES_MAX, the rest are not learned
 * (the server is then reset for others: learn_wanted's opaque).
 */
#define SESSION_LEARN_NAMES_MAX 32

struct session_learn {
	int name_count;
	char *names[SESSION_LEARN_NAMES_MAX];
	/*
	 * The common case asked cheaply: a transaction whose only changes
	 * were parsed SETs and RESETs (BEGIN; SET search_path ...; COMMIT as
	 * separate statements, what drivers outside autocommit send) asks
	 * current_setting() of those names alone, not pg_settings (a scan of
	 * every parameter, about half a millisecond of the server's).
	 */
	int asked_count;
	char *asked[SESSION_LEARN_NAMES_MAX];
	bool unnamed;			/* something else wants learning: pg_settings, all of it */
	bool by_name;			/* in flight: asked by name (merged into the client's set) */
	struct session_sets *rows;	/* learned so far (refs 1), NULL until the first */
	uint32_t rows_cap;
	bool opaque;			/* in flight: its transaction's sets_opaque, or a row too long to carry */
};

static struct session_learn *learn_state(struct server *server)
{
	if (!server->sets_learning)
		server->sets_learning = xcalloc(1, sizeof(*server->sets_learning));
	return server->sets_learning;
}

/* The transaction may have changed the session: learn it at its end (opaque: and reset it for others). */
static void learn_wanted(struct server *server, bool opaque)
{
	server->sets_learn = true;
	learn_state(server)->unnamed = true;
	if (opaque)
		server->sets_opaque = true;
}

/* A parsed SET or RESET of name (a parameter's own name) inside a transaction block: asked by name. */
static void learn_named(struct server *server, const char *name)
{
	struct session_learn *l = learn_state(server);
	server->sets_learn = true;
	for (int i = 0; i < l->asked_count; i++)
		if (strcmp(l->asked[i], name) == 0)
			return;
	if (l->asked_count == SESSION_LEARN_NAMES_MAX) {
		l->unnamed = true;
		return;
	}
	l->asked[l->asked_count++] = xstrdup(name);
}

/* A custom parameter's name the client's text sets: asked for by name when learning. */
static void learn_name(struct server *server, const char *name)
{
	if (!strchr(name, '.'))
		return;	/* a parameter of PostgreSQL's own: pg_settings lists it */
	struct session_learn *l = learn_state(server);
	for (int i = 0; i < l->name_count; i++)
		if (strcmp(l->names[i], name) == 0)
			return;
	if (l->name_count == SESSION_LEARN_NAMES_MAX) {
		learn_wanted(server, true);
		return;
	}
	l->names[l->name_count++] = xstrdup(name);
}

static void learn_free(struct session_learn *l)
{
	if (!l)
		return;
	for (int i = 0; i < l->name_count; i++)
		free(l->names[i]);
	for (int i = 0; i < l->asked_count; i++)
		free(l->asked[i]);
	session_sets_unref(l->rows);
	free(l);
}

/* What the transaction under way noted for learning, forgotten. */
static void learn_forget(struct server *server)
{
	server->sets_learn = false;
	server->sets_opaque = false;
	learn_free(server->sets_learning);
	server->sets_learning = NULL;
}

/* The learn in flight (its query sent), done with. */
static void learn_in_flight_forget(struct server *server)
{
	learn_free(server->sets_learn_in_flight);
	server->sets_learn_in_flight = NULL;
}

/* The value of a plain '...' string token (no E'', U&''), into out; false if not one or too long. */
static bool plain_string_value(const struct sql_token *tok, char *out, size_t size)
{
	if (tok->kind != SQL_TOKEN_STRING || tok->unterminated || tok->len < 2 || tok->start[0] != '\'')
		return false;
	size_t n = 0;
	for (size_t i = 1; i + 1 < tok->len; i++) {
		if (tok->start[i] == '\\')
			return false;	/* standard_conforming_strings off would read it otherwise */
		if (tok->start[i] == '\'')
			i++;	/* '' is one quote */
		if (n + 1 >= size)
			return false;
		out[n++] = tok->start[i];
	}
	out[n] = '\0';
	return true;
}

static void scan_text(struct server *server, const char *sql, size_t len, int depth);

/* After "set_config": a literal first argument is a name to learn; anything else cannot be followed by name. */
static void scan_set_config(struct server *server, struct sql_lexer *lx)
{
	struct sql_token tok;
	char name[128];
	learn_wanted(server, false);
	if (sql_lex_next(lx, &tok) != SQL_TOKEN_OP || !sql_token_is_char(&tok, '(') ||
	    !plain_string_value((sql_lex_next(lx, &tok), &tok), name, sizeof(name))) {
		learn_wanted(server, true);
		return;
	}
	for (char *c = name; *c; c++)
		*c = (char)tolower((unsigned char)*c);	/* PostgreSQL folds a parameter's name */
	learn_name(server, name);
}

/* After a statement's first word SET or RESET: its name, if a custom one, is learned. */
static void scan_set_statement(struct server *server, struct sql_lexer *lx)
{
	char name[128];
	struct sql_lexer at = *lx;
	if (!next_word(&at, name, sizeof(name)))
		return;
	if (strcmp(name, "session") == 0 || strcmp(name, "local") == 0)
		if (!next_word(&at, name, sizeof(name)))
			return;
	learn_name(server, name);
}

/* After DO: the body's own SETs and set_config() calls, read as SQL (PL/pgSQL lexes alike). */
static void scan_do_body(struct server *server, struct sql_lexer *lx, int depth)
{
	struct sql_token tok;
	learn_wanted(server, true);	/* and whatever it calls or EXECUTEs */
	for (int i = 0; i < 3 && sql_lex_next(lx, &tok) != SQL_TOKEN_END; i++) {
		if (tok.kind == SQL_TOKEN_DOLLAR && !tok.unterminated) {
			const char *close = memchr(tok.start + 1, '$', tok.len - 1);	/* the end of the opening tag */
			size_t tag = close ? (size_t)(close - tok.start) + 1 : tok.len;
			if (tok.len >= 2 * tag && depth == 0)
				scan_text(server, tok.start + tag, tok.len - 2 * tag, depth + 1);
			return;
		}
		if (tok.kind == SQL_TOKEN_STRING || tok.kind == SQL_TOKEN_SEMICOLON)
			return;	/* a '...' body: its quotes doubled, not worth reading */
	}
}

/*
 * Reads a text for what learning must ask by name: SET and RESET of
 * custom parameters at the start of each statement, set_config() calls
 * anywhere, DO bodies (one level).
 */
static __attribute__((noinline)) void scan_text(struct server *server, const char *sql, size_t len, int depth)
{
	struct sql_lexer lx;
	struct sql_token tok;
	bool at_start = true;
	sql_lex_init(&lx, sql, len, true);
	while (sql_lex_next(&lx, &tok) != SQL_TOKEN_END) {
		bool start = at_start;
		at_start = tok.kind == SQL_TOKEN_SEMICOLON;
		if (tok.kind != SQL_TOKEN_WORD)
			continue;
		if (sql_token_is(&tok, "set_config"))
			scan_set_config(server, &lx);
		else if (start && (sql_token_is(&tok, "set") || sql_token_is(&tok, "reset")))
			scan_set_statement(server, &lx);
		else if (start && sql_token_is(&tok, "do"))
			scan_do_body(server, &lx, depth);
		else if (start && (sql_token_is(&tok, "begin") || sql_token_is(&tok, "start")))
			at_start = true;	/* PL/pgSQL's BEGIN opens a block whose first statement follows */
	}
	if (lx.unterminated)
		learn_wanted(server, true);
}

/*
 * Whether a NUL-terminated text names a function of the database that may
 * change a session setting (volatility_setters): learned, and reset for
 * others (what it set under a custom name is not known). Costs nothing
 * where the database has none.
 */
static __attribute__((noinline)) void scan_setter_calls(struct server *server, const char *sql)
{
	size_t n;
	const char *const *names = volatility_setters(server->pool->db, &n);
	for (size_t i = 0; i < n; i++) {
		if (strcasestr(sql, names[i])) {
			learn_wanted(server, true);
			return;
		}
	}
}

/*
 * Whether a text that does not start with SET, RESET, DISCARD or DO may
 * still change settings: it calls set_config(), or has more than one
 * statement. The marks (sql_lex.h) answer no for most texts at no cost.
 */
static __attribute__((noinline)) bool text_may_set_slow(const struct relay_text *rt)
{
	const char *sql = rt->sql, *end = rt->sql + rt->len;
	if (rt->marks & SQL_MARK_UNDERSCORE_C)
		for (const char *p = sql_find_pair(sql, rt->len, '_' | 0x20, 'c'); p;
		     p = sql_find_pair(p + 1, (size_t)(end - p - 1), '_' | 0x20, 'c'))
			if (p - sql >= 3 && end - p >= 7 && strncasecmp(p - 3, "set_config", 10) == 0)
				return true;
	if (!(rt->marks & SQL_MARK_SEMI_INSIDE))
		return false;
	const char *semi = memchr(sql, ';', rt->len);
	while (semi && semi < end && (*semi == ';' || isspace((unsigned char)*semi)))
		semi++;
	return semi && semi < end;	/* more than one statement: any of them may be a SET */
}

static inline bool text_may_set(const struct relay_text *rt)
{
	return (rt->marks & (SQL_MARK_UNDERSCORE_C | SQL_MARK_SEMI_INSIDE)) && text_may_set_slow(rt);
}

/*
 * A Parse: a statement that may change settings is learned after the
 * transaction; a named one may run again in later transactions, each of
 * which is then learned (its client's sets_learn_always).
 */
static void note_parse(struct server *server, const struct relay_text *rt)
{
	const char *first = rt->sql;
	while (*first == ' ' || (*first >= '\t' && *first <= '\r'))	/* isspace() in C's locale, inline */
		first++;
	size_t rest = rt->len - (size_t)(first - rt->sql);
	bool was = server->sets_learn;
	if (volatility_any_setters())
		scan_setter_calls(server, first);
	if (starts_like_set(first, rest) || text_may_set(rt))
		scan_text(server, first, rest, 0);
	if (!was && server->sets_learn && rt->named && server->link)
		server->link->sets_learn_always = true;
}

/* A Query whose first word is SET, RESET, DISCARD or DO (or a comment): parsed, and followed if one SET. */
static __attribute__((noinline)) void note_set_statement(struct server *server, const char *sql, size_t len,
							  const char *first, size_t rest)
{
	scan_text(server, first, rest, 0);
	char name[128];
	enum session_set_kind kind = session_set_parse(sql, len, name, sizeof(name));
	if (kind == SESSION_SET_NONE)
		return;
	if ((kind == SESSION_SET_SET || kind == SESSION_SET_RESET) && !session_set_tracks(server, name))
		kind = SESSION_SET_LOCAL;	/* its CommandComplete is expected, and changes nothing here */
	if (server->set_pending_count >= SESSION_SET_PENDING_MAX) {
		learn_wanted(server, false);	/* too many in flight to follow: learned afterwards */
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

void session_set_note_query(struct server *server, const struct pkt *pkt, const struct relay_text *rt)
{
	if (server->ignore_till_sync)
		return;		/* discarded unanswered after an error in the extended batch before it */
	if (!rt) {
		learn_wanted(server, true);	/* too long to read whole: learned, and reset for others */
		return;
	}
	if (pkt->type == 'P') {
		note_parse(server, rt);
		return;
	}
	const char *sql = rt->sql;
	size_t len = rt->len;
	size_t i = 0;
	while (i < len && (sql[i] == ' ' || (sql[i] >= '\t' && sql[i] <= '\r')))	/* isspace(), inline */
		i++;
	const char *first = sql + i;
	size_t rest = len - i;
	if (!starts_like_set(first, rest)) {
		if (text_may_set(rt))
			scan_text(server, first, rest, 0);
		if (volatility_any_setters())
			scan_setter_calls(server, first);
		return;
	}
	note_set_statement(server, sql, len, first, rest);
}

/* A write ran: a trigger or a column default may have changed settings where the database has such (volatility.h). */
static void note_write(struct server *server)
{
	if (volatility_setters_on_writes(server->pool->db))
		learn_wanted(server, true);
}

/* CREATE or ALTER of what may change settings when called: pg_proc is read again (volatility.h). */
static void note_ddl(struct server *server, const char *tag)
{
	const char *what = strchr(tag, ' ');
	if (what && (strcmp(what, " FUNCTION") == 0 || strcmp(what, " PROCEDURE") == 0 || strcmp(what, " VIEW") == 0 ||
		     strcmp(what, " TRIGGER") == 0 || strcmp(what, " RULE") == 0))
		volatility_stale(server->pool->db);
}

void session_set_note_complete(struct server *server, const char *tag)
{
	/* The tag that comes most (SELECT n) is told apart by its first letters, no strcmp. */
	bool set_tag;
	switch (tag[0]) {
	case 'S':
		set_tag = tag[1] == 'E' && tag[2] == 'T' && tag[3] == '\0';
		break;
	case 'R':
		set_tag = strcmp(tag, "RESET") == 0;
		break;
	case 'D':
		if (tag[1] == 'O' && tag[2] == '\0') {
			learn_wanted(server, true);	/* a DO block may have run SET or set_config() under any name */
			return;
		}
		set_tag = strcmp(tag, "DISCARD ALL") == 0;
		if (!set_tag)
			note_write(server);	/* DELETE */
		break;
	case 'C':
		if (tag[1] == 'A' && strcmp(tag, "CALL") == 0)
			learn_wanted(server, true);	/* and so may a procedure */
		else if (tag[1] == 'R')
			note_ddl(server, tag);	/* CREATE ... */
		else
			note_write(server);	/* COPY */
		return;
	case 'A':
		note_ddl(server, tag);	/* ALTER ... */
		return;
	default:
		note_write(server);	/* INSERT, UPDATE, MERGE */
		return;
	}
	if (!set_tag)
		return;
	if (server->set_pending_count > 0 && server->set_pending[0].replies_before == 0 &&
	    server->set_pending[0].kind != SESSION_SET_OPAQUE) {
		server->set_pending[0].completed = true;
		return;
	}
	/* A SET we did not parse (extended protocol, several statements, ...): learned afterwards. */
	learn_wanted(server, false);
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
			/* May be committed or rolled back later: what stays is learned when the transaction ends. */
			learn_named(server, p->name);
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
			learn_wanted(server, false);
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
		learn_wanted(server, false);
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
		if (j >= 0 && strcmp(server->e[j].stmt, e->stmt) == 0)
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

/* ---------------------------------------------------------------- learning a session */

/*
 * The session-level settings, as PostgreSQL lists them (SET and
 * set_config() by anyone: the client, a function, a DO block), and the
 * two it does not list there; custom parameters by name.
 */
/* " UNION ALL SELECT 'name', current_setting('name', true)" for each of names. */
static void put_asked(struct pktbuf *out, char *const *names, int count)
{
	for (int i = 0; i < count; i++) {
		char lit[300];
		if (!proto_quote_literal(names[i], lit, sizeof(lit)))
			continue;
		pktbuf_put_bytes(out, " UNION ALL SELECT ", 18);
		pktbuf_put_bytes(out, lit, (uint32_t)strlen(lit));
		pktbuf_put_bytes(out, ", pg_catalog.current_setting(", 29);
		pktbuf_put_bytes(out, lit, (uint32_t)strlen(lit));
		pktbuf_put_bytes(out, ", true)", 7);
	}
}

static void session_set_learn_sql(struct server *server, struct pktbuf *out)
{
	static const char head[] =
		"SELECT 'session_authorization', pg_catalog.current_setting('session_authorization') "
		"UNION ALL SELECT 'role', pg_catalog.current_setting('role')";
	static const char all[] =
		" UNION ALL SELECT name, setting FROM pg_catalog.pg_settings WHERE source = 'session'";
	pktbuf_put_bytes(out, head, sizeof(head) - 1);
	struct session_learn *l = learn_state(server);
	/* (a statement the client prepared in an earlier transaction sets server->sets_learn alone) */
	l->by_name = !l->unnamed && l->asked_count > 0 && !server->sets_opaque &&
		     !(server->link && server->link->sets_learn_always);
	if (l->by_name) {
		put_asked(out, l->asked, l->asked_count);
	} else {
		pktbuf_put_bytes(out, all, sizeof(all) - 1);
		const struct session_sets *has = server->link ? server->link->sets : NULL;
		for (uint32_t i = 0; has && i < has->count; i++)
			learn_name(server, has->e[i].name);	/* what it carries may be gone now */
		put_asked(out, l->names, l->name_count);
	}
	/*
	 * In flight from now on: the client's next transaction may reach the
	 * server behind this query, and what it notes for learning is its own.
	 */
	l->opaque = server->sets_opaque;
	learn_in_flight_forget(server);
	server->sets_learn_in_flight = l;
	server->sets_learning = NULL;
	server->sets_learn = false;
	server->sets_opaque = false;
}

/* The column at *r (length and bytes) into out, NUL-terminated: 1, 0 for NULL, -1 cut short or too long. */
static int row_text(const uint8_t **r, const uint8_t *end, char *out, size_t size)
{
	if (end - *r < 4)
		return -1;
	int32_t n = (int32_t)proto_read_be32(*r);
	*r += 4;
	if (n == -1)
		return 0;
	if (n < 0 || (size_t)n >= size || end - *r < n)
		return -1;
	memcpy(out, *r, (size_t)n);
	out[n] = '\0';
	*r += n;
	return 1;
}

/* Whether a learned (name, value) is the client's own, to be carried: not a default, not varcache's. */
static bool learned_is_own(const struct server *server, const char *name, const char *value)
{
	if (strcmp(name, "role") == 0)
		return strcmp(value, "none") != 0;
	if (strcmp(name, "session_authorization") == 0)
		return strcmp(value, server->pool->user) != 0;
	return session_set_tracks(server, name);
}

static void session_set_learn_row(struct server *server, const struct pkt *pkt)
{
	const uint8_t *r = pkt_body(pkt), *end = r + pkt_body_len(pkt);
	char name[256], value[4096], name_lit[300], value_lit[8200];
	if (end - r < 2 || r[0] != 0 || r[1] != 2)
		return;
	r += 2;
	int got = row_text(&r, end, name, sizeof(name));
	if (got > 0)
		got = row_text(&r, end, value, sizeof(value));
	struct session_learn *l = server->sets_learn_in_flight;
	if (!l)
		return;
	if (got < 0)
		l->opaque = true;	/* a name or value too long to carry: reset for others */
	if (got <= 0)
		return;	/* NULL: a custom parameter not set here */
	if (!learned_is_own(server, name, value))
		return;
	if (sets_find(l->rows, name) >= 0 || !proto_quote_literal(name, name_lit, sizeof(name_lit)) ||
	    !proto_quote_literal(value, value_lit, sizeof(value_lit)))
		return;
	char *stmt = xmalloc(strlen(name_lit) + strlen(value_lit) + 64);
	sprintf(stmt, "SELECT pg_catalog.set_config(%s, %s, false)", name_lit, value_lit);
	if (!l->rows || l->rows->count == l->rows_cap) {
		uint32_t cap = l->rows_cap ? l->rows_cap * 2 : 8;
		l->rows = xrealloc(l->rows, sizeof(*l->rows) + cap * sizeof(l->rows->e[0]));
		if (!l->rows_cap)
			l->rows->refs = 1, l->rows->count = 0, l->rows->unknown_all = false;
		l->rows_cap = cap;
	}
	l->rows->e[l->rows->count].name = xstrdup(name);
	l->rows->e[l->rows->count].stmt = stmt;
	l->rows->count++;
}

/* varcache's parameters the server does not report (search_path on 15): now as learned, for both. */
static void learned_unreported(struct server *server, struct client *client, const struct session_sets *s)
{
	for (int idx = 0; idx < varcache_count(); idx++) {
		if (!varcache_settable(idx) || (server->reported_mask & (UINT64_C(1) << idx)))
			continue;
		if (sets_find(s, varcache_name(idx)) >= 0) {	/* the set's statement is its value */
			varcache_mark_unknown(&server->vars, idx);
			varcache_mark_unknown(&client->vars, idx);
		} else {	/* at the server's default */
			if (varcache_get(server->vars, idx))
				varcache_clear(&server->vars, idx);
			if (varcache_get(client->vars, idx))
				varcache_clear(&client->vars, idx);
		}
	}
}

/*
 * The client's session is what was learned: its set from now on, and the
 * server's. Where learning could not see everything (opaque), the server
 * is marked for a reset before another client's transaction; its own
 * client coming back finds it as it left it (synced to it).
 */
static void session_set_learn_done(struct server *server, bool failed)
{
	struct client *client = server->link;
	struct session_learn *l = server->sets_learn_in_flight;
	if (failed || !client || !l) {
		if (client)
			client_log(LOG_LEVEL_WARNING, client, "could not learn the session settings its transaction changed");
		server_sets_unknown(server);
		learn_in_flight_forget(server);
		return;
	}
	struct session_sets *s = l->rows;
	l->rows = NULL;
	if (l->by_name) {	/* the names asked are as learned; the rest of the client's set as it was */
		struct session_sets *merged = session_sets_ref(client->sets);
		sets_remove(&merged, "session_authorization");
		sets_remove(&merged, "role");
		for (int i = 0; i < l->asked_count; i++)
			sets_remove(&merged, l->asked[i]);
		for (uint32_t i = 0; s && i < s->count; i++)
			sets_put(&merged, s->e[i].name, s->e[i].stmt);
		session_sets_unref(s);
		s = merged;
	}
	session_sets_unref(client->sets);
	client->sets = s;
	session_sets_unref(server->sets);
	server->sets = session_sets_ref(s);
	if (l->opaque)
		sets_mark_unknown_all(&server->sets);
	learned_unreported(server, client, s);
	client_sets_changed(client);
	server->synced_client_id = client->id;
	server->synced_vars_gen = client->vars_gen;
	learn_in_flight_forget(server);
}

static void session_set_learn_dropped(struct server *server)
{
	server_sets_unknown(server);
	learn_forget(server);
}

static void session_set_client_free(struct client *client)
{
	session_sets_unref(client->sets);
}

static void session_set_server_free(struct server *server)
{
	session_sets_unref(server->sets);
	session_set_pending_clear(server);
	learn_forget(server);
	learn_in_flight_forget(server);
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
	relay_hooks.sets_learn_sql = session_set_learn_sql;
	relay_hooks.sets_learn_row = session_set_learn_row;
	relay_hooks.sets_learn_done = session_set_learn_done;
	relay_hooks.sets_learn_dropped = session_set_learn_dropped;
}
