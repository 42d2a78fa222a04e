/*
 * config_value.c - one setting's value: read from text as PgBouncer reads
 * it (integers, seconds, sizes, booleans, enum names, octal modes) into
 * its field of struct config, and formatted back for SHOW CONFIG.
 *
 * Owns: the value parsers and formatters that the parameter table, SET,
 * SHOW CONFIG and the [databases]/[users]/[peers] connection strings share.
 *
 * Must not touch: anything but the one field it is given. No globals, no
 * logging; a bad value is an error message in the caller's buffer.
 */
#include "common.h"
#include "config.h"
#include "config_value.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <strings.h>

/* Times above this many seconds (about 31,700 years) would overflow usec_t arithmetic elsewhere. */
#define MAX_TIME_SECONDS 1e12

void config_errfmt(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	if (!buf || !size)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, size, fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------------ value parsers */

/*
 * base: 10, or 0 for the main section's numbers, read as PgBouncer reads
 * them (strtol's prefixes: 0x1000 is 4096, 010 is 8).
 */
static int parse_int_base(const char *s, int base, long lo, long hi, int *out, char *why, size_t whysize)
{
	char *end;
	long v;

	if (!*s || isspace((unsigned char)*s)) {
		config_errfmt(why, whysize, "not an integer");
		return -1;
	}
	errno = 0;
	v = strtol(s, &end, base);
	if (*end != '\0') {
		config_errfmt(why, whysize, "not an integer");
		return -1;
	}
	if (errno == ERANGE || v < lo || v > hi) {
		if (hi == INT_MAX)
			config_errfmt(why, whysize, "must be at least %ld", lo);
		else
			config_errfmt(why, whysize, "must be between %ld and %ld", lo, hi);
		return -1;
	}
	*out = (int)v;
	return 0;
}

int config_parse_int(const char *s, long lo, long hi, int *out, char *why, size_t whysize)
{
	return parse_int_base(s, 10, lo, hi, out, why, whysize);
}

/* Seconds, fractions allowed ("0.5"), no unit suffix (PgBouncer takes none). */
int config_parse_time(const char *s, long min_seconds, usec_t *out, char *why, size_t whysize)
{
	char *end;
	double v;

	if (!*s || isspace((unsigned char)*s)) {
		config_errfmt(why, whysize, "not a number of seconds");
		return -1;
	}
	errno = 0;
	v = strtod(s, &end);
	if (*end != '\0' || !isfinite(v)) {
		config_errfmt(why, whysize, "not a number of seconds");
		return -1;
	}
	if (v < 0 || v < (double)min_seconds) {
		config_errfmt(why, whysize, "must be at least %ld", min_seconds);
		return -1;
	}
	if (errno == ERANGE && v != 0) {
		config_errfmt(why, whysize, "out of range");
		return -1;
	}
	if (v > MAX_TIME_SECONDS) {
		config_errfmt(why, whysize, "too large");
		return -1;
	}
	*out = (usec_t)(v * (double)USEC_PER_SEC + 0.5);	/* v >= 0: rounds to nearest */
	return 0;
}

/*
 * A number of bytes: digits, then optionally one of PostgreSQL's units
 * (B, kB, MB, GB, TB; 1024 apart; any case). pgvalve's max_replica_lag.
 */
int config_parse_size(const char *s, long long *out, char *why, size_t whysize)
{
	static const char *const units[] = { "B", "kB", "MB", "GB", "TB" };
	char *end;

	if (!isdigit((unsigned char)*s)) {
		config_errfmt(why, whysize, "not a number of bytes (a unit may follow: kB, MB, GB, TB)");
		return -1;
	}
	errno = 0;
	long long v = strtoll(s, &end, 10);
	while (*end == ' ')
		end++;
	long long scale = 1;
	if (*end) {
		size_t u = 0;
		while (u < ARRAY_SIZE(units) && strcasecmp(end, units[u]) != 0)
			u++;
		if (u == ARRAY_SIZE(units)) {
			config_errfmt(why, whysize, "not a number of bytes (a unit may follow: kB, MB, GB, TB)");
			return -1;
		}
		scale = 1LL << (10 * u);
	}
	if (errno == ERANGE || v > LLONG_MAX / scale) {
		config_errfmt(why, whysize, "too large");
		return -1;
	}
	*out = v * scale;
	return 0;
}

/* PgBouncer stores its booleans as ints, so any integer works (non-zero = on); words too. */
static int parse_bool(const char *s, bool *out, char *why, size_t whysize)
{
	static const char *const yes[] = { "true", "yes", "on" };
	static const char *const no[] = { "false", "no", "off" };
	int n;

	for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	if (parse_int_base(s, 0, INT_MIN, INT_MAX, &n, NULL, 0) == 0) {
		*out = n != 0;
		return 0;
	}
	config_errfmt(why, whysize, "expected a boolean (1/0, true/false, yes/no, on/off)");
	return -1;
}

int config_parse_enum(const char *s, const char *const *names, unsigned unsettable,
		      int *out, char *why, size_t whysize)
{
	char list[160] = "";
	size_t used = 0;

	for (int i = 0; names[i]; i++) {
		if (unsettable & (1u << i))
			continue;
		if (strcasecmp(s, names[i]) == 0) {
			*out = i;
			return 0;
		}
		if (used < sizeof(list))
			used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", used ? ", " : "", names[i]);
	}
	config_errfmt(why, whysize, "expected one of: %s", list);
	return -1;
}

static int parse_octal(const char *s, int hi, int *out, char *why, size_t whysize)
{
	long v = 0;

	if (!*s) {
		config_errfmt(why, whysize, "not an octal number");
		return -1;
	}
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '7') {
			config_errfmt(why, whysize, "not an octal number");
			return -1;
		}
		v = v * 8 + (*p - '0');
		if (v > hi) {
			config_errfmt(why, whysize, "must be at most %04o", (unsigned)hi);
			return -1;
		}
	}
	*out = (int)v;
	return 0;
}

