/*
 * prepare.c - named prepared statements across pooled servers (see
 * prepare.h for the contract).
 *
 * Three tables:
 *   shared statements  process-wide hash of statement bodies, refcounted;
 *   client maps        per client, its names -> shared statements;
 *   server caches      per server, the statements prepared on it, in LRU
 *                      order, at most max_prepared_statements.
 * and one queue per server of the answers it owes, so that answers
 * pgvalve makes itself go to the client in protocol order and answers to
 * messages pgvalve injected never reach it.
 *
 * Owns: everything above. Touches clients and servers only through their
 * netbufs (replace/insert) and their `prep` pointers.
 */
#include "common.h"
#include "prepare.h"
#include "client.h"
#include "config.h"
#include "log.h"
#include "pool.h"
#include "server.h"
#include "sql_lex.h"

/* Server-side name: prefix plus the statement id in hex. */
#define PREP_SERVER_PREFIX "PGV_"
#define PREP_SERVER_NAME_MAX 24
/* Client names up to this length are kept in the awaited answers themselves, longer ones on the heap. */
#define PREP_PENDING_NAME_MAX 64
/* The rewrite buffer is kept between messages up to this size. */
#define PREP_SCRATCH_KEEP (256 * 1024)

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

/* Process-wide: the shared statements, and a scratch buffer for rewritten messages. */
static struct {
	struct prep_stmt **buckets;
	uint32_t nbuckets;
	uint32_t count;
	uint64_t bytes;
	uint64_t next_id;
	struct pktbuf scratch;
	bool scratch_ready;
	struct prep_stmt *probe;	/* "SELECT": a statement any server can be made to hold (probe_stmt) */
	struct prep_stmt *probe_exit;	/* "ROLLBACK": the same, in an aborted transaction too */
} prep;

/* ---------------------------------------------------------------- helpers */

static uint32_t hash_bytes(const void *data, size_t len)
{
	/* FNV-1a: statement texts are short and this is off the per-Bind path. */
	const uint8_t *p = data;
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 16777619u;
	}
	return h;
}

static uint32_t hash_id(uint64_t id)
{
	id ^= id >> 33;
	id *= 0xff51afd7ed558ccdULL;
	id ^= id >> 33;
	return (uint32_t)id;
}

/* Writes PGV_<id in hex> and its NUL into buf; returns the length. Once per Bind: no snprintf. */
static uint32_t server_name_of_id(uint64_t id, char *buf)
{
	static const char hex[] = "0123456789abcdef";
	char digits[16];
	uint32_t n = 0;
	do {
		digits[n++] = hex[id & 15];
		id >>= 4;
	} while (id);
	uint32_t len = sizeof(PREP_SERVER_PREFIX) - 1;
	memcpy(buf, PREP_SERVER_PREFIX, len);
	while (n)
		buf[len++] = digits[--n];
	buf[len] = '\0';
	return len;
}

static uint32_t server_name_of(const struct prep_stmt *stmt, char *buf)
{
	return server_name_of_id(stmt->id, buf);
}

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

/* ---------------------------------------------------------------- shared statements */

static void stmt_table_grow(void)
{
	uint32_t n = prep.nbuckets ? prep.nbuckets * 2 : 256;
	struct prep_stmt **b = xcalloc(n, sizeof(*b));
	for (uint32_t i = 0; i < prep.nbuckets; i++) {
		struct prep_stmt *s = prep.buckets[i];
		while (s) {
			struct prep_stmt *next = s->hnext;
			s->hnext = b[s->hash & (n - 1)];
			b[s->hash & (n - 1)] = s;
			s = next;
		}
	}
	free(prep.buckets);
	prep.buckets = b;
	prep.nbuckets = n;
}

/* The shared statement with this body, made if new; the caller gets a reference. */
static struct prep_stmt *stmt_get(const uint8_t *body, uint32_t len, bool sql)
{
	uint32_t h = hash_bytes(body, len) ^ (sql ? 0x9e3779b9u : 0);
	if (prep.nbuckets) {
		for (struct prep_stmt *s = prep.buckets[h & (prep.nbuckets - 1)]; s; s = s->hnext) {
			if (s->hash == h && s->body_len == len && s->sql == sql && memcmp(s->body, body, len) == 0) {
				s->refs++;
				return s;
			}
		}
	}
	if (prep.count >= prep.nbuckets)
		stmt_table_grow();
	struct prep_stmt *s = xmalloc(sizeof(*s) + len);
	s->id = ++prep.next_id;
	s->hash = h;
	s->refs = 1;
	s->body_len = len;
	s->sql = sql;
	s->shape = SHAPE_UNKNOWN;
	s->param_desc = NULL;
	s->param_desc_len = 0;
	memcpy(s->body, body, len);
	s->hnext = prep.buckets[h & (prep.nbuckets - 1)];
	prep.buckets[h & (prep.nbuckets - 1)] = s;
	prep.count++;
	prep.bytes += sizeof(*s) + len;
	return s;
}

static void stmt_ref(struct prep_stmt *s)
{
	s->refs++;
}

static void stmt_unref(struct prep_stmt *s)
{
	if (!s || --s->refs > 0)
		return;
	struct prep_stmt **pp = &prep.buckets[s->hash & (prep.nbuckets - 1)];
	while (*pp != s)
		pp = &(*pp)->hnext;
	*pp = s->hnext;
	prep.count--;
	prep.bytes -= sizeof(*s) + s->body_len + s->param_desc_len;
	free(s->param_desc);
	free(s);
}

