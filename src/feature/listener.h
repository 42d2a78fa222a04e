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
 * How long listener_close_tcp_soon() and listener_hand_off_tcp() keep
 * accepting before they close: a connection the kernel held back waiting
 * for its first bytes (TCP_DEFER_ACCEPT) is reset when its listener
 * closes, although its client, a load balancer, counts it as connected
 * and sends them at once; 200 ms lets them come.
 */
#define LISTENER_CLOSE_LINGER_USEC (USEC_PER_SEC / 5)
/*
 * A drain: keeps accepting for LISTENER_CLOSE_LINGER_USEC with
 * TCP_DEFER_ACCEPT off, so that the connections the kernel held back
 * waiting for their first bytes reach the accept queue; then closes the
 * TCP listeners as listener_close_tcp() does and calls closed(). False
 * (nothing done) without TCP listeners or when closing is under way.
 */
bool listener_close_tcp_soon(void (*closed)(void));
/*
 * Graceful shutdown with so_reuseport (a rolling restart hands the port to
 * a new process): listener_close_tcp_soon(), the connections the kernel
 * still routes here taken in as well. False (nothing done) without
 * so_reuseport or TCP listeners.
 */
bool listener_hand_off_tcp(void (*closed)(void));
/* Between listener_close_tcp_soon() or listener_hand_off_tcp() and the closing. */
bool listener_handing_off(void);
/* Closes all listeners and removes the Unix socket file if it is still ours. Idempotent. */
void listener_close(void);

#endif
