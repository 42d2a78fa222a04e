/*
 * test_hba.c - auth_hba_file and auth_ident_file: record types, addresses
 * (CIDR, netmask field, IPv6, IPv4-mapped), database/user lists and
 * keywords, @file includes, first-match order, methods and options, skipping
 * malformed lines, continuation lines, and ident maps with regexes.
 */
#include "common.h"
#include "config.h"
#include "log.h"
#include "hba.h"
#include "../check_main.h"

#include <check.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

static struct hba *parse(const char *text)
{
	return hba_parse(text, strlen(text), "test");
}

/*
 * Matches a connection: addr "unix" for the Unix socket, else an IPv4 or
 * IPv6 literal. Returns the method and fills *out when given.
 */
static int match_ex(const struct hba *hba, const char *addr, bool tls, const char *db, const char *user,
		    struct hba_match *out)
{
	struct sockaddr_in sin;
	struct sockaddr_in6 sin6;
	struct hba_request req = { .is_tls = tls, .dbname = db, .user = user };
	struct hba_match m;

	memset(&sin, 0, sizeof(sin));
	memset(&sin6, 0, sizeof(sin6));
	if (strcmp(addr, "unix") == 0) {
		req.is_unix = true;
	} else if (inet_pton(AF_INET, addr, &sin.sin_addr) == 1) {
		sin.sin_family = AF_INET;
		sin.sin_port = htons(5555);
		req.addr = (const struct sockaddr *)&sin;
	} else {
		ck_assert_msg(inet_pton(AF_INET6, addr, &sin6.sin6_addr) == 1, "bad test address %s", addr);
		sin6.sin6_family = AF_INET6;
		sin6.sin6_port = htons(5555);
		req.addr = (const struct sockaddr *)&sin6;
	}
	hba_match(hba, &req, out ? out : &m);
	return out ? out->method : m.method;
}

static int match(const struct hba *hba, const char *addr, const char *db, const char *user)
{
	return match_ex(hba, addr, false, db, user, NULL);
}

/* Line number of the matching rule (0: none). */
static int match_line(const struct hba *hba, const char *addr, bool tls, const char *db, const char *user)
{
	struct hba_match m;
	match_ex(hba, addr, tls, db, user, &m);
	return m.line;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fputs(text, f) >= 0, 1);
	ck_assert_int_eq(fclose(f), 0);
}

/* Runs fn with the log going to a temp file; returns the log text (caller frees). */
static char *capture_log(void (*fn)(void))
{
	char path[] = "/tmp/pgvalve-test-hba-log-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	close(fd);
	struct log_settings ls = { .logfile = path, .to_stderr = false };
	ck_assert_int_eq(log_setup(&ls), 0);
	fn();
	log_close();

	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	char *buf = xmalloc(65536);
	size_t n = fread(buf, 1, 65535, f);
	buf[n] = '\0';
	fclose(f);
	unlink(path);
	return buf;
}

/* ------------------------------------------------------------ record types */

START_TEST(test_local_vs_host)
{
	struct hba *hba = parse(
		"# TYPE DATABASE USER ADDRESS METHOD\n"
		"\n"
		"local   all  all               trust\n"
		"host    all  all  0.0.0.0/0    md5\n");
	ck_assert_uint_eq(hba_rule_count(hba), 2);
	ck_assert_int_eq(match(hba, "unix", "db", "u"), AUTH_TYPE_TRUST);
	ck_assert_int_eq(match_line(hba, "unix", false, "db", "u"), 3);
	ck_assert_int_eq(match(hba, "10.0.0.1", "db", "u"), AUTH_TYPE_MD5);
	ck_assert_int_eq(match_line(hba, "10.0.0.1", true, "db", "u"), 4);	/* host takes TLS too */
	/* Nothing for IPv6. */
	ck_assert_int_eq(match(hba, "::1", "db", "u"), AUTH_TYPE_REJECT);
	ck_assert_int_eq(match_line(hba, "::1", false, "db", "u"), 0);
	hba_free(hba);
}
END_TEST

START_TEST(test_hostssl_hostnossl)
{
	struct hba *hba = parse(
		"hostgssenc   all all 0.0.0.0/0 trust\n"
		"hostnogssenc all all 0.0.0.0/0 trust\n"
		"hostssl      all all 0.0.0.0/0 scram-sha-256\n"
		"hostnossl    all all 0.0.0.0/0 password\n");
	ck_assert_uint_eq(hba_rule_count(hba), 4);
	ck_assert_int_eq(match_ex(hba, "10.0.0.1", true, "db", "u", NULL), AUTH_TYPE_SCRAM_SHA_256);
	ck_assert_int_eq(match_line(hba, "10.0.0.1", true, "db", "u"), 3);
	ck_assert_int_eq(match_ex(hba, "10.0.0.1", false, "db", "u", NULL), AUTH_TYPE_PLAIN);
	ck_assert_int_eq(match_line(hba, "10.0.0.1", false, "db", "u"), 4);
	/* host* lines never take a Unix socket client. */
	ck_assert_int_eq(match_line(hba, "unix", false, "db", "u"), 0);
	ck_assert_int_eq(match(hba, "unix", "db", "u"), AUTH_TYPE_REJECT);
	hba_free(hba);
}
END_TEST

/* ------------------------------------------------------------ addresses */

