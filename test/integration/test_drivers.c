/*
 * test_drivers.c - the driver matrix (issue 16): real client drivers whose
 * defaults use named prepared statements, each with more clients than the
 * pool has servers, through pgvalve in transaction mode with
 * max_prepared_statements at its default; and their pipelined paths
 * (issue 29), each followed by a second client on a pool of one. The drivers and their scripts
 * live in test/drivers/; setup.sh installs the pinned versions under
 * build/drivers (a no-op once done).
 */
#include "harness.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DB "pgvtest"
#define POOL "auth_type = md5\npool_mode = transaction\ndefault_pool_size = 3\nmax_client_conn = 100\n"

/* Installs the drivers (once); fails the test with setup.sh's output if it cannot. */
static void drivers_setup(const char *outdir)
{
	char script[PATH_MAX], dest[PATH_MAX], out[PATH_MAX];
	snprintf(script, sizeof(script), "%s/test/drivers/setup.sh", PGV_TEST_SRCDIR);
	snprintf(dest, sizeof(dest), "%s", PGV_TEST_BUILDDIR);
	snprintf(out, sizeof(out), "%s/setup.out", outdir);
	char *argv[] = { "bash", script, dest, NULL };
	int rc = run_program(argv, NULL, out, 600);
	ck_assert_msg(rc == 0, "test/drivers/setup.sh failed (%d):\n%s", rc, read_file_tail(out, 3000));
}

/*
 * Runs one driver script against p with 10 clients; returns its exit
 * status, its output in `text` (static, from read_file_tail).
 */
static int run_driver(struct pgv *p, const char *interp, const char *script, const char **text)
{
	char prog[PATH_MAX], path[PATH_MAX], out[PATH_MAX], port[32], nodepath[PATH_MAX + 32];
	if (strcmp(interp, "python") == 0)
		snprintf(prog, sizeof(prog), "%s/drivers/venv/bin/python", PGV_TEST_BUILDDIR);
	else
		snprintf(prog, sizeof(prog), "node");
	snprintf(path, sizeof(path), "%s/test/drivers/%s", PGV_TEST_SRCDIR, script);
	snprintf(out, sizeof(out), "%s/%s.out", p->dir, script);
	snprintf(port, sizeof(port), "PGV_DRV_PORT=%d", p->port);
	snprintf(nodepath, sizeof(nodepath), "NODE_PATH=%s/drivers/node/node_modules", PGV_TEST_BUILDDIR);
	char *env[] = { "PGV_DRV_HOST=127.0.0.1", port, "PGV_DRV_DB=" DB, "PGV_DRV_DB_ONE=one", "PGV_DRV_USER=scram_user",
			"PGV_DRV_PASSWORD=scram_pass", "PGV_DRV_CLIENTS=10", nodepath, NULL };
	char *argv[] = { prog, path, NULL };
	int rc = run_program(argv, env, out, 120);
	*text = read_file_tail(out, 3000);
	return rc;
}

static const struct driver {
	const char *interp;
	const char *script;
} drivers[] = {
	{ "python", "psycopg3.py" },	/* prepare_threshold=0 */
	{ "python", "asyncpg_cache.py" },	/* its default statement cache */
	{ "node", "node_pg.js" },	/* node-postgres named queries */
};

START_TEST(driver_default_prepares)
{
	const struct driver *d = &drivers[_i];
	struct pgv p;
	pgv_start(&p, POOL, std_databases(), std_userlist());
	drivers_setup(p.dir);
	const char *text;
	int rc = run_driver(&p, d->interp, d->script, &text);
	ck_assert_msg(rc == 0 && strstr(text, "ok: "), "%s exited %d:\n%s\n%s", d->script, rc, text,
		      pgv_log_tail(&p, 2000));
	ck_assert_msg(!pgv_log_contains(&p, "does not exist") && !pgv_log_contains(&p, "already exists"),
		      "%s", pgv_log_tail(&p, 2000));
	pgv_stop(&p);
}
END_TEST

/* The same drivers without statement tracking break: the matrix does test what it claims. */
START_TEST(drivers_break_without_tracking)
{
	const struct driver *d = &drivers[_i];
	struct pgv p;
	pgv_start(&p, POOL "max_prepared_statements = 0\n", std_databases(), std_userlist());
	drivers_setup(p.dir);
	const char *text;
	int rc = run_driver(&p, d->interp, d->script, &text);
	ck_assert_msg(rc != 0 && strstr(text, "FAILED: "), "%s passed without max_prepared_statements:\n%s",
		      d->script, text);
	pgv_stop(&p);
}
END_TEST

/* The databases of the matrix, and "one": the same on a pool of one server. */
static const char *databases_with_one(void)
{
	static char buf[512];
	snprintf(buf, sizeof(buf), "%sone = host=127.0.0.1 port=%s dbname=" DB " pool_size=1\n", std_databases(),
		 getenv("PGV_TEST_PGPORT"));
	return buf;
}

/* Drivers' pipelined paths (issue 29): each checks its results, and that a second client of a pool of one is served. */
static const struct driver pipelined[] = {
	{ "python", "psycopg3_pipeline.py" },	/* pipeline(): plain, prepared, an error and a late sync */
	{ "python", "asyncpg_executemany.py" },	/* executemany(): one batch, one Sync */
};

START_TEST(pipelines_give_the_server_back)
{
	const struct driver *d = &pipelined[_i];
	struct pgv p;
	pgv_start(&p, POOL, databases_with_one(), std_userlist());
	drivers_setup(p.dir);
	const char *text;
	int rc = run_driver(&p, d->interp, d->script, &text);
	ck_assert_msg(rc == 0 && strstr(text, "ok: "), "%s exited %d:\n%s\n%s", d->script, rc, text,
		      pgv_log_tail(&p, 2000));
	ck_assert_msg(!pgv_log_contains(&p, "not idle"), "%s", pgv_log_tail(&p, 2000));
	pgv_stop(&p);
}
END_TEST

/*
 * libpq 18's max_protocol_version=latest asks for protocol 3.2: pgvalve's
 * NegotiateProtocolVersion brings it back to 3.0 (issue 13).
 */
START_TEST(libpq_newest_protocol)
{
	struct pgv p;
	pgv_start(&p, POOL, std_databases(), std_userlist());
	drivers_setup(p.dir);
	const char *text;
	int rc = run_driver(&p, "python", "libpq_protocol.py", &text);
	ck_assert_msg(rc == 0 && strstr(text, "ok: "), "libpq_protocol.py exited %d:\n%s\n%s", rc, text,
		      pgv_log_tail(&p, 2000));
	pgv_stop(&p);
}
END_TEST

static Suite *drivers_suite(void)
{
	Suite *s = suite_create("drivers");
	TCase *tc = pgv_tcase_create("matrix", 600);
	tcase_add_loop_test(tc, driver_default_prepares, 0, (int)(sizeof(drivers) / sizeof(drivers[0])));
	tcase_add_loop_test(tc, drivers_break_without_tracking, 0, (int)(sizeof(drivers) / sizeof(drivers[0])));
	tcase_add_test(tc, libpq_newest_protocol);
	tcase_add_loop_test(tc, pipelines_give_the_server_back, 0, (int)(sizeof(pipelined) / sizeof(pipelined[0])));
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return pgv_run_suite(drivers_suite());
}
