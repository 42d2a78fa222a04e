/*
 * scale_gen.c - a client load generator for pgvalve's scale benchmark
 * (test/bench/scale.sh, `make bench-scale`): many clients held logged in,
 * a fraction of them running transactions at a fixed total rate, and an
 * optional login storm, against one pooler. This file is the parent: the
 * command line, the child processes (scale_child.c, one epoll loop each,
 * --per-proc clients at most, under a process's descriptor limit), the
 * phases, and the reports.
 *
 *   scale_gen --port P [--host 127.0.0.x] [--user U] [--password PW] [--dbname D]
 *             [--clients N] [--active N] [--rate TPS] [--duration S] [--storm N]
 *             [--tls] [--storm-tls] [--query SQL] [--per-proc N] [--login-window N] [--login-rate N]
 *             [--login-timeout S] [--pooler-pid PID,...] [--pooler-pgrep PATTERN]
 *             [--name NAME]
 *
 * Phases, each reported when it ends:
 *   login-active  the --active clients log in (--login-window at a time per process);
 *   base          they run --rate transactions a second in total for --duration s,
 *                 open loop (a transaction's latency counts from when it was due,
 *                 so queueing shows), with only them connected;
 *   login         the other clients log in while the active ones go on
 *                 (--login-rate a second at most, all processes together);
 *   settle        2 s, not measured: the transactions that fell due during
 *                 the logins and were not started are dropped (counted), so
 *                 that the hold phase measures the steady state, not the
 *                 login phase's backlog (reported with the login phase);
 *   hold          --duration s with every client connected;
 *   storm         --storm new clients connect at once (TLS with --tls or
 *                 --storm-tls, the login the pooler asks for), from processes of
 *                 their own, while the active clients go on; it ends when the
 *                 last one is in or has failed.
 * Each: logins and failures by cause, login time p50/p99/max, the pooler's
 * processes' RSS and CPU (--pooler-pid: those and their descendants;
 * --pooler-pgrep: command lines containing the pattern), the kernel's
 * socket figures (/proc/net/sockstat), the generator's own CPU (on 2 cores
 * it competes with the pooler), transaction latency p50/p99/p99.9 and the
 * longest any active client waited. The last line is the summary:
 *
 *   bench-scale: pooler=NAME clients=N logged_in=N failed=N bytes_per_client=B
 *     base_p99_ms=X p99_ms=X longest_wait_ms=X storm_clients=N storm_failed=N
 *     before_storm_p99_ms=X storm_p99_ms=X storm_seconds=X
 *
 * (one line; "-" for what the run did not measure; p99_ms is the hold
 * phase's, before_storm_p99_ms too when there is a storm, longest_wait_ms
 * the longest over the whole run). Exits 1 when a login failed or a held
 * client was lost, 2 on bad usage.
 *
 * Every socket is bound to a source address 127.0.0.2 ... 127.0.0.254 in
 * turn (the port chosen at connect, per destination), and the pooler must
 * be on 127.0.0.0/8: the generator never leaves loopback.
 */
#include "scale_gen.h"
#include "scale_sys.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FD_HEADROOM 64	/* a child's descriptors besides its clients: pipes, epoll, stdio */

static struct scale_opts opt = {
	.user = "bench", .password = "bench", .dbname = "bench", .query = "SELECT 1", .name = "pooler",
	.clients = 1000, .duration = 10, .per_proc = 15000, .login_window = 200, .login_timeout = 60,
};

struct child {
	pid_t pid;
	int cmd, rep;
	struct scale_share share;
};

static struct child *children;
static int nchildren;

/* What the summary line needs, gathered over the phases. */
static struct {
	uint64_t logged_in, failed, lost;
	uint64_t longest_wait_us;
	double bytes_per_client, base_p99, hold_p99, storm_p99, storm_seconds;
	uint64_t storm_failed;
	bool have_bytes, have_base, have_hold, have_storm_p99, storm_done;
} sum;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
	struct timespec ts = { .tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9) };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: scale_gen --port P [--host 127.0.0.x] [--user U] [--password PW] [--dbname D]\n"
		"                 [--clients N] [--active N] [--rate TPS] [--duration S] [--storm N]\n"
		"                 [--tls] [--storm-tls] [--query SQL] [--per-proc N] [--login-window N] [--login-rate N]\n"
		"                 [--login-timeout S] [--pooler-pid PID,...] [--pooler-pgrep PATTERN] [--name NAME]\n");
	exit(2);
}

