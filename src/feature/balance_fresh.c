/*
 * balance_fresh.c - the read balancer's freshness: read your writes,
 * monotonic reads, pgvalve.min_lsn, and its counters per host. See
 * balance_fresh.h for the contract.
 */
#include "common.h"
#include "balance_fresh.h"
#include "client.h"
#include "log.h"
#include "pool.h"
#include "proto.h"
#include "relay.h"
#include "roles.h"
#include "server.h"
#include "sql_lex.h"

#include <inttypes.h>
#include <stdlib.h>
#include <strings.h>

/*
 * The primary's WAL insert position, in bytes, and its WAL page size. The
 * insert position is at or past the end of every commit already answered
 * (synchronous_commit off included); when no record has been put on the
 * current page yet it points past that page's header, where no standby's
 * replayed position (a record's end) ever is: see position_floor.
 */
#define POSITION_SQL "SELECT pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_insert_lsn(), '0/0')::pg_catalog.int8, " \
	"pg_catalog.current_setting('wal_block_size')"
/* A WAL page's long header (SizeOfXLogLongPHD), the longer of the two. */
#define WAL_PAGE_HEADER_MAX 40
/* How often a standby known behind a client's floor is measured again, while reads wait for it. */
#define POLL_PERIOD (USEC_PER_SEC / 10)

struct balance_client {
	struct balance_client *next;	/* hash chain */
	const struct client *client;	/* NULL once it is gone (a question in flight may outlive it) */
	int refs;			/* the client's, and one per question in flight */
	long long min_pos;		/* its commits' positions and pgvalve.min_lsn, WAL bytes */
	long long read_pos;		/* the position of the standby it last read on, as measured then */
	int read_idx;			/* that standby's entry in its database's list; -1 none yet */
	usec_t read_end;		/* when that read ended */
	uint32_t asked;			/* questions started */
	uint32_t got;			/* the latest one whose row was read */
	uint32_t lost;			/* the latest one that failed, until a later one is answered; 0 none */
	int in_flight;
	bool read;			/* the transaction under way began as a read */
	bool kept;			/* ... a read kept on the primary for freshness */
};

static struct balance_client **table;
static size_t table_size, table_count;

static size_t slot_of(const struct client *client)
{
	uint64_t h = (uint64_t)(uintptr_t)client * UINT64_C(0x9E3779B97F4A7C15);
	return (size_t)(h >> 32) & (table_size - 1);
}

static struct balance_client *state_find(const struct client *client)
{
	if (!client->balance_state || !table_size)
		return NULL;
	for (struct balance_client *b = table[slot_of(client)]; b; b = b->next)
		if (b->client == client)
			return b;
	return NULL;
}

static void table_grow(void)
{
	size_t old_size = table_size;
	struct balance_client **old = table;
	table_size = old_size ? old_size * 2 : 64;
	table = xcalloc(table_size, sizeof(*table));
	for (size_t i = 0; i < old_size; i++) {
		while (old[i]) {
			struct balance_client *b = old[i];
			old[i] = b->next;
			size_t s = slot_of(b->client);
			b->next = table[s];
			table[s] = b;
		}
	}
	free(old);
}

/* client's positions, made if it has none. */
static struct balance_client *state_get(struct client *client)
{
	struct balance_client *b = state_find(client);
	if (b)
		return b;
	if (table_count >= table_size)
		table_grow();
	b = xcalloc(1, sizeof(*b));
	b->client = client;
	b->refs = 1;
	b->read_idx = -1;
	size_t s = slot_of(client);
	b->next = table[s];
	table[s] = b;
	table_count++;
	client->balance_state = true;
	return b;
}

static void state_unref(struct balance_client *b)
{
	if (--b->refs == 0)
		free(b);
}

/* ---------------------------------------------------------------- pgvalve.min_lsn */

/* "X/Y" (hexadecimal halves, as PostgreSQL writes an LSN) in bytes; -1 if it is not one. */
static long long parse_lsn(const char *s, size_t len)
{
	unsigned long long hi = 0, lo = 0, *part = &hi;
	int digits = 0;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
			c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (c == '/' && part == &hi && digits) {
			part = &lo;
			digits = 0;
			continue;
		}
		if (v < 0 || ++digits > 8)
			return -1;
		*part = *part * 16 + (unsigned)v;
	}
	if (part != &lo || !digits || hi > 0x7FFFFFFF)
		return -1;	/* (no WAL reaches 2^63 bytes) */
	return (long long)(hi << 32 | lo);
}

