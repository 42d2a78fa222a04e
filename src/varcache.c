/*
 * varcache.c - tracked session parameters of clients and servers.
 *
 * The table of tracked names is process state (documented global), set at
 * start-up and on reload from track_extra_parameters.
 */
#include "pgvalve/common.h"
#include "pgvalve/varcache.h"
#include "pgvalve/log.h"

#include <strings.h>

static const char *const fixed_names[] = {
	"client_encoding", "DateStyle", "TimeZone", "IntervalStyle",
	"standard_conforming_strings", "application_name", "search_path",
};

static struct {
	char *names[VARCACHE_MAX];
	uint8_t lens[VARCACHE_MAX];	/* strlen of each name: a cheap first test */
	int count;
} vtab;

/*
 * Values are interned: equal strings share one copy, so comparing a
 * client's parameters with a server's (on every link in transaction mode)
 * is a pointer comparison. Refcounted; the table is process state.
 */
struct interned {
	struct interned *next;
	uint32_t hash;
	uint32_t refs;
	char text[];
};

static struct {
	struct interned **buckets;
	uint32_t size;
	uint32_t count;
} itab;

static void itab_grow(void)
{
	uint32_t size = itab.size ? itab.size * 2 : 64;
	struct interned **b = xcalloc(size, sizeof(*b));
	for (uint32_t i = 0; i < itab.size; i++) {
		struct interned *e = itab.buckets[i];
		while (e) {
			struct interned *next = e->next;
			e->next = b[e->hash & (size - 1)];
			b[e->hash & (size - 1)] = e;
			e = next;
		}
	}
	free(itab.buckets);
	itab.buckets = b;
	itab.size = size;
}

static const char *intern_get(const char *s)
{
	uint32_t h = hash_string(s);
	if (itab.size) {
		for (struct interned *e = itab.buckets[h & (itab.size - 1)]; e; e = e->next) {
			if (e->hash == h && strcmp(e->text, s) == 0) {
				e->refs++;
				return e->text;
			}
		}
	}
	if (itab.count >= itab.size)
		itab_grow();
	size_t len = strlen(s);
	struct interned *e = xmalloc(sizeof(*e) + len + 1);
	memcpy(e->text, s, len + 1);
	e->hash = h;
	e->refs = 1;
	e->next = itab.buckets[h & (itab.size - 1)];
	itab.buckets[h & (itab.size - 1)] = e;
	itab.count++;
	return e->text;
}

static void intern_put(const char *s)
{
	if (!s)
		return;
	struct interned *e = container_of(s, struct interned, text);
	if (--e->refs)
		return;
	for (struct interned **pp = &itab.buckets[e->hash & (itab.size - 1)]; *pp; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			break;
		}
	}
	itab.count--;
	free(e);
	if (itab.count == 0) {
		free(itab.buckets);
		itab.buckets = NULL;
		itab.size = 0;
	}
}

void varcache_configure(const char *extra)
{
	for (int i = 0; i < vtab.count; i++)
		free(vtab.names[i]);
	vtab.count = 0;
	for (size_t i = 0; i < ARRAY_SIZE(fixed_names); i++) {
		vtab.lens[vtab.count] = (uint8_t)strlen(fixed_names[i]);
		vtab.names[vtab.count++] = xstrdup(fixed_names[i]);
	}
	if (!extra)
		return;
	const char *p = extra;
	char name[128];
	while (list_next_item(&p, name, sizeof(name))) {
		if (varcache_index(name) >= 0)
			continue;
		if (vtab.count >= VARCACHE_MAX) {
			log_warning("track_extra_parameters: too many parameters, \"%s\" not tracked", name);
			continue;
		}
		vtab.lens[vtab.count] = (uint8_t)MIN(strlen(name), 255);
		vtab.names[vtab.count++] = xstrdup(name);
	}
}

int varcache_count(void)
{
	return vtab.count;
}

const char *varcache_name(int idx)
{
	return (idx >= 0 && idx < vtab.count) ? vtab.names[idx] : NULL;
}

int varcache_index(const char *name)
{
	size_t len = strlen(name);
	for (int i = 0; i < vtab.count; i++)
		if (vtab.lens[i] == len && strcasecmp(vtab.names[i], name) == 0)
			return i;
	return -1;
}