START_TEST(test_ipv4_cidr)
{
	struct hba *hba = parse(
		"host all all 10.1.2.0/24  trust\n"
		"host all all 10.1.3.7/32  md5\n"
		"host all all 10.1.4.77/24 password\n"	/* host bits set: masked */
		"host all all 10.1.5.0/33  trust\n"	/* malformed */
		"host all all 10.1.5.0/    trust\n"	/* malformed */
		"host all all 10.1.5.0/2x  trust\n"	/* malformed */
		"host all all 10.1.5/24    trust\n");	/* malformed */
	ck_assert_uint_eq(hba_rule_count(hba), 3);
	ck_assert_int_eq(match(hba, "10.1.2.0", "d", "u"), AUTH_TYPE_TRUST);
	ck_assert_int_eq(match(hba, "10.1.2.255", "d", "u"), AUTH_TYPE_TRUST);
	ck_assert_int_eq(match(hba, "10.1.1.255", "d", "u"), AUTH_TYPE_REJECT);
	ck_assert_int_eq(match_line(hba, "10.1.3.0", false, "d", "u"), 0);
	ck_assert_int_eq(match(hba, "10.1.3.7", "d", "u"), AUTH_TYPE_MD5);
	ck_assert_int_eq(match_line(hba, "10.1.3.6", false, "d", "u"), 0);
	ck_assert_int_eq(match_line(hba, "10.1.3.8", false, "d", "u"), 0);
	ck_assert_int_eq(match(hba, "10.1.4.1", "d", "u"), AUTH_TYPE_PLAIN);
	ck_assert_int_eq(match_line(hba, "10.1.5.1", false, "d", "u"), 0);
	hba_free(hba);

	hba = parse("host all all 0.0.0.0/0 md5\n");
	ck_assert_int_eq(match(hba, "0.0.0.0", "d", "u"), AUTH_TYPE_MD5);
	ck_assert_int_eq(match(hba, "255.255.255.255", "d", "u"), AUTH_TYPE_MD5);
	ck_assert_int_eq(match(hba, "192.168.7.9", "d", "u"), AUTH_TYPE_MD5);
	ck_assert_int_eq(match_line(hba, "2001:db8::1", false, "d", "u"), 0);	/* IPv4 rule, IPv6 client */
	hba_free(hba);

	hba = parse("host all all 0.0.0.0/1 md5\nhost all all 128.0.0.0/1 trust\n");
	ck_assert_int_eq(match(hba, "127.255.255.255", "d", "u"), AUTH_TYPE_MD5);
	ck_assert_int_eq(match(hba, "128.0.0.0", "d", "u"), AUTH_TYPE_TRUST);
	hba_free(hba);
}
END_TEST

START_TEST(test_netmask_field)
{
	struct hba *hba = parse(
		"host all all 192.168.0.0 255.255.0.0 md5\n"
		"host all all 10.0.0.1 trust\n"			/* missing mask: malformed */
		"host all all 10.0.0.1 255.255.255.255\n"	/* missing method: malformed */
		"host all all 10.0.0.1 ffff:: trust\n"		/* mask of another family */
		"host all all fe80:: ffff:ffff:ffff:ffff:: scram-sha-256\n"
		"host all all 172.16.0.0 255.240.0.0 trust\n");
	ck_assert_uint_eq(hba_rule_count(hba), 3);
	ck_assert_int_eq(match(hba, "192.168.200.1", "d", "u"), AUTH_TYPE_MD5);
	ck_assert_int_eq(match(hba, "192.168.0.0", "d", "u"), AUTH_TYPE_MD5);
	ck_assert_int_eq(match_line(hba, "192.169.0.1", false, "d", "u"), 0);
	ck_assert_int_eq(match_line(hba, "10.0.0.1", false, "d", "u"), 0);
	ck_assert_int_eq(match(hba, "fe80::1:2:3:4", "d", "u"), AUTH_TYPE_SCRAM_SHA_256);
	ck_assert_int_eq(match_line(hba, "fe80:0:0:1::1", false, "d", "u"), 0);
	ck_assert_int_eq(match(hba, "172.31.255.255", "d", "u"), AUTH_TYPE_TRUST);
	ck_assert_int_eq(match_line(hba, "172.32.0.0", false, "d", "u"), 0);
	hba_free(hba);
}
END_TEST

START_TEST(test_ipv6)
{
	struct hba *hba = parse(
		"host all all ::1/128          trust\n"
		"host all all 2001:db8:1::/64  md5\n"
		"host all all ::/0             reject\n");
	ck_assert_int_eq(match(hba, "::1", "d", "u"), AUTH_TYPE_TRUST);
	ck_assert_int_eq(match_line(hba, "::2", false, "d", "u"), 3);
	ck_assert_int_eq(match(hba, "2001:db8:1::", "d", "u"), AUTH_TYPE_MD5);
	ck_assert_int_eq(match(hba, "2001:db8:1:0:ffff:ffff:ffff:ffff", "d", "u"), AUTH_TYPE_MD5);
	ck_assert_int_eq(match_line(hba, "2001:db8:1:1::", false, "d", "u"), 3);
	ck_assert_int_eq(match_line(hba, "2001:db8:2::1", false, "d", "u"), 3);
	/* IPv6 rules never take an IPv4 client, not even 127.0.0.1 for ::1. */
	ck_assert_int_eq(match_line(hba, "127.0.0.1", false, "d", "u"), 0);
	hba_free(hba);
}
END_TEST