/* ---------------------------------------------------------------- client maps */

static struct prep_client_entry **client_slot(struct prep_client *pc, const char *name, uint32_t h)
{
	struct prep_client_entry **pp = &pc->buckets[h & (pc->nbuckets - 1)];
	while (*pp && ((*pp)->hash != h || strcmp((*pp)->name, name) != 0))
		pp = &(*pp)->hnext;
	return pp;
}

static struct prep_stmt *client_lookup(const struct client *client, const char *name)
{
	struct prep_client *pc = client->prep;
	if (!pc || !pc->count)
		return NULL;
	uint32_t h = hash_bytes(name, strlen(name));
	struct prep_client_entry *e = *client_slot(pc, name, h);
	return e ? e->stmt : NULL;
}

static void client_map_grow(struct prep_client *pc)
{
	uint32_t n = pc->nbuckets ? pc->nbuckets * 2 : 16;
	struct prep_client_entry **b = xcalloc(n, sizeof(*b));
	for (uint32_t i = 0; i < pc->nbuckets; i++) {
		struct prep_client_entry *e = pc->buckets[i];
		while (e) {
			struct prep_client_entry *next = e->hnext;
			e->hnext = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
			e = next;
		}
	}
	free(pc->buckets);
	pc->buckets = b;
	pc->nbuckets = n;
}

/* Binds the client's name to stmt (taking the caller's reference), replacing what it named. */
static void client_bind_name(struct client *client, const char *name, struct prep_stmt *stmt)
{
	if (!client->prep)
		client->prep = xcalloc(1, sizeof(*client->prep));
	struct prep_client *pc = client->prep;
	if (pc->count >= pc->nbuckets)
		client_map_grow(pc);
	uint32_t h = hash_bytes(name, strlen(name));
	struct prep_client_entry **pp = client_slot(pc, name, h);
	if (*pp) {
		stmt_unref((*pp)->stmt);
		(*pp)->stmt = stmt;
		return;
	}
	size_t nlen = strlen(name) + 1;
	struct prep_client_entry *e = xmalloc(sizeof(*e) + nlen);
	memcpy(e->name, name, nlen);
	e->hash = h;
	e->stmt = stmt;
	e->hnext = NULL;
	*pp = e;
	pc->count++;
}

/* Forgets the client's name; if `only` is set, only while it still names that statement. */
static void client_forget_name(struct client *client, const char *name, const struct prep_stmt *only)
{
	struct prep_client *pc = client->prep;
	if (!pc || !pc->count)
		return;
	struct prep_client_entry **pp = client_slot(pc, name, hash_bytes(name, strlen(name)));
	struct prep_client_entry *e = *pp;
	if (!e || (only && e->stmt != only))
		return;
	*pp = e->hnext;
	pc->count--;
	stmt_unref(e->stmt);
	free(e);
}

static void client_forget_all(struct client *client)
{
	struct prep_client *pc = client->prep;
	if (!pc)
		return;
	for (uint32_t i = 0; i < pc->nbuckets; i++) {
		struct prep_client_entry *e = pc->buckets[i];
		while (e) {
			struct prep_client_entry *next = e->hnext;
			stmt_unref(e->stmt);
			free(e);
			e = next;
		}
		pc->buckets[i] = NULL;
	}
	pc->count = 0;
}

/* client->prep shares its slot with a replication connection's state (client.h): those have none. */
static bool client_has_prep(const struct client *client)
{
	return client->kind != CLIENT_REPLICATION && client->prep;
}

void prepare_client_free(struct client *client)
{
	if (!client_has_prep(client))
		return;
	client_forget_all(client);
	free(client->prep->buckets);
	free(client->prep);
	client->prep = NULL;
}

uint32_t prepare_client_count(const struct client *client)
{
	return client_has_prep(client) ? client->prep->count : 0;
}

/* ---------------------------------------------------------------- server caches */

static struct prep_server *server_state(struct server *server)
{
	if (!server->prep) {
		struct prep_server *ps = xcalloc(1, sizeof(*ps));
		list_init(&ps->lru);
		server->prep = ps;
	}
	return server->prep;
}

static struct prep_server_entry **server_slot(struct prep_server *ps, const struct prep_stmt *stmt)
{
	struct prep_server_entry **pp = &ps->buckets[hash_id(stmt->id) & (ps->nbuckets - 1)];
	while (*pp && (*pp)->stmt != stmt)
		pp = &(*pp)->hnext;
	return pp;
}

static struct prep_server_entry *server_lookup(struct prep_server *ps, const struct prep_stmt *stmt)
{
	return ps->count ? *server_slot(ps, stmt) : NULL;
}

static void server_cache_grow(struct prep_server *ps)
{
	uint32_t n = ps->nbuckets ? ps->nbuckets * 2 : 16;
	struct prep_server_entry **b = xcalloc(n, sizeof(*b));
	for (uint32_t i = 0; i < ps->nbuckets; i++) {
		struct prep_server_entry *e = ps->buckets[i];
		while (e) {
			struct prep_server_entry *next = e->hnext;
			uint32_t slot = hash_id(e->stmt->id) & (n - 1);
			e->hnext = b[slot];
			b[slot] = e;
			e = next;
		}
	}
	free(ps->buckets);
	ps->buckets = b;
	ps->nbuckets = n;
}

