/*
 * test_gss.c - Kerberos (GSSAPI) logins through pgvalve against a real MIT
 * KDC: the realm PGV.TEST is made in a temp dir (its own krb5.conf through
 * KRB5_CONFIG, kdc.conf through KRB5_KDC_PROFILE, kdb5_util, kadmin.local
 * for the principals and pgvalve's keytab), krb5kdc runs on a port of its
 * own for each test and is stopped after it; tickets come from kinit with a
 * password into a private KRB5CCNAME. Clients are libpq 15 with
 * gssencmode=disable (pgvalve refuses GSSAPI encryption), host=localhost so
 * they ask for postgres/localhost.
 */
#include "harness.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#define DB "pgvtest"
#define REALM "PGV.TEST"

static char kdir[600];		/* the realm's files */
static char keytab[700];

static void krb_file(const char *name, const char *text)
{
	char path[800];
	snprintf(path, sizeof(path), "%s/%s", kdir, name);
	FILE *f = fopen(path, "w");
	ck_assert_msg(f != NULL, "create %s: %s", path, strerror(errno));
	fputs(text, f);
	fclose(f);
}

/* A shell command (stdin /dev/null, output to the realm's log); its exit status. */
static int sh(const char *cmd)
{
	char *const argv[] = { "/bin/sh", "-c", (char *)cmd, NULL };
	char out[700];
	snprintf(out, sizeof(out), "%s/commands.log", kdir);
	return run_program(argv, NULL, out, 30);
}

static void sh_ok(const char *cmd)
{
	char out[700];
	snprintf(out, sizeof(out), "%s/commands.log", kdir);
	ck_assert_msg(sh(cmd) == 0, "failed: %s\n%s", cmd, read_file_tail(out, 1500));
}

/*
 * A port for the KDC, free for TCP and UDP now: 32000-32767, below the
 * kernel's ephemeral ports (clients' own ports would take it) and above the
 * ranges harness.c gives PostgreSQL, dnsmasq, HTTP and pgvalve.
 */
static int kdc_port(void)
{
	for (int i = 0, base = (int)(getpid() * 37 % 768); i < 768; i++) {
		int port = 32000 + (base + i) % 768;
		bool ok = true;
		for (int type = 0; type < 2 && ok; type++) {
			struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
						  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
			int fd = socket(AF_INET, type ? SOCK_DGRAM : SOCK_STREAM, 0);
			int one = 1;
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
			ok = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
			close(fd);
		}
		if (ok)
			return port;
	}
	ck_abort_msg("no free port for the KDC in 32000-32767");
	return -1;
}

/* krb5.conf and kdc.conf for a KDC on port (rewritten for each KDC). Clock skew 1 s. */
static void realm_conf(int port)
{
	char text[4096];
	snprintf(text, sizeof(text),
		 "[libdefaults]\n default_realm = " REALM "\n dns_lookup_kdc = false\n dns_lookup_realm = false\n"
		 " rdns = false\n dns_canonicalize_hostname = false\n clockskew = 1\n"
		 "[realms]\n " REALM " = {\n  kdc = 127.0.0.1:%d\n }\n", port);
	krb_file("krb5.conf", text);
	snprintf(text, sizeof(text),
		 "[kdcdefaults]\n kdc_listen = 127.0.0.1:%d\n kdc_tcp_listen = 127.0.0.1:%d\n"
		 "[realms]\n " REALM " = {\n  database_name = %s/principal\n  key_stash_file = %s/stash\n"
		 "  acl_file = %s/kadm5.acl\n  max_life = 1h\n  max_renewable_life = 0\n }\n"
		 "[logging]\n kdc = FILE:%s/kdc.log\n", port, port, kdir, kdir, kdir, kdir);
	krb_file("kdc.conf", text);
}

/*
 * The realm, once for the binary (an unchecked fixture: the tests' forks
 * inherit its environment): principals scram_user and alice with
 * passwords, postgres/localhost in a keytab pgvalve's user can read.
 */
