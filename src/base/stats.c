/*
 * stats.c - arithmetic on the counters of struct stats: period snapshots
 * and averages. The counting itself happens where the events are
 * (client.c, server.c, pool.c); this file owns no state.
 */
#include "common.h"
#include "stats.h"

void stats_init(struct stats_period *sp, usec_t now)
{
	memset(sp, 0, sizeof(*sp));
	sp->newer_stamp = now;
	sp->older_stamp = now - USEC_PER_SEC;
}

void stats_roll(struct stats_period *sp, usec_t now)
{
	sp->older = sp->newer;
	sp->older_stamp = sp->newer_stamp;
	sp->newer = sp->total;
	sp->newer_stamp = now;
}

/* Rates are per second; times are per event. */
static void averages(const struct stats *to, const struct stats *from, usec_t dur, struct stats_averages *a)
{
	memset(a, 0, sizeof(*a));
	if (dur <= 0)
		return;
	uint64_t d = (uint64_t)dur;
	uint64_t xacts = to->xact_count - from->xact_count;
	uint64_t queries = to->query_count - from->query_count;
	uint64_t assigns = to->server_assignment_count - from->server_assignment_count;
#define RATE(f) ((to->f - from->f) * (uint64_t)USEC_PER_SEC / d)
	a->server_assignment_count = RATE(server_assignment_count);
	a->xact_count = RATE(xact_count);
	a->query_count = RATE(query_count);
	a->bytes_received = RATE(bytes_received);
	a->bytes_sent = RATE(bytes_sent);
	a->client_parse_count = RATE(client_parse_count);
	a->server_parse_count = RATE(server_parse_count);
	a->bind_count = RATE(bind_count);
	a->client_login_count = RATE(client_login_count);
#undef RATE
	a->xact_time = xacts ? (to->xact_time - from->xact_time) / xacts : 0;
	a->query_time = queries ? (to->query_time - from->query_time) / queries : 0;
	a->wait_time = assigns ? (to->wait_time - from->wait_time) / assigns : 0;
}

void stats_live_averages(const struct stats_period *sp, usec_t now, struct stats_averages *out)
{
	averages(&sp->total, &sp->older, now - sp->older_stamp, out);
}

void stats_period_averages(const struct stats_period *sp, struct stats_averages *out)
{
	averages(&sp->newer, &sp->older, sp->newer_stamp - sp->older_stamp, out);
}

void stats_add(struct stats *a, const struct stats *b)
{
	a->server_assignment_count += b->server_assignment_count;
	a->xact_count += b->xact_count;
	a->query_count += b->query_count;
	a->bytes_received += b->bytes_received;
	a->bytes_sent += b->bytes_sent;
	a->xact_time += b->xact_time;
	a->query_time += b->query_time;
	a->wait_time += b->wait_time;
	a->client_parse_count += b->client_parse_count;
	a->server_parse_count += b->server_parse_count;
	a->bind_count += b->bind_count;
	a->client_login_count += b->client_login_count;
}