static void parse_args(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "host", 1, NULL, 'h' }, { "port", 1, NULL, 'p' }, { "user", 1, NULL, 'U' },
		{ "password", 1, NULL, 'W' }, { "dbname", 1, NULL, 'd' }, { "query", 1, NULL, 'q' },
		{ "name", 1, NULL, 'n' }, { "clients", 1, NULL, 'c' }, { "active", 1, NULL, 'a' },
		{ "rate", 1, NULL, 'r' }, { "duration", 1, NULL, 'T' }, { "storm", 1, NULL, 's' },
		{ "per-proc", 1, NULL, 'P' }, { "login-window", 1, NULL, 'w' }, { "login-timeout", 1, NULL, 't' },
		{ "tls", 0, NULL, 'L' }, { "storm-tls", 0, NULL, 'S' }, { "pooler-pid", 1, NULL, 'i' },
		{ "pooler-pgrep", 1, NULL, 'g' }, { "login-rate", 1, NULL, 'R' }, { NULL, 0, NULL, 0 },
	};
	const char *host = "127.0.0.1";
	int port = 0, c;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'h': host = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 'U': opt.user = optarg; break;
		case 'W': opt.password = optarg; break;
		case 'd': opt.dbname = optarg; break;
		case 'q': opt.query = optarg; break;
		case 'n': opt.name = optarg; break;
		case 'c': opt.clients = atol(optarg); break;
		case 'a': opt.active = atol(optarg); break;
		case 'r': opt.rate = atof(optarg); break;
		case 'R': opt.login_rate = atof(optarg); break;
		case 'T': opt.duration = atof(optarg); break;
		case 's': opt.storm = atol(optarg); break;
		case 'P': opt.per_proc = atol(optarg); break;
		case 'w': opt.login_window = atol(optarg); break;
		case 't': opt.login_timeout = atof(optarg); break;
		case 'L': opt.tls = true; break;
		case 'S': opt.storm_tls = true; break;
		case 'i': opt.pooler_pids = optarg; break;
		case 'g': opt.pooler_pgrep = optarg; break;
		default: usage();
		}
	}
	if (optind != argc || port <= 0 || port > 65535 || opt.clients < 0 || opt.active < 0
	    || opt.active > opt.clients || opt.storm < 0 || opt.clients + opt.storm < 1 || opt.rate < 0
	    || opt.duration <= 0 || opt.per_proc < 1 || opt.login_window < 1 || opt.login_timeout <= 0
	    || strlen(opt.query) > 4000)
		usage();
	opt.addr.sin_family = AF_INET;
	opt.addr.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &opt.addr.sin_addr) != 1 || (ntohl(opt.addr.sin_addr.s_addr) >> 24) != 127) {
		fprintf(stderr, "scale_gen: --host %s: only 127.0.0.0/8 (the generator stays on loopback)\n", host);
		exit(2);
	}
}

/* Item k of n when total is spread evenly. */
static long share_of(long total, int k, int n)
{
	return total / n + (k < total % n ? 1 : 0);
}

static void kill_children(void)
{
	for (int i = 0; i < nchildren; i++)
		if (children[i].pid > 0)
			kill(children[i].pid, SIGKILL);
}