static void server_cache_add(struct prep_server *ps, struct prep_stmt *stmt)
{
	if (ps->count >= ps->nbuckets)
		server_cache_grow(ps);
	struct prep_server_entry **pp = server_slot(ps, stmt);
	if (*pp)
		return;
	struct prep_server_entry *e = xmalloc(sizeof(*e));
	e->stmt = stmt;
	stmt_ref(stmt);
	e->hnext = NULL;
	*pp = e;
	list_append(&ps->lru, &e->lru);
	ps->count++;
}

static void server_cache_remove(struct prep_server *ps, const struct prep_stmt *stmt)
{
	if (!ps->count)
		return;
	struct prep_server_entry **pp = server_slot(ps, stmt);
	struct prep_server_entry *e = *pp;
	if (!e)
		return;
	*pp = e->hnext;
	list_remove(&ps->lru, &e->lru);
	ps->count--;
	stmt_unref(e->stmt);
	free(e);
}

/* e's statement was just used on this server: the last one LRU eviction takes. */
static void server_cache_touch(struct prep_server *ps, struct prep_server_entry *e)
{
	list_remove(&ps->lru, &e->lru);
	list_append(&ps->lru, &e->lru);
}

static void server_cache_clear(struct prep_server *ps)
{
	while (ps->count) {
		struct prep_server_entry *e = container_of(list_first(&ps->lru), struct prep_server_entry, lru);
		server_cache_remove(ps, e->stmt);
	}
}

uint32_t prepare_server_count(const struct server *server)
{
	return server->prep ? server->prep->count : 0;
}

/* ---------------------------------------------------------------- awaited answers */

/* Queues an awaited answer; name (may be NULL) is copied. */
static struct prep_pending *pending_push(struct prep_server *ps, uint8_t kind, struct prep_stmt *stmt,
					 const char *name)
{
	if (ps->ring_len == ps->ring_cap) {
		uint32_t cap = ps->ring_cap ? ps->ring_cap * 2 : 16;
		struct prep_pending *ring = xmalloc(cap * sizeof(*ring));
		for (uint32_t i = 0; i < ps->ring_len; i++)
			ring[i] = ps->ring[(ps->ring_head + i) & (ps->ring_cap - 1)];
		free(ps->ring);
		ps->ring = ring;
		ps->ring_cap = cap;
		ps->ring_head = 0;
	}
	struct prep_pending *p = &ps->ring[(ps->ring_head + ps->ring_len) & (ps->ring_cap - 1)];
	ps->ring_len++;
	ps->risky_open += (PEND_RISKY >> kind) & 1;
	if (kind == PEND_SYNC || kind >= PEND_QUERY) {	/* its answer ends a segment: the risky ones before it are closed */
		ps->risky_closed += ps->risky_open;
		ps->risky_open = 0;
	}
	/* Field by field: one per awaited answer, and the name buffer needs no clearing. */
	p->kind = kind;
	p->tags = 0;
	p->rename = false;
	p->sid = 0;
	p->pos_from = 0;
	p->pos_shift = 0;
	p->name[0] = '\0';
	p->long_name = NULL;
	p->stmt = stmt;
	if (stmt)
		stmt_ref(stmt);
	if (name) {
		size_t n = strlen(name);
		if (n < sizeof(p->name))
			memcpy(p->name, name, n + 1);
		else
			p->long_name = xstrdup(name);
	}
	return p;
}

/* The same, for a message sent under server name PGV_<sid>: its errors name the client's `name` instead. */
static struct prep_pending *pending_push_renamed(struct prep_server *ps, uint8_t kind, struct prep_stmt *stmt,
						 const char *name, uint64_t sid)
{
	struct prep_pending *p = pending_push(ps, kind, stmt, name);
	p->rename = true;
	p->sid = sid;
	return p;
}

static bool text_is_ascii(const char *text, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if ((uint8_t)text[i] >= 0x80)
			return false;
	return true;
}

/*
 * The Query being built in b goes in place of the client's: its bytes
 * from b->len on are the client's from `client_at` on. Error positions
 * the server gives from there are shifted back (owe_corrected_error).
 */
static void pending_shift_positions(struct prep_pending *p, const struct pkt *pkt, const char *client_at,
				    const struct pktbuf *b)
{
	const char *text = (const char *)pkt_body(pkt);
	const char *built = (const char *)b->buf + b->msg_start + 5;	/* after 'Q' and the length */
	size_t built_len = (size_t)((const char *)b->buf + b->len - built), client_len = (size_t)(client_at - text);
	if (!text_is_ascii(built, built_len) || !text_is_ascii(text, client_len)) {
		/*
		 * Positions count characters, which depend on client_encoding
		 * (not read here) once a name or text before the client's is not
		 * ASCII: then no position rather than a wrong one.
		 */
		p->pos_from = UINT32_MAX;
		return;
	}
	p->pos_from = (uint32_t)built_len + 1;
	p->pos_shift = (int32_t)built_len - (int32_t)client_len;
}

static const char *pending_name(const struct prep_pending *p)
{
	return p->long_name ? p->long_name : p->name;
}

static bool pending_is_query(const struct prep_pending *p)
{
	return p->kind >= PEND_QUERY;
}

