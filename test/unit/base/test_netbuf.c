/*
 * test_netbuf.c - the forwarding contract of netbuf.c: messages rewritten
 * on their way (netbuf_replace) and bytes added to a forwarded stream
 * (netbuf_insert) leave in the same send() as the forwarded bytes around
 * them. The destination is a SOCK_SEQPACKET socket, so every send() is
 * one record the test can count.
 */
#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"
#include "netbuf.h"
#include "../check_main.h"

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

static struct event_base *base;
static struct netbuf src, dst;
static int feed_fd, sink_fd;	/* the test's ends: it writes to src, reads what dst sent */

/* What the source handler does with each message type. */
enum action { FORWARD, REWRITE_HEAD, DROP, FORWARD_THEN_INSERT, CLOSE_DST, STREAM, FORWARD_THEN_PAUSE };
static enum action action_for[256];
static const char NEW_HEAD[] = "B\0\0\0\x10" "new_name";	/* type, length 16, 8 name bytes */

static bool src_handler(struct netbuf *nb, enum netbuf_event ev, const struct pkt *pkt)
{
	if (ev != NETBUF_EV_PACKET)
		return true;
	if (action_for[pkt->type] == STREAM) {	/* as the hot path: forwarded from its header on */
		netbuf_forward(nb, pkt->len);
		return true;
	}
	if (!pkt_complete(pkt))
		return true;
	switch (action_for[pkt->type]) {
	case REWRITE_HEAD:	/* 'B' + length + 3-byte name, then the rest kept */
		netbuf_replace(nb, pkt->len, 8, NEW_HEAD, sizeof(NEW_HEAD) - 1);
		break;
	case DROP:
		netbuf_replace(nb, pkt->len, pkt->len, NULL, 0);
		break;
	case FORWARD_THEN_INSERT:
		netbuf_forward(nb, pkt->len);
		netbuf_insert(nb, "made", 4);
		break;
	case FORWARD_THEN_PAUSE:
		netbuf_forward(nb, pkt->len);
		netbuf_pause(nb);
		break;
	case CLOSE_DST:	/* as a handler closing the peer it forwards to, cuts still pending */
		netbuf_replace(nb, pkt->len, pkt->len, NULL, 0);
		netbuf_close(&dst);
		break;
	default:
		netbuf_forward(nb, pkt->len);
		break;
	}
	return true;
}

static bool dst_handler(struct netbuf *nb, enum netbuf_event ev, const struct pkt *pkt)
{
	if (ev == NETBUF_EV_PACKET)
		netbuf_skip(nb, pkt->len);
	return true;
}

static void setup(void)
{
	int a[2], b[2];
	base = event_base_new();
	netbuf_global_init(base, 8192);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, a), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, b), 0);
	feed_fd = a[0];
	sink_fd = b[1];
	netbuf_init(&src, src_handler, NETBUF_LIMIT_NONE);
	netbuf_init(&dst, dst_handler, NETBUF_LIMIT_NONE);
	netbuf_accept(&src, a[1]);
	netbuf_accept(&dst, b[0]);
	netbuf_set_dst(&src, &dst);
	memset(action_for, 0, sizeof(action_for));
}

static void teardown(void)
{
	netbuf_close(&src);
	netbuf_close(&dst);
	close(feed_fd);
	close(sink_fd);
	netbuf_global_cleanup();
	event_base_free(base);
}

/* A message: type, length, body. */
static size_t put_msg(uint8_t *p, char type, const char *body, size_t body_len)
{
	uint32_t len = (uint32_t)body_len + 4;
	p[0] = (uint8_t)type;
	p[1] = (uint8_t)(len >> 24); p[2] = (uint8_t)(len >> 16); p[3] = (uint8_t)(len >> 8); p[4] = (uint8_t)len;
	memcpy(p + 5, body, body_len);
	return body_len + 5;
}

/* Feeds the bytes to src in one write and lets it read them once. */
static void feed(const uint8_t *data, size_t len)
{
	ck_assert_int_eq(write(feed_fd, data, len), (ssize_t)len);
	netbuf_read_now(&src);
}

/* The records dst sent, in order, concatenated into out; returns how many there were. */
static int drain(uint8_t *out, size_t size, size_t *len)
{
	int records = 0;
	*len = 0;
	for (;;) {
		ssize_t n = recv(sink_fd, out + *len, size - *len, MSG_DONTWAIT);
		if (n <= 0)
			break;
		*len += (size_t)n;
		records++;
	}
	return records;
}

static size_t put_bytes(uint8_t *p, const void *data, size_t len)
{
	memcpy(p, data, len);
	return len;
}

