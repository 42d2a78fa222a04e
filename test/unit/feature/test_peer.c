/*
 * test_peer.c - the cancel key layout peers agree on (PgBouncer 1.19+):
 * positive pid, peer id in bytes 1-2, TTL 3 in byte 7's low bits; and the
 * long keys of protocol 3.2 clients (cancel_key.h): verified under the
 * process's or the fleet's secret, owner address inside, any changed byte
 * refused, the TTL free to go down.
 */
#include <check.h>
#include <stdlib.h>

#include "common.h"
#include "cancel_key.h"
#include "peer.h"
#include "config.h"
#include "instance.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include "../check_main.h"

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

static struct config test_cfg;

static void use_config(const char *secret, const char *addr, int port)
{
	memset(&test_cfg, 0, sizeof(test_cfg));
	test_cfg.cancel_key_secret = (char *)secret;
	test_cfg.cancel_advertise_addr = (char *)addr;
	test_cfg.cancel_advertise_port = port;
	test_cfg.listen_port = 6432;
	pgv.cfg = &test_cfg;
}

static void make_request(struct cancel_request *req, const char *secret, const char *addr, int port)
{
	uint32_t pid, key;
	use_config(secret, addr, port);
	cancel_key_make(0, &pid, &key);
	memset(req, 0, sizeof(*req));
	req->pid = pid;
	req->key_len = CANCEL_KEY_LONG_LEN;
	cancel_key_make_long(pid, key, -1, true, req->key);
	uint32_t found = 0;
	ck_assert(cancel_key_local(req, &found));
	ck_assert_uint_eq(found | CANCEL_KEY_TTL_MASK, key | CANCEL_KEY_TTL_MASK);
	ck_assert_uint_eq(cancel_request_ttl(req), 3);
	ck_assert(cancel_key_is_own(req));
}

START_TEST(long_key_without_secret_names_no_one)
{
	struct cancel_request req;
	struct sockaddr_storage ss;
	socklen_t len;
	make_request(&req, "", "10.1.2.3", 7000);
	ck_assert(!cancel_key_fleet_valid(&req));
	ck_assert(!cancel_key_owner(&req, &ss, &len));	/* no secret: no address */
	req.key[10] ^= 1;
	uint32_t found;
	ck_assert(!cancel_key_local(&req, &found));
}
END_TEST

START_TEST(long_key_with_secret_names_its_owner)
{
	struct cancel_request req;
	struct sockaddr_storage ss;
	socklen_t len;
	make_request(&req, "s3cret", "10.1.2.3", 7000);
	ck_assert(cancel_key_fleet_valid(&req));
	ck_assert(cancel_key_owner(&req, &ss, &len));
	const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
	ck_assert_int_eq(in->sin_family, AF_INET);
	ck_assert_uint_eq(ntohs(in->sin_port), 7000);
	ck_assert_uint_eq(ntohl(in->sin_addr.s_addr), 0x0A010203u);

	make_request(&req, "s3cret", "fd00::7", 0);
	ck_assert(cancel_key_owner(&req, &ss, &len));
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
	ck_assert_int_eq(in6->sin6_family, AF_INET6);
	ck_assert_uint_eq(ntohs(in6->sin6_port), 6432);	/* listen_port */
	ck_assert_uint_eq(in6->sin6_addr.s6_addr[15], 7);

	/* A forward lowers the TTL: still verifies. */
	cancel_request_lower_ttl(&req);
	ck_assert_uint_eq(cancel_request_ttl(&req), 2);
	ck_assert(cancel_key_fleet_valid(&req));

	/* Another secret: refused. */
	use_config("other", "", 0);
	ck_assert(!cancel_key_fleet_valid(&req));
	uint32_t found;
	ck_assert(!cancel_key_local(&req, &found));
}
END_TEST

START_TEST(long_key_any_changed_byte_refused)
{
	struct cancel_request req;
	make_request(&req, "s3cret", "10.1.2.3", 7000);
	for (int i = 0; i < CANCEL_KEY_LONG_LEN; i++) {
		for (int bit = 0; bit < 8; bit++) {
			if (i == 3 && bit < 2)
				continue;	/* the TTL bits */
			struct cancel_request bad = req;
			bad.key[i] ^= (uint8_t)(1u << bit);
			ck_assert_msg(!cancel_key_fleet_valid(&bad), "byte %d bit %d changed, still valid", i, bit);
		}
	}
	struct cancel_request bad = req;
	bad.pid ^= 0x100;
	ck_assert(!cancel_key_fleet_valid(&bad));
	bad = req;
	bad.key_len = 47;
	ck_assert(!cancel_key_fleet_valid(&bad));
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("peer");
	TCase *tc = tcase_create("keys");
	tcase_add_test(tc, peer_id_in_bytes_1_and_2);
	tcase_add_test(tc, keys_stay_random);
	tcase_add_test(tc, long_key_without_secret_names_no_one);
	tcase_add_test(tc, long_key_with_secret_names_its_owner);
	tcase_add_test(tc, long_key_any_changed_byte_refused);
	suite_add_tcase(s, tc);
	return s;
}