static void realm_create(void)
{
	char text[1024], cmd[2400];

	snprintf(kdir, sizeof(kdir), "%s/krb-%ld", getenv("PGV_TEST_DIR"), (long)getpid());
	ck_assert_int_eq(mkdir(kdir, 0755), 0);
	realm_conf(kdc_port());
	krb_file("kadm5.acl", "");
	snprintf(text, sizeof(text), "%s/krb5.conf", kdir);
	setenv("KRB5_CONFIG", text, 1);
	snprintf(text, sizeof(text), "%s/kdc.conf", kdir);
	setenv("KRB5_KDC_PROFILE", text, 1);
	snprintf(text, sizeof(text), "FILE:%s/ccache", kdir);
	setenv("KRB5CCNAME", text, 1);
	snprintf(keytab, sizeof(keytab), "%s/pgvalve.keytab", kdir);

	snprintf(cmd, sizeof(cmd),
		 "set -e; kdb5_util -r " REALM " create -s -P master_pw_8812 >/dev/null;"
		 " kadmin.local -r " REALM " -q 'addprinc -pw krb_scram_pw scram_user';"
		 " kadmin.local -r " REALM " -q 'addprinc -pw krb_alice_pw alice';"
		 " kadmin.local -r " REALM " -q 'addprinc -randkey postgres/localhost';"
		 " kadmin.local -r " REALM " -q 'ktadd -k %s postgres/localhost'; chmod 0644 %s",
		 keytab, keytab);
	sh_ok(cmd);
}

/* krb5kdc on a port of its own, once it hands out a ticket (for scram_user, in KRB5CCNAME); another port if not. */
static pid_t kdc_start(void)
{
	char out[700];
	char *const argv[] = { "/usr/sbin/krb5kdc", "-n", "-r", REALM, NULL };
	snprintf(out, sizeof(out), "%s/krb5kdc.out", kdir);
	for (int attempt = 0; attempt < 3; attempt++) {
		realm_conf(kdc_port());
		pid_t pid = run_program_background(argv, out);
		/* the KDC starts in well under a second; 10 s on a loaded machine, then another port */
		double deadline = now_s() + 10;
		while (now_s() < deadline) {
			if (sh("echo krb_scram_pw | kinit scram_user >/dev/null") == 0)
				return pid;
			sleep_ms(50);
		}
		stop_program(pid);
	}
	ck_abort_msg("the KDC gave no ticket, 3 times\n%s", read_file_tail(out, 1500));
	return -1;
}

static void kinit(const char *principal, const char *password, const char *lifetime)
{
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "echo %s | kinit %s%s %s >/dev/null", password, lifetime ? "-l " : "",
		 lifetime ? lifetime : "", principal);
	sh_ok(cmd);
}

/* A libpq login as user to pgvalve by the name localhost: NULL when it worked, else libpq's message. */
static const char *login_gssenc(struct pgv *p, const char *user, const char *gssencmode)
{
	char portbuf[16];
	snprintf(portbuf, sizeof(portbuf), "%d", p->port);
	const char *kw[] = { "host", "hostaddr", "port", "dbname", "user", "sslmode", "gssencmode", "connect_timeout",
			     NULL };
	const char *val[] = { "localhost", "127.0.0.1", portbuf, DB, user, "disable", gssencmode, "10", NULL };
	return pgv_login_message(kw, val, user);
}

static const char *login(struct pgv *p, const char *user)
{
	return login_gssenc(p, user, "disable");
}

static int mport;	/* the metrics port of the pgvalve start() made last */

