/*
 * test_scram.c - crypto.c and scram.c: md5 hashing, base64, the RFC 7677
 * SCRAM-SHA-256 vector, malformed server messages, pass-through keys,
 * secret building, the server side against the client side, the iteration
 * cap, the derived-key cache and mock salts.
 */
#include "common.h"
#include "crypto.h"
#include "scram.h"
#include "auth_file.h"
#include "scram_cache.h"
#include "../check_main.h"

#include <check.h>

/* RFC 7677 section 3. */
#define RFC_USER "user"
#define RFC_PASSWORD "pencil"
#define RFC_CNONCE "rOprNGfwEbeRWgbNEkqO"
#define RFC_SNONCE "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
#define RFC_SALT "W22ZaJ0SNY7soEsUEjb6gQ=="
#define RFC_SERVER_FIRST "r=" RFC_CNONCE RFC_SNONCE ",s=" RFC_SALT ",i=4096"
#define RFC_CLIENT_FINAL "c=biws,r=" RFC_CNONCE RFC_SNONCE ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
#define RFC_SERVER_FINAL "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
/* Computed independently (Python hashlib) from "pencil" and RFC_SALT. */
#define RFC_CLIENT_KEY "pg/JI9Z+hkSpLRa5btpe9GVrDHJcSEN0viVTVXaZbos="
#define RFC_SERVER_KEY "wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU="
#define RFC_STORED_KEY "WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY="
#define RFC_SECRET "SCRAM-SHA-256$4096:" RFC_SALT "$" RFC_STORED_KEY ":" RFC_SERVER_KEY

static void b64_to_key(const char *b64, uint8_t out[32])
{
	ck_assert_int_eq(crypto_b64_decode(b64, strlen(b64), out, 32), 32);
}

/* Runs client-first and client-final against a server-first; returns client_final's result. */
static int run_client(struct scram_client *sc, const char *password, const char *server_first,
		      char *out, size_t outsize, const char **err)
{
	char first[SCRAM_MSG_MAX];
	ck_assert_int_gt(scram_client_first(sc, first, sizeof(first)), 0);
	return scram_client_final(sc, password, server_first, strlen(server_first), out, outsize, err);
}

/* ------------------------------------------------------------ md5 */

START_TEST(test_md5_password)
{
	char out[36];
	/* printf %s penciluser | md5sum */
	crypto_md5_password("pencil", "user", out);
	ck_assert_str_eq(out, "md520c46e3762c864548e296b33c3406aa9");
	/* printf %s md5_passmd5_user | md5sum */
	crypto_md5_password("md5_pass", "md5_user", out);
	ck_assert_str_eq(out, "md5e473002ecaa9bfd0c982506b1bc2fe0b");
}
END_TEST

START_TEST(test_md5_response)
{
	char out[36];
	const uint8_t salt[4] = { 1, 2, 3, 4 };
	/* printf 'e473002ecaa9bfd0c982506b1bc2fe0b\x01\x02\x03\x04' | md5sum */
	crypto_md5_response("md5e473002ecaa9bfd0c982506b1bc2fe0b", salt, out);
	ck_assert_str_eq(out, "md5c6ee6bd10a7adf513019b25f24df0925");
}
END_TEST

/* ------------------------------------------------------------ base64 */

START_TEST(test_b64_known)
{
	char enc[16];
	uint8_t dec[16];
	static const struct { const char *plain, *b64; } v[] = {	/* RFC 4648 section 10 */
		{ "", "" }, { "f", "Zg==" }, { "fo", "Zm8=" }, { "foo", "Zm9v" },
		{ "foob", "Zm9vYg==" }, { "fooba", "Zm9vYmE=" }, { "foobar", "Zm9vYmFy" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(v); i++) {
		size_t plen = strlen(v[i].plain), blen = strlen(v[i].b64);
		ck_assert_int_eq(crypto_b64_encode((const uint8_t *)v[i].plain, plen, enc, sizeof(enc)), (int)blen);
		ck_assert_str_eq(enc, v[i].b64);
		ck_assert_int_eq(crypto_b64_decode(v[i].b64, blen, dec, sizeof(dec)), (int)plen);
		ck_assert(memcmp(dec, v[i].plain, plen) == 0);
	}
}
END_TEST

START_TEST(test_b64_round_trip)
{
	uint8_t in[256], dec[256];
	char enc[CRYPTO_B64_ENC_LEN(256) + 1];
	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)(255 - i);
	for (size_t len = 0; len <= sizeof(in); len++) {
		int n = crypto_b64_encode(in, len, enc, sizeof(enc));
		ck_assert_int_eq(n, (int)CRYPTO_B64_ENC_LEN(len));
		ck_assert_int_eq(crypto_b64_decode(enc, (size_t)n, dec, sizeof(dec)), (int)len);
		ck_assert(memcmp(in, dec, len) == 0);
	}
}
END_TEST

START_TEST(test_b64_rejects)
{
	uint8_t dec[64];
	char enc[8];
	static const char *bad[] = {
		"Zg=", "Zg", "Z", "Zm9v=", "Zg===", "Z===", "====", "Zm 9v", "Zm9v\n", "Zm-v", "Zm_v",
		"Zg==Zg==", "=Zg=", "Z=g=", "Zm9v\0Zm9", "Zm9vYmFy====",
		"Zh==", "Zm9=",	/* non-zero unused bits */
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		size_t len = strlen(bad[i]);
		if (i == 14)
			len = 8;	/* embedded NUL */
		ck_assert_msg(crypto_b64_decode(bad[i], len, dec, sizeof(dec)) == -1, "accepted %s", bad[i]);
	}
	/* Output does not fit. */
	ck_assert_int_eq(crypto_b64_decode("Zm9vYmFy", 8, dec, 5), -1);
	ck_assert_int_eq(crypto_b64_decode("Zm9vYmFy", 8, dec, 6), 6);
	ck_assert_int_eq(crypto_b64_encode((const uint8_t *)"foo", 3, enc, 4), -1);	/* no room for NUL */
	ck_assert_int_eq(crypto_b64_encode((const uint8_t *)"foo", 3, enc, 5), 4);
	ck_assert_int_eq(crypto_b64_encode((const uint8_t *)"foob", 4, enc, 8), -1);
}
END_TEST

/* ------------------------------------------------------------ primitives */

