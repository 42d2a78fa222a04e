/*
 * harness.c - process, file and socket plumbing for the integration tests
 * (see harness.h for the contract). The raw-socket protocol clients are
 * harness_raw.c's.
 *
 * Owns: the pgvalve instances and helper programs a test starts (a small
 * registry of PIDs so the teardown fixture can stop them), the instance
 * dirs under PGV_TEST_DIR, and a cached superuser connection to PostgreSQL.
 * It knows nothing of pgvalve's internals: only its command line, its
 * config file format, its files and its sockets.
 */
#define _GNU_SOURCE 1	/* unshare() */
#include "harness.h"

#include <dirent.h>
#include <sys/resource.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>


#ifndef PGV_TEST_SRCDIR
#error "PGV_TEST_SRCDIR must name the source tree (set by Makefile.am)"
#endif
#ifndef PGV_TEST_BUILDDIR
#error "PGV_TEST_BUILDDIR must name the build tree (set by Makefile.am)"
#endif

/* Scaled by CK_TIMEOUT_MULTIPLIER, as Check scales test timeouts (scripts/valgrind.sh sets it). */
#define START_TIMEOUT_S (10.0 * timeout_multiplier())
#define STOP_TIMEOUT_S (5.0 * timeout_multiplier())
#define MAX_INSTANCES 8
#define MAX_HELPERS 8
#define TAIL_BYTES 1500

static double timeout_multiplier(void)
{
	const char *m = getenv("CK_TIMEOUT_MULTIPLIER");
	double v = m ? atof(m) : 1.0;
	return v >= 1.0 ? v : 1.0;
}

/* Copies, not pointers: a test's struct pgv lives on its stack. */
static struct pgv instances[MAX_INSTANCES];
static pid_t helpers[MAX_HELPERS];
static PGconn *direct_conn;

/* ---------------------------------------------------------------- small things */

double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double pgv_time_bound(double seconds, double ceiling)
{
	double load[1];
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	double factor = getloadavg(load, 1) == 1 && cores > 0 ? load[0] / (double)cores : 1;
	factor = factor < 1 ? 1 : factor > 8 ? 8 : factor;
	return seconds * factor < ceiling ? seconds * factor : ceiling;
}

void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

