/*
 * test_scale_proto.c - test/bench/scale_proto.c, the scale load
 * generator's wire protocol: the messages it builds (byte for byte), the
 * framing of a server's byte stream, ErrorResponse fields, and its md5
 * and SCRAM-SHA-256 answers, the SCRAM ones run against pgvalve's own
 * server side (scram_server_*) with the RFC 7677 secret and with a fresh
 * one, the key cache deriving once per salt.
 */
#include "common.h"
#include "auth_file.h"
#include "scram.h"
#include "scale_proto.h"
#include "../check_main.h"

#include <check.h>

/* RFC 7677 section 3: user "user", password "pencil". */
#define RFC_SECRET "SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:" \
	"wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU="

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* An Authentication message body: the code, then data. */
static size_t auth_body(uint8_t *buf, uint32_t code, const void *data, size_t len)
{
	buf[0] = (uint8_t)(code >> 24);
	buf[1] = (uint8_t)(code >> 16);
	buf[2] = (uint8_t)(code >> 8);
	buf[3] = (uint8_t)code;
	if (len)
		memcpy(buf + 4, data, len);
	return len + 4;
}

START_TEST(test_startup)
{
	uint8_t buf[256];
	size_t n = sp_build_startup(buf, sizeof(buf), "bob", "db", NULL);
	ck_assert_uint_eq(n, 8 + 5 + 4 + 9 + 3 + 1);
	ck_assert_uint_eq(get32(buf), n);
	ck_assert_uint_eq(get32(buf + 4), 196608);
	ck_assert(memcmp(buf + 8, "user\0bob\0database\0db\0\0", 22) == 0);
	n = sp_build_startup(buf, sizeof(buf), "bob", "db", "app");
	ck_assert_uint_eq(n, 30 + 17 + 4);
	ck_assert(memcmp(buf + 29, "application_name\0app\0\0", 22) == 0);
	/* too small a buffer: nothing, never a cut packet */
	ck_assert_uint_eq(sp_build_startup(buf, 20, "bob", "db", NULL), 0);
	ck_assert_uint_eq(sp_build_startup(buf, 29, "bob", "db", NULL), 0);
	ck_assert_uint_eq(sp_build_startup(buf, 30, "bob", "db", NULL), 30);
}
END_TEST

START_TEST(test_small_messages)
{
	uint8_t buf[64];
	static const uint8_t ssl[8] = { 0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f };
	static const uint8_t query[] = { 'Q', 0, 0, 0, 13, 'S', 'E', 'L', 'E', 'C', 'T', ' ', '1', 0 };
	static const uint8_t term[5] = { 'X', 0, 0, 0, 4 };
	ck_assert_uint_eq(sp_build_ssl_request(buf), 8);
	ck_assert(memcmp(buf, ssl, 8) == 0);
	ck_assert_uint_eq(sp_build_query(buf, sizeof(buf), "SELECT 1"), sizeof(query));
	ck_assert(memcmp(buf, query, sizeof(query)) == 0);
	ck_assert_uint_eq(sp_build_query(buf, sizeof(query) - 1, "SELECT 1"), 0);
	ck_assert_uint_eq(sp_build_terminate(buf), 5);
	ck_assert(memcmp(buf, term, 5) == 0);
}
END_TEST

START_TEST(test_framing)
{
	/* ParameterStatus, then ReadyForQuery, then half a message */
	static const uint8_t in[] = {
		'S', 0, 0, 0, 8, 'a', 0, 'b', 0,
		'Z', 0, 0, 0, 5, 'I',
		'D', 0, 0, 0, 10, 0,
	};
	char type;
	const uint8_t *body;
	size_t blen, pos = 0;
	long n = sp_next_message(in, sizeof(in), &type, &body, &blen);
	ck_assert_int_eq(n, 9);
	ck_assert_int_eq(type, 'S');
	ck_assert_uint_eq(blen, 4);
	ck_assert(body == in + 5);
	pos += (size_t)n;
	n = sp_next_message(in + pos, sizeof(in) - pos, &type, &body, &blen);
	ck_assert_int_eq(n, 6);
	ck_assert_int_eq(type, 'Z');
	ck_assert_int_eq(body[0], 'I');
	pos += (size_t)n;
	ck_assert_int_eq(sp_next_message(in + pos, sizeof(in) - pos, &type, &body, &blen), 0);
	/* every prefix of a whole message is "not yet" */
	for (size_t len = 0; len < 9; len++)
		ck_assert_int_eq(sp_next_message(in, len, &type, &body, &blen), 0);
	/* lengths below 4 or past the limit are errors */
	static const uint8_t bad1[] = { 'Z', 0, 0, 0, 3, 'I' };
	static const uint8_t bad2[] = { 'D', 0x7f, 0xff, 0xff, 0xff, 0 };
	ck_assert_int_eq(sp_next_message(bad1, sizeof(bad1), &type, &body, &blen), -1);
	ck_assert_int_eq(sp_next_message(bad2, sizeof(bad2), &type, &body, &blen), -1);
}
END_TEST