START_TEST(test_sha256_hmac)
{
	uint8_t out[32], want[32];
	/* FIPS 180-2: SHA-256("abc") */
	static const uint8_t abc[32] = {
		0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22, 0x23,
		0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad,
	};
	crypto_sha256((const uint8_t *)"abc", 3, out);
	ck_assert(memcmp(out, abc, 32) == 0);

	/* SaltedPassword -> ClientKey / ServerKey / StoredKey for the RFC vector. */
	uint8_t salt[16], salted[32], key[32];
	ck_assert_int_eq(crypto_b64_decode(RFC_SALT, strlen(RFC_SALT), salt, sizeof(salt)), 16);
	crypto_scram_salted_password(RFC_PASSWORD, salt, 16, 4096, salted);
	crypto_hmac_sha256(salted, 32, (const uint8_t *)"Client Key", 10, key);
	b64_to_key(RFC_CLIENT_KEY, want);
	ck_assert(memcmp(key, want, 32) == 0);
	crypto_sha256(key, 32, out);
	b64_to_key(RFC_STORED_KEY, want);
	ck_assert(memcmp(out, want, 32) == 0);
	crypto_hmac_sha256(salted, 32, (const uint8_t *)"Server Key", 10, key);
	b64_to_key(RFC_SERVER_KEY, want);
	ck_assert(memcmp(key, want, 32) == 0);
}
END_TEST

static void hex_to_key(const char *hex, uint8_t out[32])
{
	for (int i = 0; i < 32; i++)
		ck_assert_int_eq(sscanf(hex + 2 * i, "%2hhx", &out[i]), 1);
}

/* HMAC-SHA-256 on its own: RFC 4231's vectors, keys shorter than, as long as and longer than a block. */
START_TEST(test_hmac_vectors)
{
	uint8_t key[131], out[32], want[32];
	static const char hi_there[] = "Hi There";
	static const char jefe[] = "what do ya want for nothing?";
	static const char block[] = "exactly one block of key";
	static const char longer[] = "Test Using Larger Than Block-Size Key - Hash Key First";

	memset(key, 0x0b, 20);
	crypto_hmac_sha256(key, 20, (const uint8_t *)hi_there, strlen(hi_there), out);
	hex_to_key("b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7", want);
	ck_assert(memcmp(out, want, 32) == 0);
	crypto_hmac_sha256((const uint8_t *)"Jefe", 4, (const uint8_t *)jefe, strlen(jefe), out);
	hex_to_key("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", want);
	ck_assert(memcmp(out, want, 32) == 0);
	memset(key, 0xaa, sizeof(key));
	crypto_hmac_sha256(key, 64, (const uint8_t *)block, strlen(block), out);
	hex_to_key("6b86dff4b91fe689c94291f9648c1f7cea871c24c0aaee8b7b0f295528e85fe3", want);
	ck_assert(memcmp(out, want, 32) == 0);
	crypto_hmac_sha256(key, 131, (const uint8_t *)longer, strlen(longer), out);
	hex_to_key("60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54", want);
	ck_assert(memcmp(out, want, 32) == 0);
}
END_TEST

START_TEST(test_random)
{
	uint8_t a[32] = { 0 }, b[32] = { 0 };
	crypto_random(a, sizeof(a));
	crypto_random(b, sizeof(b));
	ck_assert(memcmp(a, b, sizeof(a)) != 0);
}
END_TEST

/* ------------------------------------------------------------ SCRAM client */

START_TEST(test_client_rfc7677)
{
	struct scram_client sc;
	char buf[SCRAM_MSG_MAX];
	const char *err = NULL;

	scram_client_init(&sc, RFC_USER, RFC_CNONCE);
	ck_assert_int_eq(scram_client_first(&sc, buf, sizeof(buf)), (int)strlen("n,,n=user,r=" RFC_CNONCE));
	ck_assert_str_eq(buf, "n,,n=user,r=" RFC_CNONCE);
	int n = scram_client_final(&sc, RFC_PASSWORD, RFC_SERVER_FIRST, strlen(RFC_SERVER_FIRST),
				   buf, sizeof(buf), &err);
	ck_assert_msg(n > 0, "error: %s", err ? err : "?");
	ck_assert_int_eq(n, (int)strlen(RFC_CLIENT_FINAL));
	ck_assert_str_eq(buf, RFC_CLIENT_FINAL);
	ck_assert_str_eq(sc.server_signature_b64, RFC_SERVER_FINAL + 2);
	ck_assert(scram_client_verify(&sc, RFC_SERVER_FINAL, strlen(RFC_SERVER_FINAL), &err));
	ck_assert_ptr_null(err);
	/* The exchange is over: a second verify is out of order. */
	ck_assert(!scram_client_verify(&sc, RFC_SERVER_FINAL, strlen(RFC_SERVER_FINAL), &err));
}
END_TEST

START_TEST(test_client_rejects_bad_server_final)
{
	static const char *bad[] = {
		"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G8=",	/* one bit off */
		"v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
		"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G5=",	/* non-canonical base64 */
		"v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
		"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4",	/* bad base64 */
		"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl9",		/* short */
		RFC_SERVER_FINAL ",x=1",				/* garbage at end */
		"",
		"x=1",
		"e=invalid-proof",
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct scram_client sc;
		char buf[SCRAM_MSG_MAX];
		const char *err = NULL;
		scram_client_init(&sc, RFC_USER, RFC_CNONCE);
		ck_assert_int_gt(run_client(&sc, RFC_PASSWORD, RFC_SERVER_FIRST, buf, sizeof(buf), &err), 0);
		ck_assert_msg(!scram_client_verify(&sc, bad[i], strlen(bad[i]), &err), "accepted %s", bad[i]);
		ck_assert_ptr_nonnull(err);
		if (bad[i][0] == 'e')
			ck_assert_str_eq(err, "invalid-proof");
	}
}
END_TEST

