/*
 * test_wire.c - startup packets of the sizes that make pgvalve grow a
 * connection's input buffer, end to end against PostgreSQL 15.
 *
 * A 6 KB StartupMessage does not fit the first buffer; growing it once
 * adjusted the offsets of the new, uninitialised buffer (fixed in a0b29b6).
 * AddressSanitizer hid that (its fresh memory holds a fixed pattern), so
 * these cases are part of the valgrind run (scripts/valgrind.sh), where
 * the harness fails them on any memcheck error in pgvalve. They also check,
 * under any build, that such packets get a protocol answer and that a
 * login carrying a long parameter still works.
 *
 * The last two cases make a reader stop with bytes still in its socket
 * and check that it comes back for them: a batch several times
 * sbuf_loopcnt buffers long, sent in one write with nothing after it; and
 * half a message arriving together with the client's end of stream, where
 * the read that takes the bytes is short and the end must still be seen
 * (and the client closed) although no further byte will ever come. Both
 * are what an edge-triggered event loop gets wrong.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DB "pgvtest"
#define BIG_VALUE_LEN 6000

/* StartupMessage: user, application_name of n bytes of 'x'. Returns its length. */
static size_t big_startup(unsigned char *buf, size_t size, const char *user, size_t n)
{
	size_t len = 8;
	uint32_t word;

	ck_assert(size >= 8 + strlen(user) + n + 32);
	word = htonl(196608);
	memcpy(buf + 4, &word, 4);
	len += (size_t)sprintf((char *)buf + len, "user") + 1;
	len += (size_t)sprintf((char *)buf + len, "%s", user) + 1;
	len += (size_t)sprintf((char *)buf + len, "application_name") + 1;
	memset(buf + len, 'x', n);
	len += n;
	buf[len++] = '\0';
	buf[len++] = '\0';
	word = htonl((uint32_t)len);
	memcpy(buf, &word, 4);
	return len;
}

/* The first byte pgvalve answers on fd within timeout_ms, or -1 (closed or silent). */
static int first_reply_byte(int fd, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	unsigned char b;

	if (poll(&pfd, 1, timeout_ms) != 1)
		return -1;
	return read(fd, &b, 1) == 1 ? b : -1;
}

START_TEST(big_startup_packet_twice)
{
	static unsigned char pkt[BIG_VALUE_LEN + 128];
	size_t len = big_startup(pkt, sizeof(pkt), "u", BIG_VALUE_LEN);
	struct pgv p;

	pgv_start(&p, "auth_type = md5\n", std_databases(), std_userlist());
	/* Twice: the second one reuses what the first left in the buffer pool. */
	for (int i = 0; i < 2; i++) {
		int fd = raw_connect(p.port);
		int reply;

		ck_assert(raw_send(fd, pkt, len));
		reply = first_reply_byte(fd, 5000);
		/* an authentication request or an error: a parsed packet, either way */
		ck_assert_msg(reply == 'R' || reply == 'E', "packet %d: reply byte %d\n%s", i + 1, reply,
			      pgv_log_tail(&p, 1500));
		close(fd);
		ck_assert_msg(pgv_running(&p), "pgvalve died after packet %d\n%s", i + 1, pgv_log_tail(&p, 1500));
	}
	pgv_stop(&p);
}
END_TEST

START_TEST(login_with_long_parameter)
{
	static char value[BIG_VALUE_LEN + 1];
	const char *extra[] = { "application_name", value, NULL };
	struct raw_error err;
	struct pgv p;
	char got[64];
	int fd = -1;

	memset(value, 'y', BIG_VALUE_LEN);
	pgv_start(&p, "auth_type = md5\n", std_databases(), std_userlist());
	for (int i = 0; i < 2; i++) {
		memset(&err, 0, sizeof(err));
		ck_assert_msg(raw_login_ex(p.port, DB, "md5_user", "md5_pass", extra, &err, &fd) == 0,
			      "login %d with a %d-byte application_name: %s %s\n%s", i + 1, BIG_VALUE_LEN,
			      err.sqlstate, err.message, pgv_log_tail(&p, 1500));
		ck_assert_int_eq(raw_query(fd, "SELECT 40 + 2", got, sizeof(got), &err), 0);
		ck_assert_str_eq(got, "42");
		close(fd);
	}
	pgv_stop(&p);
}
END_TEST

