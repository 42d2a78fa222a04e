/*
 * notify_bench.c - LISTEN/NOTIFY fan-out load for test/bench/notify.sh
 * (`make bench-notify`): N clients listen on C channels (client i on
 * channel i % C), one producer sends R notifications a second, each
 * payload the CLOCK_MONOTONIC time it was sent (and its number in the
 * statement: PostgreSQL folds equal notifications of one transaction
 * into one); every delivery's latency
 * (receipt minus that time) goes into a histogram.
 *
 *   notify_bench CONNINFO [--clients N] [--channels C] [--rate R]
 *                [--duration S] [--cpu-pid PID]
 *
 * The producer sends one statement every 10 ms carrying R/100
 * notifications spread over the channels (SELECT pg_notify(...) FROM
 * generate_series), pipelined (libpq's pipeline mode, a Sync after
 * each): it never waits for the answer before the
 * next tick unless 100 are outstanding, so what it achieves is what the
 * server and the machine let it. Prints, on one line each: sent,
 * delivered and expected counts, the achieved rates, latency p50/p99/max
 * (ms), and with --cpu-pid the CPU that process used during the sending
 * (user + system) per delivered notification. Single-threaded: one poll
 * loop over every socket.
 */
#include <libpq-fe.h>

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BUCKET_US 10			/* histogram resolution */
#define BUCKETS (10 * 1000 * 1000 / BUCKET_US)	/* up to 10 s */
#define MAX_OUTSTANDING 100

static uint64_t hist[BUCKETS + 1];
static uint64_t delivered, latency_max_us;

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The CPU ticks (user + system, 1/100 s) of pid, or -1. */
static long cpu_ticks(int pid)
{
	char path[64], buf[2048];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	if (!p)
		return -1;
	long utime = 0, stime = 0;
	/* after ") ": state(3) ... utime is field 14, stime 15 */
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", &utime, &stime) != 2)
		return -1;
	return utime + stime;
}

static void record(const char *payload)
{
	int64_t sent = strtoll(payload, NULL, 10);
	int64_t lat = now_us() - sent;
	if (lat < 0)
		lat = 0;
	uint64_t b = (uint64_t)lat / BUCKET_US;
	hist[b > BUCKETS ? BUCKETS : b]++;
	if ((uint64_t)lat > latency_max_us)
		latency_max_us = (uint64_t)lat;
	delivered++;
}

static double percentile_ms(double q)
{
	uint64_t want = (uint64_t)(q * (double)delivered), seen = 0;
	for (size_t i = 0; i <= BUCKETS; i++) {
		seen += hist[i];
		if (seen > want)
			return (double)(i * BUCKET_US) / 1000.0;
	}
	return (double)latency_max_us / 1000.0;
}

static PGconn *connect_or_die(const char *conninfo)
{
	PGconn *c = PQconnectdb(conninfo);
	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "notify_bench: connect: %s", PQerrorMessage(c));
		exit(1);
	}
	return c;
}

