/*
 * test_ldap.c - auth_type ldap and ldap lines of auth_hba_file (issue 44,
 * ldap_auth.h) against a real OpenLDAP slapd that each test starts in a
 * directory of its own (mdb backend, dc=example,dc=com, users under
 * ou=people with userPassword) on a port of its own, and stops after:
 * simple bind over TLS, search+bind (ldapbinddn, ldapurl,
 * ldapsearchfilter), wrong passwords and unknown users, the three ways
 * the server side logs in afterwards (the LDAP password, auth_file, a
 * forced user), a directory that hangs or goes away while other clients
 * carry on, and 100 logins at once.
 *
 * A build with LDAP needs Debian's slapd: without it every test fails and
 * says so (CI installs it: scripts/deps.sh, test mode).
 */
#include "harness.h"
#include "autoconf.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define DB "pgvtest"

#ifdef HAVE_LDAP

#define BASE "ou=people,dc=example,dc=com"
#define BIND_SECRET "reader_Secret_7f3a"
#define SLAPD "/usr/sbin/slapd"
#define SLAPADD "/usr/sbin/slapadd"

struct slapd {
	pid_t pid;
	int port;
	int tls_port;			/* ldaps, when tls is set */
	bool tls;			/* run.sh's server certificate (IP:127.0.0.1), for ldaps and StartTLS */
	char dir[600];
};

/* The directory: scram_user and md5_user (PostgreSQL roles too), alice (no role), and the search account. */
static const char ldif[] =
	"dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\no: Example\ndc: example\n\n"
	"dn: ou=people,dc=example,dc=com\nobjectClass: organizationalUnit\nou: people\n\n"
	"dn: uid=scram_user," BASE "\nobjectClass: inetOrgPerson\nuid: scram_user\ncn: scram_user\nsn: s\n"
	"userPassword: scram_pass\n\n"
	"dn: uid=md5_user," BASE "\nobjectClass: inetOrgPerson\nuid: md5_user\ncn: md5_user\nsn: m\n"
	"userPassword: md5_user_ldap_pw\n\n"
	"dn: uid=alice," BASE "\nobjectClass: inetOrgPerson\nuid: alice\ncn: alice\nsn: a\nuserPassword: alice_pw\n\n"
	"dn: cn=reader,dc=example,dc=com\nobjectClass: person\ncn: reader\nsn: r\nuserPassword: " BIND_SECRET "\n";

static bool port_accepts(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ck_assert_msg(f != NULL, "cannot write %s", path);
	fputs(text, f);
	fclose(f);
}

/* Loads the directory with slapadd and starts slapd in the foreground; returns once it accepts. */
static void slapd_start(struct slapd *d)
{
	char conf[700], data[700], out[700], db[700], text[3072], url[160];

	ck_assert_msg(access(SLAPD, X_OK) == 0 && access(SLAPADD, X_OK) == 0,
		      "this build has LDAP but " SLAPD " is missing: install Debian's slapd "
		      "(scripts/deps.sh installs it in test mode)");
	if (d->dir[0] == '\0') {
		snprintf(d->dir, sizeof(d->dir), "%s/slapd-%ld", getenv("PGV_TEST_DIR"), (long)getpid());
		snprintf(db, sizeof(db), "%s/db", d->dir);
		ck_assert(mkdir(d->dir, 0700) == 0 && mkdir(db, 0700) == 0);
		snprintf(conf, sizeof(conf), "%s/slapd.conf", d->dir);
		snprintf(text, sizeof(text),
			 "include /etc/ldap/schema/core.schema\ninclude /etc/ldap/schema/cosine.schema\n"
			 "include /etc/ldap/schema/inetorgperson.schema\nmodulepath /usr/lib/ldap\nmoduleload back_mdb\n"
			 "pidfile %s/slapd.pid\ndatabase mdb\nmaxsize 10485760\nsuffix \"dc=example,dc=com\"\n"
			 "rootdn \"cn=admin,dc=example,dc=com\"\ndirectory %s\n"
			 "access to attrs=userPassword by anonymous auth by * none\naccess to * by * read\n",
			 d->dir, db);
		if (d->tls)
			snprintf(text + strlen(text), sizeof(text) - strlen(text),
				 "TLSCACertificateFile %s\nTLSCertificateFile %s\nTLSCertificateKeyFile %s\n",
				 pgv_cert("ca.crt"), pgv_cert("server.crt"), pgv_cert("server.key"));
		write_text(conf, text);
		snprintf(data, sizeof(data), "%s/data.ldif", d->dir);
		write_text(data, ldif);
		snprintf(out, sizeof(out), "%s/slapadd.out", d->dir);
		char *add[] = { SLAPADD, "-q", "-f", conf, "-l", data, NULL };
		ck_assert_msg(run_program(add, NULL, out, 30) == 0, "slapadd failed: %s", read_file_tail(out, 1500));
		d->port = pgv_pick_http_port(0);
		d->tls_port = d->tls ? pgv_pick_http_port(d->port) : 0;
	}
	snprintf(conf, sizeof(conf), "%s/slapd.conf", d->dir);
	snprintf(out, sizeof(out), "%s/slapd.out", d->dir);
	snprintf(url, sizeof(url), "ldap://127.0.0.1:%d/", d->port);
	if (d->tls)	/* 127.0.0.2 too: an address the certificate does not name */
		snprintf(url + strlen(url), sizeof(url) - strlen(url), " ldaps://127.0.0.1:%d/ ldaps://127.0.0.2:%d/",
			 d->tls_port, d->tls_port);
	char *argv[] = { SLAPD, "-f", conf, "-h", url, "-d", "stats", NULL };	/* stats: connections, TLS, binds */
	d->pid = run_program_background(argv, out);
	/* slapd starts in well under a second; 15 s on a loaded machine */
	double deadline = now_s() + 15;
	while (!port_accepts(d->port)) {
		ck_assert_msg(now_s() < deadline, "slapd does not accept on port %d: %s", d->port,
			      read_file_tail(out, 1500));
		sleep_ms(20);
	}
}

