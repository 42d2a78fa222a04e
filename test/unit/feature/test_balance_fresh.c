/*
 * test_balance_fresh.c - the read balancer's freshness, its pure parts:
 * which texts raise a client's position (SET pgvalve.min_lsn, and nothing
 * that merely looks like it), and the position a standby must report to
 * have replayed a primary's insert position at a WAL page's start.
 */
#include <check.h>
#include <limits.h>
#include <stdlib.h>

#include "common.h"
#include "balance_fresh.h"
#include "../check_main.h"

static long long set_of(const char *sql)
{
	return balance_fresh_min_lsn_set(sql, strlen(sql));
}

START_TEST(min_lsn_sets)
{
	ck_assert_int_eq(set_of("SET pgvalve.min_lsn = '0/1234ABC'"), 0x1234ABC);
	ck_assert_int_eq(set_of("set SESSION Pgvalve . MIN_LSN to '16/b374d848';"), 0x16b374d848LL);
	ck_assert_int_eq(set_of("  /* c */ SET pgvalve.min_lsn='7FFFFFFF/FFFFFFFF' -- x\n"), LLONG_MAX);
	ck_assert_int_eq(set_of("SET pgvalve.min_lsn = '0/0'"), 0);
	/* the same setting for PostgreSQL: its name quoted, in any case; the value as an identifier */
	ck_assert_int_eq(set_of("SET \"pgvalve.min_lsn\" = '0/10'"), 16);
	ck_assert_int_eq(set_of("SET \"PGVALVE\".\"Min_Lsn\" = '0/10'"), 16);
	ck_assert_int_eq(set_of("SET pgvalve.min_lsn = \"1/0\""), 1LL << 32);
}
END_TEST

START_TEST(not_min_lsn_sets)
{
	static const char *const no[] = {
		"SET pgvalve.min_lsn = '0/1'; DELETE FROM t",
		"SET pgvalve.min_lsn = 0",
		"SET pgvalve.min_lsn = '0/1",
		"SET pgvalve.min_lsn = '01'",
		"SET pgvalve.min_lsn = '/1'",
		"SET pgvalve.min_lsn = '1/'",
		"SET pgvalve.min_lsn = '1/2/3'",
		"SET pgvalve.min_lsn = '123456789/0'",
		"SET pgvalve.min_lsn = 'FFFFFFFF/0'",
		"SET pgvalve.min_lsn = 'x/1'",
		"SET pgvalve.min_lsn = E'0/1'",
		"SET pgvalve.min_lsn = $$0/1$$",
		"SET LOCAL pgvalve.min_lsn = '0/1'",
		"SET \"pgvalve\" = '0/1'",
		"SET \"pgvalve.min_lsn.x\" = '0/1'",
		"SET pgvalve.min_lsn = \"0/1",
		"SET pgvalve.other = '0/1'",
		"SET min_lsn = '0/1'",
		"SELECT 'SET pgvalve.min_lsn = ''0/1'''",
		"/* SET pgvalve.min_lsn = '0/1' */",
		"SET pgvalve.min_lsn",
		"",
	};
	for (size_t i = 0; i < ARRAY_SIZE(no); i++)
		ck_assert_msg(set_of(no[i]) == -1, "raised a position: %s", no[i]);
	/* the text ends at its length */
	ck_assert_int_eq(balance_fresh_min_lsn_set("SET pgvalve.min_lsn = '0/12'", 26), -1);
}
END_TEST

START_TEST(page_starts)
{
	/* nothing on the page yet: short header (24 bytes), long header at a segment's start (40) */
	ck_assert_int_eq(balance_fresh_position_floor(3 * 8192 + 24, 8192), 3 * 8192);
	ck_assert_int_eq(balance_fresh_position_floor(16 * 1024 * 1024 + 40, 8192), 16 * 1024 * 1024);
	/* a record's end inside the page: itself */
	ck_assert_int_eq(balance_fresh_position_floor(3 * 8192 + 48, 8192), 3 * 8192 + 48);
	ck_assert_int_eq(balance_fresh_position_floor(3 * 8192 + 8000, 8192), 3 * 8192 + 8000);
	ck_assert_int_eq(balance_fresh_position_floor(3 * 8192, 8192), 3 * 8192);
	/* another page size, or none known */
	ck_assert_int_eq(balance_fresh_position_floor(5 * 32768 + 24, 32768), 5 * 32768);
	ck_assert_int_eq(balance_fresh_position_floor(5 * 8192 + 24, 32768), 5 * 8192 + 24);
	ck_assert_int_eq(balance_fresh_position_floor(8192 + 24, 0), 8192 + 24);
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("balance_fresh");
	TCase *tc = tcase_create("fresh");
	tcase_add_test(tc, min_lsn_sets);
	tcase_add_test(tc, not_min_lsn_sets);
	tcase_add_test(tc, page_starts);
	suite_add_tcase(s, tc);
	return s;
}