START_TEST(test_ipv4_mapped)
{
	struct hba *hba = parse(
		"host all all 192.168.1.0/24 trust\n"
		"host all all ::ffff:10.0.0.0/104 md5\n");
	ck_assert_int_eq(match(hba, "::ffff:192.168.1.5", "d", "u"), AUTH_TYPE_TRUST);
	ck_assert_int_eq(match(hba, "192.168.1.5", "d", "u"), AUTH_TYPE_TRUST);
	ck_assert_int_eq(match_line(hba, "::ffff:192.168.2.5", false, "d", "u"), 0);
	/* IPv4-compatible (not mapped) addresses are plain IPv6. */
	ck_assert_int_eq(match_line(hba, "::192.168.1.5", false, "d", "u"), 0);
	/* An IPv6 rule over the mapped range sees the mapped client as IPv6. */
	ck_assert_int_eq(match(hba, "::ffff:10.9.9.9", "d", "u"), AUTH_TYPE_MD5);
	ck_assert_int_eq(match_line(hba, "10.9.9.9", false, "d", "u"), 0);
	hba_free(hba);
}
END_TEST

START_TEST(test_address_keywords)
{
	struct hba *hba = parse(
		"host all all db.example.com md5\n"	/* host name: kept, never matches */
		"host all all .example.com md5\n"
		"host all all samehost trust\n"
		"host all all samenet password\n"
		"host all all \"all\" reject\n"		/* quoted: a host name, never matches */
		"host all all all scram-sha-256\n");
	ck_assert_uint_eq(hba_rule_count(hba), 6);
	ck_assert_int_eq(match_line(hba, "127.0.0.1", false, "d", "u"), 3);
	ck_assert_int_eq(match_line(hba, "::1", false, "d", "u"), 3);
	ck_assert_int_eq(match_line(hba, "127.0.0.2", false, "d", "u"), 4);	/* lo is 127/8 */
	ck_assert_int_eq(match_line(hba, "203.0.113.200", false, "d", "u"), 6);	/* TEST-NET-3, not local */
	ck_assert_int_eq(match(hba, "2001:db8::99", "d", "u"), AUTH_TYPE_SCRAM_SHA_256);
	hba_free(hba);
}
END_TEST

/* ------------------------------------------------------------ names */

START_TEST(test_db_user_lists)
{
	struct hba *hba = parse(
		"local db1,db2 u1, u2 md5\n"
		"local \"all\" all trust\n"
		"local sameuser all password\n"
		"local samerole,db5 all scram-sha-256\n"
		"local db6 +admins,carol,\"+admins\" trust\n"
		"local replication all pam\n"
		"local \"replication\" all peer\n"
		"local \"db 7\" \"a,b\" ldap\n");
	ck_assert_uint_eq(hba_rule_count(hba), 8);
	ck_assert_int_eq(match(hba, "unix", "db1", "u1"), AUTH_TYPE_MD5);
	ck_assert_int_eq(match(hba, "unix", "db2", "u2"), AUTH_TYPE_MD5);
	ck_assert_int_eq(match(hba, "unix", "db1", "u3"), AUTH_TYPE_REJECT);
	ck_assert_int_eq(match(hba, "unix", "db3", "u1"), AUTH_TYPE_REJECT);
	ck_assert_int_eq(match(hba, "unix", "db", "u1,u2"), AUTH_TYPE_REJECT);
	/* Quoted "all" is a database named all. */
	ck_assert_int_eq(match(hba, "unix", "all", "x"), AUTH_TYPE_TRUST);
	ck_assert_int_eq(match(hba, "unix", "bob", "bob"), AUTH_TYPE_PLAIN);
	ck_assert_int_eq(match(hba, "unix", "bob", "bobby"), AUTH_TYPE_REJECT);
	/* samerole never matches, the rest of the list still does. */
	ck_assert_int_eq(match(hba, "unix", "samerole", "x"), AUTH_TYPE_REJECT);
	ck_assert_int_eq(match(hba, "unix", "db5", "x"), AUTH_TYPE_SCRAM_SHA_256);
	/* +group never matches, names do; quoted "+admins" is a user name. */
	ck_assert_int_eq(match_line(hba, "unix", false, "db6", "carol"), 5);
	ck_assert_int_eq(match_line(hba, "unix", false, "db6", "admins"), 0);
	ck_assert_int_eq(match_line(hba, "unix", false, "db6", "+admins"), 5);
	/* replication keyword: never a normal connection; quoted: literal. */
	ck_assert_int_eq(match(hba, "unix", "replication", "x"), AUTH_TYPE_PEER);
	ck_assert_int_eq(match_line(hba, "unix", false, "replication", "x"), 7);
	/* Quotes keep blanks and commas. */
	ck_assert_int_eq(match(hba, "unix", "db 7", "a,b"), AUTH_TYPE_LDAP);
	ck_assert_int_eq(match(hba, "unix", "db 7", "a"), AUTH_TYPE_REJECT);
	hba_free(hba);
}
END_TEST

