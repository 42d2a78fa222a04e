/*
 * scale_hist.c - the scale load generator's latency histogram: bucket
 * arithmetic, merge and percentiles (see scale_hist.h). Owns nothing but
 * the struct it is given.
 */
#include "scale_hist.h"

#include <string.h>

unsigned hist_index(uint64_t us)
{
	if (us >= (uint64_t)1 << HIST_MAX_BITS)
		return HIST_BUCKETS - 1;
	if (us < 2 * HIST_SUB)
		return (unsigned)us;
	unsigned msb = 63u - (unsigned)__builtin_clzll(us);
	unsigned shift = msb - HIST_SUB_BITS;
	/* value's top HIST_SUB_BITS + 1 bits, in the row of its power of two */
	return shift * HIST_SUB + (unsigned)(us >> shift);
}

uint64_t hist_bucket_low(unsigned idx)
{
	if (idx < 2 * HIST_SUB)
		return idx;
	unsigned shift = idx / HIST_SUB - 1;
	return (uint64_t)(idx % HIST_SUB + HIST_SUB) << shift;
}

uint64_t hist_bucket_high(unsigned idx)
{
	if (idx >= HIST_BUCKETS - 1)
		return UINT64_MAX;
	return hist_bucket_low(idx + 1) - 1;
}

void hist_reset(struct hist *h)
{
	memset(h, 0, sizeof(*h));
}

void hist_add(struct hist *h, uint64_t us)
{
	h->bucket[hist_index(us)]++;
	h->count++;
	h->sum_us += us;
	if (us > h->max_us)
		h->max_us = us;
}

void hist_merge(struct hist *into, const struct hist *from)
{
	for (unsigned i = 0; i < HIST_BUCKETS; i++)
		into->bucket[i] += from->bucket[i];
	into->count += from->count;
	into->sum_us += from->sum_us;
	if (from->max_us > into->max_us)
		into->max_us = from->max_us;
}

uint64_t hist_percentile(const struct hist *h, double q)
{
	if (h->count == 0)
		return 0;
	if (q < 0)
		q = 0;
	if (q > 1)
		q = 1;
	/* the rank of the value asked for, 1-based: ceil(q * count), at least 1 */
	double r = q * (double)h->count;
	uint64_t rank = (uint64_t)r;
	if ((double)rank < r)
		rank++;
	if (rank == 0)
		rank = 1;
	uint64_t seen = 0;
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		seen += h->bucket[i];
		if (seen >= rank) {
			uint64_t high = hist_bucket_high(i);
			return high < h->max_us ? high : h->max_us;
		}
	}
	return h->max_us;
}
