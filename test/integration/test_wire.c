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

static Suite *wire_suite(void)
{
	Suite *s = suite_create("wire");
	TCase *tc = pgv_tcase_create("startup", 60);

	tcase_add_test(tc, big_startup_packet_twice);
	tcase_add_test(tc, login_with_long_parameter);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return pgv_run_suite(wire_suite());
}