START_TEST(test_at_file)
{
	char dir[] = "/tmp/pgvalve-test-hba-XXXXXX";
	char path[4096], abs_users[4096], conf[8192];
	ck_assert_ptr_nonnull(mkdtemp(dir));

	snprintf(path, sizeof(path), "%s/dbs.txt", dir);
	write_file(path, "# databases\nsales, hr  # comment\n  \"ops team\" @more.txt\n");
	snprintf(path, sizeof(path), "%s/more.txt", dir);
	write_file(path, "qa\n");
	snprintf(abs_users, sizeof(abs_users), "%s/users", dir);
	write_file(abs_users, "alice bob,\ncarol\n");
	snprintf(path, sizeof(path), "%s/loop.txt", dir);
	write_file(path, "@loop.txt looped\n");

	snprintf(conf, sizeof(conf),
		 "host @dbs.txt @%s 10.0.0.0/8 md5\n"
		 "local @missing.txt all trust\n"
		 "local \"@dbs.txt\" all password\n"
		 "local @loop.txt all pam\n",
		 abs_users);
	snprintf(path, sizeof(path), "%s/pg_hba.conf", dir);
	write_file(path, conf);

	struct hba *hba = hba_load(path);
	ck_assert_ptr_nonnull(hba);
	ck_assert_uint_eq(hba_rule_count(hba), 4);
	ck_assert_int_eq(match(hba, "10.1.1.1", "sales", "alice"), AUTH_TYPE_MD5);
	ck_assert_int_eq(match(hba, "10.1.1.1", "hr", "bob"), AUTH_TYPE_MD5);
	ck_assert_int_eq(match(hba, "10.1.1.1", "ops team", "carol"), AUTH_TYPE_MD5);
	ck_assert_int_eq(match(hba, "10.1.1.1", "qa", "carol"), AUTH_TYPE_MD5);	/* nested @file */
	ck_assert_int_eq(match(hba, "10.1.1.1", "databases", "carol"), AUTH_TYPE_REJECT);	/* a comment */
	ck_assert_int_eq(match(hba, "10.1.1.1", "sales", "dave"), AUTH_TYPE_REJECT);
	ck_assert_int_eq(match(hba, "10.1.1.1", "ops", "alice"), AUTH_TYPE_REJECT);
	/* A missing file adds no names; a quoted @name is literal. */
	ck_assert_int_eq(match(hba, "unix", "missing.txt", "x"), AUTH_TYPE_REJECT);
	ck_assert_int_eq(match(hba, "unix", "@dbs.txt", "x"), AUTH_TYPE_PLAIN);
	ck_assert_int_eq(match(hba, "unix", "sales", "x"), AUTH_TYPE_REJECT);
	/* A self-including file stops at the depth limit, its names still count. */
	ck_assert_int_eq(match(hba, "unix", "looped", "x"), AUTH_TYPE_PAM);
	hba_free(hba);

	const char *names[] = { "dbs.txt", "more.txt", "users", "loop.txt", "pg_hba.conf" };
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
}
END_TEST

/* ------------------------------------------------------------ order, methods, options */

START_TEST(test_first_match_wins)
{
	struct hba *hba = parse(
		"host all all 10.0.0.0/8 reject\n"
		"host all all 10.0.0.0/8 trust\n"
		"host db1 all 0.0.0.0/0 trust\n"
		"host all all 0.0.0.0/0 md5\n"
		"host db1 all 0.0.0.0/0 reject\n");
	struct hba_match m;
	ck_assert_int_eq(match_ex(hba, "10.1.1.1", false, "db1", "u", &m), AUTH_TYPE_REJECT);
	ck_assert_int_eq(m.line, 1);
	ck_assert_int_eq(match_ex(hba, "11.0.0.1", false, "db1", "u", &m), AUTH_TYPE_TRUST);
	ck_assert_int_eq(m.line, 3);
	ck_assert_int_eq(match_ex(hba, "11.0.0.1", false, "db2", "u", &m), AUTH_TYPE_MD5);
	ck_assert_int_eq(m.line, 4);
	ck_assert_ptr_null(m.map);
	hba_free(hba);
}
END_TEST

START_TEST(test_no_match_rejects)
{
	struct hba *hba = parse("local db1 u1 trust\n");
	struct hba_match m = { .method = AUTH_TYPE_TRUST, .line = 42, .map = "x" };
	ck_assert_int_eq(match_ex(hba, "unix", false, "db2", "u1", &m), AUTH_TYPE_REJECT);
	ck_assert_int_eq(m.line, 0);
	ck_assert_ptr_null(m.map);
	ck_assert_ptr_null(m.options);
	hba_free(hba);

	hba = parse("");
	ck_assert_uint_eq(hba_rule_count(hba), 0);
	ck_assert_int_eq(match(hba, "unix", "d", "u"), AUTH_TYPE_REJECT);
	hba_free(hba);
	ck_assert_int_eq(match(NULL, "unix", "d", "u"), AUTH_TYPE_REJECT);

	/* NULL names and a TCP request without an address. */
	hba = parse("local all all trust\nhost all all 0.0.0.0/0 md5\nhost all all all password\n");
	struct hba_request req = { .is_unix = true };
	hba_match(hba, &req, &m);
	ck_assert_int_eq(m.method, AUTH_TYPE_TRUST);
	req.is_unix = false;
	hba_match(hba, &req, &m);
	ck_assert_int_eq(m.method, AUTH_TYPE_PLAIN);
	ck_assert_int_eq(m.line, 3);
	hba_free(hba);
}
END_TEST

/*
 * As PostgreSQL: "replication" in the database field matches physical
 * replication connections and nothing else; "all" and names never match
 * them; a logical one (replication=database) matches by its database.
 * Quoted, "replication" is just a database name.
 */
START_TEST(test_replication_keyword)
{
	struct hba *hba = parse("local replication u1 trust\n"
				"local all all md5\n"
				"local \"replication\" u2 password\n");
	struct hba_request req = { .is_unix = true, .dbname = "replication", .user = "u1",
				   .physical_replication = true };
	struct hba_match m;
	hba_match(hba, &req, &m);
	ck_assert_int_eq(m.method, AUTH_TYPE_TRUST);
	ck_assert_int_eq(m.line, 1);
	req.user = "u2";		/* "all" does not match a physical replication connection */
	hba_match(hba, &req, &m);
	ck_assert_int_eq(m.method, AUTH_TYPE_REJECT);
	req.physical_replication = false;	/* ordinary (or logical) connection to a database named replication */
	hba_match(hba, &req, &m);
	ck_assert_int_eq(m.line, 2);
	req.user = "u1";
	req.dbname = "db1";
	hba_match(hba, &req, &m);
	ck_assert_int_eq(m.line, 2);	/* the keyword line is not for it */
	hba_free(hba);

	hba = parse("local \"replication\" u2 password\n");
	req = (struct hba_request){ .is_unix = true, .dbname = "replication", .user = "u2" };
	hba_match(hba, &req, &m);
	ck_assert_int_eq(m.method, AUTH_TYPE_PLAIN);
	req.physical_replication = true;
	hba_match(hba, &req, &m);
	ck_assert_int_eq(m.method, AUTH_TYPE_REJECT);
	hba_free(hba);
}
END_TEST

