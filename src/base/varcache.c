/*
 * varcache.c - tracked session parameters of clients and servers.
 *
 * The table of tracked names is process state (documented global), set at
 * start-up from track_extra_parameters and grown when a server reports a
 * parameter it does not know yet (a newer PostgreSQL's GUC_REPORT set).
 */
#include "common.h"
#include "varcache.h"
#include "log.h"

#include <strings.h>

/*
 * PostgreSQL's GUC_REPORT parameters (up to 17) and search_path (reported
 * from 18 on). client_encoding must stay first: it is applied on its own.
 */
static const char *const settable_names[] = {
	"client_encoding", "DateStyle", "TimeZone", "IntervalStyle",
	"standard_conforming_strings", "application_name", "search_path",
	"default_transaction_read_only", "scram_iterations",
};

/*
 * Reported but not for the client to SET through pgvalve: fixed for the
 * server's life, or following SET SESSION AUTHORIZATION (which
 * session_set.c tracks as a statement). They reach the client as reported.
 */
static const char *const read_only_names[] = {
	"server_version", "server_encoding", "integer_datetimes", "is_superuser",
	"in_hot_standby", "session_authorization",
};

/*
 * Settable, and PostgreSQL takes any value of it (application_name: it
 * replaces what is not printable ASCII, never refuses): a login asking
 * for a new value needs no server to try it (varcache_all_accepted).
 */
static const char *const any_value_names[] = { "application_name" };

/*
 * A value may name only part of the setting (DateStyle "Postgres" or
 * "DMY"): PostgreSQL keeps the other part from the value in force. At a
 * login that is the server's default; on a shared server it would be the
 * previous client's. So before such a value is set, the server goes back
 * to the value of its own login (RESET), and the client gets what
 * PostgreSQL would have given it at login.
 */
static const char *const relative_names[] = { "DateStyle" };

static struct {
	char *names[VARCACHE_MAX];
	uint8_t lens[VARCACHE_MAX];	/* strlen of each name: a cheap first test */
	bool read_only[VARCACHE_MAX];
	bool any_value[VARCACHE_MAX];
	bool relative[VARCACHE_MAX];
	int count;
} vtab;

/*
 * A value set by a client's own SET of a parameter the server does not
 * report (search_path on PostgreSQL 15), known only as that statement
 * (session_set.c). On a server: differs from any other client's value, so
 * the next client brings the server back in line. On a client: never
 * applied from here (its statement is replayed instead). Never interned.
 */
static const char unknown_value[] = "";

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
	if (!s || s == unknown_value)
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

static void vtab_add(const char *name, bool read_only)
{
	vtab.lens[vtab.count] = (uint8_t)MIN(strlen(name), 255);
	vtab.read_only[vtab.count] = read_only;
	vtab.any_value[vtab.count] = false;
	for (size_t i = 0; i < ARRAY_SIZE(any_value_names); i++)
		if (strcasecmp(name, any_value_names[i]) == 0)
			vtab.any_value[vtab.count] = true;
	vtab.relative[vtab.count] = false;
	for (size_t i = 0; i < ARRAY_SIZE(relative_names); i++)
		if (strcasecmp(name, relative_names[i]) == 0)
			vtab.relative[vtab.count] = true;
	vtab.names[vtab.count++] = xstrdup(name);
}

void varcache_configure(const char *extra)
{
	for (int i = 0; i < vtab.count; i++)
		free(vtab.names[i]);
	vtab.count = 0;
	for (size_t i = 0; i < ARRAY_SIZE(settable_names); i++)
		vtab_add(settable_names[i], false);
	for (size_t i = 0; i < ARRAY_SIZE(read_only_names); i++)
		vtab_add(read_only_names[i], true);
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
		vtab_add(name, false);
	}
}

int varcache_learn(const char *name)
{
	int idx = varcache_index(name);
	if (idx >= 0)
		return idx;
	if (vtab.count >= VARCACHE_MAX || strlen(name) > 120)
		return -1;
	log_info("server reports parameter \"%s\": tracked from now on", name);
	vtab_add(name, false);
	return vtab.count - 1;
}