static void slapd_stop(struct slapd *d)
{
	if (d->pid > 0) {
		kill(d->pid, SIGCONT);
		stop_program(d->pid);
	}
	d->pid = 0;
}

/* The metrics port of the pgvalve tls_ini made last (picked after slapd listens, so never its ports). */
static int mport;

/* The ini lines of a TLS listener (clients choose) and a metrics endpoint, plus what is given. */
static const char *tls_ini(const char *extra)
{
	static char buf[4096];
	mport = pgv_pick_http_port(0);
	snprintf(buf, sizeof(buf), "client_tls_sslmode = prefer\nclient_tls_cert_file = %s\nclient_tls_key_file = %s\n"
		 "max_client_conn = 300\nauth_ldap_timeout = 2\nmetrics_port = %d\nmetrics_listen_addr = 127.0.0.1\n%s",
		 pgv_cert("server.crt"), pgv_cert("server.key"), mport, extra);
	return buf;
}

/* pgvalve_client_authentication_failures_total{method,cause} of the last pgvalve started. */
static double failures(const char *method, const char *cause)
{
	return pgv_auth_failures(mport, method, cause);
}

/* md5_user's auth_file line: the server side's secret for that user (PostgreSQL's md5_pass). */
static const char *md5_userlist(void)
{
	static char buf[128];
	char md5[36];
	md5_secret("md5_user", "md5_pass", md5);
	snprintf(buf, sizeof(buf), "\"md5_user\" \"%s\"\n", md5);
	return buf;
}

/* pgvalve with auth_type = hba and this hba text (and more ini lines). */
static void start_hba(struct pgv *p, const char *name, const char *hba_text, const char *more, const char *dbs)
{
	char extra[1200];
	snprintf(extra, sizeof(extra), "auth_type = hba\nauth_hba_file = %s\n%s", pgv_write_test_file("ldap", name, hba_text),
		 more);
	pgv_start(p, tls_ini(extra), dbs, md5_userlist());
}

/* pgvtest, and "forced", the same database logged in to as pgbench_user whoever the client is. */
static const char *databases(void)
{
	static char buf[512];
	snprintf(buf, sizeof(buf), "%sforced = host=127.0.0.1 port=%s dbname=pgvtest user=pgbench_user password=bench_pass\n",
		 std_databases(), getenv("PGV_TEST_PGPORT"));
	return buf;
}

static PGconn *login(struct pgv *p, const char *db, const char *user, const char *password, const char *sslmode)
{
	char ci[512];
	snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%d dbname=%s user=%s password=%s sslmode=%s connect_timeout=30",
		 p->port, db, user, password, sslmode);
	PGconn *c = PQconnectdb(ci);
	ck_assert_ptr_nonnull(c);
	return c;
}