static void start(struct pgv *p, const char *hba_text, const char *extra)
{
	char conf[2048];
	const char *hba = pgv_write_test_file("gss", "gss.hba", hba_text);
	const char *ident = pgv_write_test_file("gss", "gss.ident", "krb alice@" REALM " md5_user\n"
					       "krb /^(.*)@" REALM "$ \\1\n");
	mport = pgv_pick_http_port(0);
	snprintf(conf, sizeof(conf), "auth_type = hba\nauth_hba_file = %s\nauth_ident_file = %s\n"
		 "metrics_port = %d\nmetrics_listen_addr = 127.0.0.1\n%s", hba, ident, mport, extra ? extra : "");
	pgv_start(p, conf, std_databases(), std_userlist());
}

/* pgvalve_client_authentication_failures_total{method="gss",cause} of the last pgvalve started. */
static double gss_failures(const char *cause)
{
	return pgv_auth_failures(mport, "gss", cause);
}

/* A login refused, with log_why in pgvalve's log (unless NULL), and no more gss logins than before. */
static void expect_refused(struct pgv *p, const char *user, const char *log_why)
{
	int before = pgv_log_count(p, "method=gss");
	const char *err = login(p, user);
	ck_assert_msg(err != NULL, "%s logged in\n%s", user, pgv_log_tail(p, 1500));
	if (log_why)
		pgv_expect_log(p, log_why, 5);
	ck_assert_int_eq(pgv_log_count(p, "method=gss"), before);
}

/* include_realm=0: scram_user@PGV.TEST is scram_user; with the realm kept, or another realm required, it is not. */
START_TEST(gss_include_realm)
{
	struct pgv p;
	char extra[900];
	pid_t kdc = kdc_start();

	snprintf(extra, sizeof(extra), "auth_krb_server_keyfile = %s\n", keytab);
	start(&p, "host all scram_user 127.0.0.1/32 gss include_realm=0 krb_realm=" REALM "\n"
		  "host all md5_user 127.0.0.1/32 gss\n", extra);
	const char *err = login(&p, "scram_user");
	ck_assert_msg(!err, "scram_user with a ticket: %s\n%s", err, pgv_log_tail(&p, 2000));
	pgv_expect_log(&p, "login authenticated: method=gss", 5);
	/* gssencmode=prefer: pgvalve answers the GSSENCRequest with 'N', libpq goes on in the clear */
	err = login_gssenc(&p, "scram_user", "prefer");
	ck_assert_msg(!err, "gssencmode=prefer: %s\n%s", err, pgv_log_tail(&p, 2000));
	/* include_realm=1 (the default): scram_user@PGV.TEST is not md5_user (nor scram_user) */
	ck_assert_ptr_nonnull(login(&p, "md5_user"));
	pgv_expect_log(&p, "GSSAPI authentication failed: principal \"scram_user@" REALM "\"", 5);
	ck_assert_int_eq(pgv_log_count(&p, "method=gss"), 2);
	ck_assert_double_eq(gss_failures("identity_mismatch"), 1);	/* a good ticket, the wrong user */
	ck_assert_double_eq(gss_failures("ticket_invalid"), 0);
	pgv_stop(&p);

	/* a realm that is not the principal's */
	start(&p, "host all scram_user 127.0.0.1/32 gss include_realm=0 krb_realm=OTHER.TEST\n", extra);
	expect_refused(&p, "scram_user", "GSSAPI realm (" REALM ") and configured realm (OTHER.TEST) do not match");
	ck_assert_double_eq(gss_failures("identity_mismatch"), 1);
	pgv_stop(&p);
	stop_program(kdc);
}
END_TEST

