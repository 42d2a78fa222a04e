/*
 * stats.c - arithmetic on the counters of struct stats: period snapshots
 * and averages. The counting itself happens where the events are
 * (client.c, server.c, pool.c); this file owns no state.
 */
#include "pgvalve/common.h"
#include "pgvalve/stats.h"

void stats_roll(struct stats_period *sp, usec_t period_usec)
{
	const struct stats *t = &sp->total, *p = &sp->previous;
	struct stats_averages *a = &sp->avg;
	uint64_t secs = period_usec > 0 ? (uint64_t)(period_usec / USEC_PER_SEC) : 1;
	if (secs == 0)
		secs = 1;
	uint64_t xacts = t->xact_count - p->xact_count;
	uint64_t queries = t->query_count - p->query_count;
	uint64_t assigns = t->server_assignment_count - p->server_assignment_count;

	a->server_assignment_count = assigns / secs;
	a->xact_count = xacts / secs;
	a->query_count = queries / secs;
	a->bytes_received = (t->bytes_received - p->bytes_received) / secs;
	a->bytes_sent = (t->bytes_sent - p->bytes_sent) / secs;
	a->xact_time = xacts ? (t->xact_time - p->xact_time) / xacts : 0;
	a->query_time = queries ? (t->query_time - p->query_time) / queries : 0;
	a->wait_time = assigns ? (t->wait_time - p->wait_time) / assigns : 0;
	a->client_parse_count = (t->client_parse_count - p->client_parse_count) / secs;
	a->server_parse_count = (t->server_parse_count - p->server_parse_count) / secs;
	a->bind_count = (t->bind_count - p->bind_count) / secs;
	a->client_login_count = (t->client_login_count - p->client_login_count) / secs;
	sp->previous = sp->total;
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
