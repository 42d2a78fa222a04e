/*
 * pgoptions.h - the `options` startup parameter, read as PostgreSQL reads
 * it: words split on white space, a backslash taking the next character
 * literally, and only settings: `-c name=value`, `-cname=value` or
 * `--name=value` (a dash in a name stands for an underscore).
 *
 * Pure: no connection state, no logging. The caller decides what each
 * setting means (client.c: tracked parameters are applied,
 * ignore_startup_parameters are skipped, anything else is refused).
 */
#ifndef PGVALVE_PGOPTIONS_H
#define PGVALVE_PGOPTIONS_H

#include "common.h"

#define PGOPTIONS_MAX 32	/* settings in one options string */

struct pgoptions {
	int count;
	const char *names[PGOPTIONS_MAX];
	const char *values[PGOPTIONS_MAX];
	char *text;		/* the words, NUL-separated; names and values point into it */
};

/*
 * Parses options into opts (free with pgoptions_free). Returns false with
 * PgBouncer's message in err when a word is not a setting or there are
 * more than PGOPTIONS_MAX.
 */
bool pgoptions_parse(const char *options, struct pgoptions *opts, char *err, size_t errsize);
void pgoptions_free(struct pgoptions *opts);

#endif
