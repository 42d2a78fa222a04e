/*
 * test_metrics.c - the exposition side of metrics.c without a pooler:
 * label escaping, histogram buckets, the shared-table form and back,
 * merging workers' sets, and both text formats.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "metrics.h"
#include "../check_main.h"

static char *render(struct metrics_set *set, bool om)
{
	struct evbuffer *b = evbuffer_new();
	metrics_render(set, om, b);
	size_t n = evbuffer_get_length(b);
	char *text = malloc(n + 1);
	evbuffer_remove(b, text, n);
	text[n] = '\0';
	evbuffer_free(b);
	return text;
}

START_TEST(label_escaping)
{
	char lb[256] = "";
	metrics_label(lb, sizeof(lb), "database", "a\"b\\c\nd");
	metrics_label(lb, sizeof(lb), "user", "u");
	ck_assert_str_eq(lb, "database=\"a\\\"b\\\\c\\nd\",user=\"u\"");
	/* a pair that does not fit is left out whole */
	char small[24] = "";
	metrics_label(small, sizeof(small), "a", "1");
	metrics_label(small, sizeof(small), "long_name", "long value here");
	ck_assert_str_eq(small, "a=\"1\"");
}
END_TEST

START_TEST(histogram_buckets)
{
	struct metrics_histogram h = { 0 };
	metrics_histogram_observe(&h, 100);		/* le 0.0001 includes its bound */
	metrics_histogram_observe(&h, 101);		/* next bucket */
	metrics_histogram_observe(&h, 300000);		/* le 0.5 */
	metrics_histogram_observe(&h, 6000000);		/* +Inf */
	metrics_histogram_observe(&h, -5);		/* a clock step counts as 0 */
	ck_assert_uint_eq(h.bucket[0], 2);
	ck_assert_uint_eq(h.bucket[1], 1);
	ck_assert_uint_eq(h.bucket[11], 1);
	ck_assert_uint_eq(h.bucket[METRICS_LATENCY_BUCKETS], 1);
	ck_assert_uint_eq(h.sum_usec, 100 + 101 + 300000 + 6000000);
}
END_TEST

/* Two workers' sets: counters and connection gauges add up, maxwait takes the larger, order is kept. */
START_TEST(merge_two_workers)
{
	struct metrics_set a = { 0 }, b = { 0 }, all = { 0 };
	const char *pl = "database=\"d\",user=\"u\"";
	metrics_add(&a, "pgbouncer_pools_client_active_connections", METRICS_PART_VALUE, pl, 3);
	metrics_add(&a, "pgbouncer_pools_client_maxwait_seconds", METRICS_PART_VALUE, pl, 1.5);
	metrics_add(&a, "pgbouncer_stats_queries_pooled_total", METRICS_PART_VALUE, "database=\"d\"", 10);
	metrics_add(&a, "pgvalve_query_duration_seconds", METRICS_PART_BUCKET, "database=\"d\",le=\"0.001\"", 4);
	metrics_add(&a, "pgvalve_query_duration_seconds", METRICS_PART_BUCKET, "database=\"d\",le=\"+Inf\"", 5);
	metrics_add(&b, "pgbouncer_pools_client_active_connections", METRICS_PART_VALUE, pl, 2);
	metrics_add(&b, "pgbouncer_pools_client_maxwait_seconds", METRICS_PART_VALUE, pl, 0.5);
	metrics_add(&b, "pgbouncer_stats_queries_pooled_total", METRICS_PART_VALUE, "database=\"d\"", 7);
	metrics_add(&b, "pgbouncer_stats_queries_pooled_total", METRICS_PART_VALUE, "database=\"e\"", 1);
	metrics_add(&b, "pgvalve_query_duration_seconds", METRICS_PART_BUCKET, "database=\"d\",le=\"0.001\"", 1);
	metrics_add(&b, "pgvalve_query_duration_seconds", METRICS_PART_BUCKET, "database=\"d\",le=\"+Inf\"", 2);

	/* b goes through the shared-table form, as another worker's set does */
	struct evbuffer *buf = evbuffer_new();
	metrics_serialize(&b, false, buf);
	size_t n = evbuffer_get_length(buf);
	struct metrics_set b2 = { 0 };
	metrics_parse((const char *)evbuffer_pullup(buf, -1), n, false, &b2);
	evbuffer_free(buf);
	ck_assert_uint_eq(b2.n, b.n);

	metrics_append(&all, &a);
	metrics_append(&all, &b2);
	metrics_merge(&all);
	char *text = render(&all, false);
	ck_assert_ptr_nonnull(strstr(text, "pgbouncer_pools_client_active_connections{database=\"d\",user=\"u\"} 5\n"));
	ck_assert_ptr_nonnull(strstr(text, "pgbouncer_pools_client_maxwait_seconds{database=\"d\",user=\"u\"} 1.5\n"));
	ck_assert_ptr_nonnull(strstr(text, "pgbouncer_stats_queries_pooled_total{database=\"d\"} 17\n"));
	ck_assert_ptr_nonnull(strstr(text, "pgbouncer_stats_queries_pooled_total{database=\"e\"} 1\n"));
	/* buckets stay in le order, not sorted as strings ("+Inf" < "0.001") */
	const char *b1 = strstr(text, "le=\"0.001\"} 5\n"), *binf = strstr(text, "le=\"+Inf\"} 7\n");
	ck_assert_ptr_nonnull(b1);
	ck_assert_ptr_nonnull(binf);
	ck_assert(b1 < binf);
	/* one HELP/TYPE per family */
	ck_assert_ptr_nonnull(strstr(text, "# TYPE pgbouncer_stats_queries_pooled_total counter\n"));
	ck_assert_ptr_null(strstr(strstr(text, "# TYPE pgbouncer_stats_queries_pooled_total") + 1,
				  "# TYPE pgbouncer_stats_queries_pooled_total"));
	ck_assert_ptr_nonnull(strstr(text, "# TYPE pgvalve_query_duration_seconds histogram\n"));
	free(text);
	metrics_set_free(&a);
	metrics_set_free(&b);
	metrics_set_free(&b2);
	metrics_set_free(&all);
}
END_TEST