void sleep_s(double s)
{
	if (s <= 0)
		return;
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static const char *env_required(const char *name)
{
	const char *v = getenv(name);

	if (v == NULL || *v == '\0')
		ck_abort_msg("%s is not set: run this test through test/integration/run.sh", name);
	return v;
}

static int pg_port(void)
{
	return atoi(env_required("PGV_TEST_PGPORT"));
}

/* The user pgvalve runs as (-u), or NULL when the tests do not run as root. */
static const char *runas_user(void)
{
	const char *u = getenv("PGV_TEST_RUNAS");

	if (u == NULL || *u == '\0' || geteuid() != 0)
		return NULL;
	return u;
}

static void chown_runas(const char *path)
{
	const char *u = runas_user();
	struct passwd *pw;

	if (u == NULL)
		return;
	pw = getpwnam(u);
	if (pw == NULL)
		ck_abort_msg("user %s (PGV_TEST_RUNAS) does not exist", u);
	if (chown(path, pw->pw_uid, pw->pw_gid) != 0)
		ck_abort_msg("chown %s to %s: %s", path, u, strerror(errno));
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	size_t len = strlen(text), off = 0;

	if (fd < 0)
		ck_abort_msg("create %s: %s", path, strerror(errno));
	while (off < len) {
		ssize_t n = write(fd, text + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			ck_abort_msg("write %s: %s", path, strerror(errno));
		off += (size_t)n;
	}
	if (fchmod(fd, mode) != 0)
		ck_abort_msg("chmod %s: %s", path, strerror(errno));
	close(fd);
	chown_runas(path);
}

static const char *tail_into(char *buf, size_t size, const char *path, size_t bytes)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	ssize_t n;
	off_t from;

	buf[0] = '\0';
	if (fd < 0)
		return buf;
	if (bytes > size - 1)
		bytes = size - 1;
	if (fstat(fd, &st) == 0 && st.st_size > (off_t)bytes)
		from = st.st_size - (off_t)bytes;
	else
		from = 0;
	n = pread(fd, buf, bytes, from);
	close(fd);
	if (n < 0)
		n = 0;
	buf[n] = '\0';
	return buf;
}

const char *read_file_tail(const char *path, size_t bytes)
{
	static char buf[16384];

	return tail_into(buf, sizeof(buf), path, bytes);
}

static void instance_path(const struct pgv *p, const char *name, char *out, size_t size)
{
	snprintf(out, size, "%s/%s", p->dir, name);
}

const char *pgv_log_tail(struct pgv *p, size_t bytes)
{
	static char out[2 * TAIL_BYTES + 4096];
	char logbuf[TAIL_BYTES + 1], errbuf[TAIL_BYTES + 1], errpath[700];

	if (bytes > TAIL_BYTES)
		bytes = TAIL_BYTES;
	instance_path(p, "stderr.log", errpath, sizeof(errpath));
	tail_into(logbuf, sizeof(logbuf), p->log, bytes);
	tail_into(errbuf, sizeof(errbuf), errpath, bytes);
	if (strcmp(logbuf, errbuf) == 0)	/* logging to both, as in the foreground */
		snprintf(out, sizeof(out), "--- end of %s (and of stderr.log):\n%s", p->log, logbuf);
	else
		snprintf(out, sizeof(out), "--- end of %s:\n%s\n--- end of %s:\n%s", p->log, logbuf, errpath, errbuf);
	return out;
}

int dir_entry_count(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

void raise_descriptor_limit(unsigned long need)
{
	struct rlimit rl;
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	getrlimit(RLIMIT_NOFILE, &rl);
	ck_assert_msg(rl.rlim_cur >= need, "RLIMIT_NOFILE %lu too low (%lu needed)", (unsigned long)rl.rlim_cur, need);
}

bool pgv_log_contains(struct pgv *p, const char *needle)
{
	FILE *f = fopen(p->log, "re");
	char *text = NULL;
	size_t cap = 0, len = 0;
	bool found;

	if (f == NULL)
		return false;
	for (;;) {
		size_t n;

		if (cap - len < 4096) {
			cap = cap ? cap * 2 : 65536;
			text = realloc(text, cap + 1);
			ck_assert_ptr_nonnull(text);
		}
		n = fread(text + len, 1, cap - len, f);
		if (n == 0)
			break;
		len += n;
	}
	fclose(f);
	text[len] = '\0';
	found = strstr(text, needle) != NULL;
	free(text);
	return found;
}

/* ---------------------------------------------------------------- processes */

static void registry_add_helper(pid_t pid)
{
	for (size_t i = 0; i < MAX_HELPERS; i++)
		if (helpers[i] == 0) {
			helpers[i] = pid;
			return;
		}
}

static void registry_drop_helper(pid_t pid)
{
	for (size_t i = 0; i < MAX_HELPERS; i++)
		if (helpers[i] == pid)
			helpers[i] = 0;
}

/*
 * fork + exec with stdout/stderr appended to outfile. The child stays in
 * the test's process group and gets SIGKILL when the test process dies.
 */
static pid_t spawn(char *const argv[], char *const env[], const char *outfile, const char *cwd)
{
	pid_t parent = getpid(), pid;
	int out = open(outfile, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

	if (out < 0)
		ck_abort_msg("open %s: %s", outfile, strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		ck_abort_msg("fork: %s", strerror(errno));
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY);
		long maxfd = sysconf(_SC_OPEN_MAX);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		signal(SIGPIPE, SIG_DFL);
		if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
			_exit(127);
		if (maxfd < 0 || maxfd > 65536)
			maxfd = 65536;
		for (int fd = 3; fd < maxfd; fd++)
			close(fd);
		if (cwd != NULL && chdir(cwd) != 0)
			_exit(127);
		for (size_t i = 0; env != NULL && env[i] != NULL; i++)
			putenv(env[i]);
		execvp(argv[0], argv);
		dprintf(2, "harness: exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(out);
	return pid;
}

/* waitpid with a deadline; true (and *status) once the child is reaped. */
static bool wait_child(pid_t pid, int *status, double timeout_s)
{
	double deadline = now_s() + timeout_s;

	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);

		if (r == pid)
			return true;
		if (r < 0 && errno != EINTR)
			return true;	/* not our child any more: nothing to wait for */
		if (now_s() >= deadline)
			return false;
		sleep_ms(20);
	}
}

static void describe_status(int status, char *out, size_t size)
{
	if (WIFEXITED(status))
		snprintf(out, size, "exit status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(out, size, "signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(out, size, "wait status 0x%x", (unsigned)status);
}

int run_program(char *const argv[], char *const env[], const char *outfile, int timeout_s)
{
	char path[PATH_MAX];
	const char *pgbin = getenv("PGV_TEST_PGBIN");
	char **args;
	size_t argc = 0;
	pid_t pid;
	int status;

	while (argv[argc] != NULL)
		argc++;
	args = calloc(argc + 1, sizeof(*args));
	ck_assert_ptr_nonnull(args);
	memcpy(args, argv, argc * sizeof(*args));
	if (strchr(argv[0], '/') == NULL && pgbin != NULL && *pgbin != '\0') {
		snprintf(path, sizeof(path), "%s/%s", pgbin, argv[0]);
		if (access(path, X_OK) == 0)
			args[0] = path;
	}
	pid = spawn(args, env, outfile, NULL);
	free(args);
	registry_add_helper(pid);
	if (!wait_child(pid, &status, timeout_s)) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		registry_drop_helper(pid);
		return -1;
	}
	registry_drop_helper(pid);
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

pid_t run_program_background(char *const argv[], const char *outfile)
{
	pid_t pid = spawn(argv, NULL, outfile, NULL);
	registry_add_helper(pid);
	return pid;
}

void stop_program(pid_t pid)
{
	int status;

	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	if (!wait_child(pid, &status, STOP_TIMEOUT_S)) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	registry_drop_helper(pid);
}

/* ---------------------------------------------------------------- dnsmasq */

/* Whether a socket of type (SOCK_STREAM, SOCK_DGRAM) can bind 127.0.0.1:port now. */
static bool port_bindable(int port, int type)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
	bool ok;

	if (fd < 0)
		return false;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* no SO_REUSEADDR: a port with connections in TIME_WAIT counts as taken */
	ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

/* Free for both UDP and TCP on 127.0.0.1 (DNS serves both). */
static bool dns_port_is_free(int port)
{
	return port_bindable(port, SOCK_DGRAM) && port_bindable(port, SOCK_STREAM);
}

/* How many times dnsmasq's log says it read the hosts file (start and each SIGHUP). */
static int dns_hosts_reads(const struct pgv_dns *d)
{
	FILE *f = fopen(d->log, "re");
	char line[1024], needle[700];
	int n = 0;

	if (f == NULL)
		return 0;
	snprintf(needle, sizeof(needle), "read %s ", d->hosts);
	while (fgets(line, sizeof(line), f) != NULL)
		if (strstr(line, needle) != NULL)
			n++;
	fclose(f);
	return n;
}

void pgv_dns_start(struct pgv_dns *d, const char *hosts_text)
{
	static unsigned seq;
	const char *testdir = env_required("PGV_TEST_DIR");
	char pidfile[700], outfile[700], text[128];

	memset(d, 0, sizeof(*d));
	snprintf(d->dir, sizeof(d->dir), "%s/dns-%ld-%u", testdir, (long)getpid(), seq++);
	if (mkdir(d->dir, 0755) != 0)
		ck_abort_msg("mkdir %s: %s", d->dir, strerror(errno));
	snprintf(d->hosts, sizeof(d->hosts), "%s/hosts", d->dir);
	snprintf(d->resolv, sizeof(d->resolv), "%s/resolv.conf", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/dnsmasq.log", d->dir);
	snprintf(pidfile, sizeof(pidfile), "%s/dnsmasq.pid", d->dir);
	snprintf(outfile, sizeof(outfile), "%s/dnsmasq.out", d->dir);
	write_file(d->hosts, hosts_text, 0644);

	/* A port may be taken between the check and dnsmasq's bind: then try another. */
	for (int attempt = 0; attempt < 5 && d->pid == 0; attempt++) {
		int start = (int)((getpid() * 7 + attempt * 131) % 2000);
		for (int i = 0; i < 2000 && d->port == 0; i++) {
			int port = 21000 + (start + i) % 2000;
			if (dns_port_is_free(port))
				d->port = port;
		}
		if (d->port == 0)
			ck_abort_msg("no free UDP/TCP port in 21000-22999 for dnsmasq");
		char a_port[32], a_hosts[700], a_pid[720], a_log[720];
		snprintf(a_port, sizeof(a_port), "--port=%d", d->port);
		snprintf(a_hosts, sizeof(a_hosts), "--addn-hosts=%s", d->hosts);
		snprintf(a_pid, sizeof(a_pid), "--pid-file=%s", pidfile);
		snprintf(a_log, sizeof(a_log), "--log-facility=%s", d->log);
		char *argv[] = { "dnsmasq", "--keep-in-foreground", a_port, "--listen-address=127.0.0.1",
				 "--bind-interfaces", "--no-resolv", "--no-hosts", a_hosts, "--local-ttl=1",
				 "--auth-server=ns.pgv.test,127.0.0.1", "--auth-zone=pgv.test", "--auth-ttl=1",
				 a_pid, a_log, "--log-queries", NULL };
		char *dnsmasq = access("/usr/sbin/dnsmasq", X_OK) == 0 ? "/usr/sbin/dnsmasq" : "dnsmasq";
		argv[0] = dnsmasq;
		pid_t pid = spawn(argv, NULL, outfile, d->dir);
		registry_add_helper(pid);
		double deadline = now_s() + START_TIMEOUT_S;
		int status;
		while (now_s() < deadline) {
			if (waitpid(pid, &status, WNOHANG) == pid) {
				registry_drop_helper(pid);
				pid = 0;
				break;
			}
			if (dns_hosts_reads(d) > 0)
				break;
			sleep_ms(20);
		}
		if (pid == 0) {
			d->port = 0;	/* exited: most likely the port was taken; another one */
			continue;
		}
		if (dns_hosts_reads(d) == 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			registry_drop_helper(pid);
			char out[TAIL_BYTES + 1];
			snprintf(out, sizeof(out), "%s", read_file_tail(outfile, TAIL_BYTES));
			ck_abort_msg("dnsmasq did not start within %.0f s:\n%s\n%s", START_TIMEOUT_S, out,
				     read_file_tail(d->log, TAIL_BYTES));
		}
		d->pid = pid;
	}
	if (d->pid == 0)
		ck_abort_msg("dnsmasq would not start (last port %d):\n%s", d->port, read_file_tail(outfile, TAIL_BYTES));
	snprintf(text, sizeof(text), "nameserver 127.0.0.1:%d\n", d->port);
	write_file(d->resolv, text, 0644);
}

void pgv_dns_set_hosts(struct pgv_dns *d, const char *hosts_text)
{
	char tmp[700];
	int before = dns_hosts_reads(d);
	double deadline = now_s() + START_TIMEOUT_S;

	ck_assert_msg(d->pid > 0, "dnsmasq is not running");
	/* renamed into place: dnsmasq never reads half a file */
	snprintf(tmp, sizeof(tmp), "%s.new", d->hosts);
	write_file(tmp, hosts_text, 0644);
	if (rename(tmp, d->hosts) != 0)
		ck_abort_msg("rename %s: %s", tmp, strerror(errno));
	kill(d->pid, SIGHUP);
	while (dns_hosts_reads(d) <= before) {
		if (now_s() > deadline)
			ck_abort_msg("dnsmasq did not re-read %s:\n%s", d->hosts, read_file_tail(d->log, TAIL_BYTES));
		sleep_ms(20);
	}
}

void pgv_dns_stop(struct pgv_dns *d)
{
	int status;

	if (d->pid <= 0)
		return;
	kill(d->pid, SIGTERM);
	if (!wait_child(d->pid, &status, STOP_TIMEOUT_S)) {
		kill(d->pid, SIGKILL);
		waitpid(d->pid, &status, 0);
	}
	registry_drop_helper(d->pid);
	d->pid = 0;
}

/* ---------------------------------------------------------------- pgvalve */

static bool port_is_free(int port)
{
	return port_bindable(port, SOCK_STREAM);
}

/*
 * A port below the kernel's ephemeral range (32768+ on Debian), so no
 * client socket can be holding it. Spread by PID: every test is a new
 * process, and the previous test's port may still be in TIME_WAIT.
 */
static int pick_port(void)
{
	int pg = pg_port();
	int start = (int)(getpid() % 3000) * 2;

	for (int i = 0; i < 3000; i++) {
		int port = 26000 + (start + i) % 6000;

		if (port != pg && port_is_free(port))
			return port;
	}
	ck_abort_msg("no free TCP port in 26000-31999");
	return -1;
}

/* True once something listens on 127.0.0.1:port (or 0.0.0.0:port). */
static bool port_listening(int port)
{
	FILE *f = fopen("/proc/net/tcp", "re");
	char line[512];
	bool found = false;

	if (f == NULL)
		return false;
	while (!found && fgets(line, sizeof(line), f) != NULL) {
		unsigned int addr, lport, state;

		if (sscanf(line, " %*u: %8X:%4X %*8X:%*4X %2X", &addr, &lport, &state) == 3 &&
		    (int)lport == port && state == 0x0A && (addr == 0x0100007F || addr == 0))
			found = true;
	}
	fclose(f);
	return found;
}

static void registry_add(const struct pgv *p)
{
	for (size_t i = 0; i < MAX_INSTANCES; i++)
		if (instances[i].pid == 0) {
			instances[i] = *p;
			return;
		}
	ck_abort_msg("more than %d pgvalve instances in one test", MAX_INSTANCES);
}

static void registry_drop(pid_t pid)
{
	for (size_t i = 0; i < MAX_INSTANCES; i++)
		if (instances[i].pid == pid)
			memset(&instances[i], 0, sizeof(instances[i]));
}

static bool unix_socket_accepts(const char *dir, int port)
{
	int fd = raw_connect_unix(dir, port);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

void pgv_reserve_dir(struct pgv *p)
{
	static unsigned seq;
	const char *testdir = env_required("PGV_TEST_DIR");

	memset(p, 0, sizeof(*p));
	snprintf(p->dir, sizeof(p->dir), "%s/pgv-%ld-r%u", testdir, (long)getpid(), seq++);
	if (mkdir(p->dir, 0755) != 0)
		ck_abort_msg("mkdir %s: %s", p->dir, strerror(errno));
	chown_runas(p->dir);
	p->dir_ready = true;
}

int pgv_pick_port(void)
{
	return pick_port();
}

/*
 * Outside pick_port's range for pgvalve (26000-31999) so that the
 * pooler's own port, picked later, cannot be the same, and below the
 * kernel's ephemeral ports (32768 on) so that no client socket takes it
 * before pgvalve binds it.
 */
int pgv_pick_http_port(int avoid)
{
	int start = (int)(getpid() % 1000) * 2;
	for (int i = 0; i < 2000; i++) {
		int port = 23000 + (start + i) % 2000;
		if (port == avoid)
			continue;
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		bool ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
		close(fd);
		if (ok)
			return port;
	}
	ck_abort_msg("no free port in 23000-24999");
	return -1;
}

double pgv_metric(int port, const char *series)
{
	char line[512];
	snprintf(line, sizeof(line), "\n%s ", series);
	const char *at = strstr(pgv_scrape_metrics(port), line);
	return at ? strtod(at + strlen(line), NULL) : -1;
}

double pgv_auth_failures(int port, const char *method, const char *cause)
{
	char series[200];
	snprintf(series, sizeof(series), "pgvalve_client_authentication_failures_total{method=\"%s\",cause=\"%s\"}",
		 method, cause);
	double v = pgv_metric(port, series);
	return v < 0 ? 0 : v;
}

void pgv_start(struct pgv *p, const char *pgbouncer_extra, const char *databases, const char *userlist)
{
	memset(p, 0, sizeof(*p));
	pgv_start_ex(p, pgbouncer_extra, databases, userlist, NULL, 0);
}

void pgv_start_on_port(struct pgv *p, int port, const char *pgbouncer_extra, const char *databases,
		       const char *userlist)
{
	pgv_start_ex(p, pgbouncer_extra, databases, userlist, NULL, port);
}

void pgv_start_ex(struct pgv *p, const char *pgbouncer_extra, const char *databases, const char *userlist,
		  const char *const *args, int port)
{
	static unsigned seq;
	static int bind_retries;	/* this start's tries after "Address already in use" */
	const char *testdir = env_required("PGV_TEST_DIR");
	const char *binary = env_required("PGV_BINARY");
	const char *user = runas_user();
	/* PGV_TEST_INI_SECTION=pgbouncer runs the suite against PgBouncer itself */
	const char *section = getenv("PGV_TEST_INI_SECTION") ? getenv("PGV_TEST_INI_SECTION") : "pgvalve";
	char authfile[700], pidfile[700], errfile[700], *ini_text = NULL;
	size_t ini_len = 0;
	FILE *ini;
	char *argv[16];
	int argc = 0;
	double deadline;

	if (!p->dir_ready) {
		memset(p, 0, sizeof(*p));
		snprintf(p->dir, sizeof(p->dir), "%s/pgv-%ld-%u", testdir, (long)getpid(), seq++);
		if (mkdir(p->dir, 0755) != 0)
			ck_abort_msg("mkdir %s: %s", p->dir, strerror(errno));
		chown_runas(p->dir);
	}
	snprintf(p->ini, sizeof(p->ini), "%s/pgvalve.ini", p->dir);
	snprintf(p->log, sizeof(p->log), "%s/pgvalve.log", p->dir);
	instance_path(p, "userlist.txt", authfile, sizeof(authfile));
	instance_path(p, "pgvalve.pid", pidfile, sizeof(pidfile));
	instance_path(p, "stderr.log", errfile, sizeof(errfile));
	p->port = port > 0 ? port : pick_port();

	write_file(authfile, userlist ? userlist : "", 0600);
	write_file(p->log, "", 0644);

	ini = open_memstream(&ini_text, &ini_len);
	ck_assert_ptr_nonnull(ini);
	fprintf(ini,
		"; written by the integration test harness\n"
		"[databases]\n%s\n\n"
		"[%s]\n"
		"listen_addr = 127.0.0.1\n"
		"listen_port = %d\n"
		"unix_socket_dir = %s\n"
		"auth_file = %s\n"
		"logfile = %s\n"
		"pidfile = %s\n"
		"%s\n",
		databases ? databases : "", section, p->port, p->dir, authfile, p->log, pidfile,
		pgbouncer_extra ? pgbouncer_extra : "");
	fclose(ini);
	write_file(p->ini, ini_text, 0644);
	free(ini_text);

	argv[argc++] = (char *)binary;
	if (user != NULL) {
		argv[argc++] = "-u";
		argv[argc++] = (char *)user;
	}
	for (size_t i = 0; args != NULL && args[i] != NULL && argc < 14; i++)
		argv[argc++] = (char *)args[i];
	argv[argc++] = p->ini;
	argv[argc] = NULL;
	p->pid = spawn(argv, NULL, errfile, p->dir);
	registry_add(p);
	bool own_pidfile = pgbouncer_extra && strstr(pgbouncer_extra, "pidfile");
	/* The HTTP endpoint's port, when the test asked for one (0: none) */
	int http_port = 0;
	const char *metrics = pgbouncer_extra ? strstr(pgbouncer_extra, "metrics_port") : NULL;
	if (metrics && sscanf(metrics, "metrics_port = %d", &http_port) != 1)
		http_port = 0;

	deadline = now_s() + START_TIMEOUT_S;
	for (;;) {
		int status;
		char how[96];

		if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
			registry_drop(p->pid);
			p->pid = 0;
			/*
			 * The port picked for it was free a moment ago; on a machine
			 * shared with other test runs someone may have taken it since.
			 */
			if (port <= 0 && bind_retries < 3 && pgv_log_contains(p, "Address already in use")) {
				bind_retries++;
				pgv_start_ex(p, pgbouncer_extra, databases, userlist, args, 0);
				return;
			}
			describe_status(status, how, sizeof(how));
			ck_abort_msg("pgvalve exited during start-up (%s); config %s\n%s",
				     how, p->ini, pgv_log_tail(p, TAIL_BYTES));
		}
		/*
		 * On a shared port another instance listens already: wait for our
		 * own socket too. pgvalve writes the pidfile after all its
		 * listeners (the Unix socket and the HTTP endpoint included):
		 * wait for it as well, unless the test chose its own pidfile.
		 * And for the HTTP endpoint itself: a port taken for a moment by
		 * a test running alongside makes pgvalve bind it on a later try.
		 */
		if (port_listening(p->port) && (port <= 0 || unix_socket_accepts(p->dir, p->port)) &&
		    (own_pidfile || atoi(read_file_tail(pidfile, 64)) == p->pid) &&
		    (http_port <= 0 || port_listening(http_port))) {
			bind_retries = 0;
			return;
		}
		if (now_s() >= deadline) {
			kill(p->pid, SIGKILL);
			waitpid(p->pid, &status, 0);
			registry_drop(p->pid);
			p->pid = 0;
			ck_abort_msg("pgvalve was not listening on 127.0.0.1:%d after %.0f s; config %s\n%s",
				     p->port, START_TIMEOUT_S, p->ini, pgv_log_tail(p, TAIL_BYTES));
		}
		sleep_ms(25);
	}
}

bool pgv_running(struct pgv *p)
{
	int status;

	if (p->pid <= 0)
		return false;
	if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
		registry_drop(p->pid);
		p->pid = 0;
		return false;
	}
	return true;
}

/* The first sanitizer report in pgvalve's stderr, or NULL. */
static const char *sanitizer_report(struct pgv *p)
{
	static const char *const markers[] = {
		"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
		"WARNING: ThreadSanitizer", "ERROR: UndefinedBehaviorSanitizer",
	};
	static char buf[4096];
	char errfile[700];
	FILE *f;
	char line[1024];
	bool started = false;

	instance_path(p, "stderr.log", errfile, sizeof(errfile));
	f = fopen(errfile, "re");
	if (f == NULL)
		return NULL;
	buf[0] = '\0';
	while (fgets(line, sizeof(line), f) != NULL) {
		for (size_t i = 0; !started && i < sizeof(markers) / sizeof(markers[0]); i++)
			started = strstr(line, markers[i]) != NULL;
		if (!started)
			continue;
		if (strlen(buf) + strlen(line) >= sizeof(buf))
			break;
		strcat(buf, line);
	}
	fclose(f);
	return buf[0] ? buf : NULL;
}

/*
 * Under scripts/valgrind.sh (PGV_VALGRIND_LOGDIR set, pgvalve run by
 * test/valgrind/pgvalve-valgrind.sh): the start of this instance's memcheck
 * log when it reports errors, else NULL. pgvalve's exit status says nothing
 * here (it may be killed), so the log is what counts.
 */
static const char *valgrind_report(pid_t pid)
{
	/* how memcheck's error reports begin */
	static const char *const kinds[] = {
		"uninitialised", "Invalid read", "Invalid write", "Invalid free", "Mismatched free",
		"overlap", "Syscall param", "Process terminating with default action",
	};
	/* the first report (or the head of the log), short enough for a Check message */
	static char buf[2400];
	const char *dir = getenv("PGV_VALGRIND_LOGDIR");
	char path[700], line[512];
	bool bad = false, summary = false, seen_kind = false;
	FILE *f;

	if (dir == NULL || pid <= 0)
		return NULL;
	snprintf(path, sizeof(path), "%s/pgvalve.%ld.log", dir, (long)pid);
	f = fopen(path, "re");
	if (f == NULL)
		return NULL;
	buf[0] = '\0';
	while (fgets(line, sizeof(line), f) != NULL) {
		const char *sum = strstr(line, "ERROR SUMMARY: ");
		if (sum != NULL) {
			summary = true;
			bad |= strncmp(sum, "ERROR SUMMARY: 0 errors", 23) != 0;
		}
		for (size_t i = 0; !seen_kind && i < sizeof(kinds) / sizeof(kinds[0]); i++) {
			if (strstr(line, kinds[i]) != NULL) {
				seen_kind = true;
				buf[0] = '\0';
			}
		}
		if (strlen(buf) + strlen(line) < sizeof(buf))
			strcat(buf, line);
	}
	fclose(f);
	/* a log cut short by SIGKILL has no summary: then any report counts */
	return (bad || (!summary && seen_kind)) ? buf : NULL;
}

void pgv_stop(struct pgv *p)
{
	pid_t pid = p->pid;
	int status = 0;
	bool forced = false;
	const char *report;
	char how[96];

	if (pid <= 0)
		return;
	/* SIGQUIT is the immediate shutdown (SIGTERM waits for clients, as in PgBouncer 1.25). */
	kill(pid, SIGQUIT);
	if (!wait_child(pid, &status, STOP_TIMEOUT_S)) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		forced = true;
	}
	registry_drop(pid);
	p->pid = 0;
	report = sanitizer_report(p);
	if (report != NULL)
		ck_abort_msg("pgvalve's sanitizers reported (full output in %s/stderr.log):\n%s", p->dir, report);
	report = valgrind_report(pid);
	if (report != NULL)
		ck_abort_msg("valgrind reported errors in pgvalve (pid %ld, log in %s):\n%s", (long)pid,
			     getenv("PGV_VALGRIND_LOGDIR"), report);
	if (forced)
		ck_abort_msg("pgvalve was still running %.0f s after SIGQUIT\n%s",
			     STOP_TIMEOUT_S, pgv_log_tail(p, TAIL_BYTES));
	if (WIFSIGNALED(status)) {
		describe_status(status, how, sizeof(how));
		ck_abort_msg("pgvalve died of %s on SIGQUIT\n%s", how, pgv_log_tail(p, TAIL_BYTES));
	}
}

static void pgv_teardown(void)
{
	for (size_t i = 0; i < MAX_HELPERS; i++)
		if (helpers[i] > 0) {
			kill(helpers[i], SIGKILL);
			waitpid(helpers[i], NULL, 0);
			helpers[i] = 0;
		}
	if (direct_conn != NULL) {
		PQfinish(direct_conn);
		direct_conn = NULL;
	}
	for (size_t i = 0; i < MAX_INSTANCES; i++)
		if (instances[i].pid > 0) {
			struct pgv copy = instances[i];

			pgv_stop(&copy);
		}
}

/* ---------------------------------------------------------------- libpq */

void pgv_conn_params(struct pgv *p, const char *dbname, const char *user, const char *password,
		     const char *keywords[10], const char *values[10], char portbuf[16])
{
	int n = 0;

	snprintf(portbuf, 16, "%d", p->port);
	keywords[n] = "host", values[n++] = "127.0.0.1";
	keywords[n] = "port", values[n++] = portbuf;
	keywords[n] = "dbname", values[n++] = dbname;
	keywords[n] = "user", values[n++] = user;
	keywords[n] = "sslmode", values[n++] = "disable";
	keywords[n] = "gssencmode", values[n++] = "disable";
	keywords[n] = "connect_timeout", values[n++] = "10";
	if (password != NULL)
		keywords[n] = "password", values[n++] = password;
	keywords[n] = NULL, values[n] = NULL;
}

PGconn *pgv_connect(struct pgv *p, const char *dbname, const char *user, const char *password)
{
	const char *kw[10], *val[10];
	char port[16];
	PGconn *conn;

	pgv_conn_params(p, dbname, user, password, kw, val, port);
	conn = PQconnectdbParams(kw, val, 0);
	ck_assert_msg(conn != NULL, "libpq out of memory");
	return conn;
}

PGconn *pg_direct(void)
{
	const char *kw[] = { "host", "port", "dbname", "user", "connect_timeout", NULL };
	const char *val[] = { env_required("PGV_TEST_PGSOCKDIR"), env_required("PGV_TEST_PGPORT"),
			      "pgvtest", "pgvadmin", "10", NULL };
	PGconn *conn = PQconnectdbParams(kw, val, 0);

	if (conn == NULL || PQstatus(conn) != CONNECTION_OK)
		ck_abort_msg("cannot reach PostgreSQL directly: %s", conn ? PQerrorMessage(conn) : "out of memory");
	return conn;
}

/*
 * Waits until PostgreSQL runs n backends with exactly this query: a cancel
 * sent while a client still waits for a server would find nothing to hit.
 */
void pg_wait_running(const char *sql, int n)
{
	PGconn *pg = pg_direct();
	const char *params[1] = { sql };
	double deadline = now_s() + 15;
	int running = 0;

	while (now_s() < deadline) {
		PGresult *r = PQexecParams(pg, "SELECT count(*) FROM pg_stat_activity WHERE query = $1 AND state = 'active'",
					   1, NULL, params, NULL, NULL, 0);
		ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
		running = atoi(PQgetvalue(r, 0, 0));
		PQclear(r);
		if (running >= n)
			break;
		sleep_ms(50);
	}
	PQfinish(pg);
	ck_assert_msg(running >= n, "only %d of %d \"%s\" running", running, n, sql);
}

const char *query_value(PGconn *conn, const char *sql)
{
	static char buf[1024];
	PGresult *res = PQexec(conn, sql);

	if (res == NULL || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) < 1) {
		char msg[512];

		snprintf(msg, sizeof(msg), "%s", res ? PQresultErrorMessage(res) : PQerrorMessage(conn));
		PQclear(res);
		ck_abort_msg("query \"%s\" failed: %s", sql, msg);
	}
	if (PQgetisnull(res, 0, 0))
		snprintf(buf, sizeof(buf), "(null)");
	else
		snprintf(buf, sizeof(buf), "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	return buf;
}

void pg_restart(const char *mode)
{
	const char *dir = getenv("PGV_TEST_DIR"), *bin = getenv("PGV_TEST_PGBIN"), *runas = getenv("PGV_TEST_RUNAS");
	char data[600], cmd[2400], pidfile[700];
	ck_assert_msg(dir && bin, "PGV_TEST_DIR and PGV_TEST_PGBIN: run through run.sh");
	snprintf(data, sizeof(data), "%s/pgdata", dir);
	/* as run.sh starts it (scripts/deps.sh pgv_pg_start): from a directory its user may read */
	snprintf(cmd, sizeof(cmd), "cd '%s' && %s%s%s '%s/pg_ctl' -D '%s' -l '%s/postgresql.log' -m %s -w -t 60 restart",
		 dir, runas && runas[0] ? "runuser -u " : "", runas && runas[0] ? runas : "",
		 runas && runas[0] ? " --" : "", bin, data, dir, mode);
	char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	ck_assert_int_eq(run_program(argv, NULL, "/dev/null", 90), 0);
	/* run.sh stops PostgreSQL by the pid it recorded at start: the new postmaster's */
	char line[32] = "";
	snprintf(pidfile, sizeof(pidfile), "%s/postmaster.pid", data);
	FILE *f = fopen(pidfile, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
	fclose(f);
	snprintf(pidfile, sizeof(pidfile), "%s.pid", data);
	f = fopen(pidfile, "w");
	ck_assert_ptr_nonnull(f);
	fputs(line, f);
	fclose(f);
	PQfinish(direct_conn);	/* the old server's: gone */
	direct_conn = NULL;
}

int pg_count_backends(const char *usename)
{
	const char *params[1] = { usename };
	PGresult *res;
	int n;

	if (direct_conn == NULL || PQstatus(direct_conn) != CONNECTION_OK) {
		PQfinish(direct_conn);
		direct_conn = pg_direct();
	}
	res = PQexecParams(direct_conn,
			   "SELECT count(*) FROM pg_stat_activity WHERE usename = $1"
			   " AND backend_type = 'client backend' AND pid <> pg_backend_pid()",
			   1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		char msg[512];

		snprintf(msg, sizeof(msg), "%s", PQresultErrorMessage(res));
		PQclear(res);
		ck_abort_msg("counting backends failed: %s", msg);
	}
	n = atoi(PQgetvalue(res, 0, 0));
	PQclear(res);
	return n;
}

int pg_wait_backends(const char *usename, int want, double timeout_s)
{
	double deadline = now_s() + timeout_s;
	int n;

	while ((n = pg_count_backends(usename)) != want && now_s() < deadline)
		sleep_ms(50);
	return n;
}

/* ---------------------------------------------------------------- fixtures */

const char *std_databases(void)
{
	static char buf[256];

	snprintf(buf, sizeof(buf), "pgvtest = host=127.0.0.1 port=%d dbname=pgvtest\n", pg_port());
	return buf;
}

const char *std_databases_unix(void)
{
	static char buf[600];

	snprintf(buf, sizeof(buf), "pgvtest = host=%s port=%d dbname=pgvtest\n", env_required("PGV_TEST_PGSOCKDIR"),
		 pg_port());
	return buf;
}

static void write_proc_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY);
	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	ck_assert_msg(write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write %s: %s", path, strerror(errno));
	close(fd);
}

int pgv_log_count(struct pgv *p, const char *needle)
{
	FILE *f = fopen(p->log, "re");
	char line[4096];
	int n = 0;

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strstr(line, needle) != NULL)
			n++;
	fclose(f);
	return n;
}

bool pgv_log_wait(struct pgv *p, const char *needle, double timeout_s)
{
	double deadline = now_s() + timeout_s;

	while (!pgv_log_contains(p, needle)) {
		if (now_s() >= deadline)
			return false;
		sleep_ms(20);
	}
	return true;
}

void pgv_expect_log(struct pgv *p, const char *needle, double timeout_s)
{
	ck_assert_msg(pgv_log_wait(p, needle, timeout_s), "no \"%s\" in pgvalve's log after %.1f s\n%s", needle,
		      timeout_s, pgv_log_tail(p, 1500));
}

void pgv_reload(struct pgv *p)
{
	int done = pgv_log_count(p, "configuration reloaded") + pgv_log_count(p, "reload failed, keeping");
	double deadline = now_s() + 5;

	ck_assert_int_eq(kill(p->pid, SIGHUP), 0);
	while (pgv_log_count(p, "configuration reloaded") + pgv_log_count(p, "reload failed, keeping") == done) {
		ck_assert_msg(now_s() < deadline, "no reload in the log 5 s after SIGHUP\n%s", pgv_log_tail(p, 1500));
		sleep_ms(20);
	}
}

void pgv_ini_replace(struct pgv *p, const char *from, const char *to)
{
	char text[8192], out[8400];
	snprintf(text, sizeof(text), "%s", read_file_tail(p->ini, sizeof(text) - 1));
	char *at = strstr(text, from);
	ck_assert_msg(at, "'%s' not in %s", from, p->ini);
	snprintf(out, sizeof(out), "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
	FILE *f = fopen(p->ini, "w");
	ck_assert_ptr_nonnull(f);
	fputs(out, f);
	fclose(f);
}

void enter_netns_with_migrate_req(void)
{
	if (unshare(CLONE_NEWNET) != 0) {
		/* Not root: a user namespace of our own may create one (same uid inside). */
		uid_t uid = getuid();
		gid_t gid = getgid();
		ck_assert_msg(unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0,
			      "cannot create a network namespace (%s): run as root or allow user namespaces",
			      strerror(errno));
		char map[64];
		write_proc_file("/proc/self/setgroups", "deny");
		snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
		write_proc_file("/proc/self/uid_map", map);
		snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
		write_proc_file("/proc/self/gid_map", map);
	}
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	ck_assert_int_ge(s, 0);
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	ck_assert_msg(ioctl(s, SIOCGIFFLAGS, &ifr) == 0, "SIOCGIFFLAGS lo: %s", strerror(errno));
	ifr.ifr_flags |= IFF_UP;
	ck_assert_msg(ioctl(s, SIOCSIFFLAGS, &ifr) == 0, "SIOCSIFFLAGS lo: %s", strerror(errno));
	close(s);
	write_proc_file("/proc/sys/net/ipv4/tcp_migrate_req", "1");
	ck_assert_str_eq(read_file_tail("/proc/sys/net/ipv4/tcp_migrate_req", 16), "1\n");
}

const char *std_userlist(void)
{
	static char buf[512];
	char md5[36];

	md5_secret("md5_user", "md5_pass", md5);
	snprintf(buf, sizeof(buf),
		 "\"scram_user\" \"scram_pass\"\n"
		 "\"md5_user\" \"%s\"\n"
		 "\"pgbench_user\" \"bench_pass\"\n", md5);
	return buf;
}

int pgv_pg_major(void)
{
	const char *v = getenv("PGV_TEST_PG_MAJOR");

	return v != NULL ? atoi(v) : 0;
}

bool pgv_pg_serves_tls(void)
{
	const char *v = getenv("PGV_TEST_PG_TLS");

	return v == NULL || strcmp(v, "0") != 0;
}

TCase *pgv_tcase_create(const char *name, double timeout_s)
{
	TCase *tc = tcase_create(name);

	tcase_add_checked_fixture(tc, NULL, pgv_teardown);
	tcase_set_timeout(tc, timeout_s);
	return tc;
}

void pgv_ensure_fixture(void)
{
	if (getenv("PGV_TEST_DIR") == NULL) {
		/* Not under run.sh: start over under it, with this binary as its argument. */
		char self[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

		if (n <= 0) {
			perror("readlink /proc/self/exe");
			exit(99);
		}
		self[n] = '\0';
		setenv("abs_top_srcdir", PGV_TEST_SRCDIR, 0);
		setenv("abs_top_builddir", PGV_TEST_BUILDDIR, 0);
		execlp("bash", "bash", PGV_TEST_SRCDIR "/test/integration/run.sh", self, (char *)NULL);
		perror("exec bash " PGV_TEST_SRCDIR "/test/integration/run.sh");
		exit(99);
	}
}

int pgv_run_suite(Suite *s)
{
	SRunner *sr;
	int failed;

	pgv_ensure_fixture();
	signal(SIGPIPE, SIG_IGN);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}

const char *pgv_cert(const char *name)
{
	static char bufs[8][600];
	static unsigned next;
	const char *dir = getenv("PGV_TEST_CERTDIR");
	ck_assert_msg(dir && *dir, "PGV_TEST_CERTDIR is not set: run.sh generates the certificates");
	char *b = bufs[next++ % 8];
	snprintf(b, sizeof(bufs[0]), "%s/%s", dir, name);
	return b;
}

const char *pgv_write_test_file(const char *prefix, const char *name, const char *text)
{
	static char bufs[4][600];
	static unsigned next;
	char *path = bufs[next++ % 4];
	snprintf(path, sizeof(bufs[0]), "%s/%s-%ld-%s", env_required("PGV_TEST_DIR"), prefix, (long)getpid(), name);
	FILE *f = fopen(path, "w");
	ck_assert_msg(f != NULL, "create %s: %s", path, strerror(errno));
	fputs(text, f);
	fclose(f);
	chmod(path, 0644);
	return path;
}

/* ---------------------------------------------------------------- roles_cluster.sh */

char roles_cluster_dir[600];
int roles_cluster_port;

void roles_cluster(const char *verb, int node)
{
	char script[700], nodebuf[16], out[700];
	snprintf(script, sizeof(script), "%s/test/integration/roles_cluster.sh", PGV_TEST_SRCDIR);
	snprintf(nodebuf, sizeof(nodebuf), "%d", node);
	snprintf(out, sizeof(out), "%s.%s%d.out", roles_cluster_dir, verb, node);
	char portbuf[16];
	snprintf(portbuf, sizeof(portbuf), "%d", roles_cluster_port);
	char *argv[] = { script, (char *)verb, roles_cluster_dir, strcmp(verb, "init") == 0 ? portbuf : nodebuf, NULL };
	if (strcmp(verb, "stopall") == 0)
		argv[3] = NULL;
	int rc = run_program(argv, NULL, out, 120);
	ck_assert_msg(rc == 0, "roles_cluster.sh %s %d: exit %d\n%s", verb, node, rc, read_file_tail(out, 3000));
}

void roles_cluster_start(void)
{
	snprintf(roles_cluster_dir, sizeof(roles_cluster_dir), "%s/roles.%d", getenv("PGV_TEST_DIR"), (int)getpid());
	roles_cluster_port = pgv_pick_port();
	roles_cluster("init", 0);
}

void roles_cluster_stop(void)
{
	roles_cluster("stopall", 0);
}

PGconn *roles_cluster_connect(int n)
{
	char conninfo[256];
	snprintf(conninfo, sizeof(conninfo), "host=127.0.0.%d port=%d dbname=postgres user=pgvadmin connect_timeout=5",
		 n + 1, roles_cluster_port);
	PGconn *c = PQconnectdb(conninfo);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "node%d: %s", n, PQerrorMessage(c));
	return c;
}

const char *pgv_login_message(const char *const kw[], const char *const val[], const char *user)
{
	static char msg[600];
	PGconn *c = PQconnectdbParams(kw, val, 0);
	const char *res = NULL;
	if (PQstatus(c) != CONNECTION_OK) {
		snprintf(msg, sizeof(msg), "%s", PQerrorMessage(c));
		res = msg;
	} else {
		ck_assert_str_eq(query_value(c, "SELECT current_user"), user);
	}
	PQfinish(c);
	return res;
}

const char *pgv_scrape_metrics(int port)
{
	static char buf[1 << 18];
	size_t used = 0;
	int fd = raw_connect(port);
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
	ck_assert(raw_send(fd, req, sizeof(req) - 1));
	for (;;) {
		ssize_t n = read(fd, buf + used, sizeof(buf) - 1 - used);
		if (n <= 0)
			break;
		used += (size_t)n;
	}
	buf[used] = '\0';
	close(fd);
	return buf;
}
