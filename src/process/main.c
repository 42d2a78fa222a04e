/*
 * main.c - start-up and shutdown: command line, config, privileges,
 * daemon mode, pidfile, then the event loop.
 *
 * Builds the process instance (pgv) from the config and tears it down in
 * reverse order on exit, so a sanitizer build reports real leaks only.
 */
#include "common.h"
#include "admin.h"
#include "auth_file.h"
#include "config.h"
#include "crypto.h"
#include "hba.h"
#include "tls.h"
#include "dns.h"
#include "drain.h"
#include "janitor.h"
#include "listener.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "metrics_http.h"
#include "netbuf.h"
#include "peer.h"
#include "pool.h"
#include "prepare.h"
#include "scram_cache.h"
#include "readiness.h"
#include "reload.h"
#include "replication.h"
#include "shard.h"
#include "sdnotify.h"
#include "supervisor.h"
#include "shared_pool.h"
#include "handover.h"
#include "varcache.h"
#include "session_set.h"
#include "roles.h"
#include "volatility.h"
#include "tenant.h"
#include "balance.h"
#include "notify.h"
#include "workers.h"

#include <event2/event.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <ares.h>
#include <openssl/crypto.h>
#include <pwd.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *out)
{
	fprintf(out,
		"%s is a PostgreSQL connection pooler, compatible with PgBouncer's configuration.\n\n"
		"Usage:\n"
		"  pgvalve [OPTION]... CONFIG_FILE\n\n"
		"Options:\n"
		"  -d, --daemon     run in the background (needs logfile or syslog)\n"
		"  -q, --quiet      do not log to stderr\n"
		"  -v, --verbose    more log output (repeat for more)\n"
		"  -u, --user=USER  switch to USER after start (required when started as root)\n"
		"  -w, --workers=N  N processes share the port (a number or auto; overrides workers)\n"
		"  -V, --version    print version and exit\n"
		"  -h, --help       print this help and exit\n\n"
		"Signals: SIGHUP reloads; SIGTERM exits when clients are gone (twice: now);\n"
		"SIGINT exits when servers are released; SIGQUIT exits now;\n"
		"SIGUSR1 pauses, SIGUSR2 resumes. With workers, send them to the pidfile's\n"
		"process (the supervisor): it passes them to every worker.\n",
		PGVALVE_VERSION_STRING);
}

/* PgBouncer's -V lines: the libraries as loaded at run time, and systemd support (sdnotify.c, always built in). */
static void print_version(void)
{
	printf("%s\n", PGVALVE_VERSION_STRING);
	printf("libevent %s\n", event_get_version());
	printf("adns: c-ares %s\n", ares_version(NULL));
	printf("tls: %s\n", OpenSSL_version(OPENSSL_VERSION));
	printf("systemd: yes\n");
}

static void drop_privileges(const char *user)
{
	struct passwd *pw = getpwnam(user);
	if (!pw)
		die("user \"%s\" does not exist", user);
	if (setgroups(0, NULL) < 0 && errno != EPERM)
		die("setgroups: %s", strerror(errno));
	if (initgroups(pw->pw_name, pw->pw_gid) < 0)
		die("initgroups: %s", strerror(errno));
	if (setgid(pw->pw_gid) < 0)
		die("setgid: %s", strerror(errno));
	if (setuid(pw->pw_uid) < 0)
		die("setuid: %s", strerror(errno));
}

static void daemonize(void)
{
	pid_t pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid > 0)
		_exit(0);
	if (setsid() < 0)
		die("setsid: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid > 0)
		_exit(0);
	int fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
}

static bool pidfile_written;

static void write_pidfile(const char *path)
{
	if (!path[0])
		return;
	FILE *f = fopen(path, "r");
	if (f) {
		long old = 0;
		if (fscanf(f, "%ld", &old) == 1 && old > 0 && kill((pid_t)old, 0) == 0)
			die("pidfile %s names a running process (%ld): is another pgvalve running?", path, old);
		fclose(f);
	}
	char tmp[1024];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		die("could not write pidfile %s: %s", tmp, strerror(errno));
	fprintf(f, "%d\n", (int)getpid());
	if (fclose(f) != 0 || rename(tmp, path) != 0)
		die("could not write pidfile %s: %s", path, strerror(errno));
	pidfile_written = true;
}