/* Whether the next tokens of lx name the setting pgvalve.min_lsn: a word or quoted identifier each, or one quoted whole. */
static bool names_min_lsn(struct sql_lexer *lx)
{
	struct sql_token t;
	char name[32];
	sql_lex_next(lx, &t);
	if (!sql_token_name(&t, name, sizeof(name)))
		return false;
	if (t.kind == SQL_TOKEN_IDENT && strcasecmp(name, "pgvalve.min_lsn") == 0)
		return true;	/* a setting's name is its name in any case, quoted or not */
	if (strcasecmp(name, "pgvalve") != 0 || !sql_token_is_char((sql_lex_next(lx, &t), &t), '.'))
		return false;
	sql_lex_next(lx, &t);
	return sql_token_name(&t, name, sizeof(name)) && strcasecmp(name, "min_lsn") == 0;
}

long long balance_fresh_min_lsn_set(const char *text, size_t len)
{
	struct sql_lexer lx;
	struct sql_token t, value;
	char ident[32];
	sql_lex_init(&lx, text, len, true);
	sql_lex_next(&lx, &t);
	if (!sql_token_is(&t, "set"))
		return -1;
	if (sql_lex_peek(&lx, &t) == SQL_TOKEN_WORD && sql_token_is(&t, "session"))
		sql_lex_next(&lx, &t);
	if (!names_min_lsn(&lx))
		return -1;
	sql_lex_next(&lx, &t);
	if (!sql_token_is_char(&t, '=') && !sql_token_is(&t, "to"))
		return -1;
	sql_lex_next(&lx, &value);
	bool quoted = value.kind == SQL_TOKEN_STRING && !value.unterminated && value.start[0] == '\'' && value.len >= 2;
	bool ident_value = value.kind == SQL_TOKEN_IDENT && sql_token_name(&value, ident, sizeof(ident));
	if (!quoted && !ident_value)
		return -1;
	if (sql_lex_next(&lx, &t) == SQL_TOKEN_SEMICOLON)
		sql_lex_next(&lx, &t);
	if (t.kind != SQL_TOKEN_END)
		return -1;
	return quoted ? parse_lsn(value.start + 1, value.len - 2) : parse_lsn(ident, strlen(ident));
}

void balance_fresh_start(struct client *client, const char *text, size_t len, bool type_query, bool read)
{
	struct balance_client *b = state_find(client);
	long long lsn = type_query ? balance_fresh_min_lsn_set(text, len) : -1;	/* (a read-only session's SET is a read) */
	if (!b && lsn < 0 && !read)
		return;		/* a write of a client with no positions yet: fresh_released makes them */
	if (!b)
		b = state_get(client);
	b->read = read;
	b->kept = false;
	if (lsn > b->min_pos)
		b->min_pos = lsn;
}

/* ---------------------------------------------------------------- routing */

/*
 * Monotonic reads: the position a standby other than the one b last read
 * on must have replayed for b's next read there. A standby's replay only
 * goes forward, so that same one is always fine; another must be known at
 * least where the last one was when the read ended: its position measured
 * by a question sent after that, -1 while there is none (a new poll
 * yields one). When the last one can serve no more (stopped, promoted),
 * what it had when measured last before the read ended stands in.
 */
static long long read_bound(const struct balance_client *b, const struct db *db)
{
	if (b->read_idx < 0)
		return 0;
	long long after = roles_host_replayed_since(db, b->read_idx, b->read_end);
	if (after >= 0)
		return after;
	return roles_host_gone(db, b->read_idx) ? b->read_pos : -1;
}

struct fit {
	const struct balance_client *b;
	long long bound;	/* read_bound, for a standby other than b's last */
};

/* Whether a read of fit->b may run on server: its writes replayed there, and no going back in time. */
static bool server_fits(const struct server *server, void *arg)
{
	const struct fit *f = arg;
	long long replayed = roles_server_replayed(server);
	if (f->b->min_pos > 0 && replayed < f->b->min_pos)
		return false;
	return server->host_idx == f->b->read_idx || (f->bound >= 0 && replayed >= f->bound);
}

/*
 * Whether a server of pool other than skip that is in use fits: one being
 * reset or measured (a poll: free again within a round trip), or with
 * also_active one of a client's.
 */