/* Logs in and checks who PostgreSQL says the session belongs to. */
static void login_ok(struct pgv *p, const char *db, const char *user, const char *password, const char *sslmode,
		     const char *pg_user)
{
	PGconn *c = login(p, db, user, password, sslmode);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s@%s (%s): %s\n%s", user, db, sslmode, PQerrorMessage(c),
		      pgv_log_tail(p, 2000));
	ck_assert_str_eq(query_value(c, "SELECT current_user"), pg_user);
	if (strcmp(sslmode, "require") == 0)
		ck_assert_int_eq(PQsslInUse(c), 1);
	PQfinish(c);
}

static void login_fails(struct pgv *p, const char *db, const char *user, const char *password, const char *sslmode,
			const char *msg)
{
	PGconn *c = login(p, db, user, password, sslmode);
	ck_assert_msg(PQstatus(c) == CONNECTION_BAD, "%s logged in with a bad password", user);
	ck_assert_msg(strstr(PQerrorMessage(c), msg), "%s: expected \"%s\", got: %s\n%s", user, msg,
		      PQerrorMessage(c), pgv_log_tail(p, 2000));
	PQfinish(c);
}

/* What must never reach the log: the bind secret and any password a client sent. */
static void log_keeps_secrets(struct pgv *p)
{
	static const char *const secrets[] = { BIND_SECRET, "scram_pass", "alice_pw", "md5_user_ldap_pw", "wrong_pw" };
	for (size_t i = 0; i < sizeof(secrets) / sizeof(secrets[0]); i++)
		ck_assert_msg(!pgv_log_contains(p, secrets[i]), "the log shows %s\n%s", secrets[i], pgv_log_tail(p, 3000));
}

/*
 * Simple bind (ldapprefix/ldapsuffix) on an hba ldap line for TLS only:
 * over TLS the directory decides, and the server side logs in with the
 * password it accepted (scram_user is not in auth_file); without TLS no
 * line matches.
 */
START_TEST(simple_bind_over_tls)
{
	struct slapd d = { 0 };
	struct pgv p = { 0 };
	char hba_text[600];

	slapd_start(&d);
	snprintf(hba_text, sizeof(hba_text),
		 "hostssl all all 127.0.0.1/32 ldap ldapserver=127.0.0.1 ldapport=%d \"ldapprefix=uid=\" "
		 "\"ldapsuffix=," BASE "\"\nhost all md5_user 127.0.0.1/32 md5\n", d.port);
	start_hba(&p, "simple.hba", hba_text, "", std_databases());

	login_ok(&p, DB, "scram_user", "scram_pass", "require", "scram_user");
	pgv_expect_log(&p, "login authenticated: method=ldap dn=\"uid=scram_user," BASE "\"", 5);
	login_fails(&p, DB, "scram_user", "scram_pass", "disable", "no pg_hba.conf entry");
	login_fails(&p, DB, "scram_user", "wrong_pw", "require", "LDAP authentication failed");
	pgv_expect_log(&p, "LDAP login failed for user \"uid=scram_user," BASE "\" on server \"127.0.0.1\": Invalid credentials", 5);
	login_fails(&p, DB, "nobody", "wrong_pw", "require", "LDAP authentication failed");
	login_ok(&p, DB, "md5_user", "md5_pass", "disable", "md5_user");	/* other lines keep their method */
	/* by cause: a simple bind cannot tell a wrong password from a DN that does not exist, nor can the directory */
	ck_assert_double_eq(failures("ldap", "bad_password"), 2);
	ck_assert_double_eq(failures("hba", "hba_reject"), 1);
	ck_assert_double_eq(failures("ldap", "unknown_user"), 0);
	log_keeps_secrets(&p);
	pgv_stop(&p);
	slapd_stop(&d);
}
END_TEST

static void search_ini(char *buf, size_t size, int port, const char *how)
{
	snprintf(buf, size, "auth_type = ldap\nadmin_users = scram_user\n"
		 "auth_ldap_options = ldapserver=localhost ldapport=%d ldapbasedn=\"" BASE "\" "
		 "ldapbinddn=\"cn=reader,dc=example,dc=com\" ldapbindpasswd=" BIND_SECRET " %s\n", port, how);
}

/*
 * Search+bind from auth_ldap_options (auth_type ldap, TLS or not as the
 * client likes): the server side as for any user (the LDAP password, the
 * auth_file secret, a forced user); SHOW CONFIG hides ldapbindpasswd;
 * ldapurl and ldapsearchfilter; a wrong bind secret; bad options refused.
 */
