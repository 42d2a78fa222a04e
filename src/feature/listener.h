/*
 * listener.h - the listening sockets: TCP on listen_addr:listen_port and
 * the Unix socket .s.PGSQL.<port> in unix_socket_dir.
 *
 * Accepted sockets are made non-blocking, given the configured TCP
 * options, and handed to client_accept().
 */
#ifndef PGVALVE_LISTENER_H
#define PGVALVE_LISTENER_H

#include "common.h"

/* After a reload: the TCP listeners (and so the clients they accept) get the new tcp_* settings. */
void listener_apply_tcp_settings(void);
/* Opens every configured listener; -1 (logged) if any cannot be opened. */
int listener_start(void);
/*
 * Graceful shutdown (PgBouncer 1.25): closes the TCP listeners; the Unix
 * socket stays for admins. Connections the kernel had queued are accepted
 * first (with so_reuseport they would be reset, not handed to the new
 * instance). With workers, only worker 1 listens on unix_socket_dir; every
 * worker also listens on its private socket (workers.h).
 */
void listener_close_tcp(void);
/*
 * Graceful shutdown with so_reuseport (a rolling restart hands the port to
 * a new process): keeps accepting for a moment with TCP_DEFER_ACCEPT off,
 * so the connections the kernel still routes here, and those it held back
 * waiting for their first bytes, reach the accept queue; then closes the
 * TCP listeners as listener_close_tcp() does and calls closed(). False
 * (nothing done) without so_reuseport or TCP listeners.
 */
bool listener_hand_off_tcp(void (*closed)(void));
/* Between listener_hand_off_tcp() and its closing. */
bool listener_handing_off(void);
/* Closes all listeners and removes the Unix socket file if it is still ours. Idempotent. */
void listener_close(void);

#endif
