/*
 * pgoptions.c - parses the `options` startup parameter (see pgoptions.h).
 *
 * Owns nothing but the copy of the words it hands back. PostgreSQL splits
 * the string the same way (pg_split_opts) before it reads its switches;
 * a pooler can only honour the settings among them, as PgBouncer does.
 */
#include "common.h"
#include "pgoptions.h"

#include <ctype.h>

static const char MALFORMED[] =
	"unsupported options startup parameter: only '-c config=val' and '--config=val' are allowed";

/* The next word at *p into *out (NUL-terminated); false at the end of the string. */
static bool next_word(const char **p, char **out)
{
	const char *s = *p;
	while (*s && isspace((unsigned char)*s))
		s++;
	if (!*s) {
		*p = s;
		return false;
	}
	char *w = *out;
	while (*s && !isspace((unsigned char)*s)) {
		if (*s == '\\' && s[1])
			s++;
		*w++ = *s++;
	}
	*w++ = '\0';
	*out = w;
	*p = s;
	return true;
}

/* "name=value" into the setting list; false if it is not one. */
static bool add_setting(struct pgoptions *opts, char *setting)
{
	char *eq = strchr(setting, '=');
	if (!eq || eq == setting || opts->count >= PGOPTIONS_MAX)
		return false;
	*eq = '\0';
	for (char *c = setting; *c; c++)
		if (*c == '-')
			*c = '_';
	opts->names[opts->count] = setting;
	opts->values[opts->count] = eq + 1;
	opts->count++;
	return true;
}

bool pgoptions_parse(const char *options, struct pgoptions *opts, char *err, size_t errsize)
{
	memset(opts, 0, sizeof(*opts));
	/* Words are never longer than the text they come from: one buffer holds them all. */
	opts->text = xmalloc(strlen(options) * 2 + 2);
	char *out = opts->text;
	const char *p = options;
	char *word = out;

	while (next_word(&p, &out)) {
		bool ok;
		if (strcmp(word, "-c") == 0) {
			char *setting = out;
			ok = next_word(&p, &out) && add_setting(opts, setting);
		} else if (strncmp(word, "-c", 2) == 0) {
			ok = add_setting(opts, word + 2);
		} else if (strncmp(word, "--", 2) == 0) {
			ok = add_setting(opts, word + 2);
		} else {
			ok = false;
		}
		if (!ok) {
			snprintf(err, errsize, "%s", opts->count >= PGOPTIONS_MAX ? "too many settings in options" :
				 MALFORMED);
			pgoptions_free(opts);
			return false;
		}
		word = out;
	}
	return true;
}

void pgoptions_free(struct pgoptions *opts)
{
	free(opts->text);
	memset(opts, 0, sizeof(*opts));
}
