/*
 * admin_merge.c - how the console merges what every worker answered to a
 * SHOW into the instance's one answer (admin_fanout.c gathers the
 * answers): a rule per view and column (key, sum, max, weighted average,
 * first, the longest wait) in views[], and the merge itself.
 *
 * Pure: reads the answers it is given and writes a result set
 * (admin_result); no I/O, no pool, client or worker state, so
 * test/unit/feature/console/test_admin_merge.c checks the rules alone.
 */
#include "common.h"
#include "admin_internal.h"

/* ---------------------------------------------------------------- merge rules */

enum col_rule {
	COL_FIRST,		/* the lowest worker's */
	COL_KEY,		/* rows with equal keys are merged */
	COL_SUM,
	COL_MAX,
	COL_WAVG,		/* weighted by the column (row) named weight; the largest if all weights are 0 */
	COL_MAXWAIT,		/* maxwait / maxwait_us: both from the worker with the longest wait */
};

struct col_def {
	const char *name;
	enum col_rule rule;
	const char *weight;
};

enum view_shape {
	VIEW_PER_WORKER,	/* every worker's rows, and a worker column */
	VIEW_KEYED,		/* one row per key */
	VIEW_NAME_VALUE,	/* (name, value) rows: the rules are per name */
};

/*
 * The fan-out's own connections, one per worker that answered, are
 * console clients of user pgbouncer there while the command runs: the
 * row whose first column is key (and second key2, unless NULL) counts
 * them in column col; they are taken out, so the numbers are what they
 * would be without the fan-out (and what /metrics says).
 */
struct own_legs {
	const char *key, *key2, *col;
};

struct admin_view {
	const char *name;
	enum view_shape shape;
	bool sorted;		/* keyed rows in the byte order of their keys, else in order of appearance */
	enum col_rule dflt;	/* for columns (rows, NAME_VALUE) not listed */
	const struct col_def *cols;
	struct own_legs legs;	/* key NULL: the view does not count them */
};

static const struct col_def pools_cols[] = {
	{ "database", COL_KEY, NULL }, { "user", COL_KEY, NULL }, { "maxwait", COL_MAXWAIT, NULL },
	{ "maxwait_us", COL_MAXWAIT, NULL }, { "pool_mode", COL_FIRST, NULL },
	{ "load_balance_hosts", COL_FIRST, NULL }, { NULL, 0, NULL },
};
static const struct col_def stats_cols[] = {
	{ "database", COL_KEY, NULL }, { "avg_xact_time", COL_WAVG, "avg_xact_count" },
	{ "avg_query_time", COL_WAVG, "avg_query_count" },
	{ "avg_wait_time", COL_WAVG, "avg_server_assignment_count" }, { NULL, 0, NULL },
};
static const struct col_def stats_totals_cols[] = { { "database", COL_KEY, NULL }, { NULL, 0, NULL } };
static const struct col_def stats_averages_cols[] = {
	{ "database", COL_KEY, NULL }, { "xact_time", COL_WAVG, "xact_count" },
	{ "query_time", COL_WAVG, "query_count" }, { "wait_time", COL_WAVG, "server_assignment_count" },
	{ NULL, 0, NULL },
};
static const struct col_def totals_rows[] = {
	{ "avg_xact_time", COL_WAVG, "avg_xact_count" }, { "avg_query_time", COL_WAVG, "avg_query_count" },
	{ "avg_wait_time", COL_WAVG, "avg_server_assignment_count" }, { NULL, 0, NULL },
};
static const struct col_def databases_cols[] = {
	{ "name", COL_KEY, NULL }, { "current_connections", COL_SUM, NULL },
	{ "current_client_connections", COL_SUM, NULL }, { "paused", COL_MAX, NULL },
	{ "disabled", COL_MAX, NULL }, { NULL, 0, NULL },
};
static const struct col_def users_cols[] = {
	{ "name", COL_KEY, NULL }, { "current_connections", COL_SUM, NULL },
	{ "current_client_connections", COL_SUM, NULL }, { NULL, 0, NULL },
};
static const struct col_def lists_rows[] = {
	{ "databases", COL_MAX, NULL }, { "users", COL_MAX, NULL }, { "peers", COL_MAX, NULL },
	{ "pools", COL_MAX, NULL }, { "peer_pools", COL_MAX, NULL }, { "dns_names", COL_MAX, NULL },
	{ "dns_zones", COL_MAX, NULL }, { NULL, 0, NULL },
};
static const struct col_def mem_cols[] = { { "name", COL_KEY, NULL }, { "size", COL_FIRST, NULL }, { NULL, 0, NULL } };
static const struct col_def hosts_cols[] = {
	{ "database", COL_KEY, NULL }, { "host", COL_KEY, NULL }, { "port", COL_KEY, NULL },
	{ "sv_count", COL_SUM, NULL }, { "xact_count", COL_SUM, NULL }, { "reads_balanced", COL_SUM, NULL },
	{ "reads_kept_fresh", COL_SUM, NULL }, { "reads_retried", COL_SUM, NULL }, { NULL, 0, NULL },
};
static const struct col_def listeners_cols[] = {
	{ "database", COL_KEY, NULL }, { "user", COL_KEY, NULL }, { "channel", COL_KEY, NULL },
	{ "listeners", COL_SUM, NULL }, { NULL, 0, NULL },
};
static const struct col_def tenants_cols[] = {
	{ "tenant", COL_KEY, NULL }, { "clients", COL_SUM, NULL }, { "servers", COL_SUM, NULL },
	{ "waiting", COL_SUM, NULL }, { NULL, 0, NULL },
};
static const struct col_def no_cols[] = { { NULL, 0, NULL } };

