/*
 * tcp.h - the tcp_* settings of a config, as set on a socket.
 */
#ifndef PGVALVE_TCP_H
#define PGVALVE_TCP_H

#include "common.h"

struct config;

/* The tcp_* settings of a config, as tcp_apply() sets them. */
struct tcp_tuning {
	int socket_buffer, user_timeout, keepalive, keepidle, keepintvl, keepcnt;
};

void tcp_tuning_of(const struct config *cfg, struct tcp_tuning *t);
/* The kernel's default for a setting (net.ipv4.<name>), fallback if it cannot be read. */
int tcp_sysctl(const char *name, int fallback);
/*
 * Sets t's values on a socket. A fresh socket has the kernel's defaults,
 * so zeros are skipped; explicit sets every value, zeros as the kernel's
 * default, so that a reload can take a setting back.
 */
void tcp_apply(int fd, const struct tcp_tuning *t, bool explicit);
/* A socket pgvalve opened (to a server): the running config's settings. */
void tcp_tune_socket(int fd);

#endif
