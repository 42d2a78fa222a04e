/*
 * admin_console.c - what the admin console's two test binaries
 * (test_admin_show, test_admin_control) share: the users and connections
 * they log in with, running console commands and checking their tags and
 * errors, reading SHOW results, waiting on queries a PAUSE holds,
 * and capturing notices. Every function fails the running Check test
 * itself when what it expects does not hold.
 */
#include "admin_console.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---------------------------------------------------------------- fixtures */

/* The standard users plus an admin, a stats user and a user in neither list. */
const char *userlist(void)
{
	static char buf[1024];
	snprintf(buf, sizeof(buf),
		 "%s\"admin_u\" \"admin_pass\"\n\"stats_u\" \"stats_pass\"\n\"plain_u\" \"plain_pass\"\n",
		 std_userlist());
	return buf;
}

int pg_port_env(void)
{
	const char *v = getenv("PGV_TEST_PGPORT");
	ck_assert_ptr_nonnull(v);
	return atoi(v);
}

PGconn *connect_ok(struct pgv *p, const char *dbname, const char *user, const char *password)
{
	PGconn *c = pgv_connect(p, dbname, user, password);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "connect %s@%s: %s\n%s", user, dbname, PQerrorMessage(c),
		      pgv_log_tail(p, 1500));
	return c;
}

/* Notices and unsolicited errors the test does not look at stay off the test's output. */
void quiet_notice(void *arg, const PGresult *res)
{
	(void)arg;
	(void)res;
}

PGconn *admin_conn(struct pgv *p)
{
	PGconn *a = connect_ok(p, "pgbouncer", "admin_u", "admin_pass");
	PQsetNoticeReceiver(a, quiet_notice, NULL);
	return a;
}

PGconn *stats_conn(struct pgv *p)
{
	PGconn *s = connect_ok(p, "pgbouncer", "stats_u", "stats_pass");
	PQsetNoticeReceiver(s, quiet_notice, NULL);
	return s;
}

PGconn *client_conn(struct pgv *p)
{
	return connect_ok(p, DB, "scram_user", "scram_pass");
}

void exec_ok(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	ExecStatusType st = PQresultStatus(r);
	ck_assert_msg(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(c));
	PQclear(r);
}

/* The port this libpq connection uses on its side: SHOW CLIENTS' port column. */
int local_port(PGconn *c)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	ck_assert_int_eq(getsockname(PQsocket(c), (struct sockaddr *)&sa, &len), 0);
	return ntohs(sa.sin_port);
}

/* ---------------------------------------------------------------- console helpers */

/* A control command that must succeed with exactly this CommandComplete tag. */
void admin_ok(PGconn *a, const char *cmd, const char *tag)
{
	PGresult *r = PQexec(a, cmd);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s: %s %s", cmd, PQresStatus(PQresultStatus(r)),
		      PQerrorMessage(a));
	ck_assert_msg(strcmp(PQcmdStatus(r), tag) == 0, "%s: tag '%s', expected '%s'", cmd, PQcmdStatus(r), tag);
	PQclear(r);
}

void check_error(PGresult *r, const char *what, const char *sqlstate, const char *msg)
{
	const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
	const char *m = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
	const char *sev = PQresultErrorField(r, PG_DIAG_SEVERITY);
	ck_assert_msg(PQresultStatus(r) == PGRES_FATAL_ERROR, "%s: %s, expected an error '%s'", what,
		      PQresStatus(PQresultStatus(r)), msg);
	ck_assert_msg(sev && strcmp(sev, "ERROR") == 0, "%s: severity %s", what, sev ? sev : "(none)");
	ck_assert_msg(st && strcmp(st, sqlstate) == 0, "%s: SQLSTATE %s, expected %s (%s)", what, st ? st : "(none)",
		      sqlstate, m ? m : "");
	ck_assert_msg(m && strcmp(m, msg) == 0, "%s: message '%s', expected '%s'", what, m ? m : "(none)", msg);
}