START_TEST(test_client_rejects_bad_server_first)
{
	static const char *bad[] = {
		"r=XXprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=" RFC_SALT ",i=4096",	/* wrong prefix */
		"r=" RFC_CNONCE ",s=" RFC_SALT ",i=4096",		/* no server part */
		"r=rOprNGfwEbeRWgbNEkq,s=" RFC_SALT ",i=4096",		/* shorter than ours */
		"r=" RFC_CNONCE RFC_SNONCE ",s=W22ZaJ0SNY7soEsUEjb6gQ=,i=4096",	/* bad base64 */
		"r=" RFC_CNONCE RFC_SNONCE ",s=W22Za!0SNY7soEsUEjb6gQ==,i=4096",
		"r=" RFC_CNONCE RFC_SNONCE ",s=,i=4096",			/* empty salt */
		"r=" RFC_CNONCE RFC_SNONCE ",s=" RFC_SALT ",i=0",
		"r=" RFC_CNONCE RFC_SNONCE ",s=" RFC_SALT ",i=-1",
		"r=" RFC_CNONCE RFC_SNONCE ",s=" RFC_SALT ",i=",
		"r=" RFC_CNONCE RFC_SNONCE ",s=" RFC_SALT ",i=4096x",
		"r=" RFC_CNONCE RFC_SNONCE ",s=" RFC_SALT ",i=99999999999",
		"r=" RFC_CNONCE RFC_SNONCE ",s=" RFC_SALT ",i=1000001",	/* above SCRAM_ITERATIONS_MAX */
		"r=" RFC_CNONCE RFC_SNONCE ",s=" RFC_SALT,			/* missing i */
		"r=" RFC_CNONCE RFC_SNONCE ",i=4096",				/* missing s */
		"s=" RFC_SALT ",i=4096",					/* missing r */
		"s=" RFC_SALT ",r=" RFC_CNONCE RFC_SNONCE ",i=4096",	/* wrong order */
		"m=ext,r=" RFC_CNONCE RFC_SNONCE ",s=" RFC_SALT ",i=4096",	/* mandatory extension */
		"r=" RFC_CNONCE RFC_SNONCE ",s=" RFC_SALT ",i=4096,",	/* trailing comma */
		"r=" RFC_CNONCE RFC_SNONCE ",s=" RFC_SALT ",i=4096,x=y",	/* extension */
		"r=" RFC_CNONCE RFC_SNONCE ",s=" RFC_SALT ",",		/* truncated */
		"r=" RFC_CNONCE "%hv",						/* truncated */
		"r=",
		"",
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct scram_client sc;
		char buf[SCRAM_MSG_MAX];
		const char *err = NULL;
		scram_client_init(&sc, RFC_USER, RFC_CNONCE);
		ck_assert_msg(run_client(&sc, RFC_PASSWORD, bad[i], buf, sizeof(buf), &err) == -1, "accepted %s", bad[i]);
		ck_assert_ptr_nonnull(err);
		ck_assert(strstr(err, RFC_PASSWORD) == NULL);
		/* The exchange cannot continue after a failure. */
		ck_assert(!scram_client_verify(&sc, RFC_SERVER_FINAL, strlen(RFC_SERVER_FINAL), &err));
	}
	/* Embedded NUL, over-long message, and a NULL password. */
	{
		struct scram_client sc;
		char buf[SCRAM_MSG_MAX], big[SCRAM_MSG_MAX + 10];
		const char *err = NULL;
		scram_client_init(&sc, RFC_USER, RFC_CNONCE);
		ck_assert_int_eq(run_client(&sc, RFC_PASSWORD, RFC_SERVER_FIRST, buf, sizeof(buf), &err) > 0, 1);
		scram_client_init(&sc, RFC_USER, RFC_CNONCE);
		ck_assert_int_gt(scram_client_first(&sc, buf, sizeof(buf)), 0);
		ck_assert_int_eq(scram_client_final(&sc, RFC_PASSWORD, RFC_SERVER_FIRST, strlen(RFC_SERVER_FIRST) + 1,
						    buf, sizeof(buf), &err), -1);
		memset(big, 'a', sizeof(big));
		memcpy(big, RFC_SERVER_FIRST, strlen(RFC_SERVER_FIRST));
		scram_client_init(&sc, RFC_USER, RFC_CNONCE);
		ck_assert_int_gt(scram_client_first(&sc, buf, sizeof(buf)), 0);
		ck_assert_int_eq(scram_client_final(&sc, RFC_PASSWORD, big, sizeof(big), buf, sizeof(buf), &err), -1);
		scram_client_init(&sc, RFC_USER, RFC_CNONCE);
		ck_assert_int_eq(run_client(&sc, NULL, RFC_SERVER_FIRST, buf, sizeof(buf), &err), -1);
		/* Output buffer too small. */
		scram_client_init(&sc, RFC_USER, RFC_CNONCE);
		ck_assert_int_eq(run_client(&sc, RFC_PASSWORD, RFC_SERVER_FIRST, buf, 20, &err), -1);
	}
}
END_TEST

START_TEST(test_client_out_of_order)
{
	struct scram_client sc;
	char buf[SCRAM_MSG_MAX];
	const char *err = NULL;
	scram_client_init(&sc, NULL, NULL);
	ck_assert_int_eq(scram_client_final(&sc, RFC_PASSWORD, RFC_SERVER_FIRST, strlen(RFC_SERVER_FIRST),
					    buf, sizeof(buf), &err), -1);
	ck_assert_ptr_nonnull(err);
	ck_assert_int_gt(scram_client_first(&sc, buf, sizeof(buf)), 0);
	ck_assert_int_eq(scram_client_first(&sc, buf, sizeof(buf)), -1);
}
END_TEST

START_TEST(test_client_first_forms)
{
	struct scram_client sc;
	char buf[SCRAM_MSG_MAX];

	scram_client_init(&sc, NULL, "abc");
	scram_client_first(&sc, buf, sizeof(buf));
	ck_assert_str_eq(buf, "n,,n=,r=abc");
	scram_client_init(&sc, "", "abc");
	scram_client_first(&sc, buf, sizeof(buf));
	ck_assert_str_eq(buf, "n,,n=,r=abc");
	scram_client_init(&sc, "a,b=c", "abc");
	scram_client_first(&sc, buf, sizeof(buf));
	ck_assert_str_eq(buf, "n,,n=a=2Cb=3Dc,r=abc");
	/* Too small for the message. */
	scram_client_init(&sc, "user", "abc");
	ck_assert_int_eq(scram_client_first(&sc, buf, 5), -1);

	/* Random nonces: 18 bytes -> 24 base64 characters, different each time. */
	struct scram_client sc2;
	scram_client_init(&sc, NULL, NULL);
	scram_client_init(&sc2, NULL, NULL);
	ck_assert_int_eq((int)strlen(sc.client_nonce), 24);
	ck_assert_str_ne(sc.client_nonce, sc2.client_nonce);
	ck_assert_ptr_null(strchr(sc.client_nonce, ','));
	/* An unusable fixed nonce is replaced by a random one. */
	scram_client_init(&sc, NULL, "a,b");
	ck_assert_int_eq((int)strlen(sc.client_nonce), 24);
}
END_TEST

START_TEST(test_client_has_keys)
{
	struct scram_client sc;
	char buf[SCRAM_MSG_MAX];
	const char *err = NULL;
	uint8_t ck[32], sk[32];

	b64_to_key(RFC_CLIENT_KEY, ck);
	b64_to_key(RFC_SERVER_KEY, sk);
	scram_client_init(&sc, RFC_USER, RFC_CNONCE);
	scram_client_set_keys(&sc, ck, sk);
	int n = run_client(&sc, NULL, RFC_SERVER_FIRST, buf, sizeof(buf), &err);
	ck_assert_msg(n > 0, "error: %s", err ? err : "?");
	ck_assert_str_eq(buf, RFC_CLIENT_FINAL);
	ck_assert(scram_client_verify(&sc, RFC_SERVER_FINAL, strlen(RFC_SERVER_FINAL), &err));

	/* Keys win over a password given by mistake. */
	scram_client_init(&sc, RFC_USER, RFC_CNONCE);
	scram_client_set_keys(&sc, ck, sk);
	ck_assert_int_gt(run_client(&sc, "wrong", RFC_SERVER_FIRST, buf, sizeof(buf), &err), 0);
	ck_assert_str_eq(buf, RFC_CLIENT_FINAL);

	/* init clears keys set earlier. */
	scram_client_init(&sc, RFC_USER, RFC_CNONCE);
	ck_assert(!sc.has_keys);
}
END_TEST