static void on_signal(int sig)
{
	kill_children();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void start_children(void)
{
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	/* the storm's clients get processes of their own: their handshakes do not delay the active clients' loop */
	int nheld = (int)((opt.clients + opt.per_proc - 1) / opt.per_proc);
	int nstorm = (int)((opt.storm + opt.per_proc - 1) / opt.per_proc);
	nchildren = nheld + nstorm;
	children = xcalloc((size_t)nchildren, sizeof(*children));
	for (int k = 0; k < nchildren; k++) {
		struct scale_share *s = &children[k].share;
		if (k < nheld) {
			s->held = share_of(opt.clients, k, nheld);
			s->active = share_of(opt.active, k, nheld);
			s->rate = opt.active ? opt.rate * (double)s->active / (double)opt.active : 0;
			s->login_rate = opt.login_rate / nheld;
		} else
			s->storm = share_of(opt.storm, k - nheld, nstorm);
		if ((rlim_t)(s->held + s->storm + FD_HEADROOM) > rl.rlim_cur) {
			fprintf(stderr, "scale_gen: %ld clients per process do not fit in %llu descriptors; lower --per-proc\n",
				s->held + s->storm, (unsigned long long)rl.rlim_cur);
			exit(2);
		}
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	fflush(NULL);
	for (int k = 0; k < nchildren; k++) {
		int cmd[2], rep[2];
		if (pipe2(cmd, O_CLOEXEC) < 0 || pipe2(rep, O_CLOEXEC) < 0) {
			perror("scale_gen: pipe");
			kill_children();
			exit(2);
		}
		pid_t pid = fork();
		if (pid < 0) {
			perror("scale_gen: fork");
			kill_children();
			exit(2);
		}
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);	/* never outlive the parent */
			signal(SIGINT, SIG_DFL);
			signal(SIGTERM, SIG_DFL);
			for (int j = 0; j < k; j++) {
				close(children[j].cmd);
				close(children[j].rep);
			}
			close(cmd[1]);
			close(rep[0]);
			scale_child_run(&opt, &children[k].share, k, cmd[0], rep[1]);
		}
		close(cmd[0]);
		close(rep[1]);
		children[k].pid = pid;
		children[k].cmd = cmd[1];
		children[k].rep = rep[0];
	}
}

static void command(char op, const long *per_child)
{
	for (int k = 0; k < nchildren; k++) {
		struct scale_cmd c = { .op = op, .n = per_child ? per_child[k] : 0 };
		if (write(children[k].cmd, &c, sizeof(c)) != (ssize_t)sizeof(c)) {
			fprintf(stderr, "scale_gen: child %d is gone\n", k);
			kill_children();
			exit(1);
		}
	}
}

/* One report of the kind from every child, added up. */
static void collect(int kind, struct scale_report *sum_rep)
{
	static struct scale_report r;
	memset(sum_rep, 0, sizeof(*sum_rep));
	for (int k = 0; k < nchildren; k++) {
		size_t got = 0;
		while (got < sizeof(r)) {
			ssize_t n = read(children[k].rep, (char *)&r + got, sizeof(r) - got);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				fprintf(stderr, "scale_gen: child %d (pid %d) died\n", k, (int)children[k].pid);
				kill_children();
				exit(1);
			}
			got += (size_t)n;
		}
		if (r.kind != kind) {
			fprintf(stderr, "scale_gen: child %d answered out of turn\n", k);
			kill_children();
			exit(1);
		}
		sum_rep->logged_in += r.logged_in;
		sum_rep->failed += r.failed;
		scale_causes_merge(&sum_rep->causes, &r.causes);
		hist_merge(&sum_rep->login, &r.login);
		sum_rep->txns += r.txns;
		sum_rep->txn_errors += r.txn_errors;
		sum_rep->dropped += r.dropped;
		sum_rep->lost += r.lost;
		sum_rep->active_now += r.active_now;
		if (r.longest_wait_us > sum_rep->longest_wait_us)
			sum_rep->longest_wait_us = r.longest_wait_us;
		scale_causes_merge(&sum_rep->lost_causes, &r.lost_causes);
		hist_merge(&sum_rep->txn, &r.txn);
	}
}

static double ms(uint64_t us)
{
	return (double)us / 1000.0;
}

struct phase {
	const char *name;
	double t0;
	struct pooler_sample p0;
	double gen_cpu0;
};

/* The generator's own CPU so far: the parent and every child. */
static double generator_cpu(void)
{
	double t = scale_sys_proc_cpu(getpid());
	for (int k = 0; k < nchildren; k++)
		if (children[k].pid > 0)
			t += scale_sys_proc_cpu(children[k].pid);
	return t;
}