/* A command that must fail with an ErrorResponse, leaving the console usable. */
void admin_err(PGconn *a, const char *cmd, const char *sqlstate, const char *msg)
{
	PGresult *r = PQexec(a, cmd);
	check_error(r, cmd, sqlstate, msg);
	PQclear(r);
	ck_assert_msg(PQstatus(a) == CONNECTION_OK, "%s closed the console", cmd);
	ck_assert_int_eq(PQtransactionStatus(a), PQTRANS_IDLE);
}

/* "invalid command '<q>', use SHOW HELP;" */
void admin_invalid(PGconn *a, const char *cmd)
{
	char msg[512];
	snprintf(msg, sizeof(msg), "invalid command '%s', use SHOW HELP;", cmd);
	admin_err(a, cmd, "08P01", msg);
}

PGresult *show(PGconn *a, const char *cmd)
{
	PGresult *r = PQexec(a, cmd);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s %s", cmd, PQresStatus(PQresultStatus(r)),
		      PQerrorMessage(a));
	ck_assert_str_eq(PQcmdStatus(r), "SHOW");
	return r;
}

static int colnum(const PGresult *r, const char *name)
{
	for (int i = 0; i < PQnfields(r); i++)
		if (strcmp(PQfname(r, i), name) == 0)
			return i;
	ck_abort_msg("no column %s", name);
	return -1;
}

/* A cell as text, NULL for SQL NULL. */
const char *cell(const PGresult *r, int row, const char *col)
{
	int c = colnum(r, col);
	ck_assert_msg(row >= 0 && row < PQntuples(r), "row %d of %d", row, PQntuples(r));
	return PQgetisnull(r, row, c) ? NULL : PQgetvalue(r, row, c);
}

long long icell(const PGresult *r, int row, const char *col)
{
	const char *v = cell(r, row, col);
	ck_assert_msg(v != NULL, "column %s is NULL", col);
	return strtoll(v, NULL, 10);
}

void expect_cell(const PGresult *r, int row, const char *col, const char *expected)
{
	const char *v = cell(r, row, col);
	if (expected == NULL)
		ck_assert_msg(v == NULL, "%s = '%s', expected NULL", col, v);
	else
		ck_assert_msg(v != NULL && strcmp(v, expected) == 0, "%s = '%s', expected '%s'", col,
			      v ? v : "NULL", expected);
}

void expect_icell(const PGresult *r, int row, const char *col, long long expected)
{
	long long v = icell(r, row, col);
	ck_assert_msg(v == expected, "%s = %lld, expected %lld", col, v, expected);
}

/* The first row whose col equals v (and col2 equals v2 when given); -1 if none. */
int find_row2(const PGresult *r, const char *col, const char *v, const char *col2, const char *v2)
{
	int c = colnum(r, col), c2 = col2 ? colnum(r, col2) : -1;
	for (int i = 0; i < PQntuples(r); i++) {
		if (PQgetisnull(r, i, c) || strcmp(PQgetvalue(r, i, c), v) != 0)
			continue;
		if (c2 >= 0 && (PQgetisnull(r, i, c2) || strcmp(PQgetvalue(r, i, c2), v2) != 0))
			continue;
		return i;
	}
	return -1;
}

int find_row(const PGresult *r, const char *col, const char *v)
{
	return find_row2(r, col, v, NULL, NULL);
}

int count_rows(const PGresult *r, const char *col, const char *v)
{
	int c = colnum(r, col), n = 0;
	for (int i = 0; i < PQntuples(r); i++)
		if (!PQgetisnull(r, i, c) && strcmp(PQgetvalue(r, i, c), v) == 0)
			n++;
	return n;
}