START_TEST(search_bind)
{
	struct slapd d = { 0 };
	struct pgv p = { 0 };
	char extra[1200];

	slapd_start(&d);
	search_ini(extra, sizeof(extra), d.port, "ldapsearchattribute=uid");
	pgv_start(&p, tls_ini(extra), databases(), md5_userlist());

	login_ok(&p, DB, "scram_user", "scram_pass", "require", "scram_user");
	login_ok(&p, DB, "scram_user", "scram_pass", "disable", "scram_user");
	/* The directory's password for md5_user; PostgreSQL gets auth_file's. */
	login_ok(&p, DB, "md5_user", "md5_user_ldap_pw", "require", "md5_user");
	login_fails(&p, DB, "md5_user", "md5_pass", "require", "LDAP authentication failed");
	login_ok(&p, "forced", "alice", "alice_pw", "require", "pgbench_user");
	login_fails(&p, DB, "alice", "wrong_pw", "disable", "LDAP authentication failed");
	login_fails(&p, DB, "nobody", "wrong_pw", "disable", "LDAP authentication failed");
	pgv_expect_log(&p, "LDAP user \"nobody\" does not exist: search for filter \"(uid=nobody)\" on server \"localhost\"", 5);
	login_fails(&p, DB, "a*", "wrong_pw", "disable", "LDAP authentication failed");
	pgv_expect_log(&p, "invalid character in user name", 5);
	ck_assert_double_eq(failures("ldap", "bad_password"), 2);	/* md5_user, alice */
	ck_assert_double_eq(failures("ldap", "unknown_user"), 2);	/* nobody, a* */
	ck_assert_double_eq(failures("ldap", "directory_error"), 0);

	PGconn *a = login(&p, "pgbouncer", "scram_user", "scram_pass", "require");
	ck_assert_msg(PQstatus(a) == CONNECTION_OK, "console: %s", PQerrorMessage(a));
	PGresult *r = PQexec(a, "SHOW CONFIG");
	ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	bool seen = false;
	for (int i = 0; i < PQntuples(r); i++) {
		if (strcmp(PQgetvalue(r, i, 0), "auth_ldap_options") != 0)
			continue;
		seen = true;
		ck_assert_msg(strstr(PQgetvalue(r, i, 1), "ldapbindpasswd=********") &&
			      !strstr(PQgetvalue(r, i, 1), BIND_SECRET), "SHOW CONFIG: %s", PQgetvalue(r, i, 1));
		ck_assert_msg(strstr(PQgetvalue(r, i, 1), "ldapbinddn=\"cn=reader,dc=example,dc=com\""), "%s",
			      PQgetvalue(r, i, 1));
	}
	ck_assert(seen);
	PQclear(r);
	PQfinish(a);

	/* ldapurl (scheme, host, port, base, attribute, scope), then a filter of one's own */
	char from[200], to[300];
	snprintf(from, sizeof(from), "ldapserver=localhost ldapport=%d ldapbasedn=\"" BASE "\"", d.port);
	snprintf(to, sizeof(to), "ldapurl=\"ldap://127.0.0.1:%d/" BASE "?uid?sub\"", d.port);
	pgv_ini_replace(&p, from, to);
	pgv_ini_replace(&p, " ldapsearchattribute=uid", "");
	pgv_reload(&p);
	pgv_expect_log(&p, "configuration reloaded", 1);
	login_ok(&p, DB, "scram_user", "scram_pass", "disable", "scram_user");
	pgv_ini_replace(&p, "?uid?sub\"", "??sub\" ldapsearchfilter=\"(&(objectClass=inetOrgPerson)(uid=$username))\"");
	pgv_reload(&p);
	login_ok(&p, "forced", "alice", "alice_pw", "require", "pgbench_user");

	/* the search account's secret wrong: every login fails, the log says why, not the secret */
	pgv_ini_replace(&p, "ldapbindpasswd=" BIND_SECRET, "ldapbindpasswd=not_it");
	pgv_reload(&p);
	login_fails(&p, DB, "alice", "alice_pw", "disable", "LDAP authentication failed");
	pgv_expect_log(&p, "could not perform initial LDAP bind for ldapbinddn \"cn=reader,dc=example,dc=com\" on server \"127.0.0.1\"", 5);
	ck_assert(!pgv_log_contains(&p, "not_it"));
	ck_assert_double_eq(failures("ldap", "directory_error"), 1);	/* the search account, not the user */
	ck_assert_double_eq(failures("ldap", "bad_password"), 2);

	/* options PostgreSQL refuses are refused at load, and the old ones stay */
	pgv_ini_replace(&p, "ldapbindpasswd=not_it", "ldapprefix=uid=");
	pgv_reload(&p);
	pgv_expect_log(&p, "auth_ldap_options: cannot use ldapbasedn, ldapbinddn", 5);
	log_keeps_secrets(&p);
	pgv_stop(&p);
	slapd_stop(&d);
}
END_TEST

