/*
 * config_value.h - the value parsers of the config loader (config_value.c).
 *
 * Each parser reads the whole string s (no surrounding blanks, no trailing
 * text) the way PgBouncer reads that kind of value, stores it in *out and
 * returns 0; or leaves *out alone, writes why it refused into why (when why
 * is not NULL) and returns -1. Pure: no globals, no logging.
 *
 * config_set_param() and config_format_value() (config.h) are built on
 * these; config.c uses them for the [databases]/[users]/[peers]
 * connection strings.
 */
#ifndef PGVALVE_CONFIG_VALUE_H
#define PGVALVE_CONFIG_VALUE_H

#include "common.h"

/* snprintf into buf, which may be NULL (or size 0): then nothing. */
void config_errfmt(char *buf, size_t size, const char *fmt, ...) PRINTF_LIKE(3, 4);

/* A decimal integer in [lo, hi]. */
int config_parse_int(const char *s, long lo, long hi, int *out, char *why, size_t whysize);

/* Seconds, fractions allowed ("0.5"), at least min_seconds; no unit suffix. */
int config_parse_time(const char *s, long min_seconds, usec_t *out, char *why, size_t whysize);

/* Bytes: digits, then optionally B, kB, MB, GB or TB (1024 apart, any case). */
int config_parse_size(const char *s, long long *out, char *why, size_t whysize);

/*
 * One of names (NULL-terminated, any case): its index. Bit i of unsettable
 * set: names[i] is refused (and not offered in the message).
 */
int config_parse_enum(const char *s, const char *const *names, unsigned unsettable,
		      int *out, char *why, size_t whysize);

#endif