START_TEST(test_error_fields)
{
	static const uint8_t err[] = "SFATAL\0VFATAL\0C53300\0Msorry, too many clients already\0\0";
	char out[64];
	ck_assert(sp_error_field(err, sizeof(err) - 1, 'C', out, sizeof(out)));
	ck_assert_str_eq(out, "53300");
	ck_assert(sp_error_field(err, sizeof(err) - 1, 'M', out, sizeof(out)));
	ck_assert_str_eq(out, "sorry, too many clients already");
	ck_assert(sp_error_field(err, sizeof(err) - 1, 'M', out, 6));
	ck_assert_str_eq(out, "sorry");
	ck_assert(!sp_error_field(err, sizeof(err) - 1, 'D', out, sizeof(out)));
	/* a field cut before its NUL is not read past the body */
	ck_assert(!sp_error_field(err, 17, 'C', out, sizeof(out)));
}
END_TEST

START_TEST(test_md5)
{
	struct sp_auth a;
	uint8_t body[16], out[64];
	size_t outlen;
	const char *err;
	static const uint8_t salt[4] = { 1, 2, 3, 4 };
	sp_auth_init(&a, "md5_user", "md5_pass", NULL);
	size_t n = auth_body(body, 5, salt, 4);
	ck_assert_int_eq(sp_auth_step(&a, body, n, out, sizeof(out), &outlen, &err), SP_AUTH_SEND);
	/* 'p', length, md5(md5(password user) salt) as test_scram's test_md5_response has it */
	ck_assert_uint_eq(outlen, 1 + 4 + 36);
	ck_assert_int_eq(out[0], 'p');
	ck_assert_uint_eq(get32(out + 1), 40);
	ck_assert(memcmp(out + 5, "md5c6ee6bd10a7adf513019b25f24df0925", 36) == 0);
	n = auth_body(body, 5, salt, 3);
	ck_assert_int_eq(sp_auth_step(&a, body, n, out, sizeof(out), &outlen, &err), SP_AUTH_FAIL);
	n = auth_body(body, 0, NULL, 0);
	ck_assert_int_eq(sp_auth_step(&a, body, n, out, sizeof(out), &outlen, &err), SP_AUTH_OK);
	n = auth_body(body, 7, NULL, 0);	/* GSS */
	ck_assert_int_eq(sp_auth_step(&a, body, n, out, sizeof(out), &outlen, &err), SP_AUTH_FAIL);
}
END_TEST

/*
 * One SCRAM login of the generator's client side against pgvalve's server
 * side: returns the server's verdict on the proof (>0 accepted, -2 wrong
 * password) and, when accepted, whether the client took the server's
 * signature and then AuthenticationOk.
 */
static int scram_login(const struct scram_secret *secret, const char *password, struct sp_keycache *cache,
		       bool tamper_signature)
{
	struct sp_auth a;
	struct scram_server ss;
	uint8_t body[SCRAM_MSG_MAX + 64], out[SCRAM_MSG_MAX + 64];
	char mechs[64], sbuf[SCRAM_MSG_MAX];
	size_t outlen;
	const char *err = NULL;

	sp_auth_init(&a, "user", password, cache);
	scram_server_init(&ss, secret, NULL);
	size_t ml = scram_server_mechanisms(&ss, mechs);
	size_t n = auth_body(body, 10, mechs, ml);
	ck_assert_int_eq(sp_auth_step(&a, body, n, out, sizeof(out), &outlen, &err), SP_AUTH_SEND);

	/* SASLInitialResponse: 'p', length, mechanism, its data's length, client-first */
	ck_assert_int_eq(out[0], 'p');
	ck_assert_uint_eq(get32(out + 1), outlen - 1);
	const char *mech = (const char *)out + 5;
	ck_assert_str_eq(mech, "SCRAM-SHA-256");
	ck_assert(scram_server_choose_mechanism(&ss, mech));
	const uint8_t *p = out + 5 + strlen(mech) + 1;
	uint32_t cflen = get32(p);
	ck_assert_uint_eq(5 + strlen(mech) + 1 + 4 + cflen, outlen);
	int sl = scram_server_first(&ss, (const char *)p + 4, cflen, sbuf, sizeof(sbuf), &err);
	ck_assert_msg(sl > 0, "server-first: %s", err ? err : "?");

	n = auth_body(body, 11, sbuf, (size_t)sl);
	ck_assert_int_eq(sp_auth_step(&a, body, n, out, sizeof(out), &outlen, &err), SP_AUTH_SEND);
	ck_assert_int_eq(out[0], 'p');
	ck_assert_uint_eq(get32(out + 1), outlen - 1);
	int fl = scram_server_final(&ss, (const char *)out + 5, outlen - 5, sbuf, sizeof(sbuf), &err);
	if (fl <= 0)
		return fl;

	if (tamper_signature)
		sbuf[2] = sbuf[2] == 'A' ? 'B' : 'A';
	n = auth_body(body, 12, sbuf, (size_t)fl);
	enum sp_auth_result r = sp_auth_step(&a, body, n, out, sizeof(out), &outlen, &err);
	if (tamper_signature) {
		ck_assert_int_eq(r, SP_AUTH_FAIL);
		return fl;
	}
	ck_assert_msg(r == SP_AUTH_WAIT, "server-final refused: %s", err ? err : "?");
	n = auth_body(body, 0, NULL, 0);
	ck_assert_int_eq(sp_auth_step(&a, body, n, out, sizeof(out), &outlen, &err), SP_AUTH_OK);
	return fl;
}

