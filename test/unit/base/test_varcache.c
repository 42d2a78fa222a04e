/*
 * test_varcache.c - the values a pool knows its servers accept, which
 * decide whether a login needs a server to try its startup parameters.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "proto.h"
#include "varcache.h"
#include "../check_main.h"

static int idx_of(const char *name)
{
	int idx = varcache_index(name);
	ck_assert_int_ge(idx, 0);
	return idx;
}

/* A client's varcache with one value. */
static struct varcache *one(const char *name, const char *value)
{
	struct varcache *vc = NULL;
	varcache_set(&vc, idx_of(name), value);
	return vc;
}

START_TEST(welcome_values_and_taken_values_are_known)
{
	varcache_configure(NULL);
	struct varcache_accepted acc = { 0 };
	struct varcache *welcome = one("DateStyle", "ISO, MDY");
	varcache_set(&welcome, idx_of("client_encoding"), "UTF8");

	struct varcache *same = one("datestyle", "ISO, MDY");
	varcache_set(&same, idx_of("client_encoding"), "UTF8");
	ck_assert(varcache_all_accepted(same, welcome, &acc));
	ck_assert(varcache_all_accepted(NULL, welcome, &acc));

	/* a value of its own: unknown until a server took it, then known to every login */
	struct varcache *german = one("DateStyle", "German");
	varcache_set(&german, idx_of("client_encoding"), "UTF8");
	ck_assert(!varcache_all_accepted(german, welcome, &acc));
	varcache_accept(&acc, german, welcome);
	ck_assert(varcache_all_accepted(german, welcome, &acc));
	struct varcache *german2 = one("DateStyle", "German");
	ck_assert(varcache_all_accepted(german2, welcome, &acc));
	/* known for that parameter only */
	struct varcache *tz = one("TimeZone", "German");
	ck_assert(!varcache_all_accepted(tz, welcome, &acc));
	/* taking values records only the unknown ones: the welcome's client_encoding took no slot */
	int used = 0;
	for (int i = 0; i < VARCACHE_ACCEPTED_MAX; i++)
		used += acc.values[i] != NULL;
	ck_assert_int_eq(used, 1);

	varcache_unref(welcome);
	varcache_unref(same);
	varcache_unref(german);
	varcache_unref(german2);
	varcache_unref(tz);
	varcache_accepted_free(&acc);
	ck_assert_ptr_null(acc.values[0]);
}
END_TEST

START_TEST(never_refused_or_never_applied_values_need_no_server)
{
	varcache_configure(NULL);
	struct varcache_accepted acc = { 0 };
	/* PostgreSQL takes any application_name */
	struct varcache *app = one("application_name", "worker-4711");
	ck_assert(varcache_all_accepted(app, NULL, &acc));
	/* read-only values are never applied, so never tried */
	struct varcache *ro = one("server_version", "99");
	ck_assert(varcache_all_accepted(ro, NULL, &acc));
	struct varcache *sp = one("search_path", "a, b");
	ck_assert(!varcache_all_accepted(sp, NULL, &acc));
	varcache_unref(app);
	varcache_unref(ro);
	varcache_unref(sp);
}
END_TEST

START_TEST(bounded_the_oldest_goes)
{
	varcache_configure(NULL);
	struct varcache_accepted acc = { 0 };
	struct varcache *vc[VARCACHE_ACCEPTED_MAX + 1];
	char value[32];
	for (int i = 0; i <= VARCACHE_ACCEPTED_MAX; i++) {
		snprintf(value, sizeof(value), "Etc/GMT+%d", i);
		vc[i] = one("TimeZone", value);
		varcache_accept(&acc, vc[i], NULL);
	}
	ck_assert(!varcache_all_accepted(vc[0], NULL, &acc));
	for (int i = 1; i <= VARCACHE_ACCEPTED_MAX; i++)
		ck_assert_msg(varcache_all_accepted(vc[i], NULL, &acc), "value %d", i);
	/* the pair pushed out, taken again, pushes out the next oldest */
	varcache_accept(&acc, vc[0], NULL);
	ck_assert(varcache_all_accepted(vc[0], NULL, &acc));
	ck_assert(!varcache_all_accepted(vc[1], NULL, &acc));
	for (int i = 0; i <= VARCACHE_ACCEPTED_MAX; i++)
		varcache_unref(vc[i]);
	varcache_accepted_free(&acc);
}
END_TEST

