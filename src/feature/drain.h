/*
 * drain.h - ending the process at transaction boundaries, for rolling
 * restarts behind a load balancer: every client leaves at a point where
 * its driver can reconnect elsewhere without losing a transaction.
 *
 * Started by the console's DRAIN and, with shutdown_drain = 1, by SIGTERM
 * (loop.c). From then on pgvalve
 *   - stops accepting: the TCP listeners close 200 ms later (listener.h's
 *     LISTENER_CLOSE_LINGER_USEC), TCP_DEFER_ACCEPT off meanwhile, and
 *     connections the kernel had queued are taken in first: none the
 *     kernel completed is reset, but for one whose handshake ends in the
 *     microseconds between the last accept() and close(), which only the
 *     kernel could save; the Unix socket stays for the console;
 *   - refuses new logins with 57P03 (over the Unix socket, the only one
 *     left open); a TCP connection accepted before, or taken from the
 *     kernel's queue as the listeners close, may log in (and is closed
 *     after its first transaction, below);
 *   - closes each pooled client with FATAL 57P01 at its next transaction
 *     boundary: an idle client at once; a client inside a transaction
 *     right after the ReadyForQuery 'I' that ends it has gone out; a
 *     client queued for a server once it has been served and its
 *     transaction is over; in session mode, a client whose server has
 *     answered ReadyForQuery 'I' with nothing more owed. A client with
 *     bytes of a next request already read is not idle: its request runs
 *     first. Replication connections (no pooled transaction to wait for)
 *     are closed at once; so are logins not finished, except:
 *   - a client that connected less than 2 s ago and has not been served
 *     yet (its login under way, or logged in with no request sent) is
 *     left until 2 s after its connect: its application opened the
 *     connection to run something (a connection per transaction, a pool
 *     filling up), and a load balancer may have sent it there just before
 *     its health check saw the drain. Its first transaction runs, and it
 *     is closed at that boundary; if it sends nothing in those 2 s, it is
 *     closed then;
 *   - exits once no pooled or replication client is left, nor a client
 *     accepted before the listeners closed whose startup packet has not
 *     come yet (after an SSLRequest's answer, or from a load balancer: it
 *     gets the same 2 s, then 57P01), or when drain_timeout (0 = no
 *     limit) has passed, closing the rest with 57P01.
 * Console clients are never closed by the drain and do not hold it up.
 * The drain cuts no transaction itself; only drain_timeout does.
 *
 * With workers = N, DRAIN on any worker drains every worker (workers.h:
 * the instance's drain flag, then SIGTERM through the supervisor). During
 * a drain a SIGTERM is logged and changes nothing; SIGINT or SIGQUIT
 * still end the process at once.
 *
 * How it learns of boundaries: the core calls the instance's
 * client_at_boundary hook (instance.h) when a client goes idle, and
 * client_gone when one leaves (the first is filled when a drain starts,
 * so it costs nothing before); the hook only schedules a sweep on the
 * next loop turn (closing a client inside a release is not safe), and a
 * sweep looks again at every client that may be at a boundary. A timer
 * sweeps every 5 s as well, a backstop for a boundary no hook reported.
 */
#ifndef PGVALVE_DRAIN_H
#define PGVALVE_DRAIN_H

#include "common.h"

/*
 * Begins draining this process (why: for the log line). A graceful
 * shutdown waiting for clients becomes a drain; false (nothing done) while
 * a SHUTDOWN WAIT_FOR_SERVERS is under way. True if already draining.
 */
bool drain_begin(const char *why);
/* Whether this process is draining. */
bool drain_active(void);
/* A client left (the instance's client_gone hook, through loop.c): the drain may be over. */
void drain_client_gone(void);
/* Exiting: frees the drain's timers, empties its hook. Idempotent. */
void drain_stop(void);

#endif