/* Removes the pidfile we wrote, unless another instance has written its own since. */
static void remove_pidfile(const char *path)
{
	if (!pidfile_written)
		return;
	char buf[32] = "";
	FILE *f = fopen(path, "r");
	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
	}
	if (atol(buf) == (long)getpid())
		unlink(path);
	pidfile_written = false;
}

/* After the loop: stop every feature and free what run_pooler() set up, in reverse. */
static void pooler_teardown(void)
{
	sdnotify_stop_status_timer();
	sdnotify_send_stopping("shutting down");
	metrics_http_stop();
	readiness_stop();
	drain_stop();
	janitor_stop();
	handover_stop();
	shared_pool_stop();
	listener_close();
	loop_cleanup();
	tenant_cleanup();	/* before the pools its lookups may be queued on */
	pool_free_all();
	roles_free_all();
	dns_shutdown();
	netbuf_global_cleanup();
	prepare_global_cleanup();
	volatility_cleanup();
	balance_cleanup();
	varcache_configure(NULL);
	if (pgv.auth)
		auth_store_free(pgv.auth);
	event_base_free(pgv.base);
	scram_cache_clear();
	crypto_cleanup();
	tls_cleanup();
	hba_free(pgv.hba);
	ident_free(pgv.ident);
	remove_pidfile(pgv.cfg->pidfile);
	config_free(pgv.cfg);
	pgv.cfg = NULL;
	workers_table_destroy();
	log_close();
}

/*
 * The pooler proper, in a single process or in a worker: everything from
 * the auth file to the event loop and back. Frees pgv.cfg on the way out.
 */
static int run_pooler(bool single, unsigned restarts)
{
	const struct config *cfg = pgv.cfg;

	/* Lists must exist before anything can be put in them. */
	instance_init();
	/* The features the core reaches only through its tables (instance.h, client.h, relay.h). */
	peer_register();
	admin_register();
	replication_register();
	shard_register();
	prepare_register();
	session_set_register();
	roles_register();
	balance_register();
	notify_register();
	tenant_register();

	if (cfg->auth_file[0]) {
		pgv.auth = auth_file_load(cfg->auth_file);
		if (pgv.auth)
			log_info("loaded %zu users from auth_file %s", auth_store_count(pgv.auth), cfg->auth_file);
	}

	if (cfg->auth_hba_file[0] && !(pgv.hba = hba_load(cfg->auth_hba_file)) && cfg->auth_type == AUTH_TYPE_HBA)
		die("could not load auth_hba_file %s", cfg->auth_hba_file);
	if (cfg->auth_ident_file[0])
		pgv.ident = ident_load(cfg->auth_ident_file);
	char tls_err[512];
	if (tls_configure(cfg, tls_err, sizeof(tls_err)) < 0)
		die("TLS configuration failed: %s", tls_err);
	loop_init();
	/* A worker starts with the supervisor's signals blocked: they are handled from here on. */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	netbuf_global_init(pgv.base, (uint32_t)cfg->pkt_buf);
	netbuf_set_loopcnt(cfg->sbuf_loopcnt);
	netbuf_set_write_chunk((uint32_t)cfg->tcp_socket_buffer);
	netbuf_set_client_limit((uint32_t)cfg->max_packet_size);
	char dns_err[512];
	if (dns_init(pgv.base, cfg, pool_dns_changed, dns_err, sizeof(dns_err)) < 0)
		die("%s", dns_err);
	varcache_configure(cfg->track_extra_parameters);
	session_set_check_config(cfg);
	admin_setup();
	pool_setup_databases();
	if (restarts > 0) {
		/*
		 * Forked from the supervisor's start-up config: catch up with the
		 * reloads since. If the file does not load now, serving with the
		 * start-up config (old users, old rules) would be wrong: exit, the
		 * supervisor tries again after its backoff.
		 */
		char err[512];
		if (reload_config(err, sizeof(err)) < 0)
			die("worker restart: the current configuration does not load (%s)", err);
		admin_control_restore();	/* what the console changed since (admin_state.h) */
	}
	if (listener_start() < 0) {
		listener_close();
		die("could not open the listening sockets");
	}
	metrics_carry_over();
	workers_announce_running();
	shared_pool_register();
	handover_register();
	janitor_start();
	readiness_start();
	metrics_http_start();
	/*
	 * Once every listener is open, the HTTP endpoint (metrics, probes)
	 * included: whoever waits for the pidfile may then connect to any of them.
	 */
	if (single)
		write_pidfile(cfg->pidfile);
	log_info("process up: %s, libevent %s, tls: %s", PGVALVE_VERSION_STRING, event_get_version(),
		 OpenSSL_version(OPENSSL_VERSION));
	/* Listening: systemd may start what comes After= us (Type=notify). */
	sdnotify_send_ready();
	sdnotify_start_status_timer(pgv.base);
	int rc = loop_run();

	log_info("shutting down");
	pooler_teardown();
	return rc;
}