/* dst sent exactly `want` in `records` send()s (0: at least one). */
static void expect_sent(const uint8_t *want, size_t len, int records)
{
	uint8_t out[4096];
	size_t got;
	int n = drain(out, sizeof(out), &got);
	if (records)
		ck_assert_int_eq(n, records);
	else
		ck_assert_int_ge(n, 1);
	ck_assert_uint_eq(got, len);
	ck_assert_mem_eq(out, want, len);
}

START_TEST(rewritten_head_goes_in_the_same_send)
{
	uint8_t in[256], want[256];
	size_t n = 0, w = 0;
	action_for['B'] = REWRITE_HEAD;
	n += put_msg(in + n, 'Q', "x", 1);
	n += put_msg(in + n, 'B', "abc" "PARAMS", 9);	/* name "abc" (3 bytes), the rest kept */
	n += put_msg(in + n, 'E', "", 0);
	n += put_msg(in + n, 'S', "", 0);
	feed(in, n);

	w += put_msg(want + w, 'Q', "x", 1);
	w += put_bytes(want + w, NEW_HEAD, sizeof(NEW_HEAD) - 1);
	w += put_bytes(want + w, "PARAMS", 6);
	w += put_msg(want + w, 'E', "", 0);
	w += put_msg(want + w, 'S', "", 0);
	expect_sent(want, w, 1);
}
END_TEST

START_TEST(rewrite_first_in_the_read_still_one_send)
{
	uint8_t in[256], want[256];
	size_t n = 0, w = 0;
	action_for['B'] = REWRITE_HEAD;
	n += put_msg(in + n, 'B', "abc" "P", 4);
	n += put_msg(in + n, 'S', "", 0);
	feed(in, n);
	w += put_bytes(want + w, NEW_HEAD, sizeof(NEW_HEAD) - 1);
	w += put_bytes(want + w, "P", 1);
	w += put_msg(want + w, 'S', "", 0);
	expect_sent(want, w, 1);
}
END_TEST

START_TEST(dropped_and_inserted_in_stream_order)
{
	uint8_t in[256], want[256];
	size_t n = 0, w = 0;
	action_for['1'] = DROP;
	action_for['Z'] = FORWARD_THEN_INSERT;
	n += put_msg(in + n, '1', "", 0);
	n += put_msg(in + n, '2', "", 0);
	n += put_msg(in + n, 'Z', "I", 1);
	n += put_msg(in + n, 'C', "t", 1);
	feed(in, n);

	w += put_msg(want + w, '2', "", 0);
	w += put_msg(want + w, 'Z', "I", 1);
	w += put_bytes(want + w, "made", 4);
	w += put_msg(want + w, 'C', "t", 1);
	expect_sent(want, w, 1);
}
END_TEST

/*
 * Messages put back (netbuf_unread) while the reader is paused with input
 * still buffered are offered first when it reads on: in the same buffer
 * when they fit, in a larger one when they do not.
 */
START_TEST(unread_messages_come_before_the_buffered_rest)
{
	static uint8_t in[64], back[20000], want[20100], out[20100];
	static char body_bytes[12000];
	memset(body_bytes, 'q', sizeof(body_bytes));
	for (int big = 0; big < 2; big++) {
		size_t n = 0, b = 0, w = 0, got;
		action_for['P'] = FORWARD_THEN_PAUSE;
		n += put_msg(in + n, 'P', "p", 1);
		n += put_msg(in + n, 'X', "rest", 4);
		feed(in, n);
		ck_assert_int_eq(drain(out, sizeof(out), &got), 1);	/* P went out; X waits in the buffer */
		size_t body = big ? 12000 : 100;	/* the buffer is 8192 bytes */
		b += put_msg(back, 'Q', body_bytes, body);
		action_for['P'] = FORWARD;
		netbuf_unread(&src, back, (uint32_t)b);
		netbuf_resume(&src);
		for (int i = 0; i < 10; i++)
			event_base_loop(base, EVLOOP_NONBLOCK);
		w += put_bytes(want + w, back, b);
		w += put_msg(want + w, 'X', "rest", 4);
		ck_assert_int_ge(drain(out, sizeof(out), &got), 1);
		ck_assert_uint_eq(got, w);
		ck_assert_mem_eq(out, want, w);
	}
}
END_TEST

START_TEST(insert_with_nothing_forwarded_is_sent_now)
{
	netbuf_insert(&src, "now", 3);
	expect_sent((const uint8_t *)"now", 3, 1);
}
END_TEST

