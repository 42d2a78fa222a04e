/*
 * test_systemd.c - what a real pgvalve tells systemd: the datagrams on
 * $NOTIFY_SOCKET (a socket this test listens on, as systemd would) through
 * start-up, a client, a reload and a shutdown, and with workers, that only
 * worker 1 speaks. Socket activation is run by test/package/run.sh.
 */
#include "harness.h"

#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define DB "pgvtest"

static int rx = -1;

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
static char rx_path[600];

/* A datagram socket that pgvalve (maybe another user) may write to; sets NOTIFY_SOCKET. */
static void notify_listen(void)
{
	const char *dir = getenv("PGV_TEST_DIR");
	snprintf(rx_path, sizeof(rx_path), "%s/notify-%d", dir ? dir : "/tmp", (int)getpid());
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	ck_assert_uint_lt(strlen(rx_path), sizeof(sun.sun_path));
	strcpy(sun.sun_path, rx_path);
	unlink(rx_path);
	rx = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(rx, 0);
	ck_assert_int_eq(bind(rx, (struct sockaddr *)&sun, sizeof(sun)), 0);
	chmod(rx_path, 0666);
	setenv("NOTIFY_SOCKET", rx_path, 1);
}

static void notify_close(void)
{
	unsetenv("NOTIFY_SOCKET");
	if (rx >= 0)
		close(rx);
	rx = -1;
	unlink(rx_path);
}

/*
 * Reads datagrams until one starts with prefix (skipping the periodic
 * STATUS lines and anything else); false if none within timeout_ms. The
 * message is left in buf.
 */
static bool notify_wait(const char *prefix, char *buf, size_t size, int timeout_ms)
{
	long long end = now_ms() + timeout_ms;
	while (now_ms() < end) {
		long long left = end - now_ms();
		struct timeval tv = { (time_t)(left / 1000), (suseconds_t)(left % 1000 * 1000) };
		if (tv.tv_sec == 0 && tv.tv_usec == 0)
			tv.tv_usec = 1000;
		setsockopt(rx, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		ssize_t n = recv(rx, buf, size - 1, 0);
		if (n < 0)
			continue;
		buf[n] = '\0';
		if (strncmp(buf, prefix, strlen(prefix)) == 0)
			return true;
	}
	return false;
}

START_TEST(notify_lifecycle)
{
	struct pgv p = { 0 };
	char msg[512];
	notify_listen();
	pgv_start(&p, NULL, std_databases(), std_userlist());
	ck_assert_msg(notify_wait("READY=1\n", msg, sizeof(msg), 5000), "no READY=1 after start-up\n%s",
		      pgv_log_tail(&p, 1500));
	ck_assert_str_eq(msg, "READY=1\nSTATUS=0 clients, 0 servers");

	/* A client holding its server (session mode): the periodic STATUS counts it. */
	struct raw_error err;
	int fd = -1;
	ck_assert_int_eq(raw_login_ex(p.port, DB, "md5_user", "md5_pass", NULL, &err, &fd), 0);
	ck_assert_msg(notify_wait("STATUS=1 clients, 1 servers", msg, sizeof(msg), 8000),
		      "no STATUS with the client and its server within 8 s");

	kill(p.pid, SIGHUP);
	ck_assert_msg(notify_wait("RELOADING=1\n", msg, sizeof(msg), 5000), "no RELOADING=1 on SIGHUP");
	ck_assert_msg(strstr(msg, "\nMONOTONIC_USEC=") != NULL, "RELOADING without MONOTONIC_USEC: \"%s\"", msg);
	ck_assert_msg(notify_wait("READY=1\n", msg, sizeof(msg), 5000), "no READY=1 after the reload");
	ck_assert_str_eq(msg, "READY=1\nSTATUS=1 clients, 1 servers");

	kill(p.pid, SIGTERM);
	ck_assert_msg(notify_wait("STOPPING=1\n", msg, sizeof(msg), 5000), "no STOPPING=1 on SIGTERM");
	ck_assert_str_eq(msg, "STOPPING=1\nSTATUS=SIGTERM: waiting for clients to leave");
	close(fd);
	pgv_expect_log(&p, "client connections dropped, exiting", 5);
	pgv_stop(&p);
	notify_close();
}
END_TEST

START_TEST(workers_speak_through_worker_one)
{
	struct pgv p = { 0 };
	char msg[512];
	notify_listen();
	pgv_start(&p, "workers = 2\n", std_databases(), std_userlist());
	ck_assert_msg(notify_wait("READY=1\n", msg, sizeof(msg), 5000), "no READY=1 with workers\n%s",
		      pgv_log_tail(&p, 1500));
	pgv_expect_log(&p, "[w2]", 5);
	/* Worker 2 is up too, and says nothing: no second READY=1. */
	ck_assert_msg(!notify_wait("READY=1\n", msg, sizeof(msg), 1500), "a second READY=1: worker 2 spoke");
	pgv_stop(&p);
	notify_close();
}
END_TEST

static Suite *systemd_suite(void)
{
	Suite *s = suite_create("systemd");
	TCase *tc = pgv_tcase_create("notify", 60);
	tcase_add_test(tc, notify_lifecycle);
	tcase_add_test(tc, workers_speak_through_worker_one);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return pgv_run_suite(systemd_suite());
}