/*
 * TLS to the directory: ldapscheme=ldaps with a simple bind, and ldaptls=1
 * (StartTLS) with search+bind, checked against the directory's certificate
 * (LDAPTLS_CACERT, OpenLDAP's own setting, in pgvalve's environment).
 */
START_TEST(directory_over_tls)
{
	struct slapd d = { .tls = true };
	struct pgv p = { 0 };
	char hba_text[1400], out[700];

	slapd_start(&d);
	ck_assert_int_eq(setenv("LDAPTLS_CACERT", pgv_cert("ca.crt"), 1), 0);
	ck_assert_int_eq(setenv("LDAPTLS_REQCERT", "demand", 1), 0);
	snprintf(hba_text, sizeof(hba_text),
		 "host pgvtest md5_user 127.0.0.1/32 ldap ldapserver=localhost ldapscheme=ldaps ldapport=%d "
		 "\"ldapprefix=uid=\" \"ldapsuffix=," BASE "\"\n"
		 "host forced md5_user 127.0.0.1/32 ldap ldapserver=127.0.0.2 ldapscheme=ldaps ldapport=%d "
		 "\"ldapprefix=uid=\" \"ldapsuffix=," BASE "\"\n"
		 "host pgvtest all 127.0.0.1/32 ldap ldapserver=127.0.0.1 ldapscheme=ldaps ldapport=%d "
		 "\"ldapprefix=uid=\" \"ldapsuffix=," BASE "\"\n"
		 "host forced all 127.0.0.1/32 ldap ldapserver=127.0.0.1 ldapport=%d ldaptls=1 ldapbasedn=\"" BASE "\"\n",
		 d.tls_port, d.tls_port, d.tls_port, d.port);
	start_hba(&p, "tls.hba", hba_text, "", databases());
	login_ok(&p, DB, "scram_user", "scram_pass", "require", "scram_user");
	login_ok(&p, "forced", "alice", "alice_pw", "disable", "pgbench_user");
	login_fails(&p, "forced", "alice", "wrong_pw", "disable", "LDAP authentication failed");
	/* by name (c-ares, then each address): the certificate's DNS name is checked ... */
	login_ok(&p, DB, "md5_user", "md5_user_ldap_pw", "require", "md5_user");
	/* ... and its address: 127.0.0.2 is not the certificate's */
	login_fails(&p, "forced", "md5_user", "md5_user_ldap_pw", "disable", "LDAP authentication failed");
	pgv_expect_log(&p, "could not start LDAP TLS session on server \"127.0.0.2\": certificate verify failed", 5);
	ck_assert_double_eq(failures("ldap", "directory_error"), 1);
	ck_assert_double_eq(failures("ldap", "bad_password"), 1);
	snprintf(out, sizeof(out), "%s/slapd.out", d.dir);
	const char *log = read_file_tail(out, 1 << 20);
	int tls = 0;
	for (const char *at = log; (at = strstr(at, "TLS established")); at++)
		tls++;
	ck_assert_msg(tls >= 4, "slapd saw %d TLS sessions, expected 4:\n%s", tls, read_file_tail(out, 3000));
	ck_assert_msg(strstr(log, "STARTTLS"), "no StartTLS in slapd's log:\n%s", read_file_tail(out, 3000));
	log_keeps_secrets(&p);
	pgv_stop(&p);

	/* a directory whose certificate pgvalve cannot verify is no directory */
	struct pgv q = { 0 };
	ck_assert_int_eq(setenv("LDAPTLS_CACERT", pgv_cert("wrong_ca.crt"), 1), 0);
	start_hba(&q, "tls.hba", hba_text, "", databases());
	login_fails(&q, DB, "scram_user", "scram_pass", "require", "LDAP authentication failed");
	login_fails(&q, "forced", "alice", "alice_pw", "disable", "LDAP authentication failed");
	pgv_expect_log(&q, "could not start LDAP TLS session on server \"127.0.0.1\"", 5);
	pgv_expect_log(&q, "could not start LDAP TLS session on server \"127.0.0.1\": certificate verify failed", 5);
	/* a certificate that does not verify is the operator's to fix, not a directory that is down */
	ck_assert_double_eq(failures("ldap", "directory_error"), 2);
	ck_assert_double_eq(failures("ldap", "directory_unavailable"), 0);
	pgv_stop(&q);
	slapd_stop(&d);
}
END_TEST

