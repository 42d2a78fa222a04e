/*
 * test_hostile.c - what a client that never logs in can do to pgvalve,
 * driven with raw sockets against a real PostgreSQL 15 (issue 13).
 *
 * Large startup packets (the buffer-growth bug that crashed the process),
 * PostgreSQL's startup length limit, NegotiateProtocolVersion for 3.x and
 * _pq_ options, control characters in logged client text, objects left
 * behind by logins that never finish, and a flood of connections that
 * never log in next to a client that did.
 */
#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#define DB "pgvtest"

/* ================================================================ raw helpers */

struct startup {
	unsigned char buf[20000];
	size_t len;
};

static void startup_begin(struct startup *s, uint32_t version)
{
	uint32_t v = htonl(version);
	s->len = 4;
	memcpy(s->buf + s->len, &v, 4);
	s->len += 4;
}

static void startup_add(struct startup *s, const char *name, const char *value)
{
	size_t n = strlen(name) + 1, v = strlen(value) + 1;
	ck_assert(s->len + n + v + 1 < sizeof(s->buf));
	memcpy(s->buf + s->len, name, n);
	s->len += n;
	memcpy(s->buf + s->len, value, v);
	s->len += v;
}

static void startup_end(struct startup *s)
{
	s->buf[s->len++] = '\0';
	uint32_t l = htonl((uint32_t)s->len);
	memcpy(s->buf, &l, 4);
}

/* One backend message: its type, and up to cap bytes of its body. Body length, or -1. */
static int read_msg(int fd, char *type, unsigned char *body, size_t cap, int timeout_ms)
{
	double deadline = now_s() + timeout_ms / 1000.0;
	unsigned char hdr[5];
	if (!raw_read_exact(fd, hdr, 5, deadline))
		return -1;
	uint32_t len = raw_get_u32(hdr + 1);
	if (len < 4 || len - 4 > cap)
		return -1;
	if (!raw_read_exact(fd, body, len - 4, deadline))
		return -1;
	*type = (char)hdr[0];
	return (int)(len - 4);
}

/* An ErrorResponse field ('C', 'M', ...) of body, or "". */
static const char *error_field(const unsigned char *body, int len, char code)
{
	int i = 0;
	while (i < len && body[i]) {
		char f = (char)body[i++];
		const char *v = (const char *)body + i;
		i += (int)strnlen(v, (size_t)(len - i)) + 1;
		if (f == code)
			return v;
	}
	return "";
}

/* ================================================================ large startup packets */

/*
 * Two ~6 KB startup packets in a row crashed the process: growing the
 * input buffer left its offsets uninitialised (valgrind sees it; the
 * sanitizer build, whose malloc fills memory with a pattern, may not).
 * Each packet must get an answer, and the pooler must keep serving.
 */
START_TEST(large_startup_packets)
{
	struct pgv p;
	pgv_start(&p, "auth_type = md5\n", std_databases(), std_userlist());
	char big[6001];
	memset(big, 'x', 6000);
	big[6000] = '\0';
	static struct startup s;
	startup_begin(&s, 196608);
	startup_add(&s, "user", "u");
	startup_add(&s, "database", DB);
	startup_add(&s, "application_name", big);
	startup_end(&s);
	for (int i = 0; i < 4; i++) {
		int fd = raw_connect(p.port);
		ck_assert(raw_send(fd, s.buf, s.len));
		unsigned char body[512];
		char type = 0;
		int n = read_msg(fd, &type, body, sizeof(body), 5000);
		ck_assert_msg(n >= 0 && (type == 'R' || type == 'E'), "startup %d of 6 KB got no answer (%d '%c')\n%s",
			      i + 1, n, type, pgv_log_tail(&p, 1500));
		close(fd);
	}
	/* Split in pieces that arrive one after another: the same. */
	int fd = raw_connect(p.port);
	for (size_t off = 0; off < s.len; off += 1000) {
		ck_assert(raw_send(fd, s.buf + off, s.len - off < 1000 ? s.len - off : 1000));
		sleep_ms(20);	/* pacing: each piece its own read */
	}
	unsigned char body[512];
	char type = 0;
	int n = read_msg(fd, &type, body, sizeof(body), 5000);
	ck_assert_int_ge(n, 0);
	ck_assert_msg(type == 'R', "split startup: '%c' %s", type, error_field(body, n, 'M'));
	close(fd);
	ck_assert(pgv_running(&p));
	struct raw_error err;
	ck_assert_int_eq(raw_login(p.port, DB, "md5_user", "md5_pass", &err), 0);
	pgv_stop(&p);
}
END_TEST