static void phase_begin(struct phase *ph, const char *name)
{
	ph->name = name;
	ph->t0 = now_s();
	scale_sys_pooler(opt.pooler_pids, opt.pooler_pgrep, &ph->p0);
	ph->gen_cpu0 = generator_cpu();
}

/* The pooler's and the kernel's figures at the end of a phase; returns the pooler's RSS. */
static uint64_t phase_machine(const struct phase *ph, double secs)
{
	struct pooler_sample p1;
	struct sock_sample ss;
	scale_sys_pooler(opt.pooler_pids, opt.pooler_pgrep, &p1);
	if (p1.procs)
		printf("  pooler: %d processes, rss %.1f MB (%+.1f MB in the phase), cpu %.2f s (%.0f%% of a core)\n",
		       p1.procs, (double)p1.rss_bytes / 1048576.0,
		       ((double)p1.rss_bytes - (double)ph->p0.rss_bytes) / 1048576.0, p1.cpu_s - ph->p0.cpu_s,
		       secs > 0 ? (p1.cpu_s - ph->p0.cpu_s) * 100 / secs : 0);
	else
		printf("  pooler: not measured%s\n", opt.pooler_pids || opt.pooler_pgrep ? " (no process found)" : "");
	double gen = generator_cpu();
	printf("  generator: cpu %.2f s (%.0f%% of a core; the machine's cores are shared with the pooler)\n",
	       gen - ph->gen_cpu0, secs > 0 ? (gen - ph->gen_cpu0) * 100 / secs : 0);
	if (scale_sys_sockets(&ss))
		printf("  kernel: sockets used %ld, tcp inuse %ld alloc %ld orphan %ld tw %ld, tcp mem %.1f MB\n",
		       ss.sockets_used, ss.tcp_inuse, ss.tcp_alloc, ss.tcp_orphan, ss.tcp_tw,
		       (double)ss.tcp_mem_bytes / 1048576.0);
	return p1.procs ? p1.rss_bytes : 0;
}

static void print_logins(const struct scale_report *r)
{
	char causes[512];
	scale_causes_format(&r->causes, causes, sizeof(causes));
	printf("  logins: logged_in=%llu failed=%llu (%s)", (unsigned long long)r->logged_in,
	       (unsigned long long)r->failed, causes);
	if (r->login.count)
		printf(" login_ms p50=%.2f p99=%.2f max=%.2f", ms(hist_percentile(&r->login, 0.5)),
		       ms(hist_percentile(&r->login, 0.99)), ms(r->login.max_us));
	printf("\n");
}

/* Prints the transactions of a snapshot; returns their p99 in ms, or -1 when there were none. */
static double print_txns(const struct scale_report *r, double secs)
{
	char causes[512];
	double p99 = -1;
	printf("  transactions: %llu (%.0f/s) errors=%llu dropped=%llu active_now=%llu", (unsigned long long)r->txns,
	       secs > 0 ? (double)r->txns / secs : 0, (unsigned long long)r->txn_errors,
	       (unsigned long long)r->dropped, (unsigned long long)r->active_now);
	if (r->txn.count) {
		p99 = ms(hist_percentile(&r->txn, 0.99));
		printf(" latency_ms p50=%.2f p99=%.2f p99.9=%.2f max=%.2f", ms(hist_percentile(&r->txn, 0.5)), p99,
		       ms(hist_percentile(&r->txn, 0.999)), ms(r->txn.max_us));
	}
	printf(" longest_wait_ms=%.2f\n", ms(r->longest_wait_us));
	if (r->lost) {
		scale_causes_format(&r->lost_causes, causes, sizeof(causes));
		printf("  lost: %llu logged-in clients closed (%s)\n", (unsigned long long)r->lost, causes);
	}
	sum.lost += r->lost;
	if (r->longest_wait_us > sum.longest_wait_us)
		sum.longest_wait_us = r->longest_wait_us;
	return p99;
}

