/*
 * log.h - the process log: stderr and/or logfile and/or syslog.
 *
 * Line format follows PgBouncer so operators' greps keep working:
 *   2026-11-22 12:00:00.123 UTC [1234] LOG C-0x55d0c0de: db/user@127.0.0.1:5432 login attempt: ...
 * A worker of a multi-process instance puts its number after the level:
 *   2026-11-22 12:00:00.123 UTC [1235] LOG [w2] C-0x55d0c0de: ...
 * The logging state (file, levels) is one of the few process globals; it is
 * set by log_setup() from main and by reload, and read everywhere.
 */
#ifndef PGVALVE_LOG_H
#define PGVALVE_LOG_H

#include "common.h"

enum log_level {
	LOG_LEVEL_FATAL = 0,
	LOG_LEVEL_ERROR,
	LOG_LEVEL_WARNING,
	LOG_LEVEL_INFO,		/* printed as "LOG" */
	LOG_LEVEL_DEBUG,	/* -v */
	LOG_LEVEL_NOISE,	/* -v -v */
};

struct log_settings {
	const char *logfile;	/* "" = none */
	bool to_stderr;		/* false with -q or when daemonized */
	bool use_syslog;
	const char *syslog_ident;
	const char *syslog_facility;
	int verbose;		/* 0: INFO, 1: DEBUG, 2+: NOISE */
	bool existing_only;	/* append to the logfile only if it exists (root at start-up: no root-owned new file) */
};

/* (Re)opens the log destinations. Returns -1 and sets errno if the logfile cannot be opened. */
int log_setup(const struct log_settings *settings);
/*
 * After fork: the new pid for the line header, and a tag put in front of
 * every message ("w2" gives "... [pid] LOG [w2] message"); NULL for none.
 */
void log_set_process(const char *tag);
/* Reopen the logfile (after rotation); called on SIGHUP. */
void log_reopen(void);
void log_close(void);
bool log_enabled(enum log_level level);
/*
 * Copies src into dst (size bytes, always terminated) with control
 * characters escaped: \n \r \t, other C0/C1 controls and DEL as \xHH.
 * Every log line goes through it. Returns the length written.
 */
size_t log_escape(char *dst, size_t size, const char *src);

void log_msg(enum log_level level, const char *fmt, ...) PRINTF_LIKE(2, 3);

#define log_fatal(...)   log_msg(LOG_LEVEL_FATAL, __VA_ARGS__)
#define log_error(...)   log_msg(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warning(...) log_msg(LOG_LEVEL_WARNING, __VA_ARGS__)
#define log_info(...)    log_msg(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...)   do { if (log_enabled(LOG_LEVEL_DEBUG)) log_msg(LOG_LEVEL_DEBUG, __VA_ARGS__); } while (0)
#define log_noise(...)   do { if (log_enabled(LOG_LEVEL_NOISE)) log_msg(LOG_LEVEL_NOISE, __VA_ARGS__); } while (0)

/* Abort with a FATAL line: for broken invariants and start-up failures. */
void die(const char *fmt, ...) PRINTF_LIKE(1, 2) __attribute__((noreturn));

#endif