/* The i-th awaited answer from the head (i < ring_len). */
static struct prep_pending *pending_at(struct prep_server *ps, uint32_t i)
{
	return &ps->ring[(ps->ring_head + i) & (ps->ring_cap - 1)];
}

static struct prep_pending *pending_head(struct prep_server *ps)
{
	return ps->ring_len ? &ps->ring[ps->ring_head] : NULL;
}

/* The server rejected or discarded p's message: undoes what pgvalve did for it when it was sent. */
static void pending_undo(struct server *server, const struct prep_pending *p)
{
	struct prep_server *ps = server->prep;
	switch (p->kind) {
	case PEND_PARSE:
	case PEND_PARSE_INJECTED:
	case PEND_PARSE_CHECK:
		/* Never created here (or, checked, refused): as PostgreSQL, the name does not exist. */
		if (p->kind != PEND_PARSE_CHECK)
			server_cache_remove(ps, p->stmt);
		if (p->kind != PEND_PARSE_INJECTED && server->link)
			client_forget_name(server->link, pending_name(p), p->stmt);
		break;
	case PEND_CLOSE_EVICT:	/* the Close was discarded: the server still has it */
		server_cache_add(ps, p->stmt);
		break;
	case PEND_CLOSE_OWED:	/* the client's Close was discarded: the name stays */
		if (p->stmt && server->link && !client_lookup(server->link, pending_name(p))) {
			stmt_ref(p->stmt);
			client_bind_name(server->link, pending_name(p), p->stmt);
		}
		break;
	default:
		break;
	}
}

/* Drops the head (answered; a failed one was undone first: pending_fail_segment). */
static void pending_pop(struct server *server)
{
	struct prep_server *ps = server->prep;
	struct prep_pending *p = &ps->ring[ps->ring_head];
	stmt_unref(p->stmt);
	free(p->long_name);
	p->stmt = NULL;
	p->long_name = NULL;
	ps->ring_head = (ps->ring_head + 1) & (ps->ring_cap - 1);
	ps->ring_len--;
	if ((PEND_RISKY >> p->kind) & 1) {
		if (ps->risky_closed)	/* the closed ones come first in the ring */
			ps->risky_closed--;
		else
			ps->risky_open--;
	}
	if (ps->holding && !ps->risky_closed) {
		ps->holding = false;
		if (server->link)
			netbuf_resume(&server->link->nb);
	}
}

static void pending_clear(struct server *server)
{
	struct prep_server *ps = server->prep;
	while (ps && ps->ring_len)
		pending_pop(server);
}

/* Answers pgvalve owes the client, once everything before them was answered. */
void prepare_server_answer_owed(struct server *server)
{
	struct prep_server *ps = server->prep;
	struct prep_pending *p;
	if (ps && ps->owed_error) {
		netbuf_insert(&server->nb, ps->owed_error, ps->owed_error_len);
		free(ps->owed_error);
		ps->owed_error = NULL;
	}
	while (ps && (p = pending_head(ps)) && (p->kind == PEND_CLOSE_OWED || p->kind == PEND_DESCRIBE_OWED)) {
		static const uint8_t close_complete[5] = { '3', 0, 0, 0, 4 };
		static const uint8_t no_data[5] = { 'n', 0, 0, 0, 4 };
		if (p->kind == PEND_CLOSE_OWED) {
			netbuf_insert(&server->nb, close_complete, 5);
		} else {
			netbuf_insert(&server->nb, p->stmt->param_desc, p->stmt->param_desc_len);
			netbuf_insert(&server->nb, no_data, 5);
		}
		pending_pop(server);
	}
}

/*
 * The awaited answers before the next Sync (or Query: `to_query`) failed
 * or were discarded. Undone last first, so that each undo finds what its
 * message found when it was sent (a Close, then a Parse of the same name).
 */
static void pending_fail_segment(struct server *server, bool to_query)
{
	struct prep_server *ps = server->prep;
	uint32_t n = 0;
	while (n < ps->ring_len) {
		const struct prep_pending *p = pending_at(ps, n);
		if (p->kind == PEND_SYNC || (to_query && pending_is_query(p)))
			break;
		n++;
	}
	for (uint32_t i = n; i-- > 0;)
		pending_undo(server, pending_at(ps, i));
	while (n-- > 0)
		pending_pop(server);
}


/* A field of the ErrorResponse being rebuilt: `v` (NUL-terminated) as the client must see it. */
static bool put_corrected_field(struct pktbuf *b, uint8_t code, const char *v, size_t vlen,
				const struct prep_pending *p, const char *quoted, uint32_t qlen)
{
	const char *at = code == 'M' && p->rename ? memmem(v, vlen, quoted, qlen) : NULL;
	if (at) {
		pktbuf_put_byte(b, code);
		pktbuf_put_bytes(b, v, (uint32_t)(at - v) + 1);
		pktbuf_put_bytes(b, pending_name(p), (uint32_t)strlen(pending_name(p)));
		pktbuf_put_string(b, at + qlen - 1);
		return true;
	}
	if (code == 'P' && p->pos_from) {
		long pos = strtol(v, NULL, 10);
		if (pos < (long)p->pos_from)
			return true;	/* inside pgvalve's text: no position the client could use */
		char num[24];	/* any long */
		snprintf(num, sizeof(num), "%ld", pos - p->pos_shift);
		pktbuf_put_byte(b, code);
		pktbuf_put_string(b, num);
		return true;
	}
	pktbuf_put_byte(b, code);
	pktbuf_put_bytes(b, v, (uint32_t)vlen);
	pktbuf_put_byte(b, 0);
	return false;
}