static void drain_notifies(PGconn *c)
{
	PGnotify *n;
	while ((n = PQnotifies(c))) {
		record(n->extra);
		PQfreemem(n);
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: notify_bench CONNINFO [--clients N] [--channels C] [--rate R] [--duration S] "
			"[--cpu-pid PID]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int clients = 1000, channels = 10, rate = 10000, duration = 10, cpu_pid = 0;
	if (argc < 2)
		usage();
	const char *conninfo = argv[1];
	for (int i = 2; i + 1 < argc; i += 2) {
		int v = atoi(argv[i + 1]);
		if (strcmp(argv[i], "--clients") == 0)
			clients = v;
		else if (strcmp(argv[i], "--channels") == 0)
			channels = v;
		else if (strcmp(argv[i], "--rate") == 0)
			rate = v;
		else if (strcmp(argv[i], "--duration") == 0)
			duration = v;
		else if (strcmp(argv[i], "--cpu-pid") == 0)
			cpu_pid = v;
		else
			usage();
	}
	if (clients < 1 || channels < 1 || rate < 100 || duration < 1)
		usage();

	PGconn **l = calloc((size_t)clients, sizeof(*l));
	struct pollfd *pfd = calloc((size_t)clients + 1, sizeof(*pfd));
	if (!l || !pfd)
		return 1;
	for (int i = 0; i < clients; i++) {
		l[i] = connect_or_die(conninfo);
		char sql[64];
		snprintf(sql, sizeof(sql), "LISTEN ch%d", i % channels);
		PGresult *r = PQexec(l[i], sql);
		if (PQresultStatus(r) != PGRES_COMMAND_OK) {
			fprintf(stderr, "notify_bench: %s: %s", sql, PQerrorMessage(l[i]));
			return 1;
		}
		PQclear(r);
		PQsetnonblocking(l[i], 1);
		pfd[i].fd = PQsocket(l[i]);
		pfd[i].events = POLLIN;
	}
	PGconn *prod = connect_or_die(conninfo);
	PQsetnonblocking(prod, 1);
	if (!PQenterPipelineMode(prod)) {	/* statements sent without waiting for the last one's answer */
		fprintf(stderr, "notify_bench: pipeline mode: %s", PQerrorMessage(prod));
		return 1;
	}
	pfd[clients].fd = PQsocket(prod);
	pfd[clients].events = POLLIN;
	fprintf(stderr, "notify_bench: %d clients listening on %d channels\n", clients, channels);

	int per_tick = rate / 100;
	uint64_t sent = 0, expected = 0;
	int outstanding = 0;
	long cpu0 = cpu_pid ? cpu_ticks(cpu_pid) : -1;
	int64_t start = now_us(), end = start + (int64_t)duration * 1000000, next_tick = start, send_end = 0;
	char sql[256];
	/* after the sending, up to 5 s more for what is still on its way */
	while (now_us() < end + 5000000 && (now_us() < end || delivered < expected)) {
		int64_t t = now_us();
		if (t < end && t >= next_tick && outstanding < MAX_OUTSTANDING) {
			int first = (int)(sent % (uint64_t)channels);
			snprintf(sql, sizeof(sql),
				 "SELECT count(*) FROM (SELECT pg_notify('ch' || ((g + %d) %% %d), '%" PRId64 " ' || g) "
				 "FROM generate_series(1, %d) g) n",
				 first, channels, t, per_tick);
			if (!PQsendQueryParams(prod, sql, 0, NULL, NULL, NULL, NULL, 0) || !PQpipelineSync(prod)) {
				fprintf(stderr, "notify_bench: send: %s", PQerrorMessage(prod));
				return 1;
			}
			outstanding++;
			sent += (uint64_t)per_tick;
			/* channel k gets clients/channels listeners, plus one for the remainder's first ones */
			for (int k = 0; k < per_tick; k++) {
				int ch = (first + k + 1) % channels;
				expected += (uint64_t)(clients / channels + (ch < clients % channels));
			}
			next_tick += 10000;
			if (next_tick < t - 100000)
				next_tick = t;	/* behind by more than 100 ms: the rate is out of reach */
		}
		if (t >= end && !send_end)
			send_end = t;
		pfd[clients].events = POLLIN | (PQflush(prod) > 0 ? POLLOUT : 0);
		int wait_ms = t < end ? (int)((next_tick - t) / 1000) : 50;
		if (poll(pfd, (nfds_t)clients + 1, wait_ms < 0 ? 0 : wait_ms) < 0 && errno != EINTR)
			return 1;
		for (int i = 0; i < clients; i++) {
			if (!pfd[i].revents)
				continue;
			if (!PQconsumeInput(l[i])) {
				fprintf(stderr, "notify_bench: listener %d: %s", i, PQerrorMessage(l[i]));
				return 1;
			}
			drain_notifies(l[i]);
		}
		if (pfd[clients].revents) {
			PQconsumeInput(prod);
			while (outstanding > 0 && !PQisBusy(prod)) {
				PGresult *r = PQgetResult(prod);
				if (!r)
					continue;	/* the end of one statement's results */
				if (PQresultStatus(r) == PGRES_FATAL_ERROR) {
					fprintf(stderr, "notify_bench: producer: %s", PQerrorMessage(prod));
					return 1;
				}
				if (PQresultStatus(r) == PGRES_PIPELINE_SYNC)
					outstanding--;
				PQclear(r);
			}
		}
	}
	long cpu1 = cpu_pid ? cpu_ticks(cpu_pid) : -1;
	double secs = (double)duration;
	printf("sent %" PRIu64 " notifications (%.0f/s asked %d/s), delivered %" PRIu64 " of %" PRIu64
	       " expected (%.0f deliveries/s)\n",
	       sent, (double)sent / secs, rate, delivered, expected, (double)delivered / secs);
	printf("latency send->receipt: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", percentile_ms(0.50),
	       percentile_ms(0.99), (double)latency_max_us / 1000.0);
	if (cpu0 >= 0 && cpu1 >= 0 && delivered > 0)
		printf("cpu of pid %d: %.2f s, %.2f us per delivered notification\n", cpu_pid,
		       (double)(cpu1 - cpu0) / 100.0, (double)(cpu1 - cpu0) * 10000.0 / (double)delivered);
	for (int i = 0; i < clients; i++)
		PQfinish(l[i]);
	PQfinish(prod);
	return delivered == expected ? 0 : 3;
}