#define NO_LEGS { NULL, NULL, NULL }

static const struct admin_view views[] = {
	{ "POOLS", VIEW_KEYED, true, COL_SUM, pools_cols, { "pgbouncer", "pgbouncer", "cl_active" } },
	{ "STATS", VIEW_KEYED, true, COL_SUM, stats_cols, NO_LEGS },
	{ "STATS_TOTALS", VIEW_KEYED, true, COL_SUM, stats_totals_cols, NO_LEGS },
	{ "STATS_AVERAGES", VIEW_KEYED, true, COL_SUM, stats_averages_cols, NO_LEGS },
	{ "TOTALS", VIEW_NAME_VALUE, false, COL_SUM, totals_rows, NO_LEGS },
	{ "DATABASES", VIEW_KEYED, true, COL_FIRST, databases_cols,
	  { "pgbouncer", NULL, "current_client_connections" } },
	{ "USERS", VIEW_KEYED, true, COL_FIRST, users_cols, { "pgbouncer", NULL, "current_client_connections" } },
	{ "LISTS", VIEW_NAME_VALUE, false, COL_SUM, lists_rows, { "used_clients", NULL, "items" } },
	{ "MEM", VIEW_KEYED, false, COL_SUM, mem_cols, NO_LEGS },
	{ "HOSTS", VIEW_KEYED, false, COL_FIRST, hosts_cols, NO_LEGS },
	{ "LISTENERS", VIEW_KEYED, false, COL_FIRST, listeners_cols, NO_LEGS },
	{ "TENANTS", VIEW_KEYED, true, COL_FIRST, tenants_cols, NO_LEGS },
	{ "CLIENTS", VIEW_PER_WORKER, false, COL_FIRST, no_cols, NO_LEGS },
	{ "SERVERS", VIEW_PER_WORKER, false, COL_FIRST, no_cols, NO_LEGS },
	{ "SOCKETS", VIEW_PER_WORKER, false, COL_FIRST, no_cols, NO_LEGS },
	{ "ACTIVE_SOCKETS", VIEW_PER_WORKER, false, COL_FIRST, no_cols, NO_LEGS },
};

