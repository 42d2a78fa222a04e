/*
 * test_pgoptions.c - the `options` startup parameter as PostgreSQL splits
 * it, and the settings PgBouncer accepts from it.
 */
#include <check.h>
#include <stdlib.h>

#include "common.h"
#include "pgoptions.h"
#include "../check_main.h"

static void expect_settings(const char *options, int count, const char *const *pairs)
{
	struct pgoptions o;
	char err[200] = "";
	ck_assert_msg(pgoptions_parse(options, &o, err, sizeof(err)), "%s: %s", options, err);
	ck_assert_int_eq(o.count, count);
	for (int i = 0; i < count; i++) {
		ck_assert_str_eq(o.names[i], pairs[2 * i]);
		ck_assert_str_eq(o.values[i], pairs[2 * i + 1]);
	}
	pgoptions_free(&o);
}

START_TEST(the_three_forms)
{
	expect_settings("-c datestyle=German", 1, (const char *const[]){ "datestyle", "German" });
	expect_settings("-cdatestyle=German", 1, (const char *const[]){ "datestyle", "German" });
	expect_settings("--datestyle=German", 1, (const char *const[]){ "datestyle", "German" });
	expect_settings("  -c a=1\t--b=2   -cc=3 ", 3, (const char *const[]){ "a", "1", "b", "2", "c", "3" });
	expect_settings("", 0, NULL);
	expect_settings("   ", 0, NULL);
	/* an empty value is a value */
	expect_settings("-c search_path=", 1, (const char *const[]){ "search_path", "" });
}
END_TEST

START_TEST(backslash_escapes)
{
	/* psql "options='-c datestyle=German,\ YMD'": the escaped space stays in the word */
	expect_settings("-c datestyle=German,\\ YMD", 1, (const char *const[]){ "datestyle", "German, YMD" });
	expect_settings("-c application_name=a\\\\b", 1, (const char *const[]){ "application_name", "a\\b" });
	expect_settings("--x=\\=", 1, (const char *const[]){ "x", "=" });
}
END_TEST

START_TEST(dashes_in_names)
{
	expect_settings("--statement-timeout=5s", 1, (const char *const[]){ "statement_timeout", "5s" });
	expect_settings("-c client-encoding=UTF8", 1, (const char *const[]){ "client_encoding", "UTF8" });
}
END_TEST

START_TEST(anything_else_is_refused)
{
	static const char *const bad[] = { "-d 5", "datestyle=German", "-c", "-c =x", "-c novalue", "--", "--=1",
					   "-c a=1 -B 8", "-e" };
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct pgoptions o;
		char err[200] = "";
		ck_assert_msg(!pgoptions_parse(bad[i], &o, err, sizeof(err)), "accepted \"%s\"", bad[i]);
		ck_assert_str_eq(err, "unsupported options startup parameter: only '-c config=val' and "
				      "'--config=val' are allowed");
		ck_assert_ptr_null(o.text);
	}
	/* more settings than fit */
	char many[2048] = "";
	for (int i = 0; i <= PGOPTIONS_MAX; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "-c p%d=%d ", i, i);
	struct pgoptions o;
	char err[200];
	ck_assert(!pgoptions_parse(many, &o, err, sizeof(err)));
	ck_assert_str_eq(err, "too many settings in options");
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("pgoptions");
	TCase *tc = tcase_create("parse");
	tcase_add_test(tc, the_three_forms);
	tcase_add_test(tc, backslash_escapes);
	tcase_add_test(tc, dashes_in_names);
	tcase_add_test(tc, anything_else_is_refused);
	suite_add_tcase(s, tc);
	return s;
}