/* Over PostgreSQL's 10,000 bytes: PostgreSQL's words; at the limit: accepted. */
START_TEST(startup_packet_length_limit)
{
	struct pgv p;
	pgv_start(&p, "auth_type = md5\n", std_databases(), std_userlist());
	static struct startup s;
	static char value[12000];
	unsigned char body[512];
	char type = 0;

	/* 10,000 bytes exactly */
	startup_begin(&s, 196608);
	startup_add(&s, "user", "md5_user");
	startup_add(&s, "database", DB);
	size_t fill = 10000 - s.len - strlen("application_name") - 1 - 1 - 1;
	memset(value, 'a', fill);
	value[fill] = '\0';
	startup_add(&s, "application_name", value);
	startup_end(&s);
	ck_assert_uint_eq(s.len, 10000);
	int fd = raw_connect(p.port);
	ck_assert(raw_send(fd, s.buf, s.len));
	int n = read_msg(fd, &type, body, sizeof(body), 5000);
	ck_assert_int_ge(n, 0);
	ck_assert_msg(type == 'R', "a 10,000-byte startup packet was refused: '%c' %s", type,
		      error_field(body, n, 'M'));
	close(fd);

	/* 10,001 bytes */
	startup_begin(&s, 196608);
	startup_add(&s, "user", "md5_user");
	startup_add(&s, "database", DB);
	value[fill] = 'a';
	value[fill + 1] = '\0';
	startup_add(&s, "application_name", value);
	startup_end(&s);
	ck_assert_uint_eq(s.len, 10001);
	fd = raw_connect(p.port);
	raw_send(fd, s.buf, s.len);
	n = read_msg(fd, &type, body, sizeof(body), 5000);
	ck_assert_int_ge(n, 0);
	ck_assert_int_eq(type, 'E');
	ck_assert_str_eq(error_field(body, n, 'C'), "08P01");
	ck_assert_str_eq(error_field(body, n, 'M'), "invalid length of startup packet");
	ck_assert(raw_wait_closed(fd, 3000));
	close(fd);
	ck_assert(pgv_running(&p));
	pgv_stop(&p);
}
END_TEST

/* ================================================================ NegotiateProtocolVersion */

/* Sends a startup for md5_user@pgvtest with version and the extra (name, value) pairs. */
static int start_with_version(struct pgv *p, uint32_t version, const char *const *extra)
{
	static struct startup s;
	startup_begin(&s, version);
	startup_add(&s, "user", "md5_user");
	startup_add(&s, "database", DB);
	for (int i = 0; extra && extra[i]; i += 2)
		startup_add(&s, extra[i], extra[i + 1]);
	startup_end(&s);
	int fd = raw_connect(p->port);
	ck_assert(raw_send(fd, s.buf, s.len));
	return fd;
}

/* Reads messages up to ReadyForQuery; false on an error or anything broken. */
static bool read_to_ready(int fd)
{
	unsigned char body[4096];
	char type = 0;
	for (;;) {
		int n = read_msg(fd, &type, body, sizeof(body), 5000);
		if (n < 0 || type == 'E')
			return false;
		if (type == 'Z')
			return true;
	}
}

