/*
 * test_shard.c - sharded databases (issue 57) end to end, as far as this
 * version goes: a [databases] entry with shards= and sharding_key= loads
 * beside its shards, a login to it is refused with SQLSTATE 0A000 and a
 * message naming it (a replication login too) while its shards serve as
 * ordinary databases, a broken sharded entry stops the start with the
 * file, line and reason, and a reload with one keeps the running
 * configuration and says why; a sharded entry added by a reload is
 * refused the same way. Built without libpg_query (--without-pg-query),
 * a sharded entry stops the start instead, saying why.
 */
#include "autoconf.h"
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* pgvalve started on text exits 1 and says "<ini>:<line>: <want>". */
static void expect_start_failure(const char *text, int line, const char *want)
{
	char ini[600], out[600];
	snprintf(ini, sizeof(ini), "%s/shard-bad.ini.%d", getenv("PGV_TEST_DIR"), (int)getpid());
	snprintf(out, sizeof(out), "%s/shard-bad.out.%d", getenv("PGV_TEST_DIR"), (int)getpid());
	FILE *f = fopen(ini, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	chmod(ini, 0644);
	const char *runas = getenv("PGV_TEST_RUNAS");
	char *args[] = { getenv("PGV_BINARY"), "-u", runas && *runas ? (char *)runas : "nobody", ini, NULL };
	int rc = run_program(args, NULL, out, 20);
	const char *said = read_file_tail(out, 4000);
	char needle[1200];
	snprintf(needle, sizeof(needle), "%s:%d: %s", ini, line, want);
	ck_assert_msg(rc == 1 && strstr(said, needle), "exit %d, expected \"%s\" in:\n%s", rc, needle, said);
}

#ifdef HAVE_PG_QUERY
/* Two shards on run.sh's cluster (both on pgvtest: routing is not the point here) and the sharded entry. */
static const char *sharded_databases(void)
{
	static char buf[1024];
	snprintf(buf, sizeof(buf),
		 "pgvtest = host=127.0.0.1 port=%1$s dbname=pgvtest\n"
		 "app_s0 = host=127.0.0.1 port=%1$s dbname=pgvtest\n"
		 "app_s1 = host=127.0.0.1 port=%1$s dbname=pgvtest\n"
		 "app = shards=app_s0,app_s1 sharding_key=users.id,orders.user_id\n",
		 getenv("PGV_TEST_PGPORT"));
	return buf;
}

/* A login to dbname is refused with 0A000 and the sharded message. */
static void expect_refused(struct pgv *p, const char *dbname, const char *const *extra)
{
	struct raw_error err;
	memset(&err, 0, sizeof(err));
	char want[128];
	ck_assert_int_eq(raw_login_ex(p->port, dbname, "md5_user", "md5_pass", extra, &err, NULL), -1);
	ck_assert_str_eq(err.sqlstate, "0A000");
	snprintf(want, sizeof(want), "database \"%s\" is sharded", dbname);
	ck_assert_msg(strstr(err.message, want) && strstr(err.message, "does not route over shards yet"),
		      "message: %s", err.message);
	ck_assert(pgv_log_wait(p, want, 5));
}

START_TEST(login_refused_shards_serve)
{
	struct pgv p;
	struct raw_error err;
	memset(&err, 0, sizeof(err));
	char value[64];
	int fd = -1;

	pgv_start(&p, "auth_type = md5\n", sharded_databases(), std_userlist());
	expect_refused(&p, "app", NULL);
	static const char *const replication[] = { "replication", "database", NULL };
	expect_refused(&p, "app", replication);
	/* the shards are ordinary databases */
	ck_assert_int_eq(raw_login_ex(p.port, "app_s1", "md5_user", "md5_pass", NULL, &err, &fd), 0);
	ck_assert_int_eq(raw_query(fd, "SELECT current_database()", value, sizeof(value), &err), 0);
	ck_assert_str_eq(value, "pgvtest");
	close(fd);
	pgv_stop(&p);
}
END_TEST

START_TEST(bad_sharded_entry_stops_start)
{
	expect_start_failure("[databases]\napp_s0 = host=127.0.0.1\napp = shards=app_s0,app_s7 sharding_key=id\n[pgvalve]\n",
			     3, "database \"app\": shard \"app_s7\" is not a [databases] entry");
}
END_TEST

START_TEST(reload_checks_sharded_entries)
{
	struct pgv p;
	struct raw_error err;
	memset(&err, 0, sizeof(err));

	pgv_start(&p, "auth_type = md5\n", sharded_databases(), std_userlist());
	/* a shard that does not exist: the reload fails, the running configuration stays */
	pgv_ini_replace(&p, "shards=app_s0,app_s1", "shards=app_s0,app_s9");
	pgv_reload(&p);
	pgv_expect_log(&p, "reload failed, keeping the running configuration: ", 5);
	pgv_expect_log(&p, ": database \"app\": shard \"app_s9\" is not a [databases] entry", 5);
	expect_refused(&p, "app", NULL);
	/* a host of its own on a sharded entry */
	pgv_ini_replace(&p, "shards=app_s0,app_s9", "host=127.0.0.1 shards=app_s0,app_s1");
	pgv_reload(&p);
	pgv_expect_log(&p, "database \"app\": a sharded database has no host of its own", 5);
	/* fixed, and another sharded entry added: it is refused as well */
	pgv_ini_replace(&p, "host=127.0.0.1 shards=app_s0,app_s1 sharding_key=users.id,orders.user_id",
			"shards=app_s0,app_s1 sharding_key=users.id,orders.user_id\n"
			"app2 = shards=app_s1,app_s0 sharding_key=tenant_id");
	pgv_reload(&p);
	pgv_expect_log(&p, "configuration reloaded", 5);
	expect_refused(&p, "app2", NULL);
	ck_assert_int_eq(raw_login(p.port, "app_s0", "md5_user", "md5_pass", &err), 0);
	pgv_stop(&p);
}
END_TEST

#else
START_TEST(sharded_entry_needs_pg_query)
{
	expect_start_failure("[databases]\napp_s0 = host=127.0.0.1\napp = shards=app_s0 sharding_key=id\n[pgvalve]\n", 3,
			     "database \"app\": sharded databases (shards=) need pgvalve built with libpg_query");
}
END_TEST
#endif

static Suite *shard_suite(void)
{
	Suite *s = suite_create("shard");
	TCase *tc = pgv_tcase_create("sharded databases", 60);
#ifdef HAVE_PG_QUERY
	tcase_add_test(tc, login_refused_shards_serve);
	tcase_add_test(tc, bad_sharded_entry_stops_start);
	tcase_add_test(tc, reload_checks_sharded_entries);
#else
	tcase_add_test(tc, sharded_entry_needs_pg_query);
#endif
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return pgv_run_suite(shard_suite());
}
