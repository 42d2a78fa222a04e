/*
 * balance.c - the read balancer: which pool a client's transaction runs
 * in. See balance.h for the contract.
 */
#include "common.h"
#include "balance.h"
#include "balance_fresh.h"
#include "client.h"
#include "config.h"
#include "log.h"
#include "netbuf.h"
#include "pool.h"
#include "prepare.h"
#include "proto.h"
#include "relay.h"
#include "roles.h"
#include "server.h"
#include "sql_classify.h"
#include "varcache.h"
#include "volatility.h"

#include <strings.h>

static bool balance_enabled(const struct pool *pool)
{
	const struct db_config *dc = pool->db->cfg;
	int tsa = dc->target_session_attrs;
	if (dc->load_balance_reads <= LOAD_BALANCE_READS_OFF || (tsa != TSA_READ_WRITE && tsa != TSA_PRIMARY) ||
	    pool->db->host_count < 2 || pool->db->is_admin)
		return false;
	/* per transaction, or per statement: whenever a client has no server; session pooling: once */
	return true;
}

/* The SQL text of a whole Query or Parse, and its length; NULL if it has none. */
static const char *packet_text(const struct pkt *pkt, size_t *len)
{
	const char *body = (const char *)pkt_body(pkt);
	size_t n = pkt_body_len(pkt);
	if (pkt->type == 'P') {
		const char *end = memchr(body, '\0', n);	/* the statement's name */
		if (!end)
			return NULL;
		n -= (size_t)(end + 1 - body);
		body = end + 1;
	}
	const char *end = memchr(body, '\0', n);
	if (!end)
		return NULL;
	*len = (size_t)(end - body);
	return body;
}

static bool value_on(const char *v)
{
	if (!v || !v[0] || !strchr("oOtTyY1", v[0]) || (v[1] | 0x20) == 'f')
		return false;	/* "off", "false": most often, answered at once */
	return strcasecmp(v, "on") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0 ||
	       strcasecmp(v, "1") == 0 || strcasecmp(v, "t") == 0;
}

/* default_transaction_read_only is on for this client's session. */
static bool session_read_only(const struct client *client)
{
	static int idx = -2;
	if (idx == -2)
		idx = varcache_index("default_transaction_read_only");
	return idx >= 0 && client->vars && value_on(varcache_get(client->vars, idx));
}

/* Whether text (not NUL-terminated) contains word, any case. */
static bool mentions(const char *text, size_t len, const char *word)
{
	size_t wl = strlen(word);
	for (size_t i = 0; i + wl <= len; i++)
		if (strncasecmp(text + i, word, wl) == 0)
			return true;
	return false;
}

/*
 * auto: the functions the database's primary says are not VOLATILE
 * (volatility.h), and PostgreSQL's own that never write nor ask for a
 * transaction ID (none VOLATILE that writes; once the primary has said,
 * only while no user's VOLATILE function has the name). Any other call
 * stays on the primary.
 */
static bool function_safe(void *arg, const char *name)
{
	const struct db *db = arg;
	bool known = db && volatility_known(db);
	if (known && volatility_safe(db, name))
		return true;
	static const char *const safe[] = {
		"pg_is_in_recovery", "inet_server_addr", "inet_server_port", "host", "count", "sum", "min", "max",
		"avg", "lower", "upper", "length", "abs", "round", "now", "version", "current_database",
	};
	for (size_t i = 0; i < ARRAY_SIZE(safe); i++)
		if (strcmp(name, safe[i]) == 0)	/* PostgreSQL's own, not a user's VOLATILE one of that name */
			return !known || volatility_catalog_only(db, name);
	return false;
}

/* auto: a single statement that only reads (not a transaction start: that is explicit's). */
static bool text_reads(const struct db *db, const char *text, size_t len)
{
	return sql_classify_begin(text, len) == SQL_BEGIN_NONE &&
	       sql_classify_read_only(text, len, function_safe, (void *)db);
}