/* ------------------------------------------------------------------ set / format */

int config_set_param(struct config *cfg, const struct param_def *p, const char *value,
		     char *errbuf, size_t errsize)
{
	char *field = (char *)cfg + p->offset;
	int iv;
	bool bv;
	usec_t tv;

	if (!value)
		value = "";
	switch (p->type) {
	case PARAM_STRING: {
		char *copy = xstrdup(value);	/* value may be the field's own string */
		free(*(char **)field);
		*(char **)field = copy;
		return 0;
	}
	case PARAM_INT:
		if (p->auto_is_zero && strcasecmp(value, "auto") == 0) {
			*(int *)field = 0;
			return 0;
		}
		if (parse_int_base(value, 0, p->min_value, p->max_value, &iv, errbuf, errsize) < 0)
			return -1;
		*(int *)field = iv;
		return 0;
	case PARAM_BOOL:
		if (parse_bool(value, &bv, errbuf, errsize) < 0)
			return -1;
		*(bool *)field = bv;
		return 0;
	case PARAM_TIME:
		if (config_parse_time(value, p->min_value, &tv, errbuf, errsize) < 0)
			return -1;
		*(usec_t *)field = tv;
		return 0;
	case PARAM_ENUM:
		if (config_parse_enum(value, p->enum_names, p->enum_unsettable, &iv, errbuf, errsize) < 0)
			return -1;
		*(int *)field = iv;
		return 0;
	case PARAM_OCTAL:
		if (parse_octal(value, p->max_value, &iv, errbuf, errsize) < 0)
			return -1;
		*(int *)field = iv;
		return 0;
	}
	config_errfmt(errbuf, errsize, "unknown parameter type");
	return -1;
}

/* Seconds with as many decimals as needed, exact: "3600", "0.5", "1.000001". */
static void format_time(usec_t v, char *buf, size_t size)
{
	const char *sign = v < 0 ? "-" : "";
	uint64_t a = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	uint64_t secs = a / (uint64_t)USEC_PER_SEC;
	unsigned frac = (unsigned)(a % (uint64_t)USEC_PER_SEC);
	int digits = 6;

	if (frac == 0) {
		snprintf(buf, size, "%s%llu", sign, (unsigned long long)secs);
		return;
	}
	while (frac % 10 == 0) {
		frac /= 10;
		digits--;
	}
	snprintf(buf, size, "%s%llu.%0*u", sign, (unsigned long long)secs, digits, frac);
}

void config_format_value(const struct config *cfg, const struct param_def *p, char *buf, size_t size)
{
	const char *field = (const char *)cfg + p->offset;
	int iv;

	if (!size)
		return;
	switch (p->type) {
	case PARAM_STRING:
		snprintf(buf, size, "%s", *(char *const *)field ? *(char *const *)field : "");
		return;
	case PARAM_INT:
		if (p->auto_is_zero && *(const int *)field == 0)
			snprintf(buf, size, "auto");
		else
			snprintf(buf, size, "%d", *(const int *)field);
		return;
	case PARAM_BOOL:
		snprintf(buf, size, "%d", *(const bool *)field ? 1 : 0);
		return;
	case PARAM_TIME:
		format_time(*(const usec_t *)field, buf, size);
		return;
	case PARAM_ENUM:
		iv = *(const int *)field;
		for (int i = 0; p->enum_names[i]; i++) {
			if (i == iv) {
				snprintf(buf, size, "%s", p->enum_names[i]);
				return;
			}
		}
		snprintf(buf, size, "INVALID");
		return;
	case PARAM_OCTAL:
		snprintf(buf, size, "%04o", (unsigned)*(const int *)field);
		return;
	}
	buf[0] = '\0';
}

