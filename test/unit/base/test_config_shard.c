/*
 * test_config_shard.c - a sharded [databases] entry (src/base/config_shard.c):
 * shards= and sharding_key= read into db_config.sharding, copied with the
 * entry, and every rule that needs the whole file refused at load with a
 * message naming the file, line, database and what to do. A build without
 * libpg_query (--without-pg-query) refuses any sharded entry instead.
 */
#include "common.h"
#include "config.h"
#include "config_shard.h"
#include "../check_main.h"

#include <check.h>

#define SHARDS "[databases]\n" \
	"app_s0 = host=10.0.0.1 dbname=app\n" \
	"app_s1 = host=10.0.0.2 dbname=app\n" \
	"app_s2 = host=10.0.0.3 dbname=app\n"

static struct config *load_ok(const char *text)
{
	struct config *cfg = NULL;
	struct config_error err = { .message = "" };
	ck_assert_msg(config_load_string(text, "t.ini", &cfg, &err) == 0, "load failed: %s", err.message);
	return cfg;
}

static const char *load_fail(const char *text)
{
	static struct config_error err;
	struct config *cfg = NULL;
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(config_load_string(text, "t.ini", &cfg, &err), -1);
	ck_assert_ptr_null(cfg);
	return err.message;
}

#define assert_contains(hay, needle) \
	ck_assert_msg(strstr((hay), (needle)) != NULL, "\"%s\" does not contain \"%s\"", (hay), (needle))

#ifdef HAVE_PG_QUERY
START_TEST(sharded_entry_read)
{
	struct config *cfg = load_ok(SHARDS "app = shards=app_s0,app_s1,app_s2 sharding_key=Users.ID,orders.user_id,"
					     "tenant_id pool_mode=transaction\n[pgbouncer]\n");
	const struct db_config *app = config_find_db(cfg, "app");
	ck_assert_ptr_nonnull(app);
	const struct shard_config *sc = app->sharding;
	ck_assert_ptr_nonnull(sc);
	ck_assert_int_eq(sc->shard_count, 3);
	ck_assert_str_eq(sc->shards[0], "app_s0");
	ck_assert_str_eq(sc->shards[2], "app_s2");
	ck_assert_int_eq(sc->key_count, 3);
	/* unquoted identifiers fold to lower case, as in SQL */
	ck_assert_str_eq(sc->keys[0].table, "users");
	ck_assert_str_eq(sc->keys[0].column, "id");
	ck_assert_str_eq(sc->keys[1].table, "orders");
	ck_assert_str_eq(sc->keys[1].column, "user_id");
	/* a bare column: every table that has it */
	ck_assert_str_eq(sc->keys[2].table, "");
	ck_assert_str_eq(sc->keys[2].column, "tenant_id");
	ck_assert_int_eq(app->pool_mode, POOL_MODE_TRANSACTION);
	ck_assert_ptr_null(config_find_db(cfg, "app_s0")->sharding);
	ck_assert_int_eq(cfg->sharded_databases, 1);

	/* an entry's copy (a reload's, a pool's) carries its own copy of the sharding */
	struct db_config *copy = config_db_clone(app, "app");
	ck_assert_ptr_ne(copy->sharding, sc);
	ck_assert_ptr_ne(copy->sharding->shards[1], sc->shards[1]);
	ck_assert_str_eq(copy->sharding->shards[1], "app_s1");
	ck_assert_str_eq(copy->sharding->keys[1].column, "user_id");
	config_db_free(copy);
	config_free(cfg);

	/* quoted lists may have blanks; a shard may come before or after its sharded entry */
	cfg = load_ok("[databases]\napp = shards='app_s1 , app_s0' sharding_key=' id '\n"
		      "app_s0 = host=a\napp_s1 = host=b\n[pgbouncer]\n");
	sc = config_find_db(cfg, "app")->sharding;
	ck_assert_int_eq(sc->shard_count, 2);
	ck_assert_str_eq(sc->shards[0], "app_s1");
	ck_assert_str_eq(sc->keys[0].column, "id");
	config_free(cfg);

	/* one shard is a modulus of 1 */
	cfg = load_ok(SHARDS "app = shards=app_s0 sharding_key=id\n[pgbouncer]\n");
	ck_assert_int_eq(config_find_db(cfg, "app")->sharding->shard_count, 1);
	config_free(cfg);
}
END_TEST