/* A Bind's (or Describe's) statement name; NULL if malformed or a portal's Describe. */
static const char *used_statement(const struct pkt *pkt)
{
	const char *body = (const char *)pkt_body(pkt);
	size_t n = pkt_body_len(pkt);
	if (pkt->type == 'D') {
		if (n < 2 || body[0] != 'S')
			return NULL;
		body++, n--;
	} else {
		const char *end = memchr(body, '\0', n);	/* the portal's name */
		if (!end)
			return NULL;
		n -= (size_t)(end + 1 - body);
		body = end + 1;
	}
	return memchr(body, '\0', n) ? body : NULL;
}

/*
 * Whether the batch [from, at) holds a message of type whose first name
 * is name: a Parse of a statement (its text was judged there), a Bind of
 * a portal (a named portal lives only in its own transaction).
 */
static bool named_in_batch(const uint8_t *from, const uint8_t *at, uint8_t type, const char *name)
{
	while (from < at) {
		uint32_t len = 1 + proto_read_be32(from + 1);
		if (from[0] == type && strcmp((const char *)from + 5, name) == 0)
			return true;
		from += len;
	}
	return false;
}

/* Whether the statement a Bind or Describe at msg (whole) uses only reads, as far as the batch from `from` tells. */
static bool use_reads(const struct client *client, const uint8_t *from, const struct pkt *msg)
{
	const char *name = used_statement(msg);
	if (!name)
		return msg->type == 'D';	/* a portal's Describe reads nothing */
	const char *text;
	size_t len;
	if (name[0] && prepare_client_statement_text(client, name, &text, &len))
		return text_reads(client->pool->db, text, len);
	return named_in_batch(from, msg->data, 'P', name);	/* unnamed, or new: its Parse in this batch was a read */
}

/*
 * auto, the extended protocol: whether the batch pkt begins (a Parse or a
 * Bind, up to its Sync, all of it already buffered, as libpq and drivers
 * send it) only reads: every Parse's text reads, every statement bound
 * is one of them or a prepared one whose text reads (prepare.c knows the
 * client's names). A batch not whole yet, or with anything else (a Query,
 * a FunctionCall, COPY data), stays on the primary.
 */
static bool batch_reads(const struct client *client, const struct pkt *pkt)
{
	const uint8_t *from = pkt->data, *p = from;
	uint32_t left = netbuf_buffered(&client->nb);
	while (left >= 5) {
		uint32_t len = proto_read_be32(p + 1);
		if (len < 4 || len > left - 1)
			return false;
		struct pkt msg = { .type = p[0], .len = len + 1, .data = p, .avail = len + 1 };
		size_t tlen;
		const char *text;
		switch (msg.type) {
		case 'S':
			return true;
		case 'P':
			text = packet_text(&msg, &tlen);
			if (!text || tlen > BALANCE_QUERY_MAX || !text_reads(client->pool->db, text, tlen))
				return false;
			break;
		case 'B':
		case 'D':
			if (!use_reads(client, from, &msg))
				return false;
			break;
		case 'E':
		case 'C':
		case 'H':
			break;
		default:
			return false;
		}
		p += msg.len;
		left -= msg.len;
	}
	return false;
}

/* The text of the named statement a Bind uses (pgJDBC's BEGIN READ ONLY past prepareThreshold); NULL if none. */
static const char *bound_text(const struct client *client, const struct pkt *pkt, size_t *len)
{
	const char *name = used_statement(pkt), *text;
	return name && name[0] && prepare_client_statement_text(client, name, &text, len) ? text : NULL;
}

/*
 * Whether the transaction pkt starts only reads, as this database's mode
 * counts them; *guessed: a read only by auto's classifier (a standby's
 * 25006 is then the classifier's mistake, not the client's).
 */