START_TEST(test_scram_rfc_secret)
{
	struct auth_secret parsed;
	struct sp_keycache cache = { 0 };
	ck_assert(auth_secret_parse("user", RFC_SECRET, &parsed));
	ck_assert_int_gt(scram_login(&parsed.scram, "pencil", &cache, false), 0);
	ck_assert_uint_eq(cache.derivations, 1);
	/* the same salt again: the proof is new (new nonces), the keys are not derived again */
	ck_assert_int_gt(scram_login(&parsed.scram, "pencil", &cache, false), 0);
	ck_assert_int_gt(scram_login(&parsed.scram, "pencil", &cache, false), 0);
	ck_assert_uint_eq(cache.derivations, 1);
	/* no cache: derived each time, still right */
	ck_assert_int_gt(scram_login(&parsed.scram, "pencil", NULL, false), 0);
	auth_secret_clear(&parsed);
}
END_TEST

START_TEST(test_scram_fresh_secret)
{
	struct scram_secret s1, s2;
	struct sp_keycache cache = { 0 };
	uint8_t salt1[SCRAM_SALT_LEN], salt2[SCRAM_SALT_LEN];
	memset(salt1, 1, sizeof(salt1));
	memset(salt2, 2, sizeof(salt2));
	scram_secret_from_password("bench", 4096, salt1, sizeof(salt1), &s1);
	scram_secret_from_password("bench", 1000, salt2, sizeof(salt2), &s2);
	ck_assert_int_gt(scram_login(&s1, "bench", &cache, false), 0);
	ck_assert_int_gt(scram_login(&s2, "bench", &cache, false), 0);
	ck_assert_uint_eq(cache.derivations, 2);	/* another salt and count: derived anew */
	ck_assert_int_gt(scram_login(&s2, "bench", &cache, false), 0);
	ck_assert_uint_eq(cache.derivations, 2);
	/* a wrong password: the server refuses the proof (and the cache does not hand its keys to the right one) */
	ck_assert_int_eq(scram_login(&s1, "wrong", &cache, false), -2);
	ck_assert_int_gt(scram_login(&s1, "bench", &cache, false), 0);
	/* a server that does not know the password: its signature is refused */
	ck_assert_int_gt(scram_login(&s1, "bench", &cache, true), 0);
}
END_TEST

START_TEST(test_scram_order)
{
	struct sp_auth a;
	uint8_t body[128], out[SCRAM_MSG_MAX + 64];
	size_t outlen;
	const char *err;
	sp_auth_init(&a, "user", "pencil", NULL);
	/* SASLContinue or SASLFinal before SASL */
	size_t n = auth_body(body, 11, "r=x,s=QQ==,i=4096", 17);
	ck_assert_int_eq(sp_auth_step(&a, body, n, out, sizeof(out), &outlen, &err), SP_AUTH_FAIL);
	n = auth_body(body, 12, "v=AAAA", 6);
	ck_assert_int_eq(sp_auth_step(&a, body, n, out, sizeof(out), &outlen, &err), SP_AUTH_FAIL);
	/* a mechanism list without SCRAM-SHA-256 */
	n = auth_body(body, 10, "SCRAM-SHA-256-PLUS\0\0", 20);
	ck_assert_int_eq(sp_auth_step(&a, body, n, out, sizeof(out), &outlen, &err), SP_AUTH_FAIL);
	/* AuthenticationOk in the middle of SCRAM, before the server proved itself */
	n = auth_body(body, 10, "SCRAM-SHA-256\0\0", 15);
	ck_assert_int_eq(sp_auth_step(&a, body, n, out, sizeof(out), &outlen, &err), SP_AUTH_SEND);
	n = auth_body(body, 0, NULL, 0);
	ck_assert_int_eq(sp_auth_step(&a, body, n, out, sizeof(out), &outlen, &err), SP_AUTH_FAIL);
	/* a body too short to hold a code */
	ck_assert_int_eq(sp_auth_step(&a, body, 3, out, sizeof(out), &outlen, &err), SP_AUTH_FAIL);
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("scale_proto");
	TCase *tc = tcase_create("messages");
	tcase_add_test(tc, test_startup);
	tcase_add_test(tc, test_small_messages);
	tcase_add_test(tc, test_framing);
	tcase_add_test(tc, test_error_fields);
	suite_add_tcase(s, tc);
	tc = tcase_create("auth");
	tcase_add_test(tc, test_md5);
	tcase_add_test(tc, test_scram_rfc_secret);
	tcase_add_test(tc, test_scram_fresh_secret);
	tcase_add_test(tc, test_scram_order);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);
	return s;
}
