/*
 * test_replication.c - the `replication` startup parameter read as
 * PostgreSQL reads it, and the parameters a replication client's own
 * server is sent.
 */
#include <check.h>
#include <stdlib.h>

#include "common.h"
#include "replication.h"
#include "../check_main.h"

static enum replication_type parsed(const char *value)
{
	enum replication_type t = (enum replication_type)99;
	ck_assert_msg(replication_parse(value, &t), "\"%s\" refused", value);
	return t;
}

START_TEST(values_as_postgresql)
{
	ck_assert_int_eq(parsed("database"), REPLICATION_LOGICAL);
	const char *physical[] = { "true", "TRUE", "t", "tr", "on", "On", "yes", "y", "1" };
	for (size_t i = 0; i < ARRAY_SIZE(physical); i++)
		ck_assert_int_eq(parsed(physical[i]), REPLICATION_PHYSICAL);
	const char *none[] = { "false", "f", "off", "OFF", "of", "no", "n", "0" };
	for (size_t i = 0; i < ARRAY_SIZE(none); i++)
		ck_assert_int_eq(parsed(none[i]), REPLICATION_NONE);
	/* "database" is matched case-sensitively; "o" is ambiguous; anything else is an error */
	const char *bad[] = { "Database", "o", "", "truee", "2", "physical", "yes please" };
	enum replication_type t;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		ck_assert_msg(!replication_parse(bad[i], &t), "\"%s\" accepted", bad[i]);
	ck_assert_str_eq(replication_type_name(REPLICATION_NONE), "none");
	ck_assert_str_eq(replication_type_name(REPLICATION_LOGICAL), "logical");
	ck_assert_str_eq(replication_type_name(REPLICATION_PHYSICAL), "physical");
}
END_TEST

/* Everything but user, database, replication and _pq_ options goes to the server, as given. */
START_TEST(server_startup_parameters)
{
	struct startup_params sp = { .version = 196608, .count = 6,
		.names = { "user", "database", "replication", "options", "_pq_.x", "application_name" },
		.values = { "u", "d", "database", "-c enable_seqscan=off", "1", "abc" } };
	struct replication *r = replication_new(REPLICATION_LOGICAL, &sp);
	ck_assert(replication_has_param(r, "options"));
	ck_assert(replication_has_param(r, "Application_Name"));
	ck_assert(!replication_has_param(r, "user"));
	ck_assert(!replication_has_param(r, "datestyle"));
	struct pktbuf b;
	pktbuf_init(&b, 64);
	replication_put_startup(r, &b);
	static const char expect[] = "replication\0database\0options\0-c enable_seqscan=off\0application_name\0abc";
	ck_assert_uint_eq(b.len, sizeof(expect));
	ck_assert_int_eq(memcmp(b.buf, expect, sizeof(expect)), 0);
	pktbuf_free(&b);
	free(r);

	sp.count = 3;
	sp.values[2] = "on";
	r = replication_new(REPLICATION_PHYSICAL, &sp);
	pktbuf_init(&b, 64);
	replication_put_startup(r, &b);
	static const char expect_physical[] = "replication\0true";
	ck_assert_uint_eq(b.len, sizeof(expect_physical));
	ck_assert_int_eq(memcmp(b.buf, expect_physical, sizeof(expect_physical)), 0);
	pktbuf_free(&b);
	free(r);
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("replication");
	TCase *tc = tcase_create("parameters");
	tcase_add_test(tc, values_as_postgresql);
	tcase_add_test(tc, server_startup_parameters);
	suite_add_tcase(s, tc);
	return s;
}