static bool starts_read(const struct client *client, const struct pkt *pkt, bool *guessed)
{
	size_t len = 0;
	const char *text = pkt->type == 'B' ? bound_text(client, pkt, &len) : packet_text(pkt, &len);
	if (!text)	/* an unnamed statement parsed before: auto judges its batch */
		return pkt->type == 'B' && client->pool->db->cfg->load_balance_reads == LOAD_BALANCE_READS_AUTO &&
		       (*guessed = batch_reads(client, pkt));
	if (sql_classify_begin(text, len) == SQL_BEGIN_READ_ONLY)
		return true;
	if (session_read_only(client) && !mentions(text, len, "write") && !mentions(text, len, "read_only"))
		return true;
	if (client->pool->db->cfg->load_balance_reads != LOAD_BALANCE_READS_AUTO)
		return false;
	if (pkt->type != 'Q')
		return (*guessed = batch_reads(client, pkt));
	return (*guessed = text_reads(client->pool->db, text, len));
}

/* ---------------------------------------------------------------- the 25006 retry */

/*
 * A simple Query (or an extended batch: batch_retry_len) auto sent
 * to a standby, kept until something of its answer reaches the client:
 * if the standby refuses it as a write (SQLSTATE 25006,
 * read_only_sql_transaction) or goes away first, the error and its
 * ReadyForQuery are dropped, the server goes back to its pool (or
 * closes), and the messages are put back before the client's unread
 * input, to run on the primary.
 */
struct balance_retry {
	bool refused;		/* the standby refused it: its answer is dropped up to ReadyForQuery */
	bool again;		/* put back: the next pick keeps it on the primary */
	bool wrote;		/* refused as a write (25006): on the primary it counts as one for freshness */
	uint32_t len;
	uint8_t *held;		/* answers held back until the first row or the end (holds_back) */
	uint32_t held_len;
	uint32_t held_size;
	uint32_t size;		/* msg's room */
	uint8_t msg[];
};

/*
 * One copy let go, kept for the next: every read auto guesses makes one,
 * and a malloc and a free per read showed in its cost (issue 49, point 5).
 * The process's only; freed at exit (balance_cleanup).
 */
static struct balance_retry *retry_spare;

/* Longest Query or batch kept for a retry, and answers held (longer ones get the standby's error). */
#define BALANCE_RETRY_MAX (64 * 1024)

/*
 * What a standby answers before it runs anything: ParseComplete,
 * BindComplete, ParameterDescription, RowDescription, NoData (the same on
 * the primary).
 */
static bool holds_back(uint8_t type)
{
	return type == '1' || type == '2' || type == 't' || type == 'T' || type == 'n';
}

/*
 * Whether the message at p (whole, of len bytes, in the batch from
 * `from`) lets the batch run again elsewhere. Not: a Parse of a name the
 * client has (PostgreSQL refuses it, 42P05; and so every name a kept
 * batch parses is new, forgotten before it runs again: balance_retry);
 * a Close of a named statement (prepare.c answers it at once itself and
 * forgets the name); an Execute, Describe or Close of a named portal no
 * earlier Bind of the batch made (one from an earlier batch exists only
 * on the server that bound it).
 */
static bool retry_message_ok(const struct client *client, const uint8_t *from, const uint8_t *p, uint32_t len)
{
	const char *body = (const char *)p + 5;
	if (p[0] && strchr("PCDE", p[0]) && !memchr(body, '\0', len - 5))
		return false;	/* no name: malformed (a Flush has no body) */
	switch (p[0]) {
	case 'P':
		return !body[0] || !prepare_client_has_statement(client, body);
	case 'C':
	case 'D':
		if (len < 7 || !body[1])
			return true;	/* the unnamed statement or portal */
		if (body[0] == 'S')
			return p[0] == 'D';
		return named_in_batch(from, p, 'B', body + 1);
	case 'E':
		return !body[0] || named_in_batch(from, p, 'B', body);
	default:
		return true;
	}
}