static const struct col_def *rule_of(const struct admin_view *v, const char *name)
{
	static const struct col_def dflt[] = {
		{ NULL, COL_FIRST, NULL }, { NULL, COL_KEY, NULL }, { NULL, COL_SUM, NULL }, { NULL, COL_MAX, NULL },
	};
	for (const struct col_def *c = v->cols; c->name; c++)
		if (name && strcmp(c->name, name) == 0)
			return c;
	return &dflt[v->dflt];
}

/* ---------------------------------------------------------------- merging */

/* One worker's row in a merged view. */
struct member {
	const struct admin_answer *res;
	int leg, row;			/* leg: the answer's worker */
};

struct merge {
	const struct admin_view *view;
	const struct admin_answer *ref;	/* the columns every answer must have */
	const struct col_def **rules;	/* per column (KEYED) */
	struct member *m;
	int nm;
	int legs;			/* the fan-out's own connections the answers count */
};

static const char *member_value(const struct member *m, int col)
{
	return m->res->rows[m->row][col];
}

static int find_col(const struct admin_answer *res, const char *name)
{
	for (int i = 0; name && i < res->ncols; i++)
		if (strcmp(res->names[i], name) == 0)
			return i;
	return -1;
}

static int cmp_nullable(const char *a, const char *b)
{
	if (!a || !b)
		return a ? 1 : b ? -1 : 0;
	return strcmp(a, b);
}

/* The merge qsort compares rows for (qsort has no context argument); set just before. */
static const struct merge *sort_merge;

static int cmp_key(const struct merge *mg, const struct member *a, const struct member *b)
{
	for (int c = 0; c < mg->ref->ncols; c++) {
		if (mg->rules[c]->rule != COL_KEY)
			continue;
		int r = cmp_nullable(member_value(a, c), member_value(b, c));
		if (r)
			return r;
	}
	return 0;
}

/* Rows by key, then worker and row order: equal keys end up together, the lowest worker first. */
static int cmp_member(const void *pa, const void *pb)
{
	const struct member *a = pa, *b = pb;
	int r = cmp_key(sort_merge, a, b);
	if (r)
		return r;
	return a->leg != b->leg ? a->leg - b->leg : a->row - b->row;
}

static int cmp_first_seen(const void *pa, const void *pb)
{
	const struct member *a = *(const struct member *const *)pa, *b = *(const struct member *const *)pb;
	return a->leg != b->leg ? a->leg - b->leg : a->row - b->row;
}

static long long num(const char *s)
{
	return s ? strtoll(s, NULL, 10) : 0;
}

/* The value of row `name`'s value column in a (name, value) answer. */
static const char *named_value(const struct admin_answer *res, const char *name)
{
	for (int i = 0; name && i < res->nrows; i++)
		if (res->rows[i][0] && strcmp(res->rows[i][0], name) == 0)
			return res->rows[i][1];
	return NULL;
}

/* One merged cell of the group g[0..n) for column col under rule def into buf. */
static const char *merge_cell(const struct member *g, int n, int col, const struct col_def *def, bool by_name,
			      char *buf, size_t size)
{
	long long best = 0, sum = 0;
	long double wnum = 0, wden = 0;
	int best_i = 0, wcol = by_name ? 1 : find_col(g[0].res, def->weight);
	bool any = false;
	if (def->rule == COL_FIRST || def->rule == COL_KEY)
		return member_value(&g[0], col);
	int ws = by_name ? -1 : find_col(g[0].res, "maxwait"), wus = by_name ? -1 : find_col(g[0].res, "maxwait_us");
	for (int i = 0; i < n; i++) {
		const char *s = member_value(&g[i], col);
		long long v = num(s);
		if (def->rule == COL_MAXWAIT && ws >= 0 && wus >= 0)
			v = num(member_value(&g[i], ws)) * USEC_PER_SEC + num(member_value(&g[i], wus));
		if (s && (!any || v > best)) {
			best = v;
			best_i = i;
		}
		any = any || s;
		sum += v;
		if (def->rule == COL_WAVG && wcol >= 0) {
			long double w = (long double)num(by_name ? named_value(g[i].res, def->weight) :
								   member_value(&g[i], wcol));
			wnum += w * (long double)v;
			wden += w;
		}
	}
	if (!any)
		return NULL;
	if (def->rule == COL_MAXWAIT)
		return member_value(&g[best_i], col);
	long long out = def->rule == COL_SUM ? sum : def->rule == COL_WAVG && wden > 0 ? (long long)(wnum / wden) : best;
	snprintf(buf, size, "%lld", out);
	return buf;
}