START_TEST(values_refused)
{
	assert_contains(load_fail(SHARDS "app = shards='' sharding_key=id\n[pgbouncer]\n"),
			"t.ini:5: database \"app\": empty value for \"shards\"");
	assert_contains(load_fail(SHARDS "app = shards=' ' sharding_key=id\n[pgbouncer]\n"),
			"t.ini:5: database \"app\": \"shards\" needs at least one database name");
	assert_contains(load_fail(SHARDS "app = shards=app_s0,,app_s1 sharding_key=id\n[pgbouncer]\n"),
			"\"shards\": an empty database name");
	assert_contains(load_fail(SHARDS "app = shards=app_s0 sharding_key=' '\n[pgbouncer]\n"),
			"\"sharding_key\" needs at least one column");
	assert_contains(load_fail(SHARDS "app = shards=app_s0 sharding_key=a.b.c\n[pgbouncer]\n"),
			"\"sharding_key\": \"a.b.c\" is not table.column or column");
	assert_contains(load_fail(SHARDS "app = shards=app_s0 sharding_key=users.\n[pgbouncer]\n"),
			"\"users.\" is not table.column or column");
	assert_contains(load_fail(SHARDS "app = shards=app_s0 sharding_key='\"Users\".id'\n[pgbouncer]\n"),
			"is not table.column or column");
	assert_contains(load_fail(SHARDS "app = shards=app_s0 sharding_key=1id\n[pgbouncer]\n"),
			"\"1id\" is not table.column or column");
	assert_contains(load_fail(SHARDS "app = shards=app_s0 sharding_key=users.id,USERS.ID\n[pgbouncer]\n"),
			"\"sharding_key\": users.id is listed twice");
	assert_contains(load_fail(SHARDS "app = shards=app_s0 sharding_key=users.id,users.org_id\n[pgbouncer]\n"),
			"\"sharding_key\": users.org_id gives its table a second key column");
	assert_contains(load_fail(SHARDS "app = shards=app_s0 sharding_key=id,id\n[pgbouncer]\n"),
			"\"sharding_key\": id is listed twice");
	char key[128];
	memset(key, 'k', 64);
	key[64] = '\0';
	char text[512];
	snprintf(text, sizeof(text), SHARDS "app = shards=app_s0 sharding_key=%s\n[pgbouncer]\n", key);
	assert_contains(load_fail(text), "at most 63 bytes");
}
END_TEST

START_TEST(whole_file_rules)
{
	assert_contains(load_fail(SHARDS "app = shards=app_s0,app_s1\n[pgbouncer]\n"),
			"t.ini:5: database \"app\": shards= needs sharding_key=");
	assert_contains(load_fail(SHARDS "app = sharding_key=id\n[pgbouncer]\n"),
			"t.ini:5: database \"app\": sharding_key= needs shards=");
	assert_contains(load_fail(SHARDS "app = host=x shards=app_s0 sharding_key=id\n[pgbouncer]\n"),
			"database \"app\": a sharded database has no host of its own");
	assert_contains(load_fail(SHARDS "app = dbname=x shards=app_s0 sharding_key=id\n[pgbouncer]\n"),
			"a sharded database has no dbname of its own");
	assert_contains(load_fail(SHARDS "app = user=x shards=app_s0 sharding_key=id\n[pgbouncer]\n"),
			"a sharded database has no user of its own");
	assert_contains(load_fail(SHARDS "app = shards=app_s0,app_s9 sharding_key=id\n[pgbouncer]\n"),
			"t.ini:5: database \"app\": shard \"app_s9\" is not a [databases] entry");
	assert_contains(load_fail(SHARDS "app = shards=app_s0,app sharding_key=id\n[pgbouncer]\n"),
			"shard \"app\" is the sharded database itself");
	assert_contains(load_fail(SHARDS "app = shards=app_s0,app_s1,app_s0 sharding_key=id\n[pgbouncer]\n"),
			"shard \"app_s0\" is listed twice");
	assert_contains(load_fail(SHARDS "* = host=y\napp = shards=app_s0,* sharding_key=id\n[pgbouncer]\n"),
			"shard \"*\" is the fallback entry");
	assert_contains(load_fail(SHARDS "* = shards=app_s0 sharding_key=id\n[pgbouncer]\n"),
			"the fallback entry \"*\" cannot be sharded");
	assert_contains(load_fail(SHARDS "a = shards=app_s0 sharding_key=id\nb = shards=a sharding_key=id\n[pgbouncer]\n"),
			"t.ini:6: database \"b\": shard \"a\" is itself sharded");
	/* a later line for the same name replaces the whole entry, sharding too */
	struct config *cfg = load_ok(SHARDS "app = shards=app_s0 sharding_key=id\napp = host=z\n[pgbouncer]\n");
	ck_assert_ptr_null(config_find_db(cfg, "app")->sharding);
	ck_assert_int_eq(cfg->sharded_databases, 0);
	config_free(cfg);
}
END_TEST
#else
/* Without libpg_query (--without-pg-query): a sharded entry is refused at load, never left unrouted. */
START_TEST(sharded_entry_refused_without_pg_query)
{
	assert_contains(load_fail(SHARDS "app = shards=app_s0 sharding_key=id\n[pgbouncer]\n"),
			"t.ini:5: database \"app\": sharded databases (shards=) need pgvalve built with libpg_query");
	struct config *cfg = load_ok(SHARDS "[pgbouncer]\n");
	config_free(cfg);
}
END_TEST
#endif

Suite *unit_suite(void)
{
	Suite *s = suite_create("config_shard");
	TCase *tc = tcase_create("config_shard");
#ifdef HAVE_PG_QUERY
	tcase_add_test(tc, sharded_entry_read);
	tcase_add_test(tc, values_refused);
	tcase_add_test(tc, whole_file_rules);
#else
	tcase_add_test(tc, sharded_entry_refused_without_pg_query);
#endif
	suite_add_tcase(s, tc);
	return s;
}
