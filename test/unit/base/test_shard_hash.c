/*
 * test_shard_hash.c - a key's hash and shard as PostgreSQL 15 computes
 * them. The vectors were read from PostgreSQL itself:
 *   SELECT to_hex(hashint8extended(v, 8816678312871386365))   (likewise
 *   hashint4extended, hashint2extended, hashtextextended,
 *   uuid_hash_extended; 8816678312871386365 is HASH_PARTITION_SEED)
 * and the shards from rows inserted into PARTITION BY HASH tables and read
 * back with tableoid::regclass. test/integration/test_shard_hash checks
 * many more keys against a live server.
 */
#include <check.h>

#include "common.h"
#include "shard_hash.h"
#include "../check_main.h"

static uint64_t text_hash(const char *s)
{
	return shard_hash_text(s, strlen(s));
}

static uint64_t parsed(enum shard_key_type type, const char *text)
{
	uint64_t h = 0;
	ck_assert_msg(shard_hash_parse(type, text, strlen(text), &h) == 0, "%s refused", text);
	return h;
}

static bool refused(enum shard_key_type type, const char *text)
{
	uint64_t h;
	return shard_hash_parse(type, text, strlen(text), &h) < 0;
}

START_TEST(integers)
{
	ck_assert_uint_eq(shard_hash_int8(0), UINT64_C(0xc2e34bda39f0f0cd));
	ck_assert_uint_eq(shard_hash_int8(1), UINT64_C(0x52d621058124e6d5));
	ck_assert_uint_eq(shard_hash_int8(-1), UINT64_C(0xba5fc748095606c2));
	ck_assert_uint_eq(shard_hash_int8(42), UINT64_C(0x663218bcfb84b17f));
	ck_assert_uint_eq(shard_hash_int8(INT64_C(2147483648)), UINT64_C(0x44893a0f1e949193));
	ck_assert_uint_eq(shard_hash_int8(INT64_C(-2147483649)), UINT64_C(0xac09237e4899f89c));
	ck_assert_uint_eq(shard_hash_int8(INT64_MAX), UINT64_C(0x44893a0f1e949193));
	ck_assert_uint_eq(shard_hash_int8(INT64_MIN), UINT64_C(0xac09237e4899f89c));
	/* a bigint that fits in 32 bits hashes as the integer does */
	ck_assert_uint_eq(shard_hash_int4(INT32_MAX), UINT64_C(0xac09237e4899f89c));
	ck_assert_uint_eq(shard_hash_int4(INT32_MIN), UINT64_C(0x44893a0f1e949193));
	ck_assert_uint_eq(shard_hash_int8(INT32_MAX), shard_hash_int4(INT32_MAX));
	ck_assert_uint_eq(shard_hash_int8(INT32_MIN), shard_hash_int4(INT32_MIN));
	ck_assert_uint_eq(shard_hash_int4(42), UINT64_C(0x663218bcfb84b17f));
	ck_assert_uint_eq(shard_hash_int2(32767), UINT64_C(0xa6ac42e1ee4bb5eb));
	ck_assert_uint_eq(shard_hash_int2(-32768), UINT64_C(0x51ac94e226a0db9a));
	ck_assert_uint_eq(shard_hash_int2(-1), shard_hash_int8(-1));
}
END_TEST