START_TEST(more_rewrites_than_cuts_keep_every_byte_in_order)
{
	uint8_t in[2048], want[2048];
	size_t n = 0, w = 0;
	action_for['B'] = REWRITE_HEAD;
	for (int i = 0; i < 40; i++) {
		char body[4] = { 'a', 'b', 'c', (char)('0' + i % 10) };
		n += put_msg(in + n, 'B', body, 4);
		w += put_bytes(want + w, NEW_HEAD, sizeof(NEW_HEAD) - 1);
		w += put_bytes(want + w, body + 3, 1);
		n += put_msg(in + n, 'E', "", 0);
		w += put_msg(want + w, 'E', "", 0);
	}
	feed(in, n);
	expect_sent(want, w, 0);
}
END_TEST

/* A rewrite bigger than the socket takes: what sendmsg() leaves is queued and follows in order. */
START_TEST(partial_send_queues_the_rest_in_order)
{
	enum { PARAMS = 200 * 1000 };
	int b[2], size = 4096;
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, b), 0);
	ck_assert_int_eq(setsockopt(b[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)), 0);
	netbuf_close(&dst);
	close(sink_fd);
	netbuf_init(&dst, dst_handler, NETBUF_LIMIT_NONE);
	netbuf_accept(&dst, b[0]);
	netbuf_set_dst(&src, &dst);
	sink_fd = b[1];
	action_for['B'] = REWRITE_HEAD;

	uint8_t *in = malloc(PARAMS + 64), *want = malloc(PARAMS + 64), *out = malloc(PARAMS + 64);
	char *body = malloc(PARAMS + 3);
	memcpy(body, "abc", 3);
	for (size_t i = 0; i < PARAMS; i++)
		body[3 + i] = (char)('a' + i % 26);
	size_t n = 0, w = 0, fed = 0, got = 0;
	n += put_msg(in + n, 'B', body, PARAMS + 3);
	n += put_msg(in + n, 'S', "", 0);
	w += put_bytes(want + w, NEW_HEAD, sizeof(NEW_HEAD) - 1);
	w += put_bytes(want + w, body + 3, PARAMS);
	w += put_msg(want + w, 'S', "", 0);
	for (int turn = 0; turn < 10000 && got < w; turn++) {
		ssize_t k = fed < n ? write(feed_fd, in + fed, n - fed) : 0;
		if (k > 0)
			fed += (size_t)k;
		event_base_loop(base, EVLOOP_NONBLOCK);
		if (turn % 2)	/* the reader lags: sends stay partial for a while */
			continue;
		k = recv(sink_fd, out + got, w - got, MSG_DONTWAIT);
		if (k > 0)
			got += (size_t)k;
	}
	ck_assert_uint_eq(got, w);
	ck_assert_mem_eq(out, want, w);
	free(in);
	free(want);
	free(out);
	free(body);
}
END_TEST

START_TEST(without_dst_a_rewrite_drops_the_message)
{
	uint8_t in[64], out[64];
	size_t n = 0, got;
	action_for['B'] = REWRITE_HEAD;
	action_for['Z'] = FORWARD_THEN_INSERT;
	netbuf_set_dst(&src, NULL);
	n += put_msg(in + n, 'B', "abc" "P", 4);
	n += put_msg(in + n, 'Z', "I", 1);
	feed(in, n);
	ck_assert_int_eq(drain(out, sizeof(out), &got), 0);
}
END_TEST

START_TEST(closing_dst_mid_read_drops_pending_rewrites)
{
	uint8_t in[64], out[64];
	size_t n = 0, got;
	action_for['B'] = REWRITE_HEAD;
	action_for['Z'] = FORWARD_THEN_INSERT;
	action_for['X'] = CLOSE_DST;
	n += put_msg(in + n, 'Z', "I", 1);	/* forwarded with an insertion, */
	n += put_msg(in + n, 'B', "abc" "P", 4);	/* a cut, */
	n += put_msg(in + n, 'X', "", 0);	/* then dst closes: nothing may dangle */
	n += put_msg(in + n, 'S', "", 0);
	feed(in, n);
	ck_assert_int_eq(drain(out, sizeof(out), &got), 0);
	action_for['Z'] = FORWARD_THEN_INSERT;
	n = put_msg(in, 'Z', "I", 1);	/* later rewrites start clean */
	feed(in, n);
	ck_assert_int_eq(drain(out, sizeof(out), &got), 0);
}
END_TEST

/* ---------------------------------------------------------------- flow control over TLS */

