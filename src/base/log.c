/*
 * log.c - writes log lines to stderr, the logfile and syslog.
 *
 * Owns the only logging state in the process (file handle, verbosity). It
 * must not call into any other pgvalve module: every module logs.
 */
#include "common.h"
#include "log.h"

#include <stdarg.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include <sys/time.h>
#include <fcntl.h>

static struct {
	int fd;				/* the logfile, -1 if none */
	char *path;
	bool to_stderr;
	bool use_syslog;
	char syslog_ident[64];		/* openlog() keeps the pointer: it must outlive the config */
	int verbose;
	int pid;			/* cached: getpid() is a system call */
	char tag[16];			/* "[w2] " in a worker process, else "" */
	time_t stamp_sec;		/* the second the cached stamp text is for */
	char stamp[32];			/* "YYYY-MM-DD HH:MM:SS." */
	uint32_t stamp_len;
	char pid_text[24];		/* " UTC [<pid>] ", for log_state.pid */
	uint32_t pid_text_len;
} log_state = { .fd = -1, .to_stderr = true };

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

static int open_logfile(const char *path, bool existing_only)
{
	return open(path, O_WRONLY | O_APPEND | O_CLOEXEC | (existing_only ? 0 : O_CREAT), 0640);
}

/* The process id and the text around it in every line. */
static void set_pid(void)
{
	log_state.pid = (int)getpid();
	log_state.pid_text_len = (uint32_t)snprintf(log_state.pid_text, sizeof(log_state.pid_text), " UTC [%d] ",
						    log_state.pid);
}

int log_setup(const struct log_settings *s)
{
	int fd = -1;
	if (s->logfile && s->logfile[0]) {
		fd = open_logfile(s->logfile, s->existing_only);
		if (fd < 0)
			return -1;
	}
	if (log_state.fd >= 0)
		close(log_state.fd);
	free(log_state.path);
	log_state.fd = fd;
	/* strdup, not xstrdup: util.c's allocation failures call die() here, so log.c calls nothing of util.c */
	log_state.path = (s->logfile && s->logfile[0]) ? strdup(s->logfile) : NULL;
	if (s->logfile && s->logfile[0] && !log_state.path)
		die("out of memory duplicating a string");
	log_state.to_stderr = s->to_stderr;
	log_state.verbose = s->verbose;
	set_pid();
	if (log_state.use_syslog)
		closelog();
	log_state.use_syslog = s->use_syslog;
	if (s->use_syslog) {
		snprintf(log_state.syslog_ident, sizeof(log_state.syslog_ident), "%s",
			 s->syslog_ident && s->syslog_ident[0] ? s->syslog_ident : "pgvalve");
		openlog(log_state.syslog_ident, LOG_PID, syslog_facility_code(s->syslog_facility));
	}
	return 0;
}

void log_set_process(const char *tag)
{
	set_pid();
	if (tag && tag[0])
		snprintf(log_state.tag, sizeof(log_state.tag), "[%s] ", tag);
	else
		log_state.tag[0] = '\0';
}

void log_reopen(void)
{
	if (!log_state.path)
		return;
	int fd = open_logfile(log_state.path, false);
	if (fd < 0) {
		log_error("cannot reopen logfile \"%s\": %s", log_state.path, strerror(errno));
		return;
	}
	close(log_state.fd);
	log_state.fd = fd;
}

void log_close(void)
{
	if (log_state.fd >= 0)
		close(log_state.fd);
	log_state.fd = -1;
	free(log_state.path);
	log_state.path = NULL;
}

bool log_enabled(enum log_level level)
{
	if (level <= LOG_LEVEL_INFO)
		return true;
	return (int)level - (int)LOG_LEVEL_INFO <= log_state.verbose;
}

static void write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return;	/* nowhere to report a failing log */
		}
		buf += n;
		len -= (size_t)n;
	}
}

