/*
 * prepare_table.c - the tables of prepared statements (prepare_internal.h):
 *   shared statements  process-wide hash of statement bodies, refcounted,
 *                      with what a Describe of each answers once learned;
 *   client maps        per client, its names -> shared statements;
 *   server caches      per server, the statements prepared on it, in LRU
 *                      order (prepare.c keeps it to max_prepared_statements).
 *
 * Owns: those tables and their memory. Touches clients and servers only
 * through their `prep` pointers; sends nothing.
 */
#include "common.h"
#include "prepare.h"
#include "prepare_internal.h"
#include "client.h"
#include "config.h"
#include "log.h"
#include "pool.h"
#include "server.h"

/* Process-wide: the shared statements. */
static struct {
	struct prep_stmt **buckets;
	uint32_t nbuckets;
	uint32_t count;
	uint64_t bytes;
	uint64_t next_id;
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
uint32_t prep_server_name_of_id(uint64_t id, char *buf)
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

uint32_t prep_server_name_of(const struct prep_stmt *stmt, char *buf)
{
	return prep_server_name_of_id(stmt->id, buf);
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
struct prep_stmt *prep_stmt_get(const uint8_t *body, uint32_t len, bool sql)
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

void prep_stmt_ref(struct prep_stmt *s)
{
	s->refs++;
}

void prep_stmt_unref(struct prep_stmt *s)
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

struct prep_stmt *prep_client_lookup(const struct client *client, const char *name)
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
void prep_client_bind_name(struct client *client, const char *name, struct prep_stmt *stmt)
{
	if (!client->prep)
		client->prep = xcalloc(1, sizeof(*client->prep));
	struct prep_client *pc = client->prep;
	if (pc->count >= pc->nbuckets)
		client_map_grow(pc);
	uint32_t h = hash_bytes(name, strlen(name));
	struct prep_client_entry **pp = client_slot(pc, name, h);
	if (*pp) {
		prep_stmt_unref((*pp)->stmt);
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
void prep_client_forget_name(struct client *client, const char *name, const struct prep_stmt *only)
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
	prep_stmt_unref(e->stmt);
	free(e);
}

void prep_client_forget_all(struct client *client)
{
	struct prep_client *pc = client->prep;
	if (!pc)
		return;
	for (uint32_t i = 0; i < pc->nbuckets; i++) {
		struct prep_client_entry *e = pc->buckets[i];
		while (e) {
			struct prep_client_entry *next = e->hnext;
			prep_stmt_unref(e->stmt);
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
	prep_client_forget_all(client);
	free(client->prep->buckets);
	free(client->prep);
	client->prep = NULL;
}

uint32_t prepare_client_count(const struct client *client)
{
	return client_has_prep(client) ? client->prep->count : 0;
}

/* ---------------------------------------------------------------- server caches */

struct prep_server *prep_server_state(struct server *server)
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

struct prep_server_entry *prep_server_lookup(struct prep_server *ps, const struct prep_stmt *stmt)
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

void prep_cache_add(struct prep_server *ps, struct prep_stmt *stmt)
{
	if (ps->count >= ps->nbuckets)
		server_cache_grow(ps);
	struct prep_server_entry **pp = server_slot(ps, stmt);
	if (*pp)
		return;
	struct prep_server_entry *e = xmalloc(sizeof(*e));
	e->stmt = stmt;
	prep_stmt_ref(stmt);
	e->hnext = NULL;
	*pp = e;
	list_append(&ps->lru, &e->lru);
	ps->count++;
}

void prep_cache_remove(struct prep_server *ps, const struct prep_stmt *stmt)
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
	prep_stmt_unref(e->stmt);
	free(e);
}

/* e's statement was just used on this server: the last one LRU eviction takes. */
void prep_cache_touch(struct prep_server *ps, struct prep_server_entry *e)
{
	list_remove(&ps->lru, &e->lru);
	list_append(&ps->lru, &e->lru);
}

void prep_cache_clear(struct prep_server *ps)
{
	while (ps->count) {
		struct prep_server_entry *e = container_of(list_first(&ps->lru), struct prep_server_entry, lru);
		prep_cache_remove(ps, e->stmt);
	}
}

uint32_t prepare_server_count(const struct server *server)
{
	return server->prep ? server->prep->count : 0;
}

/* ---------------------------------------------------------------- what a statement answers */

/* The ParameterDescription of pgvalve's Describe after stmt's first Parse. */
void prep_stmt_learn_parameters(struct prep_stmt *stmt, const struct pkt *pkt)
{
	if (stmt->param_desc)
		return;		/* learned on another server meanwhile */
	stmt->param_desc = xmalloc(pkt->len);
	memcpy(stmt->param_desc, pkt->data, pkt->len);
	stmt->param_desc_len = pkt->len;
	prep.bytes += pkt->len;
}

/* Its NoData or RowDescription: only a statement returning no rows keeps its parameters. */
void prep_stmt_learn_shape(struct prep_stmt *stmt, enum stmt_shape shape)
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

/* ---------------------------------------------------------------- process */

void prepare_shared_stats(uint32_t *count, uint64_t *bytes)
{
	*count = prep.count;
	*bytes = prep.bytes;
}

void prep_stmt_table_free(void)
{
	free(prep.buckets);
	prep.buckets = NULL;
	prep.nbuckets = prep.count = 0;
}