START_TEST(negotiate_protocol_version)
{
	struct pgv p;
	pgv_start(&p, "auth_type = trust\n", std_databases(), std_userlist());
	unsigned char body[512];
	char type = 0;

	/* 3.2 with an unknown protocol option: told 3.2 and the option's name, then logged in in 3.2 */
	const char *const opts[] = { "_pq_.pgv_test_option", "on", NULL };
	int fd = start_with_version(&p, (3u << 16) | 2, opts);
	int n = read_msg(fd, &type, body, sizeof(body), 5000);
	ck_assert_msg(n >= 0 && type == 'v', "expected NegotiateProtocolVersion, got '%c' (%d)\n%s", type, n,
		      pgv_log_tail(&p, 1000));
	uint32_t version, count;
	memcpy(&version, body, 4);
	memcpy(&count, body + 4, 4);
	ck_assert_uint_eq(ntohl(version), 196610);	/* 3.2, as a whole version number (libpq 18 reads it so) */
	ck_assert_uint_eq(ntohl(count), 1);
	ck_assert_int_eq(n, 8 + (int)strlen("_pq_.pgv_test_option") + 1);
	ck_assert_str_eq((const char *)body + 8, "_pq_.pgv_test_option");
	n = read_msg(fd, &type, body, sizeof(body), 5000);
	ck_assert_msg(n >= 4 && type == 'R', "after 'v': '%c'", type);
	ck_assert(read_to_ready(fd));
	char value[64];
	struct raw_error err;
	ck_assert_int_eq(raw_query(fd, "SELECT 40 + 2", value, sizeof(value), &err), 0);
	ck_assert_str_eq(value, "42");
	close(fd);

	/* 3.1 alone: told 3.0, no options */
	fd = start_with_version(&p, (3u << 16) | 1, NULL);
	n = read_msg(fd, &type, body, sizeof(body), 5000);
	ck_assert_int_eq(type, 'v');
	ck_assert_int_eq(n, 8);
	memcpy(&count, body + 4, 4);
	ck_assert_uint_eq(ntohl(count), 0);
	ck_assert(read_to_ready(fd));
	close(fd);

	/* 3.0 without options: no NegotiateProtocolVersion */
	fd = start_with_version(&p, 3u << 16, NULL);
	ck_assert_int_ge(read_msg(fd, &type, body, sizeof(body), 5000), 0);
	ck_assert_int_eq(type, 'R');
	close(fd);

	/* another major version: PostgreSQL's error */
	fd = start_with_version(&p, 4u << 16, NULL);
	n = read_msg(fd, &type, body, sizeof(body), 5000);
	ck_assert_int_eq(type, 'E');
	ck_assert_str_eq(error_field(body, n, 'C'), "0A000");
	ck_assert_str_eq(error_field(body, n, 'M'), "unsupported frontend protocol 4.0: server supports 3.0 to 3.2");
	close(fd);
	pgv_stop(&p);
}
END_TEST

/* ================================================================ log escaping */

/* No line of the log starts with (or holds, after a timestamp) what a client forged. */
static void assert_no_forged_line(struct pgv *p, const char *marker)
{
	FILE *f = fopen(p->log, "re");
	ck_assert_ptr_nonnull(f);
	char line[8192];
	while (fgets(line, sizeof(line), f)) {
		/* Every line must start as pgvalve writes them: "YYYY-MM-DD ". */
		ck_assert_msg(strlen(line) > 11 && line[4] == '-' && line[7] == '-' && line[10] == ' ',
			      "a log line not written by pgvalve: %s", line);
		ck_assert_msg(strncmp(line, marker, strlen(marker)) != 0, "forged log line: %s", line);
	}
	fclose(f);
}