/* Logins started at once, then driven to their end (or the deadline). */
struct logins {
	int n;
	PGconn *c[128];
	bool done[128];
};

static void logins_start(struct logins *l, struct pgv *p, int n, const char *db, const char *user, const char *pw)
{
	char ci[512];
	snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%d dbname=%s user=%s password=%s sslmode=disable", p->port, db,
		 user, pw);
	l->n = n;
	for (int i = 0; i < n; i++) {
		l->c[i] = PQconnectStart(ci);
		ck_assert_msg(l->c[i] && PQstatus(l->c[i]) != CONNECTION_BAD, "connect start %d", i);
		l->done[i] = false;
	}
}

/* Drives every login until it succeeds or fails; returns how many succeeded. */
static int logins_finish(struct logins *l, double timeout_s)
{
	double deadline = now_s() + timeout_s;
	int left = l->n, ok = 0;
	PostgresPollingStatusType st[128];
	for (int i = 0; i < l->n; i++)
		st[i] = PGRES_POLLING_WRITING;
	while (left > 0 && now_s() < deadline) {
		struct pollfd pfd[128];
		int idx[128], m = 0;
		for (int i = 0; i < l->n; i++) {
			if (l->done[i])
				continue;
			pfd[m] = (struct pollfd){ .fd = PQsocket(l->c[i]),
						  .events = st[i] == PGRES_POLLING_READING ? POLLIN : POLLOUT };
			idx[m++] = i;
		}
		if (poll(pfd, (nfds_t)m, 100) <= 0)
			continue;
		for (int k = 0; k < m; k++) {
			if (!pfd[k].revents)
				continue;
			int i = idx[k];
			st[i] = PQconnectPoll(l->c[i]);
			if (st[i] == PGRES_POLLING_OK || st[i] == PGRES_POLLING_FAILED) {
				l->done[i] = true;
				left--;
				ok += st[i] == PGRES_POLLING_OK;
			}
		}
	}
	return ok;
}

static void logins_free(struct logins *l)
{
	for (int i = 0; i < l->n; i++)
		PQfinish(l->c[i]);
	l->n = 0;
}

/*
 * A directory that stops answering (SIGSTOP: connections pile up in its
 * backlog) makes only the LDAP logins wait, up to auth_ldap_timeout, and
 * fail; an md5 login and a session already open go on at once. A
 * directory that is gone (connection refused) fails LDAP logins at once.
 */
