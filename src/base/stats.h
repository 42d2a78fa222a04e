/*
 * stats.h - per-database counters, as SHOW STATS reports them.
 *
 * The data path bumps counters in place (no allocation, no locking: one
 * thread). Every stats_period the janitor takes a snapshot, from which
 * the averages and the log_stats line are computed. Times are microseconds.
 */
#ifndef PGVALVE_STATS_H
#define PGVALVE_STATS_H

#include "common.h"

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

/*
 * Snapshots taken every stats_period. SHOW computes averages over the
 * window from the older snapshot to now (between one and two periods, as
 * PgBouncer does); the log_stats line covers exactly the last period.
 */
struct stats_period {
	struct stats total;		/* running totals */
	struct stats newer;		/* totals at the last snapshot */
	struct stats older;		/* totals at the one before */
	usec_t newer_stamp;
	usec_t older_stamp;
};

void stats_init(struct stats_period *sp, usec_t now);
/* Takes a snapshot (every stats_period). */
void stats_roll(struct stats_period *sp, usec_t now);
/* Averages over [older_stamp, now] from the live totals. */
void stats_live_averages(const struct stats_period *sp, usec_t now, struct stats_averages *out);
/* Averages over the last period exactly (for the log line). */
void stats_period_averages(const struct stats_period *sp, struct stats_averages *out);
/* Adds b into a (for SHOW TOTALS). */
void stats_add(struct stats *a, const struct stats *b);

#endif