/* map= through auth_ident_file: alice@PGV.TEST may be md5_user, not scram_user; a regex line strips the realm. */
START_TEST(gss_ident_map)
{
	struct pgv p;
	char extra[900];
	pid_t kdc = kdc_start();

	snprintf(extra, sizeof(extra), "auth_krb_server_keyfile = %s\n", keytab);
	start(&p, "host all all 127.0.0.1/32 gss map=krb\n", extra);
	kinit("alice", "krb_alice_pw", NULL);
	const char *err = login(&p, "md5_user");
	ck_assert_msg(!err, "alice as md5_user: %s\n%s", err, pgv_log_tail(&p, 2000));
	expect_refused(&p, "scram_user", "principal \"alice@" REALM "\" (as \"alice@" REALM "\") may not log in as user "
		       "\"scram_user\" by map krb");
	ck_assert_double_eq(gss_failures("identity_mismatch"), 1);
	/* scram_user@PGV.TEST maps to scram_user by the regex line */
	kinit("scram_user", "krb_scram_pw", NULL);
	err = login(&p, "scram_user");
	ck_assert_msg(!err, "scram_user by the regex line: %s\n%s", err, pgv_log_tail(&p, 2000));
	ck_assert_int_eq(pgv_log_count(&p, "method=gss"), 2);
	pgv_stop(&p);
	stop_program(kdc);
}
END_TEST

/* No ticket, an expired one: refused. The keytab found through KRB5_KTNAME; a wrong krb_srvname refused. */
START_TEST(gss_no_or_expired_ticket)
{
	struct pgv p;
	char env[800];
	pid_t kdc = kdc_start();

	snprintf(env, sizeof(env), "FILE:%s", keytab);
	setenv("KRB5_KTNAME", env, 1);	/* pgvalve inherits it: auth_krb_server_keyfile stays empty */
	start(&p, "host all all 127.0.0.1/32 gss include_realm=0\n", NULL);
	ck_assert_ptr_null(login(&p, "scram_user"));
	sh_ok("kdestroy");
	expect_refused(&p, "scram_user", NULL);
	/* a ticket that lives 5 s: good at once, refused once it has expired */
	kinit("scram_user", "krb_scram_pw", "5s");
	const char *err = login(&p, "scram_user");
	ck_assert_msg(!err, "with a fresh 5 s ticket: %s", err);
	/* a 5 s ticket: 30 s leaves a loaded machine 25 s of slack */
	double deadline = now_s() + 30;
	while (sh("klist -s") == 0) {
		ck_assert_msg(now_s() < deadline, "a 5 s ticket still valid after 30 s");
		sleep_ms(200);
	}
	sleep_s(2.5);	/* klist says expired a little early: past the end and the 1 s clock skew for sure */
	expect_refused(&p, "scram_user", NULL);
	pgv_stop(&p);

	/* clients ask for postgres/localhost: not for a pgvalve whose service is "pgvalve" */
	kinit("scram_user", "krb_scram_pw", NULL);
	start(&p, "host all all 127.0.0.1/32 gss include_realm=0\n", "krb_srvname = pgvalve\n");
	expect_refused(&p, "scram_user", "GSSAPI authentication failed: the ticket is for \"postgres/localhost@" REALM
		       "\", not for the service krb_srvname \"pgvalve\"");
	ck_assert_double_eq(gss_failures("ticket_invalid"), 1);
	ck_assert_double_eq(gss_failures("identity_mismatch"), 0);
	pgv_stop(&p);
	/* a keytab that is not there: the login fails, and says why */
	start(&p, "host all all 127.0.0.1/32 gss include_realm=0\n", "auth_krb_server_keyfile = /nonexistent.keytab\n");
	expect_refused(&p, "scram_user", "GSSAPI authentication failed: cannot use the server keytab");
	ck_assert_double_eq(gss_failures("keytab_unusable"), 1);	/* pgvalve's setup, not the client's ticket */
	ck_assert_double_eq(gss_failures("ticket_invalid"), 0);
	pgv_stop(&p);
	stop_program(kdc);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("gss");
	TCase *tc = pgv_tcase_create("kdc", 90);
	tcase_add_unchecked_fixture(tc, realm_create, NULL);
	tcase_add_test(tc, gss_include_realm);
	tcase_add_test(tc, gss_ident_map);
	tcase_add_test(tc, gss_no_or_expired_ticket);
	suite_add_tcase(s, tc);
	return pgv_run_suite(s);
}