START_TEST(directory_stops)
{
	struct slapd d = { 0 };
	struct pgv p = { 0 };
	char hba_text[600];
	struct logins l = { 0 };

	slapd_start(&d);
	snprintf(hba_text, sizeof(hba_text),
		 "host all md5_user 127.0.0.1/32 md5\n"
		 "host all all 127.0.0.1/32 ldap ldapserver=127.0.0.1 ldapport=%d ldapbasedn=\"" BASE "\"\n", d.port);
	start_hba(&p, "stops.hba", hba_text, "auth_ldap_max_concurrent = 4\n", std_databases());
	login_ok(&p, DB, "scram_user", "scram_pass", "disable", "scram_user");
	PGconn *open = login(&p, DB, "md5_user", "md5_pass", "disable");
	ck_assert_int_eq(PQstatus(open), CONNECTION_OK);

	ck_assert_int_eq(kill(d.pid, SIGSTOP), 0);
	double t0 = now_s();
	logins_start(&l, &p, 8, DB, "scram_user", "scram_pass");	/* more than auth_ldap_max_concurrent */
	sleep_ms(300);	/* pacing: the LDAP logins are stuck on the stopped directory by then (later: a weaker check) */
	double t1 = now_s();
	login_ok(&p, DB, "md5_user", "md5_pass", "disable", "md5_user");
	ck_assert_str_eq(query_value(open, "SELECT 41 + 1"), "42");
	double other = now_s() - t1;
	ck_assert_msg(other < 1.5, "an md5 login and a query took %.2f s while the directory hung", other);
	int ok = logins_finish(&l, 20);
	double waited = now_s() - t0;
	ck_assert_msg(ok == 0, "%d LDAP logins went through a stopped directory", ok);
	for (int i = 0; i < l.n; i++) {
		ck_assert_msg(l.done[i], "LDAP login %d still waiting after %.1f s", i, waited);
		ck_assert_msg(strstr(PQerrorMessage(l.c[i]), "LDAP authentication failed"), "%s", PQerrorMessage(l.c[i]));
	}
	ck_assert_msg(waited >= 1.5 && waited < 10, "the LDAP logins failed after %.2f s (auth_ldap_timeout = 2)", waited);
	logins_free(&l);
	pgv_expect_log(&p, "within auth_ldap_timeout (2.0 s)", 5);
	ck_assert_double_eq(failures("ldap", "directory_unavailable"), 8);

	slapd_stop(&d);
	t0 = now_s();
	login_fails(&p, DB, "scram_user", "scram_pass", "disable", "LDAP authentication failed");
	ck_assert_msg(now_s() - t0 < 1.5, "a refused directory took %.2f s to fail a login", now_s() - t0);
	pgv_expect_log(&p, "could not talk to LDAP server \"127.0.0.1\"", 5);
	ck_assert_str_eq(query_value(open, "SELECT 1"), "1");
	ck_assert_double_eq(failures("ldap", "directory_unavailable"), 9);
	ck_assert_double_eq(failures("ldap", "bad_password") + failures("ldap", "directory_error"), 0);
	PQfinish(open);

	slapd_start(&d);	/* back: logins work again */
	login_ok(&p, DB, "scram_user", "scram_pass", "disable", "scram_user");
	pgv_stop(&p);
	slapd_stop(&d);
}
END_TEST

/* The threads of process pid (/proc's count). */
static int thread_count(pid_t pid)
{
	char path[64], line[256];
	int n = -1;
	snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
	FILE *f = fopen(path, "r");
	ck_assert_msg(f != NULL, "cannot read %s", path);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Threads: %d", &n) == 1)
			break;
	fclose(f);
	return n;
}

/*
 * A TLS directory that accepts connections but never answers (SIGSTOP):
 * pgvalve drives the handshake (ldaps) from its loop, with no thread, so
 * an md5 login and an open session go on at once while the LDAP logins
 * fail at auth_ldap_timeout.
 */
START_TEST(hung_tls_directory)
{
	struct slapd d = { .tls = true };
	struct pgv p = { 0 };
	char hba_text[600];
	struct logins l = { 0 };

	slapd_start(&d);
	ck_assert_int_eq(setenv("LDAPTLS_CACERT", pgv_cert("ca.crt"), 1), 0);
	snprintf(hba_text, sizeof(hba_text),
		 "host all md5_user 127.0.0.1/32 md5\n"
		 "host all all 127.0.0.1/32 ldap ldapserver=127.0.0.1 ldapscheme=ldaps ldapport=%d "
		 "\"ldapprefix=uid=\" \"ldapsuffix=," BASE "\"\n", d.tls_port);
	start_hba(&p, "hung.hba", hba_text, "", std_databases());
	login_ok(&p, DB, "scram_user", "scram_pass", "disable", "scram_user");
	PGconn *open = login(&p, DB, "md5_user", "md5_pass", "disable");
	ck_assert_int_eq(PQstatus(open), CONNECTION_OK);

	ck_assert_int_eq(kill(d.pid, SIGSTOP), 0);
	double t0 = now_s();
	logins_start(&l, &p, 4, DB, "scram_user", "scram_pass");
	sleep_ms(300);	/* pacing, as above */
	double t1 = now_s();
	login_ok(&p, DB, "md5_user", "md5_pass", "disable", "md5_user");
	ck_assert_str_eq(query_value(open, "SELECT 6 * 7"), "42");
	ck_assert_int_eq(thread_count(p.pid), 1);	/* the waits are events, not threads */
	double other = now_s() - t1;
	ck_assert_msg(other < 1.5, "an md5 login and a query took %.2f s while the TLS directory hung", other);
	int ok = logins_finish(&l, 20);
	double waited = now_s() - t0;
	ck_assert_msg(ok == 0, "%d LDAP logins went through a stopped directory", ok);
	ck_assert_msg(waited >= 1.5 && waited < 10, "the LDAP logins failed after %.2f s (auth_ldap_timeout = 2)", waited);
	logins_free(&l);
	kill(d.pid, SIGCONT);
	login_ok(&p, DB, "scram_user", "scram_pass", "disable", "scram_user");	/* back, and no thread left behind in the way */
	PQfinish(open);
	pgv_stop(&p);
	slapd_stop(&d);
}
END_TEST