void admin_merge_result_types(const struct admin_answer *ref, char *types, bool worker_col)
{
	int i;
	for (i = 0; i < ref->ncols; i++)
		types[i] = ref->oids[i] == 20 ? 'q' : ref->oids[i] == 23 ? 'i' : ref->oids[i] == 1700 ? 'N' : 's';
	if (worker_col)
		types[i++] = 'i';
	types[i] = '\0';
}

/* A fan-out's own connection to a worker (the console superuser over a Unix socket, named so). */
static bool is_leg_row(const struct merge *mg, const struct member *m)
{
	int app = find_col(mg->ref, "application_name"), user = find_col(mg->ref, "user"),
	    type = find_col(mg->ref, "type");
	return app >= 0 && user >= 0 && type >= 0 && member_value(m, type) && member_value(m, app) &&
	       member_value(m, user) && strcmp(member_value(m, type), "C") == 0 &&
	       strcmp(member_value(m, app), ADMIN_FANOUT_APPNAME) == 0 && strcmp(member_value(m, user), "pgbouncer") == 0;
}

/* Every worker's rows, each with its worker number last; the fan-outs' own connections left out. */
static void merge_per_worker(const struct merge *mg, struct admin_result *r)
{
	const char **v = xcalloc((size_t)mg->ref->ncols + 1, sizeof(*v));
	char wbuf[16];
	for (int i = 0; i < mg->nm; i++) {
		const struct member *m = &mg->m[i];
		if (is_leg_row(mg, m))
			continue;
		for (int c = 0; c < mg->ref->ncols; c++)
			v[c] = member_value(m, c);
		snprintf(wbuf, sizeof(wbuf), "%d", m->leg);
		v[mg->ref->ncols] = wbuf;
		admin_result_row(r, v);
	}
	free(v);
}

/* Takes the fan-out's own connections out of the row that counts them (struct own_legs). */
static void discount_legs(const struct merge *mg, const char **v, char (*bufs)[32])
{
	const struct own_legs *o = &mg->view->legs;
	if (!o->key || mg->ref->ncols < 2 || !v[0] || strcmp(v[0], o->key) != 0 ||
	    (o->key2 && (!v[1] || strcmp(v[1], o->key2) != 0)))
		return;
	int c = find_col(mg->ref, o->col);
	if (c < 0 || !v[c])
		return;
	long long n = num(v[c]) - mg->legs;
	snprintf(bufs[c], sizeof(bufs[c]), "%lld", n > 0 ? n : 0);
	v[c] = bufs[c];
}