/*
 * The bytes of the batch pkt begins, through its Sync (batch_reads took
 * it whole), if it can run again elsewhere (retry_message_ok: its named
 * statements and portals included); 0 if not.
 */
static uint32_t batch_retry_len(const struct client *client, const struct pkt *pkt)
{
	const uint8_t *p = pkt->data;
	uint32_t left = netbuf_buffered(&client->nb), total = 0;
	while (left >= 5 && total <= BALANCE_RETRY_MAX) {
		uint32_t len = 1 + proto_read_be32(p + 1);
		if (len < 5 || len > left)
			return 0;
		total += len;
		if (p[0] == 'S')
			return total <= BALANCE_RETRY_MAX ? total : 0;
		if (!retry_message_ok(client, pkt->data, p, len))
			return 0;
		p += len;
		left -= len;
	}
	return 0;
}

static void retry_keep(struct client *client, const struct pkt *pkt)
{
	uint32_t len = pkt->type == 'Q' ? pkt->len : batch_retry_len(client, pkt);
	if (client->balance_retry || !len || len > BALANCE_RETRY_MAX)
		return;
	struct balance_retry *r = retry_spare;
	retry_spare = NULL;
	if (!r || r->size < len) {
		if (r)
			free(r->held);
		free(r);
		uint32_t size = MAX(len, 512);
		r = xmalloc(sizeof(*r) + size);
		r->size = size;
		r->held = NULL;
		r->held_size = 0;
	}
	r->refused = r->again = r->wrote = false;
	r->held_len = 0;
	r->len = len;
	memcpy(r->msg, pkt->data, len);
	client->balance_retry = r;
}

static void retry_drop(struct client *client)
{
	struct balance_retry *r = client->balance_retry;
	client->balance_retry = NULL;
	if (!r)
		return;
	if (!retry_spare && r->size <= 4096 && r->held_size <= 4096) {
		retry_spare = r;	/* small ones only: a 64 kB batch's copy is not kept */
		return;
	}
	free(r->held);
	free(r);
}

void balance_cleanup(void)
{
	if (retry_spare)
		free(retry_spare->held);
	free(retry_spare);
	retry_spare = NULL;
}

static bool refused_as_write(const struct pkt *pkt)
{
	const char *code = proto_error_field(pkt_body(pkt), pkt_body_len(pkt), 'C');
	return code && strcmp(code, "25006") == 0;
}

/* A FATAL (the standby shutting down, terminated): the server closes next, and the Query runs again. */
static bool server_going(const struct pkt *pkt)
{
	const char *severity = proto_error_field(pkt_body(pkt), pkt_body_len(pkt), 'V');
	if (!severity)
		severity = proto_error_field(pkt_body(pkt), pkt_body_len(pkt), 'S');
	return severity && (strcmp(severity, "FATAL") == 0 || strcmp(severity, "PANIC") == 0);
}

/*
 * Whether the message after pkt (whole), already in the server's buffer,
 * says the statement ran: a row or its end. Then pkt need not be held
 * back (nothing of the standby's is refused any more), the usual case: a
 * read's description and first row arrive in one read.
 */
static bool ran_already(const struct server *server, const struct pkt *pkt)
{
	if (netbuf_buffered(&server->nb) <= pkt->len)
		return false;
	uint8_t next = pkt->data[pkt->len];
	return next == 'D' || next == 'C';
}