/* A throwaway key and self-signed certificate for the TLS side of src. */
static SSL_CTX *server_ctx(void)
{
	EVP_PKEY *key = EVP_EC_gen("P-256");
	X509 *cert = X509_new();
	ck_assert_ptr_nonnull(key);
	ck_assert_ptr_nonnull(cert);
	X509_set_version(cert, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
	X509_gmtime_adj(X509_getm_notBefore(cert), 0);
	X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
	X509_set_pubkey(cert, key);
	X509_NAME_add_entry_by_txt(X509_get_subject_name(cert), "CN", MBSTRING_ASC, (const unsigned char *)"t", -1, -1,
				   0);
	X509_set_issuer_name(cert, X509_get_subject_name(cert));
	ck_assert_int_gt(X509_sign(cert, key, EVP_sha256()), 0);
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	ck_assert_int_eq(SSL_CTX_use_certificate(ctx, cert), 1);
	ck_assert_int_eq(SSL_CTX_use_PrivateKey(ctx, key), 1);
	X509_free(cert);
	EVP_PKEY_free(key);
	return ctx;
}

/*
 * src reads TLS, and stops because dst's queue is over its limit right
 * after a read that left half a record decrypted inside OpenSSL, with
 * nothing more on the socket. Once dst drains, src must read that half
 * itself: no socket event will ever announce it (issue 29 point 4).
 */
START_TEST(tls_reader_stopped_by_flow_control_reads_what_openssl_holds)
{
	enum { BODY = 15000, FILLER = 1 << 20 };
	int a[2], b[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, a), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, b), 0);
	netbuf_close(&src);
	netbuf_close(&dst);
	close(feed_fd);
	close(sink_fd);
	netbuf_init(&src, src_handler, NETBUF_LIMIT_NONE);
	netbuf_init(&dst, dst_handler, NETBUF_LIMIT_NONE);
	netbuf_accept(&src, a[1]);
	netbuf_accept(&dst, b[0]);
	netbuf_set_dst(&src, &dst);
	feed_fd = a[0];
	sink_fd = b[1];
	SSL_CTX *sctx = server_ctx(), *cctx = SSL_CTX_new(TLS_client_method());
	SSL *client = SSL_new(cctx);
	SSL_set_fd(client, feed_fd);
	SSL_set_connect_state(client);
	ck_assert_int_eq(netbuf_start_tls(&src, SSL_new(sctx), true), 0);
	int r = 0;
	for (int turn = 0; turn < 1000 && (r = SSL_do_handshake(client)) != 1; turn++)
		event_base_loop(base, EVLOOP_NONBLOCK);
	ck_assert_int_eq(r, 1);
	event_base_loop(base, EVLOOP_NONBLOCK);

	/* dst's peer reads nothing yet: most of the filler waits in dst's queue. */
	uint8_t *filler = calloc(1, FILLER);
	netbuf_send(&dst, filler, FILLER);
	ck_assert_uint_gt(netbuf_queue_len(&dst), 64 * 1024);
	/* One message in one record, bigger than src's 8 KB buffer, forwarded as it comes. */
	action_for['d'] = STREAM;
	uint8_t *msg = malloc(BODY + 5);
	char *body = malloc(BODY);
	memset(body, 'm', BODY);
	size_t n = put_msg(msg, 'd', body, BODY);
	ck_assert_int_eq(SSL_write(client, msg, (int)n), (int)n);
	for (int turn = 0; turn < 100; turn++)
		event_base_loop(base, EVLOOP_NONBLOCK);
	ck_assert_msg(src.blocked && SSL_pending(netbuf_ssl(&src)) > 0, "not the case under test");

	/* Now the peer reads everything: the filler, then the whole message. */
	uint8_t *out = malloc(FILLER + n);
	size_t got = 0;
	for (int turn = 0; turn < 20000 && got < FILLER + n; turn++) {
		ssize_t k = recv(sink_fd, out + got, FILLER + n - got, MSG_DONTWAIT);
		if (k > 0)
			got += (size_t)k;
		event_base_loop(base, EVLOOP_NONBLOCK);
	}
	ck_assert_uint_eq(got, FILLER + n);
	ck_assert_mem_eq(out + FILLER, msg, n);
	SSL_free(client);
	SSL_CTX_free(cctx);
	SSL_CTX_free(sctx);
	free(filler);
	free(msg);
	free(body);
	free(out);
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("netbuf");
	TCase *tc = tcase_create("rewrite");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, rewritten_head_goes_in_the_same_send);
	tcase_add_test(tc, rewrite_first_in_the_read_still_one_send);
	tcase_add_test(tc, dropped_and_inserted_in_stream_order);
	tcase_add_test(tc, insert_with_nothing_forwarded_is_sent_now);
	tcase_add_test(tc, unread_messages_come_before_the_buffered_rest);
	tcase_add_test(tc, more_rewrites_than_cuts_keep_every_byte_in_order);
	tcase_add_test(tc, partial_send_queues_the_rest_in_order);
	tcase_add_test(tc, without_dst_a_rewrite_drops_the_message);
	tcase_add_test(tc, closing_dst_mid_read_drops_pending_rewrites);
	suite_add_tcase(s, tc);
	tc = tcase_create("flow_control");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, tls_reader_stopped_by_flow_control_reads_what_openssl_holds);
	suite_add_tcase(s, tc);
	return s;
}