static bool busy_server_fits(const struct pool *pool, struct fit *f, const struct server *skip, bool also_active)
{
	const struct list *lists[] = { &pool->used_servers, &pool->tested_servers, &pool->active_servers };
	for (size_t i = 0; i < ARRAY_SIZE(lists) - !also_active; i++)
		list_for_each(pos, lists[i]) {
			const struct server *server = container_of(pos, struct server, node);
			if (server != skip && server_fits(server, f))
				return true;
		}
	return false;
}

struct pool *balance_fresh_route(struct client *client, struct pool *companion)
{
	struct balance_client *b = state_find(client);
	if (!b)
		return companion;	/* never wrote, never read: any standby */
	if (b->in_flight || b->lost) {
		b->kept = true;		/* a commit whose position is not known yet */
		return NULL;
	}
	if (b->min_pos <= 0 && b->read_idx < 0)
		return companion;	/* no write, no read on a standby yet: any standby */
	const struct db *db = companion->db;
	struct fit f = { .b = b, .bound = read_bound(b, db) };
	long long floor = roles_standby_floor(db);
	if (f.bound >= 0 && floor >= MAX(b->min_pos, f.bound))
		return companion;	/* wherever it lands */
	/*
	 * Some standby is known below what it needs: measured again, and one
	 * that fits goes first. While the last one's position after the read
	 * is not known, only that one fits; a measurement after it (a login, a
	 * poll at the read's end: fresh_released) lets its reads land
	 * elsewhere too.
	 */
	roles_poll_standbys(db, MAX(b->min_pos, f.bound), POLL_PERIOD);
	bool offered = pool_offer_idle_server(companion, server_fits, &f);
	/*
	 * A standby with no server in the companion is never measured, so a
	 * client with a floor would never go there: while the companion has
	 * room, one more server, whose login measures its standby (the host
	 * list's order spreads them), so that reads keep spreading.
	 */
	if (pool_server_count(companion) < pool_effective_size(companion) && list_empty(&companion->login_servers) &&
	    !pool_login_retry_pending(companion, now_usec()))
		server_connect(companion);
	if (offered)
		return companion;
	/*
	 * A server of the companion that fits is busy: the read waits for it
	 * rather than go to the primary, if it is being measured or reset
	 * (a poll takes ~ a round trip), or if every server there is busy
	 * anyway. An idle one that does not fit is not handed to it, and a
	 * server ready for it that does not fit sends it home unless one
	 * that fits is about to be free (fresh_takes).
	 */
	if (busy_server_fits(companion, &f, NULL, list_empty(&companion->idle_servers)))
		return companion;
	b->kept = true;
	return NULL;
}

/*
 * A client lent to a companion is to get server (relay_hooks.balance_takes):
 * taken if it fits; else it waits on while another server there that fits
 * is being measured or reset, or goes home to the primary.
 */
static enum balance_take fresh_takes(struct client *client, const struct server *server)
{
	struct balance_client *b = state_find(client);
	if (!b)
		return BALANCE_TAKE;
	struct fit f = { .b = b, .bound = read_bound(b, server->pool->db) };
	if (b->in_flight || b->lost) {
		b->kept = true;
		return BALANCE_HOME;
	}
	if (server_fits(server, &f))
		return BALANCE_TAKE;
	if (busy_server_fits(server->pool, &f, server, false))
		return BALANCE_WAIT;
	b->kept = true;
	return BALANCE_HOME;
}

/* ---------------------------------------------------------------- counters */

static struct balance_counts *counts_of(struct db *db, int idx)
{
	if (idx < 0 || idx >= db->host_count)
		return NULL;
	if (idx >= db->balance_counts_len) {
		int n = db->host_count;
		db->balance_counts = xrealloc(db->balance_counts, (size_t)n * sizeof(*db->balance_counts));
		memset(db->balance_counts + db->balance_counts_len, 0,
		       (size_t)(n - db->balance_counts_len) * sizeof(*db->balance_counts));
		db->balance_counts_len = n;
	}
	return &db->balance_counts[idx];
}

static void count(struct db *db, int idx, bool lent, bool kept)
{
	struct balance_counts *c = counts_of(db, idx);
	if (!c)
		return;
	c->xacts++;
	c->reads_balanced += lent;
	c->reads_fresh += kept;
}

