/*
 * loop.h - the event loop's own duties: signals, shutdown, and the reaper
 * (reap.h) that frees closed connections once no handler can still be
 * using them.
 */
#ifndef PGVALVE_LOOP_H
#define PGVALVE_LOOP_H

#include "common.h"

/* Creates pgv.base, the signal events and the reaper; fills the instance's client_gone hook. */
void loop_init(void);
/* Runs until shutdown; returns the process exit code. */
int loop_run(void);
void loop_cleanup(void);


#endif
