/*
 * test_scale_hist.c - test/bench/scale_hist.c, the scale load generator's
 * latency histogram: every value lands in a bucket whose bounds hold it,
 * buckets tile the range without gaps, percentiles of known
 * distributions, and a merge of per-process histograms answers what one
 * histogram of all the values would.
 */
#include "scale_hist.h"
#include "../check_main.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_buckets_tile)
{
	/* consecutive buckets meet exactly; each is at most 1/32 of its low bound wide past 64 */
	for (unsigned i = 0; i + 1 < HIST_BUCKETS; i++) {
		ck_assert_uint_eq(hist_bucket_high(i) + 1, hist_bucket_low(i + 1));
		ck_assert_uint_eq(hist_index(hist_bucket_low(i)), i);
		ck_assert_uint_eq(hist_index(hist_bucket_high(i)), i);
		if (hist_bucket_low(i) >= 64)
			ck_assert_uint_le(hist_bucket_high(i) - hist_bucket_low(i) + 1, hist_bucket_low(i) / 32);
	}
	ck_assert_uint_eq(hist_bucket_low(0), 0);
	ck_assert_uint_eq(hist_index((uint64_t)1 << 40), HIST_BUCKETS - 1);
	ck_assert_uint_eq(hist_index(UINT64_MAX), HIST_BUCKETS - 1);
}
END_TEST

START_TEST(test_value_in_bucket)
{
	uint64_t v = 1;
	for (int i = 0; i < 20000; i++) {
		v = v * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t x = v >> (24 + (unsigned)(i % 40));
		unsigned idx = hist_index(x);
		ck_assert_uint_le(hist_bucket_low(idx), x);
		ck_assert_uint_ge(hist_bucket_high(idx), x);
	}
}
END_TEST

START_TEST(test_percentiles)
{
	static struct hist h;
	hist_reset(&h);
	ck_assert_uint_eq(hist_percentile(&h, 0.99), 0);
	/* 1..10000 us, once each */
	for (uint64_t i = 1; i <= 10000; i++)
		hist_add(&h, i);
	ck_assert_uint_eq(h.count, 10000);
	ck_assert_uint_eq(h.max_us, 10000);
	ck_assert_uint_eq(h.sum_us, 10000ull * 10001 / 2);
	static const double q[] = { 0.5, 0.9, 0.99, 0.999 };
	for (unsigned i = 0; i < 4; i++) {
		uint64_t exact = (uint64_t)(q[i] * 10000), got = hist_percentile(&h, q[i]);
		ck_assert_uint_ge(got, exact);
		ck_assert_uint_le(got, exact + exact / 32 + 1);
	}
	ck_assert_uint_eq(hist_percentile(&h, 1.0), 10000);
	ck_assert_uint_eq(hist_percentile(&h, 0), 1);
	/* small values are exact */
	hist_reset(&h);
	for (int i = 0; i < 99; i++)
		hist_add(&h, 7);
	hist_add(&h, 50);
	ck_assert_uint_eq(hist_percentile(&h, 0.5), 7);
	ck_assert_uint_eq(hist_percentile(&h, 0.99), 7);
	ck_assert_uint_eq(hist_percentile(&h, 0.995), 50);
	/* a percentile never exceeds the largest value recorded */
	hist_reset(&h);
	hist_add(&h, 1000001);
	ck_assert_uint_eq(hist_percentile(&h, 0.5), 1000001);
}
END_TEST

START_TEST(test_merge)
{
	static struct hist parts[4], merged, whole;
	hist_reset(&merged);
	hist_reset(&whole);
	for (int k = 0; k < 4; k++)
		hist_reset(&parts[k]);
	uint64_t v = 42;
	for (int i = 0; i < 20000; i++) {
		v = v * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t x = (v >> 33) % (i % 100 == 0 ? 5000000 : 20000);	/* a tail of slow ones */
		hist_add(&parts[i % 4], x);
		hist_add(&whole, x);
	}
	for (int k = 0; k < 4; k++)
		hist_merge(&merged, &parts[k]);
	ck_assert_uint_eq(merged.count, whole.count);
	ck_assert_uint_eq(merged.sum_us, whole.sum_us);
	ck_assert_uint_eq(merged.max_us, whole.max_us);
	ck_assert(memcmp(merged.bucket, whole.bucket, sizeof(whole.bucket)) == 0);
	ck_assert_uint_eq(hist_percentile(&merged, 0.999), hist_percentile(&whole, 0.999));
	/* merging an empty one changes nothing */
	static struct hist empty;
	hist_reset(&empty);
	hist_merge(&merged, &empty);
	ck_assert_uint_eq(merged.count, whole.count);
	ck_assert_uint_eq(hist_percentile(&merged, 0.99), hist_percentile(&whole, 0.99));
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("scale_hist");
	TCase *tc = tcase_create("hist");
	tcase_add_test(tc, test_buckets_tile);
	tcase_add_test(tc, test_value_in_bucket);
	tcase_add_test(tc, test_percentiles);
	tcase_add_test(tc, test_merge);
	suite_add_tcase(s, tc);
	return s;
}