/* A login phase: n[k] clients per child (op LOGIN or STORM), until every one is in or has failed. */
static void login_phase(const char *name, char op, const long *n, long total, struct scale_report *out,
			double *secs)
{
	struct phase ph;
	phase_begin(&ph, name);
	command(op, n);
	collect(REPORT_LOGINS, out);
	*secs = now_s() - ph.t0;
	printf("phase %s: %ld clients in %.2f s\n", name, total, *secs);
	print_logins(out);
}

static void snapshot_phase(const struct phase *ph, double *p99)
{
	struct scale_report r;
	double secs = now_s() - ph->t0;
	command(CMD_SNAPSHOT, NULL);
	collect(REPORT_TXNS, &r);
	if (opt.rate > 0 && opt.active > 0)
		*p99 = print_txns(&r, secs);
	else
		print_txns(&r, secs);
}

static void fmt_ms(char *buf, size_t size, bool have, double v)
{
	if (have && v >= 0)
		snprintf(buf, size, "%.2f", v);
	else
		snprintf(buf, size, "-");
}

static void print_summary(void)
{
	char bpc[32], base[32], p99[32], wait[32], sc[32], sf[32], before[32], storm[32], secs[32];
	if (sum.have_bytes)
		snprintf(bpc, sizeof(bpc), "%.0f", sum.bytes_per_client);
	else
		snprintf(bpc, sizeof(bpc), "-");
	fmt_ms(base, sizeof(base), sum.have_base, sum.base_p99);
	fmt_ms(p99, sizeof(p99), sum.have_hold, sum.hold_p99);
	fmt_ms(wait, sizeof(wait), opt.rate > 0 && opt.active > 0, ms(sum.longest_wait_us));
	fmt_ms(before, sizeof(before), opt.storm > 0 && sum.have_hold, sum.hold_p99);
	fmt_ms(storm, sizeof(storm), sum.have_storm_p99, sum.storm_p99);
	fmt_ms(secs, sizeof(secs), sum.storm_done, sum.storm_seconds);
	snprintf(sc, sizeof(sc), opt.storm > 0 ? "%ld" : "-", opt.storm);
	if (opt.storm > 0)
		snprintf(sf, sizeof(sf), "%llu", (unsigned long long)sum.storm_failed);
	else
		snprintf(sf, sizeof(sf), "-");
	printf("bench-scale: pooler=%s clients=%ld logged_in=%llu failed=%llu bytes_per_client=%s base_p99_ms=%s"
	       " p99_ms=%s longest_wait_ms=%s storm_clients=%s storm_failed=%s before_storm_p99_ms=%s"
	       " storm_p99_ms=%s storm_seconds=%s\n",
	       opt.name, opt.clients, (unsigned long long)sum.logged_in, (unsigned long long)sum.failed, bpc, base,
	       p99, wait, sc, sf, before, storm, secs);
}

