/*
 * test_sdnotify.c - the datagrams pgvalve sends to $NOTIFY_SOCKET, read
 * from a socket the test listens on (a path and an abstract name), and
 * the taking of inherited sockets ($LISTEN_PID / $LISTEN_FDS).
 */
#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common.h"
#include "pool.h"
#include "sdnotify.h"
#include "../check_main.h"

static char dir[64];
static char path[128];
static int rx = -1;

/* A datagram socket like systemd's, at a path (abstract: '@' name); sets NOTIFY_SOCKET. */
static void listen_notify(bool abstract)
{
	strcpy(dir, "/tmp/pgv-sdn.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	socklen_t len;
	if (abstract) {
		snprintf(path, sizeof(path), "@pgvalve-test-%d", (int)getpid());
		memcpy(sun.sun_path + 1, path + 1, strlen(path) - 1);
		len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path));
	} else {
		snprintf(path, sizeof(path), "%s/notify", dir);
		strcpy(sun.sun_path, path);
		len = sizeof(sun);
	}
	rx = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(rx, 0);
	ck_assert_int_eq(bind(rx, (struct sockaddr *)&sun, len), 0);
	struct timeval tv = { 2, 0 };
	setsockopt(rx, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setenv("NOTIFY_SOCKET", path, 1);
	sdnotify_init();
}

static void teardown(void)
{
	if (rx >= 0)
		close(rx);
	rx = -1;
	if (path[0] == '/')
		unlink(path);
	if (dir[0])
		rmdir(dir);
	dir[0] = path[0] = '\0';
	unsetenv("NOTIFY_SOCKET");
}

/* The next datagram, as a string; fails the test if none comes within 2 s. */
static const char *next_message(void)
{
	static char buf[1024];
	ssize_t n = recv(rx, buf, sizeof(buf) - 1, 0);
	ck_assert_msg(n > 0, "no notification received: %s", n < 0 ? strerror(errno) : "empty");
	buf[n] = '\0';
	return buf;
}

START_TEST(ready_with_counts)
{
	listen_notify(false);
	pgv.client_count = 7;
	pgv.server_count = 3;
	sdnotify_send_ready();
	ck_assert_str_eq(next_message(), "READY=1\nSTATUS=7 clients, 3 servers");
	pgv.client_count = 12;
	sdnotify_send_status();
	ck_assert_str_eq(next_message(), "STATUS=12 clients, 3 servers");
	pgv.client_count = pgv.server_count = 0;
	teardown();
}
END_TEST

START_TEST(reload_and_stop)
{
	listen_notify(false);
	usec_t before = monotonic_usec();
	sdnotify_send_reloading();
	const char *m = next_message();
	const char *prefix = "RELOADING=1\nSTATUS=reloading the configuration\nMONOTONIC_USEC=";
	ck_assert_msg(strncmp(m, prefix, strlen(prefix)) == 0, "got \"%s\"", m);
	long long at = atoll(m + strlen(prefix));
	ck_assert_int_ge(at, before);
	ck_assert_int_le(at, monotonic_usec());
	sdnotify_send_stopping("SIGTERM: waiting for clients to leave");
	ck_assert_str_eq(next_message(), "STOPPING=1\nSTATUS=SIGTERM: waiting for clients to leave");
	teardown();
}
END_TEST

START_TEST(abstract_namespace)
{
	listen_notify(true);
	ck_assert_int_eq(sdnotify_send("STATUS=hello"), 1);
	ck_assert_str_eq(next_message(), "STATUS=hello");
	teardown();
}
END_TEST

START_TEST(disabled_or_absent_sends_nothing)
{
	listen_notify(false);
	sdnotify_set_enabled(false);
	ck_assert_int_eq(sdnotify_send("READY=1"), 0);
	sdnotify_set_enabled(true);
	ck_assert_int_eq(sdnotify_send("STATUS=on again"), 1);
	/* the disabled READY=1 never arrived: the first datagram is the later one */
	ck_assert_str_eq(next_message(), "STATUS=on again");
	teardown();

	sdnotify_init();	/* no NOTIFY_SOCKET now */
	ck_assert_int_eq(sdnotify_send("READY=1"), 0);
	setenv("NOTIFY_SOCKET", "relative/path", 1);
	sdnotify_init();
	ck_assert_int_eq(sdnotify_send("READY=1"), 0);
	unsetenv("NOTIFY_SOCKET");
}
END_TEST

START_TEST(listen_fds_for_this_pid_only)
{
	/*
	 * fd 3 as systemd would pass it. Check's runner may own fd 3 (its
	 * message pipe): it is moved aside, and no ck_assert runs until it is
	 * back, since every assertion writes to it.
	 */
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(s, 0);
	ck_assert_int_eq(listen(s, 1), 0);
	int saved = fcntl(3, F_GETFD) >= 0 ? fcntl(3, F_DUPFD_CLOEXEC, 10) : -1;
	dup2(s, SDNOTIFY_LISTEN_FDS_START);	/* dup2 clears FD_CLOEXEC, as an exec would */
	int cloexec_before = fcntl(3, F_GETFD) & FD_CLOEXEC;

	char pid[32];
	snprintf(pid, sizeof(pid), "%d", (int)getpid() + 1);
	setenv("LISTEN_PID", pid, 1);
	setenv("LISTEN_FDS", "1", 1);
	sdnotify_init();
	int first_other = -1, first = -1;
	int n_other = sdnotify_listen_fds(&first_other);	/* another process's sockets */
	bool other_env_cleared = getenv("LISTEN_FDS") == NULL;

	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("LISTEN_PID", pid, 1);
	setenv("LISTEN_FDS", "1", 1);
	setenv("LISTEN_FDNAMES", "pgvalve.socket", 1);
	sdnotify_init();
	int n = sdnotify_listen_fds(&first);
	int cloexec_after = fcntl(3, F_GETFD) & FD_CLOEXEC;
	bool env_cleared = !getenv("LISTEN_PID") && !getenv("LISTEN_FDS") && !getenv("LISTEN_FDNAMES");

	if (saved >= 0) {
		dup2(saved, 3);
		close(saved);
	} else {
		close(3);
	}
	close(s);
	setenv("LISTEN_FDS", "0", 1);
	sdnotify_init();	/* nothing inherited any more */

	ck_assert_int_eq(cloexec_before, 0);
	ck_assert_int_eq(n_other, 0);
	ck_assert(other_env_cleared);
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(first, 3);
	ck_assert_int_ne(cloexec_after, 0);
	ck_assert(env_cleared);
	ck_assert_int_eq(sdnotify_listen_fds(NULL), 0);
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("sdnotify");
	TCase *tc = tcase_create("sdnotify");
	tcase_add_test(tc, ready_with_counts);
	tcase_add_test(tc, reload_and_stop);
	tcase_add_test(tc, abstract_namespace);
	tcase_add_test(tc, disabled_or_absent_sends_nothing);
	tcase_add_test(tc, listen_fds_for_this_pid_only);
	suite_add_tcase(s, tc);
	return s;
}
