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
	int count;
} vtab;

void varcache_configure(const char *extra)
{
	for (int i = 0; i < vtab.count; i++)
		free(vtab.names[i]);
	vtab.count = 0;
	for (size_t i = 0; i < ARRAY_SIZE(fixed_names); i++)
		vtab.names[vtab.count++] = xstrdup(fixed_names[i]);
	if (!extra)
		return;
	const char *p = extra;
	while (*p) {
		while (*p == ',' || *p == ' ' || *p == '\t')
			p++;
		const char *start = p;
		while (*p && *p != ',' && *p != ' ' && *p != '\t')
			p++;
		if (p == start)
			continue;
		char name[128];
		size_t len = (size_t)(p - start) < sizeof(name) - 1 ? (size_t)(p - start) : sizeof(name) - 1;
		memcpy(name, start, len);
		name[len] = '\0';
		if (varcache_index(name) >= 0)
			continue;
		if (vtab.count >= VARCACHE_MAX) {
			log_warning("track_extra_parameters: too many parameters, \"%s\" not tracked", name);
			continue;
		}
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
	for (int i = 0; i < vtab.count; i++)
		if (strcasecmp(vtab.names[i], name) == 0)
			return i;
	return -1;
}

const char *varcache_get(const struct varcache *vc, int idx)
{
	if (!vc || idx < 0 || idx >= VARCACHE_MAX)
		return NULL;
	return vc->values[idx];
}

void varcache_set(struct varcache **vc, int idx, const char *value)
{
	if (idx < 0 || idx >= VARCACHE_MAX)
		return;
	if (!*vc)
		*vc = xcalloc(1, sizeof(**vc));
	char *old = (*vc)->values[idx];
	if (old && strcmp(old, value) == 0)
		return;
	(*vc)->values[idx] = xstrdup(value);
	free(old);
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
	for (int i = 0; i < VARCACHE_MAX; i++)
		free(vc->values[i]);
	free(vc);
}

void varcache_copy_missing(struct varcache **dst, const struct varcache *src)
{
	if (!src)
		return;
	for (int i = 0; i < vtab.count; i++)
		if (src->values[i] && !varcache_get(*dst, i))
			varcache_set(dst, i, src->values[i]);
}

void varcache_copy_set(struct varcache **dst, const struct varcache *src)
{
	if (!src)
		return;
	for (int i = 0; i < vtab.count; i++)
		if (src->values[i])
			varcache_set(dst, i, src->values[i]);
}

void varcache_forget_except(struct varcache *vc, uint32_t keep_mask)
{
	if (!vc)
		return;
	for (int i = 0; i < VARCACHE_MAX; i++) {
		if (!(keep_mask & (1u << i))) {
			free(vc->values[i]);
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
		const char *want = client->values[i];
		const char *have = varcache_get(server, i);
		if (!want || (have && strcmp(want, have) == 0))
			continue;
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
	return added;
}
