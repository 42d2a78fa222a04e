/*
 * metrics.h - the instance's numbers as Prometheus samples: collecting
 * them from the live objects, merging the workers' sets, and writing the
 * text exposition format (Prometheus 0.0.4 or OpenMetrics 1.0).
 *
 * Names, types, labels and units follow pgbouncer_exporter, so that a
 * dashboard built for the exporter reads pgvalve unchanged:
 *   pgbouncer_pools_*{database,user}        SHOW POOLS
 *   pgbouncer_stats_*_total{database}       SHOW STATS (times in seconds)
 *   pgbouncer_databases_*{name,host,port,database,force_user,pool_mode}
 *   pgbouncer_<list>                        SHOW LISTS
 *   pgbouncer_config_max_*_connections      SHOW CONFIG
 *   pgbouncer_version_info{version}, pgbouncer_up
 * and pgvalve's own series are named pgvalve_* (latency histograms, failure
 * counters, per-worker series). doc/pgvalve.1 has the full table.
 *
 * With workers = N each worker publishes its samples into its slot of the
 * shared worker table (workers.h) every janitor tick; the worker that
 * serves the endpoint merges them (sums, or the maximum for gauges that
 * are the same everywhere) with its own live samples. A worker that starts
 * again carries its predecessor's counters over, so totals never go back.
 *
 * A metrics_set is a growable array of samples; it owns its strings.
 * Nothing here does I/O; metrics_http.h serves the text.
 */
#ifndef PGVALVE_METRICS_H
#define PGVALVE_METRICS_H

#include "common.h"

#include <event2/buffer.h>

enum metrics_type { METRICS_GAUGE, METRICS_COUNTER, METRICS_HISTOGRAM, METRICS_INFO };

/* How one series from several workers becomes one. */
enum metrics_merge { METRICS_MERGE_SUM, METRICS_MERGE_MAX };

/* Which sample of a family: the value, or a histogram's bucket / sum / count. */
enum metrics_part { METRICS_PART_VALUE, METRICS_PART_BUCKET, METRICS_PART_SUM, METRICS_PART_COUNT };

struct metrics_sample {
	uint16_t family;		/* index into the family table */
	uint8_t part;			/* enum metrics_part */
	char *labels;			/* rendered pairs without braces: database="a",user="b"; "" for none */
	double value;
	uint64_t order;			/* emission order within a family, kept through merging */
};

struct metrics_set {
	struct metrics_sample *v;
	size_t n, cap;
};

/* Latency histogram buckets, upper bounds in seconds (documented in doc/pgvalve.1). */
#define METRICS_LATENCY_BUCKETS 14
extern const double metrics_latency_bounds[METRICS_LATENCY_BUCKETS];

/*
 * One latency histogram: counts per bucket (not cumulative; the +Inf bucket
 * is the last) and the sum in microseconds. Cheap to update: a short
 * search over the bounds and two increments.
 */
struct metrics_histogram {
	uint64_t bucket[METRICS_LATENCY_BUCKETS + 1];
	uint64_t sum_usec;
};

void metrics_histogram_observe(struct metrics_histogram *h, usec_t usec);

/*
 * Events counted for pgvalve_* series that SHOW does not have; the data
 * path calls these (one increment each).
 */
enum metrics_login_failure {
	METRICS_LOGIN_BAD_PASSWORD,	/* wrong password or unknown user */
	METRICS_LOGIN_NO_DATABASE,	/* database does not exist or is disabled */
	METRICS_LOGIN_TOO_MANY,		/* max_client_conn and the per-db/user limits */
	METRICS_LOGIN_TIMEOUT,		/* client_login_timeout */
	METRICS_LOGIN_REJECTED,		/* any other error: hba reject, TLS required, protocol errors */
	METRICS_LOGIN_FAILURE_KINDS,
};
void metrics_count_login_failure(enum metrics_login_failure why);
/* A client closed before it was logged in, with this error: counted under its reason. */
void metrics_count_login_error(const char *sqlstate, const char *message);
/* A client proved who it is with this auth type (enum auth_type, config.h): counted by method. */
#define METRICS_AUTH_METHODS 16
void metrics_count_authentication(int method);
void metrics_count_server_connect_failure(void);
void metrics_count_cancel_forwarded(void);
/* LISTEN/NOTIFY (notify.c): a notification given to a client; a client closed for not reading them. */
void metrics_count_notification_delivered(void);
void metrics_count_notify_client_dropped(void);

/* The counts behind those calls (metrics_record.c), read by the collection. */
struct metrics_events {
	uint64_t login_failures[METRICS_LOGIN_FAILURE_KINDS];
	uint64_t authentications[METRICS_AUTH_METHODS];
	uint64_t server_connect_failures;
	uint64_t cancels_forwarded;
	uint64_t notifications_delivered;
	uint64_t notify_clients_dropped;
};
extern struct metrics_events metrics_events;

void metrics_set_free(struct metrics_set *set);
/* This process's samples now (every family, in table order). */
void metrics_collect_local(struct metrics_set *set);
/*
 * What a scrape shows: this process's samples, with workers = N merged with
 * the other workers' published ones and their carried-over counters, plus
 * the per-worker series. The set is merged and ready to render.
 */
void metrics_collect_instance(struct metrics_set *set);
/* Worker of N > 1, every janitor tick: its samples into its slot, at most every METRICS_PUBLISH_USEC. */
#define METRICS_PUBLISH_USEC USEC_PER_SEC
void metrics_publish(void);
/* Worker of N > 1 at start: the predecessor's published counters join the slot's carry-over. */
void metrics_carry_over(void);
/*
 * A set as lines "<family>\t<part>\t<value>\t<labels>\n" (for the shared
 * table) and back; parse skips lines it does not know (another version).
 * counters_only: keep counters and histograms (a dead worker's carry-over).
 */
void metrics_serialize(const struct metrics_set *set, bool counters_only, struct evbuffer *out);
void metrics_parse(const char *text, size_t len, bool counters_only, struct metrics_set *set);
/* Appends src's samples to dst, after dst's in emission order. */
void metrics_append(struct metrics_set *dst, const struct metrics_set *src);
/* Merges samples of one series (same family, part and labels) into one, by the family's rule. */
void metrics_merge(struct metrics_set *set);
/* Adds a sample (labels are copied; NULL = none). */
void metrics_add(struct metrics_set *set, const char *family, enum metrics_part part, const char *labels,
		 double value);
/*
 * The exposition text: HELP and TYPE lines, then the samples, grouped by
 * family. openmetrics: OpenMetrics 1.0 (counter families named without
 * _total, "# EOF" at the end) instead of the Prometheus 0.0.4 text format.
 */
void metrics_render(struct metrics_set *set, bool openmetrics, struct evbuffer *out);
/* Appends name="value" to a label string, escaping the value as the text format wants. */
void metrics_label(char *buf, size_t size, const char *name, const char *value);

#endif