void balance_count_retry(struct db *db, int idx)
{
	struct balance_counts *c = counts_of(db, idx);
	if (c)
		c->reads_retried++;
}

void balance_host_counts(const struct db *db, int idx, struct balance_counts *out)
{
	if (idx >= 0 && idx < db->balance_counts_len)
		*out = db->balance_counts[idx];
	else
		memset(out, 0, sizeof(*out));
}

/* ---------------------------------------------------------------- the hooks */

static void fresh_released(struct client *client, struct server *server)
{
	struct balance_client *b = state_get(client);
	bool read = b->read || client->balance_control_only, kept = b->kept;	/* BEGIN; COMMIT wrote nothing */
	b->read = b->kept = false;
	client->balance_control_only = false;
	count(server->pool->db, server->host_idx, client->lent, kept);
	if (client->lent) {
		b->read_pos = MAX(b->read_pos, roles_server_replayed(server));
		b->read_idx = server->host_idx;
		b->read_end = now_usec();
		/* measured after it, on another idle server there: the client's next read may then go elsewhere */
		roles_poll_spare(server->pool->db, server->host_idx, POLL_PERIOD);
		return;
	}
	if (client->notify || (read && !b->lost) || server->position_for)
		return;
	server->position_for = b;
	server->position_seq = ++b->asked;
	b->refs++;
	b->in_flight++;
}

/*
 * A WAL page's start is where its previous record ended, when nothing was
 * written on the page yet: then the insert position is just past the
 * page's header, where no replayed position (a record's end) ever is.
 */
long long balance_fresh_position_floor(long long pos, long long page)
{
	long long r = page > 0 ? pos % page : 0;
	return r > 0 && r <= WAL_PAGE_HEADER_MAX ? pos - r : pos;
}

static void fresh_position_row(struct server *server, const struct pkt *pkt)
{
	struct balance_client *b = server->position_for;
	struct pkt_reader r;
	char vals[2][32] = { "", "" };
	pkt_reader_init(&r, pkt_body(pkt), pkt_body_len(pkt));
	uint16_t ncols = pkt_get_uint16(&r);
	for (int i = 0; i < 2 && i < ncols && !r.failed; i++) {
		uint32_t len = pkt_get_uint32(&r);
		const uint8_t *v = len == 0xFFFFFFFFu ? NULL : pkt_get_bytes(&r, len);
		if (v && len < sizeof(vals[i])) {
			memcpy(vals[i], v, len);
			vals[i][len] = '\0';
		}
	}
	long long pos = atoll(vals[0]), page = atoll(vals[1]);
	if (!b || r.failed || pos <= 0)
		return;
	b->min_pos = MAX(b->min_pos, balance_fresh_position_floor(pos, page));
	b->got = server->position_seq;
	/* the standbys known below it measured again now, so that the client's next reads find them fresh */
	if (b->client)
		roles_poll_standbys(server->pool->db, b->min_pos, POLL_PERIOD);
}

/* The question of server ended: answered (ok), or failed, or its server went. */
static void question_ended(struct server *server, bool ok)
{
	struct balance_client *b = server->position_for;
	uint32_t seq = server->position_seq;
	server->position_for = NULL;
	b->in_flight--;
	if (ok && b->got == seq) {
		if (seq > b->lost)
			b->lost = 0;
	} else {
		b->lost = MAX(b->lost, seq);
		server_log(LOG_LEVEL_DEBUG, server, "WAL position not learned: the client's reads stay on the primary");
	}
	state_unref(b);
}

static void fresh_position_done(struct server *server, bool failed)
{
	if (server->position_for)
		question_ended(server, !failed);
}

static void fresh_server_free(struct server *server)
{
	question_ended(server, false);
}

void balance_fresh_client_free(struct client *client)
{
	struct balance_client *b = state_find(client);
	if (!b)
		return;
	struct balance_client **pp = &table[slot_of(client)];
	while (*pp != b)
		pp = &(*pp)->next;
	*pp = b->next;
	table_count--;
	b->client = NULL;
	state_unref(b);
}

void balance_fresh_register(void)
{
	relay_hooks.balance_released = fresh_released;
	relay_hooks.balance_takes = fresh_takes;
	relay_hooks.balance_position_sql = POSITION_SQL;
	relay_hooks.balance_position_row = fresh_position_row;
	relay_hooks.balance_position_done = fresh_position_done;
	relay_hooks.balance_server_free = fresh_server_free;
}