bool varcache_settable(int idx)
{
	return idx >= 0 && idx < vtab.count && !vtab.read_only[idx];
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

/* One more holder of an interned value. */
static void intern_ref(const char *s)
{
	if (s && s != unknown_value)
		container_of(s, struct interned, text)->refs++;
}

/*
 * Makes *vc this holder's own (a copy if it is shared) with room for every
 * name known now (the table grows when servers report new ones): the step
 * before any change.
 */
static void varcache_own(struct varcache **vc)
{
	struct varcache *old = *vc;
	uint32_t have = old ? old->count : 0;
	uint32_t want = MAX(have, (uint32_t)vtab.count);
	if (old && old->refs == 1 && have == want)
		return;
	if (old && old->refs == 1) {
		*vc = xrealloc(old, sizeof(*old) + (size_t)want * sizeof(const char *));
	} else {
		*vc = xmalloc(sizeof(*old) + (size_t)want * sizeof(const char *));
		(*vc)->refs = 1;
		for (uint32_t i = 0; i < have; i++) {
			(*vc)->values[i] = old->values[i];
			intern_ref(old->values[i]);
		}
		if (old)
			old->refs--;	/* still held by others */
	}
	memset(&(*vc)->values[have], 0, (want - have) * sizeof(const char *));
	(*vc)->count = want;
}

void varcache_clear(struct varcache **vc, int idx)
{
	if (!varcache_get(*vc, idx))
		return;
	varcache_own(vc);
	intern_put((*vc)->values[idx]);
	(*vc)->values[idx] = NULL;
}

void varcache_mark_unknown(struct varcache **vc, int idx)
{
	if (idx < 0 || idx >= vtab.count)
		return;
	if (varcache_get(*vc, idx) == unknown_value)
		return;
	varcache_own(vc);
	intern_put((*vc)->values[idx]);
	(*vc)->values[idx] = unknown_value;
}

void varcache_set(struct varcache **vc, int idx, const char *value)
{
	if (idx < 0 || idx >= vtab.count)
		return;
	const char *cur = varcache_get(*vc, idx);
	if (cur && cur != unknown_value && value != unknown_value && strcmp(cur, value) == 0)
		return;	/* unchanged: a shared copy stays shared */
	varcache_own(vc);
	const char *old = (*vc)->values[idx];
	(*vc)->values[idx] = value == unknown_value ? unknown_value : intern_get(value);
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

void varcache_unref(struct varcache *vc)
{
	if (!vc || --vc->refs > 0)
		return;
	for (uint32_t i = 0; i < vc->count; i++)
		intern_put(vc->values[i]);
	free(vc);
}

/* Whether *vc, with what it lacks taken from welcome, holds the values last holds. */
static bool varcache_login_equal(const struct varcache *vc, const struct varcache *welcome,
				 const struct varcache *last)
{
	for (int i = 0; i < vtab.count; i++) {
		const char *v = varcache_get(vc, i);
		if (!v)
			v = varcache_get(welcome, i);
		if (v != varcache_get(last, i))	/* interned: equal is same pointer */
			return false;
	}
	return true;
}

void varcache_share_login(struct varcache **vc, const struct varcache *welcome, struct varcache **last)
{
	if (*last && varcache_login_equal(*vc, welcome, *last)) {
		varcache_unref(*vc);
		*vc = *last;
	} else {
		varcache_copy_missing(vc, welcome);
		if (!*vc)
			return;
		varcache_unref(*last);
		*last = *vc;
	}
	(*vc)->refs++;
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

void varcache_sync_applied(struct varcache **server, struct varcache **client, uint64_t reported_mask,
			   const char *log_who)
{
	for (int i = 0; i < vtab.count; i++) {
		if (vtab.read_only[i])
			continue;
		const char *want = varcache_get(*client, i);
		const char *has = varcache_get(*server, i);
		if (want && has && want != unknown_value && has != unknown_value && i < 64 &&
		    (reported_mask & (UINT64_C(1) << i))) {
			if (strcmp(want, has) != 0) {
				/* PgBouncer's wording: operators' and its tests' greps find it */
				if (log_who)
					log_msg(LOG_LEVEL_DEBUG, "%s varcache_set_canonical: setting %s to its canonical version %s -> %s",
						log_who, vtab.names[i], want, has);
				varcache_set(client, i, has);	/* PostgreSQL's spelling of the client's value */
			}
		} else if (want)
			varcache_set(server, i, want);
		else
			varcache_clear(server, i);	/* RESET: the server's default, value unknown */
	}
}

void varcache_forget_except(struct varcache **vc, uint64_t keep_mask)
{
	for (uint32_t i = 0; *vc && i < (*vc)->count; i++)
		if (!(keep_mask & (UINT64_C(1) << i)))
			varcache_clear(vc, (int)i);
}

/* ---------------------------------------------------------------- accepted values */

static bool accepted_has(const struct varcache_accepted *acc, int idx, const char *value)
{
	for (int i = 0; i < VARCACHE_ACCEPTED_MAX; i++)
		if (acc->values[i] == value && acc->idx[i] == idx)	/* interned: equal is same pointer */
			return true;
	return false;
}

/* Settable values of client that are neither the welcome's nor known to acc (nor of any-value names). */
static bool is_unknown(const struct varcache *client, const struct varcache *welcome,
		       const struct varcache_accepted *acc, int idx)
{
	const char *v = varcache_get(client, idx);
	return v && v != unknown_value && !vtab.read_only[idx] && !vtab.any_value[idx] &&
	       v != varcache_get(welcome, idx) && !accepted_has(acc, idx, v);
}

bool varcache_all_accepted(const struct varcache *client, const struct varcache *welcome,
			   const struct varcache_accepted *acc)
{
	for (int i = 0; i < vtab.count; i++)
		if (is_unknown(client, welcome, acc, i))
			return false;
	return true;
}

void varcache_accept(struct varcache_accepted *acc, const struct varcache *client, const struct varcache *welcome)
{
	for (int i = 0; i < vtab.count; i++) {
		if (!is_unknown(client, welcome, acc, i))
			continue;
		uint32_t slot = acc->next++ % VARCACHE_ACCEPTED_MAX;	/* the oldest pair makes room */
		intern_put(acc->values[slot]);
		acc->values[slot] = intern_get(varcache_get(client, i));
		acc->idx[slot] = (uint8_t)i;
	}
}

void varcache_accepted_free(struct varcache_accepted *acc)
{
	for (int i = 0; i < VARCACHE_ACCEPTED_MAX; i++) {
		intern_put(acc->values[i]);
		acc->values[i] = NULL;
	}
}

/* ---------------------------------------------------------------- SQL */

/* Appends "set_config(name, value, false)" for idx, after "SELECT " or ", ". */
static bool put_set_config(struct pktbuf *sql, int idx, const char *value, int added)
{
	char name_lit[260], value_lit[1024], expr[1300];
	/* set_config() takes the value as data, so list values like search_path keep their meaning. */
	if (!proto_quote_literal(vtab.names[idx], name_lit, sizeof(name_lit)) ||
	    !proto_quote_literal(value, value_lit, sizeof(value_lit)))
		return false;	/* absurdly long value: leave the server's */
	int n = snprintf(expr, sizeof(expr), "%spg_catalog.set_config(%s, %s, false)",
			 added ? ", " : "SELECT ", name_lit, value_lit);
	if (n <= 0 || (size_t)n >= sizeof(expr))
		return false;
	pktbuf_put_bytes(sql, expr, (uint32_t)n);
	return true;
}

static bool needs_set(const struct varcache *client, const struct varcache *server, int idx)
{
	const char *want = varcache_get(client, idx);
	/* unknown on the client's side: its own SET, which session_set.c replays */
	return !vtab.read_only[idx] && want && want != unknown_value &&
	       want != varcache_get(server, idx);	/* interned: equal is same pointer */
}

bool varcache_same(const struct varcache *a, const struct varcache *b)
{
	if (a == b)
		return true;
	if (!a || !b)
		return false;
	if (a->count == b->count && memcmp(a->values, b->values, sizeof(a->values[0]) * a->count) == 0)
		return true;
	/*
	 * Apart only in read-only parameters: a standby's server reports
	 * in_hot_standby = on to clients that logged in on the primary (the
	 * read balancer lends them there on each read).
	 */
	uint32_t n = MAX(a->count, b->count);
	for (uint32_t i = 0; i < n; i++)
		if (!vtab.read_only[i] && varcache_get(a, (int)i) != varcache_get(b, (int)i))
			return false;
	return true;
}

int varcache_diff_encoding_sql(const struct varcache *client, const struct varcache *server, struct pktbuf *sql)
{
	if (!needs_set(client, server, VARCACHE_CLIENT_ENCODING))
		return 0;
	return put_set_config(sql, VARCACHE_CLIENT_ENCODING, varcache_get(client, VARCACHE_CLIENT_ENCODING), 0) ? 1 : 0;
}

int varcache_diff_sql(const struct varcache *client, const struct varcache *server, struct pktbuf *sql)
{
	int added = 0, selected = 0;
	char expr[300];

	/*
	 * First the RESETs that relative values start from (one too long to
	 * set is not a value PostgreSQL takes either: the statement fails).
	 */
	for (int i = 0; i < vtab.count; i++) {
		if (!vtab.relative[i] || !needs_set(client, server, i))
			continue;
		int n = snprintf(expr, sizeof(expr), "RESET \"%s\"; ", vtab.names[i]);
		if (n <= 0 || (size_t)n >= sizeof(expr))
			continue;
		pktbuf_put_bytes(sql, expr, (uint32_t)n);
		added++;
	}
	for (int i = 0; i < vtab.count; i++) {
		if (i == VARCACHE_CLIENT_ENCODING || !needs_set(client, server, i))
			continue;
		if (put_set_config(sql, i, varcache_get(client, i), selected)) {
			selected++;
			added++;
		}
	}
	/*
	 * A parameter this client never set but the server carries from an
	 * earlier client (search_path, which PostgreSQL 15 does not report)
	 * goes back to the server's default.
	 */
	for (int i = 0; i < vtab.count; i++) {
		if (vtab.read_only[i] || i == VARCACHE_CLIENT_ENCODING || varcache_get(client, i) ||
		    !varcache_get(server, i))
			continue;
		/* Quoted: a learned name comes from the server and is used as it spelled it. */
		int n = snprintf(expr, sizeof(expr), "%sRESET \"%s\"", added ? "; " : "", vtab.names[i]);
		if (n <= 0 || (size_t)n >= sizeof(expr) || strchr(vtab.names[i], '"'))
			continue;
		pktbuf_put_bytes(sql, expr, (uint32_t)n);
		added++;
	}
	return added;
}

/* 'value' with quotes doubled, as a standard-conforming literal reads (for a log line only). */
static bool quote_for_log(const char *value, char *dst, size_t size)
{
	size_t j = 0;
	if (size < 3)
		return false;
	dst[j++] = '\'';
	for (const char *c = value; *c; c++) {
		if (j + 4 > size)
			return false;
		if (*c == '\'')
			dst[j++] = '\'';
		dst[j++] = *c;
	}
	dst[j++] = '\'';
	dst[j] = '\0';
	return true;
}

/*
 * The diff as PgBouncer's verbose log spells it ("SET DateStyle='ISO';"),
 * for the debug line operators grep for: what varcache_diff_sql applies,
 * though it applies it through set_config(). Cut short (ending in "...")
 * when dst is too small.
 */
void varcache_diff_describe(const struct varcache *client, const struct varcache *server, char *dst, size_t size)
{
	size_t used = 0;
	char lit[1024];
	if (size == 0)
		return;
	dst[0] = '\0';
	for (int i = 0; i < vtab.count && used < size; i++) {
		int n = 0;
		if (needs_set(client, server, i) && quote_for_log(varcache_get(client, i), lit, sizeof(lit)))
			n = snprintf(dst + used, size - used, "%sSET %s=%s;", used ? " " : "", vtab.names[i], lit);
		else if (!vtab.read_only[i] && i != VARCACHE_CLIENT_ENCODING && !varcache_get(client, i) &&
			 varcache_get(server, i))
			n = snprintf(dst + used, size - used, "%sRESET %s;", used ? " " : "", vtab.names[i]);
		if (n < 0)
			break;
		if ((size_t)n >= size - used) {
			if (size > 4)
				memcpy(dst + size - 4, "...", 4);
			return;
		}
		used += (size_t)n;
	}
}