START_TEST(test_methods)
{
	static const struct {
		const char *line;
		int method;
	} cases[] = {
		{ "local all all trust", AUTH_TYPE_TRUST },
		{ "local all all reject", AUTH_TYPE_REJECT },
		{ "local all all md5", AUTH_TYPE_MD5 },
		{ "local all all scram-sha-256", AUTH_TYPE_SCRAM_SHA_256 },
		{ "local all all password", AUTH_TYPE_PLAIN },
		{ "hostssl all all all cert", AUTH_TYPE_CERT },
		{ "host all all all cert", AUTH_TYPE_CERT },
		{ "local all all peer", AUTH_TYPE_PEER },
		{ "local all all pam", AUTH_TYPE_PAM },
		{ "local all all ldap", AUTH_TYPE_LDAP },
		{ "local all all ident", AUTH_TYPE_REJECT },
#ifdef PGVALVE_GSSAPI
		{ "host all all all gss", AUTH_TYPE_GSS },
#else
		{ "host all all all gss", AUTH_TYPE_REJECT },	/* a build without GSSAPI */
#endif
		{ "local all all gss", AUTH_TYPE_REJECT },		/* no Kerberos over a Unix socket */
		{ "local all all sspi", AUTH_TYPE_REJECT },
		{ "local all all radius", AUTH_TYPE_REJECT },
		{ "host all all all peer", AUTH_TYPE_REJECT },		/* peer needs a Unix socket */
		{ "local all all cert", AUTH_TYPE_REJECT },		/* cert needs TLS */
		{ "hostnossl all all all cert", AUTH_TYPE_REJECT },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct hba *hba = parse(cases[i].line);
		struct hba_match m;
		ck_assert_msg(hba_rule_count(hba) == 1, "not parsed: %s", cases[i].line);
		bool local = strncmp(cases[i].line, "local", 5) == 0;
		bool tls = strncmp(cases[i].line, "hostssl", 7) == 0;
		match_ex(hba, local ? "unix" : "10.0.0.1", tls, "d", "u", &m);
		ck_assert_msg(m.method == cases[i].method, "%s: got %d want %d", cases[i].line, m.method,
			      cases[i].method);
		ck_assert_int_eq(m.line, 1);
		hba_free(hba);
	}

#ifdef PGVALVE_GSSAPI
	/* gss keeps PostgreSQL's include_realm and krb_realm for gss_auth, and map= */
	struct hba *g = parse("host all all all gss include_realm=0 krb_realm=EXAMPLE.COM map=krb ldapport=1\n");
	struct hba_match gm;
	match_ex(g, "10.0.0.1", false, "d", "u", &gm);
	ck_assert_int_eq(gm.method, AUTH_TYPE_GSS);
	ck_assert_str_eq(gm.options, "include_realm=0 krb_realm=EXAMPLE.COM");
	ck_assert_str_eq(gm.map, "krb");
	hba_free(g);
#endif

	/* Unknown or misspelt methods and quoted lists are malformed. */
	struct hba *hba = parse("local all all foo\nlocal all all MD5\nlocal all all md5,trust\n");
	ck_assert_uint_eq(hba_rule_count(hba), 0);
	hba_free(hba);
}
END_TEST

START_TEST(test_options)
{
	struct hba *hba = parse(
		"local all all peer map=omicron\n"
		"hostssl all all 0.0.0.0/0 cert clientcert=verify-full map=certmap\n"
		"host ldb all 0.0.0.0/0 ldap ldapserver=ldap.example.com \"ldapbasedn=dc=example, dc=com\" map=lm\n"
		"host all all 0.0.0.0/0 ident map=ignored\n"
		"host x all 0.0.0.0/0 md5 notanoption\n"
		"host y all 0.0.0.0/0 md5 map=\n");
	struct hba_match m;
	ck_assert_uint_eq(hba_rule_count(hba), 4);

	ck_assert_int_eq(match_ex(hba, "unix", false, "d", "u", &m), AUTH_TYPE_PEER);
	ck_assert_str_eq(m.map, "omicron");
	ck_assert_ptr_null(m.options);

	ck_assert_int_eq(match_ex(hba, "10.0.0.1", true, "d", "u", &m), AUTH_TYPE_CERT);
	ck_assert_str_eq(m.map, "certmap");
	ck_assert_ptr_null(m.options);

	ck_assert_int_eq(match_ex(hba, "10.0.0.1", false, "ldb", "u", &m), AUTH_TYPE_LDAP);
	ck_assert_str_eq(m.map, "lm");
	ck_assert_str_eq(m.options, "ldapserver=ldap.example.com ldapbasedn=\"dc=example, dc=com\"");

	/* Unsupported method: reject, its map dropped. */
	ck_assert_int_eq(match_ex(hba, "10.0.0.1", false, "x", "u", &m), AUTH_TYPE_REJECT);
	ck_assert_int_eq(m.line, 4);
	ck_assert_ptr_null(m.map);
	hba_free(hba);
}
END_TEST

/* ------------------------------------------------------------ lexing */