/*
 * varcache_same: two caches built apart with the same values are the same
 * (values are interned), and then neither diff has anything to add, also
 * when they differ in a read-only parameter only; one value apart, or one
 * value more, and they differ.
 */
START_TEST(same_values_need_no_diff)
{
	varcache_configure(NULL);
	struct varcache *a = one("DateStyle", "ISO, MDY");
	varcache_set(&a, idx_of("client_encoding"), "UTF8");
	struct varcache *b = one("client_encoding", "UTF8");
	varcache_set(&b, idx_of("datestyle"), "ISO, MDY");
	ck_assert(varcache_same(a, b));
	ck_assert(varcache_same(a, a));
	ck_assert(varcache_same(NULL, NULL));
	ck_assert(!varcache_same(a, NULL));
	uint8_t mem[512];
	struct pktbuf sql;
	pktbuf_init_fixed(&sql, mem, sizeof(mem));
	ck_assert_int_eq(varcache_diff_sql(a, b, &sql), 0);
	ck_assert_int_eq(varcache_diff_encoding_sql(a, b, &sql), 0);
	ck_assert_uint_eq(sql.len, 0);

	struct varcache *c = one("DateStyle", "German");
	varcache_set(&c, idx_of("client_encoding"), "UTF8");
	ck_assert(!varcache_same(a, c));
	ck_assert_int_gt(varcache_diff_sql(c, a, &sql), 0);	/* the diff the fast path must not skip */
	varcache_set(&c, idx_of("DateStyle"), "ISO, MDY");
	varcache_set(&c, idx_of("in_hot_standby"), "on");	/* read-only: apart only there, still the same */
	ck_assert(varcache_same(a, c) && varcache_same(c, a));
	ck_assert_int_eq(varcache_diff_sql(c, a, &sql) + varcache_diff_sql(a, c, &sql), 0);
	varcache_set(&b, idx_of("TimeZone"), "UTC");
	ck_assert(!varcache_same(a, b));
	varcache_unref(a);
	varcache_unref(b);
	varcache_unref(c);
}
END_TEST

/* The debug line's spelling (PgBouncer's): quotes doubled, RESET for a value to drop, cut short with "...". */
START_TEST(diff_described_as_pgbouncer_logs_it)
{
	varcache_configure(NULL);
	struct varcache *client = one("DateStyle", "ISO");
	varcache_set(&client, idx_of("application_name"), "it's");
	struct varcache *server = one("TimeZone", "UTC");
	char line[200];
	varcache_diff_describe(client, server, line, sizeof(line));
	ck_assert_ptr_nonnull(strstr(line, "SET DateStyle='ISO';"));
	ck_assert_ptr_nonnull(strstr(line, "SET application_name='it''s';"));
	ck_assert_ptr_nonnull(strstr(line, "RESET TimeZone;"));
	char small[16];
	varcache_diff_describe(client, server, small, sizeof(small));
	ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
	ck_assert_str_eq(small + sizeof(small) - 4, "...");
	varcache_diff_describe(client, client, line, sizeof(line));
	ck_assert_str_eq(line, "");
	varcache_unref(client);
	varcache_unref(server);
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("varcache");
	TCase *tc = tcase_create("accepted");
	tcase_add_test(tc, welcome_values_and_taken_values_are_known);
	tcase_add_test(tc, never_refused_or_never_applied_values_need_no_server);
	tcase_add_test(tc, bounded_the_oldest_goes);
	tcase_add_test(tc, same_values_need_no_diff);
	tcase_add_test(tc, diff_described_as_pgbouncer_logs_it);
	suite_add_tcase(s, tc);
	return s;
}