START_TEST(log_escapes_client_text)
{
	struct pgv p;
	pgv_start(&p, "auth_type = md5\nlog_connections = 1\nlog_pooler_errors = 1\n", std_databases(),
		  std_userlist());
	struct raw_error err;
	/* a user name with a new line: logged at the login attempt */
	raw_login(p.port, DB, "evil\nFORGED 2026-01-01 LOG user", "x", &err);
	/* a database name with a carriage return and an escape sequence */
	raw_login(p.port, "db\r\nFORGED\x1b[2J", "md5_user", "md5_pass", &err);
	/* a startup parameter name: in "unsupported startup parameter" */
	const char *const bad_param[] = { "x\nFORGED param", "1", NULL };
	raw_login_ex(p.port, DB, "md5_user", "md5_pass", bad_param, &err, NULL);
	ck_assert_str_eq(err.sqlstate, "08P01");
	/* application_name with NEL (U+0085) */
	const char *const app[] = { "application_name", "app\xc2\x85" "FORGED nel", NULL };
	ck_assert_int_eq(raw_login_ex(p.port, DB, "md5_user", "md5_pass", app, &err, NULL), 0);
	pgv_expect_log(&p, "evil\\nFORGED 2026-01-01 LOG user", 5);
	pgv_expect_log(&p, "db\\r\\nFORGED\\x1b[2J", 5);
	pgv_expect_log(&p, "unsupported startup parameter: x\\nFORGED param", 5);
	assert_no_forged_line(&p, "FORGED");
	pgv_stop(&p);
}
END_TEST

/* ================================================================ nothing left behind */

static int rows_of(PGconn *admin, const char *sql)
{
	PGresult *r = PQexec(admin, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(admin));
	int n = PQntuples(r);
	PQclear(r);
	return n;
}

/* SHOW LISTS "used_clients" (= every client socket, the console included). */
static int used_clients(PGconn *admin)
{
	PGresult *r = PQexec(admin, "SHOW LISTS");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	int n = -1;
	for (int i = 0; i < PQntuples(r); i++)
		if (strcmp(PQgetvalue(r, i, 0), "used_clients") == 0)
			n = atoi(PQgetvalue(r, i, 1));
	PQclear(r);
	return n;
}

/*
 * Logins for random databases (made from "*") and random users that never
 * authenticate: given up at once, refused a wrong password, or left to
 * client_login_timeout. Afterwards SHOW DATABASES/POOLS/USERS are as before.
 */
START_TEST(failed_logins_leave_nothing)
{
	char dbs[512];
	snprintf(dbs, sizeof(dbs), "%s* = host=127.0.0.1 port=%s\n", std_databases(), getenv("PGV_TEST_PGPORT"));
	char users[1024];
	snprintf(users, sizeof(users), "%s\"admin_u\" \"admin_pass\"\n", std_userlist());
	struct pgv p;
	pgv_start(&p, "auth_type = md5\nadmin_users = admin_u\nclient_login_timeout = 2\nlog_connections = 0\n"
		  "max_client_conn = 1000\n", dbs, users);
	/* a real login first, so its pool is part of "before" */
	struct raw_error err;
	ck_assert_int_eq(raw_login(p.port, DB, "md5_user", "md5_pass", &err), 0);
	PGconn *admin = pgv_connect(&p, "pgbouncer", "admin_u", "admin_pass");
	int dbs0 = rows_of(admin, "SHOW DATABASES"), pools0 = rows_of(admin, "SHOW POOLS");
	int users0 = rows_of(admin, "SHOW USERS");

	enum { N = 300 };
	static int held[N];
	int nheld = 0;
	for (int i = 0; i < N; i++) {
		char db[32], user[32];
		snprintf(db, sizeof(db), "rnd_db_%d", i % 3 == 0 ? i : i % 7);
		snprintf(user, sizeof(user), "rnd_user_%d", i);
		static struct startup s;
		startup_begin(&s, 196608);
		startup_add(&s, "user", i % 5 == 0 ? "md5_user" : user);
		startup_add(&s, "database", db);
		startup_end(&s);
		int fd = raw_connect(p.port);
		ck_assert(raw_send(fd, s.buf, s.len));
		if (i % 3 == 1) {
			/* a wrong password */
			unsigned char body[64];
			char type = 0;
			ck_assert_int_ge(read_msg(fd, &type, body, sizeof(body), 5000), 0);
			ck_assert_int_eq(type, 'R');
			static const char pw[] = "pmd50123456789abcdef0123456789abcdef";
			unsigned char msg[64];
			msg[0] = 'p';
			uint32_t l = htonl((uint32_t)(4 + sizeof(pw) - 1));
			memcpy(msg + 1, &l, 4);
			memcpy(msg + 5, pw + 1, sizeof(pw) - 1);
			raw_send(fd, msg, 5 + sizeof(pw) - 1);
			close(fd);
		} else if (i % 3 == 2 && nheld < N) {
			held[nheld++] = fd;	/* left to client_login_timeout */
		} else {
			close(fd);
		}
	}
	/* the held ones are cut off by client_login_timeout (2 s) */
	for (int i = 0; i < nheld; i++) {
		ck_assert_msg(raw_wait_closed(held[i], 8000), "a login was not ended by client_login_timeout");
		close(held[i]);
	}
	/* the closes are read at once; 5 s on a loaded machine */
	double t0 = now_s();
	while (used_clients(admin) > 1 && now_s() - t0 < 5)
		sleep_ms(100);
	ck_assert_int_eq(used_clients(admin), 1);
	ck_assert_int_eq(rows_of(admin, "SHOW DATABASES"), dbs0);
	ck_assert_int_eq(rows_of(admin, "SHOW POOLS"), pools0);
	ck_assert_int_eq(rows_of(admin, "SHOW USERS"), users0);
	/* and a good login to a new auto-database still works and stays */
	ck_assert_int_eq(raw_login(p.port, "postgres", "md5_user", "md5_pass", &err), 0);
	ck_assert_int_eq(rows_of(admin, "SHOW DATABASES"), dbs0 + 1);
	PQfinish(admin);
	ck_assert(pgv_running(&p));
	pgv_stop(&p);
}
END_TEST

