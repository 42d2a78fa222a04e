/*
 * sdnotify.c - systemd's notification and socket activation protocols
 * (see sdnotify.h for the contract).
 *
 * Owns: the notification socket address, the status timer and the list of
 * inherited listening sockets. Reads the global client and server counts;
 * touches nothing else. listener.c decides what to do with the sockets.
 */
#include "common.h"
#include "sdnotify.h"
#include "log.h"
#include "pool.h"

#include <event2/event.h>
#include <fcntl.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* Often enough for `systemctl status` to look live, rare enough to cost nothing. */
#define STATUS_PERIOD_SEC 5

static struct {
	struct sockaddr_un addr;
	socklen_t addr_len;		/* 0: no $NOTIFY_SOCKET */
	bool enabled;
	int listen_first, listen_count;
	struct event *status_timer;
} sdn;

/* $NOTIFY_SOCKET into sdn.addr; '@' stands for the abstract namespace's leading NUL. */
static void notify_socket_parse(const char *path)
{
	sdn.addr_len = 0;
	if (!path || (path[0] != '/' && path[0] != '@'))
		return;
	size_t len = strlen(path);
	if (len < 2 || len > sizeof(sdn.addr.sun_path))
		return;
	memset(&sdn.addr, 0, sizeof(sdn.addr));
	sdn.addr.sun_family = AF_UNIX;
	memcpy(sdn.addr.sun_path, path, len);
	if (path[0] == '@')
		sdn.addr.sun_path[0] = '\0';
	/* Abstract names are length-delimited: no trailing NUL may count. */
	sdn.addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
}

/* A decimal environment value, or -1 when absent or not a number. */
static long env_number(const char *name)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return -1;
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	return errno || *end || v < 0 ? -1 : v;
}

void sdnotify_init(void)
{
	notify_socket_parse(getenv("NOTIFY_SOCKET"));
	sdn.enabled = true;
	sdn.listen_first = SDNOTIFY_LISTEN_FDS_START;
	sdn.listen_count = 0;
	long pid = env_number("LISTEN_PID"), n = env_number("LISTEN_FDS");
	if (pid == (long)getpid() && n > 0 && n < 1024) {
		sdn.listen_count = (int)n;
		/* Ours now: not to leak into anything exec'd (workers are forked, they keep them). */
		for (int fd = sdn.listen_first; fd < sdn.listen_first + sdn.listen_count; fd++)
			fcntl(fd, F_SETFD, FD_CLOEXEC);
	}
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
}

void sdnotify_set_enabled(bool enabled)
{
	sdn.enabled = enabled;
}

int sdnotify_send(const char *msg)
{
	if (!sdn.addr_len || !sdn.enabled)
		return 0;
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	ssize_t n = sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sdn.addr, sdn.addr_len);
	int saved = errno;
	close(fd);
	if (n < 0) {
		errno = saved;
		log_debug("sd_notify: %s", strerror(errno));
		return -1;
	}
	return 1;
}

static void format_status(char *buf, size_t size)
{
	snprintf(buf, size, "STATUS=%u clients, %u servers", (unsigned)pgv.client_count,
		 (unsigned)pgv.server_count);
}

void sdnotify_send_ready(void)
{
	char msg[160];
	size_t n = (size_t)snprintf(msg, sizeof(msg), "READY=1\n");
	format_status(msg + n, sizeof(msg) - n);
	sdnotify_send(msg);
}

void sdnotify_send_reloading(void)
{
	/* systemd 253+ (Type=notify-reload) wants the clock reading to order the reload. */
	char msg[128];
	snprintf(msg, sizeof(msg), "RELOADING=1\nSTATUS=reloading the configuration\nMONOTONIC_USEC=%lld",
		 (long long)monotonic_usec());
	sdnotify_send(msg);
}

void sdnotify_send_stopping(const char *why)
{
	char msg[256];
	snprintf(msg, sizeof(msg), "STOPPING=1\nSTATUS=%s", why);
	sdnotify_send(msg);
}

void sdnotify_send_status(void)
{
	char msg[128];
	format_status(msg, sizeof(msg));
	sdnotify_send(msg);
}

static void status_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what; (void)arg;
	sdnotify_send_status();
}

void sdnotify_start_status_timer(struct event_base *base)
{
	if (!sdn.addr_len || !sdn.enabled || sdn.status_timer)
		return;
	sdn.status_timer = event_new(base, -1, EV_PERSIST, status_cb, NULL);
	struct timeval tv = { STATUS_PERIOD_SEC, 0 };
	event_add(sdn.status_timer, &tv);
}

void sdnotify_stop_status_timer(void)
{
	if (sdn.status_timer)
		event_free(sdn.status_timer);
	sdn.status_timer = NULL;
}

int sdnotify_listen_fds(int *first)
{
	if (first)
		*first = sdn.listen_first;
	return sdn.listen_count;
}