/*
 * The server's error is about a message pgvalve rewrote: it names
 * PGV_<sid> where PostgreSQL would name the client's statement, or its
 * position counts pgvalve's text. The same ErrorResponse, as PostgreSQL
 * would have sent it to the client, is owed in its place. False if
 * nothing needed correcting (a syntax error, no position): it goes as it is.
 */
static bool owe_corrected_error(struct prep_server *ps, const struct pkt *pkt, const struct prep_pending *p)
{
	char quoted[PREP_SERVER_NAME_MAX + 2];
	quoted[0] = '"';
	uint32_t qlen = server_name_of_id(p->sid, quoted + 1) + 2;
	quoted[qlen - 1] = '"';
	const uint8_t *f = pkt_body(pkt), *end = f + pkt_body_len(pkt);
	struct pktbuf b;
	pktbuf_init(&b, pkt_body_len(pkt) + 64);
	pktbuf_begin(&b, 'E');
	bool corrected = false;
	while (f < end && *f) {
		const char *v = (const char *)f + 1;
		size_t vlen = strnlen(v, (size_t)(end - f) - 1);
		if (v + vlen == (const char *)end) {	/* a field without its NUL: passed on as it came */
			corrected = false;
			break;
		}
		corrected |= put_corrected_field(&b, *f, v, vlen, p, quoted, qlen);
		f += vlen + 2;
	}
	pktbuf_put_byte(&b, 0);
	pktbuf_end(&b);
	if (corrected) {
		free(ps->owed_error);
		ps->owed_error = xmalloc(b.len);
		memcpy(ps->owed_error, b.buf, b.len);
		ps->owed_error_len = b.len;
	}
	pktbuf_free(&b);
	return corrected;
}

static bool is_tag(const struct pkt *pkt, const char *tag)
{
	size_t n = strlen(tag) + 1;
	return pkt_body_len(pkt) == n && memcmp(pkt_body(pkt), tag, n) == 0;
}

/* A CommandComplete within a Query: which of its tags are pgvalve's, and when nothing is left to undo. */
static enum prepare_verdict query_tag(struct prep_pending *p)
{
	bool first = p->tags++ == 0;
	bool through = true;	/* the statement pgvalve may have to undo went through */
	enum prepare_verdict v = PREPARE_FORWARD;
	switch (p->kind) {
	case PEND_QUERY_PREFIXED:	/* pgvalve's PREPARE, then the client's statement */
		through = first;
		v = first ? PREPARE_SKIP : PREPARE_FORWARD;
		break;
	case PEND_QUERY_CHECKED:	/* the client's PREPARE under SCRATCH, then pgvalve's DEALLOCATE */
		v = first ? PREPARE_FORWARD : PREPARE_SKIP;
		break;
	case PEND_QUERY_DEALLOCATE:	/* pgvalve's PREPARE of SCRATCH, then the client's DEALLOCATE of it */
		through = !first;
		v = first ? PREPARE_SKIP : PREPARE_FORWARD;
		break;
	default:
		break;
	}
	if (through) {
		stmt_unref(p->stmt);
		p->stmt = NULL;
	}
	return v;
}

/* An error within a Query: undoes what pgvalve did, for the statement that did not go through. */
static void query_failed(struct server *server, struct prep_pending *p)
{
	struct client *client = server->link;
	if (!p->stmt)
		return;		/* nothing to undo, or it went through */
	switch (p->kind) {
	case PEND_QUERY_PREPARE:
	case PEND_QUERY_PREFIXED:	/* the statement is not on this server */
		server_cache_remove(server->prep, p->stmt);
		if (p->kind == PEND_QUERY_PREPARE && client)
			client_forget_name(client, pending_name(p), p->stmt);
		break;
	case PEND_QUERY_CHECKED:	/* as PostgreSQL, the client's PREPARE failed */
		if (client)
			client_forget_name(client, pending_name(p), p->stmt);
		break;
	case PEND_QUERY_DEALLOCATE:	/* as PostgreSQL, the statement was not deallocated */
		if (client && !client_lookup(client, pending_name(p))) {
			stmt_ref(p->stmt);
			client_bind_name(client, pending_name(p), p->stmt);
		}
		break;
	default:
		break;
	}
	stmt_unref(p->stmt);
	p->stmt = NULL;
}

/* The ParameterDescription of pgvalve's Describe after stmt's first Parse. */
static void learn_parameters(struct prep_stmt *stmt, const struct pkt *pkt)
{
	if (stmt->param_desc)
		return;		/* learned on another server meanwhile */
	stmt->param_desc = xmalloc(pkt->len);
	memcpy(stmt->param_desc, pkt->data, pkt->len);
	stmt->param_desc_len = pkt->len;
	prep.bytes += pkt->len;
}

/* Its NoData or RowDescription: only a statement returning no rows keeps its parameters. */
static void learn_shape(struct prep_stmt *stmt, enum stmt_shape shape)
{
	if (stmt->shape == SHAPE_UNKNOWN && (shape == SHAPE_ROWS || stmt->param_desc))
		stmt->shape = (uint8_t)shape;
	if (stmt->shape != SHAPE_NO_ROWS && stmt->param_desc) {
		prep.bytes -= stmt->param_desc_len;
		free(stmt->param_desc);
		stmt->param_desc = NULL;
		stmt->param_desc_len = 0;
	}
}

