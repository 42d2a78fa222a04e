/*
 * test_peer.c - the cancel key layout peers agree on (PgBouncer 1.19+):
 * positive pid, peer id in bytes 1-2, TTL 3 in byte 7's low bits.
 */
#include <check.h>
#include <stdlib.h>

#include "pgvalve/common.h"
#include "pgvalve/cancel_key.h"
#include "pgvalve/peer.h"
#include "check_main.h"

/* The 8 bytes as they go out in BackendKeyData (network order halves). */
static void wire_bytes(uint32_t pid, uint32_t key, uint8_t out[8])
{
	for (int i = 0; i < 4; i++) {
		out[i] = (uint8_t)(pid >> (24 - 8 * i));
		out[4 + i] = (uint8_t)(key >> (24 - 8 * i));
	}
}

START_TEST(peer_id_in_bytes_1_and_2)
{
	static const int ids[] = { 1, 2, 255, 256, 258, 4660, 16383 };
	for (size_t i = 0; i < ARRAY_SIZE(ids); i++) {
		for (int n = 0; n < 200; n++) {
			uint32_t pid, key;
			uint8_t b[8];
			cancel_key_make(ids[i], &pid, &key);
			wire_bytes(pid, key, b);
			ck_assert_int_eq(b[1], ids[i] & 0xFF);
			ck_assert_int_eq(b[2], (ids[i] >> 8) & 0xFF);
			ck_assert_int_eq(b[7] & 3, 3);
			ck_assert_int_eq(b[0] & 0x80, 0);
			ck_assert_int_eq(cancel_key_peer_id(pid), ids[i]);
			ck_assert_uint_eq(cancel_key_ttl(key), 3);
		}
	}
}
END_TEST

START_TEST(keys_stay_random)
{
	/* Without peering only the sign bit is fixed; with it the other 37 bits still vary. */
	uint32_t or_pid = 0, and_pid = ~0u, or_key = 0, and_key = ~0u;
	for (int n = 0; n < 2000; n++) {
		uint32_t pid, key;
		cancel_key_make(0, &pid, &key);
		ck_assert_uint_eq(pid & 0x80000000u, 0);
		or_pid |= pid, and_pid &= pid, or_key |= key, and_key &= key;
	}
	ck_assert_uint_eq(or_pid, 0x7FFFFFFFu);
	ck_assert_uint_eq(and_pid, 0);
	ck_assert_uint_eq(or_key, 0xFFFFFFFFu);
	ck_assert_uint_eq(and_key, 0);

	or_pid = 0, and_pid = ~0u, or_key = 0, and_key = ~0u;
	for (int n = 0; n < 2000; n++) {
		uint32_t pid, key;
		cancel_key_make(7, &pid, &key);
		or_pid |= pid, and_pid &= pid, or_key |= key, and_key &= key;
	}
	ck_assert_uint_eq(or_pid & 0x7F0000FFu, 0x7F0000FFu);
	ck_assert_uint_eq(and_pid & 0x7F0000FFu, 0);
	ck_assert_uint_eq(or_key, 0xFFFFFFFFu);
	ck_assert_uint_eq(and_key, 3);
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("peer");
	TCase *tc = tcase_create("keys");
	tcase_add_test(tc, peer_id_in_bytes_1_and_2);
	tcase_add_test(tc, keys_stay_random);
	suite_add_tcase(s, tc);
	return s;
}