static void parse_malformed(void)
{
	struct hba *hba = parse(
		"local all all trust\n"
		"include other.conf\n"					/* 2: unknown type */
		"host all all\n"					/* 3: too few fields */
		"host all all 10.0.0.0/8\n"				/* 4: no method */
		"host all all 999.1.1.1/8 md5 ldapbindpasswd=TOPSECRET1\n"	/* 5: bad address */
		"host \"all all 10.0.0.0/8 md5\n"			/* 6: unterminated quote */
		"host all all 10.0.0.0/8 nosuch\n"			/* 7: unknown method */
		"host all all 10.0.0.0/8 md5 ldapbindpasswd=TOPSECRET2\n"	/* 8: ok, option warned */
		"host all,all all 1:2:3:4:5:6:7:8:9/64 md5\n"		/* 9: bad IPv6 */
		"local all all md5 bad\n"				/* 10: option without = */
		"local,host all all trust\n"				/* 11: list as type */
		"host all all 11.0.0.0/8 trust\n");
	ck_assert_uint_eq(hba_rule_count(hba), 3);
	ck_assert_int_eq(match(hba, "unix", "d", "u"), AUTH_TYPE_TRUST);
	ck_assert_int_eq(match(hba, "10.0.0.1", "d", "u"), AUTH_TYPE_MD5);
	ck_assert_int_eq(match_line(hba, "10.0.0.1", false, "d", "u"), 8);
	ck_assert_int_eq(match(hba, "11.0.0.1", "d", "u"), AUTH_TYPE_TRUST);
	ck_assert_int_eq(match_line(hba, "11.0.0.1", false, "d", "u"), 12);
	hba_free(hba);
}

static void parse_ldap_options(void)
{
	struct hba *hba = parse("host all all 10.0.0.0/8 ldap ldapserver=x \"ldapprefix=uid=\" ldapbasedn=y "
				"ldapbindpasswd=TOPSECRET3\n"
				"host all all 11.0.0.0/8 ldap ldapserver=x \"ldapprefix=uid=\"\n");
	ck_assert_int_eq(match(hba, "10.0.0.1", "d", "u"), AUTH_TYPE_LDAP);	/* kept: its logins fail, saying why */
	ck_assert_int_eq(match(hba, "11.0.0.1", "d", "u"), AUTH_TYPE_LDAP);
	hba_free(hba);
}

/* LDAP options that cannot work are said at load, the bind secret never. */
START_TEST(test_ldap_options_checked)
{
	char *log = capture_log(parse_ldap_options);
#ifdef HAVE_LDAP
	ck_assert_msg(strstr(log, "test:1: cannot use ldapbasedn") != NULL, "%s", log);
	ck_assert_ptr_null(strstr(log, "test:2: "));
#else
	ck_assert_msg(strstr(log, "test:1: LDAP authentication is not supported") != NULL, "%s", log);
#endif
	ck_assert_ptr_null(strstr(log, "TOPSECRET"));
	free(log);
}
END_TEST

START_TEST(test_malformed_skipped)
{
	char *log = capture_log(parse_malformed);
	for (int line = 2; line <= 11; line++) {
		char needle[32];
		if (line == 8)
			continue;
		snprintf(needle, sizeof(needle), "test:%d: ", line);
		ck_assert_msg(strstr(log, needle) != NULL, "no warning for line %d", line);
	}
	ck_assert_ptr_nonnull(strstr(log, "test:8: "));	/* the ignored option */
	ck_assert_ptr_nonnull(strstr(log, "ldapbindpasswd"));
	ck_assert_ptr_null(strstr(log, "TOPSECRET"));
	ck_assert_ptr_null(strstr(log, "test:1: "));
	ck_assert_ptr_null(strstr(log, "test:12: "));
	ck_assert_ptr_null(strstr(log, "other.conf"));
	free(log);
}
END_TEST

START_TEST(test_line_continuation)
{
	struct hba *hba = parse(
		"# a comment \\\n"		/* joined, still a comment */
		"host all all 10.0.0.0/8 md5\n"
		"host db1,\\\n"
		"db2 all \\\r\n"
		"   12.0.0.0/8 \\\n"
		" trust\r\n"
		"local all all \\\n"
		"  peer map=m\n"
		"local x all trust \\");	/* backslash at the very end of the text */
	ck_assert_uint_eq(hba_rule_count(hba), 3);
	ck_assert_int_eq(match_line(hba, "10.0.0.1", false, "d", "u"), 0);	/* eaten by the comment */
	ck_assert_int_eq(match(hba, "12.0.0.1", "db2", "u"), AUTH_TYPE_TRUST);
	ck_assert_int_eq(match_line(hba, "12.0.0.1", false, "db1", "u"), 3);
	ck_assert_int_eq(match_line(hba, "unix", false, "d", "u"), 7);
	ck_assert_int_eq(match(hba, "unix", "d", "u"), AUTH_TYPE_PEER);
	hba_free(hba);

	hba = parse("local all all trust # trailing comment\nlocal all all md5#glued\n");
	ck_assert_uint_eq(hba_rule_count(hba), 2);
	hba_free(hba);
}
END_TEST

