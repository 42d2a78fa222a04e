/*
 * tcp.c - the tcp_* settings (keepalive, user timeout, buffers, no Nagle)
 * applied to a socket (tcp.h).
 *
 * Below the core: server.c tunes the sockets it opens, listener.c its
 * listeners (whose accepted sockets copy the settings). Reads the config,
 * calls nothing else.
 */
#include "common.h"
#include "tcp.h"
#include "config.h"
#include "instance.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

void tcp_tuning_of(const struct config *cfg, struct tcp_tuning *t)
{
	*t = (struct tcp_tuning){ cfg->tcp_socket_buffer, cfg->tcp_user_timeout, cfg->tcp_keepalive,
				  cfg->tcp_keepidle, cfg->tcp_keepintvl, cfg->tcp_keepcnt };
}


/* The kernel's default for a keepalive setting left at 0 (net.ipv4.<name>). */
int tcp_sysctl(const char *name, int fallback)
{
	char path[128];
	int v = fallback;
	snprintf(path, sizeof(path), "/proc/sys/net/ipv4/%s", name);
	FILE *f = fopen(path, "re");
	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = fallback;
		fclose(f);
	}
	return v;
}

/*
 * Sets t's tcp_* values on a socket. A fresh socket has the kernel's
 * defaults, so zeros are skipped; a listener being retuned (explicit) gets
 * every value, zeros as the kernel's default, so that a reload can also
 * take a setting back (its clients copy them).
 */
void tcp_apply(int fd, const struct tcp_tuning *t, bool explicit)
{
	int on = 1, keepalive = t->keepalive ? 1 : 0;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
	if (keepalive || explicit) {
		setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &keepalive, sizeof(keepalive));
		int idle = t->keepidle > 0 ? t->keepidle : explicit ? tcp_sysctl("tcp_keepalive_time", 7200) : 0;
		int intvl = t->keepintvl > 0 ? t->keepintvl : explicit ? tcp_sysctl("tcp_keepalive_intvl", 75) : 0;
		int cnt = t->keepcnt > 0 ? t->keepcnt : explicit ? tcp_sysctl("tcp_keepalive_probes", 9) : 0;
		if (idle > 0)
			setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
		if (intvl > 0)
			setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
		if (cnt > 0)
			setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	}
	if (t->user_timeout > 0 || explicit)
		setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &t->user_timeout, sizeof(t->user_timeout));
	if (t->socket_buffer > 0) {
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &t->socket_buffer, sizeof(t->socket_buffer));
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &t->socket_buffer, sizeof(t->socket_buffer));
	}
}

void tcp_tune_socket(int fd)
{
	struct tcp_tuning t;
	tcp_tuning_of(pgv.cfg, &t);
	tcp_apply(fd, &t, false);
}