/* ParseComplete or CloseComplete: whose it is. */
static enum prepare_verdict parse_or_close_complete(struct server *server, struct prep_pending *head, uint8_t type)
{
	uint8_t kind = head->kind;
	if (kind == PEND_PARSE_DUP) {
		/* Only if PGV_<sid> was dropped behind pgvalve's back: that name now holds another text. */
		server_log(LOG_LEVEL_WARNING, server, "a statement pgvalve prepared was gone: closing when released");
		server->close_needed = true;
	}
	pending_pop(server);
	bool ours = (type == '1' && kind == PEND_PARSE_INJECTED) ||
		    (type == '3' && (kind == PEND_CLOSE_EVICT || kind == PEND_CLOSE_SCRATCH));
	return ours ? PREPARE_SKIP : PREPARE_FORWARD;
}

enum prepare_verdict prepare_server_message(struct server *server, const struct pkt *pkt)
{
	struct prep_server *ps = server->prep;
	struct prep_pending *head = ps ? pending_head(ps) : NULL;

	/* DEALLOCATE ALL and DISCARD ALL (the client's or a reset query) empty the server and the client. */
	if (ps && pkt->type == 'C' &&
	    (pkt_body_len(pkt) == sizeof("DISCARD ALL") || pkt_body_len(pkt) == sizeof("DEALLOCATE ALL"))) {
		if (!pkt_complete(pkt))
			return PREPARE_NEED_MORE;
		if (is_tag(pkt, "DISCARD ALL") || is_tag(pkt, "DEALLOCATE ALL")) {
			server_cache_clear(ps);
			if (server->link && server->internal == SV_INTERNAL_NONE)
				client_forget_all(server->link);
		}
	}
	if (!head || server->internal != SV_INTERNAL_NONE)
		return PREPARE_FORWARD;	/* notices, ParameterStatus, pgvalve's own queries, or nothing awaited */
	switch (pkt->type) {
	case '1':
	case '3':
		return parse_or_close_complete(server, head, pkt->type);
	case 't':	/* ParameterDescription: whole (server.c waits for it) */
		if (head->kind != PEND_DESCRIBE_LEARN)
			return PREPARE_FORWARD;
		learn_parameters(head->stmt, pkt);
		return PREPARE_SKIP;
	case 'n':	/* NoData */
	case 'T':
		if (head->kind == PEND_DESCRIBE_LEARN) {
			learn_shape(head->stmt, pkt->type == 'n' ? SHAPE_NO_ROWS : SHAPE_ROWS);
			pending_pop(server);
			return PREPARE_SKIP;
		}
		if (pkt->type == 'T') {
			if (head->kind == PEND_DESCRIBE)
				pending_pop(server);
			return PREPARE_FORWARD;
		}
		/* NoData ends a Describe as these end their messages */
		/* fall through */
	case '2':	/* BindComplete */
	case 's':	/* PortalSuspended */
	case 'I':	/* EmptyQueryResponse */
		if (!pending_is_query(head))
			pending_pop(server);
		return PREPARE_FORWARD;
	case 'C':
		if (pending_is_query(head))
			return query_tag(head);
		pending_pop(server);
		return PREPARE_FORWARD;
	case 'E': {
		bool correct = head->rename || head->pos_from;
		enum prepare_verdict v = correct && owe_corrected_error(ps, pkt, head) ? PREPARE_SKIP : PREPARE_FORWARD;
		if (pending_is_query(head))
			query_failed(server, head);
		else
			pending_fail_segment(server, false);	/* the head failed, the server skips up to the Sync */
		return v;
	}
	case 'Z':
		/* What is still awaited before the Sync or Query it answers was discarded after an error. */
		pending_fail_segment(server, true);
		if (pending_head(ps))
			pending_pop(server);
		if (ps->ring_len && server->expect_ready <= 1 && !server->unsynced) {
			/*
			 * The server owes nothing more, yet answers are awaited: the
			 * queue is out of step (a Sync PostgreSQL ignored, after an
			 * extended COPY). Forgotten, so that no later answer is
			 * matched against it and no client waits on it.
			 */
			server_log(LOG_LEVEL_DEBUG, server, "%u awaited answers left at the last ReadyForQuery: dropped",
				   ps->ring_len);
			pending_clear(server);
		}
		return PREPARE_FORWARD;
	default:
		return PREPARE_FORWARD;
	}
}