START_TEST(test_client_wrong_password)
{
	struct scram_client sc;
	char buf[SCRAM_MSG_MAX];
	const char *err = NULL;
	scram_client_init(&sc, RFC_USER, RFC_CNONCE);
	ck_assert_int_gt(run_client(&sc, "pencil2", RFC_SERVER_FIRST, buf, sizeof(buf), &err), 0);
	ck_assert_str_ne(buf, RFC_CLIENT_FINAL);
	ck_assert(!scram_client_verify(&sc, RFC_SERVER_FINAL, strlen(RFC_SERVER_FINAL), &err));
}
END_TEST

/* ------------------------------------------------------------ secrets */

START_TEST(test_build_secret)
{
	char out[256];
	struct auth_secret parsed;
	struct scram_secret derived;

	int n = scram_build_secret(RFC_PASSWORD, 4096, out, sizeof(out));
	ck_assert_int_eq(n, (int)strlen(out));
	ck_assert(strncmp(out, "SCRAM-SHA-256$4096:", 19) == 0);
	ck_assert(auth_secret_parse("user", out, &parsed));
	ck_assert_int_eq(parsed.type, SECRET_SCRAM);
	ck_assert_int_eq(parsed.scram.iterations, 4096);
	ck_assert_int_eq(parsed.scram.salt_len, SCRAM_SALT_LEN);
	scram_secret_from_password(RFC_PASSWORD, 4096, parsed.scram.salt, (size_t)parsed.scram.salt_len, &derived);
	ck_assert(memcmp(derived.stored_key, parsed.scram.stored_key, 32) == 0);
	ck_assert(memcmp(derived.server_key, parsed.scram.server_key, 32) == 0);
	auth_secret_clear(&parsed);

	/* Random salt: two secrets for one password differ. */
	char out2[256];
	ck_assert_int_gt(scram_build_secret(RFC_PASSWORD, 4096, out2, sizeof(out2)), 0);
	ck_assert_str_ne(out, out2);

	ck_assert_int_eq(scram_build_secret(RFC_PASSWORD, 0, out, sizeof(out)), -1);
	ck_assert_int_eq(scram_build_secret(RFC_PASSWORD, 4096, out, 50), -1);
}
END_TEST

START_TEST(test_secret_known)
{
	uint8_t salt[16];
	struct scram_secret s;
	char out[256];
	ck_assert_int_eq(crypto_b64_decode(RFC_SALT, strlen(RFC_SALT), salt, sizeof(salt)), 16);
	scram_secret_from_password(RFC_PASSWORD, 4096, salt, sizeof(salt), &s);
	ck_assert_int_eq(scram_secret_format(&s, out, sizeof(out)), (int)strlen(RFC_SECRET));
	ck_assert_str_eq(out, RFC_SECRET);
}
END_TEST

/* ------------------------------------------------------------ server */

/* The stored secret for "pencil" with the RFC salt. */
static void rfc_secret(struct scram_secret *out)
{
	struct auth_secret parsed;
	ck_assert(auth_secret_parse("user", RFC_SECRET, &parsed));
	*out = parsed.scram;
	auth_secret_clear(&parsed);
}

START_TEST(test_server_rfc7677)
{
	struct scram_secret secret;
	struct scram_server ss;
	char buf[SCRAM_MSG_MAX];
	const char *err = NULL;
	const char *cf = "n,,n=user,r=" RFC_CNONCE;

	rfc_secret(&secret);
	scram_server_init(&ss, &secret, RFC_SNONCE);
	ck_assert_int_eq(scram_server_first(&ss, cf, strlen(cf), buf, sizeof(buf), &err), (int)strlen(RFC_SERVER_FIRST));
	ck_assert_str_eq(buf, RFC_SERVER_FIRST);
	int n = scram_server_final(&ss, RFC_CLIENT_FINAL, strlen(RFC_CLIENT_FINAL), buf, sizeof(buf), &err);
	ck_assert_msg(n > 0, "error: %s", err ? err : "?");
	ck_assert_str_eq(buf, RFC_SERVER_FINAL);
	ck_assert(ss.has_client_key);
	uint8_t ck[32];
	b64_to_key(RFC_CLIENT_KEY, ck);
	ck_assert(memcmp(ss.client_key, ck, 32) == 0);
}
END_TEST

START_TEST(test_verify_proof)
{
	struct scram_secret secret;
	const char *am = "n=user,r=" RFC_CNONCE "," RFC_SERVER_FIRST ",c=biws,r=" RFC_CNONCE RFC_SNONCE;
	const char *proof_b64 = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
	uint8_t proof[32], key[32], want[32];

	rfc_secret(&secret);
	b64_to_key(proof_b64, proof);
	ck_assert(scram_verify_proof(&secret, am, strlen(am), proof, key));
	b64_to_key(RFC_CLIENT_KEY, want);
	ck_assert(memcmp(key, want, 32) == 0);
	ck_assert(scram_verify_proof(&secret, am, strlen(am), proof, NULL));
	proof[0] ^= 1;
	ck_assert(!scram_verify_proof(&secret, am, strlen(am), proof, key));
	proof[0] ^= 1;
	ck_assert(!scram_verify_proof(&secret, am, strlen(am) - 1, proof, key));
}
END_TEST

