/*
 * metrics_record.c - what the data path records for the metrics endpoint:
 * latency histograms and event counters, one increment each.
 *
 * Kept apart from metrics.c (collection, merging, rendering), which reads
 * the pools and the console's tables: the core calls these, and they call
 * nothing.
 */
#include "common.h"
#include "metrics.h"

/* The same bounds in microseconds, for the hot path. */
static const usec_t latency_bounds_usec[METRICS_LATENCY_BUCKETS] = {
	100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 5000000,
};

struct metrics_events metrics_events;

void metrics_histogram_observe(struct metrics_histogram *h, usec_t usec)
{
	if (usec < 0)
		usec = 0;
	size_t i = 0;
	while (i < METRICS_LATENCY_BUCKETS && usec > latency_bounds_usec[i])
		i++;
	h->bucket[i]++;
	h->sum_usec += (uint64_t)usec;
}

void metrics_count_login_failure(enum metrics_login_failure why)
{
	if (why < METRICS_LOGIN_FAILURE_KINDS)
		metrics_events.login_failures[why]++;
}

void metrics_count_login_error(const char *sqlstate, const char *message)
{
	enum metrics_login_failure why = METRICS_LOGIN_REJECTED;
	/* PgBouncer's texts (08P01) and PostgreSQL's code both mean a wrong password or unknown name. */
	if (strcmp(sqlstate, "28P01") == 0 || strstr(message, "password authentication failed") ||
	    strstr(message, "SASL authentication failed") || strstr(message, "\"trust\" authentication failed") ||
	    strstr(message, "LDAP authentication failed"))
		why = METRICS_LOGIN_BAD_PASSWORD;
	else if (strcmp(sqlstate, "3D000") == 0 || strstr(message, "no such database") ||
		 strstr(message, "is disabled"))
		why = METRICS_LOGIN_NO_DATABASE;
	else if (strcmp(sqlstate, "53300") == 0 || strstr(message, "no more connections"))
		why = METRICS_LOGIN_TOO_MANY;
	else if (strstr(message, "client_login_timeout"))
		why = METRICS_LOGIN_TIMEOUT;
	metrics_count_login_failure(why);
}

void metrics_count_authentication(int method)
{
	if (method >= 0 && method < METRICS_AUTH_METHODS)
		metrics_events.authentications[method]++;
}

void metrics_count_server_connect_failure(void)
{
	metrics_events.server_connect_failures++;
}

void metrics_count_cancel_forwarded(void)
{
	metrics_events.cancels_forwarded++;
}

void metrics_count_notification_delivered(void)
{
	metrics_events.notifications_delivered++;
}

void metrics_count_notify_client_dropped(void)
{
	metrics_events.notify_clients_dropped++;
}

