/*
 * scale_hist.h - the latency histogram of the scale load generator
 * (test/bench/scale_gen.c): log-linear buckets over microseconds, merged
 * by adding counts, read back as percentiles. Pure: no I/O, no clock.
 *
 * Bucket layout: 32 sub-buckets per power of two (values below 64 us get
 * a bucket each), so a percentile read back is at most about 3% above
 * the value recorded; values of 2^40 us (12 days) and more share the last
 * bucket. A histogram is a plain struct of counters, so a child process
 * writes it to its pipe as it is and the parent adds it to its own.
 */
#ifndef PGVALVE_SCALE_HIST_H
#define PGVALVE_SCALE_HIST_H

#include <stdint.h>

#define HIST_SUB_BITS 5
#define HIST_SUB (1u << HIST_SUB_BITS)
#define HIST_MAX_BITS 40
#define HIST_BUCKETS ((HIST_MAX_BITS - HIST_SUB_BITS + 1) * HIST_SUB + 1)

struct hist {
	uint64_t count;
	uint64_t sum_us;
	uint64_t max_us;
	uint64_t bucket[HIST_BUCKETS];
};

/* The bucket of a value, and the smallest and largest value a bucket holds. */
unsigned hist_index(uint64_t us);
uint64_t hist_bucket_low(unsigned idx);
uint64_t hist_bucket_high(unsigned idx);

void hist_reset(struct hist *h);
void hist_add(struct hist *h, uint64_t us);
/* into += from. */
void hist_merge(struct hist *into, const struct hist *from);
/*
 * The value at or below which a fraction q (0..1) of the recorded values
 * lie: the upper bound of the bucket where that rank falls, never above
 * the largest value recorded. 0 for an empty histogram.
 */
uint64_t hist_percentile(const struct hist *h, double q);

#endif