/* ================================================================ pre-login flood */

static double median(double *v, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
			double t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return v[n / 2];
}

/* Median round trip of `rounds` SELECT 1 on a logged-in raw socket, in ms. */
static double query_latency_ms(int fd, int rounds)
{
	static double t[400];
	char value[16];
	struct raw_error err;
	for (int i = 0; i < rounds; i++) {
		double t0 = now_s();
		ck_assert_int_eq(raw_query(fd, "SELECT 1", value, sizeof(value), &err), 0);
		t[i] = (now_s() - t0) * 1000;
	}
	return median(t, rounds);
}

/*
 * Thousands of connections that send nothing, and a hundred that send
 * their startup packet one byte every 300 ms, leave a logged-in client's
 * latency within a small factor of normal, and all of them are cut off
 * by client_login_timeout.
 */
START_TEST(pre_login_flood_does_not_starve)
{
	enum { SILENT = 4900, SLOW = 100 };	/* the 5,000 of issue 13 */
	raise_descriptor_limit(SILENT + SLOW + 100);
	struct pgv p;
	pgv_start(&p, "auth_type = md5\nmax_client_conn = 5200\nclient_login_timeout = 4\ntcp_defer_accept = 0\n"
		  /* a burst of 4,900 connects must not overflow the accept queue (the kernel would delay some) */
		  "listen_backlog = 4096\n"
		  "log_connections = 0\nlog_disconnections = 0\nlog_pooler_errors = 0\n", std_databases(),
		  std_userlist());
	struct raw_error err;
	int fd = -1;
	ck_assert_int_eq(raw_login_ex(p.port, DB, "md5_user", "md5_pass", NULL, &err, &fd), 0);
	double before = query_latency_ms(fd, 200);

	static int silent[SILENT], slow[SLOW];
	double t_open = now_s();
	for (int i = 0; i < SILENT; i++)
		silent[i] = raw_connect(p.port);
	for (int i = 0; i < SLOW; i++)
		slow[i] = raw_connect(p.port);
	static struct startup s;
	startup_begin(&s, 196608);
	startup_add(&s, "user", "md5_user");
	startup_add(&s, "database", DB);
	startup_end(&s);
	/* while the slow ones trickle, measure the logged-in client */
	static double lat[300];
	int nlat = 0;
	for (size_t b = 0; b < 8 && b < s.len; b++) {
		for (int i = 0; i < SLOW; i++)
			send(slow[i], s.buf + b, 1, MSG_NOSIGNAL);
		for (int k = 0; k < 30 && nlat < 300; k++) {
			char value[16];
			double t0 = now_s();
			ck_assert_int_eq(raw_query(fd, "SELECT 1", value, sizeof(value), &err), 0);
			lat[nlat++] = (now_s() - t0) * 1000;
			sleep_ms(10);	/* pacing the samples */
		}
	}
	double during = median(lat, nlat);
	fprintf(stderr, "pre_login_flood: median SELECT 1 %.3f ms before, %.3f ms with %d silent + %d slow logins\n",
		before, during, SILENT, SLOW);
	ck_assert_msg(during <= 10 * before + 5, "latency %.3f ms with the flood, %.3f ms before", during, before);

	/* every one of them is cut off by client_login_timeout (4 s from its connect) */
	for (int i = 0; i < SILENT; i++) {
		int left = (int)((t_open + 4 + 10 - now_s()) * 1000);
		ck_assert_msg(raw_wait_closed(silent[i], left > 100 ? left : 100),
			      "silent connection %d still open after client_login_timeout", i);
		close(silent[i]);
	}
	for (int i = 0; i < SLOW; i++) {
		ck_assert_msg(raw_wait_closed(slow[i], 3000), "slow login %d still open", i);
		close(slow[i]);
	}
	/* the logged-in client is still served */
	char value[16];
	ck_assert_int_eq(raw_query(fd, "SELECT 7", value, sizeof(value), &err), 0);
	ck_assert_str_eq(value, "7");
	close(fd);
	pgv_stop(&p);
}
END_TEST

