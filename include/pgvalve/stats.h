/*
 * stats.h - per-database counters, as SHOW STATS reports them.
 *
 * The data path bumps counters in place (no allocation, no locking: one
 * thread). Every stats_period the janitor takes a snapshot, from which
 * the averages and the log_stats line are computed. Times are microseconds.
 */
#ifndef PGVALVE_STATS_H
#define PGVALVE_STATS_H

#include "pgvalve/common.h"

struct stats {
	uint64_t server_assignment_count;
	uint64_t xact_count;
	uint64_t query_count;
	uint64_t bytes_received;	/* from clients */
	uint64_t bytes_sent;		/* to clients */
	uint64_t xact_time;
	uint64_t query_time;
	uint64_t wait_time;
	uint64_t client_parse_count;
	uint64_t server_parse_count;
	uint64_t bind_count;
	uint64_t client_login_count;
};

/* Per-second rates and per-event averages over the last stats_period. */
struct stats_averages {
	uint64_t server_assignment_count;
	uint64_t xact_count;
	uint64_t query_count;
	uint64_t bytes_received;
	uint64_t bytes_sent;
	uint64_t xact_time;		/* per transaction */
	uint64_t query_time;		/* per query */
	uint64_t wait_time;		/* per assignment */
	uint64_t client_parse_count;
	uint64_t server_parse_count;
	uint64_t bind_count;
	uint64_t client_login_count;
};

struct stats_period {
	struct stats total;		/* running totals */
	struct stats previous;		/* totals at the last snapshot */
	struct stats_averages avg;	/* computed at the last snapshot */
};

/* Computes averages from (total - previous) over period_usec and rolls the snapshot. */
void stats_roll(struct stats_period *sp, usec_t period_usec);
/* Adds b into a (for SHOW TOTALS). */
void stats_add(struct stats *a, const struct stats *b);

#endif
