/*
 * test_admin_merge.c - the rules that merge every worker's answer to a
 * SHOW into the instance's (admin_merge.c, admin_internal.h): pools summed
 * per (database, user) in byte order, maxwait and maxwait_us from the
 * worker with the longest wait, settings from the lowest worker; average
 * times weighted by their rates (the largest when every rate is 0); per
 * worker views with a last "worker" column and without the fan-out's own
 * connections; (name, value) views per name, configuration counts the
 * largest; the fan-out's own logins taken out of the counts; an answer
 * with other columns left out.
 */
#include <check.h>
#include <stdlib.h>

#include "common.h"
#include "admin_internal.h"
#include "proto.h"

#include "../../check_main.h"

#define MAXC 32
#define MAXR 16

/* A worker's answer: columns by name (all text), rows of values (NULL: SQL NULL). */
static struct admin_answer *answer(int worker, int ncols, const char *const *names, int nrows,
				   const char *const rows[][MAXC])
{
	struct admin_answer *a = xcalloc(1, sizeof(*a));
	a->worker = worker;
	a->ncols = ncols;
	a->names = xcalloc((size_t)ncols, sizeof(*a->names));
	a->oids = xcalloc((size_t)ncols, sizeof(*a->oids));
	for (int c = 0; c < ncols; c++) {
		a->names[c] = xstrdup(names[c]);
		a->oids[c] = 25;
	}
	a->rows = xcalloc((size_t)nrows + 1, sizeof(*a->rows));
	for (int r = 0; r < nrows; r++) {
		a->rows[r] = xcalloc((size_t)ncols, sizeof(**a->rows));
		for (int c = 0; c < ncols; c++)
			a->rows[r][c] = rows[r][c] ? xstrdup(rows[r][c]) : NULL;
	}
	a->nrows = a->cap = nrows;
	return a;
}

/* The merged result set, read back from its RowDescription and DataRows. */
struct table {
	int ncols, nrows;
	char names[MAXC][64];
	char *v[MAXR][MAXC];
};

static void read_table(const struct admin_result *r, struct table *t)
{
	memset(t, 0, sizeof(*t));
	for (uint32_t pos = 0; pos < r->b.len;) {
		uint8_t type = r->b.buf[pos];
		uint32_t len = (uint32_t)r->b.buf[pos + 1] << 24 | (uint32_t)r->b.buf[pos + 2] << 16 |
			       (uint32_t)r->b.buf[pos + 3] << 8 | r->b.buf[pos + 4];
		struct pkt_reader rd;
		pkt_reader_init(&rd, r->b.buf + pos + 5, len - 4);
		int n = pkt_get_uint16(&rd);
		for (int c = 0; c < n && type == 'T'; c++) {
			snprintf(t->names[c], sizeof(t->names[c]), "%s", pkt_get_string(&rd));
			pkt_get_bytes(&rd, 18);
		}
		if (type == 'T')
			t->ncols = n;
		for (int c = 0; c < n && type == 'D'; c++) {
			uint32_t vlen = pkt_get_uint32(&rd);
			if (vlen == 0xFFFFFFFFu)
				continue;
			t->v[t->nrows][c] = strndup((const char *)pkt_get_bytes(&rd, vlen), vlen);
		}
		if (type == 'D')
			t->nrows++;
		ck_assert(!rd.failed);
		pos += 1 + len;
	}
}

static void table_free(struct table *t)
{
	for (int r = 0; r < t->nrows; r++)
		for (int c = 0; c < t->ncols; c++)
			free(t->v[r][c]);
}

static const char *at(const struct table *t, int row, const char *col)
{
	for (int c = 0; c < t->ncols; c++)
		if (strcmp(t->names[c], col) == 0)
			return t->v[row][c];
	ck_abort_msg("no column %s", col);
	return NULL;
}