START_TEST(texts)
{
	/* every tail length of lookup3 (0..11 bytes), a full block, and more */
	ck_assert_uint_eq(text_hash(""), UINT64_C(0xb0e33d0b543fbfc3));
	ck_assert_uint_eq(text_hash("a"), UINT64_C(0xa2f240f8823ba67b));
	ck_assert_uint_eq(text_hash("abc"), UINT64_C(0x325c02d16f43e1c2));
	ck_assert_uint_eq(text_hash("abcd"), UINT64_C(0x37eb4043f6fdb06e));
	ck_assert_uint_eq(text_hash("abcde"), UINT64_C(0x42bdebaa1b2c17d9));
	ck_assert_uint_eq(text_hash("abcdefgh"), UINT64_C(0x94619c573ca212b2));
	ck_assert_uint_eq(text_hash("abcdefghi"), UINT64_C(0x92e90b933de8cba0));
	ck_assert_uint_eq(text_hash("abcdefghijk"), UINT64_C(0xe39999edea562278));
	ck_assert_uint_eq(text_hash("abcdefghijkl"), UINT64_C(0x92b003d370554786));
	ck_assert_uint_eq(text_hash("abcdefghijklm"), UINT64_C(0xa1d42895caa786b3));
	ck_assert_uint_eq(text_hash("user@example.com"), UINT64_C(0xe6b5279166612fac));
	ck_assert_uint_eq(text_hash("h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93"), UINT64_C(0xc9104e6ea55c19a8));
	/* the seed: PostgreSQL's hashtextextended('abc', 0) */
	ck_assert_uint_eq(shard_hash_bytes("abc", 3, 0), UINT64_C(0xa25b273dd12feb97));
	/* an unaligned start hashes the same bytes alike */
	char buf[32] = "xabcdefghijklm";
	ck_assert_uint_eq(shard_hash_text(buf + 1, 13), UINT64_C(0xa1d42895caa786b3));
}
END_TEST

