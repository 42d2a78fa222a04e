/*
 * limits_kit.h - what test_limits, test_timeouts and test_server_lifecycle
 * share (limits_kit.c): timing checks, libpq and raw-protocol clients,
 * queries on PostgreSQL directly (backends counted, terminated, waited
 * for), queries run in parallel with the backend counts watched, and a
 * forked TCP proxy standing in for a database that goes away.
 */
#ifndef PGVALVE_TEST_LIMITS_KIT_H
#define PGVALVE_TEST_LIMITS_KIT_H

#include "harness.h"

#include <stdbool.h>
#include <sys/types.h>

#define DB "pgvtest"
#define BASE "auth_type = md5\n"
#define TXN BASE "pool_mode = transaction\n"
/* The janitor's period, and what a busy two-core machine may add on top. */
#define TICK_S (1.0 / 3.0)
#define SLACK_S 1.5
/* Not before this share of a timeout's value. */
#define EARLY_SHARE 0.65

struct watch {
	double t0, last;
	int n;
	const char *user[3];
	int peak[3];
	double first[3][8];	/* seconds after t0 when the count first reached k, -1 never */
};

struct outcome {
	PGconn *c;
	double sent;		/* now_s() when sent */
	double at;		/* seconds after sent when the first result came, -1 not yet */
	bool done, ok;
	char sqlstate[6], severity[16], msg[256], value[128];
};

/*
 * Raw clients driven together: each may send `sql` once (every <= 0) or
 * every `every` seconds while not waiting for an answer, and records the
 * first ErrorResponse, NOTICEs, ReadyForQuerys and when the socket closed.
 */
struct rcli {
	int fd;
	double t0;		/* elapsed times count from here */
	const char *sql;
	double every;
	double next;
	bool busy, sent_once, closed;
	int ready, notices;
	double err_at, closed_at;	/* seconds after t0, -1 never */
	struct raw_error err;
	unsigned char buf[16384];
	size_t len;
};

enum proxy_mode {
	PX_FORWARD,		/* relay to PostgreSQL */
	PX_HOLD_CANCELS,	/* relay, but CancelRequests are held open and never delivered */
	PX_CLOSE,		/* accept and close at once */
};

struct proxy {
	pid_t pid;
	int port;
	int count_fd;		/* one byte per accepted connection */
	int accepts;
};

struct aconn {
	PGconn *c;
	double start, at;	/* at: seconds after start when it ended, -1 still going */
	bool ok;
	PostgresPollingStatusType last;
	char err[512];
};

void sleep_until(double t);
int pg_port(void);
void assert_fired(const char *what, double at, double value);
const char *userlist(void);
void add_db(char *buf, size_t size, const char *name, int port, const char *extra);
PGconn *connect_ok(struct pgv *p, const char *dbname, const char *user, const char *password);
PGconn *scram(struct pgv *p, const char *dbname);
void exec_ok(PGconn *c, const char *sql);
void quiet_notice(void *arg, const PGresult *res);
void count_queued_notice(void *arg, const PGresult *res);
PGconn *direct(void);
void direct_exec(const char *sql);
int direct_int(const char *sql);
bool backend_alive(int pid);
int terminate_backends(const char *usename, bool idle_only);
double wait_backends(const char *usename, int want, double timeout_s);
void clean_users(void);
void watch_init(struct watch *w, const char *u0, const char *u1, const char *u2);
void send_query(struct outcome *o, PGconn *c, const char *sql);
void collect(struct outcome *o, int n, double timeout_s, struct watch *w);
void assert_ok(const struct outcome *o, const char *what, const char *value);
void assert_fatal(const struct outcome *o, const char *what, const char *reason);
void assert_raw_fatal(const struct raw_error *err, const char *what, const char *reason);
int raw_client(struct pgv *p, const char *dbname, const char *user, const char *password);
void raw_query_ok(int fd, const char *sql, const char *expect);
void rcli_init(struct rcli *r, int fd, const char *sql, double every);
void rcli_run(struct rcli *v, int n, double seconds);
int listen_port_in_range(int *port_out);
void proxy_start(struct proxy *px, int port, enum proxy_mode mode, int delay_ms);
int proxy_accepts(struct proxy *px);
void proxy_stop(struct proxy *px);
void aconn_start(struct aconn *a, struct pgv *p, const char *dbname, const char *user, const char *password);
int aconn_step(struct aconn *v, int n, int wait_ms);
bool show_databases_lists(PGconn *admin, const char *name);
int raw_startup_until_password(int port, const char *user, const char *dbname);

#endif