/* Merges the answers of view `what` and frees them. */
static void merge(const char *what, struct admin_answer **a, int n, int own_legs, struct table *t)
{
	const struct admin_view *view = admin_merge_find(what);
	ck_assert_ptr_nonnull(view);
	struct admin_result r;
	admin_result_init(&r, 1024);
	admin_merge(view, a, n, own_legs, &r);
	read_table(&r, t);
	pktbuf_free(&r.b);
	for (int i = 0; i < n; i++) {
		admin_answer_free(a[i]);
		free(a[i]);
	}
}

static const char *const pool_names[] = { "database", "user", "cl_active", "sv_idle", "maxwait", "maxwait_us",
					   "pool_mode" };

START_TEST(pools_summed_per_pool_longest_wait)
{
	const char *const w1[][MAXC] = {
		{ "db1", "u", "3", "1", "3", "10", "transaction" },
		{ "pgbouncer", "pgbouncer", "1", "0", "0", "0", "statement" },
	};
	const char *const w2[][MAXC] = {
		{ "db2", "u", "5", "0", "0", "0", "session" },
		{ "db1", "u", "4", "2", "2", "999999", "session" },
		{ "pgbouncer", "pgbouncer", "2", "0", "0", "0", "statement" },
	};
	struct admin_answer *a[] = { answer(1, 7, pool_names, 2, w1), answer(2, 7, pool_names, 3, w2) };
	struct table t;
	merge("pools", a, 2, 2, &t);
	ck_assert_int_eq(t.ncols, 7);	/* no worker column in a merged view */
	ck_assert_int_eq(t.nrows, 3);
	ck_assert_str_eq(at(&t, 0, "database"), "db1");
	ck_assert_str_eq(at(&t, 0, "cl_active"), "7");
	ck_assert_str_eq(at(&t, 0, "sv_idle"), "3");
	ck_assert_str_eq(at(&t, 0, "maxwait"), "3");	/* 3.000010 s beats 2.999999 s */
	ck_assert_str_eq(at(&t, 0, "maxwait_us"), "10");
	ck_assert_str_eq(at(&t, 0, "pool_mode"), "transaction");	/* the lowest worker's */
	ck_assert_str_eq(at(&t, 1, "database"), "db2");
	ck_assert_str_eq(at(&t, 1, "cl_active"), "5");
	ck_assert_str_eq(at(&t, 2, "database"), "pgbouncer");
	ck_assert_str_eq(at(&t, 2, "cl_active"), "1");	/* 3 consoles, 2 of them the fan-out's */
	table_free(&t);
}
END_TEST

START_TEST(average_times_weighted_by_rates)
{
	static const char *const names[] = { "database", "xact_count", "xact_time", "query_count", "query_time",
					     "server_assignment_count", "wait_time" };
	const char *const w1[][MAXC] = { { "db", "10", "100", "0", "50", "1", "7" } };
	const char *const w2[][MAXC] = { { "db", "30", "200", "0", "80", "3", "3" } };
	struct admin_answer *a[] = { answer(1, 7, names, 1, w1), answer(2, 7, names, 1, w2) };
	struct table t;
	merge("stats_averages", a, 2, 0, &t);
	ck_assert_int_eq(t.nrows, 1);
	ck_assert_str_eq(at(&t, 0, "xact_count"), "40");	/* rates add up */
	ck_assert_str_eq(at(&t, 0, "xact_time"), "175");	/* (10 * 100 + 30 * 200) / 40 */
	ck_assert_str_eq(at(&t, 0, "query_time"), "80");	/* no queries counted: the largest */
	ck_assert_str_eq(at(&t, 0, "wait_time"), "4");	/* (1 * 7 + 3 * 3) / 4 */
	table_free(&t);
}
END_TEST