void prepare_server_free(struct server *server)
{
	struct prep_server *ps = server->prep;
	if (!ps)
		return;
	pending_clear(server);
	server_cache_clear(ps);
	free(ps->owed_error);
	free(ps->ring);
	free(ps->buckets);
	free(ps);
	server->prep = NULL;
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
	server_name_of_id(sid, name);
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
	uint32_t n = server_name_of_id(sid, sname);
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
	struct prep_server *ps = server_state(server);
	struct prep_server_entry *e = server_lookup(ps, stmt);
	if (e) {
		server_cache_touch(ps, e);
		return false;
	}
	while (ps->count >= (uint32_t)pgv.cfg->max_prepared_statements) {
		struct prep_server_entry *victim = container_of(list_first(&ps->lru), struct prep_server_entry, lru);
		char name[PREP_SERVER_NAME_MAX];
		server_name_of(victim->stmt, name);
		pktbuf_begin(b, 'C');
		pktbuf_put_byte(b, 'S');
		pktbuf_put_string(b, name);
		pktbuf_end(b);
		pending_push(ps, PEND_CLOSE_EVICT, victim->stmt, NULL);
		server_cache_remove(ps, victim->stmt);
	}
	put_parse(b, stmt, stmt->id);
	server_cache_add(ps, stmt);
	pending_push(ps, parse_kind, stmt, client_name);
	server->pool->db->stats.total.server_parse_count++;
	if (stmt->shape == SHAPE_UNKNOWN && !stmt->sql) {
		/* Once per statement, in the same batch: its shape, for describe_in_aborted() */
		char name[PREP_SERVER_NAME_MAX];
		server_name_of(stmt, name);
		pktbuf_begin(b, 'D');
		pktbuf_put_byte(b, 'S');
		pktbuf_put_string(b, name);
		pktbuf_end(b);
		pending_push(ps, PEND_DESCRIBE_LEARN, stmt, NULL);
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
		prep.probe = stmt_get(body, sizeof(body), false);
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
		prep.probe_exit = stmt_get(body, sizeof(body), false);
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
	struct prep_server *ps = server_state(server);
	struct prep_stmt *target = old;
	/* PgBouncer's log line, which operators alert on; the client gets PostgreSQL's 42P05 */
	client_log(LOG_LEVEL_ERROR, client, "prepared statement '%s' was already prepared", name);
	if (!server_lookup(ps, old))
		target = ps->count ? container_of(list_first(&ps->lru), struct prep_server_entry, lru)->stmt
				   : probe_exit_stmt();
	struct pktbuf *b = scratch();
	ensure_on_server(server, b, target, PEND_PARSE_INJECTED, NULL);
	char sname[PREP_SERVER_NAME_MAX];
	server_name_of(target, sname);
	pktbuf_begin(b, 'P');
	pktbuf_put_string(b, sname);
	pktbuf_put_bytes(b, r->data + r->pos, pkt_remaining(r));
	pktbuf_end(b);
	pending_push_renamed(ps, PEND_PARSE_DUP, NULL, name, target->id);
	send_built(client, pkt, b, 0);
	return true;
}

static bool handle_parse(struct client *client, struct server *server, const struct pkt *pkt)
{
	struct pkt_reader r;
	pkt_reader_init(&r, pkt_body(pkt), pkt_body_len(pkt));
	const char *name = pkt_get_string(&r);
	if (!name || !name[0]) {	/* unnamed (or malformed: the server says so) */
		pending_push(server_state(server), PEND_OTHER, NULL, NULL);
		return false;
	}
	server->pool->db->stats.total.client_parse_count++;
	struct prep_stmt *old = client_lookup(client, name);
	if (old)
		return parse_duplicate(client, server, pkt, &r, name, old);
	struct prep_stmt *stmt = stmt_get(r.data + r.pos, pkt_remaining(&r), false);
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
		pending_push(server->prep, PEND_PARSE_CHECK, stmt, name);
		pending_push(server->prep, PEND_CLOSE_SCRATCH, NULL, NULL);
	}
	client_bind_name(client, name, stmt);	/* takes stmt_get's reference */
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
	       !server->prep->executed_unsynced && !server_lookup(server->prep, stmt);
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
	struct prep_server *ps = server_state(server);
	if (r.failed || !is_statement || !name[0]) {	/* unnamed, a portal, or malformed: as it is */
		pending_push(ps, kind, NULL, NULL);
		return false;
	}
	struct prep_stmt *stmt = client_lookup(client, name);
	if (stmt && !stmt_parseable(stmt) && !server_lookup(ps, stmt))
		stmt = NULL;	/* a SQL one with types, not on this server: see the man page */
	if (stmt && pkt->type == 'D' && describe_in_aborted(server, stmt)) {
		pending_push(ps, PEND_DESCRIBE_OWED, stmt, NULL);
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
	uint32_t sname_len = server_name_of_id(stmt ? stmt->id : PREP_SCRATCH_ID, sname);
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
	pending_push_renamed(ps, kind, NULL, name, stmt ? stmt->id : PREP_SCRATCH_ID);
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
		pending_push(server_state(server), PEND_OTHER, NULL, NULL);
		return false;
	}
	/*
	 * Others may use the same statement: only the client's name goes;
	 * PostgreSQL answers even unknown names. The pending answer keeps the
	 * statement: a Close discarded after an error leaves the name.
	 */
	pending_push(server_state(server), PEND_CLOSE_OWED, client_lookup(client, name), name);
	client_forget_name(client, name, NULL);
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
		server_cache_touch(ps, e);
		return false;
	}
	put_prepare_text(b, stmt, stmt->id);
	pktbuf_put_bytes(b, "; ", 2);
	server_cache_add(ps, stmt);
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
	struct prep_stmt *target = server_lookup(ps, old) || stmt_preparable(old) ? old : probe_stmt();
	struct pktbuf *b = scratch();
	pktbuf_begin(b, 'Q');
	bool prefixed = sql_prefix_prepare(server, b, target, server_lookup(ps, target));
	struct prep_pending *p = pending_push_renamed(ps, prefixed ? PEND_QUERY_PREFIXED : PEND_QUERY,
						      prefixed ? target : NULL, name, target->id);
	put_sql_name(b, "PREPARE", target->id);
	pending_shift_positions(p, pkt, text, b);
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
	struct prep_stmt *old = client_lookup(client, name);
	if (old)
		return sql_prepare_duplicate(client, server, pkt, name, old, sc->p, (size_t)(sc->end - sc->p));
	struct prep_stmt *stmt = stmt_get((const uint8_t *)sc->p, (uint32_t)(sc->end - sc->p), true);
	struct pktbuf *b = scratch();
	pktbuf_begin(b, 'Q');
	if (server_lookup(ps, stmt)) {
		/* The server has it: checked there under the scratch name, then dropped (as parse's check). */
		put_prepare_text(b, stmt, PREP_SCRATCH_ID);
		b->len -= stmt->body_len;	/* to measure what comes before the client's text */
		pending_shift_positions(pending_push(ps, PEND_QUERY_CHECKED, stmt, name), pkt, sc->p, b);
		b->len += stmt->body_len;
		put_sql_name(b, "; DEALLOCATE", PREP_SCRATCH_ID);
	} else {
		put_prepare_text(b, stmt, stmt->id);
		b->len -= stmt->body_len;
		pending_shift_positions(pending_push(ps, PEND_QUERY_PREPARE, stmt, name), pkt, sc->p, b);
		b->len += stmt->body_len;
		server_cache_add(ps, stmt);
		server->pool->db->stats.total.server_parse_count++;
	}
	client_bind_name(client, name, stmt);	/* takes stmt_get's reference */
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
	struct prep_stmt *stmt = client_lookup(client, name);
	struct prep_server_entry *e = stmt ? server_lookup(ps, stmt) : NULL;
	struct pktbuf *b = scratch();
	struct prep_pending *p;
	pktbuf_begin(b, 'Q');
	if (e || (stmt && stmt_preparable(stmt))) {
		/* One Query, "PREPARE PGV_x ...; EXECUTE PGV_x ..." if the server lacks it */
		bool prefixed = sql_prefix_prepare(server, b, stmt, e);
		p = pending_push_renamed(ps, prefixed ? PEND_QUERY_PREFIXED : PEND_QUERY, prefixed ? stmt : NULL, name,
					 stmt->id);
	} else {
		stmt = NULL;	/* a protocol one with types, not on this server: see the man page */
		p = pending_push_renamed(ps, PEND_QUERY, NULL, name, PREP_SCRATCH_ID);
	}
	if (stmt)
		server->pool->db->stats.total.bind_count++;
	put_sql_name(b, "EXECUTE", stmt ? stmt->id : PREP_SCRATCH_ID);
	pending_shift_positions(p, pkt, sc->p, b);
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
	struct prep_stmt *stmt = client_lookup(client, name);
	struct pktbuf *b = scratch();
	pktbuf_begin(b, 'Q');
	if (stmt) {
		put_sql_name(b, "PREPARE", PREP_SCRATCH_ID);
		pktbuf_put_bytes(b, " AS SELECT; ", 12);
		pending_push(ps, PEND_QUERY_DEALLOCATE, stmt, name);
		client_forget_name(client, name, NULL);
	} else {
		pending_push_renamed(ps, PEND_QUERY, NULL, name, PREP_SCRATCH_ID);
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
static bool handle_query(struct client *client, struct server *server, const struct pkt *pkt)
{
	const char *text = (const char *)pkt_body(pkt);
	uint32_t len = pkt_body_len(pkt);
	struct prep_server *ps = server_state(server);
	if (len > 0 && text[len - 1] == '\0' && memchr("PpEeDd", text[strspn(text, " \t\r\n\f")], 6)) {
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
	pending_push(ps, PEND_QUERY, NULL, NULL);
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

bool prepare_client_waits(struct client *client, struct server *server, const struct pkt *pkt)
{
	struct prep_server *ps = server->prep;
	if (!ps || !ps->risky_closed || server->expect_ready == 0 || !message_names_statement(pkt))
		return false;	/* nothing decided later (expect_ready: a queue out of step never holds) */
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
		pending_push(server_state(server), PEND_OTHER, NULL, NULL);
		server->prep->executed_unsynced = true;
		return false;
	case 'S':
		pending_push(server_state(server), PEND_SYNC, NULL, NULL);
		server->prep->executed_unsynced = false;
		return false;
	case 'Q':
		server_state(server)->executed_unsynced = false;	/* its ReadyForQuery tells the state after it */
		return handle_query(client, server, pkt);
	case 'F':
		pending_push(server_state(server), PEND_QUERY, NULL, NULL);
		server->prep->executed_unsynced = false;
		return false;
	default:	/* Flush, COPY data: no answer of their own */
		return false;
	}
}

/* ---------------------------------------------------------------- process */

bool prepare_client_statement_text(const struct client *client, const char *name, const char **text, size_t *len)
{
	const struct prep_stmt *stmt = client_lookup(client, name);
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

void prepare_shared_stats(uint32_t *count, uint64_t *bytes)
{
	*count = prep.count;
	*bytes = prep.bytes;
}

void prepare_global_cleanup(void)
{
	stmt_unref(prep.probe);
	prep.probe = NULL;
	stmt_unref(prep.probe_exit);
	prep.probe_exit = NULL;
	if (prep.scratch_ready)
		pktbuf_free(&prep.scratch);
	prep.scratch_ready = false;
	free(prep.buckets);
	prep.buckets = NULL;
	prep.nbuckets = prep.count = 0;
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
