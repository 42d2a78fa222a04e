/*
 * test_tls_record.c - tls_record.c against OpenSSL's own TLS 1.3 client
 * over a socket pair: the handover after the handshake for each of the
 * three suites, data both ways in many record sizes with the sender's
 * socket full (partial writes, the retry contract), the client's
 * KeyUpdate asked for and not, close_notify, a forged record, and the
 * cases that must stay with OpenSSL (TLS 1.2).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"
#include "tls.h"
#include "tls_record.h"
#include "../check_main.h"

static SSL_CTX *server_ctx;

/* A context as pgvalve's client side has one: a self-signed P-256 certificate, then tls_record_prepare_ctx. */
static void make_server_ctx(void)
{
	EVP_PKEY *key = EVP_EC_gen("P-256");
	ck_assert_ptr_nonnull(key);
	X509 *cert = X509_new();
	ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
	X509_gmtime_adj(X509_getm_notBefore(cert), 0);
	X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
	X509_set_pubkey(cert, key);
	X509_NAME *name = X509_get_subject_name(cert);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1, -1, 0);
	X509_set_issuer_name(cert, name);
	ck_assert_int_gt(X509_sign(cert, key, EVP_sha256()), 0);
	server_ctx = SSL_CTX_new(TLS_server_method());
	ck_assert_int_eq(SSL_CTX_use_certificate(server_ctx, cert), 1);
	ck_assert_int_eq(SSL_CTX_use_PrivateKey(server_ctx, key), 1);
	SSL_CTX_set_mode(server_ctx, SSL_MODE_RELEASE_BUFFERS);
	tls_record_prepare_ctx(server_ctx);
	X509_free(cert);
	EVP_PKEY_free(key);
}

struct pair {
	int sfd, cfd;
	SSL *client;
	SSL_CTX *client_ctx;
	struct tls_record *rec;
};

