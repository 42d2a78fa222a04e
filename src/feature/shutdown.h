/*
 * shutdown.h - ending the process, gracefully or at once.
 */
#ifndef PGVALVE_SHUTDOWN_H
#define PGVALVE_SHUTDOWN_H

/* Stop accepting, and exit once every client has left (SHUTDOWN WAIT_FOR_CLIENTS, SIGTERM). */
void shutdown_begin_graceful(void);
/* A client left: a graceful shutdown ends when it was the last (the instance's client_gone hook). */
void shutdown_client_gone(void);
/* Exit now: the loop stops after the current event. */
void shutdown_exit_now(void);

#endif
