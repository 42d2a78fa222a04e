/*
 * admin_state.h - what the console changed for the whole instance, kept
 * where a restarted worker finds it (workers = N > 1): the databases
 * PAUSE db / KILL db paused and DISABLE disabled, and the settings SET
 * changed since the last reload. A worker that dies is forked again from
 * the supervisor's start-up configuration and catches up with the file
 * by reloading it (main.c); it then pauses, disables and SETs what this
 * record says (admin_control_restore), so it starts as its siblings run
 * instead of serving a paused or disabled database or an old pool size.
 * The instance-wide PAUSE needs nothing here: its flag already lives in
 * the workers table (workers.h).
 *
 * Written by the console's fan-out legs (admin_fanout.c): every worker
 * runs an instance-wide command through its leg and records the same
 * change, so the record is right whichever worker died. A command on a
 * worker's private socket is for that worker alone and is not recorded.
 * A reload (RELOAD, SIGHUP) starts from the file again, as it does in a
 * running worker: the SETs are forgotten, database flags kept.
 *
 * The record: a fixed table in a MAP_SHARED | MAP_ANONYMOUS mapping the
 * supervisor makes before it forks, guarded by one process-shared robust
 * mutex (a worker dying under it leaves each entry whole: every write
 * under it is a whole entry or one flag). Up to ADMIN_STATE_DBS databases
 * and ADMIN_STATE_PARAMS settings; past that a change is logged and not
 * kept. With one process nothing is mapped and every call does nothing.
 */
#ifndef PGVALVE_ADMIN_STATE_H
#define PGVALVE_ADMIN_STATE_H

#include "common.h"

#define ADMIN_STATE_DBS 512
#define ADMIN_STATE_PARAMS 192

/* A database's flags in the record. */
enum admin_db_flag { ADMIN_DB_PAUSED = 1u << 0, ADMIN_DB_DISABLED = 1u << 1 };

/* Supervisor, before any fork. */
void admin_state_create(void);
void admin_state_destroy(void);

/* Sets (on) or clears one flag of database db; db NULL: clears it for every database. */
void admin_state_db_flag(const char *db, enum admin_db_flag flag, bool on);
/* SET key = value was applied (the last value of a key wins). */
void admin_state_param(const char *key, const char *value);
/* A reload: the configuration is the file's again. */
void admin_state_forget_params(void);

/* The record, for a restarted worker: each database with a flag; each setting SET, with its last value. */
void admin_state_each_db(void (*fn)(const char *db, unsigned flags, void *arg), void *arg);
void admin_state_each_param(void (*fn)(const char *key, const char *value, void *arg), void *arg);

#endif