START_TEST(uuids)
{
	uint8_t zero[16] = {0}, ones[16];
	memset(ones, 0xff, sizeof(ones));
	ck_assert_uint_eq(shard_hash_uuid(zero), UINT64_C(0xb6b5d3c4aa5d92c2));
	ck_assert_uint_eq(shard_hash_uuid(ones), UINT64_C(0xfdeeb1999c98549e));
	ck_assert_uint_eq(parsed(SHARD_KEY_UUID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), UINT64_C(0x05e42c7f7f75bced));
	/* uuid_in's other spellings of the same value */
	ck_assert_uint_eq(parsed(SHARD_KEY_UUID, "{A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11}"), UINT64_C(0x05e42c7f7f75bced));
	ck_assert_uint_eq(parsed(SHARD_KEY_UUID, "a0eebc999c0b4ef8bb6d6bb9bd380a11"), UINT64_C(0x05e42c7f7f75bced));
	ck_assert_uint_eq(parsed(SHARD_KEY_UUID, "a0ee-bc99-9c0b-4ef8-bb6d-6bb9-bd38-0a11"), UINT64_C(0x05e42c7f7f75bced));
	ck_assert(refused(SHARD_KEY_UUID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1"));
	ck_assert(refused(SHARD_KEY_UUID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11-"));
	ck_assert(refused(SHARD_KEY_UUID, "a0eebc9-99c0b-4ef8-bb6d-6bb9bd380a11"));
	ck_assert(refused(SHARD_KEY_UUID, " a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"));
	ck_assert(refused(SHARD_KEY_UUID, "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"));
	ck_assert(refused(SHARD_KEY_UUID, "g0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"));
	ck_assert(refused(SHARD_KEY_UUID, ""));
}
END_TEST

START_TEST(integer_text)
{
	ck_assert_uint_eq(parsed(SHARD_KEY_INT8, "42"), shard_hash_int8(42));
	ck_assert_uint_eq(parsed(SHARD_KEY_INT8, "  +42 \n"), shard_hash_int8(42));
	ck_assert_uint_eq(parsed(SHARD_KEY_INT8, "-9223372036854775808"), shard_hash_int8(INT64_MIN));
	ck_assert_uint_eq(parsed(SHARD_KEY_INT8, "9223372036854775807"), shard_hash_int8(INT64_MAX));
	ck_assert_uint_eq(parsed(SHARD_KEY_INT8, "-0"), shard_hash_int8(0));
	ck_assert_uint_eq(parsed(SHARD_KEY_INT4, "-2147483648"), shard_hash_int4(INT32_MIN));
	ck_assert_uint_eq(parsed(SHARD_KEY_INT2, "-32768"), shard_hash_int2(INT16_MIN));
	ck_assert(refused(SHARD_KEY_INT8, "9223372036854775808"));
	ck_assert(refused(SHARD_KEY_INT8, "-9223372036854775809"));
	ck_assert(refused(SHARD_KEY_INT4, "2147483648"));
	ck_assert(refused(SHARD_KEY_INT2, "32768"));
	ck_assert(refused(SHARD_KEY_INT2, "-32769"));
	ck_assert(refused(SHARD_KEY_INT8, ""));
	ck_assert(refused(SHARD_KEY_INT8, "-"));
	ck_assert(refused(SHARD_KEY_INT8, "1.0"));
	ck_assert(refused(SHARD_KEY_INT8, "0x10"));
	ck_assert(refused(SHARD_KEY_INT8, "1_000"));
	ck_assert(refused(SHARD_KEY_INT8, "1 2"));
	ck_assert_uint_eq(parsed(SHARD_KEY_TEXT, "42"), text_hash("42"));
	ck_assert(shard_hash_parse(SHARD_KEY_TEXT, "a\0b", 3, &(uint64_t){0}) < 0);
}
END_TEST

START_TEST(shards)
{
	/* PARTITION BY HASH (k bigint), MODULUS 4 */
	ck_assert_uint_eq(shard_hash_shard(shard_hash_int8(0), 4), 0);
	ck_assert_uint_eq(shard_hash_shard(shard_hash_int8(1), 4), 0);
	ck_assert_uint_eq(shard_hash_shard(shard_hash_int8(-1), 4), 1);
	ck_assert_uint_eq(shard_hash_shard(shard_hash_int8(42), 4), 2);
	ck_assert_uint_eq(shard_hash_shard(shard_hash_int8(INT64_MAX), 4), 2);
	ck_assert_uint_eq(shard_hash_shard(shard_hash_int8(INT64_MIN), 4), 3);
	ck_assert_uint_eq(shard_hash_shard(shard_hash_int8(1000000), 4), 3);
	/* text, MODULUS 3 */
	ck_assert_uint_eq(shard_hash_shard(text_hash("user@example.com"), 3), 0);
	ck_assert_uint_eq(shard_hash_shard(text_hash("abc"), 3), 1);
	ck_assert_uint_eq(shard_hash_shard(text_hash("h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93"), 3), 1);
	ck_assert_uint_eq(shard_hash_shard(text_hash(""), 3), 2);
	ck_assert_uint_eq(shard_hash_shard(text_hash("a"), 3), 2);
	/* uuid, MODULUS 5 */
	ck_assert_uint_eq(shard_hash_shard(parsed(SHARD_KEY_UUID, "00000000-0000-0000-0000-000000000000"), 5), 0);
	ck_assert_uint_eq(shard_hash_shard(parsed(SHARD_KEY_UUID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), 5), 1);
	ck_assert_uint_eq(shard_hash_shard(parsed(SHARD_KEY_UUID, "ffffffff-ffff-ffff-ffff-ffffffffffff"), 5), 3);
	/* a NULL key adds nothing to the row hash (0): remainder 0, where PostgreSQL put a NULL bigint */
	ck_assert_uint_eq(shard_hash_remainder(0, 4), 0);
	ck_assert_uint_eq(shard_hash_remainder(0, 7), 0);
	/* one shard takes everything; a row hash folds columns in order */
	ck_assert_uint_eq(shard_hash_shard(shard_hash_int8(42), 1), 0);
	ck_assert_uint_eq(shard_hash_combine(0, 5), 5 + UINT64_C(0x49a0f4dd15e5a8e3));
	ck_assert_uint_ne(shard_hash_combine(shard_hash_combine(0, 1), 2), shard_hash_combine(shard_hash_combine(0, 2), 1));
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("shard_hash");
	TCase *tc = tcase_create("shard_hash");
	tcase_add_test(tc, integers);
	tcase_add_test(tc, texts);
	tcase_add_test(tc, uuids);
	tcase_add_test(tc, integer_text);
	tcase_add_test(tc, shards);
	suite_add_tcase(s, tc);
	return s;
}