START_TEST(test_load_missing_and_many)
{
	ck_assert_ptr_null(hba_load("/nonexistent/pgvalve/pg_hba.conf"));
	ck_assert_ptr_null(ident_load("/nonexistent/pgvalve/pg_ident.conf"));

	/* Thousands of lines: parse and match the last one. */
	size_t cap = 5000 * 64, len = 0;
	char *text = xmalloc(cap);
	for (int i = 0; i < 5000; i++)
		len += (size_t)snprintf(text + len, cap - len, "host db%d user%d 10.%d.%d.0/24 md5\n",
					i, i, i / 256, i % 256);
	struct hba *hba = hba_parse(text, len, "big");
	ck_assert_uint_eq(hba_rule_count(hba), 5000);
	for (int k = 0; k < 1000; k++)
		ck_assert_int_eq(match_line(hba, "10.19.135.7", false, "db4999", "user4999"), 5000);
	ck_assert_int_eq(match_line(hba, "10.19.135.7", false, "db4998", "user4999"), 0);
	hba_free(hba);
	free(text);

	/* A NUL byte spoils its line only. */
	static const char nul_text[] = "local all all trust\nlocal a\0b all md5\nlocal x all md5\n";
	hba = hba_parse(nul_text, sizeof(nul_text) - 1, "nul");
	ck_assert_uint_eq(hba_rule_count(hba), 2);
	hba_free(hba);
}
END_TEST

/* ------------------------------------------------------------ ident */

static const char ident_text[] =
	"# MAPNAME SYSTEM-USERNAME PG-USERNAME\n"
	"omicron  bryanh  bryanh\n"
	"omicron  ann     ann\n"
	"omicron  robert  bob\n"
	"omicron  bryanh  guest1\n"
	"mymap    /^(.*)@mydomain\\.com$     \\1\n"
	"mymap    /^(.*)@otherdomain\\.com$  guest\n"
	"pre      \"/^([a-z]+)-x{1,3}$\"       db_\\1_end\n"
	"anymap   root    all\n"
	"quoted   \"x y\"   \"all\"\n"
	"bad      onlytwo\n"
	"bad      /(unclosed  x\n"
	"bad      /^nocapture$  \\1\n"
	"bad      a,b  c\n"
	"bad      g  +group\n";

static struct ident_map *parse_ident(void)
{
	return ident_parse(ident_text, strlen(ident_text), "ident");
}

START_TEST(test_ident_plain)
{
	struct ident_map *m = parse_ident();
	ck_assert(ident_check(m, "omicron", "robert", "bob"));
	ck_assert(!ident_check(m, "omicron", "robert", "robert"));
	ck_assert(ident_check(m, "omicron", "bryanh", "bryanh"));
	ck_assert(ident_check(m, "omicron", "bryanh", "guest1"));
	ck_assert(!ident_check(m, "omicron", "ann", "bob"));
	ck_assert(!ident_check(m, "omicron", "Ann", "ann"));	/* case-sensitive */
	/* all as the database user, and quoted "all" as a literal. */
	ck_assert(ident_check(m, "anymap", "root", "anyone"));
	ck_assert(!ident_check(m, "anymap", "toor", "anyone"));
	ck_assert(ident_check(m, "quoted", "x y", "all"));
	ck_assert(!ident_check(m, "quoted", "x y", "other"));
	ident_free(m);
}
END_TEST

START_TEST(test_ident_regex)
{
	struct ident_map *m = parse_ident();
	ck_assert(ident_check(m, "mymap", "alice@mydomain.com", "alice"));
	ck_assert(!ident_check(m, "mymap", "alice@mydomain.com", "bob"));
	ck_assert(!ident_check(m, "mymap", "alice@mydomain.com", "alice@mydomain.com"));
	ck_assert(!ident_check(m, "mymap", "alice@mydomainXcom", "alice"));
	ck_assert(!ident_check(m, "mymap", "alice@mydomain.com.evil", "alice"));
	ck_assert(ident_check(m, "mymap", "@mydomain.com", ""));	/* empty capture */
	ck_assert(ident_check(m, "mymap", "bob@otherdomain.com", "guest"));
	ck_assert(!ident_check(m, "mymap", "bob@otherdomain.com", "bob"));
	/* Quoted regex (commas inside), \1 in the middle of the user name. */
	ck_assert(ident_check(m, "pre", "abc-xx", "db_abc_end"));
	ck_assert(!ident_check(m, "pre", "abc-xxxx", "db_abc_end"));
	ck_assert(!ident_check(m, "pre", "abc-xx", "db_abc_en"));
	ck_assert(!ident_check(m, "pre", "abc-xx", "db_abd_end"));
	ident_free(m);
}
END_TEST

START_TEST(test_ident_wrong_or_missing_map)
{
	struct ident_map *m = parse_ident();
	ck_assert(!ident_check(m, "mymap", "robert", "bob"));	/* robert is in omicron */
	ck_assert(!ident_check(m, "nosuchmap", "root", "root"));
	ck_assert(!ident_check(m, NULL, "root", "root"));
	ck_assert(!ident_check(NULL, "anymap", "root", "root"));
	ck_assert(!ident_check(m, "anymap", NULL, "root"));
	/* Every "bad" line was skipped. */
	ck_assert(!ident_check(m, "bad", "onlytwo", "onlytwo"));
	ck_assert(!ident_check(m, "bad", "nocapture", "nocapture"));
	ck_assert(!ident_check(m, "bad", "nocapture", "\\1"));
	ck_assert(!ident_check(m, "bad", "a", "c"));
	ck_assert(!ident_check(m, "bad", "g", "group"));
	ck_assert(!ident_check(m, "bad", "g", "+group"));
	ident_free(m);

	m = ident_parse("", 0, "empty");
	ck_assert(!ident_check(m, "anymap", "root", "root"));
	ident_free(m);
}
END_TEST

START_TEST(test_ident_load)
{
	char path[] = "/tmp/pgvalve-test-ident-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	close(fd);
	write_file(path, "m1 sys1 db1\nm1 sys2 \\\n db2\n");
	struct ident_map *m = ident_load(path);
	unlink(path);
	ck_assert_ptr_nonnull(m);
	ck_assert(ident_check(m, "m1", "sys1", "db1"));
	ck_assert(ident_check(m, "m1", "sys2", "db2"));
	ck_assert(!ident_check(m, "m1", "sys1", "db2"));
	ident_free(m);
}
END_TEST