/* pgvalve_client_authentications_total{method="..."}, -1 if absent. */
static double authentications(const char *method)
{
	char series[128];
	snprintf(series, sizeof(series), "pgvalve_client_authentications_total{method=\"%s\"}", method);
	return pgv_metric(mport, series);
}

/*
 * 100 LDAP logins at once, 8 checks at a time, in the clear, with StartTLS
 * and over ldaps: all go through, and the metrics count them by method.
 */
START_TEST(hundred_at_once)
{
	static const char *const how[] = { "", "ldaptls=1", "ldapscheme=ldaps" };	/* plain, StartTLS, ldaps */
	struct slapd d = { .tls = _i > 0 };
	struct pgv p = { 0 };
	char extra[1200];
	struct logins l = { 0 };

	slapd_start(&d);
	ck_assert_int_eq(setenv("LDAPTLS_CACERT", pgv_cert("ca.crt"), 1), 0);
	search_ini(extra, sizeof(extra), _i == 2 ? d.tls_port : d.port, how[_i]);
	snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra), "auth_ldap_max_concurrent = 8\nauth_ldap_timeout = 20\n");
	pgv_start(&p, tls_ini(extra), databases(), md5_userlist());
	double t0 = now_s();
	logins_start(&l, &p, 100, "forced", "alice", "alice_pw");
	int ok = logins_finish(&l, 60);
	double took = now_s() - t0;
	for (int i = 0; i < l.n; i++)
		ck_assert_msg(PQstatus(l.c[i]) == CONNECTION_OK, "login %d: %s\n%s", i, PQerrorMessage(l.c[i]),
			      pgv_log_tail(&p, 2000));
	ck_assert_int_eq(ok, 100);
	ck_assert_str_eq(query_value(l.c[99], "SELECT current_user"), "pgbench_user");
	fprintf(stderr, "test_ldap: 100 concurrent LDAP logins (%s) in %.2f s\n", _i == 0 ? "plain" : how[_i], took);
	login_fails(&p, "forced", "alice", "wrong_pw", "disable", "LDAP authentication failed");
	ck_assert_double_eq(authentications("ldap"), 100);
	ck_assert_double_eq(authentications("md5"), -1);	/* a series only for a method in use */
	ck_assert_double_eq(failures("ldap", "bad_password"), 1);
	logins_free(&l);
	pgv_stop(&p);
	slapd_stop(&d);
}
END_TEST

static Suite *ldap_suite(void)
{
	Suite *s = suite_create("ldap");
	TCase *tc = pgv_tcase_create("ldap", 90);
	tcase_add_test(tc, simple_bind_over_tls);
	tcase_add_test(tc, search_bind);
	tcase_add_test(tc, directory_over_tls);
	tcase_add_test(tc, directory_stops);
	tcase_add_test(tc, hung_tls_directory);
	tcase_add_loop_test(tc, hundred_at_once, 0, 3);
	suite_add_tcase(s, tc);
	return s;
}

#else /* !HAVE_LDAP */

/* A build without LDAP refuses it at load, as before (test_compat's ldap_refused has the reload form). */
START_TEST(refused_without_ldap)
{
	struct pgv p = { 0 };
	pgv_start(&p, "auth_type = md5\n", std_databases(), std_userlist());
	pgv_ini_replace(&p, "auth_type = md5", "auth_type = ldap\n");
	pgv_reload(&p);
	pgv_expect_log(&p, "auth_type: LDAP authentication is not supported (pgvalve has no LDAP client)", 5);
	pgv_stop(&p);
}
END_TEST

static Suite *ldap_suite(void)
{
	Suite *s = suite_create("ldap");
	TCase *tc = pgv_tcase_create("ldap", 30);
	tcase_add_test(tc, refused_without_ldap);
	suite_add_tcase(s, tc);
	return s;
}

#endif

int main(void)
{
	return pgv_run_suite(ldap_suite());
}