/* Descriptors pgvalve holds now (its /proc entry). */
static int pgv_open_fds(const struct pgv *p)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)p->pid);
	return dir_entry_count(path);
}

/* Median milliseconds of n fresh md5 logins (each connects, logs in, closes). */
static double login_latency_ms(int port, int n)
{
	double t[64];
	struct raw_error err;
	ck_assert_int_le(n, 64);
	for (int i = 0; i < n; i++) {
		memset(&err, 0, sizeof(err));
		double t0 = now_s();
		ck_assert_msg(raw_login(port, DB, "md5_user", "md5_pass", &err) == 0, "login %d: %s", i, err.message);
		t[i] = (now_s() - t0) * 1000;
	}
	return median(t, n);
}

/*
 * A storm of connections that ask for TLS, get 'S', send the first 69
 * bytes of a ClientHello whose record announces 512, and stop; and of
 * connections that send nothing at all. Other clients' logins go on at
 * their usual speed, and client_login_timeout frees every descriptor the
 * storm took (pgvalve's own count, from /proc, back where it was).
 */
START_TEST(half_tls_handshake_storm)
{
	enum { HALF = 3000, SILENT = 1500 };
	raise_descriptor_limit(HALF + SILENT + 100);
	const char *certs = getenv("PGV_TEST_CERTDIR");
	ck_assert_ptr_nonnull(certs);
	char ini[1024];
	snprintf(ini, sizeof(ini),
		 "auth_type = md5\nmax_client_conn = 5000\nclient_login_timeout = 6\ntcp_defer_accept = 0\n"
		 "listen_backlog = 4096\nclient_tls_sslmode = allow\nclient_tls_key_file = %s/server.key\n"
		 "client_tls_cert_file = %s/server.crt\n"
		 "log_connections = 0\nlog_disconnections = 0\nlog_pooler_errors = 0\n", certs, certs);
	struct pgv p;
	pgv_start(&p, ini, std_databases(), std_userlist());
	double before = login_latency_ms(p.port, 20);
	int fds_before = pgv_open_fds(&p);
	ck_assert_int_gt(fds_before, 0);

	static int half[HALF], silent[SILENT];
	double t_open = now_s();
	unsigned char req[8];
	raw_put_u32(req, 8);
	raw_put_u32(req + 4, 80877103);	/* SSLRequest */
	for (int i = 0; i < HALF; i++) {
		half[i] = raw_connect(p.port);
		ck_assert(raw_send(half[i], req, sizeof(req)));
	}
	for (int i = 0; i < SILENT; i++)
		silent[i] = raw_connect(p.port);
	/* a TLS 1.2 record (0x16 0x0303) announcing 512 bytes, a ClientHello (type 1) announcing 508 */
	unsigned char hello[69] = { 0x16, 0x03, 0x03, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03 };
	for (size_t b = 11; b < sizeof(hello); b++)
		hello[b] = (unsigned char)(b * 37);
	for (int i = 0; i < HALF; i++) {
		char answer = 0;
		ck_assert_msg(raw_read_exact(half[i], &answer, 1, now_s() + 10) && answer == 'S',
			      "connection %d: no 'S' to its SSLRequest", i);
		ck_assert(raw_send(half[i], hello, sizeof(hello)));
	}
	double opened = now_s() - t_open;
	double during = login_latency_ms(p.port, 20);
	int fds_during = pgv_open_fds(&p);
	for (int k = 0; k < 30 && fds_during < fds_before + (HALF + SILENT) * 9 / 10; k++) {
		sleep_ms(100);	/* the silent ones still in the accept queue are taken a few at a time */
		fds_during = pgv_open_fds(&p);
	}
	fprintf(stderr, "half_tls_storm: %d half handshakes + %d silent opened in %.2f s; pgvalve holds %d descriptors "
		"(%d before); median login %.2f ms before, %.2f ms during\n",
		HALF, SILENT, opened, fds_during, fds_before, before, during);
	/* the storm is really held (most of it: the first ones may be cut already if opening was slow) */
	ck_assert_msg(opened > 3 || fds_during >= fds_before + (HALF + SILENT) * 9 / 10,
		      "pgvalve holds %d descriptors during the storm, %d before", fds_during, fds_before);
	ck_assert_msg(during <= 10 * before + 20, "login %.2f ms during the storm, %.2f ms before", during, before);

	/* client_login_timeout (6 s from each connect) closes every one of them */
	for (int i = 0; i < HALF; i++) {
		int left = (int)((t_open + 6 + 10 - now_s()) * 1000);
		ck_assert_msg(raw_wait_closed(half[i], left > 100 ? left : 100),
			      "half handshake %d still open after client_login_timeout", i);
		close(half[i]);
	}
	for (int i = 0; i < SILENT; i++) {
		ck_assert_msg(raw_wait_closed(silent[i], 3000), "silent connection %d still open", i);
		close(silent[i]);
	}
	int fds_after = -1;
	for (int k = 0; k < 50; k++) {	/* the close reaches the janitor's next pass at most 1 s later */
		fds_after = pgv_open_fds(&p);
		if (fds_after <= fds_before + 2)
			break;
		sleep_ms(100);	/* polling pgvalve's descriptor count */
	}
	ck_assert_msg(fds_after <= fds_before + 2, "pgvalve holds %d descriptors after the storm, %d before",
		      fds_after, fds_before);
	pgv_stop(&p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hostile");
	struct {
		const char *name;
		const TTest *test;
		double timeout;
	} tests[] = {
		{ "large_startup_packets", large_startup_packets, 20 },
		{ "startup_packet_length_limit", startup_packet_length_limit, 20 },
		{ "negotiate_protocol_version", negotiate_protocol_version, 20 },
		{ "log_escapes_client_text", log_escapes_client_text, 20 },
		{ "failed_logins_leave_nothing", failed_logins_leave_nothing, 40 },
		{ "pre_login_flood", pre_login_flood_does_not_starve, 60 },
		{ "half_tls_handshake_storm", half_tls_handshake_storm, 90 },
	};
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		TCase *tc = pgv_tcase_create(tests[i].name, tests[i].timeout);
		tcase_add_test(tc, tests[i].test);
		suite_add_tcase(s, tc);
	}
	return pgv_run_suite(s);
}
