/*
 * supervisor.h - the pgvalve command itself when workers > 1.
 *
 * The supervisor serves no client. It forks the N workers (each runs the
 * ordinary single-process pooler, see workers.h for what makes them
 * different), and then only:
 *   - restarts a worker that exits while the instance is not shutting
 *     down, after 1 s, doubling up to 30 s for a worker that keeps dying;
 *     a worker that stayed up 30 s starts again from 1 s. Logged as
 *     "worker 2 (pid N) exited with signal 9, restarting in 1 s";
 *   - forwards SIGHUP, SIGUSR1, SIGUSR2, SIGINT, SIGTERM and SIGQUIT to
 *     every worker (SIGHUP also reopens its own logfile);
 *   - after SIGINT, SIGTERM or SIGQUIT stops restarting and returns once
 *     every worker has exited;
 *   - if a worker of the first set exits before it ever listened (a bad
 *     address, a port taken), stops the others and returns 1: a start-up
 *     failure, as a single process would have.
 * Privileges are dropped, the process daemonized and the pidfile (the
 * supervisor's pid) written by main.c before supervisor_run().
 *
 * Workers are tied to the supervisor: each gets SIGQUIT (exit now) if the
 * supervisor dies, so no worker outlives it.
 *
 * Owns: the worker processes and their restart schedule; the private
 * socket directories it creates and removes. Signals are taken
 * synchronously (sigtimedwait), never in a handler; no event loop.
 */
#ifndef PGVALVE_SUPERVISOR_H
#define PGVALVE_SUPERVISOR_H

#include "common.h"
#include "config.h"

/*
 * Runs the supervisor of `count` workers until they have all exited.
 * worker_main runs in each forked worker (worker = 1..count, restarts = how
 * many times that worker was started again) and its return value is the
 * worker's exit status. The caller's process returns the exit code.
 */
int supervisor_run(const struct config *cfg, int count, int (*worker_main)(int worker, unsigned restarts));

#endif