START_TEST(per_worker_rows_with_worker_column)
{
	static const char *const names[] = { "type", "user", "database", "application_name", "id" };
	const char *const w1[][MAXC] = {
		{ "C", "u", "db", "app", "281474976710657" },
		{ "C", "pgbouncer", "pgbouncer", ADMIN_FANOUT_APPNAME, "281474976710658" },
	};
	const char *const w3[][MAXC] = {
		{ "C", "u", "db", NULL, "844424930131969" },
		{ "C", "pgbouncer", "pgbouncer", "psql", "844424930131970" },
	};
	struct admin_answer *a[] = { answer(1, 5, names, 2, w1), answer(3, 5, names, 2, w3) };
	struct table t;
	merge("CLIENTS", a, 2, 2, &t);
	ck_assert_int_eq(t.ncols, 6);
	ck_assert_str_eq(t.names[5], "worker");
	ck_assert_int_eq(t.nrows, 3);	/* the fan-out's own connection left out, an operator's kept */
	ck_assert_str_eq(at(&t, 0, "id"), "281474976710657");
	ck_assert_str_eq(at(&t, 0, "worker"), "1");
	ck_assert_ptr_null(at(&t, 1, "application_name"));
	ck_assert_str_eq(at(&t, 1, "worker"), "3");
	ck_assert_str_eq(at(&t, 2, "application_name"), "psql");
	table_free(&t);
}
END_TEST

START_TEST(name_value_rows)
{
	static const char *const names[] = { "list", "items" };
	const char *const w1[][MAXC] = { { "databases", "3" }, { "used_clients", "10" }, { "used_servers", "2" } };
	const char *const w2[][MAXC] = { { "databases", "4" }, { "used_clients", "5" }, { "used_servers", "1" } };
	struct admin_answer *a[] = { answer(1, 2, names, 3, w1), answer(2, 2, names, 3, w2) };
	struct table t;
	merge("LISTS", a, 2, 2, &t);
	ck_assert_int_eq(t.nrows, 3);
	ck_assert_str_eq(at(&t, 0, "list"), "databases");	/* the workers' order, not sorted */
	ck_assert_str_eq(at(&t, 0, "items"), "4");	/* a configuration count: the largest */
	ck_assert_str_eq(at(&t, 1, "items"), "13");	/* 15 clients, 2 of them the fan-out's */
	ck_assert_str_eq(at(&t, 2, "items"), "3");
	table_free(&t);

	static const char *const tnames[] = { "name", "value" };
	const char *const t1[][MAXC] = { { "total_xact_count", "100" }, { "avg_xact_count", "1" },
					  { "avg_xact_time", "50" } };
	const char *const t2[][MAXC] = { { "total_xact_count", "200" }, { "avg_xact_count", "3" },
					  { "avg_xact_time", "10" } };
	struct admin_answer *b[] = { answer(1, 2, tnames, 3, t1), answer(2, 2, tnames, 3, t2) };
	merge("TOTALS", b, 2, 0, &t);
	ck_assert_str_eq(at(&t, 0, "value"), "300");
	ck_assert_str_eq(at(&t, 1, "value"), "4");
	ck_assert_str_eq(at(&t, 2, "value"), "20");	/* (1 * 50 + 3 * 10) / 4 */
	table_free(&t);
}
END_TEST

START_TEST(other_columns_left_out)
{
	static const char *const names6[] = { "database", "user", "cl_active", "sv_idle", "maxwait", "maxwait_us" };
	const char *const w1[][MAXC] = { { "db1", "u", "3", "1", "0", "0", "session" } };
	const char *const w2[][MAXC] = { { "db1", "u", "4", "2", "0", "0" } };
	struct admin_answer *a[] = { answer(1, 7, pool_names, 1, w1), answer(2, 6, names6, 1, w2) };
	struct table t;
	merge("POOLS", a, 2, 0, &t);
	ck_assert_int_eq(t.nrows, 1);
	ck_assert_str_eq(at(&t, 0, "cl_active"), "3");
	table_free(&t);
	ck_assert_ptr_null(admin_merge_find("CONFIG"));	/* the same in every worker: not merged */
	ck_assert_ptr_null(admin_merge_find("WORKERS"));
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("admin_merge");
	TCase *tc = tcase_create("merge");
	tcase_add_test(tc, pools_summed_per_pool_longest_wait);
	tcase_add_test(tc, average_times_weighted_by_rates);
	tcase_add_test(tc, per_worker_rows_with_worker_column);
	tcase_add_test(tc, name_value_rows);
	tcase_add_test(tc, other_columns_left_out);
	suite_add_tcase(s, tc);
	return s;
}