/*
 * Stacked repetitions, and repetitions regcomp would expand past the bound,
 * are refused at load with a log line naming the reason, and only that line
 * is skipped. Unbounded, "/t" followed by 21 '+' made regcomp() take 2 GB,
 * and "x{,16663}" (glibc's "{0,16663}", found by fuzz_ident) over 2 GB.
 */
static const char regex_bound_text[] =
	"stacked  /t+++++++++++++++++++++  u\n"
	"nested   \"/^((((a{1,20}){1,20}){1,20}){1,20})$\"  u\n"
	"many     /a*b*c*d*e*f*g*h*i*j*k*l*m*n*o*p*q*r*s*t*u*v*w*x*y*z*A*B*C*D*E*F*G*H*I*J*K*L*M*N*O*P*Q*R*S*T*U*V*W*X*Y*Z*0*1*2*3*4*5*6*7*8*9*__*a*b*c*d*e*f*g*h*  u\n"
	"fine     \"/^([a-z0-9._-]{1,63})@(corp|example)\\.com$\"  \\1\n"
	"fine2    /^(t+)+$  u\n"
	"after    sys  db\n"
	"doubled  \"/^(((((((((t)+)+)+)+)+)+)+)+)+$\"  u\n"
	"nolower  \"/^([a-z]#)-x{,16663}$\"  u\n"
	"short    \"/^x{,3}$\"  u\n";
static struct ident_map *bound_map;

static void parse_regex_bound(void)
{
	bound_map = ident_parse(regex_bound_text, strlen(regex_bound_text), "ident");
}

START_TEST(test_ident_regex_bounds)
{
	char *log = capture_log(parse_regex_bound);
	struct ident_map *m = bound_map;
	ck_assert_msg(strstr(log, "ident:1: regular expression has stacked repetition operators") != NULL,
		      "log: %s", log);
	ck_assert_msg(strstr(log, "ident:2: regular expression too complex") != NULL, "log: %s", log);
	ck_assert_msg(strstr(log, "ident:3: regular expression has too many repetition operators") != NULL,
		      "log: %s", log);
	ck_assert_msg(strstr(log, "ident:7: regular expression too complex") != NULL, "log: %s", log);
	ck_assert_msg(strstr(log, "ident:8: regular expression too complex") != NULL, "log: %s", log);
	ck_assert_msg(strstr(log, "ident:9:") == NULL, "log: %s", log);
	ck_assert_msg(strstr(log, "line skipped") != NULL, "log: %s", log);
	ck_assert_msg(strstr(log, "ident:4:") == NULL && strstr(log, "ident:5:") == NULL, "log: %s", log);
	ck_assert(!ident_check(m, "stacked", "t", "u"));
	ck_assert(!ident_check(m, "nested", "a", "u"));
	ck_assert(!ident_check(m, "many", "__", "u"));
	/* The lines around them still apply, and ordinary repetitions pass. */
	ck_assert(ident_check(m, "fine", "bob.s@corp.com", "bob.s"));
	ck_assert(!ident_check(m, "fine", "bob@evil.com", "bob"));
	ck_assert(ident_check(m, "fine2", "ttt", "u"));
	ck_assert(ident_check(m, "after", "sys", "db"));
	ck_assert(!ident_check(m, "doubled", "t", "u"));
	ck_assert(!ident_check(m, "nolower", "a#-x", "u"));
	/* "{,3}" is "{0,3}" to regcomp: a small one still applies */
	ck_assert(ident_check(m, "short", "", "u"));
	ck_assert(ident_check(m, "short", "xxx", "u"));
	ck_assert(!ident_check(m, "short", "xxxx", "u"));
	ident_free(m);
	free(log);

	/* Too long, even without a single repetition. */
	char line[1200 + 32];
	memset(line, 0, sizeof(line));
	strcpy(line, "long /");
	memset(line + 6, 'x', 1100);
	strcat(line, " u\n");
	m = ident_parse(line, strlen(line), "ident");
	ck_assert(!ident_check(m, "long", "xxx", "u"));
	ident_free(m);
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("hba");
	TCase *tc = tcase_create("hba");
	tcase_add_test(tc, test_local_vs_host);
	tcase_add_test(tc, test_replication_keyword);
	tcase_add_test(tc, test_hostssl_hostnossl);
	tcase_add_test(tc, test_ipv4_cidr);
	tcase_add_test(tc, test_netmask_field);
	tcase_add_test(tc, test_ipv6);
	tcase_add_test(tc, test_ipv4_mapped);
	tcase_add_test(tc, test_address_keywords);
	tcase_add_test(tc, test_db_user_lists);
	tcase_add_test(tc, test_at_file);
	tcase_add_test(tc, test_first_match_wins);
	tcase_add_test(tc, test_no_match_rejects);
	tcase_add_test(tc, test_methods);
	tcase_add_test(tc, test_options);
	tcase_add_test(tc, test_malformed_skipped);
	tcase_add_test(tc, test_line_continuation);
	tcase_add_test(tc, test_load_missing_and_many);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	tc = tcase_create("ident");
	tcase_add_test(tc, test_ident_plain);
	tcase_add_test(tc, test_ident_regex);
	tcase_add_test(tc, test_ident_wrong_or_missing_map);
	tcase_add_test(tc, test_ident_load);
	tcase_add_test(tc, test_ident_regex_bounds);
	tcase_add_test(tc, test_ldap_options_checked);
	suite_add_tcase(s, tc);
	return s;
}