const char *varcache_get(const struct varcache *vc, int idx)
{
	if (!vc || idx < 0 || (uint32_t)idx >= vc->count)
		return NULL;
	return vc->values[idx];
}

void varcache_set(struct varcache **vc, int idx, const char *value)
{
	if (idx < 0 || idx >= vtab.count)
		return;
	if (!*vc) {
		*vc = xcalloc(1, sizeof(**vc) + (size_t)vtab.count * sizeof(const char *));
		(*vc)->count = (uint32_t)vtab.count;
	}
	const char *old = (*vc)->values[idx];
	(*vc)->values[idx] = intern_get(value);
	intern_put(old);
}

bool varcache_set_by_name(struct varcache **vc, const char *name, const char *value)
{
	int idx = varcache_index(name);
	if (idx < 0)
		return false;
	varcache_set(vc, idx, value);
	return true;
}

void varcache_free(struct varcache *vc)
{
	if (!vc)
		return;
	for (uint32_t i = 0; i < vc->count; i++)
		intern_put(vc->values[i]);
	free(vc);
}

void varcache_copy_missing(struct varcache **dst, const struct varcache *src)
{
	if (!src)
		return;
	for (int i = 0; i < vtab.count; i++)
		if (varcache_get(src, i) && !varcache_get(*dst, i))
			varcache_set(dst, i, varcache_get(src, i));
}

void varcache_copy_set(struct varcache **dst, const struct varcache *src)
{
	if (!src)
		return;
	for (int i = 0; i < vtab.count; i++)
		if (varcache_get(src, i))
			varcache_set(dst, i, varcache_get(src, i));
}

void varcache_sync_applied(struct varcache **server, const struct varcache *client)
{
	for (int i = 0; i < vtab.count; i++) {
		const char *want = varcache_get(client, i);
		if (want)
			varcache_set(server, i, want);
		else if (varcache_get(*server, i)) {
			intern_put((*server)->values[i]);	/* RESET: the server's default, value unknown */
			(*server)->values[i] = NULL;
		}
	}
}

void varcache_forget_except(struct varcache *vc, uint32_t keep_mask)
{
	if (!vc)
		return;
	for (uint32_t i = 0; i < vc->count; i++) {
		if (!(keep_mask & (1u << i))) {
			intern_put(vc->values[i]);
			vc->values[i] = NULL;
		}
	}
}

int varcache_diff_sql(const struct varcache *client, const struct varcache *server, struct pktbuf *sql)
{
	int added = 0;
	char name_lit[160], value_lit[1024], expr[1300];

	if (!client)
		return 0;
	for (int i = 0; i < vtab.count; i++) {
		const char *want = varcache_get(client, i);
		if (!want || want == varcache_get(server, i))
			continue;	/* interned: equal values are the same pointer */
		/* set_config() takes the value as data, so list values like search_path keep their meaning. */
		if (!proto_quote_literal(vtab.names[i], name_lit, sizeof(name_lit)) ||
		    !proto_quote_literal(want, value_lit, sizeof(value_lit)))
			continue;	/* absurdly long value: leave the server's */
		int n = snprintf(expr, sizeof(expr), "%spg_catalog.set_config(%s, %s, false)",
				 added ? ", " : "SELECT ", name_lit, value_lit);
		if (n <= 0 || (size_t)n >= sizeof(expr))
			continue;
		pktbuf_put_bytes(sql, expr, (uint32_t)n);
		added++;
	}
	/*
	 * A parameter this client never set but the server carries from an
	 * earlier client (search_path, which PostgreSQL 15 does not report)
	 * goes back to the server's default.
	 */
	for (int i = 0; i < vtab.count; i++) {
		if (varcache_get(client, i) || !varcache_get(server, i))
			continue;
		int n = snprintf(expr, sizeof(expr), "%sRESET %s", added ? "; " : "", vtab.names[i]);
		if (n <= 0 || (size_t)n >= sizeof(expr))
			continue;
		pktbuf_put_bytes(sql, expr, (uint32_t)n);
		added++;
	}
	return added;
}