/* sbuf_loopcnt = 1: every full buffer ends a wake-up's reading; the rest waits in the socket. */
#define LOOPCNT_EXTRA "auth_type = md5\npool_mode = transaction\npkt_buf = 4096\nsbuf_loopcnt = 1\n"
#define BATCH_QUERIES 2000	/* 14 bytes each: 28 KB, seven buffers */

START_TEST(batch_longer_than_loopcnt_buffers)
{
	static struct raw_msgs m;
	struct raw_answers a;
	struct raw_error err;
	struct pgv p;
	int fd = -1;

	pgv_start(&p, LOOPCNT_EXTRA, std_databases(), std_userlist());
	ck_assert_int_eq(raw_login_ex(p.port, DB, "md5_user", "md5_pass", NULL, &err, &fd), 0);
	m.len = 0;
	for (int i = 0; i < BATCH_QUERIES; i++)
		raw_put_query(&m, "SELECT 1");
	ck_assert_uint_gt(m.len, 6 * 4096);
	raw_send_msgs(fd, &m);
	/* Nothing more is sent: the only way on for the pooler is to read what it left. */
	ck_assert_msg(raw_read_answers(fd, BATCH_QUERIES, 10000, &a),
		      "not all %d answers came within 10 s (the socket's rest was never read)\n%s",
		      BATCH_QUERIES, pgv_log_tail(&p, 1500));
	ck_assert_str_eq(a.value, "1");
	ck_assert_int_eq(a.status, 'I');
	close(fd);
	pgv_stop(&p);
}
END_TEST

/* Half a Query, then the end of the stream, back to back on one socket. */
static void send_half_query_and_close(int fd)
{
	static const unsigned char half[] = { 'Q', 0, 0, 0, 40, 'S', 'E', 'L' };
	ck_assert(raw_send(fd, half, sizeof(half)));
	close(fd);
}

/* Waits up to timeout_ms for pgvalve's log to hold `count` lines with needle. */
static bool wait_log_count(struct pgv *p, const char *needle, int count, int timeout_ms)
{
	for (int waited = 0; waited < timeout_ms; waited += 50) {
		if (pgv_log_count(p, needle) >= count)
			return true;
		sleep_ms(50);
	}
	return false;
}

START_TEST(half_message_then_close_is_seen)
{
	unsigned char key[8];
	struct raw_error err;
	struct pgv p;
	int fd = -1;

	pgv_start(&p, LOOPCNT_EXTRA, std_databases(), std_userlist());
	ck_assert_int_eq(raw_login_ex(p.port, DB, "md5_user", "md5_pass", NULL, &err, &fd), 0);
	send_half_query_and_close(fd);
	pgv_expect_log(&p, "client unexpected eof", 5.0);	/* the TCP client's end of stream */

	/* The same over the Unix socket. */
	fd = raw_connect_unix(p.dir, p.port);
	ck_assert_int_eq(raw_login_fd(fd, DB, "md5_user", "md5_pass", key, &err), 0);
	send_half_query_and_close(fd);
	ck_assert_msg(wait_log_count(&p, "client unexpected eof", 2, 5000),
		      "the Unix-socket client's end of stream went unnoticed\n%s", pgv_log_tail(&p, 1500));
	pgv_stop(&p);
}
END_TEST

static Suite *wire_suite(void)
{
	Suite *s = suite_create("wire");
	TCase *tc = pgv_tcase_create("startup", 60);

	tcase_add_test(tc, big_startup_packet_twice);
	tcase_add_test(tc, login_with_long_parameter);
	tcase_add_test(tc, batch_longer_than_loopcnt_buffers);
	tcase_add_test(tc, half_message_then_close_is_seen);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return pgv_run_suite(wire_suite());
}
