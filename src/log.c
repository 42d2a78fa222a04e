/*
 * log.c - writes log lines to stderr, the logfile and syslog.
 *
 * Owns the only logging state in the process (file handle, verbosity). It
 * must not call into any other pgvalve module: every module logs.
 */
#include "pgvalve/common.h"
#include "pgvalve/log.h"

#include <stdarg.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include <sys/time.h>

static struct {
	FILE *file;
	char *path;
	bool to_stderr;
	bool use_syslog;
	char syslog_ident[64];		/* openlog() keeps the pointer: it must outlive the config */
	int verbose;
} log_state = { .to_stderr = true };

static const char *level_names[] = { "FATAL", "ERROR", "WARNING", "LOG", "DEBUG", "NOISE" };
static const int level_syslog[] = { LOG_CRIT, LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG, LOG_DEBUG };

static int syslog_facility_code(const char *name)
{
	static const struct { const char *name; int code; } facilities[] = {
		{ "auth", LOG_AUTH }, { "authpriv", LOG_AUTHPRIV }, { "daemon", LOG_DAEMON },
		{ "user", LOG_USER }, { "local0", LOG_LOCAL0 }, { "local1", LOG_LOCAL1 },
		{ "local2", LOG_LOCAL2 }, { "local3", LOG_LOCAL3 }, { "local4", LOG_LOCAL4 },
		{ "local5", LOG_LOCAL5 }, { "local6", LOG_LOCAL6 }, { "local7", LOG_LOCAL7 },
	};
	for (size_t i = 0; name && i < ARRAY_SIZE(facilities); i++)
		if (strcmp(name, facilities[i].name) == 0)
			return facilities[i].code;
	return LOG_DAEMON;
}

int log_setup(const struct log_settings *s)
{
	FILE *f = NULL;
	if (s->logfile && s->logfile[0]) {
		f = fopen(s->logfile, "a");
		if (!f)
			return -1;
		setvbuf(f, NULL, _IOLBF, 0);
	}
	if (log_state.file)
		fclose(log_state.file);
	free(log_state.path);
	log_state.file = f;
	log_state.path = (s->logfile && s->logfile[0]) ? xstrdup(s->logfile) : NULL;
	log_state.to_stderr = s->to_stderr;
	log_state.verbose = s->verbose;
	if (log_state.use_syslog)
		closelog();
	log_state.use_syslog = s->use_syslog;
	if (s->use_syslog) {
		strlcpy_s(log_state.syslog_ident, s->syslog_ident && s->syslog_ident[0] ? s->syslog_ident : "pgvalve",
			  sizeof(log_state.syslog_ident));
		openlog(log_state.syslog_ident, LOG_PID, syslog_facility_code(s->syslog_facility));
	}
	return 0;
}

void log_reopen(void)
{
	if (!log_state.path)
		return;
	FILE *f = fopen(log_state.path, "a");
	if (!f) {
		log_error("cannot reopen logfile \"%s\": %s", log_state.path, strerror(errno));
		return;
	}
	setvbuf(f, NULL, _IOLBF, 0);
	fclose(log_state.file);
	log_state.file = f;
}

void log_close(void)
{
	if (log_state.file)
		fclose(log_state.file);
	log_state.file = NULL;
	free(log_state.path);
	log_state.path = NULL;
}

bool log_enabled(enum log_level level)
{
	if (level <= LOG_LEVEL_INFO)
		return true;
	return (int)level - (int)LOG_LEVEL_INFO <= log_state.verbose;
}

static void log_vmsg(enum log_level level, const char *fmt, va_list ap)
{
	char msg[2048];
	char stamp[64];
	struct timeval tv;
	struct tm tm;
	int save_errno = errno;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	size_t n = strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", &tm);
	snprintf(stamp + n, sizeof(stamp) - n, ".%03d UTC", (int)(tv.tv_usec / 1000));

	if (log_state.to_stderr)
		fprintf(stderr, "%s [%d] %s %s\n", stamp, (int)getpid(), level_names[level], msg);
	if (log_state.file)
		fprintf(log_state.file, "%s [%d] %s %s\n", stamp, (int)getpid(), level_names[level], msg);
	if (log_state.use_syslog)
		syslog(level_syslog[level], "%s %s", level_names[level], msg);
	errno = save_errno;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;
	if (!log_enabled(level))
		return;
	va_start(ap, fmt);
	log_vmsg(level, fmt, ap);
	va_end(ap);
}

void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vmsg(LOG_LEVEL_FATAL, fmt, ap);
	va_end(ap);
	exit(1);
}