START_TEST(test_server_rejects)
{
	struct scram_secret secret;
	struct scram_server ss;
	char buf[SCRAM_MSG_MAX];
	const char *err = NULL;
	static const char *bad_first[] = {
		"p=tls-server-end-point,,n=user,r=abc",
		"n,a=admin,n=user,r=abc",
		"n,,m=x,n=user,r=abc",
		"n,,n=user",
		"n,,n=user,r=",
		"n,,r=abc",
		"x,,n=user,r=abc",
		"n,n=user,r=abc",
		"",
	};
	rfc_secret(&secret);
	for (size_t i = 0; i < ARRAY_SIZE(bad_first); i++) {
		scram_server_init(&ss, &secret, NULL);
		ck_assert_msg(scram_server_first(&ss, bad_first[i], strlen(bad_first[i]), buf, sizeof(buf), &err) == -1,
			      "accepted %s", bad_first[i]);
		ck_assert_ptr_nonnull(err);
	}

	static const char *bad_final[] = {
		"c=biws,r=" RFC_CNONCE RFC_SNONCE,					/* no proof */
		"c=eSws,r=" RFC_CNONCE RFC_SNONCE ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",	/* cbind */
		"c=biws,r=" RFC_CNONCE "x,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",	/* nonce */
		"r=" RFC_CNONCE RFC_SNONCE ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",	/* no c */
		"c=biws,r=" RFC_CNONCE RFC_SNONCE ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndV=",	/* bad b64 */
		"c=biws,r=" RFC_CNONCE RFC_SNONCE ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=,x=1",
	};
	const char *cf = "n,,n=,r=" RFC_CNONCE;
	for (size_t i = 0; i < ARRAY_SIZE(bad_final); i++) {
		scram_server_init(&ss, &secret, RFC_SNONCE);
		ck_assert_int_gt(scram_server_first(&ss, cf, strlen(cf), buf, sizeof(buf), &err), 0);
		ck_assert_msg(scram_server_final(&ss, bad_final[i], strlen(bad_final[i]), buf, sizeof(buf), &err) == -1,
			      "accepted %s", bad_final[i]);
		ck_assert(!ss.has_client_key);
	}

	/* Well-formed but wrong proof: -2. */
	const char *wrong = "c=biws,r=" RFC_CNONCE RFC_SNONCE ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVA=";
	const char *cf_user = "n,,n=user,r=" RFC_CNONCE;
	scram_server_init(&ss, &secret, RFC_SNONCE);
	ck_assert_int_gt(scram_server_first(&ss, cf_user, strlen(cf_user), buf, sizeof(buf), &err), 0);
	ck_assert_int_eq(scram_server_final(&ss, wrong, strlen(wrong), buf, sizeof(buf), &err), -2);
	ck_assert(!ss.has_client_key);
	/* Out of order. */
	ck_assert_int_eq(scram_server_final(&ss, RFC_CLIENT_FINAL, strlen(RFC_CLIENT_FINAL), buf, sizeof(buf), &err), -1);
}
END_TEST

/*
 * "y,," (client supports channel binding, thinks we do not) is accepted and
 * must come back as c=eSws; client-first extensions are ignored but signed.
 */
START_TEST(test_server_gs2_y)
{
	struct scram_secret secret;
	struct scram_server ss;
	char buf[SCRAM_MSG_MAX], final[SCRAM_MSG_MAX], proof_b64[64];
	const char *err = NULL;
	const char *cf = "y,,n=,r=" RFC_CNONCE ",x=ext";
	const char *wo_proof = "c=eSws,r=" RFC_CNONCE RFC_SNONCE;
	const char *am = "n=,r=" RFC_CNONCE ",x=ext," RFC_SERVER_FIRST ",c=eSws,r=" RFC_CNONCE RFC_SNONCE;
	uint8_t ck[32], stored[32], sig[32], proof[32];

	b64_to_key(RFC_CLIENT_KEY, ck);
	crypto_sha256(ck, 32, stored);
	crypto_hmac_sha256(stored, 32, (const uint8_t *)am, strlen(am), sig);
	for (int i = 0; i < 32; i++)
		proof[i] = ck[i] ^ sig[i];
	ck_assert_int_eq(crypto_b64_encode(proof, 32, proof_b64, sizeof(proof_b64)), 44);
	snprintf(final, sizeof(final), "%s,p=%s", wo_proof, proof_b64);

	rfc_secret(&secret);
	scram_server_init(&ss, &secret, RFC_SNONCE);
	ck_assert_int_gt(scram_server_first(&ss, cf, strlen(cf), buf, sizeof(buf), &err), 0);
	ck_assert_str_eq(buf, RFC_SERVER_FIRST);
	int n = scram_server_final(&ss, final, strlen(final), buf, sizeof(buf), &err);
	ck_assert_msg(n > 0, "error: %s", err ? err : "?");
	ck_assert(strncmp(buf, "v=", 2) == 0);
	ck_assert(ss.has_client_key);
	ck_assert(memcmp(ss.client_key, ck, 32) == 0);

	/* The same exchange claiming "n,," in c= fails the binding check. */
	snprintf(final, sizeof(final), "c=biws,r=%s%s,p=%s", RFC_CNONCE, RFC_SNONCE, proof_b64);
	scram_server_init(&ss, &secret, RFC_SNONCE);
	ck_assert_int_gt(scram_server_first(&ss, cf, strlen(cf), buf, sizeof(buf), &err), 0);
	ck_assert_int_eq(scram_server_final(&ss, final, strlen(final), buf, sizeof(buf), &err), -1);
}
END_TEST

/*
 * End to end: a client with a password logs in to our server side, which
 * recovers its ClientKey; a second client with those keys (pass-through)
 * then logs in to another server holding the same secret.
 */
START_TEST(test_client_server_passthrough)
{
	struct scram_secret secret;
	struct scram_server ss;
	struct scram_client sc;
	char c1[SCRAM_MSG_MAX], s1[SCRAM_MSG_MAX], c2[SCRAM_MSG_MAX], s2[SCRAM_MSG_MAX];
	const char *err = NULL;
	uint8_t salt[SCRAM_SALT_LEN];
	const char *password = "p\xc3\xa4ss,w=rd";	/* non-ASCII: raw bytes on both sides */

	crypto_random(salt, sizeof(salt));
	scram_secret_from_password(password, 1000, salt, sizeof(salt), &secret);

	scram_server_init(&ss, &secret, NULL);
	scram_client_init(&sc, "alice", NULL);
	int n = scram_client_first(&sc, c1, sizeof(c1));
	ck_assert_int_gt(n, 0);
	n = scram_server_first(&ss, c1, (size_t)n, s1, sizeof(s1), &err);
	ck_assert_msg(n > 0, "server first: %s", err ? err : "?");
	n = scram_client_final(&sc, password, s1, (size_t)n, c2, sizeof(c2), &err);
	ck_assert_msg(n > 0, "client final: %s", err ? err : "?");
	n = scram_server_final(&ss, c2, (size_t)n, s2, sizeof(s2), &err);
	ck_assert_msg(n > 0, "server final: %s", err ? err : "?");
	ck_assert(scram_client_verify(&sc, s2, (size_t)n, &err));
	ck_assert(ss.has_client_key);

	/* Pass-through: the recovered ClientKey against a fresh server. */
	struct scram_server ss2;
	struct scram_client pt;
	scram_server_init(&ss2, &secret, NULL);
	scram_client_init(&pt, NULL, NULL);
	scram_client_set_keys(&pt, ss.client_key, secret.server_key);
	n = scram_client_first(&pt, c1, sizeof(c1));
	n = scram_server_first(&ss2, c1, (size_t)n, s1, sizeof(s1), &err);
	ck_assert_int_gt(n, 0);
	n = scram_client_final(&pt, NULL, s1, (size_t)n, c2, sizeof(c2), &err);
	ck_assert_int_gt(n, 0);
	n = scram_server_final(&ss2, c2, (size_t)n, s2, sizeof(s2), &err);
	ck_assert_msg(n > 0, "pass-through server final: %s", err ? err : "?");
	ck_assert(scram_client_verify(&pt, s2, (size_t)n, &err));

	/* Wrong password against the same server: -2 from the server. */
	scram_server_init(&ss, &secret, NULL);
	scram_client_init(&sc, NULL, NULL);
	n = scram_client_first(&sc, c1, sizeof(c1));
	n = scram_server_first(&ss, c1, (size_t)n, s1, sizeof(s1), &err);
	n = scram_client_final(&sc, "pass", s1, (size_t)n, c2, sizeof(c2), &err);
	ck_assert_int_eq(scram_server_final(&ss, c2, (size_t)n, s2, sizeof(s2), &err), -2);
}
END_TEST