/* In a forked worker (supervisor.c calls it): its own peer_id and sockets, then the pooler. */
static int worker_main(int worker, unsigned restarts)
{
	char err[256];
	workers_become(worker);
	pgv.next_conn_id = (uint64_t)worker << WORKERS_ID_SHIFT;	/* ids unique in the instance (workers.h) */
	/* The supervisor has no loop to notify from: worker 1 speaks for the instance. */
	sdnotify_set_enabled(worker == 1);
	pidfile_written = false;	/* the supervisor's, not ours to remove */
	if (workers_apply_config(pgv.cfg, err, sizeof(err)) < 0)
		die("%s", err);
	return run_pooler(false, restarts);
}

/* "auto" = 0, or 1..CONFIG_MAX_WORKERS; -1 if neither. */
static int parse_workers(const char *s)
{
	if (strcmp(s, "auto") == 0)
		return 0;
	char *end;
	errno = 0;
	long n = strtol(s, &end, 10);
	if (errno || end == s || *end || n < 1 || n > CONFIG_MAX_WORKERS)
		return -1;
	return (int)n;
}

/* The command line: pgvalve [options] config. */
struct cli {
	bool daemon_mode, quiet;
	int verbose, workers;
	const char *run_as;
	const char *config_path;
};

/* Parses argv into cli: -1 to go on, else the exit code (usage, --version, --help, an error). */
static int parse_command_line(int argc, char **argv, struct cli *cli)
{
	static const struct option long_opts[] = {
		{ "daemon", no_argument, NULL, 'd' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "user", required_argument, NULL, 'u' },
		{ "workers", required_argument, NULL, 'w' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	*cli = (struct cli){ .workers = -1 };
	while ((c = getopt_long(argc, argv, "dqvu:w:Vh", long_opts, NULL)) != -1) {
		switch (c) {
		case 'd': cli->daemon_mode = true; break;
		case 'q': cli->quiet = true; break;
		case 'v': cli->verbose++; break;
		case 'u': cli->run_as = optarg; break;
		case 'w':
			if ((cli->workers = parse_workers(optarg)) < 0) {
				fprintf(stderr, "pgvalve: --workers must be auto or a number from 1 to %d\n",
					CONFIG_MAX_WORKERS);
				return 1;
			}
			break;
		case 'V': print_version(); return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 1;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 1;
	}
	cli->config_path = argv[optind];
	return -1;
}

/* Privileges dropped, daemonized if asked, the log opened: what every process of the instance shares. */
static void become_the_instance(const struct cli *cli, const struct config *cfg)
{
	const char *run_as = cli->run_as;
	if (!run_as && cfg->user[0])
		run_as = cfg->user;
	/* Before any fork: every worker runs as the dropped user, and so does the supervisor. */
	if (geteuid() == 0) {
		if (!run_as)
			die("pgvalve should not run as root: use -u USER (or user = USER in the config)");
		drop_privileges(run_as);
	}
	if (cli->daemon_mode && !cfg->logfile[0] && !cfg->syslog)
		die("daemon mode needs a logfile or syslog");

	struct log_settings ls = {
		.logfile = cfg->logfile,
		.to_stderr = !cli->quiet && !cli->daemon_mode,
		.use_syslog = cfg->syslog,
		.syslog_ident = cfg->syslog_ident,
		.syslog_facility = cfg->syslog_facility,
		.verbose = MAX(cli->verbose, cfg->verbose),
	};
	pgv.log_to_stderr = ls.to_stderr;
	pgv.cli_verbose = cli->verbose;
	if (cli->daemon_mode)
		daemonize();
	if (log_setup(&ls) < 0)
		die("could not open logfile %s: %s", cfg->logfile, strerror(errno));
}

/*
 * Start-up errors go where the running process logs: stderr (unless -q)
 * and the logfile, with timestamp and PID. Before the privileges are
 * dropped, root only appends to a logfile that exists. Without a logfile
 * (none named yet, or it cannot be opened) stderr it is, -q or not: a
 * start-up error must be seen somewhere.
 */
static void log_open_early(const struct cli *cli, const char *logfile)
{
	struct log_settings ls = {
		.logfile = logfile,
		.to_stderr = !cli->quiet || !logfile[0],
		.verbose = cli->verbose,
		.existing_only = geteuid() == 0,
	};
	if (log_setup(&ls) < 0) {
		ls.logfile = "";
		ls.to_stderr = true;
		log_setup(&ls);
	}
}

/* Descriptors a process needs besides its clients and servers: listeners, logs, pipes, DNS, the console. */
#define FD_OVERHEAD 64

/*
 * The descriptor limit against max_client_conn, as PgBouncer logs it at
 * start: the soft limit is raised to the hard one first, then a process's
 * expected use (its share of max_client_conn with workers, every
 * database's servers at full pool and reserve) is logged, with a warning
 * when the limit cannot hold it. With workers, SO_REUSEPORT spreads
 * clients about evenly, not exactly: the estimate allows a quarter more.
 */
static void check_descriptor_limit(const struct config *cfg, int workers)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		struct rlimit raised = { rl.rlim_max, rl.rlim_max };
		if (setrlimit(RLIMIT_NOFILE, &raised) == 0)
			rl.rlim_cur = rl.rlim_max;
	}
	long long clients = cfg->max_client_conn;
	if (workers > 1)
		clients = (clients + workers - 1) / workers * 5 / 4;
	long long servers = 0;
	for (const struct db_config *dc = cfg->databases; dc; dc = dc->next) {
		int pool = dc->pool_size >= 0 ? dc->pool_size : cfg->default_pool_size;
		int reserve = dc->reserve_pool_size >= 0 ? dc->reserve_pool_size : cfg->reserve_pool_size;
		int cap = dc->max_db_connections >= 0 ? dc->max_db_connections : cfg->max_db_connections;
		servers += cap > 0 && cap < pool + reserve ? cap : pool + reserve;
	}
	long long need = clients + servers + FD_OVERHEAD;
	log_info("kernel file descriptor limit: %llu (hard: %llu); max_client_conn: %d, workers: %d, "
		 "expected use per process: %lld", (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max,
		 cfg->max_client_conn, workers, need);
	if (rl.rlim_cur != RLIM_INFINITY && (unsigned long long)need > (unsigned long long)rl.rlim_cur)
		log_warning("max_client_conn %d needs about %lld file descriptors per process, more than the limit %llu: "
			    "clients past it are refused; raise LimitNOFILE (ulimit -n), or workers",
			    cfg->max_client_conn, need, (unsigned long long)rl.rlim_cur);
}

int main(int argc, char **argv)
{
	struct cli cli;
	int rc = parse_command_line(argc, argv, &cli);
	if (rc >= 0)
		return rc;
	/* Before anything forks or opens a file: the inherited sockets are fds 3 and up. */
	sdnotify_init();

	struct config_error err;
	struct config *cfg = NULL;
	if (config_load(cli.config_path, &cfg, &err) < 0) {
		log_open_early(&cli, err.logfile);
		die("%s", err.message);
	}
	log_open_early(&cli, cfg->logfile);
	workers_set_command_line(cli.workers);
	workers_force_options(cfg);
	int workers = workers_resolve(cfg);
	if (workers_check_peer_ids(cfg, workers, err.message, sizeof(err.message)) < 0) {
		config_free(cfg);
		die("%s", err.message);
	}
	pgv.cfg = cfg;
	pgv.config_path = cli.config_path;
	pgv.config_generation = 1;
	check_descriptor_limit(cfg, workers);
	become_the_instance(&cli, cfg);

	/* Before the fork, so every worker gives an unknown name the same mock salt. */
	scram_cache_init_instance();
	if (workers == 1) {
		workers_table_create(1, 0);
		workers_become(1);
		return run_pooler(true, 0);
	}
	write_pidfile(cfg->pidfile);
	rc = supervisor_run(cfg, workers, worker_main);
	remove_pidfile(cfg->pidfile);
	config_free(cfg);
	pgv.cfg = NULL;
	log_close();
	return rc;
}