/* One row per key (KEYED) or per name (NAME_VALUE). */
static void merge_grouped(struct merge *mg, struct admin_result *r)
{
	int ncols = mg->ref->ncols;
	bool by_name = mg->view->shape == VIEW_NAME_VALUE;
	sort_merge = mg;
	qsort(mg->m, (size_t)mg->nm, sizeof(*mg->m), cmp_member);
	/* group starts, in key order or in order of first appearance */
	const struct member **starts = xcalloc((size_t)mg->nm + 1, sizeof(*starts));
	int ng = 0;
	for (int i = 0; i < mg->nm; i++)
		if (i == 0 || cmp_key(mg, &mg->m[i - 1], &mg->m[i]) != 0)
			starts[ng++] = &mg->m[i];
	if (!mg->view->sorted)
		qsort(starts, (size_t)ng, sizeof(*starts), cmp_first_seen);
	const char **v = xcalloc((size_t)ncols, sizeof(*v));
	char (*bufs)[32] = xcalloc((size_t)ncols, sizeof(*bufs));
	for (int k = 0; k < ng; k++) {
		const struct member *g = starts[k];
		int n = 1;
		while (g + n < mg->m + mg->nm && cmp_key(mg, g, g + n) == 0)
			n++;
		for (int c = 0; c < ncols; c++) {
			const struct col_def *def = mg->rules[c];
			if (by_name && c == 1)
				def = rule_of(mg->view, member_value(g, 0));
			v[c] = merge_cell(g, n, c, def, by_name && c == 1, bufs[c], sizeof(bufs[c]));
		}
		discount_legs(mg, v, bufs);
		admin_result_row(r, v);
	}
	free(bufs);
	free(v);
	free(starts);
}

/* ---------------------------------------------------------------- answers */

void admin_answer_free(struct admin_answer *a)
{
	for (int i = 0; i < a->nrows; i++) {
		for (int j = 0; j < a->ncols; j++)
			free(a->rows[i][j]);
		free(a->rows[i]);
	}
	for (int j = 0; j < a->ncols; j++)
		free(a->names[j]);
	free(a->rows);
	free(a->names);
	free(a->oids);
	memset(a, 0, sizeof(*a));
}

bool admin_merge_per_worker(const struct admin_view *view)
{
	return view->shape == VIEW_PER_WORKER;
}

const struct admin_view *admin_merge_find(const char *what)
{
	for (size_t i = 0; i < ARRAY_SIZE(views); i++)
		if (admin_word_is(what, views[i].name))
			return &views[i];
	return NULL;
}

/* The rule of each column: by name, or for (name, value) views a key and the rows' own. */
static const struct col_def **column_rules(const struct admin_view *view, const struct admin_answer *ref)
{
	static const struct col_def key = { NULL, COL_KEY, NULL };
	const struct col_def **rules = xcalloc((size_t)ref->ncols, sizeof(*rules));
	for (int c = 0; c < ref->ncols; c++)
		rules[c] = view->shape == VIEW_NAME_VALUE ? (c == 0 ? &key : rule_of(view, NULL))
							  : rule_of(view, ref->names[c]);
	return rules;
}

void admin_merge(const struct admin_view *view, struct admin_answer *const *answers, int n, int own_legs,
		 struct admin_result *r)
{
	struct merge mg = { .view = view, .ref = answers[0], .legs = own_legs };
	int ncols = mg.ref->ncols, total = 0;
	bool worker_col = view->shape == VIEW_PER_WORKER;
	for (int i = 0; i < n; i++)
		total += answers[i]->ncols == ncols ? answers[i]->nrows : 0;
	mg.m = xcalloc((size_t)total + 1, sizeof(*mg.m));
	mg.rules = column_rules(view, mg.ref);
	for (int i = 0; i < n; i++) {
		if (answers[i]->ncols != ncols)
			continue;	/* another version's columns: left out */
		for (int row = 0; row < answers[i]->nrows; row++)
			mg.m[mg.nm++] = (struct member){ answers[i], answers[i]->worker, row };
	}
	char *types = xmalloc((size_t)ncols + 2);
	const char **names = xcalloc((size_t)ncols + 1, sizeof(*names));
	for (int c = 0; c < ncols; c++)
		names[c] = mg.ref->names[c];
	names[ncols] = "worker";
	admin_merge_result_types(mg.ref, types, worker_col);
	admin_result_begin(r, types, names);
	if (worker_col)
		merge_per_worker(&mg, r);
	else
		merge_grouped(&mg, r);
	free(types);
	free(names);
	free(mg.rules);
	free(mg.m);
}