/*
 * One exchange between scram_client and scram_server with channel binding:
 * the client's flag and data, the server's offered data and the mechanism
 * the client names. Returns the step that failed (1 server-first, 2
 * server-final, 3 client verify) with *err, or 0.
 */
static int bound_exchange(char flag, const uint8_t *client_cb, size_t client_len, const uint8_t *server_cb,
			  size_t server_len, const char *mechanism, const char **err)
{
	struct scram_secret secret;
	struct scram_server ss;
	struct scram_client sc;
	char c1[SCRAM_MSG_MAX], s1[SCRAM_MSG_MAX], c2[SCRAM_MSG_MAX], s2[SCRAM_MSG_MAX];
	uint8_t salt[SCRAM_SALT_LEN] = { 1, 2, 3 };

	scram_secret_from_password("pw", 1000, salt, sizeof(salt), &secret);
	scram_server_init(&ss, &secret, NULL);
	scram_server_set_channel_binding(&ss, server_cb, server_len);
	ck_assert(scram_server_choose_mechanism(&ss, mechanism));
	scram_client_init(&sc, NULL, NULL);
	ck_assert(scram_client_set_channel_binding(&sc, flag, client_cb, client_len));
	int n = scram_client_first(&sc, c1, sizeof(c1));
	ck_assert_int_gt(n, 0);
	if ((n = scram_server_first(&ss, c1, (size_t)n, s1, sizeof(s1), err)) < 0)
		return 1;
	n = scram_client_final(&sc, "pw", s1, (size_t)n, c2, sizeof(c2), err);
	ck_assert_int_gt(n, 0);
	if ((n = scram_server_final(&ss, c2, (size_t)n, s2, sizeof(s2), err)) < 0)
		return 2;
	if (!scram_client_verify(&sc, s2, (size_t)n, err))
		return 3;
	ck_assert(ss.plus_selected == (flag == 'p'));
	return 0;
}

/* SCRAM-SHA-256-PLUS: binding data checked; the gs2 flag rules as PostgreSQL's. */
START_TEST(test_channel_binding)
{
	uint8_t cb[32], other[32];
	const char *err = NULL;
	char list[64];
	struct scram_server ss;
	struct scram_secret secret = { .iterations = 1 };

	memset(cb, 0xab, sizeof(cb));
	memcpy(other, cb, sizeof(other));
	other[31] ^= 1;
	/* offered first over TLS, alone without */
	scram_server_init(&ss, &secret, NULL);
	ck_assert_uint_eq(scram_server_mechanisms(&ss, list), sizeof("SCRAM-SHA-256") + 1);	/* and the empty name */
	ck_assert(!scram_server_choose_mechanism(&ss, "SCRAM-SHA-256-PLUS"));
	scram_server_set_channel_binding(&ss, cb, sizeof(cb));
	ck_assert_uint_eq(scram_server_mechanisms(&ss, list), sizeof("SCRAM-SHA-256-PLUS") + sizeof("SCRAM-SHA-256") + 1);
	ck_assert_str_eq(list, "SCRAM-SHA-256-PLUS");
	ck_assert_str_eq(list + sizeof("SCRAM-SHA-256-PLUS"), "SCRAM-SHA-256");
	ck_assert(!scram_server_choose_mechanism(&ss, "SCRAM-SHA-1"));

	ck_assert_int_eq(bound_exchange('p', cb, sizeof(cb), cb, sizeof(cb), "SCRAM-SHA-256-PLUS", &err), 0);
	/* the client saw another certificate */
	ck_assert_int_eq(bound_exchange('p', other, sizeof(other), cb, sizeof(cb), "SCRAM-SHA-256-PLUS", &err), 2);
	ck_assert_str_eq(err, "SCRAM channel binding check failed");
	/* plain SCRAM over TLS still works; "y" where -PLUS was offered is a downgrade */
	ck_assert_int_eq(bound_exchange('n', NULL, 0, cb, sizeof(cb), "SCRAM-SHA-256", &err), 0);
	ck_assert_int_eq(bound_exchange('y', NULL, 0, cb, sizeof(cb), "SCRAM-SHA-256", &err), 1);
	ck_assert_str_eq(err, "SCRAM channel binding negotiation error");
	ck_assert_int_eq(bound_exchange('y', NULL, 0, NULL, 0, "SCRAM-SHA-256", &err), 0);
	/* the flag must fit the mechanism chosen */
	ck_assert_int_eq(bound_exchange('p', cb, sizeof(cb), cb, sizeof(cb), "SCRAM-SHA-256", &err), 1);
	ck_assert_int_eq(bound_exchange('n', NULL, 0, cb, sizeof(cb), "SCRAM-SHA-256-PLUS", &err), 1);
	ck_assert_int_eq(bound_exchange('y', NULL, 0, cb, sizeof(cb), "SCRAM-SHA-256-PLUS", &err), 1);

	/* an unknown binding type */
	char buf[SCRAM_MSG_MAX];
	const char *cf = "p=tls-unique,,n=,r=abc";
	scram_server_init(&ss, &secret, NULL);
	scram_server_set_channel_binding(&ss, cb, sizeof(cb));
	ck_assert(scram_server_choose_mechanism(&ss, "SCRAM-SHA-256-PLUS"));
	ck_assert_int_eq(scram_server_first(&ss, cf, strlen(cf), buf, sizeof(buf), &err), -1);
	ck_assert_str_eq(err, "unsupported SCRAM channel-binding type");
	/* a client cannot bind to nothing */
	struct scram_client sc;
	scram_client_init(&sc, NULL, NULL);
	ck_assert(!scram_client_set_channel_binding(&sc, 'p', NULL, 0));
}
END_TEST

/* ------------------------------------------------------------ iteration cap */

/* A key source that records what it was asked and derives nothing (no PBKDF2). */
struct stub_source {
	int calls;
	int iterations;
};

static void stub_keys(void *arg, const char *password, const uint8_t *salt, size_t saltlen, int iterations,
		      struct scram_keys *out)
{
	struct stub_source *st = arg;
	(void)password;
	(void)salt;
	(void)saltlen;
	st->calls++;
	st->iterations = iterations;
	memset(out, 0x5a, sizeof(*out));
}