size_t log_escape(char *dst, size_t size, const char *src)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)src;
	size_t n = 0;

	if (size == 0)
		return 0;
	for (; *p; p++) {
		char esc[5];
		size_t elen = 0;
		unsigned c = *p;
		bool c1 = c == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f;	/* U+0080..U+009F (NEL among them) */
		if (c1)
			c = *++p;	/* escaped as its code point */
		if (c == '\n' || c == '\r' || c == '\t') {
			esc[elen++] = '\\';
			esc[elen++] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
		} else if (c < 0x20 || c == 0x7f || c1) {
			esc[elen++] = '\\';
			esc[elen++] = 'x';
			esc[elen++] = hex[c >> 4];
			esc[elen++] = hex[c & 15];
		} else {
			esc[elen++] = (char)c;
		}
		if (n + elen >= size)
			break;
		memcpy(dst + n, esc, elen);
		n += elen;
	}
	dst[n] = '\0';
	return n;
}

/* Whether log_escape() would change the text (the common case: no). */
static bool needs_escape(const char *text, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)text[i];
		if (c < 0x20 || c == 0x7f || c == 0xc2)
			return true;
	}
	return false;
}

static size_t put_text(char *at, const char *text, size_t len)
{
	memcpy(at, text, len);
	return len;
}

/*
 * "YYYY-MM-DD HH:MM:SS.mmm UTC [pid] LEVEL [tag] " into line; `*lvl` gets
 * where LEVEL starts (syslog stamps lines itself). Pieces are cached, as
 * each connection logs two lines: no printf here.
 */
static size_t put_header(char *line, enum log_level level, size_t *lvl)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	if (tv.tv_sec != log_state.stamp_sec || !log_state.stamp_len) {
		struct tm tm;
		gmtime_r(&tv.tv_sec, &tm);
		log_state.stamp_len = (uint32_t)strftime(log_state.stamp, sizeof(log_state.stamp), "%Y-%m-%d %H:%M:%S.",
							 &tm);
		log_state.stamp_sec = tv.tv_sec;
	}
	if (!log_state.pid)
		set_pid();
	size_t n = put_text(line, log_state.stamp, log_state.stamp_len);
	int ms = (int)(tv.tv_usec / 1000);
	line[n++] = (char)('0' + ms / 100);
	line[n++] = (char)('0' + ms / 10 % 10);
	line[n++] = (char)('0' + ms % 10);
	n += put_text(line + n, log_state.pid_text, log_state.pid_text_len);
	*lvl = n;
	n += put_text(line + n, level_names[level], strlen(level_names[level]));
	line[n++] = ' ';
	n += put_text(line + n, log_state.tag, strlen(log_state.tag));
	return n;
}

/*
 * One line, formatted once, written whole to each destination. Control
 * characters are escaped here, at the one sink every message passes, so
 * no client-supplied name or value can start a forged line.
 */
static PRINTF_LIKE(2, 0) void log_vmsg(enum log_level level, const char *fmt, va_list ap)
{
	char line[2400];
	int save_errno = errno;
	size_t lvl;
	size_t head = put_header(line, level, &lvl);
	size_t room = sizeof(line) - head - 1;	/* the newline's byte kept */
	int m = vsnprintf(line + head, room, fmt, ap);
	size_t len = m < 0 ? 0 : MIN((size_t)m, room - 1);
	if (needs_escape(line + head, len)) {
		char msg[2048];
		size_t keep = MIN(len, sizeof(msg) - 1);
		memcpy(msg, line + head, keep);
		msg[keep] = '\0';
		len = log_escape(line + head, room, msg);
	}
	len += head;
	line[len++] = '\n';

	if (log_state.to_stderr)
		write_all(STDERR_FILENO, line, len);
	if (log_state.fd >= 0)
		write_all(log_state.fd, line, len);
	if (log_state.use_syslog) {
		line[len - 1] = '\0';
		syslog(level_syslog[level], "%s", line + lvl);
	}
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
