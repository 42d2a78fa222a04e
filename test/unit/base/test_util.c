/*
 * test_util.c - the hand-made texts of log lines (util.c) against what
 * libc prints for them: the prefix "C-%p: db/user@host:port" as snprintf
 * writes it, truncation included, and IPv4 addresses as inet_ntop does.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "../check_main.h"

START_TEST(prefix_is_what_snprintf_prints)
{
	static const struct {
		uintptr_t obj;
		const char *db, *user, *host;
		int port;
	} cases[] = {
		{ 0x55d1c0a81230u, "bench", "bench", "127.0.0.1", 54321 },
		{ 0x1u, "(nodb)", "(nouser)", "unix", 6432 },
		{ 0xfu, "", "", "", 0 },
		{ UINTPTR_MAX, "d", "u", "[::1]", 65535 },
		{ 0x7f0000001000u, "a database name of some length", "user", "10.200.3.45", -1 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char want[200], got[200];
		const void *obj = (const void *)cases[i].obj;
		int n = snprintf(want, sizeof(want), "S-%p: %s/%s@%s:%d", obj, cases[i].db, cases[i].user,
				 cases[i].host, cases[i].port);
		ck_assert_str_eq(log_prefix_text(got, sizeof(got), 'S', obj, cases[i].db, cases[i].user,
						 cases[i].host, cases[i].port), want);
		/* every shorter buffer: cut where snprintf cuts */
		for (size_t size = 1; size <= (size_t)n + 1; size++) {
			char cut[200];
			memset(got, 'z', sizeof(got));
			snprintf(cut, size, "S-%p: %s/%s@%s:%d", obj, cases[i].db, cases[i].user, cases[i].host,
				 cases[i].port);
			log_prefix_text(got, size, 'S', obj, cases[i].db, cases[i].user, cases[i].host, cases[i].port);
			ck_assert_str_eq(got, cut);
			ck_assert_int_eq(got[size], 'z');	/* nothing written past the buffer */
		}
	}
}
END_TEST

START_TEST(ipv4_is_what_inet_ntop_prints)
{
	srandom(12345);
	for (int i = 0; i < 20000; i++) {
		struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons((uint16_t)i) };
		uint32_t a = (uint32_t)random();
		if (i < 256)
			a = (uint32_t)i * 0x01010101u;	/* every octet value, in every place */
		in.sin_addr.s_addr = a;
		char want[INET_ADDRSTRLEN], got[INET6_ADDRSTRLEN + 2];
		int port = -1;
		inet_ntop(AF_INET, &in.sin_addr, want, sizeof(want));
		ck_assert(sockaddr_ip_text((struct sockaddr *)&in, got, sizeof(got), &port));
		ck_assert_str_eq(got, want);
		ck_assert_int_eq(port, i);
	}
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("util");
	TCase *tc = tcase_create("util");
	tcase_add_test(tc, prefix_is_what_snprintf_prints);
	tcase_add_test(tc, ipv4_is_what_inet_ntop_prints);
	suite_add_tcase(s, tc);
	return s;
}