/* Handshake over a socket pair; the server side handed over to tls_record (NULL if it refused). */
static void pair_open(struct pair *p, const char *suite, int max_version)
{
	int fds[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
	p->sfd = fds[0];
	p->cfd = fds[1];
	fcntl(p->sfd, F_SETFL, O_NONBLOCK);
	fcntl(p->cfd, F_SETFL, O_NONBLOCK);
	int small = 4096;	/* a small buffer, so a large write is taken in parts */
	setsockopt(p->sfd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	if (!server_ctx)
		make_server_ctx();
	p->client_ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_set_max_proto_version(p->client_ctx, max_version);
	if (suite)
		ck_assert_int_eq(SSL_CTX_set_ciphersuites(p->client_ctx, suite), 1);
	p->client = SSL_new(p->client_ctx);
	SSL_set_tlsext_host_name(p->client, "t42.db.example.com");	/* kept for routing by SNI */
	SSL *server = SSL_new(server_ctx);
	SSL_set_fd(p->client, p->cfd);
	SSL_set_fd(server, p->sfd);
	SSL_set_connect_state(p->client);
	SSL_set_accept_state(server);
	int done = 0;
	for (int i = 0; i < 100 && done != 3; i++) {
		if (!(done & 1) && SSL_do_handshake(p->client) == 1)
			done |= 1;
		if (!(done & 2) && SSL_do_handshake(server) == 1)
			done |= 2;
	}
	ck_assert_int_eq(done, 3);
	char describe[64];
	tls_describe(server, describe, sizeof(describe));
	p->rec = tls_record_adopt(server, describe, tls_alpn_postgresql(server));
	SSL_free(server);
}

static void pair_close(struct pair *p)
{
	tls_record_free(p->rec);
	SSL_free(p->client);
	SSL_CTX_free(p->client_ctx);
	close(p->sfd);
	close(p->cfd);
}

static void fill(uint8_t *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (uint8_t)(seed >> 16);
	}
}

/* The client sends len bytes in pieces of varied sizes; the server reads them through tls_record. */
static void client_to_server(struct pair *p, size_t len)
{
	uint8_t *sent = malloc(len), *got = malloc(len);
	fill(sent, len, (unsigned)len);
	size_t wrote = 0, read = 0, piece = 1;
	while (read < len) {
		if (wrote < len) {
			size_t n = MIN(piece, len - wrote);
			int w = SSL_write(p->client, sent + wrote, (int)n);
			if (w > 0) {
				wrote += (size_t)w;
				piece = piece * 3 + 7;	/* 1, 10, 37, ... up past a record's 16 kB */
				if (piece > 40000)
					piece = 1;
			}
		}
		ssize_t r = tls_record_read(p->rec, p->sfd, got + read, MIN(len - read, (size_t)5000));
		if (r > 0)
			read += (size_t)r;
		else
			ck_assert_msg(r < 0 && errno == EAGAIN, "tls_record_read: %zd (errno %d) at %zu", r, errno, read);
	}
	ck_assert_int_eq(memcmp(sent, got, len), 0);
	ck_assert_uint_eq(tls_record_pending(p->rec), 0);
	free(sent);
	free(got);
}

/* The server sends len bytes through tls_record as netbuf does (a retry starts with the same bytes). */
static void server_to_client(struct pair *p, size_t len)
{
	uint8_t *sent = malloc(len), *got = malloc(len);
	fill(sent, len, (unsigned)len + 1);
	size_t wrote = 0, read = 0;
	int partial = 0;
	while (read < len) {
		if (wrote < len) {
			ssize_t w = tls_record_write(p->rec, p->sfd, sent + wrote, len - wrote);
			if (w > 0)
				wrote += (size_t)w;
			else {
				ck_assert_msg(errno == EAGAIN, "tls_record_write: errno %d", errno);
				partial++;
			}
		}
		int r = SSL_read(p->client, got + read, (int)(len - read));
		if (r > 0)
			read += (size_t)r;
		else
			ck_assert_int_eq(SSL_get_error(p->client, r), SSL_ERROR_WANT_READ);
	}
	ck_assert_int_eq(memcmp(sent, got, len), 0);
	if (len > 100000)
		ck_assert_msg(partial > 0, "the socket took %zu bytes at once: the retry path was not tried", len);
	free(sent);
	free(got);
}

static const char *const suites[] = { "TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
				      "TLS_CHACHA20_POLY1305_SHA256" };

START_TEST(both_ways_each_suite)
{
	struct pair p;
	pair_open(&p, suites[_i], TLS1_3_VERSION);
	ck_assert_ptr_nonnull(p.rec);
	ck_assert_msg(strstr(tls_record_describe(p.rec), "TLSv1.3/") != NULL, "%s", tls_record_describe(p.rec));
	ck_assert_msg(strstr(tls_record_describe(p.rec), suites[_i]) != NULL, "%s", tls_record_describe(p.rec));
	ck_assert_str_eq(tls_record_servername(p.rec), "t42.db.example.com");
	client_to_server(&p, 1);
	client_to_server(&p, 300000);
	server_to_client(&p, 1);
	server_to_client(&p, 500000);
	client_to_server(&p, 20000);
	pair_close(&p);
}
END_TEST

START_TEST(key_update_followed_and_answered)
{
	struct pair p;
	pair_open(&p, NULL, TLS1_3_VERSION);
	ck_assert_ptr_nonnull(p.rec);
	/* not requested: our reading key moves on, our writing key stays */
	ck_assert_int_eq(SSL_key_update(p.client, SSL_KEY_UPDATE_NOT_REQUESTED), 1);
	client_to_server(&p, 1000);
	server_to_client(&p, 1000);
	/* requested: ours follows before our next record, and the client reads with its new key */
	ck_assert_int_eq(SSL_key_update(p.client, SSL_KEY_UPDATE_REQUESTED), 1);
	client_to_server(&p, 1000);
	server_to_client(&p, 70000);
	client_to_server(&p, 1000);
	pair_close(&p);
}
END_TEST

START_TEST(close_notify_is_end_of_stream)
{
	struct pair p;
	pair_open(&p, NULL, TLS1_3_VERSION);
	ck_assert_ptr_nonnull(p.rec);
	client_to_server(&p, 100);
	SSL_shutdown(p.client);
	uint8_t buf[64];
	ck_assert_int_eq(tls_record_read(p.rec, p.sfd, buf, sizeof(buf)), 0);
	/* ours reaches the client as a close_notify */
	tls_record_close_notify(p.rec, p.sfd);
	int r = SSL_read(p.client, buf, sizeof(buf));
	ck_assert_int_le(r, 0);
	ck_assert_int_eq(SSL_get_error(p.client, r), SSL_ERROR_ZERO_RETURN);
	pair_close(&p);
}
END_TEST

START_TEST(forged_record_refused)
{
	struct pair p;
	pair_open(&p, NULL, TLS1_3_VERSION);
	ck_assert_ptr_nonnull(p.rec);
	uint8_t forged[5 + 32] = { 23, 3, 3, 0, 32 };
	fill(forged + 5, 32, 7);
	ck_assert_int_eq(send(p.cfd, forged, sizeof(forged), 0), (ssize_t)sizeof(forged));
	uint8_t buf[64];
	errno = 0;
	ck_assert_int_eq(tls_record_read(p.rec, p.sfd, buf, sizeof(buf)), -1);
	ck_assert_int_eq(errno, EPROTO);
	pair_close(&p);

	/* a record longer than TLS allows, before its body arrives */
	pair_open(&p, NULL, TLS1_3_VERSION);
	uint8_t huge[5] = { 23, 3, 3, 0x48, 0x01 };	/* 18,433 bytes */
	ck_assert_int_eq(send(p.cfd, huge, sizeof(huge), 0), 5);
	errno = 0;
	ck_assert_int_eq(tls_record_read(p.rec, p.sfd, buf, sizeof(buf)), -1);
	ck_assert_int_eq(errno, EPROTO);
	pair_close(&p);
}
END_TEST

START_TEST(eof_inside_a_record_is_an_error)
{
	struct pair p;
	pair_open(&p, NULL, TLS1_3_VERSION);
	uint8_t part[5 + 10] = { 23, 3, 3, 0, 40 };
	ck_assert_int_eq(send(p.cfd, part, sizeof(part), 0), (ssize_t)sizeof(part));
	shutdown(p.cfd, SHUT_WR);
	uint8_t buf[64];
	ssize_t r;
	while ((r = tls_record_read(p.rec, p.sfd, buf, sizeof(buf))) < 0 && errno == EAGAIN)
		poll(NULL, 0, 1);	/* the rest of the record is not coming: EOF follows */
	ck_assert_int_eq(r, -1);
	ck_assert_int_eq(errno, EPROTO);
	pair_close(&p);
}
END_TEST

START_TEST(tls12_stays_with_openssl)
{
	struct pair p;
	pair_open(&p, NULL, TLS1_2_VERSION);
	ck_assert_ptr_null(p.rec);
	pair_close(&p);
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("tls_record");
	TCase *tc = tcase_create("tls_record");
	tcase_add_loop_test(tc, both_ways_each_suite, 0, 3);
	tcase_add_test(tc, key_update_followed_and_answered);
	tcase_add_test(tc, close_notify_is_end_of_stream);
	tcase_add_test(tc, forged_record_refused);
	tcase_add_test(tc, eof_inside_a_record_is_an_error);
	tcase_add_test(tc, tls12_stays_with_openssl);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return s;
}