static enum balance_verdict balance_server_message(struct server *server, const struct pkt *pkt, bool swallowed)
{
	struct client *client = server->link;
	struct balance_retry *r = client->balance_retry;
	if (r->again || !server->pool->standby_reads) {
		retry_drop(client);	/* not on a standby (any more): nothing to run again */
		return BALANCE_PASS;
	}
	if (r->refused)
		return pkt->type == 'Z' ? BALANCE_RETRY : BALANCE_SKIP;
	if (swallowed && pkt->type != 'E')
		return BALANCE_PASS;	/* the answer to prepare.c's own Parse, Describe or Close: never the client's */
	if (swallowed) {
		/* an error prepare.c replaces with its own, which reaches the client after what was held */
		if (r->held_len)
			netbuf_insert(&server->nb, r->held, r->held_len);
		retry_drop(client);
		return BALANCE_PASS;
	}
	if (pkt->type == 'E' && refused_as_write(pkt)) {
		r->refused = r->wrote = true;
		client->pool->db->balance_retries++;
		balance_count_retry(server->pool->db, server->host_idx);
		return BALANCE_SKIP;
	}
	if (pkt->type == 'E' && server_going(pkt)) {
		r->refused = true;	/* no ReadyForQuery comes: balance_server_lost */
		return BALANCE_SKIP;
	}
	if (holds_back(pkt->type) && pkt_complete(pkt) && r->held_len + pkt->len <= BALANCE_RETRY_MAX &&
	    !ran_already(server, pkt)) {
		/* sent before the statement runs: held, so that a refusal after it can still be hidden */
		if (r->held_size < r->held_len + pkt->len) {
			r->held_size = MAX(r->held_len + pkt->len, 256);
			r->held = xrealloc(r->held, r->held_size);
		}
		memcpy(r->held + r->held_len, pkt->data, pkt->len);
		r->held_len += pkt->len;
		return BALANCE_SKIP;
	}
	if (r->held_len)	/* it ran: what was held goes out first, where it was */
		netbuf_insert(&server->nb, r->held, r->held_len);
	retry_drop(client);	/* something of the answer goes out: too late to move it */
	return BALANCE_PASS;
}

/*
 * The names the kept batch msg[len] parses, made for the client on the
 * first pass (new then: retry_message_ok), are forgotten: the client saw
 * none of its ParseCompletes, and the Parses sent again make them anew.
 */
static void forget_parsed(struct client *client, const uint8_t *msg, uint32_t len)
{
	for (uint32_t at = 0; at < len; at += 1 + proto_read_be32(msg + at + 1))
		if (msg[at] == 'P' && msg[at + 5])
			prepare_client_forget_statement(client, (const char *)msg + at + 5);
}

static void balance_retry(struct client *client)
{
	struct balance_retry *r = client->balance_retry;
	if (!r || client->state == CL_CLOSED)
		return;
	r->refused = false;
	r->again = true;
	client_log(LOG_LEVEL_DEBUG, client, "a standby refused or lost its read: run again on the primary");
	forget_parsed(client, r->msg, r->len);
	netbuf_unread(&client->nb, r->msg, r->len);
	client->held_for_ready = false;
	netbuf_pause(&client->nb);
	netbuf_resume(&client->nb);	/* offered again from the loop */
}

/*
 * The standby server of a client holding its Query went away before
 * anything of the answer reached the client (it stopped, it was
 * terminated): true if the Query runs again (the caller unlinks the
 * client instead of closing it, then calls balance_retry).
 */
static bool balance_server_lost(const struct client *client)
{
	const struct balance_retry *r = client->balance_retry;
	return r && !r->again && client->pool->standby_reads;
}

uint64_t balance_retried(const struct db *db)
{
	return db->balance_retries;
}

/*
 * Session pooling: the client's first request (it keeps that server to the
 * end) runs on a standby when its login asked for a read-only session:
 * default_transaction_read_only on (startup packet or options), or
 * options' target_session_attrs read-only, standby or prefer-standby.
 */
static bool session_wants_standby(const struct client *client)
{
	return client->asks_standby || session_read_only(client);
}

/*
 * Tells the freshness module (balance_fresh.h) that pkt starts a
 * transaction, a read or not: a Bind too (a named statement's Execute:
 * asyncpg always, psycopg and pgJDBC past their prepare thresholds).
 * Were such a read taken for a write, each one run on the primary would
 * ask the position, and the reader's floor would rise with the writers'.
 * Only a Query's text may set pgvalve.min_lsn.
 */