/* One value of a SHOW: the column col of the row where key_col = key ("" when absent). */
const char *show_value(PGconn *a, const char *cmd, const char *key_col, const char *key, const char *col)
{
	static char buf[1024];
	PGresult *r = show(a, cmd);
	int row = find_row(r, key_col, key);
	if (row < 0) {
		PQclear(r);
		ck_abort_msg("%s has no row %s = %s", cmd, key_col, key);
	}
	const char *v = cell(r, row, col);
	snprintf(buf, sizeof(buf), "%s", v ? v : "(null)");
	PQclear(r);
	return buf;
}

const char *config_value(PGconn *a, const char *key)
{
	return show_value(a, "SHOW CONFIG", "key", key, "value");
}

const char *state_value(PGconn *a, const char *key)
{
	return show_value(a, "SHOW STATE", "key", key, "value");
}

/* ---------------------------------------------------------------- async helpers */

/* True once the pending query on c can be read without blocking (or c broke). */
static bool ready_within(PGconn *c, int ms)
{
	double deadline = now_s() + ms / 1000.0;
	for (;;) {
		if (!PQconsumeInput(c) || !PQisBusy(c))
			return true;
		int left = (int)((deadline - now_s()) * 1000);
		if (left <= 0)
			return false;
		struct pollfd pfd = { .fd = PQsocket(c), .events = POLLIN };
		poll(&pfd, 1, left);
	}
}

/* The first result of c's pending query, which must come within ms; the rest is drained. */
PGresult *result_within(PGconn *c, int ms, const char *what)
{
	ck_assert_msg(ready_within(c, ms), "%s: no reply within %d ms", what, ms);
	PGresult *r = PQgetResult(c);
	ck_assert_msg(r != NULL, "%s: no result", what);
	for (;;) {
		if (!ready_within(c, 3000))
			ck_abort_msg("%s: reply not finished", what);
		PGresult *more = PQgetResult(c);
		if (!more)
			break;
		PQclear(more);
	}
	return r;
}

void send_query(PGconn *c, const char *sql)
{
	ck_assert_msg(PQsendQuery(c, sql) == 1, "send %s: %s", sql, PQerrorMessage(c));
}

/* A pending query must still be waiting after ms. */
void still_waiting(PGconn *c, int ms, const char *what)
{
	ck_assert_msg(!ready_within(c, ms), "%s completed, but it should still be waiting", what);
}

/* The pending query's single value must arrive within ms and equal expected. */
void expect_async_value(PGconn *c, int ms, const char *what, const char *expected)
{
	PGresult *r = result_within(c, ms, what);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", what, PQresultErrorMessage(r));
	ck_assert_str_eq(PQgetvalue(r, 0, 0), expected);
	PQclear(r);
}

void expect_async_tag(PGconn *c, int ms, const char *what, const char *tag)
{
	PGresult *r = result_within(c, ms, what);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s: %s %s", what, PQresStatus(PQresultStatus(r)),
		      PQresultErrorMessage(r));
	ck_assert_str_eq(PQcmdStatus(r), tag);
	PQclear(r);
}

/* Waits up to ms for pg_stat_activity to show n backends of user. */
void wait_backends(const char *user, int n, int ms)
{
	double deadline = now_s() + ms / 1000.0;
	int seen;
	while ((seen = pg_count_backends(user)) != n && now_s() < deadline)
		usleep(50 * 1000);
	ck_assert_msg(seen == n, "%d backends of %s, expected %d", seen, user, n);
}

/* ---------------------------------------------------------------- notices */

void capture_notice(void *arg, const PGresult *res)
{
	struct notice_log *l = arg;
	const char *f;
	l->n++;
	f = PQresultErrorField(res, PG_DIAG_SEVERITY);
	snprintf(l->severity, sizeof(l->severity), "%s", f ? f : "");
	f = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	snprintf(l->sqlstate, sizeof(l->sqlstate), "%s", f ? f : "");
	f = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	snprintf(l->message, sizeof(l->message), "%s", f ? f : "");
	f = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
	snprintf(l->detail, sizeof(l->detail), "%s", f ? f : "");
}