/* counters_only keeps counters and histograms: what a dead worker leaves to its successor. */
START_TEST(counters_only_filter)
{
	struct metrics_set a = { 0 }, back = { 0 };
	metrics_add(&a, "pgbouncer_pools_client_active_connections", METRICS_PART_VALUE, "database=\"d\",user=\"u\"", 3);
	metrics_add(&a, "pgbouncer_stats_queries_pooled_total", METRICS_PART_VALUE, "database=\"d\"", 10);
	metrics_add(&a, "pgvalve_client_wait_seconds", METRICS_PART_SUM, "database=\"d\"", 0.25);
	struct evbuffer *buf = evbuffer_new();
	metrics_serialize(&a, false, buf);
	/* a line from another version, and garbage, are skipped */
	evbuffer_add_printf(buf, "pgvalve_no_such_family\t0\t1\t\nnot a line at all\n");
	size_t n = evbuffer_get_length(buf);
	metrics_parse((const char *)evbuffer_pullup(buf, -1), n, true, &back);
	evbuffer_free(buf);
	ck_assert_uint_eq(back.n, 2);
	char *text = render(&back, false);
	ck_assert_ptr_null(strstr(text, "client_active"));
	ck_assert_ptr_nonnull(strstr(text, "pgvalve_client_wait_seconds_sum{database=\"d\"} 0.25\n"));
	free(text);
	metrics_set_free(&a);
	metrics_set_free(&back);
}
END_TEST

START_TEST(openmetrics_names)
{
	struct metrics_set a = { 0 };
	metrics_add(&a, "pgbouncer_version_info", METRICS_PART_VALUE, "version=\"x\"", 1);
	metrics_add(&a, "pgbouncer_stats_binds_total", METRICS_PART_VALUE, "database=\"d\"", 2);
	metrics_add(&a, "pgbouncer_up", METRICS_PART_VALUE, NULL, 1);
	char *text = render(&a, true);
	ck_assert_ptr_nonnull(strstr(text, "# TYPE pgbouncer_version info\npgbouncer_version_info{version=\"x\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(text, "# TYPE pgbouncer_stats_binds counter\npgbouncer_stats_binds_total{"));
	ck_assert_ptr_nonnull(strstr(text, "\npgbouncer_up 1\n"));
	size_t len = strlen(text);
	ck_assert(len > 6 && strcmp(text + len - 6, "# EOF\n") == 0);
	free(text);
	text = render(&a, false);
	ck_assert_ptr_nonnull(strstr(text, "# TYPE pgbouncer_version_info gauge\n"));
	ck_assert_ptr_nonnull(strstr(text, "# TYPE pgbouncer_stats_binds_total counter\n"));
	ck_assert_ptr_null(strstr(text, "# EOF"));
	free(text);
	metrics_set_free(&a);
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("exposition");
	tcase_add_test(tc, label_escaping);
	tcase_add_test(tc, histogram_buckets);
	tcase_add_test(tc, merge_two_workers);
	tcase_add_test(tc, counters_only_filter);
	tcase_add_test(tc, openmetrics_names);
	suite_add_tcase(s, tc);
	return s;
}
