/*
 * admin_console.h - the test kit test_admin_show.c and test_admin_control.c
 * share (admin_console.c): fixtures, console commands, SHOW results, waits
 * on held queries, notices. Each helper fails the running test itself.
 */
#ifndef PGVALVE_TEST_ADMIN_CONSOLE_H
#define PGVALVE_TEST_ADMIN_CONSOLE_H

#include "harness.h"

#define DB "pgvtest"
#define ADMIN_CFG "auth_type = md5\nadmin_users = admin_u\nstats_users = stats_u\n"
#define TXN ADMIN_CFG "pool_mode = transaction\n"

#define OID_TEXT 25
#define OID_INT4 23
#define OID_INT8 20
#define OID_NUMERIC 1700
#define OID_BYTEA 17

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---------------------------------------------------------------- fixtures */

/* The standard users plus admin_u (admin_users), stats_u (stats_users) and plain_u (neither). */
const char *userlist(void);
/* The test cluster's port (PGV_TEST_PGPORT). */
int pg_port_env(void);
PGconn *connect_ok(struct pgv *p, const char *dbname, const char *user, const char *password);
/* A notice receiver that drops everything. */
void quiet_notice(void *arg, const PGresult *res);
PGconn *admin_conn(struct pgv *p);	/* console as admin_u */
PGconn *stats_conn(struct pgv *p);	/* console as stats_u */
PGconn *client_conn(struct pgv *p);	/* DB as scram_user */
void exec_ok(PGconn *c, const char *sql);
/* The port this libpq connection uses on its side: SHOW CLIENTS' port column. */
int local_port(PGconn *c);

/* ---------------------------------------------------------------- console commands and SHOW results */

void admin_ok(PGconn *a, const char *cmd, const char *tag);
void check_error(PGresult *r, const char *what, const char *sqlstate, const char *msg);
void admin_err(PGconn *a, const char *cmd, const char *sqlstate, const char *msg);
void admin_invalid(PGconn *a, const char *cmd);
PGresult *show(PGconn *a, const char *cmd);
const char *cell(const PGresult *r, int row, const char *col);
long long icell(const PGresult *r, int row, const char *col);
void expect_cell(const PGresult *r, int row, const char *col, const char *expected);
void expect_icell(const PGresult *r, int row, const char *col, long long expected);
int find_row2(const PGresult *r, const char *col, const char *v, const char *col2, const char *v2);
int find_row(const PGresult *r, const char *col, const char *v);
int count_rows(const PGresult *r, const char *col, const char *v);
/* Valid until the next call: one static buffer. */
const char *show_value(PGconn *a, const char *cmd, const char *key_col, const char *key, const char *col);
const char *config_value(PGconn *a, const char *key);
const char *state_value(PGconn *a, const char *key);

/* ---------------------------------------------------------------- queries a PAUSE holds */

PGresult *result_within(PGconn *c, int ms, const char *what);
void send_query(PGconn *c, const char *sql);
void still_waiting(PGconn *c, int ms, const char *what);
void expect_async_value(PGconn *c, int ms, const char *what, const char *expected);
void expect_async_tag(PGconn *c, int ms, const char *what, const char *tag);
void wait_backends(const char *user, int n, int ms);

/* ---------------------------------------------------------------- notices */

/* The last notice a connection got through capture_notice, and how many. */
struct notice_log {
	int n;
	char severity[16], sqlstate[8], message[256], detail[2048];
};

/* A notice receiver (arg: struct notice_log *). */
void capture_notice(void *arg, const PGresult *res);

#endif
