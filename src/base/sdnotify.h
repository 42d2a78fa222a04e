/*
 * sdnotify.h - systemd's two service protocols, spoken without libsystemd:
 *
 *  - readiness notification (sd_notify(3)): one datagram per message to the
 *    AF_UNIX socket named by $NOTIFY_SOCKET (a path, or '@' for the
 *    abstract namespace), holding newline-separated VAR=value lines:
 *    READY=1, RELOADING=1 (with MONOTONIC_USEC), STOPPING=1, STATUS=...;
 *  - socket activation (sd_listen_fds(3)): when $LISTEN_PID is our pid,
 *    $LISTEN_FDS listening sockets start at file descriptor 3.
 *
 * Without $NOTIFY_SOCKET every send is a no-op, so the hooks cost nothing
 * outside systemd. Sending never blocks and never fails the caller: a lost
 * notification is logged at debug level at most.
 *
 * With workers, the process systemd started is the supervisor, which has
 * no event loop; worker 1 speaks for the instance (the units say
 * NotifyAccess=all) and its STATUS counts are its own.
 */
#ifndef PGVALVE_SDNOTIFY_H
#define PGVALVE_SDNOTIFY_H

#include "common.h"

struct event_base;

/* First file descriptor systemd passes (SD_LISTEN_FDS_START). */
#define SDNOTIFY_LISTEN_FDS_START 3

/*
 * Once, at start-up and before any fork: reads $NOTIFY_SOCKET, and takes
 * the inherited sockets when $LISTEN_PID names this process (they get
 * FD_CLOEXEC; LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES are removed from
 * the environment so nothing we start believes they are its own).
 */
void sdnotify_init(void);
/* Whether this process sends notifications (off in workers other than 1). */
void sdnotify_set_enabled(bool enabled);
/*
 * Sends msg (newline-separated assignments) as one datagram. 1 sent, 0
 * nothing to send to (no $NOTIFY_SOCKET, or disabled), -1 failed (errno).
 */
int sdnotify_send(const char *msg);
/* READY=1 with the current STATUS (after the listeners are open, and after a reload). */
void sdnotify_send_ready(void);
/* RELOADING=1 and MONOTONIC_USEC: a reload starts (READY=1 ends it). */
void sdnotify_send_reloading(void);
/* STOPPING=1 and a STATUS saying why. */
void sdnotify_send_stopping(const char *why);
/* STATUS= with the live client and server counts. */
void sdnotify_send_status(void);
/* Sends the STATUS every few seconds on base, while there is a $NOTIFY_SOCKET. */
void sdnotify_start_status_timer(struct event_base *base);
void sdnotify_stop_status_timer(void);

/*
 * The inherited listening sockets: their count, and the first descriptor
 * in *first (they are consecutive). 0 without socket activation.
 */
int sdnotify_listen_fds(int *first);

#endif