static void note_start(struct client *client, const struct pkt *pkt, bool type_query, bool read)
{
	size_t len = 0;
	const char *text = pkt->type == 'Q' || pkt->type == 'P' ? packet_text(pkt, &len) : NULL;
	balance_fresh_start(client, text ? text : "", len, type_query, read);
	/*
	 * A transaction begun by a Query or an unnamed Parse of BEGIN: watched
	 * (balance_statement) until something else runs in it; if nothing
	 * does, it wrote nothing and counts as a read. (A Query drops the
	 * unnamed statement, and a Parse of it is watched: every Bind of the
	 * unnamed statement in such a transaction binds a text seen here.)
	 */
	client->balance_control_only = !read && text && (pkt->type == 'Q' || !*(const char *)pkt_body(pkt)) &&
				       sql_classify_control_only(text, len);
}

/*
 * A statement message of a transaction that ran only BEGIN/COMMIT so far
 * (relay_hooks.balance_statement): whether it too only begins or ends one.
 */
static void balance_statement(struct client *client, const struct pkt *pkt)
{
	size_t len = 0;
	const char *text = NULL, *name;
	if (pkt_complete(pkt) && (pkt->type == 'Q' || pkt->type == 'P'))
		text = packet_text(pkt, &len);
	else if (pkt_complete(pkt) && pkt->type == 'B' && (name = used_statement(pkt)) && !name[0])
		return;		/* the unnamed statement: a Parse of this transaction, seen here */
	else if (pkt_complete(pkt) && pkt->type == 'B')
		text = bound_text(client, pkt, &len);
	if (!text || !sql_classify_control_only(text, len))
		client->balance_control_only = false;
}

static struct pool *balance_pick(struct client *client, const struct pkt *pkt)
{
	struct pool *home = client->pool;
	if (home->standby_reads || client->notify)
		return NULL;
	if (client->balance_retry && client->balance_retry->again) {
		bool refused = client->balance_retry->wrote;
		retry_drop(client);	/* refused there as a write, or its standby lost: this time on the primary */
		if (refused)	/* it writes: for freshness, its position is asked after it */
			note_start(client, pkt, false, false);
		return NULL;
	}
	bool guessed = false, read;
	if (pool_effective_mode(home) == POOL_MODE_SESSION) {
		read = session_wants_standby(client);
	} else {
		read = starts_read(client, pkt, &guessed);
		note_start(client, pkt, pkt->type == 'Q', read);
	}
	if (!read)
		return NULL;
	struct pool *companion = pool_standby_companion(home);
	if (roles_standby_may_serve(home->db) &&
	    !(companion->last_error[0] && pool_login_retry_pending(companion, now_usec()))) {
		struct pool *to = balance_fresh_route(client, companion);
		if (to && guessed)
			retry_keep(client, pkt);
		return to;
	}
	/* none known: while some entry's role is unknown, one server of the companion learns it */
	if (roles_host_unknown(home->db) && list_empty(&companion->login_servers) &&
	    !pool_login_retry_pending(companion, now_usec()))
		server_connect(companion);
	return NULL;
}

/* A client with a kept statement or freshness state is freed. */
static void client_gone(struct client *client)
{
	retry_drop(client);
	if (client->balance_state)
		balance_fresh_client_free(client);
}

void balance_register(void)
{
	balance_fresh_register();
	relay_hooks.balance_enabled = balance_enabled;
	relay_hooks.balance_pick = balance_pick;
	relay_hooks.balance_server_message = balance_server_message;
	relay_hooks.balance_retry = balance_retry;
	relay_hooks.balance_server_lost = balance_server_lost;
	relay_hooks.balance_client_free = client_gone;
	relay_hooks.balance_statement = balance_statement;
}