/* An absurd count is refused before any hashing, with the count and the limit in the message. */
START_TEST(test_client_iteration_cap)
{
	struct scram_client sc;
	struct stub_source st = { 0, 0 };
	char out[SCRAM_MSG_MAX];
	const char *err = NULL;

	scram_client_init(&sc, NULL, RFC_CNONCE);
	scram_client_set_key_source(&sc, stub_keys, &st);
	ck_assert_int_eq(run_client(&sc, RFC_PASSWORD, "r=" RFC_CNONCE RFC_SNONCE ",s=" RFC_SALT ",i=1000000000",
				    out, sizeof(out), &err), -1);
	ck_assert_int_eq(st.calls, 0);
	ck_assert_ptr_nonnull(err);
	ck_assert_msg(strstr(err, "1000000000 SCRAM iterations") && strstr(err, "limit of 1000000"), "%s", err);

	/* 30 digits: no overflow, the count shown cut short */
	scram_client_init(&sc, NULL, RFC_CNONCE);
	scram_client_set_key_source(&sc, stub_keys, &st);
	ck_assert_int_eq(run_client(&sc, RFC_PASSWORD, "r=" RFC_CNONCE RFC_SNONCE ",s=" RFC_SALT
				    ",i=999999999999999999999999999999", out, sizeof(out), &err), -1);
	ck_assert_int_eq(st.calls, 0);
	ck_assert_msg(strstr(err, "99999999999999999999... SCRAM iterations"), "%s", err);

	/* the limit itself is accepted and handed to the key source */
	scram_client_init(&sc, NULL, RFC_CNONCE);
	scram_client_set_key_source(&sc, stub_keys, &st);
	ck_assert_int_gt(run_client(&sc, RFC_PASSWORD, "r=" RFC_CNONCE RFC_SNONCE ",s=" RFC_SALT ",i=1000000",
				    out, sizeof(out), &err), 0);
	ck_assert_int_eq(st.calls, 1);
	ck_assert_int_eq(st.iterations, SCRAM_ITERATIONS_MAX);
}
END_TEST

/* ------------------------------------------------------------ derived keys */

START_TEST(test_keys_derive_rfc)
{
	uint8_t salt[16], ck[32], sk[32], stk[32];
	struct scram_keys k;

	ck_assert_int_eq(crypto_b64_decode(RFC_SALT, strlen(RFC_SALT), salt, sizeof(salt)), 16);
	b64_to_key(RFC_CLIENT_KEY, ck);
	b64_to_key(RFC_SERVER_KEY, sk);
	b64_to_key(RFC_STORED_KEY, stk);
	scram_keys_derive(RFC_PASSWORD, salt, sizeof(salt), 4096, &k);
	ck_assert_mem_eq(k.client_key, ck, 32);
	ck_assert_mem_eq(k.server_key, sk, 32);
	ck_assert_mem_eq(k.stored_key, stk, 32);
}
END_TEST

static void expect_fresh(const struct scram_keys *got, const char *password, const uint8_t *salt, size_t saltlen,
			 int iterations)
{
	struct scram_keys fresh;
	scram_keys_derive(password, salt, saltlen, iterations, &fresh);
	ck_assert_mem_eq(got->client_key, fresh.client_key, 32);
	ck_assert_mem_eq(got->stored_key, fresh.stored_key, 32);
	ck_assert_mem_eq(got->server_key, fresh.server_key, 32);
}

/* Keys are derived once per (owner, password, salt, iterations), equal a fresh derivation, and go with the secret. */
START_TEST(test_cache_keys)
{
	const uint8_t salt[16] = "0123456789abcdef", salt2[16] = "fedcba9876543210";
	struct scram_cache_stats st0, st;
	struct scram_keys a, b;

	scram_cache_clear();
	scram_cache_get_stats(&st0);
	ck_assert_uint_eq(st0.entries, 0);

	scram_cache_get_keys(SCRAM_CACHE_CLIENT_LOGIN, "alice", "secret-1", salt, 16, 64, &a);
	expect_fresh(&a, "secret-1", salt, 16, 64);
	scram_cache_get_keys(SCRAM_CACHE_CLIENT_LOGIN, "alice", "secret-1", salt, 16, 64, &b);
	ck_assert_mem_eq(&a, &b, sizeof(a));
	scram_cache_get_stats(&st);
	ck_assert_uint_eq(st.derivations - st0.derivations, 1);
	ck_assert_uint_eq(st.hits - st0.hits, 1);
	ck_assert_uint_eq(st.entries, 1);

	/* a new password for the same owner: derived again, the old keys dropped (still one entry) */
	scram_cache_get_keys(SCRAM_CACHE_CLIENT_LOGIN, "alice", "secret-2", salt, 16, 64, &b);
	expect_fresh(&b, "secret-2", salt, 16, 64);
	ck_assert_msg(memcmp(&a, &b, sizeof(a)) != 0, "keys of the old password reused");
	scram_cache_get_stats(&st);
	ck_assert_uint_eq(st.derivations - st0.derivations, 2);
	ck_assert_uint_eq(st.entries, 1);
	/* the old password is not served from the cache either */
	scram_cache_get_keys(SCRAM_CACHE_CLIENT_LOGIN, "alice", "secret-1", salt, 16, 64, &a);
	expect_fresh(&a, "secret-1", salt, 16, 64);
	scram_cache_get_stats(&st);
	ck_assert_uint_eq(st.derivations - st0.derivations, 3);

	/* another count, salt, owner or kind is another entry */
	scram_cache_get_keys(SCRAM_CACHE_CLIENT_LOGIN, "alice", "secret-1", salt, 16, 65, &b);
	expect_fresh(&b, "secret-1", salt, 16, 65);
	scram_cache_get_keys(SCRAM_CACHE_CLIENT_LOGIN, "alice", "secret-1", salt2, 16, 64, &b);
	expect_fresh(&b, "secret-1", salt2, 16, 64);
	scram_cache_get_keys(SCRAM_CACHE_CLIENT_LOGIN, "bob", "secret-1", salt, 16, 64, &b);
	scram_cache_server_keys((void *)"alice", "secret-1", salt, 16, 64, &b);
	expect_fresh(&b, "secret-1", salt, 16, 64);
	scram_cache_get_stats(&st);
	ck_assert_uint_eq(st.entries, 5);
	ck_assert_uint_eq(st.derivations - st0.derivations, 7);

	/* many owners: the table grows and every one is still found */
	char owner[32];
	for (int i = 0; i < 300; i++) {
		snprintf(owner, sizeof(owner), "user%d", i);
		scram_cache_get_keys(SCRAM_CACHE_SERVER_LOGIN, owner, "pw", salt, 16, 1, &a);
	}
	scram_cache_get_stats(&st0);
	for (int i = 0; i < 300; i++) {
		snprintf(owner, sizeof(owner), "user%d", i);
		scram_cache_get_keys(SCRAM_CACHE_SERVER_LOGIN, owner, "pw", salt, 16, 1, &a);
	}
	scram_cache_get_stats(&st);
	ck_assert_uint_eq(st.hits - st0.hits, 300);
	ck_assert_uint_eq(st.derivations, st0.derivations);

	/* reload: everything dropped, the next login derives again */
	scram_cache_clear();
	scram_cache_get_stats(&st);
	ck_assert_uint_eq(st.entries, 0);
	scram_cache_get_keys(SCRAM_CACHE_CLIENT_LOGIN, "alice", "secret-1", salt, 16, 64, &a);
	scram_cache_get_stats(&st0);
	ck_assert_uint_eq(st0.derivations, st.derivations + 1);
	scram_cache_clear();
}
END_TEST