int main(int argc, char **argv)
{
	struct scale_report r;
	struct pooler_sample empty;
	long *n;
	double secs;
	bool rate_on;

	parse_args(argc, argv);
	setvbuf(stdout, NULL, _IOLBF, 0);
	scale_sys_pooler(opt.pooler_pids, opt.pooler_pgrep, &empty);
	start_children();
	n = xcalloc((size_t)nchildren, sizeof(*n));
	printf("scale_gen: %s on 127.0.0.1:%d: %ld clients (%ld active at %.0f tps), storm %ld%s, %d processes\n",
	       opt.name, ntohs(opt.addr.sin_port), opt.clients, opt.active, opt.rate, opt.storm,
	       opt.tls ? ", TLS" : opt.storm_tls ? ", storm over TLS" : "", nchildren);
	if (empty.procs)
		printf("  pooler before: %d processes, rss %.1f MB\n", empty.procs, (double)empty.rss_bytes / 1048576.0);

	/* login-active, then base: the active clients alone */
	if (opt.active > 0) {
		for (int k = 0; k < nchildren; k++)
			n[k] = children[k].share.active;
		login_phase("login-active", CMD_LOGIN, n, opt.active, &r, &secs);
		sum.logged_in += r.logged_in;
		sum.failed += r.failed;
	}
	rate_on = opt.active > 0 && opt.rate > 0;
	if (rate_on)
		command(CMD_RATE, NULL);
	if (rate_on && opt.active < opt.clients) {
		struct phase ph;
		phase_begin(&ph, "base");
		sleep_s(opt.duration);
		printf("phase base: %.1f s, %ld active clients alone at %.0f tps\n", now_s() - ph.t0, opt.active, opt.rate);
		snapshot_phase(&ph, &sum.base_p99);
		sum.have_base = sum.base_p99 >= 0;
		phase_machine(&ph, now_s() - ph.t0);
	}

	/* login: the rest, while the active clients go on */
	if (opt.clients > opt.active) {
		struct phase ph;
		for (int k = 0; k < nchildren; k++)
			n[k] = children[k].share.held - children[k].share.active;
		phase_begin(&ph, "login");
		command(CMD_LOGIN, n);
		collect(REPORT_LOGINS, &r);
		secs = now_s() - ph.t0;
		printf("phase login: %ld clients in %.2f s\n", opt.clients - opt.active, secs);
		print_logins(&r);
		sum.logged_in += r.logged_in;
		sum.failed += r.failed;
		double ignored;
		if (rate_on)
			snapshot_phase(&ph, &ignored);
		phase_machine(&ph, secs);
	}

	/* settle, then hold: everyone connected */
	if (rate_on && opt.clients > opt.active) {
		struct scale_report ignored;
		command(CMD_RESTART, NULL);
		sleep_s(2.0);
		command(CMD_SNAPSHOT, NULL);
		collect(REPORT_TXNS, &ignored);
		printf("phase settle: 2.0 s, the transactions due during the logins and not started dropped, not measured\n");
		print_txns(&ignored, 2.0);
	}
	if (opt.clients > 0) {
		struct phase ph;
		phase_begin(&ph, "hold");
		sleep_s(rate_on ? opt.duration : MIN(opt.duration, 2.0));
		secs = now_s() - ph.t0;
		printf("phase hold: %.1f s, %llu clients logged in%s\n", secs, (unsigned long long)sum.logged_in,
		       rate_on ? ", the active ones at the rate" : "");
		if (rate_on) {
			snapshot_phase(&ph, &sum.hold_p99);
			sum.have_hold = sum.hold_p99 >= 0;
		}
		uint64_t rss = phase_machine(&ph, secs);
		if (rss && empty.procs && sum.logged_in) {
			sum.bytes_per_client = ((double)rss - (double)empty.rss_bytes) / (double)sum.logged_in;
			sum.have_bytes = true;
			printf("  memory: %.0f bytes per logged-in client above the pooler's empty %.1f MB\n",
			       sum.bytes_per_client, (double)empty.rss_bytes / 1048576.0);
		}
	}

	/* storm: new clients at once, while the active ones go on */
	if (opt.storm > 0) {
		struct phase ph;
		for (int k = 0; k < nchildren; k++)
			n[k] = children[k].share.storm;
		phase_begin(&ph, "storm");
		command(CMD_STORM, n);
		collect(REPORT_LOGINS, &r);
		sum.storm_seconds = now_s() - ph.t0;
		sum.storm_done = true;
		sum.storm_failed = r.failed;
		printf("phase storm: %ld new clients%s at once, the last one done after %.2f s\n", opt.storm,
		       opt.tls || opt.storm_tls ? " over TLS" : "", sum.storm_seconds);
		print_logins(&r);
		if (rate_on) {
			snapshot_phase(&ph, &sum.storm_p99);
			sum.have_storm_p99 = sum.storm_p99 >= 0;
		}
		phase_machine(&ph, now_s() - ph.t0);
	}

	command(CMD_QUIT, NULL);
	for (int k = 0; k < nchildren; k++) {
		waitpid(children[k].pid, NULL, 0);
		children[k].pid = 0;
	}
	print_summary();
	free(n);
	return sum.failed || sum.storm_failed || sum.lost ? 1 : 0;
}