/* Above SCRAM_CACHE_MAX entries the least recently used one goes. */
START_TEST(test_cache_eviction)
{
	const uint8_t salt[16] = "0123456789abcdef";
	struct scram_cache_stats st0, st;
	struct scram_keys k;
	char owner[32];

	scram_cache_clear();
	for (int i = 0; i <= SCRAM_CACHE_MAX; i++) {
		snprintf(owner, sizeof(owner), "user%d", i);
		scram_cache_get_keys(SCRAM_CACHE_CLIENT_LOGIN, owner, "pw", salt, 16, 1, &k);
		if (i == 5)	/* user0 used again: user1 is the oldest when the cache fills */
			scram_cache_get_keys(SCRAM_CACHE_CLIENT_LOGIN, "user0", "pw", salt, 16, 1, &k);
	}
	scram_cache_get_stats(&st0);
	ck_assert_uint_eq(st0.entries, SCRAM_CACHE_MAX);
	scram_cache_get_keys(SCRAM_CACHE_CLIENT_LOGIN, "user0", "pw", salt, 16, 1, &k);
	scram_cache_get_keys(SCRAM_CACHE_CLIENT_LOGIN, "user2", "pw", salt, 16, 1, &k);
	scram_cache_get_stats(&st);
	ck_assert_uint_eq(st.hits - st0.hits, 2);
	scram_cache_get_keys(SCRAM_CACHE_CLIENT_LOGIN, "user1", "pw", salt, 16, 1, &k);	/* evicted */
	scram_cache_get_stats(&st0);
	ck_assert_uint_eq(st0.derivations - st.derivations, 1);
	ck_assert_uint_eq(st0.entries, SCRAM_CACHE_MAX);
	scram_cache_clear();
}
END_TEST

/* A server login through the cache: same messages as without it, and one derivation for two logins. */
START_TEST(test_client_key_source_cache)
{
	struct scram_client plain, cached;
	struct scram_cache_stats st0, st;
	char out1[SCRAM_MSG_MAX], out2[SCRAM_MSG_MAX];
	const char *err = NULL;

	scram_cache_clear();
	scram_cache_get_stats(&st0);
	for (int round = 0; round < 2; round++) {
		scram_client_init(&plain, RFC_USER, RFC_CNONCE);
		scram_client_init(&cached, RFC_USER, RFC_CNONCE);
		scram_client_set_key_source(&cached, scram_cache_server_keys, (void *)RFC_USER);
		ck_assert_int_gt(run_client(&plain, RFC_PASSWORD, RFC_SERVER_FIRST, out1, sizeof(out1), &err), 0);
		ck_assert_int_gt(run_client(&cached, RFC_PASSWORD, RFC_SERVER_FIRST, out2, sizeof(out2), &err), 0);
		ck_assert_str_eq(out2, RFC_CLIENT_FINAL);
		ck_assert_str_eq(out1, out2);
		ck_assert(scram_client_verify(&cached, RFC_SERVER_FINAL, strlen(RFC_SERVER_FINAL), &err));
	}
	scram_cache_get_stats(&st);
	ck_assert_uint_eq(st.derivations - st0.derivations, 1);
	ck_assert_uint_eq(st.hits - st0.hits, 1);
	scram_cache_clear();
}
END_TEST

/* Mock salts: 16 bytes, stable for a name, different between names. */
START_TEST(test_mock_salt)
{
	uint8_t a[SCRAM_MOCK_SALT_LEN], b[SCRAM_MOCK_SALT_LEN], c[SCRAM_MOCK_SALT_LEN], zero[SCRAM_MOCK_SALT_LEN] = { 0 };

	scram_cache_init_instance();
	scram_cache_mock_salt("ghost", a);
	scram_cache_mock_salt("ghost", b);
	scram_cache_mock_salt("ghost2", c);
	ck_assert_mem_eq(a, b, sizeof(a));
	ck_assert_msg(memcmp(a, c, sizeof(a)) != 0, "two names share a mock salt");
	ck_assert_msg(memcmp(a, zero, sizeof(a)) != 0, "mock salt is all zero");
	scram_cache_init_instance();	/* keeps the secret */
	scram_cache_mock_salt("ghost", b);
	ck_assert_mem_eq(a, b, sizeof(a));
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("scram");
	TCase *tc = tcase_create("crypto");
	tcase_add_test(tc, test_md5_password);
	tcase_add_test(tc, test_md5_response);
	tcase_add_test(tc, test_b64_known);
	tcase_add_test(tc, test_b64_round_trip);
	tcase_add_test(tc, test_b64_rejects);
	tcase_add_test(tc, test_sha256_hmac);
	tcase_add_test(tc, test_hmac_vectors);
	tcase_add_test(tc, test_random);
	suite_add_tcase(s, tc);

	tc = tcase_create("client");
	tcase_add_test(tc, test_client_rfc7677);
	tcase_add_test(tc, test_client_rejects_bad_server_final);
	tcase_add_test(tc, test_client_rejects_bad_server_first);
	tcase_add_test(tc, test_client_out_of_order);
	tcase_add_test(tc, test_client_first_forms);
	tcase_add_test(tc, test_client_has_keys);
	tcase_add_test(tc, test_client_wrong_password);
	tcase_add_test(tc, test_client_iteration_cap);
	suite_add_tcase(s, tc);

	tc = tcase_create("cache");
	tcase_add_test(tc, test_keys_derive_rfc);
	tcase_add_test(tc, test_cache_keys);
	tcase_add_test(tc, test_cache_eviction);
	tcase_add_test(tc, test_client_key_source_cache);
	tcase_add_test(tc, test_mock_salt);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);

	tc = tcase_create("secret");
	tcase_add_test(tc, test_build_secret);
	tcase_add_test(tc, test_secret_known);
	suite_add_tcase(s, tc);

	tc = tcase_create("server");
	tcase_add_test(tc, test_server_rfc7677);
	tcase_add_test(tc, test_verify_proof);
	tcase_add_test(tc, test_server_rejects);
	tcase_add_test(tc, test_server_gs2_y);
	tcase_add_test(tc, test_client_server_passthrough);
	tcase_add_test(tc, test_channel_binding);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);
	return s;
}
